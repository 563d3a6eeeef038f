/* SPDX-License-Identifier: Apache-2.0 */
/* SPDX-FileCopyrightText: 2026 The mixccl authors */

/*
 * The device-backend plugin ABI: how a shared object outside the mixccl tree gives mixccl a
 * device backend (memory, copies, reductions and stream ordering for one vendor's devices).
 *
 * Loading. Setting MIXCCL_DEVICE_BACKEND to a path (anything containing '/') makes mixccl
 * dlopen() that file once per process and look up the newest table symbol it knows, then the
 * older ones: mixcclDeviceBackend_v1 today. The naming scheme mixcclDeviceBackend_vN is reserved
 * for every major version N; a plugin may export several tables so that older and newer mixccl
 * builds both load it. A plugin that only exports a table newer than the loader knows is refused
 * with a message naming both versions.
 *
 * Versioning. Every table starts with `size` (sizeof the struct the plugin filled in) and
 * `version` ((major << 16) | minor). A major version never changes once released: a change that
 * is not a pure addition at the end makes a new struct mixcclDeviceBackend_vN+1_t and a new
 * symbol, and this header keeps every older struct so plugins built against them still compile
 * and load. A minor version only appends fields; the loader reads no field beyond `size`.
 * The version in a table must have the major of its symbol.
 *
 * Numbering. Data types and reduction operators use ncclDataType_t / ncclRedOp_t values
 * (ncclInt8 = 0 ... ncclFloat8e5m2 = 11; ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3).
 * Results are ncclResult_t: ncclSuccess, an error, or ncclInProgress where a function says so.
 *
 * Threading. Every function may be called from any thread, also concurrently (one engine thread
 * per communicator and the API threads). mixccl serialises the calls about one queue, fence or
 * gate, never calls about different ones. A plugin holds no lock across calls and never waits on
 * anything but the device work it was asked to wait for.
 *
 * Handles. Queues, fences, gates and host registrations are `void*` the plugin hands out and
 * gets back; mixccl never dereferences them. NULL is a valid handle meaning "nothing to do":
 * a NULL queue means synchronous work, a NULL fence is signalled, a NULL gate or registration
 * holds nothing. mixccl never passes a NULL handle to closeQueue, query, releaseFence,
 * releaseStream or unregisterHost (it answers those itself), so a plugin may hand out NULL.
 *
 * Errors. A function that fails returns an ncclResult_t error (ncclInvalidArgument for a bad
 * value, ncclUnhandledCudaError for a failed device runtime call, ncclSystemError for a system
 * call, ncclInternalError for a bug) and, if the plugin provides getLastError, leaves a message
 * there for the calling thread; mixccl puts it into the message ncclGetLastError() shows.
 * No function may throw (C++ plugins catch at their edge) or abort the process.
 *
 * This header is C99 and C++, needs no device runtime header, and is all a plugin includes.
 */

#ifndef MIXCCL_DEVICE_BACKEND_H_
#define MIXCCL_DEVICE_BACKEND_H_

#include <stddef.h>
#include <stdint.h>

#include "../nccl.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MIXCCL_DEVICE_BACKEND_VERSION(major, minor) ((uint32_t)(((uint32_t)(major) << 16) | (uint32_t)(minor)))
#define MIXCCL_DEVICE_BACKEND_MAJOR(version) ((uint32_t)(version) >> 16)
#define MIXCCL_DEVICE_BACKEND_MINOR(version) ((uint32_t)(version)&0xffffu)

/* The newest version this header describes. */
#define MIXCCL_DEVICE_BACKEND_V1_VERSION MIXCCL_DEVICE_BACKEND_VERSION(1, 0)
#define MIXCCL_DEVICE_BACKEND_V1_SYMBOL "mixcclDeviceBackend_v1"

/* The most sources one reduce() call passes in v1. mixccl passes 1 or 2 today. */
#define MIXCCL_DEVICE_BACKEND_V1_MAX_SOURCES 8

