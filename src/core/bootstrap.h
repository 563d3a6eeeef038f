// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Bootstrap: how ranks of a communicator find each other and exchange small blobs before (and
// besides) the data transports. TCP only, so ranks of any vendor's build can join (PROTOCOL.md).
//
//  - ncclGetUniqueId starts a root (startRoot): a thread that listens, receives one hello from
//    each of the nranks ranks (its rank, nranks and its own bootstrap listen address), answers
//    every rank with the table of all listen addresses, and exits. It gives up after
//    MIXCCL_TIMEOUT seconds.
//  - Each rank (Bootstrap::init) listens on its own port, registers with the root, and keeps the
//    table. Afterwards ranks talk directly: send/recv of tagged frames over connections opened on
//    first use and kept for the communicator's life; allGather and barrier are rings on top.
//  - Every connection starts with a hello carrying the unique id's secret and commHash; a
//    connection that cannot prove them is closed and logged.
//
// Threading: a Bootstrap object is used by one thread at a time (its communicator's). Every call
// blocks until done, the deadline passes (kRemoteError) or *abortFlag becomes true (kRemoteError).

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/socket.h"

namespace mixccl {

// Decoded ncclUniqueId (128 bytes on the wire, layout in PROTOCOL.md).
struct UniqueIdData {
  // flags bit: no root runs yet; rank 0 starts it on `root` in Bootstrap::init (NCCL_COMM_ID jobs,
  // where every process builds the same id by itself).
  static constexpr uint32_t kRootStartedByRank0 = 1u << 0;

  uint64_t commHash = 0;
  uint8_t secret[16] = {};
  SocketAddress root;
  uint32_t flags = 0;

  static constexpr size_t kBytes = 128;
  void encode(uint8_t out[kBytes]) const;
  static Result decode(const uint8_t in[kBytes], UniqueIdData* out);  // checks magic and version
};

// Fills `id` with a fresh commHash and secret (getrandom) and starts a root thread listening on
// the interface findListenAddress() picks. With NCCL_COMM_ID=host:port the id holds that address
// and no root is started here (rank 0 starts it in Bootstrap::init), so every process can compute
// the same id by itself. Internal callers that need a fresh root whatever the environment says
// (communicator split/shrink, ncclCommInitAll) pass honourCommIdEnv = false.
Result createUniqueId(UniqueIdData* id, bool honourCommIdEnv = true);

// Makes the root of `id`, if it runs in this process and still waits for registrations, give up
// now: every rank registered there, and any queued on its listener, receives an error reply
// (status remote error) carrying `why`; ranks that come later find it gone. For the maker of an id
// that learns first that some rank will never register (comm_split.cc: a shrink whose id cannot
// reach a survivor), so the others fail within moments instead of at MIXCCL_TIMEOUT. Any thread;
// a no-op for a root that already finished or runs elsewhere.
void cancelRoot(const UniqueIdData& id, const std::string& why);

class Bootstrap {
 public:
  // Registers `rank` of `nranks` with the root of `id` and receives everyone's address.
  static Result init(const UniqueIdData& id, int rank, int nranks, const std::atomic<bool>* abortFlag,
                     std::unique_ptr<Bootstrap>* out);
  ~Bootstrap();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  // Bootstrap listen address of `rank` (from the root's table), for messages and tests.
  const SocketAddress& address(int rank) const;

  // Tagged point-to-point message; recv's size must equal the sent size (else kRemoteError).
  Result send(int peer, uint32_t tag, const void* data, size_t bytes);
  Result recv(int peer, uint32_t tag, void* data, size_t bytes);
  // data holds nranks blocks of `bytes`; on entry block `rank` is this rank's, on exit all are filled.
  Result allGather(void* data, size_t bytes);
  Result barrier();

  // Stops the root of `spare`, an id no rank registers with (ncclCommInitRankScalable's ids after
  // the first one, each made by ncclGetUniqueId with a root of its own), by registering with it
  // as the only rank of a one-rank job: it answers and exits now, instead of holding a thread and
  // a port until MIXCCL_TIMEOUT and then warning that no rank came. Skips an id whose root is not
  // started by ncclGetUniqueId (NCCL_COMM_ID) or is this communicator's own. Best effort and
  // quiet (a root already gone is fine), bounded by a few seconds; blocks like the others.
  void releaseRoot(const UniqueIdData& spare);

 private:
  Bootstrap() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_ = 0;
  int nranks_ = 0;
};

}  // namespace mixccl
