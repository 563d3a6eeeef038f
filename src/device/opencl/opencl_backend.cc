// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "src/device/opencl/opencl_backend.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "common/config.h"
#include "common/log.h"
#include "src/device/opencl/kernel_launch.h"
#include "src/device/opencl/opencl_kernels.h"

namespace mixccl {
namespace {

using ocl::clErrorName;
using ocl::clFail;
using ocl::KernelOperand;
using ocl::offsetOf;
using ocl::Operand;
using ocl::Range;
using ocl::RangeKind;
using ocl::setArg;
using ocl::setPointerArg;

// The backend's handles. DeviceBackend's opaque structs are never defined (a later backend
// would define them too); these are cast to and from them.
struct OclQueue {
  cl_command_queue q;
  // The event of the last command copy() or reduce() enqueued and record() has not taken yet:
  // record() hands it out as the fence instead of enqueueing a marker behind it (one command
  // fewer per step; the queue is in order, so it signals exactly when a marker would).
  cl_event last = nullptr;
};
struct OclFence {
  cl_event ev;
  // A start fence on an in-order queue waits on this user event too; the first query() (or the
  // release) completes it. See markStart().
  cl_event permit = nullptr;
};

// Completes and drops a start fence's permit: the marker behind it may now run.
void grantPermit(OclFence* f) {
  if (f->permit == nullptr) return;
  clSetUserEventStatus(f->permit, CL_COMPLETE);
  clReleaseEvent(f->permit);
  f->permit = nullptr;
}
struct OclGate {
  cl_event user;
  cl_command_queue q;  // retained: the user's queue, flushed on release
};
struct OclRegistration {
  cl_mem mem;
  uintptr_t start;
  size_t bytes;
};

// Copies the first word at `p` without dereferencing it: process_vm_readv on our own process
// returns EFAULT for an unreadable address instead of faulting. One system call: checkStream runs
// three times per queued operation on the caller's thread (the API's check, markStart,
// holdStream), where a pipe round trip (five calls) cost several microseconds each time.
bool readFirstWord(const void* p, const void** word) {
  if (reinterpret_cast<uintptr_t>(p) % alignof(void*) != 0) return false;
  iovec local{word, sizeof(void*)};
  iovec remote{const_cast<void*>(p), sizeof(void*)};
  const ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
  if (n == static_cast<ssize_t>(sizeof(void*))) return true;
  if (n < 0 && errno == EFAULT) return false;
  // Refused for another reason (a seccomp filter, ENOSYS): fall back to a pipe round trip.
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return false;
  bool ok = write(fds[1], p, sizeof(void*)) == static_cast<ssize_t>(sizeof(void*)) &&
            read(fds[0], word, sizeof(void*)) == static_cast<ssize_t>(sizeof(void*));
  close(fds[0]);
  close(fds[1]);
  return ok;
}

// Whether the first word of `p` is readable and some platform's dispatch pointer, as every OpenCL
// object's is (the ICD loader calls through it, so anything else would crash it).
bool isOpenclObject(const void* p) {
  const void* word = nullptr;
  if (!readFirstWord(p, &word)) return false;
  cl_uint n = 0;
  if (clGetPlatformIDs(0, nullptr, &n) != CL_SUCCESS || n == 0) return false;
  std::vector<cl_platform_id> plats(n);
  if (clGetPlatformIDs(n, plats.data(), nullptr) != CL_SUCCESS) return false;
  return std::any_of(plats.begin(), plats.end(),
                     [&](cl_platform_id pl) { return *reinterpret_cast<const void* const*>(pl) == word; });
}

// Whether `ctx` is a context of the platform whose dispatch pointer is `dispatch` and `dev` one of
// its devices: what the context and device a real command queue reports always are. POCL answers
// clGetCommandQueueInfo for any object of its platform (a cl_mem, an event, the context itself),
// reading queue fields where there are none, so checkStream asks this before it blames the context
// or device of something that is no queue at all.
bool namesContextDevice(const void* dispatch, cl_context ctx, cl_device_id dev) {
  const void* word = nullptr;
  if (ctx == nullptr || dev == nullptr || !readFirstWord(ctx, &word) || word != dispatch) return false;
  cl_uint n = 0;
  if (clGetContextInfo(ctx, CL_CONTEXT_NUM_DEVICES, sizeof(n), &n, nullptr) != CL_SUCCESS || n == 0 || n > 4096) {
    return false;
  }
  std::vector<cl_device_id> devs(n);
  if (clGetContextInfo(ctx, CL_CONTEXT_DEVICES, n * sizeof(cl_device_id), devs.data(), nullptr) != CL_SUCCESS) {
    return false;
  }
  return std::find(devs.begin(), devs.end(), dev) != devs.end();
}

// A zero-copy buffer over plain host memory for one call (the OperandGuard releases it; commands
// already enqueued keep their own reference until they ran).
// A CL_MEM_USE_HOST_PTR buffer over host memory: how kernels reach it without a copy on a device
// that shares host memory. `what` names the call in the error.
Result hostPtrBuffer(cl_context ctx, void* ptr, size_t bytes, const char* what, cl_mem* out) {
  cl_int err = CL_SUCCESS;
  *out = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, bytes, ptr, &err);
  if (*out != nullptr && err == CL_SUCCESS) return Result::kSuccess;
  *out = nullptr;
  return clFail(err, what);
}

Result wrapHost(cl_context ctx, void* ptr, size_t bytes, Operand* op) {
  cl_mem mem = nullptr;
  MIXCCL_TRY(hostPtrBuffer(ctx, ptr, bytes, "clCreateBuffer(CL_MEM_USE_HOST_PTR) over a host operand", &mem));
  op->kind = Operand::kMem;
  op->mem = mem;
  op->offset = 0;
  return Result::kSuccess;
}

// Releases retained cl_mem objects of a call's operands on every path.
struct OperandGuard {
  Operand* ops[4] = {};
  ~OperandGuard() {
    for (Operand* o : ops) {
      if (o != nullptr) ocl::Runtime::releaseOperand(*o);
    }
  }
};

Result validateReduce(void* dst, const void* b, size_t count, const ReduceSpec& spec) {
  const int dtype = static_cast<int>(spec.dtype);
  if (dtype < 0 || dtype >= kNumDataTypes) {
    return fail(Result::kInvalidArgument, "opencl reduce: unknown data type %d (valid: 0..%d)", dtype,
                kNumDataTypes - 1);
  }
  if (spec.op != RedOpKind::kSum && spec.op != RedOpKind::kProd && spec.op != RedOpKind::kMax &&
      spec.op != RedOpKind::kMin) {
    return fail(Result::kInvalidArgument,
                "opencl reduce: op %d is not a kernel op; Avg and PreMulSum must be lowered to Sum with pre/post "
                "transforms before they reach the device backend",
                static_cast<int>(spec.op));
  }
  if (count > 0 && (dst == nullptr || b == nullptr)) {
    return fail(Result::kInvalidArgument, "opencl reduce: null %s buffer for %zu elements of %s",
                dst == nullptr ? "destination" : "input", count, dataTypeName(spec.dtype));
  }
  const bool isSigned =
      spec.dtype == DataType::kInt8 || spec.dtype == DataType::kInt32 || spec.dtype == DataType::kInt64;
  if (isSigned && spec.divisor > static_cast<uint64_t>(INT64_MAX)) {
    return fail(Result::kInvalidArgument, "opencl reduce: divisor %llu is too large for %s",
                static_cast<unsigned long long>(spec.divisor), dataTypeName(spec.dtype));
  }
  if (count > SIZE_MAX / dataTypeSize(spec.dtype)) {
    return fail(Result::kInvalidArgument, "opencl reduce: %zu elements of %s overflow the address space", count,
                dataTypeName(spec.dtype));
  }
  return Result::kSuccess;
}

}  // namespace

