// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Runs `nranks` ranks as threads of this process, each with its own communicator made from one
// unique id, and calls body(rank, comm) on every thread. Failures inside body use gtest's
// thread-safe ADD_FAILURE/EXPECT_*.

#include <gtest/gtest.h>
#include <nccl.h>

#include <functional>
#include <thread>
#include <vector>

namespace mixccl::testing {

inline void runRanks(int nranks, const std::function<void(int, ncclComm_t)>& body) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      ncclComm_t comm = nullptr;
      ncclResult_t res = ncclCommInitRank(&comm, nranks, id, r);
      if (res != ncclSuccess) {
        ADD_FAILURE() << "rank " << r << " init failed: " << ncclGetErrorString(res) << ": "
                      << ncclGetLastError(nullptr);
        return;
      }
      body(r, comm);
      EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
    });
  }
  for (auto& t : threads) t.join();
}

// `nranks` communicators of one new unique id, initialised by this thread in one group (each
// ncclCommInitRank would wait for the others outside it). Failures are EXPECT failures; a rank
// whose init failed has a NULL communicator.
inline std::vector<ncclComm_t> initComms(int nranks) {
  ncclUniqueId id;
  EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<ncclComm_t> comms(nranks);
  EXPECT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < nranks; ++r) EXPECT_EQ(ncclCommInitRank(&comms[r], nranks, id, r), ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  return comms;
}

}  // namespace mixccl::testing
