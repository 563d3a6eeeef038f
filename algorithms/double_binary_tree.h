// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// The two trees of the double binary tree all-reduce (double_binary_tree_all_reduce.cc states
// how they are built and why they have this shape); cost.cc reads their shape for the latency
// term, the tests check their properties. Pure functions, any thread.

#include <cstdint>

namespace mixccl::algo {

// One rank's place in one of the two trees.
struct DbtNode {
  int parent = -1;  // a rank; -1 at the root
  int depth = 0;    // edges from the root
  int numChildren = 0;
  int children[4] = {-1, -1, -1, -1};  // ranks, in the order the reduced value is sent down
};

// Bounds of the shape both trees share, for nranks >= 2: every rank is at most `depth` edges
// below the root, and a value the root sends down reaches every rank within `broadcastHops`
// sends (one send per hop, children served in order). depth + broadcastHops is the smallest
// sum any binary tree over floor(nranks/2) leaves allows (see the .cc).
struct DbtShape {
  int depth = 0;
  int broadcastHops = 0;
};
DbtShape dbtShape(int nranks);

// `rank`'s node in tree `tree` (0 or 1) over nranks >= 2 ranks, in layout "above" (rank 0 of
// the tree's numbering is the root, over the core) or "below" (the extra ranks hang under the
// core's root); nranks < 4 is always below.
DbtNode dbtNode(int nranks, int tree, int rank, bool rootAbove);

// Whether the trees use layout "above" for a tree of `pieces` pipelined pieces.
bool dbtRootAbove(int nranks, uint64_t pieces);

// Elements per pipelined message of one tree carrying halfElems > 0 elements: at most
// chunkElems, and small enough that the tree gets depth + broadcastHops messages to overlap,
// but never below chunkElems / kMinPieceFraction (each message costs a latency of its own).
constexpr uint64_t kMinPieceFraction = 64;
uint64_t dbtPieceElems(uint64_t halfElems, uint64_t chunkElems, int nranks);

}  // namespace mixccl::algo
