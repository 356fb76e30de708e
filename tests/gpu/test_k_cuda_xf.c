// Tests the CUDA kernels of the transformer mask and index ops against
// their C references, bit for bit: k_compare_cuda (every k_cmpop; FP32,
// INT64, INT32; NaN against numbers), k_logic_cuda (k_logic, nonzero
// bytes other than 1), k_boolop_cuda (k_not, k_isnan, k_isinf, FP32 and
// FP16), k_cumsum_cuda (k_cumsum_f32/_i64/_i32, exclusive and reverse, in
// place), k_gather_cuda (embeddings: int64 and int32 ids, negative ones),
// k_expand_cuda (every broadcast mask), k_gather_elements_cuda, k_gather_nd_cuda (batch dims, negative
// indices, int32 indices; out-of-range indices give zero bytes) and
// k_trilu_cuda (k past either edge, in place), k_slice_cuda (steps of both signs, every start,
// empty results). Shapes broadcast over every
// mask of rank-1..3 dims from {1,2,3}. The launchers' argument checks run
// without a device.
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

// Small values (so equal pairs occur), a NaN now and then for floats.
static void fill_small(tk_rng *r, void *p, size_t n, k_elem et) {
  for (size_t i = 0; i < n; i++) {
    int v = (int)(tk_next(r) % 5) - 2;
    if (et == K_F32) ((float *)p)[i] = tk_next(r) % 9 == 0 ? NAN : (float)v * 0.5f;
    else if (et == K_I64) ((int64_t *)p)[i] = v;
    else if (et == K_I32) ((int32_t *)p)[i] = v;
    else ((uint8_t *)p)[i] = v < 0 ? 0 : (uint8_t)v;  // BOOL: 0, 1 or 2 (true)
  }
}

static size_t esz_of(k_elem et) { return et == K_I64 ? 8 : et == K_BOOL ? 1 : 4; }

// One broadcasting case of a comparison (op >= 0) or logic op (lop >= 0).
static int bin_case(tk_rng *r, int ndim, const int64_t *yd, const int64_t *ad, const int64_t *bd, k_elem et,
                    int op, int lop) {
  size_t ny = (size_t)count(ndim, yd), na = (size_t)count(ndim, ad), nb = (size_t)count(ndim, bd);
  size_t es = esz_of(et);
  void *a = tk_xmalloc(na * es), *b = tk_xmalloc(nb * es);
  uint8_t *want = tk_xmalloc(ny), *got = tk_xmalloc(ny);
  fill_small(r, a, na, et);
  fill_small(r, b, nb, et);
  if (lop >= 0) k_logic(want, a, b, ndim, yd, ad, bd, (k_logop)lop);
  else if (et == K_F32) k_compare_f32(want, a, b, ndim, yd, ad, bd, (k_cmpop)op);
  else if (et == K_I64) k_compare_i64(want, a, b, ndim, yd, ad, bd, (k_cmpop)op);
  else k_compare_i32(want, a, b, ndim, yd, ad, bd, (k_cmpop)op);
  void *da = tk_to_dev(a, na * es), *db = tk_to_dev(b, nb * es), *dy = tk_dev_alloc(ny ? ny : 1);
  TK_CUDA(cudaMemset(dy, 0x5a, ny ? ny : 1));
  err e = {0};
  int rc = lop >= 0 ? k_logic_cuda(dy, da, db, ndim, yd, ad, bd, (k_logop)lop, NULL, &e)
                    : k_compare_cuda(dy, da, db, et, ndim, yd, ad, bd, (k_cmpop)op, NULL, &e);
  if (rc) fprintf(stderr, "  %s\n", e.msg);
  tk_from_dev(got, dy, ny);
  int bad = rc != 0 || memcmp(got, want, ny) != 0;
  if (bad) {
    fprintf(stderr, "  %s %d type %d rank %d\n", lop >= 0 ? "logic" : "compare", lop >= 0 ? lop : op, (int)et,
            ndim);
    tk_compare_bits("bool result", got, want, ny);
  }
  TK_CUDA(cudaFree(da));
  TK_CUDA(cudaFree(db));
  TK_CUDA(cudaFree(dy));
  free(a), free(b), free(want), free(got);
  return bad;
}

