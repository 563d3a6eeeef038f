// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// CPU reduction kernels behind HostBackend::reduce(). They compute ReduceSpec's formula
//   dst[i] = post( a[i] OP pre(b[i]) )            (a == nullptr: dst[i] = post( pre(b[i]) ))
// for all 12 NCCL data types and OP in {sum, prod, max, min}.
//
// Semantics (chosen to match what NCCL's GPU kernels produce):
//  - Integers wrap on overflow (two's complement; computed in unsigned arithmetic, so no UB).
//    post() divides with C semantics, i.e. signed values truncate toward zero.
//  - Floating types: every step (pre, OP, post) is rounded to the data type, as the GPU does when it
//    computes in half/bf16/fp8 precision. half, bfloat16 and fp8 are widened to float for the
//    arithmetic; float is wide enough that each single operation rounded to float and then to the
//    narrow type equals the correctly rounded narrow result (precision 24 >= 2p + 2).
//    fp8 results saturate to the largest finite value (see float_formats.h, Fp8Overflow).
//  - max/min ignore a NaN operand (IEEE maxNum/minNum, like C fmax and CUDA's __hmax): the result
//    is NaN only when both operands are NaN. When the operands compare equal (+0 and -0 included)
//    the result is the second operand, pre(b[i]).
//  - A result that is a NaN is stored as the canonical NaN of its type (positive, quiet bit only:
//    0x7fc00000, 0x7ff8000000000000, half 0x7e00, bfloat16 0x7fc0, e4m3 0x7f, e5m2 0x7e), whatever
//    NaN the hardware made, so results are the same bits on every vendor's device.
//  - The caller's floating-point environment plays no part: FTZ/DAZ (set by -ffast-math programs),
//    another rounding mode or unmasked exceptions are switched off for the call and restored after.
//  - dst may equal a or b exactly (in place); partial overlap is not allowed.
//
// The kernels are chosen once per call (data type x op x transforms) and run a typed loop; no
// per-element switch. On x86-64 an AVX2+F16C variant is selected at run time when the CPU has it;
// a portable variant serves every other CPU.
//
// Thread-safety: pure functions, callable from any thread.

#include <cstddef>
#include <cstdint>

#include "common/result.h"
#include "src/device/device_backend.h"

namespace mixccl::host {

enum class KernelIsa {
  kPortable,  // plain C++, vectorised by the compiler for the baseline ISA
  kAvx2,      // x86-64 with AVX2 and F16C (half conversions in hardware)
};

// The best variant this CPU supports (decided once).
KernelIsa bestKernelIsa();
const char* kernelIsaName(KernelIsa isa);
// Whether `isa` was compiled in and the CPU can run it.
bool kernelIsaAvailable(KernelIsa isa);

// Runs the reduction with the best variant. Fails with kInvalidArgument for an unknown data type,
// an op other than sum/prod/max/min, or null pointers with count > 0.
Result reduce(void* dst, const void* a, const void* b, size_t count, const ReduceSpec& spec, bool applyPre,
              bool applyPost);
// The same with a chosen variant (tests compare the variants; benchmarks time them). Fails with
// kInvalidUsage when the variant is not available here.
Result reduceWithIsa(KernelIsa isa, void* dst, const void* a, const void* b, size_t count, const ReduceSpec& spec,
                     bool applyPre, bool applyPost);

// Everything a typed loop needs, decoded once per call.
struct KernelArgs {
  void* dst;
  const void* a;  // may be null
  const void* b;
  size_t count;
  RedOpKind op;  // kSum, kProd, kMax or kMin
  bool pre;
  bool post;
  const uint8_t* scalar;  // one element of the data type
  uint64_t divisor;       // nonzero when post
};

// One entry point per variant; each switches once on the data type and op and runs the loop.
// Declared here so the variants can live in separate translation units compiled for different
// ISAs; callers use reduce()/reduceWithIsa().
namespace portable {
void run(DataType dtype, const KernelArgs& args);
}
namespace avx2 {
void run(DataType dtype, const KernelArgs& args);
}

}  // namespace mixccl::host
