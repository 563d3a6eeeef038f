// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <string>

#include "perf/mixcclrun_output.h"

namespace mixccl::run {
namespace {

// A rank that prints faster than the launcher tags and forwards its lines keeps its pipe full.
// pump() must come back to the supervisor's poll loop with data still in the pipe (signals,
// --timeout and other ranks' deaths wait there), and later calls must lose none of it.
TEST(TaggedStream, PumpReturnsWhileThePipeStaysFull) {
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  constexpr int kCapacity = 256 * 1024;  // more than one pump() reads; under the default pipe-max-size
  if (fcntl(fds[1], F_SETPIPE_SZ, kCapacity) < kCapacity) GTEST_SKIP() << "cannot grow a pipe to 256 KiB here";
  ASSERT_EQ(fcntl(fds[1], F_SETFL, O_NONBLOCK), 0);
  // PIPE_BUF bytes of "y\n": a non-blocking write of that size is all or nothing (EAGAIN when full).
  std::string lines;
  while (lines.size() < PIPE_BUF) lines += "y\n";
  size_t written = 0;
  for (;;) {
    const ssize_t n = write(fds[1], lines.data(), lines.size());
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  ASSERT_GE(written, static_cast<size_t>(kCapacity));

  FILE* out = tmpfile();
  ASSERT_NE(out, nullptr);
  TaggedStream stream(fds[0], fileno(out), 7);
  stream.pump();
  int left = 0;
  ASSERT_EQ(ioctl(fds[0], FIONREAD, &left), 0);
  EXPECT_GT(left, 0) << "pump() read the whole pipe in one call";

  close(fds[1]);
  while (stream.open()) stream.pump();
  rewind(out);
  size_t count = 0;
  char line[64];
  while (fgets(line, sizeof(line), out) != nullptr) {
    EXPECT_STREQ(line, "[7] y\n");
    ++count;
  }
  EXPECT_EQ(count, written / 2);
  fclose(out);
}

}  // namespace
}  // namespace mixccl::run
