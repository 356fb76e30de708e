// Tests kernels/elem/k_binary.cu against k_binary_f32 (kernels/elem/k_binary.c), bit for bit:
// each output is one IEEE float operation on the same two inputs (Pow: the
// GPU's double pow rounded once against glibc's powf, within 2 ulp, NaN
// where the reference has NaN). Covers the reference tests' hand shapes
// ([2,3]+[3], [3]-[2,3], [2,1,4]*[3,1], scalars, [2,1]+[1,3]), every
// rank-1..4 shape with dims from {1,2,3} (inner 3..5) and every broadcast
// mask on each side, all nine ops (add, sub, mul, div, pow, max, min and
// Mod's two modes, for issue 34's Mod on the GPU),
// ranks 5..8, large (~1M) same-shape, scalar, row- and column-broadcast
// cases, in place, division by zero, Max/Min's NaN propagation and signed
// zeros, Pow's special values, and argument errors. And k_compare_cuda
// (every k_cmpop; FP32, FP16, INT64) against k_compare_f32/_i64 on
// the same broadcast shapes, with ties, NaN and signed zeros. And
// k_pow_mixed_cuda (Pow of a base and an exponent of different types, issue
// 34: FP32 by INT32/INT64/UINT32/UINT64, integers by FP32 and FP64) against
// k_pow_mixed on broadcast shapes: float results within 2 ulp (the device's
// double pow against glibc's), integer results within 1 of the reference's
// (a power a rounding of pow lands just below an integer truncates one lower)
// and equal where the power is an exact small integer.
#include "test_k_cuda_util.h"

enum { N_OPS = K_FMOD + 1 };  // add, sub, mul, div, pow, max, min, mod (fmod 0), fmod

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

