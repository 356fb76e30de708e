// Tests the CUDA plan's integer arithmetic (engine/cuda/plan_cuda_k.cu:
// eng_pk_binary_int_cuda, every k_binop) and k_compare_cuda (every k_cmpop)
// on every integer type (K_INT_TYPES) against the C references k_binary and
// k_compare, bit for bit: random bytes (so every width's edges, INT_MIN / -1,
// x / 0 and wraparound all occur), every broadcast mask of rank-1..3
// shapes. And k_unary_int_cuda (Neg, Abs, Sign, Clip with either bound, both
// or none, lo > hi too: issue 34's Clip of INT8 on the GPU) against k_unary,
// bit for bit, in place as well. The launchers' argument checks run without a
// device.
#include "engine/cuda/plan_cuda_k.h"
#include "test_k_cuda_util.h"

static const k_elem INT_TYPES[] = {K_I8, K_I16, K_I32, K_I64, K_U8, K_U16, K_U32, K_U64};
static const size_t INT_SIZES[] = {1, 2, 4, 8, 1, 2, 4, 8};

static int64_t count(int ndim, const int64_t *d) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= d[i];
  return n;
}

// Random bytes, with small values (0, 1, -1, 2...) in a third of the
// elements so Div, Mod and Pow see their special divisors and exponents.
static void fill(tk_rng *r, void *p, size_t n, size_t esz) {
  uint8_t *b = p;
  for (size_t i = 0; i < n; i++) {
    uint64_t v = tk_next(r);
    if (v % 3 == 0) v = (uint64_t)((int64_t)(tk_next(r) % 7) - 3);  // -3..3, sign-extended
    memcpy(b + i * esz, &v, esz);  // little-endian: the low bytes
  }
}

static void test_args(void) {
  err e = {0};
  int64_t d[1] = {4};
  CHECK(eng_pk_binary_int_cuda(NULL, NULL, NULL, K_F32, 1, d, d, d, K_ADD, NULL, &e) != 0);
  CHECK_CONTAINS(e.msg, "not an integer");
  CHECK(eng_pk_binary_int_cuda(NULL, NULL, NULL, K_I8, 0, d, d, d, K_ADD, NULL, &e) != 0);
  CHECK(eng_pk_binary_int_cuda(NULL, NULL, NULL, K_I8, 1, d, d, d, (k_binop)99, NULL, &e) != 0);
  CHECK(k_compare_cuda(NULL, NULL, NULL, K_BOOL, 1, d, d, d, K_EQ, NULL, &e) != 0);
  CHECK(k_unary_int_cuda(NULL, NULL, K_F32, 4, K_CLIP, NULL, NULL, NULL, &e) != 0);
  CHECK_CONTAINS(e.msg, "k_unary_int_cuda");
  CHECK(k_unary_int_cuda(NULL, NULL, K_U8, 4, K_NEG, NULL, NULL, NULL, &e) != 0);  // ONNX's Neg: signed only
  CHECK(k_unary_int_cuda(NULL, NULL, K_I8, 4, K_EXP, NULL, NULL, NULL, &e) != 0);
  CHECK(k_unary_int_cuda(NULL, NULL, K_I8, 4, K_CLIP, NULL, NULL, NULL, &e) != 0);  // NULL buffers
  CHECK_EQ_INT(k_unary_int_cuda(NULL, NULL, K_I8, 0, K_CLIP, NULL, NULL, NULL, &e), 0);
}

