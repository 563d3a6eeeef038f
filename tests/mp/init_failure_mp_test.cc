// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// A rank that cannot set up its part of a communicator (its device backend does not load, its
// configuration is out of range) still joins the peer-info exchange and says why there
// (PROTOCOL.md, "Peer info", the init-failure field): every other rank fails at once with
// ncclRemoteError naming it and its reason, instead of waiting for it until the deadline.

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

constexpr int kRanks = 3;
constexpr int kFailing = 1;

// Rank kFailing runs with `name`=`value`; every rank checks how its init ended: the failing one
// with its own error (`reason` in the message), the others with ncclRemoteError naming it and the
// reason, all long before MIXCCL_TIMEOUT.
void expectPromptFailureNamingTheRank(const char* name, const char* value, const char* reason) {
  const std::vector<int> statuses = mixccl::testing::forkRanks(kRanks, [&](int rank, const ncclUniqueId& id) {
    setenv("MIXCCL_TIMEOUT", "60", 1);
    if (rank == kFailing) setenv(name, value, 1);
    mixccl::config::resetForTesting();
    const auto start = std::chrono::steady_clock::now();
    ncclComm_t comm = nullptr;
    const ncclResult_t r = ncclCommInitRank(&comm, kRanks, id, rank);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string message = ncclGetLastError(nullptr);
    if (comm != nullptr) (void)ncclCommAbort(comm);
    RANK_CHECK(r != ncclSuccess, "init succeeded although rank %d could not take part", kFailing);
    RANK_CHECK(seconds < 20, "init failed only after %.1f s: it waited for the deadline", seconds);
    RANK_CHECK(message.find(reason) != std::string::npos, "the message does not say '%s': %s", reason, message.c_str());
    if (rank != kFailing) {
      RANK_CHECK(r == ncclRemoteError, "expected ncclRemoteError, got %d: %s", r, message.c_str());
      const std::string named = "rank " + std::to_string(kFailing) + " (host ";
      RANK_CHECK(message.find(named) != std::string::npos, "the message does not name rank %d: %s", kFailing,
                 message.c_str());
    }
    return 0;
  });
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(statuses[r] >= 0 && WIFEXITED(statuses[r])) << "rank " << r << " status " << statuses[r];
    EXPECT_EQ(WEXITSTATUS(statuses[r]), 0) << "rank " << r;
  }
}

TEST(InitFailureMp, ABackendThatDoesNotLoadFailsEveryRankAtOnce) {
  expectPromptFailureNamingTheRank("MIXCCL_DEVICE_BACKEND", "/nonexistent/libmixccl-no-such-plugin.so",
                                   "cannot load device backend plugin");
}

TEST(InitFailureMp, AConfigurationOutOfRangeFailsEveryRankAtOnce) {
  expectPromptFailureNamingTheRank("MIXCCL_FIFO_DEPTH", "0", "MIXCCL_FIFO_DEPTH=0 out of range");
}

}  // namespace
