// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
//
// Fuzz target: the receiving end of a TCP lane (transports/tcp/tcp_connection.cc,
// TcpRecvConnection), which parses the peer's byte stream of frames (u64 length, u64 stamp,
// payload) into its slots. The real connection runs on one end of a socketpair; the target
// writes the input's stream into the other end in small pieces, consuming messages in between,
// then closes it. Byte 0: slot size 1..64, byte 1: fifo depth 1..4, byte 2: write piece size
// (0 = all at once); the rest is the stream.
//
// Invariants, against an independent parse of the stream: every complete frame that fits a slot
// arrives, in order, with its length, stamp and payload intact; nothing else arrives; a frame
// longer than the slot, or the stream ending anywhere (the write end closes), ends the lane with
// kRemoteError, and only after the messages before it were delivered.

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "tests/fuzz/fuzz_check.h"
#include "transports/tcp/tcp_internal.h"

using namespace mixccl;

namespace {

struct Message {
  uint64_t stamp;
  const uint8_t* payload;
  size_t bytes;
};

uint64_t getU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// What the receiver must deliver before the lane fails.
std::vector<Message> expected(const uint8_t* s, size_t n, size_t slotBytes) {
  std::vector<Message> out;
  size_t at = 0;
  while (n - at >= kTcpFrameHeaderBytes) {
    const uint64_t len = getU64(s + at);
    if (len > slotBytes || len > n - at - kTcpFrameHeaderBytes) break;
    out.push_back({getU64(s + at + 8), s + at + kTcpFrameHeaderBytes, static_cast<size_t>(len)});
    at += kTcpFrameHeaderBytes + len;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const size_t slotBytes = 1 + data[0] % 64;
  const int depth = 1 + data[1] % 4;
  const size_t piece = data[2] % 32;
  const uint8_t* stream = data + 3;
  const size_t n = size - 3;
  const std::vector<Message> want = expected(stream, n, slotBytes);

  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) abort();
  auto hub = std::make_shared<TcpHub>();
  hub->ctx.rank = 0;
  hub->ctx.nranks = 2;
  hub->ctx.slotBytes = slotBytes;
  hub->ctx.fifoDepth = depth;
  hub->peers.resize(2);
  hub->peers[0].hostHash = 1;  // different hosts: no pid watch, only the socket tells
  hub->peers[1].hostHash = 2;
  hub->peers[1].rank = 1;
  hub->parked.resize(2 * kNumLanes);
  hub->receivers.assign(2 * kNumLanes, nullptr);
  hub->sendersMade.assign(2 * kNumLanes, 0);
  Socket writer(fds[1]);
  {
    TcpRecvConnection conn(hub, 1, kLaneColl);
    conn.attach(Socket(fds[0]));
    size_t written = 0;
    size_t got = 0;
    bool closed = false;
    Result last = Result::kInProgress;
    // Each round writes a piece (until all is written, then closes) and consumes what arrived.
    // The bound is generous: one round per stream byte, plus draining.
    for (size_t round = 0; round < n + 4 * want.size() + 64; ++round) {
      if (written < n) {
        size_t len = piece == 0 ? n - written : std::min(piece, n - written);
        ssize_t w = ::send(writer.fd(), stream + written, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w > 0) written += static_cast<size_t>(w);
        FUZZ_CHECK(w > 0 || errno == EAGAIN || errno == EWOULDBLOCK || errno == EPIPE || errno == ECONNRESET);
      } else if (!closed) {
        writer.close();
        closed = true;
      }
      for (;;) {
        const void* msg = nullptr;
        size_t bytes = 0;
        uint64_t stamp = 0;
        last = conn.peek(&msg, &bytes, &stamp);
        if (last != Result::kSuccess) break;
        FUZZ_CHECK(got < want.size());
        FUZZ_CHECK(bytes == want[got].bytes && stamp == want[got].stamp);
        FUZZ_CHECK(bytes <= slotBytes);
        FUZZ_CHECK(bytes == 0 || memcmp(msg, want[got].payload, bytes) == 0);
        FUZZ_CHECK(conn.release() == Result::kSuccess);
        ++got;
      }
      FUZZ_CHECK(last == Result::kInProgress || last == Result::kRemoteError);
      if (last == Result::kRemoteError) break;
    }
    // The stream always ends (closed write end) and the lane with it, after every good frame.
    FUZZ_CHECK(last == Result::kRemoteError);
    FUZZ_CHECK(got == want.size());
    // Sticky: the lane stays failed.
    const void* msg = nullptr;
    size_t bytes = 0;
    uint64_t stamp = 0;
    FUZZ_CHECK(conn.peek(&msg, &bytes, &stamp) == Result::kRemoteError);
  }
  return 0;
}
