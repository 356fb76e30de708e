// Tests kernels/sample/k_sample.cu against its C reference k_sample_rows_ref
// (kernels/sample/k_sample.c) id for id: the rule is written to give the same
// bits on both (k_sample.h), so any difference fails. Rows in FP32, FP16 and
// BF16, vocabularies from 7 to 151,936 (past KS_GMAX blocks a row), batches
// of 1 to 256, every parameter mixed per row (mode 0 rows left alone, greedy
// rows, temperature, top_k, top_p, min_p, repetition penalty over packed
// seen ids), six kinds of logits: uniform, coarse ties, -inf and NaN among
// them, one value for the whole row and distinct values within 0.08 (every
// key in one or two bins: the radix select), and LLM-like (a few high logits over a normal bulk). Then the
// time per call by batch (1, 64, 256) and mode over 128,256 FP16 logits,
// this kernel and the previous one (tests/gpu/k_sample_old.cu) side by side
// (printed, not asserted). Bad arguments refused on the host first.
#include "kernels/k_ref.h"
#include "test_k_cuda_util.h"

// tests/gpu/k_sample_old.cu: the previous sampler, for the timing only
int k_sample_rows_cuda_old(int32_t *ids, const void *x, float *scratch, size_t rows, size_t vocab,
                           const k_sample_param *params, const int32_t *seen, dtype dt, cudaStream_t stream, err *e);

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

// F_NARROW: distinct values (FP32) within 0.08, so one or two bins
enum { F_UNIFORM, F_TIES, F_INF, F_FLAT, F_NARROW, F_LLM, F_KINDS };
static const char *fill_name[F_KINDS] = {"uniform", "ties", "inf/nan", "flat", "narrow", "llm-like"};

static void fill(tk_rng *r, float *l, size_t rows, size_t V, int kind) {
  size_t n = rows * V;
  tk_fill(r, l, n, -10.0f, 10.0f);
  for (size_t i = 0; i < n; i++) switch (kind) {
      case F_TIES:
        l[i] = roundf(l[i] * 4) / 4;
        break;
      case F_INF:
        l[i] = tk_next(r) % 10 == 0 ? -INFINITY : tk_next(r) % 50 == 0 ? NAN : l[i];
        break;
      case F_FLAT:
        l[i] = 1.5f;
        break;
      case F_NARROW:
        l[i] = 1.0f + l[i] * 0.004f;
        break;
      case F_LLM: {  // a bulk near 0 (a sum of uniforms) and one token in 500 10 to 25 higher
        float b = (l[i] + tk_uniform(r, -10, 10) + tk_uniform(r, -10, 10)) * 0.3f;
        l[i] = tk_next(r) % 500 == 0 ? b + tk_uniform(r, 10, 25) : b;
        break;
      }
      default:
        break;
    }
}

static void run_case(tk_rng *r, size_t V, size_t rows, dtype dt, int kind) {
  size_t n = rows * V, es = dt == DT_FP32 ? 4 : 2;
  float *l = tk_xmalloc(n * 4), *scratch = tk_xmalloc(V * 2 * 4);
  uint16_t *h = tk_xmalloc(n * 2);
  fill(r, l, rows, V, kind);
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
  void *dids = tk_to_dev(got, rows * 4), *dscr = tk_dev_alloc(k_sample_ws_bytes(rows, V));
  cudaStream_t st;
  TK_CUDA(cudaStreamCreate(&st));
  TK_OK(k_sample_rows_cuda(dids, dx, dscr, rows, V, dp, dseen, dt, st, TK_E));
  tk_await(st, "k_sample_rows_cuda");
  tk_from_dev(got, dids, rows * 4);
  size_t bad = 0;
  for (size_t k = 0; k < rows; k++)
    if (got[k] != want[k] && bad++ < 5)
      fprintf(stderr,
              "V %zu %s %s row %zu (mode %d t %g top_k %d top_p %g min_p %g rp %g seen %lld u %.17g): "
              "kernel %d, reference %d\n",
              V, dtype_wire_name(dt), fill_name[kind], k, p[k].mode, p[k].temperature, p[k].top_k, p[k].top_p,
              p[k].min_p, p[k].repetition_penalty, (long long)p[k].n_seen, p[k].u, got[k], want[k]);
  check_count_++;
  if (bad) CHECK_FAIL_("V %zu %s %s: %zu of %zu rows differ", V, dtype_wire_name(dt), fill_name[kind], bad, rows);
  TK_CUDA(cudaStreamDestroy(st));
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(dp));
  TK_CUDA(cudaFree(dseen));
  TK_CUDA(cudaFree(dids));
  TK_CUDA(cudaFree(dscr));
  free(l), free(scratch), free(h), free(p), free(seen), free(want), free(got);
}

