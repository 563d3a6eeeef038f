// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "src/core/tuner.h"

#include <cctype>
#include <cstdio>
#include <string>
#include <vector>

#include "common/log.h"

namespace mixccl {
namespace {

using algo::Algo;

constexpr uint32_t bit(Algo a) { return 1u << static_cast<unsigned>(a); }

// The collectives NCCL_ALGO without "coll:" governs: those NCCL itself tunes. AlltoAll, Gather
// and Scatter are point-to-point patterns in NCCL, untouched by its NCCL_ALGO; here they follow
// only entries that name them, so NCCL_ALGO=Ring does not leave them without an algorithm.
bool reducesValues(CollKind k) {
  return k == CollKind::kAllReduce || k == CollKind::kReduce || k == CollKind::kReduceScatter;
}

bool globalListApplies(CollKind k) {
  return k == CollKind::kAllReduce || k == CollKind::kBroadcast || k == CollKind::kReduce ||
         k == CollKind::kAllGather || k == CollKind::kReduceScatter;
}

uint32_t supported(CollKind kind) {
  uint32_t m = 0;
  for (int a = 1; a < algo::kNumAlgos; ++a) {
    if (algo::algoSupports(static_cast<Algo>(a), kind)) m |= bit(static_cast<Algo>(a));
  }
  return m;
}

std::string normalise(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '-' || c == '_' || c == ' ' || c == '\t') continue;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

// NCCL's algorithm names and what they stand for here, per collective.
struct Family {
  const char* name;  // as NCCL spells it
  uint32_t (*forKind)(CollKind);
};

uint32_t treeFamily(CollKind k) {
  if (k == CollKind::kAllReduce) return bit(Algo::kDoubleBinaryTree);
  if (k == CollKind::kBroadcast || k == CollKind::kReduce || k == CollKind::kGather || k == CollKind::kScatter) {
    return bit(Algo::kBinomialTree);
  }
  return 0;
}
uint32_t patFamily(CollKind k) {
  return k == CollKind::kAllGather || k == CollKind::kReduceScatter ? bit(Algo::kBruck) : 0;
}
uint32_t nothing(CollKind) { return 0; }

constexpr Family kFamilies[] = {
    {"Tree", treeFamily},      {"PAT", patFamily}, {"CollnetDirect", nothing},
    {"CollnetChain", nothing}, {"NVLS", nothing},  {"NVLSTree", nothing},
};

// The algorithms `name` (normalised) stands for under `kind`; false when the name is unknown.
// "ring" is both NCCL's and mixccl's name.
bool lookupAlgo(const std::string& name, CollKind kind, uint32_t* mask) {
  for (const Family& f : kFamilies) {
    if (name == normalise(f.name)) {
      *mask = f.forKind(kind) & supported(kind);
      return true;
    }
  }
  for (int a = 1; a < algo::kNumAlgos; ++a) {
    if (name == normalise(algo::algoName(static_cast<Algo>(a)))) {
      *mask = algo::algoSupports(static_cast<Algo>(a), kind) ? bit(static_cast<Algo>(a)) : 0;
      return true;
    }
  }
  return false;
}

std::string validAlgoNames() {
  std::string s;
  for (const Family& f : kFamilies) s += std::string(s.empty() ? "" : ", ") + f.name;
  s += ", Ring";
  for (int a = 2; a < algo::kNumAlgos; ++a) s += std::string(", ") + algo::algoName(static_cast<Algo>(a));
  return s;
}

// "ring, recursive-doubling" for the algorithms in `mask`.
std::string namesOf(uint32_t mask) {
  std::string s;
  for (int a = 1; a < algo::kNumAlgos; ++a) {
    if ((mask & bit(static_cast<Algo>(a))) != 0)
      s += std::string(s.empty() ? "" : ", ") + algo::algoName(static_cast<Algo>(a));
  }
  return s.empty() ? "none" : s;
}

constexpr const char* kCollNames[] = {"allreduce",     "broadcast", "reduce", "allgather",
                                      "reducescatter", "alltoall",  "gather", "scatter"};

bool lookupColl(const std::string& name, CollKind* kind) {
  for (size_t i = 0; i < std::size(kCollNames); ++i) {
    if (name == kCollNames[i]) {
      *kind = static_cast<CollKind>(i);
      return true;
    }
  }
  return false;
}

struct Entry {
  bool hasColl = false;
  CollKind kind = CollKind::kAllReduce;
  bool exclude = false;
  std::vector<std::string> names;  // normalised
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return out;
    start = at + 1;
  }
}

// NCCL's list syntax, shared by NCCL_ALGO and NCCL_PROTO (see tuner.h).
Result parsePolicy(const char* var, const std::string& value, std::vector<Entry>* out) {
  bool global = false;
  bool named[kNumCollKinds] = {};
  for (const std::string& raw : split(value, ';')) {
    const std::string part = normalise(raw);
    if (part.empty()) continue;
    Entry e;
    std::string list = part;
    const size_t colon = part.find(':');
    if (colon != std::string::npos) {
      if (!lookupColl(part.substr(0, colon), &e.kind)) {
        return fail(Result::kInvalidUsage,
                    "%s=\"%s\": unknown collective \"%s\"; valid: allreduce, broadcast, reduce, allgather, "
                    "reducescatter, alltoall, gather, scatter",
                    var, value.c_str(), part.substr(0, colon).c_str());
      }
      e.hasColl = true;
      if (named[static_cast<int>(e.kind)]) {
        return fail(Result::kInvalidUsage, "%s=\"%s\" names %s twice", var, value.c_str(), collName(e.kind));
      }
      named[static_cast<int>(e.kind)] = true;
      list = part.substr(colon + 1);
    } else if (global) {
      return fail(Result::kInvalidUsage,
                  "%s=\"%s\" has two lists without a collective; write \"list\" once, or \"coll:list;coll:list\"", var,
                  value.c_str());
    } else {
      global = true;
    }
    if (!list.empty() && list[0] == '^') {
      e.exclude = true;
      list = list.substr(1);
    }
    for (const std::string& n : split(list, ',')) {
      if (!n.empty()) e.names.push_back(n);
    }
    if (e.names.empty()) {
      return fail(Result::kInvalidUsage, "%s=\"%s\": the entry \"%s\" lists no name", var, value.c_str(), raw.c_str());
    }
    out->push_back(std::move(e));
  }
  return Result::kSuccess;
}

// The entry governing `kind`: its own, else the global one where that applies, else none.
const Entry* entryFor(const std::vector<Entry>& entries, CollKind kind) {
  const Entry* global = nullptr;
  for (const Entry& e : entries) {
    if (e.hasColl && e.kind == kind) return &e;
    if (!e.hasColl) global = &e;
  }
  return global != nullptr && globalListApplies(kind) ? global : nullptr;
}

constexpr const char* kProtoNames[] = {"Simple", "LL", "LL128"};
constexpr uint32_t kProtoImplemented = 1u << static_cast<unsigned>(Proto::kSimple);

bool lookupProto(const std::string& name, uint32_t* mask) {
  for (size_t i = 0; i < std::size(kProtoNames); ++i) {
    if (name == normalise(kProtoNames[i])) {
      *mask = 1u << i;
      return true;
    }
  }
  return false;
}

}  // namespace

