// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "algorithms/timing_sim.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

namespace mixccl::algo {
namespace {

constexpr uint32_t kNoLink = UINT32_MAX;
// In PackedStep::countFlags: the step combines, a message OP a local source, or the operands of a
// multi-source step (its fold factor, operands - 1, is in TimingSimulator::folds_).
constexpr uint32_t kCombine = 1u << 31;
constexpr uint64_t kMaxMessageElems = kCombine - 1;
constexpr int kSampleRanks = 64;  // ranks built to estimate a run's steps (checkBudget)

// What timing needs of a Step: which links it reads and writes, and the message size.
struct PackedStep {
  uint32_t recvLink;
  uint32_t sendLink;
  uint32_t countFlags;
};
static_assert(sizeof(PackedStep) == 12, "the header promises 12 bytes per step");

struct InFlight {
  double arrival;
  uint64_t hop;  // the sender's hop clock at the step's start (sim.cc's sentAt)
  uint32_t count;
};

// One (src, dst) pair. `inFlight` and `freed` are rings of `cap` entries at slotBase in the
// run's slot arrays: messages sent and not yet received, and the times at which received
// messages released their slots (the send that reuses a slot starts no earlier).
struct Link {
  int32_t src = 0;
  int32_t dst = 0;
  bool inter = false;
  uint32_t cap = 1;
  uint64_t slotBase = 0;
  uint64_t planned = 0;  // messages the schedules send on it
  uint64_t sent = 0;
  uint32_t head = 0, size = 0;
  uint32_t freedHead = 0, freedSize = 0;
  double busyUntil = 0;  // when the link finished carrying its last message
  uint64_t bytes = 0;
};

struct RankState {
  uint64_t next = 0;  // index in steps_ of the rank's next step
  uint64_t end = 0;
  double clock = 0;
  uint64_t hops = 0;
  uint32_t waitLink = kNoLink;  // the link whose event wakes this rank (kNoLink: not asleep)
};

// Open addressing over (src, dst) -> link id; grows at half load, so a lookup is a probe or two.
class LinkTable {
 public:
  // The id of (src, dst), `fresh` when it was added now with id `nextId`.
  uint32_t find(int src, int dst, uint32_t nextId, bool* fresh) {
    if (2 * (used_ + 1) > keys_.size()) grow();
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(src)) << 32) | static_cast<uint32_t>(dst);
    const size_t mask = keys_.size() - 1;
    for (size_t i = hash(key) & mask;; i = (i + 1) & mask) {
      if (keys_[i] == key) {
        *fresh = false;
        return ids_[i];
      }
      if (keys_[i] == kEmpty) {
        keys_[i] = key;
        ids_[i] = nextId;
        ++used_;
        *fresh = true;
        return nextId;
      }
    }
  }
  size_t bytes() const { return keys_.capacity() * sizeof(uint64_t) + ids_.capacity() * sizeof(uint32_t); }

 private:
  static constexpr uint64_t kEmpty = UINT64_MAX;
  static uint64_t hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
  }
  void grow() {
    std::vector<uint64_t> oldKeys = std::move(keys_);
    std::vector<uint32_t> oldIds = std::move(ids_);
    const size_t n = std::max<size_t>(64, oldKeys.size() * 2);
    keys_.assign(n, kEmpty);
    ids_.assign(n, 0);
    for (size_t j = 0; j < oldKeys.size(); ++j) {
      if (oldKeys[j] == kEmpty) continue;
      for (size_t i = hash(oldKeys[j]) & (n - 1);; i = (i + 1) & (n - 1)) {
        if (keys_[i] == kEmpty) {
          keys_[i] = oldKeys[j];
          ids_[i] = oldIds[j];
          break;
        }
      }
    }
  }
  std::vector<uint64_t> keys_;
  std::vector<uint32_t> ids_;
  size_t used_ = 0;
};

class TimingSimulator {
 public:
  TimingSimulator(const TimingOptions& o, const ScheduleSource& source) : opt_(o), source_(source) {}

