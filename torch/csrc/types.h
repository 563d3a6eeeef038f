// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// How torch tensors, dtypes and reduce ops become mixccl call arguments. Every check here runs on
// the calling (Python) thread when an operation is issued, so a wrong argument raises at once, as
// with torch's own backends, instead of failing later on the worker thread.
//
// Errors: this extension lives on torch's side of the C ABI, where c10::Error (TORCH_CHECK) is the
// error idiom and becomes a Python RuntimeError; mixccl's no-throw rule covers the library itself.

#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "nccl.h"

namespace mixccl::torch_backend {

// A contiguous host buffer as a mixccl call sees it.
struct Buffer {
  void* ptr = nullptr;
  size_t count = 0;  // elements of `type`
  ncclDataType_t type = ncclUint8;
};

// mixccl's element type for a torch dtype, if the two share one.
std::optional<ncclDataType_t> ncclTypeOf(at::ScalarType t);

// Raises unless `t` is a dense, contiguous CPU tensor: mixccl reads and writes the storage as one
// flat run of elements, and this backend moves host memory only.
void checkHostTensor(const at::Tensor& t, const char* op);

// For operations that only move data (broadcast, gathers, scatters, all-to-all, send/recv): any
// dtype travels, as its own mixccl type or else as raw bytes.
Buffer movingBuffer(const at::Tensor& t, const char* op);

// A reduction operator resolved for one dtype on one communicator. PreMulSum operators are created
// on the communicator and destroyed with this object, so build it on the thread that makes the call.
class RedOp {
 public:
  RedOp(const c10d::ReduceOp& op, at::ScalarType dtype, ncclComm_t comm);
  ~RedOp();
  RedOp(const RedOp&) = delete;
  RedOp& operator=(const RedOp&) = delete;
  ncclRedOp_t get() const { return op_; }

 private:
  ncclRedOp_t op_ = ncclSum;
  ncclComm_t comm_ = nullptr;
  bool created_ = false;
};

// Raises unless `op` can reduce `t` (on the calling thread, before the operation is queued):
// the dtype has a mixccl type, bitwise operators are refused (NCCL has none), and bool only
// takes the operators that keep values 0/1.
void checkReducible(const at::Tensor& t, const c10d::ReduceOp& op, const char* what);

// The buffer a reduction works on: bool travels as uint8 (checkReducible vetted the operator).
Buffer reducingBuffer(const at::Tensor& t);

// Raises a c10::Error for a failed mixccl call: the call, the result and the library's message.
void throwNccl(ncclResult_t r, const std::string& what);

}  // namespace mixccl::torch_backend

#define MIXCCL_TORCH_CHECK_NCCL(call, what)                                              \
  do {                                                                                   \
    ncclResult_t mixccl_r_ = (call);                                                     \
    if (mixccl_r_ != ncclSuccess) ::mixccl::torch_backend::throwNccl(mixccl_r_, (what)); \
  } while (0)
