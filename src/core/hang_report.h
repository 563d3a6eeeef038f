// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Hang forensics (docs/DEBUGGING.md). When a job stops moving, each rank can say where it is:
// which operation (and its sequence number) it waits in, which step, which peer it waits for,
// and the last collective sequence number it has seen from each peer it still needs. Put side by
// side, the reports of all ranks show which rank never arrived.
//
// A report is logged (whatever NCCL_DEBUG says) when a wait reaches MIXCCL_TIMEOUT, on SIGUSR1
// when MIXCCL_DUMP_ON_SIGNAL=1, and on demand through mixcclCommHangReport().
//
// Cost on the fast path: the engine stores a peer's sequence number (one relaxed store) per
// received collective message and the issued/completed sequence numbers per operation. The
// description of a wait is built only after kPublishAfter without progress, so the report of a
// call that blocks is at most that old; calls that never wait that long publish nothing.
//
// Threading: the engine thread writes; any thread (the signal thread, an API call on another
// thread) reads. Lock order: the registry lock before a board's lock.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace mixccl {

class Communicator;

class WaitBoard {
 public:
  explicit WaitBoard(int nranks);

  // Engine thread, per operation / per received message: relaxed stores only.
  void noteIssued(uint64_t collSeq) { issued_.store(collSeq + 1, std::memory_order_relaxed); }
  void noteDone(uint64_t collSeq) { done_.store(collSeq + 1, std::memory_order_relaxed); }
  // A collective message of operation `seq` arrived from `peer`: it has reached `seq`.
  void notePeerReached(int peer, uint64_t seq) { reached_[peer].store(seq + 1, std::memory_order_relaxed); }
  // A probe of `peer` (op_stamp.h) said it has been waiting in operation `seq` for a while.
  void notePeerWaiting(int peer, uint64_t seq) { waiting_[peer].store(seq + 1, std::memory_order_relaxed); }

  // What one stream of a blocked call waits for.
  struct Wait {
    std::string what;        // Stream::describeWait()
    std::vector<int> peers;  // peers its remaining steps exchange messages with
  };
  // Engine thread, after a while without progress; `since` is when progress stopped.
  void publish(std::vector<Wait> waits, std::chrono::steady_clock::time_point since);
  // Engine thread, when a call that published returns.
  void clear();

  // Any thread. The report text (several lines, no trailing newline).
  std::string report(const Communicator& comm, const char* reason) const;

 private:
  const int nranks_;
  std::atomic<uint64_t> issued_{0}, done_{0};  // collective seq + 1; 0 = none yet
  std::unique_ptr<std::atomic<uint64_t>[]> reached_, waiting_;

  mutable std::mutex mu_;
  bool inWait_ = false;
  std::vector<Wait> waits_;
  std::chrono::steady_clock::time_point since_;
};

// How long a call makes no progress before its board is filled in.
constexpr std::chrono::milliseconds kPublishAfter{100};

namespace hang {

// Live communicators, for dumps of every rank of a process (SIGUSR1). Communicator::init and the
// destructor call these.
void registerComm(Communicator* comm);
void unregisterComm(Communicator* comm);

// Logs comm's report at WARN, whatever NCCL_DEBUG says: an operator asked, or a deadline passed.
void logReport(const Communicator& comm, const char* reason);

// Installs the SIGUSR1 handler and the thread that dumps every registered communicator, once per
// process, if MIXCCL_DUMP_ON_SIGNAL is set. The handler only writes a byte to a pipe.
void installSignalDump();

}  // namespace hang
}  // namespace mixccl