  Result run(TimingStats* stats) {
    MIXCCL_TRY(checkOptions());
    Result r = checkBudget();
    if (r == Result::kSuccess) r = build();
    if (r != Result::kSuccess) {
      if (stats != nullptr && overBudgetSteps_ > 0) {
        *stats = TimingStats{};
        stats->overBudget = true;
        stats->budgetSteps = overBudgetSteps_;
      }
      return r;
    }
    std::vector<int32_t> work;
    work.reserve(static_cast<size_t>(opt_.nranks));
    for (int r = opt_.nranks - 1; r >= 0; --r) work.push_back(r);
    while (!work.empty()) {
      const int r = work.back();
      work.pop_back();
      MIXCCL_TRY(advance(r, &work));
    }
    return finish(stats);
  }

 private:
  Result checkOptions() const {
    if (opt_.nranks < 1 || opt_.fifoDepth < 1 || opt_.elemBytes == 0) {
      return fail(Result::kInvalidArgument,
                  "simulateTiming: nranks %d, fifoDepth %u and elemBytes %llu must all be at least 1", opt_.nranks,
                  opt_.fifoDepth, static_cast<unsigned long long>(opt_.elemBytes));
    }
    return Result::kSuccess;
  }

  // Estimates the run's steps from a sample of ranks before building them all, so that a run far
  // over the budget is refused in a fraction of a second instead of after minutes of building.
  // The sample is spread by the golden ratio rather than evenly: even spacing lands on ranks
  // whose numbers share many low zero bits, which trees make inner nodes with many children
  // (a binomial broadcast's ranks k*p/8 have log2(p/8) children; a typical rank has one or none).
  Result checkBudget() {
    const int n = opt_.nranks;
    if (opt_.minSteps > static_cast<double>(opt_.stepBudget)) {
      return overBudget(opt_.minSteps, " or more (a message carries at most one chunk)",
                        "simulate fewer bytes, a larger chunk or fewer ranks, or raise the budget");
    }
    std::vector<int> sample;
    if (n <= kSampleRanks) {
      for (int r = 0; r < n; ++r) sample.push_back(r);
    } else {
      double x = 0;
      for (int j = 0; j < kSampleRanks; ++j, x += 0.6180339887498949) {
        sample.push_back(static_cast<int>((x - static_cast<int64_t>(x)) * n));
      }
    }
    std::sort(sample.begin(), sample.end());
    sample.erase(std::unique(sample.begin(), sample.end()), sample.end());
    double sum = 0;
    Schedule s;
    for (int r : sample) {
      MIXCCL_TRY(source_(r, &s));
      sum += static_cast<double>(s.steps.size());
    }
    estimate_ = sum / static_cast<double>(sample.size()) * n;
    if (estimate_ > static_cast<double>(opt_.stepBudget)) {
      char where[64];
      snprintf(where, sizeof(where), " (estimated from %zu sampled ranks)", sample.size());
      return overBudget(estimate_, where);
    }
    return Result::kSuccess;
  }

  // `how`: how `steps` was found (estimated, extrapolated, a lower bound); `advice`: what to do.
  Result overBudget(double steps, const char* how,
                    const char* advice =
                        "a ring schedule has about 2(p-1) steps per rank and round, so large rings do not fit. "
                        "Simulate fewer ranks or raise the budget") {
    overBudgetSteps_ = steps;
    return fail(Result::kInvalidUsage,
                "%s at %d ranks: about %.4g steps%s, %.4g per rank, exceed the step budget of %llu steps (%zu bytes "
                "each); %s",
                opt_.label.c_str(), opt_.nranks, steps, how, steps / opt_.nranks,
                static_cast<unsigned long long>(opt_.stepBudget), sizeof(PackedStep), advice);
  }

  uint32_t linkOf(int src, int dst) {
    bool fresh = false;
    const uint32_t id = table_.find(src, dst, static_cast<uint32_t>(links_.size()), &fresh);
    if (fresh) {
      Link l;
      l.src = src;
      l.dst = dst;
      l.inter = hostOf(src) != hostOf(dst);
      links_.push_back(l);
    }
    return id;
  }

