// tests/bench/kernels/bench_k_dwconv.c: the depthwise kernels side by side
// on one GPU in one run: k_dwconv_cuda (the tiled path, its own choice of
// tile width, and each width forced) against k_dwconv__v1_cuda (one output
// pixel per thread, the kernel before it), at the depthwise convolutions of
// torchvision's MobileNetV3-Large at 224x224 (bias and its ReLU or
// HardSwish fused, as the CUDA plan runs them NHWC). Per shape: the median
// over 7 rounds of the mean time of 50 launches (CUDA events, the variants
// alternating round by round), v1/new, and whether the outputs agree bit
// for bit (they sum in the same order). The last line weighs each shape by
// how often the network runs it. Usage: bench_k_dwconv [batch (32)] [f32];
// exits 77 where no GPU answers.
#include <cuda_runtime_api.h>
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

typedef int (*dw_fn)(void *, const void *, const void *, const void *, const void *, k_elem,
                     const k_dwconv_args *, cudaStream_t, err *);

typedef struct shape {
  int hw, c, k, stride, times;  // input H = W, channels, window, stride, uses per forward
  k_dw_act act;
} shape;

enum { ITERS = 50, ROUNDS = 7, VARIANTS = 5 };  // v1, auto, tile 1, 2, 4

static uint64_t rng = 88172645463325252ull;
static float uniform(float lo, float hi) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return lo + (hi - lo) * (float)((rng >> 11) * (1.0 / 9007199254740992.0));
}

static void *dev_rand(size_t n, k_elem et, float lo, float hi) {
  float *f = malloc(n * 4);
  uint16_t *h = malloc(n * 2);
  if (!f || !h) exit(1);
  for (size_t i = 0; i < n; i++) f[i] = uniform(lo, hi);
  if (et == K_F16) k_f32_to_f16(h, f, n);
  void *d;
  BK_CUDA(cudaMalloc(&d, n * 4));
  BK_CUDA(cudaMemcpy(d, et == K_F16 ? (void *)h : (void *)f, n * (et == K_F16 ? 2 : 4),
                     cudaMemcpyHostToDevice));
  free(f), free(h);
  return d;
}

