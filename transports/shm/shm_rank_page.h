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
//
// Liveness across pid namespaces: a peer in another pid namespace (containers sharing /dev/shm)
// cannot use the owner's pid, so the page also carries a lock. The owner keeps a descriptor of its
// page open and holds a POSIX record lock (fcntl F_SETLK, F_WRLCK on byte 0) while any same-host
// peer lives in another pid space; such a peer keeps a descriptor of its own and tests the lock
// (F_GETLK) where it would call kill(): no conflicting lock means the owner process is gone. The
// kernel drops the lock when the owner exits, before it becomes a zombie, whatever killed it, and
// fork children never inherit it (a data loader forked from a rank cannot keep a dead rank
// "alive"); lock conflicts are per inode, so they work across pid namespaces.
// The catch of POSIX locks: a process loses all its locks on a file when it closes ANY descriptor
// of that file. So this process never opens a page it owns (a registry of them, by name, under
// one mutex that also covers the stale sweep's opens: ownsRankPage), and ranks running as threads
// of one process attach their in-process peers' pages through the owner's descriptor. A lock says
// nothing between ranks of one process, which share a pid space and use kill() as before.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "common/result.h"

namespace mixccl {

struct ShmRankPageHeader {
  std::atomic<uint64_t> magic;  // kShmRankPageMagic once initialised (stored last, release)
  int32_t pid;                  // owner
  int32_t rank;
  std::atomic<uint32_t> mappedBy;     // same-host peers that mapped this page
  std::atomic<uint32_t> closed;       // 1 once the owner's communicator is gone
  uint64_t pidSpace;                  // the owner's localPidSpace(): whose pid namespace `pid` lives in
  std::atomic<uint32_t> ownerLocked;  // 1 while the owner holds the page's lock (0: an older build)
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

  // The owner: creates and initialises its page (mode 0600) and takes its lock.
  static Result create(uint64_t commHash, uint64_t nonce, int rank, ShmRankPage* out);
  // A peer: maps the page of `rank` and counts itself in; unlinks the name when it is the
  // `peersOfOwner`-th to do so. A page that is already gone means that rank's communicator is
  // gone (destroyed right after init, or failed): the result then reads as closed. `watchOwner`
  // (a peer in another pid space): keep a descriptor to test the owner's lock (ownerAlive()).
  static Result attach(uint64_t commHash, uint64_t nonce, int rank, uint32_t peersOfOwner, bool watchOwner,
                       ShmRankPage* out);

  // The owner, once it knows its peers: keeps the lock (and its descriptor) while `keep` (some
  // same-host peer lives in another pid space), else releases both. Called before any peer waits.
  void keepOwnerLock(bool keep);
  // A peer that attached with watchOwner: whether the owner holds the lock, so that ownerAlive()
  // can tell (false for an owner whose build does not lock, or whose lock failed).
  bool watchesOwner() const { return watchFd_ >= 0; }
  // False once the owner process is gone (its lock is free). True when it cannot tell. One fcntl.
  bool ownerAlive() const;

  bool valid() const { return header_ != nullptr; }
  bool closed() const {
    return missing_ || (header_ != nullptr && header_->closed.load(std::memory_order_acquire) != 0);
  }
  void markClosed() {
    if (header_ != nullptr) header_->closed.store(1, std::memory_order_release);
  }

 private:
  void reset();

  ShmRankPageHeader* header_ = nullptr;
  bool missing_ = false;
  std::string ownName_;  // the owner: its page's name, while registered as locked by this process
  int watchFd_ = -1;     // a peer: its descriptor of the page, to test the owner's lock
};

// Whether `name` ("/mixccl-...") is a rank page this process owns and holds locked. The caller
// holds the guard of lockOwnRankPages() from before this check until it closed every descriptor
// of `name` it opened: closing one would release the owner's lock (see above).
std::unique_lock<std::mutex> lockOwnRankPages();
bool ownsRankPage(const std::string& name);

}  // namespace mixccl
