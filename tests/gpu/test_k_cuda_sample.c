// Tests kernels/sample/k_sample.cu against its C reference k_sample_rows_ref
// (kernels/sample/k_sample.c) id for id: the rule is written to give the same
// bits on both (k_sample.h), so any difference fails. Rows of random logits
// (with and without ties) in FP32, FP16 and BF16, vocabularies from 7 to
// Llama 3's 128256, every parameter mixed per row (mode 0 rows left alone,
// greedy rows, temperature, top_k, top_p, min_p, repetition penalty over
// packed seen ids). Then the kernel's time per launch at batch 1, 64 and 256
// over 128256 FP16 logits (printed, not asserted). Bad arguments refused on
// the host first.
#include "kernels/k_ref.h"
#include "test_k_cuda_util.h"

static uint16_t to_bf16(float v) {
  uint32_t b = tk_bits(v);
  return (uint16_t)((b + 0x7fffu + ((b >> 16) & 1)) >> 16);
}

// Random parameters for row r; seen ids appended to *seen (n_seen_total).
static k_sample_param rand_param(tk_rng *r, size_t V, int32_t *seen, int64_t *n_seen_total) {
  static const float temps[] = {0, 0.25f, 0.7f, 0.8f, 1, 1.5f};
  static const float tps[] = {1, 0.5f, 0.9f, 0.95f, 1};
  static const float rps[] = {1, 1, 1.3f, 0.8f};
  // V - 1: a cut past the kernel's shared-memory compaction (CAP keys)
  int64_t ks[] = {0, 0, 1, 5, 50, (int64_t)V - 1, (int64_t)V};
  k_sample_param p = {.mode = tk_next(r) % 8 != 0,
                      .top_k = (int32_t)ks[tk_next(r) % 7],
                      .temperature = temps[tk_next(r) % 6],
                      .top_p = tps[tk_next(r) % 5],
                      .min_p = tk_next(r) % 3 == 0 ? 0.05f : 0,
                      .repetition_penalty = rps[tk_next(r) % 4],
                      .seen_off = *n_seen_total,
                      .n_seen = (int64_t)(tk_next(r) % 200)};
  p.u = (double)(tk_next(r) >> 11) * (1.0 / 9007199254740992.0);
  for (int64_t j = 0; j < p.n_seen; j++) seen[*n_seen_total + j] = (int32_t)(tk_next(r) % (V + 2)) - 1;
  *n_seen_total += p.n_seen;
  return p;
}

static void run_case(tk_rng *r, size_t V, size_t rows, dtype dt, int ties) {
  size_t n = rows * V, es = dt == DT_FP32 ? 4 : 2;
  float *l = tk_xmalloc(n * 4), *scratch = tk_xmalloc(V * 2 * 4);
  uint16_t *h = tk_xmalloc(n * 2);
  tk_fill(r, l, n, -10.0f, 10.0f);
  if (ties)
    for (size_t i = 0; i < n; i++) l[i] = roundf(l[i] * 4) / 4;
  if (dt == DT_FP16) k_f32_to_f16(h, l, n);
  if (dt == DT_BF16)
    for (size_t i = 0; i < n; i++) h[i] = to_bf16(l[i]);
  const void *x = dt == DT_FP32 ? (const void *)l : (const void *)h;
  k_sample_param *p = tk_xmalloc(rows * sizeof *p);
  int32_t *seen = tk_xmalloc(rows * 200 * sizeof *seen);
  int64_t ns = 0;
  for (size_t k = 0; k < rows; k++) p[k] = rand_param(r, V, seen, &ns);
  int32_t *want = tk_xmalloc(rows * 4), *got = tk_xmalloc(rows * 4);
  for (size_t k = 0; k < rows; k++) want[k] = got[k] = -(int32_t)k - 2;  // mode 0 rows keep these
  CHECK_EQ_INT(k_sample_rows_ref(want, x, dt, rows, V, p, seen, scratch), 0);
  void *dx = tk_to_dev(x, n * es), *dp = tk_to_dev(p, rows * sizeof *p), *dseen = tk_to_dev(seen, (size_t)ns * 4 + 4);
  void *dids = tk_to_dev(got, rows * 4), *dscr = tk_dev_alloc(rows * V * 2 * 4);
  cudaStream_t st;
  TK_CUDA(cudaStreamCreate(&st));
  TK_OK(k_sample_rows_cuda(dids, dx, dscr, rows, V, dp, dseen, dt, st, TK_E));
  tk_await(st, "k_sample_rows_cuda");
  tk_from_dev(got, dids, rows * 4);
  size_t bad = 0;
  for (size_t k = 0; k < rows; k++)
    if (got[k] != want[k] && bad++ < 5)
      fprintf(stderr,
              "V %zu %s ties %d row %zu (mode %d t %g top_k %d top_p %g min_p %g rp %g seen %lld u %.17g): "
              "kernel %d, reference %d\n",
              V, dtype_wire_name(dt), ties, k, p[k].mode, p[k].temperature, p[k].top_k, p[k].top_p, p[k].min_p,
              p[k].repetition_penalty, (long long)p[k].n_seen, p[k].u, got[k], want[k]);
  check_count_++;
  if (bad) CHECK_FAIL_("V %zu %s ties %d: %zu of %zu rows differ", V, dtype_wire_name(dt), ties, bad, rows);
  TK_CUDA(cudaStreamDestroy(st));
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(dp));
  TK_CUDA(cudaFree(dseen));
  TK_CUDA(cudaFree(dids));
  TK_CUDA(cudaFree(dscr));
  free(l), free(scratch), free(h), free(p), free(seen), free(want), free(got);
}

