// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// The typed reduction loops, compiled once per ISA variant. Not a normal header: a variant's .cc
// file includes every header this one needs, then (for a non-baseline ISA) switches the target
// with a pragma, defines MIXCCL_KERNEL_NS to its namespace name and includes this file. All code
// here lives in that namespace, so the variants never share a symbol and the linker cannot pick an
// AVX2-compiled copy for a caller on an older CPU.
//
// Shape: run() switches once on the data type, then on (op, a present, pre, post) to one
// instantiation of loop<>(), whose body the compiler vectorises. Formats describe how an element
// widens to the type the arithmetic runs in (Compute) and narrows back.
//
// Optional hooks the including file may enable:
//   MIXCCL_KERNEL_F16C  half loops process 8 elements at a time with the F16C instructions.

#ifndef MIXCCL_KERNEL_NS
#error "define MIXCCL_KERNEL_NS before including reduce_kernels_impl.h"
#endif

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "src/device/host/float_formats.h"
#include "src/device/host/reduce_kernels.h"

namespace mixccl::host::MIXCCL_KERNEL_NS {
namespace {

// ---- formats ---------------------------------------------------------------------------------

// storeResult() is store() for a result of arithmetic: a NaN is stored as the type's canonical NaN
// (PROTOCOL.md, "Arithmetic": positive, quiet bit only), whatever NaN the hardware made (x86 makes
// a negative one for inf - inf, NVIDIA GPUs 0x7fffffff) or which operand's NaN it passed on, so
// the stored bits do not depend on the vendor. Selected with bit masks, not `?:`, so the loops
// stay vectorised (float_formats.h explains why).
template <typename S>
MIXCCL_FMT_INLINE S canonicalIfNan(float v, uint32_t canonical, S stored) {
  const bool nan = (fmt16::floatBits(v) & 0x7fffffffu) > 0x7f800000u;
  return static_cast<S>(fmt16::detail::pick(nan, canonical, stored));
}

// Integers compute in their own type; add and mul go through the unsigned type so overflow wraps
// instead of being undefined.
template <typename T>
struct IntFormat {
  using Storage = T;
  using Compute = T;
  using Unsigned = std::make_unsigned_t<T>;
  static constexpr bool kFloat = false;
  MIXCCL_FMT_INLINE static T load(T v) { return v; }
  MIXCCL_FMT_INLINE static T store(T v) { return v; }
  MIXCCL_FMT_INLINE static T round(T v) { return v; }
  MIXCCL_FMT_INLINE static T storeResult(T v) { return v; }
  static T add(T x, T y) { return static_cast<T>(static_cast<Unsigned>(x) + static_cast<Unsigned>(y)); }
  static T mul(T x, T y) { return static_cast<T>(static_cast<Unsigned>(x) * static_cast<Unsigned>(y)); }
};

// Floating formats whose arithmetic type is themselves: rounding is implicit in every operation.
template <typename T>
struct NativeFloatFormat {
  using Storage = T;
  using Compute = T;
  static constexpr bool kFloat = true;
  // An integer flag from the bits: GCC vectorises an OR of these (not of float compares).
  using NanFlag = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  MIXCCL_FMT_INLINE static NanFlag isNanBits(T v) {
    const NanFlag u = std::bit_cast<NanFlag>(v);
    constexpr NanFlag kAbs = ~NanFlag{0} >> 1;
    constexpr NanFlag kInf = sizeof(T) == 4 ? NanFlag(0x7f800000u) : NanFlag(0x7ff0000000000000ull);
    return static_cast<NanFlag>((u & kAbs) > kInf);
  }
  MIXCCL_FMT_INLINE static T load(T v) { return v; }
  MIXCCL_FMT_INLINE static T store(T v) { return v; }
  MIXCCL_FMT_INLINE static T round(T v) { return v; }
  MIXCCL_FMT_INLINE static T storeResult(T v) {
    // Used by loop()'s fix-up pass only, so a plain `?:` is fine here.
    T canonical;
    if constexpr (sizeof(T) == 4) {
      canonical = std::bit_cast<T>(uint32_t{0x7fc00000u});
    } else {
      canonical = std::bit_cast<T>(uint64_t{0x7ff8000000000000ull});
    }
    return v != v ? canonical : v;
  }
};

// Narrow formats computed in float; round() narrows and widens again, so the value is exactly what
// a store followed by a load would see.
struct HalfFormat {
  using Storage = uint16_t;
  using Compute = float;
  static constexpr bool kFloat = true;
  MIXCCL_FMT_INLINE static float load(uint16_t v) { return fmt16::halfToFloat(v); }
  MIXCCL_FMT_INLINE static uint16_t store(float v) { return fmt16::floatToHalf(v); }
  MIXCCL_FMT_INLINE static float round(float v) { return load(store(v)); }
  MIXCCL_FMT_INLINE static uint16_t storeResult(float v) { return canonicalIfNan(v, 0x7e00u, store(v)); }
};

struct Bf16Format {
  using Storage = uint16_t;
  using Compute = float;
  static constexpr bool kFloat = true;
  MIXCCL_FMT_INLINE static float load(uint16_t v) { return fmt16::bf16ToFloat(v); }
  MIXCCL_FMT_INLINE static uint16_t store(float v) { return fmt16::floatToBf16(v); }
  MIXCCL_FMT_INLINE static float round(float v) { return load(store(v)); }
  MIXCCL_FMT_INLINE static uint16_t storeResult(float v) { return canonicalIfNan(v, 0x7fc0u, store(v)); }
};

struct E4m3Format {
  using Storage = uint8_t;
  using Compute = float;
  static constexpr bool kFloat = true;
  MIXCCL_FMT_INLINE static float load(uint8_t v) { return fmt16::fp8e4m3ToFloat(v); }
  MIXCCL_FMT_INLINE static uint8_t store(float v) { return fmt16::floatToFp8e4m3(v, fmt16::Fp8Overflow::kSaturate); }
  MIXCCL_FMT_INLINE static float round(float v) { return load(store(v)); }
  MIXCCL_FMT_INLINE static uint8_t storeResult(float v) { return canonicalIfNan(v, 0x7fu, store(v)); }
};

struct E5m2Format {
  using Storage = uint8_t;
  using Compute = float;
  static constexpr bool kFloat = true;
  MIXCCL_FMT_INLINE static float load(uint8_t v) { return fmt16::fp8e5m2ToFloat(v); }
  MIXCCL_FMT_INLINE static uint8_t store(float v) { return fmt16::floatToFp8e5m2(v, fmt16::Fp8Overflow::kSaturate); }
  MIXCCL_FMT_INLINE static float round(float v) { return load(store(v)); }
  MIXCCL_FMT_INLINE static uint8_t storeResult(float v) { return canonicalIfNan(v, 0x7eu, store(v)); }
};

// ---- arithmetic --------------------------------------------------------------------------------

template <class F>
MIXCCL_FMT_INLINE typename F::Compute mulOf(typename F::Compute x, typename F::Compute y) {
  if constexpr (F::kFloat) {
    return x * y;
  } else {
    return F::mul(x, y);
  }
}

// x OP y with x = a[i] and y = pre(b[i]). max/min: a NaN operand is ignored, equal operands give y
// (see reduce_kernels.h). `x > y ? x : y` is exactly what x86 MAXPS computes, so it vectorises.
template <class F, RedOpKind kOp>
MIXCCL_FMT_INLINE typename F::Compute combine(typename F::Compute x, typename F::Compute y) {
  if constexpr (kOp == RedOpKind::kSum) {
    if constexpr (F::kFloat) {
      return x + y;
    } else {
      return F::add(x, y);
    }
  } else if constexpr (kOp == RedOpKind::kProd) {
    return mulOf<F>(x, y);
  } else if constexpr (kOp == RedOpKind::kMax) {
    typename F::Compute r = x > y ? x : y;
    if constexpr (F::kFloat) r = (y != y) ? x : r;
    return r;
  } else {
    typename F::Compute r = x < y ? x : y;
    if constexpr (F::kFloat) r = (y != y) ? x : r;
    return r;
  }
}

// How post() divides. Floats divide in their arithmetic type. Integers up to 32 bits with a small
// divisor divide in double and truncate, which vectorises and is exact: for |x| < 2^32 and
// d <= 2^20 the double quotient's error (< 2^-21) is smaller than the distance (>= 1/d) from a
// non-integer quotient to the next integer, and integer quotients are exact. Everything else uses
// integer division.
enum class Post { kNone, kDivFloat, kDivViaDouble, kDivInt };
constexpr uint64_t kMaxDivisorViaDouble = 1ull << 20;

template <class F>
struct Divisor {
  typename F::Compute compute;
  double asDouble;
  uint64_t asInt;
  explicit Divisor(uint64_t d)
      : compute(static_cast<typename F::Compute>(d)), asDouble(static_cast<double>(d)), asInt(d) {}
};

template <class F, Post kPost>
MIXCCL_FMT_INLINE typename F::Compute divide(typename F::Compute x, const Divisor<F>& d) {
  using C = typename F::Compute;
  if constexpr (kPost == Post::kDivFloat) {
    return x / d.compute;
  } else if constexpr (kPost == Post::kDivViaDouble) {
    // The quotient fits int32: |x| < 2^32 and d >= 2 (a divisor of 1 never gets here).
    return static_cast<C>(static_cast<int32_t>(static_cast<double>(x) / d.asDouble));
  } else if constexpr (std::is_signed_v<C>) {
    return static_cast<C>(static_cast<int64_t>(x) / static_cast<int64_t>(d.asInt));
  } else {
    return static_cast<C>(static_cast<uint64_t>(x) / d.asInt);
  }
}

// ---- optional F16C blocks --------------------------------------------------------------------

#if defined(MIXCCL_KERNEL_F16C)
inline __m256 loadHalf8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m128i narrowHalf8(__m256 v) { return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT); }
inline __m256 roundHalf8(__m256 v) { return _mm256_cvtph_ps(narrowHalf8(v)); }

template <RedOpKind kOp>
inline __m256 combine8(__m256 x, __m256 y) {
  if constexpr (kOp == RedOpKind::kSum) {
    return _mm256_add_ps(x, y);
  } else if constexpr (kOp == RedOpKind::kProd) {
    return _mm256_mul_ps(x, y);
  } else {
    // MAXPS/MINPS return the second operand when either is NaN; put x back where y is NaN.
    __m256 r = kOp == RedOpKind::kMax ? _mm256_max_ps(x, y) : _mm256_min_ps(x, y);
    return _mm256_blendv_ps(r, x, _mm256_cmp_ps(y, y, _CMP_UNORD_Q));
  }
}

// Processes the largest multiple of 8 elements; returns how many it did. Each block loads before
// it stores and touches only its own 8 indices, so dst == a or dst == b is fine.
template <RedOpKind kOp, bool kHasA, bool kPre, Post kPost>
size_t halfBlocks(const KernelArgs& k, float scalar, float divisor) {
  auto* dst = static_cast<uint16_t*>(k.dst);
  const auto* a = static_cast<const uint16_t*>(k.a);
  const auto* b = static_cast<const uint16_t*>(k.b);
  const __m256 s = _mm256_set1_ps(scalar);
  const __m256 d = _mm256_set1_ps(divisor);
  const size_t end = k.count & ~static_cast<size_t>(7);
  for (size_t i = 0; i < end; i += 8) {
    __m256 y = loadHalf8(b + i);
    if constexpr (kPre) {
      y = _mm256_mul_ps(y, s);
      if constexpr (kHasA || kPost != Post::kNone) y = roundHalf8(y);
    }
    if constexpr (kHasA) {
      y = combine8<kOp>(loadHalf8(a + i), y);
      if constexpr (kPost != Post::kNone) y = roundHalf8(y);
    }
    if constexpr (kPost != Post::kNone) y = _mm256_div_ps(y, d);
    if constexpr (kHasA || kPre || kPost != Post::kNone) {
      // A NaN becomes 0x7fc00000, which narrows to the canonical half NaN 0x7e00 (storeResult).
      const __m256 canonical = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000));
      y = _mm256_blendv_ps(y, canonical, _mm256_cmp_ps(y, y, _CMP_UNORD_Q));
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), narrowHalf8(y));
  }
  return end;
}
#endif

