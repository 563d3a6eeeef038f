// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include <cstring>

#include "src/device/device_backend.h"
#include "src/device/host/float_formats.h"

namespace mixccl {

void encodeScalar(DataType dtype, double value, uint8_t out[8]) {
  memset(out, 0, 8);
  auto put = [out](auto v) { memcpy(out, &v, sizeof(v)); };
  // Narrow float formats go through a round-to-odd float so the result is correctly rounded.
  const float viaOdd = fmt16::roundToOddFloat(value);
  switch (dtype) {
    case DataType::kInt8:
      return put(static_cast<int8_t>(value));
    case DataType::kUint8:
      return put(static_cast<uint8_t>(value));
    case DataType::kInt32:
      return put(static_cast<int32_t>(value));
    case DataType::kUint32:
      return put(static_cast<uint32_t>(value));
    case DataType::kInt64:
      return put(static_cast<int64_t>(value));
    case DataType::kUint64:
      return put(static_cast<uint64_t>(value));
    case DataType::kFloat16:
      return put(fmt16::floatToHalf(viaOdd));
    case DataType::kFloat32:
      return put(static_cast<float>(value));
    case DataType::kFloat64:
      return put(value);
    case DataType::kBfloat16:
      return put(fmt16::floatToBf16(viaOdd));
    case DataType::kFloat8e4m3:
      return put(fmt16::floatToFp8e4m3(viaOdd));
    case DataType::kFloat8e5m2:
      return put(fmt16::floatToFp8e5m2(viaOdd));
  }
}

}  // namespace mixccl
