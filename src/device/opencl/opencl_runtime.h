// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// The process-wide OpenCL state every OpenclBackend shares: the platform, device and context, an
// internal in-order queue, the built program, and the table of memory ranges the backend knows
// (SVM allocations, staging, host registrations).
//
// Why process-wide: memory from ncclMemAlloc must be usable with every communicator of the
// process, and SVM pointers are valid only in the context that made them, so all communicators
// must share one context. The runtime is created on first use (the first backend, or the
// application's query through include/mixccl/opencl.h) and lives until the process exits; it is
// deliberately never destroyed, since releasing OpenCL objects from static destructors races the
// ICD loader's own teardown.
//
// Device choice: the application's context (openclUseContext, before first use) or
// MIXCCL_OPENCL_DEVICE=platform:device (default 0:0).
//
// Thread-safety: every function may be called from any thread. The range table is guarded by a
// shared mutex; kernel argument setting + enqueue is serialised by kernelMu (cl_kernel objects are
// not thread-safe), held only inside one call.

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#include <CL/cl.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <utility>

#include "common/result.h"
#include "common/types.h"
#include "src/device/opencl/opencl_kernels.h"
#include "src/device/opencl/staging_pool.h"
#include "src/device/opencl/svm_heap.h"

namespace mixccl::ocl {

// Readable name of an OpenCL error code, e.g. "CL_OUT_OF_RESOURCES".
const char* clErrorName(cl_int err);

enum class RangeKind {
  kSvm,         // alloc(): device memory (memKind kDevice); passed to kernels as an SVM pointer
  kSvmStaging,  // allocStaging() with fine-grained SVM: host-usable (kHost); an SVM pointer to kernels
  kRegistered,  // registerHost() or a staging fallback: a cl_mem over host memory (kHost)
};

struct Range {
  RangeKind kind;
  uintptr_t start;
  size_t bytes;
  cl_mem mem;           // kRegistered only
  bool ownsHostMemory;  // kRegistered staging fallback: the host memory is ours to free
};

// How an operand of a kernel is passed.
struct Operand {
  enum Kind { kSvm, kMem, kHost } kind = kHost;
  const void* ptr = nullptr;  // kSvm: the pointer itself; kHost: the host pointer
  cl_mem mem = nullptr;       // kMem: retained by resolve(); release with releaseOperand()
  size_t offset = 0;          // kMem: byte offset into mem
};

class Runtime {
 public:
  // The runtime, created on first call. Fails (and fails again on later calls, with the same
  // message) when no usable OpenCL device exists or MIXCCL_OPENCL_DEVICE is bad.
  static Result get(Runtime** out);
  // Records the application's context and device for the runtime to use; kInvalidUsage once the
  // runtime exists. Retains the context.
  static Result useContext(cl_context context, cl_device_id device);

  cl_platform_id platform() const { return platform_; }
  cl_device_id device() const { return device_; }
  cl_context context() const { return context_; }
  int deviceIndex() const { return deviceIndex_; }
  const std::string& platformName() const { return platformName_; }
  bool fineSvm() const { return fineSvm_; }
  bool fp64() const { return fp64_; }
  // Kernels can use host memory in place (a CPU device, or one that shares host memory): a
  // CL_MEM_USE_HOST_PTR buffer over it is then zero-copy. Pointers must be aligned to
  // hostPtrAlign() bytes (CL_DEVICE_MEM_BASE_ADDR_ALIGN), or the implementation may copy.
  bool zeroCopyHost() const { return zeroCopyHost_; }
  size_t hostPtrAlign() const { return hostPtrAlign_; }
  // The device runs on the host's own cores (POCL's pthread device, say).
  bool cpuDevice() const { return cpuDevice_; }
  cl_command_queue internalQueue() const { return internalQueue_; }
  // The ICD dispatch-table pointer every object of this platform starts with (checkStream).
  const void* dispatch() const { return dispatch_; }

