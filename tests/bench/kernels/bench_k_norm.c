// tests/bench/kernels/bench_k_norm.c: the LayerNorm kernels side by side on
// one GPU in one run: k_layer_norm_cuda / k_layer_norm_f16_cuda (rows of up
// to 8192 columns held in registers, one load and one store per element)
// against k_layer_norm__block_cuda / k_layer_norm_f16__block_cuda (the
// block-per-row kernel they replace there: three passes over global
// memory), FP16 and FP32, at BERT-base's [batch 32 x seq 128, 768] and
// other transformer widths. Each launch works on the next of several copies
// of x and y, together at least 4x the L2 cache, so rows come from HBM as
// they do inside a model. Per shape and kernel: the median over 7 rounds of
// the mean time of 50 launches (CUDA events, kernels alternating round by
// round), the effective bandwidth (x read once, y written once), the ratio,
// and the largest difference between the two outputs as a sanity check
// (both are tested against the reference in tests/gpu/test_k_cuda_norm.c).
// Exits 77 where no GPU answers.
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/k_cuda.h"

#define BK_CUDA(call)                                                                        \
  do {                                                                                       \
    cudaError_t rc_ = (call);                                                                \
    if (rc_ != cudaSuccess) {                                                                \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(rc_)); \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

enum { ITERS = 50, ROUNDS = 7, MAX_SETS = 64 };

typedef struct shape {
  const char *name;
  size_t rows, cols;
} shape;

// One layer norm launcher, FP32 or FP16 (y, x, scale, bias as void).
typedef int (*ln_fn)(void *, const void *, const void *, const void *, size_t, size_t, float,
                     cudaStream_t, err *);
static int ln_f32(void *y, const void *x, const void *s, const void *b, size_t r, size_t c,
                  float eps, cudaStream_t st, err *e) {
  return k_layer_norm_cuda(y, x, s, b, r, c, eps, st, e);
}
static int ln_f32_block(void *y, const void *x, const void *s, const void *b, size_t r, size_t c,
                        float eps, cudaStream_t st, err *e) {
  return k_layer_norm__block_cuda(y, x, s, b, r, c, eps, st, e);
}
static int ln_f16(void *y, const void *x, const void *s, const void *b, size_t r, size_t c,
                  float eps, cudaStream_t st, err *e) {
  return k_layer_norm_f16_cuda(y, x, s, b, r, c, eps, st, e);
}
static int ln_f16_block(void *y, const void *x, const void *s, const void *b, size_t r, size_t c,
                        float eps, cudaStream_t st, err *e) {
  return k_layer_norm_f16__block_cuda(y, x, s, b, r, c, eps, st, e);
}

static uint64_t rng = 88172645463325252ull;
static float uniform(float lo, float hi) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return lo + (hi - lo) * (float)((rng >> 11) * (1.0 / 9007199254740992.0));
}

// n values in [lo, hi) on the device as float or half.
static void *dev_fill(size_t n, int f16, float lo, float hi) {
  float *f = malloc(n * 4 + 4);
  uint16_t *h = malloc(n * 2 + 2);
  if (!f || !h) exit(1);
  for (size_t i = 0; i < n; i++) f[i] = uniform(lo, hi);
  if (f16) k_f32_to_f16(h, f, n);
  void *d;
  BK_CUDA(cudaMalloc(&d, n * (f16 ? 2 : 4)));
  BK_CUDA(cudaMemcpy(d, f16 ? (void *)h : (void *)f, n * (f16 ? 2 : 4), cudaMemcpyHostToDevice));
  free(f), free(h);
  return d;
}

// Mean milliseconds per launch over ITERS launches, rotating over the sets.
static float time_one(ln_fn fn, void **y, void **x, int sets, const void *s, const void *b,
                      const shape *sh, cudaStream_t st, cudaEvent_t e0, cudaEvent_t e1) {
  err e = {0};
  BK_CUDA(cudaEventRecord(e0, st));
  for (int i = 0; i < ITERS; i++)
    if (fn(y[i % sets], x[i % sets], s, b, sh->rows, sh->cols, 1e-5f, st, &e)) {
      fprintf(stderr, "launch failed: %s\n", e.msg);
      exit(1);
    }
  BK_CUDA(cudaEventRecord(e1, st));
  BK_CUDA(cudaEventSynchronize(e1));
  float ms;
  BK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
  return ms / ITERS;
}

static int cmp_float(const void *x, const void *y) {
  float a = *(const float *)x, b = *(const float *)y;
  return (a > b) - (a < b);
}