BackendCaps OpenclBackend::caps() const {
  BackendCaps c;
  c.dtypes = (1u << kNumDataTypes) - 1;
  if (!rt_->fp64()) c.dtypes &= ~(1u << static_cast<int>(DataType::kFloat64));
  c.ops = (1u << (static_cast<int>(RedOpKind::kPreMulSum) + 1)) - 1;
  c.flags = kCapAsync | kCapRneRounding | kCapFp8Saturate;
  if (rt_->cpuDevice()) c.flags |= kCapSharesHostCores;
  return c;
}

MemKind OpenclBackend::memKind(const void* ptr) const {
  Range r;
  if (ptr != nullptr && rt_->findRange(ptr, 1, &r) && r.kind == RangeKind::kSvm) return MemKind::kDevice;
  return MemKind::kHost;
}

Result OpenclBackend::checkStream(void* stream) const {
  if (stream == nullptr || rt_->knownQueue(stream)) return Result::kSuccess;
  const void* word = nullptr;
  if (!readFirstWord(stream, &word) || word != rt_->dispatch()) {
    return fail(Result::kInvalidArgument,
                "OpenCL backend: stream %p is not a cl_command_queue of platform '%s' (pass a queue created on "
                "the library's context, see mixcclOpenclGetContext, or NULL)",
                stream, rt_->platformName().c_str());
  }
  auto q = static_cast<cl_command_queue>(stream);
  cl_context ctx = nullptr;
  cl_device_id dev = nullptr;
  cl_int err = clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof(ctx), &ctx, nullptr);
  if (err == CL_SUCCESS) err = clGetCommandQueueInfo(q, CL_QUEUE_DEVICE, sizeof(dev), &dev, nullptr);
  if (err != CL_SUCCESS) {
    return fail(Result::kInvalidArgument, "OpenCL backend: stream %p is not a valid cl_command_queue (%s)", stream,
                clErrorName(err));
  }
  if (ctx != rt_->context() || dev != rt_->device()) {
    if (!namesContextDevice(rt_->dispatch(), ctx, dev)) {
      return fail(Result::kInvalidArgument,
                  "OpenCL backend: stream %p is an object of platform '%s' but not a cl_command_queue (a cl_context, "
                  "cl_mem or cl_event?); pass a command queue created on the library's context, see "
                  "mixcclOpenclGetContext, or NULL",
                  stream, rt_->platformName().c_str());
    }
    return fail(Result::kInvalidArgument,
                "OpenCL backend: command queue %p belongs to another %s than the library's; create the queue on "
                "the context mixcclOpenclGetContext returns, or share yours with mixcclOpenclUseContext before "
                "the first communicator",
                stream, ctx != rt_->context() ? "context" : "device");
  }
  rt_->rememberQueue(q);
  return Result::kSuccess;
}

