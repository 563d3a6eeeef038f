/* SPDX-License-Identifier: Apache-2.0 */
/* SPDX-FileCopyrightText: 2026 The mixccl authors */

/*
 * mixccl's public C interface.
 *
 * Source- and binary-compatible with the NCCL 2.28.9 API: every type, constant, struct layout and
 * function signature below matches that release, so a program built against NVIDIA's header runs
 * against libmixccl (installed as libnccl.so.2) and the other way round.
 *
 * What differs is where the data may live. mixccl also runs ranks whose buffers are ordinary host
 * memory (CPUs, or devices of another vendor). On host buffers:
 *   - an operation is finished when the call that issues it returns (or, inside a group, when the
 *     closing ncclGroupEnd returns); nothing is left running in the background;
 *   - the stream argument is not needed and may be NULL.
 * On device buffers the call is ordered on the given stream, as with NCCL.
 *
 * The header is plain C99 and does not pull in any vendor runtime. When no CUDA runtime header was
 * seen first, cudaStream_t is declared here as the same opaque pointer type CUDA uses, so including
 * cuda_runtime.h afterwards still compiles. (C++ and C11 allow the repeated typedef; C99 with
 * -pedantic only accepts it when the CUDA directory is a system include path, e.g. -isystem, so in
 * strict C99 prefer including cuda_runtime.h first.)
 */

#ifndef NCCL_H_
#define NCCL_H_

#include <limits.h>
#include <stddef.h>

/* ---- Version ---------------------------------------------------------------------------------- */

#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 9
#define NCCL_SUFFIX ""

#define NCCL_VERSION_CODE 22809
/* Releases up to 2.8 packed the version as X*1000 + Y*100 + Z; later ones use X*10000 + Y*100 + Z. */
#define NCCL_VERSION(X, Y, Z) (((X) <= 2 && (Y) <= 8) ? (X)*1000 + (Y)*100 + (Z) : (X)*10000 + (Y)*100 + (Z))

/* ---- Streams ---------------------------------------------------------------------------------- */

/* cudaStream_t comes from driver_types.h (included by cuda_runtime.h). Declare the identical type
 * when neither was included, so the prototypes below need no CUDA installation. */
#if !defined(__CUDA_RUNTIME_H__) && !defined(__DRIVER_TYPES_H__)
typedef struct CUstream_st* cudaStream_t;
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Deprecation marker for the compilers that understand it. */
#if defined(__GNUC__) || defined(__clang__)
#define MIXCCL_DEPRECATED_(msg) __attribute__((deprecated(msg)))
#else
#define MIXCCL_DEPRECATED_(msg)
#endif

/* Inside mixccl's own build (MIXCCL_FIXED_ENUM_TYPES, set on its API layer) the argument enums below
 * get a fixed underlying type, the unsigned int compilers pick for them anyway (same size, values
 * and calling convention), so that any value a C caller passes (a bad datatype such as -1, say) is
 * one the library can check, not undefined behaviour in the C++ code that receives it. Users get
 * NVIDIA's enums as they are: a fixed unsigned type would make C++ promote the values to unsigned
 * instead of int, so code such as `op < n` (int n) would warn under -Wall and std::max(op + 0, n)
 * would not compile, where it does with NVIDIA's header. */
#if defined(__cplusplus) && __cplusplus >= 201103L && defined(MIXCCL_FIXED_ENUM_TYPES)
#define MIXCCL_ENUM_INT_ : unsigned
#else
#define MIXCCL_ENUM_INT_
#endif

/* ---- Handles and identifiers ------------------------------------------------------------------ */

/* A communicator: one rank's membership in a group of ranks. Opaque; created by ncclCommInit*. */
typedef struct ncclComm* ncclComm_t;
/* A registered memory window (ncclCommWindowRegister). Opaque. */
typedef struct ncclWindow_vidmem* ncclWindow_t;
#define NCCL_COMM_NULL NULL

/* The rendezvous token: made by one rank with ncclGetUniqueId, handed to all others out of band. */
#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

/* ---- Result codes ----------------------------------------------------------------------------- */

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1, /* a device runtime call failed */
  ncclSystemError = 2,        /* an operating-system call failed (socket, memory, thread, ...) */
  ncclInternalError = 3,      /* a library bug */
  ncclInvalidArgument = 4,    /* an argument has a bad value */
  ncclInvalidUsage = 5,       /* the call is not allowed here, or not supported on this setup */
  ncclRemoteError = 6,        /* a peer failed, went away, or the network broke */
  ncclInProgress = 7,         /* non-blocking call not finished yet; poll ncclCommGetAsyncError */
  ncclNumResults = 8
} ncclResult_t;

