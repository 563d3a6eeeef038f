// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Direct all-gather: every rank sends its block straight to every other rank, in one round per
// chunk.
//
// What: Input holds `count` elements; Output holds n blocks of `count`, block q being rank q's
// Input.
//
// How: the block is cut into chunk-sized pieces (at most chunkElems elements), a round per piece
// (appendDirectRounds in builders.h):
//   for each piece j:  for k = 1 .. n-1:  send Input[piece j] -> r+k
//                      for k = 1 .. n-1:  recv r-k -> Output[(r-k) block, piece j]
// and last the own block is copied into Output block r.
// Why beside the ring, recursive doubling and Bruck: they wait for a peer n-1, log2 n and
// ceil(log2 n) times per piece; here a rank sends everything of a round before it waits at all,
// so it waits once per round. Where ranks outnumber cores, each wait is a trip through the
// scheduler, and that count decides the time of small all-gathers. The price is bandwidth: the
// rank's own block leaves n-1 times (a ring forwards each block once per link).
//
// Deadlock freedom with FIFO depth 1: as direct_all_to_all.cc (one message per link and round;
// a round's sends need only the previous round's receives of the peers).
//
// In place (Input is Output block r, NCCL's in-place form): the sends read Input = Output block
// r, the receives write the other blocks only, and the local copy, whose source and destination
// are then the same memory, comes last: no step reads Input after a step wrote it (schedule.h).
//
// Cost (k = ceil(count / chunkElems)): k rounds of n-1 sends that leave without waiting and n-1
// receives: k (alpha + (n-2) send) + (n-1) count beta per rank; (n-1)k messages and (n-1) count
// elements sent per rank.

#include "algorithms/builders.h"

namespace mixccl::algo {

void buildDirectAllGather(const CollArgs& a, Schedule* s) {
  const uint64_t c = a.count;
  appendDirectRounds(
      a, c, [](int) { return uint64_t{0}; }, [c](int q) { return static_cast<uint64_t>(q) * c; }, s);
  s->steps.push_back(localCopy(Buf::kInput, 0, Buf::kOutput, static_cast<uint64_t>(a.rank) * c, c, /*finalize=*/false));
}

}  // namespace mixccl::algo
