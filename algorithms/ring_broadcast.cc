// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Ring broadcast: a pipelined chain from the root.
//
// What: root's Input (count elements) ends in every rank's Output, the root's own included.
//
// How: the ranks form the chain root -> root+1 -> ... -> root-1 (ring order). The buffer is cut
// into chunks of at most chunkElems elements, sent one after the other, so chunk i+1 leaves the
// root while chunk i is still travelling down the chain:
//   root  : Input[chunk] -> Output[chunk] and -> next    (the engine skips the copy when the
//                                                         user passed the same pointer)
//   middle: recv prev -> Output[chunk] and -> next
//   last  : recv prev -> Output[chunk]
// and then the closing token (schedule.h): the last rank, root-1, sends an empty message to the
// root, and the root's call ends when it arrives. That closes the chain into a ring, so ranks
// that disagree on the root read each other's messages and fail with a mismatch.
//
// Invariants: each Output element is written once; Input is read only on the root, by the step
// that writes the same elements of Output, so in-place (Input == Output on root) is correct. A
// chain has no cycle, so any FIFO depth >= 1 is deadlock-free (each rank only waits on its
// predecessor's data and its successor's free slot, and the last rank only receives).
//
// Cost (k = ceil(count / chunkElems)): k steps per rank, plus the token on the root and the last
// rank; every rank but the last sends count elements in k messages; latency n-1+k-1 hops for the
// data, and the root returns one hop later (the token). n == 1: one local copy on the root.

#include "algorithms/builders.h"

namespace mixccl::algo {

void buildRingBroadcast(const CollArgs& a, Schedule* s) {
  const int n = a.nranks;
  if (n == 1) {
    s->steps.push_back(localCopy(Buf::kInput, 0, Buf::kOutput, 0, a.count, /*finalize=*/false));
    return;
  }
  const int pos = ringPeer(a.rank, -a.root, n);  // distance from the root along the chain
  const int prev = ringPeer(a.rank, -1, n);
  const int next = ringPeer(a.rank, 1, n);
  forEachChunk(a.count, a.chunkElems, [&](uint64_t off, uint64_t len) {
    Step st;
    st.count = len;
    st.dst = Buf::kOutput;
    st.dstOffset = off;
    if (pos == 0) {
      st.src = Buf::kInput;
      st.srcOffset = off;
    } else {
      st.recvPeer = prev;
    }
    if (pos != n - 1) st.sendPeer = next;
    s->steps.push_back(st);
  });
  appendRootToken(a, s);
}

}  // namespace mixccl::algo
