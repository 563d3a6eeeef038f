// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Internal to the bootstrap (bootstrap.cc, bootstrap_root.cc): the fixed-layout records the root
// and the ranks exchange. docs/PROTOCOL.md, section "Bootstrap", is the normative description;
// keep both in step. All integers are little-endian (WireWriter/WireReader); addresses use the
// 20-byte SocketAddress encoding.

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "common/result.h"
#include "common/socket.h"
#include "common/wire.h"

namespace mixccl::bootstrap {

constexpr uint32_t kProtocolVersion = 1;
constexpr uint32_t kIdMagic = 0x4449584d;     // bytes "MXID"
constexpr uint32_t kHelloMagic = 0x4842584d;  // bytes "MXBH"
constexpr uint32_t kReplyMagic = 0x5242584d;  // bytes "MXBR"
constexpr uint32_t kFrameMagic = 0x4642584d;  // bytes "MXBF"

// Hard limits a receiver checks before it allocates anything for a length it was sent.
constexpr uint32_t kMaxRanks = 1u << 20;
constexpr uint64_t kMaxFrameBytes = 1ull << 30;
constexpr uint32_t kMaxReplyMessage = 1024;

enum class HelloKind : uint32_t { kRegister = 1, kPeer = 2 };

// First 64 bytes on every bootstrap connection: proves the sender holds the unique id.
struct Hello {
  static constexpr size_t kBytes = 64;
  uint32_t magic = kHelloMagic;
  uint32_t version = kProtocolVersion;
  uint64_t commHash = 0;
  uint8_t secret[16] = {};
  HelloKind kind = HelloKind::kPeer;
  uint32_t rank = 0;
  uint32_t nranks = 0;
  SocketAddress address;  // the sender's bootstrap listen address (kRegister only)

  void encode(uint8_t out[kBytes]) const {
    WireWriter w(out, kBytes);
    w.u32(magic);
    w.u32(version);
    w.u64(commHash);
    w.bytes(secret, 16, 16);
    w.u32(static_cast<uint32_t>(kind));
    w.u32(rank);
    w.u32(nranks);
    uint8_t a[SocketAddress::kWireBytes] = {};
    if (kind == HelloKind::kRegister) address.encode(a);
    w.bytes(a, sizeof(a), sizeof(a));
  }
  // Never fails: fields are checked by the receiver, which decides how to react.
  static Hello decode(const uint8_t in[kBytes], bool* addressOk) {
    Hello h;
    WireReader r(in, kBytes);
    h.magic = r.u32();
    h.version = r.u32();
    h.commHash = r.u64();
    memcpy(h.secret, r.here(), 16);
    r.skip(16);
    h.kind = static_cast<HelloKind>(r.u32());
    h.rank = r.u32();
    h.nranks = r.u32();
    uint8_t a[SocketAddress::kWireBytes];
    memcpy(a, r.here(), sizeof(a));
    *addressOk = h.kind != HelloKind::kRegister || SocketAddress::decode(a, &h.address) == Result::kSuccess;
    return h;
  }
};

// Root -> rank: status is a Result code; payload is the address table (status 0) or a message.
struct ReplyHeader {
  static constexpr size_t kBytes = 16;
  uint32_t magic = kReplyMagic;
  uint32_t status = 0;
  uint32_t nranks = 0;
  uint32_t payloadBytes = 0;

  void encode(uint8_t out[kBytes]) const {
    WireWriter w(out, kBytes);
    w.u32(magic);
    w.u32(status);
    w.u32(nranks);
    w.u32(payloadBytes);
  }
  static ReplyHeader decode(const uint8_t in[kBytes]) {
    WireReader r(in, kBytes);
    ReplyHeader h;
    h.magic = r.u32();
    h.status = r.u32();
    h.nranks = r.u32();
    h.payloadBytes = r.u32();
    return h;
  }
};

// Rank -> rank, after the hello: one header per message, then `length` payload bytes.
enum class Channel : uint32_t { kUser = 0, kAllGather = 1, kBarrier = 2 };

struct FrameHeader {
  static constexpr size_t kBytes = 24;
  uint32_t magic = kFrameMagic;
  Channel channel = Channel::kUser;
  uint32_t tag = 0;
  uint64_t length = 0;

