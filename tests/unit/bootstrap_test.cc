// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
//
// Bootstrap with ranks as threads of one process: registration, allGather, tagged send/recv,
// barrier, and the root's and ranks' defences against foreign, garbage and missing clients.
#include "src/core/bootstrap.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <net/if.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/config.h"
#include "src/core/bootstrap_wire.h"
#include "tests/support/env_guard.h"

namespace mixccl {
namespace {

using std::chrono::milliseconds;

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

using testing::EnvGuard;

// Runs body(rank) on nranks threads and waits for all.
void runRanks(int nranks, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) threads.emplace_back(body, r);
  for (auto& t : threads) t.join();
}

// Sends raw bytes to `addr` and closes (or keeps the socket open when `keep` is given).
void sendRaw(const SocketAddress& addr, const void* data, size_t bytes, Socket* keep = nullptr) {
  Socket s;
  ASSERT_EQ(Socket::connect(addr, Clock::now() + std::chrono::seconds(5), nullptr, &s), Result::kSuccess);
  if (bytes > 0) {
    ASSERT_EQ(s.sendAll(data, bytes, Clock::now() + std::chrono::seconds(5), nullptr, "x"), Result::kSuccess);
  }
  if (keep != nullptr) *keep = std::move(s);
}

TEST(UniqueId, RoundTripAndLayout) {
  UniqueIdData id;
  id.commHash = 0x0123456789abcdefull;
  for (int i = 0; i < 16; ++i) id.secret[i] = static_cast<uint8_t>(i + 1);
  ASSERT_EQ(parseHostPort("10.0.0.7:4242", &id.root), Result::kSuccess);
  id.flags = UniqueIdData::kRootStartedByRank0;
  uint8_t wire[UniqueIdData::kBytes];
  id.encode(wire);
  EXPECT_EQ(memcmp(wire, "MXID", 4), 0);
  EXPECT_EQ(wire[4], 1);     // protocol version, little-endian
  EXPECT_EQ(wire[8], 0xef);  // commHash, little-endian
  EXPECT_EQ(wire[16], 1);    // secret
  EXPECT_EQ(wire[33], 4);    // root address family (big-endian u16 at 32)
  EXPECT_EQ(wire[52], 1);    // flags
  for (size_t i = 56; i < sizeof(wire); ++i) EXPECT_EQ(wire[i], 0) << i;
  UniqueIdData back;
  ASSERT_EQ(UniqueIdData::decode(wire, &back), Result::kSuccess);
  EXPECT_EQ(back.commHash, id.commHash);
  EXPECT_EQ(memcmp(back.secret, id.secret, 16), 0);
  EXPECT_EQ(back.root.toString(), "10.0.0.7:4242");
  EXPECT_EQ(back.flags, id.flags);

  wire[0] ^= 0xff;
  EXPECT_EQ(UniqueIdData::decode(wire, &back), Result::kInvalidArgument);
  uint8_t zeros[UniqueIdData::kBytes] = {};
  EXPECT_NE(UniqueIdData::decode(zeros, &back), Result::kSuccess);
}

TEST(UniqueId, CommIdEnvGivesTheSameIdEverywhere) {
  EnvGuard g("NCCL_COMM_ID", "127.0.0.1:1");
  UniqueIdData a, b, c;
  ASSERT_EQ(createUniqueId(&a), Result::kSuccess);
  ASSERT_EQ(createUniqueId(&b), Result::kSuccess);
  EXPECT_EQ(a.commHash, b.commHash);
  EXPECT_EQ(memcmp(a.secret, b.secret, 16), 0);
  EXPECT_EQ(a.root.toString(), "127.0.0.1:1");
  EXPECT_EQ(a.flags, UniqueIdData::kRootStartedByRank0);
  // Internal ids ignore the variable and get a fresh root.
  ASSERT_EQ(createUniqueId(&c, /*honourCommIdEnv=*/false), Result::kSuccess);
  EXPECT_EQ(c.flags, 0u);
  EXPECT_NE(c.commHash, a.commHash);
}

// MIXCCL_COMM_SECRET (mixcclrun sets a random one per job) makes the NCCL_COMM_ID-derived secret
// unguessable: the same variable with another shared secret gives the same commHash and root but
// a different secret, in both halves, so the root turns such ranks away.
TEST(UniqueId, CommSecretKeysTheCommIdSecret) {
  EnvGuard g("NCCL_COMM_ID", "127.0.0.1:1");
  UniqueIdData plain, a1, a2, b;
  ASSERT_EQ(createUniqueId(&plain), Result::kSuccess);
  {
    EnvGuard s("MIXCCL_COMM_SECRET", "0123456789abcdef0123456789abcdef");
    ASSERT_EQ(createUniqueId(&a1), Result::kSuccess);
    ASSERT_EQ(createUniqueId(&a2), Result::kSuccess);
  }
  {
    EnvGuard s("MIXCCL_COMM_SECRET", "0123456789abcdef0123456789abcdee");
    ASSERT_EQ(createUniqueId(&b), Result::kSuccess);
  }
  EXPECT_EQ(memcmp(a1.secret, a2.secret, 16), 0);  // every rank derives the same
  EXPECT_EQ(a1.commHash, plain.commHash);
  EXPECT_EQ(a1.root.toString(), plain.root.toString());
  for (const UniqueIdData* other : {&plain, &b}) {
    EXPECT_NE(memcmp(a1.secret, other->secret, 8), 0);
    EXPECT_NE(memcmp(a1.secret + 8, other->secret + 8, 8), 0);
  }
}

class BootstrapRanks : public ::testing::TestWithParam<int> {};

TEST_P(BootstrapRanks, InitAllGatherSendRecvBarrier) {
  const int n = GetParam();
  UniqueIdData id;
  ASSERT_EQ(createUniqueId(&id), Result::kSuccess);
  constexpr size_t kBlock = 13;
  runRanks(n, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    ASSERT_EQ(Bootstrap::init(id, rank, n, nullptr, &b), Result::kSuccess) << lastError();
    EXPECT_EQ(b->rank(), rank);
    EXPECT_EQ(b->nranks(), n);

    for (int round = 0; round < 3; ++round) {
      std::vector<uint8_t> all(kBlock * n, 0xee);
      for (size_t i = 0; i < kBlock; ++i) all[rank * kBlock + i] = static_cast<uint8_t>(rank * 31 + i + round);
      ASSERT_EQ(b->allGather(all.data(), kBlock), Result::kSuccess) << lastError();
      for (int r = 0; r < n; ++r) {
        for (size_t i = 0; i < kBlock; ++i) {
          ASSERT_EQ(all[r * kBlock + i], static_cast<uint8_t>(r * 31 + i + round)) << "rank " << rank << " block " << r;
        }
      }
    }

    // Tags received in another order than sent: the stash keeps them apart.
    const int next = (rank + 1) % n;
    const int prev = (rank + n - 1) % n;
    for (uint32_t tag = 1; tag <= 3; ++tag) {
      std::vector<uint8_t> msg(tag * 100, static_cast<uint8_t>(rank * 10 + tag));
      ASSERT_EQ(b->send(next, tag, msg.data(), msg.size()), Result::kSuccess) << lastError();
    }
    for (uint32_t tag : {3u, 1u, 2u}) {
      std::vector<uint8_t> msg(tag * 100);
      ASSERT_EQ(b->recv(prev, tag, msg.data(), msg.size()), Result::kSuccess) << lastError();
      EXPECT_EQ(msg, std::vector<uint8_t>(tag * 100, static_cast<uint8_t>(prev * 10 + tag)));
    }
    // Zero-byte messages are messages too.
    ASSERT_EQ(b->send(next, 9, nullptr, 0), Result::kSuccess);
    ASSERT_EQ(b->recv(prev, 9, nullptr, 0), Result::kSuccess);
    for (int i = 0; i < 3; ++i) ASSERT_EQ(b->barrier(), Result::kSuccess) << lastError();
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, BootstrapRanks, ::testing::Values(1, 2, 3, 4, 7, 8));

TEST(Bootstrap, LargeMessagesBothWaysDoNotDeadlock) {
  // Every rank sends 16 MiB to the next before receiving from the previous one: far more than
  // socket buffers hold, so senders must drain their incoming side while blocked.
  const int n = 4;
  UniqueIdData id;
  ASSERT_EQ(createUniqueId(&id), Result::kSuccess);
  runRanks(n, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    ASSERT_EQ(Bootstrap::init(id, rank, n, nullptr, &b), Result::kSuccess) << lastError();
    std::vector<uint8_t> out(16 << 20, static_cast<uint8_t>(rank + 1)), in(out.size());
    ASSERT_EQ(b->send((rank + 1) % n, 5, out.data(), out.size()), Result::kSuccess) << lastError();
    ASSERT_EQ(b->recv((rank + n - 1) % n, 5, in.data(), in.size()), Result::kSuccess) << lastError();
    EXPECT_EQ(in[0], static_cast<uint8_t>((rank + n - 1) % n + 1));
    EXPECT_EQ(in.back(), in[0]);
    // A big allGather too.
    std::vector<uint8_t> all(static_cast<size_t>(n) << 20);
    memset(all.data() + (static_cast<size_t>(rank) << 20), rank + 7, 1 << 20);
    ASSERT_EQ(b->allGather(all.data(), 1 << 20), Result::kSuccess) << lastError();
    for (int r = 0; r < n; ++r) EXPECT_EQ(all[(static_cast<size_t>(r) << 20) + 12345], r + 7);
  });
}

TEST(Bootstrap, SelfSendAndSizeMismatch) {
  UniqueIdData id;
  ASSERT_EQ(createUniqueId(&id), Result::kSuccess);
  runRanks(2, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    ASSERT_EQ(Bootstrap::init(id, rank, 2, nullptr, &b), Result::kSuccess) << lastError();
    int v = 40 + rank, w = 0;
    ASSERT_EQ(b->send(rank, 1, &v, sizeof(v)), Result::kSuccess);
    ASSERT_EQ(b->recv(rank, 1, &w, sizeof(w)), Result::kSuccess);
    EXPECT_EQ(w, v);
    ASSERT_EQ(b->send(1 - rank, 2, &v, sizeof(v)), Result::kSuccess);
    uint8_t small[2];
    EXPECT_EQ(b->recv(1 - rank, 2, small, sizeof(small)), Result::kRemoteError);
    EXPECT_NE(lastError().find("expected 2"), std::string::npos) << lastError();
    EXPECT_EQ(b->send(5, 1, &v, sizeof(v)), Result::kInvalidArgument);
    EXPECT_EQ(b->barrier(), Result::kSuccess);
  });
}

