// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Two ranks that each pass themselves as a broadcast's root, over TCP, with more data than the
// kernel buffers between them: each root's steps are done and its call waits for its data to
// leave, which the other root, waiting the same way, never reads. The owed closing token's lane
// is read while it waits (src/core/stream_checks.cc, checkOwedWhileFlushing), so a rank reports the
// mismatch long before MIXCCL_TIMEOUT. Ranks as processes: each has its own kernel buffers, as in
// a real job (found by tests/fault/fault_trials --transport tcp --seed 1795654397, trial 8).

#include <gtest/gtest.h>
#include <nccl.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/config.h"
#include "tests/support/fork_ranks.h"

namespace {

constexpr size_t kCount = 1705543;  // floats (6.8 MiB), the trial's count

// 0: this rank reported the crossed roots; 2: it failed because its peer did (remote error).
int runRank(int rank, int n, const ncclUniqueId& id) {
  setenv("NCCL_SHM_DISABLE", "1", 1);
  setenv("MIXCCL_TIMEOUT", "60", 1);
  mixccl::config::resetForTesting();
  ncclComm_t comm = nullptr;
  RANK_CHECK(ncclCommInitRank(&comm, n, id, rank) == ncclSuccess, "init failed");
  std::vector<float> v(kCount, static_cast<float>(rank));
  const auto start = std::chrono::steady_clock::now();
  ncclResult_t r = ncclBroadcast(v.data(), v.data(), v.size(), ncclFloat32, rank, comm, nullptr);
  for (int i = 0; i < 8 && r == ncclSuccess; ++i) {
    r = ncclAllReduce(v.data(), v.data(), 1, ncclFloat32, ncclSum, comm, nullptr);
  }
  const std::string message = ncclGetLastError(comm);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  (void)ncclCommAbort(comm);
  RANK_CHECK(r != ncclSuccess, "crossed broadcast roots and the calls after them succeeded");
  RANK_CHECK(seconds < 30, "the failure took %.1f s: it came from the deadline", seconds);
  const bool named = r == ncclInvalidUsage && message.find("root") != std::string::npos;
  RANK_CHECK(named || r == ncclRemoteError, "unexpected failure %d: %s", r, message.c_str());
  fprintf(stderr, "rank %d after %.2f s: %s\n", rank, seconds, message.c_str());
  return named ? 0 : 2;
}

TEST(CrossedRootsMp, TwoRootsOverTcpReportTheMismatchInsteadOfWaitingForTheDeadline) {
  const std::vector<int> statuses =
      mixccl::testing::forkRanks(2, [](int rank, const ncclUniqueId& id) { return runRank(rank, 2, id); });
  int named = 0;
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(statuses[r] >= 0 && WIFEXITED(statuses[r])) << "rank " << r << " status " << statuses[r];
    const int code = WEXITSTATUS(statuses[r]);
    EXPECT_TRUE(code == 0 || code == 2) << "rank " << r << " exit " << code;
    named += code == 0 ? 1 : 0;
  }
  EXPECT_GE(named, 1) << "no rank named the crossed roots";
}

}  // namespace
