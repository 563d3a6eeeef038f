// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// The asynchronous, stream-ordered engine of one communicator (docs/ENGINE.md).
//
// An operation is queued when its communicator's backend announces kCapAsync and its stream is
// not NULL; every other operation runs on the calling thread (executor.h). A queued call takes
// the start fence (markStart) and the completion gate (holdStream) of its stream, pushes a Batch
// (the operations of one call, or all operations of this communicator in one ncclGroupEnd) and
// returns; when MIXCCL_QUEUE_DEPTH batches already wait, the call first waits for room
// (waitForRoom). One progress thread per communicator pops batches in order, waits for their start
// fences, runs their steps with the executor (device work on a work queue per user stream, each
// step two-phase: issued, then committed once its fence signals) and releases their gates.
//
// Guarantees:
//  - Every wait is bounded: MIXCCL_TIMEOUT without progress fails the batch (with a hang report),
//    abort()/revoke() fail it within milliseconds.
//  - A failed batch sets the communicator's async error; every batch behind it fails as well.
//    Gates are released in every case, so a user stream is never left blocked.
//  - Issue order is wire order: sequence numbers and stamps are taken at the call, and a
//    synchronous call on a communicator with queued work first waits for the queue (waitIdle).
//
// Threading and locks: enqueue() and waitIdle() are called by the thread holding the
// communicator's caller slot; stop() by destroy/abort (any thread, once no API call uses the
// communicator, or after abort()). `mu_` guards the queue and the failure; it is never held
// while calling the backend or a transport. The progress thread is the only user of the
// connections while a batch runs (synchronous calls wait until the queue is idle).

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "src/core/op.h"

namespace mixccl {

class Communicator;

// True when `op` goes through the engine (see above).
bool isQueued(const Op& op);

// The buffers of an operation must be memory its backend can reach (device_backend.h): a queued
// one's must be device memory (or host memory, with kCapHostMemory), and its stream one the backend
// can use; a synchronous one's anything but MemKind::kUnknown (a device pointer with the host
// backend). kInvalidArgument naming the argument otherwise.
Result checkBuffers(const Op& op, bool queued);

class Engine {
 public:
  explicit Engine(Communicator* comm);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Takes the gates of every stream of `ops` (all of this communicator, already issued: seq and
  // stamp set) and queues them as one batch. Never waits for the network, nor for room: the
  // caller waited for room (waitForRoom) before it took the sequence numbers, and only the
  // holder of the caller slot enqueues, so the room is still there. On failure nothing is queued
  // and every gate taken is released again. A group that also holds NULL-stream operations
  // waits for them with waitIdle() once all of its batches are queued (group.cc). `fn`: the API
  // call that queues them, for messages.
  Result enqueue(std::vector<std::unique_ptr<Op>> ops, const char* fn);

  // Waits until fewer than MIXCCL_QUEUE_DEPTH batches (default 64) wait behind the one the
  // progress thread runs, as a full launch queue blocks a CUDA host thread; a stopping or failed
  // engine has room (enqueue then refuses, with the reason). Called before a call takes its
  // sequence numbers, so a failed wait leaves the rank in step with its peers. It fails like
  // waitIdle (abort, revoke, no batch finished for MIXCCL_TIMEOUT + 5 s); with a non-blocking
  // communicator too, the call may wait that long. Every queued call
  // keeps two commands waiting on user events in the user's queue, and NVIDIA's OpenCL driver
  // takes time in proportion to them for every later command (about 400 us per enqueue with
  // 1,000 waiting, against 14 with 100). H100, 2-rank 8 B all-reduce with n calls queued at once:
  // unbounded 277 us (n = 20) to 24 ms (n = 500); depth 256: 0.85-4.3 ms (n = 1,000); depth 64:
  // 0.32-0.41 ms at n = 300 and 1,000.
  Result waitForRoom(const char* fn);
  // Callers inside waitForRoom (tests).
  int waitingForRoom() const;

  // Waits until every queued batch finished. The queue's failure if one failed; kRemoteError
  // after an abort/revoke, or when no batch finished for MIXCCL_TIMEOUT plus a margin.
  Result waitIdle(const char* fn);

  // Stops taking work, lets the queue run out (after abort() every batch fails at once) and joins
  // the progress thread. Idempotent. Closes the work queues.
  void stop();

  // Batches queued or running (tests, hang reports).
  size_t pending() const;

 private:
  struct Hold {
    void* stream = nullptr;
    Fence* start = nullptr;
    StreamGate* gate = nullptr;
  };
  struct Batch {
    std::vector<std::unique_ptr<Op>> ops;
    std::vector<Hold> holds;
    uint64_t ticket = 0;
  };

  void run();
  Result runBatch(Batch& b);
  Result waitStart(Batch& b);
  Result openQueues(Batch& b);
  void quiesce();
  void releaseHolds(std::vector<Hold>& holds);
  Result waitTicket(uint64_t ticket, const char* fn);
  // Waits on cv_ (lk held) until `done()`: kRemoteError after an abort/revoke, or when no batch
  // finished for MIXCCL_TIMEOUT plus a margin. The caller reads failed_ afterwards.
  template <class Done>
  Result waitUntil(std::unique_lock<std::mutex>& lk, const char* fn, Done done);
  Result failure(const char* fn);

  Communicator* comm_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Batch>> queue_;
  bool running_ = false;  // the progress thread holds a batch it popped
  int roomWaiters_ = 0;   // callers in waitForRoom: the progress thread wakes them at each pop
  bool stopping_ = false;
  uint64_t nextTicket_ = 1;
  uint64_t doneTicket_ = 0;  // every batch up to this one finished
  // Counts up whenever the running batch advanced (runStreams): waiters tell a long batch that
  // still moves from a progress thread stuck in the backend by it, not by finished batches only.
  std::atomic<uint64_t> progress_{0};
  Result failed_ = Result::kSuccess;
  std::string failedMessage_;
  std::thread thread_;
  // Progress thread only (and stop() after the join): a work queue per user stream.
  std::map<void*, WorkQueue*> queues_;
};

}  // namespace mixccl
