// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "transports/shm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include "common/pid_space.h"
#include "transports/shm/shm_stale.h"

namespace mixccl {

std::string shmLaneName(uint64_t commHash, uint64_t receiverNonce, int src, int dst, int lane) {
  char name[96];
  snprintf(name, sizeof(name), "/mixccl-%016" PRIx64 "-%016" PRIx64 "-%d-%d-%d", commHash, receiverNonce, src, dst,
           lane);
  return name;
}

ShmMapping::~ShmMapping() {
  if (base_ != nullptr) munmap(base_, bytes_ + ring_);
  if (unreservedFd_ >= 0) close(unreservedFd_);
}

ShmMapping::ShmMapping(ShmMapping&& o) noexcept
    : base_(o.base_),
      bytes_(o.bytes_),
      ring_(o.ring_),
      unreservedFd_(o.unreservedFd_),
      ringOffset_(o.ringOffset_),
      reserved_(o.reserved_),
      prefaulted_(o.prefaulted_) {
  o.base_ = nullptr;
  o.bytes_ = 0;
  o.ring_ = 0;
  o.unreservedFd_ = -1;
}

ShmMapping& ShmMapping::operator=(ShmMapping&& o) noexcept {
  if (this != &o) {
    if (base_ != nullptr) munmap(base_, bytes_ + ring_);
    if (unreservedFd_ >= 0) close(unreservedFd_);
    base_ = o.base_;
    bytes_ = o.bytes_;
    ring_ = o.ring_;
    unreservedFd_ = o.unreservedFd_;
    ringOffset_ = o.ringOffset_;
    reserved_ = o.reserved_;
    prefaulted_ = o.prefaulted_;
    o.base_ = nullptr;
    o.bytes_ = 0;
    o.ring_ = 0;
    o.unreservedFd_ = -1;
  }
  return *this;
}

uint8_t* ShmMapping::ringAlias(const void* p) const {
  const uint8_t* ring = at(bytes_ - ring_);
  const auto* q = static_cast<const uint8_t*>(p);
  if (ring_ == 0 || q < ring || q >= ring + ring_) return nullptr;
  return const_cast<uint8_t*>(q) + ring_;
}

// Maps the `total` bytes of segment `fd` and, right behind them, its slot ring [ringOffset, total)
// a second time (*ring = its size), so that slots that wrap past the last one are still one range
// of addresses (ringAlias). Where the second mapping cannot be made (an offset that is not a
// multiple of the system's page size), the segment is mapped once and *ring is 0.
Result ShmMapping::mapSegment(int fd, size_t total, size_t ringOffset, void** base, size_t* ring) {
  *ring = 0;
  const long page = sysconf(_SC_PAGESIZE);
  const size_t alias = ringOffset > 0 && ringOffset < total && page > 0 && ringOffset % static_cast<size_t>(page) == 0
                           ? total - ringOffset
                           : 0;
  if (alias > 0) {
    void* span = mmap(nullptr, total + alias, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (span != MAP_FAILED) {
      auto* b = static_cast<uint8_t*>(span);
      if (mmap(b, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) != MAP_FAILED &&
          mmap(b + total, alias, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, static_cast<off_t>(ringOffset)) !=
              MAP_FAILED) {
        *base = span;
        *ring = alias;
        return Result::kSuccess;
      }
      munmap(span, total + alias);
    }
  }
  *base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return *base == MAP_FAILED ? Result::kSystemError : Result::kSuccess;
}

namespace {

// MemTotal and MemAvailable from /proc/meminfo, in bytes; false when they cannot be read.
bool readMemInfo(uint64_t* total, uint64_t* available) {
  FILE* f = fopen("/proc/meminfo", "r");
  if (f == nullptr) return false;
  char line[128];
  int found = 0;
  while (found < 2 && fgets(line, sizeof(line), f) != nullptr) {
    unsigned long long kb = 0;
    if (sscanf(line, "MemTotal: %llu kB", &kb) == 1) {
      *total = kb * 1024;
      ++found;
    } else if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
      *available = kb * 1024;
      ++found;
    }
  }
  fclose(f);
  return found == 2;
}

// posix_fallocate of a whole segment: 0, or the errno to report (filesystems that cannot reserve
// are left to allocate lazily, as before: *reserved says whether the pages exist now). ENOMEM when
// the reservation would not leave the host enough memory (shmReservationFits): /dev/shm is often
// as large as RAM, so tmpfs would grant it and the kernel's OOM killer would later pick a
// process, of this job or of another.
int reserveSegment(int fd, size_t bytes, bool* reserved) {
  *reserved = false;
  uint64_t total = 0, available = 0;
  if (readMemInfo(&total, &available) && !shmReservationFits(bytes, available, total)) return ENOMEM;
  const int rc = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  *reserved = rc == 0;
  return rc == EOPNOTSUPP || rc == EINVAL ? 0 : rc;
}

const char* shmSpaceAdvice(int err) {
  return err == ENOSPC || err == ENOMEM
             ? ". /dev/shm or the host's free memory is too small for the lanes (each holds MIXCCL_FIFO_DEPTH x "
               "MIXCCL_CHUNK_SIZE bytes; a rank may open two per peer of its host): lower MIXCCL_CHUNK_SIZE or "
               "MIXCCL_FIFO_DEPTH, enlarge /dev/shm (docker: --shm-size), or set NCCL_SHM_DISABLE=1"
             : "";
}

}  // namespace

bool shmReservationFits(uint64_t bytes, uint64_t memAvailable, uint64_t memTotal) {
  const uint64_t keep = std::max<uint64_t>(uint64_t{1} << 30, memTotal / 10);
  return bytes <= memAvailable && memAvailable - bytes >= keep;
}

Result ShmMapping::reservePages() {
  if (unreservedFd_ < 0) return Result::kSuccess;
  bool reserved = false;
  const int rc = reserveSegment(unreservedFd_, bytes_, &reserved);
  // The descriptor stays until a reservation succeeds: the next call (the core retries at the
  // lane's next use, and reserve() is idempotent) tries again instead of reporting pages that
  // are not there, which the sender would meet as SIGBUS.
  if (rc != 0) {
    return fail(Result::kSystemError, "shm: reserving the %zu bytes of a lane from rank %d failed: %s%s", bytes_,
                header()->srcRank, strerror(rc), shmSpaceAdvice(rc));
  }
  close(unreservedFd_);
  unreservedFd_ = -1;
  reserved_ = reserved;
  return Result::kSuccess;
}

size_t lastLevelCacheBytes() {
  // sysfs describes one instance of each cache, as the cores that share it see it (lscpu reads
  // it too); the C library's sysconf may sum a package's instances (320 MiB for ten 32 MiB L3s).
  int bestLevel = 0;
  size_t best = 0;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    FILE* f = fopen((dir + "level").c_str(), "r");
    if (f == nullptr) break;
    int level = 0;
    const bool haveLevel = fscanf(f, "%d", &level) == 1;
    fclose(f);
    f = fopen((dir + "size").c_str(), "r");
    if (f == nullptr) continue;
    unsigned long long kib = 0;
    const bool haveSize = fscanf(f, "%lluK", &kib) == 1;
    fclose(f);
    if (haveLevel && haveSize && level > bestLevel) {
      bestLevel = level;
      best = static_cast<size_t>(kib) * 1024;
    }
  }
  if (best > 0) return best;
  for (int name : {_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
    const long bytes = sysconf(name);
    if (bytes > 0) return static_cast<size_t>(bytes);
  }
  return size_t{8} << 20;
}

void ShmMapping::prefault() {
  if (!reserved_ || prefaulted_ || ringOffset_ == 0 || ringOffset_ >= bytes_) return;
  prefaulted_ = true;
  uint8_t* ring = at(ringOffset_);
  const size_t bytes = bytes_ - ringOffset_;
  if (madvise(ring, bytes, MADV_POPULATE_WRITE) == 0) return;
  // Before Linux 5.14 (EINVAL): one read per page maps it as well (the pages exist: reserved).
  if (errno != EINVAL) return;  // ENOMEM, EFAULT...: left to fault in as it is used
  for (size_t off = 0; off < bytes; off += kShmPage) (void)*static_cast<volatile uint8_t*>(ring + off);
}

Result ShmMapping::create(const std::string& name, uint32_t depth, size_t slotBytes, int srcRank, bool reserve,
                          ShmMapping* out, bool pack) {
  const uint32_t ringSlots = pack ? depth + kShmPackSpareSlots : depth;
  size_t total = shmTotalBytes(depth, slotBytes, ringSlots);
  int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  int err = errno;
  // Only a leftover can hold a name with our fresh nonce; remove it if its owners are gone.
  if (fd < 0 && err == EEXIST && reclaimStaleShm(name)) {
    fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    err = errno;
  }
  if (fd < 0) {
    return fail(Result::kSystemError, "shm: cannot create segment /dev/shm%s for the lane from rank %d: %s%s",
                name.c_str(), srcRank, strerror(err),
                err == EEXIST ? " (an object of that name exists and its owner still runs; remove it if it does not)"
                              : " (check that /dev/shm is mounted and writable, or set NCCL_SHM_DISABLE=1)");
  }
  // From here on the name exists; every failure path removes it again.
  auto cleanup = [&](int err, const char* what) {
    close(fd);
    shm_unlink(name.c_str());
    return fail(Result::kSystemError, "shm: %s of segment /dev/shm%s (%zu bytes, lane from rank %d) failed: %s%s", what,
                name.c_str(), total, srcRank, strerror(err), shmSpaceAdvice(err));
  };
  if (ftruncate(fd, static_cast<off_t>(total)) != 0) return cleanup(errno, "ftruncate");
  // Reserve the pages now: tmpfs allocates lazily, and running out of it later would kill the
  // process with SIGBUS in the middle of a collective instead of failing init cleanly.
  bool reserved = false;
  if (reserve) {
    const int rc = reserveSegment(fd, total, &reserved);
    if (rc != 0) return cleanup(rc, "posix_fallocate");
  } else {
    // The lines and small blocks before the slot ring at least: a sender writes a small message
    // there on any lane, also one opened only to look (reservePages() says why the rest waits).
    const int rc = posix_fallocate(fd, 0, static_cast<off_t>(shmSlotsOffset(depth)));
    if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL) return cleanup(rc, "posix_fallocate");
  }
  void* base = nullptr;
  size_t ring = 0;
  if (mapSegment(fd, total, shmSlotsOffset(depth), &base, &ring) != Result::kSuccess) return cleanup(errno, "mmap");

