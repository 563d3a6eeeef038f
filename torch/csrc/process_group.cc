// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// The group's life cycle (unique id through the store, or split or shrink of a parent group; one
// communicator) and the queueing of operations; point-to-point and barrier. The collectives are in
// collectives.cc.
#include "process_group.h"

#include <c10/util/Exception.h>

#include <cstring>

#include "types.h"

namespace mixccl::torch_backend {

ProcessGroupMixccl::ProcessGroupMixccl(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                       std::chrono::milliseconds timeout)
    : c10d::ProcessGroup(rank, size), timeout_(timeout), origin_("store") {
  TORCH_CHECK(size >= 1 && rank >= 0 && rank < size, "mixccl: rank ", rank, " is outside a group of size ", size);
  // torch hands each group a store under its own prefix. A key per generation keeps a re-created
  // group (destroy, then init on the same store) from reading the previous id: every member takes
  // one ticket, so the tickets of one generation are g*size+1 .. (g+1)*size on every member.
  const int64_t ticket = store->add("mixccl/joins", 1);
  const std::string key = "mixccl/unique_id/" + std::to_string((ticket - 1) / size);
  ncclUniqueId id;
  if (rank == 0) {
    MIXCCL_TORCH_CHECK_NCCL(ncclGetUniqueId(&id), "ncclGetUniqueId");
    const auto* bytes = reinterpret_cast<const uint8_t*>(&id);
    store->set(key, std::vector<uint8_t>(bytes, bytes + sizeof(id)));
  } else {
    std::vector<uint8_t> bytes = store->get(key);
    TORCH_CHECK(bytes.size() == sizeof(id), "mixccl: the unique id in the store has ", bytes.size(),
                " bytes, expected ", sizeof(id), " (another library wrote key '", key, "'?)");
    std::memcpy(&id, bytes.data(), sizeof(id));
  }
  ncclComm_t comm = nullptr;
  MIXCCL_TORCH_CHECK_NCCL(ncclCommInitRank(&comm, size, id, rank),
                          "ncclCommInitRank (rank " + std::to_string(rank) + " of " + std::to_string(size) + ")");
  comm_ = Comm::start(comm, rank, size);
}

namespace {

int memberIndex(const std::vector<int64_t>& members, int parentRank, int parentSize) {
  TORCH_CHECK(!members.empty() && static_cast<int64_t>(members.size()) <= parentSize,
              "mixccl new_group: ", members.size(), " ranks for a subgroup of a group of ", parentSize);
  int index = -1;
  for (size_t i = 0; i < members.size(); ++i) {
    TORCH_CHECK(members[i] >= 0 && members[i] < parentSize && (i == 0 || members[i] > members[i - 1]),
                "mixccl new_group: the ranks must be sorted, distinct and below ", parentSize);
    if (members[i] == parentRank) index = static_cast<int>(i);
  }
  TORCH_CHECK(index >= 0, "mixccl new_group: rank ", parentRank, " is not among the subgroup's ranks");
  return index;
}

}  // namespace

ProcessGroupMixccl::ProcessGroupMixccl(ProcessGroupMixccl& parent, const std::vector<int64_t>& members,
                                       std::chrono::milliseconds timeout)
    : c10d::ProcessGroup(memberIndex(members, parent.getRank(), parent.getSize()), static_cast<int>(members.size())),
      timeout_(timeout),
      origin_(static_cast<int>(members.size()) == parent.getSize() ? "split" : "shrink") {
  const int parentRank = parent.getRank();
  std::vector<int> exclude;
  for (int r = 0, i = 0; r < parent.getSize(); ++r) {
    if (i < static_cast<int>(members.size()) && members[i] == r) {
      ++i;
    } else {
      exclude.push_back(r);
    }
  }
  // Queued behind the parent's earlier operations, so every member makes it at the same point of
  // the parent's call sequence; `child` is written by the worker before the Work completes. No
  // watchdog deadline (0 ms): a member that is late must not revoke the parent. The exchange
  // runs on the parent's bootstrap, which fails at once when a member dies and after
  // MIXCCL_TIMEOUT when one never comes.
  ncclComm_t child = nullptr;
  const bool split = origin_ == "split";
  auto work = parent.enqueue(
      c10d::OpType::UNKNOWN, split ? "new_group (ncclCommSplit)" : "new_group (ncclCommShrink)", {},
      std::chrono::milliseconds(0), [&child, exclude, split, parentRank](ncclComm_t c) mutable {
        if (split) {
          MIXCCL_TORCH_CHECK_NCCL(ncclCommSplit(c, 0, parentRank, &child, nullptr), "ncclCommSplit for new_group");
        } else {
          MIXCCL_TORCH_CHECK_NCCL(
              ncclCommShrink(c, exclude.data(), static_cast<int>(exclude.size()), &child, nullptr, NCCL_SHRINK_DEFAULT),
              "ncclCommShrink for new_group");
        }
      });
  work->wait();
  comm_ = Comm::start(child, rank_, size_);
}

// Runs what is still queued, then ends the threads and the communicator (Comm::shutdown).
ProcessGroupMixccl::~ProcessGroupMixccl() {
  if (comm_) comm_->shutdown();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMixccl::enqueue(c10d::OpType type, const char* name,
                                                           std::vector<at::Tensor> outputs,
                                                           std::chrono::milliseconds timeout,
                                                           std::function<void(ncclComm_t)> run) {
  auto work = c10::make_intrusive<WorkMixccl>(rank_, type, std::move(outputs), comm_);
  Comm::Task task{{work}, std::move(run), timeout == c10d::kUnsetTimeout ? timeout_ : timeout, name};
  if (type == c10d::OpType::SEND || type == c10d::OpType::RECV) {
    comm_->enqueueP2P(std::move(task));
  } else {
    comm_->enqueue(std::move(task));
  }
  return work;
}

void ProcessGroupMixccl::checkRank(int64_t rank, const char* what) const {
  TORCH_CHECK(rank >= 0 && rank < size_, "mixccl ", what, ": rank ", rank, " is outside the group (size ", size_, ")");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMixccl::send(std::vector<at::Tensor>& tensors, int dstRank, int tag) {
  // NCCL has no tags: messages between two ranks match in issue order, whatever their tag.
  TORCH_CHECK(tensors.size() == 1, "mixccl send: one tensor per call, got ", tensors.size());
  checkRank(dstRank, "send");
  at::Tensor t = tensors[0];
  Buffer b = movingBuffer(t, "send");
  return enqueue(c10d::OpType::SEND, "send", {t}, c10d::kUnsetTimeout, [t, b, dstRank](ncclComm_t c) {
    MIXCCL_TORCH_CHECK_NCCL(ncclSend(b.ptr, b.count, b.type, dstRank, c, nullptr),
                            "ncclSend to rank " + std::to_string(dstRank));
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMixccl::recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) {
  TORCH_CHECK(tensors.size() == 1, "mixccl recv: one tensor per call, got ", tensors.size());
  checkRank(srcRank, "recv");
  at::Tensor t = tensors[0];
  Buffer b = movingBuffer(t, "recv");
  return enqueue(c10d::OpType::RECV, "recv", {t}, c10d::kUnsetTimeout, [t, b, srcRank](ncclComm_t c) {
    MIXCCL_TORCH_CHECK_NCCL(ncclRecv(b.ptr, b.count, b.type, srcRank, c, nullptr),
                            "ncclRecv from rank " + std::to_string(srcRank));
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMixccl::barrier(const c10d::BarrierOptions& opts) {
  // Queued behind everything issued before it, and complete only when every rank reached it.
  at::Tensor token = at::zeros({1}, at::kByte);
  return enqueue(c10d::OpType::BARRIER, "barrier", {}, opts.timeout, [token](ncclComm_t c) {
    MIXCCL_TORCH_CHECK_NCCL(ncclAllReduce(token.data_ptr(), token.data_ptr(), 1, ncclUint8, ncclSum, c, nullptr),
                            "barrier (ncclAllReduce of one byte)");
  });
}

}  // namespace mixccl::torch_backend
