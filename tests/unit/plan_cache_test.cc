// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// The communicator's plan cache (src/core/plan_cache.h): a hit returns what was stored for the
// very same call, never another call's decision or schedule, and old entries make room.

#include "src/core/plan_cache.h"

#include <gtest/gtest.h>

#include <memory>

namespace mixccl {
namespace {

using algo::Algo;

PlanKey keyOf(CollKind kind, uint64_t count, int root = 0, Algo a = Algo::kRing) {
  PlanKey k;
  k.kind = kind;
  k.count = count;
  k.root = root;
  k.chunkElems = 1024;
  k.algo = a;
  return k;
}

std::shared_ptr<const algo::Schedule> scheduleWith(size_t steps) {
  auto s = std::make_shared<algo::Schedule>();
  s->steps.resize(steps);
  return s;
}

// A repeated call gets its decision and its schedule from one lookup, but only the schedule built
// for that decision's algorithm, the call's root and its chunk size.
TEST(PlanCache, DecisionLookupBringsTheMatchingScheduleOnly) {
  PlanCache c;
  Algo a = Algo::kDefault;
  double t = 0;
  const auto s = scheduleWith(4);
  c.storeDecision(keyOf(CollKind::kBroadcast, 8), Algo::kBinomialTree, 2e-6);
  c.storeSchedule(keyOf(CollKind::kBroadcast, 8, 1, Algo::kBinomialTree), s);
  std::shared_ptr<const algo::Schedule> got;
  ASSERT_TRUE(c.findDecision(keyOf(CollKind::kBroadcast, 8, 1), &a, &t, &got));
  EXPECT_EQ(a, Algo::kBinomialTree);
  EXPECT_EQ(got, s);
  got = nullptr;
  ASSERT_TRUE(c.findDecision(keyOf(CollKind::kBroadcast, 8, 0), &a, &t, &got));  // another root
  EXPECT_EQ(got, nullptr);
  PlanKey chunk = keyOf(CollKind::kBroadcast, 8, 1);
  chunk.chunkElems = 7;
  ASSERT_TRUE(c.findDecision(chunk, &a, &t, &got));
  EXPECT_EQ(got, nullptr);
  // A schedule of another algorithm than the decision's is not handed out with it.
  PlanCache d;
  d.storeDecision(keyOf(CollKind::kBroadcast, 8), Algo::kBinomialTree, 2e-6);
  d.storeSchedule(keyOf(CollKind::kBroadcast, 8, 1, Algo::kRing), s);
  ASSERT_TRUE(d.findDecision(keyOf(CollKind::kBroadcast, 8, 1), &a, &t, &got));
  EXPECT_EQ(got, nullptr);
}

TEST(PlanCache, HitsOnlyTheSameCall) {
  PlanCache c;
  Algo a = Algo::kDefault;
  double t = 0;
  EXPECT_FALSE(c.findDecision(keyOf(CollKind::kAllReduce, 8), &a, &t));
  c.storeDecision(keyOf(CollKind::kAllReduce, 8), Algo::kRecursiveDoubling, 1e-6);
  ASSERT_TRUE(c.findDecision(keyOf(CollKind::kAllReduce, 8), &a, &t));
  EXPECT_EQ(a, Algo::kRecursiveDoubling);
  EXPECT_EQ(t, 1e-6);
  EXPECT_FALSE(c.findDecision(keyOf(CollKind::kAllReduce, 9), &a, &t));
  EXPECT_FALSE(c.findDecision(keyOf(CollKind::kBroadcast, 8), &a, &t));
  PlanKey otherType = keyOf(CollKind::kAllReduce, 8);
  otherType.dtype = DataType::kFloat16;
  EXPECT_FALSE(c.findDecision(otherType, &a, &t));

  // Schedules also differ by root, chunk size and algorithm.
  const auto s1 = scheduleWith(3), s2 = scheduleWith(5);
  c.storeSchedule(keyOf(CollKind::kBroadcast, 8, 0), s1);
  c.storeSchedule(keyOf(CollKind::kBroadcast, 8, 1), s2);
  EXPECT_EQ(c.findSchedule(keyOf(CollKind::kBroadcast, 8, 0)), s1);
  EXPECT_EQ(c.findSchedule(keyOf(CollKind::kBroadcast, 8, 1)), s2);
  EXPECT_EQ(c.findSchedule(keyOf(CollKind::kBroadcast, 8, 2)), nullptr);
  EXPECT_EQ(c.findSchedule(keyOf(CollKind::kBroadcast, 8, 0, Algo::kBinomialTree)), nullptr);
  PlanKey chunk = keyOf(CollKind::kBroadcast, 8, 0);
  chunk.chunkElems = 7;
  EXPECT_EQ(c.findSchedule(chunk), nullptr);
  // A schedule stored beside a decision leaves the decision intact.
  c.storeSchedule(keyOf(CollKind::kAllReduce, 8), s1);
  ASSERT_TRUE(c.findDecision(keyOf(CollKind::kAllReduce, 8), &a, &t));
  EXPECT_EQ(a, Algo::kRecursiveDoubling);
  EXPECT_EQ(c.findSchedule(keyOf(CollKind::kAllReduce, 8)), s1);
}

// The caller's lookup answers exactly as findDecision() does, also once it remembers the last hit,
// and always overwrites *schedule: the operation it fills may hold an earlier call's schedule
// (group::newOp), which must never run a call it was not built for.
TEST(PlanCache, CallersLookupNeverLeavesAnotherCallsSchedule) {
  PlanCache c;
  Algo a = Algo::kDefault;
  double t = 0;
  const auto stale = scheduleWith(9);
  std::shared_ptr<const algo::Schedule> got = stale;
  EXPECT_FALSE(c.findDecisionAsCaller(keyOf(CollKind::kBroadcast, 8, 1), &a, &t, &got));
  EXPECT_EQ(got, nullptr);
  const auto s = scheduleWith(4);
  c.storeDecision(keyOf(CollKind::kBroadcast, 8), Algo::kBinomialTree, 2e-6);
  got = stale;
  ASSERT_TRUE(c.findDecisionAsCaller(keyOf(CollKind::kBroadcast, 8, 1), &a, &t, &got));  // no schedule yet
  EXPECT_EQ(a, Algo::kBinomialTree);
  EXPECT_EQ(got, nullptr);
  c.storeSchedule(keyOf(CollKind::kBroadcast, 8, 1, Algo::kBinomialTree), s);
  for (int repeat = 0; repeat < 3; ++repeat) {  // the first through the mutex, then remembered
    got = repeat == 1 ? stale : got;
    a = Algo::kDefault;
    t = 0;
    ASSERT_TRUE(c.findDecisionAsCaller(keyOf(CollKind::kBroadcast, 8, 1), &a, &t, &got)) << repeat;
    EXPECT_EQ(a, Algo::kBinomialTree) << repeat;
    EXPECT_EQ(t, 2e-6) << repeat;
    EXPECT_EQ(got, s) << repeat;
  }
  // Another root, chunk size or count after the remembered hit: not its schedule.
  got = s;
  ASSERT_TRUE(c.findDecisionAsCaller(keyOf(CollKind::kBroadcast, 8, 0), &a, &t, &got));
  EXPECT_EQ(got, nullptr);
  PlanKey chunk = keyOf(CollKind::kBroadcast, 8, 1);
  chunk.chunkElems = 7;
  got = s;
  ASSERT_TRUE(c.findDecisionAsCaller(chunk, &a, &t, &got));
  EXPECT_EQ(got, nullptr);
  got = s;
  EXPECT_FALSE(c.findDecisionAsCaller(keyOf(CollKind::kBroadcast, 16, 1), &a, &t, &got));
  EXPECT_EQ(got, nullptr);
}

TEST(PlanCache, BoundedAndLeastRecentlyUsedOut) {
  PlanCache c;
  Algo a;
  double t;
  c.storeDecision(keyOf(CollKind::kAllReduce, 0), Algo::kRing, 0);
  for (uint64_t n = 1; n < 40; ++n) {
    ASSERT_TRUE(c.findDecision(keyOf(CollKind::kAllReduce, 0), &a, &t)) << n;  // kept warm
    c.storeDecision(keyOf(CollKind::kAllReduce, n), Algo::kRing, 0);
  }
  EXPECT_TRUE(c.findDecision(keyOf(CollKind::kAllReduce, 39), &a, &t));
  EXPECT_FALSE(c.findDecision(keyOf(CollKind::kAllReduce, 1), &a, &t));
  // Huge schedules are not kept.
  c.storeSchedule(keyOf(CollKind::kAllGather, 1), scheduleWith(1 << 20));
  EXPECT_EQ(c.findSchedule(keyOf(CollKind::kAllGather, 1)), nullptr);
}

}  // namespace
}  // namespace mixccl
