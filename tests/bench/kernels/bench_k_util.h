// tests/bench/kernels/bench_k_util.h: what the kernel benchmarks
// (bench_k_*.c) share: the device probe (exit 77 where no GPU answers) and
// the UTC stamp for their banner, a seeded RNG and device buffers of it
// (FP32 or FP16), and the timing: the mean over BK_ITERS launches between
// two CUDA events, and the median of BK_ROUNDS such means (the benches run
// their variants alternating round by round, so drifts in clocks and heat
// hit all of them alike). Each bench keeps its own shapes, checks and
// output format.
#ifndef INFERD_TESTS_BENCH_KERNELS_BENCH_K_UTIL_H
#define INFERD_TESTS_BENCH_KERNELS_BENCH_K_UTIL_H

#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kernels/k_cuda.h"
#include "tests/gpu/cuda_die.h"

enum { BK_ITERS = 50, BK_ROUNDS = 7 };

// Fills *prop for device 0 and day with "YYYY-MM-DD HH:MM UTC". Returns 0,
// or 77 (printing SKIP) where no device answers: main returns it.
static inline int bk_open_device(struct cudaDeviceProp *prop, char *day, size_t day_size) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    printf("SKIP: no CUDA device\n");
    return 77;
  }
  CUDA_DIE(cudaGetDeviceProperties(prop, 0));
  time_t now = time(NULL);
  strftime(day, day_size, "%Y-%m-%d %H:%M UTC", gmtime(&now));
  return 0;
}

// --- RNG: xorshift64, the same numbers every run.
typedef struct bk_rng {
  uint64_t s;
} bk_rng;
#define BK_RNG_INIT \
  { 88172645463325252ull }

static inline float bk_uniform(bk_rng *r, float lo, float hi) {
  r->s ^= r->s << 13, r->s ^= r->s >> 7, r->s ^= r->s << 17;
  return lo + (hi - lo) * (float)((r->s >> 11) * (1.0 / 9007199254740992.0));
}

// A new device buffer holding f[0..n) as float, or as half where f16.
// The caller cudaFrees it.
static inline void *bk_dev_upload(const float *f, size_t n, int f16) {
  size_t esz = f16 ? 2 : 4;
  uint16_t *h = f16 ? malloc(n * 2 + 2) : NULL;
  if (f16 && !h) exit(1);
  if (f16) k_f32_to_f16(h, f, n);
  void *d;
  CUDA_DIE(cudaMalloc(&d, n * esz + esz));
  CUDA_DIE(cudaMemcpy(d, f16 ? (const void *)h : (const void *)f, n * esz, cudaMemcpyHostToDevice));
  free(h);
  return d;
}

// n values uniform in [lo, hi) on the device (see bk_dev_upload).
static inline void *bk_dev_rand(bk_rng *r, size_t n, int f16, float lo, float hi) {
  float *f = malloc(n * 4 + 4);
  if (!f) exit(1);
  for (size_t i = 0; i < n; i++) f[i] = bk_uniform(r, lo, hi);
  void *d = bk_dev_upload(f, n, f16);
  free(f);
  return d;
}

// --- timing. One launch of the kernel under test: i counts the launches
// of a timing (0..BK_ITERS), for benches that rotate over buffer sets.
typedef int (*bk_launch_fn)(const void *ctx, int i, cudaStream_t st, err *e);

typedef struct bk_timer {
  cudaStream_t st;
  cudaEvent_t e0, e1;
} bk_timer;

static inline void bk_timer_open(bk_timer *t, cudaStream_t st) {
  t->st = st;
  CUDA_DIE(cudaEventCreate(&t->e0));
  CUDA_DIE(cudaEventCreate(&t->e1));
}

static inline void bk_timer_close(bk_timer *t) {
  CUDA_DIE(cudaEventDestroy(t->e0));
  CUDA_DIE(cudaEventDestroy(t->e1));
}

// Mean milliseconds per launch over BK_ITERS launches; a failed launch
// prints its message and exits 1.
static inline float bk_time(const bk_timer *t, bk_launch_fn fn, const void *ctx) {
  err e = {0};
  CUDA_DIE(cudaEventRecord(t->e0, t->st));
  for (int i = 0; i < BK_ITERS; i++)
    if (fn(ctx, i, t->st, &e)) {
      fprintf(stderr, "launch failed: %s\n", e.msg);
      exit(1);
    }
  CUDA_DIE(cudaEventRecord(t->e1, t->st));
  CUDA_DIE(cudaEventSynchronize(t->e1));
  float ms;
  CUDA_DIE(cudaEventElapsedTime(&ms, t->e0, t->e1));
  return ms / BK_ITERS;
}

static inline int bk__cmp_float(const void *x, const void *y) {
  float a = *(const float *)x, b = *(const float *)y;
  return (a > b) - (a < b);
}

// The median of t[0..n) (sorts t).
static inline float bk_median(float *t, int n) {
  qsort(t, (size_t)n, sizeof t[0], bk__cmp_float);
  return t[n / 2];
}

#endif
