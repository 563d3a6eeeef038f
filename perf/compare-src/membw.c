// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
//
// membw: the memory-bandwidth ceiling for perf/compare. T threads each own a slice of three
// large double arrays a, b, c and, in lock step, time
//   copy: memcpy(c, a)      (traffic counted: read a + write c = 2 x bytes)
//   add:  c[i] = a[i]+b[i]  (traffic counted: read a, b + write c = 3 x bytes)
// Each kernel runs R times; the median over runs is reported. A collective's bus bandwidth
// counts each byte once, so the comparable ceiling is the copy rate in bytes copied per second
// (half the copy traffic), reported as "copy_bytes_per_s".
//
// Usage: membw [-m MIB_PER_ARRAY] [-t THREADS] [-r RUNS]   prints one JSON object
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
  double *a, *b, *c;
  size_t n;
} Slice;

static pthread_barrier_t start_, stop_;
static int runs_ = 7;
static volatile int kernel_;  // 0: copy, 1: add, 2: quit

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void* worker(void* arg) {
  Slice* s = (Slice*)arg;
  for (size_t i = 0; i < s->n; ++i) {  // first touch by the owning thread
    s->a[i] = 1.0;
    s->b[i] = 2.0;
    s->c[i] = 0.0;
  }
  for (;;) {
    pthread_barrier_wait(&start_);
    if (kernel_ == 2) break;
    if (kernel_ == 0) {
      memcpy(s->c, s->a, s->n * sizeof(double));
    } else {
      for (size_t i = 0; i < s->n; ++i) s->c[i] = s->a[i] + s->b[i];
    }
    pthread_barrier_wait(&stop_);
  }
  return NULL;
}

static int cmpDouble(const void* x, const void* y) {
  double a = *(const double*)x, b = *(const double*)y;
  return (a > b) - (a < b);
}

int main(int argc, char** argv) {
  size_t mib = 256;
  int threads = 1, opt;
  while ((opt = getopt(argc, argv, "m:t:r:")) != -1) {
    if (opt == 'm')
      mib = (size_t)atol(optarg);
    else if (opt == 't')
      threads = atoi(optarg);
    else if (opt == 'r')
      runs_ = atoi(optarg);
    else {
      fprintf(stderr, "usage: membw [-m MIB_PER_ARRAY] [-t THREADS] [-r RUNS]\n");
      return 2;
    }
  }
  if (threads < 1 || runs_ < 1 || runs_ > 1000 || mib < 1) return 2;
  size_t n = mib * 1024 * 1024 / sizeof(double);
  double* a = malloc(n * sizeof(double));
  double* b = malloc(n * sizeof(double));
  double* c = malloc(n * sizeof(double));
  if (a == NULL || b == NULL || c == NULL) {
    fprintf(stderr, "membw: cannot allocate 3 x %zu MiB\n", mib);
    return 1;
  }
  pthread_barrier_init(&start_, NULL, (unsigned)threads + 1);
  pthread_barrier_init(&stop_, NULL, (unsigned)threads + 1);
  pthread_t* tids = calloc((size_t)threads, sizeof(pthread_t));
  Slice* slices = calloc((size_t)threads, sizeof(Slice));
  size_t per = n / (size_t)threads;
  for (int t = 0; t < threads; ++t) {
    size_t off = per * (size_t)t;
    slices[t] = (Slice){a + off, b + off, c + off, t == threads - 1 ? n - off : per};
    pthread_create(&tids[t], NULL, worker, &slices[t]);
  }
  double results[2][1000];
  for (int k = 0; k < 2; ++k) {
    kernel_ = k;
    for (int r = -1; r < runs_; ++r) {  // run -1 is an untimed warm-up
      pthread_barrier_wait(&start_);
      double t0 = now();
      pthread_barrier_wait(&stop_);
      if (r >= 0) results[k][r] = now() - t0;
    }
    qsort(results[k], (size_t)runs_, sizeof(double), cmpDouble);
  }
  kernel_ = 2;
  pthread_barrier_wait(&start_);
  for (int t = 0; t < threads; ++t) pthread_join(tids[t], NULL);
  double bytes = (double)n * sizeof(double);
  double copy_t = results[0][runs_ / 2], add_t = results[1][runs_ / 2];
  printf(
      "{\"threads\":%d,\"mib_per_array\":%zu,\"runs\":%d,\"copy_traffic_gbs\":%.3f,\"copy_bytes_per_s\":%.4e,"
      "\"add_traffic_gbs\":%.3f,\"copy_spread\":%.3f,\"add_spread\":%.3f}\n",
      threads, mib, runs_, 2 * bytes / copy_t / 1e9, bytes / copy_t, 3 * bytes / add_t / 1e9,
      (results[0][runs_ - 1] - results[0][0]) / copy_t, (results[1][runs_ - 1] - results[1][0]) / add_t);
  free(a);
  free(b);
  free(c);
  free(tids);
  free(slices);
  return 0;
}
