// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// The device backend of this process, chosen once by MIXCCL_DEVICE_BACKEND:
//   host (default) | a built-in name (registry.h: opencl when built with it) | cuda |
//   a path containing '/' to a plugin shared object (include/mixccl/device_backend.h).
//
// The first call creates it (later and concurrent calls wait for that one and then share its
// outcome); the backend lives until the process exits, so every communicator and ncclMemAlloc
// use the same one and pointers stay valid across communicators. A failed creation is not
// retried: every call reports the same code with the same message, recorded with fail() on the
// calling thread so ncclGetLastError shows it there too.
//
// Errors: cuda when not built in -> kInvalidUsage; an unknown name -> kInvalidArgument listing the
// known names; a plugin that does not load -> the loader's error (plugin_loader.h); a built-in
// backend whose device is unusable -> its make() error.
//
// Thread-safety: any thread; never blocks longer than the first creation takes.

#include "common/result.h"
#include "src/device/device_backend.h"

namespace mixccl {

// *out is a non-owning pointer valid until exit, or nullptr on failure.
Result processBackend(DeviceBackend** out);

}  // namespace mixccl
