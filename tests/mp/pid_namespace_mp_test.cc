// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Ranks of one host in different pid namespaces, sharing /dev/shm and the network (one container
// per device with --ipc=host --net=host, Kubernetes hostIPC): they are one host and use shm, but
// the pid a peer reports means nothing in the other namespace (it names no process there, or
// another one: rank 1 below is pid 1 of its namespace, and pid 1 here is our init). Liveness must
// not depend on it (PROTOCOL.md 6.1, the pid-space field; transports/shm/shm_rank_page.h):
//  - a rank stopped for longer than a second (SIGSTOP, as a debugger or an overloaded host would)
//    is alive: the collectives go on once it resumes, on both ends;
//  - a rank killed with SIGKILL is noticed by the survivor within a few seconds, with a message
//    naming it, not at MIXCCL_TIMEOUT.
// Rank 0 runs in the test's pid namespace, rank 1 in a new one (CLONE_NEWPID); both over shm and
// over TCP (NCCL_SHM_DISABLE=1). Skipped where this process may not create a pid namespace.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <nccl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "common/config.h"
#include "common/socket.h"

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kRanks = 2;
constexpr int kNsRank = 1;  // the rank in a pid namespace of its own
constexpr size_t kCount = 4096 + 3;
constexpr int kSkip = 77;

// Whether this process may create a pid namespace: a child tries, and reports errno.
bool canUnsharePid(std::string* why) {
  int fds[2];
  if (pipe(fds) != 0) return false;
  const pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    int err = unshare(CLONE_NEWPID) == 0 ? 0 : errno;
    if (err == 0) {
      const pid_t g = fork();  // the namespace exists once its first process does
      if (g == 0) _exit(0);
      if (g < 0) err = errno;
      if (g > 0) waitpid(g, nullptr, 0);
    }
    if (write(fds[1], &err, sizeof(err)) != static_cast<ssize_t>(sizeof(err))) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  int err = -1;
  const bool got = child > 0 && read(fds[0], &err, sizeof(err)) == static_cast<ssize_t>(sizeof(err));
  close(fds[0]);
  if (child > 0) waitpid(child, nullptr, 0);
  if (got && err == 0) return true;
  *why = std::string("unshare(CLONE_NEWPID): ") + (got ? strerror(err) : "the probe failed");
  return false;
}

enum class Mode { kStop, kKill };

// One rank: all-reduces until told to stop (kStop: rank 0 reads its control pipe and passes the
// word on in the data) or until a collective fails (kKill: the survivor must fail naming its peer).
int runRank(int rank, const ncclUniqueId& id, Mode mode, int readyFd, int controlFd) {
  ncclComm_t comm = nullptr;
  if (ncclCommInitRank(&comm, kRanks, id, rank) != ncclSuccess) {
    fprintf(stderr, "rank %d (pid %d here): init failed: %s\n", rank, getpid(), ncclGetLastError(nullptr));
    return 1;
  }
  if (write(readyFd, "r", 1) != 1) return 1;
  close(readyFd);
  std::vector<int32_t> v(kCount);
  for (long iter = 0;; ++iter) {
    char c;
    const bool stop = rank == 0 && controlFd >= 0 && read(controlFd, &c, 1) == 1;
    for (size_t i = 0; i < kCount; ++i) v[i] = static_cast<int32_t>(i % 7) + rank;
    v[0] = stop ? 1 : 0;
    if (ncclAllReduce(v.data(), v.data(), kCount, ncclInt32, ncclSum, comm, nullptr) != ncclSuccess) {
      const std::string msg = ncclGetLastError(nullptr);
      fprintf(stderr, "rank %d: all-reduce %ld failed: %s\n", rank, iter, msg.c_str());
      if (mode == Mode::kStop) return 2;
      // The survivor: the message must name the dead rank.
      const std::string peer = "rank " + std::to_string(1 - rank);
      return msg.find(peer) != std::string::npos ? 0 : 3;
    }
    for (size_t i = 1; i < kCount; ++i) {
      if (v[i] != 2 * static_cast<int32_t>(i % 7) + 1) {
        fprintf(stderr, "rank %d: all-reduce %ld: element %zu = %d\n", rank, iter, i, v[i]);
        return 4;
      }
    }
    if (v[0] != 0) break;
  }
  if (mode == Mode::kKill) return 5;  // a kill job ends by a failure only
  return ncclCommDestroy(comm) == ncclSuccess ? 0 : 6;
}

// A rank process. Rank kNsRank runs as the first process of a new pid namespace, under a process
// in ours that waits for it (as a container runtime's shim does); *signalPid is the process to
// stop or kill (the rank itself, by its pid here), *waitPid the one to wait for.
struct RankProcess {
  pid_t signalPid = -1;
  pid_t waitPid = -1;
  int idWriter = -1;
  int readyReader = -1;
};

