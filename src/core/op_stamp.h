// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Mismatch detection. Every message carries a 64-bit stamp describing the operation that sent it
// (PROTOCOL.md, "Operation stamps"); a receiver compares it with the stamp of its own operation
// before it uses the payload. Ranks that called different collectives, counts, datatypes,
// reduction operators or roots at the same point, or a different number of operations, or whose
// tuners chose different algorithms (different NCCL_ALGO), fail with kInvalidUsage naming what
// differs and on which rank, instead of hanging or mixing data.
// The cost is one 8-byte store per sent message and one compare per received one.
//
// Layout (bit 0 = least significant):
//   0..15  sequence number, low 16 bits (collectives: per communicator; send/recv: per peer)
//   16..19 operation kind (CollKind; a receive expects kSend)
//   20..23 datatype (ncclDataType_t)
//   24..27 reduction: ncclRedOp_t 0..4 for built-ins, 5 for any PreMulSum, 15 for none
//   28..43 root, low 16 bits (Broadcast, Reduce, Gather, Scatter)
//   44..57 count fingerprint: (count ^ count >> 14 ^ count >> 28 ^ count >> 42) & 0x3fff
//   operations without a root (send/recv and the other collectives) use 28..57 for the count
//   instead: (count ^ count >> 30 ^ count >> 60) & 0x3fffffff, exact below 2^30 elements
//   58..61 algorithm (algo::Algo, the tuner's choice; 0 for send/recv)
//   62     protocol: 0 Simple, 1 LL
//   63     probe: an empty message a rank sends on the collective lane to the peer it has waited
//          on for a while, so ranks that all wait to receive (e.g. a broadcast whose roots
//          differ) still compare notes. A receiver skips probes of other sequence numbers
//          (stale or early), and of its own operation when they match.

#include <cstdint>
#include <string>

#include "src/core/op.h"

namespace mixccl {

// The stamp op's messages carry, and that op expects on the messages it receives. Needs op.seq.
uint64_t opStamp(const Op& op);

// Whether a Broadcast or Scatter whose schedule ends with a closing token (algorithms/schedule.h)
// sends and reads it this time: every kClosingTokenEvery-th collective of a communicator, and every
// one whose count is at least kClosingTokenBytes. Both sides derive it from facts they agree on
// (the sequence number, the count and datatype), so a token is sent exactly where it is owed.
// Needs op.seq. PROTOCOL.md section 7, "Closing tokens", says what the others cost and why.
constexpr uint64_t kClosingTokenEvery = 8;
constexpr uint64_t kClosingTokenBytes = 64 * 1024;
bool closingTokenDue(const Op& op);

constexpr uint64_t kStampProbe = 1ull << 63;
// Whether two stamps carry the same sequence number.
constexpr bool sameSeq(uint64_t a, uint64_t b) { return ((a ^ b) & 0xffff) == 0; }

// "Broadcast seq 5 (mod 65536), datatype float32, reduction none, root 1", for messages.
std::string describeStamp(uint64_t stamp);

// What a mismatch message says of this rank's side: the operation running, or one that returned
// and still waits for a peer's closing token (owed_tokens.h).
struct OpIdentity {
  uint64_t stamp = 0;
  CollKind kind = CollKind::kAllReduce;
  uint64_t seq = 0;
  DataType dtype = DataType::kFloat32;
  int root = 0;
  uint64_t count = 0;
  int rank = 0;  // this rank
};
OpIdentity identityOf(const Op& op);

// kInvalidUsage with a message saying what differs between `ours` (this rank) and the sender of a
// message stamped `theirs` (rank `peer`); `context` (may be empty) follows the message.
Result stampMismatch(const OpIdentity& ours, uint64_t theirs, int peer, const char* context);
inline Result stampMismatch(const Op& op, uint64_t theirs, int peer) {
  return stampMismatch(identityOf(op), theirs, peer, "");
}

}  // namespace mixccl
