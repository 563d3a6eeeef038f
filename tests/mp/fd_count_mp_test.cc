// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Connections stay proportional to the peers a schedule talks to. Ranks over TCP all-reduce
// while rank 0 comes late, so every other rank waits long enough to probe (op_stamp.h); then each
// rank counts its open file descriptors. A probe to every peer used to open a full mesh
// (136 descriptors per rank at 64 ranks); a ring needs a handful of lanes, the bootstrap's
// barrier log2(n) more. MIXCCL_FD_TEST_RANKS sets the rank count (default 16; the check
// runs 64).

#include <dirent.h>
#include <gtest/gtest.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "common/config.h"
#include "tests/support/fork_ranks.h"

namespace {

int openFds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.' ? 1 : 0;
    closedir(d);
    --n;  // the directory stream itself
  }
  return n;
}

// Exit status: 0 and the descriptor count written to `report` (one int), or 1 on failure.
int runRank(int rank, int n, const ncclUniqueId& id, int report) {
  const int before = openFds();
  ncclComm_t comm = nullptr;
  if (ncclCommInitRank(&comm, n, id, rank) != ncclSuccess) return 1;
  if (rank == 0) std::this_thread::sleep_for(std::chrono::seconds(1));
  std::vector<float> v(4096, 1.0f);
  for (int iter = 0; iter < 2; ++iter) {
    if (ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess) {
      fprintf(stderr, "rank %d: allreduce: %s\n", rank, ncclGetLastError(nullptr));
      return 1;
    }
  }
  if (v[0] != static_cast<float>(n) * n) return 1;
  const int grown = openFds() - before;
  if (write(report, &grown, sizeof(grown)) != static_cast<ssize_t>(sizeof(grown))) return 1;
  return ncclCommDestroy(comm) == ncclSuccess ? 0 : 1;
}

TEST(FdCount, LateRankOpensNoFullMesh) {
  const char* env = getenv("MIXCCL_FD_TEST_RANKS");
  const int n = env != nullptr ? atoi(env) : 16;
  ASSERT_GE(n, 4);
  setenv("NCCL_SHM_DISABLE", "1", 1);
  setenv("MIXCCL_TIMEOUT", "120", 1);
  mixccl::config::resetForTesting();
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t job = fork();
  ASSERT_GE(job, 0);
  if (job == 0) {
    close(fds[0]);
    const std::vector<int> statuses =
        mixccl::testing::forkRanks(n, [&](int rank, const ncclUniqueId& id) { return runRank(rank, n, id, fds[1]); });
    int failed = 0;
    for (int s : statuses) failed += mixccl::testing::exitedCleanly(s) ? 0 : 1;
    _exit(failed == 0 ? 0 : 1);
  }
  close(fds[1]);
  std::vector<int> grown;
  int g = 0;
  while (read(fds[0], &g, sizeof(g)) == static_cast<ssize_t>(sizeof(g))) grown.push_back(g);
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(job, &status, 0), job);
  ASSERT_TRUE(mixccl::testing::exitedCleanly(status)) << "a rank failed (its message is above)";
  ASSERT_EQ(static_cast<int>(grown.size()), n);
  // Per rank: listeners and the bootstrap ring and barrier (about 2 + 2 log2 n), four ring lanes
  // (data both ways plus a probe or mismatch look each way): well under n for n >= 16.
  const int bound = 16 + 2 * static_cast<int>(std::ceil(std::log2(n)));
  int most = 0;
  for (int x : grown) most = std::max(most, x);
  printf("%d ranks: at most %d descriptors opened per rank (bound %d)\n", n, most, bound);
  EXPECT_LE(most, bound);
}

}  // namespace
