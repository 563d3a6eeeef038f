// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// Mixed data-parallel training: host ranks and OpenCL ranks train one small MLP together in one
// communicator, through the public API only (nccl.h, mixccl/opencl.h). Each rank learns its kind
// from MIXCCL_DEVICE_BACKEND (as the library does) and gets its place from the launcher:
//
//   mixcclrun -np 4 --rank-env 1,3 MIXCCL_DEVICE_BACKEND=opencl build/examples/mixed_mlp --steps 50
//
// A step: every rank makes its share of the global batch (samples are a pure function of the seed
// and the global sample index, so any partition sees the same data), computes its mean gradient,
// and all-reduces gradient + loss with a PreMulSum operator whose scalar is its share n_r / N: the
// sum is then the global mean. Every rank applies the same update to its own copy of the weights;
// a hash all-gather checks every few steps that the copies are still bitwise equal.
//
// Shares: after a few warm-up steps (timed, not trained) each rank's samples/s is all-gathered
// and the global batch split in proportion (largest-remainder rounding, ties to the lower rank),
// the way FlagScale sizes the work of each chip; --shares fixes the split instead. With equal
// shares a mixed run's loss curve equals an all-host run's bit for bit (examples/README.md).

#include <mixccl/opencl.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mixed_mlp_worker.h"

