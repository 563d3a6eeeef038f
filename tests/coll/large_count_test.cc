// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// 64-bit counts: a point-to-point transfer and a broadcast of more than 2^31 elements, checked
// at both ends and around the 2^31 boundary (offsets that overflow 32 bits would land there).

#include <gtest/gtest.h>
#include <nccl.h>

#include <cstdlib>
#include <memory>

#include "common/config.h"
#include "tests/support/rank_threads.h"

namespace mixccl::testing {
namespace {

constexpr size_t kCount = (size_t{1} << 31) + 4099;  // int8 elements: just over 2 GiB

struct FreeDeleter {
  void operator()(uint8_t* p) const { free(p); }
};
using Buffer = std::unique_ptr<uint8_t, FreeDeleter>;

// Writes markers where 32-bit offsets would go wrong; the rest stays zero (untouched pages).
void mark(uint8_t* p, uint8_t salt) {
  for (size_t at : {size_t{0}, (size_t{1} << 31) - 1, size_t{1} << 31, (size_t{1} << 31) + 1, kCount - 1}) {
    p[at] = static_cast<uint8_t>(at * 7 + salt);
  }
}

void expectMarked(const uint8_t* p, uint8_t salt) {
  for (size_t at : {size_t{0}, (size_t{1} << 31) - 1, size_t{1} << 31, (size_t{1} << 31) + 1, kCount - 1}) {
    EXPECT_EQ(p[at], static_cast<uint8_t>(at * 7 + salt)) << "at " << at;
  }
  EXPECT_EQ(p[size_t{3} << 29], 0);
}

TEST(LargeCount, SendRecvAndBroadcastBeyond2Pow31) {
  setenv("MIXCCL_TIMEOUT", "300", 1);
  config::resetForTesting();
  runRanks(2, [](int rank, ncclComm_t comm) {
    Buffer buf(static_cast<uint8_t*>(calloc(kCount, 1)));
    ASSERT_NE(buf, nullptr);
    if (rank == 0) mark(buf.get(), 1);
    if (rank == 0) {
      ASSERT_EQ(ncclSend(buf.get(), kCount, ncclInt8, 1, comm, nullptr), ncclSuccess) << ncclGetLastError(comm);
    } else {
      ASSERT_EQ(ncclRecv(buf.get(), kCount, ncclInt8, 0, comm, nullptr), ncclSuccess) << ncclGetLastError(comm);
      expectMarked(buf.get(), 1);
      mark(buf.get(), 2);
    }
    // Rank 1 now broadcasts its (re-marked) buffer back, in place.
    ASSERT_EQ(ncclBcast(buf.get(), kCount, ncclInt8, 1, comm, nullptr), ncclSuccess) << ncclGetLastError(comm);
    expectMarked(buf.get(), 2);
  });
}

}  // namespace
}  // namespace mixccl::testing