TEST(Bootstrap, WrongSecretAndGarbageAreRejectedWhileTheJobCompletes) {
  const int n = 3;
  UniqueIdData id;
  ASSERT_EQ(createUniqueId(&id), Result::kSuccess);

  // A client with the right root but a wrong secret, claiming rank 0: the root closes it.
  UniqueIdData forged = id;
  forged.secret[3] ^= 0x40;
  std::unique_ptr<Bootstrap> rogue;
  const auto start = Clock::now();
  EXPECT_NE(Bootstrap::init(forged, 0, n, nullptr, &rogue), Result::kSuccess);
  EXPECT_LT(secondsSince(start), 5.0);

  // Garbage of every shape at the root.
  std::vector<uint8_t> noise(200);
  for (size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<uint8_t>(i * 7 + 3);
  ASSERT_NO_FATAL_FAILURE(sendRaw(id.root, noise.data(), noise.size()));
  ASSERT_NO_FATAL_FAILURE(sendRaw(id.root, noise.data(), 3));
  ASSERT_NO_FATAL_FAILURE(sendRaw(id.root, nullptr, 0));
  Socket silent;  // stays open, sends nothing, for the whole job
  ASSERT_NO_FATAL_FAILURE(sendRaw(id.root, nullptr, 0, &silent));

  runRanks(n, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    ASSERT_EQ(Bootstrap::init(id, rank, n, nullptr, &b), Result::kSuccess) << lastError();
    // Garbage at another rank's listener, while the ranks talk.
    if (rank == 0) {
      ASSERT_NO_FATAL_FAILURE(sendRaw(b->address(1), noise.data(), noise.size()));
      ASSERT_NO_FATAL_FAILURE(sendRaw(b->address(2), noise.data(), 5));
      uint8_t forgedHello[64] = {'M', 'X', 'B', 'H', 1};
      ASSERT_NO_FATAL_FAILURE(sendRaw(b->address(1), forgedHello, sizeof(forgedHello)));
    }
    ASSERT_EQ(b->barrier(), Result::kSuccess) << lastError();
    std::vector<int> all(n);
    all[rank] = rank * 5;
    ASSERT_EQ(b->allGather(all.data(), sizeof(int)), Result::kSuccess) << lastError();
    for (int r = 0; r < n; ++r) EXPECT_EQ(all[r], r * 5);
  });
}

