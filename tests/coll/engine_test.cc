// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// The asynchronous engine (docs/ENGINE.md, src/core/engine.h) through the public API, with ranks
// as threads and the fake asynchronous backend of tests/support/async_backend.h: calls on a
// stream return before the work that produces their input ran; work enqueued after them waits for
// them; every failure (mismatch, abort, deadline, a peer that left) releases the streams.

#include "src/core/engine.h"

#include <gtest/gtest.h>
#include <nccl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "src/api/handle.h"
#include "src/core/communicator.h"
#include "tests/support/async_backend.h"
#include "tests/support/backend_ranks.h"
#include "tests/support/env_guard.h"
#include "tests/support/thread_names.h"

namespace mixccl::testing {
namespace {

using Clock = std::chrono::steady_clock;

// A FakeStream passed where the API takes a cudaStream_t (the backend casts it back).
struct UserStream {
  FakeStream* fake;
  operator cudaStream_t() const { return reinterpret_cast<cudaStream_t>(fake); }
  FakeStream* operator->() const { return fake; }
};

// `nranks` communicators of one unique id, each on its own AsyncBackend (one device per rank).
class AsyncRanks {
 public:
  explicit AsyncRanks(int nranks) : nranks_(nranks), comms_(nranks, nullptr) {
    for (int r = 0; r < nranks; ++r) backends_.push_back(std::make_unique<AsyncBackend>());
    ncclUniqueId id;
    EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    UniqueIdData data;
    EXPECT_EQ(UniqueIdData::decode(reinterpret_cast<const uint8_t*>(id.internal), &data), Result::kSuccess);
    std::vector<std::thread> threads;
    for (int r = 0; r < nranks; ++r) {
      threads.emplace_back([&, r] {
        CommOptions options;
        options.backend = backends_[r].get();
        std::unique_ptr<Communicator> c;
        Result res = Communicator::create(data, nranks, r, options, &c);
        if (res != Result::kSuccess) {
          ADD_FAILURE() << "rank " << r << " init: " << lastError();
          return;
        }
        comms_[r] = api::registerComm(std::move(c));
      });
    }
    for (auto& t : threads) t.join();
  }
  ~AsyncRanks() {
    for (ncclComm_t c : comms_) {
      if (c != nullptr) {
        EXPECT_EQ(ncclCommDestroy(c), ncclSuccess) << ncclGetLastError(nullptr);
      }
    }
  }
  bool ok() const {
    return std::none_of(comms_.begin(), comms_.end(), [](ncclComm_t c) { return c == nullptr; });
  }
  ncclComm_t comm(int r) const { return comms_[r]; }
  AsyncBackend& backend(int r) { return *backends_[r]; }
  // Aborts rank r's communicator (it is gone afterwards).
  void abort(int r) {
    EXPECT_EQ(ncclCommAbort(comms_[r]), ncclSuccess);
    comms_[r] = nullptr;
  }
  // Runs body(rank) on one thread per rank.
  void run(const std::function<void(int)>& body) {
    std::vector<std::thread> threads;
    for (int r = 0; r < nranks_; ++r) threads.emplace_back([&, r] { body(r); });
    for (auto& t : threads) t.join();
  }

