// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Communicators whose ranks run different backends (ranks as threads, each with its own backend
// through CommOptions::backend): the arithmetic check at init and the per-call support check.

#include <gtest/gtest.h>
#include <nccl.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/result.h"
#include "src/api/handle.h"
#include "src/core/communicator.h"
#include "tests/support/altered_backend.h"

namespace mixccl {
namespace {

// Creates one communicator per backend (rank r uses backends[r]), all at once on threads.
struct MixedRanks {
  explicit MixedRanks(const std::vector<DeviceBackend*>& backends)
      : comms(backends.size(), nullptr), results(backends.size(), Result::kSuccess), messages(backends.size()) {
    ncclUniqueId id;
    EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    UniqueIdData data;
    EXPECT_EQ(UniqueIdData::decode(reinterpret_cast<const uint8_t*>(id.internal), &data), Result::kSuccess);
    const int n = static_cast<int>(backends.size());
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        CommOptions options;
        options.backend = backends[r];
        std::unique_ptr<Communicator> c;
        results[r] = Communicator::create(data, n, r, options, &c);
        if (results[r] == Result::kSuccess) {
          comms[r] = api::registerComm(std::move(c));
        } else {
          messages[r] = lastError();
        }
      });
    }
    for (auto& t : threads) t.join();
  }
  ~MixedRanks() {
    for (ncclComm_t c : comms) {
      if (c != nullptr) {
        EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
      }
    }
  }
  void run(const std::function<void(int)>& body) {
    std::vector<std::thread> threads;
    for (size_t r = 0; r < comms.size(); ++r) threads.emplace_back([&, r] { body(static_cast<int>(r)); });
    for (auto& t : threads) t.join();
  }
  std::vector<ncclComm_t> comms;
  std::vector<Result> results;
  std::vector<std::string> messages;
};

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
  MixedRanks ranks({host0.get(), &skewed, host2.get()});
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(ranks.results[r], Result::kInvalidUsage) << "rank " << r;
    const std::string& m = ranks.messages[r];
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
  MixedRanks ranks({host0.get(), &narrow});
  ASSERT_EQ(ranks.results[0], Result::kSuccess) << ranks.messages[0];
  ASSERT_EQ(ranks.results[1], Result::kSuccess) << ranks.messages[1];
  ranks.run([&](int r) {
    std::vector<float> f(1000, 1.0f + r);
    EXPECT_EQ(ncclAllReduce(f.data(), f.data(), f.size(), ncclFloat32, ncclSum, ranks.comms[r], nullptr), ncclSuccess);
    EXPECT_EQ(f[999], 3.0f);
    std::vector<uint16_t> h(1000, 0x3c00);  // 1.0 in binary16
    EXPECT_EQ(ncclAllReduce(h.data(), h.data(), h.size(), ncclFloat16, ncclSum, ranks.comms[r], nullptr),
              ncclInvalidUsage);
    const std::string m = ncclGetLastError(ranks.comms[r]);
    EXPECT_NE(m.find("float16 with sum"), std::string::npos) << m;
    EXPECT_NE(m.find("rank 1 (altered)"), std::string::npos) << m;
    EXPECT_EQ(m.find("rank 0 ("), std::string::npos) << m;
    // Nothing was sent: the communicator stays usable, and a broadcast of the type is a copy.
    if (r == 0) h.assign(h.size(), 0x4000);
    EXPECT_EQ(ncclBroadcast(h.data(), h.data(), h.size(), ncclFloat16, 0, ranks.comms[r], nullptr), ncclSuccess);
    EXPECT_EQ(h[999], 0x4000);
  });
}

}  // namespace
}  // namespace mixccl
