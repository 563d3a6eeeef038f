// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// One rank's share of the exact collective checks, shared by ranks as threads (tests/coll) and as
// processes (tests/mp): every collective through the public API over a matrix of dtype x op x
// count {0, 1, odd, large (multi-chunk at a 16 KiB chunk size)} x in/out-of-place, compared
// element by element with the reference of tests/support/values.h. Failures go through gtest's
// thread-safe ADD_FAILURE/ASSERT_*; a rank stops at its first failed case (the others then wait
// for it until MIXCCL_TIMEOUT), and ::testing::Test::HasFailure() tells a rank process it failed.

#include <gtest/gtest.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/support/algo_policy.h"
#include "tests/support/values.h"

namespace mixccl::testing {

constexpr uint64_t kOddCount = 1001;
constexpr uint64_t kLargeCount = 70001;
inline const uint64_t kMatrixCounts[] = {0, 1, kOddCount, kLargeCount};

// How much of dtype x op x count each run covers; both are in and out of place.
enum class Matrix {
  // Every dtype x op x count, the large count only for sum and for int32 and float32 (the cost
  // of the large count dominates, and its point is chunking, not arithmetic).
  kFull,
  // Every dtype x op at the odd count; every count for sum in one dtype of each element size
  // (int8, half, int32, int64: the element size sets how many elements fill a chunk). About a
  // third of the full matrix's time: the form for the many (algorithm, ranks, transport) cells.
  kLight,
};

// The environment the thread suites run collectives in (followed by config::resetForTesting()):
// the transport, and small chunks so that the large count streams through many pipelined
// messages.
inline void setCollTestEnv(const char* transport) {
  setenv("NCCL_SHM_DISABLE", std::string(transport) == "tcp" ? "1" : "0", 1);
  setenv("MIXCCL_CHUNK_SIZE", "16384", 1);
  setenv("MIXCCL_FIFO_DEPTH", "4", 1);
  setenv("MIXCCL_TIMEOUT", "120", 1);
}

inline const char* matrixName(Matrix m) { return m == Matrix::kFull ? "full" : "light"; }

// Whether `t` is the first dtype (in ncclDataType_t order) of its element size.
inline bool firstOfItsSize(int t) {
  for (int u = 0; u < t; ++u) {
    if (typeSize(u) == typeSize(t)) return false;
  }
  return true;
}

inline bool inMatrix(Matrix m, int t, int op, uint64_t count) {
  if (m == Matrix::kFull) return count != kLargeCount || op == kSum || t == 7 || t == 2;
  return count == kOddCount || (op == kSum && firstOfItsSize(t));
}

// Data movement has no op: every dtype at the odd count, every count in one dtype of each size
// (light); every dtype x count (full).
inline bool inMatrix(Matrix m, int t, uint64_t count) {
  return m == Matrix::kFull || count == kOddCount || firstOfItsSize(t);
}

// Creates the NCCL operator for a test op on `comm` (PreMulSum with scalar 2, alternating the
// scalar's residence). Returns false on failure.
inline bool makeOp(int op, int t, ncclComm_t comm, bool deviceResidence, ncclRedOp_t* out,
                   std::vector<uint8_t>* scalar) {
  if (op != kPreMulTwo) {
    *out = static_cast<ncclRedOp_t>(op);
    return true;
  }
  scalar->assign(8, 0);
  encode(t, 2.0, scalar->data());
  ncclResult_t r = ncclRedOpCreatePreMulSum(out, scalar->data(), static_cast<ncclDataType_t>(t),
                                            deviceResidence ? ncclScalarDevice : ncclScalarHostImmediate, comm);
  EXPECT_EQ(r, ncclSuccess) << ncclGetLastError(comm);
  return r == ncclSuccess;
}

// Compares `count` elements at `got` with the reference for logical element base+i: bitwise where
// the reference is exact, within tolerance(t) where it is not (float averages over a rank count
// that is not a power of two).
inline void checkReduced(const char* what, int rank, int n, int t, int op, uint64_t count, bool inplace,
                         const uint8_t* got, uint64_t base) {
  const size_t es = typeSize(t);
  int reported = 0;
  for (uint64_t i = 0; i < count && reported < 3; ++i) {
    double want = expectedValue(t, op, n, base + i);
    uint8_t wantBytes[8] = {};
    encode(t, want, wantBytes);
    bool ok;
    if (exactExpected(t, op, n)) {
      ok = memcmp(wantBytes, got + i * es, es) == 0;
    } else {
      double g = decode(t, got + i * es);
      ok = std::fabs(g - want) <= tolerance(t) * std::max(1.0, std::fabs(want));
    }
    if (!ok) {
      ++reported;
      ADD_FAILURE() << what << " " << typeName(t) << " " << opName(op) << " count " << count
                    << (inplace ? " in-place" : " out-of-place") << " rank " << rank << " of " << n << ": element " << i
                    << " = " << decode(t, got + i * es) << ", expected " << want;
    }
  }
}

// AllReduce, Reduce and ReduceScatter (those in `kinds`, a collectivesOf() mask) over matrix `m`.
inline void checkReductions(int rank, int n, ncclComm_t comm, Matrix m, uint32_t kinds) {
  int iteration = 0;
  for (int t = 0; t < kNumTypes; ++t) {
    const size_t es = typeSize(t);
    for (int op = 0; op < kNumOps; ++op) {
      for (uint64_t count : kMatrixCounts) {
        if (!inMatrix(m, t, op, count)) continue;
        for (int inplace = 0; inplace < 2; ++inplace) {
          ++iteration;
          ncclRedOp_t ncclOp;
          std::vector<uint8_t> scalar;
          if (!makeOp(op, t, comm, iteration % 2 == 0, &ncclOp, &scalar)) return;
          const auto dt = static_cast<ncclDataType_t>(t);
          std::vector<uint8_t> in(count * es + 1), out(count * es + 1);
          uint8_t* dst = inplace ? in.data() : out.data();
          if (runsCollective(kinds, CollKind::kAllReduce)) {
            for (uint64_t i = 0; i < count; ++i) encode(t, inputValue(t, op, rank, i), &in[i * es]);
            ASSERT_EQ(ncclAllReduce(in.data(), dst, count, dt, ncclOp, comm, nullptr), ncclSuccess)
                << ncclGetLastError(comm);
            checkReduced("AllReduce", rank, n, t, op, count, inplace, dst, 0);
          }
          if (runsCollective(kinds, CollKind::kReduce)) {
            // To a root that moves with the iteration.
            const int root = iteration % n;
            for (uint64_t i = 0; i < count; ++i) encode(t, inputValue(t, op, rank, i), &in[i * es]);
            ASSERT_EQ(ncclReduce(in.data(), dst, count, dt, ncclOp, root, comm, nullptr), ncclSuccess)
                << ncclGetLastError(comm);
            if (rank == root) checkReduced("Reduce", rank, n, t, op, count, inplace, dst, 0);
          }
          if (runsCollective(kinds, CollKind::kReduceScatter)) {
            // Input element k*count+i of every rank feeds rank k's output i, which is therefore the
            // reduction of logical element i + 7k.
            std::vector<uint8_t> rsIn(n * count * es + 1), rsOut(count * es + 1);
            for (uint64_t i = 0; i < n * count; ++i) {
              encode(t, inputValue(t, op, rank, i % count + (i / count) * 7), &rsIn[i * es]);
            }
            uint8_t* rsDst = inplace ? rsIn.data() + rank * count * es : rsOut.data();
            ASSERT_EQ(ncclReduceScatter(rsIn.data(), rsDst, count, dt, ncclOp, comm, nullptr), ncclSuccess)
                << ncclGetLastError(comm);
            checkReduced("ReduceScatter", rank, n, t, op, count, inplace, rsDst, 7 * static_cast<uint64_t>(rank));
          }
          if (op == kPreMulTwo) {
            EXPECT_EQ(ncclRedOpDestroy(ncclOp, comm), ncclSuccess);
          }
          if (::testing::Test::HasFailure()) return;
        }
      }
    }
  }
}

// Broadcast, AllGather, AlltoAll, Gather and Scatter (those in `kinds`) over matrix `m`: pure data
// movement, compared byte for byte.
inline void checkDataMovement(int rank, int n, ncclComm_t comm, Matrix m, uint32_t kinds) {
  int iteration = 0;
  auto fill = [](std::vector<uint8_t>& v, int r, uint64_t offset, uint64_t bytes) {
    for (uint64_t b = 0; b < bytes; ++b) v[offset + b] = patternByte(r, b);
  };
  for (int t = 0; t < kNumTypes; ++t) {
    const size_t es = typeSize(t);
    const auto dt = static_cast<ncclDataType_t>(t);
    for (uint64_t count : kMatrixCounts) {
      if (!inMatrix(m, t, count)) continue;
      for (int inplace = 0; inplace < 2; ++inplace) {
        const int root = iteration++ % n;
        const uint64_t bytes = count * es;
        std::vector<uint8_t> mine(bytes + 1);
        for (uint64_t b = 0; b < bytes; ++b) mine[b] = patternByte(rank, b);
        if (runsCollective(kinds, CollKind::kBroadcast)) {
          // The root's pattern everywhere.
          std::vector<uint8_t> in(bytes + 1), out(bytes + 1);
          fill(in, rank, 0, bytes);
          uint8_t* dst = inplace ? in.data() : out.data();
          ASSERT_EQ(ncclBroadcast(in.data(), dst, count, dt, root, comm, nullptr), ncclSuccess)
              << ncclGetLastError(comm);
          for (uint64_t b = 0; b < bytes; ++b) {
            ASSERT_EQ(dst[b], patternByte(root, b)) << "Broadcast " << typeName(t) << " count " << count << " root "
                                                    << root << " rank " << rank << " byte " << b;
          }
        }
        if (runsCollective(kinds, CollKind::kAllGather)) {
          // Block k of the output is rank k's input.
          std::vector<uint8_t> all(n * bytes + 1);
          const uint8_t* agIn = mine.data();
          if (inplace) {
            std::copy(mine.begin(), mine.end() - 1, all.begin() + rank * bytes);
            agIn = all.data() + rank * bytes;
          }
          ASSERT_EQ(ncclAllGather(agIn, all.data(), count, dt, comm, nullptr), ncclSuccess) << ncclGetLastError(comm);
          for (int k = 0; k < n; ++k) {
            for (uint64_t b = 0; b < bytes; ++b) {
              ASSERT_EQ(all[k * bytes + b], patternByte(k, b)) << "AllGather " << typeName(t) << " count " << count
                                                               << " rank " << rank << " block " << k << " byte " << b;
            }
          }
        }
        if (runsCollective(kinds, CollKind::kAlltoAll)) {
          // Block k of rank r's output is block r of rank k's input. NCCL defines no in-place
          // all-to-all, but torch's all_to_all_single(t, t) passes one buffer as both: it must be
          // right too (the library stages the input), whichever algorithm runs.
          std::vector<uint8_t> a2aIn(n * bytes + 1), a2aOut(n * bytes + 1);
          for (int k = 0; k < n; ++k) {
            for (uint64_t b = 0; b < bytes; ++b) a2aIn[k * bytes + b] = patternByte(rank * 31 + k, b);
          }
          uint8_t* a2aDst = inplace ? a2aIn.data() : a2aOut.data();
          ASSERT_EQ(ncclAlltoAll(a2aIn.data(), a2aDst, count, dt, comm, nullptr), ncclSuccess)
              << ncclGetLastError(comm);
          for (int k = 0; k < n; ++k) {
            for (uint64_t b = 0; b < bytes; ++b) {
              ASSERT_EQ(a2aDst[k * bytes + b], patternByte(k * 31 + rank, b))
                  << "AlltoAll " << typeName(t) << " count " << count << (inplace ? " in-place" : "") << " rank "
                  << rank << " block " << k << " byte " << b;
            }
          }
        }
        if (runsCollective(kinds, CollKind::kGather)) {
          // In place (NCCL's nccl.h): the root's sendbuff is its own block of recvbuff.
          std::vector<uint8_t> gOut(n * bytes + 1);
          const uint8_t* gIn = mine.data();
          if (inplace && rank == root) {
            std::copy(mine.begin(), mine.end() - 1, gOut.begin() + root * bytes);
            gIn = gOut.data() + root * bytes;
          }
          ASSERT_EQ(ncclGather(gIn, gOut.data(), count, dt, root, comm, nullptr), ncclSuccess)
              << ncclGetLastError(comm);
          if (rank == root) {
            for (int k = 0; k < n; ++k) {
              for (uint64_t b = 0; b < bytes; ++b) {
                ASSERT_EQ(gOut[k * bytes + b], patternByte(k, b))
                    << "Gather " << typeName(t) << " count " << count << (inplace ? " in-place" : "") << " root "
                    << root << " block " << k << " byte " << b;
              }
            }
          }
        }
        if (runsCollective(kinds, CollKind::kScatter)) {
          // In place (NCCL's nccl.h): the root's recvbuff is its own block of sendbuff.
          std::vector<uint8_t> sIn(n * bytes + 1), sOut(bytes + 1);
          for (int k = 0; k < n; ++k) {
            for (uint64_t b = 0; b < bytes; ++b) sIn[k * bytes + b] = patternByte(rank * 131 + k, b);
          }
          uint8_t* sDst = inplace && rank == root ? sIn.data() + root * bytes : sOut.data();
          ASSERT_EQ(ncclScatter(sIn.data(), sDst, count, dt, root, comm, nullptr), ncclSuccess)
              << ncclGetLastError(comm);
          for (uint64_t b = 0; b < bytes; ++b) {
            ASSERT_EQ(sDst[b], patternByte(root * 131 + rank, b))
                << "Scatter " << typeName(t) << " count " << count << (inplace ? " in-place" : "") << " root " << root
                << " rank " << rank << " byte " << b;
          }
        }
      }
    }
  }
}

}  // namespace mixccl::testing
