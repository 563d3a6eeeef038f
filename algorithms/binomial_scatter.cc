// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Binomial-tree scatter: ceil(log2 p) hops from the root to the farthest rank, each subtree's
// blocks sent down in as few chunk-sized messages as fit, the latency-optimal form for small
// blocks; the time reversal of binomial_gather.cc.
//
// What: block r of the root's Input (count elements at r*count) ends in rank r's Output.
//
// How: the binomial tree of binomial_tree.h (v = (rank - root) mod p). The subtree of v is the
// relative range [v, v + sz) (sz = min(lowest set bit of v, p - v)); its blocks in relative order
// form v's "stream" of sz*count elements: v's own block, then the streams of its children v + 1,
// v + 2, v + 4, .... A stream is cut into the pieces [j*chunk, (j+1)*chunk) (the last shorter),
// exactly as the gather cuts it, and travels as those messages in REVERSE order, last piece
// first: a rank serves its children farthest first (v + m/2, ..., v + 2, v + 1), whose streams
// lie at the back of its own, so what it must pass on first arrives first.
//   leaf (sz = 1)  : its stream is its block: each piece, from the parent -> Output[piece]
//   inner non-root : each piece from the parent -> Scratch[piece]; after each receive, every
//                    message to a child whose elements are all there is sent: children farthest
//                    first, each child's pieces last first, Scratch[(child - v)*count + piece]
//                    -> child. Scratch fills from the back, the order in which it leaves, so the
//                    stream is passed on while it arrives (pipelined). Last: Scratch[0, count)
//                    -> Output.
//   root           : each child's pieces, farthest child first, last piece first, sent straight
//                    from Input; relative element x lives at Input[(x + root*count) mod
//                    (p*count)] (rank order rotated by the root), contiguous except across rank
//                    p-1 -> rank 0 (relative element W = (p - root)*count). The one piece that
//                    straddles W (if any) is first copied to Scratch[0, len) in two parts and
//                    sent from there. Then Input[root*count, +count) -> Output.
//   and the closing token of a root that only sends (schedule.h, appendRootToken): rank root-1,
//   a leaf (v = p-1), sends it after its last step; the root waits for it.
// One rank: Input -> Output.
//
// Invariants
//  - Each element of a rank's Output and Scratch stream is written once, before any step reads
//    it (a piece goes on only once it has arrived).
//  - In place (root: Output = Input + root*count): the root's last data step is the only one that
//    writes, and its source and destination are the same memory; no step reads Input after it.
//  - Messages are at most chunkElems elements; both ends cut a stream the same way, since the cut
//    depends only on (p, root, count, chunkElems).
//  - Deadlock-free at any FIFO depth >= 1: every data message goes down a tree edge
//    (binomial_tree.h); the token's sender is a leaf that has finished everything else, and the
//    root waits for it after finishing its sends. Simulated at depths 1 and 4.
//
// Scratch: sz*count on a non-root rank with children (sz <= floor(p/2)); on the root, the length
// of the one piece that straddles the wrap (<= chunkElems), none when no piece does (e.g. root
// 0); none on leaves.
//
// Cost (d = ceil(log2 p) children of the root, n = count): with streams of one message each,
// max(d, popcount(p-1) + 1) hops (the root's d sends in a row, and the token behind rank p-1's
// block, which travels popcount(p-1) hops, each as its parent's first send). The root sends
// (p-1)*n elements in sum over its children c of ceil(min(c, p - c)*n / chunk) messages (d for
// small blocks); a non-root rank (sz-1)*n elements. alpha*that + beta*(p-1)*n at the root's link.

#include "algorithms/binomial_tree.h"
#include "algorithms/builders.h"

namespace mixccl::algo {
void buildBinomialScatter(const CollArgs& a, Schedule* s) {
  const uint64_t c = a.count, ch = a.chunkElems;
  if (a.nranks == 1) {
    s->steps.push_back(localCopy(Buf::kInput, 0, Buf::kOutput, 0, c, /*finalize=*/false));
    return;
  }
  const BinomialTree t(a.nranks, a.root, a.rank);
  std::vector<int> children = t.childrenNearestFirst();
  std::reverse(children.begin(), children.end());  // farthest first

  if (t.isRoot()) {
    const uint64_t total = static_cast<uint64_t>(a.nranks) * c;
    const uint64_t rootOff = static_cast<uint64_t>(a.root) * c;
    const uint64_t wrap = total - rootOff;  // relative element that lives at Input[0]
    for (int cv : children) {
      const int peer = t.rankOf(cv);
      const uint64_t base = static_cast<uint64_t>(cv) * c;
      forEachPieceBackwards(static_cast<uint64_t>(t.subtreeSize(cv)) * c, ch, [&](uint64_t off, uint64_t len) {
        const uint64_t x = base + off;  // relative element of the piece's first element
        if (x + len <= wrap || x >= wrap) {
          s->steps.push_back(sendStep(Buf::kInput, (x + rootOff) % total, len, peer));
          return;
        }
        s->scratchElems = len;
        s->steps.push_back(localCopy(Buf::kInput, x + rootOff, Buf::kScratch, 0, wrap - x, false));
        s->steps.push_back(localCopy(Buf::kInput, 0, Buf::kScratch, wrap - x, x + len - wrap, false));
        s->steps.push_back(sendStep(Buf::kScratch, 0, len, peer));
      });
    }
    s->steps.push_back(localCopy(Buf::kInput, rootOff, Buf::kOutput, 0, c, /*finalize=*/false));
    appendRootToken(a, s);
    return;
  }

  const int parent = t.parent();
  const uint64_t streamLen = static_cast<uint64_t>(t.subtreeSize(t.v)) * c;
  if (children.empty()) {
    forEachPieceBackwards(
        c, ch, [&](uint64_t off, uint64_t len) { s->steps.push_back(recvStep(parent, Buf::kOutput, off, len)); });
    appendRootToken(a, s);
    return;
  }
  s->scratchElems = streamLen;
  // The messages to the children, in the order they leave: (child, Scratch offset, length).
  struct Out {
    int peer;
    uint64_t off, len;
  };
  std::vector<Out> outs;
  for (int cv : children) {
    const uint64_t base = static_cast<uint64_t>(cv - t.v) * c;
    forEachPieceBackwards(static_cast<uint64_t>(t.subtreeSize(cv)) * c, ch, [&](uint64_t off, uint64_t len) {
      outs.push_back(Out{t.rankOf(cv), base + off, len});
    });
  }
  size_t next = 0;
  forEachPieceBackwards(streamLen, ch, [&](uint64_t off, uint64_t len) {
    s->steps.push_back(recvStep(parent, Buf::kScratch, off, len));
    // Scratch[off, streamLen) has arrived.
    for (; next < outs.size() && outs[next].off >= off; ++next) {
      s->steps.push_back(sendStep(Buf::kScratch, outs[next].off, outs[next].len, outs[next].peer));
    }
  });
  s->steps.push_back(localCopy(Buf::kScratch, 0, Buf::kOutput, 0, c, /*finalize=*/false));
  appendRootToken(a, s);
}

}  // namespace mixccl::algo
