// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// How a shm lane of a host with 2 ranks places messages in its slot ring (shm_segment.h): from
// kShmPackedBytes to kShmPackedMaxBytes, packed page by page behind each other, so a run of equal
// messages cycles through the whole ring; others in a slot each; never across the
// ring's end; no more units in use than the ring has; nothing committed beyond what
// acquireFor() was asked for; and when a host packs at all. Payloads of up to kShmSmallBytes take
// no room in the ring: they go into their line's small block and queue as deep as the lines.

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "common/result.h"
#include "transports/shm/shm_segment.h"
#include "transports/shm/shm_stale.h"
#include "transports/transport.h"

namespace mixccl {
namespace {

using std::chrono::steady_clock;

// Two shm transports (ranks 0 and 1 of a job private to this test) and one lane 0 -> 1.
class ShmPacking : public testing::Test {
 protected:
  // `packing`: the test needs a packing lane (skipped where this host's cache makes none).
  void open(uint32_t depth, size_t slotBytes, bool packing = true) {
    const size_t ring = shmRingUnits(depth + kShmPackSpareSlots, slotBytes) * kShmUnit;
    if (packing && !shmPackLanes(lastLevelCacheBytes(), 2, ring)) {
      GTEST_SKIP() << "a last-level cache of " << lastLevelCacheBytes() << " bytes does not let 2 ranks pack rings of "
                   << ring << " bytes (shmPackLanes)";
    }
    std::random_device rd;
    const uint64_t commHash = (uint64_t{rd()} << 32) | rd();
    std::vector<TransportPeer> peers(2);
    for (int r = 0; r < 2; ++r) {
      TransportContext ctx;
      ctx.rank = r;
      ctx.nranks = 2;
      ctx.commHash = commHash;
      ctx.slotBytes = slotBytes;
      ctx.fifoDepth = depth;
      ranks_[r] = makeShmTransport(ctx);
      ASSERT_EQ(ranks_[r]->listen(&peers[r].blob), Result::kSuccess) << lastError();
      peers[r].rank = r;
      peers[r].hostHash = 1;
      peers[r].pid = getpid();
      peers[r].host = "localhost";
    }
    for (auto& t : ranks_) ASSERT_EQ(t->setPeers(peers), Result::kSuccess) << lastError();
    ASSERT_EQ(ranks_[1]->connectRecv(0, kLaneColl, &recv_), Result::kSuccess) << lastError();
    ASSERT_EQ(ranks_[0]->connectSend(1, kLaneColl, &send_), Result::kSuccess) << lastError();
    // The first acquire maps the segment the receiver created.
    void* first = nullptr;
    const auto end = steady_clock::now() + std::chrono::seconds(20);
    Result r = Result::kInProgress;
    while (r == Result::kInProgress && steady_clock::now() < end) r = send_->acquireFor(0, &first);
    ASSERT_EQ(r, Result::kSuccess) << lastError();
    ASSERT_EQ(send_->commit(0, 0), Result::kSuccess) << lastError();
    receiveOne(0, 0, -1);
  }

  // Acquires room for `bytes`, fills it with `fill`, commits it and checks that it was placed at
  // unit `unit` of the slot ring (counted from the first large message, which goes to unit 0).
  void sendOne(size_t bytes, uint8_t fill, int64_t unit) {
    void* slot = nullptr;
    ASSERT_EQ(send_->acquireFor(bytes, &slot), Result::kSuccess) << lastError();
    memset(slot, fill, bytes);
    ASSERT_EQ(send_->commit(bytes, fill), Result::kSuccess) << lastError();
    if (unit >= 0) {
      EXPECT_EQ(unitOf(&sendBase_, slot), unit) << "sender's view of message " << int{fill};
    }
  }

  // Reads the oldest message, checks its size, bytes and unit (as sendOne), and releases it.
  void receiveOne(size_t bytes, uint8_t fill, int64_t unit) {
    const void* data = nullptr;
    size_t got = 0;
    uint64_t stamp = 0;
    ASSERT_EQ(recv_->peek(&data, &got, &stamp), Result::kSuccess) << lastError();
    EXPECT_EQ(got, bytes);
    EXPECT_EQ(stamp, fill);
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < got; i += 997) EXPECT_EQ(p[i], fill) << "byte " << i;
    if (got > 0) {
      EXPECT_EQ(p[got - 1], fill);
    }
    if (unit >= 0) {
      EXPECT_EQ(unitOf(&recvBase_, data), unit) << "receiver's view of message " << int{fill};
    }
    ASSERT_EQ(recv_->release(), Result::kSuccess) << lastError();
  }