namespace mixmlp {
namespace {

struct Options {
  int steps = 20;
  int batch = 256;
  int warmup = 3;
  double warmupTime = 0.2;
  int checkEvery = 10;
  float lr = 0.05f;
  uint64_t seed = 1;
  Shape shape;
  std::vector<int> shares;  // empty: measured
  double baselineHost = 0.0, baselineOpencl = 0.0;
  bool probeOpencl = false;
};

const char* const kUsage =
    "usage: mixed_mlp [options]   (one process per rank, under mixcclrun or another launcher)\n"
    "  --steps S            training steps (default 20)\n"
    "  --batch N            global batch in samples (default 256)\n"
    "  --in D --hidden H --out O   model shape (default 32 64 4)\n"
    "  --lr X               learning rate (default 0.05)\n"
    "  --seed K             data and weight seed (default 1)\n"
    "  --warmup W           timed warm-up steps that size the shares (at least; default 3)\n"
    "  --warmup-time T      ... and at least T seconds of them (default 0.2)\n"
    "  --shares a,b,...     fixed samples per rank (one per rank, summing to N) instead of measuring\n"
    "  --check-every K      compare the ranks' weight hashes every K steps and at the end (default 10; 0: never)\n"
    "  --baseline-host X --baseline-opencl Y\n"
    "                       samples/s of the all-host and all-OpenCL runs: prints mixed / (X + Y) * 100\n"
    "  --probe-opencl       no training, no launcher: exit 0 if an OpenCL device is usable, 77 if not\n";

bool parseInt(const char* s, long lo, long hi, int* out) {
  char* end = nullptr;
  long v = strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

bool parseDouble(const char* s, double* out) {
  char* end = nullptr;
  double v = strtod(s, &end);
  if (end == s || *end != '\0' || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

bool parseShares(const char* s, std::vector<int>* out) {
  std::string text(s);
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    int v = 0;
    if (!parseInt(text.substr(pos, comma - pos).c_str(), 0, 1 << 24, &v)) return false;
    out->push_back(v);
    pos = comma + 1;
  }
  return !out->empty();
}

// Returns 0 when parsed, 2 (usage) otherwise, after saying why.
int parseOptions(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      fputs(kUsage, stdout);
      exit(0);
    }
    if (a == "--probe-opencl") {
      o->probeOpencl = true;
      continue;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "mixed_mlp: %s needs a value\n%s", a.c_str(), kUsage);
      return 2;
    }
    const char* v = argv[++i];
    double d = 0.0;
    bool ok = true;
    if (a == "--steps") {
      ok = parseInt(v, 1, 1 << 24, &o->steps);
    } else if (a == "--batch") {
      ok = parseInt(v, 1, 1 << 20, &o->batch);
    } else if (a == "--in") {
      ok = parseInt(v, 1, 4096, &o->shape.in);
    } else if (a == "--hidden") {
      ok = parseInt(v, 1, 4096, &o->shape.hidden);
    } else if (a == "--out") {
      ok = parseInt(v, 1, 4096, &o->shape.out);
    } else if (a == "--warmup") {
      ok = parseInt(v, 1, 1000, &o->warmup);
    } else if (a == "--warmup-time") {
      ok = parseDouble(v, &o->warmupTime) && o->warmupTime >= 0.0 && o->warmupTime <= 60.0;
    } else if (a == "--check-every") {
      ok = parseInt(v, 0, 1 << 24, &o->checkEvery);
    } else if (a == "--lr") {
      ok = parseDouble(v, &d) && d > 0.0;
      o->lr = static_cast<float>(d);
    } else if (a == "--seed") {
      ok = parseDouble(v, &d) && d >= 0.0 && d < 9e15 && d == std::floor(d);
      o->seed = static_cast<uint64_t>(d);
    } else if (a == "--shares") {
      ok = parseShares(v, &o->shares);
    } else if (a == "--baseline-host") {
      ok = parseDouble(v, &o->baselineHost) && o->baselineHost > 0.0;
    } else if (a == "--baseline-opencl") {
      ok = parseDouble(v, &o->baselineOpencl) && o->baselineOpencl > 0.0;
    } else {
      fprintf(stderr, "mixed_mlp: unknown option %s\n%s", a.c_str(), kUsage);
      return 2;
    }
    if (!ok) {
      fprintf(stderr, "mixed_mlp: bad value '%s' for %s\n%s", v, a.c_str(), kUsage);
      return 2;
    }
  }
  if ((o->baselineHost > 0.0) != (o->baselineOpencl > 0.0)) {
    fprintf(stderr, "mixed_mlp: give both --baseline-host and --baseline-opencl, or neither\n");
    return 2;
  }
  return 0;
}

// Splits `batch` in proportion to `speeds`: floor of each exact share, then one more sample to the
// largest remainders (ties to the lower rank) until the sum is the batch. Every rank computes it
// from the same all-gathered speeds with the same code, so all agree.
std::vector<int> proportionalShares(const std::vector<double>& speeds, int batch) {
  const size_t n = speeds.size();
  double total = 0.0;
  for (double s : speeds) total += s;
  std::vector<int> shares(n);
  std::vector<double> rest(n);
  int given = 0;
  for (size_t r = 0; r < n; ++r) {
    const double exact = total > 0.0 ? batch * (speeds[r] / total) : static_cast<double>(batch) / n;
    shares[r] = static_cast<int>(std::floor(exact));
    rest[r] = exact - shares[r];
    given += shares[r];
  }
  while (given < batch) {
    size_t best = 0;
    for (size_t r = 1; r < n; ++r) {
      if (rest[r] > rest[best]) best = r;
    }
    ++shares[best];
    rest[best] = -1.0;
    ++given;
  }
  while (given > batch) {  // only if floating point overshot; take from the largest share
    size_t big = 0;
    for (size_t r = 1; r < n; ++r) {
      if (shares[r] > shares[big]) big = r;
    }
    --shares[big];
    --given;
  }
  return shares;
}

uint32_t floatBits(float f) {
  uint32_t u = 0;
  memcpy(&u, &f, sizeof u);
  return u;
}

double seconds() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

int envInt(const char* const* names) {
  for (; *names != nullptr; ++names) {
    const char* v = getenv(*names);
    if (v != nullptr && *v != '\0') return atoi(v);
  }
  return -1;
}

#define CHECK_NCCL(call)                                                                     \
  do {                                                                                       \
    ncclResult_t r_ = (call);                                                                \
    if (r_ != ncclSuccess) {                                                                 \
      fprintf(stderr, "rank %d: %s failed: %s (%s)\n", rank_, #call, ncclGetErrorString(r_), \
              ncclGetLastError(nullptr));                                                    \
      return 1;                                                                              \
    }                                                                                        \
  } while (0)
#define CHECK_TRUE(call)   \
  do {                     \
    if (!(call)) return 1; \
  } while (0)

class Trainer {
 public:
  Trainer(const Options& o, int rank, int nranks) : o_(o), rank_(rank), nranks_(nranks), data_(o.shape, o.seed) {}
  ~Trainer() {
    if (haveOp_) ncclRedOpDestroy(op_, comm_);
    // The communicator first: it may still refer to the worker's queue. After a failure the peers
    // may be gone or stuck in a collective, so abort instead of the orderly destroy.
    if (comm_ != nullptr) (ok_ ? ncclCommDestroy(comm_) : ncclCommAbort(comm_));
    worker_.reset();
  }

  int run();

 private:
  int setup();
  int partition();
  int train();
  int checkWeights(int step);

