// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Logging as users see it: NCCL_DEBUG levels, NCCL_DEBUG_SUBSYS filtering, NCCL_DEBUG_FILE with
// %h/%p, and NCCL's line shape "host:pid:tid [rank] NCCL INFO ...". Each case runs in a forked
// child so the environment is read fresh.

#include <gtest/gtest.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

// Runs a 1-rank init + all-reduce in a child with `env` set and returns the log file's text.
std::string runWithEnv(const std::vector<std::pair<std::string, std::string>>& env, const std::string& fileOut) {
  pid_t pid = fork();
  if (pid == 0) {
    for (auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    ncclUniqueId id;
    ncclComm_t comm;
    if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) _exit(1);
    float x = 1;
    if (ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess) _exit(1);
    float* bad = nullptr;
    (void)ncclAllReduce(bad, bad, 1, ncclFloat32, ncclSum, comm, nullptr);  // a WARN line
    ncclCommDestroy(comm);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::ifstream in(fileOut);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string host() {
  char h[256] = {};
  gethostname(h, sizeof(h) - 1);
  std::string s(h);
  return s.substr(0, s.find('.'));
}

TEST(LogTest, InfoLinesHaveNcclShapeAndFilePatternExpands) {
  std::string dir = ::testing::TempDir();
  std::string pattern = dir + "/mixccl_log_%h_%p.txt";
  std::string out =
      runWithEnv({{"NCCL_DEBUG", "INFO"}, {"NCCL_DEBUG_SUBSYS", "INIT"}, {"NCCL_DEBUG_FILE", pattern}}, "");
  // The child's pid is unknown here: find the file by host prefix.
  std::string prefix = dir + "/mixccl_log_" + host() + "_";
  std::string found;
  if (FILE* ls = popen(("ls " + prefix + "*.txt 2>/dev/null").c_str(), "r")) {
    char line[1024];
    if (fgets(line, sizeof(line), ls)) found = std::string(line, strcspn(line, "\n"));
    pclose(ls);
  }
  ASSERT_FALSE(found.empty()) << "no log file matching " << prefix << "*.txt";
  std::ifstream in(found);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  std::remove(found.c_str());
  EXPECT_TRUE(std::regex_search(text, std::regex(host() + ":[0-9]+:[0-9]+ \\[0\\] NCCL INFO .*Init COMPLETE"))) << text;
  EXPECT_TRUE(std::regex_search(text, std::regex(":[0-9]+:[0-9]+ \\[0\\] NCCL WARN .*sendbuff is NULL"))) << text;
  EXPECT_TRUE(std::regex_search(text, std::regex("NCCL version 2\\.28\\.9"))) << text;
}

TEST(LogTest, SubsystemFilterAndWarnLevel) {
  std::string file = ::testing::TempDir() + "/mixccl_log_filter.txt";
  std::string text =
      runWithEnv({{"NCCL_DEBUG", "INFO"}, {"NCCL_DEBUG_SUBSYS", "^INIT"}, {"NCCL_DEBUG_FILE", file}}, file);
  EXPECT_EQ(text.find("Init COMPLETE"), std::string::npos) << text;
  EXPECT_NE(text.find("NCCL WARN"), std::string::npos) << text;
  // At WARN only warnings and (as NCCL does) the version line appear.
  text = runWithEnv({{"NCCL_DEBUG", "WARN"}, {"NCCL_DEBUG_FILE", file}}, file);
  EXPECT_EQ(text.find("Init COMPLETE"), std::string::npos) << text;
  EXPECT_NE(text.find("NCCL INFO NCCL version"), std::string::npos) << text;
  EXPECT_NE(text.find("NCCL WARN"), std::string::npos) << text;
  std::remove(file.c_str());
}

}  // namespace
