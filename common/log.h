// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// The one logging header. Lines look like NCCL's:
//   host:pid:tid [rank] NCCL INFO <message>
// Controlled by NCCL_DEBUG (VERSION|WARN|INFO|TRACE; NCCL's ABORT reads as INFO), NCCL_DEBUG_SUBSYS
// (comma list, ^ to negate; default INIT,BOOTSTRAP,ENV as NCCL) and NCCL_DEBUG_FILE (%h = hostname,
// %p = pid, %% = %). The macros test level and subsystem before any formatting happens, so a
// disabled log line costs one load and a compare. spdlog/fmt stay in log.cc.

#include <atomic>
#include <cstdint>

namespace mixccl::log {

enum class Level : int { kNone = 0, kVersion = 1, kWarn = 2, kInfo = 3, kTrace = 4 };

// Subsystem bits (names as in NCCL_DEBUG_SUBSYS).
enum Subsys : uint64_t {
  kInit = 1ull << 0,
  kColl = 1ull << 1,
  kP2p = 1ull << 2,
  kShm = 1ull << 3,
  kNet = 1ull << 4,
  kGraph = 1ull << 5,
  kTune = 1ull << 6,
  kEnv = 1ull << 7,
  kAlloc = 1ull << 8,
  kCall = 1ull << 9,
  kBootstrap = 1ull << 10,
  kReg = 1ull << 11,
  kAll = ~0ull,
};

// Current thresholds; read once from the environment (reinit() re-reads it, bypassing the
// configuration cache: ncclResetDebugInit and tests).
// Atomics because tests (and ncclResetDebugInit) may re-read the environment while other threads
// log; relaxed loads cost the same as plain ones on the hot path.
extern std::atomic<Level> gLevel;
extern std::atomic<uint64_t> gSubsys;
// Set once the environment was read. Every log macro calls init(), so its fast path is one
// load: std::call_once alone stores the callable in thread-local variables on every call.
extern std::atomic<bool> gInited;
void initSlow();
inline void init() {
  if (!gInited.load(std::memory_order_acquire)) initSlow();
}
void reinit();

inline bool enabled(Level level, uint64_t subsys) {
  return static_cast<int>(level) <= static_cast<int>(gLevel.load(std::memory_order_relaxed)) &&
         (level <= Level::kWarn || (subsys & gSubsys.load(std::memory_order_relaxed)) != 0);
}

void write(Level level, uint64_t subsys, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

// The rank printed in "[rank]" for log lines of this thread; -1 prints nothing there.
// RankScope sets it for the duration of an API call or a communicator's background thread.
void setThreadRank(int rank);
int threadRank();
class RankScope {
 public:
  explicit RankScope(int rank) : saved_(threadRank()) { setThreadRank(rank); }
  ~RankScope() { setThreadRank(saved_); }
  RankScope(const RankScope&) = delete;
  RankScope& operator=(const RankScope&) = delete;

 private:
  int saved_;
};

}  // namespace mixccl::log

#define MIXCCL_LOG_(lvl, sub, ...)                                         \
  do {                                                                     \
    ::mixccl::log::init();                                                 \
    if (::mixccl::log::enabled(::mixccl::log::Level::lvl, (sub))) {        \
      ::mixccl::log::write(::mixccl::log::Level::lvl, (sub), __VA_ARGS__); \
    }                                                                      \
  } while (0)

#define MIXCCL_WARN(...) MIXCCL_LOG_(kWarn, ::mixccl::log::kAll, __VA_ARGS__)
#define MIXCCL_INFO(sub, ...) MIXCCL_LOG_(kInfo, (sub), __VA_ARGS__)
#define MIXCCL_TRACE(sub, ...) MIXCCL_LOG_(kTrace, (sub), __VA_ARGS__)