  int hostOf(int rank) const {
    return opt_.ranksPerHost <= 0 || opt_.ranksPerHost >= opt_.nranks ? 0 : rank / opt_.ranksPerHost;
  }

  Result build() {
    const int n = opt_.nranks;
    ranks_.assign(static_cast<size_t>(n), {});
    steps_.reserve(static_cast<size_t>(std::min(estimate_ * 1.05 + 16, static_cast<double>(opt_.stepBudget))));
    Schedule s;
    for (int r = 0; r < n; ++r) {
      MIXCCL_TRY(source_(r, &s));
      if (steps_.size() + s.steps.size() > opt_.stepBudget) {
        return overBudget(static_cast<double>(steps_.size() + s.steps.size()) * n / (r + 1),
                          " (extrapolated from the ranks built so far)");
      }
      ranks_[r].next = steps_.size();
      // Consecutive steps mostly talk to the same peers (rings always do): skip the table then.
      int lastRecv = -1, lastSend = -1;
      uint32_t recvId = kNoLink, sendId = kNoLink;
      for (size_t i = 0; i < s.steps.size(); ++i) {
        const Step& st = s.steps[i];
        if (st.recvPeer < -1 || st.recvPeer >= n || st.sendPeer < -1 || st.sendPeer >= n) {
          return fail(Result::kInvalidUsage, "%s: rank %d step %zu: peer (recv %d, send %d) outside [0, %d)",
                      opt_.label.c_str(), r, i, st.recvPeer, st.sendPeer, n);
        }
        PackedStep p{kNoLink, kNoLink, 0};
        const bool message = st.recvPeer >= 0 || st.sendPeer >= 0;
        // A multi-source step folds sourceCount operands of `count` elements: sourceCount - 1
        // combines, which one-shot and the ordered forms spend all their arithmetic on.
        const bool fold = st.sourceCount >= 2;
        if ((message || fold) && st.count > kMaxMessageElems) {
          return fail(Result::kInvalidUsage,
                      "%s: rank %d step %zu: a %s of %llu elements is over the %llu the "
                      "timing simulator stores; use a smaller chunk",
                      opt_.label.c_str(), r, i, message ? "message" : "fold", static_cast<unsigned long long>(st.count),
                      static_cast<unsigned long long>(kMaxMessageElems));
        }
        if (fold) {
          p.countFlags = kCombine | static_cast<uint32_t>(st.count);
          folds_.emplace(steps_.size(), st.sourceCount - 1);
        }
        if (st.recvPeer >= 0) {
          if (st.recvPeer != lastRecv) recvId = linkOf(st.recvPeer, r), lastRecv = st.recvPeer;
          p.recvLink = recvId;
          if (st.src != Buf::kNone) p.countFlags |= kCombine;
        }
        if (st.sendPeer >= 0) {
          if (st.sendPeer != lastSend) sendId = linkOf(r, st.sendPeer), lastSend = st.sendPeer;
          p.sendLink = sendId;
          ++links_[sendId].planned;
        }
        if (message) p.countFlags |= static_cast<uint32_t>(st.count);
        steps_.push_back(p);
      }
      ranks_[r].end = steps_.size();
      if (links_.size() >= kNoLink) {
        return fail(Result::kInvalidUsage, "%s: more than %u communicating pairs", opt_.label.c_str(), kNoLink - 1);
      }
    }
    // Slots: a link never holds more than min(depth, its messages) at once.
    uint64_t slots = 0;
    for (Link& l : links_) {
      l.cap = static_cast<uint32_t>(std::max<uint64_t>(1, std::min<uint64_t>(opt_.fifoDepth, l.planned)));
      l.slotBase = slots;
      slots += l.cap;
    }
    inFlight_.resize(slots);
    freed_.resize(slots);
    return Result::kSuccess;
  }

