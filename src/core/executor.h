// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// The progress engine. A Stream is a list of operations whose steps run strictly in order (all
// collectives of one communicator in issue order; or all sends to one peer; or all receives from
// one peer). runStreams() advances every stream of a call or group round-robin without ever
// blocking inside a step, so streams that wait for each other (rank A's send stream and rank B's
// receive stream, driven by one thread for several ranks) cannot deadlock.
//
// Waits: when no stream advances, the engine spins MIXCCL_SPIN_COUNT polls, then yields the CPU,
// then sleeps in short naps (oversubscribed hosts need the CPU back). Every wait observes the
// communicators' abort/revoke flags and fails with kRemoteError after MIXCCL_TIMEOUT seconds
// without progress, naming the operation, step and peer it waits for.
//
// Device work: an operation with a work queue (op.queue, engine.h) issues each step's copies and
// reductions on that queue and records a fence; the step's slot is committed and the peer's
// message released only once the fence signals (two phases: issued, then done and committed).
// Steps issued together reach the queue in runs: adjacent steps of one kind whose operands
// continue each other's become one command with one fence (step_work.h).
// Steps of a stream (up to kStepsInFlight commands' worth) are issued ahead of the oldest one not yet committed
// (each holds the next slot of its lanes: SendConnection::acquire, RecvConnection::peekAt); they
// are committed strictly in issue order, so every lane sees its messages in schedule order. The
// work queue is in order, so a step that reads what an earlier one wrote sees it. Without a
// queue the backend works synchronously and a step completes in one call.
//
// Threading: called by the thread that issued the call / ncclGroupEnd, or by the communicator's
// progress thread for queued work; not re-entrant per comm.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "src/core/hang_report.h"
#include "src/core/op.h"
#include "src/core/step_work.h"
#include "transports/transport.h"

namespace mixccl {

class Stream {
 public:
  void push(Op* op) { ops_.push_back(op); }
  // Back to a new, empty stream, keeping the storage of its lists (partitionOps reuses streams).
  void reset();
  bool empty() const { return ops_.empty(); }
  bool done() const { return finished_; }
  Communicator* comm() const { return ops_.empty() ? nullptr : ops_.front()->comm; }
  // Executes ready steps; sets *advanced when anything moved. kSuccess also while unfinished.
  Result progress(bool* advanced);
  // "AllReduce seq 12 step 3/14: waiting for a message from rank 2" (for timeouts and dumps).
  std::string describeWait() const;
  // describeWait() plus the peers the rest of the current operation needs (hang reports).
  WaitBoard::Wait boardWait() const;
  // While the stream is stuck: kInvalidUsage if a peer this operation still receives from has a
  // message of another operation waiting (a mismatch that would otherwise deadlock, e.g. both
  // ranks blocked sending into full lanes). Cheap enough for idle polls only.
  // From kProbe on, also sends probes (op_stamp.h): in probe round 1 to every peer the rest of
  // the operation exchanges messages with, in each later round (one per second of the same
  // stall) to those it still receives from; at kOpenLanes, also opens the collective lanes from
  // every peer, once per operation (see checkPending).
  enum class Stall { kLook, kProbe, kOpenLanes };
  Result checkPending(Stall stall, int probeRound);
  // `failure` of progress(), or the mismatch that explains it (a peer of the operation sent a
  // message of another operation before the link broke).
  Result preferMismatch(Result failure);
  // kRemoteError, naming this stream's wait, once its communicator is aborted or revoked.
  Result checkFlags() const;
  // Whether the current step is a send to this rank itself that waits for room in its lane (only
  // a receive from self frees it), and whether an unfinished operation receives from self.
  bool waitsForRoomToSelf() const;
  bool receivesFromSelf() const;
  // This stream's progress hangs on device work that runs on the host's own cores
  // (kCapSharesHostCores): its own steps' or, through their messages, its peers'. Its waiter must
  // not spin (runStreams' back-off): a spinning poller takes the cores that work needs.
  bool waitsOnHostCoreDevice() const;
  // Forgets a step whose device work is still in flight (the run failed; engine.cc waits for the
  // work queues before the stream gates open).
  void dropPending();
  // The quick start of a call outside a group on host memory (group.cc): on a new stream of one
  // operation with no work queue, runs its plain steps (a receive, a send, a copy or a
  // two-operand reduction, a closing token; no multi-source fold or zero-copy message) one after
  // the other, polling at most `polls` times for each peer's message, and stops at the first
  // step that needs more: a message that has not come, a full lane, a probe, a message of another
  // operation, an abort. progress() then goes on from there as if it had run those steps itself,
  // and reports what made this stop. Nothing is taken that a stop leaves half used. An error
  // here (a lane that broke while a step ran) fails the operation, as progress() would.
  // runStreams' framing costs a small call about as much as its steps (docs/ENGINE.md).
  Result runPlainSteps(int64_t polls);

