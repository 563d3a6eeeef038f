// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "transports/rdma/rdma_reg_cache.h"

#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "transports/rdma/rdma_lib.h"

namespace mixccl {

RdmaRegCache::~RdmaRegCache() {
  for (auto& [key, e] : entries_) {
    if (e.mr != nullptr) rdma().deregMr(e.mr);
  }
}

size_t RdmaRegCache::bytesIn(const ibv_pd* pd) const {
  size_t n = 0;
  for (const auto& [key, e] : entries_) n += key.first == pd && e.mr != nullptr ? e.bytes : 0;
  return n;
}

// Deregisters unpinned regions of `pd`, least recently used first, until `need` more bytes fit.
void RdmaRegCache::evict(const ibv_pd* pd, size_t need) {
  size_t used = bytesIn(pd);
  while (used + need > limit_) {
    auto victim = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->first.first != pd || it->second.mr == nullptr || it->second.pins > 0) continue;
      if (victim == entries_.end() || it->second.lastUse < victim->second.lastUse) victim = it;
    }
    if (victim == entries_.end()) return;
    used -= victim->second.bytes;
    release(victim);
  }
}

void RdmaRegCache::release(std::map<Key, Entry>::iterator it) {
  if (it->second.mr != nullptr) {
    byMr_.erase(it->second.mr);
    rdma().deregMr(it->second.mr);
  }
  entries_.erase(it);
}

ibv_mr* RdmaRegCache::pin(ibv_pd* pd, const MemRegion& reg) {
  const Key key{pd, reg.id};
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    Entry e;
    e.bytes = reg.bytes;
    if (reg.bytes <= limit_) {
      evict(pd, reg.bytes);
      if (bytesIn(pd) + reg.bytes <= limit_) {
        // Remote read: the peer fetches what this rank sends; local write: a read lands here.
        e.mr =
            rdma().regMr(pd, const_cast<void*>(reg.base), reg.bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
        if (e.mr == nullptr) {
          MIXCCL_INFO(log::kNet,
                      "NET/IB : cannot register %zu bytes at %p (ncclCommRegister): %s; copying through slots",
                      reg.bytes, reg.base, strerror(errno));
        }
      } else {
        MIXCCL_INFO(log::kNet,
                    "NET/IB : %zu registered bytes at %p do not fit MIXCCL_IB_REG_CACHE beside the regions in use; "
                    "copying through slots",
                    reg.bytes, reg.base);
        return nullptr;  // may fit later: not remembered as failed
      }
    } else {
      MIXCCL_INFO(log::kNet,
                  "NET/IB : %zu registered bytes at %p exceed MIXCCL_IB_REG_CACHE (%zu); copying through slots",
                  reg.bytes, reg.base, limit_);
    }
    it = entries_.emplace(key, e).first;
    if (e.mr != nullptr) byMr_[e.mr] = key;
  }
  Entry& e = it->second;
  if (e.mr == nullptr || e.dropped) return nullptr;
  ++e.pins;
  e.lastUse = ++clock_;
  return e.mr;
}

void RdmaRegCache::unpin(ibv_mr* mr) {
  auto k = byMr_.find(mr);
  if (k == byMr_.end()) return;
  auto it = entries_.find(k->second);
  if (--it->second.pins == 0 && it->second.dropped) release(it);
}

void RdmaRegCache::drop(const std::vector<uint64_t>& ids) {
  for (uint64_t id : ids) {
    for (auto it = entries_.begin(); it != entries_.end();) {
      auto next = std::next(it);
      if (it->first.second == id) {
        if (it->second.pins == 0) {
          release(it);
        } else {
          it->second.dropped = true;
        }
      }
      it = next;
    }
  }
}

}  // namespace mixccl
