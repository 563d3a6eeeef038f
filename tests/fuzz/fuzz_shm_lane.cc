// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
//
// Fuzz target: the shared-memory transport's ends of a lane (transports/shm/shm_transport.cc)
// facing a peer that writes anything into the shared segment: a peer's shared memory is
// untrusted input just like a socket. Two real ShmTransports (ranks 0 and 1 of a job private to
// this process) are set up once; each input opens a fresh receiving lane (0 -> 1), whose sender
// the target plays, and a fresh sending lane (0 -> 1, other lane), whose receiver it plays, and
// runs a program of byte-coded operations against them (L = shmLineCount(depth) lines):
//   0 i qq*8          rogue sender: store line[i % L].seq = qq
//   1 i b*4 k*4 s*8   rogue sender: line[i % L] = {bytes b, page k, stamp s}
//   2 i v             rogue sender: fill ring unit i % U, the inline bytes and the small block of
//                     line i % L with v
//   3                 receiver: peek      4  receiver: release
//   5 tt*8            rogue receiver: store tail = tt
//   6 n v             sender: acquire, fill the slot with v, commit n % (slot+1) bytes (stamp n)
//   7 f vv*4          rogue receiver: overwrite header field f % 3 (version, slotCount, slotBytes)
//   8 n v             sender: acquireFor(n % 513), fill n bytes with v, commit them (stamp n): inline
//                     up to 40 bytes, in the line's small block above
//
// Invariants, against a model of both ends: the receiver hands out message i only when the
// rogue line i % L says seq == i + 1, never one longer than the slot and never from a unit of the
// slot ring the lane does not have (U units; either is kRemoteError, never a read past the
// segment), with the line's stamp and a pointer to the line's inline bytes (up to 40 bytes), to its
// small block (the line names kShmSmallUnit) or to the unit the line names;
// release publishes the tail and needs a message seen first; the sender refuses a segment whose
// header disagrees, never takes a line or a unit the tail does not free, and publishes the line
// (inline copy, size, unit, stamp, seq).

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "tests/fuzz/fuzz_check.h"
#include "transports/shm/shm_segment.h"
#include "transports/shm/shm_stale.h"
#include "transports/transport.h"

using namespace mixccl;

