// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Double binary tree all-reduce (NCCL's "Tree" algorithm for AllReduce): two binary trees over
// the ranks, each reducing one half of the buffer up to its root and broadcasting the result back
// down, both pipelined. A rank is an interior node of at most one tree, so per piece every rank
// sends at most four messages (three in its interior tree, one as a leaf of the other): the
// bandwidth of the ring with a latency logarithmic in the rank count.
//
// Terms. Half 0 is elements [0, h0) with h0 = ceil(count/2), half 1 the rest. Tree t carries half
// t in K_t pieces ("chunks") of at most chunkElems elements, cut smaller where that gives the
// pipeline up to D + B pieces (below) but never under chunkElems/64 elements (dbtPieceElems). A
// group is what one rank does for one piece of one tree:
//   IU (interior, up)   receive each child's piece in child order: child 0 OP Input -> Output,
//                       then child OP Output -> Output; the last combination goes to the parent
//                       instead (at the root it is the final value: -> Output with finalize).
//   ID (interior, down) receive the final piece from the parent into Output and send it to child
//                       0 in the same step (the root sends its Output), then Output to the others.
//   LU (leaf, up)       Input -> parent.          LD (leaf, down)   parent -> Output.
//
// Trees. Positions 1..2k-1 (k = floor(n/2)) form the core: a full binary tree numbered in order
// (left subtree, node, right subtree), so its leaves are the odd positions and its interior nodes
// the even ones. Tree 0 puts rank r at position r; tree 1 at n-1-r for even n (the mirror) and at
// r-1 mod n for odd n (the shift), as NCCL's ncclGetDtree. Position 0, and position n-1 when n is
// odd, are extra. Layout "below" (fewer than D + B pieces per tree, e.g. one): the extras are
// leaves under the core's root, served after its core children, for the shortest critical path.
// Layout "above" (D + B pieces or more, n >= 4): position 0 is the root, with the core's root
// and position n-1 as children, like NCCL's rank 0 above its btree: two hops more, but once the
// pipeline is full no rank combines more than two children per piece (the core's root would
// combine three or four, and hold every round up) or sends more than four messages per round.
// Either way the interior positions q are even (the core's, and 0 when above), so tree 0's
// interior ranks are even and tree 1's odd (n-1-q, or q+1 for odd n): no rank is interior in
// both (n = 2, 3 are always below; the core is position 1 alone: rank 1 in tree 0, rank 0 or 2
// in tree 1).
//
// Shape. NCCL splits the core by bit pattern, a balanced tree, because its kernels send to all
// children at once. A step here sends to one peer, so a node's second child hears one hop after
// the first and a balanced tree pays two hops per level on the way down (28 hops at 1,024 ranks).
// The split is chosen for that instead. Let cap(D, B) be the most leaves of a full binary tree at
// most D deep whose broadcast (a node's first child one hop after the node, its second two)
// reaches every node within B hops: cap = 1 if D = 0 or B < 2, else cap(D-1, B-1) +
// cap(D-1, B-2). The core takes the least D + B (then the least D) with cap(D, B) >= k, and a
// subtree of k' leaves puts min(k'-1, cap(D-1, B-1)) of them left (served first) and the rest,
// at most cap(D-1, B-2), right. Receives cost no hop in the simulators and every node sends up
// once, so a piece goes up in D hops and down in B: 10 + 14 = 24 hops at 1,024 ranks, the least
// any binary tree over 512 leaves allows in that model.
//
// Order. Each rank's groups form one list, sorted by the key (round, phase, sub, tie). Piece c's
// IU of an interior node at depth d is in round c - d and its ID in round c + d: a systolic
// pipeline in which every node handles one piece up and one down per round. Phases within a
// round: LU, IU, ID, LD. Where a leaf's groups go depends on its link (below). Ties between ranks
// only matter for the argument: within one (round, phase) IU groups go root first, ID groups
// deepest first.
//
// Leaf links. Two trees may use the same ordered pair: u -> v carries tree t's up messages and
// tree t''s down messages when u is a leaf child of v in t and v a leaf child of u in t' (two up
// or two down streams on one pair would need a rank interior in both trees). On such a shared
// pair, LU(c) is in v's IU round at phase LU, and LD(c) in the sender's ID round at phase LD: an
// up message lives between the LU and IU phases of one round, a down message between the ID and
// LD phases of one round, so the two streams never overlap and both ends see them in key order.
// On a pair only one tree uses, LU(c) comes right after v's IU(c-1) (round c-1-d_v, phase IU,
// after the round's other IU groups) and LD(c) right before the parent's ID(c+1) (round
// c+1+d_v, phase ID, before the others). Either way piece 0's LU comes first of all (nothing
// precedes it on its link: down messages start at round >= 0 >= -d_v, phase ID > IU; deeper
// parents first, they need it sooner), and the last LD last unless an up message follows it on
// a shared pair. So with one piece per tree a rank sends up as a leaf, reduces, broadcasts, and
// only then waits for its leaf value: the order that gives D + B hops.
//
// Deadlock freedom at FIFO depth 1. The keys order all groups of all ranks; in that order every
// message is sent before it is received, and on every link a message is received before the next
// one is sent: up between interior nodes, the child at depth d+1 sends c in round c-d-1, the
// parent receives it in round c-d before (root first) the child sends c+1 in that round; down,
// the parent sends c in round c+d, the child receives it in round c+d+1 before (deepest first)
// the parent sends c+1 there; the root's IU(c) precedes its ID(c) (same round, phase IU first);
// leaf links as above. Each rank's list follows that order and no group sends twice on one link.
// So if the engine ever stopped with work left, the unfinished group earliest in the order would
// find its messages there (sent by earlier groups) and its slots free (emptied by earlier
// groups) and could run: a contradiction. More slots only help.
//
// Invariants. Every Input element is read once, by LU or by IU's first step, both combining
// (where pre() runs). Only the root's last IU step finalizes. Partial sums live in Output (no
// scratch) and the final value overwrites them later. In place: IU's first step reads Input and
// writes Output on the same elements; a leaf's LU(c) precedes its LD(c).
//
// Cost. One piece per tree: D + B hops (2, 4, 5, 6, 5, 6 for n = 2..7, where the extras' sends
// count), the messages on its critical path, so D + B latencies in cost.h's terms; the timing
// simulator, which lets a node's sends to its children overlap on the links, finds about twice
// the depth. Each further piece adds 4 hops (5 below for odd n >= 5: that core root serves four
// children), and layout above 2 in all. A rank sends half t's h_t elements once per edge it has
// in tree t: an interior non-root 3 h_a + h_b, a root (children) h_a + h_b, a rank that is a leaf
// in both trees count; about 2 count per rank, like the ring, and 2 (n-1) count in all. An
// interior rank combines (children) * h_a elements, about count. With the pipeline full (above)
// the busiest rank sends four pieces and combines two per round: 2 count beta + count gamma in
// all, plus the fill.

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <tuple>
#include <vector>