TEST(Bootstrap, DuplicateRankIsRefusedAndTheSlotStaysUsable) {
  UniqueIdData id;
  ASSERT_EQ(createUniqueId(&id), Result::kSuccess);
  std::unique_ptr<Bootstrap> first;
  std::thread t0([&] { EXPECT_EQ(Bootstrap::init(id, 0, 2, nullptr, &first), Result::kSuccess) << lastError(); });
  std::this_thread::sleep_for(milliseconds(200));  // let the first rank 0 register
  std::unique_ptr<Bootstrap> dup;
  EXPECT_EQ(Bootstrap::init(id, 0, 2, nullptr, &dup), Result::kInvalidUsage);
  EXPECT_NE(lastError().find("registered twice"), std::string::npos) << lastError();
  std::unique_ptr<Bootstrap> wrongSize;
  EXPECT_EQ(Bootstrap::init(id, 1, 3, nullptr, &wrongSize), Result::kInvalidUsage);
  EXPECT_NE(lastError().find("nranks"), std::string::npos) << lastError();
  std::unique_ptr<Bootstrap> second;
  EXPECT_EQ(Bootstrap::init(id, 1, 2, nullptr, &second), Result::kSuccess) << lastError();
  t0.join();
  ASSERT_TRUE(first && second);
  std::thread t1([&] { EXPECT_EQ(first->barrier(), Result::kSuccess); });
  EXPECT_EQ(second->barrier(), Result::kSuccess);
  t1.join();
}

