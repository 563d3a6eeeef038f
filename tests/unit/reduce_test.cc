// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// The CPU reduction kernels and the narrow-float conversions, checked against references written
// independently of the code under test: formats are decoded from their bit fields with ldexp and
// encoded by searching a sorted table of every finite value (so rounding ties to even, overflow and
// saturation follow from the definition, not from the same bit tricks the kernels use), and
// reductions are recomputed in double/int64 one step at a time.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "src/device/device_backend.h"
#include "src/device/host/float_formats.h"
#include "src/device/host/reduce_kernels.h"
#include "tests/support/device_values.h"

namespace mixccl {
namespace {

using namespace fmt16;

// ---- reference formats -------------------------------------------------------------------------

struct RefFormat {
  RefFormat(int e, int m, bool inf, bool sat) : expBits(e), mantBits(m), hasInf(inf), saturates(sat) {}
  int expBits;
  int mantBits;
  bool hasInf;     // false: e4m3 "FN", where only S.1111.111 is NaN
  bool saturates;  // what the library's narrowing does on overflow (fp8: saturate to max finite)
  int bits() const { return 1 + expBits + mantBits; }
  int bias() const { return (1 << (expBits - 1)) - 1; }

  double decode(uint32_t code) const {
    const bool neg = (code >> (expBits + mantBits)) & 1;
    const uint32_t e = (code >> mantBits) & ((1u << expBits) - 1);
    const uint32_t m = code & ((1u << mantBits) - 1);
    const uint32_t eMax = (1u << expBits) - 1;
    double v;
    if (hasInf && e == eMax) {
      v = m == 0 ? INFINITY : NAN;
    } else if (!hasInf && e == eMax && m == (1u << mantBits) - 1) {
      v = NAN;
    } else if (e == 0) {
      v = std::ldexp(static_cast<double>(m), 1 - bias() - mantBits);
    } else {
      v = std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -mantBits), static_cast<int>(e) - bias());
    }
    return neg ? -v : v;
  }

  // All finite non-negative values in increasing order, with their codes.
  const std::vector<std::pair<double, uint32_t>>& table() const {
    if (table_.empty()) {
      for (uint32_t c = 0; c < (1u << (bits() - 1)); ++c) {
        const double v = decode(c);
        if (std::isfinite(v)) table_.emplace_back(v, c);
      }
      std::sort(table_.begin(), table_.end());
    }
    return table_;
  }

  // Round to nearest, ties to even code. Overflow: the value "one step" above max finite is
  // 2^(emax+1) (or max + one ulp for e4m3); halfway to it rounds up iff max's code is odd.
  uint32_t encode(double v, bool saturate) const {
    const uint32_t signBit = 1u << (bits() - 1);
    const uint32_t sign = std::signbit(v) ? signBit : 0;
    const auto& t = table();
    const uint32_t nanCode = hasInf ? ((((1u << expBits) - 1) << mantBits) | (1u << (mantBits - 1))) : (signBit - 1);
    if (std::isnan(v)) return sign | nanCode;
    const double a = std::fabs(v);
    const auto& [maxV, maxC] = t.back();
    const double ulpMax = maxV - t[t.size() - 2].first;
    const double half = maxV + ulpMax / 2;
    const uint32_t overflowCode = saturate ? maxC : (hasInf ? (((1u << expBits) - 1) << mantBits) : nanCode);
    if (a > half || (a == half && (maxC & 1))) return sign | overflowCode;
    if (a >= maxV) return sign | maxC;
    auto hi = std::lower_bound(t.begin(), t.end(), std::make_pair(a, 0u),
                               [](const auto& x, const auto& y) { return x.first < y.first; });
    if (hi->first == a) return sign | hi->second;
    auto lo = hi - 1;
    const double dl = a - lo->first, dh = hi->first - a;
    if (dl < dh) return sign | lo->second;
    if (dh < dl) return sign | hi->second;
    return sign | ((lo->second & 1) ? hi->second : lo->second);
  }

 private:
  mutable std::vector<std::pair<double, uint32_t>> table_;
};

const RefFormat kRefHalf{5, 10, true, false};
const RefFormat kRefBf16{8, 7, true, false};
const RefFormat kRefE4m3{4, 3, false, true};
const RefFormat kRefE5m2{5, 2, true, true};

bool sameOrBothNan(double x, double y) {
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
  return x == y && std::signbit(x) == std::signbit(y);
}

// ---- conversions: exhaustive over the narrow formats --------------------------------------------

struct ConvCase {
  const char* name;
  const RefFormat* ref;
  float (*widen)(uint32_t);
  uint32_t (*narrow)(float);  // saturating for fp8 (the kernels' mode)
};

float widenHalf(uint32_t c) { return halfToFloat(static_cast<uint16_t>(c)); }
uint32_t narrowHalf(float f) { return floatToHalf(f); }
float widenBf16(uint32_t c) { return bf16ToFloat(static_cast<uint16_t>(c)); }
uint32_t narrowBf16(float f) { return floatToBf16(f); }
float widenE4m3(uint32_t c) { return fp8e4m3ToFloat(static_cast<uint8_t>(c)); }
uint32_t narrowE4m3(float f) { return floatToFp8e4m3(f); }
float widenE5m2(uint32_t c) { return fp8e5m2ToFloat(static_cast<uint8_t>(c)); }
uint32_t narrowE5m2(float f) { return floatToFp8e5m2(f); }

const ConvCase kConvCases[] = {
    {"half", &kRefHalf, widenHalf, narrowHalf},
    {"bf16", &kRefBf16, widenBf16, narrowBf16},
    {"e4m3", &kRefE4m3, widenE4m3, narrowE4m3},
    {"e5m2", &kRefE5m2, widenE5m2, narrowE5m2},
};

