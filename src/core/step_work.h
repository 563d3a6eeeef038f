// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Device work of issued steps, handed to the work queue in runs. On a device every command costs
// far more than the bytes it moves (POCL: about 90 us per 512 KiB reduction, docs/ENGINE.md), and
// a ring round carries up to four adjacent pieces of one segment (algorithms/ring_pass.h). So the
// executor describes a step's copy or reduction here instead of enqueueing it, and enqueues the
// steps issued together as runs: adjacent steps of one kind whose every operand continues the
// previous step's in the same buffer become one command of the summed length.
//
// Covering two steps with one command gives the same bytes as two commands when neither step
// reads what the other writes; continues() admits a step only then (a destination and a source
// either start at the same element, where each element is read before it is written, or do not
// overlap). Operands of one run lie in one buffer each: the same schedule buffer, or the same
// lane's slot FIFO (the caller compares connections), so a backend resolves a run's range as it
// resolves a step's.
//
// Threading: plain values, used by the thread that runs the stream.

#include <cstddef>
#include <cstdint>

#include "algorithms/schedule.h"
#include "src/core/op.h"
#include "transports/transport.h"

namespace mixccl {

struct StepWork {
  bool copy = false;  // out = b, then out2 = out; else out = a OP b (and out2 = out)
  bool pre = false;
  bool finalize = false;
  // Where out and b come from (a run keeps them): schedule buffers, or kNone for a slot. `a` is
  // always received data, in a slot.
  algo::Buf outBuf = algo::Buf::kNone;
  algo::Buf bBuf = algo::Buf::kNone;
  void* out = nullptr;
  void* out2 = nullptr;     // a second destination (a peer's slot), or nullptr
  const void* a = nullptr;  // a reduction's received operand, or nullptr
  const void* b = nullptr;  // copy: the source (nullptr: already in place); else the own input or received data
  size_t bytes = 0;         // 0: the step has no deferred work
};

// Whether `next` extends the run `run` (run.bytes covering every step so far) into one command.
bool continues(const StepWork& run, const StepWork& next);

// Gives `next`'s slot operands (of `sconn`, `rconn`) their ring alias (transport.h, ringAlias)
// where that, and not the slot's own address, continues `run`: a run whose messages wrap around
// a lane's slot ring stays one range. The alias holds the same bytes, so `next` is right either way.
void alignToRun(const StepWork& run, StepWork* next, const SendConnection* sconn, const RecvConnection* rconn);

// Enqueues `w` (one step or a run) on op.queue; with no queue, does it before returning.
Result issueWork(const Op& op, const StepWork& w);

}  // namespace mixccl