TEST(Bootstrap, MissingRanksTimeOutInBoundedTime) {
  EnvGuard g("MIXCCL_TIMEOUT", "2");
  UniqueIdData id;
  ASSERT_EQ(createUniqueId(&id), Result::kSuccess);
  const auto start = Clock::now();
  runRanks(2, [&](int rank) {  // ranks 0 and 1 of 3; rank 2 never comes
    std::unique_ptr<Bootstrap> b;
    EXPECT_EQ(Bootstrap::init(id, rank, 3, nullptr, &b), Result::kRemoteError);
    // The root's explanation reaches the ranks: it names who is missing.
    EXPECT_NE(lastError().find("missing ranks 2"), std::string::npos) << lastError();
  });
  const double took = secondsSince(start);
  EXPECT_GE(took, 1.5);
  EXPECT_LT(took, 4.0);
}

TEST(Bootstrap, AbortStopsInitAndRecv) {
  UniqueIdData id;
  ASSERT_EQ(createUniqueId(&id), Result::kSuccess);
  std::atomic<bool> abortFlag{false};
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(200));
    abortFlag = true;
  });
  std::unique_ptr<Bootstrap> b;
  auto start = Clock::now();
  EXPECT_EQ(Bootstrap::init(id, 0, 2, &abortFlag, &b), Result::kRemoteError);  // rank 1 never comes
  EXPECT_LT(secondsSince(start), 0.2 + 2.0);  // a poll slice after the abort, with room for load
  setter.join();

  // Same for a recv that waits on a live but silent peer.
  UniqueIdData id2;
  ASSERT_EQ(createUniqueId(&id2), Result::kSuccess);
  std::atomic<bool> abort2{false};
  std::unique_ptr<Bootstrap> b0, b1;
  std::thread t([&] { EXPECT_EQ(Bootstrap::init(id2, 1, 2, nullptr, &b1), Result::kSuccess); });
  ASSERT_EQ(Bootstrap::init(id2, 0, 2, &abort2, &b0), Result::kSuccess) << lastError();
  t.join();
  std::thread setter2([&] {
    std::this_thread::sleep_for(milliseconds(200));
    abort2 = true;
  });
  int v;
  start = Clock::now();
  EXPECT_EQ(b0->recv(1, 3, &v, sizeof(v)), Result::kRemoteError);
  EXPECT_LT(secondsSince(start), 0.2 + 2.0);  // a poll slice after the abort, with room for load
  EXPECT_NE(lastError().find("rank 1"), std::string::npos) << lastError();
  setter2.join();
}

