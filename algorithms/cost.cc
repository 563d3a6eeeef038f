// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// One function per algorithm family; each restates the cost line of its algorithm file in the
// terms of cost.h. "msgs(x)" is the number of chunk-sized messages x bytes take.
// Receives copied out of their slots (LinkModel::copyOut) are priced for the all-reduce forms,
// which differ in them (recursive doubling and one-shot combine every receive; the ring,
// Rabenseifner and the trees copy half or more of the result out). The forms of the other
// collectives copy out the same bytes as one another.

#include "algorithms/cost.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "algorithms/double_binary_tree.h"

namespace mixccl::algo {
namespace {

double sendCost(const LinkModel& m) { return m.send > 0 ? m.send : m.alpha; }

double msgs(double bytes, double chunk) { return std::max(1.0, std::ceil(bytes / std::max(1.0, chunk))); }

int ceilLog2(int p) {
  int l = 0;
  while ((1 << l) < p) ++l;
  return l;
}

int floorLog2(int p) {
  int l = 0;
  while ((2 << l) <= p) ++l;
  return l;
}

bool reduces(CollKind k) {
  return k == CollKind::kAllReduce || k == CollKind::kReduce || k == CollKind::kReduceScatter;
}

// Ring passes (ring_all_reduce.cc, ring_reduce_scatter.cc, ring_all_gather.cc): a pass moves
// (p-1) segments of n/p bytes (AllReduce) or of n bytes (the gather/scatter kinds) through every
// rank; the pipeline adds one message time per extra round. Only the origin of a pass stages its
// send (its own segment); every relay writes its outgoing message in the step that reads the
// incoming one (the reduce-scatter combines straight into the slot, the all-reduce's last combine
// writes output and slot at once, the all-gather copies on the bytes it just wrote). Every rank
// copies the p-1 segments of the all-reduce's gather pass out of the slot.
double ring(CollKind kind, double p, double n, double chunk, const LinkModel& m) {
  if (p <= 1) return reduces(kind) ? n * m.gamma : 0;
  switch (kind) {
    case CollKind::kAllReduce: {
      const double seg = n / p;
      const double rounds = msgs(n, p * chunk);
      return (2 * (p - 1) + rounds - 1) * m.alpha + 2 * (p - 1) * seg * m.beta + (p - 1) * seg * m.gamma +
             seg * m.stage + (p - 1) * seg * m.copyOut;
    }
    case CollKind::kReduceScatter:
    case CollKind::kAllGather: {
      const double perStep = msgs(n, chunk);
      const double gamma = kind == CollKind::kReduceScatter ? (p - 1) * n * m.gamma : 0;
      return (p - 1) * perStep * m.alpha + (p - 1) * n * m.beta + gamma + n * m.stage;
    }
    case CollKind::kBroadcast:
    case CollKind::kReduce: {
      // A pipelined chain: p-1 hops for the first chunk, then one chunk time per further chunk.
      const double k = msgs(n, chunk);
      const double piece = n / k;
      const double gamma = kind == CollKind::kReduce ? n * m.gamma : 0;
      return (p - 2 + k) * (m.alpha + piece * m.beta) + gamma;
    }
    default:
      return -1;
  }
}

// Binomial trees (binomial_*.cc): d = ceil(log2 p) children at the root, whose link is the
// busiest.
double binomial(CollKind kind, double p, double n, double chunk, const LinkModel& m) {
  const double k = msgs(n, chunk), d = ceilLog2(static_cast<int>(p));
  switch (kind) {
    case CollKind::kBroadcast:
      // The root sends every chunk to each of its d children: busy k*d message times.
      return k * d * (m.alpha + (n / k) * m.beta);
    case CollKind::kReduce:
      // The mirror: the root receives k chunks from each of its d children and combines them.
      return k * d * (m.alpha + (n / k) * m.beta) + d * n * m.gamma;
    case CollKind::kGather:
    case CollKind::kScatter: {
      // The root receives (gather) or sends (scatter) the stream of each child c (min(c, p - c)
      // blocks) in chunk-sized messages: (p-1)*n bytes in about d + (p-1)*n/chunk messages.
      double rootMsgs = 0;
      for (double c = 1; c < p; c *= 2) rootMsgs += msgs(std::min(c, p - c) * n, chunk);
      return rootMsgs * m.alpha + (p - 1) * n * m.beta;
    }
    default:
      return -1;
  }
}

// Recursive-doubling all-gather (recursive_doubling_all_gather.cc): round j swaps 2^j virtual
// ranks' blocks, p/p2 blocks each on average; a fold of n bytes before and an unfold of p*n bytes
// after when p is not a power of two. Every round stages its send from the output, where it
// arrived in an earlier round.
double doublingAllGather(double p, double n, double chunk, const LinkModel& m) {
  const int p2 = 1 << floorLog2(static_cast<int>(p));
  double t = 0;
  for (int span = 1; span < p2; span *= 2) {
    const double bytes = span * n * p / p2;
    t += msgs(bytes, chunk) * m.alpha + bytes * (m.beta + m.stage);
  }
  if (p2 < p) {
    t += msgs(n, chunk) * m.alpha + msgs(p * n, chunk) * m.alpha + (n + p * n) * (m.beta + m.stage);
  }
  return t;
}

// Recursive-halving reduce-scatter (recursive_halving_reduce_scatter.cc): round j sends and
// combines the partial sums of p2/2^(j+1) virtual ranks' blocks; a fold of p*n bytes (combined)
// before and the delivery of n bytes after when p is not a power of two. A round combines into
// scratch and the next round stages its send from there (round 0 from the input).
double halvingReduceScatter(double p, double n, double chunk, const LinkModel& m) {
  const int p2 = 1 << floorLog2(static_cast<int>(p));
  if (p <= 1) return n * m.gamma;
  double t = 0;
  for (int span = p2 / 2; span >= 1; span /= 2) {
    const double bytes = span * n * p / p2;
    t += msgs(bytes, chunk) * m.alpha + bytes * (m.beta + m.gamma + m.stage);
  }
  if (p2 < p) {
    t += msgs(p * n, chunk) * m.alpha + p * n * (m.beta + m.gamma + m.stage) + msgs(n, chunk) * m.alpha +
         n * (m.beta + m.stage);
  }
  return t;
}

// Bruck all-gather and reduce-scatter (bruck_all_gather.cc, bruck_reduce_scatter.cc): round k
// moves the blocks of min(2^k, p - 2^k) ranks, ceil(log2 p) rounds one after the other, (p-1)*n
// bytes in all (combined, for the reduce-scatter). The reduce-scatter cuts blocks above a chunk
// into s = ceil(n / chunk) even slices, one message per block and slice. The sums are written in
// the terms of the algorithm each form ties with - recursive doubling / halving round by round
// for a power of two, the ring's totals otherwise (s slices: (p-1)*s messages, the ring's count)
// - so that equal costs are equal to the last bit and the tie goes to the one listed first. Every
// round stages its send from the output, the input or scratch, as those forms do.
double bruckGatherScatter(CollKind kind, double p, double n, double chunk, const LinkModel& m) {
  const bool rs = kind == CollKind::kReduceScatter;
  if (p <= 1) return rs ? n * m.gamma : 0;
  const double slices = rs && n > chunk ? msgs(n, chunk) : 1;
  const double perByte = (rs ? m.beta + m.gamma : m.beta) + m.stage;
  const int ip = static_cast<int>(p);
  if ((ip & (ip - 1)) == 0) {
    double t = 0;
    for (double span = rs ? p / 2 : 1; span >= 1 && span < p; span = rs ? span / 2 : span * 2) {
      const double bytes = span * n;
      t += (slices > 1 ? span * slices : msgs(bytes, chunk)) * m.alpha + bytes * perByte;
    }
    return t;
  }
  double messages = (p - 1) * slices;
  if (slices == 1) {
    messages = 0;
    for (double bit = 1; bit < p; bit *= 2) messages += msgs(std::min(bit, p - bit) * n, chunk);
  }
  const double gamma = rs ? (p - 1) * n * m.gamma : 0;
  return messages * m.alpha + (p - 1) * n * (m.beta + m.stage) + gamma;
}

// Rabenseifner all-reduce (rabenseifner_all_reduce.cc): log2(p2) halving rounds of p2/2^(j+1)
// pieces of n/p2 bytes (combined), the same rounds back as doubling ones (copied), and a fold
// (combined) and unfold of n bytes each (copied out) when p is not a power of two. Every send is staged from
// the input, scratch or the output (the halving rounds combine into scratch, as recursive
// halving does).
double rabenseifner(double p, double n, double chunk, const LinkModel& m) {
  const int p2 = 1 << floorLog2(static_cast<int>(p));
  if (p <= 1) return n * m.gamma;
  double t = 0;
  for (int span = p2 / 2; span >= 1; span /= 2) {
    const double bytes = span * n / p2;
    t += 2 * msgs(bytes, chunk) * m.alpha + bytes * (2 * (m.beta + m.stage) + m.gamma + m.copyOut);
  }
  if (p2 < p) t += 2 * (msgs(n, chunk) * m.alpha + n * (m.beta + m.stage)) + n * (m.gamma + m.copyOut);
  return t;
}

// Double binary tree all-reduce (double_binary_tree_all_reduce.cc): each tree carries n/2 bytes
// in K pieces. The first piece reaches every rank after `hops` messages on the critical path (a
// node's sends to its children one after the other) and is combined once per level up; each
// further piece costs the busiest rank `sends` sends and `combines` combinations of a piece and
// one latency, as a ring round does (the pipeline overlaps the rest). Two ranks run the ring's
// very exchange, at the ring's cost. Interior nodes combine into the slot to their parent and
// forward what they just received, as the ring's relays do; the busiest rank, a leaf of one
// tree, stages its half of the input and copies out the other tree's half.
double doubleBinaryTree(int p, double n, double chunk, const LinkModel& m) {
  if (p <= 1) return n * m.gamma;
  const DbtShape shape = dbtShape(p);
  const double fill = shape.depth + shape.broadcastHops;
  const double half = n / 2;
  const double minPiece = std::max(1.0, chunk / static_cast<double>(kMinPieceFraction));
  const double pieces = std::max(msgs(half, chunk), std::min(fill, std::ceil(half / minPiece)));
  const double piece = half / pieces;
  double hops = fill + 2, depth = shape.depth + 1, sends = 4, combines = 2;  // root above the core
  if (!dbtRootAbove(p, static_cast<uint64_t>(pieces))) {
    // The extra ranks hang below the core's root, which serves them too; with few ranks the
    // extras' own sends are on the critical path (the hop counts the file states).
    constexpr double kFewRanksHops[] = {0, 0, 2, 4, 5, 6, 5, 6};
    hops = p < 8 ? kFewRanksHops[p] : fill;
    depth = std::max(1, shape.depth);
    sends = p <= 3 ? p : p % 2 == 0 ? 4 : 5;
    combines = p <= 3 ? p - 1 : p % 2 == 0 ? 3 : 4;
  }
  return hops * (m.alpha + piece * m.beta) + depth * piece * m.gamma +
         (pieces - 1) * (m.alpha + piece * (sends * m.beta + combines * m.gamma)) + half * (m.stage + m.copyOut);
}

}  // namespace

double predictSeconds(Algo algo, CollKind kind, int p, uint64_t nBytes, uint64_t chunkBytes, const LinkModel& m) {
  if (algo == Algo::kDefault || !algoSupports(algo, kind)) return -1;
  const double n = static_cast<double>(nBytes), chunk = static_cast<double>(chunkBytes), P = p;
  switch (algo) {
    case Algo::kRing:
      return ring(kind, P, n, chunk, m);
    case Algo::kDirect:
      if (kind == CollKind::kAlltoAll || kind == CollKind::kAllGather) {
        // direct_all_to_all.cc, direct_all_gather.cc: per piece one round, whose p-1 sends leave
        // one after the other without waiting (as one-shot's), then p-1 receives. The p-1 copies
        // of one block (all-gather) read it from the cache after the first. (Staging is not
        // modelled for the all-to-all forms yet: docs/TUNING.md.)
        const double staged = kind == CollKind::kAllGather ? n * m.stage : 0;
        return msgs(n, chunk) * (m.alpha + (P - 2) * sendCost(m)) + (P - 1) * n * m.beta + staged;
      }
      // Gather, scatter: the root exchanges p-1 blocks, one after the other, as pairwise does.
      [[fallthrough]];
    case Algo::kPairwise:  // p-1 exchanges of one block each, sent and received at once
      return (P - 1) * (msgs(n, chunk) * m.alpha + n * m.beta);
    case Algo::kRecursiveDoubling: {
      if (kind == CollKind::kAllGather) return doublingAllGather(P, n, chunk, m);
      // floor(log2 p) exchanges of the whole buffer, plus a fold and an unfold when p is not a
      // power of two; every exchange combines n bytes.
      // Each exchange stages the whole buffer (the input, then the partial sums).
      // The unfold is the only receive copied out.
      const bool folds = (p & (p - 1)) != 0;
      const double rounds = floorLog2(p) + (folds ? 2 : 0);
      return rounds * (msgs(n, chunk) * m.alpha + n * (m.beta + m.stage)) + floorLog2(p) * n * m.gamma +
             (folds ? n * m.copyOut : 0);
    }
    case Algo::kBinomialTree:
      return binomial(kind, P, n, chunk, m);
    case Algo::kScatterAllGather: {
      // Broadcast only: a binomial scatter of p pieces of n/p bytes (the root sends each child's
      // subtree of pieces), then p-1 ring steps of one piece.
      const double piece = n / P;
      double rootMsgs = 0;
      for (double c = 1; c < P; c *= 2) rootMsgs += msgs(std::min(c, P - c) * piece, chunk);
      return (rootMsgs + (P - 1) * msgs(piece, chunk)) * m.alpha + 2 * (P - 1) * piece * m.beta;
    }
    case Algo::kBruck: {
      if (kind != CollKind::kAlltoAll) return bruckGatherScatter(kind, P, n, chunk, m);
      // Round k sends the n_k blocks whose index has bit k set (n_k <= p/2), in chunk-sized
      // messages; ceil(log2 p) rounds one after the other.
      double t = 0;
      for (int64_t bit = 1; bit < p; bit <<= 1) {
        // i in [0, p) with this bit set: `bit` per full period of 2*bit, plus the tail's share.
        const int64_t period = 2 * bit;
        const double nk = static_cast<double>(p / period * bit + std::max<int64_t>(0, p % period - bit));
        t += msgs(nk * n, chunk) * m.alpha + nk * n * m.beta;
      }
      return t;
    }
    case Algo::kRecursiveHalving:
      return halvingReduceScatter(P, n, chunk, m);
    case Algo::kRabenseifner:
      return rabenseifner(P, n, chunk, m);
    case Algo::kOneShot:
      // One hop: a piece leaves for its p-1 peers one send after the other without waiting, so
      // the latency is paid once per piece and each further peer costs a send; every rank sends
      // and receives (p-1)n bytes and folds them. (A full alpha per peer made one-shot lose to
      // recursive doubling at 8 B on 8 oversubscribed ranks, where it measured 1.3x faster.)
      return msgs(n, chunk) * (m.alpha + (P - 2) * sendCost(m)) + (P - 1) * n * (m.beta + m.gamma) + n * m.stage;
    case Algo::kOrdered: {
      // ordered_reduce.cc: the owner of each element receives p-1 operands, one message per peer
      // and round, and folds them (AllReduce: blocks of n/p, then as many bytes gathered back;
      // ReduceScatter: blocks of n; Reduce: the root owns all n bytes).
      // As for one-shot, the p-1 operands of a round leave one send after the other.
      // Every operand is staged from the input (distinct bytes per peer); the all-reduce's owner
      // sends its folded block p-1 times from the cache.
      const double block = kind == CollKind::kAllReduce ? n / P : n;
      const double one = msgs(block, chunk) * (m.alpha + (P - 2) * sendCost(m)) + (P - 1) * block * m.beta;
      const double staged = (kind == CollKind::kAllReduce ? P : P - 1) * block * m.stage;
      const double copied = kind == CollKind::kAllReduce ? (P - 1) * block * m.copyOut : 0;  // the gather back
      return (kind == CollKind::kAllReduce ? 2 * one : one) + (P - 1) * block * m.gamma + staged + copied;
    }
    case Algo::kDoubleBinaryTree:
      return doubleBinaryTree(p, n, chunk, m);
    default:  // algorithms whose builders have not landed yet
      break;
  }
  return -1;
}

}  // namespace mixccl::algo
