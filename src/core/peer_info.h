// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// What each rank tells every other rank at init (exchanged with Bootstrap::allGather). The wire
// form is fixed-size and little-endian (PROTOCOL.md, "Peer info"), so builds of other vendors and
// architectures read it the same way.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "transports/transport.h"

namespace mixccl {

// Transports in preference-independent, wire-visible order (index into PeerInfo::blobs).
enum TransportId : int { kTransportShm = 0, kTransportTcp = 1, kNumTransports = 2 };

struct PeerInfo {
  uint32_t protocolVersion = 0;
  int32_t rank = 0;
  int32_t nranks = 0;
  int32_t pid = 0;
  uint64_t hostHash = 0;
  uint32_t backend = 0;  // 0 = host memory; vendor backends get their own ids (PROTOCOL.md)
  std::string host;      // at most kHostBytes-1 characters on the wire
  std::array<std::vector<uint8_t>, kNumTransports> blobs;

  static constexpr size_t kHostBytes = 64;
  static constexpr size_t kWireBytes = 32 + kHostBytes + kNumTransports * (4 + Transport::kMaxBlobBytes);
  void encode(uint8_t* out) const;
  static Result decode(const uint8_t* in, PeerInfo* out);
};

// Identifies the machine: hostname plus kernel boot id, so containers with the same hostname on
// different machines differ, and ranks in network namespaces of one machine (which share
// /dev/shm) are recognised as one host. MIXCCL_HOST_ID overrides it (tests of "many hosts").
uint64_t localHostHash();
std::string localHostName();

}  // namespace mixccl
