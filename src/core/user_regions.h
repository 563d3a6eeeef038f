// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// The user buffers a communicator was told about (ncclCommRegister, ncclCommWindowRegister): the
// promise that [base, base + bytes) stays mapped until it is deregistered, which is what lets a
// transport pin it once (RDMA memory regions) and send from or receive into it without a copy.
//
// Threading: add()/remove() run on user threads, find() and takeDropped() on the thread running
// the communicator's operations; one mutex guards the table (held for a short scan, never across
// a call out). Ids count up from 1 and are never reused, so whatever a transport keeps under an
// id cannot be confused with a later registration of the same addresses.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "transports/transport.h"

namespace mixccl {

class UserRegions {
 public:
  uint64_t add(const void* base, size_t bytes);
  void remove(uint64_t id);
  // The registration holding all of [p, p + bytes); id 0 when none does.
  MemRegion find(const void* p, size_t bytes) const;
  // Nothing registered: find() would say so (a load, no lock; most jobs never register).
  bool empty() const { return count_.load(std::memory_order_acquire) == 0; }
  // Ids removed since the last call, for Transport::dropRegions().
  bool hasDropped() const { return dropped_.load(std::memory_order_acquire); }
  std::vector<uint64_t> takeDropped();

 private:
  mutable std::mutex mutex_;
  std::vector<MemRegion> live_;
  std::vector<uint64_t> droppedIds_;
  uint64_t nextId_ = 1;
  std::atomic<size_t> count_{0};
  std::atomic<bool> dropped_{false};
};

}  // namespace mixccl
