// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Command-line flags of the perf tools: nccl-tests' letters, meanings and defaults where they make
// sense on host memory (see perf/README.md for the list and the differences).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "perf/common/collective.h"
#include "perf/common/datatypes.h"
#include "perf/common/memory.h"
#include "perf/common/size.h"

namespace mixccl::perf {

enum class AvgMode { kRank0 = 0, kAverage = 1, kMin = 2, kMax = 3 };

struct Options {
  int nThreads = 1;  // -t: ranks per process, one thread each
  int nGpus = 1;     // -g: must be 1 on host memory
  size_t minBytes = 32u << 20;
  size_t maxBytes = 32u << 20;
  size_t stepBytes = 1u << 20;
  size_t stepFactor = 1;
  int iters = 20;
  int warmupIters = 1;
  int aggIters = 1;
  bool check = true;
  std::vector<TypeInfo> types;  // from -d
  std::vector<OpInfo> ops;      // from -o
  std::vector<int> roots;       // from -r (one root), unless allRoots: every rank, known once ranks are counted
  bool allRoots = false;
  AvgMode avg = AvgMode::kAverage;
  int blocking = 0;                                 // -z, nccl-tests' modes (perf/README.md)
  int cycles = 1;                                   // -N: 0 runs forever
  int timeoutSec = 0;                               // -T: 0 means none
  std::string jsonPath;                             // -J
  std::string memory = "host";                      // -m as given (a number there is aggIters)
  std::vector<MemKind> memPattern{MemKind::kHost};  // rank r uses memPattern[r % size]
  int graph = 0;
  int localRegister = 0;  // -R: 1 ncclCommRegister, 2 ncclCommWindowRegister on the buffers

  // Sizes of the rows, in bytes, in order.
  std::vector<size_t> sizes() const;
};

// Parses argv. On --help or a bad flag prints to stdout/stderr and returns the exit code to use.
std::optional<int> parseOptions(const CollDesc& desc, int argc, char** argv, Options* out);

}  // namespace mixccl::perf
