// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// enqueue_latency: how long ncclAllReduce itself takes to return when its stream is an OpenCL queue
// (the call only queues the operation; the engine's progress thread runs it). That is the cost an
// application pays on its issuing thread per collective, separate from the collective's duration.
//
// Ranks are threads of one process sharing the OpenCL backend (MIXCCL_DEVICE_BACKEND=opencl is set
// here, before the first NCCL call); each rank has its own queue and SVM buffers (ncclMemAlloc).
// Two modes per size:
//  - idle:  the queue is drained (clFinish, untimed) before every timed call, so each call meets an
//           idle engine;
//  - burst: the calls are issued back to back, so later calls meet a queue with earlier operations
//           still pending (what a training loop does); the queue is drained (untimed) after every
//           MIXCCL_QUEUE_DEPTH calls (the library's default, 64, when unset), since a call beyond
//           that waits for room (src/core/engine.h) and would time the collectives, not the call.
// Prints, per size and mode, the median, 10th/90th percentile and maximum over all ranks' calls,
// and the median CPU time the calling thread used inside the call: on a host with fewer cores
// than runnable threads (ranks, progress threads, a CPU device's workers) the difference is time
// the caller waited for a core, not work the call did.
//
// Usage: enqueue_latency [-t ranks (2)] [-n calls per size and mode (100)] [size ...] (default 8 64M)
#include <mixccl/opencl.h>
#include <nccl.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void die(int rank, const char* what, const char* detail) {
  std::fprintf(stderr, "enqueue_latency: rank %d: %s failed: %s\n", rank, what, detail);
  std::_Exit(1);
}

#define CHECK_NCCL(rank, call)                                            \
  do {                                                                    \
    ncclResult_t r_ = (call);                                             \
    if (r_ != ncclSuccess) die((rank), #call, ncclGetLastError(nullptr)); \
  } while (0)

#define CHECK_CL(rank, call)                                              \
  do {                                                                    \
    cl_int e_ = (call);                                                   \
    if (e_ != CL_SUCCESS) die((rank), #call, std::to_string(e_).c_str()); \
  } while (0)

bool parseSize(const char* text, size_t* out) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (end == text) return false;
  size_t shift = 0;
  if (*end == 'K' || *end == 'k') shift = 10;
  if (*end == 'M' || *end == 'm') shift = 20;
  if (*end == 'G' || *end == 'g') shift = 30;
  if (shift != 0) ++end;
  if (*end != '\0') return false;
  *out = static_cast<size_t>(v) << shift;
  return true;
}

struct Samples {
  std::mutex mu;
  std::vector<double> us;     // every rank's call durations, microseconds
  std::vector<double> cpuUs;  // the calling thread's CPU time inside each call
  void add(const std::vector<double>& v, const std::vector<double>& cpu) {
    std::lock_guard<std::mutex> lock(mu);
    us.insert(us.end(), v.begin(), v.end());
    cpuUs.insert(cpuUs.end(), cpu.begin(), cpu.end());
  }
};

double threadCpuUs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5));
  return v[i];
}

}  // namespace

