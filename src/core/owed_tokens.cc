// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "src/core/owed_tokens.h"

#include <cstddef>
#include <cstdio>
#include <string>

namespace mixccl {

size_t OwedTokens::limit(size_t laneMessages) { return laneMessages > 2 ? laneMessages - 2 : 0; }

size_t OwedTokens::debtorIndex(int peer) const {
  size_t i = 0;
  while (i < debtors_.size() && debtors_[i].peer != peer) ++i;
  return i;
}

void OwedTokens::add(int peer, const OpIdentity& op, size_t limit) {
  owed_.push_back(Owed{peer, op});
  const size_t i = debtorIndex(peer);
  if (i == debtors_.size()) debtors_.push_back(Debtor{peer, 0, limit});
  ++debtors_[i].owed;
  debtors_[i].limit = limit;
}

int OwedTokens::peerOverLimit() const {
  for (const Debtor& d : debtors_) {
    if (d.owed > d.limit) return d.peer;
  }
  return -1;
}

Result OwedTokens::match(int peer, size_t bytes, uint64_t stamp) {
  size_t i = 0;
  while (owed_[i].peer != peer) ++i;  // from(peer) holds
  const OpIdentity& op = owed_[i].op;
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
  // Usually the oldest (one debtor: a broadcast root's neighbour): a deque's erase() there costs
  // ten times its pop_front(), and this runs once per closing token.
  if (i == 0) {
    owed_.pop_front();
  } else {
    owed_.erase(owed_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  const size_t d = debtorIndex(peer);
  if (--debtors_[d].owed == 0) debtors_.erase(debtors_.begin() + static_cast<std::ptrdiff_t>(d));
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