 private:
  int nranks_;
  std::vector<std::unique_ptr<AsyncBackend>> backends_;  // outlive the communicators (destroyed later)
  std::vector<ncclComm_t> comms_;
};

// Waits (bounded) until the communicator reports an asynchronous error; returns it.
ncclResult_t waitAsyncError(ncclComm_t comm, std::chrono::seconds limit) {
  const auto until = Clock::now() + limit;
  ncclResult_t e = ncclSuccess;
  while (Clock::now() < until) {
    EXPECT_EQ(ncclCommGetAsyncError(comm, &e), ncclSuccess);
    if (e != ncclSuccess && e != ncclInProgress) return e;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return e;
}

// Waits (bounded) until `be` released at least `n` stream gates; returns how many it released. A
// failed batch's gates open after its error is reported: the engine first gives device work
// already issued up to 500 ms to finish (docs/ENGINE.md).
int waitGatesReleased(const AsyncBackend& be, int n) {
  const auto until = Clock::now() + std::chrono::seconds(5);
  while (be.gatesReleased() < n && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return be.gatesReleased();
}

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// A host rank whose same-host peer computes on the host's cores (a CPU device) must not spin
// while it waits (runStreams' back-off): every rank of the host learns it from the peer table.
TEST(EngineTest, EveryRankOfAHostKnowsADeviceThereSharesItsCores) {
  for (bool shares : {false, true}) {
    std::unique_ptr<DeviceBackend> host = makeHostBackend();
    AsyncBackend device;
    device.setSharesHostCores(shares);
    BackendRanks ranks({host.get(), &device, host.get()});
    ASSERT_TRUE(ranks.ok());
    for (int r = 0; r < ranks.size(); ++r) {
      EXPECT_EQ(ranks.comm(r)->impl->deviceOnHostCores(), shares)
          << "rank " << r << ", device shares cores: " << shares;
    }
  }
}

TEST(EngineTest, CallReturnsBeforeProducerAndLaterWorkWaits) {
  constexpr int kRanks = 2;
  constexpr size_t kCount = 300000;  // several chunks
  AsyncRanks ranks(kRanks);
  ASSERT_TRUE(ranks.ok());
  ranks.run([&](int r) {
    AsyncBackend& be = ranks.backend(r);
    UserStream s{be.makeStream()};
    std::vector<float> in(kCount, 0.0f), out(kCount, -1.0f);
    Latch producer;
    // The "kernel" that writes the input, held by a user event.
    s->enqueue([&] {
      EXPECT_TRUE(producer.wait());
      std::fill(in.begin(), in.end(), static_cast<float>(r + 1));
    });
    ASSERT_EQ(ncclAllReduce(in.data(), out.data(), kCount, ncclFloat32, ncclSum, ranks.comm(r), s), ncclSuccess)
        << ncclGetLastError(nullptr);
    // Returned while the producer still waits: nothing could have run yet.
    EXPECT_EQ(out[0], -1.0f);
    // The communicator's progress thread holds the work, under a name tools show.
    const std::vector<std::string> names = threadNames();
    EXPECT_NE(std::find(names.begin(), names.end(), "mixccl-prog " + std::to_string(r)), names.end());
    std::atomic<bool> laterSawResult{false};
    s->enqueue([&] { laterSawResult = out[0] == 3.0f && out[kCount - 1] == 3.0f; });
    producer.open();
    ASSERT_TRUE(s->sync());
    EXPECT_TRUE(laterSawResult.load()) << "work enqueued after the collective ran before it completed";
    for (size_t i = 0; i < kCount; i += 997) ASSERT_EQ(out[i], 3.0f) << "element " << i;
    EXPECT_EQ(be.gatesHeld(), be.gatesReleased());
  });
}

// A slow device: the engine keeps several steps of a stream in flight (their work issued, their
// slots not yet committed), commits them in order, and the result is still exact.
TEST(EngineTest, SeveralStepsInFlight) {
  constexpr int kRanks = 3;
  constexpr size_t kCount = 64 * 1024;  // 64 chunks of 4096 bytes per rank
  EnvGuard chunk("MIXCCL_CHUNK_SIZE", "4096");
  AsyncRanks ranks(kRanks);
  ASSERT_TRUE(ranks.ok());
  ranks.run([&](int r) {
    AsyncBackend& be = ranks.backend(r);
    be.setTaskDelay(std::chrono::microseconds(200));
    UserStream s{be.makeStream()};
    std::vector<int32_t> in(kCount), out(kCount, -1);
    for (size_t i = 0; i < kCount; ++i) in[i] = static_cast<int32_t>(i * 7 + r);
    ASSERT_EQ(ncclAllReduce(in.data(), out.data(), kCount, ncclInt32, ncclSum, ranks.comm(r), s), ncclSuccess)
        << ncclGetLastError(nullptr);
    ASSERT_TRUE(s->sync());
    for (size_t i = 0; i < kCount; ++i) {
      ASSERT_EQ(out[i], static_cast<int32_t>(3 * i * 7 + 0 + 1 + 2)) << "element " << i << " on rank " << r;
    }
    EXPECT_GT(be.maxFencesInFlight(), 1) << "one step at a time: the device's latency is not hidden";
    EXPECT_EQ(be.gatesHeld(), be.gatesReleased());
  });
}

// A ring round carries four adjacent pieces per segment (algorithms/ring_pass.h); a device rank
// covers the pieces issued together with one command (src/core/step_work.h). 2 ranks, 4 rounds of
// 4 sends, 4 receive-reduce-sends and 4 receives = 48 steps per rank. How many runs form depends
// on timing, but the first round's four sends need only free slots, so they are always one
// command; the result must be exact either way.
TEST(EngineTest, AdjacentPiecesShareACommand) {
  constexpr int kRanks = 2;
  constexpr size_t kChunk = 1024;                     // int32 elements per 4096-byte slot
  constexpr size_t kCount = kRanks * 4 * kChunk * 4;  // 4 rounds of 4 pieces per segment
  constexpr int kSteps = 4 * 12;
  EnvGuard chunk("MIXCCL_CHUNK_SIZE", "4096");
  EnvGuard depth("MIXCCL_FIFO_DEPTH", "8");
  AsyncRanks ranks(kRanks);
  ASSERT_TRUE(ranks.ok());
  ranks.run([&](int r) {
    AsyncBackend& be = ranks.backend(r);
    be.setTaskDelay(std::chrono::microseconds(100));
    UserStream s{be.makeStream()};
    std::vector<int32_t> buf(kCount);
    for (size_t i = 0; i < kCount; ++i) buf[i] = static_cast<int32_t>(i * 5 + r);
    ASSERT_EQ(ncclAllReduce(buf.data(), buf.data(), kCount, ncclInt32, ncclSum, ranks.comm(r), s), ncclSuccess)
        << ncclGetLastError(nullptr);
    ASSERT_TRUE(s->sync());
    for (size_t i = 0; i < kCount; ++i) {
      ASSERT_EQ(buf[i], static_cast<int32_t>(2 * i * 5 + 1)) << "element " << i << " on rank " << r;
    }
    // Receive-reduce-sends are one reduction each (the backend's default reduceDual adds a copy).
    const int perStep = kSteps + 4 * 4;
    EXPECT_LE(be.commands(), perStep - 3) << "no adjacent pieces were covered by one command";
    std::printf("rank %d: %d device commands for %d steps (%d one per step)\n", r, be.commands(), kSteps, perStep);
  });
}

class EngineGroupTest : public ::testing::TestWithParam<int> {};

// Every collective kind and send/recv in one group on one stream, results checked per element.
TEST_P(EngineGroupTest, CollectivesInAGroup) {
  const int n = GetParam();
  constexpr size_t kCount = 70001;  // odd; a quarter MiB of floats per buffer
  AsyncRanks ranks(n);
  ASSERT_TRUE(ranks.ok());
  ranks.run([&](int r) {
    AsyncBackend& be = ranks.backend(r);
    UserStream s{be.makeStream()};
    ncclComm_t comm = ranks.comm(r);
    void* devIn = nullptr;  // one buffer in "device memory" of the backend
    ASSERT_EQ(be.alloc(kCount * sizeof(float), &devIn), Result::kSuccess);
    float* in = static_cast<float*>(devIn);
    for (size_t i = 0; i < kCount; ++i) in[i] = static_cast<float>((r + 1) * (i % 7));
    std::vector<float> ar(kCount), bc(kCount), red(kCount, -1.0f), ag(kCount * n), rs(kCount);
    std::vector<float> rsIn(kCount * n), p2pIn(kCount), p2pOut(kCount);
    for (size_t i = 0; i < rsIn.size(); ++i) rsIn[i] = static_cast<float>(r + i % 5);
    for (size_t i = 0; i < kCount; ++i) p2pIn[i] = static_cast<float>(r * 1000 + i % 11);
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    ar[1] = -1.0f;
    Latch producer;  // holds the stream: ncclGroupEnd must return without waiting for it
    s->enqueue([&] { EXPECT_TRUE(producer.wait()); });
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    EXPECT_EQ(ncclAllReduce(in, ar.data(), kCount, ncclFloat32, ncclSum, comm, s), ncclSuccess);
    EXPECT_EQ(ncclBroadcast(in, bc.data(), kCount, ncclFloat32, 1, comm, s), ncclSuccess);
    EXPECT_EQ(ncclReduce(in, red.data(), kCount, ncclFloat32, ncclMax, 0, comm, s), ncclSuccess);
    EXPECT_EQ(ncclAllGather(in, ag.data(), kCount, ncclFloat32, comm, s), ncclSuccess);
    EXPECT_EQ(ncclReduceScatter(rsIn.data(), rs.data(), kCount, ncclFloat32, ncclSum, comm, s), ncclSuccess);
    EXPECT_EQ(ncclSend(p2pIn.data(), kCount, ncclFloat32, next, comm, s), ncclSuccess);
    EXPECT_EQ(ncclRecv(p2pOut.data(), kCount, ncclFloat32, prev, comm, s), ncclSuccess);
    const ncclResult_t ended = ncclGroupEnd();
    EXPECT_EQ(ar[1], -1.0f) << "the group ran before its stream reached it";
    producer.open();
    ASSERT_EQ(ended, ncclSuccess) << ncclGetLastError(nullptr);
    ASSERT_TRUE(s->sync());
    ncclResult_t e = ncclInternalError;
    ASSERT_EQ(ncclCommGetAsyncError(comm, &e), ncclSuccess);
    ASSERT_EQ(e, ncclSuccess);
    const float sumRanks = static_cast<float>(n * (n + 1) / 2);
    for (size_t i = 0; i < kCount; ++i) {
      const float k = static_cast<float>(i % 7);
      ASSERT_EQ(ar[i], sumRanks * k) << "allreduce " << i;
      ASSERT_EQ(bc[i], 2.0f * k) << "broadcast " << i;
      if (r == 0) {
        ASSERT_EQ(red[i], static_cast<float>(n) * k) << "reduce " << i;
      }
      for (int q = 0; q < n; ++q) ASSERT_EQ(ag[q * kCount + i], static_cast<float>(q + 1) * k) << "allgather " << i;
      float want = 0;
      for (int q = 0; q < n; ++q) want += static_cast<float>(q + (r * kCount + i) % 5);
      ASSERT_EQ(rs[i], want) << "reducescatter " << i;
      ASSERT_EQ(p2pOut[i], static_cast<float>(prev * 1000 + i % 11)) << "recv " << i;
    }
    EXPECT_EQ(be.gatesHeld(), be.gatesReleased());
    EXPECT_EQ(be.free(devIn), Result::kSuccess);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, EngineGroupTest, ::testing::Values(2, 3, 4),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

TEST(EngineTest, MismatchFailsEveryRankAndReleasesStreams) {
  EnvGuard timeout("MIXCCL_TIMEOUT", "60");  // detection must not come from the deadline
  constexpr int kRanks = 3;
  constexpr size_t kCount = 100003;
  AsyncRanks ranks(kRanks);
  ASSERT_TRUE(ranks.ok());
  const auto start = Clock::now();
  std::vector<ncclResult_t> errors(kRanks, ncclSuccess);
  ranks.run([&](int r) {
    AsyncBackend& be = ranks.backend(r);
    UserStream s{be.makeStream()};
    std::vector<float> v(kCount + 1, 1.0f);
    const size_t count = r == kRanks - 1 ? kCount + 1 : kCount;
    ASSERT_EQ(ncclAllReduce(v.data(), v.data(), count, ncclFloat32, ncclSum, ranks.comm(r), s), ncclSuccess);
    std::atomic<bool> later{false};
    s->enqueue([&] { later = true; });
    errors[r] = waitAsyncError(ranks.comm(r), std::chrono::seconds(20));
    // The stream goes on once the failed collective let go of it.
    EXPECT_TRUE(s->sync(std::chrono::seconds(10)));
    EXPECT_TRUE(later.load());
    EXPECT_EQ(be.gatesHeld(), be.gatesReleased());
    ranks.abort(r);  // as a framework does after an error; peers still waiting fail on it
  });
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(20));
  int usage = 0;
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_TRUE(errors[r] == ncclInvalidUsage || errors[r] == ncclRemoteError)
        << "rank " << r << ": " << ncclGetErrorString(errors[r]);
    usage += errors[r] == ncclInvalidUsage ? 1 : 0;
  }
  EXPECT_GE(usage, 1) << "no rank reported the mismatch as ncclInvalidUsage";
}

TEST(EngineTest, AbortWhileQueuedBehindBlockedStream) {
  EnvGuard timeout("MIXCCL_TIMEOUT", "60");
  constexpr int kRanks = 2;
  AsyncRanks ranks(kRanks);
  ASSERT_TRUE(ranks.ok());
  ranks.run([&](int r) {
    AsyncBackend& be = ranks.backend(r);
    UserStream s{be.makeStream()};
    std::vector<float> a(1000, 1.0f), b(1000, 2.0f);
    Latch producer;
    s->enqueue([&] { EXPECT_TRUE(producer.wait()); });
    ASSERT_EQ(ncclAllReduce(a.data(), a.data(), a.size(), ncclFloat32, ncclSum, ranks.comm(r), s), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(b.data(), b.data(), b.size(), ncclFloat32, ncclSum, ranks.comm(r), s), ncclSuccess);
    std::atomic<bool> later{false};
    s->enqueue([&] { later = true; });
    const auto t0 = Clock::now();
    ranks.abort(r);
    const auto took = Clock::now() - t0;
    EXPECT_LT(took, std::chrono::seconds(1)) << "ncclCommAbort took " << ms(took) << " ms";
    EXPECT_EQ(be.gatesHeld(), 2);
    EXPECT_EQ(be.gatesReleased(), 2) << "an aborted batch kept its stream gate";
    EXPECT_EQ(be.queuesOpen(), 0);
    producer.open();
    EXPECT_TRUE(s->sync(std::chrono::seconds(10)));
    EXPECT_TRUE(later.load()) << "work after the aborted collectives never ran";
    EXPECT_EQ(b[0], 2.0f) << "an aborted collective that never started wrote its buffer";
  });
}

// Waits (bounded) until `engine` holds `batches` (running and queued) and a call waits for room.
void waitForAFullQueue(const Engine* engine, size_t batches) {
  const auto until = Clock::now() + std::chrono::seconds(10);
  while ((engine->pending() < batches || engine->waitingForRoom() == 0) && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// MIXCCL_QUEUE_DEPTH bounds the queue (engine.h): behind a held stream, the progress thread holds
// one batch and the queue two more; the next call waits for room, and every call completes, exactly,
// once the stream moves on.
TEST(EngineTest, AFullQueueMakesTheNextCallWaitForRoom) {
  EnvGuard depth("MIXCCL_QUEUE_DEPTH", "2");
  constexpr int kRanks = 2;
  constexpr int kCalls = 5;
  AsyncRanks ranks(kRanks);
  ASSERT_TRUE(ranks.ok());
  ranks.run([&](int r) {
    AsyncBackend& be = ranks.backend(r);
    UserStream s{be.makeStream()};
    std::vector<std::vector<float>> bufs(kCalls, std::vector<float>(1000, static_cast<float>(r + 1)));
    Latch producer;
    s->enqueue([&] { EXPECT_TRUE(producer.wait()); });
    std::atomic<int> returned{0};
    ncclComm_t comm = ranks.comm(r);
    Engine* engine = comm->impl->engine();  // created here, before the calls (it is made on first use)
    std::thread caller([&] {
      for (auto& b : bufs) {
        EXPECT_EQ(ncclAllReduce(b.data(), b.data(), b.size(), ncclFloat32, ncclSum, comm, s), ncclSuccess)
            << ncclGetLastError(nullptr);
        ++returned;
      }
    });
    // Three return (one running, two queued); the fourth waits for room.
    waitForAFullQueue(engine, 3);
    EXPECT_EQ(engine->waitingForRoom(), 1);
    EXPECT_EQ(returned.load(), 3) << "the queue took more or fewer than MIXCCL_QUEUE_DEPTH batches";
    producer.open();
    caller.join();
    EXPECT_EQ(returned.load(), kCalls);
    ASSERT_TRUE(s->sync());
    for (const auto& b : bufs) ASSERT_EQ(b[999], 3.0f);
    EXPECT_EQ(be.gatesHeld(), kCalls);
    EXPECT_EQ(be.gatesReleased(), kCalls);
  });
}

// A call that waits for room ends when another thread aborts the communicator (within 1 s), and
// the stream still moves on.
TEST(EngineTest, AbortEndsACallWaitingForRoom) {
  EnvGuard depth("MIXCCL_QUEUE_DEPTH", "1");
  EnvGuard timeout("MIXCCL_TIMEOUT", "60");
  constexpr int kRanks = 2;
  AsyncRanks ranks(kRanks);
  ASSERT_TRUE(ranks.ok());
  ranks.run([&](int r) {
    AsyncBackend& be = ranks.backend(r);
    UserStream s{be.makeStream()};
    std::vector<std::vector<float>> bufs(4, std::vector<float>(1000, 1.0f));
    Latch producer;
    s->enqueue([&] { EXPECT_TRUE(producer.wait()); });
    std::atomic<int> returned{0};
    ncclResult_t last = ncclSuccess;
    std::string message;
    ncclComm_t comm = ranks.comm(r);
    Engine* engine = comm->impl->engine();  // created here, before the calls (it is made on first use)
    std::thread caller([&] {
      for (auto& b : bufs) {
        last = ncclAllReduce(b.data(), b.data(), b.size(), ncclFloat32, ncclSum, comm, s);
        ++returned;
        if (last != ncclSuccess) {
          message = ncclGetLastError(nullptr);
          return;
        }
      }
    });
    // One batch runs (its start never comes), one waits in the queue, the third call waits for room.
    waitForAFullQueue(engine, 2);
    EXPECT_EQ(engine->waitingForRoom(), 1) << "no call waited for room";
    EXPECT_EQ(returned.load(), 2);
    const auto t0 = Clock::now();
    ranks.abort(r);
    caller.join();
    const auto took = Clock::now() - t0;
    EXPECT_LT(took, std::chrono::seconds(1)) << "abort and the waiting call took " << ms(took) << " ms";
    EXPECT_EQ(last, ncclRemoteError) << "the call waiting for room did not fail with the abort";
    // The call that waited names itself (it said ncclGroupEnd outside any group).
    EXPECT_EQ(message.rfind("ncclAllReduce: ", 0), 0u) << "[" << message << "]";
    producer.open();
    EXPECT_TRUE(s->sync(std::chrono::seconds(10)));
    EXPECT_EQ(be.gatesHeld(), be.gatesReleased());
  });
}

// ncclCommRevoke from another thread fails queued work the same way, and the communicator can
// still be destroyed.
TEST(EngineTest, RevokeFailsQueuedWork) {
  EnvGuard timeout("MIXCCL_TIMEOUT", "60");
  AsyncRanks ranks(2);
  ASSERT_TRUE(ranks.ok());
  ranks.run([&](int r) {
    UserStream s{ranks.backend(r).makeStream()};
    std::vector<float> v(1000, 1.0f);
    Latch producer;
    s->enqueue([&] { EXPECT_TRUE(producer.wait()); });
    ASSERT_EQ(ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclSum, ranks.comm(r), s), ncclSuccess);
    const auto t0 = Clock::now();
    std::thread revoker([&] { EXPECT_EQ(ncclCommRevoke(ranks.comm(r), NCCL_REVOKE_DEFAULT), ncclSuccess); });
    revoker.join();
    EXPECT_EQ(waitAsyncError(ranks.comm(r), std::chrono::seconds(5)), ncclRemoteError);
    EXPECT_EQ(waitGatesReleased(ranks.backend(r), 1), 1);
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(1));
    producer.open();
    EXPECT_TRUE(s->sync(std::chrono::seconds(5)));
    EXPECT_EQ(v[0], 1.0f);
  });
}

TEST(EngineTest, DeadlineWhenPeerNeverCalls) {
  EnvGuard timeout("MIXCCL_TIMEOUT", "2");
  AsyncRanks ranks(2);
  ASSERT_TRUE(ranks.ok());
  AsyncBackend& be = ranks.backend(0);
  UserStream s{be.makeStream()};
  std::vector<float> v(1000, 1.0f);
  const auto t0 = Clock::now();
  ASSERT_EQ(ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclSum, ranks.comm(0), s), ncclSuccess);
  std::atomic<bool> later{false};
  s->enqueue([&] { later = true; });
  EXPECT_EQ(waitAsyncError(ranks.comm(0), std::chrono::seconds(15)), ncclRemoteError);
  EXPECT_GT(Clock::now() - t0, std::chrono::milliseconds(1500)) << "failed before the deadline";
  EXPECT_TRUE(s->sync(std::chrono::seconds(5)));
  EXPECT_TRUE(later.load());
  EXPECT_EQ(be.gatesHeld(), be.gatesReleased());
  // A later call on the failed communicator is refused with the error, not queued.
  EXPECT_NE(ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclSum, ranks.comm(0), s), ncclSuccess);
  ranks.abort(0);
  ranks.abort(1);
}

TEST(EngineTest, PeerAbortFailsQueuedWork) {
  EnvGuard timeout("MIXCCL_TIMEOUT", "60");
  AsyncRanks ranks(2);
  ASSERT_TRUE(ranks.ok());
  // Rank 1 joins the lanes with one collective, then aborts instead of calling the second.
  std::vector<float> v0(50000, 1.0f), v1(50000, 1.0f);
  UserStream s0{ranks.backend(0).makeStream()};
  UserStream s1{ranks.backend(1).makeStream()};
  ranks.run([&](int r) {
    std::vector<float>& v = r == 0 ? v0 : v1;
    EXPECT_EQ(ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclSum, ranks.comm(r), r == 0 ? s0 : s1),
              ncclSuccess);
    EXPECT_TRUE((r == 0 ? s0 : s1)->sync());
  });
  ASSERT_EQ(v0[0], 2.0f);
  ASSERT_EQ(ncclAllReduce(v0.data(), v0.data(), v0.size(), ncclFloat32, ncclSum, ranks.comm(0), s0), ncclSuccess);
  const auto t0 = Clock::now();
  ranks.abort(1);
  EXPECT_EQ(waitAsyncError(ranks.comm(0), std::chrono::seconds(20)), ncclRemoteError);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(20));
  EXPECT_TRUE(s0->sync(std::chrono::seconds(5)));
  EXPECT_EQ(ranks.backend(0).gatesHeld(), ranks.backend(0).gatesReleased());
  ranks.abort(0);
}

// Rank 0 issues on communicator A then B, rank 1 on B then A, each on its own stream: allowed by
// NCCL, since each communicator's own order matches; it completes because each progresses alone.
TEST(EngineTest, TwoCommunicatorsInOppositeOrders) {
  AsyncRanks a(2), b(2);
  ASSERT_TRUE(a.ok() && b.ok());
  constexpr size_t kCount = 200000;
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      UserStream sa{a.backend(r).makeStream()};
      UserStream sb{b.backend(r).makeStream()};
      std::vector<float> va(kCount, 1.0f), vb(kCount, 10.0f);
      auto issueA = [&] { return ncclAllReduce(va.data(), va.data(), kCount, ncclFloat32, ncclSum, a.comm(r), sa); };
      auto issueB = [&] { return ncclAllReduce(vb.data(), vb.data(), kCount, ncclFloat32, ncclSum, b.comm(r), sb); };
      if (r == 0) {
        ASSERT_EQ(issueA(), ncclSuccess);
        ASSERT_EQ(issueB(), ncclSuccess);
      } else {
        ASSERT_EQ(issueB(), ncclSuccess);
        ASSERT_EQ(issueA(), ncclSuccess);
      }
      ASSERT_TRUE(sa->sync());
      ASSERT_TRUE(sb->sync());
      EXPECT_EQ(va[0], 2.0f);
      EXPECT_EQ(va[kCount - 1], 2.0f);
      EXPECT_EQ(vb[kCount - 1], 20.0f);
    });
  }
  for (auto& t : threads) t.join();
}