int main(int argc, char** argv) {
  int nranks = 2;
  int calls = 100;
  std::vector<size_t> sizes;
  for (int i = 1; i < argc; ++i) {
    if ((!std::strcmp(argv[i], "-t") || !std::strcmp(argv[i], "-n")) && i + 1 < argc) {
      const int v = std::atoi(argv[i + 1]);
      if (v < 1) {
        std::fprintf(stderr, "%s %s: expected a positive number\n", argv[i], argv[i + 1]);
        return 2;
      }
      (argv[i][1] == 't' ? nranks : calls) = v;
      ++i;
    } else {
      size_t s = 0;
      if (!parseSize(argv[i], &s) || s < 4) {
        std::fprintf(stderr, "usage: enqueue_latency [-t ranks] [-n calls] [size[K|M|G] ...] (sizes >= 4 bytes)\n");
        return 2;
      }
      sizes.push_back(s);
    }
  }
  if (sizes.empty()) sizes = {8, 64u << 20};

  // Before any NCCL call: the library chooses its device backend once per process.
  setenv("MIXCCL_DEVICE_BACKEND", "opencl", 1);
  cl_context ctx = nullptr;
  cl_device_id dev = nullptr;
  CHECK_NCCL(-1, mixcclOpenclGetContext(&ctx, &dev));
  char devName[256] = {};
  clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof devName - 1, devName, nullptr);
  const char* depthEnv = std::getenv("MIXCCL_QUEUE_DEPTH");
  const int depth = std::max(1, depthEnv != nullptr && *depthEnv != '\0' ? std::atoi(depthEnv) : 64);
  std::printf(
      "# enqueue_latency: %d ranks (threads) on OpenCL device '%s', %d calls per size and mode; a burst is "
      "drained every %d calls (MIXCCL_QUEUE_DEPTH)\n",
      nranks, devName, calls, depth);
  std::printf("# %12s  %5s  %10s  %10s  %10s  %10s  %10s  %10s\n", "size (B)", "mode", "median(us)", "p10(us)",
              "p90(us)", "max(us)", "cpu(us)", "total(ms)");

  for (size_t bytes : sizes) {
    for (bool burst : {false, true}) {
      // A fresh communicator per size and mode: a unique id serves one ncclCommInitRank round.
      ncclUniqueId id;
      CHECK_NCCL(-1, ncclGetUniqueId(&id));
      Samples samples;
      std::vector<double> totalMs(nranks);
      std::vector<std::thread> threads;
      for (int rank = 0; rank < nranks; ++rank) {
        threads.emplace_back([&, rank] {
          ncclComm_t comm = nullptr;
          CHECK_NCCL(rank, ncclCommInitRank(&comm, nranks, id, rank));
          cl_int err = CL_SUCCESS;
          cl_command_queue q = clCreateCommandQueueWithProperties(ctx, dev, nullptr, &err);
          if (q == nullptr || err != CL_SUCCESS) die(rank, "clCreateCommandQueueWithProperties", "no queue");
          const auto stream = reinterpret_cast<cudaStream_t>(q);
          void* buf = nullptr;
          CHECK_NCCL(rank, ncclMemAlloc(&buf, bytes));
          CHECK_CL(rank, clEnqueueSVMMemFill(q, buf, "\0\0\0\0", 4, bytes / 4 * 4, 0, nullptr, nullptr));
          const size_t count = bytes / sizeof(float);
          // Warm-up: connections, the work queue next to this stream, kernel builds.
          for (int i = 0; i < 3; ++i) {
            CHECK_NCCL(rank, ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, stream));
          }
          CHECK_CL(rank, clFinish(q));
          std::vector<double> us, cpu;
          us.reserve(calls);
          cpu.reserve(calls);
          const auto start = Clock::now();
          for (int i = 0; i < calls; ++i) {
            if (!burst || (i > 0 && i % depth == 0)) CHECK_CL(rank, clFinish(q));
            const double c0 = threadCpuUs();
            const auto t0 = Clock::now();
            CHECK_NCCL(rank, ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, stream));
            us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
            cpu.push_back(threadCpuUs() - c0);
          }
          CHECK_CL(rank, clFinish(q));
          totalMs[rank] = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
          samples.add(us, cpu);
          CHECK_NCCL(rank, ncclCommDestroy(comm));
          CHECK_NCCL(rank, ncclMemFree(buf));
          clReleaseCommandQueue(q);
        });
      }
      for (std::thread& t : threads) t.join();
      std::printf("  %12zu  %5s  %10.2f  %10.2f  %10.2f  %10.2f  %10.2f  %10.1f\n", bytes, burst ? "burst" : "idle",
                  percentile(samples.us, 0.5), percentile(samples.us, 0.1), percentile(samples.us, 0.9),
                  percentile(samples.us, 1.0), percentile(samples.cpuUs, 0.5),
                  *std::max_element(totalMs.begin(), totalMs.end()));
      std::fflush(stdout);
    }
  }
  return 0;
}
