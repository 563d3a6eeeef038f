// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// The data path of a TCP lane. Both ends keep fifoDepth slots of slotBytes in ordinary memory:
//
// Sender: acquire() hands out a staging slot (even before the connection is up, so the engine can
// start producing at once); commit() queues it as a frame (u64 length, u64 stamp, payload); every call then
// pushes as much of the queue as the kernel takes with ONE sendmsg() gathering the hello, frame
// headers and payloads. A slot is free again once its frame was fully written to the kernel.
// Invariant: sent_ <= head_ <= sent_ + depth_; frame i lives in slot i % depth_.
//
// Receiver: frames are read straight into the receive slots, ahead of the engine while slots are
// free. Each recvmsg() gathers the rest of the current payload plus the next frame header, so a
// steady stream costs about one system call per frame, and an idle poll costs exactly one.
// Invariant: read_ <= filled_ <= read_ + depth_; message i lives in slot i % depth_; the frame
// being received (if its header was parsed) goes into slot filled_ % depth_, which is free.
// Wire lengths are never trusted: a frame longer than slotBytes fails the lane.

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/log.h"
#include "transports/tcp/tcp_internal.h"

namespace mixccl {
namespace {

// iovec entries per sendmsg: the hello plus (header, payload) for each queued frame, capped.
constexpr size_t kMaxIov = 64;

// A stalled sender reports its peer unreachable once peerSilent() held on this many consecutive
// checks (PeerWatch::kCheckInterval apart, so about one second): a zero-window probe's answer that
// is on its way back at one check has arrived by the next.
constexpr int kSilentChecks = 10;
// Pause between connection attempts while the peer's host is unreachable.
constexpr std::chrono::milliseconds kConnectRetry{100};

// How long a departing sender keeps pushing (see ~TcpSendConnection): short against the 1 s an
// abort may take, long enough for a loopback or LAN connect.
constexpr std::chrono::milliseconds kLinger{50};

void putU64(uint8_t* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint64_t getU64(const uint8_t* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(in[i]) << (8 * i);
  return v;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Sender

TcpSendConnection::TcpSendConnection(std::shared_ptr<TcpHub> hub, int peer, int lane)
    : hub_(std::move(hub)),
      peer_(peer),
      lane_(lane),
      depth_(static_cast<uint32_t>(hub_->ctx.fifoDepth)),
      slotBytes_(hub_->ctx.slotBytes),
      staging_(std::make_unique_for_overwrite<uint8_t[]>(static_cast<size_t>(depth_) * slotBytes_)),
      headers_(static_cast<size_t>(depth_) * kTcpFrameHeaderBytes),
      sizes_(depth_) {
  TcpHello h;
  h.commHash = hub_->ctx.commHash;
  memcpy(h.secret, hub_->ctx.secret, sizeof(h.secret));
  h.src = static_cast<uint32_t>(hub_->ctx.rank);
  h.dst = static_cast<uint32_t>(peer_);
  h.lane = static_cast<uint32_t>(lane_);
  encodeHello(h, hello_);
}

TcpSendConnection::~TcpSendConnection() {
  if (!sock_.valid()) return;  // never started connecting: nobody can be waiting on its frames
  const auto until = std::chrono::steady_clock::now() + kLinger;
  while (!lingerStep() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

bool TcpSendConnection::lingerStep() {
  if (error_ != Result::kSuccess || push() != Result::kSuccess) return true;
  return helloSent_ == kTcpHelloBytes && sent_ == head_;
}

Result TcpSendConnection::lost(int err) {
  if (isUnreachableError(err)) {
    (void)setError(fail(Result::kRemoteError, "tcp: %s, lane %d, while sending; the link or that host failed",
                        unreachableText(hub_->describe(peer_), err).c_str(), lane_));
  } else {
    (void)setError(fail(Result::kRemoteError,
                        "tcp: lane %d to %s lost while sending: %s (the peer process exited or the network failed)",
                        lane_, hub_->describe(peer_).c_str(), strerror(err)));
  }
  return error_;
}

// The kernel took nothing: fine while the peer acknowledges (it may just be busy elsewhere and
// not reading), a dead link once it stays silent (tcp_internal.h, stall_).
Result TcpSendConnection::stalled() {
  if (!stall_.due()) return Result::kSuccess;
  silentChecks_ = peerSilent(sock_.fd()) ? silentChecks_ + 1 : 0;
  return silentChecks_ >= kSilentChecks ? lost(ETIMEDOUT) : Result::kSuccess;
}

Result TcpSendConnection::advanceConnect() {
  const auto now = std::chrono::steady_clock::now();
  if (connectSince_ == std::chrono::steady_clock::time_point{}) connectSince_ = now;
  int err = 0;
  if (!sock_.valid()) {
    if (now < retryAt_) return Result::kInProgress;
    // From here on this lane is this connection's to close; before, an aborting transport still
    // owes the peer a notice (~TcpTransport), e.g. for a lane made for a step never reached.
    hub_->sendersMade[static_cast<size_t>(peer_) * kNumLanes + lane_] = 1;
    err = Socket::startConnectErrno(hub_->addrs[peer_], &sock_);
  }
  if (err == 0) err = sock_.finishConnectErrno();
  if (err == -1) return Result::kInProgress;
  if (err != 0) {
    sock_.close();
    const int limit = netTimeoutSeconds();
    // ETIMEDOUT: the SYNs went unanswered for MIXCCL_NET_TIMEOUT already (TCP_USER_TIMEOUT).
    if (isUnreachableError(err) && err != ETIMEDOUT && now - connectSince_ < std::chrono::seconds(limit)) {
      retryAt_ = now + kConnectRetry;  // a flapping link: no route or no neighbour answer right now
      return Result::kInProgress;
    }
    if (isUnreachableError(err) && limit > 0) {
      (void)setError(fail(Result::kRemoteError, "tcp: cannot connect lane %d: %s", lane_,
                          unreachableText(hub_->describe(peer_), err).c_str()));
    } else if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
      (void)setError(fail(Result::kSystemError, "tcp: no socket for lane %d to %s: %s", lane_,
                          hub_->describe(peer_).c_str(), strerror(err)));
    } else {
      (void)setError(fail(Result::kRemoteError,
                          "tcp: connecting lane %d to %s failed: %s; is that rank alive and its address reachable from "
                          "here (NCCL_SOCKET_IFNAME)?",
                          lane_, hub_->describe(peer_).c_str(), strerror(err)));
    }
    return error_;
  }
  connected_ = true;
  MIXCCL_INFO(log::kNet, "tcp: lane %d to %s connected", lane_, hub_->describe(peer_).c_str());
  return Result::kSuccess;
}

Result TcpSendConnection::push() {
  if (!connected_) {
    Result r = advanceConnect();
    if (r == Result::kInProgress) return Result::kSuccess;  // nothing can move yet; not an error
    MIXCCL_TRY(r);
  }
  if (helloSent_ == kTcpHelloBytes && sent_ == head_) return Result::kSuccess;
  iovec iov[kMaxIov];
  size_t n = 0;
  if (helloSent_ < kTcpHelloBytes) {
    iov[n++] = {hello_ + helloSent_, kTcpHelloBytes - helloSent_};
  }
  size_t skip = sentBytes_;  // bytes of frame sent_ already written
  for (uint64_t i = sent_; i < head_ && n + 2 <= kMaxIov; ++i) {
    uint32_t s = static_cast<uint32_t>(i % depth_);
    uint8_t* hdr = headers_.data() + s * kTcpFrameHeaderBytes;
    uint8_t* payload = staging_.get() + static_cast<size_t>(s) * slotBytes_;
    if (skip < kTcpFrameHeaderBytes) iov[n++] = {hdr + skip, kTcpFrameHeaderBytes - skip};
    size_t pskip = skip > kTcpFrameHeaderBytes ? skip - kTcpFrameHeaderBytes : 0;
    if (sizes_[s] > pskip) iov[n++] = {payload + pskip, sizes_[s] - pskip};
    skip = 0;
  }
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = n;
  ssize_t got = ::sendmsg(sock_.fd(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (got < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return stalled();
    if (errno == EINTR) return Result::kSuccess;
    return lost(errno);
  }
  stall_.progressed();
  silentChecks_ = 0;
  // Account what the kernel took: first the hello, then whole frames, then a partial one.
  size_t left = static_cast<size_t>(got);
  size_t h = std::min(left, kTcpHelloBytes - helloSent_);
  helloSent_ += h;
  left -= h;
  while (left > 0 && sent_ < head_) {
    size_t frame = kTcpFrameHeaderBytes + sizes_[sent_ % depth_];
    size_t take = std::min(left, frame - sentBytes_);
    sentBytes_ += take;
    left -= take;
    if (sentBytes_ == frame) {
      ++sent_;
      sentBytes_ = 0;
    }
  }
  return Result::kSuccess;
}

// A failed lane reports its first failure again, with its message, on every later call: the
// engine may first meet it inside a quiet scope (a probe's flush) that does not keep messages.
Result TcpSendConnection::setError(Result code) {
  error_ = code;
  errorText_ = lastFailure();
  return code;
}

Result TcpSendConnection::sticky() const { return fail(error_, "%s", errorText_.c_str()); }

Result TcpSendConnection::acquire(void** slot) {
  if (error_ != Result::kSuccess) return sticky();
  const uint64_t next = head_ + acquired_;
  if (next - sent_ >= depth_) {
    MIXCCL_TRY(push());
    if (next - sent_ >= depth_) return Result::kInProgress;
  }
  *slot = staging_.get() + static_cast<size_t>(next % depth_) * slotBytes_;
  ++acquired_;
  return Result::kSuccess;
}

Result TcpSendConnection::commit(size_t bytes, uint64_t stamp) {
  if (error_ != Result::kSuccess) return sticky();
  if (acquired_ == 0 || bytes > slotBytes_) {
    return fail(Result::kInternalError, "tcp: commit of %zu bytes to %s without a slot (or > %zu slot bytes)", bytes,
                hub_->describe(peer_).c_str(), slotBytes_);
  }
  --acquired_;
  uint32_t s = static_cast<uint32_t>(head_ % depth_);
  sizes_[s] = bytes;
  putU64(headers_.data() + s * kTcpFrameHeaderBytes, bytes);
  putU64(headers_.data() + s * kTcpFrameHeaderBytes + 8, stamp);
  ++head_;
  // Start moving at once: the kernel overlaps the transfer with the engine's next step.
  return push();
}

Result TcpSendConnection::flush() {
  if (error_ != Result::kSuccess) return sticky();
  if (sent_ == head_) return Result::kSuccess;  // nothing queued (the hello can wait for data)
  MIXCCL_TRY(push());
  return sent_ == head_ ? Result::kSuccess : Result::kInProgress;
}

// ---------------------------------------------------------------------------------------------
// Receiver

TcpRecvConnection::TcpRecvConnection(std::shared_ptr<TcpHub> hub, int peer, int lane)
    : hub_(std::move(hub)),
      peer_(peer),
      lane_(lane),
      depth_(static_cast<uint32_t>(hub_->ctx.fifoDepth)),
      slotBytes_(hub_->ctx.slotBytes),
      slots_(std::make_unique_for_overwrite<uint8_t[]>(static_cast<size_t>(depth_) * slotBytes_)),
      sizes_(depth_),
      stamps_(depth_),
      watch_(hub_->sameHost(peer) ? hub_->peers[peer].pid : 0) {
  size_t idx = static_cast<size_t>(peer_) * kNumLanes + lane_;
  hub_->receivers[idx] = this;
  if (hub_->parked[idx].valid()) {
    attach(std::move(hub_->parked[idx]));
  } else {
    ++hub_->waiting;
  }
}

TcpRecvConnection::~TcpRecvConnection() {
  size_t idx = static_cast<size_t>(peer_) * kNumLanes + lane_;
  hub_->receivers[idx] = nullptr;
  if (!sock_.valid()) --hub_->waiting;
}

void TcpRecvConnection::attach(Socket sock) { sock_ = std::move(sock); }

Result TcpRecvConnection::failed(Result code) {
  error_ = code;
  errorText_ = lastFailure();
  return code;
}

// Closes every frame that is complete (while a slot is free for it) and parses the next header
// once it is whole. Runs before and after each read: a zero-length frame completes without one.
Result TcpRecvConnection::settle() {
  for (;;) {
    if (haveFrame_ && frameGot_ == frameLen_ && filled_ - read_ < depth_) {
      sizes_[filled_ % depth_] = frameLen_;
      stamps_[filled_ % depth_] = frameStamp_;
      ++filled_;
      haveFrame_ = false;
      continue;
    }
    if (!haveFrame_ && headerGot_ == kTcpFrameHeaderBytes) {
      frameLen_ = getU64(header_);
      frameStamp_ = getU64(header_ + 8);
      if (frameLen_ > slotBytes_) {
        return failed(fail(Result::kRemoteError,
                           "tcp: %s sent a %llu-byte message on lane %d, larger than the %zu-byte slot; ranks "
                           "disagree on MIXCCL_CHUNK_SIZE or the stream is corrupt",
                           hub_->describe(peer_).c_str(), static_cast<unsigned long long>(frameLen_), lane_,
                           slotBytes_));
      }
      frameGot_ = 0;
      headerGot_ = 0;
      haveFrame_ = true;
      continue;
    }
    return Result::kSuccess;
  }
}

Result TcpRecvConnection::pump() {
  if (error_ != Result::kSuccess) return Result::kSuccess;  // reported once the ring drains
  for (uint32_t round = 0; round <= depth_; ++round) {
    MIXCCL_TRY(settle());
    bool slotFree = filled_ - read_ < depth_;
    iovec iov[2];
    size_t n = 0;
    if (haveFrame_) {
      // Payload of message filled_ goes straight into its slot; the next header rides along.
      if (!slotFree) return Result::kSuccess;
      uint8_t* slot = slots_.get() + static_cast<size_t>(filled_ % depth_) * slotBytes_;
      if (frameLen_ > frameGot_) iov[n++] = {slot + frameGot_, frameLen_ - frameGot_};
      iov[n++] = {header_, kTcpFrameHeaderBytes};
    } else {
      iov[n++] = {header_ + headerGot_, kTcpFrameHeaderBytes - headerGot_};
    }
    size_t want = 0;
    for (size_t i = 0; i < n; ++i) want += iov[i].iov_len;
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n;
    ssize_t got = ::recvmsg(sock_.fd(), &msg, MSG_DONTWAIT);
    if (got < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return Result::kSuccess;
      if (isUnreachableError(errno)) {
        return failed(fail(Result::kRemoteError, "tcp: %s, lane %d, while receiving; the link or that host failed",
                           unreachableText(hub_->describe(peer_), errno).c_str(), lane_));
      }
      return failed(fail(Result::kRemoteError, "tcp: lane %d from %s lost: %s (the peer exited or the network failed)",
                         lane_, hub_->describe(peer_).c_str(), strerror(errno)));
    }
    if (got == 0) {
      return failed(fail(Result::kRemoteError,
                         "tcp: %s closed lane %d (%s); the peer process probably exited, check its log",
                         hub_->describe(peer_).c_str(), lane_,
                         haveFrame_ || headerGot_ > 0 ? "in the middle of a message" : "between messages"));
    }
    watch_.progressed();
    size_t left = static_cast<size_t>(got);
    if (haveFrame_) {
      size_t take = std::min<uint64_t>(left, frameLen_ - frameGot_);
      frameGot_ += take;
      left -= take;
      headerGot_ += left;  // only reached once the payload is complete (iovec order)
    } else {
      headerGot_ += left;
    }
    MIXCCL_TRY(settle());
    if (static_cast<size_t>(got) < want) return Result::kSuccess;  // the socket is drained
  }
  return Result::kSuccess;
}

Result TcpRecvConnection::peekAt(size_t ahead, const void** data, size_t* bytes, uint64_t* stamp) {
  if (!sock_.valid()) {
    MIXCCL_TRY(hub_->poll());
    if (!sock_.valid()) {
      if (!watch_.idle()) {
        return fail(Result::kRemoteError, "tcp: %s (pid %d) died before connecting lane %d to this rank",
                    hub_->describe(peer_).c_str(), watch_.pid(), lane_);
      }
      return Result::kInProgress;
    }
  }
  // Read ahead once per consumed message, and whenever nothing is ready: this keeps the kernel
  // buffer drained without a system call on every repeated peek of a ready message.
  const uint64_t want = read_ + ahead;
  if (filled_ <= want || !pumpedSinceRelease_) {
    pumpedSinceRelease_ = true;
    // A failure is recorded in error_ and reported below only once the complete messages that
    // arrived before it have been consumed (an EOF right after the last frame loses nothing).
    if (pump() != Result::kSuccess && error_ == Result::kSuccess) (void)failed(Result::kInternalError);
  }
  if (filled_ <= want) {
    if (error_ != Result::kSuccess && filled_ == read_) return fail(error_, "%s", errorText_.c_str());
    return Result::kInProgress;
  }
  uint32_t s = static_cast<uint32_t>(want % depth_);
  *data = slots_.get() + static_cast<size_t>(s) * slotBytes_;
  *bytes = sizes_[s];
  *stamp = stamps_[s];
  return Result::kSuccess;
}

Result TcpRecvConnection::release() {
  if (filled_ == read_) {
    return fail(Result::kInternalError, "tcp: release on lane %d from %s with no message peeked", lane_,
                hub_->describe(peer_).c_str());
  }
  ++read_;
  pumpedSinceRelease_ = false;
  return Result::kSuccess;
}

}  // namespace mixccl
