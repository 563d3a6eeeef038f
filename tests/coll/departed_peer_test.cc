// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// A rank that leaves (aborts its communicator) while the others go on: every survivor's call that
// needs it must fail within seconds, never wait for MIXCCL_TIMEOUT. Ranks run as threads; the one
// that leaves does so before the others start, so no wait of theirs can be satisfied by it.

#include <gtest/gtest.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/env_guard.h"
#include "tests/support/rank_threads.h"

namespace mixccl::testing {
namespace {

using Clock = std::chrono::steady_clock;

struct Outcome {
  ncclResult_t result = ncclSuccess;
  std::string message;
  double seconds = 0;
};

// Initialises `nranks` ranks; rank `leaver` aborts its communicator at once, and only then every
// other rank runs body(rank, comm) on a thread of its own and aborts its communicator after it, as
// a framework would after an error. Returns each survivor's outcome (the leaver's stays empty).
std::vector<Outcome> runBesideALeaver(int nranks, int leaver,
                                      const std::function<ncclResult_t(int, ncclComm_t)>& body) {
  std::vector<ncclComm_t> comms = initComms(nranks);
  EXPECT_EQ(ncclCommAbort(comms[leaver]), ncclSuccess);
  std::vector<Outcome> out(nranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    if (r == leaver) continue;
    threads.emplace_back([&, r] {
      const auto start = Clock::now();
      out[r].result = body(r, comms[r]);
      out[r].seconds = std::chrono::duration<double>(Clock::now() - start).count();
      if (out[r].result != ncclSuccess) out[r].message = ncclGetLastError(nullptr);
      EXPECT_EQ(ncclCommAbort(comms[r]), ncclSuccess);
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

// Every survivor failed, within seconds (the deadline is 30 s).
void expectAllFailedSoon(const std::vector<Outcome>& out, int leaver) {
  for (size_t r = 0; r < out.size(); ++r) {
    if (static_cast<int>(r) == leaver) continue;
    EXPECT_NE(out[r].result, ncclSuccess) << "rank " << r;
    EXPECT_LT(out[r].seconds, 10.0) << "rank " << r << ": " << out[r].message;
  }
}

// Ranks 1..4 of 5 shrink away rank 0, but rank 4 aborted instead: rank 1, the new rank 0, makes the
// child's id and cannot hand it to rank 4; ranks 2 and 3 got it and wait at the child's root,
// which runs in rank 1's process, for ranks 1 and 4. They waited until MIXCCL_TIMEOUT; rank 1 now
// cancels that root, which tells them why (src/core/comm_split.cc, cancelChildOnFailure).
TEST(DepartedPeerTest, ShrinkBesideASurvivorThatAbortedFailsWithinSeconds) {
  EnvGuard timeout("MIXCCL_TIMEOUT", "30");  // far beyond the bound below
  constexpr int kRanks = 5;
  constexpr int kLeaver = kRanks - 1;
  auto out = runBesideALeaver(kRanks, kLeaver, [&](int rank, ncclComm_t comm) {
    if (rank == 0) return ncclInvalidUsage;  // excluded: does not call ncclCommShrink
    int exclude = 0;
    ncclComm_t child = nullptr;
    ncclResult_t r = ncclCommShrink(comm, &exclude, 1, &child, nullptr, NCCL_SHRINK_DEFAULT);
    if (child != nullptr) {
      EXPECT_EQ(ncclCommAbort(child), ncclSuccess);
    }
    return r;
  });
  expectAllFailedSoon(out, kLeaver);
  for (int r = 2; r < kLeaver; ++r) {
    EXPECT_NE(out[r].message.find("parent rank 1, which made the new communicator's id, failed"), std::string::npos)
        << "rank " << r << ": " << out[r].message;
  }
}

// A watchdog aborts a communicator while its shrink waits at the child's root for a member that
// never calls ncclCommShrink: the child's init watched only its own abort flag, so the shrink
// went on waiting and ncclCommAbort waited for it (30 s, then leaked the communicator).
TEST(DepartedPeerTest, AbortOfTheParentEndsAShrinkWaitingForAMember) {
  EnvGuard timeout("MIXCCL_TIMEOUT", "60");
  constexpr int kRanks = 3;
  std::vector<ncclComm_t> comms = initComms(kRanks);
  if (::testing::Test::HasFailure()) return;
  // Rank 0 shrinks rank 2 away; rank 1, the other survivor, never joins.
  ncclResult_t shrunk = ncclSuccess;
  double shrinkSeconds = 0;
  std::thread shrinker([&] {
    const auto start = Clock::now();
    int exclude = 2;
    ncclComm_t child = nullptr;
    shrunk = ncclCommShrink(comms[0], &exclude, 1, &child, nullptr, NCCL_SHRINK_DEFAULT);
    shrinkSeconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (child != nullptr) EXPECT_EQ(ncclCommAbort(child), ncclSuccess);
  });
  // Whether the abort comes before or after the shrink reaches the child's init, it must end it.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto start = Clock::now();
  EXPECT_EQ(ncclCommAbort(comms[0]), ncclSuccess);
  const double abortSeconds = std::chrono::duration<double>(Clock::now() - start).count();
  shrinker.join();
  EXPECT_NE(shrunk, ncclSuccess);
  EXPECT_LT(abortSeconds, 5.0);
  EXPECT_LT(shrinkSeconds, 10.0);
  for (int r = 1; r < kRanks; ++r) EXPECT_EQ(ncclCommAbort(comms[r]), ncclSuccess);
}

}  // namespace
}  // namespace mixccl::testing
