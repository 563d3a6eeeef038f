// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// A peer that aborts after it took this rank's probe, while its process lives on, is noticed
// long before MIXCCL_TIMEOUT. Two ranks, no earlier collective: rank 0 calls a broadcast from
// root 1 and waits for a lane that rank 1 never opens. Rank 1 sits in a receive on the
// point-to-point lane (its transport accepts rank 0's probe meanwhile) until a second thread
// aborts its communicator, 1 s in; then it stays alive for 6 s, so neither a closed lane from
// it nor its pid tells rank 0 anything. Only a later probe, refused by the lane rank 0 opened to
// it, does (stream_checks.cc, sendProbes). The fault trials met this on RDMA: a survivor waited 13 s.

#include <gtest/gtest.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "common/config.h"
#include "tests/support/fork_ranks.h"
#include "transports/rdma/rdma_presence.h"

namespace {

constexpr size_t kCount = 1 << 16;
constexpr auto kAbortAfter = std::chrono::milliseconds(1000);
constexpr auto kAliveAfterAbort = std::chrono::seconds(6);
// From the abort: the next probe round (one per second of stall), the peer's refusal seen by a
// few idle rounds, and slack for a loaded machine; well short of kAliveAfterAbort.
constexpr auto kDetectWithin = std::chrono::seconds(4);

int runRank(int rank, const ncclUniqueId& id) {
  ncclComm_t comm = nullptr;
  RANK_CHECK(ncclCommInitRank(&comm, 2, id, rank) == ncclSuccess, "init failed");
  std::vector<float> buf(kCount, 1.0f);
  if (rank == 1) {
    std::thread aborter([comm] {
      std::this_thread::sleep_for(kAbortAfter);
      if (ncclCommAbort(comm) != ncclSuccess) fprintf(stderr, "rank 1: ncclCommAbort failed\n");
    });
    const ncclResult_t r = ncclRecv(buf.data(), kCount, ncclFloat32, 0, comm, nullptr);
    aborter.join();
    RANK_CHECK(r != ncclSuccess, "the receive succeeded although nobody sent");
    std::this_thread::sleep_for(kAliveAfterAbort);  // alive, communicator gone
    return 0;
  }
  const auto start = std::chrono::steady_clock::now();
  const ncclResult_t r = ncclBroadcast(buf.data(), buf.data(), kCount, ncclFloat32, 1, comm, nullptr);
  const auto took = std::chrono::steady_clock::now() - start;
  RANK_CHECK(r == ncclRemoteError || r == ncclSystemError, "broadcast returned %d, want an error", r);
  RANK_CHECK(took < kAbortAfter + kDetectWithin, "the broadcast failed only after %.1f s",
             std::chrono::duration<double>(took).count());
  RANK_CHECK(ncclCommAbort(comm) == ncclSuccess, "abort");
  return 0;
}

class AbortAfterProbeTest : public ::testing::TestWithParam<std::string> {};

TEST_P(AbortAfterProbeTest, WaitingRankFailsSoon) {
  const std::string t = GetParam();
  if (t == "rdma" && !mixccl::anyRdmaDevice()) GTEST_SKIP() << "no RDMA device (scripts/rdma-check.sh runs it in a VM)";
  setenv("NCCL_SHM_DISABLE", t == "shm" ? "0" : "1", 1);
  setenv("NCCL_NET", t == "rdma" ? "IB" : "Socket", 1);
  setenv("MIXCCL_TIMEOUT", "60", 1);
  mixccl::config::resetForTesting();
  const int status = mixccl::testing::forkJob(2, runRank);
  unsetenv("NCCL_NET");
  EXPECT_TRUE(mixccl::testing::exitedCleanly(status)) << "a rank failed (its message is above)";
}

INSTANTIATE_TEST_SUITE_P(Transports, AbortAfterProbeTest, ::testing::Values("shm", "tcp", "rdma"),
                         [](const auto& info) { return info.param; });

}  // namespace
