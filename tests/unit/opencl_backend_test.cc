// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// The OpenCL DeviceBackend against the host backend: reduce() bit for bit for every data type x op
// x transforms, with operands in coarse and fine SVM, registered host memory, plain host memory and
// at odd offsets; copies between every kind of memory; fences and stream gates on a user queue;
// stream validation; memKind; allocation; the mixcclOpencl* extension. Skipped (with the reason)
// when the build has no OpenCL or the machine has no OpenCL platform.

#include <gtest/gtest.h>

#if !defined(MIXCCL_HAVE_OPENCL)

TEST(OpenclBackend, NotBuilt) { GTEST_SKIP() << "mixccl was built without OpenCL headers; the backend is absent"; }

#else

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/config.h"
#include "mixccl/opencl.h"
#include "src/device/device_backend.h"
#include "src/device/host/reduce_kernels.h"
#include "src/device/opencl/opencl_backend.h"
#include "src/device/opencl/opencl_kernels.h"
#include "src/device/opencl/staging_pool.h"
#include "src/device/opencl/svm_heap.h"
#include "tests/support/device_values.h"

namespace mixccl {
namespace {

bool havePlatform(std::string* why) {
  cl_uint n = 0;
  cl_int err = clGetPlatformIDs(0, nullptr, &n);
  if (err != CL_SUCCESS || n == 0) {
    *why = "no OpenCL platform found (clGetPlatformIDs: " + std::to_string(err) + "); install pocl-opencl-icd";
    return false;
  }
  return true;
}

// The first platform's first device (havePlatform() said there is one).
cl_device_id firstDevice() {
  cl_platform_id plat = nullptr;
  cl_device_id d = nullptr;
  clGetPlatformIDs(1, &plat, nullptr);
  clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &d, nullptr);
  return d;
}

// Polls a fence until it leaves kInProgress or `limit` passes.
Result pollFence(DeviceBackend* dev, Fence* f, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  Result r = dev->query(f);
  while (r == Result::kInProgress && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    r = dev->query(f);
  }
  return r;
}

class OpenclBackendTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!havePlatform(&skip_)) return;
    std::unique_ptr<DeviceBackend> b;
    makeResult_ = makeOpenclBackend(&b);
    if (makeResult_ == Result::kSuccess) backend_ = b.release();  // one per process, like the library
    makeError_ = lastError();
  }

  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ASSERT_EQ(makeResult_, Result::kSuccess) << makeError_;
    dev_ = static_cast<OpenclBackend*>(backend_);
  }

  cl_command_queue newUserQueue() {
    cl_int err = CL_SUCCESS;
    cl_command_queue q = clCreateCommandQueueWithProperties(dev_->context(), dev_->device(), nullptr, &err);
    EXPECT_EQ(err, CL_SUCCESS);
    return q;
  }

  static inline std::string skip_;
  static inline Result makeResult_ = Result::kSuccess;
  static inline std::string makeError_;
  static inline DeviceBackend* backend_ = nullptr;
  OpenclBackend* dev_ = nullptr;
};

// Every count is covered exactly, in at most two launches, with three work-group sizes in all:
// POCL compiles a kernel once per work-group size it meets (opencl_kernels.h).
// Parts cover every count exactly, in order, with three work-group sizes in all, and no part of
// a work-group size is wider than widestLaunch for it: what keeps POCL 3's work-group function
// cache at one entry per kernel and size (kernel_launch.h).
TEST(OpenclLaunchParts, EveryCountIsCoveredWithThreeWorkGroupSizesNoneWiderThanItsWidest) {
  std::map<size_t, size_t> widest;  // work-group size -> widest part seen
  for (size_t elemBytes : {size_t{1}, size_t{2}, size_t{4}, size_t{8}}) {
    const size_t full = ocl::launchItems(elemBytes);
    std::vector<size_t> counts;
    for (size_t n = 1; n <= 5000; ++n) counts.push_back(n);
    for (size_t n : {size_t{131072}, size_t{131072 + 63}, size_t{786437}, full - 1, full, full + 1, 3 * full + 321}) {
      counts.push_back(n);
    }
    for (size_t n : counts) {
      size_t parts = 0;
      for (size_t done = 0; done < n; ++parts) {
        const ocl::LaunchPart p = ocl::nextLaunch(n, done, full);
        ASSERT_EQ(p.first, done) << n;
        ASSERT_GT(p.global, 0u) << n;
        ASSERT_EQ(p.global % p.local, 0u) << n;
        ASSERT_LE(p.global, ocl::widestLaunch(p.local, full)) << n << " " << p.local;
        if (p.local == 1) {
          ASSERT_LT(p.global, 64u) << n;
        }
        widest[p.local] = std::max(widest[p.local], p.global);
        done += p.global;
        ASSERT_LE(done, n);
      }
      ASSERT_LE(parts, n / full + 2) << n;  // full parts, then at most a body and a rest
    }
    EXPECT_EQ(ocl::widestLaunch(256, full) * elemBytes, ocl::kMaxLaunchBytes);
  }
  EXPECT_EQ(widest.size(), 3u);
  EXPECT_EQ(widest.count(1) + widest.count(64) + widest.count(256), 3u);
  EXPECT_EQ(ocl::nextLaunch(131072, 0, ocl::launchItems(4)).local, 256u);
}

TEST_F(OpenclBackendTest, IdentityAndCaps) {
  EXPECT_STREQ(dev_->name(), "opencl");
  EXPECT_EQ(dev_->wireId(), 1u);
  EXPECT_GT(std::strlen(dev_->vendor()), 0u);
  EXPECT_GE(dev_->deviceIndex(), 0);
  const BackendCaps c = dev_->caps();
  EXPECT_EQ(c.flags & ~kCapSharesHostCores, kCapAsync | kCapRneRounding | kCapFp8Saturate);
  EXPECT_NE(c.dtypes & (1u << static_cast<int>(DataType::kFloat8e5m2)), 0u);
  EXPECT_NE(c.ops & (1u << static_cast<int>(RedOpKind::kPreMulSum)), 0u);
}

// ---- memory ------------------------------------------------------------------------------------

