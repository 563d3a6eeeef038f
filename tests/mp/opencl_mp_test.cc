// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// OpenCL ranks as real processes, through the public API only (device acceptance checks 3 and 6):
//  - 2-4 forked ranks per pattern (O,O / H,O,H,O / O,H,H), each child choosing its backend with
//    MIXCCL_DEVICE_BACKEND before its first mixccl call; OpenCL ranks allocate with ncclMemAlloc
//    and pass a queue on mixcclOpenclGetContext's context; host ranks malloc and pass NULL; a few
//    collectives x datatypes checked against exact references (tests/support/values.h);
//  - bad input, each a fresh process: a host pointer, another context's SVM, a stream that is not
//    a command queue, an unknown MIXCCL_DEVICE_BACKEND, no OpenCL platform at all; each must give
//    the right ncclResult_t and a message from ncclGetLastError.
// The parent never touches OpenCL or mixccl before forking (POCL's threads do not survive fork):
// even the "is there a platform" probe runs in a child.

#include <gtest/gtest.h>

#if !defined(MIXCCL_HAVE_OPENCL)

TEST(OpenclMp, NotBuilt) { GTEST_SKIP() << "mixccl was built without OpenCL headers; the backend is absent"; }

#else

#include <nccl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/config.h"
#include "mixccl/opencl.h"
#include "tests/support/fork_ranks.h"
#include "tests/support/values.h"

