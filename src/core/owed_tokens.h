// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Closing tokens a root has not read yet. A broadcast's or scatter's root only sends; its schedule
// ends with a token from the rank before it (algorithms/schedule.h), whose stamp proves that this
// rank agreed on the root. Waiting for it would make every such call a round trip (at 2 ranks,
// 8 bytes: about 0.8 us instead of one cache-line transfer), so the executor does not wait: the
// operation returns after its last send and leaves the token here, owed. It is read later, by
// whichever comes first:
//  - a receive on the collective lane from that peer (messages on a lane are in order, so the
//    token stands before anything newer: Stream::peekData() consumes owed tokens first);
//  - the end of a collective while the peer owes more than limit() of its lane: the lane's
//    messageDepth() (transport.h) minus two, so the tokens in that lane leave it two places, one
//    for data and one for a probe. Every schedule is deadlock-free with one free slot per lane
//    (schedule.h) but the ring's pieces (ring_pass.h), whose rounds begin with up to four sends:
//    so every collective first reads the tokens owed to it that have arrived (Stream::drainOwed),
//    which waits for nobody. On TCP every message takes a slot, so the limit is MIXCCL_FIFO_DEPTH
//    - 2 (6 by default), and below a depth of 3 it is 0: the root waits for its token before it
//    returns. RDMA counts the releases it holds back as taken (3 by default). On shm an empty
//    message takes only a line of the lane (shm_segment.h), 64 by default, so 62 tokens may stay
//    owed there and the root's call k is read by call k + 63;
//  - ncclCommFinalize, after its barrier (every rank has sent everything by then).
// So a stream of broadcasts from one root is pipelined: the root runs up to limit() calls ahead
// of the rank that closes its tree, where waiting would cost a round trip per call (at 8 ranks on
// 2 cores: 8 B broadcast 17.6 us per call waiting, 6.6-9.4 with one token owed, 2.1-3.0 with 6).
// Under oversubscription the depth matters as much: a rank that gets the CPU runs as many calls
// as its lanes let it before it yields (docs/ENGINE.md has the measurements of 6 against 62).
// What it costs: a root whose peers disagreed on the root learns of it in a later collective
// (at its next receive from the token's peer, within limit() + 1 calls, or at finalize), with a
// message naming the earlier operation, instead of in the call itself; the receivers of its data
// still fail in the call. Its own output is its own input either way, so no data is mixed.
//
// Threading: used by whoever runs the communicator's operations (one at a time, engine.h).

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "common/result.h"
#include "src/core/op_stamp.h"

namespace mixccl {

class OwedTokens {
 public:
  // How many tokens may stay owed when a collective returns, in a lane that holds `laneMessages`
  // empty messages (RecvConnection::messageDepth): two fewer, so data and a probe still fit.
  static size_t limit(size_t laneMessages);

  bool empty() const { return owed_.empty(); }
  size_t size() const { return owed_.size(); }
  // Rank `peer` owes this rank the token of `op` (on the collective lane), where at most `limit`
  // of its tokens may stay owed (limit() of that lane).
  void add(int peer, const OpIdentity& op, size_t limit);
  // Whether a token from `peer` is owed.
  bool from(int peer) const { return debtorIndex(peer) < debtors_.size(); }
  // The i-th peer that owes tokens (-1 past the last); reading a peer's last token removes it.
  int debtor(size_t i) const { return i < debtors_.size() ? debtors_[i].peer : -1; }
  // The peer of the oldest owed token (-1 when none).
  int oldestPeer() const { return owed_.empty() ? -1 : owed_.front().peer; }
  // A peer that owes more tokens than its limit (-1 when none): its oldest must be read before the
  // current collective returns.
  int peerOverLimit() const;
  // The message at the head of the collective lane from `peer` (not a probe), while from(peer):
  // kSuccess when it is the oldest token owed by `peer` (forgotten here; the caller releases the
  // message), kInvalidUsage naming the owed operation when it is anything else.
  Result match(int peer, size_t bytes, uint64_t stamp);
  // "the closing token of Broadcast (seq 7) from rank 1": the oldest token `peer` owes (for wait
  // descriptions and errors).
  std::string describe(int peer) const;

 private:
  struct Owed {
    int peer;
    OpIdentity op;
  };
  struct Debtor {
    int peer;
    size_t owed;   // tokens of `peer` in owed_
    size_t limit;  // how many may stay owed
  };
  size_t debtorIndex(int peer) const;  // debtors_.size() when `peer` owes nothing
  std::deque<Owed> owed_;              // oldest first; the oldest is read first, so it leaves the front
  std::vector<Debtor> debtors_;        // the peers in owed_: one or two roots' neighbours, usually
};

}  // namespace mixccl