// A NULL-stream (synchronous) call after queued ones waits for them: the wire order is the issue
// order, and the queued results are in place when it returns.
TEST(EngineTest, SyncCallAfterQueuedKeepsOrder) {
  AsyncRanks ranks(2);
  ASSERT_TRUE(ranks.ok());
  ranks.run([&](int r) {
    UserStream s{ranks.backend(r).makeStream()};
    std::vector<float> q1(30000, 1.0f), q2(30000, 3.0f), h(30000, 5.0f);
    Latch producer;
    s->enqueue([&] { EXPECT_TRUE(producer.wait()); });
    ASSERT_EQ(ncclAllReduce(q1.data(), q1.data(), q1.size(), ncclFloat32, ncclSum, ranks.comm(r), s), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(q2.data(), q2.data(), q2.size(), ncclFloat32, ncclSum, ranks.comm(r), s), ncclSuccess);
    std::thread opener([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      producer.open();
    });
    ASSERT_EQ(ncclAllReduce(h.data(), h.data(), h.size(), ncclFloat32, ncclSum, ranks.comm(r), nullptr), ncclSuccess)
        << ncclGetLastError(nullptr);
    opener.join();
    EXPECT_EQ(q1[29999], 2.0f);
    EXPECT_EQ(q2[29999], 6.0f);
    EXPECT_EQ(h[29999], 10.0f);
  });
}

