// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Loads a device backend plugin (include/mixccl/device_backend.h) and presents it as a
// DeviceBackend.
//
// The loader dlopen()s the file, takes the newest table it knows (mixcclDeviceBackend_v1 today;
// a newer table adds a case here and keeps the old ones), checks the table's size, major version
// and mandatory function pointers, and calls its init(). The returned object translates C++
// calls to the table: Result <-> ncclResult_t, handles <-> void*, ReduceSpec + (a, b) -> the
// plugin's n-source reduce. Destroying it calls the plugin's finalize() and dlclose()s the file,
// so every handle obtained from it must be released first.
//
// Errors (all recorded with fail(), naming the plugin's path): the file cannot be opened, no
// table symbol, a table only newer than this loader knows, a table smaller than its version
// needs, a NULL mandatory function -> kInvalidUsage; init() failing -> its own code.
//
// Thread-safety: loadPluginBackend may be called from any thread; the object is as thread-safe
// as the plugin's functions (the ABI requires them to be callable from any thread).

#include <memory>

#include "common/result.h"
#include "src/device/device_backend.h"

namespace mixccl {

Result loadPluginBackend(const char* path, std::unique_ptr<DeviceBackend>* out);

}  // namespace mixccl
