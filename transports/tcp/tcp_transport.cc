// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// TCP transport: one TCP connection per one-way lane, sender connects to the receiver's
// listener. This file holds the listener side (accept + hello validation) and the Transport;
// tcp_connection.cc holds the data path.
//
// An incoming connection must prove membership before it is trusted: its hello has to carry this
// communicator's hash and secret, name this rank as destination, and name a valid (src, lane) not
// already connected. Anything else (a port scanner, a stale job, garbage) is closed and logged at
// WARN; it never fails the job. Handshake reads are bounded to the 48 hello bytes and a pending
// socket that does not complete its hello within kHelloTimeout is dropped.

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "common/log.h"
#include "common/wire.h"
#include "transports/lane_claim.h"
#include "transports/net_choice.h"
#include "transports/tcp/tcp_internal.h"

namespace mixccl {
namespace {

constexpr auto kHelloTimeout = std::chrono::seconds(30);
// Pending handshakes beyond this close the oldest one, so a connection flood cannot exhaust
// descriptors.
constexpr size_t kMaxPending = 256;
// How long an aborting rank spends telling peers about lanes it never opened (~TcpTransport).
constexpr std::chrono::milliseconds kNoticeBudget{200};
// With no receiver waiting for its socket, the listener is polled only every this many calls:
// the engine calls progress() in a busy loop and an idle accept() is a wasted system call.
constexpr uint64_t kIdleAcceptPeriod = 64;
// Socket buffers are left to the kernel on purpose: setting SO_SNDBUF/SO_RCVBUF turns off TCP's
// buffer autotuning (which may grow a receive buffer to net.ipv4.tcp_rmem's maximum on a long
// fat network), and on loopback 1 MiB, 4 MiB or 16 MiB buffers measured no better than the
// defaults (2.3-3.6 GB/s either way, docs/PROTOCOL.md).

}  // namespace

void encodeHello(const TcpHello& h, uint8_t out[kTcpHelloBytes]) {
  WireWriter w(out, kTcpHelloBytes);
  w.u32(kTcpHelloMagic);
  w.u32(kTcpVersion);
  w.u64(h.commHash);
  w.bytes(h.secret, sizeof(h.secret), sizeof(h.secret));
  w.u32(h.src);
  w.u32(h.dst);
  w.u32(h.lane);
  w.u32(0);  // flags, reserved
}

bool decodeHello(const uint8_t in[kTcpHelloBytes], TcpHello* out, const char** why) {
  WireReader r(in, kTcpHelloBytes);
  if (r.u32() != kTcpHelloMagic) {
    *why = "bad magic (not a mixccl TCP lane)";
    return false;
  }
  if (r.u32() != kTcpVersion) {
    *why = "unsupported protocol version (mixed mixccl versions?)";
    return false;
  }
  out->commHash = r.u64();
  memcpy(out->secret, r.here(), sizeof(out->secret));
  r.skip(sizeof(out->secret));
  out->src = r.u32();
  out->dst = r.u32();
  out->lane = r.u32();
  return true;
}

const char* checkHello(const TcpHello& h, const TransportContext& ctx) {
  return checkLaneClaim(h.commHash, h.secret, h.src, h.dst, h.lane, ctx);
}

std::string TcpHub::describe(int rank) const {
  std::string s = "rank " + std::to_string(rank);
  if (rank >= 0 && rank < static_cast<int>(peers.size())) {
    s += " (host " + peers[rank].host + ", " +
         (rank < static_cast<int>(addrs.size()) ? addrs[rank].toString() : std::string("?")) + ")";
  }
  return s;
}

Result TcpHub::poll() {
  ++polls;
  if (!listener.valid()) return Result::kSuccess;
  if (waiting > 0 || !pending.empty() || polls % kIdleAcceptPeriod == 0) {
    // Bounded: a burst of connections is drained over several calls, never in one long loop.
    for (int i = 0; i < 16; ++i) {
      Pending p;
      Result r = listener.accept(&p.sock, &p.from);
      if (r == Result::kInProgress) break;
      MIXCCL_TRY(r);
      p.since = std::chrono::steady_clock::now();
      if (pending.size() >= kMaxPending) {
        // Full: the oldest handshake goes, not the newcomer. A real peer sends its hello right
        // after connecting, so the oldest is the likeliest idle stranger; refusing newcomers let
        // strangers that connect and stay silent lock real lanes out (port_noise_tcp failed so).
        auto oldest = std::min_element(pending.begin(), pending.end(),
                                       [](const Pending& a, const Pending& b) { return a.since < b.since; });
        MIXCCL_WARN("tcp: rank %d has %zu handshakes pending; closing the oldest (from %s, %zu of %zu bytes)", ctx.rank,
                    pending.size(), oldest->from.toString().c_str(), oldest->got, kTcpHelloBytes);
        *oldest = std::move(p);  // the old socket closes here
        continue;
      }
      pending.push_back(std::move(p));
    }
  }
  for (size_t i = 0; i < pending.size();) {
    Pending& p = pending[i];
    ssize_t n = ::recv(p.sock.fd(), p.hello + p.got, kTcpHelloBytes - p.got, MSG_DONTWAIT);
    bool drop = false;
    if (n > 0) {
      p.got += static_cast<size_t>(n);
    } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      MIXCCL_WARN("tcp: rank %d drops a connection from %s: closed during the handshake after %zu of %zu bytes",
                  ctx.rank, p.from.toString().c_str(), p.got, kTcpHelloBytes);
      drop = true;
    } else if (std::chrono::steady_clock::now() - p.since > kHelloTimeout) {
      MIXCCL_WARN("tcp: rank %d drops a connection from %s: no complete hello within %lld s", ctx.rank,
                  p.from.toString().c_str(), static_cast<long long>(kHelloTimeout.count()));
      drop = true;
    }
    if (!drop && p.got == kTcpHelloBytes) {
      finishHandshake(&p);
      drop = true;  // handed over or rejected; either way it leaves the pending list
    }
    if (drop) {
      pending[i] = std::move(pending.back());
      pending.pop_back();
    } else {
      ++i;
    }
  }
  return Result::kSuccess;
}