/* Capability flags (mixcclDeviceCaps_v1_t.flags). */
#define MIXCCL_DEVICE_CAP_ASYNC 0x1u              /* work on a queue completes after the call returns */
#define MIXCCL_DEVICE_CAP_RNE_ROUNDING 0x2u       /* narrow floats round to nearest even */
#define MIXCCL_DEVICE_CAP_FP8_SATURATE 0x4u       /* fp8 results saturate to the largest finite value */
#define MIXCCL_DEVICE_CAP_HOST_MEMORY 0x8u        /* queued work may use host (malloc) user buffers directly */
#define MIXCCL_DEVICE_CAP_SHARES_HOST_CORES 0x10u /* device work runs on the host's CPU cores: waiters never spin */

/* Wire ids below this are mixccl's built-in backends (0 host, 1 opencl, 2 cuda). */
#define MIXCCL_DEVICE_BACKEND_FIRST_PLUGIN_WIRE_ID 0x100u

typedef enum {
  mixcclMemHost = 0,    /* the CPU may read and write it directly */
  mixcclMemDevice = 1,  /* this backend's device memory */
  mixcclMemUnknown = 2, /* neither (another device, context or process): mixccl refuses it */
} mixcclMemKind_t;

/* What the backend supports, announced to every peer at communicator init. */
typedef struct {
  uint32_t dtypes; /* bit (1u << ncclDataType_t) per data type reduce() supports */
  uint32_t ops;    /* bit (1u << ncclRedOp_t) per operator: ncclSum..ncclMin, ncclAvg, and bit 5 for
                      PreMulSum (the transforms preMul / divisor of mixcclReduceSpec_v1_t) */
  uint32_t flags;  /* MIXCCL_DEVICE_CAP_* */
} mixcclDeviceCaps_v1_t;

/*
 * One element-wise reduction (see reduce below). With n sources s[0..n-1]:
 *   dst[i] = post( s[0][i] OP s[1][i] OP ... OP pre(s[n-1][i]) )      folded left to right
 *   pre(x)  = x * scalar    when preMul && applyPre
 *   post(x) = x / divisor   when divisor != 0 && applyPost (integer division, toward zero)
 * The last source is the rank's own input, the others are data that already went through pre()
 * on the rank that sent it. With n == 1 and neither transform this is a copy.
 * Results must be bitwise what mixccl's host backend computes for the same call (docs/PROTOCOL.md,
 * "Arithmetic"), so that ranks of different vendors agree. That includes NaNs: a result of
 * arithmetic that is a NaN is stored as the type's canonical NaN (positive, quiet bit only:
 * 0x7fc00000, 0x7ff8000000000000, half 0x7e00, bfloat16 0x7fc0, e4m3 0x7f, e5m2 0x7e), not the
 * NaN the hardware made; a copy (n == 1, no transform) keeps the bits it was given. The arithmetic
 * check at init hashes NaN bits as they are.
 */
typedef struct {
  ncclDataType_t dtype;
  ncclRedOp_t op;    /* ncclSum, ncclProd, ncclMax or ncclMin only */
  int preMul;        /* nonzero: pre() multiplies by scalar */
  uint8_t scalar[8]; /* the multiplier, one element of dtype, little end first */
  uint64_t divisor;  /* integer average divisor; 0 = none */
  int applyPre;      /* nonzero: pre() applies on this call */
  int applyPost;     /* nonzero: post() applies on this call */
} mixcclReduceSpec_v1_t;

