// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// The alpha-beta-gamma cost of a collective under one algorithm: the closed forms stated in each
// algorithm file's header, in one place so the tuner (src/core/tuner.h) can compare candidates.
//
// Terms: p ranks, n = the collective's bytes per rank as NCCL counts them (count * element size;
// AllGather/Gather: one rank's contribution, ReduceScatter/Scatter: one rank's share, AlltoAll:
// one block), chunk = bytes per message slot. alpha: seconds per message on the critical path
// (latency plus the per-message software cost); beta: seconds per byte over one link; gamma:
// seconds per byte combined by a reduction. A message larger than a chunk is several messages,
// so the alpha term counts sequential messages, and pipelined algorithms pay the pipeline fill.
//
// The model is coarse on purpose: it ranks algorithms, it does not predict wall time to better
// than a factor of two. Pure function, any thread.

#include <cstdint>

#include "algorithms/schedule.h"

namespace mixccl::algo {

struct LinkModel {
  double alpha = 0;  // s per message: the latency of a hop
  double beta = 0;   // s per byte over one link
  double gamma = 0;  // s per byte reduced
  // s per message on the sending rank's core, for messages that leave one after the other
  // without waiting for each other (one-shot's p-1 copies of a piece); 0: alpha.
  double send = 0;
  // s per byte of a send staged by a pass of its own over the sender's memory: the rank's CPU
  // reads the bytes from its buffers or scratch, written a round or more before, and copies them
  // into the slot. A send the same step produces (a ring relay reduces or copies the message it
  // just received straight on; a pipelined chain forwards what it just wrote) pays no such pass.
  // Shared memory only, where the ranks' CPUs do the transport's copies; 0 elsewhere.
  double stage = 0;
  // s per byte of a receive copied out of its slot into the output (not combined on the way): a
  // pass that reads the bytes from the sender's core. Priced only where the data stays in the
  // cache (the tuner's callModel()); beyond it, beta's memory-speed hop covers that pass. At 2
  // ranks on 2 cores a 16 KiB copy out of the slot took 3 us, the stage copy of 32 KiB 2.3 us.
  double copyOut = 0;
};

// Predicted seconds of `algo` (not kDefault) for `kind` at p ranks, n bytes per rank (see above)
// and `chunkBytes` per message; a negative value when the algorithm has no form for `kind`.
double predictSeconds(Algo algo, CollKind kind, int p, uint64_t n, uint64_t chunkBytes, const LinkModel& m);

}  // namespace mixccl::algo
