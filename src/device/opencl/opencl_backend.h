// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// The OpenCL DeviceBackend (wire id 1). Every instance shares one process-wide runtime
// (opencl_runtime.h): one context, device and program, so SVM from ncclMemAlloc works with every
// communicator.
//
// Streams: the user stream is a cl_command_queue cast to void*. checkStream() accepts a queue
// only when (1) the pointer is readable (probed through a pipe, so a garbage pointer cannot
// crash us), (2) its first word is this platform's ICD dispatch pointer (every OpenCL object of
// an ICD starts with it, so another vendor's object or random memory is refused before any
// OpenCL call), and (3) clGetCommandQueueInfo reports this runtime's context and device. An
// object of this platform that is not a queue (a cl_mem, say) is not caught by (2); POCL then
// reports CL_INVALID_COMMAND_QUEUE or fields that are no queue's, which (3) refuses; when the
// reported context and device are not a context of this platform and one of its devices, the
// message says the stream is no queue rather than blaming its context. A NULL stream means
// the call completes before it returns.
//
// Memory (memKind):
//  - kDevice: inside an SVM allocation of alloc() (coarse-grained by default,
//    MIXCCL_OPENCL_SVM=fine for fine-grained). The host never dereferences it; every copy goes
//    through a queue.
//  - kHost: everything else: host memory, staging (allocStaging), registered host memory. The
//    backend cannot tell another context's SVM from host memory, so such memory answers kHost;
//    the engine refuses non-kDevice buffers of calls with a stream, which covers both cases.
//  - allocStaging: fine-grained SVM when the device has it (host- and kernel-usable), otherwise
//    page-aligned host memory with a cl_mem over it.
//  - registerHost: a cl_mem (CL_MEM_USE_HOST_PTR) over the range; on a device that shares host
//    memory (CPU devices such as POCL, integrated GPUs) kernels given a pointer inside it get
//    (cl_mem, offset). A device with memory of its own (a discrete GPU) may keep such a buffer as
//    a cached copy in device memory (the OpenCL spec allows it), which host writes by peers (shm
//    slots) do not reach without a map; there registered memory is used as plain host memory below.
//  - Plain host pointers (not registered) given to reduce(): on a device that shares host memory
//    (a CPU device, or CL_DEVICE_HOST_UNIFIED_MEMORY), one aligned to CL_DEVICE_MEM_BASE_ADDR_ALIGN
//    is wrapped for the call in a zero-copy CL_MEM_USE_HOST_PTR buffer (the same assumption as
//    registerHost). Otherwise, and for misaligned operands, they are staged through an
//    SVM block of the staging pool (staging_pool.h), reused once the commands that used it completed.
//  - query() on a CPU device yields the processor while the fence is pending: the device's worker
//    threads run on the cores a spinning poller would otherwise keep.
//
// Queues and fences: openQueue() makes an in-order queue on the shared context; copy()/reduce()
// with queue == nullptr run on an internal queue and wait for their own event. record() and
// markStart() enqueue markers; query() reads the event status and never blocks. holdStream()
// enqueues a barrier on the user's queue that waits for a user event; releaseStream() completes
// that event (always, so the stream is never left blocked) and flushes the queue.
//
// Thread-safety: every method may be called from any thread (see device_backend.h).

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#include <CL/cl.h>

#include <memory>

#include "src/device/device_backend.h"
#include "src/device/opencl/opencl_runtime.h"

namespace mixccl {

class OpenclBackend final : public DeviceBackend {
 public:
  explicit OpenclBackend(ocl::Runtime* rt) : rt_(rt) {}

  const char* name() const override { return "opencl"; }
  const char* vendor() const override { return rt_->platformName().c_str(); }
  uint32_t wireId() const override { return 1; }
  BackendCaps caps() const override;
  int deviceIndex() const override { return rt_->deviceIndex(); }

  MemKind memKind(const void* ptr) const override;
  Result checkStream(void* stream) const override;

  Result alloc(size_t bytes, void** ptr) override;
  Result free(void* ptr) override;
  Result allocStaging(size_t bytes, void** ptr) override;
  Result freeStaging(void* ptr) override;
  Result registerHost(void* ptr, size_t bytes, HostRegistration** reg) override;
  Result unregisterHost(HostRegistration* reg) override;

  Result openQueue(void* userStream, WorkQueue** queue) override;
  Result closeQueue(WorkQueue* queue) override;
  Result copy(void* dst, const void* src, size_t bytes, WorkQueue* queue) override;
  Result reduce(void* dst, const void* a, const void* b, size_t count, const ReduceSpec& spec, bool applyPre,
                bool applyPost, WorkQueue* queue) override;
  // One kernel that stores the result in both destinations, when `dst2` is SVM or wrappable host
  // memory (a transport slot); otherwise reduce() then copy().
  Result reduceDual(void* dst, void* dst2, const void* a, const void* b, size_t count, const ReduceSpec& spec,
                    bool applyPre, bool applyPost, WorkQueue* queue) override;

  Result record(WorkQueue* queue, Fence** fence) override;
  Result markStart(void* stream, Fence** fence) override;
  Result query(Fence* fence) override;
  void releaseFence(Fence* fence) override;
  Result holdStream(void* stream, StreamGate** gate) override;
  Result releaseStream(StreamGate* gate) override;

  // Beyond the interface: the shared context and device, and SVM of a chosen kind (alloc() uses
  // MIXCCL_OPENCL_SVM; tests use both kinds). Free it with free().
  cl_context context() const { return rt_->context(); }
  cl_device_id device() const { return rt_->device(); }
  Result allocSvm(size_t bytes, bool fine, void** ptr);
  // Whether the device has fine-grained SVM (POCL does; NVIDIA's driver offers coarse-grained only).
  bool hasFineSvm() const { return rt_->fineSvm(); }

 private:
  cl_command_queue queueOf(WorkQueue* queue) const;
  Result enqueueCopy(cl_command_queue q, const ocl::Operand& dst, const ocl::Operand& src, size_t bytes, cl_event* ev);
  Result reduceImpl(void* dst, void* dst2, const void* a, const void* b, size_t count, const ReduceSpec& spec,
                    bool applyPre, bool applyPost, WorkQueue* queue);
  Result finish(cl_command_queue q, cl_event last, bool wait, const char* what);
  // finish() for copy() and reduce(): on a work queue, `last` (owned) becomes the queue's last
  // event for record(); otherwise it waits for it.
  Result complete(WorkQueue* queue, cl_command_queue q, cl_event last, const char* what);

  ocl::Runtime* rt_;
};

// Makes a backend on the process-wide OpenCL runtime (created on first call). Fails with a
// message when no OpenCL platform or device is usable, MIXCCL_OPENCL_DEVICE is bad, or the device
// lacks SVM.
Result makeOpenclBackend(std::unique_ptr<DeviceBackend>* out);

// The application's context and device for the library to use (include/mixccl/opencl.h);
// kInvalidUsage after the runtime was created.
Result openclUseContext(cl_context context, cl_device_id device);
// The context and device the library uses, creating the runtime if needed.
Result openclGetContext(cl_context* context, cl_device_id* device);

}  // namespace mixccl
