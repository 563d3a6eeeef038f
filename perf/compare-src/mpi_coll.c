// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
//
// mpi_coll: the MPI reference harness of perf/compare. One source, compiled once per MPI
// (mpicc.openmpi, mpicc.mpich). For each requested collective and each size it runs `-w` untimed
// and `-n` timed out-of-place float/sum operations back to back, takes the slowest rank's mean
// time per operation, checks one further operation's result, and writes one JSON file per
// collective in the schema of the mixccl perf tools (perf/compare documents it).
//
// Sizes follow the perf tools' convention: `bytes` is the largest buffer of the operation
// (allgather/gather: the gathered result; reduce_scatter/scatter/alltoall: the full input), and
// bus bandwidth rescales algorithm bandwidth (bytes / time) by the usual factors for n ranks:
// 2(n-1)/n for allreduce; (n-1)/n for allgather, reduce_scatter, alltoall, gather, scatter;
// 1 for broadcast, reduce and sendrecv.
//
// Usage: mpi_coll -b MIN -e MAX -f FACTOR -n ITERS -w WARMUP -C coll[,coll...] -o DIR
//                 -t TOOLNAME -T shm|tcp [-c 0|1]
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum Coll { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kBroadcast, kReduce, kGather, kScatter, kSendRecv };
static const char* const kCollNames[] = {"all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast",
                                         "reduce",     "gather",     "scatter",        "sendrecv"};
static const int kNumColls = 9;

typedef struct {
  size_t min_bytes, max_bytes;
  double factor;
  int iters, warmup, check;
  const char* out_dir;
  const char* tool;
  const char* transport;
  int want[9];
} Options;

static int rank_, nranks_;

static void usage(void) {
  if (rank_ == 0) {
    fprintf(stderr,
            "usage: mpi_coll -b MIN -e MAX -f FACTOR -n ITERS -w WARMUP -C coll[,coll] -o DIR -t TOOL -T shm|tcp "
            "[-c 0|1]\n");
  }
  MPI_Abort(MPI_COMM_WORLD, 2);
}

static size_t parseSize(const char* s) {
  char* end = NULL;
  double v = strtod(s, &end);
  switch (*end) {
    case 'K':
    case 'k':
      v *= 1024.0;
      break;
    case 'M':
    case 'm':
      v *= 1024.0 * 1024.0;
      break;
    case 'G':
    case 'g':
      v *= 1024.0 * 1024.0 * 1024.0;
      break;
    default:
      break;
  }
  return (size_t)v;
}

static void parseOptions(int argc, char** argv, Options* o) {
  memset(o, 0, sizeof(*o));
  o->min_bytes = 8;
  o->max_bytes = 1 << 20;
  o->factor = 2.0;
  o->iters = 20;
  o->warmup = 5;
  o->check = 1;
  o->out_dir = ".";
  o->tool = "mpi";
  o->transport = "shm";
  int opt;
  while ((opt = getopt(argc, argv, "b:e:f:n:w:c:C:o:t:T:")) != -1) {
    switch (opt) {
      case 'b':
        o->min_bytes = parseSize(optarg);
        break;
      case 'e':
        o->max_bytes = parseSize(optarg);
        break;
      case 'f':
        o->factor = atof(optarg);
        break;
      case 'n':
        o->iters = atoi(optarg);
        break;
      case 'w':
        o->warmup = atoi(optarg);
        break;
      case 'c':
        o->check = atoi(optarg);
        break;
      case 'o':
        o->out_dir = optarg;
        break;
      case 't':
        o->tool = optarg;
        break;
      case 'T':
        o->transport = optarg;
        break;
      case 'C': {
        char* list = strdup(optarg);
        for (char* tok = strtok(list, ","); tok != NULL; tok = strtok(NULL, ",")) {
          int found = 0;
          for (int c = 0; c < kNumColls; ++c) {
            if (strcmp(tok, kCollNames[c]) == 0) o->want[c] = found = 1;
          }
          if (!found) {
            if (rank_ == 0) fprintf(stderr, "mpi_coll: unknown collective '%s'\n", tok);
            usage();
          }
        }
        free(list);
        break;
      }
      default:
        usage();
    }
  }
  if (o->factor <= 1.0 || o->iters < 1 || o->min_bytes == 0 || o->max_bytes < o->min_bytes) usage();
}

