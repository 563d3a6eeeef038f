// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Memory regions of registered user buffers (ncclCommRegister), for zero-copy messages: the
// sender's buffer is read by the receiver's device, the receiver's buffer is written by its own.
// A region is registered with a device's protection domain the first time a message uses it and
// kept for the next calls, pinned while a message in flight uses it. Past `limit` bytes per
// protection domain the least recently used unpinned regions are deregistered; a registration
// the user dropped goes as soon as no message uses it.
//
// Only registrations the user made are cached: their ids (UserRegions) promise the range stays
// mapped. Caching regions of arbitrary malloc'd memory would hand the device stale pages after
// the application freed and reallocated them, and nothing here would notice.
//
// Single-threaded (the transport's thread).

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "transports/transport.h"

namespace mixccl {

class RdmaRegCache {
 public:
  explicit RdmaRegCache(size_t limit) : limit_(limit) {}
  ~RdmaRegCache();
  RdmaRegCache(const RdmaRegCache&) = delete;
  RdmaRegCache& operator=(const RdmaRegCache&) = delete;

  // The memory region of `reg` in `pd`, pinned until unpin(). nullptr when it cannot be had
  // (larger than the limit, or the device refused: the caller copies instead; the reason is
  // logged once per region).
  ibv_mr* pin(ibv_pd* pd, const MemRegion& reg);
  void unpin(ibv_mr* mr);
  // The user dropped these registrations.
  void drop(const std::vector<uint64_t>& ids);
  size_t bytesIn(const ibv_pd* pd) const;

 private:
  struct Entry {
    ibv_mr* mr = nullptr;  // nullptr: registration failed; not tried again
    size_t bytes = 0;
    int pins = 0;
    uint64_t lastUse = 0;
    bool dropped = false;
  };
  using Key = std::pair<const ibv_pd*, uint64_t>;
  void release(std::map<Key, Entry>::iterator it);
  void evict(const ibv_pd* pd, size_t need);

  size_t limit_;
  uint64_t clock_ = 0;
  std::map<Key, Entry> entries_;
  std::map<const ibv_mr*, Key> byMr_;
};

}  // namespace mixccl
