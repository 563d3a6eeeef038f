// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// A test backend: the host backend, whose reduce() results a hook may alter afterwards and whose
// announced data types may be narrowed. Stands in for a vendor backend that rounds differently
// (the arithmetic check must catch it) or lacks a type (calls with it must be refused).

#include <memory>

#include "src/device/device_backend.h"

namespace mixccl {

// The host backend, with a hook that may alter every reduce() result.
class AlteredBackend final : public DeviceBackend {
 public:
  using Alter = void (*)(const ReduceSpec&, void* dst, size_t count);
  explicit AlteredBackend(Alter alter, uint32_t dtypes = 0) : alter_(alter), dtypes_(dtypes) {}
  const char* name() const override { return "altered"; }
  const char* vendor() const override { return "test"; }
  uint32_t wireId() const override { return 0x100; }
  BackendCaps caps() const override {
    BackendCaps c = host_->caps();
    if (dtypes_ != 0) c.dtypes = dtypes_;
    return c;
  }
  MemKind memKind(const void* p) const override { return host_->memKind(p); }
  Result checkStream(void* s) const override { return host_->checkStream(s); }
  Result alloc(size_t n, void** p) override { return host_->alloc(n, p); }
  Result free(void* p) override { return host_->free(p); }
  Result allocStaging(size_t n, void** p) override { return host_->allocStaging(n, p); }
  Result freeStaging(void* p) override { return host_->freeStaging(p); }
  Result registerHost(void* p, size_t n, HostRegistration** r) override { return host_->registerHost(p, n, r); }
  Result unregisterHost(HostRegistration* r) override { return host_->unregisterHost(r); }
  Result openQueue(void* s, WorkQueue** q) override { return host_->openQueue(s, q); }
  Result closeQueue(WorkQueue* q) override { return host_->closeQueue(q); }
  Result copy(void* d, const void* s, size_t n, WorkQueue* q) override { return host_->copy(d, s, n, q); }
  Result reduce(void* dst, const void* a, const void* b, size_t count, const ReduceSpec& spec, bool pre, bool post,
                WorkQueue* q) override {
    MIXCCL_TRY(host_->reduce(dst, a, b, count, spec, pre, post, q));
    if (alter_ != nullptr) alter_(spec, dst, count);
    return Result::kSuccess;
  }
  Result record(WorkQueue* q, Fence** f) override { return host_->record(q, f); }
  Result markStart(void* s, Fence** f) override { return host_->markStart(s, f); }
  Result query(Fence* f) override { return host_->query(f); }
  void releaseFence(Fence* f) override { host_->releaseFence(f); }
  Result holdStream(void* s, StreamGate** g) override { return host_->holdStream(s, g); }
  Result releaseStream(StreamGate* g) override { return host_->releaseStream(g); }

 private:
  std::unique_ptr<DeviceBackend> host_ = makeHostBackend();
  Alter alter_;
  uint32_t dtypes_;
};

}  // namespace mixccl
