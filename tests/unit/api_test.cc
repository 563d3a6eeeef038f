// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// The communicator life cycle through the public API (ranks as threads): every init flavour,
// split, shrink, revoke, finalize/destroy/abort, queries, memory and registration calls, and
// the messages of ncclGetLastError.

#include <dirent.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/config.h"
#include "common/socket.h"
#include "src/core/communicator.h"
#include "tests/support/rank_threads.h"
#include "tests/support/thread_names.h"

namespace mixccl::testing {
namespace {

class ApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("NCCL_COMM_ID");
    setenv("MIXCCL_TIMEOUT", "60", 1);
    config::resetForTesting();
  }
};

// Polls ncclCommGetAsyncError (up to 30 s) until a non-blocking init or finalize is done; returns
// its result (ncclInProgress if it never finished).
ncclResult_t waitAsync(ncclComm_t comm) {
  ncclResult_t async = ncclInProgress;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (async == ncclInProgress && std::chrono::steady_clock::now() < until) {
    if (ncclCommGetAsyncError(comm, &async) != ncclSuccess) return ncclInternalError;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return async;
}

// Makes n non-blocking communicators from one unique id, inside a group when `grouped`, and waits
// until their inits are done.
void initNonBlocking(int n, ncclComm_t* c, bool grouped) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  if (grouped) ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; ++r) {
    const ncclResult_t e = ncclCommInitRankConfig(&c[r], n, id, r, &cfg);
    ASSERT_TRUE(e == ncclSuccess || e == ncclInProgress) << e;
  }
  if (grouped) {
    const ncclResult_t e = ncclGroupEnd();
    ASSERT_TRUE(e == ncclSuccess || e == ncclInProgress) << e;
  }
  for (int r = 0; r < n; ++r) ASSERT_EQ(waitAsync(c[r]), ncclSuccess);
}

// Sums {rank+1} over the communicator and checks the result.
void expectAllReduceWorks(ncclComm_t comm) {
  int n = 0, rank = 0;
  ASSERT_EQ(ncclCommCount(comm, &n), ncclSuccess);
  ASSERT_EQ(ncclCommUserRank(comm, &rank), ncclSuccess);
  std::vector<int> v(1000, rank + 1);
  ASSERT_EQ(ncclAllReduce(v.data(), v.data(), v.size(), ncclInt32, ncclSum, comm, nullptr), ncclSuccess)
      << ncclGetLastError(comm);
  for (int x : v) ASSERT_EQ(x, n * (n + 1) / 2);
}

// Sums {1, 2} over the two children of a split driven from this thread (in a group, as one
// thread must), checks it, and destroys them.
void expectTwoChildrenWorkThenDestroy(ncclComm_t* subs) {
  std::vector<std::vector<int>> v(2, std::vector<int>(10));
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r) {
    ASSERT_NE(subs[r], nullptr);
    std::fill(v[r].begin(), v[r].end(), r + 1);
    ASSERT_EQ(ncclAllReduce(v[r].data(), v[r].data(), 10, ncclInt32, ncclSum, subs[r], nullptr), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(v[r][0], 3);
    EXPECT_EQ(ncclCommDestroy(subs[r]), ncclSuccess);
  }
}

TEST_F(ApiTest, VersionAndErrorStrings) {
  int version = 0;
  ASSERT_EQ(ncclGetVersion(&version), ncclSuccess);
  EXPECT_EQ(version, NCCL_VERSION_CODE);
  EXPECT_EQ(version, 22809);
  EXPECT_EQ(ncclGetVersion(nullptr), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("version"), std::string::npos);
  for (int r = 0; r < ncclNumResults; ++r) EXPECT_STRNE(ncclGetErrorString(static_cast<ncclResult_t>(r)), "");
  EXPECT_STREQ(ncclGetErrorString(static_cast<ncclResult_t>(99)), "unknown result code");
}

// NCCL's ncclGetLastError returns a buffer that outlives later calls; callers keep the pointer, or
// evaluate it before the failing call (printf("%d %s", ncclX(...), ncclGetLastError(NULL)) does
// with GCC). A longer message must not move it (a std::string's c_str() did: use after free).
TEST_F(ApiTest, LastErrorPointerSurvivesALongerMessage) {
  // On a new thread, so no earlier test has left this thread's message storage large.
  std::thread([] {
    EXPECT_EQ(ncclGetVersion(nullptr), ncclInvalidArgument);
    const char* kept = ncclGetLastError(nullptr);
    const size_t keptLength = strlen(kept);
    // A config without NCCL_CONFIG_INITIALIZER's magic is refused with a long explanation.
    ncclUniqueId id;
    ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
    bad.magic = 0;
    ncclComm_t comm = nullptr;
    EXPECT_EQ(ncclCommInitRankConfig(&comm, 1, id, 0, &bad), ncclInvalidArgument);
    if (comm != nullptr) (void)ncclCommDestroy(comm);
    const char* now = ncclGetLastError(nullptr);
    ASSERT_GT(strlen(now), 2 * keptLength) << now;
    EXPECT_EQ(kept, now) << "ncclGetLastError's buffer moved when a longer message replaced it";
  }).join();
}

