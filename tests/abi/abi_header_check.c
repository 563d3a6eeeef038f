/* SPDX-License-Identifier: Apache-2.0 */
/* SPDX-FileCopyrightText: 2026 The mixccl authors */

/*
 * Compiled (never run) in several configurations by tests/abi/abi.cmake: as C99 and C++11 with
 * -pedantic -Werror, without any CUDA header, and with cuda_runtime.h included before or after
 * ours (MIXCCL_CHECK_CUDA_FIRST / MIXCCL_CHECK_CUDA_AFTER). It uses the initializers and the
 * declared types so that they are really instantiated.
 */

#if defined(MIXCCL_CHECK_CUDA_FIRST)
#include <cuda_runtime.h>
#endif
#include "mixccl/device_api.h"
#include "nccl.h"
#if defined(MIXCCL_CHECK_CUDA_AFTER)
#include <cuda_runtime.h>
#endif

int mixcclAbiHeaderCheck(void);

int mixcclAbiHeaderCheck(void) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  ncclUniqueId id;
  ncclComm_t comm = NCCL_COMM_NULL;
  ncclWindow_t win = NULL;
  cudaStream_t stream = NULL;
  ncclRedOp_t op = ncclMaxRedOp;
  ncclDataType_t type = ncclFloat8e5m2;
  ncclTeam_t team = {1, 0, 1};
  ncclResult_t (*allReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t) =
      ncclAllReduce;
  (void)comm;
  (void)win;
  (void)stream;
  (void)allReduce;
  id.internal[0] = 0;
  return (int)config.size + (int)sim.size + id.internal[0] + (int)op + (int)type + team.nRanks +
         NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH) + NCCL_SPLIT_NOCOLOR + NCCL_WIN_COLL_SYMMETRIC;
}
