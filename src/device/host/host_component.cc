// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// The host backend's registry entry (src/device/host/CMakeLists.txt names this factory; the
// generated table declares it, so its signature is checked at link time).
#include <new>

#include "src/device/host/host_backend.h"

namespace mixccl {

Result createHostBackend(std::unique_ptr<DeviceBackend>* out) {
  if (out == nullptr) return fail(Result::kInternalError, "createHostBackend: null output pointer");
  out->reset(new (std::nothrow) HostBackend());
  if (*out == nullptr) return fail(Result::kSystemError, "out of memory creating the host device backend");
  return Result::kSuccess;
}

}  // namespace mixccl