TEST_F(OpenclBackendTest, AllocFreeAndMemKind) {
  int local = 0;
  EXPECT_EQ(dev_->memKind(&local), MemKind::kHost);
  EXPECT_EQ(dev_->memKind(nullptr), MemKind::kHost);
  void* p = nullptr;
  ASSERT_EQ(dev_->alloc(1000, &p), Result::kSuccess);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(dev_->memKind(p), MemKind::kDevice);
  EXPECT_EQ(dev_->memKind(static_cast<char*>(p) + 999), MemKind::kDevice);
  void* fine = nullptr;
  if (dev_->hasFineSvm()) {
    ASSERT_EQ(dev_->allocSvm(64, true, &fine), Result::kSuccess);
    EXPECT_EQ(dev_->memKind(fine), MemKind::kDevice);
  } else {
    EXPECT_EQ(dev_->allocSvm(64, true, &fine), Result::kInvalidUsage);  // refused with a message
    EXPECT_NE(lastError().find("fine"), std::string::npos) << lastError();
  }
  void* staging = nullptr;
  ASSERT_EQ(dev_->allocStaging(4096, &staging), Result::kSuccess);
  std::memset(staging, 0x11, 4096);  // the CPU may touch staging memory directly
  EXPECT_EQ(dev_->memKind(staging), MemKind::kHost);
  std::vector<uint8_t> slots(8192);
  HostRegistration* reg = nullptr;
  ASSERT_EQ(dev_->registerHost(slots.data(), slots.size(), &reg), Result::kSuccess);
  EXPECT_EQ(dev_->memKind(slots.data() + 100), MemKind::kHost);

  // Wrong frees are refused with a message, never crash.
  EXPECT_EQ(dev_->free(&local), Result::kInvalidArgument);
  EXPECT_NE(lastError().find("not returned"), std::string::npos) << lastError();
  EXPECT_EQ(dev_->free(staging), Result::kInvalidArgument);
  EXPECT_EQ(dev_->freeStaging(p), Result::kInvalidArgument);
  EXPECT_EQ(dev_->free(nullptr), Result::kSuccess);
  EXPECT_EQ(dev_->alloc(16, nullptr), Result::kInvalidArgument);
  HostRegistration* refused = nullptr;  // not `reg`: a refused call clears its output
  EXPECT_EQ(dev_->registerHost(nullptr, 16, &refused), Result::kInvalidArgument);

  EXPECT_EQ(dev_->unregisterHost(reg), Result::kSuccess);
  EXPECT_EQ(dev_->freeStaging(staging), Result::kSuccess);
  if (fine != nullptr) {
    EXPECT_EQ(dev_->free(fine), Result::kSuccess);
  }
  EXPECT_EQ(dev_->free(p), Result::kSuccess);
  EXPECT_EQ(dev_->memKind(p), MemKind::kHost);
  EXPECT_EQ(dev_->free(p), Result::kInvalidArgument);  // double free
}

// reduce() stages operands through reused SVM blocks (clSVMAlloc costs milliseconds on some
// drivers); a block must not be handed out again while a command may still use it.
TEST_F(OpenclBackendTest, StagingPoolReusesABlockOnlyOnceItsLastUseCompleted) {
  using ocl::StagingPool;
  cl_command_queue q = newUserQueue();
  cl_int err = CL_SUCCESS;
  cl_event busy = clCreateUserEvent(dev_->context(), &err);
  ASSERT_EQ(err, CL_SUCCESS);
  {
    ocl::SvmHeap heap(dev_->context());
    StagingPool pool(heap);
    StagingPool::Block a, b, c;
    ASSERT_EQ(pool.take(1000, &a), Result::kSuccess);
    EXPECT_EQ(a.bytes, StagingPool::kMinBlockBytes);
    pool.give(a, busy, q);
    ASSERT_EQ(pool.take(1000, &b), Result::kSuccess);
    EXPECT_NE(b.ptr, a.ptr);  // a's last use has not completed
    ASSERT_EQ(clSetUserEventStatus(busy, CL_COMPLETE), CL_SUCCESS);
    ASSERT_EQ(pool.take(1000, &c), Result::kSuccess);
    EXPECT_EQ(c.ptr, a.ptr);
    pool.give(b, nullptr, q);
    pool.give(c, nullptr, q);
    StagingPool::Block big;
    ASSERT_EQ(pool.take(200000, &big), Result::kSuccess);
    EXPECT_EQ(big.bytes, size_t{256} * 1024);  // powers of two
    EXPECT_TRUE(big.ptr != b.ptr && big.ptr != c.ptr);
    pool.give(big, nullptr, q);

    // More blocks than the pool keeps: the extra one is freed, the kept ones come back.
    std::vector<StagingPool::Block> many(StagingPool::kMaxBlocks + 1);
    for (auto& m : many) ASSERT_EQ(pool.take(1, &m), Result::kSuccess);
    for (auto& m : many) pool.give(m, nullptr, q);
    const std::vector<StagingPool::Block> given = many;
    size_t reused = 0;
    for (auto& m : many) {
      ASSERT_EQ(pool.take(1, &m), Result::kSuccess);
      for (const auto& g : given) reused += m.ptr == g.ptr ? 1 : 0;
    }
    EXPECT_GE(reused, StagingPool::kMaxBlocks);
    for (auto& m : many) pool.give(m, nullptr, q);
  }
  clReleaseEvent(busy);
  clFinish(q);
  clReleaseCommandQueue(q);
}

// freeAfter() keeps the memory until the queue's earlier commands are done (here a marker held
// by a user event), then a later call frees it.
TEST_F(OpenclBackendTest, SvmHeapFreesAfterTheQueueReachesTheFree) {
  cl_command_queue q = newUserQueue();
  cl_int err = CL_SUCCESS;
  cl_event hold = clCreateUserEvent(dev_->context(), &err);
  ASSERT_EQ(err, CL_SUCCESS);
  // Whatever fails below, the queue moves on (the heap's destructor waits for its markers).
  struct Release {
    cl_event e;
    ~Release() { clSetUserEventStatus(e, CL_COMPLETE); }
  };
  {
    Release release{hold};
    ocl::SvmHeap heap(dev_->context());
    void* p = heap.alloc(CL_MEM_READ_WRITE, 4096);
    ASSERT_NE(p, nullptr);
    ASSERT_EQ(clEnqueueMarkerWithWaitList(q, 1, &hold, nullptr), CL_SUCCESS);
    cl_event done = nullptr;
    heap.freeAfter(q, p, &done);
    ASSERT_NE(done, nullptr);
    EXPECT_EQ(heap.pendingFrees(), 1u);  // the queue is held: the free waits
    ASSERT_EQ(clSetUserEventStatus(hold, CL_COMPLETE), CL_SUCCESS);
    ASSERT_EQ(clWaitForEvents(1, &done), CL_SUCCESS);
    EXPECT_EQ(heap.pendingFrees(), 0u);
    clReleaseEvent(done);
    heap.free(nullptr);  // ignored
  }
  clReleaseEvent(hold);
  clReleaseCommandQueue(q);
}

// Ranks of one process allocate at the same time (their inits run in parallel). On NVIDIA's driver
// unserialised clSVMAlloc calls fail about a third of the time from 4 threads (svm_heap.h); through
// the backend none may fail, on any driver.
TEST_F(OpenclBackendTest, ConcurrentAllocationsFromFourThreadsAllSucceed) {
  std::atomic<int> failed{0};
  std::vector<std::string> firstError(4);  // errors are kept per thread
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        void* p = nullptr;
        if (dev_->alloc(1024 + 64 * static_cast<size_t>((i + t) % 16), &p) != Result::kSuccess || p == nullptr ||
            dev_->free(p) != Result::kSuccess) {
          if (failed++ == 0 || firstError[t].empty()) firstError[t] = lastError();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failed.load(), 0) << firstError[0] << " | " << firstError[1] << " | " << firstError[2] << " | "
                              << firstError[3];
}

