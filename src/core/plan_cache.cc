// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "src/core/plan_cache.h"

#include <utility>

namespace mixccl {

bool PlanCache::findDecision(const PlanKey& key, algo::Algo* algo, double* seconds,
                             std::shared_ptr<const algo::Schedule>* schedule) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Entry& e : entries_) {
    if (e.used && e.decided && e.key.sameDecision(key)) {
      e.lastUse = ++clock_;
      *algo = e.algo;
      *seconds = e.seconds;
      if (schedule != nullptr && e.schedule != nullptr && e.key.sameShape(key) && e.key.algo == e.algo) {
        *schedule = e.schedule;
      }
      return true;
    }
  }
  return false;
}

bool PlanCache::findDecisionAsCaller(const PlanKey& key, algo::Algo* algo, double* seconds,
                                     std::shared_ptr<const algo::Schedule>* schedule) {
  for (const Recent& r : recent_) {
    if (r.schedule != nullptr && r.key.sameDecision(key) && r.key.sameShape(key)) {
      *algo = r.key.algo;
      *seconds = r.seconds;
      if (*schedule != r.schedule) *schedule = r.schedule;  // the same one: no reference to count
      return true;
    }
  }
  std::shared_ptr<const algo::Schedule> found;
  const bool hit = findDecision(key, algo, seconds, &found);
  if (found != nullptr) {
    Recent& r = recent_[nextRecent_];
    nextRecent_ = (nextRecent_ + 1) % kRecent;
    r.key = key;
    r.key.algo = *algo;
    r.seconds = *seconds;
    r.schedule = found;
  }
  *schedule = std::move(found);
  return hit;
}

void PlanCache::storeDecision(const PlanKey& key, algo::Algo algo, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Entry& e : entries_) {
    if (e.used && e.decided && e.key.sameDecision(key)) return;
  }
  Entry& e = slotFor(key);
  e.decided = true;
  e.algo = algo;
  e.seconds = seconds;
}

std::shared_ptr<const algo::Schedule> PlanCache::findSchedule(const PlanKey& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Entry& e : entries_) {
    if (e.used && e.schedule != nullptr && e.key.sameSchedule(key)) {
      e.lastUse = ++clock_;
      return e.schedule;
    }
  }
  return nullptr;
}

void PlanCache::storeSchedule(const PlanKey& key, std::shared_ptr<const algo::Schedule> s) {
  if (s->steps.size() > kMaxSteps) return;
  std::lock_guard<std::mutex> lock(mutex_);
  // The decision's entry takes the schedule when it has none or the same key (the common case:
  // one root, one chunk size); otherwise the schedule gets an entry of its own, without a
  // decision.
  for (Entry& e : entries_) {
    if (e.used && e.key.sameDecision(key) && (e.schedule == nullptr || e.key.sameSchedule(key))) {
      e.key = key;
      e.schedule = std::move(s);
      return;
    }
  }
  Entry& e = slotFor(key);
  e.schedule = std::move(s);
}

PlanCache::Entry& PlanCache::slotFor(const PlanKey& key) {
  Entry* victim = &entries_[0];
  for (Entry& e : entries_) {
    if (!e.used) {
      victim = &e;
      break;
    }
    if (e.lastUse < victim->lastUse) victim = &e;
  }
  *victim = Entry{};
  victim->used = true;
  victim->key = key;
  victim->lastUse = ++clock_;
  return *victim;
}

}  // namespace mixccl
