// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
//
// Randomized fault trials across real processes, through the public C API of the shared library.
// Each trial is one job: a fresh process with a private /dev/shm (tests/support/private_shm.h)
// that makes a unique id and forks 2-4 ranks running collectives of 8 B to 64 MiB, then one fault:
//
//   kill      SIGKILL of a random rank at a random moment (from init to deep into collectives)
//   abort     a random rank calls ncclCommAbort from a second thread while its main thread is in
//             a collective, then stays alive (so peers cannot rely on its death)
//   silent    a random rank initialises and then never calls; the others hit MIXCCL_TIMEOUT
//   mismatch  at a random iteration one rank passes another count, datatype, operator,
//             collective or root; the receiver of its message must report ncclInvalidUsage
//
// Every survivor must get an error code from the failing call (ncclRemoteError or
// ncclSystemError; init may also say ncclInvalidUsage/ncclInternalError; a mismatch gives
// ncclInvalidUsage on at least one rank and ncclRemoteError elsewhere), in bounded time, and
// then ncclCommAbort must return promptly with no socket of the communicator left open. After
// the job no mixccl segment may remain in /dev/shm. The driver bounds every trial (a hang is a
// failure) and prints one line per trial plus a summary; the exit status is 0 only if every
// trial passed.
//
// Usage: fault_trials --transport shm|tcp|rdma [--trials N] [--seed S] [--scenarios kill,abort,silent,mismatch]
//                     [--max-bytes B] [--verbose]

#include <dirent.h>
#include <nccl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/private_shm.h"
#include "transports/rdma/rdma_presence.h"

namespace {

enum class Scenario { kKill, kAbort, kSilent, kMismatch };
constexpr int kNumScenarios = 4;
const char* scenarioName(Scenario s) {
  switch (s) {
    case Scenario::kKill:
      return "kill";
    case Scenario::kAbort:
      return "abort";
    case Scenario::kSilent:
      return "silent";
    case Scenario::kMismatch:
      return "mismatch";
  }
  return "?";
}

// Bounds (seconds). A survivor must fail within kDetect of the fault (peer death or abort), or
// within the deadline plus kDetect when the fault is silence.
constexpr double kDetect = 5.0;
constexpr int kKillTimeout = 10;   // MIXCCL_TIMEOUT for kill/abort trials: detection must beat it
constexpr int kSilentTimeout = 2;  // MIXCCL_TIMEOUT for silent trials: the deadline is the detector
constexpr double kAbortReturn = 1.0;
constexpr int kTrialLimit = 60;  // the whole job; beyond it the trial counts as a hang

const char* faultText(Scenario s) {
  switch (s) {
    case Scenario::kKill:
      return "was killed";
    case Scenario::kAbort:
      return "aborted";
    case Scenario::kSilent:
      return "stayed silent";
    case Scenario::kMismatch:
      return "passed mismatched arguments";
  }
  return "?";
}

int64_t nowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}
double secs(int64_t ns) { return static_cast<double>(ns) / 1e9; }

struct Trial {
  Scenario scenario = Scenario::kKill;
  std::string transport = "shm";  // shm, tcp or rdma
  int nranks = 2;
  int victim = 0;
  int64_t faultDelayNs = 0;  // kill: after the ranks were forked; abort: after init
  int mismatchAt = 0;        // mismatch: the iteration
  uint64_t seed = 0;
  size_t maxBytes = 64u << 20;
};

// What a rank writes to its pipe when it is done.
struct Report {
  int32_t phase = 0;       // 0 init, 1 collectives, 2 left the loop without an error
  int32_t code = 0;        // ncclResult_t of the first failing call
  int64_t initDoneNs = 0;  // when init returned successfully
  int64_t errorNs = 0;     // when the failing call returned
  int64_t abortStartNs = 0;
  int64_t abortNs = 0;  // duration of ncclCommAbort
  int32_t socketsLeft = 0;
  int32_t iterations = 0;
  char msg[320] = {};
};

int countSockets() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) {
      char path[300], target[64];
      snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
      ssize_t len = readlink(path, target, sizeof(target) - 1);
      if (len > 0 && strncmp(target, "socket:", 7) == 0) ++n;
    }
    closedir(d);
  }
  return n;
}

