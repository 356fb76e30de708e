// Tests kernels/norm/k_softmax.cu against k_softmax / k_log_softmax over
// [outer, axis_len, inner]: the row path (inner == 1) and the column path
// (inner > 1), axis_len 1, odd lengths, a ~1M-element row, ~1M elements of
// short rows and of columns, rows of large values (max subtraction), in
// place, and argument errors.
// Tolerances. softmax: rtol 1e-5, atol 1e-30. Both sides sum in double, so
// the difference is expf's (CUDA 2 ulp vs glibc's <1 ulp) plus the rounding
// of 1/sum: a few ulp (~5e-7) relative; inputs span at most 40 so no
// probability falls near the subnormal range and atol only covers exact 0.
// log_softmax: y = x - shift with shift = max + log(sum) rounded to float;
// an ulp of the sums' difference can move shift by one float ulp, i.e. by
// eps*|shift| in absolute terms, so atol per row = 4 * FLT_EPSILON * |shift|
// (plus rtol 1e-5).
#include <float.h>

#include "test_k_cuda_util.h"

// Reference shift of each (outer, inner) column: max + log(sum exp).
static double col_shift(const float *x, size_t len, size_t inner, size_t o, size_t j) {
  const float *xc = x + o * len * inner + j;
  float mx = xc[0];
  for (size_t r = 1; r < len; r++)
    if (xc[r * inner] > mx) mx = xc[r * inner];
  double s = 0.0;
  for (size_t r = 0; r < len; r++) s += exp((double)xc[r * inner] - mx);
  return mx + log(s);
}

static void run_case(tk_rng *r, size_t outer, size_t len, size_t inner, float lo, float hi,
                     int log_form, int in_place) {
  size_t n = outer * len * inner;
  float *x = tk_xmalloc(n * 4), *want = tk_xmalloc(n * 4), *got = tk_xmalloc(n * 4);
  tk_fill(r, x, n, lo, hi);
  if (log_form)
    k_log_softmax(want, x, outer, len, inner);
  else
    k_softmax(want, x, outer, len, inner);
  float *dx = tk_to_dev(x, n * 4), *dy = in_place ? dx : tk_dev_alloc(n * 4);
  err e = {0};
  int rc = log_form ? k_log_softmax_cuda(dy, dx, outer, len, inner, NULL, &e)
                    : k_softmax_cuda(dy, dx, outer, len, inner, NULL, &e);
  CHECK_EQ_INT(rc, 0);
  if (rc) fprintf(stderr, "  %s\n", e.msg);
  tk_from_dev(got, dy, n * 4);
  char what[128];
  snprintf(what, sizeof what, "%s [%zu,%zu,%zu] in [%g,%g)%s", log_form ? "log_softmax" : "softmax",
           outer, len, inner, (double)lo, (double)hi, in_place ? " in place" : "");
  if (!log_form) {
    tk_compare(what, got, want, n, 1e-5, 1e-30);
    // Each column sums to 1 (a property, independent of the reference).
    double worst = 0.0;
    for (size_t o = 0; o < outer; o++)
      for (size_t j = 0; j < inner; j++) {
        double s = 0.0;
        for (size_t k = 0; k < len; k++) s += got[(o * len + k) * inner + j];
        if (fabs(s - 1.0) > worst) worst = fabs(s - 1.0);
      }
    CHECK(worst < 1e-5);
  } else {
    // atol per column from the magnitude of its shift.
    double *atol = tk_xmalloc(n * sizeof *atol);
    for (size_t o = 0; o < outer; o++)
      for (size_t j = 0; j < inner; j++) {
        double t = 4.0 * FLT_EPSILON * fabs(col_shift(x, len, inner, o, j));
        for (size_t k = 0; k < len; k++) atol[(o * len + k) * inner + j] = t;
      }
    tk_compare_ex(what, got, want, n, 1e-5, 0.0, atol);
    free(atol);
  }
  if (!in_place) TK_CUDA(cudaFree(dy));
  TK_CUDA(cudaFree(dx));
  free(x);
  free(want);
  free(got);
}

static void test_shapes(void) {
  static const size_t shapes[][3] = {
      {1, 1, 1},       {7, 1, 1},      {1, 2, 1},    {3, 17, 1},      {5, 31, 1}, {2, 33, 1},
      {128, 1000, 1},  {64, 4096, 1},  {3, 4097, 1}, {1, 1048579, 1},  // one ~1M row
      {1024, 1024, 1}, {262147, 4, 1},                                 // many short rows
      {1, 3, 2},       {2, 5, 3},      {4, 33, 7},   {8, 3, 257},     {1, 1, 9},  {3, 1000, 2},
      {1, 1000, 1000}, {1000, 2, 500},  // ~1M over columns
  };
  tk_rng r = {2024};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int lf = 0; lf < 2; lf++)
      run_case(&r, shapes[s][0], shapes[s][1], shapes[s][2], -10.0f, 10.0f, lf, 0);
  // Large values: without the max subtracted, exp overflows.
  for (int lf = 0; lf < 2; lf++) {
    run_case(&r, 16, 300, 1, 990.0f, 1010.0f, lf, 0);
    run_case(&r, 4, 300, 5, -1010.0f, -990.0f, lf, 0);
  }
  // In place, both paths.
  for (int lf = 0; lf < 2; lf++) {
    run_case(&r, 33, 129, 1, -5.0f, 5.0f, lf, 1);
    run_case(&r, 3, 129, 11, -5.0f, 5.0f, lf, 1);
  }
}

// axis_len 1: softmax is exactly 1, log_softmax exactly 0.
static void test_axis_one(void) {
  float x[6] = {-3, 0, 2.5f, 1e30f, -1e30f, 7}, y[6];
  float *dx = tk_to_dev(x, sizeof x), *dy = tk_dev_alloc(sizeof y);
  TK_OK(k_softmax_cuda(dy, dx, 2, 1, 3, NULL, TK_E));
  tk_from_dev(y, dy, sizeof y);
  for (int i = 0; i < 6; i++) CHECK(y[i] == 1.0f);
  TK_OK(k_log_softmax_cuda(dy, dx, 6, 1, 1, NULL, TK_E));
  tk_from_dev(y, dy, sizeof y);
  for (int i = 0; i < 6; i++) CHECK(y[i] == 0.0f);
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(dy));
}

static void test_errors(void) {
  err e = {0};
  CHECK_EQ_INT(k_softmax_cuda(NULL, NULL, 0, 5, 1, NULL, &e), 0);
  CHECK_EQ_INT(k_softmax_cuda(NULL, NULL, 3, 5, 1, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_softmax_cuda");
  CHECK_EQ_INT(k_log_softmax_cuda((float *)16, (float *)16, SIZE_MAX / 2, 3, 1, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_log_softmax_cuda");
  CHECK_CONTAINS(e.msg, "overflow");
}

int main(void) {
  test_errors();
  tk_require_device();
  test_axis_one();
  test_shapes();
  CHECK_DONE();
}
