// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "src/device/opencl/staging_pool.h"

#include <cstddef>
#include <cstdint>

namespace mixccl::ocl {

StagingPool::~StagingPool() {
  for (Kept& k : kept_) {
    if (k.lastUse != nullptr) {
      clWaitForEvents(1, &k.lastUse);
      clReleaseEvent(k.lastUse);
    }
    svm_.free(k.block.ptr);
  }
}

bool StagingPool::idle(const Kept& k) {
  if (k.lastUse == nullptr) return true;
  cl_int status = CL_QUEUED;
  if (clGetEventInfo(k.lastUse, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status, nullptr) != CL_SUCCESS) {
    return false;  // unknown: leave the block alone
  }
  // A failed command (status < 0) no longer touches the block either.
  return status == CL_COMPLETE || status < 0;
}

Result StagingPool::take(size_t bytes, Block* out) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The smallest idle block that fits.
    size_t best = kept_.size();
    for (size_t i = 0; i < kept_.size(); ++i) {
      const Kept& k = kept_[i];
      if (k.block.bytes < bytes) continue;
      if (best < kept_.size() && kept_[best].block.bytes <= k.block.bytes) continue;
      if (idle(k)) best = i;
    }
    if (best < kept_.size()) {
      if (kept_[best].lastUse != nullptr) clReleaseEvent(kept_[best].lastUse);
      *out = kept_[best].block;
      kept_.erase(kept_.begin() + static_cast<std::ptrdiff_t>(best));
      return Result::kSuccess;
    }
  }
  // Powers of two, so blocks of nearby sizes serve each other.
  size_t n = kMinBlockBytes;
  while (n < bytes && n <= (SIZE_MAX >> 1)) n <<= 1;
  if (n < bytes) n = bytes;
  void* p = svm_.alloc(CL_MEM_READ_WRITE, n);
  if (p == nullptr) {
    return fail(Result::kSystemError, "opencl: no %zu bytes of SVM to stage host operands; free device memory", n);
  }
  *out = Block{p, n};
  return Result::kSuccess;
}

void StagingPool::give(const Block& block, cl_event lastUse, cl_command_queue queue) {
  if (block.ptr == nullptr) return;
  if (lastUse != nullptr) clRetainEvent(lastUse);
  std::unique_lock<std::mutex> lock(mu_);
  if (kept_.size() >= kMaxBlocks) {
    // Make room by freeing an idle block; with none idle, this one is freed after its use.
    for (size_t i = 0; i < kept_.size(); ++i) {
      if (!idle(kept_[i])) continue;
      if (kept_[i].lastUse != nullptr) clReleaseEvent(kept_[i].lastUse);
      svm_.free(kept_[i].block.ptr);
      kept_.erase(kept_.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
  if (kept_.size() < kMaxBlocks) {
    kept_.push_back(Kept{block, lastUse});
    return;
  }
  lock.unlock();  // freeAfter may wait for the queue: not while other ranks need the pool
  if (lastUse != nullptr) clReleaseEvent(lastUse);
  svm_.freeAfter(queue, block.ptr, nullptr);
}

}  // namespace mixccl::ocl
