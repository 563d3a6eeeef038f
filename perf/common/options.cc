// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "perf/common/options.h"

#include <CLI/CLI.hpp>
#include <cctype>
#include <cstdio>
#include <string>

namespace mixccl::perf {

std::optional<size_t> parseSize(const std::string& text) {
  size_t pos = 0;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) ++pos;
  if (pos == 0) return std::nullopt;
  size_t value = std::stoull(text.substr(0, pos));
  std::string suffix = text.substr(pos);
  if (!suffix.empty() && (suffix.back() == 'B' || suffix.back() == 'b')) suffix.pop_back();
  if (suffix.empty()) return value;
  if (suffix.size() != 1) return std::nullopt;
  switch (std::toupper(static_cast<unsigned char>(suffix[0]))) {
    case 'K':
      return value << 10;
    case 'M':
      return value << 20;
    case 'G':
      return value << 30;
    default:
      return std::nullopt;
  }
}

std::vector<size_t> Options::sizes() const {
  std::vector<size_t> out;
  for (size_t s = minBytes; s <= maxBytes;) {
    out.push_back(s);
    const size_t next = stepFactor > 1 ? s * stepFactor : s + stepBytes;
    if (next <= s) break;  // a zero step (or overflow) would loop forever
    s = next;
  }
  return out;
}

namespace {

// A CLI11 validator-free size option: keeps the text and converts after parsing so the error can
// name the flag and the accepted forms.
bool sizeFlag(const std::string& flag, const std::string& text, size_t* out) {
  if (text.empty()) return true;
  auto v = parseSize(text);
  if (!v) {
    std::fprintf(stderr, "%s: '%s' is not a size (a number, optionally followed by K, M or G)\n", flag.c_str(),
                 text.c_str());
    return false;
  }
  *out = *v;
  return true;
}

}  // namespace

std::optional<int> parseOptions(const CollDesc& desc, int argc, char** argv, Options* o) {
  CLI::App app{std::string(desc.name) + "_perf: nccl-tests-compatible benchmark of " + desc.name +
               " on mixccl (host memory)"};
  std::string minB, maxB, stepB, stepF, op = "sum", dtype = "float", root = "0", mem;
  int check = 1, blocking = 0, avg = 1, parallelInit = 0;
  app.add_option("-t,--nthreads", o->nThreads, "ranks in this process, one thread each")->check(CLI::Range(1, 4096));
  app.add_option("-g,--ngpus", o->nGpus, "devices per thread (must be 1: host memory)");
  app.add_option("-b,--minbytes", minB, "smallest size in bytes (K/M/G suffixes), default 32M");
  app.add_option("-e,--maxbytes", maxB, "largest size in bytes (K/M/G suffixes), default 32M");
  app.add_option("-i,--stepbytes", stepB, "increment between sizes when -f is 1, default 1M");
  app.add_option("-f,--stepfactor", stepF, "multiply the size by this between rows, default 1 (use -i)");
  app.add_option("-n,--iters", o->iters, "timed iterations per row, default 20")->check(CLI::NonNegativeNumber);
  app.add_option("-w,--warmup_iters", o->warmupIters, "untimed iterations first, default 1")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--agg_iters", o->aggIters, "collectives per iteration, in one group, default 1")
      ->check(CLI::PositiveNumber);
  app.add_option("-m,--memory", mem,
                 "buffer kind: host (default) or cuda; an integer here means agg iters, as nccl-tests' -m");
  app.add_option("-c,--check", check, "check every element of the result (0/1), default 1");
  app.add_option("-o,--op", op, "sum|prod|max|min|avg|mulsum|all, default sum");
  app.add_option("-d,--datatype", dtype,
                 "int8|uint8|int32|uint32|int64|uint64|half|float|double|bfloat16|f8e4m3|f8e5m2|all, default float");
  app.add_option("-r,--root", root, "root rank, or all, default 0");
  app.add_option("-a,--average", avg, "time reported: 0 rank 0, 1 average (default), 2 minimum, 3 maximum over ranks")
      ->check(CLI::Range(0, 3));
  app.add_option("-z,--blocking", blocking, "1: barrier after each collective, default 0");
  app.add_option("-N,--run_cycles", o->cycles, "run the whole sweep this many times (0: forever), default 1")
      ->check(CLI::NonNegativeNumber);
  app.add_option("-T,--timeout", o->timeoutSec, "seconds one row may take before the tool gives up, default 0 (none)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("-J,--output_file", o->jsonPath, "also write the rows as JSON to this file (rank 0)");
  app.add_option("-p,--parallel_init", parallelInit, "accepted for compatibility: ranks always init in parallel");
  app.add_option("-G,--cudagraph", o->graph, "CUDA graph launches: must be 0 on host memory");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (!sizeFlag("-b", minB, &o->minBytes) || !sizeFlag("-e", maxB, &o->maxBytes) ||
      !sizeFlag("-i", stepB, &o->stepBytes) || !sizeFlag("-f", stepF, &o->stepFactor)) {
    return 2;
  }
  if (o->maxBytes < o->minBytes) {
    std::fprintf(stderr, "-e %zu is below -b %zu\n", o->maxBytes, o->minBytes);
    return 2;
  }
  if (o->stepFactor < 1) o->stepFactor = 1;
  if (o->stepFactor == 1 && o->stepBytes == 0 && o->maxBytes > o->minBytes) {
    std::fprintf(stderr, "-i 0 with -f 1 never reaches -e\n");
    return 2;
  }
  if (!mem.empty()) {
    if (auto n = parseSize(mem)) {
      o->aggIters = static_cast<int>(*n);
    } else {
      o->memory = mem;
    }
  }
  if (o->memory == "cuda") {
    std::fprintf(stderr, "-m cuda: CUDA buffers need the CUDA backend, not built yet (use -m host)\n");
    return 2;
  }
  if (o->memory != "host") {
    std::fprintf(stderr, "-m %s: unknown buffer kind (host or cuda)\n", o->memory.c_str());
    return 2;
  }
  if (o->aggIters < 1) o->aggIters = 1;
  if (o->nGpus != 1) {
    std::fprintf(stderr,
                 "-g %d: mixccl's perf tools drive host memory, one rank per thread: -g must be 1 (use -t N for "
                 "N ranks in one process)\n",
                 o->nGpus);
    return 2;
  }
  if (o->graph != 0) {
    std::fprintf(stderr, "-G %d: CUDA graphs need the CUDA backend, not built yet\n", o->graph);
    return 2;
  }
  o->check = check != 0;
  o->blocking = blocking != 0;
  o->avg = static_cast<AvgMode>(avg);
  if (dtype == "all") {
    o->types = allTypes();
  } else if (auto t = typeByName(dtype)) {
    o->types = {*t};
  } else {
    std::fprintf(stderr, "-d %s: unknown data type\n", dtype.c_str());
    return 2;
  }
  if (op == "all") {
    o->ops = allOps();
  } else if (auto k = opByName(op)) {
    o->ops = {*k};
  } else {
    std::fprintf(stderr, "-o %s: unknown operation (sum, prod, max, min, avg, mulsum, all)\n", op.c_str());
    return 2;
  }
  if (root == "all") {
    o->allRoots = true;
  } else {
    char* end = nullptr;
    const long r = std::strtol(root.c_str(), &end, 10);
    if (root.empty() || *end != '\0' || r < 0) {
      std::fprintf(stderr, "-r %s: expected a rank number or all\n", root.c_str());
      return 2;
    }
    o->roots = {static_cast<int>(r)};
  }
  return std::nullopt;
}

}  // namespace mixccl::perf
