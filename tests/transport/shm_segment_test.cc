// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Lanes opened only to look (Transport::connectRecvToLook): a shm segment created without its
// pages reserved costs its header, lines and small blocks of /dev/shm (40 KiB), reserved, so a
// small message never meets a missing page; not depth x slotBytes; reservePages() reserves
// the rest, so a lane a step then uses cannot run out of /dev/shm in the middle of a collective.

#include "transports/shm/shm_segment.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <string>

namespace mixccl {
namespace {

// Bytes of /dev/shm the object `name` holds (allocated blocks, not its size).
size_t allocatedBytes(const std::string& name) {
  const int fd = shm_open(name.c_str(), O_RDONLY, 0);
  EXPECT_GE(fd, 0) << name;
  struct stat st {};
  EXPECT_EQ(fstat(fd, &st), 0);
  close(fd);
  return static_cast<size_t>(st.st_blocks) * 512;
}

std::string freshName() {
  std::random_device rd;
  return shmLaneName((uint64_t{rd()} << 32) | rd(), (uint64_t{rd()} << 32) | rd(), 1, 0, 0);
}

constexpr uint32_t kDepth = 8;
constexpr size_t kSlot = 512 * 1024;

TEST(ShmSegment, UnreservedLaneHoldsAPageOrTwoUntilReserved) {
  const std::string name = freshName();
  ShmMapping map;
  ASSERT_EQ(ShmMapping::create(name, kDepth, kSlot, 1, /*reserve=*/false, &map), Result::kSuccess);
  const size_t total = shmTotalBytes(kDepth, kSlot);
  EXPECT_LE(allocatedBytes(name), size_t{64} << 10) << "of " << total;
  EXPECT_GE(allocatedBytes(name), shmSlotsOffset(kDepth)) << "the lines and small blocks are reserved";
  EXPECT_TRUE(map.ready());  // a sender may attach at once
  ASSERT_EQ(map.reservePages(), Result::kSuccess);
  EXPECT_GE(allocatedBytes(name), total);
  EXPECT_EQ(map.reservePages(), Result::kSuccess);  // idempotent
  shm_unlink(name.c_str());
}

TEST(ShmSegment, ReservedLaneHoldsItsWholeSize) {
  const std::string name = freshName();
  ShmMapping map;
  ASSERT_EQ(ShmMapping::create(name, kDepth, kSlot, 1, /*reserve=*/true, &map), Result::kSuccess);
  EXPECT_GE(allocatedBytes(name), shmTotalBytes(kDepth, kSlot));
  EXPECT_EQ(map.reservePages(), Result::kSuccess);  // nothing left to do
  shm_unlink(name.c_str());
}

// The slot ring is mapped twice in a row, in the receiver's mapping and in the sender's: bytes
// written past the last slot land in the first slot, so a device command can cover messages that
// wrap around the ring as one range (src/core/step_work.h).
TEST(ShmSegment, TheSlotRingContinuesPastItsLastSlot) {
  const std::string name = freshName();
  ShmMapping recv, send;
  ASSERT_EQ(ShmMapping::create(name, kDepth, kSlot, 1, /*reserve=*/true, &recv), Result::kSuccess);
  ASSERT_EQ(ShmMapping::open(name, shmTotalBytes(kDepth, kSlot), shmSlotsOffset(kDepth), &send), Result::kSuccess);
  for (ShmMapping* m : {&recv, &send}) {
    uint8_t* last = m->slot(kDepth, kSlot, kDepth - 1);
    uint8_t* first = m->slot(kDepth, kSlot, 0);
    ASSERT_NE(m->ringAlias(first), nullptr);
    EXPECT_EQ(m->ringAlias(first), last + kSlot);
    EXPECT_EQ(m->ringAlias(last), last + kDepth * kSlot);
    EXPECT_EQ(m->ringAlias(m->lines()), nullptr);  // only slots have an alias
  }
  // Written by the sender across the wrap, read by the receiver where it belongs.
  uint8_t* across = send.slot(kDepth, kSlot, kDepth - 1) + kSlot - 2;
  std::memcpy(across, "wrap", 4);
  EXPECT_EQ(std::memcmp(recv.slot(kDepth, kSlot, kDepth - 1) + kSlot - 2, "wr", 2), 0);
  EXPECT_EQ(std::memcmp(recv.slot(kDepth, kSlot, 0), "ap", 2), 0);
  // Without a ring offset the sender maps the segment once.
  ShmMapping once;
  ASSERT_EQ(ShmMapping::open(name, shmTotalBytes(kDepth, kSlot), 0, &once), Result::kSuccess);
  EXPECT_EQ(once.ringAlias(once.slot(kDepth, kSlot, 0)), nullptr);
  shm_unlink(name.c_str());
}

// tmpfs grants a reservation as long as /dev/shm has room, and /dev/shm is often as large as RAM:
// lanes that together exceed the memory would be granted and the OOM killer would pick a process.
TEST(ShmSegment, AReservationMustLeaveTheHostATenthOfItsMemoryAndAtLeastOneGiB) {
  constexpr uint64_t kGiB = uint64_t{1} << 30;
  EXPECT_TRUE(shmReservationFits(4 << 20, 20 * kGiB, 24 * kGiB));
  EXPECT_TRUE(shmReservationFits(kGiB, 5 * kGiB, 24 * kGiB));         // 4 GiB left, the tenth is 2.4
  EXPECT_FALSE(shmReservationFits(3 * kGiB, 5 * kGiB, 24 * kGiB));    // 2 GiB left: under a tenth
  EXPECT_FALSE(shmReservationFits(4 << 20, kGiB, 4 * kGiB));          // under 1 GiB left
  EXPECT_FALSE(shmReservationFits(30 * kGiB, 20 * kGiB, 24 * kGiB));  // more than is available
  EXPECT_TRUE(shmReservationFits(0, 2 * kGiB, 8 * kGiB));
}

// A lane larger than the host's free memory fails set-up with a message naming the knobs and
// leaves nothing behind (here the free-memory check or, where /dev/shm is smaller, tmpfs refuses).
TEST(ShmSegment, ALaneLargerThanTheFreeMemoryFailsCleanly) {
  const std::string name = freshName();
  ShmMapping map;
  // 64 slots of 1 GiB: more than any machine that runs this suite has free.
  ASSERT_EQ(ShmMapping::create(name, 64, size_t{1} << 30, 1, /*reserve=*/true, &map), Result::kSystemError);
  EXPECT_NE(lastError().find("MIXCCL_FIFO_DEPTH"), std::string::npos) << lastError();
  EXPECT_FALSE(map.valid());
  EXPECT_LT(shm_open(name.c_str(), O_RDONLY, 0), 0);  // the name was removed
}

}  // namespace
}  // namespace mixccl
