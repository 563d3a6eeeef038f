// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "src/core/engine.h"

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>

#include "common/config.h"
#include "common/log.h"
#include "src/core/communicator.h"
#include "src/core/executor.h"
#include "src/core/hang_report.h"

namespace mixccl {
namespace {

using EngineClock = std::chrono::steady_clock;

std::chrono::seconds timeoutSetting() { return std::chrono::seconds(config::getInt(config::Knob::kTimeout)); }

// A short nap for polls of device fences: the device finishes in micro- to milliseconds, and a
// progress thread that spins would take a core from the ranks of an oversubscribed host.
void nap(int polls) {
  if (polls < 64) return;
  timespec ts{0, polls < 1024 ? 20000 : 200000};
  nanosleep(&ts, nullptr);
}

// Which user buffers this rank touches (mirrors the API's NULL checks).
bool readsInput(const Op& op) {
  switch (op.kind) {
    case CollKind::kRecv:
      return false;
    case CollKind::kBroadcast:
    case CollKind::kScatter:
      return op.comm->rank() == op.root;
    default:
      return true;
  }
}

bool writesOutput(const Op& op) {
  switch (op.kind) {
    case CollKind::kSend:
      return false;
    case CollKind::kReduce:
    case CollKind::kGather:
      return op.comm->rank() == op.root;
    default:
      return true;
  }
}

}  // namespace

bool isQueued(const Op& op) { return op.stream != nullptr && (op.comm->backend()->caps().flags & kCapAsync) != 0; }

Result checkBuffers(const Op& op, bool queued) {
  DeviceBackend* dev = op.comm->backend();
  if (queued) MIXCCL_TRY(dev->checkStream(op.stream));
  if (op.count == 0) return Result::kSuccess;
  const struct {
    bool used;
    const void* ptr;
    uint64_t bytes;
    const char* name;
  } bufs[] = {{readsInput(op), op.input, inputBytes(op), "sendbuff"},
              {writesOutput(op), op.output, outputBytes(op), "recvbuff"}};
  const bool hostOk = !queued || (dev->caps().flags & kCapHostMemory) != 0;
  for (const auto& b : bufs) {
    if (!b.used || b.ptr == nullptr) continue;
    const MemKind kind = dev->memKind(b.ptr);
    // The last byte too: a count larger than the buffer that runs into unmapped memory (or off a
    // device allocation) is refused here instead of faulting in the middle of the collective. What
    // lies between is taken on trust (one allocation has no holes); an overrun into other mapped
    // memory cannot be told.
    const bool usable = kind == MemKind::kDevice || (kind == MemKind::kHost && hostOk);
    const void* last = b.bytes > 1 ? static_cast<const char*>(b.ptr) + (b.bytes - 1) : b.ptr;
    if (usable && last != b.ptr && dev->memKind(last) != kind) {
      return fail(Result::kInvalidArgument,
                  "%s on rank %d: %s %p starts in %s memory but its last byte, %llu bytes on (%p), is not: is count "
                  "%llu of %s larger than the buffer?",
                  collName(op.kind), op.comm->rank(), b.name, b.ptr, kind == MemKind::kHost ? "host" : dev->name(),
                  static_cast<unsigned long long>(b.bytes - 1), last, static_cast<unsigned long long>(op.count),
                  dataTypeName(op.dtype));
    }
    if (usable) continue;
    if (kind == MemKind::kHost) {
      return fail(Result::kInvalidArgument,
                  "%s on rank %d: %s %p is not memory of the %s backend's device (host memory, or another "
                  "context's): a call on a stream needs device buffers; allocate them with ncclMemAlloc, or pass a "
                  "NULL stream to run on host memory synchronously",
                  collName(op.kind), op.comm->rank(), b.name, b.ptr, dev->name());
    }
    return fail(Result::kInvalidArgument,
                "%s on rank %d: %s %p is neither host memory nor memory of the %s backend (another device, "
                "context or process?): allocate it with ncclMemAlloc or the device runtime of this communicator",
                collName(op.kind), op.comm->rank(), b.name, b.ptr, dev->name());
  }
  return Result::kSuccess;
}

Engine::Engine(Communicator* comm) : comm_(comm) {}

Engine::~Engine() { stop(); }

size_t Engine::pending() const {
  std::lock_guard<std::mutex> lk(mu_);
  return queue_.size() + (running_ ? 1 : 0);
}

void Engine::releaseHolds(std::vector<Hold>& holds) {
  DeviceBackend* dev = comm_->backend();
  for (Hold& h : holds) {
    if (h.start != nullptr) dev->releaseFence(h.start);
    if (h.gate != nullptr) {
      // A gate that cannot be released leaves the user's stream blocked: say so loudly, but go on
      // releasing the others.
      Result r = dev->releaseStream(h.gate);
      if (r != Result::kSuccess) {
        MIXCCL_WARN("rank %d: releasing the completion gate of stream %p failed: %s", comm_->rank(), h.stream,
                    lastError().c_str());
      }
    }
    h.start = nullptr;
    h.gate = nullptr;
  }
}

Result Engine::failure(const char* fn) {
  // The progress thread's message is its own (fail() records per thread): repeat it here.
  return fail(failed_, "%s: queued work of rank %d failed earlier: %s", fn, comm_->rank(), failedMessage_.c_str());
}

Result Engine::enqueue(std::vector<std::unique_ptr<Op>> ops, const char* fn) {
  DeviceBackend* dev = comm_->backend();
  auto batch = std::make_unique<Batch>();
  // One start fence and one gate per distinct stream, in the order the streams first appear.
  for (const auto& op : ops) {
    if (op->stream == nullptr) continue;
    const bool seen =
        std::any_of(batch->holds.begin(), batch->holds.end(), [&](const Hold& h) { return h.stream == op->stream; });
    if (seen) continue;
    batch->holds.push_back(Hold{op->stream, nullptr, nullptr});
    Hold& h = batch->holds.back();
    Result r = dev->markStart(h.stream, &h.start);
    if (r == Result::kSuccess) r = dev->holdStream(h.stream, &h.gate);
    if (r != Result::kSuccess) {
      releaseHolds(batch->holds);
      return r;
    }
  }
  batch->ops = std::move(ops);
  {
    std::unique_lock<std::mutex> lk(mu_);
    if (stopping_ || failed_ != Result::kSuccess) {
      const bool stopped = stopping_;
      lk.unlock();
      releaseHolds(batch->holds);
      if (stopped) {
        return fail(Result::kInvalidUsage, "%s: rank %d: the communicator is being destroyed or aborted", fn,
                    comm_->rank());
      }
      return failure(fn);
    }
    // The thread first, then the batch: a thread that cannot be created (or a queue that cannot
    // grow) must not leave a batch queued with its start fence and gate held, which no one
    // would ever release. The ticket is taken only once the batch is queued (waitIdle waits for
    // every ticket handed out).
    try {
      if (!thread_.joinable()) {
        thread_ = std::thread([this] { run(); });
        // "mixccl-prog R" in top -H, gdb and perf (docs/DEBUGGING.md), named before the call
        // returns (15 characters at most: ranks from 1000 on are cut short).
        char name[16];
        snprintf(name, sizeof(name), "mixccl-prog %d", comm_->rank());
        (void)pthread_setname_np(thread_.native_handle(), name);
      }
      batch->ticket = nextTicket_;
      queue_.push_back(std::move(batch));  // strong guarantee: `batch` is intact if it throws
    } catch (const std::exception& e) {
      lk.unlock();
      releaseHolds(batch->holds);
      return fail(Result::kSystemError,
                  "%s: rank %d: could not queue the operation (%s): its progress thread could not be started or the "
                  "queue could not grow; free memory or threads and create a new communicator",
                  fn, comm_->rank(), e.what());
    }
    ++nextTicket_;
  }
  cv_.notify_all();
  return Result::kSuccess;
}

Result Engine::waitIdle(const char* fn) {
  uint64_t last = 0;
  {
    std::lock_guard<std::mutex> lk(mu_);
    last = nextTicket_ - 1;
  }
  return waitTicket(last, fn);
}

// Bounded by progress: every batch fails by itself after MIXCCL_TIMEOUT without progress (or at
// once after an abort), so the waiter only needs a backstop in case the progress thread is stuck
// inside a backend call.
template <class Done>
Result Engine::waitUntil(std::unique_lock<std::mutex>& lk, const char* fn, Done done) {
  const auto backstop = timeoutSetting() + std::chrono::seconds(5);
  uint64_t seen = doneTicket_;
  uint64_t seenSteps = progress_.load(std::memory_order_relaxed);
  auto lastProgress = EngineClock::now();
  while (!done()) {
    if (comm_->aborted() || comm_->revoked()) {
      return fail(Result::kRemoteError, "%s: rank %d: communicator was %s while its queued work ran", fn, comm_->rank(),
                  comm_->aborted() ? "aborted" : "revoked");
    }
    cv_.wait_for(lk, std::chrono::milliseconds(1));
    const uint64_t steps = progress_.load(std::memory_order_relaxed);
    if (doneTicket_ != seen || steps != seenSteps) {
      seen = doneTicket_;
      seenSteps = steps;
      lastProgress = EngineClock::now();
    } else if (EngineClock::now() - lastProgress > backstop) {
      return fail(Result::kRemoteError,
                  "%s: rank %d: queued work made no progress for %lld s (MIXCCL_TIMEOUT + 5 s); the progress "
                  "thread is stuck in the device backend (%s)",
                  fn, comm_->rank(), static_cast<long long>(backstop.count()), comm_->backend()->name());
    }
  }
  return Result::kSuccess;
}

Result Engine::waitTicket(uint64_t ticket, const char* fn) {
  std::unique_lock<std::mutex> lk(mu_);
  MIXCCL_TRY(waitUntil(lk, fn, [&] { return doneTicket_ >= ticket; }));
  if (failed_ != Result::kSuccess) return failure(fn);
  return Result::kSuccess;
}

Result Engine::waitForRoom(const char* fn) {
  const auto depth = static_cast<size_t>(std::max<int64_t>(1, config::getInt(config::Knob::kQueueDepth)));
  std::unique_lock<std::mutex> lk(mu_);
  auto room = [&] { return queue_.size() < depth || stopping_ || failed_ != Result::kSuccess; };
  if (room()) return Result::kSuccess;
  ++roomWaiters_;
  Result r = waitUntil(lk, fn, room);
  --roomWaiters_;
  return r;
}

int Engine::waitingForRoom() const {
  std::lock_guard<std::mutex> lk(mu_);
  return roomWaiters_;
}

void Engine::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Batches queued after the thread ended (none can be: enqueue refuses while stopping) and the
  // work queues.
  for (auto& b : queue_) releaseHolds(b->holds);
  queue_.clear();
  for (auto& [stream, q] : queues_) (void)comm_->backend()->closeQueue(q);
  queues_.clear();
}