  Options o_;
  int rank_, nranks_;
  DataSource data_;
  ncclComm_t comm_ = nullptr;
  std::unique_ptr<Worker> worker_;
  std::vector<int> kinds_;  // per rank: 1 = opencl
  std::vector<int> shares_;
  int offset_ = 0;
  ncclRedOp_t op_ = ncclSum;  // the PreMulSum operator once haveOp_
  bool haveOp_ = false;
  bool ok_ = false;  // run() succeeded
  std::vector<float> x_, y_;
};

int Trainer::setup() {
  const char* backend = getenv("MIXCCL_DEVICE_BACKEND");
  const bool opencl = backend != nullptr && strcmp(backend, "opencl") == 0;
  if (backend != nullptr && *backend != '\0' && !opencl && strcmp(backend, "host") != 0) {
    fprintf(stderr, "rank %d: MIXCCL_DEVICE_BACKEND=%s: this example runs host or opencl ranks only\n", rank_, backend);
    return 2;
  }
  ncclUniqueId id;
  CHECK_NCCL(ncclGetUniqueId(&id));
  CHECK_NCCL(ncclCommInitRank(&comm_, nranks_, id, rank_));
  const std::vector<float> initial = initialParams(o_.shape, o_.seed);
  worker_ = opencl ? makeOpenclWorker(rank_, o_.shape, o_.batch, initial)
                   : makeHostWorker(rank_, o_.shape, o_.batch, initial);
  CHECK_TRUE(worker_ != nullptr);
  x_.resize(static_cast<size_t>(o_.batch) * o_.shape.in);
  y_.resize(static_cast<size_t>(o_.batch) * o_.shape.out);
  return 0;
}

// Sets shares_ and offset_: fixed, or from the warm-up speeds.
int Trainer::partition() {
  double speed = 0.0;
  if (o_.shares.empty()) {
    // Time make + compute (not the all-reduce) of an equal share: one untimed step (program
    // builds, first touches), then at least --warmup steps and --warmup-time seconds, so that a
    // scheduler hiccup on a busy machine does not decide the split.
    const int n = std::max(1, o_.batch / nranks_);
    const float invN = 1.0f / static_cast<float>(n);
    double start = 0.0, elapsed = 0.0;
    int timed = 0;
    for (int w = 0; w <= o_.warmup || elapsed < o_.warmupTime; ++w) {
      if (w == 1) start = seconds();
      data_.make(0, n, x_.data(), y_.data());
      CHECK_TRUE(worker_->compute(x_.data(), y_.data(), n, invN, 0.5f * invN) && worker_->finish());
      if (w >= 1) {
        ++timed;
        elapsed = seconds() - start;
      }
    }
    speed = n * timed / std::max(elapsed, 1e-9);
  }
  // Everyone's kind and speed, in host memory with a NULL stream: complete when the call returns.
  std::vector<double> mine = {worker_->stream() != nullptr ? 1.0 : 0.0, speed};
  std::vector<double> all(2 * static_cast<size_t>(nranks_));
  CHECK_NCCL(ncclAllGather(mine.data(), all.data(), 2, ncclFloat64, comm_, nullptr));
  std::vector<double> speeds(nranks_);
  kinds_.resize(nranks_);
  for (int r = 0; r < nranks_; ++r) {
    kinds_[r] = all[2 * r] != 0.0;
    speeds[r] = all[2 * r + 1];
  }
  if (!o_.shares.empty()) {
    shares_ = o_.shares;
  } else {
    shares_ = proportionalShares(speeds, o_.batch);
  }
  for (int r = 0; r < rank_; ++r) offset_ += shares_[r];
  if (rank_ == 0) {
    printf("partition (%s):", o_.shares.empty() ? "measured" : "fixed by --shares");
    for (int r = 0; r < nranks_; ++r) {
      printf(" rank %d %s %d", r, kinds_[r] ? "opencl" : "host", shares_[r]);
      if (o_.shares.empty()) printf(" (%.0f samples/s)", speeds[r]);
      printf(r + 1 < nranks_ ? "," : "\n");
    }
  }
  // Pre-multiplying the rank's mean gradient by n_r / N makes the sum the global mean.
  float scalar = static_cast<float>(shares_[rank_]) / static_cast<float>(o_.batch);
  CHECK_NCCL(ncclRedOpCreatePreMulSum(&op_, &scalar, ncclFloat32, ncclScalarHostImmediate, comm_));
  haveOp_ = true;
  return 0;
}

// All ranks hash their weights and compare: they must be bitwise equal.
int Trainer::checkWeights(int step) {
  std::vector<float> params;
  CHECK_TRUE(worker_->readParams(&params));
  uint64_t mine = hashBytes(params.data(), params.size() * sizeof(float));
  std::vector<uint64_t> all(nranks_);
  CHECK_NCCL(ncclAllGather(&mine, all.data(), 1, ncclUint64, comm_, nullptr));
  int bad = 0;
  for (int r = 0; r < nranks_; ++r) bad += all[r] != all[0];
  if (bad != 0) {
    if (rank_ == 0) {
      fprintf(stderr, "after step %d the ranks' weights differ (hashes:", step);
      for (int r = 0; r < nranks_; ++r) fprintf(stderr, " %d:%016llx", r, static_cast<unsigned long long>(all[r]));
      fprintf(stderr, "); the host and OpenCL arithmetic diverged\n");
    }
    return 1;
  }
  if (rank_ == 0)
    printf("weights equal on all %d ranks after step %d (hash %016llx)\n", nranks_, step,
           static_cast<unsigned long long>(mine));
  return 0;
}

int Trainer::train() {
  const int n = shares_[rank_];
  const float invN = n > 0 ? 1.0f / static_cast<float>(n) : 0.0f;
  const float lossScale = 0.5f * invN;
  const size_t count = o_.shape.grads();
  // The clock starts after step 0 (its all-reduce lines the ranks up), which pays first-use costs
  // (the library's OpenCL program build, the engine's queues); with one step, it starts before.
  const int timedSteps = o_.steps > 1 ? o_.steps - 1 : 1;
  double start = seconds();
  for (int s = 0; s < o_.steps; ++s) {
    if (s == 1) start = seconds();
    data_.make(static_cast<uint64_t>(s) * o_.batch + offset_, n, x_.data(), y_.data());
    CHECK_TRUE(worker_->compute(x_.data(), y_.data(), n, invN, lossScale));
    // In place, on the worker's stream: queued behind the gradient kernels on an OpenCL rank.
    CHECK_NCCL(
        ncclAllReduce(worker_->gradBuffer(), worker_->gradBuffer(), count, ncclFloat32, op_, comm_, worker_->stream()));
    float loss = 0.0f;
    CHECK_TRUE(worker_->update(o_.lr, &loss));
    if (rank_ == 0) printf("step %4d loss %.9g bits 0x%08x\n", s, loss, floatBits(loss));
    if (o_.checkEvery > 0 && ((s + 1) % o_.checkEvery == 0 || s + 1 == o_.steps)) CHECK_TRUE(checkWeights(s) == 0);
  }
  // The slowest rank's time is the job's.
  double elapsed = seconds() - start;
  CHECK_NCCL(ncclAllReduce(&elapsed, &elapsed, 1, ncclFloat64, ncclMax, comm_, nullptr));
  const double throughput = static_cast<double>(o_.batch) * timedSteps / elapsed;
  if (rank_ == 0) {
    int ocl = 0;
    for (int k : kinds_) ocl += k;
    printf("throughput: %.1f samples/s (%d timed steps of %d samples in %.3f s; %d host + %d opencl ranks)\n",
           throughput, timedSteps, o_.batch, elapsed, nranks_ - ocl, ocl);
    if (o_.baselineHost > 0.0) {
      printf("efficiency: %.1f%% = mixed %.1f / (all-host %.1f + all-opencl %.1f) samples/s\n",
             throughput / (o_.baselineHost + o_.baselineOpencl) * 100.0, throughput, o_.baselineHost,
             o_.baselineOpencl);
    }
  }
  return 0;
}

int Trainer::run() {
  int rc = setup();
  if (rc == 0) rc = partition();
  if (rc == 0) rc = train();
  ok_ = rc == 0;
  fflush(stdout);
  return rc;
}

// For scripts and tests: is there an OpenCL device the library can use? (77: CTest's skip code.)
int probeOpencl() {
  cl_context context = nullptr;
  ncclResult_t r = mixcclOpenclGetContext(&context, nullptr);
  if (r != ncclSuccess) {
    printf("no usable OpenCL device: %s (%s)\n", ncclGetErrorString(r), ncclGetLastError(nullptr));
    return 77;
  }
  printf("OpenCL device usable\n");
  return 0;
}

}  // namespace
}  // namespace mixmlp

