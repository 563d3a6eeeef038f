// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Ordered reductions (Algo::kOrdered): AllReduce, ReduceScatter and Reduce whose every element is
// the left fold over ranks 0..p-1 in rank order,  x_0 OP x_1 OP ... OP x_{p-1}  (x_q: rank q's
// Input after pre()), rounded after every OP as reduce() does. The operands of an element are
// gathered, unreduced, to the one rank that owns it, which folds them in one multi-source step.
// So the bits of a result depend on the inputs alone - not on the chunk size, the transport, the
// rank that owns the element or the collective - and equal those of every other ordered algorithm
// (one_shot_all_reduce.cc). This is what MIXCCL_DETERMINISTIC=1 runs (docs/TUNING.md).
//
// Terms: a block is the part of the elements one rank owns and folds (ReduceScatter: its output
// block; AllReduce: block b = elements [count*b/p, count*(b+1)/p) rounded as blockStart() does,
// owned by rank b; Reduce: everything, owned by the root); a piece is at most L = min(chunkElems,
// the largest block) elements of a block; piece j of every block is handled in round j. Slot q
// of Scratch (Scratch[q*L, +L)) holds rank q's operand of the piece being folded.
//
// How, round j, on rank r:
//  1. Copy piece j of the own block from Input to slot r (pre() runs here).
//  2. Send piece j of block r+1, r+2, ..., r+p-1 (mod p), read from Input (pre() runs here too)
//     to the block's owner.
//  3. Receive piece j of the own block from r-1, r-2, ..., r-(p-1) (mod p) into their slots.
//  4. Fold slots 0..p-1 into Output (finalize).
// AllReduce then gathers the folded pieces with a direct all-gather: round j, send the own
// block's piece j to every other rank (r+1, ...), then receive piece j of every other block
// (r-1, ...) into Output. Reduce: only the root owns a block; the others only send, the root
// receives from the other ranks in ascending order.
//
// Invariants: each Input element is read once (by step 1 or 2). In place (AllReduce: Output =
// Input; ReduceScatter: Output = Input + r*count; Reduce root: Output = Input), the only Input
// elements Output aliases are the rank's own block, whose piece j is read by step 1 before step 4
// writes it; the all-gather writes other blocks only after every Input read. Rounds (and the
// all-gather's rounds after them) reuse the slots only after the previous fold read them.
//
// Deadlock-free at FIFO depth 1: order every rank's steps by (phase, round, sends before
// receives). A send waits only for the receiver to have taken this sender's previous message,
// which the receiver's steps place before its own current round; a receive waits only for a send
// of the same round, which the sender's order places before its receives of that round. The
// earliest waiting step in this order therefore always has what it waits for.
//
// Cost (n = count elements, k pieces per block): ReduceScatter and the AllReduce's reduction:
// p-1 messages of n/p (AllReduce) or n (ReduceScatter) elements out and in per rank, per round,
// and (p-1) * that combined by the owner: like a ring's bytes, but p-1 messages at once instead
// of a chain; AllReduce adds the same again for the all-gather, uncombined. Reduce: the root
// receives (p-1)*n elements, (p-1)*k messages, and combines them all: the price of one folding
// rank. Scratch p*L elements on every rank that folds.

#include "algorithms/builders.h"

namespace mixccl::algo {
namespace {

// Where the blocks lie in the rank's buffers, and which part of them round j handles.
struct Blocks {
  int p = 1;
  uint64_t base = 0, extra = 0;  // AllReduce: blocks of base(+1 for the first `extra`) elements
  uint64_t size = 0;             // ReduceScatter: every block has this size
  bool even = false;
  uint64_t piece = 1;  // L