#include "algorithms/builders.h"
#include "algorithms/double_binary_tree.h"

namespace mixccl::algo {
namespace {

// cap(D, B) of the prose for D, B < kCapSize, saturated far above any rank count.
constexpr int kCapSize = 128;
struct CapTable {
  std::array<std::array<uint64_t, kCapSize>, kCapSize> v{};
  CapTable() {
    for (int d = 0; d < kCapSize; ++d) {
      for (int b = 0; b < kCapSize; ++b) {
        v[d][b] = (d == 0 || b < 2) ? 1 : std::min<uint64_t>(uint64_t{1} << 62, v[d - 1][b - 1] + v[d - 1][b - 2]);
      }
    }
  }
};

uint64_t cap(int d, int b) {
  static const CapTable table;
  return d < 0 || b < 0 ? 0 : table.v[d][b];
}

// The root of a subtree of `leaves` leaves whose in-order numbering starts at `lo`, with bounds d, b.
int subtreeRoot(int lo, int leaves, int d, int b) {
  if (leaves == 1) return lo;
  const uint64_t left = std::min<uint64_t>(leaves - 1, cap(d - 1, b - 1));
  return lo + 2 * static_cast<int>(left) - 1;
}

int positionOf(int n, int tree, int rank) {
  if (tree == 0) return rank;
  return n % 2 == 0 ? n - 1 - rank : (rank + n - 1) % n;
}
int rankAt(int n, int tree, int pos) {
  if (tree == 0) return pos;
  return n % 2 == 0 ? n - 1 - pos : (pos + 1) % n;
}

}  // namespace

uint64_t dbtPieceElems(uint64_t halfElems, uint64_t chunkElems, int nranks) {
  const DbtShape shape = dbtShape(nranks);
  const uint64_t fill = static_cast<uint64_t>(shape.depth + shape.broadcastHops);
  const uint64_t minPiece = std::max<uint64_t>(1, chunkElems / kMinPieceFraction);
  const uint64_t pieces =
      std::max((halfElems + chunkElems - 1) / chunkElems, std::min(fill, (halfElems + minPiece - 1) / minPiece));
  return (halfElems + pieces - 1) / std::max<uint64_t>(1, pieces);
}

bool dbtRootAbove(int nranks, uint64_t pieces) {
  const DbtShape shape = dbtShape(nranks);
  return nranks >= 4 && pieces >= static_cast<uint64_t>(shape.depth + shape.broadcastHops);
}

DbtShape dbtShape(int nranks) {
  const uint64_t k = static_cast<uint64_t>(nranks / 2);
  for (int total = 0; total < kCapSize; ++total) {
    for (int d = 0; d <= total; ++d) {
      if (cap(d, total - d) >= k) return DbtShape{d, total - d};
    }
  }
  return DbtShape{kCapSize - 1, kCapSize - 1};  // not reached for any int rank count
}

DbtNode dbtNode(int n, int tree, int rank, bool rootAbove) {
  const DbtShape shape = dbtShape(n);
  const int k = n / 2;
  const bool secondExtra = n % 2 == 1;  // position n-1
  const int q = positionOf(n, tree, rank);
  const int coreRoot = subtreeRoot(1, k, shape.depth, shape.broadcastHops);
  rootAbove = rootAbove && n >= 4;
  DbtNode node;
  if (rootAbove && q == 0) {
    node.children[node.numChildren++] = rankAt(n, tree, coreRoot);
    if (secondExtra) node.children[node.numChildren++] = rankAt(n, tree, n - 1);
    return node;
  }
  if (q == 0 || (secondExtra && q == n - 1)) {
    node.parent = rankAt(n, tree, rootAbove ? 0 : coreRoot);
    node.depth = 1;
    return node;
  }
  // Descend the core from its root to q.
  int lo = 1, leaves = k, d = shape.depth, b = shape.broadcastHops, parent = rootAbove ? 0 : -1;
  int depth = rootAbove ? 1 : 0;
  for (;;) {
    // The left subtree (served first) of a subtree of `leaves` leaves starting at lo.
    const int left = leaves == 1 ? 0 : static_cast<int>(std::min<uint64_t>(leaves - 1, cap(d - 1, b - 1)));
    const int root = leaves == 1 ? lo : lo + 2 * left - 1;
    if (root == q) {
      if (leaves > 1) {
        node.children[node.numChildren++] = rankAt(n, tree, subtreeRoot(lo, left, d - 1, b - 1));
        node.children[node.numChildren++] = rankAt(n, tree, subtreeRoot(root + 1, leaves - left, d - 1, b - 2));
      }
      break;
    }
    parent = root;
    ++depth;
    if (q < root) {
      leaves = left;
      b -= 1;
    } else {
      lo = root + 1;
      leaves -= left;
      b -= 2;
    }
    d -= 1;
  }
  if (q == coreRoot && !rootAbove) {
    node.children[node.numChildren++] = rankAt(n, tree, 0);
    if (secondExtra) node.children[node.numChildren++] = rankAt(n, tree, n - 1);
  }
  node.parent = parent < 0 ? -1 : rankAt(n, tree, parent);
  node.depth = depth;
  return node;
}

namespace {

enum Phase : int8_t { kLU = 0, kIU = 1, kID = 2, kLD = 3 };
enum Kind : uint8_t { kInteriorUp, kInteriorDown, kLeafUp, kLeafDown };

constexpr int64_t kFirst = std::numeric_limits<int64_t>::min();
constexpr int64_t kLast = std::numeric_limits<int64_t>::max();

struct Group {
  int64_t round;
  int8_t phase;
  int8_t sub;  // -1: before the round and phase's other groups, +1: after them
  int32_t tie;
  uint8_t tree;
  Kind kind;
  uint64_t chunk;

