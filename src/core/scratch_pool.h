// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Scratch memory of one communicator's operations (algo::Buf::kScratch), kept for the next ones.
// A fresh allocation per call is mapped and page-faulted in at every call once it is large (glibc
// maps big blocks and trims the heap on free): a 2 MiB reduce-scatter at 8 ranks on 2 cores took
// 2.4 ms with recursive halving and 4.1 ms ordered, against 1.0 and 0.95 ms with the heap kept
// (GLIBC_TUNABLES, same run). So a returned buffer waits in the pool for the next operation that
// fits in it; at most kKeepBytes wait (larger and surplus buffers are freed at once), and the
// pool frees what it keeps when the communicator goes.
//
// Threading: take() and give() may be called by the caller's thread and the progress thread
// (engine.h); a mutex guards the free list. Buffers come from the communicator's backend, so
// device work reaches them.

#include <cstddef>
#include <mutex>
#include <vector>

#include "common/result.h"
#include "src/device/device_backend.h"

namespace mixccl {

class ScratchPool {
 public:
  static constexpr size_t kKeepBytes = 64u << 20;

  ScratchPool() = default;
  ~ScratchPool();
  ScratchPool(const ScratchPool&) = delete;
  ScratchPool& operator=(const ScratchPool&) = delete;

  // A buffer of at least `bytes` from `backend` (the communicator's; always the same one).
  Result take(DeviceBackend* backend, size_t bytes, void** ptr, size_t* capacity);
  // Hands back a buffer take() gave, of `capacity` bytes.
  void give(void* ptr, size_t capacity);

 private:
  struct Block {
    void* ptr;
    size_t bytes;
  };
  std::mutex mu_;
  DeviceBackend* backend_ = nullptr;
  std::vector<Block> free_;
  size_t freeBytes_ = 0;
};

// One operation's scratch: taken from its communicator's pool, given back with the operation,
// which outlives every step that used it.
class ScratchMemory {
 public:
  ScratchMemory() = default;
  ~ScratchMemory() { reset(); }
  ScratchMemory(const ScratchMemory&) = delete;
  ScratchMemory& operator=(const ScratchMemory&) = delete;
  Result allocate(ScratchPool* pool, DeviceBackend* backend, size_t bytes) {
    pool_ = pool;
    return pool->take(backend, bytes, &ptr_, &capacity_);
  }
  void* get() const { return ptr_; }
  // Gives the memory back now (as the destructor does).
  void reset() {
    if (ptr_ != nullptr) pool_->give(ptr_, capacity_);
    pool_ = nullptr;
    ptr_ = nullptr;
    capacity_ = 0;
  }

 private:
  ScratchPool* pool_ = nullptr;
  void* ptr_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace mixccl
