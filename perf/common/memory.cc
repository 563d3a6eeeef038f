// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "perf/common/memory.h"

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#ifdef MIXCCL_PERF_OPENCL
#include <mixccl/opencl.h>
#endif

namespace mixccl::perf {

const char* memKindName(MemKind k) { return k == MemKind::kOpencl ? "opencl" : "host"; }

bool openclBuilt() {
#ifdef MIXCCL_PERF_OPENCL
  return true;
#else
  return false;
#endif
}

bool parseMemoryPattern(const std::string& text, std::vector<MemKind>* out, std::string* error) {
  out->clear();
  if (text == "host") {
    out->push_back(MemKind::kHost);
    return true;
  }
  if (text == "opencl") {
    out->push_back(MemKind::kOpencl);
    return true;
  }
  // A pattern: single letters separated by commas, nothing empty ("H,,O" and "H," are mistakes).
  size_t pos = 0;
  while (true) {
    const size_t comma = text.find(',', pos);
    const std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const char c = item.size() == 1 ? static_cast<char>(std::toupper(static_cast<unsigned char>(item[0]))) : '\0';
    if (c == 'H') {
      out->push_back(MemKind::kHost);
    } else if (c == 'O') {
      out->push_back(MemKind::kOpencl);
    } else {
      *error = "-m " + text +
               ": unknown buffer kind (host, opencl, cuda, or a per-rank pattern of H and O separated by commas such "
               "as H,O)";
      out->clear();
      return false;
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return true;
}

bool selectProcessMemory(const std::vector<MemKind>& pattern, int firstRank, int count, std::string* error) {
  const size_t n = pattern.size();
  const MemKind mine = pattern[static_cast<size_t>(firstRank) % n];
  for (int r = firstRank + 1; r < firstRank + count; ++r) {
    if (pattern[static_cast<size_t>(r) % n] != mine) {
      *error = "-m: ranks " + std::to_string(firstRank) + " (" + memKindName(mine) + ") and " + std::to_string(r) +
               " (" + memKindName(pattern[static_cast<size_t>(r) % n]) +
               ") are threads of one process, but the device backend is chosen once per process: give all ranks of "
               "a process the same letter (for example -t 1 and one process per rank under a launcher)";
      return false;
    }
  }
  if (mine == MemKind::kOpencl) {
    if (!openclBuilt()) {
      *error =
          "-m opencl: these perf tools were built without OpenCL (no OpenCL headers/ICD loader at configure time); "
          "install them (Debian: ocl-icd-opencl-dev opencl-headers) and rebuild, or use -m host";
      return false;
    }
    // The library reads it at its first communicator or ncclMemAlloc; an explicit other choice
    // (a plugin path, say) would make the OpenCL queues and SVM below meaningless to it.
    const char* prev = std::getenv("MIXCCL_DEVICE_BACKEND");
    if (prev != nullptr && *prev != '\0' && std::strcmp(prev, "opencl") != 0) {
      *error = std::string("-m opencl: MIXCCL_DEVICE_BACKEND is set to '") + prev +
               "' in the environment; unset it (the tool selects opencl itself) or use -m host";
      return false;
    }
    setenv("MIXCCL_DEVICE_BACKEND", "opencl", 1);
  }
  return true;
}

namespace {

// Grows a buffer's host image. A size past what this host can give (a huge -e) ends the tool with a
// message, where std::bad_alloc escaping a rank's thread would abort it (std::terminate, SIGABRT).
bool growMirror(RankMemory::Buffer& b, size_t bytes, std::string* error) {
  if (b.mirror.size() >= bytes) return true;
  try {
    b.mirror.resize(bytes);
  } catch (const std::exception&) {  // bad_alloc, or length_error beyond max_size()
    *error = "cannot allocate " + std::to_string(bytes) +
             " bytes of host memory for a rank's buffer (sized for -e, the largest row): lower -e, or run fewer "
             "ranks on this host";
    return false;
  }
  return true;
}

class HostMemory final : public RankMemory {
 public:
  MemKind kind() const override { return MemKind::kHost; }
  cudaStream_t stream() const override { return nullptr; }
  std::string bus() const override { return "host"; }
  std::string deviceName() const override { return "host memory (mixccl)"; }
  bool grow(Buffer& b, size_t bytes, std::string* error) override { return growMirror(b, bytes, error); }
  void release(Buffer& b) override { b.mirror = {}; }
  void* ptr(Buffer& b, size_t offset) override { return b.mirror.data() + offset; }
  bool upload(Buffer&, size_t, size_t, std::string*) override { return true; }
  bool download(Buffer&, size_t, size_t, std::string*) override { return true; }
  bool synchronize(std::string*) override { return true; }
};

#ifdef MIXCCL_PERF_OPENCL

std::string clMessage(const char* what, cl_int err) {
  return std::string(what) + " failed (" + std::to_string(err) + ")";
}

class OpenclMemory final : public RankMemory {
 public:
  ~OpenclMemory() override {
    if (queue_ != nullptr) {
      clFinish(queue_);
      clReleaseCommandQueue(queue_);
    }
  }

  bool init(std::string* error) {
    if (mixcclOpenclGetContext(&context_, &device_) != ncclSuccess) {
      *error = std::string("mixcclOpenclGetContext: ") + ncclGetLastError(nullptr);
      return false;
    }
    cl_int err = CL_SUCCESS;
    queue_ = clCreateCommandQueueWithProperties(context_, device_, nullptr, &err);
    if (queue_ == nullptr || err != CL_SUCCESS) {
      *error = clMessage("clCreateCommandQueueWithProperties on the library's context", err);
      queue_ = nullptr;
      return false;
    }
    char name[256] = {};
    clGetDeviceInfo(device_, CL_DEVICE_NAME, sizeof name - 1, name, nullptr);
    name_ = name;
    return true;
  }

  MemKind kind() const override { return MemKind::kOpencl; }
  cudaStream_t stream() const override { return reinterpret_cast<cudaStream_t>(queue_); }
  std::string bus() const override { return "opencl"; }
  std::string deviceName() const override { return name_ + " SVM (mixccl)"; }

  bool grow(Buffer& b, size_t bytes, std::string* error) override {
    if (!growMirror(b, bytes, error)) return false;
    if (b.device != nullptr && b.deviceBytes >= bytes) return true;
    release(b);
    // ncclMemAlloc gives SVM of the library's context: what the backend calls device memory.
    if (ncclMemAlloc(&b.device, bytes == 0 ? 1 : bytes) != ncclSuccess) {
      *error = "ncclMemAlloc of " + std::to_string(bytes) + " bytes: " + ncclGetLastError(nullptr);
      b.device = nullptr;
      return false;
    }
    b.deviceBytes = bytes;
    return true;
  }

  void release(Buffer& b) override {
    if (b.device != nullptr) {
      clFinish(queue_);  // nothing on the queue may still use it
      (void)ncclMemFree(b.device);
    }
    b.device = nullptr;
    b.deviceBytes = 0;
  }

  void* ptr(Buffer& b, size_t offset) override { return static_cast<unsigned char*>(b.device) + offset; }

  bool upload(Buffer& b, size_t offset, size_t bytes, std::string* error) override {
    if (bytes == 0) return true;
    const cl_int err =
        clEnqueueSVMMemcpy(queue_, CL_TRUE, ptr(b, offset), b.mirror.data() + offset, bytes, 0, nullptr, nullptr);
    if (err != CL_SUCCESS) *error = clMessage("clEnqueueSVMMemcpy (input to SVM)", err);
    return err == CL_SUCCESS;
  }

  bool download(Buffer& b, size_t offset, size_t bytes, std::string* error) override {
    if (bytes == 0) return true;
    const cl_int err =
        clEnqueueSVMMemcpy(queue_, CL_TRUE, b.mirror.data() + offset, ptr(b, offset), bytes, 0, nullptr, nullptr);
    if (err != CL_SUCCESS) *error = clMessage("clEnqueueSVMMemcpy (output from SVM)", err);
    return err == CL_SUCCESS;
  }

  bool synchronize(std::string* error) override {
    const cl_int err = clFinish(queue_);
    if (err != CL_SUCCESS) *error = clMessage("clFinish on the rank's queue", err);
    return err == CL_SUCCESS;
  }

 private:
  cl_context context_ = nullptr;
  cl_device_id device_ = nullptr;
  cl_command_queue queue_ = nullptr;
  std::string name_;
};

#endif  // MIXCCL_PERF_OPENCL

}  // namespace

std::unique_ptr<RankMemory> makeRankMemory(MemKind kind, std::string* error) {
  if (kind == MemKind::kHost) return std::make_unique<HostMemory>();
#ifdef MIXCCL_PERF_OPENCL
  auto m = std::make_unique<OpenclMemory>();
  if (!m->init(error)) return nullptr;
  return m;
#else
  *error = "-m opencl: these perf tools were built without OpenCL";
  return nullptr;
#endif
}

}  // namespace mixccl::perf