const char* protoName(Proto p) {
  const unsigned i = static_cast<unsigned>(p);
  return i < std::size(kProtoNames) ? kProtoNames[i] : "?";
}

algo::LinkModel linkModel(const TuneFacts& facts) {
  // docs/TUNING.md, "Constants", says how each was measured on the 2-core development machine:
  // alpha from the 8-byte all-reduce of ring (2 hops) against recursive doubling (1 hop), and
  // from sendrecv_perf over TCP loopback; beta from 64 MiB sendrecv_perf; gamma from
  // bench_reduce (float32 sum, output bytes).
  algo::LinkModel m;
  if (facts.shm) {
    m.alpha = 0.5e-6;
    m.beta = 1.0 / 5e9;
    // A staged send's own pass over memory is the copy beta measures (callModel() prices it only
    // where the data has left the cache).
    m.stage = m.beta;
  } else {
    m.alpha = 10e-6;
    m.beta = 1.0 / 2.5e9;
  }
  m.gamma = 1.0 / 5e9;
  // Oversubscribed (k ranks per core): a hop waits until the receiver is scheduled among the k
  // ranks of its core. Measured latency per hop on the 2-core machine was 3.6x alpha at k = 2 and
  // 12.5x at k = 4 (8 B recursive doubling at 4 and 8 ranks, perf/tuner-sweep); k^2 follows both.
  // Byte costs stay here: scaled by k at memory speed they picked worse at 4 KiB-2 MiB in the
  // same sweep; callModel() scales the in-cache costs, the CPU's, by k instead.
  // A send that does not wait (one-shot's p-1 copies) costs the sender the unscaled alpha.
  const double k = std::max(1, facts.ranksPerCore);
  m.send = m.alpha;
  m.alpha *= k * k;
  return m;
}

