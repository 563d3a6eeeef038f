// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
//
// gloo_coll: the gloo reference harness of perf/compare. Gloo has no shared-memory transport, so
// this always runs gloo's TCP device (on 127.0.0.1) and reports transport "tcp". Rendezvous is a
// gloo FileStore in a directory both ranks see. perf/compare starts the ranks itself, with
// RANK and WORLD_SIZE in the environment.
//
// Operations timed (float, sum; what Debian's gloo 0.0~git20220518 provides):
//   all_reduce      gloo::allreduce, ring algorithm
//   all_gather      gloo::allgather
//   reduce_scatter  gloo::ReduceScatterHalvingDoubling (the only reduce-scatter gloo has; it
//                   works in place, so the input is overwritten by every run)
//   alltoall        gloo::alltoall
//   broadcast       gloo::broadcast (root 0)
//   reduce          gloo::reduce (root 0)
//   gather          gloo::gather (root 0)
//   scatter         gloo::scatter (root 0)
//   sendrecv        unbound buffers: send to rank+1, receive from rank-1
// Timing, sizes, bus-bandwidth factors and the JSON rows are those of mpi_coll.c.
//
// Usage: gloo_coll -b MIN -e MAX -f FACTOR -n ITERS -w WARMUP -C coll[,coll] -o DIR -s STOREDIR
//                  [-c 0|1] [-x SECONDS]
// -x bounds the timed work per size: the warm-up operations are timed too, and the timed loop
// runs min(ITERS, SECONDS / time per warm-up operation) times (at least once). When one
// operation takes longer than SECONDS, that size is the last one of the collective (larger ones
// are left out and "truncated_after" in the JSON names the size where it stopped).
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/gather.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/scatter.h>
#include <gloo/transport/tcp/device.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

enum class Coll {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kBroadcast,
  kReduce,
  kGather,
  kScatter,
  kSendRecv
};
constexpr const char* kCollNames[] = {"all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast",
                                      "reduce",     "gather",     "scatter",        "sendrecv"};
constexpr int kNumColls = 9;

struct Options {
  size_t minBytes = 8, maxBytes = 1 << 20;
  double factor = 2.0;
  int iters = 20, warmup = 5, check = 1;
  double budget = 0;  // -x: seconds of timed work per size (0: no limit)
  std::string outDir = ".", storeDir;
  bool want[kNumColls] = {};
};

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

class Harness {
 public:
  Harness(std::shared_ptr<gloo::Context> ctx, size_t capBytes)
      : ctx_(std::move(ctx)),
        rank_(ctx_->rank),
        n_(ctx_->size),
        send_(capBytes / sizeof(float) + 1),
        recv_(capBytes / sizeof(float) + 1) {}

  // Prepares per-size state (gloo's algorithm objects are built once per size and reused).
  void prepare(Coll c, size_t bytes) {
    count_ = bytes / sizeof(float);
    part_ = count_ / n_;
    if (c == Coll::kReduceScatter) {
      std::vector<int> recvElems(n_, static_cast<int>(part_));
      rs_ = std::make_unique<gloo::ReduceScatterHalvingDoubling<float>>(ctx_, std::vector<float*>{send_.data()},
                                                                        static_cast<int>(count_), recvElems);
    }
  }

