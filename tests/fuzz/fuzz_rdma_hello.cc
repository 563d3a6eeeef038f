// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
//
// Fuzz target: the RDMA transport's connection private data (transports/rdma/rdma_transport.cc):
// the connect record a listener decodes and checks (decodeRdmaHello, checkRdmaHello, what
// RdmaHub::onConnectRequest applies before the duplicate-lane check) and the accept record a
// sender decodes. Byte 0: bit 0 puts the job's commHash and secret in, bit 1 the magic and
// version, bit 2 decodes the accept record instead; byte 1 is the length the connection manager
// reports (it may pad, never shorten); then the record's bytes. The receiver is rank 1 of 3.
//
// Invariants: decode accepts only this magic and version and at least the record's length; what
// it accepts re-encodes to the same bytes; checkRdmaHello accepts only a record of this
// communicator addressed to this rank from a valid (src, lane) with a credit address.

#include <cstdint>
#include <cstring>
#include <vector>

#include "tests/fuzz/fuzz_check.h"
#include "transports/rdma/rdma_internal.h"

using namespace mixccl;

namespace {

uint32_t le32(const uint8_t* p) { return p[0] | p[1] << 8 | p[2] << 16 | static_cast<uint32_t>(p[3]) << 24; }

void accept(const std::vector<uint8_t>& in, size_t len) {
  RdmaAccept a;
  const char* why = nullptr;
  if (!decodeRdmaAccept(in.data(), len, &a, &why)) {
    FUZZ_CHECK(why != nullptr && (len < kRdmaAcceptBytes || le32(in.data()) != kRdmaAcceptMagic));
    return;
  }
  FUZZ_CHECK(len >= kRdmaAcceptBytes && le32(in.data()) == kRdmaAcceptMagic);
  uint8_t out[kRdmaAcceptBytes];
  encodeRdmaAccept(a, out);
  FUZZ_CHECK(memcmp(out, in.data(), kRdmaAcceptBytes - 4) == 0);  // the last word is reserved
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t control = data[0];
  std::vector<uint8_t> in(256, 0);
  memcpy(in.data(), data + 2, size - 2 < in.size() ? size - 2 : in.size());
  const size_t len = data[1];
  if ((control & 4) != 0) {
    if ((control & 2) != 0) {
      for (int i = 0; i < 4; ++i) in[i] = static_cast<uint8_t>(kRdmaAcceptMagic >> (8 * i));
    }
    accept(in, len);
    return 0;
  }
  if ((control & 1) != 0) {
    for (int i = 0; i < 8; ++i) in[12 + i] = static_cast<uint8_t>(fuzz::kCommHash >> (8 * i));
    memcpy(in.data() + 20, fuzz::kSecret, 16);
  }
  if ((control & 2) != 0) {
    for (int i = 0; i < 4; ++i) in[i] = static_cast<uint8_t>(kRdmaConnectMagic >> (8 * i));
    for (int i = 0; i < 4; ++i) in[4 + i] = static_cast<uint8_t>(kRdmaVersion >> (8 * i));
  }
  RdmaHello h;
  const char* why = nullptr;
  const bool valid =
      len >= kRdmaConnectBytes && le32(in.data()) == kRdmaConnectMagic && le32(in.data() + 4) == kRdmaVersion;
  if (!decodeRdmaHello(in.data(), len, &h, &why)) {
    FUZZ_CHECK(why != nullptr && !valid);
    return 0;
  }
  FUZZ_CHECK(valid);
  uint8_t out[kRdmaConnectBytes];
  encodeRdmaHello(h, out);
  FUZZ_CHECK(memcmp(out, in.data(), kRdmaConnectBytes) == 0);

  TransportContext ctx;
  ctx.rank = 1;
  ctx.nranks = 3;
  ctx.commHash = fuzz::kCommHash;
  memcpy(ctx.secret, fuzz::kSecret, 16);
  if (checkRdmaHello(h, ctx) == nullptr) {
    FUZZ_CHECK(h.commHash == ctx.commHash && memcmp(h.secret, ctx.secret, 16) == 0);
    FUZZ_CHECK(h.dst == 1 && h.src < 3 && h.lane < static_cast<uint32_t>(kNumLanes) && h.creditAddr != 0);
    // The hub indexes its parked table with this; it must be in range.
    FUZZ_CHECK(h.src * kNumLanes + h.lane < static_cast<size_t>(ctx.nranks) * kNumLanes);
  }
  return 0;
}
