// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Binomial-tree broadcast: ceil(log2 p) hops from the root to the farthest rank, the
// latency-optimal form for small messages.
//
// What: root's Input (count elements) ends in every rank's Output, the root's own included.
//
// How: ranks are numbered relative to the root, v = (rank - root) mod p. A rank v > 0 whose
// lowest set bit is m receives from v - m (its parent) and then serves the children v + m/2,
// v + m/4, ..., v + 1 that exist (< p); the root (v = 0) serves v + M, v + M/2, ..., 1, where M
// is the largest power of two < p. Farther children come first, as their subtrees are deeper.
// The buffer streams through in chunks of at most chunkElems elements; per chunk:
//   root : Input[chunk] -> Output[chunk] and -> first child; Output[chunk] -> each other child
//   inner: recv parent -> Output[chunk] and -> first child;  Output[chunk] -> each other child
//   leaf : recv parent -> Output[chunk]
// and then the closing token of a root that only sends (schedule.h): root-1 sends it after its
// last step, so ranks that disagree on the root read each other's messages.
//
// Invariants: each Output element is written once, by the step that receives it (or, on the
// root, copies it from Input, the same elements when in place) before any step forwards it from
// Output. A tree has no cycle, so any FIFO depth >= 1 is deadlock-free: a rank waits only for its
// parent's data and its children's free slots, and leaves only receive.
//
// Cost (k = ceil(count / chunkElems), d = ceil(log2 p)): d hops for the first chunk; the root
// sends d * count elements, an inner rank with c children c * count, the leaves nothing. Every
// message leaves after its parent's, so a rank's chunks stream while later hops still run.

#include "algorithms/builders.h"

namespace mixccl::algo {

void buildBinomialBroadcast(const CollArgs& a, Schedule* s) {
  const int n = a.nranks;
  if (n == 1) {
    s->steps.push_back(localCopy(Buf::kInput, 0, Buf::kOutput, 0, a.count, /*finalize=*/false));
    return;
  }
  const int v = ringPeer(a.rank, -a.root, n);
  auto rankOf = [&](int vr) { return ringPeer(vr, a.root, n); };
  // The parent's distance m (lowest set bit of v); the root serves every power of two below n.
  int m = 1;
  if (v == 0) {
    while (m < n) m <<= 1;
  } else {
    while ((v & m) == 0) m <<= 1;
  }
  std::vector<int> children;
  for (int c = m >> 1; c >= 1; c >>= 1) {
    if (v + c < n) children.push_back(rankOf(v + c));
  }
  const int parent = v == 0 ? -1 : rankOf(v - m);
  forEachChunk(a.count, a.chunkElems, [&](uint64_t off, uint64_t len) {
    // Into Output (from the parent, or the root's Input) and on to the first child; then from
    // Output to each other child.
    const int first = children.empty() ? -1 : children[0];
    s->steps.push_back(parent < 0 ? alignedStep(off, len, -1, Buf::kInput, Buf::kOutput, first)
                                  : alignedStep(off, len, parent, Buf::kNone, Buf::kOutput, first));
    for (size_t i = 1; i < children.size(); ++i) {
      s->steps.push_back(alignedStep(off, len, -1, Buf::kOutput, Buf::kNone, children[i]));
    }
  });
  appendRootToken(a, s);
}

}  // namespace mixccl::algo
