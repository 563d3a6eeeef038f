// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// OpenCL ranks through the public API, ranks as threads (device acceptance checks 1, 2, 4, 5):
//  - every collective x all 12 datatypes x every operator (reducing ones) x in/out-of-place at
//    1-4 OpenCL ranks and in the mixed patterns H,O,H,O and O,H,H, compared bit for bit (two NaNs
//    compare equal) with the same collective on all-host ranks given the same random inputs;
//    on a user queue (stream-ordered) and with a NULL stream (blocking);
//  - stream order: a copy held by a user event produces the input; the call returns first;
//  - ncclCommAbort while the queue is blocked returns promptly and the queue still drains.
// OpenCL ranks use SVM from their backend's alloc() and command queues on the library's context
// (inputs written and results read with clEnqueueSVMMemcpy on that queue); host ranks use
// malloc'd memory and a NULL stream. Each rank thread owns one rank of the communicator under
// test and the same rank of an all-host communicator, and runs every case on both in turn.
// Skipped with the reason when the build has no OpenCL or the machine no OpenCL platform.

#include <gtest/gtest.h>

#if !defined(MIXCCL_HAVE_OPENCL)

TEST(OpenclColl, NotBuilt) { GTEST_SKIP() << "mixccl was built without OpenCL headers; the backend is absent"; }

#else

#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "src/device/device_backend.h"
#include "src/device/opencl/opencl_backend.h"
#include "src/device/opencl/opencl_runtime.h"
#include "tests/support/algo_policy.h"
#include "tests/support/backend_ranks.h"
#include "tests/support/device_values.h"
#include "tests/support/env_guard.h"
#include "tests/support/values.h"

