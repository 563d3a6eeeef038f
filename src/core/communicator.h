// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// A communicator: one rank's membership in a group of nranks ranks. It owns the bootstrap, the
// transports, the lazily created connections to peers, the device backend and the user-created
// reduction operators.
//
// Threading: NCCL's rule applies: one thread at a time issues calls on a communicator. It is
// enforced, not assumed: a call that issues operations takes the communicator's caller slot
// (claimCaller(), one CAS) and a second thread that finds it taken is refused with
// kInvalidUsage, leaving the first call undisturbed. The only cross-thread entry points are
// abort()/revoke() (any thread, any time), the async error and the immutable facts (rank,
// count, device), which take no slot. A call in flight also pins the communicator
// (enterCall); destroy/abort wait until none is pinned (the engine observes the abort flag within
// a millisecond or so), so freeing never races a call.
//
// Processes: a communicator belongs to the process that created it (creatorPid()); the API
// refuses it in a fork()ed child, which shares its sockets and shared memory with the parent.

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/per_thread.h"
#include "common/result.h"
#include "common/types.h"
#include "src/core/arith_check.h"
#include "src/core/bootstrap.h"
#include "src/core/hang_report.h"
#include "src/core/owed_tokens.h"
#include "src/core/peer_info.h"
#include "src/core/plan_cache.h"
#include "src/core/scratch_pool.h"
#include "src/core/tuner.h"
#include "src/core/user_regions.h"
#include "src/device/device_backend.h"
#include "transports/transport.h"

namespace mixccl {

class Engine;

// Communicator options (from ncclConfig_t, already validated by the API layer).
struct CommOptions {
  bool blocking = true;
  std::string name;
  // Test override (non-owning; must outlive the communicator): the device backend to use instead
  // of the process's default one. Lets tests drive the asynchronous engine without a GPU.
  DeviceBackend* backend = nullptr;
};

// A reduction operator handle as the user sees it: built-in (kSum..kAvg) or created by
// ncclRedOpCreatePreMulSum (handle >= kNumBuiltinOps).
struct UserRedOp {
  DataType dtype = DataType::kFloat32;
  bool scalarOnHost = true;         // ncclScalarHostImmediate: value copied at creation
  uint8_t scalar[8] = {};           // value (host immediate)
  const void* scalarPtr = nullptr;  // ncclScalarDevice: read when the collective runs
};

enum class CommState { kInitializing, kReady, kFailed, kFinalized };

class Communicator {
 public:
  ~Communicator();

  // Blocking initialisation of rank `rank` of `nranks` (the body of ncclCommInitRank*).
  static Result create(const UniqueIdData& id, int nranks, int rank, const CommOptions& options,
                       std::unique_ptr<Communicator>* out);
  // An uninitialised communicator; init() completes it (lets non-blocking init hand out the
  // handle first and finish in a thread). `spareRoots`: ids whose roots no rank registers with
  // (ncclCommInitRankScalable's extra ones); rank 0 stops them once it joined (Bootstrap::releaseRoot).
  static std::unique_ptr<Communicator> makeUninitialised(int nranks, int rank, const CommOptions& options);
  Result init(const UniqueIdData& id, const std::vector<UniqueIdData>& spareRoots = {});

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  uint64_t commHash() const { return commHash_; }
  int device() const { return device_; }
  void setDevice(int d) { device_ = d; }
  const CommOptions& options() const { return options_; }
  CommState state() const { return state_.load(std::memory_order_acquire); }
  Bootstrap* bootstrap() { return bootstrap_.get(); }
  DeviceBackend* backend() { return backend_; }
  const PeerInfo& peer(int r) const { return peers_[r]; }
  // Ranks of this communicator on this host (this one included).
  int localRanks() const { return localRanks_; }
  // Some rank on this host (this one included) computes on a device that shares the host's cores
  // (kCapSharesHostCores): a wait here may wait for work that needs these cores.
  bool deviceOnHostCores() const { return deviceOnHostCores_; }
  // Which algorithm each collective runs with (tuner.h); configured at init, read-only after.
  const Tuner& tuner() const { return tuner_; }
  PlanCache& plans() { return plans_; }
  // Scratch buffers of operations, kept for the next ones (scratch_pool.h).
  ScratchPool& scratchPool() { return scratch_; }

