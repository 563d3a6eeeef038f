// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// The loop that drives a call's streams (executor.h): round-robin progress, the idle back-off,
// and, during stalls only, transport housekeeping, mismatch checks, probes, hang reports and the
// deadline.
#include <poll.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>
#include <tuple>
#include <vector>

#include "common/config.h"
#include "common/log.h"
#include "common/per_thread.h"
#include "common/socket.h"
#include "src/core/communicator.h"
#include "src/core/executor.h"

namespace mixccl {
namespace {

// Per-thread storage of partitionOps, reused from call to call: (comm, kind, peer) of a stream.
struct PartitionKeys {
  std::vector<std::tuple<Communicator*, int, int>> keys;
};

// Backs off an idle wait: spin, then yield, then nap (bounded at 200 us so latency stays low).
//
// Spinning only pays when every rank of the host has a core of its own; when ranks outnumber
// cores (threads as ranks, small test machines) a spinning rank steals the CPU from the peer it
// waits for, so the automatic default yields at once there. 8 B on 2 cores, MIXCCL_SPIN_COUNT
// 50 (the previous default) against 0, medians of 2-4 rounds: all-reduce 10.2 -> 5.2 us at 4
// ranks, 31.8 -> 27.8 at 8, 113 -> 97 at 16; broadcast 2.4 -> 1.7, 6.6 -> 4.4, 18.0 -> 11.6.
// More spins were slower still (200: 1.7-2x, 2000: 10x at 8 ranks).
class Backoff {
 public:
  explicit Backoff(int localRanks) : spins_(spinPolls(localRanks)) {}
  void reset() { idle_ = 0; }
  // `deviceOnCores`: what this wait waits for runs on this host's cores; spinning would take them.
  // A nap ends early when a transport of the streams' communicators signals news (armWait).
  void idle(bool deviceOnCores, const std::vector<Stream>& streams) {
    ++idle_;
    const int64_t spins = deviceOnCores ? std::min<int64_t>(spins_, kDeviceSpins) : spins_;
    if (idle_ < spins) return;
    if (idle_ < spins + 1000) {
      sched_yield();
      return;
    }
    timespec ts{0, std::min<long>(200000, 1000L * (idle_ - spins - 999))};
    fds_.clear();
    Communicator* last = nullptr;
    for (const Stream& s : streams) {
      if (s.empty() || s.done() || s.comm() == last) continue;
      last = s.comm();
      last->armWait(&fds_);
    }
    if (fds_.empty()) {
      nanosleep(&ts, nullptr);
      return;
    }
    pfds_.resize(fds_.size());
    for (size_t i = 0; i < fds_.size(); ++i) pfds_[i] = pollfd{fds_[i], POLLIN, 0};
    (void)ppoll(pfds_.data(), pfds_.size(), &ts, nullptr);
  }