// ---- memory ------------------------------------------------------------------------------------

Result OpenclBackend::allocSvm(size_t bytes, bool fine, void** ptr) {
  if (ptr == nullptr) return fail(Result::kInvalidArgument, "opencl alloc: null output pointer");
  *ptr = nullptr;
  if (fine && !rt_->fineSvm()) {
    return fail(Result::kInvalidUsage,
                "opencl alloc: the device of '%s' has no fine-grained SVM; unset MIXCCL_OPENCL_SVM or set it to "
                "coarse",
                rt_->platformName().c_str());
  }
  const cl_svm_mem_flags flags = CL_MEM_READ_WRITE | (fine ? CL_MEM_SVM_FINE_GRAIN_BUFFER : 0);
  void* p = rt_->svm().alloc(flags, bytes == 0 ? 1 : bytes);
  if (p == nullptr) {
    return fail(Result::kSystemError,
                "opencl alloc: clSVMAlloc of %zu bytes (%s-grained) failed on '%s'; reduce the buffer sizes or free "
                "device memory",
                bytes, fine ? "fine" : "coarse", rt_->platformName().c_str());
  }
  rt_->addRange(Range{RangeKind::kSvm, reinterpret_cast<uintptr_t>(p), bytes == 0 ? 1 : bytes, nullptr, false});
  *ptr = p;
  MIXCCL_TRACE(log::kAlloc, "opencl alloc: %zu bytes of %s SVM at %p", bytes, fine ? "fine" : "coarse", p);
  return Result::kSuccess;
}

Result OpenclBackend::alloc(size_t bytes, void** ptr) {
  const std::string& kind = config::getString(config::Knob::kOpenclSvm);
  if (kind != "coarse" && kind != "fine") {
    if (ptr != nullptr) *ptr = nullptr;
    return fail(Result::kInvalidArgument, "opencl alloc: %s='%s' must be coarse or fine",
                config::name(config::Knob::kOpenclSvm), kind.c_str());
  }
  return allocSvm(bytes, kind == "fine", ptr);
}

Result OpenclBackend::free(void* ptr) {
  if (ptr == nullptr) return Result::kSuccess;
  if (!rt_->removeRange(
          reinterpret_cast<uintptr_t>(ptr), [](const Range& r) { return r.kind == RangeKind::kSvm; }, nullptr)) {
    return fail(Result::kInvalidArgument,
                "opencl free: %p was not returned by this backend's alloc (or was freed already)", ptr);
  }
  rt_->svm().free(ptr);
  return Result::kSuccess;
}

Result OpenclBackend::allocStaging(size_t bytes, void** ptr) {
  if (ptr == nullptr) return fail(Result::kInvalidArgument, "opencl allocStaging: null output pointer");
  *ptr = nullptr;
  const size_t n = bytes == 0 ? 1 : bytes;
  if (rt_->fineSvm()) {
    void* p = rt_->svm().alloc(CL_MEM_READ_WRITE | CL_MEM_SVM_FINE_GRAIN_BUFFER, n);
    if (p == nullptr) {
      return fail(Result::kSystemError, "opencl allocStaging: clSVMAlloc of %zu fine-grained bytes failed", bytes);
    }
    rt_->addRange(Range{RangeKind::kSvmStaging, reinterpret_cast<uintptr_t>(p), n, nullptr, false});
    *ptr = p;
    return Result::kSuccess;
  }
  // No fine-grained SVM: page-aligned host memory with a cl_mem over it, as registerHost does.
  void* p = nullptr;
  const long page = sysconf(_SC_PAGESIZE);
  if (posix_memalign(&p, page > 0 ? static_cast<size_t>(page) : 4096, n) != 0) {
    return fail(Result::kSystemError, "opencl allocStaging: could not allocate %zu bytes of host memory", bytes);
  }
  cl_mem mem = nullptr;
  if (rt_->zeroCopyHost()) {
    Result r = hostPtrBuffer(rt_->context(), p, n, "clCreateBuffer over staging memory", &mem);
    if (r != Result::kSuccess) {
      std::free(p);
      return r;
    }
  }
  rt_->addRange(Range{RangeKind::kRegistered, reinterpret_cast<uintptr_t>(p), n, mem, true});
  *ptr = p;
  return Result::kSuccess;
}

