// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "src/core/user_regions.h"

#include <algorithm>

namespace mixccl {

uint64_t UserRegions::add(const void* base, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t id = nextId_++;
  live_.push_back(MemRegion{base, bytes, id});
  count_.store(live_.size(), std::memory_order_release);
  return id;
}

void UserRegions::remove(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find_if(live_.begin(), live_.end(), [id](const MemRegion& r) { return r.id == id; });
  if (it == live_.end()) return;
  live_.erase(it);
  droppedIds_.push_back(id);
  count_.store(live_.size(), std::memory_order_release);
  dropped_.store(true, std::memory_order_release);
}

MemRegion UserRegions::find(const void* p, size_t bytes) const {
  if (empty()) return {};
  const auto start = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(mutex_);
  for (const MemRegion& r : live_) {
    const auto base = reinterpret_cast<uintptr_t>(r.base);
    if (start >= base && start - base <= r.bytes && bytes <= r.bytes - (start - base)) return r;
  }
  return {};
}

std::vector<uint64_t> UserRegions::takeDropped() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<uint64_t> out;
  out.swap(droppedIds_);
  dropped_.store(false, std::memory_order_release);
  return out;
}

}  // namespace mixccl
