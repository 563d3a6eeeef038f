// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Every collective through the public API, ranks as threads: transport {shm, tcp} x nranks
// {1,2,3,4,7,8} x count {0, 1, odd, large (multi-chunk)} x dtype x op x in/out-of-place, checked
// element by element against a reference (tests/support/values.h). The Algorithms instances
// repeat the suite with NCCL_ALGO forcing, for every collective, its k-th algorithm other than
// the standing ring/pairwise/direct one, so every algorithm runs through the engine too.

#include <gtest/gtest.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "common/config.h"
#include "tests/support/algo_policy.h"
#include "tests/support/rank_threads.h"
#include "tests/support/values.h"

namespace mixccl::testing {
namespace {

struct Param {
  const char* transport;
  int nranks;
  int alternative = 0;  // 0: the tuner chooses; k: NCCL_ALGO forces algorithmPolicy(k)
};

// Readable parameter in test logs (instead of gtest's byte dump).
void PrintTo(const Param& p, std::ostream* os) {
  *os << p.transport << " x " << p.nranks << " ranks";
  if (p.alternative > 0) *os << ", NCCL_ALGO=" << algorithmPolicy(p.alternative);
}

std::string paramName(const ::testing::TestParamInfo<Param>& info) {
  return std::string(info.param.transport) + "_np" + std::to_string(info.param.nranks) +
         (info.param.alternative > 0 ? "_alt" + std::to_string(info.param.alternative) : "");
}

// Small chunks so that the "large" count streams through many pipelined messages.
constexpr uint64_t kLarge = 70001;
const uint64_t kCounts[] = {0, 1, 1001, kLarge};

class CollTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    setenv("NCCL_SHM_DISABLE", std::string(GetParam().transport) == "tcp" ? "1" : "0", 1);
    setenv("MIXCCL_CHUNK_SIZE", "16384", 1);
    setenv("MIXCCL_FIFO_DEPTH", "4", 1);
    setenv("MIXCCL_TIMEOUT", "120", 1);
    const std::string policy = algorithmPolicy(GetParam().alternative);
    ASSERT_TRUE(GetParam().alternative == 0 || !policy.empty())
        << "no collective has alternative algorithm " << GetParam().alternative;
    setenv("NCCL_ALGO", policy.c_str(), 1);
    config::resetForTesting();
  }
  void TearDown() override {
    unsetenv("NCCL_ALGO");
    config::resetForTesting();
  }
  int n() const { return GetParam().nranks; }
};

// Large counts only for a representative subset, to keep the suite fast on two cores.
bool wanted(int t, int op, uint64_t count) { return count != kLarge || op == kSum || t == 7 || t == 2; }

