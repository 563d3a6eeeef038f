// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Collectives, point-to-point and groups: argument checks, then one Op handed to the core.

#include <climits>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/log.h"
#include "src/api/guard.h"
#include "src/api/handle.h"
#include "src/core/group.h"
#include "src/core/op.h"

using mixccl::CollKind;
using mixccl::Communicator;
using mixccl::DataType;
using mixccl::fail;
using mixccl::Result;
using mixccl::api::apiGuard;

namespace {

struct CollCall {
  const char* fn;
  CollKind kind;
  const void* sendbuff;
  void* recvbuff;
  size_t count;
  ncclDataType_t datatype;
  ncclRedOp_t op;  // reductions only
  int root;        // rooted collectives; peer for send/recv
  ncclComm_t comm;
  cudaStream_t stream;
};

bool needsRoot(CollKind k) {
  return k == CollKind::kBroadcast || k == CollKind::kReduce || k == CollKind::kGather || k == CollKind::kScatter ||
         k == CollKind::kSend || k == CollKind::kRecv;
}

// The most bytes one user buffer can span: x86-64 with 5-level paging, AArch64 and RISC-V Sv57
// give a process at most 2^56 bytes of address space, so a larger buffer cannot exist and a count
// that asks for one is a bad argument (taken on trust it would run off the end of the buffer).
constexpr uint64_t kMaxBufferBytes = uint64_t{1} << 56;

// Whether the larger user buffer of this call on this rank (count * multiplier elements of elem
// bytes) is larger than any buffer can be, including products that overflow 64 bits. Checked
// multiplications rather than kMaxBufferBytes / multiplier / elem: two 64-bit divisions were the
// costliest instructions of a small collective's argument checks (perf annotate).
bool bytesOverflow(uint64_t count, uint64_t multiplier, size_t elem) {
  uint64_t elems = 0;
  uint64_t bytes = 0;
  return __builtin_mul_overflow(count, multiplier, &elems) || __builtin_mul_overflow(elems, uint64_t{elem}, &bytes) ||
         bytes > kMaxBufferBytes;
}

Result validate(const CollCall& c, Communicator* comm) {
  if (static_cast<int>(c.datatype) < 0 || static_cast<int>(c.datatype) >= mixccl::kNumDataTypes) {
    return fail(Result::kInvalidArgument, "%s: invalid datatype %d", c.fn, static_cast<int>(c.datatype));
  }
  const int nranks = comm->nranks();
  const int rank = comm->rank();
  if (mixccl::isReduction(c.kind)) {
    int op = static_cast<int>(c.op);
    if (op < 0) return fail(Result::kInvalidArgument, "%s: invalid reduction operator %d", c.fn, op);
    if (op >= mixccl::kNumBuiltinOps) {
      const mixccl::UserRedOp* user = nullptr;
      if (comm->lookupRedOp(op, &user) != Result::kSuccess) {
        return fail(Result::kInvalidArgument,
                    "%s: reduction operator %d is neither built-in nor a live ncclRedOpCreatePreMulSum operator of "
                    "this communicator (rank %d): was it destroyed, or made on another communicator?",
                    c.fn, op, rank);
      }
      const DataType dtype = static_cast<DataType>(c.datatype);
      if (user->dtype != dtype) {
        return fail(Result::kInvalidArgument, "%s: reduction operator %d was created for %s but the datatype is %s",
                    c.fn, op, mixccl::dataTypeName(user->dtype), mixccl::dataTypeName(dtype));
      }
    }
  }
  if (needsRoot(c.kind) && (c.root < 0 || c.root >= nranks)) {
    return fail(Result::kInvalidArgument, "%s: %s %d is out of range [0, %d) on rank %d", c.fn,
                c.kind == CollKind::kSend || c.kind == CollKind::kRecv ? "peer" : "root", c.root, nranks, rank);
  }
  const size_t elem = mixccl::dataTypeSize(static_cast<DataType>(c.datatype));
  uint64_t multiplier = 1;
  if (c.kind == CollKind::kAllGather || c.kind == CollKind::kReduceScatter || c.kind == CollKind::kAlltoAll ||
      c.kind == CollKind::kGather || c.kind == CollKind::kScatter) {
    multiplier = static_cast<uint64_t>(nranks);
  }
  if (bytesOverflow(c.count, multiplier, elem)) {
    return fail(Result::kInvalidArgument,
                "%s: count %zu of %s is larger than any buffer can be (this call's buffers would exceed 2^56 "
                "bytes on %d ranks)",
                c.fn, c.count, mixccl::dataTypeName(static_cast<DataType>(c.datatype)), nranks);
  }
  if (c.count == 0) return Result::kSuccess;
  // Which buffers this rank touches.
  bool readsSend = true;
  bool writesRecv = true;
  switch (c.kind) {
    case CollKind::kReduce:
      writesRecv = rank == c.root;
      break;
    case CollKind::kBroadcast:
      readsSend = rank == c.root;
      break;
    case CollKind::kGather:
      writesRecv = rank == c.root;
      break;
    case CollKind::kScatter:
      readsSend = rank == c.root;
      break;
    case CollKind::kSend:
      writesRecv = false;
      break;
    case CollKind::kRecv:
      readsSend = false;
      break;
    default:
      break;
  }
  if (readsSend && c.sendbuff == nullptr) {
    return fail(Result::kInvalidArgument, "%s: sendbuff is NULL with count %zu on rank %d", c.fn, c.count, rank);
  }
  if (writesRecv && c.recvbuff == nullptr) {
    return fail(Result::kInvalidArgument, "%s: recvbuff is NULL with count %zu on rank %d", c.fn, c.count, rank);
  }
  return Result::kSuccess;
}

ncclResult_t submit(const CollCall& c) {
  return apiGuard(c.fn, [&]() -> Result {
    Communicator* comm = nullptr;
    Result r = mixccl::api::lookupReadyComm(c.fn, c.comm, &comm);
    if (r != Result::kSuccess) return mixccl::group::noteError(r);
    mixccl::log::RankScope scope(comm->rank());
    r = validate(c, comm);
    if (r != Result::kSuccess) return mixccl::group::noteError(r);
    std::unique_ptr<mixccl::Op> op = mixccl::group::newOp();
    op->comm = comm;
    op->kind = c.kind;
    op->input = c.sendbuff;
    op->output = c.recvbuff;
    op->count = c.count;
    op->dtype = static_cast<DataType>(c.datatype);
    op->redOp = static_cast<int>(c.op);
    op->root = c.root;
    op->stream = c.stream;
    return mixccl::group::submit(std::move(op));
  });
}

}  // namespace