  void wake(int rank, uint32_t link, std::vector<int32_t>* work) {
    RankState& rs = ranks_[rank];
    if (rs.waitLink != link) return;
    rs.waitLink = kNoLink;
    work->push_back(rank);
  }

  // Runs rank r's steps until it finishes or lacks a message or a slot (it then sleeps on that
  // link until wake()).
  Result advance(int r, std::vector<int32_t>* work) {
    RankState& rs = ranks_[r];
    const double gamma = opt_.intra.gamma;
    while (rs.next < rs.end) {
      const PackedStep& s = steps_[rs.next];
      Link* in = s.recvLink == kNoLink ? nullptr : &links_[s.recvLink];
      Link* out = s.sendLink == kNoLink ? nullptr : &links_[s.sendLink];
      if (in != nullptr && in->size == 0) {
        rs.waitLink = s.recvLink;
        return Result::kSuccess;
      }
      if (out != nullptr && out->size >= opt_.fifoDepth) {
        rs.waitLink = s.sendLink;
        return Result::kSuccess;
      }
      const uint32_t count = s.countFlags & ~kCombine;
      const double bytes = static_cast<double>(count) * static_cast<double>(opt_.elemBytes);
      double start = rs.clock;
      uint64_t hop = rs.hops;
      if (in != nullptr) {
        const InFlight& m = inFlight_[in->slotBase + in->head];
        if (m.count != count) {
          return fail(Result::kInvalidUsage, "%s: rank %d step %llu expects %u elements from rank %d, message has %u",
                      opt_.label.c_str(), r, static_cast<unsigned long long>(rs.next - firstStep(r) + 1), count,
                      in->src, m.count);
        }
        start = std::max(start, m.arrival);
        hop = std::max(hop, m.hop + 1);
      }
      double busy = 0;
      if (out != nullptr) {
        if (out->sent >= opt_.fifoDepth) {  // reuses the slot the oldest received message freed
          start = std::max(start, freed_[out->slotBase + out->freedHead]);
          out->freedHead = (out->freedHead + 1) % out->cap;
          --out->freedSize;
        }
        const LinkModel& lm = out->inter ? opt_.inter : opt_.intra;
        const double wire = bytes * lm.beta;
        const double onLink = std::max(start, out->busyUntil);
        out->busyUntil = onLink + wire;
        inFlight_[out->slotBase + (out->head + out->size) % out->cap] = InFlight{onLink + lm.alpha + wire, hop, count};
        ++out->size;
        ++out->sent;
        out->bytes += static_cast<uint64_t>(count) * opt_.elemBytes;
        busy += wire;
      }
      if ((s.countFlags & kCombine) != 0) {
        // A received message combines once; a fold (never a receive) once per operand after its first.
        const double combines = in != nullptr ? 1.0 : static_cast<double>(folds_.at(rs.next));
        busy += combines * bytes * gamma;
      }
      const double end = start + busy;
      if (in != nullptr) {
        in->head = (in->head + 1) % in->cap;
        --in->size;
        freed_[in->slotBase + (in->freedHead + in->freedSize) % in->cap] = end;
        ++in->freedSize;
        wake(in->src, s.recvLink, work);
      }
      if (out != nullptr) wake(out->dst, s.sendLink, work);
      rs.clock = end;
      rs.hops = hop + (out != nullptr ? 1 : 0);
      ++rs.next;
    }
    return Result::kSuccess;
  }

