// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Internals of the RDMA transport (libibverbs + librdmacm), shared by rdma_transport.cc (device
// choice, listener, connection manager events, handshake checks) and rdma_connection.cc (the two
// ends of a lane). Wire format: docs/PROTOCOL.md, "RDMA".
//
// One reliable-connected queue pair per one-way lane; the sender connects to the receiver's
// rdma_cm listener. The receiver owns `depth` slots of registered memory; the sender owns as many
// staging slots, and each message is one RDMA WRITE WITH IMMEDIATE of a slot (a 64-byte header
// holding the stamp and size, then the payload) into the receiver's slot of the same index. The
// receiver learns of a message from its completion queue (RC places the data before the
// completion), and hands the slot back by writing its count of released messages into the
// sender's registered credit word. So each byte crosses the link once and nothing is copied on
// the receiving side: the engine reduces straight out of the slot.
//
// Ownership: the Transport and every connection hold a shared_ptr to one RdmaHub, which owns every
// endpoint (queue pair, completion queue, registered memory, rdma_cm id) so that connections and
// transport may be destroyed in any order and a connection manager event never finds a freed id.
// Single-threaded (transport.h): no locks.

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "transports/peer_watch.h"
#include "transports/rdma/rdma_lib.h"
#include "transports/rdma/rdma_reg_cache.h"
#include "transports/transport.h"

namespace mixccl {

// Connect private data (sender -> receiver), little-endian, 56 bytes (all that RC allows):
//   u32 magic, u32 version, u32 lane, u64 commHash, u8 secret[16], u32 src, u32 dst,
//   u64 credit address, u32 credit rkey.
constexpr uint32_t kRdmaConnectMagic = 0x5243584du;  // bytes "MXCR"
constexpr uint32_t kRdmaVersion = 2;                 // 2: zero-copy messages (the slot header's source fields)
constexpr size_t kRdmaConnectBytes = 56;
// Accept private data (receiver -> sender), 28 bytes:
//   u32 magic, u32 depth, u32 slot stride, u32 slots rkey, u64 slots address, u32 reserved (0).
constexpr uint32_t kRdmaAcceptMagic = 0x4143584du;  // bytes "MXCA"
constexpr size_t kRdmaAcceptBytes = 28;
// Each slot starts with this header: u64 stamp, u64 payload bytes, u64 source address, u32 source
// rkey, u32 flags, then padding, so the payload the engine reads and writes is 64-byte aligned.
// Flags kRdmaZeroCopy: only the header was written; the receiver reads the payload from the
// sender's registered buffer (source address, rkey) and the sender keeps it until released.
constexpr size_t kRdmaSlotHeaderBytes = 64;
constexpr uint32_t kRdmaZeroCopy = 1;
struct RdmaSlotHeader {
  uint64_t stamp;
  uint64_t bytes;
  uint64_t srcAddr;
  uint32_t srcRkey;
  uint32_t flags;
};
static_assert(sizeof(RdmaSlotHeader) <= kRdmaSlotHeaderBytes);

struct RdmaHello {
  uint32_t lane = 0;
  uint64_t commHash = 0;
  uint8_t secret[16] = {};
  uint32_t src = 0;
  uint32_t dst = 0;
  uint64_t creditAddr = 0;
  uint32_t creditRkey = 0;
};
void encodeRdmaHello(const RdmaHello& h, uint8_t out[kRdmaConnectBytes]);
// False (with *why set) when `len` bytes at `in` are not a connect record of this version.
bool decodeRdmaHello(const void* in, size_t len, RdmaHello* out, const char** why);
// The receiver's acceptance check, short of the duplicate-lane check: nullptr when the record may
// come from lane h.lane of rank h.src of this communicator, else why not. Pure (fuzzed).
const char* checkRdmaHello(const RdmaHello& h, const TransportContext& ctx);

struct RdmaAccept {
  uint32_t depth = 0;
  uint32_t stride = 0;
  uint32_t rkey = 0;
  uint64_t addr = 0;
};
void encodeRdmaAccept(const RdmaAccept& a, uint8_t out[kRdmaAcceptBytes]);
bool decodeRdmaAccept(const void* in, size_t len, RdmaAccept* out, const char** why);

// Registered, page-aligned memory.
struct RdmaRegion {
  void* base = nullptr;
  size_t bytes = 0;
  ibv_mr* mr = nullptr;
  ~RdmaRegion();
  Result make(ibv_pd* pd, size_t bytes, int access, const char* what);
};

// One end of a lane: its rdma_cm id and queue pair, and what the connection manager told it.
struct RdmaEndpoint {
  enum class State { kResolvingAddr, kResolvingRoute, kConnecting, kUp, kFailed };
  bool sender = false;
  int peer = -1;
  int lane = 0;
  State state = State::kResolvingAddr;
  std::string error;  // why it failed (kFailed), for messages
  bool closedByPeer = false;
  rdma_cm_id* id = nullptr;
  ibv_cq* cq = nullptr;
  RdmaRegion slots;               // sender: staging slots; receiver: the slots the sender writes into
  RdmaRegion credit;              // sender: the word the receiver writes its release count into; receiver: its source
  RdmaAccept remote;              // sender: the receiver's slots
  uint64_t remoteCreditAddr = 0;  // receiver: the sender's credit word
  uint32_t remoteCreditRkey = 0;
};

// One RDMA device (rail) this rank listens on.
struct RdmaDevice {
  std::string name;  // "mlx5_0", "rxe0"
  int port = 0;
  ibv_context* verbs = nullptr;  // owned by rdma_cm (the listener's)
  ibv_pd* pd = nullptr;
  ibv_comp_channel* completions = nullptr;  // non-blocking; every completion queue on this device reports here
  rdma_cm_id* listener = nullptr;
  sockaddr_in addr{};  // what the listener is bound to
};

// The listen blob: one 8-byte entry per device (rail), at most kRdmaMaxRails: u32 IPv4 address
// and u16 rdma_cm port (both network order), u8 device port number, u8 flags (0). An empty blob:
// this rank has no usable RDMA device.
constexpr size_t kRdmaBlobEntryBytes = 8;
constexpr size_t kRdmaMaxRails = Transport::kMaxBlobBytes / kRdmaBlobEntryBytes;

// The rail the lanes from rank a to rank b use, chosen by the sender (the receiver accepts on any
// of its listeners): a's rank modulo the rails both have. So the two directions between a pair
// use different rails (a full-duplex pair of ranks keeps two devices busy, not one), a ring's
// sends alternate over the rails, and ranks of one host spread over its devices, as NCCL binds
// each GPU to its nearest NIC. (Up to 2026-11-26 it was (a + b) mod rails: both directions of a
// pair shared one rail.)
inline size_t rdmaRail(int a, int b, size_t railsA, size_t railsB) {
  (void)b;
  const size_t n = railsA < railsB ? railsA : railsB;
  return n == 0 ? 0 : static_cast<size_t>(a) % n;
}

class RdmaRecvConnection;

struct RdmaHub {
  TransportContext ctx;
  std::vector<TransportPeer> peers;
  std::vector<std::vector<sockaddr_in>> addrs;  // [rank][rail]: rdma_cm addresses (none: no device)
  rdma_event_channel* channel = nullptr;
  std::vector<RdmaDevice> devices;  // this rank's rails
  std::map<rdma_cm_id*, std::unique_ptr<RdmaEndpoint>> endpoints;
  std::vector<RdmaEndpoint*> parked;  // [src * kNumLanes + lane]: accepted, no receiver object yet
  uint64_t polls = 0;
  // Zero-copy messages: registered user memory, and the smallest message sent that way.
  std::unique_ptr<RdmaRegCache> regs;
  size_t zeroCopyMin = 0;
  // Receivers holding back releases their senders have not been told of (batched credits,
  // RdmaRecvConnection::release); armWait() sends them before the rank waits.
  std::vector<RdmaRecvConnection*> creditDebtors;

