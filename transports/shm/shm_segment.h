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
//   slotsOffset(depth)  slots            depth x slotBytes, each slot page aligned
//
// Each side maps the slots a second time right behind the segment (ringAlias), where the page
// size allows, so messages in the last and the first slots are also one range of addresses.
//
// Message i lives in line i % lines, lines = shmLineCount(depth) >= depth. A payload of at most
// kShmInlineBytes travels inside its line and takes no slot; a larger one takes the next slot in
// slot order, and its line names it. The sender writes the payload, then the line's size, slot,
// stamp (and the copy of a small payload), and stores line.seq = i + 1 last with release; the
// receiver waits for seq == i + 1 with acquire before it reads any of them. So a small message is
// one cache line to fetch (data and flag share it, as NCCL's LL protocols do), a receiver polls a
// line only its sender writes, and small messages (closing tokens, probes, 8-byte payloads) queue
// `lines` deep where large ones queue `depth` deep: a root that runs ahead of its receivers, or
// leaves their closing tokens unread (src/core/owed_tokens.h), stalls 8 times less often.
// The tail sits on its own 128-byte block (two cache lines, against adjacent-line prefetch) so
// producer and consumer never write the same line; the receiver's release store of tail hands
// lines and the slots of their messages back (the receiver releases in order, so the sender
// knows which slots message tail - 1 and those before it held), and the sender's acquire load of
// tail makes reuse safe. Ring invariants: tail <= sent <= tail + lines, and slots in use <= depth.

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/result.h"

namespace mixccl {

constexpr uint64_t kShmMagic = 0x314e414c4d48534dull;  // "MSHMLAN1" little-endian
constexpr uint32_t kShmVersion = 5;  // 2: per-slot stamps; 3: pidSpace; 4: slot lines; 5: more lines than slots

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
  uint32_t slot;              // the slot holding the payload, when it is larger than inlineData
  uint8_t inlineData[40];     // 8-byte aligned: a reduction reads its operand from here
};
static_assert(sizeof(ShmSlotLine) == 64, "a slot line is one cache line");
constexpr size_t kShmInlineBytes = sizeof(ShmSlotLine::inlineData);

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
inline size_t shmSlotsOffset(uint32_t depth) {
  return alignUp(kLineOffset + shmLineCount(depth) * sizeof(ShmSlotLine), kShmPage);
}
inline size_t shmSlotStride(size_t slotBytes) { return alignUp(slotBytes == 0 ? 1 : slotBytes, kShmPage); }
inline size_t shmTotalBytes(uint32_t depth, size_t slotBytes) {
  return shmSlotsOffset(depth) + depth * shmSlotStride(slotBytes);
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
  // (only the header and lines are touched) until reservePages(): a lane opened only to look at
  // what a peer sent costs a page or two, not depth x slotBytes. Until then a sender that writes
  // its slots while /dev/shm is full gets SIGBUS; such a lane only carries a mismatched call's
  // message (src/core/stream_checks.cc, openAllLanes), until a step uses it and reserves it.
  static Result create(const std::string& name, uint32_t depth, size_t slotBytes, int srcRank, bool reserve,
                       ShmMapping* out);
  // Reserves the pages of a segment created without `reserve`; a no-op otherwise.
  Result reservePages();
  // Sender: opens an existing segment. kInProgress while it does not exist yet or is still being
  // sized by the receiver; the header may still be uninitialised (check ready()). `ringOffset`:
  // where its slot ring starts (shmSlotsOffset), to map it twice (ringAlias); 0 for once.
  static Result open(const std::string& name, size_t expectedBytes, size_t ringOffset, ShmMapping* out);

  bool valid() const { return base_ != nullptr; }
  bool ready() const { return header()->magic.load(std::memory_order_acquire) == kShmMagic; }
  ShmHeader* header() const { return static_cast<ShmHeader*>(base_); }
  std::atomic<uint64_t>* tail() const { return reinterpret_cast<std::atomic<uint64_t>*>(at(kTailOffset)); }
  ShmSlotLine* lines() const { return reinterpret_cast<ShmSlotLine*>(at(kLineOffset)); }
  uint8_t* slot(uint32_t depth, size_t slotBytes, uint64_t index) const {
    return at(shmSlotsOffset(depth) + index * shmSlotStride(slotBytes));
  }
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
};

}  // namespace mixccl