namespace {

// Bytes the root's buffers hold for a call of `bytes` (predictSeconds()' n) at p ranks: its input
// and output as algo::inputElems()/outputElems() count them, in bytes. The root touches the most.
uint64_t touchedPerRank(CollKind kind, int p, uint64_t bytes) {
  algo::CollArgs a;
  a.kind = kind;
  a.nranks = p;
  a.count = bytes;
  return algo::inputElems(a) + algo::outputElems(a);
}

}  // namespace

algo::LinkModel callModel(const TuneFacts& facts, CollKind kind, uint64_t bytes) {
  algo::LinkModel m = linkModel(facts);
  // Beyond the cache: linkModel()'s memory-speed costs, and a send staged by a pass of its own
  // (cost.h, `stage`) costs the copy beta measures once the data it reads has left the core's
  // cache, that is when the ranks of a core touch more than kCacheBytesPerCore between them.
  // Within it: copies and reductions run at the cache's speed, several times memory's, and the
  // staging pass is left out (docs/TUNING.md, "Data in the cache"). There the CPU's work is what a
  // byte costs, and the k ranks of a core share one CPU, so the in-cache costs are scaled by k.
  // Priced at memory speed instead, the small sizes let the halving forms' saved reductions
  // outweigh their extra hops: Rabenseifner at 2 ranks from 5 KiB, measured 1.2x slower than
  // recursive doubling at 8 and 16 KiB.
  const uint64_t k = static_cast<uint64_t>(std::max(1, facts.ranksPerCore));
  if (touchedPerRank(kind, std::max(1, facts.nranks), bytes) * k > kCacheBytesPerCore) return m;
  m.stage = 0;
  if (facts.shm) m.beta = kInCacheBeta * static_cast<double>(k);
  m.gamma = kInCacheGamma * static_cast<double>(k);
  // A receive copied out of its slot reads the bytes from the sender's core, a pass the size of a
  // hop's: without it the ring at 2 ranks looked cheaper than recursive doubling from 24 KiB, which
  // was as fast or faster up to 256 KiB (32 KiB: 6.0 against 7.8 us) and within 6 % at 512 KiB
  // (docs/TUNING.md, "Data in the cache").
  m.copyOut = kInCacheBeta * static_cast<double>(k);
  return m;
}

