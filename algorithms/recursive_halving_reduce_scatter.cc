// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Recursive-halving reduce-scatter: log2(p) rounds in which partners split the blocks they are
// still responsible for in two, send away the half they give up and combine the half they keep,
// the latency-optimal form for small messages.
//
// What: Input holds p blocks of `count` elements (block b at b*count); rank r ends with the
// reduction over all ranks of block r in Output[0, count).
//
// How (numbering of hypercube.h: p2, rem, virtual rank v, folded / absorbing ranks; c = count):
//  1. Fold. A folded rank (even r < 2*rem) sends its whole Input (p*c elements) to r+1, which
//     combines it with its own Input into Scratch[0, p*c) (Scratch at the same offsets as Input).
//  2. Rounds j = 0 .. log2(p2)-1, mask = p2 >> (j+1). Virtual rank v is responsible for the
//     virtual ranks [lo, lo + 2*mask), lo = v & ~(2*mask-1), i.e. for their blocks (a contiguous
//     range, the numbering is monotonic). It keeps the half that contains v (K) and gives the
//     other half (S) to its partner v^mask, which keeps exactly that half: per piece, send my
//     partial sums of S, and receive the partner's partial sums of K and combine them with mine
//     (hypercube.h's exchange). My partial sums are: Input in round 0 (Scratch on an absorbing
//     rank, which folded first), Scratch afterwards; a combination writes Scratch, except in the
//     last round of a rank that stands for itself alone, which combines its block's final value
//     (finalize) straight into Output.
//  3. Delivery. The last round leaves an absorbing rank with the final values (finalize set by
//     that round's combinations) of two blocks in Scratch: the folded rank's, which it then sends
//     to the folded rank (received into Output without finalize), and its own, which it copies
//     to Output (no finalize). Keeping the two blocks together in the last round keeps its
//     pieces as long as the other rounds' (one message for small counts); a fused
//     combine-and-send to the folded rank would split them and cost a hop.
// One rank (p = 1) is a local Input -> Output step with finalize.
//
// The combination tree of every element is fixed by the schedule (the same on every run and
// independent of timing), and every element of every output block is computed once, on one
// rank, so the result is bitwise reproducible for the commutative operators.
//
// Invariants
//  - pre() once: a folded rank reads its Input once, in its sends; an absorbing rank once, in its
//    fold steps; any other rank in round 0 only, where every block is either in S (sent from
//    Input) or in K (combined from Input) - never both, never again (later rounds read Scratch).
//  - finalize once: only the last combination of an element sets it (the last round's, on the
//    rank that owns the block or on the absorbing rank for both its blocks); the delivery copies
//    and the folded rank's receive never set it.
//  - In place (Output = Input + rank*c): Output is written only in the last round or the
//    delivery (or the folded rank's final receive), after every read of Input. With a single
//    round (p = 2) the step that reads Input[rank block] writes exactly the same elements of
//    Output.
//  - Messages are pieces of at most chunkElems elements.
//
// Deadlock freedom at any FIFO depth >= 1: the folded rank only sends (the fold) and then only
// receives (its block); its absorbing partner takes the whole fold before its rounds and sends
// the block after them; the rounds are hypercube.h's exchanges (tests simulate depth 1 and 4).
//
// Scratch (exact): an absorbing rank p*c elements (the folded sums, at Input's offsets); any
// other rank in the rounds with log2(p2) >= 2 the blocks of its round-0 half K0, |K0|*c where
// |K0| = min(p2, p - p2/2) for v < p2/2 and max(rem, p2/2) otherwise (<= p*c, and <= 2p/3 * c);
// 0 on folded ranks and for p <= 2.
//
// Cost (k(x) = ceil(x / chunkElems)): critical path log2(p2) + (rem > 0 ? 2 : 0) hops when every
// range fits one message. Round j sends the partial sums of mask virtual ranks, mask*c elements
// on average times p/p2, so a rank sends about (p2-1)/p2 * p*c elements in the rounds (a power of
// two: exactly (p-1)*c), a folded rank p*c, an absorbing rank c more (the delivery). Bytes
// reduced per rank: what it receives, (p-1)*c for a power of two, plus p*c for the fold.

#include "algorithms/builders.h"
#include "algorithms/hypercube.h"

