// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "src/core/owed_tokens.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "common/config.h"

namespace mixccl {

size_t OwedTokens::limit() {
  const int64_t depth = config::getInt(config::Knob::kFifoDepth);
  return static_cast<size_t>(std::max<int64_t>(0, depth - 2));
}

bool OwedTokens::from(int peer) const {
  for (const Owed& o : owed_) {
    if (o.peer == peer) return true;
  }
  return false;
}

Result OwedTokens::match(int peer, size_t bytes, uint64_t stamp) {
  size_t i = 0;
  while (owed_[i].peer != peer) ++i;  // from(peer) holds
  const OpIdentity op = owed_[i].op;
  if (stamp != op.stamp) {
    return stampMismatch(op, stamp, peer,
                         " (found after that call returned: this rank was its root and only sent, and read the "
                         "difference where the closing token of that rank was due)");
  }
  if (bytes != 0) {
    return fail(Result::kInvalidUsage,
                "%s (seq %llu) on rank %d: rank %d sent %zu bytes where this rank, the root, expected its empty "
                "closing token: the ranks called different operations",
                collName(op.kind), static_cast<unsigned long long>(op.seq), op.rank, peer, bytes);
  }
  owed_.erase(owed_.begin() + static_cast<std::ptrdiff_t>(i));
  return Result::kSuccess;
}

std::string OwedTokens::describe(int peer) const {
  for (const Owed& o : owed_) {
    if (o.peer != peer) continue;
    char buf[128];
    snprintf(buf, sizeof(buf), "the closing token of %s (seq %llu) from rank %d", collName(o.op.kind),
             static_cast<unsigned long long>(o.op.seq), peer);
    return buf;
  }
  return "no closing token";
}

}  // namespace mixccl
