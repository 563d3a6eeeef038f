// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// What a stream does when it is stuck or must explain itself: probes to its peers (op_stamp.h),
// peers found gone, mismatched messages waiting in its lanes, the abort and revoke flags, and the
// descriptions that timeouts and hang reports print. runStreams (run_streams.cc) calls these from
// idle polls only: none of it is on the path of a call that does not wait.
#include <cstdio>
#include <string>
#include <vector>

#include "common/log.h"
#include "src/core/communicator.h"
#include "src/core/executor.h"
#include "src/core/op_stamp.h"

namespace mixccl {

Result Stream::checkFlags() const {
  Communicator* c = comm();
  if (c->aborted()) {
    return fail(Result::kRemoteError, "rank %d: communicator was aborted while %s", c->rank(), describeWait().c_str());
  }
  if (c->revoked()) {
    return fail(Result::kRemoteError, "rank %d: communicator was revoked while %s", c->rank(), describeWait().c_str());
  }
  return Result::kSuccess;
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

bool Stream::waitsForRoomToSelf() const {
  if (finished_ || opIndex_ >= ops_.size() || !pending_.empty() || waitingRecv_ || waitingOwed_) return false;
  const Op& op = *ops_[opIndex_];
  return op.kind == CollKind::kSend && op.root == op.comm->rank() && waitingPeer_ == op.root;
}

bool Stream::receivesFromSelf() const {
  if (finished_) return false;
  for (size_t i = opIndex_; i < ops_.size(); ++i) {
    if (ops_[i]->kind == CollKind::kRecv && ops_[i]->root == ops_[i]->comm->rank()) return true;
  }
  return false;
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

}  // namespace mixccl