TEST(EngineTest, RefusesMemoryTheBackendCannotReach) {
  AsyncRanks ranks(1);
  ASSERT_TRUE(ranks.ok());
  AsyncBackend& be = ranks.backend(0);
  UserStream s{be.makeStream()};
  std::vector<float> in(16, 1.0f), out(16);
  be.markForeign(out.data());
  EXPECT_EQ(ncclAllReduce(in.data(), out.data(), 16, ncclFloat32, ncclSum, ranks.comm(0), s), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("recvbuff"), std::string::npos) << ncclGetLastError(nullptr);
  int notAStream = 0;
  EXPECT_EQ(ncclAllReduce(in.data(), in.data(), 16, ncclFloat32, ncclSum, ranks.comm(0),
                          reinterpret_cast<cudaStream_t>(&notAStream)),
            ncclInvalidArgument);
  EXPECT_EQ(be.gatesHeld(), 0);
  // The communicator is still usable.
  EXPECT_EQ(ncclAllReduce(in.data(), in.data(), 16, ncclFloat32, ncclSum, ranks.comm(0), s), ncclSuccess);
  EXPECT_TRUE(s->sync());
  EXPECT_EQ(in[0], 1.0f);
}

// A backend without kCapHostMemory takes only its own memory on a stream; a NULL stream still runs
// host buffers synchronously.
TEST(EngineTest, DeviceOnlyBackendRefusesHostBuffersOnAStream) {
  AsyncRanks ranks(1);
  ASSERT_TRUE(ranks.ok());
  AsyncBackend& be = ranks.backend(0);
  be.setDeviceMemoryOnly(true);
  UserStream s{be.makeStream()};
  std::vector<float> host(16, 1.0f);
  void* dev = nullptr;
  ASSERT_EQ(be.alloc(16 * sizeof(float), &dev), Result::kSuccess);
  EXPECT_EQ(ncclAllReduce(host.data(), dev, 16, ncclFloat32, ncclSum, ranks.comm(0), s), ncclInvalidArgument);
  const std::string msg = ncclGetLastError(nullptr);
  EXPECT_NE(msg.find("sendbuff"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ncclMemAlloc"), std::string::npos) << msg;
  EXPECT_EQ(be.gatesHeld(), 0);
  EXPECT_EQ(ncclAllReduce(dev, dev, 16, ncclFloat32, ncclSum, ranks.comm(0), s), ncclSuccess);
  EXPECT_TRUE(s->sync());
  EXPECT_EQ(ncclAllReduce(host.data(), host.data(), 16, ncclFloat32, ncclSum, ranks.comm(0), nullptr), ncclSuccess);
  EXPECT_EQ(host[0], 1.0f);
  EXPECT_EQ(be.free(dev), Result::kSuccess);
}

// The work before the call never finishes: the start fence's deadline fails the batch, and the
// stream is released all the same.
TEST(EngineTest, DeadlineWhenStartNeverSignals) {
  EnvGuard timeout("MIXCCL_TIMEOUT", "1");
  AsyncRanks ranks(2);
  ASSERT_TRUE(ranks.ok());
  std::vector<Latch> producers(2);
  std::vector<UserStream> streams;
  for (int r = 0; r < 2; ++r) streams.push_back(UserStream{ranks.backend(r).makeStream()});
  std::atomic<int> later{0};
  ranks.run([&](int r) {
    UserStream s = streams[r];
    std::vector<float> v(1000, 1.0f);
    s->enqueue([&, r] { EXPECT_TRUE(producers[r].wait()); });
    ASSERT_EQ(ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclSum, ranks.comm(r), s), ncclSuccess);
    s->enqueue([&] { ++later; });
    EXPECT_EQ(waitAsyncError(ranks.comm(r), std::chrono::seconds(10)), ncclRemoteError);
    EXPECT_EQ(waitGatesReleased(ranks.backend(r), 1), 1);
    EXPECT_EQ(v[0], 1.0f);
    producers[r].open();
    EXPECT_TRUE(s->sync(std::chrono::seconds(5)));
  });
  EXPECT_EQ(later.load(), 2);
  ranks.abort(0);
  ranks.abort(1);
}

// Destroy lets queued work finish: the producer opens only after ncclCommDestroy was called.
TEST(EngineTest, DestroyDrainsTheQueue) {
  auto ranks = std::make_unique<AsyncRanks>(2);
  ASSERT_TRUE(ranks->ok());
  std::vector<std::vector<float>> v(2, std::vector<float>(40000, 1.0f));
  std::vector<UserStream> streams;
  for (int r = 0; r < 2; ++r) streams.push_back(UserStream{ranks->backend(r).makeStream()});
  Latch producer;
  ranks->run([&](int r) {
    streams[r]->enqueue([&] { EXPECT_TRUE(producer.wait()); });
    ASSERT_EQ(ncclAllReduce(v[r].data(), v[r].data(), v[r].size(), ncclFloat32, ncclSum, ranks->comm(r), streams[r]),
              ncclSuccess);
  });
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    producer.open();
  });
  // ~AsyncRanks destroys the communicators (rank by rank: the queues drain in their own threads).
  ranks.reset();
  opener.join();
  EXPECT_EQ(v[0][39999], 2.0f);
  EXPECT_EQ(v[1][0], 2.0f);
}

