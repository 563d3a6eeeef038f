// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Shared-memory transport: ranks on one host exchange messages through a ring of slots in a
// POSIX shm segment per one-way lane (layout and memory ordering: shm_segment.h).
//
// Set-up needs no exchange beyond the peer table: the segment name follows from (commHash, the
// receiver's per-run nonce from its blob, src, dst, lane; shm_stale.h). The receiver creates and
// initialises the segment inside connectRecv(); the sender opens it from acquire() once it exists
// (kInProgress until then), maps it, marks it mapped and unlinks the name at once, so after set-up
// /dev/shm holds nothing that a crash could leave behind. Until then both destructors unlink the
// name too (ENOENT ignored), covering a peer that died before the other end mapped.
//
// The data path makes no system calls: acquire/commit/peek/release are loads and stores on the
// shared counters. A waiting side (ring full, ring empty, segment not there yet) checks every
// ~100 ms that the peer process still exists, since shared memory has no EOF: with kill() on its
// pid (PeerWatch) when it shares our pid namespace, else by the lock on its rank page
// (shm_rank_page.h): a pid from another namespace names nothing here, or another process.
//
// What a killed rank leaves behind anyway (a name it created that no peer mapped yet) carries its
// nonce, so it never collides with a later job, and the next shm transport on this host removes it
// once its owners are provably gone (sweepStaleShm at listen()).

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/log.h"
#include "common/pid_space.h"
#include "transports/peer_watch.h"
#include "transports/shm/shm_rank_page.h"
#include "transports/shm/shm_segment.h"
#include "transports/shm/shm_stale.h"
#include "transports/transport.h"

namespace mixccl {
namespace {

// What both ends know about the other side of a lane, for messages and liveness checks.
struct ShmPeerInfo {
  int rank = -1;
  int32_t pid = 0;             // for kill(): 0 when unknown, or when the peer runs in another pid namespace
  int32_t reportedPid = 0;     // its pid in its own namespace, for messages
  bool otherPidSpace = false;  // its pid namespace differs from ours (TransportPeer::otherPidSpace)
  std::string host;
  const ShmRankPage* page = nullptr;  // its rank page (shm_rank_page.h), owned by the transport
  // Whether its liveness is read from its page's lock rather than its pid (another pid space).
  bool watchLock() const { return otherPidSpace && page != nullptr && page->watchesOwner(); }
};

// "pid N" as the peer's own log lines show it, and where that pid lives.
std::string describePid(const ShmPeerInfo& p) {
  std::string s = "pid " + std::to_string(p.pid > 0 || p.reportedPid == 0 ? p.pid : p.reportedPid);
  if (p.otherPidSpace) s += " in another pid namespace";
  return s;
}

Result peerDied(const char* role, const ShmPeerInfo& p, int lane) {
  return fail(Result::kRemoteError,
              "shm: rank %d (%s on host %s) died while this rank waited on it as %s of lane %d; the job cannot "
              "continue, check that rank's log for the cause",
              p.rank, describePid(p).c_str(), p.host.c_str(), role, lane);
}

Result peerClosed(const char* role, const ShmPeerInfo& p, int lane) {
  return fail(Result::kRemoteError,
              "shm: rank %d (%s on host %s) closed lane %d while this rank waited on it as %s: its communicator "
              "was aborted or destroyed, most likely after an error there; check that rank's log",
              p.rank, describePid(p).c_str(), p.host.c_str(), lane, role);
}

// One more idle poll of a wait on `p`: false once the peer process is known to be gone. Rate as
// PeerWatch::idle(); the check is kill() on its pid, or for a peer in another pid namespace the
// lock on its rank page (one fcntl).
bool peerAliveWhileIdle(PeerWatch* watch, const ShmPeerInfo& p) {
  if (p.watchLock()) return !watch->due() || p.page->ownerAlive();
  return watch->idle();
}

class ShmSendConnection final : public SendConnection {
 public:
  ShmSendConnection(std::string name, const TransportContext& ctx, ShmPeerInfo peer, int lane)
      : name_(std::move(name)),
        depth_(static_cast<uint32_t>(ctx.fifoDepth)),
        lines_(shmLineCount(depth_)),
        slotBytes_(ctx.slotBytes),
        peer_(std::move(peer)),
        lane_(lane),
        watch_(peer_.pid),
        small_(lines_),
        lineUnit_(lines_, kNoSlot),
        lineUnits_(lines_, 0),
        unitsAfter_(lines_, 0),
        ringMsgsAfter_(lines_, 0) {}

