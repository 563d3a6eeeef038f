// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "transports/shm/shm_rank_page.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <new>

#include "common/pid_space.h"
#include "transports/shm/shm_stale.h"

namespace mixccl {
namespace {

constexpr size_t kPageBytes = 4096;

}  // namespace

std::string shmRankPageName(uint64_t commHash, uint64_t nonce, int rank) {
  char name[96];
  snprintf(name, sizeof(name), "/mixccl-%016" PRIx64 "-%016" PRIx64 "-rank%d", commHash, nonce, rank);
  return name;
}

ShmRankPage::~ShmRankPage() {
  if (header_ != nullptr) munmap(header_, kPageBytes);
}

ShmRankPage::ShmRankPage(ShmRankPage&& o) noexcept : header_(o.header_) { o.header_ = nullptr; }

ShmRankPage& ShmRankPage::operator=(ShmRankPage&& o) noexcept {
  if (this != &o) {
    if (header_ != nullptr) munmap(header_, kPageBytes);
    header_ = o.header_;
    o.header_ = nullptr;
  }
  return *this;
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
  void* base = MAP_FAILED;
  if (ftruncate(fd, kPageBytes) == 0) base = mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  if (base == MAP_FAILED) {
    shm_unlink(name.c_str());
    return fail(Result::kSystemError, "shm: cannot size or map /dev/shm%s: %s", name.c_str(), strerror(err));
  }
  auto* h = new (base) ShmRankPageHeader{};
  h->pid = static_cast<int32_t>(getpid());
  h->rank = rank;
  h->pidSpace = localPidSpace();
  h->magic.store(kShmRankPageMagic, std::memory_order_release);
  *out = ShmRankPage();
  out->header_ = h;
  return Result::kSuccess;
}

Result ShmRankPage::attach(uint64_t commHash, uint64_t nonce, int rank, uint32_t peersOfOwner, ShmRankPage* out) {
  const std::string name = shmRankPageName(commHash, nonce, rank);
  *out = ShmRankPage();
  int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0 && errno == ENOENT) {
    out->missing_ = true;
    return Result::kSuccess;
  }
  if (fd < 0) {
    return fail(Result::kSystemError, "shm: cannot open the state page of rank %d (/dev/shm%s): %s", rank, name.c_str(),
                strerror(errno));
  }
  struct stat st {};
  void* base = MAP_FAILED;
  if (fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) >= kPageBytes) {
    base = mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  close(fd);
  if (base == MAP_FAILED) {
    return fail(Result::kSystemError, "shm: cannot map the state page of rank %d (/dev/shm%s)", rank, name.c_str());
  }
  auto* h = static_cast<ShmRankPageHeader*>(base);
  if (h->magic.load(std::memory_order_acquire) != kShmRankPageMagic) {
    munmap(base, kPageBytes);
    return fail(Result::kInvalidUsage, "shm: /dev/shm%s is not a mixccl rank page of this version", name.c_str());
  }
  // The last of the owner's peers to map it removes the name: from then on only mappings hold it.
  if (h->mappedBy.fetch_add(1, std::memory_order_acq_rel) + 1 == peersOfOwner) shm_unlink(name.c_str());
  out->header_ = h;
  return Result::kSuccess;
}

}  // namespace mixccl