TEST_F(OpenclBackendTest, HugeAllocationFails) {
  void* p = reinterpret_cast<void*>(1);
  EXPECT_EQ(dev_->alloc(SIZE_MAX / 2, &p), Result::kSystemError);
  EXPECT_EQ(p, nullptr);
  EXPECT_NE(lastError().find("bytes"), std::string::npos) << lastError();
}

// ---- copies --------------------------------------------------------------------------------------

TEST_F(OpenclBackendTest, CopiesBetweenEveryKindOfMemory) {
  const size_t n = 4099;  // odd
  std::vector<uint8_t> src(n), out(n, 0);
  std::mt19937 rng(7);
  for (auto& v : src) v = static_cast<uint8_t>(rng());
  void *coarse = nullptr, *fine = nullptr, *coarse2 = nullptr;
  ASSERT_EQ(dev_->allocSvm(n + 64, false, &coarse), Result::kSuccess);
  // Without fine-grained SVM (NVIDIA) the middle hop is a second coarse-grained buffer.
  ASSERT_EQ(dev_->allocSvm(n + 64, dev_->hasFineSvm(), &fine), Result::kSuccess);
  ASSERT_EQ(dev_->allocSvm(n + 64, false, &coarse2), Result::kSuccess);
  std::vector<uint8_t> regMem(n + 64, 0), regMem2(n + 64, 0);
  HostRegistration *reg = nullptr, *reg2 = nullptr;
  ASSERT_EQ(dev_->registerHost(regMem.data(), regMem.size(), &reg), Result::kSuccess);
  ASSERT_EQ(dev_->registerHost(regMem2.data(), regMem2.size(), &reg2), Result::kSuccess);
  auto* c = static_cast<uint8_t*>(coarse);
  auto* f = static_cast<uint8_t*>(fine);
  auto* c2 = static_cast<uint8_t*>(coarse2);

  // host -> coarse(+3) -> fine(+1) -> registered(+5) -> registered2(+2) -> coarse2 -> host
  ASSERT_EQ(dev_->copy(c + 3, src.data(), n, nullptr), Result::kSuccess);
  ASSERT_EQ(dev_->copy(f + 1, c + 3, n, nullptr), Result::kSuccess);
  ASSERT_EQ(dev_->copy(regMem.data() + 5, f + 1, n, nullptr), Result::kSuccess);
  EXPECT_EQ(std::memcmp(regMem.data() + 5, src.data(), n), 0);  // registered memory is host memory
  ASSERT_EQ(dev_->copy(regMem2.data() + 2, regMem.data() + 5, n, nullptr), Result::kSuccess);
  ASSERT_EQ(dev_->copy(c2, regMem2.data() + 2, n, nullptr), Result::kSuccess);
  ASSERT_EQ(dev_->copy(out.data(), c2, n, nullptr), Result::kSuccess);
  EXPECT_EQ(out, src);
  // registered -> plain host and plain host -> registered
  std::vector<uint8_t> out2(n, 0);
  ASSERT_EQ(dev_->copy(out2.data(), regMem2.data() + 2, n, nullptr), Result::kSuccess);
  EXPECT_EQ(out2, src);
  std::fill(regMem.begin(), regMem.end(), 0);
  ASSERT_EQ(dev_->copy(regMem.data() + 7, src.data(), n, nullptr), Result::kSuccess);
  EXPECT_EQ(std::memcmp(regMem.data() + 7, src.data(), n), 0);

  // Overlapping ranges behave like memmove, in SVM and in registered memory.
  std::vector<uint8_t> want;
  ASSERT_EQ(dev_->copy(c2, src.data(), n, nullptr), Result::kSuccess);
  ASSERT_EQ(dev_->copy(c2 + 10, c2, n - 10, nullptr), Result::kSuccess);
  std::vector<uint8_t> got(n);
  ASSERT_EQ(dev_->copy(got.data(), c2, n, nullptr), Result::kSuccess);
  want.assign(src.begin(), src.end());
  std::memmove(want.data() + 10, want.data(), n - 10);
  EXPECT_EQ(got, want);
  std::memcpy(regMem.data(), src.data(), n);
  ASSERT_EQ(dev_->copy(regMem.data(), regMem.data() + 3, n - 3, nullptr), Result::kSuccess);
  want.assign(src.begin(), src.end());
  std::memmove(want.data(), want.data() + 3, n - 3);
  EXPECT_EQ(std::memcmp(regMem.data(), want.data(), n), 0);

  EXPECT_EQ(dev_->copy(nullptr, src.data(), 4, nullptr), Result::kInvalidArgument);
  EXPECT_EQ(dev_->copy(nullptr, nullptr, 0, nullptr), Result::kSuccess);
  EXPECT_EQ(dev_->unregisterHost(reg), Result::kSuccess);
  EXPECT_EQ(dev_->unregisterHost(reg2), Result::kSuccess);
  EXPECT_EQ(dev_->free(coarse), Result::kSuccess);
  EXPECT_EQ(dev_->free(fine), Result::kSuccess);
  EXPECT_EQ(dev_->free(coarse2), Result::kSuccess);
}

// Copies and reductions longer than one launch part (ocl::kMaxLaunchBytes of each operand): the
// parts reach the kernel as byte offsets added to the operands' own, through registered memory
// at an offset (a cl_mem plus offset), SVM at an offset and plain host memory.
TEST_F(OpenclBackendTest, OperationsLongerThanOneLaunchPartAreExact) {
  const size_t bytes = 2 * ocl::kMaxLaunchBytes + 4099;
  std::vector<uint8_t> src(bytes), regMem(bytes + 64, 0), out(bytes, 0);
  std::mt19937 rng(11);
  for (auto& v : src) v = static_cast<uint8_t>(rng());
  void* coarse = nullptr;
  ASSERT_EQ(dev_->allocSvm(bytes + 64, false, &coarse), Result::kSuccess);
  auto* c = static_cast<uint8_t*>(coarse);
  HostRegistration* reg = nullptr;
  ASSERT_EQ(dev_->registerHost(regMem.data(), regMem.size(), &reg), Result::kSuccess);
  // host -> registered(+5) -> coarse(+3) (the copy kernel) -> host
  std::memcpy(regMem.data() + 5, src.data(), bytes);
  ASSERT_EQ(dev_->copy(c + 3, regMem.data() + 5, bytes, nullptr), Result::kSuccess) << lastError();
  ASSERT_EQ(dev_->copy(out.data(), c + 3, bytes, nullptr), Result::kSuccess);
  EXPECT_EQ(out, src);

  // float sum: registered dst at +16 bytes, SVM a at +4, plain host b; two full parts, a body of
  // a multiple of 64 and a rest.
  const size_t count = 2 * ocl::launchItems(sizeof(float)) + 321;
  std::vector<float> a(count), b(count), sum(count + 4, 0.0f);
  for (size_t i = 0; i < count; ++i) {
    a[i] = static_cast<float>(i % 1000);
    b[i] = static_cast<float>((i * 7) % 1000) + 0.5f;
  }
  void* svm = nullptr;
  ASSERT_EQ(dev_->allocSvm((count + 1) * sizeof(float), false, &svm), Result::kSuccess);
  float* da = static_cast<float*>(svm) + 1;
  ASSERT_EQ(dev_->copy(da, a.data(), count * sizeof(float), nullptr), Result::kSuccess);
  HostRegistration* sumReg = nullptr;
  ASSERT_EQ(dev_->registerHost(sum.data(), sum.size() * sizeof(float), &sumReg), Result::kSuccess);
  ReduceSpec spec;
  spec.dtype = DataType::kFloat32;
  ASSERT_EQ(dev_->reduce(sum.data() + 4, da, b.data(), count, spec, true, true, nullptr), Result::kSuccess)
      << lastError();
  for (size_t i = 0; i < count; ++i) ASSERT_EQ(sum[i + 4], a[i] + b[i]) << i;
  EXPECT_EQ(sum[0] + sum[1] + sum[2] + sum[3], 0.0f);  // nothing written before dst

  EXPECT_EQ(dev_->unregisterHost(sumReg), Result::kSuccess);
  EXPECT_EQ(dev_->unregisterHost(reg), Result::kSuccess);
  EXPECT_EQ(dev_->free(svm), Result::kSuccess);
  EXPECT_EQ(dev_->free(coarse), Result::kSuccess);
}

