// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// MIXCCL_DETERMINISTIC=1: AllReduce, ReduceScatter and Reduce give the same bytes whatever
// NCCL_ALGO says, whatever the chunk size and transport, in and out of place: the left fold over
// ranks 0..p-1, rounded after every addition as docs/PROTOCOL.md ("Arithmetic") specifies.
// Inputs span many binades so that another order of addition rounds differently, and the test
// shows it does: without the mode, the forced algorithms disagree with the fold.

#include <gtest/gtest.h>
#include <nccl.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/config.h"
#include "tests/support/env_guard.h"
#include "tests/support/rank_threads.h"
#include "tests/support/values.h"

namespace mixccl::testing {
namespace {

constexpr int kHalf = 6, kFloat = 7, kBf16 = 9;  // ncclDataType_t values
constexpr uint64_t kCount = 20011;               // per rank block (ReduceScatter) and whole buffer

// Rank r's element i: a signed integer below 1000 times 2^-e, e in [0, 12]: exact in float, and
// sums whose rounding depends on the order of addition in every format tested.
double inputValue(int r, uint64_t i) {
  uint64_t h = (static_cast<uint64_t>(r) + 1) * 0x9E3779B97F4A7C15ull ^ (i + 1) * 0xC2B2AE3D27D4EB4Full;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  const double m = static_cast<double>(static_cast<int64_t>(h % 1999) - 999);
  return std::ldexp(m, -static_cast<int>((h >> 20) % 13));
}

// The value of one element as the datatype holds it, widened to float (exactly).
float widen(int t, const uint8_t* p) {
  uint16_t h;
  float f;
  switch (t) {
    case kHalf:
      memcpy(&h, p, 2);
      return fmt16::halfToFloat(h);
    case kBf16:
      memcpy(&h, p, 2);
      return fmt16::bf16ToFloat(h);
    default:
      memcpy(&f, p, 4);
      return f;
  }
}

void narrow(int t, float v, uint8_t* p) {
  uint16_t h;
  switch (t) {
    case kHalf:
      h = fmt16::floatToHalf(v);
      return static_cast<void>(memcpy(p, &h, 2));
    case kBf16:
      h = fmt16::floatToBf16(v);
      return static_cast<void>(memcpy(p, &h, 2));
    default:
      return static_cast<void>(memcpy(p, &v, 4));
  }
}

std::vector<uint8_t> inputOf(int t, int r, uint64_t elems) {
  std::vector<uint8_t> in(elems * typeSize(t));
  for (uint64_t i = 0; i < elems; ++i) encode(t, inputValue(r, i), &in[i * typeSize(t)]);
  return in;
}

// The rank-order fold of element i over n ranks, narrowed after every addition.
std::vector<uint8_t> foldReference(int t, int n, uint64_t elems) {
  const size_t es = typeSize(t);
  std::vector<std::vector<uint8_t>> in;
  for (int r = 0; r < n; ++r) in.push_back(inputOf(t, r, elems));
  std::vector<uint8_t> out(elems * es);
  for (uint64_t i = 0; i < elems; ++i) {
    uint8_t acc[4];
    memcpy(acc, &in[0][i * es], es);
    for (int r = 1; r < n; ++r) narrow(t, widen(t, acc) + widen(t, &in[r][i * es]), acc);
    memcpy(&out[i * es], acc, es);
  }
  return out;
}

// What every rank got from one configuration: per dtype, the AllReduce result (out of place and
// in place), this rank's ReduceScatter block, and the Reduce result on root 1.
struct Results {
  std::vector<std::vector<uint8_t>> perRank[3];  // indexed like kTypes
};
constexpr int kTypes[3] = {kFloat, kHalf, kBf16};

Results runAll(int n) {
  Results res;
  for (auto& v : res.perRank) v.assign(n, {});
  runRanks(n, [&](int rank, ncclComm_t comm) {
    for (int k = 0; k < 3; ++k) {
      const int t = kTypes[k];
      const size_t es = typeSize(t);
      const auto dt = static_cast<ncclDataType_t>(t);
      std::vector<uint8_t> got;
      const std::vector<uint8_t> in = inputOf(t, rank, kCount);
      std::vector<uint8_t> out(kCount * es);
      EXPECT_EQ(ncclAllReduce(in.data(), out.data(), kCount, dt, ncclSum, comm, nullptr), ncclSuccess)
          << ncclGetLastError(comm);
      got.insert(got.end(), out.begin(), out.end());
      std::vector<uint8_t> inPlace = in;
      EXPECT_EQ(ncclAllReduce(inPlace.data(), inPlace.data(), kCount, dt, ncclSum, comm, nullptr), ncclSuccess)
          << ncclGetLastError(comm);
      got.insert(got.end(), inPlace.begin(), inPlace.end());
      // ReduceScatter: rank r's Input is n blocks; block b holds elements b*kCount.. of the
      // reference's index space, so block r of the result is reference elements r*kCount...
      std::vector<uint8_t> big = inputOf(t, rank, kCount * n);
      std::vector<uint8_t> block(kCount * es);
      EXPECT_EQ(ncclReduceScatter(big.data(), block.data(), kCount, dt, ncclSum, comm, nullptr), ncclSuccess)
          << ncclGetLastError(comm);
      got.insert(got.end(), block.begin(), block.end());
      std::vector<uint8_t> red(kCount * es);
      EXPECT_EQ(ncclReduce(in.data(), red.data(), kCount, dt, ncclSum, n > 1 ? 1 : 0, comm, nullptr), ncclSuccess)
          << ncclGetLastError(comm);
      if (rank == (n > 1 ? 1 : 0)) got.insert(got.end(), red.begin(), red.end());
      res.perRank[k][rank] = std::move(got);
    }
  });
  return res;
}

// What each rank must hold: the reference fold, arranged as runAll() records it.
Results expected(int n) {
  Results res;
  for (int k = 0; k < 3; ++k) {
    const int t = kTypes[k];
    const size_t es = typeSize(t);
    const std::vector<uint8_t> whole = foldReference(t, n, kCount);
    const std::vector<uint8_t> blocks = foldReference(t, n, kCount * n);
    for (int r = 0; r < n; ++r) {
      std::vector<uint8_t> want = whole;
      want.insert(want.end(), whole.begin(), whole.end());
      want.insert(want.end(), blocks.begin() + r * kCount * es, blocks.begin() + (r + 1) * kCount * es);
      if (r == (n > 1 ? 1 : 0)) want.insert(want.end(), whole.begin(), whole.end());
      res.perRank[k].push_back(std::move(want));
    }
  }
  return res;
}

// Where `got` first differs from `want`, for the failure message ("" when equal).
std::string firstDifference(const Results& got, const Results& want) {
  for (int k = 0; k < 3; ++k) {
    for (size_t r = 0; r < want.perRank[k].size(); ++r) {
      const auto& g = got.perRank[k][r];
      const auto& w = want.perRank[k][r];
      if (g.size() != w.size()) return std::string(typeName(kTypes[k])) + " rank " + std::to_string(r) + ": size";
      for (size_t b = 0; b < g.size(); ++b) {
        if (g[b] != w[b]) {
          return std::string(typeName(kTypes[k])) + " rank " + std::to_string(r) + " byte " + std::to_string(b) +
                 " of " + std::to_string(g.size());
        }
      }
    }
  }
  return "";
}

struct Param {
  const char* transport;
  int nranks;
};

class DeterministicTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    setenv("NCCL_SHM_DISABLE", std::string(GetParam().transport) == "tcp" ? "1" : "0", 1);
    setenv("MIXCCL_TIMEOUT", "120", 1);
    config::resetForTesting();
  }
  void TearDown() override {
    unsetenv("NCCL_SHM_DISABLE");
    config::resetForTesting();
  }
};

