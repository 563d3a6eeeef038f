// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// NCCL's device-list syntax (NCCL_SOCKET_IFNAME, NCCL_IB_HCA): prefixes, ^ excludes, = exact,
// and :port for RDMA devices.

#include "common/name_filter.h"

#include <gtest/gtest.h>

namespace mixccl {
namespace {

TEST(NameFilter, EmptyLeavesTheChoiceToTheCaller) {
  EXPECT_TRUE(NameFilter::parse("", true).useDefault);
  EXPECT_FALSE(NameFilter::parse("mlx5", true).useDefault);
}

TEST(NameFilter, PrefixesMatchTheStartOfANameOnly) {
  const NameFilter f = NameFilter::parse("mlx5,rxe", true);
  EXPECT_TRUE(f.accepts("mlx5_0"));
  EXPECT_TRUE(f.accepts("rxe0"));
  EXPECT_FALSE(f.accepts("bnxt_re0"));
  EXPECT_FALSE(f.accepts("xmlx5"));
}

TEST(NameFilter, EqualsMakesNamesExact) {
  const NameFilter f = NameFilter::parse("=mlx5_1", true);
  EXPECT_TRUE(f.accepts("mlx5_1"));
  EXPECT_FALSE(f.accepts("mlx5_10"));
  EXPECT_FALSE(f.accepts("mlx5_"));
}

TEST(NameFilter, CaretExcludes) {
  const NameFilter f = NameFilter::parse("^mlx5_0", true);
  EXPECT_FALSE(f.accepts("mlx5_0"));
  EXPECT_TRUE(f.accepts("mlx5_1"));  // prefix "mlx5_0" is not a prefix of mlx5_1
  const NameFilter exact = NameFilter::parse("^=rxe0", true);
  EXPECT_FALSE(exact.accepts("rxe0"));
  EXPECT_TRUE(exact.accepts("rxe01"));
}

TEST(NameFilter, PortsNameOnePortOfADevice) {
  const NameFilter f = NameFilter::parse("mlx5_0:1,mlx5_1", true);
  EXPECT_TRUE(f.accepts("mlx5_0", 1));
  EXPECT_FALSE(f.accepts("mlx5_0", 2));
  EXPECT_TRUE(f.accepts("mlx5_1", 2));  // no port given: every port
  const NameFilter exclude = NameFilter::parse("^=mlx5_0:2", true);
  EXPECT_TRUE(exclude.accepts("mlx5_0", 1));
  EXPECT_FALSE(exclude.accepts("mlx5_0", 2));
}

// NCCL reads the port after the first ':' and ignores later fields (rail and plane in newer
// releases), so "mlx5_0:1:0" names port 1 of mlx5_0 rather than nothing at all.
TEST(NameFilter, ThePortFollowsTheFirstColon) {
  const NameFilter f = NameFilter::parse("=mlx5_0:1:0", true);
  ASSERT_EQ(f.entries.size(), 1u);
  EXPECT_EQ(f.entries[0].name, "mlx5_0");
  EXPECT_EQ(f.entries[0].port, 1);
  EXPECT_TRUE(f.accepts("mlx5_0", 1));
  EXPECT_FALSE(f.accepts("mlx5_0", 2));
  const NameFilter exclude = NameFilter::parse("^mlx5_0:2:1:0", true);
  EXPECT_TRUE(exclude.accepts("mlx5_0", 1));
  EXPECT_FALSE(exclude.accepts("mlx5_0", 2));
}

// A port without a device names nothing; it must not become "this port of every device".
TEST(NameFilter, APortWithoutADeviceIsIgnored) {
  const NameFilter f = NameFilter::parse("mlx5_1,:1", true);
  ASSERT_EQ(f.entries.size(), 1u);
  EXPECT_FALSE(f.accepts("mlx5_0", 1));
  EXPECT_TRUE(f.accepts("mlx5_1", 2));
  const NameFilter exclude = NameFilter::parse("^mlx5_1,:1", true);
  EXPECT_TRUE(exclude.accepts("mlx5_0", 1));
  EXPECT_TRUE(NameFilter::parse("^:1", true).useDefault);
}

TEST(NameFilter, WithoutPortsAColonIsPartOfTheName) {
  const NameFilter f = NameFilter::parse("=eth0:1", false);
  EXPECT_TRUE(f.accepts("eth0:1"));
  EXPECT_FALSE(f.accepts("eth0"));
}

TEST(NameFilter, ABadPortKeepsTheTextWholeAndMatchesNothingReal) {
  const NameFilter f = NameFilter::parse("=mlx5_0:x", true);
  ASSERT_EQ(f.entries.size(), 1u);
  EXPECT_EQ(f.entries[0].name, "mlx5_0:x");
  EXPECT_FALSE(f.accepts("mlx5_0", 1));
}

TEST(NameFilter, EmptyEntriesAreIgnored) {
  const NameFilter f = NameFilter::parse("rxe,,", true);
  ASSERT_EQ(f.entries.size(), 1u);
  EXPECT_TRUE(f.accepts("rxe0"));
}

// "^$EXCLUDED" with an empty variable must not turn into "admit everything, loopback first", and
// "=" alone must not turn into "admit nothing": a spec that names nothing is no preference.
TEST(NameFilter, ASpecThatNamesNothingLeavesTheChoiceToTheCaller) {
  for (const char* spec : {"^", "=", "^=", ",", "^,,", "=,"}) {
    const NameFilter f = NameFilter::parse(spec, true);
    EXPECT_TRUE(f.useDefault) << spec;
    EXPECT_FALSE(f.exclude) << spec;
    EXPECT_FALSE(f.exact) << spec;
    EXPECT_TRUE(f.entries.empty()) << spec;
  }
}

}  // namespace
}  // namespace mixccl
