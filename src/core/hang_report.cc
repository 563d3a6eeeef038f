// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "src/core/hang_report.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <thread>

#include "common/config.h"
#include "common/log.h"
#include "src/core/communicator.h"

namespace mixccl {

WaitBoard::WaitBoard(int nranks)
    : nranks_(nranks),
      reached_(new std::atomic<uint64_t>[static_cast<size_t>(nranks)]),
      waiting_(new std::atomic<uint64_t>[static_cast<size_t>(nranks)]) {
  for (int r = 0; r < nranks; ++r) {
    reached_[r].store(0, std::memory_order_relaxed);
    waiting_[r].store(0, std::memory_order_relaxed);
  }
}

void WaitBoard::publish(std::vector<Wait> waits, std::chrono::steady_clock::time_point since) {
  std::lock_guard<std::mutex> lock(mu_);
  inWait_ = true;
  waits_ = std::move(waits);
  since_ = since;
}

void WaitBoard::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  inWait_ = false;
  waits_.clear();
}

namespace {

// "41" for a stored seq + 1, "none" for none.
std::string seqText(uint64_t stored) { return stored == 0 ? "none" : std::to_string(stored - 1); }

}  // namespace

std::string WaitBoard::report(const Communicator& comm, const char* reason) const {
  std::ostringstream out;
  out << "hang report (" << reason << "): comm 0x" << std::hex << comm.commHash() << std::dec << " rank " << comm.rank()
      << "/" << comm.nranks() << " on " << comm.peer(comm.rank()).host << " pid " << getpid() << "\n";
  const uint64_t issued = issued_.load(std::memory_order_relaxed);
  const uint64_t done = done_.load(std::memory_order_relaxed);
  out << "  collectives: last issued seq " << seqText(issued) << ", last completed seq " << seqText(done);
  std::vector<int> peers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!inWait_) {
      out << "; not blocked in a call (or blocked for less than " << kPublishAfter.count() << " ms)";
    } else {
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - since_).count();
      char buf[64];
      snprintf(buf, sizeof(buf), "%.1f", secs);
      out << "; no progress for " << buf << " s";
      for (const Wait& w : waits_) {
        out << "\n  waiting in: " << w.what;
        peers.insert(peers.end(), w.peers.begin(), w.peers.end());
      }
    }
  }
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  // Peers of the blocked operation; the rest of the communicator is not waited for.
  for (int p : peers) {
    if (p < 0 || p >= nranks_) continue;
    const uint64_t reached = reached_[p].load(std::memory_order_relaxed);
    const uint64_t waiting = waiting_[p].load(std::memory_order_relaxed);
    out << "\n  peer rank " << p << " (" << comm.peer(p).host << " pid " << comm.peer(p).pid << "): ";
    if (reached == 0) {
      out << "no collective message received from it";
    } else {
      out << "last collective message from it: seq " << reached - 1;
    }
    if (waiting != 0) out << "; its probe says it waits in seq " << waiting - 1;
  }
  return out.str();
}

namespace hang {
namespace {

std::mutex gRegistryMutex;
std::vector<Communicator*>& registry() {
  static auto* comms = new std::vector<Communicator*>();  // leaked: used from the signal thread at exit
  return *comms;
}

int gSignalPipe[2] = {-1, -1};

void onSignal(int) {
  const int saved = errno;
  const char byte = 1;
  ssize_t n = write(gSignalPipe[1], &byte, 1);  // async-signal-safe; a full pipe already has a dump due
  (void)n;
  errno = saved;
}

// Waits for signals and dumps every live communicator of the process.
void signalThread() {
  pthread_setname_np(pthread_self(), "mixccl-dump");
  for (;;) {
    char byte;
    ssize_t n = read(gSignalPipe[0], &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    std::lock_guard<std::mutex> lock(gRegistryMutex);
    if (registry().empty()) MIXCCL_WARN("hang report (SIGUSR1): no live communicator in this process");
    for (Communicator* c : registry()) logReport(*c, "SIGUSR1");
  }
}

}  // namespace

void registerComm(Communicator* comm) {
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  registry().push_back(comm);
}

void unregisterComm(Communicator* comm) {
  std::lock_guard<std::mutex> lock(gRegistryMutex);
  auto& r = registry();
  r.erase(std::remove(r.begin(), r.end(), comm), r.end());
}

void logReport(const Communicator& comm, const char* reason) {
  const std::string text = comm.board().report(comm, reason);
  log::init();
  log::RankScope scope(comm.rank());
  // One log line per report line: each keeps the host:pid:tid [rank] prefix for grep and sort.
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) log::write(log::Level::kWarn, log::kAll, "%s", line.c_str());
}

void installSignalDump() {
  if (!config::getBool(config::Knob::kDumpOnSignal)) return;
  static std::once_flag once;
  std::call_once(once, [] {
    if (pipe2(gSignalPipe, O_CLOEXEC | O_NONBLOCK) != 0) {
      MIXCCL_WARN("MIXCCL_DUMP_ON_SIGNAL: cannot create a pipe (%s); no dumps on SIGUSR1", strerror(errno));
      return;
    }
    // The reader blocks; only the handler's end stays non-blocking.
    fcntl(gSignalPipe[0], F_SETFL, fcntl(gSignalPipe[0], F_GETFL) & ~O_NONBLOCK);
    std::thread(signalThread).detach();
    struct sigaction sa = {};
    sa.sa_handler = onSignal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    struct sigaction previous = {};
    sigaction(SIGUSR1, &sa, &previous);
    // The user asked for this knob, but the application's own SIGUSR1 handler stops working
    // now: say so rather than take it over in silence.
    const bool hadHandler = (previous.sa_flags & SA_SIGINFO) != 0
                                ? previous.sa_sigaction != nullptr
                                : previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN;
    if (hadHandler) {
      MIXCCL_WARN(
          "MIXCCL_DUMP_ON_SIGNAL: replaced the process's own SIGUSR1 handler; SIGUSR1 now only logs hang "
          "reports (unset MIXCCL_DUMP_ON_SIGNAL to keep the application's handler)");
    }
    MIXCCL_INFO(log::kInit, "MIXCCL_DUMP_ON_SIGNAL: SIGUSR1 logs a hang report of every communicator of pid %d",
                getpid());
  });
}

}  // namespace hang
}  // namespace mixccl
