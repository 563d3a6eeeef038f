/* SPDX-License-Identifier: Apache-2.0 */
/* SPDX-FileCopyrightText: 2026 The mixccl authors */

/*
 * Host-side entry points of NCCL 2.28's device API, as exported by libnccl.so.2.
 *
 * NVIDIA declares these in the nccl_device headers next to the device-side (kernel) API; they live here
 * rather than in nccl.h so that nccl.h declares the same set of names as NCCL's. Only the plain-C data
 * the host calls exchange is declared: ncclTeam_t, which is passed and returned by value, the
 * requirement lists and the small handle structs, each laid out exactly as in NCCL 2.28.9 (the abi
 * tests compare them). ncclDevComm_t is opaque here.
 *
 * mixccl has no device backend that implements this API yet. Every function below is exported so
 * that programs linked against NCCL load, but calling one fails: functions returning ncclResult_t
 * return ncclInvalidUsage, the others return a neutral value (an empty team, or -1), and each
 * records a message that ncclGetLastError shows.
 *
 * If NVIDIA's nccl_device headers were included first, their type definitions are used and only
 * the (identical) function declarations are repeated; including them after this header does not
 * work, as both define the same structs.
 *
 * C99 and C++; no device runtime header needed.
 */

#ifndef MIXCCL_DEVICE_API_H_
#define MIXCCL_DEVICE_API_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../nccl.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef _NCCL_DEVICE_CORE_H_

/* Device-side communicator state. Opaque: only a device backend can fill it. */
struct ncclDevComm;
typedef struct ncclDevComm ncclDevComm_t;

/* A set of ranks described arithmetically: nRanks members whose world ranks are `stride` apart,
 * this process being member number `rank` (so member i is world rank myWorld + (i - rank)*stride). */
struct ncclTeam {
  int nRanks;
  int rank;
  int stride;
};
typedef struct ncclTeam ncclTeam_t;

/* Index of a resource (buffer, signal, counter) inside a device communicator. */
typedef uint32_t ncclDevResourceHandle;
typedef ncclDevResourceHandle ncclDevResourceHandle_t;
typedef uint32_t ncclGinSignal_t;
typedef uint32_t ncclGinCounter_t;

/* A multicast (multimem) object bound to a team. */
struct ncclMultimemHandle {
  void* mcBasePtr;
};
typedef struct ncclMultimemHandle ncclMultimemHandle_t;

/* Barriers among the ranks that can load/store each other's memory (lsa) ... */
struct ncclLsaBarrierHandle {
  ncclDevResourceHandle_t bufHandle;
  int nBarriers;
};
typedef struct ncclLsaBarrierHandle ncclLsaBarrierHandle_t;

/* ... and among ranks reached through the network (gin). */
struct ncclGinBarrierHandle {
  ncclGinSignal_t signal0;
  ncclDevResourceHandle_t bufHandle;
};
typedef struct ncclGinBarrierHandle ncclGinBarrierHandle_t;

/* Low-latency all-to-all exchange buffers. */
struct ncclLLA2AHandle {
  ncclDevResourceHandle_t bufHandle;
  uint32_t nSlots;
};
typedef struct ncclLLA2AHandle ncclLLA2AHandle_t;

typedef struct ncclDevCommRequirements ncclDevCommRequirements_t;
typedef struct ncclDevResourceRequirements ncclDevResourceRequirements_t;
typedef struct ncclTeamRequirements ncclTeamRequirements_t;

/* What a device communicator must provide; passed to ncclDevCommCreate. */
struct ncclDevCommRequirements {
  ncclDevResourceRequirements_t* resourceRequirementsList; /* singly linked, may be NULL */
  ncclTeamRequirements_t* teamRequirementsList;            /* singly linked, may be NULL */
  bool lsaMultimem;
  int barrierCount;
  int lsaBarrierCount;
  int railGinBarrierCount;
  int lsaLLA2ABlockCount;
  int lsaLLA2ASlotCount;
  bool ginForceEnable;
  int ginContextCount;
  int ginSignalCount;
  int ginCounterCount;
};

/* One extra buffer / signal range a device communicator must allocate; the out pointers receive
 * where it was placed. */
struct ncclDevResourceRequirements {
  ncclDevResourceRequirements_t* next;
  size_t bufferSize;
  size_t bufferAlign;
  ncclDevResourceHandle_t* outBufferHandle;
  int ginSignalCount;
  int ginCounterCount;
  ncclGinSignal_t* outGinSignalStart;
  ncclGinCounter_t* outGinCounterStart;
};

/* A team for which a device communicator must prepare (optionally with multicast memory). */
struct ncclTeamRequirements {
  ncclTeamRequirements_t* next;
  ncclTeam_t team;
  bool multimem;
  ncclMultimemHandle_t* outMultimemHandle;
};

#endif /* _NCCL_DEVICE_CORE_H_ */

/* Creates the device-side view of comm described by reqs into *outDevComm. Collective. */
ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs, ncclDevComm_t* outDevComm);
ncclResult_t pncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs, ncclDevComm_t* outDevComm);

/* Releases what ncclDevCommCreate set up. Collective. */
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm);
ncclResult_t pncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm);

/* The team of all ranks of comm. */
ncclTeam_t ncclTeamWorld(ncclComm_t comm);
ncclTeam_t pncclTeamWorld(ncclComm_t comm);

/* The team of ranks whose memory this rank can load and store directly. */
ncclTeam_t ncclTeamLsa(ncclComm_t comm);
ncclTeam_t pncclTeamLsa(ncclComm_t comm);

/* The team of ranks with the same position in every lsa team (one per lsa team). */
ncclTeam_t ncclTeamRail(ncclComm_t comm);
ncclTeam_t pncclTeamRail(ncclComm_t comm);

/* Maps member `rank` of team to its rank in comm (world) / in this rank's lsa team. */
int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);
int pncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);
int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);
int pncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);

/* Adds to *outReq what nBarriers lsa barriers over team need; *outHandle names them later. */
ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers, ncclLsaBarrierHandle_t* outHandle,
                                             ncclDevResourceRequirements_t* outReq);
ncclResult_t pncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers, ncclLsaBarrierHandle_t* outHandle,
                                              ncclDevResourceRequirements_t* outReq);

/* Same for barriers through the network. */
ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                             ncclGinBarrierHandle_t* outHandle, ncclDevResourceRequirements_t* outReq);
ncclResult_t pncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                              ncclGinBarrierHandle_t* outHandle, ncclDevResourceRequirements_t* outReq);

/* Number of slots an LL all-to-all needs for maxElts elements of maxEltSize bytes. */
int ncclLLA2ACalcSlots(int maxElts, int maxEltSize);
int pncclLLA2ACalcSlots(int maxElts, int maxEltSize);

/* Adds to *outReq the buffers of nBlocks LL all-to-all blocks with nSlots slots each. */
ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
                                        ncclDevResourceRequirements_t* outReq);
ncclResult_t pncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
                                         ncclDevResourceRequirements_t* outReq);

/* Same as ncclResetDebugInit; exported by NCCL for its own plugins. */
void ncclResetDebugInitInternal(void);
void pncclResetDebugInitInternal(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MIXCCL_DEVICE_API_H_ */
