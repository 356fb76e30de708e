// Tests kernels/index/k_scatter.cu against k_scatter_elements and k_scatter_nd
// (kernels/index/k_index.c), exactly: every reduction (none, add, mul, max, min) on FP32, FP16,
// BF16, FP64, INT32 and INT64 data (FP16 and BF16 against the reference on the widened values,
// with values whose sums and products stay exact in them), int64 and int32 indices with
// negative ones, and indices drawn from a short axis so duplicates are everywhere: the
// order-dependent cases (none's last write, float add and mul) must come out as the
// reference's sequential order gives them. FP32 add and mul use random values, so a wrong
// order shows in the rounding. ScatterElements on every axis of ranks 1..3 (the indices
// narrower than the data on the other axes), ScatterND with tuples of 1..rank indices. An
// index out of range raises the flag and leaves the other updates applied; in-range runs
// leave it 0. The host-side checks run without a device.
#include "test_k_cuda_typed.h"

static const char *const red_name[] = {"none", "add", "mul", "max", "min"};

static void host_checks(void) {
  err e = {0};
  int64_t d[2] = {2, 3}, id[2] = {2, 3};
  float y[6] = {0};
  CHECK(k_scatter_elements_cuda(y, y, DT_INT8, 1, 2, d, 0, y, 0, id, K_SCATTER_ADD, NULL, NULL, &e) != 0);
  CHECK_CONTAINS(e.msg, "reduction on INT8");
  e = (err){0};
  CHECK(k_scatter_elements_cuda(y, y, DT_FP32, 4, 2, d, 2, y, 0, id, K_SCATTER_NONE, NULL, NULL, &e) != 0);
  CHECK_CONTAINS(e.msg, "axis 2");
  e = (err){0};
  CHECK(k_scatter_elements_cuda(y, y, DT_FP32, 4, 2, d, 0, y, 0, id, 7, NULL, NULL, &e) != 0);
  e = (err){0};
  int64_t wide[2] = {2, 4};
  CHECK(k_scatter_elements_cuda(y, y, DT_FP32, 4, 2, d, 0, y, 0, wide, K_SCATTER_NONE, NULL, NULL, &e) != 0);
  CHECK_CONTAINS(e.msg, "exceeds");
  e = (err){0};
  CHECK(k_scatter_nd_cuda(y, y, DT_FP32, 4, 2, d, y, 0, 1, 3, K_SCATTER_NONE, NULL, NULL, &e) != 0);
  CHECK_CONTAINS(e.msg, "tuples of 3");
  e = (err){0};
  CHECK(k_scatter_nd_cuda(NULL, y, DT_FP32, 4, 2, d, y, 0, 1, 1, K_SCATTER_NONE, NULL, NULL, &e) != 0);
  CHECK_CONTAINS(e.msg, "NULL");
  e = (err){0};
  CHECK_EQ_INT(k_scatter_nd_cuda(NULL, NULL, DT_FP32, 4, 2, d, NULL, 0, 0, 1, K_SCATTER_ADD, NULL, NULL, &e), 0);
}

// Data and updates for dt and red: exact small values, or random FP32/FP64 for add and mul.
static void draw(tk_rng *r, dtype dt, int red, double *v, size_t n) {
  if ((dt == DT_FP32 || dt == DT_FP64) && (red == K_SCATTER_ADD || red == K_SCATTER_MUL)) {
    for (size_t i = 0; i < n; i++) v[i] = tk_uniform(r, 0.5f, 1.5f) * (tk_next(r) & 1 ? 1 : -1);
    return;
  }
  if (red == K_SCATTER_MUL) {  // products of a few of {-2, -1, 1, 2} stay exact in BF16
    for (size_t i = 0; i < n; i++) v[i] = (double)((int)(tk_next(r) % 4) - 2 >= 0 ? (int)(tk_next(r) % 2) + 1 : -1);
    return;
  }
  tt_draw(r, v, n, 6, !tt_is_int(dt));
}

