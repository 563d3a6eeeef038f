// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Calls outside a group that repeat the previous one but for one argument (ranks as threads).
// A thread remembers its last call as prepared (group.cc, LastCall) and runs the plain steps of
// such a call directly (Stream::runPlainSteps): each case below fails if a changed argument
// were taken for a repeat, or if a repeat read a stale input.

#include <gtest/gtest.h>
#include <nccl.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/config.h"
#include "tests/support/rank_threads.h"

namespace mixccl::testing {
namespace {

class RepeatCallTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    setenv("MIXCCL_TIMEOUT", "60", 1);
    config::resetForTesting();
  }
};

constexpr size_t kElems = 8;  // the buffers; calls use a prefix, the rest must stay untouched
constexpr int32_t kUntouched = -7;

// Fills `send` with rank-dependent values (`round` changes them between repeats) and `recv`
// with kUntouched.
void fill(std::vector<int32_t>& send, std::vector<int32_t>& recv, int rank, int round) {
  for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<int32_t>(100 * round + 10 * rank + i);
  for (auto& x : recv) x = kUntouched;
}

// Sum over ranks of fill()'s value at element i.
int32_t sumOf(int nranks, int round, size_t i) {
  int32_t s = 0;
  for (int r = 0; r < nranks; ++r) s += static_cast<int32_t>(100 * round + 10 * r + i);
  return s;
}

void expectPrefix(const std::vector<int32_t>& recv, size_t count, const std::function<int32_t(size_t)>& want,
                  const char* what) {
  for (size_t i = 0; i < recv.size(); ++i) {
    const int32_t expected = i < count ? want(i) : kUntouched;
    ASSERT_EQ(recv[i], expected) << what << ", element " << i;
  }
}

TEST_P(RepeatCallTest, EachChangedArgumentIsSeen) {
  const int n = GetParam();
  runRanks(n, [n](int rank, ncclComm_t comm) {
    std::vector<int32_t> send(kElems), recv(kElems);
    auto allReduce = [&](size_t count, ncclRedOp_t op, ncclDataType_t type) {
      ASSERT_EQ(ncclAllReduce(send.data(), recv.data(), count, type, op, comm, nullptr), ncclSuccess)
          << ncclGetLastError(comm);
    };
    // The same call twice, with new input in between: the repeat reads the new values.
    for (int round = 0; round < 3; ++round) {
      fill(send, recv, rank, round);
      allReduce(4, ncclSum, ncclInt32);
      expectPrefix(
          recv, 4, [&](size_t i) { return sumOf(n, round, i); }, "repeated sum");
    }
    fill(send, recv, rank, 3);
    allReduce(5, ncclSum, ncclInt32);  // the count
    expectPrefix(
        recv, 5, [&](size_t i) { return sumOf(n, 3, i); }, "count 5");
    fill(send, recv, rank, 4);
    allReduce(5, ncclMax, ncclInt32);  // the operator
    expectPrefix(
        recv, 5, [&](size_t i) { return static_cast<int32_t>(400 + 10 * (n - 1) + i); }, "max");
    fill(send, recv, rank, 5);
    allReduce(5, ncclSum, ncclUint8);  // the type: 5 bytes summed one by one
    {
      std::vector<uint8_t> want(kElems * sizeof(int32_t));
      std::vector<int32_t> untouched(kElems, kUntouched);
      std::memcpy(want.data(), untouched.data(), want.size());
      for (int r = 0; r < n; ++r) {
        std::vector<int32_t> other(kElems), unused(kElems);
        fill(other, unused, r, 5);
        const auto* bytes = reinterpret_cast<const uint8_t*>(other.data());
        for (size_t i = 0; i < 5; ++i) want[i] = static_cast<uint8_t>((r == 0 ? 0 : want[i]) + bytes[i]);
      }
      ASSERT_EQ(std::memcmp(recv.data(), want.data(), want.size()), 0) << "uint8 sum of 5 bytes";
    }
    // In place: the output pointer changes.
    fill(send, recv, rank, 6);
    ASSERT_EQ(ncclAllReduce(send.data(), send.data(), 5, ncclInt32, ncclSum, comm, nullptr), ncclSuccess);
    for (size_t i = 0; i < 5; ++i) ASSERT_EQ(send[i], sumOf(n, 6, i)) << "in place, element " << i;
    // The root of a broadcast, then of a reduce.
    for (int root = 0; root < n; ++root) {
      fill(send, recv, rank, 7 + root);
      ASSERT_EQ(ncclBroadcast(send.data(), recv.data(), 3, ncclInt32, root, comm, nullptr), ncclSuccess);
      expectPrefix(
          recv, 3, [&](size_t i) { return static_cast<int32_t>(100 * (7 + root) + 10 * root + i); }, "broadcast");
    }
    for (int root = 0; root < n; ++root) {
      fill(send, recv, rank, 20 + root);
      ASSERT_EQ(ncclReduce(send.data(), recv.data(), 3, ncclInt32, ncclSum, root, comm, nullptr), ncclSuccess);
      if (rank == root) {
        expectPrefix(
            recv, 3, [&](size_t i) { return sumOf(n, 20 + root, i); }, "reduce at its root");
      } else {
        expectPrefix(
            recv, 0, [](size_t) { return 0; }, "reduce elsewhere");
      }
    }
  });
}

// The same call, buffers and all, on two communicators in turn, then on one made where the
// first was destroyed (it may get the same address).
TEST_P(RepeatCallTest, AnotherCommunicatorIsNotARepeat) {
  const int n = GetParam();
  runRanks(n, [n](int rank, ncclComm_t comm) {
    std::vector<int32_t> send(kElems), recv(kElems);
    const int color = rank == 0 ? 0 : 1;  // rank 0 alone, the others together
    for (int life = 0; life < 2; ++life) {
      ncclComm_t sub = nullptr;
      ASSERT_EQ(ncclCommSplit(comm, color, rank, &sub, nullptr), ncclSuccess) << ncclGetLastError(comm);
      for (int round = 0; round < 4; ++round) {
        const bool onSub = round % 2 == 1;
        fill(send, recv, rank, round);
        ASSERT_EQ(ncclAllReduce(send.data(), recv.data(), 4, ncclInt32, ncclSum, onSub ? sub : comm, nullptr),
                  ncclSuccess);
        expectPrefix(
            recv, 4,
            [&](size_t i) {
              if (!onSub) return sumOf(n, round, i);
              int32_t s = 0;
              for (int r = color == 0 ? 0 : 1; r < (color == 0 ? 1 : n); ++r) {
                s += static_cast<int32_t>(100 * round + 10 * r + i);
              }
              return s;
            },
            onSub ? "on the split communicator" : "on the parent");
      }
      ASSERT_EQ(ncclCommDestroy(sub), ncclSuccess);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, RepeatCallTest, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int>& p) { return "np" + std::to_string(p.param); });

}  // namespace
}  // namespace mixccl::testing
