// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "common/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <thread>
#include <vector>

#include "common/config.h"
#include "common/log.h"
#include "common/name_filter.h"

namespace mixccl {
namespace {

// Longest single sleep inside a blocking helper: the abort flag is looked at least this often.
constexpr int kPollSliceMs = 100;

bool aborted(const std::atomic<bool>* abortFlag) {
  return abortFlag != nullptr && abortFlag->load(std::memory_order_acquire);
}

double secondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Milliseconds to wait in one poll(): never past the deadline, never longer than one slice.
int sliceMs(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return static_cast<int>(std::min<int64_t>(left, kPollSliceMs));
}

void setNoDelay(int fd) {
  int one = 1;
  // Best effort: bootstrap messages are small and latency-bound; a failure only costs speed.
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Keepalive on every connected socket and, while it connects, a bound on SYN retransmissions
// (socket.h explains why established connections carry no TCP_USER_TIMEOUT). Best effort like
// TCP_NODELAY: a failure only costs the early notice of a dead link.
void setLiveness(int fd, bool connecting) {
  const int t = netTimeoutSeconds();
  if (t <= 0) return;
  // Probes every t/4 s after t - 3 * (t/4) s of silence; the third unanswered one fails the
  // socket t s after the peer was last heard (20 s: probes at 5, 10, 15 s, fails at 20 s).
  const int cnt = 3;
  const int intvl = std::max(1, t / 4);
  const int idle = std::max(1, t - cnt * intvl);
  int one = 1;
  (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
  if (connecting) {
    unsigned ms = static_cast<unsigned>(t) * 1000u;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof(ms));
  }
}

void clearConnectTimeout(int fd) {
  if (netTimeoutSeconds() <= 0) return;
  unsigned zero = 0;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &zero, sizeof(zero));
}

bool isLinkLocalV6(const sockaddr* sa) {
  const auto* a6 = reinterpret_cast<const sockaddr_in6*>(sa);
  return IN6_IS_ADDR_LINKLOCAL(&a6->sin6_addr);
}

void copyAddress(const sockaddr* sa, SocketAddress* out) {
  *out = SocketAddress{};
  out->length = sa->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  memcpy(&out->storage, sa, out->length);
}

}  // namespace

Deadline defaultDeadline() {
  int64_t seconds = config::getInt(config::Knob::kTimeout);
  // A zero or negative timeout would make every wait fail at once; treat it as "one second".
  if (seconds < 1) seconds = 1;
  return Clock::now() + std::chrono::seconds(seconds);
}

int netTimeoutSeconds() {
  int64_t t = config::getInt(config::Knob::kNetTimeout);
  return static_cast<int>(std::clamp<int64_t>(t, 0, 86400));
}

bool isUnreachableError(int err) {
  return err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH || err == EHOSTDOWN || err == ENETDOWN;
}

std::string unreachableText(const std::string& who, int err) {
  char text[512];
  snprintf(text, sizeof(text), "%s unreachable for %d s (MIXCCL_NET_TIMEOUT): %s", who.c_str(), netTimeoutSeconds(),
           strerror(err));
  return text;
}

bool peerSilent(int fd) {
  const int t = netTimeoutSeconds();
  if (t <= 0) return false;
  tcp_info info{};
  socklen_t len = sizeof(info);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return false;
  // A socket the kernel already gave up on reports its error on the next send.
  if (info.tcpi_state != TCP_ESTABLISHED) return false;
  // Any ACK, a window probe's answer included, refreshes last_ack_recv: a live receiver that
  // reads nothing (closed window) answers, a dead link does not.
  return info.tcpi_last_ack_recv >= static_cast<uint32_t>(t) * 1000u && (info.tcpi_unacked > 0 || info.tcpi_probes > 0);
}

uint16_t SocketAddress::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return 0;
}

void SocketAddress::setPort(uint16_t port) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(port);
}

uint32_t SocketAddress::scopeId() const {
  if (family() == AF_INET6) return reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_scope_id;
  return 0;
}

void SocketAddress::setScopeId(uint32_t scope) {
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage)->sin6_scope_id = scope;
}