// A group with a stream operation and a NULL-stream one on one asynchronous communicator: one
// batch, and the NULL-stream operation is complete when ncclGroupEnd returns.
TEST(EngineTest, MixedGroupCompletesNullStreamWorkAtReturn) {
  AsyncRanks ranks(2);
  ASSERT_TRUE(ranks.ok());
  ranks.run([&](int r) {
    UserStream s{ranks.backend(r).makeStream()};
    std::vector<float> a(20000, 1.0f), h(20000, 4.0f);
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    EXPECT_EQ(ncclAllReduce(a.data(), a.data(), a.size(), ncclFloat32, ncclSum, ranks.comm(r), s), ncclSuccess);
    EXPECT_EQ(ncclAllReduce(h.data(), h.data(), h.size(), ncclFloat32, ncclSum, ranks.comm(r), nullptr), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
    EXPECT_EQ(h[19999], 8.0f);
    ASSERT_TRUE(s->sync());
    EXPECT_EQ(a[19999], 2.0f);
  });
}

// The same mixed group with one thread driving both ranks (as after ncclCommInitAll): every
// communicator's batch must be queued before ncclGroupEnd waits for any of them, or rank 0's
// batch waits for rank 1's, which is never queued, until MIXCCL_TIMEOUT.
TEST(EngineTest, MixedGroupOverSeveralRanksFromOneThread) {
  EnvGuard timeout("MIXCCL_TIMEOUT", "5");
  AsyncRanks ranks(2);
  ASSERT_TRUE(ranks.ok());
  const UserStream streams[2] = {{ranks.backend(0).makeStream()}, {ranks.backend(1).makeStream()}};
  std::vector<std::vector<float>> a(2, std::vector<float>(20000, 1.0f)), h(2, std::vector<float>(20000, 4.0f));
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(ncclAllReduce(a[r].data(), a[r].data(), a[r].size(), ncclFloat32, ncclSum, ranks.comm(r), streams[r]),
              ncclSuccess);
    EXPECT_EQ(ncclAllReduce(h[r].data(), h[r].data(), h[r].size(), ncclFloat32, ncclSum, ranks.comm(r), nullptr),
              ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(h[r][19999], 8.0f) << "rank " << r;
    ASSERT_TRUE(streams[r]->sync());
    EXPECT_EQ(a[r][19999], 2.0f) << "rank " << r;
  }
}

// Prints the median time of an enqueueing call (the issue asks < 20 us); does not assert it,
// timings on a shared test machine are noise.
TEST(EngineTest, EnqueueLatencyBenchmark) {
  constexpr int kCalls = 400;
  AsyncRanks ranks(2);
  ASSERT_TRUE(ranks.ok());
  std::vector<double> medians(2);
  ranks.run([&](int r) {
    UserStream s{ranks.backend(r).makeStream()};
    std::vector<float> v(256, 1.0f);
    std::vector<double> us;
    for (int i = 0; i < kCalls; ++i) {
      const auto t0 = Clock::now();
      ASSERT_EQ(ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclMax, ranks.comm(r), s), ncclSuccess);
      us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    ASSERT_TRUE(s->sync());
    std::sort(us.begin(), us.end());
    medians[r] = us[us.size() / 2];
    EXPECT_EQ(v[0], 1.0f);
    // Every call went through the queue (one completion gate each), and every gate was released.
    EXPECT_EQ(ranks.backend(r).gatesHeld(), kCalls);
    EXPECT_EQ(ranks.backend(r).gatesReleased(), kCalls);
  });
  printf("[ engine ] enqueue latency, median of %d calls: rank 0 %.1f us, rank 1 %.1f us\n", kCalls, medians[0],
         medians[1]);
}

// A backend whose holdStream fails at its `failAt`-th call (counted from 0).
class FlakyGateBackend : public AsyncBackend {
 public:
  std::atomic<int> failAt{-1};
  std::atomic<int> holds{0};
  Result holdStream(void* stream, StreamGate** gate) override {
    if (holds++ == failAt.load()) {
      *gate = nullptr;
      return fail(Result::kUnhandledDeviceError, "injected: holdStream failed");
    }
    return AsyncBackend::holdStream(stream, gate);
  }
};

// A queued collective that keeps moving (every device task well inside MIXCCL_TIMEOUT) but takes
// longer than MIXCCL_TIMEOUT + 5 s in all: a call waiting behind it (waitIdle) must not take it for
// a progress thread stuck in the backend (it failed at 6 s, and the batch then finished).
TEST(EngineTest, ASlowBatchThatStillMovesDoesNotFailItsWaiters) {
  EnvGuard timeout("MIXCCL_TIMEOUT", "1");
  EnvGuard chunk("MIXCCL_CHUNK_SIZE", "4096");
  AsyncBackend b0, b1;
  b0.setTaskDelay(std::chrono::milliseconds(40));
  b1.setTaskDelay(std::chrono::milliseconds(40));
  BackendRanks ranks({&b0, &b1});
  ASSERT_TRUE(ranks.ok());
  ncclResult_t queued[2], sync[2];
  float first[2] = {0, 0};
  std::string msg[2];
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      AsyncBackend& be = r == 0 ? b0 : b1;
      FakeStream* s = be.makeStream();
      std::vector<float> a(1 << 19, 1.0f), h(16, 1.0f);
      queued[r] = ncclAllReduce(a.data(), a.data(), a.size(), ncclFloat32, ncclSum, ranks.comm(r),
                                reinterpret_cast<cudaStream_t>(s));
      sync[r] = ncclAllReduce(h.data(), h.data(), h.size(), ncclFloat32, ncclSum, ranks.comm(r), nullptr);
      if (sync[r] != ncclSuccess) msg[r] = ncclGetLastError(nullptr);
      s->sync(std::chrono::seconds(60));
      first[r] = a[0];
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(queued[r], ncclSuccess);
    EXPECT_EQ(sync[r], ncclSuccess) << "rank " << r << ": " << msg[r];
    EXPECT_EQ(first[r], 2.0f);
  }
}