  ~ShmSendConnection() override {
    // Before mapping, the receiver may have created the segment and then died; remove the name.
    if (!ready_) shm_unlink(name_.c_str());
  }

  Result acquire(void** slot) override { return acquireFor(slotBytes_, slot); }

  // A message of at most kShmInlineBytes needs a free line only: its payload is written here, in
  // this side's memory, and copied into the line at commit; one of at most kShmSmallBytes is
  // written straight into the line's small block. One of kShmPackedBytes..kShmPackedMaxBytes
  // takes the pages right behind the previous message's on a packing lane, any other the next
  // slot (shm_segment.h).
  Result acquireFor(size_t bytes, void** slot) override {
    if (!ready_) MIXCCL_TRY(setUp());
    const uint64_t next = head_ + acquired_;
    if (next - cachedTail_ >= lines_) {
      readTail();
      if (next - cachedTail_ >= lines_) return waitIdle();
    }
    const uint64_t line = shmRingIndex(next, lines_);
    if (bytes <= kShmInlineBytes) {
      lineUnit_[line] = kNoSlot;
      lineUnits_[line] = 0;
      *slot = small_[line].bytes;
    } else if (bytes > slotBytes_) {
      return fail(Result::kInternalError, "shm: a %zu-byte message to rank %d does not fit a %zu-byte slot", bytes,
                  peer_.rank, slotBytes_);
    } else if (bytes <= kShmSmallBytes) {
      lineUnit_[line] = kShmSmallUnit;
      lineUnits_[line] = 0;
      *slot = map_.smallBlock(depth_, line);
    } else {
      const bool packed = pack_ && bytes >= kShmPackedBytes && bytes <= kShmPackedMaxBytes;
      const uint64_t need = packed ? (bytes + kShmUnit - 1) / kShmUnit : slotUnits_;
      const uint64_t align = packed ? 1 : slotUnits_;
      uint64_t start = 0;
      uint64_t take = 0;
      // At most the FIFO depth of them in flight, as when each took a slot (the spare slots of a
      // packing lane are room for skipped units, not for more messages).
      if (ringMsgsTaken_ - ringMsgsFreed_ >= depth_ || !placeUnits(need, align, &start, &take)) {
        readTail();
        if (ringMsgsTaken_ - ringMsgsFreed_ >= depth_ || !placeUnits(need, align, &start, &take)) return waitIdle();
      }
      ++ringMsgsTaken_;
      lineUnit_[line] = static_cast<uint32_t>(start);
      lineUnits_[line] = static_cast<uint32_t>(need);
      *slot = map_.ringUnit(depth_, start);
      unitsTaken_ += take;
      unitPos_ = start + need == ringUnits_ ? 0 : start + need;
    }
    unitsAfter_[line] = unitsTaken_;
    ringMsgsAfter_[line] = ringMsgsTaken_;
    watch_.progressed();
    ++acquired_;
    return Result::kSuccess;
  }