  // The connection of `lane` to/from `peer`, created on first use (never blocks).
  Result sendConnection(int peer, int lane, SendConnection** out);
  Result recvConnection(int peer, int lane, RecvConnection** out);
  // Creates the receiving end of `lane` from every peer, as far as it can (best effort, quietly:
  // a lane that cannot be created is left out). For the mismatch look of a long stall and for
  // finalize (stream_checks.cc, finalize.cc): where a receiver creates its lane (shm), a peer sending
  // what no schedule of this rank reads waits for that lane until this is called. Never blocks.
  // Such lanes are opened only to look (Transport::connectRecvToLook: on shm a page or two each
  // instead of the slots' reserved memory); recvConnection() completes one when a step needs it.
  void openRecvLanes(int lane);
  // The receiving end of `lane` from `peer` if it was ever created, else nullptr (never creates).
  RecvConnection* existingRecvConnection(int peer, int lane) {
    return recvConns_.empty() ? nullptr : recvConns_[static_cast<size_t>(peer) * kNumLanes + lane].conn.get();
  }
  // Drives transport background work (accepting connections).
  Result progressTransports();
  // User buffers registered with this communicator (user_regions.h).
  UserRegions& regions() { return regions_; }
  // Passes registrations dropped since the last call on to the transports (engine thread).
  void dropStaleRegions();
  // Descriptors that wake an idle wait early (Transport::armWait), appended to *fds.
  void armWait(std::vector<int>* fds) {
    for (TransportSlot& slot : transports_) slot.transport->armWait(fds);
  }

  // Abort: every wait on this communicator returns promptly with an error; irreversible.
  // Sequentially consistent, as close(): see there. Also aborts the communicators a split or
  // shrink of this one is initialising (addInitChild).
  void abort();
  // While a split or shrink of this communicator initialises `child`, an abort of this one aborts
  // the child too: the child's init waits at its own root for members that may never come, and
  // the abort waits for that call (waitForCalls). An aborted parent aborts a child at once.
  void addInitChild(Communicator* child);
  void removeInitChild(Communicator* child);
  bool aborted() const { return abort_.load(std::memory_order_acquire); }
  const std::atomic<bool>* abortFlag() const { return &abort_; }
  // Revoke: operations in flight and later ones fail; the bootstrap stays usable for shrink.
  void revoke() { revoked_.store(true, std::memory_order_release); }
  bool revoked() const { return revoked_.load(std::memory_order_acquire); }

  // First error of a failed operation or of the init thread; kInProgress while initialising.
  Result asyncError() const { return static_cast<Result>(asyncError_.load(std::memory_order_acquire)); }
  // Records r; the first real error also keeps this thread's last failure message, which every
  // caller has just set with fail(), for asyncErrorMessage().
  void setAsyncError(Result r);
  // Why asyncError() failed ("" while it has not). The error usually happens on the engine or
  // init thread, while the program polls from another: ncclCommGetAsyncError hands this message
  // to the polling thread's ncclGetLastError, as NCCL's process-wide last error would show it.
  std::string asyncErrorMessage() const;

  // Sequence number of the next operation: collectives count per communicator, sends and
  // receives per peer, so the numbers agree across ranks however point-to-point calls interleave
  // with collectives (op_stamp.h).
  uint64_t nextSeq(CollKind kind, int peer) {
    if (kind == CollKind::kSend) return sendSeq_[peer]++;
    if (kind == CollKind::kRecv) return recvSeq_[peer]++;
    return seq_++;
  }
  // Closing tokens this rank, a root that only sent, has yet to read (owed_tokens.h).
  OwedTokens& owedTokens() { return owed_; }
  // The last kConnectedKept schedules whose connections on `lane` were all created
  // (Stream::connectAll): a repeat of one needs none created, since connections live as long as
  // the communicator. Several, because a group's send and receive alternate on the P2P lane.
  // Holding them keeps their addresses from being reused by other schedules. For whoever runs
  // the operations (one at a time, engine.h), like owedTokens().
  bool connectedBefore(int lane, const algo::Schedule* s) const {
    for (const auto& kept : connected_[lane]) {
      if (kept.get() == s) return true;
    }
    return false;
  }
  void noteConnected(int lane, std::shared_ptr<const algo::Schedule> s) {
    connected_[lane][connectedNext_[lane]] = std::move(s);
    connectedNext_[lane] = (connectedNext_[lane] + 1) % kConnectedKept;
  }
  // What this communicator's calls wait for (hang reports).
  WaitBoard& board() { return board_; }
  const WaitBoard& board() const { return board_; }
  // How many shrinks to exactly these surviving parent ranks came before this one (tags the
  // child's id message). Counted per member set, not per communicator: disjoint or overlapping
  // sets may shrink in turn (torch's new_group makes each subgroup on its members only), and two
  // members agree on how often their set shrank even when each also shrank with other sets.
  uint32_t nextShrinkSeq(const std::vector<int>& survivors) { return shrinkSeq_[survivors]++; }

