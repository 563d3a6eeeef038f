// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// One collective or point-to-point call, as validated by the API layer, plus what the engine
// derives from it before running: the schedule, the lane and the element-wise reduction.

#include <cstdint>
#include <memory>

#include "algorithms/schedule.h"
#include "common/result.h"
#include "common/types.h"
#include "src/core/scratch_pool.h"
#include "src/device/device_backend.h"

namespace mixccl {

class Communicator;

// The plain values of an operation: what the call says and what the engine derives from it.
// Kept apart from what an operation owns (Op) so that a recycled operation (group.cc) is reset
// by copying a fresh one, which compilers do with vector stores: resetting a whole Op placed
// anew (`new (op) Op()`) compiled to `rep stos`, and recycling a call's operation took 52-57
// cycles that way against 28-46 now (rdtsc around it, 2-rank 8 B broadcast, AMD EPYC).
struct OpValues {
  Communicator* comm = nullptr;
  CollKind kind = CollKind::kAllReduce;
  const void* input = nullptr;
  void* output = nullptr;
  uint64_t count = 0;
  DataType dtype = DataType::kFloat32;
  int redOp = 0;  // ncclRedOp_t value (built-in or user-created)
  int root = 0;   // root, or the peer of Send/Recv
  void* stream = nullptr;
  // Where the backend orders this operation's device work (nullptr: synchronous, host buffers).
  WorkQueue* queue = nullptr;

  // Filled by prepareOp():
  bool reduction = false;
  ReduceSpec spec;
  int lane = 0;
  const void* deviceScalar = nullptr;      // ncclScalarDevice PreMulSum: read into spec by planOp()
  algo::Algo algo = algo::Algo::kDefault;  // the tuner's choice (never kDefault once prepared)
  double predictedSeconds = 0;             // the tuner's estimate (ncclGroupSimulateEnd)
  // Filled when the operation is issued (group.cc):
  uint64_t seq = 0;
  uint64_t stamp = 0;        // opStamp(): sent with every message, checked on every received one
  bool closingToken = true;  // closingTokenDue(): whether a closing token step (schedule.h) runs
};

struct Op : OpValues {
  // Filled by planOp():
  // Shared with the communicator's plan cache (plan_cache.h) and never changed once built.
  std::shared_ptr<const algo::Schedule> schedule;
  ScratchMemory scratch;  // schedule->scratchElems elements
};

constexpr bool isReduction(CollKind k) {
  return k == CollKind::kAllReduce || k == CollKind::kReduce || k == CollKind::kReduceScatter;
}

// The bytes of this rank's input and output of `op`, as the schedule builders count them (all of
// an all-gather's output, none of a non-root's broadcast input, ...).
uint64_t inputBytes(const Op& op);
uint64_t outputBytes(const Op& op);

// On the calling thread: checks the operator against the communicator's backends, resolves it
// (capturing what a user operator holds, since NCCL lets the caller destroy it once the call
// returned), picks the lane and asks the tuner for the algorithm. Cheap, whatever the count.
Result prepareOp(Op* op);

// On the thread that runs the operation, when it starts (for queued work: after the stream has
// reached the call): reads a device-resident PreMulSum scalar, in stream order as NCCL does,
// builds the schedule, whose size grows with the count, and allocates the scratch it needs.
Result planOp(Op* op);

}  // namespace mixccl