// Indices into an axis of len: mostly in [-len, len), one out of range when oob.
static void draw_idx(tk_rng *r, void *idx, int i32, size_t n, const int64_t *lens, int m, int oob) {
  for (size_t i = 0; i < n; i++) {
    int64_t len = lens[i % (size_t)m];
    int64_t k = (int64_t)(tk_next(r) % (uint64_t)(2 * len)) - len;
    if (oob && i == n / 2) k = len;
    if (i32) ((int32_t *)idx)[i] = (int32_t)k;
    else ((int64_t *)idx)[i] = k;
  }
}

// Runs one scatter on the device and the reference, compares. nd: ScatterND (m, n_tuples), else
// ScatterElements (axis, idims). Returns 1 on a mismatch.
static int scatter_case(tk_rng *r, dtype dt, int red, int i32, int ndim, const int64_t *yd, int nd, int axis,
                        const int64_t *idims, int m, size_t n_tuples, int oob) {
  size_t ny = 1, nu, ni, esz = dtype_size(dt), rsz = tt_ref_size(dt), slice = 1;
  for (int d = 0; d < ndim; d++) ny *= (size_t)yd[d];
  if (nd) {
    for (int d = m; d < ndim; d++) slice *= (size_t)yd[d];
    nu = n_tuples * slice, ni = n_tuples * (size_t)m;
  } else {
    nu = 1;
    for (int d = 0; d < ndim; d++) nu *= (size_t)idims[d];
    ni = nu;
  }
  double *vy = tk_xmalloc(ny * sizeof *vy), *vu = tk_xmalloc(nu * sizeof *vu);
  draw(r, dt, red, vy, ny);
  draw(r, dt, red, vu, nu);
  void *y = tk_xmalloc(ny * esz), *u = tk_xmalloc(nu * esz), *idx = tk_xmalloc(ni * 8);
  void *want = tk_xmalloc(ny * rsz), *ur = tk_xmalloc(nu * rsz), *got = tk_xmalloc(ny * esz), *gotr = tk_xmalloc(ny * rsz);
  tt_store(dt, y, vy, ny);
  tt_store(dt, u, vu, nu);
  int64_t lens[K_MAX_DIMS];
  if (nd) memcpy(lens, yd, sizeof lens[0] * (size_t)m);
  else lens[0] = yd[axis];
  draw_idx(r, idx, i32, ni, lens, nd ? m : 1, oob);
  // the reference: on dt's bits for none, on the widened values for a reduction
  int rc_ref;
  if (red == K_SCATTER_NONE) {
    memcpy(want, y, ny * esz);
    rc_ref = nd ? k_scatter_nd(want, u, esz, K_U8, ndim, yd, idx, i32, n_tuples, m, K_SCATTER_NONE)
                : k_scatter_elements(want, u, esz, K_U8, ndim, yd, axis, idx, i32, idims, K_SCATTER_NONE);
  } else {
    tt_widen(dt, want, y, ny);
    tt_widen(dt, ur, u, nu);
    rc_ref = nd ? k_scatter_nd(want, ur, rsz, tt_ref_elem(dt), ndim, yd, idx, i32, n_tuples, m, (k_scatter_red)red)
                : k_scatter_elements(want, ur, rsz, tt_ref_elem(dt), ndim, yd, axis, idx, i32, idims,
                                     (k_scatter_red)red);
  }
  CHECK_EQ_INT(rc_ref != 0, oob);
  void *dy = tk_to_dev(y, ny * esz), *du = tk_to_dev(u, nu * esz), *di = tk_to_dev(idx, ni * (i32 ? 4 : 8));
  int *dbad = tk_dev_alloc(sizeof *dbad), hbad = 0;
  TK_CUDA(cudaMemset(dbad, 0, sizeof *dbad));
  if (nd)
    TK_OK(k_scatter_nd_cuda(dy, du, dt, esz, ndim, yd, di, i32, n_tuples, m, red, dbad, NULL, TK_E));
  else
    TK_OK(k_scatter_elements_cuda(dy, du, dt, esz, ndim, yd, axis, di, i32, idims, red, dbad, NULL, TK_E));
  tk_from_dev(got, dy, ny * esz);
  tk_from_dev(&hbad, dbad, sizeof hbad);
  CHECK_EQ_INT(hbad, oob);
  int bad = 0;
  if (!oob) {  // with one out of range the reference stops there, the device skips it
    if (red == K_SCATTER_NONE) {
      bad = memcmp(got, want, ny * esz) != 0;
    } else {
      tt_widen(dt, gotr, got, ny);
      bad = memcmp(gotr, want, ny * rsz) != 0;
    }
  }
  if (bad) {
    fprintf(stderr, "  %s %s %s idx%s rank %d", nd ? "scatter_nd" : "scatter_elements", dtype_wire_name(dt),
            red_name[red], i32 ? "32" : "64", ndim);
    if (nd) fprintf(stderr, " m %d tuples %zu\n", m, n_tuples);
    else fprintf(stderr, " axis %d\n", axis);
    if (red == K_SCATTER_NONE) tk_compare_bits("scatter", got, want, ny * esz);
  }
  TK_CUDA(cudaFree(dy));
  TK_CUDA(cudaFree(du));
  TK_CUDA(cudaFree(di));
  TK_CUDA(cudaFree(dbad));
  free(vy), free(vu), free(y), free(u), free(idx), free(want), free(ur), free(got), free(gotr);
  return bad;
}

