// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Ring reduce: a pipelined chain that ends at the root.
//
// What: root's Output gets the element-wise reduction over all ranks' Input (count elements);
// other ranks' Output is not touched (NCCL uses recvbuff only on the root).
//
// How: the chain runs root+1 -> root+2 -> ... -> root in ring order, chunk by chunk (each at most
// chunkElems elements), so later chunks stream behind earlier ones:
//   first  (root+1): Input[chunk]                          -> next
//   middle         : recv prev + Input[chunk]              -> next
//   root           : recv prev + Input[chunk] -> Output[chunk], finalize
//
// Invariants: each rank reads each Input element exactly once, inside a reduction; finalize is set
// only on the root's step, which produces the final value, so once per element. In-place
// (Input == Output on the root) is correct: the root reads and writes a chunk in the same step.
// The chain has no cycle, so any FIFO depth >= 1 is deadlock-free.
//
// Cost (k = ceil(count / chunkElems)): k steps per rank; every rank but the root sends count
// elements in k messages; latency n-1+k-1 hops. n == 1: one local step with finalize.

#include "algorithms/builders.h"

namespace mixccl::algo {

void buildRingReduce(const CollArgs& a, Schedule* s) {
  const int n = a.nranks;
  if (n == 1) {
    s->steps.push_back(localCopy(Buf::kInput, 0, Buf::kOutput, 0, a.count, /*finalize=*/true));
    return;
  }
  const int pos = ringPeer(a.rank, -a.root - 1, n);  // 0 for root+1, n-1 for the root
  const int prev = ringPeer(a.rank, -1, n);
  const int next = ringPeer(a.rank, 1, n);
  forEachChunk(a.count, a.chunkElems, [&](uint64_t off, uint64_t len) {
    Step st;
    st.count = len;
    st.src = Buf::kInput;
    st.srcOffset = off;
    if (pos != 0) st.recvPeer = prev;
    if (pos != n - 1) {
      st.sendPeer = next;
    } else {
      st.dst = Buf::kOutput;
      st.dstOffset = off;
      st.finalize = true;
    }
    s->steps.push_back(st);
  });
}

}  // namespace mixccl::algo
