// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Internal to algorithms/: the per-algorithm builders that schedule.cc dispatches to, and the
// small helpers they share. Every builder is called with arguments already validated by
// buildSchedule() (ranks and root in range, chunkElems >= 1, count > 0, no size overflow) and
// appends this rank's steps to an empty schedule.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "algorithms/schedule.h"

namespace mixccl::algo {

void buildRingAllReduce(const CollArgs& a, Schedule* s);
void buildRingReduceScatter(const CollArgs& a, Schedule* s);
void buildRingAllGather(const CollArgs& a, Schedule* s);
void buildRingBroadcast(const CollArgs& a, Schedule* s);
void buildRingReduce(const CollArgs& a, Schedule* s);
void buildPairwiseAlltoAll(const CollArgs& a, Schedule* s);
void buildDirectAlltoAll(const CollArgs& a, Schedule* s);
void buildDirectAllGather(const CollArgs& a, Schedule* s);
void buildDirectGather(const CollArgs& a, Schedule* s);
void buildDirectScatter(const CollArgs& a, Schedule* s);
void buildSend(const CollArgs& a, Schedule* s);
void buildRecv(const CollArgs& a, Schedule* s);
void buildRecursiveDoublingAllReduce(const CollArgs& a, Schedule* s);
void buildBinomialBroadcast(const CollArgs& a, Schedule* s);
void buildBinomialReduce(const CollArgs& a, Schedule* s);
void buildBinomialGather(const CollArgs& a, Schedule* s);
void buildBinomialScatter(const CollArgs& a, Schedule* s);
void buildBruckAlltoAll(const CollArgs& a, Schedule* s);
void buildBruckAllGather(const CollArgs& a, Schedule* s);
void buildBruckReduceScatter(const CollArgs& a, Schedule* s);
void buildRecursiveDoublingAllGather(const CollArgs& a, Schedule* s);
void buildRecursiveHalvingReduceScatter(const CollArgs& a, Schedule* s);
void buildRabenseifnerAllReduce(const CollArgs& a, Schedule* s);
void buildScatterAllGatherBroadcast(const CollArgs& a, Schedule* s);
void buildOneShotAllReduce(const CollArgs& a, Schedule* s);
void buildOrderedAllReduce(const CollArgs& a, Schedule* s);
void buildOrderedReduceScatter(const CollArgs& a, Schedule* s);
void buildOrderedReduce(const CollArgs& a, Schedule* s);
void buildDoubleBinaryTreeAllReduce(const CollArgs& a, Schedule* s);

// Calls f(offset, len) for consecutive pieces of [0, count), each at most `chunk` long.
template <class F>
inline void forEachChunk(uint64_t count, uint64_t chunk, F&& f) {
  for (uint64_t off = 0; off < count; off += chunk) f(off, std::min(chunk, count - off));
}

// Ring neighbours; `k` may be any value in [-nranks, nranks].
inline int ringPeer(int rank, int k, int nranks) { return ((rank + k) % nranks + nranks) % nranks; }

// A step with no message: dst = src (through post() when finalize is set).
inline Step localCopy(Buf src, uint64_t srcOffset, Buf dst, uint64_t dstOffset, uint64_t count, bool finalize) {
  Step st;
  st.src = src;
  st.srcOffset = srcOffset;
  st.dst = dst;
  st.dstOffset = dstOffset;
  st.count = count;
  st.finalize = finalize;
  return st;
}

// A step that only receives `len` elements from `peer` into dst[dstOffset, +len).
inline Step recvStep(int peer, Buf dst, uint64_t dstOffset, uint64_t len) {
  Step st;
  st.recvPeer = peer;
  st.dst = dst;
  st.dstOffset = dstOffset;
  st.count = len;
  return st;
}

// A step that only sends src[srcOffset, +len) to `peer`.
inline Step sendStep(Buf src, uint64_t srcOffset, uint64_t len, int peer) {
  Step st;
  st.sendPeer = peer;
  st.src = src;
  st.srcOffset = srcOffset;
  st.count = len;
  return st;
}

// The rounds of a direct exchange (direct_all_to_all.cc, direct_all_gather.cc): blocks of `count`
// elements are cut into chunk-sized pieces, a round per piece; in a round this rank sends the
// piece of the block for every peer, to rank+1 .. rank+n-1 (Input[sendOffset(q) + off]), then
// receives the piece of every peer's block, from rank-1 .. rank-(n-1) (Output[recvOffset(q) + off]).
template <class SendOffset, class RecvOffset>
inline void appendDirectRounds(const CollArgs& a, uint64_t count, SendOffset sendOffset, RecvOffset recvOffset,
                               Schedule* s) {
  const int n = a.nranks;
  forEachChunk(count, a.chunkElems, [&](uint64_t off, uint64_t len) {
    for (int k = 1; k < n; ++k) {
      const int to = ringPeer(a.rank, k, n);
      s->steps.push_back(sendStep(Buf::kInput, sendOffset(to) + off, len, to));
    }
    for (int k = 1; k < n; ++k) {
      const int from = ringPeer(a.rank, -k, n);
      s->steps.push_back(recvStep(from, Buf::kOutput, recvOffset(from) + off, len));
    }
  });
}

// A step on elements [off, off + len) of its local buffers (src and dst at the same offset;
// Buf::kNone and peer -1 leave a side out): value = recv(recvPeer) OP src -> dst and -> sendPeer.
inline Step alignedStep(uint64_t off, uint64_t len, int recvPeer, Buf src, Buf dst, int sendPeer,
                        bool finalize = false) {
  Step st;
  st.recvPeer = recvPeer;
  st.sendPeer = sendPeer;
  st.src = src;
  st.srcOffset = src == Buf::kNone ? 0 : off;
  st.dst = dst;
  st.dstOffset = dst == Buf::kNone ? 0 : off;
  st.count = len;
  st.finalize = finalize;
  return st;
}

// A multi-source step (schedule.h): dst[dstOffset, +len) = post?( Scratch slot 0 OP slot 1 OP
// ... OP slot n-1 ), slot q being Scratch[scratchOffset + q * stride, +len): the fold over n
// ranks' values in rank order when slot q holds rank q's.
inline void appendRankOrderFold(Schedule* s, uint64_t scratchOffset, uint64_t stride, int n, Buf dst,
                                uint64_t dstOffset, uint64_t len, bool finalize) {
  Step st;
  st.sourceFirst = static_cast<uint32_t>(s->operands.size());
  st.sourceCount = static_cast<uint32_t>(n);
  for (int q = 0; q < n; ++q) s->operands.push_back(Operand{Buf::kScratch, scratchOffset + q * stride});
  st.dst = dst;
  st.dstOffset = dstOffset;
  st.count = len;
  st.finalize = finalize;
  s->steps.push_back(st);
}

// The closing token of a collective whose root only sends (schedule.h): the rank before the root
// in ring order sends it, the root waits for it. Appended after every other step; no-op for one
// rank and for the other ranks.
inline void appendRootToken(const CollArgs& a, Schedule* s) {
  if (a.nranks == 1) return;
  const int last = ringPeer(a.root, -1, a.nranks);
  Step st;
  if (a.rank == a.root) {
    st.recvPeer = last;
  } else if (a.rank == last) {
    st.sendPeer = a.root;
  } else {
    return;
  }
  s->steps.push_back(st);
}

}  // namespace mixccl::algo
