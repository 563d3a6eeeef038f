// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "common/types.h"

namespace mixccl {

const char* dataTypeName(DataType t) {
  static const char* const kNames[kNumDataTypes] = {"int8",    "uint8",   "int32",   "uint32",   "int64",  "uint64",
                                                    "float16", "float32", "float64", "bfloat16", "f8e4m3", "f8e5m2"};
  int i = static_cast<int>(t);
  return i >= 0 && i < kNumDataTypes ? kNames[i] : "invalid";
}

const char* redOpName(RedOpKind op) {
  switch (op) {
    case RedOpKind::kSum:
      return "sum";
    case RedOpKind::kProd:
      return "prod";
    case RedOpKind::kMax:
      return "max";
    case RedOpKind::kMin:
      return "min";
    case RedOpKind::kAvg:
      return "avg";
    case RedOpKind::kPreMulSum:
      return "premulsum";
  }
  return "invalid";
}

const char* collName(CollKind c) {
  switch (c) {
    case CollKind::kAllReduce:
      return "AllReduce";
    case CollKind::kBroadcast:
      return "Broadcast";
    case CollKind::kReduce:
      return "Reduce";
    case CollKind::kAllGather:
      return "AllGather";
    case CollKind::kReduceScatter:
      return "ReduceScatter";
    case CollKind::kAlltoAll:
      return "AlltoAll";
    case CollKind::kGather:
      return "Gather";
    case CollKind::kScatter:
      return "Scatter";
    case CollKind::kSend:
      return "Send";
    case CollKind::kRecv:
      return "Recv";
  }
  return "invalid";
}

}  // namespace mixccl
