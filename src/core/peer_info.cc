// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "src/core/peer_info.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "common/config.h"
#include "common/wire.h"

namespace mixccl {

namespace {

// Offsets of the header and facts (PROTOCOL.md, "Peer info").
constexpr size_t kOffMagic = 0;
constexpr size_t kOffFormat = 4;
constexpr size_t kOffFactsEnd = 6;
constexpr size_t kOffUsed = 8;
constexpr size_t kOffProtocol = 12;
constexpr size_t kOffRank = 16;
constexpr size_t kOffNranks = 20;
constexpr size_t kOffPid = 24;
constexpr size_t kOffHostHash = 32;
constexpr size_t kOffHost = 40;
static_assert(kOffHost + PeerInfo::kHostBytes == PeerInfo::kFactsEnd);

// Callers check bounds before every access, so these never see a short buffer.
void put(uint8_t* p, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint64_t get(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}
size_t padded(size_t n) { return (n + 3) & ~size_t{3}; }

// A name field: 1..kNameBytes-1 bytes, NUL-padded. Returns false when it is empty or unterminated.
bool readName(const uint8_t* p, std::string* out) {
  const char* s = reinterpret_cast<const char*>(p);
  size_t n = strnlen(s, PeerInfo::kNameBytes);
  if (n == 0 || n == PeerInfo::kNameBytes) return false;
  out->assign(s, n);
  return true;
}
size_t initErrorBytes(const std::string& message) {
  return message.size() < PeerInfo::kMaxInitErrorBytes ? message.size() : PeerInfo::kMaxInitErrorBytes;
}
bool nameFits(const std::string& name) {
  return !name.empty() && name.size() < PeerInfo::kNameBytes && name.find('\0') == std::string::npos;
}

}  // namespace

const PeerTransportInfo* PeerInfo::transport(const std::string& name) const {
  for (const PeerTransportInfo& t : transports) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

size_t PeerInfo::encodedBytes() const {
  if (initResult != 0) return kFactsEnd + kFieldHeaderBytes + padded(4 + initErrorBytes(initError));
  size_t n = kFactsEnd;
  for (const PeerTransportInfo& t : transports) n += kFieldHeaderBytes + padded(kNameBytes + t.blob.size());
  if (pidSpace != 0) n += kFieldHeaderBytes + 8;
  return n + kFieldHeaderBytes + padded(kBackendValueBytes);
}

namespace {

// What encode() refuses in a record that lists transports and a backend.
Result checkFields(const PeerInfo& p) {
  for (size_t i = 0; i < p.transports.size(); ++i) {
    const PeerTransportInfo& t = p.transports[i];
    if (!nameFits(t.name) || t.blob.size() > Transport::kMaxBlobBytes) {
      return fail(Result::kInternalError,
                  "peer info of rank %d: transport '%s' has a %zu-byte name and a %zu-byte blob (limits 1..%zu and "
                  "%zu)",
                  p.rank, t.name.c_str(), t.name.size(), t.blob.size(), PeerInfo::kNameBytes - 1,
                  Transport::kMaxBlobBytes);
    }
    for (size_t j = 0; j < i; ++j) {
      if (p.transports[j].name == t.name) {
        return fail(Result::kInternalError, "peer info of rank %d lists transport '%s' twice", p.rank, t.name.c_str());
      }
    }
  }
  if (!nameFits(p.backend.name)) {
    return fail(Result::kInternalError, "peer info of rank %d: device backend name '%s' must be 1..%zu bytes", p.rank,
                p.backend.name.c_str(), PeerInfo::kNameBytes - 1);
  }
  return Result::kSuccess;
}

}  // namespace

Result PeerInfo::encode(uint8_t* out, size_t cap) const {
  // A rank that gave up sends its facts and why: nothing else of it is usable.
  if (initResult == 0) MIXCCL_TRY(checkFields(*this));
  const size_t used = encodedBytes();
  if (used > cap) {
    return fail(Result::kInternalError,
                "peer info of rank %d needs %zu bytes but the record holds %zu: raise PeerInfo::kWireBytes (a wire "
                "change: bump kProtocolVersion)",
                rank, used, cap);
  }
  memset(out, 0, cap);
  put(out + kOffMagic, kMagic, 4);
  put(out + kOffFormat, kFormatVersion, 2);
  put(out + kOffFactsEnd, kFactsEnd, 2);
  put(out + kOffUsed, used, 4);
  put(out + kOffProtocol, protocolVersion, 4);
  put(out + kOffRank, static_cast<uint32_t>(rank), 4);
  put(out + kOffNranks, static_cast<uint32_t>(nranks), 4);
  put(out + kOffPid, static_cast<uint32_t>(pid), 4);
  put(out + kOffHostHash, hostHash, 8);
  memcpy(out + kOffHost, host.data(), host.size() < kHostBytes ? host.size() : kHostBytes - 1);
  if (initResult != 0) {
    const size_t n = initErrorBytes(initError);
    put(out + kFactsEnd, kFieldInitFailure, 2);
    put(out + kFactsEnd + 2, 4 + n, 2);
    put(out + kFactsEnd + kFieldHeaderBytes, initResult, 4);
    memcpy(out + kFactsEnd + kFieldHeaderBytes + 4, initError.data(), n);
    return Result::kSuccess;
  }
  size_t at = kFactsEnd;
  for (const PeerTransportInfo& t : transports) {
    put(out + at, kFieldTransport, 2);
    put(out + at + 2, kNameBytes + t.blob.size(), 2);
    memcpy(out + at + kFieldHeaderBytes, t.name.data(), t.name.size());
    if (!t.blob.empty()) memcpy(out + at + kFieldHeaderBytes + kNameBytes, t.blob.data(), t.blob.size());
    at += kFieldHeaderBytes + padded(kNameBytes + t.blob.size());
  }
  if (pidSpace != 0) {
    put(out + at, kFieldPidSpace, 2);
    put(out + at + 2, 8, 2);
    put(out + at + kFieldHeaderBytes, pidSpace, 8);
    at += kFieldHeaderBytes + 8;
  }
  put(out + at, kFieldBackend, 2);
  put(out + at + 2, kBackendValueBytes, 2);
  uint8_t* v = out + at + kFieldHeaderBytes;
  put(v, backend.wireId, 4);
  memcpy(v + 4, backend.name.data(), backend.name.size());
  put(v + 4 + kNameBytes, backend.dtypes, 4);
  put(v + 8 + kNameBytes, backend.ops, 4);
  put(v + 12 + kNameBytes, backend.flags, 4);
  for (size_t t = 0; t < backend.arithmetic.size(); ++t) put(v + 16 + kNameBytes + 4 * t, backend.arithmetic[t], 4);
  return Result::kSuccess;
}

Result PeerInfo::decode(const uint8_t* in, size_t len, int slot, PeerInfo* out) {
  *out = PeerInfo{};
  if (len < kFactsEnd) {
    return fail(Result::kInternalError, "peer info of rank %d: a %zu-byte buffer is shorter than the %zu-byte header",
                slot, len, kFactsEnd);
  }
  const uint32_t magic = static_cast<uint32_t>(get(in + kOffMagic, 4));
  if (magic != kMagic) {
    // Builds before lane protocol 4 sent a fixed record that starts with their protocol version.
    if (magic >= 1 && magic <= 3) {
      return fail(Result::kInvalidUsage,
                  "rank %d runs an older mixccl (lane protocol %u, fixed peer-info records); this rank needs "
                  "versioned ones: run a compatible mixccl build on every rank",
                  slot, magic);
    }
    return fail(Result::kRemoteError,
                "peer info of rank %d does not start with the MXPI magic (0x%08x): corrupt, or not a mixccl peer", slot,
                magic);
  }
  const uint32_t format = static_cast<uint32_t>(get(in + kOffFormat, 2));
  if (format != kFormatVersion) {
    return fail(Result::kInvalidUsage,
                "rank %d writes peer-info format %u; this build reads format %u: run a compatible mixccl build on "
                "every rank",
                slot, format, kFormatVersion);
  }
  const size_t factsEnd = static_cast<size_t>(get(in + kOffFactsEnd, 2));
  const size_t used = static_cast<size_t>(get(in + kOffUsed, 4));
  if (used > len || used < kFactsEnd || factsEnd < kFactsEnd || factsEnd > used || factsEnd % 4 != 0) {
    return fail(Result::kRemoteError,
                "peer info of rank %d claims %zu bytes in use and fields from byte %zu, in a %zu-byte record (header "
                "%zu bytes): corrupt or incompatible peer",
                slot, used, factsEnd, len, kFactsEnd);
  }
  out->protocolVersion = static_cast<uint32_t>(get(in + kOffProtocol, 4));
  out->rank = static_cast<int32_t>(get(in + kOffRank, 4));
  out->nranks = static_cast<int32_t>(get(in + kOffNranks, 4));
  out->pid = static_cast<int32_t>(get(in + kOffPid, 4));
  out->hostHash = get(in + kOffHostHash, 8);
  // The host field's last byte is ignored, so decode(encode(x)) == x for every name decode returns.
  const char* host = reinterpret_cast<const char*>(in + kOffHost);
  out->host.assign(host, strnlen(host, kHostBytes - 1));

  bool haveBackend = false;
  bool havePidSpace = false;
  size_t at = factsEnd;  // facts a later format adds sit before factsEnd; this reader skips them
  while (at < used) {
    if (used - at < kFieldHeaderBytes) {
      return fail(Result::kRemoteError, "peer info of rank %d: a field header at byte %zu is cut off at byte %zu", slot,
                  at, used);
    }
    const uint16_t type = static_cast<uint16_t>(get(in + at, 2));
    const size_t n = static_cast<size_t>(get(in + at + 2, 2));
    const uint8_t* v = in + at + kFieldHeaderBytes;
    if (padded(n) > used - at - kFieldHeaderBytes) {
      return fail(Result::kRemoteError,
                  "peer info of rank %d: field type %u at byte %zu claims %zu bytes, past the %zu bytes in use", slot,
                  type, at, n, used);
    }
    if (type == kFieldTransport) {
      PeerTransportInfo t;
      if (n < kNameBytes || !readName(v, &t.name)) {
        return fail(Result::kRemoteError, "peer info of rank %d: a transport field at byte %zu has no valid name", slot,
                    at);
      }
      if (n - kNameBytes > Transport::kMaxBlobBytes) {
        return fail(Result::kRemoteError,
                    "peer info of rank %d carries a %zu-byte blob for transport '%s' (max %zu): corrupt or "
                    "incompatible peer",
                    slot, n - kNameBytes, t.name.c_str(), Transport::kMaxBlobBytes);
      }
      if (out->transport(t.name) != nullptr) {
        return fail(Result::kRemoteError, "peer info of rank %d lists transport '%s' twice", slot, t.name.c_str());
      }
      t.blob.assign(v + kNameBytes, v + n);
      out->transports.push_back(std::move(t));
    } else if (type == kFieldBackend) {
      // A longer value is a later version of this field: its first kBackendValueBytes keep their meaning.
      if (n < kBackendValueBytes || haveBackend || !readName(v + 4, &out->backend.name)) {
        return fail(Result::kRemoteError,
                    "peer info of rank %d: the device-backend field at byte %zu is %s (%zu bytes, at least %zu)", slot,
                    at, haveBackend ? "repeated" : "malformed", n, kBackendValueBytes);
      }
      haveBackend = true;
      out->backend.wireId = static_cast<uint32_t>(get(v, 4));
      out->backend.dtypes = static_cast<uint32_t>(get(v + 4 + kNameBytes, 4));
      out->backend.ops = static_cast<uint32_t>(get(v + 8 + kNameBytes, 4));
      out->backend.flags = static_cast<uint32_t>(get(v + 12 + kNameBytes, 4));
      for (size_t t = 0; t < out->backend.arithmetic.size(); ++t) {
        out->backend.arithmetic[t] = static_cast<uint32_t>(get(v + 16 + kNameBytes + 4 * t, 4));
      }
    } else if (type == kFieldInitFailure) {
      if (n < 4 || out->initResult != 0 || get(v, 4) == 0) {
        return fail(Result::kRemoteError, "peer info of rank %d: the init-failure field at byte %zu is malformed", slot,
                    at);
      }
      out->initResult = static_cast<uint32_t>(get(v, 4));
      const char* message = reinterpret_cast<const char*>(v + 4);
      out->initError.assign(message, strnlen(message, std::min(n - 4, kMaxInitErrorBytes)));
    } else if (type == kFieldPidSpace) {
      // A longer value is a later version of this field: its first 8 bytes keep their meaning.
      if (n < 8 || havePidSpace) {
        return fail(Result::kRemoteError, "peer info of rank %d: the pid-space field at byte %zu is %s (%zu bytes)",
                    slot, at, havePidSpace ? "repeated" : "too short", n);
      }
      havePidSpace = true;
      out->pidSpace = get(v, 8);  // 0 reads as unknown, as an absent field does
    }
    // Any other type is a field of a later build: skipped by its length.
    at += kFieldHeaderBytes + padded(n);
  }
  if (out->initResult != 0) {
    // Nothing else of a rank that gave up is usable (encode() writes only the facts and why).
    out->transports.clear();
    out->backend = PeerBackendInfo{};
    out->pidSpace = 0;
    return Result::kSuccess;
  }
  if (!haveBackend) {
    return fail(Result::kRemoteError,
                "peer info of rank %d carries no device-backend field: corrupt or incompatible peer", slot);
  }
  return Result::kSuccess;
}

std::string localHostName() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return host;
}

uint64_t localHostHash() {
  std::string id = config::getString(config::Knob::kHostId);
  if (id.empty()) {
    std::ifstream boot("/proc/sys/kernel/random/boot_id");
    std::string bootId;
    std::getline(boot, bootId);
    id = localHostName() + "/" + bootId;
  }
  return fnv1a64(id.data(), id.size());
}

}  // namespace mixccl