  void encode(uint8_t out[kBytes]) const {
    WireWriter w(out, kBytes);
    w.u32(magic);
    w.u32(static_cast<uint32_t>(channel));
    w.u32(tag);
    w.u32(0);  // reserved
    w.u64(length);
  }
  static FrameHeader decode(const uint8_t in[kBytes]) {
    WireReader r(in, kBytes);
    FrameHeader h;
    h.magic = r.u32();
    h.channel = static_cast<Channel>(r.u32());
    h.tag = r.u32();
    r.u32();
    h.length = r.u64();
    return h;
  }
};

// Compares secrets in time independent of where they differ.
inline bool sameSecret(const uint8_t a[16], const uint8_t b[16]) {
  uint8_t diff = 0;
  for (int i = 0; i < 16; ++i) diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

// The checks a receiver applies to what it was sent, as pure functions (no sockets, no logging)
// so that bootstrap.cc, bootstrap_root.cc and the fuzz targets in tests/fuzz/ share one copy.

// A rank's verdict on the hello of an incoming peer connection: nullptr when it may be trusted
// as rank h.rank of this job, else why not (the caller closes the connection).
inline const char* checkPeerHello(const Hello& h, uint64_t commHash, const uint8_t secret[16], int rank, int nranks) {
  if (h.magic != kHelloMagic || h.version != kProtocolVersion) {
    return "is not a mixccl bootstrap hello of this protocol version";
  }
  if (h.commHash != commHash || !sameSecret(h.secret, secret)) {
    return "presents another unique id (a stale or foreign job?)";
  }
  if (h.kind != HelloKind::kPeer || h.nranks != static_cast<uint32_t>(nranks) ||
      h.rank >= static_cast<uint32_t>(nranks) || static_cast<int>(h.rank) == rank) {
    return "claims an impossible rank or nranks";
  }
  return nullptr;
}

// A frame header may be acted on (its length allocated) only if this holds.
inline bool frameHeaderOk(const FrameHeader& f) { return f.magic == kFrameMagic && f.length <= kMaxFrameBytes; }

// The root's verdict on a complete registration hello. kNotHello, kForeignJob and kMalformed
// close the connection silently (the sender may not be a rank of this job); kReject answers
// with `why` first, since the sender proved it belongs to the job but conflicts with it.
struct RegistrationCheck {
  enum class Verdict { kAccept, kNotHello, kForeignJob, kMalformed, kReject };
  Verdict verdict = Verdict::kAccept;
  char why[512] = {};
};
// jobNranks is 0 until the first accepted registration fixes it. takenBy(rank) is only called
// for rank < jobNranks and says where that slot was registered from, or nullptr while it is free.
// `from` names the sender in messages.
template <typename TakenBy>
RegistrationCheck checkRegistration(const Hello& h, bool addressOk, uint64_t commHash, const uint8_t secret[16],
                                    uint32_t jobNranks, const TakenBy& takenBy, const char* from) {
  RegistrationCheck c;
  using V = RegistrationCheck::Verdict;
  if (h.magic != kHelloMagic || h.version != kProtocolVersion) {
    c.verdict = V::kNotHello;
  } else if (h.commHash != commHash || !sameSecret(h.secret, secret)) {
    c.verdict = V::kForeignJob;
  } else if (h.kind != HelloKind::kRegister || !addressOk) {
    c.verdict = V::kMalformed;
  } else if (h.nranks == 0 || h.nranks > kMaxRanks) {
    snprintf(c.why, sizeof(c.why), "nranks %u is out of range (1..%u)", h.nranks, kMaxRanks);
  } else if (jobNranks != 0 && h.nranks != jobNranks) {
    snprintf(c.why, sizeof(c.why),
             "rank %u says nranks is %u but earlier ranks said %u; pass the same nranks on every rank", h.rank,
             h.nranks, jobNranks);
  } else if (h.rank >= h.nranks) {
    snprintf(c.why, sizeof(c.why), "rank %u is out of range for nranks %u", h.rank, h.nranks);
  } else if (jobNranks != 0) {
    if (const char* first = takenBy(h.rank); first != nullptr) {
      snprintf(c.why, sizeof(c.why),
               "rank %u registered twice (first from %s, again from %s); give each process its own rank", h.rank, first,
               from);
    }
  }
  if (c.verdict == V::kAccept && c.why[0] != '\0') c.verdict = V::kReject;
  return c;
}

// Non-blocking raw I/O without logging (the callers word their own messages): returns 0 (moved
// what it could, maybe nothing), -1 on EOF, else errno.
int readAvailable(int fd, void* data, size_t bytes, size_t* done);
int writeAvailable(int fd, const void* data, size_t bytes, size_t* done);

// Binds a listener on `addr` (port 0 = any; receives the bound address) and starts the detached
// root thread, which serves one job (identified by commHash + secret) until every rank has the
// address table or MIXCCL_TIMEOUT passes.
Result startRoot(SocketAddress* addr, uint64_t commHash, const uint8_t secret[16]);

}  // namespace mixccl::bootstrap