TEST(Bootstrap, PeerExitIsDetectedWithoutWaitingForTheTimeout) {
  UniqueIdData id;
  ASSERT_EQ(createUniqueId(&id), Result::kSuccess);
  std::unique_ptr<Bootstrap> b0, b1;
  std::thread t([&] { EXPECT_EQ(Bootstrap::init(id, 1, 2, nullptr, &b1), Result::kSuccess); });
  ASSERT_EQ(Bootstrap::init(id, 0, 2, nullptr, &b0), Result::kSuccess) << lastError();
  t.join();
  int v = 77;
  ASSERT_EQ(b1->send(0, 1, &v, sizeof(v)), Result::kSuccess);
  b1.reset();  // rank 1 "exits" right after sending
  int w = 0;
  ASSERT_EQ(b0->recv(1, 1, &w, sizeof(w)), Result::kSuccess) << lastError();  // sent data still arrives
  EXPECT_EQ(w, 77);
  const auto start = Clock::now();
  EXPECT_EQ(b0->recv(1, 2, &w, sizeof(w)), Result::kRemoteError);
  EXPECT_LT(secondsSince(start), 2.0);
  EXPECT_NE(lastError().find("rank 1"), std::string::npos) << lastError();
}

// A rank that exits after the address exchange and before this rank's first connection to it
// (init's ring connects each rank to the next only): its listener refuses, and every rank listens
// before it registers, so the send fails within seconds, not at MIXCCL_TIMEOUT.
TEST(Bootstrap, RefusedPeerIsGoneWithinSeconds) {
  EnvGuard g("MIXCCL_TIMEOUT", "30");
  UniqueIdData id;
  ASSERT_EQ(createUniqueId(&id), Result::kSuccess);
  std::unique_ptr<Bootstrap> b[3];
  runRanks(3, [&](int rank) { ASSERT_EQ(Bootstrap::init(id, rank, 3, nullptr, &b[rank]), Result::kSuccess); });
  b[2].reset();  // rank 2 "exits"; rank 0 never connected to it
  int v = 1;
  const auto start = Clock::now();
  EXPECT_EQ(b[0]->send(2, 1, &v, sizeof(v)), Result::kRemoteError);
  EXPECT_LT(secondsSince(start), 10.0);
  EXPECT_NE(lastError().find("refused"), std::string::npos) << lastError();
  EXPECT_NE(lastError().find("rank 2"), std::string::npos) << lastError();
}

// A rank that left before it ever connected to this one (init's ring connects each rank only to
// the next): no closed connection tells, so the receiver asks the peer's listener itself. Found
// as a 60 s finalize under TSan: a rank failed a mismatched broadcast and aborted, and the
// others' barrier waited in the rounds that receive from it until MIXCCL_TIMEOUT.
TEST(Bootstrap, RecvFromAPeerThatLeftBeforeConnectingFailsWithinSeconds) {
  EnvGuard g("MIXCCL_TIMEOUT", "30");
  UniqueIdData id;
  ASSERT_EQ(createUniqueId(&id), Result::kSuccess);
  std::unique_ptr<Bootstrap> b[3];
  runRanks(3, [&](int rank) { ASSERT_EQ(Bootstrap::init(id, rank, 3, nullptr, &b[rank]), Result::kSuccess); });
  b[2].reset();  // rank 2 "exits"; it never connected to rank 1
  int v = 0;
  const auto start = Clock::now();
  EXPECT_EQ(b[1]->recv(2, 1, &v, sizeof(v)), Result::kRemoteError);
  EXPECT_LT(secondsSince(start), 10.0);
  EXPECT_NE(lastError().find("rank 2"), std::string::npos) << lastError();
}

