// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Recursive-doubling all-gather: log2(p) rounds in which partners swap everything they have
// gathered so far, the latency-optimal form for small messages.
//
// What: every rank contributes `count` elements (Input); every rank ends with all p contributions
// in Output, rank b's at b*count.
//
// How (numbering of hypercube.h: p2, rem, virtual rank v, folded / absorbing ranks of the first
// 2*rem ranks):
//  1. Fold. A folded rank (even r < 2*rem) sends its Input to r+1, which receives it into
//     Output[r block]. Every rank that takes part in the rounds copies its Input to its own
//     block of Output (in place: the very same elements).
//  2. Rounds. For mask = 1, 2, 4, ... < p2, v holds the blocks of the virtual ranks
//     [v & ~(mask-1), + mask) - a contiguous range of blocks of Output, as the virtual numbering is
//     monotonic - and swaps that range with the partner v^mask, whose range is the neighbouring
//     one: send my range piece by piece, receive the partner's range into Output (hypercube.h's
//     exchange). After the last round every range covers all p blocks.
//  3. Unfold. Each absorbing rank sends its whole Output (p*count elements, the folded rank's own
//     block included, so the range stays one contiguous run of pieces) to the folded rank, which
//     receives it into Output.
//
// Invariants: no reduction, so no finalize and nothing is combined. Input is read once per rank:
// by the survivor's local copy or by the folded rank's sends, each before any step writes Output,
// so in place (Input = Output + rank*count) no step reads Input memory already written; the copy
// writes exactly the elements it reads. Every Output element is written by one step on a survivor
// (the copy, the fold receive or one round's receive - the ranges received in the rounds are
// disjoint and never the rank's own range); on a folded rank once, by the unfold (its own block
// comes back with the same value it sent). Every message is a piece of at most chunkElems elements.
//
// Deadlock freedom at any FIFO depth >= 1: a folded rank only sends and then only receives, and
// its absorbing partner receives the fold before the rounds and sends the unfold after them; the
// rounds are hypercube.h's exchanges (tests run depth 1 and 4).
//
// Scratch: none.
//
// Cost (c = count, k(x) = ceil(x / chunkElems) messages of x elements): critical path
// log2(p2) + (rem > 0 ? 2 : 0) hops when every range fits one message; in general round j
// (0-based) sends a range of 2^j virtual ranks, 2^j * c elements (up to twice that where the
// virtual ranks stand for pairs). Per rank: a power-of-two p sends (p-1)*c elements; a folded rank
// sends c and receives p*c; a survivor sends sum_j |its range in round j| and, if it absorbs, p*c
// more - the busiest link carries about (p-1)*c + p*c with a fold, (p-1)*c without. No bytes
// reduced.

#include "algorithms/builders.h"
#include "algorithms/hypercube.h"

namespace mixccl::algo {

void buildRecursiveDoublingAllGather(const CollArgs& a, Schedule* s) {
  const uint64_t c = a.count, n = static_cast<uint64_t>(a.nranks);
  if (a.nranks == 1) {
    s->steps.push_back(localCopy(Buf::kInput, 0, Buf::kOutput, 0, c, /*finalize=*/false));
    return;
  }
  const Hypercube h(a.rank, a.nranks);
  if (h.folded) {
    for (const Piece& pc : chunked(0, c, a.chunkElems)) {
      s->steps.push_back(alignedStep(pc.off, pc.len, -1, Buf::kInput, Buf::kNone, a.rank + 1));
    }
    for (const Piece& pc : chunked(0, n * c, a.chunkElems)) {
      s->steps.push_back(alignedStep(pc.off, pc.len, a.rank + 1, Buf::kNone, Buf::kOutput, -1));
    }
    return;
  }

  // 1. Fold: the own block, and the folded partner's.
  s->steps.push_back(localCopy(Buf::kInput, 0, Buf::kOutput, static_cast<uint64_t>(a.rank) * c, c, false));
  if (h.absorbs) {
    for (const Piece& pc :
         chunked(static_cast<uint64_t>(a.rank - 1) * c, static_cast<uint64_t>(a.rank) * c, a.chunkElems)) {
      s->steps.push_back(alignedStep(pc.off, pc.len, a.rank - 1, Buf::kNone, Buf::kOutput, -1));
    }
  }

  // 2. Rounds: swap the gathered range with the partner's.
  for (int mask = 1; mask < h.p2; mask <<= 1) {
    const int mine = h.v & ~(mask - 1), theirs = (h.v ^ mask) & ~(mask - 1);
    const int partner = h.rankOf(h.v ^ mask);
    auto range = [&](int v0) {
      return chunked(static_cast<uint64_t>(h.firstRank(v0)) * c, static_cast<uint64_t>(h.firstRank(v0 + mask)) * c,
                     a.chunkElems);
    };
    exchangePieces(
        range(mine), range(theirs),
        [&](const Piece& pc) {
          s->steps.push_back(alignedStep(pc.off, pc.len, -1, Buf::kOutput, Buf::kNone, partner));
        },
        [&](const Piece& pc) {
          s->steps.push_back(alignedStep(pc.off, pc.len, partner, Buf::kNone, Buf::kOutput, -1));
        });
  }

  // 3. Unfold.
  if (h.absorbs) {
    for (const Piece& pc : chunked(0, n * c, a.chunkElems)) {
      s->steps.push_back(alignedStep(pc.off, pc.len, -1, Buf::kOutput, Buf::kNone, a.rank - 1));
    }
  }
}

}  // namespace mixccl::algo
