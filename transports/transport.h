// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// The transport seam. A Transport connects this rank to peers of one communicator; a connection
// is a one-way, ordered stream of messages ("lane") from one rank to one peer. Two lanes exist per
// ordered pair: kLaneColl carries collectives (issued in the same order on every rank) and
// kLaneP2p carries send/recv (matched per pair in posting order), so the two never block each other.
//
// Data moves through fixed-size slots owned by the connection (a FIFO of `fifoDepth` slots of
// `slotBytes` each). The engine writes straight into a send slot (a reduction's output lands there
// with no extra copy) and reads straight from a receive slot (a reduction reads its peer operand
// in place), so shared memory moves each byte with one write and one read.
//
// Threading: only the progress engine of the owning communicator calls a Transport or its
// connections, one thread at a time. Nothing here blocks: connection set-up finishes inside
// acquire()/peek(), which return kInProgress until the lane is up. Set-up may need the receiving
// rank to call into its transport (progress(), or peek on the lane: RDMA accepts a lane there),
// so a sender's acquire() may wait for a receiver that is not in a call yet. Lock order: none (no locks are
// held across calls).
//
// Errors: a dead or misbehaving peer makes acquire/commit/flush/peek/release return kRemoteError
// with a message naming the peer rank and its host; the connection is unusable afterwards.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"

namespace mixccl {

constexpr int kLaneColl = 0;
constexpr int kLaneP2p = 1;
constexpr int kNumLanes = 2;

// A user buffer span the engine hands a transport for a zero-copy message: `id` names the
// ncclCommRegister() registration [base, base + bytes) it lies in, which stays mapped until the
// engine passes the id to Transport::dropRegions(); id 0: memory the user did not register.
// Registration ids are never reused within a communicator, so a transport may cache what it
// derived from one (RDMA: its memory region) under that id.
struct MemRegion {
  const void* base = nullptr;
  size_t bytes = 0;
  uint64_t id = 0;
};

// Where a received message may land without a copy (RecvConnection::peekInto).
struct Landing {
  void* dst = nullptr;
  size_t bytes = 0;
  MemRegion reg;
};

class SendConnection {
 public:
  virtual ~SendConnection() = default;
  // A free slot to write the next message into (slotBytes() bytes). kInProgress while every slot
  // is in use or the lane is still being set up. It may be called again before commit() to take
  // the following slots as well (up to the FIFO depth): the engine keeps several steps in flight
  // while their device work runs.
  virtual Result acquire(void** slot) = 0;
  // acquire() for a message known to carry at most `bytes` bytes: the slot may be smaller than
  // slotBytes() then, and a transport where small messages take less room (shm: a line of the
  // lane instead of a slot) may hand one out where acquire() would wait. Committing more than
  // `bytes` to it is an error.
  virtual Result acquireFor(size_t bytes, void** slot) {
    (void)bytes;
    return acquire(slot);
  }
  // Publishes the oldest slot acquired and not yet committed with `bytes` (<= slotBytes()) of
  // payload and an opaque 64-bit `stamp` that travels with it (the engine's operation descriptor,
  // used to detect ranks that called different operations; PROTOCOL.md). Messages leave in the
  // order their slots were acquired. Zero-byte messages are allowed.
  virtual Result commit(size_t bytes, uint64_t stamp) = 0;
  // kSuccess once every committed message has left this rank's hands (stored in shared memory, or
  // written to the kernel), so the engine may return to the user; kInProgress otherwise.
  virtual Result flush() = 0;
  virtual size_t slotBytes() const = 0;
  // Between holdPublish() and publish(), committed messages may stay invisible to the receiver;
  // publish() shows them all at once. The engine commits what one poll of its device work
  // retires this way, so a receiver that covers adjacent messages with one command finds them
  // together (src/core/step_work.h). Without an override every commit is visible at once.
  virtual void holdPublish() {}
  virtual void publish() {}
  // For an address in this lane's slots: the same byte at another address such that a range
  // running past the last slot continues with the first slot's bytes (a slot ring mapped twice
  // in a row); nullptr where there is none. Lets a device cover a run of messages that wraps
  // around the ring with one command (src/core/step_work.h).
  virtual const void* ringAlias(const void* p) const {
    (void)p;
    return nullptr;
  }

