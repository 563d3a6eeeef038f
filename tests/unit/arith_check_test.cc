// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// The arithmetic check of mixed communicators: fingerprints of the host backend, a backend that
// rounds one type differently, one that only changes NaN payloads, and the verdict over ranks.

#include "src/core/arith_check.h"

#include <gtest/gtest.h>

#include <cstring>

#include "common/result.h"
#include "tests/support/altered_backend.h"

namespace mixccl {
namespace {

ArithPrint printOf(DeviceBackend& dev) {
  ArithPrint p{};
  EXPECT_EQ(arithmeticPrint(dev, &p), Result::kSuccess) << lastError();
  return p;
}

TEST(ArithCheck, HostPrintIsStableAndCoversEveryType) {
  auto host = makeHostBackend();
  const ArithPrint first = printOf(*host);
  for (int t = 0; t < kNumDataTypes; ++t) EXPECT_NE(first[t], 0u) << dataTypeName(static_cast<DataType>(t));
  EXPECT_EQ(printOf(*host), first);
}

// Rounding half results differently (here: flipping the lowest bit of every non-NaN result) is
// the kind of disagreement the check exists for.
TEST(ArithCheck, OneTypeRoundedDifferentlyChangesOnlyItsPrint) {
  auto host = makeHostBackend();
  AlteredBackend skewed([](const ReduceSpec& spec, void* dst, size_t count) {
    if (spec.dtype != DataType::kFloat16) return;
    auto* u = static_cast<uint16_t*>(dst);
    for (size_t i = 0; i < count; ++i) {
      if ((u[i] & 0x7c00) != 0x7c00) u[i] ^= 1;
    }
  });
  const ArithPrint a = printOf(*host), b = printOf(skewed);
  for (int t = 0; t < kNumDataTypes; ++t) {
    if (static_cast<DataType>(t) == DataType::kFloat16) {
      EXPECT_NE(a[t], b[t]);
    } else {
      EXPECT_EQ(a[t], b[t]) << dataTypeName(static_cast<DataType>(t));
    }
  }
  std::vector<ArithFacts> ranks = {{"host", 0xfff, a}, {"host", 0xfff, a}, {"altered", 0xfff, b}};
  ASSERT_EQ(compareArithmetic(ranks, 1), Result::kInvalidUsage);
  const std::string msg = lastError();
  EXPECT_NE(msg.find("rank 0 (backend host)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 2 (backend altered)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("float16"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("float32"), std::string::npos) << msg;
}

// A NaN is a NaN: hardware that produces another payload (a canonical NaN) agrees.
TEST(ArithCheck, NanPayloadsDoNotCount) {
  auto host = makeHostBackend();
  AlteredBackend canonical([](const ReduceSpec& spec, void* dst, size_t count) {
    if (spec.dtype != DataType::kFloat32) return;
    auto* u = static_cast<uint32_t*>(dst);
    for (size_t i = 0; i < count; ++i) {
      if ((u[i] & 0x7f800000u) == 0x7f800000u && (u[i] & 0x7fffffu) != 0) u[i] = 0x7fc00000u;
    }
  });
  EXPECT_EQ(printOf(*host), printOf(canonical));
}

// A type only one rank supports is not compared; missing support is checked per call.
TEST(ArithCheck, TypesOutsideTheCommonSetAreNotCompared) {
  auto host = makeHostBackend();
  const uint32_t noHalf = 0xfff & ~(1u << static_cast<int>(DataType::kFloat16));
  AlteredBackend narrow(nullptr, noHalf);
  const ArithPrint a = printOf(*host), b = printOf(narrow);
  EXPECT_EQ(b[static_cast<int>(DataType::kFloat16)], 0u);
  std::vector<ArithFacts> ranks = {{"host", 0xfff, a}, {"altered", noHalf, b}};
  EXPECT_EQ(compareArithmetic(ranks, 0), Result::kSuccess) << lastError();
}

}  // namespace
}  // namespace mixccl
