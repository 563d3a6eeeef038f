// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// A private /dev/shm for a multi-process job, so "no segment left behind" can be asserted
// exactly while CTest runs other shm jobs in parallel (a global count of /dev/shm races with
// them). Call it in a freshly forked, single-threaded process that then forks the ranks: they
// inherit the mount namespace and see only each other's segments.

#include <dirent.h>
#include <sched.h>
#include <sys/mount.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace mixccl::testing {

// Enters a new mount namespace with an empty tmpfs on /dev/shm, of `sizeBytes` (0: tmpfs's
// default, half the memory) to see what a full /dev/shm does. Returns false (with the reason in
// *why) where the process may not do so (not root, no CAP_SYS_ADMIN, seccomp).
inline bool enterPrivateDevShm(std::string* why, size_t sizeBytes = 0) {
  if (unshare(CLONE_NEWNS) != 0) {
    *why = std::string("unshare(CLONE_NEWNS): ") + strerror(errno);
    return false;
  }
  // Keep our mounts out of the parent namespace (systemd makes / shared by default).
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
      mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV,
            (sizeBytes == 0 ? std::string("mode=1777") : "mode=1777,size=" + std::to_string(sizeBytes)).c_str()) != 0) {
    *why = std::string("mount tmpfs on /dev/shm: ") + strerror(errno);
    return false;
  }
  return true;
}

// Number of mixccl segments in /dev/shm (all of them: use inside a private /dev/shm).
inline int countMixcclShmSegments() {
  int n = 0;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) n += strncmp(e->d_name, "mixccl-", 7) == 0 ? 1 : 0;
    closedir(d);
  }
  return n;
}

}  // namespace mixccl::testing