MIXCCL_API(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return submit({"ncclAllReduce", CollKind::kAllReduce, sendbuff, recvbuff, count, datatype, op, 0, comm, stream});
}

MIXCCL_API(ncclResult_t, ncclReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
           ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return submit({"ncclReduce", CollKind::kReduce, sendbuff, recvbuff, count, datatype, op, root, comm, stream});
}

MIXCCL_API(ncclResult_t, ncclBroadcast, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
           int root, ncclComm_t comm, cudaStream_t stream) {
  return submit(
      {"ncclBroadcast", CollKind::kBroadcast, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream});
}

MIXCCL_API(ncclResult_t, ncclBcast, void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
           cudaStream_t stream) {
  return submit({"ncclBcast", CollKind::kBroadcast, buff, buff, count, datatype, ncclSum, root, comm, stream});
}

MIXCCL_API(ncclResult_t, ncclAllGather, const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
           ncclComm_t comm, cudaStream_t stream) {
  return submit(
      {"ncclAllGather", CollKind::kAllGather, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, comm, stream});
}

MIXCCL_API(ncclResult_t, ncclReduceScatter, const void* sendbuff, void* recvbuff, size_t recvcount,
           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return submit(
      {"ncclReduceScatter", CollKind::kReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0, comm, stream});
}

MIXCCL_API(ncclResult_t, ncclAlltoAll, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
           ncclComm_t comm, cudaStream_t stream) {
  return submit({"ncclAlltoAll", CollKind::kAlltoAll, sendbuff, recvbuff, count, datatype, ncclSum, 0, comm, stream});
}

MIXCCL_API(ncclResult_t, ncclGather, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
           int root, ncclComm_t comm, cudaStream_t stream) {
  return submit({"ncclGather", CollKind::kGather, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream});
}

MIXCCL_API(ncclResult_t, ncclScatter, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
           int root, ncclComm_t comm, cudaStream_t stream) {
  return submit({"ncclScatter", CollKind::kScatter, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream});
}

MIXCCL_API(ncclResult_t, ncclSend, const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
           ncclComm_t comm, cudaStream_t stream) {
  return submit({"ncclSend", CollKind::kSend, sendbuff, nullptr, count, datatype, ncclSum, peer, comm, stream});
}

MIXCCL_API(ncclResult_t, ncclRecv, void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
           cudaStream_t stream) {
  return submit({"ncclRecv", CollKind::kRecv, nullptr, recvbuff, count, datatype, ncclSum, peer, comm, stream});
}

MIXCCL_API(ncclResult_t, ncclGroupStart) {
  return apiGuard("ncclGroupStart", [] { return mixccl::group::start(); });
}

MIXCCL_API(ncclResult_t, ncclGroupEnd) {
  return apiGuard("ncclGroupEnd", [] { return mixccl::group::end(); });
}

MIXCCL_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t* simInfo) {
  return apiGuard("ncclGroupSimulateEnd", [&]() -> Result {
    if (!mixccl::group::active()) {
      return fail(Result::kInvalidUsage, "ncclGroupSimulateEnd called without a matching ncclGroupStart");
    }
    // As in NCCL: without a simInfo to fill this is ncclGroupEnd.
    if (simInfo == nullptr) return mixccl::group::end();
    double seconds = -1;
    Result r = mixccl::group::simulateEnd(&seconds);
    if (r != Result::kSuccess || seconds < 0) return r;  // no group, or an inner level closed
    // Checked once the group is over, as NCCL does: a bad simInfo still ends (and drops) the group.
    // As NCCL, only the first simInfo->size bytes are the caller's (a struct of an older, shorter
    // version): a size that does not reach the magic reads as uninitialised, and estimatedTime is
    // written only where the size covers it.
    const size_t size = simInfo->size;
    const auto covers = [size](size_t offset, size_t bytes) { return size >= offset + bytes; };
    if (!covers(offsetof(ncclSimInfo_t, magic), sizeof(simInfo->magic)) || simInfo->magic != 0x74685283u) {
      return fail(Result::kInvalidArgument,
                  "ncclGroupSimulateEnd: simInfo is not initialised (size %zu, magic %s): initialise it with "
                  "NCCL_SIM_INFO_INITIALIZER; the group was ended without running its operations",
                  size, covers(offsetof(ncclSimInfo_t, magic), sizeof(simInfo->magic)) ? "wrong" : "beyond the size");
    }
    if (covers(offsetof(ncclSimInfo_t, estimatedTime), sizeof(simInfo->estimatedTime))) {
      simInfo->estimatedTime = static_cast<float>(seconds * 1e6);  // NCCL reports microseconds
    }
    return Result::kSuccess;
  });
}
