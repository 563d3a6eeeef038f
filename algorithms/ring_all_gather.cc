// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Ring all-gather.
//
// What: every rank contributes `count` elements (Input); every rank ends with all n contributions
// in Output, rank b's at b*count.
//
// How: rounds of one range per block (len <= g*chunkElems, g = ringPieces(FIFO depth), 1 to 4,
// travelling as pieces of at most chunkElems, a step each, in piece order), each round one ring
// pass (ring_pass.h).
// The chain that originates at rank o carries block o:
//   origin   : Input[piece] -> Output[o block] and -> next     (the own block's copy rides along)
//   relay    : recv prev -> Output[o block] and -> next
//   terminal : recv prev -> Output[o block]
// Rounds run back to back, so later rounds stream behind earlier ones.
//
// Invariants
//  - Each Output element is written exactly once; no reduction, so no finalize.
//  - In-place (NCCL: Input = Output + rank*count): Input is read only by the origin step, which
//    writes exactly the same elements of Output; every other step writes other blocks.
//
// Cost (n ranks, c = count, k = ceil(c / chunkElems)): n*k steps per rank, (n-1)*k messages sent
// per rank, (n-1)*c elements sent per rank; n == 1 is one local copy.

#include "algorithms/builders.h"
#include "algorithms/ring_pass.h"

namespace mixccl::algo {

void buildRingAllGather(const CollArgs& a, Schedule* s) {
  const int n = a.nranks;
  if (n == 1) {
    s->steps.push_back(localCopy(Buf::kInput, 0, Buf::kOutput, 0, a.count, /*finalize=*/false));
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
      forEachPiece(roundOff, roundLen, a.chunkElems, [&](uint64_t off, uint64_t len) {
        Step st;
        st.dst = Buf::kOutput;
        st.dstOffset = static_cast<uint64_t>(origin) * a.count + off;
        st.count = len;
        if (role == RingRole::kOrigin) {
          st.src = Buf::kInput;
          st.srcOffset = off;
        } else {
          st.recvPeer = prev;
        }
        if (role != RingRole::kTerminal) st.sendPeer = next;
        s->steps.push_back(st);
      });
    });
    hoist.end(s);
  });
}

}  // namespace mixccl::algo
