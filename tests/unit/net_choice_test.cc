// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// NCCL_NET and NCCL_IB_DISABLE (transports/net_choice.h), and what the RDMA transport's listen()
// makes of them on a machine without an RDMA device: NCCL's results (a network that is named but
// cannot be had fails init with ncclInvalidUsage), and the quiet fall-back to TCP otherwise.

#include "transports/net_choice.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/support/env_guard.h"
#include "transports/rdma/rdma_presence.h"
#include "transports/registry.h"

namespace mixccl {
namespace {

using testing::EnvGuard;

TEST(NetChoice, UnsetMeansRdmaWhereBothHaveIt) {
  NetChoice c;
  ASSERT_EQ(netChoice(&c), Result::kSuccess);
  EXPECT_TRUE(c.wantIb);
  EXPECT_FALSE(c.forceIb);
}

TEST(NetChoice, NamesAreCaseInsensitive) {
  {
    EnvGuard net("NCCL_NET", "ib");
    NetChoice c;
    ASSERT_EQ(netChoice(&c), Result::kSuccess);
    EXPECT_TRUE(c.wantIb);
    EXPECT_TRUE(c.forceIb);
  }
  EnvGuard net("NCCL_NET", "SOCKET");
  NetChoice c;
  ASSERT_EQ(netChoice(&c), Result::kSuccess);
  EXPECT_FALSE(c.wantIb);
  EXPECT_FALSE(c.forceIb);
}

// NCCL: no network plugin of that name -> "Failed to initialize any NET plugin", ncclInvalidUsage.
TEST(NetChoice, UnknownNetworkIsInvalidUsage) {
  EnvGuard net("NCCL_NET", "Verbs");
  NetChoice c;
  EXPECT_EQ(netChoice(&c), Result::kInvalidUsage);
  EXPECT_NE(lastError().find("NCCL_NET=Verbs"), std::string::npos) << lastError();
}

// NCCL: NCCL_IB_DISABLE=1 keeps the IB plugin from starting, so NCCL_NET=IB finds no network and
// init fails (ncclInvalidUsage); it never carries the job over sockets instead.
TEST(NetChoice, IbRequestedButDisabledIsInvalidUsage) {
  EnvGuard net("NCCL_NET", "IB");
  EnvGuard off("NCCL_IB_DISABLE", "1");
  NetChoice c;
  EXPECT_EQ(netChoice(&c), Result::kInvalidUsage);
  EXPECT_NE(lastError().find("NCCL_IB_DISABLE"), std::string::npos) << lastError();
}

TEST(NetChoice, IbDisabledAloneTurnsRdmaOff) {
  EnvGuard off("NCCL_IB_DISABLE", "1");
  NetChoice c;
  ASSERT_EQ(netChoice(&c), Result::kSuccess);
  EXPECT_FALSE(c.wantIb);
  EXPECT_FALSE(c.forceIb);
}

class RdmaWithoutDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    if (findTransport("rdma") == nullptr) GTEST_SKIP() << "this build has no RDMA transport";
    if (anyRdmaDevice()) GTEST_SKIP() << "this machine has an RDMA device";
  }
  Result listen(std::vector<uint8_t>* blob) {
    TransportContext c;
    c.slotBytes = 4096;
    c.fifoDepth = 2;
    return findTransport("rdma")->make(c)->listen(blob);
  }
};

TEST_F(RdmaWithoutDevice, FallsBackToTcp) {
  std::vector<uint8_t> blob{1, 2, 3};
  EXPECT_EQ(listen(&blob), Result::kSuccess);
  EXPECT_TRUE(blob.empty());
}

// NCCL: NCCL_NET=IB on a host without a device fails init with ncclInvalidUsage.
TEST_F(RdmaWithoutDevice, NetIbIsInvalidUsage) {
  EnvGuard net("NCCL_NET", "IB");
  std::vector<uint8_t> blob;
  EXPECT_EQ(listen(&blob), Result::kInvalidUsage);
  EXPECT_NE(lastError().find("no usable RDMA device"), std::string::npos) << lastError();
  EXPECT_TRUE(blob.empty());
}

}  // namespace
}  // namespace mixccl