// The algorithms an unrestricted choice considers among `mask`: one-shot only where every rank
// shares memory; the ordered reduction (one round of direct messages, folded in rank order) when
// MIXCCL_DETERMINISTIC asks for it, and otherwise only for a small reduce-scatter among ranks that
// share memory, kOrderedMinRanksPerCore or more to a core (smallOnly_, choose()): there one round
// beats a tree's log p rounds, each of which waits until the ranks of a core are scheduled (8 ranks
// on 2 cores, 256 B: 10.7-14.6 us ordered, 17.8 with Bruck; 16 ranks, 64 B-2 KiB, 3 rounds: 82-99
// us ordered, 93-125 recursive halving). With 2 to a core the rounds are cheap enough: 4 ranks on
// 2 cores, 16 B-8 KiB, two perf/tuner-sweep runs and 3 forced rounds, recursive halving was
// 1.1-1.3x faster than the ordered form, which the model had picked. Its all-reduce and reduce
// lost to the others at 32 KiB-2 MiB (2 MiB at 8 ranks: 5.6-6.1 ms against 1.0-1.3 with the
// ring), which the model does not predict. The scatter + all-gather broadcast only where some
// ranks talk over a network: it spares the root's link, which shared memory does not need spared.
// On shm it was at best 2 % ahead and up to 3.9x behind the tree or the chain in 18 cells of two
// perf/tuner-sweep runs (2-8 ranks on 2 cores, 64 KiB-8 MiB; docs/TUNING.md), where the model,
// whose beta is memory's rather than the cache's, took it from 64 KiB to 2 MiB. Never empties a
// non-empty mask.
uint32_t Tuner::autoChoices(CollKind kind, uint32_t mask) const {
  uint32_t narrowed = mask;
  if (!facts_.deterministic && !(kind == CollKind::kReduceScatter && freeOrderedScatter())) {
    narrowed &= ~bit(Algo::kOrdered);
  }
  if (!facts_.shm) narrowed &= ~bit(Algo::kOneShot);
  if (facts_.shm) narrowed &= ~bit(Algo::kScatterAllGather);
  return narrowed != 0 ? narrowed : mask;
}

// MIXCCL_DETERMINISTIC: a reducing collective keeps only algorithms that fold in rank order. If
// the policy allows none of them, determinism wins over NCCL_ALGO (the policy is a preference
// about speed; determinism is about the bits of the result), and the init log says so.
uint32_t Tuner::keepDeterministic(CollKind kind, uint32_t mask) const {
  if (!facts_.deterministic || !reducesValues(kind)) return mask;
  uint32_t ordered = 0;
  for (int a = 1; a < algo::kNumAlgos; ++a) {
    const Algo al = static_cast<Algo>(a);
    if (algo::algoIsOrdered(al) && algo::algoSupports(al, kind)) ordered |= bit(al);
  }
  if ((mask & ordered) != 0) return mask & ordered;
  MIXCCL_WARN(
      "MIXCCL_DETERMINISTIC=1: %s folds in rank order with %s; NCCL_ALGO=\"%s\" allows only %s, which "
      "reduce in another order, so it is not followed for %s",
      collName(kind), namesOf(ordered).c_str(), algoPolicy_.c_str(), namesOf(mask).c_str(), collName(kind));
  return ordered;
}

