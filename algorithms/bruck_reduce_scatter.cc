// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Bruck reduce-scatter: ceil(log2 p) rounds for any rank count p, with bounded scratch - the time
// reversal of the Bruck all-gather (bruck_all_gather.cc). Recursive halving
// (recursive_halving_reduce_scatter.cc) needs a fold, two more hops, and p*count of scratch on
// the absorbing ranks when p is not a power of two; this needs neither. NCCL_ALGO's "PAT" selects
// it (with the all-gather).
//
// What: Input holds p blocks of `count` elements (block b at b*count); rank r ends with the
// reduction over all ranks of block r in Output[0, count).
//
// Terms (rank r, p ranks, ranks mod p): offset d names block r+d (mod p) of rank r. The rounds
// go k = K-1 .. 0 (K = ceil(log2 p)), bit = 2^k, cnt = min(bit, p - bit): only the first round
// has cnt < bit (unless p is a power of two). A partial sum of block q on rank r is r's Input
// block q combined with what r received for it so far. A slice is a column range [x0, x0 + L) of
// every block: count <= chunkElems is one slice (L = count); a larger count is cut into
// ceil(count / chunkElems) even slices (L <= chunkElems), and the rounds run once per slice.
//
// How, per slice (the all-gather's round k played backwards):
//  - Round k: send the partial sums of offsets [bit, bit + cnt) to r + bit, and receive from
//    r - bit its partial sums of the blocks r, .., r+cnt-1 (its offsets [bit, bit + cnt)), i.e. of
//    my offsets [0, cnt), and combine them with mine. The partial sums of blocks headed the other
//    way thus travel in halving sets: after round k a rank keeps offsets [0, bit), and in round 0
//    it receives offset 0 - its own block - complete and writes it to Output with finalize.
//  - Offset d >= 1 is sent once, in round floor(log2 d), and received in the earlier rounds whose
//    receive range covers it. Where my partial sum of d lives: in Input until d is first
//    received, then in Scratch at d*L ("the d-layout"; a receive combines into it in place).
//  - A round's send range and receive range, cnt*L elements each, are cut into the same pieces:
//    per block slice when there are several slices (each <= chunkElems), else pieces of at most
//    chunkElems; round k runs "send piece i, receive piece i". Piece i of the range r - bit sends
//    is piece i of the range r receives, so both sides agree on every message.
//  - A piece is a run of consecutive offsets; its partial sums lie in at most three contiguous
//    runs: Scratch (offsets already received; they come first), then Input up to block p-1, then
//    Input from block 0 (a range passes the end of Input at most once). A send piece with one run
//    leaves straight from it; otherwise its Input runs are copied into Scratch next to it and it
//    leaves as one message ("staged") - the Scratch run, if any, stays where it is and the Input
//    runs follow it at their d-layout places; without one, the piece is staged at max(o, R*L)
//    (o its offset in the range, R the offsets received before the round), space no receive of
//    the round has written yet. A receive piece whose own partial sums span several runs first
//    copies its Input runs into its d-layout places; then one step receives, combines and writes.
//    Only the first two rounds can meet several runs (later ranges lie in offsets already
//    received), and one message per round keeps the critical path at K hops.
//
// Invariants
//  - pre() once: Input block r+d is read once, by its first receive (as the receive's operand or
//    a copy into Scratch before it) or, if it is sent before ever being received, by its send (or
//    the copy that stages it); later reads are of Scratch.
//  - finalize once: only round 0's receive of offset 0 sets it, on the block's owner; nobody
//    receives a final value.
//  - In place (Output = Input + r*count): Output is written only by round 0's receives of a
//    slice, after that slice's only read of Input block r (its first receive) and before any
//    later slice reads other elements; with p = 2 that receive reads Input block r and writes the
//    very same elements. Slices never share an element.
//  - Scratch: a receive writes only offsets [0, cnt) of the d-layout; a staged piece uses its own
//    Scratch run and places no live partial sum and no received piece of the round occupies; a
//    sent partial sum is never read again. Messages are at most chunkElems.
//
// Deadlock-free at FIFO depth 1: in round k rank r sends only to r + bit and receives only from
// r - bit, and distinct rounds use distinct links (distinct powers of two below p). Order the
// events as (slice, round, piece, send before receive): r's send of piece i needs r + bit to have
// taken r's previous message on that link (piece i-1 of the round, or the last piece of this round
// in the previous slice), an earlier event; r's receive of piece i needs r - bit's send of piece
// i, an earlier event. Staging copies wait for nothing, so every event depends only on earlier
// ones and no cycle of waits exists. Simulated at depths 1 and 4.
//
// Scratch (c = count, ch = chunkElems, B = 2^(K-1), m = p - B, h = B/2; D = max(m, h) for p >= 3,
// 0 for p <= 2: the most offsets ever received before round 0, at most floor(p/2)):
//  - c > ch (several slices): exactly D * ceil(c / ceil(c/ch)) <= D*ch elements - bounded by the
//    slot size, not by count.
//  - c <= ch: D*c, plus what staging in the second round needs beyond it: in all at most
//    (h + min(h, m))*c <= 2p/3 * c (p >= 5; D*c for p <= 4). A power of two needs at most
//    p/2 * c; p = 2^j + 1 at most (p+1)/2 * c.
// Recursive halving: p*c on absorbing ranks; the ring: none.
//
// Cost (cnt_k as above, sum_k cnt_k = p - 1; s = slices): rank r sends and combines exactly
// (p-1)*c elements - the ring's bytes, the bandwidth lower bound - in sum_k ceil(cnt_k*c / ch)
// messages (one slice) or (p-1)*s messages (s slices); K hops when every range fits one message.
// alpha * messages + (beta + gamma) * (p-1)*c. One rank (p = 1) is a local Input -> Output step
// with finalize.