  bool operator<(const Group& o) const {
    return std::tie(round, phase, sub, tie, tree) < std::tie(o.round, o.phase, o.sub, o.tie, o.tree);
  }
};

bool isChild(const DbtNode& node, int rank) {
  for (int i = 0; i < node.numChildren; ++i) {
    if (node.children[i] == rank) return true;
  }
  return false;
}

}  // namespace

void buildDoubleBinaryTreeAllReduce(const CollArgs& a, Schedule* s) {
  if (a.nranks == 1) {
    s->steps.push_back(localCopy(Buf::kInput, 0, Buf::kOutput, 0, a.count, /*finalize=*/true));
    return;
  }
  const uint64_t half[2] = {(a.count + 1) / 2, a.count / 2};
  const uint64_t base[2] = {0, half[0]};
  uint64_t piece[2] = {1, 1};
  int64_t chunks[2] = {0, 0};
  for (int t = 0; t < 2; ++t) {
    if (half[t] == 0) continue;
    piece[t] = dbtPieceElems(half[t], a.chunkElems, a.nranks);
    chunks[t] = static_cast<int64_t>((half[t] + piece[t] - 1) / piece[t]);
  }
  const bool rootAbove = dbtRootAbove(a.nranks, static_cast<uint64_t>(chunks[0]));
  const DbtNode node[2] = {dbtNode(a.nranks, 0, a.rank, rootAbove), dbtNode(a.nranks, 1, a.rank, rootAbove)};

  std::vector<Group> groups;
  groups.reserve(static_cast<size_t>(2 * (chunks[0] + chunks[1])));
  for (uint8_t t = 0; t < 2; ++t) {
    const DbtNode& me = node[t];
    const int64_t d = me.depth;
    for (int64_t c = 0; c < chunks[t]; ++c) {
      const uint64_t cu = static_cast<uint64_t>(c);
      if (me.numChildren > 0) {
        groups.push_back(Group{c - d, kIU, 0, 0, t, kInteriorUp, cu});
        groups.push_back(Group{c + d, kID, 0, 0, t, kInteriorDown, cu});
        continue;
      }
      // A leaf: its parent is at depth dp. The pair is shared when the parent is this rank's
      // child in the other tree (this rank is then interior there, at depth `other.depth`).
      const int64_t dp = d - 1;
      const DbtNode& other = node[1 - t];
      const bool shared = isChild(other, me.parent);
      if (c == 0) {
        groups.push_back(Group{kFirst, kLU, 0, static_cast<int32_t>(-dp), t, kLeafUp, cu});
      } else if (shared) {
        groups.push_back(Group{c - dp, kLU, 0, 0, t, kLeafUp, cu});
      } else {
        groups.push_back(Group{c - 1 - dp, kIU, 1, 0, t, kLeafUp, cu});
      }
      // The last down message is last on its pair unless the other tree's up messages on a
      // shared pair go on longer: chunk K_t' - 1 up is received in round K_t' - 1 - other.depth.
      const bool last = c == chunks[t] - 1 && (!shared || chunks[t] + dp + other.depth >= chunks[1 - t]);
      if (last) {
        groups.push_back(Group{kLast, kLD, 0, 0, t, kLeafDown, cu});
      } else if (shared) {
        groups.push_back(Group{c + dp, kLD, 0, 0, t, kLeafDown, cu});
      } else {
        groups.push_back(Group{c + 1 + dp, kID, -1, 0, t, kLeafDown, cu});
      }
    }
  }
  std::sort(groups.begin(), groups.end());

  for (const Group& g : groups) {
    const DbtNode& me = node[g.tree];
    const uint64_t off = base[g.tree] + g.chunk * piece[g.tree];
    const uint64_t len = std::min(piece[g.tree], half[g.tree] - g.chunk * piece[g.tree]);
    switch (g.kind) {
      case kInteriorUp:
        for (int j = 0; j < me.numChildren; ++j) {
          const Buf src = j == 0 ? Buf::kInput : Buf::kOutput;
          if (j + 1 < me.numChildren) {
            s->steps.push_back(alignedStep(off, len, me.children[j], src, Buf::kOutput, -1));
          } else if (me.parent >= 0) {
            s->steps.push_back(alignedStep(off, len, me.children[j], src, Buf::kNone, me.parent));
          } else {
            s->steps.push_back(alignedStep(off, len, me.children[j], src, Buf::kOutput, -1, /*finalize=*/true));
          }
        }
        break;
      case kInteriorDown:
        for (int j = 0; j < me.numChildren; ++j) {
          if (j == 0 && me.parent >= 0) {
            s->steps.push_back(alignedStep(off, len, me.parent, Buf::kNone, Buf::kOutput, me.children[0]));
          } else {
            s->steps.push_back(alignedStep(off, len, -1, Buf::kOutput, Buf::kNone, me.children[j]));
          }
        }
        break;
      case kLeafUp:
        s->steps.push_back(alignedStep(off, len, -1, Buf::kInput, Buf::kNone, me.parent));
        break;
      case kLeafDown:
        s->steps.push_back(alignedStep(off, len, me.parent, Buf::kNone, Buf::kOutput, -1));
        break;
    }
  }
}

}  // namespace mixccl::algo