void TcpHub::finishHandshake(Pending* p) {
  TcpHello h;
  const char* why = nullptr;
  const std::string from = p->from.toString();
  if (!decodeHello(p->hello, &h, &why)) {
    // fallthrough to the warning below
  } else if ((why = checkHello(h, ctx)) != nullptr) {
    // fallthrough to the warning below
  } else {
    size_t idx = h.src * kNumLanes + h.lane;
    if (parked[idx].valid() || (receivers[idx] != nullptr && receivers[idx]->attached())) {
      why = "duplicate connection for this (source rank, lane)";
    } else {
      MIXCCL_INFO(log::kNet, "tcp: rank %d accepted lane %u from %s", ctx.rank, h.lane,
                  describe(static_cast<int>(h.src)).c_str());
      if (receivers[idx] != nullptr) {
        receivers[idx]->attach(std::move(p->sock));
        --waiting;
      } else {
        parked[idx] = std::move(p->sock);
      }
      return;
    }
  }
  MIXCCL_WARN("tcp: rank %d rejected a connection from %s: %s; ignoring it (the job continues)", ctx.rank, from.c_str(),
              why);
}

namespace {

class TcpTransport final : public Transport {
 public:
  explicit TcpTransport(const TransportContext& ctx) : hub_(std::make_shared<TcpHub>()) { hub_->ctx = ctx; }