class Conversion : public ::testing::TestWithParam<ConvCase> {};

TEST_P(Conversion, WidenMatchesDefinitionForEveryCode) {
  const ConvCase& c = GetParam();
  for (uint32_t code = 0; code < (1u << c.ref->bits()); ++code) {
    ASSERT_TRUE(sameOrBothNan(c.widen(code), c.ref->decode(code))) << c.name << " code 0x" << std::hex << code;
  }
}

TEST_P(Conversion, NarrowOfWidenIsIdentityAndNanStaysNan) {
  const ConvCase& c = GetParam();
  const uint32_t signBit = 1u << (c.ref->bits() - 1);
  for (uint32_t code = 0; code < (1u << c.ref->bits()); ++code) {
    const float f = c.widen(code);
    const uint32_t back = c.narrow(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(c.ref->decode(back))) << c.name << " 0x" << std::hex << code;
      EXPECT_EQ(back & signBit, code & signBit) << c.name << " NaN sign, code 0x" << std::hex << code;
    } else if (std::isinf(f)) {
      // Only e5m2 among the saturating narrowings turns inf into max finite (see float_formats.h).
      if (c.ref == &kRefE5m2) {
        EXPECT_EQ(back, (code & signBit) | 0x7bu);
      } else {
        EXPECT_EQ(back, code);
      }
    } else {
      ASSERT_EQ(back, code) << c.name << " 0x" << std::hex << code;
    }
  }
}

// Midpoints between neighbours round to the even code; one float ulp either side decides.
TEST_P(Conversion, TiesRoundToEven) {
  const ConvCase& c = GetParam();
  const auto& t = c.ref->table();
  for (size_t i = 0; i + 1 < t.size(); ++i) {
    const double mid = (t[i].first + t[i + 1].first) / 2;
    const float m = static_cast<float>(mid);
    ASSERT_EQ(static_cast<double>(m), mid) << "midpoint not exact in float";
    const uint32_t even = (t[i].second & 1) ? t[i + 1].second : t[i].second;
    const uint32_t signBit = 1u << (c.ref->bits() - 1);
    ASSERT_EQ(c.narrow(m), even) << c.name << " tie at " << mid;
    ASSERT_EQ(c.narrow(-m), even | signBit) << c.name << " tie at " << -mid;
    ASSERT_EQ(c.narrow(std::nextafter(m, 0.0f)), t[i].second) << c.name << " below " << mid;
    ASSERT_EQ(c.narrow(std::nextafter(m, INFINITY)), t[i + 1].second) << c.name << " above " << mid;
  }
}

