// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
//
// Fuzz target: the TCP transport's lane hello (transports/tcp/tcp_transport.cc decodeHello and
// checkHello, the acceptance check TcpHub::finishHandshake applies before the duplicate-lane
// check). Byte 0: bit 0 puts the job's commHash and secret in, bit 1 the magic and version;
// then the 48 hello bytes as the socket delivers them. The receiver is rank 1 of 3.
//
// Invariants: decode accepts only this magic and version; what it accepts re-encodes to the same
// 44 bytes (the flags word is reserved and written as zero); checkHello accepts only a hello of
// this communicator addressed to this rank from a valid (src, lane).

#include <cstdint>
#include <cstring>
#include <vector>

#include "tests/fuzz/fuzz_check.h"
#include "transports/tcp/tcp_internal.h"

using namespace mixccl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t control = data[0];
  std::vector<uint8_t> in(kTcpHelloBytes, 0);
  memcpy(in.data(), data + 1, size - 1 < kTcpHelloBytes ? size - 1 : kTcpHelloBytes);
  if ((control & 1) != 0) {
    for (int i = 0; i < 8; ++i) in[8 + i] = static_cast<uint8_t>(fuzz::kCommHash >> (8 * i));
    memcpy(in.data() + 16, fuzz::kSecret, 16);
  }
  if ((control & 2) != 0) {
    for (int i = 0; i < 4; ++i) in[i] = static_cast<uint8_t>(kTcpHelloMagic >> (8 * i));
    for (int i = 0; i < 4; ++i) in[4 + i] = static_cast<uint8_t>(kTcpVersion >> (8 * i));
  }
  TcpHello h;
  const char* why = nullptr;
  const uint32_t magic = in[0] | in[1] << 8 | in[2] << 16 | static_cast<uint32_t>(in[3]) << 24;
  const uint32_t version = in[4] | in[5] << 8 | in[6] << 16 | static_cast<uint32_t>(in[7]) << 24;
  if (!decodeHello(in.data(), &h, &why)) {
    FUZZ_CHECK(why != nullptr && (magic != kTcpHelloMagic || version != kTcpVersion));
    return 0;
  }
  FUZZ_CHECK(magic == kTcpHelloMagic && version == kTcpVersion);
  uint8_t out[kTcpHelloBytes];
  encodeHello(h, out);
  FUZZ_CHECK(memcmp(out, in.data(), 44) == 0);
  for (size_t i = 44; i < kTcpHelloBytes; ++i) FUZZ_CHECK(out[i] == 0);
  TcpHello again;
  const char* why2 = nullptr;
  FUZZ_CHECK(decodeHello(out, &again, &why2));
  FUZZ_CHECK(again.commHash == h.commHash && memcmp(again.secret, h.secret, 16) == 0 && again.src == h.src &&
             again.dst == h.dst && again.lane == h.lane);

  TransportContext ctx;
  ctx.rank = 1;
  ctx.nranks = 3;
  ctx.commHash = fuzz::kCommHash;
  memcpy(ctx.secret, fuzz::kSecret, 16);
  if (checkHello(h, ctx) == nullptr) {
    FUZZ_CHECK(h.commHash == ctx.commHash && memcmp(h.secret, ctx.secret, 16) == 0);
    FUZZ_CHECK(h.dst == 1 && h.src < 3 && h.lane < static_cast<uint32_t>(kNumLanes));
    // The hub indexes its lane tables with this; it must be in range.
    FUZZ_CHECK(h.src * kNumLanes + h.lane < static_cast<size_t>(ctx.nranks) * kNumLanes);
  }
  return 0;
}
