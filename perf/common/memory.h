// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Where a rank's buffers live (-m): host memory, or SVM of the library's OpenCL context driven
// through a cl_command_queue that the NCCL calls get as their stream.
//
// The harness composes inputs and checks outputs in host memory (a mirror of each buffer) and
// moves them with upload()/download(); for host ranks the mirror IS the buffer and both are no-ops,
// so host runs do exactly what they did before -m opencl existed. Timing follows nccl-tests:
// enqueue the iterations on the stream, then synchronize() (cudaStreamSynchronize there).
//
// Which backend a process uses is chosen once per process by MIXCCL_DEVICE_BACKEND
// (src/device/select.h), so selectProcessMemory() must run before the process's first NCCL call.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace mixccl::perf {

enum class MemKind { kHost, kOpencl };

const char* memKindName(MemKind k);

// Parses -m's buffer kinds: "host", "opencl", or a per-rank pattern of letters H and O separated by
// commas ("H,O": rank r uses entry r % size). Returns false with a message for anything else.
bool parseMemoryPattern(const std::string& text, std::vector<MemKind>* out, std::string* error);

// True when these tools were built with OpenCL (the headers and the ICD loader were found).
bool openclBuilt();

// Checks that every rank of this process (global ranks first..first+count-1) uses one kind, and
// for OpenCL sets MIXCCL_DEVICE_BACKEND=opencl in this process's environment. Call before the
// first NCCL call. Returns false with a message when the pattern mixes kinds inside the process.
bool selectProcessMemory(const std::vector<MemKind>& pattern, int firstRank, int count, std::string* error);

// One rank's buffers and stream. Not thread-safe: one per rank thread.
class RankMemory {
 public:
  virtual ~RankMemory() = default;
  virtual MemKind kind() const = 0;
  // The stream the NCCL calls get (NULL for host memory).
  virtual cudaStream_t stream() const = 0;
  // "[bus] name" part of the device line: bus id and a device description.
  virtual std::string bus() const = 0;
  virtual std::string deviceName() const = 0;

  // A buffer of at least `bytes` that the NCCL calls may use; `mirror` is its host image. A
  // device buffer is reallocated when it grows (the old one is freed).
  struct Buffer {
    std::vector<unsigned char> mirror;
    void* device = nullptr;  // null for host memory: the mirror is the buffer
    size_t deviceBytes = 0;
  };
  virtual bool grow(Buffer& b, size_t bytes, std::string* error) = 0;
  virtual void release(Buffer& b) = 0;
  // Pointer to hand to NCCL for byte `offset` of the buffer.
  virtual void* ptr(Buffer& b, size_t offset) = 0;
  // mirror[offset, offset+bytes) -> buffer, and back. Blocking; ordered after the stream's work.
  virtual bool upload(Buffer& b, size_t offset, size_t bytes, std::string* error) = 0;
  virtual bool download(Buffer& b, size_t offset, size_t bytes, std::string* error) = 0;
  // Waits until everything enqueued on stream() finished.
  virtual bool synchronize(std::string* error) = 0;
};

// Makes the memory of one rank. For OpenCL this creates a command queue on the library's context
// (mixcclOpenclGetContext), so the backend must already be selected.
std::unique_ptr<RankMemory> makeRankMemory(MemKind kind, std::string* error);

}  // namespace mixccl::perf
