// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "src/core/scratch_pool.h"

#include <algorithm>

namespace mixccl {

ScratchPool::~ScratchPool() {
  for (const Block& b : free_) (void)backend_->free(b.ptr);
}

Result ScratchPool::take(DeviceBackend* backend, size_t bytes, void** ptr, size_t* capacity) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    backend_ = backend;
    // The smallest kept buffer that fits.
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->bytes >= bytes && (best == free_.end() || it->bytes < best->bytes)) best = it;
    }
    if (best != free_.end()) {
      *ptr = best->ptr;
      *capacity = best->bytes;
      freeBytes_ -= best->bytes;
      free_.erase(best);
      return Result::kSuccess;
    }
  }
  *capacity = bytes;
  return backend->alloc(bytes, ptr);
}

void ScratchPool::give(void* ptr, size_t capacity) {
  std::lock_guard<std::mutex> lock(mu_);
  if (capacity > kKeepBytes) {
    (void)backend_->free(ptr);
    return;
  }
  free_.push_back(Block{ptr, capacity});
  freeBytes_ += capacity;
  // Over the bound: free the smallest kept buffers first (a larger one serves more operations).
  std::sort(free_.begin(), free_.end(), [](const Block& a, const Block& b) { return a.bytes > b.bytes; });
  while (freeBytes_ > kKeepBytes) {
    (void)backend_->free(free_.back().ptr);
    freeBytes_ -= free_.back().bytes;
    free_.pop_back();
  }
}

}  // namespace mixccl