Result OpenclBackend::freeStaging(void* ptr) {
  if (ptr == nullptr) return Result::kSuccess;
  Range r;
  const bool found = rt_->removeRange(
      reinterpret_cast<uintptr_t>(ptr),
      [](const Range& x) {
        return x.kind == RangeKind::kSvmStaging || (x.kind == RangeKind::kRegistered && x.ownsHostMemory);
      },
      &r);
  if (!found) {
    return fail(Result::kInvalidArgument, "opencl freeStaging: %p was not returned by allocStaging (or was freed)",
                ptr);
  }
  if (r.kind == RangeKind::kSvmStaging) {
    rt_->svm().free(ptr);
  } else {
    if (r.mem != nullptr) clReleaseMemObject(r.mem);
    std::free(ptr);
  }
  return Result::kSuccess;
}

Result OpenclBackend::registerHost(void* ptr, size_t bytes, HostRegistration** reg) {
  if (reg == nullptr) return fail(Result::kInvalidArgument, "opencl registerHost: null output pointer");
  *reg = nullptr;
  if (ptr == nullptr || bytes == 0) {
    return fail(Result::kInvalidArgument, "opencl registerHost: %s", ptr == nullptr ? "null pointer" : "zero bytes");
  }
  // Only where commands use it (Runtime::resolve): a device with memory of its own works on the
  // host bytes through copies, and a buffer over them would only cost its creation (the driver
  // may pin the pages: about 0.46 ms per 4 MiB on an H100).
  cl_mem mem = nullptr;
  if (rt_->zeroCopyHost()) {
    MIXCCL_TRY(hostPtrBuffer(rt_->context(), ptr, bytes, "clCreateBuffer(CL_MEM_USE_HOST_PTR) in registerHost", &mem));
  }
  auto* r = new OclRegistration{mem, reinterpret_cast<uintptr_t>(ptr), bytes};
  rt_->addRange(Range{RangeKind::kRegistered, r->start, bytes, mem, false});
  *reg = reinterpret_cast<HostRegistration*>(r);
  return Result::kSuccess;
}

Result OpenclBackend::unregisterHost(HostRegistration* reg) {
  if (reg == nullptr) return Result::kSuccess;
  auto* r = reinterpret_cast<OclRegistration*>(reg);
  cl_mem mem = r->mem;
  const size_t bytes = r->bytes;
  // Ranges are found by their start; without a buffer (mem null) the length tells registrations apart.
  if (!rt_->removeRange(
          r->start,
          [mem, bytes](const Range& x) {
            return x.kind == RangeKind::kRegistered && x.mem == mem && x.bytes == bytes && !x.ownsHostMemory;
          },
          nullptr)) {
    return fail(Result::kInvalidArgument, "opencl unregisterHost: registration %p is unknown", static_cast<void*>(reg));
  }
  if (mem != nullptr) clReleaseMemObject(mem);  // kernels still queued keep their own reference
  delete r;
  return Result::kSuccess;
}

// ---- queues and work ---------------------------------------------------------------------------

cl_command_queue OpenclBackend::queueOf(WorkQueue* queue) const {
  return queue == nullptr ? rt_->internalQueue() : reinterpret_cast<OclQueue*>(queue)->q;
}

Result OpenclBackend::openQueue(void* userStream, WorkQueue** queue) {
  if (queue == nullptr) return fail(Result::kInvalidArgument, "opencl openQueue: null output pointer");
  *queue = nullptr;
  MIXCCL_TRY(checkStream(userStream));
  cl_int err = CL_SUCCESS;
  cl_command_queue q = clCreateCommandQueueWithProperties(rt_->context(), rt_->device(), nullptr, &err);
  if (q == nullptr || err != CL_SUCCESS) return clFail(err, "clCreateCommandQueueWithProperties (work queue)");
  *queue = reinterpret_cast<WorkQueue*>(new OclQueue{q});
  return Result::kSuccess;
}

Result OpenclBackend::closeQueue(WorkQueue* queue) {
  if (queue == nullptr) return Result::kSuccess;
  auto* q = reinterpret_cast<OclQueue*>(queue);
  // Work still queued must not outlive the memory it uses; it is bounded by the work itself.
  cl_int err = clFinish(q->q);
  if (q->last != nullptr) clReleaseEvent(q->last);
  clReleaseCommandQueue(q->q);
  delete q;
  if (err != CL_SUCCESS) return clFail(err, "clFinish on a closing work queue");
  return Result::kSuccess;
}

Result OpenclBackend::finish(cl_command_queue q, cl_event last, bool wait, const char* what) {
  cl_int err = clFlush(q);
  if (err == CL_SUCCESS && wait && last != nullptr) {
    err = clWaitForEvents(1, &last);
    cl_int status = CL_COMPLETE;
    if (err == CL_SUCCESS || err == CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST) {
      clGetEventInfo(last, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status, nullptr);
      if (status < 0) err = status;
    }
  }
  if (last != nullptr) clReleaseEvent(last);
  if (err != CL_SUCCESS) return clFail(err, what);
  return Result::kSuccess;
}

