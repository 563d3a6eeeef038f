// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "src/core/comm_split.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common/log.h"
#include "common/wire.h"

namespace mixccl {
namespace {

// Bootstrap tag of the message that carries a shrunk child's unique id.
constexpr uint32_t kShrinkTag = 0x53480000u;

// `r` as it is; a failure of the rank that made the child's id (its rank 0, whose process runs the
// child's root) also cancels that root. The other members may hold the id already and wait at
// the root for every member, this rank included, which will not come: a shrink whose id could not
// reach one survivor (it aborted) left those it did reach waiting until MIXCCL_TIMEOUT. Told by
// the root, they fail at once, with this rank's reason. A no-op once the root has served the child.
Result cancelChildOnFailure(Result r, const char* fn, int parentRank, const UniqueIdData& id) {
  if (r == Result::kSuccess) return r;
  const std::string why = std::string(fn) + ": parent rank " + std::to_string(parentRank) +
                          ", which made the new communicator's id, failed: " + lastError();
  cancelRoot(id, why);
  return r;
}

// Communicator::create for a split's or shrink's child, whose init an abort of `parent` stops
// (addInitChild): a watchdog that aborts the parent while this call waits at the child's root for
// a member that never comes would otherwise wait for it (waitForCalls: 30 s, then a leak).
Result createChild(Communicator* parent, const UniqueIdData& id, int nranks, int rank, const CommOptions& options,
                   std::unique_ptr<Communicator>* out) {
  std::unique_ptr<Communicator> child = Communicator::makeUninitialised(nranks, rank, options);
  parent->addInitChild(child.get());
  const Result r = child->init(id);
  parent->removeInitChild(child.get());
  MIXCCL_TRY(r);
  *out = std::move(child);
  return Result::kSuccess;
}

}  // namespace

Result splitCommunicator(Communicator* parent, int color, int key, const CommOptions& options,
                         std::unique_ptr<Communicator>* out) {
  const int n = parent->nranks();
  const int me = parent->rank();
  out->reset();
  // Round 1: everyone's (color, key).
  std::vector<uint8_t> ck(8 * static_cast<size_t>(n));
  {
    WireWriter w(ck.data() + 8 * me, 8);
    w.u32(static_cast<uint32_t>(color < 0 ? -1 : color));
    w.u32(static_cast<uint32_t>(key));
  }
  MIXCCL_TRY(parent->bootstrap()->allGather(ck.data(), 8));
  std::vector<std::pair<int, int>> members;  // (key, parent rank) of my color
  for (int r = 0; r < n; ++r) {
    WireReader rd(ck.data() + 8 * r, 8);
    int c = static_cast<int>(rd.u32());
    int k = static_cast<int>(rd.u32());
    if (color >= 0 && c == color) members.emplace_back(k, r);
  }
  std::sort(members.begin(), members.end());
  int newRank = -1;
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].second == me) newRank = static_cast<int>(i);
  }
  // Round 2: each child's rank 0 publishes a fresh unique id.
  std::vector<uint8_t> ids(UniqueIdData::kBytes * static_cast<size_t>(n));
  UniqueIdData made;
  if (newRank == 0) {
    MIXCCL_TRY(createUniqueId(&made, /*honourCommIdEnv=*/false));
    made.encode(ids.data() + UniqueIdData::kBytes * me);
  }
  Result gathered = parent->bootstrap()->allGather(ids.data(), UniqueIdData::kBytes);
  MIXCCL_TRY(newRank == 0 ? cancelChildOnFailure(gathered, "ncclCommSplit", me, made) : gathered);
  if (color < 0) return Result::kSuccess;
  UniqueIdData id;
  MIXCCL_TRY(UniqueIdData::decode(ids.data() + UniqueIdData::kBytes * members[0].second, &id));
  MIXCCL_INFO(log::kInit, "split: color %d key %d -> rank %d of %zu", color, key, newRank, members.size());
  const Result r = createChild(parent, id, static_cast<int>(members.size()), newRank, options, out);
  return newRank == 0 ? cancelChildOnFailure(r, "ncclCommSplit", me, id) : r;
}

Result shrinkCommunicator(Communicator* parent, const int* exclude, int excludeCount, const CommOptions& options,
                          std::unique_ptr<Communicator>* out) {
  const int n = parent->nranks();
  const int me = parent->rank();
  out->reset();
  std::vector<bool> excluded(n, false);
  for (int i = 0; i < excludeCount; ++i) excluded[exclude[i]] = true;
  if (excluded[me]) {
    return fail(Result::kInvalidUsage,
                "ncclCommShrink: rank %d is in its own exclude list; excluded ranks must not "
                "call ncclCommShrink",
                me);
  }
  std::vector<int> survivors;
  for (int r = 0; r < n; ++r) {
    if (!excluded[r]) survivors.push_back(r);
  }
  const int newRank = static_cast<int>(std::find(survivors.begin(), survivors.end(), me) - survivors.begin());
  const uint32_t tag = kShrinkTag | static_cast<uint32_t>(parent->nextShrinkSeq(survivors) & 0xffff);
  uint8_t wire[UniqueIdData::kBytes];
  UniqueIdData id;
  if (newRank == 0) {
    MIXCCL_TRY(createUniqueId(&id, /*honourCommIdEnv=*/false));
    id.encode(wire);
    for (size_t i = 1; i < survivors.size(); ++i) {
      MIXCCL_TRY(cancelChildOnFailure(parent->bootstrap()->send(survivors[i], tag, wire, sizeof(wire)),
                                      "ncclCommShrink", me, id));
    }
  } else {
    MIXCCL_TRY(parent->bootstrap()->recv(survivors[0], tag, wire, sizeof(wire)));
    MIXCCL_TRY(UniqueIdData::decode(wire, &id));
  }
  MIXCCL_INFO(log::kInit, "shrink: excluding %d rank(s) -> rank %d of %zu", excludeCount, newRank, survivors.size());
  const Result r = createChild(parent, id, static_cast<int>(survivors.size()), newRank, options, out);
  return newRank == 0 ? cancelChildOnFailure(r, "ncclCommShrink", me, id) : r;
}

}  // namespace mixccl
