// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// An in-memory simulator for schedules: runs the schedules of several ranks together, with no
// transport and no threads, and reports what the progress engine would have done.
//
// Model. Each actor is one rank's schedule with its own memory (an "arena" of cells); Input and
// Output are windows into that arena, which may overlap (NCCL's in-place forms alias them);
// Scratch is a third window, private, holding garbage until a step writes it. A
// FIFO of bounded depth connects every ordered pair (src rank, dst rank). simulate() sweeps the
// actors round-robin; each visit executes at most one step of that actor, and only when every
// resource it needs is there (the message to receive, a free slot to send into) - the engine's
// rule. Steps run strictly in order per actor. When a full sweep moves nothing while some actor
// is unfinished, the run is a deadlock and fails with a description of who waits for what.
// Because executing a step never disables another actor's step, this one interleaving decides
// deadlock for all of them.
//
// Values. A cell carries an int64 value plus bookkeeping that makes mistakes visible:
//  - `contributions`: how many rank inputs went into the value. Reading Input inside a reduction
//    is where the engine applies pre(), so it adds one; combining adds the two counts (a
//    multi-source step adds all of its operands').
//  - `finalized`: how many times post() (finalize) was applied along the way; must end at 1 for
//    reduction results and 0 otherwise.
// The simulator also fails on: a received message whose size differs from the step's count; a
// step out of its buffer bounds or with a bad peer; a reduction-less step that has both a message
// and a local source (the engine would ignore one) or sets finalize; source and destination that
// overlap partially; a multi-source step with a message, a src, an Input operand or an operand
// overlapping its dst; reading Input memory after an earlier step wrote it (an in-place hazard);
// messages left in a FIFO at the end.
//
// Threading: none; one call runs to completion. Errors are reported as Result + lastError().

#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/schedule.h"

namespace mixccl::algo {

struct SimCell {
  int64_t value = 0;
  int32_t contributions = 0;
  int32_t finalized = 0;
};

enum class SimOp { kSum, kMax };

struct SimActor {
  int rank = 0;  // the rank this schedule belongs to (actors of one rank may coexist: send + recv)
  Schedule schedule;
  std::vector<SimCell> arena;
  uint64_t inputOffset = 0;  // Input = arena[inputOffset, inputOffset + inputElems)
  uint64_t inputElems = 0;
  uint64_t outputOffset = 0;  // Output = arena[outputOffset, outputOffset + outputElems)
  uint64_t outputElems = 0;
  // Set by simulate(): Scratch = arena[scratchOffset, + schedule.scratchElems), appended to the
  // arena the caller built.
  uint64_t scratchOffset = 0;
  uint64_t scratchElems = 0;
  // Filled by simulate(): per Input element, how many times a reduction read it (pre() count).
  std::vector<uint32_t> inputReductionReads;
  uint64_t elemsSent = 0;
  uint64_t messagesSent = 0;
};

struct SimOptions {
  int nranks = 1;
  bool reduction = false;  // AllReduce / Reduce / ReduceScatter semantics for combining steps
  SimOp op = SimOp::kSum;
  size_t fifoDepth = 1;  // messages per (src, dst) FIFO, >= 1
};

struct SimStats {
  uint64_t sweeps = 0;  // round-robin sweeps until done (not a time: a chain can finish in one)
  uint64_t steps = 0;
  uint64_t messages = 0;
  // The critical path in hops (the latency term of a schedule's cost): every rank's steps run in
  // order; a step that sends occupies its rank for one hop and its message arrives one hop after
  // the step started; a step that receives starts no earlier than the arrival. Slots are never
  // the limit and local steps take no time. E.g. a binomial broadcast: ceil(log2 p).
  uint64_t criticalHops = 0;
};

// Runs all actors to completion. Fails with kInvalidUsage on deadlock or on any schedule fault
// listed above (lastError() says which rank, step and what), kInvalidArgument on a bad setup.
Result simulate(std::vector<SimActor>& actors, const SimOptions& options, SimStats* stats = nullptr);

}  // namespace mixccl::algo