std::string SocketAddress::toString() const {
  char host[INET6_ADDRSTRLEN] = {};
  char text[INET6_ADDRSTRLEN + 16];
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, host, sizeof(host));
    snprintf(text, sizeof(text), "%s:%u", host, port());
    return text;
  }
  if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, host, sizeof(host));
    snprintf(text, sizeof(text), "[%s]:%u", host, port());
    return text;
  }
  return "<no address>";
}

void SocketAddress::encode(uint8_t out[kWireBytes]) const {
  memset(out, 0, kWireBytes);
  uint16_t fam = family() == AF_INET ? 4 : family() == AF_INET6 ? 6 : 0;
  uint16_t p = port();
  out[0] = static_cast<uint8_t>(fam >> 8);
  out[1] = static_cast<uint8_t>(fam);
  out[2] = static_cast<uint8_t>(p >> 8);
  out[3] = static_cast<uint8_t>(p);
  if (family() == AF_INET) memcpy(out + 4, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, 4);
  if (family() == AF_INET6) memcpy(out + 4, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, 16);
}

Result SocketAddress::decode(const uint8_t in[kWireBytes], SocketAddress* out) {
  uint16_t fam = static_cast<uint16_t>(in[0] << 8 | in[1]);
  uint16_t p = static_cast<uint16_t>(in[2] << 8 | in[3]);
  *out = SocketAddress{};
  if (fam == 4) {
    auto* a = reinterpret_cast<sockaddr_in*>(&out->storage);
    a->sin_family = AF_INET;
    a->sin_port = htons(p);
    memcpy(&a->sin_addr, in + 4, 4);
    out->length = sizeof(sockaddr_in);
    return Result::kSuccess;
  }
  if (fam == 6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&out->storage);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(p);
    memcpy(&a->sin6_addr, in + 4, 16);
    out->length = sizeof(sockaddr_in6);
    return Result::kSuccess;
  }
  return fail(Result::kInvalidArgument,
              "socket address on the wire has family code %u (expected 4 or 6): the peer runs an incompatible "
              "mixccl build or the data is corrupt",
              fam);
}

Result parseHostPort(const std::string& text, SocketAddress* out) {
  std::string host;
  std::string portText;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return fail(Result::kInvalidArgument, "cannot parse '%s': expected [ipv6-address]:port", text.c_str());
    }
    host = text.substr(1, close - 1);
    portText = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos) {
      return fail(Result::kInvalidArgument, "cannot parse '%s': expected host:port (e.g. 10.0.0.1:29500)",
                  text.c_str());
    }
    host = text.substr(0, colon);
    portText = text.substr(colon + 1);
  }
  char* end = nullptr;
  long port = portText.empty() ? -1 : strtol(portText.c_str(), &end, 10);
  if (host.empty() || port < 0 || port > 65535 || (end != nullptr && *end != '\0')) {
    return fail(Result::kInvalidArgument, "cannot parse '%s': expected host:port with a port in 0..65535",
                text.c_str());
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    return fail(Result::kInvalidArgument, "cannot resolve host '%s' of '%s': %s; check the name or use an IP address",
                host.c_str(), text.c_str(), gai_strerror(rc));
  }
  // NCCL_SOCKET_FAMILY chooses among the results but rejects none: like NCCL, a root given as an
  // IPv4 literal stays reachable when the ranks' own listeners are forced to IPv6 (and the other
  // way round). Otherwise prefer IPv4: it works without a scope id and through more networks.
  const std::string& family = config::getString(config::Knob::kSocketFamily);
  const int want = family == "AF_INET6" ? AF_INET6 : AF_INET;
  const addrinfo* pick = res;
  for (const addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family == want) {
      pick = ai;
      break;
    }
  }
  if (pick->ai_family != AF_INET && pick->ai_family != AF_INET6) {
    freeaddrinfo(res);
    return fail(Result::kInvalidArgument, "host '%s' resolved to neither an IPv4 nor an IPv6 address", host.c_str());
  }
  copyAddress(pick->ai_addr, out);
  freeaddrinfo(res);
  out->setPort(static_cast<uint16_t>(port));
  return Result::kSuccess;
}

