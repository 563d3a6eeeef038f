// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Runs the ranks of one job as forked processes, the way a launcher would. The ranks are forked
// before the unique id exists: ncclGetUniqueId starts the root's thread, and a child forked beside
// a running thread can inherit a lock that thread held (ASan found ranks hung in its allocator);
// the id follows through a pipe. Call it from a single-threaded process (a forked job process).

#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <vector>

#include "common/config.h"

// In a rank's body (a function of `int rank` returning its exit status): on failure, print the
// rank, the message and ncclGetLastError(), and return 1.
#define RANK_CHECK(cond, ...)                                \
  do {                                                       \
    if (!(cond)) {                                           \
      fprintf(stderr, "rank %d: ", rank);                    \
      fprintf(stderr, __VA_ARGS__);                          \
      fprintf(stderr, " (%s)\n", ncclGetLastError(nullptr)); \
      return 1;                                              \
    }                                                        \
  } while (0)

namespace mixccl::testing {

// body(rank, id) is one rank's process; its return value is the exit status. Returns every
// rank's waitpid status, by rank (-1 where fork failed).
inline std::vector<int> forkRanks(int n, const std::function<int(int, const ncclUniqueId&)>& body) {
  std::vector<pid_t> pids;
  std::vector<int> idWriters;
  for (int r = 0; r < n; ++r) {
    int fds[2];
    if (pipe(fds) != 0) break;
    pid_t pid = fork();
    if (pid < 0) {
      close(fds[0]);
      close(fds[1]);
      break;
    }
    if (pid == 0) {
      // The parent's ncclGetUniqueId read (and cached) every knob; a rank's body may setenv its
      // own (MIXCCL_DEVICE_BACKEND per rank), which must count as in a freshly started process.
      mixccl::config::resetForTesting();
      close(fds[1]);
      for (int w : idWriters) close(w);
      ncclUniqueId id;
      const bool gotId = read(fds[0], &id, sizeof(id)) == static_cast<ssize_t>(sizeof(id));  // atomic: < PIPE_BUF
      int status = gotId ? body(r, id) : 1;
      fflush(nullptr);
      _exit(status);
    }
    close(fds[0]);
    pids.push_back(pid);
    idWriters.push_back(fds[1]);
  }
  ncclUniqueId id;
  const bool haveId = static_cast<int>(pids.size()) == n && ncclGetUniqueId(&id) == ncclSuccess;
  for (int w : idWriters) {
    // Without an id the ranks read EOF and fail.
    if (haveId && write(w, &id, sizeof(id)) != static_cast<ssize_t>(sizeof(id))) fprintf(stderr, "job: id write\n");
    close(w);
  }
  std::vector<int> statuses(n, -1);
  for (size_t r = 0; r < pids.size(); ++r) {
    int status = 0;
    if (waitpid(pids[r], &status, 0) == pids[r]) statuses[r] = status;
  }
  return statuses;
}

// Whether a waitpid status is a normal exit with status 0.
inline bool exitedCleanly(int status) { return status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0; }

// Whether every rank of forkRanks()' statuses exited cleanly; prints each one that did not.
inline bool allExitedCleanly(const std::vector<int>& statuses) {
  bool clean = true;
  for (size_t r = 0; r < statuses.size(); ++r) {
    if (exitedCleanly(statuses[r])) continue;
    fprintf(stderr, "job: rank %zu ended with status 0x%x\n", r, statuses[r]);
    clean = false;
  }
  return clean;
}

// forkRanks() inside a job process of its own, which a test process that already runs threads
// needs (see above); the job exits 0 iff every rank exited cleanly. Returns the job's waitpid
// status, -1 when it could not be forked or waited for.
inline int forkJob(int n, const std::function<int(int, const ncclUniqueId&)>& body) {
  const pid_t job = fork();
  if (job < 0) return -1;
  if (job == 0) {
    const bool clean = allExitedCleanly(forkRanks(n, body));
    fflush(nullptr);
    _exit(clean ? 0 : 1);
  }
  int status = 0;
  return waitpid(job, &status, 0) == job ? status : -1;
}

}  // namespace mixccl::testing
