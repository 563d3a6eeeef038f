// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// What a communicator remembers of recent calls, so that a training loop repeating the same
// collectives neither asks the tuner nor rebuilds the schedule every time: for small messages
// those two were a third of the call's cost (docs/PERFORMANCE.md).
//
// A decision (the tuner's algorithm and estimate) is a pure function of the collective, count,
// datatype and the communicator's fixed facts; a schedule, of those plus the root and the chunk
// size. So a hit returns exactly what recomputing would. Entries are few (kEntries, least
// recently used out) and a schedule is kept only while it is small, so memory stays bounded
// whatever the calls.
//
// Threading: any thread (the caller's prepareOp, the progress thread's planOp); one mutex, held
// only for the lookup or the store, never while building. findDecisionAsCaller is the caller's.

#include <cstdint>
#include <memory>
#include <mutex>

#include "algorithms/schedule.h"
#include "common/types.h"

namespace mixccl {

struct PlanKey {
  CollKind kind = CollKind::kAllReduce;
  DataType dtype = DataType::kFloat32;
  uint64_t count = 0;
  int root = 0;
  uint64_t chunkElems = 0;
  algo::Algo algo = algo::Algo::kDefault;
  bool stageInput = false;  // algo::CollArgs::stageInput

  bool sameDecision(const PlanKey& o) const { return kind == o.kind && dtype == o.dtype && count == o.count; }
  // What a schedule depends on besides the decision and its algorithm.
  bool sameShape(const PlanKey& o) const {
    return root == o.root && chunkElems == o.chunkElems && stageInput == o.stageInput;
  }
  bool sameSchedule(const PlanKey& o) const { return sameDecision(o) && sameShape(o) && algo == o.algo; }
};

class PlanCache {
 public:
  // The decision for key's (kind, dtype, count), if remembered. When the same entry also holds
  // the schedule for key's root and chunk size under that decision's algorithm (a repeated call),
  // *schedule receives it too, so such a call takes the lock once; otherwise *schedule is left as
  // it is.
  bool findDecision(const PlanKey& key, algo::Algo* algo, double* seconds,
                    std::shared_ptr<const algo::Schedule>* schedule = nullptr);
  // findDecision() for the thread that holds the communicator's caller slot (prepareOp) only. It
  // remembers the last kRecent hits that carried a schedule (a send and a receive of a group
  // alternate) and answers a repeat of one of them without the mutex, whose two locked
  // instructions were about a tenth of a small call outside the wait. Unlike
  // findDecision(), *schedule always receives the answer: the schedule, or nullptr when none is
  // remembered for key's root and chunk size (also on a miss).
  bool findDecisionAsCaller(const PlanKey& key, algo::Algo* algo, double* seconds,
                            std::shared_ptr<const algo::Schedule>* schedule);
  void storeDecision(const PlanKey& key, algo::Algo algo, double seconds);
  // The schedule for the whole key, if remembered (nullptr otherwise).
  std::shared_ptr<const algo::Schedule> findSchedule(const PlanKey& key);
  // Keeps `s` when it is small enough to be worth keeping.
  void storeSchedule(const PlanKey& key, std::shared_ptr<const algo::Schedule> s);

  // Schedules of more steps are not kept (~250 KB per schedule at most), here or by group.cc's
  // spare operations.
  static constexpr size_t kMaxSteps = 4096;

 private:
  static constexpr int kEntries = 16;
  struct Entry {
    bool used = false;
    bool decided = false;  // algo and seconds hold the tuner's decision for key's call
    PlanKey key;
    algo::Algo algo = algo::Algo::kDefault;
    double seconds = 0;
    std::shared_ptr<const algo::Schedule> schedule;
    uint64_t lastUse = 0;
  };
  Entry& slotFor(const PlanKey& key);  // the entry to (re)use for key; mutex_ held

  // findDecisionAsCaller's last hits (key.algo is the decision), replaced in turn; the caller's
  // alone, no mutex.
  static constexpr int kRecent = 4;
  struct Recent {
    PlanKey key;
    double seconds = 0;
    std::shared_ptr<const algo::Schedule> schedule;  // nullptr: nothing remembered
  };
  Recent recent_[kRecent];
  int nextRecent_ = 0;

  std::mutex mutex_;
  Entry entries_[kEntries];
  uint64_t clock_ = 0;
};

}  // namespace mixccl
