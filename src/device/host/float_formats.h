// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Portable, scalar conversions between float and the narrow floating formats NCCL transports:
// IEEE binary16 ("half"), bfloat16, and the two OCP 8-bit formats. All narrowing conversions
// round to nearest, ties to even, and do not change when a user program (e.g. one built with
// -ffast-math) has set FTZ/DAZ. They assume the default round-to-nearest FPU mode, as the
// arithmetic around them does.
//
// Formats (sign.exponent.mantissa, bias):
//   half      1.5.10  bias 15   max 65504, has inf, NaN = exponent all ones and mantissa != 0
//   bfloat16  1.8.7   bias 127  the upper half of a float32
//   fp8 e4m3  1.4.3   bias 7    OCP "FN" variant: no infinities; S.1111.111 is NaN, so the
//                              largest finite value is S.1111.110 = 448
//   fp8 e5m2  1.5.2   bias 15   IEEE-like (the upper byte of a half): max 57344, has inf and NaN
//
// NaN policy: every NaN stays a NaN of the same sign. Narrowing produces a quiet NaN; half and
// bfloat16 keep as much of the payload as fits (like the F16C instructions do, so the vector and
// scalar paths agree bit for bit), fp8 produces the canonical NaN (e4m3: S.1111.111, e5m2:
// S.11111.10).
//
// Overflow policy for fp8 (Fp8Overflow): kSaturate maps every finite value beyond the largest
// finite one, and also +-inf, to +-max finite (448 for e4m3, 57344 for e5m2). This is what CUDA's
// __nv_fp8_e4m3/__nv_fp8_e5m2 constructors do (__NV_SATFINITE) and therefore what NCCL's fp8
// reductions produce, so the reduction kernels use it: an fp8 allreduce gives the same bits whether
// the reducing rank is a GPU or a CPU. kNonSaturate gives IEEE behaviour: e5m2 overflows to inf,
// e4m3 (which has no inf) overflows to NaN. Values exactly halfway between max finite and the next
// power step follow ties-to-even (e4m3: 464 -> 448; e5m2: 61440 -> overflow).

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>

// The kernels call these once per element inside large functions, where GCC's inliner may give
// up; an out-of-line call per element costs more than the memory traffic, so force inlining.
#if defined(__GNUC__)
#define MIXCCL_FMT_INLINE [[gnu::always_inline]] constexpr
#else
#define MIXCCL_FMT_INLINE constexpr
#endif

namespace mixccl::fmt16 {

MIXCCL_FMT_INLINE uint32_t floatBits(float f) { return std::bit_cast<uint32_t>(f); }
MIXCCL_FMT_INLINE float bitsFloat(uint32_t u) { return std::bit_cast<float>(u); }

// Every conversion is written without branches, so a loop that calls it can be vectorised by the
// compiler; the kernels rely on that for bfloat16, fp8 and (without F16C) half. The choices are
// made with bit masks rather than `?:` on purpose: GCC turns a `?:` into a branch and then refuses
// to if-convert a branch that contains a floating-point operation (it might trap, under the default
// -ftrapping-math), which leaves the whole loop scalar.

namespace detail {

// c ? a : b, computed from both values.
MIXCCL_FMT_INLINE uint32_t pick(bool c, uint32_t a, uint32_t b) {
  const uint32_t m = 0u - static_cast<uint32_t>(c);
  return (a & m) | (b & ~m);
}

// Narrows |x| (float bits, sign cleared, not NaN) to a format with kMant mantissa bits and exponent
// bias kBias, rounding to nearest even. Valid only below the format's overflow threshold.
// Normal range: add the rounding increment to the float bits; a carry out of the mantissa bumps the
// exponent, which is exactly right. Subnormal range: adding the magic constant 2^(kSubExp + 23),
// whose ulp equals the format's subnormal spacing 2^kSubExp, lets the FPU round to that spacing;
// the sum is a normal float, so FTZ/DAZ cannot interfere (only a float-subnormal input is flushed,
// and it rounds to zero anyway). This assumes round-to-nearest, the mode the arithmetic runs in.
template <uint32_t kMant, uint32_t kBias>
MIXCCL_FMT_INLINE uint32_t narrowMagnitude(uint32_t x) {
  constexpr uint32_t kDrop = 23u - kMant;
  constexpr uint32_t kMinNormal = (127u + 1u - kBias) << 23;
  constexpr int kSubExp = 1 - static_cast<int>(kBias) - static_cast<int>(kMant);
  constexpr uint32_t kMagic = static_cast<uint32_t>(kSubExp + 23 + 127) << 23;
  const uint32_t normal = (x + ((1u << (kDrop - 1u)) - 1u) + ((x >> kDrop) & 1u) - ((127u - kBias) << 23)) >> kDrop;
  const uint32_t sub = floatBits(bitsFloat(x) + bitsFloat(kMagic)) - kMagic;
  return pick(x >= kMinNormal, normal, sub);
}

}  // namespace detail

// ---- IEEE half -------------------------------------------------------------------------------

MIXCCL_FMT_INLINE float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu;
  const uint32_t mant = h & 0x3ffu;
  const uint32_t normal = (em << 13) + (112u << 23);
  // inf stays inf; a NaN keeps its payload and becomes quiet (as VCVTPH2PS does).
  const uint32_t special = (em << 13) | 0x7f800000u | (static_cast<uint32_t>(mant != 0) << 22);
  // Zero or subnormal: em * 2^-24, exact, and a normal float, so FTZ/DAZ cannot touch it.
  const uint32_t sub = floatBits(static_cast<float>(em) * 0x1p-24f);
  return bitsFloat(sign | detail::pick(em >= 0x7c00u, special, detail::pick(em >= 0x0400u, normal, sub)));
}

