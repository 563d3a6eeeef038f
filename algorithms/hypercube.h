// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// The rank numbering shared by the recursive-doubling and recursive-halving schedules
// (recursive_doubling_all_gather.cc, recursive_halving_reduce_scatter.cc,
// rabenseifner_all_reduce.cc; recursive_doubling_all_reduce.cc spells the same numbering out).
//
// Terms. p ranks, p2 = the largest power of two <= p, rem = p - p2 (< p2). The first 2*rem ranks
// pair up as (2i, 2i+1): the even rank of a pair is "folded" (it hands its data to the odd rank
// and sits out the rounds), the odd rank "absorbs" it. The p2 ranks left take part in log2(p2)
// rounds under virtual numbers v = 0..p2-1: rank r < 2*rem is v = r/2, any other rank v = r - rem.
// Virtual rank v stands for the real ranks firstRank(v) .. firstRank(v+1)-1 (two ranks for
// v < rem, one otherwise); firstRank is increasing with firstRank(p2) = p, so a range of virtual
// ranks [v0, v1) stands for the contiguous range of real ranks [firstRank(v0), firstRank(v1)), i.e.
// for a contiguous range of per-rank blocks.
//
// Exchange. In a round, partners v and v^mask each send one range of elements and receive
// another; both ranges are cut into pieces of at most chunkElems elements, and each side runs
// "send piece i, receive piece i" for i = 0, 1, ... (one side may have more pieces than the
// other). That is deadlock-free with one slot per link: a rank's send of piece i waits only for
// the partner to have received piece i-1, which the partner does right after its own send of
// piece i-1, which in turn waits only for our receive of piece i-2, done before our send of piece
// i. Every round has a partner of its own, so no link carries messages of two rounds, and a rank
// enters round j only after its round j-1, whose partner finished round j-2 ... (the hypercube has
// no cycle of waits across rounds).

#include <algorithm>
#include <cstdint>
#include <vector>

#include "algorithms/builders.h"

namespace mixccl::algo {

struct Hypercube {
  int p2 = 1;
  int rem = 0;
  int rounds = 0;  // log2(p2)
  int v = 0;       // this rank's virtual number (meaningless when folded)
  bool folded = false;
  bool absorbs = false;

  Hypercube(int rank, int nranks) {
    while (p2 * 2 <= nranks) {
      p2 *= 2;
      ++rounds;
    }
    rem = nranks - p2;
    folded = rank < 2 * rem && rank % 2 == 0;
    absorbs = rank < 2 * rem && rank % 2 == 1;
    v = rank < 2 * rem ? rank / 2 : rank - rem;
  }
  // The real rank that plays virtual rank vr in the rounds.
  int rankOf(int vr) const { return vr < rem ? 2 * vr + 1 : vr + rem; }
  // The first real rank virtual rank vr stands for (vr may be p2: then p).
  int firstRank(int vr) const { return vr < rem ? 2 * vr : vr + rem; }
};

struct Piece {
  uint64_t off = 0;
  uint64_t len = 0;
};

// [lo, hi) in consecutive pieces of at most `chunk` elements (none when empty).
inline std::vector<Piece> chunked(uint64_t lo, uint64_t hi, uint64_t chunk) {
  std::vector<Piece> out;
  for (uint64_t off = lo; off < hi; off += chunk) out.push_back(Piece{off, std::min(chunk, hi - off)});
  return out;
}

// The exchange of one round (see above): sendStep(piece i), then recvStep(piece i), for each i.
template <class S, class R>
inline void exchangePieces(const std::vector<Piece>& send, const std::vector<Piece>& recv, S&& sendStep, R&& recvStep) {
  for (size_t i = 0; i < std::max(send.size(), recv.size()); ++i) {
    if (i < send.size()) sendStep(send[i]);
    if (i < recv.size()) recvStep(recv[i]);
  }
}

}  // namespace mixccl::algo