Result OpenclBackend::complete(WorkQueue* queue, cl_command_queue q, cl_event last, const char* what) {
  if (queue == nullptr || last == nullptr) return finish(q, last, queue == nullptr, what);
  auto* wq = reinterpret_cast<OclQueue*>(queue);
  if (wq->last != nullptr) clReleaseEvent(wq->last);
  wq->last = last;
  return finish(q, nullptr, false, what);
}

Result OpenclBackend::enqueueCopy(cl_command_queue q, const Operand& dst, const Operand& src, size_t bytes,
                                  cl_event* ev) {
  cl_int err = CL_SUCCESS;
  if (dst.kind != Operand::kMem && src.kind != Operand::kMem) {
    // SVM and plain host pointers in any mix (clEnqueueSVMMemcpy accepts host pointers).
    err = clEnqueueSVMMemcpy(q, CL_FALSE, const_cast<void*>(dst.ptr), src.ptr, bytes, 0, nullptr, ev);
    if (err != CL_SUCCESS) return clFail(err, "clEnqueueSVMMemcpy");
  } else if (dst.kind == Operand::kMem && src.kind == Operand::kHost) {
    err = clEnqueueWriteBuffer(q, dst.mem, CL_FALSE, dst.offset, bytes, src.ptr, 0, nullptr, ev);
    if (err != CL_SUCCESS) return clFail(err, "clEnqueueWriteBuffer into registered memory");
  } else if (dst.kind == Operand::kHost && src.kind == Operand::kMem) {
    err = clEnqueueReadBuffer(q, src.mem, CL_FALSE, src.offset, bytes, const_cast<void*>(dst.ptr), 0, nullptr, ev);
    if (err != CL_SUCCESS) return clFail(err, "clEnqueueReadBuffer from registered memory");
  } else {
    cl_kernel k = nullptr;
    MIXCCL_TRY(rt_->copyKernel(&k));
    const KernelOperand operands[] = {{0, 1, dst}, {2, 3, src}};
    std::lock_guard<std::mutex> lock(rt_->kernelMu());
    MIXCCL_TRY(setArg<cl_ulong>(k, 4, bytes));
    return ocl::launchKernel(*rt_, q, k, bytes, 1, operands, 2, ev, "clEnqueueNDRangeKernel(copy_bytes)");
  }
  return Result::kSuccess;
}

Result OpenclBackend::copy(void* dst, const void* src, size_t bytes, WorkQueue* queue) {
  if (bytes == 0 || dst == src) return Result::kSuccess;
  if (dst == nullptr || src == nullptr) {
    return fail(Result::kInvalidArgument, "opencl copy: null %s pointer for %zu bytes",
                dst == nullptr ? "destination" : "source", bytes);
  }
  const cl_command_queue q = queueOf(queue);
  Operand d = rt_->resolve(dst, bytes);
  Operand s = rt_->resolve(src, bytes);
  OperandGuard guard{{&d, &s}};
  const auto du = reinterpret_cast<uintptr_t>(dst);
  const auto su = reinterpret_cast<uintptr_t>(src);
  cl_event last = nullptr;
  if (du < su + bytes && su < du + bytes) {
    // Overlap (memmove semantics, as the host backend): through a temporary SVM buffer, freed
    // on the queue after the second copy.
    void* tmp = rt_->svm().alloc(CL_MEM_READ_WRITE, bytes);
    if (tmp == nullptr)
      return fail(Result::kSystemError, "opencl copy: no %zu bytes of SVM for an overlapping copy", bytes);
    Operand t;
    t.kind = Operand::kSvm;
    t.ptr = tmp;
    Result r = enqueueCopy(q, t, s, bytes, nullptr);
    if (r == Result::kSuccess) r = enqueueCopy(q, d, t, bytes, nullptr);
    rt_->svm().freeAfter(q, tmp, &last);
    if (r != Result::kSuccess) {
      (void)finish(q, last, true, "opencl copy cleanup");
      return r;
    }
  } else {
    MIXCCL_TRY(enqueueCopy(q, d, s, bytes, &last));
  }
  return complete(queue, q, last, "opencl copy");
}

Result OpenclBackend::reduce(void* dst, const void* a, const void* b, size_t count, const ReduceSpec& spec,
                             bool applyPre, bool applyPost, WorkQueue* queue) {
  return reduceImpl(dst, nullptr, a, b, count, spec, applyPre, applyPost, queue);
}

Result OpenclBackend::reduceDual(void* dst, void* dst2, const void* a, const void* b, size_t count,
                                 const ReduceSpec& spec, bool applyPre, bool applyPost, WorkQueue* queue) {
  return reduceImpl(dst, dst2, a, b, count, spec, applyPre, applyPost, queue);
}

