// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "src/device/opencl/opencl_runtime.h"

#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/config.h"
#include "common/log.h"
#include "src/device/opencl/opencl_kernels.h"

namespace mixccl::ocl {
namespace {

// The application's context (useContext), consumed by the first init.
std::mutex gMu;
Runtime* gRuntime = nullptr;  // never destroyed (see the header)
bool gInitFailed = false;
Result gInitResult = Result::kSuccess;
std::string gInitError;
cl_context gSharedContext = nullptr;
cl_device_id gSharedDevice = nullptr;

std::string deviceString(cl_device_id dev, cl_device_info what) {
  size_t n = 0;
  if (clGetDeviceInfo(dev, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "?";
  std::string s(n, '\0');
  if (clGetDeviceInfo(dev, what, n, s.data(), nullptr) != CL_SUCCESS) return "?";
  s.resize(strlen(s.c_str()));
  return s;
}

std::string platformString(cl_platform_id p, cl_platform_info what) {
  size_t n = 0;
  if (clGetPlatformInfo(p, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "?";
  std::string s(n, '\0');
  if (clGetPlatformInfo(p, what, n, s.data(), nullptr) != CL_SUCCESS) return "?";
  s.resize(strlen(s.c_str()));
  return s;
}

// Whether CL_PLATFORM_VERSION ("OpenCL 3.0 PoCL 3.1+debian ...") names POCL before 7.0, whose
// work-group function cache needs the widest launch first (kernel_launch.h).
bool poclBefore7(const std::string& version) {
  const size_t at = version.find("PoCL ");
  return at != std::string::npos && std::atoi(version.c_str() + at + 5) < 7;
}

// An in-order queue of the runtime's own; *out stays null on failure.
Result newQueue(cl_context context, cl_device_id device, cl_command_queue* out) {
  cl_int err = CL_SUCCESS;
  cl_command_queue q = clCreateCommandQueueWithProperties(context, device, nullptr, &err);
  if (q == nullptr || err != CL_SUCCESS) {
    return fail(Result::kUnhandledDeviceError, "OpenCL backend: clCreateCommandQueueWithProperties failed (%s)",
                clErrorName(err));
  }
  *out = q;
  return Result::kSuccess;
}

std::vector<cl_platform_id> platforms() {
  cl_uint n = 0;
  if (clGetPlatformIDs(0, nullptr, &n) != CL_SUCCESS || n == 0) return {};
  std::vector<cl_platform_id> v(n);
  if (clGetPlatformIDs(n, v.data(), nullptr) != CL_SUCCESS) return {};
  return v;
}

std::vector<cl_device_id> devices(cl_platform_id p) {
  cl_uint n = 0;
  if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &n) != CL_SUCCESS || n == 0) return {};
  std::vector<cl_device_id> v(n);
  if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, n, v.data(), nullptr) != CL_SUCCESS) return {};
  return v;
}

// "0:0", "1:2" or "2" (device 2 of platform 0).
bool parseDeviceKnob(const std::string& text, int* platform, int* device) {
  const char* s = text.c_str();
  char* end = nullptr;
  long a = strtol(s, &end, 10);
  if (end == s || a < 0 || a > 1000) return false;
  if (*end == '\0') {
    *platform = 0;
    *device = static_cast<int>(a);
    return true;
  }
  if (*end != ':') return false;
  const char* s2 = end + 1;
  long b = strtol(s2, &end, 10);
  if (end == s2 || *end != '\0' || b < 0 || b > 1000) return false;
  *platform = static_cast<int>(a);
  *device = static_cast<int>(b);
  return true;
}

// Every platform and device, for messages that ask the user to pick another.
std::string listDevices() {
  std::string out;
  const auto plats = platforms();
  for (size_t i = 0; i < plats.size(); ++i) {
    const auto devs = devices(plats[i]);
    for (size_t j = 0; j < devs.size(); ++j) {
      if (!out.empty()) out += ", ";
      out += std::to_string(i) + ":" + std::to_string(j) + " (" + platformString(plats[i], CL_PLATFORM_NAME) + " / " +
             deviceString(devs[j], CL_DEVICE_NAME) + ")";
    }
  }
  return out.empty() ? "none" : out;
}

}  // namespace

const char* clErrorName(cl_int err) {
  switch (err) {
#define MIXCCL_CL_ERR(e) \
  case e:                \
    return #e;
    MIXCCL_CL_ERR(CL_SUCCESS)
    MIXCCL_CL_ERR(CL_DEVICE_NOT_FOUND)
    MIXCCL_CL_ERR(CL_DEVICE_NOT_AVAILABLE)
    MIXCCL_CL_ERR(CL_COMPILER_NOT_AVAILABLE)
    MIXCCL_CL_ERR(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    MIXCCL_CL_ERR(CL_OUT_OF_RESOURCES)
    MIXCCL_CL_ERR(CL_OUT_OF_HOST_MEMORY)
    MIXCCL_CL_ERR(CL_BUILD_PROGRAM_FAILURE)
    MIXCCL_CL_ERR(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    MIXCCL_CL_ERR(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    MIXCCL_CL_ERR(CL_INVALID_VALUE)
    MIXCCL_CL_ERR(CL_INVALID_DEVICE)
    MIXCCL_CL_ERR(CL_INVALID_CONTEXT)
    MIXCCL_CL_ERR(CL_INVALID_QUEUE_PROPERTIES)
    MIXCCL_CL_ERR(CL_INVALID_COMMAND_QUEUE)
    MIXCCL_CL_ERR(CL_INVALID_HOST_PTR)
    MIXCCL_CL_ERR(CL_INVALID_MEM_OBJECT)
    MIXCCL_CL_ERR(CL_INVALID_BUILD_OPTIONS)
    MIXCCL_CL_ERR(CL_INVALID_PROGRAM)
    MIXCCL_CL_ERR(CL_INVALID_KERNEL_NAME)
    MIXCCL_CL_ERR(CL_INVALID_KERNEL)
    MIXCCL_CL_ERR(CL_INVALID_ARG_INDEX)
    MIXCCL_CL_ERR(CL_INVALID_ARG_VALUE)
    MIXCCL_CL_ERR(CL_INVALID_ARG_SIZE)
    MIXCCL_CL_ERR(CL_INVALID_KERNEL_ARGS)
    MIXCCL_CL_ERR(CL_INVALID_WORK_GROUP_SIZE)
    MIXCCL_CL_ERR(CL_INVALID_GLOBAL_WORK_SIZE)
    MIXCCL_CL_ERR(CL_INVALID_EVENT_WAIT_LIST)
    MIXCCL_CL_ERR(CL_INVALID_EVENT)
    MIXCCL_CL_ERR(CL_INVALID_OPERATION)
    MIXCCL_CL_ERR(CL_INVALID_BUFFER_SIZE)
    MIXCCL_CL_ERR(CL_INVALID_PLATFORM)
#undef MIXCCL_CL_ERR
    case -1001:
      return "CL_PLATFORM_NOT_FOUND_KHR";
    default:
      return "unknown OpenCL error";
  }
}

Result Runtime::get(Runtime** out) {
  std::lock_guard<std::mutex> lock(gMu);
  if (gRuntime != nullptr) {
    *out = gRuntime;
    return Result::kSuccess;
  }
  if (gInitFailed) return fail(gInitResult, "%s", gInitError.c_str());
  auto* rt = new Runtime();
  Result r = rt->init();
  if (r != Result::kSuccess) {
    // The message stays for later calls: the environment decides, and it does not change.
    gInitFailed = true;
    gInitResult = r;
    gInitError = lastFailure();  // processBackend() may be creating us inside a quiet scope
    delete rt;                   // init released what it made
    return r;
  }
  gRuntime = rt;
  *out = rt;
  return Result::kSuccess;
}

Result Runtime::useContext(cl_context context, cl_device_id device) {
  if (context == nullptr || device == nullptr) {
    return fail(Result::kInvalidArgument, "mixcclOpenclUseContext: %s is NULL",
                context == nullptr ? "context" : "device");
  }
  std::lock_guard<std::mutex> lock(gMu);
  if (gRuntime != nullptr || gInitFailed) {
    return fail(Result::kInvalidUsage,
                "mixcclOpenclUseContext: the OpenCL backend is already initialised (a communicator or a query "
                "came first); call it before creating the first communicator");
  }
  cl_uint n = 0;
  cl_int err = clGetContextInfo(context, CL_CONTEXT_NUM_DEVICES, sizeof(n), &n, nullptr);
  if (err != CL_SUCCESS || n == 0) {
    return fail(Result::kInvalidArgument, "mixcclOpenclUseContext: context %p is not a valid OpenCL context (%s)",
                static_cast<void*>(context), clErrorName(err));
  }
  std::vector<cl_device_id> devs(n);
  err = clGetContextInfo(context, CL_CONTEXT_DEVICES, n * sizeof(cl_device_id), devs.data(), nullptr);
  bool found = false;
  for (cl_device_id d : devs) found = found || d == device;
  if (err != CL_SUCCESS || !found) {
    return fail(Result::kInvalidArgument,
                "mixcclOpenclUseContext: device %p is not one of the %u device(s) of context %p; pass a device "
                "the context was created with",
                static_cast<void*>(device), n, static_cast<void*>(context));
  }
  clRetainContext(context);
  if (gSharedContext != nullptr) clReleaseContext(gSharedContext);
  gSharedContext = context;
  gSharedDevice = device;
  return Result::kSuccess;
}

Result Runtime::pickDevice() {
  if (gSharedContext != nullptr) {
    context_ = gSharedContext;  // keeps the reference useContext took
    device_ = gSharedDevice;
    gSharedContext = nullptr;
    gSharedDevice = nullptr;
    cl_int err = clGetDeviceInfo(device_, CL_DEVICE_PLATFORM, sizeof(platform_), &platform_, nullptr);
    if (err != CL_SUCCESS) {
      return fail(Result::kUnhandledDeviceError, "OpenCL backend: the application's device has no platform (%s)",
                  clErrorName(err));
    }
    const auto devs = devices(platform_);
    for (size_t j = 0; j < devs.size(); ++j) {
      if (devs[j] == device_) deviceIndex_ = static_cast<int>(j);
    }
    return Result::kSuccess;
  }
  const std::string& knob = config::getString(config::Knob::kOpenclDevice);
  int pi = 0, di = 0;
  if (!parseDeviceKnob(knob, &pi, &di)) {
    return fail(Result::kInvalidArgument, "OpenCL backend: %s='%s' is not platform:device (e.g. 0:0); devices here: %s",
                config::name(config::Knob::kOpenclDevice), knob.c_str(), listDevices().c_str());
  }
  const auto plats = platforms();
  if (plats.empty()) {
    return fail(Result::kUnhandledDeviceError,
                "OpenCL backend: no OpenCL platform found (is an ICD installed, e.g. pocl-opencl-icd, and listed "
                "in /etc/OpenCL/vendors?)");
  }
  const auto devs = pi < static_cast<int>(plats.size()) ? devices(plats[pi]) : std::vector<cl_device_id>{};
  if (di >= static_cast<int>(devs.size())) {
    return fail(Result::kInvalidArgument, "OpenCL backend: %s=%s names no device; devices here: %s",
                config::name(config::Knob::kOpenclDevice), knob.c_str(), listDevices().c_str());
  }
  platform_ = plats[pi];
  device_ = devs[di];
  deviceIndex_ = di;
  const cl_context_properties props[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(platform_), 0};
  cl_int err = CL_SUCCESS;
  context_ = clCreateContext(props, 1, &device_, nullptr, nullptr, &err);
  if (context_ == nullptr || err != CL_SUCCESS) {
    context_ = nullptr;
    return fail(Result::kUnhandledDeviceError, "OpenCL backend: clCreateContext on device %d:%d failed (%s)", pi, di,
                clErrorName(err));
  }
  return Result::kSuccess;
}

Result Runtime::init() {
  MIXCCL_TRY(pickDevice());
  platformName_ = platformString(platform_, CL_PLATFORM_NAME);
  widestFirst_ = poclBefore7(platformString(platform_, CL_PLATFORM_VERSION));
  const std::string devName = deviceString(device_, CL_DEVICE_NAME);
  cl_device_svm_capabilities svm = 0;
  if (clGetDeviceInfo(device_, CL_DEVICE_SVM_CAPABILITIES, sizeof(svm), &svm, nullptr) != CL_SUCCESS ||
      (svm & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER) == 0) {
    clReleaseContext(context_);
    return fail(Result::kInvalidUsage,
                "OpenCL backend: device '%s' (%s) has no shared virtual memory (OpenCL 2.0 coarse-grained SVM), "
                "which device buffers need; choose another device with MIXCCL_OPENCL_DEVICE",
                devName.c_str(), platformName_.c_str());
  }
  fineSvm_ = (svm & CL_DEVICE_SVM_FINE_GRAIN_BUFFER) != 0;
  cl_device_fp_config dbl = 0;
  fp64_ = clGetDeviceInfo(device_, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof(dbl), &dbl, nullptr) == CL_SUCCESS && dbl != 0;
  // CL_DEVICE_HOST_UNIFIED_MEMORY is deprecated since 2.0 but still answered; a CPU device shares
  // host memory by construction.
  cl_device_type type = 0;
  cl_bool unified = CL_FALSE;
  clGetDeviceInfo(device_, CL_DEVICE_TYPE, sizeof(type), &type, nullptr);
  clGetDeviceInfo(device_, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof(unified), &unified, nullptr);
  cpuDevice_ = (type & CL_DEVICE_TYPE_CPU) != 0;
  const std::string& hostMemory = config::getString(config::Knob::kOpenclHostMemory);
  if (hostMemory != "auto" && hostMemory != "staged") {
    clReleaseContext(context_);
    return fail(Result::kInvalidArgument, "OpenCL backend: %s='%s' must be auto or staged",
                config::name(config::Knob::kOpenclHostMemory), hostMemory.c_str());
  }
  zeroCopyHost_ = (cpuDevice_ || unified == CL_TRUE) && hostMemory == "auto";
  cl_uint alignBits = 0;
  if (clGetDeviceInfo(device_, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof(alignBits), &alignBits, nullptr) == CL_SUCCESS &&
      alignBits >= 8) {
    hostPtrAlign_ = alignBits / 8;
  }
  const Result queued = newQueue(context_, device_, &internalQueue_);
  if (queued != Result::kSuccess) {
    clReleaseContext(context_);
    return queued;
  }
  // ICD rule: every object of a platform starts with the pointer to its dispatch table.
  dispatch_ = *reinterpret_cast<const void* const*>(context_);
  svm_ = std::make_unique<SvmHeap>(context_);
  staging_ = std::make_unique<StagingPool>(*svm_);
  MIXCCL_INFO(log::kInit, "OpenCL backend: %s / %s (device index %d, SVM %s%s, host memory %s%s)",
              platformName_.c_str(), devName.c_str(), deviceIndex_, fineSvm_ ? "coarse+fine" : "coarse",
              fp64_ ? ", fp64" : "", zeroCopyHost_ ? "zero-copy" : "staged",
              widestFirst_ ? ", widest launch of each kernel first (POCL before 7.0)" : "");
  return Result::kSuccess;
}

Result Runtime::buildProgram() {
  cl_int err = CL_SUCCESS;
  const char* src = kKernelSource;
  program_ = clCreateProgramWithSource(context_, 1, &src, nullptr, &err);
  if (program_ == nullptr || err != CL_SUCCESS) {
    return fail(Result::kUnhandledDeviceError, "OpenCL backend: clCreateProgramWithSource failed (%s)",
                clErrorName(err));
  }
  // No fast-math, no denormal flushing, no contraction (the source says FP_CONTRACT OFF): the
  // results must match the host kernels bit for bit.
  cl_device_fp_config single = 0;
  clGetDeviceInfo(device_, CL_DEVICE_SINGLE_FP_CONFIG, sizeof(single), &single, nullptr);
  std::string options;
  if ((single & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0) {
    options = "-cl-fp32-correctly-rounded-divide-sqrt";
  } else if (fp64_) {
    options = "-DMIXCCL_DIV_VIA_DOUBLE";
  } else {
    MIXCCL_WARN(
        "OpenCL backend: the device divides float neither correctly rounded nor in double; Avg on "
        "floating types may differ from other ranks in the last bit");
  }
  err = clBuildProgram(program_, 1, &device_, options.c_str(), nullptr, nullptr);
  if (err != CL_SUCCESS) {
    size_t n = 0;
    clGetProgramBuildInfo(program_, device_, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
    std::string buildLog(n, '\0');
    if (n > 0) clGetProgramBuildInfo(program_, device_, CL_PROGRAM_BUILD_LOG, n, buildLog.data(), nullptr);
    buildLog.resize(strlen(buildLog.c_str()));
    if (buildLog.size() > 4000) buildLog = buildLog.substr(0, 4000) + "...";
    return fail(Result::kInternalError,
                "OpenCL backend: building the reduction kernels for '%s' failed (%s); report this with the "
                "build log:\n%s",
                platformName_.c_str(), clErrorName(err), buildLog.c_str());
  }
  for (int t = 0; t < kNumDataTypes; ++t) {
    if (static_cast<DataType>(t) == DataType::kFloat64 && !fp64_) continue;
    for (int o = 0; o < kNumReduceOps; ++o) {
      for (int v = 0; v < kNumReduceVariants; ++v) {
        const std::string name = std::string(kReduceKernelNames[t]) + "_" + std::to_string(o) + "_" + std::to_string(v);
        reduceKernels_[t][o][v] = clCreateKernel(program_, name.c_str(), &err);
        if (err != CL_SUCCESS) {
          return fail(Result::kInternalError, "OpenCL backend: clCreateKernel(%s) failed (%s)", name.c_str(),
                      clErrorName(err));
        }
      }
    }
  }
  copyKernel_ = clCreateKernel(program_, kCopyKernelName, &err);
  if (err != CL_SUCCESS) {
    return fail(Result::kInternalError, "OpenCL backend: clCreateKernel(%s) failed (%s)", kCopyKernelName,
                clErrorName(err));
  }
  return Result::kSuccess;
}

Result Runtime::reduceKernel(DataType dtype, RedOpKind op, int flags, cl_kernel* out) {
  std::call_once(buildOnce_, [this] {
    buildResult_ = buildProgram();
    if (buildResult_ != Result::kSuccess) buildError_ = lastFailure();
  });
  if (buildResult_ != Result::kSuccess) return fail(buildResult_, "%s", buildError_.c_str());
  const int o = static_cast<int>(op);
  if (o < 0 || o >= kNumReduceOps) {
    return fail(Result::kInternalError, "OpenCL backend: no kernel for reduction operator %d", o);
  }
  *out = reduceKernels_[static_cast<int>(dtype)][o][flags & (kNumReduceVariants - 1)];
  if (*out == nullptr) {
    return fail(Result::kInvalidUsage, "OpenCL backend: device of '%s' has no %s support (cl_khr_fp64)",
                platformName_.c_str(), dataTypeName(dtype));
  }
  return Result::kSuccess;
}

bool Runtime::needsWidestLaunch(cl_kernel k, size_t local) const {
  return widestFirst_ && launchedOf_.count({k, local}) == 0;
}

void Runtime::noteWidestLaunch(cl_kernel k, size_t local) { launchedOf_.emplace(k, local); }

Result Runtime::widestLaunchKit(cl_command_queue* q, void** scratch) {
  if (widestQueue_ == nullptr) MIXCCL_TRY(newQueue(context_, device_, &widestQueue_));
  if (widestScratch_ == nullptr) widestScratch_ = svm_->alloc(CL_MEM_READ_WRITE, kMaxLaunchBytes);
  if (widestScratch_ == nullptr) {
    return fail(Result::kSystemError, "OpenCL backend: no device memory for %zu bytes of launch scratch",
                kMaxLaunchBytes);
  }
  *q = widestQueue_;
  *scratch = widestScratch_;
  return Result::kSuccess;
}

Result Runtime::copyKernel(cl_kernel* out) {
  MIXCCL_TRY(reduceKernel(DataType::kInt8, RedOpKind::kSum, 0, out));  // builds the program
  *out = copyKernel_;
  return Result::kSuccess;
}

void Runtime::addRange(const Range& r) {
  std::unique_lock<std::shared_mutex> lock(rangesMu_);
  ranges_.emplace(r.start, r);
  if (r.bytes > maxRangeBytes_) maxRangeBytes_ = r.bytes;
}

bool Runtime::removeRange(uintptr_t start, const std::function<bool(const Range&)>& match, Range* removed) {
  std::unique_lock<std::shared_mutex> lock(rangesMu_);
  auto [lo, hi] = ranges_.equal_range(start);
  for (auto it = lo; it != hi; ++it) {
    if (match(it->second)) {
      if (removed != nullptr) *removed = it->second;
      ranges_.erase(it);
      return true;
    }
  }
  return false;
}

bool Runtime::findRange(const void* p, size_t bytes, Range* out) const {
  std::shared_lock<std::shared_mutex> lock(rangesMu_);
  return findRangeLocked(p, bytes, out);
}

bool Runtime::findRangeLocked(const void* p, size_t bytes, Range* out) const {
  const auto lo = reinterpret_cast<uintptr_t>(p);
  const size_t len = bytes == 0 ? 1 : bytes;
  bool found = false;
  // Ranges may nest (a registration inside another); scan back from the last range starting at
  // or before p while a range that long could still reach p.
  for (auto it = ranges_.upper_bound(lo); it != ranges_.begin();) {
    --it;
    const Range& r = it->second;
    if (lo - r.start >= maxRangeBytes_) break;
    if (lo - r.start < r.bytes && len <= r.bytes - (lo - r.start)) {
      if (r.kind != RangeKind::kRegistered) {
        *out = r;
        return true;
      }
      if (!found) *out = r;
      found = true;
    }
  }
  return found;
}

Operand Runtime::resolve(const void* p, size_t bytes) const {
  Operand op;
  op.ptr = p;
  Range r;
  // One shared lock over lookup and retain, so an unregister racing this call cannot free the
  // cl_mem before the kernel holds it (findRange takes the same shared lock; shared locks nest
  // only when no writer waits, so the lookup is repeated inline here instead).
  std::shared_lock<std::shared_mutex> lock(rangesMu_);
  if (!findRangeLocked(p, bytes, &r)) return op;
  if (r.kind == RangeKind::kRegistered) {
    // A device with memory of its own (a discrete GPU) may cache a CL_MEM_USE_HOST_PTR buffer in
    // device memory (the spec allows it), and host writes that peers make into shm slots reach
    // that copy only through a map. There the operand stays plain host memory, so commands read
    // and write the host bytes themselves (clEnqueueSVMMemcpy, or a staging copy around a
    // kernel). On an H100 (NVIDIA's driver) a kernel on such an operand also failed with
    // CL_INVALID_KERNEL_ARGS in one test (int8, dual store); through staging it passes.
    if (!zeroCopyHost_) return op;
    if (clRetainMemObject(r.mem) != CL_SUCCESS) return op;
    op.kind = Operand::kMem;
    op.mem = r.mem;
    op.offset = reinterpret_cast<uintptr_t>(p) - r.start;
  } else {
    op.kind = Operand::kSvm;
  }
  return op;
}

bool Runtime::knownQueue(const void* q) const {
  for (const auto& k : knownQueues_) {
    if (k.load(std::memory_order_acquire) == q) return true;
  }
  return false;
}

void Runtime::rememberQueue(cl_command_queue q) {
  std::lock_guard<std::mutex> lock(knownMu_);
  if (knownQueue(q) || clRetainCommandQueue(q) != CL_SUCCESS) return;
  auto& slot = knownQueues_[knownNext_++ % kKnownQueues];
  const void* old = slot.exchange(q, std::memory_order_acq_rel);
  if (old != nullptr) clReleaseCommandQueue(static_cast<cl_command_queue>(const_cast<void*>(old)));
}

void Runtime::releaseOperand(const Operand& op) {
  if (op.kind == Operand::kMem && op.mem != nullptr) clReleaseMemObject(op.mem);
}

}  // namespace mixccl::ocl
