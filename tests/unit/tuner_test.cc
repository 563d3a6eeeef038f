// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// The tuner (src/core/tuner.h): NCCL_ALGO / NCCL_PROTO parsing with NCCL's syntax, clear errors
// naming the valid choices, and choices that follow the cost model and nothing else.

#include "src/core/tuner.h"

#include <gtest/gtest.h>
#include <nccl.h>

#include <string>
#include <vector>

#include "common/result.h"
#include "tests/support/env_guard.h"
#include "tests/support/rank_threads.h"

namespace mixccl {
namespace {

using algo::Algo;

TuneFacts twoRanksShm() {
  TuneFacts f;
  f.nranks = 2;
  return f;
}

// The sweeps' 8 ranks on the 2-core development machine.
TuneFacts eightRanksOnTwoCores() {
  TuneFacts f = twoRanksShm();
  f.nranks = 8;
  f.ranksPerCore = 4;
  return f;
}

Algo chosen(const Tuner& t, CollKind kind, uint64_t count, DataType dtype = DataType::kFloat32) {
  TuneChoice c;
  EXPECT_EQ(t.choose(kind, count, dtype, &c), Result::kSuccess) << lastError();
  return c.algo;
}

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// Oversubscribed hosts (more ranks than cores) pay latency per hop: the model multiplies alpha by
// the square of the ranks per core and leaves the byte costs, so the fewest-hop algorithm wins
// further up the sizes.
TEST(Tuner, OversubscriptionMakesHopsDearer) {
  TuneFacts f = twoRanksShm();
  f.nranks = 8;
  const algo::LinkModel base = linkModel(f);
  f.ranksPerCore = 4;
  const algo::LinkModel over = linkModel(f);
  EXPECT_DOUBLE_EQ(over.alpha, 16 * base.alpha);
  EXPECT_DOUBLE_EQ(over.beta, base.beta);
  EXPECT_DOUBLE_EQ(over.gamma, base.gamma);
  Tuner t;
  ASSERT_EQ(t.configure("", "", f), Result::kSuccess);
  EXPECT_EQ(chosen(t, CollKind::kAllReduce, 1024), Algo::kOneShot);  // 4 KiB
  f.ranksPerCore = 1;
  ASSERT_EQ(t.configure("", "", f), Result::kSuccess);
  EXPECT_NE(chosen(t, CollKind::kAllReduce, 1024), Algo::kOneShot);
}

// A send staged by a pass of its own over memory (the recursive and Bruck forms, every round)
// costs a copy once the data has left the cache; the ring's relays send what they just wrote. So
// at 8 ranks on 2 cores the ring takes the large sizes from 256 KiB (the whole buffer, as
// nccl-tests counts it) on, where the logarithmic forms measured 1.4-2.2x slower at 2 MiB, and
// the tuned small sizes keep their picks (docs/TUNING.md, "Staged sends").
TEST(Tuner, StagedSendsGiveTheRingTheSizesBeyondTheCache) {
  TuneFacts f = eightRanksOnTwoCores();
  Tuner t;
  ASSERT_EQ(t.configure("", "", f), Result::kSuccess);
  for (uint64_t whole : {uint64_t{256} << 10, uint64_t{2} << 20, uint64_t{32} << 20}) {
    EXPECT_EQ(chosen(t, CollKind::kAllReduce, whole / 4), Algo::kRing) << whole;
    // The direct all-gather is taken up to 256 KiB in all (Tuner::configure).
    EXPECT_EQ(chosen(t, CollKind::kAllGather, whole / 4 / 8), whole <= (256 << 10) ? Algo::kDirect : Algo::kRing)
        << whole;
    EXPECT_EQ(chosen(t, CollKind::kReduceScatter, whole / 4 / 8), Algo::kRing) << whole;
  }
  EXPECT_EQ(chosen(t, CollKind::kAllGather, (512 << 10) / 4 / 8), Algo::kRing);
  const uint64_t small = 64 << 10;
  EXPECT_EQ(chosen(t, CollKind::kAllReduce, small / 4), Algo::kRabenseifner);
  EXPECT_EQ(chosen(t, CollKind::kAllGather, small / 4 / 8), Algo::kDirect);
  // The ordered reduce-scatter up to 4 KiB in all (Tuner::configure: it lost to recursive
  // halving at 8 KiB in three sweeps); recursive halving above.
  EXPECT_EQ(chosen(t, CollKind::kReduceScatter, (4 << 10) / 4 / 8), Algo::kOrdered);
  for (uint64_t whole : {uint64_t{8} << 10, small}) {
    EXPECT_EQ(chosen(t, CollKind::kReduceScatter, whole / 4 / 8), Algo::kRecursiveHalving) << whole;
  }
  // With 2 ranks to a core a round is cheap enough for recursive halving's log p of them
  // (Tuner::autoChoices; 4 ranks on 2 cores measured 1.1-1.3x faster than ordered up to 8 KiB).
  TuneFacts four = eightRanksOnTwoCores();
  four.nranks = 4;
  four.ranksPerCore = 2;
  ASSERT_EQ(t.configure("", "", four), Result::kSuccess);
  for (uint64_t whole : {uint64_t{16}, uint64_t{256}, uint64_t{8} << 10}) {
    EXPECT_EQ(chosen(t, CollKind::kReduceScatter, std::max<uint64_t>(1, whole / 4 / 4)), Algo::kRecursiveHalving)
        << whole;
  }

  // The pass is priced where the ranks of a core touch more than its cache, at beta; never over
  // the network, where beta is the wire's.
  EXPECT_EQ(callModel(f, CollKind::kAllReduce, small).stage, 0);
  EXPECT_EQ(callModel(f, CollKind::kAllReduce, 2 << 20).stage, linkModel(f).beta);
  EXPECT_EQ(callModel(f, CollKind::kAllGather, 32 << 10).stage, linkModel(f).beta);  // 4 x 9 x 32 KiB
  EXPECT_EQ(callModel(f, CollKind::kAllGather, 16 << 10).stage, 0);                  // 4 x 9 x 16 KiB
  f.ranksPerCore = 1;
  EXPECT_EQ(callModel(f, CollKind::kAllGather, 32 << 10).stage, 0);
  f.shm = false;
  EXPECT_EQ(callModel(f, CollKind::kAllReduce, 256 << 20).stage, 0);
}

// While a call's data stays in the cache, a byte costs the cache's speed (the shm copy and the
// reduction), times the ranks that share a core's CPU; beyond it, linkModel()'s memory-speed costs.
// Over a network beta stays the wire's. Priced at memory speed, the small sizes let Rabenseifner's
// saved reductions outweigh its extra hops: at 2 ranks it was picked from 5 KiB and measured 1.2x
// slower than recursive doubling at 8 and 16 KiB, as at 16 KiB on 4 ranks (docs/TUNING.md).
// A receive copied out of its slot (the ring's, Rabenseifner's and the trees' gather passes) reads
// the bytes from the sender's core: priced in the cache, at a hop's speed. Without it the ring took
// 2-rank all-reduces from 32 KiB on, where recursive doubling, which combines every receive, was
// faster up to 256 KiB (32 KiB: 6.0 against 7.8 us) and 1.06x behind at 512 KiB
// (docs/TUNING.md, "Data in the cache").
TEST(Tuner, CopiesOutOfTheSlotKeepTwoRanksOnRecursiveDoublingInTheCache) {
  const TuneFacts f = twoRanksShm();
  EXPECT_DOUBLE_EQ(callModel(f, CollKind::kAllReduce, 32 << 10).copyOut, kInCacheBeta);
  EXPECT_DOUBLE_EQ(callModel(f, CollKind::kAllReduce, 64 << 20).copyOut, 0);
  EXPECT_DOUBLE_EQ(callModel(eightRanksOnTwoCores(), CollKind::kAllReduce, 8 << 10).copyOut, 4 * kInCacheBeta);
  Tuner t;
  ASSERT_EQ(t.configure("", "", f), Result::kSuccess);
  for (uint64_t bytes = 32 << 10; bytes <= (512 << 10); bytes *= 2) {
    EXPECT_EQ(chosen(t, CollKind::kAllReduce, bytes / 4), Algo::kRecursiveDoubling) << bytes;
  }
  EXPECT_EQ(chosen(t, CollKind::kAllReduce, (1 << 20) / 4), Algo::kRing);
}

// Among ranks that share memory the binomial reduce is taken up to 4 KiB of buffer, the chain
// beyond (Tuner::configure: in calls back to back the chain was 1.1-2x faster from 8-32 KiB at 4,
// 8 and 16 ranks on 2 cores). Named in NCCL_ALGO, the tree runs at any size.
TEST(Tuner, TheBinomialReduceIsForSmallBuffersAmongRanksThatShareMemory) {
  TuneFacts f = eightRanksOnTwoCores();
  Tuner t;
  ASSERT_EQ(t.configure("", "", f), Result::kSuccess);
  EXPECT_EQ(chosen(t, CollKind::kReduce, (4 << 10) / 4), Algo::kBinomialTree);
  EXPECT_EQ(chosen(t, CollKind::kReduce, (8 << 10) / 4), Algo::kRing);
  EXPECT_EQ(chosen(t, CollKind::kReduce, (256 << 10) / 4), Algo::kRing);
  // The broadcast keeps its tree: there the root only sends, and the tree led at every size.
  EXPECT_EQ(chosen(t, CollKind::kBroadcast, (32 << 10) / 4), Algo::kBinomialTree);
  ASSERT_EQ(t.configure("reduce:tree", "", f), Result::kSuccess);
  EXPECT_EQ(chosen(t, CollKind::kReduce, (256 << 10) / 4), Algo::kBinomialTree);
}

TEST(Tuner, DataInTheCacheCostsTheCachesSpeedPerRankOfACore) {
  TuneFacts f = twoRanksShm();
  const uint64_t small = 8 << 10;
  EXPECT_DOUBLE_EQ(callModel(f, CollKind::kAllReduce, small).beta, kInCacheBeta);
  EXPECT_DOUBLE_EQ(callModel(f, CollKind::kAllReduce, small).gamma, kInCacheGamma);
  EXPECT_DOUBLE_EQ(callModel(f, CollKind::kAllReduce, 64 << 20).beta, linkModel(f).beta);
  EXPECT_DOUBLE_EQ(callModel(f, CollKind::kAllReduce, 64 << 20).gamma, linkModel(f).gamma);
  // Every collective counts what its ranks touch: a 1 MiB broadcast leaves the cache too.
  EXPECT_DOUBLE_EQ(callModel(f, CollKind::kBroadcast, 1 << 20).beta, linkModel(f).beta);
  EXPECT_DOUBLE_EQ(callModel(f, CollKind::kAlltoAll, 512 << 10).beta, linkModel(f).beta);  // 2 x 2 x 512 KiB

  const TuneFacts over = eightRanksOnTwoCores();
  EXPECT_DOUBLE_EQ(callModel(over, CollKind::kAllReduce, small).beta, 4 * kInCacheBeta);
  EXPECT_DOUBLE_EQ(callModel(over, CollKind::kAllReduce, small).gamma, 4 * kInCacheGamma);
  EXPECT_DOUBLE_EQ(callModel(over, CollKind::kAllReduce, 256 << 10).beta, linkModel(over).beta);  // 2 x 4 x 256 KiB

  TuneFacts net = twoRanksShm();
  net.shm = false;
  EXPECT_DOUBLE_EQ(callModel(net, CollKind::kAllReduce, small).beta, linkModel(net).beta);
  EXPECT_DOUBLE_EQ(callModel(net, CollKind::kAllReduce, small).gamma, kInCacheGamma);

  Tuner t;
  ASSERT_EQ(t.configure("", "", f), Result::kSuccess);
  EXPECT_EQ(chosen(t, CollKind::kAllReduce, (8 << 10) / 4), Algo::kRecursiveDoubling);
  EXPECT_EQ(chosen(t, CollKind::kAllReduce, (16 << 10) / 4), Algo::kRecursiveDoubling);
  EXPECT_NE(chosen(t, CollKind::kAllReduce, (1 << 20) / 4), Algo::kRecursiveDoubling);
  TuneFacts four = twoRanksShm();
  four.nranks = 4;
  four.ranksPerCore = 2;
  ASSERT_EQ(t.configure("", "", four), Result::kSuccess);
  EXPECT_EQ(chosen(t, CollKind::kAllReduce, (16 << 10) / 4), Algo::kRecursiveDoubling);
  EXPECT_EQ(chosen(t, CollKind::kAllReduce, (64 << 10) / 4), Algo::kRabenseifner);
}

// At 2 ranks one-shot and recursive doubling are one exchange at the same cost, as are the ring
// and recursive halving: the form listed first takes the tie at every size, not the last bit of a
// sum (one-shot, which folds through scratch, measured 5-20 % slower at 4-16 KiB).
TEST(Tuner, EqualCostsGoToTheFormListedFirst) {
  Tuner t;
  ASSERT_EQ(t.configure("", "", twoRanksShm()), Result::kSuccess);
  for (uint64_t bytes = 4; bytes <= (4 << 10); bytes *= 2) {
    EXPECT_EQ(chosen(t, CollKind::kAllReduce, bytes / 4), Algo::kRecursiveDoubling) << bytes;
  }
  for (uint64_t bytes = 4; bytes <= (uint64_t{64} << 20); bytes *= 4) {
    EXPECT_EQ(chosen(t, CollKind::kReduceScatter, bytes / 4), Algo::kRing) << bytes;
  }
}

// The scatter + all-gather broadcast spares the root's link: the tuner takes it on its own over a
// network, never among ranks that all share memory (Tuner::autoChoices), where it measured at best
// 2 % ahead of the tree or the chain and mostly far behind; by name it still runs there.
TEST(Tuner, ScatterAllGatherBroadcastOnlyOverANetworkUnlessNamed) {
  TuneFacts f = eightRanksOnTwoCores();
  Tuner t;
  ASSERT_EQ(t.configure("", "", f), Result::kSuccess);
  for (uint64_t bytes = 4; bytes <= (uint64_t{256} << 20); bytes *= 4) {
    EXPECT_NE(chosen(t, CollKind::kBroadcast, bytes / 4), Algo::kScatterAllGather) << bytes;
  }
  ASSERT_EQ(t.configure("broadcast:scatter-allgather", "", f), Result::kSuccess);
  EXPECT_EQ(chosen(t, CollKind::kBroadcast, 1 << 16), Algo::kScatterAllGather);
  f.shm = false;
  f.nhosts = 8;
  f.ranksPerCore = 1;
  ASSERT_EQ(t.configure("", "", f), Result::kSuccess);
  EXPECT_EQ(chosen(t, CollKind::kBroadcast, 1 << 16), Algo::kScatterAllGather);  // 256 KiB over TCP
}

TEST(Tuner, WithoutAPolicySmallAllReducesTakeTheLogarithmicFormAndLargeOnesTheRing) {
  Tuner t;
  ASSERT_EQ(t.configure("", "", twoRanksShm()), Result::kSuccess) << lastError();
  EXPECT_EQ(chosen(t, CollKind::kAllReduce, 2), Algo::kRecursiveDoubling);
  EXPECT_EQ(chosen(t, CollKind::kAllReduce, 64 << 20), Algo::kRing);
  TuneFacts many = twoRanksShm();
  many.nranks = 64;
  ASSERT_EQ(t.configure("", "", many), Result::kSuccess) << lastError();
  EXPECT_EQ(chosen(t, CollKind::kBroadcast, 2), Algo::kBinomialTree);
  EXPECT_EQ(chosen(t, CollKind::kAllReduce, 2), Algo::kRecursiveDoubling);
  EXPECT_EQ(chosen(t, CollKind::kAlltoAll, 2), Algo::kBruck);  // log2 p rounds of small blocks
  EXPECT_EQ(chosen(t, CollKind::kAlltoAll, 1 << 20), Algo::kPairwise);
  EXPECT_EQ(chosen(t, CollKind::kSend, 2), Algo::kDirect);
}

// Agreement rests on the choice being a function of the facts: the same facts and call give the
// same choice, and the estimate is the candidate's predicted cost.
TEST(Tuner, TheChoiceIsTheCheapestCandidateOfTheModel) {
  Tuner t;
  TuneFacts f = twoRanksShm();
  f.nranks = 5;
  ASSERT_EQ(t.configure("", "", f), Result::kSuccess);
  for (uint64_t count : {1ull, 100ull, 10000ull, 1000000ull, 100000000ull}) {
    TuneChoice c;
    ASSERT_EQ(t.choose(CollKind::kAllReduce, count, DataType::kFloat32, &c), Result::kSuccess);
    for (int g = 1; g < algo::kNumAlgos; ++g) {
      const Algo a = static_cast<Algo>(g);
      // The ordered algorithm is chosen only by name or in deterministic mode.
      if (!algo::algoSupports(a, CollKind::kAllReduce) || a == Algo::kOrdered) continue;
      const double cost = algo::predictSeconds(a, CollKind::kAllReduce, 5, count * 4, f.chunkBytes,
                                               callModel(f, CollKind::kAllReduce, count * 4));
      // Within the tuner's tie margin (a relative 1e-9, Tuner::choose): of two equal costs the
      // algorithm listed first wins, whatever the last bit of either sum.
      EXPECT_LE(c.seconds, cost * (1 + 1e-9)) << count << " " << algo::algoName(a);
    }
    TuneChoice again;
    ASSERT_EQ(t.choose(CollKind::kAllReduce, count, DataType::kFloat32, &again), Result::kSuccess);
    EXPECT_EQ(again.algo, c.algo);
  }
}

TEST(Tuner, NcclSyntaxListsExclusionsAndPerCollectiveEntries) {
  Tuner t;
  ASSERT_EQ(t.configure("Ring", "", twoRanksShm()), Result::kSuccess) << lastError();
  EXPECT_EQ(chosen(t, CollKind::kAllReduce, 2), Algo::kRing);
  EXPECT_EQ(chosen(t, CollKind::kBroadcast, 2), Algo::kRing);
  // A list without "coll:" governs the collectives NCCL tunes, not the point-to-point patterns.
  EXPECT_EQ(chosen(t, CollKind::kAlltoAll, 2), Algo::kPairwise);

  ASSERT_EQ(t.configure("^ring", "", twoRanksShm()), Result::kSuccess) << lastError();
  EXPECT_NE(chosen(t, CollKind::kAllReduce, 64 << 20), Algo::kRing);
  EXPECT_NE(chosen(t, CollKind::kBroadcast, 64 << 20), Algo::kRing);

  ASSERT_EQ(t.configure("allreduce:Recursive_Doubling;broadcast:ring", "", twoRanksShm()), Result::kSuccess)
      << lastError();
  EXPECT_EQ(chosen(t, CollKind::kAllReduce, 64 << 20), Algo::kRecursiveDoubling);
  EXPECT_EQ(chosen(t, CollKind::kBroadcast, 1), Algo::kRing);

  // A global list beside per-collective entries: the entries win for their collective.
  ASSERT_EQ(t.configure("ring;allreduce:recursive-doubling", "", twoRanksShm()), Result::kSuccess) << lastError();
  EXPECT_EQ(chosen(t, CollKind::kAllReduce, 64 << 20), Algo::kRecursiveDoubling);
  EXPECT_EQ(chosen(t, CollKind::kReduce, 1), Algo::kRing);

  // NCCL's names for hardware mixccl does not drive are accepted and select nothing.
  ASSERT_EQ(t.configure("NVLS,CollnetDirect,Ring", "", twoRanksShm()), Result::kSuccess) << lastError();
  EXPECT_EQ(chosen(t, CollKind::kAllReduce, 2), Algo::kRing);

  // Tree stands for the binomial tree of the rooted collectives.
  TuneFacts many = twoRanksShm();
  many.nranks = 16;
  ASSERT_EQ(t.configure("broadcast:Tree", "", many), Result::kSuccess) << lastError();
  EXPECT_EQ(chosen(t, CollKind::kBroadcast, 64 << 20), Algo::kBinomialTree);

  // ... and for AllReduce the double binary tree, by NCCL's name or by its own, at any size.
  for (const char* policy : {"allreduce:tree", "allreduce:Tree,CollnetDirect", "allreduce:double_binary_tree"}) {
    ASSERT_EQ(t.configure(policy, "", many), Result::kSuccess) << policy << ": " << lastError();
    EXPECT_EQ(chosen(t, CollKind::kAllReduce, 2), Algo::kDoubleBinaryTree) << policy;
    EXPECT_EQ(chosen(t, CollKind::kAllReduce, 64 << 20), Algo::kDoubleBinaryTree) << policy;
  }
  ASSERT_EQ(t.configure("allreduce:^tree", "", many), Result::kSuccess) << lastError();
  for (uint64_t count : {1ull, 1ull << 10, 1ull << 20, 1ull << 26}) {
    EXPECT_NE(chosen(t, CollKind::kAllReduce, count), Algo::kDoubleBinaryTree) << count;
  }
}

// NCCL's PAT is the Bruck all-gather and reduce-scatter. Without a policy they take the small
// calls off powers of two, where recursive doubling / halving pay a fold and an unfold; on powers
// of two the model ties them with those, which are listed first and keep them; large calls stay
// on the ring.
TEST(Tuner, PatIsTheBruckAllGatherAndReduceScatter) {
  Tuner t;
  TuneFacts f = twoRanksShm();
  f.nranks = 12;
  ASSERT_EQ(t.configure("PAT", "", f), Result::kSuccess) << lastError();
  for (uint64_t count : {1ull, 1ull << 20, 1ull << 26}) {
    EXPECT_EQ(chosen(t, CollKind::kAllGather, count), Algo::kBruck) << count;
    EXPECT_EQ(chosen(t, CollKind::kReduceScatter, count), Algo::kBruck) << count;
  }
  ASSERT_EQ(t.configure("", "", f), Result::kSuccess) << lastError();
  EXPECT_EQ(chosen(t, CollKind::kAllGather, 2), Algo::kBruck);
  EXPECT_EQ(chosen(t, CollKind::kReduceScatter, 2), Algo::kBruck);
  EXPECT_EQ(chosen(t, CollKind::kAllGather, 16 << 20), Algo::kRing);
  EXPECT_EQ(chosen(t, CollKind::kReduceScatter, 16 << 20), Algo::kRing);
  f.nranks = 16;
  ASSERT_EQ(t.configure("", "", f), Result::kSuccess) << lastError();
  EXPECT_EQ(chosen(t, CollKind::kAllGather, 2), Algo::kRecursiveDoubling);
  EXPECT_EQ(chosen(t, CollKind::kReduceScatter, 2), Algo::kRecursiveHalving);
}

TEST(Tuner, BadAlgorithmPoliciesAreRefusedNamingTheValidChoices) {
  Tuner t;
  EXPECT_EQ(t.configure("Rnig", "", twoRanksShm()), Result::kInvalidUsage);
  EXPECT_TRUE(contains(lastError(), "unknown algorithm \"rnig\"")) << lastError();
  EXPECT_TRUE(contains(lastError(), "Ring") && contains(lastError(), "Tree") && contains(lastError(), "PAT") &&
              contains(lastError(), "recursive-doubling"))
      << lastError();

  EXPECT_EQ(t.configure("allredcue:ring", "", twoRanksShm()), Result::kInvalidUsage);
  EXPECT_TRUE(contains(lastError(), "unknown collective \"allredcue\"")) << lastError();

  EXPECT_EQ(t.configure("ring;tree", "", twoRanksShm()), Result::kInvalidUsage);
  EXPECT_TRUE(contains(lastError(), "two lists")) << lastError();

  EXPECT_EQ(t.configure("allreduce:", "", twoRanksShm()), Result::kInvalidUsage);
  EXPECT_TRUE(contains(lastError(), "lists no name")) << lastError();

  EXPECT_EQ(t.configure("allreduce:ring;allreduce:tree", "", twoRanksShm()), Result::kInvalidUsage);
  EXPECT_TRUE(contains(lastError(), "twice")) << lastError();

  // An entry that leaves the collective it names with nothing fails at once, naming what it has.
  EXPECT_EQ(t.configure("allgather:binomial-tree", "", twoRanksShm()), Result::kInvalidUsage);
  EXPECT_TRUE(contains(lastError(), "leaves AllGather with no algorithm") && contains(lastError(), "ring"))
      << lastError();
  EXPECT_EQ(t.configure("allreduce:^ring,recursive-doubling,rabenseifner,one-shot,double-binary-tree,ordered", "",
                        twoRanksShm()),
            Result::kInvalidUsage);
  // Names AllReduce still lacks select nothing there: NCCL's PAT and NVLS.
  for (const char* policy : {"allreduce:PAT", "allreduce:NVLS"}) {
    EXPECT_EQ(t.configure(policy, "", twoRanksShm()), Result::kInvalidUsage) << policy;
    EXPECT_TRUE(contains(lastError(), "leaves AllReduce with no algorithm") &&
                contains(lastError(), "double-binary-tree"))
        << lastError();
  }
}

// MIXCCL_DETERMINISTIC: the reducing collectives choose only among the algorithms that fold in
// rank order, whatever the policy says (a policy naming none of them is overridden, with a
// warning); the other collectives are untouched. Without it, the ordered algorithm runs only when
// named, and one-shot only among ranks that share memory.
TEST(Tuner, DeterministicModeKeepsTheRankOrderFolds) {
  TuneFacts f = twoRanksShm();
  f.nranks = 7;
  f.deterministic = true;
  for (const char* policy : {"", "Ring", "allreduce:recursive-doubling;reduce:binomial-tree", "allreduce:^one-shot",
                             "Tree", "allreduce:one-shot"}) {
    Tuner t;
    ASSERT_EQ(t.configure(policy, "", f), Result::kSuccess) << policy << ": " << lastError();
    for (CollKind k : {CollKind::kAllReduce, CollKind::kReduceScatter, CollKind::kReduce}) {
      for (uint64_t count : {1ull, 1000ull, 1ull << 26}) {
        EXPECT_TRUE(algo::algoIsOrdered(chosen(t, k, count))) << policy << " " << collName(k) << " " << count;
      }
    }
    if (std::string(policy) == "allreduce:one-shot") {
      EXPECT_EQ(chosen(t, CollKind::kAllReduce, 1 << 26), Algo::kOneShot);
    }
    if (std::string(policy) == "allreduce:^one-shot") {
      EXPECT_EQ(chosen(t, CollKind::kAllReduce, 1), Algo::kOrdered);
    }
  }
  Tuner t;
  ASSERT_EQ(t.configure("Ring", "", f), Result::kSuccess);
  EXPECT_EQ(chosen(t, CollKind::kBroadcast, 8), Algo::kRing);
  EXPECT_EQ(chosen(t, CollKind::kAllGather, 8), Algo::kRing);
  // Small all-reduces fold everything at once; large ones spread the folding over the ranks.
  ASSERT_EQ(t.configure("", "", f), Result::kSuccess);
  EXPECT_EQ(chosen(t, CollKind::kAllReduce, 2), Algo::kOneShot);
  EXPECT_EQ(chosen(t, CollKind::kAllReduce, 1 << 24), Algo::kOrdered);

  f.deterministic = false;
  ASSERT_EQ(t.configure("", "", f), Result::kSuccess);
  for (uint64_t count : {1ull, 1000ull, 1ull << 26}) {
    EXPECT_NE(chosen(t, CollKind::kReduceScatter, count), Algo::kOrdered) << count;
    EXPECT_NE(chosen(t, CollKind::kAllReduce, count), Algo::kOrdered) << count;
  }
  ASSERT_EQ(t.configure("reducescatter:ordered", "", f), Result::kSuccess);
  EXPECT_EQ(chosen(t, CollKind::kReduceScatter, 8), Algo::kOrdered);
  f.shm = false;
  ASSERT_EQ(t.configure("", "", f), Result::kSuccess);
  EXPECT_NE(chosen(t, CollKind::kAllReduce, 1), Algo::kOneShot);
  ASSERT_EQ(t.configure("allreduce:one-shot", "", f), Result::kSuccess);
  EXPECT_EQ(chosen(t, CollKind::kAllReduce, 1), Algo::kOneShot);
}

// As in NCCL, a list for every collective that leaves one with nothing fails that collective's
// calls, with the reason, and no other.
TEST(Tuner, AGlobalListThatLeavesACollectiveEmptyFailsItsCalls) {
  Tuner t;
  ASSERT_EQ(t.configure("Tree", "", twoRanksShm()), Result::kSuccess) << lastError();
  TuneChoice c;
  EXPECT_EQ(t.choose(CollKind::kAllGather, 8, DataType::kFloat32, &c), Result::kInvalidUsage);
  EXPECT_TRUE(contains(lastError(), "NCCL_ALGO=\"Tree\" leaves it with no algorithm") && contains(lastError(), "ring"))
      << lastError();
  EXPECT_EQ(chosen(t, CollKind::kBroadcast, 8), Algo::kBinomialTree);
  EXPECT_EQ(chosen(t, CollKind::kAllReduce, 8), Algo::kDoubleBinaryTree);
}

TEST(Tuner, ProtocolPolicies) {
  Tuner t;
  EXPECT_EQ(t.configure("", "Simple", twoRanksShm()), Result::kSuccess) << lastError();
  EXPECT_EQ(t.configure("", "^LL,LL128", twoRanksShm()), Result::kSuccess) << lastError();
  EXPECT_EQ(t.configure("", "allreduce:simple;allgather:^ll", twoRanksShm()), Result::kSuccess) << lastError();
  EXPECT_EQ(t.configure("", "LL", twoRanksShm()), Result::kInvalidUsage);
  EXPECT_TRUE(contains(lastError(), "Simple")) << lastError();
  EXPECT_EQ(t.configure("", "Fast", twoRanksShm()), Result::kInvalidUsage);
  EXPECT_TRUE(contains(lastError(), "unknown protocol \"fast\"; valid: LL, LL128, Simple")) << lastError();
}

// Through the API: a bad NCCL_ALGO fails communicator creation with ncclInvalidUsage, as NCCL's
// parseList answers an unknown name, and the reason in ncclGetLastError.
TEST(Tuner, ABadPolicyFailsInitThroughTheApi) {
  testing::EnvGuard algo("NCCL_ALGO", "allreduce:bogus");
  ncclComm_t comm = nullptr;
  int dev = 0;
  EXPECT_EQ(ncclCommInitAll(&comm, 1, &dev), ncclInvalidUsage);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "unknown algorithm \"bogus\"")) << ncclGetLastError(nullptr);
}