Result OpenclBackend::reduceImpl(void* dst, void* dst2, const void* a, const void* b, size_t count,
                                 const ReduceSpec& spec, bool applyPre, bool applyPost, WorkQueue* queue) {
  MIXCCL_TRY(validateReduce(dst, b, count, spec));
  if (count == 0) return Result::kSuccess;
  const bool pre = applyPre && spec.preMul;
  const bool post = applyPost && spec.divisor > 1;
  const size_t size = dataTypeSize(spec.dtype);
  const size_t bytes = count * size;
  // Nothing to compute: copy the bits, as the host does (no NaN quietening).
  if (a == nullptr && !pre && !post) {
    MIXCCL_TRY(copy(dst, b, bytes, queue));
    return dst2 != nullptr ? copy(dst2, b, bytes, queue) : Result::kSuccess;
  }
  const cl_int flags = (a != nullptr ? 1 : 0) | (pre ? 2 : 0) | (post ? 4 : 0);
  cl_kernel k = nullptr;
  MIXCCL_TRY(rt_->reduceKernel(spec.dtype, spec.op, flags, &k));
  const cl_command_queue q = queueOf(queue);

  // Operands the kernel cannot take directly (plain host memory, misaligned) go through one SVM
  // bounce allocation, a slot per operand. On a device that shares host memory, suitably aligned
  // plain host memory (transport slots, mostly) is wrapped in a zero-copy buffer instead: no
  // allocation, no copy in or out, two commands fewer per step.
  // ops[3] is the second destination: the kernel stores into it only when it can take it directly
  // (SVM, or aligned host memory it can wrap); otherwise the result is copied there afterwards.
  Operand ops[4] = {rt_->resolve(dst, bytes), a ? rt_->resolve(a, bytes) : Operand{}, rt_->resolve(b, bytes),
                    dst2 ? rt_->resolve(dst2, bytes) : Operand{}};
  OperandGuard guard{{&ops[0], &ops[1], &ops[2], &ops[3]}};
  const void* ptrs[4] = {dst, a, b, dst2};
  bool bounce[4] = {};
  size_t nBounce = 0;
  for (int i = 0; i < 4; ++i) {
    if (ptrs[i] == nullptr) continue;
    const auto addr = reinterpret_cast<uintptr_t>(ptrs[i]);
    if (ops[i].kind == Operand::kHost && rt_->zeroCopyHost() && addr % rt_->hostPtrAlign() == 0) {
      MIXCCL_TRY(wrapHost(rt_->context(), const_cast<void*>(ptrs[i]), bytes, &ops[i]));
    }
    bounce[i] = ops[i].kind == Operand::kHost || addr % size != 0;
    nBounce += bounce[i] && i < 3 ? 1 : 0;
  }
  const bool dual = dst2 != nullptr && !bounce[3];
  const size_t slot = (bytes + 127) / 128 * 128;
  ocl::StagingPool::Block staged;
  if (nBounce > 0) MIXCCL_TRY(rt_->staging().take(slot * nBounce, &staged));
  void* const tmp = staged.ptr;
  Operand use[3] = {ops[0], ops[1], ops[2]};
  Result r = Result::kSuccess;
  // The event of the last command enqueued from the kernel on (complete() keeps it for record()).
  cl_event tail = nullptr;
  auto tailOut = [&tail]() {
    if (tail != nullptr) clReleaseEvent(tail);
    tail = nullptr;
    return &tail;
  };
  size_t next = 0;
  for (int i = 0; i < 3 && r == Result::kSuccess; ++i) {
    if (!bounce[i]) continue;
    use[i] = Operand{};
    use[i].kind = Operand::kSvm;
    use[i].ptr = static_cast<uint8_t*>(tmp) + slot * next++;
    if (i > 0) r = enqueueCopy(q, use[i], ops[i], bytes, nullptr);  // inputs in; dst is copied out after
  }
  if (a == nullptr) use[1] = use[2];  // any valid pointer; the kernel does not read it

  if (r == Result::kSuccess) {
    uint64_t scalarBits = 0;
    std::memcpy(&scalarBits, spec.scalar, sizeof(scalarBits));
    uint64_t divBits = 0;
    if (spec.dtype == DataType::kFloat64) {
      const double d = static_cast<double>(spec.divisor);
      std::memcpy(&divBits, &d, sizeof(d));
    } else {
      const float f = static_cast<float>(spec.divisor);
      uint32_t u = 0;
      std::memcpy(&u, &f, sizeof(f));
      divBits = u;
    }
    std::lock_guard<std::mutex> lock(rt_->kernelMu());
    r = [&]() -> Result {
      MIXCCL_TRY(setArg<cl_ulong>(k, ocl::kArgCount, count));
      MIXCCL_TRY(setArg<cl_int>(k, ocl::kArgOp, static_cast<cl_int>(spec.op)));
      MIXCCL_TRY(setArg<cl_int>(k, ocl::kArgFlags, flags));
      MIXCCL_TRY(setArg<cl_ulong>(k, ocl::kArgScalar, scalarBits));
      MIXCCL_TRY(setArg<cl_ulong>(k, ocl::kArgDivisor, spec.divisor));
      MIXCCL_TRY(setArg<cl_ulong>(k, ocl::kArgDivBits, divBits));
      MIXCCL_TRY(setArg<cl_int>(k, ocl::kArgDual, dual ? 1 : 0));
      const KernelOperand operands[] = {{ocl::kArgDst, ocl::kArgDstOff, use[0]},
                                        {ocl::kArgA, ocl::kArgAOff, use[1]},
                                        {ocl::kArgB, ocl::kArgBOff, use[2]},
                                        {ocl::kArgDst2, ocl::kArgDst2Off, dual ? ops[3] : use[0]}};
      return ocl::launchKernel(*rt_, q, k, count, size, operands, 4, tailOut(), "clEnqueueNDRangeKernel(reduce)");
    }();
  }
  if (r == Result::kSuccess && bounce[0]) r = enqueueCopy(q, ops[0], use[0], bytes, tailOut());
  if (r == Result::kSuccess && dst2 != nullptr && !dual) r = enqueueCopy(q, ops[3], use[0], bytes, tailOut());
  cl_event last = nullptr;
  if (r == Result::kSuccess && (queue != nullptr || tmp != nullptr)) {
    std::swap(last, tail);
  } else if (tail != nullptr) {
    clReleaseEvent(tail);
  }
  if (last == nullptr) {
    // A caller that waits (or cleans up after a failure) needs an event to wait for.
    cl_int err = clEnqueueMarkerWithWaitList(q, 0, nullptr, &last);
    if (err != CL_SUCCESS && r == Result::kSuccess) r = clFail(err, "clEnqueueMarkerWithWaitList");
  }
  // The queue is in order, so `last` follows every command that used the staging block; without
  // one, the block goes back only once the queue has drained.
  if (tmp != nullptr) {
    if (last == nullptr) clFinish(q);
    rt_->staging().give(staged, last, q);
  }
  if (r != Result::kSuccess) {
    // Let whatever was enqueued finish before the caller reuses the buffers.
    (void)finish(q, last, true, "opencl reduce cleanup");
    return r;
  }
  return complete(queue, q, last, "opencl reduce");
}

