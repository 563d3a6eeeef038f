// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Every collective through the public API, ranks as threads: transport {shm, tcp} x nranks
// {1,2,3,4,7,8} x count {0, 1, odd, large (multi-chunk)} x dtype x op x in/out-of-place, checked
// element by element against a reference (tests/support/values.h), the tuner choosing each
// algorithm. coll_algo_test.cc runs the same checks with every algorithm forced through NCCL_ALGO.

#include <gtest/gtest.h>
#include <nccl.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "common/config.h"
#include "tests/support/coll_checks.h"
#include "tests/support/env_guard.h"
#include "tests/support/rank_threads.h"
#include "tests/support/values.h"

namespace mixccl::testing {
namespace {

struct Param {
  const char* transport;
  int nranks;
};

// Readable parameter in test logs (instead of gtest's byte dump).
void PrintTo(const Param& p, std::ostream* os) { *os << p.transport << " x " << p.nranks << " ranks"; }

std::string paramName(const ::testing::TestParamInfo<Param>& info) {
  return std::string(info.param.transport) + "_np" + std::to_string(info.param.nranks);
}

class CollTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    setCollTestEnv(GetParam().transport);
    config::resetForTesting();
  }
  void TearDown() override { config::resetForTesting(); }
  int n() const { return GetParam().nranks; }
};

// AllReduce, Reduce, ReduceScatter (tests/support/coll_checks.h).
TEST_P(CollTest, Reductions) {
  runRanks(n(), [&](int rank, ncclComm_t comm) { checkReductions(rank, n(), comm, Matrix::kFull, kAllCollectives); });
}

// Broadcast, AllGather, AlltoAll, Gather, Scatter: pure data movement, compared byte for byte.
TEST_P(CollTest, DataMovement) {
  runRanks(n(), [&](int rank, ncclComm_t comm) { checkDataMovement(rank, n(), comm, Matrix::kFull, kAllCollectives); });
}

// All-to-all-v from grouped send/recv with per-pair counts (some zero), posted in an order that
// differs per rank: a group must complete whatever the order.
TEST_P(CollTest, GroupedSendRecv) {
  const int n = this->n();
  runRanks(n, [&](int rank, ncclComm_t comm) {
    auto countFor = [](int from, int to) -> uint64_t { return ((from * 7 + to * 3) % 5) * 3001; };
    std::vector<std::vector<uint8_t>> send(n), recv(n);
    for (int p = 0; p < n; ++p) {
      send[p].resize(countFor(rank, p) * 4 + 1);
      for (uint64_t b = 0; b + 1 < send[p].size(); ++b) send[p][b] = patternByte(rank * 100 + p, b);
      recv[p].assign(countFor(p, rank) * 4 + 1, 0);
    }
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int k = 0; k < n; ++k) {
      int p = (rank % 2 == 0) ? k : n - 1 - k;  // even ranks post ascending, odd descending
      if (rank % 3 == 0) {
        ASSERT_EQ(ncclRecv(recv[p].data(), countFor(p, rank), ncclFloat32, p, comm, nullptr), ncclSuccess);
        ASSERT_EQ(ncclSend(send[p].data(), countFor(rank, p), ncclFloat32, p, comm, nullptr), ncclSuccess);
      } else {
        ASSERT_EQ(ncclSend(send[p].data(), countFor(rank, p), ncclFloat32, p, comm, nullptr), ncclSuccess);
        ASSERT_EQ(ncclRecv(recv[p].data(), countFor(p, rank), ncclFloat32, p, comm, nullptr), ncclSuccess);
      }
    }
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(comm);
    for (int p = 0; p < n; ++p) {
      for (uint64_t b = 0; b + 1 < recv[p].size(); ++b) {
        ASSERT_EQ(recv[p][b], patternByte(p * 100 + rank, b)) << "from " << p << " to " << rank << " byte " << b;
      }
    }
  });
}

// Sends to self outside a group that fit the lane (two messages of depth 4), then the receives
// from self, in order. TCP took them at once; shm waited for a lane that only the receive would
// create, until MIXCCL_TIMEOUT (10 s here, 30 minutes by default).
TEST_P(CollTest, SendsToSelfOutsideAGroup) {
  EnvGuard timeout("MIXCCL_TIMEOUT", "10");
  runRanks(n(), [&](int rank, ncclComm_t comm) {
    std::vector<int32_t> first(1000, rank + 1), second(777, -rank - 1), a(1000, 0), b(777, 0);
    ASSERT_EQ(ncclSend(first.data(), first.size(), ncclInt32, rank, comm, nullptr), ncclSuccess)
        << ncclGetLastError(comm);
    ASSERT_EQ(ncclSend(second.data(), second.size(), ncclInt32, rank, comm, nullptr), ncclSuccess)
        << ncclGetLastError(comm);
    ASSERT_EQ(ncclRecv(a.data(), a.size(), ncclInt32, rank, comm, nullptr), ncclSuccess) << ncclGetLastError(comm);
    ASSERT_EQ(ncclRecv(b.data(), b.size(), ncclInt32, rank, comm, nullptr), ncclSuccess) << ncclGetLastError(comm);
    EXPECT_EQ(a, first);
    EXPECT_EQ(b, second);
  });
}

// A send to self outside a group that does not fit its lane (64 KiB here) can never complete: only
// a receive from self frees the lane, and the thread that would call it waits in the send. It
// fails with ncclInvalidUsage after a second's stall instead of MIXCCL_TIMEOUT's ncclRemoteError.
TEST_P(CollTest, SendToSelfLargerThanItsLaneFailsAtOnce) {
  if (std::string(GetParam().transport) == "tcp") {
    GTEST_SKIP() << "TCP's kernel socket buffer takes the whole message: the send completes there";
  }
  EnvGuard timeout("MIXCCL_TIMEOUT", "30");
  runRanks(n(), [&](int rank, ncclComm_t comm) {
    std::vector<int32_t> big(100000, rank);
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(ncclSend(big.data(), big.size(), ncclInt32, rank, comm, nullptr), ncclInvalidUsage);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("only a receive from rank"), std::string::npos)
        << ncclGetLastError(comm);
  });
}

// Several collectives inside one group complete at ncclGroupEnd, in issue order.
TEST_P(CollTest, GroupedCollectives) {
  const int n = this->n();
  runRanks(n, [&](int rank, ncclComm_t comm) {
    std::vector<float> a(5003, static_cast<float>(rank + 1)), b(777, 1.0f), c(n * 33);
    std::vector<float> cin(33, static_cast<float>(rank));
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(a.data(), a.data(), a.size(), ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(b.data(), b.data(), b.size(), ncclFloat32, ncclMax, comm, nullptr), ncclSuccess);
    ASSERT_EQ(ncclAllGather(cin.data(), c.data(), 33, ncclFloat32, comm, nullptr), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(comm);
    for (float v : a) ASSERT_EQ(v, n * (n + 1) / 2.0f);
    for (float v : b) ASSERT_EQ(v, 1.0f);
    for (int k = 0; k < n; ++k) ASSERT_EQ(c[k * 33], static_cast<float>(k));
  });
}

INSTANTIATE_TEST_SUITE_P(Transports, CollTest,
                         ::testing::Values(Param{"shm", 1}, Param{"shm", 2}, Param{"shm", 3}, Param{"shm", 4},
                                           Param{"shm", 7}, Param{"shm", 8}, Param{"tcp", 2}, Param{"tcp", 3},
                                           Param{"tcp", 4}, Param{"tcp", 7}, Param{"tcp", 8}),
                         paramName);

}  // namespace
}  // namespace mixccl::testing
