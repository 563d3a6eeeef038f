// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Ring reduce-scatter.
//
// What: Input holds n blocks of `count` elements (block b at b*count); rank r ends with the
// reduction over all ranks of block r in Output[0, count).
//
// How: the buffer is cut into rounds; round j takes the range [j*g*chunk, j*g*chunk + len) of every
// block (len <= g*chunkElems, g = ringPieces(FIFO depth), 1 to 4), which travels as pieces of at
// most chunkElems, so every message fits one slot; each step below is one step per piece, in
// piece order. Each round is one ring pass (ring_pass.h): the chain that originates at rank o reduces block o-1, so it
// collects every rank's contribution on its way and ends, complete, at rank o-1, the block's owner.
//   origin   : send  Input[b]                          -> next
//   relay    : recv prev + Input[b]                     -> next
//   terminal : recv prev + Input[b] -> Output, finalize
// Rounds run back to back, so later rounds stream behind earlier ones around the ring.
//
// Invariants
//  - Each rank reads each element of its Input exactly once, inside a reduction (the engine
//    applies pre() there, so it must happen once per contribution).
//  - finalize is set only on the terminal step, the one that produces the final value; nobody
//    receives a final value, so it is applied once per output element.
//  - In-place (NCCL: Output = Input + rank*count): an Output piece is written only by its terminal
//    step, which is also the one step that reads the aliased Input piece. Reads of the
//    other blocks never touch Output.
//
// Cost (n ranks, c = count, k = ceil(c / chunkElems)): n*k steps per rank, (n-1)*k messages sent
// per rank, (n-1)*c elements sent per rank ((n-1)/n of the input); n == 1 is one local step.

#include "algorithms/builders.h"
#include "algorithms/ring_pass.h"

namespace mixccl::algo {

void buildRingReduceScatter(const CollArgs& a, Schedule* s) {
  const int n = a.nranks;
  if (n == 1) {
    s->steps.push_back(localCopy(Buf::kInput, 0, Buf::kOutput, 0, a.count, /*finalize=*/true));
    return;
  }
  const int prev = ringPeer(a.rank, -1, n);
  const int next = ringPeer(a.rank, 1, n);
  const bool anchored = ringAnchored(a.fifoDepth);
  RoundHoist hoist(anchored);  // the next round's pure sends before this round's terminal
  const uint64_t pieces = ringPieces(a.fifoDepth);
  const uint64_t roundElems = a.chunkElems > UINT64_MAX / pieces ? UINT64_MAX : a.chunkElems * pieces;
  forEachChunk(a.count, roundElems, [&](uint64_t roundOff, uint64_t roundLen) {
    hoist.begin(*s);
    forEachRingStep(a.rank, n, anchored, [&](int origin, RingRole role) {
      const uint64_t block = static_cast<uint64_t>(ringPeer(origin, -1, n));
      forEachPiece(roundOff, roundLen, a.chunkElems, [&](uint64_t off, uint64_t len) {
        Step st;
        st.src = Buf::kInput;
        st.srcOffset = block * a.count + off;
        st.count = len;
        if (role != RingRole::kOrigin) st.recvPeer = prev;
        if (role != RingRole::kTerminal) {
          st.sendPeer = next;
        } else {
          st.dst = Buf::kOutput;
          st.dstOffset = off;
          st.finalize = true;
        }
        s->steps.push_back(st);
      });
    });
    hoist.end(s);
  });
}

}  // namespace mixccl::algo
