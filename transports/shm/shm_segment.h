// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Layout and lifetime of one shared-memory lane (a POSIX shm segment, one per one-way lane).
//
//   offset 0            ShmHeader        written once by the receiver; `magic` is stored last
//                                        (release), so a sender that reads the magic (acquire)
//                                        sees every other header field.
//   kTailOffset         tail  (u64)      messages released by the receiver; only the receiver writes
//   kLineOffset         line[lines]      one 64-byte ShmSlotLine per message; only the sender writes
//   smallOffset(depth)  small[lines]     one kShmSmallBytes block per line; only the sender writes
//   slotsOffset(depth)  slots            depth x slotBytes, each slot page aligned
//
// Each side maps the slots a second time right behind the segment (ringAlias), where the page
// size allows, so messages in the last and the first slots are also one range of addresses.
//
// Message i lives in line i % lines, lines = shmLineCount(depth) >= depth. A payload of at most
// kShmInlineBytes travels inside its line and takes no slot; one of at most kShmSmallBytes goes
// into its line's small block (its line's unit says kShmSmallUnit) and takes no slot either, so
// messages of a few cache lines queue `lines` deep, as inline ones do. The slot ring (depth x stride bytes)
// is counted in units of a page (kShmUnit): a payload of kShmPackedBytes..kShmPackedMaxBytes, on a
// host whose lanes pack (shmPackLanes), takes the pages right behind the previous message's; any
// other takes the next whole slot, as all did before version 6; either goes to the ring's start rather than run past
// its end, and its line names its first unit (the placement is the sender's alone: the receiver reads where the line
// says). Large messages are packed so that a lane cycles through the whole ring whatever their size: the sender's
// stores then find lines that left the receiver's private cache since it read them, where a slot per message made a run
// of 64 KiB messages reuse 512 KiB of a 4 MiB ring, still held by the receiver's core, and each store first had to take
// its line back from that core (16-128 KiB messages took up to 2x as long; docs/ENGINE.md, "Slot ring"). Small ones
// keep their slot: cycling through the ring costs them a TLB miss and a cache miss on each side per message, which
// their few lines do not pay back (one-shot 4 KiB all-reduces on 8 ranks, a page to each of 7 peers per call, took 1.5x
// as long packed). The sender writes the payload, then the line's size, unit, stamp (and the copy of a small payload),
// and stores line.seq = i + 1 last with release; the receiver waits for seq == i + 1 with acquire before it reads any
// of them. So a small message is one cache line to fetch (data and flag share it, as NCCL's LL protocols do), a
// receiver polls a line only its sender writes, and small messages (closing tokens, probes, 8-byte payloads) queue
// `lines` deep where large ones queue `depth` deep: a root that runs ahead of its receivers, or leaves their closing
// tokens unread (src/core/owed_tokens.h), stalls 8 times less often. The tail sits on its own 128-byte block (two cache
// lines, against adjacent-line prefetch) so producer and consumer never write the same line; the receiver's release
// store of tail hands lines and the units of their messages back (the receiver releases in order, so the sender knows
// which units message tail - 1 and those before it held), and the sender's acquire load of tail makes reuse safe. Ring
// invariants: tail <= sent <= tail + lines, and the units in use (one span from the oldest unreleased message's first
// unit on) fit in the ring.

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/result.h"

