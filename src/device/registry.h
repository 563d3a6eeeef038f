// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// The device backends built into this library, by name (MIXCCL_DEVICE_BACKEND=host|opencl|...).
// A backend folder registers one entry; select.cc looks names up here and never names a vendor.
// Plugins loaded from a path (plugin/plugin_loader.h) are not listed here.
//
// Thread-safety: the table is constant after static initialisation; every function may be called
// from any thread.

#include <memory>
#include <vector>

#include "common/result.h"
#include "src/device/device_backend.h"

namespace mixccl {

struct BuiltinBackend {
  const char* name;  // the MIXCCL_DEVICE_BACKEND value that selects it
  // Creates and initialises the backend; fails with a message when the vendor's runtime or
  // device is not usable in this process.
  Result (*make)(std::unique_ptr<DeviceBackend>* out);
};

// The entry called `name`, or nullptr when this build has none.
const BuiltinBackend* findBuiltinBackend(const char* name);

// Every built-in backend's name, in registration order (for messages).
std::vector<const char*> builtinBackendNames();

}  // namespace mixccl
