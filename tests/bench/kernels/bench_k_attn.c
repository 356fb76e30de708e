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
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/k_cuda.h"
#include "tests/bench/kernels/bench_k_util.h"

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

// One timing's launches: one kernel on one shape's buffers.
typedef struct attn_run {
  attn_fn fn;
  void *o;
  const void *q, *k, *v, *m;
  const k_attn_args *a;
} attn_run;

static int attn_launch(const void *ctx, int i, cudaStream_t st, err *e) {
  const attn_run *r = ctx;
  (void)i;
  return r->fn(r->o, r->q, r->k, r->v, r->m, NULL, K_F32, K_F16, r->a, st, e);
}

static void run_shape(const shape *sh, bk_rng *rng, cudaStream_t st) {
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
  void *q = bk_dev_rand(rng, n, 1, -2, 2), *k_ = bk_dev_rand(rng, n, 1, -2, 2);
  void *v = bk_dev_rand(rng, n, 1, -1, 1);
  void *m = nm ? bk_dev_upload(mh, nm, 1) : NULL;
  void *out[NK];
  for (int k = 0; k < NK; k++) CUDA_DIE(cudaMalloc(&out[k], n * 2));
  attn_run run[NK];
  for (int k = 0; k < NK; k++) run[k] = (attn_run){kernels[k], out[k], q, k_, v, m, &a};
  bk_timer tm;
  bk_timer_open(&tm, st);
  for (int k = 0; k < NK; k++) bk_time(&tm, attn_launch, &run[k]);  // warm-up
  float t[NK][BK_ROUNDS];
  for (int r = 0; r < BK_ROUNDS; r++)  // alternating, so drifts (clocks, heat) hit all
    for (int k = 0; k < NK; k++) t[k][r] = bk_time(&tm, attn_launch, &run[k]);
  uint16_t *hb = malloc(n * 2);
  float *f[NK];
  for (int k = 0; k < NK; k++) f[k] = malloc(n * 4);
  if (!hb || !f[0] || !f[1] || !f[2]) exit(1);
  for (int k = 0; k < NK; k++) {
    CUDA_DIE(cudaMemcpy(hb, out[k], n * 2, cudaMemcpyDeviceToHost));
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
  float ms = bk_median(t[0], BK_ROUNDS), m1 = bk_median(t[1], BK_ROUNDS),
        m2 = bk_median(t[2], BK_ROUNDS);
  printf("%-36s simt %8.4f  tc1 %8.4f  tc2 %8.4f ms (%6.1f TFLOP/s)  tc1/tc2 %5.2fx  simt/tc2 %5.2fx"
         "  max|tc1-simt| %.2g max|tc2-simt| %.2g\n",
         sh->name, ms, m1, m2, flop / (m2 * 1e-3) / 1e12, m1 / m2, ms / m2, diff[1], diff[2]);
  free(hb), free(mh);
  for (int k = 0; k < NK; k++) free(f[k]);
  bk_timer_close(&tm);
  CUDA_DIE(cudaFree(q));
  CUDA_DIE(cudaFree(k_));
  CUDA_DIE(cudaFree(v));
  if (m) CUDA_DIE(cudaFree(m));
  for (int k = 0; k < NK; k++) CUDA_DIE(cudaFree(out[k]));
}

int main(void) {
  struct cudaDeviceProp prop;
  char day[32];
  int rc = bk_open_device(&prop, day, sizeof day);
  if (rc) return rc;
  printf("bench_k_attn: %s (sm_%d%d), %s; FP16, median of %d rounds x %d launches\n", prop.name,
         prop.major, prop.minor, day, BK_ROUNDS, BK_ITERS);
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
  bk_rng rng = BK_RNG_INIT;
  cudaStream_t st;
  CUDA_DIE(cudaStreamCreate(&st));
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) run_shape(&shapes[i], &rng, st);
  CUDA_DIE(cudaStreamDestroy(st));
  return 0;
}