// A queued call that fails inside Engine::enqueue has taken its sequence number already: the rank
// is out of step with its peers, so the communicator keeps the error (it was left usable, and the
// next call went out one collective behind the peers').
TEST(EngineTest, EnqueueFailureAfterIssueSetsTheAsyncError) {
  EnvGuard timeout("MIXCCL_TIMEOUT", "5");
  FlakyGateBackend b0, b1;
  b0.failAt = 1;  // rank 0's second call
  BackendRanks ranks({&b0, &b1});
  ASSERT_TRUE(ranks.ok());
  ncclResult_t calls[2][3] = {};
  ncclResult_t asyncAfterFailure = ncclSuccess;
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      FlakyGateBackend& be = r == 0 ? b0 : b1;
      UserStream s{be.makeStream()};
      std::vector<float> a(1000, 1.0f);
      for (int i = 0; i < 3; ++i) {
        calls[r][i] = ncclAllReduce(a.data(), a.data(), a.size(), ncclFloat32, ncclSum, ranks.comm(r), s);
        if (r == 0 && i == 1) {
          EXPECT_EQ(ncclCommGetAsyncError(ranks.comm(0), &asyncAfterFailure), ncclSuccess);
        }
      }
      EXPECT_TRUE(s->sync(std::chrono::seconds(30)));
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(calls[0][0], ncclSuccess);
  EXPECT_EQ(calls[0][1], ncclUnhandledCudaError);
  EXPECT_NE(asyncAfterFailure, ncclSuccess) << "the failed call took a sequence number but left the comm usable";
  EXPECT_NE(calls[0][2], ncclSuccess) << "rank 0's third call was accepted although the rank is out of step";
  EXPECT_EQ(b0.gatesHeld(), b0.gatesReleased());
}