// A large sample of float bit patterns (every sign, exponent and many mantissas) against the
// table reference, including everything beyond the format's range.
TEST_P(Conversion, NarrowMatchesReferenceOnFloatSweep) {
  const ConvCase& c = GetParam();
  for (uint64_t u = 0; u <= 0xffffffffull; u += 4099) {
    const float f = bitsFloat(static_cast<uint32_t>(u));
    const uint32_t want = c.ref->encode(f, c.ref->saturates);
    const uint32_t got = c.narrow(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(c.ref->decode(got))) << c.name << " bits 0x" << std::hex << u;
    } else {
      ASSERT_EQ(got, want) << c.name << " float bits 0x" << std::hex << u << " value " << f;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, Conversion, ::testing::ValuesIn(kConvCases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(Fp8, E4m3RangeAndSaturation) {
  EXPECT_EQ(fp8e4m3ToFloat(0x7e), 448.0f);
  EXPECT_TRUE(std::isnan(fp8e4m3ToFloat(0x7f)));
  EXPECT_TRUE(std::isnan(fp8e4m3ToFloat(0xff)));
  EXPECT_EQ(fp8e4m3ToFloat(0x78), 256.0f);  // S.1111.000 is a number, not inf
  EXPECT_EQ(fp8e4m3ToFloat(0x01), 0x1p-9f);
  EXPECT_EQ(floatToFp8e4m3(448.0f), 0x7e);
  EXPECT_EQ(floatToFp8e4m3(464.0f), 0x7e);  // tie between 448 (even) and 480 (not representable)
  EXPECT_EQ(floatToFp8e4m3(std::nextafter(464.0f, INFINITY)), 0x7e);  // saturates
  EXPECT_EQ(floatToFp8e4m3(1e6f), 0x7e);
  EXPECT_EQ(floatToFp8e4m3(-1e6f), 0xfe);
  EXPECT_EQ(floatToFp8e4m3(INFINITY), 0x7e);
  EXPECT_EQ(floatToFp8e4m3(-INFINITY), 0xfe);
  EXPECT_EQ(floatToFp8e4m3(464.0f, Fp8Overflow::kNonSaturate), 0x7e);
  EXPECT_EQ(floatToFp8e4m3(465.0f, Fp8Overflow::kNonSaturate), 0x7f);  // no inf in e4m3: NaN
  EXPECT_EQ(floatToFp8e4m3(-INFINITY, Fp8Overflow::kNonSaturate), 0xff);
  EXPECT_EQ(floatToFp8e4m3(NAN), 0x7f);
  EXPECT_EQ(floatToFp8e4m3(-NAN), 0xff);
  EXPECT_EQ(floatToFp8e4m3(0x1p-10f), 0x00);  // half the smallest subnormal: tie to even zero
  EXPECT_EQ(floatToFp8e4m3(0x1.8p-10f), 0x01);
}

TEST(Fp8, E5m2InfinitiesAndSaturation) {
  EXPECT_EQ(fp8e5m2ToFloat(0x7b), 57344.0f);
  EXPECT_EQ(fp8e5m2ToFloat(0x7c), INFINITY);
  EXPECT_EQ(fp8e5m2ToFloat(0xfc), -INFINITY);
  EXPECT_TRUE(std::isnan(fp8e5m2ToFloat(0x7d)));
  EXPECT_TRUE(std::isnan(fp8e5m2ToFloat(0xff)));
  EXPECT_EQ(floatToFp8e5m2(INFINITY, Fp8Overflow::kNonSaturate), 0x7c);
  EXPECT_EQ(floatToFp8e5m2(-INFINITY, Fp8Overflow::kNonSaturate), 0xfc);
  EXPECT_EQ(floatToFp8e5m2(61440.0f, Fp8Overflow::kNonSaturate), 0x7c);  // tie, 57344 is odd
  EXPECT_EQ(floatToFp8e5m2(std::nextafter(61440.0f, 0.0f), Fp8Overflow::kNonSaturate), 0x7b);
  EXPECT_EQ(floatToFp8e5m2(61440.0f), 0x7b);
  EXPECT_EQ(floatToFp8e5m2(INFINITY), 0x7b);  // saturating, like CUDA's __NV_SATFINITE
  EXPECT_EQ(floatToFp8e5m2(-INFINITY), 0xfb);
  EXPECT_TRUE(std::isnan(fp8e5m2ToFloat(floatToFp8e5m2(NAN))));
}

TEST(Half, SpecialValues) {
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65519.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);
  EXPECT_EQ(floatToHalf(-INFINITY), 0xfc00);
  EXPECT_EQ(floatToHalf(0x1p-24f), 0x0001);
  EXPECT_EQ(floatToHalf(0x1p-25f), 0x0000);  // tie to even zero
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(floatToHalf(1e-45f), 0x0000);  // float subnormal
  EXPECT_TRUE(std::isnan(halfToFloat(0x7e01)));
  EXPECT_EQ(floatToBf16(3.0e38f * 10), 0x7f80);
  EXPECT_EQ(floatToBf16(bitsFloat(0x7f7fffff)), 0x7f80);           // rounds up to inf
  EXPECT_EQ(floatToBf16(bitsFloat(0x7f800001)) & 0x7fc0, 0x7fc0);  // signalling NaN comes out quiet
}

#if defined(__x86_64__)
__attribute__((target("f16c"))) uint16_t f16cNarrow(float f) {
  return static_cast<uint16_t>(_mm_extract_epi16(_mm_cvtps_ph(_mm_set1_ps(f), _MM_FROUND_TO_NEAREST_INT), 0));
}
__attribute__((target("f16c"))) float f16cWiden(uint16_t h) { return _mm_cvtss_f32(_mm_cvtph_ps(_mm_set1_epi16(h))); }

// The AVX2 kernels use the F16C instructions; the portable ones our bit code. Both must agree bit
// for bit, NaN payloads included, or results would depend on which rank's CPU reduced.
TEST(Half, PortableMatchesF16cBitForBit) {
  if (!host::kernelIsaAvailable(host::KernelIsa::kAvx2)) GTEST_SKIP() << "this CPU has no AVX2+F16C";
  for (uint32_t c = 0; c < 0x10000; ++c) {
    ASSERT_EQ(floatBits(halfToFloat(c)), floatBits(f16cWiden(c))) << std::hex << c;
  }
  for (uint64_t u = 0; u <= 0xffffffffull; u += 257) {
    const float f = bitsFloat(static_cast<uint32_t>(u));
    ASSERT_EQ(floatToHalf(f), f16cNarrow(f)) << std::hex << u;
  }
}
#endif

TEST(EncodeScalar, RoundsCorrectlyFromDouble) {
  uint8_t out[8];
  // 1 + 2^-11 + 2^-40 lies just above a half midpoint but rounds *to* it in float; a plain
  // double->float->half chain would then round to even (1.0). Correct rounding gives 1 + 2^-10.
  encodeScalar(DataType::kFloat16, 1.0 + 0x1p-11 + 0x1p-40, out);
  EXPECT_EQ(out[0] | (out[1] << 8), 0x3c01);
  for (int n : {1, 2, 3, 5, 6, 7, 12, 100, 1000}) {
    const double v = 1.0 / n;
    encodeScalar(DataType::kFloat16, v, out);
    EXPECT_EQ(static_cast<uint32_t>(out[0] | (out[1] << 8)), kRefHalf.encode(v, false)) << n;
    encodeScalar(DataType::kBfloat16, v, out);
    EXPECT_EQ(static_cast<uint32_t>(out[0] | (out[1] << 8)), kRefBf16.encode(v, false)) << n;
    encodeScalar(DataType::kFloat8e4m3, v, out);
    EXPECT_EQ(out[0], kRefE4m3.encode(v, true)) << n;
    encodeScalar(DataType::kFloat8e5m2, v, out);
    EXPECT_EQ(out[0], kRefE5m2.encode(v, true)) << n;
    float f;
    encodeScalar(DataType::kFloat32, v, out);
    std::memcpy(&f, out, 4);
    EXPECT_EQ(f, static_cast<float>(v));
  }
  int32_t i32;
  encodeScalar(DataType::kInt32, -2.9, out);
  std::memcpy(&i32, out, 4);
  EXPECT_EQ(i32, -2);  // truncates toward zero
  encodeScalar(DataType::kInt8, 1000.0, out);
  EXPECT_EQ(static_cast<int8_t>(out[0]), 127);  // clamps instead of undefined behaviour
  encodeScalar(DataType::kUint8, -5.0, out);
  EXPECT_EQ(out[0], 0);
  uint64_t u64;
  encodeScalar(DataType::kUint64, 1e30, out);
  std::memcpy(&u64, out, 8);
  EXPECT_EQ(u64, std::numeric_limits<uint64_t>::max());
}

// Avg's 1/nranks and the arithmetic check's scalar must not depend on the caller's rounding mode:
// a rank whose program rounds toward zero would otherwise encode 1/3 as 0x3eaaaaaa instead of the
// nearest 0x3eaaaaab and fail the arithmetic check against every other rank.
TEST(EncodeScalar, IgnoresTheCallersRoundingMode) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "sets the x86-64 MXCSR register";
#else
  const unsigned before = _mm_getcsr();
  for (unsigned mode : {1u, 2u, 3u}) {  // down, up, toward zero
    for (int n : {3, 5, 6, 7, 9, 10, 11, 12, 13}) {
      uint8_t out[8];
      const double v = 1.0 / n;
      _mm_setcsr((before & ~0x6000u) | (mode << 13));
      encodeScalar(DataType::kFloat32, v, out);
      const unsigned after = _mm_getcsr();
      _mm_setcsr(before);
      uint32_t got;
      std::memcpy(&got, out, 4);
      EXPECT_EQ(got, floatBits(static_cast<float>(v))) << "rounding mode " << mode << ", 1/" << n;
      EXPECT_EQ(after & ~0x3fu, (before & ~0x6000u & ~0x3fu) | (mode << 13)) << "the caller's mode was not restored";
    }
  }
#endif
}

// The Avg scalar's division, too, is done in round-to-nearest: a float64 Avg on a rank whose
// program changed the rounding mode would otherwise differ from the other ranks' by an ulp.
TEST(EncodeScalar, ReciprocalIgnoresTheCallersRoundingMode) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "sets the x86-64 MXCSR register";
#else
  const unsigned before = _mm_getcsr();
  for (unsigned mode : {1u, 2u, 3u}) {  // down, up, toward zero
    for (uint64_t n : {3u, 5u, 6u, 7u, 9u, 10u, 11u, 12u, 13u}) {
      volatile double one = 1.0;  // divided now, before the mode changes
      volatile double nearest = one / static_cast<double>(n);
      uint8_t out[8];
      _mm_setcsr((before & ~0x6000u) | (mode << 13));
      encodeReciprocal(DataType::kFloat64, n, out);
      _mm_setcsr(before);
      double got;
      std::memcpy(&got, out, 8);
      EXPECT_EQ(got, nearest) << "rounding mode " << mode << ", 1/" << n;
    }
  }
#endif
}

