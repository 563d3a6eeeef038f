// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
//
// Mixed-vendor acceptance client: a C99 program built against NVIDIA's nccl.h (never ours) and
// the Khronos CL/cl.h, linked to our libnccl.so.2, as an OpenCL application would be. It forks one
// process per entry of --backends (H = host rank, O = OpenCL rank) and runs every collective x
// datatype x operator (reducing ones) x in/out-of-place at a couple of counts on deterministic
// pseudo-random inputs (random bits, not only exact integers), then writes one hash of each rank's
// buffers per case to --hash-out. Run once with H,H,H,H and once with H,O,H,O: the files must be
// identical, i.e. a mixed communicator computes bit for bit what an all-host one does. NaNs are
// hashed canonically (which NaN a sum of two NaNs gives is the compiler's choice).
//
// O ranks set MIXCCL_DEVICE_BACKEND=opencl before their first NCCL call, get the library's OpenCL
// context through dlsym("mixcclOpenclGetContext") (an extension absent from NVIDIA's header), make
// a queue on it, allocate with ncclMemAlloc (SVM), fill with clEnqueueSVMMemcpy and pass the
// queue as the cudaStream_t; results are read back on the same queue. H ranks set
// MIXCCL_DEVICE_BACKEND=host, malloc, and pass stream NULL.
//
// Exit status: 0 done (hashes written), 2 an API call failed or a rank died or hung, 3 bad setup.
#define _GNU_SOURCE
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#include <CL/cl.h>
#include <dlfcn.h>
#include <math.h>
#include <nccl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client_dtypes.h"

enum { C_ALLREDUCE, C_BROADCAST, C_REDUCE, C_ALLGATHER, C_REDUCESCATTER, C_ALLTOALL, C_GATHER, C_SCATTER, C_SENDRECV };
#define NUM_COLLS 9
static const char* const kColls[NUM_COLLS] = {"allreduce", "broadcast", "reduce",  "allgather", "reducescatter",
                                              "alltoall",  "gather",    "scatter", "sendrecv"};
// sum prod max min avg, then a PreMulSum (host-immediate scalar).
#define NUM_OPS 6
static const char* const kOps[NUM_OPS] = {"sum", "prod", "max", "min", "avg", "premulsum"};
static const size_t kCounts[] = {1001, 4099};
#define MAX_RANKS 16

static int reducing(int c) { return c == C_ALLREDUCE || c == C_REDUCE || c == C_REDUCESCATTER; }
static int has_inplace(int c) { return c != C_ALLTOALL && c != C_SENDRECV; }

typedef ncclResult_t (*GetContextFn)(cl_context*, cl_device_id*);

typedef struct {
  int rank, n, device;
  ncclComm_t comm;
  cl_command_queue queue;
  FILE* out;
} Rank;

