// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// A communicator used in a fork()ed child: every call there is refused with ncclInvalidUsage
// (destroy and abort too: freeing the copy would close the parent's shared state), and the
// parent's next collectives with its peers still give exact results. Over shm and over TCP.

#include <gtest/gtest.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/config.h"
#include "tests/support/fork_ranks.h"

namespace {

// An exact all-reduce: rank r contributes r + 1 + i at element i.
bool allReduceExact(ncclComm_t comm, int n, int salt) {
  std::vector<int> v(50000);
  int rank = 0;
  ncclCommUserRank(comm, &rank);
  for (size_t i = 0; i < v.size(); ++i) v[i] = rank + 1 + static_cast<int>(i) + salt;
  if (ncclAllReduce(v.data(), v.data(), v.size(), ncclInt32, ncclSum, comm, nullptr) != ncclSuccess) return false;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] != n * (n + 1) / 2 + n * (static_cast<int>(i) + salt)) return false;
  }
  return true;
}

// What the fork child of rank 0 does with its parent's communicator; returns its exit status.
int child(ncclComm_t comm) {
  const int rank = -1;  // for RANK_CHECK: the child is no rank
  auto refused = [&](ncclResult_t r) {
    return r == ncclInvalidUsage && strstr(ncclGetLastError(nullptr), "(fork)") != nullptr;
  };
  int x = 7, count = 0;
  RANK_CHECK(refused(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, nullptr)), "child all-reduce not refused");
  RANK_CHECK(refused(ncclSend(&x, 1, ncclInt32, 1, comm, nullptr)), "child send not refused");
  RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
  (void)ncclBroadcast(&x, &x, 1, ncclInt32, 0, comm, nullptr);
  RANK_CHECK(ncclGroupEnd() == ncclInvalidUsage, "child grouped broadcast not refused");
  RANK_CHECK(refused(ncclCommCount(comm, &count)), "child count not refused");
  RANK_CHECK(refused(ncclCommFinalize(comm)), "child finalize not refused");
  RANK_CHECK(refused(ncclCommDestroy(comm)), "child destroy not refused");
  RANK_CHECK(refused(ncclCommAbort(comm)), "child abort not refused");
  return 0;
}

int runRank(int rank, int n, const ncclUniqueId& id) {
  ncclComm_t comm = nullptr;
  RANK_CHECK(ncclCommInitRank(&comm, n, id, rank) == ncclSuccess, "init failed");
  RANK_CHECK(allReduceExact(comm, n, 0), "first all-reduce");
  // Every rank waits here until rank 0's child is done (it is the next collective).
  if (rank == 0) {
    pid_t pid = fork();
    RANK_CHECK(pid >= 0, "fork");
    if (pid == 0) {
      const int status = child(comm);
      fflush(nullptr);
      _exit(status);  // as a child that returns from main: no destructor touches the copy
    }
    int status = 0;
    RANK_CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
               "the fork child failed (status 0x%x)", status);
  }
  for (int salt = 1; salt <= 3; ++salt) RANK_CHECK(allReduceExact(comm, n, salt), "all-reduce %d after fork", salt);
  int count = 0;
  RANK_CHECK(ncclCommCount(comm, &count) == ncclSuccess && count == n, "count after fork");
  RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
  return 0;
}

// The ranks as processes (tests/support/fork_ranks.h); 0 when every one exited cleanly.
int runJob(int n) {
  const std::vector<int> statuses =
      mixccl::testing::forkRanks(n, [n](int rank, const ncclUniqueId& id) { return runRank(rank, n, id); });
  return mixccl::testing::allExitedCleanly(statuses) ? 0 : 1;
}

class ForkMisuseTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ForkMisuseTest, ChildIsRefusedAndParentKeepsWorking) {
  setenv("NCCL_SHM_DISABLE", std::string(GetParam()) == "tcp" ? "1" : "0", 1);
  setenv("MIXCCL_TIMEOUT", "60", 1);
  mixccl::config::resetForTesting();
  pid_t job = fork();
  ASSERT_GE(job, 0);
  if (job == 0) {
    const int status = runJob(3);
    fflush(nullptr);
    _exit(status);
  }
  int status = 0;
  ASSERT_EQ(waitpid(job, &status, 0), job);
  unsetenv("NCCL_SHM_DISABLE");
  unsetenv("MIXCCL_TIMEOUT");
  mixccl::config::resetForTesting();
  ASSERT_TRUE(WIFEXITED(status)) << "job process died, status 0x" << std::hex << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "a rank failed (its message is above)";
}

INSTANTIATE_TEST_SUITE_P(Transports, ForkMisuseTest, ::testing::Values("shm", "tcp"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