static void test_compare_logic(void) {
  tk_rng r = {0x2545f4914f6cdd1dull};
  static const k_elem types[] = {K_F32, K_I64, K_I32};
  int cases = 0, bad = 0;
  for (int ndim = 1; ndim <= 3; ndim++)
    for (int sh = 0; sh < 9; sh++) {
      int64_t yd[K_MAX_DIMS];
      tk_small_shape(ndim, sh, yd);
      for (int ma = 0; ma < (1 << ndim); ma++) {
        int mb = (int)(tk_next(&r) % (1u << ndim));
        int64_t ad[K_MAX_DIMS], bd[K_MAX_DIMS];
        tk_bcast_dims(ndim, yd, ma, ad);
        tk_bcast_dims(ndim, yd, mb, bd);
        for (int op = K_EQ; op <= K_GE; op++, cases++)
          bad += bin_case(&r, ndim, yd, ad, bd, types[cases % 3], op, -1);
        for (int lop = K_AND; lop <= K_XNOR; lop++, cases++) bad += bin_case(&r, ndim, yd, ad, bd, K_BOOL, -1, lop);
      }
    }
  int64_t big[1] = {1048579}, one[1] = {1};
  for (int op = K_EQ; op <= K_GE; op++, cases++) bad += bin_case(&r, 1, big, big, one, K_I32, op, -1);
  bad += bin_case(&r, 1, big, big, big, K_BOOL, -1, K_XOR), cases++;
  printf("compare/logic: %d cases, %d mismatched\n", cases, bad);
  CHECK_EQ_INT(bad, 0);
}

static void test_boolop(void) {
  float x[8] = {0.0f, -1.5f, NAN, -NAN, INFINITY, -INFINITY, 3e38f, -0.0f};
  uint16_t h[8];
  k_f32_to_f16(h, x, 8);
  uint8_t want[8], got[8];
  void *dx = tk_to_dev(x, sizeof x), *dh = tk_to_dev(h, sizeof h), *dy = tk_dev_alloc(8);
  for (int f16 = 0; f16 < 2; f16++) {
    float w[8];
    if (f16) k_f16_to_f32(w, h, 8);  // 3e38 is +inf in half
    else memcpy(w, x, sizeof w);
    k_isnan(want, w, 8);
    TK_OK(k_boolop_cuda(dy, f16 ? dh : dx, 8, f16 ? K_F16 : K_F32, K_ISNAN, 0, 0, NULL, TK_E));
    tk_from_dev(got, dy, 8);
    tk_compare_bits("isnan", got, want, 8);
    for (int nb = 0; nb < 4; nb++) {
      k_isinf(want, w, 8, nb & 1, nb >> 1);
      TK_OK(k_boolop_cuda(dy, f16 ? dh : dx, 8, f16 ? K_F16 : K_F32, K_ISINF, nb & 1, nb >> 1, NULL, TK_E));
      tk_from_dev(got, dy, 8);
      tk_compare_bits("isinf", got, want, 8);
    }
  }
  uint8_t b[8] = {0, 1, 2, 255, 0, 0, 1, 7};
  k_not(want, b, 8);
  void *db = tk_to_dev(b, 8);
  TK_OK(k_boolop_cuda(db, db, 8, K_BOOL, K_NOT, 0, 0, NULL, TK_E));  // in place
  tk_from_dev(got, db, 8);
  tk_compare_bits("not", got, want, 8);
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(dh));
  TK_CUDA(cudaFree(dy));
  TK_CUDA(cudaFree(db));
}