  Result commit(size_t bytes, uint64_t stamp) override {
    const uint64_t at = shmRingIndex(head_, lines_);
    const uint32_t unit = lineUnit_[at];
    const size_t room = unit == kNoSlot         ? kShmInlineBytes
                        : unit == kShmSmallUnit ? std::min(kShmSmallBytes, slotBytes_)
                                                : std::min(lineUnits_[at] * kShmUnit, slotBytes_);
    if (acquired_ == 0 || bytes > room) {
      return fail(Result::kInternalError,
                  "shm: commit of %zu bytes to rank %d without a slot (or into a slot of %zu bytes)", bytes, peer_.rank,
                  room);
    }
    --acquired_;
    ShmSlotLine& line = map_.lines()[at];
    // A small payload goes into the line, so the receiver fetches one cache line.
    if (unit == kNoSlot) {
      memcpy(line.inlineData, small_[at].bytes, bytes);
    } else if (bytes <= kShmInlineBytes) {
      memcpy(line.inlineData, unit == kShmSmallUnit ? map_.smallBlock(depth_, at) : map_.ringUnit(depth_, unit), bytes);
    }
    line.unit = unit;
    line.bytes = static_cast<uint32_t>(bytes);
    line.stamp = stamp;
    ++head_;
    // Publishes payload, size and stamp (release pairs with the receiver's acquire of seq).
    if (holding_) {
      held_.emplace_back(&line, head_);
    } else {
      line.seq.store(head_, std::memory_order_release);
    }
    return Result::kSuccess;
  }

  const void* ringAlias(const void* p) const override { return map_.ringAlias(p); }
  void holdPublish() override { holding_ = true; }
  // The receiver reads lines in order, so storing the oldest held line's seq last shows them together.
  void publish() override {
    for (auto it = held_.rbegin(); it != held_.rend(); ++it)
      it->first->seq.store(it->second, std::memory_order_release);
    held_.clear();
    holding_ = false;
  }

  // A committed message already lives in shared memory: nothing is in flight on this side.
  Result flush() override { return Result::kSuccess; }
  size_t slotBytes() const override { return slotBytes_; }

 private:
  Result setUp() {
    if (!map_.valid()) {
      Result r = ShmMapping::open(name_, shmTotalBytes(depth_, slotBytes_),
                                  shmTotalBytes(depth_, slotBytes_, depth_ + kShmPackSpareSlots),
                                  shmSlotsOffset(depth_), &map_);
      if (r == Result::kInProgress) return waitIdle();
      MIXCCL_TRY(r);
    }
    if (!map_.ready()) return waitIdle();
    ShmHeader* h = map_.header();
    // The receiver chose whether the lane packs (ShmTransport::pack_): its ring says so.
    const bool packs = h->ringSlots == depth_ + kShmPackSpareSlots;
    if (h->version != kShmVersion || h->slotCount != depth_ || h->slotBytes != slotBytes_ ||
        (!packs && h->ringSlots != depth_) || map_.bytes() != shmTotalBytes(depth_, slotBytes_, h->ringSlots)) {
      return fail(Result::kInvalidUsage,
                  "shm: lane to rank %d (host %s) has version %u, %u slots of %llu bytes; this rank expects version "
                  "%u, %u slots of %zu bytes: set MIXCCL_CHUNK_SIZE and MIXCCL_FIFO_DEPTH identically everywhere",
                  peer_.rank, peer_.host.c_str(), h->version, h->slotCount,
                  static_cast<unsigned long long>(h->slotBytes), kShmVersion, depth_, slotBytes_);
    }
    // The creator's own view of its pid is the one that kill() can reach, when the header says it
    // was written in our pid namespace: containers that share /dev/shm may each have their own,
    // and a pid from another one names nothing here, or another process. A pid <= 0 (a corrupt
    // header) would turn the check off: it is no pid. Our own pid is of use to the receiver only
    // in the same terms (0: none).
    const bool samePids = !peer_.otherPidSpace && samePidSpace(h->pidSpace, localPidSpace());
    if (!samePids) {
      peer_.pid = 0;
      watch_.setPid(0);
    } else if (h->receiverPid > 0) {
      peer_.pid = h->receiverPid;
      watch_.setPid(h->receiverPid);
    }
    h->senderPid.store(samePids ? static_cast<int32_t>(getpid()) : 0, std::memory_order_relaxed);
    h->mapped.store(1, std::memory_order_release);
    shm_unlink(name_.c_str());  // both ends hold mappings now; the name has served its purpose
    head_ = 0;
    cachedTail_ = 0;
    readTail();
    pack_ = packs;
    ringUnits_ = shmRingUnits(h->ringSlots, slotBytes_);
    slotUnits_ = shmSlotStride(slotBytes_) / kShmUnit;
    if (pack_) map_.prefault();
    ready_ = true;
    MIXCCL_INFO(log::kShm, "shm: lane %d to rank %d connected (%u slots of %zu bytes, %u message lines)", lane_,
                peer_.rank, depth_, slotBytes_, lines_);
    return Result::kSuccess;
  }