Result findListenAddress(SocketAddress* out, std::string* ifname) {
  const std::string& spec = config::getString(config::Knob::kSocketIfname);
  const std::string& familyText = config::getString(config::Knob::kSocketFamily);
  int wantFamily = AF_UNSPEC;
  if (familyText == "AF_INET") {
    wantFamily = AF_INET;
  } else if (familyText == "AF_INET6") {
    wantFamily = AF_INET6;
  } else if (!familyText.empty()) {
    return fail(Result::kInvalidArgument, "NCCL_SOCKET_FAMILY=%s is not AF_INET or AF_INET6", familyText.c_str());
  }
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    return fail(Result::kSystemError, "getifaddrs failed: %s; cannot pick a network interface", strerror(errno));
  }
  std::vector<InterfaceAddress> ifs;
  for (const ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr) continue;
    const int fam = ifa->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    InterfaceAddress i;
    i.name = ifa->ifa_name;
    i.flags = ifa->ifa_flags;
    copyAddress(ifa->ifa_addr, &i.addr);
    if (ifa->ifa_netmask != nullptr && ifa->ifa_netmask->sa_family == fam) copyAddress(ifa->ifa_netmask, &i.netmask);
    ifs.push_back(std::move(i));
  }
  freeifaddrs(list);
  // The bootstrap root's address, when NCCL_COMM_ID names it, hints at the network to use. One
  // that does not parse hints nothing: the bootstrap reports it when it connects. Quietly: this
  // call succeeds all the same (ncclCommInitAll and splits ignore NCCL_COMM_ID, and a rank given
  // the id's bytes never parses the variable), so a WARN and a last error saying "cannot resolve
  // host" would blame a failure that did not happen.
  SocketAddress root;
  const std::string& commId = config::getString(config::Knob::kCommId);
  bool haveRoot = false;
  if (!commId.empty()) {
    QuietFailures quiet;
    haveRoot = parseHostPort(commId, &root) == Result::kSuccess;
  }
  const int best = chooseInterface(ifs, spec, wantFamily, haveRoot ? &root : nullptr);
  if (best < 0) {
    // Invalid usage, as NCCL's ncclGetUniqueId and ncclCommInitRank return when no interface
    // qualifies ("Bootstrap : no socket interface found"): the configuration needs fixing.
    return fail(Result::kInvalidUsage,
                "no usable network interface matches NCCL_SOCKET_IFNAME='%s' NCCL_SOCKET_FAMILY='%s'; list "
                "interfaces with 'ip addr' and set NCCL_SOCKET_IFNAME to one that is up, has a link (no "
                "NO-CARRIER) and has an address",
                spec.c_str(), familyText.c_str());
  }
  *out = ifs[best].addr;
  out->setPort(0);
  if (ifname != nullptr) *ifname = ifs[best].name;
  MIXCCL_INFO(log::kBootstrap, "using interface %s address %s", ifs[best].name.c_str(), out->toString().c_str());
  return Result::kSuccess;
}

namespace {

// Whether `addr` lies in the subnet of interface `i` (its address and netmask).
bool sameSubnet(const InterfaceAddress& i, const SocketAddress& addr) {
  if (i.addr.family() != addr.family() || i.netmask.family() != addr.family()) return false;
  const uint8_t* a = nullptr;
  const uint8_t* b = nullptr;
  const uint8_t* m = nullptr;
  size_t n = 0;
  if (addr.family() == AF_INET) {
    a = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in*>(&i.addr.storage)->sin_addr);
    b = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in*>(&addr.storage)->sin_addr);
    m = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in*>(&i.netmask.storage)->sin_addr);
    n = 4;
  } else if (addr.family() == AF_INET6) {
    a = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in6*>(&i.addr.storage)->sin6_addr);
    b = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in6*>(&addr.storage)->sin6_addr);
    m = reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in6*>(&i.netmask.storage)->sin6_addr);
    n = 16;
  } else {
    return false;
  }
  for (size_t k = 0; k < n; ++k) {
    if ((a[k] & m[k]) != (b[k] & m[k])) return false;
  }
  return true;
}

bool hasPrefix(const std::string& name, const char* prefix) { return name.rfind(prefix, 0) == 0; }

}  // namespace