// The collective of iteration `i`: the same on every rank (seeded by the trial), except at the
// mismatch iteration, where the victim differs in one argument.
ncclResult_t runCollective(const Trial& t, int i, char* in, char* out, ncclComm_t comm, int rank) {
  std::mt19937_64 rng(t.seed * 1000003u + static_cast<uint64_t>(i));
  // Log-uniform size in [8 B, maxBytes], in floats; per-rank blocks for the gathering kinds.
  const double lo = std::log2(8.0), hi = std::log2(static_cast<double>(t.maxBytes));
  const size_t bytes = static_cast<size_t>(std::exp2(lo + (hi - lo) * (rng() % 10001) / 10000.0));
  const size_t count = std::max<size_t>(1, bytes / sizeof(float));
  const size_t block = std::max<size_t>(1, count / static_cast<size_t>(t.nranks));
  const int root = static_cast<int>(rng() % static_cast<uint64_t>(t.nranks));
  if (t.scenario == Scenario::kMismatch && i == t.mismatchAt) {
    const bool odd = rank == t.victim;
    switch (rng() % 5) {
      case 0:
        return ncclAllReduce(in, out, odd ? count + 1 : count, ncclFloat32, ncclSum, comm, nullptr);
      case 1:
        return ncclAllReduce(in, out, count, odd ? ncclInt32 : ncclFloat32, ncclSum, comm, nullptr);
      case 2:
        return ncclAllReduce(in, out, count, ncclFloat32, odd ? ncclMax : ncclSum, comm, nullptr);
      case 3:
        if (odd) return ncclAllGather(in, out, block, ncclFloat32, comm, nullptr);
        return ncclAllReduce(in, out, block, ncclFloat32, ncclSum, comm, nullptr);
      default:
        return ncclBroadcast(in, out, count, ncclFloat32, odd ? (root + 1) % t.nranks : root, comm, nullptr);
    }
  }
  switch (rng() % 6) {
    case 0:
      return ncclAllReduce(in, out, count, ncclFloat32, ncclSum, comm, nullptr);
    case 1:
      return ncclAllGather(in, out, block, ncclFloat32, comm, nullptr);
    case 2:
      return ncclReduceScatter(in, out, block, ncclFloat32, ncclSum, comm, nullptr);
    case 3:
      return ncclBroadcast(in, out, count, ncclFloat32, root, comm, nullptr);
    case 4:
      return ncclReduce(in, out, count, ncclFloat32, ncclMax, root, comm, nullptr);
    default:
      return ncclAlltoAll(in, out, block, ncclFloat32, comm, nullptr);
  }
}

// One rank process. `release` is read by the abort and silent victims: they stay alive (and
// silent) until the job has heard from every survivor.
Report runRank(const Trial& t, int rank, const ncclUniqueId& id, int release) {
  Report rep;
  const int baseSockets = countSockets();
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRank(&comm, t.nranks, id, rank);
  if (r != ncclSuccess) {
    rep.code = r;
    rep.errorNs = nowNs();
    snprintf(rep.msg, sizeof(rep.msg), "%s", ncclGetLastError(nullptr));
    rep.socketsLeft = countSockets() - baseSockets;
    return rep;
  }
  rep.initDoneNs = nowNs();
  rep.phase = 1;
  std::vector<char> in(t.maxBytes, 1), out(t.maxBytes, 0);  // after init: it takes a while
  const bool victim = rank == t.victim;
  auto waitRelease = [&] {
    char c;
    while (read(release, &c, 1) < 0 && errno == EINTR) {
    }
  };
  if (victim && t.scenario == Scenario::kSilent) {
    waitRelease();  // never calls; the others fail at their deadline
  } else {
    std::atomic<bool> aborting{false};
    std::thread aborter;
    if (victim && t.scenario == Scenario::kAbort) {
      aborter = std::thread([&] {
        timespec ts{static_cast<time_t>(t.faultDelayNs / 1000000000), static_cast<long>(t.faultDelayNs % 1000000000)};
        nanosleep(&ts, nullptr);
        aborting = true;
        rep.abortStartNs = nowNs();
        ncclCommAbort(comm);
        rep.abortNs = nowNs() - rep.abortStartNs;
      });
    }
    const int64_t loopEnd = nowNs() + 30 * 1000000000LL;
    for (int i = 0; nowNs() < loopEnd && !aborting; ++i) {
      r = runCollective(t, i, in.data(), out.data(), comm, rank);
      rep.iterations = i + 1;
      if (r != ncclSuccess) {
        rep.code = r;
        rep.errorNs = nowNs();
        snprintf(rep.msg, sizeof(rep.msg), "%s", ncclGetLastError(nullptr));
        break;
      }
    }
    if (rep.code == 0) rep.phase = 2;
    if (aborter.joinable()) {
      aborter.join();
      rep.socketsLeft = countSockets() - baseSockets;
      waitRelease();  // stay alive: peers must not need this process to die
      return rep;
    }
  }
  rep.abortStartNs = nowNs();
  ncclCommAbort(comm);
  rep.abortNs = nowNs() - rep.abortStartNs;
  rep.socketsLeft = countSockets() - baseSockets;
  return rep;
}

