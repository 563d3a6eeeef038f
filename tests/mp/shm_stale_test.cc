// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Leftovers of killed jobs in /dev/shm (transports/shm/shm_stale.h): a job whose ranks are killed
// with SIGKILL in the middle of setting up lanes leaves shm objects behind; a restart with the
// same NCCL_COMM_ID (hence the same communicator hash, and before per-run names the same object
// names) must succeed, and its sweep must remove exactly the dead job's objects: never those of a
// live process, never ones whose header does not validate or that belong to another pid space.
// Everything runs in a private /dev/shm, so the lists below are exact.

#include "transports/shm/shm_stale.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <nccl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/config.h"
#include "common/pid_space.h"
#include "common/socket.h"
#include "src/core/bootstrap.h"
#include "tests/support/private_shm.h"
#include "transports/shm/shm_rank_page.h"
#include "transports/shm/shm_segment.h"
#include "transports/transport.h"

namespace mixccl {
namespace {

constexpr int kJobOk = 0;
constexpr int kJobFailed = 1;
constexpr int kJobNoPrivateShm = 77;

#define JOB_CHECK(cond, ...)                \
  do {                                      \
    if (!(cond)) {                          \
      fprintf(stderr, "job: " __VA_ARGS__); \
      fprintf(stderr, " [%s]\n", #cond);    \
      return kJobFailed;                    \
    }                                       \
  } while (0)

std::set<std::string> listShm() {
  std::set<std::string> names;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) {
      if (strncmp(e->d_name, "mixccl-", 7) == 0) names.insert(e->d_name);
    }
    closedir(d);
  }
  return names;
}

bool exists(const std::string& name) { return access(("/dev/shm/" + name).c_str(), F_OK) == 0; }

// Forks a process running body(); it reports readiness by writing one byte to the returned fd's
// peer, and anything it returns is its exit status.
pid_t spawn(const std::function<int(int readyFd)>& body, int* readyRead) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const int status = body(fds[1]);
    fflush(nullptr);
    _exit(status);
  }
  close(fds[1]);
  *readyRead = fds[0];
  return pid;
}

bool waitReady(int fd) {
  char c;
  const bool ok = read(fd, &c, 1) == 1;
  close(fd);
  return ok;
}

int exitStatus(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// A rank of the job that gets killed: after init it enters a call that creates the segment of a
// lane into it and then waits on a peer that never comes (rank 0 all-reduces, rank 1 receives),
// so each leaves a name no peer mapped. It never ends by itself.
int crashingRank(int rank, int readyFd) {
  ncclUniqueId id;
  ncclComm_t comm = nullptr;
  if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 2, id, rank) != ncclSuccess) {
    fprintf(stderr, "crashing rank %d: init failed: %s\n", rank, ncclGetLastError(nullptr));
    return 1;
  }
  if (write(readyFd, "r", 1) != 1) return 1;
  int v = 1;
  if (rank == 0) {
    (void)ncclAllReduce(&v, &v, 1, ncclInt32, ncclSum, comm, nullptr);
  } else {
    (void)ncclRecv(&v, 1, ncclInt32, 0, comm, nullptr);
  }
  for (;;) pause();
}

// A rank of the restarted job: an exact all-reduce, then a clean destroy.
int restartedRank(int rank) {
  ncclUniqueId id;
  ncclComm_t comm = nullptr;
  if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 2, id, rank) != ncclSuccess) {
    fprintf(stderr, "restarted rank %d: init failed: %s\n", rank, ncclGetLastError(nullptr));
    return 1;
  }
  std::vector<int> v(100000, rank + 1);
  if (ncclAllReduce(v.data(), v.data(), v.size(), ncclInt32, ncclSum, comm, nullptr) != ncclSuccess) {
    fprintf(stderr, "restarted rank %d: all-reduce failed: %s\n", rank, ncclGetLastError(nullptr));
    return 2;
  }
  for (int x : v) {
    if (x != 3) return 3;
  }
  return ncclCommDestroy(comm) == ncclSuccess ? 0 : 4;
}

// An shm transport of rank `rank` of `nranks` in communicator `commHash`, small slots.
std::unique_ptr<Transport> shmTransportOf(uint64_t commHash, int rank, int nranks) {
  TransportContext ctx;
  ctx.rank = rank;
  ctx.nranks = nranks;
  ctx.commHash = commHash;
  ctx.slotBytes = 4096;
  ctx.fifoDepth = 2;
  return makeShmTransport(ctx);
}