  Result waitIdle() {
    if (peer_.page != nullptr && peer_.page->closed()) return peerClosed("receiver", peer_, lane_);
    if (!peerAliveWhileIdle(&watch_, peer_)) return peerDied("receiver", peer_, lane_);
    return Result::kInProgress;
  }

  // Reads the receiver's tail: lines up to it are free again, and so are the units of their
  // messages. unitsAfter_ of message tail - 1 is still this side's: it is overwritten only by
  // message tail - 1 + lines, whose line could be acquired only after a tail >= this one was read.
  void readTail() {
    const uint64_t tail = map_.tail()->load(std::memory_order_acquire);
    if (tail == cachedTail_) return;
    unitsFreed_ = unitsAfter_[shmRingIndex(tail - 1, lines_)];
    ringMsgsFreed_ = ringMsgsAfter_[shmRingIndex(tail - 1, lines_)];
    cachedTail_ = tail;
  }

  // Where a message of `need` units goes: at the first multiple of `align` from the previous
  // message's end on, or at the ring's start when it would run past the end (a message never
  // wraps: the receiver reads it as one range whatever its mapping). *take counts the units
  // skipped too, as they stay in use until this message is released. False when the units still
  // in use leave no room (the receiver releases in order, so they are one span behind unitPos_).
  // Skips are less than a slot, and a packing lane has spare slots for them
  // (kShmPackSpareSlots), so the FIFO depth of messages always fits once earlier ones are
  // released; elsewhere every message takes a slot at a slot boundary and none is skipped.
  bool placeUnits(uint64_t need, uint64_t align, uint64_t* start, uint64_t* take) const {
    const uint64_t used = unitsTaken_ - unitsFreed_;
    // A mask for the power-of-two slots of every default (shmRingIndex says why).
    const uint64_t aligned = align == 1                   ? unitPos_
                             : (align & (align - 1)) == 0 ? (unitPos_ + align - 1) & ~(align - 1)
                                                          : (unitPos_ + align - 1) / align * align;
    *start = aligned + need <= ringUnits_ ? aligned : 0;
    const uint64_t skipped = *start == aligned ? aligned - unitPos_ : ringUnits_ - unitPos_;
    *take = skipped + need;
    return used + *take <= ringUnits_;
  }

  static constexpr uint32_t kNoSlot = UINT32_MAX;  // a line whose payload travels inside it
  struct alignas(64) SmallPayload {                // aligned as a slot is, for the typed reads of a reduction
    uint8_t bytes[kShmInlineBytes];
  };

