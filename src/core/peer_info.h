// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// What each rank tells every other rank at init (exchanged with Bootstrap::allGather). The wire
// form (PROTOCOL.md, "Peer info") is little-endian and versioned: a header with a magic, a format
// version and the length in use, the fixed facts about the rank, then a list of length-prefixed
// fields, one per transport (keyed by the transport's wire name), one for the device backend and
// one for the pid namespace of the rank's pid.
// A reader skips field types it does not know, so a new transport, backend or fact is a new
// field, not a new layout, and the record keeps its size (kWireBytes) for every build.
//
// Decoding never trusts the bytes: every length is checked against the record before it is used,
// and a malformed record is refused with kRemoteError naming the rank that sent it.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "src/device/device_backend.h"
#include "transports/transport.h"

namespace mixccl {

// One transport's entry: the transport's wire name (transports/registry.h) and its listen() blob.
struct PeerTransportInfo {
  std::string name;
  std::vector<uint8_t> blob;
  bool operator==(const PeerTransportInfo&) const = default;
};

// The device backend a rank runs: its wire id (DeviceBackend::wireId), name, capabilities, and the
// fingerprint of its arithmetic per data type (arith_check.h; PROTOCOL.md, "Arithmetic").
struct PeerBackendInfo {
  uint32_t wireId = 0;
  std::string name;
  uint32_t dtypes = 0;                               // BackendCaps::dtypes
  uint32_t ops = 0;                                  // BackendCaps::ops
  uint32_t flags = 0;                                // BackendCaps::flags
  std::array<uint32_t, kNumDataTypes> arithmetic{};  // ArithPrint: 0 for an unsupported type
  bool operator==(const PeerBackendInfo&) const = default;
};

struct PeerInfo {
  uint32_t protocolVersion = 0;  // the lane protocol (kProtocolVersion in communicator.h)
  int32_t rank = 0;
  int32_t nranks = 0;
  int32_t pid = 0;
  uint64_t hostHash = 0;
  // The pid namespace `pid` lives in (localPidSpace(), common/pid_space.h): the pid-space field.
  // 0 when unknown (the field is absent: a build that did not send it, or no /proc there), read
  // as "the same as mine". A same-host peer in another space has a pid that means nothing here.
  uint64_t pidSpace = 0;
  std::string host;                           // at most kHostBytes-1 characters on the wire
  std::vector<PeerTransportInfo> transports;  // in the order the rank published them
  PeerBackendInfo backend;
  // Nonzero: the rank could not set up its part of the communicator (a Result code), and
  // initError says why. Such a record carries only the facts and this (the init-failure field).
  uint32_t initResult = 0;
  std::string initError;  // at most kMaxInitErrorBytes on the wire

  // The entry of the transport named `name`, or nullptr when the rank published none (a build
  // without that transport).
  const PeerTransportInfo* transport(const std::string& name) const;
  bool operator==(const PeerInfo&) const = default;

  // Wire layout constants (PROTOCOL.md, "Peer info").
  static constexpr uint32_t kMagic = 0x4950584d;  // bytes "MXPI"
  static constexpr uint16_t kFormatVersion = 1;
  static constexpr size_t kHostBytes = 64;
  static constexpr size_t kNameBytes = 16;        // a transport or backend name, NUL-padded
  static constexpr size_t kFactsEnd = 104;        // header (16) + fixed facts (88): the first field
  static constexpr size_t kFieldHeaderBytes = 4;  // u16 type, u16 value length
  static constexpr uint16_t kFieldTransport = 1;
  static constexpr uint16_t kFieldBackend = 2;
  static constexpr uint16_t kFieldInitFailure = 3;
  static constexpr uint16_t kFieldPidSpace = 4;       // u64; absent when unknown
  static constexpr size_t kMaxInitErrorBytes = 1000;  // a longer message is cut
  static constexpr size_t kBackendValueBytes = 4 + kNameBytes + 12 + 4 * kNumDataTypes;
  // The record's fixed capacity: what every rank contributes to the allGather. Room for 10
  // transports with full 64-byte blobs and the backend next to the facts; encode() fails
  // (kInternalError) rather than truncate if a build ever outgrows it.
  static constexpr size_t kWireBytes = 1152;

  // Writes the record into out[0..cap) (cap >= the bytes in use; the rest is zeroed).
  Result encode(uint8_t* out, size_t cap = kWireBytes) const;
  // Reads the record in in[0..len) contributed by rank `slot` (the allGather position, named in
  // messages; the record's own rank field is checked by the caller).
  static Result decode(const uint8_t* in, size_t len, int slot, PeerInfo* out);
  // The bytes encode() would use (header, facts and fields), at most kWireBytes for a valid record.
  size_t encodedBytes() const;
};

// Identifies the machine: hostname plus kernel boot id, so containers with the same hostname on
// different machines differ, and ranks in network namespaces of one machine (which share
// /dev/shm) are recognised as one host. MIXCCL_HOST_ID overrides it (tests of "many hosts").
uint64_t localHostHash();
std::string localHostName();

}  // namespace mixccl
