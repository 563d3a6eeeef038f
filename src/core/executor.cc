// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// A stream's steps: issuing, device work, committing and releasing, closing tokens. The
// checks a stalled stream makes are in stream_checks.cc, the loop that drives streams in
// run_streams.cc.
#include "src/core/executor.h"

#include <algorithm>
#include <vector>

#include "common/log.h"
#include "common/per_thread.h"
#include "src/core/communicator.h"
#include "src/core/op_stamp.h"
#include "src/core/step_work.h"

namespace mixccl {
namespace {

// Per-thread scratch reused from call to call (a small collective pays for every allocation).
struct ExecutorScratch {
  std::vector<uint8_t> seen;                             // connectAll
  std::vector<std::pair<uintptr_t, uintptr_t>> touched;  // findLandings
};

char* bufferAt(const Op& op, algo::Buf buf, uint64_t offset) {
  size_t elem = dataTypeSize(op.dtype);
  switch (buf) {
    case algo::Buf::kInput:
      return const_cast<char*>(static_cast<const char*>(op.input)) + offset * elem;
    case algo::Buf::kOutput:
      return static_cast<char*>(op.output) + offset * elem;
    case algo::Buf::kScratch:
      return static_cast<char*>(op.scratch.get()) + offset * elem;
    case algo::Buf::kNone:
      break;
  }
  return nullptr;
}

// A multi-source step (schedule.h): the left fold of its operands in the listed order, kept in
// dst (or, when the step only sends, in the slot); the last combine stores to both when it has
// both. Operands never overlap dst and are never Input, so no pre() and no aliasing here.
Result foldOperands(const Op& op, const algo::Step& s, void* dst, void* slot) {
  DeviceBackend* dev = op.comm->backend();
  const algo::Operand* o = &op.schedule->operands[s.sourceFirst];
  void* acc = dst != nullptr ? dst : slot;
  const void* a = bufferAt(op, o[0].buf, o[0].offset);
  for (uint32_t k = 1; k < s.sourceCount; ++k) {
    const void* b = bufferAt(op, o[k].buf, o[k].offset);
    const bool last = k + 1 == s.sourceCount;
    if (last && dst != nullptr && slot != nullptr) {
      MIXCCL_TRY(dev->reduceDual(dst, slot, a, b, s.count, op.spec, false, s.finalize, op.queue));
    } else {
      MIXCCL_TRY(dev->reduce(acc, a, b, s.count, op.spec, false, last && s.finalize, op.queue));
    }
    a = acc;
  }
  return Result::kSuccess;
}

// No step of `op` writes its input: it does not overlap the output (in-place calls do). A
// zero-copy send leaves the payload in the input until the peer fetched it, which may be after
// later steps ran, so it needs this.
bool inputStaysIntact(const Op& op) {
  if (op.kind == CollKind::kSend) return true;
  if (op.output == nullptr) return true;
  const auto in = reinterpret_cast<uintptr_t>(op.input);
  const auto out = reinterpret_cast<uintptr_t>(op.output);
  return in + inputBytes(op) <= out || out + outputBytes(op) <= in;
}

// A step that only moves bytes (no reduction), on host memory with no work queue: the kind a
// transport may carry without a copy (SendConnection::commitFrom, RecvConnection::peekInto).
bool plainHostCopy(const Op& op, const algo::Step& s) {
  return op.queue == nullptr && !op.reduction && s.sourceCount == 0;
}

// kRemoteError once the stream's communicator is aborted or revoked (defined with runStreams).
}  // namespace

void Stream::noteSend(SendConnection* c) {
  if (std::find(toFlush_.begin(), toFlush_.end(), c) == toFlush_.end()) toFlush_.push_back(c);
}

void Stream::noteProbe(SendConnection* c, int peer) {
  for (const auto& p : probeFlush_) {
    if (p.first == c) return;
  }
  probeFlush_.emplace_back(c, peer);
}

// Probes still queued (a TCP lane still connecting) leave when they can. One that cannot is
// dropped: the call never waits for, or fails on, a probe; its peer is gone (notePeerGone).
void Stream::flushProbes(const Op& op) {
  for (size_t i = 0; i < probeFlush_.size();) {
    Result r;
    {
      QuietFailures quiet;
      r = probeFlush_[i].first->flush();
    }
    if (r == Result::kInProgress) {
      ++i;
      continue;
    }
    if (r != Result::kSuccess) notePeerGone(op, probeFlush_[i].second);
    probeFlush_.erase(probeFlush_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

// Commands in flight per stream with device work: enough to hide a work-queue round trip
// (enqueue, the device's scheduler, the fence poll) behind the next steps' transfers. A command
// may cover several steps (a round's pieces, ring_pass.h, or adjacent chunks of a chain), so up
// to kMaxPendingSteps steps hold slots; the FIFO's depth bounds that too. docs/ENGINE.md has the
// measurements.
constexpr size_t kStepsInFlight = 4;
constexpr size_t kMaxPendingSteps = kStepsInFlight * 4;

// Room to issue one more step: at most kStepsInFlight commands enqueued or being described (runs).
// The step may extend the last run or start one more, so up to kStepsInFlight + 1 commands.
bool Stream::roomForStep() const {
  if (pending_.size() >= kMaxPendingSteps) return false;
  size_t commands = describedRuns_;
  for (const PendingStep& p : pending_) commands += p.fence != nullptr ? 1 : 0;
  return commands <= kStepsInFlight;
}

namespace {

// The copy or reduction of step `s` (no multi-source fold) over the step's resolved operands.
StepWork describeWork(const Op& op, const algo::Step& s, const void* in, void* dst, void* slot, const void* src,
                      bool landed) {
  StepWork w;
  w.bytes = s.count * dataTypeSize(op.dtype);
  w.out = dst != nullptr ? dst : slot;
  w.outBuf = dst != nullptr ? s.dst : algo::Buf::kNone;
  w.out2 = dst != nullptr ? slot : nullptr;
  if (op.reduction) {
    // pre() applies only to this rank's own input (see ReduceSpec).
    w.pre = src != nullptr && s.src == algo::Buf::kInput;
    w.finalize = s.finalize;
    w.a = in != nullptr && src != nullptr ? in : nullptr;
    w.b = src != nullptr ? src : in;
    w.bBuf = src != nullptr ? s.src : algo::Buf::kNone;
  } else {
    w.copy = true;
    w.b = landed ? nullptr : (in != nullptr ? in : src);
    w.bBuf = in != nullptr ? algo::Buf::kNone : s.src;
  }
  return w;
}

// Holds the publication of what one retireSteps() call commits and releases (transport.h,
// holdPublish) and publishes it when it goes out of scope. Its lists are the stream's, reused.
class Publisher {
 public:
  Publisher(std::vector<SendConnection*>* sends, std::vector<RecvConnection*>* recvs) : sends_(sends), recvs_(recvs) {}
  ~Publisher() {
    for (SendConnection* c : *sends_) c->publish();
    for (RecvConnection* c : *recvs_) c->publish();
    sends_->clear();
    recvs_->clear();
  }
  void hold(SendConnection* c) { add(sends_, c); }
  void hold(RecvConnection* c) { add(recvs_, c); }

 private:
  template <class C>
  static void add(std::vector<C*>* held, C* c) {
    if (c == nullptr || std::find(held->begin(), held->end(), c) != held->end()) return;
    c->holdPublish();
    held->push_back(c);
  }
  std::vector<SendConnection*>* sends_;
  std::vector<RecvConnection*>* recvs_;
};

}  // namespace

// Enqueues the described work of the steps issued since the last flush, adjacent steps that
// continue each other as one command (step_work.h), each run with one fence on its first step:
// the run's later steps carry none, so they retire right behind it.
Result Stream::flushWork(Op& op) {
  DeviceBackend* dev = op.comm->backend();
  size_t i = 0;  // described steps (work.bytes > 0) come after every enqueued one
  while (i < pending_.size()) {
    if (pending_[i].work.bytes == 0) {
      ++i;
      continue;
    }
    StepWork run = pending_[i].work;
    size_t end = i + 1;
    while (end < pending_.size() && pending_[end].sconn == pending_[i].sconn &&
           pending_[end].rconn == pending_[i].rconn) {
      alignToRun(run, &pending_[end].work, pending_[end].sconn, pending_[end].rconn);
      if (!continues(run, pending_[end].work)) break;
      run.bytes += pending_[end].work.bytes;
      ++end;
    }
    MIXCCL_TRY(issueWork(op, run));
    MIXCCL_TRY(dev->record(op.queue, &pending_[i].fence));
    for (size_t k = i; k < end; ++k) pending_[k].work.bytes = 0;
    i = end;
  }
  describedRuns_ = 0;
  return Result::kSuccess;
}

// Messages from `rconn` that issued steps hold (not released yet): the next step reads the one
// behind them.
size_t Stream::heldFrom(const RecvConnection* rconn) const {
  size_t n = 0;
  for (const PendingStep& p : pending_) n += p.rconn == rconn ? 1 : 0;
  return n;
}

// One step: take the peer's message (if any) and a send slot (if any), combine, publish. Until
// both resources are available nothing is consumed, so the step can simply be retried.
Result Stream::tryStep(Op& op, const algo::Step& s) {
  if (s.sendPeer >= 0 && op.lane == kLaneColl && algo::isToken(s)) return sendToken(op, s.sendPeer);
  Communicator& comm = *op.comm;
  const size_t bytes = s.count * dataTypeSize(op.dtype);
  RecvConnection* rconn = nullptr;
  SendConnection* sconn = nullptr;
  const void* in = nullptr;
  void* slot = nullptr;
  if (s.recvPeer >= 0) {
    waitingPeer_ = s.recvPeer;
    waitingRecv_ = true;
    MIXCCL_TRY(comm.recvConnection(s.recvPeer, op.lane, &rconn));
    size_t got = 0;
    uint64_t stamp = 0;
    const size_t ahead = heldFrom(rconn);
    if (ahead == 0) {
      // Registered destinations may take this message, and the next ones from this peer,
      // straight from the peer's buffer.
      if (spotsOp_ != &op || spotsStep_ != stepIndex_) {
        findLandings(op, s.recvPeer, &spots_);
        spotsOp_ = &op;
        spotsStep_ = stepIndex_;
      }
      MIXCCL_TRY(peekData(op, rconn, s.recvPeer, &in, &got, &stamp, false, spots_.empty() ? nullptr : &spots_));
    } else {
      MIXCCL_TRY(rconn->peekAt(ahead, &in, &got, &stamp));
      // A probe behind held messages cannot be released yet: wait until the steps holding them
      // are committed, then peekData() consumes it.
      if ((stamp & kStampProbe) != 0) return Result::kInProgress;
    }
    if (stamp != op.stamp) return stampMismatch(op, stamp, s.recvPeer);
    if (op.lane == kLaneColl) comm.board().notePeerReached(s.recvPeer, op.seq);
    if (got != bytes) {
      return fail(Result::kInvalidUsage,
                  "%s (seq %llu) on rank %d expected a %zu-byte message from rank %d and got %zu bytes: the ranks "
                  "called different operations or counts",
                  collName(op.kind), static_cast<unsigned long long>(op.seq), comm.rank(), bytes, s.recvPeer, got);
    }
  }
  if (s.sendPeer >= 0) {
    waitingPeer_ = s.sendPeer;
    waitingRecv_ = false;
    MIXCCL_TRY(comm.sendConnection(s.sendPeer, op.lane, &sconn));
    MIXCCL_TRY(sconn->acquireFor(bytes, &slot));
    if (bytes > sconn->slotBytes()) {
      return fail(Result::kInternalError, "step of %zu bytes exceeds the %zu-byte slot", bytes, sconn->slotBytes());
    }
  }
  void* dst = bufferAt(op, s.dst, s.dstOffset);
  const void* src = bufferAt(op, s.src, s.srcOffset);
  // A send of this rank's own registered input may leave the payload where it is (and a step
  // that also keeps a copy in its output copies it there itself).
  MemRegion fromReg;
  if (slot != nullptr && in == nullptr && s.src == algo::Buf::kInput && bytes > 0 && plainHostCopy(op, s) &&
      !comm.regions().empty() && inputStaysIntact(op)) {
    fromReg = comm.regions().find(src, bytes);
    if (fromReg.id != 0 && !sconn->canCommitFrom(bytes, fromReg)) fromReg.id = 0;
  }
  if (fromReg.id != 0) {
    if (dst != nullptr) MIXCCL_TRY(comm.backend()->copy(dst, src, bytes, nullptr));
    MIXCCL_TRY(sconn->commitFrom(src, bytes, op.stamp, fromReg));
    noteSend(sconn);
    return Result::kSuccess;
  }
  void* primary = dst != nullptr ? dst : slot;
  DeviceBackend* dev = comm.backend();
  // The transport may have landed the message in place already (peekInto).
  const bool landed = in != nullptr && in == dst;
  const bool deviceWork = primary != nullptr && bytes > 0 && !(landed && slot == nullptr);
  if (deviceWork && op.queue != nullptr && s.sourceCount == 0) {
    // Described, not enqueued: flushWork() hands the steps issued together to the queue in runs.
    PendingStep p{nullptr, sconn, rconn, bytes, describeWork(op, s, in, dst, slot, src, landed)};
    const PendingStep* last = pending_.empty() ? nullptr : &pending_.back();
    const bool sameLanes = last != nullptr && last->work.bytes > 0 && last->sconn == sconn && last->rconn == rconn;
    if (sameLanes) alignToRun(openRun_, &p.work, sconn, rconn);
    if (sameLanes && continues(openRun_, p.work)) {
      openRun_.bytes += p.work.bytes;
    } else {
      openRun_ = p.work;
      ++describedRuns_;
    }
    pending_.push_back(p);
    return Result::kSuccess;
  }
  if (deviceWork && op.queue != nullptr) MIXCCL_TRY(flushWork(op));  // queue order = issue order
  if (deviceWork) {
    if (s.sourceCount > 0) {
      MIXCCL_TRY(foldOperands(op, s, dst, slot));
    } else {
      MIXCCL_TRY(issueWork(op, describeWork(op, s, in, dst, slot, src, landed)));
    }
  }
  if (op.queue != nullptr) {
    // Issued, not done: the slot is committed and the message released once the queue got here
    // (retireSteps), in issue order, also for a step without device work. Resources stay taken
    // meanwhile, so nothing is retried.
    PendingStep p{nullptr, sconn, rconn, bytes, StepWork{}};
    if (deviceWork) MIXCCL_TRY(dev->record(op.queue, &p.fence));
    pending_.push_back(p);
    return Result::kSuccess;
  }
  if (sconn != nullptr) {
    MIXCCL_TRY(sconn->commit(bytes, op.stamp));
    noteSend(sconn);
  }
  if (rconn != nullptr) MIXCCL_TRY(rconn->release());
  return Result::kSuccess;
}

Result Stream::runPlainSteps(int64_t polls) {
  if (ops_.size() != 1 || opIndex_ != 0 || stepIndex_ != 0 || connected_) return Result::kSuccess;
  Op& op = *ops_[0];
  Communicator& comm = *op.comm;
  // progress() begins a new operation as here, but may connect lanes and drop registrations: no
  // quick start then (no registrations: no zero-copy message either).
  if (op.queue != nullptr || !comm.regions().empty() || comm.regions().hasDropped()) return Result::kSuccess;
  if (!comm.connectedBefore(op.lane, op.schedule.get())) return Result::kSuccess;
  connected_ = true;
  // Owed closing tokens that have come; one that has not stands before this operation's message
  // on its lane, where the stamp check below stops.
  if (op.lane == kLaneColl && !comm.owedTokens().empty()) MIXCCL_TRY(drainOwed(op));
  const auto& steps = op.schedule->steps;
  const size_t elem = dataTypeSize(op.dtype);
  for (; stepIndex_ < steps.size(); ++stepIndex_) {
    const algo::Step& s = steps[stepIndex_];
    if (comm.aborted() || comm.revoked()) return Result::kSuccess;
    if (op.lane == kLaneColl && algo::isToken(s)) {
      if (isSkippedToken(op, s)) continue;
      if (isOwedToken(op, stepIndex_)) {
        MIXCCL_TRY(oweToken(op, s.recvPeer));
        continue;
      }
      if (s.sendPeer < 0 || sendToken(op, s.sendPeer) != Result::kSuccess) return Result::kSuccess;
      continue;
    }
    if (s.sourceCount != 0 || algo::isToken(s)) return Result::kSuccess;
    const size_t bytes = s.count * elem;
    RecvConnection* rconn = nullptr;
    const void* in = nullptr;
    if (s.recvPeer >= 0) {
      if (comm.recvConnection(s.recvPeer, op.lane, &rconn) != Result::kSuccess) return Result::kSuccess;
      size_t got = 0;
      uint64_t stamp = 0;
      Result r = rconn->peek(&in, &got, &stamp);
      for (int64_t i = 0; r == Result::kInProgress && i < polls; ++i) r = rconn->peek(&in, &got, &stamp);
      // A probe carries kStampProbe, so it stops here too, as anything not this step's message.
      if (r != Result::kSuccess || stamp != op.stamp || got != bytes) return Result::kSuccess;
    }
    SendConnection* sconn = nullptr;
    void* slot = nullptr;
    if (s.sendPeer >= 0) {
      // The slot is the last thing taken: once it is, the step completes or the operation fails.
      if (comm.sendConnection(s.sendPeer, op.lane, &sconn) != Result::kSuccess || bytes > sconn->slotBytes() ||
          sconn->acquireFor(bytes, &slot) != Result::kSuccess) {
        return Result::kSuccess;
      }
    }
    waitingPeer_ = s.sendPeer >= 0 ? s.sendPeer : s.recvPeer;
    waitingRecv_ = s.sendPeer < 0;
    if (rconn != nullptr && op.lane == kLaneColl) comm.board().notePeerReached(s.recvPeer, op.seq);
    void* dst = bufferAt(op, s.dst, s.dstOffset);
    const void* src = bufferAt(op, s.src, s.srcOffset);
    if ((dst != nullptr || slot != nullptr) && bytes > 0) {
      MIXCCL_TRY(issueWork(op, describeWork(op, s, in, dst, slot, src, /*landed=*/false)));
    }
    if (sconn != nullptr) {
      MIXCCL_TRY(sconn->commit(bytes, op.stamp));
      noteSend(sconn);
    }
    if (rconn != nullptr) MIXCCL_TRY(rconn->release());
  }
  return Result::kSuccess;
}

// At most this many receives get a landing spot at once: the FIFO depth bounds how many messages
// can have arrived anyway.
constexpr size_t kMaxLandings = 8;

void Stream::findLandings(Op& op, int peer, std::vector<Landing>* spots) const {
  spots->clear();
  Communicator& comm = *op.comm;
  if (op.queue != nullptr || op.reduction || comm.regions().empty()) return;
  const auto& steps = op.schedule->steps;
  const size_t elem = dataTypeSize(op.dtype);
  // Byte ranges the steps from the current one on read or write: a later receive may land early
  // only where none of the steps before it looks.
  auto& touched = PerThread<ExecutorScratch>::get().touched;
  touched.clear();
  auto touch = [&](algo::Buf b, uint64_t offset, uint64_t count) {
    if (b == algo::Buf::kNone || count == 0) return;
    const auto lo = reinterpret_cast<uintptr_t>(bufferAt(op, b, offset));
    touched.emplace_back(lo, lo + count * elem);
  };
  auto clashes = [&](const void* p, size_t bytes) {
    const auto lo = reinterpret_cast<uintptr_t>(p);
    for (const auto& [a, b] : touched) {
      if (lo < b && a < lo + bytes) return true;
    }
    return false;
  };
  for (size_t k = stepIndex_; k < steps.size() && spots->size() < kMaxLandings; ++k) {
    const algo::Step& s = steps[k];
    if (s.recvPeer == peer) {
      const size_t bytes = s.count * elem;
      if (s.sourceCount != 0 || s.dst == algo::Buf::kNone || bytes == 0) break;
      void* dst = bufferAt(op, s.dst, s.dstOffset);
      if (clashes(dst, bytes)) break;
      const MemRegion reg = comm.regions().find(dst, bytes);
      if (reg.id == 0) break;
      spots->push_back(Landing{dst, bytes, reg});
    }
    touch(s.src, s.srcOffset, s.count);
    touch(s.dst, s.dstOffset, s.count);
    for (uint32_t i = 0; i < s.sourceCount; ++i) {
      const algo::Operand& o = op.schedule->operands[s.sourceFirst + i];
      touch(o.buf, o.offset, s.count);
    }
  }
}

// A root's closing token. The root does not wait for it (owed_tokens.h) and may have finished,
// even destroyed its communicator, by now: a token it can no longer take is no error here (as with
// probes); if it still needed it, the root's side reports the mismatch or the loss.
Result Stream::sendToken(Op& op, int root) {
  if (!pending_.empty()) return Result::kInProgress;  // after the steps before it, as every message
  waitingPeer_ = root;
  waitingRecv_ = false;
  Result r;
  SendConnection* sconn = nullptr;
  {
    QuietFailures quiet;
    r = op.comm->sendConnection(root, op.lane, &sconn);
    void* slot = nullptr;
    if (r == Result::kSuccess) r = sconn->acquireFor(0, &slot);
    if (r == Result::kInProgress) return r;
    if (r == Result::kSuccess) r = sconn->commit(0, op.stamp);
  }
  if (r == Result::kSuccess) tokenFlush_.push_back(sconn);
  return Result::kSuccess;
}

// The second phase of steps with device work: the oldest ones whose fences signalled publish
// what they wrote, in issue order.
Result Stream::retireSteps(Op& op, bool* advanced) {
  MIXCCL_TRY(flushWork(op));
  DeviceBackend* dev = op.comm->backend();
  // What one call retires becomes visible to the peers at once (holdPublish): a run's messages
  // reach a receiver that covers them with one command together.
  Publisher publisher(&heldSends_, &heldRecvs_);
  while (!pending_.empty()) {
    PendingStep& p = pending_.front();
    Result r = dev->query(p.fence);
    if (r == Result::kInProgress) return Result::kSuccess;
    if (r != Result::kSuccess) {
      return fail(r, "rank %d: device work of %s failed on the %s backend: %s", op.comm->rank(), describeWait().c_str(),
                  dev->name(), lastError().c_str());
    }
    dev->releaseFence(p.fence);
    p.fence = nullptr;
    publisher.hold(p.sconn);
    publisher.hold(p.rconn);
    if (p.sconn != nullptr) {
      MIXCCL_TRY(p.sconn->commit(p.bytes, op.stamp));
      noteSend(p.sconn);
    }
    if (p.rconn != nullptr) MIXCCL_TRY(p.rconn->release());
    pending_.erase(pending_.begin());  // at most kMaxPendingSteps entries
    *advanced = true;
  }
  return Result::kSuccess;
}

bool Stream::waitsOnHostCoreDevice() const { return !ops_.empty() && comm()->deviceOnHostCores(); }

void Stream::dropPending() {
  if (!ops_.empty()) {
    DeviceBackend* dev = ops_[std::min(opIndex_, ops_.size() - 1)]->comm->backend();
    for (PendingStep& p : pending_) dev->releaseFence(p.fence);
  }
  pending_.clear();
  describedRuns_ = 0;
}

// Creates every connection an operation will use before its first step. Connections are
// otherwise lazy, and a lane whose receiving end is set up only when the receiver reaches its
// first receive could leave every rank of an all-to-all waiting to send to a peer that is itself
// waiting to send (shared memory needs the receiver's segment before the first message).
Result Stream::connectAll(Op& op) {
  Communicator& comm = *op.comm;
  auto& seen = PerThread<ExecutorScratch>::get().seen;  // reused: every call starts here
  seen.assign(static_cast<size_t>(comm.nranks()), 0);
  for (const algo::Step& s : op.schedule->steps) {
    if (s.recvPeer >= 0 && !(seen[s.recvPeer] & 1)) {
      RecvConnection* c = nullptr;
      MIXCCL_TRY(comm.recvConnection(s.recvPeer, op.lane, &c));
      seen[s.recvPeer] |= 1;
    }
    if (s.sendPeer >= 0 && !(seen[s.sendPeer] & 2)) {
      SendConnection* c = nullptr;
      MIXCCL_TRY(comm.sendConnection(s.sendPeer, op.lane, &c));
      seen[s.sendPeer] |= 2;
    }
  }
  return Result::kSuccess;
}

// A closing token step (schedule.h) that this operation leaves out (closingTokenDue, op_stamp.h):
// neither side sends or reads it, nor looks for it.
bool Stream::isSkippedToken(const Op& op, const algo::Step& s) {
  return !op.closingToken && op.lane == kLaneColl && algo::isToken(s);
}

// The root's closing token (schedule.h), when it is all that is left of a collective: it is not
// waited for but left owed (owed_tokens.h).
bool Stream::isOwedToken(const Op& op, size_t step) {
  const auto& steps = op.schedule->steps;
  return step + 1 == steps.size() && op.lane == kLaneColl && steps[step].recvPeer >= 0 && algo::isToken(steps[step]);
}

// The root's closing token from `peer` is left owed (isOwedToken).
Result Stream::oweToken(Op& op, int peer) {
  RecvConnection* rconn = nullptr;
  MIXCCL_TRY(op.comm->recvConnection(peer, kLaneColl, &rconn));
  op.comm->owedTokens().add(peer, identityOf(op), OwedTokens::limit(rconn->messageDepth()));
  return Result::kSuccess;
}

// Reads what has arrived of the closing tokens `peer` owes this rank (peekData, owedOnly): kSuccess
// once none is owed any more, kInProgress while one has not arrived, kInvalidUsage when another
// message stands where one is due.
Result Stream::readOwed(Op& op, int peer) {
  RecvConnection* rconn = nullptr;
  MIXCCL_TRY(op.comm->recvConnection(peer, kLaneColl, &rconn));
  const void* data = nullptr;
  size_t bytes = 0;
  uint64_t stamp = 0;
  return peekData(op, rconn, peer, &data, &bytes, &stamp, /*owedOnly=*/true);
}

// Before a collective's first step: reads the closing tokens owed to this rank that have arrived
// (waits for none). Tokens may fill a lane but for two places (OwedTokens::limit), and a ring
// round begins with up to four sends (ring_pass.h, pieces): if every rank of a ring first waited
// to send, none would reach the receive that reads them. Reading them here, before any send of
// this collective, cannot wait on anybody, so it breaks that cycle.
Result Stream::drainOwed(Op& op) {
  OwedTokens& owed = op.comm->owedTokens();
  for (size_t i = 0;;) {
    const int peer = owed.debtor(i);
    if (peer < 0) return Result::kSuccess;
    const Result r = readOwed(op, peer);
    if (r != Result::kInProgress) MIXCCL_TRY(r);
    if (owed.from(peer)) ++i;  // otherwise it left the list and the next debtor took its place
  }
}

// Before a collective returns: while a peer owes more closing tokens than its lane's limit
// (OwedTokens::limit), reads its oldest (and whatever else arrived on its lane); *ready stays
// false while it has not.
Result Stream::settleOwed(Op& op, bool* ready) {
  OwedTokens& owed = op.comm->owedTokens();
  waitingOwed_ = false;
  for (int peer = owed.peerOverLimit(); peer >= 0; peer = owed.peerOverLimit()) {
    Result r = readOwed(op, peer);
    if (r == Result::kInProgress) {
      waitingPeer_ = peer;
      waitingRecv_ = true;
      waitingOwed_ = true;
      *ready = false;
      return Result::kSuccess;
    }
    MIXCCL_TRY(r);
  }
  return Result::kSuccess;
}

Result Stream::progress(bool* advanced) {
  while (opIndex_ < ops_.size()) {
    Op& op = *ops_[opIndex_];
    const auto& steps = op.schedule->steps;
    if (stepIndex_ == 0 && !connected_) {
      op.comm->dropStaleRegions();
      if (!op.comm->connectedBefore(op.lane, op.schedule.get())) {
        MIXCCL_TRY(connectAll(op));
        op.comm->noteConnected(op.lane, op.schedule);
      }
      connected_ = true;
      if (op.lane == kLaneColl && !op.comm->owedTokens().empty()) MIXCCL_TRY(drainOwed(op));
    }
    // Issue steps while there is room, then retire what the device finished; retiring only
    // when nothing more can be issued keeps fence polls off the issue path.
    while (stepIndex_ < steps.size() || !pending_.empty()) {
      // While peers keep up, this loop runs a whole operation without returning to runStreams'
      // idle checks: an abort or revoke must not wait for its end (seconds for a large one on a
      // slow host). Two loads per step.
      if (op.comm->aborted() || op.comm->revoked()) return checkFlags();
      if (stepIndex_ < steps.size() && roomForStep()) {
        if (isSkippedToken(op, steps[stepIndex_])) {
          ++stepIndex_;
          *advanced = true;
          continue;
        }
        if (isOwedToken(op, stepIndex_)) {
          MIXCCL_TRY(oweToken(op, steps[stepIndex_].recvPeer));
          ++stepIndex_;
          *advanced = true;
          continue;
        }
        Result r = tryStep(op, steps[stepIndex_]);
        if (r != Result::kInProgress) {
          MIXCCL_TRY(r);
          ++stepIndex_;
          *advanced = true;
          continue;
        }
      }
      bool retired = false;
      MIXCCL_TRY(retireSteps(op, &retired));
      if (!retired) return Result::kSuccess;
      *advanced = true;
    }
    if (op.lane == kLaneColl && !op.comm->owedTokens().empty()) {
      bool ready = true;
      MIXCCL_TRY(settleOwed(op, &ready));
      if (!ready) return Result::kSuccess;
    }
    if (op.lane == kLaneColl) op.comm->board().noteDone(op.seq);
    ++opIndex_;
    stepIndex_ = 0;
    spotsOp_ = nullptr;
    connected_ = false;
    probeTargets_.clear();
    probeRound_ = 0;
    lanesOpened_ = false;
    gone_.clear();
  }
  // Everything is issued; the call may return once every message left this rank (tokens too,
  // though one the root can no longer take is dropped: sendToken()).
  if (!ops_.empty()) flushProbes(*ops_.back());
  while (!tokenFlush_.empty()) {
    Result r;
    {
      QuietFailures quiet;
      r = tokenFlush_.back()->flush();
    }
    if (r == Result::kInProgress) return Result::kSuccess;
    tokenFlush_.pop_back();
    *advanced = true;
  }
  while (!toFlush_.empty()) {
    Result r = toFlush_.back()->flush();
    if (r == Result::kInProgress) return Result::kSuccess;
    MIXCCL_TRY(r);
    toFlush_.pop_back();
    *advanced = true;
  }
  finished_ = true;
  return Result::kSuccess;
}

// peek() that consumes probes: a probe of this operation's sequence number that describes
// another operation is a mismatch; any other probe has served its purpose.
// With `owedOnly`, stops (kSuccess, no message) once no closing token from `peer` is owed: what
// follows on the lane is not this caller's business, nor is a lane the peer closed after it.
Result Stream::peekData(Op& op, RecvConnection* rconn, int peer, const void** data, size_t* bytes, uint64_t* stamp,
                        bool owedOnly, const std::vector<Landing>* spots) {
  for (;;) {
    if (owedOnly && !op.comm->owedTokens().from(peer)) return Result::kSuccess;
    if (spots != nullptr) {
      MIXCCL_TRY(rconn->peekInto(spots->data(), spots->size(), op.stamp, data, bytes, stamp));
    } else {
      MIXCCL_TRY(rconn->peek(data, bytes, stamp));
    }
    if ((*stamp & kStampProbe) == 0) {
      // Owed closing tokens (owed_tokens.h) stand before anything newer from that peer.
      OwedTokens& owed = op.comm->owedTokens();
      if (op.lane != kLaneColl || owed.empty() || !owed.from(peer)) return Result::kSuccess;
      MIXCCL_TRY(owed.match(peer, *bytes, *stamp));
      MIXCCL_TRY(rconn->release());
      continue;
    }
    const uint64_t theirs = *stamp & ~kStampProbe;
    if (sameSeq(theirs, op.stamp) && theirs != op.stamp) return stampMismatch(op, theirs, peer);
    if (op.lane == kLaneColl) {
      // The probe carries the low 16 bits of the sender's sequence number; it is near ours.
      const auto delta = static_cast<int16_t>(static_cast<uint16_t>(theirs - op.seq));
      op.comm->board().notePeerWaiting(peer, op.seq + static_cast<uint64_t>(static_cast<int64_t>(delta)));
    }
    MIXCCL_TRY(rconn->release());
  }
}

void Stream::reset() {
  ops_.clear();
  spotsOp_ = nullptr;  // a later call's operation may live at the same address
  opIndex_ = 0;
  stepIndex_ = 0;
  finished_ = false;
  connected_ = false;
  probeTargets_.clear();
  probeRound_ = 0;
  lanesOpened_ = false;
  waitingPeer_ = -1;
  waitingRecv_ = false;
  waitingOwed_ = false;
  toFlush_.clear();
  tokenFlush_.clear();
  probeFlush_.clear();
  gone_.clear();
  pending_.clear();
  describedRuns_ = 0;
}

}  // namespace mixccl
