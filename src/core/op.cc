// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "src/core/op.h"

#include <cstring>

#include "common/config.h"
#include "common/log.h"
#include "src/core/communicator.h"

namespace mixccl {
namespace {

// NCCL's meaning of each operator, expressed as the kernel's Sum/Prod/Max/Min plus transforms:
// Avg on floats pre-multiplies every input by 1/nranks; Avg on integers sums and divides once;
// PreMulSum pre-multiplies by the user's scalar.
Result resolveReduction(Op* op) {
  ReduceSpec& spec = op->spec;
  spec.dtype = op->dtype;
  const int nranks = op->comm->nranks();
  if (op->redOp < kNumBuiltinOps) {
    RedOpKind kind = static_cast<RedOpKind>(op->redOp);
    if (kind != RedOpKind::kAvg) {
      spec.op = kind;
      return Result::kSuccess;
    }
    spec.op = RedOpKind::kSum;
    if (isFloatType(op->dtype)) {
      spec.preMul = true;
      encodeReciprocal(op->dtype, static_cast<uint64_t>(nranks), spec.scalar);
    } else {
      spec.divisor = static_cast<uint64_t>(nranks);
    }
    return Result::kSuccess;
  }
  const UserRedOp* user = nullptr;
  MIXCCL_TRY(op->comm->lookupRedOp(op->redOp, &user));
  if (user->dtype != op->dtype) {
    return fail(Result::kInvalidArgument, "reduction operator %d was created for %s but the call uses %s", op->redOp,
                dataTypeName(user->dtype), dataTypeName(op->dtype));
  }
  spec.op = RedOpKind::kSum;
  spec.preMul = true;
  if (user->scalarOnHost) {
    memcpy(spec.scalar, user->scalar, dataTypeSize(op->dtype));
  } else {
    op->deviceScalar = user->scalarPtr;
  }
  return Result::kSuccess;
}

// Elements per message slot (MIXCCL_CHUNK_SIZE bytes), part of a schedule's cache key.
uint64_t chunkElems(DataType dtype) {
  return static_cast<uint64_t>(config::getInt(config::Knob::kChunkSize)) / dataTypeSize(dtype);
}

// Whether an all-to-all's buffers overlap on this rank (algo::CollArgs::stageInput). Both span
// count * nranks elements; NCCL defines no in-place all-to-all, and torch's in-place
// all_to_all_single passes one tensor as both, so such a call is made correct by a copy rather
// than left to whichever algorithm happens to survive it (pairwise and Bruck did not).
bool inputOverlapsOutput(const Op& op) {
  if (op.kind != CollKind::kAlltoAll || op.count == 0 || op.comm->nranks() < 2) return false;
  const uintptr_t bytes = inputBytes(op);  // the output's too
  const auto in = reinterpret_cast<uintptr_t>(op.input);
  const auto out = reinterpret_cast<uintptr_t>(op.output);
  return in < out + bytes && out < in + bytes;
}

// The plan cache key of `op`'s call; the algorithm is left for the caller (unknown before the
// decision).
PlanKey planKeyOf(const Op& op) {
  PlanKey key;
  key.kind = op.kind;
  key.dtype = op.dtype;
  key.count = op.count;
  key.root = op.root;
  key.chunkElems = chunkElems(op.dtype);
  key.stageInput = inputOverlapsOutput(op);
  return key;
}

algo::CollArgs shapeOf(const Op& op) {
  algo::CollArgs shape;
  shape.kind = op.kind;
  shape.rank = op.comm->rank();
  shape.nranks = op.comm->nranks();
  shape.root = op.root;
  shape.count = op.count;
  return shape;
}

}  // namespace

uint64_t inputBytes(const Op& op) { return algo::inputElems(shapeOf(op)) * dataTypeSize(op.dtype); }
uint64_t outputBytes(const Op& op) { return algo::outputElems(shapeOf(op)) * dataTypeSize(op.dtype); }

Result prepareOp(Op* op) {
  Communicator* comm = op->comm;
  op->reduction = isReduction(op->kind);
  op->lane = (op->kind == CollKind::kSend || op->kind == CollKind::kRecv) ? kLaneP2p : kLaneColl;
  if (op->reduction) {
    const RedOpKind named = op->redOp < kNumBuiltinOps ? static_cast<RedOpKind>(op->redOp) : RedOpKind::kPreMulSum;
    MIXCCL_TRY(comm->checkSupported(op->dtype, named, collName(op->kind)));
    MIXCCL_TRY(resolveReduction(op));
  }
  // A remembered decision is the one choose() would make again; with TUNING logs on, the tuner
  // is asked every time so that every call's decision is logged.
  // A repeated call also finds its schedule here (planOp then skips its own lookup).
  const PlanKey key = planKeyOf(*op);
  const bool logged = log::enabled(log::Level::kInfo, log::kTune);
  if (!logged && comm->plans().findDecisionAsCaller(key, &op->algo, &op->predictedSeconds, &op->schedule)) {
    return Result::kSuccess;
  }
  op->schedule = nullptr;  // an earlier call's (group::newOp); planOp() finds or builds this one's
  TuneChoice choice;
  MIXCCL_TRY(comm->tuner().choose(op->kind, op->count, op->dtype, &choice));
  op->algo = choice.algo;
  op->predictedSeconds = choice.seconds;
  comm->plans().storeDecision(key, choice.algo, choice.seconds);
  return Result::kSuccess;
}

Result planOp(Op* op) {
  if (op->deviceScalar != nullptr) {
    MIXCCL_TRY(op->comm->backend()->copy(op->spec.scalar, op->deviceScalar, dataTypeSize(op->dtype), nullptr));
  }
  Communicator* comm = op->comm;
  // prepareOp() found the schedule of a repeated call already.
  if (op->schedule == nullptr) {
    PlanKey key = planKeyOf(*op);
    key.algo = op->algo;
    op->schedule = comm->plans().findSchedule(key);
    if (op->schedule == nullptr) {
      algo::CollArgs args;
      args.kind = op->kind;
      args.rank = comm->rank();
      args.nranks = comm->nranks();
      args.root = op->root;
      args.count = op->count;
      args.chunkElems = key.chunkElems;
      args.fifoDepth = static_cast<uint32_t>(config::getInt(config::Knob::kFifoDepth));
      args.algo = op->algo;
      args.stageInput = key.stageInput;
      auto built = std::make_shared<algo::Schedule>();
      MIXCCL_TRY(algo::buildSchedule(args, built.get()));
      op->schedule = built;
      comm->plans().storeSchedule(key, std::move(built));
    }
  }
  const size_t elem = dataTypeSize(op->dtype);
  if (op->schedule->scratchElems > 0) {
    const size_t bytes = op->schedule->scratchElems * elem;
    Result r = op->scratch.allocate(&comm->scratchPool(), comm->backend(), bytes);
    if (r != Result::kSuccess) {
      return fail(r,
                  "%s on rank %d: the %s algorithm needs %zu bytes of scratch memory and the %s backend could not "
                  "allocate them: %s",
                  collName(op->kind), comm->rank(), algo::algoName(op->algo), bytes, comm->backend()->name(),
                  lastError().c_str());
    }
  }
  return Result::kSuccess;
}

}  // namespace mixccl
