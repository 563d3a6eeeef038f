// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// RDMA transport: the rdma_cm listener's events, the handshake checks and the Transport.
// rdma_device.cc picks the devices (rails), rdma_connection.cc holds the data path and
// rdma_internal.h the design. No device, NCCL_IB_DISABLE=1 or NCCL_NET=Socket: the listen blob is
// empty, canConnect() says 0 and TCP carries the traffic (one INFO line says why).
//
// An incoming connection must prove membership before it is accepted: its private data has to
// carry this communicator's hash and secret, name this rank, and a valid (src, lane) not already
// connected. Anything else is rejected and logged at WARN; it never fails the job.

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/log.h"
#include "common/wire.h"
#include "transports/lane_claim.h"
#include "transports/net_choice.h"
#include "transports/rdma/rdma_internal.h"

namespace mixccl {
namespace {

constexpr int kResolveTimeoutMs = 5000;
// Events handled per poll(): a burst is drained over several calls, never in one long loop.
constexpr int kEventsPerPoll = 32;
// IB_CM_REJ_CONSUMER_DEFINED: the status of a REJECTED event when the remote listener called
// rdma_reject (InfiniBand Architecture Specification, CM REJ reason codes).
constexpr int kCmRejectConsumer = 28;

}  // namespace

void encodeRdmaHello(const RdmaHello& h, uint8_t out[kRdmaConnectBytes]) {
  WireWriter w(out, kRdmaConnectBytes);
  w.u32(kRdmaConnectMagic);
  w.u32(kRdmaVersion);
  w.u32(h.lane);
  w.u64(h.commHash);
  w.bytes(h.secret, sizeof(h.secret), sizeof(h.secret));
  w.u32(h.src);
  w.u32(h.dst);
  w.u64(h.creditAddr);
  w.u32(h.creditRkey);
}

bool decodeRdmaHello(const void* in, size_t len, RdmaHello* out, const char** why) {
  // The connection manager may pad private data (InfiniBand CM rounds it up), never shorten it.
  if (in == nullptr || len < kRdmaConnectBytes) {
    *why = "connect data too short (not a mixccl RDMA lane)";
    return false;
  }
  WireReader r(static_cast<const uint8_t*>(in), kRdmaConnectBytes);
  if (r.u32() != kRdmaConnectMagic) {
    *why = "bad magic (not a mixccl RDMA lane)";
    return false;
  }
  if (r.u32() != kRdmaVersion) {
    *why = "unsupported protocol version (mixed mixccl versions?)";
    return false;
  }
  out->lane = r.u32();
  out->commHash = r.u64();
  memcpy(out->secret, r.here(), sizeof(out->secret));
  r.skip(sizeof(out->secret));
  out->src = r.u32();
  out->dst = r.u32();
  out->creditAddr = r.u64();
  out->creditRkey = r.u32();
  return true;
}

const char* checkRdmaHello(const RdmaHello& h, const TransportContext& ctx) {
  if (const char* why = checkLaneClaim(h.commHash, h.secret, h.src, h.dst, h.lane, ctx)) return why;
  return h.creditAddr == 0 ? "no credit address" : nullptr;
}

void encodeRdmaAccept(const RdmaAccept& a, uint8_t out[kRdmaAcceptBytes]) {
  WireWriter w(out, kRdmaAcceptBytes);
  w.u32(kRdmaAcceptMagic);
  w.u32(a.depth);
  w.u32(a.stride);
  w.u32(a.rkey);
  w.u64(a.addr);
  w.u32(0);
}

bool decodeRdmaAccept(const void* in, size_t len, RdmaAccept* out, const char** why) {
  if (in == nullptr || len < kRdmaAcceptBytes) {
    *why = "accept data too short";
    return false;
  }
  WireReader r(static_cast<const uint8_t*>(in), kRdmaAcceptBytes);
  if (r.u32() != kRdmaAcceptMagic) {
    *why = "bad accept magic";
    return false;
  }
  out->depth = r.u32();
  out->stride = r.u32();
  out->rkey = r.u32();
  out->addr = r.u64();
  return true;
}

RdmaRegion::~RdmaRegion() {
  if (mr != nullptr) rdma().deregMr(mr);
  free(base);
}

Result RdmaRegion::make(ibv_pd* pd, size_t n, int access, const char* what) {
  if (posix_memalign(&base, 4096, n) != 0) {
    base = nullptr;
    return fail(Result::kSystemError, "rdma: cannot allocate %zu bytes for %s", n, what);
  }
  // Not cleared: a slot is read only after a message wrote it, and registration faults the pages
  // in anyway (clearing megabytes per lane made set-up slower). Small regions (credit words,
  // which must start at zero) are cleared.
  if (n <= 4096) memset(base, 0, n);
  bytes = n;
  mr = rdma().regMr(pd, base, n, access);
  if (mr == nullptr) {
    return fail(Result::kSystemError,
                "rdma: ibv_reg_mr of %zu bytes for %s failed: %s (is the locked-memory limit, ulimit -l, too low?)", n,
                what, strerror(errno));
  }
  return Result::kSuccess;
}

RdmaHub::~RdmaHub() {
  while (!endpoints.empty()) close(endpoints.begin()->second.get());
  regs.reset();  // its regions belong to the protection domains freed below
  drainCompletionEvents();
  for (RdmaDevice& d : devices) {
    if (d.completions != nullptr) rdma().destroyCompChannel(d.completions);
    if (d.pd != nullptr) rdma().deallocPd(d.pd);
    if (d.listener != nullptr) rdma().destroyId(d.listener);
  }
  if (channel != nullptr) rdma().destroyEventChannel(channel);
}

std::string RdmaHub::describe(int rank) const {
  std::string s = "rank " + std::to_string(rank);
  if (rank >= 0 && rank < static_cast<int>(peers.size())) {
    s += " (host " + peers[rank].host;
    if (rank < static_cast<int>(addrs.size()) && !addrs[rank].empty()) {
      const size_t rail = rank == ctx.rank ? 0 : railTo(rank);
      s += ", " + rdmaAddrString(addrs[rank][rail < addrs[rank].size() ? rail : 0]);
    }
    s += ")";
  }
  return s;
}

void RdmaHub::close(RdmaEndpoint* ep) {
  auto it = endpoints.find(ep->id);
  if (it == endpoints.end()) return;
  for (RdmaEndpoint*& p : parked) {
    if (p == ep) p = nullptr;
  }
  if (ep->id->qp != nullptr) {
    if (ep->state == RdmaEndpoint::State::kUp) rdma().disconnect(ep->id);
    rdma().destroyQp(ep->id);
  }
  if (ep->cq != nullptr) {
    drainCompletionEvents();
    rdma().destroyCq(ep->cq);
  }
  rdma_cm_id* id = ep->id;
  endpoints.erase(it);  // frees the registered memory (RdmaRegion) before the id goes
  rdma().destroyId(id);
}

void RdmaHub::drainCompletionEvents() {
  for (const RdmaDevice& d : devices) {
    ibv_cq* cq = nullptr;
    void* context = nullptr;
    while (d.completions != nullptr && rdma().getCqEvent(d.completions, &cq, &context) == 0) rdma().ackCqEvents(cq, 1);
  }
}

void RdmaHub::armWait(std::vector<int>* fds) {
  // Pay first: a sender may be waiting for exactly these credits (rdma_connection.cc).
  for (RdmaRecvConnection* c : creditDebtors) c->payCredits();  // never adds a debtor
  creditDebtors.clear();
  drainCompletionEvents();
  for (const auto& [id, ep] : endpoints) {
    // A queue that cannot be armed just does not wake the nap early; the nap is short.
    if (ep->cq != nullptr) (void)ibv_req_notify_cq(ep->cq, 0);
  }
  for (const RdmaDevice& d : devices) {
    if (d.completions != nullptr) fds->push_back(d.completions->fd);
  }
  if (channel != nullptr) fds->push_back(channel->fd);
}

ibv_pd* RdmaHub::pdFor(const ibv_context* verbs) const {
  for (const RdmaDevice& d : devices) {
    if (d.verbs == verbs) return d.pd;
  }
  return nullptr;
}

RdmaEndpoint* RdmaHub::takeParked(int src, int lane) {
  RdmaEndpoint*& p = parked[static_cast<size_t>(src) * kNumLanes + lane];
  RdmaEndpoint* ep = p;
  if (ep != nullptr) {
    p = nullptr;
  }
  return ep;
}

Result RdmaHub::createQp(RdmaEndpoint* ep) {
  const int depth = ctx.fifoDepth;
  // Sender: one signalled write per slot. Receiver: one receive per slot, credit writes (at most
  // `depth` in flight) and reads of zero-copy messages (one per slot).
  ibv_comp_channel* completions = nullptr;
  for (const RdmaDevice& d : devices) {
    if (d.verbs == ep->id->verbs) completions = d.completions;
  }
  ep->cq = rdma().createCq(ep->id->verbs, 4 * depth + 8, nullptr, completions, 0);
  if (ep->cq == nullptr) return fail(Result::kSystemError, "rdma: ibv_create_cq failed: %s", strerror(errno));
  ibv_qp_init_attr attr{};
  attr.send_cq = ep->cq;
  attr.recv_cq = ep->cq;
  attr.qp_type = IBV_QPT_RC;
  attr.cap.max_send_wr = 2 * static_cast<uint32_t>(depth) + 4;
  attr.cap.max_recv_wr = static_cast<uint32_t>(depth) + 1;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  attr.cap.max_inline_data = sizeof(uint64_t);
  ibv_pd* pd = pdFor(ep->id->verbs);
  if (pd == nullptr)
    return fail(Result::kInternalError, "rdma: lane with %s is on a device this rank did not open",
                describe(ep->peer).c_str());
  if (rdma().createQp(ep->id, pd, &attr) != 0) {
    return fail(Result::kSystemError, "rdma: rdma_create_qp for lane %d with %s failed: %s", ep->lane,
                describe(ep->peer).c_str(), strerror(errno));
  }
  return Result::kSuccess;
}

// The queue pair's retransmission timeout (NCCL_IB_TIMEOUT), set before it is connected. Both
// ends need it: the sender retransmits writes, the receiver its credits and reads. Where the
// kernel lacks the option, its default stays (RoCE: about half a second).
void RdmaHub::setAckTimeout(rdma_cm_id* id) const {
  auto t = static_cast<uint8_t>(std::clamp<int64_t>(config::getInt(config::Knob::kIbTimeout), 1, 31));
  if (rdma().setOption(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &t, sizeof(t)) != 0) {
    MIXCCL_INFO(log::kNet, "NET/IB : cannot set the retransmission timeout (NCCL_IB_TIMEOUT): %s", strerror(errno));
  }
}

Result RdmaHub::startConnect(int peer, int lane, RdmaEndpoint** out) {
  rdma_cm_id* id = nullptr;
  if (rdma().createId(channel, &id, nullptr, RDMA_PS_TCP) != 0) {
    return fail(Result::kSystemError, "rdma: rdma_create_id failed: %s", strerror(errno));
  }
  setAckTimeout(id);
  auto ep = std::make_unique<RdmaEndpoint>();
  ep->sender = true;
  ep->peer = peer;
  ep->lane = lane;
  ep->id = id;
  RdmaEndpoint* raw = ep.get();
  endpoints[id] = std::move(ep);
  const size_t rail = railTo(peer);
  sockaddr_in src = devices[rail].addr;
  src.sin_port = 0;
  sockaddr_in dst = addrs[peer][rail];
  if (rdma().resolveAddr(id, reinterpret_cast<sockaddr*>(&src), reinterpret_cast<sockaddr*>(&dst), kResolveTimeoutMs) !=
      0) {
    raw->state = RdmaEndpoint::State::kFailed;
    raw->error = std::string("rdma_resolve_addr failed: ") + strerror(errno);
  }
  *out = raw;
  return Result::kSuccess;
}

Result RdmaHub::setUpSender(RdmaEndpoint* ep) {
  const size_t stride = kRdmaSlotHeaderBytes + ctx.slotBytes;
  MIXCCL_TRY(createQp(ep));
  ibv_pd* pd = pdFor(ep->id->verbs);
  MIXCCL_TRY(ep->slots.make(pd, stride * ctx.fifoDepth, IBV_ACCESS_LOCAL_WRITE, "staging slots"));
  MIXCCL_TRY(ep->credit.make(pd, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, "the credit word"));
  RdmaHello h;
  h.lane = static_cast<uint32_t>(ep->lane);
  h.commHash = ctx.commHash;
  memcpy(h.secret, ctx.secret, sizeof(h.secret));
  h.src = static_cast<uint32_t>(ctx.rank);
  h.dst = static_cast<uint32_t>(ep->peer);
  h.creditAddr = reinterpret_cast<uintptr_t>(ep->credit.base);
  h.creditRkey = ep->credit.mr->rkey;
  uint8_t data[kRdmaConnectBytes];
  encodeRdmaHello(h, data);
  rdma_conn_param param{};
  param.private_data = data;
  param.private_data_len = sizeof(data);
  param.retry_count = 7;
  param.rnr_retry_count = 7;  // 7: retry forever (the receiver posts its receives before it accepts)
  // The receiver reads zero-copy messages from this rank: as many in flight as it has slots, as
  // far as the device allows.
  ibv_device_attr attr{};
  if (rdma().queryDevice(ep->id->verbs, &attr) == 0) {
    param.responder_resources = static_cast<uint8_t>(std::min({ctx.fifoDepth, attr.max_qp_rd_atom, 255}));
  }
  if (rdma().connect(ep->id, &param) != 0) {
    return fail(Result::kSystemError, "rdma: rdma_connect to %s failed: %s", describe(ep->peer).c_str(),
                strerror(errno));
  }
  ep->state = RdmaEndpoint::State::kConnecting;
  return Result::kSuccess;
}

void RdmaHub::onConnectRequest(rdma_cm_event* ev) {
  RdmaHello h;
  const char* why = nullptr;
  if (!decodeRdmaHello(ev->param.conn.private_data, ev->param.conn.private_data_len, &h, &why)) {
    // logged below
  } else if ((why = checkRdmaHello(h, ctx)) != nullptr) {
    // logged below
  } else {
    const size_t idx = h.src * kNumLanes + h.lane;
    if (idx >= parked.size()) {
      // parked[] is sized by setPeers(); no path polls before it today, but a request that came
      // earlier is refused (logged) rather than written out of bounds.
      why = "the connection request came before this rank knew its peers";
    } else {
      bool duplicate = parked[idx] != nullptr;
      for (const auto& [id, e] : endpoints) {
        if (!e->sender && e->peer == static_cast<int>(h.src) && e->lane == static_cast<int>(h.lane)) duplicate = true;
      }
      if (duplicate) why = "duplicate connection for this (source rank, lane)";
    }
  }
  if (why != nullptr) {
    MIXCCL_WARN("rdma: rank %d rejected a connection request: %s; ignoring it (the job continues)", ctx.rank, why);
    rdma().reject(ev->id, nullptr, 0);
    return;  // the caller destroys the id once the event is acknowledged
  }
  auto ep = std::make_unique<RdmaEndpoint>();
  ep->peer = static_cast<int>(h.src);
  ep->lane = static_cast<int>(h.lane);
  ep->id = ev->id;
  ep->remoteCreditAddr = h.creditAddr;
  ep->remoteCreditRkey = h.creditRkey;
  RdmaEndpoint* raw = ep.get();
  endpoints[ev->id] = std::move(ep);
  const size_t stride = kRdmaSlotHeaderBytes + ctx.slotBytes;
  // The kernel reports the sender's offer from this side's view: its responder resources arrive as
  // the initiator depth this side may use.
  const uint8_t offeredReads = ev->param.conn.initiator_depth;
  auto setUp = [&]() -> Result {
    setAckTimeout(raw->id);
    MIXCCL_TRY(createQp(raw));
    ibv_pd* pd = pdFor(raw->id->verbs);
    MIXCCL_TRY(
        raw->slots.make(pd, stride * ctx.fifoDepth, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, "receive slots"));
    MIXCCL_TRY(raw->credit.make(pd, 64, IBV_ACCESS_LOCAL_WRITE, "the credit source"));
    for (int i = 0; i < ctx.fifoDepth; ++i) {
      ibv_recv_wr wr{};
      ibv_recv_wr* bad = nullptr;
      wr.wr_id = 0;
      if (ibv_post_recv(raw->id->qp, &wr, &bad) != 0) {
        return fail(Result::kSystemError, "rdma: ibv_post_recv failed: %s", strerror(errno));
      }
    }
    RdmaAccept a;
    a.depth = static_cast<uint32_t>(ctx.fifoDepth);
    a.stride = static_cast<uint32_t>(stride);
    a.rkey = raw->slots.mr->rkey;
    a.addr = reinterpret_cast<uintptr_t>(raw->slots.base);
    uint8_t data[kRdmaAcceptBytes];
    encodeRdmaAccept(a, data);
    rdma_conn_param param{};
    param.private_data = data;
    param.private_data_len = sizeof(data);
    param.rnr_retry_count = 7;
    // Reads of zero-copy messages in flight: what the sender offered, as far as this device allows.
    ibv_device_attr attr{};
    if (rdma().queryDevice(raw->id->verbs, &attr) == 0) {
      param.initiator_depth = std::min(offeredReads, static_cast<uint8_t>(std::min(attr.max_qp_init_rd_atom, 255)));
    }
    if (rdma().accept(raw->id, &param) != 0) {
      return fail(Result::kSystemError, "rdma: rdma_accept failed: %s", strerror(errno));
    }
    return Result::kSuccess;
  };
  if (setUp() != Result::kSuccess) {
    MIXCCL_WARN("rdma: rank %d cannot accept lane %u from %s: %s", ctx.rank, h.lane,
                describe(static_cast<int>(h.src)).c_str(), lastError().c_str());
    rdma().reject(ev->id, nullptr, 0);
    if (raw->id->qp != nullptr) rdma().destroyQp(raw->id);
    if (raw->cq != nullptr) rdma().destroyCq(raw->cq);
    raw->id = nullptr;  // the caller destroys the id once the event is acknowledged
    endpoints.erase(ev->id);
    return;
  }
  raw->state = RdmaEndpoint::State::kConnecting;
  parked[h.src * kNumLanes + h.lane] = raw;
  MIXCCL_INFO(log::kNet, "rdma: rank %d accepted lane %u from %s", ctx.rank, h.lane,
              describe(static_cast<int>(h.src)).c_str());
}

void RdmaHub::onEvent(rdma_cm_event* ev) {
  auto it = endpoints.find(ev->id);
  if (it == endpoints.end()) return;  // a lane this rank already closed
  RdmaEndpoint* ep = it->second.get();
  auto failWith = [&](const std::string& why) {
    if (ep->state == RdmaEndpoint::State::kFailed) return;
    ep->state = RdmaEndpoint::State::kFailed;
    ep->error = why;
  };
  const std::string what = std::string(rdma().eventStr(ev->event)) + " (status " + std::to_string(ev->status) + ")";
  switch (ev->event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (rdma().resolveRoute(ep->id, kResolveTimeoutMs) != 0) {
        failWith(std::string("rdma_resolve_route failed: ") + strerror(errno));
      } else {
        ep->state = RdmaEndpoint::State::kResolvingRoute;
      }
      break;
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
      if (setUpSender(ep) != Result::kSuccess) failWith(lastError());
      break;
    case RDMA_CM_EVENT_ESTABLISHED:
      if (ep->sender) {
        const char* why = nullptr;
        RdmaAccept a;
        if (!decodeRdmaAccept(ev->param.conn.private_data, ev->param.conn.private_data_len, &a, &why)) {
          failWith(why);
          break;
        }
        if (a.depth != static_cast<uint32_t>(ctx.fifoDepth) ||
            a.stride != kRdmaSlotHeaderBytes + static_cast<uint32_t>(ctx.slotBytes)) {
          failWith("the receiver's slots differ (depth " + std::to_string(a.depth) + ", stride " +
                   std::to_string(a.stride) + "): MIXCCL_FIFO_DEPTH and MIXCCL_CHUNK_SIZE must match on every rank");
          break;
        }
        ep->remote = a;
      }
      ep->state = RdmaEndpoint::State::kUp;
      MIXCCL_INFO(log::kNet, "rdma: rank %d lane %d %s %s is up", ctx.rank, ep->lane, ep->sender ? "to" : "from",
                  describe(ep->peer).c_str());
      break;
    case RDMA_CM_EVENT_DISCONNECTED:
      ep->closedByPeer = true;
      failWith("the peer closed the lane (its process exited, aborted or lost the link)");
      break;
    case RDMA_CM_EVENT_REJECTED:
      // InfiniBand CM reject reasons (RoCE uses the same CM): 28 is a consumer's rdma_reject, i.e. a
      // listener that refused the private data; anything else (8: no such service) means nobody
      // listens at that address any more.
      failWith(ev->status == kCmRejectConsumer
                   ? "the peer rejected the connection (" + what + "): different job, secret or mixccl version?"
                   : "nobody listens at the peer's address (" + what + "): its process exited or aborted");
      break;
    default:  // ADDR_ERROR, ROUTE_ERROR, CONNECT_ERROR, UNREACHABLE, DEVICE_REMOVAL, ...
      failWith("connection manager reported " + what);
      break;
  }
}

Result RdmaHub::poll() {
  ++polls;
  if (channel == nullptr) return Result::kSuccess;
  for (int i = 0; i < kEventsPerPoll; ++i) {
    // An event may register memory (milliseconds per lane, far more on a loaded or emulated host):
    // an abort must not wait for a burst of them.
    if (ctx.abortFlag != nullptr && ctx.abortFlag->load(std::memory_order_acquire)) break;
    rdma_cm_event* ev = nullptr;
    if (rdma().getCmEvent(channel, &ev) != 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
      return fail(Result::kSystemError, "rdma: rank %d: rdma_get_cm_event failed: %s", ctx.rank, strerror(errno));
    }
    rdma_cm_id* reject = nullptr;
    if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
      rdma_cm_id* id = ev->id;
      onConnectRequest(ev);
      if (endpoints.find(id) == endpoints.end()) reject = id;
    } else {
      onEvent(ev);
    }
    rdma().ackCmEvent(ev);
    if (reject != nullptr) rdma().destroyId(reject);
  }
  return Result::kSuccess;
}

