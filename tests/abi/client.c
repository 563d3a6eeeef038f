// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
//
// Acceptance client: a plain C program built against NVIDIA's own nccl.h (never ours) and linked to
// our libnccl.so.2, as an application would be. It forks N rank processes, runs every collective
// over every datatype, reduction operator, in-place/out-of-place form and a range of counts on
// host (malloc) buffers with stream NULL, and compares every element with a reference computed
// here. It also covers ncclCommSplit and grouped point-to-point (an all-to-all-v).
//
// Exactness: inputs are small integers chosen per datatype so that every partial result any
// reduction order can produce is exactly representable (see make_gen()). Results are therefore
// compared for equality, never with a tolerance.
//
// Processes: the parent is only a supervisor. The tests run in phases (one per collective, then
// split, all-to-all-v and group), each on freshly forked ranks and a fresh communicator, so a
// hang in one phase is reported and the next phase still runs. In each phase child 0 calls
// ncclGetUniqueId and passes the id to the others through a pipe (no library thread exists at
// fork time). The parent kills a phase's ranks on a global deadline, when no case finishes for
// --stall seconds, or when one rank failed and the others do not follow within a grace period.
// Per-rank progress lives in a shared mapping so a hang is reported with the case each rank ran.
//
// Exit status: 0 all checks passed, 1 a result mismatched, 2 an API call failed or a rank died or
// hung, 3 the setup is wrong (not our library, codec self-test failed, bad arguments).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <nccl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client_dtypes.h"

// ---------------------------------------------------------------------------------------------
// Test space

enum {
  C_ALLREDUCE,
  C_BROADCAST,
  C_BCAST,
  C_REDUCE,
  C_ALLGATHER,
  C_REDUCESCATTER,
  C_ALLTOALL,
  C_GATHER,
  C_SCATTER,
  C_SENDRECV,
  C_NUM_COLLS
};
static const char* const kCollNames[C_NUM_COLLS] = {"allreduce",     "broadcast", "bcast",  "reduce",  "allgather",
                                                    "reducescatter", "alltoall",  "gather", "scatter", "sendrecv"};

// Tests that are not one collective call; selectable with --only like the collectives.
enum { X_SPLIT, X_ALLTOALLV, X_GROUP, X_NUM };
static const char* const kExtraNames[X_NUM] = {"split", "alltoallv", "group"};

enum { O_SUM, O_PROD, O_MAX, O_MIN, O_AVG, O_PREMUL_IMM, O_PREMUL_DEV, O_NUM_OPS, O_NONE = -1 };
static const char* const kOpNames[O_NUM_OPS] = {"sum", "prod", "max", "min", "avg", "premulsum_imm", "premulsum_dev"};

static const size_t kLargeCount = 1048573;  // prime, ~1M
static const size_t kSmallCounts[] = {0, 1, 1001};

static int is_reduction(int coll) { return coll == C_ALLREDUCE || coll == C_REDUCE || coll == C_REDUCESCATTER; }
static int is_rooted(int coll) {
  return coll == C_BROADCAST || coll == C_BCAST || coll == C_REDUCE || coll == C_GATHER || coll == C_SCATTER;
}
// NCCL defines an in-place form for these; ncclBcast is in place by nature.
static int has_inplace(int coll) { return coll != C_ALLTOALL && coll != C_SENDRECV && coll != C_BCAST; }

// ---------------------------------------------------------------------------------------------
// Options, shared status, per-rank context

typedef struct {
  int np;
  int quick;
  double timeout_s, grace_s, stall_s;
  unsigned coll_mask, extra_mask, dtype_mask, op_mask;
  size_t counts[16];
  int ncounts;      // 0: the built-in count lists
  int inplace_sel;  // -1 both, else 0 or 1
  int max_print;
  int verbose;
  uint64_t seed;
} Options;

typedef struct {
  volatile long cases, elements, failed_cases, api_errors;
  volatile int finished;
  char current[200];
} RankStatus;

typedef struct {
  const Options* opt;
  int rank, n;
  ncclComm_t comm;
  RankStatus* st;
  long printed;
} Ctx;

typedef struct {
  int coll, dt, op;
  size_t count;
  int inplace, root;
  char desc[160];
} Case;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(int code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(code);
}

// An API call failed: report it with the library's own explanation and count it as a failure.
// The rank carries on; ranks stay in step because every rank runs the same sequence of cases.
static int api_failed(Ctx* ctx, const char* what, ncclResult_t res, const char* desc) {
  const char* last = ctx->comm ? ncclGetLastError(ctx->comm) : ncclGetLastError(NULL);
  fprintf(stderr, "API-ERROR rank=%d %s: %s returned %d (%s): %s\n", ctx->rank, desc, what, (int)res,
          ncclGetErrorString(res), last ? last : "");
  ctx->st->api_errors++;
  return 1;
}

