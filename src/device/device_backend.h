// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// The vendor-neutral device seam. Core code touches user buffers, staging memory and device work
// only through a DeviceBackend, so a vendor backend is a new folder under src/device/ (or a plugin
// loaded through include/mixccl/device_backend.h) that implements this class, not #ifdefs across
// the core. docs/ENGINE.md says how the engine drives it.
//
// Terms:
//  - user stream: the `stream` argument of an NCCL call (cudaStream_t for CUDA, a cl_command_queue
//    for OpenCL). NULL means "no stream": the call completes before it returns.
//  - work queue: a queue the backend opens for the engine (openQueue) next to a user stream. Device
//    work of a collective (copies, reductions) goes there, never onto the user stream, because the
//    user stream is held (holdStream) until the collective completes.
//  - fence: a completion token of work enqueued so far (record, markStart); polled with query().
//
// Contract:
//  - Every method may be called from any thread; calls about one communicator are serialised by
//    its engine (the API thread for host buffers, the progress thread for queued work). Backends
//    hold no lock across calls.
//  - copy() and reduce() are ordered on `queue`. With queue == nullptr they are synchronous: the
//    work is complete when they return (used for host buffers and by tests).
//  - Pointers given to copy()/reduce() are host memory (anything the CPU may dereference), this
//    backend's device memory (memKind() == kDevice), or memory registered with registerHost().
//  - Nothing blocks longer than the work it waits for, and no method waits on the network.

#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/result.h"
#include "common/types.h"

namespace mixccl {

enum class MemKind {
  kHost,     // the CPU may read and write it directly
  kDevice,   // this backend's device memory (for OpenCL: an SVM allocation of its context)
  kUnknown,  // neither: memory of another device, context or process; refused by the API
};

// What reduce() computes, element-wise, for one step of a collective:
//   dst[i] = post( a[i] OP pre(b[i]) )      or, when a == nullptr,   dst[i] = post( pre(b[i]) )
// `b` is the rank's own input (the user's send buffer); `a` is data received from a peer, which
// already went through pre() on the rank that contributed it.
//   pre(x)  = x * scalar   when preMul (PreMulSum; Avg on floating types with scalar 1/nranks)
//   post(x) = x / divisor  when divisor != 0 (Avg on integer types: sum first, divide once)
// With a == nullptr and neither transform this is a plain copy.
// Every backend computes this bit for bit as the host backend does (docs/PROTOCOL.md, "Arithmetic").
struct ReduceSpec {
  DataType dtype = DataType::kFloat32;
  RedOpKind op = RedOpKind::kSum;  // only kSum, kProd, kMax, kMin reach the kernels
  bool preMul = false;
  uint8_t scalar[8] = {};  // the pre-multiplier, stored as one element of `dtype`
  uint64_t divisor = 0;    // integer average divisor; 0 = none
};

// What a backend can do, announced to every peer at init (PROTOCOL.md, "Peer info").
struct BackendCaps {
  uint32_t dtypes = 0;  // bit (1u << int(DataType)) per data type reduce() supports
  uint32_t ops = 0;     // bit (1u << int(RedOpKind)) per operator (kSum..kMin, plus PreMulSum/Avg)
  uint32_t flags = 0;   // kCap* below
};
constexpr uint32_t kCapAsync = 1u << 0;        // work on a queue completes after the call returns
constexpr uint32_t kCapRneRounding = 1u << 1;  // narrow floats round to nearest even
constexpr uint32_t kCapFp8Saturate = 1u << 2;  // fp8 results saturate to the largest finite value
// Queued work may use user buffers in host memory (MemKind::kHost) directly. Without it, a call
// with a stream needs device memory (the engine refuses host buffers with kInvalidArgument).
constexpr uint32_t kCapHostMemory = 1u << 3;
// Device work runs on the host's own CPU cores (an OpenCL CPU device): a rank that waits for it
// must not spin, or it takes the cores the work needs (docs/ENGINE.md, "Performance today").
constexpr uint32_t kCapSharesHostCores = 1u << 4;

// Opaque handles owned by the backend that made them.
struct WorkQueue;
struct Fence;
struct StreamGate;
struct HostRegistration;

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;

