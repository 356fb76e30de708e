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
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/k_cuda.h"
#include "tests/bench/kernels/bench_k_util.h"

enum { MAX_SETS = 64 };

typedef struct shape {
  const char *name;
  size_t rows, cols;
} shape;

// One timing's launches: the register kernel or the block-per-row one
// (block), FP16 or FP32, each launch on the next of the buffer sets.
typedef struct ln_run {
  int f16, block;
  void **y, **x;
  int sets;
  const void *s, *b;
  const shape *sh;
} ln_run;

static int ln_launch(const void *ctx, int i, cudaStream_t st, err *e) {
  const ln_run *r = ctx;
  void *y = r->y[i % r->sets];
  const void *x = r->x[i % r->sets];
  size_t rows = r->sh->rows, cols = r->sh->cols;
  if (r->f16)
    return r->block ? k_layer_norm_f16__block_cuda(y, x, r->s, r->b, rows, cols, 1e-5f, st, e)
                    : k_layer_norm_f16_cuda(y, x, r->s, r->b, rows, cols, 1e-5f, st, e);
  return r->block ? k_layer_norm__block_cuda(y, x, r->s, r->b, rows, cols, 1e-5f, st, e)
                  : k_layer_norm_cuda(y, x, r->s, r->b, rows, cols, 1e-5f, st, e);
}

static void run_shape(const shape *sh, int f16, size_t l2, bk_rng *rng, cudaStream_t st) {
  size_t n = sh->rows * sh->cols, esz = f16 ? 2 : 4, set_bytes = 2 * n * esz;
  int sets = (int)((4 * l2 + set_bytes - 1) / set_bytes);
  if (sets < 1) sets = 1;
  if (sets > MAX_SETS) sets = MAX_SETS;
  void *x[MAX_SETS], *y_new[MAX_SETS], *y_old[MAX_SETS];
  for (int i = 0; i < sets; i++) {
    x[i] = bk_dev_rand(rng, n, f16, -2.0f, 2.0f);
    CUDA_DIE(cudaMalloc(&y_new[i], n * esz));
    CUDA_DIE(cudaMalloc(&y_old[i], n * esz));
  }
  void *s = bk_dev_rand(rng, sh->cols, f16, 0.5f, 1.5f);
  void *b = bk_dev_rand(rng, sh->cols, f16, -1.0f, 1.0f);
  ln_run fresh = {f16, 0, y_new, x, sets, s, b, sh};
  ln_run old = {f16, 1, y_old, x, sets, s, b, sh};
  bk_timer tm;
  bk_timer_open(&tm, st);
  bk_time(&tm, ln_launch, &fresh);  // warm-up, both
  bk_time(&tm, ln_launch, &old);
  float t_new[BK_ROUNDS], t_old[BK_ROUNDS];
  for (int r = 0; r < BK_ROUNDS; r++) {  // alternating, so drifts (clocks, heat) hit both
    t_old[r] = bk_time(&tm, ln_launch, &old);
    t_new[r] = bk_time(&tm, ln_launch, &fresh);
  }
  double diff = 0.0;
  void *hn = malloc(n * esz), *ho = malloc(n * esz);
  float *fn = malloc(n * 4), *fo = malloc(n * 4);
  if (!hn || !ho || !fn || !fo) exit(1);
  for (int i = 0; i < sets; i++) {
    CUDA_DIE(cudaMemcpy(hn, y_new[i], n * esz, cudaMemcpyDeviceToHost));
    CUDA_DIE(cudaMemcpy(ho, y_old[i], n * esz, cudaMemcpyDeviceToHost));
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
  float mn = bk_median(t_new, BK_ROUNDS), mo = bk_median(t_old, BK_ROUNDS);
  double gb = (double)set_bytes / 1e9;
  printf("%-26s %s  block %8.2f us (%5.0f GB/s)  reg %8.2f us (%5.0f GB/s)  block/reg %5.2fx  "
         "max|reg-block| %.2g  (%d buffer sets)\n",
         sh->name, f16 ? "FP16" : "FP32", mo * 1e3, gb / (mo * 1e-3), mn * 1e3, gb / (mn * 1e-3),
         mo / mn, diff, sets);
  free(hn), free(ho), free(fn), free(fo);
  bk_timer_close(&tm);
  for (int i = 0; i < sets; i++) {
    CUDA_DIE(cudaFree(x[i]));
    CUDA_DIE(cudaFree(y_new[i]));
    CUDA_DIE(cudaFree(y_old[i]));
  }
  CUDA_DIE(cudaFree(s));
  CUDA_DIE(cudaFree(b));
}

int main(void) {
  struct cudaDeviceProp prop;
  char day[32];
  int rc = bk_open_device(&prop, day, sizeof day);
  if (rc) return rc;
  printf("bench_k_norm: %s (sm_%d%d, L2 %d MiB), %s; median of %d rounds x %d launches\n",
         prop.name, prop.major, prop.minor, prop.l2CacheSize >> 20, day, BK_ROUNDS, BK_ITERS);
  static const shape shapes[] = {
      {"bert-base b32 s128 x768", 4096, 768},  {"bert-base b1 s128 x768", 128, 768},
      {"bert-large b32 s128 x1024", 4096, 1024}, {"gpt2-xl b8 s512 x1600", 4096, 1600},
      {"b8 s512 x4096", 4096, 4096},           {"b4 s512 x8192", 2048, 8192},
  };
  bk_rng rng = BK_RNG_INIT;
  cudaStream_t st;
  CUDA_DIE(cudaStreamCreate(&st));
  for (int f16 = 1; f16 >= 0; f16--)
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
      run_shape(&shapes[i], f16, (size_t)prop.l2CacheSize, &rng, st);
  CUDA_DIE(cudaStreamDestroy(st));
  return 0;
}