namespace mixccl::testing {
namespace {

// A forked child inherits the parent's cached knobs: forkRanks() calls ncclGetUniqueId in this
// (parent) process, which reads and caches the whole configuration, MIXCCL_DEVICE_BACKEND
// included. Without this, every job after the first would keep the parent's "host" choice and
// its OpenCL ranks would run synchronously on the host backend, ignoring their queue.
void childReadsEnvironment() { config::resetForTesting(); }

// Runs body() in a forked child and returns its exit status (0 = passed); the child is killed
// after `limitS` seconds (status 124).
int inChild(const std::function<int()>& body, int limitS = 120) {
  fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return 125;
  if (pid == 0) {
    const int status = body();
    fflush(nullptr);
    _exit(status);
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(limitS);
  for (;;) {
    int status = 0;
    const pid_t got = waitpid(pid, &status, WNOHANG);
    if (got == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (got < 0) return 126;
    if (std::chrono::steady_clock::now() > until) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return 124;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// Whether this machine has an OpenCL platform, probed in a child (see the file comment).
bool havePlatform() {
  static const int status = inChild([] {
    cl_uint n = 0;
    return clGetPlatformIDs(0, nullptr, &n) == CL_SUCCESS && n > 0 ? 0 : 1;
  });
  return status == 0;
}

#define SKIP_WITHOUT_PLATFORM() \
  if (!havePlatform()) GTEST_SKIP() << "no OpenCL platform found (clGetPlatformIDs); install pocl-opencl-icd"

// One rank's memory and stream: SVM from ncclMemAlloc and an OpenCL queue, or malloc and NULL.
class RankMemory {
 public:
  explicit RankMemory(bool device) : device_(device) {}
  ~RankMemory() {
    for (void* p : owned_) device_ ? (void)ncclMemFree(p) : std::free(p);
    if (queue_ != nullptr) clReleaseCommandQueue(queue_);
  }
  // Makes the queue (device ranks). False with a message on failure.
  bool open(std::string* why) {
    if (!device_) return true;
    cl_context ctx = nullptr;
    cl_device_id dev = nullptr;
    if (mixcclOpenclGetContext(&ctx, &dev) != ncclSuccess) {
      *why = std::string("mixcclOpenclGetContext: ") + ncclGetLastError(nullptr);
      return false;
    }
    cl_int err = CL_SUCCESS;
    queue_ = clCreateCommandQueueWithProperties(ctx, dev, nullptr, &err);
    if (err != CL_SUCCESS) *why = "clCreateCommandQueueWithProperties: " + std::to_string(err);
    return err == CL_SUCCESS;
  }
  void* alloc(size_t bytes) {
    void* p = nullptr;
    if (device_) {
      if (ncclMemAlloc(&p, bytes) != ncclSuccess) return nullptr;
    } else {
      p = std::malloc(bytes);
    }
    if (p != nullptr) owned_.push_back(p);
    return p;
  }
  // Host -> buffer, ordered on the rank's stream (asynchronous on a device rank).
  bool put(void* dst, const void* src, size_t bytes) {
    if (!device_) return std::memcpy(dst, src, bytes) != nullptr;
    return clEnqueueSVMMemcpy(queue_, CL_FALSE, dst, src, bytes, 0, nullptr, nullptr) == CL_SUCCESS;
  }
  // Buffer -> host after everything on the stream so far; complete on return.
  bool get(void* dst, const void* src, size_t bytes) {
    if (!device_) return std::memcpy(dst, src, bytes) != nullptr;
    return clEnqueueSVMMemcpy(queue_, CL_TRUE, dst, src, bytes, 0, nullptr, nullptr) == CL_SUCCESS &&
           clFinish(queue_) == CL_SUCCESS;
  }
  cudaStream_t stream() const { return reinterpret_cast<cudaStream_t>(queue_); }

 private:
  bool device_;
  cl_command_queue queue_ = nullptr;
  std::vector<void*> owned_;
};

constexpr size_t kCount = 1001;

// Compares `count` elements of type t at got with expectedValue(t, op, n, base + i) (exact cases).
bool checkReduced(int rank, const char* what, int t, int op, int n, const uint8_t* got, uint64_t base) {
  const size_t es = typeSize(t);
  int bad = 0;
  for (uint64_t i = 0; i < kCount; ++i) {
    uint8_t want[8] = {};
    encode(t, expectedValue(t, op, n, base + i), want);
    if (std::memcmp(want, got + i * es, es) != 0 && ++bad <= 5) {
      fprintf(stderr, "rank %d: %s %s %s: element %llu = %g, want %g\n", rank, what, typeName(t), opName(op),
              static_cast<unsigned long long>(i), decode(t, got + i * es), expectedValue(t, op, n, base + i));
    }
  }
  if (bad > 5) fprintf(stderr, "rank %d: %s: %d elements differ\n", rank, what, bad);
  return bad == 0;
}

// One rank process of a pattern ('H' host, 'O' OpenCL).
int patternRank(const std::string& pattern, int rank, const ncclUniqueId& id) {
  const int n = static_cast<int>(pattern.size());
  const bool dev = pattern[rank] == 'O';
  setenv("MIXCCL_DEVICE_BACKEND", dev ? "opencl" : "host", 1);  // before the first mixccl call
  setenv("MIXCCL_TIMEOUT", "60", 1);
  setenv("MIXCCL_CHUNK_SIZE", "4096", 1);
  childReadsEnvironment();
  ncclComm_t comm = nullptr;
  RANK_CHECK(ncclCommInitRank(&comm, n, id, rank) == ncclSuccess, "init (%s)", dev ? "opencl" : "host");
  {
    RankMemory mem(dev);
    std::string why;
    RANK_CHECK(mem.open(&why), "%s", why.c_str());
    const cudaStream_t s = mem.stream();
    for (int t : {2, 7, 9, 10}) {  // int32, float32, bfloat16, e4m3
      const size_t es = typeSize(t), bytes = kCount * es;
      const auto dt = static_cast<ncclDataType_t>(t);
      auto* send = static_cast<uint8_t*>(mem.alloc(bytes * n));
      auto* recv = static_cast<uint8_t*>(mem.alloc(bytes * n));
      RANK_CHECK(send != nullptr && recv != nullptr, "alloc");
      std::vector<uint8_t> in(bytes * n), out(bytes * n);
      // All-reduce (sum) and reduce (max, to the last rank), out of place; then prod in place.
      for (uint64_t i = 0; i < kCount; ++i) encode(t, inputValue(t, kSum, rank, i), &in[i * es]);
      RANK_CHECK(mem.put(send, in.data(), bytes), "put");
      RANK_CHECK(ncclAllReduce(send, recv, kCount, dt, ncclSum, comm, s) == ncclSuccess, "allreduce");
      RANK_CHECK(mem.get(out.data(), recv, bytes), "get");
      if (!checkReduced(rank, "allreduce", t, kSum, n, out.data(), 0)) return 1;
      for (uint64_t i = 0; i < kCount; ++i) encode(t, inputValue(t, kMax, rank, i), &in[i * es]);
      RANK_CHECK(mem.put(send, in.data(), bytes), "put");
      RANK_CHECK(ncclReduce(send, recv, kCount, dt, ncclMax, n - 1, comm, s) == ncclSuccess, "reduce");
      RANK_CHECK(mem.get(out.data(), recv, bytes), "get");
      if (rank == n - 1 && !checkReduced(rank, "reduce", t, kMax, n, out.data(), 0)) return 1;
      for (uint64_t i = 0; i < kCount; ++i) encode(t, inputValue(t, kProd, rank, i), &in[i * es]);
      RANK_CHECK(mem.put(recv, in.data(), bytes), "put");
      RANK_CHECK(ncclAllReduce(recv, recv, kCount, dt, ncclProd, comm, s) == ncclSuccess, "allreduce in place");
      RANK_CHECK(mem.get(out.data(), recv, bytes), "get");
      if (!checkReduced(rank, "allreduce in place", t, kProd, n, out.data(), 0)) return 1;
      // Reduce-scatter (sum): block q of every rank's input feeds rank q (logical elements i + 7q).
      for (uint64_t i = 0; i < kCount * n; ++i) {
        encode(t, inputValue(t, kSum, rank, i % kCount + (i / kCount) * 7), &in[i * es]);
      }
      RANK_CHECK(mem.put(send, in.data(), bytes * n), "put");
      RANK_CHECK(ncclReduceScatter(send, recv, kCount, dt, ncclSum, comm, s) == ncclSuccess, "reducescatter");
      RANK_CHECK(mem.get(out.data(), recv, bytes), "get");
      if (!checkReduced(rank, "reducescatter", t, kSum, n, out.data(), 7 * rank)) return 1;
      // Data movement: all-gather, broadcast from rank 1, all-to-all, a send/recv ring.
      std::vector<uint8_t> want(bytes * n);
      for (size_t b = 0; b < bytes * n; ++b) in[b] = patternByte(rank, b);
      RANK_CHECK(mem.put(send, in.data(), bytes * n), "put");
      RANK_CHECK(ncclAllGather(send, recv, kCount, dt, comm, s) == ncclSuccess, "allgather");
      RANK_CHECK(mem.get(out.data(), recv, bytes * n), "get");
      for (int q = 0; q < n; ++q) {
        for (size_t b = 0; b < bytes; ++b) want[q * bytes + b] = patternByte(q, b);
      }
      RANK_CHECK(out == want, "allgather %s: wrong bytes", typeName(t));
      RANK_CHECK(ncclBroadcast(send, recv, kCount, dt, 1 % n, comm, s) == ncclSuccess, "broadcast");
      RANK_CHECK(mem.get(out.data(), recv, bytes), "get");
      for (size_t b = 0; b < bytes; ++b) {
        RANK_CHECK(out[b] == patternByte(1 % n, b), "broadcast %s: byte %zu", typeName(t), b);
      }
      RANK_CHECK(ncclAlltoAll(send, recv, kCount, dt, comm, s) == ncclSuccess, "alltoall");
      RANK_CHECK(mem.get(out.data(), recv, bytes * n), "get");
      for (int q = 0; q < n; ++q) {
        for (size_t b = 0; b < bytes; ++b) {
          RANK_CHECK(out[q * bytes + b] == patternByte(q, rank * bytes + b), "alltoall %s: block %d byte %zu",
                     typeName(t), q, b);
        }
      }
      RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
      RANK_CHECK(ncclSend(send, kCount, dt, (rank + 1) % n, comm, s) == ncclSuccess, "send");
      RANK_CHECK(ncclRecv(recv, kCount, dt, (rank + n - 1) % n, comm, s) == ncclSuccess, "recv");
      RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end");
      RANK_CHECK(mem.get(out.data(), recv, bytes), "get");
      for (size_t b = 0; b < bytes; ++b) {
        RANK_CHECK(out[b] == patternByte((rank + n - 1) % n, b), "sendrecv %s: byte %zu", typeName(t), b);
      }
    }
    ncclResult_t e = ncclInternalError;
    RANK_CHECK(ncclCommGetAsyncError(comm, &e) == ncclSuccess && e == ncclSuccess, "async error %d", e);
  }
  RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
  return 0;
}

ncclComm_t oneRankComm(const char* backend);

class OpenclMpTest : public ::testing::TestWithParam<const char*> {};

TEST_P(OpenclMpTest, CollectivesMatchTheHostReference) {
  SKIP_WITHOUT_PLATFORM();
  const std::string pattern = GetParam();
  const int n = static_cast<int>(pattern.size());
  const auto statuses = forkRanks(n, [&](int rank, const ncclUniqueId& id) { return patternRank(pattern, rank, id); });
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(exitedCleanly(statuses[r]))
        << "rank " << r << " (" << pattern[r] << ") of " << pattern << ": waitpid status " << statuses[r];
  }
}

INSTANTIATE_TEST_SUITE_P(Patterns, OpenclMpTest, ::testing::Values("OO", "HOHO", "OHH"),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

// Stream order with the process's backend chosen by MIXCCL_DEVICE_BACKEND (not a test override):
// a copy held by a user event writes the input; the all-reduce returns while it is held; a copy
// enqueued after it has not run; once the event is set the result is the new input.
TEST(OpenclMpStreamOrder, CallReturnsBeforeItsInputIsWritten) {
  SKIP_WITHOUT_PLATFORM();
  EXPECT_EQ(inChild([] {
              alarm(60);  // a call that blocks on the held queue would never return
              ncclComm_t comm = oneRankComm("opencl");
              if (comm == nullptr) return 10;
              RankMemory mem(true);
              std::string why;
              if (!mem.open(&why)) return 11;
              constexpr size_t n = 4099;
              auto* in = static_cast<int32_t*>(mem.alloc(n * 4));
              auto* out = static_cast<int32_t*>(mem.alloc(n * 4));
              if (in == nullptr || out == nullptr) return 12;
              std::vector<int32_t> src(n), result(n, -1);
              for (size_t i = 0; i < n; ++i) src[i] = static_cast<int32_t>(7 * i + 1);
              cl_context ctx = nullptr;
              if (mixcclOpenclGetContext(&ctx, nullptr) != ncclSuccess) return 13;
              cl_int err = CL_SUCCESS;
              cl_event producer = clCreateUserEvent(ctx, &err);
              auto q = reinterpret_cast<cl_command_queue>(mem.stream());
              if (clEnqueueSVMMemcpy(q, CL_FALSE, in, src.data(), n * 4, 1, &producer, nullptr) != CL_SUCCESS) {
                return 14;
              }
              if (ncclAllReduce(in, out, n, ncclInt32, ncclSum, comm, mem.stream()) != ncclSuccess) {
                fprintf(stderr, "allreduce: %s\n", ncclGetLastError(comm));
                return 15;
              }
              cl_event later = nullptr;
              clEnqueueSVMMemcpy(q, CL_FALSE, result.data(), out, n * 4, 0, nullptr, &later);
              clFlush(q);
              usleep(50000);
              cl_int status = CL_COMPLETE;
              clGetEventInfo(later, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status, nullptr);
              if (status == CL_COMPLETE) {
                fprintf(stderr, "the copy after the call ran while its input was held\n");
                return 16;
              }
              clSetUserEventStatus(producer, CL_COMPLETE);
              if (clWaitForEvents(1, &later) != CL_SUCCESS) return 17;
              for (size_t i = 0; i < n; ++i) {
                if (result[i] != src[i]) {
                  fprintf(stderr, "element %zu = %d, want %d\n", i, result[i], src[i]);
                  return 18;
                }
              }
              clReleaseEvent(later);
              clReleaseEvent(producer);
              return ncclCommDestroy(comm) == ncclSuccess ? 0 : 19;
            }),
            0);
}

// ---- bad input, one fresh process each ---------------------------------------------------------

// In a child: a one-rank communicator on `backend` (MIXCCL_DEVICE_BACKEND). Null on failure.
ncclComm_t oneRankComm(const char* backend) {
  setenv("MIXCCL_DEVICE_BACKEND", backend, 1);
  childReadsEnvironment();
  ncclUniqueId id;
  ncclComm_t comm = nullptr;
  if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) {
    fprintf(stderr, "one-rank init on %s: %s\n", backend, ncclGetLastError(nullptr));
    return nullptr;
  }
  return comm;
}

// Checks that `got` is `want` and that ncclGetLastError has a message containing `needle`.
// Returns 0 or a failure status (printing why).
int expectError(const char* what, ncclResult_t got, ncclResult_t want, ncclComm_t comm, const char* needle) {
  const char* msg = ncclGetLastError(comm);
  if (got != want) {
    fprintf(stderr, "%s: returned %s (%d), want %s (%d); message: %s\n", what, ncclGetErrorString(got), got,
            ncclGetErrorString(want), want, msg);
    return 1;
  }
  if (msg == nullptr || msg[0] == '\0' || (needle != nullptr && std::strstr(msg, needle) == nullptr)) {
    fprintf(stderr, "%s: right code but the message does not say why (want \"%s\" in it): \"%s\"\n", what,
            needle != nullptr ? needle : "", msg != nullptr ? msg : "(null)");
    return 2;
  }
  fprintf(stderr, "%s: %s: %s\n", what, ncclGetErrorString(got), msg);
  return 0;
}

// A host (malloc) pointer given with the OpenCL backend and a stream: the engine cannot run device
// work on it, so the call is refused up front.
TEST(OpenclBadInput, HostPointerWithAStream) {
  SKIP_WITHOUT_PLATFORM();
  EXPECT_EQ(inChild([] {
              ncclComm_t comm = oneRankComm("opencl");
              if (comm == nullptr) return 10;
              cl_context ctx = nullptr;
              cl_device_id dev = nullptr;
              if (mixcclOpenclGetContext(&ctx, &dev) != ncclSuccess) return 11;
              cl_int err = CL_SUCCESS;
              cl_command_queue q = clCreateCommandQueueWithProperties(ctx, dev, nullptr, &err);
              if (err != CL_SUCCESS) return 12;
              std::vector<float> host(1000, 1.0f);
              void* svm = nullptr;
              if (ncclMemAlloc(&svm, 4000) != ncclSuccess) return 13;
              const auto s = reinterpret_cast<cudaStream_t>(q);
              int rc =
                  expectError("host sendbuff", ncclAllReduce(host.data(), svm, 1000, ncclFloat32, ncclSum, comm, s),
                              ncclInvalidArgument, comm, "sendbuff");
              if (rc == 0) {
                rc = expectError("host recvbuff", ncclAllReduce(svm, host.data(), 1000, ncclFloat32, ncclSum, comm, s),
                                 ncclInvalidArgument, comm, "recvbuff");
              }
              clFinish(q);
              ncclMemFree(svm);
              clReleaseCommandQueue(q);
              ncclCommDestroy(comm);
              return rc;
            }),
            0)
      << "a malloc'd buffer with an OpenCL queue must be refused with ncclInvalidArgument (see stderr)";
}

// SVM of another OpenCL context (same device) with the library's queue.
TEST(OpenclBadInput, AnotherContextsSvm) {
  SKIP_WITHOUT_PLATFORM();
  EXPECT_EQ(inChild([] {
              ncclComm_t comm = oneRankComm("opencl");
              if (comm == nullptr) return 10;
              cl_context ctx = nullptr;
              cl_device_id dev = nullptr;
              if (mixcclOpenclGetContext(&ctx, &dev) != ncclSuccess) return 11;
              cl_int err = CL_SUCCESS;
              cl_command_queue q = clCreateCommandQueueWithProperties(ctx, dev, nullptr, &err);
              cl_context other = clCreateContext(nullptr, 1, &dev, nullptr, nullptr, &err);
              if (err != CL_SUCCESS || q == nullptr) return 12;
              void* foreign = clSVMAlloc(other, CL_MEM_READ_WRITE, 4000, 0);
              void* svm = nullptr;
              if (foreign == nullptr || ncclMemAlloc(&svm, 4000) != ncclSuccess) return 13;
              const int rc = expectError(
                  "another context's SVM",
                  ncclAllReduce(foreign, svm, 1000, ncclFloat32, ncclSum, comm, reinterpret_cast<cudaStream_t>(q)),
                  ncclInvalidArgument, comm, "sendbuff");
              clFinish(q);
              ncclMemFree(svm);
              clSVMFree(other, foreign);
              clReleaseContext(other);
              clReleaseCommandQueue(q);
              ncclCommDestroy(comm);
              return rc;
            }),
            0)
      << "another context's SVM must be refused with ncclInvalidArgument (see stderr)";
}

// A stream that is not a command queue: a pointer to an int.
TEST(OpenclBadInput, StreamThatIsNotAQueue) {
  SKIP_WITHOUT_PLATFORM();
  EXPECT_EQ(inChild([] {
              ncclComm_t comm = oneRankComm("opencl");
              if (comm == nullptr) return 10;
              void *a = nullptr, *b = nullptr;
              if (ncclMemAlloc(&a, 4000) != ncclSuccess || ncclMemAlloc(&b, 4000) != ncclSuccess) return 13;
              int notAQueue = 42;
              const int rc = expectError(
                  "stream = &int",
                  ncclAllReduce(a, b, 1000, ncclFloat32, ncclSum, comm, reinterpret_cast<cudaStream_t>(&notAQueue)),
                  ncclInvalidArgument, comm, "cl_command_queue");
              ncclMemFree(a);
              ncclMemFree(b);
              // The communicator is still usable after a refused call.
              if (rc == 0 && ncclCommDestroy(comm) != ncclSuccess) return 20;
              return rc;
            }),
            0);
}

TEST(OpenclBadInput, UnknownDeviceBackend) {
  EXPECT_EQ(inChild([] {
              setenv("MIXCCL_DEVICE_BACKEND", "nosuchbackend", 1);
              childReadsEnvironment();
              ncclUniqueId id;
              ncclComm_t comm = nullptr;
              if (ncclGetUniqueId(&id) != ncclSuccess) return 10;
              int rc = expectError("init with MIXCCL_DEVICE_BACKEND=nosuchbackend", ncclCommInitRank(&comm, 1, id, 0),
                                   ncclInvalidArgument, nullptr, "nosuchbackend");
              void* p = nullptr;
              if (rc == 0) {
                rc = expectError("ncclMemAlloc with MIXCCL_DEVICE_BACKEND=nosuchbackend", ncclMemAlloc(&p, 64),
                                 ncclInvalidArgument, nullptr, "nosuchbackend");
              }
              return rc;
            }),
            0);
}

// OCL_ICD_VENDORS naming an empty directory: the ICD loader finds no platform, and the OpenCL
// backend refuses to start, saying so.
TEST(OpenclBadInput, NoOpenclPlatform) {
  char dir[] = "/tmp/mixccl-no-icd-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const int status = inChild([&dir] {
    setenv("OCL_ICD_VENDORS", dir, 1);
    cl_uint n = 0;
    const cl_int err = clGetPlatformIDs(0, nullptr, &n);
    if (err == CL_SUCCESS && n > 0) {
      fprintf(stderr, "OCL_ICD_VENDORS=%s still finds %u platform(s)\n", dir, n);
      return 30;
    }
    setenv("MIXCCL_DEVICE_BACKEND", "opencl", 1);
    childReadsEnvironment();
    ncclUniqueId id;
    ncclComm_t comm = nullptr;
    if (ncclGetUniqueId(&id) != ncclSuccess) return 10;
    // The code: ncclUnhandledCudaError (kUnhandledDeviceError) is NCCL's "no usable device" (like a missing CUDA
    // device).
    int rc = expectError("init without an OpenCL platform", ncclCommInitRank(&comm, 1, id, 0), ncclUnhandledCudaError,
                         nullptr, "platform");
    if (rc == 0) {
      cl_context ctx = nullptr;
      rc = expectError("mixcclOpenclGetContext without a platform", mixcclOpenclGetContext(&ctx, nullptr),
                       ncclUnhandledCudaError, nullptr, "platform");
    }
    return rc;
  });
  rmdir(dir);
  EXPECT_EQ(status, 0);
}

}  // namespace
}  // namespace mixccl::testing

#endif  // MIXCCL_HAVE_OPENCL