int main(int argc, char** argv) {
  static const char* const kRank[] = {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", nullptr};
  static const char* const kSize[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", nullptr};
  mixmlp::Options o;
  int rc = mixmlp::parseOptions(argc, argv, &o);
  if (rc != 0) return rc;
  if (o.probeOpencl) return mixmlp::probeOpencl();
  const int rank = mixmlp::envInt(kRank), nranks = mixmlp::envInt(kSize);
  if (rank < 0 || nranks < 1 || rank >= nranks || getenv("NCCL_COMM_ID") == nullptr) {
    fprintf(stderr, "mixed_mlp: needs RANK, WORLD_SIZE and NCCL_COMM_ID: run it under mixcclrun\n");
    return 2;
  }
  if (!o.shares.empty()) {
    long sum = 0;
    for (int v : o.shares) sum += v;
    if (static_cast<int>(o.shares.size()) != nranks || sum != o.batch) {
      fprintf(stderr,
              "mixed_mlp: --shares has %zu entries summing to %ld; it needs %d (one per rank) summing to "
              "--batch %d\n",
              o.shares.size(), sum, nranks, o.batch);
      return 2;
    }
  }
  setvbuf(stdout, nullptr, _IOLBF, 0);  // loss lines appear as they are made
  mixmlp::Trainer trainer(o, rank, nranks);
  return trainer.run();
}