namespace mixccl::testing {
namespace {

using Clock = std::chrono::steady_clock;

enum Coll { kAllReduce, kBroadcast, kReduce, kAllGather, kReduceScatter, kAllToAll, kGather, kScatter, kSendRecv };
constexpr int kNumColls = 9;
const char* const kCollNames[kNumColls] = {"allreduce", "broadcast", "reduce",  "allgather", "reducescatter",
                                           "alltoall",  "gather",    "scatter", "sendrecv"};
bool reducing(int c) { return c == kAllReduce || c == kReduce || c == kReduceScatter; }
bool hasInPlace(int c) { return c != kAllToAll && c != kSendRecv; }

// 1001 elements: odd, and with MIXCCL_CHUNK_SIZE=4096 the 8-byte types stream through several chunks.
constexpr size_t kCount = 1001;

struct Case {
  int coll, dtype, op;  // op: tests/support/values.h Op (kPreMulTwo = a PreMulSum), -1 for data movement
  bool inplace;
  int root;
  uint64_t seed;
  size_t count = kCount;
  std::string name() const {
    return std::string(kCollNames[coll]) + " " + typeName(dtype) + (op >= 0 ? std::string(" ") + opName(op) : "") +
           (inplace ? " in-place" : " out-of-place") + " root " + std::to_string(root);
  }
};

// The ring collectives at a count whose segments travel as several pieces (algorithms/ring_pass.h)
// over several rounds: with 4 KiB slots a 4-byte type's segment of a 2-rank all-reduce is up to
// 4 pieces of 1024 elements, which a device rank covers with one command (src/core/step_work.h).
std::vector<Case> pieceCases() {
  std::vector<Case> cases;
  uint64_t seed = 7;
  for (int c : {kAllReduce, kReduceScatter, kAllGather}) {
    for (int t = 0; t < kNumTypes; ++t) {
      for (int op : reducing(c) ? std::vector<int>{kSum, kPreMulTwo, kAvg} : std::vector<int>{-1}) {
        for (bool inplace : {false, true}) {
          Case k{c, t, op, inplace, 0, seed++};
          k.count = 9001;
          cases.push_back(k);
        }
      }
    }
  }
  return cases;
}

std::vector<Case> allCases(int n) {
  std::vector<Case> cases;
  uint64_t seed = 1;
  for (int c = 0; c < kNumColls; ++c) {
    for (int t = 0; t < kNumTypes; ++t) {
      for (int op = reducing(c) ? 0 : -1; op < (reducing(c) ? kNumOps : 0); ++op) {
        for (int inplace = 0; inplace < (hasInPlace(c) ? 2 : 1); ++inplace) {
          cases.push_back(Case{c, t, op, inplace == 1, static_cast<int>(seed % n), seed});
          ++seed;
        }
      }
    }
  }
  return cases;
}

// Where the buffers of one rank lie, in bytes. Out-of-place: send region [0, sendBytes) of the
// send allocation, receive region [0, recvBytes) of the receive allocation. In place: one region
// of `bytes` in the receive allocation holding both, at the offsets NCCL defines.
struct Layout {
  size_t sendBytes = 0, recvBytes = 0;
  size_t bytes = 0, sendOff = 0, recvOff = 0;  // in place
};

Layout layoutOf(const Case& k, int n, int rank) {
  const size_t es = typeSize(k.dtype), c = k.count * es, all = c * n;
  Layout l;
  switch (k.coll) {
    case kAllGather:
    case kGather:
      l.sendBytes = c, l.recvBytes = all, l.bytes = all, l.sendOff = c * rank;
      break;
    case kReduceScatter:
    case kScatter:
      l.sendBytes = all, l.recvBytes = c, l.bytes = all, l.recvOff = c * rank;
      break;
    case kAllToAll:
      l.sendBytes = all, l.recvBytes = all;
      break;
    default:
      l.sendBytes = c, l.recvBytes = c, l.bytes = c;
      break;
  }
  return l;
}

// The initial contents of one rank's buffers for one case (the same for the host and the device
// run): random elements with specials, also in the receive region, so bytes a collective must not
// write are compared too.
struct Contents {
  std::vector<uint8_t> send, recv;  // in place: only `recv` (the one region)
};

Contents initialContents(const Case& k, int n, int rank) {
  std::mt19937_64 rng(k.seed * 1000003 + static_cast<uint64_t>(rank));
  const Layout l = layoutOf(k, n, rank);
  const size_t es = typeSize(k.dtype);
  Contents c;
  if (k.inplace) {
    c.recv = randomElements(k.dtype, l.bytes / es, rng);
  } else {
    c.send = randomElements(k.dtype, l.sendBytes / es, rng);
    c.recv = randomElements(k.dtype, l.recvBytes / es, rng);
  }
  return c;
}

// Issues one case on `comm` with the given buffers (already filled) and stream.
ncclResult_t issue(const Case& k, ncclComm_t comm, int n, int rank, uint8_t* sendAlloc, uint8_t* recvAlloc,
                   cudaStream_t stream) {
  const Layout l = layoutOf(k, n, rank);
  const void* send = k.inplace ? recvAlloc + l.sendOff : sendAlloc;
  void* recv = k.inplace ? recvAlloc + l.recvOff : recvAlloc;
  const auto dt = static_cast<ncclDataType_t>(k.dtype);
  ncclRedOp_t op = static_cast<ncclRedOp_t>(k.op < 0 ? 0 : k.op);
  if (k.op == kPreMulTwo) {
    // A scalar that rounds in the float types (and wraps in the unsigned ones): -2.75.
    uint8_t scalar[8] = {};
    encode(k.dtype, -2.75, scalar);
    ncclResult_t r = ncclRedOpCreatePreMulSum(&op, scalar, dt, ncclScalarHostImmediate, comm);
    if (r != ncclSuccess) return r;
  }
  ncclResult_t r = ncclSuccess;
  switch (k.coll) {
    case kAllReduce:
      r = ncclAllReduce(send, recv, k.count, dt, op, comm, stream);
      break;
    case kBroadcast:
      r = ncclBroadcast(send, recv, k.count, dt, k.root, comm, stream);
      break;
    case kReduce:
      r = ncclReduce(send, recv, k.count, dt, op, k.root, comm, stream);
      break;
    case kAllGather:
      r = ncclAllGather(send, recv, k.count, dt, comm, stream);
      break;
    case kReduceScatter:
      r = ncclReduceScatter(send, recv, k.count, dt, op, comm, stream);
      break;
    case kAllToAll:
      r = ncclAlltoAll(send, recv, k.count, dt, comm, stream);
      break;
    case kGather:
      r = ncclGather(send, recv, k.count, dt, k.root, comm, stream);
      break;
    case kScatter:
      r = ncclScatter(send, recv, k.count, dt, k.root, comm, stream);
      break;
    case kSendRecv: {
      // A ring: send to the next rank, receive from the previous one (to itself at one rank).
      r = ncclGroupStart();
      if (r == ncclSuccess) r = ncclSend(send, k.count, dt, (rank + 1) % n, comm, stream);
      if (r == ncclSuccess) r = ncclRecv(recv, k.count, dt, (rank + n - 1) % n, comm, stream);
      const ncclResult_t e = ncclGroupEnd();
      if (r == ncclSuccess) r = e;
      break;
    }
  }
  if (k.op == kPreMulTwo) {
    const ncclResult_t d = ncclRedOpDestroy(op, comm);
    if (r == ncclSuccess) r = d;
  }
  return r;
}

bool havePlatform(std::string* why) {
  cl_uint n = 0;
  const cl_int err = clGetPlatformIDs(0, nullptr, &n);
  if (err != CL_SUCCESS || n == 0) {
    *why = "no OpenCL platform found (clGetPlatformIDs: " + std::to_string(err) + "); install pocl-opencl-icd";
    return false;
  }
  return true;
}

// Waits (bounded) for an OpenCL event; false on timeout or an error status.
bool waitEvent(cl_event ev, std::chrono::seconds limit) {
  const auto until = Clock::now() + limit;
  for (;;) {
    cl_int status = CL_QUEUED;
    if (clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status, nullptr) != CL_SUCCESS) {
      return false;
    }
    if (status == CL_COMPLETE) return true;
    if (status < 0 || Clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// A rank's device side: its backend and a user queue on the library's context.
struct DeviceRank {
  std::unique_ptr<DeviceBackend> backend;
  cl_command_queue queue = nullptr;
  ~DeviceRank() {
    if (queue != nullptr) clReleaseCommandQueue(queue);
  }
};

class OpenclCollTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!havePlatform(&why)) GTEST_SKIP() << why;
    // Small slots so the wider types stream through several chunks; a bounded timeout so a bug
    // fails the test instead of hanging it.
    chunk_ = std::make_unique<EnvGuard>("MIXCCL_CHUNK_SIZE", "4096");
    timeout_ = std::make_unique<EnvGuard>("MIXCCL_TIMEOUT", "60");
    cl_device_id dev = nullptr;
    ASSERT_EQ(openclGetContext(&context_, &dev), Result::kSuccess) << lastError();
    device_ = dev;
  }

