// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Every collective schedule, run through the in-memory simulator (algorithms/sim.h) for many rank
// counts, counts, chunk sizes, roots, FIFO depths and in-place aliasings, checked against a
// reference computed directly from the inputs. Besides the values the checks cover: finalize
// applied exactly once per reduced output element (never for copies), every Input element read
// exactly once by a reduction (where pre() is applied), the bytes each rank sends, and no deadlock
// at FIFO depth 1.

#include "algorithms/schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/cost.h"
#include "algorithms/double_binary_tree.h"
#include "algorithms/sim.h"
#include "algorithms/timing_sim.h"

namespace mixccl::algo {
namespace {

constexpr int64_t kSentinel = -777777777;

int64_t inputValue(int rank, uint64_t i) {
  return static_cast<int64_t>(((rank + 1) * 1000003ull + i * 7919ull) % 2000003ull) - 1000001;
}

bool isReductionKind(CollKind k) {
  return k == CollKind::kAllReduce || k == CollKind::kReduce || k == CollKind::kReduceScatter;
}

bool isRootedKind(CollKind k) {
  return k == CollKind::kBroadcast || k == CollKind::kReduce || k == CollKind::kGather || k == CollKind::kScatter;
}

bool supportsInPlace(CollKind k) { return k != CollKind::kAlltoAll; }

struct Case {
  CollKind kind;
  int nranks;
  uint64_t count;
  uint64_t chunk;
  int root;
  bool inPlace;
  size_t depth;
  SimOp op;
  Algo algo = Algo::kDefault;

