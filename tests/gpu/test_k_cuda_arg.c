// Tests kernels/reduce/k_arg.cu against the references in kernels/reduce/k_reduce.c, exactly:
// k_arg_reduce_cuda (ArgMax, ArgMin, select_last_index) against k_arg_reduce and k_topk_cuda
// (largest and smallest, k from 1 to the axis length) against k_topk, on FP32, FP16, BF16,
// FP64, INT32 and INT64 data (FP16 and BF16 against the reference on the widened values, as
// the CPU path runs them). Values are drawn from a few integers (or halves), so ties are
// everywhere and the tie rules are what is tested; ArgMax/ArgMin also with NaN at index 0 and
// inside rows, TopK with NaNs through its rows (ranked above every number on both paths). Shapes: strided axes (inner > 1, a thread per column) and last axes (inner 1, a
// warp per row), TopK rows within the shared-memory sort (<= 2048) and past it (CUB's sort in
// the workspace). The host-side checks run without a device.
#include "test_k_cuda_typed.h"

static const struct {
  size_t outer, len, inner;
} shapes[] = {{1, 1, 1}, {3, 1, 4}, {4, 7, 1}, {2, 33, 5}, {5, 1000, 1}, {1, 2048, 1},
              {3, 64, 17}, {2, 2049, 1}, {2, 3000, 3}, {1, 20000, 1}};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

static void host_checks(void) {
  err e = {0};
  int64_t y[1];
  float x[1] = {0};
  CHECK(k_arg_reduce_cuda(y, x, DT_FP32, 1, 0, 1, 0, 0, NULL, &e) != 0);  // empty axis
  CHECK(strstr(e.msg, "empty") != NULL);
  e = (err){0};
  CHECK(k_arg_reduce_cuda(y, x, DT_INT8, 1, 1, 1, 0, 0, NULL, &e) != 0);
  CHECK(strstr(e.msg, "INT8") != NULL);
  e = (err){0};
  CHECK(k_topk_cuda(x, y, x, DT_FP32, 1, 3, 1, 4, 1, NULL, 0, NULL, &e) != 0);  // k > len
  CHECK(strstr(e.msg, "exceeds") != NULL);
  e = (err){0};
  size_t ws = 1;
  CHECK(k_topk_cuda_ws(&ws, DT_BOOL, 1, 3, 1, 1, &e) != 0);
  e = (err){0};
  CHECK_EQ_INT(k_topk_cuda_ws(&ws, DT_FP32, 4, 2048, 1, 5, &e), 0);  // the shared-memory path: none
  CHECK(ws == 0);
  CHECK(k_topk_cuda(NULL, y, x, DT_FP32, 1, 3, 1, 2, 1, NULL, 0, NULL, &e) != 0);
}

// One ArgMax/ArgMin case; nan: 0 none, 1 at index 0 of some rows, 2 inside rows. Returns 1 on a mismatch.
static int arg_case(tk_rng *r, dtype dt, size_t outer, size_t len, size_t inner, int is_min, int last, int nan) {
  size_t n = outer * len * inner, ny = outer * inner, esz = dtype_size(dt);
  double *v = tk_xmalloc(n * sizeof *v);
  tt_draw(r, v, n, 3, !tt_is_int(dt));
  if (nan && !tt_is_int(dt))
    for (size_t o = 0; o < outer; o++)
      for (size_t c = 0; c < inner; c++)
        if ((o + c) % 2 == 0) v[(o * len + (nan == 1 ? 0 : len / 2)) * inner + c] = NAN;
  void *x = tk_xmalloc(n * esz), *xr = tk_xmalloc(n * tt_ref_size(dt));
  tt_store(dt, x, v, n);
  tt_widen(dt, xr, x, n);
  int64_t *want = tk_xmalloc(ny * sizeof *want), *got = tk_xmalloc(ny * sizeof *got);
  CHECK_EQ_INT(k_arg_reduce(want, xr, tt_ref_elem(dt), outer, len, inner, is_min, last), 0);
  void *dx = tk_to_dev(x, n * esz);
  int64_t *dy = tk_dev_alloc(ny * sizeof *dy);
  TK_OK(k_arg_reduce_cuda(dy, dx, dt, outer, len, inner, is_min, last, NULL, TK_E));
  tk_from_dev(got, dy, ny * sizeof *got);
  int bad = 0;
  for (size_t i = 0; i < ny && !bad; i++)
    if (got[i] != want[i]) {
      fprintf(stderr, "  arg %s [%zu,%zu,%zu] min %d last %d nan %d: column %zu got %lld want %lld\n",
              dtype_wire_name(dt), outer, len, inner, is_min, last, nan, i, (long long)got[i], (long long)want[i]);
      bad = 1;
    }
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(dy));
  free(v), free(x), free(xr), free(want), free(got);
  return bad;
}