// Mean milliseconds per launch over ITERS launches.
static float time_one(dw_fn fn, void *y, const void *x, const void *w, const void *b, k_elem et,
                      const k_dwconv_args *a, cudaStream_t st, cudaEvent_t e0, cudaEvent_t e1) {
  err e = {0};
  BK_CUDA(cudaEventRecord(e0, st));
  for (int i = 0; i < ITERS; i++)
    if (fn(y, x, w, b, NULL, et, a, st, &e)) {
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

// Median ms of each variant into med[VARIANTS].
static void run_shape(const shape *sh, int batch, k_elem et, cudaStream_t st, float *med) {
  int pad = sh->k / 2, o = (sh->hw + 2 * pad - sh->k) / sh->stride + 1;
  k_dwconv_args a = {.n = batch, .h = sh->hw, .w = sh->hw, .c = sh->c, .oh = o, .ow = o,
                     .r = sh->k, .s = sh->k, .pad_top = pad, .pad_left = pad,
                     .stride_h = sh->stride, .stride_w = sh->stride, .dil_h = 1, .dil_w = 1,
                     .act = sh->act};
  size_t nx = (size_t)batch * sh->hw * sh->hw * sh->c, ny = (size_t)batch * o * o * sh->c,
         es = et == K_F16 ? 2 : 4;
  void *x = dev_rand(nx, et, -2, 2), *w = dev_rand((size_t)sh->c * sh->k * sh->k, et, -1, 1),
       *b = dev_rand((size_t)sh->c, et, -1, 1), *y[VARIANTS];
  for (int v = 0; v < VARIANTS; v++) BK_CUDA(cudaMalloc(&y[v], ny * es));
  cudaEvent_t e0, e1;
  BK_CUDA(cudaEventCreate(&e0));
  BK_CUDA(cudaEventCreate(&e1));
  static const int tile[VARIANTS] = {0, 0, 1, 2, 4};
  float t[VARIANTS][ROUNDS];
  for (int r = -1; r < ROUNDS; r++)  // round -1: warm-up
    for (int v = 0; v < VARIANTS; v++) {
      k_dwconv_args av = a;
      av.tile_w = tile[v];
      float ms = time_one(v ? k_dwconv_cuda : k_dwconv__v1_cuda, y[v], x, w, b, et, &av, st, e0, e1);
      if (r >= 0) t[v][r] = ms;
    }
  unsigned char *h0 = malloc(ny * es), *h1 = malloc(ny * es);
  if (!h0 || !h1) exit(1);
  BK_CUDA(cudaMemcpy(h0, y[0], ny * es, cudaMemcpyDeviceToHost));
  int same = 1;
  for (int v = 1; v < VARIANTS; v++) {
    BK_CUDA(cudaMemcpy(h1, y[v], ny * es, cudaMemcpyDeviceToHost));
    same &= memcmp(h0, h1, ny * es) == 0;
  }
  for (int v = 0; v < VARIANTS; v++) {
    qsort(t[v], ROUNDS, sizeof t[v][0], cmp_float);
    med[v] = t[v][ROUNDS / 2];
  }
  double gb = (double)(nx + ny) * es / 1e9;  // compulsory traffic
  char name[64];
  snprintf(name, sizeof name, "%dx%d s%d %3dx%-3d C=%d x%d", sh->k, sh->k, sh->stride, sh->hw, sh->hw,
           sh->c, sh->times);
  printf("%-28s v1 %7.4f  new %7.4f (%5.0f GB/s)  tile1 %7.4f  tile2 %7.4f  tile4 %7.4f ms  "
         "v1/new %5.2fx  bits %s\n",
         name, med[0], med[1], gb / (med[1] * 1e-3), med[2], med[3], med[4], med[0] / med[1],
         same ? "same" : "DIFFER");
  free(h0), free(h1);
  BK_CUDA(cudaEventDestroy(e0));
  BK_CUDA(cudaEventDestroy(e1));
  BK_CUDA(cudaFree(x));
  BK_CUDA(cudaFree(w));
  BK_CUDA(cudaFree(b));
  for (int v = 0; v < VARIANTS; v++) BK_CUDA(cudaFree(y[v]));
}

int main(int argc, char **argv) {
  int batch = argc > 1 ? atoi(argv[1]) : 32;
  k_elem et = argc > 2 && strcmp(argv[2], "f32") == 0 ? K_F32 : K_F16;
  if (batch < 1) {
    fprintf(stderr, "usage: %s [batch >= 1] [f32]\n", argv[0]);
    return 2;
  }
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
  printf("bench_k_dwconv: %s (sm_%d%d), %s; MobileNetV3-Large depthwise convs, batch %d, %s, "
         "median of %d rounds x %d launches\n",
         prop.name, prop.major, prop.minor, day, batch, et == K_F16 ? "FP16" : "FP32", ROUNDS, ITERS);
  // torchvision mobilenet_v3_large's inverted residual blocks (input 224x224)
  static const shape shapes[] = {
      {112, 16, 3, 1, 1, K_DW_ACT_RELU},       {112, 64, 3, 2, 1, K_DW_ACT_RELU},
      {56, 72, 3, 1, 1, K_DW_ACT_RELU},        {56, 72, 5, 2, 1, K_DW_ACT_RELU},
      {28, 120, 5, 1, 2, K_DW_ACT_RELU},       {28, 240, 3, 2, 1, K_DW_ACT_HARD_SWISH},
      {14, 200, 3, 1, 1, K_DW_ACT_HARD_SWISH}, {14, 184, 3, 1, 2, K_DW_ACT_HARD_SWISH},
      {14, 480, 3, 1, 1, K_DW_ACT_HARD_SWISH}, {14, 672, 3, 1, 1, K_DW_ACT_HARD_SWISH},
      {14, 672, 5, 2, 1, K_DW_ACT_HARD_SWISH}, {7, 960, 5, 1, 2, K_DW_ACT_HARD_SWISH},
  };
  cudaStream_t st;
  BK_CUDA(cudaStreamCreate(&st));
  double tot[VARIANTS] = {0};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    float med[VARIANTS];
    run_shape(&shapes[i], batch, et, st, med);
    for (int v = 0; v < VARIANTS; v++) tot[v] += shapes[i].times * (double)med[v];
  }
  printf("%-28s v1 %7.4f  new %7.4f               tile1 %7.4f  tile2 %7.4f  tile4 %7.4f ms  "
         "v1/new %5.2fx\n",
         "per forward (all 15)", tot[0], tot[1], tot[2], tot[3], tot[4], tot[0] / tot[1]);
  BK_CUDA(cudaStreamDestroy(st));
  return 0;
}