TEST_F(ApiTest, InitAllAndGroupedCollectivesFromOneThread) {
  constexpr int kRanks = 4;
  ncclComm_t comms[kRanks];
  int devs[kRanks] = {3, 2, 1, 0};
  ASSERT_EQ(ncclCommInitAll(comms, kRanks, devs), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<std::vector<float>> bufs(kRanks, std::vector<float>(4099));
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) {
    int dev = -1;
    ASSERT_EQ(ncclCommCuDevice(comms[r], &dev), ncclSuccess);
    EXPECT_EQ(dev, devs[r]);
    std::fill(bufs[r].begin(), bufs[r].end(), static_cast<float>(r));
    ASSERT_EQ(ncclAllReduce(bufs[r].data(), bufs[r].data(), bufs[r].size(), ncclFloat32, ncclMax, comms[r], nullptr),
              ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < kRanks; ++r) {
    for (float x : bufs[r]) ASSERT_EQ(x, kRanks - 1.0f);
    EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
  }
}

TEST_F(ApiTest, SeveralRanksInitialisedInsideOneGroup) {
  constexpr int kRanks = 3;
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comms[kRanks];
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(ncclCommInitRank(&comms[r], kRanks, id, r), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < kRanks; ++r) {
    ncclResult_t async = ncclInProgress;
    ASSERT_EQ(ncclCommGetAsyncError(comms[r], &async), ncclSuccess);
    EXPECT_EQ(async, ncclSuccess);
  }
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
}

TEST_F(ApiTest, NonBlockingInitIsPolledWithGetAsyncError) {
  constexpr int kRanks = 2;
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comms[kRanks];
  for (int r = 0; r < kRanks; ++r) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    config.commName = "nonblocking";
    ncclResult_t res = ncclCommInitRankConfig(&comms[r], kRanks, id, r, &config);
    ASSERT_TRUE(res == ncclInProgress || res == ncclSuccess) << ncclGetErrorString(res);
  }
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(waitAsync(comms[r]), ncclSuccess);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) threads.emplace_back([&, r] { expectAllReduceWorks(comms[r]); });
  for (auto& t : threads) t.join();
  // Non-blocking finalize returns at once, as NCCL's does; it completes once every rank called it
  // (one thread drives all ranks here, so a blocking finalize would wait for the next rank forever).
  for (int r = 0; r < kRanks; ++r) {
    const ncclResult_t res = ncclCommFinalize(comms[r]);
    EXPECT_TRUE(res == ncclInProgress || res == ncclSuccess) << ncclGetErrorString(res);
  }
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(waitAsync(comms[r]), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
}

// A non-blocking init whose peer has not come yet: destroy is refused at once as NCCL refuses it
// (ncclCommEnsureReady: ncclInvalidArgument while the init is in progress) and the communicator
// stays usable; abort stops the init and frees it at once. Destroy used to wait for the init,
// until MIXCCL_TIMEOUT (60 s here, 30 min by default).
TEST_F(ApiTest, DestroyOrAbortDuringANonBlockingInitReturnsAtOnce) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t e = ncclCommInitRankConfig(&comm, 2, id, 0, &cfg);  // rank 1 never comes
  ASSERT_TRUE(e == ncclInProgress || e == ncclSuccess) << ncclGetErrorString(e);
  ncclResult_t async = ncclSuccess;
  ASSERT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
  ASSERT_EQ(async, ncclInProgress);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ncclCommDestroy(comm), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(comm)).find("still initialising"), std::string::npos)
      << ncclGetLastError(comm);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));  // MIXCCL_TIMEOUT is 60
  int n = 0;
  EXPECT_EQ(ncclCommCount(comm, &n), ncclSuccess) << "a refused destroy leaves the handle";
  EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(ncclCommCount(comm, &n), ncclInvalidArgument) << "abort freed it";

  // Abort alone, on a fresh init: prompt as well.
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  comm = nullptr;
  const ncclResult_t e2 = ncclCommInitRankConfig(&comm, 2, id, 1, &cfg);
  ASSERT_TRUE(e2 == ncclInProgress || e2 == ncclSuccess) << ncclGetErrorString(e2);
  const auto start2 = std::chrono::steady_clock::now();
  EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
  EXPECT_LT(std::chrono::steady_clock::now() - start2, std::chrono::seconds(10));
}

TEST_F(ApiTest, ConfigIsValidated) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = reinterpret_cast<ncclComm_t>(0x1);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.magic = 0x12345678;
  EXPECT_EQ(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclInvalidArgument);
  EXPECT_EQ(comm, nullptr);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("magic"), std::string::npos);
  config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 7;
  EXPECT_EQ(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclInvalidArgument);
  // An older, smaller config (as an application built against an older header passes) is read
  // only up to its size.
  ncclConfig_t small = NCCL_CONFIG_INITIALIZER;
  small.size = offsetof(ncclConfig_t, netName);
  small.blocking = 1;
  ASSERT_EQ(ncclCommInitRankConfig(&comm, 1, id, 0, &small), ncclSuccess) << ncclGetLastError(nullptr);
  expectAllReduceWorks(comm);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// A slot count or size beyond int is refused as it reads, not as what it narrows to (1 here).
TEST_F(ApiTest, OutOfRangeSlotKnobsFailInit) {
  for (const char* knob : {"MIXCCL_FIFO_DEPTH=4294967297", "MIXCCL_FIFO_DEPTH=0", "MIXCCL_CHUNK_SIZE=-4096",
                           "MIXCCL_CHUNK_SIZE=4294967296"}) {
    const std::string kv = knob;
    const std::string name = kv.substr(0, kv.find('='));
    setenv(name.c_str(), kv.substr(kv.find('=') + 1).c_str(), 1);
    config::resetForTesting();
    ncclComm_t comm = nullptr;
    EXPECT_EQ(ncclCommInitAll(&comm, 1, nullptr), ncclInvalidArgument) << knob;
    EXPECT_NE(std::string(ncclGetLastError(nullptr)).find(kv.substr(kv.find('=') + 1)), std::string::npos)
        << knob << ": " << ncclGetLastError(nullptr);
    if (comm != nullptr) (void)ncclCommDestroy(comm);
    unsetenv(name.c_str());
    config::resetForTesting();
  }
}