// ncclGroupSimulateEnd reports the tuner's estimate (microseconds, as NCCL) without moving data.
TEST(Tuner, GroupSimulateEndReturnsTheModelsEstimate) {
  testing::runRanks(2, [](int rank, ncclComm_t comm) {
    auto simulate = [&](size_t count) {
      std::vector<float> buf(count, static_cast<float>(rank + 1));
      ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
      EXPECT_EQ(ncclGroupStart(), ncclSuccess);
      EXPECT_EQ(ncclAllReduce(buf.data(), buf.data(), count, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
      EXPECT_EQ(ncclGroupSimulateEnd(&info), ncclSuccess) << ncclGetLastError(comm);
      EXPECT_EQ(buf[0], static_cast<float>(rank + 1)) << "a simulated group moved data";
      return static_cast<double>(info.estimatedTime);
    };
    TuneFacts f;
    f.nranks = 2;
    const double small = simulate(2), large = simulate(1 << 22);
    const double wantSmall = algo::predictSeconds(Algo::kRecursiveDoubling, CollKind::kAllReduce, 2, 8, f.chunkBytes,
                                                  callModel(f, CollKind::kAllReduce, 8)) *
                             1e6;
    EXPECT_NEAR(small, wantSmall, wantSmall * 1e-3);
    EXPECT_GT(large, 100 * small);
  });
}

}  // namespace
}  // namespace mixccl