  std::string name_;
  uint32_t depth_;
  uint32_t lines_;
  size_t slotBytes_;
  ShmPeerInfo peer_;
  int lane_;
  PeerWatch watch_;
  ShmMapping map_;
  bool ready_ = false;
  // From the header, at setUp():
  bool pack_ = false;       // whether payloads of kShmPackedBytes..kShmPackedMaxBytes are packed
  uint64_t ringUnits_ = 0;  // units (kShmUnit) of the slot ring
  uint64_t slotUnits_ = 0;  // of a slot
  // Per line of the ring, for the message that has it now (index message % lines_):
  std::vector<SmallPayload> small_;      // the payload of a small message until commit() copies it
  std::vector<uint32_t> lineUnit_;       // its first unit in the slot ring, or kNoSlot
  std::vector<uint32_t> lineUnits_;      // the units it may fill (what acquireFor() was asked for)
  std::vector<uint64_t> unitsAfter_;     // unitsTaken_ once it was acquired
  std::vector<uint64_t> ringMsgsAfter_;  // ringMsgsTaken_ once it was acquired
  uint32_t acquired_ = 0;                // lines handed out by acquireFor() and not committed yet, from head_ on
  uint64_t head_ = 0;                    // next message index to commit
  uint64_t cachedTail_ = 0;              // last tail seen; re-read only when a ring looks full
  uint64_t unitsTaken_ = 0;              // units taken by acquired messages (skipped ones included), ever
  uint64_t unitsFreed_ = 0;              // those released with the messages up to cachedTail_
  uint64_t ringMsgsTaken_ = 0;           // messages that took units (neither inline nor small), ever
  uint64_t ringMsgsFreed_ = 0;           // those released with the messages up to cachedTail_
  uint64_t unitPos_ = 0;                 // where the next message's units would start
  bool holding_ = false;                 // holdPublish(): seq stores wait in held_ until publish()
  std::vector<std::pair<ShmSlotLine*, uint64_t>> held_;
};

class ShmRecvConnection final : public RecvConnection {
 public:
  // `pack`: whether the sender packs messages (shmPackLanes), so the ring is prefaulted.
  ShmRecvConnection(std::string name, ShmMapping map, const TransportContext& ctx, ShmPeerInfo peer, int lane,
                    bool pack)
      : name_(std::move(name)),
        map_(std::move(map)),
        depth_(static_cast<uint32_t>(ctx.fifoDepth)),
        lines_(shmLineCount(depth_)),
        slotBytes_(ctx.slotBytes),
        ringUnits_(shmRingUnits(map_.header()->ringSlots, slotBytes_)),
        peer_(std::move(peer)),
        lane_(lane),
        watch_(peer_.pid),
        pack_(pack) {
    if (pack_) map_.prefault();
  }

  ~ShmRecvConnection() override {
    // Normally the sender unlinked the name when it mapped; if it never came, do it here.
    if (!senderMapped_ && map_.header()->mapped.load(std::memory_order_acquire) == 0) shm_unlink(name_.c_str());
  }

  Result peekAt(size_t ahead, const void** data, size_t* bytes, uint64_t* stamp) override {
    // A line further ahead than the ring is deep would be an older message's.
    if (ahead >= lines_) return Result::kInProgress;
    const uint64_t idx = tail_ + ahead;
    const uint64_t at = shmRingIndex(idx, lines_);
    const ShmSlotLine& line = map_.lines()[at];
    if (line.seq.load(std::memory_order_acquire) != idx + 1) return ahead == 0 ? waitIdle() : Result::kInProgress;
    if (idx + 1 > arrived_) arrived_ = idx + 1;
    watch_.progressed();
    *bytes = line.bytes;
    *stamp = line.stamp;
    if (*bytes > slotBytes_) {
      return fail(Result::kRemoteError, "shm: rank %d (host %s) wrote a %zu-byte message into a %zu-byte slot",
                  peer_.rank, peer_.host.c_str(), *bytes, slotBytes_);
    }
    if (*bytes <= kShmInlineBytes) {
      *data = line.inlineData;
      return Result::kSuccess;
    }
    if (line.unit == kShmSmallUnit) {
      if (*bytes > kShmSmallBytes) {
        return fail(Result::kRemoteError, "shm: rank %d (host %s) wrote a %zu-byte message into a %zu-byte small block",
                    peer_.rank, peer_.host.c_str(), *bytes, kShmSmallBytes);
      }
      *data = map_.smallBlock(depth_, at);
      return Result::kSuccess;
    }
    // The sender never lets a message run past the ring's end (ShmSendConnection::placeUnits).
    if (line.unit >= ringUnits_ || (ringUnits_ - line.unit) * kShmUnit < *bytes) {
      return fail(
          Result::kRemoteError,
          "shm: rank %d (host %s) placed a %zu-byte message at unit %u of a lane whose slot ring has %llu units",
          peer_.rank, peer_.host.c_str(), *bytes, line.unit, static_cast<unsigned long long>(ringUnits_));
    }
    *data = map_.ringUnit(depth_, line.unit);
    return Result::kSuccess;
  }

  size_t messageDepth() const override { return lines_; }

