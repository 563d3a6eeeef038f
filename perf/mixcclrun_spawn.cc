// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "perf/mixcclrun_spawn.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>

extern char** environ;

namespace mixccl::run {
namespace {

std::string nameOf(const std::string& entry) { return entry.substr(0, entry.find('=')); }

// Where this job runs inside another launcher's task (an `srun --pty bash` shell, a script started
// by mpirun), that task's place in its own job is in our environment. Programs that read those
// variables before RANK/WORLD_SIZE (the perf tools do: perf/common/launch.cc) would each take the
// outer task's rank and size, so np copies of a 1-rank job would run instead of one np-rank job.
// Our ranks are not tasks of that job: its identity stays out of their environment.
constexpr const char* kOuterIdentity[] = {"OMPI_COMM_WORLD_RANK",
                                          "OMPI_COMM_WORLD_SIZE",
                                          "OMPI_COMM_WORLD_LOCAL_RANK",
                                          "OMPI_COMM_WORLD_LOCAL_SIZE",
                                          "OMPI_COMM_WORLD_NODE_RANK",
                                          "PMI_RANK",
                                          "PMI_SIZE",
                                          "PMIX_RANK",
                                          "MPI_LOCALRANKID",
                                          "MPI_LOCALNRANKS",
                                          "SLURM_PROCID",
                                          "SLURM_NTASKS",
                                          "SLURM_NPROCS",
                                          "SLURM_LOCALID",
                                          "SLURM_NODEID"};

bool isOuterIdentity(const std::string& name) {
  for (const char* v : kOuterIdentity)
    if (name == v) return true;
  return false;
}

}  // namespace

bool pickFreePorts(Ports* ports, std::string* error) {
  // Both sockets stay bound until both ports are known, so the kernel cannot hand out one twice.
  int fds[2] = {-1, -1};
  int found[2] = {0, 0};
  bool ok = true;
  for (int i = 0; i < 2 && ok; ++i) {
    fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    ok = fds[i] >= 0 && bind(fds[i], reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
         getsockname(fds[i], reinterpret_cast<sockaddr*>(&addr), &len) == 0;
    if (ok) found[i] = ntohs(addr.sin_port);
  }
  if (!ok) *error = std::string("cannot find a free port on 127.0.0.1: ") + strerror(errno) + "; pass --port";
  for (int fd : fds)
    if (fd >= 0) close(fd);
  ports->master = found[0];
  ports->commId = found[1];
  return ok;
}

std::string makeJobSecret() {
  uint8_t bytes[16];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return "";  // no secret: the job still runs, as with a plain NCCL_COMM_ID
    got += static_cast<size_t>(n);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (uint8_t b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

// Cores this process may run on (its affinity mask, as a container or taskset limits it).
static int usableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(std::min(n, 4096L)) : 1;
}

std::vector<std::string> rankEnvironment(const Options& o, int rank, const Ports& ports) {
  // A map keyed by name keeps one entry per variable, whatever order they were set in.
  std::map<std::string, std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry = *e;
    if (!isOuterIdentity(nameOf(entry))) vars[nameOf(entry)] = entry;
  }
  for (const std::string& entry : o.env) {
    std::string name = nameOf(entry);
    if (entry.find('=') != std::string::npos) {
      vars[name] = entry;
    } else if (const char* ours = getenv(name.c_str()); ours != nullptr) {
      vars[name] = name + "=" + ours;
    }
  }
  for (const Options::RankEnv& re : o.rankEnv) {
    if (std::binary_search(re.ranks.begin(), re.ranks.end(), rank)) vars[nameOf(re.entry)] = re.entry;
  }
  auto set = [&](const std::string& name, const std::string& value) { vars[name] = name + "=" + value; };
  set("RANK", std::to_string(rank));
  set("WORLD_SIZE", std::to_string(o.np));
  set("LOCAL_RANK", std::to_string(rank));
  set("LOCAL_WORLD_SIZE", std::to_string(o.np));
  set("MASTER_ADDR", "127.0.0.1");
  set("MASTER_PORT", std::to_string(ports.master));
  // A CPU OpenCL device (POCL) starts one worker thread per core in every rank process: with
  // np ranks on the host that is np times too many threads for the cores, and the ranks' steps
  // then wait in the scheduler behind each other's workers (docs/ENGINE.md measures it). Give
  // each rank its share of the cores, as torchrun does with OMP_NUM_THREADS; a user's value wins.
  if (vars.find("POCL_MAX_PTHREAD_COUNT") == vars.end()) {
    set("POCL_MAX_PTHREAD_COUNT", std::to_string(std::max(1, usableCores() / std::max(1, o.np))));
  }
  // A user's NCCL_COMM_ID wins: they may want a fixed port or interface.
  if (vars.find("NCCL_COMM_ID") == vars.end()) {
    set("NCCL_COMM_ID", "127.0.0.1:" + std::to_string(ports.commId));
    if (vars.find("MIXCCL_COMM_SECRET") == vars.end() && !ports.secret.empty()) set("MIXCCL_COMM_SECRET", ports.secret);
  }

  std::vector<std::string> out;
  out.reserve(vars.size());
  for (auto& [name, entry] : vars) out.push_back(std::move(entry));
  return out;
}

pid_t spawnRank(const std::vector<std::string>& argv, const std::vector<std::string>& env, const ChildSetup& setup,
                int* execErrno, std::string* error) {
  *execErrno = 0;
  // Everything the child touches is prepared here: between fork and exec it only makes
  // async-signal-safe system calls.
  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  std::vector<char*> cenv;
  for (const std::string& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);

  // The child reports a failed exec through this pipe; a successful exec closes it (O_CLOEXEC),
  // so the parent reads EOF.
  int status[2];
  if (pipe2(status, O_CLOEXEC) != 0) {
    *error = std::string("pipe2() failed: ") + strerror(errno);
    return -1;
  }
  pid_t pid = fork();
  if (pid < 0) {
    *error = std::string("fork() failed: ") + strerror(errno);
    close(status[0]);
    close(status[1]);
    return -1;
  }
  if (pid == 0) {
    close(status[0]);
    setpgid(0, 0);
    // If we are killed with SIGKILL (nothing forwarded), the kernel kills the ranks for us. Our
    // death may already have happened before prctl, so check the parent afterwards.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != setup.parentPid) _exit(1);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0 && devnull != 0) {
      dup2(devnull, 0);
      close(devnull);
    }
    if (setup.stdoutFd >= 0) dup2(setup.stdoutFd, 1);
    if (setup.stderrFd >= 0) dup2(setup.stderrFd, 2);
    sigaction(SIGPIPE, &setup.pipeAction, nullptr);
    sigprocmask(SIG_SETMASK, &setup.originalMask, nullptr);
    execvpe(cargv[0], cargv.data(), cenv.data());
    int err = errno;
    ssize_t ignored = write(status[1], &err, sizeof(err));
    (void)ignored;
    _exit(127);
  }
  close(status[1]);
  // Also set the group from this side, so a signal sent right after we return cannot miss it.
  setpgid(pid, pid);
  int err = 0;
  ssize_t n;
  do {
    n = read(status[0], &err, sizeof(err));
  } while (n < 0 && errno == EINTR);
  close(status[0]);
  if (n == static_cast<ssize_t>(sizeof(err))) {
    *execErrno = err;
    *error = "cannot execute '" + argv[0] + "': " + strerror(err);
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    return -1;
  }
  return pid;
}

}  // namespace mixccl::run