static void test_cumsum(void) {
  tk_rng r = {0x9e3779b97f4a7c15ull};
  static const size_t shapes[][3] = {{1, 7, 1}, {3, 5, 4}, {2, 1, 9}, {1, 4096, 1}, {5, 300, 33}};
  static const k_elem types[] = {K_F32, K_I64, K_I32};
  int cases = 0, bad = 0;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int t = 0; t < 3; t++)
      for (int mode = 0; mode < 8; mode++, cases++) {  // exclusive, reverse, in place
        size_t o = shapes[s][0], l = shapes[s][1], in = shapes[s][2], n = o * l * in, es = esz_of(types[t]);
        void *x = tk_xmalloc(n * es), *want = tk_xmalloc(n * es), *got = tk_xmalloc(n * es);
        if (types[t] == K_F32) tk_fill(&r, x, n, -1.0f, 1.0f);
        else fill_bytes(&r, x, n * es);  // wraps
        int ex = mode & 1, rev = (mode >> 1) & 1, inpl = mode >> 2;
        if (types[t] == K_F32) k_cumsum_f32(want, x, o, l, in, ex, rev);
        else if (types[t] == K_I64) k_cumsum_i64(want, x, o, l, in, ex, rev);
        else k_cumsum_i32(want, x, o, l, in, ex, rev);
        void *dx = tk_to_dev(x, n * es), *dy = inpl ? dx : tk_dev_alloc(n * es);
        err e = {0};
        int rc = k_cumsum_cuda(dy, dx, types[t], o, l, in, ex, rev, NULL, &e);
        if (rc) fprintf(stderr, "  %s\n", e.msg);
        tk_from_dev(got, dy, n * es);
        if (rc || memcmp(got, want, n * es)) {
          bad++;
          fprintf(stderr, "  cumsum type %d [%zu,%zu,%zu] mode %d\n", (int)types[t], o, l, in, mode);
          tk_compare_bits("cumsum", got, want, n * es);
        }
        TK_CUDA(cudaFree(dx));
        if (!inpl) TK_CUDA(cudaFree(dy));
        free(x), free(want), free(got);
      }
  printf("cumsum: %d cases, %d mismatched\n", cases, bad);
  CHECK_EQ_INT(bad, 0);
  // FP16: the FP32 sums of the widened values, each rounded once
  uint16_t h[6];
  float f[6] = {0.5f, 1.25f, -3.0f, 1024.0f, 0.001f, 7.0f}, fw[6];
  k_f32_to_f16(h, f, 6);
  k_f16_to_f32(f, h, 6);
  k_cumsum_f32(fw, f, 2, 3, 1, 0, 0);
  uint16_t want16[6], got16[6];
  k_f32_to_f16(want16, fw, 6);
  void *dh = tk_to_dev(h, sizeof h);
  TK_OK(k_cumsum_cuda(dh, dh, K_F16, 2, 3, 1, 0, 0, NULL, TK_E));
  tk_from_dev(got16, dh, sizeof got16);
  tk_compare_bits("cumsum f16", got16, want16, sizeof want16);
  TK_CUDA(cudaFree(dh));
}

