// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
//
// Bit-level codecs for the small float formats (binary16, bfloat16, FP8 E4M3 and E5M2) and plain
// casts for the rest. The small formats share one description: sign bit, `eb` exponent bits with
// bias 2^(eb-1)-1, `mb` stored mantissa bits, gradual underflow. "ieee" formats reserve the top
// exponent for Inf/NaN; E4M3 (the "fn" variant) has no Inf and uses only S.1111.111 for NaN, so its
// top exponent still holds normal numbers up to 448.
#include "client_dtypes.h"

#include <math.h>
#include <string.h>

const ClDtype cl_dtypes[CL_NUM_DTYPES] = {
    {"int8", 1, 0, 1, 100},       {"uint8", 1, 0, 0, 200},       {"int32", 4, 0, 1, 1 << 20},
    {"uint32", 4, 0, 0, 1 << 20}, {"int64", 8, 0, 1, 1 << 20},   {"uint64", 8, 0, 0, 1 << 20},
    {"float16", 2, 1, 1, 2048},   {"float32", 4, 1, 1, 1 << 20}, {"float64", 8, 1, 1, 1 << 20},
    {"bfloat16", 2, 1, 1, 256},   {"float8e4m3", 1, 1, 1, 16},   {"float8e5m2", 1, 1, 1, 8},
};

typedef struct {
  int eb, mb, fn;
} MiniFloat;

static const MiniFloat kHalf = {5, 10, 0};
static const MiniFloat kBf16 = {8, 7, 0};
static const MiniFloat kE4m3 = {4, 3, 1};
static const MiniFloat kE5m2 = {5, 2, 0};

static const MiniFloat* minifloat_of(int dt) {
  switch (dt) {
    case CL_FLOAT16:
      return &kHalf;
    case CL_BFLOAT16:
      return &kBf16;
    case CL_E4M3:
      return &kE4m3;
    case CL_E5M2:
      return &kE5m2;
    default:
      return NULL;
  }
}

static int bias_of(const MiniFloat* f) { return (1 << (f->eb - 1)) - 1; }

static double mf_decode(const MiniFloat* f, uint32_t bits) {
  uint32_t mant_mask = (1u << f->mb) - 1, exp_mask = (1u << f->eb) - 1;
  int sign = (bits >> (f->eb + f->mb)) & 1;
  uint32_t be = (bits >> f->mb) & exp_mask, mant = bits & mant_mask;
  double v;
  if (!f->fn && be == exp_mask) {
    v = mant ? NAN : INFINITY;
  } else if (f->fn && be == exp_mask && mant == mant_mask) {
    v = NAN;
  } else if (be == 0) {
    v = ldexp((double)mant, 1 - bias_of(f) - f->mb);
  } else {
    v = ldexp((double)(mant | (1u << f->mb)), (int)be - bias_of(f) - f->mb);
  }
  return sign ? -v : v;
}

// Exact encoding only: returns 0 when v would need rounding, overflows, or is NaN.
static int mf_encode(const MiniFloat* f, double v, uint32_t* out) {
  if (isnan(v)) return 0;
  uint32_t sign = signbit(v) ? 1u : 0u;
  double a = fabs(v);
  uint32_t exp_mask = (1u << f->eb) - 1, mant_mask = (1u << f->mb) - 1, bits;
  int bias = bias_of(f);
  if (a == 0) {
    bits = 0;
  } else if (isinf(a)) {
    if (f->fn) return 0;
    bits = exp_mask << f->mb;
  } else {
    int e;
    frexp(a, &e);  // a in [2^(e-1), 2^e)
    int be = e - 1 + bias;
    if (be >= 1) {
      double m = ldexp(a, f->mb - (e - 1));  // in [2^mb, 2^(mb+1))
      if (m != floor(m)) return 0;
      uint32_t mant = (uint32_t)m & mant_mask;
      uint32_t max_be = f->fn ? exp_mask : exp_mask - 1;
      if ((uint32_t)be > max_be) return 0;
      if (f->fn && (uint32_t)be == exp_mask && mant == mant_mask) return 0;
      bits = ((uint32_t)be << f->mb) | mant;
    } else {
      double m = ldexp(a, bias - 1 + f->mb);
      if (m != floor(m) || m >= (double)(1u << f->mb)) return 0;
      bits = (uint32_t)m;
    }
  }
  *out = bits | (sign << (f->eb + f->mb));
  return 1;
}

