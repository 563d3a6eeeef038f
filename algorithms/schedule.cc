// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Argument checks, buffer sizes and the dispatch to the builder of the requested algorithm.
// kDefault is each collective's standing choice (ring for the reduction and gather/scatter-to-all
// kinds, pairwise for all-to-all, direct for gather/scatter); choosing among the others is the
// caller's (a tuner's) business, and every rank must ask for the same one.

#include "algorithms/schedule.h"

#include <cstdint>

#include "algorithms/builders.h"

namespace mixccl::algo {
namespace {

bool isRooted(CollKind k) {
  switch (k) {
    case CollKind::kBroadcast:
    case CollKind::kReduce:
    case CollKind::kGather:
    case CollKind::kScatter:
    case CollKind::kSend:
    case CollKind::kRecv:
      return true;
    default:
      return false;
  }
}

// Kinds whose buffers hold nranks * count elements on some rank.
bool scalesWithRanks(CollKind k) {
  return k == CollKind::kAllGather || k == CollKind::kReduceScatter || k == CollKind::kAlltoAll ||
         k == CollKind::kGather || k == CollKind::kScatter;
}

uint64_t timesRanks(const CollArgs& a) { return static_cast<uint64_t>(a.nranks) * a.count; }

// The algorithm kDefault stands for.
Algo defaultAlgo(CollKind k) {
  switch (k) {
    case CollKind::kAlltoAll:
      return Algo::kPairwise;
    case CollKind::kGather:
    case CollKind::kScatter:
    case CollKind::kSend:
    case CollKind::kRecv:
      return Algo::kDirect;
    default:
      return Algo::kRing;
  }
}

}  // namespace

const char* algoName(Algo a) {
  switch (a) {
    case Algo::kDefault:
      return "default";
    case Algo::kRing:
      return "ring";
    case Algo::kPairwise:
      return "pairwise";
    case Algo::kDirect:
      return "direct";
    case Algo::kRecursiveDoubling:
      return "recursive-doubling";
    case Algo::kBinomialTree:
      return "binomial-tree";
    case Algo::kRecursiveHalving:
      return "recursive-halving";
    case Algo::kRabenseifner:
      return "rabenseifner";
    case Algo::kOneShot:
      return "one-shot";
    case Algo::kBruck:
      return "bruck";
    case Algo::kScatterAllGather:
      return "scatter-allgather";
    case Algo::kDoubleBinaryTree:
      return "double-binary-tree";
    case Algo::kOrdered:
      return "ordered";
  }
  return "?";
}

bool algoSupports(Algo algo, CollKind kind) {
  if (algo == Algo::kDefault || algo == defaultAlgo(kind)) return true;
  switch (algo) {
    case Algo::kRecursiveDoubling:
      return kind == CollKind::kAllReduce || kind == CollKind::kAllGather;
    case Algo::kBinomialTree:
      return kind == CollKind::kBroadcast || kind == CollKind::kReduce || kind == CollKind::kGather ||
             kind == CollKind::kScatter;
    case Algo::kBruck:
      return kind == CollKind::kAlltoAll || kind == CollKind::kAllGather || kind == CollKind::kReduceScatter;
    case Algo::kRecursiveHalving:
      return kind == CollKind::kReduceScatter;
    case Algo::kRabenseifner:
    case Algo::kDoubleBinaryTree:
      return kind == CollKind::kAllReduce;
    case Algo::kScatterAllGather:
      return kind == CollKind::kBroadcast;
    case Algo::kOneShot:
      return kind == CollKind::kAllReduce;
    case Algo::kOrdered:
      return kind == CollKind::kAllReduce || kind == CollKind::kReduceScatter || kind == CollKind::kReduce;
    case Algo::kDirect:  // and gather/scatter, whose default it is
      return kind == CollKind::kAlltoAll || kind == CollKind::kAllGather;
    default:
      return false;
  }
}

namespace {

// CollArgs::stageInput: one local copy of the whole Input into Scratch, placed after what the
// builder's own steps use there, and every read of Input redirected to it. The copy comes first,
// so it reads Input before any step writes Output.
void stageInput(const CollArgs& a, Schedule* s) {
  const uint64_t elems = inputElems(a);
  if (elems == 0) return;
  const uint64_t base = s->scratchElems;
  for (Step& st : s->steps) {
    if (st.src == Buf::kInput) {
      st.src = Buf::kScratch;
      st.srcOffset += base;
    }
  }
  for (Operand& o : s->operands) {
    if (o.buf == Buf::kInput) {
      o.buf = Buf::kScratch;
      o.offset += base;
    }
  }
  s->steps.insert(s->steps.begin(), localCopy(Buf::kInput, 0, Buf::kScratch, base, elems, /*finalize=*/false));
  s->scratchElems = base + elems;
}

}  // namespace

Result buildSchedule(const CollArgs& a, Schedule* out) {
  if (out == nullptr) return fail(Result::kInternalError, "buildSchedule called without an output schedule");
  out->steps.clear();
  out->scratchElems = 0;
  out->operands.clear();
  const unsigned kind = static_cast<unsigned>(a.kind);
  if (kind > static_cast<unsigned>(CollKind::kRecv)) {
    return fail(Result::kInvalidArgument, "unknown collective kind %u", kind);
  }
  if (a.nranks < 1) {
    return fail(Result::kInvalidArgument, "%s: nranks is %d, it must be at least 1", collName(a.kind), a.nranks);
  }
  if (a.rank < 0 || a.rank >= a.nranks) {
    return fail(Result::kInvalidArgument, "%s: rank %d is outside [0, %d)", collName(a.kind), a.rank, a.nranks);
  }
  if (isRooted(a.kind) && (a.root < 0 || a.root >= a.nranks)) {
    return fail(Result::kInvalidArgument, "%s on rank %d: %s %d is outside [0, %d)", collName(a.kind), a.rank,
                a.kind == CollKind::kSend || a.kind == CollKind::kRecv ? "peer" : "root", a.root, a.nranks);
  }
  if (a.chunkElems == 0) {
    return fail(Result::kInvalidArgument,
                "%s on rank %d: chunkElems is 0; the message slot must hold at least one element (raise "
                "MIXCCL_CHUNK_SIZE to at least the datatype size)",
                collName(a.kind), a.rank);
  }
  if (scalesWithRanks(a.kind) && a.count > UINT64_MAX / static_cast<uint64_t>(a.nranks)) {
    return fail(Result::kInvalidArgument, "%s on rank %d: count %llu times %d ranks overflows", collName(a.kind),
                a.rank, static_cast<unsigned long long>(a.count), a.nranks);
  }
  if (static_cast<unsigned>(a.algo) >= static_cast<unsigned>(kNumAlgos) || !algoSupports(a.algo, a.kind)) {
    return fail(Result::kInvalidArgument, "%s on rank %d: algorithm %s (%u) has no %s form", collName(a.kind), a.rank,
                algoName(a.algo), static_cast<unsigned>(a.algo), collName(a.kind));
  }
  if (a.count == 0) return Result::kSuccess;

  const Algo algo = a.algo == Algo::kDefault ? defaultAlgo(a.kind) : a.algo;
  switch (a.kind) {
    case CollKind::kAllReduce:
      if (algo == Algo::kRecursiveDoubling) {
        buildRecursiveDoublingAllReduce(a, out);
      } else if (algo == Algo::kRabenseifner) {
        buildRabenseifnerAllReduce(a, out);
      } else if (algo == Algo::kOneShot) {
        buildOneShotAllReduce(a, out);
      } else if (algo == Algo::kOrdered) {
        buildOrderedAllReduce(a, out);
      } else if (algo == Algo::kDoubleBinaryTree) {
        buildDoubleBinaryTreeAllReduce(a, out);
      } else {
        buildRingAllReduce(a, out);
      }
      break;
    case CollKind::kBroadcast:
      if (algo == Algo::kBinomialTree) {
        buildBinomialBroadcast(a, out);
      } else if (algo == Algo::kScatterAllGather) {
        buildScatterAllGatherBroadcast(a, out);
      } else {
        buildRingBroadcast(a, out);
      }
      break;
    case CollKind::kReduce:
      if (algo == Algo::kBinomialTree) {
        buildBinomialReduce(a, out);
      } else if (algo == Algo::kOrdered) {
        buildOrderedReduce(a, out);
      } else {
        buildRingReduce(a, out);
      }
      break;
    case CollKind::kAllGather:
      if (algo == Algo::kRecursiveDoubling) {
        buildRecursiveDoublingAllGather(a, out);
      } else if (algo == Algo::kBruck) {
        buildBruckAllGather(a, out);
      } else if (algo == Algo::kDirect) {
        buildDirectAllGather(a, out);
      } else {
        buildRingAllGather(a, out);
      }
      break;
    case CollKind::kReduceScatter:
      if (algo == Algo::kRecursiveHalving) {
        buildRecursiveHalvingReduceScatter(a, out);
      } else if (algo == Algo::kBruck) {
        buildBruckReduceScatter(a, out);
      } else if (algo == Algo::kOrdered) {
        buildOrderedReduceScatter(a, out);
      } else {
        buildRingReduceScatter(a, out);
      }
      break;
    case CollKind::kAlltoAll:
      if (algo == Algo::kBruck) {
        buildBruckAlltoAll(a, out);
      } else if (algo == Algo::kDirect) {
        buildDirectAlltoAll(a, out);
      } else {
        buildPairwiseAlltoAll(a, out);
      }
      break;
    case CollKind::kGather:
      if (algo == Algo::kBinomialTree) {
        buildBinomialGather(a, out);
      } else {
        buildDirectGather(a, out);
      }
      break;
    case CollKind::kScatter:
      if (algo == Algo::kBinomialTree) {
        buildBinomialScatter(a, out);
      } else {
        buildDirectScatter(a, out);
      }
      break;
    case CollKind::kSend:
      buildSend(a, out);
      break;
    case CollKind::kRecv:
      buildRecv(a, out);
      break;
  }
  if (a.stageInput) stageInput(a, out);
  return Result::kSuccess;
}

uint64_t inputElems(const CollArgs& a) {
  const bool isRoot = a.rank == a.root;
  switch (a.kind) {
    case CollKind::kAllReduce:
    case CollKind::kReduce:
    case CollKind::kAllGather:
    case CollKind::kGather:
    case CollKind::kSend:
      return a.count;
    case CollKind::kBroadcast:
      return isRoot ? a.count : 0;
    case CollKind::kReduceScatter:
    case CollKind::kAlltoAll:
      return timesRanks(a);
    case CollKind::kScatter:
      return isRoot ? timesRanks(a) : 0;
    case CollKind::kRecv:
      return 0;
  }
  return 0;
}

uint64_t outputElems(const CollArgs& a) {
  const bool isRoot = a.rank == a.root;
  switch (a.kind) {
    case CollKind::kAllReduce:
    case CollKind::kBroadcast:
    case CollKind::kReduceScatter:
    case CollKind::kScatter:
    case CollKind::kRecv:
      return a.count;
    case CollKind::kReduce:
      return isRoot ? a.count : 0;
    case CollKind::kAllGather:
    case CollKind::kAlltoAll:
      return timesRanks(a);
    case CollKind::kGather:
      return isRoot ? timesRanks(a) : 0;
    case CollKind::kSend:
      return 0;
  }
  return 0;
}

}  // namespace mixccl::algo