static void test_gather(void) {
  tk_rng r = {0x632be59bd9b4e019ull};
  int cases = 0, bad = 0;
  // GatherElements: data [3, 4, 5], indices smaller off the axis, every axis, both index types
  int64_t xd[3] = {3, 4, 5};
  for (int axis = 0; axis < 3; axis++)
    for (int i32 = 0; i32 < 2; i32++)
      for (size_t es = 1; es <= 8; es *= 2, cases++) {
        int64_t id[3] = {2, 3, 4};
        id[axis] = 7;
        size_t nx = 60, ni = (size_t)count(3, id);
        void *x = tk_xmalloc(nx * es), *idx = tk_xmalloc(ni * 8), *want = tk_xmalloc(ni * es),
             *got = tk_xmalloc(ni * es);
        fill_bytes(&r, x, nx * es);
        for (size_t k = 0; k < ni; k++) {
          int64_t v = (int64_t)(tk_next(&r) % (2 * (uint64_t)xd[axis])) - xd[axis];  // -len..len-1
          if (i32) ((int32_t *)idx)[k] = (int32_t)v;
          else ((int64_t *)idx)[k] = v;
        }
        CHECK_EQ_INT(k_gather_elements(want, x, es, 3, xd, axis, idx, i32, id), 0);
        void *dx = tk_to_dev(x, nx * es), *di = tk_to_dev(idx, ni * 8), *dy = tk_dev_alloc(ni * es);
        TK_OK(k_gather_elements_cuda(dy, dx, es, 3, xd, axis, di, i32, id, NULL, NULL, TK_E));
        tk_from_dev(got, dy, ni * es);
        if (memcmp(got, want, ni * es)) bad++, tk_compare_bits("gather_elements", got, want, ni * es);
        TK_CUDA(cudaFree(dx));
        TK_CUDA(cudaFree(di));
        TK_CUDA(cudaFree(dy));
        free(x), free(idx), free(want), free(got);
      }
  // Gather: x as [outer, len, inner], every element size, both index types
  static const size_t gshapes[][4] = {{1, 30, 16, 7}, {3, 5, 1, 4}, {2, 4, 3, 1}};  // outer, len, inner, n_idx
  for (size_t g = 0; g < 3; g++)
    for (int i32 = 0; i32 < 2; i32++)
      for (size_t es = 1; es <= 8; es *= 2, cases++) {
        size_t o = gshapes[g][0], l = gshapes[g][1], in = gshapes[g][2], ni = gshapes[g][3];
        size_t nx = o * l * in, ny = o * ni * in;
        void *x = tk_xmalloc(nx * es), *idx = tk_xmalloc(ni * 8), *want = tk_xmalloc(ny * es),
             *got = tk_xmalloc(ny * es);
        fill_bytes(&r, x, nx * es);
        for (size_t k = 0; k < ni; k++) {
          int64_t v = (int64_t)(tk_next(&r) % (2 * (uint64_t)l)) - (int64_t)l;
          if (i32) ((int32_t *)idx)[k] = (int32_t)v;
          else ((int64_t *)idx)[k] = v;
        }
        CHECK_EQ_INT(k_gather(want, x, es, o, (int64_t)l, in, idx, i32, ni), 0);
        void *dx = tk_to_dev(x, nx * es), *di = tk_to_dev(idx, ni * 8), *dy = tk_dev_alloc(ny * es);
        TK_OK(k_gather_cuda(dy, dx, es, o, (int64_t)l, in, di, i32, ni, NULL, NULL, TK_E));
        tk_from_dev(got, dy, ny * es);
        if (memcmp(got, want, ny * es)) bad++, tk_compare_bits("gather", got, want, ny * es);
        TK_CUDA(cudaFree(dx));
        TK_CUDA(cudaFree(di));
        TK_CUDA(cudaFree(dy));
        free(x), free(idx), free(want), free(got);
      }
  // Expand: y [2, 3, 4], x with every subset of dims set to 1
  for (int mask = 0; mask < 8; mask++)
    for (size_t es = 1; es <= 8; es *= 2, cases++) {
      int64_t yd[3] = {2, 3, 4}, xd[3];
      for (int i = 0; i < 3; i++) xd[i] = (mask >> i) & 1 ? 1 : yd[i];
      size_t nx = (size_t)count(3, xd), ny = 24;
      void *x = tk_xmalloc(nx * es), *want = tk_xmalloc(ny * es), *got = tk_xmalloc(ny * es);
      fill_bytes(&r, x, nx * es);
      k_expand(want, x, es, 3, yd, xd);
      void *dx = tk_to_dev(x, nx * es), *dy = tk_dev_alloc(ny * es);
      TK_OK(k_expand_cuda(dy, dx, es, 3, yd, xd, NULL, TK_E));
      tk_from_dev(got, dy, ny * es);
      if (memcmp(got, want, ny * es)) bad++, tk_compare_bits("expand", got, want, ny * es);
      TK_CUDA(cudaFree(dx));
      TK_CUDA(cudaFree(dy));
      free(x), free(want), free(got);
    }
  // GatherND: x as [batch 2, d = {3, 4}, slice 5], m 1 or 2
  for (int m = 1; m <= 2; m++)
    for (int i32 = 0; i32 < 2; i32++, cases++) {
      int64_t d[2] = {3, 4};
      size_t batch = 2, nt = 6, slice = m == 1 ? 4 * 5 : 5, nx = 2 * 3 * 4 * 5, es = 4;
      size_t ny = batch * nt * slice, ni = batch * nt * (size_t)m;
      void *x = tk_xmalloc(nx * es), *idx = tk_xmalloc(ni * 8), *want = tk_xmalloc(ny * es),
           *got = tk_xmalloc(ny * es);
      fill_bytes(&r, x, nx * es);
      for (size_t k = 0; k < ni; k++) {
        int64_t len = d[k % (size_t)m], v = (int64_t)(tk_next(&r) % (2 * (uint64_t)len)) - len;
        if (i32) ((int32_t *)idx)[k] = (int32_t)v;
        else ((int64_t *)idx)[k] = v;
      }
      CHECK_EQ_INT(k_gather_nd(want, x, es, batch, m, d, slice, idx, i32, nt), 0);
      void *dx = tk_to_dev(x, nx * es), *di = tk_to_dev(idx, ni * 8), *dy = tk_dev_alloc(ny * es);
      TK_OK(k_gather_nd_cuda(dy, dx, es, batch, m, d, slice, di, i32, nt, NULL, NULL, TK_E));
      tk_from_dev(got, dy, ny * es);
      if (memcmp(got, want, ny * es)) bad++, tk_compare_bits("gather_nd", got, want, ny * es);
      TK_CUDA(cudaFree(dx));
      TK_CUDA(cudaFree(di));
      TK_CUDA(cudaFree(dy));
      free(x), free(idx), free(want), free(got);
    }
  printf("gather: %d cases, %d mismatched\n", cases, bad);
  CHECK_EQ_INT(bad, 0);
  // out of range: zero bytes, the in-range neighbours as usual, the flag raised (and left alone by a
  // gather with every index in range)
  float x[4] = {1, 2, 3, 4}, y[3], want[3] = {2, 0, 4};
  int64_t idx[3] = {1, 4, -1}, xd1[1] = {4}, id1[1] = {3};
  void *dx = tk_to_dev(x, sizeof x), *di = tk_to_dev(idx, sizeof idx), *dy = tk_dev_alloc(sizeof y);
  int *dbad = tk_dev_alloc(sizeof *dbad), hbad = -1;
  for (int k = 0; k < 3; k++) {
    TK_CUDA(cudaMemset(dbad, 0, sizeof *dbad));
    if (k == 0) TK_OK(k_gather_elements_cuda(dy, dx, 4, 1, xd1, 0, di, 0, id1, dbad, NULL, TK_E));
    if (k == 1) TK_OK(k_gather_nd_cuda(dy, dx, 4, 1, 1, xd1, 1, di, 0, 3, dbad, NULL, TK_E));
    if (k == 2) TK_OK(k_gather_cuda(dy, dx, 4, 1, 4, 1, di, 0, 3, dbad, NULL, TK_E));
    tk_from_dev(y, dy, sizeof y);
    tk_from_dev(&hbad, dbad, sizeof hbad);
    tk_compare(k == 0 ? "gather_elements out of range" : k == 1 ? "gather_nd out of range" : "gather out of range", y,
               want, 3, 0, 0);
    CHECK_EQ_INT(hbad, 1);
  }
  TK_CUDA(cudaMemset(dbad, 0, sizeof *dbad));
  TK_OK(k_gather_cuda(dy, dx, 4, 1, 4, 1, di, 0, 1, dbad, NULL, TK_E));  // idx[0] = 1 only
  tk_from_dev(&hbad, dbad, sizeof hbad);
  CHECK_EQ_INT(hbad, 0);
  TK_CUDA(cudaFree(dbad));
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(di));
  TK_CUDA(cudaFree(dy));
}

