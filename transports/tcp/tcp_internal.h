// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Internals of the TCP transport, shared by tcp_transport.cc (listener, handshake) and
// tcp_connection.cc (the two ends of a lane). Wire format: docs/PROTOCOL.md, "Transports".
//
// Ownership: the Transport and every RecvConnection it made hold a shared_ptr to one TcpHub, so
// connections and transport may be destroyed in any order. A RecvConnection registers itself in
// the hub under (src, lane) for its lifetime; a validated incoming socket is handed to the
// registered connection, or parked in the hub until connectRecv() creates it. Single-threaded
// (transport.h): no locks.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/socket.h"
#include "transports/peer_watch.h"
#include "transports/transport.h"

namespace mixccl {

// Hello, the first bytes of every lane's TCP connection (sender -> receiver), little-endian:
//   u32 magic, u32 version, u64 commHash, u8 secret[16], u32 src, u32 dst, u32 lane, u32 flags (0).
constexpr uint32_t kTcpHelloMagic = 0x5443584du;  // bytes "MXCT"
constexpr uint32_t kTcpVersion = 2;               // 2: frames carry a stamp
constexpr size_t kTcpHelloBytes = 48;
// Every message after the hello: u64 payload length, u64 stamp (opaque to the transport), then
// the payload.
constexpr size_t kTcpFrameHeaderBytes = 16;

struct TcpHello {
  uint64_t commHash = 0;
  uint8_t secret[16] = {};
  uint32_t src = 0;
  uint32_t dst = 0;
  uint32_t lane = 0;
};
void encodeHello(const TcpHello& h, uint8_t out[kTcpHelloBytes]);
// False (with *why set) when the bytes are not a hello of this protocol version.
bool decodeHello(const uint8_t in[kTcpHelloBytes], TcpHello* out, const char** why);
// The receiver's acceptance check of a decoded hello, short of the duplicate-lane check (which
// needs the hub's state): nullptr when it may come from lane h.lane of rank h.src of this
// communicator, else why not. Pure, so the fuzz targets (tests/fuzz/) call it too.
const char* checkHello(const TcpHello& h, const TransportContext& ctx);

class TcpRecvConnection;

struct TcpHub {
  // An accepted socket whose hello has not fully arrived yet.
  struct Pending {
    Socket sock;
    SocketAddress from;
    uint8_t hello[kTcpHelloBytes] = {};
    size_t got = 0;
    std::chrono::steady_clock::time_point since;
  };

  TransportContext ctx;
  std::vector<TransportPeer> peers;
  std::vector<SocketAddress> addrs;  // decoded listen address of every rank
  Socket listener;
  std::vector<Pending> pending;
  std::vector<Socket> parked;                 // [src * kNumLanes + lane]: validated, no receiver yet
  std::vector<TcpRecvConnection*> receivers;  // [src * kNumLanes + lane]: live receivers
  std::vector<uint8_t> sendersMade;           // [dst * kNumLanes + lane]: a sender started connecting
  int waiting = 0;                            // registered receivers that still lack a socket
  uint64_t polls = 0;

  // Accepts incoming connections and advances their handshakes; never blocks. Rejected
  // connections are closed and logged; they never fail the caller.
  Result poll();

  // "rank 3 (host node7)", for messages.
  std::string describe(int rank) const;
  bool sameHost(int rank) const { return peers[rank].hostHash == peers[ctx.rank].hostHash; }

 private:
  void finishHandshake(Pending* p);
};

class TcpSendConnection final : public SendConnection {
 public:
  TcpSendConnection(std::shared_ptr<TcpHub> hub, int peer, int lane);
  // Lingers briefly (bounded) to get a started connection's hello and queued frames out, so
  // the peer sees this lane close instead of waiting for a sender that never connects.
  ~TcpSendConnection() override;

  // One non-blocking step of getting the hello and queued frames out; true when there is
  // nothing left to do (all sent, or the lane failed).
  bool lingerStep();
  // Closes at once on destruction (the caller already spent its linger budget).
  void abandon() { sock_ = Socket(); }

  Result acquire(void** slot) override;
  Result commit(size_t bytes, uint64_t stamp) override;
  Result flush() override;
  size_t slotBytes() const override { return slotBytes_; }

 private:
  Result advanceConnect();
  Result push();
  Result lost(int err);
  Result setError(Result code);
  Result sticky() const;
  Result stalled();

  std::shared_ptr<TcpHub> hub_;
  int peer_;
  int lane_;
  uint32_t depth_;
  size_t slotBytes_;
  std::unique_ptr<uint8_t[]> staging_;  // depth_ slots of slotBytes_
  std::vector<uint8_t> headers_;        // depth_ frame headers of kTcpFrameHeaderBytes
  std::vector<uint64_t> sizes_;

  Socket sock_;
  bool connected_ = false;
  uint32_t acquired_ = 0;  // slots handed out by acquire() and not committed yet, from head_ on
  // Connection set-up: unreachability errors are retried until MIXCCL_NET_TIMEOUT after the first
  // attempt, so a link flap during set-up does not fail the job.
  std::chrono::steady_clock::time_point connectSince_{};
  std::chrono::steady_clock::time_point retryAt_{};
  // A kernel send buffer that stays full: peerSilent() once per PeerWatch::kCheckInterval.
  PeerWatch stall_;
  int silentChecks_ = 0;
  uint8_t hello_[kTcpHelloBytes] = {};
  size_t helloSent_ = 0;
  uint64_t head_ = 0;                // messages committed
  uint64_t sent_ = 0;                // messages fully written to the kernel
  size_t sentBytes_ = 0;             // bytes of message `sent_` (header + payload) already written
  Result error_ = Result::kSuccess;  // sticky: the lane is unusable after a failure
  std::string errorText_;            // its message (setError)
};

class TcpRecvConnection final : public RecvConnection {
 public:
  TcpRecvConnection(std::shared_ptr<TcpHub> hub, int peer, int lane);
  ~TcpRecvConnection() override;

  Result peekAt(size_t ahead, const void** data, size_t* bytes, uint64_t* stamp) override;
  Result release() override;
  size_t messageDepth() const override { return depth_; }

  // Called by the hub with the validated socket of this lane.
  void attach(Socket sock);
  bool attached() const { return sock_.valid(); }

 private:
  Result pump();
  Result settle();
  Result failed(Result code);

  std::shared_ptr<TcpHub> hub_;
  int peer_;
  int lane_;
  uint32_t depth_;
  size_t slotBytes_;
  std::unique_ptr<uint8_t[]> slots_;
  std::vector<uint64_t> sizes_;
  std::vector<uint64_t> stamps_;
  // Same-host peers only: notices a sender that dies before it connects. Off for a peer in another
  // pid namespace (its TransportPeer::pid is 0: its pid means nothing here); a connected socket
  // shows its death as EOF or a reset anyway.
  PeerWatch watch_;

  Socket sock_;
  uint64_t read_ = 0;       // oldest message not yet released
  uint64_t filled_ = 0;     // messages completely received
  bool haveFrame_ = false;  // the header of message `filled_` has been parsed
  uint64_t frameLen_ = 0;
  uint64_t frameStamp_ = 0;
  uint64_t frameGot_ = 0;
  uint8_t header_[kTcpFrameHeaderBytes] = {};  // the next unparsed frame header
  size_t headerGot_ = 0;
  bool pumpedSinceRelease_ = false;
  Result error_ = Result::kSuccess;  // sticky, reported once the complete messages are consumed
  std::string errorText_;            // its message
};

}  // namespace mixccl
