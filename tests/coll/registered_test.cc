// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Collectives and send/recv on buffers registered with ncclCommRegister, ranks as threads. Over
// RDMA (the rdma instances: a device is needed, scripts/rdma-check.sh runs them in a soft-RoCE
// VM) registered buffers travel zero-copy: plain sends leave the payload in the sender's buffer
// and the receiver reads it, landing straight in its registered output, several messages ahead.
// The results must be exactly those of the slot path, in-place calls included (their input is
// written by the call, so it must not be sent zero-copy), and deregistering then registering the
// same memory again must keep working. Over shm and TCP registration changes nothing.

#include <gtest/gtest.h>
#include <nccl.h>

#include <cstdlib>
#include <ostream>
#include <string>
#include <vector>

#include "common/config.h"
#include "tests/support/rank_threads.h"
#include "transports/rdma/rdma_presence.h"

namespace mixccl::testing {
namespace {

struct Param {
  const char* transport;
  int nranks;
};

void PrintTo(const Param& p, std::ostream* os) { *os << p.transport << " x " << p.nranks << " ranks"; }

std::string paramName(const ::testing::TestParamInfo<Param>& info) {
  return std::string(info.param.transport) + "_np" + std::to_string(info.param.nranks);
}

// Exact in float for every rank and index used here (< 2^24).
float valueOf(int rank, size_t i) { return static_cast<float>(rank * 1000003 + i); }

class RegisteredTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    const std::string t = GetParam().transport;
    if (t == "rdma" && !anyRdmaDevice()) GTEST_SKIP() << "no RDMA device (scripts/rdma-check.sh runs these in a VM)";
    setenv("NCCL_SHM_DISABLE", t == "shm" ? "0" : "1", 1);
    setenv("NCCL_NET", t == "rdma" ? "IB" : "Socket", 1);
    setenv("MIXCCL_CHUNK_SIZE", "131072", 1);  // zero-copy from 64 KiB (MIXCCL_IB_ZCOPY_MIN)
    setenv("MIXCCL_FIFO_DEPTH", "4", 1);
    setenv("MIXCCL_TIMEOUT", "120", 1);
    config::resetForTesting();
  }
  void TearDown() override {
    unsetenv("NCCL_NET");
    config::resetForTesting();
  }
  int n() const { return GetParam().nranks; }
};

TEST_P(RegisteredTest, ResultsMatchTheSlotPath) {
  const int n = this->n();
  // Several chunks per message stream, and an odd tail.
  const size_t count = 3 * (131072 / sizeof(float)) + 5;
  runRanks(n, [&](int rank, ncclComm_t comm) {
    std::vector<float> in(count * n), out(count * n);
    for (size_t i = 0; i < in.size(); ++i) in[i] = valueOf(rank, i);
    void* hin = nullptr;
    void* hout = nullptr;
    auto reg = [&] {
      ASSERT_EQ(ncclCommRegister(comm, in.data(), in.size() * sizeof(float), &hin), ncclSuccess);
      ASSERT_EQ(ncclCommRegister(comm, out.data(), out.size() * sizeof(float), &hout), ncclSuccess);
    };
    auto dereg = [&] {
      ASSERT_EQ(ncclCommDeregister(comm, hin), ncclSuccess);
      ASSERT_EQ(ncclCommDeregister(comm, hout), ncclSuccess);
    };
    auto clearOut = [&] { std::fill(out.begin(), out.end(), -1.0f); };
    const int next = (rank + 1) % n;
    const int prev = (rank + n - 1) % n;
    for (int round = 0; round < 2; ++round) {
      SCOPED_TRACE("round " + std::to_string(round));
      reg();
      // AllGather, out of place.
      clearOut();
      ASSERT_EQ(ncclAllGather(in.data(), out.data(), count, ncclFloat32, comm, nullptr), ncclSuccess)
          << ncclGetLastError(comm);
      for (int r = 0; r < n; ++r) {
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(out[r * count + i], valueOf(r, i)) << "allgather r" << r;
      }
      // AllGather in place: this rank's input is a slice of the output the call writes.
      clearOut();
      for (size_t i = 0; i < count; ++i) out[rank * count + i] = valueOf(rank, i);
      ASSERT_EQ(ncclAllGather(out.data() + rank * count, out.data(), count, ncclFloat32, comm, nullptr), ncclSuccess)
          << ncclGetLastError(comm);
      for (int r = 0; r < n; ++r) {
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(out[r * count + i], valueOf(r, i)) << "in-place r" << r;
      }
      // Broadcast from the last rank.
      clearOut();
      ASSERT_EQ(ncclBroadcast(in.data(), out.data(), count, ncclFloat32, n - 1, comm, nullptr), ncclSuccess)
          << ncclGetLastError(comm);
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(out[i], valueOf(n - 1, i)) << "broadcast";
      // A ring of send/recv.
      clearOut();
      ASSERT_EQ(ncclGroupStart(), ncclSuccess);
      ASSERT_EQ(ncclSend(in.data(), count, ncclFloat32, next, comm, nullptr), ncclSuccess);
      ASSERT_EQ(ncclRecv(out.data(), count, ncclFloat32, prev, comm, nullptr), ncclSuccess);
      ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(comm);
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(out[i], valueOf(prev, i)) << "sendrecv";
      // AlltoAll: block p of rank r's input goes to block r of rank p's output.
      clearOut();
      ASSERT_EQ(ncclAlltoAll(in.data(), out.data(), count, ncclFloat32, comm, nullptr), ncclSuccess)
          << ncclGetLastError(comm);
      for (int r = 0; r < n; ++r) {
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(out[r * count + i], valueOf(r, rank * count + i)) << "a2a r" << r;
      }
      // An all-reduce on the same registered memory (reductions keep the slot path).
      std::vector<float> sum(count);
      ASSERT_EQ(ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess)
          << ncclGetLastError(comm);
      for (size_t i = 0; i < count; i += 997) {
        float want = 0;
        for (int r = 0; r < n; ++r) want += valueOf(r, i);
        ASSERT_EQ(out[i], want) << "allreduce " << i;
      }
      dereg();  // and the next round registers the same memory again
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Transports, RegisteredTest,
                         ::testing::Values(Param{"shm", 2}, Param{"tcp", 3}, Param{"rdma", 2}, Param{"rdma", 4}),
                         paramName);

}  // namespace
}  // namespace mixccl::testing
