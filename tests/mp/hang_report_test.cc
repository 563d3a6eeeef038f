// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Hang reports (src/core/hang_report.h): while one rank stays away from a collective, the others'
// reports name the operation and sequence number they wait in, the peer they wait for, and the
// last sequence number seen from it; the same report is logged when MIXCCL_TIMEOUT expires and,
// with MIXCCL_DUMP_ON_SIGNAL=1, on SIGUSR1. Cases that need a fresh environment run in a forked
// child whose stdout goes to a file.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <mixccl/debug.h>
#include <nccl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/config.h"
#include "common/log.h"
#include "tests/support/rank_threads.h"

namespace {

using namespace std::chrono_literals;

std::string reportOf(ncclComm_t comm) {
  char buf[4096];
  size_t needed = 0;
  EXPECT_EQ(mixcclCommHangReport(comm, buf, sizeof(buf), &needed), ncclSuccess) << ncclGetLastError(comm);
  EXPECT_LT(needed, sizeof(buf));
  return buf;
}

bool contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// Three ranks as threads complete seq 0..2; ranks 0 and 1 enter seq 3 while rank 2 stays away,
// reads their reports, then joins so the collective completes.
TEST(HangReport, NamesTheRankThatNeverArrived) {
  constexpr int kRanks = 3;
  std::vector<ncclComm_t> comms(kRanks, nullptr);
  std::atomic<int> ready{0};
  std::string blocked0, blocked1, after0;
  mixccl::testing::runRanks(kRanks, [&](int rank, ncclComm_t comm) {
    comms[rank] = comm;
    std::vector<float> buf(1 << 16, 1.0f);  // several steps per rank: the ring has work left
    for (int i = 0; i < 3; ++i) {
      ASSERT_EQ(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
    }
    ready.fetch_add(1);
    while (ready.load() < kRanks) std::this_thread::yield();
    if (rank == 2) {
      // The reports fill in as the waiting ranks publish (after kPublishAfter) and as rank 0's
      // probe reaches rank 1 (after the probe delay); on a loaded machine that takes longer than
      // those delays, so poll for the finished picture, bounded, rather than sleep a fixed time.
      const auto deadline = std::chrono::steady_clock::now() + 60s;
      do {
        std::this_thread::sleep_for(100ms);
        blocked0 = reportOf(comms[0]);
        blocked1 = reportOf(comms[1]);
      } while ((!contains(blocked0, "waiting for a message from rank 2") || !contains(blocked1, "its probe says")) &&
               std::chrono::steady_clock::now() < deadline);
    }
    ASSERT_EQ(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
    ready.fetch_add(1);
    while (ready.load() < 2 * kRanks) std::this_thread::yield();
    if (rank == 0) after0 = reportOf(comm);
    ready.fetch_add(1);
    while (ready.load() < 3 * kRanks) std::this_thread::yield();  // no destroy before the report
  });
  EXPECT_TRUE(contains(blocked0, "hang report (requested): comm 0x")) << blocked0;
  EXPECT_TRUE(contains(blocked0, "rank 0/3")) << blocked0;
  EXPECT_TRUE(contains(blocked0, "last issued seq 3, last completed seq 2; no progress for")) << blocked0;
  EXPECT_TRUE(contains(blocked0, "waiting in: AllReduce (seq 3, 65536 x float32)")) << blocked0;
  // Rank 0's ring predecessor is rank 2: that is the message it waits for, last seen in seq 2.
  EXPECT_TRUE(contains(blocked0, "waiting for a message from rank 2")) << blocked0;
  EXPECT_TRUE(std::regex_search(blocked0,
                                std::regex("peer rank 2 \\(.* pid [0-9]+\\): last collective message from it: seq 2")))
      << blocked0;
  // Rank 1 has rank 0's first chunk of seq 3, and rank 0's probe says rank 0 waits there too.
  EXPECT_TRUE(contains(blocked1, "peer rank 0 (")) << blocked1;
  EXPECT_TRUE(contains(blocked1, "last collective message from it: seq 3; its probe says it waits in seq 3"))
      << blocked1;
  EXPECT_TRUE(contains(after0, "last issued seq 3, last completed seq 3; not blocked")) << after0;
}

TEST(HangReport, RejectsBadArguments) {
  mixccl::testing::runRanks(1, [&](int, ncclComm_t comm) {
    char buf[8];
    EXPECT_EQ(mixcclCommHangReport(nullptr, buf, sizeof(buf), nullptr), ncclInvalidArgument);
    EXPECT_EQ(mixcclCommHangReport(comm, buf, 0, nullptr), ncclInvalidArgument);
    EXPECT_TRUE(contains(ncclGetLastError(comm), "bufSize")) << ncclGetLastError(comm);
    size_t needed = 0;
    ASSERT_EQ(mixcclCommHangReport(comm, buf, sizeof(buf), &needed), ncclSuccess);
    EXPECT_EQ(strlen(buf), sizeof(buf) - 1);  // truncated, terminated
    EXPECT_GT(needed, sizeof(buf));
    // A size query (NULL buffer, as snprintf): the length, and a buffer of it holds all of it.
    size_t queried = 0;
    ASSERT_EQ(mixcclCommHangReport(comm, nullptr, 0, &queried), ncclSuccess);
    EXPECT_EQ(queried, needed);
    std::vector<char> whole(queried);
    ASSERT_EQ(mixcclCommHangReport(comm, whole.data(), whole.size(), &needed), ncclSuccess);
    EXPECT_EQ(strlen(whole.data()) + 1, needed);
  });
}

// Forks a child that runs body() with `env` set and its stdout in a file; returns that text.
template <class Body>
std::string inChild(const std::vector<std::pair<const char*, const char*>>& env, Body body) {
  const std::string file = ::testing::TempDir() + "/mixccl_hang_report_" + std::to_string(getpid()) + ".txt";
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0) _exit(3);
    unsetenv("NCCL_DEBUG");
    unsetenv("NCCL_DEBUG_FILE");
    for (auto& [k, v] : env) setenv(k, v, 1);
    mixccl::config::resetForTesting();  // this process may have read the environment already
    mixccl::log::reinit();
    alarm(60);  // bounded whatever happens
    _exit(body());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  std::remove(file.c_str());
  return ss.str();
}

// Two ranks as threads; rank 1 completes seq 0 and then never calls again. Returns rank 0's result
// of seq 1 (or what `whileStuck` decides) in the exit code: 0 = as expected.
int twoRanksOneAway(ncclResult_t expect, void (*whileStuck)()) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 4;
  std::atomic<int> failures{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      ncclComm_t comm = nullptr;
      if (ncclCommInitRank(&comm, 2, id, r) != ncclSuccess) {
        failures++;
        return;
      }
      float x = 1;
      if (ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess) failures++;
      if (r == 0) {
        if (ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr) != expect) failures++;
        done = true;
        ncclCommAbort(comm);
      } else if (whileStuck != nullptr) {
        whileStuck();
        ncclCommAbort(comm);  // rank 0 sees a departed peer and fails at once
      } else {
        while (!done) std::this_thread::sleep_for(10ms);
        ncclCommAbort(comm);
      }
    });
  }
  for (auto& t : threads) t.join();
  fflush(stdout);
  return failures == 0 ? 0 : 5;
}

