// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// One mixccl communicator of a process group, with its worker and watchdog threads.
//
// Contract:
// - enqueue() (any thread, usually Python's) appends a task; the worker thread runs tasks one at a
//   time in issue order, the only thread that calls mixccl on this communicator (mixccl serialises
//   callers per communicator; one caller keeps every rank's call order equal to its issue order).
// - Point-to-point tasks (enqueueP2P) are held back and run together in one ncclGroupStart/End, as
//   one task, when anything else is queued or one of their Work objects is waited for, polled or
//   asked for its future (flushP2P). A host-memory ncclSend returns only once its peer received,
//   so one worker running isend(to p) and irecv(from p) one after the other would deadlock
//   against a peer doing the same; in one group both sides progress together.
// - A future's callbacks attached before the operation completed run on the worker when it
//   completes the task (once every Work of the task is done). An operation such a callback issues
//   (enqueue or flushP2P on the worker thread) runs at once, inline, before anything else queued:
//   the callback may wait for it (DDP's PowerSGD hook does), and only the worker can run it. It
//   then runs right after the completed task on every rank. (A callback attached after completion
//   runs on the thread that attaches it, and its operations queue as that thread's.)
// - A callback that waits through Work.wait() for an operation queued before it runs the queue up
//   to it (runQueuedUntil); one that waits through the future's own wait() for such an operation
//   would wait forever: only the worker, which it blocks, can run it.
// - Each running task has a deadline (its own timeout, else the group's). The watchdog thread
//   revokes the communicator when the deadline passes; the blocked call then fails within
//   milliseconds. ncclCommRevoke only sets a flag and frees nothing, so it is safe beside a running
//   call; the communicator is freed in the destructor, after both threads are joined.
// - After the first failure (a dead peer's ncclRemoteError, a timeout, an abort) the communicator
//   is unusable: every later task fails at once with that first message.
// - shutdown() joins the worker without the GIL (it lets go of it when called from Python): the
//   worker takes the GIL to drop tensors Python let go of and to run futures' callbacks. The
//   worker holds a reference to the Comm while it runs, so a callback that drops the last
//   reference to the process group never destroys the Comm under the worker's feet.
// - Lock order: mu_ only; nothing calls mixccl while holding it except ncclCommRevoke, which does
//   not block.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "nccl.h"
#include "work.h"

namespace mixccl::torch_backend {

class Comm {
 public:
  using Clock = std::chrono::steady_clock;
  struct Task {
    std::vector<c10::intrusive_ptr<WorkMixccl>> works;  // completed together
    std::function<void(ncclComm_t)> run;                // throws c10::Error on failure
    std::chrono::milliseconds timeout;
    const char* name;
  };

  // Takes ownership of `comm` and starts the threads.
  static std::shared_ptr<Comm> start(ncclComm_t comm, int rank, int size);
  // Runs what is queued (bounded by the deadlines), joins the threads, then destroys the
  // communicator (or aborts it after a failure). Called by the process group's destructor, on
  // any thread: on the worker (a callback let go of the group) the worker does it once the task
  // it is in has finished. Later calls do nothing.
  void shutdown();
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  void enqueue(Task task);
  void enqueueP2P(Task task);
  // Queues the held point-to-point tasks as one grouped task (any thread; no-op when none).
  void flushP2P();
  // True on the worker thread (in a future's callback).
  bool onWorker() const;
  // Worker thread (a callback waiting for a Work): runs queued tasks in order until `done` holds
  // or nothing is queued. Those tasks come next anyway; waiting instead would never end.
  void runQueuedUntil(const std::function<bool()>& done);
  // Any thread: fails the running task and every later one with `why` (first reason wins).
  void revoke(const std::string& why);
  // The first failure's message, empty while healthy.
  std::string failure();

 private:
  Comm(ncclComm_t comm, int rank, int size);
  void workerLoop();
  void watchdogLoop();
  void finish();                              // after the worker ended
  void runTask(Task& task);                   // worker thread
  void revokeLocked(const std::string& why);  // needs mu_
  std::optional<Task> takeHeldP2PLocked();    // needs mu_: the held tasks as one group, if any

  ncclComm_t comm_;
  const int rank_;
  const int size_;
  std::mutex mu_;
  std::condition_variable workCv_;      // queue or stop changed
  std::condition_variable watchdogCv_;  // deadline or stop changed
  std::deque<Task> queue_;
  std::vector<Task> heldP2P_;
  bool stop_ = false;             // worker: finish the queue, then exit
  bool stoppedByWorker_ = false;  // shutdown() ran on the worker thread
  bool watchdogStop_ = false;     // after the worker is joined
  bool running_ = false;
  Clock::time_point deadline_;
  std::string runningName_;
  std::chrono::milliseconds runningTimeout_{0};
  std::string failure_;
  bool revoked_ = false;
  std::thread worker_;
  std::thread::id workerId_;
  std::thread watchdog_;
};

}  // namespace mixccl::torch_backend
