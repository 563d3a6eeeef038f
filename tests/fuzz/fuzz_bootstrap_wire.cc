// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
//
// Fuzz target: the fixed-layout bootstrap records a rank decodes from bytes it was sent
// (src/core/bootstrap_wire.h, bootstrap_root.cc, peer_info.cc, SocketAddress). Byte 0 picks the
// record (low 3 bits) and, with bit 7, overwrites the commHash and secret in the input with the
// job's, so the checks behind the identity test are reached; the rest is the record.
//
// Invariants beyond "no crash": what decodes re-encodes to the same bytes (reserved and
// ignored bytes excepted) and decodes again to the same value; a check that accepts a record
// only accepts what the protocol allows.

#include <sys/socket.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "src/core/bootstrap.h"
#include "src/core/bootstrap_wire.h"
#include "src/core/peer_info.h"
#include "tests/fuzz/fuzz_check.h"

using namespace mixccl;
using namespace mixccl::bootstrap;

namespace {

// The record as the receiver holds it: exactly `bytes` long (zero-padded), on the heap so an
// over-read trips ASan.
std::vector<uint8_t> record(const uint8_t* data, size_t size, size_t bytes) {
  std::vector<uint8_t> r(bytes, 0);
  memcpy(r.data(), data, size < bytes ? size : bytes);
  return r;
}

void putIdentity(std::vector<uint8_t>* r, size_t at) {
  for (int i = 0; i < 8; ++i) (*r)[at + i] = static_cast<uint8_t>(fuzz::kCommHash >> (8 * i));
  memcpy(r->data() + at + 8, fuzz::kSecret, 16);
}

bool sameAddress(const SocketAddress& a, const SocketAddress& b) {
  uint8_t x[SocketAddress::kWireBytes], y[SocketAddress::kWireBytes];
  a.encode(x);
  b.encode(y);
  return memcmp(x, y, sizeof(x)) == 0 && a.length == b.length && a.family() == b.family();
}

// Decodes an address; if valid, its encoding must decode to the same address and keep the
// family, port and (v4: first 4, v6: all 16) address bytes.
void address(const uint8_t in[SocketAddress::kWireBytes]) {
  SocketAddress a;
  if (SocketAddress::decode(in, &a) != Result::kSuccess) {
    FUZZ_CHECK(!((in[0] == 0 && in[1] == 4) || (in[0] == 0 && in[1] == 6)));
    return;
  }
  (void)a.toString();
  uint8_t out[SocketAddress::kWireBytes];
  a.encode(out);
  FUZZ_CHECK(memcmp(out, in, in[1] == 4 ? 8 : SocketAddress::kWireBytes) == 0);
  SocketAddress b;
  FUZZ_CHECK(SocketAddress::decode(out, &b) == Result::kSuccess);
  FUZZ_CHECK(sameAddress(a, b));
}

void hello(std::vector<uint8_t> in, bool identity) {
  if (identity) putIdentity(&in, 8);
  bool addressOk = false;
  const Hello h = Hello::decode(in.data(), &addressOk);
  uint8_t out[Hello::kBytes];
  h.encode(out);
  // magic .. nranks (44 bytes) round-trip; the address only for a valid registration.
  FUZZ_CHECK(memcmp(out, in.data(), 44) == 0);
  if (h.kind == HelloKind::kRegister) {
    if (addressOk) address(in.data() + 44);
    bool again = false;
    const Hello h2 = Hello::decode(out, &again);
    FUZZ_CHECK(!addressOk || (again && sameAddress(h.address, h2.address)));
  } else {
    FUZZ_CHECK(addressOk);
    for (size_t i = 44; i < Hello::kBytes; ++i) FUZZ_CHECK(out[i] == 0);
  }
  // As an incoming peer connection of rank 2 in a job of 5.
  if (checkPeerHello(h, fuzz::kCommHash, fuzz::kSecret, 2, 5) == nullptr) {
    FUZZ_CHECK(h.magic == kHelloMagic && h.version == kProtocolVersion);
    FUZZ_CHECK(h.commHash == fuzz::kCommHash && sameSecret(h.secret, fuzz::kSecret));
    FUZZ_CHECK(h.kind == HelloKind::kPeer && h.nranks == 5 && h.rank < 5 && h.rank != 2);
  }
}

void reply(const std::vector<uint8_t>& in) {
  const ReplyHeader h = ReplyHeader::decode(in.data());
  uint8_t out[ReplyHeader::kBytes];
  h.encode(out);
  FUZZ_CHECK(memcmp(out, in.data(), sizeof(out)) == 0);
}

void frame(const std::vector<uint8_t>& in) {
  const FrameHeader f = FrameHeader::decode(in.data());
  uint8_t out[FrameHeader::kBytes];
  f.encode(out);
  FUZZ_CHECK(memcmp(out, in.data(), 12) == 0 && memcmp(out + 16, in.data() + 16, 8) == 0);
  for (int i = 12; i < 16; ++i) FUZZ_CHECK(out[i] == 0);  // reserved
  if (frameHeaderOk(f)) FUZZ_CHECK(f.magic == kFrameMagic && f.length <= kMaxFrameBytes);
}

void uniqueId(std::vector<uint8_t> in, bool identity) {
  if (identity) putIdentity(&in, 8);
  UniqueIdData d;
  if (UniqueIdData::decode(in.data(), &d) != Result::kSuccess) return;
  uint8_t out[UniqueIdData::kBytes];
  d.encode(out);
  FUZZ_CHECK(memcmp(out, in.data(), 32) == 0);           // magic, version, commHash, secret
  FUZZ_CHECK(memcmp(out + 52, in.data() + 52, 4) == 0);  // flags
  // The root's IPv6 scope id survives; an IPv4 root has none.
  if (d.root.family() == AF_INET6) {
    FUZZ_CHECK(memcmp(out + 56, in.data() + 56, 4) == 0);
  } else {
    for (size_t i = 56; i < 60; ++i) FUZZ_CHECK(out[i] == 0);
  }
  for (size_t i = 60; i < UniqueIdData::kBytes; ++i) FUZZ_CHECK(out[i] == 0);
  address(in.data() + 32);
  UniqueIdData e;
  FUZZ_CHECK(UniqueIdData::decode(out, &e) == Result::kSuccess);
  FUZZ_CHECK(e.commHash == d.commHash && memcmp(e.secret, d.secret, 16) == 0 && e.flags == d.flags);
  FUZZ_CHECK(sameAddress(e.root, d.root) && e.root.scopeId() == d.root.scopeId());
}

void peerInfo(const std::vector<uint8_t>& in) {
  PeerInfo p;
  if (PeerInfo::decode(in.data(), in.size(), 5, &p) != Result::kSuccess) return;
  for (const auto& t : p.transports) {
    FUZZ_CHECK(t.blob.size() <= Transport::kMaxBlobBytes);
    FUZZ_CHECK(!t.name.empty() && t.name.size() < PeerInfo::kNameBytes);
  }
  // What a reader accepted re-encodes into the same record size and reads back the same.
  FUZZ_CHECK(p.encodedBytes() <= PeerInfo::kWireBytes);
  std::vector<uint8_t> out(PeerInfo::kWireBytes);
  FUZZ_CHECK(p.encode(out.data(), out.size()) == Result::kSuccess);
  PeerInfo q;
  FUZZ_CHECK(PeerInfo::decode(out.data(), out.size(), 5, &q) == Result::kSuccess);
  FUZZ_CHECK(q == p);
}

// The root's address table (Bootstrap::init): any number of 20-byte records.
void table(const uint8_t* data, size_t size) {
  for (size_t at = 0; at + SocketAddress::kWireBytes <= size; at += SocketAddress::kWireBytes) {
    std::vector<uint8_t> r = record(data + at, SocketAddress::kWireBytes, SocketAddress::kWireBytes);
    address(r.data());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t pick = data[0];
  const bool identity = (pick & 0x80) != 0;
  ++data;
  --size;
  switch (pick & 7) {
    case 0:
      hello(record(data, size, Hello::kBytes), identity);
      break;
    case 1:
      reply(record(data, size, ReplyHeader::kBytes));
      break;
    case 2:
      frame(record(data, size, FrameHeader::kBytes));
      break;
    case 3:
      uniqueId(record(data, size, UniqueIdData::kBytes), identity);
      break;
    case 4:
      peerInfo(record(data, size, PeerInfo::kWireBytes));
      break;
    default:
      table(data, size);
      break;
  }
  return 0;
}