// ---- fences and gates --------------------------------------------------------------------------

Result OpenclBackend::record(WorkQueue* queue, Fence** fence) {
  if (fence == nullptr) return fail(Result::kInvalidArgument, "opencl record: null output pointer");
  *fence = nullptr;
  if (queue == nullptr) return Result::kSuccess;
  auto* wq = reinterpret_cast<OclQueue*>(queue);
  cl_command_queue q = wq->q;
  cl_event ev = wq->last;
  wq->last = nullptr;
  if (ev != nullptr) {
    *fence = reinterpret_cast<Fence*>(new OclFence{ev});
    return Result::kSuccess;
  }
  cl_int err = clEnqueueMarkerWithWaitList(q, 0, nullptr, &ev);
  if (err != CL_SUCCESS) return clFail(err, "clEnqueueMarkerWithWaitList (record)");
  clFlush(q);
  *fence = reinterpret_cast<Fence*>(new OclFence{ev});
  return Result::kSuccess;
}

Result OpenclBackend::markStart(void* stream, Fence** fence) {
  if (fence == nullptr) return fail(Result::kInvalidArgument, "opencl markStart: null output pointer");
  *fence = nullptr;
  if (stream == nullptr) return Result::kSuccess;
  MIXCCL_TRY(checkStream(stream));
  auto q = static_cast<cl_command_queue>(stream);
  // A command whose dependencies are met when it is enqueued (a marker on an idle queue) is run by
  // POCL inside the enqueue call: ~10 us on the caller's thread, most of the enqueue's cost. On an
  // in-order queue the marker follows the earlier commands anyway, so it may also wait on a user
  // event that the progress thread completes on its first query: then nothing is ready here and
  // the run happens there. An out-of-order queue needs the empty wait list ("all earlier
  // commands"), so it keeps the plain marker. (On an H100 the plain marker made a 2-rank 8 B
  // all-reduce slower, 515-566 us against 305-318 with 20 calls queued, so every in-order queue
  // keeps the permit.)
  cl_command_queue_properties props = 0;
  cl_int err = clGetCommandQueueInfo(q, CL_QUEUE_PROPERTIES, sizeof(props), &props, nullptr);
  if (err != CL_SUCCESS) return clFail(err, "clGetCommandQueueInfo (markStart)");
  auto f = std::make_unique<OclFence>();
  if ((props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE) == 0) {
    f->permit = clCreateUserEvent(rt_->context(), &err);
    if (f->permit == nullptr || err != CL_SUCCESS) return clFail(err, "clCreateUserEvent (markStart)");
  }
  err =
      clEnqueueMarkerWithWaitList(q, f->permit != nullptr ? 1 : 0, f->permit != nullptr ? &f->permit : nullptr, &f->ev);
  if (err != CL_SUCCESS) {
    grantPermit(f.get());
    return clFail(err, "clEnqueueMarkerWithWaitList on the user's queue (markStart)");
  }
  clFlush(q);
  *fence = reinterpret_cast<Fence*>(f.release());
  return Result::kSuccess;
}