// Creates the NCCL operator for a test op on `comm` (PreMulSum with scalar 2, alternating the
// scalar's residence). Returns false on failure.
bool makeOp(int op, int t, ncclComm_t comm, bool deviceResidence, ncclRedOp_t* out, std::vector<uint8_t>* scalar) {
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

// Compares `count` elements at `got` with the reference for output element base+i.
void checkReduced(const char* what, int rank, int n, int t, int op, uint64_t count, bool inplace, const uint8_t* got,
                  uint64_t base) {
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

TEST_P(CollTest, Reductions) {
  const int n = this->n();
  runRanks(n, [&](int rank, ncclComm_t comm) {
    int iteration = 0;
    for (int t = 0; t < kNumTypes; ++t) {
      const size_t es = typeSize(t);
      for (int op = 0; op < kNumOps; ++op) {
        for (uint64_t count : kCounts) {
          if (!wanted(t, op, count)) continue;
          for (int inplace = 0; inplace < 2; ++inplace) {
            ++iteration;
            ncclRedOp_t ncclOp;
            std::vector<uint8_t> scalar;
            if (!makeOp(op, t, comm, iteration % 2 == 0, &ncclOp, &scalar)) return;
            const auto dt = static_cast<ncclDataType_t>(t);
            // AllReduce
            std::vector<uint8_t> in(count * es + 1), out(count * es + 1);
            for (uint64_t i = 0; i < count; ++i) encode(t, inputValue(t, op, rank, i), &in[i * es]);
            uint8_t* dst = inplace ? in.data() : out.data();
            ASSERT_EQ(ncclAllReduce(in.data(), dst, count, dt, ncclOp, comm, nullptr), ncclSuccess)
                << ncclGetLastError(comm);
            checkReduced("AllReduce", rank, n, t, op, count, inplace, dst, 0);
            // Reduce, to a root that moves with the iteration
            const int root = iteration % n;
            for (uint64_t i = 0; i < count; ++i) encode(t, inputValue(t, op, rank, i), &in[i * es]);
            ASSERT_EQ(ncclReduce(in.data(), dst, count, dt, ncclOp, root, comm, nullptr), ncclSuccess)
                << ncclGetLastError(comm);
            if (rank == root) checkReduced("Reduce", rank, n, t, op, count, inplace, dst, 0);
            // ReduceScatter: input element k*count+i of every rank feeds rank k's output i.
            std::vector<uint8_t> rsIn(n * count * es + 1), rsOut(count * es + 1);
            for (uint64_t i = 0; i < n * count; ++i) {
              encode(t, inputValue(t, op, rank, i % count + (i / count) * 7), &rsIn[i * es]);
            }
            uint8_t* rsDst = inplace ? rsIn.data() + rank * count * es : rsOut.data();
            ASSERT_EQ(ncclReduceScatter(rsIn.data(), rsDst, count, dt, ncclOp, comm, nullptr), ncclSuccess)
                << ncclGetLastError(comm);
            // Output element i of rank r is the reduction of logical element i + 7r.
            std::vector<uint8_t> expectShifted(count * es + 1);
            for (uint64_t i = 0; i < count && !::testing::Test::HasFailure(); ++i) {
              double want = expectedValue(t, op, n, i + 7 * rank);
              uint8_t w[8] = {};
              encode(t, want, w);
              if (exactExpected(t, op, n)) {
                ASSERT_EQ(memcmp(w, rsDst + i * es, es), 0)
                    << "ReduceScatter " << typeName(t) << " " << opName(op) << " count " << count << " inplace "
                    << inplace << " rank " << rank << " elem " << i << " got " << decode(t, rsDst + i * es) << " want "
                    << want;
              }
            }
            if (op == kPreMulTwo) EXPECT_EQ(ncclRedOpDestroy(ncclOp, comm), ncclSuccess);
            if (::testing::Test::HasFailure()) return;
          }
        }
      }
    }
  });
}

// Broadcast, AllGather, AlltoAll, Gather, Scatter: pure data movement, compared byte for byte.
TEST_P(CollTest, DataMovement) {
  const int n = this->n();
  runRanks(n, [&](int rank, ncclComm_t comm) {
    int iteration = 0;
    auto fill = [](std::vector<uint8_t>& v, int r, uint64_t offset, uint64_t bytes) {
      for (uint64_t b = 0; b < bytes; ++b) v[offset + b] = patternByte(r, b);
    };
    for (int t = 0; t < kNumTypes; ++t) {
      const size_t es = typeSize(t);
      const auto dt = static_cast<ncclDataType_t>(t);
      for (uint64_t count : kCounts) {
        for (int inplace = 0; inplace < 2; ++inplace) {
          const int root = iteration++ % n;
          const uint64_t bytes = count * es;
          // Broadcast: root's pattern everywhere.
          std::vector<uint8_t> in(bytes + 1), out(bytes + 1);
          fill(in, rank, 0, bytes);
          uint8_t* dst = inplace ? in.data() : out.data();
          ASSERT_EQ(ncclBroadcast(in.data(), dst, count, dt, root, comm, nullptr), ncclSuccess)
              << ncclGetLastError(comm);
          for (uint64_t b = 0; b < bytes; ++b) {
            ASSERT_EQ(dst[b], patternByte(root, b)) << "Broadcast " << typeName(t) << " count " << count << " root "
                                                    << root << " rank " << rank << " byte " << b;
          }
          // AllGather: block k of the output is rank k's input.
          std::vector<uint8_t> all(n * bytes + 1);
          std::vector<uint8_t> mine(bytes + 1);
          uint8_t* agIn = inplace ? all.data() + rank * bytes : mine.data();
          for (uint64_t b = 0; b < bytes; ++b) agIn[b] = patternByte(rank, b);
          ASSERT_EQ(ncclAllGather(agIn, all.data(), count, dt, comm, nullptr), ncclSuccess) << ncclGetLastError(comm);
          for (int k = 0; k < n; ++k) {
            for (uint64_t b = 0; b < bytes; ++b) {
              ASSERT_EQ(all[k * bytes + b], patternByte(k, b)) << "AllGather " << typeName(t) << " count " << count
                                                               << " rank " << rank << " block " << k << " byte " << b;
            }
          }
          if (inplace) continue;  // NCCL has no in-place form of the rest
          // AlltoAll: block k of rank r's output is block r of rank k's input.
          std::vector<uint8_t> a2aIn(n * bytes + 1), a2aOut(n * bytes + 1);
          for (int k = 0; k < n; ++k) {
            for (uint64_t b = 0; b < bytes; ++b) a2aIn[k * bytes + b] = patternByte(rank * 31 + k, b);
          }
          ASSERT_EQ(ncclAlltoAll(a2aIn.data(), a2aOut.data(), count, dt, comm, nullptr), ncclSuccess)
              << ncclGetLastError(comm);
          for (int k = 0; k < n; ++k) {
            for (uint64_t b = 0; b < bytes; ++b) {
              ASSERT_EQ(a2aOut[k * bytes + b], patternByte(k * 31 + rank, b))
                  << "AlltoAll count " << count << " rank " << rank << " block " << k << " byte " << b;
            }
          }
          // Gather to root / Scatter from root.
          std::vector<uint8_t> gOut(n * bytes + 1);
          ASSERT_EQ(ncclGather(mine.data(), gOut.data(), count, dt, root, comm, nullptr), ncclSuccess)
              << ncclGetLastError(comm);
          if (rank == root) {
            for (int k = 0; k < n; ++k) {
              for (uint64_t b = 0; b < bytes; ++b) {
                ASSERT_EQ(gOut[k * bytes + b], patternByte(k, b)) << "Gather count " << count << " block " << k;
              }
            }
          }
          std::vector<uint8_t> sIn(n * bytes + 1), sOut(bytes + 1);
          for (int k = 0; k < n; ++k) {
            for (uint64_t b = 0; b < bytes; ++b) sIn[k * bytes + b] = patternByte(rank * 131 + k, b);
          }
          ASSERT_EQ(ncclScatter(sIn.data(), sOut.data(), count, dt, root, comm, nullptr), ncclSuccess)
              << ncclGetLastError(comm);
          for (uint64_t b = 0; b < bytes; ++b) {
            ASSERT_EQ(sOut[b], patternByte(root * 131 + rank, b)) << "Scatter count " << count << " rank " << rank;
          }
        }
      }
    }
  });
}

// All-to-all-v from grouped send/recv with per-pair counts (some zero), posted in an order that
// differs per rank: a group must complete whatever the order.
TEST_P(CollTest, GroupedSendRecv) {
  const int n = this->n();
  runRanks(n, [&](int rank, ncclComm_t comm) {
    auto countFor = [](int from, int to) -> uint64_t { return ((from * 7 + to * 3) % 5) * 3001; };
    std::vector<std::vector<uint8_t>> send(n), recv(n);
    for (int p = 0; p < n; ++p) {
      send[p].resize(countFor(rank, p) * 4 + 1);
      for (uint64_t b = 0; b + 1 < send[p].size(); ++b) send[p][b] = patternByte(rank * 100 + p, b);
      recv[p].assign(countFor(p, rank) * 4 + 1, 0);
    }
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int k = 0; k < n; ++k) {
      int p = (rank % 2 == 0) ? k : n - 1 - k;  // even ranks post ascending, odd descending
      if (rank % 3 == 0) {
        ASSERT_EQ(ncclRecv(recv[p].data(), countFor(p, rank), ncclFloat32, p, comm, nullptr), ncclSuccess);
        ASSERT_EQ(ncclSend(send[p].data(), countFor(rank, p), ncclFloat32, p, comm, nullptr), ncclSuccess);
      } else {
        ASSERT_EQ(ncclSend(send[p].data(), countFor(rank, p), ncclFloat32, p, comm, nullptr), ncclSuccess);
        ASSERT_EQ(ncclRecv(recv[p].data(), countFor(p, rank), ncclFloat32, p, comm, nullptr), ncclSuccess);
      }
    }
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(comm);
    for (int p = 0; p < n; ++p) {
      for (uint64_t b = 0; b + 1 < recv[p].size(); ++b) {
        ASSERT_EQ(recv[p][b], patternByte(p * 100 + rank, b)) << "from " << p << " to " << rank << " byte " << b;
      }
    }
  });
}

// Several collectives inside one group complete at ncclGroupEnd, in issue order.
TEST_P(CollTest, GroupedCollectives) {
  const int n = this->n();
  runRanks(n, [&](int rank, ncclComm_t comm) {
    std::vector<float> a(5003, static_cast<float>(rank + 1)), b(777, 1.0f), c(n * 33);
    std::vector<float> cin(33, static_cast<float>(rank));
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(a.data(), a.data(), a.size(), ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(b.data(), b.data(), b.size(), ncclFloat32, ncclMax, comm, nullptr), ncclSuccess);
    ASSERT_EQ(ncclAllGather(cin.data(), c.data(), 33, ncclFloat32, comm, nullptr), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(comm);
    for (float v : a) ASSERT_EQ(v, n * (n + 1) / 2.0f);
    for (float v : b) ASSERT_EQ(v, 1.0f);
    for (int k = 0; k < n; ++k) ASSERT_EQ(c[k * 33], static_cast<float>(k));
  });
}

INSTANTIATE_TEST_SUITE_P(Transports, CollTest,
                         ::testing::Values(Param{"shm", 1}, Param{"shm", 2}, Param{"shm", 3}, Param{"shm", 4},
                                           Param{"shm", 7}, Param{"shm", 8}, Param{"tcp", 2}, Param{"tcp", 3},
                                           Param{"tcp", 4}, Param{"tcp", 7}, Param{"tcp", 8}),
                         paramName);

// Rank counts with and without a power of two, and one over TCP, for each forced algorithm. The
// third alternatives (AllReduce one-shot, ReduceScatter ordered since the Bruck reduce-scatter
// took the second place) run once.
INSTANTIATE_TEST_SUITE_P(Algorithms, CollTest,
                         ::testing::Values(Param{"shm", 2, 1}, Param{"shm", 3, 1}, Param{"shm", 5, 1},
                                           Param{"shm", 8, 1}, Param{"shm", 9, 1}, Param{"tcp", 3, 1},
                                           Param{"shm", 2, 2}, Param{"shm", 3, 2}, Param{"shm", 6, 2},
                                           Param{"tcp", 4, 2}, Param{"shm", 5, 3}),
                         paramName);

}  // namespace
}  // namespace mixccl::testing