// The same peer, alive when the receiver connects to it (the connection waits in its listener's
// queue) and leaving during the wait: the receiver sees that connection end.
TEST(Bootstrap, RecvFromAPeerThatLeavesDuringTheWaitFailsWithinSeconds) {
  EnvGuard g("MIXCCL_TIMEOUT", "30");
  UniqueIdData id;
  ASSERT_EQ(createUniqueId(&id), Result::kSuccess);
  std::unique_ptr<Bootstrap> b[3];
  runRanks(3, [&](int rank) { ASSERT_EQ(Bootstrap::init(id, rank, 3, nullptr, &b[rank]), Result::kSuccess); });
  std::atomic<bool> received{false};
  Result r = Result::kSuccess;
  double waited = 0;
  std::thread receiver([&] {
    int v = 0;
    const auto start = Clock::now();
    r = b[1]->recv(2, 1, &v, sizeof(v));
    waited = secondsSince(start);
    received = true;
  });
  // Rank 2 leaves once the receiver has (most likely) connected to it: its wait looks after a
  // second. Either way the receiver must fail within seconds; this order takes the closing path.
  std::this_thread::sleep_for(milliseconds(2500));
  b[2].reset();
  receiver.join();
  EXPECT_TRUE(received);
  EXPECT_EQ(r, Result::kRemoteError);
  EXPECT_LT(waited, 10.0);
}

// Every rank but one reaches a barrier; the one that left never connected to some of them.
TEST(Bootstrap, BarrierWithARankThatLeftFailsEverywhereWithinSeconds) {
  EnvGuard g("MIXCCL_TIMEOUT", "30");
  constexpr int kRanks = 4;
  UniqueIdData id;
  ASSERT_EQ(createUniqueId(&id), Result::kSuccess);
  std::unique_ptr<Bootstrap> b[kRanks];
  runRanks(kRanks,
           [&](int rank) { ASSERT_EQ(Bootstrap::init(id, rank, kRanks, nullptr, &b[rank]), Result::kSuccess); });
  b[2].reset();
  runRanks(kRanks, [&](int rank) {
    if (rank == 2) return;
    const auto start = Clock::now();
    EXPECT_EQ(b[rank]->barrier(), Result::kRemoteError) << "rank " << rank;
    EXPECT_LT(secondsSince(start), 10.0) << "rank " << rank << ": " << lastError();
  });
}

// Rank 2 of 3 registers (its hello reaches the root) and leaves (its connection closes) before the
// others come: a rank registers once, so its slot never fills again. The root kept ranks 0 and 1
// waiting for it until MIXCCL_TIMEOUT; now it tells those registered and exits, and those that
// come later find it gone. The root reads the hello before it can see the close (a stream keeps
// order), so the departure is that of a registered rank whatever the timing. A root scheduled late
// reads all three hellos in one pass, before any poll; it looks for closes once more before it
// sends the table (CI failed here when it did not: 0 of 300 runs here, 5 of 5 with the root held
// back 300 ms).
TEST(Bootstrap, ARankThatRegisteredAndLeftFailsTheOthersWithinSeconds) {
  EnvGuard g("MIXCCL_TIMEOUT", "30");
  UniqueIdData id;
  ASSERT_EQ(createUniqueId(&id), Result::kSuccess);
  bootstrap::Hello h;
  h.commHash = id.commHash;
  memcpy(h.secret, id.secret, sizeof(h.secret));
  h.kind = bootstrap::HelloKind::kRegister;
  h.rank = 2;
  h.nranks = 3;
  h.address = id.root;  // any address: nobody connects to it before the job is complete
  uint8_t hello[bootstrap::Hello::kBytes];
  h.encode(hello);
  ASSERT_NO_FATAL_FAILURE(sendRaw(id.root, hello, sizeof(hello)));  // then closes
  runRanks(2, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    const auto start = Clock::now();
    EXPECT_EQ(Bootstrap::init(id, rank, 3, nullptr, &b), Result::kRemoteError) << "rank " << rank;
    EXPECT_LT(secondsSince(start), 10.0) << "rank " << rank << ": " << lastError();
  });
}

TEST(Bootstrap, RecvTimeoutNamesThePeer) {
  EnvGuard g("MIXCCL_TIMEOUT", "1");
  UniqueIdData id;
  ASSERT_EQ(createUniqueId(&id), Result::kSuccess);
  std::unique_ptr<Bootstrap> b0, b1;
  std::thread t([&] { EXPECT_EQ(Bootstrap::init(id, 1, 2, nullptr, &b1), Result::kSuccess); });
  ASSERT_EQ(Bootstrap::init(id, 0, 2, nullptr, &b0), Result::kSuccess) << lastError();
  t.join();
  int v;
  const auto start = Clock::now();
  EXPECT_EQ(b0->recv(1, 4, &v, sizeof(v)), Result::kRemoteError);
  EXPECT_LT(secondsSince(start), 2.0);
  EXPECT_NE(lastError().find("rank 1 (" + b0->address(1).toString() + ")"), std::string::npos) << lastError();
  EXPECT_NE(lastError().find("timed out"), std::string::npos) << lastError();
}

