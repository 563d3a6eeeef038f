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
// A multi-source step (Step::sourceCount >= 2) is the LocalReduce of the vocabulary: no message
// in, several local operands folded left to right in the order the schedule lists them,
//    value = ((o[0] OP o[1]) OP o[2]) ... OP o[k-1]        then finalize, send and/or dst as above
// rounded to the datatype after every OP as each backend's reduce() does. Listing the operands
// in rank order gives a reduction whose rounding depends on nothing but the ranks' inputs: the
// deterministic algorithms (one-shot, ordered) are built on it.
// A schedule's steps run strictly in order on each rank; messages between a pair of ranks on one
// lane are delivered in order, so step i's recv matches the peer's i-th send to this rank.
// Deadlock freedom therefore rests on each schedule never waiting for a message that the sender
// posts only after a message it waits for itself; each algorithm file argues why that holds.
// Every schedule here is deadlock-free with any FIFO depth >= 1 (one slot per connection),
// including the rings (see ring_pass.h for why that needs care).
//
// A token is a step with count 0, no src and no dst, that only sends or only receives an empty
// message. Rooted collectives whose root would otherwise only send (Broadcast, Scatter) end with
// one: the root receives a token from the rank before it in ring order, which sends it after its
// own last step. A root that only sent could not tell whether its peers agreed on the root (two
// ranks that each pass themselves as root would both return with their own data); reading that
// peer's token makes it read a message of that peer's operation, so the stamps are compared.
// The engine runs the token only where src/core/op_stamp.h (closingTokenDue) says, every eighth
// collective and every large one, and skips the step on both sides otherwise. It does not wait for
// that last step: the root's call returns and reads the token later (src/core/owed_tokens.h), so
// a schedule must put nothing after it and never make another step depend on it.
//
// Operands of a multi-source step (checked by the simulator): reductions only; no recvPeer and no
// src; every operand is `count` elements of Output or Scratch - never Input, because pre() is
// applied where Input is read (a rank copies its own input in with a one-operand step first) -
// and none overlaps dst, which the engine uses as the accumulator.
//
// Guarantees every schedule built here gives the engine (checked by algorithms/sim.h)
//  - count > 0 on every step but tokens; a step that sends or receives has count <= chunkElems.
//    Local steps (no peer) may be larger.
//  - Without a reduction a step never has both a message and a src, and never sets finalize.
//  - pre() once: in a reduction every element of a rank's Input is read exactly once, inside a
//    combining step (the engine applies pre() exactly when src == kInput), and Input is read in
//    no other way. Values that came from elsewhere (messages, kOutput) are never pre()'d again.
//  - finalize once: per output element exactly one step in the whole collective sets finalize:
//    the step that first produces the element's final reduced value (on the rank that completes
//    it). Ranks that then receive that final value copy it without finalize; reductions over
//    one rank are a local Input -> Output step with finalize. So the engine's post() (integer
//    average: divide by nranks) runs once per element.
//  - In-place: correct when Input and Output alias as NCCL's in-place forms do - AllReduce,
//    Broadcast (root), Reduce (root): the same pointer; AllGather: Input = Output + rank*count;
//    ReduceScatter: Output = Input + rank*count; Gather (root): Input = Output + root*count;
//    Scatter (root): Output = Input + root*count. No step reads Input memory that an earlier step
//    wrote. Where a step reads and writes the very same elements (e.g. the root's Input -> Output
//    copy of an in-place Broadcast) src and dst coincide exactly, never partially; the engine may
//    skip such a copy. AlltoAll has no in-place form (NCCL leaves one undefined); a call whose
//    buffers overlap gets CollArgs::stageInput, so builders never see that aliasing.

#include <cstdint>
#include <vector>

#include "common/result.h"
#include "common/types.h"