int main(void) {
  host_checks();
  tk_require_device();
  tk_rng r = {0x8f1bbcdcca62c1d6ull};
  static const int64_t shapes[3][3] = {{7, 0, 0}, {4, 5, 0}, {3, 4, 6}};
  int cases = 0, bad = 0;
  for (int t = 0; t < TT_N_TYPES; t++)
    for (int red = 0; red < 5; red++)
      for (int ndim = 1; ndim <= 3; ndim++) {
        const int64_t *yd = shapes[ndim - 1];
        for (int axis = 0; axis < ndim; axis++) {
          int64_t id[K_MAX_DIMS];
          for (int d = 0; d < ndim; d++) id[d] = d == axis ? 3 * yd[d] : yd[d] - (d % 2);  // duplicates on the axis
          bad += scatter_case(&r, tt_types[t], red, (axis + red) % 2, ndim, yd, 0, axis, id, 0, 0, 0);
          cases++;
        }
        for (int m = 1; m <= ndim; m++) {
          bad += scatter_case(&r, tt_types[t], red, (m + red) % 2, ndim, yd, 1, 0, NULL, m, 2 * (size_t)yd[0] + 3, 0);
          cases++;
        }
      }
  // a long axis: many lines, and a scatter of single elements (ScatterND, m = rank) with 5000 tuples
  static const int64_t big[2] = {300, 257};
  int64_t bid[2] = {250, 600};
  for (int red = 0; red < 5; red++) {
    bad += scatter_case(&r, DT_FP32, red, 0, 2, big, 0, 1, bid, 0, 0, 0);
    bad += scatter_case(&r, DT_INT64, red, 1, 2, big, 1, 0, NULL, 2, 5000, 0);
    cases += 2;
  }
  // an index out of range: the flag
  for (int red = 0; red < 5; red += 2) {
    int64_t id[2] = {8, 5};
    bad += scatter_case(&r, DT_FP32, red, 0, 2, shapes[1], 0, 0, id, 0, 0, 1);
    bad += scatter_case(&r, DT_FP16, red, 1, 2, shapes[1], 1, 0, NULL, 1, 6, 1);
    cases += 2;
  }
  printf("scatter: %d cases, %d mismatched\n", cases, bad);
  CHECK_EQ_INT(bad, 0);
  CHECK_DONE();
}
