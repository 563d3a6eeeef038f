// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Compile-time half of the ABI comparison: every integral and floating item of the lists, taken
// from our headers, must equal the value abi_gen read from NVIDIA's (abi_real_values.h, generated
// in the build tree). A difference is a compile error naming the item. Type and function items
// are compared at run time only (abi_values_test.cc), as mangled names are not constexpr.

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "abi_real_values.h"
#include "mixccl/device_api.h"
#include "nccl.h"

namespace mixccl::abitest {
namespace {

#include "tests/abi/abi_prelude.inc"

// Looks an item up by its expression text; an item abi_gen did not write is an error too (the
// throw makes the call non-constant, which fails the static_assert).
template <size_t N>
constexpr const real::Value& find(const real::Value (&table)[N], std::string_view name) {
  for (const real::Value& v : table) {
    if (v.name == name) return v;
  }
  throw "item missing from abi_real_values.h";
}

#define ABI_STR(e)
#define ABI_TYPE(...)
#define ABI_FUNC(fn)
#define ABI_FUNC_AS(fn, ...)

#if MIXCCL_ABI_REAL_CORE
#define ABI_INT(e) static_assert(static_cast<long long>(e) == find(real::kCore, #e).i, "differs from NCCL: " #e);
#define ABI_FLOAT(e) static_assert(static_cast<double>(e) == find(real::kCore, #e).f, "differs from NCCL: " #e);
#include "tests/abi/abi_items.inc"
#undef ABI_INT
#undef ABI_FLOAT
#endif

#if MIXCCL_ABI_REAL_DEVICE
#define ABI_INT(e) static_assert(static_cast<long long>(e) == find(real::kDevice, #e).i, "differs from NCCL: " #e);
#define ABI_FLOAT(e) static_assert(static_cast<double>(e) == find(real::kDevice, #e).f, "differs from NCCL: " #e);
#include "tests/abi/abi_device_items.inc"
#undef ABI_INT
#undef ABI_FLOAT
#endif

}  // namespace
}  // namespace mixccl::abitest
