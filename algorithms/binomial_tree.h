// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// The binomial tree the rooted tree collectives share (binomial_reduce.cc, binomial_gather.cc,
// binomial_scatter.cc, scatter_all_gather_broadcast.cc; binomial_broadcast.cc spells out the same
// tree).
//
// Numbering. Ranks are numbered relative to the root, v = (rank - root) mod p, so the root is
// v = 0. A rank v > 0 whose lowest set bit is m has the parent v - m and the children v + m/2,
// v + m/4, ..., v + 1 that exist (< p); the root's children are every power of two below p. The
// subtree of v is the contiguous range of relative numbers [v, v + min(m, p - v)) (the whole
// [0, p) for the root); its children's subtrees tile it after v itself: v + 1 owns [v+1, v+2),
// v + 2 owns [v+2, v+4), v + 4 owns [v+4, v+8), ... (clipped at p). The depth of v is popcount(v),
// so the tree is max{popcount(v) : v < p} = floor(log2 p) levels deep, and the root has
// ceil(log2 p) children.
//
// Deadlock freedom at any FIFO depth >= 1, for every schedule whose messages all run along tree
// edges in ONE direction (all up: reduce, gather; or all down: scatter), whatever the order of a
// rank's steps, provided both ends of each edge agree on the messages' sizes and order. Say data
// flows up. Suppose no rank can run its next step although some are unfinished. A rank blocked on
// a receive from its child c finds that link empty, so c is not blocked on a send to it, and c is
// unfinished (the parent still expects a message c has not sent): c is blocked on a receive from
// one of its own children. Descending this way ends at a leaf, which never receives: impossible.
// A rank blocked on a send to its parent finds that link full, so the parent is unfinished and
// not waiting for this rank's message (it is there); it is blocked on a receive from another
// child (impossible, as just shown) or on a send to its own parent. Ascending ends at the root,
// which never sends: impossible. The mirror argument holds when data flows down. The simulator
// checks every configuration at depths 1 and 4 (tests/unit/schedule_test.cc).

#include <vector>

#include "algorithms/builders.h"

namespace mixccl::algo {

struct BinomialTree {
  int n = 1;     // ranks
  int root = 0;  // the root's rank
  int v = 0;     // this rank's relative number
  int m = 1;     // v's lowest set bit; for the root the smallest power of two >= n

  BinomialTree(int nranks, int rootRank, int rank) : n(nranks), root(rootRank), v(ringPeer(rank, -rootRank, nranks)) {
    if (v == 0) {
      while (m < n) m <<= 1;
    } else {
      while ((v & m) == 0) m <<= 1;
    }
  }

  int rankOf(int vr) const { return ringPeer(vr, root, n); }
  bool isRoot() const { return v == 0; }
  int parent() const { return v == 0 ? -1 : rankOf(v - m); }  // a rank, -1 for the root
  // Number of relative ranks in the subtree of relative rank `vr`.
  int subtreeSize(int vr) const {
    if (vr == 0) return n;
    const int low = vr & -vr;
    return low < n - vr ? low : n - vr;
  }
  // This rank's children as relative numbers, nearest first: v + 1, v + 2, v + 4, ... (< v + m, < n).
  std::vector<int> childrenNearestFirst() const {
    std::vector<int> c;
    for (int d = 1; d < m && v + d < n; d <<= 1) c.push_back(v + d);
    return c;
  }
};

// Calls f(off, len) for the pieces [j*chunk, (j+1)*chunk) of a stream of `streamLen` elements
// (the last one shorter), last piece first: the order in which the scatters send a stream down.
template <class F>
inline void forEachPieceBackwards(uint64_t streamLen, uint64_t chunk, F&& f) {
  if (streamLen == 0) return;
  for (uint64_t off = (streamLen - 1) / chunk * chunk;; off -= chunk) {
    f(off, std::min(chunk, streamLen - off));
    if (off == 0) break;
  }
}

}  // namespace mixccl::algo
