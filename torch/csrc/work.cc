// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "work.h"

#include <c10/util/Exception.h>

#include "comm.h"

namespace mixccl::torch_backend {

WorkMixccl::WorkMixccl(int rank, c10d::OpType type, std::vector<at::Tensor> outputs, std::weak_ptr<Comm> comm)
    : c10d::Work(rank, type),
      outputs_(std::move(outputs)),
      comm_(std::move(comm)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

WorkMixccl::~WorkMixccl() = default;

bool WorkMixccl::wait(std::chrono::milliseconds timeout) {
  if (auto comm = comm_.lock()) {
    comm->flushP2P();
    if (comm->onWorker()) {
      // A callback waits for an operation queued before it: run the queue up to it here.
      comm->runQueuedUntil([this] { return c10d::Work::isCompleted(); });
      TORCH_CHECK(c10d::Work::isCompleted(), "mixccl: a future's callback waits for a ", c10d::opTypeToString(opType_),
                  " that is neither queued nor running on this group, so it would wait forever");
    }
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (timeout == kNoTimeout) {
    cv_.wait(lock, [&] { return completed_; });
  } else if (!cv_.wait_for(lock, timeout, [&] { return completed_; })) {
    lock.unlock();
    if (auto comm = comm_.lock()) {
      comm->revoke("Work.wait(timeout=" + std::to_string(timeout.count()) + " ms) expired before the " +
                   c10d::opTypeToString(opType_) + " completed; the communicator was revoked");
    }
    lock.lock();
    // Revoking fails the running call within milliseconds and every queued one at once.
    cv_.wait(lock, [&] { return completed_; });
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

bool WorkMixccl::isCompleted() {
  if (auto comm = comm_.lock()) comm->flushP2P();
  return c10d::Work::isCompleted();
}

c10::intrusive_ptr<c10::ivalue::Future> WorkMixccl::getFuture() {
  if (auto comm = comm_.lock()) comm->flushP2P();
  return future_;
}

std::vector<at::Tensor> WorkMixccl::result() { return outputs_; }

void WorkMixccl::markDone(std::exception_ptr error) { finish(error); }

void WorkMixccl::completeFuture(std::exception_ptr error) {
  // The future's callbacks run here, on the worker thread, after wait() can already return.
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

}  // namespace mixccl::torch_backend
