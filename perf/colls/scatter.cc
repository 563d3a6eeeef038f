// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// scatter_perf: block r of the root's input lands on rank r. The root sends (n-1)/n of its input
// over its link, hence the factor; sizes are of the root's input.
#include "perf/common/collective.h"

namespace {

using namespace mixccl::perf;

const CollDesc kScatter = {
    .name = "scatter",
    .reduces = false,
    .rooted = true,
    .inPlaceChecked = true,
    .bwOfAllRanks = true,
    .busFactor = busFactorBlocks,
    .counts = scatterBlocks,
    .call = [](const CallArgs& a) { return ncclScatter(a.send, a.recv, a.count, a.type, a.root, a.comm, a.stream); },
    .source =
        [](int rank, int, int root, size_t param, size_t j) {
          return Source{Source::kMove, root, rank * param + j};
        },
};

}  // namespace

int main(int argc, char** argv) { return runPerfTool(kScatter, argc, argv); }