  uint64_t start(int b) const {
    const uint64_t ub = static_cast<uint64_t>(b);
    return even ? ub * size : ub * base + std::min<uint64_t>(ub, extra);
  }
  uint64_t length(int b) const { return even ? size : base + (static_cast<uint64_t>(b) < extra ? 1 : 0); }
  // Elements of block b in round j (0: the block has no piece j).
  uint64_t pieceLen(int b, uint64_t j) const {
    const uint64_t len = length(b), off = j * piece;
    return off >= len ? 0 : std::min(piece, len - off);
  }
  // Blocks [0, present(j)) have a piece j: all of them while the shorter blocks last, then the
  // first `extra` (AllReduce with fewer elements than ranks: only those).
  int present(uint64_t j) const {
    const uint64_t off = j * piece;
    return even || base > off ? p : static_cast<int>(extra);
  }
  uint64_t rounds() const {
    const uint64_t longest = even ? size : base + (extra > 0 ? 1 : 0);
    return (longest + piece - 1) / piece;
  }
};

// Calls f(b) for b = r+1, r+2, ..., r+p-1 (mod p) (forward) or r-1, r-2, ..., r-(p-1) (backward),
// skipping every b >= present: O(present) work, so 65,536 ranks with a few elements, whose blocks
// are mostly empty, build in O(steps) per rank.
template <class F>
void forEachPresent(int r, int present, bool forward, F&& f) {
  if (forward) {
    for (int b = r + 1; b < present; ++b) f(b);
    for (int b = 0; b < std::min(r, present); ++b) f(b);
  } else {
    for (int b = std::min(r, present) - 1; b >= 0; --b) f(b);
    for (int b = present - 1; b > r; --b) f(b);
  }
}

// Steps 1-4 of round j for rank r; the own block's piece lands in Output at outStart + j*L.
void reduceRound(const CollArgs& a, const Blocks& bl, uint64_t j, uint64_t outStart, Schedule* s) {
  const int p = a.nranks, r = a.rank;
  const uint64_t L = bl.piece, mine = bl.pieceLen(r, j), off = j * L;
  if (mine > 0) s->steps.push_back(localCopy(Buf::kInput, bl.start(r) + off, Buf::kScratch, r * L, mine, false));
  forEachPresent(r, bl.present(j), /*forward=*/true,
                 [&](int b) { s->steps.push_back(sendStep(Buf::kInput, bl.start(b) + off, bl.pieceLen(b, j), b)); });
  if (mine == 0) return;
  for (int k = 1; k < p; ++k) {
    const int q = ringPeer(r, -k, p);
    s->steps.push_back(recvStep(q, Buf::kScratch, q * L, mine));
  }
  appendRankOrderFold(s, 0, L, p, Buf::kOutput, outStart + off, mine, /*finalize=*/true);
}

// A single rank: its Input is the result (through pre() and post()).
bool singleRank(const CollArgs& a, uint64_t count, Schedule* s) {
  if (a.nranks > 1) return false;
  s->steps.push_back(localCopy(Buf::kInput, 0, Buf::kOutput, 0, count, /*finalize=*/true));
  return true;
}

}  // namespace

void buildOrderedReduceScatter(const CollArgs& a, Schedule* s) {
  if (singleRank(a, a.count, s)) return;
  Blocks bl;
  bl.p = a.nranks;
  bl.even = true;
  bl.size = a.count;
  bl.piece = std::min(a.count, a.chunkElems);
  s->scratchElems = bl.piece * static_cast<uint64_t>(a.nranks);
  for (uint64_t j = 0; j < bl.rounds(); ++j) reduceRound(a, bl, j, 0, s);
}

void buildOrderedAllReduce(const CollArgs& a, Schedule* s) {
  if (singleRank(a, a.count, s)) return;
  const int p = a.nranks, r = a.rank;
  Blocks bl;
  bl.p = p;
  bl.base = a.count / static_cast<uint64_t>(p);
  bl.extra = a.count % static_cast<uint64_t>(p);
  bl.piece = std::min(bl.base + (bl.extra > 0 ? 1 : 0), a.chunkElems);
  s->scratchElems = bl.piece * static_cast<uint64_t>(p);
  const uint64_t rounds = bl.rounds();
  for (uint64_t j = 0; j < rounds; ++j) reduceRound(a, bl, j, bl.start(r), s);
  // The direct all-gather of the folded blocks.
  for (uint64_t j = 0; j < rounds; ++j) {
    const uint64_t off = j * bl.piece, mine = bl.pieceLen(r, j);
    if (mine > 0) {
      for (int k = 1; k < p; ++k)
        s->steps.push_back(sendStep(Buf::kOutput, bl.start(r) + off, mine, ringPeer(r, k, p)));
    }
    forEachPresent(r, bl.present(j), /*forward=*/false,
                   [&](int q) { s->steps.push_back(recvStep(q, Buf::kOutput, bl.start(q) + off, bl.pieceLen(q, j))); });
  }
}

void buildOrderedReduce(const CollArgs& a, Schedule* s) {
  if (singleRank(a, a.count, s)) return;
  const int p = a.nranks, r = a.rank;
  const uint64_t L = std::min(a.count, a.chunkElems);
  if (r != a.root) {
    forEachChunk(a.count, a.chunkElems,
                 [&](uint64_t off, uint64_t len) { s->steps.push_back(sendStep(Buf::kInput, off, len, a.root)); });
    return;
  }
  s->scratchElems = L * static_cast<uint64_t>(p);
  forEachChunk(a.count, a.chunkElems, [&](uint64_t off, uint64_t len) {
    s->steps.push_back(localCopy(Buf::kInput, off, Buf::kScratch, r * L, len, false));
    for (int q = 0; q < p; ++q) {
      if (q != r) s->steps.push_back(recvStep(q, Buf::kScratch, q * L, len));
    }
    appendRankOrderFold(s, 0, L, p, Buf::kOutput, off, len, /*finalize=*/true);
  });
}

}  // namespace mixccl::algo
