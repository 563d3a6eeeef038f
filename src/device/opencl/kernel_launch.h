// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Launching the backend's kernels: argument helpers, and launchKernel, which covers n elements
// in the parts of ocl::nextLaunch (opencl_kernels.h).
//
// POCL before 7.0 (Debian 12 ships 3.1) keeps one loaded work-group function per kernel, work-group
// size, widest grid and global-offset flag, takes a reference on the entry a launch finds, and
// drops the reference of the first entry with the same kernel and work-group size (pocl commit
// c9ac4c0, "fix dlhandle cache", fixed it in 7.0). While two entries differ only in width or
// offset flag, launches from two threads at once drop each other's references until one reaches
// zero and POCL aborts on its assertion (`found->ref_count > 0`): 4 threads that launch one
// kernel with growing sizes hit it in every run, and so did CI's 4-rank OpenCL test once. A new
// entry is made only when a launch is wider than every entry so far, or has the other offset
// flag. So parts never use a global offset, and on POCL before 7.0 the first launch of each
// kernel and work-group size is the widest one (widestLaunch) over scratch memory, on the
// runtime's internal queue, finished before any other launch of the pair is enqueued: one entry
// per pair for the life of the process.

#include <cstddef>

#include "common/result.h"
#include "src/device/opencl/opencl_runtime.h"

namespace mixccl::ocl {

// kUnhandledDeviceError naming the call and the OpenCL error.
Result clFail(cl_int err, const char* what);
Result setPointerArg(cl_kernel k, cl_uint idx, const Operand& op);
template <typename T>
Result setArg(cl_kernel k, cl_uint idx, T value) {
  const cl_int err = clSetKernelArg(k, idx, sizeof(T), &value);
  if (err != CL_SUCCESS) return clFail(err, "setting a kernel argument");
  return Result::kSuccess;
}
// The Operand's byte offset as the kernel sees it (SVM pointers carry their own).
inline cl_ulong offsetOf(const Operand& op) { return op.kind == Operand::kMem ? op.offset : 0; }

// An operand of a kernel: its pointer argument, its byte-offset argument and what they address.
struct KernelOperand {
  cl_uint ptrArg;
  cl_uint offArg;
  Operand op;
};

// Enqueues kernel `k` over n elements of elemBytes each on `q`. The caller holds rt.kernelMu()
// and has set every argument but the operands' (launchKernel sets those, part by part). `ev`
// (may be null) receives the event of the last part. `what` names the kernel in errors.
Result launchKernel(Runtime& rt, cl_command_queue q, cl_kernel k, size_t n, size_t elemBytes, const KernelOperand* ops,
                    size_t nOps, cl_event* ev, const char* what);

}  // namespace mixccl::ocl
