// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// A fixed table of the built-in device backends. Temporary: the generated component registry
// replaces this file (each backend folder then registers itself), keeping registry.h as it is.

#include <cstring>
#include <iterator>

#include "src/device/registry.h"

namespace mixccl {

#if MIXCCL_HAVE_OPENCL
// Declared in src/device/opencl/opencl_backend.h; repeated here so this table needs no header
// of a vendor folder.
Result makeOpenclBackend(std::unique_ptr<DeviceBackend>* out);
#endif

namespace {

Result makeHost(std::unique_ptr<DeviceBackend>* out) {
  *out = makeHostBackend();
  return Result::kSuccess;
}

constexpr BuiltinBackend kBuiltins[] = {
    {"host", makeHost},
#if MIXCCL_HAVE_OPENCL
    {"opencl", makeOpenclBackend},
#endif
};

}  // namespace

const BuiltinBackend* findBuiltinBackend(const char* name) {
  if (name == nullptr) return nullptr;
  for (const BuiltinBackend& b : kBuiltins) {
    if (strcmp(b.name, name) == 0) return &b;
  }
  return nullptr;
}

std::vector<const char*> builtinBackendNames() {
  std::vector<const char*> names;
  names.reserve(std::size(kBuiltins));
  for (const BuiltinBackend& b : kBuiltins) names.push_back(b.name);
  return names;
}

}  // namespace mixccl
