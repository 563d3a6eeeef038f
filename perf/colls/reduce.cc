// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// reduce_perf: the reduction of every rank's count elements lands on the root only (other ranks'
// outputs are not checked). Bus bandwidth equals algorithm bandwidth, as for broadcast.
#include "perf/common/collective.h"

namespace {

using namespace mixccl::perf;

const CollDesc kReduce = {
    .name = "reduce",
    .reduces = true,
    .rooted = true,
    .inPlaceChecked = true,
    .bwOfAllRanks = false,
    .busFactor = busFactorOne,
    .counts = wholeBuffer,
    .call =
        [](const CallArgs& a) { return ncclReduce(a.send, a.recv, a.count, a.type, a.op, a.root, a.comm, a.stream); },
    .source =
        [](int rank, int, int root, size_t, size_t j) {
          return rank == root ? Source{Source::kReduce, 0, j} : Source{};
        },
};

}  // namespace

int main(int argc, char** argv) { return runPerfTool(kReduce, argc, argv); }
