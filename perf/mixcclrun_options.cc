// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "perf/mixcclrun_options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string_view>

namespace mixccl::run {
namespace {

constexpr const char* kUsage =
    "usage: mixcclrun -np N [options] [--] command [args...]\n"
    "\n"
    "Starts N copies of command on this host as ranks 0..N-1 of one job. Each rank gets\n"
    "RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT and\n"
    "NCCL_COMM_ID=127.0.0.1:PORT (PORT is a second port, as MASTER_PORT may be taken by the\n"
    "rank's own rendezvous, e.g. PyTorch's store; NCCL_COMM_ID is kept if already set).\n"
    "\n"
    "options:\n"
    "  -np, -n, --np N        number of ranks (required, >= 1)\n"
    "  -x, --env VAR[=VALUE]  set VAR for every rank (without =VALUE: pass on ours); repeatable\n"
    "  --port P               MASTER_PORT=P and NCCL_COMM_ID=127.0.0.1:P+1 (default: free ports)\n"
    "  --tag-output           prefix every output line with [rank]\n"
    "  --timeout SECONDS      stop the job after SECONDS and exit 124 (default: no limit)\n"
    "  --grace SECONDS        wait this long after SIGTERM before SIGKILL (default 5)\n"
    "  -h, --help             show this help\n"
    "\n"
    "SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 are forwarded to every rank. If a rank\n"
    "fails, the others get SIGTERM, then SIGKILL after the grace period; the exit status is the\n"
    "failing rank's (128+signal if it died from a signal).\n";

std::optional<double> parseSeconds(std::string_view text) {
  std::string s(text);
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || *end != '\0' || !std::isfinite(v) || v < 0) return std::nullopt;
  return v;
}

std::optional<long> parseInt(std::string_view text, long lo, long hi) {
  std::string s(text);
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return std::nullopt;
  return v;
}

ParseResult usageError(std::string what) {
  ParseResult r;
  r.exit = true;
  r.exitCode = 2;
  r.message = "mixcclrun: " + what + "\nTry 'mixcclrun --help'.";
  return r;
}

}  // namespace

const char* usageText() { return kUsage; }

ParseResult parseOptions(int argc, char** argv) {
  ParseResult r;
  Options& o = r.options;
  bool haveNp = false;
  int i = 1;
  for (; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    // The first word that is not an option starts the command, as with mpirun: the rank's own
    // flags then need no `--`.
    if (arg.empty() || arg[0] != '-') break;

    // Split "--name=value" so both spellings work for options that take a value.
    std::string_view name = arg;
    std::optional<std::string_view> inlineValue;
    if (arg.starts_with("--")) {
      size_t eq = arg.find('=');
      if (eq != std::string_view::npos) {
        name = arg.substr(0, eq);
        inlineValue = arg.substr(eq + 1);
      }
    }
    auto takeValue = [&]() -> std::optional<std::string_view> {
      if (inlineValue) return inlineValue;
      if (i + 1 >= argc) return std::nullopt;
      return std::string_view(argv[++i]);
    };

    if (name == "-h" || name == "--help") {
      r.exit = true;
      r.exitCode = 0;
      return r;
    }
    if (name == "--tag-output") {
      if (inlineValue) return usageError("--tag-output takes no value");
      o.tagOutput = true;
    } else if (name == "-np" || name == "-n" || name == "--np") {
      auto v = takeValue();
      if (!v) return usageError(std::string(name) + " needs a value");
      auto n = parseInt(*v, 1, 1 << 20);
      if (!n) return usageError("the number of ranks must be an integer >= 1, not '" + std::string(*v) + "'");
      o.np = static_cast<int>(*n);
      haveNp = true;
    } else if (name == "-x" || name == "--env") {
      auto v = takeValue();
      if (!v) return usageError(std::string(name) + " needs VAR or VAR=VALUE");
      if (v->empty() || v->front() == '=') return usageError("bad environment entry '" + std::string(*v) + "'");
      o.env.emplace_back(*v);
    } else if (name == "--port") {
      auto v = takeValue();
      if (!v) return usageError("--port needs a value");
      auto p = parseInt(*v, 1, 65534);  // P+1 is NCCL_COMM_ID's port
      if (!p) return usageError("--port must be 1..65534, not '" + std::string(*v) + "'");
      o.port = static_cast<int>(*p);
    } else if (name == "--timeout" || name == "--grace") {
      auto v = takeValue();
      if (!v) return usageError(std::string(name) + " needs a value in seconds");
      auto s = parseSeconds(*v);
      if (!s) return usageError(std::string(name) + " must be a number of seconds >= 0, not '" + std::string(*v) + "'");
      (name == "--timeout" ? o.timeoutSeconds : o.graceSeconds) = *s;
    } else {
      return usageError("unknown option '" + std::string(arg) + "'");
    }
  }
  for (; i < argc; ++i) o.command.emplace_back(argv[i]);
  if (!haveNp) return usageError("missing -np N (the number of ranks)");
  if (o.command.empty()) return usageError("missing the command to run");
  return r;
}

}  // namespace mixccl::run
