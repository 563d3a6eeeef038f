// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// ProcessGroupMixccl: torch.distributed's "mixccl" backend on host (CPU) tensors.
//
// Construction is collective over the group. A group of its own (the default group, or one under
// another backend's world) meets through the store: rank 0 makes a mixccl unique id and publishes
// it in the group's store, the others read it, then every rank joins one communicator. A subgroup
// of a mixccl world is made from the world's communicator, queued on the world's worker in issue
// order like any operation: with ncclCommSplit when it holds every rank, with ncclCommShrink
// (excluding the others) when it holds fewer, because torch 1.13 calls a backend's creator only on
// a new group's members and ncclCommSplit needs every rank of the parent, ncclCommShrink only the
// ranks that stay.
//
// Each operation is checked on the calling thread, queued, and run by the communicator's worker
// thread in issue order (comm.h); it returns a WorkMixccl at once. Tensors must stay untouched
// until the Work completes.

#include <chrono>
#include <memory>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "comm.h"

namespace mixccl::torch_backend {

class ProcessGroupMixccl : public c10d::ProcessGroup {
 public:
  ProcessGroupMixccl(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                     std::chrono::milliseconds timeout);
  // A subgroup of `parent`: `members` are its ranks in `parent` (sorted, this rank among them);
  // the new group's rank is this rank's index there.
  ProcessGroupMixccl(ProcessGroupMixccl& parent, const std::vector<int64_t>& members,
                     std::chrono::milliseconds timeout);
  ~ProcessGroupMixccl() override;

  const std::string getBackendName() const override { return "mixccl"; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  // The first failure of the communicator (a dead peer, a timeout), empty while healthy.
  std::string failure() const { return comm_->failure(); }
  // How the communicator was made: "store", "split" or "shrink".
  const std::string& origin() const { return origin_; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts = c10d::AllreduceCoalescedOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts = c10d::ReduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts = c10d::GatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts = c10d::ScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits, std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts = c10d::BarrierOptions()) override;

 private:
  // Queues `run` (worker thread; throws on failure) and returns its Work. `timeout` kUnsetTimeout
  // means the group's timeout.
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, const char* name, std::vector<at::Tensor> outputs,
                                         std::chrono::milliseconds timeout, std::function<void(ncclComm_t)> run);
  void checkRank(int64_t rank, const char* what) const;

  std::chrono::milliseconds timeout_;
  std::string origin_;
  std::shared_ptr<Comm> comm_;
};

}  // namespace mixccl::torch_backend