  // kSuccess when every rank's backend reduces `dtype` with `op` (the operator the user named:
  // Avg, PreMulSum for user-created ones); kInvalidUsage naming the ranks whose backend lacks it
  // otherwise (PROTOCOL.md, "Arithmetic").
  Result checkSupported(DataType dtype, RedOpKind op, const char* fn) const;

  // User reduction operators.
  Result createPreMulSum(DataType dtype, const void* scalar, bool onHost, int* handle);
  Result destroyRedOp(int handle);
  Result lookupRedOp(int handle, const UserRedOp** out) const;

  // Calls in flight (see the class comment).
  void enterCall() { calls_.fetch_add(1, std::memory_order_seq_cst); }
  void leaveCall() { calls_.fetch_sub(1, std::memory_order_acq_rel); }
  // Waits until no call is in flight, before destroy or abort frees the communicator. A call
  // still pinned after a grace period (30 s; a call of another thread during destroy is misuse)
  // is made to fail at once (abort()); one still pinned 30 s after that is a bug, and the
  // communicator is leaked with a WARN naming the rank: false, and the caller must not free it.
  // Never returns true while a call is pinned.
  [[nodiscard]] bool waitForCalls();
  // Tests: the grace period of waitForCalls() (default 30 s).
  static void setCallGraceForTesting(std::chrono::milliseconds grace);

  // Destroy or abort has begun (the handle is gone): set before waitForCalls(). Whoever pins the
  // communicator without the handle registry (a group's ncclGroupEnd, group.h) checks it after
  // enterCall(): both sides are sequentially consistent, so either the pin is seen by
  // waitForCalls() or closed() is seen by the pinner.
  void close() { closed_.store(true, std::memory_order_seq_cst); }
  bool closed() const { return closed_.load(std::memory_order_seq_cst); }

