// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
//
// A thread limit (RLIMIT_NPROC here; a container's pids.max in practice) that refuses the library
// a thread: the call fails with ncclSystemError and a message, and the process lives on. Limits
// count the tasks of a user, so each case runs in a forked child that lowers the limit and then
// becomes an unprivileged user (root is not held to RLIMIT_NPROC).
#include <gtest/gtest.h>
#include <nccl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "tests/support/thread_names.h"

namespace {

using mixccl::testing::threadNames;

// RLIMIT_NPROC counts every task of a user, so two cases under one user (ctest -j runs them at
// once) would take each other's places: each case runs as a user of its own, ids no account uses.
constexpr uid_t kNonBlockingUser = 64101;
constexpr uid_t kNoRankUser = 64102;
constexpr uid_t kOneRankUser = 64103;

// Runs body() in a child limited to `tasks` tasks of user `uid`; returns its exit status.
int inLimitedChild(rlim_t tasks, uid_t uid, int (*body)()) {
  const pid_t pid = fork();
  if (pid == 0) {
    const rlimit lim{tasks, tasks};
    if (setrlimit(RLIMIT_NPROC, &lim) != 0 || setgid(uid) != 0 || setuid(uid) != 0) _exit(90);
    _exit(body());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

// ncclCommInitAll starts the unique id's root and a thread per rank: with room for the root and
// one rank, the second rank's thread is refused. Before the fix the started rank's thread stayed
// joinable and std::terminate ended the process.
int initAllOutOfThreads() {
  setenv("MIXCCL_TIMEOUT", "60", 1);
  ncclComm_t comms[4] = {};
  const auto start = std::chrono::steady_clock::now();
  const ncclResult_t r = ncclCommInitAll(comms, 4, nullptr);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const char* msg = ncclGetLastError(nullptr);
  fprintf(stderr, "ncclCommInitAll: %d after %.1f s: %s\n", static_cast<int>(r), seconds, msg);
  if (r != ncclSystemError) return 1;
  if (strstr(msg, "thread") == nullptr) return 2;
  for (ncclComm_t c : comms) {
    if (c != nullptr) return 3;
  }
  // The ranks that started were aborted, not left to wait for MIXCCL_TIMEOUT.
  if (seconds > 10) return 4;
  // Nor is the id's root, which would keep its thread and port until then: it goes within its
  // poll slice (100 ms) once cancelled. Waited for without a fixed sleep, bounded well below 60 s.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (threadNames().size() > 1 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (threadNames().size() != 1) {
    fprintf(stderr, "%zu threads left 10 s after ncclCommInitAll failed\n", threadNames().size());
    return 5;
  }
  return 0;
}

// A non-blocking init runs in a thread of its own: refused, the call fails and hands out no
// handle (one would stay in the initialising state, which nothing ends).
int nonBlockingInitOutOfThreads() {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 10;  // the root's thread takes the last place
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t r = ncclCommInitRankConfig(&comm, 1, id, 0, &config);
  const char* msg = ncclGetLastError(nullptr);
  fprintf(stderr, "ncclCommInitRankConfig: %d: %s\n", static_cast<int>(r), msg);
  if (r != ncclSystemError) return 1;
  if (strstr(msg, "thread") == nullptr) return 2;
  if (comm != nullptr) return 3;
  return 0;
}

TEST(ThreadLimitTest, NonBlockingInitFailsCleanlyWithoutItsThread) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run a child as an unprivileged user under RLIMIT_NPROC";
  const int status = inLimitedChild(2, kNonBlockingUser, nonBlockingInitOutOfThreads);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died (signal " << WTERMSIG(status) << ")";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// Room for the root alone: no rank starts, so no rank registers, and only the call's cancel ends
// the root (before, it waited for the ranks until MIXCCL_TIMEOUT).
TEST(ThreadLimitTest, CommInitAllFailsCleanlyWhenNoRankGetsAThread) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run a child as an unprivileged user under RLIMIT_NPROC";
  const int status = inLimitedChild(2, kNoRankUser, initAllOutOfThreads);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died (signal " << WTERMSIG(status) << ")";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(ThreadLimitTest, CommInitAllFailsCleanlyWhenARankGetsNoThread) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run a child as an unprivileged user under RLIMIT_NPROC";
  // The child itself, the root's thread, one rank's thread: the next one is refused.
  const int status = inLimitedChild(3, kOneRankUser, initAllOutOfThreads);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died (signal " << WTERMSIG(status) << ")";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
