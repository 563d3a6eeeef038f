// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// gather_perf: rank r's count elements land at block r of the root's output (only the root's
// output is checked). The root receives (n-1)/n of it over its link, hence the factor.
#include "perf/common/collective.h"

namespace {

using namespace mixccl::perf;

const CollDesc kGather = {
    .name = "gather",
    .reduces = false,
    .rooted = true,
    .inPlaceChecked = true,
    .bwOfAllRanks = true,
    .busFactor = busFactorBlocks,
    .counts = gatherBlocks,
    .call = [](const CallArgs& a) { return ncclGather(a.send, a.recv, a.count, a.type, a.root, a.comm, a.stream); },
    .source =
        [](int rank, int, int root, size_t param, size_t j) {
          return rank == root ? Source{Source::kMove, int(j / param), j % param} : Source{};
        },
};

}  // namespace

int main(int argc, char** argv) { return runPerfTool(kGather, argc, argv); }
