// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
//
// Element codecs for the acceptance client (client.c): every NCCL datatype is read and written as
// a double. The client only ever stores values that the element type represents exactly, so the
// encoders refuse (return 0) instead of rounding; cl_round() is the one rounding entry point and
// is used only to predict what a 1/n scalar becomes in a given format.
//
// Deliberately independent of include/nccl.h and NVIDIA's headers: datatypes are NCCL's numeric
// enum values (0..11), which the ABI fixes.
#ifndef MIXCCL_TESTS_ABI_CLIENT_DTYPES_H_
#define MIXCCL_TESTS_ABI_CLIENT_DTYPES_H_

#include <stddef.h>
#include <stdint.h>

enum {
  CL_INT8 = 0,
  CL_UINT8,
  CL_INT32,
  CL_UINT32,
  CL_INT64,
  CL_UINT64,
  CL_FLOAT16,
  CL_FLOAT32,
  CL_FLOAT64,
  CL_BFLOAT16,
  CL_E4M3,
  CL_E5M2,
  CL_NUM_DTYPES
};

typedef struct {
  const char* name;  // NCCL spelling without the prefix, e.g. "float16"
  size_t size;       // bytes per element
  int is_float;
  int is_signed;  // floats count as signed
  // Largest B such that every integer in [-B, B] (or [0, B] when unsigned) is exact; capped so the
  // client's sums stay far from any integer overflow.
  double exact_int;
} ClDtype;

extern const ClDtype cl_dtypes[CL_NUM_DTYPES];

// Store v at element i of buf; returns 0 (and stores nothing) if v is not exactly representable.
int cl_store(int dt, void* buf, size_t i, double v);
// Element i of buf as a double (NaN/Inf decode as such).
double cl_load(int dt, const void* buf, size_t i);
// v rounded to the nearest value of the format (ties to even); float formats only.
double cl_round(int dt, double v);
// The representable neighbours of a positive representable v in a float format.
double cl_next_up(int dt, double v);
double cl_next_down(int dt, double v);
// Exhaustive round trip of the 8- and 16-bit formats; returns the number of failures.
int cl_selftest(void);
int cl_dtype_by_name(const char* name);  // -1 if unknown

#endif  // MIXCCL_TESTS_ABI_CLIENT_DTYPES_H_