TEST(Bootstrap, CommIdRootStartedByRankZero) {
  // Pick a free port for the root, then let rank 0 start it; the others may come first.
  SocketAddress probe;
  ASSERT_EQ(parseHostPort("127.0.0.1:0", &probe), Result::kSuccess);
  {
    Socket s;
    ASSERT_EQ(Socket::listen(&probe, &s), Result::kSuccess);
  }
  EnvGuard g("NCCL_COMM_ID", probe.toString().c_str());
  UniqueIdData id;
  ASSERT_EQ(createUniqueId(&id), Result::kSuccess);
  const int n = 4;
  runRanks(n, [&](int rank) {
    if (rank == 0) std::this_thread::sleep_for(milliseconds(300));
    std::unique_ptr<Bootstrap> b;
    ASSERT_EQ(Bootstrap::init(id, rank, n, nullptr, &b), Result::kSuccess) << lastError();
    std::vector<int> all(n);
    all[rank] = rank + 100;
    ASSERT_EQ(b->allGather(all.data(), sizeof(int)), Result::kSuccess) << lastError();
    for (int r = 0; r < n; ++r) EXPECT_EQ(all[r], r + 100);
  });
}

// "fe80::...%ifname" of an interface that is up, running and has a link-local IPv6 address, or "".
std::string linkLocalAddress() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (const ifaddrs* ifa = list; ifa != nullptr && found.empty(); ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || ifa->ifa_addr->sa_family != AF_INET6) continue;
    if ((ifa->ifa_flags & IFF_UP) == 0 || (ifa->ifa_flags & IFF_RUNNING) == 0) continue;
    const auto* a6 = reinterpret_cast<const sockaddr_in6*>(ifa->ifa_addr);
    if (!IN6_IS_ADDR_LINKLOCAL(&a6->sin6_addr)) continue;
    char text[INET6_ADDRSTRLEN] = {};
    inet_ntop(AF_INET6, &a6->sin6_addr, text, sizeof(text));
    found = std::string(text) + "%" + ifa->ifa_name;
  }
  freeifaddrs(list);
  return found;
}

// NCCL accepts NCCL_COMM_ID=[fe80::1%eth0]:port. The 20-byte wire address has no room for the
// scope, so the id (passed to ncclCommInitRank as bytes) lost it: rank 0 could not bind the root
// and every rank failed to connect with EINVAL.
TEST(Bootstrap, LinkLocalCommIdKeepsItsScopeThroughTheIdBytes) {
  const std::string host = linkLocalAddress();
  if (host.empty()) GTEST_SKIP() << "no interface with a link-local IPv6 address is up";
  SocketAddress probe;
  ASSERT_EQ(parseHostPort("[" + host + "]:0", &probe), Result::kSuccess) << lastError();
  ASSERT_NE(probe.scopeId(), 0u);
  {
    Socket s;
    ASSERT_EQ(Socket::listen(&probe, &s), Result::kSuccess) << lastError();
  }
  const std::string commId = "[" + host + "]:" + std::to_string(probe.port());
  EnvGuard g("NCCL_COMM_ID", commId.c_str());
  UniqueIdData made;
  ASSERT_EQ(createUniqueId(&made), Result::kSuccess) << lastError();
  uint8_t wire[UniqueIdData::kBytes];
  made.encode(wire);
  UniqueIdData id;
  ASSERT_EQ(UniqueIdData::decode(wire, &id), Result::kSuccess);
  EXPECT_EQ(id.root.scopeId(), probe.scopeId());
  const int n = 2;
  runRanks(n, [&](int rank) {
    std::unique_ptr<Bootstrap> b;
    ASSERT_EQ(Bootstrap::init(id, rank, n, nullptr, &b), Result::kSuccess) << commId << ": " << lastError();
    std::vector<int> all(n);
    all[rank] = rank + 7;
    ASSERT_EQ(b->allGather(all.data(), sizeof(int)), Result::kSuccess) << lastError();
    for (int r = 0; r < n; ++r) EXPECT_EQ(all[r], r + 7);
  });
}

}  // namespace
}  // namespace mixccl
