// Tests kernels/k_binary.cu against k_binary_f32 (k_binary.c), bit for bit:
// each output is one IEEE float operation on the same two inputs. Covers the
// reference tests' hand shapes ([2,3]+[3], [3]-[2,3], [2,1,4]*[3,1],
// scalars, [2,1]+[1,3]), every rank-1..4 shape with dims from {1,2,3} (inner
// 3..5) and every broadcast mask on each side, all four ops, ranks 5..8,
// large (~1M) same-shape, scalar, row- and column-broadcast cases, in place,
// division by zero, and argument errors.
#include "test_k_cuda_util.h"

static int64_t count(int ndim, const int64_t *d) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= d[i];
  return n;
}

// Device scratch reused across the many small cases.
typedef struct scratch {
  float *a, *b, *y;
  size_t cap;  // elements each
} scratch;

static void scratch_reserve(scratch *s, size_t n) {
  if (n <= s->cap) return;
  if (s->a) {
    TK_CUDA(cudaFree(s->a));
    TK_CUDA(cudaFree(s->b));
    TK_CUDA(cudaFree(s->y));
  }
  s->a = tk_dev_alloc(n * sizeof(float));
  s->b = tk_dev_alloc(n * sizeof(float));
  s->y = tk_dev_alloc(n * sizeof(float));
  s->cap = n;
}

// Runs one case on the GPU and the reference; returns 1 if they differ.
static int run_case(scratch *s, tk_rng *r, int ndim, const int64_t *yd, const int64_t *ad,
                    const int64_t *bd, k_binop op, int verbose) {
  size_t ny = (size_t)count(ndim, yd), na = (size_t)count(ndim, ad), nb = (size_t)count(ndim, bd);
  size_t mx = ny > na ? ny : na;
  mx = mx > nb ? mx : nb;
  scratch_reserve(s, mx);
  float *a = tk_xmalloc(na * 4), *b = tk_xmalloc(nb * 4), *want = tk_xmalloc(ny * 4),
        *got = tk_xmalloc(ny * 4);
  tk_fill(r, a, na, -100.0f, 100.0f);
  tk_fill(r, b, nb, -3.0f, 3.0f);
  k_binary_f32(want, a, b, ndim, yd, ad, bd, op);
  TK_CUDA(cudaMemcpy(s->a, a, na * 4, cudaMemcpyHostToDevice));
  TK_CUDA(cudaMemcpy(s->b, b, nb * 4, cudaMemcpyHostToDevice));
  TK_CUDA(cudaMemset(s->y, 0xff, ny * 4));
  err e = {0};
  int rc = k_binary_f32_cuda(s->y, s->a, s->b, ndim, yd, ad, bd, op, NULL, &e);
  tk_from_dev(got, s->y, ny * 4);
  int bad = rc != 0 || memcmp(got, want, ny * 4) != 0;
  if (bad && verbose) {
    fprintf(stderr, "  mismatch: rank %d op %d rc %d (%s); y dims", ndim, (int)op, rc, e.msg);
    for (int i = 0; i < ndim; i++)
      fprintf(stderr, " %lld/%lld/%lld", (long long)yd[i], (long long)ad[i], (long long)bd[i]);
    fprintf(stderr, "\n");
    tk_compare("binary", got, want, ny, 0.0, 0.0);
  }
  free(a);
  free(b);
  free(want);
  free(got);
  return bad;
}

