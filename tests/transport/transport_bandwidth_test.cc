// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// One-lane throughput of each transport, printed next to plain memcpy bandwidth. Two threads
// play two ranks; the sender copies user data into the slot (what the engine does for a send)
// and the receiver copies it out (a receive), so shm moves each byte with exactly those two
// copies. Sizes: 512 KiB slots, depth 8, 64 MiB (MIXCCL_TEST_BW_BYTES=1073741824 for a real measurement). Nothing is
// asserted about speed; the numbers are for the report (docs/PROTOCOL.md).

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "transports/transport.h"

namespace mixccl {
namespace {

constexpr size_t kSlotBytes = 512 << 10;
constexpr int kDepth = 8;
constexpr size_t kUserBuffer = 64 << 20;  // cycled through, so the copies hit memory, not cache

size_t totalBytes() {
  const char* env = getenv("MIXCCL_TEST_BW_BYTES");
  return env != nullptr ? strtoull(env, nullptr, 0) : (size_t{64} << 20);
}

double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

TEST(TransportBandwidth, MemcpyBaseline) {
  std::vector<uint8_t> src(kUserBuffer, 1), dst(kSlotBytes);
  size_t total = totalBytes();
  auto start = std::chrono::steady_clock::now();
  for (size_t off = 0; off < total; off += kSlotBytes) {
    memcpy(dst.data(), src.data() + off % kUserBuffer, kSlotBytes);
  }
  double s = seconds(std::chrono::steady_clock::now() - start);
  EXPECT_EQ(dst[kSlotBytes - 1], 1);
  printf("memcpy 512 KiB blocks into one cache-resident block: %.2f GB/s\n", total / s / 1e9);
  // The same traffic as a lane's end points: 64 MiB source to 64 MiB destination.
  std::vector<uint8_t> big(kUserBuffer);
  start = std::chrono::steady_clock::now();
  for (size_t off = 0; off < total; off += kSlotBytes) {
    memcpy(big.data() + off % kUserBuffer, src.data() + off % kUserBuffer, kSlotBytes);
  }
  s = seconds(std::chrono::steady_clock::now() - start);
  EXPECT_EQ(big[kSlotBytes - 1], 1);
  printf("memcpy 512 KiB blocks, 64 MiB buffer to 64 MiB buffer: %.2f GB/s\n", total / s / 1e9);
}

void runLane(bool shm) {
  std::atomic<bool> abort{false};
  std::vector<std::unique_ptr<Transport>> ranks(2);
  std::vector<TransportPeer> peers(2);
  uint64_t hash = std::random_device{}() * 0x9e3779b97f4a7c15ull + getpid();
  for (int r = 0; r < 2; ++r) {
    TransportContext c;
    c.rank = r;
    c.nranks = 2;
    c.commHash = hash;
    c.slotBytes = kSlotBytes;
    c.fifoDepth = kDepth;
    c.abortFlag = &abort;
    ranks[r] = shm ? makeShmTransport(c) : makeTcpTransport(c);
    ASSERT_EQ(ranks[r]->listen(&peers[r].blob), Result::kSuccess) << lastError();
    peers[r].rank = r;
    peers[r].hostHash = 1;
    peers[r].pid = getpid();
    peers[r].host = "localhost";
  }
  for (auto& t : ranks) ASSERT_EQ(t->setPeers(peers), Result::kSuccess) << lastError();
  std::unique_ptr<SendConnection> send;
  std::unique_ptr<RecvConnection> recv;
  ASSERT_EQ(ranks[1]->connectRecv(0, kLaneColl, &recv), Result::kSuccess) << lastError();
  ASSERT_EQ(ranks[0]->connectSend(1, kLaneColl, &send), Result::kSuccess) << lastError();

  const size_t total = totalBytes();
  std::vector<uint8_t> src(kUserBuffer), dst(kUserBuffer);
  for (size_t i = 0; i < src.size(); i += 4096) src[i] = static_cast<uint8_t>(i >> 12);
  // Every wait is bounded: a stuck lane fails the test instead of hanging CTest.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  auto waitMore = [&](Result* r) {
    if (*r != Result::kInProgress) return false;
    if (std::chrono::steady_clock::now() > deadline) {
      *r = Result::kRemoteError;
      return false;
    }
    std::this_thread::yield();  // the other end may share this core
    return true;
  };
  Result sendResult = Result::kSuccess;
  auto start = std::chrono::steady_clock::now();
  std::thread sender([&] {
    for (size_t off = 0; off < total && sendResult == Result::kSuccess; off += kSlotBytes) {
      void* slot = nullptr;
      do {
        sendResult = send->acquire(&slot);
      } while (waitMore(&sendResult));
      if (sendResult != Result::kSuccess) break;
      memcpy(slot, src.data() + off % kUserBuffer, kSlotBytes);
      sendResult = send->commit(kSlotBytes, 0);
    }
    // Drain the staged frames: flush() is in progress until the kernel took them all.
    while (sendResult == Result::kSuccess) {
      sendResult = send->flush();
      if (!waitMore(&sendResult)) break;
      sendResult = Result::kSuccess;
    }
  });
  Result recvResult = Result::kSuccess;
  for (size_t off = 0; off < total;) {
    const void* data = nullptr;
    size_t bytes = 0;
    uint64_t stamp = 0;
    recvResult = recv->peek(&data, &bytes, &stamp);
    if (recvResult == Result::kInProgress) {
      if (!waitMore(&recvResult)) break;
      if ((recvResult = ranks[1]->progress()) != Result::kSuccess) break;
      continue;
    }
    if (recvResult != Result::kSuccess) break;
    memcpy(dst.data() + off % kUserBuffer, data, bytes);
    off += bytes;
    if ((recvResult = recv->release()) != Result::kSuccess) break;
  }
  double s = seconds(std::chrono::steady_clock::now() - start);
  sender.join();
  ASSERT_EQ(sendResult, Result::kSuccess) << lastError();
  ASSERT_EQ(recvResult, Result::kSuccess) << lastError();
  EXPECT_EQ(memcmp(src.data(), dst.data(), kUserBuffer), 0);
  printf("%s one lane, 512 KiB slots, depth 8, %.2f GiB: %.2f GB/s\n", shm ? "shm" : "tcp", total / double(1 << 30),
         total / s / 1e9);
}

TEST(TransportBandwidth, Shm) { runLane(true); }
TEST(TransportBandwidth, Tcp) { runLane(false); }

}  // namespace
}  // namespace mixccl