namespace {

class RdmaTransport final : public Transport {
 public:
  explicit RdmaTransport(const TransportContext& ctx) : hub_(std::make_shared<RdmaHub>()) {
    hub_->ctx = ctx;
    hub_->regs = std::make_unique<RdmaRegCache>(
        static_cast<size_t>(std::max<int64_t>(0, config::getInt(config::Knob::kIbRegCache))));
    hub_->zeroCopyMin = static_cast<size_t>(std::max<int64_t>(1, config::getInt(config::Knob::kIbZcopyMin)));
  }

  const char* name() const override { return "rdma"; }

  Result listen(std::vector<uint8_t>* blob) override {
    blob->clear();
    NetChoice net;
    MIXCCL_TRY(netChoice(&net));
    if (!net.wantIb) {
      MIXCCL_INFO(log::kNet | log::kInit, "NET/IB : disabled (NCCL_IB_DISABLE=1 or NCCL_NET=Socket)");
      return Result::kSuccess;
    }
    std::string why;
    Result r = openRdmaDevices(hub_.get(), blob, &why);
    if (r != Result::kSuccess) return r;
    if (!blob->empty()) return Result::kSuccess;
    if (net.forceIb) {  // kInvalidUsage, as NCCL's init when the network NCCL_NET names has no device
      return fail(Result::kInvalidUsage,
                  "NCCL_NET=IB but rank %d has no usable RDMA device: %s; unset NCCL_NET to reach this host over "
                  "TCP, or check NCCL_IB_HCA",
                  hub_->ctx.rank, why.c_str());
    }
    MIXCCL_INFO(log::kNet | log::kInit, "NET/IB : %s; using TCP between hosts", why.c_str());
    return Result::kSuccess;
  }

