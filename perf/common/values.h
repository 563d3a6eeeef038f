// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Input and expected values for `-c 1`. Every element is checked for exact equality, so inputs are
// chosen to make each type/op exact whatever order the library reduces in:
//  - data movement (gathers, broadcast, alltoall, sendrecv): each element is a hash of (rank,
//    index) copied bit for bit; a misplaced or stale element shows.
//  - sum, mulsum, integer avg: 0/1/2 per element, with ranks past a per-type limit giving 0, so
//    every partial sum (times the mulsum scalar 2) is a small exactly representable integer.
//  - prod: mostly 1 with a few 2s from the first six ranks (at most 4).
//  - max/min: small integers, negative ones too for signed types.
//  - avg on floats: NCCL pre-multiplies by 1/nranks (rounded to the type), so each rank contributes
//    the same value v per element and v is taken only from values for which v*(1/n) rounded, any
//    partial sum of those, and the total n*(v/n) are exact: the result is v exactly.
#pragma once

#include <cstddef>
#include <vector>

#include "perf/common/collective.h"
#include "perf/common/datatypes.h"

namespace mixccl::perf {

class ValuePlan {
 public:
  ValuePlan(const CollDesc& desc, OpKind op, const TypeInfo& type, int nranks);

  // Writes rank `rank`'s input elements [0, n) into buf.
  void fillInput(void* buf, size_t n, int rank) const;
  // Counts elements of `recv` (recvCount elements of this rank) that differ from what the
  // collective must leave there.
  size_t countWrong(const void* recv, size_t recvCount, int rank, int root, size_t param) const;

  static constexpr double kMulSumScalar = 2.0;  // a power of two keeps mulsum exact
  // Per-element values of float avg (the same on every rank); empty for other ops.
  const std::vector<double>& avgValues() const { return avgGood_; }

 private:
  double reduceInput(int rank, size_t idx) const;
  double reduceExpected(size_t idx) const;

  const CollDesc& desc_;
  OpKind op_;
  TypeInfo type_;
  int nranks_;
  int sumLimit_;                 // ranks at or past this contribute 0 to sums
  std::vector<double> avgGood_;  // per-element values of float avg (identical on all ranks)
};

}  // namespace mixccl::perf
