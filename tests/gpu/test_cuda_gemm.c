// test_cuda_gemm.c: the cuBLASLt GEMM (engine/cuda/cuda_gemm.c) against a CPU
// reference computed here in double: every epilogue, both transposes, odd
// sizes, k up to 4096, FP32 (TF32 off) and FP16; the shape cache (no second
// heuristic query, LRU eviction); argument checks. Autotuning (a tuner
// attached): the same cases and residuals within the same bounds, each shape
// timed once and its choice shared with a second object, an in-place residual
// left untimed outside a dry pass (and right), and inside a graph capture
// the heuristic's first answer with nothing timed (and the graph right).
//
// Error measure: a dot product of k terms can only be as exact as the sum of
// the magnitudes of its terms, so each element's error is divided by
// S = sum_l |a_il b_lj| + |bias_j| (at least 1):
//   rel = |gpu - ref| / max(S, 1)  <= 1e-5 (FP32), 1e-2 (FP16).
// TF32 arithmetic misses this FP32 bound by far on short sums, which the
// test also checks, so the bound really tells TF32 from FP32.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_gemm.h"
#include "kernels/k_ref.h"

static void require_device(void) {
  int n = 0;
  cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess || n == 0) {
    printf("SKIP: no CUDA device (%s)\n", rc != cudaSuccess ? cudaGetErrorString(rc) : "none visible");
    exit(77);
  }
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float urand(void) {  // uniform in [-1, 1)
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((double)(rng >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
}

static double gelu_tanh(double x) {
  return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}
static double gelu_erf(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }

static int has_bias(eng_gemm_epilogue epi) {
  return epi == ENG_GEMM_EPI_BIAS || epi == ENG_GEMM_EPI_BIAS_RELU || epi == ENG_GEMM_EPI_BIAS_GELU;
}

static double apply_epi(eng_gemm_epilogue epi, double x, double bias) {
  if (has_bias(epi)) x += bias;
  if (epi == ENG_GEMM_EPI_RELU || epi == ENG_GEMM_EPI_BIAS_RELU) return x > 0 ? x : 0;
  if (epi == ENG_GEMM_EPI_GELU || epi == ENG_GEMM_EPI_BIAS_GELU) return gelu_tanh(x);
  return x;
}

typedef struct shape { int m, n, k; } shape;

// One problem: logical A [m,k], B [k,n], bias [n] (already rounded to the
// dtype's precision), and the reference product and magnitude sums.
typedef struct problem {
  shape s;
  eng_gemm_dtype dt;
  float *a, *b, *bias;
  double *ref, *mag;
  size_t esize;
  void *dA, *dB, *dC, *dBias;  // device buffers, big enough for either layout
  void *hC;                    // host result in the dtype
} problem;

static void round_fp16(float *x, size_t n) {
  uint16_t *h = malloc(n * sizeof *h);
  k_f32_to_f16(h, x, n);
  k_f16_to_f32(x, h, n);
  free(h);
}

// Copies logical x [r,c] to the device, transposed ([c,r]) when asked, in the dtype.
static void upload(void *dst, const float *x, int r, int c, int transpose, eng_gemm_dtype dt) {
  size_t n = (size_t)r * c;
  float *t = malloc(n * sizeof *t);
  for (int i = 0; i < r; i++)
    for (int j = 0; j < c; j++) {
      if (transpose) t[(size_t)j * r + i] = x[(size_t)i * c + j];
      else t[(size_t)i * c + j] = x[(size_t)i * c + j];
    }
  if (dt == ENG_GEMM_FP16) {
    uint16_t *h = malloc(n * sizeof *h);
    k_f32_to_f16(h, t, n);
    CHECK_EQ_INT(cudaMemcpy(dst, h, n * 2, cudaMemcpyHostToDevice), cudaSuccess);
    free(h);
  } else {
    CHECK_EQ_INT(cudaMemcpy(dst, t, n * 4, cudaMemcpyHostToDevice), cudaSuccess);
  }
  free(t);
}

static void problem_init(problem *p, shape s, eng_gemm_dtype dt) {
  memset(p, 0, sizeof *p);
  p->s = s;
  p->dt = dt;
  p->esize = dt == ENG_GEMM_FP16 ? 2 : 4;
  size_t mk = (size_t)s.m * s.k, kn = (size_t)s.k * s.n, mn = (size_t)s.m * s.n;
  p->a = malloc(mk * sizeof(float));
  p->b = malloc(kn * sizeof(float));
  p->bias = malloc((size_t)s.n * sizeof(float));
  p->ref = malloc(mn * sizeof(double));
  p->mag = malloc(mn * sizeof(double));
  p->hC = malloc(mn * p->esize);
  for (size_t i = 0; i < mk; i++) p->a[i] = urand();
  for (size_t i = 0; i < kn; i++) p->b[i] = urand();
  for (int i = 0; i < s.n; i++) p->bias[i] = urand();
  if (dt == ENG_GEMM_FP16) {
    round_fp16(p->a, mk);
    round_fp16(p->b, kn);
    round_fp16(p->bias, (size_t)s.n);
  }
  for (int i = 0; i < s.m; i++)
    for (int j = 0; j < s.n; j++) {
      double acc = 0, mag = 0;
      for (int l = 0; l < s.k; l++) {
        double t = (double)p->a[(size_t)i * s.k + l] * (double)p->b[(size_t)l * s.n + j];
        acc += t;
        mag += fabs(t);
      }
      p->ref[(size_t)i * s.n + j] = acc;
      p->mag[(size_t)i * s.n + j] = mag;
    }
  // One spare element in front of each buffer, for the misaligned-pointer case.
  CHECK_EQ_INT(cudaMalloc(&p->dA, (mk + 1) * p->esize), cudaSuccess);
  CHECK_EQ_INT(cudaMalloc(&p->dB, (kn + 1) * p->esize), cudaSuccess);
  CHECK_EQ_INT(cudaMalloc(&p->dC, (mn + 1) * p->esize), cudaSuccess);
  CHECK_EQ_INT(cudaMalloc(&p->dBias, ((size_t)s.n + 1) * p->esize), cudaSuccess);
}

static void problem_free(problem *p) {
  free(p->a);
  free(p->b);
  free(p->bias);
  free(p->ref);
  free(p->mag);
  free(p->hC);
  cudaFree(p->dA);
  cudaFree(p->dB);
  cudaFree(p->dC);
  cudaFree(p->dBias);
}

// Largest relative error of the GPU result (in p->hC) against the reference.
static double max_rel_err(const problem *p, eng_gemm_epilogue epi, double (*act_override)(double)) {
  size_t mn = (size_t)p->s.m * p->s.n;
  float *c = malloc(mn * sizeof *c);
  if (p->dt == ENG_GEMM_FP16) k_f16_to_f32(c, (const uint16_t *)p->hC, mn);
  else memcpy(c, p->hC, mn * sizeof *c);
  double worst = 0;
  for (int i = 0; i < p->s.m; i++)
    for (int j = 0; j < p->s.n; j++) {
      size_t at = (size_t)i * p->s.n + j;
      double bias = has_bias(epi) ? p->bias[j] : 0;
      double want = act_override ? act_override(p->ref[at] + bias) : apply_epi(epi, p->ref[at], bias);
      double scale = p->mag[at] + fabs(bias);
      if (scale < 1) scale = 1;
      double rel = fabs((double)c[at] - want) / scale;
      if (!(rel <= worst)) worst = rel;  // NaN sticks
    }
  free(c);
  return worst;
}

// Runs one case with pointers offset by off elements (0: aligned buffers).
static int run_case(eng_gemm_lt *g, problem *p, int ta, int tb, eng_gemm_epilogue epi,
                    eng_gemm_dtype dt, int off, cudaStream_t st, err *e) {
  const shape s = p->s;
  char *A = (char *)p->dA + off * p->esize, *B = (char *)p->dB + off * p->esize;
  char *C = (char *)p->dC + off * p->esize, *bias = (char *)p->dBias + off * p->esize;
  upload(A, p->a, s.m, s.k, ta, p->dt);
  upload(B, p->b, s.k, s.n, tb, p->dt);
  upload(bias, p->bias, 1, s.n, 0, p->dt);
  CHECK_EQ_INT(cudaMemset(C, 0xff, (size_t)s.m * s.n * p->esize), cudaSuccess);  // NaNs
  int rc = eng_gemm_lt_run(g, C, A, B, has_bias(epi) ? bias : NULL, s.m, s.n, s.k, ta, tb, epi, dt,
                           st, e);
  if (rc != 0) return rc;
  CHECK_EQ_INT(cudaStreamSynchronize(st), cudaSuccess);
  CHECK_EQ_INT(cudaMemcpy(p->hC, C, (size_t)s.m * s.n * p->esize, cudaMemcpyDeviceToHost), cudaSuccess);
  return 0;
}

static const shape shapes[] = {
    {1, 1, 1}, {3, 17, 1}, {17, 3, 1000}, {1000, 17, 3}, {1, 1000, 4096},
    {17, 1000, 1000}, {1000, 1, 17}, {3, 1000, 4096}, {64, 64, 4096},
};

static void test_all_cases(eng_gemm_lt *g, cudaStream_t st) {
  err e;
  int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
  eng_gemm_dtype dts[] = {ENG_GEMM_FP32, ENG_GEMM_FP16};
  for (int d = 0; d < 2; d++) {
    double worst_all = 0;
    for (int si = 0; si < nshapes; si++) {
      problem p;
      problem_init(&p, shapes[si], dts[d]);
      double tol = dts[d] == ENG_GEMM_FP16 ? 1e-2 : 1e-5;
      for (int t = 0; t < 4; t++) {
        int ta = t & 1, tb = t >> 1;
        for (int epi = ENG_GEMM_EPI_NONE; epi <= ENG_GEMM_EPI_BIAS_GELU; epi++) {
          int rc = run_case(g, &p, ta, tb, (eng_gemm_epilogue)epi, dts[d], 0, st, &e);
          CHECK_EQ_INT(rc, 0);
          if (rc != 0) {
            fprintf(stderr, "  %s\n", e.msg);
            continue;
          }
          double rel = max_rel_err(&p, (eng_gemm_epilogue)epi, NULL);
          if (rel > worst_all) worst_all = rel;
          if (!(rel <= tol))
            fprintf(stderr, "case %s m=%d n=%d k=%d ta=%d tb=%d %s: rel %.3g > %.1g\n",
                    eng_gemm_dtype_name(dts[d]), p.s.m, p.s.n, p.s.k, ta, tb,
                    eng_gemm_epilogue_name((eng_gemm_epilogue)epi), rel, tol);
          CHECK(rel <= tol);
          // The same shape again: served from the cache, no heuristic query.
          eng_gemm_lt_stats s0, s1;
          eng_gemm_lt_stats_get(g, &s0);
          CHECK_EQ_INT(run_case(g, &p, ta, tb, (eng_gemm_epilogue)epi, dts[d], 0, st, &e), 0);
          eng_gemm_lt_stats_get(g, &s1);
          CHECK_EQ_INT(s1.heuristic_queries, s0.heuristic_queries);
          CHECK_EQ_INT(s1.cache_hits, s0.cache_hits + 1);
          CHECK(max_rel_err(&p, (eng_gemm_epilogue)epi, NULL) <= tol);
        }
      }
      // Pointers one element off 256-byte alignment still compute right.
      int rc = run_case(g, &p, 0, 1, ENG_GEMM_EPI_BIAS_RELU, dts[d], 1, st, &e);
      CHECK_EQ_INT(rc, 0);
      if (rc != 0) fprintf(stderr, "  misaligned m=%d n=%d k=%d: %s\n", p.s.m, p.s.n, p.s.k, e.msg);
      else CHECK(max_rel_err(&p, ENG_GEMM_EPI_BIAS_RELU, NULL) <= tol);
      problem_free(&p);
    }
    printf("%s: worst relative error over all cases %.3g\n", eng_gemm_dtype_name(dts[d]), worst_all);
  }
}

// The residual (eng_gemm_lt_run_res): C = epilogue(A B + Z + bias), Z added before the
// activation, from a buffer of its own and in place (Z == C: the plan fuses a residual Add that
// ran in place on the residual so), transposes off as the engine's MatMul runs them, M up to
// batch * sequence rows. Z is drawn in [-2, 2) so the Relu sees both signs
// after the sum; the error is scaled by S + |Z|.
static void test_residual(eng_gemm_lt *g, cudaStream_t st) {
  static const shape rs[] = {{1, 1, 1}, {3, 17, 5}, {4 * 128, 64, 96}, {1000, 17, 33}};
  static const eng_gemm_epilogue epis[] = {ENG_GEMM_EPI_NONE, ENG_GEMM_EPI_RELU, ENG_GEMM_EPI_BIAS,
                                           ENG_GEMM_EPI_BIAS_RELU, ENG_GEMM_EPI_BIAS_GELU};
  eng_gemm_dtype dts[] = {ENG_GEMM_FP32, ENG_GEMM_FP16};
  err e = {0};
  for (int d = 0; d < 2; d++) {
    double worst = 0, tol = dts[d] == ENG_GEMM_FP16 ? 1e-2 : 1e-5;
    for (size_t si = 0; si < sizeof rs / sizeof rs[0]; si++) {
      problem p;
      problem_init(&p, rs[si], dts[d]);
      size_t mn = (size_t)p.s.m * p.s.n;
      float *z = malloc(mn * sizeof *z), *c = malloc(mn * sizeof *c);
      for (size_t i = 0; i < mn; i++) z[i] = 2.0f * urand();
      if (dts[d] == ENG_GEMM_FP16) round_fp16(z, mn);
      void *dZ = NULL;
      CHECK_EQ_INT(cudaMalloc(&dZ, mn * p.esize), cudaSuccess);
      upload(p.dA, p.a, p.s.m, p.s.k, 0, p.dt);
      upload(p.dB, p.b, p.s.k, p.s.n, 0, p.dt);
      upload(p.dBias, p.bias, 1, p.s.n, 0, p.dt);
      for (size_t ei = 0; ei < sizeof epis / sizeof epis[0]; ei++)
        for (int in_place = 0; in_place < 2; in_place++) {
          eng_gemm_epilogue epi = epis[ei];
          void *C = p.dC, *Z = in_place ? p.dC : dZ;
          upload(Z, z, p.s.m, p.s.n, 0, p.dt);
          if (!in_place) CHECK_EQ_INT(cudaMemset(C, 0xff, mn * p.esize), cudaSuccess);  // NaNs
          int rc = eng_gemm_lt_run_res(g, C, p.dA, p.dB, has_bias(epi) ? p.dBias : NULL, Z, p.s.m,
                                       p.s.n, p.s.k, 0, 0, epi, p.dt, st, &e);
          CHECK_EQ_INT(rc, 0);
          if (rc) {
            fprintf(stderr, "residual %s m=%d n=%d k=%d %s: %s\n", eng_gemm_dtype_name(p.dt), p.s.m,
                    p.s.n, p.s.k, eng_gemm_epilogue_name(epi), e.msg);
            continue;
          }
          CHECK_EQ_INT(cudaStreamSynchronize(st), cudaSuccess);
          CHECK_EQ_INT(cudaMemcpy(p.hC, C, mn * p.esize, cudaMemcpyDeviceToHost), cudaSuccess);
          if (p.dt == ENG_GEMM_FP16) k_f16_to_f32(c, (const uint16_t *)p.hC, mn);
          else memcpy(c, p.hC, mn * sizeof *c);
          double w = 0;
          for (int i = 0; i < p.s.m; i++)
            for (int j = 0; j < p.s.n; j++) {
              size_t at = (size_t)i * p.s.n + j;
              double bias = has_bias(epi) ? p.bias[j] : 0;
              double want = apply_epi(epi, p.ref[at] + z[at], bias);
              double scale = p.mag[at] + fabs(bias) + fabs(z[at]);
              if (scale < 1) scale = 1;
              double rel = fabs((double)c[at] - want) / scale;
              if (!(rel <= w)) w = rel;
            }
          if (!(w <= tol))
            fprintf(stderr, "residual %s m=%d n=%d k=%d %s%s: rel %.3g > %.1g\n",
                    eng_gemm_dtype_name(p.dt), p.s.m, p.s.n, p.s.k, eng_gemm_epilogue_name(epi),
                    in_place ? " in place" : "", w, tol);
          CHECK(w <= tol);
          if (!(w <= worst)) worst = w;
        }
      cudaFree(dZ);
      free(z);
      free(c);
      problem_free(&p);
    }
    printf("%s residual: worst relative error %.3g\n", eng_gemm_dtype_name(dts[d]), worst);
  }
  // a misaligned residual is refused like the other operands
  problem p;
  problem_init(&p, (shape){4, 4, 4}, ENG_GEMM_FP32);
  CHECK_EQ_INT(eng_gemm_lt_run_res(g, p.dC, p.dA, p.dB, NULL, (char *)p.dC + 2, 4, 4, 4, 0, 0,
                                   ENG_GEMM_EPI_NONE, ENG_GEMM_FP32, st, &e),
               ERR_INVALID_ARGUMENT);
  problem_free(&p);
}

// cuBLASLt's GELU is the tanh form: check it on a ramp of inputs, where the
// tanh and erf forms differ by up to ~5e-4.
static void test_gelu_form(eng_gemm_lt *g, cudaStream_t st) {
  err e;
  problem p;
  shape s = {1, 1000, 1};
  problem_init(&p, s, ENG_GEMM_FP32);
  p.a[0] = 1.0f;
  for (int j = 0; j < s.n; j++) p.b[j] = -5.0f + 10.0f * (float)j / (float)(s.n - 1);
  for (int j = 0; j < s.n; j++) {
    p.ref[j] = p.b[j];
    p.mag[j] = fabs(p.b[j]);
  }
  CHECK_EQ_INT(run_case(g, &p, 0, 0, ENG_GEMM_EPI_GELU, ENG_GEMM_FP32, 0, st, &e), 0);
  double vs_tanh = max_rel_err(&p, ENG_GEMM_EPI_GELU, gelu_tanh);
  double vs_erf = max_rel_err(&p, ENG_GEMM_EPI_GELU, gelu_erf);
  printf("gelu: max error vs tanh form %.3g, vs erf form %.3g\n", vs_tanh, vs_erf);
  CHECK(vs_tanh <= 1e-5);
  CHECK(vs_erf > 1e-4);
  problem_free(&p);
}

// TF32 is opt-in: its inputs keep 10 mantissa bits, so on a short sum its
// error (~2^-11 / sqrt(k)) is far above the FP32 bound, which shows both that
// ENG_GEMM_FP32 does not use it and that the bound can fail.
static void test_tf32(eng_gemm_lt *g, cudaStream_t st) {
  err e;
  problem p;
  shape s = {64, 64, 16};
  problem_init(&p, s, ENG_GEMM_FP32);
  CHECK_EQ_INT(run_case(g, &p, 0, 0, ENG_GEMM_EPI_NONE, ENG_GEMM_FP32, 0, st, &e), 0);
  double fp32 = max_rel_err(&p, ENG_GEMM_EPI_NONE, NULL);
  CHECK_EQ_INT(run_case(g, &p, 0, 0, ENG_GEMM_EPI_NONE, ENG_GEMM_FP32_TF32, 0, st, &e), 0);
  double tf32 = max_rel_err(&p, ENG_GEMM_EPI_NONE, NULL);
  printf("k=16: fp32 error %.3g, tf32 error %.3g\n", fp32, tf32);
  CHECK(fp32 <= 1e-5);
  CHECK(tf32 > 1e-4);
  CHECK(tf32 <= 1e-2);
  problem_free(&p);
}

static void test_cache_lru(cudaStream_t st) {
  err e;
  eng_gemm_lt *g = NULL;
  CHECK_EQ_INT(eng_gemm_lt_create(&g, 0, 2, &e), 0);  // no workspace, two shapes
  if (!g) return;
  problem px, py, pz;
  problem_init(&px, (shape){5, 7, 9}, ENG_GEMM_FP32);
  problem_init(&py, (shape){6, 7, 9}, ENG_GEMM_FP32);
  problem_init(&pz, (shape){7, 7, 9}, ENG_GEMM_FP32);
  problem *seq[] = {&px, &py, &px, &pz, &px, &py};
  uint64_t want_queries[] = {1, 2, 2, 3, 3, 4};  // z evicts y (least recently used), not x
  for (int i = 0; i < 6; i++) {
    CHECK_EQ_INT(run_case(g, seq[i], 0, 0, ENG_GEMM_EPI_NONE, ENG_GEMM_FP32, 0, st, &e), 0);
    CHECK(max_rel_err(seq[i], ENG_GEMM_EPI_NONE, NULL) <= 1e-5);
    eng_gemm_lt_stats s;
    eng_gemm_lt_stats_get(g, &s);
    CHECK_EQ_INT(s.heuristic_queries, want_queries[i]);
  }
  eng_gemm_lt_stats s;
  eng_gemm_lt_stats_get(g, &s);
  CHECK_EQ_INT(s.cached, 2);
  CHECK_EQ_INT(s.evictions, 2);
  CHECK_EQ_INT(s.cache_hits, 2);
  CHECK_EQ_INT(s.cache_misses, 4);
  CHECK_EQ_INT(s.runs, 6);
  problem_free(&px);
  problem_free(&py);
  problem_free(&pz);
  eng_gemm_lt_destroy(g);
}

static void test_arguments(eng_gemm_lt *g, cudaStream_t st) {
  err e;
  problem p;
  problem_init(&p, (shape){4, 4, 4}, ENG_GEMM_FP32);
  eng_gemm_lt_stats s0, s1;
  eng_gemm_lt_stats_get(g, &s0);
  CHECK_EQ_INT(eng_gemm_lt_run(g, p.dC, p.dA, p.dB, NULL, 4, 4, 4, 0, 0, ENG_GEMM_EPI_BIAS,
                               ENG_GEMM_FP32, st, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "needs a bias");
  CHECK_EQ_INT(eng_gemm_lt_run(g, p.dC, p.dA, p.dB, p.dBias, 4, 4, 4, 0, 0, ENG_GEMM_EPI_RELU,
                               ENG_GEMM_FP32, st, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "takes no bias");
  CHECK_EQ_INT(eng_gemm_lt_run(g, p.dC, p.dA, p.dB, NULL, 0, 4, 4, 0, 0, ENG_GEMM_EPI_NONE,
                               ENG_GEMM_FP32, st, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "m=0");
  CHECK_EQ_INT(eng_gemm_lt_run(g, (char *)p.dC + 2, p.dA, p.dB, NULL, 4, 4, 4, 0, 0,
                               ENG_GEMM_EPI_NONE, ENG_GEMM_FP32, st, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "aligned");
  CHECK_EQ_INT(eng_gemm_lt_run(g, p.dC, NULL, p.dB, NULL, 4, 4, 4, 0, 0, ENG_GEMM_EPI_NONE,
                               ENG_GEMM_FP32, st, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(eng_gemm_lt_run(g, p.dC, p.dA, p.dB, NULL, 4, 4, 4, 0, 0, (eng_gemm_epilogue)99,
                               ENG_GEMM_FP32, st, &e), ERR_INVALID_ARGUMENT);
  eng_gemm_lt_stats_get(g, &s1);
  CHECK_EQ_INT(s1.runs, s0.runs);
  CHECK_EQ_INT(s1.heuristic_queries, s0.heuristic_queries);
  problem_free(&p);
}

// --- autotuning

static int tuner_shapes(const eng_gemm_tuner *t) {
  eng_gemm_tuner_stats ts;
  eng_gemm_tuner_stats_get(t, &ts);
  return (int)ts.shapes;
}

// Transformer-sized products (BERT-base at batch 2, sequence 128: QKV, FFN1
// with GELU, FFN2 and the output projection) and odd ones, FP16 and FP32,
// timed then checked; the second call of each is a cache hit that times
// nothing; a second object on the same tuner takes the choices untimed.
static void test_autotune_shapes(eng_gemm_tuner *t, cudaStream_t st) {
  static const shape ts[] = {{256, 2304, 768}, {256, 3072, 768}, {256, 768, 3072}, {256, 768, 768},
                             {17, 1000, 1000}, {1000, 17, 3}};
  static const eng_gemm_epilogue epis[] = {ENG_GEMM_EPI_BIAS, ENG_GEMM_EPI_BIAS_GELU, ENG_GEMM_EPI_BIAS,
                                           ENG_GEMM_EPI_NONE, ENG_GEMM_EPI_BIAS_RELU, ENG_GEMM_EPI_RELU};
  eng_gemm_dtype dts[] = {ENG_GEMM_FP16, ENG_GEMM_FP32};
  err e = {0};
  eng_gemm_lt *g = NULL, *g2 = NULL;
  CHECK_EQ_INT(eng_gemm_lt_create(&g, 32u << 20, 0, &e), 0);
  CHECK_EQ_INT(eng_gemm_lt_create(&g2, 32u << 20, 0, &e), 0);
  if (!g || !g2) goto out;
  eng_gemm_lt_set_tuner(g, t);
  eng_gemm_lt_set_tuner(g2, t);
  for (int d = 0; d < 2; d++) {
    double tol = dts[d] == ENG_GEMM_FP16 ? 1e-2 : 1e-5;
    for (size_t si = 0; si < sizeof ts / sizeof ts[0]; si++) {
      problem p;
      problem_init(&p, ts[si], dts[d]);
      eng_gemm_lt_stats s0, s1, s2;
      eng_gemm_lt_stats_get(g, &s0);
      int shapes0 = tuner_shapes(t);
      int rc = run_case(g, &p, 0, si % 2, epis[si], dts[d], 0, st, &e);
      CHECK_EQ_INT(rc, 0);
      if (rc) fprintf(stderr, "autotune m=%d n=%d k=%d: %s\n", p.s.m, p.s.n, p.s.k, e.msg);
      double rel = max_rel_err(&p, epis[si], NULL);
      if (!(rel <= tol))
        fprintf(stderr, "autotune %s m=%d n=%d k=%d %s: rel %.3g > %.1g\n", eng_gemm_dtype_name(dts[d]), p.s.m,
                p.s.n, p.s.k, eng_gemm_epilogue_name(epis[si]), rel, tol);
      CHECK(rel <= tol);
      eng_gemm_lt_stats_get(g, &s1);
      CHECK_EQ_INT(s1.tuned, s0.tuned + 1);  // timed on its first call
      CHECK_EQ_INT(tuner_shapes(t), shapes0 + 1);
      CHECK(s1.tune_ns > s0.tune_ns);
      // again: a cache hit, nothing timed, no heuristic query, still right
      CHECK_EQ_INT(run_case(g, &p, 0, si % 2, epis[si], dts[d], 0, st, &e), 0);
      eng_gemm_lt_stats_get(g, &s2);
      CHECK_EQ_INT(s2.cache_hits, s1.cache_hits + 1);
      CHECK_EQ_INT(s2.tuned, s1.tuned);
      CHECK_EQ_INT(s2.heuristic_queries, s1.heuristic_queries);
      CHECK(max_rel_err(&p, epis[si], NULL) <= tol);
      // another object on the tuner (a plan's second slot): adopts the choice, times nothing
      eng_gemm_lt_stats_get(g2, &s0);
      CHECK_EQ_INT(run_case(g2, &p, 0, si % 2, epis[si], dts[d], 0, st, &e), 0);
      eng_gemm_lt_stats_get(g2, &s1);
      CHECK_EQ_INT(s1.tune_adopted, s0.tune_adopted + 1);
      CHECK_EQ_INT(s1.tuned, 0);
      CHECK_EQ_INT(tuner_shapes(t), shapes0 + 1);
      CHECK(max_rel_err(&p, epis[si], NULL) <= tol);
      problem_free(&p);
    }
  }
  eng_gemm_tuner_stats ts2;
  eng_gemm_tuner_stats_get(t, &ts2);
  printf("autotune: %llu shapes, %llu candidates timed in %.1f ms, %llu improved; one run of each: "
         "heuristic's first %.1f us, kept %.1f us\n",
         (unsigned long long)ts2.shapes, (unsigned long long)ts2.candidates, (double)ts2.tune_ns / 1e6,
         (unsigned long long)ts2.improved, ts2.first_us, ts2.best_us);
  CHECK(ts2.candidates >= ts2.shapes);
  CHECK(ts2.best_us <= ts2.first_us);  // the first answer is a candidate: never worse than it
out:
  eng_gemm_lt_destroy(g);
  eng_gemm_lt_destroy(g2);
}

// A residual added in place (Z == C): timing would add it again at every
// run, so outside a dry pass the shape is not timed and the result is right;
// in a dry pass it is timed (what that pass computes is not looked at); after
// it the same call is right again with the timed algorithm.
static void test_autotune_in_place(eng_gemm_tuner *t, cudaStream_t st) {
  err e = {0};
  eng_gemm_lt *g = NULL;
  CHECK_EQ_INT(eng_gemm_lt_create(&g, 32u << 20, 0, &e), 0);
  if (!g) return;
  eng_gemm_lt_set_tuner(g, t);
  problem p;
  problem_init(&p, (shape){384, 768, 512}, ENG_GEMM_FP16);
  size_t mn = (size_t)p.s.m * p.s.n;
  float *z = malloc(mn * sizeof *z), *c = malloc(mn * sizeof *c);
  for (size_t i = 0; i < mn; i++) z[i] = 2.0f * urand();
  round_fp16(z, mn);
  upload(p.dA, p.a, p.s.m, p.s.k, 0, p.dt);
  upload(p.dB, p.b, p.s.k, p.s.n, 0, p.dt);
  upload(p.dBias, p.bias, 1, p.s.n, 0, p.dt);
  for (int step = 0; step < 3; step++) {  // 0: untimed, 1: dry pass, 2: timed algorithm
    eng_gemm_lt_set_dry(g, step == 1);
    upload(p.dC, z, p.s.m, p.s.n, 0, p.dt);
    eng_gemm_lt_stats s0, s1;
    eng_gemm_lt_stats_get(g, &s0);
    int rc = eng_gemm_lt_run_res(g, p.dC, p.dA, p.dB, p.dBias, p.dC, p.s.m, p.s.n, p.s.k, 0, 0,
                                 ENG_GEMM_EPI_BIAS, p.dt, st, &e);
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(cudaStreamSynchronize(st), cudaSuccess);
    eng_gemm_lt_stats_get(g, &s1);
    CHECK_EQ_INT(s1.tune_skipped, s0.tune_skipped + (step == 0));
    CHECK_EQ_INT(s1.tuned, s0.tuned + (step == 1));
    if (step == 1) continue;
    CHECK_EQ_INT(cudaMemcpy(p.hC, p.dC, mn * p.esize, cudaMemcpyDeviceToHost), cudaSuccess);
    k_f16_to_f32(c, (const uint16_t *)p.hC, mn);
    double w = 0;
    for (size_t at = 0; at < mn; at++) {
      double bias = p.bias[at % (size_t)p.s.n];
      double scale = p.mag[at] + fabs(bias) + fabs(z[at]);
      double rel = fabs((double)c[at] - (p.ref[at] + z[at] + bias)) / (scale < 1 ? 1 : scale);
      if (!(rel <= w)) w = rel;
    }
    if (!(w <= 1e-2)) fprintf(stderr, "autotune in place, step %d: rel %.3g\n", step, w);
    CHECK(w <= 1e-2);
  }
  eng_gemm_lt_set_dry(g, false);
  free(z);
  free(c);
  problem_free(&p);
  eng_gemm_lt_destroy(g);
}

// A shape first met inside a stream capture: nothing is timed (no event
// sync or graph of its own may happen there), the heuristic's first answer
// is captured and the graph computes right; the next call outside a capture
// times it.
static void test_autotune_capture(eng_gemm_tuner *t, cudaStream_t st) {
  err e = {0};
  eng_gemm_lt *g = NULL;
  CHECK_EQ_INT(eng_gemm_lt_create(&g, 32u << 20, 0, &e), 0);
  if (!g) return;
  eng_gemm_lt_set_tuner(g, t);
  problem p;
  problem_init(&p, (shape){320, 640, 448}, ENG_GEMM_FP16);
  upload(p.dA, p.a, p.s.m, p.s.k, 0, p.dt);
  upload(p.dB, p.b, p.s.k, p.s.n, 0, p.dt);
  upload(p.dBias, p.bias, 1, p.s.n, 0, p.dt);
  CHECK_EQ_INT(cudaMemset(p.dC, 0xff, (size_t)p.s.m * p.s.n * p.esize), cudaSuccess);
  int shapes0 = tuner_shapes(t);
  eng_gemm_lt_stats s0, s1;
  eng_gemm_lt_stats_get(g, &s0);
  CHECK_EQ_INT(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  int rc = eng_gemm_lt_run(g, p.dC, p.dA, p.dB, p.dBias, p.s.m, p.s.n, p.s.k, 0, 0, ENG_GEMM_EPI_BIAS_RELU,
                           p.dt, st, &e);
  cudaGraph_t graph = NULL;
  CHECK_EQ_INT(cudaStreamEndCapture(st, &graph), cudaSuccess);  // not invalidated by the tuner
  CHECK_EQ_INT(rc, 0);
  eng_gemm_lt_stats_get(g, &s1);
  CHECK_EQ_INT(s1.tuned, s0.tuned);
  CHECK_EQ_INT(s1.tune_skipped, s0.tune_skipped + 1);
  CHECK_EQ_INT(tuner_shapes(t), shapes0);
  cudaGraphExec_t exec = NULL;
  if (graph) {
    CHECK_EQ_INT(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    if (exec) {
      CHECK_EQ_INT(cudaGraphLaunch(exec, st), cudaSuccess);
      CHECK_EQ_INT(cudaStreamSynchronize(st), cudaSuccess);
      CHECK_EQ_INT(cudaMemcpy(p.hC, p.dC, (size_t)p.s.m * p.s.n * p.esize, cudaMemcpyDeviceToHost), cudaSuccess);
      CHECK(max_rel_err(&p, ENG_GEMM_EPI_BIAS_RELU, NULL) <= 1e-2);
      (void)cudaGraphExecDestroy(exec);
    }
    (void)cudaGraphDestroy(graph);
  }
  // outside the capture the same shape is timed, and still right
  CHECK_EQ_INT(run_case(g, &p, 0, 0, ENG_GEMM_EPI_BIAS_RELU, p.dt, 0, st, &e), 0);
  eng_gemm_lt_stats_get(g, &s0);
  CHECK_EQ_INT(s0.tuned, s1.tuned + 1);
  CHECK_EQ_INT(tuner_shapes(t), shapes0 + 1);
  CHECK(max_rel_err(&p, ENG_GEMM_EPI_BIAS_RELU, NULL) <= 1e-2);
  problem_free(&p);
  eng_gemm_lt_destroy(g);
}

static void test_autotune(cudaStream_t st) {
  err e = {0};
  eng_gemm_tuner *t = NULL;
  CHECK_EQ_INT(eng_gemm_tuner_create(&t, &(eng_gemm_tune_opts){.max_candidates = 33}, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "max_candidates");
  CHECK_EQ_INT(eng_gemm_tuner_create(&t, &(eng_gemm_tune_opts){.min_flops = -1}, &e), ERR_INVALID_ARGUMENT);
  // below the default min_flops a shape keeps the heuristic's first answer, untimed
  CHECK_EQ_INT(eng_gemm_tuner_create(&t, NULL, &e), 0);
  if (t) {
    eng_gemm_lt *g = NULL;
    CHECK_EQ_INT(eng_gemm_lt_create(&g, 32u << 20, 0, &e), 0);
    if (g) {
      eng_gemm_lt_set_tuner(g, t);
      problem p;
      problem_init(&p, (shape){8, 32, 64}, ENG_GEMM_FP32);
      CHECK_EQ_INT(run_case(g, &p, 0, 1, ENG_GEMM_EPI_BIAS_RELU, ENG_GEMM_FP32, 0, st, &e), 0);
      CHECK(max_rel_err(&p, ENG_GEMM_EPI_BIAS_RELU, NULL) <= 1e-5);
      eng_gemm_lt_stats s;
      eng_gemm_lt_stats_get(g, &s);
      CHECK_EQ_INT(s.tuned, 0);
      CHECK_EQ_INT(s.tune_small, 1);
      CHECK_EQ_INT(tuner_shapes(t), 0);
      problem_free(&p);
      eng_gemm_lt_destroy(g);
    }
    eng_gemm_tuner_destroy(t);
    t = NULL;
  }
  // the rest times every shape, however small
  CHECK_EQ_INT(eng_gemm_tuner_create(&t, &(eng_gemm_tune_opts){.min_flops = 1}, &e), 0);
  if (!t) return;
  test_autotune_shapes(t, st);
  test_autotune_in_place(t, st);
  test_autotune_capture(t, st);
  // the existing cases and residuals with autotuning on, within the same bounds
  eng_gemm_lt *g = NULL;
  CHECK_EQ_INT(eng_gemm_lt_create(&g, 32u << 20, 0, &e), 0);
  if (g) {
    eng_gemm_lt_set_tuner(g, t);
    test_residual(g, st);
    test_all_cases(g, st);
    eng_gemm_lt_stats s;
    eng_gemm_lt_stats_get(g, &s);
    printf("autotuned cases: %llu shapes timed, %llu adopted, %llu left untimed (in place), %.1f ms\n",
           (unsigned long long)s.tuned, (unsigned long long)s.tune_adopted, (unsigned long long)s.tune_skipped,
           (double)s.tune_ns / 1e6);
    CHECK(s.tuned > 0);
    CHECK_EQ_INT(s.heuristic_queries, s.cache_misses + s.tuned);  // one more query per timed shape
    eng_gemm_lt_destroy(g);
  }
  eng_gemm_tuner_destroy(t);
}

// BERT-base's products (tokens x hidden, FP16 with the bias epilogue) with
// cluster kernels left out: every answer right, and none kept clustered.
static void test_no_clusters(cudaStream_t st) {
  err e;
  eng_gemm_lt *g = NULL;
  CHECK_EQ_INT(eng_gemm_lt_create(&g, 32u << 20, 0, &e), 0);
  if (!g) return;
  eng_gemm_lt_set_no_clusters(g, true);
  const shape bert[] = {{128, 2304, 768}, {256, 768, 768}, {384, 3072, 768}, {256, 768, 3072}};
  double worst = 0;
  for (size_t i = 0; i < sizeof bert / sizeof bert[0]; i++) {
    problem p;
    problem_init(&p, bert[i], ENG_GEMM_FP16);
    CHECK_EQ_INT(run_case(g, &p, 0, 1, ENG_GEMM_EPI_BIAS, ENG_GEMM_FP16, 0, st, &e), 0);
    double r = max_rel_err(&p, ENG_GEMM_EPI_BIAS, NULL);
    if (!(r <= worst)) worst = r;
    problem_free(&p);
  }
  eng_gemm_lt_stats s;
  eng_gemm_lt_stats_get(g, &s);
  printf("no clusters: BERT shapes worst rel err %.3g; shapes forced to 1x1x1 %llu, kept clustered %llu, "
         "heuristic queries %llu\n",
         worst, (unsigned long long)s.cluster_forced, (unsigned long long)s.cluster_kept,
         (unsigned long long)s.heuristic_queries);
  CHECK(worst <= 1e-2);  // test_all_cases' FP16 bound
  CHECK_EQ_INT(s.cluster_kept, 0);
  eng_gemm_lt_destroy(g);
}

int main(void) {
  require_device();
  err e;
  cudaStream_t st;
  CHECK_EQ_INT(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  eng_gemm_lt *g = NULL;
  CHECK_EQ_INT(eng_gemm_lt_create(&g, 32u << 20, 0, &e), 0);
  if (!g) {
    fprintf(stderr, "create: %s\n", e.msg);
    CHECK_DONE();
  }
  test_arguments(g, st);
  test_gelu_form(g, st);
  test_tf32(g, st);
  test_residual(g, st);
  test_all_cases(g, st);
  eng_gemm_lt_stats s;
  eng_gemm_lt_stats_get(g, &s);
  printf("runs %llu, cache hits %llu, misses %llu, heuristic queries %llu, evictions %llu\n",
         (unsigned long long)s.runs, (unsigned long long)s.cache_hits,
         (unsigned long long)s.cache_misses, (unsigned long long)s.heuristic_queries,
         (unsigned long long)s.evictions);
  CHECK_EQ_INT(s.heuristic_queries, s.cache_misses);  // one query per new key, none per hit
  CHECK_EQ_INT(s.cached, 64);
  CHECK(s.evictions > 0);
  eng_gemm_lt_destroy(g);
  test_cache_lru(st);
  test_autotune(st);
  test_no_clusters(st);
  CHECK_EQ_INT(cudaStreamDestroy(st), cudaSuccess);
  CHECK_DONE();
}