// ---- the loop ----------------------------------------------------------------------------------

template <class F, RedOpKind kOp, bool kHasA, bool kPre, Post kPost>
void loop(const KernelArgs& k) {
  using S = typename F::Storage;
  using C = typename F::Compute;
  S* dst = static_cast<S*>(k.dst);
  const S* a = static_cast<const S*>(k.a);
  const S* b = static_cast<const S*>(k.b);
  const size_t n = k.count;
  S scalarRaw;
  std::memcpy(&scalarRaw, k.scalar, sizeof(S));
  const C scalar = F::load(scalarRaw);
  const Divisor<F> div(k.divisor);
  // float and double store what they compute (Storage == Compute); see the fix-up pass below.
  constexpr bool kNative = F::kFloat && std::is_same_v<S, C>;
  std::conditional_t<sizeof(S) == 8, uint64_t, uint32_t> nanSeen = 0;
  size_t i = 0;
#if defined(MIXCCL_KERNEL_F16C)
  if constexpr (std::is_same_v<F, HalfFormat>) i = halfBlocks<kOp, kHasA, kPre, kPost>(k, scalar, div.compute);
#endif
  for (; i < n; ++i) {
    C y = F::load(b[i]);
    if constexpr (kPre) {
      y = mulOf<F>(y, scalar);
      // The final store rounds anyway; round here only when another step follows.
      if constexpr (kHasA || kPost != Post::kNone) y = F::round(y);
    }
    if constexpr (kHasA) {
      y = combine<F, kOp>(F::load(a[i]), y);
      if constexpr (kPost != Post::kNone) y = F::round(y);
    }
    if constexpr (kPost != Post::kNone) y = divide<F, kPost>(y, div);
    // Only a result of arithmetic is made canonical; a plain copy (reduce() never gets here with
    // none of a, pre and post) would keep the bits it was given.
    if constexpr (!(kHasA || kPre || kPost != Post::kNone)) {
      dst[i] = F::store(y);
    } else if constexpr (kNative) {
      nanSeen |= F::isNanBits(y);
      dst[i] = y;
    } else {
      dst[i] = F::storeResult(y);
    }
  }
  // float and double: a NaN is made canonical after the loop, in the rare call that made one.
  // Selecting the canonical NaN per element (compare and blend before every store) cost 9 % of a
  // 2-rank in-place all-reduce of 256 MiB on a 2-core Xeon; this OR of integer NaN tests about 4 %
  // (medians of 8 interleaved rounds, inside their spread). An OR of float compares left the loop
  // scalar (-35 %).
  if constexpr (kNative) {
    if (nanSeen) {
      for (size_t j = 0; j < n; ++j) dst[j] = F::storeResult(dst[j]);
    }
  }
}