static void test_trilu(void) {
  tk_rng r = {0xda3e39cb94b95bdbull};
  static const int64_t ks[] = {INT64_MIN, -9, -2, -1, 0, 1, 3, 9, INT64_MAX};
  int cases = 0, bad = 0;
  for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
    for (int upper = 0; upper < 2; upper++)
      for (size_t es = 1; es <= 8; es *= 2, cases++) {
        size_t batch = 3, n = batch * 4 * 6;
        void *x = tk_xmalloc(n * es), *want = tk_xmalloc(n * es), *got = tk_xmalloc(n * es);
        fill_bytes(&r, x, n * es);
        k_trilu(want, x, es, batch, 4, 6, ks[ki], upper);
        void *dx = tk_to_dev(x, n * es);
        TK_OK(k_trilu_cuda(dx, dx, es, batch, 4, 6, ks[ki], upper, NULL, TK_E));  // in place
        tk_from_dev(got, dx, n * es);
        if (memcmp(got, want, n * es)) {
          bad++;
          fprintf(stderr, "  trilu k %lld upper %d esz %zu\n", (long long)ks[ki], upper, es);
          tk_compare_bits("trilu", got, want, n * es);
        }
        TK_CUDA(cudaFree(dx));
        free(x), free(want), free(got);
      }
  printf("trilu: %d cases, %d mismatched\n", cases, bad);
  CHECK_EQ_INT(bad, 0);
}