// Rank `rank` of communicator `commHash` that created its rank page (listen) and then waits, as
// if the peer exchange never came, until it is killed (at the latest when the job process ends,
// so a failing check cannot leave it behind).
int pageOwnerRank(uint64_t commHash, int rank, int readyFd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  std::unique_ptr<Transport> t = shmTransportOf(commHash, rank, 3);
  std::vector<uint8_t> blob;
  if (t->listen(&blob) != Result::kSuccess || write(readyFd, "r", 1) != 1) return 1;
  for (;;) pause();
}

// A transport of another, live communicator: its rank page and the segment of a lane into it
// (whose sender never comes), held until the parent closes `holdFd`.
int liveHolder(int readyFd, int holdFd) {
  std::unique_ptr<Transport> t = shmTransportOf(0x11feull, 0, 2);
  std::vector<TransportPeer> peers(2);
  if (t->listen(&peers[0].blob) != Result::kSuccess) return 1;
  peers[1].rank = 1;
  peers[1].blob = encodeShmBlob(12345);  // a peer that never shows up
  peers[0].pid = peers[1].pid = getpid();
  if (t->setPeers(peers) != Result::kSuccess) return 2;
  std::unique_ptr<RecvConnection> recv;
  if (t->connectRecv(1, kLaneColl, &recv) != Result::kSuccess) return 3;
  if (write(readyFd, "r", 1) != 1) return 4;
  char c;
  while (read(holdFd, &c, 1) > 0) {
  }
  return 0;  // the destructors remove both names
}

