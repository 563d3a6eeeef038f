// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
//
// Bootstrap across real processes. Children are forked before this process starts any thread of
// its own (the root included), so nothing a child inherits can be a lock held by another thread;
// the unique id then travels to them through a pipe, as a launcher would carry it.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "common/config.h"
#include "src/core/bootstrap.h"

namespace mixccl {
namespace {

using ChildBody = std::function<int(int rank, const UniqueIdData& id)>;

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Forks n children running body(rank, id) and returns their exit codes. With makeIdInParent the
// parent creates the id (and hosts the root) after forking and writes it to every child;
// otherwise each child builds its own id (NCCL_COMM_ID style).
std::vector<int> runProcesses(int n, bool makeIdInParent, const ChildBody& body) {
  std::vector<pid_t> pids;
  std::vector<int> writers;
  for (int rank = 0; rank < n; ++rank) {
    int fds[2];
    if (pipe(fds) != 0) {
      ADD_FAILURE() << "pipe: " << strerror(errno);
      break;
    }
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[1]);
      UniqueIdData id;
      if (makeIdInParent) {
        uint8_t wire[UniqueIdData::kBytes];
        size_t got = 0;
        while (got < sizeof(wire)) {
          ssize_t k = read(fds[0], wire + got, sizeof(wire) - got);
          if (k <= 0) _exit(90);
          got += static_cast<size_t>(k);
        }
        if (UniqueIdData::decode(wire, &id) != Result::kSuccess) _exit(91);
      } else if (createUniqueId(&id) != Result::kSuccess) {
        _exit(92);
      }
      int rc = body(rank, id);
      if (rc != 0) fprintf(stderr, "rank %d failed (%d): %s\n", rank, rc, lastError().c_str());
      _exit(rc);
    }
    close(fds[0]);
    pids.push_back(pid);
    writers.push_back(fds[1]);
  }
  if (makeIdInParent) {
    UniqueIdData id;
    EXPECT_EQ(createUniqueId(&id), Result::kSuccess) << lastError();
    uint8_t wire[UniqueIdData::kBytes];
    id.encode(wire);
    for (int w : writers) EXPECT_EQ(write(w, wire, sizeof(wire)), static_cast<ssize_t>(sizeof(wire)));
  }
  for (int w : writers) close(w);
  std::vector<int> codes;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  return codes;
}

// init + a few allGathers, a barrier, and a tagged exchange with the neighbours.
int initAndGather(int rank, const UniqueIdData& id, int n) {
  std::unique_ptr<Bootstrap> b;
  if (Bootstrap::init(id, rank, n, nullptr, &b) != Result::kSuccess) return 1;
  for (int round = 0; round < 3; ++round) {
    std::vector<uint64_t> all(n, 0);
    all[rank] = static_cast<uint64_t>(getpid()) * 1000 + rank + round;
    if (b->allGather(all.data(), sizeof(uint64_t)) != Result::kSuccess) return 2;
    for (int r = 0; r < n; ++r) {
      if (all[r] % 1000 != static_cast<uint64_t>(r + round)) return 3;
    }
  }
  if (b->barrier() != Result::kSuccess) return 4;
  int v = rank * 3, w = -1;
  if (b->send((rank + 1) % n, 7, &v, sizeof(v)) != Result::kSuccess) return 5;
  if (b->recv((rank + n - 1) % n, 7, &w, sizeof(w)) != Result::kSuccess) return 6;
  if (w != ((rank + n - 1) % n) * 3) return 7;
  return b->barrier() == Result::kSuccess ? 0 : 8;
}

TEST(BootstrapMp, FourProcessesWithUniqueId) {
  const int n = 4;
  auto codes = runProcesses(n, true, [n](int rank, const UniqueIdData& id) { return initAndGather(rank, id, n); });
  ASSERT_EQ(codes.size(), static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

TEST(BootstrapMp, FourProcessesWithCommIdEnv) {
  SocketAddress probe;
  ASSERT_EQ(parseHostPort("127.0.0.1:0", &probe), Result::kSuccess);
  {
    Socket s;  // learn a free port, then release it for rank 0's root
    ASSERT_EQ(Socket::listen(&probe, &s), Result::kSuccess);
  }
  setenv("NCCL_COMM_ID", probe.toString().c_str(), 1);
  config::resetForTesting();
  const int n = 4;
  auto codes = runProcesses(n, false, [n](int rank, const UniqueIdData& id) {
    if (rank == 0) usleep(200 * 1000);  // the others must wait for the root to appear
    return initAndGather(rank, id, n);
  });
  unsetenv("NCCL_COMM_ID");
  config::resetForTesting();
  ASSERT_EQ(codes.size(), static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
}

TEST(BootstrapMp, DeadRankFailsTheOthersInBoundedTime) {
  setenv("MIXCCL_TIMEOUT", "3", 1);
  config::resetForTesting();
  const int n = 3;
  const auto start = Clock::now();
  auto codes = runProcesses(n, true, [n](int rank, const UniqueIdData& id) {
    std::unique_ptr<Bootstrap> b;
    if (Bootstrap::init(id, rank, n, nullptr, &b) != Result::kSuccess) return 1;
    if (rank == 2) _exit(0);  // dies without a word
    std::vector<int> all(n);
    Result r = b->allGather(all.data(), sizeof(int));
    return r == Result::kRemoteError ? 0 : 10 + static_cast<int>(r);
  });
  unsetenv("MIXCCL_TIMEOUT");
  config::resetForTesting();
  for (int r = 0; r < n; ++r) EXPECT_EQ(codes[r], 0) << "rank " << r;
  EXPECT_LT(secondsSince(start), 8.0);
}

}  // namespace
}  // namespace mixccl