namespace mixccl {

constexpr uint64_t kShmMagic = 0x314e414c4d48534dull;  // "MSHMLAN1" little-endian
// 2: per-slot stamps; 3: pidSpace; 4: slot lines; 5: more lines than slots; 6: messages packed by units;
// 7: a small block per line
constexpr uint32_t kShmVersion = 7;
// The oldest lane version whose header holds the owners (receiverPid, srcRank, senderPid) and the
// pid space where this one does: leftovers of it are judged and reclaimed like today's
// (shm_stale.h), so a crash of an older build leaves nothing behind after an upgrade.
constexpr uint32_t kShmOwnersSinceVersion = 3;

struct ShmHeader {
  std::atomic<uint64_t> magic;     // kShmMagic once the receiver finished initialising
  uint32_t version;                // kShmVersion
  uint32_t slotCount;              // fifo depth
  uint64_t slotBytes;              // payload bytes per slot
  uint64_t totalBytes;             // size of the whole segment
  int32_t receiverPid;             // creator
  int32_t srcRank;                 // sender rank, for messages
  std::atomic<int32_t> senderPid;  // written by the sender when it maps
  std::atomic<uint32_t> mapped;    // 1 once the sender mapped (and unlinked) the segment
  uint64_t pidSpace;               // the receiver's localPidSpace() (common/pid_space.h)
  uint32_t ringSlots;              // slots of the ring: slotCount, or + kShmPackSpareSlots on a packing lane
  uint32_t reserved;               // 0
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shm counters must be lock-free across processes");
static_assert(sizeof(ShmHeader) <= 128, "header must fit before the head counter");

constexpr size_t kShmLine = 128;
constexpr size_t kTailOffset = kShmLine;
constexpr size_t kLineOffset = 2 * kShmLine;
constexpr size_t kShmPage = 4096;

inline size_t alignUp(size_t v, size_t a) { return (v + a - 1) / a * a; }
// What the sender publishes with each message (see the layout above). 64 bytes, one cache line.
struct alignas(64) ShmSlotLine {
  std::atomic<uint64_t> seq;  // i + 1 once message i is complete; stored last
  uint64_t stamp;             // opaque to the transport (SendConnection::commit)
  uint32_t bytes;             // at most a slot's size, which the communicator caps at 1 GiB
  uint32_t unit;              // the payload's first unit in the slot ring, when it is larger than inlineData
  uint8_t inlineData[40];     // 8-byte aligned: a reduction reads its operand from here
};
static_assert(sizeof(ShmSlotLine) == 64, "a slot line is one cache line");
constexpr size_t kShmInlineBytes = sizeof(ShmSlotLine::inlineData);
// Payloads of kShmInlineBytes + 1 .. kShmSmallBytes go into their line's small block, not the slot
// ring: they need no slot, so they queue as deep as the lines, where a slot each let a lane hold
// only the FIFO depth (8) of them. A root that only sends (a broadcast's 64-256 B pieces at 8 or 16
// ranks on 2 cores) then runs up to 64 calls ahead before it waits for its slowest receiver
// instead of 8, and each rank that gets the CPU does that much more before it yields
// (docs/ENGINE.md, "Small blocks"). 512 bytes (8 cache lines) per line make 32 KiB per lane.
constexpr size_t kShmSmallBytes = 512;
// ShmSlotLine::unit of a message in its line's small block (ring units stay below 2^28).
constexpr uint32_t kShmSmallUnit = 0xfffffffeu;

// The position of entry `seq` in a ring of `size` entries (message lines, or slots): a mask for
// the power-of-two sizes of every default, since a 64-bit division costs tens of cycles and a
// small message takes several of them on each side.
inline uint64_t shmRingIndex(uint64_t seq, uint32_t size) {
  return (size & (size - 1)) == 0 ? seq & (size - 1) : seq % size;
}
// Lines of a lane with `depth` slots: a function of the depth alone, so both ends agree (the
// sender checks the depth in the header). 64 lines are 4 KiB.
constexpr uint32_t kShmMinLines = 64;
inline uint32_t shmLineCount(uint32_t depth) { return depth > kShmMinLines ? depth : kShmMinLines; }
inline size_t shmSmallOffset(uint32_t depth) { return kLineOffset + shmLineCount(depth) * sizeof(ShmSlotLine); }
inline size_t shmSlotsOffset(uint32_t depth) {
  return alignUp(shmSmallOffset(depth) + shmLineCount(depth) * kShmSmallBytes, kShmPage);
}
inline size_t shmSlotStride(size_t slotBytes) { return alignUp(slotBytes == 0 ? 1 : slotBytes, kShmPage); }
// A packing lane (shmPackLanes) has this many slots more than its FIFO depth: a message never runs
// past the ring's end and short ones start at a slot, so packed messages leave gaps, less than a
// slot at the end and less than a slot before the first short one of a run; with two spare slots
// any FIFO depth of messages still fits, which the ring schedules' freedom from deadlock needs
// (algorithms/ring_pass.h: a rank may have sent the FIFO depth of messages ahead).
constexpr uint32_t kShmPackSpareSlots = 2;
inline size_t shmTotalBytes(uint32_t depth, size_t slotBytes, uint32_t ringSlots) {
  return shmSlotsOffset(depth) + ringSlots * shmSlotStride(slotBytes);
}
inline size_t shmTotalBytes(uint32_t depth, size_t slotBytes) { return shmTotalBytes(depth, slotBytes, depth); }
// Units of the slot ring: what ShmSlotLine::unit counts in. At most 1024 slots of 1 GiB
// (Communicator::setUpLocal) make 2^28 of them.
constexpr size_t kShmUnit = kShmPage;
// Payloads of these sizes are packed; others take a slot each (see the layout above). Larger
// ones, which the ring all-reduce sends as 128 KiB pieces, ran 8-17 % slower packed at 1-16 MiB
// (2 ranks, 4-6 rounds, noisy): cycling 128 KiB messages through the whole ring costs each side a
// TLB miss per page, which 8 slots reused do not.
constexpr size_t kShmPackedBytes = 16 * 1024;
constexpr size_t kShmPackedMaxBytes = 64 * 1024;
// Whether a host's lanes pack their messages: when every lane (one per ordered pair of its
// `localRanks` ranks) can cycle through its whole ring of `ringBytes` within half the last-level
// cache of `cacheBytes`. Beyond that the cycling evicts what the ranks reuse: 8 ranks with 4 MiB
// rings made 16-64 KiB all-reduces 1.6x slower packed, and cycling through less than the ring
// wastes the rest at each early return to its start (a message never wraps), which stalled
// lanes carrying messages of mixed sizes.
inline bool shmPackLanes(size_t cacheBytes, uint32_t localRanks, size_t ringBytes) {
  const uint64_t lanes = localRanks < 2 ? 1 : uint64_t{localRanks} * (localRanks - 1);
  return cacheBytes / 2 / lanes >= ringBytes;
}
// The size of one instance of this machine's last-level cache (sysfs, else the C library), or
// 8 MiB where neither says.
size_t lastLevelCacheBytes();
inline uint64_t shmRingUnits(uint32_t ringSlots, size_t slotBytes) {
  return ringSlots * shmSlotStride(slotBytes) / kShmUnit;
}

// "/mixccl-<commHash>-<nonce>-<src>-<dst>-<lane>", where nonce is the receiver's per-run nonce
// (its shm blob): both ends derive it, so no name is exchanged per lane.
std::string shmLaneName(uint64_t commHash, uint64_t receiverNonce, int src, int dst, int lane);

// A mapping of one lane segment with typed accessors. Move-only; unmaps on destruction.
// Whether reserving `bytes` more of /dev/shm leaves the host enough memory: at least a tenth of
// MemTotal, and at least 1 GiB, still available after it. Checked before every reservation
// (ShmMapping::create, reservePages), which otherwise fails with ENOMEM and a message naming the
// knobs. The margin also absorbs the other local ranks reserving their lanes at the same moment.
bool shmReservationFits(uint64_t bytes, uint64_t memAvailable, uint64_t memTotal);

class ShmMapping {
 public:
  ShmMapping() = default;
  ~ShmMapping();
  ShmMapping(ShmMapping&& o) noexcept;
  ShmMapping& operator=(ShmMapping&& o) noexcept;
  ShmMapping(const ShmMapping&) = delete;
  ShmMapping& operator=(const ShmMapping&) = delete;