  // References besides the handle's (group.h: a group that queued work on the communicator, or
  // an init or a task for it, keeps one until its ncclGroupEnd). They keep the memory alive past
  // destroy/abort without making those wait, as a pin does; the last one frees the communicator.
  // The handle holds the first reference (api/handle.h, freeComm).
  void hold() { refs_.fetch_add(1, std::memory_order_relaxed); }
  static void release(Communicator* c) {
    if (c->refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete c;
  }

  // The caller slot (see the class comment). kTaken: this thread now holds it and must
  // releaseCaller(); kNested: this thread held it already (group end inside a call); kBusy:
  // another thread holds it. Acquire/release order one caller's work before the next one's.
  enum class Claim { kTaken, kNested, kBusy };
  Claim claimCaller() {
    uintptr_t expected = 0;
    const uintptr_t self = callerToken();
    if (caller_.compare_exchange_strong(expected, self, std::memory_order_acquire)) return Claim::kTaken;
    return expected == self ? Claim::kNested : Claim::kBusy;
  }
  void releaseCaller() { caller_.store(0, std::memory_order_release); }
  // claimCaller() for a caller that keeps what it took in `held` (to releaseCaller() later):
  // false when another thread holds the slot. `held` grows before the claim, so a throwing
  // allocation never leaves a slot taken and unrecorded.
  bool claimCallerInto(std::vector<Communicator*>* held) {
    held->reserve(held->size() + 1);
    const Claim claim = claimCaller();
    if (claim == Claim::kTaken) held->push_back(this);
    return claim != Claim::kBusy;
  }
  // A non-zero number unique to each live thread (the address of a thread-local).
  static uintptr_t callerToken() {
    static thread_local char tag MIXCCL_TLS_FAST;
    return reinterpret_cast<uintptr_t>(&tag);
  }
  int32_t creatorPid() const { return creatorPid_; }

  // The queue of asynchronous (stream-ordered) work, created at the first queued operation by
  // the thread holding the caller slot (engine.h). existingEngine() may be called by any thread
  // that keeps the communicator alive; nullptr when nothing was ever queued.
  Engine* engine();
  Engine* existingEngine() { return engine_.get(); }
  // Finishes queued work (it fails fast after abort()) and joins the progress thread. Bounded.
  void stopEngine();

  // Non-blocking init thread bookkeeping (API layer).
  std::thread& initThread() { return initThread_; }
  void finalize() { state_.store(CommState::kFinalized, std::memory_order_release); }
  // ncclCommFinalize was accepted. Set when the call is, not when its work ends: a non-blocking
  // finalize runs in initThread(), a grouped one at ncclGroupEnd, and the calls after it (another
  // finalize, revoke, split) must see it at once rather than join or repeat it. False: it was set
  // already. Any thread may read it.
  bool markFinalizeCalled() { return !finalizeCalled_.exchange(true, std::memory_order_acq_rel); }
  bool finalizeCalled() const { return finalizeCalled_.load(std::memory_order_acquire); }

 private:
  Communicator(int nranks, int rank, const CommOptions& options);
  Result pickTransport(int peer, Transport** out);
  Result setUpLocal(const UniqueIdData& id, DeviceBackend* backend, PeerInfo* self);
  Result backendPrint(bool processWide, ArithPrint* out);
  Result checkBackends();
  Result configureTuner(size_t slotBytes);

  int nranks_;
  int rank_;
  int device_ = 0;
  int localRanks_ = 1;
  bool deviceOnHostCores_ = false;
  Tuner tuner_;
  PlanCache plans_;
  ScratchPool scratch_;  // before engine_: queued operations give their scratch back first
  CommOptions options_;
  uint64_t commHash_ = 0;
  std::atomic<CommState> state_{CommState::kInitializing};
  std::atomic<bool> abort_{false};
  std::mutex initChildrenMu_;
  std::vector<Communicator*> initChildren_;  // guarded by initChildrenMu_
  std::atomic<bool> revoked_{false};
  std::atomic<bool> finalizeCalled_{false};
  std::atomic<int> asyncError_{static_cast<int>(Result::kInProgress)};
  mutable std::mutex asyncMessageMu_;
  std::string asyncMessage_;  // guarded by asyncMessageMu_; set with the first real asyncError_
  std::atomic<int> calls_{0};
  std::atomic<bool> closed_{false};
  std::atomic<int> refs_{1};
  std::atomic<uintptr_t> caller_{0};
  const int32_t creatorPid_ = static_cast<int32_t>(getpid());
  uint64_t seq_ = 0;
  std::vector<uint64_t> sendSeq_, recvSeq_;  // per peer
  std::map<std::vector<int>, uint32_t> shrinkSeq_;
  OwedTokens owed_;
  static constexpr int kConnectedKept = 4;
  std::shared_ptr<const algo::Schedule> connected_[kNumLanes][kConnectedKept];
  int connectedNext_[kNumLanes] = {};
  WaitBoard board_;
  UserRegions regions_;

  DeviceBackend* backend_ = nullptr;
  uint32_t commonDtypes_ = ~0u;  // types / operators every rank's backend supports (checkBackends)
  uint32_t commonOps_ = ~0u;     // the process's backend (select.h), not owned
  std::unique_ptr<Bootstrap> bootstrap_;
  std::vector<PeerInfo> peers_;
  // One per built-in transport (transports/registry.h); published[p]: rank p's peer info lists
  // this transport, so the pair may use it (both ends see the same two records, so they agree).
  struct TransportSlot {
    const char* name = nullptr;  // wire name
    std::unique_ptr<Transport> transport;
    std::vector<bool> published;
  };
  std::vector<TransportSlot> transports_;
  // [peer * kNumLanes + lane]
  std::vector<std::unique_ptr<SendConnection>> sendConns_;
  struct RecvLane {
    std::unique_ptr<RecvConnection> conn;
    bool lookOnly = false;  // opened by openRecvLanes(), not reserved yet (Transport::connectRecvToLook)
  };
  std::vector<RecvLane> recvConns_;

  std::map<int, UserRedOp> redOps_;  // by handle, in order: createPreMulSum() takes the lowest free one
  std::thread initThread_;
  std::unique_ptr<Engine> engine_;
};

// The protocol version this build speaks (PROTOCOL.md); all ranks of a communicator must agree.
// 2: stamped messages, shm closed flags; 3: per-run shm names; 4: versioned, length-prefixed peer info;
// 5: the algorithm in the operation stamp; 6: canonical NaN results, the arithmetic check hashes NaN bits;
// 7: sparse closing tokens; 8: ring rounds of up to four pieces per segment at FIFO depth >= 4;
// 9: a send/recv's count in 30 bits of the operation stamp (op_stamp.h); 10: shm messages packed by
// pages in the slot ring (shm_segment.h); 11: unrooted collectives' counts in 30 bits of the stamp too;
// 12: shm payloads of 41-512 bytes in a block per message line, not a slot (shm_segment.h)
constexpr uint32_t kProtocolVersion = 12;

}  // namespace mixccl