static uint64_t splitmix(uint64_t* s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Random elements of dt: raw random bits (so NaN, inf, denormals all occur), except that three
// quarters of the float32/float64 elements are of moderate magnitude, so sums and products round
// instead of overflowing.
static void fill_random(int dt, uint8_t* p, size_t elems, uint64_t seed) {
  const size_t es = cl_dtypes[dt].size;
  for (size_t i = 0; i < elems; ++i) {
    uint64_t bits = splitmix(&seed);
    if ((dt == CL_FLOAT32 || dt == CL_FLOAT64) && (bits & 3) != 0) {
      const double mant = (double)(int64_t)(splitmix(&seed) >> 11) / 9007199254740992.0;  // [0, 1)
      const double v = ldexp((bits & 4) ? -mant : mant, (int)((bits >> 8) % 40) - 20);
      if (dt == CL_FLOAT32) {
        const float f = (float)v;
        memcpy(p + i * es, &f, 4);
      } else {
        memcpy(p + i * es, &v, 8);
      }
      continue;
    }
    memcpy(p + i * es, &bits, es);
  }
}

// FNV-1a over the elements, every NaN hashed as the same bytes.
static uint64_t hash_elements(int dt, const uint8_t* p, size_t bytes) {
  const size_t es = cl_dtypes[dt].size;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t off = 0; off < bytes; off += es) {
    static const uint8_t kNan[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    const uint8_t* e = cl_dtypes[dt].is_float && isnan(cl_load(dt, p + off, 0)) ? kNan : p + off;
    for (size_t b = 0; b < es; ++b) h = (h ^ e[b]) * 0x100000001b3ull;
  }
  return h;
}

// Buffer bytes of one rank for one case: send/recv regions out of place; one region (and the
// offsets NCCL defines) in place.
static void layout(int coll, size_t c, int n, int rank, int inplace, size_t* send_b, size_t* recv_b, size_t* send_off,
                   size_t* recv_off) {
  size_t s = c, r = c;
  *send_off = *recv_off = 0;
  if (coll == C_ALLGATHER || coll == C_GATHER) r = c * n, *send_off = inplace ? c * rank : 0;
  if (coll == C_REDUCESCATTER || coll == C_SCATTER) s = c * n, *recv_off = inplace ? c * rank : 0;
  if (coll == C_ALLTOALL) s = r = c * n;
  *send_b = s;
  *recv_b = inplace ? (s > r ? s : r) : r;
  if (inplace) *send_b = 0;
}

static int api(const Rank* rk, const char* what, ncclResult_t r, const char* desc) {
  if (r == ncclSuccess) return 0;
  fprintf(stderr, "rank %d: %s (%s) failed: %s: %s\n", rk->rank, what, desc, ncclGetErrorString(r),
          ncclGetLastError(rk->comm));
  return 1;
}

// The PreMulSum scalar in dt: -2.5 in the float types (exact in every one), -3 or 3 in integers.
static void premul_scalar(int dt, uint8_t out[8]) {
  memset(out, 0, 8);
  const double v = cl_dtypes[dt].is_float ? -2.5 : (cl_dtypes[dt].is_signed ? -3.0 : 3.0);
  if (!cl_store(dt, out, 0, v)) fprintf(stderr, "premul scalar %g not representable in %s\n", v, cl_dtypes[dt].name);
}

static ncclResult_t issue(const Rank* rk, int coll, int dt, int op, size_t count, int root, const void* send,
                          void* recv, cudaStream_t s) {
  const ncclDataType_t t = (ncclDataType_t)dt;
  ncclRedOp_t red = (ncclRedOp_t)(op < 0 ? 0 : op);
  ncclResult_t r = ncclSuccess, d = ncclSuccess;
  if (op == 5) {
    uint8_t scalar[8];
    premul_scalar(dt, scalar);
    r = ncclRedOpCreatePreMulSum(&red, scalar, t, ncclScalarHostImmediate, rk->comm);
    if (r != ncclSuccess) return r;
  }
  switch (coll) {
    case C_ALLREDUCE:
      r = ncclAllReduce(send, recv, count, t, red, rk->comm, s);
      break;
    case C_BROADCAST:
      r = ncclBroadcast(send, recv, count, t, root, rk->comm, s);
      break;
    case C_REDUCE:
      r = ncclReduce(send, recv, count, t, red, root, rk->comm, s);
      break;
    case C_ALLGATHER:
      r = ncclAllGather(send, recv, count, t, rk->comm, s);
      break;
    case C_REDUCESCATTER:
      r = ncclReduceScatter(send, recv, count, t, red, rk->comm, s);
      break;
    case C_ALLTOALL:
      r = ncclAlltoAll(send, recv, count, t, rk->comm, s);
      break;
    case C_GATHER:
      r = ncclGather(send, recv, count, t, root, rk->comm, s);
      break;
    case C_SCATTER:
      r = ncclScatter(send, recv, count, t, root, rk->comm, s);
      break;
    default:
      r = ncclGroupStart();
      if (r == ncclSuccess) r = ncclSend(send, count, t, (rk->rank + 1) % rk->n, rk->comm, s);
      if (r == ncclSuccess) r = ncclRecv(recv, count, t, (rk->rank + rk->n - 1) % rk->n, rk->comm, s);
      d = ncclGroupEnd();
      if (r == ncclSuccess) r = d;
      break;
  }
  if (op == 5) {
    d = ncclRedOpDestroy(red, rk->comm);
    if (r == ncclSuccess) r = d;
  }
  return r;
}

static int copy_in(const Rank* rk, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return 0;
  if (!rk->device) return memcpy(dst, src, bytes) == NULL;
  return clEnqueueSVMMemcpy(rk->queue, CL_FALSE, dst, src, bytes, 0, NULL, NULL) != CL_SUCCESS;
}

static int copy_out(const Rank* rk, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return 0;
  if (!rk->device) return memcpy(dst, src, bytes) == NULL;
  return clEnqueueSVMMemcpy(rk->queue, CL_FALSE, dst, src, bytes, 0, NULL, NULL) != CL_SUCCESS;
}

static int run_cases(Rank* rk, uint8_t* dsend, uint8_t* drecv, size_t max_bytes) {
  uint8_t* in_send = malloc(max_bytes);
  uint8_t* in_recv = malloc(max_bytes);
  uint8_t* got = malloc(max_bytes);
  if (!in_send || !in_recv || !got) return 2;
  const cudaStream_t s = rk->device ? (cudaStream_t)rk->queue : NULL;
  uint64_t case_id = 0;
  int failed = 0;
  for (size_t ci = 0; ci < sizeof(kCounts) / sizeof(kCounts[0]) && !failed; ++ci) {
    for (int coll = 0; coll < NUM_COLLS && !failed; ++coll) {
      for (int dt = 0; dt < CL_NUM_DTYPES && !failed; ++dt) {
        const int op_lo = reducing(coll) ? 0 : -1, op_hi = reducing(coll) ? NUM_OPS : 0;
        for (int op = op_lo; op < op_hi && !failed; ++op) {
          for (int inplace = 0; inplace < (has_inplace(coll) ? 2 : 1) && !failed; ++inplace) {
            ++case_id;
            const size_t count = kCounts[ci], es = cl_dtypes[dt].size;
            const int root = (int)(case_id % (uint64_t)rk->n);
            size_t sb, rb, so, ro;
            layout(coll, count * es, rk->n, rk->rank, inplace, &sb, &rb, &so, &ro);
            const uint64_t seed = case_id * 1000003ull + (uint64_t)rk->rank;
            fill_random(dt, in_send, sb / es, seed);
            fill_random(dt, in_recv, rb / es, seed ^ 0x5555555555555555ull);
            if (copy_in(rk, dsend, in_send, sb) || copy_in(rk, drecv, in_recv, rb)) {
              fprintf(stderr, "rank %d: writing the input failed\n", rk->rank);
              failed = 2;
              break;
            }
            char desc[128];
            snprintf(desc, sizeof(desc), "%s %s %s count %zu %s root %d", kColls[coll], cl_dtypes[dt].name,
                     op >= 0 ? kOps[op] : "-", count, inplace ? "in-place" : "out-of-place", root);
            const void* send = inplace ? drecv + so : dsend;
            void* recv = inplace ? drecv + ro : drecv;
            if (api(rk, "collective", issue(rk, coll, dt, op, count, root, send, recv, s), desc)) {
              failed = 2;
              break;
            }
            // The whole receive region (bytes a collective must not write included), then the
            // send region (which must be unchanged).
            if (copy_out(rk, got, drecv, rb) || copy_out(rk, in_recv, dsend, sb) ||
                (rk->device && clFinish(rk->queue) != CL_SUCCESS)) {
              fprintf(stderr, "rank %d: reading the result failed\n", rk->rank);
              failed = 2;
              break;
            }
            fprintf(rk->out, "%s rank %d recv %016llx send %016llx\n", desc, rk->rank,
                    (unsigned long long)hash_elements(dt, got, rb), (unsigned long long)hash_elements(dt, in_recv, sb));
          }
        }
      }
    }
  }
  free(in_send);
  free(in_recv);
  free(got);
  return failed;
}

static int rank_main(int rank, int n, const char* backends, const char* out_path, int id_rd, int id_wr) {
  Rank rk = {.rank = rank, .n = n, .device = backends[rank] == 'O'};
  // Before the first NCCL call: the backend is chosen once per process.
  setenv("MIXCCL_DEVICE_BACKEND", rk.device ? "opencl" : "host", 1);
  ncclUniqueId id;
  if (rank == 0) {
    if (api(&rk, "ncclGetUniqueId", ncclGetUniqueId(&id), "init")) return 2;
    for (int i = 1; i < n; ++i)
      if (write(id_wr, &id, sizeof(id)) != (ssize_t)sizeof(id)) return 2;
  } else {
    size_t got = 0;
    while (got < sizeof(id)) {
      const ssize_t m = read(id_rd, (char*)&id + got, sizeof(id) - got);
      if (m <= 0) {
        fprintf(stderr, "rank %d: no unique id from rank 0\n", rank);
        return 2;
      }
      got += (size_t)m;
    }
  }
  close(id_rd);
  close(id_wr);
  if (api(&rk, "ncclCommInitRank", ncclCommInitRank(&rk.comm, n, id, rank), rk.device ? "opencl" : "host")) return 2;

  const size_t max_bytes = kCounts[sizeof(kCounts) / sizeof(kCounts[0]) - 1] * 8 * (size_t)n;
  void *dsend = NULL, *drecv = NULL;
  if (rk.device) {
    GetContextFn get_context = (GetContextFn)dlsym(RTLD_DEFAULT, "mixcclOpenclGetContext");
    if (get_context == NULL) {
      fprintf(stderr, "rank %d: the library has no mixcclOpenclGetContext (built without OpenCL?)\n", rank);
      return 3;
    }
    cl_context ctx = NULL;
    cl_device_id dev = NULL;
    if (api(&rk, "mixcclOpenclGetContext", get_context(&ctx, &dev), "setup")) return 2;
    cl_int err = CL_SUCCESS;
    rk.queue = clCreateCommandQueueWithProperties(ctx, dev, NULL, &err);
    if (err != CL_SUCCESS) {
      fprintf(stderr, "rank %d: clCreateCommandQueueWithProperties: %d\n", rank, err);
      return 2;
    }
    if (api(&rk, "ncclMemAlloc", ncclMemAlloc(&dsend, max_bytes), "setup") ||
        api(&rk, "ncclMemAlloc", ncclMemAlloc(&drecv, max_bytes), "setup"))
      return 2;
  } else {
    dsend = malloc(max_bytes);
    drecv = malloc(max_bytes);
    if (!dsend || !drecv) return 2;
  }
  char path[4096];
  snprintf(path, sizeof(path), "%s.rank%d", out_path, rank);
  rk.out = fopen(path, "w");
  if (rk.out == NULL) {
    fprintf(stderr, "rank %d: cannot write %s\n", rank, path);
    return 3;
  }
  int status = run_cases(&rk, dsend, drecv, max_bytes);
  fclose(rk.out);
  ncclResult_t async_err = ncclSuccess;
  if (status == 0 && (api(&rk, "ncclCommGetAsyncError", ncclCommGetAsyncError(rk.comm, &async_err), "teardown") ||
                      api(&rk, "async error", async_err, "teardown")))
    status = 2;
  if (rk.device) {
    ncclMemFree(dsend);
    ncclMemFree(drecv);
    clReleaseCommandQueue(rk.queue);
  } else {
    free(dsend);
    free(drecv);
  }
  if (status == 0 && api(&rk, "ncclCommDestroy", ncclCommDestroy(rk.comm), "teardown")) status = 2;
  return status;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Concatenates the per-rank files into `out` in rank order and removes them.
static int merge(const char* out, int n) {
  FILE* o = fopen(out, "w");
  if (o == NULL) return 3;
  char path[4096], line[512];
  for (int r = 0; r < n; ++r) {
    snprintf(path, sizeof(path), "%s.rank%d", out, r);
    FILE* f = fopen(path, "r");
    if (f == NULL) {
      fclose(o);
      return 2;
    }
    while (fgets(line, sizeof(line), f)) fputs(line, o);
    fclose(f);
    unlink(path);
  }
  fclose(o);
  return 0;
}

int main(int argc, char** argv) {
  const char* backends_arg = "H,H,H,H";
  const char* out_path = NULL;
  double timeout_s = 600;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--backends") == 0 && i + 1 < argc) {
      backends_arg = argv[++i];
    } else if (strcmp(argv[i], "--hash-out") == 0 && i + 1 < argc) {
      out_path = argv[++i];
    } else if (strcmp(argv[i], "--probe-opencl") == 0) {
      // For the CTest script: 0 when an OpenCL platform exists, 77 (skip) when none does.
      cl_uint np = 0;
      return clGetPlatformIDs(0, NULL, &np) == CL_SUCCESS && np > 0 ? 0 : 77;
    } else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc) {
      timeout_s = atof(argv[++i]);
    } else {
      fprintf(stderr, "usage: %s --hash-out FILE [--backends H,O,H,O] [--timeout SECONDS] | --probe-opencl\n", argv[0]);
      return 3;
    }
  }
  char backends[MAX_RANKS + 1];
  int n = 0;
  for (const char* p = backends_arg; *p; ++p) {
    if (*p == ',') continue;
    if ((*p != 'H' && *p != 'O') || n == MAX_RANKS) {
      fprintf(stderr, "--backends: a comma-separated list of H and O (at most %d), not '%s'\n", MAX_RANKS,
              backends_arg);
      return 3;
    }
    backends[n++] = *p;
  }
  backends[n] = '\0';
  if (out_path == NULL || n < 1) {
    fprintf(stderr, "--hash-out FILE and at least one rank are required\n");
    return 3;
  }
  if (cl_selftest() != 0) {
    fprintf(stderr, "datatype codec self-test failed\n");
    return 3;
  }
  // The parent only supervises: it never calls NCCL or OpenCL (neither survives fork()).
  int fds[2];
  if (pipe(fds) != 0) return 3;
  pid_t pids[MAX_RANKS];
  const double t0 = now_s();
  for (int r = 0; r < n; ++r) {
    fflush(NULL);
    pids[r] = fork();
    if (pids[r] < 0) return 2;
    if (pids[r] == 0) _exit(rank_main(r, n, backends, out_path, fds[0], fds[1]));
  }
  close(fds[0]);
  close(fds[1]);
  // A rank that fails leaves its peers waiting for it (until MIXCCL_TIMEOUT): once one failed, the
  // others get a grace period and are then killed.
  int status = 0, left = n;
  double deadline = t0 + timeout_s;
  while (left > 0) {
    int ws = 0;
    const pid_t pid = waitpid(-1, &ws, WNOHANG);
    if (pid > 0) {
      --left;
      int r = 0;
      while (r < n && pids[r] != pid) ++r;
      if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
        fprintf(stderr, "rank %d (%c) %s %d\n", r, backends[r], WIFEXITED(ws) ? "exited with" : "died of signal",
                WIFEXITED(ws) ? WEXITSTATUS(ws) : WTERMSIG(ws));
        if (status == 0) status = WIFEXITED(ws) && WEXITSTATUS(ws) == 3 ? 3 : 2;
        if (deadline > now_s() + 20) deadline = now_s() + 20;
      }
      if (r < n) pids[r] = 0;
      continue;
    }
    if (now_s() > deadline) {
      fprintf(stderr, "client_mixed: ranks still running after %.0f s; killing them\n", now_s() - t0);
      for (int r = 0; r < n; ++r)
        if (pids[r] > 0) kill(pids[r], SIGKILL);
      status = 2;
      deadline = 1e30;  // reap what was killed
    }
    usleep(10000);
  }
  if (status != 0) return status;
  status = merge(out_path, n);
  printf("client_mixed: %s: %d ranks done in %.1f s; hashes in %s\n", backends_arg, n, now_s() - t0, out_path);
  return status;
}