// ms per call over B rows of V FP16 logits (LLM-like), every row drawn
// under p, by this kernel or (old) the previous one.
static double time_batch(tk_rng *r, size_t V, size_t B, k_sample_param p, int old) {
  size_t n = B * V;
  float *l = tk_xmalloc(n * 4);
  uint16_t *h = tk_xmalloc(n * 2);
  fill(r, l, B, V, F_LLM);
  k_f32_to_f16(h, l, n);
  k_sample_param *ps = tk_xmalloc(B * sizeof *ps);
  for (size_t k = 0; k < B; k++) ps[k] = p, ps[k].u = (double)k / (double)B;
  void *dx = tk_to_dev(h, n * 2), *dp = tk_to_dev(ps, B * sizeof *ps), *dids = tk_dev_alloc(B * 4);
  void *dscr = tk_dev_alloc(old ? n * 2 * 4 : k_sample_ws_bytes(B, V));
  cudaEvent_t a, b;
  TK_CUDA(cudaEventCreate(&a));
  TK_CUDA(cudaEventCreate(&b));
  enum { REPS = 20 };
  for (int i = 0; i <= REPS; i++) {  // the first: warm-up
    if (i == 1) TK_CUDA(cudaEventRecord(a, NULL));
    if (old)
      TK_OK(k_sample_rows_cuda_old(dids, dx, dscr, B, V, dp, NULL, DT_FP16, NULL, TK_E));
    else
      TK_OK(k_sample_rows_cuda(dids, dx, dscr, B, V, dp, NULL, DT_FP16, NULL, TK_E));
  }
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
  return ms / REPS;
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
  CHECK_EQ_INT(k_sample_rows_cuda((void *)8, (void *)8, (void *)4, 2, 10, &p, NULL, DT_FP32, NULL, &e),
               ERR_INVALID_ARGUMENT);  // the workspace holds uint64 counters
  CHECK_EQ_INT(k_sample_ws_bytes(3, 0), 0);
  CHECK(k_sample_ws_bytes(2, 128256) == 2 * k_sample_ws_bytes(1, 128256));
  CHECK(k_sample_ws_bytes(1, 128256) >= 128256 * 4 + 1024 * 12);
  tk_require_device();
  tk_rng r = {0x2545f4914f6cdd1dull};
  static const struct {
    size_t V, rows;
  } shapes[] = {{7, 64}, {1000, 64}, {1024, 32}, {3000, 32}, {32000, 8}, {128256, 4}, {151936, 3}};
  static const dtype dts[] = {DT_FP32, DT_FP16, DT_BF16};
  size_t cases = 0;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int d = 0; d < 3; d++)
      for (int kind = 0; kind < F_KINDS; kind++, cases++) run_case(&r, shapes[s].V, shapes[s].rows, dts[d], kind);
  // batches at Llama 3's vocabulary (FP16, the served type)
  static const size_t batch[] = {1, 2, 17, 64, 256};
  for (size_t i = 0; i < sizeof batch / sizeof batch[0]; i++, cases++)
    run_case(&r, 128256, batch[i], DT_FP16, i % 2 ? F_UNIFORM : F_LLM);
  printf(
      "sample: %zu cases (vocab 7 .. 151936, batch 1 .. 256, fp32/fp16/bf16, uniform/ties/inf-nan/flat/narrow/llm-like "
      "logits) id for id against k_sample_rows_ref\n",
      cases);
  static const struct {
    const char *name;
    k_sample_param p;
  } modes[] = {
      {"temperature 0.8, top_p 0.9", {.mode = 1, .temperature = 0.8f, .top_p = 0.9f, .repetition_penalty = 1}},
      {"+ top_k 50", {.mode = 1, .temperature = 0.8f, .top_k = 50, .top_p = 0.9f, .repetition_penalty = 1}},
      {"temperature 1 alone", {.mode = 1, .temperature = 1, .top_p = 1, .repetition_penalty = 1}},
      {"+ min_p 0.05", {.mode = 1, .temperature = 0.8f, .top_p = 0.9f, .min_p = 0.05f, .repetition_penalty = 1}},
  };
  static const size_t batches[] = {1, 64, 256};
  for (size_t i = 0; i < 3; i++)
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
      size_t B = batches[i];
      double now = time_batch(&r, 128256, B, modes[m].p, 0), before = time_batch(&r, 128256, B, modes[m].p, 1);
      printf("sample time, vocab 128256 fp16, batch %zu, %s: %.3f ms (before: %.3f ms, x%.1f)\n", B, modes[m].name, now,
             before, before / now);
    }
  CHECK_DONE();
}
