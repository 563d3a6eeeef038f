// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "src/core/op_stamp.h"

#include <cstdio>

#include "src/core/communicator.h"

namespace mixccl {
namespace {

constexpr uint64_t kNoReduction = 15;
constexpr uint64_t kAnyPreMulSum = 5;

static_assert(algo::kNumAlgos <= 16, "the stamp has 4 bits for the algorithm");

struct Fields {
  uint64_t seq, kind, dtype, redop, root, count, algo, proto;
};

Fields unpack(uint64_t s) {
  return {s & 0xffff,         (s >> 16) & 0xf,    (s >> 20) & 0xf, (s >> 24) & 0xf,
          (s >> 28) & 0xffff, (s >> 44) & 0x3fff, (s >> 58) & 0xf, (s >> 62) & 1};
}

const char* algoText(uint64_t v) {
  return v < static_cast<uint64_t>(algo::kNumAlgos) ? algo::algoName(static_cast<algo::Algo>(v)) : "unknown";
}

bool rooted(CollKind k) {
  return k == CollKind::kBroadcast || k == CollKind::kReduce || k == CollKind::kGather || k == CollKind::kScatter;
}

const char* redopText(uint64_t v) {
  if (v == kNoReduction) return "none";
  if (v == kAnyPreMulSum) return "PreMulSum";
  return redOpName(static_cast<RedOpKind>(v));
}

}  // namespace

uint64_t opStamp(const Op& op) {
  const CollKind kind = op.kind == CollKind::kRecv ? CollKind::kSend : op.kind;
  uint64_t redop = kNoReduction;
  if (isReduction(op.kind)) redop = op.redOp < kNumBuiltinOps ? static_cast<uint64_t>(op.redOp) : kAnyPreMulSum;
  const bool p2p = op.kind == CollKind::kSend || op.kind == CollKind::kRecv;
  const uint64_t algorithm = p2p ? 0 : static_cast<uint64_t>(op.algo) & 0xf;
  const uint64_t head = (op.seq & 0xffff) | static_cast<uint64_t>(kind) << 16 |
                        (static_cast<uint64_t>(op.dtype) & 0xf) << 20 | redop << 24 | algorithm << 58;
  if (!rooted(op.kind)) {
    // No root (send/recv, unrooted collectives): the count takes bits 28..57, exact below 2^30
    // elements. A 14-bit fingerprint let a receive of whole chunks (2^17 floats) take the first
    // chunks of a longer send whose count folds to the same value (9 * 2^14 + 1) and return
    // success with the rest never read; the same for a 2-rank all-reduce of 2^20 floats against
    // one of 2^20 + 2^14 + 1.
    const uint64_t count = (op.count ^ (op.count >> 30) ^ (op.count >> 60)) & 0x3fffffff;
    return head | count << 28;
  }
  const uint64_t root = static_cast<uint64_t>(op.root) & 0xffff;
  const uint64_t count = (op.count ^ (op.count >> 14) ^ (op.count >> 28) ^ (op.count >> 42)) & 0x3fff;
  return head | root << 28 | count << 44;
}

std::string describeStamp(uint64_t stamp) {
  const Fields f = unpack(stamp);
  const bool knownKind = f.kind < 10;
  char buf[160];
  snprintf(buf, sizeof(buf), "%s seq %llu (mod 65536), datatype %s, reduction %s",
           knownKind ? collName(static_cast<CollKind>(f.kind)) : "unknown operation",
           static_cast<unsigned long long>(f.seq),
           f.dtype < static_cast<uint64_t>(kNumDataTypes) ? dataTypeName(static_cast<DataType>(f.dtype)) : "unknown",
           redopText(f.redop));
  std::string out = buf;
  if (knownKind && rooted(static_cast<CollKind>(f.kind))) out += ", root " + std::to_string(f.root);
  if (f.algo != 0) out += std::string(", algorithm ") + algoText(f.algo);
  return out;
}

bool closingTokenDue(const Op& op) {
  return op.seq % kClosingTokenEvery == 0 || op.count * dataTypeSize(op.dtype) >= kClosingTokenBytes;
}

OpIdentity identityOf(const Op& op) {
  return OpIdentity{op.stamp, op.kind, op.seq, op.dtype, op.root, op.count, op.comm->rank()};
}

Result stampMismatch(const OpIdentity& op, uint64_t theirs, int peer, const char* context) {
  const Fields a = unpack(op.stamp), b = unpack(theirs);
  const bool p2p = op.kind == CollKind::kSend || op.kind == CollKind::kRecv;
  // Stamps of operations without a root use the root's bits for the count (opStamp).
  const bool hasRoot = rooted(op.kind);
  char what[512];
  const char* theirKind = b.kind < 10 ? collName(static_cast<CollKind>(b.kind)) : "an unknown operation";
  // The sequence number first: a message of another one says nothing about what the peer called at
  // this one. A peer that finished its part of this collective without sending this rank what it
  // waits for (it took another root, say) sends its next collective's messages instead, and naming
  // that kind would report a difference of calls that exists at no point of the program.
  if (a.seq != b.seq && p2p) {
    snprintf(what, sizeof(what),
             "rank %d is at send/recv number %llu (mod 65536) where this rank is at %llu: one of them issued more or "
             "fewer operations to the other",
             peer, static_cast<unsigned long long>(b.seq), static_cast<unsigned long long>(a.seq));
  } else if (a.seq != b.seq) {
    snprintf(what, sizeof(what),
             "rank %d sent a message of its collective number %llu (mod 65536, %s) where this rank is at %llu: it "
             "finished or skipped a collective without sending what this rank expects, so the ranks disagree on "
             "this or an earlier collective (which one, its root or count) or one of them issued more or fewer of them",
             peer, static_cast<unsigned long long>(b.seq), theirKind, static_cast<unsigned long long>(a.seq));
  } else if (a.kind != b.kind) {
    snprintf(what, sizeof(what), "rank %d called %s where this rank called %s", peer, theirKind, collName(op.kind));
  } else if (a.dtype != b.dtype) {
    snprintf(what, sizeof(what), "rank %d passed datatype %s where this rank passed %s", peer,
             b.dtype < static_cast<uint64_t>(kNumDataTypes) ? dataTypeName(static_cast<DataType>(b.dtype)) : "unknown",
             dataTypeName(op.dtype));
  } else if (a.redop != b.redop) {
    snprintf(what, sizeof(what), "rank %d passed reduction %s where this rank passed %s", peer, redopText(b.redop),
             redopText(a.redop));
  } else if (a.root != b.root && hasRoot) {
    snprintf(what, sizeof(what), "rank %d passed root %llu where this rank passed %d", peer,
             static_cast<unsigned long long>(b.root), op.root);
  } else if (a.count != b.count || a.root != b.root) {
    snprintf(what, sizeof(what), "rank %d passed a different count than this rank's %llu", peer,
             static_cast<unsigned long long>(op.count));
  } else {
    snprintf(what, sizeof(what),
             "rank %d runs it with the %s algorithm where this rank chose %s: NCCL_ALGO, NCCL_PROTO or "
             "MIXCCL_DETERMINISTIC differs between the ranks; set them the same everywhere",
             peer, algoText(b.algo), algoText(a.algo));
  }
  return fail(Result::kInvalidUsage,
              "%s (seq %llu) on rank %d: mismatched calls: %s%s. Every rank must issue the same collectives, in the "
              "same order, with the same count, datatype, operator and root (send/recv: matching counts and types)",
              collName(op.kind), static_cast<unsigned long long>(op.seq), op.rank, what, context);
}

}  // namespace mixccl
