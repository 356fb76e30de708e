// tests/bench/kernels/bench_k_attn.c: the FP16 attention kernels side by
// side on one GPU in one run: k_attn__tc2_cuda (mma.sync, softmax in
// registers: k_attn_cuda's default for head sizes 64 and 128),
// k_attn__tc1_cuda (wmma, S through shared memory: the previous default)
// and k_attn__simt_cuda (the CUDA-core kernel), at the shapes the model
// benchmarks run: BERT-base at sequence 128, batch 1, 8, 32 and 64, with a
// padding mask, and ViT-B/16, both in the [B, S, H, D] layout the engine
// passes (K read key-major); a GPT-2-sized causal decoder and a head size
// of 128 (packed heads). Per shape and kernel: the median over 7 rounds of
// the mean time of 50 launches (CUDA events, the kernels alternating round
// by round), the ratios, and the largest difference of tc1's and tc2's
// outputs from simt's as a sanity check (all are tested against the
// reference in tests/gpu/test_k_cuda_attn.c). Exits 77 where no GPU
// answers.
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

typedef int (*attn_fn)(void *, const void *, const void *, const void *, const void *,
                       const void *, k_elem, k_elem, const k_attn_args *, cudaStream_t, err *);

typedef struct shape {
  const char *name;
  int64_t b, h, s, d;
  int mask;  // 0 none, 1 padding [B,1,1,S], 2 causal [S,S]
  int bshd;  // [B, S, H, D] rows (K key-major), as the engine passes BERT and ViT; else packed heads
} shape;

enum { NK = 3 };  // kernels timed: simt, tc1, tc2
static const attn_fn kernels[NK] = {k_attn__simt_cuda, k_attn__tc1_cuda, k_attn__tc2_cuda};

enum { ITERS = 50, ROUNDS = 7 };

static uint64_t rng = 88172645463325252ull;
static float uniform(float lo, float hi) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return lo + (hi - lo) * (float)((rng >> 11) * (1.0 / 9007199254740992.0));
}

static void *dev_half(size_t n, float lo, float hi, const float *fixed) {
  float *f = malloc(n * 4 + 4);
  uint16_t *h = malloc(n * 2 + 2);
  if (!f || !h) exit(1);
  for (size_t i = 0; i < n; i++) f[i] = fixed ? fixed[i] : uniform(lo, hi);
  k_f32_to_f16(h, f, n);
  void *d;
  BK_CUDA(cudaMalloc(&d, n * 2 + 2));
  BK_CUDA(cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice));
  free(f), free(h);
  return d;
}

