// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Communicators whose ranks run different backends (ranks as threads, each with its own backend
// through CommOptions::backend): the arithmetic check at init and the per-call support check.

#include <gtest/gtest.h>
#include <nccl.h>

#include <string>
#include <vector>

#include "common/result.h"
#include "tests/support/altered_backend.h"
#include "tests/support/backend_ranks.h"

namespace mixccl {
namespace {

void flipHalfLowBit(const ReduceSpec& spec, void* dst, size_t count) {
  if (spec.dtype != DataType::kBfloat16) return;
  auto* u = static_cast<uint16_t*>(dst);
  for (size_t i = 0; i < count; ++i) {
    if ((u[i] & 0x7f80) != 0x7f80) u[i] ^= 1;
  }
}

// A backend that rounds bfloat16 differently cannot join: init fails on every rank, and every
// rank names the same pair and the type.
TEST(MixedBackend, DifferentArithmeticFailsInitOnEveryRank) {
  auto host0 = makeHostBackend(), host2 = makeHostBackend();
  AlteredBackend skewed(flipHalfLowBit);
  testing::BackendRanks ranks({host0.get(), &skewed, host2.get()}, /*expectInit=*/false);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(ranks.initResult(r), Result::kInvalidUsage) << "rank " << r;
    const std::string& m = ranks.initError(r);
    EXPECT_NE(m.find("rank 0 (backend host) and rank 1 (backend altered)"), std::string::npos) << m;
    EXPECT_NE(m.find("bfloat16"), std::string::npos) << m;
  }
}

// Different backends with the same arithmetic share a communicator; a reduction on a type one of
// them lacks is refused on every rank, naming it, while copies of that type still work.
TEST(MixedBackend, TypeOneBackendLacksIsRefusedPerCall) {
  auto host0 = makeHostBackend();
  const uint32_t noHalf = ((1u << kNumDataTypes) - 1) & ~(1u << static_cast<int>(DataType::kFloat16));
  AlteredBackend narrow(nullptr, noHalf);
  testing::BackendRanks ranks({host0.get(), &narrow});
  ASSERT_TRUE(ranks.ok());
  testing::onRankThreads(2, [&](int r) {
    std::vector<float> f(1000, 1.0f + r);
    EXPECT_EQ(ncclAllReduce(f.data(), f.data(), f.size(), ncclFloat32, ncclSum, ranks.comm(r), nullptr), ncclSuccess);
    EXPECT_EQ(f[999], 3.0f);
    std::vector<uint16_t> h(1000, 0x3c00);  // 1.0 in binary16
    EXPECT_EQ(ncclAllReduce(h.data(), h.data(), h.size(), ncclFloat16, ncclSum, ranks.comm(r), nullptr),
              ncclInvalidUsage);
    const std::string m = ncclGetLastError(ranks.comm(r));
    EXPECT_NE(m.find("float16 with sum"), std::string::npos) << m;
    EXPECT_NE(m.find("rank 1 (altered)"), std::string::npos) << m;
    EXPECT_EQ(m.find("rank 0 ("), std::string::npos) << m;
    // Nothing was sent: the communicator stays usable, and a broadcast of the type is a copy.
    if (r == 0) h.assign(h.size(), 0x4000);
    EXPECT_EQ(ncclBroadcast(h.data(), h.data(), h.size(), ncclFloat16, 0, ranks.comm(r), nullptr), ncclSuccess);
    EXPECT_EQ(h[999], 0x4000);
  });
}

}  // namespace
}  // namespace mixccl