  // A device rank: an OpenCL backend instance and a fresh in-order queue.
  std::unique_ptr<DeviceRank> makeDeviceRank() {
    auto d = std::make_unique<DeviceRank>();
    EXPECT_EQ(makeOpenclBackend(&d->backend), Result::kSuccess) << lastError();
    cl_int err = CL_SUCCESS;
    d->queue = clCreateCommandQueueWithProperties(context_, device_, nullptr, &err);
    EXPECT_EQ(err, CL_SUCCESS);
    return d;
  }

  // `n` device ranks, and their backends in rank order (for BackendRanks) in `backends`.
  std::vector<std::unique_ptr<DeviceRank> > makeDeviceRanks(int n, std::vector<DeviceBackend*>* backends) {
    std::vector<std::unique_ptr<DeviceRank> > dr;
    for (int r = 0; r < n; ++r) {
      dr.push_back(makeDeviceRank());
      EXPECT_NE(dr.back()->backend, nullptr);
      backends->push_back(dr.back()->backend.get());
    }
    return dr;
  }

  // Runs every case on `pattern` (one letter per rank: 'H' host, 'O' OpenCL) and on all-host ranks
  // and compares each rank's buffers after each case. `blocking`: OpenCL ranks pass a NULL stream.
  void runPattern(const std::string& pattern, bool blocking, const std::vector<Case>& only = {});