Result Tuner::configure(const std::string& algoPolicy, const std::string& protoPolicy, const TuneFacts& facts) {
  algoPolicy_ = algoPolicy;
  protoPolicy_ = protoPolicy;
  facts_ = facts;
  std::vector<Entry> entries;
  MIXCCL_TRY(parsePolicy("NCCL_ALGO", algoPolicy, &entries));
  for (const Entry& e : entries) {
    for (const std::string& n : e.names) {
      uint32_t mask = 0;
      if (!lookupAlgo(n, e.hasColl ? e.kind : CollKind::kAllReduce, &mask)) {
        return fail(Result::kInvalidUsage, "NCCL_ALGO=\"%s\": unknown algorithm \"%s\"; valid: %s", algoPolicy.c_str(),
                    n.c_str(), validAlgoNames().c_str());
      }
    }
  }
  for (int k = 0; k < kNumCollKinds; ++k) {
    const CollKind kind = static_cast<CollKind>(k);
    const uint32_t all = supported(kind);
    const Entry* e = kind == CollKind::kSend || kind == CollKind::kRecv ? nullptr : entryFor(entries, kind);
    // One-round algorithms the tuner takes on its own only for small collectives (choose(),
    // smallOnlyBytes_): the ordered reduce-scatter up to 4 KiB, the direct all-gather up to
    // 256 KiB. Their one round wins where latency decides; above, every peer's data reaching one
    // rank at once (ordered) or one block leaving p-1 times (direct) lost to the ring in ways the
    // model does not see (perf/tuner-sweep, 2 MiB at 8 ranks on 2 cores: ordered 4.3 ms and direct
    // 0.61 ms against the ring's 0.50 and 0.46). The ordered form, which folds p-1 operands at one
    // owner, lost earlier: at 128-256 KiB it was 1.15-1.48x recursive halving at 4 and 8 ranks,
    // where direct was within 2 % of the best (and 1.25-1.48x faster than the ring at 8 ranks).
    // At 8 ranks on 2 cores it also lost at 8 KiB in three perf/tuner-sweep runs (1.20-1.55x
    // recursive halving; 32 KiB: 1.09x Bruck) and led at 2 KiB, hence 4 KiB.
    // The direct all-to-all stayed within 5 % of pairwise at every size.
    smallOnly_[k] = 0;
    smallOnlyBytes_[k] = 0;
    if (kind == CollKind::kReduceScatter && !facts_.deterministic && freeOrderedScatter()) {
      smallOnly_[k] = bit(Algo::kOrdered);
      smallOnlyBytes_[k] = kOrderedReduceScatterBytes;
    }
    if (kind == CollKind::kAllGather) {
      smallOnly_[k] = bit(Algo::kDirect);
      smallOnlyBytes_[k] = kDirectAllGatherBytes;
    }
    // The binomial reduce among ranks that share memory only up to 4 KiB: its root combines log p
    // messages per call where each relay of the chain combines one, and in calls back to back
    // (nccl-tests, a training step's repeated reductions) the chain's relays overlap successive
    // calls; the model prices one call alone. 2 cores, NCCL_ALGO forcing each, 2-3 rounds: from
    // 32 KiB the chain was 1.3-2x faster at 8 ranks (256 KiB: 97-118 us against 150-247) and
    // 1.1-1.3x at 16; at 8 KiB it tied at 8 ranks and led by 1.1-1.4x at 4 and 16; below 4 KiB the
    // tree kept its lead (16 ranks, 8 B-2 KiB: 12.4-13.6 us against 13.6-16.8).
    if (kind == CollKind::kReduce && facts_.shm) {
      smallOnly_[k] = bit(Algo::kBinomialTree);
      smallOnlyBytes_[k] = kBinomialReduceBytes;
    }
    if (e == nullptr) {
      allowed_[k] = keepDeterministic(kind, autoChoices(kind, all));
      continue;
    }
    uint32_t listed = 0;
    for (const std::string& n : e->names) {
      uint32_t mask = 0;
      (void)lookupAlgo(n, kind, &mask);
      listed |= mask;
    }
    allowed_[k] = keepDeterministic(kind, e->exclude ? autoChoices(kind, all & ~listed) : listed);
    if (!e->exclude) smallOnly_[k] = 0;  // asked for by name
    if (allowed_[k] == 0 && e->hasColl) {
      return fail(Result::kInvalidUsage, "NCCL_ALGO=\"%s\" leaves %s with no algorithm; %s runs with: %s",
                  algoPolicy.c_str(), collName(kind), collName(kind), namesOf(all).c_str());
    }
    if (allowed_[k] == 0) {
      MIXCCL_INFO(log::kTune | log::kInit, "NCCL_ALGO=\"%s\" leaves %s with no algorithm (it has: %s); calls fail",
                  algoPolicy.c_str(), collName(kind), namesOf(all).c_str());
    }
  }

  std::vector<Entry> protos;
  MIXCCL_TRY(parsePolicy("NCCL_PROTO", protoPolicy, &protos));
  for (int k = 0; k < kNumCollKinds; ++k) {
    const CollKind kind = static_cast<CollKind>(k);
    const Entry* e = entryFor(protos, kind);
    if (e == nullptr) continue;
    uint32_t listed = 0;
    for (const std::string& n : e->names) {
      uint32_t mask = 0;
      if (!lookupProto(n, &mask)) {
        return fail(Result::kInvalidUsage, "NCCL_PROTO=\"%s\": unknown protocol \"%s\"; valid: LL, LL128, Simple",
                    protoPolicy.c_str(), n.c_str());
      }
      listed |= mask;
    }
    const uint32_t allowed = e->exclude ? 7u & ~listed : listed;
    if ((allowed & kProtoImplemented) == 0) {
      return fail(Result::kInvalidUsage,
                  "NCCL_PROTO=\"%s\" leaves %s without a protocol mixccl implements: it runs with Simple (LL and "
                  "LL128 are not implemented yet)",
                  protoPolicy.c_str(), collName(kind));
    }
  }
  return Result::kSuccess;
}