  void run(Coll c) {
    float* send = send_.data();
    float* recv = recv_.data();
    auto sum = static_cast<ReduceFn>(&gloo::sum<float>);
    switch (c) {
      case Coll::kAllReduce: {
        gloo::AllreduceOptions o(ctx_);
        o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
        o.setInput(send, count_);
        o.setOutput(recv, count_);
        o.setReduceFunction(sum);
        gloo::allreduce(o);
        break;
      }
      case Coll::kAllGather: {
        gloo::AllgatherOptions o(ctx_);
        o.setInput(send, part_);
        o.setOutput(recv, count_);
        gloo::allgather(o);
        break;
      }
      case Coll::kReduceScatter:
        rs_->run();
        break;
      case Coll::kAllToAll: {
        gloo::AlltoallOptions o(ctx_);
        o.setInput(send, count_);
        o.setOutput(recv, count_);
        gloo::alltoall(o);
        break;
      }
      case Coll::kBroadcast: {
        gloo::BroadcastOptions o(ctx_);
        o.setRoot(0);
        o.setOutput(rank_ == 0 ? send : recv, count_);
        gloo::broadcast(o);
        break;
      }
      case Coll::kReduce: {
        gloo::ReduceOptions o(ctx_);
        o.setRoot(0);
        o.setInput(send, count_);
        o.setOutput(recv, count_);
        o.setReduceFunction(sum);
        gloo::reduce(o);
        break;
      }
      case Coll::kGather: {
        gloo::GatherOptions o(ctx_);
        o.setRoot(0);
        o.setInput(send, part_);
        if (rank_ == 0) o.setOutput(recv, count_);
        gloo::gather(o);
        break;
      }
      case Coll::kScatter: {
        gloo::ScatterOptions o(ctx_);
        o.setRoot(0);
        if (rank_ == 0) {
          std::vector<float*> parts;
          for (int r = 0; r < n_; ++r) parts.push_back(send + r * part_);
          o.setInputs(parts, part_);
        }
        o.setOutput(recv, part_);
        gloo::scatter(o);
        break;
      }
      case Coll::kSendRecv: {
        auto out = ctx_->createUnboundBuffer(send, count_ * sizeof(float));
        auto in = ctx_->createUnboundBuffer(recv, count_ * sizeof(float));
        uint64_t slot = 0x5e4d0000 + (slots_++ & 0xffff);
        in->recv((rank_ + n_ - 1) % n_, slot);
        out->send((rank_ + 1) % n_, slot);
        out->waitSend();
        in->waitRecv();
        break;
      }
    }
  }

  // Runs one more operation on a known input and counts wrong output elements over all ranks.
  long long check(Coll c) {
    for (size_t i = 0; i < count_; ++i) send_[i] = pattern(rank_, i);
    std::memset(recv_.data(), 0, count_ * sizeof(float));
    run(c);
    long long wrong = 0;
    for (size_t i = 0; i < count_; ++i) {
      float want = 0;
      const float* out = recv_.data();
      if (c == Coll::kReduceScatter) out = send_.data() + rank_ * part_;  // in place, own block
      if (expected(c, i, &want) && out[i] != want) ++wrong;
    }
    return static_cast<long long>(maxOver(static_cast<double>(wrong), true));
  }

  // The largest (or, with sum, the summed) value of x over all ranks.
  double maxOver(double x, bool sumInstead = false) {
    double in = x, out = 0;
    gloo::AllreduceOptions o(ctx_);
    o.setInput(&in, 1);
    o.setOutput(&out, 1);
    o.setReduceFunction(sumInstead ? static_cast<ReduceFn>(&gloo::sum<double>)
                                   : static_cast<ReduceFn>(&gloo::max<double>));
    o.setTag(77);
    gloo::allreduce(o);
    return out;
  }

  void barrier() {
    gloo::BarrierOptions o(ctx_);
    gloo::barrier(o);
  }

  void fill(float v) {
    std::fill(send_.begin(), send_.end(), v);
    std::fill(recv_.begin(), recv_.end(), 0.0f);
  }

 private:
  static float pattern(int r, size_t i) { return static_cast<float>((r + 1) + static_cast<int>(i % 13)); }

