// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// One rank of a job started by a launcher (mixcclrun, torchrun, mpirun, srun): it learns its
// place from RANK and WORLD_SIZE (or Open MPI's or Slurm's variables), and the rendezvous from
// NCCL_COMM_ID, so every rank builds the same unique id on its own and no id is passed around. Runs a float all-reduce
// (sum) and checks every element; exits 0 only if all are right.
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

// The first of the named variables that is set, as an integer; -1 if none is.
static int envInt(const char* const* names) {
  for (; *names != NULL; ++names) {
    const char* v = getenv(*names);
    if (v != NULL && *v != '\0') return atoi(v);
  }
  return -1;
}

#define CHECK(call)                                                                                                  \
  do {                                                                                                               \
    ncclResult_t r_ = (call);                                                                                        \
    if (r_ != ncclSuccess) {                                                                                         \
      fprintf(stderr, "rank %d: %s failed: %s (%s)\n", rank, #call, ncclGetErrorString(r_), ncclGetLastError(NULL)); \
      return 1;                                                                                                      \
    }                                                                                                                \
  } while (0)

int main(int argc, char** argv) {
  static const char* const kRank[] = {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", NULL};
  static const char* const kSize[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", NULL};
  int rank = envInt(kRank);
  int nranks = envInt(kSize);
  size_t count = argc > 1 ? (size_t)atoll(argv[1]) : 100003;  // odd: exercises uneven chunks
  if (rank < 0 || nranks < 1 || rank >= nranks || getenv("NCCL_COMM_ID") == NULL) {
    fprintf(stderr, "rank_allreduce: needs RANK, WORLD_SIZE and NCCL_COMM_ID (run it under mixcclrun)\n");
    return 2;
  }
  ncclUniqueId id;
  CHECK(ncclGetUniqueId(&id));
  ncclComm_t comm;
  CHECK(ncclCommInitRank(&comm, nranks, id, rank));
  float* send = malloc(count * sizeof(float));
  float* recv = malloc(count * sizeof(float));
  if (send == NULL || recv == NULL) return 1;
  for (size_t i = 0; i < count; ++i) send[i] = (float)(rank + 1) * (float)(i % 5);
  CHECK(ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, comm, NULL));
  // Small integers: the sum is exact in float whatever the reduction order.
  float ranksum = (float)nranks * (float)(nranks + 1) / 2.0f;
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += recv[i] != ranksum * (float)(i % 5);
  CHECK(ncclCommDestroy(comm));
  printf("rank %d of %d: allreduce of %zu floats, %zu wrong\n", rank, nranks, count, wrong);
  free(send);
  free(recv);
  return wrong == 0 ? 0 : 1;
}