// Slice: every element size, ranks 1..3, each dim sliced with steps -3..3 (not 0) from every start,
// lengths up to what fits, against k_slice (starts and lengths as slice_dims leaves them: inside x).
static void test_slice(void) {
  tk_rng r = {0x51ce5eedull};
  static const int64_t xd[3] = {5, 4, 6};
  int cases = 0, bad = 0;
  for (int nd = 1; nd <= 3; nd++)
    for (int t = 0; t < 60; t++)
      for (size_t es = 1; es <= 8; es *= 2, cases++) {
        int64_t st[3], sp[3], yd[3];
        for (int d = 0; d < nd; d++) {
          int64_t dim = xd[3 - nd + d], step = (int64_t)(tk_next(&r) % 6) - 3;
          if (step >= 0) step++;  // -3..-1, 1..3
          st[d] = (int64_t)(tk_next(&r) % (uint64_t)dim);
          int64_t room = step > 0 ? (dim - 1 - st[d]) / step + 1 : st[d] / -step + 1;  // elements that fit
          yd[d] = (int64_t)(tk_next(&r) % (uint64_t)(room + 1));                       // 0 too: empty results
          sp[d] = step;
        }
        const int64_t *xdims = xd + 3 - nd;
        size_t nx = (size_t)count(nd, xdims), ny = (size_t)count(nd, yd);
        void *x = tk_xmalloc(nx * es), *want = tk_xmalloc(ny * es + 1), *got = tk_xmalloc(ny * es + 1);
        fill_bytes(&r, x, nx * es);
        k_slice(want, x, es, nd, xdims, st, sp, yd);
        void *dx = tk_to_dev(x, nx * es), *dy = tk_dev_alloc(ny * es + 1);
        TK_OK(k_slice_cuda(dy, dx, es, nd, xdims, st, sp, yd, NULL, TK_E));
        tk_from_dev(got, dy, ny * es);
        if (ny && memcmp(got, want, ny * es)) {
          bad++;
          fprintf(stderr, "  slice rank %d esz %zu\n", nd, es);
        }
        TK_CUDA(cudaFree(dx));
        TK_CUDA(cudaFree(dy));
        free(x), free(want), free(got);
      }
  printf("slice: %d cases, %d mismatched\n", cases, bad);
  CHECK_EQ_INT(bad, 0);
}