// Every algorithm choice the reducing collectives have (NCCL's names and mixccl's), and the
// tuner's own, at three chunk sizes (4 KiB, the smallest slot, splits every block into many pieces).
const char* const kPolicies[] = {
    "",
    "Ring",
    "Tree",
    "allreduce:recursive-doubling;reducescatter:recursive-halving;reduce:binomial-tree",
    "allreduce:rabenseifner",
    "allreduce:one-shot",
    "allreduce:ordered;reducescatter:ordered;reduce:ordered",
};

TEST_P(DeterministicTest, EveryAlgorithmAndChunkSizeGivesTheRankOrderFold) {
  const int n = GetParam().nranks;
  const Results want = expected(n);
  EnvGuard det("MIXCCL_DETERMINISTIC", "1");
  for (const char* chunk : {"4096", "16384", "524288"}) {
    EnvGuard chunkSize("MIXCCL_CHUNK_SIZE", chunk);
    for (const char* policy : kPolicies) {
      EnvGuard algo("NCCL_ALGO", policy);
      const std::string diff = firstDifference(runAll(n), want);
      EXPECT_EQ(diff, "") << "NCCL_ALGO=\"" << policy << "\" MIXCCL_CHUNK_SIZE=" << chunk;
    }
  }
}

// The control: without the mode, some forced algorithm folds in another order and its bytes
// differ from the fold's, so the inputs above do tell orders apart.
TEST_P(DeterministicTest, WithoutTheModeAlgorithmsRoundDifferently) {
  const int n = GetParam().nranks;
  const Results want = expected(n);
  int differing = 0;
  for (const char* policy : {"Ring", "allreduce:recursive-doubling;reducescatter:recursive-halving"}) {
    EnvGuard algo("NCCL_ALGO", policy);
    differing += firstDifference(runAll(n), want).empty() ? 0 : 1;
  }
  EXPECT_GT(differing, 0);
}

INSTANTIATE_TEST_SUITE_P(Transports, DeterministicTest,
                         ::testing::Values(Param{"shm", 3}, Param{"shm", 4}, Param{"shm", 7}, Param{"tcp", 3},
                                           Param{"tcp", 4}, Param{"tcp", 7}),
                         [](const auto& info) {
                           return std::string(info.param.transport) + "_np" + std::to_string(info.param.nranks);
                         });

}  // namespace
}  // namespace mixccl::testing
