// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Scatter-allgather broadcast (van de Geijn): the root's buffer is scattered in p pieces down a
// binomial tree, then a ring all-gather gives every rank every piece. Each rank sends at most
// about 2*count elements whatever p (the binomial broadcast's root sends ceil(log2 p)*count), so
// this is the bandwidth form for large messages; its latency is linear in p.
//
// What: root's Input (count elements) ends in every rank's Output, the root's own included.
//
// How: ranks are numbered relative to the root, v = (rank - root) mod p. The buffer is cut into
// p pieces as evenly as possible: piece v has count/p elements, one more for v < count mod p,
// and starts at offset v*(count/p) + min(v, count mod p); pieces are empty when count < p.
// Every piece stays at its own offset, in Output (and the root's Input); no Scratch.
//  0. The root copies its own piece 0, Input -> Output.
//  1. Scatter down the binomial tree of binomial_tree.h, as binomial_scatter.cc does it: v's
//     subtree [v, v + sz) owns the contiguous range of pieces v .. v+sz-1, v's "stream"; a stream
//     is cut into chunk-sized pieces [j*chunk, (j+1)*chunk) and sent last piece first, farthest
//     child first, so an inner rank passes on what arrives while it arrives:
//       root  : each child's stream, pieces last first, Input -> child
//       other : each piece of its stream from the parent -> Output; after each receive, every
//               message to a child whose elements have all arrived is sent Output -> child.
//     Empty streams (count < p) send nothing.
//  2. Ring all-gather of the pieces, in relative order (rank r sends to r+1, receives from r-1):
//     in step t = 0 .. p-2 rank v sends piece (v - t) mod p and receives piece (v - t - 1) mod p
//     into Output, alternating one chunk sent and one chunk received (the longer piece's extra
//     chunks last); empty pieces send and receive nothing. The root receives its other pieces
//     here.
//  3. The closing token of a root that only sends (schedule.h, appendRootToken): the root receives
//     every piece but its own from rank root-1 in step 2, so only when those are all empty
//     (count == the size of piece 0, i.e. count == 1) does root-1 send the root a token after its
//     last step.
// One rank: Input -> Output.
//
// Invariants
//  - Each Output element of every rank is written exactly once (its own piece range by the
//    scatter or the root's copy, every other piece by the ring), before any step sends it from
//    Output (ring step t sends what step t-1 received, or the own piece at t = 0).
//  - In place (root: Input == Output): the root reads Input in its copy (whose destination is the
//    same memory) and its scatter sends, all before its first ring receive writes Output.
//  - Messages are at most chunkElems elements; both ends cut each piece and stream the same way.
//  - Deadlock-free at any FIFO depth >= 1. Scatter events wait only for scatter events: a
//    scatter receive waits for the parent's scatter send, and a scatter send waits for a slot
//    that only this rank's earlier scatter messages can fill (it sends on that link in the ring
//    only later); so the scatter completes as binomial_tree.h argues. In the ring, label rank r's
//    events (t, j, send before receive); each rank runs them in that order, and the j-th chunk
//    r sends in step t is the j-th chunk r+1 receives in step t (the same piece). A send waits for
//    r+1 to take r's previous message, an event of r+1 labelled before the send; a receive waits
//    for r-1's send of the same label, also earlier; a slot still holding a scatter message is
//    freed when the receiver finishes its scatter. So the unfinished rank whose next event has
//    the smallest label can always run it. Simulated at depths 1 and 4.
//
// Scratch: none.
//
// Cost (p ranks, n = count, d = ceil(log2 p), pieces of about n/p): with one message per piece,
// d + p - 1 hops (the scatter's d, then p-1 ring steps). Rank v sends the pieces of its subtree
// but its own in the scatter (the root (p-1)/p*n, a leaf nothing) and every piece but v+1 in the
// ring, (p-1)/p*n: at most about 2*(p-1)/p*n elements per rank, and (p-1)/p*n over each ring
// link. alpha*(sum over the root's children c of ceil(min(c, p-c)*n/(p*chunk)) +
// (p-1)*ceil(n/(p*chunk))) + beta*2*(p-1)/p*n.

