// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// The Work object of one queued operation. The process group's worker thread completes it (once,
// with or without an exception) after the mixccl call returned; mixccl host-memory calls are done
// when they return, so completion means the output tensors hold the result. Its future carries the
// output tensors (DDP's gradient buckets wait on it) or the same exception.

#include <ATen/core/ivalue.h>

#include <chrono>
#include <memory>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

namespace mixccl::torch_backend {

class Comm;

class WorkMixccl : public c10d::Work {
 public:
  // `comm` lets wait(timeout) revoke the communicator. Weak: the process group owns it.
  WorkMixccl(int rank, c10d::OpType type, std::vector<at::Tensor> outputs, std::weak_ptr<Comm> comm);
  ~WorkMixccl() override;

  // A timeout (non-zero) that expires revokes the communicator, as the group's own timeout does,
  // so the operation and every later one on the group fail instead of finishing out of step.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  // These three first issue held point-to-point operations (comm.h), this one among them.
  bool isCompleted() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  std::vector<at::Tensor> result() override;

  // Worker thread only, once each, in this order: the Work is done (wait() returns), then its
  // future completes and runs its callbacks.
  void markDone(std::exception_ptr error);
  void completeFuture(std::exception_ptr error);

 private:
  std::vector<at::Tensor> outputs_;
  std::weak_ptr<Comm> comm_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace mixccl::torch_backend
