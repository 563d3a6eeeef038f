// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Logging as users see it: NCCL_DEBUG levels, NCCL_DEBUG_SUBSYS filtering, NCCL_DEBUG_FILE with
// %h/%p, and NCCL's line shape "host:pid:tid [rank] NCCL INFO ...". Each case runs in a forked
// child so the environment is read fresh.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <nccl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
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
  // NCCL's banner shape, then our own version: "NCCL version 2.28.9+mixccl-0.3.0 (git abc1234, host backend)".
  EXPECT_TRUE(std::regex_search(text, std::regex("NCCL version 2\\.28\\.9\\+mixccl-[0-9]+\\.[0-9]+\\.[0-9]+ \\(")))
      << text;
}

// Linux allows host names of HOST_NAME_MAX (64) characters; the line prefix keeps all of them.
// The child renames its own UTS namespace, which needs CAP_SYS_ADMIN (CI runs as root).
TEST(LogTest, ALongestHostNameIsKeptWhole) {
  const std::string name = std::string(63, 'h') + "z";
  const std::string file = ::testing::TempDir() + "/mixccl_log_hostname_" + std::to_string(getpid()) + ".txt";
  pid_t pid = fork();
  if (pid == 0) {
    if (unshare(CLONE_NEWUTS) != 0 || sethostname(name.c_str(), name.size()) != 0) _exit(77);
    setenv("NCCL_DEBUG", "INFO", 1);
    setenv("NCCL_DEBUG_FILE", file.c_str(), 1);
    ncclComm_t comm = nullptr;
    if (ncclCommInitAll(&comm, 1, nullptr) != ncclSuccess) _exit(1);
    ncclCommDestroy(comm);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) GTEST_SKIP() << "cannot rename the host (needs CAP_SYS_ADMIN)";
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  std::remove(file.c_str());
  EXPECT_TRUE(std::regex_search(ss.str(), std::regex("(^|\n)" + name + ":[0-9]+:[0-9]+ .*NCCL INFO"))) << ss.str();
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

std::string readAndRemove(const std::string& file) {
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  std::remove(file.c_str());
  return ss.str();
}

// Settings NCCL accepts must read the same here: the default subsystems include BOOTSTRAP (the
// interface and bootstrap lines), NCCL_DEBUG=ABORT logs INFO, and "%%" in NCCL_DEBUG_FILE is one '%'.
TEST(LogTest, NcclDefaultsAbortLevelAndPercentEscape) {
  const std::string dir = ::testing::TempDir();
  std::string file = dir + "/mixccl_log_defaults.txt";
  std::string text = runWithEnv({{"NCCL_DEBUG", "INFO"}, {"NCCL_DEBUG_FILE", file}}, file);
  std::remove(file.c_str());
  EXPECT_NE(text.find("Init COMPLETE"), std::string::npos) << text;
  EXPECT_TRUE(std::regex_search(text, std::regex("NCCL INFO .*bootstrap"))) << text;

  text = runWithEnv({{"NCCL_DEBUG", "abort"}, {"NCCL_DEBUG_SUBSYS", "INIT"}, {"NCCL_DEBUG_FILE", file}}, file);
  std::remove(file.c_str());
  EXPECT_NE(text.find("NCCL INFO"), std::string::npos) << text;
  EXPECT_NE(text.find("Init COMPLETE"), std::string::npos) << text;

  const std::string literal = dir + "/mixccl_log_100%.txt";
  std::remove(literal.c_str());
  (void)runWithEnv({{"NCCL_DEBUG", "WARN"}, {"NCCL_DEBUG_FILE", dir + "/mixccl_log_100%%.txt"}}, "");
  text = readAndRemove(literal);
  EXPECT_NE(text.find("NCCL WARN"), std::string::npos) << "nothing in " << literal;
  std::remove((dir + "/mixccl_log_100%%.txt").c_str());
}

// ncclResetDebugInit re-reads NCCL_DEBUG* after the program changed them, as NCCL's does, even
// though the library has read (and cached) its configuration already.
TEST(LogTest, ResetDebugInitRereadsTheEnvironment) {
  const std::string file = ::testing::TempDir() + "/mixccl_log_reset.txt";
  std::remove(file.c_str());
  pid_t pid = fork();
  if (pid == 0) {
    unsetenv("NCCL_DEBUG");
    unsetenv("NCCL_DEBUG_FILE");
    ncclUniqueId id;
    ncclComm_t comm;
    if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) _exit(1);
    ncclCommDestroy(comm);
    setenv("NCCL_DEBUG", "INFO", 1);
    setenv("NCCL_DEBUG_SUBSYS", "INIT", 1);
    setenv("NCCL_DEBUG_FILE", file.c_str(), 1);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    ncclResetDebugInit();  // deprecated in nccl.h, as in NCCL's, yet still what programs call
#pragma GCC diagnostic pop
    if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) _exit(2);
    ncclCommDestroy(comm);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  const std::string text = readAndRemove(file);
  EXPECT_NE(text.find("NCCL INFO"), std::string::npos) << "log after ncclResetDebugInit: " << text;
  EXPECT_NE(text.find("Init COMPLETE"), std::string::npos) << text;
}

// MIXCCL_COMM_SECRET authenticates an NCCL_COMM_ID job; logs get pasted into bug reports, so its
// value must never appear in one, even with every subsystem at INFO. The log must still say that
// the knob is set (the line proves the value was read, so the test cannot pass vacuously).
TEST(LogTest, CommSecretValueNeverLogged) {
  const std::string secret = "s3cr3t-5f2a9c0d71e4b8a6";
  int port = 0;
  {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
    port = ntohs(a.sin_port);
    close(fd);
  }
  std::string file = ::testing::TempDir() + "/mixccl_log_secret.txt";
  std::string text = runWithEnv({{"NCCL_DEBUG", "INFO"},
                                 {"NCCL_DEBUG_SUBSYS", "ALL"},
                                 {"NCCL_DEBUG_FILE", file},
                                 {"NCCL_COMM_ID", "127.0.0.1:" + std::to_string(port)},
                                 {"MIXCCL_COMM_SECRET", secret}},
                                file);
  std::remove(file.c_str());
  EXPECT_NE(text.find("Init COMPLETE"), std::string::npos) << text;
  EXPECT_NE(text.find("MIXCCL_COMM_SECRET set by environment (value hidden)"), std::string::npos) << text;
  EXPECT_EQ(text.find(secret), std::string::npos) << text;
}

}  // namespace
