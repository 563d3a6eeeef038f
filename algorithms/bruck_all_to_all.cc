// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Bruck all-to-all: ceil(log2 p) rounds instead of the pairwise exchange's p-1, at the price of
// sending each block up to log2 p times; the latency-optimal form for small blocks.
//
// What: Input and Output hold p blocks of `count` elements; block q of rank r's Input ends as
// block r of rank q's Output.
//
// How (rank r, p ranks; all offsets in blocks of count elements):
//  - Index i (0 <= i < p) names the block that must travel i ranks forward: at the start rank r
//    holds, at index i, its Input block (r + i) mod p. In round k (bit = 2^k < p) every rank sends
//    the blocks at every index i with bit k set to rank r + bit and receives the same indices
//    from rank r - bit, which replace its own. A block at index i thus moves by exactly the set
//    bits of i and, after the last round, rank r holds at index i the block that rank r - i sent
//    to it: Output block (r - i) mod p.
//  - Working copy: index i lives in Output block (r - i) mod p, its final place, from the first
//    time it is received on (before that it is still in Input, where it is read by the round of
//    its lowest set bit). No working copy in Scratch is needed.
//  - Round k: the n_k indices with bit k set (ascending) are packed into the staging area
//    Scratch[0, n_k*count) by local copies (from Input in the round of the index's lowest set
//    bit, otherwise from its Output block), sent in chunks of at most chunkElems elements,
//    alternating with the receive of the same chunk from r - bit into the same place, and
//    unpacked into the indices' Output blocks. Where the packed indices are one contiguous range
//    of Input or Output (always for p = 2, and for the bit just below p in some cases), the
//    message leaves straight from there; where they land in one contiguous range, it is received
//    straight into it.
//  - Index 0 (the own block) is one local copy, Input -> Output.
//
// Invariants: every Input block is read once (the own block by its copy, block r+i by the pack of
// round lowbit(i)); an Output block is written by the unpack of each round that moves its index
// and holds the final block after the round of the index's highest set bit. Within a round a
// chunk is sent before the same chunk is overwritten by the receive. Messages are at most
// chunkElems. Input does not alias Output (buildSchedule stages an aliased Input: stageInput).
//
// Deadlock-free at FIFO depth 1: in round k rank r sends only to r + bit and receives only from
// r - bit, and rounds use distinct links (the bits are distinct below p). Order the events as
// (round, chunk, send before receive): rank r's send of chunk j needs r + bit to have taken chunk
// j-1, which it does (its receive of j-1 comes before its send of j); rank r's receive of chunk j
// needs r - bit's send of chunk j, which comes earlier in the order. Every event depends only on
// earlier ones, so no cycle of waits exists. Simulated at depths 1 and 4.
//
// Scratch: max over the rounds that need staging of n_k*count elements, n_k = #{1 <= i < p : bit
// k of i set} <= floor(p/2); so at most floor(p/2)*count (0 for p <= 2).
//
// Cost (d = ceil(log2 p), n = count): d hops when a round's data fits one message; rank r sends
// sum_k n_k * n elements, about (p/2)*d*n (pairwise: (p-1)*n), in sum_k ceil(n_k*n / chunk)
// messages; alpha*sum_k ceil(n_k*n/chunk) + beta*sum_k n_k*n.

#include "algorithms/builders.h"

namespace mixccl::algo {
namespace {

struct Seg {
  Buf buf;
  uint64_t off, len;
};

// Appends [off, off+len) of buf to segs, merging with the last segment when contiguous.
void addSeg(std::vector<Seg>* segs, Buf buf, uint64_t off, uint64_t len) {
  if (!segs->empty() && segs->back().buf == buf && segs->back().off + segs->back().len == off) {
    segs->back().len += len;
    return;
  }
  segs->push_back(Seg{buf, off, len});
}

}  // namespace

void buildBruckAlltoAll(const CollArgs& a, Schedule* s) {
  const int p = a.nranks, r = a.rank;
  const uint64_t c = a.count;
  auto block = [&](int q) { return static_cast<uint64_t>(ringPeer(q, 0, p)) * c; };
  s->steps.push_back(localCopy(Buf::kInput, block(r), Buf::kOutput, block(r), c, /*finalize=*/false));
  for (int bit = 1; bit < p; bit <<= 1) {
    std::vector<Seg> from, to;  // where the round's indices are read from and written to
    for (int i = 1; i < p; ++i) {
      if ((i & bit) == 0) continue;
      if ((i & -i) == bit) {
        addSeg(&from, Buf::kInput, block(r + i), c);
      } else {
        addSeg(&from, Buf::kOutput, block(r - i), c);
      }
      addSeg(&to, Buf::kOutput, block(r - i), c);
    }
    uint64_t total = 0;
    for (const Seg& g : from) total += g.len;
    const bool packed = from.size() > 1, unpacked = to.size() > 1;
    if (packed || unpacked) s->scratchElems = std::max(s->scratchElems, total);
    const Seg sendFrom = packed ? Seg{Buf::kScratch, 0, total} : from[0];
    const Seg recvInto = unpacked ? Seg{Buf::kScratch, 0, total} : to[0];
    if (packed) {
      uint64_t at = 0;
      for (const Seg& g : from) {
        s->steps.push_back(localCopy(g.buf, g.off, Buf::kScratch, at, g.len, false));
        at += g.len;
      }
    }
    const int next = ringPeer(r, bit, p), prev = ringPeer(r, -bit, p);
    forEachChunk(total, a.chunkElems, [&](uint64_t off, uint64_t len) {
      Step send;
      send.sendPeer = next;
      send.src = sendFrom.buf;
      send.srcOffset = sendFrom.off + off;
      send.count = len;
      s->steps.push_back(send);
      Step recv;
      recv.recvPeer = prev;
      recv.dst = recvInto.buf;
      recv.dstOffset = recvInto.off + off;
      recv.count = len;
      s->steps.push_back(recv);
    });
    if (unpacked) {
      uint64_t at = 0;
      for (const Seg& g : to) {
        s->steps.push_back(localCopy(Buf::kScratch, at, Buf::kOutput, g.off, g.len, false));
        at += g.len;
      }
    }
  }
}

}  // namespace mixccl::algo