#include "algorithms/builders.h"

namespace mixccl::algo {
namespace {

// A contiguous part of a piece: `len` elements at `off` of `buf`, starting `at` elements into the
// range (virtual offset).
struct Run {
  Buf buf;
  uint64_t off, at, len;
};

// Where rank r's partial sums of one slice live (see above).
struct Partials {
  int p, r;
  uint64_t count, x0, L;
  int received = 0;  // offsets [0, received) have been received and live in the d-layout

  // The runs of [v, v + n) of the range that starts at offset d0, in order.
  void runs(int d0, uint64_t v, uint64_t n, std::vector<Run>* out) const {
    out->clear();
    const uint64_t end = v + n, wrap = static_cast<uint64_t>(p - r);  // offset of block 0
    while (v < end) {
      const uint64_t d = static_cast<uint64_t>(d0) + v / L, y = v % L;
      Run run{Buf::kScratch, d * L + y, v, 0};
      uint64_t stop = (static_cast<uint64_t>(received) - d0) * L;
      if (d >= static_cast<uint64_t>(received)) {
        run.buf = Buf::kInput;
        run.off = ((static_cast<uint64_t>(r) + d) % static_cast<uint64_t>(p)) * count + x0 + y;
        // Input is contiguous across blocks only for whole blocks, and up to block p-1.
        stop = L < count ? (v / L + 1) * L : (d < wrap ? (wrap - d0) * L : end);
      }
      run.len = std::min(stop, end) - v;
      out->push_back(run);
      v += run.len;
    }
  }
};

}  // namespace

void buildBruckReduceScatter(const CollArgs& a, Schedule* s) {
  const int p = a.nranks, r = a.rank;
  const uint64_t c = a.count, ch = a.chunkElems;
  if (p == 1) {
    s->steps.push_back(localCopy(Buf::kInput, 0, Buf::kOutput, 0, c, /*finalize=*/true));
    return;
  }
  std::vector<int> bits;  // the rounds, highest first
  for (int bit = 1; bit < p; bit <<= 1) bits.insert(bits.begin(), bit);
  auto cntOf = [p](int bit) { return std::min(bit, p - bit); };
  int most = 0;  // D: offsets received before round 0
  for (int bit : bits) most = bit > 1 ? std::max(most, cntOf(bit)) : most;

  const uint64_t slices = c <= ch ? 1 : (c + ch - 1) / ch;
  const uint64_t base = c / slices, extra = c % slices;
  uint64_t scratch = static_cast<uint64_t>(most) * (base + (extra > 0 ? 1 : 0));
  std::vector<Run> runs;
  for (uint64_t sl = 0; sl < slices; ++sl) {
    Partials mine{p, r, c, sl * base + std::min(sl, extra), base + (sl < extra ? 1 : 0)};
    const uint64_t L = mine.L;
    for (int bit : bits) {
      const int cnt = cntOf(bit), to = ringPeer(r, bit, p), from = ringPeer(r, -bit, p);
      const bool last = bit == 1;  // receives offset 0 complete
      auto piece = [&](uint64_t o, uint64_t n) {
        mine.runs(bit, o, n, &runs);
        if (runs.size() == 1) {
          s->steps.push_back(sendStep(runs[0].buf, runs[0].off, n, to));
        } else {
          const bool keep = runs[0].buf == Buf::kScratch;  // the Scratch run stays in place
          const uint64_t at = keep ? runs[0].off : std::max(o, static_cast<uint64_t>(mine.received) * L);
          for (size_t i = keep ? 1 : 0; i < runs.size(); ++i) {
            s->steps.push_back(
                localCopy(runs[i].buf, runs[i].off, Buf::kScratch, at + runs[i].at - o, runs[i].len, false));
          }
          s->steps.push_back(sendStep(Buf::kScratch, at, n, to));
          scratch = std::max(scratch, at + n);
        }
        mine.runs(0, o, n, &runs);
        Step st;
        st.recvPeer = from;
        st.count = n;
        st.dst = last ? Buf::kOutput : Buf::kScratch;
        st.dstOffset = last ? mine.x0 + o : o;
        st.finalize = last;
        st.src = runs[0].buf;
        st.srcOffset = runs[0].off;
        if (runs.size() > 1) {  // never in the last round: one block, one run
          for (const Run& run : runs) {
            if (run.buf == Buf::kInput)
              s->steps.push_back(localCopy(Buf::kInput, run.off, Buf::kScratch, run.at, run.len, false));
          }
          st.src = Buf::kScratch;
          st.srcOffset = o;
        }
        s->steps.push_back(st);
      };
      if (slices > 1) {
        for (int i = 0; i < cnt; ++i) piece(static_cast<uint64_t>(i) * L, L);
      } else {
        forEachChunk(static_cast<uint64_t>(cnt) * L, ch, piece);
      }
      mine.received = std::max(mine.received, last ? 0 : cnt);
    }
  }
  s->scratchElems = scratch;
}

}  // namespace mixccl::algo
