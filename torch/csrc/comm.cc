// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "comm.h"

#include <Python.h>
#include <c10/util/Exception.h>

#include <algorithm>

#include "types.h"

namespace mixccl::torch_backend {
namespace {

std::exception_ptr makeError(const std::string& msg) {
  try {
    TORCH_CHECK(false, msg);
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

std::string messageOf(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const c10::Error& err) {
    return err.what_without_backtrace();
  } catch (const std::exception& err) {
    return err.what();
  } catch (...) {
    return "unknown exception";
  }
}

// Lets go of the GIL for its lifetime when the calling thread holds it. The destructor is often
// called from Python (a group's last reference dropped, destroy_process_group) with the GIL held,
// and the worker it joins may need the GIL to finish: dropping the last reference to a tensor
// whose Python object the tensor owns (a fire-and-forget operation whose Work and tensor Python
// already dropped), or running a future's Python callback (DDP's comm hooks).
class GilReleased {
 public:
  GilReleased() : state_(Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr) {}
  ~GilReleased() {
    if (state_ != nullptr) PyEval_RestoreThread(state_);
  }
  GilReleased(const GilReleased&) = delete;
  GilReleased& operator=(const GilReleased&) = delete;

 private:
  PyThreadState* state_;
};

}  // namespace

Comm::Comm(ncclComm_t comm, int rank, int size) : comm_(comm), rank_(rank), size_(size) {}

std::shared_ptr<Comm> Comm::start(ncclComm_t comm, int rank, int size) {
  std::shared_ptr<Comm> c(new Comm(comm, rank, size));
  // The worker owns a reference for as long as it runs, so the object outlives every task and
  // callback it runs, whichever thread lets go of the process group last.
  c->worker_ = std::thread([self = c] {
    self->workerLoop();
    if (self->stoppedByWorker_) {
      // shutdown() came from a callback on this thread: the teardown it could not do. The last
      // reference may be `self`, and ~Comm cannot join the thread it runs on.
      self->finish();
      self->worker_.detach();
    }
  });
  c->workerId_ = c->worker_.get_id();  // never written again: onWorker() reads it from any thread
  try {
    c->watchdog_ = std::thread([raw = c.get()] { raw->watchdogLoop(); });
  } catch (...) {
    c->shutdown();  // the worker ends; finish() skips the watchdog that never started
    throw;
  }
  return c;
}

void Comm::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    if (auto group = takeHeldP2PLocked()) queue_.push_back(std::move(*group));
    stop_ = true;
    stoppedByWorker_ = onWorker();
  }
  workCv_.notify_all();
  if (stoppedByWorker_) return;  // the worker finishes after the task it is in (start())
  GilReleased gil;
  worker_.join();  // drains the queue; the watchdog still bounds each task
  finish();
}

// After the worker ended: stops the watchdog and ends the communicator.
void Comm::finish() {
  bool failed = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    watchdogStop_ = true;
    // A Work.wait(timeout) on another thread may still revoke; revoked_ makes that a no-op from
    // here on (revokeLocked calls ncclCommRevoke under mu_, so it cannot overlap the destroy).
    revoked_ = true;
    failed = !failure_.empty();
  }
  watchdogCv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  // A healthy communicator is destroyed (peers still inside a last collective that already got
  // everything from us finish normally); a failed one is aborted, which waits for nobody.
  if (!failed) {
    (void)ncclCommDestroy(comm_);
  } else {
    (void)ncclCommAbort(comm_);
  }
}

Comm::~Comm() = default;  // shutdown() joined or detached both threads

bool Comm::onWorker() const { return std::this_thread::get_id() == workerId_; }

void Comm::enqueue(Task task) {
  if (onWorker()) {
    // Issued by a future's callback, which the worker runs when it completes a task. Run it now,
    // right after that task on every rank: the callback may wait for it (DDP's PowerSGD hook
    // does), and only this thread could run it.
    flushP2P();  // issue order: held sends and receives go first
    runTask(task);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto group = takeHeldP2PLocked()) queue_.push_back(std::move(*group));  // issue order
    queue_.push_back(std::move(task));
  }
  workCv_.notify_one();
}

void Comm::enqueueP2P(Task task) {
  std::lock_guard<std::mutex> lock(mu_);
  heldP2P_.push_back(std::move(task));
}

