// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// The table of user-registered buffers (ncclCommRegister) the engine consults for zero-copy
// messages: a span is found only inside one registration, ids are never reused, and dropped ids
// reach the transports once.

#include "src/core/user_regions.h"

#include <gtest/gtest.h>

#include <vector>

namespace mixccl {
namespace {

TEST(UserRegions, FindsOnlySpansInsideOneRegistration) {
  UserRegions t;
  EXPECT_TRUE(t.empty());
  std::vector<char> a(1000), b(1000);
  EXPECT_EQ(t.find(a.data(), 10).id, 0u) << "nothing registered";
  const uint64_t ia = t.add(a.data(), a.size());
  const uint64_t ib = t.add(b.data(), b.size());
  EXPECT_NE(ia, 0u);
  EXPECT_NE(ia, ib);
  EXPECT_FALSE(t.empty());
  EXPECT_EQ(t.find(a.data(), 1000).id, ia);
  EXPECT_EQ(t.find(a.data() + 990, 10).id, ia);
  EXPECT_EQ(t.find(a.data() + 1000, 0).id, ia) << "an empty span at the end is inside";
  EXPECT_EQ(t.find(a.data() + 990, 11).id, 0u) << "runs past the end";
  EXPECT_EQ(t.find(a.data() - 1, 2).id, 0u) << "starts before";
  EXPECT_EQ(t.find(b.data() + 5, 100).id, ib);
  const MemRegion r = t.find(b.data() + 5, 100);
  EXPECT_EQ(r.base, b.data());
  EXPECT_EQ(r.bytes, b.size());
}

TEST(UserRegions, RemovedIdsAreReportedOnceAndNeverReused) {
  UserRegions t;
  std::vector<char> a(64);
  const uint64_t first = t.add(a.data(), a.size());
  EXPECT_FALSE(t.hasDropped());
  t.remove(first);
  t.remove(first);  // twice: reported once
  EXPECT_TRUE(t.hasDropped());
  EXPECT_EQ(t.find(a.data(), 1).id, 0u);
  EXPECT_EQ(t.takeDropped(), std::vector<uint64_t>{first});
  EXPECT_FALSE(t.hasDropped());
  EXPECT_TRUE(t.takeDropped().empty());
  const uint64_t second = t.add(a.data(), a.size());  // the same memory again
  EXPECT_NE(second, first) << "a transport may still hold what it derived from the old id";
  EXPECT_EQ(t.find(a.data(), 64).id, second);
}

}  // namespace
}  // namespace mixccl