  Result finish(TimingStats* stats) {
    uint64_t blocked = 0;
    for (const RankState& rs : ranks_) blocked += rs.next < rs.end ? 1 : 0;
    if (blocked > 0) {
      return fail(Result::kInvalidUsage, "%s: schedule deadlock (FIFO depth %u), %llu of %d ranks blocked: %s",
                  opt_.label.c_str(), opt_.fifoDepth, static_cast<unsigned long long>(blocked), opt_.nranks,
                  describeWaits().c_str());
    }
    TimingStats st;
    for (const Link& l : links_) {
      if (l.size != 0) {
        return fail(Result::kInvalidUsage, "%s: %u message(s) from rank %d to rank %d were never received",
                    opt_.label.c_str(), l.size, l.src, l.dst);
      }
      st.messages += l.sent;
      st.bytes += l.bytes;
      st.maxLinkBytes = std::max(st.maxLinkBytes, l.bytes);
    }
    for (size_t r = 0; r < ranks_.size(); ++r) {
      if (ranks_[r].clock > st.seconds) {
        st.seconds = ranks_[r].clock;
        st.lastRank = static_cast<int>(r);
      }
      st.criticalHops = std::max(st.criticalHops, ranks_[r].hops);
    }
    st.steps = steps_.size();
    st.links = links_.size();
    st.memoryBytes = steps_.capacity() * sizeof(PackedStep) + ranks_.capacity() * sizeof(RankState) +
                     links_.capacity() * sizeof(Link) + inFlight_.capacity() * sizeof(InFlight) +
                     freed_.capacity() * sizeof(double) + table_.bytes() +
                     folds_.size() * (sizeof(uint64_t) + sizeof(uint32_t) + 2 * sizeof(void*));
    if (stats != nullptr) *stats = st;
    return Result::kSuccess;
  }

  std::string describeWaits() const {
    std::string d;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      const RankState& rs = ranks_[r];
      if (rs.next >= rs.end) continue;
      const PackedStep& s = steps_[rs.next];
      const unsigned long long idx = rs.next - firstStep(r) + 1, total = rs.end - firstStep(r);
      char line[160];
      if (rs.waitLink == s.recvLink) {
        snprintf(line, sizeof(line), "rank %zu step %llu/%llu waits for a message from rank %d; ", r, idx, total,
                 links_[s.recvLink].src);
      } else {
        snprintf(line, sizeof(line), "rank %zu step %llu/%llu waits for a free slot to rank %d; ", r, idx, total,
                 links_[s.sendLink].dst);
      }
      if (d.size() + strlen(line) > 800) {
        d += "...";
        break;
      }
      d += line;
    }
    return d;
  }

  // Where rank r's steps begin (ranks are stored in order, so it is where the previous ends).
  uint64_t firstStep(size_t r) const { return r == 0 ? 0 : ranks_[r - 1].end; }

  const TimingOptions& opt_;
  const ScheduleSource& source_;
  double estimate_ = 0;
  double overBudgetSteps_ = 0;  // set when the run is refused for the budget
  std::vector<PackedStep> steps_;
  std::vector<RankState> ranks_;
  std::vector<Link> links_;
  std::vector<InFlight> inFlight_;
  std::vector<double> freed_;
  // Step index -> operands - 1 of each multi-source step. Few: a fold comes with the p - 1
  // receives of its operands, so this stays a small fraction of steps_.
  std::unordered_map<uint64_t, uint32_t> folds_;
  LinkTable table_;
};

}  // namespace

Result simulateTiming(const TimingOptions& options, const ScheduleSource& source, TimingStats* stats) {
  TimingSimulator sim(options, source);
  return sim.run(stats);
}

double minCollectiveSteps(const CollArgs& args) {
  if (args.nranks < 2 || args.chunkElems == 0 || args.kind == CollKind::kSend || args.kind == CollKind::kRecv) {
    return 0;
  }
  const double messages = static_cast<double>(args.count / args.chunkElems + (args.count % args.chunkElems != 0));
  return messages * (args.nranks - 1);
}

Result simulateCollectiveTiming(const CollArgs& args, const TimingOptions& options, TimingStats* stats) {
  CollArgs a = args;
  a.nranks = options.nranks;
  a.fifoDepth = options.fifoDepth;
  TimingOptions o = options;
  o.minSteps = std::max(o.minSteps, minCollectiveSteps(a));
  return simulateTiming(
      o,
      [&a](int rank, Schedule* out) {
        a.rank = rank;
        return buildSchedule(a, out);
      },
      stats);
}

}  // namespace mixccl::algo
