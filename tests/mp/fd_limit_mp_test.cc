// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
//
// The open-file limit (RLIMIT_NOFILE): communicator init raises the soft limit to the hard one,
// and a bootstrap root that runs out of descriptors backs off instead of spinning on accept, and
// its ranks fail with a message that names the limit. Limits are per process, so each case lowers
// them in a forked child; the children are forked before this process starts any thread.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <nccl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/config.h"
#include "common/log.h"
#include "src/core/bootstrap.h"
#include "tests/support/env_guard.h"

namespace mixccl {
namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(FdLimitTest, CommInitRaisesSoftLimitToHard) {
  rlimit lim{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &lim), 0);
  if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max <= 128)
    GTEST_SKIP() << "hard RLIMIT_NOFILE is only " << lim.rlim_max;
  const std::string file = ::testing::TempDir() + "/mixccl_fd_limit_raise.txt";
  pid_t pid = fork();
  if (pid == 0) {
    setenv("NCCL_DEBUG", "INFO", 1);
    setenv("NCCL_DEBUG_SUBSYS", "INIT", 1);
    setenv("NCCL_DEBUG_FILE", file.c_str(), 1);
    config::resetForTesting();  // another case may have read the knobs in the parent already
    rlimit low = lim;
    low.rlim_cur = 128;
    if (setrlimit(RLIMIT_NOFILE, &low) != 0) _exit(10);
    ncclUniqueId id;
    ncclComm_t comm;
    if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) _exit(11);
    rlimit now{};
    if (getrlimit(RLIMIT_NOFILE, &now) != 0 || now.rlim_cur != lim.rlim_max) _exit(12);
    ncclCommDestroy(comm);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  const std::string text = readFile(file);
  std::remove(file.c_str());
  const std::string hard = lim.rlim_max == RLIM_INFINITY ? "unlimited" : std::to_string(lim.rlim_max);
  EXPECT_NE(text.find("open-file limit (RLIMIT_NOFILE) raised: 128 -> " + hard), std::string::npos) << text;
}

// The root runs in a child whose every descriptor is taken (soft = hard = 64, then /dev/null
// opened until EMFILE), as with `ulimit -n 100` and 64 ranks. Before the fix it logged "accept
// failed" in a busy loop (over a million lines in 20 s) and the ranks, reset when it exited,
// blamed a wrong unique id.
TEST(FdLimitTest, RootOutOfDescriptorsBacksOffAndNamesTheLimit) {
  constexpr int kRanks = 3;
  constexpr int kTimeoutSec = 3;
  const std::string logFile = ::testing::TempDir() + "/mixccl_fd_limit_root.txt";
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    setenv("MIXCCL_TIMEOUT", std::to_string(kTimeoutSec).c_str(), 1);
    setenv("NCCL_DEBUG", "INFO", 1);
    setenv("NCCL_DEBUG_SUBSYS", "BOOTSTRAP", 1);
    setenv("NCCL_DEBUG_FILE", logFile.c_str(), 1);
    config::resetForTesting();  // re-reads the environment and opens the log file now, while it can
    rlimit low{64, 64};
    if (setrlimit(RLIMIT_NOFILE, &low) != 0) _exit(20);
    UniqueIdData id;
    if (createUniqueId(&id, /*honourCommIdEnv=*/false) != Result::kSuccess) _exit(21);
    uint8_t wire[UniqueIdData::kBytes];
    id.encode(wire);
    // Every descriptor is taken before the ranks learn the id (the root thread accepts as soon as
    // they connect; filling the table afterwards raced with it on a loaded machine), and the
    // pipe stays open: closing it would free a descriptor for the root.
    while (open("/dev/null", O_RDONLY) >= 0) {
    }
    if (errno != EMFILE) _exit(23);
    if (write(fds[1], wire, sizeof(wire)) != static_cast<ssize_t>(sizeof(wire))) _exit(22);
    // The root gives up after kTimeoutSec and answers the queued ranks within half a second.
    sleep(kTimeoutSec + 2);
    _exit(0);
  }
  close(fds[1]);
  uint8_t wire[UniqueIdData::kBytes];
  size_t got = 0;
  while (got < sizeof(wire)) {
    ssize_t k = read(fds[0], wire + got, sizeof(wire) - got);
    if (k <= 0) break;
    got += static_cast<size_t>(k);
  }
  close(fds[0]);
  ASSERT_EQ(got, sizeof(wire)) << "the root child sent no unique id";
  UniqueIdData id;
  ASSERT_EQ(UniqueIdData::decode(wire, &id), Result::kSuccess);

  std::vector<std::string> errors(kRanks);
  std::vector<Result> results(kRanks, Result::kSuccess);
  {
    testing::EnvGuard timeout("MIXCCL_TIMEOUT", std::to_string(kTimeoutSec).c_str());
    std::vector<std::thread> ranks;
    for (int r = 0; r < kRanks; ++r) {
      ranks.emplace_back([&, r] {
        std::unique_ptr<Bootstrap> b;
        results[r] = Bootstrap::init(id, r, kRanks, nullptr, &b);
        errors[r] = lastError();
      });
    }
    for (auto& t : ranks) t.join();
  }
  int status = 0;
  rusage usage{};
  ASSERT_EQ(wait4(pid, &status, 0, &usage), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "root child status " << status;

  for (int r = 0; r < kRanks; ++r) {
    EXPECT_NE(results[r], Result::kSuccess) << "rank " << r;
    EXPECT_NE(errors[r].find("too many open files (RLIMIT_NOFILE soft/hard = 64/64); raise ulimit -n"),
              std::string::npos)
        << "rank " << r << ": " << errors[r];
    EXPECT_EQ(errors[r].find("unique id"), std::string::npos) << "rank " << r << ": " << errors[r];
  }
  // Not spinning: a handful of log lines about accepting (the first failure and the final
  // verdict) and almost no CPU time over the whole timeout.
  const std::string text = readFile(logFile);
  std::remove(logFile.c_str());
  EXPECT_NE(text.find("too many open files (RLIMIT_NOFILE soft/hard = 64/64); raise ulimit -n"), std::string::npos)
      << text;
  int acceptLines = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) acceptLines += line.find("accept") != std::string::npos ? 1 : 0;
  EXPECT_LE(acceptLines, 4) << text.substr(0, 4000);
  const double cpu =
      usage.ru_utime.tv_sec + usage.ru_stime.tv_sec + (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  EXPECT_LT(cpu, 1.0) << "the root child used " << cpu << " s of CPU in " << kTimeoutSec + 2 << " s";
}

}  // namespace
}  // namespace mixccl
