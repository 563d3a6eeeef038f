// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Binomial-tree reduce: floor(log2 p) levels from the leaves to the root, the latency-optimal
// form for small messages; the mirror of binomial_broadcast.cc.
//
// What: the root's Output (count elements) holds the reduction of every rank's Input.
//
// How: the binomial tree of binomial_tree.h (v = (rank - root) mod p; v's children v + 1,
// v + 2, v + 4, ... below v's lowest set bit). Partial results flow up: a rank combines its own
// Input with its children's partial results, nearest child first (the nearest child's subtree is
// the shallowest, so its result is ready first), and sends the sum to its parent. The buffer
// streams through in chunks of at most chunkElems elements; per chunk, with children c1, c2, ...,
// cj nearest first and acc = the root's Output or a non-root rank's Scratch:
//   leaf          : Input[chunk] -> parent
//   one child     : recv c1 OP Input[chunk] -> parent                       (non-root)
//   inner         : recv c1 OP Input[chunk] -> acc[chunk]; recv ci OP acc[chunk] -> acc[chunk]
//                   for 1 < i < j; recv cj OP acc[chunk] -> parent          (non-root)
//   root          : as inner, but the last combination goes -> Output[chunk] with finalize
//                   (one child: recv c1 OP Input[chunk] -> Output[chunk], finalize)
// One rank: Input -> Output with finalize.
//
// Invariants
//  - pre() once: every rank reads each Input element exactly once, in its first combining step
//    of that chunk (a leaf: its send, which the engine treats as the combining read of Input).
//  - finalize once: only the root's last combination of a chunk finalizes, and nothing combines
//    that value again.
//  - In place (root: Input == Output): the root's first combination of a chunk reads Input[chunk]
//    and writes exactly Output[chunk], the same memory; later steps read only Output.
//  - The combination tree is fixed by (p, root): every element is reduced as
//    ((Input_v OP R_{v+1}) OP R_{v+2}) OP R_{v+4} ... recursively, whatever the timing, so repeated
//    runs give the same bits (only the root holds the result).
//  - Messages are chunks of at most chunkElems elements.
//  - Deadlock-free at any FIFO depth >= 1: every message goes up a tree edge (binomial_tree.h);
//    simulated at depths 1 and 4.
//
// Scratch: count elements on a non-root rank with two or more children (the partial sums of its
// chunks), none elsewhere.
//
// Cost (k = ceil(count / chunkElems), d = ceil(log2 p) = the root's children, h = floor(log2 p)
// = the tree's depth): h hops for one chunk (receives from different children overlap); the root
// receives k*d messages, d*count elements, and combines d*count elements; every non-root rank
// sends count elements in k messages, so alpha*k*d + beta*d*n + gamma*d*n at the root's link.

#include "algorithms/binomial_tree.h"
#include "algorithms/builders.h"

namespace mixccl::algo {

void buildBinomialReduce(const CollArgs& a, Schedule* s) {
  if (a.nranks == 1) {
    s->steps.push_back(localCopy(Buf::kInput, 0, Buf::kOutput, 0, a.count, /*finalize=*/true));
    return;
  }
  const BinomialTree t(a.nranks, a.root, a.rank);
  std::vector<int> children;
  for (int c : t.childrenNearestFirst()) children.push_back(t.rankOf(c));
  const int parent = t.parent();
  const Buf acc = t.isRoot() ? Buf::kOutput : Buf::kScratch;
  if (!t.isRoot() && children.size() >= 2) s->scratchElems = a.count;

  forEachChunk(a.count, a.chunkElems, [&](uint64_t off, uint64_t len) {
    if (children.empty()) {
      s->steps.push_back(alignedStep(off, len, -1, Buf::kInput, Buf::kNone, parent));
      return;
    }
    for (size_t i = 0; i < children.size(); ++i) {
      const bool last = i + 1 == children.size();
      const Buf src = i == 0 ? Buf::kInput : acc;
      if (last && !t.isRoot()) {
        s->steps.push_back(alignedStep(off, len, children[i], src, Buf::kNone, parent));
      } else {
        s->steps.push_back(alignedStep(off, len, children[i], src, acc, -1, /*finalize=*/last));
      }
    }
  });
}

}  // namespace mixccl::algo
