// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// The timing simulator (algorithms/timing_sim.h): it agrees with the value-checking simulator
// (algorithms/sim.h) on critical-path hops, steps and messages for every collective under every
// algorithm it has; its times match the model worked out by hand for small cases; it reports
// deadlocks with who waits for what, and refuses runs over its step budget. No test here is
// timed: the tool perf/simulate measures speed.

#include "algorithms/timing_sim.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "algorithms/sim.h"

namespace mixccl::algo {
namespace {

constexpr CollKind kKinds[] = {CollKind::kAllReduce,     CollKind::kBroadcast, CollKind::kReduce, CollKind::kAllGather,
                               CollKind::kReduceScatter, CollKind::kAlltoAll,  CollKind::kGather, CollKind::kScatter};

bool isReductionKind(CollKind k) {
  return k == CollKind::kAllReduce || k == CollKind::kReduce || k == CollKind::kReduceScatter;
}

std::vector<Algo> algosOf(CollKind k) {
  std::vector<Algo> out;
  for (int a = 1; a < kNumAlgos; ++a) {
    if (algoSupports(static_cast<Algo>(a), k)) out.push_back(static_cast<Algo>(a));
  }
  return out;
}

// Runs `args` (every rank) through sim.h; fills its stats.
std::string valueSim(CollArgs args, SimStats* stats) {
  std::vector<SimActor> actors(args.nranks);
  for (int r = 0; r < args.nranks; ++r) {
    args.rank = r;
    SimActor& a = actors[r];
    a.rank = r;
    if (buildSchedule(args, &a.schedule) != Result::kSuccess) return "build: " + lastError();
    a.inputElems = inputElems(args);
    a.outputElems = outputElems(args);
    a.outputOffset = a.inputElems;
    a.arena.assign(a.inputElems + a.outputElems, SimCell{});
  }
  SimOptions opt;
  opt.nranks = args.nranks;
  opt.reduction = isReductionKind(args.kind);
  opt.fifoDepth = args.fifoDepth;
  if (simulate(actors, opt, stats) != Result::kSuccess) return "simulate: " + lastError();
  return "";
}

TimingOptions unitModel(int nranks, uint32_t depth) {
  TimingOptions o;
  o.nranks = nranks;
  o.fifoDepth = depth;
  o.intra = LinkModel{1e-6, 1e-9, 0.5e-9};
  o.inter = LinkModel{5e-6, 4e-9, 0.5e-9};
  o.ranksPerHost = 4;
  return o;
}

TEST(TimingSim, HopsStepsAndMessagesAgreeWithTheValueSimulator) {
  int cases = 0;
  for (CollKind kind : kKinds) {
    for (Algo algo : algosOf(kind)) {
      for (int n = 1; n <= 17; ++n) {
        for (uint64_t count : {1, 6, 40}) {
          for (uint64_t chunk : {1, 5, 64}) {
            for (uint32_t depth : {1u, 2u, 8u}) {
              for (int root : {0, n / 2}) {
                if (root != 0 && kind != CollKind::kBroadcast && kind != CollKind::kReduce &&
                    kind != CollKind::kGather && kind != CollKind::kScatter) {
                  continue;
                }
                CollArgs a;
                a.kind = kind;
                a.algo = algo;
                a.nranks = n;
                a.root = root;
                a.count = count;
                a.chunkElems = chunk;
                a.fifoDepth = depth;
                const std::string what = std::string(collName(kind)) + " " + algoName(algo) +
                                         " n=" + std::to_string(n) + " count=" + std::to_string(count) +
                                         " chunk=" + std::to_string(chunk) + " depth=" + std::to_string(depth) +
                                         " root=" + std::to_string(root);
                SimStats ref;
                ASSERT_EQ(valueSim(a, &ref), "") << what;
                TimingStats t;
                ASSERT_EQ(simulateCollectiveTiming(a, unitModel(n, depth), &t), Result::kSuccess)
                    << what << ": " << lastError();
                EXPECT_EQ(t.criticalHops, ref.criticalHops) << what;
                EXPECT_EQ(t.steps, ref.steps) << what;
                EXPECT_EQ(t.messages, ref.messages) << what;
                EXPECT_LE(t.maxLinkBytes, t.bytes) << what;
                EXPECT_GE(t.seconds, 0) << what;
                ++cases;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(cases, 1000);
}

TimingOptions handModel(int nranks, uint32_t depth, double alpha, double beta, double gamma) {
  TimingOptions o;
  o.nranks = nranks;
  o.fifoDepth = depth;
  o.intra = LinkModel{alpha, beta, gamma};
  o.inter = LinkModel{99, 99, 99};  // one host: never used
  return o;
}

// Two ranks, FIFO depth 2 (the plain ring order, reduce-scatter terminal fused with the
// all-gather origin), two segments of m elements, b = 4m bytes. Per rank:
//   1. send own half's peer segment:      0 .. b*beta,            arrives alpha + b*beta
//   2. recv + Input -> Output, and send:  starts alpha + b*beta,  busy b*beta + b*gamma,
//                                         message arrives 2 alpha + 2 b*beta
//   3. recv -> Output:                    at max(alpha + 2 b*beta + b*gamma, 2 alpha + 2 b*beta)
TEST(TimingSim, TwoRankRingAllReduceMatchesTheHandCount) {
  const double alpha = 1e-6, beta = 1e-9;
  const uint64_t m = 1000;
  const double b = 4.0 * m;
  for (double gamma : {0.1e-9, 2e-9}) {
    CollArgs a;
    a.kind = CollKind::kAllReduce;
    a.algo = Algo::kRing;
    a.count = 2 * m;
    a.chunkElems = m;
    TimingStats t;
    ASSERT_EQ(simulateCollectiveTiming(a, handModel(2, 2, alpha, beta, gamma), &t), Result::kSuccess) << lastError();
    const double expect = std::max(alpha + 2 * b * beta + b * gamma, 2 * alpha + 2 * b * beta);
    EXPECT_NEAR(t.seconds, expect, 1e-12) << "gamma " << gamma;
    EXPECT_EQ(t.criticalHops, 2u);
    EXPECT_EQ(t.messages, 4u);
    EXPECT_EQ(t.bytes, static_cast<uint64_t>(4 * b));
    EXPECT_EQ(t.maxLinkBytes, static_cast<uint64_t>(2 * b));
  }
}

// The rank-order folds (one-shot, ordered) do all their arithmetic in one multi-source step of p
// operands: p - 1 combines of b bytes, charged b*gamma each. One-shot, one piece of b bytes per
// rank: p - 1 sends in a row (the last leaves at (p-2) b beta), the last message in arrives at
// alpha + (p-1) b beta, then the fold. Ordered reduce: every other rank sends its b bytes to the
// root at once (alpha + b beta), then the root folds p operands.
TEST(TimingSim, RankOrderFoldsPayGammaPerOperand) {
  const double alpha = 1e-6, beta = 1e-9;
  const uint64_t m = 1000;
  const double b = 4.0 * m;
  for (double gamma : {0.0, 0.5e-9, 3e-9}) {
    for (int p : {2, 3, 5, 8}) {
      CollArgs a;
      a.kind = CollKind::kAllReduce;
      a.algo = Algo::kOneShot;
      a.count = m;
      a.chunkElems = m;
      TimingStats t;
      ASSERT_EQ(simulateCollectiveTiming(a, handModel(p, 1, alpha, beta, gamma), &t), Result::kSuccess) << lastError();
      EXPECT_NEAR(t.seconds, alpha + (p - 1) * b * beta + (p - 1) * b * gamma, 1e-12)
          << "one-shot, " << p << " ranks, gamma " << gamma;
      a.kind = CollKind::kReduce;
      a.algo = Algo::kOrdered;
      a.root = p - 1;
      ASSERT_EQ(simulateCollectiveTiming(a, handModel(p, 1, alpha, beta, gamma), &t), Result::kSuccess) << lastError();
      EXPECT_NEAR(t.seconds, alpha + b * beta + (p - 1) * b * gamma, 1e-12)
          << "ordered reduce, " << p << " ranks, gamma " << gamma;
      EXPECT_EQ(t.lastRank, p - 1) << "the root folds last";
    }
  }
}

// Binomial broadcast over p = 2^k ranks, one chunk of b bytes: the deepest path 0 -> p/2 -> 3p/4
// -> ... -> p-1 follows first children only, so no rank on it waits for an earlier send: k hops
// of alpha + b*beta; then rank p-1 sends the root its closing token (alpha, no bytes). Every
// other rank is done earlier (the root's last send ends at k*b*beta). Total (k+1) alpha + k b beta.
TEST(TimingSim, BinomialBroadcastMatchesTheModel) {
  const double alpha = 2e-6, beta = 0.5e-9;
  const uint64_t count = 2048;
  const double b = 4.0 * count;
  for (int k : {1, 2, 3, 4, 6}) {
    const int p = 1 << k;
    CollArgs a;
    a.kind = CollKind::kBroadcast;
    a.algo = Algo::kBinomialTree;
    a.count = count;
    a.chunkElems = count;
    TimingStats t;
    ASSERT_EQ(simulateCollectiveTiming(a, handModel(p, 4, alpha, beta, 1e-9), &t), Result::kSuccess) << lastError();
    EXPECT_NEAR(t.seconds, (k + 1) * alpha + k * b * beta, 1e-12) << p << " ranks";
    EXPECT_EQ(t.criticalHops, static_cast<uint64_t>(k + 1)) << p << " ranks";
    EXPECT_EQ(t.lastRank, 0) << "the root finishes last, on the token";
  }
}

// Across hosts the inter model applies: a two-rank broadcast with one rank per host.
TEST(TimingSim, PairsOnTwoHostsUseTheInterModel) {
  CollArgs a;
  a.kind = CollKind::kBroadcast;
  a.algo = Algo::kBinomialTree;
  a.count = 100;
  a.chunkElems = 100;
  TimingOptions o = handModel(2, 1, 1e-6, 1e-9, 0);
  o.inter = LinkModel{7e-6, 3e-9, 0};
  o.ranksPerHost = 1;
  TimingStats t;
  ASSERT_EQ(simulateCollectiveTiming(a, o, &t), Result::kSuccess) << lastError();
  // Data: 7 us + 400 B * 3 ns; token back: 7 us.
  EXPECT_NEAR(t.seconds, 14e-6 + 400 * 3e-9, 1e-12);
  o.ranksPerHost = 2;
  ASSERT_EQ(simulateCollectiveTiming(a, o, &t), Result::kSuccess) << lastError();
  EXPECT_NEAR(t.seconds, 2e-6 + 400 * 1e-9, 1e-12);
}

// The double binary tree's cost (cost.cc) is the tuner's word on it. With one piece per tree it
// is the critical path in messages the simulators count (alpha per message on it, as cost.h
// defines alpha); with a full pipeline (four pieces sent and two combined per round at the
// busiest rank) it stays within a quarter of the simulated time, on one host and across hosts.
TEST(TimingSim, DoubleBinaryTreeCostFollowsTheSimulation) {
  for (const LinkModel& m : {LinkModel{0.5e-6, 0.2e-9, 0.2e-9}, LinkModel{10e-6, 0.4e-9, 0.2e-9}}) {
    for (int p : {2, 3, 5, 8, 16, 33, 64, 256}) {
      for (uint64_t bytes : {8ull, 1ull << 20, 64ull << 20}) {
        CollArgs a;
        a.kind = CollKind::kAllReduce;
        a.algo = Algo::kDoubleBinaryTree;
        a.count = bytes / 4;
        a.chunkElems = (512 << 10) / 4;
        TimingStats t;
        ASSERT_EQ(simulateCollectiveTiming(a, handModel(p, 8, m.alpha, m.beta, m.gamma), &t), Result::kSuccess)
            << lastError();
        const double model = predictSeconds(Algo::kDoubleBinaryTree, CollKind::kAllReduce, p, bytes, 512 << 10, m);
        const double want = bytes == 8 ? t.criticalHops * m.alpha : t.seconds;
        EXPECT_NEAR(model, want, (bytes == 8 ? 0.01 : 0.25) * want)
            << p << " ranks, " << bytes << " B, alpha " << m.alpha << ", simulated " << t.seconds;
      }
    }
  }
}

Step step(int recv, int send, uint64_t count) {
  Step s;
  s.recvPeer = recv;
  s.sendPeer = send;
  s.src = send >= 0 ? Buf::kInput : Buf::kNone;
  s.dst = recv >= 0 ? Buf::kOutput : Buf::kNone;
  s.count = count;
  return s;
}

Result runSteps(const std::vector<std::vector<Step>>& perRank, uint32_t depth, uint64_t budget = 1000) {
  TimingOptions o = handModel(static_cast<int>(perRank.size()), depth, 1e-6, 1e-9, 0);
  o.stepBudget = budget;
  o.label = "hand-made";
  TimingStats t;
  return simulateTiming(
      o,
      [&](int r, Schedule* s) {
        s->steps = perRank[r];
        return Result::kSuccess;
      },
      &t);
}

TEST(TimingSim, DetectsDeadlockAndSaysWho) {
  // Both ranks receive before they send.
  EXPECT_EQ(runSteps({{step(1, -1, 1), step(-1, 1, 1)}, {step(0, -1, 1), step(-1, 0, 1)}}, 1), Result::kInvalidUsage);
  EXPECT_NE(lastError().find("deadlock"), std::string::npos) << lastError();
  EXPECT_NE(lastError().find("2 of 2 ranks blocked"), std::string::npos) << lastError();
  EXPECT_NE(lastError().find("rank 0 step 1/2 waits for a message from rank 1"), std::string::npos) << lastError();
  // Both send twice before receiving: one slot per link is not enough.
  const std::vector<Step> twice0{step(-1, 1, 1), step(-1, 1, 1), step(1, -1, 1), step(1, -1, 1)};
  const std::vector<Step> twice1{step(-1, 0, 1), step(-1, 0, 1), step(0, -1, 1), step(0, -1, 1)};
  EXPECT_EQ(runSteps({twice0, twice1}, 1), Result::kInvalidUsage);
  EXPECT_NE(lastError().find("rank 1 step 2/4 waits for a free slot to rank 0"), std::string::npos) << lastError();
  EXPECT_EQ(runSteps({twice0, twice1}, 2), Result::kSuccess) << lastError();
}

TEST(TimingSim, ReportsScheduleFaults) {
  EXPECT_EQ(runSteps({{step(-1, 1, 2)}, {step(0, -1, 3)}}, 1), Result::kInvalidUsage);
  EXPECT_NE(lastError().find("expects 3 elements from rank 0, message has 2"), std::string::npos) << lastError();
  EXPECT_EQ(runSteps({{step(-1, 1, 2)}, {}}, 1), Result::kInvalidUsage);
  EXPECT_NE(lastError().find("never received"), std::string::npos) << lastError();
  EXPECT_EQ(runSteps({{step(-1, 2, 2)}, {}}, 1), Result::kInvalidUsage);
  EXPECT_NE(lastError().find("outside [0, 2)"), std::string::npos) << lastError();
}

TEST(TimingSim, RefusesRunsOverTheStepBudget) {
  // Ring all-reduce at 64 ranks with 64 chunks per segment: about 2 * 64 * 64 steps per rank,
  // over the budget, while the lower bound of minCollectiveSteps (63 * 64 * 64) is not: the
  // sample's estimate refuses it.
  CollArgs a;
  a.kind = CollKind::kAllReduce;
  a.algo = Algo::kRing;
  a.count = 64 * 64;
  a.chunkElems = 1;
  TimingOptions o = unitModel(64, 2);
  o.stepBudget = 300000;
  o.label = "allreduce ring";
  TimingStats t;
  EXPECT_EQ(simulateCollectiveTiming(a, o, &t), Result::kInvalidUsage);
  EXPECT_NE(lastError().find("allreduce ring at 64 ranks"), std::string::npos) << lastError();
  EXPECT_TRUE(t.overBudget);
  EXPECT_GT(t.budgetSteps, 300000);
  EXPECT_NE(lastError().find("step budget of 300000"), std::string::npos) << lastError();
  EXPECT_NE(lastError().find("estimated from 64 sampled ranks"), std::string::npos) << lastError();
  EXPECT_NE(lastError().find("2(p-1) steps per rank"), std::string::npos) << lastError();
  EXPECT_NE(lastError().find("fewer ranks"), std::string::npos) << lastError();
  o.stepBudget = 1000000;
  EXPECT_EQ(simulateCollectiveTiming(a, o, &t), Result::kSuccess) << lastError();

  // A source whose sample looked small (rank 1 grows after its first build): the exact count
  // while building still refuses.
  int rank1Builds = 0;
  TimingOptions small = handModel(16, 1, 1e-6, 1e-9, 0);
  small.stepBudget = 100;
  EXPECT_EQ(simulateTiming(
                small,
                [&](int r, Schedule* s) {
                  s->steps.assign(r == 1 && ++rank1Builds > 1 ? 500 : 1, step(-1, -1, 1));
                  return Result::kSuccess;
                },
                &t),
            Result::kInvalidUsage);
  EXPECT_NE(lastError().find("step budget of 100 "), std::string::npos) << lastError();
  EXPECT_NE(lastError().find("extrapolated from the ranks built so far"), std::string::npos) << lastError();
  EXPECT_TRUE(t.overBudget);
}

// A case whose every schedule is huge is refused before the sample builds one: a 2-rank ring of
// 2^50 elements in chunks of 2^17 used to build rank 0's 1.3e10 steps first (hundreds of
// gigabytes). The lower bound: nranks - 1 ranks each move count elements, a chunk per message.
TEST(TimingSim, RefusesRunsWhoseLowerBoundIsOverTheBudgetBeforeBuilding) {
  CollArgs a;
  a.kind = CollKind::kAllReduce;
  a.algo = Algo::kRing;
  a.nranks = 2;
  a.count = 4096 + 1;
  a.chunkElems = 16;
  EXPECT_EQ(minCollectiveSteps(a), 257.0);
  a.nranks = 5;
  EXPECT_EQ(minCollectiveSteps(a), 4 * 257.0);
  a.nranks = 1;
  EXPECT_EQ(minCollectiveSteps(a), 0.0) << "one rank sends nothing";
  a.nranks = 65536;
  a.count = uint64_t{1} << 62;
  a.chunkElems = 1;
  EXPECT_GT(minCollectiveSteps(a), 1e23) << "beyond 64 bits, not wrapped";

  a.count = uint64_t{1} << 50;
  a.chunkElems = uint64_t{1} << 17;
  TimingOptions o = unitModel(2, 8);
  o.label = "allreduce ring";
  TimingStats t;
  EXPECT_EQ(simulateCollectiveTiming(a, o, &t), Result::kInvalidUsage);
  EXPECT_TRUE(t.overBudget);
  EXPECT_EQ(t.budgetSteps, 8589934592.0);
  EXPECT_NE(lastError().find("or more (a message carries at most one chunk)"), std::string::npos) << lastError();
  EXPECT_NE(lastError().find("fewer bytes, a larger chunk"), std::string::npos) << lastError();

  // simulateTiming() with the bound set builds nothing.
  int builds = 0;
  o.minSteps = 2.0 * o.stepBudget;
  EXPECT_EQ(simulateTiming(
                o,
                [&](int, Schedule* s) {
                  ++builds;
                  s->steps.clear();
                  return Result::kSuccess;
                },
                &t),
            Result::kInvalidUsage);
  EXPECT_EQ(builds, 0);
  EXPECT_TRUE(t.overBudget);
  // At the budget it is no refusal.
  o.minSteps = static_cast<double>(o.stepBudget);
  EXPECT_EQ(simulateTiming(
                o,
                [&](int, Schedule* s) {
                  ++builds;
                  s->steps.clear();
                  return Result::kSuccess;
                },
                &t),
            Result::kSuccess)
      << lastError();
  EXPECT_GT(builds, 0);
}

}  // namespace
}  // namespace mixccl::algo
