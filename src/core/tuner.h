// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// The tuner: which algorithm (and protocol) a collective runs with.
//
// Every rank must choose the same schedule, so a choice is a pure function of facts all ranks of
// a communicator agree on: the collective, count x datatype size, the number of ranks and hosts,
// the kind of link between them (shared memory when every rank is on one host and publishes
// shm, the network otherwise), the chunk size, and the NCCL_ALGO / NCCL_PROTO policy. Never the
// ranks' device backends or whether a call is in place, which ranks may not share; so a mixed
// host/device communicator runs, and reduces, exactly as an all-host one. A rank that was
// started with a different policy gets a different algorithm; the algorithm travels in the
// operation stamp (op_stamp.h), so that shows as a clear mismatch error, never as wrong data.
//
// With MIXCCL_DETERMINISTIC=1 (checked equal on every rank through the stamp, like the policy),
// AllReduce, ReduceScatter and Reduce choose only among the algorithms that fold every element in
// rank order (one-shot, ordered), so their bits depend on the inputs alone; a policy that allows
// none of those is overridden for them, with a warning at init. Without it, the ordered algorithm
// is chosen only by name, and one-shot only among ranks that share memory.
//
// The choice minimises algo::predictSeconds() (alpha-beta-gamma, algorithms/cost.h; priced with
// callModel(), which adds the staged-send pass once a call's data leaves the cache) over the
// algorithms the collective has and the policy allows; docs/TUNING.md gives the constants and
// where they were measured.
//
// Policy syntax (NCCL's, case-insensitive): a comma list of names ("Ring,Tree"), "^" in front
// excludes the listed names instead, and "coll:list;coll:list" sets lists per collective
// ("allreduce:tree,ring;allgather:^ring"); a list without "coll:" applies to the collectives no
// entry names. Names: NCCL's Ring, Tree (AllReduce: double binary tree; rooted collectives:
// binomial trees) and PAT (AllGather/ReduceScatter: the Bruck forms), NCCL's names for hardware
// mixccl does not drive (CollnetDirect, CollnetChain, NVLS, NVLSTree: accepted, select nothing),
// and mixccl's own (algoName(), '-' and '_' optional). Protocols: LL, LL128, Simple.
//
// Threading: parse once at communicator init; choose() is const and may run on any thread.

#include <cstdint>
#include <string>

#include "algorithms/cost.h"
#include "algorithms/schedule.h"
#include "common/result.h"
#include "common/types.h"

namespace mixccl {

enum class Proto : uint8_t { kSimple = 0, kLL = 1, kLL128 = 2 };
const char* protoName(Proto p);

// What the tuner knows about a communicator (all ranks compute the same values).
struct TuneFacts {
  int nranks = 1;
  int nhosts = 1;
  bool shm = true;  // every pair talks over shared memory
  uint64_t chunkBytes = 512 * 1024;
  // MIXCCL_DETERMINISTIC: reductions fold in rank order (algo::algoIsOrdered), whatever the size.
  bool deterministic = false;
  // Ranks per online CPU core of the host, rounded up (1: each rank has a core of its own). Set
  // only on one host, where every rank reads the same core count; 1 otherwise (docs/TUNING.md).
  int ranksPerCore = 1;
};

// Alpha-beta-gamma constants of a link kind (docs/TUNING.md says where they come from).
algo::LinkModel linkModel(const TuneFacts& facts);

// The L2 cache of one core of the development machine (AMD EPYC, 2 cores: 1 MiB each, lscpu).
// Like alpha and beta, a measured constant of that machine, not a fact read at run time.
constexpr uint64_t kCacheBytesPerCore = 1 << 20;

// Seconds per byte of a shared-memory message and of a reduction while a call's data stays in the
// cache (the development machine's, docs/TUNING.md "Data in the cache"): broadcast_perf at 2 ranks,
// 16-256 KiB, about 10 GB/s one way; bench_reduce 64K-256K, float32 sum, about 20 GB/s of output.
constexpr double kInCacheBeta = 1.0 / 10e9;
constexpr double kInCacheGamma = 1.0 / 20e9;

// The model one call is priced with (Tuner::choose): linkModel() when the data the call's ranks
// touch on one core (input and output, `bytes` per rank as predictSeconds() counts them) exceeds
// kCacheBytesPerCore, with a staged send's pass (algo::LinkModel::stage) priced; otherwise the
// in-cache byte costs above, times the ranks per core, and no staging pass.
algo::LinkModel callModel(const TuneFacts& facts, CollKind kind, uint64_t bytes);

struct TuneChoice {
  algo::Algo algo = algo::Algo::kRing;
  Proto proto = Proto::kSimple;
  double seconds = 0;  // the model's estimate
};

class Tuner {
 public:
  // Parses NCCL_ALGO / NCCL_PROTO values (empty: no restriction). kInvalidArgument with a message
  // naming the valid choices on an unknown name, a malformed entry, or an entry that leaves the
  // collective it names without an algorithm. A list without "coll:" that leaves some collective
  // with nothing is accepted (NCCL does the same); that collective fails at the call.
  Result configure(const std::string& algoPolicy, const std::string& protoPolicy, const TuneFacts& facts);

  // The algorithm for one call. kInvalidUsage (naming the policy and the valid choices) when the
  // policy leaves `kind` with no algorithm. Logs the decision and every candidate's predicted
  // cost under NCCL_DEBUG_SUBSYS=TUNING.
  Result choose(CollKind kind, uint64_t count, DataType dtype, TuneChoice* out) const;

  const TuneFacts& facts() const { return facts_; }

 private:
  uint32_t autoChoices(CollKind kind, uint32_t mask) const;
  uint32_t keepDeterministic(CollKind kind, uint32_t mask) const;
  // Whether a small reduce-scatter may take the ordered form on its own (autoChoices() says why).
  bool freeOrderedScatter() const { return facts_.shm && facts_.ranksPerCore >= kOrderedMinRanksPerCore; }

  uint32_t allowed_[kNumCollKinds] = {};  // per collective, bit (1 << Algo) for each allowed algorithm
  // Of those, the ones the tuner takes on its own only up to smallOnlyBytes_ (the whole
  // collective: all p blocks of an all-gather or reduce-scatter, the buffer of a reduce;
  // configure() says why).
  uint32_t smallOnly_[kNumCollKinds] = {};
  uint64_t smallOnlyBytes_[kNumCollKinds] = {};
  static constexpr uint64_t kOrderedReduceScatterBytes = 4 * 1024;
  static constexpr int kOrderedMinRanksPerCore = 4;  // autoChoices() says why
  static constexpr uint64_t kDirectAllGatherBytes = 256 * 1024;
  static constexpr uint64_t kBinomialReduceBytes = 4 * 1024;  // configure() says why
  std::string algoPolicy_;
  std::string protoPolicy_;
  TuneFacts facts_;
};

}  // namespace mixccl
