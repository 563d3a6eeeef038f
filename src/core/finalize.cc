// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "src/core/finalize.h"

#include <chrono>
#include <thread>

#include "common/config.h"
#include "common/log.h"
#include "src/core/communicator.h"
#include "src/core/op_stamp.h"

namespace mixccl {
namespace {

// conn->peek() without a failure reaching the log or the last error: a peer that left after the
// barrier is no news here, its lane is simply empty.
Result quietPeek(RecvConnection* conn, const void** data, size_t* bytes, uint64_t* stamp) {
  QuietFailures quiet;
  return conn->peek(data, bytes, stamp);
}

// kInvalidUsage when the collective lane from `peer` holds a message (not a probe, not a closing
// token owed to this rank: owed_tokens.h) that no operation of this rank consumed, or lacks a
// token it owes. Only looks: lanes that were never set up hold nothing.
Result checkDrained(Communicator& comm, int peer) {
  RecvConnection* conn = comm.existingRecvConnection(peer, kLaneColl);
  OwedTokens& owed = comm.owedTokens();
  // An owed token left the peer before its barrier, but over a network it may still be on its way.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(config::getInt(config::Knob::kTimeout));
  while (conn != nullptr) {
    const void* data = nullptr;
    size_t bytes = 0;
    uint64_t stamp = 0;
    const Result r = quietPeek(conn, &data, &bytes, &stamp);
    if (r == Result::kInProgress && owed.from(peer) && !comm.aborted() && std::chrono::steady_clock::now() < deadline) {
      MIXCCL_TRY(comm.progressTransports());
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      continue;
    }
    if (r != Result::kSuccess) break;
    if ((stamp & kStampProbe) == 0 && owed.from(peer)) {
      MIXCCL_TRY(owed.match(peer, bytes, stamp));  // a closing token this rank, a root, did not wait for
    } else if ((stamp & kStampProbe) == 0) {
      return fail(Result::kInvalidUsage,
                  "ncclCommFinalize on rank %d: rank %d sent a collective (%s) that no call on this rank received: "
                  "mismatched calls (e.g. ranks that disagree on a broadcast's root, or a different number of "
                  "collectives); every rank must issue the same collectives with the same arguments",
                  comm.rank(), peer, describeStamp(stamp).c_str());
    }
    MIXCCL_TRY(conn->release());  // probes and owed tokens have served their purpose
  }
  if (owed.from(peer)) {
    return fail(Result::kInvalidUsage,
                "ncclCommFinalize on rank %d: rank %d finished without sending %s: mismatched calls (e.g. ranks "
                "that disagree on a broadcast's root); every rank must issue the same collectives with the same "
                "arguments",
                comm.rank(), peer, owed.describe(peer).c_str());
  }
  return Result::kSuccess;
}

// kInvalidUsage when the send/recv lane from `peer` (this rank itself included) holds a message
// that no receive of this rank took: an ncclSend without a matching ncclRecv whose message fit the
// lane returned success, as NCCL's may, and its data went nowhere without a word. Only looks, as
// checkDrained does; a message still on its way over a network after the barrier goes unnoticed.
Result checkP2pDrained(Communicator& comm, int peer) {
  RecvConnection* conn = comm.existingRecvConnection(peer, kLaneP2p);
  if (conn == nullptr) return Result::kSuccess;
  const void* data = nullptr;
  size_t bytes = 0;
  uint64_t stamp = 0;
  if (quietPeek(conn, &data, &bytes, &stamp) != Result::kSuccess) return Result::kSuccess;
  return fail(Result::kInvalidUsage,
              "ncclCommFinalize on rank %d: rank %d sent a message (%s, %zu bytes) that no receive on this rank "
              "took: mismatched calls (an ncclSend without a matching ncclRecv); every send needs a receive from "
              "the same rank with the same count and datatype",
              comm.rank(), peer, describeStamp(stamp).c_str(), bytes);
}

}  // namespace

Result finalizeCommunicator(Communicator& comm) {
  // A failed, aborted or revoked communicator has nothing left to agree on, and its peers may be
  // gone: finalize only marks it.
  const Result async = comm.asyncError();
  if (comm.aborted() || comm.revoked() || (async != Result::kSuccess && async != Result::kInProgress)) {
    comm.finalize();
    return Result::kSuccess;
  }
  MIXCCL_INFO(log::kInit, "rank %d: finalize waits for every rank to finish the communicator's work", comm.rank());
  // A peer may still be stuck sending this rank a collective message that no call here read, on a
  // lane this rank never created (shm: the receiver creates it). It would wait for that lane, and
  // the barrier for it, until the deadline; with the lane there it finishes its call, reaches the
  // barrier, and checkDrained below finds the message. Lanes opened only to look: on shm a page
  // or two each, not the slots' reserved memory (Communicator::openRecvLanes).
  comm.openRecvLanes(kLaneColl);
  Result r = comm.bootstrap()->barrier();
  if (r != Result::kSuccess) {
    return fail(r,
                "ncclCommFinalize on rank %d: not every rank reached finalize (%s); a rank that left without "
                "finalizing, died or is stuck in an earlier call cannot confirm that the communicator's work is done",
                comm.rank(), lastError().c_str());
  }
  for (int peer = 0; peer < comm.nranks(); ++peer) {
    if (peer != comm.rank()) MIXCCL_TRY(checkDrained(comm, peer));
    MIXCCL_TRY(checkP2pDrained(comm, peer));
  }
  comm.finalize();
  return Result::kSuccess;
}

}  // namespace mixccl
