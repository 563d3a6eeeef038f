// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Configuration is one table (config.cc): every knob is declared once with its environment
// variable, type, default and documentation, read through a typed getter that caches the value
// on first use. Knobs set to a non-default value are logged once at INFO (subsystem ENV).
// NCCL's names are reused where the meaning matches; new knobs use the MIXCCL_ prefix.

#include <cstdint>
#include <string>

namespace mixccl::config {

enum class Knob : int {
  kDebug,         // NCCL_DEBUG
  kDebugSubsys,   // NCCL_DEBUG_SUBSYS
  kDebugFile,     // NCCL_DEBUG_FILE
  kCommId,        // NCCL_COMM_ID
  kSocketIfname,  // NCCL_SOCKET_IFNAME
  kSocketFamily,  // NCCL_SOCKET_FAMILY
  kShmDisable,    // NCCL_SHM_DISABLE
  kAlgo,          // NCCL_ALGO
  kProto,         // NCCL_PROTO
  kIbHca,         // NCCL_IB_HCA
  kIbDisable,     // NCCL_IB_DISABLE
  kIbGidIndex,    // NCCL_IB_GID_INDEX
  kNet,           // NCCL_NET (IB or Socket)
  kIbTimeout,     // NCCL_IB_TIMEOUT (RDMA retransmission timeout exponent)
  kIbZcopyMin,    // MIXCCL_IB_ZCOPY_MIN (smallest zero-copy RDMA message)
  kIbRegCache,    // MIXCCL_IB_REG_CACHE (bytes of user memory kept registered)
  kTimeout,       // MIXCCL_TIMEOUT (seconds)
  kChunkSize,     // MIXCCL_CHUNK_SIZE (bytes per message slot)
  kFifoDepth,     // MIXCCL_FIFO_DEPTH (slots per connection)
  kSpinCount,     // MIXCCL_SPIN_COUNT (polls before yielding the CPU)
  kQueueDepth,    // MIXCCL_QUEUE_DEPTH (batches a communicator queues on device streams)
  kHostId,        // MIXCCL_HOST_ID (overrides the host identity)
  kDumpOnSignal,  // MIXCCL_DUMP_ON_SIGNAL (SIGUSR1 logs hang reports)
  kCommSecret,    // MIXCCL_COMM_SECRET (authenticates NCCL_COMM_ID jobs)
  kNetTimeout,    // MIXCCL_NET_TIMEOUT (seconds a silent TCP peer counts as reachable)
  // MIXCCL_DEVICE_BACKEND (host, opencl, cuda or a plugin path)
  kDeviceBackend,
  kOpenclDevice,  // MIXCCL_OPENCL_DEVICE (platform:device of the OpenCL backend)
  kOpenclSvm,     // MIXCCL_OPENCL_SVM (coarse or fine: the SVM kind ncclMemAlloc returns)
  // MIXCCL_OPENCL_HOST_MEMORY (auto or staged: how kernels reach registered host memory)
  kOpenclHostMemory,
  kDeterministic,  // MIXCCL_DETERMINISTIC (reductions fold in rank order, bitwise reproducible)
  kCommBlocking,   // NCCL_COMM_BLOCKING (0 or 1 overrides ncclConfig_t.blocking)
  kCount_
};

int64_t getInt(Knob k);
bool getBool(Knob k);
const std::string& getString(Knob k);

// Environment variable name of a knob, for messages.
const char* name(Knob k);

// The value a knob has when its variable is unset, as the table declares it (a test checks that
// the documents users read state the same).
const char* defaultValue(Knob k);

// A string knob's value as the environment says it now, bypassing (and not changing) the cache:
// the default when unset or empty. For ncclResetDebugInit, whose contract is to re-read the
// logging variables after a program changed them; every other reader keeps the cached value.
std::string getStringFresh(Knob k);

// Forgets cached values so the next getter re-reads the environment. Tests only.
void resetForTesting();

// Logs, once per process, every knob whose value differs from its default.
void logNonDefaults();

}  // namespace mixccl::config