// ---- streams, fences, gates ----------------------------------------------------------------------

TEST_F(OpenclBackendTest, CheckStreamRefusesWhatIsNotOurQueue) {
  EXPECT_EQ(dev_->checkStream(nullptr), Result::kSuccess);
  cl_command_queue mine = newUserQueue();
  EXPECT_EQ(dev_->checkStream(mine), Result::kSuccess) << lastError();

  uint64_t notAQueue[4] = {0x1234, 0, 0, 0};
  EXPECT_EQ(dev_->checkStream(notAQueue), Result::kInvalidArgument);
  EXPECT_NE(lastError().find("not a cl_command_queue"), std::string::npos) << lastError();
  EXPECT_EQ(dev_->checkStream(reinterpret_cast<void*>(0x10)), Result::kInvalidArgument);           // unmapped: no crash
  EXPECT_EQ(dev_->checkStream(reinterpret_cast<char*>(notAQueue) + 1), Result::kInvalidArgument);  // misaligned

  // A queue of another context on the same device.
  cl_int err = CL_SUCCESS;
  cl_device_id d = dev_->device();
  cl_context other = clCreateContext(nullptr, 1, &d, nullptr, nullptr, &err);
  ASSERT_EQ(err, CL_SUCCESS);
  cl_command_queue foreign = clCreateCommandQueueWithProperties(other, d, nullptr, &err);
  ASSERT_EQ(err, CL_SUCCESS);
  EXPECT_EQ(dev_->checkStream(foreign), Result::kInvalidArgument);
  EXPECT_NE(lastError().find("another context"), std::string::npos) << lastError();
  WorkQueue* wq = nullptr;
  EXPECT_EQ(dev_->openQueue(foreign, &wq), Result::kInvalidArgument);
  Fence* f = nullptr;
  EXPECT_EQ(dev_->markStart(foreign, &f), Result::kInvalidArgument);
  StreamGate* g = nullptr;
  EXPECT_EQ(dev_->holdStream(notAQueue, &g), Result::kInvalidArgument);

  // Objects of the library's own platform and context that are no queue: the message says so
  // instead of blaming a context or device.
  cl_mem buffer = clCreateBuffer(dev_->context(), CL_MEM_READ_WRITE, 64, nullptr, &err);
  ASSERT_EQ(err, CL_SUCCESS);
  cl_event userEvent = clCreateUserEvent(dev_->context(), &err);
  ASSERT_EQ(err, CL_SUCCESS);
  const std::pair<const char*, void*> notQueues[] = {
      {"cl_mem", buffer}, {"cl_event", userEvent}, {"the library's cl_context", dev_->context()}};
  for (const auto& [what, obj] : notQueues) {
    EXPECT_EQ(dev_->checkStream(obj), Result::kInvalidArgument) << what;
    EXPECT_NE(lastError().find("not a cl_command_queue"), std::string::npos) << what << ": " << lastError();
  }
  clSetUserEventStatus(userEvent, CL_COMPLETE);
  clReleaseEvent(userEvent);
  clReleaseMemObject(buffer);

  clReleaseCommandQueue(foreign);
  clReleaseContext(other);
  clReleaseCommandQueue(mine);
}

// checkStream remembers the queues it accepted (retaining them, so that a remembered address is
// always that queue) and forgets the oldest beyond a bound. Many queues, each released by the
// user after use, go through that bound; the checks still refuse what they refused before, and
// the queues they accepted stay usable for work after the user dropped them while listed.
TEST_F(OpenclBackendTest, CheckStreamRemembersAcceptedQueuesWithinABound) {
  std::vector<cl_command_queue> queues;
  for (size_t i = 0; i < 3 * ocl::Runtime::kKnownQueues; ++i) {
    cl_command_queue q = newUserQueue();
    EXPECT_EQ(dev_->checkStream(q), Result::kSuccess) << lastError();
    EXPECT_EQ(dev_->checkStream(q), Result::kSuccess) << lastError();  // remembered
    queues.push_back(q);
  }
  uint64_t notAQueue[4] = {0x1234, 0, 0, 0};
  EXPECT_EQ(dev_->checkStream(notAQueue), Result::kInvalidArgument);
  // The newest queues are listed: a check after the user's release is still sound, and the queue
  // still runs work through the backend.
  cl_command_queue last = queues.back();
  clRetainCommandQueue(last);
  for (cl_command_queue q : queues) clReleaseCommandQueue(q);
  EXPECT_EQ(dev_->checkStream(last), Result::kSuccess) << lastError();
  Fence* f = nullptr;
  ASSERT_EQ(dev_->markStart(last, &f), Result::kSuccess) << lastError();
  Result r = Result::kInProgress;
  for (int i = 0; i < 100000 && r == Result::kInProgress; ++i) r = dev_->query(f);
  EXPECT_EQ(r, Result::kSuccess) << lastError();
  dev_->releaseFence(f);
  clFinish(last);
  clReleaseCommandQueue(last);
}