void setTrialEnv(const Trial& t) {
  // tcp and rdma: no shared memory; NCCL_NET then pins the network (rdma fails init without a device).
  setenv("NCCL_SHM_DISABLE", t.transport == "shm" ? "0" : "1", 1);
  setenv("NCCL_NET", t.transport == "rdma" ? "IB" : "Socket", 1);
  // Kill, abort and mismatch must be noticed well before this deadline; silence only by it.
  setenv("MIXCCL_TIMEOUT", std::to_string(t.scenario == Scenario::kSilent ? kSilentTimeout : kKillTimeout).c_str(), 1);
}

bool readAll(int fd, void* buf, size_t n) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t got = read(fd, p, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

bool acceptable(int code, bool init) {
  if (code == ncclRemoteError || code == ncclSystemError) return true;
  return init && (code == ncclInvalidUsage || code == ncclInternalError);
}

// The job process: returns 0 when the trial passed, else prints why and returns 1.
int runJob(const Trial& t, bool verbose) {
  std::string why;
  const bool privateShm = mixccl::testing::enterPrivateDevShm(&why);
  setTrialEnv(t);
  // The ranks are forked before the id exists: ncclGetUniqueId starts the root's thread, and a
  // child forked beside a running thread can inherit a lock that thread held (ASan found ranks
  // hung in its allocator). The id follows through a pipe, as a launcher would carry it.
  std::vector<pid_t> pids(t.nranks);
  std::vector<int> reportFds(t.nranks), idFds(t.nranks);
  int releaseFds[2];
  if (pipe(releaseFds) != 0) return 1;
  for (int r = 0; r < t.nranks; ++r) {
    int fds[2], idPipe[2];
    if (pipe(fds) != 0 || pipe(idPipe) != 0) return 1;
    pids[r] = fork();
    if (pids[r] == 0) {
      close(fds[0]);
      close(idPipe[1]);
      close(releaseFds[1]);
      for (int p = 0; p < r; ++p) close(idFds[p]);
      ncclUniqueId id;
      if (!readAll(idPipe[0], &id, sizeof(id))) _exit(1);  // the job has no id: it says why
      Report rep = runRank(t, r, id, releaseFds[0]);
      (void)!write(fds[1], &rep, sizeof(rep));
      _exit(0);
    }
    close(fds[1]);
    close(idPipe[0]);
    reportFds[r] = fds[0];
    idFds[r] = idPipe[1];
  }
  close(releaseFds[0]);
  ncclUniqueId id;
  const bool haveId = ncclGetUniqueId(&id) == ncclSuccess;
  if (!haveId) printf("    ncclGetUniqueId failed: %s\n", ncclGetLastError(nullptr));
  for (int r = 0; r < t.nranks; ++r) {
    if (haveId && write(idFds[r], &id, sizeof(id)) != static_cast<ssize_t>(sizeof(id))) return 1;
    close(idFds[r]);
  }
  if (!haveId) {
    for (pid_t p : pids) waitpid(p, nullptr, 0);
    return 1;
  }
  int64_t faultNs = 0;
  if (t.scenario == Scenario::kKill) {
    timespec ts{static_cast<time_t>(t.faultDelayNs / 1000000000), static_cast<long>(t.faultDelayNs % 1000000000)};
    nanosleep(&ts, nullptr);
    faultNs = nowNs();
    kill(pids[t.victim], SIGKILL);
  }
  // Survivors first (their reports bound the trial), then release the lingering victim.
  std::vector<Report> reps(t.nranks);
  std::vector<bool> got(t.nranks, false);
  for (int r = 0; r < t.nranks; ++r) {
    if (r == t.victim) continue;
    got[r] = readAll(reportFds[r], &reps[r], sizeof(Report));
  }
  close(releaseFds[1]);
  if (t.scenario != Scenario::kKill) got[t.victim] = readAll(reportFds[t.victim], &reps[t.victim], sizeof(Report));
  bool ok = true;
  auto bad = [&](int r, const char* fmt, auto... args) {
    printf("    rank %d: ", r);
    printf(fmt, args...);
    printf("\n");
    ok = false;
  };
  for (int r = 0; r < t.nranks; ++r) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    if (t.scenario == Scenario::kKill && r == t.victim) continue;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) bad(r, "process ended with status 0x%x (crash?)", status);
  }
  const Report& v = reps[t.victim];
  if (t.scenario == Scenario::kSilent && got[t.victim] && secs(v.abortNs) > kAbortReturn) {
    bad(t.victim, "ncclCommAbort after the others left took %.2f s", secs(v.abortNs));
  }
  if (t.scenario == Scenario::kAbort && got[t.victim]) {
    faultNs = v.abortStartNs;
    if (v.abortStartNs != 0 && secs(v.abortNs) > kAbortReturn) {
      bad(t.victim, "ncclCommAbort from another thread took %.2f s", secs(v.abortNs));
    }
    if (v.code != 0 && v.errorNs - v.abortStartNs > static_cast<int64_t>(kAbortReturn * 1e9)) {
      bad(t.victim, "the call blocked by the abort returned %.2f s after it", secs(v.errorNs - v.abortStartNs));
    }
  }
  // Mismatch: every rank fails (the ones that did not receive the odd message once the others
  // abort), close together, and at least one says ncclInvalidUsage.
  int64_t firstErrorNs = 0;
  int usage = 0;
  if (t.scenario == Scenario::kMismatch) {
    for (int r = 0; r < t.nranks; ++r) {
      if (!got[r] || reps[r].code == 0) continue;
      if (firstErrorNs == 0 || reps[r].errorNs < firstErrorNs) firstErrorNs = reps[r].errorNs;
      usage += reps[r].code == ncclInvalidUsage ? 1 : 0;
    }
    if (usage == 0) {
      printf("    no rank reported ncclInvalidUsage for the mismatch\n");
      ok = false;
    }
  }
  for (int r = 0; r < t.nranks; ++r) {
    if (!got[r]) {
      if (!(t.scenario == Scenario::kKill && r == t.victim)) bad(r, "no report (died?)");
      continue;
    }
    const Report& p = reps[r];
    if (verbose) {
      printf("    rank %d: phase %d code %d after %d iterations, abort %.3f s: %s\n", r, p.phase, p.code, p.iterations,
             secs(p.abortNs), p.msg);
    }
    if (p.socketsLeft != 0) bad(r, "%d socket(s) still open after ncclCommAbort", p.socketsLeft);
    if (r == t.victim && t.scenario != Scenario::kMismatch) continue;
    if (secs(p.abortNs) > kAbortReturn) bad(r, "ncclCommAbort took %.2f s", secs(p.abortNs));
    if (p.code == 0) {
      bad(r, "no call failed (%d iterations) although rank %d %s", p.iterations, t.victim, faultText(t.scenario));
      continue;
    }
    if (t.scenario == Scenario::kMismatch) {
      if (p.code != ncclInvalidUsage && p.code != ncclRemoteError) bad(r, "error code %d: %s", p.code, p.msg);
      if (p.code == ncclInvalidUsage && strstr(p.msg, "mismatched calls") == nullptr) bad(r, "message: %s", p.msg);
      if (secs(p.errorNs - firstErrorNs) > kDetect) {
        bad(r, "failed %.2f s after the first rank that noticed: %s", secs(p.errorNs - firstErrorNs), p.msg);
      }
      continue;
    }
    if (!acceptable(p.code, p.phase == 0))
      bad(r, "error code %d (%s): %s", p.code, ncclGetErrorString(static_cast<ncclResult_t>(p.code)), p.msg);
    double late = 0;
    if (t.scenario == Scenario::kSilent) {
      late = p.phase == 0 ? 0 : secs(p.errorNs - p.initDoneNs) - (kSilentTimeout + kDetect);
    } else if (faultNs != 0) {
      // A rank killed before it reached the rendezvous is indistinguishable from a slow one: init
      // may wait for the deadline there.
      const double bound = p.phase == 0 ? kKillTimeout + kDetect : kDetect;
      late = secs(p.errorNs - faultNs) - bound;
    }
    if (late > 0) bad(r, "failed %.2f s later than allowed: %s", late, p.msg);
  }
  if (privateShm) {
    int left = mixccl::testing::countMixcclShmSegments();
    if (left != 0) {
      printf("    %d mixccl segment(s) left in /dev/shm\n", left);
      ok = false;
    }
  }
  return ok ? 0 : 1;
}