bool spawnRank(int rank, Mode mode, int controlFd, RankProcess* out) {
  int idPipe[2], readyPipe[2], pidPipe[2];
  if (pipe(idPipe) != 0 || pipe(readyPipe) != 0 || pipe(pidPipe) != 0) return false;
  const pid_t child = fork();
  if (child < 0) return false;
  if (child == 0) {
    mixccl::config::resetForTesting();
    close(idPipe[1]);
    close(readyPipe[0]);
    close(pidPipe[0]);
    auto body = [&]() {
      ncclUniqueId id;
      if (read(idPipe[0], &id, sizeof(id)) != static_cast<ssize_t>(sizeof(id))) return 1;
      return runRank(rank, id, mode, readyPipe[1], controlFd);
    };
    if (rank != kNsRank) {
      const pid_t self = getpid();
      if (write(pidPipe[1], &self, sizeof(self)) != static_cast<ssize_t>(sizeof(self))) _exit(1);
      close(pidPipe[1]);
      const int status = body();
      fflush(nullptr);
      _exit(status);
    }
    if (unshare(CLONE_NEWPID) != 0) _exit(kSkip);
    const pid_t rankPid = fork();  // pid 1 of the new namespace
    if (rankPid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // a killed job leaves no rank behind
      close(pidPipe[1]);
      const int status = body();
      fflush(nullptr);
      _exit(status);
    }
    if (write(pidPipe[1], &rankPid, sizeof(rankPid)) != static_cast<ssize_t>(sizeof(rankPid))) _exit(1);
    close(pidPipe[1]);
    close(idPipe[0]);
    close(readyPipe[1]);
    int status = 0;
    if (rankPid < 0 || waitpid(rankPid, &status, 0) != rankPid) _exit(1);
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  close(idPipe[0]);
  close(readyPipe[1]);
  close(pidPipe[1]);
  out->waitPid = child;
  out->idWriter = idPipe[1];
  out->readyReader = readyPipe[0];
  const bool gotPid = read(pidPipe[0], &out->signalPid, sizeof(pid_t)) == static_cast<ssize_t>(sizeof(pid_t));
  close(pidPipe[0]);
  return gotPid && out->signalPid > 0;
}

// Kills a rank not reaped yet and reaps it. Its waitPid is unreaped, so neither pid can have been
// reused (the process in the new namespace is its waitPid's child, reaped by it).
void killRank(RankProcess* p) {
  if (p->waitPid <= 0) return;
  if (p->signalPid > 0 && p->signalPid != p->waitPid) kill(p->signalPid, SIGKILL);
  kill(p->waitPid, SIGKILL);
  waitpid(p->waitPid, nullptr, 0);
  p->waitPid = p->signalPid = -1;
}

// The exit code of rank process `p`, or -1 once `limit` passed (then it is killed).
int waitExit(RankProcess* p, milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(p->waitPid, &status, WNOHANG);
    if (r == p->waitPid) {
      p->waitPid = p->signalPid = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (r < 0 || Clock::now() > deadline) {
      killRank(p);
      return -1;
    }
    std::this_thread::sleep_for(milliseconds(5));
  }
}

#define JOB_CHECK(cond, ...)                \
  do {                                      \
    if (!(cond)) {                          \
      fprintf(stderr, "job: " __VA_ARGS__); \
      fprintf(stderr, " [%s]\n", #cond);    \
      return 1;                             \
    }                                       \
  } while (0)

// The job: both ranks, then the stops or the kill. `victim`: the rank killed (kKill).
int runJob(Mode mode, int victim) {
  int control[2];
  JOB_CHECK(pipe2(control, O_NONBLOCK) == 0, "control pipe");
  RankProcess ranks[kRanks];
  // However the job ends, no rank outlives it (a rank still waiting on a dead peer would wait
  // for MIXCCL_TIMEOUT, and print into a later test's output).
  struct Reaper {
    RankProcess* ranks;
    ~Reaper() {
      for (int r = 0; r < kRanks; ++r) killRank(&ranks[r]);
    }
  } reaper{ranks};
  for (int r = 0; r < kRanks; ++r) JOB_CHECK(spawnRank(r, mode, control[0], &ranks[r]), "spawn rank %d", r);
  close(control[0]);
  // The ranks are forked: now the id (ncclGetUniqueId starts the root's thread in this process).
  ncclUniqueId id;
  JOB_CHECK(ncclGetUniqueId(&id) == ncclSuccess, "unique id: %s", ncclGetLastError(nullptr));
  for (RankProcess& p : ranks) {
    JOB_CHECK(write(p.idWriter, &id, sizeof(id)) == static_cast<ssize_t>(sizeof(id)), "id write");
    close(p.idWriter);
  }
  for (int r = 0; r < kRanks; ++r) {
    char c;
    if (read(ranks[r].readyReader, &c, 1) != 1) {
      const int code = waitExit(&ranks[r], milliseconds(10000));
      if (code == kSkip) return kSkip;
      JOB_CHECK(false, "rank %d ended before it was ready (exit %d)", r, code);
    }
    close(ranks[r].readyReader);
  }
  std::this_thread::sleep_for(milliseconds(300));  // both deep in their loops
  if (mode == Mode::kStop) {
    // Each rank in turn stops for 1.2 s while the other waits on it: the peer in the other pid
    // namespace must not read that as death.
    for (const RankProcess& p : ranks) {
      JOB_CHECK(kill(p.signalPid, SIGSTOP) == 0, "SIGSTOP");
      std::this_thread::sleep_for(milliseconds(1200));
      JOB_CHECK(kill(p.signalPid, SIGCONT) == 0, "SIGCONT");
      std::this_thread::sleep_for(milliseconds(300));
    }
    JOB_CHECK(write(control[1], "s", 1) == 1, "stop word");
    int failed = 0;
    for (int r = 0; r < kRanks; ++r) {
      const int code = waitExit(&ranks[r], milliseconds(30000));
      if (code != 0) fprintf(stderr, "job: rank %d ended with %d\n", r, code);
      failed += code != 0 ? 1 : 0;
    }
    close(control[1]);
    return failed == 0 ? 0 : 1;
  }
  const int survivor = 1 - victim;
  const auto killed = Clock::now();
  JOB_CHECK(kill(ranks[victim].signalPid, SIGKILL) == 0, "SIGKILL");
  const int code = waitExit(&ranks[survivor], milliseconds(20000));
  const double seconds = std::chrono::duration<double>(Clock::now() - killed).count();
  waitExit(&ranks[victim], milliseconds(5000));
  close(control[1]);
  fprintf(stderr, "job: rank %d %s %.2f s after rank %d was killed\n", survivor, code < 0 ? "still waited" : "ended",
          seconds, victim);
  JOB_CHECK(code == 0, "the survivor rank %d ended with %d, want 0 (a failure naming rank %d)", survivor, code, victim);
  JOB_CHECK(seconds < 8.0, "the survivor noticed the death after %.2f s", seconds);
  return 0;
}

struct Param {
  const char* transport;
  Mode mode;
  int victim;
};

std::string paramName(const Param& p) {
  if (p.mode == Mode::kStop) return std::string(p.transport) + "_stop";
  return std::string(p.transport) + (p.victim == kNsRank ? "_kill_namespaced_rank" : "_kill_other_rank");
}

void PrintTo(const Param& p, std::ostream* os) { *os << paramName(p); }

class PidNamespaceTest : public ::testing::TestWithParam<Param> {};

TEST_P(PidNamespaceTest, LivenessDoesNotDependOnPids) {
  std::string why;
  if (!canUnsharePid(&why)) GTEST_SKIP() << "cannot create a pid namespace here (" << why << ")";
  const Param p = GetParam();
  mixccl::SocketAddress addr;
  ASSERT_EQ(mixccl::parseHostPort("127.0.0.1:0", &addr), mixccl::Result::kSuccess);
  {
    mixccl::Socket s;  // a free port, released for the root
    ASSERT_EQ(mixccl::Socket::listen(&addr, &s), mixccl::Result::kSuccess);
  }
  setenv("NCCL_COMM_ID", addr.toString().c_str(), 1);
  setenv("NCCL_SHM_DISABLE", std::string(p.transport) == "tcp" ? "1" : "0", 1);
  setenv("MIXCCL_TIMEOUT", "60", 1);
  mixccl::config::resetForTesting();
  const pid_t job = fork();
  ASSERT_GE(job, 0);
  if (job == 0) {
    const int code = runJob(p.mode, p.victim);
    fflush(nullptr);
    _exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(job, &status, 0), job);
  unsetenv("NCCL_COMM_ID");
  mixccl::config::resetForTesting();
  if (WIFEXITED(status) && WEXITSTATUS(status) == kSkip) GTEST_SKIP() << "unshare(CLONE_NEWPID) failed in a rank";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the job failed (its messages are above)";
}

INSTANTIATE_TEST_SUITE_P(Ranks, PidNamespaceTest,
                         ::testing::Values(Param{"shm", Mode::kStop, 0}, Param{"shm", Mode::kKill, kNsRank},
                                           Param{"shm", Mode::kKill, 0}, Param{"tcp", Mode::kStop, 0},
                                           Param{"tcp", Mode::kKill, kNsRank}, Param{"tcp", Mode::kKill, 0}),
                         [](const auto& info) { return paramName(info.param); });

}  // namespace
