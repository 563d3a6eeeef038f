// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors

// Throughput of the host reduction kernels against memcpy: by default on buffers far larger than
// the caches (the tuner's beta and gamma for data in memory), or on small ones (16K: the
// in-cache costs, docs/TUNING.md "Constants"). Built as build/perf/bench_reduce (not installed).
// Usage: bench_reduce [bytes per array: MiB, or with a K/M/G suffix; default 64] [repetitions, default 10]
// "traffic" counts every byte read or written once (reduce: a + b + dst; memcpy: src + dst), which
// is the number to compare with the machine's memory bandwidth.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "perf/common/size.h"
#include "src/device/device_backend.h"
#include "src/device/host/reduce_kernels.h"

namespace {

// Best seconds per call of `fn` over `reps` samples; a sample repeats `inner` calls, so that
// small arrays (a few microseconds a call) are timed over many calls.
double bestSeconds(int reps, int inner, const std::function<void()>& fn) {
  fn();  // fault the pages in and warm the branch predictors
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < inner; ++i) fn();
    auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count() / inner);
  }
  return best;
}

// A bare number is MiB (the tool's first usage); otherwise the perf tools' sizes ("16K", "2M").
// 0 when malformed.
size_t parseBytes(const std::string& text) {
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos) {
    const std::optional<size_t> mib = mixccl::perf::parseSize(text);
    return mib ? *mib << 20 : 0;
  }
  return mixccl::perf::parseSize(text).value_or(0);
}

void report(const char* what, size_t bytesPerArray, int arrays, double sec) {
  const double traffic = static_cast<double>(bytesPerArray) * arrays / sec / 1e9;
  const double perOut = static_cast<double>(bytesPerArray) / sec / 1e9;
  std::printf("%-42s %8.2f ms  traffic %7.2f GB/s  output %7.2f GB/s\n", what, sec * 1e3, traffic, perOut);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace mixccl;
  const size_t bytes = argc > 1 ? parseBytes(argv[1]) : size_t{64} << 20;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 10;
  if (bytes == 0 || bytes % 64 != 0 || reps < 1) {
    std::fprintf(stderr, "usage: %s [bytes per array: MiB, or a multiple of 64 with a K/M/G suffix] [repetitions]\n",
                 argv[0]);
    return 2;
  }
  // About 64 MiB of output per sample whatever the size.
  const int inner = static_cast<int>(std::max<size_t>(1, (size_t{64} << 20) / bytes));
  std::vector<unsigned char> a(bytes), b(bytes), d(bytes);
  // Realistic data: values in [-2, 2) written in each case's data type (see fill()).
  auto fill = [&](DataType dtype) {
    const size_t elem = dataTypeSize(dtype);
    uint32_t x = 12345;
    for (size_t off = 0; off + elem <= bytes; off += elem) {
      uint8_t tmp[8];
      x = x * 1664525u + 1013904223u;
      encodeScalar(dtype, (static_cast<double>(x >> 8) / (1 << 24)) * 4.0 - 2.0, tmp);
      std::memcpy(&a[off], tmp, elem);
      x = x * 1664525u + 1013904223u;
      encodeScalar(dtype, (static_cast<double>(x >> 8) / (1 << 24)) * 4.0 - 2.0, tmp);
      std::memcpy(&b[off], tmp, elem);
    }
  };
  std::printf("arrays of %zu KiB, best of %d samples of %d calls\n", bytes >> 10, reps, inner);
  report("memcpy", bytes, 2, bestSeconds(reps, inner, [&] { std::memcpy(d.data(), a.data(), bytes); }));

  struct Case {
    DataType dtype;
    RedOpKind op;
    bool inPlace;
    bool pre;
  };
  const Case cases[] = {
      {DataType::kFloat32, RedOpKind::kSum, false, false},    {DataType::kFloat32, RedOpKind::kSum, true, false},
      {DataType::kFloat32, RedOpKind::kMax, false, false},    {DataType::kFloat32, RedOpKind::kSum, false, true},
      {DataType::kFloat64, RedOpKind::kSum, false, false},    {DataType::kInt32, RedOpKind::kSum, false, false},
      {DataType::kInt8, RedOpKind::kSum, false, false},       {DataType::kFloat16, RedOpKind::kSum, false, false},
      {DataType::kFloat16, RedOpKind::kSum, true, false},     {DataType::kFloat16, RedOpKind::kSum, false, true},
      {DataType::kBfloat16, RedOpKind::kSum, false, false},   {DataType::kBfloat16, RedOpKind::kSum, true, false},
      {DataType::kBfloat16, RedOpKind::kSum, false, true},    {DataType::kFloat8e4m3, RedOpKind::kSum, false, false},
      {DataType::kFloat8e5m2, RedOpKind::kSum, false, false},
  };
  for (const Case& c : cases) {
    fill(c.dtype);
    for (host::KernelIsa isa : {host::KernelIsa::kPortable, host::KernelIsa::kAvx2}) {
      if (!host::kernelIsaAvailable(isa)) continue;
      ReduceSpec spec;
      spec.dtype = c.dtype;
      spec.op = c.op;
      spec.preMul = c.pre;
      encodeScalar(c.dtype, 0.25, spec.scalar);
      const size_t count = bytes / dataTypeSize(c.dtype);
      void* dst = c.inPlace ? static_cast<void*>(a.data()) : static_cast<void*>(d.data());
      const double sec = bestSeconds(reps, inner, [&] {
        if (!ok(host::reduceWithIsa(isa, dst, a.data(), b.data(), count, spec, true, false))) std::abort();
      });
      char label[128];
      std::snprintf(label, sizeof(label), "%s %s %s%s%s", host::kernelIsaName(isa), dataTypeName(c.dtype),
                    redOpName(c.op), c.inPlace ? " in-place" : "", c.pre ? " premul" : "");
      report(label, bytes, 3, sec);
    }
  }
  return 0;
}