  // Zero-copy (rendezvous), optional. True when a `bytes`-byte message from user memory in `reg`
  // may be published with commitFrom() instead of being copied into the slot. Cheap; the default
  // (shm, TCP) says no and the engine copies as usual.
  virtual bool canCommitFrom(size_t bytes, const MemRegion& reg) const {
    (void)bytes;
    (void)reg;
    return false;
  }
  // Like commit() for the oldest acquired slot, but the payload stays in `src` (inside `reg`) and
  // the receiver fetches it from there. The caller keeps `src` unchanged until flush() returns
  // kSuccess, which then also waits until the receiver has fetched every such message.
  virtual Result commitFrom(const void* src, size_t bytes, uint64_t stamp, const MemRegion& reg) {
    (void)src;
    (void)bytes;
    (void)stamp;
    (void)reg;
    return Result::kInternalError;
  }
};

class RecvConnection {
 public:
  virtual ~RecvConnection() = default;
  // The message `ahead` places behind the oldest one not yet released (0: the oldest): a pointer
  // valid until that message is released, its size and the stamp it was committed with.
  // kInProgress when it has not arrived. Looking ahead lets the engine start a step on the next
  // message while the device still works on the previous one.
  virtual Result peekAt(size_t ahead, const void** data, size_t* bytes, uint64_t* stamp) = 0;
  Result peek(const void** data, size_t* bytes, uint64_t* stamp) { return peekAt(0, data, bytes, stamp); }
  // peek(), offering user memory as the place for the oldest message and the ones behind it:
  // spots[i] is where message i places behind the oldest should land if it carries exactly
  // spots[i].bytes with stamp `wantStamp`. A transport that can place such a message there
  // without a copy on this side (RDMA: reads a zero-copy message straight from the sender's
  // buffer) does so, stopping at the first message that does not match, and returns *data ==
  // spots[0].dst for the oldest; any other message is returned as peek() would. The spots may be
  // written before the steps that own them run: the caller offers only spots nothing reads or
  // writes before then.
  virtual Result peekInto(const Landing* spots, size_t n, uint64_t wantStamp, const void** data, size_t* bytes,
                          uint64_t* stamp) {
    (void)spots;
    (void)n;
    (void)wantStamp;
    return peek(data, bytes, stamp);
  }
  // Returns the slot of the oldest message not yet released to the sender. The sender may learn
  // of releases late, several at once (RDMA: telling it costs as many packets as a small
  // message), but of every release at the latest when this transport's armWait() runs, that is
  // before the engine waits; the slots held back that way count against messageDepth().
  virtual Result release() = 0;
  // As SendConnection's: releases between the two calls may reach the sender together.
  virtual void holdPublish() {}
  virtual void publish() {}
  // As SendConnection's, for the messages this lane receives.
  virtual const void* ringAlias(const void* p) const {
    (void)p;
    return nullptr;
  }
  // How many empty messages (closing tokens, probes) the lane holds unread: the FIFO depth where
  // every message takes a slot, more where small ones take less (shm). The engine leaves at most
  // this many minus two closing tokens unread in a lane (src/core/owed_tokens.h).
  virtual size_t messageDepth() const = 0;
  // Makes a lane opened by Transport::connectRecvToLook() fit for use (shm: reserves its pages).
  // The core calls it before a step first reads the lane. Idempotent; never blocks.
  virtual Result reserve() { return Result::kSuccess; }
};

// What the core tells a transport about its communicator (all ranks agree on these).
struct TransportContext {
  int rank = 0;
  int nranks = 1;
  uint64_t commHash = 0;    // random per communicator; names shm segments, checked in handshakes
  uint8_t secret[16] = {};  // from the unique id; proves membership in handshakes
  size_t slotBytes = 0;     // message slot size (MIXCCL_CHUNK_SIZE)
  int fifoDepth = 0;        // slots per connection (MIXCCL_FIFO_DEPTH)
  const std::atomic<bool>* abortFlag = nullptr;
};

// What every rank publishes about itself at init, as the transports see it.
struct TransportPeer {
  int rank = 0;
  uint64_t hostHash = 0;  // equal for ranks on the same host (same kernel boot and hostname)
  // The peer's pid for liveness checks (kill(pid, 0)) from this process: 0 when the peer runs in
  // another pid namespace (otherPidSpace), where its pid names nothing here, or another process
  // (its pid 1 is our init): a transport must then judge its liveness some other way, or not at all.
  int32_t pid = 0;
  // The peer's pid namespace is known to differ from this rank's (PROTOCOL.md 6.1, the pid-space
  // field; common/pid_space.h). Ranks of one host may: containers sharing /dev/shm (--ipc=host).
  bool otherPidSpace = false;
  int32_t reportedPid = 0;    // the pid the peer reported, in its own namespace: for messages only
  std::string host;           // host name, for messages
  std::vector<uint8_t> blob;  // this transport's listen() blob of that rank
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  // Called once at init before the exchange; the blob (<= kMaxBlobBytes) reaches every peer.
  virtual Result listen(std::vector<uint8_t>* blob) = 0;
  // Called once after the exchange with every rank's info, indexed by rank (self included).
  virtual Result setPeers(const std::vector<TransportPeer>& peers) = 0;
  // How well this transport reaches `peer`: 0 = cannot, higher is better.
  virtual int canConnect(int peer) const = 0;
  // The two ends of lane `lane` between this rank and `peer`. Never blocks.
  virtual Result connectSend(int peer, int lane, std::unique_ptr<SendConnection>* out) = 0;
  virtual Result connectRecv(int peer, int lane, std::unique_ptr<RecvConnection>* out) = 0;
  // The receiving end of a lane this rank opens only to look at what `peer` may have sent it (the
  // core's mismatch checks after a long stall, and finalize), from every peer at once. A transport
  // may make it cheaper than a lane in use, to be completed by RecvConnection::reserve().
  virtual Result connectRecvToLook(int peer, int lane, std::unique_ptr<RecvConnection>* out) {
    return connectRecv(peer, lane, out);
  }
  // Background work (accepting incoming TCP connections, ...). Called by the engine while it waits.
  virtual Result progress() { return Result::kSuccess; }
  // Registrations the user dropped (ncclCommDeregister, or the communicator's end): whatever the
  // transport keeps for them (RDMA: memory regions) goes now. Called by the progress engine.
  virtual void dropRegions(const std::vector<uint64_t>& ids) { (void)ids; }
  // Before the engine naps (idle, at most 200 us): arms this transport's wake-ups and appends
  // file descriptors that turn readable when something arrives (RDMA: its completion channels
  // and connection manager events), so the nap ends early. The next calls drain them. Never
  // blocks; a transport without such descriptors appends none.
  virtual void armWait(std::vector<int>* fds) { (void)fds; }

  static constexpr size_t kMaxBlobBytes = 64;
};

// The factories of the built-in transports. The core finds transports through the generated
// registry (transports/registry.h) and never names these; they are declared here for the tests
// that drive one transport directly. A new transport needs no line here.
std::unique_ptr<Transport> makeShmTransport(const TransportContext& ctx);
std::unique_ptr<Transport> makeTcpTransport(const TransportContext& ctx);
// Only in builds with libibverbs and librdmacm (findTransport("rdma") says whether this one has it).
std::unique_ptr<Transport> makeRdmaTransport(const TransportContext& ctx);

}  // namespace mixccl