  Result setPeers(const std::vector<TransportPeer>& peers) override {
    RdmaHub& hub = *hub_;
    if (static_cast<int>(peers.size()) != hub.ctx.nranks) {
      return fail(Result::kInternalError, "rdma: setPeers got %zu peers for %d ranks", peers.size(), hub.ctx.nranks);
    }
    hub.peers = peers;
    hub.addrs.assign(peers.size(), {});
    for (size_t r = 0; r < peers.size(); ++r) {
      const std::vector<uint8_t>& b = peers[r].blob;
      if (b.size() % kRdmaBlobEntryBytes != 0 || b.size() > kRdmaMaxRails * kRdmaBlobEntryBytes) {
        return fail(Result::kInternalError,
                    "rdma: rank %zu (host %s) published a %zu-byte address list; this build reads up to %zu "
                    "entries of %zu bytes (do all ranks run the same mixccl build?)",
                    r, peers[r].host.c_str(), b.size(), static_cast<size_t>(kRdmaMaxRails), kRdmaBlobEntryBytes);
      }
      for (size_t off = 0; off < b.size(); off += kRdmaBlobEntryBytes) {  // none: no RDMA device there
        sockaddr_in a{};
        a.sin_family = AF_INET;
        memcpy(&a.sin_addr, b.data() + off, 4);
        memcpy(&a.sin_port, b.data() + off + 4, 2);
        hub.addrs[r].push_back(a);
      }
    }
    hub.parked.assign(peers.size() * kNumLanes, nullptr);
    return Result::kSuccess;
  }