  // On abort, every lane this rank never opened gets a hello and an immediate close: a peer that
  // waits to receive from this rank then sees the lane close (ncclRemoteError) instead of
  // waiting for its deadline for a sender that will never connect. Bounded by kNoticeBudget.
  ~TcpTransport() override {
    const TcpHub& hub = *hub_;
    if (hub.ctx.abortFlag == nullptr || !hub.ctx.abortFlag->load(std::memory_order_acquire)) return;
    std::vector<std::unique_ptr<TcpSendConnection>> notices;
    for (size_t idx = 0; idx < hub.sendersMade.size(); ++idx) {
      const int peer = static_cast<int>(idx / kNumLanes);
      if (peer != hub.ctx.rank && !hub.sendersMade[idx]) {
        notices.push_back(std::make_unique<TcpSendConnection>(hub_, peer, static_cast<int>(idx % kNumLanes)));
      }
    }
    // Advice, like the notices' purpose: a peer that left already refuses the connection, which is
    // no news. Quiet, so that ncclCommAbort does not replace the thread's last error (why the
    // caller aborts, read with ncclGetLastError afterwards) with "connecting lane ... failed".
    QuietFailures quiet;
    const auto until = std::chrono::steady_clock::now() + kNoticeBudget;
    for (bool done = false; !done && std::chrono::steady_clock::now() < until;) {
      done = true;
      for (auto& n : notices) done = n->lingerStep() && done;
      if (!done) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    for (auto& n : notices) n->abandon();
  }

  const char* name() const override { return "tcp"; }

  Result listen(std::vector<uint8_t>* blob) override {
    NetChoice net;
    MIXCCL_TRY(netChoice(&net));  // a build without RDMA still refuses a wrong NCCL_NET
    forceIb_ = net.forceIb;
    SocketAddress addr;
    std::string ifname;
    MIXCCL_TRY(findListenAddress(&addr, &ifname));
    MIXCCL_TRY(Socket::listen(&addr, &hub_->listener));
    uint8_t wire[SocketAddress::kWireBytes];
    addr.encode(wire);
    blob->assign(wire, wire + sizeof(wire));
    MIXCCL_INFO(log::kNet | log::kInit, "tcp: rank %d listens on %s (%s)", hub_->ctx.rank, addr.toString().c_str(),
                ifname.c_str());
    return Result::kSuccess;
  }

  Result setPeers(const std::vector<TransportPeer>& peers) override {
    TcpHub& hub = *hub_;
    if (static_cast<int>(peers.size()) != hub.ctx.nranks) {
      return fail(Result::kInternalError, "tcp: setPeers got %zu peers for %d ranks", peers.size(), hub.ctx.nranks);
    }
    hub.peers = peers;
    hub.addrs.assign(peers.size(), SocketAddress{});
    for (size_t r = 0; r < peers.size(); ++r) {
      // No address: a build without TCP (PROTOCOL.md 6.1), which still joins; canConnect() rules
      // TCP out with it.
      if (peers[r].blob.empty()) continue;
      if (peers[r].blob.size() != SocketAddress::kWireBytes) {
        return fail(Result::kInternalError, "tcp: rank %zu (host %s) published a %zu-byte address, expected %zu", r,
                    peers[r].host.c_str(), peers[r].blob.size(), SocketAddress::kWireBytes);
      }
      MIXCCL_TRY(SocketAddress::decode(peers[r].blob.data(), &hub.addrs[r]));
    }
    hub.parked.resize(peers.size() * kNumLanes);
    hub.receivers.assign(peers.size() * kNumLanes, nullptr);
    hub.sendersMade.assign(peers.size() * kNumLanes, 0);
    return Result::kSuccess;
  }

  int canConnect(int peer) const override {
    if (forceIb_) return 0;
    return peer >= 0 && peer < static_cast<int>(hub_->peers.size()) && !hub_->peers[peer].blob.empty() ? 1 : 0;
  }

  Result connectSend(int peer, int lane, std::unique_ptr<SendConnection>* out) override {
    MIXCCL_TRY(checkArgs(peer, lane));
    *out = std::make_unique<TcpSendConnection>(hub_, peer, lane);
    return Result::kSuccess;
  }

  Result connectRecv(int peer, int lane, std::unique_ptr<RecvConnection>* out) override {
    MIXCCL_TRY(checkArgs(peer, lane));
    if (hub_->receivers[peer * kNumLanes + lane] != nullptr) {
      return fail(Result::kInternalError, "tcp: a receiver for lane %d from rank %d exists already", lane, peer);
    }
    *out = std::make_unique<TcpRecvConnection>(hub_, peer, lane);
    return Result::kSuccess;
  }

  Result progress() override { return hub_->poll(); }

 private:
  Result checkArgs(int peer, int lane) const {
    if (peer < 0 || peer >= static_cast<int>(hub_->peers.size()) || lane < 0 || lane >= kNumLanes) {
      return fail(Result::kInternalError, "tcp: connect to rank %d lane %d out of range (%zu peers known)", peer, lane,
                  hub_->peers.size());
    }
    if (hub_->ctx.fifoDepth <= 0 || hub_->ctx.slotBytes == 0) {
      return fail(Result::kInvalidUsage,
                  "tcp: fifo depth %d / slot size %zu must be positive (MIXCCL_FIFO_DEPTH, MIXCCL_CHUNK_SIZE)",
                  hub_->ctx.fifoDepth, hub_->ctx.slotBytes);
    }
    return Result::kSuccess;
  }

  std::shared_ptr<TcpHub> hub_;
  bool forceIb_ = false;  // NCCL_NET=IB leaves the network to RDMA: pairs it cannot reach fail init by name
};

}  // namespace

std::unique_ptr<Transport> makeTcpTransport(const TransportContext& ctx) { return std::make_unique<TcpTransport>(ctx); }

}  // namespace mixccl
