// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Every algorithm forced through NCCL_ALGO, ranks as threads: each algorithm that has a form of
// some collective (forcibleAlgorithms(), derived from algoSupports: ring, pairwise and direct
// included, since the tuner prefers others at some sizes) at 1-9 and 16 ranks over shm and over
// TCP, checking exactly the collectives it has a form of (tests/support/coll_checks.h; the others
// would run the tuner's choice, which coll_test.cc covers).
//
// Every (algorithm, ranks, transport) cell runs: one transport with the full matrix (every dtype
// x op x count), the other with the light one (every dtype x op at the odd count, every count in
// one dtype per element size), the transport of the full one alternating with the rank count and
// the algorithm. So every cell sees every dtype, op, count and placement, and every (algorithm,
// ranks) and (algorithm, transport) pair sees the whole matrix, for about two thirds of the time
// of the whole matrix everywhere. Test names say transport, ranks and algorithm:
// FullMatrix/CollAlgoTest.Exact/tcp_np5_one_shot.

#include <gtest/gtest.h>
#include <nccl.h>

#include <cstdlib>
#include <iterator>
#include <ostream>
#include <string>
#include <vector>

#include "common/config.h"
#include "tests/support/algo_policy.h"
#include "tests/support/coll_checks.h"
#include "tests/support/rank_threads.h"

namespace mixccl::testing {
namespace {

struct Param {
  const char* transport;
  int nranks;
  algo::Algo algo;
  Matrix matrix;
};

// Readable parameter in test logs (instead of gtest's byte dump).
void PrintTo(const Param& p, std::ostream* os) {
  *os << p.transport << " x " << p.nranks << " ranks, NCCL_ALGO=" << algorithmPolicy(p.algo) << ", "
      << matrixName(p.matrix) << " matrix";
}

std::string paramName(const ::testing::TestParamInfo<Param>& info) {
  return std::string(info.param.transport) + "_np" + std::to_string(info.param.nranks) + "_" +
         algoTestName(info.param.algo);
}

constexpr int kRankCounts[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 16};

// The cells that run matrix `m` (see the top of the file).
std::vector<Param> cells(Matrix m) {
  std::vector<Param> out;
  const std::vector<algo::Algo> algos = forcibleAlgorithms();
  for (size_t a = 0; a < algos.size(); ++a) {
    for (size_t i = 0; i < std::size(kRankCounts); ++i) {
      const bool fullOverTcp = (a + i) % 2 == 1;
      const bool tcp = m == Matrix::kFull ? fullOverTcp : !fullOverTcp;
      out.push_back(Param{tcp ? "tcp" : "shm", kRankCounts[i], algos[a], m});
    }
  }
  return out;
}

class CollAlgoTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    setCollTestEnv(GetParam().transport);
    setenv("NCCL_ALGO", algorithmPolicy(GetParam().algo).c_str(), 1);
    config::resetForTesting();
  }
  void TearDown() override {
    unsetenv("NCCL_ALGO");
    config::resetForTesting();
  }
};

TEST_P(CollAlgoTest, Exact) {
  const int n = GetParam().nranks;
  const uint32_t kinds = collectivesOf(GetParam().algo);
  ASSERT_NE(kinds, 0u);
  runRanks(n, [&](int rank, ncclComm_t comm) {
    checkReductions(rank, n, comm, GetParam().matrix, kinds);
    if (::testing::Test::HasFailure()) return;
    checkDataMovement(rank, n, comm, GetParam().matrix, kinds);
  });
}

INSTANTIATE_TEST_SUITE_P(FullMatrix, CollAlgoTest, ::testing::ValuesIn(cells(Matrix::kFull)), paramName);
INSTANTIATE_TEST_SUITE_P(LightMatrix, CollAlgoTest, ::testing::ValuesIn(cells(Matrix::kLight)), paramName);

}  // namespace
}  // namespace mixccl::testing