// Pow's bound: 2 ulp (the reference's powf and the GPU's double pow are
// each within an ulp of the exact power); NaN against NaN, infinities equal.
static size_t pow_off(const float *got, const float *want, size_t n) {
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    float g = got[i], w = want[i];
    if (isnan(w) || isnan(g) || isinf(w) || isinf(g)) bad += !(isnan(w) && isnan(g)) && g != w;
    else bad += fabs((double)g - (double)w) > 2.4e-7 * fabs((double)w);
  }
  return bad;
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
  int bad = rc != 0 || (op == K_POW ? pow_off(got, want, ny) != 0 : memcmp(got, want, ny * 4) != 0);
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
    for (int op = 0; op < N_OPS; op++)
      CHECK_EQ_INT(
          run_case(s, &r, cases[c].ndim, cases[c].y, cases[c].a, cases[c].b, (k_binop)op, 1), 0);
  // Rank 0: a scalar op scalar.
  for (int op = 0; op < N_OPS; op++)
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
    for (int sh = 0; sh < tk_small_shapes(ndim); sh++) {
      int64_t yd[K_MAX_DIMS];
      tk_small_shape(ndim, sh, yd);
      for (int ma = 0; ma < (1 << ndim); ma++) {
        for (int mb = 0; mb < (1 << ndim); mb++) {
          int64_t ad[K_MAX_DIMS], bd[K_MAX_DIMS];
          tk_bcast_dims(ndim, yd, ma, ad);
          tk_bcast_dims(ndim, yd, mb, bd);
          k_binop op = (k_binop)(tk_next(&r) % N_OPS);
          bad += run_case(s, &r, ndim, yd, ad, bd, op, bad < 3);
          cases++;
        }
      }
    }
  }
  printf("binary: %d small broadcast cases (all %d ops), %d mismatched\n", cases, N_OPS, bad);
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
      // squeeze-excitation's Mul on NHWC: [N, H*W, C] by [N, 1, C], 16-byte vectors of C (and C = 18: not a
      // multiple of the vector, the element-wise kernel)
      {3, {4, 49, 960}, {4, 49, 960}, {4, 1, 960}},
      {3, {4, 49, 960}, {4, 1, 960}, {4, 49, 960}},
      {3, {3, 9, 18}, {3, 9, 18}, {3, 1, 18}},
      {5, {2, 3, 4, 5, 6}, {2, 1, 4, 1, 6}, {1, 3, 1, 5, 1}},
      {6, {2, 1, 3, 2, 5, 7}, {1, 1, 3, 1, 5, 7}, {2, 1, 1, 2, 1, 7}},
      {8, {2, 3, 2, 3, 2, 3, 2, 5}, {2, 1, 2, 1, 2, 1, 2, 5}, {1, 3, 1, 3, 1, 3, 1, 1}},
      {8, {1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1, 1}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (int op = 0; op < N_OPS; op++)
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

// Max/Min: NaN on either side wins (the reference returns the NaN operand
// itself); signed zeros as the reference's `>`/`<` pick them; infinities.
// Pow: the special values of C's pow. Mod: those of fmodf, moved as the reference moves them.
static void test_special(void) {
  enum { N = 12 };
  uint32_t nan_bits = 0x7fc00123u;  // a payload, to tell the reference's NaN operand apart
  float qnan;
  memcpy(&qnan, &nan_bits, 4);
  float a[N] = {qnan, 1.0f, qnan, -0.0f, 0.0f, INFINITY, -INFINITY, 3.0f, -2.0f, 0.0f, 1.0f, -8.0f};
  float b[N] = {1.0f, qnan, qnan, 0.0f, -0.0f, 5.0f, 5.0f, -INFINITY, 3.0f, -1.0f, qnan, 1.0f / 3.0f};
  float want[N], got[N];
  int64_t d[1] = {N};
  float *da = tk_to_dev(a, sizeof a), *db = tk_to_dev(b, sizeof b), *dy = tk_dev_alloc(sizeof got);
  // and Mod's two modes: NaN operands, zeros of both signs (a zero result takes the divisor's sign
  // with fmod 0, the dividend's with fmod 1), infinities on either side, x mod 0
  k_binop ops[5] = {K_MAX, K_MIN, K_POW, K_MOD, K_FMOD};
  const char *names[5] = {"max special values", "min special values", "pow special values", "mod special values",
                          "fmod special values"};
  for (int k = 0; k < 5; k++) {
    k_binary_f32(want, a, b, 1, d, d, d, ops[k]);
    TK_OK(k_binary_f32_cuda(dy, da, db, 1, d, d, d, ops[k], NULL, TK_E));
    tk_from_dev(got, dy, sizeof got);
    if (ops[k] == K_POW) {
      CHECK_EQ_INT(pow_off(got, want, N), 0);
      continue;
    }
    // NaN where the reference has NaN (its payload is the compiler's to keep), the same bits
    // everywhere else: signed zeros included
    for (int i = 0; i < N; i++) {
      check_count_++;
      if (isnan(want[i]) ? !isnan(got[i]) : tk_bits(got[i]) != tk_bits(want[i]))
        CHECK_FAIL_("%s [%d]: got %g (0x%08x) want %g (0x%08x)", names[k], i, (double)got[i],
                    (unsigned)tk_bits(got[i]), (double)want[i], (unsigned)tk_bits(want[i]));
    }
  }
  // known values: max(NaN, 1) and max(1, NaN) are NaN (the reference's is that NaN itself),
  // max(-0, 0) = 0, min(3, -inf) = -inf, pow(-2, 3) = -8, pow(0, -1) = inf, pow(1, NaN) = 1,
  // pow(-8, 1/3) = NaN
  k_binary_f32(want, a, b, 1, d, d, d, K_MAX);
  CHECK(tk_bits(want[0]) == nan_bits);
  TK_OK(k_binary_f32_cuda(dy, da, db, 1, d, d, d, K_MAX, NULL, TK_E));
  tk_from_dev(got, dy, sizeof got);
  CHECK(isnan(got[0]));
  CHECK(isnan(got[1]));
  CHECK(tk_bits(got[3]) == tk_bits(0.0f));
  TK_OK(k_binary_f32_cuda(dy, da, db, 1, d, d, d, K_MIN, NULL, TK_E));
  tk_from_dev(got, dy, sizeof got);
  CHECK(got[7] == -INFINITY);
  TK_OK(k_binary_f32_cuda(dy, da, db, 1, d, d, d, K_POW, NULL, TK_E));
  tk_from_dev(got, dy, sizeof got);
  CHECK(got[8] == -8.0f);
  CHECK(got[9] == INFINITY);
  CHECK(got[10] == 1.0f);
  CHECK(isnan(got[11]));
  TK_CUDA(cudaFree(da));
  TK_CUDA(cudaFree(db));
  TK_CUDA(cudaFree(dy));
}

// --- comparisons

// One k_compare_cuda case against the reference, with values drawn from a
// small set so that ties are common. et K_F32, K_F16 (the reference on the
// widened values) or K_I64. Returns 1 on a mismatch.
static int compare_case(tk_rng *r, int ndim, const int64_t *yd, const int64_t *ad, const int64_t *bd,
                        k_elem et, k_cmpop op) {
  size_t ny = (size_t)count(ndim, yd), na = (size_t)count(ndim, ad), nb = (size_t)count(ndim, bd);
  float *af = tk_xmalloc(na * 4), *bf = tk_xmalloc(nb * 4);
  int64_t *ai = tk_xmalloc(na * 8), *bi = tk_xmalloc(nb * 8);
  uint16_t *ah = tk_xmalloc(na * 2), *bh = tk_xmalloc(nb * 2);
  uint8_t *want = tk_xmalloc(ny), *got = tk_xmalloc(ny);
  static const float pool[] = {-1.5f, -0.0f, 0.0f, 0.25f, 1.0f, 3.0f, NAN, INFINITY};
  for (size_t i = 0; i < na; i++) {
    af[i] = pool[tk_next(r) % 8];
    ai[i] = (int64_t)(tk_next(r) % 5) - 2;
  }
  for (size_t i = 0; i < nb; i++) {
    bf[i] = pool[tk_next(r) % 8];
    bi[i] = (int64_t)(tk_next(r) % 5) - 2;
  }
  if (et == K_I64) ai[0] = INT64_MIN, bi[0] = INT64_MAX;  // extremes compare as integers, not doubles
  k_f32_to_f16(ah, af, na);
  k_f32_to_f16(bh, bf, nb);
  if (et == K_I64) k_compare_i64(want, ai, bi, ndim, yd, ad, bd, op);
  else k_compare_f32(want, af, bf, ndim, yd, ad, bd, op);
  size_t es = et == K_I64 ? 8 : et == K_F16 ? 2 : 4;
  const void *ha = et == K_I64 ? (const void *)ai : et == K_F16 ? (const void *)ah : (const void *)af;
  const void *hb = et == K_I64 ? (const void *)bi : et == K_F16 ? (const void *)bh : (const void *)bf;
  void *da = tk_to_dev(ha, na * es), *db = tk_to_dev(hb, nb * es);
  uint8_t *dy = tk_dev_alloc(ny);
  TK_CUDA(cudaMemset(dy, 0x77, ny ? ny : 1));
  err e = {0};
  int rc = k_compare_cuda(dy, da, db, et, ndim, yd, ad, bd, op, NULL, &e);
  if (rc) fprintf(stderr, "  k_compare_cuda: %s\n", e.msg);
  tk_from_dev(got, dy, ny);
  int bad = rc != 0 || memcmp(got, want, ny) != 0;
  if (bad) {
    fprintf(stderr, "  compare op %d et %d rank %d\n", (int)op, (int)et, ndim);
    tk_compare_bits("compare", got, want, ny);
  }
  TK_CUDA(cudaFree(da));
  TK_CUDA(cudaFree(db));
  TK_CUDA(cudaFree(dy));
  free(af), free(bf), free(ai), free(bi), free(ah), free(bh), free(want), free(got);
  return bad;
}

static void test_compare(void) {
  tk_rng r = {4242};
  static const k_elem ets[3] = {K_F32, K_F16, K_I64};
  int cases = 0, bad = 0;
  for (int ndim = 1; ndim <= 3; ndim++) {
    for (int sh = 0; sh < tk_small_shapes(ndim); sh++) {
      int64_t yd[K_MAX_DIMS];
      tk_small_shape(ndim, sh, yd);
      for (int ma = 0; ma < (1 << ndim); ma++)
        for (int mb = 0; mb < (1 << ndim); mb++) {
          int64_t ad[K_MAX_DIMS], bd[K_MAX_DIMS];
          tk_bcast_dims(ndim, yd, ma, ad);
          tk_bcast_dims(ndim, yd, mb, bd);
          bad += compare_case(&r, ndim, yd, ad, bd, ets[cases % 3], (k_cmpop)(tk_next(&r) % 5));
          cases++;
        }
    }
  }
  struct {
    int ndim;
    int64_t y[K_MAX_DIMS], a[K_MAX_DIMS], b[K_MAX_DIMS];
  } big[] = {
      {0, {0}, {0}, {0}},
      {1, {1048579}, {1048579}, {1048579}},
      {1, {1048579}, {1048579}, {1}},
      {4, {8, 16, 32, 64}, {8, 1, 32, 64}, {1, 16, 1, 64}},
      {8, {2, 3, 2, 3, 2, 3, 2, 5}, {2, 1, 2, 1, 2, 1, 2, 5}, {1, 3, 1, 3, 1, 3, 1, 1}},
  };
  for (size_t c = 0; c < sizeof big / sizeof big[0]; c++)
    for (int et = 0; et < 3; et++)
      for (int op = 0; op < 5; op++) {
        bad += compare_case(&r, big[c].ndim, big[c].y, big[c].a, big[c].b, ets[et], (k_cmpop)op);
        cases++;
      }
  printf("compare: %d cases (eq/lt/gt/le/ge; fp32, fp16, int64), %d mismatched\n", cases, bad);
  CHECK_EQ_INT(bad, 0);
}

// --- Pow by an exponent of another type

static size_t esize(k_elem t) {
  return t == K_F64 || t == K_I64 || t == K_U64 ? 8 : t == K_I8 || t == K_U8 ? 1 : t == K_I16 || t == K_U16 ? 2 : 4;
}

static double as_double(const void *p, k_elem t, size_t i) {
  double v;
  k_cast(&v, K_F64, (const char *)p + i * esize(t), t, 1);
  return v;
}

// base [-4, 4] (floats) or -5..5 (integers; 0..9 unsigned), exponent -3..3 (integers) or
// [-2, 3] with a third integral (floats), through the element type by k_cast
static void fill_pow(tk_rng *r, void *p, k_elem t, size_t n, int exponent) {
  for (size_t i = 0; i < n; i++) {
    int is_int = t != K_F32 && t != K_F64, uns = t == K_U8 || t == K_U16 || t == K_U32 || t == K_U64;
    double v;
    if (is_int) v = (double)((int)(tk_next(r) % (exponent ? 7 : 11)) - (uns ? 0 : exponent ? 3 : 5));
    else if (tk_next(r) % 3 == 0) v = (double)((int)(tk_next(r) % 6) - 2);
    else v = exponent ? tk_uniform(r, -2.0f, 3.0f) : tk_uniform(r, -4.0f, 4.0f);
    k_cast((char *)p + i * esize(t), t, &v, K_F64, 1);
  }
}

static void test_pow_mixed(void) {
  static const struct { k_elem a, b; } pairs[] = {
      {K_F32, K_I32}, {K_F32, K_I64}, {K_F32, K_U32}, {K_F32, K_U64}, {K_F32, K_I8},
      {K_I32, K_F32}, {K_I64, K_F32}, {K_U8, K_F32},  {K_I16, K_F64}, {K_F64, K_I32}};
  tk_rng r = {0x9e3779b97f4a7c15ull};
  int cases = 0, bad = 0;
  enum { MAXN = 5 * 3 * 3 };
  for (size_t pi = 0; pi < sizeof pairs / sizeof pairs[0]; pi++)
    for (int ndim = 1; ndim <= 3; ndim++)
      for (int sh = 0; sh < tk_small_shapes(ndim); sh++) {
        int64_t yd[3], ad[3], bd[3];
        tk_small_shape(ndim, sh, yd);
        for (int ma = 0; ma < (1 << ndim); ma += 2)
          for (int mb = 0; mb < (1 << ndim); mb += 3) {
            tk_bcast_dims(ndim, yd, ma, ad);
            tk_bcast_dims(ndim, yd, mb, bd);
            size_t ny = (size_t)count(ndim, yd), na = (size_t)count(ndim, ad), nb = (size_t)count(ndim, bd);
            k_elem ta = pairs[pi].a, tb = pairs[pi].b;
            uint8_t a[MAXN * 8], b[MAXN * 8], want[MAXN * 8], got[MAXN * 8];
            fill_pow(&r, a, ta, na, 0);
            fill_pow(&r, b, tb, nb, 1);
            CHECK_EQ_INT(k_pow_mixed(want, a, ta, b, tb, ndim, yd, ad, bd), 0);
            void *da = tk_to_dev(a, na * esize(ta)), *db = tk_to_dev(b, nb * esize(tb));
            void *dy = tk_dev_alloc(ny * esize(ta));
            TK_OK(k_pow_mixed_cuda(dy, da, ta, db, tb, ndim, yd, ad, bd, NULL, TK_E));
            tk_from_dev(got, dy, ny * esize(ta));
            int fl = ta == K_F32 || ta == K_F64, off = 0;
            for (size_t i = 0; i < ny; i++) {
              double g = as_double(got, ta, i), w = as_double(want, ta, i);
              if (isnan(w) || isnan(g) || isinf(w) || isinf(g)) off += !(isnan(w) && isnan(g)) && g != w;
              else off += fl ? fabs(g - w) > 2.4e-7 * fabs(w) : fabs(g - w) > 1;
            }
            if (off)
              fprintf(stderr, "pow mixed %d by %d rank %d shape %d masks %d/%d: %d off\n", (int)ta, (int)tb, ndim, sh,
                      ma, mb, off);
            bad += off != 0;
            cases++;
            TK_CUDA(cudaFree(da));
            TK_CUDA(cudaFree(db));
            TK_CUDA(cudaFree(dy));
          }
      }
  // exact small powers: 3^2 and 2^-1 (0 for an integer base), (-2)^3, 2.5^2
  float fa[4] = {3, 2, -2, 2.5f}, fy[4];
  int32_t ib[4] = {2, -1, 3, 2}, ia[4] = {3, 2, -2, 5}, iy[4];
  float fb[4] = {2, -1, 3, 0.5f};
  int64_t d4[1] = {4};
  void *da = tk_to_dev(fa, sizeof fa), *db = tk_to_dev(ib, sizeof ib), *dy = tk_dev_alloc(sizeof fy);
  TK_OK(k_pow_mixed_cuda(dy, da, K_F32, db, K_I32, 1, d4, d4, d4, NULL, TK_E));
  tk_from_dev(fy, dy, sizeof fy);
  CHECK(fy[0] == 9.0f && fy[1] == 0.5f && fy[2] == -8.0f && fy[3] == 6.25f);
  TK_CUDA(cudaFree(da));
  TK_CUDA(cudaFree(db));
  da = tk_to_dev(ia, sizeof ia), db = tk_to_dev(fb, sizeof fb);
  TK_OK(k_pow_mixed_cuda(dy, da, K_I32, db, K_F32, 1, d4, d4, d4, NULL, TK_E));
  tk_from_dev(iy, dy, sizeof iy);
  CHECK(iy[0] == 9 && iy[1] == 0 && iy[2] == -8 && iy[3] == 2);  // 2^-1 = 0.5 truncates; sqrt(5) = 2.23
  TK_CUDA(cudaFree(da));
  TK_CUDA(cudaFree(db));
  TK_CUDA(cudaFree(dy));
  printf("pow mixed: %d cases (%zu type pairs), %d mismatched\n", cases, sizeof pairs / sizeof pairs[0], bad);
  CHECK_EQ_INT(bad, 0);
  CHECK(cases > 100);
}

static void test_errors(void) {
  err e = {0};
  int64_t y[2] = {2, 3}, a[2] = {2, 3}, b[2] = {2, 2}, z[2] = {0, 3};
  float *p = (float *)16;  // never dereferenced: every case fails before a launch
  CHECK_EQ_INT(k_binary_f32_cuda(p, p, p, 9, y, a, a, K_ADD, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_binary_f32_cuda");
  CHECK_EQ_INT(k_binary_f32_cuda(p, p, p, 2, y, a, b, K_ADD, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "broadcast");
  CHECK_EQ_INT(k_binary_f32_cuda(p, p, p, 2, y, a, a, (k_binop)(K_FMOD + 1), NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "op");
  CHECK_EQ_INT(k_binary_f32_cuda(p, p, p, 2, y, a, a, (k_binop)-1, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_binary_f32_cuda(p, p, p, 2, NULL, a, a, K_ADD, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_binary_f32_cuda(NULL, p, p, 2, y, a, a, K_ADD, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "NULL");
  // An empty output is a no-op, even with NULL buffers.
  CHECK_EQ_INT(k_binary_f32_cuda(NULL, NULL, NULL, 2, z, z, z, K_ADD, NULL, &e), 0);
  CHECK_EQ_INT(k_binary_f32_cuda(NULL, NULL, NULL, 2, z, z, z, K_POW, NULL, &e), 0);
  // comparisons
  uint8_t *yb = (uint8_t *)16;
  CHECK_EQ_INT(k_compare_cuda(yb, p, p, K_F32, 9, y, a, a, K_EQ, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_compare_cuda");
  CHECK_EQ_INT(k_compare_cuda(yb, p, p, K_F32, 2, y, a, b, K_EQ, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "broadcast");
  CHECK_EQ_INT(k_compare_cuda(yb, p, p, K_F32, 2, y, a, a, (k_cmpop)5, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "comparison");
  CHECK_EQ_INT(k_compare_cuda(yb, p, p, K_BOOL, 2, y, a, a, K_EQ, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "element type");
  CHECK_EQ_INT(k_compare_cuda(NULL, p, p, K_I64, 2, y, a, a, K_EQ, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "NULL");
  CHECK_EQ_INT(k_compare_cuda(NULL, NULL, NULL, K_F16, 2, z, z, z, K_GT, NULL, &e), 0);
  // Pow by an exponent of another type
  CHECK_EQ_INT(k_pow_mixed_cuda(p, p, K_F16, p, K_I32, 2, y, a, a, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_pow_mixed_cuda");
  CHECK_EQ_INT(k_pow_mixed_cuda(p, p, K_F32, p, K_BOOL, 2, y, a, a, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_pow_mixed_cuda(p, p, K_F32, p, K_I32, 2, y, a, b, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "broadcast");
  CHECK_EQ_INT(k_pow_mixed_cuda(NULL, p, K_F32, p, K_I32, 2, y, a, a, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_pow_mixed_cuda(NULL, NULL, K_F32, NULL, K_I64, 2, z, z, z, NULL, &e), 0);
}

int main(void) {
  test_errors();
  tk_require_device();
  scratch s = {0};
  test_hand(&s);
  test_exhaustive_small(&s);
  test_large(&s);
  test_inplace_and_div0();
  test_special();
  test_compare();
  test_pow_mixed();
  if (s.a) {
    TK_CUDA(cudaFree(s.a));
    TK_CUDA(cudaFree(s.b));
    TK_CUDA(cudaFree(s.y));
  }
  CHECK_DONE();
}