/* ---- Constants -------------------------------------------------------------------------------- */

/* "Not set" markers for ncclConfig_t fields: the library picks the value. */
#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
/* A color for ncclCommSplit meaning "this rank joins no new communicator". */
#define NCCL_SPLIT_NOCOLOR -1
/* "Not set" marker for float fields. */
#define NCCL_UNDEF_FLOAT -1.0f

/* Flags for ncclCommWindowRegister. */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
/* Buffers given to ncclCommWindowRegister must be aligned to this many bytes. */
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/* Values for ncclConfig_t.CTAPolicy (how many device thread blocks to spend on communication). */
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

/* Flags for ncclCommShrink. */
#define NCCL_SHRINK_DEFAULT 0x00 /* the parent is healthy: shrink it as is */
#define NCCL_SHRINK_ABORT 0x01   /* cancel the parent's pending work first, then shrink */

/* Flags for ncclCommRevoke; only the default exists and it has to be passed. */
#define NCCL_REVOKE_DEFAULT 0x00

/* ---- Communicator configuration --------------------------------------------------------------- */

/*
 * Options for ncclCommInitRankConfig, ncclCommSplit, ncclCommShrink and ncclCommInitRankScalable.
 * Always start from NCCL_CONFIG_INITIALIZER and then set the fields you care about; the first three
 * fields identify the struct version and must not be edited. mixccl honours blocking, netName,
 * commName and splitShare/shrinkShare; the fields that tune device kernels are accepted and
 * ignored by ranks that have no device backend.
 */
typedef struct ncclConfig_v22800 {
  size_t size;             /* sizeof(ncclConfig_t) of the caller's header */
  unsigned int magic;      /* set by the initializer, marks an initialized struct */
  unsigned int version;    /* NCCL_VERSION of the caller's header */
  int blocking;            /* 0: init and collectives may return ncclInProgress */
  int cgaClusterSize;      /* device kernel tuning */
  int minCTAs;             /* device kernel tuning */
  int maxCTAs;             /* device kernel tuning */
  const char* netName;     /* pick the network transport by name */
  int splitShare;          /* let a child of ncclCommSplit share the parent's resources */
  int trafficClass;        /* network traffic class */
  const char* commName;    /* a label shown in logs */
  int collnetEnable;       /* in-network reduction */
  int CTAPolicy;           /* one of NCCL_CTA_POLICY_* */
  int shrinkShare;         /* let a child of ncclCommShrink share the parent's resources */
  int nvlsCTAs;            /* device kernel tuning */
  int nChannelsPerNetPeer; /* parallel network channels per peer */
  int nvlinkCentricSched;  /* device scheduling hint */
} ncclConfig_t;

/* Use as `ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;` before setting any field. */
#define NCCL_CONFIG_INITIALIZER                                                                                \
  {                                                                                                            \
    sizeof(ncclConfig_t), 0xcafebeef, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), NCCL_CONFIG_UNDEF_INT, \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR,            \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT,            \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,            \
        NCCL_CONFIG_UNDEF_INT                                                                                  \
  }

/* Output of ncclGroupSimulateEnd: the estimated time of the group, in microseconds. */
typedef struct ncclSimInfo_v22200 {
  size_t size;          /* set by the initializer */
  unsigned int magic;   /* set by the initializer */
  unsigned int version; /* set by the initializer */
  float estimatedTime;  /* filled in by ncclGroupSimulateEnd */
} ncclSimInfo_t;

/* Use as `ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;`. */
#define NCCL_SIM_INFO_INITIALIZER \
  { sizeof(ncclSimInfo_t), 0x74685283, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), NCCL_UNDEF_FLOAT }

/* ---- Memory ----------------------------------------------------------------------------------- */

/* Allocates `size` bytes suited to zero-copy use by the library (device memory on a device rank,
 * page-aligned host memory otherwise); the block may be larger than asked. Free with ncclMemFree. */
ncclResult_t ncclMemAlloc(void** ptr, size_t size);
ncclResult_t pncclMemAlloc(void** ptr, size_t size);

/* Releases a block from ncclMemAlloc. */
ncclResult_t ncclMemFree(void* ptr);
ncclResult_t pncclMemFree(void* ptr);

/* ---- Library and communicator life cycle ------------------------------------------------------ */

/* Stores the library's NCCL_VERSION_CODE (the ABI it implements) in *version. */
ncclResult_t ncclGetVersion(int* version);
ncclResult_t pncclGetVersion(int* version);

