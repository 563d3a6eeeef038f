// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Runs a one-rank all-reduce through the installed library.
#include <nccl.h>
#include <stdio.h>

int main(void) {
  ncclUniqueId id;
  ncclComm_t comm;
  float x = 21.0f;
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess || version != NCCL_VERSION_CODE) return 1;
  if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) return 1;
  if (ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess || x != 21.0f) return 1;
  ncclCommDestroy(comm);
  printf("consumer: ok\n");
  return 0;
}