static double mf_round(const MiniFloat* f, double v) {
  if (v == 0 || !isfinite(v)) return v;
  int e;
  frexp(fabs(v), &e);
  int exp = e - 1, emin = 1 - bias_of(f);
  if (exp < emin) exp = emin;  // below the normal range the spacing stays that of emin
  double q = nearbyint(ldexp(fabs(v), f->mb - exp));
  return copysign(ldexp(q, exp - f->mb), v);
}

static int is_integer_in(double v, double lo, double hi) { return v == floor(v) && v >= lo && v <= hi; }

int cl_store(int dt, void* buf, size_t i, double v) {
  char* p = (char*)buf + i * cl_dtypes[dt].size;
  switch (dt) {
    case CL_INT8: {
      if (!is_integer_in(v, -128, 127)) return 0;
      int8_t x = (int8_t)v;
      memcpy(p, &x, 1);
      return 1;
    }
    case CL_UINT8: {
      if (!is_integer_in(v, 0, 255)) return 0;
      uint8_t x = (uint8_t)v;
      memcpy(p, &x, 1);
      return 1;
    }
    case CL_INT32: {
      if (!is_integer_in(v, -2147483648.0, 2147483647.0)) return 0;
      int32_t x = (int32_t)v;
      memcpy(p, &x, 4);
      return 1;
    }
    case CL_UINT32: {
      if (!is_integer_in(v, 0, 4294967295.0)) return 0;
      uint32_t x = (uint32_t)v;
      memcpy(p, &x, 4);
      return 1;
    }
    case CL_INT64: {
      if (!is_integer_in(v, -9007199254740992.0, 9007199254740992.0)) return 0;
      int64_t x = (int64_t)v;
      memcpy(p, &x, 8);
      return 1;
    }
    case CL_UINT64: {
      if (!is_integer_in(v, 0, 9007199254740992.0)) return 0;
      uint64_t x = (uint64_t)v;
      memcpy(p, &x, 8);
      return 1;
    }
    case CL_FLOAT32: {
      float x = (float)v;
      if ((double)x != v) return 0;
      memcpy(p, &x, 4);
      return 1;
    }
    case CL_FLOAT64:
      memcpy(p, &v, 8);
      return 1;
    default: {
      uint32_t bits;
      if (!mf_encode(minifloat_of(dt), v, &bits)) return 0;
      if (cl_dtypes[dt].size == 1) {
        uint8_t b = (uint8_t)bits;
        memcpy(p, &b, 1);
      } else {
        uint16_t b = (uint16_t)bits;
        memcpy(p, &b, 2);
      }
      return 1;
    }
  }
}

double cl_load(int dt, const void* buf, size_t i) {
  const char* p = (const char*)buf + i * cl_dtypes[dt].size;
  switch (dt) {
    case CL_INT8: {
      int8_t x;
      memcpy(&x, p, 1);
      return x;
    }
    case CL_UINT8: {
      uint8_t x;
      memcpy(&x, p, 1);
      return x;
    }
    case CL_INT32: {
      int32_t x;
      memcpy(&x, p, 4);
      return x;
    }
    case CL_UINT32: {
      uint32_t x;
      memcpy(&x, p, 4);
      return x;
    }
    case CL_INT64: {
      int64_t x;
      memcpy(&x, p, 8);
      return (double)x;
    }
    case CL_UINT64: {
      uint64_t x;
      memcpy(&x, p, 8);
      return (double)x;
    }
    case CL_FLOAT32: {
      float x;
      memcpy(&x, p, 4);
      return x;
    }
    case CL_FLOAT64: {
      double x;
      memcpy(&x, p, 8);
      return x;
    }
    default:
      if (cl_dtypes[dt].size == 1) {
        uint8_t b;
        memcpy(&b, p, 1);
        return mf_decode(minifloat_of(dt), b);
      } else {
        uint16_t b;
        memcpy(&b, p, 2);
        return mf_decode(minifloat_of(dt), b);
      }
  }
}