  ShmMapping m;
  m.base_ = base;
  m.bytes_ = total;
  m.ring_ = ring;
  m.ringOffset_ = shmSlotsOffset(depth);
  m.reserved_ = reserved;
  if (reserve) {
    close(fd);
  } else {
    m.unreservedFd_ = fd;
  }
  // The pages are zero, which is a valid value of every field; placement-new makes the atomics
  // proper objects in this process. The magic goes last, with release (see the layout comment).
  ShmHeader* h = new (base) ShmHeader{};
  h->version = kShmVersion;
  h->slotCount = depth;
  h->slotBytes = slotBytes;
  h->totalBytes = total;
  h->receiverPid = static_cast<int32_t>(getpid());
  h->srcRank = srcRank;
  h->pidSpace = localPidSpace();
  h->ringSlots = ringSlots;
  new (m.tail()) std::atomic<uint64_t>(0);
  for (uint32_t i = 0; i < shmLineCount(depth); ++i) new (&m.lines()[i]) ShmSlotLine{};
  h->magic.store(kShmMagic, std::memory_order_release);
  *out = std::move(m);
  return Result::kSuccess;
}

Result ShmMapping::open(const std::string& name, size_t minBytes, size_t maxBytes, size_t ringOffset, ShmMapping* out) {
  int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) {
    if (errno == ENOENT) return Result::kInProgress;  // the receiver has not created it yet
    return fail(Result::kSystemError, "shm: cannot open segment /dev/shm%s: %s (set NCCL_SHM_DISABLE=1 to use TCP)",
                name.c_str(), strerror(errno));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return fail(Result::kSystemError, "shm: fstat of /dev/shm%s failed: %s", name.c_str(), strerror(err));
  }
  if (static_cast<size_t>(st.st_size) < minBytes || static_cast<size_t>(st.st_size) > maxBytes) {
    // Created but not yet sized: the receiver is between shm_open and ftruncate. Retry later.
    close(fd);
    if (st.st_size == 0) return Result::kInProgress;
    return fail(Result::kInternalError,
                "shm: segment /dev/shm%s has %lld bytes, expected %zu%s: ranks disagree on MIXCCL_CHUNK_SIZE or "
                "MIXCCL_FIFO_DEPTH; set them identically on every rank",
                name.c_str(), static_cast<long long>(st.st_size), minBytes,
                maxBytes > minBytes ? " or a few slots more" : "");
  }
  const size_t expectedBytes = static_cast<size_t>(st.st_size);
  void* base = nullptr;
  size_t ring = 0;
  const Result mapped = mapSegment(fd, expectedBytes, ringOffset, &base, &ring);
  int err = errno;
  close(fd);
  if (mapped != Result::kSuccess) {
    return fail(Result::kSystemError, "shm: mmap of /dev/shm%s (%zu bytes) failed: %s", name.c_str(), expectedBytes,
                strerror(err));
  }
  ShmMapping m;
  m.base_ = base;
  m.bytes_ = expectedBytes;
  m.ring_ = ring;
  m.ringOffset_ = ringOffset;
  m.reserved_ = static_cast<uint64_t>(st.st_blocks) * 512 >= expectedBytes;
  *out = std::move(m);
  return Result::kSuccess;
}

}  // namespace mixccl
