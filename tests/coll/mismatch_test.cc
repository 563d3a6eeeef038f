// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Mismatched calls (src/core/op_stamp.h): one rank passes a different count, datatype, operator,
// collective or root. No rank may hang or return success with mixed data; the rank that receives
// the odd message fails with ncclInvalidUsage saying what differs and where; the others fail
// promptly once it aborts (long before MIXCCL_TIMEOUT).

#include <gtest/gtest.h>
#include <nccl.h>

#include <chrono>
#include <functional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/env_guard.h"
#include "tests/support/rank_threads.h"

namespace mixccl::testing {
namespace {

struct Outcome {
  ncclResult_t result = ncclSuccess;
  std::string message;
  std::string afterAbort;  // ncclGetLastError once ncclCommAbort returned
};

// Runs `nranks` ranks as threads; each calls body(rank, comm) (which returns the first non-success
// result of its calls) and then aborts its communicator, as a framework would after an error.
std::vector<Outcome> runMismatch(int nranks, const std::function<ncclResult_t(int, ncclComm_t)>& body) {
  std::vector<ncclComm_t> comms = initComms(nranks);
  std::vector<Outcome> out(nranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      out[r].result = body(r, comms[r]);
      if (out[r].result != ncclSuccess) out[r].message = ncclGetLastError(nullptr);
      EXPECT_EQ(ncclCommAbort(comms[r]), ncclSuccess);
      out[r].afterAbort = ncclGetLastError(nullptr);
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

struct Param {
  const char* transport;
  int nranks;
};

// Readable parameter in test logs (instead of gtest's byte dump).
void PrintTo(const Param& p, std::ostream* os) { *os << p.transport << " x " << p.nranks << " ranks"; }

class MismatchTest : public ::testing::TestWithParam<Param> {
 protected:
  // A deadline far beyond the bound below: detection must not come from it.
  EnvGuard timeout_{"MIXCCL_TIMEOUT", "60"};
  EnvGuard shm_{"NCCL_SHM_DISABLE", std::string(GetParam().transport) == "tcp" ? "1" : "0"};

  // Runs the case, then checks: bounded time, one rank names `expect`, every other failure is a
  // remote error, and (unless `successAllowed`) nobody succeeded.
  void check(const std::function<ncclResult_t(int, ncclComm_t)>& body, const std::string& expect,
             bool successAllowed = false) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<Outcome> out = runMismatch(GetParam().nranks, body);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
    int usage = 0;
    for (size_t r = 0; r < out.size(); ++r) {
      if (out[r].result == ncclSuccess) {
        EXPECT_TRUE(successAllowed) << "rank " << r << " returned success from a mismatched call";
      } else if (out[r].result == ncclInvalidUsage) {
        ++usage;
        EXPECT_NE(out[r].message.find("mismatched calls"), std::string::npos) << out[r].message;
        EXPECT_NE(out[r].message.find(expect), std::string::npos) << out[r].message;
      } else {
        EXPECT_EQ(out[r].result, ncclRemoteError) << "rank " << r << ": " << out[r].message;
      }
    }
    EXPECT_GE(usage, 1) << "no rank reported ncclInvalidUsage";
  }
};

constexpr size_t kCount = 3 * (1 << 18) + 5;  // several chunks, odd

TEST_P(MismatchTest, Count) {
  const int last = GetParam().nranks - 1;
  check(
      [&](int rank, ncclComm_t comm) {
        std::vector<float> v(kCount + 1, 1.0f);
        return ncclAllReduce(v.data(), v.data(), rank == last ? kCount + 1 : kCount, ncclFloat32, ncclSum, comm,
                             nullptr);
      },
      "different count");
}

// A framework logs ncclGetLastError after it aborted the failed communicator: it must still say
// why the call failed. Over TCP the abort's closing notices to peers that had left already (a
// refused connect) replaced it with "tcp: connecting lane 1 to rank 1 failed".
TEST_P(MismatchTest, LastErrorSurvivesTheAbort) {
  const int last = GetParam().nranks - 1;
  std::vector<Outcome> out = runMismatch(GetParam().nranks, [&](int rank, ncclComm_t comm) {
    std::vector<float> v(1000, 1.0f);
    return ncclAllReduce(v.data(), v.data(), rank == last ? 999 : 1000, ncclFloat32, ncclSum, comm, nullptr);
  });
  for (size_t r = 0; r < out.size(); ++r) {
    if (out[r].result != ncclSuccess) EXPECT_EQ(out[r].afterAbort, out[r].message) << "rank " << r;
  }
}

TEST_P(MismatchTest, Datatype) {
  // Same element size, so only the stamp can tell.
  check(
      [&](int rank, ncclComm_t comm) {
        std::vector<float> v(kCount, 1.0f);
        return ncclAllReduce(v.data(), v.data(), kCount, rank == 0 ? ncclInt32 : ncclFloat32, ncclSum, comm, nullptr);
      },
      "datatype");
}

TEST_P(MismatchTest, Operator) {
  check(
      [&](int rank, ncclComm_t comm) {
        std::vector<float> v(kCount, 1.0f);
        return ncclAllReduce(v.data(), v.data(), kCount, ncclFloat32, rank == 0 ? ncclMax : ncclSum, comm, nullptr);
      },
      "reduction");
}

TEST_P(MismatchTest, Collective) {
  const int n = GetParam().nranks;
  check(
      [&](int rank, ncclComm_t comm) {
        std::vector<float> in(kCount, 1.0f), out(kCount * n);
        if (rank == 0) return ncclAllGather(in.data(), out.data(), kCount, ncclFloat32, comm, nullptr);
        return ncclAllReduce(in.data(), out.data(), kCount, ncclFloat32, ncclSum, comm, nullptr);
      },
      "called");
}

// Ranks 0 and 1 each pass themselves as the root (the others follow rank 1). A root only sends and
// does not wait for its closing token (src/core/owed_tokens.h): it may return from the crossed call
// and must then fail in what follows, `then`: one of the next OwedTokens::limit() + 1 collectives,
// or ncclCommFinalize, on reading the message that stands where its token is owed. Every other
// failure is the remote error that a peer's abort causes.
enum class Then { kLaterCalls, kFinalize };
// The most tokens a lane lets stay owed, and one more call: 62 on shm (64 lines - 2), 6 on TCP
// (MIXCCL_FIFO_DEPTH 8 - 2).
constexpr int kLaterCalls = 63;
// `before`: all-reduces every rank calls first. A small crossed call at sequence number 0 carries
// a closing token; at 3 it carries none (closingTokenDue, src/core/op_stamp.h), and what follows
// must find the crossed messages anyway.
void checkCrossedRoots(int nranks, Then then, const std::function<ncclResult_t(int, ncclComm_t, int)>& call,
                       int before = 0) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<Outcome> out = runMismatch(nranks, [&](int rank, ncclComm_t comm) {
    ncclResult_t r = ncclSuccess;
    for (int i = 0; i < before && r == ncclSuccess; ++i) {
      float x = 1.0f;
      r = ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr);
    }
    if (r != ncclSuccess) return r;
    r = call(rank, comm, rank == 0 ? 0 : 1);
    if (r != ncclSuccess) return r;
    if (then == Then::kFinalize) return ncclCommFinalize(comm);
    for (int i = 0; i < kLaterCalls && r == ncclSuccess; ++i) {
      float x = 1.0f;
      r = ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr);
    }
    return r;
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  std::string all;  // every rank's outcome, for the failure messages
  for (size_t r = 0; r < out.size(); ++r) {
    all += "\n  rank " + std::to_string(r) + ": " + std::to_string(out[r].result) + " " + out[r].message;
  }
  int usage = 0;
  for (size_t r = 0; r < out.size(); ++r) {
    const bool root = r < 2;
    if (out[r].result == ncclSuccess) {
      // A follower's own receive matched its root; with kFinalize it may finish cleanly.
      EXPECT_FALSE(root) << "rank " << r << " returned success from a crossed root and the calls after" << all;
    } else if (out[r].result == ncclInvalidUsage) {
      ++usage;
      EXPECT_NE(out[r].message.find("mismatched calls"), std::string::npos) << all;
      // A root reads the other root's message at the crossed call or where its token is owed; a
      // follower meets the stray root's message in a later collective, which names its call.
      if (root) {
        EXPECT_NE(out[r].message.find("root"), std::string::npos) << all;
      }
    } else {
      EXPECT_EQ(out[r].result, ncclRemoteError) << "rank " << r << all;
    }
  }
  EXPECT_GE(usage, 1) << "no rank reported the mismatch" << all;
}

// A one-element broadcast from `root`, each rank's value its rank.
ncclResult_t crossedSmallBroadcast(int rank, ncclComm_t comm, int root) {
  int v = rank;
  return ncclBroadcast(&v, &v, 1, ncclInt32, root, comm, nullptr);
}

TEST_P(MismatchTest, CrossedBroadcastRoots) {
  checkCrossedRoots(GetParam().nranks, Then::kLaterCalls, [](int rank, ncclComm_t comm, int root) {
    std::vector<float> v(kCount, static_cast<float>(rank));
    return ncclBroadcast(v.data(), v.data(), kCount, ncclFloat32, root, comm, nullptr);
  });
}

TEST_P(MismatchTest, CrossedBroadcastRootsSmall) {
  checkCrossedRoots(GetParam().nranks, Then::kLaterCalls, crossedSmallBroadcast);
}

TEST_P(MismatchTest, CrossedBroadcastRootsThenFinalize) {
  checkCrossedRoots(GetParam().nranks, Then::kFinalize, crossedSmallBroadcast);
}

TEST_P(MismatchTest, CrossedBroadcastRootsWithoutToken) {
  checkCrossedRoots(GetParam().nranks, Then::kLaterCalls, crossedSmallBroadcast,
                    /*before=*/3);
}

TEST_P(MismatchTest, CrossedBroadcastRootsWithoutTokenThenFinalize) {
  checkCrossedRoots(GetParam().nranks, Then::kFinalize, crossedSmallBroadcast,
                    /*before=*/3);
}

TEST_P(MismatchTest, CrossedScatterRootsWithoutToken) {
  const int n = GetParam().nranks;
  checkCrossedRoots(
      n, Then::kLaterCalls,
      [n](int rank, ncclComm_t comm, int root) {
        std::vector<int> in(n, rank);
        int out = -1;
        return ncclScatter(in.data(), &out, 1, ncclInt32, root, comm, nullptr);
      },
      /*before=*/5);
}

TEST_P(MismatchTest, CrossedScatterRoots) {
  const int n = GetParam().nranks;
  checkCrossedRoots(n, Then::kLaterCalls, [n](int rank, ncclComm_t comm, int root) {
    std::vector<float> in(kCount * n, static_cast<float>(rank)), out(kCount);
    return ncclScatter(in.data(), out.data(), kCount, ncclFloat32, root, comm, nullptr);
  });
}

// A rank whose own receive matched may finish: its data is right; the receiver of the odd send
// is the one that fails.
// Every rank believes the next one is the root: each waits to receive, nobody sends. Probes
// (op_stamp.h) let them compare notes instead of waiting for the deadline.
TEST_P(MismatchTest, RootsAllWaiting) {
  const int n = GetParam().nranks;
  check(
      [&](int rank, ncclComm_t comm) {
        std::vector<float> v(kCount, static_cast<float>(rank));
        return ncclBroadcast(v.data(), v.data(), kCount, ncclFloat32, (rank + 1) % n, comm, nullptr);
      },
      "root");
}

// At a communicator's first call no lane exists yet. Rank 1 takes rank 0 as the root, the others
// rank n-1, and all go on with all-reduces. With 4 ranks the root's tree sends to rank 1 first, but
// rank 1's schedule never reads from the root, so on shm (where the receiver creates a lane) the
// root waits to send, and the others wait for the root or for rank 1. Each rank's evidence sits
// on a lane its own operation never opens; the stuck ranks open the lanes from every peer after a
// long stall (stream_checks.cc, openAllLanes) and find it. Before, all waited for MIXCCL_TIMEOUT.
TEST_P(MismatchTest, OtherRootAtFirstCall) {
  const int n = GetParam().nranks;
  check(
      [&](int rank, ncclComm_t comm) {
        std::vector<float> v(10, static_cast<float>(rank));
        ncclResult_t r = ncclBroadcast(v.data(), v.data(), v.size(), ncclFloat32, rank == 1 ? 0 : n - 1, comm, nullptr);
        for (int i = 0; i < kLaterCalls && r == ncclSuccess; ++i) {
          r = ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclSum, comm, nullptr);
        }
        return r;
      },
      "mismatched calls");
}

// Only the last rank takes rank 1 as a broadcast's root; every rank then calls all-reduces. A rank
// whose broadcast is still waiting may read, from a peer that finished its broadcast, a message of
// that peer's next collective (an all-reduce, seq 1). The error must say that the peer is at
// another sequence number: it used to read "rank 0 called AllReduce where this rank called
// Broadcast", a difference that does not exist at any one point of the program.
TEST_P(MismatchTest, RootSeenByOneRankNamesNoCallThatDidNotHappen) {
  const int n = GetParam().nranks;
  if (n < 3) GTEST_SKIP() << "needs a rank that is neither root";
  const auto start = std::chrono::steady_clock::now();
  std::vector<Outcome> out = runMismatch(n, [&](int rank, ncclComm_t comm) {
    std::vector<float> v(1000, static_cast<float>(rank));
    ncclResult_t r = ncclBroadcast(v.data(), v.data(), v.size(), ncclFloat32, rank == n - 1 ? 1 : 0, comm, nullptr);
    for (int i = 0; i < kLaterCalls && r == ncclSuccess; ++i) {
      r = ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclSum, comm, nullptr);
    }
    return r;
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  int usage = 0;
  for (size_t r = 0; r < out.size(); ++r) {
    if (out[r].result != ncclInvalidUsage) continue;
    ++usage;
    // Every rank called Broadcast at seq 0 and AllReduce after it: no kind differs at one seq.
    EXPECT_EQ(out[r].message.find("called AllReduce where this rank called Broadcast"), std::string::npos)
        << "rank " << r << ": " << out[r].message;
    EXPECT_EQ(out[r].message.find("called Broadcast where this rank called AllReduce"), std::string::npos)
        << "rank " << r << ": " << out[r].message;
    // Either the root itself, or the sequence number the peer's message belongs to.
    EXPECT_TRUE(out[r].message.find("root") != std::string::npos ||
                out[r].message.find("collective number 1 (mod 65536, AllReduce)") != std::string::npos)
        << "rank " << r << ": " << out[r].message;
  }
  EXPECT_GE(usage, 1) << "no rank reported the mismatch";
}

TEST_P(MismatchTest, SendRecvDatatype) {
  const int n = GetParam().nranks;
  check(
      [&](int rank, ncclComm_t comm) {
        std::vector<int> a(1000, rank), b(1000);
        ncclGroupStart();
        ncclSend(a.data(), a.size(), rank == 0 ? ncclFloat32 : ncclInt32, (rank + 1) % n, comm, nullptr);
        ncclRecv(b.data(), b.size(), ncclInt32, (rank + n - 1) % n, comm, nullptr);
        return ncclGroupEnd();
      },
      "datatype", /*successAllowed=*/true);
}

// An all-reduce whose counts differ by 2^14 + 1 (bits 0 and 14), which fold to the same 14-bit
// fingerprint: with 2 ranks the smaller count's rank returned success (the first chunks match in
// size and stamp) and left its peer waiting; with more ranks only a segment's size told, in a
// message that did not say "mismatched calls". Unrooted collectives carry the count in 30 bits.
TEST_P(MismatchTest, AllReduceCountsWithTheSameFingerprint) {
  const int last = GetParam().nranks - 1;
  constexpr size_t kBase = size_t{1} << 20, kOther = kBase ^ 1 ^ (size_t{1} << 14);
  check(
      [&](int rank, ncclComm_t comm) {
        std::vector<float> v(kOther, 1.0f);
        return ncclAllReduce(v.data(), v.data(), rank == last ? kOther : kBase, ncclFloat32, ncclSum, comm, nullptr);
      },
      "different count");
}

// A receive of whole chunks (2^17 floats of 512 KiB chunks) from a longer send whose count folds to
// the same 14-bit fingerprint (9 * 2^14 + 1): every message the receiver reads has its size and
// stamp, so only the count in the stamp can tell. It returned success with the tail never read.
TEST_P(MismatchTest, SendRecvCountsWithTheSameFingerprint) {
  EnvGuard chunk("MIXCCL_CHUNK_SIZE", "524288");
  constexpr size_t kRecvCount = size_t{1} << 17, kSendCount = 9 * (size_t{1} << 14) + 1;
  check(
      [&](int rank, ncclComm_t comm) {
        std::vector<float> v(kSendCount, 1.0f);
        if (rank == 0) return ncclSend(v.data(), kSendCount, ncclFloat32, 1, comm, nullptr);
        if (rank == 1) return ncclRecv(v.data(), kRecvCount, ncclFloat32, 0, comm, nullptr);
        return ncclSuccess;
      },
      "different count", /*successAllowed=*/true);
}

// A send without a matching receive whose message fits the lane returns success on the sender (as
// NCCL's may); the receiver's ncclCommFinalize must say that a message was never received.
TEST_P(MismatchTest, SendWithoutAReceiveThenFinalize) {
  check(
      [&](int rank, ncclComm_t comm) {
        std::vector<float> v(1000, 1.0f);
        ncclResult_t r = ncclSuccess;
        if (rank == 0) {
          r = ncclSend(v.data(), v.size(), ncclFloat32, 1, comm, nullptr);
          if (r == ncclSuccess) r = ncclSend(v.data(), v.size(), ncclFloat32, 1, comm, nullptr);
        } else if (rank == 1) {
          r = ncclRecv(v.data(), v.size(), ncclFloat32, 0, comm, nullptr);
        }
        return r != ncclSuccess ? r : ncclCommFinalize(comm);
      },
      "rank 0 sent a message (Send seq 1", /*successAllowed=*/true);
}

// One rank fails before finalize (here: at once; in CrossedBroadcastRootsThenFinalize, a follower
// that spots the other root's message after a long stall) and aborts; the others' finalize must
// fail within seconds, though some of them never had a connection from it to see close (their
// barrier rounds receive from it: src/core/bootstrap.cc, askListener).
TEST_P(MismatchTest, FinalizeBesideARankThatAbortedFailsWithinSeconds) {
  const int n = GetParam().nranks;
  const auto start = std::chrono::steady_clock::now();
  std::vector<Outcome> out = runMismatch(n, [&](int rank, ncclComm_t comm) {
    float x = 1.0f;
    ncclResult_t r = ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr);
    if (r != ncclSuccess) return r;
    if (rank == n / 2) return ncclInternalError;  // stands for a call that failed on this rank
    return ncclCommFinalize(comm);
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  for (int r = 0; r < n; ++r) {
    if (r != n / 2) EXPECT_EQ(out[r].result, ncclRemoteError) << "rank " << r << ": " << out[r].message;
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, MismatchTest,
                         ::testing::Values(Param{"shm", 2}, Param{"shm", 3}, Param{"shm", 4}, Param{"tcp", 2},
                                           Param{"tcp", 4}),
                         [](const auto& info) {
                           return std::string(info.param.transport) + "_np" + std::to_string(info.param.nranks);
                         });

}  // namespace
}  // namespace mixccl::testing
