// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Point-to-point send and receive (ncclSend / ncclRecv); CollArgs::root is the peer.
//
// What: a Send moves `count` elements of Input to the peer; the matching Recv (the peer's call,
// with this rank as its peer and the same count) writes them to its Output.
//
// How: chunks of at most chunkElems elements in order; one step per chunk on each side. The peer
// may be the rank itself (a send to self matched by a receive from self in the same group); the
// engine runs the two as separate streams, so that cannot deadlock either.
//
// Cost (k = ceil(count / chunkElems)): k steps and k messages, count elements.

#include "algorithms/builders.h"

namespace mixccl::algo {

void buildSend(const CollArgs& a, Schedule* s) {
  forEachChunk(a.count, a.chunkElems, [&](uint64_t off, uint64_t len) {
    Step st;
    st.sendPeer = a.root;
    st.src = Buf::kInput;
    st.srcOffset = off;
    st.count = len;
    s->steps.push_back(st);
  });
}

void buildRecv(const CollArgs& a, Schedule* s) {
  forEachChunk(a.count, a.chunkElems, [&](uint64_t off, uint64_t len) {
    Step st;
    st.recvPeer = a.root;
    st.dst = Buf::kOutput;
    st.dstOffset = off;
    st.count = len;
    s->steps.push_back(st);
  });
}

}  // namespace mixccl::algo