static void run_shape(const shape *sh, int f16, size_t l2, cudaStream_t st) {
  size_t n = sh->rows * sh->cols, esz = f16 ? 2 : 4, set_bytes = 2 * n * esz;
  int sets = (int)((4 * l2 + set_bytes - 1) / set_bytes);
  if (sets < 1) sets = 1;
  if (sets > MAX_SETS) sets = MAX_SETS;
  void *x[MAX_SETS], *y_new[MAX_SETS], *y_old[MAX_SETS];
  for (int i = 0; i < sets; i++) {
    x[i] = dev_fill(n, f16, -2.0f, 2.0f);
    BK_CUDA(cudaMalloc(&y_new[i], n * esz));
    BK_CUDA(cudaMalloc(&y_old[i], n * esz));
  }
  void *s = dev_fill(sh->cols, f16, 0.5f, 1.5f), *b = dev_fill(sh->cols, f16, -1.0f, 1.0f);
  ln_fn fresh = f16 ? ln_f16 : ln_f32, old = f16 ? ln_f16_block : ln_f32_block;
  cudaEvent_t e0, e1;
  BK_CUDA(cudaEventCreate(&e0));
  BK_CUDA(cudaEventCreate(&e1));
  time_one(fresh, y_new, x, sets, s, b, sh, st, e0, e1);  // warm-up, both
  time_one(old, y_old, x, sets, s, b, sh, st, e0, e1);
  float t_new[ROUNDS], t_old[ROUNDS];
  for (int r = 0; r < ROUNDS; r++) {  // alternating, so drifts (clocks, heat) hit both
    t_old[r] = time_one(old, y_old, x, sets, s, b, sh, st, e0, e1);
    t_new[r] = time_one(fresh, y_new, x, sets, s, b, sh, st, e0, e1);
  }
  qsort(t_new, ROUNDS, sizeof t_new[0], cmp_float);
  qsort(t_old, ROUNDS, sizeof t_old[0], cmp_float);
  double diff = 0.0;
  void *hn = malloc(n * esz), *ho = malloc(n * esz);
  float *fn = malloc(n * 4), *fo = malloc(n * 4);
  if (!hn || !ho || !fn || !fo) exit(1);
  for (int i = 0; i < sets; i++) {
    BK_CUDA(cudaMemcpy(hn, y_new[i], n * esz, cudaMemcpyDeviceToHost));
    BK_CUDA(cudaMemcpy(ho, y_old[i], n * esz, cudaMemcpyDeviceToHost));
    if (f16) {
      k_f16_to_f32(fn, hn, n);
      k_f16_to_f32(fo, ho, n);
    } else {
      memcpy(fn, hn, n * 4);
      memcpy(fo, ho, n * 4);
    }
    for (size_t j = 0; j < n; j++) {
      double d = fabs((double)fn[j] - (double)fo[j]);
      if (isnan(d)) d = INFINITY;  // a NaN on one side only
      if (d > diff) diff = d;
    }
  }
  float mn = t_new[ROUNDS / 2], mo = t_old[ROUNDS / 2];
  double gb = (double)set_bytes / 1e9;
  printf("%-26s %s  block %8.2f us (%5.0f GB/s)  reg %8.2f us (%5.0f GB/s)  block/reg %5.2fx  "
         "max|reg-block| %.2g  (%d buffer sets)\n",
         sh->name, f16 ? "FP16" : "FP32", mo * 1e3, gb / (mo * 1e-3), mn * 1e3, gb / (mn * 1e-3),
         mo / mn, diff, sets);
  free(hn), free(ho), free(fn), free(fo);
  BK_CUDA(cudaEventDestroy(e0));
  BK_CUDA(cudaEventDestroy(e1));
  for (int i = 0; i < sets; i++) {
    BK_CUDA(cudaFree(x[i]));
    BK_CUDA(cudaFree(y_new[i]));
    BK_CUDA(cudaFree(y_old[i]));
  }
  BK_CUDA(cudaFree(s));
  BK_CUDA(cudaFree(b));
}

int main(void) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    printf("SKIP: no CUDA device\n");
    return 77;
  }
  struct cudaDeviceProp prop;
  BK_CUDA(cudaGetDeviceProperties(&prop, 0));
  char day[32];
  time_t now = time(NULL);
  strftime(day, sizeof day, "%Y-%m-%d %H:%M UTC", gmtime(&now));
  printf("bench_k_norm: %s (sm_%d%d, L2 %d MiB), %s; median of %d rounds x %d launches\n",
         prop.name, prop.major, prop.minor, prop.l2CacheSize >> 20, day, ROUNDS, ITERS);
  static const shape shapes[] = {
      {"bert-base b32 s128 x768", 4096, 768},  {"bert-base b1 s128 x768", 128, 768},
      {"bert-large b32 s128 x1024", 4096, 1024}, {"gpt2-xl b8 s512 x1600", 4096, 1600},
      {"b8 s512 x4096", 4096, 4096},           {"b4 s512 x8192", 2048, 8192},
  };
  cudaStream_t st;
  BK_CUDA(cudaStreamCreate(&st));
  for (int f16 = 1; f16 >= 0; f16--)
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
      run_shape(&shapes[i], f16, (size_t)prop.l2CacheSize, st);
  BK_CUDA(cudaStreamDestroy(st));
  return 0;
}
