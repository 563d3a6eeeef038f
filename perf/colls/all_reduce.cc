// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// all_reduce_perf: every rank ends with the reduction of all ranks' count elements. A ring moves
// 2(n-1)/n of the data through each rank's link, hence the bus bandwidth factor.
#include "perf/common/collective.h"

namespace {

using namespace mixccl::perf;

const CollDesc kAllReduce = {
    .name = "all_reduce",
    .reduces = true,
    .rooted = false,
    .inPlaceChecked = true,
    .bwOfAllRanks = false,
    .busFactor = [](int n) { return 2.0 * (n - 1) / n; },
    .counts = wholeBuffer,
    .call = [](const CallArgs& a) { return ncclAllReduce(a.send, a.recv, a.count, a.type, a.op, a.comm, a.stream); },
    .source =
        [](int, int, int, size_t, size_t j) {
          return Source{Source::kReduce, 0, j};
        },
};

}  // namespace

int main(int argc, char** argv) { return runPerfTool(kAllReduce, argc, argv); }