  Result reserve() override {
    MIXCCL_TRY(map_.reservePages());
    if (pack_) map_.prefault();
    return Result::kSuccess;
  }

  Result release() override {
    if (tail_ == arrived_) {
      return fail(Result::kInternalError, "shm: release on the lane from rank %d with no message peeked", peer_.rank);
    }
    ++tail_;
    // Hands the slot back: our reads of it happen-before the sender's next write to it.
    if (!holding_) map_.tail()->store(tail_, std::memory_order_release);
    return Result::kSuccess;
  }

  const void* ringAlias(const void* p) const override { return map_.ringAlias(p); }
  void holdPublish() override { holding_ = true; }
  void publish() override {
    if (holding_) map_.tail()->store(tail_, std::memory_order_release);
    holding_ = false;
  }

 private:
  Result waitIdle() {
    if (!senderMapped_ && map_.header()->mapped.load(std::memory_order_acquire) != 0) {
      // The sender is attached: from now on its pid in the header is the one to watch.
      senderMapped_ = true;
      // (A sender in another pid namespace writes 0; one of an older build may not, so ours decides.)
      int32_t pid = map_.header()->senderPid.load(std::memory_order_relaxed);
      if (pid > 0 && !peer_.otherPidSpace) {
        watch_.setPid(pid);
        peer_.pid = pid;
      }
    }
    if (peer_.page != nullptr && peer_.page->closed()) {
      // Messages committed before the close are still to be read: the sender's last seq store
      // precedes its close, so a re-read after seeing the flag includes them.
      if (arrivedAtTail()) return Result::kInProgress;
      return peerClosed("sender", peer_, lane_);
    }
    if (!peerAliveWhileIdle(&watch_, peer_)) {
      // Same for death: the sender may have committed its last message and exited between our
      // seq read and the liveness check. Its stores are visible once it is gone, so a re-read
      // now sees everything it ever committed; only an empty ring is a lost message.
      if (arrivedAtTail()) return Result::kInProgress;
      return peerDied("sender", peer_, lane_);
    }
    return Result::kInProgress;
  }

  std::string name_;
  ShmMapping map_;
  uint32_t depth_;
  uint32_t lines_;
  size_t slotBytes_;
  uint64_t ringUnits_;
  ShmPeerInfo peer_;
  int lane_;
  PeerWatch watch_;
  bool pack_;
  bool senderMapped_ = false;
  bool arrivedAtTail() const {
    return map_.lines()[shmRingIndex(tail_, lines_)].seq.load(std::memory_order_acquire) == tail_ + 1;
  }

  uint64_t tail_ = 0;     // next message index to read (mirrors the shared tail but while holding_)
  bool holding_ = false;  // holdPublish(): the shared tail is stored at publish()
  uint64_t arrived_ = 0;  // messages seen complete (peekAt); release() needs one past tail_
};

class ShmTransport final : public Transport {
 public:
  explicit ShmTransport(const TransportContext& ctx) : ctx_(ctx) {}

  // A peer may have created the segment of a lane from this rank that no send connection here
  // ever opened (this rank failed or was aborted first) and then died or stopped waiting: only
  // this side still knows the name. Removing an absent name is harmless (ENOENT).
  // Also: this rank's page says "gone" to peers that still wait on it, and no page name outlives
  // the communicator (shm_rank_page.h).
  // A page name is known only with its owner's nonce: when set-up never finished, the pages of
  // ranks that died before this one learnt their nonces are found by the communicator's prefix and
  // removed once their owners are provably gone (reclaimCommShm); a live owner removes its own.
  ~ShmTransport() override {
    if (!ownPage_.valid()) return;
    ownPage_.markClosed();
    shm_unlink(shmRankPageName(ctx_.commHash, nonce_, ctx_.rank).c_str());
    if (!peersSet_) {
      for (size_t r = 0; r < nonces_.size(); ++r) {
        if (nonces_[r] != 0) shm_unlink(shmRankPageName(ctx_.commHash, nonces_[r], static_cast<int>(r)).c_str());
      }
      reclaimCommShm(ctx_.commHash);
    }
    for (int p : localPeers_) {
      for (int lane = 0; lane < kNumLanes; ++lane) {
        shm_unlink(shmLaneName(ctx_.commHash, nonces_[p], ctx_.rank, p, lane).c_str());
      }
    }
  }