static double busFactor(enum Coll c) {
  double n = nranks_;
  switch (c) {
    case kAllReduce:
      return 2.0 * (n - 1) / n;
    case kAllGather:
    case kReduceScatter:
    case kAllToAll:
    case kGather:
    case kScatter:
      return (n - 1) / n;
    default:
      return 1.0;
  }
}

// The input pattern: element i of rank r's input. Small integers keep float sums exact.
static float pattern(int r, size_t i) { return (float)((r + 1) + (int)(i % 13)); }

// Runs one operation of `c` on `bytes` (see the header for the meaning of bytes).
static void runOnce(enum Coll c, size_t bytes, float* send, float* recv) {
  const int root = 0;
  size_t count = bytes / sizeof(float);
  int part = (int)(count / (size_t)nranks_);
  int next = (rank_ + 1) % nranks_, prev = (rank_ + nranks_ - 1) % nranks_;
  switch (c) {
    case kAllReduce:
      MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      break;
    case kAllGather:
      MPI_Allgather(send, part, MPI_FLOAT, recv, part, MPI_FLOAT, MPI_COMM_WORLD);
      break;
    case kReduceScatter:
      MPI_Reduce_scatter_block(send, recv, part, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      break;
    case kAllToAll:
      MPI_Alltoall(send, part, MPI_FLOAT, recv, part, MPI_FLOAT, MPI_COMM_WORLD);
      break;
    case kBroadcast:
      // Out of place in the perf tools' sense: the root sends from `send`, the others receive.
      MPI_Bcast(rank_ == root ? send : recv, (int)count, MPI_FLOAT, root, MPI_COMM_WORLD);
      break;
    case kReduce:
      MPI_Reduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, root, MPI_COMM_WORLD);
      break;
    case kGather:
      MPI_Gather(send, part, MPI_FLOAT, recv, part, MPI_FLOAT, root, MPI_COMM_WORLD);
      break;
    case kScatter:
      MPI_Scatter(send, part, MPI_FLOAT, recv, part, MPI_FLOAT, root, MPI_COMM_WORLD);
      break;
    case kSendRecv:
      MPI_Sendrecv(send, (int)count, MPI_FLOAT, next, 7, recv, (int)count, MPI_FLOAT, prev, 7, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
      break;
  }
}

// Expected value of element i of this rank's output; returns 0 where this rank has no output.
static int expected(enum Coll c, size_t count, size_t i, float* out) {
  size_t part = count / (size_t)nranks_;
  float total = 0;
  for (int r = 0; r < nranks_; ++r) total += pattern(r, i);
  switch (c) {
    case kAllReduce:
      *out = total;
      return i < count;
    case kAllGather:
      *out = pattern((int)(i / part), i % part);
      return i < count;
    case kReduceScatter: {
      size_t g = (size_t)rank_ * part + i;
      float s = 0;
      for (int r = 0; r < nranks_; ++r) s += pattern(r, g);
      *out = s;
      return i < part;
    }
    case kAllToAll:
      *out = pattern((int)(i / part), (size_t)rank_ * part + i % part);
      return i < count;
    case kBroadcast:
      *out = pattern(0, i);
      return rank_ != 0 && i < count;
    case kReduce:
      *out = total;
      return rank_ == 0 && i < count;
    case kGather:
      *out = pattern((int)(i / part), i % part);
      return rank_ == 0 && i < count;
    case kScatter:
      *out = pattern(0, (size_t)rank_ * part + i);
      return i < part;
    case kSendRecv:
      *out = pattern((rank_ + nranks_ - 1) % nranks_, i);
      return i < count;
  }
  return 0;
}

static long long checkOnce(enum Coll c, size_t bytes, float* send, float* recv) {
  size_t count = bytes / sizeof(float);
  for (size_t i = 0; i < count; ++i) send[i] = pattern(rank_, i);
  memset(recv, 0, bytes);
  runOnce(c, bytes, send, recv);
  long long wrong = 0;
  float want;
  for (size_t i = 0; i < count; ++i) {
    if (expected(c, count, i, &want) && recv[i] != want) ++wrong;
  }
  long long total = 0;
  MPI_Allreduce(&wrong, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  return total;
}

static void writeEnvAndHeader(FILE* f, const Options* o, enum Coll c) {
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  fprintf(f, "{\"tool\":\"%s\",\"collective\":\"%s\",\"nranks\":%d,\"host\":\"%s\",\"transport\":\"%s\",", o->tool,
          kCollNames[c], nranks_, host, o->transport);
  fprintf(f, "\"env\":{");
  static const char* const kEnvVars[] = {"MPIR_CVAR_NOLOCAL", "UCX_TLS", "OMPI_MCA_btl", "OMPI_MCA_pml"};
  int first = 1;
  for (size_t k = 0; k < sizeof(kEnvVars) / sizeof(kEnvVars[0]); ++k) {
    const char* v = getenv(kEnvVars[k]);
    if (v == NULL) continue;
    fprintf(f, "%s\"%s\":\"%s\"", first ? "" : ",", kEnvVars[k], v);
    first = 0;
  }
  fprintf(f, "},\"rows\":[");
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks_);
  Options o;
  parseOptions(argc, argv, &o);
  // A row's per-rank block is whole 16-byte units, as nccl-tests and mixccl's perf tools size it,
  // so that their rows and these have the same sizes.
  size_t align = (size_t)nranks_ * 16;
  size_t cap = o.max_bytes + align;
  float* send = (float*)malloc(cap);
  float* recv = (float*)malloc(cap);
  if (send == NULL || recv == NULL) {
    fprintf(stderr, "mpi_coll: rank %d cannot allocate 2 x %zu bytes\n", rank_, cap);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  memset(send, 1, cap);
  memset(recv, 0, cap);

  // Connections and protocol paths are set up lazily by both MPIs: exercise every collective
  // once at a small and a medium size before anything is timed.
  for (int ci = 0; ci < kNumColls; ++ci) {
    if (!o.want[ci]) continue;
    for (int i = 0; i < 3; ++i) runOnce((enum Coll)ci, align, send, recv);
    if (o.max_bytes >= 65536) runOnce((enum Coll)ci, 65536, send, recv);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  for (int ci = 0; ci < kNumColls; ++ci) {
    if (!o.want[ci]) continue;
    enum Coll c = (enum Coll)ci;
    FILE* f = NULL;
    if (rank_ == 0) {
      char path[4096];
      snprintf(path, sizeof(path), "%s/%s.json", o.out_dir, kCollNames[c]);
      f = fopen(path, "w");
      if (f == NULL) {
        fprintf(stderr, "mpi_coll: cannot write %s\n", path);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      writeEnvAndHeader(f, &o, c);
    }
    double bus_sum = 0;
    int rows = 0;
    for (double b = (double)o.min_bytes; b <= (double)o.max_bytes * 1.0001; b *= o.factor) {
      // Per-rank blocks need a multiple of nranks 16-byte units; the whole-buffer collectives one float.
      const int whole = c == kAllReduce || c == kBroadcast || c == kReduce || c == kSendRecv;
      const size_t step = whole ? sizeof(float) : align;
      size_t bytes = (size_t)b / step * step;
      if (bytes == 0) continue;
      for (int i = 0; i < o.warmup; ++i) runOnce(c, bytes, send, recv);
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      for (int i = 0; i < o.iters; ++i) runOnce(c, bytes, send, recv);
      double mine = (MPI_Wtime() - t0) / o.iters, slowest = 0;
      MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      long long wrong = o.check ? checkOnce(c, bytes, send, recv) : -1;
      double algbw = (double)bytes / slowest / 1e9;
      double busbw = algbw * busFactor(c);
      bus_sum += busbw;
      if (rank_ == 0) {
        fprintf(f,
                "%s{\"bytes\":%zu,\"count\":%zu,\"type\":\"float\",\"redop\":\"sum\",\"root\":%d,"
                "\"oop\":{\"time_us\":%.3f,\"algbw\":%.4f,\"busbw\":%.4f,\"wrong\":%lld},\"ip\":null}",
                rows ? "," : "", bytes, bytes / sizeof(float),
                (c == kBroadcast || c == kReduce || c == kGather || c == kScatter) ? 0 : -1, slowest * 1e6, algbw,
                busbw, wrong);
        printf("%-8s %-4s %-15s %12zu B %11.2f us %8.3f GB/s busbw  wrong %lld\n", o.tool, o.transport, kCollNames[c],
               bytes, slowest * 1e6, busbw, wrong);
      }
      ++rows;
    }
    if (rank_ == 0) {
      fprintf(f, "],\"avg_busbw\":%.4f}\n", rows ? bus_sum / rows : 0.0);
      fclose(f);
      fflush(stdout);
    }
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return 0;
}