// A non-blocking init fails on its own thread; the program learns of it from
// ncclCommGetAsyncError on another. ncclGetLastError there must say why (NCCL's last error is
// process-wide), not repeat an older message of the polling thread.
TEST_F(ApiTest, AsyncInitFailureMessageReachesThePollingThread) {
  setenv("MIXCCL_FIFO_DEPTH", "4294967297", 1);
  config::resetForTesting();
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t e = ncclCommInitRankConfig(&comm, 1, id, 0, &cfg);
  EXPECT_NE(ncclCommInitRank(nullptr, 1, id, 0), ncclSuccess);  // an older message on this thread
  if (e == ncclSuccess || e == ncclInProgress) e = waitAsync(comm);
  EXPECT_EQ(e, ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(comm)).find("4294967297"), std::string::npos) << ncclGetLastError(comm);
  if (comm != nullptr) (void)ncclCommDestroy(comm);
  unsetenv("MIXCCL_FIFO_DEPTH");
  config::resetForTesting();
}

TEST_F(ApiTest, BadArgumentsAreRejectedWithMessages) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = nullptr;
  EXPECT_EQ(ncclCommInitRank(nullptr, 1, id, 0), ncclInvalidArgument);
  EXPECT_EQ(ncclCommInitRank(&comm, 0, id, 0), ncclInvalidArgument);
  EXPECT_EQ(ncclCommInitRank(&comm, 2, id, 2), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("rank 2"), std::string::npos);
  ncclUniqueId garbage;
  memset(&garbage, 0x5a, sizeof(garbage));
  EXPECT_EQ(ncclCommInitRank(&comm, 1, garbage, 0), ncclInvalidArgument);
  ASSERT_EQ(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess) << ncclGetLastError(nullptr);
  float x = 1;
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, static_cast<ncclDataType_t>(12), ncclSum, comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, static_cast<ncclRedOp_t>(77), comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(nullptr, &x, 1, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(comm)).find("sendbuff"), std::string::npos);
  EXPECT_EQ(ncclAllReduce(nullptr, nullptr, 0, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
  EXPECT_EQ(ncclBroadcast(&x, &x, 1, ncclFloat32, 1, comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclSend(&x, 1, ncclFloat32, -1, comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclAllGather(&x, &x, SIZE_MAX / 2, ncclFloat32, comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, nullptr, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
  // An error inside a group is reported by the call and again by ncclGroupEnd.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(nullptr, &x, 1, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
  ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
  // A destroyed communicator is not dereferenced.
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("not a live communicator"), std::string::npos);
  EXPECT_EQ(ncclCommDestroy(comm), ncclInvalidArgument);
}

TEST_F(ApiTest, FinalizedAndRevokedCommunicatorsRefuseWork) {
  runRanks(2, [](int rank, ncclComm_t comm) {
    float x = 1;
    ASSERT_EQ(ncclCommRevoke(comm, 5), ncclInvalidArgument);
    ASSERT_EQ(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT), ncclSuccess);
    EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidUsage);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("revoked"), std::string::npos);
  });
  runRanks(2, [](int rank, ncclComm_t comm) {
    float x = 1;
    ASSERT_EQ(ncclCommFinalize(comm), ncclSuccess);
    EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidUsage);
  });
}

TEST_F(ApiTest, SplitByColorAndKey) {
  constexpr int kRanks = 5;
  runRanks(kRanks, [](int rank, ncclComm_t comm) {
    ncclComm_t sub = nullptr;
    int color = rank == 4 ? NCCL_SPLIT_NOCOLOR : rank % 2;
    ASSERT_EQ(ncclCommSplit(comm, color, -rank, &sub, nullptr), ncclSuccess) << ncclGetLastError(comm);
    if (color == NCCL_SPLIT_NOCOLOR) {
      EXPECT_EQ(sub, nullptr);
      return;
    }
    ASSERT_NE(sub, nullptr);
    int n = 0, subRank = -1;
    ASSERT_EQ(ncclCommCount(sub, &n), ncclSuccess);
    ASSERT_EQ(ncclCommUserRank(sub, &subRank), ncclSuccess);
    EXPECT_EQ(n, 2);  // {0,2} and {1,3}
    // key = -rank orders the higher parent rank first.
    EXPECT_EQ(subRank, rank >= 2 ? 0 : 1);
    expectAllReduceWorks(sub);
    EXPECT_EQ(ncclCommDestroy(sub), ncclSuccess);
  });
}