  cl_context context_ = nullptr;
  cl_device_id device_ = nullptr;
  std::unique_ptr<EnvGuard> chunk_, timeout_;
};

void OpenclCollTest::runPattern(const std::string& pattern, bool blocking, const std::vector<Case>& only) {
  const int n = static_cast<int>(pattern.size());
  std::vector<std::unique_ptr<DeviceBackend> > hostBackends;
  std::vector<std::unique_ptr<DeviceRank> > devRanks(n);
  std::vector<DeviceBackend*> refSet, testSet;
  for (int r = 0; r < n; ++r) {
    hostBackends.push_back(makeHostBackend());
    refSet.push_back(hostBackends.back().get());
    if (pattern[r] == 'O') {
      devRanks[r] = makeDeviceRank();
      ASSERT_NE(devRanks[r]->backend, nullptr);
      testSet.push_back(devRanks[r]->backend.get());
    } else {
      hostBackends.push_back(makeHostBackend());
      testSet.push_back(hostBackends.back().get());
    }
  }
  BackendRanks ref(refSet), test(testSet);
  ASSERT_TRUE(ref.ok() && test.ok());
  const std::vector<Case> cases = only.empty() ? allCases(n) : only;
  size_t maxBytes = 0;
  for (const Case& k : cases) maxBytes = std::max(maxBytes, k.count * 8 * n);
  std::atomic<int> failures{0};

  onRankThreads(n, [&](int rank) {
    const bool dev = pattern[rank] == 'O';
    DeviceRank* d = devRanks[rank].get();
    cl_command_queue q = dev ? d->queue : nullptr;
    const cudaStream_t stream = blocking ? nullptr : reinterpret_cast<cudaStream_t>(q);
    // The rank's buffers: SVM for an OpenCL rank, malloc'd for a host rank; reused by every case.
    std::vector<uint8_t> refSend(maxBytes), refRecv(maxBytes);
    void *send = nullptr, *recv = nullptr;
    if (dev) {
      ASSERT_EQ(d->backend->alloc(maxBytes, &send), Result::kSuccess) << lastError();
      ASSERT_EQ(d->backend->alloc(maxBytes, &recv), Result::kSuccess) << lastError();
    } else {
      send = std::malloc(maxBytes);
      recv = std::malloc(maxBytes);
    }
    auto* s8 = static_cast<uint8_t*>(send);
    auto* r8 = static_cast<uint8_t*>(recv);
    std::vector<uint8_t> gotSend(maxBytes), gotRecv(maxBytes);
    for (const Case& k : cases) {
      const Contents in = initialContents(k, n, rank);
      // The reference: all-host ranks, blocking.
      // std::copy, not memcpy: an empty vector's data() may be null (undefined for memcpy).
      std::copy(in.send.begin(), in.send.end(), refSend.begin());
      std::copy(in.recv.begin(), in.recv.end(), refRecv.begin());
      ncclResult_t res = issue(k, ref.comm(rank), n, rank, refSend.data(), refRecv.data(), nullptr);
      ASSERT_EQ(res, ncclSuccess) << "host reference " << k.name() << ": " << ncclGetLastError(ref.comm(rank));
      // The run under test.
      if (dev) {
        // Stream-ordered: the copies and the collective go onto the queue without waiting.
        const cl_bool wait = blocking ? CL_TRUE : CL_FALSE;
        if (!in.send.empty()) {
          ASSERT_EQ(clEnqueueSVMMemcpy(q, wait, send, in.send.data(), in.send.size(), 0, nullptr, nullptr), CL_SUCCESS);
        }
        ASSERT_EQ(clEnqueueSVMMemcpy(q, wait, recv, in.recv.data(), in.recv.size(), 0, nullptr, nullptr), CL_SUCCESS);
      } else {
        std::copy(in.send.begin(), in.send.end(), s8);
        std::copy(in.recv.begin(), in.recv.end(), r8);
      }
      res = issue(k, test.comm(rank), n, rank, s8, r8, dev ? stream : nullptr);
      ASSERT_EQ(res, ncclSuccess) << pattern << " " << k.name() << " rank " << rank << ": "
                                  << ncclGetLastError(test.comm(rank));
      if (dev) {
        if (!in.send.empty()) {
          ASSERT_EQ(clEnqueueSVMMemcpy(q, CL_FALSE, gotSend.data(), send, in.send.size(), 0, nullptr, nullptr),
                    CL_SUCCESS);
        }
        ASSERT_EQ(clEnqueueSVMMemcpy(q, CL_FALSE, gotRecv.data(), recv, in.recv.size(), 0, nullptr, nullptr),
                  CL_SUCCESS);
        ASSERT_EQ(clFinish(q), CL_SUCCESS);
      } else {
        std::memcpy(gotSend.data(), send, in.send.size());
        std::memcpy(gotRecv.data(), recv, in.recv.size());
      }
      std::string diff = compareElements(k.dtype, gotRecv.data(), refRecv.data(), in.recv.size());
      if (diff.empty()) diff = compareElements(k.dtype, gotSend.data(), refSend.data(), in.send.size());
      if (!diff.empty() && failures++ < 20) {
        ADD_FAILURE() << pattern << (blocking ? " blocking " : " on a queue ") << k.name() << " rank " << rank << " ("
                      << (dev ? "opencl" : "host") << "): " << diff;
      }
    }
    ncclResult_t e = ncclInternalError;
    EXPECT_EQ(ncclCommGetAsyncError(test.comm(rank), &e), ncclSuccess);
    EXPECT_EQ(e, ncclSuccess);
    if (dev) {
      EXPECT_EQ(d->backend->free(send), Result::kSuccess);
      EXPECT_EQ(d->backend->free(recv), Result::kSuccess);
    } else {
      std::free(send);
      std::free(recv);
    }
  });
  EXPECT_EQ(failures.load(), 0) << "cases that differ from all-host ranks (the first 20 are listed)";
  test.destroy();
  ref.destroy();
}

TEST_F(OpenclCollTest, OneRank) { runPattern("O", false); }

// Registered host memory (the lanes' slots) reached through copies and staged kernel operands, as
// on a device with memory of its own (MIXCCL_OPENCL_HOST_MEMORY=staged): POCL runs the path a
// discrete GPU takes. The OpenCL runtime is made once per process, so the mode holds only where
// this test's process makes it (ctest runs every test in a process of its own).
class OpenclStagedCollTest : public OpenclCollTest {
 protected:
  void SetUp() override {
    staged_ = std::make_unique<EnvGuard>("MIXCCL_OPENCL_HOST_MEMORY", "staged");
    OpenclCollTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ocl::Runtime* rt = nullptr;
    ASSERT_EQ(ocl::Runtime::get(&rt), Result::kSuccess) << lastError();
    if (rt->zeroCopyHost()) {
      GTEST_SKIP() << "the OpenCL runtime of this process was made before this test set "
                      "MIXCCL_OPENCL_HOST_MEMORY=staged; run the test alone (as ctest does)";
    }
  }
  std::unique_ptr<EnvGuard> staged_;
};

TEST_F(OpenclStagedCollTest, TwoRanks) { runPattern("OO", false); }
TEST_F(OpenclStagedCollTest, FourRanks) { runPattern("OOOO", false); }
TEST_F(OpenclStagedCollTest, MixedHOHO) { runPattern("HOHO", false); }
TEST_F(OpenclStagedCollTest, BlockingMixedOHH) { runPattern("OHH", true); }
TEST_F(OpenclStagedCollTest, RingPiecesTwoRanks) { runPattern("OO", false, pieceCases()); }

TEST(OpenclHostMemory, AnUnknownModeFailsTheBackendNamingTheKnob) {
  std::string why;
  if (!havePlatform(&why)) GTEST_SKIP() << why;
  EnvGuard bad("MIXCCL_OPENCL_HOST_MEMORY", "pinned");
  std::unique_ptr<DeviceBackend> backend;
  const Result r = makeOpenclBackend(&backend);
  if (r == Result::kSuccess) {
    GTEST_SKIP() << "the OpenCL runtime of this process was made before; run the test alone (as ctest does)";
  }
  EXPECT_EQ(r, Result::kInvalidArgument);
  EXPECT_NE(lastError().find("MIXCCL_OPENCL_HOST_MEMORY='pinned' must be auto or staged"), std::string::npos)
      << lastError();
}
TEST_F(OpenclCollTest, TwoRanks) { runPattern("OO", false); }
TEST_F(OpenclCollTest, ThreeRanks) { runPattern("OOO", false); }
TEST_F(OpenclCollTest, FourRanks) { runPattern("OOOO", false); }
TEST_F(OpenclCollTest, MixedHOHO) { runPattern("HOHO", false); }
TEST_F(OpenclCollTest, MixedOHH) { runPattern("OHH", false); }
TEST_F(OpenclCollTest, BlockingTwoRanks) { runPattern("OO", true); }
TEST_F(OpenclCollTest, BlockingMixedOHH) { runPattern("OHH", true); }

// Segments of several pieces, covered by one command per run on the OpenCL ranks.
TEST_F(OpenclCollTest, RingPiecesTwoRanks) { runPattern("OO", false, pieceCases()); }
TEST_F(OpenclCollTest, RingPiecesMixedHOHO) { runPattern("HOHO", false, pieceCases()); }

// Every algorithm besides the standing ones (scratch memory on the device included), forced
// through NCCL_ALGO for the device ranks and their all-host reference alike.
TEST_F(OpenclCollTest, AlternativeAlgorithmsMixedOHOH) {
  for (int k = 1;; ++k) {
    const std::string policy = algorithmPolicy(k);
    if (policy.empty()) break;
    SCOPED_TRACE("NCCL_ALGO=" + policy);
    EnvGuard algo("NCCL_ALGO", policy.c_str());
    runPattern("OHOH", false);
  }
}

// ---- stream order and abort ------------------------------------------------------------------

// Two OpenCL ranks; on each, a copy that writes the input waits for a user event. The all-reduce
// returns while the event is unset; the copy enqueued after it (reading the result) has not run;
// once the event is set the result is right.
TEST_F(OpenclCollTest, CallReturnsBeforeItsInputIsWritten) {
  constexpr int kRanks = 2;
  constexpr size_t n = 4099;
  std::vector<DeviceBackend*> set;
  std::vector<std::unique_ptr<DeviceRank> > dr = makeDeviceRanks(kRanks, &set);
  ASSERT_FALSE(HasFailure());
  BackendRanks ranks(set);
  ASSERT_TRUE(ranks.ok());
  onRankThreads(kRanks, [&](int r) {
    DeviceRank& d = *dr[r];
    void *in = nullptr, *out = nullptr;
    ASSERT_EQ(d.backend->alloc(n * 4, &in), Result::kSuccess);
    ASSERT_EQ(d.backend->alloc(n * 4, &out), Result::kSuccess);
    std::vector<int32_t> src(n), result(n, -1), zeros(n, 0);
    for (size_t i = 0; i < n; ++i) src[i] = static_cast<int32_t>((r + 1) * 1000 + i);
    ASSERT_EQ(clEnqueueSVMMemcpy(d.queue, CL_TRUE, in, zeros.data(), n * 4, 0, nullptr, nullptr), CL_SUCCESS);
    cl_int err = CL_SUCCESS;
    cl_event producer = clCreateUserEvent(context_, &err);
    ASSERT_EQ(err, CL_SUCCESS);
    // The "kernel" writing the input: a copy held by the user event.
    ASSERT_EQ(clEnqueueSVMMemcpy(d.queue, CL_FALSE, in, src.data(), n * 4, 1, &producer, nullptr), CL_SUCCESS);
    const auto t0 = Clock::now();
    ASSERT_EQ(ncclAllReduce(in, out, n, ncclInt32, ncclSum, ranks.comm(r), reinterpret_cast<cudaStream_t>(d.queue)),
              ncclSuccess)
        << ncclGetLastError(ranks.comm(r));
    // It returned although its input cannot have been written yet.
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
    cl_event readBack = nullptr;
    ASSERT_EQ(clEnqueueSVMMemcpy(d.queue, CL_FALSE, result.data(), out, n * 4, 0, nullptr, &readBack), CL_SUCCESS);
    clFlush(d.queue);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    cl_int status = CL_COMPLETE;
    ASSERT_EQ(clGetEventInfo(readBack, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status, nullptr),
              CL_SUCCESS);
    EXPECT_GT(status, CL_COMPLETE) << "the copy after the collective ran while its input was still held";
    EXPECT_EQ(result[0], -1);
    ASSERT_EQ(clSetUserEventStatus(producer, CL_COMPLETE), CL_SUCCESS);
    ASSERT_TRUE(waitEvent(readBack, std::chrono::seconds(30))) << "the queue did not drain";
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(result[i], static_cast<int32_t>(3000 + 2 * i)) << "element " << i;
    }
    clReleaseEvent(readBack);
    clReleaseEvent(producer);
    EXPECT_EQ(d.backend->free(in), Result::kSuccess);
    EXPECT_EQ(d.backend->free(out), Result::kSuccess);
  });
}