  ~RdmaHub();

  // Handles pending connection manager events; never blocks. Rejected connection requests are
  // logged and refused; they never fail the caller.
  Result poll();
  // Starts the sender end of lane `lane` to `peer`.
  Result startConnect(int peer, int lane, RdmaEndpoint** out);
  // Tears an endpoint down (disconnects, destroys its queue pair and memory).
  void close(RdmaEndpoint* ep);
  // A receiver end that was accepted for (src, lane), or nullptr; the caller attaches it.
  RdmaEndpoint* takeParked(int src, int lane);

  std::string describe(int rank) const;
  // The rail of this rank's lanes with `peer`.
  size_t railTo(int peer) const { return rdmaRail(ctx.rank, peer, devices.size(), addrs[peer].size()); }
  ibv_pd* pdFor(const ibv_context* verbs) const;
  // Idle waits (Transport::armWait): sends the credits held back, asks every completion queue to
  // report its next completion on its device's channel, and lists the channels and the
  // connection manager's descriptor.
  void armWait(std::vector<int>* fds);
  // Reads and acknowledges the completion events that woke a wait (ibv_destroy_cq waits for
  // every event read to be acknowledged, so nothing is left unacknowledged).
  void drainCompletionEvents();

 private:
  void onConnectRequest(rdma_cm_event* ev);
  void onEvent(rdma_cm_event* ev);
  Result createQp(RdmaEndpoint* ep);
  void setAckTimeout(rdma_cm_id* id) const;
  Result setUpSender(RdmaEndpoint* ep);
};

// Opens every device (rail) NCCL_IB_HCA admits that has an active port with an IPv4 address: an
// rdma_cm listener each, on `hub->channel`, and a protection domain (rdma_device.cc). Leaves
// `blob` empty and says why in `*why` when there is none.
Result openRdmaDevices(RdmaHub* hub, std::vector<uint8_t>* blob, std::string* why);
// "169.254.77.1:40622", for messages.
std::string rdmaAddrString(const sockaddr_in& a);

class RdmaSendConnection final : public SendConnection {
 public:
  RdmaSendConnection(std::shared_ptr<RdmaHub> hub, RdmaEndpoint* ep);
  ~RdmaSendConnection() override;