int chooseInterface(const std::vector<InterfaceAddress>& ifs, const std::string& spec, int family,
                    const SocketAddress* root) {
  const NameFilter filter = NameFilter::parse(spec, /*withPorts=*/false);
  // Without NCCL_SOCKET_IFNAME, NCCL's order of preference (ncclFindInterfaces): IPoIB first (a
  // cluster's fast fabric), then the interface on the bootstrap root's subnet (NCCL_COMM_ID: the
  // one the job's ranks surely reach each other on), then anything but loopback and the bridges
  // container runtimes and VMs create (up, but reaching no other host), then those: docker,
  // loopback, virbr. The first class with a usable interface decides, so the ranks of a job on
  // alike hosts land on the same network.
  const NameFilter others = NameFilter::parse("^docker,lo,virbr", /*withPorts=*/false);
  const std::vector<std::function<bool(const InterfaceAddress&)>> defaults = {
      [](const InterfaceAddress& i) { return (i.flags & IFF_LOOPBACK) == 0 && hasPrefix(i.name, "ib"); },
      [&](const InterfaceAddress& i) {
        return root != nullptr && (i.flags & IFF_LOOPBACK) == 0 && sameSubnet(i, *root);
      },
      [&](const InterfaceAddress& i) { return (i.flags & IFF_LOOPBACK) == 0 && others.accepts(i.name.c_str()); },
      [](const InterfaceAddress& i) { return (i.flags & IFF_LOOPBACK) == 0 && hasPrefix(i.name, "docker"); },
      [](const InterfaceAddress& i) { return (i.flags & IFF_LOOPBACK) != 0 || hasPrefix(i.name, "lo"); },
      [](const InterfaceAddress& i) { return hasPrefix(i.name, "virbr"); },
  };
  const std::vector<std::function<bool(const InterfaceAddress&)>> chosen = {
      [&](const InterfaceAddress& i) { return filter.accepts(i.name.c_str()); }};
  // Within a class IPv4 wins over IPv6 unless NCCL_SOCKET_FAMILY says otherwise.
  for (const auto& accepts : filter.useDefault ? defaults : chosen) {
    int best = -1;
    for (size_t k = 0; k < ifs.size(); ++k) {
      const InterfaceAddress& i = ifs[k];
      if ((i.flags & IFF_UP) == 0 || (i.flags & IFF_RUNNING) == 0) continue;
      const int fam = i.addr.family();
      if (fam != AF_INET && fam != AF_INET6) continue;
      if (family != AF_UNSPEC && fam != family) continue;
      // Link-local IPv6 needs a scope id, which the 20-byte wire address does not carry.
      if (fam == AF_INET6 && isLinkLocalV6(reinterpret_cast<const sockaddr*>(&i.addr.storage))) continue;
      if (!accepts(i)) continue;
      if (best < 0 || (ifs[best].addr.family() == AF_INET6 && fam == AF_INET)) best = static_cast<int>(k);
      if (fam == AF_INET) break;
    }
    if (best >= 0) return best;
  }
  return -1;
}

Socket::~Socket() { close(); }

Socket::Socket(Socket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Result Socket::listen(SocketAddress* addr, Socket* out) {
  int fd = ::socket(addr->family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return fail(Result::kSystemError, "socket() for listening on %s failed: %s", addr->toString().c_str(),
                strerror(errno));
  }
  Socket s(fd);
  int one = 1;
  // Lets a fixed NCCL_COMM_ID port be reused right after the previous job's sockets closed.
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr->storage), addr->length) != 0) {
    return fail(Result::kSystemError,
                "bind to %s failed: %s; pick another port (NCCL_COMM_ID) or interface (NCCL_SOCKET_IFNAME)",
                addr->toString().c_str(), strerror(errno));
  }
  if (::listen(fd, SOMAXCONN) != 0) {
    return fail(Result::kSystemError, "listen on %s failed: %s", addr->toString().c_str(), strerror(errno));
  }
  SocketAddress bound;
  bound.length = sizeof(bound.storage);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound.storage), &bound.length) != 0) {
    return fail(Result::kSystemError, "getsockname on %s failed: %s", addr->toString().c_str(), strerror(errno));
  }
  *addr = bound;
  *out = std::move(s);
  return Result::kSuccess;
}

