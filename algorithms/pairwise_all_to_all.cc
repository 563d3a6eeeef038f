// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Pairwise all-to-all.
//
// What: Input and Output hold n blocks of `count` elements; block q of rank r's Input ends as
// block r of rank q's Output.
//
// How: first the own block is copied locally. Then n-1 phases; in phase k (1 <= k < n) rank r
// sends its block r+k to rank r+k and receives block r-k's data from rank r-k, chunk by chunk
// (at most chunkElems elements), alternating one send step and one receive step:
//   for each chunk:  send Input[(r+k) block, chunk] -> r+k ;  recv r-k -> Output[(r-k) block, chunk]
//
// Deadlock freedom with FIFO depth 1: in phase k rank r sends only to r+k and receives only from
// r-k, and phases use disjoint links. Within a phase rank r's i-th send needs rank r+k to have
// taken its (i-1)-th message, which r+k does right after its own (i-1)-th send; rank r's i-th
// receive needs rank r-k's i-th send. Ordering the events as (phase, chunk, send before receive)
// every event depends only on earlier ones, so no cycle of waits exists.
//
// In-place all-to-all is not supported by NCCL (sendbuff == recvbuff is undefined there); this
// schedule reads Input blocks after writing Output blocks and so requires distinct buffers.
//
// Cost (k = ceil(count / chunkElems)): 1 + 2(n-1)k steps per rank, (n-1)k messages and (n-1)*count
// elements sent per rank.

#include "algorithms/builders.h"

namespace mixccl::algo {

void buildPairwiseAlltoAll(const CollArgs& a, Schedule* s) {
  const int n = a.nranks;
  const uint64_t c = a.count;
  const uint64_t self = static_cast<uint64_t>(a.rank);
  s->steps.push_back(localCopy(Buf::kInput, self * c, Buf::kOutput, self * c, c, /*finalize=*/false));
  for (int k = 1; k < n; ++k) {
    const int to = ringPeer(a.rank, k, n);
    const int from = ringPeer(a.rank, -k, n);
    forEachChunk(c, a.chunkElems, [&](uint64_t off, uint64_t len) {
      Step send;
      send.sendPeer = to;
      send.src = Buf::kInput;
      send.srcOffset = static_cast<uint64_t>(to) * c + off;
      send.count = len;
      s->steps.push_back(send);
      Step recv;
      recv.recvPeer = from;
      recv.dst = Buf::kOutput;
      recv.dstOffset = static_cast<uint64_t>(from) * c + off;
      recv.count = len;
      s->steps.push_back(recv);
    });
  }
}

}  // namespace mixccl::algo
