// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Direct all-to-all: every block travels straight to its owner, in one round per chunk.
//
// What: as pairwise_all_to_all.cc: Input and Output hold n blocks of `count` elements; block q of
// rank r's Input ends as block r of rank q's Output.
//
// How: the own block is copied locally. The blocks are cut into the same chunk-sized pieces (at
// most chunkElems elements), a round per piece (appendDirectRounds in builders.h):
//   for each piece j:  for k = 1 .. n-1:  send Input[(r+k) block, piece j] -> r+k
//                      for k = 1 .. n-1:  recv r-k -> Output[(r-k) block, piece j]
// Why beside pairwise: pairwise waits for a peer n-1 times per piece (each phase's receive before
// the next phase's send), Bruck ceil(log2 n) times; here a rank sends everything of a round
// before it waits at all, so it waits once per round. Where ranks outnumber cores, each wait is a
// trip through the scheduler, and that count decides the time of small all-to-alls.
//
// Deadlock freedom with FIFO depth 1: every link carries one message per round. Label each event
// (round, send before receive). Rank r's round-j send to q needs a free slot on the link r->q,
// i.e. q has taken r's message of round j-1 (for j = 0: of an earlier operation, which q takes in
// that operation, without waiting for this one); q takes it among its round-(j-1) receives, an
// event of an earlier label. Rank r's round-j receive from p needs p's round-j send, also of an
// earlier label. So the unfinished rank whose next event has the smallest label can always run
// it: no cycle of waits.
//
// In place: not supported, as NCCL does not (Output blocks are written while Input blocks are
// still to be sent).
//
// Cost (k = ceil(count / chunkElems)): k rounds of n-1 sends that leave without waiting and n-1
// receives: k (alpha + (n-2) send) + (n-1) count beta per rank; (n-1)k messages and (n-1) count
// elements sent per rank, as pairwise.

#include "algorithms/builders.h"

namespace mixccl::algo {

void buildDirectAlltoAll(const CollArgs& a, Schedule* s) {
  const uint64_t c = a.count;
  const uint64_t self = static_cast<uint64_t>(a.rank);
  s->steps.push_back(localCopy(Buf::kInput, self * c, Buf::kOutput, self * c, c, /*finalize=*/false));
  auto block = [c](int q) { return static_cast<uint64_t>(q) * c; };
  appendDirectRounds(a, c, block, block, s);
}

}  // namespace mixccl::algo
