// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// The two ends of an RDMA lane (rdma_internal.h has the design).
//
// Sender: message k goes from staging slot k % depth to the receiver's slot k % depth as one RDMA
// WRITE WITH IMMEDIATE. Slot k may be handed out once message k - depth is both released by the
// receiver (its credit word, which the receiver writes, reached k - depth + 1) and confirmed by
// the local completion queue (the staging slot is free again).
//
// Receiver: each message consumes one posted receive, whose completion says the data is in place;
// the receive is posted again at once. A credit write puts the count of released messages into
// the sender's credit word (8 bytes, inline).
//
// Credits are batched. A credit costs a write and its acknowledgement, as many packets as a small
// message, so a receiver that told every release would double the packets of small messages. It
// writes one once half the slots (at least one) were released since the last, at once for a
// zero-copy message (the sender's flush() waits for that release), and before its rank waits
// (RdmaHub::armWait, the engine's idle naps), whatever it holds. Why no schedule can deadlock
// for it: a sender short of slots has at least depth/2 + 1 messages unread by the receiver
// (fewer than depth/2 releases are held back), so the receiver has work; and a receiver that has
// none waits, and pays what it holds before its first nap, so a sender waits for held credits no
// longer than the receiver's spin phase. Holding back only narrows how far a sender may run
// ahead of a receiver that is busy elsewhere (another communicator's call): depth/2 + 1 messages
// at worst instead of depth, never fewer than one.

#include <arpa/inet.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>

#include "common/log.h"
#include "transports/rdma/rdma_internal.h"

