// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// A full /dev/shm (docker's 64 MiB default, used up by another job) must fail shm set-up with a
// message that says what to do, never kill a rank: tmpfs allocates a page when it is first
// written, and a write to a page that tmpfs cannot allocate raises SIGBUS. Each case runs in a
// forked process with a private, small /dev/shm.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "tests/support/private_shm.h"
#include "transports/shm/shm_segment.h"
#include "transports/transport.h"

namespace mixccl {
namespace {

constexpr int kJobOk = 0;
constexpr int kJobFailed = 1;
constexpr int kJobNoPrivateShm = 77;
constexpr size_t kDevShmBytes = 256 * 1024;

#define JOB_CHECK(cond, ...)                \
  do {                                      \
    if (!(cond)) {                          \
      fprintf(stderr, "job: " __VA_ARGS__); \
      fprintf(stderr, " [%s]\n", #cond);    \
      return kJobFailed;                    \
    }                                       \
  } while (0)

// Allocates every free page of /dev/shm to one file, page by page.
bool fillDevShm() {
  const int fd = shm_open("/filler", O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return false;
  off_t size = 0;
  while (posix_fallocate(fd, 0, size + 4096) == 0) size += 4096;
  close(fd);
  return size > 0;
}

// A rank's shm transport creates its rank page in listen(), inside ncclCommInitRank.
int runListenJob() {
  std::string why;
  if (!testing::enterPrivateDevShm(&why, kDevShmBytes)) {
    fprintf(stderr, "job: no private /dev/shm (%s)\n", why.c_str());
    return kJobNoPrivateShm;
  }
  JOB_CHECK(fillDevShm(), "cannot fill /dev/shm: %s", strerror(errno));
  TransportContext ctx;
  ctx.rank = 0;
  ctx.nranks = 2;
  ctx.commHash = 0x5eed;
  ctx.slotBytes = 4096;
  ctx.fifoDepth = 8;
  std::unique_ptr<Transport> shm = makeShmTransport(ctx);
  std::vector<uint8_t> blob;
  JOB_CHECK(shm->listen(&blob) == Result::kSystemError, "listen on a full /dev/shm did not fail");
  JOB_CHECK(lastError().find("NCCL_SHM_DISABLE") != std::string::npos, "the message says nothing to do: %s",
            lastError().c_str());
  JOB_CHECK(testing::countMixcclShmSegments() == 0, "the failed set-up left a name in /dev/shm");
  return kJobOk;
}

// A lane opened only to look (connectRecvToLook) holds its header, lines and small blocks; a step
// that then uses it reserves the rest (RecvConnection::reserve, idempotent). When /dev/shm cannot
// hold the rest, that fails, and so must every later attempt until the pages are there: a retry
// that reported success would hand the sender a ring it gets SIGBUS from.
int runReserveRetryJob() {
  std::string why;
  if (!testing::enterPrivateDevShm(&why, kDevShmBytes)) {
    fprintf(stderr, "job: no private /dev/shm (%s)\n", why.c_str());
    return kJobNoPrivateShm;
  }
  const std::string name = shmLaneName(0x5eed, 1, 1, 0, 0);
  constexpr uint32_t kDepth = 8;
  constexpr size_t kSlot = 64 * 1024;  // 512 KiB of ring: more than /dev/shm holds
  ShmMapping map;
  JOB_CHECK(ShmMapping::create(name, kDepth, kSlot, 1, /*reserve=*/false, &map) == Result::kSuccess,
            "a lane to look at did not fit: %s", lastError().c_str());
  JOB_CHECK(map.reservePages() == Result::kSystemError, "reserving more than /dev/shm holds did not fail");
  JOB_CHECK(map.reservePages() == Result::kSystemError, "a second attempt reported success without the pages");
  // Once /dev/shm has room, an attempt reserves them.
  JOB_CHECK(mount(nullptr, "/dev/shm", nullptr, MS_REMOUNT, "size=4m") == 0, "remount: %s", strerror(errno));
  JOB_CHECK(map.reservePages() == Result::kSuccess, "reserving with room failed: %s", lastError().c_str());
  struct stat st {};
  JOB_CHECK(stat(("/dev/shm" + name).c_str(), &st) == 0, "stat: %s", strerror(errno));
  JOB_CHECK(static_cast<size_t>(st.st_blocks) * 512 >= shmTotalBytes(kDepth, kSlot), "the pages are not reserved");
  shm_unlink(name.c_str());
  return kJobOk;
}

void runInPrivateShm(int (*job)()) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int status = job();
    fflush(nullptr);
    _exit(status);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_FALSE(WIFSIGNALED(status)) << "the job was killed by signal " << WTERMSIG(status);
  if (WEXITSTATUS(status) == kJobNoPrivateShm) GTEST_SKIP() << "needs a private /dev/shm (root or CAP_SYS_ADMIN)";
  EXPECT_EQ(WEXITSTATUS(status), kJobOk) << "the job's message is above";
}

TEST(ShmFull, ListenFailsWithAMessageInsteadOfSigbus) { runInPrivateShm(runListenJob); }

TEST(ShmFull, AFailedReservationOfALaneFailsAgainUntilThereIsRoom) { runInPrivateShm(runReserveRetryJob); }

}  // namespace
}  // namespace mixccl
