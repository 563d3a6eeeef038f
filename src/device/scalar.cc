// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// encodeScalar (declared in device_backend.h): one host-side value written as one element of a
// data type, e.g. the 1/nranks multiplier of Avg. Independent of any backend.

#include <cmath>
#include <cstring>
#include <limits>

#include "src/device/device_backend.h"
#include "src/device/host/float_formats.h"
#include "src/device/host/fp_env.h"

namespace mixccl {
namespace {

// Truncates toward zero and clamps to T's range (a double outside it would be undefined to cast);
// NaN becomes 0.
template <typename T>
void putInt(double v, uint8_t* out) {
  T r = 0;
  if (!std::isnan(v)) {
    const double t = std::trunc(v);
    if (t <= static_cast<double>(std::numeric_limits<T>::min())) {
      r = std::numeric_limits<T>::min();
    } else if (t >= static_cast<double>(std::numeric_limits<T>::max())) {
      // max() of a 64-bit type is not representable in double; the comparison rounds it up to 2^63
      // or 2^64, so anything at or above that clamps.
      r = std::numeric_limits<T>::max();
    } else {
      r = static_cast<T>(t);
    }
  }
  std::memcpy(out, &r, sizeof(T));
}

template <typename T>
void put(T v, uint8_t* out) {
  std::memcpy(out, &v, sizeof(T));
}

}  // namespace

void encodeReciprocal(DataType dtype, uint64_t n, uint8_t out[8]) {
  // The compiler takes arithmetic for free of side effects and may move it across the MXCSR writes
  // of the guard; volatile operands pin the division between them.
  volatile double one = 1.0;
  volatile double value = 0;
  {
    const fpenv::DefaultFpEnv env;
    value = one / static_cast<double>(n);
  }
  encodeScalar(dtype, value, out);
}

void encodeScalar(DataType dtype, double value, uint8_t out[8]) {
  std::memset(out, 0, 8);
  // The narrowing below rounds in the current mode (float: a plain conversion), so 1/nranks would
  // get other bits on a rank whose program changed the rounding mode.
  const fpenv::DefaultFpEnv env;
  using fmt16::roundToOddFloat;
  switch (dtype) {
    case DataType::kInt8:
      return putInt<int8_t>(value, out);
    case DataType::kUint8:
      return putInt<uint8_t>(value, out);
    case DataType::kInt32:
      return putInt<int32_t>(value, out);
    case DataType::kUint32:
      return putInt<uint32_t>(value, out);
    case DataType::kInt64:
      return putInt<int64_t>(value, out);
    case DataType::kUint64:
      return putInt<uint64_t>(value, out);
    case DataType::kFloat16:
      return put(fmt16::floatToHalf(roundToOddFloat(value)), out);
    case DataType::kFloat32:
      return put(static_cast<float>(value), out);
    case DataType::kFloat64:
      return put(value, out);
    case DataType::kBfloat16:
      return put(fmt16::floatToBf16(roundToOddFloat(value)), out);
    case DataType::kFloat8e4m3:
      return put(fmt16::floatToFp8e4m3(roundToOddFloat(value)), out);
    case DataType::kFloat8e5m2:
      return put(fmt16::floatToFp8e5m2(roundToOddFloat(value)), out);
  }
}

}  // namespace mixccl
