// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "transports/shm/shm_rank_page.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <new>
#include <utility>

#include "common/log.h"
#include "common/pid_space.h"
#include "transports/shm/shm_stale.h"

namespace mixccl {
namespace {

constexpr size_t kPageBytes = 4096;

// The rank pages this process owns and holds locked, by name, with the owner's descriptor.
std::mutex gOwnMutex;
std::map<std::string, int>& ownPages() {
  static auto* pages = new std::map<std::string, int>();  // never destroyed: pages outlive exit handlers
  return *pages;
}

// A thread of the parent may have held the lock at fork(), and the pages and their locks are the
// parent's (POSIX locks are not inherited): the child starts with a fresh lock and owns none, so a
// communicator it creates does not hang in the stale sweep.
void afterForkInChild() {
  new (&gOwnMutex) std::mutex();
  ownPages().clear();
}
[[maybe_unused]] const int gAtFork = pthread_atfork(nullptr, nullptr, afterForkInChild);

struct flock pageLock(short type) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = 0;
  fl.l_len = 1;
  return fl;
}

}  // namespace

std::unique_lock<std::mutex> lockOwnRankPages() { return std::unique_lock<std::mutex>(gOwnMutex); }

bool ownsRankPage(const std::string& name) { return ownPages().count(name) != 0; }

std::string shmRankPageName(uint64_t commHash, uint64_t nonce, int rank) {
  char name[96];
  snprintf(name, sizeof(name), "/mixccl-%016" PRIx64 "-%016" PRIx64 "-rank%d", commHash, nonce, rank);
  return name;
}

ShmRankPage::~ShmRankPage() { reset(); }

void ShmRankPage::reset() {
  keepOwnerLock(false);                // the owner: releases its lock (a departing owner marked its page closed first)
  if (watchFd_ >= 0) close(watchFd_);  // another process's page: no lock of ours on it
  watchFd_ = -1;
  if (header_ != nullptr) munmap(header_, kPageBytes);
  header_ = nullptr;
  missing_ = false;
}

ShmRankPage::ShmRankPage(ShmRankPage&& o) noexcept { *this = std::move(o); }

ShmRankPage& ShmRankPage::operator=(ShmRankPage&& o) noexcept {
  if (this != &o) {
    reset();
    header_ = o.header_;
    missing_ = o.missing_;
    ownName_ = std::move(o.ownName_);
    watchFd_ = o.watchFd_;
    o.header_ = nullptr;
    o.missing_ = false;
    o.ownName_.clear();
    o.watchFd_ = -1;
  }
  return *this;
}

void ShmRankPage::keepOwnerLock(bool keep) {
  if (keep || ownName_.empty()) return;
  if (header_ != nullptr) header_->ownerLocked.store(0, std::memory_order_release);
  auto guard = lockOwnRankPages();
  auto it = ownPages().find(ownName_);
  if (it != ownPages().end()) {
    close(it->second);  // releases the lock
    ownPages().erase(it);
  }
  ownName_.clear();
}

bool ShmRankPage::ownerAlive() const {
  if (watchFd_ < 0) return true;
  struct flock fl = pageLock(F_WRLCK);
  if (fcntl(watchFd_, F_GETLK, &fl) != 0) return true;  // cannot tell: the safe side
  return fl.l_type != F_UNLCK;
}