Result Tuner::choose(CollKind kind, uint64_t count, DataType dtype, TuneChoice* out) const {
  const uint64_t bytes = count * dataTypeSize(dtype);
  const algo::LinkModel model = callModel(facts_, kind, bytes);
  uint32_t mask = allowed_[static_cast<int>(kind)];
  const uint32_t large = mask & ~smallOnly_[static_cast<int>(kind)];
  // The whole collective, as smallOnlyBytes_ counts it: all p blocks of an all-gather or
  // reduce-scatter, the buffer of a reduce.
  const bool blocks = kind == CollKind::kAllGather || kind == CollKind::kReduceScatter;
  const uint64_t whole = blocks ? bytes * static_cast<uint64_t>(facts_.nranks) : bytes;
  if (whole > smallOnlyBytes_[static_cast<int>(kind)] && large != 0) {
    mask = large;
  }
  if (mask == 0) {
    return fail(Result::kInvalidUsage, "%s: NCCL_ALGO=\"%s\" leaves it with no algorithm; %s runs with: %s",
                collName(kind), algoPolicy_.c_str(), collName(kind), namesOf(supported(kind)).c_str());
  }
  const bool logIt = log::enabled(log::Level::kInfo, log::kTune);
  std::string candidates;
  bool found = false;
  for (int a = 1; a < algo::kNumAlgos; ++a) {
    const Algo al = static_cast<Algo>(a);
    if ((mask & bit(al)) == 0) continue;
    const double t = algo::predictSeconds(al, kind, facts_.nranks, bytes, facts_.chunkBytes, model);
    if (t < 0) continue;
    if (logIt) {
      char one[64];
      snprintf(one, sizeof(one), "%s%s %.2f us", candidates.empty() ? "" : ", ", algo::algoName(al), t * 1e6);
      candidates += one;
    }
    // Equal costs (two forms that are one exchange at 2 ranks: recursive doubling and one-shot,
    // the ring and recursive halving) go to the one listed first, whatever the last bit of the
    // sums says: rounding must not pick the form.
    if (!found || t < out->seconds * (1 - 1e-9)) {
      out->algo = al;
      out->seconds = t;
      found = true;
    }
  }
  if (!found) {
    // An algorithm without a cost formula is never preferred, but still runs when it is the
    // only one allowed.
    for (int a = 1; a < algo::kNumAlgos && !found; ++a) {
      if ((mask & bit(static_cast<Algo>(a))) != 0) {
        out->algo = static_cast<Algo>(a);
        out->seconds = 0;
        found = true;
      }
    }
  }
  out->proto = Proto::kSimple;
  if (logIt) {
    MIXCCL_INFO(log::kTune, "%s %llu x %s (%llu B) on %d ranks, %d host%s, %s: %s/%s (%.2f us) among %s",
                collName(kind), static_cast<unsigned long long>(count), dataTypeName(dtype),
                static_cast<unsigned long long>(bytes), facts_.nranks, facts_.nhosts, facts_.nhosts == 1 ? "" : "s",
                facts_.shm ? "shm" : "net", algo::algoName(out->algo), protoName(out->proto), out->seconds * 1e6,
                candidates.c_str());
  }
  return Result::kSuccess;
}

}  // namespace mixccl
