// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// The OpenCL C source of the backend's kernels, embedded so the library needs no file at run time.
// It is built once per process (opencl_runtime.cc) with no fast-math option and FP_CONTRACT OFF.
//
// Bit-exactness with the host backend (src/device/host/reduce_kernels_impl.h, float_formats.h) is
// the point of this file, so each piece mirrors its host counterpart step for step:
//  - half, bfloat16 and fp8 are stored as ushort/uchar (no cl_khr_fp16 needed) and converted with
//    the same bit manipulation as float_formats.h; every arithmetic step runs in float and is
//    rounded back to the narrow type exactly where the host loop rounds (only when another step
//    follows; the store rounds last).
//  - a result that is a NaN is stored as the canonical NaN (canon_*): positive, quiet bit only, as
//    the host stores it; devices differ in the NaN an invalid operation makes (NVIDIA: 0x7fffffff).
//  - integers add and multiply through their unsigned type (wrap), divide with truncation in
//    64-bit arithmetic (what the host's via-double and integer paths both compute).
//  - max/min: x where x > y or y is NaN, else y (equal operands give y, signed zeros too); the
//    choice is a bit mask, so the compiler cannot turn it into fmax/fmin, whose choice between
//    +0 and -0 is unspecified.
//  - float division of post() is correctly rounded: the build passes
//    -cl-fp32-correctly-rounded-divide-sqrt, or defines MIXCCL_DIV_VIA_DOUBLE when the device
//    lacks that option (a double quotient rounded to float is correctly rounded: 53 >= 2*24+2).
//
// Operands arrive as a global pointer (an SVM pointer or a cl_mem) plus a byte offset, so one
// kernel serves SVM, registered host memory (cl_mem over it) and offsets into either. The host
// side guarantees element alignment of base + offset.

#include "src/device/opencl/opencl_kernels.h"

