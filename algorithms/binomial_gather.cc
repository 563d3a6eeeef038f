// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Binomial-tree gather: floor(log2 p) levels from the leaves to the root, with each rank's
// subtree sent up in as few chunk-sized messages as it fills, the latency-optimal form for small
// blocks (the direct gather's root takes p-1 messages, this one's ceil(log2 p)).
//
// What: every rank's Input (count elements) ends in the root's Output at rank*count.
//
// How: the binomial tree of binomial_tree.h (v = (rank - root) mod p). The subtree of v is the
// relative range [v, v + sz) (sz = min(lowest set bit of v, p - v)); its blocks in relative order
// form v's "stream" of sz*count elements: v's own block, then the streams of its children v + 1,
// v + 2, v + 4, ... - which is again relative order, as the children's subtrees tile
// [v + 1, v + sz). A rank sends its stream to its parent cut into messages [j*chunk, (j+1)*chunk)
// of the stream (the last one shorter), and receives each child's stream as that child cuts it.
//   leaf (sz = 1)  : its stream is its Input: Input[chunk] -> parent
//   inner non-root : Input -> Scratch[0, count); then each child's messages, nearest child first,
//                    -> Scratch at (child - v)*count + offset in the child's stream; after each
//                    step, every message of the own stream whose elements are all there is sent
//                    Scratch[j*chunk, +len) -> parent. Scratch fills from the front, so the
//                    stream leaves as it fills (pipelined), not after the whole subtree arrived.
//   root           : Input -> Output[root*count]; then each child's messages, nearest first,
//                    straight into Output. Relative order is rank order rotated by the root, so
//                    relative element x lives at Output[(x + root*count) mod (p*count)]: the
//                    relative range of a subtree is contiguous in Output except where it passes
//                    rank p-1 -> rank 0 (relative element W = (p - root)*count). The one message
//                    that straddles W (if any) goes to Scratch[0, len) and two local copies place
//                    its parts at Output[(x + root*count)...] and at Output[0...].
// One rank: Input -> Output.
//
// Invariants
//  - Each element of the root's Output and of a rank's Scratch stream is written once, before any
//    step reads it (a send goes out only once its whole message has arrived).
//  - In place (root: Input = Output + root*count): the root reads Input only in its first step,
//    whose destination is that same memory; every other Output write is another rank's block.
//  - Messages are at most chunkElems elements; both ends cut a stream the same way, since the cut
//    depends only on (p, root, count, chunkElems).
//  - Deadlock-free at any FIFO depth >= 1: every message goes up a tree edge (binomial_tree.h);
//    simulated at depths 1 and 4.
//
// Scratch: sz*count on a non-root rank with children (sz <= floor(p/2): a subtree of v > 0 has
// at most min(v, p - v) ranks); on the root, the length of the one message that straddles the
// wrap (<= chunkElems), none when no message does (e.g. root 0); none on leaves.
//
// Cost (d = ceil(log2 p) children of the root, h = floor(log2 p) levels, n = count): h hops when
// every stream fits one message; a non-root rank sends sz*n elements in ceil(sz*n / chunk)
// messages; the root receives (p-1)*n elements in sum over its children c of
// ceil(min(c, p - c)*n / chunk) messages (d for small blocks), so alpha*that + beta*(p-1)*n.

#include "algorithms/binomial_tree.h"
#include "algorithms/builders.h"

namespace mixccl::algo {
void buildBinomialGather(const CollArgs& a, Schedule* s) {
  const uint64_t c = a.count, ch = a.chunkElems;
  if (a.nranks == 1) {
    s->steps.push_back(localCopy(Buf::kInput, 0, Buf::kOutput, 0, c, /*finalize=*/false));
    return;
  }
  const BinomialTree t(a.nranks, a.root, a.rank);
  const std::vector<int> children = t.childrenNearestFirst();

  if (t.isRoot()) {
    const uint64_t total = static_cast<uint64_t>(a.nranks) * c;
    const uint64_t rootOff = static_cast<uint64_t>(a.root) * c;
    const uint64_t wrap = total - rootOff;  // relative element that lands at Output[0]
    s->steps.push_back(localCopy(Buf::kInput, 0, Buf::kOutput, rootOff, c, /*finalize=*/false));
    for (int cv : children) {
      const int peer = t.rankOf(cv);
      const uint64_t base = static_cast<uint64_t>(cv) * c;
      forEachChunk(static_cast<uint64_t>(t.subtreeSize(cv)) * c, ch, [&](uint64_t off, uint64_t len) {
        const uint64_t x = base + off;  // relative element of the message's first element
        if (x + len <= wrap || x >= wrap) {
          s->steps.push_back(recvStep(peer, Buf::kOutput, (x + rootOff) % total, len));
          return;
        }
        s->scratchElems = len;
        s->steps.push_back(recvStep(peer, Buf::kScratch, 0, len));
        s->steps.push_back(localCopy(Buf::kScratch, 0, Buf::kOutput, x + rootOff, wrap - x, false));
        s->steps.push_back(localCopy(Buf::kScratch, wrap - x, Buf::kOutput, 0, x + len - wrap, false));
      });
    }
    return;
  }

  const int parent = t.parent();
  const uint64_t streamLen = static_cast<uint64_t>(t.subtreeSize(t.v)) * c;
  if (children.empty()) {
    forEachChunk(c, ch,
                 [&](uint64_t off, uint64_t len) { s->steps.push_back(sendStep(Buf::kInput, off, len, parent)); });
    return;
  }
  s->scratchElems = streamLen;
  s->steps.push_back(localCopy(Buf::kInput, 0, Buf::kScratch, 0, c, /*finalize=*/false));
  uint64_t filled = c;  // Scratch[0, filled) holds its stream elements
  uint64_t sent = 0;    // the stream's messages before `sent` went out
  auto sendReady = [&] {
    while (sent < streamLen && std::min(sent + ch, streamLen) <= filled) {
      const uint64_t len = std::min(ch, streamLen - sent);
      s->steps.push_back(sendStep(Buf::kScratch, sent, len, parent));
      sent += len;
    }
  };
  sendReady();
  for (int cv : children) {
    const int peer = t.rankOf(cv);
    const uint64_t base = static_cast<uint64_t>(cv - t.v) * c;
    forEachChunk(static_cast<uint64_t>(t.subtreeSize(cv)) * c, ch, [&](uint64_t off, uint64_t len) {
      s->steps.push_back(recvStep(peer, Buf::kScratch, base + off, len));
      filled = base + off + len;
      sendReady();
    });
  }
}

}  // namespace mixccl::algo