  // Receiver: creates, sizes (with reserved pages, so a full /dev/shm is an error here and not a
  // SIGBUS later) and initialises the segment. Fails if the name exists, unless it is a stale
  // leftover (shm_stale.h), which is removed first. Without `reserve`, the pages stay unreserved
  // (only the header, the lines and their small blocks are reserved) until reservePages(): a lane opened only to look
  // at what a peer sent costs a page or two, not depth x slotBytes. Until then a sender that writes its slots while
  // /dev/shm is full gets SIGBUS; such a lane only carries a mismatched call's message (src/core/stream_checks.cc,
  // openAllLanes), until a step uses it and reserves it. `pack`: a packing lane, whose ring has kShmPackSpareSlots more
  // slots (ShmHeader::ringSlots).
  static Result create(const std::string& name, uint32_t depth, size_t slotBytes, int srcRank, bool reserve,
                       ShmMapping* out, bool pack = false);
  // Reserves the pages of a segment created without `reserve`; a no-op once that succeeded or
  // otherwise. After a failure (ENOSPC) the next call tries again.
  Result reservePages();
  // Sender: opens an existing segment. kInProgress while it does not exist yet or is still being
  // sized by the receiver; the header may still be uninitialised (check ready()). `ringOffset`:
  // where its slot ring starts (shmSlotsOffset), to map it twice (ringAlias); 0 for once.
  // A segment of minBytes..maxBytes (the receiver's choice: ShmHeader::ringSlots) is mapped whole.
  static Result open(const std::string& name, size_t minBytes, size_t maxBytes, size_t ringOffset, ShmMapping* out);
  static Result open(const std::string& name, size_t expectedBytes, size_t ringOffset, ShmMapping* out) {
    return open(name, expectedBytes, expectedBytes, ringOffset, out);
  }
  size_t bytes() const { return bytes_; }

