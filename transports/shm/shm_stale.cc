// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "transports/shm/shm_stale.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>

#include "common/log.h"
#include "common/pid_space.h"
#include "transports/peer_watch.h"
#include "transports/shm/shm_rank_page.h"
#include "transports/shm/shm_segment.h"

namespace mixccl {
namespace {

// Enough bytes for either header; both start with their magic.
constexpr size_t kHeaderBytes = 64;
static_assert(sizeof(ShmRankPageHeader) <= kHeaderBytes && sizeof(ShmHeader) <= kHeaderBytes);

template <class T>
T field(const uint8_t* buf, size_t offset) {
  T v;
  memcpy(&v, buf + offset, sizeof(T));
  return v;
}

// The owners and pid space a validated header names; false when the header is not one of ours.
struct Owners {
  int32_t pids[2] = {0, 0};  // 0: no such owner (a lane's sender before it mapped)
  int rank = -1;
  uint64_t pidSpace = 0;
  const char* what = "";  // "<what> <rank>" names the object in messages
};

bool readOwners(const uint8_t* buf, Owners* out) {
  const uint64_t magic = field<uint64_t>(buf, 0);
  if (magic == kShmRankPageMagic) {
    out->pids[0] = field<int32_t>(buf, offsetof(ShmRankPageHeader, pid));
    out->rank = field<int32_t>(buf, offsetof(ShmRankPageHeader, rank));
    out->pidSpace = field<uint64_t>(buf, offsetof(ShmRankPageHeader, pidSpace));
    out->what = "the rank page of rank";
    return out->pids[0] > 0;
  }
  const uint32_t version = field<uint32_t>(buf, offsetof(ShmHeader, version));
  if (magic == kShmMagic && version >= kShmOwnersSinceVersion && version <= kShmVersion) {
    out->pids[0] = field<int32_t>(buf, offsetof(ShmHeader, receiverPid));
    out->pids[1] = field<int32_t>(buf, offsetof(ShmHeader, senderPid));
    out->rank = field<int32_t>(buf, offsetof(ShmHeader, srcRank));
    out->pidSpace = field<uint64_t>(buf, offsetof(ShmHeader, pidSpace));
    out->what = "a lane segment from rank";
    return out->pids[0] > 0 && out->pids[1] >= 0;
  }
  return false;
}

}  // namespace

uint64_t shmNonce() {
  uint64_t v = 0;
  if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != static_cast<ssize_t>(sizeof(v))) {
    std::random_device rd;  // no getrandom (old kernel, seccomp): the library's other source
    v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }
  return v == 0 ? 1 : v;
}

bool reclaimStaleShm(const std::string& name, bool judgeAge) {
  const uint64_t space = localPidSpace();
  if (space == 0) return false;
  // A rank page this process owns is not stale, and closing a descriptor of it would drop the
  // owner's lock (shm_rank_page.h): held until our descriptor is closed.
  auto ownPages = lockOwnRankPages();
  if (ownsRankPage(name)) return false;
  // O_RDONLY: judging needs no write access, and it creates nothing. O_NONBLOCK: /dev/shm is
  // world-writable, and a FIFO with a name of ours would otherwise block this open (and every
  // communicator's init) until some process opened it for writing; it is no file of ours, so the
  // type check below leaves it alone. Nor is a file another user owns: never ours to remove.
  const int fd = shm_open(name.c_str(), O_RDONLY | O_NONBLOCK, 0);
  if (fd < 0) return false;
  uint8_t buf[kHeaderBytes] = {};
  struct stat st {};
  const bool read = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
                    static_cast<size_t>(st.st_size) >= kHeaderBytes &&
                    pread(fd, buf, sizeof(buf), 0) == static_cast<ssize_t>(sizeof(buf));
  close(fd);
  if (!read) return false;
  const time_t changed = st.st_mtime > st.st_ctime ? st.st_mtime : st.st_ctime;
  if (judgeAge && time(nullptr) - changed < static_cast<time_t>(kShmStaleMinAge.count())) return false;
  Owners owners;
  if (!readOwners(buf, &owners) || owners.pidSpace != space) return false;
  for (int32_t pid : owners.pids) {
    if (pid > 0 && PeerWatch(pid).peerAlive()) return false;
  }
  if (shm_unlink(name.c_str()) != 0) return false;  // ENOENT: another rank's sweep was first
  MIXCCL_WARN(
      "shm: removed /dev/shm%s, %s %d created by pid %d, a crashed or killed job's leftover: no process of "
      "it runs on this host any more",
      name.c_str(), owners.what, owners.rank, owners.pids[0]);
  return true;
}

namespace {

int sweep(const std::string& prefix, bool judgeAge) {
  DIR* d = opendir("/dev/shm");
  if (d == nullptr) return 0;
  int removed = 0;
  while (dirent* e = readdir(d)) {
    if (strncmp(e->d_name, prefix.c_str(), prefix.size()) != 0) continue;
    if (e->d_type != DT_REG && e->d_type != DT_UNKNOWN) continue;  // a FIFO, socket or link: not ours
    removed += reclaimStaleShm(std::string("/") + e->d_name, judgeAge) ? 1 : 0;
  }
  closedir(d);
  return removed;
}

}  // namespace

int sweepStaleShm() { return sweep("mixccl-", true); }

int reclaimCommShm(uint64_t commHash) {
  // The prefix of every name of this communicator (shmRankPageName, shmLaneName).
  char prefix[40];
  snprintf(prefix, sizeof(prefix), "mixccl-%016" PRIx64 "-", commHash);
  return sweep(prefix, false);
}

}  // namespace mixccl