namespace mixccl::algo {
namespace {

Step makeStep(int recvPeer, Buf src, uint64_t srcOffset, Buf dst, uint64_t dstOffset, uint64_t count, int sendPeer,
              bool finalize) {
  Step st;
  st.recvPeer = recvPeer;
  st.sendPeer = sendPeer;
  st.src = src;
  st.srcOffset = srcOffset;
  st.dst = dst;
  st.dstOffset = dstOffset;
  st.count = count;
  st.finalize = finalize;
  return st;
}

}  // namespace

void buildRecursiveHalvingReduceScatter(const CollArgs& a, Schedule* s) {
  const uint64_t c = a.count, n = static_cast<uint64_t>(a.nranks), r = static_cast<uint64_t>(a.rank);
  if (a.nranks == 1) {
    s->steps.push_back(localCopy(Buf::kInput, 0, Buf::kOutput, 0, c, /*finalize=*/true));
    return;
  }
  const Hypercube h(a.rank, a.nranks);
  if (h.folded) {
    for (const Piece& pc : chunked(0, n * c, a.chunkElems)) {
      s->steps.push_back(alignedStep(pc.off, pc.len, -1, Buf::kInput, Buf::kNone, a.rank + 1));
    }
    for (const Piece& pc : chunked(0, c, a.chunkElems)) {
      s->steps.push_back(alignedStep(pc.off, pc.len, a.rank + 1, Buf::kNone, Buf::kOutput, -1));
    }
    return;
  }

  // Where my partial sums of Input element x live: Input before round 0 of a rank that did not
  // fold, else Scratch at x - scratchBase.
  uint64_t scratchBase = 0;
  if (h.absorbs) {
    s->scratchElems = n * c;
    for (const Piece& pc : chunked(0, n * c, a.chunkElems)) {
      s->steps.push_back(alignedStep(pc.off, pc.len, a.rank - 1, Buf::kInput, Buf::kScratch, -1));
    }
  } else if (h.rounds >= 2) {
    const int half = h.p2 / 2, k0 = h.v < half ? 0 : half;
    scratchBase = static_cast<uint64_t>(h.firstRank(k0)) * c;
    s->scratchElems = static_cast<uint64_t>(h.firstRank(k0 + half)) * c - scratchBase;
  }

  for (int j = 0; j < h.rounds; ++j) {
    const int mask = h.p2 >> (j + 1);
    const int lo = h.v & ~(2 * mask - 1);
    const int keep = (h.v & mask) ? lo + mask : lo, give = (h.v & mask) ? lo : lo + mask;
    const int partner = h.rankOf(h.v ^ mask);
    const bool last = j == h.rounds - 1;
    const bool fromInput = j == 0 && !h.absorbs;
    const Buf mine = fromInput ? Buf::kInput : Buf::kScratch;
    auto mineAt = [&](uint64_t x) { return fromInput ? x : x - scratchBase; };
    auto pieces = [&](int v0) {
      return chunked(static_cast<uint64_t>(h.firstRank(v0)) * c, static_cast<uint64_t>(h.firstRank(v0 + mask)) * c,
                     a.chunkElems);
    };
    exchangePieces(
        pieces(give), pieces(keep),
        [&](const Piece& pc) {
          s->steps.push_back(makeStep(-1, mine, mineAt(pc.off), Buf::kNone, 0, pc.len, partner, false));
        },
        [&](const Piece& pc) {
          if (last && !h.absorbs) {  // my block alone: final, into Output
            s->steps.push_back(makeStep(partner, mine, mineAt(pc.off), Buf::kOutput, pc.off - r * c, pc.len, -1, true));
          } else {  // partial sums, or the final values of an absorbing rank's two blocks
            s->steps.push_back(
                makeStep(partner, mine, mineAt(pc.off), Buf::kScratch, pc.off - scratchBase, pc.len, -1, last));
          }
        });
  }

  // Delivery of an absorbing rank's two final blocks (finalized in Scratch): the folded rank's
  // first (it waits for it), then the own one into Output.
  if (h.absorbs) {
    for (const Piece& pc : chunked((r - 1) * c, r * c, a.chunkElems)) {
      s->steps.push_back(alignedStep(pc.off, pc.len, -1, Buf::kScratch, Buf::kNone, a.rank - 1));
    }
    s->steps.push_back(localCopy(Buf::kScratch, r * c, Buf::kOutput, 0, c, /*finalize=*/false));
  }
}

}  // namespace mixccl::algo
