// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// broadcast_perf: the root's count elements land on every rank. Each byte crosses a link once on
// the way to any one rank, so bus bandwidth equals algorithm bandwidth.
#include "perf/common/collective.h"

namespace {

using namespace mixccl::perf;

const CollDesc kBroadcast = {
    .name = "broadcast",
    .reduces = false,
    .rooted = true,
    .inPlaceChecked = true,
    .bwOfAllRanks = false,
    .busFactor = busFactorOne,
    .counts = wholeBuffer,
    .call = [](const CallArgs& a) { return ncclBroadcast(a.send, a.recv, a.count, a.type, a.root, a.comm, a.stream); },
    .source =
        [](int, int, int root, size_t, size_t j) {
          return Source{Source::kMove, root, j};
        },
};

}  // namespace

int main(int argc, char** argv) { return runPerfTool(kBroadcast, argc, argv); }
