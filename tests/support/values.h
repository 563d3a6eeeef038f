// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Test data for collectives: inputs chosen so that every reduction result is exact in every
// datatype whatever the order of combination (small integers, products of a few 2s, sums small
// enough for fp8), plus a reference computed in double and encoded into the datatype. Integer
// encodings wrap like the library's integer arithmetic does.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "src/device/host/float_formats.h"

namespace mixccl::testing {

// ncclDataType_t values.
constexpr int kNumTypes = 12;
inline size_t typeSize(int t) {
  static const size_t kSizes[kNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return kSizes[t];
}
inline bool isFloat(int t) { return t >= 6; }
inline const char* typeName(int t) {
  static const char* const kNames[kNumTypes] = {"int8",    "uint8",   "int32",   "uint32", "int64", "uint64",
                                                "float16", "float32", "float64", "bf16",   "e4m3",  "e5m2"};
  return kNames[t];
}

inline void encode(int t, double v, void* out) {
  auto put = [out](auto x) { memcpy(out, &x, sizeof(x)); };
  int64_t i = static_cast<int64_t>(v);
  switch (t) {
    case 0:
      return put(static_cast<int8_t>(static_cast<uint8_t>(i)));
    case 1:
      return put(static_cast<uint8_t>(i));
    case 2:
      return put(static_cast<int32_t>(static_cast<uint32_t>(i)));
    case 3:
      return put(static_cast<uint32_t>(i));
    case 4:
      return put(i);
    case 5:
      return put(static_cast<uint64_t>(i));
    case 6:
      return put(fmt16::floatToHalf(static_cast<float>(v)));
    case 7:
      return put(static_cast<float>(v));
    case 8:
      return put(v);
    case 9:
      return put(fmt16::floatToBf16(static_cast<float>(v)));
    case 10:
      return put(fmt16::floatToFp8e4m3(static_cast<float>(v)));
    default:
      return put(fmt16::floatToFp8e5m2(static_cast<float>(v)));
  }
}

inline double decode(int t, const void* in) {
  auto get = [in](auto x) {
    memcpy(&x, in, sizeof(x));
    return x;
  };
  switch (t) {
    case 0:
      return get(int8_t{});
    case 1:
      return get(uint8_t{});
    case 2:
      return get(int32_t{});
    case 3:
      return get(uint32_t{});
    case 4:
      return static_cast<double>(get(int64_t{}));
    case 5:
      return static_cast<double>(get(uint64_t{}));
    case 6:
      return fmt16::halfToFloat(get(uint16_t{}));
    case 7:
      return get(float{});
    case 8:
      return get(double{});
    case 9:
      return fmt16::bf16ToFloat(get(uint16_t{}));
    case 10:
      return fmt16::fp8e4m3ToFloat(get(uint8_t{}));
    default:
      return fmt16::fp8e5m2ToFloat(get(uint8_t{}));
  }
}

// ncclRedOp_t values; kPreMulTwo stands for a PreMulSum op with scalar 2.
enum Op { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4, kPreMulTwo = 5 };
constexpr int kNumOps = 6;
inline const char* opName(int op) {
  static const char* const kNames[kNumOps] = {"sum", "prod", "max", "min", "avg", "premul2"};
  return kNames[op];
}

// Input element `i` of rank `r` for a reduction with `op` in type `t`.
inline double inputValue(int t, int op, int r, uint64_t i) {
  const uint64_t range = t == 11 ? 2 : 3;  // e5m2 has 2 mantissa bits: keep its sums <= 8
  switch (op) {
    case kProd:
      return (i + static_cast<uint64_t>(r)) % 5 == 0 ? 2.0 : 1.0;  // products are powers of two
    case kMax:
    case kMin:
      return static_cast<double>((static_cast<uint64_t>(r) * 5 + i * 3) % 7);
    case kAvg:
      if (isFloat(t)) {
        // The same value on every rank: a float average is then order-independent. Except in e5m2
        // beyond 8 ranks: a partial sum of 9, 11, 13 or 15 equal terms needs a third mantissa
        // bit, so ranks from 8 on add 0 and the sum keeps at most 8 terms.
        return t == 11 && r >= 8 ? 0.0 : static_cast<double>(i % range);
      }
      // Distinct per rank; the sum, at most 2 * (1 + 2 + 3 + 4 + 5) per five ranks, fits int8
      // up to 20 ranks.
      return static_cast<double>(i % range) * static_cast<double>(r % 5 + 1);
    default:
      return static_cast<double>((i + static_cast<uint64_t>(r)) % range);
  }
}

// The reduction of element i over ranks 0..n-1, as NCCL defines it.
inline double expectedValue(int t, int op, int n, uint64_t i) {
  double acc = inputValue(t, op, 0, i) * (op == kPreMulTwo ? 2.0 : 1.0);
  for (int r = 1; r < n; ++r) {
    double v = inputValue(t, op, r, i);
    switch (op) {
      case kProd:
        acc *= v;
        break;
      case kMax:
        acc = std::max(acc, v);
        break;
      case kMin:
        acc = std::min(acc, v);
        break;
      case kPreMulTwo:
        acc += 2.0 * v;
        break;
      default:
        acc += v;
        break;
    }
  }
  if (op == kAvg) acc = isFloat(t) ? acc / n : std::trunc(acc / n);
  return acc;
}

// Float averages over a rank count that is not a power of two round 1/n; everything else is exact.
inline bool exactExpected(int t, int op, int n) { return !(op == kAvg && isFloat(t) && (n & (n - 1)) != 0); }

// Relative tolerance for the inexact case: a few units in the last place of the type.
inline double tolerance(int t) {
  switch (t) {
    case 6:
      return 4e-3;
    case 9:
      return 3e-2;
    case 10:
      return 0.15;
    case 11:
      return 0.3;
    case 7:
      return 1e-6;
    default:
      return 1e-14;
  }
}

// A byte pattern for data-movement collectives, distinct per rank, element and byte.
inline uint8_t patternByte(int r, uint64_t byteIndex) {
  uint64_t x = (byteIndex + 1) * 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(r + 1) * 0xbf58476d1ce4e5b9ull;
  return static_cast<uint8_t>(x >> 29);
}

}  // namespace mixccl::testing
