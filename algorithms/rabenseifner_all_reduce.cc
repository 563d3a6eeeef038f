// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Rabenseifner all-reduce: a recursive-halving reduce-scatter followed by a recursive-doubling
// all-gather, both over pieces of the one buffer. 2*log2(p) hops like recursive doubling twice,
// but every rank sends and combines only about 2*count and count elements, not log2(p)*count:
// the bandwidth of the ring with the latency of a tree, for medium messages.
//
// What: every rank's Output holds the reduction of every rank's Input (count elements).
//
// How (numbering of hypercube.h: p2, rem, virtual rank v, folded / absorbing ranks). The count is
// cut into p2 pieces as evenly as possible: piece w = [start(w), start(w+1)) with
// start(w) = w*(count/p2) + min(w, count%p2), so a range of virtual ranks [w0, w1) is the
// contiguous range of elements [start(w0), start(w1)); when count < p2 some pieces are empty, and
// every range and message below built from them is skipped - identically on every rank, because
// all ranks compute the same start().
//  1. Fold. A folded rank (even r < 2*rem) sends its Input to r+1, which combines it with its own
//     Input into Output (as recursive_doubling_all_reduce.cc does).
//  2. Reduce-scatter, rounds mask = p2/2, p2/4, ..., 1: v is responsible for the pieces
//     [lo, lo + 2*mask), lo = v & ~(2*mask-1); it keeps the half with v, sends its partial sums
//     of the other half to v^mask and combines the partner's partial sums of the kept half into
//     Output (hypercube.h's exchange). Partial sums are Input in the first round on a rank that
//     did not fold (so no copy is needed), Output afterwards. The last round's combination is
//     the final value of piece v (finalize).
//  3. All-gather, rounds mask = 1, 2, ..., p2/2: v swaps its finished pieces
//     [v & ~(mask-1), + mask) with the partner's neighbouring range, Output to Output.
//  4. Unfold. Each absorbing rank sends its whole Output to its folded rank.
// One rank (p = 1) is a local Input -> Output step with finalize.
//
// Every element's final value is computed once, on the rank of its piece, by the fixed
// combination tree of the schedule, and only copied from there; so every rank holds the same
// bits (for the commutative operators; nothing depends on timing).
//
// Why no scratch: the partial sums of a rank are always inside the pieces it keeps, which live at
// their own offsets in Output (count elements, the same as Input); a round writes only kept
// pieces and sends only given-up ones, so nothing is overwritten that is still to be sent. The
// fold, too, lands in Output, since the absorbing rank's combination covers all count elements.
//
// Invariants
//  - pre() once: a folded rank reads its Input in its fold sends only; an absorbing rank in its
//    fold combinations only; any other rank in the first reduce-scatter round only, where every
//    element is either given up (sent) or kept (combined), once.
//  - finalize once: only the last reduce-scatter round sets it, on the one rank that completes
//    the piece; the all-gather and the unfold copy.
//  - In place (Output = Input): each Input element is read before or by the step that first
//    writes that element of Output (a kept element is read and written by the same step at the
//    same offset; a given-up one is never written in the first round, and later steps read
//    Output only).
//  - Messages are pieces of at most chunkElems elements.
//
// Deadlock freedom at any FIFO depth >= 1: the folded rank only sends, then only receives; its
// absorbing partner receives the whole fold first and sends the unfold last; the rounds are
// hypercube.h's exchanges (tests simulate depth 1 and 4).
//
// Cost (L = log2(p2), k(x) = ceil(x / chunkElems)): critical path 2L + (rem > 0 ? 2 : 0) hops
// when every piece range fits one message (2L + (rem > 0 ? 1 : 0) for count = 1, where the
// halving rounds are a binomial reduction to v = 0 that the fold overlaps). A rank in the rounds
// sends about 2*(p2-1)/p2 * count elements (exactly sum_j |given-up half| + sum_j |own range|,
// both (p2-1)/p2 * count when p2 divides count) and combines (p2-1)/p2 * count; the fold adds
// count sent and combined, the unfold count sent, on the pairs.

#include "algorithms/builders.h"
#include "algorithms/hypercube.h"

namespace mixccl::algo {

void buildRabenseifnerAllReduce(const CollArgs& a, Schedule* s) {
  const uint64_t c = a.count;
  if (a.nranks == 1) {
    s->steps.push_back(localCopy(Buf::kInput, 0, Buf::kOutput, 0, c, /*finalize=*/true));
    return;
  }
  const Hypercube h(a.rank, a.nranks);
  const uint64_t base = c / static_cast<uint64_t>(h.p2), extra = c % static_cast<uint64_t>(h.p2);
  auto start = [&](int w) {
    const uint64_t uw = static_cast<uint64_t>(w);
    return uw * base + std::min(uw, extra);
  };
  auto range = [&](int w0, int span) { return chunked(start(w0), start(w0 + span), a.chunkElems); };

  // 1. Fold.
  if (h.folded || h.absorbs) {
    for (const Piece& pc : chunked(0, c, a.chunkElems)) {
      s->steps.push_back(h.folded ? alignedStep(pc.off, pc.len, -1, Buf::kInput, Buf::kNone, a.rank + 1)
                                  : alignedStep(pc.off, pc.len, a.rank - 1, Buf::kInput, Buf::kOutput, -1));
    }
  }

  if (!h.folded) {
    // 2. Reduce-scatter by recursive halving.
    for (int mask = h.p2 / 2; mask >= 1; mask /= 2) {
      const int lo = h.v & ~(2 * mask - 1);
      const int keep = (h.v & mask) ? lo + mask : lo, give = (h.v & mask) ? lo : lo + mask;
      const int partner = h.rankOf(h.v ^ mask);
      const Buf mine = mask == h.p2 / 2 && !h.absorbs ? Buf::kInput : Buf::kOutput;
      exchangePieces(
          range(give, mask), range(keep, mask),
          [&](const Piece& pc) { s->steps.push_back(alignedStep(pc.off, pc.len, -1, mine, Buf::kNone, partner)); },
          [&](const Piece& pc) {
            s->steps.push_back(alignedStep(pc.off, pc.len, partner, mine, Buf::kOutput, -1, /*finalize=*/mask == 1));
          });
    }
    // 3. All-gather by recursive doubling.
    for (int mask = 1; mask < h.p2; mask <<= 1) {
      const int partner = h.rankOf(h.v ^ mask);
      exchangePieces(
          range(h.v & ~(mask - 1), mask), range((h.v ^ mask) & ~(mask - 1), mask),
          [&](const Piece& pc) {
            s->steps.push_back(alignedStep(pc.off, pc.len, -1, Buf::kOutput, Buf::kNone, partner));
          },
          [&](const Piece& pc) {
            s->steps.push_back(alignedStep(pc.off, pc.len, partner, Buf::kNone, Buf::kOutput, -1));
          });
    }
  }

  // 4. Unfold.
  if (h.folded || h.absorbs) {
    for (const Piece& pc : chunked(0, c, a.chunkElems)) {
      s->steps.push_back(h.folded ? alignedStep(pc.off, pc.len, a.rank + 1, Buf::kNone, Buf::kOutput, -1)
                                  : alignedStep(pc.off, pc.len, -1, Buf::kOutput, Buf::kNone, a.rank - 1));
    }
  }
}

}  // namespace mixccl::algo
