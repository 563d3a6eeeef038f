// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "src/core/communicator.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "common/config.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/no_throw.h"
#include "common/pid_space.h"
#include "common/version.h"
#include "src/core/engine.h"
#include "src/device/select.h"
#include "transports/registry.h"

namespace mixccl {

Communicator::Communicator(int nranks, int rank, const CommOptions& options)
    : nranks_(nranks),
      rank_(rank),
      options_(options),
      sendSeq_(static_cast<size_t>(nranks), 0),
      recvSeq_(static_cast<size_t>(nranks), 0),
      board_(nranks) {}

Communicator::~Communicator() {
  hang::unregisterComm(this);  // first: a signal dump may be reading this communicator
  if (initThread_.joinable()) initThread_.join();
  stopEngine();  // its thread drives the connections freed below
  // Connections before transports (a connection may refer to its transport's state).
  sendConns_.clear();
  recvConns_.clear();
  transports_.clear();
  bootstrap_.reset();
}

std::unique_ptr<Communicator> Communicator::makeUninitialised(int nranks, int rank, const CommOptions& options) {
  return std::unique_ptr<Communicator>(new Communicator(nranks, rank, options));
}

Result Communicator::create(const UniqueIdData& id, int nranks, int rank, const CommOptions& options,
                            std::unique_ptr<Communicator>* out) {
  std::unique_ptr<Communicator> comm = makeUninitialised(nranks, rank, options);
  MIXCCL_TRY(comm->init(id));
  *out = std::move(comm);
  return Result::kSuccess;
}

void Communicator::setAsyncError(Result r) {
  int expected = static_cast<int>(Result::kSuccess);
  // Keep the first real error; kInProgress (initialising) may be replaced by anything.
  bool stored = asyncError_.compare_exchange_strong(expected, static_cast<int>(r));
  if (!stored) {
    expected = static_cast<int>(Result::kInProgress);
    stored = asyncError_.compare_exchange_strong(expected, static_cast<int>(r));
  }
  if (stored && r != Result::kSuccess && r != Result::kInProgress) {
    std::lock_guard<std::mutex> lock(asyncMessageMu_);
    asyncMessage_ = lastFailure();
  }
}

std::string Communicator::asyncErrorMessage() const {
  std::lock_guard<std::mutex> lock(asyncMessageMu_);
  return asyncMessage_;
}

// The arithmetic fingerprints of this rank's backend (arith_check.h). The process's backend lives
// until exit and its arithmetic never changes, so its print is computed once per process; a
// backend a test passed in (CommOptions::backend) is checked every time.
Result Communicator::backendPrint(bool processWide, ArithPrint* out) {
  if (!processWide) return arithmeticPrint(*backend_, out);
  static std::mutex mu;
  static ArithPrint cached{};
  static bool have = false;
  std::lock_guard<std::mutex> lk(mu);
  if (!have) {
    MIXCCL_TRY(arithmeticPrint(*backend_, &cached));
    have = true;
  }
  *out = cached;
  return Result::kSuccess;
}

// Every rank agrees on the arithmetic of every type two backends share (init fails otherwise, on
// every rank alike); the types and operators all backends support bound what reductions may use
// (copies move bytes and need no support of their type).
Result Communicator::checkBackends() {
  std::vector<ArithFacts> facts(static_cast<size_t>(nranks_));
  commonDtypes_ = ~0u;
  commonOps_ = ~0u;
  for (int p = 0; p < nranks_; ++p) {
    const PeerBackendInfo& b = peers_[p].backend;
    facts[p] = ArithFacts{b.name, b.dtypes, b.arithmetic};
    commonDtypes_ &= b.dtypes;
    commonOps_ &= b.ops;
  }
  return compareArithmetic(facts, rank_);
}

Result Communicator::checkSupported(DataType dtype, RedOpKind op, const char* fn) const {
  const uint32_t typeBit = 1u << static_cast<int>(dtype);
  const uint32_t opBit = 1u << static_cast<int>(op);
  if ((commonDtypes_ & typeBit) != 0 && (commonOps_ & opBit) != 0) return Result::kSuccess;
  std::string lacking;
  for (int p = 0; p < nranks_ && lacking.size() < 200; ++p) {
    const PeerBackendInfo& b = peers_[p].backend;
    if ((b.dtypes & typeBit) != 0 && (b.ops & opBit) != 0) continue;
    if (!lacking.empty()) lacking += ", ";
    lacking += "rank " + std::to_string(p) + " (" + b.name + ")";
  }
  return fail(Result::kInvalidUsage,
              "%s on rank %d: %s with %s is not supported by the device backend of %s; use another data type or "
              "operator, or give those ranks a backend that supports it",
              fn, rank_, dataTypeName(dtype), redOpName(op), lacking.c_str());
}

// This rank's own part of init, before the peer-info exchange: the backend, the transports and
// their listen blobs, the backend's facts and arithmetic fingerprints, into *self.
Result Communicator::setUpLocal(const UniqueIdData& id, DeviceBackend* backend, PeerInfo* self) {
  backend_ = backend;
  // ncclCommCuDevice: a device backend knows its device (MIXCCL_OPENCL_DEVICE for OpenCL); the
  // host backend keeps what ncclCommInitAll's device list said.
  if (backend_->wireId() != 0) device_ = backend_->deviceIndex();
  TransportContext ctx;
  ctx.rank = rank_;
  ctx.nranks = nranks_;
  ctx.commHash = id.commHash;
  memcpy(ctx.secret, id.secret, sizeof(ctx.secret));
  // Checked as read, before narrowing: MIXCCL_FIFO_DEPTH=4294967297 would otherwise pass as 1.
  const int64_t slotBytes = config::getInt(config::Knob::kChunkSize);
  const int64_t fifoDepth = config::getInt(config::Knob::kFifoDepth);
  if (slotBytes < 4096 || slotBytes > (int64_t{1} << 30) || fifoDepth < 1 || fifoDepth > 1024) {
    return fail(Result::kInvalidArgument,
                "MIXCCL_CHUNK_SIZE=%lld / MIXCCL_FIFO_DEPTH=%lld out of range (4 KiB..1 GiB, 1..1024)",
                static_cast<long long>(slotBytes), static_cast<long long>(fifoDepth));
  }
  ctx.slotBytes = static_cast<size_t>(slotBytes);
  ctx.fifoDepth = static_cast<int>(fifoDepth);
  ctx.abortFlag = &abort_;
  size_t numTransports = 0;
  const TransportComponent* registered = builtinTransports(&numTransports);
  for (size_t i = 0; i < numTransports; ++i) {
    TransportSlot slot;
    slot.name = registered[i].name;
    slot.transport = registered[i].make(ctx);
    if (!slot.transport) {
      return fail(Result::kSystemError, "rank %d could not create the %s transport (out of memory?)", rank_, slot.name);
    }
    transports_.push_back(std::move(slot));
  }
  for (TransportSlot& slot : transports_) {
    PeerTransportInfo t;
    t.name = slot.name;
    MIXCCL_TRY(slot.transport->listen(&t.blob));
    self->transports.push_back(std::move(t));
  }
  const BackendCaps caps = backend_->caps();
  self->backend.wireId = backend_->wireId();
  self->backend.name = backend_->name();
  self->backend.dtypes = caps.dtypes;
  self->backend.ops = caps.ops;
  self->backend.flags = caps.flags;
  return backendPrint(options_.backend == nullptr, &self->backend.arithmetic);
}

Result Communicator::init(const UniqueIdData& id, const std::vector<UniqueIdData>& spareRoots) {
  log::RankScope scope(rank_);
  config::logNonDefaults();
  // The process's device backend (MIXCCL_DEVICE_BACKEND), shared by every communicator, unless a
  // test passed its own; a failure to create it fails this init with its message.
  DeviceBackend* backend = options_.backend;
  const Result backendResult = backend != nullptr ? Result::kSuccess : processBackend(&backend);
  version::logBanner(backend != nullptr ? (std::string(backend->name()) + " backend").c_str() : "no device backend");
  raiseFileLimit();  // a socket or shm file per peer outgrows a soft limit of 1024 (limits.h)
  // Its message, before anything else can record another.
  const std::string backendError = backendResult != Result::kSuccess ? lastError() : std::string();
  // noThrow: init runs on threads of its own too (non-blocking init, ncclCommInitAll, groups).
  Result r = noThrow("communicator init", [&]() -> Result {
    commHash_ = id.commHash;
    // Joined even when this rank cannot take part: its peer-info record then says why (the
    // init-failure field), so the others fail at once naming it instead of waiting for it until
    // their deadline.
    MIXCCL_TRY(Bootstrap::init(id, rank_, nranks_, &abort_, &bootstrap_));
    // Right after joining, so that a later failure of this init leaves no root waiting either.
    if (rank_ == 0) {
      for (const UniqueIdData& spare : spareRoots) bootstrap_->releaseRoot(spare);
    }
    PeerInfo self;
    self.protocolVersion = kProtocolVersion;
    self.rank = rank_;
    self.nranks = nranks_;
    self.pid = getpid();
    self.hostHash = localHostHash();
    self.pidSpace = localPidSpace();
    self.host = localHostName();
    Result local = backendResult != Result::kSuccess ? fail(backendResult, "%s", backendError.c_str())
                                                     : setUpLocal(id, backend, &self);
    if (local != Result::kSuccess) {
      self.initResult = static_cast<uint32_t>(local);
      self.initError = lastError();
    }
    // Every rank contributes a record of the same fixed capacity (PROTOCOL.md, "Peer info").
    std::vector<uint8_t> table(PeerInfo::kWireBytes * nranks_);
    MIXCCL_TRY(self.encode(table.data() + PeerInfo::kWireBytes * rank_, PeerInfo::kWireBytes));
    Result gathered = bootstrap_->allGather(table.data(), PeerInfo::kWireBytes);
    if (local != Result::kSuccess) return fail(local, "%s", self.initError.c_str());
    MIXCCL_TRY(gathered);
    peers_.resize(nranks_);
    for (int p = 0; p < nranks_; ++p) {
      MIXCCL_TRY(PeerInfo::decode(table.data() + PeerInfo::kWireBytes * p, PeerInfo::kWireBytes, p, &peers_[p]));
      if (peers_[p].initResult != 0) {
        return fail(Result::kRemoteError,
                    "rank %d (host %s, pid %d) could not set up its part of the communicator: %s; this rank (%d) "
                    "gave up its init too",
                    p, peers_[p].host.c_str(), peers_[p].pid, peers_[p].initError.c_str(), rank_);
      }
      if (peers_[p].protocolVersion != kProtocolVersion || peers_[p].rank != p || peers_[p].nranks != nranks_) {
        return fail(Result::kInvalidUsage,
                    "rank %d (host %s, pid %d) speaks protocol %u as rank %d of %d; this rank speaks protocol %u as "
                    "rank %d of %d: every rank must run a compatible mixccl build with the same nranks",
                    p, peers_[p].host.c_str(), peers_[p].pid, peers_[p].protocolVersion, peers_[p].rank,
                    peers_[p].nranks, kProtocolVersion, rank_, nranks_);
      }
    }
    MIXCCL_TRY(checkBackends());
    localRanks_ = 0;
    deviceOnHostCores_ = false;
    for (const PeerInfo& p : peers_) {
      if (p.hostHash != peers_[rank_].hostHash) continue;
      ++localRanks_;
      deviceOnHostCores_ = deviceOnHostCores_ || (p.backend.flags & kCapSharesHostCores) != 0;
    }
    std::vector<TransportPeer> tpeers(nranks_);
    for (TransportSlot& slot : transports_) {
      slot.published.assign(nranks_, false);
      for (int p = 0; p < nranks_; ++p) {
        const PeerTransportInfo* t = peers_[p].transport(slot.name);
        slot.published[p] = t != nullptr;
        tpeers[p].rank = p;
        tpeers[p].hostHash = peers_[p].hostHash;
        // A pid from another pid namespace must never reach kill() (PROTOCOL.md 6.1).
        tpeers[p].otherPidSpace = !samePidSpace(peers_[p].pidSpace, peers_[rank_].pidSpace);
        tpeers[p].pid = tpeers[p].otherPidSpace ? 0 : peers_[p].pid;
        tpeers[p].reportedPid = peers_[p].pid;
        tpeers[p].host = peers_[p].host;
        tpeers[p].blob = t ? t->blob : std::vector<uint8_t>{};  // empty: that rank's build lacks it
      }
      MIXCCL_TRY(slot.transport->setPeers(tpeers));
    }
    MIXCCL_TRY(configureTuner(static_cast<size_t>(config::getInt(config::Knob::kChunkSize))));
    sendConns_.resize(static_cast<size_t>(nranks_) * kNumLanes);
    recvConns_.resize(static_cast<size_t>(nranks_) * kNumLanes);
    return Result::kSuccess;
  });
  if (r != Result::kSuccess) {
    state_.store(CommState::kFailed, std::memory_order_release);
    setAsyncError(r);
    return r;
  }
  state_.store(CommState::kReady, std::memory_order_release);
  asyncError_.store(static_cast<int>(Result::kSuccess), std::memory_order_release);
  hang::registerComm(this);
  hang::installSignalDump();
  MIXCCL_INFO(log::kInit, "comm %p rank %d nranks %d commHash %016llx%s%s - Init COMPLETE", static_cast<void*>(this),
              rank_, nranks_, static_cast<unsigned long long>(commHash_), options_.name.empty() ? "" : " name ",
              options_.name.c_str());
  return Result::kSuccess;
}

// The tuner's facts come from the peer table, which every rank holds identically: the hosts,
// and whether every rank offers shared memory (NCCL_SHM_DISABLE may differ between ranks).
Result Communicator::configureTuner(size_t slotBytes) {
  TuneFacts facts;
  facts.nranks = nranks_;
  std::vector<uint64_t> hosts;
  for (const PeerInfo& p : peers_) {
    if (std::find(hosts.begin(), hosts.end(), p.hostHash) == hosts.end()) hosts.push_back(p.hostHash);
  }
  facts.nhosts = static_cast<int>(hosts.size());
  bool everyRankShm = true;
  for (const PeerInfo& p : peers_) {
    const PeerTransportInfo* shm = p.transport("shm");
    everyRankShm = everyRankShm && shm != nullptr && !shm->blob.empty();  // empty: NCCL_SHM_DISABLE there
  }
  facts.shm = facts.nhosts == 1 && everyRankShm;
  facts.chunkBytes = slotBytes;
  facts.deterministic = config::getBool(config::Knob::kDeterministic);
  // Every process of a host reads the same online core count; across hosts it may differ, and
  // the peer table does not carry it yet, so only a one-host communicator uses it.
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (facts.nhosts == 1 && cores > 0) facts.ranksPerCore = static_cast<int>((nranks_ + cores - 1) / cores);
  return tuner_.configure(config::getString(config::Knob::kAlgo), config::getString(config::Knob::kProto), facts);
}

// Both ends of a pair decide alone from the same records, so the choice must not depend on the
// order a build registered its transports in: highest canConnect() score, ties to the lower name.
Result Communicator::pickTransport(int peer, Transport** out) {
  int best = 0;
  const char* bestName = nullptr;
  *out = nullptr;
  for (TransportSlot& slot : transports_) {
    if (!slot.published[peer]) continue;
    const int score = slot.transport->canConnect(peer);
    if (score > best || (score == best && score > 0 && strcmp(slot.name, bestName) < 0)) {
      best = score;
      bestName = slot.name;
      *out = slot.transport.get();
    }
  }
  if (*out == nullptr) {
    return fail(Result::kSystemError,
                "no transport can reach rank %d (host %s) from rank %d (transports here: %s): check "
                "NCCL_SHM_DISABLE and NCCL_SOCKET_IFNAME",
                peer, peers_[peer].host.c_str(), rank_, builtinTransportNames().c_str());
  }
  return Result::kSuccess;
}

Result Communicator::sendConnection(int peer, int lane, SendConnection** out) {
  auto& slot = sendConns_[static_cast<size_t>(peer) * kNumLanes + lane];
  if (!slot) {
    Transport* t = nullptr;
    MIXCCL_TRY(pickTransport(peer, &t));
    MIXCCL_TRY(t->connectSend(peer, lane, &slot));
    MIXCCL_INFO(log::kInit | log::kP2p, "lane %d to rank %d via %s", lane, peer, t->name());
    // A lane to this rank itself: its receiving end is this thread's too. On shm the receiver
    // creates a lane, so a send to self outside a group (ncclSend, then ncclRecv from self) waited
    // for a lane only its own later call would create, until MIXCCL_TIMEOUT, where TCP took the
    // message at once. With both ends made here, a message that fits the lane goes out as on TCP.
    if (peer == rank_) {
      RecvConnection* self = nullptr;
      MIXCCL_TRY(recvConnection(peer, lane, &self));
    }
  }
  *out = slot.get();
  return Result::kSuccess;
}

Result Communicator::recvConnection(int peer, int lane, RecvConnection** out) {
  RecvLane& slot = recvConns_[static_cast<size_t>(peer) * kNumLanes + lane];
  if (!slot.conn) {
    Transport* t = nullptr;
    MIXCCL_TRY(pickTransport(peer, &t));
    MIXCCL_TRY(t->connectRecv(peer, lane, &slot.conn));
    MIXCCL_INFO(log::kInit | log::kP2p, "lane %d from rank %d via %s", lane, peer, t->name());
  } else if (slot.lookOnly) {
    MIXCCL_TRY(slot.conn->reserve());
    slot.lookOnly = false;
  }
  *out = slot.conn.get();
  return Result::kSuccess;
}

void Communicator::openRecvLanes(int lane) {
  if (recvConns_.empty()) return;  // not set up
  QuietFailures quiet;
  for (int peer = 0; peer < nranks_; ++peer) {
    RecvLane& slot = recvConns_[static_cast<size_t>(peer) * kNumLanes + lane];
    Transport* t = nullptr;
    if (peer == rank_ || slot.conn || pickTransport(peer, &t) != Result::kSuccess) continue;
    if (t->connectRecvToLook(peer, lane, &slot.conn) == Result::kSuccess) slot.lookOnly = true;
  }
}

Result Communicator::progressTransports() {
  for (TransportSlot& slot : transports_) MIXCCL_TRY(slot.transport->progress());
  return Result::kSuccess;
}

void Communicator::dropStaleRegions() {
  if (!regions_.hasDropped()) return;
  const std::vector<uint64_t> ids = regions_.takeDropped();
  for (TransportSlot& slot : transports_) slot.transport->dropRegions(ids);
}

void Communicator::abort() {
  abort_.store(true, std::memory_order_seq_cst);
  std::lock_guard<std::mutex> lock(initChildrenMu_);
  for (Communicator* child : initChildren_) child->abort();
}

void Communicator::addInitChild(Communicator* child) {
  std::lock_guard<std::mutex> lock(initChildrenMu_);
  initChildren_.push_back(child);
  if (aborted()) child->abort();
}

void Communicator::removeInitChild(Communicator* child) {
  std::lock_guard<std::mutex> lock(initChildrenMu_);
  initChildren_.erase(std::remove(initChildren_.begin(), initChildren_.end(), child), initChildren_.end());
}

Result Communicator::createPreMulSum(DataType dtype, const void* scalar, bool onHost, int* handle) {
  UserRedOp op;
  op.dtype = dtype;
  op.scalarOnHost = onHost;
  if (onHost) {
    memcpy(op.scalar, scalar, dataTypeSize(dtype));
  } else {
    op.scalarPtr = scalar;
  }
  // The lowest free handle, as NCCL hands out freed ones again: PyTorch creates and destroys an
  // operator per premul_sum call, and counting up would run out after 2^31 calls of a long job.
  int free = kNumBuiltinOps;
  for (const auto& entry : redOps_) {
    if (entry.first != free) break;
    ++free;
  }
  if (free == INT32_MAX) {
    return fail(Result::kInvalidUsage, "too many reduction operators created on rank %d; destroy unused ones", rank_);
  }
  *handle = free;
  redOps_[*handle] = op;
  return Result::kSuccess;
}

Result Communicator::destroyRedOp(int handle) {
  if (redOps_.erase(handle) == 0) {
    return fail(Result::kInvalidArgument,
                "ncclRedOpDestroy: operator %d was not created on this communicator (rank %d) "
                "or was already destroyed",
                handle, rank_);
  }
  return Result::kSuccess;
}

Result Communicator::lookupRedOp(int handle, const UserRedOp** out) const {
  auto it = redOps_.find(handle);
  if (it == redOps_.end()) {
    return fail(Result::kInvalidArgument,
                "reduction operator %d is neither built-in nor created on this communicator "
                "(rank %d)",
                handle, rank_);
  }
  *out = &it->second;
  return Result::kSuccess;
}

Engine* Communicator::engine() {
  if (!engine_) engine_ = std::make_unique<Engine>(this);
  return engine_.get();
}

void Communicator::stopEngine() {
  if (engine_) engine_->stop();
}

namespace {
std::atomic<int64_t> gCallGraceMs{30000};
}  // namespace

void Communicator::setCallGraceForTesting(std::chrono::milliseconds grace) { gCallGraceMs.store(grace.count()); }

bool Communicator::waitForCalls() {
  auto waitUntil = [this](std::chrono::steady_clock::time_point until) {
    while (calls_.load(std::memory_order_seq_cst) > 0) {
      if (std::chrono::steady_clock::now() >= until) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return true;
  };
  // Calls observe the abort flag within milliseconds; a destroy lets them finish first. A call of
  // another thread may block much longer (a peer that never joins: until MIXCCL_TIMEOUT), and
  // freeing under it crashed, so the grace period ends in an abort, never in a free.
  const auto grace = std::chrono::milliseconds(gCallGraceMs.load());
  if (waitUntil(std::chrono::steady_clock::now() + grace)) return true;
  if (!aborted()) {
    MIXCCL_WARN(
        "rank %d: ncclCommDestroy: another thread is still inside a call on this communicator after %lld ms; "
        "aborting that call so the communicator can be freed (NCCL allows no call during destroy)",
        rank_, static_cast<long long>(grace.count()));
    abort();
  }
  if (waitUntil(std::chrono::steady_clock::now() + std::chrono::seconds(30))) return true;
  MIXCCL_WARN(
      "rank %d: a call on this communicator did not end within 30 s of the abort; the communicator is leaked "
      "(not freed) so that call cannot crash",
      rank_);
  return false;
}

}  // namespace mixccl
