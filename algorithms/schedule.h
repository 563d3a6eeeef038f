// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// An algorithm is a pure function  build(CollArgs) -> Schedule : rank arithmetic only, no
// transports, no communicator, no memory. The progress engine (src/core/executor) executes a
// schedule; tests run schedules of every rank through an in-memory simulator (algorithms/sim.h).
//
// Terms
//  - element: one value of the collective's datatype; all offsets and counts are in elements.
//  - message: what one Step sends or receives on the connection to one peer; at most
//    CollArgs::chunkElems elements, so large collectives stream through bounded FIFO slots.
//  - Input / Output: the user's send and receive buffers of this rank (the same memory for NCCL's
//    in-place forms; schedules are written so that in-place is correct: a region of Input is read
//    before the same region of Output is written).
//
// One Step is a generic "recv, combine, emit":
//    value = recv(recvPeer)  OP  src          (reduction collectives, when both are present)
//    value = recv(recvPeer)  |  src           (when only one is present)
//    if finalize: value = post(value)         (integer average: divide once by nranks)
//    value -> send(sendPeer) and/or value -> dst
// which covers Send, Recv, RecvReduce, RecvReduceSend, RecvReduceCopySend, RecvCopySend, Copy.
// A schedule's steps run strictly in order on each rank; messages between a pair of ranks on one
// lane are delivered in order, so step i's recv matches the peer's i-th send to this rank.
// Deadlock freedom therefore rests on each schedule never waiting for a message that the sender
// posts only after a message it waits for itself; each algorithm file argues why that holds.

#include <cstdint>
#include <vector>

#include "src/common/result.h"
#include "src/common/types.h"

namespace mixccl::algo {

enum class Buf : uint8_t { kNone = 0, kInput = 1, kOutput = 2 };

struct Step {
  int32_t recvPeer = -1;  // rank to receive one message from, or -1
  int32_t sendPeer = -1;  // rank to send one message to, or -1
  Buf src = Buf::kNone;   // local operand
  uint64_t srcOffset = 0;
  Buf dst = Buf::kNone;  // local result
  uint64_t dstOffset = 0;
  uint64_t count = 0;     // elements in the message / regions (> 0)
  bool finalize = false;  // this step produces the final reduced value of its elements
};

// What a collective call means, in the terms of NCCL's API (counts as the user passed them).
struct CollArgs {
  CollKind kind = CollKind::kAllReduce;
  int rank = 0;
  int nranks = 1;
  int root = 0;       // Broadcast/Reduce/Gather/Scatter root; Send/Recv peer
  uint64_t count = 0;  // NCCL's count argument (per-rank count for AllGather/ReduceScatter/...)
  uint64_t chunkElems = 1;  // max elements per message (>= 1)
};

struct Schedule {
  std::vector<Step> steps;
};

// Builds this rank's schedule for `args`. Fails with kInvalidArgument on impossible arguments
// (nranks < 1, rank/root out of range, chunkElems == 0). Count 0 gives an empty schedule.
Result buildSchedule(const CollArgs& args, Schedule* out);

// Elements of Input / Output a rank needs for `args` (for bounds checks and the simulator).
uint64_t inputElems(const CollArgs& args);
uint64_t outputElems(const CollArgs& args);

}  // namespace mixccl::algo
