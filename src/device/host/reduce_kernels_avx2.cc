// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// The AVX2+F16C variant of the reduction loops. The build compiles every file for the baseline
// x86-64 ISA, so this file raises the target for its own functions only, with a pragma placed after
// all includes: inline functions from headers keep the baseline ISA, and the loops (in namespace
// avx2) are reached only after the run-time CPU check in reduce_kernels.cc.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "src/device/host/float_formats.h"
#include "src/device/host/reduce_kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,f16c")
#endif

#define MIXCCL_KERNEL_NS avx2
#define MIXCCL_KERNEL_F16C 1
#include "src/device/host/reduce_kernels_impl.h"
#undef MIXCCL_KERNEL_F16C
#undef MIXCCL_KERNEL_NS

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#else  // not x86-64: the variant is never available (kernelIsaAvailable), this keeps the link whole

namespace mixccl::host::avx2 {
void run(DataType dtype, const KernelArgs& args) { portable::run(dtype, args); }
}  // namespace mixccl::host::avx2

#endif