namespace mixccl {
namespace {

constexpr int kPollBatch = 16;
// A connection that waits polls the connection manager (disconnects, set-up) every this many
// calls: ibv_poll_cq is a few loads, rdma_get_cm_event a system call (a lane that is not up yet
// polls it every call).
constexpr uint64_t kEventPollPeriod = 1024;
// How long a closing sender waits for its posted writes to land.
constexpr std::chrono::seconds kLinger{2};
// Work request ids of reads of zero-copy messages (credit writes use 0).
constexpr uint64_t kReadTag = 1ull << 63;

Result lost(const RdmaHub& hub, const RdmaEndpoint& ep) {
  return fail(Result::kRemoteError, "rdma: lane %d %s %s failed: %s", ep.lane, ep.sender ? "to" : "from",
              hub.describe(ep.peer).c_str(), ep.error.c_str());
}

}  // namespace

RdmaSendConnection::RdmaSendConnection(std::shared_ptr<RdmaHub> hub, RdmaEndpoint* ep)
    : hub_(std::move(hub)),
      ep_(ep),
      depth_(static_cast<uint32_t>(hub_->ctx.fifoDepth)),
      slotBytes_(hub_->ctx.slotBytes),
      stride_(kRdmaSlotHeaderBytes + hub_->ctx.slotBytes) {}

RdmaSendConnection::~RdmaSendConnection() {
  // flush() returned once writes were posted; the queue pair would drop any still in flight, so
  // they get a bounded time to land first (TCP's kernel keeps sending after close() the same way).
  // Not on abort: nobody waits for that data.
  const std::atomic<bool>* abort = hub_->ctx.abortFlag;
  const auto until = std::chrono::steady_clock::now() + kLinger;
  while (completed_ < head_ && error_ == Result::kSuccess && (abort == nullptr || !abort->load()) &&
         std::chrono::steady_clock::now() < until) {
    if (reap() != Result::kSuccess) break;
  }
  hub_->close(ep_);
  for (const auto& [msg, mr] : lent_) hub_->regs->unpin(mr);
}

Result RdmaSendConnection::failed() {
  if (error_ != Result::kSuccess) return fail(error_, "%s", errorText_.c_str());
  error_ = lost(*hub_, *ep_);
  errorText_ = lastError();
  return error_;
}

Result RdmaSendConnection::ready() {
  if (error_ != Result::kSuccess) return failed();
  if (ep_->state != RdmaEndpoint::State::kUp || hub_->polls % kEventPollPeriod == 0) MIXCCL_TRY(hub_->poll());
  if (ep_->state == RdmaEndpoint::State::kFailed) return failed();
  return ep_->state == RdmaEndpoint::State::kUp ? Result::kSuccess : Result::kInProgress;
}

Result RdmaSendConnection::reap() {
  ibv_wc wc[kPollBatch];
  const int n = ibv_poll_cq(ep_->cq, kPollBatch, wc);
  if (n < 0) {
    ep_->state = RdmaEndpoint::State::kFailed;
    ep_->error = "ibv_poll_cq failed";
    return failed();
  }
  for (int i = 0; i < n; ++i) {
    if (wc[i].status != IBV_WC_SUCCESS) {
      ep_->state = RdmaEndpoint::State::kFailed;
      ep_->error = std::string("a write completed with ") + rdma().wcStatusStr(wc[i].status);
      return failed();
    }
    ++completed_;
  }
  return Result::kSuccess;
}

Result RdmaSendConnection::acquire(void** slot) {
  MIXCCL_TRY(ready());
  MIXCCL_TRY(reap());
  const uint64_t k = head_ + acquired_;
  if (acquired_ >= depth_) return Result::kInProgress;
  const uint64_t released = this->released();
  if (!lent_.empty()) returnLent(released);
  if (k >= released + depth_ || k >= completed_ + depth_) {
    ++hub_->polls;
    return Result::kInProgress;
  }
  *slot = static_cast<uint8_t*>(ep_->slots.base) + (k % depth_) * stride_ + kRdmaSlotHeaderBytes;
  ++acquired_;
  return Result::kSuccess;
}

Result RdmaSendConnection::commit(size_t bytes, uint64_t stamp) {
  if (error_ != Result::kSuccess) return failed();
  if (acquired_ == 0 || bytes > slotBytes_) {
    return fail(Result::kInternalError, "rdma: commit of %zu bytes with %u slots acquired (slot %zu bytes)", bytes,
                acquired_, slotBytes_);
  }
  return post(RdmaSlotHeader{stamp, bytes, 0, 0, 0}, bytes);
}

bool RdmaSendConnection::canCommitFrom(size_t bytes, const MemRegion& reg) const {
  return reg.id != 0 && hub_->regs != nullptr && bytes >= hub_->zeroCopyMin && bytes <= slotBytes_ &&
         error_ == Result::kSuccess;
}

Result RdmaSendConnection::commitFrom(const void* src, size_t bytes, uint64_t stamp, const MemRegion& reg) {
  if (error_ != Result::kSuccess) return failed();
  if (acquired_ == 0 || bytes > slotBytes_) {
    return fail(Result::kInternalError, "rdma: commitFrom of %zu bytes with %u slots acquired (slot %zu bytes)", bytes,
                acquired_, slotBytes_);
  }
  ibv_mr* mr = hub_->regs == nullptr ? nullptr : hub_->regs->pin(hub_->pdFor(ep_->id->verbs), reg);
  if (mr == nullptr) {  // not registrable: an ordinary message after all
    memcpy(static_cast<uint8_t*>(ep_->slots.base) + (head_ % depth_) * stride_ + kRdmaSlotHeaderBytes, src, bytes);
    return commit(bytes, stamp);
  }
  if (!announced_) {
    MIXCCL_INFO(log::kNet, "NET/IB : lane %d to %s: zero-copy messages from registered buffers (%zu bytes and up)",
                ep_->lane, hub_->describe(ep_->peer).c_str(), hub_->zeroCopyMin);
    announced_ = true;
  }
  lent_.emplace_back(head_, mr);
  return post(RdmaSlotHeader{stamp, bytes, reinterpret_cast<uintptr_t>(src), mr->rkey, kRdmaZeroCopy}, 0);
}

// Writes header `h` and `wireBytes` of payload from the oldest acquired slot into the receiver's
// slot of the same index, with the message number as the immediate.
Result RdmaSendConnection::post(const RdmaSlotHeader& h, size_t wireBytes) {
  const size_t index = head_ % depth_;
  auto* base = static_cast<uint8_t*>(ep_->slots.base) + index * stride_;
  memcpy(base, &h, sizeof(h));
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(base);
  sge.length = static_cast<uint32_t>(kRdmaSlotHeaderBytes + wireBytes);
  sge.lkey = ep_->slots.mr->lkey;
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = head_;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(static_cast<uint32_t>(head_));
  wr.wr.rdma.remote_addr = ep_->remote.addr + index * stride_;
  wr.wr.rdma.rkey = ep_->remote.rkey;
  if (ibv_post_send(ep_->id->qp, &wr, &bad) != 0) {
    ep_->state = RdmaEndpoint::State::kFailed;
    ep_->error = std::string("ibv_post_send failed: ") + strerror(errno);
    return failed();
  }
  --acquired_;
  ++head_;
  return Result::kSuccess;
}

uint64_t RdmaSendConnection::released() const {
  return __atomic_load_n(static_cast<uint64_t*>(ep_->credit.base), __ATOMIC_ACQUIRE);
}

// Zero-copy messages the receiver released have been read: their regions may go.
void RdmaSendConnection::returnLent(uint64_t upTo) {
  size_t n = 0;
  while (n < lent_.size() && lent_[n].first < upTo) hub_->regs->unpin(lent_[n++].second);
  lent_.erase(lent_.begin(), lent_.begin() + static_cast<std::ptrdiff_t>(n));
}

// A posted write has left this rank's hands: its bytes sit in a staging slot the transport owns,
// never in the user's buffer, and the device sends them without this process (as the kernel does
// for TCP). Waiting for its completion would add the link's round trip to every call.
// A zero-copy message is different: the receiver reads the user's buffer, so the call returns
// only once the receiver released it.
Result RdmaSendConnection::flush() {
  if (error_ != Result::kSuccess) return failed();
  if (!lent_.empty()) {
    MIXCCL_TRY(ready());
    MIXCCL_TRY(reap());
    returnLent(released());
    if (!lent_.empty()) {
      ++hub_->polls;
      return Result::kInProgress;
    }
  }
  if (head_ == completed_) return Result::kSuccess;
  return reap();
}

RdmaRecvConnection::RdmaRecvConnection(std::shared_ptr<RdmaHub> hub, int peer, int lane)
    : hub_(std::move(hub)),
      peer_(peer),
      lane_(lane),
      depth_(static_cast<uint32_t>(hub_->ctx.fifoDepth)),
      stride_(kRdmaSlotHeaderBytes + hub_->ctx.slotBytes),
      fetch_(depth_) {
  const auto& peers = hub_->peers;
  if (peer >= 0 && peer < static_cast<int>(peers.size()) && peers[peer].hostHash == peers[hub_->ctx.rank].hostHash) {
    watch_.setPid(peers[peer].pid);
  }
}

RdmaRecvConnection::~RdmaRecvConnection() {
  if (inDebtors_) {
    auto& d = hub_->creditDebtors;
    d.erase(std::remove(d.begin(), d.end(), this), d.end());
  }
  if (ep_ != nullptr) hub_->close(ep_);  // first: no read may still land in a region unpinned below
  for (const Fetch& f : fetch_) {
    if (f.mr != nullptr) hub_->regs->unpin(f.mr);
  }
}

Result RdmaRecvConnection::failed() {
  if (error_ != Result::kSuccess) return fail(error_, "%s", errorText_.c_str());
  error_ = lost(*hub_, *ep_);
  errorText_ = lastError();
  return error_;
}

Result RdmaRecvConnection::pump() {
  if (ep_ == nullptr) {
    ep_ = hub_->takeParked(peer_, lane_);
    if (ep_ == nullptr) {
      MIXCCL_TRY(hub_->poll());
      ep_ = hub_->takeParked(peer_, lane_);
    }
    if (ep_ == nullptr) {
      if (!watch_.idle()) {
        return fail(Result::kRemoteError, "rdma: %s exited before it connected lane %d to rank %d",
                    hub_->describe(peer_).c_str(), lane_, hub_->ctx.rank);
      }
      return Result::kInProgress;
    }
  }
  if (hub_->polls++ % kEventPollPeriod == 0) MIXCCL_TRY(hub_->poll());
  ibv_wc wc[kPollBatch];
  const int n = ibv_poll_cq(ep_->cq, kPollBatch, wc);
  if (n < 0) {
    ep_->state = RdmaEndpoint::State::kFailed;
    ep_->error = "ibv_poll_cq failed";
  }
  for (int i = 0; i < n; ++i) {
    if (wc[i].status != IBV_WC_SUCCESS) {
      ep_->state = RdmaEndpoint::State::kFailed;
      ep_->error = std::string("a work request completed with ") + rdma().wcStatusStr(wc[i].status);
      break;
    }
    if (wc[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
      if (ntohl(wc[i].imm_data) != static_cast<uint32_t>(filled_)) {
        ep_->state = RdmaEndpoint::State::kFailed;
        ep_->error = "message " + std::to_string(ntohl(wc[i].imm_data)) + " arrived where " +
                     std::to_string(static_cast<uint32_t>(filled_)) + " was due";
        break;
      }
      ++filled_;
      ibv_recv_wr wr{};
      ibv_recv_wr* bad = nullptr;
      if (ibv_post_recv(ep_->id->qp, &wr, &bad) != 0) {
        ep_->state = RdmaEndpoint::State::kFailed;
        ep_->error = std::string("ibv_post_recv failed: ") + strerror(errno);
        break;
      }
    } else if (wc[i].opcode == IBV_WC_RDMA_READ) {
      fetch_[(wc[i].wr_id & ~kReadTag) % depth_].state = Fetch::State::kDone;
    } else {
      --creditsInFlight_;  // a credit write completed
    }
  }
  if (creditDue_ && creditsInFlight_ < depth_ && ep_->state != RdmaEndpoint::State::kFailed) MIXCCL_TRY(postCredit());
  return Result::kSuccess;
}

Result RdmaRecvConnection::header(uint64_t msg, RdmaSlotHeader* h) {
  memcpy(h, static_cast<const uint8_t*>(ep_->slots.base) + (msg % depth_) * stride_, sizeof(*h));
  if (h->bytes > stride_ - kRdmaSlotHeaderBytes) {
    ep_->state = RdmaEndpoint::State::kFailed;
    ep_->error = "a message claims " + std::to_string(h->bytes) + " bytes, more than a slot holds";
    return failed();
  }
  return Result::kSuccess;
}

Result RdmaRecvConnection::peekAt(size_t ahead, const void** data, size_t* bytes, uint64_t* stamp) {
  const uint64_t msg = read_ + ahead;
  if (msg >= filled_) {
    MIXCCL_TRY(pump());
    if (msg >= filled_) {
      // Complete messages are handed out before a failure is reported, as on TCP.
      if (ep_ != nullptr && ep_->state == RdmaEndpoint::State::kFailed) return failed();
      return Result::kInProgress;
    }
  }
  RdmaSlotHeader h;
  MIXCCL_TRY(header(msg, &h));
  const uint8_t* payload =
      static_cast<const uint8_t*>(ep_->slots.base) + (msg % depth_) * stride_ + kRdmaSlotHeaderBytes;
  if ((h.flags & kRdmaZeroCopy) != 0 && h.bytes > 0) {
    // The payload is still in the sender's buffer: read it into the slot, unless peekInto()
    // already reads it elsewhere.
    Fetch& f = fetch_[msg % depth_];
    if (f.state == Fetch::State::kNone) {
      MIXCCL_TRY(postRead(msg, h, const_cast<uint8_t*>(payload), ep_->slots.mr->lkey));
      f.dst = const_cast<uint8_t*>(payload);
    }
    if (f.state == Fetch::State::kReading) MIXCCL_TRY(pump());
    if (ep_->state == RdmaEndpoint::State::kFailed) return failed();
    if (f.state != Fetch::State::kDone) return Result::kInProgress;
    payload = static_cast<const uint8_t*>(f.dst);
  }
  *stamp = h.stamp;
  *bytes = h.bytes;
  *data = payload;
  return Result::kSuccess;
}

// Only the messages the engine expects go straight to the user's buffers: each must be a
// zero-copy message of the operation's stamp and the spot's size, and the first one that is not
// (a mismatch, a probe, a closing token) ends the walk, so message read_ + i meets spot i.
Result RdmaRecvConnection::peekInto(const Landing* spots, size_t n, uint64_t wantStamp, const void** data,
                                    size_t* bytes, uint64_t* stamp) {
  if (read_ >= filled_) MIXCCL_TRY(pump());  // decide before peekAt() would read it into the slot
  for (size_t i = 0; i < n && read_ + i < filled_ && hub_->regs != nullptr; ++i) {
    const uint64_t msg = read_ + i;
    RdmaSlotHeader h;
    MIXCCL_TRY(header(msg, &h));
    if ((h.flags & kRdmaZeroCopy) == 0 || h.stamp != wantStamp || h.bytes != spots[i].bytes || h.bytes == 0) break;
    Fetch& f = fetch_[msg % depth_];
    if (f.state != Fetch::State::kNone) continue;  // read already, or being read
    ibv_mr* mr = hub_->regs->pin(hub_->pdFor(ep_->id->verbs), spots[i].reg);
    if (mr == nullptr) break;
    if (!announced_) {
      MIXCCL_INFO(log::kNet, "NET/IB : lane %d from %s: zero-copy messages land in registered buffers", lane_,
                  hub_->describe(peer_).c_str());
      announced_ = true;
    }
    f.mr = mr;
    f.dst = spots[i].dst;
    MIXCCL_TRY(postRead(msg, h, f.dst, mr->lkey));
  }
  return peekAt(0, data, bytes, stamp);
}

Result RdmaRecvConnection::postRead(uint64_t msg, const RdmaSlotHeader& h, void* dst, uint32_t lkey) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(dst);
  sge.length = static_cast<uint32_t>(h.bytes);
  sge.lkey = lkey;
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = kReadTag | msg;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = h.srcAddr;
  wr.wr.rdma.rkey = h.srcRkey;
  if (ibv_post_send(ep_->id->qp, &wr, &bad) != 0) {
    ep_->state = RdmaEndpoint::State::kFailed;
    ep_->error = std::string("posting a read of a zero-copy message failed: ") + strerror(errno);
    return failed();
  }
  fetch_[msg % depth_].state = Fetch::State::kReading;
  return Result::kSuccess;
}

Result RdmaRecvConnection::release() {
  if (read_ >= filled_) return fail(Result::kInternalError, "rdma: release without a message");
  Fetch& f = fetch_[read_ % depth_];
  if (f.state == Fetch::State::kReading) return fail(Result::kInternalError, "rdma: release of a message still read");
  if (f.mr != nullptr) hub_->regs->unpin(f.mr);
  const bool lent = f.state != Fetch::State::kNone;  // a zero-copy message: its sender waits for this
  f = Fetch{};
  ++read_;
  if (lent || read_ - credited_ >= creditBatch()) creditDue_ = true;
  if (!creditDue_) {  // held back (see the top of this file) until more releases or a wait
    if (!inDebtors_) hub_->creditDebtors.push_back(this);
    inDebtors_ = true;
    return Result::kSuccess;
  }
  // The sender needs the newest count, not every one: with `depth` credit writes in flight the
  // next goes out when one completes (pump()), carrying every release before it.
  return creditsInFlight_ < depth_ ? postCredit() : Result::kSuccess;
}

void RdmaRecvConnection::payCredits() {
  inDebtors_ = false;
  if (read_ == credited_ || ep_ == nullptr || ep_->state == RdmaEndpoint::State::kFailed) return;
  creditDue_ = true;
  // A failure here is kept in the endpoint's state and reported by the next peek.
  if (creditsInFlight_ < depth_) (void)postCredit();
}

Result RdmaRecvConnection::postCredit() {
  auto* word = static_cast<uint64_t*>(ep_->credit.base);
  *word = read_;
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(word);
  sge.length = sizeof(uint64_t);
  sge.lkey = ep_->credit.mr->lkey;
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  wr.wr.rdma.remote_addr = ep_->remoteCreditAddr;
  wr.wr.rdma.rkey = ep_->remoteCreditRkey;
  if (ibv_post_send(ep_->id->qp, &wr, &bad) != 0) {
    ep_->state = RdmaEndpoint::State::kFailed;
    ep_->error = std::string("posting a credit failed: ") + strerror(errno);
    return failed();
  }
  ++creditsInFlight_;
  credited_ = read_;
  creditDue_ = false;
  return Result::kSuccess;
}

}  // namespace mixccl
