// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// SVM blocks that stage kernel operands the kernel cannot take directly (plain host memory on a
// device with memory of its own, misaligned pointers), kept for reuse. A clSVMAlloc costs about
// 1.5 ms on NVIDIA's driver and a clSVMAlloc with clEnqueueSVMFree about 3 ms (H100, 2026-11-27);
// allocating per reduce() made every engine step on such a device cost milliseconds.
//
// A block goes back with the event of the last command that used it and is handed out again only
// once that event has completed, so two queues never share a block in flight. At most kMaxBlocks
// are kept; a block returned to a full pool whose oldest members are all still busy is freed
// after its use (SvmHeap::freeAfter).
//
// Thread-safety: take() and give() may be called from any thread (one mutex). The runtime's pool
// lives as long as its context (the OpenCL runtime is a process singleton, never destroyed).

#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>

#include <cstddef>
#include <mutex>
#include <vector>

#include "common/result.h"
#include "src/device/opencl/svm_heap.h"

namespace mixccl::ocl {

class StagingPool {
 public:
  struct Block {
    void* ptr = nullptr;
    size_t bytes = 0;
  };

  explicit StagingPool(SvmHeap& svm) : svm_(svm) {}
  // Frees the kept blocks, waiting for their last uses.
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  // A block of at least `bytes` (coarse-grained SVM), from the pool when one is idle.
  // kSystemError with a message when the device has no memory for it.
  Result take(size_t bytes, Block* out);
  // Returns `block`; `lastUse` (retained here; may be null when nothing was enqueued) is the
  // event of the last command on `queue` that reads or writes it.
  void give(const Block& block, cl_event lastUse, cl_command_queue queue);

  static constexpr size_t kMaxBlocks = 16;
  static constexpr size_t kMinBlockBytes = 64 * 1024;

 private:
  struct Kept {
    Block block;
    cl_event lastUse;  // retained; null: idle
  };
  static bool idle(const Kept& k);

  SvmHeap& svm_;
  std::mutex mu_;
  std::vector<Kept> kept_;
};

}  // namespace mixccl::ocl