// An object with content `bytes` (header fields at offsets), mode 0600.
bool makeObject(const std::string& name, const std::vector<std::pair<size_t, uint64_t>>& fields, size_t size) {
  const int fd = shm_open(("/" + name).c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return false;
  std::vector<uint8_t> buf(size, 0xab);
  for (const auto& [offset, value] : fields) memcpy(buf.data() + offset, &value, sizeof(value));
  const bool ok = write(fd, buf.data(), buf.size()) == static_cast<ssize_t>(buf.size());
  close(fd);
  return ok;
}

int runJob() {
  std::string why;
  if (!testing::enterPrivateDevShm(&why)) {
    fprintf(stderr, "job: no private /dev/shm (%s)\n", why.c_str());
    return kJobNoPrivateShm;
  }
  SocketAddress addr;
  JOB_CHECK(parseHostPort("127.0.0.1:0", &addr) == Result::kSuccess, "address");
  {
    Socket s;  // a free port, released for rank 0's root
    JOB_CHECK(Socket::listen(&addr, &s) == Result::kSuccess, "probe port");
  }
  setenv("NCCL_COMM_ID", addr.toString().c_str(), 1);
  setenv("MIXCCL_TIMEOUT", "60", 1);
  unsetenv("NCCL_SHM_DISABLE");
  config::resetForTesting();

  // 1. The job that dies: two ranks killed mid-set-up, plus a rank 0 killed right after it
  //    created its rank page (before any peer mapped it: the original "File exists" case).
  int ready[2];
  pid_t ranks[2];
  for (int r = 0; r < 2; ++r) ranks[r] = spawn([r](int fd) { return crashingRank(r, fd); }, &ready[r]);
  for (int r = 0; r < 2; ++r) JOB_CHECK(ranks[r] > 0 && waitReady(ready[r]), "crashing rank %d did not init", r);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (listShm().size() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (pid_t p : ranks) kill(p, SIGKILL);
  for (pid_t p : ranks) exitStatus(p);
  UniqueIdData id;
  JOB_CHECK(createUniqueId(&id) == Result::kSuccess, "id from NCCL_COMM_ID");
  int pageReady;
  pid_t pageOwner = spawn([&id](int fd) { return pageOwnerRank(id.commHash, 0, fd); }, &pageReady);
  JOB_CHECK(pageOwner > 0 && waitReady(pageReady), "page owner did not start");
  kill(pageOwner, SIGKILL);
  exitStatus(pageOwner);
  const std::set<std::string> dead = listShm();
  size_t deadPages = 0;
  for (const auto& n : dead) deadPages += n.find("-rank") != std::string::npos ? 1 : 0;
  JOB_CHECK(dead.size() >= 3 && deadPages == 1, "the killed job left %zu objects (%zu rank pages), want >= 3 (1)",
            dead.size(), deadPages);

  // 2. What must survive any sweep: a live process's objects, objects whose header does not
  //    validate, and one whose (dead) owner lived in another pid space.
  int holdPipe[2];
  JOB_CHECK(pipe(holdPipe) == 0, "pipe");
  int liveReady;
  pid_t live = spawn(
      [&](int fd) {
        close(holdPipe[1]);
        return liveHolder(fd, holdPipe[0]);
      },
      &liveReady);
  close(holdPipe[0]);
  JOB_CHECK(live > 0 && waitReady(liveReady), "live holder did not start");
  std::set<std::string> keep;
  for (const auto& n : listShm()) {
    if (dead.count(n) == 0) keep.insert(n);
  }
  JOB_CHECK(keep.size() == 2, "the live holder has %zu objects, want 2", keep.size());
  JOB_CHECK(makeObject("mixccl-junk-short", {{0, kShmRankPageMagic}}, 10), "junk");
  JOB_CHECK(makeObject("mixccl-junk-magic", {}, 4096), "junk");
  const uint64_t deadPid = static_cast<uint64_t>(pageOwner);  // reaped above
  JOB_CHECK(makeObject("mixccl-foreign-rank0",
                       {{0, kShmRankPageMagic},
                        {offsetof(ShmRankPageHeader, pid), deadPid},
                        {offsetof(ShmRankPageHeader, pidSpace), localPidSpace() ^ 1}},
                       4096),
            "foreign");
  keep.insert({"mixccl-junk-short", "mixccl-junk-magic", "mixccl-foreign-rank0"});
  // A lane an older build (version 6) left when it was killed: its owners sit where today's do,
  // so it is judged and reclaimed after an upgrade; one of version 2 (no pid space) is not ours to judge.
  auto oldLane = [&](const char* name, uint64_t version) {
    return makeObject(name,
                      {{0, kShmMagic},
                       {offsetof(ShmHeader, version), version},
                       {offsetof(ShmHeader, receiverPid), deadPid},
                       {offsetof(ShmHeader, senderPid), 0},
                       {offsetof(ShmHeader, pidSpace), localPidSpace()}},
                      8192);
  };
  JOB_CHECK(oldLane("mixccl-v6-lane", 6), "version 6 lane");
  JOB_CHECK(oldLane("mixccl-v2-lane", 2), "version 2 lane");
  std::set<std::string> deadOld = {"mixccl-v6-lane"};
  keep.insert("mixccl-v2-lane");

  // 3. Once everything is old enough to be judged, the restart (same NCCL_COMM_ID).
  std::this_thread::sleep_for(kShmStaleMinAge + std::chrono::milliseconds(1200));
  pid_t restarted[2];
  int unused[2];
  for (int r = 0; r < 2; ++r) {
    restarted[r] = spawn(
        [r](int fd) {
          if (r == 0) usleep(100 * 1000);  // the others wait for the root to appear
          return restartedRank(r);
        },
        &unused[r]);
  }
  int failed = 0;
  for (int r = 0; r < 2; ++r) {
    close(unused[r]);
    const int code = exitStatus(restarted[r]);
    if (code != 0) fprintf(stderr, "job: restarted rank %d ended with %d\n", r, code);
    failed += code != 0 ? 1 : 0;
  }
  JOB_CHECK(failed == 0, "the restart with the same NCCL_COMM_ID failed");

  // 4. The dead job's objects are gone, every other one is still there.
  for (const auto& n : dead) JOB_CHECK(!exists(n), "stale /dev/shm/%s was not reclaimed", n.c_str());
  for (const auto& n : deadOld) JOB_CHECK(!exists(n), "stale /dev/shm/%s was not reclaimed", n.c_str());
  for (const auto& n : keep) JOB_CHECK(exists(n), "/dev/shm/%s was removed, but it is not stale", n.c_str());
  close(holdPipe[1]);
  JOB_CHECK(exitStatus(live) == 0, "live holder failed");
  for (const char* n : {"/mixccl-junk-short", "/mixccl-junk-magic", "/mixccl-foreign-rank0", "/mixccl-v2-lane"}) {
    shm_unlink(n);
  }
  const auto left = listShm();
  JOB_CHECK(left.empty(), "%zu objects left at the end (first: %s)", left.size(), left.begin()->c_str());
  return kJobOk;
}

// A rank killed during init, after it created its rank page and before the peer exchange gave
// its nonce to anyone (found by fault_trials: "kill, 3 ranks, at 2 ms"): the survivors' set-up
// fails, and the transport of each must remove the dead rank's page on the way out, at once, not
// leave it to a later job's sweep. A live rank's page of the same communicator stays.
int runInitKillJob() {
  std::string why;
  if (!testing::enterPrivateDevShm(&why)) {
    fprintf(stderr, "job: no private /dev/shm (%s)\n", why.c_str());
    return kJobNoPrivateShm;
  }
  unsetenv("NCCL_SHM_DISABLE");
  config::resetForTesting();
  constexpr uint64_t kHash = 0x5eedull;
  int ready[2];
  pid_t owners[2];
  for (int r = 0; r < 2; ++r) {
    owners[r] = spawn([r](int fd) { return pageOwnerRank(kHash, r, fd); }, &ready[r]);
    JOB_CHECK(owners[r] > 0 && waitReady(ready[r]), "page owner %d did not start", r);
  }
  const std::set<std::string> pages = listShm();
  JOB_CHECK(pages.size() == 2, "%zu objects after two listens, want 2 rank pages", pages.size());
  kill(owners[0], SIGKILL);
  exitStatus(owners[0]);
  {
    // The survivor, rank 2: set-up began (listen) and fails before setPeers.
    std::unique_ptr<Transport> t = shmTransportOf(kHash, 2, 3);
    std::vector<uint8_t> blob;
    JOB_CHECK(t->listen(&blob) == Result::kSuccess, "survivor listen");
    JOB_CHECK(listShm().size() == 3, "the survivor's listen removed a page younger than kShmStaleMinAge");
  }
  const std::set<std::string> left = listShm();
  const std::string live = "-rank1";
  JOB_CHECK(left.size() == 1 && left.begin()->find(live) != std::string::npos,
            "after the survivor left, %zu objects remain (want only the live rank 1's page; first: %s)", left.size(),
            left.empty() ? "-" : left.begin()->c_str());
  kill(owners[1], SIGKILL);
  exitStatus(owners[1]);
  shm_unlink(("/" + *left.begin()).c_str());
  return kJobOk;
}

// /dev/shm is world-writable: a FIFO (or socket) named like our objects, there by accident or
// put there by another user, must neither block the sweep every init runs (opening a FIFO to
// read waits for a writer) nor be removed. alarm() turns a sweep that blocks into a failed job.
int runFifoJob() {
  std::string why;
  if (!testing::enterPrivateDevShm(&why)) {
    fprintf(stderr, "job: no private /dev/shm (%s)\n", why.c_str());
    return kJobNoPrivateShm;
  }
  JOB_CHECK(mkfifo("/dev/shm/mixccl-fifo", 0666) == 0, "mkfifo: %s", strerror(errno));
  alarm(20);
  JOB_CHECK(sweepStaleShm() == 0, "the sweep removed something");
  JOB_CHECK(reclaimCommShm(0) == 0, "the communicator's reclaim removed something");
  alarm(0);
  JOB_CHECK(exists("mixccl-fifo"), "the sweep removed a FIFO that is no object of ours");
  unlink("/dev/shm/mixccl-fifo");
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
  const int code = exitStatus(pid);
  if (code == kJobNoPrivateShm) GTEST_SKIP() << "needs a private /dev/shm (root or CAP_SYS_ADMIN)";
  EXPECT_EQ(code, kJobOk) << "the job's message is above";
}

TEST(ShmStale, RestartAfterKilledJobSucceedsAndReclaimsOnlyDeadObjects) { runInPrivateShm(runJob); }

TEST(ShmStale, FailedSetUpRemovesThePageOfARankKilledBeforeTheExchange) { runInPrivateShm(runInitKillJob); }

TEST(ShmStale, AFifoWithOurNameNeitherBlocksTheSweepNorIsRemoved) { runInPrivateShm(runFifoJob); }

}  // namespace
}  // namespace mixccl
