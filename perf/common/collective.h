// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// What one perf tool knows about its collective. The harness (harness.h) does everything else:
// flags, ranks, buffers, timing, checking and output. A tool is one CollDesc and a main() that
// hands it to runPerfTool().
//
// Terms, as nccl-tests uses them: for a row of `size` bytes and a type of `ts` bytes the tool starts
// from count = size / ts elements; the collective trims it to what it can split evenly and reports
// `paramCount`, the count argument of the NCCL call, in the "count" column, and the larger of its
// send and receive buffers in the "size" column.
#pragma once

#include <nccl.h>

#include <cstddef>

namespace mixccl::perf {

// Buffer shape of one rank for one row, in elements.
struct Counts {
  size_t send = 0;            // elements in this rank's send buffer
  size_t recv = 0;            // elements in this rank's receive buffer
  size_t param = 0;           // the count passed to the NCCL call
  size_t sendInPlaceOff = 0;  // in place: send buffer = shared buffer + this
  size_t recvInPlaceOff = 0;  // in place: receive buffer = shared buffer + this
};

// Arguments of one call of the collective on one rank.
struct CallArgs {
  const void* send;
  void* recv;
  size_t count;  // Counts::param
  ncclDataType_t type;
  ncclRedOp_t op;  // only for reductions
  int root;        // only for rooted collectives
  int rank;
  int nranks;
  ncclComm_t comm;
  cudaStream_t stream;  // NULL for host memory; a cl_command_queue for OpenCL ranks (-m)
};

// Where output element j of a rank comes from, for the checker.
struct Source {
  enum Kind { kNone, kMove, kReduce } kind = kNone;  // kNone: not checked (e.g. non-root of reduce)
  int rank = 0;                                      // kMove: the rank whose input it is
  size_t index = 0;  // kMove: element of that rank's input; kReduce: element reduced over all ranks
};

struct CollDesc {
  const char* name;     // "all_reduce": the JSON "collective" and the tool's name without "_perf"
  bool reduces;         // takes -o; the redop column shows the op, else "none"
  bool rooted;          // takes -r; the root column shows the root, else -1
  bool inPlaceChecked;  // false where NCCL defines no in-place form: that column's #wrong is N/A
  bool bwOfAllRanks;    // algbw counts count*nranks elements (gathers, scatters, alltoall), else count
  double (*busFactor)(int nranks);
  Counts (*counts)(size_t count, size_t typeSize, int nranks, int rank);
  ncclResult_t (*call)(const CallArgs& a);
  Source (*source)(int rank, int nranks, int root, size_t param, size_t j);
};

// The shapes and factors several collectives share (nccl-tests' busbw factors).
inline double busFactorOne(int) { return 1.0; }
inline double busFactorBlocks(int n) { return static_cast<double>(n - 1) / n; }  // each rank moves n-1 of n blocks
// One buffer of `count` elements on both sides (all-reduce, broadcast, reduce, send/recv).
inline Counts wholeBuffer(size_t count, size_t, int, int) { return Counts{count, count, count, 0, 0}; }
// One rank's block where the buffer is split in n: `count / n` elements rounded down to whole
// 16-byte units, as nccl-tests sizes it (for its GPU kernels' vector loads), so a row's size and
// count columns are nccl-tests' for any rank count, not only where n divides the size evenly.
inline size_t blockCount(size_t count, size_t typeSize, int n) {
  const size_t unit = typeSize < 16 ? 16 / typeSize : 1;  // elements per 16 bytes
  return count / n / unit * unit;
}
// Gathering: one block in, n blocks out; in place, the input is this rank's block.
inline Counts gatherBlocks(size_t count, size_t typeSize, int n, int rank) {
  const size_t per = blockCount(count, typeSize, n);
  return Counts{per, per * n, per, rank * per, 0};
}
// Scattering: n blocks in, one block out; in place, the output is this rank's block.
inline Counts scatterBlocks(size_t count, size_t typeSize, int n, int rank) {
  const size_t per = blockCount(count, typeSize, n);
  return Counts{per * n, per, per, 0, rank * per};
}

// Parses the flags, runs every row and prints nccl-tests' output. Returns the process exit code.
int runPerfTool(const CollDesc& desc, int argc, char** argv);

}  // namespace mixccl::perf