struct Options {
  std::string transport = "shm";
  int trials = 20;
  uint64_t seed = 0;
  std::vector<Scenario> scenarios{Scenario::kKill, Scenario::kAbort, Scenario::kSilent, Scenario::kMismatch};
  size_t maxBytes = 64u << 20;
  bool verbose = false;
};

// CTest's SKIP_RETURN_CODE for this program (tests/fault/CMakeLists.txt).
constexpr int kSkipped = 77;

bool parse(int argc, char** argv, Options* o) {
  o->seed = static_cast<uint64_t>(time(nullptr));
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--transport") {
      std::string v = next();
      if (v != "shm" && v != "tcp" && v != "rdma") return false;
      o->transport = v;
    } else if (a == "--trials") {
      o->trials = atoi(next());
    } else if (a == "--seed") {
      o->seed = strtoull(next(), nullptr, 10);
    } else if (a == "--max-bytes") {
      o->maxBytes = strtoull(next(), nullptr, 10);
    } else if (a == "--scenarios") {
      o->scenarios.clear();
      std::string v = next();
      for (int k = 0; k < kNumScenarios; ++k) {
        if (v.find(scenarioName(static_cast<Scenario>(k))) != std::string::npos) {
          o->scenarios.push_back(static_cast<Scenario>(k));
        }
      }
      if (o->scenarios.empty()) return false;
    } else if (a == "--verbose") {
      o->verbose = true;
    } else {
      return false;
    }
  }
  return o->trials > 0 && o->maxBytes >= 8;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, &o)) {
    fprintf(stderr,
            "usage: %s --transport shm|tcp|rdma [--trials N] [--seed S] [--scenarios kill,abort,silent,mismatch] "
            "[--max-bytes B] [--verbose]\n",
            argv[0]);
    return 2;
  }
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (o.transport == "rdma" && !mixccl::anyRdmaDevice()) {
    printf("fault_trials: skipped: no RDMA device on this machine (scripts/rdma-check.sh runs it in a soft-RoCE VM)\n");
    return kSkipped;
  }
  printf("fault_trials: %s, %d trials, seed %llu\n", o.transport.c_str(), o.trials,
         static_cast<unsigned long long>(o.seed));
  std::mt19937_64 rng(o.seed);
  int failures = 0, hangs = 0;
  int perScenario[kNumScenarios] = {}, failedPerScenario[kNumScenarios] = {};
  const auto start = nowNs();
  for (int i = 0; i < o.trials; ++i) {
    Trial t;
    t.transport = o.transport;
    t.scenario = o.scenarios[rng() % o.scenarios.size()];
    t.nranks = 2 + static_cast<int>(rng() % 3);
    t.victim = static_cast<int>(rng() % static_cast<uint64_t>(t.nranks));
    t.seed = rng();
    t.maxBytes = o.maxBytes;
    // Kill: anywhere from before init to well into the collectives; abort: after init.
    t.faultDelayNs = static_cast<int64_t>(rng() % (t.scenario == Scenario::kKill ? 1500 : 400)) * 1000000;
    t.mismatchAt = static_cast<int>(rng() % 4);
    printf("trial %d: %s, %d ranks, victim %d, at %lld ms, seed %llu\n", i, scenarioName(t.scenario), t.nranks,
           t.victim, static_cast<long long>(t.faultDelayNs / 1000000), static_cast<unsigned long long>(t.seed));
    const int64_t t0 = nowNs();
    pid_t job = fork();
    if (job == 0) {
      setpgid(0, 0);  // the job and its ranks: one group to kill on a hang
      _exit(runJob(t, o.verbose));
    }
    setpgid(job, job);
    int status = 0;
    bool hung = false;
    while (waitpid(job, &status, WNOHANG) == 0) {
      if (nowNs() - t0 > kTrialLimit * 1000000000LL) {
        kill(-job, SIGKILL);
        waitpid(job, &status, 0);
        hung = true;
        break;
      }
      usleep(20000);
    }
    const int s = static_cast<int>(t.scenario);
    ++perScenario[s];
    const bool passed = !hung && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!passed) {
      ++failures;
      ++failedPerScenario[s];
      if (hung) ++hangs;
      printf("  FAILED%s (%.1f s)\n", hung ? ": HANG, killed" : "", secs(nowNs() - t0));
    } else {
      printf("  ok (%.1f s)\n", secs(nowNs() - t0));
    }
  }
  printf("fault_trials summary (%s, seed %llu, %.0f s):", o.transport.c_str(), static_cast<unsigned long long>(o.seed),
         secs(nowNs() - start));
  for (int s = 0; s < kNumScenarios; ++s) {
    if (perScenario[s] > 0) {
      printf(" %s %d/%d passed;", scenarioName(static_cast<Scenario>(s)), perScenario[s] - failedPerScenario[s],
             perScenario[s]);
    }
  }
  printf(" %d failed, %d hang(s)\n", failures, hangs);
  return failures == 0 ? 0 : 1;
}
