// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// A rank that leaves once its part is done is no error for the ranks still working. Four ranks
// reduce to root 3 with no earlier collective (so every lane is set up inside this call); rank 2
// comes 2 s late, so ranks 3 and 0 wait long enough to probe (op_stamp.h), and rank 1 leaves as
// soon as its reduce returns: it destroys its communicator, finalizes and destroys it, or exits
// without either. Every rank must return success and the root must hold the exact sum, long
// before MIXCCL_TIMEOUT. A probe to a departed rank used to fail the waiting ranks.

#include <gtest/gtest.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "common/config.h"
#include "tests/support/fork_ranks.h"

namespace {

enum class Leave { kDestroy, kFinalize, kExit };

struct Param {
  const char* transport;
  Leave leave;
};

const char* leaveName(Leave l) {
  switch (l) {
    case Leave::kDestroy:
      return "destroy";
    case Leave::kFinalize:
      return "finalize";
    case Leave::kExit:
      return "exit";
  }
  return "?";
}

void PrintTo(const Param& p, std::ostream* os) { *os << p.transport << ", rank 1 leaves by " << leaveName(p.leave); }

constexpr int kRanks = 4;
constexpr int kRoot = 3;
constexpr int kLateRank = 2;
constexpr int kLeaver = 1;
constexpr size_t kCount = (1 << 20) + 3;  // several chunks, odd

int runRank(int rank, const ncclUniqueId& id, Leave leave) {
  ncclComm_t comm = nullptr;
  RANK_CHECK(ncclCommInitRank(&comm, kRanks, id, rank) == ncclSuccess, "init failed");
  std::vector<float> in(kCount), out(kCount, -1.0f);
  for (size_t i = 0; i < kCount; ++i) in[i] = static_cast<float>((i + rank) % 4);
  if (rank == kLateRank) std::this_thread::sleep_for(std::chrono::seconds(2));
  RANK_CHECK(ncclReduce(in.data(), out.data(), kCount, ncclFloat32, ncclSum, kRoot, comm, nullptr) == ncclSuccess,
             "reduce");
  if (rank == kRoot) {
    for (size_t i = 0; i < kCount; ++i) {
      float want = 0;
      for (int r = 0; r < kRanks; ++r) want += static_cast<float>((i + r) % 4);
      RANK_CHECK(out[i] == want, "element %zu = %g, want %g", i, out[i], want);
    }
  }
  if (rank == kLeaver && leave == Leave::kExit) {
    fflush(nullptr);
    _exit(0);  // no finalize, no destroy: the process is simply gone
  }
  // Every rank finalizes in the finalize case, as a normal program end does (finalize waits for
  // all of them); otherwise the others destroy at their own pace.
  if (leave == Leave::kFinalize) RANK_CHECK(ncclCommFinalize(comm) == ncclSuccess, "finalize");
  RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
  // The destroyed rank's process lives on for a while: its communicator is gone, not its pid.
  if (rank == kLeaver && leave == Leave::kDestroy) std::this_thread::sleep_for(std::chrono::seconds(3));
  return 0;
}

class EarlyLeaveTest : public ::testing::TestWithParam<Param> {};

TEST_P(EarlyLeaveTest, OthersFinishCorrectly) {
  setenv("NCCL_SHM_DISABLE", std::string(GetParam().transport) == "tcp" ? "1" : "0", 1);
  setenv("MIXCCL_TIMEOUT", "60", 1);
  mixccl::config::resetForTesting();
  const auto start = std::chrono::steady_clock::now();
  const Leave leave = GetParam().leave;
  const int status =
      mixccl::testing::forkJob(kRanks, [leave](int rank, const ncclUniqueId& id) { return runRank(rank, id, leave); });
  EXPECT_TRUE(mixccl::testing::exitedCleanly(status)) << "a rank failed (its message is above)";
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(40)) << "a rank waited for its deadline";
}

INSTANTIATE_TEST_SUITE_P(Leavers, EarlyLeaveTest,
                         ::testing::Values(Param{"shm", Leave::kDestroy}, Param{"shm", Leave::kFinalize},
                                           Param{"shm", Leave::kExit}, Param{"tcp", Leave::kDestroy},
                                           Param{"tcp", Leave::kFinalize}, Param{"tcp", Leave::kExit}),
                         [](const auto& info) {
                           return std::string(info.param.transport) + "_" + leaveName(info.param.leave);
                         });

}  // namespace