  // Each side maps the segment at its own address: units count from the first message seen.
  static int64_t unitOf(const void** base, const void* p) {
    if (*base == nullptr) *base = p;
    return (static_cast<const char*>(p) - static_cast<const char*>(*base)) / static_cast<int64_t>(kShmUnit);
  }

  const void* sendBase_ = nullptr;
  const void* recvBase_ = nullptr;
  std::unique_ptr<Transport> ranks_[2];
  std::unique_ptr<SendConnection> send_;
  std::unique_ptr<RecvConnection> recv_;
};

// Packed sizes in blocks of the smallest packed payload (4 units).
constexpr size_t kBlock = kShmPackedBytes;
constexpr int64_t kBlockUnits = kBlock / kShmUnit;

// 64 KiB messages in a ring of 8 + 2 slots of 128 KiB: each starts where the previous one ended,
// and the 21st is back at the first one's place, after the whole ring was used (a slot per
// message would have reused the first 64 KiB of each slot, half the ring, over and over).
TEST_F(ShmPacking, EqualMessagesCycleThroughTheWholeRing) {
  constexpr size_t kMsg = 64 * 1024;
  constexpr int64_t kUnits = kMsg / kShmUnit;
  open(8, 128 * 1024);
  for (int i = 0; i <= 20; ++i) {
    const auto fill = static_cast<uint8_t>(i + 1);
    sendOne(kMsg, fill, i % 20 * kUnits);
    receiveOne(kMsg, fill, i % 20 * kUnits);
  }
}

// A message shorter than kShmPackedBytes (and larger than a small block) takes a slot of its own
// (32 units here), as before packing; a packed one goes right behind the previous message; the
// next short one again at the next slot.
TEST_F(ShmPacking, ShortMessagesTakeASlotEach) {
  open(8, 128 * 1024);
  constexpr int64_t kSlotUnits = 128 * 1024 / kShmUnit;
  sendOne(kShmSmallBytes + 1, 1, 0);
  sendOne(kBlock - 1, 2, kSlotUnits);
  sendOne(2 * kBlock, 3, 2 * kSlotUnits);
  sendOne(kBlock + 1, 4, 2 * kSlotUnits + 2 * kBlockUnits);
  sendOne(kShmSmallBytes + 64, 5, 3 * kSlotUnits);
  receiveOne(kShmSmallBytes + 1, 1, 0);
  receiveOne(kBlock - 1, 2, kSlotUnits);
  receiveOne(2 * kBlock, 3, 2 * kSlotUnits);
  receiveOne(kBlock + 1, 4, 2 * kSlotUnits + 2 * kBlockUnits);
  receiveOne(kShmSmallBytes + 64, 5, 3 * kSlotUnits);
}

// Payloads of kShmInlineBytes + 1 .. kShmSmallBytes take no slot: a lane of 4 slots holds as many
// of them as it has lines, each in its line's small block, and slot messages after them still
// start at the ring's first unit. The lines are what runs out.
TEST_F(ShmPacking, SmallMessagesQueueAsDeepAsTheLines) {
  open(4, 2 * kBlock, /*packing=*/false);
  const uint32_t lines = shmLineCount(4);
  ASSERT_GT(lines, 4u);
  std::vector<size_t> sizes;
  std::vector<const void*> where;
  for (uint32_t i = 0; i < lines; ++i) {
    const size_t bytes = kShmInlineBytes + 1 + i * 97 % (kShmSmallBytes - kShmInlineBytes);
    void* slot = nullptr;
    ASSERT_EQ(send_->acquireFor(bytes, &slot), Result::kSuccess) << "small message " << i << " of " << lines;
    memset(slot, static_cast<int>(i + 1), bytes);
    ASSERT_EQ(send_->commit(bytes, i + 1), Result::kSuccess) << lastError();
    sizes.push_back(bytes);
    where.push_back(slot);
  }
  void* slot = nullptr;
  EXPECT_EQ(send_->acquireFor(kShmInlineBytes + 1, &slot), Result::kInProgress) << "every line is in use";
  for (uint32_t i = 1; i < lines; ++i) EXPECT_NE(where[i], where[i - 1]) << "a block per line";
  for (uint32_t i = 0; i < lines; ++i) receiveOne(sizes[i], static_cast<uint8_t>(i + 1), -1);
  sendOne(kShmSmallBytes + 1, 100, 0);
  sendOne(kShmSmallBytes, 101, -1);
  sendOne(kShmSmallBytes + 1, 102, 2 * kBlockUnits);  // the next slot
  receiveOne(kShmSmallBytes + 1, 100, 0);
  receiveOne(kShmSmallBytes, 101, -1);
  receiveOne(kShmSmallBytes + 1, 102, 2 * kBlockUnits);
}

// A message in a small block committed larger than the block is refused; one committed within
// the inline size travels in its line.
TEST_F(ShmPacking, ASmallBlockHoldsAtMostItsSize) {
  open(4, 2 * kBlock, /*packing=*/false);
  void* slot = nullptr;
  ASSERT_EQ(send_->acquireFor(kShmSmallBytes, &slot), Result::kSuccess);
  EXPECT_EQ(send_->commit(kShmSmallBytes + 1, 1), Result::kInternalError);
  memset(slot, 7, 8);
  ASSERT_EQ(send_->commit(8, 7), Result::kSuccess) << lastError();
  receiveOne(8, 7, -1);
}

// Payloads above kShmPackedMaxBytes take a slot each again (the ring all-reduce's 128 KiB pieces
// ran slower packed).
TEST_F(ShmPacking, LargeMessagesTakeASlotEach) {
  open(8, 256 * 1024);
  constexpr int64_t kSlotUnits = 256 * 1024 / kShmUnit;
  sendOne(kShmPackedMaxBytes, 1, 0);
  sendOne(kShmPackedMaxBytes + 1, 2, kSlotUnits);
  sendOne(kShmPackedMaxBytes, 3, 2 * kSlotUnits);
  sendOne(256 * 1024, 4, 3 * kSlotUnits);
  receiveOne(kShmPackedMaxBytes, 1, 0);
  receiveOne(kShmPackedMaxBytes + 1, 2, kSlotUnits);
  receiveOne(kShmPackedMaxBytes, 3, 2 * kSlotUnits);
  receiveOne(256 * 1024, 4, 3 * kSlotUnits);
}

// A message that would run past the ring's end starts at its beginning instead, whole.
TEST_F(ShmPacking, AMessageNeverRunsPastTheRingEnd) {
  open(4, 2 * kBlock);  // 4 + 2 slots of 2 blocks: a ring of 12 blocks
  for (int i = 0; i < 5; ++i) {
    sendOne(2 * kBlock, static_cast<uint8_t>(i + 1), 2 * i * kBlockUnits);
    receiveOne(2 * kBlock, static_cast<uint8_t>(i + 1), 2 * i * kBlockUnits);
  }
  sendOne(kBlock, 6, 10 * kBlockUnits);
  sendOne(2 * kBlock, 7, 0);  // block 11 is left out
  sendOne(2 * kBlock, 8, 2 * kBlockUnits);
  receiveOne(kBlock, 6, 10 * kBlockUnits);
  receiveOne(2 * kBlock, 7, 0);
  receiveOne(2 * kBlock, 8, 2 * kBlockUnits);
}

// At most the FIFO depth of messages that take room are in flight, as when each took a slot;
// one that travels in its line or its line's small block still goes.
TEST_F(ShmPacking, AtMostTheFifoDepthOfMessagesInFlight) {
  open(4, 2 * kBlock);
  for (int i = 0; i < 4; ++i) sendOne(kBlock, static_cast<uint8_t>(i + 1), i * kBlockUnits);
  void* slot = nullptr;
  EXPECT_EQ(send_->acquireFor(kBlock, &slot), Result::kInProgress) << "a fifth of four";
  EXPECT_EQ(send_->acquireFor(kShmSmallBytes + 1, &slot), Result::kInProgress) << "a short one takes room too";
  sendOne(8, 5, -1);               // in its line
  sendOne(kShmSmallBytes, 7, -1);  // in its line's small block
  receiveOne(kBlock, 1, 0);
  sendOne(kBlock, 6, 4 * kBlockUnits);
  for (int i = 1; i < 4; ++i) receiveOne(kBlock, static_cast<uint8_t>(i + 1), i * kBlockUnits);
  receiveOne(8, 5, -1);
  receiveOne(kShmSmallBytes, 7, -1);
  receiveOne(kBlock, 6, 4 * kBlockUnits);
}

// The ring schedules need the FIFO depth of messages of up to a slot in flight whatever came
// before (algorithms/ring_pass.h): after a packed message that leaves the position in the middle
// of a slot, and with a short message skipping to the next slot among them, 8 still fit.
TEST_F(ShmPacking, TheFifoDepthOfFullSlotsAlwaysFits) {
  constexpr size_t kSlot = 128 * 1024;
  open(8, kSlot);
  sendOne(20 * 1024, 1, 0);
  receiveOne(20 * 1024, 1, 0);
  std::vector<void*> slots(8);
  for (int i = 0; i < 8; ++i) ASSERT_EQ(send_->acquire(&slots[i]), Result::kSuccess) << "full slot " << i;
  for (int i = 0; i < 8; ++i) {
    memset(slots[i], 10 + i, kSlot);
    ASSERT_EQ(send_->commit(kSlot, 10 + i), Result::kSuccess);
  }
  for (int i = 0; i < 8; ++i) receiveOne(kSlot, static_cast<uint8_t>(10 + i), -1);
  sendOne(20 * 1024, 2, -1);
  sendOne(kShmSmallBytes + 100, 3, -1);
  for (int i = 0; i < 6; ++i) ASSERT_EQ(send_->acquire(&slots[i]), Result::kSuccess) << "full slot " << i;
  for (int i = 0; i < 6; ++i) {
    memset(slots[i], 20 + i, kSlot);
    ASSERT_EQ(send_->commit(kSlot, 20 + i), Result::kSuccess);
  }
  receiveOne(20 * 1024, 2, -1);
  receiveOne(kShmSmallBytes + 100, 3, -1);
  for (int i = 0; i < 6; ++i) receiveOne(kSlot, static_cast<uint8_t>(20 + i), -1);
}

// A message larger than a slot is refused at once rather than left waiting for room.
TEST_F(ShmPacking, AMessageLargerThanASlotIsRefused) {
  open(8, 64 * 1024);
  void* slot = nullptr;
  EXPECT_EQ(send_->acquireFor(64 * 1024 + 1, &slot), Result::kInternalError);
}

// Lanes pack only where all of a host's rings cycle within half its last-level cache.
TEST(ShmPackLanes, OnlyWhereEveryRingFitsHalfTheCache) {
  constexpr size_t kMiB = size_t{1} << 20;
  EXPECT_TRUE(shmPackLanes(32 * kMiB, 2, 4 * kMiB));    // 2 lanes of 4 MiB in 16 MiB
  EXPECT_FALSE(shmPackLanes(32 * kMiB, 3, 4 * kMiB));   // 6 lanes
  EXPECT_FALSE(shmPackLanes(32 * kMiB, 8, 4 * kMiB));   // 56 lanes
  EXPECT_TRUE(shmPackLanes(32 * kMiB, 8, 256 * 1024));  // 56 x 256 KiB = 14 MiB
  EXPECT_TRUE(shmPackLanes(8 * kMiB, 1, 4 * kMiB));     // a lone rank: no lane, nothing to lose
  EXPECT_GT(lastLevelCacheBytes(), 0u);
}

// A packed message committed larger than acquireFor() was asked for would overwrite the next
// message's units: it is refused, as transport.h says.
TEST_F(ShmPacking, CommittingMoreThanAcquiredIsAnError) {
  open(8, 64 * 1024);
  void* slot = nullptr;
  ASSERT_EQ(send_->acquireFor(kBlock + 1, &slot), Result::kSuccess);
  EXPECT_EQ(send_->commit(kBlock + kShmUnit + 1, 1), Result::kInternalError);
}

}  // namespace
}  // namespace mixccl
