// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Direct gather.
//
// What: every rank's Input (count elements) ends in the root's Output at rank*count; non-root
// ranks have no Output.
//
// How: non-root ranks send their Input to the root in chunks of at most chunkElems elements. The
// root copies its own block locally, then receives chunk i from every peer (root+1, root+2, ...)
// before chunk i+1 from any, so all peers stream at once instead of one after the other.
//
// Invariants: each root Output element is written once. In-place (NCCL: root's Input = Output +
// root*count): the root reads Input only in its local copy, whose destination is that same memory.
// No rank both waits to receive and to send, so any FIFO depth >= 1 is deadlock-free.
//
// Cost (k = ceil(count / chunkElems)): non-root k steps, count elements sent; root 1 + (n-1)k
// steps, (n-1)*count elements received.

#include "algorithms/builders.h"

namespace mixccl::algo {

void buildDirectGather(const CollArgs& a, Schedule* s) {
  const int n = a.nranks;
  const uint64_t c = a.count;
  if (a.rank != a.root) {
    forEachChunk(c, a.chunkElems, [&](uint64_t off, uint64_t len) {
      Step st;
      st.sendPeer = a.root;
      st.src = Buf::kInput;
      st.srcOffset = off;
      st.count = len;
      s->steps.push_back(st);
    });
    return;
  }
  s->steps.push_back(localCopy(Buf::kInput, 0, Buf::kOutput, static_cast<uint64_t>(a.root) * c, c, false));
  forEachChunk(c, a.chunkElems, [&](uint64_t off, uint64_t len) {
    for (int k = 1; k < n; ++k) {
      const int peer = ringPeer(a.root, k, n);
      Step st;
      st.recvPeer = peer;
      st.dst = Buf::kOutput;
      st.dstOffset = static_cast<uint64_t>(peer) * c + off;
      st.count = len;
      s->steps.push_back(st);
    }
  });
}

}  // namespace mixccl::algo
