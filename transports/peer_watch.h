// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Rate-limited liveness check of a peer process on this host, for transports whose waits would
// otherwise never notice a dead peer (shared memory has no EOF). The engine polls connections in a
// busy loop, so the check itself must be nearly free: idle() only counts calls and reads the
// (vDSO, syscall-free) monotonic clock every kCallsPerClockRead calls; kill(pid, 0) runs once
// per kCheckInterval of uninterrupted waiting.
// The pid must be one of this process's pid namespace: a peer in another one (containers sharing
// /dev/shm) reports a pid that names nothing here, or another process, so the core hands such a
// peer to the transports with pid 0 (TransportPeer::otherPidSpace), which turns the check off;
// a transport that can watch it otherwise uses due() alone for the rate (shm: its rank page's lock).

#include <signal.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace mixccl {

class PeerWatch {
 public:
  static constexpr std::chrono::milliseconds kCheckInterval{100};
  static constexpr uint32_t kCallsPerClockRead = 64;

  PeerWatch() = default;
  explicit PeerWatch(int32_t pid) : pid_(pid) {}
  void setPid(int32_t pid) { pid_ = pid; }

  // The connection moved data: restart the idle period.
  void progressed() { idleCalls_ = 0; }

  // One more call that found nothing to do. True once per kCheckInterval of uninterrupted
  // idling: time for the checks that cost a system call (peerAlive(), a transport's own).
  // A wait's clock starts at its kCallsPerClockRead-th idle call, not its first: most waits of a
  // small collective end within a few polls, and a clock reading costs about as much as the
  // rest of such a call's poll (a stall is thus timed from microseconds after it began).
  bool due() {
    if (++idleCalls_ % kCallsPerClockRead != 0) return false;
    auto now = std::chrono::steady_clock::now();
    if (idleCalls_ == kCallsPerClockRead) {
      idleSince_ = now;  // the wait's first reading: start its clock
      return false;
    }
    if (now - idleSince_ < kCheckInterval) return false;
    idleSince_ = now;
    return true;
  }

  // False once the peer process is known to be gone. EPERM means the pid exists but belongs to
  // someone else (pid reuse is not worth guarding against within one job's lifetime); only
  // ESRCH proves death. A killed process stays a zombie until its parent reaps it, and kill()
  // still finds it, so the state in /proc/<pid>/stat decides (Z or X: dead).
  bool peerAlive() const {
    if (pid_ <= 0) return true;
    if (kill(pid_, 0) != 0) return errno != ESRCH;
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid_));
    FILE* f = fopen(path, "re");
    if (f == nullptr) return true;  // no /proc: trust kill()
    const size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    // "pid (comm) S ...": comm may contain anything, so the state follows the last ')'.
    const char* close = strrchr(buf, ')');
    return close == nullptr || close[1] != ' ' || (close[2] != 'Z' && close[2] != 'X');
  }

  // due() and peerAlive() together: false once the peer is known to be gone.
  bool idle() { return pid_ <= 0 || !due() || peerAlive(); }

  int32_t pid() const { return pid_; }

 private:
  int32_t pid_ = 0;
  uint64_t idleCalls_ = 0;
  std::chrono::steady_clock::time_point idleSince_{};
};

}  // namespace mixccl