#include <algorithm>
#include <vector>

#include "algorithms/binomial_tree.h"
#include "algorithms/builders.h"

namespace mixccl::algo {
void buildScatterAllGatherBroadcast(const CollArgs& a, Schedule* s) {
  const int p = a.nranks;
  const uint64_t c = a.count, ch = a.chunkElems;
  if (p == 1) {
    s->steps.push_back(localCopy(Buf::kInput, 0, Buf::kOutput, 0, c, /*finalize=*/false));
    return;
  }
  const uint64_t base = c / p, rem = c % p;
  auto pieceOff = [&](int v) { return v * base + std::min<uint64_t>(v, rem); };  // v in [0, p]
  auto pieceLen = [&](int v) { return pieceOff(v + 1) - pieceOff(v); };
  const BinomialTree t(p, a.root, a.rank);
  // The root's own piece (never empty: count >= 1); the others come back to it in the ring.
  if (t.isRoot()) s->steps.push_back(localCopy(Buf::kInput, 0, Buf::kOutput, 0, pieceLen(0), /*finalize=*/false));

  // 1. Scatter. Messages to the children, in the order they leave: (child, Output offset, length).
  struct Out {
    int peer;
    uint64_t off, len;
  };
  std::vector<Out> outs;
  std::vector<int> children = t.childrenNearestFirst();
  for (auto it = children.rbegin(); it != children.rend(); ++it) {
    const int cv = *it;
    const uint64_t start = pieceOff(cv);
    forEachPieceBackwards(pieceOff(cv + t.subtreeSize(cv)) - start, ch, [&](uint64_t off, uint64_t len) {
      outs.push_back(Out{t.rankOf(cv), start + off, len});
    });
  }
  const Buf scatterSrc = t.isRoot() ? Buf::kInput : Buf::kOutput;
  size_t next = 0;
  auto sendArrived = [&](uint64_t from) {  // Output[from, end of the own stream) is there
    for (; next < outs.size() && outs[next].off >= from; ++next) {
      s->steps.push_back(sendStep(scatterSrc, outs[next].off, outs[next].len, outs[next].peer));
    }
  };
  if (t.isRoot()) {
    sendArrived(0);
  } else {
    const uint64_t start = pieceOff(t.v);
    forEachPieceBackwards(pieceOff(t.v + t.subtreeSize(t.v)) - start, ch, [&](uint64_t off, uint64_t len) {
      s->steps.push_back(recvStep(t.parent(), Buf::kOutput, start + off, len));
      sendArrived(start + off);
    });
  }

  // 2. Ring all-gather of the pieces.
  // With fewer elements than ranks only pieces [0, rem) exist; only the steps that send or
  // receive one are visited (piece v - step or v - step - 1 below rem), so the work is O(steps).
  const int nextRank = ringPeer(a.rank, 1, p), prevRank = ringPeer(a.rank, -1, p);
  std::vector<int> steps;
  if (base > 0) {
    for (int step = 0; step + 1 < p; ++step) steps.push_back(step);
  } else {
    for (int x = 0; x < static_cast<int>(rem); ++x) {
      for (int step : {ringPeer(t.v, -x, p), ringPeer(t.v, -x - 1, p)}) {
        if (step + 1 < p) steps.push_back(step);
      }
    }
    std::sort(steps.begin(), steps.end());
    steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  }
  for (int step : steps) {
    const int sv = ringPeer(t.v, -step, p), rv = ringPeer(t.v, -step - 1, p);
    const uint64_t sLen = pieceLen(sv), rLen = pieceLen(rv);
    for (uint64_t off = 0; off < sLen || off < rLen; off += ch) {
      if (off < sLen)
        s->steps.push_back(sendStep(Buf::kOutput, pieceOff(sv) + off, std::min(ch, sLen - off), nextRank));
      if (off < rLen)
        s->steps.push_back(recvStep(prevRank, Buf::kOutput, pieceOff(rv) + off, std::min(ch, rLen - off)));
    }
  }

  // 3. The root's closing token, when the ring brought it nothing.
  if (c == pieceLen(0)) appendRootToken(a, s);
}

}  // namespace mixccl::algo