namespace {

constexpr size_t kSlot = 1000;
constexpr uint32_t kDepth = 3;
// Every message that takes room takes one unit of the slot ring here (a slot is at most a unit),
// so the model below counts units as messages; the packing of larger messages and the ring's
// end are tested in tests/transport/shm_packing_test.cc. The sending lane's rogue receiver
// creates a ring of kDepth slots (no packing); the real receiver chooses its own
// (ShmHeader::ringSlots: 2 ranks of a host pack, with spare slots).
static_assert(kSlot <= kShmUnit, "one unit per message");
static_assert(kSlot > kShmSmallBytes, "acquire() takes a unit of the ring, a message of up to 512 bytes a block");
const uint64_t kRingUnits = shmRingUnits(kDepth, kSlot);
const uint32_t kLines = shmLineCount(kDepth);
constexpr uint32_t kNoSlot = UINT32_MAX;

struct Job {
  uint64_t commHash = 0;
  uint64_t nonce1 = 0;  // rank 1's (shm_stale.h): it names the lanes to rank 1
  std::unique_ptr<Transport> rank0, rank1;
};
Job* job = nullptr;

bool setUp() {
  unsetenv("NCCL_SHM_DISABLE");
  auto* j = new Job();
  j->commHash = 0x5a5a000000000000ull ^ (static_cast<uint64_t>(getpid()) << 20) ^ static_cast<uint64_t>(time(nullptr));
  std::vector<TransportPeer> peers(2);
  for (int r = 0; r < 2; ++r) {
    TransportContext ctx;
    ctx.rank = r;
    ctx.nranks = 2;
    ctx.commHash = j->commHash;
    ctx.slotBytes = kSlot;
    ctx.fifoDepth = kDepth;
    (r == 0 ? j->rank0 : j->rank1) = makeShmTransport(ctx);
    if ((r == 0 ? j->rank0 : j->rank1)->listen(&peers[r].blob) != Result::kSuccess) return false;
    peers[r].rank = r;
    peers[r].hostHash = 1;
    peers[r].pid = getpid();
    peers[r].host = "fuzz";
  }
  if (!decodeShmBlob(peers[1].blob, &j->nonce1)) return false;
  if (j->rank0->setPeers(peers) != Result::kSuccess || j->rank1->setPeers(peers) != Result::kSuccess) return false;
  if (j->rank1->canConnect(0) == 0) return false;
  job = j;
  return true;
}

uint64_t u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) { return setUp() ? 0 : -1; }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (job == nullptr) return 0;  // no usable /dev/shm here (the replay reports it as skipped)
  // Receiving lane: the real receiver creates the segment, the rogue sender maps it.
  std::unique_ptr<RecvConnection> recv;
  FUZZ_CHECK(job->rank1->connectRecv(0, kLaneColl, &recv) == Result::kSuccess);
  ShmMapping rs;
  FUZZ_CHECK(ShmMapping::open(shmLaneName(job->commHash, job->nonce1, 0, 1, kLaneColl), shmTotalBytes(kDepth, kSlot),
                              shmTotalBytes(kDepth, kSlot, kDepth + kShmPackSpareSlots), 0, &rs) == Result::kSuccess);
  const uint64_t recvUnits = shmRingUnits(rs.header()->ringSlots, kSlot);
  FUZZ_CHECK(rs.bytes() == shmTotalBytes(kDepth, kSlot, rs.header()->ringSlots));
  // Sending lane: the rogue receiver creates the segment, the real sender opens it on acquire.
  ShmMapping rr;
  FUZZ_CHECK(ShmMapping::create(shmLaneName(job->commHash, job->nonce1, 0, 1, kLaneP2p), kDepth, kSlot, 0, true, &rr) ==
             Result::kSuccess);
  std::unique_ptr<SendConnection> send;
  FUZZ_CHECK(job->rank0->connectSend(1, kLaneP2p, &send) == Result::kSuccess);

  uint64_t rTail = 0, rArrived = 0;  // receiver model
  bool sReady = false;               // sender model (ShmSendConnection's counters)
  uint64_t sHead = 0, sSlotHead = 0, sCachedTail = 0, sSlotTail = 0;
  std::vector<uint64_t> sSlotsAfter(kLines, 0);
  auto readTail = [&] {
    const uint64_t t = rr.tail()->load(std::memory_order_acquire);
    if (t == sCachedTail) return;
    sSlotTail = sSlotsAfter[(t - 1) % kLines];
    sCachedTail = t;
  };
  // The sender's acquire: whether its header check and its credits let it take a line (and a
  // slot); false when the outcome was checked already (refused or in progress).
  auto acquired = [&](Result r, bool needsSlot) {
    if (!sReady) {
      const ShmHeader* h = rr.header();
      const bool agrees = h->version == kShmVersion && h->slotCount == kDepth && h->slotBytes == kSlot;
      if (!agrees) {
        FUZZ_CHECK(r == Result::kInvalidUsage);
        return false;
      }
      sReady = true;
      sHead = sSlotHead = sCachedTail = sSlotTail = 0;
      readTail();
      FUZZ_CHECK(rr.header()->mapped.load() == 1);
    }
    if (sHead - sCachedTail >= kLines) readTail();
    if (sHead - sCachedTail >= kLines) {
      FUZZ_CHECK(r == Result::kInProgress);
      return false;
    }
    if (needsSlot && sSlotHead - sSlotTail >= kDepth) readTail();
    if (needsSlot && sSlotHead - sSlotTail >= kDepth) {
      FUZZ_CHECK(r == Result::kInProgress);
      return false;
    }
    FUZZ_CHECK(r == Result::kSuccess);
    return true;
  };
  // The line the sender just published for `n` bytes of value v (in `slot`, or kNoSlot).
  auto published = [&](size_t n, uint8_t v, uint32_t slot) {
    const ShmSlotLine& line = rr.lines()[sHead % kLines];
    FUZZ_CHECK(line.bytes == n && line.stamp == n && line.unit == slot);
    if (n <= kShmInlineBytes) {  // a small message travels in the line
      for (size_t i = 0; i < n; ++i) FUZZ_CHECK(line.inlineData[i] == v);
    } else if (slot == kShmSmallUnit) {  // a few cache lines: in the line's small block
      const uint8_t* block = rr.smallBlock(kDepth, sHead % kLines);
      for (size_t i = 0; i < n; ++i) FUZZ_CHECK(block[i] == v);
    }
    if (slot != kNoSlot && slot != kShmSmallUnit) ++sSlotHead;
    sSlotsAfter[sHead % kLines] = sSlotHead;
    ++sHead;
    FUZZ_CHECK(line.seq.load(std::memory_order_acquire) == sHead);
  };
  size_t at = 0;
  auto need = [&](size_t n) { return at + n <= size; };
  while (at < size) {
    const uint8_t op = data[at++] % 9;
    switch (op) {
      case 0:
        if (!need(9)) return 0;
        rs.lines()[data[at] % kLines].seq.store(u64(data + at + 1), std::memory_order_release);
        at += 9;
        break;
      case 1: {
        if (!need(17)) return 0;
        ShmSlotLine& line = rs.lines()[data[at] % kLines];
        line.bytes = static_cast<uint32_t>(u64(data + at + 1));
        line.unit = static_cast<uint32_t>(u64(data + at + 5));
        line.stamp = u64(data + at + 9);
        at += 17;
        break;
      }
      case 2:
        if (!need(2)) return 0;
        memset(rs.ringUnit(kDepth, data[at] % recvUnits), data[at + 1], kSlot);
        memset(rs.lines()[data[at] % kLines].inlineData, data[at + 1], kShmInlineBytes);
        memset(rs.smallBlock(kDepth, data[at] % kLines), data[at + 1], kShmSmallBytes);
        at += 2;
        break;
      case 3: {
        const void* msg = nullptr;
        size_t bytes = 0;
        uint64_t stamp = 0;
        const Result r = recv->peek(&msg, &bytes, &stamp);
        ShmSlotLine& line = rs.lines()[rTail % kLines];
        if (line.seq.load(std::memory_order_acquire) != rTail + 1) {
          FUZZ_CHECK(r == Result::kInProgress);
          break;
        }
        rArrived = rTail + 1;
        const bool small = line.bytes > kShmInlineBytes && line.unit == kShmSmallUnit;
        if (line.bytes > kSlot || (small && line.bytes > kShmSmallBytes) ||
            (line.bytes > kShmInlineBytes && !small && line.unit >= recvUnits)) {
          FUZZ_CHECK(r == Result::kRemoteError);
          break;
        }
        FUZZ_CHECK(r == Result::kSuccess && bytes == line.bytes && stamp == line.stamp);
        uint8_t* where = bytes <= kShmInlineBytes ? line.inlineData
                         : small                  ? rs.smallBlock(kDepth, rTail % kLines)
                                                  : rs.ringUnit(kDepth, line.unit);
        FUZZ_CHECK(memcmp(msg, where, bytes) == 0);
        // Same memory, so a write through one view shows in the other: the pointer is that place.
        const uint8_t old = *static_cast<const volatile uint8_t*>(msg);
        *where = static_cast<uint8_t>(old + 1);
        FUZZ_CHECK(*static_cast<const volatile uint8_t*>(msg) == static_cast<uint8_t>(old + 1));
        *where = old;
        break;
      }
      case 4: {
        const Result r = recv->release();
        if (rTail == rArrived) {
          FUZZ_CHECK(r == Result::kInternalError);
          break;
        }
        FUZZ_CHECK(r == Result::kSuccess);
        ++rTail;
        FUZZ_CHECK(rs.tail()->load(std::memory_order_acquire) == rTail);
        break;
      }
      case 5:
        if (!need(8)) return 0;
        rr.tail()->store(u64(data + at), std::memory_order_release);
        at += 8;
        break;
      case 6: {
        if (!need(2)) return 0;
        const size_t n = data[at] % (kSlot + 1);
        const uint8_t v = data[at + 1];
        at += 2;
        void* slot = nullptr;
        if (!acquired(send->acquire(&slot), /*needsSlot=*/true)) break;
        memset(slot, v, kSlot);  // the whole slot is ours to write
        const uint32_t k = static_cast<uint32_t>(sSlotHead % kRingUnits);
        uint8_t* mine = rr.ringUnit(kDepth, k);
        FUZZ_CHECK(mine[0] == v && mine[kSlot - 1] == v);
        FUZZ_CHECK(send->commit(n, n) == Result::kSuccess);
        published(n, v, k);
        break;
      }
      case 8: {
        if (!need(2)) return 0;
        const size_t n = data[at] % (kShmSmallBytes + 1);
        const uint8_t v = data[at + 1];
        at += 2;
        void* slot = nullptr;
        if (!acquired(send->acquireFor(n, &slot), /*needsSlot=*/false)) break;
        memset(slot, v, n);
        FUZZ_CHECK(send->commit(n, n) == Result::kSuccess);
        published(n, v, n <= kShmInlineBytes ? kNoSlot : kShmSmallUnit);
        break;
      }
      case 7: {
        if (!need(5)) return 0;
        const uint32_t v =
            data[at + 1] | data[at + 2] << 8 | data[at + 3] << 16 | static_cast<uint32_t>(data[at + 4]) << 24;
        ShmHeader* h = rr.header();
        switch (data[at] % 3) {
          case 0:
            h->version = v;
            break;
          case 1:
            h->slotCount = v;
            break;
          default:
            h->slotBytes = v;
            break;
        }
        at += 5;
        break;
      }
    }
  }
  return 0;
}
