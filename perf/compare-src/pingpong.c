// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
//
// pingpong: the small-message latency floor for perf/compare. Two processes (parent and forked
// child) bounce an 8-byte message N times, timing every round trip; one-way latency is half the
// median round trip.
//   shm: both processes spin on 8-byte words in a shared anonymous mapping (one cache line
//        each way; after kSpinsBeforeYield polls a waiter yields between polls); the message is
//        the sequence number itself.
//   tcp: a TCP connection over 127.0.0.1 with TCP_NODELAY; 8-byte send/recv, polled with
//        MSG_DONTWAIT (spin, then yield) instead of sleeping in the kernel.
//
// Both stop early once the round trips so far took more than 3 s: on a loaded machine with two
// cores a spinning peer may wait for a time slice per round trip.
//
// Usage: pingpong shm|tcp [-n ROUNDTRIPS]   prints one JSON object
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const double kTimeLimitS = 3.0;
// A waiter spins this many times, then yields between polls, so that on an oversubscribed
// machine the peer it waits for can run on its core.
static const int kSpinsBeforeYield = 2000;

static int cmpDouble(const void* x, const void* y) {
  double a = *(const double*)x, b = *(const double*)y;
  return (a > b) - (a < b);
}

typedef struct {
  _Alignas(128) _Atomic uint64_t ping;
  _Alignas(128) _Atomic uint64_t pong;
} Flags;

static int runShm(int n, double* rtt) {
  Flags* f = mmap(NULL, sizeof(Flags), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (f == MAP_FAILED) {
    perror("pingpong: mmap");
    exit(1);
  }
  atomic_store(&f->ping, 0);
  atomic_store(&f->pong, 0);
  pid_t child = fork();
  if (child == 0) {
    for (uint64_t i = 1;; ++i) {
      uint64_t v;
      for (int spins = 0; (v = atomic_load_explicit(&f->ping, memory_order_acquire)) != i && v != UINT64_MAX;) {
        if (++spins > kSpinsBeforeYield) sched_yield();
      }
      if (v == UINT64_MAX) break;
      atomic_store_explicit(&f->pong, i, memory_order_release);
    }
    _exit(0);
  }
  double start = now();
  int done = 0;
  for (uint64_t i = 1; i <= (uint64_t)n && now() - start < kTimeLimitS; ++i) {
    double t0 = now();
    atomic_store_explicit(&f->ping, i, memory_order_release);
    for (int spins = 0; atomic_load_explicit(&f->pong, memory_order_acquire) != i;) {
      if (++spins > kSpinsBeforeYield) sched_yield();
    }
    rtt[i - 1] = now() - t0;
    ++done;
  }
  atomic_store_explicit(&f->ping, UINT64_MAX, memory_order_release);
  waitpid(child, NULL, 0);
  munmap(f, sizeof(Flags));
  return done;
}

// Moves exactly 8 bytes. Polls with MSG_DONTWAIT (spinning, then yielding) rather than sleeping
// in the kernel, as communication libraries do on their latency path.
static void exact(ssize_t (*io)(int, void*, size_t, int), int fd, void* buf) {
  size_t done = 0;
  int spins = 0;
  while (done < 8) {
    ssize_t r = io(fd, (char*)buf + done, 8 - done, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (++spins > kSpinsBeforeYield) sched_yield();
      continue;
    }
    if (r <= 0) {
      perror("pingpong: tcp");
      exit(1);
    }
    done += (size_t)r;
  }
}

static ssize_t sendWrap(int fd, void* buf, size_t len, int flags) { return send(fd, buf, len, flags | MSG_NOSIGNAL); }

static int runTcp(int n, double* rtt) {
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in addr = {0};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(lfd, (struct sockaddr*)&addr, sizeof(addr)) != 0 || listen(lfd, 1) != 0 ||
      getsockname(lfd, (struct sockaddr*)&addr, &len) != 0) {
    perror("pingpong: listen");
    exit(1);
  }
  int one = 1;
  pid_t child = fork();
  if (child == 0) {
    close(lfd);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr*)&addr, sizeof(addr)) != 0) {
      perror("pingpong: connect");
      _exit(1);
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    uint64_t msg;
    for (;;) {
      exact(recv, fd, &msg);
      if (msg == UINT64_MAX) break;
      exact(sendWrap, fd, &msg);
    }
    close(fd);
    _exit(0);
  }
  int fd = accept(lfd, NULL, NULL);
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  double start = now();
  int done = 0;
  for (int i = 0; i < n && now() - start < kTimeLimitS; ++i) {
    uint64_t msg = (uint64_t)i;
    double t0 = now();
    exact(sendWrap, fd, &msg);
    exact(recv, fd, &msg);
    rtt[i] = now() - t0;
    ++done;
  }
  uint64_t stop = UINT64_MAX;
  exact(sendWrap, fd, &stop);
  waitpid(child, NULL, 0);
  close(fd);
  close(lfd);
  return done;
}

int main(int argc, char** argv) {
  if (argc < 2 || (strcmp(argv[1], "shm") != 0 && strcmp(argv[1], "tcp") != 0)) {
    fprintf(stderr, "usage: pingpong shm|tcp [-n ROUNDTRIPS]\n");
    return 2;
  }
  int n = strcmp(argv[1], "shm") == 0 ? 200000 : 20000;
  if (argc >= 4 && strcmp(argv[2], "-n") == 0) n = atoi(argv[3]);
  if (n < 10) return 2;
  double* rtt = malloc((size_t)n * sizeof(double));
  n = strcmp(argv[1], "shm") == 0 ? runShm(n, rtt) : runTcp(n, rtt);
  if (n < 1) return 1;
  qsort(rtt, (size_t)n, sizeof(double), cmpDouble);
  printf(
      "{\"path\":\"%s\",\"roundtrips\":%d,\"oneway_median_us\":%.3f,\"oneway_p10_us\":%.3f,\"oneway_p90_us\":%.3f}\n",
      argv[1], n, rtt[n / 2] * 0.5e6, rtt[n / 10] * 0.5e6, rtt[n * 9 / 10] * 0.5e6);
  free(rtt);
  return 0;
}
