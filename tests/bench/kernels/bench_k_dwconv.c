// tests/bench/kernels/bench_k_dwconv.c: the depthwise kernels side by side
// on one GPU in one run: k_dwconv_cuda (the tiled path with its own choice
// of tile width and channel groups per block, then with 64, 32 and 8 groups
// a block forced, and one output pixel a thread) against k_dwconv__v1_cuda (one output
// pixel per thread, the kernel before it), at the depthwise convolutions of
// torchvision's MobileNetV3-Large at 224x224 (bias and its ReLU or
// HardSwish fused, as the CUDA plan runs them NHWC). Per shape: the median
// over 7 rounds of the mean time of 50 launches (CUDA events, the variants
// alternating round by round), v1/new, and whether the outputs agree bit
// for bit (they sum in the same order). The last line weighs each shape by
// how often the network runs it. Usage: bench_k_dwconv [batch (32)] [f32];
// exits 77 where no GPU answers.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/k_cuda.h"
#include "tests/bench/kernels/bench_k_util.h"

typedef int (*dw_fn)(void *, const void *, const void *, const void *, const void *, k_elem,
                     const k_dwconv_args *, cudaStream_t, err *);

typedef struct shape {
  int hw, c, k, stride, times;  // input H = W, channels, window, stride, uses per forward
  k_dw_act act;
} shape;

enum { VARIANTS = 6 };  // v1, auto, groups 64, 32, 8, tile 1

// One timing's launches: one variant on one shape's buffers.
typedef struct dw_run {
  dw_fn fn;
  void *y;
  const void *x, *w, *b;
  k_elem et;
  const k_dwconv_args *a;
} dw_run;

static int dw_launch(const void *ctx, int i, cudaStream_t st, err *e) {
  const dw_run *r = ctx;
  (void)i;
  return r->fn(r->y, r->x, r->w, r->b, NULL, r->et, r->a, st, e);
}

// Median ms of each variant into med[VARIANTS].
static void run_shape(const shape *sh, int batch, k_elem et, bk_rng *rng, cudaStream_t st,
                      float *med) {
  int pad = sh->k / 2, o = (sh->hw + 2 * pad - sh->k) / sh->stride + 1;
  k_dwconv_args a = {.n = batch, .h = sh->hw, .w = sh->hw, .c = sh->c, .oh = o, .ow = o,
                     .r = sh->k, .s = sh->k, .pad_top = pad, .pad_left = pad,
                     .stride_h = sh->stride, .stride_w = sh->stride, .dil_h = 1, .dil_w = 1,
                     .act = sh->act};
  size_t nx = (size_t)batch * sh->hw * sh->hw * sh->c, ny = (size_t)batch * o * o * sh->c,
         es = et == K_F16 ? 2 : 4;
  int f16 = et == K_F16;
  void *x = bk_dev_rand(rng, nx, f16, -2, 2);
  void *w = bk_dev_rand(rng, (size_t)sh->c * sh->k * sh->k, f16, -1, 1);
  void *b = bk_dev_rand(rng, (size_t)sh->c, f16, -1, 1), *y[VARIANTS];
  for (int v = 0; v < VARIANTS; v++) CUDA_DIE(cudaMalloc(&y[v], ny * es));
  bk_timer tm;
  bk_timer_open(&tm, st);
  static const int tile[VARIANTS] = {0, 0, 0, 0, 0, 1}, groups[VARIANTS] = {0, 0, 64, 32, 8, 0};
  k_dwconv_args av[VARIANTS];
  float t[VARIANTS][BK_ROUNDS];
  for (int r = -1; r < BK_ROUNDS; r++)  // round -1: warm-up
    for (int v = 0; v < VARIANTS; v++) {
      av[v] = a;
      av[v].tile_w = tile[v];
      av[v].block_groups = groups[v];
      dw_run run = {v ? k_dwconv_cuda : k_dwconv__v1_cuda, y[v], x, w, b, et, &av[v]};
      float ms = bk_time(&tm, dw_launch, &run);
      if (r >= 0) t[v][r] = ms;
    }
  unsigned char *h0 = malloc(ny * es), *h1 = malloc(ny * es);
  if (!h0 || !h1) exit(1);
  CUDA_DIE(cudaMemcpy(h0, y[0], ny * es, cudaMemcpyDeviceToHost));
  int same = 1;
  for (int v = 1; v < VARIANTS; v++) {
    CUDA_DIE(cudaMemcpy(h1, y[v], ny * es, cudaMemcpyDeviceToHost));
    same &= memcmp(h0, h1, ny * es) == 0;
  }
  for (int v = 0; v < VARIANTS; v++) med[v] = bk_median(t[v], BK_ROUNDS);
  double gb = (double)(nx + ny) * es / 1e9;  // compulsory traffic
  char name[64];
  snprintf(name, sizeof name, "%dx%d s%d %3dx%-3d C=%d x%d", sh->k, sh->k, sh->stride, sh->hw, sh->hw,
           sh->c, sh->times);
  printf("%-28s v1 %7.4f  new %7.4f (%5.0f GB/s)  g64 %7.4f  g32 %7.4f  g8 %7.4f  tile1 %7.4f ms  "
         "v1/new %5.2fx  bits %s\n",
         name, med[0], med[1], gb / (med[1] * 1e-3), med[2], med[3], med[4], med[5], med[0] / med[1],
         same ? "same" : "DIFFER");
  free(h0), free(h1);
  bk_timer_close(&tm);
  CUDA_DIE(cudaFree(x));
  CUDA_DIE(cudaFree(w));
  CUDA_DIE(cudaFree(b));
  for (int v = 0; v < VARIANTS; v++) CUDA_DIE(cudaFree(y[v]));
}