void Engine::run() {
  log::RankScope scope(comm_->rank());
  for (;;) {
    std::unique_ptr<Batch> b;
    Result prior = Result::kSuccess;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything ran
      b = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
      prior = failed_;
      if (roomWaiters_ > 0) cv_.notify_all();
    }
    Result r = prior;
    std::string message;
    if (prior == Result::kSuccess) {
      r = runBatch(*b);
      if (r != Result::kSuccess) {
        message = lastError();
        comm_->setAsyncError(r);
      }
    }
    releaseHolds(b->holds);
    const uint64_t ticket = b->ticket;
    b.reset();  // the operations, before a waiter may free what they point to
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (r != Result::kSuccess && failed_ == Result::kSuccess) {
        failed_ = r;
        failedMessage_ = std::move(message);
      }
      doneTicket_ = ticket;
      running_ = false;
    }
    cv_.notify_all();
  }
}

// Waits for the start fence of every stream of the batch: the user's work that produces the
// input. Abort-aware, bounded by MIXCCL_TIMEOUT, visible in hang reports after kPublishAfter.
Result Engine::waitStart(Batch& b) {
  DeviceBackend* dev = comm_->backend();
  const auto timeout = timeoutSetting();
  const auto since = EngineClock::now();
  bool published = false;
  for (Hold& h : b.holds) {
    for (int polls = 0;; ++polls) {
      Result r = dev->query(h.start);
      if (r == Result::kSuccess) break;
      if (r != Result::kInProgress) {
        return fail(r, "rank %d: the work enqueued on stream %p before the collective failed (%s)", comm_->rank(),
                    h.stream, lastError().c_str());
      }
      if (comm_->aborted() || comm_->revoked()) {
        if (published) comm_->board().clear();
        return fail(Result::kRemoteError,
                    "rank %d: communicator was %s while its queued work waited for stream %p to reach the call",
                    comm_->rank(), comm_->aborted() ? "aborted" : "revoked", h.stream);
      }
      const auto idle = EngineClock::now() - since;
      if (!published && idle > kPublishAfter) {
        char what[160];
        snprintf(what, sizeof(what), "%s (seq %llu): waiting for the work enqueued on stream %p before the call",
                 collName(b.ops.front()->kind), static_cast<unsigned long long>(b.ops.front()->seq), h.stream);
        comm_->board().publish({WaitBoard::Wait{what, {}}}, since);
        published = true;
      }
      if (idle > timeout) {
        hang::logReport(*comm_, "MIXCCL_TIMEOUT");
        comm_->board().clear();
        return fail(Result::kRemoteError,
                    "rank %d: the work enqueued on stream %p before the collective did not finish in %lld s "
                    "(MIXCCL_TIMEOUT); a kernel or event before the call never completes",
                    comm_->rank(), h.stream, static_cast<long long>(timeout.count()));
      }
      nap(polls);
    }
  }
  if (published) comm_->board().clear();
  return Result::kSuccess;
}