// ---- reductions against a step-by-step reference -----------------------------------------------

// Element access for any data type through double (floats) or int64 bits (integers).
struct TypeInfo {
  DataType dtype;
  const RefFormat* narrow;  // null for the native types
};

const TypeInfo kTypes[] = {
    {DataType::kInt8, nullptr},       {DataType::kUint8, nullptr},        {DataType::kInt32, nullptr},
    {DataType::kUint32, nullptr},     {DataType::kInt64, nullptr},        {DataType::kUint64, nullptr},
    {DataType::kFloat16, &kRefHalf},  {DataType::kFloat32, nullptr},      {DataType::kFloat64, nullptr},
    {DataType::kBfloat16, &kRefBf16}, {DataType::kFloat8e4m3, &kRefE4m3}, {DataType::kFloat8e5m2, &kRefE5m2},
};

uint64_t rawAt(const std::vector<uint8_t>& buf, size_t i, size_t size) {
  uint64_t v = 0;
  std::memcpy(&v, buf.data() + i * size, size);
  return v;
}

double floatOf(const TypeInfo& t, uint64_t raw) {
  if (t.narrow != nullptr) return t.narrow->decode(static_cast<uint32_t>(raw));
  if (t.dtype == DataType::kFloat32) return bitsFloat(static_cast<uint32_t>(raw));
  double d;
  std::memcpy(&d, &raw, 8);
  return d;
}

uint64_t rawOfFloat(const TypeInfo& t, double v) {
  if (t.narrow != nullptr) return t.narrow->encode(v, t.narrow->saturates);
  if (t.dtype == DataType::kFloat32) return floatBits(static_cast<float>(v));
  uint64_t r;
  std::memcpy(&r, &v, 8);
  return r;
}

double roundTo(const TypeInfo& t, double v) { return floatOf(t, rawOfFloat(t, v)); }

int bitsOf(DataType d) { return static_cast<int>(dataTypeSize(d)) * 8; }

bool isSignedInt(DataType d) { return d == DataType::kInt8 || d == DataType::kInt32 || d == DataType::kInt64; }

// Sign-extends or masks raw bits to the integer value of the type.
int64_t intOf(DataType d, uint64_t raw) {
  const int b = bitsOf(d);
  if (b == 64) return static_cast<int64_t>(raw);
  const uint64_t mask = (1ull << b) - 1;
  raw &= mask;
  if (isSignedInt(d) && (raw >> (b - 1))) return static_cast<int64_t>(raw | ~mask);
  return static_cast<int64_t>(raw);
}

double refCombine(RedOpKind op, double x, double y) {
  switch (op) {
    case RedOpKind::kSum:
      return x + y;
    case RedOpKind::kProd:
      return x * y;
    case RedOpKind::kMax:
      return std::isnan(y) ? x : (x > y ? x : y);
    default:
      return std::isnan(y) ? x : (x < y ? x : y);
  }
}

