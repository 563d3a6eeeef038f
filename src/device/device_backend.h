// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// The vendor-neutral device seam. Core code touches user buffers and staging memory only through
// a DeviceBackend, so a CUDA (or other vendor) backend is a new folder under src/device/ that
// implements this class, not #ifdefs across the core.
//
// Contract:
//  - Every method may be called from any thread, but calls about one communicator are serialised
//    by the caller (the progress engine of that communicator).
//  - `stream` is the caller's opaque stream handle (cudaStream_t for CUDA; ignored and possibly
//    NULL for the host backend). copy() and reduce() are ordered on it; the host backend runs them
//    synchronously, so they are complete when they return.
//  - waitForStream(s) makes host-side progress wait for work already queued on `s` (a user kernel
//    that produces the send buffer); signalStream(s) makes later work on `s` wait for the
//    collective's results. Both are no-ops on the host backend.

#include <cstddef>
#include <cstdint>
#include <memory>

#include "src/common/result.h"
#include "src/common/types.h"

namespace mixccl {

enum class MemKind { kHost, kDevice, kUnknown };

// What reduce() computes, element-wise, for one step of a collective:
//   dst[i] = post( a[i] OP pre(b[i]) )      or, when a == nullptr,   dst[i] = post( pre(b[i]) )
// `b` is the rank's own input (the user's send buffer); `a` is data received from a peer, which
// already went through pre() on the rank that contributed it.
//   pre(x)  = x * scalar   when preMul (PreMulSum; Avg on floating types with scalar 1/nranks)
//   post(x) = x / divisor  when divisor != 0 (Avg on integer types: sum first, divide once)
// With a == nullptr and neither transform this is a plain copy.
struct ReduceSpec {
  DataType dtype = DataType::kFloat32;
  RedOpKind op = RedOpKind::kSum;  // only kSum, kProd, kMax, kMin reach the kernels
  bool preMul = false;
  uint8_t scalar[8] = {};  // the pre-multiplier, stored as one element of `dtype`
  uint64_t divisor = 0;    // integer average divisor; 0 = none
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;

  virtual const char* name() const = 0;
  virtual MemKind memKind(const void* ptr) const = 0;

  // Memory the user asked for through ncclMemAlloc (device memory when the backend has a device).
  virtual Result alloc(size_t bytes, void** ptr) = 0;
  virtual Result free(void* ptr) = 0;
  // Host memory the transports use as staging (pinned where the vendor needs it).
  virtual Result allocStaging(size_t bytes, void** ptr) = 0;
  virtual Result freeStaging(void* ptr) = 0;

  virtual Result copy(void* dst, const void* src, size_t bytes, void* stream) = 0;
  // See ReduceSpec. applyPre/applyPost say whether the transforms apply on this call.
  virtual Result reduce(void* dst, const void* a, const void* b, size_t count, const ReduceSpec& spec, bool applyPre,
                        bool applyPost, void* stream) = 0;

  virtual Result waitForStream(void* stream) = 0;
  virtual Result signalStream(void* stream) = 0;
};

// Writes `value` as one element of `dtype` (rounded to nearest even) into out[0..size). Used for
// the Avg scalar 1/nranks; integer types truncate toward zero.
void encodeScalar(DataType dtype, double value, uint8_t out[8]);

// The backend for host memory: synchronous, CPU kernels.
std::unique_ptr<DeviceBackend> makeHostBackend();

}  // namespace mixccl