// One TopK case; nan: a NaN at every 5th element of every other column (float types). Returns 1 on
// a mismatch.
static int topk_case(tk_rng *r, dtype dt, size_t outer, size_t len, size_t inner, size_t k, int largest, int nan) {
  size_t n = outer * len * inner, ny = outer * k * inner, esz = dtype_size(dt), rsz = tt_ref_size(dt);
  double *v = tk_xmalloc(n * sizeof *v);
  tt_draw(r, v, n, len > 100 ? 50 : 4, !tt_is_int(dt));
  if (nan && !tt_is_int(dt))
    for (size_t o = 0; o < outer; o++)
      for (size_t c = 0; c < inner; c += 2)
        for (size_t l = (o + c) % 5; l < len; l += 5) v[(o * len + l) * inner + c] = NAN;
  void *x = tk_xmalloc(n * esz), *xr = tk_xmalloc(n * rsz), *wv = tk_xmalloc(ny * rsz + 1);
  tt_store(dt, x, v, n);
  tt_widen(dt, xr, x, n);
  int64_t *wi = tk_xmalloc(ny * sizeof *wi + 1), *gi = tk_xmalloc(ny * sizeof *gi + 1);
  uint8_t *gv = tk_xmalloc(ny * esz + 1);
  CHECK_EQ_INT(k_topk(wv, wi, xr, tt_ref_elem(dt), outer, len, inner, k, largest), 0);
  size_t wsb = 0;
  TK_OK(k_topk_cuda_ws(&wsb, dt, outer, len, inner, k, TK_E));
  void *dx = tk_to_dev(x, n * esz), *dv = tk_dev_alloc(ny * esz), *dws = wsb ? tk_dev_alloc(wsb) : NULL;
  int64_t *di = tk_dev_alloc(ny * sizeof *di);
  TK_OK(k_topk_cuda(dv, di, dx, dt, outer, len, inner, k, largest, dws, wsb, NULL, TK_E));
  tk_from_dev(gi, di, ny * sizeof *gi);
  tk_from_dev(gv, dv, ny * esz);
  int bad = 0;
  for (size_t i = 0; i < ny && !bad; i++) {
    size_t c = i % inner, o = i / inner / k;
    size_t src = (o * len + (size_t)gi[i]) * inner + c;
    if (gi[i] != wi[i] || gi[i] < 0 || (size_t)gi[i] >= len || memcmp(gv + i * esz, (uint8_t *)x + src * esz, esz)) {
      fprintf(stderr, "  topk %s [%zu,%zu,%zu] k %zu largest %d nan %d: element %zu got index %lld want %lld\n",
              dtype_wire_name(dt), outer, len, inner, k, largest, nan, i, (long long)gi[i], (long long)wi[i]);
      bad = 1;
    }
  }
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(dv));
  TK_CUDA(cudaFree(di));
  if (dws) TK_CUDA(cudaFree(dws));
  free(v), free(x), free(xr), free(wv), free(wi), free(gi), free(gv);
  return bad;
}