typedef struct mixcclDeviceBackend_v1 {
  /* sizeof(mixcclDeviceBackend_v1_t) as the plugin was compiled; at least that of v1.0. */
  size_t size;
  /* MIXCCL_DEVICE_BACKEND_V1_VERSION (major 1). */
  uint32_t version;
  /* The id peers see (PROTOCOL.md, "Peer info"); >= MIXCCL_DEVICE_BACKEND_FIRST_PLUGIN_WIRE_ID,
   * or 0 to take that value. */
  uint32_t wireId;
  /* Short name ("mybackend") and vendor for logs and messages; static strings, non-empty. */
  const char* name;
  const char* vendor;

  /* Called once after loading, before any other function; `flags` is 0 (reserved). An error
   * makes the load fail and the library is closed again without finalize(). The loader may load
   * a plugin more than once in a process (each load calls init and, when dropped, finalize), so a
   * plugin keeps a count rather than assuming one init. Blocking. Mandatory. */
  ncclResult_t (*init)(uint32_t flags);
  /* Called once when mixccl drops the loaded plugin, after every handle was released. Mandatory. */
  ncclResult_t (*finalize)(void);
  /* Fills *caps. Called after init; the answer must not change afterwards. Mandatory. */
  ncclResult_t (*getCaps)(mixcclDeviceCaps_v1_t* caps);
  /* The device index this process uses (ncclCommCuDevice). Optional: NULL means 0. */
  ncclResult_t (*deviceIndex)(int* index);

  /* Which memory `ptr` points into. Never fails, never blocks. Mandatory. */
  mixcclMemKind_t (*memKind)(const void* ptr);
  /* ncclSuccess when work can be ordered on `stream` (NULL always can); ncclInvalidArgument with
   * a message otherwise (not a stream of this vendor, another context). Mandatory. */
  ncclResult_t (*checkStream)(void* stream);

  /* Memory for ncclMemAlloc (device memory where the backend has a device). *ptr is written only
   * on success; bytes > 0. free() gets only pointers alloc() returned. Mandatory. */
  ncclResult_t (*alloc)(size_t bytes, void** ptr);
  ncclResult_t (*free)(void* ptr);
  /* Host memory the device can reach (pinned where the vendor needs it). Mandatory. */
  ncclResult_t (*allocStaging)(size_t bytes, void** ptr);
  ncclResult_t (*freeStaging)(void* ptr);
  /* Makes host memory a transport owns usable by copy()/reduce() on this backend's queues until
   * unregisterHost(*reg); the memory outlives the registration. Optional, both or neither: NULL
   * means host memory needs no registration. */
  ncclResult_t (*registerHost)(void* ptr, size_t bytes, void** reg);
  ncclResult_t (*unregisterHost)(void* reg);

  /* A queue for mixccl's device work next to `userStream` (same device and context); *queue may
   * be NULL (synchronous work). closeQueue() comes after all work on it completed. Mandatory. */
  ncclResult_t (*openQueue)(void* userStream, void** queue);
  ncclResult_t (*closeQueue)(void* queue);

  /* Copies `bytes` bytes, ordered after earlier work on `queue`; synchronous (complete on
   * return) when queue is NULL. Pointers are host memory, this backend's device memory or
   * registered host memory; the ranges do not overlap. Mandatory. */
  ncclResult_t (*copy)(void* dst, const void* src, size_t bytes, void* queue);
  /* `count` elements of spec->dtype from nsrcs sources (1..MIXCCL_DEVICE_BACKEND_V1_MAX_SOURCES)
   * into dst, as mixcclReduceSpec_v1_t says; ordered / synchronous as copy(). dst may equal a
   * source. `srcs` and `spec` are read during the call only. ncclInvalidArgument for a dtype or
   * op outside getCaps(). Mandatory. */
  ncclResult_t (*reduce)(void* dst, const void* const* srcs, int nsrcs, size_t count, const mixcclReduceSpec_v1_t* spec,
                         void* queue);

  /* A fence after everything enqueued on `queue` so far; NULL queue: *fence may be NULL
   * (signalled). Mandatory. */
  ncclResult_t (*record)(void* queue, void** fence);
  /* A fence that signals once the work the user enqueued on `stream` before this call is
   * complete. Mandatory. */
  ncclResult_t (*markStart)(void* stream, void** fence);
  /* ncclSuccess when signalled, ncclInProgress when not yet, an error when the work behind it
   * failed. Never blocks. Mandatory. */
  ncclResult_t (*query)(void* fence);
  void (*releaseFence)(void* fence);

  /* Work the user enqueues on `stream` after this call waits until releaseStream(gate). mixccl
   * releases every gate, also when a collective fails or is aborted. Mandatory. */
  ncclResult_t (*holdStream)(void* stream, void** gate);
  ncclResult_t (*releaseStream)(void* gate);

  /* The message of the last failed call on the calling thread, or NULL/"" when none. The string
   * stays valid until the thread's next call into the plugin. Optional. */
  const char* (*getLastError)(void);
} mixcclDeviceBackend_v1_t;

/* What a plugin defines (with default visibility):
 *   const mixcclDeviceBackend_v1_t mixcclDeviceBackend_v1 = { sizeof(mixcclDeviceBackend_v1_t),
 *       MIXCCL_DEVICE_BACKEND_V1_VERSION, 0, "name", "vendor", myInit, ... }; */

#ifdef __cplusplus
}
#endif

#endif /* MIXCCL_DEVICE_BACKEND_H_ */
