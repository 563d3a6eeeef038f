// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// The DeviceBackend for plain host memory (makeHostBackend() in device_backend.h is the public way
// to get one). Everything is synchronous: copy() and reduce() are complete when they return, the
// stream handle is ignored (it may be NULL) and the stream-ordering calls do nothing.
//
// memKind() answers kHost for every pointer: without a device runtime in the process there is no
// way to tell a host pointer from anything else, and every pointer this backend can see is one the
// CPU can dereference. A vendor backend answers the real question for its own memory.
//
// Allocations are 64-byte aligned (a cache line and a full AVX-512 vector), and page aligned from
// one page up so large buffers start on a page boundary (cheaper to register with NICs, and they
// never share a page with unrelated data). Staging memory is the same ordinary memory: the host
// needs no pinning.
//
// Thread-safety: stateless; every method may be called from any thread.

#include <memory>

#include "src/device/device_backend.h"

namespace mixccl {

class HostBackend final : public DeviceBackend {
 public:
  const char* name() const override { return "host"; }
  MemKind memKind(const void* ptr) const override { return MemKind::kHost; }

  Result alloc(size_t bytes, void** ptr) override;
  Result free(void* ptr) override;
  Result allocStaging(size_t bytes, void** ptr) override;
  Result freeStaging(void* ptr) override;

  Result copy(void* dst, const void* src, size_t bytes, void* stream) override;
  Result reduce(void* dst, const void* a, const void* b, size_t count, const ReduceSpec& spec, bool applyPre,
                bool applyPost, void* stream) override;

  Result waitForStream(void* stream) override { return Result::kSuccess; }
  Result signalStream(void* stream) override { return Result::kSuccess; }
};

}  // namespace mixccl
