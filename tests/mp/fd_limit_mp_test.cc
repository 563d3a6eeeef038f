// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
//
// The open-file limit (RLIMIT_NOFILE): communicator init raises the soft limit to the hard one.
// Limits are per process, so each case lowers them in a forked child.
#include <gtest/gtest.h>
#include <nccl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "src/common/config.h"

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

}  // namespace
}  // namespace mixccl
