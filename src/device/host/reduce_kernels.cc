// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#include "src/device/host/reduce_kernels.h"

#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif

#include "common/types.h"
#include "src/device/host/fp_env.h"

// The portable variant: the baseline ISA of the build.
#define MIXCCL_KERNEL_NS portable
#include "src/device/host/reduce_kernels_impl.h"
#undef MIXCCL_KERNEL_NS

namespace mixccl::host {
namespace {

bool cpuHasAvx2F16c() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  // Read CPUID directly: not every compiler's __builtin_cpu_supports knows "f16c".
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  const bool f16c = (ecx & (1u << 29)) != 0;
  const bool osxsave = (ecx & (1u << 27)) != 0;
  if (!f16c || !osxsave) return false;
  // The OS must save the YMM registers on context switch (XCR0 bits 1 and 2), or AVX code faults.
  unsigned xcr0Lo = 0, xcr0Hi = 0;
  __asm__("xgetbv" : "=a"(xcr0Lo), "=d"(xcr0Hi) : "c"(0));
  if ((xcr0Lo & 0x6u) != 0x6u) return false;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  return (ebx & (1u << 5)) != 0;  // AVX2
#else
  return false;
#endif
}

Result validate(void* dst, const void* b, size_t count, const ReduceSpec& spec) {
  const int dtype = static_cast<int>(spec.dtype);
  if (dtype < 0 || dtype >= kNumDataTypes) {
    return fail(Result::kInvalidArgument, "reduce: unknown data type %d (valid: 0..%d)", dtype, kNumDataTypes - 1);
  }
  switch (spec.op) {
    case RedOpKind::kSum:
    case RedOpKind::kProd:
    case RedOpKind::kMax:
    case RedOpKind::kMin:
      break;
    default:
      return fail(Result::kInvalidArgument,
                  "reduce: op %d is not a kernel op; Avg and PreMulSum must be lowered to Sum with pre/post "
                  "transforms before they reach the device backend",
                  static_cast<int>(spec.op));
  }
  if (count > 0 && (dst == nullptr || b == nullptr)) {
    return fail(Result::kInvalidArgument, "reduce: null %s buffer for %zu elements of %s",
                dst == nullptr ? "destination" : "input", count, dataTypeName(spec.dtype));
  }
  const bool isSigned =
      spec.dtype == DataType::kInt8 || spec.dtype == DataType::kInt32 || spec.dtype == DataType::kInt64;
  if (isSigned && spec.divisor > static_cast<uint64_t>(INT64_MAX)) {
    return fail(Result::kInvalidArgument, "reduce: divisor %llu is too large for %s",
                static_cast<unsigned long long>(spec.divisor), dataTypeName(spec.dtype));
  }
  return Result::kSuccess;
}

}  // namespace

// CPUID traps to the hypervisor in a virtual machine (tens of microseconds), so the answer is
// read once per process, never per call.
bool haveAvx2F16c() {
  static const bool have = cpuHasAvx2F16c();
  return have;
}

KernelIsa bestKernelIsa() { return haveAvx2F16c() ? KernelIsa::kAvx2 : KernelIsa::kPortable; }

const char* kernelIsaName(KernelIsa isa) { return isa == KernelIsa::kAvx2 ? "avx2+f16c" : "portable"; }

bool kernelIsaAvailable(KernelIsa isa) { return isa == KernelIsa::kPortable || haveAvx2F16c(); }

Result reduceWithIsa(KernelIsa isa, void* dst, const void* a, const void* b, size_t count, const ReduceSpec& spec,
                     bool applyPre, bool applyPost) {
  MIXCCL_TRY(validate(dst, b, count, spec));
  if (!kernelIsaAvailable(isa)) {
    return fail(Result::kInvalidUsage, "reduce: kernel variant %s is not available on this CPU", kernelIsaName(isa));
  }
  if (count == 0) return Result::kSuccess;
  KernelArgs args{dst,         a,           b, count, spec.op, applyPre && spec.preMul, applyPost && spec.divisor > 1,
                  spec.scalar, spec.divisor};
  if (args.a == nullptr && !args.pre && !args.post) {
    // Nothing to compute: copy the bits (a widen/narrow round trip would quieten signalling NaNs).
    if (dst != b) std::memmove(dst, b, count * dataTypeSize(spec.dtype));
    return Result::kSuccess;
  }
  const fpenv::DefaultFpEnv env;
  if (isa == KernelIsa::kAvx2) {
    avx2::run(spec.dtype, args);
  } else {
    portable::run(spec.dtype, args);
  }
  return Result::kSuccess;
}

Result reduce(void* dst, const void* a, const void* b, size_t count, const ReduceSpec& spec, bool applyPre,
              bool applyPost) {
  return reduceWithIsa(bestKernelIsa(), dst, a, b, count, spec, applyPre, applyPost);
}

}  // namespace mixccl::host