  bool expected(Coll c, size_t i, float* out) const {
    float total = 0;
    for (int r = 0; r < n_; ++r) total += pattern(r, i);
    switch (c) {
      case Coll::kAllReduce:
        *out = total;
        return true;
      case Coll::kAllGather:
      case Coll::kGather:
        *out = pattern(static_cast<int>(i / part_), i % part_);
        return c == Coll::kAllGather || rank_ == 0;
      case Coll::kReduceScatter: {
        float s = 0;
        for (int r = 0; r < n_; ++r) s += pattern(r, rank_ * part_ + i);
        *out = s;
        return i < part_;
      }
      case Coll::kAllToAll:
        *out = pattern(static_cast<int>(i / part_), rank_ * part_ + i % part_);
        return true;
      case Coll::kBroadcast:
        *out = pattern(0, i);
        return rank_ != 0;
      case Coll::kReduce:
        *out = total;
        return rank_ == 0;
      case Coll::kScatter:
        *out = pattern(0, rank_ * part_ + i);
        return i < part_;
      case Coll::kSendRecv:
        *out = pattern((rank_ + n_ - 1) % n_, i);
        return true;
    }
    return false;
  }

  std::shared_ptr<gloo::Context> ctx_;
  int rank_, n_;
  std::vector<float> send_, recv_;
  size_t count_ = 0, part_ = 0;
  uint64_t slots_ = 0;
  std::unique_ptr<gloo::ReduceScatterHalvingDoubling<float>> rs_;
};

size_t parseSize(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (*end == 'K' || *end == 'k') v *= 1024.0;
  if (*end == 'M' || *end == 'm') v *= 1024.0 * 1024.0;
  if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024.0 * 1024.0;
  return static_cast<size_t>(v);
}

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: RANK=r WORLD_SIZE=n gloo_coll -b MIN -e MAX -f FACTOR -n ITERS -w WARMUP -C coll[,coll] "
               "-o DIR -s STOREDIR [-c 0|1]\n");
  std::exit(2);
}

Options parseOptions(int argc, char** argv) {
  Options o;
  int opt;
  while ((opt = getopt(argc, argv, "b:e:f:n:w:c:C:o:s:x:")) != -1) {
    switch (opt) {
      case 'x':
        o.budget = std::atof(optarg);
        break;
      case 'b':
        o.minBytes = parseSize(optarg);
        break;
      case 'e':
        o.maxBytes = parseSize(optarg);
        break;
      case 'f':
        o.factor = std::atof(optarg);
        break;
      case 'n':
        o.iters = std::atoi(optarg);
        break;
      case 'w':
        o.warmup = std::atoi(optarg);
        break;
      case 'c':
        o.check = std::atoi(optarg);
        break;
      case 'o':
        o.outDir = optarg;
        break;
      case 's':
        o.storeDir = optarg;
        break;
      case 'C': {
        std::string list = optarg;
        size_t pos = 0;
        while (pos <= list.size()) {
          size_t comma = list.find(',', pos);
          std::string tok = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
          bool found = false;
          for (int c = 0; c < kNumColls; ++c) {
            if (tok == kCollNames[c]) o.want[c] = found = true;
          }
          if (!found) {
            std::fprintf(stderr, "gloo_coll: unknown collective '%s'\n", tok.c_str());
            usage();
          }
          if (comma == std::string::npos) break;
          pos = comma + 1;
        }
        break;
      }
      default:
        usage();
    }
  }
  if (o.storeDir.empty() || o.factor <= 1.0 || o.iters < 1 || o.minBytes == 0 || o.maxBytes < o.minBytes) usage();
  return o;
}

