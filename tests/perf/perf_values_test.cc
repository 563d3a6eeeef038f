// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Unit tests of the perf tools' helpers: type conversions, size parsing, and the -c 1 value plan
// (its inputs must reduce exactly in every type, in any order, and its checker must see a bad
// element). The tools themselves are run end to end by run_tools.py.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "perf/common/datatypes.h"
#include "perf/common/options.h"
#include "perf/common/values.h"

namespace mixccl::perf {
namespace {

uint32_t bitsOf(ncclDataType_t t, double v) {
  uint32_t b = 0;
  encodeValue(t, v, &b);
  return b;
}

TEST(PerfDatatypes, KnownBitPatterns) {
  EXPECT_EQ(bitsOf(ncclFloat16, 1.0), 0x3C00u);
  EXPECT_EQ(bitsOf(ncclFloat16, -2.0), 0xC000u);
  EXPECT_EQ(bitsOf(ncclFloat16, 65504.0), 0x7BFFu);
  EXPECT_EQ(bitsOf(ncclBfloat16, 1.0), 0x3F80u);
  EXPECT_EQ(bitsOf(ncclBfloat16, -3.0), 0xC040u);
  EXPECT_EQ(bitsOf(ncclFloat8e4m3, 1.0), 0x38u);
  EXPECT_EQ(bitsOf(ncclFloat8e4m3, 448.0), 0x7Eu);
  EXPECT_EQ(bitsOf(ncclFloat8e4m3, -0.5), 0xB0u);
  EXPECT_EQ(bitsOf(ncclFloat8e5m2, 1.0), 0x3Cu);
  EXPECT_EQ(bitsOf(ncclFloat8e5m2, 57344.0), 0x7Bu);
  EXPECT_EQ(bitsOf(ncclInt8, -3.0), 0xFDu);
}

TEST(PerfDatatypes, RoundTripAndNearestEven) {
  for (const TypeInfo& t : allTypes()) {
    for (double v : {0.0, 1.0, 2.0, 3.0, 7.0, 8.0}) EXPECT_EQ(roundToType(t.type, v), v) << t.name;
    if (t.isSigned) {
      EXPECT_EQ(roundToType(t.type, -3.0), -3.0) << t.name;
    }
  }
  EXPECT_EQ(roundToType(ncclFloat16, 2049.0), 2048.0);  // tie: to even
  EXPECT_EQ(roundToType(ncclFloat16, 2051.0), 2052.0);
  EXPECT_EQ(roundToType(ncclFloat8e5m2, 9.0), 8.0);
  EXPECT_EQ(roundToType(ncclFloat8e4m3, 17.0), 16.0);
  EXPECT_EQ(roundToType(ncclFloat8e4m3, std::ldexp(1.0, -9)), std::ldexp(1.0, -9));  // smallest subnormal
}

TEST(PerfOptions, SizesAndSuffixes) {
  EXPECT_EQ(parseSize("8"), 8u);
  EXPECT_EQ(parseSize("64K"), 65536u);
  EXPECT_EQ(parseSize("1m"), 1u << 20);
  EXPECT_EQ(parseSize("2G"), 2ull << 30);
  EXPECT_EQ(parseSize("4KB"), 4096u);
  EXPECT_FALSE(parseSize("K"));
  EXPECT_FALSE(parseSize("1Q"));
  EXPECT_FALSE(parseSize("99999999999G"));                     // beyond 64 bits
  EXPECT_EQ(parseSize("17179869183G"), 17179869183ull << 30);  // the largest G that fits
  Options o;
  o.minBytes = 8;
  o.maxBytes = 65536;
  o.stepFactor = 4;
  EXPECT_EQ(o.sizes(), (std::vector<size_t>{8, 32, 128, 512, 2048, 8192, 32768}));
  o.stepFactor = 1;
  o.stepBytes = 30000;
  EXPECT_EQ(o.sizes(), (std::vector<size_t>{8, 30008, 60008}));
}

// The size and count columns of the split collectives are nccl-tests': a rank's block is count / n
// rounded down to whole 16-byte units (values worked out from nccl-tests' formula by hand).
TEST(PerfCounts, BlocksAreSizedAsNcclTests) {
  EXPECT_EQ(blockCount(262144, 4, 3), 87380u);  // 1M of float on 3 ranks: 1048560 B, not 1048572
  EXPECT_EQ(blockCount(262144, 4, 4), 65536u);  // even splits are unchanged
  EXPECT_EQ(blockCount(8, 1, 2), 0u);           // 8 B of int8 on 2 ranks: below one 16-byte unit
  EXPECT_EQ(blockCount(7, 8, 1), 6u);           // double: pairs of elements
  EXPECT_EQ(blockCount(33, 2, 1), 32u);         // half: 8 elements per unit
  const Counts g = gatherBlocks(262144, 4, 3, 2);
  EXPECT_EQ(g.param, 87380u);
  EXPECT_EQ(g.recv, 3u * 87380u);
  EXPECT_EQ(g.sendInPlaceOff, 2u * 87380u);
  const Counts s = scatterBlocks(262144, 4, 3, 1);
  EXPECT_EQ(s.send, 3u * 87380u);
  EXPECT_EQ(s.recvInPlaceOff, 87380u);
}

// All-reduce semantics, enough for the value plan.
const CollDesc kAllReduceLike = {"all_reduce",
                                 true,
                                 false,
                                 true,
                                 false,
                                 [](int n) { return 2.0 * (n - 1) / n; },
                                 [](size_t c, size_t, int, int) {
                                   return Counts{c, c, c, 0, 0};
                                 },
                                 nullptr,
                                 [](int, int, int, size_t, size_t j) {
                                   return Source{Source::kReduce, 0, j};
                                 }};

// Reduces like a library might: per element, ranks in order, rounding to the type at every step;
// avg on floats as NCCL does it (pre-multiply by 1/n rounded to the type), mulsum by the scalar.
std::vector<unsigned char> simulate(const TypeInfo& t, OpKind op, int n, size_t count,
                                    const std::vector<std::vector<unsigned char>>& in) {
  std::vector<unsigned char> out(count * t.size);
  const double inv = roundToType(t.type, 1.0 / n);
  for (size_t i = 0; i < count; ++i) {
    double acc = 0;
    for (int r = 0; r < n; ++r) {
      double v = decodeValue(t.type, in[r].data() + i * t.size);
      if (op == OpKind::kMulSum) v = roundToType(t.type, v * ValuePlan::kMulSumScalar);
      if (op == OpKind::kAvg && t.isFloat) v = roundToType(t.type, v * inv);
      if (r == 0) {
        acc = v;
        continue;
      }
      switch (op) {
        case OpKind::kProd:
          acc = roundToType(t.type, acc * v);
          break;
        case OpKind::kMax:
          acc = std::max(acc, v);
          break;
        case OpKind::kMin:
          acc = std::min(acc, v);
          break;
        default:
          acc = roundToType(t.type, acc + v);
          break;
      }
    }
    if (op == OpKind::kAvg && !t.isFloat) acc = std::trunc(acc / n);
    encodeValue(t.type, acc, out.data() + i * t.size);
  }
  return out;
}

TEST(PerfValues, EveryTypeAndOpIsExactAndCheckable) {
  const size_t count = 210;  // a multiple of the input patterns' periods (3, 5, 7)
  for (int n = 1; n <= 8; ++n) {
    for (const TypeInfo& t : allTypes()) {
      for (const OpInfo& op : allOps()) {
        const ValuePlan plan(kAllReduceLike, op.kind, t, n);
        std::vector<std::vector<unsigned char>> in(n, std::vector<unsigned char>(count * t.size));
        for (int r = 0; r < n; ++r) plan.fillInput(in[r].data(), count, r);
        std::vector<unsigned char> out = simulate(t, op.kind, n, count, in);
        EXPECT_EQ(plan.countWrong(out.data(), count, 0, -1, count), 0u) << t.name << " " << op.name << " n=" << n;
        std::memset(out.data() + 5 * t.size, 0x7B, t.size);
        EXPECT_EQ(plan.countWrong(out.data(), count, 0, -1, count), 1u) << t.name << " " << op.name << " n=" << n;
        if (op.kind == OpKind::kAvg && t.isFloat) {
          bool nonzero = false;
          for (double v : plan.avgValues()) nonzero |= v != 0;
          EXPECT_TRUE(nonzero) << "float avg checks only zeros: " << t.name << " n=" << n;
        }
      }
    }
  }
}

}  // namespace
}  // namespace mixccl::perf
