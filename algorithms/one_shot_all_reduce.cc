// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// One-shot all-reduce: every rank sends its whole Input to every other rank and reduces all p
// inputs itself, in rank order. One hop of latency whatever p is; p-1 times the bytes of a ring
// per rank. For tiny messages among the ranks of one host, and, because every rank folds the
// same p values in the same order, deterministic (algoIsOrdered).
//
// What: every rank's Output holds x_0 OP x_1 OP ... OP x_{p-1}, folded left to right (x_q is
// rank q's Input after pre()).
//
// How, per piece [off, off+len) of count (len <= chunkElems; L = min(count, chunkElems)):
//  1. Copy the Input piece into Scratch slot r (slot q = Scratch[q*L, +len)). The one read of the
//     rank's Input, where pre() runs.
//  2. Send slot r to ranks r+1, r+2, ..., r+p-1 (mod p).
//  3. Receive from ranks r-1, r-2, ..., r-(p-1) (mod p), rank q's piece into slot q.
//  4. Fold slots 0..p-1 into Output[off, +len) (a multi-source step, finalize).
// One rank: one local step Input -> Output with finalize.
//
// Invariants: in place, Output[piece] is written (step 4) after the only read of Input[piece]
// (step 1), and pieces are disjoint. Slots are reused by the next piece only after the fold of
// this one has read them, in the rank's own step order.
//
// Deadlock-free at FIFO depth 1: order a rank's steps by (piece, sends before receives). A send
// of piece j waits only for its receiver to have taken piece j-1 from this rank, a step before
// all of the receiver's piece-j steps; a receive of piece j waits only for a send of piece j,
// which comes before the sender's piece-j receives. So the earliest waiting step in this order
// always has what it waits for.
//
// Cost (k = ceil(count / chunkElems), n = count elements): 1 hop, but each rank sends and
// receives (p-1)*n elements in (p-1)*k messages and combines (p-1)*n; Scratch p*L elements.

#include "algorithms/builders.h"

namespace mixccl::algo {

void buildOneShotAllReduce(const CollArgs& a, Schedule* s) {
  const int p = a.nranks, r = a.rank;
  if (p == 1) {
    s->steps.push_back(localCopy(Buf::kInput, 0, Buf::kOutput, 0, a.count, /*finalize=*/true));
    return;
  }
  const uint64_t slot = std::min(a.count, a.chunkElems);
  s->scratchElems = slot * static_cast<uint64_t>(p);
  forEachChunk(a.count, a.chunkElems, [&](uint64_t off, uint64_t len) {
    const uint64_t mine = slot * static_cast<uint64_t>(r);
    s->steps.push_back(localCopy(Buf::kInput, off, Buf::kScratch, mine, len, /*finalize=*/false));
    for (int k = 1; k < p; ++k) s->steps.push_back(sendStep(Buf::kScratch, mine, len, ringPeer(r, k, p)));
    for (int k = 1; k < p; ++k) {
      const int q = ringPeer(r, -k, p);
      s->steps.push_back(recvStep(q, Buf::kScratch, slot * static_cast<uint64_t>(q), len));
    }
    appendRankOrderFold(s, 0, slot, p, Buf::kOutput, off, len, /*finalize=*/true);
  });
}

}  // namespace mixccl::algo
