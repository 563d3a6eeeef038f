// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Ranks as real processes (fork) over shm and over TCP: collectives with exact checks, grouped
// send/recv, split, and no shared-memory segment left behind afterwards. The Algorithms instances
// force each algorithm through NCCL_ALGO (every one forcibleAlgorithms() lists, so a new one is
// picked up without an edit) and add the light matrix of tests/support/coll_checks.h for the
// collectives it has a form of: every algorithm over shm and over TCP at rank counts spread over
// 2-9, and at 16 processes over one transport or the other.

#include <gtest/gtest.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <ostream>
#include <string>
#include <vector>

#include "common/config.h"
#include "tests/support/algo_policy.h"
#include "tests/support/coll_checks.h"
#include "tests/support/fork_ranks.h"
#include "tests/support/private_shm.h"

namespace {

using mixccl::algo::Algo;

// The body of one rank process; returns its exit status. `algo` other than kDefault: NCCL_ALGO
// forces it, and the rank also checks the light matrix of the collectives it has a form of.
int runRank(int rank, int n, const ncclUniqueId& id, Algo algo) {
  ncclComm_t comm = nullptr;
  RANK_CHECK(ncclCommInitRank(&comm, n, id, rank) == ncclSuccess, "init failed");
  // A multi-chunk all-reduce (4 MiB of floats), exact.
  std::vector<float> v(1 << 20);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i + rank) % 4);
  RANK_CHECK(ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclSum, comm, nullptr) == ncclSuccess,
             "allreduce");
  for (size_t i = 0; i < v.size(); ++i) {
    float want = 0;
    for (int r = 0; r < n; ++r) want += static_cast<float>((i + r) % 4);
    RANK_CHECK(v[i] == want, "allreduce element %zu = %g, want %g", i, v[i], want);
  }
  // All-to-all of int64 blocks.
  const size_t block = 10007;
  std::vector<int64_t> a(n * block), b(n * block);
  for (int p = 0; p < n; ++p) {
    for (size_t i = 0; i < block; ++i) a[p * block + i] = rank * 1000000 + p * 10000 + static_cast<int64_t>(i);
  }
  RANK_CHECK(ncclAlltoAll(a.data(), b.data(), block, ncclInt64, comm, nullptr) == ncclSuccess, "alltoall");
  for (int p = 0; p < n; ++p) {
    for (size_t i = 0; i < block; ++i) {
      RANK_CHECK(b[p * block + i] == p * 1000000 + rank * 10000 + static_cast<int64_t>(i), "alltoall block %d", p);
    }
  }
  // Ring exchange with grouped send/recv, and a broadcast from the last rank.
  std::vector<int> out(333, rank), in(333, -1);
  RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
  ncclSend(out.data(), out.size(), ncclInt32, (rank + 1) % n, comm, nullptr);
  ncclRecv(in.data(), in.size(), ncclInt32, (rank + n - 1) % n, comm, nullptr);
  RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end");
  RANK_CHECK(in[332] == (rank + n - 1) % n, "ring exchange got %d", in[332]);
  RANK_CHECK(ncclBroadcast(out.data(), in.data(), 333, ncclInt32, n - 1, comm, nullptr) == ncclSuccess, "bcast");
  RANK_CHECK(in[0] == n - 1, "broadcast got %d", in[0]);
  if (algo != Algo::kDefault) {
    using namespace mixccl::testing;
    checkReductions(rank, n, comm, Matrix::kLight, collectivesOf(algo));
    if (!::testing::Test::HasFailure()) checkDataMovement(rank, n, comm, Matrix::kLight, collectivesOf(algo));
    RANK_CHECK(!::testing::Test::HasFailure(), "%s: the exact checks failed (their messages are above)",
               mixccl::algo::algoName(algo));
  }
  // Split into halves and all-reduce in each.
  ncclComm_t half = nullptr;
  RANK_CHECK(ncclCommSplit(comm, rank % 2, rank, &half, nullptr) == ncclSuccess, "split");
  int halfSize = 0;
  ncclCommCount(half, &halfSize);
  int one = 1;
  RANK_CHECK(ncclAllReduce(&one, &one, 1, ncclInt32, ncclSum, half, nullptr) == ncclSuccess, "half allreduce");
  RANK_CHECK(one == halfSize, "half allreduce got %d of %d", one, halfSize);
  RANK_CHECK(ncclCommDestroy(half) == ncclSuccess, "destroy half");
  RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
  return 0;
}

struct Param {
  const char* transport;
  int nranks;
  Algo algo = Algo::kDefault;  // kDefault: the tuner chooses; else NCCL_ALGO forces it
};

// Readable parameter in test logs (instead of gtest's byte dump).
void PrintTo(const Param& p, std::ostream* os) {
  *os << p.transport << " x " << p.nranks << " ranks";
  if (p.algo != Algo::kDefault) *os << ", NCCL_ALGO=" << mixccl::testing::algorithmPolicy(p.algo) << ", light matrix";
}

