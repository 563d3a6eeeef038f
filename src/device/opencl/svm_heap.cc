// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "src/device/opencl/svm_heap.h"

#include <cstddef>

namespace mixccl::ocl {

SvmHeap::~SvmHeap() {
  std::lock_guard<std::mutex> lock(mu_);
  for (Pending& p : pending_) {
    clWaitForEvents(1, &p.marker);
    clReleaseEvent(p.marker);
    clSVMFree(context_, p.ptr);
  }
}

void SvmHeap::reapLocked() {
  for (size_t i = 0; i < pending_.size();) {
    cl_int status = CL_QUEUED;
    const cl_int err =
        clGetEventInfo(pending_[i].marker, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status, nullptr);
    // A failed command (status < 0) no longer touches the memory either; an event that cannot be
    // asked stays pending (freed by the destructor, after waiting).
    if (err != CL_SUCCESS || (status != CL_COMPLETE && status >= 0)) {
      ++i;
      continue;
    }
    clReleaseEvent(pending_[i].marker);
    clSVMFree(context_, pending_[i].ptr);
    pending_[i] = pending_.back();
    pending_.pop_back();
  }
}

void* SvmHeap::alloc(cl_svm_mem_flags flags, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  reapLocked();
  void* p = clSVMAlloc(context_, flags, bytes, 0);
  if (p != nullptr || pending_.empty()) return p;
  // Memory that waits for its queue may be what is missing: wait for it, then try once more.
  for (Pending& q : pending_) clWaitForEvents(1, &q.marker);
  reapLocked();
  return clSVMAlloc(context_, flags, bytes, 0);
}

void SvmHeap::free(void* p) {
  std::lock_guard<std::mutex> lock(mu_);
  reapLocked();
  if (p != nullptr) clSVMFree(context_, p);
}

void SvmHeap::freeAfter(cl_command_queue queue, void* p, cl_event* done) {
  if (done != nullptr) *done = nullptr;
  if (p == nullptr) return;
  cl_event marker = nullptr;
  if (clEnqueueMarkerWithWaitList(queue, 0, nullptr, &marker) != CL_SUCCESS) {
    clFinish(queue);
    free(p);
    return;
  }
  clFlush(queue);  // the marker must reach the device, or it never completes
  if (done != nullptr) {
    clRetainEvent(marker);
    *done = marker;
  }
  std::lock_guard<std::mutex> lock(mu_);
  pending_.push_back(Pending{p, marker});
  reapLocked();
}

size_t SvmHeap::pendingFrees() {
  std::lock_guard<std::mutex> lock(mu_);
  reapLocked();
  return pending_.size();
}

}  // namespace mixccl::ocl
