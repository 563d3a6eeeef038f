// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Every SVM allocation and free the library makes in its context goes through one SvmHeap.
//
// Why: NVIDIA's OpenCL driver (580, H100) fails clSVMAlloc when several threads call it at once
// on one context, although OpenCL makes the call thread-safe: 4 threads allocating a few KB each
// lost 276 of 800 calls, and 0 of 800 when one mutex serialised them (2026-11-27, a diagnostic run
// beside the backend's tests). Ranks of one process each allocate while they initialise, so 3 or 4
// OpenCL ranks as threads failed their init there. The lock costs nothing measurable: an
// allocation takes milliseconds on that driver and reduce() reuses its blocks (staging_pool.h).
//
// Frees that must wait for commands (clEnqueueSVMFree would free on a driver thread, outside the
// lock) are kept as (pointer, marker event) and freed by a later call of the heap once the event
// has completed.
//
// Thread-safety: every member may be called from any thread (one mutex, taken only inside a call
// and never while calling out to anything but OpenCL).

#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>

#include <cstddef>
#include <mutex>
#include <vector>

namespace mixccl::ocl {

class SvmHeap {
 public:
  explicit SvmHeap(cl_context context) : context_(context) {}
  // Waits for and frees what freeAfter() still holds.
  ~SvmHeap();
  SvmHeap(const SvmHeap&) = delete;
  SvmHeap& operator=(const SvmHeap&) = delete;

  // clSVMAlloc (alignment: the implementation's default); null when the device has no memory,
  // also after waiting for the memory freeAfter() still holds.
  void* alloc(cl_svm_mem_flags flags, size_t bytes);
  // clSVMFree now: the caller knows no command uses `p` any more. Null is ignored.
  void free(void* p);
  // Frees `p` once every command enqueued on the in-order `queue` so far has completed. When the
  // marker cannot be enqueued, waits for the queue and frees at once. `done` (optional) receives
  // the marker's event, retained for the caller.
  void freeAfter(cl_command_queue queue, void* p, cl_event* done);

  // Frees not yet done by freeAfter() (for tests).
  size_t pendingFrees();

 private:
  struct Pending {
    void* ptr;
    cl_event marker;
  };
  void reapLocked();

  cl_context context_;
  std::mutex mu_;
  std::vector<Pending> pending_;
};

}  // namespace mixccl::ocl
