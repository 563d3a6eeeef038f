// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Recursive-doubling all-reduce: log2(p) rounds of pairwise exchanges of the whole buffer, the
// latency-optimal form for small messages.
//
// What: every rank's Output holds the reduction of every rank's Input (count elements).
//
// How (p ranks, p2 = the largest power of two <= p, rem = p - p2):
//  1. Fold. Among the first 2*rem ranks, each even rank sends its Input to the odd rank after it
//     and sits out the rounds; that odd rank combines the message with its own Input into Output.
//     The p2 ranks left are numbered v = 0..p2-1 (rank r < 2*rem: v = r/2; otherwise v = r - rem).
//  2. Rounds. For mask = 1, 2, 4, ... < p2, the ranks v and v^mask exchange their partial result,
//     chunk by chunk: send it, then receive the partner's chunk and combine it into
//     Output[chunk]. The partial result is Output, except in the first round of a rank that did
//     not absorb a fold: there it is its own Input, read straight from there (pre() runs on it
//     as it goes into the slot and again as it is combined, with the same rounded result), so
//     no step copies Input to Output first; a two-rank call is one send and one combine. The
//     last round's combination is the final value (finalize). A single rank copies Input to
//     Output (pre() and finalize in that one pass).
//  3. Unfold. Each odd rank of the fold sends the final Output to its even partner, which
//     receives it into Output.
//
// Every rank that combines in a round computes recv OP own on the same two values as its partner
// does own OP recv; sums, products, minima and maxima are commutative in IEEE arithmetic, so the
// partners keep identical bits and every rank ends with the same result (the reduction tree is
// the same binary tree of ranks on every rank).
//
// Invariants: a rank reads its Input only in the fold or in its first round, chunk by chunk, and
// a chunk of Input is sent before that round's combination writes the same chunk of Output (in
// place: the same elements, read before they are written). A chunk is sent in a round before the
// same chunk is overwritten by that round's combination. Deadlock-free at FIFO depth 1: in every
// round both partners send chunk c before they wait for the partner's chunk c, and a send of
// chunk c waits only for the partner to have received chunk c-1, which it did before sending c.
//
// Cost (k = ceil(count / chunkElems)): log2(p2) rounds + (rem > 0 ? 2 : 0) hops of count
// elements each; a rank in the rounds sends log2(p2) * count elements (+ count if it unfolds), a
// folded rank count. Bytes grow with log p, so large messages belong to the ring.

#include "algorithms/builders.h"

namespace mixccl::algo {
namespace {

// The largest power of two <= n (n >= 1).
int floorPow2(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

}  // namespace

void buildRecursiveDoublingAllReduce(const CollArgs& a, Schedule* s) {
  const int p2 = floorPow2(a.nranks);
  const int rem = a.nranks - p2;
  const bool folded = a.rank < 2 * rem && a.rank % 2 == 0;  // sits out the rounds
  const bool absorbs = a.rank < 2 * rem && a.rank % 2 == 1;
  const int v = a.rank < 2 * rem ? a.rank / 2 : a.rank - rem;
  auto rankOf = [&](int vr) { return vr < rem ? 2 * vr + 1 : vr + rem; };
  const bool noRounds = p2 == 1;

  // 1. Fold.
  if (folded || absorbs) {
    forEachChunk(a.count, a.chunkElems, [&](uint64_t off, uint64_t len) {
      s->steps.push_back(folded ? alignedStep(off, len, -1, Buf::kInput, Buf::kNone, a.rank + 1)
                                : alignedStep(off, len, a.rank - 1, Buf::kInput, Buf::kOutput, -1, noRounds));
    });
  } else if (noRounds) {
    s->steps.push_back(localCopy(Buf::kInput, 0, Buf::kOutput, 0, a.count, /*finalize=*/true));
  }

  // 2. Rounds: send this chunk of the partial result, then combine the partner's into Output.
  if (!folded) {
    for (int mask = 1; mask < p2; mask <<= 1) {
      const int partner = rankOf(v ^ mask);
      const bool last = mask * 2 >= p2;
      const Buf partial = mask == 1 && !absorbs ? Buf::kInput : Buf::kOutput;
      forEachChunk(a.count, a.chunkElems, [&](uint64_t off, uint64_t len) {
        s->steps.push_back(alignedStep(off, len, -1, partial, Buf::kNone, partner));
        s->steps.push_back(alignedStep(off, len, partner, partial, Buf::kOutput, -1, last));
      });
    }
  }

  // 3. Unfold.
  if (folded || absorbs) {
    forEachChunk(a.count, a.chunkElems, [&](uint64_t off, uint64_t len) {
      s->steps.push_back(folded ? alignedStep(off, len, a.rank + 1, Buf::kNone, Buf::kOutput, -1)
                                : alignedStep(off, len, -1, Buf::kOutput, Buf::kNone, a.rank - 1));
    });
  }
}

}  // namespace mixccl::algo
