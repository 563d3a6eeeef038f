// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
// The driver every perf tool shares: one thread per local rank (-t), each with its own
// communicator, stepping through the same rows in the same order so that their NCCL calls match.
// Cross-rank bookkeeping (barriers, times, wrong counts, device lines) goes through the
// communicator under test itself, so the tools need no MPI.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "perf/common/collective.h"
#include "perf/common/launch.h"
#include "perf/common/memory.h"
#include "perf/common/options.h"
#include "perf/common/report.h"
#include "perf/common/values.h"

namespace mixccl::perf {
namespace {

using Clock = std::chrono::steady_clock;

constexpr unsigned char kPoison = 0x7B;  // decodes far outside every expected value, in every type

std::string shortHostName() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  std::string h(buf);
  return h.substr(0, h.find('.'));
}

// An API error leaves the other ranks waiting in a collective that will never match, so the
// whole process leaves at once; launchers (mixcclrun, mpirun, srun) then stop the other processes.
[[noreturn]] void die(int rank, const char* what, ncclResult_t r) {
  std::fflush(stdout);
  std::fprintf(stderr, "%s:%d rank %d: %s failed: %s (%s)\n", shortHostName().c_str(), getpid(), rank, what,
               ncclGetErrorString(r), ncclGetLastError(nullptr));
  std::fflush(stderr);
  std::_Exit(1);
}

// A failure outside NCCL (the rank's OpenCL queue, a copy to or from its buffers): same exit.
[[noreturn]] void dieMemory(int rank, const std::string& what) {
  std::fflush(stdout);
  std::fprintf(stderr, "%s:%d rank %d: %s\n", shortHostName().c_str(), getpid(), rank, what.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

// nccl-tests' bandwidth gate for CI: with NCCL_TESTS_MIN_BW=X (GB/s) a run whose average bus
// bandwidth is below 90% of X fails (footer "FAILED", exit status 1). Empty when unset.
std::optional<bool> bandwidthVerdict(double avgBusbw) {
  const char* minBw = std::getenv("NCCL_TESTS_MIN_BW");
  if (minBw == nullptr) return std::nullopt;
  return avgBusbw >= 0.9 * std::atof(minBw);
}

#define PERF_NCCL(rank, call)                      \
  do {                                             \
    ncclResult_t r_ = (call);                      \
    if (r_ != ncclSuccess) die((rank), #call, r_); \
  } while (0)

// Kills the process when a row runs longer than -T seconds (a hung peer, a deadlock).
class Watchdog {
 public:
  explicit Watchdog(int seconds) : seconds_(seconds) {
    if (seconds_ > 0) thread_ = std::thread([this] { loop(); });
  }
  ~Watchdog() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  void arm() {
    if (seconds_ > 0) deadline_ = (Clock::now() + std::chrono::seconds(seconds_)).time_since_epoch().count();
  }

 private:
  void loop() {
    while (!stop_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const auto d = deadline_.load();
      if (d != 0 && Clock::now().time_since_epoch().count() > d) {
        std::fflush(stdout);
        std::fprintf(stderr, "%s:%d: a row took longer than -T %d seconds; giving up\n", shortHostName().c_str(),
                     getpid(), seconds_);
        std::_Exit(1);
      }
    }
  }
  int seconds_;
  std::atomic<bool> stop_{false};
  std::atomic<Clock::rep> deadline_{0};
  std::thread thread_;
};

struct Job {
  const CollDesc& desc;
  const Options& opts;
  const Launch& launch;
  ncclUniqueId id;
  int nranks;
  Watchdog* watchdog;
  std::string rendezvous;         // how the processes found rank 0 (for NCCL_DEBUG runs)
  std::vector<std::string> args;  // the command line, for -J
  std::atomic<int> exitCode{0};
};

// Fixed-size record of a rank for the "Using devices" lines, gathered with ncclAllGather.
struct RankRecord {
  int32_t rank, pid, device, pad;
  char host[64];
  char bus[16];    // "host" or "opencl"
  char name[112];  // what the rank's buffers are
};

class RankRunner {
 public:
  RankRunner(Job& job, int thread)
      : job_(job),
        o_(job.opts),
        d_(job.desc),
        thread_(thread),
        rank_(job.launch.procRank * job.opts.nThreads + thread),
        device_(job.launch.localRank * job.opts.nThreads + thread) {}

  void run() {
    if (thread_ == 0) job_.watchdog->arm();  // init and the device lines count as the first row
    const std::vector<MemKind>& pattern = o_.memPattern;
    std::string error;
    mem_ = makeRankMemory(pattern[static_cast<size_t>(rank_) % pattern.size()], &error);
    if (!mem_) dieMemory(rank_, error);
    PERF_NCCL(rank_, ncclCommInitRank(&comm_, job_.nranks, job_.id, rank_));
    std::unique_ptr<JsonReport> json;
    if (printer() && !o_.jsonPath.empty()) {
      json = std::make_unique<JsonReport>(o_, d_.name, job_.nranks, shortHostName(), job_.args);
      if (!json->claim(o_.jsonPath)) dieMemory(rank_, "no JSON output (-J)");
    }
    const std::vector<RankLine> devices = printDevices();
    if (json) json->setDevices(devices);
    if (printer()) printTableHeader();
    int errors = 0;
    double bwSum = 0;
    int bwCount = 0;
    prime();
    for (int cycle = 0; o_.cycles == 0 || cycle < o_.cycles; ++cycle) {
      for (const TypeInfo& type : o_.types) {
        const std::vector<OpInfo> ops = d_.reduces ? o_.ops : std::vector<OpInfo>{{OpKind::kSum, "none"}};
        for (const OpInfo& op : ops) {
          ncclRedOp_t redOp = makeOp(op.kind, type);
          for (int root : roots()) {
            for (size_t size : o_.sizes()) {
              Row row = runRow(size, type, op, redOp, root);
              for (const Cell* c : {&row.oop, &row.ip}) {
                errors += c->wrong.value_or(0) > 0;
                bwSum += c->busbw;
                ++bwCount;
              }
              if (printer()) printRow(row);
              if (json) json->add(row);
            }
          }
          if (op.kind == OpKind::kMulSum && d_.reduces) PERF_NCCL(rank_, ncclRedOpDestroy(redOp, comm_));
        }
      }
      if (json) {
        const double avg = bwCount ? bwSum / bwCount : 0;
        if (!json->write(errors, avg, bandwidthVerdict(avg))) job_.exitCode = 1;
      }
    }
    // Every rank saw the same rows (times are reduced over ranks), so every process reaches the
    // same verdict and exit status.
    const double avgBusbw = bwCount ? bwSum / bwCount : 0;
    const std::optional<bool> bwOk = bandwidthVerdict(avgBusbw);
    if (printer()) printFooter(std::string(d_.name) + "_perf", errors, avgBusbw, bwOk);
    sync();
    for (Registered& r : regs_) unregister(r);
    for (RankMemory::Buffer* b : {&send_, &recv_, &inPlace_}) mem_->release(*b);
    PERF_NCCL(rank_, ncclCommDestroy(comm_));
    if (errors || (bwOk && !*bwOk)) job_.exitCode = 1;
  }

 private:
  bool printer() const { return rank_ == 0; }

  std::vector<int> roots() const {
    if (!d_.rooted) return {-1};
    if (!o_.allRoots) return o_.roots;
    std::vector<int> all(job_.nranks);
    for (int r = 0; r < job_.nranks; ++r) all[r] = r;
    return all;
  }

  ncclRedOp_t makeOp(OpKind kind, const TypeInfo& type) {
    switch (kind) {
      case OpKind::kSum:
        return ncclSum;
      case OpKind::kProd:
        return ncclProd;
      case OpKind::kMax:
        return ncclMax;
      case OpKind::kMin:
        return ncclMin;
      case OpKind::kAvg:
        return ncclAvg;
      case OpKind::kMulSum:
        break;
    }
    if (!d_.reduces) return ncclSum;
    unsigned char scalar[8];
    encodeValue(type.type, ValuePlan::kMulSumScalar, scalar);
    ncclRedOp_t op;
    PERF_NCCL(rank_, ncclRedOpCreatePreMulSum(&op, scalar, type.type, ncclScalarHostImmediate, comm_));
    return op;
  }

  // Prints the preamble and the device lines (rank 0) and returns those lines (empty elsewhere).
  std::vector<RankLine> printDevices() {
    RankRecord mine{};
    mine.rank = rank_;
    mine.pid = getpid();
    mine.device = device_;
    std::snprintf(mine.host, sizeof mine.host, "%s", shortHostName().c_str());
    std::snprintf(mine.bus, sizeof mine.bus, "%s", mem_->bus().c_str());
    std::snprintf(mine.name, sizeof mine.name, "%s", mem_->deviceName().c_str());
    std::vector<RankRecord> all(job_.nranks);
    PERF_NCCL(rank_, ncclAllGather(&mine, all.data(), sizeof mine, ncclUint8, comm_, nullptr));
    if (!printer()) return {};
    std::vector<RankLine> lines;
    for (const RankRecord& r : all) lines.push_back({r.rank, 0, r.pid, r.device, r.host, r.bus, r.name});
    std::vector<std::string> notes;
    if (std::getenv("NCCL_DEBUG") && job_.launch.launcher != "none") {
      notes.push_back("launcher " + job_.launch.launcher + ": " + std::to_string(job_.launch.nprocs) + " processes x " +
                      std::to_string(o_.nThreads) + " threads");
      if (!job_.rendezvous.empty()) notes.push_back(job_.rendezvous);
    }
    printPreamble(o_, std::string(d_.name) + "_perf", lines, notes);
    return lines;
  }

  void barrier() { PERF_NCCL(rank_, ncclAllReduce(&scratch_, &scratch_, 1, ncclFloat64, ncclSum, comm_, nullptr)); }

  double allreduce(double v, ncclRedOp_t op) {
    double x = v;
    PERF_NCCL(rank_, ncclAllReduce(&x, &x, 1, ncclFloat64, op, comm_, nullptr));
    return x;
  }

  double rankTime(double seconds) {
    switch (o_.avg) {
      case AvgMode::kRank0:
        return allreduce(rank_ == 0 ? seconds : 0.0, ncclSum);
      case AvgMode::kAverage:
        return allreduce(seconds, ncclSum) / job_.nranks;
      case AvgMode::kMin:
        return allreduce(seconds, ncclMin);
      case AvgMode::kMax:
        return allreduce(seconds, ncclMax);
    }
    return seconds;
  }

  // -R: each buffer is registered as a whole, again whenever growing moved it.
  struct Registered {
    const void* base = nullptr;
    size_t bytes = 0;
    void* handle = nullptr;
  };
  void grow(RankMemory::Buffer& b, size_t bytes, Registered& r) {
    std::string error;
    if (!mem_->grow(b, bytes, &error)) dieMemory(rank_, error);
    if (o_.localRegister == 0) return;
    void* base = mem_->ptr(b, 0);
    const size_t have = b.device != nullptr ? b.deviceBytes : b.mirror.size();
    if (base == r.base && have == r.bytes) return;
    unregister(r);
    if (have == 0) return;
    if (o_.localRegister == 1) {
      PERF_NCCL(rank_, ncclCommRegister(comm_, base, have, &r.handle));
    } else {
      ncclWindow_t win = nullptr;
      PERF_NCCL(rank_, ncclCommWindowRegister(comm_, base, have, &win, NCCL_WIN_DEFAULT));
      r.handle = win;
    }
    r.base = base;
    r.bytes = have;
  }
  void unregister(Registered& r) {
    if (r.handle == nullptr) return;
    if (o_.localRegister == 1) {
      PERF_NCCL(rank_, ncclCommDeregister(comm_, r.handle));
    } else {
      PERF_NCCL(rank_, ncclCommWindowDeregister(comm_, static_cast<ncclWindow_t>(r.handle)));
    }
    r = Registered{};
  }
  void upload(RankMemory::Buffer& b, size_t bytes) {
    std::string error;
    if (!mem_->upload(b, 0, bytes, &error)) dieMemory(rank_, error);
  }
  void download(RankMemory::Buffer& b, size_t offset, size_t bytes) {
    std::string error;
    if (!mem_->download(b, offset, bytes, &error)) dieMemory(rank_, error);
  }
  // Device ranks: the calls only enqueued their work on the stream; wait for it (nccl-tests'
  // cudaStreamSynchronize). Host ranks: the calls completed at return.
  void sync() {
    std::string error;
    if (!mem_->synchronize(&error)) dieMemory(rank_, error);
  }

  Row runRow(size_t size, const TypeInfo& type, const OpInfo& op, ncclRedOp_t redOp, int root) {
    if (thread_ == 0) job_.watchdog->arm();
    const size_t ts = type.size;
    const Counts c = d_.counts(size / ts, ts, job_.nranks, rank_);
    const size_t ipElems = std::max(c.sendInPlaceOff + c.send, c.recvInPlaceOff + c.recv);
    grow(send_, c.send * ts, regs_[0]);
    grow(recv_, c.recv * ts, regs_[1]);
    grow(inPlace_, ipElems * ts, regs_[2]);
    const ValuePlan plan(d_, op.kind, type, job_.nranks);

    Row row{std::max(c.send, c.recv) * ts, c.param, type.name, op.name, root, {}, {}};
    for (bool inPlace : {false, true}) {
      const size_t sendOff = inPlace ? c.sendInPlaceOff * ts : 0;
      const size_t recvOff = inPlace ? c.recvInPlaceOff * ts : 0;
      RankMemory::Buffer& sendBuf = inPlace ? inPlace_ : send_;
      RankMemory::Buffer& recvBuf = inPlace ? inPlace_ : recv_;
      const void* sendPtr = mem_->ptr(sendBuf, sendOff);
      void* recvPtr = mem_->ptr(recvBuf, recvOff);
      const CallArgs args{sendPtr, recvPtr, c.param, type.type, redOp, root, rank_, job_.nranks, comm_, mem_->stream()};
      // Composed in the host mirrors (for host ranks: the buffers themselves), then uploaded.
      auto fill = [&] {
        if (inPlace) std::memset(inPlace_.mirror.data(), kPoison, ipElems * ts);
        if (!inPlace) std::memset(recv_.mirror.data(), kPoison, c.recv * ts);
        plan.fillInput(sendBuf.mirror.data() + sendOff, c.send, rank_);
        if (inPlace) {
          upload(inPlace_, ipElems * ts);
        } else {
          upload(recv_, c.recv * ts);
          upload(send_, c.send * ts);
        }
      };
      if (o_.check) fill();
      for (int i = 0; i < o_.warmupIters; ++i) callOnce(args);
      sync();
      barrier();
      // -z: 1 and 2 wait for each iteration (1 then barriers, 2 not); 3 barriers too but times only
      // up to the wait. nccl-tests waits after each call of a -m group; calls inside a group only
      // run at its end, so here the wait is after the group.
      const auto t0 = Clock::now();
      Clock::duration untimed{};
      for (int i = 0; i < o_.iters; ++i) {
        if (o_.aggIters > 1) PERF_NCCL(rank_, ncclGroupStart());
        for (int a = 0; a < o_.aggIters; ++a) callOnce(args);
        if (o_.aggIters > 1) PERF_NCCL(rank_, ncclGroupEnd());
        if (o_.blocking != 0) sync();
        if (o_.blocking == 1) barrier();
        if (o_.blocking == 3) {
          const auto b0 = Clock::now();
          barrier();
          untimed += Clock::now() - b0;
        }
      }
      sync();
      const double elapsed = std::chrono::duration<double>(Clock::now() - t0 - untimed).count();
      const double perCall = o_.iters > 0 ? elapsed / (static_cast<double>(o_.iters) * o_.aggIters) : 0.0;
      const double sec = rankTime(perCall);

      Cell& cell = inPlace ? row.ip : row.oop;
      cell.timeUs = sec * 1e6;
      const double bytes = static_cast<double>(c.param) * ts * (d_.bwOfAllRanks ? job_.nranks : 1);
      cell.algbw = sec > 0 ? bytes / 1e9 / sec : 0;
      cell.busbw = cell.algbw * d_.busFactor(job_.nranks);
      if (o_.check && (!inPlace || d_.inPlaceChecked)) {
        fill();
        callOnce(args);
        sync();
        download(recvBuf, recvOff, c.recv * ts);
        const double wrong =
            static_cast<double>(plan.countWrong(recvBuf.mirror.data() + recvOff, c.recv, rank_, root, c.param));
        cell.wrong = static_cast<int64_t>(allreduce(wrong, ncclSum));
      }
    }
    return row;
  }

  // The first calls of a communicator set up its connections; like nccl-tests' warm-up before the
  // sweep, this keeps that cost out of the first row. Untimed, unchecked, largest and smallest size.
  void prime() {
    const TypeInfo& type = o_.types.front();
    const int root = roots().front();
    for (size_t size : {o_.maxBytes, o_.minBytes}) {
      const Counts c = d_.counts(size / type.size, type.size, job_.nranks, rank_);
      grow(send_, c.send * type.size, regs_[0]);
      grow(recv_, c.recv * type.size, regs_[1]);
      const CallArgs args{
          mem_->ptr(send_, 0), mem_->ptr(recv_, 0), c.param, type.type, ncclSum, root, rank_, job_.nranks, comm_,
          mem_->stream()};
      for (int i = 0; i < std::max(o_.warmupIters, 1); ++i) callOnce(args);
    }
    sync();
    barrier();
  }

  void callOnce(const CallArgs& a) {
    const ncclResult_t r = d_.call(a);
    if (r != ncclSuccess) die(rank_, d_.name, r);
  }

  Job& job_;
  const Options& o_;
  const CollDesc& d_;
  int thread_;
  int rank_;
  int device_;
  ncclComm_t comm_ = nullptr;
  double scratch_ = 0;
  std::unique_ptr<RankMemory> mem_;
  RankMemory::Buffer send_, recv_, inPlace_;
  Registered regs_[3];
};

}  // namespace

int runPerfTool(const CollDesc& desc, int argc, char** argv) {
  Options opts;
  if (auto rc = parseOptions(desc, argc, argv, &opts)) return *rc;
  Launch launch;
  std::string note, error;
  if (!detectLaunch(&launch, &error) || !setupRendezvous(launch, &note, &error)) {
    std::fprintf(stderr, "%s_perf: %s\n", desc.name, error.c_str());
    return 2;
  }
  const int nranks = launch.nprocs * opts.nThreads;
  for (int r : opts.roots) {
    if (desc.rooted && r >= nranks) {
      std::fprintf(stderr, "-r %d: the job has only %d ranks\n", r, nranks);
      return 2;
    }
  }
  Watchdog watchdog(opts.timeoutSec);
  // Before the first NCCL call: the library picks its device backend once per process.
  std::string memError;
  if (!selectProcessMemory(opts.memPattern, launch.procRank * opts.nThreads, opts.nThreads, &memError)) {
    std::fprintf(stderr, "%s_perf: %s\n", desc.name, memError.c_str());
    return 2;
  }
  Job job{desc, opts, launch, {}, nranks, &watchdog, note, std::vector<std::string>(argv, argv + argc)};
  // With NCCL_COMM_ID set every process derives the same id; otherwise this one process makes it
  // and its threads share it.
  const ncclResult_t r = ncclGetUniqueId(&job.id);
  if (r != ncclSuccess) die(launch.procRank * opts.nThreads, "ncclGetUniqueId", r);
  std::vector<std::thread> threads;
  for (int t = 1; t < opts.nThreads; ++t) threads.emplace_back([&job, t] { RankRunner(job, t).run(); });
  RankRunner(job, 0).run();
  for (std::thread& t : threads) t.join();
  return job.exitCode;
}

}  // namespace mixccl::perf
