// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// A 2-rank (or N-rank) float all-reduce on host memory, one process per rank, over local shared
// memory. Usage: allreduce_example [nranks] [count]
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(call)                                                                                                  \
  do {                                                                                                               \
    ncclResult_t r_ = (call);                                                                                        \
    if (r_ != ncclSuccess) {                                                                                         \
      fprintf(stderr, "rank %d: %s failed: %s (%s)\n", rank, #call, ncclGetErrorString(r_), ncclGetLastError(NULL)); \
      return 1;                                                                                                      \
    }                                                                                                                \
  } while (0)

static int runRank(int rank, int nranks, size_t count, ncclUniqueId id) {
  ncclComm_t comm;
  CHECK(ncclCommInitRank(&comm, nranks, id, rank));
  float* send = malloc(count * sizeof(float));
  float* recv = malloc(count * sizeof(float));
  for (size_t i = 0; i < count; ++i) send[i] = (float)(rank + 1) * (float)(i % 7);
  CHECK(ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, comm, NULL));
  // Every element must equal (1 + 2 + ... + nranks) * (i % 7).
  float ranksum = (float)nranks * (float)(nranks + 1) / 2.0f;
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += recv[i] != ranksum * (float)(i % 7);
  printf("rank %d of %d: allreduce(sum) of %zu floats: recv[0..3] = %g %g %g %g, %zu wrong\n", rank, nranks, count,
         recv[0], recv[1], recv[2], recv[3], wrong);
  CHECK(ncclCommDestroy(comm));
  free(send);
  free(recv);
  fflush(stdout);  // children leave with _exit, which skips stdio's flush
  return wrong == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  int nranks = argc > 1 ? atoi(argv[1]) : 2;
  size_t count = argc > 2 ? (size_t)atoll(argv[2]) : 1 << 20;
  int rank = -1;
  if (nranks < 1 || count < 4) {
    fprintf(stderr, "usage: %s [nranks >= 1] [count >= 4]\n", argv[0]);
    return 2;
  }
  int version = 0;
  CHECK(ncclGetVersion(&version));
  printf("mixccl (NCCL ABI %d): %d ranks, one process each, host memory\n", version, nranks);
  ncclUniqueId id;
  CHECK(ncclGetUniqueId(&id));
  fflush(stdout);
  for (int r = 1; r < nranks; ++r) {
    if (fork() == 0) _exit(runRank(r, nranks, count, id));
  }
  int status = runRank(0, nranks, count, id);
  for (int r = 1; r < nranks; ++r) {
    int st = 0;
    wait(&st);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) status = 1;
  }
  printf(status == 0 ? "all-reduce correct on every rank\n" : "all-reduce FAILED\n");
  return status;
}