  // The built program's kernels (built on first call; the build log is in the failure message).
  // `op`: kSum..kMin; `flags`: 1 = a present, 2 = pre(), 4 = post() (opencl_kernels.h).
  Result reduceKernel(DataType dtype, RedOpKind op, int flags, cl_kernel* out);
  Result copyKernel(cl_kernel* out);
  std::mutex& kernelMu() { return kernelMu_; }
  // POCL before 7.0 needs the widest launch of each kernel and work-group size first
  // (kernel_launch.h): needsWidestLaunch is true on such a platform until noteWidestLaunch records
  // the pair (after that launch succeeded, so a failed one is tried again rather than skipped),
  // false on every other platform. The caller holds kernelMu.
  bool needsWidestLaunch(cl_kernel k, size_t local) const;
  void noteWidestLaunch(cl_kernel k, size_t local);
  // A queue for those launches alone (the internal queue may wait behind a user's event) and
  // kMaxLaunchBytes of SVM for their operands, made on first call. The caller holds
  // kernelMu.
  Result widestLaunchKit(cl_command_queue* q, void** scratch);
  // Every SVM allocation and free of the context (svm_heap.h: one driver needs them serialised).
  SvmHeap& svm() { return *svm_; }
  // Reused SVM blocks for operands reduce() stages (staging_pool.h).
  StagingPool& staging() { return *staging_; }

  // Command queues checkStream() accepted (of this context and device). A listed queue is
  // retained, so its address cannot be reused by another object while it is listed: the same
  // pointer is the same queue, and a later call need not look at it again (the check reads
  // memory through a system call and asks the queue twice: about 18 us of a 35 us enqueueing
  // call when its caches are cold). At most kKnownQueues; the oldest is released first. knownQueue
  // takes no lock.
  static constexpr size_t kKnownQueues = 16;
  bool knownQueue(const void* q) const;
  void rememberQueue(cl_command_queue q);

  // Range table.
  void addRange(const Range& r);
  // Removes the first range that starts at `start` and satisfies `match`.
  bool removeRange(uintptr_t start, const std::function<bool(const Range&)>& match, Range* removed);
  // The range containing [p, p + bytes) (bytes 0 counts as 1), preferring SVM kinds.
  bool findRange(const void* p, size_t bytes, Range* out) const;
  // How to pass [p, p + bytes) to a kernel.
  Operand resolve(const void* p, size_t bytes) const;
  static void releaseOperand(const Operand& op);

 private:
  Runtime() = default;
  Result init();
  Result pickDevice();
  Result buildProgram();
  bool findRangeLocked(const void* p, size_t bytes, Range* out) const;

  cl_platform_id platform_ = nullptr;
  cl_device_id device_ = nullptr;
  cl_context context_ = nullptr;
  int deviceIndex_ = 0;
  std::string platformName_;
  bool fineSvm_ = false;
  bool fp64_ = false;
  bool zeroCopyHost_ = false;
  bool cpuDevice_ = false;
  size_t hostPtrAlign_ = 128;
  cl_command_queue internalQueue_ = nullptr;
  const void* dispatch_ = nullptr;
  std::unique_ptr<SvmHeap> svm_;
  std::unique_ptr<StagingPool> staging_;  // after svm_, which it uses

  std::once_flag buildOnce_;
  Result buildResult_ = Result::kSuccess;
  std::string buildError_;
  cl_program program_ = nullptr;
  cl_kernel reduceKernels_[kNumDataTypes][kNumReduceOps][kNumReduceVariants] = {};
  cl_kernel copyKernel_ = nullptr;
  std::mutex kernelMu_;
  bool widestFirst_ = false;                           // POCL before 7.0
  std::set<std::pair<cl_kernel, size_t>> launchedOf_;  // noteWidestLaunch's pairs, under kernelMu_
  cl_command_queue widestQueue_ = nullptr;
  void* widestScratch_ = nullptr;

  std::array<std::atomic<const void*>, kKnownQueues> knownQueues_{};
  std::mutex knownMu_;  // writers of knownQueues_
  size_t knownNext_ = 0;

  mutable std::shared_mutex rangesMu_;
  std::multimap<uintptr_t, Range> ranges_;
  size_t maxRangeBytes_ = 0;
};

}  // namespace mixccl::ocl