// ---- dispatch: one switch per call -------------------------------------------------------------

template <class F, bool kHasA, bool kPre, Post kPost>
void byOp(const KernelArgs& k) {
  if constexpr (!kHasA) {
    loop<F, RedOpKind::kSum, false, kPre, kPost>(k);  // no second operand: the op plays no part
  } else {
    switch (k.op) {
      case RedOpKind::kSum:
        return loop<F, RedOpKind::kSum, true, kPre, kPost>(k);
      case RedOpKind::kProd:
        return loop<F, RedOpKind::kProd, true, kPre, kPost>(k);
      case RedOpKind::kMax:
        return loop<F, RedOpKind::kMax, true, kPre, kPost>(k);
      default:
        return loop<F, RedOpKind::kMin, true, kPre, kPost>(k);
    }
  }
}

template <class F, bool kHasA, bool kPre>
void byPost(const KernelArgs& k) {
  // A divisor of 1 changes nothing (and the via-double path relies on d >= 2).
  if (!k.post || k.divisor == 1) return byOp<F, kHasA, kPre, Post::kNone>(k);
  if constexpr (F::kFloat) {
    byOp<F, kHasA, kPre, Post::kDivFloat>(k);
  } else if constexpr (sizeof(typename F::Storage) <= 4) {
    if (k.divisor <= kMaxDivisorViaDouble) return byOp<F, kHasA, kPre, Post::kDivViaDouble>(k);
    byOp<F, kHasA, kPre, Post::kDivInt>(k);
  } else {
    byOp<F, kHasA, kPre, Post::kDivInt>(k);
  }
}

