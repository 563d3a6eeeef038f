// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
#pragma once

// Communicators of one unique id, ranks as threads of this process, each rank on a device
// backend the test chooses (CommOptions::backend), so one process can hold a mixed communicator
// (host ranks beside OpenCL ranks) and an all-host one side by side. The handles are ordinary
// public ncclComm_t: the test drives them through include/nccl.h.
//
// The backends are not owned and must outlive the communicators (destroy() first).

#include <gtest/gtest.h>
#include <nccl.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/result.h"
#include "src/api/handle.h"
#include "src/core/bootstrap.h"
#include "src/core/communicator.h"
#include "src/device/device_backend.h"

namespace mixccl::testing {

class BackendRanks {
 public:
  // One communicator per entry of `backends` (rank r on backends[r]); initialised concurrently.
  // With expectInit false, a failing init is no test failure: initResult()/initError() tell.
  explicit BackendRanks(const std::vector<DeviceBackend*>& backends, bool expectInit = true)
      : comms_(backends.size(), nullptr), results_(backends.size(), Result::kSuccess), errors_(backends.size()) {
    const int n = static_cast<int>(backends.size());
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess) {
      ADD_FAILURE() << "ncclGetUniqueId: " << ncclGetLastError(nullptr);
      return;
    }
    UniqueIdData data;
    if (UniqueIdData::decode(reinterpret_cast<const uint8_t*>(id.internal), &data) != Result::kSuccess) {
      ADD_FAILURE() << "unique id does not decode: " << lastError();
      return;
    }
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        CommOptions options;
        options.backend = backends[r];
        std::unique_ptr<Communicator> c;
        results_[r] = Communicator::create(data, n, r, options, &c);
        if (results_[r] != Result::kSuccess) {
          errors_[r] = lastError();
          if (expectInit) ADD_FAILURE() << "rank " << r << " (" << backends[r]->name() << ") init: " << errors_[r];
          return;
        }
        comms_[r] = api::registerComm(std::move(c));
      });
    }
    for (auto& t : threads) t.join();
  }
  ~BackendRanks() { destroy(); }
  BackendRanks(const BackendRanks&) = delete;
  BackendRanks& operator=(const BackendRanks&) = delete;

  bool ok() const {
    return !comms_.empty() && std::none_of(comms_.begin(), comms_.end(), [](ncclComm_t c) { return c == nullptr; });
  }
  int size() const { return static_cast<int>(comms_.size()); }
  ncclComm_t comm(int r) const { return comms_[r]; }
  Result initResult(int r) const { return results_[r]; }
  const std::string& initError(int r) const { return errors_[r]; }
  // Forgets rank r's handle (the test aborted or destroyed it itself).
  void forget(int r) { comms_[r] = nullptr; }

  // Destroys every communicator, concurrently (destroy may wait for peers).
  void destroy() {
    std::vector<std::thread> threads;
    for (ncclComm_t& c : comms_) {
      if (c == nullptr) continue;
      threads.emplace_back([&c] {
        EXPECT_EQ(ncclCommDestroy(c), ncclSuccess) << ncclGetLastError(nullptr);
        c = nullptr;
      });
    }
    for (auto& t : threads) t.join();
  }

 private:
  std::vector<ncclComm_t> comms_;
  std::vector<Result> results_;
  std::vector<std::string> errors_;
};

// Runs body(rank) on one thread per rank and joins them.
inline void onRankThreads(int n, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { body(r); });
  for (auto& t : threads) t.join();
}

}  // namespace mixccl::testing