double busFactor(Coll c, int n) {
  switch (c) {
    case Coll::kAllReduce:
      return 2.0 * (n - 1) / n;
    case Coll::kAllGather:
    case Coll::kReduceScatter:
    case Coll::kAllToAll:
    case Coll::kGather:
    case Coll::kScatter:
      return static_cast<double>(n - 1) / n;
    default:
      return 1.0;
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parseOptions(argc, argv);
  const char* rankEnv = std::getenv("RANK");
  const char* sizeEnv = std::getenv("WORLD_SIZE");
  if (rankEnv == nullptr || sizeEnv == nullptr) usage();
  int rank = std::atoi(rankEnv), n = std::atoi(sizeEnv);

  gloo::transport::tcp::attr attr("127.0.0.1");
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(o.storeDir);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, n);
  ctx->setTimeout(std::chrono::seconds(300));
  ctx->connectFullMesh(store, device);

  // A row's per-rank block is whole 16-byte units, as nccl-tests and mixccl's perf tools size it.
  const size_t align = static_cast<size_t>(n) * 16;
  Harness h(ctx, o.maxBytes + align);
  h.fill(1.0f);
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);

  // Warm every path once before timing (see mpi_coll.c).
  for (int ci = 0; ci < kNumColls; ++ci) {
    if (!o.want[ci]) continue;
    for (size_t b : {align, size_t{65536}}) {
      if (b > o.maxBytes + align) continue;
      h.prepare(static_cast<Coll>(ci), b);
      h.run(static_cast<Coll>(ci));
    }
  }

  for (int ci = 0; ci < kNumColls; ++ci) {
    if (!o.want[ci]) continue;
    Coll c = static_cast<Coll>(ci);
    std::string rows;
    size_t truncatedAfter = 0;
    double busSum = 0;
    int nrows = 0;
    for (double b = static_cast<double>(o.minBytes); b <= static_cast<double>(o.maxBytes) * 1.0001; b *= o.factor) {
      size_t bytes = static_cast<size_t>(b) / align * align;
      if (bytes == 0) continue;
      h.prepare(c, bytes);
      auto w0 = std::chrono::steady_clock::now();
      for (int i = 0; i < o.warmup; ++i) h.run(c);
      double perOp = h.maxOver(std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count() /
                               std::max(1, o.warmup));
      int iters = o.iters;
      if (o.budget > 0 && o.warmup > 0) iters = std::max(1, std::min(o.iters, static_cast<int>(o.budget / perOp)));
      h.barrier();
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) h.run(c);
      double mine = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
      double slowest = h.maxOver(mine);
      long long wrong = o.check ? h.check(c) : -1;
      h.fill(1.0f);
      double algbw = static_cast<double>(bytes) / slowest / 1e9;
      double busbw = algbw * busFactor(c, n);
      busSum += busbw;
      bool rooted = c == Coll::kBroadcast || c == Coll::kReduce || c == Coll::kGather || c == Coll::kScatter;
      char row[512];
      std::snprintf(row, sizeof(row),
                    "%s{\"bytes\":%zu,\"count\":%zu,\"type\":\"float\",\"redop\":\"sum\",\"root\":%d,"
                    "\"oop\":{\"time_us\":%.3f,\"algbw\":%.4f,\"busbw\":%.4f,\"wrong\":%lld},\"ip\":null}",
                    nrows ? "," : "", bytes, bytes / sizeof(float), rooted ? 0 : -1, slowest * 1e6, algbw, busbw,
                    wrong);
      rows += row;
      ++nrows;
      // Past the budget even for one operation: larger sizes would only take longer, so stop here.
      if (o.budget > 0 && slowest > o.budget) {
        truncatedAfter = bytes;
        break;
      }
      if (rank == 0) {
        std::printf("gloo     tcp  %-15s %12zu B %11.2f us %8.3f GB/s busbw  wrong %lld\n", kCollNames[ci], bytes,
                    slowest * 1e6, busbw, wrong);
      }
    }
    if (rank == 0) {
      std::string path = o.outDir + "/" + kCollNames[ci] + ".json";
      FILE* f = std::fopen(path.c_str(), "w");
      if (f == nullptr) {
        std::fprintf(stderr, "gloo_coll: cannot write %s\n", path.c_str());
        return 1;
      }
      std::fprintf(f,
                   "{\"tool\":\"gloo\",\"collective\":\"%s\",\"nranks\":%d,\"host\":\"%s\",\"transport\":\"tcp\","
                   "\"env\":{},\"rows\":[%s],\"avg_busbw\":%.4f,\"truncated_after\":%zu}\n",
                   kCollNames[ci], n, host, rows.c_str(), nrows ? busSum / nrows : 0.0, truncatedAfter);
      std::fclose(f);
      std::fflush(stdout);
    }
  }
  h.barrier();
  return 0;
}