  std::string str() const {
    char b[240];
    snprintf(b, sizeof(b), "%s (%s) n=%d count=%llu chunk=%llu root=%d %s depth=%zu op=%s", collName(kind),
             algoName(algo), nranks, static_cast<unsigned long long>(count), static_cast<unsigned long long>(chunk),
             root, inPlace ? "in-place" : "out-of-place", depth, op == SimOp::kSum ? "sum" : "max");
    return b;
  }
};

int floorLog2(int n) {
  int l = 0;
  while ((2 << l) <= n) ++l;
  return l;
}

CollArgs argsFor(const Case& c, int rank) {
  CollArgs a;
  a.kind = c.kind;
  a.rank = rank;
  a.nranks = c.nranks;
  a.root = c.root;
  a.count = c.count;
  a.chunkElems = c.chunk;
  a.fifoDepth = static_cast<uint32_t>(c.depth);  // depth >= 2 selects the plain ring order
  a.algo = c.algo;
  return a;
}

// Places Input and Output in the rank's arena the way NCCL's in-place forms alias them.
void layOut(const Case& c, int rank, SimActor* act) {
  const CollArgs a = argsFor(c, rank);
  const uint64_t in = inputElems(a), out = outputElems(a), r = rank;
  act->inputElems = in;
  act->outputElems = out;
  uint64_t arena = in + out;
  act->inputOffset = 0;
  act->outputOffset = in;
  if (c.inPlace) {
    switch (c.kind) {
      case CollKind::kAllReduce:
      case CollKind::kBroadcast:
      case CollKind::kReduce:
        arena = std::max(in, out);  // same pointer
        act->outputOffset = 0;
        break;
      case CollKind::kAllGather:  // sendbuff = recvbuff + rank*count
        arena = out;
        act->inputOffset = r * c.count;
        act->outputOffset = 0;
        break;
      case CollKind::kReduceScatter:  // recvbuff = sendbuff + rank*count
        arena = in;
        act->outputOffset = r * c.count;
        break;
      case CollKind::kGather:  // root: sendbuff = recvbuff + root*count
        if (rank == c.root) {
          arena = out;
          act->inputOffset = r * c.count;
          act->outputOffset = 0;
        }
        break;
      case CollKind::kScatter:  // root: recvbuff = sendbuff + root*count
        if (rank == c.root) {
          arena = in;
          act->outputOffset = r * c.count;
        }
        break;
      default:
        break;
    }
  }
  act->arena.assign(arena, SimCell{kSentinel, -100, 0});
  for (uint64_t i = 0; i < in; ++i) act->arena[act->inputOffset + i] = SimCell{inputValue(rank, i), 0, 0};
}

// The reference: value of Output[i] on `rank`, and whether it is a reduction over all ranks.
int64_t expected(const Case& c, int rank, uint64_t i) {
  const uint64_t cnt = c.count;
  auto reduceOver = [&](uint64_t inIdx) {
    int64_t v = inputValue(0, inIdx);
    for (int q = 1; q < c.nranks; ++q) {
      v = c.op == SimOp::kSum ? v + inputValue(q, inIdx) : std::max(v, inputValue(q, inIdx));
    }
    return v;
  };
  switch (c.kind) {
    case CollKind::kAllReduce:
    case CollKind::kReduce:
      return reduceOver(i);
    case CollKind::kReduceScatter:
      return reduceOver(static_cast<uint64_t>(rank) * cnt + i);
    case CollKind::kAllGather:
    case CollKind::kGather:
      return inputValue(static_cast<int>(i / cnt), i % cnt);
    case CollKind::kBroadcast:
      return inputValue(c.root, i);
    case CollKind::kScatter:
      return inputValue(c.root, static_cast<uint64_t>(rank) * cnt + i);
    case CollKind::kAlltoAll:
      return inputValue(static_cast<int>(i / cnt), static_cast<uint64_t>(rank) * cnt + i % cnt);
    default:
      return 0;
  }
}

// The rank numbering of algorithms/hypercube.h, restated: p2 = largest power of two <= n, the
// first 2*rem ranks pair up (even: folded, odd: absorbs), virtual rank v stands for the real
// ranks [first(v), first(v+1)).
struct Fold {
  int p2, rem, rounds;
  explicit Fold(int n) : p2(1 << floorLog2(n)), rem(n - (1 << floorLog2(n))), rounds(floorLog2(n)) {}
  bool folded(int r) const { return r < 2 * rem && r % 2 == 0; }
  bool absorbs(int r) const { return r < 2 * rem && r % 2 == 1; }
  int vOf(int r) const { return r < 2 * rem ? r / 2 : r - rem; }
  int first(int v) const { return v < rem ? 2 * v : v + rem; }
  // Blocks the virtual ranks [v0, v0 + span) stand for.
  uint64_t blocks(int v0, int span) const { return static_cast<uint64_t>(first(v0 + span) - first(v0)); }
};

// How many times reductions read each Input element of `rank` (each read is where the engine
// applies pre(), to the raw input, so every read gives the same rounded value). Once, except in
// recursive doubling's first round, which sends a rank's Input and then combines the partner's
// message with it rather than copying it to Output first; ranks of the fold read it once there.
uint32_t expectedInputReads(const Case& c, int rank) {
  if (c.kind != CollKind::kAllReduce || c.algo != Algo::kRecursiveDoubling) return 1;
  const int p2 = 1 << floorLog2(c.nranks);
  const bool inFold = rank < 2 * (c.nranks - p2);
  return !inFold && p2 > 1 ? 2 : 1;
}

// Elements each rank must send, by the cost stated in each algorithm file (ring AllReduce: the
// sum, checked separately).
uint64_t expectedSent(const Case& c, int rank) {
  const uint64_t n = c.nranks, cnt = c.count;
  const bool root = rank == c.root;
  if (n == 1) return 0;
  if (c.algo == Algo::kRecursiveDoubling && c.kind == CollKind::kAllGather) {
    // Folded: its block once. Survivor: in the round of span m its range of m virtual ranks, and
    // the whole Output to the folded partner if it absorbs one.
    const Fold f(c.nranks);
    if (f.folded(rank)) return cnt;
    uint64_t blocks = f.absorbs(rank) ? n : 0;
    for (int m = 1; m < f.p2; m *= 2) blocks += f.blocks(f.vOf(rank) & ~(m - 1), m);
    return blocks * cnt;
  }
  if (c.algo == Algo::kRecursiveHalving) {
    // Folded: its whole Input. Survivor: in the round of span m the partial sums of the half it
    // gives up (the partner's m virtual ranks), and the folded partner's final block if it absorbs.
    const Fold f(c.nranks);
    if (f.folded(rank)) return n * cnt;
    uint64_t blocks = f.absorbs(rank) ? 1 : 0;
    for (int m = f.p2 / 2; m >= 1; m /= 2) blocks += f.blocks((f.vOf(rank) ^ m) & ~(m - 1), m);
    return blocks * cnt;
  }
  if (c.algo == Algo::kRabenseifner) {
    // Pieces of count/p2 (+1 for the first count%p2) elements per virtual rank. Folded: its
    // Input. Survivor: the given-up half of every halving round, its own range of every doubling
    // round, and the unfold (count) if it absorbs.
    const Fold f(c.nranks);
    if (f.folded(rank)) return cnt;
    const uint64_t base = cnt / f.p2, extra = cnt % f.p2;
    auto start = [&](uint64_t w) { return w * base + std::min(w, extra); };
    auto elems = [&](int w0, int span) { return start(w0 + span) - start(w0); };
    const int v = f.vOf(rank);
    uint64_t sent = f.absorbs(rank) ? cnt : 0;
    for (int m = f.p2 / 2; m >= 1; m /= 2) sent += elems((v ^ m) & ~(m - 1), m);
    for (int m = 1; m < f.p2; m *= 2) sent += elems(v & ~(m - 1), m);
    return sent;
  }
  if (c.algo == Algo::kRecursiveDoubling) {
    const int p2 = 1 << floorLog2(c.nranks), rem = c.nranks - p2;
    if (rank < 2 * rem && rank % 2 == 0) return cnt;                // folded: its Input, once
    return (floorLog2(c.nranks) + (rank < 2 * rem ? 1 : 0)) * cnt;  // rounds (+ the unfold)
  }
  if (c.algo == Algo::kOneShot) return (n - 1) * cnt;  // its Input to every other rank
  if (c.algo == Algo::kOrdered) {
    switch (c.kind) {
      case CollKind::kReduceScatter:  // every block but its own, to its owner
        return (n - 1) * cnt;
      case CollKind::kReduce:  // its Input to the root
        return root ? 0 : cnt;
      case CollKind::kAllReduce: {  // every block but its own, then its own to every other rank
        const uint64_t own = cnt / n + (static_cast<uint64_t>(rank) < cnt % n ? 1 : 0);
        return (cnt - own) + (n - 1) * own;
      }
      default:
        return ~0ull;
    }
  }
  if (c.algo == Algo::kBinomialTree) {
    // Children of v = (rank - root) mod n: v + c for the powers of two c below v's lowest set bit
    // (below n for the root) with v + c < n.
    const int v = (rank - c.root + c.nranks) % c.nranks;
    uint64_t children = 0;
    for (int bit = 1; bit < c.nranks && (v == 0 || (v & bit) == 0); bit <<= 1) children += v + bit < c.nranks ? 1 : 0;
    switch (c.kind) {
      case CollKind::kBroadcast:  // every chunk to every child
        return children * cnt;
      case CollKind::kReduce:  // one partial result of count elements to the parent
        return root ? 0 : cnt;
      case CollKind::kGather:  // its subtree's blocks: min(lowest set bit of v, n - v) of them
        return root ? 0 : std::min<uint64_t>(v & -v, c.nranks - v) * cnt;
      case CollKind::kScatter:  // its subtree's blocks but its own
        return root ? (n - 1) * cnt : (std::min<uint64_t>(v & -v, c.nranks - v) - 1) * cnt;
      default:
        return ~0ull;
    }
  }
  if (c.algo == Algo::kDoubleBinaryTree) {
    // Each half once per edge the rank has in that half's tree: to its parent (up) and to each
    // child (down). The layout follows the pieces tree 0 is cut into.
    const uint64_t half[2] = {(cnt + 1) / 2, cnt / 2};
    const uint64_t piece = dbtPieceElems(half[0], c.chunk, c.nranks);
    const bool above = dbtRootAbove(c.nranks, (half[0] + piece - 1) / piece);
    uint64_t sent = 0;
    for (int t = 0; t < 2; ++t) {
      const DbtNode node = dbtNode(c.nranks, t, rank, above);
      sent += half[t] * (node.numChildren + (node.parent >= 0 ? 1 : 0));
    }
    return sent;
  }
  if (c.algo == Algo::kScatterAllGather) {
    // Pieces by relative rank v: count/n elements, one more for v < count % n. The scatter sends
    // a subtree's pieces but the sender's own (all but piece 0 from the root); the ring sends
    // pieces v, v-1, ..., v-(n-2): every piece but v+1, which the rank receives last.
    const uint64_t v = (rank - c.root + n) % n;
    auto off = [&](uint64_t u) { return u * (cnt / n) + std::min(u, cnt % n); };
    const uint64_t sz = v == 0 ? n : std::min<uint64_t>(v & (~v + 1), n - v);
    const uint64_t scatter = off(v + sz) - off(v + 1);
    const uint64_t notSent = (v + 1) % n;
    return scatter + cnt - (off(notSent + 1) - off(notSent));
  }
  if (c.algo == Algo::kBruck && c.kind == CollKind::kAlltoAll) {
    // Round k (2^k < n) sends the blocks at every index 1 <= i < n with bit k set.
    uint64_t blocks = 0;
    for (int bit = 1; bit < c.nranks; bit <<= 1) {
      for (int i = 1; i < c.nranks; ++i) blocks += (i & bit) != 0 ? 1 : 0;
    }
    return blocks * cnt;
  }
  // The rings, pairwise, and the Bruck all-gather and reduce-scatter (sum over the rounds of
  // min(2^k, n - 2^k) blocks: n-1 of them).
  switch (c.kind) {
    case CollKind::kReduceScatter:
    case CollKind::kAllGather:
    case CollKind::kAlltoAll:
      return (n - 1) * cnt;
    case CollKind::kBroadcast:
      return rank == (c.root + c.nranks - 1) % c.nranks ? 0 : cnt;
    case CollKind::kReduce:
    case CollKind::kGather:
      return root ? 0 : cnt;
    case CollKind::kScatter:
      return root ? (n - 1) * cnt : 0;
    default:
      return 0;
  }
}

// Scratch elements each rank's schedule asks for, as stated in each algorithm file: exact where
// the file gives the number, else the bound it states.
struct ScratchWant {
  uint64_t elems = 0;
  bool exact = true;
};

// The Bruck reduce-scatter's scratch as its file states it: D offsets of a slice's width (D =
// max(m, h), m = n - B, h = B/2, B the largest power of two below n), exact with several slices
// or up to 4 ranks; with one slice at most (h + min(h, m)) * count.
ScratchWant bruckReduceScatterScratch(const Case& c) {
  const int n = c.nranks;
  if (n <= 2) return {};
  const int B = 1 << floorLog2(n - 1), m = n - B, h = B / 2;
  const uint64_t D = std::max(m, h);
  if (c.count > c.chunk) {
    const uint64_t slices = (c.count + c.chunk - 1) / c.chunk;
    return {D * ((c.count + slices - 1) / slices)};
  }
  if (n <= 4) return {D * c.count};
  return {static_cast<uint64_t>(h + std::min(h, m)) * c.count, false};
}

ScratchWant expectedScratch(const Case& c, int rank) {
  if (c.count == 0 || c.nranks == 1) return {};
  const uint64_t n = c.nranks;
  if (c.algo == Algo::kRecursiveHalving) {
    // Absorbing rank: the folded sums of the whole Input. Others with >= 2 rounds: their round-0
    // half (the lower or upper p2/2 virtual ranks).
    const Fold f(c.nranks);
    if (f.absorbs(rank)) return {c.nranks * c.count};
    if (f.folded(rank) || f.rounds < 2) return {};
    const int half = f.p2 / 2;
    return {f.blocks(f.vOf(rank) < half ? 0 : half, half) * c.count};
  }
  if (c.algo == Algo::kBinomialTree && c.kind == CollKind::kReduce) {
    // A non-root rank with two or more children keeps its partial sums in Scratch.
    const int v = (rank - c.root + c.nranks) % c.nranks;
    int children = 0;
    for (int bit = 1; bit < c.nranks && (v == 0 || (v & bit) == 0); bit <<= 1) children += v + bit < c.nranks ? 1 : 0;
    return {v != 0 && children >= 2 ? c.count : 0};
  }
  if (c.algo == Algo::kBinomialTree && (c.kind == CollKind::kGather || c.kind == CollKind::kScatter)) {
    // A subtree's stream (at most half the blocks), or on the root one chunk.
    return {std::max((n + 1) / 2 * c.count, c.chunk), false};
  }
  if (c.algo == Algo::kBruck && c.kind == CollKind::kAlltoAll) return {n / 2 * c.count, false};  // one round's blocks
  if (c.algo == Algo::kBruck && c.kind == CollKind::kAllGather) {
    // The longest piece whose range passes block n-1 (ranges of one block never do).
    return {n <= 3 ? 0 : std::min(c.chunk, n / 2 * c.count), n <= 3};
  }
  if (c.algo == Algo::kBruck && c.kind == CollKind::kReduceScatter) return bruckReduceScatterScratch(c);
  // One slot per rank for a piece of the block a rank folds (ordered Reduce: only the root).
  if (c.algo == Algo::kOneShot) return {n * std::min(c.count, c.chunk)};
  if (c.algo == Algo::kOrdered) {
    if (c.kind == CollKind::kReduce && rank != c.root) return {};
    const uint64_t block = c.kind == CollKind::kAllReduce ? (c.count + n - 1) / n : c.count;
    return {n * std::min(block, c.chunk)};
  }
  return {};
}

// Runs one case; returns "" on success, else what went wrong.
std::string runCase(const Case& c, SimStats* statsOut = nullptr) {
  std::vector<SimActor> actors(c.nranks);
  for (int r = 0; r < c.nranks; ++r) {
    actors[r].rank = r;
    if (buildSchedule(argsFor(c, r), &actors[r].schedule) != Result::kSuccess) return "build failed: " + lastError();
    for (const Step& s : actors[r].schedule.steps) {
      if ((s.count == 0 && !isToken(s)) || ((s.recvPeer >= 0 || s.sendPeer >= 0) && s.count > c.chunk)) {
        return "rank " + std::to_string(r) + ": a step has count 0 or a message above chunkElems";
      }
    }
    const ScratchWant want = expectedScratch(c, r);
    const uint64_t got = actors[r].schedule.scratchElems;
    if (want.exact ? got != want.elems : got > want.elems) {
      return "rank " + std::to_string(r) + ": scratch of " + std::to_string(got) + " elements, want " +
             (want.exact ? "" : "at most ") + std::to_string(want.elems);
    }
    layOut(c, r, &actors[r]);
  }
  SimOptions opt;
  opt.nranks = c.nranks;
  opt.reduction = isReductionKind(c.kind);
  opt.op = c.op;
  opt.fifoDepth = c.depth;
  SimStats stats;
  if (simulate(actors, opt, &stats) != Result::kSuccess) return "simulate: " + lastError();
  if (statsOut != nullptr) *statsOut = stats;

  const bool red = opt.reduction;
  uint64_t totalSent = 0;
  for (int r = 0; r < c.nranks; ++r) {
    const SimActor& a = actors[r];
    totalSent += a.elemsSent;
    for (uint64_t i = 0; i < a.outputElems; ++i) {
      const SimCell& got = a.arena[a.outputOffset + i];
      const int64_t want = expected(c, r, i);
      const int32_t wantContrib = red ? c.nranks : 0;
      const int32_t wantFinal = red ? 1 : 0;
      if (got.value != want || got.contributions != wantContrib || got.finalized != wantFinal) {
        char b[256];
        snprintf(b, sizeof(b),
                 "rank %d Output[%llu] = %lld (contributions %d, finalized %d), want %lld (contributions %d, "
                 "finalized %d)",
                 r, static_cast<unsigned long long>(i), static_cast<long long>(got.value), got.contributions,
                 got.finalized, static_cast<long long>(want), wantContrib, wantFinal);
        return b;
      }
    }
    if (red) {
      for (uint64_t i = 0; i < a.inputElems; ++i) {
        if (a.inputReductionReads[i] != expectedInputReads(c, r)) {
          return "rank " + std::to_string(r) + " Input[" + std::to_string(i) + "] was read by reductions " +
                 std::to_string(a.inputReductionReads[i]) + " times, want " + std::to_string(expectedInputReads(c, r));
        }
      }
    }
    if ((c.kind != CollKind::kAllReduce || c.algo != Algo::kDefault) && a.elemsSent != expectedSent(c, r)) {
      return "rank " + std::to_string(r) + " sent " + std::to_string(a.elemsSent) + " elements, want " +
             std::to_string(expectedSent(c, r));
    }
  }
  if (c.algo == Algo::kDoubleBinaryTree && c.nranks > 1 && totalSent != 2ull * (c.nranks - 1) * c.count) {
    // Every tree edge carries its half once up and once down.
    return "ranks sent " + std::to_string(totalSent) +
           " elements, want 2(n-1)count = " + std::to_string(2ull * (c.nranks - 1) * c.count);
  }
  if (c.kind == CollKind::kAllReduce && c.algo == Algo::kDefault && c.nranks > 1) {
    // Per round every rank sends every segment but one per pass: 2(n-1) * count in total.
    const uint64_t want = 2ull * (c.nranks - 1) * c.count;
    if (totalSent != want) return "ranks sent " + std::to_string(totalSent) + " elements, want " + std::to_string(want);
    for (const SimActor& a : actors) {
      const uint64_t n = c.nranks;
      const uint64_t bound = 2 * ((n - 1) * c.count / n + (c.count + n * c.chunk - 1) / (n * c.chunk));
      if (a.elemsSent > bound) return "a rank sent more than 2(n-1)/n of the buffer";
    }
  }
  return "";
}

std::vector<int> rootsFor(CollKind kind, int n) {
  if (!isRootedKind(kind)) return {0};
  if (n <= 5) {
    std::vector<int> all(n);
    for (int r = 0; r < n; ++r) all[r] = r;
    return all;
  }
  return {0, 1, n / 2, n - 1};
}

// The full matrix for one collective. To keep the suite fast, combinations with very many chunks
// per block or very many cells are skipped, and big ones run with fewer variations; count 100003
// still runs for every collective (up to 16 ranks where the buffers do not grow with nranks).
void runMatrix(CollKind kind, Algo algo = Algo::kDefault) {
  const int kRanks[] = {1, 2, 3, 4, 5, 7, 8, 16};
  const uint64_t kCounts[] = {0, 1, 2, 13, 1000, 100003};
  const uint64_t kChunks[] = {1, 7, 64, 1ull << 20};
  int cases = 0;
  for (int n : kRanks) {
    for (uint64_t count : kCounts) {
      for (uint64_t chunk : kChunks) {
        const uint64_t chunksPerBlock = (count + chunk - 1) / chunk;
        if (chunksPerBlock > 2000) continue;
        const uint64_t scale =
            (kind == CollKind::kAllReduce || kind == CollKind::kBroadcast || kind == CollKind::kReduce) ? 1 : n;
        const uint64_t work = count * scale * n;  // cells moved, roughly
        if (work > 4000000) continue;
        const bool big = work > 500000;
        for (int root : rootsFor(kind, n)) {
          if (big && root != 0 && root != n - 1) continue;
          for (bool inPlace : {false, true}) {
            if (inPlace && !supportsInPlace(kind)) continue;
            for (size_t depth : {size_t{1}, size_t{4}}) {
              if (big && (depth == 4 || chunk < 64)) continue;
              const bool red = isReductionKind(kind);
              for (SimOp op : {SimOp::kSum, SimOp::kMax}) {
                if (op == SimOp::kMax && (!red || depth != 1 || big)) continue;
                Case c{kind, n, count, chunk, root, inPlace, depth, op, algo};
                std::string err = runCase(c);
                ASSERT_EQ(err, "") << c.str();
                ++cases;
              }
            }
          }
        }
      }
    }
  }
  ::testing::Test::RecordProperty("cases", cases);
}

TEST(ScheduleMatrix, AllReduce) { runMatrix(CollKind::kAllReduce); }
TEST(ScheduleMatrix, ReduceScatter) { runMatrix(CollKind::kReduceScatter); }
TEST(ScheduleMatrix, AllGather) { runMatrix(CollKind::kAllGather); }
TEST(ScheduleMatrix, Broadcast) { runMatrix(CollKind::kBroadcast); }
TEST(ScheduleMatrix, Reduce) { runMatrix(CollKind::kReduce); }
TEST(ScheduleMatrix, AlltoAll) { runMatrix(CollKind::kAlltoAll); }
TEST(ScheduleMatrix, Gather) { runMatrix(CollKind::kGather); }
TEST(ScheduleMatrix, Scatter) { runMatrix(CollKind::kScatter); }
TEST(ScheduleMatrix, AllReduceRecursiveDoubling) { runMatrix(CollKind::kAllReduce, Algo::kRecursiveDoubling); }
TEST(ScheduleMatrix, BroadcastBinomialTree) { runMatrix(CollKind::kBroadcast, Algo::kBinomialTree); }
TEST(ScheduleMatrix, ReduceBinomialTree) { runMatrix(CollKind::kReduce, Algo::kBinomialTree); }
TEST(ScheduleMatrix, GatherBinomialTree) { runMatrix(CollKind::kGather, Algo::kBinomialTree); }
TEST(ScheduleMatrix, ScatterBinomialTree) { runMatrix(CollKind::kScatter, Algo::kBinomialTree); }
TEST(ScheduleMatrix, AlltoAllBruck) { runMatrix(CollKind::kAlltoAll, Algo::kBruck); }
TEST(ScheduleMatrix, AllGatherRecursiveDoubling) { runMatrix(CollKind::kAllGather, Algo::kRecursiveDoubling); }
TEST(ScheduleMatrix, AllReduceRabenseifner) { runMatrix(CollKind::kAllReduce, Algo::kRabenseifner); }
TEST(ScheduleMatrix, ReduceScatterRecursiveHalving) { runMatrix(CollKind::kReduceScatter, Algo::kRecursiveHalving); }
TEST(ScheduleMatrix, BroadcastScatterAllGather) { runMatrix(CollKind::kBroadcast, Algo::kScatterAllGather); }
TEST(ScheduleMatrix, AllReduceDoubleBinaryTree) { runMatrix(CollKind::kAllReduce, Algo::kDoubleBinaryTree); }
TEST(ScheduleMatrix, AllReduceOneShot) { runMatrix(CollKind::kAllReduce, Algo::kOneShot); }
TEST(ScheduleMatrix, AllReduceOrdered) { runMatrix(CollKind::kAllReduce, Algo::kOrdered); }
TEST(ScheduleMatrix, ReduceScatterOrdered) { runMatrix(CollKind::kReduceScatter, Algo::kOrdered); }
TEST(ScheduleMatrix, ReduceOrdered) { runMatrix(CollKind::kReduce, Algo::kOrdered); }
TEST(ScheduleMatrix, AllGatherBruck) { runMatrix(CollKind::kAllGather, Algo::kBruck); }
TEST(ScheduleMatrix, ReduceScatterBruck) { runMatrix(CollKind::kReduceScatter, Algo::kBruck); }
TEST(ScheduleMatrix, AllGatherDirect) { runMatrix(CollKind::kAllGather, Algo::kDirect); }
TEST(ScheduleMatrix, AlltoAllDirect) { runMatrix(CollKind::kAlltoAll, Algo::kDirect); }

// The algorithms that fold in rank order (one-shot, ordered) at every rank count from 1 to 33,
// counts below, at and above the rank count, several chunkings, in and out of place, FIFO depth
// 1, sum and max, every Reduce root up to 9 ranks.
TEST(ScheduleMatrix, OrderedAlgorithmsAtEveryRankCount) {
  const std::pair<CollKind, Algo> kAlgos[] = {
      {CollKind::kAllReduce, Algo::kOneShot},
      {CollKind::kAllReduce, Algo::kOrdered},
      {CollKind::kReduceScatter, Algo::kOrdered},
      {CollKind::kReduce, Algo::kOrdered},
  };
  for (int n = 1; n <= 33; ++n) {
    for (const auto& [kind, algo] : kAlgos) {
      std::vector<int> roots{0};
      if (kind == CollKind::kReduce) roots = n <= 9 ? std::vector<int>{} : std::vector<int>{0, n / 2, n - 1};
      for (int r = 0; kind == CollKind::kReduce && n <= 9 && r < n; ++r) roots.push_back(r);
      for (uint64_t count : std::vector<uint64_t>{1, 3, static_cast<uint64_t>(n), 37}) {
        for (uint64_t chunk : {1ull, 4ull, 64ull}) {
          for (int root : roots) {
            for (bool inPlace : {false, true}) {
              for (SimOp op : {SimOp::kSum, SimOp::kMax}) {
                Case c{kind, n, count, chunk, root, inPlace, 1, op, algo};
                ASSERT_EQ(runCase(c), "") << c.str();
              }
            }
          }
        }
      }
    }
  }
}

// Critical paths of the ordered forms with one piece. The simulator charges a hop per send, and
// a rank of one-shot sends p-1 messages in a row (they travel at once on shared memory; the hop
// count is the model's, a latency of one message plus p-1 sends), then waits for the last of
// its p-1 messages; the ordered all-reduce does that twice (its reduction, then its gather).
TEST(ScheduleMatrix, OrderedAlgorithmsHops) {
  for (int n = 2; n <= 33; ++n) {
    const uint64_t p = n;
    SimStats st;
    Case one{CollKind::kAllReduce, n, 1, 64, 0, false, 1, SimOp::kSum, Algo::kOneShot};
    ASSERT_EQ(runCase(one, &st), "") << one.str();
    EXPECT_EQ(st.criticalHops, p - 1) << one.str();
    Case rs{CollKind::kReduceScatter, n, 1, 64, 0, false, 1, SimOp::kSum, Algo::kOrdered};
    ASSERT_EQ(runCase(rs, &st), "") << rs.str();
    EXPECT_EQ(st.criticalHops, p - 1) << rs.str();
    Case ar{CollKind::kAllReduce, n, p, 64, 0, false, 1, SimOp::kSum, Algo::kOrdered};
    ASSERT_EQ(runCase(ar, &st), "") << ar.str();
    EXPECT_EQ(st.criticalHops, 2 * (p - 1)) << ar.str();
  }
}

// Every rank count from 1 to 33 (powers of two, one above and one below them), both new
// algorithms, a few counts and chunkings, FIFO depth 1.
TEST(ScheduleMatrix, LogarithmicAlgorithmsAtEveryRankCount) {
  for (int n = 1; n <= 33; ++n) {
    for (uint64_t count : {1ull, 5ull, 37ull}) {
      for (uint64_t chunk : {1ull, 4ull, 64ull}) {
        for (bool inPlace : {false, true}) {
          Case rd{CollKind::kAllReduce, n, count, chunk, 0, inPlace, 1, SimOp::kSum, Algo::kRecursiveDoubling};
          ASSERT_EQ(runCase(rd), "") << rd.str();
          for (int root : {0, n / 2, n - 1}) {
            Case bt{CollKind::kBroadcast, n, count, chunk, root, inPlace, 1, SimOp::kSum, Algo::kBinomialTree};
            ASSERT_EQ(runCase(bt), "") << bt.str();
          }
        }
      }
    }
  }
}

// The tree algorithms of issue 10 at every rank count from 1 to 33, every root up to 9 ranks
// (then five of them), a few counts (below, at and above the rank count) and chunkings, in and
// out of place, FIFO depth 1, sum and max for the reductions.
TEST(ScheduleMatrix, TreeAlgorithmsAtEveryRankCount) {
  const std::pair<CollKind, Algo> kAlgos[] = {
      {CollKind::kReduce, Algo::kBinomialTree},        {CollKind::kGather, Algo::kBinomialTree},
      {CollKind::kScatter, Algo::kBinomialTree},       {CollKind::kAlltoAll, Algo::kBruck},
      {CollKind::kBroadcast, Algo::kScatterAllGather},
  };
  for (const auto& [kind, algo] : kAlgos) {
    for (int n = 1; n <= 33; ++n) {
      std::vector<int> roots{0};
      if (isRootedKind(kind) && n <= 9) {
        roots.clear();
        for (int r = 0; r < n; ++r) roots.push_back(r);
      } else if (isRootedKind(kind)) {
        roots = {0, 1, n / 2, n - 2, n - 1};
      }
      for (uint64_t count : std::vector<uint64_t>{1, 3, static_cast<uint64_t>(n), 37}) {
        for (uint64_t chunk : {1ull, 4ull, 64ull}) {
          for (int root : roots) {
            for (bool inPlace : {false, true}) {
              if (inPlace && !supportsInPlace(kind)) continue;
              for (SimOp op : {SimOp::kSum, SimOp::kMax}) {
                if (op == SimOp::kMax && !isReductionKind(kind)) continue;
                Case c{kind, n, count, chunk, root, inPlace, 1, op, algo};
                ASSERT_EQ(runCase(c), "") << c.str();
              }
            }
          }
        }
      }
    }
  }
}

// The critical path of a one-element collective, in messages (SimStats::criticalHops):
// logarithmic in the rank count for the tree forms (recursive doubling: log2 p rounds, +2 for the
// fold and unfold of a non-power of two; binomial: ceil(log2 p), at most +1 for the root's
// closing token), linear for the rings (all-reduce 2(p-1); chain p-1, +1 for the token).
TEST(ScheduleMatrix, LogarithmicAlgorithmsTakeLogarithmicHops) {
  for (int n : {2, 3, 8, 13, 16, 32}) {
    SimStats ring, rd, chain, tree;
    const uint64_t lg = floorLog2(n), clg = lg + ((1 << lg) < n ? 1 : 0);
    const bool pow2 = (1 << lg) == n;
    const uint64_t p = n;
    ASSERT_EQ(runCase(Case{CollKind::kAllReduce, n, 1, 64, 0, false, 4, SimOp::kSum}, &ring), "");
    ASSERT_EQ(runCase(Case{CollKind::kAllReduce, n, 1, 64, 0, false, 4, SimOp::kSum, Algo::kRecursiveDoubling}, &rd),
              "");
    ASSERT_EQ(runCase(Case{CollKind::kBroadcast, n, 1, 64, 0, false, 4, SimOp::kSum}, &chain), "");
    ASSERT_EQ(runCase(Case{CollKind::kBroadcast, n, 1, 64, 0, false, 4, SimOp::kSum, Algo::kBinomialTree}, &tree), "");
    EXPECT_EQ(rd.criticalHops, lg + (pow2 ? 0 : 2)) << "recursive doubling, " << n << " ranks";
    EXPECT_GE(tree.criticalHops, clg) << "binomial tree, " << n << " ranks";
    EXPECT_LE(tree.criticalHops, clg + 1) << "binomial tree, " << n << " ranks";
    EXPECT_EQ(ring.criticalHops, 2 * (p - 1)) << "ring all-reduce, " << n << " ranks";
    EXPECT_EQ(chain.criticalHops, p) << "ring broadcast, " << n << " ranks";
  }
}

// Exact critical paths (SimStats::criticalHops) of the tree algorithms of issue 10, n = 2..64,
// with one chunk per message. The simulator lets a rank's receives from different peers overlap
// and charges one hop per send, so a tree that gathers towards the root takes its depth,
// max{popcount(v) : v < n} = floor(log2 n) hops.
TEST(ScheduleMatrix, TreeAlgorithmsTakeLogarithmicHops) {
  for (int n = 2; n <= 64; ++n) {
    const uint64_t lg = floorLog2(n), clg = lg + ((1 << lg) < n ? 1 : 0);
    for (int root : {0, n / 2, n - 1}) {
      SimStats st;
      Case reduce{CollKind::kReduce, n, 1, 64, root, false, 1, SimOp::kSum, Algo::kBinomialTree};
      ASSERT_EQ(runCase(reduce, &st), "") << reduce.str();
      EXPECT_EQ(st.criticalHops, lg) << reduce.str();
      // Gather: every subtree (at most n/2 blocks) fits one message, so again the depth; the
      // message that straddles the root's wrap is split by the root, not on the wire.
      Case gather{CollKind::kGather, n, 1, 64, root, false, 1, SimOp::kSum, Algo::kBinomialTree};
      ASSERT_EQ(runCase(gather, &st), "") << gather.str();
      EXPECT_EQ(st.criticalHops, lg) << gather.str();
      // Scatter: the root's ceil(log2 n) sends in a row, or the closing token behind rank n-1's
      // block, which takes popcount(n-1) hops (always its parent's first send), whichever is later.
      Case scatter{CollKind::kScatter, n, 1, 64, root, false, 1, SimOp::kSum, Algo::kBinomialTree};
      ASSERT_EQ(runCase(scatter, &st), "") << scatter.str();
      EXPECT_EQ(st.criticalHops, std::max<uint64_t>(clg, __builtin_popcount(n - 1) + 1)) << scatter.str();
    }
    // Bruck all-to-all: one message per round (at most n/2 blocks of one element), ceil(log2 n)
    // rounds.
    SimStats st;
    Case bruck{CollKind::kAlltoAll, n, 1, 64, 0, false, 1, SimOp::kSum, Algo::kBruck};
    ASSERT_EQ(runCase(bruck, &st), "") << bruck.str();
    EXPECT_EQ(st.criticalHops, clg) << bruck.str();
    // Scatter-allgather broadcast, one element per piece: the scatter's ceil(log2 n) hops (the
    // binomial broadcast's, with one message per tree edge), then the ring's n-1 steps. It is
    // the bandwidth form; its latency is linear.
    for (int root : {0, n / 2, n - 1}) {
      Case sag{CollKind::kBroadcast,   n, static_cast<uint64_t>(n), 64, root, false, 1, SimOp::kSum,
               Algo::kScatterAllGather};
      ASSERT_EQ(runCase(sag, &st), "") << sag.str();
      EXPECT_EQ(st.criticalHops, clg + n - 1) << sag.str();
    }
  }
}

// The halving/doubling family at every rank count from 1 to 33 (every fold pattern), counts
// below and above the rank count, several chunkings, FIFO depth 1, in and out of place.
TEST(ScheduleMatrix, HalvingDoublingAtEveryRankCount) {
  const std::pair<CollKind, Algo> kAlgos[] = {
      {CollKind::kAllGather, Algo::kRecursiveDoubling},
      {CollKind::kReduceScatter, Algo::kRecursiveHalving},
      {CollKind::kAllReduce, Algo::kRabenseifner},
  };
  for (int n = 1; n <= 33; ++n) {
    for (uint64_t count : {1ull, 5ull, 37ull}) {
      for (uint64_t chunk : {1ull, 4ull, 64ull}) {
        for (bool inPlace : {false, true}) {
          for (const auto& [kind, algo] : kAlgos) {
            Case c{kind, n, count, chunk, 0, inPlace, 1, SimOp::kSum, algo};
            ASSERT_EQ(runCase(c), "") << c.str();
          }
        }
      }
    }
  }
}

// Exact critical paths of one-element collectives (every range then fits one message), 2..64
// ranks: log2(p2) rounds, plus the fold and the unfold (one hop each) when p is not a power of two.
TEST(ScheduleMatrix, HalvingDoublingTakeLogarithmicHops) {
  for (int n = 2; n <= 64; ++n) {
    const Fold f(n);
    const uint64_t foldHops = f.rem > 0 ? 2 : 0;
    SimStats ag;
    ASSERT_EQ(runCase(Case{CollKind::kAllGather, n, 1, 64, 0, false, 1, SimOp::kSum, Algo::kRecursiveDoubling}, &ag),
              "");
    EXPECT_EQ(ag.criticalHops, f.rounds + foldHops) << "recursive-doubling all-gather, " << n << " ranks";
    SimStats rs;
    ASSERT_EQ(runCase(Case{CollKind::kReduceScatter, n, 1, 64, 0, false, 1, SimOp::kSum, Algo::kRecursiveHalving}, &rs),
              "");
    EXPECT_EQ(rs.criticalHops, f.rounds + foldHops) << "recursive-halving reduce-scatter, " << n << " ranks";
    // Rabenseifner: a halving and a doubling round per level. With n elements every piece is
    // non-empty and every rank sends in every round: 2 log2(p2) + fold + unfold. With one element
    // only piece 0 exists: the halving rounds are a binomial reduction to v = 0 in which every
    // rank sends once, so the fold overlaps them (the one chain of log2(p2) hops starts at
    // v = p2-1, which never absorbs), and the doubling rounds end at 2 log2(p2): +1 for the unfold.
    for (uint64_t count : {uint64_t{1}, static_cast<uint64_t>(n)}) {
      SimStats ra;
      ASSERT_EQ(runCase(Case{CollKind::kAllReduce, n, count, 64, 0, false, 1, SimOp::kSum, Algo::kRabenseifner}, &ra),
                "");
      const uint64_t want = 2 * f.rounds + (count == 1 ? foldHops / 2 : foldHops);
      EXPECT_EQ(ra.criticalHops, want) << "rabenseifner, " << n << " ranks, count " << count;
    }
  }
}

// The Bruck all-gather and reduce-scatter at every rank count from 1 to 33 (every pattern of
// wrapping ranges, first-round sizes and staged pieces): counts below, at and above the rank
// count and above the chunk (several slices of the reduce-scatter, even and uneven), chunks that
// cut ranges into one or many pieces, in and out of place, sum and max, FIFO depths 1 and 4.
TEST(ScheduleMatrix, BruckGatherScatterAtEveryRankCount) {
  for (int n = 1; n <= 33; ++n) {
    for (uint64_t count : std::vector<uint64_t>{1, 2, 3, static_cast<uint64_t>(n), 37}) {
      for (uint64_t chunk : {1ull, 2ull, 4ull, 7ull, 64ull, 1ull << 20}) {
        for (bool inPlace : {false, true}) {
          for (size_t depth : {size_t{1}, size_t{4}}) {
            for (CollKind kind : {CollKind::kAllGather, CollKind::kReduceScatter}) {
              for (SimOp op : {SimOp::kSum, SimOp::kMax}) {
                if (op == SimOp::kMax && (kind == CollKind::kAllGather || depth != 1)) continue;
                Case c{kind, n, count, chunk, 0, inPlace, depth, op, Algo::kBruck};
                ASSERT_EQ(runCase(c), "") << c.str();
              }
            }
          }
        }
      }
    }
  }
}

// Exact critical paths of the Bruck all-gather and reduce-scatter, 2..64 ranks, one element per
// rank: every round's range (at most 32 blocks) fits one 64-element message, wrapping ranges
// included (they are staged, not split), so ceil(log2 n) hops for every n - recursive doubling
// and halving take two more whenever n is not a power of two. With 3 elements per rank and
// 16-element chunks the larger rounds take several messages in a row.
TEST(ScheduleMatrix, BruckGatherScatterTakeCeilLog2Hops) {
  for (int n = 2; n <= 64; ++n) {
    const uint64_t clg = floorLog2(n) + ((1 << floorLog2(n)) < n ? 1 : 0);
    for (CollKind kind : {CollKind::kAllGather, CollKind::kReduceScatter}) {
      SimStats st;
      Case one{kind, n, 1, 64, 0, false, 1, SimOp::kSum, Algo::kBruck};
      ASSERT_EQ(runCase(one, &st), "") << one.str();
      EXPECT_EQ(st.criticalHops, clg) << one.str();
      // Every message of every round is sent in a row by the same rank: hops = messages per rank.
      Case three{kind, n, 3, 16, 0, false, 1, SimOp::kSum, Algo::kBruck};
      ASSERT_EQ(runCase(three, &st), "") << three.str();
      uint64_t perRank = 0;
      for (int bit = 1; bit < n; bit <<= 1) perRank += (3 * std::min(bit, n - bit) + 15) / 16;
      EXPECT_EQ(st.criticalHops, perRank) << three.str();
      EXPECT_EQ(st.messages, perRank * n) << three.str();
    }
  }
}

// The Bruck reduce-scatter's scratch never exceeds 2n/3 blocks (1 slice) or floor(n/2) slices of
// at most a chunk (several), and its one-slice bound is at most n/2 blocks for powers of two,
// (n+1)/2 for 2^j + 1 ranks, as the file states; never more than recursive halving's n blocks.
TEST(ScheduleMatrix, BruckReduceScatterScratchIsBounded) {
  for (int n = 2; n <= 130; ++n) {
    for (uint64_t count : {1ull, 5ull, 64ull, 100ull}) {
      for (uint64_t chunk : {7ull, 64ull, 1ull << 20}) {
        CollArgs a;
        a.kind = CollKind::kReduceScatter;
        a.algo = Algo::kBruck;
        a.nranks = n;
        a.count = count;
        a.chunkElems = chunk;
        const Case c{a.kind, n, count, chunk, 0, false, 1, SimOp::kSum, Algo::kBruck};
        const ScratchWant want = bruckReduceScatterScratch(c);
        for (int r = 0; r < n; ++r) {
          a.rank = r;
          Schedule s;
          ASSERT_EQ(buildSchedule(a, &s), Result::kSuccess);
          const std::string at = c.str() + " rank " + std::to_string(r);
          if (want.exact) {
            EXPECT_EQ(s.scratchElems, want.elems) << at;
          } else {
            EXPECT_LE(s.scratchElems, want.elems) << at;
          }
          if (count > chunk) {
            EXPECT_LE(s.scratchElems, static_cast<uint64_t>(n / 2) * chunk) << at;
          } else {
            EXPECT_LE(3 * s.scratchElems, 2 * static_cast<uint64_t>(n) * count) << at;
            if ((n & (n - 1)) == 0) {
              EXPECT_LE(s.scratchElems, static_cast<uint64_t>(n / 2) * count) << at;
            }
            if (((n - 1) & (n - 2)) == 0) {
              EXPECT_LE(s.scratchElems, static_cast<uint64_t>((n + 1) / 2) * count) << at;
            }
          }
        }
      }
    }
  }
}

// The double binary tree at every rank count from 1 to 33 (every mirror and shift pattern),
// counts of one and two elements (one tree or both carry one), odd ones, and enough pieces for
// the layout with the root above the core; in and out of place, sum and max, FIFO depth 1.
TEST(ScheduleMatrix, DoubleBinaryTreeAtEveryRankCount) {
  for (int n = 1; n <= 33; ++n) {
    for (uint64_t count : std::vector<uint64_t>{1, 2, 5, static_cast<uint64_t>(2 * n + 1), 37, 200}) {
      for (uint64_t chunk : {1ull, 4ull, 64ull}) {
        for (bool inPlace : {false, true}) {
          for (SimOp op : {SimOp::kSum, SimOp::kMax}) {
            Case c{CollKind::kAllReduce, n, count, chunk, 0, inPlace, 1, op, Algo::kDoubleBinaryTree};
            ASSERT_EQ(runCase(c), "") << c.str();
          }
        }
      }
    }
  }
}

// The two trees: each is a tree over all ranks (one root, parents and children agree, depth one
// below the parent), tree 1 is tree 0 mirrored (even n) or shifted by one rank (odd n), no rank
// is interior in both, interior nodes of the core have two children, and the depth stays within
// the shape's bound (one more with the root above the core).
TEST(ScheduleShape, DoubleBinaryTreesAreTwoTreesWithDisjointInteriors) {
  for (int n = 2; n <= 300; ++n) {
    const DbtShape shape = dbtShape(n);
    for (bool above : {false, true}) {
      std::vector<DbtNode> nodes[2];
      for (int t = 0; t < 2; ++t) {
        for (int r = 0; r < n; ++r) nodes[t].push_back(dbtNode(n, t, r, above));
        int roots = 0;
        for (int r = 0; r < n; ++r) {
          const DbtNode& x = nodes[t][r];
          const std::string at = "n=" + std::to_string(n) + " tree " + std::to_string(t) + " rank " +
                                 std::to_string(r) + (above ? " above" : " below");
          if (x.parent < 0) {
            ++roots;
            EXPECT_EQ(x.depth, 0) << at;
          } else {
            const DbtNode& p = nodes[t][x.parent];
            EXPECT_EQ(x.depth, p.depth + 1) << at;
            EXPECT_TRUE(std::count(p.children, p.children + p.numChildren, r) == 1) << at;
          }
          for (int i = 0; i < x.numChildren; ++i) EXPECT_EQ(nodes[t][x.children[i]].parent, r) << at;
          EXPECT_LE(x.depth, std::max(shape.depth, 1) + (above && n >= 4 ? 1 : 0)) << at;
          EXPECT_TRUE(x.numChildren == 0 || x.numChildren == 2 || x.parent < 0) << at;
          // Tree 1 is tree 0 relabelled: mirror for even n, shift by one for odd n.
          auto map = [&](int q) { return n % 2 == 0 ? n - 1 - q : (q + 1) % n; };
          if (t == 1) {
            const DbtNode& y = nodes[0][n % 2 == 0 ? n - 1 - r : (r + n - 1) % n];
            EXPECT_EQ(x.parent, y.parent < 0 ? -1 : map(y.parent)) << at;
            ASSERT_EQ(x.numChildren, y.numChildren) << at;
            for (int i = 0; i < x.numChildren; ++i) EXPECT_EQ(x.children[i], map(y.children[i])) << at;
          }
        }
        EXPECT_EQ(roots, 1) << n;
      }
      for (int r = 0; r < n; ++r) {
        EXPECT_FALSE(nodes[0][r].numChildren > 0 && nodes[1][r].numChildren > 0)
            << "rank " << r << " of " << n << " is interior in both trees";
      }
    }
  }
}

// The least depth + broadcast hops of a full binary tree over `leaves` leaves when a node sends
// to one child per hop (first child one hop after it, second two): restated from the file.
int leastTreeHops(int leaves) {
  std::vector<std::vector<uint64_t>> most(64, std::vector<uint64_t>(64, 1));  // most leaves
  for (int d = 1; d < 64; ++d) {
    for (int b = 2; b < 64; ++b) most[d][b] = most[d - 1][b - 1] + most[d - 1][b - 2];
  }
  for (int total = 0;; ++total) {
    for (int d = 0; d <= total; ++d) {
      if (most[d][total - d] >= static_cast<uint64_t>(leaves)) return total;
    }
  }
}

// Exact critical paths of the double binary tree with one element per tree (count 2), n = 2..64:
// the least up-and-down hop count any binary tree over floor(n/2) leaves has when a node sends to
// one child per hop, a few more below 8 ranks (the extra ranks' own sends), and never above
// 2 log2(n) + 4. With K pieces per tree the pipeline adds at most 4 hops per piece (the root
// above the core; 5 below it for odd n, the core's root then serving four children).
TEST(ScheduleMatrix, DoubleBinaryTreeTakesLogarithmicHops) {
  const uint64_t kFewRanks[] = {0, 0, 2, 4, 5, 6, 5, 6};
  for (int n = 2; n <= 64; ++n) {
    const uint64_t best = leastTreeHops(n / 2);
    const DbtShape shape = dbtShape(n);
    EXPECT_EQ(static_cast<uint64_t>(shape.depth + shape.broadcastHops), best) << n;
    SimStats st;
    Case one{CollKind::kAllReduce, n, 2, 64, 0, false, 1, SimOp::kSum, Algo::kDoubleBinaryTree};
    ASSERT_EQ(runCase(one, &st), "") << one.str();
    const uint64_t onePiece = n < 8 ? kFewRanks[n] : best;
    EXPECT_EQ(st.criticalHops, onePiece) << one.str();
    EXPECT_LE(st.criticalHops, 2 * static_cast<uint64_t>(floorLog2(n)) + 4) << one.str();
    for (uint64_t pieces : {4ull, 64ull}) {
      Case many{CollKind::kAllReduce, n, 2 * pieces, 1, 0, false, 1, SimOp::kSum, Algo::kDoubleBinaryTree};
      ASSERT_EQ(runCase(many, &st), "") << many.str();
      const bool above = dbtRootAbove(n, pieces);
      const uint64_t perPiece = above || n % 2 == 0 || n == 3 ? 4 : 5;
      EXPECT_LE(st.criticalHops, (above ? best + 2 : onePiece) + perPiece * (pieces - 1)) << many.str();
      EXPECT_GE(st.criticalHops, (n <= 3 ? n : 4) * (pieces - 1)) << many.str();  // the busiest rank's sends
    }
  }
}

// The acceptance bound at scale: an 8-byte all-reduce (two floats, one per tree) over 1,024 ranks
// takes at most 2 log2(1024) + 4 = 24 critical-path hops; the timing simulator counts them as
// sim.h does and handles the rank count quickly.
TEST(ScheduleMatrix, DoubleBinaryTreeAt1024RanksTakes24Hops) {
  CollArgs a;
  a.kind = CollKind::kAllReduce;
  a.algo = Algo::kDoubleBinaryTree;
  a.count = 2;
  a.chunkElems = (512 << 10) / 4;
  TimingOptions o;
  o.nranks = 1024;
  o.intra = LinkModel{1e-6, 1e-9, 1e-10};
  o.fifoDepth = 1;
  TimingStats t;
  ASSERT_EQ(simulateCollectiveTiming(a, o, &t), Result::kSuccess) << lastError();
  EXPECT_LE(t.criticalHops, 2u * 10 + 4);
  EXPECT_EQ(t.criticalHops, static_cast<uint64_t>(leastTreeHops(512)));
  EXPECT_EQ(t.messages, 2u * 2 * 1023);  // each half up and down every edge of its tree
}

TEST(ScheduleAlgo, AnAlgorithmWithoutTheCollectiveIsRefused) {
  CollArgs a;
  a.nranks = 4;
  a.count = 10;
  a.chunkElems = 4;
  for (int k = 0; k <= static_cast<int>(CollKind::kRecv); ++k) {
    a.kind = static_cast<CollKind>(k);
    for (int g = 0; g < kNumAlgos; ++g) {
      a.algo = static_cast<Algo>(g);
      Schedule s;
      const Result r = buildSchedule(a, &s);
      if (algoSupports(a.algo, a.kind)) {
        EXPECT_EQ(r, Result::kSuccess) << collName(a.kind) << " / " << algoName(a.algo) << ": " << lastError();
      } else {
        EXPECT_EQ(r, Result::kInvalidArgument) << collName(a.kind) << " / " << algoName(a.algo);
        EXPECT_NE(lastError().find(algoName(a.algo)), std::string::npos) << lastError();
      }
    }
  }
  a.kind = CollKind::kAllReduce;
  a.algo = static_cast<Algo>(kNumAlgos);
  Schedule s;
  EXPECT_EQ(buildSchedule(a, &s), Result::kInvalidArgument);
}

// All-reduce rounds with fewer elements than ranks skip the chains of empty segments; check
// every segment pattern (every remainder) at FIFO depth 1 (anchored ring order) and 2 (plain
// order), in and out of place.
TEST(ScheduleMatrix, AllReduceEverySegmentPattern) {
  for (int n = 2; n <= 16; ++n) {
    for (uint64_t chunk : {1ull, 2ull, 3ull}) {
      for (uint64_t count = 1; count <= 3 * n * chunk + 1; ++count) {
        for (bool inPlace : {false, true}) {
          for (size_t depth : {size_t{1}, size_t{2}}) {  // anchored and plain ring orders
            Case c{CollKind::kAllReduce, n, count, chunk, 0, inPlace, depth, SimOp::kSum};
            ASSERT_EQ(runCase(c), "") << c.str();
          }
        }
      }
    }
  }
}

// Every rank sends to rank+k and receives from rank-k (k = 0 is a send to self, matched by a
// separate receive actor of the same rank, as the engine runs p2p in separate streams).
TEST(ScheduleP2p, SendRecvPairs) {
  for (int n : {1, 2, 3, 5, 8}) {
    for (uint64_t count : {0ull, 1ull, 13ull, 1000ull}) {
      for (uint64_t chunk : {1ull, 7ull, 64ull}) {
        for (int k = 0; k < n; ++k) {
          for (size_t depth : {size_t{1}, size_t{3}}) {
            std::vector<SimActor> actors;
            for (int r = 0; r < n; ++r) {
              CollArgs a;
              a.nranks = n;
              a.rank = r;
              a.count = count;
              a.chunkElems = chunk;
              for (CollKind kind : {CollKind::kSend, CollKind::kRecv}) {
                a.kind = kind;
                a.root = kind == CollKind::kSend ? (r + k) % n : (r - k + n) % n;
                SimActor act;
                act.rank = r;
                ASSERT_EQ(buildSchedule(a, &act.schedule), Result::kSuccess);
                act.inputElems = inputElems(a);
                act.outputElems = outputElems(a);
                act.outputOffset = act.inputElems;
                act.arena.assign(act.inputElems + act.outputElems, SimCell{kSentinel, 0, 0});
                for (uint64_t i = 0; i < act.inputElems; ++i) act.arena[i].value = inputValue(r, i);
                actors.push_back(std::move(act));
              }
            }
            SimOptions opt;
            opt.nranks = n;
            opt.fifoDepth = depth;
            ASSERT_EQ(simulate(actors, opt), Result::kSuccess) << lastError();
            for (const SimActor& act : actors) {
              const int from = (act.rank - k + n) % n;
              for (uint64_t i = 0; i < act.outputElems; ++i) {
                ASSERT_EQ(act.arena[act.outputOffset + i].value, inputValue(from, i))
                    << "n=" << n << " k=" << k << " count=" << count << " rank=" << act.rank;
              }
            }
          }
        }
      }
    }
  }
}

TEST(ScheduleArgs, InvalidArgumentsAreRejected) {
  Schedule s;
  CollArgs a;
  a.count = 10;
  a.nranks = 4;
  a.chunkElems = 4;
  auto expectInvalid = [&](CollArgs x, const char* what) {
    EXPECT_EQ(buildSchedule(x, &s), Result::kInvalidArgument) << what;
    EXPECT_FALSE(lastError().empty()) << what;
    clearLastError();
  };
  CollArgs x = a;
  x.nranks = 0;
  x.rank = 0;
  expectInvalid(x, "nranks 0");
  x = a;
  x.rank = -1;
  expectInvalid(x, "negative rank");
  x = a;
  x.rank = 4;
  expectInvalid(x, "rank == nranks");
  x = a;
  x.chunkElems = 0;
  expectInvalid(x, "chunkElems 0");
  for (CollKind k : {CollKind::kBroadcast, CollKind::kReduce, CollKind::kGather, CollKind::kScatter, CollKind::kSend,
                     CollKind::kRecv}) {
    x = a;
    x.kind = k;
    x.root = 4;
    expectInvalid(x, collName(k));
    x.root = -1;
    expectInvalid(x, collName(k));
  }
  x = a;
  x.kind = CollKind::kAllGather;
  x.count = UINT64_MAX / 2;
  expectInvalid(x, "count * nranks overflows");
  x = a;
  x.kind = static_cast<CollKind>(42);
  expectInvalid(x, "unknown kind");
  EXPECT_EQ(buildSchedule(a, nullptr), Result::kInternalError);

  // Roots are ignored where NCCL has none; count 0 is an empty schedule.
  x = a;
  x.root = 99;
  EXPECT_EQ(buildSchedule(x, &s), Result::kSuccess);
  x.count = 0;
  ASSERT_EQ(buildSchedule(x, &s), Result::kSuccess);
  EXPECT_TRUE(s.steps.empty());
}

TEST(ScheduleArgs, BufferSizesFollowNccl) {
  CollArgs a;
  a.nranks = 4;
  a.rank = 1;
  a.root = 2;
  a.count = 10;
  auto sizes = [&](CollKind k) {
    a.kind = k;
    return std::make_pair(inputElems(a), outputElems(a));
  };
  using P = std::pair<uint64_t, uint64_t>;
  EXPECT_EQ(sizes(CollKind::kAllReduce), P(10, 10));
  EXPECT_EQ(sizes(CollKind::kBroadcast), P(0, 10));
  EXPECT_EQ(sizes(CollKind::kReduce), P(10, 0));
  EXPECT_EQ(sizes(CollKind::kAllGather), P(10, 40));
  EXPECT_EQ(sizes(CollKind::kReduceScatter), P(40, 10));
  EXPECT_EQ(sizes(CollKind::kAlltoAll), P(40, 40));
  EXPECT_EQ(sizes(CollKind::kGather), P(10, 0));
  EXPECT_EQ(sizes(CollKind::kScatter), P(0, 10));
  EXPECT_EQ(sizes(CollKind::kSend), P(10, 0));
  EXPECT_EQ(sizes(CollKind::kRecv), P(0, 10));
  a.rank = 2;
  EXPECT_EQ(sizes(CollKind::kBroadcast), P(10, 10));
  EXPECT_EQ(sizes(CollKind::kReduce), P(10, 10));
  EXPECT_EQ(sizes(CollKind::kGather), P(10, 40));
  EXPECT_EQ(sizes(CollKind::kScatter), P(40, 10));
}

// Single-rank collectives are one local step; the reductions finalize it.
TEST(ScheduleShape, SingleRankIsOneLocalStep) {
  for (CollKind k : {CollKind::kAllReduce, CollKind::kReduceScatter, CollKind::kReduce, CollKind::kAllGather,
                     CollKind::kBroadcast}) {
    CollArgs a;
    a.kind = k;
    a.count = 1000;
    a.chunkElems = 7;
    Schedule s;
    ASSERT_EQ(buildSchedule(a, &s), Result::kSuccess);
    ASSERT_EQ(s.steps.size(), 1u) << collName(k);
    const Step& st = s.steps[0];
    EXPECT_EQ(st.recvPeer, -1);
    EXPECT_EQ(st.sendPeer, -1);
    EXPECT_EQ(st.src, Buf::kInput);
    EXPECT_EQ(st.dst, Buf::kOutput);
    EXPECT_EQ(st.count, 1000u);
    EXPECT_EQ(st.finalize, isReductionKind(k));
  }
}

// In the plain order a round's pure send goes before the previous round's receive-only terminal
// (ring_pass.h, RoundHoist), so a rank on a device queue has the next copy queued while it waits
// for that message. All-reduce at 2 ranks, 3 rounds: S B | S R B | S R B R (B receives and sends).
TEST(ScheduleShape, RingSendsTheNextRoundBeforeTheLastReceive) {
  auto shapeOf = [](CollKind k, int n, int rank, uint32_t depth) {
    CollArgs a;
    a.kind = k;
    a.nranks = n;
    a.rank = rank;
    a.count = static_cast<uint64_t>(n) * 8 * 3;  // 3 rounds of all-reduce, more of the others
    a.chunkElems = 8;
    a.fifoDepth = depth;
    a.algo = Algo::kRing;
    Schedule s;
    EXPECT_EQ(buildSchedule(a, &s), Result::kSuccess);
    std::string shape;
    for (const Step& st : s.steps) shape += st.recvPeer >= 0 ? (st.sendPeer >= 0 ? "B" : "R") : "S";
    return shape;
  };
  for (int rank : {0, 1}) {
    EXPECT_EQ(shapeOf(CollKind::kAllReduce, 2, rank, 2), "SBSRBSRBR") << "rank " << rank;
    // Six rounds of a send and a receive: each send one step earlier.
    EXPECT_EQ(shapeOf(CollKind::kReduceScatter, 2, rank, 2), "SSRSRSRSRSRR") << "rank " << rank;
    EXPECT_EQ(shapeOf(CollKind::kAllGather, 2, rank, 2), "SSRSRSRSRSRR") << "rank " << rank;
    // The anchored order (depth 1) keeps its proven order.
    EXPECT_EQ(shapeOf(CollKind::kReduceScatter, 2, rank, 1), rank == 0 ? "RSRSRSRSRSRS" : "SRSRSRSRSRSR")
        << "rank " << rank;
  }
  // 3 ranks, all-reduce rounds of S B B | B R (origin, relay, fused terminal | relay, terminal).
  EXPECT_EQ(shapeOf(CollKind::kAllReduce, 3, 0, 2), "SBBBSRBBBSRBBBR");
}

// The hoisted order at the smallest depth it is used with, through the simulator (which fails a
// schedule that deadlocks or computes a wrong value): several rounds, in and out of place.
TEST(ScheduleMatrix, RingRoundsAtDepthTwo) {
  for (CollKind k : {CollKind::kAllReduce, CollKind::kReduceScatter, CollKind::kAllGather}) {
    for (int n = 2; n <= 9; ++n) {
      for (uint64_t count : {uint64_t{1}, uint64_t{7}, uint64_t{40}, uint64_t{3} * n * 5 + 2}) {
        for (bool inPlace : {false, true}) {
          Case c{k, n, count, 5, 0, inPlace, 2, SimOp::kSum};  // the default: the ring
          ASSERT_EQ(runCase(c), "") << c.str();
        }
      }
    }
  }
}

// With FIFO depth >= 4 a round carries up to 4 pieces per chain (ring_pass.h): the steps of one
// segment are adjacent, in piece order, and the round's leading sends go before the previous
// round's trailing receives as a block. All-reduce at 2 ranks, chunk 8, depth 8: rounds of 64
// elements (two segments of four pieces) and a last one of 20 (two segments of 10: pieces 8, 2).
TEST(ScheduleShape, RingRoundsCarryPiecesAtDepthFourAndMore) {
  auto build = [](CollKind k, int n, int rank, uint64_t count, uint32_t depth) {
    CollArgs a;
    a.kind = k;
    a.nranks = n;
    a.rank = rank;
    a.count = count;
    a.chunkElems = 8;
    a.fifoDepth = depth;
    a.algo = Algo::kRing;
    Schedule s;
    EXPECT_EQ(buildSchedule(a, &s), Result::kSuccess);
    return s;
  };
  auto shapeOf = [](const Schedule& s) {
    std::string shape;
    for (const Step& st : s.steps) shape += st.recvPeer >= 0 ? (st.sendPeer >= 0 ? "B" : "R") : "S";
    return shape;
  };
  for (int rank : {0, 1}) {
    const Schedule s = build(CollKind::kAllReduce, 2, rank, 148, 8);
    EXPECT_EQ(shapeOf(s),
              "SSSSBBBB"
              "SSSSRRRR"
              "BBBB"
              "SSRRRR"
              "BBRR")
        << "rank " << rank;
    // The pieces of a segment are adjacent in the buffers, so a device covers them in one command.
    for (size_t i = 1; i < 4; ++i) {
      EXPECT_EQ(s.steps[i].srcOffset, s.steps[i - 1].srcOffset + 8) << "rank " << rank;
      EXPECT_EQ(s.steps[i].count, 8u);
    }
    // Depth 4: two pieces per segment.
    EXPECT_EQ(shapeOf(build(CollKind::kAllReduce, 2, rank, 64, 4)), "SSBBSSRRBBRR") << "rank " << rank;
    // Reduce-scatter: rounds of 4 pieces per block (13 elements: pieces 8 and 5 of one round).
    const Schedule rs = build(CollKind::kReduceScatter, 2, rank, 13, 8);
    EXPECT_EQ(shapeOf(rs), "SSRR") << "rank " << rank;
    EXPECT_EQ(rs.steps[1].srcOffset, rs.steps[0].srcOffset + 8);
    EXPECT_EQ(rs.steps[1].count, 5u);
    EXPECT_EQ(shapeOf(build(CollKind::kAllGather, 2, rank, 80, 8)), "SSSSSSSSRRRRSSRRRRRR") << "rank " << rank;
  }
}

// Rounds of pieces through the simulator (which fails a schedule that deadlocks or computes a
// wrong value) at the depths that use them: full and partial rounds, fewer elements than ranks,
// in and out of place.
TEST(ScheduleMatrix, RingRoundsInPieces) {
  for (CollKind k : {CollKind::kAllReduce, CollKind::kReduceScatter, CollKind::kAllGather}) {
    for (int n = 2; n <= 9; ++n) {
      for (size_t depth : {size_t{4}, size_t{5}, size_t{8}}) {
        for (uint64_t count : {uint64_t{1}, uint64_t{7}, uint64_t{3} * n * 4 * 5 + 2, uint64_t{9} * n * 4 * 5}) {
          for (bool inPlace : {false, true}) {
            Case c{k, n, count, 5, 0, inPlace, depth, SimOp::kSum};
            ASSERT_EQ(runCase(c), "") << c.str();
          }
        }
      }
    }
  }
}

// The step counts stated in the algorithm files.
TEST(ScheduleShape, StepCounts) {
  auto steps = [](CollKind k, int n, int rank, uint64_t count, uint64_t chunk, int root = 0, uint32_t depth = 1) {
    CollArgs a;
    a.fifoDepth = depth;
    a.kind = k;
    a.nranks = n;
    a.rank = rank;
    a.count = count;
    a.chunkElems = chunk;
    a.root = root;
    Schedule s;
    EXPECT_EQ(buildSchedule(a, &s), Result::kSuccess);
    return s.steps.size();
  };
  // AllReduce: 2n steps per round of n*chunk elements (3 rounds here); with FIFO depth >= 2 the
  // reduce-scatter terminal also sends (it is the all-gather origin): 2n - 1.
  EXPECT_EQ(steps(CollKind::kAllReduce, 4, 1, 4 * 8 * 3, 8), 3u * 2 * 4);
  EXPECT_EQ(steps(CollKind::kAllReduce, 4, 1, 4 * 8 * 3, 8, 0, 2), 3u * (2 * 4 - 1));
  EXPECT_EQ(steps(CollKind::kReduceScatter, 4, 1, 10, 3), 4u * 4);
  EXPECT_EQ(steps(CollKind::kAllGather, 5, 3, 10, 3), 4u * 5);
  EXPECT_EQ(steps(CollKind::kBroadcast, 5, 3, 10, 3), 4u);
  // The root and the rank before it add the closing token (schedule.h).
  EXPECT_EQ(steps(CollKind::kBroadcast, 5, 0, 10, 3), 4u + 1);
  EXPECT_EQ(steps(CollKind::kBroadcast, 5, 4, 10, 3), 4u + 1);
  EXPECT_EQ(steps(CollKind::kScatter, 5, 2, 10, 3, 2), 1u + 4 * 4 + 1);
  EXPECT_EQ(steps(CollKind::kScatter, 5, 1, 10, 3, 2), 4u + 1);
  EXPECT_EQ(steps(CollKind::kScatter, 5, 3, 10, 3, 2), 4u);
  EXPECT_EQ(steps(CollKind::kReduce, 5, 3, 10, 3), 4u);
  EXPECT_EQ(steps(CollKind::kAlltoAll, 5, 3, 10, 3), 1u + 2 * 4 * 4);
  EXPECT_EQ(steps(CollKind::kGather, 5, 3, 10, 3, 3), 1u + 4 * 4);
  EXPECT_EQ(steps(CollKind::kGather, 5, 2, 10, 3, 3), 4u);
  // AllReduce with fewer elements than ranks: empty segments produce no steps at all.
  EXPECT_EQ(steps(CollKind::kAllReduce, 8, 5, 1, 64), 2u);  // relay in both passes of segment 0
}

// --- The simulator itself ---------------------------------------------------------------------

SimActor actorWith(int rank, std::vector<Step> steps, uint64_t in, uint64_t out) {
  SimActor a;
  a.rank = rank;
  a.schedule.steps = std::move(steps);
  a.inputElems = in;
  a.outputElems = out;
  a.outputOffset = in;
  a.arena.assign(in + out, SimCell{});
  return a;
}

Step mk(int recv, int send, Buf src, uint64_t so, Buf dst, uint64_t d, uint64_t count) {
  Step s;
  s.recvPeer = recv;
  s.sendPeer = send;
  s.src = src;
  s.srcOffset = so;
  s.dst = dst;
  s.dstOffset = d;
  s.count = count;
  return s;
}

TEST(Simulator, DetectsDeadlockAndSaysWho) {
  // Both ranks receive before they send.
  std::vector<SimActor> actors{
      actorWith(0, {mk(1, -1, Buf::kNone, 0, Buf::kOutput, 0, 1), mk(-1, 1, Buf::kInput, 0, Buf::kNone, 0, 1)}, 1, 1),
      actorWith(1, {mk(0, -1, Buf::kNone, 0, Buf::kOutput, 0, 1), mk(-1, 0, Buf::kInput, 0, Buf::kNone, 0, 1)}, 1, 1)};
  SimOptions opt;
  opt.nranks = 2;
  EXPECT_EQ(simulate(actors, opt), Result::kInvalidUsage);
  EXPECT_NE(lastError().find("deadlock"), std::string::npos) << lastError();
  EXPECT_NE(lastError().find("rank 0 step 1/2 waits for a message from rank 1"), std::string::npos) << lastError();
}

// A plain ring (every rank starts with its pure send) needs two slots per link; the anchored
// order of ring_pass.h is what makes depth 1 work. Here: a 3-rank ring of fused relays.
TEST(Simulator, PlainRingNeedsDepthTwo) {
  std::vector<SimActor> actors;
  for (int r = 0; r < 3; ++r) {
    const int next = (r + 1) % 3, prev = (r + 2) % 3;
    actors.push_back(
        actorWith(r,
                  {mk(-1, next, Buf::kInput, 0, Buf::kNone, 0, 1), mk(prev, next, Buf::kInput, 1, Buf::kNone, 0, 1),
                   mk(prev, -1, Buf::kInput, 2, Buf::kOutput, 0, 1)},
                  3, 1));
  }
  SimOptions opt;
  opt.nranks = 3;
  opt.reduction = true;
  opt.fifoDepth = 1;
  std::vector<SimActor> copy = actors;
  EXPECT_EQ(simulate(copy, opt), Result::kInvalidUsage);
  opt.fifoDepth = 2;
  EXPECT_EQ(simulate(actors, opt), Result::kSuccess) << lastError();
}

TEST(Simulator, DetectsSizeMismatchHazardAndLeftovers) {
  SimOptions opt;
  opt.nranks = 2;
  {
    std::vector<SimActor> actors{actorWith(0, {mk(-1, 1, Buf::kInput, 0, Buf::kNone, 0, 2)}, 2, 0),
                                 actorWith(1, {mk(0, -1, Buf::kNone, 0, Buf::kOutput, 0, 1)}, 0, 1)};
    EXPECT_EQ(simulate(actors, opt), Result::kInvalidUsage);
    EXPECT_NE(lastError().find("expects 1 elements from rank 0, message has 2"), std::string::npos) << lastError();
  }
  {
    // In-place hazard: write Output[0] (aliases Input[0]), then read Input[0].
    SimActor a = actorWith(
        0, {mk(-1, -1, Buf::kInput, 1, Buf::kOutput, 0, 1), mk(-1, 1, Buf::kInput, 0, Buf::kNone, 0, 1)}, 2, 2);
    a.outputOffset = 0;
    std::vector<SimActor> actors{a, actorWith(1, {mk(0, -1, Buf::kNone, 0, Buf::kOutput, 0, 1)}, 0, 1)};
    EXPECT_EQ(simulate(actors, opt), Result::kInvalidUsage);
    EXPECT_NE(lastError().find("in-place hazard"), std::string::npos) << lastError();
  }
  {
    std::vector<SimActor> actors{actorWith(0, {mk(-1, 1, Buf::kInput, 0, Buf::kNone, 0, 1)}, 1, 0),
                                 actorWith(1, {}, 0, 0)};
    EXPECT_EQ(simulate(actors, opt), Result::kInvalidUsage);
    EXPECT_NE(lastError().find("never received"), std::string::npos) << lastError();
  }
  {
    std::vector<SimActor> actors{actorWith(0, {mk(-1, -1, Buf::kInput, 0, Buf::kOutput, 1, 2)}, 2, 2)};
    opt.nranks = 1;
    EXPECT_EQ(simulate(actors, opt), Result::kInvalidUsage);
    EXPECT_NE(lastError().find("outside"), std::string::npos) << lastError();
  }
}

// Every algorithm a collective has also has a cost (algorithms/cost.h), and only those.
TEST(ScheduleCost, EverySupportedAlgorithmHasACost) {
  const LinkModel m{1e-6, 1e-10, 1e-11};
  for (int k = 0; k <= static_cast<int>(CollKind::kRecv); ++k) {
    const CollKind kind = static_cast<CollKind>(k);
    for (int g = 1; g < kNumAlgos; ++g) {
      const Algo algo = static_cast<Algo>(g);
      for (int p : {1, 2, 3, 8, 33}) {
        for (uint64_t bytes : {0ull, 8ull, 1ull << 20}) {
          const double t = predictSeconds(algo, kind, p, bytes, 4096, m);
          if (algoSupports(algo, kind)) {
            EXPECT_GE(t, 0) << collName(kind) << " / " << algoName(algo) << " p=" << p << " bytes=" << bytes;
          } else {
            EXPECT_LT(t, 0) << collName(kind) << " / " << algoName(algo);
          }
        }
      }
    }
  }
}

// Prints the cost of every algorithm at one size, for the record (steps, messages, parallel time).
TEST(ScheduleCost, Table) {
  for (CollKind k : {CollKind::kAllReduce, CollKind::kReduceScatter, CollKind::kAllGather, CollKind::kBroadcast,
                     CollKind::kReduce, CollKind::kAlltoAll, CollKind::kGather, CollKind::kScatter}) {
    for (size_t depth : {size_t{1}, size_t{4}}) {
      Case c{k, 8, 8000, 100, 0, false, depth, SimOp::kSum};
      SimStats st;
      ASSERT_EQ(runCase(c, &st), "") << c.str();
      printf("%-14s n=8 count=8000 chunk=100 depth=%zu: %8llu steps %7llu messages %6llu sweeps\n", collName(k), depth,
             static_cast<unsigned long long>(st.steps), static_cast<unsigned long long>(st.messages),
             static_cast<unsigned long long>(st.sweeps));
    }
  }
}

// LinkModel::stage prices a send staged by a pass of its own: the ring's origin stages its own
// block once per pass and its relays none, while the recursive and Bruck forms stage every byte
// they send (cost.cc).
TEST(ScheduleCost, StagedSendsCostTheRingOneBlockAndTheRecursiveFormsEveryByteSent) {
  const LinkModel plain{5e-6, 1e-10, 2e-11};
  LinkModel staged = plain;
  staged.stage = 1e-10;
  const uint64_t n = 256 << 10;  // bytes per rank
  const double chunk = 512 << 10;
  const auto extra = [&](Algo a, CollKind kind, int p, uint64_t bytes) {
    return predictSeconds(a, kind, p, bytes, chunk, staged) - predictSeconds(a, kind, p, bytes, chunk, plain);
  };
  for (CollKind kind : {CollKind::kReduceScatter, CollKind::kAllGather}) {
    EXPECT_NEAR(extra(Algo::kRing, kind, 8, n), n * 1e-10, 1e-12) << collName(kind);
    EXPECT_NEAR(extra(Algo::kBruck, kind, 8, n), 7 * n * 1e-10, 1e-12) << collName(kind);
  }
  EXPECT_NEAR(extra(Algo::kRecursiveHalving, CollKind::kReduceScatter, 8, n), 7 * n * 1e-10, 1e-12);
  EXPECT_NEAR(extra(Algo::kRecursiveDoubling, CollKind::kAllGather, 8, n), 7 * n * 1e-10, 1e-12);
  // All-reduce of 8n bytes: the ring stages one segment (n), Rabenseifner 2 x 7/8 of the buffer,
  // recursive doubling the whole buffer in each of its 3 rounds.
  EXPECT_NEAR(extra(Algo::kRing, CollKind::kAllReduce, 8, 8 * n), n * 1e-10, 1e-12);
  EXPECT_NEAR(extra(Algo::kRabenseifner, CollKind::kAllReduce, 8, 8 * n), 14 * n * 1e-10, 1e-12);
  EXPECT_NEAR(extra(Algo::kRecursiveDoubling, CollKind::kAllReduce, 8, 8 * n), 24 * n * 1e-10, 1e-12);
  // Which turns the ranking of a 2 MiB reduce-scatter at 8 ranks around: equal bytes, so the
  // recursive forms won on their fewer messages alone.
  EXPECT_LT(predictSeconds(Algo::kRecursiveHalving, CollKind::kReduceScatter, 8, n, chunk, plain),
            predictSeconds(Algo::kRing, CollKind::kReduceScatter, 8, n, chunk, plain));
  EXPECT_LT(predictSeconds(Algo::kRing, CollKind::kReduceScatter, 8, n, chunk, staged),
            predictSeconds(Algo::kRecursiveHalving, CollKind::kReduceScatter, 8, n, chunk, staged));
}

// The model ranks the halving/doubling forms as their files say (Rabenseifner beats recursive
// doubling on large all-reduces, the logarithmic forms beat the ring on tiny ones).
TEST(ScheduleCost, LogarithmicFormsWinWhereTheirFilesSay) {
  const LinkModel m{5e-6, 1e-10, 2e-11};
  const uint64_t big = uint64_t{1} << 26;
  EXPECT_LT(predictSeconds(Algo::kRabenseifner, CollKind::kAllReduce, 16, big, 1 << 20, m),
            predictSeconds(Algo::kRecursiveDoubling, CollKind::kAllReduce, 16, big, 1 << 20, m));
  EXPECT_LT(predictSeconds(Algo::kRecursiveDoubling, CollKind::kAllReduce, 16, 8, 1 << 20, m),
            predictSeconds(Algo::kRing, CollKind::kAllReduce, 16, 8, 1 << 20, m));
  EXPECT_LT(predictSeconds(Algo::kRecursiveHalving, CollKind::kReduceScatter, 16, 8, 1 << 20, m),
            predictSeconds(Algo::kRing, CollKind::kReduceScatter, 16, 8, 1 << 20, m));
  EXPECT_LT(predictSeconds(Algo::kRecursiveDoubling, CollKind::kAllGather, 16, 8, 1 << 20, m),
            predictSeconds(Algo::kRing, CollKind::kAllGather, 16, 8, 1 << 20, m));
  // Bruck (PAT): the halving/doubling rounds without their fold and unfold when p is not a power
  // of two, the same rounds and bytes when it is (a tie, which the tuner gives to the algorithm
  // listed first); the ring's bytes, so no worse than ring by more than its latency at 64 MiB.
  for (CollKind kind : {CollKind::kAllGather, CollKind::kReduceScatter}) {
    const Algo halving = kind == CollKind::kAllGather ? Algo::kRecursiveDoubling : Algo::kRecursiveHalving;
    EXPECT_LT(predictSeconds(Algo::kBruck, kind, 12, 8, 1 << 20, m), predictSeconds(halving, kind, 12, 8, 1 << 20, m));
    EXPECT_LT(predictSeconds(Algo::kBruck, kind, 12, 8, 1 << 20, m),
              predictSeconds(Algo::kRing, kind, 12, 8, 1 << 20, m));
    EXPECT_DOUBLE_EQ(predictSeconds(Algo::kBruck, kind, 16, 8, 1 << 20, m),
                     predictSeconds(halving, kind, 16, 8, 1 << 20, m));
    EXPECT_LT(predictSeconds(Algo::kBruck, kind, 12, big, 1 << 20, m),
              1.1 * predictSeconds(Algo::kRing, kind, 12, big, 1 << 20, m));
  }
}

}  // namespace
}  // namespace mixccl::algo
