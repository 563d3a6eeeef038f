// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Rate-limited liveness check of a peer process on this host, for transports whose waits would
// otherwise never notice a dead peer (shared memory has no EOF). The engine polls connections in a
// busy loop, so the check itself must be nearly free: idle() only counts calls and reads the
// (vDSO, syscall-free) monotonic clock every kCallsPerClockRead calls; kill(pid, 0) runs once
// per kCheckInterval of uninterrupted waiting.

#include <signal.h>

#include <cerrno>
#include <chrono>
#include <cstdint>

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

  // One more call that found nothing to do. False once the peer process is known to be gone.
  bool idle() {
    if (pid_ <= 0 || ++idleCalls_ % kCallsPerClockRead != 1) return true;
    auto now = std::chrono::steady_clock::now();
    if (idleCalls_ == 1) {
      idleSince_ = now;  // first idle call of a new wait: start its clock
      return true;
    }
    if (now - idleSince_ < kCheckInterval) return true;
    idleSince_ = now;
    // EPERM means the pid exists but belongs to someone else (pid reuse is not worth guarding
    // against within one job's lifetime); only ESRCH proves death.
    return !(kill(pid_, 0) != 0 && errno == ESRCH);
  }

  int32_t pid() const { return pid_; }

 private:
  int32_t pid_ = 0;
  uint64_t idleCalls_ = 0;
  std::chrono::steady_clock::time_point idleSince_{};
};

}  // namespace mixccl
