// tests/gpu/test_k_cuda_util.h: shared pieces of the GPU kernel tests
// (test_k_cuda_*.c): the device probe that skips with exit 77, a seeded
// RNG, device buffers that abort the test on a CUDA failure, a watchdog
// on launched work (tk_await), and element comparisons that print the
// worst mismatches and count them.
#ifndef INFERD_TESTS_GPU_TEST_K_CUDA_UTIL_H
#define INFERD_TESTS_GPU_TEST_K_CUDA_UTIL_H

#include <cuda_runtime_api.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "cuda_die.h"
#include "kernels/k_cuda.h"

// A test aborts on a CUDA failure in its own plumbing (alloc, copy, sync):
// nothing after it could be trusted. Kernel launch results are CHECKed.
#define TK_CUDA(call) CUDA_DIE(call)

// Asserts a launcher returned 0, printing its message otherwise.
#define TK_OK(call)                                                             \
  do {                                                                          \
    err tk_e_ = {0};                                                            \
    int tk_r_ = (call);                                                         \
    check_count_++;                                                             \
    if (tk_r_ != 0) CHECK_FAIL_("%s returned %d: %s", #call, tk_r_, tk_e_.msg); \
  } while (0)
// TK_OK's calls pass `&tk_e_` as their err.
#define TK_E (&tk_e_)

// Host-side checks (argument validation) run everywhere; the GPU part only
// where a device answers. Called after the host checks: with no device,
// exits 77 (ctest: skipped) if they passed, 1 if they did not.
static inline void tk_require_device(void) {
  int count = 0;
  cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess || count == 0) {
    printf("SKIP: no CUDA device (%s)\n", rc != cudaSuccess ? cudaGetErrorString(rc) : "0 devices");
    if (check_failures_) {
      fprintf(stderr, "%d of %d host-side checks failed\n", check_failures_, check_count_);
      exit(1);
    }
    exit(77);
  }
  struct cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
    printf("device 0: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
}

// --- RNG: xorshift64*, so every run draws the same numbers.
typedef struct tk_rng {
  uint64_t s;
} tk_rng;

static inline uint64_t tk_next(tk_rng *r) {
  r->s ^= r->s >> 12;
  r->s ^= r->s << 25;
  r->s ^= r->s >> 27;
  return r->s * UINT64_C(2685821657736338717);
}

// Uniform in [lo, hi).
static inline float tk_uniform(tk_rng *r, float lo, float hi) {
  return lo + (hi - lo) * (float)((tk_next(r) >> 40) * (1.0 / 16777216.0));
}

static inline void tk_fill(tk_rng *r, float *x, size_t n, float lo, float hi) {
  for (size_t i = 0; i < n; i++) x[i] = tk_uniform(r, lo, hi);
}

// --- device buffers
static inline void *tk_dev_alloc(size_t bytes) {
  void *p = NULL;
  TK_CUDA(cudaMalloc(&p, bytes ? bytes : 1));
  return p;
}

static inline void *tk_to_dev(const void *h, size_t bytes) {
  void *d = tk_dev_alloc(bytes);
  if (bytes) TK_CUDA(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
  return d;
}

// Waits for the work queued so far (so a fault in a kernel shows here, named).
static inline void tk_from_dev(void *h, const void *d, size_t bytes) {
  TK_CUDA(cudaDeviceSynchronize());
  if (bytes) TK_CUDA(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
}

// --- watchdog: a kernel that never finishes (a deadlocked shuffle or
// barrier) would hang the test until ctest's timeout kills it with no word
// of which case. tk_await polls the stream (not a blocking sync, which
// would wait forever) until its work is done or TK_WATCHDOG_S seconds of
// wall clock (20 by default) have passed; on expiry it names `what` and
// exits 1 (the hung kernel dies with the process's context). A CUDA error
// from the work is reported like TK_CUDA's.
static inline double tk_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline void tk_await(cudaStream_t st, const char *what) {
  const char *env = getenv("TK_WATCHDOG_S");
  double limit = env && atof(env) > 0 ? atof(env) : 20.0;
  double t0 = tk_now_s();
  for (;;) {
    cudaError_t rc = cudaStreamQuery(st);
    if (rc == cudaSuccess) return;
    if (rc != cudaErrorNotReady) {
      fprintf(stderr, "%s: the work failed: %s\n", what, cudaGetErrorString(rc));
      exit(1);
    }
    if (tk_now_s() - t0 > limit) {
      fprintf(stderr, "WATCHDOG: %s: not finished after %.0f s (hung kernel?)\n", what, limit);
      fflush(stderr);
      exit(1);
    }
    struct timespec nap = {0, 200000};  // 0.2 ms between polls: no core spun flat out
    nanosleep(&nap, NULL);
  }
}

// Zeroed: a case with n == 0 hands its (unwritten) buffer on, and GCC -O3 rightly calls that a
// read of uninitialised memory.
static inline void *tk_xmalloc(size_t bytes) {
  void *p = calloc(1, bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "out of host memory (%zu bytes)\n", bytes);
    exit(1);
  }
  return p;
}

// --- comparisons

static inline uint32_t tk_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

// Counts elements with |got - want| > atol + rtol*|want| (atol_each[i]
// instead of atol where given); NaN matches NaN and infinities must be
// equal. Prints the first few and the worst, and records one CHECK for the
// whole array. Returns the mismatch count.
static inline size_t tk_compare_ex(const char *what, const float *got, const float *want, size_t n,
                                   double rtol, double atol, const double *atol_each) {
  size_t bad = 0, worst_i = 0;
  double worst = 0.0, max_abs = 0.0, max_rel = 0.0;
  for (size_t i = 0; i < n; i++) {
    float g = got[i], w = want[i];
    int ok;
    if (isnan(w) || isnan(g)) {
      ok = isnan(w) && isnan(g);
    } else if (isinf(w) || isinf(g)) {
      ok = g == w;
    } else {
      double d = fabs((double)g - (double)w);
      double lim = (atol_each ? atol_each[i] : atol) + rtol * fabs((double)w);
      ok = d <= lim;
      if (d > max_abs) max_abs = d;
      if (w != 0.0f && d / fabs((double)w) > max_rel) max_rel = d / fabs((double)w);
      if (lim > 0 ? d / lim > worst : d > 0) {
        worst = lim > 0 ? d / lim : INFINITY;
        worst_i = i;
      }
    }
    if (!ok) {
      if (bad < 5)
        fprintf(stderr, "  %s[%zu]: got %.9g want %.9g\n", what, i, (double)g, (double)w);
      bad++;
    }
  }
  check_count_++;
  if (bad)
    CHECK_FAIL_("%s: %zu of %zu elements off (rtol %g atol %g); worst [%zu] got %.9g want %.9g",
                what, bad, n, rtol, atol, worst_i, (double)got[worst_i], (double)want[worst_i]);
  if (getenv("TK_VERBOSE"))
    printf("  %-40s n=%-9zu max abs %.3g max rel %.3g\n", what, n, max_abs, max_rel);
  return bad;
}

static inline size_t tk_compare(const char *what, const float *got, const float *want, size_t n,
                                double rtol, double atol) {
  return tk_compare_ex(what, got, want, n, rtol, atol, NULL);
}

// Bit-exact comparison (NaNs must carry the same bits too).
static inline size_t tk_compare_bits(const char *what, const void *got, const void *want,
                                     size_t n_bytes) {
  const unsigned char *g = got, *w = want;
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < n_bytes; i++) {
    if (g[i] != w[i]) {
      if (!bad) first = i;
      bad++;
    }
  }
  check_count_++;
  if (bad)
    CHECK_FAIL_("%s: %zu of %zu bytes differ, first at byte %zu (got 0x%02x want 0x%02x)", what,
                bad, n_bytes, first, g[first], w[first]);
  return bad;
}

// --- the small broadcast shapes the kernel tests sweep: for rank ndim,
// tk_small_shapes(ndim) output shapes with every dim in {1, 2, 3} (the
// innermost in {3, 4, 5}), and an operand's dims for a broadcast mask (a set
// bit i: dim i is 1 there).
static inline int tk_small_shapes(int ndim) {
  int n = 1;
  for (int i = 0; i < ndim; i++) n *= 3;
  return n;
}

static inline void tk_small_shape(int ndim, int sh, int64_t *yd) {
  for (int i = 0; i < ndim; i++) {
    yd[i] = 1 + sh % 3 + (i == ndim - 1 ? 2 : 0);
    sh /= 3;
  }
}

static inline void tk_bcast_dims(int ndim, const int64_t *yd, int mask, int64_t *d) {
  for (int i = 0; i < ndim; i++) d[i] = (mask >> i) & 1 ? 1 : yd[i];
}

#endif