/* Creates a new rendezvous token. Call it on one rank, then give the same bytes to every rank. */
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId);

/* Like ncclCommInitRank, with options (config may be NULL for defaults). With config->blocking == 0
 * it may return ncclInProgress; poll ncclCommGetAsyncError until it reports ncclSuccess. */
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config);
ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config);

/* Joins rank `rank` (0 <= rank < nranks) to the communicator named by commId. Every rank must make
 * this call, each from its own thread or process, or all of them inside one ncclGroupStart/End;
 * the call returns once all ranks have met. A device rank binds to the current device. */
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);

/* Creates all `ndev` ranks of a communicator inside this process, writing them to comm[0..ndev-1].
 * devlist names the device of each rank (NULL: devices 0..ndev-1; a rank without device uses host
 * memory). */
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
ncclResult_t pncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);

/* Completes all operations issued on comm and releases what the ranks share; afterwards
 * ncclCommDestroy only frees local state. May return ncclInProgress on a non-blocking comm. */
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t pncclCommFinalize(ncclComm_t comm);

/* Frees the local state of comm. The handle is invalid afterwards. */
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t pncclCommDestroy(ncclComm_t comm);

/* Cancels whatever comm still has in flight and frees it; does not wait for other ranks. */
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t pncclCommAbort(ncclComm_t comm);

/* Stops every operation in flight on comm without freeing it, so that it can then be destroyed,
 * split or shrunk. While revoked, resource sharing with children is off and ncclCommFinalize is
 * not allowed. revokeFlags must be NCCL_REVOKE_DEFAULT. */
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);
ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags);

/* Collective over comm: ranks passing the same color form a new communicator, ordered by key (ties
 * by old rank). NCCL_SPLIT_NOCOLOR yields *newcomm == NULL. config NULL: inherit comm's options. */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config);
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config);

/* Builds a communicator of the ranks of comm not listed in excludeRanksList, renumbered densely in
 * their old order. config NULL: inherit comm's options. shrinkFlags: one of NCCL_SHRINK_*. */
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                            ncclConfig_t* config, int shrinkFlags);
ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                             ncclConfig_t* config, int shrinkFlags);

/* Like ncclCommInitRankConfig, but rendezvous through nId tokens to spread the start-up load. Every
 * rank must pass the same tokens in the same order. */
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                      ncclConfig_t* config);
ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                       ncclConfig_t* config);

/* ---- Errors and diagnostics ------------------------------------------------------------------- */

/* A fixed description of a result code. */
const char* ncclGetErrorString(ncclResult_t result);
const char* pncclGetErrorString(ncclResult_t result);

/* The message recorded by the last failing call on this thread (comm may be NULL). */
const char* ncclGetLastError(ncclComm_t comm);
const char* pncclGetLastError(ncclComm_t comm);

/* Re-reads the logging variables (NCCL_DEBUG, NCCL_DEBUG_SUBSYS, NCCL_DEBUG_FILE). Kept for
 * programs that call it; not part of the supported API. */
MIXCCL_DEPRECATED_("ncclResetDebugInit is outside the supported API and may go away")
void ncclResetDebugInit(void);
MIXCCL_DEPRECATED_("pncclResetDebugInit is outside the supported API and may go away")
void pncclResetDebugInit(void);

/* Stores in *asyncError the first error a background activity of comm met, or ncclInProgress while
 * a non-blocking operation is still under way, or ncclSuccess. */
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);

/* Number of ranks in comm. */
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t pncclCommCount(const ncclComm_t comm, int* count);

/* The device index comm is bound to (-1 for a host-memory rank). */
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device);

/* This rank's number within comm. */
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank);

/* ---- Buffer registration ---------------------------------------------------------------------- */

/* Registers [buff, buff+size) with comm so transports can use it without staging copies; *handle
 * is passed to ncclCommDeregister. A no-op where no transport needs it. */
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);

/* Undoes ncclCommRegister. */
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle);
ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle);

/* Collective over comm: registers a window of `size` bytes at buff on every rank (winFlags: one
 * of NCCL_WIN_*). */
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags);
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags);

/* Undoes ncclCommWindowRegister. */
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);

/* ---- Reduction operators and element types ---------------------------------------------------- */

/* Helper enum, only used to learn how wide the compiler makes a small enum; that width caps
 * ncclMaxRedOp so that adding it did not change sizeof(ncclRedOp_t). */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;