namespace mixccl::algo {

// kScratch: memory the engine provides for one operation, Schedule::scratchElems elements of the
// collective's datatype, uninitialised at the first step, private to the rank. Trees keep partial
// results there that fit in neither user buffer (a non-root rank of a Reduce has no Output).
enum class Buf : uint8_t { kNone = 0, kInput = 1, kOutput = 2, kScratch = 3 };

// The algorithm a schedule follows. kDefault is each collective's standing choice (ring for the
// reduction and gather-to-all kinds, pairwise for all-to-all, direct for gather and scatter);
// the others are asked for by name and exist only for some collectives (algoSupports).
enum class Algo : uint8_t {
  kDefault = 0,
  kRing,               // every collective with a ring form
  kPairwise,           // AlltoAll
  kDirect,             // Gather, Scatter
  kRecursiveDoubling,  // AllReduce: log2(p) exchanges of the whole buffer; AllGather: doubling blocks
  kBinomialTree,       // Broadcast, Reduce, Gather, Scatter: ceil(log2 p) hops from/to the root
  kRecursiveHalving,   // ReduceScatter: log2(p) exchanges of halving halves
  kRabenseifner,       // AllReduce: recursive-halving reduce-scatter + recursive-doubling all-gather
  kOneShot,            // AllReduce: every rank sends its whole Input to every other rank (tiny messages)
  kBruck,              // AlltoAll, AllGather, ReduceScatter (NCCL's PAT): ceil(log2 p) rounds, any p
  kScatterAllGather,   // Broadcast (van de Geijn): scatter from the root, then a ring all-gather
  kDoubleBinaryTree,   // AllReduce: two binary trees, each reducing and broadcasting half the data
  // AllReduce, ReduceScatter, Reduce: every element's operands gathered to the rank that owns it
  // and folded in rank order (deterministic: the rounding depends only on the inputs)
  kOrdered,
};
constexpr int kNumAlgos = 13;

// Whether `algo` reduces every element as the left fold over ranks 0..p-1 in rank order, so that
// its results are bitwise the same as every other such algorithm's (MIXCCL_DETERMINISTIC).
inline bool algoIsOrdered(Algo a) { return a == Algo::kOneShot || a == Algo::kOrdered; }

const char* algoName(Algo a);
// Whether buildSchedule() has a builder for `kind` under `algo` (kDefault: always).
bool algoSupports(Algo algo, CollKind kind);

struct Step {
  int32_t recvPeer = -1;  // rank to receive one message from, or -1
  int32_t sendPeer = -1;  // rank to send one message to, or -1
  Buf src = Buf::kNone;   // local operand
  uint64_t srcOffset = 0;
  Buf dst = Buf::kNone;  // local result
  uint64_t dstOffset = 0;
  uint64_t count = 0;     // elements in the message / regions (> 0)
  bool finalize = false;  // this step produces the final reduced value of its elements: apply post()
  // Multi-source steps: Schedule::operands[sourceFirst, sourceFirst + sourceCount) when
  // sourceCount >= 2 (src is then kNone); 0 for every other step.
  uint32_t sourceFirst = 0;
  uint32_t sourceCount = 0;
};

// One operand of a multi-source step: `count` elements (the step's) of `buf` from `offset`.
struct Operand {
  Buf buf = Buf::kNone;
  uint64_t offset = 0;
};

// What a collective call means, in the terms of NCCL's API (counts as the user passed them).
struct CollArgs {
  CollKind kind = CollKind::kAllReduce;
  int rank = 0;
  int nranks = 1;
  int root = 0;             // Broadcast/Reduce/Gather/Scatter root; Send/Recv peer
  uint64_t count = 0;       // NCCL's count argument (per-rank count for AllGather/ReduceScatter/...)
  uint64_t chunkElems = 1;  // max elements per message (>= 1)
  // Slots per lane the schedule will run on (MIXCCL_FIFO_DEPTH, equal on all ranks). Schedules
  // are correct at depth 1; with more slots ring passes may use an order with more overlap.
  uint32_t fifoDepth = 1;
  Algo algo = Algo::kDefault;  // must be the same on every rank
  // This rank's Input and Output overlap in a collective without an in-place form (all-to-all,
  // which NCCL leaves undefined then). buildSchedule() copies Input into Scratch first and the
  // steps read that copy, so builders keep assuming the two apart. The messages do not change:
  // ranks may differ in this.
  bool stageInput = false;
};

// Whether `s` is a token (see above).
inline bool isToken(const Step& s) {
  return s.count == 0 && s.src == Buf::kNone && s.dst == Buf::kNone && ((s.recvPeer >= 0) != (s.sendPeer >= 0));
}

struct Schedule {
  std::vector<Step> steps;
  uint64_t scratchElems = 0;      // size of Buf::kScratch for this rank (0: the schedule uses none)
  std::vector<Operand> operands;  // of the multi-source steps, each step's in fold order
};

// Builds this rank's schedule for `args`. Fails with kInvalidArgument on impossible arguments
// (nranks < 1, rank/root out of range, chunkElems == 0, an algorithm the collective does not
// have). Count 0 gives an empty schedule.
Result buildSchedule(const CollArgs& args, Schedule* out);

// Elements of Input / Output a rank needs for `args` (for bounds checks and the simulator), in
// NCCL's count semantics: AllReduce/Broadcast/Reduce count; AllGather in count, out n*count;
// ReduceScatter in n*count, out count; AlltoAll n*count both; Gather in count, out n*count on the
// root; Scatter in n*count on the root, out count; Send in count; Recv out count. Buffers NCCL
// ignores report 0 (Broadcast's Input and Reduce's Output off the root, Gather's Output and
// Scatter's Input off the root). Only meaningful for arguments buildSchedule() accepts.
uint64_t inputElems(const CollArgs& args);
uint64_t outputElems(const CollArgs& args);

}  // namespace mixccl::algo