static void test_hand(scratch *s) {
  tk_rng r = {42};
  struct {
    int ndim;
    int64_t y[3], a[3], b[3];
  } cases[] = {
      {2, {2, 3}, {2, 3}, {1, 3}},
      {2, {2, 3}, {1, 3}, {2, 3}},
      {3, {2, 3, 4}, {2, 1, 4}, {1, 3, 1}},
      {2, {2, 3}, {2, 3}, {1, 1}},
      {2, {2, 3}, {1, 1}, {2, 3}},
      {2, {2, 3}, {2, 1}, {1, 3}},
      {1, {1}, {1}, {1}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (int op = 0; op < 4; op++)
      CHECK_EQ_INT(
          run_case(s, &r, cases[c].ndim, cases[c].y, cases[c].a, cases[c].b, (k_binop)op, 1), 0);
  // Rank 0: a scalar op scalar.
  for (int op = 0; op < 4; op++)
    CHECK_EQ_INT(run_case(s, &r, 0, NULL, NULL, NULL, (k_binop)op, 1), 0);

  // Known values, not only agreement with the reference: [2,1,4] * [3,1].
  float a3[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b3[3] = {1, 10, 100}, y3[24];
  int64_t yd3[3] = {2, 3, 4}, ad3[3] = {2, 1, 4}, bd3[3] = {1, 3, 1};
  float *da = tk_to_dev(a3, sizeof a3), *db = tk_to_dev(b3, sizeof b3),
        *dy = tk_dev_alloc(sizeof y3);
  TK_OK(k_binary_f32_cuda(dy, da, db, 3, yd3, ad3, bd3, K_MUL, NULL, TK_E));
  tk_from_dev(y3, dy, sizeof y3);
  CHECK(y3[0] == 1.0f);
  CHECK(y3[23] == 800.0f);
  CHECK(y3[16] == 50.0f);
  TK_CUDA(cudaFree(da));
  TK_CUDA(cudaFree(db));
  TK_CUDA(cudaFree(dy));
}

static void test_exhaustive_small(scratch *s) {
  tk_rng r = {12345};
  int cases = 0, bad = 0;
  for (int ndim = 1; ndim <= 4; ndim++) {
    int nshapes = 1;
    for (int i = 0; i < ndim; i++) nshapes *= 3;
    for (int sh = 0; sh < nshapes; sh++) {
      int64_t yd[K_MAX_DIMS];
      int t = sh;
      for (int i = 0; i < ndim; i++) {
        yd[i] = 1 + t % 3 + (i == ndim - 1 ? 2 : 0);
        t /= 3;
      }
      for (int ma = 0; ma < (1 << ndim); ma++) {
        for (int mb = 0; mb < (1 << ndim); mb++) {
          int64_t ad[K_MAX_DIMS], bd[K_MAX_DIMS];
          for (int i = 0; i < ndim; i++) {
            ad[i] = (ma >> i) & 1 ? 1 : yd[i];
            bd[i] = (mb >> i) & 1 ? 1 : yd[i];
          }
          k_binop op = (k_binop)(tk_next(&r) % 4);
          bad += run_case(s, &r, ndim, yd, ad, bd, op, bad < 3);
          cases++;
        }
      }
    }
  }
  printf("binary: %d small broadcast cases, %d mismatched\n", cases, bad);
  CHECK(cases > 20000);
  CHECK_EQ_INT(bad, 0);
}

static void test_large(scratch *s) {
  tk_rng r = {777};
  struct {
    int ndim;
    int64_t y[K_MAX_DIMS], a[K_MAX_DIMS], b[K_MAX_DIMS];
  } cases[] = {
      {1, {1048579}, {1048579}, {1048579}},                     // same shape, odd length
      {1, {1048579}, {1048579}, {1}},                           // tensor op scalar
      {1, {1048579}, {1}, {1048579}},                           // scalar op tensor
      {2, {1024, 1023}, {1024, 1023}, {1, 1023}},               // row bias
      {2, {1023, 1024}, {1023, 1024}, {1023, 1}},               // column broadcast
      {2, {1024, 1024}, {1024, 1}, {1, 1024}},                  // outer product
      {3, {64, 128, 129}, {64, 1, 129}, {1, 128, 1}},           // both inputs broadcast
      {4, {8, 16, 32, 256}, {8, 1, 32, 256}, {1, 16, 1, 256}},  // NCHW-ish
      {5, {2, 3, 4, 5, 6}, {2, 1, 4, 1, 6}, {1, 3, 1, 5, 1}},
      {6, {2, 1, 3, 2, 5, 7}, {1, 1, 3, 1, 5, 7}, {2, 1, 1, 2, 1, 7}},
      {8, {2, 3, 2, 3, 2, 3, 2, 5}, {2, 1, 2, 1, 2, 1, 2, 5}, {1, 3, 1, 3, 1, 3, 1, 1}},
      {8, {1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1, 1}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (int op = 0; op < 4; op++)
      CHECK_EQ_INT(
          run_case(s, &r, cases[c].ndim, cases[c].y, cases[c].a, cases[c].b, (k_binop)op, 1), 0);
}

// Same-shape in place (y == a), and division by zero giving inf/NaN as on the CPU.
static void test_inplace_and_div0(void) {
  enum { N = 1001 };
  float a[N], b[N], want[N], got[N];
  tk_rng r = {9};
  tk_fill(&r, a, N, -1.0f, 1.0f);
  tk_fill(&r, b, N, -1.0f, 1.0f);
  for (int i = 0; i < N; i += 7) b[i] = 0.0f;
  a[0] = 0.0f;  // 0/0 = nan
  int64_t d[1] = {N};
  k_binary_f32(want, a, b, 1, d, d, d, K_DIV);
  float *da = tk_to_dev(a, sizeof a), *db = tk_to_dev(b, sizeof b);
  TK_OK(k_binary_f32_cuda(da, da, db, 1, d, d, d, K_DIV, NULL, TK_E));
  tk_from_dev(got, da, sizeof got);
  // Values must match exactly; a NaN's bits are the hardware's choice (x86
  // gives 0xffc00000, the GPU 0x7fffffff), so NaN only has to be NaN.
  tk_compare("div in place", got, want, N, 0.0, 0.0);
  CHECK(isnan(got[0]));
  CHECK(isinf(got[7]));
  TK_CUDA(cudaFree(da));
  TK_CUDA(cudaFree(db));
}

static void test_errors(void) {
  err e = {0};
  int64_t y[2] = {2, 3}, a[2] = {2, 3}, b[2] = {2, 2}, z[2] = {0, 3};
  float *p = (float *)16;  // never dereferenced: every case fails before a launch
  CHECK_EQ_INT(k_binary_f32_cuda(p, p, p, 9, y, a, a, K_ADD, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_binary_f32_cuda");
  CHECK_EQ_INT(k_binary_f32_cuda(p, p, p, 2, y, a, b, K_ADD, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "broadcast");
  CHECK_EQ_INT(k_binary_f32_cuda(p, p, p, 2, y, a, a, (k_binop)7, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "op");
  CHECK_EQ_INT(k_binary_f32_cuda(p, p, p, 2, NULL, a, a, K_ADD, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_binary_f32_cuda(NULL, p, p, 2, y, a, a, K_ADD, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "NULL");
  // An empty output is a no-op, even with NULL buffers.
  CHECK_EQ_INT(k_binary_f32_cuda(NULL, NULL, NULL, 2, z, z, z, K_ADD, NULL, &e), 0);
}

int main(void) {
  test_errors();
  tk_require_device();
  scratch s = {0};
  test_hand(&s);
  test_exhaustive_small(&s);
  test_large(&s);
  test_inplace_and_div0();
  if (s.a) {
    TK_CUDA(cudaFree(s.a));
    TK_CUDA(cudaFree(s.b));
    TK_CUDA(cudaFree(s.y));
  }
  CHECK_DONE();
}
