// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// The DeviceBackend for plain host memory (makeHostBackend() in device_backend.h is the public way
// to get one). Everything is synchronous: copy() and reduce() are complete when they return, the
// stream handle is ignored (it may be NULL) and the stream-ordering calls do nothing.
//
// memKind() answers kHost for every pointer the CPU can read, and kUnknown for one it cannot (a
// GPU's device pointer in a program that links mixccl in place of NCCL, a freed mapping): the API
// refuses those with a message instead of crashing in a kernel. Without a device runtime in the
// process there is no telling more; the probe is one process_vm_readv of the first byte, and the
// pages found readable are remembered per thread, so buffers reused call after call cost nothing.
//
// Allocations are 64-byte aligned (a cache line and a full AVX-512 vector), and page aligned from
// one page up so large buffers start on a page boundary (cheaper to register with NICs, and they
// never share a page with unrelated data). Staging memory is the same ordinary memory: the host
// needs no pinning.
//
// Host memory needs no registration: registerHost() hands out a null registration.
//
// Thread-safety: stateless; every method may be called from any thread.

#include <memory>

#include "src/device/device_backend.h"

namespace mixccl {

class HostBackend final : public DeviceBackend {
 public:
  const char* name() const override { return "host"; }
  const char* vendor() const override { return "mixccl"; }
  uint32_t wireId() const override { return 0; }
  BackendCaps caps() const override;
  MemKind memKind(const void* ptr) const override;
  Result checkStream(void* stream) const override { return Result::kSuccess; }

  Result alloc(size_t bytes, void** ptr) override;
  Result free(void* ptr) override;
  Result allocStaging(size_t bytes, void** ptr) override;
  Result freeStaging(void* ptr) override;
  Result registerHost(void* ptr, size_t bytes, HostRegistration** reg) override;
  Result unregisterHost(HostRegistration* reg) override { return Result::kSuccess; }

  Result openQueue(void* userStream, WorkQueue** queue) override;
  Result closeQueue(WorkQueue* queue) override { return Result::kSuccess; }
  Result copy(void* dst, const void* src, size_t bytes, WorkQueue* queue) override;
  Result reduce(void* dst, const void* a, const void* b, size_t count, const ReduceSpec& spec, bool applyPre,
                bool applyPost, WorkQueue* queue) override;

  Result record(WorkQueue* queue, Fence** fence) override;
  Result markStart(void* stream, Fence** fence) override;
  Result query(Fence* fence) override { return Result::kSuccess; }
  void releaseFence(Fence* fence) override {}
  Result holdStream(void* stream, StreamGate** gate) override;
  Result releaseStream(StreamGate* gate) override { return Result::kSuccess; }
};

}  // namespace mixccl