double cl_round(int dt, double v) {
  if (dt == CL_FLOAT64) return v;
  if (dt == CL_FLOAT32) return (double)(float)v;
  const MiniFloat* f = minifloat_of(dt);
  return f ? mf_round(f, v) : nearbyint(v);
}

static double mf_step(int dt, double v, int dir) {
  const MiniFloat* f = minifloat_of(dt);
  uint32_t bits;
  if (!f || !mf_encode(f, v, &bits)) return NAN;
  if (dir < 0 && bits == 0) return -mf_decode(f, 1);
  return mf_decode(f, dir > 0 ? bits + 1 : bits - 1);
}

double cl_next_up(int dt, double v) {
  if (dt == CL_FLOAT64) return nextafter(v, INFINITY);
  if (dt == CL_FLOAT32) return (double)nextafterf((float)v, INFINITY);
  return mf_step(dt, v, +1);
}

double cl_next_down(int dt, double v) {
  if (dt == CL_FLOAT64) return nextafter(v, -INFINITY);
  if (dt == CL_FLOAT32) return (double)nextafterf((float)v, -INFINITY);
  return mf_step(dt, v, -1);
}

int cl_selftest(void) {
  static const int kSmall[] = {CL_FLOAT16, CL_BFLOAT16, CL_E4M3, CL_E5M2};
  int failures = 0;
  for (size_t k = 0; k < sizeof(kSmall) / sizeof(kSmall[0]); ++k) {
    int dt = kSmall[k];
    const MiniFloat* f = minifloat_of(dt);
    uint32_t total = 1u << (1 + f->eb + f->mb);
    for (uint32_t bits = 0; bits < total; ++bits) {
      double v = mf_decode(f, bits);
      uint32_t back = 0;
      if (isnan(v)) continue;
      if (!mf_encode(f, v, &back) || back != bits || mf_round(f, v) != v) ++failures;
    }
  }
  // Anchors that pin the formats down, not just self-consistency.
  // Each format's largest finite value (doubling it must fail) and smallest subnormal (halving it
  // must fail).
  const struct {
    int dt;
    double max, min;
  } anchors[] = {
      {CL_FLOAT16, 65504, 0x1p-24},
      {CL_BFLOAT16, 0x1.fep127, 0x1p-133},
      {CL_E4M3, 448, 0x1p-9},
      {CL_E5M2, 57344, 0x1p-16},
  };
  for (size_t k = 0; k < sizeof(anchors) / sizeof(anchors[0]); ++k) {
    unsigned char b[8];
    int dt = anchors[k].dt;
    if (!cl_store(dt, b, 0, anchors[k].max) || cl_load(dt, b, 0) != anchors[k].max) ++failures;
    if (!cl_store(dt, b, 0, anchors[k].min) || cl_load(dt, b, 0) != anchors[k].min) ++failures;
    if (cl_store(dt, b, 0, anchors[k].max * 2) || cl_store(dt, b, 0, anchors[k].min / 2)) ++failures;
  }
  unsigned char b[2];
  if (cl_store(CL_E4M3, b, 0, 480) || cl_store(CL_E5M2, b, 0, 9) || cl_store(CL_E4M3, b, 0, 17)) ++failures;
  return failures;
}

int cl_dtype_by_name(const char* name) {
  for (int i = 0; i < CL_NUM_DTYPES; ++i)
    if (strcmp(name, cl_dtypes[i].name) == 0) return i;
  static const struct {
    const char* alias;
    int dt;
  } aliases[] = {
      {"char", CL_INT8},      {"int", CL_INT32},     {"half", CL_FLOAT16}, {"float", CL_FLOAT32},
      {"double", CL_FLOAT64}, {"bf16", CL_BFLOAT16}, {"e4m3", CL_E4M3},    {"e5m2", CL_E5M2},
  };
  for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); ++i)
    if (strcmp(name, aliases[i].alias) == 0) return aliases[i].dt;
  return -1;
}