  bool valid() const { return base_ != nullptr; }
  // Maps every page of the slot ring into this process now, best effort, when the segment's
  // pages are reserved (prefaulting would allocate the others'). For lanes that pack their
  // messages: they cycle through the whole ring, so each of its pages would otherwise fault in
  // on first use on each side, during the first thousand calls of 4 KiB messages.
  void prefault();
  bool ready() const { return header()->magic.load(std::memory_order_acquire) == kShmMagic; }
  ShmHeader* header() const { return static_cast<ShmHeader*>(base_); }
  std::atomic<uint64_t>* tail() const { return reinterpret_cast<std::atomic<uint64_t>*>(at(kTailOffset)); }
  ShmSlotLine* lines() const { return reinterpret_cast<ShmSlotLine*>(at(kLineOffset)); }
  uint8_t* slot(uint32_t depth, size_t slotBytes, uint64_t index) const {
    return at(shmSlotsOffset(depth) + index * shmSlotStride(slotBytes));
  }
  // The small block of line `line` (kShmSmallBytes, 64-byte aligned).
  uint8_t* smallBlock(uint32_t depth, uint64_t line) const { return at(shmSmallOffset(depth) + line * kShmSmallBytes); }
  // Unit `unit` of the slot ring (ShmSlotLine::unit).
  uint8_t* ringUnit(uint32_t depth, uint64_t unit) const { return at(shmSlotsOffset(depth) + unit * kShmUnit); }
  // The slot ring is mapped twice in a row (where the system allows): for an address in the
  // first mapping of the ring, the same byte in the second; nullptr otherwise. A range that runs
  // past the last slot continues there with the first slot's bytes (SendConnection::ringAlias).
  uint8_t* ringAlias(const void* p) const;

 private:
  static Result mapSegment(int fd, size_t total, size_t ringOffset, void** base, size_t* ring);

  uint8_t* at(size_t offset) const { return static_cast<uint8_t*>(base_) + offset; }
  void* base_ = nullptr;
  size_t bytes_ = 0;       // the segment's size (its file); the mapping has ring_ more
  size_t ring_ = 0;        // bytes of the slot ring mapped a second time behind the segment
  int unreservedFd_ = -1;  // kept open until reservePages() (create() without `reserve`)
  size_t ringOffset_ = 0;  // where the slot ring starts (shmSlotsOffset); 0: unknown
  bool reserved_ = false;  // whether every page of the segment is allocated
  bool prefaulted_ = false;
};

}  // namespace mixccl
