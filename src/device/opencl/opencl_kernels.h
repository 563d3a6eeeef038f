// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// The embedded OpenCL C program of the backend (opencl_kernels.cc says how it mirrors the host
// kernels bit for bit).
//
// Kernel signatures (all operands are a global pointer plus a byte offset):
//   reduce_<dtype>_<op>_<flags>(dst, dOff, a, aOff, b, bOff, ulong n, int op, int flags, ulong scalarBits,
//                               ulong divisor, ulong divBits, dst2, d2Off, int dual)
//     op (0 sum, 1 prod, 2 max, 3 min) and flags (0..7: 1 = a present, 2 = pre(), 4 = post()) are
//     part of the name, fixed at compile time; the arguments repeat them unread;
//     every kernel is launched with exactly n work-items (global id = element index; no range check);
//     scalarBits: the ReduceSpec scalar's 8 bytes, little-endian; divisor: the integer divisor;
//     divBits: the divisor converted to the arithmetic type (float or double bits);
//     dual != 0: the result is stored at dst2 + d2Off as well (a run-time flag: it only decides
//     whether a second store happens, never what is computed).
//   copy_bytes(dst, dOff, src, sOff, ulong n)

#include <cstddef>

#include "common/types.h"

namespace mixccl::ocl {

extern const char* const kKernelSource;
// Indexed by DataType; the kernel name is this + "_" + op + "_" + flags.
extern const char* const kReduceKernelNames[kNumDataTypes];
constexpr int kNumReduceOps = 4;
constexpr int kNumReduceVariants = 8;
extern const char* const kCopyKernelName;

// Argument indexes of the reduce kernels.
enum ReduceArg : unsigned {
  kArgDst = 0,
  kArgDstOff,
  kArgA,
  kArgAOff,
  kArgB,
  kArgBOff,
  kArgCount,
  kArgOp,
  kArgFlags,
  kArgScalar,
  kArgDivisor,
  kArgDivBits,
  kArgDst2,
  kArgDst2Off,
  kArgDual,
};

// How a kernel of n work-items (one per element, no range check) is launched: in parts, each
// with a fixed work-group size, its first item passed to the kernel as operand offsets (never as
// a global offset).
//  - Work-group sizes: POCL compiles a work-group function for every work-group size it meets,
//    20-50 ms each (more for the reduce kernels) the first time on a machine, and left to choose
//    it picks one per global size: every new message size stalled its first collective and every
//    test process that met one. Fixed sizes leave at most three per kernel: 256 (a part of a
//    multiple of 256; as fast as POCL's own choice at 128K items), 64 (other parts of a multiple
//    of 64) and 1 (the rest, under 64 items).
//  - Widths: a part covers at most kMaxLaunchBytes of each operand (launchItems(elemBytes)
//    items), and a global offset is never used, so that the widest launch of each kernel and
//    work-group size is known in advance: kernel_launch.h says why POCL 3 needs it.
constexpr size_t kMaxLaunchBytes = size_t{8} << 20;
// Items in a full part of a kernel whose operands have elemBytes (1, 2, 4 or 8) per item.
constexpr size_t launchItems(size_t elemBytes) { return kMaxLaunchBytes / elemBytes; }
struct LaunchPart {
  size_t first = 0;   // index of the part's first item
  size_t global = 0;  // items in the part
  size_t local = 0;   // work-group size
};
// The part that starts at item `done` of n (done < n), for full parts of `full` items (a
// multiple of 256).
LaunchPart nextLaunch(size_t n, size_t done, size_t full);
// The widest part nextLaunch ever makes with work-group size `local` (1, 64 or 256).
size_t widestLaunch(size_t local, size_t full);

}  // namespace mixccl::ocl
