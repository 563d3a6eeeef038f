// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
//
// Drop-in check: this program is linked against NVIDIA's libnccl.so.2 and knows nothing of mixccl.
// Run with LD_PRELOAD=<our build>/libnccl.so.2, the dynamic linker satisfies the NEEDED entry
// (SONAME libnccl.so.2) with our library and the all-reduce must pass; run without it, NVIDIA's
// library is used, which cannot initialise without a GPU, so the run must fail.
//
// Two ranks are forked; rank 0 creates the unique id and passes it through a pipe. Each rank
// all-reduces host buffers (float32 and int32, sum) and checks the exact result.
//
// usage: preload [--expect-provider PATH]
//   PATH: the file (after resolving links) that must provide ncclAllReduce.
// Exit status: 0 pass, 1 wrong result, 2 an NCCL call failed or a rank hung/died, 3 setup error.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <nccl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { kRanks = 2, kCount = 1001, kTimeoutSeconds = 120 };

static int fail_call(int rank, const char* what, ncclResult_t res) {
  const char* last = ncclGetLastError(NULL);
  fprintf(stderr, "preload: rank %d: %s failed: %s (%s)\n", rank, what, ncclGetErrorString(res), last ? last : "");
  return 2;
}

static int run_rank(int rank, int fd_read, int fd_write) {
  ncclUniqueId id;
  ncclResult_t res;
  if (rank == 0) {
    res = ncclGetUniqueId(&id);
    if (res != ncclSuccess) return fail_call(rank, "ncclGetUniqueId", res);
    if (write(fd_write, &id, sizeof(id)) != (ssize_t)sizeof(id)) return 2;
  } else {
    close(fd_write);
    size_t got = 0;
    while (got < sizeof(id)) {
      ssize_t m = read(fd_read, (char*)&id + got, sizeof(id) - got);
      if (m <= 0) {
        fprintf(stderr, "preload: rank %d: rank 0 sent no unique id\n", rank);
        return 2;
      }
      got += (size_t)m;
    }
  }
  ncclComm_t comm;
  res = ncclCommInitRank(&comm, kRanks, id, rank);
  if (res != ncclSuccess) return fail_call(rank, "ncclCommInitRank", res);

  float fsend[kCount], frecv[kCount];
  int32_t isend[kCount], irecv[kCount];
  for (int i = 0; i < kCount; ++i) {
    fsend[i] = (float)((rank + 1) * (i % 97));
    isend[i] = (rank + 1) * 100000 + i;
  }
  res = ncclAllReduce(fsend, frecv, kCount, ncclFloat32, ncclSum, comm, (cudaStream_t)0);
  if (res != ncclSuccess) return fail_call(rank, "ncclAllReduce(float32)", res);
  res = ncclAllReduce(isend, irecv, kCount, ncclInt32, ncclSum, comm, (cudaStream_t)0);
  if (res != ncclSuccess) return fail_call(rank, "ncclAllReduce(int32)", res);
  int bad = 0;
  for (int i = 0; i < kCount; ++i) {
    float fwant = (float)(3 * (i % 97));  // (1 + 2) * (i % 97)
    int32_t iwant = 300000 + 2 * i;
    if ((frecv[i] != fwant || irecv[i] != iwant) && bad++ < 5)
      fprintf(stderr, "preload: rank %d index %d: got %g/%d, expected %g/%d\n", rank, i, frecv[i], irecv[i], fwant,
              iwant);
  }
  res = ncclCommDestroy(comm);
  if (res != ncclSuccess) return fail_call(rank, "ncclCommDestroy", res);
  return bad ? 1 : 0;
}

int main(int argc, char** argv) {
  const char* expect = NULL;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--expect-provider") && i + 1 < argc) {
      expect = argv[++i];
    } else {
      fprintf(stderr, "usage: preload [--expect-provider PATH]\n");
      return 3;
    }
  }
  Dl_info info;
  void* h = dlopen("libnccl.so.2", RTLD_LAZY | RTLD_NOLOAD);
  void* sym = h ? dlsym(h, "ncclAllReduce") : NULL;
  if (!sym || !dladdr(sym, &info) || !info.dli_fname) {
    fprintf(stderr, "preload: cannot locate the library providing ncclAllReduce\n");
    return 3;
  }
  char real[PATH_MAX];
  if (!realpath(info.dli_fname, real)) snprintf(real, sizeof(real), "%s", info.dli_fname);
  printf("preload: ncclAllReduce from %s (%s)\n", info.dli_fname, real);
  fflush(stdout);
  if (expect) {
    char want[PATH_MAX];
    if (!realpath(expect, want)) snprintf(want, sizeof(want), "%s", expect);
    if (strcmp(want, real) != 0) {
      fprintf(stderr, "preload: expected ncclAllReduce from %s\n", want);
      return 3;
    }
  }

  int fds[2];
  if (pipe(fds) != 0) return 3;
  pid_t pids[kRanks];
  for (int r = 0; r < kRanks; ++r) {
    pids[r] = fork();
    if (pids[r] < 0) return 3;
    if (pids[r] == 0) _exit(run_rank(r, fds[0], fds[1]));
  }
  close(fds[0]);
  close(fds[1]);

  int worst = 0, alive = kRanks;
  time_t deadline = time(NULL) + kTimeoutSeconds;
  while (alive > 0) {
    int ws;
    pid_t pid = waitpid(-1, &ws, WNOHANG);
    if (pid > 0) {
      --alive;
      int code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 2;
      if (code > worst) worst = code;
      continue;
    }
    if (time(NULL) > deadline) {
      fprintf(stderr, "preload: ranks did not finish within %d s\n", kTimeoutSeconds);
      for (int r = 0; r < kRanks; ++r) kill(pids[r], SIGKILL);
      while (waitpid(-1, &ws, 0) > 0) {
      }
      worst = 2;
      break;
    }
    usleep(20000);
  }
  printf("preload: %s (exit %d)\n", worst == 0 ? "PASS" : "FAIL", worst);
  return worst;
}
