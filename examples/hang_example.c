// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// A job that hangs on purpose, to show what mixccl's hang reports look like (docs/DEBUGGING.md):
// every rank runs `iters` all-reduces, except rank `late`, which stops after `stop` of them and
// sleeps 10 s. The others block in all-reduce number `stop`; the first to reach MIXCCL_TIMEOUT
// (run with MIXCCL_TIMEOUT=5) logs a hang report and fails with ncclRemoteError, and the others
// log theirs as their calls fail in turn. Usage: hang_example [nranks] [late] [stop] [iters]
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int runRank(int rank, int nranks, int late, int stop, int iters, ncclUniqueId id) {
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) return 1;
  static float buf[1 << 16];
  for (int i = 0; i < iters; ++i) {
    if (rank == late && i == stop) {
      // "Stuck in the data loader" for 10 s, longer than MIXCCL_TIMEOUT; a signal (SIGUSR1 for a
      // dump) cuts sleep() short, so sleep until the time is really up.
      for (time_t until = time(NULL) + 10; time(NULL) < until;) sleep(1);
      break;
    }
    ncclResult_t r = ncclAllReduce(buf, buf, 1 << 16, ncclFloat32, ncclSum, comm, NULL);
    if (r != ncclSuccess) {
      printf("rank %d: all-reduce %d failed: %s: %s\n", rank, i, ncclGetErrorString(r), ncclGetLastError(comm));
      break;
    }
  }
  ncclCommAbort(comm);
  fflush(stdout);  // children leave with _exit, which skips stdio's flush
  return 0;
}

int main(int argc, char** argv) {
  int nranks = argc > 1 ? atoi(argv[1]) : 4;
  int late = argc > 2 ? atoi(argv[2]) : 2;
  int stop = argc > 3 ? atoi(argv[3]) : 3;
  int iters = argc > 4 ? atoi(argv[4]) : 5;
  if (nranks < 2 || late < 0 || late >= nranks || stop < 0 || iters <= stop) {
    fprintf(stderr, "usage: %s [nranks >= 2] [late < nranks] [stop] [iters > stop]\n", argv[0]);
    return 2;
  }
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  fflush(stdout);
  for (int r = 1; r < nranks; ++r) {
    if (fork() == 0) _exit(runRank(r, nranks, late, stop, iters, id));
  }
  runRank(0, nranks, late, stop, iters, id);
  for (int r = 1; r < nranks; ++r) wait(NULL);
  return 0;
}
