// Tests kernels/index/k_index.cu (k_where_cuda) against k_where (kernels/index/k_index.c), bit
// for bit: y = cond ? a : b moves elements as they are. Covers every
// rank-1..3 shape with dims from {1,2,3} (inner 3..5) and every broadcast
// mask of the condition with a random pair of masks of X and Y, element
// sizes 1, 2, 4 and 8 (random bytes, so NaN patterns too), a non-zero
// condition byte other than 1 (true, as on the CPU), rank 0, ranks 5..8,
// ~1M-element same-shape and broadcast cases, in place on X, and the
// launcher's argument checks, which run without a device.
#include "test_k_cuda_util.h"

static int64_t count(int ndim, const int64_t *d) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= d[i];
  return n;
}

static void fill_bytes(tk_rng *r, void *p, size_t n) {
  uint8_t *b = p;
  for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(tk_next(r) >> 56);
}

// One case; in_place: y is a's buffer (a must have y's shape). Returns 1 on a mismatch.
static int where_case(tk_rng *r, int ndim, const int64_t *yd, const int64_t *cd, const int64_t *ad,
                      const int64_t *bd, size_t esz, int in_place) {
  size_t ny = (size_t)count(ndim, yd), nc = (size_t)count(ndim, cd), na = (size_t)count(ndim, ad),
         nb = (size_t)count(ndim, bd);
  uint8_t *c = tk_xmalloc(nc), *a = tk_xmalloc(na * esz), *b = tk_xmalloc(nb * esz), *want = tk_xmalloc(ny * esz),
          *got = tk_xmalloc(ny * esz);
  for (size_t i = 0; i < nc; i++) {
    uint64_t v = tk_next(r);
    c[i] = v & 1 ? (uint8_t)(1 + (v >> 60)) : 0;  // true as 1..16
  }
  fill_bytes(r, a, na * esz);
  fill_bytes(r, b, nb * esz);
  k_where(want, c, a, b, esz, ndim, yd, cd, ad, bd);
  void *dc = tk_to_dev(c, nc), *da = tk_to_dev(a, na * esz), *db = tk_to_dev(b, nb * esz);
  void *dy = in_place ? da : tk_dev_alloc(ny * esz);
  if (!in_place) TK_CUDA(cudaMemset(dy, 0x5a, (ny ? ny : 1) * esz));
  err e = {0};
  int rc = k_where_cuda(dy, dc, da, db, esz, ndim, yd, cd, ad, bd, NULL, &e);
  if (rc) fprintf(stderr, "  k_where_cuda: %s\n", e.msg);
  tk_from_dev(got, dy, ny * esz);
  int bad = rc != 0 || memcmp(got, want, ny * esz) != 0;
  if (bad) {
    fprintf(stderr, "  where esz %zu rank %d%s; y/cond/x/y dims", esz, ndim, in_place ? " in place" : "");
    for (int i = 0; i < ndim; i++)
      fprintf(stderr, " %lld/%lld/%lld/%lld", (long long)yd[i], (long long)cd[i], (long long)ad[i],
              (long long)bd[i]);
    fprintf(stderr, "\n");
    tk_compare_bits("where", got, want, ny * esz);
  }
  TK_CUDA(cudaFree(dc));
  TK_CUDA(cudaFree(da));
  TK_CUDA(cudaFree(db));
  if (!in_place) TK_CUDA(cudaFree(dy));
  free(c), free(a), free(b), free(want), free(got);
  return bad;
}