 private:
  static bool isSkippedToken(const Op& op, const algo::Step& s);
  static bool isOwedToken(const Op& op, size_t step);
  Result oweToken(Op& op, int peer);
  Result readOwed(Op& op, int peer);
  Result drainOwed(Op& op);
  Result settleOwed(Op& op, bool* ready);
  bool roomForStep() const;
  Result flushWork(Op& op);
  Result retireSteps(Op& op, bool* advanced);
  Result tryStep(Op& op, const algo::Step& step);
  Result sendToken(Op& op, int root);
  size_t heldFrom(const RecvConnection* rconn) const;
  Result connectAll(Op& op);
  Result checkOldestFrom(Op& op, int peer);
  Result checkOwedWhileFlushing(Op& op);
  void openAllLanes(Op& op);
  // `spots`: registered user memory where the current step's message, and those of the next
  // receives from the same peer, may land without a copy (RecvConnection::peekInto).
  Result peekData(Op& op, RecvConnection* rconn, int peer, const void** data, size_t* bytes, uint64_t* stamp,
                  bool owedOnly = false, const std::vector<Landing>* spots = nullptr);
  // Fills `spots` for the receive of step stepIndex_ from `peer` (empty: none may land in place).
  void findLandings(Op& op, int peer, std::vector<Landing>* spots) const;
  // Landing spots of step spotsStep_ of *spotsOp_ (recomputed when the step changes).
  std::vector<Landing> spots_;
  const Op* spotsOp_ = nullptr;
  size_t spotsStep_ = 0;
  Result sendProbes(Op& op, int round);
  // The peers the steps from the current one on receive from and (unless sendersOnly) send to.
  std::vector<int> remainingPeers(const Op& op, bool tokenReceivers, bool sendersOnly = false) const;
  void noteSend(SendConnection* c);
  void noteProbe(SendConnection* c, int peer);
  void flushProbes(const Op& op);
  void notePeerGone(const Op& op, int peer);
  Result checkGone(Op& op);

  std::vector<Op*> ops_;
  size_t opIndex_ = 0;
  size_t stepIndex_ = 0;
  bool finished_ = false;
  bool connected_ = false;  // connectAll() ran for ops_[opIndex_]
  // Peers still to probe during ops_[opIndex_] (sendProbes), and the last probe round begun.
  std::vector<int> probeTargets_;
  int probeRound_ = 0;
  bool lanesOpened_ = false;  // checkPending opened the lanes from every peer during ops_[opIndex_]
  int waitingPeer_ = -1;
  bool waitingRecv_ = false;
  bool waitingOwed_ = false;                 // ops_[opIndex_] waits for an owed closing token before it ends
  std::vector<SendConnection*> toFlush_;     // lanes with data committed in this call
  std::vector<SendConnection*> tokenFlush_;  // lanes with a closing token (sendToken)
  std::vector<std::pair<SendConnection*, int>> probeFlush_;  // lanes (and peers) with probes maybe still queued
  // Peers of ops_[opIndex_] that a probe found gone while this rank still receives from them.
  struct GonePeer {
    int peer;
    int rounds;       // idle rounds since, with nothing on the lane from it
    std::string why;  // what the probe ran into
  };
  std::vector<GonePeer> gone_;
  // Steps of ops_[opIndex_] issued on the work queue and not committed yet, oldest first. Each
  // holds a send slot and/or a peer's message until its fence signals.
  struct PendingStep {
    Fence* fence = nullptr;           // nullptr: no device work, done once the steps before it are
    SendConnection* sconn = nullptr;  // to commit `bytes` to when the fence signals
    RecvConnection* rconn = nullptr;  // to release then
    size_t bytes = 0;
    StepWork work;  // described, not yet enqueued (flushWork); bytes == 0 once enqueued or without work
  };
  // A vector, not a deque: it holds at most kMaxPendingSteps entries, and a deque allocates on
  // construction, which every call's streams would pay.
  std::vector<PendingStep> pending_;
  // The runs among the described steps (flushWork enqueues them), and the last one so far.
  size_t describedRuns_ = 0;
  StepWork openRun_;
  // Lanes whose publication retireSteps() holds (Publisher), kept to reuse their storage.
  std::vector<SendConnection*> heldSends_;
  std::vector<RecvConnection*> heldRecvs_;
};

// The streams of a run (group.h): per communicator, its collectives in issue order on one stream,
// and its sends and receives on one stream per (peer, direction). Fills *streams, reusing the
// Stream objects already there: a thread that keeps one vector for call after call allocates
// nothing here once warm (small calls pay for every allocation).
void partitionOps(const std::vector<Op*>& ops, std::vector<Stream>* streams);

// Runs all streams to completion (or the first error, after which the remaining streams are
// abandoned; their communicators record the error as their async error). `progress`, when set,
// counts up whenever a stream advanced: others may watch it to tell a slow run from a stuck one.
Result runStreams(std::vector<Stream>& streams, std::atomic<uint64_t>* progress = nullptr);

// How many times an idle wait polls before it yields the CPU (MIXCCL_SPIN_COUNT; its automatic
// default follows whether the host's `localRanks` ranks each have a core).
int64_t spinPolls(int localRanks);

}  // namespace mixccl
