// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// The tables the ABI comparison works on. abi_real_tables.cc fills them from NVIDIA's headers and
// abi_our_tables.cc from ours, both by expanding the same item lists (abi_items.inc,
// abi_device_items.inc); the two translation units never see each other's headers, so the
// conflicting declarations cannot meet. This header includes neither.

#include <cstddef>

namespace mixccl::abitest {

enum class Kind { kInt, kFloat, kString };

struct Item {
  const char* name;  // the item's expression as written in the .inc file
  Kind kind;
  long long i;    // kInt
  double f;       // kFloat
  const char* s;  // kString: a string macro's value, or the mangled name of a type / function type
};

struct Table {
  const Item* items = nullptr;
  size_t count = 0;
  bool available = false;  // false: the reference header was not found when building
  const char* why = "";    // why not available
};

// NVIDIA's headers (core = nccl.h, device = nccl_device/*).
Table realCoreTable();
Table realDeviceTable();
// Ours (include/nccl.h, include/mixccl/device_api.h).
Table ourCoreTable();
Table ourDeviceTable();

}  // namespace mixccl::abitest

// Used by the table builders: turn one .inc line into one Item initializer.
#define ABI_INT(e) ::mixccl::abitest::Item{#e, ::mixccl::abitest::Kind::kInt, static_cast<long long>(e), 0.0, nullptr},
#define ABI_FLOAT(e) ::mixccl::abitest::Item{#e, ::mixccl::abitest::Kind::kFloat, 0, static_cast<double>(e), nullptr},
#define ABI_STR(e) ::mixccl::abitest::Item{#e, ::mixccl::abitest::Kind::kString, 0, 0.0, e},
#define ABI_TYPE(...) \
  ::mixccl::abitest::Item{"type " #__VA_ARGS__, ::mixccl::abitest::Kind::kString, 0, 0.0, typeid(__VA_ARGS__).name()},
#define ABI_FUNC(fn) \
  ::mixccl::abitest::Item{"function " #fn, ::mixccl::abitest::Kind::kString, 0, 0.0, typeid(decltype(&fn)).name()},
#define ABI_FUNC_AS(fn, ...)                                                         \
  ::mixccl::abitest::Item{"function " #fn, ::mixccl::abitest::Kind::kString, 0, 0.0, \
                          (static_cast<void>(static_cast<__VA_ARGS__>(&fn)), typeid(__VA_ARGS__).name())},
