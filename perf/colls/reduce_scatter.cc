// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// reduce_scatter_perf: block r of the reduction of every rank's input lands on rank r. Sizes are
// of the input (n blocks); each rank's link carries (n-1)/n of it, hence the factor.
#include "perf/common/collective.h"

namespace {

using namespace mixccl::perf;

const CollDesc kReduceScatter = {
    .name = "reduce_scatter",
    .reduces = true,
    .rooted = false,
    .inPlaceChecked = true,
    .bwOfAllRanks = true,
    .busFactor = busFactorBlocks,
    .counts = scatterBlocks,
    .call =
        [](const CallArgs& a) { return ncclReduceScatter(a.send, a.recv, a.count, a.type, a.op, a.comm, a.stream); },
    .source =
        [](int rank, int, int, size_t param, size_t j) {
          return Source{Source::kReduce, 0, rank * param + j};
        },
};

}  // namespace

int main(int argc, char** argv) { return runPerfTool(kReduceScatter, argc, argv); }
