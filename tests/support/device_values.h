// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Inputs for "same result on every vendor" tests: random bits of every datatype (ncclDataType_t
// numbering, 0..11) with the special values sprinkled in (NaN of both signs and several payloads,
// infinities, -0, denormals, the largest finite values), and the comparison those tests use:
// bit for bit, NaNs included (every backend stores the canonical NaN; docs/PROTOCOL.md,
// "Arithmetic").
//
// Unlike tests/support/values.h, nothing here is exact: results are only compared with another
// run of the same collective (all-host ranks), never with a formula.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace mixccl::testing {

inline size_t devTypeSize(int t) {
  static const size_t kSizes[12] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return kSizes[t];
}

// `n` elements of type `t`: random bits, floats mostly of moderate magnitude (so sums and
// products round rather than overflow), and about one element in eight a special value.
inline std::vector<uint8_t> randomElements(int t, size_t n, std::mt19937_64& rng) {
  const size_t size = devTypeSize(t);
  std::vector<uint8_t> v(n * size);
  for (auto& b : v) b = static_cast<uint8_t>(rng() >> 13);
  std::vector<uint64_t> specials;
  switch (t) {
    case 7:
      specials = {0x7fc00000, 0xffc00000, 0x7fa00001, 0x7f800000, 0xff800000, 0x80000000, 0,
                  0x00000001, 0x807fffff, 0x7f7fffff, 0xff7fffff, 0x3f800000, 0x00800000};
      for (size_t i = 0; i < n; ++i) {
        if (rng() % 4 == 0) continue;
        float f = std::ldexp(static_cast<float>(static_cast<int32_t>(rng() >> 40)) / 16777216.0f,
                             static_cast<int>(rng() % 40) - 20);
        std::memcpy(&v[i * 4], &f, 4);
      }
      break;
    case 8:
      specials = {0x7ff8000000000000,
                  0xfff8000000000000,
                  0x7ff4000000000001,
                  0x7ff0000000000000,
                  0xfff0000000000000,
                  0x8000000000000000,
                  0,
                  1,
                  0x7fefffffffffffff,
                  0x3ff0000000000000};
      for (size_t i = 0; i < n; ++i) {
        if (rng() % 4 == 0) continue;
        double d = std::ldexp(static_cast<double>(static_cast<int64_t>(rng() >> 11)) / 9007199254740992.0,
                              static_cast<int>(rng() % 80) - 40);
        std::memcpy(&v[i * 8], &d, 8);
      }
      break;
    case 6:
      specials = {0x7e00, 0xfe00, 0x7d01, 0x7c00, 0xfc00, 0x8000, 0, 0x0001, 0x83ff, 0x7bff, 0xfbff, 0x3c00};
      break;
    case 9:
      specials = {0x7fc0, 0xffc0, 0x7f81, 0x7f80, 0xff80, 0x8000, 0, 0x0001, 0x807f, 0x7f7f, 0xff7f, 0x3f80};
      break;
    case 10:
      specials = {0x7f, 0xff, 0x7e, 0xfe, 0x80, 0, 0x01, 0x87, 0x78, 0x7d};
      break;
    case 11:
      specials = {0x7e, 0xfe, 0x7d, 0x7c, 0xfc, 0x80, 0, 0x01, 0x83, 0x7b, 0xfb};
      break;
    case 0:
    case 1:
      specials = {0, 0x7f, 0x80, 0xff, 1};
      break;
    case 2:
    case 3:
      specials = {0, 0x7fffffff, 0x80000000, 0xffffffff, 1};
      break;
    default:
      specials = {0, 0x7fffffffffffffff, 0x8000000000000000, 0xffffffffffffffff, 1};
      break;
  }
  for (size_t i = 0; i < n; ++i) {
    if (rng() % 8 != 0) continue;
    const uint64_t bits = specials[rng() % specials.size()];
    std::memcpy(&v[i * size], &bits, size);
  }
  return v;
}