// An in-order queue (the start marker also waits on a permit the first query grants) and an
// out-of-order one (a plain marker).
TEST_F(OpenclBackendTest, MarkStartWaitsForEarlierUserWork) {
  cl_int err = CL_SUCCESS;
  const cl_queue_properties outOfOrder[] = {CL_QUEUE_PROPERTIES, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, 0};
  cl_command_queue ooq = clCreateCommandQueueWithProperties(dev_->context(), dev_->device(), outOfOrder, &err);
  ASSERT_EQ(err, CL_SUCCESS);
  for (cl_command_queue q : {newUserQueue(), ooq}) {
    // The user's "kernel producing the send buffer": a barrier on a user event we control.
    cl_event producer = clCreateUserEvent(dev_->context(), &err);
    ASSERT_EQ(err, CL_SUCCESS);
    ASSERT_EQ(clEnqueueBarrierWithWaitList(q, 1, &producer, nullptr), CL_SUCCESS);
    Fence* start = nullptr;
    ASSERT_EQ(dev_->markStart(q, &start), Result::kSuccess) << lastError();
    ASSERT_NE(start, nullptr);
    for (int i = 0; i < 20; ++i) {
      EXPECT_EQ(dev_->query(start), Result::kInProgress);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_EQ(clSetUserEventStatus(producer, CL_COMPLETE), CL_SUCCESS);
    EXPECT_EQ(pollFence(dev_, start, std::chrono::seconds(10)), Result::kSuccess);
    dev_->releaseFence(start);
    clReleaseEvent(producer);
    clReleaseCommandQueue(q);
  }

  // NULL stream: an already signalled (null) fence.
  Fence* start = nullptr;
  ASSERT_EQ(dev_->markStart(nullptr, &start), Result::kSuccess);
  EXPECT_EQ(dev_->query(start), Result::kSuccess);
  dev_->releaseFence(start);
}

TEST_F(OpenclBackendTest, HoldStreamBlocksLaterUserWorkUntilReleased) {
  cl_command_queue uq = newUserQueue();
  StreamGate* gate = nullptr;
  ASSERT_EQ(dev_->holdStream(uq, &gate), Result::kSuccess) << lastError();
  ASSERT_NE(gate, nullptr);
  // Later user work: a copy into host memory through the user's queue.
  void* svm = nullptr;
  ASSERT_EQ(dev_->alloc(64, &svm), Result::kSuccess);
  uint32_t pattern[16], seen[16] = {};
  for (int i = 0; i < 16; ++i) pattern[i] = 0xabc00000u + i;
  ASSERT_EQ(dev_->copy(svm, pattern, sizeof(pattern), nullptr), Result::kSuccess);
  cl_event later = nullptr;
  ASSERT_EQ(clEnqueueSVMMemcpy(uq, CL_FALSE, seen, svm, sizeof(seen), 0, nullptr, &later), CL_SUCCESS);
  clFlush(uq);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  cl_int status = CL_COMPLETE;
  ASSERT_EQ(clGetEventInfo(later, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status, nullptr), CL_SUCCESS);
  EXPECT_GT(status, CL_COMPLETE) << "the user's copy ran while the stream was held";
  EXPECT_EQ(seen[0], 0u);
  ASSERT_EQ(dev_->releaseStream(gate), Result::kSuccess);
  ASSERT_EQ(clWaitForEvents(1, &later), CL_SUCCESS);
  EXPECT_EQ(std::memcmp(seen, pattern, sizeof(seen)), 0);
  clReleaseEvent(later);
  // NULL stream: a null gate, released as a no-op.
  ASSERT_EQ(dev_->holdStream(nullptr, &gate), Result::kSuccess);
  EXPECT_EQ(gate, nullptr);
  EXPECT_EQ(dev_->releaseStream(gate), Result::kSuccess);
  EXPECT_EQ(dev_->free(svm), Result::kSuccess);
  clReleaseCommandQueue(uq);
}

// Four threads, each on its own queue, launch kernels that nothing in this process launched
// before, with sizes that keep growing: on POCL before 7.0 this aborted the process in every run
// (pocl_release_dlhandle_cache: `found->ref_count > 0`) until the widest launch of each kernel
// and work-group size went first (kernel_launch.h). The results are checked too.
TEST_F(OpenclBackendTest, ConcurrentLaunchesOfGrowingSizesOnFourQueues) {
  constexpr int kThreads = 4;
  constexpr size_t kMax = 120000;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  std::string firstError;
  std::mutex errMu;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto bad = [&](const std::string& what) {
        std::lock_guard<std::mutex> lock(errMu);
        if (failures++ == 0) firstError = what;
      };
      cl_command_queue uq = newUserQueue();
      WorkQueue* wq = nullptr;
      void *da = nullptr, *db = nullptr, *dd = nullptr;
      if (dev_->openQueue(uq, &wq) != Result::kSuccess || dev_->alloc(kMax * 4, &da) != Result::kSuccess ||
          dev_->alloc(kMax * 4, &db) != Result::kSuccess || dev_->alloc(kMax * 4, &dd) != Result::kSuccess) {
        bad(lastError());
        return;
      }
      std::vector<int32_t> a(kMax), b(kMax), out(kMax);
      for (size_t i = 0; i < kMax; ++i) {
        a[i] = static_cast<int32_t>((i * 7919 + t) % 1000);
        b[i] = static_cast<int32_t>((i * 104729 + 3 * t) % 1000);
      }
      if (dev_->copy(da, a.data(), kMax * 4, wq) != Result::kSuccess ||
          dev_->copy(db, b.data(), kMax * 4, wq) != Result::kSuccess) {
        bad(lastError());
      }
      // Four kernels (int32 and uint32 max and min; the values fit either), each met fresh.
      for (int round = 0; round < 4; ++round) {
        ReduceSpec spec;
        spec.dtype = round < 2 ? DataType::kInt32 : DataType::kUint32;
        const bool isMax = round % 2 == 0;
        spec.op = isMax ? RedOpKind::kMax : RedOpKind::kMin;
        std::mt19937 rng(t);
        for (size_t it = 0; it < 300 && failures.load() == 0; ++it) {
          const size_t n = std::min(kMax, 1 + it * 397 + rng() % 64);
          if (dev_->reduce(dd, da, db, n, spec, true, true, wq) != Result::kSuccess) {
            bad(lastError());
            break;
          }
          if (it % 32 != 31 && it != 299) continue;
          // Every 32nd size is read back once the queue has run it.
          Fence* done = nullptr;
          if (dev_->record(wq, &done) != Result::kSuccess ||
              pollFence(dev_, done, std::chrono::seconds(60)) != Result::kSuccess) {
            bad("fence: " + lastError());
            break;
          }
          dev_->releaseFence(done);
          std::fill(out.begin(), out.end(), -1);
          if (dev_->copy(out.data(), dd, n * 4, nullptr) != Result::kSuccess) bad(lastError());
          for (size_t i = 0; i < n; ++i) {
            if (out[i] != (isMax ? std::max(a[i], b[i]) : std::min(a[i], b[i]))) {
              bad("size " + std::to_string(n) + ": element " + std::to_string(i) + " is " + std::to_string(out[i]));
              break;
            }
          }
        }
      }
      if (dev_->closeQueue(wq) != Result::kSuccess || dev_->free(da) != Result::kSuccess ||
          dev_->free(db) != Result::kSuccess || dev_->free(dd) != Result::kSuccess) {
        bad(lastError());
      }
      clReleaseCommandQueue(uq);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0) << firstError;
}