Result Socket::accept(Socket* out, SocketAddress* peer, int* errnoOut) {
  SocketAddress from;
  from.length = sizeof(from.storage);
  for (;;) {
    int fd = accept4(fd_, reinterpret_cast<sockaddr*>(&from.storage), &from.length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      setNoDelay(fd);
      setLiveness(fd, false);
      *out = Socket(fd);
      if (peer != nullptr) *peer = from;
      return Result::kSuccess;
    }
    if (errno == EINTR) continue;
    // A connection that was reset before we accepted it is simply gone; nothing to report.
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED || errno == EPROTO) {
      return Result::kInProgress;
    }
    if (errnoOut != nullptr) {
      *errnoOut = errno;
      return Result::kSystemError;
    }
    return fail(Result::kSystemError, "accept failed: %s (too many open files? raise 'ulimit -n')", strerror(errno));
  }
}

namespace {

// errno-returning cores of startConnect/finishConnect: Socket::connect retries refused attempts
// quietly and must not log a warning for each one.
int startConnectRaw(const SocketAddress& addr, Socket* out) {
  int fd = ::socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  Socket s(fd);
  setNoDelay(fd);
  setLiveness(fd, true);
  int rc;
  do {
    rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr.storage), addr.length);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0 && errno != EINPROGRESS) return errno;
  *out = std::move(s);
  return 0;
}

// 0 when connected, -1 while in progress, else the errno of the failed connection.
int finishConnectRaw(int fd, int timeoutMs) {
  pollfd p{fd, POLLOUT, 0};
  int rc = poll(&p, 1, timeoutMs);
  if (rc < 0) return errno == EINTR ? -1 : errno;
  if (rc == 0) return -1;
  int err = 0;
  socklen_t len = sizeof(err);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err == 0) clearConnectTimeout(fd);
  return err;
}

}  // namespace

Result Socket::startConnect(const SocketAddress& addr, Socket* out) {
  int err = startConnectRaw(addr, out);
  if (err == 0) return Result::kSuccess;
  if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
    return fail(Result::kSystemError, "socket() for connecting to %s failed: %s", addr.toString().c_str(),
                strerror(err));
  }
  return fail(Result::kRemoteError, "connect to %s failed: %s", addr.toString().c_str(), strerror(err));
}

Result Socket::finishConnect() {
  int err = finishConnectRaw(fd_, 0);
  if (err == -1) return Result::kInProgress;
  if (err != 0) return fail(Result::kRemoteError, "connection failed: %s", strerror(err));
  return Result::kSuccess;
}

int Socket::startConnectErrno(const SocketAddress& addr, Socket* out) { return startConnectRaw(addr, out); }

int Socket::finishConnectErrno() { return finishConnectRaw(fd_, 0); }

Result Socket::connect(const SocketAddress& addr, Deadline deadline, const std::atomic<bool>* abortFlag, Socket* out,
                       const std::function<void()>& whileWaiting, std::chrono::milliseconds refusedLimit) {
  const auto start = Clock::now();
  auto backoff = std::chrono::milliseconds(10);
  int lastErr = 0;
  Clock::time_point refusedSince{};  // the first refusal of the current run of them
  for (;;) {
    if (aborted(abortFlag)) {
      return fail(Result::kRemoteError, "aborted while connecting to %s", addr.toString().c_str());
    }
    if (Clock::now() >= deadline) break;
    Socket s;
    int err = startConnectRaw(addr, &s);
    while (err == 0) {
      err = finishConnectRaw(s.fd(), sliceMs(deadline));
      if (err == 0) {
        *out = std::move(s);
        return Result::kSuccess;
      }
      if (err == -1 && (aborted(abortFlag) || Clock::now() >= deadline)) break;
      if (err == -1) {
        err = 0;
        if (whileWaiting) whileWaiting();
      }
    }
    if (err == -1) continue;  // the loop top reports the abort or the deadline
    lastErr = err;
    // Resource exhaustion and unusable addresses will not fix themselves. Anything else (refused
    // because the peer does not listen yet, a full SYN backlog, a network hiccup) may: retry.
    if (err == EMFILE || err == ENFILE || err == EADDRNOTAVAIL || err == EAFNOSUPPORT || err == EINVAL) {
      return fail(err == EMFILE || err == ENFILE ? Result::kSystemError : Result::kRemoteError,
                  "connect to %s failed: %s", addr.toString().c_str(), strerror(err));
    }
    if (err != ECONNREFUSED) {
      refusedSince = {};
    } else if (refusedSince == Clock::time_point{}) {
      refusedSince = Clock::now();
    } else if (refusedLimit.count() > 0 && Clock::now() - refusedSince >= refusedLimit) {
      return fail(Result::kRemoteError,
                  "connect to %s refused for %.1f s: nothing listens there any more (the process exited or closed "
                  "its socket)",
                  addr.toString().c_str(), secondsSince(refusedSince));
    }
    if (whileWaiting) whileWaiting();
    std::this_thread::sleep_until(std::min(Clock::now() + backoff, deadline));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(kPollSliceMs));
  }
  return fail(Result::kRemoteError,
              "timed out after %.1f s connecting to %s (last error: %s); is the peer running and reachable? "
              "MIXCCL_TIMEOUT sets the limit",
              secondsSince(start), addr.toString().c_str(), lastErr != 0 ? strerror(lastErr) : "none");
}

