// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Shared by the fuzz targets: an invariant check that stays on in release builds (assert() does
// not: the normal build defines NDEBUG) and aborts, so both libFuzzer and the corpus replay
// (replay_main.cc) report a violated invariant as a crash.

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                                   \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      fprintf(stderr, "fuzz invariant violated: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      abort();                                                                             \
    }                                                                                      \
  } while (0)

// The commHash and secret of the job every target plays, so inputs can carry the right ones.
// 0x0123456789abcdef little-endian, then 16 bytes 0xa0..0xaf.
namespace mixccl::fuzz {
constexpr uint64_t kCommHash = 0x0123456789abcdefull;
constexpr uint8_t kSecret[16] = {0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7,
                                 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf};
}  // namespace mixccl::fuzz