TEST_F(OpenclBackendTest, WorkQueueReduceCompletesThroughItsFence) {
  cl_command_queue uq = newUserQueue();
  WorkQueue* wq = nullptr;
  ASSERT_EQ(dev_->openQueue(uq, &wq), Result::kSuccess) << lastError();
  const size_t n = 100003;
  std::vector<float> a(n), b(n), out(n, 0.0f);
  for (size_t i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i) * 0.5f;
    b[i] = 1.25f;
  }
  void *da = nullptr, *db = nullptr;
  ASSERT_EQ(dev_->alloc(n * 4, &da), Result::kSuccess);
  ASSERT_EQ(dev_->alloc(n * 4, &db), Result::kSuccess);
  ASSERT_EQ(dev_->copy(da, a.data(), n * 4, wq), Result::kSuccess);
  ASSERT_EQ(dev_->copy(db, b.data(), n * 4, wq), Result::kSuccess);
  ReduceSpec spec;
  spec.dtype = DataType::kFloat32;
  ASSERT_EQ(dev_->reduce(da, da, db, n, spec, true, true, wq), Result::kSuccess) << lastError();
  ASSERT_EQ(dev_->copy(out.data(), da, n * 4, wq), Result::kSuccess);
  Fence* done = nullptr;
  ASSERT_EQ(dev_->record(wq, &done), Result::kSuccess);
  // The fence is the last command's own event (no marker): the data is there once it signals.
  EXPECT_EQ(pollFence(dev_, done, std::chrono::seconds(30)), Result::kSuccess);
  dev_->releaseFence(done);
  for (size_t i = 0; i < n; i += 997) ASSERT_EQ(out[i], a[i] + 1.25f) << i;
  EXPECT_EQ(out[n - 1], a[n - 1] + 1.25f);
  // A record with no work since the last one (a marker then) and one after a reduce alone.
  ASSERT_EQ(dev_->record(wq, &done), Result::kSuccess);
  EXPECT_EQ(pollFence(dev_, done, std::chrono::seconds(30)), Result::kSuccess);
  dev_->releaseFence(done);
  ASSERT_EQ(dev_->reduce(db, da, db, n, spec, false, false, wq), Result::kSuccess) << lastError();
  ASSERT_EQ(dev_->record(wq, &done), Result::kSuccess);
  EXPECT_EQ(pollFence(dev_, done, std::chrono::seconds(30)), Result::kSuccess);
  dev_->releaseFence(done);
  std::vector<float> twice(n, 0.0f);
  ASSERT_EQ(dev_->copy(twice.data(), db, n * 4, nullptr), Result::kSuccess);
  EXPECT_EQ(twice[n - 1], a[n - 1] + 1.25f + 1.25f);
  EXPECT_EQ(dev_->closeQueue(wq), Result::kSuccess);
  EXPECT_EQ(dev_->free(da), Result::kSuccess);
  EXPECT_EQ(dev_->free(db), Result::kSuccess);
  clReleaseCommandQueue(uq);
}

TEST_F(OpenclBackendTest, ReduceRejectsBadArguments) {
  ReduceSpec spec;
  spec.op = RedOpKind::kAvg;
  float x = 1.0f;
  EXPECT_EQ(dev_->reduce(&x, &x, &x, 1, spec, false, false, nullptr), Result::kInvalidArgument);
  spec.op = RedOpKind::kSum;
  spec.dtype = static_cast<DataType>(42);
  EXPECT_EQ(dev_->reduce(&x, &x, &x, 1, spec, false, false, nullptr), Result::kInvalidArgument);
  spec.dtype = DataType::kFloat32;
  EXPECT_EQ(dev_->reduce(nullptr, &x, &x, 1, spec, false, false, nullptr), Result::kInvalidArgument);
  EXPECT_EQ(dev_->reduce(nullptr, nullptr, nullptr, 0, spec, false, false, nullptr), Result::kSuccess);
}

// ---- reduce, bit for bit against the host backend ------------------------------------------------

enum class Placement { kCoarse, kFine, kRegistered, kPlainHost, kOddOffsets };

const char* placementName(Placement p) {
  switch (p) {
    case Placement::kCoarse:
      return "coarse SVM";
    case Placement::kFine:
      return "fine SVM";
    case Placement::kRegistered:
      return "registered host";
    case Placement::kPlainHost:
      return "plain host";
    case Placement::kOddOffsets:
      return "coarse SVM at odd offsets";
  }
  return "?";
}

// Device buffers of one placement, with the bytes copied in and out through the backend.
class Buffers {
 public:
  Buffers(OpenclBackend* dev, Placement p, size_t bytes, size_t offset) : dev_(dev), p_(p), offset_(offset) {
    const size_t total = bytes + offset + 64;
    if (p == Placement::kFine && !dev->hasFineSvm()) return;  // the test skips (fineMissing)
    if (p == Placement::kCoarse || p == Placement::kOddOffsets || p == Placement::kFine) {
      EXPECT_EQ(dev->allocSvm(total, p == Placement::kFine, &base_), Result::kSuccess);
    } else {
      EXPECT_EQ(posix_memalign(&base_, 4096, total), 0);
      if (p == Placement::kRegistered) {
        EXPECT_EQ(dev->registerHost(base_, total, &reg_), Result::kSuccess);
      }
    }
  }
  ~Buffers() {
    if (p_ == Placement::kCoarse || p_ == Placement::kOddOffsets || p_ == Placement::kFine) {
      EXPECT_EQ(dev_->free(base_), Result::kSuccess);
    } else {
      if (reg_ != nullptr) {
        EXPECT_EQ(dev_->unregisterHost(reg_), Result::kSuccess);
      }
      std::free(base_);
    }
  }
  void* ptr() const { return static_cast<uint8_t*>(base_) + offset_; }
  void put(const std::vector<uint8_t>& v) {
    ASSERT_EQ(dev_->copy(ptr(), v.data(), v.size(), nullptr), Result::kSuccess);
  }
  std::vector<uint8_t> get(size_t bytes) {
    std::vector<uint8_t> v(bytes);
    EXPECT_EQ(dev_->copy(v.data(), ptr(), bytes, nullptr), Result::kSuccess);
    return v;
  }

 private:
  OpenclBackend* dev_;
  Placement p_;
  size_t offset_;
  void* base_ = nullptr;
  HostRegistration* reg_ = nullptr;
};

class OpenclBackendReduceTest : public OpenclBackendTest, public ::testing::WithParamInterface<Placement> {};

std::string hexElem(const uint8_t* p, size_t size) {
  uint64_t v = 0;
  std::memcpy(&v, p, size);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%0*llx", static_cast<int>(size * 2), static_cast<unsigned long long>(v));
  return buf;
}

