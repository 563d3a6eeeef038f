// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "src/device/opencl/kernel_launch.h"

#include "src/device/opencl/opencl_kernels.h"

namespace mixccl::ocl {
namespace {

// One part with its fixed work-group size. A kernel whose work-group limit on this device is
// below that size (a GPU kernel short of registers, a device with fewer work-items per group) is
// launched with the size left to the device, after the refused launch.
cl_int enqueuePart(cl_command_queue q, cl_kernel k, size_t global, size_t local, cl_event* ev) {
  const cl_int err = clEnqueueNDRangeKernel(q, k, 1, nullptr, &global, &local, 0, nullptr, ev);
  if (err != CL_INVALID_WORK_GROUP_SIZE && err != CL_INVALID_WORK_ITEM_SIZE) return err;
  return clEnqueueNDRangeKernel(q, k, 1, nullptr, &global, nullptr, 0, nullptr, ev);
}

// The widest launch of (k, local) over scratch memory, finished before returning (the header
// says why). The other arguments are the caller's, so the kernel computes what the real launch
// will, on scratch; the operands' arguments are restored after.
Result launchWidest(Runtime& rt, cl_kernel k, size_t local, size_t full, const KernelOperand* ops, size_t nOps,
                    const char* what) {
  cl_command_queue q = nullptr;
  void* scratch = nullptr;
  MIXCCL_TRY(rt.widestLaunchKit(&q, &scratch));
  cl_int err = CL_SUCCESS;
  for (size_t i = 0; i < nOps && err == CL_SUCCESS; ++i) {
    err = clSetKernelArgSVMPointer(k, ops[i].ptrArg, scratch);
    const cl_ulong zero = 0;
    if (err == CL_SUCCESS) err = clSetKernelArg(k, ops[i].offArg, sizeof(zero), &zero);
  }
  if (err == CL_SUCCESS) err = enqueuePart(q, k, widestLaunch(local, full), local, nullptr);
  if (err == CL_SUCCESS) err = clFinish(q);
  for (size_t i = 0; i < nOps; ++i) MIXCCL_TRY(setPointerArg(k, ops[i].ptrArg, ops[i].op));
  if (err != CL_SUCCESS) return clFail(err, what);
  return Result::kSuccess;
}

}  // namespace

Result clFail(cl_int err, const char* what) {
  return fail(Result::kUnhandledDeviceError, "OpenCL backend: %s failed (%s, %d)", what, clErrorName(err), err);
}

Result setPointerArg(cl_kernel k, cl_uint idx, const Operand& op) {
  const cl_int err = op.kind == Operand::kMem ? clSetKernelArg(k, idx, sizeof(cl_mem), &op.mem)
                                              : clSetKernelArgSVMPointer(k, idx, op.ptr);
  if (err != CL_SUCCESS) return clFail(err, "setting a kernel pointer argument");
  return Result::kSuccess;
}

Result launchKernel(Runtime& rt, cl_command_queue q, cl_kernel k, size_t n, size_t elemBytes, const KernelOperand* ops,
                    size_t nOps, cl_event* ev, const char* what) {
  for (size_t i = 0; i < nOps; ++i) MIXCCL_TRY(setPointerArg(k, ops[i].ptrArg, ops[i].op));
  const size_t full = launchItems(elemBytes);
  for (size_t done = 0; done < n;) {
    const LaunchPart part = nextLaunch(n, done, full);
    if (rt.needsWidestLaunch(k, part.local)) {
      MIXCCL_TRY(launchWidest(rt, k, part.local, full, ops, nOps, what));
      rt.noteWidestLaunch(k, part.local);
    }
    for (size_t i = 0; i < nOps; ++i) {
      MIXCCL_TRY(setArg<cl_ulong>(k, ops[i].offArg, offsetOf(ops[i].op) + part.first * elemBytes));
    }
    done += part.global;
    const cl_int err = enqueuePart(q, k, part.global, part.local, done == n ? ev : nullptr);
    if (err != CL_SUCCESS) return clFail(err, what);
  }
  return Result::kSuccess;
}

}  // namespace mixccl::ocl
