// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// sendrecv_perf: every rank sends count elements to rank+1 and receives from rank-1 (a ring
// shift, in one group). In place has no defined result, so that column is not checked (N/A).
#include "perf/common/collective.h"

namespace {

using namespace mixccl::perf;

ncclResult_t shift(const CallArgs& a) {
  const int to = (a.rank + 1) % a.nranks;
  const int from = (a.rank - 1 + a.nranks) % a.nranks;
  ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess) return r;
  r = ncclSend(a.send, a.count, a.type, to, a.comm, a.stream);
  const ncclResult_t r2 = ncclRecv(a.recv, a.count, a.type, from, a.comm, a.stream);
  const ncclResult_t r3 = ncclGroupEnd();
  return r != ncclSuccess ? r : r2 != ncclSuccess ? r2 : r3;
}

const CollDesc kSendRecv = {
    .name = "sendrecv",
    .reduces = false,
    .rooted = false,
    .inPlaceChecked = false,
    .bwOfAllRanks = false,
    .busFactor = busFactorOne,
    .counts = wholeBuffer,
    .call = shift,
    .source =
        [](int rank, int n, int, size_t, size_t j) {
          return Source{Source::kMove, (rank - 1 + n) % n, j};
        },
};

}  // namespace

int main(int argc, char** argv) { return runPerfTool(kSendRecv, argc, argv); }