void Comm::flushP2P() {
  const bool here = onWorker();  // from a callback on the worker: run it now, as enqueue() does
  std::optional<Task> group;
  {
    std::lock_guard<std::mutex> lock(mu_);
    group = takeHeldP2PLocked();
    if (!group) return;
    if (!here) queue_.push_back(std::move(*group));
  }
  if (here) {
    runTask(*group);
  } else {
    workCv_.notify_one();
  }
}

void Comm::runQueuedUntil(const std::function<bool()>& done) {
  flushP2P();
  while (!done()) {
    Task task;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (queue_.empty()) break;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    runTask(task);
  }
}

std::optional<Comm::Task> Comm::takeHeldP2PLocked() {
  if (heldP2P_.empty()) return std::nullopt;
  Task group{{}, nullptr, heldP2P_.front().timeout, heldP2P_.size() == 1 ? heldP2P_.front().name : "send/recv group"};
  std::vector<std::function<void(ncclComm_t)>> runs;
  for (auto& t : heldP2P_) {
    group.works.insert(group.works.end(), t.works.begin(), t.works.end());
    group.timeout = std::max(group.timeout, t.timeout);
    runs.push_back(std::move(t.run));
  }
  heldP2P_.clear();
  group.run = [runs = std::move(runs)](ncclComm_t c) {
    MIXCCL_TORCH_CHECK_NCCL(ncclGroupStart(), "ncclGroupStart");
    try {
      for (const auto& run : runs) run(c);
    } catch (...) {
      (void)ncclGroupEnd();
      throw;
    }
    MIXCCL_TORCH_CHECK_NCCL(ncclGroupEnd(), "ncclGroupEnd (send/recv)");
  };
  return group;
}

void Comm::revoke(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  revokeLocked(why);
}

void Comm::revokeLocked(const std::string& why) {
  if (failure_.empty()) failure_ = why;
  if (revoked_) return;
  revoked_ = true;
  // Under mu_ on purpose: the worker cannot move on to the next task meanwhile, so the revoke hits
  // the task that overran (or one that is failing anyway). The call only sets a flag.
  (void)ncclCommRevoke(comm_, NCCL_REVOKE_DEFAULT);
}

std::string Comm::failure() {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

void Comm::workerLoop() {
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      workCv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    runTask(task);
  }
}

// Worker thread only. Completing the works runs their futures' callbacks here; a callback that
// issues an operation runs it through enqueue(), which comes back here (nested, bounded by the
// callbacks' own nesting).
void Comm::runTask(Task& task) {
  std::string failedBefore;
  {
    std::lock_guard<std::mutex> lock(mu_);
    failedBefore = failure_;
    if (failedBefore.empty()) {
      running_ = true;
      runningName_ = task.name;
      runningTimeout_ = task.timeout;
      deadline_ = task.timeout.count() > 0 ? Clock::now() + task.timeout : Clock::time_point::max();
    }
  }
  std::exception_ptr error;
  if (!failedBefore.empty()) {
    error = makeError("mixccl " + std::string(task.name) + " on rank " + std::to_string(rank_) + " of " +
                      std::to_string(size_) + ": not run, the process group failed earlier: " + failedBefore);
  } else {
    watchdogCv_.notify_all();
    try {
      task.run(comm_);
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mu_);
    running_ = false;
    if (error) {
      std::string msg = messageOf(error);
      if (!failure_.empty()) {
        // Revoked for a reason the call itself cannot know (a timeout): lead with that reason.
        error = makeError(failure_ + " (the call reported: " + msg + ")");
      } else {
        failure_ = msg;
      }
    }
  }
  // Every Work of the task is done before any future's callback runs: a callback may wait for
  // another Work of the same task (a send/recv group).
  for (auto& w : task.works) w->markDone(error);
  for (auto& w : task.works) {
    try {
      w->completeFuture(error);
    } catch (...) {
      // A C++ callback that throws (Python ones catch their own errors): the other futures must
      // still complete, and an exception must not leave the thread.
    }
  }
}

void Comm::watchdogLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!watchdogStop_) {
    if (!running_ || revoked_ || deadline_ == Clock::time_point::max()) {
      watchdogCv_.wait(lock);
      continue;
    }
    if (Clock::now() < deadline_) {
      watchdogCv_.wait_until(lock, deadline_);
      continue;
    }
    // Still the same task (the worker clears running_ under mu_ before it takes the next one).
    revokeLocked("mixccl " + runningName_ + " on rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
                 " timed out after " + std::to_string(runningTimeout_.count()) +
                 " ms (the process group's timeout); the communicator was revoked");
  }
}

}  // namespace mixccl::torch_backend