// ms per launch over B rows of V FP16 logits, every row drawn under p.
static double time_batch(tk_rng *r, size_t V, size_t B, k_sample_param p) {
  size_t n = B * V;
  float *l = tk_xmalloc(n * 4);
  uint16_t *h = tk_xmalloc(n * 2);
  tk_fill(r, l, n, -10.0f, 10.0f);
  k_f32_to_f16(h, l, n);
  k_sample_param *ps = tk_xmalloc(B * sizeof *ps);
  for (size_t k = 0; k < B; k++) ps[k] = p, ps[k].u = (double)k / (double)B;
  void *dx = tk_to_dev(h, n * 2), *dp = tk_to_dev(ps, B * sizeof *ps), *dids = tk_dev_alloc(B * 4);
  void *dscr = tk_dev_alloc(n * 2 * 4);
  cudaEvent_t a, b;
  TK_CUDA(cudaEventCreate(&a));
  TK_CUDA(cudaEventCreate(&b));
  TK_OK(k_sample_rows_cuda(dids, dx, dscr, B, V, dp, NULL, DT_FP16, NULL, TK_E));  // warm-up
  TK_CUDA(cudaEventRecord(a, NULL));
  for (int i = 0; i < 5; i++) TK_OK(k_sample_rows_cuda(dids, dx, dscr, B, V, dp, NULL, DT_FP16, NULL, TK_E));
  TK_CUDA(cudaEventRecord(b, NULL));
  tk_await(NULL, "timed k_sample_rows_cuda");
  float ms = 0;
  TK_CUDA(cudaEventElapsedTime(&ms, a, b));
  TK_CUDA(cudaEventDestroy(a));
  TK_CUDA(cudaEventDestroy(b));
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(dp));
  TK_CUDA(cudaFree(dids));
  TK_CUDA(cudaFree(dscr));
  free(l), free(h), free(ps);
  return ms / 5;
}

int main(void) {
  err e = {0};
  k_sample_param p = {.mode = 1, .temperature = 1, .top_p = 1, .repetition_penalty = 1};
  CHECK_EQ_INT(k_sample_rows_cuda(NULL, NULL, NULL, 0, 10, NULL, NULL, DT_FP32, NULL, &e), 0);  // nothing to do
  CHECK_EQ_INT(k_sample_rows_cuda(NULL, (void *)8, (void *)8, 2, 10, &p, NULL, DT_FP32, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_sample_rows_cuda((void *)8, (void *)8, (void *)8, 2, 0, &p, NULL, DT_FP32, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_sample_rows_cuda((void *)8, (void *)8, (void *)8, 2, 10, &p, NULL, DT_INT32, NULL, &e),
               ERR_INVALID_ARGUMENT);
  tk_require_device();
  tk_rng r = {0x2545f4914f6cdd1dull};
  static const struct {
    size_t V, rows;
  } shapes[] = {{7, 64}, {1000, 64}, {1024, 32}, {3000, 32}, {32000, 8}, {128256, 4}};
  static const dtype dts[] = {DT_FP32, DT_FP16, DT_BF16};
  size_t cases = 0;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int d = 0; d < 3; d++)
      for (int ties = 0; ties < 2; ties++, cases++) run_case(&r, shapes[s].V, shapes[s].rows, dts[d], ties);
  printf(
      "sample: %zu cases (vocab 7 .. 128256, fp32/fp16/bf16, with and without ties) id for id against "
      "k_sample_rows_ref\n",
      cases);
  k_sample_param tp = {.mode = 1, .temperature = 0.8f, .top_p = 0.9f, .repetition_penalty = 1};
  k_sample_param tk = {.mode = 1, .temperature = 0.8f, .top_k = 50, .top_p = 0.9f, .repetition_penalty = 1};
  static const size_t batches[] = {1, 64, 256};
  for (size_t i = 0; i < 3; i++) {
    size_t B = batches[i];
    printf("sample time, vocab 128256 fp16, batch %zu: %.3f ms (temperature 0.8, top_p 0.9), %.3f ms (+ top_k 50)\n", B,
           time_batch(&r, 128256, B, tp), time_batch(&r, 128256, B, tk));
  }
  CHECK_DONE();
}