// Special bit patterns of type `t`, for tests that reduce every pair of them: zeros of both
// signs, the smallest and largest subnormals, the smallest normal, 1 and its neighbour, half an ulp
// of 1 (a tie in sums), the largest finite values, infinities, quiet and signalling NaNs with
// payloads and a negative NaN, one ordinary value; integers at and around their limits. Every list
// has an odd length, so a test over all pairs has an odd count (vector blocks and a tail).
inline std::vector<uint64_t> specialBits(int t) {
  switch (t) {
    case 6:
      return {0x0000, 0x8000, 0x0001, 0x83ff, 0x0400, 0x3c00, 0xbc00, 0x3c01, 0x1000,
              0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e01, 0x7c01, 0xfe00, 0x5555};
    case 7:
      return {0x00000000, 0x80000000, 0x00000001, 0x807fffff, 0x00800000, 0x3f800000,
              0xbf800000, 0x3f800001, 0x33800000, 0x7f7fffff, 0xff7fffff, 0x7f800000,
              0xff800000, 0x7fc00001, 0x7f800001, 0xffc00000, 0x40490fdb};
    case 8:
      return {0,
              0x8000000000000000,
              1,
              0x800fffffffffffff,
              0x0010000000000000,
              0x3ff0000000000000,
              0xbff0000000000000,
              0x3ff0000000000001,
              0x3ca0000000000000,
              0x7fefffffffffffff,
              0xffefffffffffffff,
              0x7ff0000000000000,
              0xfff0000000000000,
              0x7ff8000000000001,
              0x7ff0000000000001,
              0xfff8000000000000,
              0x400921fb54442d18};
    case 9:
      return {0x0000, 0x8000, 0x0001, 0x807f, 0x0080, 0x3f80, 0xbf80, 0x3f81, 0x3b80,
              0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x7fc1, 0x7f81, 0xffc0, 0x5555};
    case 10:
      return {0x00, 0x80, 0x01, 0x87, 0x08, 0x38, 0xb8, 0x39, 0x18, 0x7e, 0xfe, 0x7f, 0xff, 0x77, 0x55};
    case 11:
      return {0x00, 0x80, 0x01, 0x83, 0x04, 0x3c, 0xbc, 0x3d, 0x30, 0x7b, 0xfb, 0x7c, 0xfc, 0x7e, 0x7d, 0xfe, 0x55};
    default: {
      const int b = static_cast<int>(devTypeSize(t)) * 8;
      const uint64_t mask = b == 64 ? ~0ull : (1ull << b) - 1;
      const uint64_t top = 1ull << (b - 1);
      std::vector<uint64_t> v = {0, 1, 2, 3, 100, top - 1, top, top + 1, ~0ull, ~1ull, top - 2};
      for (uint64_t& x : v) x &= mask;
      return v;
    }
  }
}

// Compares two result buffers of `t` elements. Returns "" when every element has equal bits (NaNs
// too: every backend stores the canonical NaN, PROTOCOL.md "Arithmetic"); otherwise a description
// of the first difference (element index and both values in hex) and how many elements differ.
inline std::string compareElements(int t, const uint8_t* got, const uint8_t* want, size_t bytes) {
  const size_t size = devTypeSize(t);
  size_t bad = 0, first = 0;
  for (size_t off = 0; off + size <= bytes; off += size) {
    if (std::memcmp(got + off, want + off, size) == 0) continue;
    if (bad++ == 0) first = off;
  }
  // A tail shorter than one element (a byte-addressed region) compares byte for byte.
  const size_t tail = bytes - bytes % size;
  for (size_t off = tail; off < bytes; ++off) {
    if (got[off] != want[off] && bad++ == 0) first = off;
  }
  if (bad == 0) return "";
  uint64_t g = 0, w = 0;
  const size_t shown = first + size <= bytes ? size : 1;
  std::memcpy(&g, got + first, shown);
  std::memcpy(&w, want + first, shown);
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%zu element(s) differ; first at byte %zu (element %zu): got 0x%0*llx, want 0x%0*llx",
                bad, first, first / size, static_cast<int>(shown * 2), static_cast<unsigned long long>(g),
                static_cast<int>(shown * 2), static_cast<unsigned long long>(w));
  return buf;
}

}  // namespace mixccl::testing