Result ShmRankPage::create(uint64_t commHash, uint64_t nonce, int rank, ShmRankPage* out) {
  const std::string name = shmRankPageName(commHash, nonce, rank);
  int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  int openErr = errno;
  // Only a leftover can hold a name with our fresh nonce; remove it if its owner is gone.
  if (fd < 0 && openErr == EEXIST && reclaimStaleShm(name)) {
    fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    openErr = errno;
  }
  if (fd < 0) {
    return fail(Result::kSystemError, "shm: cannot create /dev/shm%s: %s (set NCCL_SHM_DISABLE=1 to use TCP)",
                name.c_str(), strerror(openErr));
  }
  // The page is reserved before it is written: tmpfs allocates on first touch, and on a full
  // /dev/shm (docker's 64 MiB default, used up) that first write would kill this process with
  // SIGBUS inside init instead of failing it (filesystems that cannot reserve allocate lazily).
  if (ftruncate(fd, kPageBytes) != 0) {
    const int err = errno;
    close(fd);
    shm_unlink(name.c_str());
    return fail(Result::kSystemError, "shm: cannot size /dev/shm%s: %s", name.c_str(), strerror(err));
  }
  const int reserveErr = posix_fallocate(fd, 0, kPageBytes);
  if (reserveErr != 0 && reserveErr != EOPNOTSUPP && reserveErr != EINVAL) {
    close(fd);
    shm_unlink(name.c_str());
    return fail(Result::kSystemError,
                "shm: cannot reserve the %zu-byte state page /dev/shm%s of rank %d: %s; make room in /dev/shm, "
                "enlarge it (docker: --shm-size) or set NCCL_SHM_DISABLE=1",
                kPageBytes, name.c_str(), rank, strerror(reserveErr));
  }
  void* base = mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  if (base == MAP_FAILED) {
    close(fd);
    shm_unlink(name.c_str());
    return fail(Result::kSystemError, "shm: cannot map /dev/shm%s: %s", name.c_str(), strerror(err));
  }
  auto* h = new (base) ShmRankPageHeader{};
  h->pid = static_cast<int32_t>(getpid());
  h->rank = rank;
  h->pidSpace = localPidSpace();
  *out = ShmRankPage();
  out->header_ = h;
  {
    // Registered before it is locked, under the mutex a stale sweep of this process holds while it
    // has the file open, so no close of ours can release the lock from now on.
    auto guard = lockOwnRankPages();
    struct flock fl = pageLock(F_WRLCK);
    if (fcntl(fd, F_SETLK, &fl) == 0) {
      ownPages()[name] = fd;
      out->ownName_ = name;
      h->ownerLocked.store(1, std::memory_order_relaxed);
    } else {
      // Peers in other pid namespaces then cannot watch this rank (they wait for their deadline
      // if it dies); those in ours use its pid.
      MIXCCL_WARN("shm: cannot lock /dev/shm%s (%s): ranks in other pid namespaces will not notice if this one dies",
                  name.c_str(), strerror(errno));
      close(fd);
    }
  }
  h->magic.store(kShmRankPageMagic, std::memory_order_release);
  return Result::kSuccess;
}

Result ShmRankPage::attach(uint64_t commHash, uint64_t nonce, int rank, uint32_t peersOfOwner, bool watchOwner,
                           ShmRankPage* out) {
  const std::string name = shmRankPageName(commHash, nonce, rank);
  *out = ShmRankPage();
  void* base = MAP_FAILED;
  int keptFd = -1;
  {
    auto guard = lockOwnRankPages();
    auto own = ownPages().find(name);
    if (own != ownPages().end()) {
      // A rank of this process (ranks as threads): map it through the owner's descriptor, since
      // opening and closing one of our own would drop the owner's lock. Same pid space: no watch.
      base = mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, own->second, 0);
      if (base == MAP_FAILED) {
        return fail(Result::kSystemError, "shm: cannot map the state page of rank %d (/dev/shm%s): %s", rank,
                    name.c_str(), strerror(errno));
      }
    } else {
      int fd = shm_open(name.c_str(), O_RDWR, 0600);
      if (fd < 0 && errno == ENOENT) {
        out->missing_ = true;
        return Result::kSuccess;
      }
      if (fd < 0) {
        return fail(Result::kSystemError, "shm: cannot open the state page of rank %d (/dev/shm%s): %s", rank,
                    name.c_str(), strerror(errno));
      }
      struct stat st {};
      if (fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) >= kPageBytes) {
        base = mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      }
      if (watchOwner && base != MAP_FAILED) {
        keptFd = fd;  // another process's page: our descriptor holds no lock of ours
      } else {
        close(fd);
      }
    }
  }
  if (base == MAP_FAILED) {
    return fail(Result::kSystemError, "shm: cannot map the state page of rank %d (/dev/shm%s)", rank, name.c_str());
  }
  auto* h = static_cast<ShmRankPageHeader*>(base);
  if (h->magic.load(std::memory_order_acquire) != kShmRankPageMagic) {
    munmap(base, kPageBytes);
    if (keptFd >= 0) close(keptFd);
    return fail(Result::kInvalidUsage, "shm: /dev/shm%s is not a mixccl rank page of this version", name.c_str());
  }
  // An owner that holds no lock (an older build, or its lock failed) cannot be watched by it.
  if (keptFd >= 0 && h->ownerLocked.load(std::memory_order_relaxed) == 0) {
    close(keptFd);
    keptFd = -1;
  }
  // The last of the owner's peers to map it removes the name: from then on only mappings hold it.
  if (h->mappedBy.fetch_add(1, std::memory_order_acq_rel) + 1 == peersOfOwner) shm_unlink(name.c_str());
  out->header_ = h;
  out->watchFd_ = keptFd;
  return Result::kSuccess;
}

}  // namespace mixccl