  virtual const char* name() const = 0;    // "host", "opencl", or the plugin's name
  virtual const char* vendor() const = 0;  // for messages: "mixccl", "POCL", ...
  // The id announced on the wire (PROTOCOL.md): 0 host, 1 opencl, 2 cuda, 0x100 and up plugins.
  virtual uint32_t wireId() const = 0;
  virtual BackendCaps caps() const = 0;
  // The device this process uses (ncclCommCuDevice); 0 for the host backend.
  virtual int deviceIndex() const { return 0; }

  virtual MemKind memKind(const void* ptr) const = 0;
  // kSuccess when `stream` is a stream this backend can order work on (NULL always is);
  // kInvalidArgument with a message otherwise (e.g. not a command queue, another context).
  virtual Result checkStream(void* stream) const = 0;

  // Memory the user asked for through ncclMemAlloc (device memory when the backend has a device).
  virtual Result alloc(size_t bytes, void** ptr) = 0;
  virtual Result free(void* ptr) = 0;
  // Host memory the device can reach (staging; pinned where the vendor needs it).
  virtual Result allocStaging(size_t bytes, void** ptr) = 0;
  virtual Result freeStaging(void* ptr) = 0;
  // Makes host memory a transport owns (slot FIFOs) usable by copy()/reduce() on this backend's
  // queues. The registration lives until unregisterHost(); the memory must outlive it.
  virtual Result registerHost(void* ptr, size_t bytes, HostRegistration** reg) = 0;
  virtual Result unregisterHost(HostRegistration* reg) = 0;

  // A queue for the engine's device work next to `userStream` (same device and context).
  virtual Result openQueue(void* userStream, WorkQueue** queue) = 0;
  virtual Result closeQueue(WorkQueue* queue) = 0;

  virtual Result copy(void* dst, const void* src, size_t bytes, WorkQueue* queue) = 0;
  // See ReduceSpec. applyPre/applyPost say whether the transforms apply on this call.
  virtual Result reduce(void* dst, const void* a, const void* b, size_t count, const ReduceSpec& spec, bool applyPre,
                        bool applyPost, WorkQueue* queue) = 0;
  // reduce() whose result is stored in `dst2` too, the same bytes (the engine's step that keeps a
  // reduced chunk and forwards it to a peer's slot). The default is reduce() then copy(); a
  // backend that stores twice in one pass saves reading the result back.
  virtual Result reduceDual(void* dst, void* dst2, const void* a, const void* b, size_t count, const ReduceSpec& spec,
                            bool applyPre, bool applyPost, WorkQueue* queue) {
    MIXCCL_TRY(reduce(dst, a, b, count, spec, applyPre, applyPost, queue));
    return copy(dst2, dst, count * dataTypeSize(spec.dtype), queue);
  }

  // A fence after everything enqueued on `queue` so far (nullptr queue: an already signalled one).
  virtual Result record(WorkQueue* queue, Fence** fence) = 0;
  // The start gate: a fence that signals once work the user enqueued on `stream` before this call
  // is complete (the kernel producing the send buffer). It may signal only after it was first
  // queried (a backend can leave the device work of the mark to the querying thread), and work
  // behind it on the stream may wait until it is queried or released, which the engine does.
  virtual Result markStart(void* stream, Fence** fence) = 0;
  // kSuccess when signalled, kInProgress when not yet, an error when the work behind it failed.
  // Never blocks. A nullptr fence is signalled.
  virtual Result query(Fence* fence) = 0;
  virtual void releaseFence(Fence* fence) = 0;

  // The completion gate: work the user enqueues on `stream` after this call waits until
  // releaseStream(gate). The engine releases every gate it holds, also when the collective fails
  // or the communicator is aborted, so a stream is never left blocked.
  virtual Result holdStream(void* stream, StreamGate** gate) = 0;
  virtual Result releaseStream(StreamGate* gate) = 0;
};

// Writes `value` as one element of `dtype` (rounded to nearest even) into out[0..size). Used for
// the Avg scalar 1/nranks; integer types truncate toward zero.
void encodeScalar(DataType dtype, double value, uint8_t out[8]);
// encodeScalar(dtype, 1.0 / n): the Avg scalar, with the division too in the default rounding mode,
// so every rank gets the same bits whatever its program did to the floating-point environment.
void encodeReciprocal(DataType dtype, uint64_t n, uint8_t out[8]);

// The backend for host memory: synchronous, CPU kernels.
std::unique_ptr<DeviceBackend> makeHostBackend();

}  // namespace mixccl