Result Engine::openQueues(Batch& b) {
  for (auto& op : b.ops) {
    if (op->stream == nullptr) continue;  // a NULL-stream operation of a mixed group: synchronous
    auto it = queues_.find(op->stream);
    if (it == queues_.end()) {
      WorkQueue* q = nullptr;
      MIXCCL_TRY(comm_->backend()->openQueue(op->stream, &q));
      it = queues_.emplace(op->stream, q).first;
    }
    op->queue = it->second;
  }
  return Result::kSuccess;
}

// After a failure: device work already issued may still write into user buffers. Give it a
// short, bounded time to finish before the gates open (the user would otherwise see a buffer
// change after the stream went on).
void Engine::quiesce() {
  DeviceBackend* dev = comm_->backend();
  const auto until = EngineClock::now() + std::chrono::milliseconds(500);
  for (auto& [stream, q] : queues_) {
    Fence* f = nullptr;
    if (dev->record(q, &f) != Result::kSuccess) continue;
    for (int polls = 0; dev->query(f) == Result::kInProgress && EngineClock::now() < until; ++polls) nap(polls);
    dev->releaseFence(f);
  }
}

Result Engine::runBatch(Batch& b) {
  MIXCCL_TRY(waitStart(b));
  MIXCCL_TRY(openQueues(b));
  std::vector<Op*> ops;
  ops.reserve(b.ops.size());
  for (auto& op : b.ops) {
    MIXCCL_TRY(planOp(op.get()));  // here, not on the caller's thread: the stream has reached the call
    ops.push_back(op.get());
  }
  thread_local std::vector<Stream> streams;
  partitionOps(ops, &streams);
  Result r = runStreams(streams, &progress_);
  if (r != Result::kSuccess) quiesce();
  return r;
}

}  // namespace mixccl