TEST_P(OpenclBackendReduceTest, MatchesHostBitForBit) {
  if (GetParam() == Placement::kFine && !dev_->hasFineSvm()) GTEST_SKIP() << "the device has no fine-grained SVM";
  const Placement placement = GetParam();
  std::mt19937_64 rng(1234 + static_cast<int>(placement));
  const BackendCaps caps = dev_->caps();
  for (int t = 0; t < kNumDataTypes; ++t) {
    const auto dtype = static_cast<DataType>(t);
    if ((caps.dtypes & (1u << t)) == 0) continue;
    const size_t size = dataTypeSize(dtype);
    for (size_t count : {size_t{1}, size_t{1003}}) {
      const size_t bytes = count * size;
      // Odd offsets: whole elements plus, for the inputs, a misaligned byte offset (bounced).
      const bool odd = placement == Placement::kOddOffsets;
      Buffers da(dev_, placement, bytes, odd ? 3 * size : 0);
      Buffers db(dev_, placement, bytes, odd ? 5 * size + (size > 1 ? 1 : 0) : 0);
      Buffers dd(dev_, placement, bytes, odd ? 7 * size : 0);
      for (int op = 0; op < 4; ++op) {
        for (int flags = 0; flags < 8; ++flags) {
          const bool hasA = flags & 1, pre = flags & 2, post = flags & 4;
          if (!hasA && op != 0) continue;  // the op plays no part without a second operand
          ReduceSpec spec;
          spec.dtype = dtype;
          spec.op = static_cast<RedOpKind>(op);
          spec.preMul = pre;
          encodeScalar(dtype, (rng() % 2) ? 1.0 / 3.0 : -2.75, spec.scalar);
          spec.divisor = post ? 3 + rng() % 5 : 0;
          SCOPED_TRACE(std::string(placementName(placement)) + " " + dataTypeName(dtype) + " " + redOpName(spec.op) +
                       " count " + std::to_string(count) + " a " + (hasA ? "yes" : "no") + " pre " +
                       (pre ? "yes" : "no") + " post " + (post ? "yes" : "no"));
          const auto a = testing::randomElements(static_cast<int>(dtype), count, rng);
          const auto b = testing::randomElements(static_cast<int>(dtype), count, rng);
          std::vector<uint8_t> want(bytes);
          ASSERT_EQ(host::reduce(want.data(), hasA ? a.data() : nullptr, b.data(), count, spec, true, true),
                    Result::kSuccess);
          da.put(a);
          db.put(b);
          dd.put(std::vector<uint8_t>(bytes, 0xcd));
          ASSERT_EQ(dev_->reduce(dd.ptr(), hasA ? da.ptr() : nullptr, db.ptr(), count, spec, true, true, nullptr),
                    Result::kSuccess)
              << lastError();
          const auto got = dd.get(bytes);
          // Every element bit for bit, NaNs included (both store the canonical NaN).
          for (size_t i = 0; i < count; ++i) {
            if (std::memcmp(&got[i * size], &want[i * size], size) == 0) continue;
            FAIL() << "first difference at element " << i << ": a " << (hasA ? hexElem(&a[i * size], size) : "-")
                   << " b " << hexElem(&b[i * size], size) << " -> opencl " << hexElem(&got[i * size], size) << " host "
                   << hexElem(&want[i * size], size);
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Placements, OpenclBackendReduceTest,
                         ::testing::Values(Placement::kCoarse, Placement::kFine, Placement::kRegistered,
                                           Placement::kPlainHost, Placement::kOddOffsets),
                         [](const ::testing::TestParamInfo<Placement>& i) {
                           switch (i.param) {
                             case Placement::kCoarse:
                               return std::string("CoarseSvm");
                             case Placement::kFine:
                               return std::string("FineSvm");
                             case Placement::kRegistered:
                               return std::string("RegisteredHost");
                             case Placement::kPlainHost:
                               return std::string("PlainHost");
                             default:
                               return std::string("OddOffsets");
                           }
                         });

// reduceDual stores the very bytes reduce() computes in both destinations, whatever memory the
// second one is (a plain host slot is wrapped, a misaligned one gets a copy), synchronously and on a
// work queue.
TEST_P(OpenclBackendReduceTest, DualStoresTheSameBytesTwice) {
  if (GetParam() == Placement::kFine && !dev_->hasFineSvm()) GTEST_SKIP() << "the device has no fine-grained SVM";
  const Placement placement = GetParam();
  std::mt19937_64 rng(77 + static_cast<int>(placement));
  WorkQueue* q = nullptr;
  ASSERT_EQ(dev_->openQueue(nullptr, &q), Result::kSuccess) << lastError();
  for (int t = 0; t < kNumDataTypes; ++t) {
    const auto dtype = static_cast<DataType>(t);
    if ((dev_->caps().dtypes & (1u << t)) == 0) continue;
    const size_t size = dataTypeSize(dtype);
    const size_t count = 1003;
    const size_t bytes = count * size;
    const bool odd = placement == Placement::kOddOffsets;
    Buffers da(dev_, Placement::kCoarse, bytes, 0);
    Buffers db(dev_, Placement::kCoarse, bytes, 0);
    Buffers dd(dev_, Placement::kCoarse, bytes, 0);
    Buffers d2(dev_, placement, bytes, odd ? 3 * size : 0);
    for (const bool queued : {false, true}) {
      for (const bool pre : {false, true}) {
        SCOPED_TRACE(std::string(placementName(placement)) + " " + dataTypeName(dtype) + (queued ? " queued" : "") +
                     (pre ? " pre" : ""));
        ReduceSpec spec;
        spec.dtype = dtype;
        spec.op = RedOpKind::kSum;
        spec.preMul = pre;
        encodeScalar(dtype, 1.0 / 3.0, spec.scalar);
        const auto a = testing::randomElements(static_cast<int>(dtype), count, rng);
        const auto b = testing::randomElements(static_cast<int>(dtype), count, rng);
        da.put(a);
        db.put(b);
        ASSERT_EQ(dev_->reduce(dd.ptr(), da.ptr(), db.ptr(), count, spec, true, true, nullptr), Result::kSuccess);
        const auto want = dd.get(bytes);
        dd.put(std::vector<uint8_t>(bytes, 0xcd));
        d2.put(std::vector<uint8_t>(bytes, 0xab));
        ASSERT_EQ(
            dev_->reduceDual(dd.ptr(), d2.ptr(), da.ptr(), db.ptr(), count, spec, true, true, queued ? q : nullptr),
            Result::kSuccess)
            << lastError();
        if (queued) {
          Fence* f = nullptr;
          ASSERT_EQ(dev_->record(q, &f), Result::kSuccess);
          Result r = Result::kInProgress;
          for (int i = 0; i < 1000000 && r == Result::kInProgress; ++i) r = dev_->query(f);
          dev_->releaseFence(f);
          ASSERT_EQ(r, Result::kSuccess) << lastError();
        }
        EXPECT_TRUE(dd.get(bytes) == want) << "first destination";
        EXPECT_TRUE(d2.get(bytes) == want) << "second destination";
      }
    }
  }
  ASSERT_EQ(dev_->closeQueue(q), Result::kSuccess);
}

TEST_F(OpenclBackendTest, ReduceInPlace) {
  const size_t n = 517;
  std::mt19937_64 rng(99);
  for (DataType dtype : {DataType::kFloat16, DataType::kInt32, DataType::kFloat8e4m3}) {
    const size_t size = dataTypeSize(dtype);
    const auto a = testing::randomElements(static_cast<int>(dtype), n, rng);
    const auto b = testing::randomElements(static_cast<int>(dtype), n, rng);
    ReduceSpec spec;
    spec.dtype = dtype;
    spec.op = RedOpKind::kMax;
    std::vector<uint8_t> want(n * size);
    ASSERT_EQ(host::reduce(want.data(), a.data(), b.data(), n, spec, true, true), Result::kSuccess);
    Buffers da(dev_, Placement::kCoarse, n * size, 0);
    Buffers db(dev_, Placement::kCoarse, n * size, 0);
    da.put(a);
    db.put(b);
    ASSERT_EQ(dev_->reduce(da.ptr(), da.ptr(), db.ptr(), n, spec, true, true, nullptr), Result::kSuccess);
    EXPECT_EQ(da.get(n * size), want) << dataTypeName(dtype);
  }
}

// Every pair (a, b) of the special values (NaNs with payloads, infinities, signed zeros,
// subnormals, ties, limits) under every op and transform, with special PreMulSum scalars (a NaN, an
// infinity, a subnormal or wrapping integer, 1/3): the device kernels must store the host's bits.
TEST_F(OpenclBackendTest, SpecialValuePairsMatchHostBitForBit) {
  const BackendCaps caps = dev_->caps();
  for (int t = 0; t < kNumDataTypes; ++t) {
    if ((caps.dtypes & (1u << t)) == 0) continue;
    const auto dtype = static_cast<DataType>(t);
    const size_t size = dataTypeSize(dtype);
    const std::vector<uint64_t> vals = testing::specialBits(t);
    const size_t n = vals.size() * vals.size();
    std::vector<uint8_t> a(n * size), b(n * size);
    for (size_t i = 0; i < n; ++i) {
      std::memcpy(&a[i * size], &vals[i / vals.size()], size);
      std::memcpy(&b[i * size], &vals[i % vals.size()], size);
    }
    uint64_t third = 0;
    encodeScalar(dtype, isFloatType(dtype) ? 1.0 / 3.0 : 3.0, reinterpret_cast<uint8_t*>(&third));
    const uint64_t scalars[] = {vals[2], vals[vals.size() - 4], vals[vals.size() - 3], third};
    Buffers da(dev_, Placement::kCoarse, n * size, 0);
    Buffers db(dev_, Placement::kCoarse, n * size, 0);
    Buffers dd(dev_, Placement::kCoarse, n * size, 0);
    da.put(a);
    db.put(b);
    for (int op = 0; op < 4; ++op) {
      for (int flags = 1; flags < 8; ++flags) {
        const bool hasA = flags & 1, pre = flags & 2, post = flags & 4;
        if (!hasA && op != 0) continue;
        for (uint64_t scalar : scalars) {
          if (!pre && scalar != scalars[0]) continue;
          ReduceSpec spec;
          spec.dtype = dtype;
          spec.op = static_cast<RedOpKind>(op);
          spec.preMul = pre;
          std::memcpy(spec.scalar, &scalar, size);
          spec.divisor = post ? 3 : 0;
          SCOPED_TRACE(std::string(dataTypeName(dtype)) + " " + redOpName(spec.op) + " flags " + std::to_string(flags) +
                       " scalar " + hexElem(spec.scalar, size));
          std::vector<uint8_t> want(n * size);
          ASSERT_EQ(host::reduce(want.data(), hasA ? a.data() : nullptr, b.data(), n, spec, true, true),
                    Result::kSuccess);
          ASSERT_EQ(dev_->reduce(dd.ptr(), hasA ? da.ptr() : nullptr, db.ptr(), n, spec, true, true, nullptr),
                    Result::kSuccess)
              << lastError();
          const std::vector<uint8_t> got = dd.get(n * size);
          const std::string diff = testing::compareElements(t, got.data(), want.data(), n * size);
          ASSERT_TRUE(diff.empty()) << diff;
        }
      }
    }
  }
}

// ---- the application's context, in fresh processes (the runtime is process-wide) -----------------

TEST(OpenclBackendProcess, BadDeviceKnobFailsWithAMessage) {
  std::string why;
  if (!havePlatform(&why)) GTEST_SKIP() << why;
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("MIXCCL_OPENCL_DEVICE", "9:9", 1);
        config::resetForTesting();
        std::unique_ptr<DeviceBackend> b;
        const Result r = makeOpenclBackend(&b);
        const bool named = lastError().find("MIXCCL_OPENCL_DEVICE") != std::string::npos;
        std::_Exit(r == Result::kInvalidArgument && named && b == nullptr ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// A context argument that is no OpenCL object is refused with a message, not dereferenced (the ICD
// loader would call through its first word and crash); a valid context is still taken afterwards.
TEST(OpenclBackendProcess, UseContextRefusesWhatIsNoContext) {
  std::string why;
  if (!havePlatform(&why)) GTEST_SKIP() << why;
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        cl_device_id d = firstDevice();
        int code = 0;
        uint64_t notAContext[4] = {};  // (a braced list of several values would split the macro's arguments)
        notAContext[0] = 0x1234;
        if (mixcclOpenclUseContext(reinterpret_cast<cl_context>(notAContext), d) != ncclInvalidArgument) code |= 1;
        if (std::string(ncclGetLastError(nullptr)).find("not an OpenCL object") == std::string::npos) code |= 2;
        if (mixcclOpenclUseContext(reinterpret_cast<cl_context>(0x10), d) != ncclInvalidArgument) code |= 4;
        cl_int err = CL_SUCCESS;
        cl_context ctx = clCreateContext(nullptr, 1, &d, nullptr, nullptr, &err);
        if (mixcclOpenclUseContext(ctx, d) != ncclSuccess) code |= 8;
        std::_Exit(code);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(OpenclBackendProcess, ApplicationContextIsUsed) {
  std::string why;
  if (!havePlatform(&why)) GTEST_SKIP() << why;
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        cl_device_id d = firstDevice();
        cl_int err = CL_SUCCESS;
        cl_context ctx = clCreateContext(nullptr, 1, &d, nullptr, nullptr, &err);
        int code = 0;
        if (mixcclOpenclUseContext(nullptr, d) != ncclInvalidArgument) code |= 1;
        if (mixcclOpenclUseContext(ctx, d) != ncclSuccess) code |= 2;
        std::unique_ptr<DeviceBackend> b;
        if (makeOpenclBackend(&b) != Result::kSuccess) std::_Exit(4);
        auto* ob = static_cast<OpenclBackend*>(b.get());
        if (ob->context() != ctx) code |= 8;
        cl_context got = nullptr;
        cl_device_id gotDev = nullptr;
        if (mixcclOpenclGetContext(&got, &gotDev) != ncclSuccess || got != ctx || gotDev != d) code |= 16;
        if (mixcclOpenclGetContext(nullptr, nullptr) != ncclInvalidArgument) code |= 32;
        if (mixcclOpenclUseContext(ctx, d) != ncclInvalidUsage) code |= 64;  // too late now
        cl_command_queue q = clCreateCommandQueueWithProperties(ctx, d, nullptr, &err);
        if (ob->checkStream(q) != Result::kSuccess) code |= 128;
        std::_Exit(code);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace mixccl

#endif  // MIXCCL_HAVE_OPENCL
