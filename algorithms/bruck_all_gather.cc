// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Bruck all-gather: ceil(log2 p) rounds for any rank count p - no fold to a power of two, unlike
// recursive doubling (recursive_doubling_all_gather.cc), which adds a hop before and after its
// rounds when p is not one; the latency-optimal form for small blocks. NCCL_ALGO's "PAT" selects
// it (with bruck_reduce_scatter.cc, its time reversal).
//
// What: every rank contributes `count` elements (Input); every rank ends with all p contributions
// in Output, rank b's at b*count.
//
// How (rank r, p ranks; "block q" = Output[q*count, +count), ranks and blocks mod p):
//  - First the own block: Input -> Output block r (in place the very same elements).
//  - Round k (bit = 2^k < p): rank r holds the blocks r, r+1, ..., r+bit-1. It sends the first
//    cnt = min(bit, p - bit) of them to r - bit and receives cnt blocks from r + bit - that rank's
//    first cnt, the blocks r+bit, ..., r+bit+cnt-1 - which it writes straight into their final
//    places in Output. Now it holds min(2*bit, p) blocks from r on; after the last round (the only
//    one where cnt < bit) all p of them. No final rotation, no working copy.
//  - Terms: a round's "range" is its run of cnt consecutive blocks mod p, cnt*count elements of
//    Output from block r (sent) or r+bit (received), cut into pieces of at most chunkElems; piece
//    i of the range sent by r+bit is piece i of the range r receives (same blocks, same cuts).
//    Round k runs "send piece i, receive piece i" for every i.
//  - A range that passes block p-1 is two regions of Output; a piece that straddles that end
//    ("wraps") is staged: the sender copies its two parts into Scratch and sends one message from
//    there; the receiver receives it into Scratch and copies the two parts out. Splitting it into
//    two messages instead would cost a hop per round in which some rank's range wraps (the
//    simulator charges one per send), so one message per round stays one message.
//
// Invariants: no reduction, so no finalize and nothing is combined. Every Output block other than
// r is written once, by the round whose range brings it (ranges received by a rank are disjoint
// and never include blocks it holds); block r once, by the first copy. Input is read only by that
// copy, which writes exactly the elements it reads in place (Input = Output + r*count), so no
// step reads Input memory a step wrote. Within a round the blocks sent (held) and received (not
// held) are disjoint, so a send never reads what the round's receives write; Scratch is reused
// by the next staged piece only after the step that reads it (steps run in order). Messages are
// pieces of at most chunkElems elements.
//
// Deadlock-free at FIFO depth 1: in round k rank r sends only to r - bit and receives only from
// r + bit, and the rounds use distinct links (the bits are distinct below p). Order the events as
// (round, piece, send before receive): rank r's send of piece i needs r - bit to have taken piece
// i-1 from r, an earlier event; its receive of piece i needs r + bit's send of piece i, an earlier
// event. Every event depends only on earlier ones (and on its own rank's earlier steps), so no
// cycle of waits exists. Staging copies wait for nothing. Simulated at depths 1 and 4.
//
// Scratch: the longest wrapping piece, at most min(chunkElems, floor(p/2)*count) elements, on the
// ranks whose ranges wrap in some round (none for p <= 3: a range of one block never wraps).
//
// Cost (d = ceil(log2 p), c = count, cnt_k = min(2^k, p - 2^k), sum_k cnt_k = p - 1): rank r
// sends exactly (p-1)*c elements (the bandwidth lower bound, as the ring) in sum_k
// ceil(cnt_k*c / chunk) messages; d hops when every range fits one message, alpha*sum_k
// ceil(cnt_k*c/chunk) + beta*(p-1)*c. No bytes reduced.

#include "algorithms/builders.h"

namespace mixccl::algo {

void buildBruckAllGather(const CollArgs& a, Schedule* s) {
  const int p = a.nranks, r = a.rank;
  const uint64_t c = a.count, total = static_cast<uint64_t>(p) * c;
  s->steps.push_back(localCopy(Buf::kInput, 0, Buf::kOutput, static_cast<uint64_t>(r) * c, c, /*finalize=*/false));
  uint64_t stage = 0;  // the longest wrapping piece
  for (int bit = 1; bit < p; bit <<= 1) {
    const uint64_t len = static_cast<uint64_t>(std::min(bit, p - bit)) * c;
    const int to = ringPeer(r, -bit, p), from = ringPeer(r, bit, p);
    const uint64_t sendFrom = static_cast<uint64_t>(r) * c, recvFrom = static_cast<uint64_t>(from) * c;
    forEachChunk(len, a.chunkElems, [&](uint64_t off, uint64_t n) {
      // Output elements [at, at + n) mod total: at most two regions, [at, total) and [0, rest).
      const uint64_t sendAt = (sendFrom + off) % total, recvAt = (recvFrom + off) % total;
      if (sendAt + n <= total) {
        s->steps.push_back(sendStep(Buf::kOutput, sendAt, n, to));
      } else {
        const uint64_t head = total - sendAt;
        s->steps.push_back(localCopy(Buf::kOutput, sendAt, Buf::kScratch, 0, head, false));
        s->steps.push_back(localCopy(Buf::kOutput, 0, Buf::kScratch, head, n - head, false));
        s->steps.push_back(sendStep(Buf::kScratch, 0, n, to));
        stage = std::max(stage, n);
      }
      if (recvAt + n <= total) {
        s->steps.push_back(recvStep(from, Buf::kOutput, recvAt, n));
      } else {
        const uint64_t head = total - recvAt;
        s->steps.push_back(recvStep(from, Buf::kScratch, 0, n));
        s->steps.push_back(localCopy(Buf::kScratch, 0, Buf::kOutput, recvAt, head, false));
        s->steps.push_back(localCopy(Buf::kScratch, head, Buf::kOutput, 0, n - head, false));
        stage = std::max(stage, n);
      }
    });
  }
  s->scratchElems = stage;
}

}  // namespace mixccl::algo