 private:
  static constexpr int64_t kDeviceSpins = 50;
  int64_t spins_;
  int64_t idle_ = 0;
  std::vector<int> fds_;  // kept between naps: a nap allocates nothing once warm
  std::vector<pollfd> pfds_;
};

// Fills in the wait boards of the communicators of unfinished streams (hang_report.h).
void publishWaits(std::vector<Stream>& streams, Clock::time_point since) {
  std::vector<std::pair<Communicator*, std::vector<WaitBoard::Wait>>> byComm;
  for (Stream& s : streams) {
    if (s.done() || s.empty()) continue;
    auto it = std::find_if(byComm.begin(), byComm.end(), [&](const auto& e) { return e.first == s.comm(); });
    if (it == byComm.end()) it = byComm.insert(byComm.end(), {s.comm(), {}});
    it->second.push_back(s.boardWait());
  }
  for (auto& [comm, waits] : byComm) comm->board().publish(std::move(waits), since);
}

// Logs the report of every communicator with an unfinished stream, once each.
void logReports(std::vector<Stream>& streams, const char* reason) {
  std::vector<Communicator*> reported;
  for (Stream& s : streams) {
    if (s.done() || s.empty() || std::count(reported.begin(), reported.end(), s.comm()) != 0) continue;
    reported.push_back(s.comm());
    hang::logReport(*s.comm(), reason);
  }
}

void clearWaits(std::vector<Stream>& streams) {
  for (Stream& s : streams) {
    if (!s.empty()) s.comm()->board().clear();
  }
}

}  // namespace

// How long a stream waits before it looks for mismatched messages (Stream::checkPending: a
// system call per lane on TCP, so not on the latency path of small operations), and before it
// probes its peers (op_stamp.h): long enough that a healthy job rarely does, short against any
// deadline.
constexpr std::chrono::milliseconds kCheckAfter{10};
constexpr std::chrono::milliseconds kProbeAfter{200};
constexpr std::chrono::milliseconds kReprobeEvery{1000};
constexpr std::chrono::milliseconds kOpenLanesAfter{1000};

int64_t spinPolls(int localRanks) {
  int64_t spins = config::getInt(config::Knob::kSpinCount);
  if (spins < 0) {
    // hardware_concurrency() reads /sys on every call: once per process is enough.
    static const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    spins = static_cast<unsigned>(localRanks) <= cores ? 20000 : 0;
  }
  return spins;
}

void partitionOps(const std::vector<Op*>& ops, std::vector<Stream>* streams) {
  if (ops.size() == 1) {  // a call outside a group: one stream, nothing to sort
    streams->resize(1);
    (*streams)[0].reset();
    (*streams)[0].push(ops[0]);
    return;
  }
  using Key = std::tuple<Communicator*, int, int>;  // (comm, kind, peer) of a stream
  auto keyOf = [](const Op* op) {
    int peer = -1;
    int kind = 0;  // 0 collectives, 1 sends to peer, 2 receives from peer
    if (op->kind == CollKind::kSend || op->kind == CollKind::kRecv) {
      peer = op->root;
      kind = op->kind == CollKind::kSend ? 1 : 2;
    }
    return std::make_tuple(op->comm, kind, peer);
  };
  // A few streams (the usual call or group) are found by a linear search in reused storage; a
  // large group (all-to-all as sends and receives) by a map.
  constexpr size_t kLinearStreams = 16;
  auto& keys = PerThread<PartitionKeys>::get().keys;
  keys.clear();
  std::map<Key, size_t> index;
  size_t used = 0;
  auto streamFor = [&](const Key& key) -> Stream& {
    size_t at = used;
    if (used <= kLinearStreams) {
      at = static_cast<size_t>(std::find(keys.begin(), keys.end(), key) - keys.begin());
    } else {
      if (index.empty()) {
        for (size_t i = 0; i < keys.size(); ++i) index.emplace(keys[i], i);
      }
      auto it = index.find(key);
      if (it != index.end()) at = it->second;
    }
    if (at == used) {
      keys.push_back(key);
      if (!index.empty()) index.emplace(key, used);
      if (streams->size() <= used) streams->emplace_back();
      (*streams)[used].reset();
      ++used;
    }
    return (*streams)[at];
  };
  for (Op* op : ops) streamFor(keyOf(op)).push(op);
  streams->resize(used);
}

namespace {

// kInvalidUsage when a send to self waits for room in its lane and no stream of this run receives
// from self on its communicator: only such a receive frees the lane, and the thread that would
// have to call it is this one (NCCL hangs; this would wait for MIXCCL_TIMEOUT and then blame a
// hung peer). A lane still being set up is not a full one: the lane's receiving end must hold a
// message already.
Result checkSendsToSelf(const std::vector<Stream>& streams) {
  for (const Stream& s : streams) {
    if (!s.waitsForRoomToSelf()) continue;
    Communicator* comm = s.comm();
    if (std::any_of(streams.begin(), streams.end(),
                    [&](const Stream& t) { return t.comm() == comm && t.receivesFromSelf(); })) {
      continue;
    }
    RecvConnection* self = comm->existingRecvConnection(comm->rank(), kLaneP2p);
    const void* data = nullptr;
    size_t bytes = 0;
    uint64_t stamp = 0;
    if (self == nullptr || self->peek(&data, &bytes, &stamp) != Result::kSuccess) continue;
    return fail(Result::kInvalidUsage,
                "rank %d: %s, which only a receive from rank %d itself can free, and this call or group has none: "
                "a send to self that does not fit its lane needs its ncclRecv in the same "
                "ncclGroupStart/ncclGroupEnd",
                comm->rank(), s.describeWait().c_str(), comm->rank());
  }
  return Result::kSuccess;
}

}  // namespace

Result runStreams(std::vector<Stream>& streams, std::atomic<uint64_t>* progress) {
  const auto timeout = std::chrono::seconds(config::getInt(config::Knob::kTimeout));
  // Read during stalls only (below): a small call that waits a few polls reads no clock at all.
  Clock::time_point lastProgress{};
  bool progressed = true;  // a stream advanced since lastProgress was read (or it was never read)
  int localRanks = 1;
  for (Stream& s : streams) {
    if (!s.empty()) localRanks = std::max(localRanks, s.comm()->localRanks());
  }
  Backoff backoff(localRanks);
  uint64_t polls = 0;
  bool published = false;  // the wait boards describe the current stall
  bool timedOut = false;
  Result result = Result::kSuccess;
  for (;;) {
    bool allDone = true;
    bool advanced = false;
    for (Stream& s : streams) {
      if (s.done() || s.empty()) continue;
      Result r = s.progress(&advanced);
      if (r != Result::kSuccess) {
        result = s.preferMismatch(r);
        break;
      }
      allDone = allDone && s.done();
    }
    if (result != Result::kSuccess || allDone) break;
    if (advanced) {
      backoff.reset();
      progressed = true;
      if (progress != nullptr) progress->fetch_add(1, std::memory_order_relaxed);
      if (published) clearWaits(streams);
      published = false;
      continue;
    }
    bool deviceOnCores = false;
    for (const Stream& s : streams) deviceOnCores = deviceOnCores || (!s.done() && s.waitsOnHostCoreDevice());
    backoff.idle(deviceOnCores, streams);
    if ((++polls & 63) != 0) continue;
    // Every 64 idle polls: transport housekeeping (a TCP accept is a system call, too costly
    // for every poll; connections an operation uses are driven by its own steps) and the flags.
    // The clock is read here only, not per step or per stall: a small operation waits a few
    // polls for its peer, and a reading costs about as much as a step. A stall thus counts
    // from its 64th idle poll, microseconds late against deadlines of seconds.
    const auto now = Clock::now();
    if (progressed) {
      lastProgress = now;
      progressed = false;
    }
    const auto idleFor = now - lastProgress;
    for (Stream& s : streams) {
      if (s.done() || s.empty()) continue;
      result = s.comm()->progressTransports();
      if (result == Result::kSuccess) result = s.checkFlags();
      if (result == Result::kSuccess && idleFor > kCheckAfter) {
        const Stream::Stall stall = idleFor > kOpenLanesAfter ? Stream::Stall::kOpenLanes
                                    : idleFor > kProbeAfter   ? Stream::Stall::kProbe
                                                              : Stream::Stall::kLook;
        const int probeRound =
            idleFor > kProbeAfter ? 1 + static_cast<int>((idleFor - kProbeAfter) / kReprobeEvery) : 0;
        result = s.checkPending(stall, probeRound);
      }
      if (result != Result::kSuccess) break;
    }
    if (result == Result::kSuccess && idleFor > kOpenLanesAfter) result = checkSendsToSelf(streams);
    if (result != Result::kSuccess) break;
    if (!published && idleFor > kPublishAfter) {
      publishWaits(streams, lastProgress);
      published = true;
    }
    if (Clock::now() - lastProgress > timeout) {
      publishWaits(streams, lastProgress);
      published = timedOut = true;
      logReports(streams, "MIXCCL_TIMEOUT");
      for (Stream& s : streams) {
        if (s.done() || s.empty()) continue;
        result = fail(Result::kRemoteError,
                      "rank %d: no progress for %lld s (MIXCCL_TIMEOUT) in %s; that peer is hung, dead, or "
                      "called a different operation",
                      s.comm()->rank(), static_cast<long long>(timeout.count()), s.describeWait().c_str());
        break;
      }
      break;
    }
  }
  if (result != Result::kSuccess) {
    for (Stream& s : streams) {
      if (!s.empty() && !s.done()) s.comm()->setAsyncError(result);
      s.dropPending();
    }
  }
  if (published) {
    // A call that was stuck and then failed (a peer died or left, an abort, a mismatch) tells
    // where it stood too: the first rank to reach its deadline aborts, and its peers fail on
    // that before their own deadlines, but their reports are the ones that name the late rank.
    if (result != Result::kSuccess && !timedOut) {
      logReports(streams, "the blocked call failed");
    }
    clearWaits(streams);
  }
  return result;
}

}  // namespace mixccl