typedef enum MIXCCL_ENUM_INT_ {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4, /* sum divided by the number of ranks */
  /* Count of the predefined operators; operators made by ncclRedOpCreatePreMulSum start here. */
  ncclNumOps = 5,
  /* Upper bound of every operator value: the largest positive value of an enum that size. */
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

/* Element types. The second name of a pair is an older spelling of the same value. */
typedef enum MIXCCL_ENUM_INT_ {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

/* Where the scalar given to ncclRedOpCreatePreMulSum lives, and when it is read. */
typedef enum MIXCCL_ENUM_INT_ {
  ncclScalarDevice = 0,       /* in device memory; read while each collective runs */
  ncclScalarHostImmediate = 1 /* in host memory; read once, before the create call returns */
} ncclScalarResidence_t;

/* Makes an operator that multiplies each input element by *scalar (of type datatype) and then sums
 * across ranks. It may only be used on comm with that datatype. Stores the new operator in *op. */
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm);

/* Releases an operator from ncclRedOpCreatePreMulSum on the same comm; allowed as soon as the last
 * call that used it has returned. */
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

/* ---- Collectives ------------------------------------------------------------------------------ */

/*
 * Every rank of comm makes the matching call, with the same count, datatype, op and root. Calls on
 * one communicator are matched in issue order. A thread that drives several ranks must wrap their
 * calls in ncclGroupStart/ncclGroupEnd. Counts are in elements, not bytes. Device buffers: the
 * operation is queued on `stream`. Host buffers: it has completed when the call (or the enclosing
 * ncclGroupEnd) returns, and `stream` may be NULL.
 */

/* Combines count elements of every rank's sendbuff with op; the result lands in recvbuff of rank
 * `root` only (other ranks may pass recvbuff NULL). sendbuff == recvbuff works in place. */
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                         int root, ncclComm_t comm, cudaStream_t stream);

/* Older in-place form of ncclBroadcast: buff is both source (on root) and destination. */
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream);
ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                        cudaStream_t stream);

/* Copies count elements from sendbuff of rank `root` to recvbuff of every rank. */
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                            ncclComm_t comm, cudaStream_t stream);

/* Combines count elements of every rank's sendbuff with op and leaves the result in recvbuff of
 * every rank. sendbuff == recvbuff works in place. */
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                            ncclComm_t comm, cudaStream_t stream);

/* sendbuff holds nranks*recvcount elements; they are combined with op across ranks and rank r
 * receives block r (recvcount elements). In place when recvbuff == sendbuff + r*recvcount. */
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                                ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);

/* Every rank contributes sendcount elements; recvbuff (nranks*sendcount elements) gets rank r's
 * block at element offset r*sendcount. In place when sendbuff == recvbuff + r*sendcount. */
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                            ncclComm_t comm, cudaStream_t stream);

/* Block j (count elements at sendbuff + j*count) goes to rank j; the block from rank i lands at
 * recvbuff + i*count. */
ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                          cudaStream_t stream);
ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                           cudaStream_t stream);

/* Each rank sends count elements to `root`, which stores rank i's block at recvbuff + i*count;
 * recvbuff is ignored elsewhere. In place when sendbuff == recvbuff + root*count. */
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream);

/* `root` sends block i (count elements at sendbuff + i*count) to rank i, which stores it in
 * recvbuff; sendbuff is ignored elsewhere. In place when recvbuff == sendbuff + root*count. */
ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                          ncclComm_t comm, cudaStream_t stream);

/* ---- Point to point --------------------------------------------------------------------------- */

/* Sends count elements to rank `peer`, which must post a ncclRecv for this rank with the same count
 * and datatype. Several sends and receives that depend on each other (an exchange) must be issued
 * inside one ncclGroupStart/ncclGroupEnd, or they can deadlock. */
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream);

/* Receives count elements from rank `peer` into recvbuff; the counterpart of ncclSend. */
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream);

/* ---- Groups ----------------------------------------------------------------------------------- */

/*
 * Calls made between ncclGroupStart and the matching ncclGroupEnd are collected and started
 * together at ncclGroupEnd. Use a group to drive several ranks from one thread, to create several
 * communicators at once, or to issue send/receive pairs that must run concurrently. Groups nest;
 * only the outermost ncclGroupEnd starts the work. Device buffers: ncclGroupEnd returns once the
 * work is queued on its streams. Host buffers: once it has completed.
 */
ncclResult_t ncclGroupStart(void);
ncclResult_t pncclGroupStart(void);

ncclResult_t ncclGroupEnd(void);
ncclResult_t pncclGroupEnd(void);

/* Closes the group like ncclGroupEnd but runs nothing: it only estimates the group's duration and
 * stores it in simInfo->estimatedTime (simInfo from NCCL_SIM_INFO_INITIALIZER). */
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo);
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NCCL_H_ */