  const char* name() const override { return "shm"; }

  // Publishes this run's nonce (shm_stale.h); names follow from it, the communicator hash and
  // the ranks. The rank page must exist before the exchange, so peers find it in setPeers().
  // First, leftovers of crashed jobs on this host are removed.
  Result listen(std::vector<uint8_t>* blob) override {
    blob->clear();
    if (config::getBool(config::Knob::kShmDisable)) return Result::kSuccess;
    sweepStaleShm();
    nonce_ = shmNonce();
    MIXCCL_TRY(ShmRankPage::create(ctx_.commHash, nonce_, ctx_.rank, &ownPage_));
    *blob = encodeShmBlob(nonce_);
    return Result::kSuccess;
  }

  Result setPeers(const std::vector<TransportPeer>& peers) override {
    if (static_cast<int>(peers.size()) != ctx_.nranks) {
      return fail(Result::kInternalError, "shm: setPeers got %zu peers for %d ranks", peers.size(), ctx_.nranks);
    }
    peers_ = peers;
    if (!ownPage_.valid()) return Result::kSuccess;
    // The nonces of the same-host ranks that use shm (an empty blob: shm is disabled there, and
    // canConnect() sends that pair over TCP on both sides), and how many of them map each page.
    const uint64_t here = peers_[ctx_.rank].hostHash;
    nonces_.assign(peers_.size(), 0);
    uint32_t shmRanksHere = 0;
    for (const TransportPeer& p : peers_) {
      if (p.hostHash != here || p.blob.empty()) continue;
      if (!decodeShmBlob(p.blob, &nonces_[p.rank])) {
        return fail(Result::kInvalidUsage,
                    "shm: rank %d (pid %d on host %s) publishes a %zu-byte shm blob of version %u; this rank "
                    "speaks version %u (%zu bytes): run the same mixccl build on every rank of a host",
                    p.rank, p.reportedPid != 0 ? p.reportedPid : p.pid, p.host.c_str(), p.blob.size(),
                    static_cast<unsigned>(p.blob[0]), static_cast<unsigned>(kShmBlobVersion), kShmBlobBytes);
      }
      ++shmRanksHere;
    }
    const size_t cacheBytes = lastLevelCacheBytes();
    pack_ = shmPackLanes(cacheBytes, shmRanksHere, shmRingUnits(ctx_.fifoDepth, ctx_.slotBytes) * kShmUnit);
    MIXCCL_INFO(log::kShm, "shm: %u ranks on this host, last-level cache %zu bytes: messages of %zu-%zu bytes %s",
                shmRanksHere, cacheBytes, kShmPackedBytes, kShmPackedMaxBytes,
                pack_ ? "are packed in the slot rings" : "take a slot each (the rings do not fit in the cache)");
    pages_.resize(peers_.size());
    bool otherPidSpaces = false;
    for (const TransportPeer& p : peers_) {
      if (p.rank == ctx_.rank || nonces_[p.rank] == 0) continue;
      localPeers_.push_back(p.rank);
      otherPidSpaces = otherPidSpaces || p.otherPidSpace;
      MIXCCL_TRY(ShmRankPage::attach(ctx_.commHash, nonces_[p.rank], p.rank, shmRanksHere - 1, p.otherPidSpace,
                                     &pages_[p.rank]));
    }
    // Peers in another pid namespace watch this rank through its page's lock; without such peers
    // the lock (and the descriptor it needs) goes. Every peer decides from the same table.
    ownPage_.keepOwnerLock(otherPidSpaces);
    if (otherPidSpaces) {
      MIXCCL_INFO(log::kShm, "shm: same-host peers in another pid namespace: their liveness is watched by lock");
    }
    peersSet_ = true;
    return Result::kSuccess;
  }

