/* SPDX-License-Identifier: Apache-2.0 */
/* SPDX-FileCopyrightText: 2026 The mixccl authors */

/*
 * mixccl's OpenCL extension: how an application that computes with OpenCL shares its context and
 * device with the library. C99 and C++; needs the OpenCL headers (CL/cl.h).
 *
 * With the OpenCL backend, the `stream` argument of every NCCL call is a cl_command_queue cast to
 * cudaStream_t (a pointer), and device buffers are SVM allocations (clSVMAlloc, or ncclMemAlloc)
 * of the library's context. The queue must belong to that context and device: the library checks
 * and refuses others with ncclInvalidArgument. A NULL stream makes the call block until done.
 *
 * Which context: by default the library creates its own on the device that MIXCCL_OPENCL_DEVICE
 * names ("platform:device", indexes as `clinfo -l` lists them; default 0:0). An application either
 *  - calls mixcclOpenclUseContext() with its own context and device BEFORE the first communicator
 *    is created (and before mixcclOpenclGetContext), so its buffers and queues work as they are, or
 *  - calls mixcclOpenclGetContext() and creates its queues and SVM buffers on the context it returns.
 *
 * Allocating from several threads: NVIDIA's OpenCL driver (580) fails some clSVMAlloc calls made
 * at the same time on one context. The library serialises its own; an application whose threads
 * allocate SVM while communicators initialise or run should use ncclMemAlloc/ncclMemFree, which
 * go through the library's lock, or serialise its own clSVMAlloc calls.
 *
 * These functions are exported only by a library built with OpenCL support; they are safe to call
 * from any thread and never throw.
 */

#ifndef MIXCCL_OPENCL_H_
#define MIXCCL_OPENCL_H_

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#include <CL/cl.h>

#include "../nccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Makes the library use `context` and `device` (a device of that context) for every communicator
 * of the process. The library retains the context. Returns ncclSuccess; ncclInvalidArgument for a
 * NULL or mismatching context/device, or a context pointer that is no OpenCL object (checked
 * without dereferencing it); ncclInvalidUsage once the library chose its context (a communicator
 * or mixcclOpenclGetContext came first).
 */
ncclResult_t mixcclOpenclUseContext(cl_context context, cl_device_id device);

/*
 * The context and device the library uses (initialising its OpenCL runtime if needed: after this,
 * mixcclOpenclUseContext is refused). Either output may be NULL, not both. The library keeps its
 * own reference; do not release them. Returns ncclSuccess; ncclInvalidArgument for two NULL
 * outputs; an error with a message (ncclGetLastError) when no usable OpenCL device exists or
 * MIXCCL_OPENCL_DEVICE is bad.
 */
ncclResult_t mixcclOpenclGetContext(cl_context* context, cl_device_id* device);

#ifdef __cplusplus
}
#endif

#endif /* MIXCCL_OPENCL_H_ */