TEST_F(ApiTest, SplitInsideAGroupFromOneThread) {
  constexpr int kRanks = 4;
  ncclComm_t comms[kRanks], subs[kRanks];
  ASSERT_EQ(ncclCommInitAll(comms, kRanks, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(ncclCommSplit(comms[r], r / 2, r, &subs[r], nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<std::vector<int>> v(kRanks, std::vector<int>(10));
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) {
    std::fill(v[r].begin(), v[r].end(), r);
    ASSERT_EQ(ncclAllReduce(v[r].data(), v[r].data(), 10, ncclInt32, ncclSum, subs[r], nullptr), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(v[r][9], r < 2 ? 0 + 1 : 2 + 3);
    EXPECT_EQ(ncclCommDestroy(subs[r]), ncclSuccess);
    EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
  }
}

// One thread driving several ranks puts every blocking call that waits for the other ranks in a
// group, as NCCL documents: finalize and shrink run at ncclGroupEnd, after the group's collectives
// (which were issued before them); without the group each would wait for ranks this thread has not
// reached (until MIXCCL_TIMEOUT).
TEST_F(ApiTest, FinalizeAndShrinkInsideAGroupFromOneThread) {
  setenv("MIXCCL_TIMEOUT", "20", 1);
  config::resetForTesting();
  constexpr int kRanks = 3;
  ncclComm_t comms[kRanks], small[kRanks] = {};
  ASSERT_EQ(ncclCommInitAll(comms, kRanks, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  const auto began = std::chrono::steady_clock::now();
  int exclude[] = {2};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(ncclCommShrink(comms[r], exclude, 1, &small[r], nullptr, NCCL_SHRINK_DEFAULT), ncclSuccess)
        << ncclGetLastError(comms[r]);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<std::vector<int>> v(kRanks, std::vector<int>(10));
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r) {
    ASSERT_NE(small[r], nullptr);
    std::fill(v[r].begin(), v[r].end(), r + 1);
    ASSERT_EQ(ncclAllReduce(v[r].data(), v[r].data(), 10, ncclInt32, ncclSum, small[r], nullptr), ncclSuccess);
    ASSERT_EQ(ncclCommFinalize(small[r]), ncclSuccess) << ncclGetLastError(small[r]);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(v[r][9], 3) << "the all-reduce queued before finalize ran first";
  float x = 1;
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, small[0], nullptr), ncclInvalidUsage);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(ncclCommFinalize(comms[r]), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(10)) << "a rank waited for its deadline";
  for (int r = 0; r < kRanks; ++r) {
    if (r < 2) {
      EXPECT_EQ(ncclCommDestroy(small[r]), ncclSuccess);
    }
    EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
  }
}

// A split started in a group uses its parent until ncclGroupEnd; destroying the parent before
// that waits for the split instead of freeing what it uses (it crashed), and the children work.
TEST_F(ApiTest, ParentDestroyedInsideTheGroupOfItsSplit) {
  constexpr int kRanks = 2;
  ncclComm_t comms[kRanks], subs[kRanks] = {};
  ASSERT_EQ(ncclCommInitAll(comms, kRanks, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(ncclCommSplit(comms[r], 0, r, &subs[r], nullptr), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  expectTwoChildrenWorkThenDestroy(subs);
}

// As nccl.h says, a revoked communicator can still be split (NCCL's revoke only stops its work);
// and an argument error of a split inside a group is ncclGroupEnd's error too.
TEST_F(ApiTest, RevokedCommunicatorSplitsAndGroupedSplitErrorsReachGroupEnd) {
  runRanks(2, [](int rank, ncclComm_t comm) {
    ASSERT_EQ(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT), ncclSuccess);
    EXPECT_EQ(ncclCommFinalize(comm), ncclInvalidArgument) << "NCCL: revoke counts as the finalize";
    ncclComm_t sub = nullptr;
    ASSERT_EQ(ncclCommSplit(comm, 0, rank, &sub, nullptr), ncclSuccess) << ncclGetLastError(comm);
    expectAllReduceWorks(sub);
    ncclComm_t none = nullptr;
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    EXPECT_EQ(ncclCommSplit(sub, -7, 0, &none, nullptr), ncclInvalidArgument);
    EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
    EXPECT_EQ(ncclCommDestroy(sub), ncclSuccess);
  });
}

// Non-blocking communicators torn down as NCCL users do: the collectives and the finalizes in one
// group. A finalize answers ncclInProgress, which is no error of the group (the collectives were
// dropped as if it were), and its thread starts after the group's collectives.
TEST_F(ApiTest, NonBlockingFinalizeInAGroupAfterItsCollectives) {
  ncclComm_t c[2] = {};
  ASSERT_NO_FATAL_FAILURE(initNonBlocking(2, c, /*grouped=*/true));
  std::vector<float> a(4, 1.0f), b(4, 2.0f);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(a.data(), a.data(), 4, ncclFloat32, ncclSum, c[0], nullptr), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(b.data(), b.data(), 4, ncclFloat32, ncclSum, c[1], nullptr), ncclSuccess);
  for (ncclComm_t comm : c) ASSERT_EQ(ncclCommFinalize(comm), ncclInProgress);
  const ncclResult_t e = ncclGroupEnd();
  ASSERT_TRUE(e == ncclSuccess || e == ncclInProgress) << e << ": " << ncclGetLastError(nullptr);
  for (ncclComm_t comm : c) EXPECT_EQ(waitAsync(comm), ncclSuccess);
  EXPECT_EQ(a[0], 3.0f);
  EXPECT_EQ(b[0], 3.0f);
  for (ncclComm_t comm : c) EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// NCCL_COMM_BLOCKING overrides ncclConfig_t.blocking both ways, and a config-less init's default,
// as NCCL's envConfigOverride; other values leave the config's choice.
TEST_F(ApiTest, NcclCommBlockingOverridesTheConfig) {
  auto init = [](const char* env, int blocking, bool withConfig) {
    setenv("NCCL_COMM_BLOCKING", env, 1);
    config::resetForTesting();
    ncclUniqueId id;
    EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = blocking;
    ncclComm_t comm = nullptr;
    const ncclResult_t r =
        withConfig ? ncclCommInitRankConfig(&comm, 1, id, 0, &cfg) : ncclCommInitRank(&comm, 1, id, 0);
    if (comm != nullptr) {
      EXPECT_EQ(waitAsync(comm), ncclSuccess);
      EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
    }
    return r;
  };
  EXPECT_EQ(init("1", 0, true), ncclSuccess);      // blocking although the config says not
  EXPECT_EQ(init("0", 1, true), ncclInProgress);   // non-blocking although the config says blocking
  EXPECT_EQ(init("0", 0, false), ncclInProgress);  // and without a config
  EXPECT_EQ(init("7", 0, true), ncclInProgress);   // not 0 or 1: the config decides
  EXPECT_EQ(init("7", 1, true), ncclSuccess);
  unsetenv("NCCL_COMM_BLOCKING");
  config::resetForTesting();
}

// A finalize counts from its call, as NCCL's finalizeCalled, not from when its work ends. A second
// finalize of a rank whose non-blocking finalize still waits for the other rank (driven by this
// thread) is refused at once; it used to join that finalize, which waited for this thread's next
// call until MIXCCL_TIMEOUT. Revoking or splitting it meanwhile is refused just as promptly.
TEST_F(ApiTest, CallsDuringANonBlockingFinalizeAreRefusedAtOnce) {
  ncclComm_t c[2] = {};
  ASSERT_NO_FATAL_FAILURE(initNonBlocking(2, c, /*grouped=*/false));
  ASSERT_EQ(ncclCommFinalize(c[0]), ncclInProgress);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ncclCommFinalize(c[0]), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("finalized already"), std::string::npos)
      << ncclGetLastError(nullptr);
  EXPECT_EQ(ncclCommRevoke(c[0], NCCL_REVOKE_DEFAULT), ncclInvalidArgument);
  ncclComm_t child = reinterpret_cast<ncclComm_t>(0x1);
  EXPECT_EQ(ncclCommSplit(c[0], 0, 0, &child, nullptr), ncclInvalidUsage);
  EXPECT_EQ(child, nullptr);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));  // MIXCCL_TIMEOUT is 60
  // Not ncclInProgress, which says a non-blocking call was accepted and goes on.
  std::vector<float> v(4, 1.0f);
  EXPECT_EQ(ncclAllReduce(v.data(), v.data(), 4, ncclFloat32, ncclSum, c[0], nullptr), ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("finalized"), std::string::npos) << ncclGetLastError(nullptr);
  ASSERT_EQ(ncclCommFinalize(c[1]), ncclInProgress);
  for (ncclComm_t comm : c) EXPECT_EQ(waitAsync(comm), ncclSuccess);
  for (ncclComm_t comm : c) EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// The same inside a group, where the finalize starts only at ncclGroupEnd: a second one used to
// queue a second finalize thread for the communicator (std::terminate at ncclGroupEnd). The
// refusal fails the group, as NCCL's ncclGroupErrCheck does, so neither finalize runs.
TEST_F(ApiTest, SecondFinalizeInAGroupIsRefused) {
  ncclComm_t comm = nullptr;
  ASSERT_NO_FATAL_FAILURE(initNonBlocking(1, &comm, /*grouped=*/false));
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclCommFinalize(comm), ncclInProgress);
  EXPECT_EQ(ncclCommFinalize(comm), ncclInvalidArgument);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("finalized already"), std::string::npos)
      << ncclGetLastError(nullptr);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// ncclCommDestroy in a group runs at its end, as NCCL's: one thread splitting two ranks may
// destroy rank 0's parent before it splits rank 1 (destroy waited for rank 0's split, which
// waited for rank 1's, until MIXCCL_TIMEOUT).
TEST_F(ApiTest, DestroyInAGroupRunsAtItsEnd) {
  constexpr int kRanks = 2;
  ncclComm_t comms[kRanks], subs[kRanks] = {};
  ASSERT_EQ(ncclCommInitAll(comms, kRanks, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  const auto began = std::chrono::steady_clock::now();
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(ncclCommSplit(comms[r], 0, r, &subs[r], nullptr), ncclSuccess);
    ASSERT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
    int n = 0;
    EXPECT_EQ(ncclCommCount(comms[r], &n), ncclInvalidArgument) << "the destroyed handle is gone at once";
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(10)) << "a split waited for its deadline";
  expectTwoChildrenWorkThenDestroy(subs);
}

// A thread that exits with its group open (an exception, a cancelled worker) must not keep the
// communicators its group named alive: destroyed afterwards, they free their descriptors.
TEST_F(ApiTest, AThreadLeavingItsGroupOpenLeaksNothing) {
  auto fds = [] {
    int n = 0;
    if (DIR* d = opendir("/proc/self/fd")) {
      while (readdir(d) != nullptr) ++n;
      closedir(d);
    }
    return n;
  };
  const int base = fds();
  for (int round = 0; round < 3; ++round) {
    ncclComm_t comms[2];
    ASSERT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
    std::thread([&] {
      float x = 1;
      ASSERT_EQ(ncclGroupStart(), ncclSuccess);
      ASSERT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comms[0], nullptr), ncclSuccess);
    }).join();  // exits inside its group
    for (ncclComm_t comm : comms) EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  }
  EXPECT_EQ(fds(), base) << "descriptors of destroyed communicators are still open";
}

// A parent with an earlier error cannot be split (as NCCL's ncclCommEnsureReady refuses it): its
// ranks may be out of step.
TEST_F(ApiTest, AParentWithAnEarlierErrorIsNotSplit) {
  setenv("MIXCCL_TIMEOUT", "1", 1);
  config::resetForTesting();
  ncclComm_t comms[2];
  ASSERT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  float x = 1;
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comms[0], nullptr), ncclRemoteError);  // rank 1 never calls
  ncclComm_t sub = nullptr;
  EXPECT_EQ(ncclCommSplit(comms[0], 0, 0, &sub, nullptr), ncclRemoteError);
  EXPECT_NE(std::string(ncclGetLastError(comms[0])).find("earlier error"), std::string::npos)
      << ncclGetLastError(comms[0]);
  for (ncclComm_t comm : comms) EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

TEST_F(ApiTest, ShrinkExcludesRanks) {
  constexpr int kRanks = 4;
  runRanks(kRanks, [](int rank, ncclComm_t comm) {
    int exclude[] = {1};
    if (rank == 1) return;  // the excluded rank does not take part
    ncclComm_t small = nullptr;
    ASSERT_EQ(ncclCommShrink(comm, exclude, 1, &small, nullptr, NCCL_SHRINK_DEFAULT), ncclSuccess)
        << ncclGetLastError(comm);
    int n = 0, newRank = -1;
    ASSERT_EQ(ncclCommCount(small, &n), ncclSuccess);
    ASSERT_EQ(ncclCommUserRank(small, &newRank), ncclSuccess);
    EXPECT_EQ(n, 3);
    EXPECT_EQ(newRank, rank == 0 ? 0 : rank - 1);
    expectAllReduceWorks(small);
    EXPECT_EQ(ncclCommDestroy(small), ncclSuccess);
  });
}

// Subgroups made on their members only, in turn, as torch's new_group makes them: {0,1}, then
// {0,2} (rank 0's second shrink, rank 2's first), then {2,3}, then {0,1} again. Counting shrinks
// per communicator instead of per member set would leave rank 2 waiting for a message rank 0
// tagged as its second.
TEST_F(ApiTest, ShrinksToDifferentMemberSetsInTurn) {
  constexpr int kRanks = 4;
  const std::vector<std::vector<int>> sets = {{0, 1}, {0, 2}, {2, 3}, {0, 1}};
  runRanks(kRanks, [&](int rank, ncclComm_t comm) {
    for (const auto& members : sets) {
      if (std::find(members.begin(), members.end(), rank) == members.end()) continue;
      std::vector<int> exclude;
      for (int r = 0; r < kRanks; ++r) {
        if (std::find(members.begin(), members.end(), r) == members.end()) exclude.push_back(r);
      }
      ncclComm_t sub = nullptr;
      ASSERT_EQ(
          ncclCommShrink(comm, exclude.data(), static_cast<int>(exclude.size()), &sub, nullptr, NCCL_SHRINK_DEFAULT),
          ncclSuccess)
          << ncclGetLastError(comm);
      int subRank = -1;
      ASSERT_EQ(ncclCommUserRank(sub, &subRank), ncclSuccess);
      EXPECT_EQ(subRank, rank == members[0] ? 0 : 1);
      int x = rank, sum = 0;
      ASSERT_EQ(ncclAllReduce(&x, &sum, 1, ncclInt32, ncclSum, sub, nullptr), ncclSuccess) << ncclGetLastError(sub);
      EXPECT_EQ(sum, members[0] + members[1]);
      EXPECT_EQ(ncclCommDestroy(sub), ncclSuccess);
    }
  });
}
TEST_F(ApiTest, CommIdFromEnvironment) {
  // A port free right now, not a fixed one: another job on the machine may hold any fixed port.
  SocketAddress probe;
  ASSERT_EQ(parseHostPort("127.0.0.1:0", &probe), Result::kSuccess);
  {
    Socket s;
    ASSERT_EQ(Socket::listen(&probe, &s), Result::kSuccess);
  }
  setenv("NCCL_COMM_ID", probe.toString().c_str(), 1);
  config::resetForTesting();
  runRanks(3, [](int, ncclComm_t comm) { expectAllReduceWorks(comm); });
  unsetenv("NCCL_COMM_ID");
  config::resetForTesting();
}

TEST_F(ApiTest, InitRankScalable) {
  constexpr int kRanks = 3;
  ncclUniqueId ids[2];
  ASSERT_EQ(ncclGetUniqueId(&ids[0]), ncclSuccess);
  ASSERT_EQ(ncclGetUniqueId(&ids[1]), ncclSuccess);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      ncclComm_t comm = nullptr;
      ASSERT_EQ(ncclCommInitRankScalable(&comm, kRanks, r, 2, ids, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
      expectAllReduceWorks(comm);
      EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
    });
  }
  for (auto& t : threads) t.join();
}