  Result acquire(void** slot) override;
  Result commit(size_t bytes, uint64_t stamp) override;
  Result flush() override;
  size_t slotBytes() const override { return slotBytes_; }
  bool canCommitFrom(size_t bytes, const MemRegion& reg) const override;
  Result commitFrom(const void* src, size_t bytes, uint64_t stamp, const MemRegion& reg) override;

 private:
  Result ready();
  Result reap();
  Result failed();
  Result post(const RdmaSlotHeader& h, size_t wireBytes);
  uint64_t released() const;
  void returnLent(uint64_t released);

  std::shared_ptr<RdmaHub> hub_;
  RdmaEndpoint* ep_;
  uint32_t depth_;
  size_t slotBytes_;
  size_t stride_;
  uint64_t head_ = 0;       // messages committed
  uint32_t acquired_ = 0;   // slots handed out and not committed yet
  uint64_t completed_ = 0;  // writes the local completion queue confirmed
  // Zero-copy messages the receiver may still read: (message number, the region it reads from).
  std::vector<std::pair<uint64_t, ibv_mr*>> lent_;
  bool announced_ = false;           // the first zero-copy message was logged
  Result error_ = Result::kSuccess;  // sticky: the lane is unusable after a failure
  std::string errorText_;
};

class RdmaRecvConnection final : public RecvConnection {
 public:
  RdmaRecvConnection(std::shared_ptr<RdmaHub> hub, int peer, int lane);
  ~RdmaRecvConnection() override;

  Result peekAt(size_t ahead, const void** data, size_t* bytes, uint64_t* stamp) override;
  Result peekInto(const Landing* spots, size_t n, uint64_t wantStamp, const void** data, size_t* bytes,
                  uint64_t* stamp) override;
  Result release() override;
  // Releases held back (rdma_connection.cc) keep slots from the sender as unread messages do, so
  // they are counted off: the owed closing tokens of a lane (src/core/owed_tokens.h) then still
  // leave it two places.
  size_t messageDepth() const override { return depth_ - (creditBatch() - 1); }
  // Tells the sender of every release held back (RdmaHub::armWait: this rank is about to wait).
  void payCredits();

 private:
  // Releases that are told to the sender at once: half the slots, at least one.
  uint32_t creditBatch() const { return std::max<uint32_t>(1, depth_ / 2); }
  // Where the payload of a zero-copy message is read to, per slot.
  struct Fetch {
    enum class State : uint8_t { kNone, kReading, kDone } state = State::kNone;
    void* dst = nullptr;   // the slot's payload, or the user's buffer
    ibv_mr* mr = nullptr;  // the user's region (pinned), nullptr for the slot
  };
  Result pump();
  Result postCredit();
  Result failed();
  Result header(uint64_t msg, RdmaSlotHeader* h);
  Result postRead(uint64_t msg, const RdmaSlotHeader& h, void* dst, uint32_t lkey);

  std::shared_ptr<RdmaHub> hub_;
  int peer_;
  int lane_;
  RdmaEndpoint* ep_ = nullptr;
  uint32_t depth_;
  size_t stride_;
  PeerWatch watch_;      // same-host peers only: notices a sender that dies before it connects
  uint64_t read_ = 0;    // oldest message not yet released
  uint64_t filled_ = 0;  // messages whose completion arrived
  uint64_t creditsInFlight_ = 0;
  uint64_t credited_ = 0;            // the release count the last credit write carried (read_ beyond it: owed)
  bool creditDue_ = false;           // a credit must go out as soon as a write may be posted
  bool inDebtors_ = false;           // listed in hub_->creditDebtors
  std::vector<Fetch> fetch_;         // [message % depth]
  bool announced_ = false;           // the first zero-copy landing was logged
  Result error_ = Result::kSuccess;  // sticky: the lane is unusable after a failure
  std::string errorText_;
};

}  // namespace mixccl