namespace mixccl::ocl {

const char* const kKernelSource = R"CLC(
#pragma OPENCL FP_CONTRACT OFF
#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

/* ---- narrow float formats (float_formats.h) ---- */

inline uint narrowMagnitude(uint x, uint mant, uint bias) {
  const uint drop = 23u - mant;
  const uint minNormal = (127u + 1u - bias) << 23;
  const int subExp = 1 - (int)bias - (int)mant;
  const uint magic = (uint)(subExp + 23 + 127) << 23;
  const uint normal = (x + ((1u << (drop - 1u)) - 1u) + ((x >> drop) & 1u) - ((127u - bias) << 23)) >> drop;
  const uint sub = as_uint(as_float(x) + as_float(magic)) - magic;
  return x >= minNormal ? normal : sub;
}

inline float halfToFloat(ushort h) {
  const uint sign = (uint)(h & 0x8000u) << 16;
  const uint em = h & 0x7fffu;
  const uint mant = h & 0x3ffu;
  const uint normal = (em << 13) + (112u << 23);
  const uint special = (em << 13) | 0x7f800000u | ((uint)(mant != 0u) << 22);
  const uint sub = as_uint((float)em * 0x1p-24f);
  return as_float(sign | (em >= 0x7c00u ? special : (em >= 0x0400u ? normal : sub)));
}

inline ushort floatToHalf(float f) {
  const uint bits = as_uint(f);
  const uint sign = (bits >> 16) & 0x8000u;
  const uint x = bits & 0x7fffffffu;
  const uint nan = 0x7e00u | ((x >> 13) & 0x3ffu);
  const uint r = x > 0x7f800000u ? nan : (x >= 0x477ff000u ? 0x7c00u : narrowMagnitude(x, 10u, 15u));
  return (ushort)(sign | r);
}

inline float bf16ToFloat(ushort h) { return as_float((uint)h << 16); }

inline ushort floatToBf16(float f) {
  const uint x = as_uint(f);
  const uint rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  const uint nan = (x >> 16) | 0x0040u;
  return (ushort)((x & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

inline float e4m3ToFloat(uchar v) {
  const uint sign = (uint)(v & 0x80u) << 24;
  const uint em = v & 0x7fu;
  const uint normal = (em << 20) + (120u << 23);
  const uint sub = as_uint((float)em * 0x1p-9f);
  return as_float(sign | (em == 0x7fu ? 0x7fc00000u : (em >= 0x08u ? normal : sub)));
}

/* Saturating (Fp8Overflow::kSaturate), as the host kernels store. */
inline uchar floatToE4m3(float f) {
  const uint bits = as_uint(f);
  const uint sign = (bits >> 24) & 0x80u;
  const uint x = bits & 0x7fffffffu;
  const uint r = x > 0x7f800000u ? 0x7fu : (x > 0x43e80000u ? 0x7eu : narrowMagnitude(x, 3u, 7u));
  return (uchar)(sign | r);
}

inline float e5m2ToFloat(uchar v) { return halfToFloat((ushort)((uint)v << 8)); }

inline uchar floatToE5m2(float f) {
  const uint bits = as_uint(f);
  const uint sign = (bits >> 24) & 0x80u;
  const uint x = bits & 0x7fffffffu;
  const uint r = x > 0x7f800000u ? 0x7eu : (x >= 0x47700000u ? 0x7bu : narrowMagnitude(x, 2u, 15u));
  return (uchar)(sign | r);
}

/* ---- per-type pieces: LOAD widens the stored element, STORE narrows, SCAL decodes the scalar ---- */

#define ID(v) (v)

#ifdef MIXCCL_DIV_VIA_DOUBLE
#define DIVF32(x, bits) ((float)((double)(x) / (double)as_float((uint)(bits))))
#else
#define DIVF32(x, bits) ((x) / as_float((uint)(bits)))
#endif

/* Integer arithmetic wraps: computed in the unsigned type, truncated back. */
#define INT_OPS(S, U, W)                                                               \
  inline S add_##S(S x, S y) { return (S)((U)x + (U)y); }                              \
  inline S mul_##S(S x, S y) { return (S)((U)x * (U)y); }                              \
  inline S div_##S(S x, ulong d, ulong bits) { return (S)((W)x / (W)d); }             \
  inline S scal_##S(ulong bits) { return (S)bits; }                                    \
  inline int isnan_##S(S x) { return 0; }                                              \
  inline S canon_##S(S x) { return x; }                                                \
  inline S sel_##S(int c, S x, S y) { return c ? x : y; }

INT_OPS(char, uchar, long)
INT_OPS(uchar, uchar, ulong)
INT_OPS(int, uint, long)
INT_OPS(uint, uint, ulong)
INT_OPS(long, ulong, long)
INT_OPS(ulong, ulong, ulong)

/* max/min pick an operand by mask, not with `?:` on floating values: the compiler may turn that
 * pattern into maxnum/minnum, which may return either zero for +0 and -0, where the host returns
 * the second operand. */
inline float selBits32(int c, float x, float y) {
  const uint m = 0u - (uint)(c != 0);
  return as_float((as_uint(x) & m) | (as_uint(y) & ~m));
}

#define FLOAT_OPS(N)                                                                   \
  inline float add_##N(float x, float y) { return x + y; }                             \
  inline float mul_##N(float x, float y) { return x * y; }                             \
  inline float div_##N(float x, ulong d, ulong bits) { return DIVF32(x, bits); }       \
  inline int isnan_##N(float x) { return x != x; }                                    \
  inline float canon_##N(float x) { return x != x ? as_float(0x7fc00000u) : x; }       \
  inline float sel_##N(int c, float x, float y) { return selBits32(c, x, y); }
FLOAT_OPS(f32)
FLOAT_OPS(f16)
FLOAT_OPS(bf16)
FLOAT_OPS(e4m3)
FLOAT_OPS(e5m2)
inline float scal_f32(ulong bits) { return as_float((uint)bits); }
inline ushort scal_f16(ulong bits) { return (ushort)bits; }
inline ushort scal_bf16(ulong bits) { return (ushort)bits; }
inline uchar scal_e4m3(ulong bits) { return (uchar)bits; }
inline uchar scal_e5m2(ulong bits) { return (uchar)bits; }

/* One kernel per (type, OP, FLAGS), both fixed at compile time. FLAGS: bit 0 = a present, bit 1 =
 * pre(), bit 2 = post(); OP: 0 sum, 1 prod, 2 max, 3 min. A run-time op or flags (uniform
 * branches) or an index check keep POCL from vectorising the work-group loop (2.9 against 12.4
 * GB/s for a float sum, 0.5 against 5.0 for half), so none is here: the host launches exactly n
 * work-items (kernel_launch.cc). The opArg and flags arguments repeat OP and FLAGS and are not
 * read. */
#define REDUCE_VARIANT(NAME, N, S, C, LOAD, STORE, OP, FLAGS)                                             \
  kernel void NAME(global S* dst, ulong dOff, global const S* a, ulong aOff, global const S* b, ulong bOff, \
                   ulong n, int opArg, int flags, ulong scalarBits, ulong divisor, ulong divBits,         \
                   global S* dst2, ulong d2Off, int dual) {                                              \
    const size_t i = get_global_id(0);                                                                   \
    const int op = OP;                                                                                   \
    global S* d = (global S*)((global uchar*)dst + dOff);                                                \
    global const S* pa = (global const S*)((global const uchar*)a + aOff);                              \
    global const S* pb = (global const S*)((global const uchar*)b + bOff);                              \
    const int hasA = (FLAGS & 1) != 0, pre = (FLAGS & 2) != 0, post = (FLAGS & 4) != 0;                  \
    C y = LOAD(pb[i]);                                                                                   \
    if (pre) {                                                                                           \
      y = mul_##N(y, LOAD(scal_##N(scalarBits)));                                                        \
      if (hasA || post) y = LOAD(STORE(y));                                                              \
    }                                                                                                    \
    if (hasA) {                                                                                          \
      const C x = LOAD(pa[i]);                                                                           \
      if (op == 0) {                                                                                     \
        y = add_##N(x, y);                                                                               \
      } else if (op == 1) {                                                                              \
        y = mul_##N(x, y);                                                                               \
      } else if (op == 2) {                                                                              \
        y = sel_##N(x > y || isnan_##N(y), x, y);                                                        \
      } else {                                                                                           \
        y = sel_##N(x < y || isnan_##N(y), x, y);                                                        \
      }                                                                                                  \
      if (post) y = LOAD(STORE(y));                                                                      \
    }                                                                                                    \
    if (post) y = div_##N(y, divisor, divBits);                                                          \
    if (FLAGS != 0) y = canon_##N(y);                                                                    \
    const S out = STORE(y);                                                                              \
    d[i] = out;                                                                                          \
    if (dual) ((global S*)((global uchar*)dst2 + d2Off))[i] = out;                                      \
  }

#define REDUCE_OP(NAME, N, S, C, LOAD, STORE, OP)                \
  REDUCE_VARIANT(NAME##_##OP##_0, N, S, C, LOAD, STORE, OP, 0)    \
  REDUCE_VARIANT(NAME##_##OP##_1, N, S, C, LOAD, STORE, OP, 1)    \
  REDUCE_VARIANT(NAME##_##OP##_2, N, S, C, LOAD, STORE, OP, 2)    \
  REDUCE_VARIANT(NAME##_##OP##_3, N, S, C, LOAD, STORE, OP, 3)    \
  REDUCE_VARIANT(NAME##_##OP##_4, N, S, C, LOAD, STORE, OP, 4)    \
  REDUCE_VARIANT(NAME##_##OP##_5, N, S, C, LOAD, STORE, OP, 5)    \
  REDUCE_VARIANT(NAME##_##OP##_6, N, S, C, LOAD, STORE, OP, 6)    \
  REDUCE_VARIANT(NAME##_##OP##_7, N, S, C, LOAD, STORE, OP, 7)

#define REDUCE_KERNEL(NAME, N, S, C, LOAD, STORE) \
  REDUCE_OP(NAME, N, S, C, LOAD, STORE, 0)        \
  REDUCE_OP(NAME, N, S, C, LOAD, STORE, 1)        \
  REDUCE_OP(NAME, N, S, C, LOAD, STORE, 2)        \
  REDUCE_OP(NAME, N, S, C, LOAD, STORE, 3)

REDUCE_KERNEL(reduce_int8, char, char, char, ID, ID)
REDUCE_KERNEL(reduce_uint8, uchar, uchar, uchar, ID, ID)
REDUCE_KERNEL(reduce_int32, int, int, int, ID, ID)
REDUCE_KERNEL(reduce_uint32, uint, uint, uint, ID, ID)
REDUCE_KERNEL(reduce_int64, long, long, long, ID, ID)
REDUCE_KERNEL(reduce_uint64, ulong, ulong, ulong, ID, ID)
REDUCE_KERNEL(reduce_float16, f16, ushort, float, halfToFloat, floatToHalf)
REDUCE_KERNEL(reduce_float32, f32, float, float, ID, ID)
REDUCE_KERNEL(reduce_bfloat16, bf16, ushort, float, bf16ToFloat, floatToBf16)
REDUCE_KERNEL(reduce_float8e4m3, e4m3, uchar, float, e4m3ToFloat, floatToE4m3)
REDUCE_KERNEL(reduce_float8e5m2, e5m2, uchar, float, e5m2ToFloat, floatToE5m2)

#ifdef cl_khr_fp64
inline double add_f64(double x, double y) { return x + y; }
inline double mul_f64(double x, double y) { return x * y; }
inline double canon_f64(double x) { return x != x ? as_double(0x7ff8000000000000ul) : x; }
inline double div_f64(double x, ulong d, ulong bits) { return x / as_double(bits); }
inline double scal_f64(ulong bits) { return as_double(bits); }
inline int isnan_f64(double x) { return x != x; }
inline double sel_f64(int c, double x, double y) {
  const ulong m = 0ul - (ulong)(c != 0);
  return as_double((as_ulong(x) & m) | (as_ulong(y) & ~m));
}
REDUCE_KERNEL(reduce_float64, f64, double, double, ID, ID)
#endif

/* Byte copy between any two operands (SVM or cl_mem + offset); ranges never overlap here. Launched
 * with exactly n work-items, like the reductions. */
kernel void copy_bytes(global uchar* dst, ulong dOff, global const uchar* src, ulong sOff, ulong n) {
  const size_t i = get_global_id(0);
  dst[dOff + i] = src[sOff + i];
}
)CLC";

const char* const kReduceKernelNames[kNumDataTypes] = {
    "reduce_int8",    "reduce_uint8",   "reduce_int32",   "reduce_uint32",   "reduce_int64",      "reduce_uint64",
    "reduce_float16", "reduce_float32", "reduce_float64", "reduce_bfloat16", "reduce_float8e4m3", "reduce_float8e5m2",
};

const char* const kCopyKernelName = "copy_bytes";

namespace {
constexpr size_t kBodyMultiple = 64;
constexpr size_t kWideGroup = 256;
static_assert(launchItems(8) % kWideGroup == 0, "a full part is a whole number of wide work-groups");
}  // namespace

LaunchPart nextLaunch(size_t n, size_t done, size_t full) {
  const size_t left = n - done;
  if (left >= full) return LaunchPart{done, full, kWideGroup};
  const size_t body = left / kBodyMultiple * kBodyMultiple;
  if (body > 0) return LaunchPart{done, body, body % kWideGroup == 0 ? kWideGroup : kBodyMultiple};
  return LaunchPart{done, left, 1};
}

size_t widestLaunch(size_t local, size_t full) { return local == 1 ? kBodyMultiple - 1 : full; }

}  // namespace mixccl::ocl