// How many bootstrap roots run in this process (threads named mixccl-root).
int rootThreads() {
  int n = 0;
  for (const std::string& name : threadNames()) n += name.rfind("mixccl-root", 0) == 0;
  return n;
}

// Every rank registers with the first id's root; the roots of the other ids (made by
// ncclGetUniqueId, as NCCL's scalable init wants one per group of ranks) must not wait for ranks
// that never come, holding a thread and a port each until MIXCCL_TIMEOUT and then warning that
// no rank registered: init tells them to stop, so a job that re-initialises leaks nothing.
TEST_F(ApiTest, InitRankScalableStopsTheRootsItDoesNotUse) {
  constexpr int kRanks = 3, kIds = 3;
  const int before = rootThreads();
  ncclUniqueId ids[kIds];
  for (ncclUniqueId& id : ids) ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      ncclComm_t comm = nullptr;
      ASSERT_EQ(ncclCommInitRankScalable(&comm, kRanks, r, kIds, ids, nullptr), ncclSuccess)
          << ncclGetLastError(nullptr);
      expectAllReduceWorks(comm);
      EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
    });
  }
  for (auto& t : threads) t.join();
  // Served: no root of these ids takes another communicator (a waiting one would).
  ncclComm_t again = nullptr;
  EXPECT_NE(ncclCommInitRank(&again, 1, ids[kIds - 1], 0), ncclSuccess);
  EXPECT_EQ(again, nullptr);
  if (again != nullptr) EXPECT_EQ(ncclCommDestroy(again), ncclSuccess);
  // And gone, once their threads have ended (well before MIXCCL_TIMEOUT, 60 s here). Roots of
  // earlier tests counted in `before` may end meanwhile too.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (rootThreads() > before && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_LE(rootThreads(), before);
}

