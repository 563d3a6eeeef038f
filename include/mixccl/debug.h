/* SPDX-License-Identifier: Apache-2.0 */
/* SPDX-FileCopyrightText: 2026 The mixccl authors */

/*
 * mixccl extensions for diagnosing hangs (docs/DEBUGGING.md). Not part of NCCL's API: programs
 * that want to run on NVIDIA's library as well should look the symbol up with dlsym().
 *
 * Exported from libmixccl.so / libnccl.so.2 under the mixccl prefix. C99 and C++.
 */

#ifndef MIXCCL_DEBUG_H_
#define MIXCCL_DEBUG_H_

#include <stddef.h>

#include "../nccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this extension header; bumped when a declaration below changes. */
#define MIXCCL_DEBUG_API_VERSION 1

/*
 * This rank's hang report: the communicator's id, rank and host; the last collective sequence
 * number it issued and completed; if a call on it has made no progress for a while (100 ms), the
 * operation, step and peer it waits for and the last sequence number seen from each peer it still
 * needs. The same report is logged when a wait reaches MIXCCL_TIMEOUT and, with
 * MIXCCL_DUMP_ON_SIGNAL=1, on SIGUSR1.
 *
 * buf == NULL and needed == NULL: the report is logged at WARN (NCCL_DEBUG_FILE or stdout, whatever
 * NCCL_DEBUG says). buf == NULL and needed != NULL: a size query, as snprintf(NULL, 0, ...); only
 * *needed is written. Otherwise the report is copied into buf, truncated to bufSize - 1 bytes and
 * NUL-terminated; *needed (if not NULL) receives the full length plus one, so a caller can retry
 * with a larger buffer.
 *
 * Safe to call from any thread, also while another thread is blocked in a call on comm, which is
 * the point. Returns ncclInvalidArgument for a bad handle or bufSize 0 with a buffer, and
 * ncclInvalidUsage for a communicator whose initialisation has not completed.
 */
ncclResult_t mixcclCommHangReport(ncclComm_t comm, char* buf, size_t bufSize, size_t* needed);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MIXCCL_DEBUG_H_ */