static void test_where(void) {
  tk_rng r = {0x853c49e6748fea9bull};
  static const size_t esz[] = {1, 2, 4, 8};
  int cases = 0, bad = 0;
  for (int ndim = 1; ndim <= 3; ndim++) {
    for (int sh = 0; sh < tk_small_shapes(ndim); sh++) {
      int64_t yd[K_MAX_DIMS];
      tk_small_shape(ndim, sh, yd);
      for (int mc = 0; mc < (1 << ndim); mc++)
        for (int rep = 0; rep < 3; rep++) {
          int ma = (int)(tk_next(&r) % (1u << ndim)), mb = (int)(tk_next(&r) % (1u << ndim));
          int64_t cd[K_MAX_DIMS], ad[K_MAX_DIMS], bd[K_MAX_DIMS];
          tk_bcast_dims(ndim, yd, mc, cd);
          tk_bcast_dims(ndim, yd, ma, ad);
          tk_bcast_dims(ndim, yd, mb, bd);
          bad += where_case(&r, ndim, yd, cd, ad, bd, esz[cases % 4], 0);
          cases++;
        }
    }
  }
  struct {
    int ndim;
    int64_t y[K_MAX_DIMS], c[K_MAX_DIMS], a[K_MAX_DIMS], b[K_MAX_DIMS];
  } big[] = {
      {0, {0}, {0}, {0}, {0}},
      {1, {1048579}, {1048579}, {1048579}, {1048579}},
      {1, {1048579}, {1048579}, {1}, {1}},                                  // select between two scalars
      {4, {8, 16, 32, 64}, {8, 1, 32, 64}, {8, 16, 32, 64}, {1, 16, 1, 1}},  // a mask over channels
      {5, {2, 3, 4, 5, 6}, {2, 1, 4, 1, 6}, {1, 3, 1, 5, 1}, {2, 3, 4, 5, 6}},
      {8, {2, 3, 2, 3, 2, 3, 2, 5}, {2, 1, 2, 1, 2, 1, 2, 5}, {1, 3, 1, 3, 1, 3, 1, 1}, {1, 1, 1, 1, 1, 1, 1, 1}},
  };
  for (size_t k = 0; k < sizeof big / sizeof big[0]; k++)
    for (size_t s = 0; s < 4; s++) {
      bad += where_case(&r, big[k].ndim, big[k].y, big[k].c, big[k].a, big[k].b, esz[s], 0);
      cases++;
    }
  // in place on X: y is X's buffer, X of y's shape
  int64_t y2[2] = {33, 17}, c2[2] = {33, 1}, b2[2] = {1, 17};
  for (size_t s = 0; s < 4; s++) {
    bad += where_case(&r, 2, y2, c2, y2, b2, esz[s], 1);
    cases++;
  }
  printf("where: %d cases, %d mismatched\n", cases, bad);
  CHECK_EQ_INT(bad, 0);

  // Known values: cond [1, 0, 2] picks 10, -2, 30.
  uint8_t c[3] = {1, 0, 2};
  float a[3] = {10, 20, 30}, b[1] = {-2}, y[3], want[3] = {10, -2, 30};
  int64_t d3[1] = {3}, d1[1] = {1};
  void *dc = tk_to_dev(c, 3), *da = tk_to_dev(a, sizeof a), *db = tk_to_dev(b, sizeof b), *dy = tk_dev_alloc(sizeof y);
  TK_OK(k_where_cuda(dy, dc, da, db, 4, 1, d3, d3, d3, d1, NULL, TK_E));
  tk_from_dev(y, dy, sizeof y);
  tk_compare("where known values", y, want, 3, 0, 0);
  TK_CUDA(cudaFree(dc));
  TK_CUDA(cudaFree(da));
  TK_CUDA(cudaFree(db));
  TK_CUDA(cudaFree(dy));
}

static void test_errors(void) {
  err e = {0};
  void *p = (void *)256;  // never dereferenced: every case fails before a launch
  const uint8_t *c = (const uint8_t *)256;
  int64_t y[2] = {2, 3}, a[2] = {2, 3}, one[2] = {1, 3}, bad[2] = {2, 2}, z[2] = {0, 3}, neg[2] = {-1, 3};
  CHECK_EQ_INT(k_where_cuda(p, c, p, p, 4, 9, y, a, a, a, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_where_cuda");
  CHECK_CONTAINS(e.msg, "rank");
  CHECK_EQ_INT(k_where_cuda(p, c, p, p, 4, 2, y, NULL, a, a, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_where_cuda(p, c, p, p, 3, 2, y, a, a, a, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "element size");
  CHECK_EQ_INT(k_where_cuda(p, c, p, p, 4, 2, y, bad, a, a, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "condition");
  CHECK_EQ_INT(k_where_cuda(p, c, p, p, 4, 2, y, one, bad, a, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "X");
  CHECK_EQ_INT(k_where_cuda(p, c, p, p, 4, 2, y, one, one, bad, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "broadcast");
  CHECK_EQ_INT(k_where_cuda(p, c, p, p, 4, 2, neg, neg, neg, neg, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_where_cuda(p, NULL, p, p, 4, 2, y, a, a, a, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "NULL");
  CHECK_EQ_INT(k_where_cuda(NULL, NULL, NULL, NULL, 8, 2, z, z, z, z, NULL, &e), 0);  // empty: nothing to do
}

int main(void) {
  test_errors();
  tk_require_device();
  test_where();
  CHECK_DONE();
}
