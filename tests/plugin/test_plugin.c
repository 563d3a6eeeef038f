/* SPDX-License-Identifier: Apache-2.0 */
/* SPDX-FileCopyrightText: 2026 The mixccl authors */

/*
 * An out-of-tree device backend plugin for the tests: host memory, its own reduction loops for
 * float32 and int32 with sum/prod/max/min, and counters of every call that the tests read through
 * the exported mixcclTestPluginCount("reduce") (found with dlsym). It includes only the public plugin header, as a
 * vendor's plugin would, so it also proves that header is self-sufficient C99.
 *
 * Built several times from this file; each definition breaks one thing the loader must refuse:
 *   TEST_PLUGIN_NO_TABLE      exports no table symbol
 *   TEST_PLUGIN_NEWER_MAJOR   mixcclDeviceBackend_v1 declares version 2.0
 *   TEST_PLUGIN_ONLY_V2       exports only mixcclDeviceBackend_v2 (an ABI the loader does not know)
 *   TEST_PLUGIN_NULL_FN       the mandatory reduce pointer is NULL
 *   TEST_PLUGIN_SMALL_SIZE    size says the table ends before reduce
 * With MIXCCL_TEST_PLUGIN_FAIL_INIT=1 in the environment, init() fails with a message.
 *
 * Handles are real allocations with a magic word, so a handle mixed up or passed back after it
 * was released is caught (ncclInvalidArgument) instead of silently working.
 */

#define _POSIX_C_SOURCE 200112L /* posix_memalign */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mixccl/device_backend.h"

#define EXPORT __attribute__((visibility("default")))

/* Call counters; updated atomically because ranks run as threads of one process. */
typedef struct {
  uint64_t init, finalize, alloc, free, allocStaging, freeStaging, registerHost, unregisterHost;
  uint64_t openQueue, closeQueue, copy, reduce, reduceElements, record, markStart, query, releaseFence;
  uint64_t holdStream, releaseStream;
  uint64_t maxSources; /* the most sources one reduce() call got */
  int64_t liveHandles; /* queues, fences, gates and registrations not yet released */
  int64_t liveAllocs;  /* alloc + allocStaging minus the frees */
} TestPluginCounters;

static TestPluginCounters mixcclTestPluginCounters;

