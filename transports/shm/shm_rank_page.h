// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// One small shm page per rank and communicator: "/mixccl-<commHash>-<nonce>-rank<r>", where the
// nonce is the owner's per-run random number (shm_stale.h), published in its shm blob. It tells the
// rank's same-host peers that its communicator went away (aborted or destroyed, e.g. after an
// error) while its process lives on. Shared memory has no EOF and a live pid proves nothing, so
// without it a peer waiting on this rank (a message, a free slot, a lane segment this rank was
// to create) would wait for its deadline.
//
// Life cycle: a rank creates its page in listen(), before the peer exchange, so every same-host
// peer finds it in setPeers() and maps it; the peer that brings the map count to the number of
// same-host peers unlinks the name. A departing transport sets `closed` in its own page and
// unlinks its own name (ENOENT ignored); one whose set-up never finished also unlinks every
// other rank's page name it knows, so ranks that died before everyone mapped leave nothing behind,
// and removes the pages of this communicator whose owners are dead though their names were never
// learnt (a rank killed between listen() and the exchange: reclaimCommShm, shm_stale.h).

#include <atomic>
#include <cstdint>
#include <string>

#include "common/result.h"

namespace mixccl {

struct ShmRankPageHeader {
  std::atomic<uint64_t> magic;  // kShmRankPageMagic once initialised (stored last, release)
  int32_t pid;                  // owner
  int32_t rank;
  std::atomic<uint32_t> mappedBy;  // same-host peers that mapped this page
  std::atomic<uint32_t> closed;    // 1 once the owner's communicator is gone
  uint64_t pidSpace;               // the owner's localPidSpace(): whose pid namespace `pid` lives in
};

// Version 2 added pidSpace (and the nonce to the name).
constexpr uint64_t kShmRankPageMagic = 0x32454741504b524dull;  // "MRKPAGE2" little-endian

std::string shmRankPageName(uint64_t commHash, uint64_t nonce, int rank);

// A mapping of one rank page. Move-only; unmaps on destruction.
class ShmRankPage {
 public:
  ShmRankPage() = default;
  ~ShmRankPage();
  ShmRankPage(ShmRankPage&& o) noexcept;
  ShmRankPage& operator=(ShmRankPage&& o) noexcept;
  ShmRankPage(const ShmRankPage&) = delete;
  ShmRankPage& operator=(const ShmRankPage&) = delete;

  // The owner: creates and initialises its page (mode 0600).
  static Result create(uint64_t commHash, uint64_t nonce, int rank, ShmRankPage* out);
  // A peer: maps the page of `rank` and counts itself in; unlinks the name when it is the
  // `peersOfOwner`-th to do so. A page that is already gone means that rank's communicator is
  // gone (destroyed right after init, or failed): the result then reads as closed.
  static Result attach(uint64_t commHash, uint64_t nonce, int rank, uint32_t peersOfOwner, ShmRankPage* out);

  bool valid() const { return header_ != nullptr; }
  bool closed() const {
    return missing_ || (header_ != nullptr && header_->closed.load(std::memory_order_acquire) != 0);
  }
  void markClosed() {
    if (header_ != nullptr) header_->closed.store(1, std::memory_order_release);
  }

 private:
  ShmRankPageHeader* header_ = nullptr;
  bool missing_ = false;
};

}  // namespace mixccl