// A unique id serves one communicator: its root exits once every rank registered. A second
// communicator made from it finds nothing listening there, and fails within seconds with a
// message saying to get a new id, instead of retrying the refused root until MIXCCL_TIMEOUT.
TEST_F(ApiTest, UniqueIdReusedForASecondCommunicatorFailsFast) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t first = nullptr;
  ASSERT_EQ(ncclCommInitRank(&first, 1, id, 0), ncclSuccess) << ncclGetLastError(nullptr);
  ncclComm_t second = reinterpret_cast<ncclComm_t>(0x1);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ncclCommInitRank(&second, 1, id, 0), ncclRemoteError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15));  // MIXCCL_TIMEOUT is 60
  EXPECT_EQ(second, nullptr);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("unique id"), std::string::npos) << ncclGetLastError(nullptr);
  EXPECT_EQ(ncclCommDestroy(first), ncclSuccess);
}

TEST_F(ApiTest, MemoryRegistrationAndRedOps) {
  runRanks(2, [](int rank, ncclComm_t comm) {
    void* p = nullptr;
    ASSERT_EQ(ncclMemAlloc(&p, 1 << 20), ncclSuccess);
    ASSERT_NE(p, nullptr);
    void* handle = nullptr;
    ASSERT_EQ(ncclCommRegister(comm, p, 1 << 20, &handle), ncclSuccess);
    ncclWindow_t win = nullptr;
    ASSERT_EQ(ncclCommWindowRegister(comm, p, 1 << 20, &win, NCCL_WIN_COLL_SYMMETRIC), ncclSuccess);
    auto* f = static_cast<double*>(p);
    for (int i = 0; i < 100; ++i) f[i] = rank + 1;
    double scalar = 0.5;
    ncclRedOp_t op;
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat64, ncclScalarHostImmediate, comm), ncclSuccess);
    scalar = 100;  // host-immediate: the value was captured at creation
    ASSERT_EQ(ncclAllReduce(f, f, 100, ncclFloat64, op, comm, nullptr), ncclSuccess) << ncclGetLastError(comm);
    EXPECT_EQ(f[99], 1.5);
    EXPECT_EQ(ncclAllReduce(f, f, 100, ncclFloat32, op, comm, nullptr), ncclInvalidArgument);
    ASSERT_EQ(ncclRedOpDestroy(op, comm), ncclSuccess);
    EXPECT_EQ(ncclRedOpDestroy(op, comm), ncclInvalidArgument);
    EXPECT_EQ(ncclRedOpDestroy(ncclSum, comm), ncclInvalidArgument);
    // Freed handles are handed out again, lowest first, as NCCL does (PyTorch creates and
    // destroys one per premul_sum call); one still alive keeps its handle and its scalar.
    ncclRedOp_t a, b, c;
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&a, &scalar, ncclFloat64, ncclScalarHostImmediate, comm), ncclSuccess);
    EXPECT_EQ(a, op);
    scalar = 2;
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&b, &scalar, ncclFloat64, ncclScalarHostImmediate, comm), ncclSuccess);
    ASSERT_EQ(ncclRedOpDestroy(a, comm), ncclSuccess);
    scalar = 3;
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&c, &scalar, ncclFloat64, ncclScalarHostImmediate, comm), ncclSuccess);
    EXPECT_EQ(c, a);
    EXPECT_NE(b, c);
    for (int i = 0; i < 100; ++i) f[i] = 1;
    ASSERT_EQ(ncclAllReduce(f, f, 100, ncclFloat64, b, comm, nullptr), ncclSuccess) << ncclGetLastError(comm);
    EXPECT_EQ(f[0], 4);  // 2 x 1 on each of 2 ranks
    ASSERT_EQ(ncclAllReduce(f, f, 100, ncclFloat64, c, comm, nullptr), ncclSuccess) << ncclGetLastError(comm);
    EXPECT_EQ(f[0], 24);  // 3 x 4 on each of 2 ranks
    for (int i = 0; i < 1000; ++i) {
      ncclRedOp_t t;
      ASSERT_EQ(ncclRedOpCreatePreMulSum(&t, &scalar, ncclFloat64, ncclScalarHostImmediate, comm), ncclSuccess);
      ASSERT_EQ(static_cast<int>(t), static_cast<int>(b) + 1) << "call " << i;
      ASSERT_EQ(ncclRedOpDestroy(t, comm), ncclSuccess);
    }
    ASSERT_EQ(ncclRedOpDestroy(b, comm), ncclSuccess);
    ASSERT_EQ(ncclRedOpDestroy(c, comm), ncclSuccess);
    EXPECT_EQ(ncclCommWindowDeregister(comm, win), ncclSuccess);
    EXPECT_EQ(ncclCommDeregister(comm, handle), ncclSuccess);
    EXPECT_EQ(ncclCommDeregister(comm, handle), ncclInvalidUsage);
    EXPECT_EQ(ncclMemFree(p), ncclSuccess);
  });
}

