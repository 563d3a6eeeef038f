// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// mixcclrun: starts N ranks of one job on this host and supervises them (see --help).
//
// One thread does everything: signals arrive on a signalfd (they stay blocked, so none is lost
// or handled at an awkward moment), rank output on pipes, and deadlines become poll timeouts.
// The job is in one of two phases:
//   running  - ranks are watched; a rank that fails, the --timeout deadline, a launch failure or a
//              terminating signal moves the job to "stopping" and fixes the exit status;
//   stopping - the remaining ranks got SIGTERM (or the forwarded signal); after --grace seconds
//              those still alive get SIGKILL.
// Only the first cause is reported and decides the exit status, so a failure's knock-on deaths
// (ranks we terminated) do not bury it.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "perf/mixcclrun_options.h"
#include "perf/mixcclrun_output.h"
#include "perf/mixcclrun_spawn.h"

namespace mixccl::run {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
constexpr int kTimeoutExitCode = 124;  // what coreutils timeout(1) uses

bool terminates(int sig) { return sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT; }

std::string signalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

__attribute__((format(printf, 1, 2))) void say(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "mixcclrun: %s\n", buf);
  std::fflush(stderr);
}

// `seconds` from now. A limit past what the clock counts (steady_clock nanoseconds end about 292
// years out) means "never": converted, it would overflow into a time in the past and fire at once.
Clock::time_point after(double seconds) {
  constexpr double kNever = 1e9;  // about 31 years
  if (seconds >= kNever) return Clock::time_point::max();
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

struct Rank {
  pid_t pid = -1;
  bool running = false;
};

class Supervisor {
 public:
  explicit Supervisor(Options o) : o_(std::move(o)) {}
  ~Supervisor() {
    if (sigfd_ >= 0) close(sigfd_);
  }

  int run() {
    if (!setupSignals()) return 1;
    if (o_.timeoutSeconds > 0) timeoutAt_ = after(o_.timeoutSeconds);
    launch();
    reap();  // notices a job that never got going
    while (!finished()) step();
    return exitCode_.value_or(0);
  }

 private:
  bool setupSignals() {
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    // A signal we inherited as ignored (nohup, a shell's background job) stays ignored, for us
    // and for the ranks, as it would without a launcher in between.
    auto takeUnlessIgnored = [&mask](int sig) {
      struct sigaction old;
      sigaction(sig, nullptr, &old);
      if (old.sa_handler != SIG_IGN) sigaddset(&mask, sig);
    };
    for (int sig : kForwardedSignals) takeUnlessIgnored(sig);
    // Job control: the ranks run in process groups of their own, so a terminal's Ctrl-Z (SIGTSTP)
    // and a shell's `fg`/`bg` (SIGCONT) reach only this process; it passes them on (onSignals).
    // SIGCONT continues this process whatever its mask, and then arrives here to be forwarded.
    takeUnlessIgnored(SIGTSTP);
    takeUnlessIgnored(SIGCONT);
    // An ignored SIGCHLD would make the kernel reap ranks before we see how they ended.
    signal(SIGCHLD, SIG_DFL);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ignore, &setup_.pipeAction);
    sigprocmask(SIG_BLOCK, &mask, &setup_.originalMask);
    sigfd_ = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sigfd_ < 0) {
      say("signalfd() failed: %s", strerror(errno));
      return false;
    }
    setup_.parentPid = getpid();
    return true;
  }

  void launch() {
    Ports ports{o_.port, o_.port + 1, makeJobSecret()};
    std::string error;
    if (o_.port == 0 && !pickFreePorts(&ports, &error)) {
      say("%s", error.c_str());
      exitCode_ = 1;
      return;
    }
    ranks_.resize(o_.np);
    for (int r = 0; r < o_.np; ++r) {
      ChildSetup setup = setup_;
      int pipes[2][2] = {{-1, -1}, {-1, -1}};
      if (o_.tagOutput) {
        if (pipe2(pipes[0], O_CLOEXEC) != 0 || pipe2(pipes[1], O_CLOEXEC) != 0) {
          say("pipe2() failed: %s", strerror(errno));
          for (auto& p : pipes)
            for (int fd : p)
              if (fd >= 0) close(fd);
          return stop(SIGTERM, 1);
        }
        setup.stdoutFd = pipes[0][1];
        setup.stderrFd = pipes[1][1];
      }
      int execErrno = 0;
      pid_t pid = spawnRank(o_.command, rankEnvironment(o_, r, ports), setup, &execErrno, &error);
      if (o_.tagOutput) {
        // Our copies of the write ends must go, or the pipes never reach end of file.
        close(pipes[0][1]);
        close(pipes[1][1]);
        streams_.push_back(std::make_unique<TaggedStream>(pipes[0][0], STDOUT_FILENO, r));
        streams_.push_back(std::make_unique<TaggedStream>(pipes[1][0], STDERR_FILENO, r));
      }
      if (pid < 0) {
        say("rank %d: %s", r, error.c_str());
        // The shell's convention: 127 when the command is missing, 126 when it cannot run.
        return stop(SIGTERM, execErrno == ENOENT ? 127 : execErrno != 0 ? 126 : 1);
      }
      ranks_[r] = Rank{pid, true};
    }
  }

  bool anyRunning() const {
    for (const Rank& r : ranks_)
      if (r.running) return true;
    return false;
  }

  bool anyStreamOpen() const {
    for (const auto& s : streams_)
      if (s->open()) return true;
    return false;
  }

  bool finished() const { return !anyRunning() && !anyStreamOpen(); }

  void signalRanks(int sig) {
    for (const Rank& r : ranks_)
      if (r.running) kill(-r.pid, sig);
  }

  // Moves the job to "stopping": fixes the exit status (first cause wins), sends `sig` to every
  // rank still running and arms the SIGKILL deadline.
  void stop(int sig, int exitCode) {
    if (stopping_) return;
    stopping_ = true;
    exitCode_ = exitCode;
    signalRanks(sig);
    killAt_ = after(o_.graceSeconds);
  }

  void onRankExit(int rank, int status) {
    Rank& r = ranks_[rank];
    r.running = false;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
    if (stopping_) return;  // an effect of the stop, not a new cause
    int code;
    if (WIFEXITED(status)) {
      code = WEXITSTATUS(status);
      say("rank %d (pid %d) exited with code %d; stopping the other ranks", rank, r.pid, code);
    } else {
      int sig = WTERMSIG(status);
      code = 128 + sig;
      say("rank %d (pid %d) was killed by signal %d (%s)%s; stopping the other ranks", rank, r.pid, sig,
          signalName(sig).c_str(), WCOREDUMP(status) ? ", core dumped" : "");
    }
    stop(SIGTERM, code);
  }

  void reap() {
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      if (!WIFEXITED(status) && !WIFSIGNALED(status)) continue;
      for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
        if (ranks_[r].pid == pid && ranks_[r].running) onRankExit(r, status);
      }
    }
    if (!anyRunning() && !drainUntil_) {
      // Every rank is gone, so their output is all in the pipes; wait a little for end of file in
      // case something a rank started still holds a pipe open.
      drainUntil_ = after(std::max(o_.graceSeconds, 0.5));
    }
  }

  void onSignals() {
    signalfd_siginfo info;
    while (read(sigfd_, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
      int sig = static_cast<int>(info.ssi_signo);
      if (sig == SIGCHLD) {
        reap();
        continue;
      }
      if (sig == SIGTSTP) {
        // Stop the ranks (SIGSTOP: a rank may catch SIGTSTP), then ourselves, as a job of one
        // process would stop; the shell's SIGCONT brings us back and is forwarded below.
        if (anyRunning()) signalRanks(SIGSTOP);
        kill(getpid(), SIGSTOP);
        continue;
      }
      if (!anyRunning()) continue;
      if (terminates(sig) && !stopping_) {
        say("received %s; forwarding it to the ranks", signalName(sig).c_str());
        stop(sig, 128 + sig);
      } else {
        signalRanks(sig);
      }
    }
    reap();  // SIGCHLDs coalesce; a final sweep costs nothing
  }

  void onDeadlines() {
    auto now = Clock::now();
    if (!stopping_ && timeoutAt_ && now >= *timeoutAt_) {
      say("timeout: the job ran for %g s; stopping the ranks", o_.timeoutSeconds);
      stop(SIGTERM, kTimeoutExitCode);
    }
    if (stopping_ && !killed_ && now >= killAt_ && anyRunning()) {
      for (int r = 0; r < static_cast<int>(ranks_.size()); ++r) {
        if (ranks_[r].running)
          say("rank %d (pid %d) still running after %g s; sending SIGKILL", r, ranks_[r].pid, o_.graceSeconds);
      }
      signalRanks(SIGKILL);
      killed_ = true;
    }
    if (drainUntil_ && now >= *drainUntil_) {
      for (auto& s : streams_) s->close();
    }
  }

  int pollTimeoutMs() const {
    std::optional<Clock::time_point> next;
    auto consider = [&](Clock::time_point t) {
      if (!next || t < *next) next = t;
    };
    if (!stopping_ && timeoutAt_) consider(*timeoutAt_);
    if (stopping_ && !killed_ && anyRunning()) consider(killAt_);
    if (drainUntil_) consider(*drainUntil_);
    if (!next) return -1;
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(*next - Clock::now()).count() + 1;
    return static_cast<int>(std::clamp<long long>(ms, 0, 60 * 60 * 1000));
  }

  void step() {
    std::vector<pollfd> fds;
    fds.push_back({sigfd_, POLLIN, 0});
    std::vector<TaggedStream*> polled;
    for (auto& s : streams_) {
      if (!s->open()) continue;
      fds.push_back({s->fd(), POLLIN, 0});
      polled.push_back(s.get());
    }
    int n = poll(fds.data(), fds.size(), pollTimeoutMs());
    if (n < 0 && errno != EINTR) {
      say("poll() failed: %s", strerror(errno));
      stop(SIGKILL, 1);
      killed_ = true;
      return;
    }
    // Output first, so a rank's last lines come out before the report of how it ended.
    for (size_t i = 0; i < polled.size(); ++i) {
      if (fds[i + 1].revents != 0) polled[i]->pump();
    }
    if (fds[0].revents != 0) onSignals();
    onDeadlines();
  }

  Options o_;
  ChildSetup setup_{};
  int sigfd_ = -1;
  std::vector<Rank> ranks_;
  std::vector<std::unique_ptr<TaggedStream>> streams_;
  std::optional<Clock::time_point> timeoutAt_;
  bool stopping_ = false;
  bool killed_ = false;
  Clock::time_point killAt_{};
  std::optional<Clock::time_point> drainUntil_;
  std::optional<int> exitCode_;
};

}  // namespace
}  // namespace mixccl::run

int main(int argc, char** argv) {
  using namespace mixccl::run;
  ParseResult parsed = parseOptions(argc, argv);
  if (parsed.exit) {
    if (parsed.exitCode == 0) {
      std::fputs(parsed.message.empty() ? usageText() : (parsed.message + "\n").c_str(), stdout);
    } else {
      std::fprintf(stderr, "%s\n", parsed.message.c_str());
    }
    return parsed.exitCode;
  }
  Supervisor supervisor(std::move(parsed.options));
  return supervisor.run();
}
