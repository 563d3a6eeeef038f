// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// The collectives of ProcessGroupMixccl. Each checks its arguments on the calling thread, then
// queues a closure for the worker thread (comm.h). Closures capture the tensors they touch, which
// keeps them alive until the call is done. List forms (allgather into a list, reduce_scatter from
// a list, gather, scatter) go through one flat temporary, since mixccl reads and writes one buffer.
#include <c10/util/Exception.h>

#include <cstring>
#include <memory>

#include "process_group.h"
#include "types.h"

namespace mixccl::torch_backend {
namespace {

at::Tensor single(const std::vector<at::Tensor>& tensors, const char* op) {
  TORCH_CHECK(tensors.size() == 1, "mixccl ", op, ": one tensor per process, got ", tensors.size());
  return tensors[0];
}

// Raises unless every tensor of `list` matches `like` in dtype and element count.
void checkSameShape(const std::vector<at::Tensor>& list, const at::Tensor& like, const char* op) {
  for (const auto& t : list) {
    TORCH_CHECK(t.device().is_cpu(), "mixccl ", op, ": tensor is on ", t.device(), "; only CPU tensors are supported");
    TORCH_CHECK(t.scalar_type() == like.scalar_type(), "mixccl ", op, ": dtype ", t.scalar_type(), " differs from ",
                like.scalar_type());
    TORCH_CHECK(t.numel() == like.numel(), "mixccl ", op, ": tensor of ", t.numel(), " elements where ", like.numel(),
                " are expected");
  }
}

// Runs `body` between ncclGroupStart and ncclGroupEnd; the group is closed on every path.
template <typename Body>
void inGroup(const char* what, Body&& body) {
  MIXCCL_TORCH_CHECK_NCCL(ncclGroupStart(), "ncclGroupStart");
  try {
    body();
  } catch (...) {
    (void)ncclGroupEnd();
    throw;
  }
  MIXCCL_TORCH_CHECK_NCCL(ncclGroupEnd(), what);
}

at::Tensor flatCat(const std::vector<at::Tensor>& list) {
  std::vector<at::Tensor> flat;
  flat.reserve(list.size());
  for (const auto& t : list) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

void copyOut(const at::Tensor& flat, const std::vector<at::Tensor>& outputs) {
  int64_t off = 0;
  for (const auto& t : outputs) {
    t.copy_(flat.narrow(0, off, t.numel()).view(t.sizes()));
    off += t.numel();
  }
}

// How many units of a Buffer one element of t is (elements, or bytes for dtypes mixccl lacks).
size_t unitsPerElement(const at::Tensor& t) { return ncclTypeOf(t.scalar_type()) ? 1 : t.element_size(); }

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupMixccl::broadcast(std::vector<at::Tensor>& tensors,
                                                             const c10d::BroadcastOptions& opts) {
  at::Tensor t = single(tensors, "broadcast");
  checkRank(opts.rootRank, "broadcast");
  Buffer b = movingBuffer(t, "broadcast");
  int root = static_cast<int>(opts.rootRank);
  return enqueue(c10d::OpType::BROADCAST, "broadcast", {t}, opts.timeout, [t, b, root](ncclComm_t c) {
    MIXCCL_TORCH_CHECK_NCCL(ncclBroadcast(b.ptr, b.ptr, b.count, b.type, root, c, nullptr), "ncclBroadcast");
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMixccl::allreduce(std::vector<at::Tensor>& tensors,
                                                             const c10d::AllreduceOptions& opts) {
  at::Tensor t = single(tensors, "allreduce");
  checkReducible(t, opts.reduceOp, "allreduce");
  Buffer b = reducingBuffer(t);
  c10d::ReduceOp op = opts.reduceOp;
  return enqueue(c10d::OpType::ALLREDUCE, "allreduce", {t}, opts.timeout, [t, b, op](ncclComm_t c) {
    RedOp r(op, t.scalar_type(), c);
    MIXCCL_TORCH_CHECK_NCCL(ncclAllReduce(b.ptr, b.ptr, b.count, b.type, r.get(), c, nullptr), "ncclAllReduce");
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMixccl::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                       const c10d::AllreduceCoalescedOptions& opts) {
  for (const auto& t : tensors) checkReducible(t, opts.reduceOp, "allreduce_coalesced");
  std::vector<at::Tensor> ts = tensors;
  c10d::ReduceOp op = opts.reduceOp;
  // One group: the transfers of all tensors proceed together, as one call.
  return enqueue(c10d::OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", ts, opts.timeout, [ts, op](ncclComm_t c) {
    std::vector<std::unique_ptr<RedOp>> ops;
    for (const auto& t : ts) ops.push_back(std::make_unique<RedOp>(op, t.scalar_type(), c));
    inGroup("allreduce_coalesced (ncclGroupEnd)", [&] {
      for (size_t i = 0; i < ts.size(); ++i) {
        Buffer b = reducingBuffer(ts[i]);
        MIXCCL_TORCH_CHECK_NCCL(ncclAllReduce(b.ptr, b.ptr, b.count, b.type, ops[i]->get(), c, nullptr),
                                "ncclAllReduce (coalesced)");
      }
    });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMixccl::reduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::ReduceOptions& opts) {
  at::Tensor t = single(tensors, "reduce");
  checkRank(opts.rootRank, "reduce");
  checkReducible(t, opts.reduceOp, "reduce");
  Buffer b = reducingBuffer(t);
  c10d::ReduceOp op = opts.reduceOp;
  int root = static_cast<int>(opts.rootRank);
  return enqueue(c10d::OpType::REDUCE, "reduce", {t}, opts.timeout, [t, b, op, root](ncclComm_t c) {
    RedOp r(op, t.scalar_type(), c);
    MIXCCL_TORCH_CHECK_NCCL(ncclReduce(b.ptr, b.ptr, b.count, b.type, r.get(), root, c, nullptr), "ncclReduce");
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMixccl::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                             std::vector<at::Tensor>& inputs,
                                                             const c10d::AllgatherOptions& opts) {
  at::Tensor in = single(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(size_), "mixccl allgather: expected ",
              size_, " output tensors");
  checkSameShape(outputs[0], in, "allgather");
  Buffer b = movingBuffer(in, "allgather");
  std::vector<at::Tensor> outs = outputs[0];
  int n = size_;
  return enqueue(c10d::OpType::ALLGATHER, "allgather", outs, opts.timeout, [in, b, outs, n](ncclComm_t c) {
    at::Tensor flat = at::empty({n * in.numel()}, in.options());
    MIXCCL_TORCH_CHECK_NCCL(ncclAllGather(b.ptr, flat.data_ptr(), b.count, b.type, c, nullptr), "ncclAllGather");
    copyOut(flat, outs);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMixccl::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                   const c10d::AllgatherOptions& opts) {
  Buffer b = movingBuffer(input, "allgather_into_tensor");
  checkHostTensor(output, "allgather_into_tensor");
  TORCH_CHECK(output.scalar_type() == input.scalar_type() && output.numel() == size_ * input.numel(),
              "mixccl allgather_into_tensor: the output must hold ", size_, " x ", input.numel(), " elements of ",
              input.scalar_type());
  at::Tensor in = input, out = output;
  return enqueue(
      c10d::OpType::_ALLGATHER_BASE, "allgather_into_tensor", {out}, opts.timeout, [in, out, b](ncclComm_t c) {
        MIXCCL_TORCH_CHECK_NCCL(ncclAllGather(b.ptr, out.data_ptr(), b.count, b.type, c, nullptr), "ncclAllGather");
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMixccl::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::GatherOptions& opts) {
  at::Tensor in = single(inputs, "gather");
  checkRank(opts.rootRank, "gather");
  Buffer b = movingBuffer(in, "gather");
  int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> outs;
  if (rank_ == root) {
    TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(size_),
                "mixccl gather: the root needs ", size_, " output tensors");
    checkSameShape(outputs[0], in, "gather");
    outs = outputs[0];
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                "mixccl gather: only the root passes output tensors");
  }
  int n = size_;
  return enqueue(c10d::OpType::GATHER, "gather", outs, opts.timeout, [in, b, outs, root, n](ncclComm_t c) {
    at::Tensor flat = outs.empty() ? at::Tensor() : at::empty({n * in.numel()}, in.options());
    MIXCCL_TORCH_CHECK_NCCL(
        ncclGather(b.ptr, flat.defined() ? flat.data_ptr() : nullptr, b.count, b.type, root, c, nullptr), "ncclGather");
    if (flat.defined()) copyOut(flat, outs);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMixccl::scatter(std::vector<at::Tensor>& outputs,
                                                           std::vector<std::vector<at::Tensor>>& inputs,
                                                           const c10d::ScatterOptions& opts) {
  at::Tensor out = single(outputs, "scatter");
  checkRank(opts.rootRank, "scatter");
  Buffer b = movingBuffer(out, "scatter");
  int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> ins;
  if (rank_ == root) {
    TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(size_), "mixccl scatter: the root needs ",
                size_, " input tensors");
    checkSameShape(inputs[0], out, "scatter");
    ins = inputs[0];
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                "mixccl scatter: only the root passes input tensors");
  }
  return enqueue(c10d::OpType::SCATTER, "scatter", {out}, opts.timeout, [out, b, ins, root](ncclComm_t c) {
    at::Tensor flat = ins.empty() ? at::Tensor() : flatCat(ins);
    MIXCCL_TORCH_CHECK_NCCL(
        ncclScatter(flat.defined() ? flat.data_ptr() : nullptr, b.ptr, b.count, b.type, root, c, nullptr),
        "ncclScatter");
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMixccl::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                  std::vector<std::vector<at::Tensor>>& inputs,
                                                                  const c10d::ReduceScatterOptions& opts) {
  at::Tensor out = single(outputs, "reduce_scatter");
  checkReducible(out, opts.reduceOp, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(size_), "mixccl reduce_scatter: expected ",
              size_, " input tensors");
  checkSameShape(inputs[0], out, "reduce_scatter");
  Buffer b = reducingBuffer(out);
  std::vector<at::Tensor> ins = inputs[0];
  c10d::ReduceOp op = opts.reduceOp;
  return enqueue(c10d::OpType::REDUCE_SCATTER, "reduce_scatter", {out}, opts.timeout, [out, b, ins, op](ncclComm_t c) {
    at::Tensor flat = flatCat(ins);
    RedOp r(op, out.scalar_type(), c);
    MIXCCL_TORCH_CHECK_NCCL(ncclReduceScatter(flat.data_ptr(), b.ptr, b.count, b.type, r.get(), c, nullptr),
                            "ncclReduceScatter");
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMixccl::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                        const c10d::ReduceScatterOptions& opts) {
  checkReducible(output, opts.reduceOp, "reduce_scatter_tensor");
  checkHostTensor(input, "reduce_scatter_tensor");
  TORCH_CHECK(input.scalar_type() == output.scalar_type() && input.numel() == size_ * output.numel(),
              "mixccl reduce_scatter_tensor: the input must hold ", size_, " x ", output.numel(), " elements of ",
              output.scalar_type());
  Buffer b = reducingBuffer(output);
  at::Tensor in = input, out = output;
  c10d::ReduceOp op = opts.reduceOp;
  return enqueue(
      c10d::OpType::_REDUCE_SCATTER_BASE, "reduce_scatter_tensor", {out}, opts.timeout, [in, out, b, op](ncclComm_t c) {
        RedOp r(op, out.scalar_type(), c);
        MIXCCL_TORCH_CHECK_NCCL(ncclReduceScatter(in.data_ptr(), b.ptr, b.count, b.type, r.get(), c, nullptr),
                                "ncclReduceScatter");
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMixccl::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                 std::vector<int64_t>& outputSplits,
                                                                 std::vector<int64_t>& inputSplits,
                                                                 const c10d::AllToAllOptions& opts) {
  Buffer inBuf = movingBuffer(input, "all_to_all_single");
  Buffer outBuf = movingBuffer(output, "all_to_all_single");
  TORCH_CHECK(input.scalar_type() == output.scalar_type(), "mixccl all_to_all_single: input and output dtypes differ");
  at::Tensor in = input, out = output;
  if (outputSplits.empty() && inputSplits.empty()) {
    // Equal splits are rows of dim 0, as with torch's own backends: a block that ended mid-row
    // would hand each peer parts of rows.
    for (const at::Tensor* t : {&in, &out}) {
      TORCH_CHECK(t->dim() >= 1 && t->size(0) % size_ == 0, "mixccl all_to_all_single: ", t == &in ? "input" : "output",
                  " dim 0 (", t->dim() >= 1 ? t->size(0) : 0, ") does not divide by the group size ", size_,
                  "; pass split sizes for uneven rows");
    }
    TORCH_CHECK(in.numel() == out.numel(), "mixccl all_to_all_single: input and output ",
                "must hold the same number of elements (", in.numel(), " and ", out.numel(), ")");
    size_t perPeer = inBuf.count / size_;
    return enqueue(c10d::OpType::ALLTOALL_BASE, "all_to_all_single", {out}, opts.timeout,
                   [in, out, inBuf, outBuf, perPeer](ncclComm_t c) {
                     MIXCCL_TORCH_CHECK_NCCL(ncclAlltoAll(inBuf.ptr, outBuf.ptr, perPeer, inBuf.type, c, nullptr),
                                             "ncclAlltoAll");
                   });
  }
  // Uneven splits count rows of dim 0; an empty list means equal rows per peer.
  auto offsets = [this](const at::Tensor& t, std::vector<int64_t> splits, const char* side) {
    TORCH_CHECK(t.dim() >= 1, "mixccl all_to_all_single: split sizes need a tensor with a dim 0");
    if (splits.empty()) {
      TORCH_CHECK(t.size(0) % size_ == 0, "mixccl all_to_all_single: ", side, " dim 0 (", t.size(0),
                  ") does not divide by the group size ", size_);
      splits.assign(size_, t.size(0) / size_);
    }
    TORCH_CHECK(splits.size() == static_cast<size_t>(size_), "mixccl all_to_all_single: ", side, " has ", splits.size(),
                " split sizes for ", size_, " ranks");
    const int64_t row = t.dim() == 0 || t.size(0) == 0 ? 0 : t.numel() / t.size(0);
    std::vector<std::pair<size_t, size_t>> spans;  // (offset, count) in Buffer units
    int64_t pos = 0;
    const size_t unit = unitsPerElement(t);
    for (int64_t s : splits) {
      TORCH_CHECK(s >= 0, "mixccl all_to_all_single: negative split size");
      spans.emplace_back(pos * row * unit, s * row * unit);
      pos += s;
    }
    TORCH_CHECK(pos == t.size(0), "mixccl all_to_all_single: ", side, " split sizes add up to ", pos, ", dim 0 is ",
                t.size(0));
    return spans;
  };
  auto sendSpans = offsets(in, inputSplits, "input");
  auto recvSpans = offsets(out, outputSplits, "output");
  int me = rank_, n = size_;
  // Checked here, not on the worker: a failure there would mark the whole group failed.
  TORCH_CHECK(sendSpans[me].second == recvSpans[me].second, "mixccl all_to_all_single: rank ", me, " sends ",
              sendSpans[me].second / unitsPerElement(in), " elements to itself but expects ",
              recvSpans[me].second / unitsPerElement(out), " (its input and output split sizes disagree)");
  size_t unitBytes = in.element_size() / unitsPerElement(in);
  return enqueue(c10d::OpType::ALLTOALL_BASE, "all_to_all_single", {out}, opts.timeout,
                 [in, out, inBuf, outBuf, sendSpans, recvSpans, me, n, unitBytes](ncclComm_t c) {
                   auto* src = static_cast<char*>(inBuf.ptr);
                   auto* dst = static_cast<char*>(outBuf.ptr);
                   inGroup("all_to_all_single (ncclGroupEnd)", [&] {
                     for (int p = 0; p < n; ++p) {
                       if (p == me) continue;
                       if (sendSpans[p].second > 0) {
                         MIXCCL_TORCH_CHECK_NCCL(ncclSend(src + sendSpans[p].first * unitBytes, sendSpans[p].second,
                                                          inBuf.type, p, c, nullptr),
                                                 "ncclSend (all_to_all_single)");
                       }
                       if (recvSpans[p].second > 0) {
                         MIXCCL_TORCH_CHECK_NCCL(ncclRecv(dst + recvSpans[p].first * unitBytes, recvSpans[p].second,
                                                          inBuf.type, p, c, nullptr),
                                                 "ncclRecv (all_to_all_single)");
                       }
                     }
                   });
                   std::memcpy(dst + recvSpans[me].first * unitBytes, src + sendSpans[me].first * unitBytes,
                               sendSpans[me].second * unitBytes);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupMixccl::alltoall(std::vector<at::Tensor>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllToAllOptions& opts) {
  TORCH_CHECK(inputs.size() == static_cast<size_t>(size_) && outputs.size() == static_cast<size_t>(size_),
              "mixccl all_to_all: expected ", size_, " input and output tensors");
  std::vector<Buffer> sends, recvs;
  for (int p = 0; p < size_; ++p) {
    sends.push_back(movingBuffer(inputs[p], "all_to_all"));
    recvs.push_back(movingBuffer(outputs[p], "all_to_all"));
    TORCH_CHECK(inputs[p].scalar_type() == outputs[p].scalar_type(),
                "mixccl all_to_all: input and output dtypes differ");
  }
  // This rank's own block is a local copy on the worker; a mismatch is caught here, where it
  // raises at the call, instead of there, where it would mark the whole group failed.
  TORCH_CHECK(inputs[rank_].numel() == outputs[rank_].numel(), "mixccl all_to_all: rank ", rank_, " sends ",
              inputs[rank_].numel(), " elements to itself but its output tensor ", rank_, " holds ",
              outputs[rank_].numel());
  std::vector<at::Tensor> ins = inputs, outs = outputs;
  int me = rank_, n = size_;
  return enqueue(c10d::OpType::ALLTOALL, "all_to_all", outs, opts.timeout,
                 [ins, outs, sends, recvs, me, n](ncclComm_t c) {
                   inGroup("all_to_all (ncclGroupEnd)", [&] {
                     for (int p = 0; p < n; ++p) {
                       if (p == me) continue;
                       if (sends[p].count > 0) {
                         MIXCCL_TORCH_CHECK_NCCL(ncclSend(sends[p].ptr, sends[p].count, sends[p].type, p, c, nullptr),
                                                 "ncclSend (all_to_all)");
                       }
                       if (recvs[p].count > 0) {
                         MIXCCL_TORCH_CHECK_NCCL(ncclRecv(recvs[p].ptr, recvs[p].count, recvs[p].type, p, c, nullptr),
                                                 "ncclRecv (all_to_all)");
                       }
                     }
                   });
                   // Same element count (checked at the call); the shapes may differ, as between peers.
                   outs[me].view({-1}).copy_(ins[me].view({-1}));
                 });
}

}  // namespace mixccl::torch_backend