template <class F>
void byFormat(const KernelArgs& k) {
  const bool hasA = k.a != nullptr;
  if (hasA) {
    k.pre ? byPost<F, true, true>(k) : byPost<F, true, false>(k);
  } else {
    k.pre ? byPost<F, false, true>(k) : byPost<F, false, false>(k);
  }
}

}  // namespace

void run(DataType dtype, const KernelArgs& k) {
  switch (dtype) {
    case DataType::kInt8:
      return byFormat<IntFormat<int8_t>>(k);
    case DataType::kUint8:
      return byFormat<IntFormat<uint8_t>>(k);
    case DataType::kInt32:
      return byFormat<IntFormat<int32_t>>(k);
    case DataType::kUint32:
      return byFormat<IntFormat<uint32_t>>(k);
    case DataType::kInt64:
      return byFormat<IntFormat<int64_t>>(k);
    case DataType::kUint64:
      return byFormat<IntFormat<uint64_t>>(k);
    case DataType::kFloat16:
      return byFormat<HalfFormat>(k);
    case DataType::kFloat32:
      return byFormat<NativeFloatFormat<float>>(k);
    case DataType::kFloat64:
      return byFormat<NativeFloatFormat<double>>(k);
    case DataType::kBfloat16:
      return byFormat<Bf16Format>(k);
    case DataType::kFloat8e4m3:
      return byFormat<E4m3Format>(k);
    case DataType::kFloat8e5m2:
      return byFormat<E5m2Format>(k);
  }
}

}  // namespace mixccl::host::MIXCCL_KERNEL_NS