std::string paramName(const ::testing::TestParamInfo<Param>& info) {
  return std::string(info.param.transport) + "_np" + std::to_string(info.param.nranks) +
         (info.param.algo != Algo::kDefault ? "_" + mixccl::testing::algoTestName(info.param.algo) : "");
}

// Every algorithm over shm and over TCP, at rank counts that move through 2-9 from one algorithm
// to the next (a different count on each transport), and at 16 processes over shm for every
// other algorithm and over TCP for the rest.
std::vector<Param> algorithmJobs() {
  constexpr int kCounts[] = {2, 3, 4, 5, 6, 7, 8, 9};
  constexpr size_t kNumCounts = std::size(kCounts);
  std::vector<Param> out;
  const std::vector<Algo> algos = mixccl::testing::forcibleAlgorithms();
  for (size_t a = 0; a < algos.size(); ++a) {
    out.push_back(Param{"shm", kCounts[a % kNumCounts], algos[a]});
    out.push_back(Param{"tcp", kCounts[(a + kNumCounts / 2 + 1) % kNumCounts], algos[a]});
    out.push_back(Param{a % 2 == 0 ? "shm" : "tcp", 16, algos[a]});
  }
  return out;
}

class CollMpTest : public ::testing::TestWithParam<Param> {};

// Exit codes of the job process (below); anything else is a failed rank or a crash.
constexpr int kJobOk = 0;
constexpr int kJobRankFailed = 1;
constexpr int kJobSegmentsLeft = 2;
constexpr int kJobNoPrivateShm = 77;

// One job: a private /dev/shm, n rank processes (tests/support/fork_ranks.h), then the leftover
// check. Runs in its own forked process so the mount namespace and the id's root thread end with it.
int runJob(int n, Algo algo) {
  std::string why;
  const bool privateShm = mixccl::testing::enterPrivateDevShm(&why);
  if (!privateShm) fprintf(stderr, "job: no private /dev/shm (%s); leftovers not checked\n", why.c_str());
  const std::vector<int> statuses =
      mixccl::testing::forkRanks(n, [n, algo](int rank, const ncclUniqueId& id) { return runRank(rank, n, id, algo); });
  if (!mixccl::testing::allExitedCleanly(statuses)) return kJobRankFailed;
  if (!privateShm) return kJobNoPrivateShm;
  const int left = mixccl::testing::countMixcclShmSegments();
  if (left != 0) fprintf(stderr, "job: %d shared-memory segments left in /dev/shm\n", left);
  return left == 0 ? kJobOk : kJobSegmentsLeft;
}

TEST_P(CollMpTest, CollectivesAcrossProcesses) {
  const bool forced = GetParam().algo != Algo::kDefault;
  setenv("NCCL_SHM_DISABLE", std::string(GetParam().transport) == "tcp" ? "1" : "0", 1);
  setenv("MIXCCL_TIMEOUT", "120", 1);
  setenv("NCCL_ALGO", mixccl::testing::algorithmPolicy(GetParam().algo).c_str(), 1);
  if (forced) {
    // As in the thread suites: small chunks, so the large count streams through many messages.
    setenv("MIXCCL_CHUNK_SIZE", "16384", 1);
    setenv("MIXCCL_FIFO_DEPTH", "4", 1);
  }
  mixccl::config::resetForTesting();
  pid_t job = fork();
  ASSERT_GE(job, 0);
  if (job == 0) {
    int status = runJob(GetParam().nranks, GetParam().algo);
    fflush(nullptr);
    _exit(status);
  }
  int status = 0;
  ASSERT_EQ(waitpid(job, &status, 0), job);
  unsetenv("NCCL_ALGO");
  unsetenv("MIXCCL_CHUNK_SIZE");
  unsetenv("MIXCCL_FIFO_DEPTH");
  mixccl::config::resetForTesting();
  ASSERT_TRUE(WIFEXITED(status)) << "job process died, status 0x" << std::hex << status;
  const int code = WEXITSTATUS(status);
  ASSERT_NE(code, kJobRankFailed) << "a rank failed (its message is above)";
  ASSERT_NE(code, kJobSegmentsLeft) << "shared-memory segments left in /dev/shm";
  if (code == kJobNoPrivateShm) GTEST_SKIP() << "collectives passed; leftover check needs a private /dev/shm (root)";
  EXPECT_EQ(code, kJobOk);
}

INSTANTIATE_TEST_SUITE_P(Processes, CollMpTest,
                         ::testing::Values(Param{"shm", 2}, Param{"shm", 3}, Param{"shm", 4}, Param{"tcp", 2},
                                           Param{"tcp", 3}, Param{"tcp", 4}),
                         paramName);
INSTANTIATE_TEST_SUITE_P(Algorithms, CollMpTest, ::testing::ValuesIn(algorithmJobs()), paramName);

}  // namespace