Result OpenclBackend::query(Fence* fence) {
  if (fence == nullptr) return Result::kSuccess;
  auto* f = reinterpret_cast<OclFence*>(fence);
  grantPermit(f);
  cl_int status = CL_COMPLETE;
  cl_int err = clGetEventInfo(f->ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status, nullptr);
  if (err != CL_SUCCESS) return clFail(err, "clGetEventInfo (query)");
  if (status < 0) {
    return fail(Result::kSystemError,
                "OpenCL backend: device work behind a fence failed with status %d (%s); the collective's data is "
                "not valid",
                status, clErrorName(status));
  }
  if (status == CL_COMPLETE) return Result::kSuccess;
  // A CPU device computes on the cores of the thread that polls it: a caller that spins on this
  // fence (the engine spins up to ~20000 polls when ranks <= cores) takes the core from the very
  // work it waits for. Yielding here hands it to the device's worker threads.
  if (rt_->cpuDevice()) sched_yield();
  return Result::kInProgress;
}

void OpenclBackend::releaseFence(Fence* fence) {
  if (fence == nullptr) return;
  auto* f = reinterpret_cast<OclFence*>(fence);
  grantPermit(f);  // never queried (the batch failed first): the user's queue must go on
  clReleaseEvent(f->ev);
  delete f;
}

Result OpenclBackend::holdStream(void* stream, StreamGate** gate) {
  if (gate == nullptr) return fail(Result::kInvalidArgument, "opencl holdStream: null output pointer");
  *gate = nullptr;
  if (stream == nullptr) return Result::kSuccess;
  MIXCCL_TRY(checkStream(stream));
  auto q = static_cast<cl_command_queue>(stream);
  cl_int err = CL_SUCCESS;
  cl_event user = clCreateUserEvent(rt_->context(), &err);
  if (user == nullptr || err != CL_SUCCESS) return clFail(err, "clCreateUserEvent (holdStream)");
  err = clEnqueueBarrierWithWaitList(q, 1, &user, nullptr);
  if (err != CL_SUCCESS) {
    clSetUserEventStatus(user, CL_COMPLETE);
    clReleaseEvent(user);
    return clFail(err, "clEnqueueBarrierWithWaitList on the user's queue (holdStream)");
  }
  clFlush(q);
  clRetainCommandQueue(q);
  *gate = reinterpret_cast<StreamGate*>(new OclGate{user, q});
  return Result::kSuccess;
}

Result OpenclBackend::releaseStream(StreamGate* gate) {
  if (gate == nullptr) return Result::kSuccess;
  auto* g = reinterpret_cast<OclGate*>(gate);
  // Always CL_COMPLETE, also when the collective failed: later work on the stream must still run.
  cl_int err = clSetUserEventStatus(g->user, CL_COMPLETE);
  clFlush(g->q);
  clReleaseEvent(g->user);
  clReleaseCommandQueue(g->q);
  delete g;
  if (err != CL_SUCCESS) return clFail(err, "clSetUserEventStatus (releaseStream)");
  return Result::kSuccess;
}

// ---- factory and the application's context ------------------------------------------------------

Result makeOpenclBackend(std::unique_ptr<DeviceBackend>* out) {
  if (out == nullptr) return fail(Result::kInvalidArgument, "makeOpenclBackend: null output pointer");
  ocl::Runtime* rt = nullptr;
  MIXCCL_TRY(ocl::Runtime::get(&rt));
  *out = std::make_unique<OpenclBackend>(rt);
  return Result::kSuccess;
}

Result openclUseContext(cl_context context, cl_device_id device) {
  // A pointer that is no OpenCL object (a stale or mistyped handle) would crash inside
  // clGetContextInfo: refuse it first, as checkStream does with streams.
  if (context != nullptr && !isOpenclObject(context)) {
    return fail(Result::kInvalidArgument,
                "mixcclOpenclUseContext: context %p is not an OpenCL object of any platform here (a released or "
                "mistyped handle?); pass the cl_context your application created",
                static_cast<void*>(context));
  }
  return ocl::Runtime::useContext(context, device);
}

Result openclGetContext(cl_context* context, cl_device_id* device) {
  if (context == nullptr && device == nullptr) {
    return fail(Result::kInvalidArgument, "mixcclOpenclGetContext: both outputs are NULL");
  }
  ocl::Runtime* rt = nullptr;
  MIXCCL_TRY(ocl::Runtime::get(&rt));
  if (context != nullptr) *context = rt->context();
  if (device != nullptr) *device = rt->device();
  return Result::kSuccess;
}

}  // namespace mixccl
