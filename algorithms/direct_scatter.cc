// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Direct scatter.
//
// What: block r (count elements at r*count) of the root's Input ends in rank r's Output; only
// the root has an Input.
//
// How: the root copies its own block locally, then sends chunk i (at most chunkElems elements) of
// every peer's block (root+1, root+2, ...) before chunk i+1 of any, so all peers receive at once.
// Non-root ranks receive their chunks into Output. Then the closing token (schedule.h): rank
// root-1 sends an empty message to the root, and the root's call ends when it arrives, so ranks
// that disagree on the root read each other's messages and fail with a mismatch.
//
// Invariants: each Output element is written once. In-place (NCCL: root's Output = Input +
// root*count): the root writes Output only in its local copy, whose source is that same memory;
// the other blocks it reads are never written. No rank both waits to receive and to send, so any
// FIFO depth >= 1 is deadlock-free.
//
// Cost (k = ceil(count / chunkElems)): root 2 + (n-1)k steps, (n-1)*count elements sent; non-root
// k steps (k + 1 on rank root-1), count elements received; the root returns after the token.

#include "algorithms/builders.h"

namespace mixccl::algo {

void buildDirectScatter(const CollArgs& a, Schedule* s) {
  const int n = a.nranks;
  const uint64_t c = a.count;
  if (a.rank != a.root) {
    forEachChunk(c, a.chunkElems, [&](uint64_t off, uint64_t len) {
      Step st;
      st.recvPeer = a.root;
      st.dst = Buf::kOutput;
      st.dstOffset = off;
      st.count = len;
      s->steps.push_back(st);
    });
    appendRootToken(a, s);
    return;
  }
  s->steps.push_back(localCopy(Buf::kInput, static_cast<uint64_t>(a.root) * c, Buf::kOutput, 0, c, false));
  forEachChunk(c, a.chunkElems, [&](uint64_t off, uint64_t len) {
    for (int k = 1; k < n; ++k) {
      const int peer = ringPeer(a.root, k, n);
      Step st;
      st.sendPeer = peer;
      st.src = Buf::kInput;
      st.srcOffset = static_cast<uint64_t>(peer) * c + off;
      st.count = len;
      s->steps.push_back(st);
    }
  });
  appendRootToken(a, s);
}

}  // namespace mixccl::algo