// The progress thread cannot be created (no memory for its stack): the call fails, and its batch
// is not left queued with its stream's gate held (the user's later work on the stream never ran).
TEST(EngineTest, ProgressThreadThatCannotStartLeavesNoGateHeld) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the address-space limit this test sets breaks the sanitizer's own mappings";
#else
  AsyncRanks ranks(1);
  ASSERT_TRUE(ranks.ok());
  AsyncBackend& be = ranks.backend(0);
  UserStream s{be.makeStream()};  // its worker thread before the limit
  std::vector<float> a(1000, 1.0f);
  // Thread stacks larger than any glibc keeps cached, and an address space that cannot hold one.
  pthread_attr_t attr, saved;
  ASSERT_EQ(pthread_getattr_default_np(&saved), 0);
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, size_t{1} << 30), 0);
  ASSERT_EQ(pthread_setattr_default_np(&attr), 0);
  rlimit oldLimit{};
  ASSERT_EQ(getrlimit(RLIMIT_AS, &oldLimit), 0);
  long pages = 0;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  ASSERT_GT(pages, 0);
  rlimit tight = oldLimit;
  tight.rlim_cur = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + (rlim_t{256} << 20);
  ASSERT_EQ(setrlimit(RLIMIT_AS, &tight), 0);
  const ncclResult_t res = ncclAllReduce(a.data(), a.data(), a.size(), ncclFloat32, ncclSum, ranks.comm(0), s);
  const std::string message = ncclGetLastError(nullptr);
  EXPECT_EQ(setrlimit(RLIMIT_AS, &oldLimit), 0);
  EXPECT_EQ(pthread_setattr_default_np(&saved), 0);
  pthread_attr_destroy(&attr);
  pthread_attr_destroy(&saved);
  EXPECT_EQ(res, ncclSystemError) << message;
  std::atomic<bool> later{false};
  s->enqueue([&] { later = true; });
  EXPECT_TRUE(s->sync(std::chrono::seconds(5))) << "the failed call left its stream blocked";
  EXPECT_TRUE(later.load());
  EXPECT_EQ(be.gatesHeld(), be.gatesReleased());
  ncclResult_t async = ncclSuccess;
  EXPECT_EQ(ncclCommGetAsyncError(ranks.comm(0), &async), ncclSuccess);
  EXPECT_EQ(async, ncclSystemError) << "the call took a sequence number and never ran";
#endif
}

}  // namespace
}  // namespace mixccl::testing