// Mean milliseconds per launch over ITERS launches.
static float time_one(attn_fn fn, void *o, void *q, void *k, void *v, void *m, const k_attn_args *a,
                      cudaStream_t st, cudaEvent_t e0, cudaEvent_t e1) {
  err e = {0};
  BK_CUDA(cudaEventRecord(e0, st));
  for (int i = 0; i < ITERS; i++)
    if (fn(o, q, k, v, m, NULL, K_F32, K_F16, a, st, &e)) {
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

static void run_shape(const shape *sh, cudaStream_t st) {
  int64_t b = sh->b, h = sh->h, s = sh->s, d = sh->d;
  k_attn_args a = {.b = b, .h = h, .sq = s, .sk = s, .d = d, .dv = d,
                   .scale = 1.0f / sqrtf((float)d), .nan_zero = 1};
  a.q_sh = a.k_sh = a.v_sh = a.o_sh = s * d;
  a.q_sb = a.k_sb = a.v_sb = a.o_sb = h * s * d;
  if (sh->bshd) {  // rows H*D apart, heads D apart; Kt read key-major from K's rows
    a.q_sh = a.k_sh = a.v_sh = a.o_sh = d;
    a.q_ss = a.v_ss = a.o_ss = a.k_sk = h * d, a.k_sd = 1;
  }
  size_t n = (size_t)(b * h * s * d), nm = 0;
  float *mh = NULL;
  if (sh->mask == 1) {  // padding: the last quarter of every other batch row's keys off
    nm = (size_t)(b * s), a.m_sb = s, a.m_sk = 1;
    mh = calloc(nm, 4);
    for (int64_t i = 0; i < b; i++)
      for (int64_t j = 0; j < s; j++) mh[i * s + j] = i % 2 && j >= s - s / 4 ? -INFINITY : 0.0f;
  } else if (sh->mask == 2) {
    nm = (size_t)(s * s), a.m_sq = s, a.m_sk = 1;
    mh = calloc(nm, 4);
    for (int64_t i = 0; i < s; i++)
      for (int64_t j = 0; j < s; j++) mh[i * s + j] = j > i ? -INFINITY : 0.0f;
  }
  void *q = dev_half(n, -2, 2, NULL), *k_ = dev_half(n, -2, 2, NULL), *v = dev_half(n, -1, 1, NULL);
  void *m = nm ? dev_half(nm, 0, 0, mh) : NULL;
  void *out[NK];
  for (int k = 0; k < NK; k++) BK_CUDA(cudaMalloc(&out[k], n * 2));
  cudaEvent_t e0, e1;
  BK_CUDA(cudaEventCreate(&e0));
  BK_CUDA(cudaEventCreate(&e1));
  for (int k = 0; k < NK; k++) time_one(kernels[k], out[k], q, k_, v, m, &a, st, e0, e1);  // warm-up
  float t[NK][ROUNDS];
  for (int r = 0; r < ROUNDS; r++)  // alternating, so drifts (clocks, heat) hit all
    for (int k = 0; k < NK; k++) t[k][r] = time_one(kernels[k], out[k], q, k_, v, m, &a, st, e0, e1);
  for (int k = 0; k < NK; k++) qsort(t[k], ROUNDS, sizeof t[k][0], cmp_float);
  uint16_t *hb = malloc(n * 2);
  float *f[NK];
  for (int k = 0; k < NK; k++) f[k] = malloc(n * 4);
  if (!hb || !f[0] || !f[1] || !f[2]) exit(1);
  for (int k = 0; k < NK; k++) {
    BK_CUDA(cudaMemcpy(hb, out[k], n * 2, cudaMemcpyDeviceToHost));
    k_f16_to_f32(f[k], hb, n);
  }
  double diff[NK] = {0.0, 0.0, 0.0};  // against simt
  for (int k = 1; k < NK; k++)
    for (size_t i = 0; i < n; i++) {
      double x = fabs((double)f[k][i] - (double)f[0][i]);
      if (isnan(x)) {  // a NaN on one side only: reported as nan
        diff[k] = NAN;
        break;
      }
      if (x > diff[k]) diff[k] = x;
    }
  double flop = 4.0 * (double)(b * h) * (double)s * (double)s * (double)d;
  float ms = t[0][ROUNDS / 2], m1 = t[1][ROUNDS / 2], m2 = t[2][ROUNDS / 2];
  printf("%-36s simt %8.4f  tc1 %8.4f  tc2 %8.4f ms (%6.1f TFLOP/s)  tc1/tc2 %5.2fx  simt/tc2 %5.2fx"
         "  max|tc1-simt| %.2g max|tc2-simt| %.2g\n",
         sh->name, ms, m1, m2, flop / (m2 * 1e-3) / 1e12, m1 / m2, ms / m2, diff[1], diff[2]);
  free(hb), free(mh);
  for (int k = 0; k < NK; k++) free(f[k]);
  BK_CUDA(cudaEventDestroy(e0));
  BK_CUDA(cudaEventDestroy(e1));
  BK_CUDA(cudaFree(q));
  BK_CUDA(cudaFree(k_));
  BK_CUDA(cudaFree(v));
  if (m) BK_CUDA(cudaFree(m));
  for (int k = 0; k < NK; k++) BK_CUDA(cudaFree(out[k]));
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
  printf("bench_k_attn: %s (sm_%d%d), %s; FP16, median of %d rounds x %d launches\n", prop.name,
         prop.major, prop.minor, day, ROUNDS, ITERS);
  static const shape shapes[] = {
      {"bert-base b1 h12 s128 d64 pad bshd", 1, 12, 128, 64, 1, 1},
      {"bert-base b8 h12 s128 d64 pad bshd", 8, 12, 128, 64, 1, 1},
      {"bert-base b32 h12 s128 d64 pad bshd", 32, 12, 128, 64, 1, 1},
      {"bert-base b64 h12 s128 d64 pad bshd", 64, 12, 128, 64, 1, 1},
      {"bert-base b32 h12 s128 d64 pad packed", 32, 12, 128, 64, 1, 0},
      {"vit-b16 b32 h12 s197 d64 bshd", 32, 12, 197, 64, 0, 1},
      {"gpt2 b8 h12 s1024 d64 causal", 8, 12, 1024, 64, 2, 0},
      {"d128 b8 h16 s512 causal", 8, 16, 512, 128, 2, 0},
  };
  cudaStream_t st;
  BK_CUDA(cudaStreamCreate(&st));
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) run_shape(&shapes[i], st);
  BK_CUDA(cudaStreamDestroy(st));
  return 0;
}