static void test_errors(void) {
  err e = {0};
  void *p = (void *)256;  // never dereferenced: every case fails before a launch
  int64_t d2[2] = {2, 3}, bad2[2] = {2, 2}, big[2] = {2, 9}, z[2] = {0, 3};
  CHECK_EQ_INT(k_compare_cuda(p, p, p, K_I32, 2, d2, d2, d2, (k_cmpop)9, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "unknown comparison");
  CHECK_EQ_INT(k_compare_cuda(p, p, p, K_BOOL, 2, d2, d2, d2, K_LE, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "element type BOOL has no kernel");
  CHECK_EQ_INT(k_logic_cuda(p, p, p, 2, d2, bad2, d2, K_AND, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_logic_cuda");
  CHECK_EQ_INT(k_logic_cuda(p, p, p, 2, d2, d2, d2, (k_logop)7, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_logic_cuda(p, NULL, p, 2, d2, d2, d2, K_OR, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "NULL");
  CHECK_EQ_INT(k_logic_cuda(NULL, NULL, NULL, 2, z, z, z, K_OR, NULL, &e), 0);  // empty
  CHECK_EQ_INT(k_boolop_cuda(p, p, 4, K_F32, K_NOT, 0, 0, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_boolop_cuda");
  CHECK_EQ_INT(k_boolop_cuda(p, p, 4, K_I64, K_ISNAN, 0, 0, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_boolop_cuda(p, p, 4, K_F32, (k_boolop)5, 0, 0, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_boolop_cuda(NULL, p, 4, K_F32, K_ISINF, 1, 1, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_boolop_cuda(NULL, NULL, 0, K_F32, K_ISINF, 1, 1, NULL, &e), 0);
  CHECK_EQ_INT(k_cumsum_cuda(p, p, K_BOOL, 1, 2, 3, 0, 0, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_cumsum_cuda");
  CHECK_EQ_INT(k_cumsum_cuda(p, p, K_F32, SIZE_MAX, 2, 3, 0, 0, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "overflows");
  CHECK_EQ_INT(k_cumsum_cuda(NULL, p, K_I32, 1, 2, 3, 0, 0, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_cumsum_cuda(NULL, NULL, K_I32, 1, 0, 3, 0, 0, NULL, &e), 0);
  CHECK_EQ_INT(k_gather_elements_cuda(p, p, 3, 2, d2, 0, p, 0, d2, NULL, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "element size");
  CHECK_EQ_INT(k_gather_elements_cuda(p, p, 4, 2, d2, 2, p, 0, d2, NULL, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "axis");
  CHECK_EQ_INT(k_gather_elements_cuda(p, p, 4, 2, d2, 0, p, 0, big, NULL, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "exceeds");
  CHECK_EQ_INT(k_gather_elements_cuda(p, p, 4, 0, d2, 0, p, 0, d2, NULL, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_gather_elements_cuda(p, p, 4, 2, d2, 0, NULL, 0, d2, NULL, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "NULL");
  CHECK_EQ_INT(k_gather_nd_cuda(p, p, 4, 1, 0, d2, 1, p, 0, 1, NULL, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "tuple length");
  CHECK_EQ_INT(k_gather_nd_cuda(p, p, 4, 1, 2, NULL, 1, p, 0, 1, NULL, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_gather_nd_cuda(p, p, 4, SIZE_MAX, 2, d2, 2, p, 0, 2, NULL, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_gather_nd_cuda(NULL, NULL, 4, 1, 2, d2, 1, NULL, 0, 0, NULL, NULL, &e), 0);
  CHECK_EQ_INT(k_gather_cuda(p, p, 6, 1, 2, 3, p, 0, 1, NULL, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_gather_cuda");
  CHECK_EQ_INT(k_gather_cuda(p, p, 4, 1, -2, 3, p, 0, 1, NULL, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_gather_cuda(p, p, 4, 1, 2, 3, NULL, 0, 1, NULL, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "NULL");
  CHECK_EQ_INT(k_gather_cuda(NULL, NULL, 4, 1, 2, 3, NULL, 0, 0, NULL, NULL, &e), 0);
  CHECK_EQ_INT(k_expand_cuda(p, p, 4, 2, d2, bad2, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "broadcast");
  CHECK_EQ_INT(k_expand_cuda(p, p, 4, 9, d2, d2, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_expand_cuda(NULL, p, 4, 2, d2, d2, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_expand_cuda(NULL, NULL, 4, 2, z, z, NULL, &e), 0);
  CHECK_EQ_INT(k_trilu_cuda(p, p, 5, 1, 2, 2, 0, 1, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_trilu_cuda");
  CHECK_EQ_INT(k_trilu_cuda(p, p, 4, 1, -2, 2, 0, 1, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "negative");
  CHECK_EQ_INT(k_trilu_cuda(NULL, p, 4, 1, 2, 2, 0, 1, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_trilu_cuda(NULL, NULL, 4, 0, 2, 2, 0, 1, NULL, &e), 0);
  int64_t st0[2] = {0, 0}, st1[2] = {1, 0}, sp1[2] = {1, 1}, spn[2] = {-1, 1}, y2[2] = {2, 3};
  CHECK_EQ_INT(k_slice_cuda(p, p, 3, 2, d2, st0, sp1, y2, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_slice_cuda");
  CHECK_EQ_INT(k_slice_cuda(p, p, 4, 2, d2, st1, sp1, y2, NULL, &e), ERR_INVALID_ARGUMENT);  // rows 1..2 of 2
  CHECK_CONTAINS(e.msg, "leave [0, 2)");
  CHECK_EQ_INT(k_slice_cuda(p, p, 4, 2, d2, st0, spn, y2, NULL, &e), ERR_INVALID_ARGUMENT);  // rows 0, -1
  CHECK_EQ_INT(k_slice_cuda(p, p, 4, 9, d2, st0, sp1, y2, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_slice_cuda(NULL, p, 4, 2, d2, st0, sp1, y2, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "NULL");
  CHECK_EQ_INT(k_slice_cuda(NULL, NULL, 4, 2, d2, st0, sp1, z, NULL, &e), 0);  // empty
}

int main(void) {
  test_errors();
  tk_require_device();
  test_compare_logic();
  test_boolop();
  test_cumsum();
  test_gather();
  test_trilu();
  test_slice();
  CHECK_DONE();
}