uint64_t refElement(const TypeInfo& t, RedOpKind op, bool hasA, uint64_t a, uint64_t b, bool pre, uint64_t scalar,
                    bool post, uint64_t divisor) {
  if (!hasA && !pre && !post) return b;  // no arithmetic: the bits are copied, never re-rounded
  if (isFloatType(t.dtype)) {
    double y = floatOf(t, b);
    if (pre) y = roundTo(t, y * floatOf(t, scalar));
    if (hasA) y = roundTo(t, refCombine(op, floatOf(t, a), y));
    if (post) y = y / static_cast<double>(divisor);
    return rawOfFloat(t, y);
  }
  const DataType d = t.dtype;
  const uint64_t mask = bitsOf(d) == 64 ? ~0ull : (1ull << bitsOf(d)) - 1;
  uint64_t y = b & mask;
  if (pre) y = (y * scalar) & mask;  // wrapping multiply: low bits are sign-agnostic
  if (hasA) {
    const int64_t sx = intOf(d, a), sy = intOf(d, y);
    const uint64_t ux = a & mask, uy = y & mask;
    switch (op) {
      case RedOpKind::kSum:
        y = (ux + uy) & mask;
        break;
      case RedOpKind::kProd:
        y = (ux * uy) & mask;
        break;
      case RedOpKind::kMax:
        y = isSignedInt(d) ? static_cast<uint64_t>(std::max(sx, sy)) & mask : std::max(ux, uy);
        break;
      default:
        y = isSignedInt(d) ? static_cast<uint64_t>(std::min(sx, sy)) & mask : std::min(ux, uy);
        break;
    }
  }
  if (post) {
    y = isSignedInt(d) ? static_cast<uint64_t>(intOf(d, y) / static_cast<int64_t>(divisor)) & mask : y / divisor;
  }
  return y;
}

// Random raw elements: every bit pattern for the narrow floats (NaN, inf, subnormals included),
// mostly moderate values for float/double (plus some raw bit patterns), raw bits for integers.
uint64_t randomRaw(const TypeInfo& t, std::mt19937_64& rng) {
  const uint64_t r = rng();
  if (t.dtype == DataType::kFloat32 && (r & 7) != 0) {
    return floatBits(static_cast<float>(std::ldexp(static_cast<double>(r >> 40) - 8e6, -static_cast<int>(r & 31))));
  }
  if (t.dtype == DataType::kFloat64 && (r & 7) != 0) {
    return rawOfFloat(t, std::ldexp(static_cast<double>(r >> 20) - 8e12, -static_cast<int>((r >> 3) & 63)));
  }
  return r;
}

bool rawEqual(const TypeInfo& t, uint64_t x, uint64_t y) {
  if (isFloatType(t.dtype)) return sameOrBothNan(floatOf(t, x), floatOf(t, y));
  const uint64_t mask = bitsOf(t.dtype) == 64 ? ~0ull : (1ull << bitsOf(t.dtype)) - 1;
  return (x & mask) == (y & mask);
}

enum class Alias { kNone, kDstIsA, kDstIsB };

class Reduce : public ::testing::TestWithParam<TypeInfo> {};

