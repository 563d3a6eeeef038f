// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Element types and reduction operators as the core sees them. The numeric values equal the
// NCCL ABI values (ncclDataType_t, ncclRedOp_t), so src/api converts with a range check and a cast.

#include <cstddef>
#include <cstdint>

namespace mixccl {

enum class DataType : int {
  kInt8 = 0,
  kUint8 = 1,
  kInt32 = 2,
  kUint32 = 3,
  kInt64 = 4,
  kUint64 = 5,
  kFloat16 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kBfloat16 = 9,
  kFloat8e4m3 = 10,
  kFloat8e5m2 = 11,
};
constexpr int kNumDataTypes = 12;

constexpr size_t dataTypeSize(DataType t) {
  switch (t) {
    case DataType::kInt8:
    case DataType::kUint8:
    case DataType::kFloat8e4m3:
    case DataType::kFloat8e5m2:
      return 1;
    case DataType::kFloat16:
    case DataType::kBfloat16:
      return 2;
    case DataType::kInt32:
    case DataType::kUint32:
    case DataType::kFloat32:
      return 4;
    case DataType::kInt64:
    case DataType::kUint64:
    case DataType::kFloat64:
      return 8;
  }
  return 0;
}

constexpr bool isFloatType(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kFloat32 || t == DataType::kFloat64 || t == DataType::kBfloat16 ||
         t == DataType::kFloat8e4m3 || t == DataType::kFloat8e5m2;
}

const char* dataTypeName(DataType t);

// The built-in combining functions. Avg and PreMulSum are Sum plus a per-element transform
// (see ReduceSpec in src/device/device_backend.h).
enum class RedOpKind : int { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4, kPreMulSum = 5 };
constexpr int kNumBuiltinOps = 5;  // ncclNumOps: user-created ops get handles from here up

const char* redOpName(RedOpKind op);

// Collective kinds, also used on the wire (PROTOCOL.md) and in logs.
enum class CollKind : uint8_t {
  kAllReduce = 0,
  kBroadcast = 1,
  kReduce = 2,
  kAllGather = 3,
  kReduceScatter = 4,
  kAlltoAll = 5,
  kGather = 6,
  kScatter = 7,
  kSend = 8,
  kRecv = 9,
};

constexpr int kNumCollKinds = static_cast<int>(CollKind::kRecv) + 1;

const char* collName(CollKind c);

}  // namespace mixccl