// Registrations end with their communicator, as in NCCL (ncclRegCleanup). A handle kept past
// destroy or abort is refused, also by a new communicator that got the old one's address (the
// allocator hands it back, usually within a few tries), and the refusal leaves that communicator's
// own registrations alone.
TEST_F(ApiTest, RegistrationsEndWithTheirCommunicator) {
  for (const bool abort : {false, true}) {
    SCOPED_TRACE(abort ? "ncclCommAbort" : "ncclCommDestroy");
    char buf[64];
    ncclUniqueId id;
    ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    ncclComm_t old = nullptr;
    ASSERT_EQ(ncclCommInitRank(&old, 1, id, 0), ncclSuccess) << ncclGetLastError(nullptr);
    void* oldHandle = nullptr;
    ncclWindow_t oldWin = nullptr;
    ASSERT_EQ(ncclCommRegister(old, buf, sizeof(buf), &oldHandle), ncclSuccess);
    ASSERT_EQ(ncclCommWindowRegister(old, buf, sizeof(buf), &oldWin, NCCL_WIN_DEFAULT), ncclSuccess);
    ASSERT_EQ(abort ? ncclCommAbort(old) : ncclCommDestroy(old), ncclSuccess);
    // ncclCommInitRank allocates the handle early, with little allocated since the destroy.
    ncclComm_t comm = nullptr;
    for (int i = 0; i < 50 && comm != old; ++i) {
      if (comm != nullptr) {
        ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
      }
      ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
      ASSERT_EQ(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess) << ncclGetLastError(nullptr);
    }
    RecordProperty(abort ? "addressReusedAfterAbort" : "addressReusedAfterDestroy", comm == old ? "yes" : "no");
    void* handle = nullptr;
    ncclWindow_t win = nullptr;
    ASSERT_EQ(ncclCommRegister(comm, buf + 8, 8, &handle), ncclSuccess);
    ASSERT_EQ(ncclCommWindowRegister(comm, buf + 8, 8, &win, NCCL_WIN_DEFAULT), ncclSuccess);
    EXPECT_EQ(ncclCommDeregister(comm, oldHandle), ncclInvalidUsage);
    EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("destroyed or aborted"), std::string::npos)
        << ncclGetLastError(nullptr);
    EXPECT_EQ(ncclCommWindowDeregister(comm, oldWin), ncclInvalidUsage);
    EXPECT_EQ(ncclCommWindowDeregister(comm, win), ncclSuccess) << ncclGetLastError(nullptr);
    EXPECT_EQ(ncclCommDeregister(comm, handle), ncclSuccess) << ncclGetLastError(nullptr);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  }
}

