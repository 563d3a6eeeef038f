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
#include <string>

#include "src/common/result.h"

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
// the first non-loopback interface that is up, else loopback. Port is 0.
Result findListenAddress(SocketAddress* out, std::string* ifname);

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
  // Connects, retrying refused connections until the deadline (the peer may not listen yet).
  static Result connect(const SocketAddress& addr, Deadline deadline, const std::atomic<bool>* abortFlag, Socket* out);

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
