// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Socket helpers shared by the bootstrap and the TCP transport: address parsing and encoding,
// interface selection (NCCL_SOCKET_IFNAME, NCCL_SOCKET_FAMILY), and an RAII non-blocking socket.
// Blocking helpers take a deadline and an abort flag and never wait past either.

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/result.h"

namespace mixccl {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// The deadline MIXCCL_TIMEOUT seconds from now.
Deadline defaultDeadline();

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;

  int family() const { return storage.ss_family; }
  uint16_t port() const;
  void setPort(uint16_t port);
  // IPv6 scope id (the interface index a link-local address is reached through); 0 otherwise.
  // The 20-byte wire encoding below does not carry it.
  uint32_t scopeId() const;
  void setScopeId(uint32_t scope);
  std::string toString() const;  // "1.2.3.4:5678" or "[::1]:5678"

  // Fixed 20-byte wire encoding (PROTOCOL.md): u16 family (4 or 6), u16 port, 16 address bytes,
  // all in network byte order; IPv4 uses the first 4 address bytes.
  static constexpr size_t kWireBytes = 20;
  void encode(uint8_t out[kWireBytes]) const;
  static Result decode(const uint8_t in[kWireBytes], SocketAddress* out);
};

// "host:port", "[v6addr]:port" or "v4addr:port"; host names are resolved.
Result parseHostPort(const std::string& text, SocketAddress* out);

// The address this process should listen on: the first matching interface of NCCL_SOCKET_IFNAME
// (prefix list, "^" excludes, "=" exact) and NCCL_SOCKET_FAMILY (AF_INET/AF_INET6); by default
// NCCL's order of preference (chooseInterface). Port is 0.
Result findListenAddress(SocketAddress* out, std::string* ifname);

// One address of one interface, as getifaddrs() lists it.
struct InterfaceAddress {
  std::string name;
  unsigned flags = 0;  // IFF_*
  SocketAddress addr;
  SocketAddress netmask;  // family AF_UNSPEC when unknown
};

// The choice findListenAddress() makes among `ifs` (in getifaddrs() order) for an
// NCCL_SOCKET_IFNAME spec and a family (AF_UNSPEC, AF_INET, AF_INET6): an index into `ifs`, or -1
// when none qualifies. Only interfaces that are up and running (carrier present) qualify, as in
// NCCL: an unplugged port often keeps its static address, and listening there reaches nobody.
// Without a spec the choice follows NCCL's classes in order: "ib*", the subnet of `root` (the
// NCCL_COMM_ID address, or nullptr), all but docker/lo/virbr, docker, loopback, virbr.
int chooseInterface(const std::vector<InterfaceAddress>& ifs, const std::string& spec, int family,
                    const SocketAddress* root = nullptr);

// Liveness of TCP connections (MIXCCL_NET_TIMEOUT; docs/DEBUGGING.md, "Network faults").
//
// Every socket that accept() or startConnect() makes gets TCP keepalive probes tuned so that a
// peer that answers nothing for MIXCCL_NET_TIMEOUT seconds fails the socket (ETIMEDOUT, or the
// no-route error that caused the silence); a healthy peer's kernel answers probes even while its
// process is busy elsewhere, so a slow rank is never taken for a dead one. While a connection is
// being set up, TCP_USER_TIMEOUT bounds the SYN retransmissions the same way.
//
// TCP_USER_TIMEOUT is deliberately cleared once a connection is up: Linux applies it also to data
// that waits because the receiver's window is closed, so a healthy rank that is late to a
// collective by more than the timeout (a checkpoint, a slow data loader) would have its peers'
// connections torn down. Keepalive does not probe while data is unacknowledged either, so a sender
// that cannot move data asks peerSilent() (rate-limited) instead.

// MIXCCL_NET_TIMEOUT in seconds; 0 when these checks are off (kernel defaults: minutes).
int netTimeoutSeconds();

// True for the errors a socket reports when its peer stopped answering (keepalive or SYN timeout,
// no route, host or network down): the link or the host failed, not necessarily the process.
bool isUnreachableError(int err);

// "<who> unreachable for 20 s (MIXCCL_NET_TIMEOUT): Connection timed out", for messages.
std::string unreachableText(const std::string& who, int err);

// One getsockopt(TCP_INFO): true when the peer of this established socket has acknowledged nothing
// for MIXCCL_NET_TIMEOUT seconds although data or a zero-window probe waits for its answer. For a
// sender that cannot move data; call it rate-limited, never on every poll, and act only when it
// stays true for a while (a probe may be on its way back the moment it is asked).
bool peerSilent(int fd);

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket();
  Socket(Socket&& other) noexcept;
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close();

  // Binds to `addr` (port 0 = any) and listens; `addr` receives the bound port.
  static Result listen(SocketAddress* addr, Socket* out);
  // Non-blocking accept: kInProgress when no connection is pending. Other failures (EMFILE ...)
  // are recorded with fail(), unless `errnoOut` is given: then kSystemError comes back unlogged
  // with the errno there, for a caller that retries and must rate-limit its own message.
  Result accept(Socket* out, SocketAddress* peer = nullptr, int* errnoOut = nullptr);
  // Starts a non-blocking connect; finishConnect() reports kInProgress until it is up.
  static Result startConnect(const SocketAddress& addr, Socket* out);
  Result finishConnect();
  // The same, returning errno (0 = started / connected, -1 = still in progress) and logging nothing,
  // for callers that retry some failures.
  static int startConnectErrno(const SocketAddress& addr, Socket* out);
  int finishConnectErrno();
  // Connects, retrying refused connections until the deadline (the peer may not listen yet).
  // `whileWaiting`, when set, runs at least every 100 ms of the wait: a caller that also listens
  // serves its own listener there, since peers may be connecting to it while it connects to them
  // (a ring of ranks each waiting for the next would otherwise wait on full accept queues).
  // `refusedLimit`, when nonzero: refusals that go on that long fail at once (kRemoteError), for
  // an address that was listening before the caller learnt it, where a refusal means the
  // listener is gone rather than not there yet.
  static Result connect(const SocketAddress& addr, Deadline deadline, const std::atomic<bool>* abortFlag, Socket* out,
                        const std::function<void()>& whileWaiting = {},
                        std::chrono::milliseconds refusedLimit = std::chrono::milliseconds(0));

  // Non-blocking partial I/O: moves as much of [data, data + bytes) as the kernel takes now and
  // adds what moved to *done (so a caller resuming a transfer passes base + *done, total - *done).
  // Moving nothing is kSuccess with *done unchanged. kRemoteError on EOF/reset, naming `who`.
  Result sendSome(const void* data, size_t bytes, size_t* done, const char* who);
  Result recvSome(void* data, size_t bytes, size_t* done, const char* who);
  // Moves all bytes or fails at the deadline / on abort. `who` names the peer in messages.
  Result sendAll(const void* data, size_t bytes, Deadline deadline, const std::atomic<bool>* abortFlag,
                 const char* who);
  Result recvAll(void* data, size_t bytes, Deadline deadline, const std::atomic<bool>* abortFlag, const char* who);

 private:
  int fd_ = -1;
};

}  // namespace mixccl