MIXCCL_FMT_INLINE uint16_t floatToHalf(float f) {
  const uint32_t bits = floatBits(f);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t x = bits & 0x7fffffffu;
  const uint32_t nan = 0x7e00u | ((x >> 13) & 0x3ffu);
  // 65520 is halfway between 65504 (odd mantissa) and 2^16, so it and everything above is inf.
  const uint32_t r =
      detail::pick(x > 0x7f800000u, nan, detail::pick(x >= 0x477ff000u, 0x7c00u, detail::narrowMagnitude<10, 15>(x)));
  return static_cast<uint16_t>(sign | r);
}

// ---- bfloat16 --------------------------------------------------------------------------------

MIXCCL_FMT_INLINE float bf16ToFloat(uint16_t h) { return bitsFloat(static_cast<uint32_t>(h) << 16); }

MIXCCL_FMT_INLINE uint16_t floatToBf16(float f) {
  const uint32_t x = floatBits(f);
  // Overflow needs no special case: the carry out of 0x7f7f.ffff lands exactly on inf.
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  const uint32_t nan = (x >> 16) | 0x0040u;
  return static_cast<uint16_t>(detail::pick((x & 0x7fffffffu) > 0x7f800000u, nan, rounded));
}

// ---- fp8 -------------------------------------------------------------------------------------

enum class Fp8Overflow { kSaturate, kNonSaturate };

constexpr float kE4m3Max = 448.0f;
constexpr float kE5m2Max = 57344.0f;

MIXCCL_FMT_INLINE float fp8e4m3ToFloat(uint8_t v) {
  const uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  const uint32_t em = v & 0x7fu;
  const uint32_t normal = (em << 20) + (120u << 23);
  const uint32_t sub = floatBits(static_cast<float>(em) * 0x1p-9f);
  return bitsFloat(sign | detail::pick(em == 0x7fu, 0x7fc00000u, detail::pick(em >= 0x08u, normal, sub)));
}

MIXCCL_FMT_INLINE uint8_t floatToFp8e4m3(float f, Fp8Overflow mode = Fp8Overflow::kSaturate) {
  const uint32_t bits = floatBits(f);
  const uint32_t sign = (bits >> 24) & 0x80u;
  const uint32_t x = bits & 0x7fffffffu;
  // 464 = 448 + half an ulp is a tie that rounds to the even 448; above it the value overflows.
  const uint32_t overflow = mode == Fp8Overflow::kSaturate ? 0x7eu : 0x7fu;
  const uint32_t r =
      detail::pick(x > 0x7f800000u, 0x7fu, detail::pick(x > 0x43e80000u, overflow, detail::narrowMagnitude<3, 7>(x)));
  return static_cast<uint8_t>(sign | r);
}

// e5m2 is the upper byte of a half, so widening reuses the half path.
MIXCCL_FMT_INLINE float fp8e5m2ToFloat(uint8_t v) { return halfToFloat(static_cast<uint16_t>(v << 8)); }

MIXCCL_FMT_INLINE uint8_t floatToFp8e5m2(float f, Fp8Overflow mode = Fp8Overflow::kSaturate) {
  const uint32_t bits = floatBits(f);
  const uint32_t sign = (bits >> 24) & 0x80u;
  const uint32_t x = bits & 0x7fffffffu;
  // 61440 is halfway between 57344 (odd mantissa) and 2^16, so it already overflows.
  const uint32_t overflow = mode == Fp8Overflow::kSaturate ? 0x7bu : 0x7cu;
  const uint32_t r =
      detail::pick(x > 0x7f800000u, 0x7eu, detail::pick(x >= 0x47700000u, overflow, detail::narrowMagnitude<2, 15>(x)));
  return static_cast<uint8_t>(sign | r);
}

// Rounds a double to a float with "round to odd": an inexact result is the neighbour whose last
// mantissa bit is 1. Rounding that float again (ties to even) to a format with at least two fewer
// mantissa bits gives the correctly rounded result of the original double, which a plain
// double->float->half chain does not (double rounding). Used for scalars, not on the hot path.
inline float roundToOddFloat(double d) {
  float f = static_cast<float>(d);
  if (std::isnan(d) || static_cast<double>(f) == d) return f;
  if (std::isinf(f)) f = std::copysign(FLT_MAX, static_cast<float>(d));  // finite d beyond float range
  // f is one of the two floats around d; take the one toward zero, then mark the result inexact.
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
  return bitsFloat(floatBits(f) | 1u);
}

}  // namespace mixccl::fmt16