int main(int argc, char **argv) {
  int batch = argc > 1 ? atoi(argv[1]) : 32;
  k_elem et = argc > 2 && strcmp(argv[2], "f32") == 0 ? K_F32 : K_F16;
  if (batch < 1) {
    fprintf(stderr, "usage: %s [batch >= 1] [f32]\n", argv[0]);
    return 2;
  }
  struct cudaDeviceProp prop;
  char day[32];
  int rc = bk_open_device(&prop, day, sizeof day);
  if (rc) return rc;
  printf("bench_k_dwconv: %s (sm_%d%d), %s; MobileNetV3-Large depthwise convs, batch %d, %s, "
         "median of %d rounds x %d launches\n",
         prop.name, prop.major, prop.minor, day, batch, et == K_F16 ? "FP16" : "FP32", BK_ROUNDS, BK_ITERS);
  // torchvision mobilenet_v3_large's inverted residual blocks (input 224x224)
  static const shape shapes[] = {
      {112, 16, 3, 1, 1, K_DW_ACT_RELU},       {112, 64, 3, 2, 1, K_DW_ACT_RELU},
      {56, 72, 3, 1, 1, K_DW_ACT_RELU},        {56, 72, 5, 2, 1, K_DW_ACT_RELU},
      {28, 120, 5, 1, 2, K_DW_ACT_RELU},       {28, 240, 3, 2, 1, K_DW_ACT_HARD_SWISH},
      {14, 200, 3, 1, 1, K_DW_ACT_HARD_SWISH}, {14, 184, 3, 1, 2, K_DW_ACT_HARD_SWISH},
      {14, 480, 3, 1, 1, K_DW_ACT_HARD_SWISH}, {14, 672, 3, 1, 1, K_DW_ACT_HARD_SWISH},
      {14, 672, 5, 2, 1, K_DW_ACT_HARD_SWISH}, {7, 960, 5, 1, 2, K_DW_ACT_HARD_SWISH},
  };
  bk_rng rng = BK_RNG_INIT;
  cudaStream_t st;
  CUDA_DIE(cudaStreamCreate(&st));
  double tot[VARIANTS] = {0};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    float med[VARIANTS];
    run_shape(&shapes[i], batch, et, &rng, st, med);
    for (int v = 0; v < VARIANTS; v++) tot[v] += shapes[i].times * (double)med[v];
  }
  printf("%-28s v1 %7.4f  new %7.4f               g64 %7.4f  g32 %7.4f  g8 %7.4f  tile1 %7.4f ms  "
         "v1/new %5.2fx\n",
         "per forward (all 15)", tot[0], tot[1], tot[2], tot[3], tot[4], tot[5], tot[0] / tot[1]);
  CUDA_DIE(cudaStreamDestroy(st));
  return 0;
}
