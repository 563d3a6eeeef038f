// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Two threads calling on one communicator at once (NCCL forbids it): the second is refused with
// ncclInvalidUsage while the first goes on undisturbed; calls any thread may make (count, rank,
// async error) still work; and threads that hammer one communicator never get wrong data.
// Ranks are threads of this process (tests/support/rank_threads.h).

#include <gtest/gtest.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "tests/support/rank_threads.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

bool refusedAsConcurrent(ncclResult_t r) {
  return r == ncclInvalidUsage && strstr(ncclGetLastError(nullptr), "two threads called on communicator") != nullptr;
}

// Rank 0's thread A sits in an all-reduce for ~2 s (rank 1 joins late); meanwhile thread B tries
// every kind of operation call on the same communicator, each of which must be refused, and the
// calls any thread may make, which must work. Afterwards both ranks still agree on everything.
TEST(ThreadMisuse, SecondThreadIsRefusedWhileFirstIsInACall) {
  mixccl::testing::runRanks(2, [](int rank, ncclComm_t comm) {
    std::vector<int> v(1000, rank + 1);
    if (rank == 1) {
      std::this_thread::sleep_for(2s);
      ASSERT_EQ(ncclAllReduce(v.data(), v.data(), v.size(), ncclInt32, ncclSum, comm, nullptr), ncclSuccess);
    } else {
      std::atomic<bool> inCall{false};
      std::thread a([&] {
        inCall = true;
        EXPECT_EQ(ncclAllReduce(v.data(), v.data(), v.size(), ncclInt32, ncclSum, comm, nullptr), ncclSuccess)
            << ncclGetLastError(nullptr);
        inCall = false;
      });
      while (!inCall) std::this_thread::yield();
      std::this_thread::sleep_for(100ms);  // A is inside its call (it waits for rank 1 until ~2 s)
      const auto stop = Clock::now() + 800ms;
      int tries = 0;
      std::vector<int> w(10, 5);
      while (Clock::now() < stop) {
        ++tries;
        EXPECT_TRUE(
            refusedAsConcurrent(ncclAllReduce(w.data(), w.data(), w.size(), ncclInt32, ncclSum, comm, nullptr)));
        EXPECT_TRUE(refusedAsConcurrent(ncclBroadcast(w.data(), w.data(), w.size(), ncclInt32, 0, comm, nullptr)));
        EXPECT_TRUE(refusedAsConcurrent(ncclSend(w.data(), w.size(), ncclInt32, 1, comm, nullptr)));
        ASSERT_EQ(ncclGroupStart(), ncclSuccess);
        (void)ncclAllReduce(w.data(), w.data(), w.size(), ncclInt32, ncclSum, comm, nullptr);
        EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
        ncclComm_t sub = nullptr;
        EXPECT_TRUE(refusedAsConcurrent(ncclCommSplit(comm, 0, 0, &sub, nullptr)));
        EXPECT_TRUE(refusedAsConcurrent(ncclCommFinalize(comm)));
        ncclRedOp_t op;
        int scalar = 2;
        EXPECT_TRUE(
            refusedAsConcurrent(ncclRedOpCreatePreMulSum(&op, &scalar, ncclInt32, ncclScalarHostImmediate, comm)));
        // Allowed from any thread at any time.
        int count = 0, r = -1;
        ncclResult_t async = ncclInternalError;
        EXPECT_EQ(ncclCommCount(comm, &count), ncclSuccess);
        EXPECT_EQ(ncclCommUserRank(comm, &r), ncclSuccess);
        EXPECT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
        EXPECT_EQ(async, ncclSuccess);
        EXPECT_TRUE(count == 2 && r == 0);
        std::this_thread::sleep_for(5ms);
      }
      EXPECT_TRUE(inCall) << "A's call ended early: the refusals above proved nothing";
      a.join();
      EXPECT_GT(tries, 0);
    }
    for (int x : v) ASSERT_EQ(x, 3);
    // Neither rank's sequence moved: the next collective still matches, from any single thread.
    std::vector<int> u(777, 10 * (rank + 1));
    ASSERT_EQ(ncclAllReduce(u.data(), u.data(), u.size(), ncclInt32, ncclSum, comm, nullptr), ncclSuccess)
        << ncclGetLastError(nullptr);
    for (int x : u) ASSERT_EQ(x, 30);
  });
}

// Two threads of rank 0 race to issue kOps all-gathers of a unique token against rank 1's single
// thread, which issues kOps all-gathers of its sequence number and pauses between them (so rank
// 0's calls wait inside and the threads overlap). A refused call is retried. Every completed call
// must have paired a token with the sequence number rank 1 saw it with: no wrong data, no crash,
// and some refusals.
TEST(ThreadMisuse, HammeringThreadsNeverGetWrongData) {
  constexpr int kOps = 200;
  std::vector<int64_t> tokenAt(kOps, -1);  // rank 1: the token it received in its call i
  struct Done {
    int64_t token, seq;
  };
  std::vector<Done> done[2];
  std::atomic<int> refusals{0};
  mixccl::testing::runRanks(2, [&](int rank, ncclComm_t comm) {
    if (rank == 1) {
      for (int64_t i = 0; i < kOps; ++i) {
        int64_t out[2] = {-1, -1};
        ASSERT_EQ(ncclAllGather(&i, out, 1, ncclInt64, comm, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
        ASSERT_EQ(out[1], i);
        tokenAt[i] = out[0];
        std::this_thread::sleep_for(500us);
      }
      return;
    }
    std::atomic<int> remaining{kOps};  // calls still to complete; a thread reserves one per try
    auto hammer = [&](int t) {
      for (int64_t k = 0;; ++k) {
        if (remaining.fetch_sub(1) <= 0) {
          remaining.fetch_add(1);
          return;
        }
        const int64_t token = (t + 1) * 1000000 + k;
        int64_t out[2] = {-1, -1};
        const ncclResult_t r = ncclAllGather(&token, out, 1, ncclInt64, comm, nullptr);
        if (r == ncclInvalidUsage) {
          EXPECT_TRUE(refusedAsConcurrent(r)) << ncclGetLastError(nullptr);
          ++refusals;
          remaining.fetch_add(1);
          std::this_thread::yield();
          continue;
        }
        ASSERT_EQ(r, ncclSuccess) << ncclGetLastError(nullptr);
        ASSERT_EQ(out[0], token);
        done[t].push_back({token, out[1]});
      }
    };
    std::thread t0(hammer, 0), t1(hammer, 1);
    t0.join();
    t1.join();
  });
  std::vector<int> seen(kOps, 0);
  for (const auto& list : done) {
    for (const Done& d : list) {
      ASSERT_TRUE(d.seq >= 0 && d.seq < kOps) << d.seq;
      EXPECT_EQ(tokenAt[d.seq], d.token) << "call " << d.seq;
      ++seen[d.seq];
    }
  }
  for (int i = 0; i < kOps; ++i) EXPECT_EQ(seen[i], 1) << "call " << i;
  EXPECT_GT(refusals.load(), 0) << "the threads never overlapped";
}

}  // namespace
