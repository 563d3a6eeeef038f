// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
//
// Writes the seed corpus (tests/fuzz/corpus/<target>/) with the real encoders: valid messages
// plus a few edge cases. Run it after a wire format changes and commit the result:
//   build/tests/fuzz/fuzz_make_corpus tests/fuzz/corpus

#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "src/core/bootstrap.h"
#include "src/core/bootstrap_wire.h"
#include "src/core/peer_info.h"
#include "tests/fuzz/fuzz_check.h"
#include "transports/tcp/tcp_internal.h"

using namespace mixccl;
using namespace mixccl::bootstrap;

namespace {

using Bytes = std::vector<uint8_t>;
std::string root;

void put(const std::string& target, const std::string& name, const Bytes& b) {
  const std::string dir = root + "/" + target;
  mkdir(root.c_str(), 0755);
  mkdir(dir.c_str(), 0755);
  FILE* f = fopen((dir + "/" + name).c_str(), "wb");
  if (f == nullptr || fwrite(b.data(), 1, b.size(), f) != b.size()) {
    perror((dir + "/" + name).c_str());
    exit(1);
  }
  fclose(f);
}

void u64(Bytes* b, uint64_t v) {
  for (int i = 0; i < 8; ++i) b->push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// "10.1.2.3:40000" or "[fe80::1]:40001", through the parser the library itself uses.
SocketAddress addr(const char* hostPort) {
  SocketAddress a;
  FUZZ_CHECK(parseHostPort(hostPort, &a) == Result::kSuccess);
  return a;
}

Bytes hello(HelloKind kind, uint32_t rank, uint32_t nranks, const SocketAddress& addr) {
  Hello h;
  h.commHash = fuzz::kCommHash;
  memcpy(h.secret, fuzz::kSecret, 16);
  h.kind = kind;
  h.rank = rank;
  h.nranks = nranks;
  h.address = addr;
  Bytes b(Hello::kBytes);
  h.encode(b.data());
  return b;
}

Bytes with(uint8_t first, Bytes rest) {
  rest.insert(rest.begin(), first);
  return rest;
}

void bootstrapWire() {
  const char* t = "bootstrap_wire";
  put(t, "hello_peer", with(0, hello(HelloKind::kPeer, 1, 5, {})));
  put(t, "hello_register_v4", with(0, hello(HelloKind::kRegister, 0, 2, addr("10.1.2.3:40000"))));
  put(t, "hello_register_v6", with(0, hello(HelloKind::kRegister, 1, 2, addr("[fe80::1]:40001"))));
  put(t, "hello_short", with(0, Bytes{0x4d, 0x58, 0x42, 0x48}));
  ReplyHeader rep;
  rep.nranks = 2;
  rep.payloadBytes = 2 * SocketAddress::kWireBytes;
  Bytes r(ReplyHeader::kBytes);
  rep.encode(r.data());
  put(t, "reply_table", with(1, r));
  rep.status = static_cast<uint32_t>(Result::kInvalidUsage);
  rep.payloadBytes = 0xffffffffu;
  rep.encode(r.data());
  put(t, "reply_error_huge", with(1, r));
  FrameHeader f;
  f.channel = Channel::kAllGather;
  f.tag = 7;
  f.length = 232;
  Bytes fb(FrameHeader::kBytes);
  f.encode(fb.data());
  put(t, "frame", with(2, fb));
  f.length = kMaxFrameBytes + 1;
  f.encode(fb.data());
  put(t, "frame_too_long", with(2, fb));
  UniqueIdData id;
  id.commHash = fuzz::kCommHash;
  memcpy(id.secret, fuzz::kSecret, 16);
  id.root = addr("127.0.0.1:29500");
  id.flags = UniqueIdData::kRootStartedByRank0;
  Bytes ib(UniqueIdData::kBytes);
  id.encode(ib.data());
  put(t, "unique_id_v4", with(3, ib));
  id.root = addr("[::1]:29500");
  id.encode(ib.data());
  put(t, "unique_id_v6", with(3, ib));
  PeerInfo p;
  p.protocolVersion = 4;
  p.rank = 3;
  p.nranks = 4;
  p.pid = 4242;
  p.hostHash = 0x1122334455667788ull;
  p.host = "node-7";
  p.backend.name = "host";
  p.backend.dtypes = 0x3ff;
  p.backend.ops = 0x3f;
  p.transports.push_back({"shm", {}});
  p.transports.push_back({"tcp", Bytes(SocketAddress::kWireBytes, 0)});
  addr("10.0.0.7:41000").encode(p.transports[1].blob.data());
  Bytes pb(PeerInfo::kWireBytes);
  if (p.encode(pb.data(), pb.size()) != Result::kSuccess) abort();
  put(t, "peer_info", with(4, pb));
  p.host = std::string(PeerInfo::kHostBytes - 1, 'h');
  p.transports[0].blob.assign(Transport::kMaxBlobBytes, 0x5a);
  p.backend.name = std::string(PeerInfo::kNameBytes - 1, 'b');
  p.backend.arithmetic.fill(0xa5a5a5a5u);
  for (int i = 0; i < 8; ++i) {
    char name[8];  // not "t" + std::to_string(i): GCC 12 warns there falsely (-Wrestrict)
    snprintf(name, sizeof(name), "t%d", i);
    p.transports.push_back({name, Bytes(Transport::kMaxBlobBytes, 7)});
  }
  if (p.encode(pb.data(), pb.size()) != Result::kSuccess) abort();
  put(t, "peer_info_full", with(4, pb));
  // A host field without a terminator: decoded, it must re-encode to the same name.
  memset(pb.data() + 40, 'h', PeerInfo::kHostBytes);
  put(t, "peer_info_host_unterminated", with(4, pb));
  p.initResult = static_cast<uint32_t>(Result::kInvalidUsage);
  p.initError = "cannot load device backend plugin /x.so";
  if (p.encode(pb.data(), pb.size()) != Result::kSuccess) abort();
  put(t, "peer_info_init_failure", with(4, pb));
  Bytes tb(2 * SocketAddress::kWireBytes);
  addr("10.0.0.1:1").encode(tb.data());
  addr("[2001:db8::2]:65535").encode(tb.data() + SocketAddress::kWireBytes);
  put(t, "address_table", with(5, tb));
}

void bootstrapRoot() {
  const char* t = "bootstrap_root";
  Bytes all;
  for (uint32_t r : {1u, 0u, 2u}) {
    Bytes rec = with(0, hello(HelloKind::kRegister, r, 3, addr(("10.0.0.1:" + std::to_string(5000 + r)).c_str())));
    all.insert(all.end(), rec.begin(), rec.end());
  }
  put(t, "three_ranks", all);
  Bytes conflicts;
  for (auto [rank, nranks] : {std::pair{0u, 2u}, {0u, 2u}, {1u, 3u}, {2u, 2u}, {1u, 2u}}) {
    Bytes rec = with(0, hello(HelloKind::kRegister, rank, nranks, addr("10.0.0.2:6000")));
    conflicts.insert(conflicts.end(), rec.begin(), rec.end());
  }
  put(t, "conflicts", conflicts);
  Bytes closeAndRejoin = with(0, hello(HelloKind::kRegister, 0, 2, addr("10.0.0.3:7000")));
  Bytes again = with(4, hello(HelloKind::kRegister, 0, 2, addr("10.0.0.3:7001")));
  closeAndRejoin.insert(closeAndRejoin.end(), again.begin(), again.end());
  put(t, "close_and_rejoin", closeAndRejoin);
  put(t, "foreign_and_malformed", with(3, Bytes(Hello::kBytes, 0)));
}

void tcpHello() {
  const char* t = "tcp_hello";
  TcpHello h;
  h.commHash = fuzz::kCommHash;
  memcpy(h.secret, fuzz::kSecret, 16);
  h.src = 2;
  h.dst = 1;
  h.lane = kLaneP2p;
  Bytes b(kTcpHelloBytes);
  encodeHello(h, b.data());
  put(t, "valid", with(0, b));
  h.src = 3;
  encodeHello(h, b.data());
  put(t, "src_out_of_range", with(0, b));
  h.src = 0;
  h.dst = 0;
  encodeHello(h, b.data());
  put(t, "other_dst", with(0, b));
  put(t, "zeros_patched", with(3, Bytes(kTcpHelloBytes, 0)));
}

void frame(Bytes* s, const Bytes& payload, uint64_t stamp) {
  u64(s, payload.size());
  u64(s, stamp);
  s->insert(s->end(), payload.begin(), payload.end());
}

void tcpFrames() {
  const char* t = "tcp_frames";
  // Header: slot 16, depth 2, pieces of 5 bytes.
  Bytes s{15, 1, 5};
  frame(&s, Bytes(16, 0x11), 1);
  frame(&s, {}, 2);
  frame(&s, Bytes(3, 0x33), 3);
  put(t, "three_frames", s);
  Bytes tooLong{15, 0, 0};
  frame(&tooLong, Bytes(4, 1), 9);
  frame(&tooLong, Bytes(17, 2), 10);
  put(t, "frame_too_long", tooLong);
  Bytes truncated{63, 3, 1};
  frame(&truncated, Bytes(40, 7), 11);
  truncated.resize(truncated.size() - 10);
  put(t, "truncated", truncated);
  Bytes huge{0, 0, 0};
  u64(&huge, ~0ull);
  u64(&huge, 0);
  put(t, "huge_length", huge);
}

void shmLane() {
  const char* t = "shm_lane";
  // Three messages (one inline, one empty, one oversized) through the receiver; two sends with a
  // rogue tail.
  Bytes p;
  auto line = [&](uint8_t i, uint64_t bytes, uint64_t stamp) {
    p.push_back(1);
    p.push_back(i);
    u64(&p, bytes);
    u64(&p, stamp);
  };
  auto seq = [&](uint8_t i, uint64_t v) {
    p.push_back(0);
    p.push_back(i);
    u64(&p, v);
  };
  p.insert(p.end(), {2, 0, 0x41});
  line(0, 10, 100);
  line(1, 0, 101);
  line(2, 101, 102);
  seq(0, 1);
  seq(1, 2);
  seq(2, 3);
  p.insert(p.end(), {3, 4, 3, 4, 3, 4, 3, 4});
  p.insert(p.end(), {6, 7, 0x55, 6, 100, 0x66});
  p.push_back(5);
  u64(&p, ~0ull);
  p.insert(p.end(), {6, 1, 1});
  put(t, "ring", p);
  put(t, "bad_header", Bytes{7, 1, 4, 0, 0, 0, 6, 1, 1});
  // A line that claims a message of another round (seq from the far future / the past).
  Bytes stale{0, 0};
  u64(&stale, ~0ull);
  stale.insert(stale.end(), {3, 4, 3});
  put(t, "seq_not_next", stale);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  root = argv[1];
  bootstrapWire();
  bootstrapRoot();
  tcpHello();
  tcpFrames();
  shmLane();
  return 0;
}
