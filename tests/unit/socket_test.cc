// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "common/socket.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <net/if.h>
#include <netinet/tcp.h>

#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "common/config.h"
#include "tests/support/env_guard.h"

namespace mixccl {
namespace {

using std::chrono::milliseconds;

SocketAddress loopback(uint16_t port = 0) {
  SocketAddress a;
  EXPECT_EQ(parseHostPort("127.0.0.1:" + std::to_string(port), &a), Result::kSuccess);
  return a;
}

// A connected pair over loopback: `client` connected to `server`.
void makePair(Socket* client, Socket* server) {
  SocketAddress addr = loopback();
  Socket listener;
  ASSERT_EQ(Socket::listen(&addr, &listener), Result::kSuccess);
  ASSERT_NE(addr.port(), 0);
  ASSERT_EQ(Socket::connect(addr, Clock::now() + std::chrono::seconds(5), nullptr, client), Result::kSuccess);
  Result r = Result::kInProgress;
  for (int i = 0; i < 500 && r == Result::kInProgress; ++i) {
    r = listener.accept(server);
    if (r == Result::kInProgress) std::this_thread::sleep_for(milliseconds(2));
  }
  ASSERT_EQ(r, Result::kSuccess);
}

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

using testing::EnvGuard;

TEST(SocketAddress, ParsesIpv4Ipv6AndNames) {
  SocketAddress a;
  ASSERT_EQ(parseHostPort("10.1.2.3:29500", &a), Result::kSuccess);
  EXPECT_EQ(a.family(), AF_INET);
  EXPECT_EQ(a.port(), 29500);
  EXPECT_EQ(a.toString(), "10.1.2.3:29500");

  ASSERT_EQ(parseHostPort("[::1]:80", &a), Result::kSuccess);
  EXPECT_EQ(a.family(), AF_INET6);
  EXPECT_EQ(a.port(), 80);
  EXPECT_EQ(a.toString(), "[::1]:80");

  ASSERT_EQ(parseHostPort("localhost:7", &a), Result::kSuccess);
  EXPECT_EQ(a.port(), 7);
  EXPECT_TRUE(a.family() == AF_INET || a.family() == AF_INET6);
}

// NCCL_SOCKET_FAMILY chooses the ranks' own interfaces; like NCCL, it does not make a root
// address of the other family (NCCL_COMM_ID) unparseable.
TEST(SocketAddress, SocketFamilyDoesNotRejectALiteralOfTheOtherFamily) {
  SocketAddress a;
  {
    EnvGuard g("NCCL_SOCKET_FAMILY", "AF_INET6");
    ASSERT_EQ(parseHostPort("10.1.2.3:29500", &a), Result::kSuccess);
    EXPECT_EQ(a.toString(), "10.1.2.3:29500");
  }
  {
    EnvGuard g("NCCL_SOCKET_FAMILY", "AF_INET");
    ASSERT_EQ(parseHostPort("[fd00::1]:29500", &a), Result::kSuccess);
    EXPECT_EQ(a.toString(), "[fd00::1]:29500");
  }
}

TEST(SocketAddress, RejectsMalformedText) {
  SocketAddress a;
  for (const char* bad : {"", "nohost", ":80", "1.2.3.4:", "1.2.3.4:65536", "1.2.3.4:-1", "1.2.3.4:12x", "[::1]80",
                          "[::1:80", "no-such-host.invalid:80"}) {
    EXPECT_NE(parseHostPort(bad, &a), Result::kSuccess) << bad;
  }
}

TEST(SocketAddress, WireRoundTrip) {
  for (const char* text : {"192.168.7.9:65535", "[fd00::1234:5]:1", "127.0.0.1:0"}) {
    SocketAddress a;
    ASSERT_EQ(parseHostPort(text, &a), Result::kSuccess);
    uint8_t wire[SocketAddress::kWireBytes];
    a.encode(wire);
    SocketAddress b;
    ASSERT_EQ(SocketAddress::decode(wire, &b), Result::kSuccess);
    EXPECT_EQ(b.toString(), a.toString());
    EXPECT_EQ(b.length, a.length);
  }
  // Byte layout is fixed by PROTOCOL.md: family, port (big-endian), address.
  SocketAddress a;
  ASSERT_EQ(parseHostPort("1.2.3.4:258", &a), Result::kSuccess);
  uint8_t wire[SocketAddress::kWireBytes];
  a.encode(wire);
  const uint8_t expect[8] = {0, 4, 1, 2, 1, 2, 3, 4};
  EXPECT_EQ(memcmp(wire, expect, sizeof(expect)), 0);
  for (size_t i = 8; i < sizeof(wire); ++i) EXPECT_EQ(wire[i], 0);
}

TEST(SocketAddress, DecodeRejectsUnknownFamily) {
  uint8_t wire[SocketAddress::kWireBytes] = {0, 5};
  SocketAddress b;
  EXPECT_EQ(SocketAddress::decode(wire, &b), Result::kInvalidArgument);
}

TEST(FindListenAddress, DefaultPicksAnAddress) {
  SocketAddress a;
  std::string ifname;
  ASSERT_EQ(findListenAddress(&a, &ifname), Result::kSuccess);
  EXPECT_FALSE(ifname.empty());
  EXPECT_EQ(a.port(), 0);
  // Whatever it picked must be usable for listening.
  Socket s;
  EXPECT_EQ(Socket::listen(&a, &s), Result::kSuccess);
}

TEST(FindListenAddress, HonoursIfnameAndFamily) {
  {
    EnvGuard g("NCCL_SOCKET_IFNAME", "=lo");
    SocketAddress a;
    std::string ifname;
    ASSERT_EQ(findListenAddress(&a, &ifname), Result::kSuccess);
    EXPECT_EQ(ifname, "lo");
  }
  {
    // NCCL answers an interface list that matches nothing with ncclInvalidUsage.
    EnvGuard g("NCCL_SOCKET_IFNAME", "=no-such-interface0");
    SocketAddress a;
    EXPECT_EQ(findListenAddress(&a, nullptr), Result::kInvalidUsage);
    EXPECT_NE(lastError().find("NCCL_SOCKET_IFNAME='=no-such-interface0'"), std::string::npos) << lastError();
  }
  {
    // Excluding everything a host could have leaves nothing.
    EnvGuard g("NCCL_SOCKET_IFNAME", "^a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,r,s,t,u,v,w,x,y,z");
    SocketAddress a;
    EXPECT_EQ(findListenAddress(&a, nullptr), Result::kInvalidUsage);
  }
  {
    // Several entries, none of them present.
    EnvGuard g("NCCL_SOCKET_IFNAME", "nosuch0,nosuch1");
    SocketAddress a;
    EXPECT_EQ(findListenAddress(&a, nullptr), Result::kInvalidUsage);
  }
  {
    EnvGuard g("NCCL_SOCKET_FAMILY", "AF_INET");
    SocketAddress a;
    ASSERT_EQ(findListenAddress(&a, nullptr), Result::kSuccess);
    EXPECT_EQ(a.family(), AF_INET);
  }
  {
    EnvGuard g("NCCL_SOCKET_FAMILY", "AF_UNIX");
    SocketAddress a;
    EXPECT_EQ(findListenAddress(&a, nullptr), Result::kInvalidArgument);
  }
}

// NCCL_COMM_ID only hints at the interface here; one that does not resolve must not leave a
// warning or a last error behind a choice that succeeded (ncclCommInitAll ignores the variable).
TEST(FindListenAddress, UnresolvableCommIdHintLeavesNoError) {
  EnvGuard g("NCCL_COMM_ID", "no-such-host.invalid:29500");
  clearLastError();
  SocketAddress a;
  ASSERT_EQ(findListenAddress(&a, nullptr), Result::kSuccess);
  EXPECT_EQ(lastError(), "");
}

InterfaceAddress iface(const char* name, unsigned flags, const char* hostPort) {
  InterfaceAddress i;
  i.name = name;
  i.flags = flags;
  EXPECT_EQ(parseHostPort(hostPort, &i.addr), Result::kSuccess);
  return i;
}

// An unplugged port (NO-CARRIER) often keeps its static address; like NCCL, the choice skips it,
// by default and when NCCL_SOCKET_IFNAME names it, since listening there reaches nobody.
TEST(ChooseInterface, SkipsInterfacesWithoutCarrier) {
  const unsigned up = IFF_UP | IFF_BROADCAST;
  const std::vector<InterfaceAddress> ifs = {
      iface("lo", IFF_UP | IFF_RUNNING | IFF_LOOPBACK, "127.0.0.1:0"),
      iface("eth0", up, "10.0.0.1:0"),
      iface("eth1", up | IFF_RUNNING, "10.0.1.1:0"),
  };
  EXPECT_EQ(chooseInterface(ifs, "", AF_UNSPEC), 2);
  EXPECT_EQ(chooseInterface(ifs, "eth", AF_UNSPEC), 2);
  EXPECT_EQ(chooseInterface(ifs, "=eth0", AF_UNSPEC), -1);
  // Without any running non-loopback interface the default falls back to loopback.
  EXPECT_EQ(chooseInterface({ifs[0], ifs[1]}, "", AF_UNSPEC), 0);
}

TEST(ChooseInterface, PrefersIpv4AndHonoursTheFamily) {
  const unsigned on = IFF_UP | IFF_RUNNING;
  const std::vector<InterfaceAddress> ifs = {
      iface("eth0", on, "[fd00::1]:0"),
      iface("eth0", on, "10.0.0.1:0"),
      iface("docker0", on, "172.17.0.1:0"),
  };
  EXPECT_EQ(chooseInterface(ifs, "", AF_UNSPEC), 1);
  EXPECT_EQ(chooseInterface(ifs, "", AF_INET6), 0);
  EXPECT_EQ(chooseInterface(ifs, "=docker0", AF_UNSPEC), 2);
}

InterfaceAddress ifaceWithMask(const char* name, const char* hostPort, const char* maskPort) {
  InterfaceAddress i = iface(name, IFF_UP | IFF_RUNNING, hostPort);
  EXPECT_EQ(parseHostPort(maskPort, &i.netmask), Result::kSuccess);
  return i;
}

// Without NCCL_SOCKET_IFNAME the choice follows NCCL's classes in order: IPoIB, the bootstrap
// root's subnet, anything but docker/lo/virbr, then docker, loopback and virbr.
TEST(ChooseInterface, FollowsNcclsDefaultOrder) {
  const std::vector<InterfaceAddress> ifs = {
      iface("lo", IFF_UP | IFF_RUNNING | IFF_LOOPBACK, "127.0.0.1:0"),
      ifaceWithMask("eth0", "192.168.1.5:0", "255.255.255.0:0"),
      ifaceWithMask("eth1", "10.1.0.7:0", "255.255.0.0:0"),
      ifaceWithMask("ib0", "10.9.0.7:0", "255.255.0.0:0"),
      ifaceWithMask("docker0", "172.17.0.1:0", "255.255.0.0:0"),
      ifaceWithMask("virbr0", "192.168.122.1:0", "255.255.255.0:0"),
  };
  SocketAddress root;
  ASSERT_EQ(parseHostPort("10.1.200.3:29500", &root), Result::kSuccess);
  EXPECT_EQ(chooseInterface(ifs, "", AF_UNSPEC, &root), 3);  // IPoIB before all else
  const std::vector<InterfaceAddress> noIb = {ifs[0], ifs[1], ifs[2], ifs[4], ifs[5]};
  EXPECT_EQ(chooseInterface(noIb, "", AF_UNSPEC, &root), 2);    // eth1 holds the root's subnet
  EXPECT_EQ(chooseInterface(noIb, "", AF_UNSPEC, nullptr), 1);  // else the first ordinary one
  SocketAddress elsewhere;
  ASSERT_EQ(parseHostPort("10.2.0.1:29500", &elsewhere), Result::kSuccess);
  EXPECT_EQ(chooseInterface(noIb, "", AF_UNSPEC, &elsewhere), 1);
  // A root on the docker bridge's subnet picks the bridge, as NCCL does.
  SocketAddress onBridge;
  ASSERT_EQ(parseHostPort("172.17.0.2:29500", &onBridge), Result::kSuccess);
  EXPECT_EQ(chooseInterface(noIb, "", AF_UNSPEC, &onBridge), 3);
  // No ordinary interface: docker before loopback before virbr.
  EXPECT_EQ(chooseInterface({ifs[0], ifs[4], ifs[5]}, "", AF_UNSPEC), 1);
  EXPECT_EQ(chooseInterface({ifs[5], ifs[0]}, "", AF_UNSPEC), 1);
  EXPECT_EQ(chooseInterface({ifs[5]}, "", AF_UNSPEC), 0);
  // NCCL_SOCKET_IFNAME overrides all of it.
  EXPECT_EQ(chooseInterface(ifs, "eth", AF_UNSPEC, &root), 1);
}

TEST(Socket, SendRecvLargeBuffer) {
  Socket client, server;
  ASSERT_NO_FATAL_FAILURE(makePair(&client, &server));
  std::vector<uint8_t> out(8 << 20), in(out.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i * 131 + 7);
  const Deadline deadline = Clock::now() + std::chrono::seconds(20);
  Result sent = Result::kInternalError;
  std::thread t([&] { sent = client.sendAll(out.data(), out.size(), deadline, nullptr, "test server"); });
  EXPECT_EQ(server.recvAll(in.data(), in.size(), deadline, nullptr, "test client"), Result::kSuccess);
  t.join();
  EXPECT_EQ(sent, Result::kSuccess);
  EXPECT_EQ(in, out);
}

TEST(Socket, SomeAddsToDoneAndNeverBlocks) {
  Socket client, server;
  ASSERT_NO_FATAL_FAILURE(makePair(&client, &server));
  uint8_t buf[16] = {};
  size_t done = 5;
  EXPECT_EQ(server.recvSome(buf, sizeof(buf), &done, "client"), Result::kSuccess);
  EXPECT_EQ(done, 5u);  // nothing there: success, nothing added
  const char msg[] = "hello";
  size_t sent = 0;
  ASSERT_EQ(client.sendSome(msg, 5, &sent, "server"), Result::kSuccess);
  EXPECT_EQ(sent, 5u);
  size_t got = 0;
  const auto start = Clock::now();
  while (got < 5 && secondsSince(start) < 5)
    ASSERT_EQ(server.recvSome(buf + got, 5 - got, &got, "c"), Result::kSuccess);
  EXPECT_EQ(memcmp(buf, "hello", 5), 0);
}

TEST(Socket, DeadlineExpiryIsBounded) {
  Socket client, server;
  ASSERT_NO_FATAL_FAILURE(makePair(&client, &server));
  uint8_t buf[4];
  const auto start = Clock::now();
  EXPECT_EQ(server.recvAll(buf, sizeof(buf), Clock::now() + milliseconds(300), nullptr, "silent peer"),
            Result::kRemoteError);
  double took = secondsSince(start);
  EXPECT_GE(took, 0.29);
  EXPECT_LT(took, 1.0);
  EXPECT_NE(lastError().find("timed out"), std::string::npos) << lastError();
  EXPECT_NE(lastError().find("silent peer"), std::string::npos) << lastError();
}

TEST(Socket, AbortFlagIsObservedQuickly) {
  Socket client, server;
  ASSERT_NO_FATAL_FAILURE(makePair(&client, &server));
  std::atomic<bool> abortFlag{false};
  std::thread t([&] {
    std::this_thread::sleep_for(milliseconds(150));
    abortFlag = true;
  });
  uint8_t buf[4];
  const auto start = Clock::now();
  EXPECT_EQ(server.recvAll(buf, sizeof(buf), Clock::now() + std::chrono::seconds(30), &abortFlag, "peer"),
            Result::kRemoteError);
  const double took = secondsSince(start);
  t.join();
  // Seen within a poll slice (100 ms), not at the 30 s deadline; the bound leaves a loaded machine
  // room to schedule the two threads (0.15 + 0.2 failed once beside a CI run, load average 22).
  EXPECT_LT(took, 0.15 + 2.0);
  EXPECT_NE(lastError().find("aborted"), std::string::npos) << lastError();
}

TEST(Socket, EofIsRemoteError) {
  Socket client, server;
  ASSERT_NO_FATAL_FAILURE(makePair(&client, &server));
  const char two[2] = {1, 2};
  ASSERT_EQ(client.sendAll(two, 2, Clock::now() + std::chrono::seconds(5), nullptr, "s"), Result::kSuccess);
  client.close();
  uint8_t buf[4];
  const auto start = Clock::now();
  EXPECT_EQ(server.recvAll(buf, sizeof(buf), Clock::now() + std::chrono::seconds(30), nullptr, "rank 9"),
            Result::kRemoteError);
  EXPECT_LT(secondsSince(start), 1.0);
  EXPECT_NE(lastError().find("rank 9"), std::string::npos) << lastError();
  // Sending into a closed peer fails too (EPIPE/ECONNRESET), without SIGPIPE killing the test.
  std::vector<uint8_t> big(1 << 20);
  Result r = Result::kSuccess;
  Socket c2, s2;
  ASSERT_NO_FATAL_FAILURE(makePair(&c2, &s2));
  s2.close();
  for (int i = 0; i < 50 && ok(r); ++i) {
    r = c2.sendAll(big.data(), big.size(), Clock::now() + std::chrono::seconds(2), nullptr, "closed peer");
  }
  EXPECT_EQ(r, Result::kRemoteError);
}

TEST(Socket, ConnectRetriesUntilListenerAppears) {
  // Learn a free port, release it, and listen on it again only after the client started trying.
  SocketAddress addr = loopback();
  {
    Socket probe;
    ASSERT_EQ(Socket::listen(&addr, &probe), Result::kSuccess);
  }
  Socket late;
  std::thread t([&] {
    std::this_thread::sleep_for(milliseconds(300));
    SocketAddress a = addr;
    EXPECT_EQ(Socket::listen(&a, &late), Result::kSuccess);
  });
  Socket client;
  const auto start = Clock::now();
  Result r = Socket::connect(addr, Clock::now() + std::chrono::seconds(10), nullptr, &client);
  t.join();
  EXPECT_EQ(r, Result::kSuccess) << lastError();
  EXPECT_GE(secondsSince(start), 0.25);
}

TEST(Socket, ConnectGivesUpAtDeadlineAndOnAbort) {
  SocketAddress addr = loopback();
  {
    Socket probe;
    ASSERT_EQ(Socket::listen(&addr, &probe), Result::kSuccess);
  }
  Socket client;
  auto start = Clock::now();
  EXPECT_EQ(Socket::connect(addr, Clock::now() + milliseconds(400), nullptr, &client), Result::kRemoteError);
  EXPECT_LT(secondsSince(start), 1.0);
  EXPECT_NE(lastError().find(addr.toString()), std::string::npos) << lastError();

  std::atomic<bool> abortFlag{true};
  start = Clock::now();
  EXPECT_EQ(Socket::connect(addr, Clock::now() + std::chrono::seconds(30), &abortFlag, &client), Result::kRemoteError);
  EXPECT_LT(secondsSince(start), 2.0);  // at once, not at the 30 s deadline (room for a loaded machine)
}

TEST(Socket, ConnectGivesUpOnLastingRefusalsWhenAsked) {
  SocketAddress addr = loopback();
  {
    Socket probe;
    ASSERT_EQ(Socket::listen(&addr, &probe), Result::kSuccess);
  }
  Socket client;
  const auto start = Clock::now();
  EXPECT_EQ(Socket::connect(addr, Clock::now() + std::chrono::seconds(30), nullptr, &client, {}, milliseconds(300)),
            Result::kRemoteError);
  EXPECT_LT(secondsSince(start), 3.0);
  EXPECT_NE(lastError().find("refused"), std::string::npos) << lastError();
}

TEST(Socket, DefaultDeadlineFollowsTimeoutKnob) {
  EnvGuard g("MIXCCL_TIMEOUT", "7");
  const auto before = Clock::now();
  const Deadline d = defaultDeadline();
  const auto after = Clock::now();
  EXPECT_GE(d - before, std::chrono::seconds(7));
  EXPECT_LE(d - after, std::chrono::seconds(7));
}

int intOption(int fd, int level, int name) {
  int v = -1;
  socklen_t len = sizeof(v);
  EXPECT_EQ(getsockopt(fd, level, name, &v, &len), 0);
  return v;
}

// Both ends of a connection probe a silent peer and give up MIXCCL_NET_TIMEOUT after it was last
// heard; no TCP_USER_TIMEOUT is left on an established connection (socket.h says why).
TEST(SocketLiveness, KeepaliveFollowsNetTimeoutKnob) {
  EnvGuard g("MIXCCL_NET_TIMEOUT", "20");
  Socket client, server;
  makePair(&client, &server);
  for (const Socket* s : {&client, &server}) {
    EXPECT_EQ(intOption(s->fd(), SOL_SOCKET, SO_KEEPALIVE), 1);
    const int idle = intOption(s->fd(), IPPROTO_TCP, TCP_KEEPIDLE);
    const int intvl = intOption(s->fd(), IPPROTO_TCP, TCP_KEEPINTVL);
    const int cnt = intOption(s->fd(), IPPROTO_TCP, TCP_KEEPCNT);
    EXPECT_EQ(idle + intvl * cnt, 20);
    EXPECT_EQ(intOption(s->fd(), IPPROTO_TCP, TCP_USER_TIMEOUT), 0);
  }
}

TEST(SocketLiveness, ZeroTurnsTheChecksOff) {
  EnvGuard g("MIXCCL_NET_TIMEOUT", "0");
  Socket client, server;
  makePair(&client, &server);
  EXPECT_EQ(intOption(client.fd(), SOL_SOCKET, SO_KEEPALIVE), 0);
  EXPECT_FALSE(peerSilent(client.fd()));
}

TEST(SocketLiveness, UnreachableErrorsNameTheKnob) {
  EnvGuard g("MIXCCL_NET_TIMEOUT", "20");
  EXPECT_TRUE(isUnreachableError(ETIMEDOUT));
  EXPECT_TRUE(isUnreachableError(EHOSTUNREACH));
  EXPECT_FALSE(isUnreachableError(ECONNRESET));
  EXPECT_EQ(unreachableText("rank 3 (host h)", ETIMEDOUT),
            std::string("rank 3 (host h) unreachable for 20 s (MIXCCL_NET_TIMEOUT): ") + strerror(ETIMEDOUT));
}

// A receiver that is alive but reads nothing for longer than MIXCCL_NET_TIMEOUT (a rank late to a
// collective) must not be taken for a dead link: its window closes, the sender's kernel probes it,
// and its kernel answers. With TCP_USER_TIMEOUT on the connection Linux would abort it here.
// (3 s, not less: the receiver's kernel rate-limits its answers to window probes that come faster
// than every 500 ms, which the first few probes do, so a shorter timeout could see a second of
// silence here.)
TEST(SocketLiveness, LateReceiverIsNotDeclaredDead) {
  EnvGuard g("MIXCCL_NET_TIMEOUT", "3");
  Socket client, server;
  makePair(&client, &server);
  std::vector<uint8_t> chunk(1 << 20, 7);
  const auto start = Clock::now();
  size_t total = 0;
  bool everSilent = false;
  while (secondsSince(start) < 5.0) {
    size_t done = 0;
    ASSERT_EQ(client.sendSome(chunk.data(), chunk.size(), &done, "the late receiver"), Result::kSuccess) << lastError();
    total += done;
    everSilent |= peerSilent(client.fd());
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_GT(total, 0u);
  EXPECT_FALSE(everSilent);
  // The receiver finally reads: everything arrives.
  std::vector<uint8_t> sink(total);
  EXPECT_EQ(server.recvAll(sink.data(), total, Clock::now() + std::chrono::seconds(5), nullptr, "sender"),
            Result::kSuccess)
      << lastError();
}

}  // namespace
}  // namespace mixccl
