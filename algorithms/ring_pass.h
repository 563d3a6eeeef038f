// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// One pass around the ring: the building block of ring reduce-scatter, all-gather and all-reduce.
//
// Terms. A pass moves n "chains" (n = nranks >= 2). Chain o starts at rank o (its origin), hops
// o -> o+1 -> ... and ends at rank o+n-1 = o-1 (its terminal); every hop is one message on the
// link r -> r+1. Rank r sits at position p = (r - o) mod n of chain o:
//   p == 0      origin:   no receive, one send            (a pure send)
//   0 < p < n-1 relay:    receive, combine, send in ONE step
//   p == n-1    terminal: receive, combine, no send       (a pure receive)
// What is carried and combined (partial sums, gathered blocks) is up to the caller; the pass only
// fixes who does what in which order. Per pass each rank sends n-1 and receives n-1 messages.
//
// Order. Rank r runs its chains by position, 0, 1, ..., n-1, except that chain 0 (the one rank 0
// originates) is moved to the end of every rank's pass. Both sides of every link then agree on
// the order of its messages: rank r sends chain r-p at position p, which rank r+1 runs at
// position p+1, so position order is preserved hop by hop, and chain 0 is last on both sides.
//
// Why chain 0 moves (deadlock freedom with FIFO depth 1). With the plain position order every
// rank starts a pass with a pure send, so all n links fill up; with one slot per link the next
// step of every rank (a relay, which needs a free slot downstream) then waits forever. Moving
// chain 0 makes rank 0 an "anchor" that runs its relays, its terminal and only then its pure send.
// Let s_r / q_r count the messages rank r has sent / received (over all passes so far). Then
//   anchor:     s_0 - q_0 is 0, or -1 between its terminal and its pure send;
//   other rank: s_r - q_r is 1 between its pure send and its terminal, else 0.
// Suppose no rank can run a step and some rank is unfinished; D >= 1 is the FIFO depth.
//  (a) Some link r -> r+1 holds a message. Then rank r+1 is unfinished, and blocked although its
//      message is there, so it waits for a slot: link r+1 -> r+2 is full. Around the ring every
//      link is full, so n*D = sum(s_r - q_{r+1}) = sum(s_r - q_r) <= n - 1: impossible.
//  (b) Every link is empty. No rank is at a pure send (it could run), so the anchor's term is 0,
//      and as the sum is 0 every other term is 0: rank n-1 is between passes, where its next step
//      is a pure send, so it is finished; then rank 0 has received everything and, not being at
//      its pure send, is finished; then rank 1 has received everything and is finished, and so on
//      around the ring: everybody is finished, a contradiction.
// The argument needs every chain of a pass to be present; all-reduce skips the chains of empty
// segments and keeps the anchor property by construction (see ring_all_reduce.cc), and
// tests/unit/schedule_test.cc checks depth 1 for every configuration it runs (the system is
// persistent - no step ever disables another - so one interleaving decides deadlock).
//
// Cost of a pass: n steps per rank, n-1 messages sent and received per rank, each the size of
// one chain's payload; latency about n-1 + (n-1) hops, because chain 0 trails the other chains.
// Consecutive passes stream back to back: the next pass begins while later ranks finish this one.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "algorithms/schedule.h"

