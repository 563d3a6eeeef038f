// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <xmmintrin.h>
#else
#include <cfenv>
#endif

namespace mixccl::fpenv {

// A scope that runs in the default floating-point environment: round to nearest even, no flush of
// denormals, exceptions masked; the caller's environment (flags included) is put back at its end.
// The rounding contract (PROTOCOL.md, "Arithmetic") must not depend on the environment of the
// calling thread: a program built with -ffast-math has FTZ/DAZ set from startup (denormal operands
// and results of float, double and bfloat16 become zero, where a GPU keeps them), a program may
// have changed the rounding mode, and one that unmasked exceptions to catch NaNs (feenableexcept)
// would die of SIGFPE on the inf - inf of a user's data or of the init-time arithmetic check. So
// the host kernels and encodeScalar() run inside one. Cheap: on x86-64 one MXCSR read, and two
// writes only when the caller's differs from the default.
class DefaultFpEnv {
 public:
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  // MXCSR: flags in bits 0-5 (kept, so the common case writes nothing), DAZ bit 6, masks 7-12,
  // rounding 13-14, FTZ 15. 0x1f80 is the reset value: all masked, nearest, no flush.
  DefaultFpEnv() : saved_(_mm_getcsr()) {
    const unsigned want = 0x1f80u | (saved_ & 0x3fu);
    if (saved_ != want) _mm_setcsr(want);
  }
  ~DefaultFpEnv() {
    if (_mm_getcsr() != saved_) _mm_setcsr(saved_);
  }

 private:
  unsigned saved_;
#else
  DefaultFpEnv() {
    if (std::fegetenv(&saved_) == 0) restore_ = std::fesetenv(FE_DFL_ENV) == 0;
  }
  ~DefaultFpEnv() {
    if (restore_) (void)std::fesetenv(&saved_);
  }

 private:
  std::fenv_t saved_{};
  bool restore_ = false;
#endif
  DefaultFpEnv(const DefaultFpEnv&) = delete;
  DefaultFpEnv& operator=(const DefaultFpEnv&) = delete;
};

}  // namespace mixccl::fpenv