TEST(HangReport, LoggedWhenTheDeadlineExpires) {
  const std::string out = inChild({{"MIXCCL_TIMEOUT", "1"}}, [] { return twoRanksOneAway(ncclRemoteError, nullptr); });
  // Logged although NCCL_DEBUG is unset: a deadline expiring is exactly when the operator needs it.
  EXPECT_TRUE(std::regex_search(out, std::regex(":[0-9]+:[0-9]+ \\[0\\] NCCL WARN hang report \\(MIXCCL_TIMEOUT\\): "
                                                "comm 0x[0-9a-f]+ rank 0/2")))
      << out;
  EXPECT_TRUE(contains(out, "last issued seq 1, last completed seq 0; no progress for 1.")) << out;
  EXPECT_TRUE(contains(out, "waiting in: AllReduce (seq 1, 1 x float32)")) << out;
  EXPECT_TRUE(contains(out, "last collective message from it: seq 0")) << out;
}

TEST(HangReport, SigUsr1DumpsEveryCommunicatorWhenEnabled) {
  const std::string out = inChild({{"MIXCCL_DUMP_ON_SIGNAL", "1"}, {"MIXCCL_TIMEOUT", "10"}}, [] {
    return twoRanksOneAway(ncclRemoteError, [] {
      std::this_thread::sleep_for(500ms);
      kill(getpid(), SIGUSR1);
      std::this_thread::sleep_for(500ms);  // the dump thread writes; then rank 1 aborts rank 0's wait
    });
  });
  EXPECT_TRUE(
      std::regex_search(out, std::regex("\\[0\\] NCCL WARN hang report \\(SIGUSR1\\): comm 0x[0-9a-f]+ rank 0/2")))
      << out;
  EXPECT_TRUE(
      std::regex_search(out, std::regex("\\[1\\] NCCL WARN hang report \\(SIGUSR1\\): comm 0x[0-9a-f]+ rank 1/2")))
      << out;
  EXPECT_TRUE(contains(out, "waiting in: AllReduce (seq 1, 1 x float32)")) << out;
  EXPECT_TRUE(contains(out, "last issued seq 0, last completed seq 0; not blocked")) << out;
}

void applicationHandler(int) {}

// The knob takes SIGUSR1 over; an application that had its own handler is told so.
TEST(HangReport, TakingOverAnApplicationsSigUsr1HandlerIsLogged) {
  const std::string out = inChild({{"MIXCCL_DUMP_ON_SIGNAL", "1"}, {"NCCL_DEBUG", "WARN"}}, [] {
    struct sigaction sa = {};
    sa.sa_handler = applicationHandler;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR1, &sa, nullptr) != 0) return 6;
    ncclComm_t comm = nullptr;
    if (ncclCommInitAll(&comm, 1, nullptr) != ncclSuccess) return 7;
    ncclCommDestroy(comm);
    fflush(stdout);
    return 0;
  });
  EXPECT_TRUE(contains(out, "NCCL WARN MIXCCL_DUMP_ON_SIGNAL: replaced the process's own SIGUSR1 handler")) << out;
}

}  // namespace