  // Above TCP (1), below shared memory (10).
  int canConnect(int peer) const override {
    const RdmaHub& hub = *hub_;
    if (hub.devices.empty() || peer < 0 || peer >= static_cast<int>(hub.addrs.size())) return 0;
    return hub.addrs[peer].empty() ? 0 : 5;
  }

  Result connectSend(int peer, int lane, std::unique_ptr<SendConnection>* out) override {
    MIXCCL_TRY(checkArgs(peer, lane));
    RdmaEndpoint* ep = nullptr;
    MIXCCL_TRY(hub_->startConnect(peer, lane, &ep));
    *out = std::make_unique<RdmaSendConnection>(hub_, ep);
    return Result::kSuccess;
  }

  Result connectRecv(int peer, int lane, std::unique_ptr<RecvConnection>* out) override {
    MIXCCL_TRY(checkArgs(peer, lane));
    *out = std::make_unique<RdmaRecvConnection>(hub_, peer, lane);
    return Result::kSuccess;
  }

  // Completion events are drained where they matter: before arming (armWait) and before a
  // completion queue is destroyed (close).
  Result progress() override { return hub_->poll(); }
  void armWait(std::vector<int>* fds) override { hub_->armWait(fds); }
  void dropRegions(const std::vector<uint64_t>& ids) override { hub_->regs->drop(ids); }

 private:
  Result checkArgs(int peer, int lane) const {
    if (canConnect(peer) == 0 || lane < 0 || lane >= kNumLanes) {
      return fail(Result::kInternalError, "rdma: connect to rank %d lane %d: no RDMA path", peer, lane);
    }
    if (hub_->ctx.fifoDepth <= 0 || hub_->ctx.slotBytes == 0) {
      return fail(Result::kInvalidUsage,
                  "rdma: fifo depth %d / slot size %zu must be positive (MIXCCL_FIFO_DEPTH, MIXCCL_CHUNK_SIZE)",
                  hub_->ctx.fifoDepth, hub_->ctx.slotBytes);
    }
    return Result::kSuccess;
  }

  std::shared_ptr<RdmaHub> hub_;
};

}  // namespace

std::unique_ptr<Transport> makeRdmaTransport(const TransportContext& ctx) {
  return std::make_unique<RdmaTransport>(ctx);
}

}  // namespace mixccl
