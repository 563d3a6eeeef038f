// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// NCCL_ALGO values that force every collective's alternative algorithms, so a suite written for
// the tuner's choices also runs every algorithm through the engine.

#include <string>

#include "algorithms/schedule.h"

namespace mixccl::testing {

// NCCL_ALGO naming, for each collective that has one, its k-th algorithm (k >= 1) besides the
// standing ring / pairwise / direct one; "" when no collective has a k-th.
inline std::string algorithmPolicy(int k) {
  const char* names[] = {"allreduce",     "broadcast", "reduce", "allgather",
                         "reducescatter", "alltoall",  "gather", "scatter"};
  std::string policy;
  for (int kind = 0; kind < 8; ++kind) {
    int seen = 0;
    for (int a = 1; a < algo::kNumAlgos; ++a) {
      const auto al = static_cast<algo::Algo>(a);
      if (al == algo::Algo::kRing || al == algo::Algo::kPairwise || al == algo::Algo::kDirect) continue;
      if (!algo::algoSupports(al, static_cast<CollKind>(kind)) || ++seen != k) continue;
      policy += std::string(policy.empty() ? "" : ";") + names[kind] + ":" + algo::algoName(al);
    }
  }
  return policy;
}

}  // namespace mixccl::testing
