// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "common/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <cstdarg>
#include <cstring>
#include <mutex>
#include <string>

#include "common/config.h"
#include "common/per_thread.h"

namespace mixccl::log {

std::atomic<Level> gLevel{Level::kNone};
std::atomic<uint64_t> gSubsys{kInit | kBootstrap | kEnv};
std::atomic<bool> gInited{false};

namespace {

std::once_flag gInitOnce;
std::mutex gMutex;  // guards gLogger replacement
std::shared_ptr<spdlog::logger> gLogger;
thread_local int tRank MIXCCL_TLS_FAST = -1;
char gHost[HOST_NAME_MAX + 1] = "";  // a name of HOST_NAME_MAX (64) characters keeps its last one

struct SubsysName {
  const char* name;
  uint64_t bits;
};
constexpr SubsysName kSubsysNames[] = {
    {"INIT", kInit},           {"COLL", kColl},   {"P2P", kP2p}, {"SHM", kShm},     {"NET", kNet},
    {"GRAPH", kGraph},         {"TUNING", kTune}, {"ENV", kEnv}, {"ALLOC", kAlloc}, {"CALL", kCall},
    {"BOOTSTRAP", kBootstrap}, {"REG", kReg},     {"ALL", kAll},
};

Level parseLevel(const std::string& s) {
  if (strcasecmp(s.c_str(), "VERSION") == 0) return Level::kVersion;
  if (strcasecmp(s.c_str(), "WARN") == 0) return Level::kWarn;
  if (strcasecmp(s.c_str(), "INFO") == 0) return Level::kInfo;
  // NCCL's ABORT sits between INFO and TRACE; we have nothing at that level, so it logs as INFO.
  if (strcasecmp(s.c_str(), "ABORT") == 0) return Level::kInfo;
  if (strcasecmp(s.c_str(), "TRACE") == 0) return Level::kTrace;
  return Level::kNone;
}

uint64_t parseSubsys(const std::string& s) {
  bool invert = !s.empty() && s[0] == '^';
  uint64_t mask = 0;
  size_t pos = invert ? 1 : 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    std::string tok = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    for (const SubsysName& n : kSubsysNames) {
      if (strcasecmp(tok.c_str(), n.name) == 0) mask |= n.bits;
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return invert ? ~mask : mask;
}

// Expands %h (host name), %p (pid) and %% (a percent sign) in NCCL_DEBUG_FILE; other % pairs stay.
std::string expandPath(const std::string& pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      char c = pattern[++i];
      if (c == 'h') {
        out += gHost;
      } else if (c == 'p') {
        out += std::to_string(getpid());
      } else if (c == '%') {
        out += '%';  // "%%" is a literal percent sign, as in NCCL
      } else {
        out += '%';
        out += c;
      }
    } else {
      out += pattern[i];
    }
  }
  return out;
}

// fresh: read the environment now instead of the configuration cache (ncclResetDebugInit exists
// so that a program can change NCCL_DEBUG* after the library read them).
void load(bool fresh) {
  auto get = [fresh](config::Knob k) { return fresh ? config::getStringFresh(k) : config::getString(k); };
  gethostname(gHost, sizeof(gHost) - 1);  // the last byte stays the terminator
  if (char* dot = strchr(gHost, '.')) *dot = '\0';
  const Level level = parseLevel(get(config::Knob::kDebug));
  gSubsys.store(parseSubsys(get(config::Knob::kDebugSubsys)), std::memory_order_relaxed);
  std::shared_ptr<spdlog::logger> logger;
  const std::string file = get(config::Knob::kDebugFile);
  try {
    if (!file.empty() && level != Level::kNone) {
      auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(expandPath(file), /*truncate=*/true);
      logger = std::make_shared<spdlog::logger>("mixccl", sink);
    }
  } catch (const std::exception& e) {
    fprintf(stderr, "mixccl: cannot open NCCL_DEBUG_FILE=%s (%s); logging to stdout\n", file.c_str(), e.what());
  }
  if (!logger) logger = std::make_shared<spdlog::logger>("mixccl", std::make_shared<spdlog::sinks::stdout_sink_mt>());
  logger->set_pattern("%v");
  logger->set_level(spdlog::level::trace);
  logger->flush_on(spdlog::level::trace);
  std::lock_guard<std::mutex> lock(gMutex);
  gLogger = std::move(logger);
  gLevel.store(level, std::memory_order_relaxed);  // after the logger exists
}

const char* levelName(Level level) {
  switch (level) {
    case Level::kWarn:
      return "WARN";
    case Level::kTrace:
      return "TRACE";
    default:
      return "INFO";
  }
}

}  // namespace

void initSlow() {
  std::call_once(gInitOnce, [] {
    load(/*fresh=*/false);
    gInited.store(true, std::memory_order_release);
  });
}

void reinit() {
  std::call_once(gInitOnce, [] {});
  load(/*fresh=*/true);
  gInited.store(true, std::memory_order_release);
}

void setThreadRank(int rank) { tRank = rank; }
int threadRank() { return tRank; }

void write(Level level, uint64_t subsys, const char* fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  char rank[16] = "";
  if (tRank >= 0) snprintf(rank, sizeof(rank), " [%d]", tRank);
  std::shared_ptr<spdlog::logger> logger;
  {
    std::lock_guard<std::mutex> lock(gMutex);
    logger = gLogger;
  }
  if (!logger) return;
  long tid = syscall(SYS_gettid);
  logger->info("{}:{}:{}{} NCCL {} {}", gHost, getpid(), tid, rank, levelName(level), msg);
}

}  // namespace mixccl::log
