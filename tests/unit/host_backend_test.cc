// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// The host DeviceBackend: allocation, copies (aliasing and overlap), reduce() through the
// interface (the transforms' apply flags), argument checks and the no-op stream calls.

#include <gtest/gtest.h>
#include <nccl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "src/device/device_backend.h"
#include "src/device/host/reduce_kernels.h"

namespace mixccl {
namespace {

class HostBackendTest : public ::testing::Test {
 protected:
  std::unique_ptr<DeviceBackend> dev_ = makeHostBackend();
};

TEST_F(HostBackendTest, NameAndMemKind) {
  EXPECT_STREQ(dev_->name(), "host");
  int local = 0;
  EXPECT_EQ(dev_->memKind(&local), MemKind::kHost);
  EXPECT_EQ(dev_->memKind(nullptr), MemKind::kHost);
}

// Memory the CPU cannot read (a GPU's device pointer looks like this to a process without its
// runtime) is kUnknown, also after the readable pages were seen, and a collective refuses it.
TEST_F(HostBackendTest, UnreadableMemoryIsUnknownAndRefused) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* none = mmap(nullptr, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(none, MAP_FAILED);
  std::vector<float> ok(64, 1.0f);
  EXPECT_EQ(dev_->memKind(ok.data()), MemKind::kHost);
  EXPECT_EQ(dev_->memKind(none), MemKind::kUnknown);
  EXPECT_EQ(dev_->memKind(static_cast<char*>(none) + 100), MemKind::kUnknown);
  EXPECT_EQ(dev_->memKind(ok.data()), MemKind::kHost);

  ncclComm_t comm = nullptr;
  int dev = 0;
  ASSERT_EQ(ncclCommInitAll(&comm, 1, &dev), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(none, ok.data(), 16, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidArgument);
  const std::string msg = ncclGetLastError(comm);
  EXPECT_NE(msg.find("sendbuff"), std::string::npos) << msg;
  EXPECT_NE(msg.find("neither host memory"), std::string::npos) << msg;
  EXPECT_EQ(ncclAllReduce(ok.data(), none, 16, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(ok.data(), ok.data(), 16, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
  EXPECT_EQ(ok[0], 1.0f);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  munmap(none, page);
}

// A buffer whose first bytes are readable but whose count runs on into unreadable memory (a count
// larger than the allocation) is refused with a message naming the buffer, instead of faulting
// inside the collective; so is a recvbuff of that kind.
TEST_F(HostBackendTest, ABufferRunningIntoUnreadableMemoryIsRefused) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto* two = static_cast<char*>(mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(two, MAP_FAILED);
  ASSERT_EQ(mprotect(two + page, page, PROT_NONE), 0);      // stays reserved: no later mapping lands there
  float* edge = reinterpret_cast<float*>(two + page - 32);  // 8 floats before the hole
  std::vector<float> ok(64, 1.0f);
  ncclComm_t comm = nullptr;
  int dev = 0;
  ASSERT_EQ(ncclCommInitAll(&comm, 1, &dev), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(edge, ok.data(), 16, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidArgument);
  std::string msg = ncclGetLastError(comm);
  EXPECT_NE(msg.find("sendbuff"), std::string::npos) << msg;
  EXPECT_NE(msg.find("larger than the buffer"), std::string::npos) << msg;
  EXPECT_EQ(ncclAllReduce(ok.data(), edge, 16, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidArgument);
  msg = ncclGetLastError(comm);
  EXPECT_NE(msg.find("recvbuff"), std::string::npos) << msg;
  // All-gather's output spans count * nranks elements: 8 fit, 16 would not (one rank here).
  EXPECT_EQ(ncclAllGather(ok.data(), edge, 8, ncclFloat32, comm, nullptr), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(edge, edge, 8, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  munmap(two, 2 * page);
}

TEST_F(HostBackendTest, AllocationsAreAlignedAndUsable) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{63}, size_t{4095}, page, size_t{1} << 22}) {
    void* p = nullptr;
    ASSERT_EQ(dev_->alloc(bytes, &p), Result::kSuccess);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    if (bytes >= page) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % page, 0u) << bytes;
    }
    std::memset(p, 0x5a, bytes);
    EXPECT_EQ(dev_->free(p), Result::kSuccess);

    ASSERT_EQ(dev_->allocStaging(bytes, &p), Result::kSuccess);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    std::memset(p, 0xa5, bytes);
    EXPECT_EQ(dev_->freeStaging(p), Result::kSuccess);
  }
  EXPECT_EQ(dev_->free(nullptr), Result::kSuccess);
  EXPECT_EQ(dev_->freeStaging(nullptr), Result::kSuccess);
  EXPECT_EQ(dev_->alloc(16, nullptr), Result::kInvalidArgument);
}

TEST_F(HostBackendTest, HugeAllocationFailsWithSystemError) {
  void* p = reinterpret_cast<void*>(1);
  EXPECT_EQ(dev_->alloc(SIZE_MAX / 2, &p), Result::kSystemError);
  EXPECT_EQ(p, nullptr);
  EXPECT_NE(lastError().find("bytes"), std::string::npos) << lastError();
}

TEST_F(HostBackendTest, CopyHandlesSameAndOverlappingRanges) {
  std::vector<uint8_t> buf(256);
  std::iota(buf.begin(), buf.end(), 0);
  std::vector<uint8_t> dst(256, 0);
  ASSERT_EQ(dev_->copy(dst.data(), buf.data(), 256, nullptr), Result::kSuccess);
  EXPECT_EQ(dst, buf);
  ASSERT_EQ(dev_->copy(buf.data(), buf.data(), 256, nullptr), Result::kSuccess);  // dst == src: no-op
  EXPECT_EQ(dst, buf);
  // Overlap forward and backward behaves like memmove.
  std::vector<uint8_t> want = buf;
  std::memmove(want.data() + 10, want.data(), 100);
  ASSERT_EQ(dev_->copy(buf.data() + 10, buf.data(), 100, nullptr), Result::kSuccess);
  EXPECT_EQ(buf, want);
  std::memmove(want.data(), want.data() + 5, 200);
  ASSERT_EQ(dev_->copy(buf.data(), buf.data() + 5, 200, nullptr), Result::kSuccess);
  EXPECT_EQ(buf, want);
  EXPECT_EQ(dev_->copy(nullptr, nullptr, 0, nullptr), Result::kSuccess);
  EXPECT_EQ(dev_->copy(nullptr, buf.data(), 8, nullptr), Result::kInvalidArgument);
}

TEST_F(HostBackendTest, ReduceAppliesTransformsOnlyWhenAsked) {
  // Float Avg over 4 ranks as the core lowers it: pre-multiply by 1/4.
  ReduceSpec spec;
  spec.dtype = DataType::kFloat32;
  spec.op = RedOpKind::kSum;
  spec.preMul = true;
  encodeScalar(DataType::kFloat32, 0.25, spec.scalar);
  const float a[] = {1.0f, 2.0f, 3.0f};
  const float b[] = {4.0f, 8.0f, -12.0f};
  float out[3];
  ASSERT_EQ(dev_->reduce(out, a, b, 3, spec, true, false, nullptr), Result::kSuccess);
  EXPECT_EQ(out[0], 2.0f);
  EXPECT_EQ(out[1], 4.0f);
  EXPECT_EQ(out[2], 0.0f);
  ASSERT_EQ(dev_->reduce(out, a, b, 3, spec, false, false, nullptr), Result::kSuccess);
  EXPECT_EQ(out[0], 5.0f);

  // Integer Avg: sum, then divide once on the finishing step, in place.
  ReduceSpec ispec;
  ispec.dtype = DataType::kInt32;
  ispec.divisor = 3;
  int32_t acc[] = {10, -10, 7};
  const int32_t mine[] = {2, 1, -1};
  ASSERT_EQ(dev_->reduce(acc, acc, mine, 3, ispec, true, false, nullptr), Result::kSuccess);
  EXPECT_EQ(acc[0], 12);
  ASSERT_EQ(dev_->reduce(acc, acc, mine, 3, ispec, true, true, nullptr), Result::kSuccess);
  EXPECT_EQ(acc[0], 4);   // (12 + 2) / 3
  EXPECT_EQ(acc[1], -2);  // (-9 + 1) / 3 truncates toward zero
  EXPECT_EQ(acc[2], 1);   // (6 - 1) / 3
}

TEST_F(HostBackendTest, ReduceRejectsBadArguments) {
  float x = 1.0f;
  ReduceSpec spec;
  spec.dtype = static_cast<DataType>(-1);
  EXPECT_EQ(dev_->reduce(&x, &x, &x, 1, spec, false, false, nullptr), Result::kInvalidArgument);
  spec.dtype = DataType::kFloat32;
  spec.op = RedOpKind::kPreMulSum;
  EXPECT_EQ(dev_->reduce(&x, &x, &x, 1, spec, false, false, nullptr), Result::kInvalidArgument);
  spec.op = RedOpKind::kMax;
  EXPECT_EQ(dev_->reduce(&x, &x, nullptr, 1, spec, false, false, nullptr), Result::kInvalidArgument);
  EXPECT_EQ(dev_->reduce(&x, &x, &x, 1, spec, false, false, nullptr), Result::kSuccess);
}

// The host backend is synchronous: any stream is accepted, queues and fences are null and
// signalled, gates hold nothing.
TEST_F(HostBackendTest, StreamCallsAreSynchronous) {
  int fake = 0;
  EXPECT_EQ(dev_->checkStream(nullptr), Result::kSuccess);
  EXPECT_EQ(dev_->checkStream(&fake), Result::kSuccess);
  WorkQueue* q = reinterpret_cast<WorkQueue*>(&fake);
  ASSERT_EQ(dev_->openQueue(&fake, &q), Result::kSuccess);
  EXPECT_EQ(q, nullptr);
  Fence* f = reinterpret_cast<Fence*>(&fake);
  ASSERT_EQ(dev_->markStart(&fake, &f), Result::kSuccess);
  EXPECT_EQ(dev_->query(f), Result::kSuccess);
  dev_->releaseFence(f);
  ASSERT_EQ(dev_->record(q, &f), Result::kSuccess);
  EXPECT_EQ(dev_->query(f), Result::kSuccess);
  StreamGate* g = nullptr;
  ASSERT_EQ(dev_->holdStream(&fake, &g), Result::kSuccess);
  EXPECT_EQ(dev_->releaseStream(g), Result::kSuccess);
  EXPECT_EQ(dev_->closeQueue(q), Result::kSuccess);
  EXPECT_EQ(dev_->openQueue(&fake, nullptr), Result::kInvalidArgument);
}

TEST_F(HostBackendTest, AnnouncesEveryTypeAndOperator) {
  const BackendCaps c = dev_->caps();
  for (int t = 0; t < kNumDataTypes; ++t) EXPECT_TRUE(c.dtypes & (1u << t)) << t;
  for (int o = 0; o <= static_cast<int>(RedOpKind::kPreMulSum); ++o) EXPECT_TRUE(c.ops & (1u << o)) << o;
  EXPECT_EQ(c.flags & kCapAsync, 0u);
  EXPECT_EQ(dev_->wireId(), 0u);
}

TEST(HostKernels, ReportsVariant) {
  EXPECT_TRUE(host::kernelIsaAvailable(host::KernelIsa::kPortable));
  EXPECT_TRUE(host::kernelIsaAvailable(host::bestKernelIsa()));
  if (!host::kernelIsaAvailable(host::KernelIsa::kAvx2)) {
    float x = 0;
    ReduceSpec spec;
    EXPECT_EQ(host::reduceWithIsa(host::KernelIsa::kAvx2, &x, &x, &x, 1, spec, false, false), Result::kInvalidUsage);
  }
  RecordProperty("kernel_isa", host::kernelIsaName(host::bestKernelIsa()));
}

}  // namespace
}  // namespace mixccl