// A PreMulSum whose scalar lives in device memory is read when the reduction runs, in stream order
// (as NCCL's ncclScalarDevice): a held copy writes the scalar after the call returned, and the
// operator is destroyed right after the call (NCCL allows that once the call returned).
TEST_F(OpenclCollTest, DeviceScalarIsReadInStreamOrder) {
  constexpr int kRanks = 2;
  constexpr size_t n = 1000;
  std::vector<DeviceBackend*> set;
  std::vector<std::unique_ptr<DeviceRank> > dr = makeDeviceRanks(kRanks, &set);
  ASSERT_FALSE(HasFailure());
  BackendRanks ranks(set);
  ASSERT_TRUE(ranks.ok());
  onRankThreads(kRanks, [&](int r) {
    DeviceRank& d = *dr[r];
    void *in = nullptr, *out = nullptr, *scalar = nullptr;
    ASSERT_EQ(d.backend->alloc(n * 4, &in), Result::kSuccess);
    ASSERT_EQ(d.backend->alloc(n * 4, &out), Result::kSuccess);
    ASSERT_EQ(d.backend->alloc(4, &scalar), Result::kSuccess);
    const std::vector<float> src(n, static_cast<float>(r + 1));
    const float before = 1.0f, after = 3.0f;
    std::vector<float> result(n, -1.0f);
    ASSERT_EQ(clEnqueueSVMMemcpy(d.queue, CL_TRUE, in, src.data(), n * 4, 0, nullptr, nullptr), CL_SUCCESS);
    ASSERT_EQ(clEnqueueSVMMemcpy(d.queue, CL_TRUE, scalar, &before, 4, 0, nullptr, nullptr), CL_SUCCESS);
    cl_int err = CL_SUCCESS;
    cl_event producer = clCreateUserEvent(context_, &err);
    ASSERT_EQ(err, CL_SUCCESS);
    ASSERT_EQ(clEnqueueSVMMemcpy(d.queue, CL_FALSE, scalar, &after, 4, 1, &producer, nullptr), CL_SUCCESS);
    ncclRedOp_t op;
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, scalar, ncclFloat32, ncclScalarDevice, ranks.comm(r)), ncclSuccess)
        << ncclGetLastError(ranks.comm(r));
    ASSERT_EQ(ncclAllReduce(in, out, n, ncclFloat32, op, ranks.comm(r), reinterpret_cast<cudaStream_t>(d.queue)),
              ncclSuccess)
        << ncclGetLastError(ranks.comm(r));
    ASSERT_EQ(ncclRedOpDestroy(op, ranks.comm(r)), ncclSuccess) << ncclGetLastError(ranks.comm(r));
    ASSERT_EQ(clSetUserEventStatus(producer, CL_COMPLETE), CL_SUCCESS);
    ASSERT_EQ(clEnqueueSVMMemcpy(d.queue, CL_TRUE, result.data(), out, n * 4, 0, nullptr, nullptr), CL_SUCCESS);
    // Every input times the scalar the held copy wrote: 3 * (1 + 2).
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(result[i], 9.0f) << "element " << i << " on rank " << r;
    clReleaseEvent(producer);
    EXPECT_EQ(d.backend->free(in), Result::kSuccess);
    EXPECT_EQ(d.backend->free(out), Result::kSuccess);
    EXPECT_EQ(d.backend->free(scalar), Result::kSuccess);
  });
}