/* The counter called `name` (a field name above), or -1 for an unknown name. */
EXPORT int64_t mixcclTestPluginCount(const char* name) {
#define FIELD(f) \
  if (strcmp(name, #f) == 0) return (int64_t)__atomic_load_n(&mixcclTestPluginCounters.f, __ATOMIC_RELAXED)
  FIELD(init);
  FIELD(finalize);
  FIELD(alloc);
  FIELD(free);
  FIELD(allocStaging);
  FIELD(freeStaging);
  FIELD(registerHost);
  FIELD(unregisterHost);
  FIELD(openQueue);
  FIELD(closeQueue);
  FIELD(copy);
  FIELD(reduce);
  FIELD(reduceElements);
  FIELD(record);
  FIELD(markStart);
  FIELD(query);
  FIELD(releaseFence);
  FIELD(holdStream);
  FIELD(releaseStream);
  FIELD(maxSources);
  FIELD(liveHandles);
  FIELD(liveAllocs);
#undef FIELD
  return -1;
}

#define COUNT(field) __atomic_fetch_add(&mixcclTestPluginCounters.field, 1, __ATOMIC_RELAXED)

static __thread char lastError[256];

static ncclResult_t failWith(ncclResult_t code, const char* msg) {
  snprintf(lastError, sizeof(lastError), "testplugin: %s", msg);
  return code;
}

static const char* getLastError(void) { return lastError; }

/* ---- handles ---- */

enum { kQueueMagic = 0x51554555, kFenceMagic = 0x46454e43, kGateMagic = 0x47415445, kRegMagic = 0x52454749 };

typedef struct {
  uint32_t magic;
} Handle;

static void* newHandle(uint32_t magic) {
  Handle* h = (Handle*)malloc(sizeof(Handle));
  if (h == NULL) return NULL;
  h->magic = magic;
  __atomic_fetch_add(&mixcclTestPluginCounters.liveHandles, 1, __ATOMIC_RELAXED);
  return h;
}

static int isHandle(const void* p, uint32_t magic) { return p != NULL && ((const Handle*)p)->magic == magic; }

static void dropHandle(void* p) {
  ((Handle*)p)->magic = 0;
  free(p);
  __atomic_fetch_sub(&mixcclTestPluginCounters.liveHandles, 1, __ATOMIC_RELAXED);
}

/* A NULL queue means synchronous; anything else must be a queue this plugin opened. */
static int badQueue(const void* queue) { return queue != NULL && !isHandle(queue, kQueueMagic); }

/* ---- lifecycle and facts ---- */

static ncclResult_t pluginInit(uint32_t flags) {
  const char* fail = getenv("MIXCCL_TEST_PLUGIN_FAIL_INIT");
  if (flags != 0) return failWith(ncclInvalidArgument, "init: unknown flags");
  if (fail != NULL && strcmp(fail, "1") == 0) {
    return failWith(ncclSystemError, "init refused because MIXCCL_TEST_PLUGIN_FAIL_INIT=1");
  }
  COUNT(init);
  return ncclSuccess;
}

static ncclResult_t pluginFinalize(void) {
  COUNT(finalize);
  return ncclSuccess;
}

static ncclResult_t pluginGetCaps(mixcclDeviceCaps_v1_t* caps) {
  caps->dtypes = (1u << ncclInt32) | (1u << ncclFloat32);
  caps->ops = (1u << ncclSum) | (1u << ncclProd) | (1u << ncclMax) | (1u << ncclMin);
  caps->flags = 0; /* synchronous; no narrow floats */
  return ncclSuccess;
}

static mixcclMemKind_t pluginMemKind(const void* ptr) { return mixcclMemHost; }

static ncclResult_t pluginCheckStream(void* stream) {
  if (stream != NULL) return failWith(ncclInvalidArgument, "this backend has no streams; pass NULL");
  return ncclSuccess;
}

/* ---- memory ---- */

static ncclResult_t allocate(size_t bytes, void** ptr) {
  void* p = NULL;
  if (ptr == NULL) return failWith(ncclInvalidArgument, "alloc: ptr is NULL");
  if (posix_memalign(&p, 64, bytes) != 0) return failWith(ncclSystemError, "alloc: out of memory");
  *ptr = p;
  __atomic_fetch_add(&mixcclTestPluginCounters.liveAllocs, 1, __ATOMIC_RELAXED);
  return ncclSuccess;
}

static ncclResult_t release(void* ptr) {
  if (ptr == NULL) return failWith(ncclInvalidArgument, "free: ptr is NULL");
  free(ptr);
  __atomic_fetch_sub(&mixcclTestPluginCounters.liveAllocs, 1, __ATOMIC_RELAXED);
  return ncclSuccess;
}

static ncclResult_t pluginAlloc(size_t bytes, void** ptr) {
  COUNT(alloc);
  return allocate(bytes, ptr);
}
static ncclResult_t pluginFree(void* ptr) {
  COUNT(free);
  return release(ptr);
}
static ncclResult_t pluginAllocStaging(size_t bytes, void** ptr) {
  COUNT(allocStaging);
  return allocate(bytes, ptr);
}
static ncclResult_t pluginFreeStaging(void* ptr) {
  COUNT(freeStaging);
  return release(ptr);
}

static ncclResult_t pluginRegisterHost(void* ptr, size_t bytes, void** reg) {
  COUNT(registerHost);
  if (ptr == NULL && bytes > 0) return failWith(ncclInvalidArgument, "registerHost: ptr is NULL");
  *reg = newHandle(kRegMagic);
  return *reg != NULL ? ncclSuccess : failWith(ncclSystemError, "registerHost: out of memory");
}

static ncclResult_t pluginUnregisterHost(void* reg) {
  COUNT(unregisterHost);
  if (!isHandle(reg, kRegMagic)) return failWith(ncclInvalidArgument, "unregisterHost: not a registration");
  dropHandle(reg);
  return ncclSuccess;
}

/* ---- queues and work ---- */

static ncclResult_t pluginOpenQueue(void* userStream, void** queue) {
  COUNT(openQueue);
  if (userStream != NULL) return failWith(ncclInvalidArgument, "openQueue: this backend has no streams");
  *queue = newHandle(kQueueMagic);
  return *queue != NULL ? ncclSuccess : failWith(ncclSystemError, "openQueue: out of memory");
}

static ncclResult_t pluginCloseQueue(void* queue) {
  COUNT(closeQueue);
  if (!isHandle(queue, kQueueMagic)) return failWith(ncclInvalidArgument, "closeQueue: not a queue");
  dropHandle(queue);
  return ncclSuccess;
}

static ncclResult_t pluginCopy(void* dst, const void* src, size_t bytes, void* queue) {
  COUNT(copy);
  if (badQueue(queue)) return failWith(ncclInvalidArgument, "copy: not a queue");
  if (bytes > 0 && (dst == NULL || src == NULL)) return failWith(ncclInvalidArgument, "copy: NULL pointer");
  if (bytes > 0) memmove(dst, src, bytes);
  return ncclSuccess;
}

/* The canonical NaN every backend stores for a NaN result (PROTOCOL.md, "Arithmetic"). */
static float canonicalFloat(float v) {
  if (v == v) return v;
  const uint32_t bits = 0x7fc00000u;
  memcpy(&v, &bits, sizeof(v));
  return v;
}
static int32_t canonicalInt32(int32_t v) { return v; }

/* One loop per type: dst[i] = s[0][i] OP s[1][i] OP ... folded left to right; a result of
 * arithmetic (two sources or more) stores a NaN as the canonical one. */
#define REDUCE_LOOP(T, CANON, OPEXPR)       \
  do {                                      \
    T* d = (T*)dst;                         \
    for (size_t i = 0; i < count; ++i) {    \
      T acc = ((const T*)srcs[0])[i];       \
      for (int s = 1; s < nsrcs; ++s) {     \
        const T x = ((const T*)srcs[s])[i]; \
        acc = OPEXPR;                       \
      }                                     \
      d[i] = nsrcs > 1 ? CANON(acc) : acc;  \
    }                                       \
  } while (0)

#define REDUCE_TYPE(T, CANON)                                                 \
  switch (spec->op) {                                                         \
    case ncclSum:                                                             \
      REDUCE_LOOP(T, CANON, acc + x);                                         \
      break;                                                                  \
    case ncclProd:                                                            \
      REDUCE_LOOP(T, CANON, acc* x);                                          \
      break;                                                                  \
    case ncclMax:                                                             \
      REDUCE_LOOP(T, CANON, x > acc ? x : acc);                               \
      break;                                                                  \
    case ncclMin:                                                             \
      REDUCE_LOOP(T, CANON, x < acc ? x : acc);                               \
      break;                                                                  \
    default:                                                                  \
      return failWith(ncclInvalidArgument, "reduce: operator not supported"); \
  }

/* unused in the TEST_PLUGIN_NULL_FN variant */
__attribute__((unused)) static ncclResult_t pluginReduce(void* dst, const void* const* srcs, int nsrcs, size_t count,
                                                         const mixcclReduceSpec_v1_t* spec, void* queue) {
  COUNT(reduce);
  __atomic_fetch_add(&mixcclTestPluginCounters.reduceElements, count, __ATOMIC_RELAXED);
  uint64_t seen = __atomic_load_n(&mixcclTestPluginCounters.maxSources, __ATOMIC_RELAXED);
  while ((uint64_t)nsrcs > seen &&
         !__atomic_compare_exchange_n(&mixcclTestPluginCounters.maxSources, &seen, (uint64_t)nsrcs, 0, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED)) {
  }
  if (badQueue(queue)) return failWith(ncclInvalidArgument, "reduce: not a queue");
  if (nsrcs < 1 || nsrcs > MIXCCL_DEVICE_BACKEND_V1_MAX_SOURCES || srcs == NULL || spec == NULL) {
    return failWith(ncclInvalidArgument, "reduce: bad source list");
  }
  for (int s = 0; s < nsrcs; ++s) {
    if (srcs[s] == NULL && count > 0) return failWith(ncclInvalidArgument, "reduce: NULL source");
  }
  if ((spec->preMul && spec->applyPre) || (spec->divisor != 0 && spec->applyPost)) {
    return failWith(ncclInvalidArgument, "reduce: PreMulSum and Avg are not supported");
  }
  if (count == 0) return ncclSuccess;
  if (spec->dtype == ncclFloat32) {
    REDUCE_TYPE(float, canonicalFloat);
  } else if (spec->dtype == ncclInt32) {
    REDUCE_TYPE(int32_t, canonicalInt32);
  } else {
    return failWith(ncclInvalidArgument, "reduce: data type not supported");
  }
  return ncclSuccess;
}

/* ---- fences and gates (work is synchronous, so every fence is signalled at once) ---- */

static ncclResult_t newFence(void** fence) {
  *fence = newHandle(kFenceMagic);
  return *fence != NULL ? ncclSuccess : failWith(ncclSystemError, "out of memory for a fence");
}

static ncclResult_t pluginRecord(void* queue, void** fence) {
  COUNT(record);
  if (badQueue(queue)) return failWith(ncclInvalidArgument, "record: not a queue");
  return newFence(fence);
}

static ncclResult_t pluginMarkStart(void* stream, void** fence) {
  COUNT(markStart);
  if (stream != NULL) return failWith(ncclInvalidArgument, "markStart: this backend has no streams");
  return newFence(fence);
}

static ncclResult_t pluginQuery(void* fence) {
  COUNT(query);
  if (!isHandle(fence, kFenceMagic)) return failWith(ncclInvalidArgument, "query: not a fence");
  return ncclSuccess;
}

static void pluginReleaseFence(void* fence) {
  COUNT(releaseFence);
  if (isHandle(fence, kFenceMagic)) dropHandle(fence);
}

static ncclResult_t pluginHoldStream(void* stream, void** gate) {
  COUNT(holdStream);
  if (stream != NULL) return failWith(ncclInvalidArgument, "holdStream: this backend has no streams");
  *gate = newHandle(kGateMagic);
  return *gate != NULL ? ncclSuccess : failWith(ncclSystemError, "holdStream: out of memory");
}

static ncclResult_t pluginReleaseStream(void* gate) {
  COUNT(releaseStream);
  if (!isHandle(gate, kGateMagic)) return failWith(ncclInvalidArgument, "releaseStream: not a gate");
  dropHandle(gate);
  return ncclSuccess;
}

/* ---- the table ---- */

#if defined(TEST_PLUGIN_NEWER_MAJOR)
#define TABLE_VERSION MIXCCL_DEVICE_BACKEND_VERSION(2, 0)
#else
#define TABLE_VERSION MIXCCL_DEVICE_BACKEND_V1_VERSION
#endif

#if defined(TEST_PLUGIN_SMALL_SIZE)
#define TABLE_SIZE offsetof(mixcclDeviceBackend_v1_t, reduce)
#else
#define TABLE_SIZE sizeof(mixcclDeviceBackend_v1_t)
#endif

#if defined(TEST_PLUGIN_NULL_FN)
#define TABLE_REDUCE NULL
#else
#define TABLE_REDUCE pluginReduce
#endif

#if defined(TEST_PLUGIN_NO_TABLE)
#define TABLE_NAME mixcclDeviceBackendTable /* any name but the reserved one */
#elif defined(TEST_PLUGIN_ONLY_V2)
#define TABLE_NAME mixcclDeviceBackend_v2
#else
#define TABLE_NAME mixcclDeviceBackend_v1
#endif

EXPORT const mixcclDeviceBackend_v1_t TABLE_NAME = {
    TABLE_SIZE,         TABLE_VERSION,        0, /* wire id: the loader assigns the first plugin id */
    "testplugin",       "mixccl tests",       pluginInit,
    pluginFinalize,     pluginGetCaps,        NULL, /* deviceIndex: 0 */
    pluginMemKind,      pluginCheckStream,    pluginAlloc,
    pluginFree,         pluginAllocStaging,   pluginFreeStaging,
    pluginRegisterHost, pluginUnregisterHost, pluginOpenQueue,
    pluginCloseQueue,   pluginCopy,           TABLE_REDUCE,
    pluginRecord,       pluginMarkStart,      pluginQuery,
    pluginReleaseFence, pluginHoldStream,     pluginReleaseStream,
    getLastError,
};
