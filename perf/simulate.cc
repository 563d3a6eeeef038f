// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// simulate: predicts a collective's time at up to 65,536 ranks by running the library's own
// schedule builders (algorithms/schedule.h) through the timing simulator
// (algorithms/timing_sim.h), under the alpha-beta-gamma link model the tuner uses
// (src/core/tuner.h). No transport, no process per rank: one process, one thread.
//
// It reaches internals on purpose (the builders and the tuner are not public API), so it links
// the static layers; tests/layering/check_includes.py lists it as an exception for that reason.
// Exit status: 0 when every case ran (or was over the step budget), 1 when a simulation failed
// (a deadlock or a schedule fault: a bug in a builder), 2 on bad command-line input.

#include <CLI/CLI.hpp>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/timing_sim.h"
#include "common/result.h"
#include "perf/common/size.h"
#include "src/core/tuner.h"

namespace mixccl::perf {
namespace {

using algo::Algo;

constexpr int kMaxRanks = 65536;
constexpr uint64_t kElemBytes = 4;  // float32
// MIXCCL_CHUNK_SIZE's upper bound (Communicator::setUpLocal); larger slots are no configuration the
// library runs, and the timing simulator stores at most 2^31 - 1 elements per message.
constexpr uint64_t kMaxChunkBytes = uint64_t{1} << 30;
constexpr const char* kCollNames[] = {"allreduce",     "broadcast", "reduce", "allgather",
                                      "reducescatter", "alltoall",  "gather", "scatter"};
constexpr int kNumColls = 8;

struct Config {
  int ranks = 8;
  int ranksPerHost = 0;  // 0: all on one host
  std::string coll = "allreduce";
  std::string bytes = "1M";
  std::string algo = "all";
  std::string chunk = "512K";
  uint32_t fifoDepth = 8;
  bool sweep = false;
  double stepBudget = 4e8;
  // Link model in friendly units (us, ns per byte); defaults from the tuner's linkModel().
  double alphaIntraUs = 0, betaIntraNs = 0, alphaInterUs = 0, betaInterNs = 0, gammaNs = 0;
};

int usageError(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
int usageError(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fputs("simulate: ", stderr);
  std::vfprintf(stderr, fmt, ap);
  std::fputs(" (see simulate --help)\n", stderr);
  va_end(ap);
  return 2;
}

std::string sizeText(uint64_t b) {
  char s[32];
  if (b >= (1ull << 30) && b % (1ull << 30) == 0) {
    snprintf(s, sizeof(s), "%llu GiB", static_cast<unsigned long long>(b >> 30));
  } else if (b >= (1ull << 20) && b % (1ull << 20) == 0) {
    snprintf(s, sizeof(s), "%llu MiB", static_cast<unsigned long long>(b >> 20));
  } else if (b >= 1024 && b % 1024 == 0) {
    snprintf(s, sizeof(s), "%llu KiB", static_cast<unsigned long long>(b >> 10));
  } else {
    snprintf(s, sizeof(s), "%llu B", static_cast<unsigned long long>(b));
  }
  return s;
}

std::string normalise(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c != '-' && c != '_') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

// The algorithms `kind` has (every one algoSupports lists, so new builders appear by themselves).
std::vector<Algo> algosOf(CollKind kind) {
  std::vector<Algo> out;
  for (int a = 1; a < algo::kNumAlgos; ++a) {
    if (algo::algoSupports(static_cast<Algo>(a), kind)) out.push_back(static_cast<Algo>(a));
  }
  return out;
}

std::string namesOf(const std::vector<Algo>& algos) {
  std::string s;
  for (Algo a : algos) s += std::string(s.empty() ? "" : ", ") + algo::algoName(a);
  return s;
}

struct Setup {
  algo::TimingOptions timing;  // nranks set per case
  uint64_t chunkBytes = 0;
};

struct Outcome {
  Result result = Result::kSuccess;
  Algo algo = Algo::kRing;
  algo::TimingStats stats;
  double wallSeconds = 0;   // the whole simulation, building included
  double buildSeconds = 0;  // inside buildSchedule()
  std::string error;
  double tunerSeconds = -1;  // the tuner's own estimate, for --algo auto
};

int hostsOf(int ranks, int perHost) { return perHost <= 0 || perHost >= ranks ? 1 : (ranks + perHost - 1) / perHost; }

// The tuner's choice for this case, under its own link model for the same facts.
Result tunerChoice(CollKind kind, int ranks, int perHost, uint64_t count, uint64_t chunkBytes, TuneChoice* choice) {
  TuneFacts facts;
  facts.nranks = ranks;
  facts.nhosts = hostsOf(ranks, perHost);
  facts.shm = facts.nhosts == 1;
  facts.chunkBytes = chunkBytes;
  Tuner tuner;
  MIXCCL_TRY(tuner.configure("", "", facts));
  return tuner.choose(kind, count, DataType::kFloat32, choice);
}

// One simulation; `algo` kDefault means "ask the tuner".
Outcome runCase(const Setup& setup, CollKind kind, int ranks, uint64_t bytes, Algo algo) {
  Outcome o;
  QuietFailures quiet;  // over-budget cases are expected in a sweep; the caller prints the reason
  const uint64_t count = bytes / kElemBytes;
  if (algo == Algo::kDefault) {
    TuneChoice choice;
    o.result = tunerChoice(kind, ranks, setup.timing.ranksPerHost, count, setup.chunkBytes, &choice);
    if (o.result != Result::kSuccess) {
      o.error = lastFailure();
      return o;
    }
    algo = choice.algo;
    o.tunerSeconds = choice.seconds;
  }
  o.algo = algo;
  algo::CollArgs args;
  args.kind = kind;
  args.algo = algo;
  args.count = count;
  args.chunkElems = setup.chunkBytes / kElemBytes;
  args.nranks = ranks;
  args.fifoDepth = setup.timing.fifoDepth;
  algo::TimingOptions t = setup.timing;
  t.nranks = ranks;
  t.label = std::string(collName(kind)) + " " + algo::algoName(algo) + " " + sizeText(bytes);
  // Refuses a case far over the budget before the sample builds a whole schedule of it (a 2-rank
  // ring of 99999999G grew by gigabytes a second building rank 0's 1e11 steps; 1000G takes a second).
  t.minSteps = algo::minCollectiveSteps(args);
  // The builders' own time is reported apart: some are O(nranks) per rank even when the schedule
  // is short (a ring's chains over empty segments), which is not the simulator's cost.
  using Clock = std::chrono::steady_clock;
  Clock::duration building{};
  const auto source = [&](int rank, algo::Schedule* out) {
    const auto b0 = Clock::now();
    args.rank = rank;
    const Result r = algo::buildSchedule(args, out);
    building += Clock::now() - b0;
    return r;
  };
  const auto t0 = Clock::now();
  o.result = algo::simulateTiming(t, source, &o.stats);
  o.wallSeconds = std::chrono::duration<double>(Clock::now() - t0).count();
  o.buildSeconds = std::chrono::duration<double>(building).count();
  if (o.result != Result::kSuccess) o.error = lastFailure();
  return o;
}

void printModel(const Setup& s) {
  const algo::TimingOptions& t = s.timing;
  std::printf(
      "# link model: intra-host alpha %.3g us, beta %.4g ns/B (%.3g GB/s); inter-host alpha %.3g us, "
      "beta %.4g ns/B (%.3g GB/s); gamma %.4g ns/B\n",
      t.intra.alpha * 1e6, t.intra.beta * 1e9, 1e-9 / t.intra.beta, t.inter.alpha * 1e6, t.inter.beta * 1e9,
      1e-9 / t.inter.beta, t.intra.gamma * 1e9);
  std::printf("# chunk %s, FIFO depth %u, float32, step budget %.3g\n", sizeText(s.chunkBytes).c_str(), t.fifoDepth,
              static_cast<double>(t.stepBudget));
}

// Runs one (collective, ranks, bytes) for each algorithm; returns the exit status.
int runOne(const Setup& setup, CollKind kind, int ranks, uint64_t bytes, const std::vector<Algo>& algos) {
  const int hosts = hostsOf(ranks, setup.timing.ranksPerHost);
  std::printf("# simulate: %s, %d ranks on %d host%s, %s (count %llu), chunk %s\n", collName(kind), ranks, hosts,
              hosts == 1 ? "" : "s", sizeText(bytes).c_str(), static_cast<unsigned long long>(bytes / kElemBytes),
              sizeText(setup.chunkBytes).c_str());
  printModel(setup);
  std::printf("# %-20s %14s %8s %12s %14s %14s %12s %10s %9s %9s\n", "algorithm", "time(us)", "hops", "messages",
              "maxlink(B)", "total(B)", "steps", "mem(MB)", "wall(s)", "build(s)");
  int status = 0;
  for (Algo a : algos) {
    const Outcome o = runCase(setup, kind, ranks, bytes, a);
    std::string name = algo::algoName(o.algo);
    if (a == Algo::kDefault) name = "auto:" + name;
    if (o.result != Result::kSuccess) {
      if (!o.stats.overBudget) status = 1;
      std::printf("  %-20s %s\n", name.c_str(), o.stats.overBudget ? "over budget" : "FAILED");
      std::fprintf(stderr, "simulate: %s\n", o.error.c_str());
      continue;
    }
    const algo::TimingStats& s = o.stats;
    std::printf("  %-20s %14.3f %8llu %12llu %14llu %14llu %12llu %10.1f %9.3f %9.3f\n", name.c_str(), s.seconds * 1e6,
                static_cast<unsigned long long>(s.criticalHops), static_cast<unsigned long long>(s.messages),
                static_cast<unsigned long long>(s.maxLinkBytes), static_cast<unsigned long long>(s.bytes),
                static_cast<unsigned long long>(s.steps), s.memoryBytes / 1e6, o.wallSeconds, o.buildSeconds);
    if (o.tunerSeconds >= 0) {
      std::printf("# the tuner chose %s; its closed-form model says %.3f us\n", algo::algoName(o.algo),
                  o.tunerSeconds * 1e6);
    }
  }
  return status;
}

// --sweep: ranks 2..65536 x {8 B, 1 MiB, 256 MiB} x the algorithms; one table.
int runSweep(const Setup& setup, CollKind kind, const std::vector<Algo>& algos) {
  std::printf("# simulate --sweep: %s, %s\n", collName(kind),
              setup.timing.ranksPerHost > 0
                  ? ("hosts of " + std::to_string(setup.timing.ranksPerHost) + " ranks").c_str()
                  : "all ranks on one host");
  printModel(setup);
  std::printf("# per algorithm: predicted time (us) / critical-path hops / simulator wall time (s)\n");
  std::printf("%7s %8s", "ranks", "size");
  for (Algo a : algos) std::printf("  %-34s", a == Algo::kDefault ? "auto" : algo::algoName(a));
  std::printf("\n");
  int status = 0;
  for (uint64_t bytes : {uint64_t{8}, uint64_t{1} << 20, uint64_t{256} << 20}) {
    for (int ranks = 2; ranks <= kMaxRanks; ranks *= 2) {
      std::printf("%7d %8s", ranks, sizeText(bytes).c_str());
      for (Algo a : algos) {
        const Outcome o = runCase(setup, kind, ranks, bytes, a);
        char cell[96];
        if (o.result == Result::kSuccess) {
          snprintf(cell, sizeof(cell), "%.1f / %llu / %.2f%s%s", o.stats.seconds * 1e6,
                   static_cast<unsigned long long>(o.stats.criticalHops), o.wallSeconds, a == Algo::kDefault ? " " : "",
                   a == Algo::kDefault ? algo::algoName(o.algo) : "");
        } else if (o.stats.overBudget) {
          snprintf(cell, sizeof(cell), "over budget (%.2g steps)", o.stats.budgetSteps);
        } else {
          snprintf(cell, sizeof(cell), "FAILED");
          std::fprintf(stderr, "simulate: %s\n", o.error.c_str());
          status = 1;
        }
        std::printf("  %-34s", cell);
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  return status;
}

int run(int argc, char** argv) {
  TuneFacts one, net;
  net.shm = false;
  const algo::LinkModel shmModel = linkModel(one), netModel = linkModel(net);
  Config c;
  c.alphaIntraUs = shmModel.alpha * 1e6;
  c.betaIntraNs = shmModel.beta * 1e9;
  c.alphaInterUs = netModel.alpha * 1e6;
  c.betaInterNs = netModel.beta * 1e9;
  c.gammaNs = shmModel.gamma * 1e9;

  CLI::App app{
      "simulate: predicts a collective's time at up to 65,536 ranks by running mixccl's own schedule builders "
      "through an event-driven timing simulator (alpha-beta-gamma links, FIFO slots; docs/TUNING.md). One line per "
      "algorithm: predicted time, critical-path hops, messages, most bytes over one link, total bytes, steps "
      "simulated, simulator memory and wall time."};
  app.add_option("--ranks", c.ranks, "ranks, 1 to 65536")->capture_default_str();
  app.add_option("--ranks-per-host", c.ranksPerHost,
                 "ranks per host (hosts are contiguous blocks of ranks); default: all on one host");
  app.add_option("--coll", c.coll,
                 "allreduce, broadcast, reduce, allgather, reducescatter, alltoall, gather or scatter")
      ->capture_default_str();
  app.add_option("--bytes", c.bytes,
                 "size with an optional K/M/G suffix; NCCL's count = bytes / 4 (float32): per rank for allgather and "
                 "gather, each rank's share for reducescatter and scatter, one block for alltoall")
      ->capture_default_str();
  app.add_option("--algo", c.algo,
                 "an algorithm name, 'all' (each algorithm the collective has) or 'auto' (the tuner's choice, "
                 "made with the tuner's own link model for the same ranks and hosts)")
      ->capture_default_str();
  app.add_option("--alpha-intra", c.alphaIntraUs, "us per message between ranks of one host")->capture_default_str();
  app.add_option("--beta-intra", c.betaIntraNs, "ns per byte between ranks of one host")->capture_default_str();
  app.add_option("--alpha-inter", c.alphaInterUs, "us per message between hosts")->capture_default_str();
  app.add_option("--beta-inter", c.betaInterNs, "ns per byte between hosts")->capture_default_str();
  app.add_option("--gamma", c.gammaNs, "ns per byte reduced")->capture_default_str();
  app.add_option("--chunk", c.chunk, "bytes per message slot (MIXCCL_CHUNK_SIZE)")->capture_default_str();
  app.add_option("--fifo-depth", c.fifoDepth, "slots per link (MIXCCL_FIFO_DEPTH)")->capture_default_str();
  app.add_option("--step-budget", c.stepBudget,
                 "most steps one simulation may hold (12 bytes each); larger cases are refused up front")
      ->capture_default_str();
  app.add_flag("--sweep", c.sweep,
               "ranks 2, 4, ..., 65536 x sizes 8 B, 1 MiB, 256 MiB x the algorithms of --algo (default all); "
               "--ranks and --bytes are ignored");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }

  int kindIndex = -1;
  for (int i = 0; i < kNumColls; ++i) {
    if (normalise(c.coll) == kCollNames[i]) kindIndex = i;
  }
  if (kindIndex < 0) {
    return usageError(
        "unknown collective '%s'; valid: allreduce, broadcast, reduce, allgather, reducescatter, "
        "alltoall, gather, scatter",
        c.coll.c_str());
  }
  const CollKind kind = static_cast<CollKind>(kindIndex);
  if (!c.sweep && (c.ranks < 1 || c.ranks > kMaxRanks)) {
    return usageError("--ranks %d is outside 1..%d", c.ranks, kMaxRanks);
  }
  if (c.ranksPerHost < 0) return usageError("--ranks-per-host %d must be at least 1", c.ranksPerHost);
  const std::optional<uint64_t> bytes = parseSize(c.bytes);
  if (!bytes)
    return usageError("--bytes '%s' is not a size (a number, optionally followed by K, M or G)", c.bytes.c_str());
  const std::optional<uint64_t> chunk = parseSize(c.chunk);
  if (!chunk || *chunk < kElemBytes || *chunk > kMaxChunkBytes) {
    return usageError(
        "--chunk '%s' must be a size of at least %llu bytes (one float32) and at most 1 GiB (as "
        "MIXCCL_CHUNK_SIZE)",
        c.chunk.c_str(), static_cast<unsigned long long>(kElemBytes));
  }
  if (c.fifoDepth < 1) return usageError("--fifo-depth must be at least 1");
  if (!(c.stepBudget >= 1)) return usageError("--step-budget must be at least 1");
  const std::pair<const char*, double> link[] = {{"--alpha-intra", c.alphaIntraUs},
                                                 {"--beta-intra", c.betaIntraNs},
                                                 {"--alpha-inter", c.alphaInterUs},
                                                 {"--beta-inter", c.betaInterNs},
                                                 {"--gamma", c.gammaNs}};
  for (const auto& [flag, v] : link) {
    // NaN fails the comparison; an infinite cost would only predict infinite times.
    if (!(v >= 0) || std::isinf(v)) {
      return usageError("%s %g: the link model's alpha, beta and gamma must be finite and non-negative", flag, v);
    }
  }
  if (c.betaIntraNs == 0 || c.betaInterNs == 0) return usageError("--beta-intra and --beta-inter must be positive");

  const std::vector<Algo> have = algosOf(kind);
  std::vector<Algo> algos;
  const std::string want = normalise(c.algo);
  if (want == "all") {
    algos = have;
  } else if (want == "auto") {
    algos = {Algo::kDefault};
  } else {
    for (int a = 1; a < algo::kNumAlgos; ++a) {
      if (want != normalise(algo::algoName(static_cast<Algo>(a)))) continue;
      if (!algo::algoSupports(static_cast<Algo>(a), kind)) {
        return usageError("%s has no %s form (yet); %s runs with: %s, or all, auto", collName(kind),
                          algo::algoName(static_cast<Algo>(a)), collName(kind), namesOf(have).c_str());
      }
      algos = {static_cast<Algo>(a)};
    }
    if (algos.empty()) {
      return usageError("unknown algorithm '%s'; %s runs with: %s, or all, auto", c.algo.c_str(), collName(kind),
                        namesOf(have).c_str());
    }
  }

  Setup setup;
  setup.chunkBytes = *chunk / kElemBytes * kElemBytes;
  algo::TimingOptions& t = setup.timing;
  t.ranksPerHost = c.ranksPerHost;
  t.intra = algo::LinkModel{c.alphaIntraUs * 1e-6, c.betaIntraNs * 1e-9, c.gammaNs * 1e-9};
  t.inter = algo::LinkModel{c.alphaInterUs * 1e-6, c.betaInterNs * 1e-9, c.gammaNs * 1e-9};
  t.elemBytes = kElemBytes;
  t.fifoDepth = c.fifoDepth;
  // A budget beyond 64 bits (1e30, inf) means no practical limit; the plain conversion is
  // undefined there and gave 0 on x86, refusing every case.
  t.stepBudget = c.stepBudget >= 0x1p64 ? UINT64_MAX : static_cast<uint64_t>(c.stepBudget);
  if (c.sweep) return runSweep(setup, kind, algos);
  if (*bytes % kElemBytes != 0) {
    std::printf("# note: %llu bytes is not a whole number of float32; simulating %llu\n",
                static_cast<unsigned long long>(*bytes), static_cast<unsigned long long>(*bytes / kElemBytes * 4));
  }
  return runOne(setup, kind, c.ranks, *bytes / kElemBytes * kElemBytes, algos);
}

}  // namespace
}  // namespace mixccl::perf

int main(int argc, char** argv) { return mixccl::perf::run(argc, argv); }