Result Socket::sendSome(const void* data, size_t bytes, size_t* done, const char* who) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  size_t sent = 0;
  while (sent < bytes) {
    ssize_t n = ::send(fd_, p + sent, bytes - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    *done += sent;
    if (n < 0 && isUnreachableError(errno)) {
      return fail(Result::kRemoteError, "%s while sending", unreachableText(who, errno).c_str());
    }
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
      return fail(Result::kRemoteError, "connection to %s lost while sending: %s", who, strerror(errno));
    }
    return fail(Result::kSystemError, "send to %s failed: %s", who, n < 0 ? strerror(errno) : "sent nothing");
  }
  *done += sent;
  return Result::kSuccess;
}

Result Socket::recvSome(void* data, size_t bytes, size_t* done, const char* who) {
  uint8_t* p = static_cast<uint8_t*>(data);
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = ::recv(fd_, p + got, bytes - got, MSG_DONTWAIT);
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    *done += got;
    if (n == 0) return fail(Result::kRemoteError, "%s closed the connection (the process exited or aborted)", who);
    if (isUnreachableError(errno)) {
      return fail(Result::kRemoteError, "%s while receiving", unreachableText(who, errno).c_str());
    }
    if (errno == ECONNRESET || errno == EPIPE) {
      return fail(Result::kRemoteError, "connection to %s lost while receiving: %s", who, strerror(errno));
    }
    return fail(Result::kSystemError, "recv from %s failed: %s", who, strerror(errno));
  }
  *done += got;
  return Result::kSuccess;
}

namespace {

template <typename Step>
Result moveAll(Socket* s, size_t bytes, Deadline deadline, const std::atomic<bool>* abortFlag, const char* who,
               const char* verb, short events, Step step) {
  const auto start = Clock::now();
  size_t done = 0;
  while (done < bytes) {
    MIXCCL_TRY(step(&done));
    if (done == bytes) break;
    if (aborted(abortFlag)) {
      return fail(Result::kRemoteError, "aborted while %s %s (%zu of %zu bytes done)", verb, who, done, bytes);
    }
    if (Clock::now() >= deadline) {
      return fail(Result::kRemoteError,
                  "timed out after %.1f s %s %s (%zu of %zu bytes done); the peer is stuck, dead or unreachable "
                  "(MIXCCL_TIMEOUT sets the limit)",
                  secondsSince(start), verb, who, done, bytes);
    }
    pollfd p{s->fd(), events, 0};
    if (poll(&p, 1, sliceMs(deadline)) < 0 && errno != EINTR) {
      return fail(Result::kSystemError, "poll failed while %s %s: %s", verb, who, strerror(errno));
    }
  }
  return Result::kSuccess;
}

}  // namespace

Result Socket::sendAll(const void* data, size_t bytes, Deadline deadline, const std::atomic<bool>* abortFlag,
                       const char* who) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  return moveAll(this, bytes, deadline, abortFlag, who, "sending to", POLLOUT,
                 [&](size_t* done) { return sendSome(p + *done, bytes - *done, done, who); });
}

Result Socket::recvAll(void* data, size_t bytes, Deadline deadline, const std::atomic<bool>* abortFlag,
                       const char* who) {
  uint8_t* p = static_cast<uint8_t*>(data);
  return moveAll(this, bytes, deadline, abortFlag, who, "receiving from", POLLIN,
                 [&](size_t* done) { return recvSome(p + *done, bytes - *done, done, who); });
}

}  // namespace mixccl
