// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Data types and reduction operators as the perf tools name them (nccl-tests' names, so `-d` and
// `-o` take the same words and the `type`/`redop` columns print the same strings), plus exact
// conversion between double and each type's bit pattern. The checker builds expected values in
// double and compares them with decoded results, so every conversion here must be exact for the
// small values the tools use, and round to nearest-even otherwise (as the library does).
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mixccl::perf {

struct TypeInfo {
  ncclDataType_t type;
  const char* name;  // column text and -d word
  size_t size;       // bytes per element
  bool isFloat;
  bool isSigned;
};

// The twelve types nccl-tests runs with `-d all`, in its order.
const std::vector<TypeInfo>& allTypes();
std::optional<TypeInfo> typeByName(const std::string& name);  // also accepts a few aliases (fp32, bf16 ...)
const TypeInfo& typeInfo(ncclDataType_t type);

// Reduction operators: the five built-ins plus "mulsum" (ncclRedOpCreatePreMulSum with a scalar).
enum class OpKind { kSum, kProd, kMax, kMin, kAvg, kMulSum };
struct OpInfo {
  OpKind kind;
  const char* name;
};
const std::vector<OpInfo>& allOps();
std::optional<OpInfo> opByName(const std::string& name);

// Writes `value` as one element of `type` at `dst` (round to nearest-even, saturating integers).
void encodeValue(ncclDataType_t type, double value, void* dst);
// Reads one element of `type` at `src`.
double decodeValue(ncclDataType_t type, const void* src);
// What `value` becomes after a round trip through `type`.
double roundToType(ncclDataType_t type, double value);

}  // namespace mixccl::perf