// Neg, Abs, Sign and Clip (bounds: none, lo, hi, both, lo > hi) on every integer type, out of place
// and in place.
static int test_unary(tk_rng *r) {
  enum { N = 257 };
  static const k_unop ops[] = {K_NEG, K_ABS, K_SIGN, K_CLIP};
  int cases = 0;
  for (size_t ti = 0; ti < sizeof INT_TYPES / sizeof INT_TYPES[0]; ti++) {
    k_elem t = INT_TYPES[ti];
    size_t esz = INT_SIZES[ti];
    uint8_t x[N * 8], want[N * 8], got[N * 8], lo[8], hi[8];
    fill(r, x, N, esz);
    void *dx = tk_to_dev(x, N * esz), *dy = tk_dev_alloc(N * esz);
    for (size_t oi = 0; oi < sizeof ops / sizeof ops[0]; oi++)
      for (int bounds = 0; bounds < (ops[oi] == K_CLIP ? 5 : 1); bounds++) {
        if (!k_unary_takes(t, ops[oi])) continue;
        fill(r, lo, 1, esz);
        fill(r, hi, 1, esz);
        if (bounds == 3 || bounds == 4) {  // both, ordered (3) or lo > hi (4), as the element type compares them
          int64_t a = 0, b = 0;
          k_cast(&a, K_I64, lo, t, 1);
          k_cast(&b, K_I64, hi, t, 1);
          int uns = t == K_U8 || t == K_U16 || t == K_U32 || t == K_U64;
          int lt = uns ? (uint64_t)a < (uint64_t)b : a < b;
          if (lt == (bounds == 4)) {
            uint8_t tmp[8];
            memcpy(tmp, lo, esz), memcpy(lo, hi, esz), memcpy(hi, tmp, esz);
          }
        }
        const void *pl = bounds == 1 || bounds >= 3 ? lo : NULL, *ph = bounds == 2 || bounds >= 3 ? hi : NULL;
        CHECK_EQ_INT(k_unary(want, x, t, N, ops[oi], pl, ph), 0);
        char what[96];
        snprintf(what, sizeof what, "unary type %d op %d bounds %d", (int)t, (int)ops[oi], bounds);
        TK_OK(k_unary_int_cuda(dy, dx, t, N, ops[oi], pl, ph, NULL, TK_E));
        tk_from_dev(got, dy, N * esz);
        tk_compare_bits(what, got, want, N * esz);
        void *dz = tk_to_dev(x, N * esz);  // in place
        TK_OK(k_unary_int_cuda(dz, dz, t, N, ops[oi], pl, ph, NULL, TK_E));
        tk_from_dev(got, dz, N * esz);
        tk_compare_bits(what, got, want, N * esz);
        TK_CUDA(cudaFree(dz));
        cases++;
      }
    TK_CUDA(cudaFree(dx));
    TK_CUDA(cudaFree(dy));
  }
  return cases;
}

int main(void) {
  test_args();
  tk_require_device();
  tk_rng r = {0x1234abcdu};
  enum { MAXN = 5 * 3 * 3 };
  int cases = 0;
  for (size_t ti = 0; ti < sizeof INT_TYPES / sizeof INT_TYPES[0]; ti++) {
    k_elem t = INT_TYPES[ti];
    size_t esz = INT_SIZES[ti];
    for (int ndim = 1; ndim <= 3; ndim++)
      for (int sh = 0; sh < tk_small_shapes(ndim); sh++) {
        int64_t yd[3], ad[3], bd[3];
        tk_small_shape(ndim, sh, yd);
        for (int ma = 0; ma < (1 << ndim); ma++)
          for (int mb = 0; mb < (1 << ndim); mb += 3) {
            tk_bcast_dims(ndim, yd, ma, ad);
            tk_bcast_dims(ndim, yd, mb, bd);
            int64_t ny = count(ndim, yd), na = count(ndim, ad), nb = count(ndim, bd);
            uint8_t a[MAXN * 8], b[MAXN * 8], want[MAXN * 8], got[MAXN * 8];
            fill(&r, a, (size_t)na, esz);
            fill(&r, b, (size_t)nb, esz);
            void *da = tk_to_dev(a, (size_t)na * esz), *db = tk_to_dev(b, (size_t)nb * esz);
            void *dy = tk_dev_alloc((size_t)ny * esz);
            for (int op = K_ADD; op <= K_FMOD; op++) {
              char what[96];
              snprintf(what, sizeof what, "type %d op %d rank %d shape %d masks %d/%d", (int)t, op, ndim, sh, ma, mb);
              CHECK_EQ_INT(k_binary(want, a, b, t, ndim, yd, ad, bd, (k_binop)op), 0);
              TK_OK(eng_pk_binary_int_cuda(dy, da, db, t, ndim, yd, ad, bd, (k_binop)op, NULL, TK_E));
              tk_from_dev(got, dy, (size_t)ny * esz);
              tk_compare_bits(what, got, want, (size_t)ny * esz);
              cases++;
            }
            for (int op = K_EQ; op <= K_GE; op++) {
              char what[96];
              snprintf(what, sizeof what, "compare type %d op %d rank %d shape %d", (int)t, op, ndim, sh);
              CHECK_EQ_INT(k_compare(want, a, b, t, ndim, yd, ad, bd, (k_cmpop)op), 0);
              TK_OK(k_compare_cuda(dy, da, db, t, ndim, yd, ad, bd, (k_cmpop)op, NULL, TK_E));
              tk_from_dev(got, dy, (size_t)ny);
              tk_compare_bits(what, got, want, (size_t)ny);
              cases++;
            }
            TK_CUDA(cudaFree(da));
            TK_CUDA(cudaFree(db));
            TK_CUDA(cudaFree(dy));
          }
      }
  }
  int ucases = test_unary(&r);
  printf("%d cases, %d integer unary cases\n", cases, ucases);
  CHECK(ucases >= 8 * 5);
  CHECK(cases > 1000);
  CHECK_DONE();
}
