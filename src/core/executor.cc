// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "src/core/executor.h"

#include <poll.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <tuple>

#include "common/config.h"
#include "common/log.h"
#include "common/per_thread.h"
#include "common/socket.h"
#include "src/core/communicator.h"
#include "src/core/op_stamp.h"
#include "src/core/step_work.h"

namespace mixccl {
namespace {

// Per-thread scratch reused from call to call (a small collective pays for every allocation).
struct ExecutorScratch {
  std::vector<uint8_t> seen;                              // connectAll
  std::vector<std::tuple<Communicator*, int, int>> keys;  // partitionOps: (comm, kind, peer) of a stream
  std::vector<std::pair<uintptr_t, uintptr_t>> touched;   // findLandings
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
  algo::CollArgs shape;  // the buffers' sizes as the schedule builders count them
  shape.kind = op.kind;
  shape.rank = op.comm->rank();
  shape.nranks = op.comm->nranks();
  shape.root = op.root;
  shape.count = op.count;
  const size_t elem = dataTypeSize(op.dtype);
  const auto in = reinterpret_cast<uintptr_t>(op.input);
  const auto out = reinterpret_cast<uintptr_t>(op.output);
  return in + algo::inputElems(shape) * elem <= out || out + algo::outputElems(shape) * elem <= in;
}

// A step that only moves bytes (no reduction), on host memory with no work queue: the kind a
// transport may carry without a copy (SendConnection::commitFrom, RecvConnection::peekInto).
bool plainHostCopy(const Op& op, const algo::Step& s) {
  return op.queue == nullptr && !op.reduction && s.sourceCount == 0;
}

// kRemoteError once the stream's communicator is aborted or revoked (defined with runStreams).
Result checkFlags(const Stream& s);

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
      std::shared_ptr<const algo::Schedule>& done = op.comm->connectedSchedule(op.lane);
      if (done != op.schedule) {
        MIXCCL_TRY(connectAll(op));
        done = op.schedule;
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
      if (op.comm->aborted() || op.comm->revoked()) return checkFlags(*this);
      if (stepIndex_ < steps.size() && roomForStep()) {
        if (isSkippedToken(op, steps[stepIndex_])) {
          ++stepIndex_;
          *advanced = true;
          continue;
        }
        if (isOwedToken(op, stepIndex_)) {
          const int peer = steps[stepIndex_].recvPeer;
          RecvConnection* rconn = nullptr;
          MIXCCL_TRY(op.comm->recvConnection(peer, kLaneColl, &rconn));
          op.comm->owedTokens().add(peer, identityOf(op), OwedTokens::limit(rconn->messageDepth()));
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

// Empty messages stamped with this operation, to every peer the rest of it exchanges messages
// with, so that whichever of them wait for this rank find something to compare (op_stamp.h).
// Only those peers: a peer outside the remaining steps may have finished its part and left (a
// departure that is no error), and probing every rank would open a full mesh of connections
// (n^2 sockets on TCP, twice the shared memory) as soon as one rank is late.
// A probe is advice: a peer in the list may also have left legitimately (it sent us everything we
// still read from it, then destroyed its communicator or exited), so a probe that cannot be
// delivered is dropped quietly. Whether a peer's absence matters is decided by the steps that
// need it. A lane that is full or not set up yet is tried again at the next call; a full lane
// carries data anyway.
// Rounds (`round`, from runStreams): the first after kProbeAfter, then one per kReprobeEvery of
// the same stall, to the peers this operation still receives from. A probe that was delivered
// says nothing about later: a peer whose communicator went away afterwards while its process
// lives on (an abort), and that never opened its lane to this rank, shows no closed connection
// and no dead pid. Only a later probe, refused by the lane this rank opened to it, tells (RDMA
// and TCP; shm also has the peer's rank page). A probe waiting for a free slot keeps the round
// open (it is tried at every call, which checks the lane as well), so a merely slow peer finds at
// most one probe per second of the stall, and no more than a lane's depth on shm and RDMA; it
// skips them as it reads (a few bytes each).
Result Stream::sendProbes(Op& op, int round) {
  Communicator& comm = *op.comm;
  if (op.lane != kLaneColl) return Result::kSuccess;
  // Push what earlier rounds queued: a TCP lane still connecting holds its probe until a call
  // moves it, and a stuck operation makes no other call on that lane. A data message that cannot
  // be flushed is this operation's failure, not a probe's.
  for (SendConnection* c : toFlush_) {
    Result r = c->flush();
    if (r != Result::kInProgress) MIXCCL_TRY(r);
  }
  flushProbes(op);
  if (probeTargets_.empty() && round > probeRound_) {
    // The first round asks every peer of the rest of the operation; later ones only those it
    // still receives from, the peers whose absence is this operation's concern (notePeerGone).
    probeTargets_ = remainingPeers(op, true, /*sendersOnly=*/probeRound_ > 0);
    probeRound_ = round;
  }
  for (size_t i = 0; i < probeTargets_.size();) {
    const int peer = probeTargets_[i];
    Result r;
    {
      QuietFailures quiet;
      SendConnection* sconn = nullptr;
      r = comm.sendConnection(peer, op.lane, &sconn);
      void* slot = nullptr;
      if (r == Result::kSuccess) r = sconn->acquireFor(0, &slot);
      if (r == Result::kInProgress) {
        ++i;
        continue;
      }
      if (r == Result::kSuccess) r = sconn->commit(0, op.stamp | kStampProbe);
      if (r == Result::kSuccess) noteProbe(sconn, peer);
    }
    if (r != Result::kSuccess) notePeerGone(op, peer);
    probeTargets_.erase(probeTargets_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  return Result::kSuccess;
}

// A probe found `peer` gone (its transport refused or dropped the probe: the peer's process or
// communicator no longer exists). Whether that matters is for the lane from it to say, and only
// while this operation still receives from it (checkGone).
void Stream::notePeerGone(const Op& op, int peer) {
  const auto& steps = op.schedule->steps;
  bool receives = false;
  for (size_t i = stepIndex_; i < steps.size() && !receives; ++i) {
    receives = steps[i].recvPeer == peer && !isSkippedToken(op, steps[i]);
  }
  if (!receives) return;
  for (const GonePeer& g : gone_) {
    if (g.peer == peer) return;
  }
  gone_.push_back(GonePeer{peer, 0, lastQuietError()});
}

// A gone peer that still owes this rank messages is no error as long as they are on the lane (it
// left after its part was done: everything it sent is delivered before its lane reports the
// departure). When the lane holds nothing and reports no error of its own for kGoneRounds idle
// rounds, the messages can never come: the peer died, or left, before it sent them (e.g. before
// it even opened the lane, so no closed connection tells). Rounds, not seconds: every round
// drives the transports first, so a connection the peer opened before leaving has been accepted
// and read by then, however loaded the machine is.
Result Stream::checkGone(Op& op) {
  constexpr int kGoneRounds = 8;
  for (size_t i = 0; i < gone_.size();) {
    GonePeer& g = gone_[i];
    RecvConnection* rconn = nullptr;
    MIXCCL_TRY(op.comm->recvConnection(g.peer, op.lane, &rconn));
    const void* data = nullptr;
    size_t bytes = 0;
    uint64_t stamp = 0;
    Result r = peekData(op, rconn, g.peer, &data, &bytes, &stamp);
    if (r == Result::kSuccess) {
      gone_.erase(gone_.begin() + static_cast<std::ptrdiff_t>(i));  // what it sent is here
      continue;
    }
    if (r != Result::kInProgress) return r;  // the lane's own error says more
    if (++g.rounds >= kGoneRounds) {
      return fail(Result::kRemoteError,
                  "rank %d: rank %d is gone (%s) without sending what %s still needs from it; it died or left "
                  "early, check its log",
                  op.comm->rank(), g.peer, g.why.c_str(), describeWait().c_str());
    }
    ++i;
  }
  return Result::kSuccess;
}

// Peers the steps from the current one on exchange messages with, each once, in step order.
// Without `tokenReceivers`, leaves out the root a closing token goes to (unless other steps send it
// data): it does not wait for the token (owed_tokens.h), so it may have finished this operation.
std::vector<int> Stream::remainingPeers(const Op& op, bool tokenReceivers, bool sendersOnly) const {
  std::vector<int> peers;
  std::vector<uint8_t> seen(static_cast<size_t>(op.comm->nranks()), 0);
  const auto& steps = op.schedule->steps;
  for (size_t i = stepIndex_; i < steps.size(); ++i) {
    if (isSkippedToken(op, steps[i])) continue;
    const bool tokenSend = algo::isToken(steps[i]) && steps[i].sendPeer >= 0;
    const bool skipSend = sendersOnly || (tokenSend && !tokenReceivers);
    for (int peer : {steps[i].recvPeer, skipSend ? -1 : steps[i].sendPeer}) {
      if (peer < 0 || seen[peer]) continue;
      seen[peer] = 1;
      peers.push_back(peer);
    }
  }
  return peers;
}

Result Stream::checkPending(Stall stall, int probeRound) {
  const bool probe = stall != Stall::kLook;
  if (!finished_ && opIndex_ >= ops_.size() && !ops_.empty()) return checkOwedWhileFlushing(*ops_.back());
  if (finished_ || opIndex_ >= ops_.size()) return Result::kSuccess;
  // Waiting for its own device, not for a peer; a probe would also take a slot behind ones that
  // issued steps hold uncommitted (commit() publishes the oldest).
  if (!pending_.empty()) return Result::kSuccess;
  Op& op = *ops_[opIndex_];
  if (probe) {
    MIXCCL_TRY(sendProbes(op, probeRound));
    MIXCCL_TRY(checkGone(op));
  }
  // FIFO order per lane: while this operation still expects a message from a peer, the oldest
  // message from that peer must be this operation's. On the collective lane the same holds for a
  // peer it still sends to: that peer cannot have finished this operation, so anything it sent
  // that is not of this operation is a mismatch. Looking there also creates that lane, which
  // unblocks a peer that sends to us when our schedule never receives from it (two ranks that
  // both think they are a broadcast's root wait for each other's shm segment otherwise). The
  // next steps are enough: a stuck operation waits on one of them. (Not a root this rank owes only
  // its closing token: that root does not wait for it, owed_tokens.h.)
  // Each peer once: a ring repeats its two neighbours in every step (and a TCP peek is a system call).
  constexpr size_t kLookahead = 64;
  const auto& steps = op.schedule->steps;
  std::vector<uint8_t> seen(static_cast<size_t>(op.comm->nranks()), 0);
  for (size_t i = stepIndex_; i < steps.size() && i < stepIndex_ + kLookahead; ++i) {
    if (isSkippedToken(op, steps[i])) continue;
    const bool tokenSend = algo::isToken(steps[i]) && steps[i].sendPeer >= 0;
    for (int peer : {steps[i].recvPeer, op.lane == kLaneColl && !tokenSend ? steps[i].sendPeer : -1}) {
      if (peer < 0 || seen[peer]) continue;
      seen[peer] = 1;
      MIXCCL_TRY(checkOldestFrom(op, peer));
    }
  }
  // After a long stall, also the lanes from every other peer this rank has ever received from:
  // a message of this very sequence number with another stamp there is a mismatch even though
  // this operation never reads that lane. Without this look, ranks can wait in a cycle in which
  // each one's evidence sits on a lane its own operation ignores: a rank that took a different
  // broadcast root waits for its (wrong) parent, which finished and waits in the next operation
  // for a rank that in turn waits for it, while the message of the real root lies unread.
  // A message of another sequence number is left alone (a peer may legitimately run ahead).
  // Existing connections only, until the stall is long (openAllLanes).
  if (stall == Stall::kOpenLanes && op.lane == kLaneColl && !lanesOpened_) openAllLanes(op);
  if (probe && op.lane == kLaneColl) {
    for (int peer = 0; peer < op.comm->nranks(); ++peer) {
      RecvConnection* rconn = op.comm->existingRecvConnection(peer, op.lane);
      if (seen[peer] || rconn == nullptr) continue;
      const void* data = nullptr;
      size_t bytes = 0;
      uint64_t stamp = 0;
      Result r = peekData(op, rconn, peer, &data, &bytes, &stamp);
      if (r == Result::kInvalidUsage) return r;  // a probe of this sequence number with another stamp
      // Nothing there, or a peer that left (legitimately, perhaps: this operation needs nothing
      // from it); only the steps that need a peer decide whether its absence is an error.
      if (r != Result::kSuccess) continue;
      if (sameSeq(stamp, op.stamp) && stamp != op.stamp) return stampMismatch(op, stamp, peer);
    }
  }
  return Result::kSuccess;
}

// After a long stall, the collective lanes from every peer, so that the look above covers them
// all. Where a lane's receiver creates it (shm: the receiver's segment), a peer that sends to this
// rank when no schedule of this rank ever reads from it waits for that lane forever, and so does
// its probe: at a communicator's first operations, before most lanes exist, ranks that disagree
// on an operation could otherwise all wait for the deadline with each one's evidence undelivered
// (a broadcast whose root one rank sees differently: the root waits to send to it, the others wait
// for the root). Only then, and once per operation: a mesh of lanes costs a segment or a
// connection object per peer, so a merely late peer (under a second) never causes it. Opening is
// advice, like a probe: a lane that cannot be opened is left out, quietly.
void Stream::openAllLanes(Op& op) {
  lanesOpened_ = true;
  op.comm->openRecvLanes(op.lane);
}

// Every step is done and the call waits for its messages to leave (TCP: the kernel's buffers are
// full). Two ranks that each took themselves as a broadcast's root both end up here, each owing
// a closing token and sending the other data it never reads: nothing would move until the
// deadline. Where a token is owed, the oldest message on that peer's lane must be it (owed
// tokens stand before anything newer), so reading there finds the other root's data instead, as
// the next call would (owed_tokens.h).
Result Stream::checkOwedWhileFlushing(Op& op) {
  if (op.lane != kLaneColl) return Result::kSuccess;
  OwedTokens& owed = op.comm->owedTokens();
  for (int peer = 0; peer < op.comm->nranks() && !owed.empty(); ++peer) {
    if (!owed.from(peer)) continue;
    const Result r = readOwed(op, peer);
    if (r != Result::kSuccess && r != Result::kInProgress) return r;
  }
  return Result::kSuccess;
}

Result Stream::checkOldestFrom(Op& op, int peer) {
  RecvConnection* rconn = nullptr;
  MIXCCL_TRY(op.comm->recvConnection(peer, op.lane, &rconn));
  const void* data = nullptr;
  size_t bytes = 0;
  uint64_t stamp = 0;
  Result r = peekData(op, rconn, peer, &data, &bytes, &stamp);
  if (r == Result::kInProgress) return Result::kSuccess;
  MIXCCL_TRY(r);
  return stamp == op.stamp ? Result::kSuccess : stampMismatch(op, stamp, peer);
}

// A step failed because a peer left or a link broke. When a peer of this operation already sent
// a message of another operation, that mismatch is the cause (the rank that saw it first aborted,
// and this rank noticed the abort): say so instead. Best effort; the error path only.
Result Stream::preferMismatch(Result failure) {
  if (failure != Result::kRemoteError || finished_ || opIndex_ >= ops_.size()) return failure;
  Op& op = *ops_[opIndex_];
  for (int peer : remainingPeers(op, false)) {
    Result r;
    {
      QuietFailures quiet;
      r = checkOldestFrom(op, peer);
    }
    // Again, recorded this time: peek() keeps the message, so the same mismatch is found.
    if (r == Result::kInvalidUsage) return checkOldestFrom(op, peer);
  }
  return failure;
}

std::string Stream::describeWait() const {
  if (finished_ || ops_.empty()) return "nothing";
  char buf[256];
  if (opIndex_ >= ops_.size()) {
    snprintf(buf, sizeof(buf), "flushing %zu connection(s) after its last operation", toFlush_.size());
    return buf;
  }
  const Op& op = *ops_[opIndex_];
  if (waitingOwed_) {
    snprintf(buf, sizeof(buf), "%s (seq %llu, %llu x %s) after its last step: waiting for %s", collName(op.kind),
             static_cast<unsigned long long>(op.seq), static_cast<unsigned long long>(op.count), dataTypeName(op.dtype),
             op.comm->owedTokens().describe(op.comm->owedTokens().oldestPeer()).c_str());
    return buf;
  }
  if (!pending_.empty()) {
    snprintf(buf, sizeof(buf),
             "%s (seq %llu, %llu x %s) step %zu/%zu: waiting for its device work on the %s backend (%zu step(s) "
             "in flight)",
             collName(op.kind), static_cast<unsigned long long>(op.seq), static_cast<unsigned long long>(op.count),
             dataTypeName(op.dtype), stepIndex_ - pending_.size() + 1, op.schedule->steps.size(),
             op.comm->backend()->name(), pending_.size());
    return buf;
  }
  snprintf(buf, sizeof(buf), "%s (seq %llu, %llu x %s) step %zu/%zu: waiting %s rank %d", collName(op.kind),
           static_cast<unsigned long long>(op.seq), static_cast<unsigned long long>(op.count), dataTypeName(op.dtype),
           stepIndex_ + 1, op.schedule->steps.size(), waitingRecv_ ? "for a message from" : "for a free slot to",
           waitingPeer_);
  return buf;
}

WaitBoard::Wait Stream::boardWait() const {
  WaitBoard::Wait w;
  w.what = describeWait();
  if (finished_ || opIndex_ >= ops_.size()) return w;
  // The waited-for peer first, then every other peer the remaining steps exchange messages with.
  if (waitingPeer_ >= 0) w.peers.push_back(waitingPeer_);
  for (int peer : remainingPeers(*ops_[opIndex_], true)) {
    if (peer != waitingPeer_) w.peers.push_back(peer);
  }
  return w;
}

namespace {

// Backs off an idle wait: spin, then yield, then nap (bounded at 200 us so latency stays low).
//
// Spinning only pays when every rank of the host has a core of its own; when ranks outnumber
// cores (threads as ranks, small test machines) a spinning rank steals the CPU from the peer it
// waits for, so the automatic default yields at once there. 8 B on 2 cores, MIXCCL_SPIN_COUNT
// 50 (the previous default) against 0, medians of 2-4 rounds: all-reduce 10.2 -> 5.2 us at 4
// ranks, 31.8 -> 27.8 at 8, 113 -> 97 at 16; broadcast 2.4 -> 1.7, 6.6 -> 4.4, 18.0 -> 11.6.
// More spins were slower still (200: 1.7-2x, 2000: 10x at 8 ranks).
class Backoff {
 public:
  explicit Backoff(int localRanks) {
    spins_ = config::getInt(config::Knob::kSpinCount);
    if (spins_ < 0) {
      // hardware_concurrency() reads /sys on every call: once per process is enough.
      static const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
      spins_ = static_cast<unsigned>(localRanks) <= cores ? 20000 : 0;
    }
  }
  void reset() { idle_ = 0; }
  // `deviceOnCores`: what this wait waits for runs on this host's cores; spinning would take them.
  // A nap ends early when a transport of the streams' communicators signals news (armWait).
  void idle(bool deviceOnCores, const std::vector<Stream>& streams) {
    ++idle_;
    const int64_t spins = deviceOnCores ? std::min<int64_t>(spins_, kDeviceSpins) : spins_;
    if (idle_ < spins) return;
    if (idle_ < spins + 1000) {
      sched_yield();
      return;
    }
    timespec ts{0, std::min<long>(200000, 1000L * (idle_ - spins - 999))};
    fds_.clear();
    Communicator* last = nullptr;
    for (const Stream& s : streams) {
      if (s.empty() || s.done() || s.comm() == last) continue;
      last = s.comm();
      last->armWait(&fds_);
    }
    if (fds_.empty()) {
      nanosleep(&ts, nullptr);
      return;
    }
    pfds_.resize(fds_.size());
    for (size_t i = 0; i < fds_.size(); ++i) pfds_[i] = pollfd{fds_[i], POLLIN, 0};
    (void)ppoll(pfds_.data(), pfds_.size(), &ts, nullptr);
  }

 private:
  static constexpr int64_t kDeviceSpins = 50;
  int64_t spins_;
  int64_t idle_ = 0;
  std::vector<int> fds_;  // kept between naps: a nap allocates nothing once warm
  std::vector<pollfd> pfds_;
};

Result checkFlags(const Stream& s) {
  Communicator* c = s.comm();
  if (c->aborted()) {
    return fail(Result::kRemoteError, "rank %d: communicator was aborted while %s", c->rank(),
                s.describeWait().c_str());
  }
  if (c->revoked()) {
    return fail(Result::kRemoteError, "rank %d: communicator was revoked while %s", c->rank(),
                s.describeWait().c_str());
  }
  return Result::kSuccess;
}

// Fills in the wait boards of the communicators of unfinished streams (hang_report.h).
void publishWaits(std::vector<Stream>& streams, Clock::time_point since) {
  std::vector<std::pair<Communicator*, std::vector<WaitBoard::Wait>>> byComm;
  for (Stream& s : streams) {
    if (s.done() || s.empty()) continue;
    auto it = std::find_if(byComm.begin(), byComm.end(), [&](const auto& e) { return e.first == s.comm(); });
    if (it == byComm.end()) it = byComm.insert(byComm.end(), {s.comm(), {}});
    it->second.push_back(s.boardWait());
  }
  for (auto& [comm, waits] : byComm) comm->board().publish(std::move(waits), since);
}

// Logs the report of every communicator with an unfinished stream, once each.
void logReports(std::vector<Stream>& streams, const char* reason) {
  std::vector<Communicator*> reported;
  for (Stream& s : streams) {
    if (s.done() || s.empty() || std::count(reported.begin(), reported.end(), s.comm()) != 0) continue;
    reported.push_back(s.comm());
    hang::logReport(*s.comm(), reason);
  }
}

void clearWaits(std::vector<Stream>& streams) {
  for (Stream& s : streams) {
    if (!s.empty()) s.comm()->board().clear();
  }
}

}  // namespace

// How long a stream waits before it looks for mismatched messages (Stream::checkPending: a
// system call per lane on TCP, so not on the latency path of small operations), and before it
// probes its peers (op_stamp.h): long enough that a healthy job rarely does, short against any
// deadline.
constexpr std::chrono::milliseconds kCheckAfter{10};
constexpr std::chrono::milliseconds kProbeAfter{200};
constexpr std::chrono::milliseconds kReprobeEvery{1000};
constexpr std::chrono::milliseconds kOpenLanesAfter{1000};

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

void partitionOps(const std::vector<Op*>& ops, std::vector<Stream>* streams) {
  if (ops.size() == 1) {  // a call outside a group: one stream, nothing to sort
    streams->resize(1);
    (*streams)[0].reset();
    (*streams)[0].push(ops[0]);
    return;
  }
  using Key = std::tuple<Communicator*, int, int>;  // (comm, kind, peer) of a stream
  auto keyOf = [](const Op* op) {
    int peer = -1;
    int kind = 0;  // 0 collectives, 1 sends to peer, 2 receives from peer
    if (op->kind == CollKind::kSend || op->kind == CollKind::kRecv) {
      peer = op->root;
      kind = op->kind == CollKind::kSend ? 1 : 2;
    }
    return std::make_tuple(op->comm, kind, peer);
  };
  // A few streams (the usual call or group) are found by a linear search in reused storage; a
  // large group (all-to-all as sends and receives) by a map.
  constexpr size_t kLinearStreams = 16;
  auto& keys = PerThread<ExecutorScratch>::get().keys;
  keys.clear();
  std::map<Key, size_t> index;
  size_t used = 0;
  auto streamFor = [&](const Key& key) -> Stream& {
    size_t at = used;
    if (used <= kLinearStreams) {
      at = static_cast<size_t>(std::find(keys.begin(), keys.end(), key) - keys.begin());
    } else {
      if (index.empty()) {
        for (size_t i = 0; i < keys.size(); ++i) index.emplace(keys[i], i);
      }
      auto it = index.find(key);
      if (it != index.end()) at = it->second;
    }
    if (at == used) {
      keys.push_back(key);
      if (!index.empty()) index.emplace(key, used);
      if (streams->size() <= used) streams->emplace_back();
      (*streams)[used].reset();
      ++used;
    }
    return (*streams)[at];
  };
  for (Op* op : ops) streamFor(keyOf(op)).push(op);
  streams->resize(used);
}

Result runStreams(std::vector<Stream>& streams) {
  const auto timeout = std::chrono::seconds(config::getInt(config::Knob::kTimeout));
  // Read during stalls only (below): a small call that waits a few polls reads no clock at all.
  Clock::time_point lastProgress{};
  bool progressed = true;  // a stream advanced since lastProgress was read (or it was never read)
  int localRanks = 1;
  for (Stream& s : streams) {
    if (!s.empty()) localRanks = std::max(localRanks, s.comm()->localRanks());
  }
  Backoff backoff(localRanks);
  uint64_t polls = 0;
  bool published = false;  // the wait boards describe the current stall
  bool timedOut = false;
  Result result = Result::kSuccess;
  for (;;) {
    bool allDone = true;
    bool advanced = false;
    for (Stream& s : streams) {
      if (s.done() || s.empty()) continue;
      Result r = s.progress(&advanced);
      if (r != Result::kSuccess) {
        result = s.preferMismatch(r);
        break;
      }
      allDone = allDone && s.done();
    }
    if (result != Result::kSuccess || allDone) break;
    if (advanced) {
      backoff.reset();
      progressed = true;
      if (published) clearWaits(streams);
      published = false;
      continue;
    }
    bool deviceOnCores = false;
    for (const Stream& s : streams) deviceOnCores = deviceOnCores || (!s.done() && s.waitsOnHostCoreDevice());
    backoff.idle(deviceOnCores, streams);
    if ((++polls & 63) != 0) continue;
    // Every 64 idle polls: transport housekeeping (a TCP accept is a system call, too costly
    // for every poll; connections an operation uses are driven by its own steps) and the flags.
    // The clock is read here only, not per step or per stall: a small operation waits a few
    // polls for its peer, and a reading costs about as much as a step. A stall thus counts
    // from its 64th idle poll, microseconds late against deadlines of seconds.
    const auto now = Clock::now();
    if (progressed) {
      lastProgress = now;
      progressed = false;
    }
    const auto idleFor = now - lastProgress;
    for (Stream& s : streams) {
      if (s.done() || s.empty()) continue;
      result = s.comm()->progressTransports();
      if (result == Result::kSuccess) result = checkFlags(s);
      if (result == Result::kSuccess && idleFor > kCheckAfter) {
        const Stream::Stall stall = idleFor > kOpenLanesAfter ? Stream::Stall::kOpenLanes
                                    : idleFor > kProbeAfter   ? Stream::Stall::kProbe
                                                              : Stream::Stall::kLook;
        const int probeRound =
            idleFor > kProbeAfter ? 1 + static_cast<int>((idleFor - kProbeAfter) / kReprobeEvery) : 0;
        result = s.checkPending(stall, probeRound);
      }
      if (result != Result::kSuccess) break;
    }
    if (result != Result::kSuccess) break;
    if (!published && idleFor > kPublishAfter) {
      publishWaits(streams, lastProgress);
      published = true;
    }
    if (Clock::now() - lastProgress > timeout) {
      publishWaits(streams, lastProgress);
      published = timedOut = true;
      logReports(streams, "MIXCCL_TIMEOUT");
      for (Stream& s : streams) {
        if (s.done() || s.empty()) continue;
        result = fail(Result::kRemoteError,
                      "rank %d: no progress for %lld s (MIXCCL_TIMEOUT) in %s; that peer is hung, dead, or "
                      "called a different operation",
                      s.comm()->rank(), static_cast<long long>(timeout.count()), s.describeWait().c_str());
        break;
      }
      break;
    }
  }
  if (result != Result::kSuccess) {
    for (Stream& s : streams) {
      if (!s.empty() && !s.done()) s.comm()->setAsyncError(result);
      s.dropPending();
    }
  }
  if (published) {
    // A call that was stuck and then failed (a peer died or left, an abort, a mismatch) tells
    // where it stood too: the first rank to reach its deadline aborts, and its peers fail on
    // that before their own deadlines, but their reports are the ones that name the late rank.
    if (result != Result::kSuccess && !timedOut) {
      logReports(streams, "the blocked call failed");
    }
    clearWaits(streams);
  }
  return result;
}

}  // namespace mixccl