// Not asserted: what the two paths cost on an LLM-sized row set.
static void timings(void) {
  size_t outer = 64, len = 32000, k = 50, n = outer * len;
  float *x = tk_xmalloc(n * sizeof *x);
  tk_rng r = {0x9e3779b97f4a7c15ull};
  tk_fill(&r, x, n, -4.f, 4.f);
  void *dx = tk_to_dev(x, n * sizeof *x), *dv = tk_dev_alloc(outer * k * sizeof(float));
  int64_t *di = tk_dev_alloc(outer * k * sizeof *di), *dy = tk_dev_alloc(outer * sizeof *dy);
  size_t wsb = 0;
  TK_OK(k_topk_cuda_ws(&wsb, DT_FP32, outer, len, 1, k, TK_E));
  void *dws = tk_dev_alloc(wsb);
  cudaEvent_t a, b;
  TK_CUDA(cudaEventCreate(&a));
  TK_CUDA(cudaEventCreate(&b));
  float ms_arg = 0, ms_topk = 0;
  for (int rep = 0; rep < 2; rep++) {  // the first warms up
    TK_CUDA(cudaEventRecord(a, NULL));
    for (int i = 0; i < 10; i++) TK_OK(k_arg_reduce_cuda(dy, dx, DT_FP32, outer, len, 1, 0, 0, NULL, TK_E));
    TK_CUDA(cudaEventRecord(b, NULL));
    TK_CUDA(cudaEventSynchronize(b));
    TK_CUDA(cudaEventElapsedTime(&ms_arg, a, b));
    TK_CUDA(cudaEventRecord(a, NULL));
    for (int i = 0; i < 10; i++) TK_OK(k_topk_cuda(dv, di, dx, DT_FP32, outer, len, 1, k, 1, dws, wsb, NULL, TK_E));
    TK_CUDA(cudaEventRecord(b, NULL));
    TK_CUDA(cudaEventSynchronize(b));
    TK_CUDA(cudaEventElapsedTime(&ms_topk, a, b));
  }
  printf("timing [64, 32000] FP32: ArgMax %.1f us, TopK k=50 %.1f us (workspace %zu MiB)\n", ms_arg * 100.0,
         ms_topk * 100.0, wsb >> 20);
  TK_CUDA(cudaEventDestroy(a));
  TK_CUDA(cudaEventDestroy(b));
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(dv));
  TK_CUDA(cudaFree(di));
  TK_CUDA(cudaFree(dy));
  TK_CUDA(cudaFree(dws));
  free(x);
}

int main(void) {
  host_checks();
  tk_require_device();
  tk_rng r = {0x2545f4914f6cdd1dull};
  int cases = 0, bad = 0;
  for (int t = 0; t < TT_N_TYPES; t++)
    for (size_t s = 0; s < N_SHAPES; s++) {
      if (shapes[s].len > 5000 && t % 3) continue;  // the longest row on three types
      for (int mode = 0; mode < 4; mode++)
        for (int nan = 0; nan < 3; nan++) {
          if (nan && tt_is_int(tt_types[t])) continue;
          bad += arg_case(&r, tt_types[t], shapes[s].outer, shapes[s].len, shapes[s].inner, mode & 1, mode >> 1, nan);
          cases++;
        }
      size_t len = shapes[s].len, ks[3] = {1, (len + 1) / 2, len};
      for (int ki = 0; ki < 3; ki++)
        for (int largest = 0; largest < 2; largest++)
          for (int nan = 0; nan < 2; nan++) {  // NaN above every number on both paths
            if (nan && tt_is_int(tt_types[t])) continue;
            bad += topk_case(&r, tt_types[t], shapes[s].outer, len, shapes[s].inner, ks[ki], largest, nan);
            cases++;
          }
    }
  printf("arg/topk: %d cases, %d mismatched\n", cases, bad);
  CHECK_EQ_INT(bad, 0);
  timings();
  CHECK_DONE();
}
