// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// all_gather_perf: rank r's count elements land at block r of every rank's output. Each rank
// receives the (n-1)/n of the output it does not hold, hence the factor; sizes are of the output.
#include "perf/common/collective.h"

namespace {

using namespace mixccl::perf;

const CollDesc kAllGather = {
    .name = "all_gather",
    .reduces = false,
    .rooted = false,
    .inPlaceChecked = true,
    .bwOfAllRanks = true,
    .busFactor = busFactorBlocks,
    .counts = gatherBlocks,
    .call = [](const CallArgs& a) { return ncclAllGather(a.send, a.recv, a.count, a.type, a.comm, a.stream); },
    .source =
        [](int, int, int, size_t param, size_t j) {
          return Source{Source::kMove, int(j / param), j % param};
        },
};

}  // namespace

int main(int argc, char** argv) { return runPerfTool(kAllGather, argc, argv); }
