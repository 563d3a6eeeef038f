// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Ranks started with different NCCL_ALGO choose different algorithms for the same call. The
// algorithm travels in the operation stamp (src/core/op_stamp.h), so every rank fails with
// ncclInvalidUsage and a message naming NCCL_ALGO, long before MIXCCL_TIMEOUT, instead of
// exchanging data in two incompatible orders. Ranks as processes, since the policy is read
// from each process's environment.

#include <gtest/gtest.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/config.h"
#include "tests/support/fork_ranks.h"

namespace {

// `policies[r]` is rank r's NCCL_ALGO. Exit status 0 when the rank's all-reduce failed as it
// should; a rank whose own policy is the odd one out may also be the one that notices.
int runRank(int rank, int n, const ncclUniqueId& id, const std::vector<const char*>& policies) {
  setenv("NCCL_ALGO", policies[rank], 1);
  mixccl::config::resetForTesting();
  ncclComm_t comm = nullptr;
  RANK_CHECK(ncclCommInitRank(&comm, n, id, rank) == ncclSuccess, "init failed");
  std::vector<float> v(3000, 1.0f);
  const auto start = std::chrono::steady_clock::now();
  const ncclResult_t r = ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclSum, comm, nullptr);
  const std::string message = ncclGetLastError(comm);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  (void)ncclCommAbort(comm);
  RANK_CHECK(r != ncclSuccess, "the all-reduce succeeded although the ranks ran different algorithms");
  RANK_CHECK(seconds < 30, "the failure took %.1f s: it came from a deadline, not from the stamp", seconds);
  // A rank fails either on a stamp it read (the message names the algorithms) or because a peer
  // that read one aborted (a remote error).
  const bool named = r == ncclInvalidUsage && message.find("NCCL_ALGO") != std::string::npos;
  RANK_CHECK(named || r == ncclRemoteError || r == ncclSystemError, "unexpected failure %d: %s", r, message.c_str());
  fprintf(stderr, "rank %d: %s: %s\n", rank, named ? "noticed the algorithm mismatch" : "failed after its peer",
          message.c_str());
  return named ? 0 : 2;
}

// The ranks as processes (tests/support/fork_ranks.h); 0 when every rank failed as it should and
// at least one named the mismatch.
int runJob(const std::vector<const char*>& policies) {
  const int n = static_cast<int>(policies.size());
  const std::vector<int> statuses =
      mixccl::testing::forkRanks(n, [&](int rank, const ncclUniqueId& id) { return runRank(rank, n, id, policies); });
  int noticed = 0, result = 0;
  for (int r = 0; r < n; ++r) {
    const int code = statuses[r] >= 0 && WIFEXITED(statuses[r]) ? WEXITSTATUS(statuses[r]) : -1;
    if (code != 0 && code != 2) {
      fprintf(stderr, "job: rank %d ended with status 0x%x\n", r, statuses[r]);
      result = 1;
    }
    noticed += code == 0 ? 1 : 0;
  }
  if (noticed == 0) fprintf(stderr, "job: no rank named the NCCL_ALGO mismatch\n");
  return noticed == 0 ? 1 : result;
}

class AlgoMismatchTest : public ::testing::TestWithParam<const char*> {};

TEST_P(AlgoMismatchTest, RanksWithDifferentNcclAlgoFailClearly) {
  setenv("NCCL_SHM_DISABLE", std::string(GetParam()) == "tcp" ? "1" : "0", 1);
  setenv("MIXCCL_TIMEOUT", "300", 1);
  mixccl::config::resetForTesting();
  const std::vector<std::vector<const char*>> jobs = {
      {"allreduce:ring", "allreduce:recursive-doubling"},
      {"allreduce:ring", "allreduce:ring", "allreduce:recursive-doubling", "allreduce:ring"}};
  for (const auto& policies : jobs) {
    // A job process per job: forkRanks wants a single-threaded parent.
    pid_t job = fork();
    ASSERT_GE(job, 0);
    if (job == 0) {
      const int status = runJob(policies);
      fflush(nullptr);
      _exit(status);
    }
    int status = 0;
    ASSERT_EQ(waitpid(job, &status, 0), job);
    ASSERT_TRUE(WIFEXITED(status)) << "job process died, status 0x" << std::hex << status;
    EXPECT_EQ(WEXITSTATUS(status), 0) << policies.size() << " ranks: see the ranks' messages above";
  }
  unsetenv("NCCL_SHM_DISABLE");
  unsetenv("MIXCCL_TIMEOUT");
  mixccl::config::resetForTesting();
}

INSTANTIATE_TEST_SUITE_P(Transports, AlgoMismatchTest, ::testing::Values("shm", "tcp"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