TEST_F(ApiTest, AbortFromAnotherThreadUnblocksACall) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comms[2];
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r) ASSERT_EQ(ncclCommInitRank(&comms[r], 2, id, r), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  // Rank 0 calls an all-reduce that rank 1 never joins; abort releases it.
  std::vector<float> v(1 << 20, 1.0f);
  ncclResult_t res = ncclSuccess;
  auto start = std::chrono::steady_clock::now();
  std::thread blocked(
      [&] { res = ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclSum, comms[0], nullptr); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(ncclCommAbort(comms[0]), ncclSuccess);
  blocked.join();
  EXPECT_NE(res, ncclSuccess);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(ncclCommAbort(comms[1]), ncclSuccess);
}

// A watchdog thread destroys or aborts a communicator while another thread has operations on it
// queued in an open group. ncclGroupEnd read the freed communicator; now the watchdog returns at
// once, and ncclGroupEnd fails as a call on the gone handle does, running none of the group's
// operations (those on another communicator included: one failed call abandons the group).
void groupEndAfterWatchdog(bool abort) {
  ncclComm_t pair[2], solo = nullptr;
  ASSERT_EQ(ncclCommInitAll(pair, 2, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_EQ(ncclCommInitAll(&solo, 1, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<int> a(1000, 1), in(10, 7), out(10, 0);
  std::atomic<int> phase{0};
  ncclResult_t end = ncclSuccess;
  std::string message;
  std::thread caller([&] {
    EXPECT_EQ(ncclGroupStart(), ncclSuccess);
    EXPECT_EQ(ncclAllReduce(a.data(), a.data(), a.size(), ncclInt32, ncclSum, pair[0], nullptr), ncclSuccess);
    EXPECT_EQ(ncclAllReduce(in.data(), out.data(), in.size(), ncclInt32, ncclSum, solo, nullptr), ncclSuccess);
    phase = 1;
    while (phase != 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    // What any allocation does: reuse the memory a free gave back.
    std::vector<std::unique_ptr<char[]>> churn;
    for (int i = 0; i < 1000; ++i) {
      churn.emplace_back(new char[4096]);
      memset(churn.back().get(), 0xab, 4096);
    }
    end = ncclGroupEnd();
    message = ncclGetLastError(nullptr);
  });
  while (phase != 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(abort ? ncclCommAbort(pair[0]) : ncclCommDestroy(pair[0]), ncclSuccess);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(took, std::chrono::milliseconds(abort ? 1000 : 5000)) << "the watchdog waited for the group";
  phase = 2;
  caller.join();
  EXPECT_EQ(end, ncclInvalidArgument) << message;
  EXPECT_NE(message.find("destroyed or aborted"), std::string::npos) << message;
  EXPECT_EQ(out[0], 0) << "an operation of the abandoned group ran";
  EXPECT_EQ(a[0], 1) << "an operation of the abandoned group ran";
  // The other communicators stayed in step: nothing of the group went out.
  expectAllReduceWorks(solo);
  EXPECT_EQ(ncclCommDestroy(solo), ncclSuccess);
  EXPECT_EQ(ncclCommAbort(pair[1]), ncclSuccess);
}

TEST_F(ApiTest, GroupEndAfterAnotherThreadAbortedItsCommunicator) { groupEndAfterWatchdog(/*abort=*/true); }

TEST_F(ApiTest, GroupEndAfterAnotherThreadDestroyedItsCommunicator) { groupEndAfterWatchdog(/*abort=*/false); }

// The same for a finalize deferred to ncclGroupEnd (it held a pin: the abort waited for the
// group's end, up to 30 s, and then freed what the finalize used).
TEST_F(ApiTest, GroupedFinalizeAfterAnotherThreadAbortedItsCommunicator) {
  ncclComm_t pair[2];
  ASSERT_EQ(ncclCommInitAll(pair, 2, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  std::atomic<int> phase{0};
  ncclResult_t end = ncclSuccess;
  std::thread caller([&] {
    EXPECT_EQ(ncclGroupStart(), ncclSuccess);
    EXPECT_EQ(ncclCommFinalize(pair[0]), ncclSuccess);
    phase = 1;
    while (phase != 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    end = ncclGroupEnd();
  });
  while (phase != 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(ncclCommAbort(pair[0]), ncclSuccess);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1)) << "the abort waited for the group";
  phase = 2;
  caller.join();
  EXPECT_EQ(end, ncclInvalidArgument);
  EXPECT_EQ(ncclCommAbort(pair[1]), ncclSuccess);
}

// ncclCommDestroy while another thread is inside a blocking call on the communicator (NCCL
// forbids it; a watchdog does it): destroy waited 30 s and then freed the communicator under the
// call (SIGSEGV). Now, after the grace period, it aborts the call and frees only once it left.
TEST_F(ApiTest, DestroyNeverFreesUnderACallOfAnotherThread) {
  Communicator::setCallGraceForTesting(std::chrono::milliseconds(300));
  ncclComm_t pair[2];
  ASSERT_EQ(ncclCommInitAll(pair, 2, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<float> v(1 << 20, 1.0f);
  std::atomic<bool> inCall{false};
  ncclResult_t res = ncclSuccess;
  std::thread blocked([&] {
    inCall = true;
    res = ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclSum, pair[0], nullptr);  // rank 1 never joins
  });
  while (!inCall) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(ncclCommDestroy(pair[0]), ncclSuccess);
  const auto took = std::chrono::steady_clock::now() - t0;
  blocked.join();
  Communicator::setCallGraceForTesting(std::chrono::seconds(30));
  EXPECT_NE(res, ncclSuccess);
  EXPECT_LT(took, std::chrono::seconds(10)) << "destroy waited for the call's own deadline";
  EXPECT_EQ(ncclCommAbort(pair[1]), ncclSuccess);
}

}  // namespace
}  // namespace mixccl::testing