  int canConnect(int peer) const override {
    if (config::getBool(config::Knob::kShmDisable)) return 0;
    if (peer < 0 || peer >= static_cast<int>(nonces_.size()) || ctx_.rank >= static_cast<int>(nonces_.size())) return 0;
    return nonces_[peer] != 0 ? 10 : 0;
  }

  Result connectSend(int peer, int lane, std::unique_ptr<SendConnection>* out) override {
    MIXCCL_TRY(checkArgs(peer, lane));
    *out = std::make_unique<ShmSendConnection>(shmLaneName(ctx_.commHash, nonces_[peer], ctx_.rank, peer, lane), ctx_,
                                               peerInfo(peer), lane);
    return Result::kSuccess;
  }

  Result connectRecv(int peer, int lane, std::unique_ptr<RecvConnection>* out) override {
    return makeRecv(peer, lane, /*reserve=*/true, out);
  }

  // Pages unreserved until reserve(): from every peer at once, a lane per peer would otherwise
  // reserve depth x slotBytes each (4 MiB by default).
  Result connectRecvToLook(int peer, int lane, std::unique_ptr<RecvConnection>* out) override {
    return makeRecv(peer, lane, /*reserve=*/false, out);
  }

 private:
  Result makeRecv(int peer, int lane, bool reserve, std::unique_ptr<RecvConnection>* out) {
    MIXCCL_TRY(checkArgs(peer, lane));
    std::string name = shmLaneName(ctx_.commHash, nonce_, peer, ctx_.rank, lane);
    ShmMapping map;
    MIXCCL_TRY(
        ShmMapping::create(name, static_cast<uint32_t>(ctx_.fifoDepth), ctx_.slotBytes, peer, reserve, &map, pack_));
    *out = std::make_unique<ShmRecvConnection>(std::move(name), std::move(map), ctx_, peerInfo(peer), lane, pack_);
    return Result::kSuccess;
  }

  Result checkArgs(int peer, int lane) const {
    if (peer < 0 || peer >= static_cast<int>(nonces_.size()) || lane < 0 || lane >= kNumLanes) {
      return fail(Result::kInternalError, "shm: connect to rank %d lane %d out of range (%zu peers known)", peer, lane,
                  nonces_.size());
    }
    if (nonces_[peer] == 0) {
      return fail(Result::kInternalError, "shm: rank %d is not reachable over shm (another host, or shm disabled)",
                  peer);
    }
    if (ctx_.fifoDepth <= 0 || ctx_.slotBytes == 0) {
      return fail(Result::kInvalidUsage,
                  "shm: fifo depth %d / slot size %zu must be positive (MIXCCL_FIFO_DEPTH, "
                  "MIXCCL_CHUNK_SIZE)",
                  ctx_.fifoDepth, ctx_.slotBytes);
    }
    return Result::kSuccess;
  }

  ShmPeerInfo peerInfo(int peer) const {
    ShmPeerInfo info;
    info.rank = peer;
    info.pid = peers_[peer].pid;  // 0 for a peer in another pid namespace (TransportPeer)
    info.reportedPid = peers_[peer].reportedPid;
    info.otherPidSpace = peers_[peer].otherPidSpace;
    info.host = peers_[peer].host;
    if (static_cast<size_t>(peer) < pages_.size() && (pages_[peer].valid() || pages_[peer].closed())) {
      info.page = &pages_[peer];
    }
    return info;
  }

  TransportContext ctx_;
  std::vector<TransportPeer> peers_;
  uint64_t nonce_ = 0;  // this rank's, for this run (shm_stale.h)
  ShmRankPage ownPage_;
  std::vector<uint64_t> nonces_;    // by rank; 0 unless a same-host rank using shm (self included)
  std::vector<ShmRankPage> pages_;  // by rank; valid for same-host peers
  std::vector<int> localPeers_;
  bool peersSet_ = false;
  bool pack_ = false;  // shmPackLanes for this host's ranks
};

}  // namespace

std::unique_ptr<Transport> makeShmTransport(const TransportContext& ctx) { return std::make_unique<ShmTransport>(ctx); }

}  // namespace mixccl