namespace mixccl::algo {

enum class RingRole { kOrigin, kRelay, kTerminal };

// The anchored order costs overlap: with two ranks, rank 0 cannot send before it has received,
// so the ranks alternate instead of copying at the same time. With FIFO depth >= 2 the plain
// position order (every rank starts with its pure send) cannot deadlock - at most n-1 of the
// n*D slots around the ring are ever in use - so it is used there (`anchored` = false);
// tests/unit/schedule_test.cc runs both orders through the simulator.
inline bool ringAnchored(uint32_t fifoDepth) { return fifoDepth < 2; }

// Calls visit(origin, role) for the steps of rank `rank` in one pass whose chain originates in
// the cyclic range of ranks [lo, lo + len) (0 <= lo < nranks, 0 <= len <= nranks), in the order of
// the whole pass below. The work is O(len): a pass whose other chains carry nothing (all-reduce
// rounds with fewer elements than ranks) costs only its present chains, which keeps building a
// schedule for 65,536 ranks O(steps) per rank. Chain o is at position (rank - o) mod n, so the
// chains asked for occupy the cyclic range of positions [first, first + len), first = (rank - lo
// - len + 1) mod n; it is visited in increasing position order (its wrapped part, positions from
// 0, first), chain 0 deferred to the end when anchored.
template <class F>
inline void forEachRingStepOfChains(int rank, int nranks, bool anchored, int lo, int len, F&& visit) {
  auto roleAt = [nranks](int p) {
    return p == 0 ? RingRole::kOrigin : (p == nranks - 1 ? RingRole::kTerminal : RingRole::kRelay);
  };
  auto positions = [&](int from, int to) {
    for (int p = from; p < to; ++p) {
      if (anchored && p == rank) continue;  // chain 0: deferred to the end
      visit((rank - p + nranks) % nranks, roleAt(p));
    }
  };
  const int first = (((rank - lo - len + 1) % nranks) + nranks) % nranks;
  if (first + len <= nranks) {
    positions(first, first + len);
  } else {
    positions(0, first + len - nranks);
    positions(first, nranks);
  }
  if (anchored && (nranks - lo) % nranks < len) visit(0, roleAt(rank));
}

// Calls visit(origin, role) for the n steps of rank `rank` in one pass, in execution order.
template <class F>
inline void forEachRingStep(int rank, int nranks, bool anchored, F&& visit) {
  forEachRingStepOfChains(rank, nranks, anchored, 0, nranks, visit);
}

// Pieces. With FIFO depth D >= 4 a round carries g = ringPieces(D) messages per chain instead of
// one: each segment is g*chunk elements, sent as g messages ("pieces") of at most chunk elements
// that follow each other on the link and lie next to each other in every buffer. A step of the
// pass becomes g steps, one per piece, in piece order, so both ends of a link still see its
// messages in the same order. Why: a rank whose steps run on a device queue covers adjacent steps
// of one kind with one command (executor.cc), and on a device each command costs far more than
// the bytes it moves (docs/ENGINE.md); a host rank sees the same messages in another order.
// Deadlock: with pieces, a rank that waits for a slot has sent at most 2g - 1 messages more than
// it received (its origin's g pieces, then the next round's hoisted ones, below), so every link
// full would need n*D <= n*(2g - 1), which g <= D/2 rules out; the anchored order (D = 1) and
// D < 4 keep one piece.
inline uint64_t ringPieces(uint32_t fifoDepth) { return fifoDepth >= 4 ? std::min<uint32_t>(4, fifoDepth / 2) : 1; }

// Calls visit(off, len) for the pieces of the segment [off, off + len): chunk elements each, the
// last one shorter.
template <class F>
inline void forEachPiece(uint64_t off, uint64_t len, uint64_t chunk, F&& visit) {
  for (uint64_t o = 0; o < len; o += chunk) visit(off + o, std::min(chunk, len - o));
}

// Software pipelining across rounds (chunks) of the plain order: a round's leading pure sends (its
// origin's pieces) go before the previous round's trailing receive-only steps (its terminal's). A
// rank whose steps run on a device queue issues them in order, so without this the next round's
// copy into a slot waits behind a receive that waits for the peer; a host rank sends while the
// message it waits for travels. Sends keep their order among themselves and so do receives, so
// every link carries the same messages in the same order, and the moved steps touch different
// rounds' elements. Deadlock (the argument above): a rank that waits for a slot still has sent at
// most 2g - 1 messages more than it received (the hoisted sends come after its round's relays,
// before the terminal that balances the round before), so with every link full n*D <= n*(2g - 1),
// which D >= 2g rules out (g = 1 at D = 2, 3); the anchored order (D = 1) is left alone.
class RoundHoist {
 public:
  explicit RoundHoist(bool anchored) : on_(!anchored) {}
  // Before a round's steps are appended.
  void begin(const Schedule& s) { start_ = s.steps.size(); }
  // After they are: moves the round's leading pure sends before the previous round's trailing
  // pure receives, where both are there.
  void end(Schedule* s) {
    auto& steps = s->steps;
    auto pureSend = [&](size_t i) { return steps[i].recvPeer < 0 && steps[i].sendPeer >= 0; };
    auto pureRecv = [&](size_t i) { return steps[i].recvPeer >= 0 && steps[i].sendPeer < 0; };
    size_t own = start_;  // where this round's steps that stay in place begin
    if (on_ && last_ != SIZE_MAX) {
      size_t sends = start_;
      while (sends < steps.size() && pureSend(sends)) ++sends;
      if (sends > start_) {
        const auto at = [&](size_t i) { return steps.begin() + static_cast<std::ptrdiff_t>(i); };
        std::rotate(at(last_), at(start_), at(sends));
        own = sends;
      }
    }
    // This round's trailing receives: among its steps that stayed, never its first step (a round
    // of one step has none; after a move the step before a lone receive is the previous round's).
    const size_t lo = std::max(own, start_ + 1);
    size_t from = steps.size();
    while (from > lo && pureRecv(from - 1)) --from;
    last_ = from < steps.size() ? from : SIZE_MAX;
  }

 private:
  bool on_;
  size_t start_ = 0;
  size_t last_ = SIZE_MAX;  // the first of the previous round's trailing receive-only steps
};

}  // namespace mixccl::algo