#define API(ctx, desc, call)                                         \
  do {                                                               \
    ncclResult_t res_ = (call);                                      \
    if (res_ != ncclSuccess) api_failed((ctx), #call, res_, (desc)); \
  } while (0)

// ---------------------------------------------------------------------------------------------
// Input generation

enum { G_RANGE, G_PROD, G_SAME };
typedef struct {
  int mode;
  int n;
  double lo, hi;  // G_RANGE: uniform integers in [lo, hi]
  int neg;        // G_PROD: allow -1/-2
  uint64_t seed;
  double kvals[16];  // G_SAME: per-element value, identical on all ranks
  int nk;
  double scalar;  // PreMulSum factor
} Gen;

static uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The value rank r contributes at index i (i indexes that rank's send buffer).
static inline double gen(const Gen* g, int r, size_t i) {
  switch (g->mode) {
    case G_RANGE: {
      uint64_t h = mix64(g->seed ^ mix64(((uint64_t)(unsigned)r << 44) ^ (uint64_t)i));
      return g->lo + (double)(h % (uint64_t)(g->hi - g->lo + 1));
    }
    case G_PROD: {
      // At most two ranks hold a 2 at any index (for n <= 10), so |product| <= 4: exact everywhere.
      double v = ((i * 7 + (size_t)r) % 5 == 0) ? 2 : 1;
      if (g->neg && (mix64(g->seed ^ ((uint64_t)(unsigned)r << 44) ^ (uint64_t)i) & 1)) v = -v;
      return v;
    }
    default:
      return g->kvals[mix64(g->seed ^ (uint64_t)i) % (uint64_t)g->nk];
  }
}

static int is_pow2(int n) { return n > 0 && (n & (n - 1)) == 0; }

// Float average with n not a power of two. NCCL computes it as a pre-multiplied sum: each input is
// multiplied by 1/n rounded to a scalar format, then the products are summed. Every rank therefore
// contributes the same x = n*k, and k is accepted only if x*s lands unambiguously (well inside half
// a spacing) on k for every scalar rounding s an implementation plausibly uses: the element type
// itself for 16-bit and wider types, binary16 for the FP8 types (NCCL keeps their scalar in half),
// and float32/float64 arithmetic where that is at least as precise as the type. The sum of n copies of k is then exact
// (x is representable) in any order.
static int avg_candidates(int dt, int n, double* out, int max_out) {
  double scalars[3];
  int ns = 0;
  scalars[ns++] = cl_round(dt == CL_E4M3 || dt == CL_E5M2 ? CL_FLOAT16 : dt, 1.0 / n);
  if (dt != CL_FLOAT64) scalars[ns++] = (double)(float)(1.0 / n);  // float32 arithmetic
  scalars[ns++] = 1.0 / n;                                         // float64 arithmetic
  int found = 0;
  for (int k = 1; k * n <= (int)cl_dtypes[dt].exact_int && k <= 64 && found + 2 <= max_out; ++k) {
    int ok = 1;
    for (int s = 0; s < ns && ok; ++s) {
      double p = (double)(n * k) * scalars[s];
      if (p == k) continue;
      double gap = p > k ? cl_next_up(dt, k) - k : k - cl_next_down(dt, k);
      if (!(fabs(p - k) < 0.45 * gap)) ok = 0;
    }
    if (ok) {
      out[found++] = (double)(n * k);
      out[found++] = -(double)(n * k);
    }
  }
  return found;
}

// Chooses inputs so every partial result of any reduction order is exact (budget B = the largest
// run of consecutive exact integers of the type): sums use |x| <= B/n per rank; pre-multiplied
// sums scale by 0.5 (floats: multiples of 0.5 up to B/2 stay exact) or by 2 (integers, with half
// the budget); products are +-1/+-2 with at most two 2s; max/min and data movement use the whole
// exact range. Returns 0 when no exact case exists (reported as a skip).
static int make_gen(const Ctx* ctx, const Case* c, Gen* g) {
  const ClDtype* d = &cl_dtypes[c->dt];
  int n = ctx->n;
  memset(g, 0, sizeof(*g));
  g->n = n;
  g->seed = mix64(ctx->opt->seed ^ ((uint64_t)c->coll << 56) ^ ((uint64_t)c->dt << 48) ^ ((uint64_t)(c->op + 1) << 40) ^
                  ((uint64_t)c->inplace << 36) ^ (uint64_t)c->count);
  g->mode = G_RANGE;
  double b = d->exact_int, a;
  switch (c->op) {
    case O_PROD:
      g->mode = G_PROD;
      g->neg = d->is_signed;
      return 1;
    case O_AVG:
      if (d->is_float && !is_pow2(n)) {
        g->mode = G_SAME;
        g->nk = avg_candidates(c->dt, n, g->kvals, 16);
        return g->nk > 0;
      }
      a = floor(b / n);
      break;
    case O_SUM:
      a = floor(b / n);
      break;
    case O_PREMUL_IMM:
    case O_PREMUL_DEV:
      g->scalar = d->is_float ? 0.5 : 2.0;
      a = d->is_float ? floor(b / n) : floor(b / (2.0 * n));
      break;
    default:  // max, min, data movement
      a = b;
      break;
  }
  if (a > 1000) a = 1000;
  if (a < 1) a = 1;
  g->lo = d->is_signed ? -a : 0;
  g->hi = a;
  return 1;
}

static double reduce_ref(const Case* c, const Gen* g, size_t idx) {
  int n = g->n;
  double acc = gen(g, 0, idx);
  switch (c->op) {
    case O_SUM:
      for (int q = 1; q < n; ++q) acc += gen(g, q, idx);
      return acc;
    case O_PROD:
      for (int q = 1; q < n; ++q) acc *= gen(g, q, idx);
      return acc;
    case O_MAX:
      for (int q = 1; q < n; ++q) acc = fmax(acc, gen(g, q, idx));
      return acc;
    case O_MIN:
      for (int q = 1; q < n; ++q) acc = fmin(acc, gen(g, q, idx));
      return acc;
    case O_AVG:
      for (int q = 1; q < n; ++q) acc += gen(g, q, idx);
      // Integers: the sum divided by n, truncated toward zero (what NCCL computes).
      return cl_dtypes[c->dt].is_float ? acc / n : trunc(acc / n);
    default:  // pre-multiplied sum
      acc *= g->scalar;
      for (int q = 1; q < n; ++q) acc += g->scalar * gen(g, q, idx);
      return acc;
  }
}

// ---------------------------------------------------------------------------------------------
// Buffers with guard zones on both sides

enum { kGuard = 64 };
static const unsigned char kGuardByte = 0x5a, kUnwrittenByte = 0xa5;

typedef struct {
  unsigned char* raw;
  size_t bytes;
} Buf;

static void* buf_alloc(Buf* b, size_t elems, size_t esize) {
  b->bytes = elems * esize;
  b->raw = (unsigned char*)malloc(b->bytes + 2 * kGuard);
  if (!b->raw) die(2, "out of memory allocating %zu bytes", b->bytes);
  memset(b->raw, kGuardByte, kGuard);
  memset(b->raw + kGuard, kUnwrittenByte, b->bytes);
  memset(b->raw + kGuard + b->bytes, kGuardByte, kGuard);
  return b->raw + kGuard;
}

static int buf_guards_ok(const Buf* b) {
  if (!b->raw) return 1;
  for (size_t i = 0; i < kGuard; ++i)
    if (b->raw[i] != kGuardByte || b->raw[kGuard + b->bytes + i] != kGuardByte) return 0;
  return 1;
}

static void buf_free(Buf* b) {
  free(b->raw);
  b->raw = NULL;
}

// ---------------------------------------------------------------------------------------------
// Checking

typedef struct {
  Ctx* ctx;
  const Case* c;
  long mismatches;
} Checker;

static void mismatch(Checker* k, const char* where, size_t idx, double got, double expected) {
  Ctx* ctx = k->ctx;
  if (k->mismatches++ < 3 && ctx->printed < ctx->opt->max_print) {
    ctx->printed++;
    fprintf(stderr, "MISMATCH %s rank=%d %s index=%zu got=%.17g expected=%.17g\n", k->c->desc, ctx->rank, where, idx,
            got, expected);
  }
}

static void fill_input(Ctx* ctx, const Case* c, const Gen* g, void* p, size_t elems) {
  for (size_t j = 0; j < elems; ++j)
    if (!cl_store(c->dt, p, j, gen(g, ctx->rank, j)))
      die(3, "test bug: input %g not exact in %s (%s)", gen(g, ctx->rank, j), cl_dtypes[c->dt].name, c->desc);
}

static void check_unchanged_input(Checker* k, const Gen* g, const void* p, size_t elems) {
  for (size_t j = 0; j < elems; ++j) {
    double got = cl_load(k->c->dt, p, j), want = gen(g, k->ctx->rank, j);
    if (got != want) mismatch(k, "sendbuff-modified", j, got, want);
  }
}

// Expected value of element j of this rank's receive region.
static double expected_at(const Ctx* ctx, const Case* c, const Gen* g, size_t j) {
  int r = ctx->rank, n = ctx->n;
  size_t cnt = c->count;
  switch (c->coll) {
    case C_ALLREDUCE:
    case C_REDUCE:
      return reduce_ref(c, g, j);
    case C_REDUCESCATTER:
      return reduce_ref(c, g, (size_t)r * cnt + j);
    case C_BROADCAST:
    case C_BCAST:
      return gen(g, c->root, j);
    case C_ALLGATHER:
    case C_GATHER:
      return gen(g, (int)(j / cnt), j % cnt);
    case C_ALLTOALL:
      return gen(g, (int)(j / cnt), (size_t)r * cnt + j % cnt);
    case C_SCATTER:
      return gen(g, c->root, (size_t)r * cnt + j);
    default:
      return gen(g, (r - 1 + n) % n, j);  // sendrecv ring: from the left neighbour
  }
}

static void check_result(Checker* k, const Gen* g, const void* recv, size_t elems) {
  const Case* c = k->c;
  for (size_t j = 0; j < elems; ++j) {
    double want = expected_at(k->ctx, c, g, j), got = cl_load(c->dt, recv, j);
    if (got != want) mismatch(k, "recvbuff", j, got, want);
  }
}

// ---------------------------------------------------------------------------------------------
// One collective case

static ncclResult_t call_coll(Ctx* ctx, const Case* c, const void* send, void* recv, ncclRedOp_t op) {
  ncclDataType_t dt = (ncclDataType_t)c->dt;
  cudaStream_t s = (cudaStream_t)0;
  int r = ctx->rank, n = ctx->n;
  switch (c->coll) {
    case C_ALLREDUCE:
      return ncclAllReduce(send, recv, c->count, dt, op, ctx->comm, s);
    case C_BROADCAST:
      return ncclBroadcast(send, recv, c->count, dt, c->root, ctx->comm, s);
    case C_BCAST:
      return ncclBcast(recv, c->count, dt, c->root, ctx->comm, s);
    case C_REDUCE:
      return ncclReduce(send, recv, c->count, dt, op, c->root, ctx->comm, s);
    case C_ALLGATHER:
      return ncclAllGather(send, recv, c->count, dt, ctx->comm, s);
    case C_REDUCESCATTER:
      return ncclReduceScatter(send, recv, c->count, dt, op, ctx->comm, s);
    case C_ALLTOALL:
      return ncclAlltoAll(send, recv, c->count, dt, ctx->comm, s);
    case C_GATHER:
      return ncclGather(send, recv, c->count, dt, c->root, ctx->comm, s);
    case C_SCATTER:
      return ncclScatter(send, recv, c->count, dt, c->root, ctx->comm, s);
    default: {
      ncclResult_t first = ncclGroupStart();
      if (first != ncclSuccess) return first;
      ncclResult_t a = ncclSend(send, c->count, dt, (r + 1) % n, ctx->comm, s);
      ncclResult_t b = ncclRecv(recv, c->count, dt, (r - 1 + n) % n, ctx->comm, s);
      ncclResult_t e = ncclGroupEnd();
      return a != ncclSuccess ? a : b != ncclSuccess ? b : e;
    }
  }
}

static void describe(Case* c) {
  int m = snprintf(c->desc, sizeof(c->desc), "%s dtype=%s", kCollNames[c->coll], cl_dtypes[c->dt].name);
  if (c->op != O_NONE) m += snprintf(c->desc + m, sizeof(c->desc) - m, " op=%s", kOpNames[c->op]);
  m += snprintf(c->desc + m, sizeof(c->desc) - m, " count=%zu inplace=%d", c->count, c->inplace);
  if (is_rooted(c->coll)) snprintf(c->desc + m, sizeof(c->desc) - m, " root=%d", c->root);
}

static void run_case(Ctx* ctx, Case* c) {
  int r = ctx->rank, n = ctx->n;
  size_t cnt = c->count, es = cl_dtypes[c->dt].size, nc = (size_t)n * cnt;
  describe(c);
  snprintf(ctx->st->current, sizeof(ctx->st->current), "%s", c->desc);
  Gen g;
  if (!make_gen(ctx, c, &g)) {
    if (r == 0 && ctx->opt->verbose) printf("skip (no exact inputs exist): %s\n", c->desc);
    return;
  }
  if (ctx->opt->verbose > 1 && r == 0) printf("case %s\n", c->desc);

  // Layout: element counts of this rank's send and receive regions, whether each is checked, and
  // for the in-place forms where they sit in one shared allocation.
  size_t send_n = 0, recv_n = 0;
  int root = c->root, is_root = r == root, send_used = 1, recv_used = 1;
  switch (c->coll) {
    case C_ALLREDUCE:
      send_n = recv_n = cnt;
      break;
    case C_BROADCAST:
      send_n = recv_n = cnt;
      break;
    case C_BCAST:
      send_n = 0;
      recv_n = cnt;
      send_used = 0;
      break;
    case C_REDUCE:
      send_n = cnt;
      recv_n = cnt;
      recv_used = is_root;
      break;
    case C_ALLGATHER:
      send_n = cnt;
      recv_n = nc;
      break;
    case C_REDUCESCATTER:
      send_n = nc;
      recv_n = cnt;
      break;
    case C_ALLTOALL:
      send_n = recv_n = nc;
      break;
    case C_GATHER:
      send_n = cnt;
      recv_n = nc;
      recv_used = is_root;
      break;
    case C_SCATTER:
      send_n = nc;
      recv_n = cnt;
      send_used = is_root;
      break;
    default:
      send_n = recv_n = cnt;
      break;
  }

  Buf bs = {0}, br = {0};
  void *send = NULL, *recv = NULL;
  int inplace_here = c->inplace;
  // Gather/Scatter are in place only at the root; the other ranks use ordinary buffers.
  if ((c->coll == C_GATHER || c->coll == C_SCATTER) && !is_root) inplace_here = 0;
  // Reduce in place is sendbuff == recvbuff on every rank, root or not (only the root's result
  // is defined, so recv_used still limits the check to the root).
  if (c->coll == C_BCAST) {
    recv = buf_alloc(&br, cnt, es);
    fill_input(ctx, c, &g, recv, cnt);
  } else if (inplace_here) {
    switch (c->coll) {
      case C_ALLREDUCE:
      case C_BROADCAST:
      case C_REDUCE:
        send = recv = buf_alloc(&br, cnt, es);
        fill_input(ctx, c, &g, send, cnt);
        break;
      case C_ALLGATHER:
        recv = buf_alloc(&br, nc, es);
        send = (char*)recv + (size_t)r * cnt * es;
        fill_input(ctx, c, &g, send, cnt);
        break;
      case C_GATHER:
        recv = buf_alloc(&br, nc, es);
        send = (char*)recv + (size_t)root * cnt * es;
        fill_input(ctx, c, &g, send, cnt);
        break;
      case C_REDUCESCATTER:
        send = buf_alloc(&br, nc, es);
        recv = (char*)send + (size_t)r * cnt * es;
        fill_input(ctx, c, &g, send, nc);
        break;
      default:  // scatter at the root
        send = buf_alloc(&br, nc, es);
        recv = (char*)send + (size_t)root * cnt * es;
        fill_input(ctx, c, &g, send, nc);
        break;
    }
  } else {
    // Buffers a rank does not use are passed as NULL, which NCCL documents as allowed.
    if (send_used) {
      send = buf_alloc(&bs, send_n, es);
      fill_input(ctx, c, &g, send, send_n);
    }
    if (recv_used) recv = buf_alloc(&br, recv_n, es);
  }

  // The operator: a built-in one, or a PreMulSum created for this case.
  ncclRedOp_t op = ncclSum;
  int created = 0;
  static unsigned char dev_scalar[8];
  unsigned char imm_scalar[8];
  ncclResult_t res = ncclSuccess;
  if (c->op >= O_SUM && c->op <= O_AVG) {
    static const ncclRedOp_t kBuiltin[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
    op = kBuiltin[c->op];
  } else if (c->op == O_PREMUL_IMM) {
    cl_store(c->dt, imm_scalar, 0, g.scalar);
    res = ncclRedOpCreatePreMulSum(&op, imm_scalar, (ncclDataType_t)c->dt, ncclScalarHostImmediate, ctx->comm);
    memset(imm_scalar, 0, sizeof(imm_scalar));  // must have been read already
    created = res == ncclSuccess;
  } else if (c->op == O_PREMUL_DEV) {
    // A "device" scalar is read when the collective runs, not when the operator is created: the
    // value written now is a decoy, replaced before the call.
    cl_store(c->dt, dev_scalar, 0, 3.0);
    res = ncclRedOpCreatePreMulSum(&op, dev_scalar, (ncclDataType_t)c->dt, ncclScalarDevice, ctx->comm);
    cl_store(c->dt, dev_scalar, 0, g.scalar);
    created = res == ncclSuccess;
  }
  if (res != ncclSuccess) {
    api_failed(ctx, "ncclRedOpCreatePreMulSum", res, c->desc);
  } else {
    res = call_coll(ctx, c, send, recv, op);
    if (res != ncclSuccess) api_failed(ctx, kCollNames[c->coll], res, c->desc);
  }
  if (created) {
    ncclResult_t d = ncclRedOpDestroy(op, ctx->comm);
    if (d != ncclSuccess) api_failed(ctx, "ncclRedOpDestroy", d, c->desc);
  }

  Checker k = {ctx, c, 0};
  if (res == ncclSuccess) {
    if (recv_used && recv) check_result(&k, &g, recv, recv_n);
    if (!inplace_here && send_used && send) check_unchanged_input(&k, &g, send, send_n);
    if (!buf_guards_ok(&bs) || !buf_guards_ok(&br)) mismatch(&k, "guard-zone-overwritten", 0, 0, 0);
    ctx->st->elements += (long)(recv_used ? recv_n : 0);
  }
  if (k.mismatches) {
    ctx->st->failed_cases++;
    if (k.mismatches > 3 && ctx->printed < ctx->opt->max_print)
      fprintf(stderr, "MISMATCH %s rank=%d: %ld mismatching elements in all\n", c->desc, r, k.mismatches);
  }
  ctx->st->cases++;
  buf_free(&bs);
  buf_free(&br);
}

// ---------------------------------------------------------------------------------------------
// The sweep over collectives

static int selected_dt(const Options* o, int dt) { return (o->dtype_mask >> dt) & 1; }
static int selected_op(const Options* o, int op) { return (o->op_mask >> op) & 1; }

// The ~1M count runs a subset, as the full cross product would take too long on a small machine.
// Reductions: every datatype with sum (both forms), and every operator for float32 and int32
// (out of place). Data movement: element sizes 1, 2, 4 and 8. --quick keeps out-of-place sum /
// data movement on a few datatypes only.
static int large_selected(const Options* o, int dt, int op, int inplace) {
  int wide = dt == CL_FLOAT32 || dt == CL_INT32;
  if (o->quick) {
    if (inplace || (op != O_NONE && op != O_SUM)) return 0;
    if (op == O_NONE) return dt == CL_FLOAT32;
    return dt == CL_FLOAT32 || dt == CL_BFLOAT16 || dt == CL_E5M2 || dt == CL_UINT8;
  }
  if (op == O_NONE) return dt == CL_UINT8 || dt == CL_FLOAT16 || dt == CL_FLOAT32 || dt == CL_FLOAT64;
  if (op == O_SUM) return 1;
  return wide && !inplace;
}

static void sweep_coll(Ctx* ctx, int coll) {
  const Options* o = ctx->opt;
  int n = ctx->n, serial = 0;
  size_t counts[20];
  int ncounts = 0;
  if (o->ncounts) {
    for (int i = 0; i < o->ncounts; ++i) counts[ncounts++] = o->counts[i];
  } else {
    for (size_t i = 0; i < sizeof(kSmallCounts) / sizeof(kSmallCounts[0]); ++i) counts[ncounts++] = kSmallCounts[i];
    counts[ncounts++] = kLargeCount;
  }
  int nops = is_reduction(coll) ? O_NUM_OPS : 1;
  for (int ci = 0; ci < ncounts; ++ci) {
    size_t count = counts[ci];
    int large = !o->ncounts && count == kLargeCount;
    for (int dt = 0; dt < CL_NUM_DTYPES; ++dt) {
      if (!selected_dt(o, dt)) continue;
      for (int oi = 0; oi < nops; ++oi) {
        int op = is_reduction(coll) ? oi : O_NONE;
        if (op != O_NONE && !selected_op(o, op)) continue;
        for (int inplace = 0; inplace <= 1; ++inplace) {
          if (inplace && !has_inplace(coll)) continue;
          if (o->inplace_sel >= 0 && inplace != o->inplace_sel) continue;
          if (large && !large_selected(o, dt, op, inplace)) continue;
          if (o->quick && !large && inplace && count != 1001) continue;
          Case c = {.coll = coll, .dt = dt, .op = op, .count = count, .inplace = inplace};
          c.root = is_rooted(coll) ? (serial++ % n) : 0;
          run_case(ctx, &c);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Communicator split

static void allreduce_check_int(Ctx* ctx, ncclComm_t comm, const int* members, int size, const char* desc) {
  enum { kCount = 37 };
  int32_t send[kCount], recv[kCount];
  int me_old = ctx->rank;
  for (int j = 0; j < kCount; ++j) send[j] = (me_old + 1) * 1000 + j;
  Ctx sub = *ctx;
  sub.comm = comm;
  ncclResult_t res = ncclAllReduce(send, recv, kCount, ncclInt32, ncclSum, comm, (cudaStream_t)0);
  if (res != ncclSuccess) {
    api_failed(&sub, "ncclAllReduce on split comm", res, desc);
    return;
  }
  Case c = {.coll = C_ALLREDUCE, .dt = CL_INT32, .op = O_SUM};
  snprintf(c.desc, sizeof(c.desc), "%s allreduce", desc);
  Checker k = {ctx, &c, 0};
  for (int j = 0; j < kCount; ++j) {
    long want = 0;
    for (int m = 0; m < size; ++m) want += (long)(members[m] + 1) * 1000 + j;
    if (recv[j] != want) mismatch(&k, "recvbuff", (size_t)j, recv[j], (double)want);
  }
  // AllGather of the old rank shows the new rank order directly.
  int32_t mine = me_old, all[64];
  res = ncclAllGather(&mine, all, 1, ncclInt32, comm, (cudaStream_t)0);
  if (res != ncclSuccess) {
    api_failed(&sub, "ncclAllGather on split comm", res, desc);
  } else {
    snprintf(c.desc, sizeof(c.desc), "%s allgather-of-old-ranks", desc);
    for (int m = 0; m < size; ++m)
      if (all[m] != members[m]) mismatch(&k, "recvbuff", (size_t)m, all[m], members[m]);
  }
  if (k.mismatches) ctx->st->failed_cases++;
  ctx->st->cases++;
}

static void check_comm_shape(Ctx* ctx, ncclComm_t comm, int want_rank, int want_size, const char* desc) {
  int got_size = -1, got_rank = -1;
  API(ctx, desc, ncclCommCount(comm, &got_size));
  API(ctx, desc, ncclCommUserRank(comm, &got_rank));
  if (got_size != want_size || got_rank != want_rank) {
    fprintf(stderr, "MISMATCH %s rank=%d: new rank/size %d/%d, expected %d/%d\n", desc, ctx->rank, got_rank, got_size,
            want_rank, want_size);
    ctx->st->failed_cases++;
  }
}

static void test_split(Ctx* ctx) {
  int r = ctx->rank, n = ctx->n;
  char desc[96];
  // Colour by parity, key = -rank: the new order is the old one reversed within each colour.
  snprintf(desc, sizeof(desc), "split color=rank%%2 key=-rank");
  snprintf(ctx->st->current, sizeof(ctx->st->current), "%s", desc);
  int members[64], size = 0, new_rank = -1;
  for (int q = n - 1; q >= 0; --q)
    if (q % 2 == r % 2) {
      if (q == r) new_rank = size;
      members[size++] = q;
    }
  ncclComm_t sub = NULL;
  ncclResult_t res = ncclCommSplit(ctx->comm, r % 2, -r, &sub, NULL);
  if (res != ncclSuccess) {
    api_failed(ctx, "ncclCommSplit", res, desc);
  } else if (!sub) {
    fprintf(stderr, "MISMATCH %s rank=%d: got a NULL communicator\n", desc, r);
    ctx->st->failed_cases++;
  } else {
    check_comm_shape(ctx, sub, new_rank, size, desc);
    allreduce_check_int(ctx, sub, members, size, desc);
    API(ctx, desc, ncclCommFinalize(sub));
    API(ctx, desc, ncclCommDestroy(sub));
  }

  // The last rank opts out with NCCL_SPLIT_NOCOLOR and must get NULL back; the rest keep order.
  snprintf(desc, sizeof(desc), "split last-rank-NOCOLOR key=rank");
  snprintf(ctx->st->current, sizeof(ctx->st->current), "%s", desc);
  int out = r == n - 1;
  sub = (ncclComm_t)(uintptr_t)0x1;  // must be overwritten either way
  res = ncclCommSplit(ctx->comm, out ? NCCL_SPLIT_NOCOLOR : 7, r, &sub, NULL);
  if (res != ncclSuccess) {
    api_failed(ctx, "ncclCommSplit(NOCOLOR)", res, desc);
  } else if (out) {
    if (sub != NULL) {
      fprintf(stderr, "MISMATCH %s rank=%d: NCCL_SPLIT_NOCOLOR returned %p, expected NULL\n", desc, r, (void*)sub);
      ctx->st->failed_cases++;
    }
    ctx->st->cases++;
  } else if (sub == NULL || sub == (ncclComm_t)(uintptr_t)0x1) {
    fprintf(stderr, "MISMATCH %s rank=%d: no communicator returned\n", desc, r);
    ctx->st->failed_cases++;
  } else {
    for (int q = 0; q < n - 1; ++q) members[q] = q;
    check_comm_shape(ctx, sub, r, n - 1, desc);
    allreduce_check_int(ctx, sub, members, n - 1, desc);
    API(ctx, desc, ncclCommFinalize(sub));
    API(ctx, desc, ncclCommDestroy(sub));
  }
}

// ---------------------------------------------------------------------------------------------
// All-to-all-v from grouped send/recv, per-pair counts including 0 and self

static size_t a2av_count(int src, int dst, int salt, size_t base) {
  return (size_t)((src * 3 + dst * 5 + salt) % 4) * base;
}

static void test_alltoallv(Ctx* ctx) {
  static const int kDts[] = {CL_INT32, CL_FLOAT16, CL_UINT8, CL_FLOAT64, CL_E4M3};
  static const size_t kBases[] = {1, 777};
  int r = ctx->rank, n = ctx->n;
  for (size_t di = 0; di < sizeof(kDts) / sizeof(kDts[0]); ++di) {
    int dt = kDts[di];
    if (!selected_dt(ctx->opt, dt)) continue;
    for (size_t bi = 0; bi < sizeof(kBases) / sizeof(kBases[0]); ++bi) {
      size_t base = kBases[bi], es = cl_dtypes[dt].size;
      int salt = (int)(di + bi);
      Case c = {.coll = C_SENDRECV, .dt = dt, .op = O_NONE, .count = base};
      snprintf(c.desc, sizeof(c.desc), "alltoallv dtype=%s base=%zu", cl_dtypes[dt].name, base);
      snprintf(ctx->st->current, sizeof(ctx->st->current), "%s", c.desc);
      Gen g;
      make_gen(ctx, &c, &g);
      size_t send_total = 0, recv_total = 0;
      for (int p = 0; p < n; ++p) {
        send_total += a2av_count(r, p, salt, base);
        recv_total += a2av_count(p, r, salt, base);
      }
      Buf bs = {0}, br = {0};
      char* send = (char*)buf_alloc(&bs, send_total, es);
      char* recv = (char*)buf_alloc(&br, recv_total, es);
      // Element j of the block for peer p is gen(rank, p<<32 | j): unique per (src, dst, j).
      size_t off = 0;
      for (int p = 0; p < n; ++p)
        for (size_t j = 0; j < a2av_count(r, p, salt, base); ++j, ++off)
          cl_store(dt, send, off, gen(&g, r, ((size_t)p << 32) | j));
      ncclResult_t res = ncclGroupStart(), first = res;
      size_t soff = 0, roff = 0;
      for (int p = 0; p < n; ++p) {
        size_t sc = a2av_count(r, p, salt, base), rc = a2av_count(p, r, salt, base);
        res = ncclSend(send + soff * es, sc, (ncclDataType_t)dt, p, ctx->comm, (cudaStream_t)0);
        if (first == ncclSuccess) first = res;
        res = ncclRecv(recv + roff * es, rc, (ncclDataType_t)dt, p, ctx->comm, (cudaStream_t)0);
        if (first == ncclSuccess) first = res;
        soff += sc;
        roff += rc;
      }
      res = ncclGroupEnd();
      if (first == ncclSuccess) first = res;
      Checker k = {ctx, &c, 0};
      if (first != ncclSuccess) {
        api_failed(ctx, "grouped ncclSend/ncclRecv", first, c.desc);
      } else {
        roff = 0;
        for (int p = 0; p < n; ++p)
          for (size_t j = 0; j < a2av_count(p, r, salt, base); ++j, ++roff) {
            double want = gen(&g, p, ((size_t)r << 32) | j), got = cl_load(dt, recv, roff);
            if (got != want) mismatch(&k, "recvbuff", roff, got, want);
          }
        if (!buf_guards_ok(&bs) || !buf_guards_ok(&br)) mismatch(&k, "guard-zone-overwritten", 0, 0, 0);
      }
      if (k.mismatches) ctx->st->failed_cases++;
      ctx->st->cases++;
      buf_free(&bs);
      buf_free(&br);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Several different collectives fused in one group

static void test_group(Ctx* ctx) {
  int r = ctx->rank, n = ctx->n;
  enum { kParts = 4 };
  Case cs[kParts] = {
      {.coll = C_ALLREDUCE, .dt = CL_INT32, .op = O_SUM, .count = 1001},
      {.coll = C_BROADCAST, .dt = CL_FLOAT32, .op = O_NONE, .count = 513, .root = n - 1},
      {.coll = C_ALLGATHER, .dt = CL_BFLOAT16, .op = O_NONE, .count = 33},
      {.coll = C_REDUCESCATTER, .dt = CL_FLOAT64, .op = O_MAX, .count = 257},
  };
  Gen gs[kParts];
  Buf bs[kParts], br[kParts];
  void *send[kParts], *recv[kParts];
  size_t send_n[kParts], recv_n[kParts];
  snprintf(ctx->st->current, sizeof(ctx->st->current), "group of 4 collectives");
  for (int i = 0; i < kParts; ++i) {
    describe(&cs[i]);
    snprintf(cs[i].desc + strlen(cs[i].desc), sizeof(cs[i].desc) - strlen(cs[i].desc), " (in a group)");
    make_gen(ctx, &cs[i], &gs[i]);
    size_t c = cs[i].count, nc = c * (size_t)n;
    send_n[i] = cs[i].coll == C_REDUCESCATTER ? nc : c;
    recv_n[i] = cs[i].coll == C_ALLGATHER ? nc : c;
    send[i] = buf_alloc(&bs[i], send_n[i], cl_dtypes[cs[i].dt].size);
    recv[i] = buf_alloc(&br[i], recv_n[i], cl_dtypes[cs[i].dt].size);
    fill_input(ctx, &cs[i], &gs[i], send[i], send_n[i]);
  }
  static const ncclRedOp_t kOps[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
  ncclResult_t res = ncclGroupStart(), first = res;
  for (int i = 0; i < kParts; ++i) {
    res = call_coll(ctx, &cs[i], send[i], recv[i], cs[i].op >= 0 ? kOps[cs[i].op] : ncclSum);
    if (first == ncclSuccess) first = res;
  }
  res = ncclGroupEnd();
  if (first == ncclSuccess) first = res;
  for (int i = 0; i < kParts; ++i) {
    Checker k = {ctx, &cs[i], 0};
    if (first == ncclSuccess) {
      check_result(&k, &gs[i], recv[i], recv_n[i]);
      check_unchanged_input(&k, &gs[i], send[i], send_n[i]);
      if (!buf_guards_ok(&bs[i]) || !buf_guards_ok(&br[i])) mismatch(&k, "guard-zone-overwritten", 0, 0, 0);
    }
    if (k.mismatches) ctx->st->failed_cases++;
    ctx->st->cases++;
    buf_free(&bs[i]);
    buf_free(&br[i]);
  }
  if (first != ncclSuccess) api_failed(ctx, "grouped collectives", first, "group of 4 collectives");
  (void)r;
}

// ---------------------------------------------------------------------------------------------
// Rank process

static int rank_main(const Options* o, unsigned coll_mask, unsigned extra_mask, int rank, int id_fd_read,
                     int id_fd_write, RankStatus* st) {
  Ctx ctx = {.opt = o, .rank = rank, .n = o->np, .st = st};
  ncclUniqueId id;
  snprintf(st->current, sizeof(st->current), "ncclGetUniqueId / ncclCommInitRank");
  if (rank == 0) {
    ncclResult_t res = ncclGetUniqueId(&id);
    if (res != ncclSuccess) {
      api_failed(&ctx, "ncclGetUniqueId", res, "init");
      return 2;
    }
    for (int i = 1; i < o->np; ++i)
      if (write(id_fd_write, &id, sizeof(id)) != (ssize_t)sizeof(id)) die(2, "rank 0: pipe write failed");
    close(id_fd_write);
  } else {
    close(id_fd_write);
    size_t got = 0;
    while (got < sizeof(id)) {
      ssize_t m = read(id_fd_read, (char*)&id + got, sizeof(id) - got);
      if (m <= 0) die(2, "rank %d: no unique id from rank 0 (it failed before sending one)", rank);
      got += (size_t)m;
    }
  }
  close(id_fd_read);

  double t0 = now_s();
  ncclResult_t res = ncclCommInitRank(&ctx.comm, o->np, id, rank);
  if (res != ncclSuccess) {
    api_failed(&ctx, "ncclCommInitRank", res, "init");
    return 2;
  }
  int size = -1, me = -1;
  API(&ctx, "init", ncclCommCount(ctx.comm, &size));
  API(&ctx, "init", ncclCommUserRank(ctx.comm, &me));
  if (size != o->np || me != rank) {
    fprintf(stderr, "MISMATCH init rank=%d: ncclCommCount/UserRank gave %d/%d\n", rank, size, me);
    st->failed_cases++;
  }
  if (rank == 0 && o->verbose > 1) printf("init: %.2f s\n", now_s() - t0);

  for (int coll = 0; coll < C_NUM_COLLS; ++coll)
    if ((coll_mask >> coll) & 1) {
      double tc = now_s();
      long before = st->cases;
      sweep_coll(&ctx, coll);
      if (rank == 0 && o->verbose > 1)
        printf("%-14s %5ld cases %7.2f s\n", kCollNames[coll], st->cases - before, now_s() - tc);
      fflush(stdout);
    }
  typedef void (*ExtraFn)(Ctx*);
  static const ExtraFn kExtras[X_NUM] = {test_split, test_alltoallv, test_group};
  for (int x = 0; x < X_NUM; ++x)
    if ((extra_mask >> x) & 1) {
      double tc = now_s();
      kExtras[x](&ctx);
      if (rank == 0 && o->verbose > 1) printf("%-14s %7.2f s\n", kExtraNames[x], now_s() - tc);
    }

  snprintf(st->current, sizeof(st->current), "ncclCommFinalize / ncclCommDestroy");
  ncclResult_t async_err = ncclSuccess;
  API(&ctx, "teardown", ncclCommGetAsyncError(ctx.comm, &async_err));
  if (async_err != ncclSuccess) api_failed(&ctx, "ncclCommGetAsyncError (reported)", async_err, "teardown");
  API(&ctx, "teardown", ncclCommFinalize(ctx.comm));
  API(&ctx, "teardown", ncclCommDestroy(ctx.comm));
  snprintf(st->current, sizeof(st->current), "done");
  st->finished = 1;
  if (st->api_errors) return 2;
  return st->failed_cases ? 1 : 0;
}

// ---------------------------------------------------------------------------------------------
// Setup checks, supervisor

// Which file provides ncclAllReduce? It must be our library, or the test proves nothing.
static void check_library(int verbose) {
  Dl_info info;
  void* h = dlopen("libnccl.so.2", RTLD_LAZY | RTLD_NOLOAD);
  void* sym = h ? dlsym(h, "ncclAllReduce") : NULL;
  if (!sym) sym = (void*)&ncclAllReduce;
  if (!dladdr(sym, &info) || !info.dli_fname) die(3, "dladdr(ncclAllReduce) failed");
  char real[PATH_MAX];
  if (!realpath(info.dli_fname, real)) snprintf(real, sizeof(real), "%s", info.dli_fname);
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess) die(3, "ncclGetVersion failed");
  printf("client: ncclAllReduce from %s (%s), ncclGetVersion=%d, header NCCL_VERSION_CODE=%d\n", info.dli_fname, real,
         version, NCCL_VERSION_CODE);
  const char* expect = getenv("MIXCCL_CLIENT_EXPECT_LIB");
#ifdef MIXCCL_CLIENT_EXPECTED_LIB
  if (!expect) expect = MIXCCL_CLIENT_EXPECTED_LIB;
#endif
  if (expect && strcmp(expect, "any") == 0) return;
  if (expect) {
    char want[PATH_MAX];
    if (!realpath(expect, want)) snprintf(want, sizeof(want), "%s", expect);
    if (strcmp(want, real) != 0) die(3, "client: expected our library %s but ncclAllReduce comes from %s", want, real);
  } else {
    const char* base = strrchr(real, '/');
    base = base ? base + 1 : real;
    if (strncmp(base, "libmixccl", 9) != 0) die(3, "client: ncclAllReduce comes from %s, not libmixccl", real);
  }
  if (version != NCCL_VERSION_CODE) die(3, "client: ncclGetVersion=%d, expected %d", version, NCCL_VERSION_CODE);
  (void)verbose;
}

static unsigned parse_names(const char* list, const char* const* names, int nnames, const char* what) {
  unsigned mask = 0;
  char buf[512];
  snprintf(buf, sizeof(buf), "%s", list);
  for (char* tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
    int found = 0;
    for (int i = 0; i < nnames; ++i)
      if (strcmp(tok, names[i]) == 0) {
        mask |= 1u << i;
        found = 1;
      }
    if (!found) die(3, "unknown %s '%s'", what, tok);
  }
  return mask;
}

static void usage(void) {
  printf(
      "usage: client [--np N] [--quick] [--only LIST] [--dtype LIST] [--op LIST] [--count LIST]\n"
      "              [--inplace 0|1] [--timeout S] [--stall S] [--seed N] [--max-print N] [-v]\n"
      "  --only   collectives and tests: allreduce,broadcast,bcast,reduce,allgather,reducescatter,\n"
      "           alltoall,gather,scatter,sendrecv,split,alltoallv,group (default: all)\n"
      "  --dtype  int8,uint8,int32,uint32,int64,uint64,float16,float32,float64,bfloat16,\n"
      "           float8e4m3,float8e5m2 (default: all)\n"
      "  --op     sum,prod,max,min,avg,premulsum_imm,premulsum_dev (default: all)\n"
      "  --count  element counts replacing the default set {0,1,1001,1048573 (subset)}\n"
      "  --timeout S  whole run (default 870); --stall S  a phase with no finished case (default 180)\n"
      "  -v       per-phase timings and skipped cases; -v -v every case\n"
      "  env MIXCCL_CLIENT_EXPECT_LIB=path|any: which library must provide ncclAllReduce\n");
}

static void parse_args(int argc, char** argv, Options* o) {
  memset(o, 0, sizeof(*o));
  o->np = 2;
  o->timeout_s = 870;
  o->grace_s = 20;
  o->stall_s = 180;
  o->coll_mask = (1u << C_NUM_COLLS) - 1;
  o->extra_mask = (1u << X_NUM) - 1;
  o->dtype_mask = (1u << CL_NUM_DTYPES) - 1;
  o->op_mask = (1u << O_NUM_OPS) - 1;
  o->inplace_sel = -1;
  o->max_print = 40;
  o->seed = 0x6d6978636c;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VALUE()                       \
  do {                                     \
    if (!v) die(3, "%s needs a value", a); \
    ++i;                                   \
  } while (0)
    if (!strcmp(a, "--np")) {
      NEED_VALUE();
      o->np = atoi(v);
    } else if (!strcmp(a, "--quick")) {
      o->quick = 1;
    } else if (!strcmp(a, "--only")) {
      NEED_VALUE();
      o->coll_mask = o->extra_mask = 0;
      char buf[512];
      snprintf(buf, sizeof(buf), "%s", v);
      for (char* tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int found = 0;
        for (int c = 0; c < C_NUM_COLLS; ++c)
          if (!strcmp(tok, kCollNames[c])) o->coll_mask |= 1u << c, found = 1;
        for (int x = 0; x < X_NUM; ++x)
          if (!strcmp(tok, kExtraNames[x])) o->extra_mask |= 1u << x, found = 1;
        if (!found) die(3, "unknown collective or test '%s'", tok);
      }
    } else if (!strcmp(a, "--dtype")) {
      NEED_VALUE();
      o->dtype_mask = 0;
      char buf[512];
      snprintf(buf, sizeof(buf), "%s", v);
      for (char* tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int dt = cl_dtype_by_name(tok);
        if (dt < 0) die(3, "unknown datatype '%s'", tok);
        o->dtype_mask |= 1u << dt;
      }
    } else if (!strcmp(a, "--op")) {
      NEED_VALUE();
      o->op_mask = parse_names(v, kOpNames, O_NUM_OPS, "op");
    } else if (!strcmp(a, "--count")) {
      NEED_VALUE();
      char buf[512];
      snprintf(buf, sizeof(buf), "%s", v);
      for (char* tok = strtok(buf, ","); tok && o->ncounts < 16; tok = strtok(NULL, ","))
        o->counts[o->ncounts++] = (size_t)strtoull(tok, NULL, 0);
    } else if (!strcmp(a, "--inplace")) {
      NEED_VALUE();
      o->inplace_sel = atoi(v) ? 1 : 0;
    } else if (!strcmp(a, "--timeout")) {
      NEED_VALUE();
      o->timeout_s = atof(v);
    } else if (!strcmp(a, "--stall")) {
      NEED_VALUE();
      o->stall_s = atof(v);
    } else if (!strcmp(a, "--seed")) {
      NEED_VALUE();
      o->seed = strtoull(v, NULL, 0);
    } else if (!strcmp(a, "--max-print")) {
      NEED_VALUE();
      o->max_print = atoi(v);
    } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
      o->verbose++;
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage();
      exit(0);
    } else {
      usage();
      die(3, "unknown argument '%s'", a);
    }
#undef NEED_VALUE
  }
  if (o->np < 1 || o->np > 64) die(3, "--np must be in 1..64");
}

typedef struct {
  long cases, elements, failed, api;
  int worst;
} Totals;

// One phase: fork the ranks, let them run the selected tests on a fresh communicator, supervise.
// A phase ends early when a rank fails and the others do not follow within grace_s, when no rank
// completes a case for stall_s (a hang), or at the global deadline; the remaining ranks are killed
// and the next phase starts, so one hanging collective does not hide the results of the others.
static void run_phase(const Options* o, unsigned coll_mask, unsigned extra_mask, const char* name, RankStatus* st,
                      double deadline, Totals* tot) {
  memset(st, 0, sizeof(RankStatus) * (size_t)o->np);
  int fds[2];
  if (pipe(fds) != 0) die(2, "pipe failed: %s", strerror(errno));
  double t0 = now_s();
  pid_t pids[64], supervisor = getpid();
  for (int r = 0; r < o->np; ++r) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) die(2, "fork failed: %s", strerror(errno));
    if (pid == 0) {
      // Ranks must not outlive the supervisor (CTest kills it on timeout); a rank stuck in a
      // collective would otherwise spin on.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != supervisor) _exit(2);
      int code = rank_main(o, coll_mask, extra_mask, r, fds[0], fds[1], &st[r]);
      fflush(stdout);
      fflush(stderr);
      _exit(code);
    }
    pids[r] = pid;
  }
  close(fds[0]);
  close(fds[1]);

  int status[64], alive = o->np, worst = 0, killed = 0;
  for (int r = 0; r < o->np; ++r) status[r] = -1;
  double first_fail = -1, last_progress = t0;
  long last_cases = -1;
  while (alive > 0) {
    int ws;
    pid_t pid = waitpid(-1, &ws, WNOHANG);
    if (pid > 0) {
      for (int r = 0; r < o->np; ++r)
        if (pids[r] == pid) {
          status[r] = ws;
          --alive;
          int code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 2;
          if (code > worst) worst = code;
          if (code != 0 && first_fail < 0) first_fail = now_s();
        }
      continue;
    }
    double t = now_s();
    long cases = 0;
    for (int r = 0; r < o->np; ++r) cases += st[r].cases;
    if (cases != last_cases) {
      last_cases = cases;
      last_progress = t;
    }
    const char* why = NULL;
    if (t > deadline)
      why = "global timeout";
    else if (t - last_progress > o->stall_s)
      why = "no rank finished a case for --stall seconds (hang)";
    else if (first_fail >= 0 && t - first_fail > o->grace_s)
      why = "a rank failed and the others did not finish";
    if (why) {
      killed = 1;
      fprintf(stderr, "client: phase %s: %s; killing the remaining ranks\n", name, why);
      for (int r = 0; r < o->np; ++r)
        if (status[r] < 0) {
          fprintf(stderr, "HANG phase=%s rank=%d still in: %s\n", name, r, st[r].current);
          kill(pids[r], SIGKILL);
        }
      while (alive > 0) {
        pid = waitpid(-1, &ws, 0);
        if (pid < 0) break;
        for (int r = 0; r < o->np; ++r)
          if (pids[r] == pid) {
            status[r] = ws;
            --alive;
          }
      }
      worst = 2;
      break;
    }
    usleep(20000);
  }

  long cases = 0, failed = 0, api = 0;
  for (int r = 0; r < o->np; ++r) {
    cases += st[r].cases;
    tot->elements += st[r].elements;
    failed += st[r].failed_cases;
    api += st[r].api_errors;
    int ws = status[r];
    if (ws != -1 && WIFSIGNALED(ws) && !killed)
      fprintf(stderr, "client: phase %s: rank %d died from signal %d in: %s\n", name, r, WTERMSIG(ws), st[r].current);
    else if (ws != -1 && WIFEXITED(ws) && WEXITSTATUS(ws) != 0)
      fprintf(stderr, "client: phase %s: rank %d exited with %d (last: %s)\n", name, r, WEXITSTATUS(ws), st[r].current);
    if (ws != -1 && WIFSIGNALED(ws)) worst = 2;
  }
  tot->cases += cases;
  tot->failed += failed;
  tot->api += api;
  if (worst > tot->worst) tot->worst = worst;
  printf("phase %-14s %s  %6ld case-runs  %4ld failed  %3ld API errors  %7.2f s\n", name,
         worst == 0 ? "PASS"
         : killed   ? "HANG"
                    : "FAIL",
         cases, failed, api, now_s() - t0);
}

int main(int argc, char** argv) {
  Options o;
  parse_args(argc, argv, &o);
  setvbuf(stdout, NULL, _IOLBF, 0);
  int st_fail = cl_selftest();
  if (st_fail) die(3, "client: datatype codec self-test failed (%d cases)", st_fail);
  check_library(o.verbose);

  RankStatus* st = (RankStatus*)mmap(NULL, sizeof(RankStatus) * (size_t)o.np, PROT_READ | PROT_WRITE,
                                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (st == MAP_FAILED) die(2, "mmap failed: %s", strerror(errno));
  double t0 = now_s(), deadline = t0 + o.timeout_s;
  Totals tot = {0};
  for (int coll = 0; coll < C_NUM_COLLS; ++coll)
    if ((o.coll_mask >> coll) & 1) run_phase(&o, 1u << coll, 0, kCollNames[coll], st, deadline, &tot);
  for (int x = 0; x < X_NUM; ++x)
    if ((o.extra_mask >> x) & 1) run_phase(&o, 0, 1u << x, kExtraNames[x], st, deadline, &tot);
  printf(
      "client: np=%d %s: %ld case-runs over all ranks, %ld elements checked, %ld failed, %ld API errors, "
      "%.1f s\n",
      o.np, tot.worst == 0 ? "PASS" : "FAIL", tot.cases, tot.elements, tot.failed, tot.api, now_s() - t0);
  return tot.worst;
}
