// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// alltoall_perf: block j of rank i's input lands at block i of rank j's output. NCCL defines no
// in-place alltoall, so (as in nccl-tests) the in-place column is timed but not checked (N/A).
#include "perf/common/collective.h"

namespace {

using namespace mixccl::perf;

const CollDesc kAlltoAll = {
    .name = "alltoall",
    .reduces = false,
    .rooted = false,
    .inPlaceChecked = false,
    .bwOfAllRanks = true,
    .busFactor = busFactorBlocks,
    .counts =
        [](size_t count, size_t typeSize, int n, int) {
          const size_t per = blockCount(count, typeSize, n);
          return Counts{per * n, per * n, per, 0, 0};
        },
    .call = [](const CallArgs& a) { return ncclAlltoAll(a.send, a.recv, a.count, a.type, a.comm, a.stream); },
    .source =
        [](int rank, int, int, size_t param, size_t j) {
          return Source{Source::kMove, int(j / param), rank * param + j % param};
        },
};

}  // namespace

int main(int argc, char** argv) { return runPerfTool(kAlltoAll, argc, argv); }
