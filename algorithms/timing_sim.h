// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// A timing simulator for schedules: predicts how long the schedules of all ranks take together,
// under an alpha-beta-gamma link model, at up to tens of thousands of ranks. It tracks no values
// (algorithms/sim.h checks those, for small rank counts), only times, and it runs the very
// schedules buildSchedule() produces, so its prediction is of the code, not of a formula.
//
// Machine. nranks ranks; hosts are contiguous blocks of ranksPerHost ranks (rank / ranksPerHost
// is the host). A pair on one host uses the `intra` LinkModel, a pair on two hosts `inter`. The
// link (src, dst) is a FIFO of fifoDepth message slots, as in the engine.
//
// Timing model (b = the step's message bytes = count * elemBytes; times in seconds):
//  - A rank runs its steps in order. A step starts at max(the rank's clock, the arrival of the
//    message it receives, the time a slot to its sendPeer was freed).
//  - A send puts the message on the link at the start (or when the link finished carrying its
//    previous message: a link carries one message at a time, each occupying it for b * beta);
//    it arrives alpha + b * beta later.
//  - The step keeps its rank busy until start + b * beta when it sends, plus b * gamma when it
//    combines a received message with a local source, or (k - 1) * b * gamma when it folds k
//    local operands (a multi-source step; b = its count * elemBytes) (gamma of the `intra` model:
//    a rank's own arithmetic). Receiving into memory, local copies and tokens cost no rank time
//    (a token still pays alpha on the link).
//  - The receiving step frees the message's slot when it ends. The rank's clock becomes the end.
// The predicted time is the latest clock over all ranks.
// What it leaves out: links are independent (no shared NIC, host uplink or switch), and receiving
// costs the receiver nothing, so fan-in (a direct gather's root takes p-1 messages "at once") looks
// faster than on a machine; no protocol (LL/LL128) or per-byte software overheads beyond beta.
//
// Alongside, criticalHops counts the critical path in hops exactly as SimStats::criticalHops in
// sim.h does (a sending step occupies its rank for one hop, its message arrives one hop after the
// step started, slots never limit), so both simulators agree on it.
//
// Execution. Every schedule is built up front and stored compactly: 12 bytes per step (the two
// link ids and the message size with a combine flag; local offsets are irrelevant to time), plus
// 40 bytes per rank and, per communicating (src, dst) pair, about 100 bytes and 32 bytes per FIFO
// slot (min(fifoDepth, messages on the link) slots). Links live in an open-addressing
// hash table keyed by (src, dst) that holds only pairs that communicate; nothing is nranks^2.
// The run is event-driven in causal order: a worklist holds ranks that may progress; a rank runs
// steps until one lacks its message or a slot, and then sleeps until the event that unblocks it
// (a message pushed on the link it reads, a slot freed on the link it writes) puts it back on the
// worklist. No rank is visited without cause, so the cost is O(steps + messages). Every time is a
// max-plus function of earlier times fixed by the schedules (no rank ever chooses between two
// actions: steps run in order, links deliver in order), so processing in causal rather than
// chronological order gives exactly the times a chronological event simulation would.
//
// Limits. A step budget (TimingOptions::stepBudget) bounds memory: before building every
// schedule, the step count is estimated from a sample of ranks and refused when over the budget;
// while building, the exact count is checked again. Building a sampled rank's schedule costs its
// size, so a caller that knows a lower bound on the steps (TimingOptions::minSteps, e.g.
// minCollectiveSteps) has a run far over the budget refused before the first build.
// When no rank can progress but some are unfinished the run is a deadlock; the error names who
// waits for what, like sim.cc. Schedule faults that change timing (a message whose size differs
// from the receiving step's count, a peer out of range, a message left unreceived) fail too;
// value faults are sim.h's business.
//
// Threading: none; one call runs to completion. Errors are reported as Result + lastError().

#include <cstdint>
#include <functional>
#include <string>

#include "algorithms/cost.h"
#include "algorithms/schedule.h"
#include "common/result.h"

namespace mixccl::algo {

struct TimingOptions {
  int nranks = 1;
  int ranksPerHost = 0;  // ranks per host (contiguous blocks); 0 or >= nranks: all on one host
  LinkModel intra;       // pairs on one host
  LinkModel inter;       // pairs on two hosts
  uint64_t elemBytes = 4;
  uint32_t fifoDepth = 1;             // slots per (src, dst) link, >= 1
  uint64_t stepBudget = 400'000'000;  // most steps (all ranks together) the run may hold
  std::string label = "schedule";     // what is simulated, for messages (e.g. "allreduce ring")
  // At least this many steps, all ranks together, known without building (0: unknown). Over the
  // budget, the run is refused before any schedule is built: the sample builds whole schedules,
  // and one rank's ring of 2^56 bytes is 1e11 steps, terabytes while being built.
  double minSteps = 0;
};

struct TimingStats {
  double seconds = 0;         // predicted time: the latest rank's clock
  int lastRank = 0;           // the rank that finished last
  uint64_t criticalHops = 0;  // as SimStats::criticalHops
  uint64_t steps = 0;
  uint64_t messages = 0;
  uint64_t bytes = 0;         // message bytes over all links
  uint64_t maxLinkBytes = 0;  // most bytes carried by one (src, dst) link
  uint64_t links = 0;         // (src, dst) pairs that communicate
  uint64_t memoryBytes = 0;   // steps, ranks and links held by the run (approximate)
  // Set when the run was refused for the step budget (the result is then kInvalidUsage), with
  // the estimated or counted steps that did not fit.
  bool overBudget = false;
  double budgetSteps = 0;
};

// Produces rank `rank`'s schedule (called up to nranks + 64 times: a sample first, then each rank).
using ScheduleSource = std::function<Result(int rank, Schedule* out)>;

// Simulates the schedules of ranks [0, nranks). kInvalidArgument on a bad setup (nranks < 1,
// fifoDepth < 1, elemBytes 0); kInvalidUsage when over the step budget, on deadlock or on a
// schedule fault (lastError() says which). Whatever `source` fails with is passed on.
Result simulateTiming(const TimingOptions& options, const ScheduleSource& source, TimingStats* stats);

// A lower bound on the steps of `args`'s schedules over all ranks, whatever the algorithm: a
// message carries at most args.chunkElems elements, a step sends and receives at most one, and in
// every collective at least nranks - 1 ranks receive or send `count` elements of their own (a
// broadcast's or scatter's receivers, a reduce's or gather's senders, every rank of the others).
// A double: it may exceed 64 bits.
double minCollectiveSteps(const CollArgs& args);

// simulateTiming() over buildSchedule(args with rank = r) for every rank r; args.nranks and
// args.fifoDepth are taken from `options`, and options.minSteps from minCollectiveSteps() when
// it is larger.
Result simulateCollectiveTiming(const CollArgs& args, const TimingOptions& options, TimingStats* stats);

}  // namespace mixccl::algo
