// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// NCCL_ALGO values that force algorithms through the engine, so a suite written for the tuner's
// choices also runs every algorithm. Everything here is derived from algo::algoSupports at run
// time: an algorithm (or a collective's new form of one) is picked up without editing a list.

#include <string>
#include <vector>

#include "algorithms/schedule.h"

namespace mixccl::testing {

// The collectives NCCL_ALGO can name, by CollKind value (kSend/kRecv have no algorithm to force).
constexpr int kNumForcibleKinds = 8;
inline const char* policyCollName(int kind) {
  static const char* const kNames[kNumForcibleKinds] = {"allreduce",     "broadcast", "reduce", "allgather",
                                                        "reducescatter", "alltoall",  "gather", "scatter"};
  return kNames[kind];
}

inline bool isStandingAlgo(algo::Algo a) {
  return a == algo::Algo::kRing || a == algo::Algo::kPairwise || a == algo::Algo::kDirect;
}

// NCCL_ALGO naming, for each collective that has one, its k-th algorithm (k >= 1) besides the
// standing ring / pairwise / direct one; "" when no collective has a k-th.
inline std::string algorithmPolicy(int k) {
  std::string policy;
  for (int kind = 0; kind < kNumForcibleKinds; ++kind) {
    int seen = 0;
    for (int a = 1; a < algo::kNumAlgos; ++a) {
      const auto al = static_cast<algo::Algo>(a);
      if (isStandingAlgo(al)) continue;
      if (!algo::algoSupports(al, static_cast<CollKind>(kind)) || ++seen != k) continue;
      policy += std::string(policy.empty() ? "" : ";") + policyCollName(kind) + ":" + algo::algoName(al);
    }
  }
  return policy;
}

// The collectives `a` has a form of, one bit per CollKind value (kDefault: all of them).
inline uint32_t collectivesOf(algo::Algo a) {
  uint32_t kinds = 0;
  for (int kind = 0; kind < kNumForcibleKinds; ++kind) {
    if (algo::algoSupports(a, static_cast<CollKind>(kind))) kinds |= 1u << kind;
  }
  return kinds;
}

constexpr uint32_t kAllCollectives = (1u << kNumForcibleKinds) - 1;

inline bool runsCollective(uint32_t kinds, CollKind kind) { return (kinds & (1u << static_cast<int>(kind))) != 0; }

// Every algorithm that has a form of at least one collective, the standing ones included (the
// tuner prefers others at some sizes, so only forcing runs ring at every count), in Algo order.
inline std::vector<algo::Algo> forcibleAlgorithms() {
  std::vector<algo::Algo> out;
  for (int a = 1; a < algo::kNumAlgos; ++a) {
    if (collectivesOf(static_cast<algo::Algo>(a)) != 0) out.push_back(static_cast<algo::Algo>(a));
  }
  return out;
}

// NCCL_ALGO forcing `a` for every collective it has a form of ("" for kDefault: the tuner chooses).
inline std::string algorithmPolicy(algo::Algo a) {
  if (a == algo::Algo::kDefault) return "";
  std::string policy;
  const uint32_t kinds = collectivesOf(a);
  for (int kind = 0; kind < kNumForcibleKinds; ++kind) {
    if ((kinds & (1u << kind)) == 0) continue;
    policy += std::string(policy.empty() ? "" : ";") + policyCollName(kind) + ":" + algo::algoName(a);
  }
  return policy;
}

// The algorithm's name as a test-name part: "double-binary-tree" -> "double_binary_tree".
inline std::string algoTestName(algo::Algo a) {
  std::string s = algo::algoName(a);
  for (char& c : s) {
    if (c == '-') c = '_';
  }
  return s;
}

}  // namespace mixccl::testing