TEST_P(Reduce, MatchesReferenceForEveryCombination) {
  const TypeInfo t = GetParam();
  const size_t size = dataTypeSize(t.dtype);
  std::mt19937_64 rng(1234 + static_cast<int>(t.dtype));
  std::vector<host::KernelIsa> isas = {host::KernelIsa::kPortable};
  if (host::kernelIsaAvailable(host::KernelIsa::kAvx2)) isas.push_back(host::KernelIsa::kAvx2);
  // Integer divisors exercise both division paths (small: via double; large: integer division).
  std::vector<uint64_t> divisors = {3};
  if (!isFloatType(t.dtype)) divisors.push_back((1ull << 21) + 7);
  int checked = 0;
  for (host::KernelIsa isa : isas) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{1003}}) {
      for (RedOpKind op : {RedOpKind::kSum, RedOpKind::kProd, RedOpKind::kMax, RedOpKind::kMin}) {
        for (bool hasA : {false, true}) {
          for (bool pre : {false, true}) {
            for (bool post : {false, true}) {
              for (uint64_t divisor : divisors) {
                for (Alias alias : {Alias::kNone, Alias::kDstIsA, Alias::kDstIsB}) {
                  if (alias == Alias::kDstIsA && !hasA) continue;
                  if (!post && divisor != divisors[0]) continue;
                  std::vector<uint8_t> a(n * size), b(n * size), dst(n * size, 0xcd);
                  for (size_t i = 0; i < n; ++i) {
                    uint64_t ra = randomRaw(t, rng), rb = randomRaw(t, rng);
                    std::memcpy(&a[i * size], &ra, size);
                    std::memcpy(&b[i * size], &rb, size);
                  }
                  ReduceSpec spec;
                  spec.dtype = t.dtype;
                  spec.op = op;
                  spec.preMul = true;  // applyPre decides
                  // A finite scalar of the type (integers: small, so products do not always wrap to 0).
                  const uint64_t mask = size == 8 ? ~0ull : (1ull << (size * 8)) - 1;
                  uint64_t scalar;
                  do {
                    scalar = randomRaw(t, rng) & (isFloatType(t.dtype) ? mask : 0xff);
                  } while (isFloatType(t.dtype) && !std::isfinite(floatOf(t, scalar)));
                  std::memcpy(spec.scalar, &scalar, size);
                  spec.divisor = divisor;
                  void* out = alias == Alias::kDstIsA ? a.data() : alias == Alias::kDstIsB ? b.data() : dst.data();
                  const std::vector<uint8_t> a0 = a, b0 = b;
                  ASSERT_EQ(host::reduceWithIsa(isa, out, hasA ? a.data() : nullptr, b.data(), n, spec, pre, post),
                            Result::kSuccess);
                  const std::vector<uint8_t>& res = alias == Alias::kDstIsA ? a : alias == Alias::kDstIsB ? b : dst;
                  for (size_t i = 0; i < n; ++i) {
                    const uint64_t want =
                        refElement(t, op, hasA, rawAt(a0, i, size), rawAt(b0, i, size), pre, scalar, post, divisor);
                    const uint64_t got = rawAt(res, i, size);
                    ASSERT_TRUE(rawEqual(t, got, want))
                        << dataTypeName(t.dtype) << " " << host::kernelIsaName(isa) << " " << redOpName(op)
                        << " n=" << n << " i=" << i << " hasA=" << hasA << " pre=" << pre << " post=" << post
                        << " divisor=" << divisor << " alias=" << static_cast<int>(alias) << std::hex << " a=0x"
                        << rawAt(a0, i, size) << " b=0x" << rawAt(b0, i, size) << " scalar=0x" << scalar << " got=0x"
                        << got << " want=0x" << want;
                    ++checked;
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 0);
}

// Every pair (a, b) of the special values of tests/support/device_values.h (NaNs with payloads,
// infinities, signed zeros, subnormals, ties, limits), several of them as the PreMulSum scalar,
// against the reference. A NaN result must be the type's canonical NaN bit for bit (rawEqual alone
// would accept any NaN).
std::vector<uint64_t> specialValues(DataType d) { return testing::specialBits(static_cast<int>(d)); }

uint64_t canonicalNan(DataType d) {
  switch (d) {
    case DataType::kFloat16:
      return 0x7e00;
    case DataType::kFloat32:
      return 0x7fc00000;
    case DataType::kFloat64:
      return 0x7ff8000000000000;
    case DataType::kBfloat16:
      return 0x7fc0;
    case DataType::kFloat8e4m3:
      return 0x7f;
    default:
      return 0x7e;
  }
}

TEST_P(Reduce, SpecialValuesMatchTheContractBitForBit) {
  const TypeInfo t = GetParam();
  const size_t size = dataTypeSize(t.dtype);
  const std::vector<uint64_t> vals = specialValues(t.dtype);
  const size_t n = vals.size() * vals.size();
  std::vector<uint8_t> a(n * size), b(n * size);
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(&a[i * size], &vals[i / vals.size()], size);
    std::memcpy(&b[i * size], &vals[i % vals.size()], size);
  }
  std::vector<uint64_t> scalars = {vals[1], vals[3], vals[6], vals[8], vals[vals.size() - 4], vals[vals.size() - 3]};
  uint64_t third = 0;
  encodeScalar(t.dtype, 1.0 / 3.0, reinterpret_cast<uint8_t*>(&third));
  if (isFloatType(t.dtype)) scalars.push_back(third);
  std::vector<host::KernelIsa> isas = {host::KernelIsa::kPortable};
  if (host::kernelIsaAvailable(host::KernelIsa::kAvx2)) isas.push_back(host::KernelIsa::kAvx2);
  for (host::KernelIsa isa : isas) {
    for (RedOpKind op : {RedOpKind::kSum, RedOpKind::kProd, RedOpKind::kMax, RedOpKind::kMin}) {
      for (int flags = 1; flags < 8; ++flags) {
        const bool hasA = flags & 1, pre = flags & 2, post = flags & 4;
        if (!hasA && op != RedOpKind::kSum) continue;
        for (uint64_t scalar : pre ? scalars : std::vector<uint64_t>{0}) {
          ReduceSpec spec;
          spec.dtype = t.dtype;
          spec.op = op;
          spec.preMul = pre;
          std::memcpy(spec.scalar, &scalar, size);
          spec.divisor = post ? 3 : 0;
          std::vector<uint8_t> dst(n * size, 0xcd);
          ASSERT_EQ(host::reduceWithIsa(isa, dst.data(), hasA ? a.data() : nullptr, b.data(), n, spec, pre, post),
                    Result::kSuccess);
          for (size_t i = 0; i < n; ++i) {
            uint64_t want = refElement(t, op, hasA, rawAt(a, i, size), rawAt(b, i, size), pre, scalar, post, 3);
            if (isFloatType(t.dtype) && std::isnan(floatOf(t, want))) want = canonicalNan(t.dtype);
            const uint64_t got = rawAt(dst, i, size);
            ASSERT_EQ(got, want) << dataTypeName(t.dtype) << " " << host::kernelIsaName(isa) << " " << redOpName(op)
                                 << " hasA=" << hasA << " pre=" << pre << " post=" << post << std::hex << " a=0x"
                                 << rawAt(a, i, size) << " b=0x" << rawAt(b, i, size) << " scalar=0x" << scalar;
          }
        }
      }
    }
  }
}

// Without a second operand or transforms the kernel copies bits exactly (a signalling NaN is not
// quietened by a widen/narrow round trip).
TEST_P(Reduce, PlainCopyKeepsBits) {
  const TypeInfo t = GetParam();
  const size_t size = dataTypeSize(t.dtype);
  std::vector<uint8_t> b(37 * size), dst(37 * size);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(i * 37 + 11);
  ReduceSpec spec;
  spec.dtype = t.dtype;
  ASSERT_EQ(host::reduce(dst.data(), nullptr, b.data(), 37, spec, true, true), Result::kSuccess);
  EXPECT_EQ(dst, b);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, Reduce, ::testing::ValuesIn(kTypes),
                         [](const auto& info) { return std::string(dataTypeName(info.param.dtype)); });

// NCCL's Avg on integers: the sum wraps first, then one truncating division.
TEST(ReduceSemantics, IntegerAverageWrapsThenTruncates) {
  const int8_t a[] = {100, -7, -128, 5};
  const int8_t b[] = {100, 0, -1, -6};
  int8_t out[4];
  ReduceSpec spec;
  spec.dtype = DataType::kInt8;
  spec.divisor = 2;
  ASSERT_EQ(host::reduce(out, a, b, 4, spec, true, true), Result::kSuccess);
  EXPECT_EQ(out[0], -28);  // 200 wraps to -56, halved
  EXPECT_EQ(out[1], -3);   // -7 / 2 truncates toward zero
  EXPECT_EQ(out[2], 63);   // -129 wraps to 127, halved
  EXPECT_EQ(out[3], 0);
}

TEST(ReduceSemantics, MaxMinIgnoreOneNan) {
  const float a[] = {NAN, 1.0f, NAN, -0.0f};
  const float b[] = {2.0f, NAN, NAN, 0.0f};
  float out[4];
  ReduceSpec spec;
  spec.dtype = DataType::kFloat32;
  spec.op = RedOpKind::kMax;
  ASSERT_EQ(host::reduce(out, a, b, 4, spec, false, false), Result::kSuccess);
  EXPECT_EQ(out[0], 2.0f);
  EXPECT_EQ(out[1], 1.0f);
  EXPECT_TRUE(std::isnan(out[2]));
  EXPECT_FALSE(std::signbit(out[3]));  // equal operands: the second, pre(b)
}

// A NaN made by arithmetic is stored as the canonical NaN (PROTOCOL.md, "Arithmetic"), whatever NaN
// the CPU produced (x86 makes a negative one for inf - inf) or was given, in both kernel variants,
// in the vector body and in the tail. Without it a GPU rank and a CPU rank store different bits.
TEST(ReduceSemantics, NanResultsAreCanonical) {
  struct Case {
    DataType dtype;
    uint64_t canonical, negNan, inf;  // inf 0: the type has none (e4m3)
  };
  const Case cases[] = {
      {DataType::kFloat16, 0x7e00, 0xfe01, 0x7c00},
      {DataType::kFloat32, 0x7fc00000, 0xffc00001, 0x7f800000},
      {DataType::kFloat64, 0x7ff8000000000000, 0xfff8000000000001, 0x7ff0000000000000},
      {DataType::kBfloat16, 0x7fc0, 0xffc1, 0x7f80},
      {DataType::kFloat8e4m3, 0x7f, 0xff, 0},
      {DataType::kFloat8e5m2, 0x7e, 0xfd, 0x7c},
  };
  constexpr size_t kCount = 19;  // two blocks of 8 and a tail of 3
  std::vector<host::KernelIsa> isas = {host::KernelIsa::kPortable};
  if (host::kernelIsaAvailable(host::KernelIsa::kAvx2)) isas.push_back(host::KernelIsa::kAvx2);
  for (const Case& c : cases) {
    const size_t size = dataTypeSize(c.dtype);
    const uint64_t sign = uint64_t{1} << (8 * size - 1);
    uint64_t one = 0;
    encodeScalar(c.dtype, 1.0, reinterpret_cast<uint8_t*>(&one));
    auto fill = [&](uint64_t bits) {
      std::vector<uint8_t> v(kCount * size);
      for (size_t i = 0; i < kCount; ++i) std::memcpy(&v[i * size], &bits, size);
      return v;
    };
    struct Trial {
      const char* what;
      RedOpKind op;
      uint64_t a, b;  // a == ~0: no first operand
      bool pre, post;
    };
    std::vector<Trial> trials = {
        {"sum of a negative NaN and 1", RedOpKind::kSum, c.negNan, one, false, false},
        {"product of 1 and a negative NaN", RedOpKind::kProd, one, c.negNan, false, false},
        {"max of two NaNs", RedOpKind::kMax, c.negNan, c.canonical | 1, false, false},
        {"min of two NaNs", RedOpKind::kMin, c.canonical | 1, c.negNan, false, false},
        {"pre() of a NaN", RedOpKind::kSum, ~uint64_t{0}, c.negNan, true, false},
        {"post() of a NaN sum", RedOpKind::kSum, c.negNan, one, false, true},
    };
    if (c.inf != 0) {
      trials.push_back({"inf + -inf", RedOpKind::kSum, c.inf, c.inf | sign, false, false});
      trials.push_back({"-inf + inf", RedOpKind::kSum, c.inf | sign, c.inf, false, false});
    }
    for (host::KernelIsa isa : isas) {
      for (const Trial& t : trials) {
        SCOPED_TRACE(std::string(dataTypeName(c.dtype)) + " " + host::kernelIsaName(isa) + ": " + t.what);
        const bool hasA = t.a != ~uint64_t{0};
        const std::vector<uint8_t> a = fill(hasA ? t.a : 0), b = fill(t.b);
        std::vector<uint8_t> dst(kCount * size, 0x55);
        ReduceSpec spec;
        spec.dtype = c.dtype;
        spec.op = t.op;
        spec.preMul = t.pre;
        encodeScalar(c.dtype, 3.0, spec.scalar);
        spec.divisor = t.post ? 3 : 0;
        ASSERT_EQ(host::reduceWithIsa(isa, dst.data(), hasA ? a.data() : nullptr, b.data(), kCount, spec, true, true),
                  Result::kSuccess);
        for (size_t i = 0; i < kCount; ++i) {
          uint64_t got = 0;
          std::memcpy(&got, &dst[i * size], size);
          ASSERT_EQ(got, c.canonical) << "element " << i << " is 0x" << std::hex << got;
        }
      }
    }
  }
}

TEST(ReduceSemantics, Fp8SumSaturates) {
  const uint8_t a[] = {0x7e, 0xfe, 0x7c, 0x7f};  // e4m3: 448, -448, 256, NaN
  const uint8_t b[] = {0x7e, 0xfe, 0x7c, 0x00};
  uint8_t out[4];
  ReduceSpec spec;
  spec.dtype = DataType::kFloat8e4m3;
  ASSERT_EQ(host::reduce(out, a, b, 4, spec, false, false), Result::kSuccess);
  EXPECT_EQ(out[0], 0x7e);
  EXPECT_EQ(out[1], 0xfe);
  EXPECT_EQ(out[2], 0x7e);  // 512 saturates to 448
  EXPECT_EQ(out[3] & 0x7f, 0x7f);
}

// The caller's floating-point environment must not change the bits (PROTOCOL.md, "Arithmetic"): a
// -ffast-math program runs with FTZ/DAZ set, others change the rounding mode or unmask exceptions
// to find NaNs. Each case runs with MXCSR set as such a program would, in both kernel variants,
// over 19 elements (vector blocks and a tail), and the caller's MXCSR must be back afterwards.
TEST(ReduceSemantics, CallerFloatingPointEnvironmentChangesNothing) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "sets the x86-64 MXCSR register";
#else
  constexpr unsigned kDaz = 1u << 6, kInvalidMask = 1u << 7, kRoundUp = 2u << 13, kFtz = 1u << 15;
  struct Case {
    const char* what;
    unsigned csr;
    DataType dtype;
    RedOpKind op;
    uint64_t a, b, want;
  };
  const Case cases[] = {
      {"FTZ/DAZ: float denormal sum", 0x1f80u | kFtz | kDaz, DataType::kFloat32, RedOpKind::kSum, 1, 1, 2},
      {"FTZ/DAZ: double denormal sum", 0x1f80u | kFtz | kDaz, DataType::kFloat64, RedOpKind::kSum, 1, 1, 2},
      {"FTZ/DAZ: bfloat16 denormal sum", 0x1f80u | kFtz | kDaz, DataType::kBfloat16, RedOpKind::kSum, 1, 1, 2},
      {"FTZ/DAZ: max(-1, denormal)", 0x1f80u | kFtz | kDaz, DataType::kFloat32, RedOpKind::kMax, 0xbf800000u, 1, 1},
      {"round up: float 1 + 2^-24 ties to even", 0x1f80u | kRoundUp, DataType::kFloat32, RedOpKind::kSum, 0x3f800000u,
       0x33800000u, 0x3f800000u},
      {"round up: double 1 + 2^-53 ties to even", 0x1f80u | kRoundUp, DataType::kFloat64, RedOpKind::kSum,
       0x3ff0000000000000u, 0x3ca0000000000000u, 0x3ff0000000000000u},
      {"invalid unmasked: float inf + -inf", 0x1f80u & ~kInvalidMask, DataType::kFloat32, RedOpKind::kSum, 0x7f800000u,
       0xff800000u, 0x7fc00000u},
      {"invalid unmasked: half inf + -inf", 0x1f80u & ~kInvalidMask, DataType::kFloat16, RedOpKind::kSum, 0x7c00u,
       0xfc00u, 0x7e00u},
  };
  constexpr size_t kCount = 19;
  std::vector<host::KernelIsa> isas = {host::KernelIsa::kPortable};
  if (host::kernelIsaAvailable(host::KernelIsa::kAvx2)) isas.push_back(host::KernelIsa::kAvx2);
  const unsigned before = _mm_getcsr();
  for (const Case& c : cases) {
    const size_t size = dataTypeSize(c.dtype);
    std::vector<uint8_t> a(kCount * size), b(kCount * size);
    for (size_t i = 0; i < kCount; ++i) {
      std::memcpy(&a[i * size], &c.a, size);
      std::memcpy(&b[i * size], &c.b, size);
    }
    for (host::KernelIsa isa : isas) {
      SCOPED_TRACE(std::string(c.what) + " (" + host::kernelIsaName(isa) + ")");
      std::vector<uint8_t> dst(kCount * size, 0x55);
      ReduceSpec spec;
      spec.dtype = c.dtype;
      spec.op = c.op;
      _mm_setcsr(c.csr);
      const Result r = host::reduceWithIsa(isa, dst.data(), a.data(), b.data(), kCount, spec, false, false);
      const unsigned after = _mm_getcsr();
      _mm_setcsr(before);
      ASSERT_EQ(r, Result::kSuccess);
      EXPECT_EQ(after, c.csr) << "the caller's MXCSR was not restored";
      for (size_t i = 0; i < kCount; ++i) {
        uint64_t got = 0;
        std::memcpy(&got, &dst[i * size], size);
        ASSERT_EQ(got, c.want) << "element " << i << " is 0x" << std::hex << got;
      }
    }
  }
#endif
}

TEST(ReduceValidation, RejectsUnknownTypeAndOp) {
  float x = 0;
  ReduceSpec spec;
  spec.dtype = static_cast<DataType>(12);
  EXPECT_EQ(host::reduce(&x, &x, &x, 1, spec, false, false), Result::kInvalidArgument);
  EXPECT_NE(lastError().find("data type"), std::string::npos) << lastError();
  spec.dtype = DataType::kFloat32;
  spec.op = RedOpKind::kAvg;
  EXPECT_EQ(host::reduce(&x, &x, &x, 1, spec, false, false), Result::kInvalidArgument);
  EXPECT_NE(lastError().find("Avg"), std::string::npos) << lastError();
  spec.op = RedOpKind::kSum;
  EXPECT_EQ(host::reduce(nullptr, &x, &x, 1, spec, false, false), Result::kInvalidArgument);
  EXPECT_EQ(host::reduce(nullptr, nullptr, nullptr, 0, spec, false, false), Result::kSuccess);
}

}  // namespace
}  // namespace mixccl
