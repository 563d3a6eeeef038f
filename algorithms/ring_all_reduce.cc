// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Ring all-reduce = ring reduce-scatter followed by ring all-gather, over n segments.
//
// What: every rank ends with the element-wise reduction over all ranks of `count` elements.
//
// How: the buffer is processed in rounds of up to n*g*chunkElems elements, g = ringPieces(FIFO
// depth) (1 to 4). A round of m elements is split into n segments as evenly as possible (segment b has floor(m/n)
// elements, one more for b < m mod n, so with m < n the high segments are empty; chains over empty segments are skipped
// by every rank alike, so the link orders still agree). Each round is two ring passes
// (ring_pass.h); a segment travels as pieces of at most chunkElems (the last one shorter), so each
// step below is one step per piece, in piece order:
//   reduce-scatter pass, chain from rank o reduces segment o-1:
//     origin   : send  Input[seg]                                 -> next
//     relay    : recv prev + Input[seg]                           -> next
//     terminal : recv prev + Input[seg] -> Output[seg], finalize       (rank o-1 owns segment o-1)
//   all-gather pass, chain from rank o spreads segment o (which rank o just finalized):
//     origin   : Output[seg]                                      -> next
//     relay    : recv prev -> Output[seg]                         and -> next
//     terminal : recv prev -> Output[seg]
// With FIFO depth >= 2 (the plain ring order) a rank's reduce-scatter terminal and all-gather
// origin are one step over the same segment: recv prev + Input[seg] -> Output[seg], finalize,
// and -> next.
// Rounds follow each other directly, so round j+1 streams behind round j around the ring and a
// message never exceeds chunkElems (a segment is at most ceil(n*g*chunk / n) = g*chunk elements,
// cut into pieces of chunkElems).
// Filling the low segments first keeps ring_pass.h's anchor property when chains are skipped: the
// anchor's terminal in the reduce-scatter pass is segment 0 and its pure send in the all-gather
// pass is segment 0, both present whenever the round is non-empty, so rank 0 never has sent more
// messages than it has received when it needs a slot (the test suite checks depth 1 for every
// segment pattern with up to 16 ranks).
//
// Invariants
//  - Each rank reads each Input element exactly once, inside a reduction (pre() applies there).
//  - finalize is set once per element: on the reduce-scatter terminal, the step that produces the
//    final value. The all-gather pass only copies final values and never finalizes again.
//  - In-place (NCCL: Output == Input): Output[seg] is first written by the reduce-scatter terminal,
//    the same step that reads Input[seg] for the last time; the all-gather pass writes only
//    segments of the current round, all of which this rank already read in the first pass.
//
// Cost (n ranks, c = count, k = number of rounds = ceil(c / (n*g*chunkElems))): 2n*g steps per
// rank and full round (2n - 1 per piece when fused), 2(n-1)*g messages sent per rank and full
// round, about 2(n-1)/n * c elements sent per rank (exactly: per round, every segment but the one
// it terminates in each pass). n == 1 is one
// local step Input -> Output with finalize.

#include "algorithms/builders.h"
#include "algorithms/ring_pass.h"

namespace mixccl::algo {

void buildRingAllReduce(const CollArgs& a, Schedule* s) {
  const int n = a.nranks;
  if (n == 1) {
    s->steps.push_back(localCopy(Buf::kInput, 0, Buf::kOutput, 0, a.count, /*finalize=*/true));
    return;
  }
  const int prev = ringPeer(a.rank, -1, n);
  const int next = ringPeer(a.rank, 1, n);
  const uint64_t un = static_cast<uint64_t>(n);
  const bool anchored = ringAnchored(a.fifoDepth);
  // In the plain order a rank's reduce-scatter terminal and its all-gather origin are adjacent
  // steps over the same segment (chain rank+1 ends here with segment `rank`; chain `rank` starts
  // here with it). One step does both: the final value goes to Output and into the message, one
  // pass over the data where two steps read it back from Output (a fused kernel on a device).
  // The anchored order separates them (rank 0 defers chain 0), so it keeps two steps.
  const bool fused = !anchored;
  // A segment is `pieces` messages (ring_pass.h): adjacent steps a device covers with one command.
  const uint64_t pieces = ringPieces(a.fifoDepth);
  const uint64_t segElems = a.chunkElems > UINT64_MAX / pieces ? UINT64_MAX : a.chunkElems * pieces;
  const uint64_t roundElems = segElems > UINT64_MAX / un ? UINT64_MAX : segElems * un;
  // The next round's reduce-scatter origin goes before this round's all-gather terminal.
  RoundHoist hoist(anchored);
  forEachChunk(a.count, roundElems, [&](uint64_t roundOff, uint64_t m) {
    hoist.begin(*s);
    const uint64_t base = m / un;
    const uint64_t extra = m % un;
    auto segOffset = [&](int b) { return roundOff + b * base + std::min<uint64_t>(b, extra); };
    auto segCount = [&](int b) { return base + (static_cast<uint64_t>(b) < extra ? 1 : 0); };
    // Segments [0, present) are non-empty; only their chains are visited (O(steps), not O(n),
    // per round: 65,536 ranks all-reducing a few elements build in milliseconds).
    const int present = base > 0 ? n : static_cast<int>(extra);

    // Chain o reduces segment o-1: origins [1, 1 + present).
    forEachRingStepOfChains(a.rank, n, anchored, 1 % n, present, [&](int origin, RingRole role) {
      const int seg = ringPeer(origin, -1, n);
      forEachPiece(segOffset(seg), segCount(seg), a.chunkElems, [&](uint64_t off, uint64_t len) {
        Step st;
        st.src = Buf::kInput;
        st.srcOffset = off;
        st.count = len;
        if (role != RingRole::kOrigin) st.recvPeer = prev;
        if (role != RingRole::kTerminal) {
          st.sendPeer = next;
        } else {
          st.dst = Buf::kOutput;
          st.dstOffset = off;
          st.finalize = true;
          if (fused) st.sendPeer = next;  // the all-gather pass's origin step, folded in
        }
        s->steps.push_back(st);
      });
    });

    // Chain o spreads segment o: origins [0, present).
    forEachRingStepOfChains(a.rank, n, anchored, 0, present, [&](int origin, RingRole role) {
      const int seg = origin;
      if (fused && role == RingRole::kOrigin) return;  // sent by the reduce-scatter terminal
      forEachPiece(segOffset(seg), segCount(seg), a.chunkElems, [&](uint64_t off, uint64_t len) {
        Step st;
        st.count = len;
        if (role == RingRole::kOrigin) {
          st.src = Buf::kOutput;
          st.srcOffset = off;
        } else {
          st.recvPeer = prev;
          st.dst = Buf::kOutput;
          st.dstOffset = off;
        }
        if (role != RingRole::kTerminal) st.sendPeer = next;
        s->steps.push_back(st);
      });
    });
    hoist.end(s);
  });
}

}  // namespace mixccl::algo