// Work queued behind an unset user event; ncclCommAbort from another thread returns within 1 s on
// every rank; later work on the queue runs once the event is set.
TEST_F(OpenclCollTest, AbortWithABlockedQueue) {
  constexpr int kRanks = 2;
  constexpr size_t n = 1024;
  std::vector<DeviceBackend*> set;
  std::vector<std::unique_ptr<DeviceRank> > dr = makeDeviceRanks(kRanks, &set);
  ASSERT_FALSE(HasFailure());
  BackendRanks ranks(set);
  ASSERT_TRUE(ranks.ok());
  std::vector<cl_event> producers(kRanks), later(kRanks);
  std::vector<void*> in(kRanks), out(kRanks);
  std::vector<std::vector<float> > seen(kRanks, std::vector<float>(n, 0.0f));
  cl_int err = CL_SUCCESS;
  for (int r = 0; r < kRanks; ++r) {
    DeviceRank& d = *dr[r];
    ASSERT_EQ(d.backend->alloc(n * 4, &in[r]), Result::kSuccess);
    ASSERT_EQ(d.backend->alloc(n * 4, &out[r]), Result::kSuccess);
    producers[r] = clCreateUserEvent(context_, &err);
    ASSERT_EQ(err, CL_SUCCESS);
    ASSERT_EQ(clEnqueueBarrierWithWaitList(d.queue, 1, &producers[r], nullptr), CL_SUCCESS);
    ASSERT_EQ(
        ncclAllReduce(in[r], out[r], n, ncclFloat32, ncclSum, ranks.comm(r), reinterpret_cast<cudaStream_t>(d.queue)),
        ncclSuccess)
        << ncclGetLastError(ranks.comm(r));
    // Later user work on the same queue: a copy of the (never reduced) output to the host.
    ASSERT_EQ(clEnqueueSVMMemcpy(d.queue, CL_FALSE, seen[r].data(), out[r], n * 4, 0, nullptr, &later[r]), CL_SUCCESS);
    clFlush(d.queue);
  }
  // Abort every rank from this (not the ranks') thread, each within a second.
  onRankThreads(kRanks, [&](int r) {
    const auto t0 = Clock::now();
    EXPECT_EQ(ncclCommAbort(ranks.comm(r)), ncclSuccess) << ncclGetLastError(nullptr);
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(1)) << "ncclCommAbort on rank " << r << " took too long";
  });
  for (int r = 0; r < kRanks; ++r) ranks.forget(r);
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(clSetUserEventStatus(producers[r], CL_COMPLETE), CL_SUCCESS);
    EXPECT_TRUE(waitEvent(later[r], std::chrono::seconds(30))) << "rank " << r << ": the queue stayed blocked";
    EXPECT_EQ(clFinish(dr[r]->queue), CL_SUCCESS);
    clReleaseEvent(later[r]);
    clReleaseEvent(producers[r]);
    EXPECT_EQ(dr[r]->backend->free(in[r]), Result::kSuccess);
    EXPECT_EQ(dr[r]->backend->free(out[r]), Result::kSuccess);
  }
}

}  // namespace
}  // namespace mixccl::testing

#endif  // MIXCCL_HAVE_OPENCL
