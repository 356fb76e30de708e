// engine/ops/gemm/det.c: Det, the determinant of each [M, M] matrix of a
// [..., M, M] float tensor, by LU decomposition with partial pivoting in
// double. Listed in gemm.c's table (linear algebra).
#include <math.h>
#include <stdlib.h>

#include "engine/ops/gemm/gemm.h"
#include "engine/ops/ops_common.h"

int eng_ops__infer_det(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                       err *e) {
  (void)p, (void)n_in, (void)n_out;
  const eng_tensor *x = &in[0];
  if (x->dt != DT_FP32) return err_set(e, ERR_INVALID_ARGUMENT, "input must be a float tensor, got %s", dtype_wire_name(x->dt));
  if (x->ndims < 2 || x->dims[x->ndims - 1] != x->dims[x->ndims - 2])
    return err_set(e, ERR_INVALID_ARGUMENT, "input must be [..., M, M]");
  out[0] = *x;
  out[0].ndims = x->ndims - 2;
  out[0].data = NULL;
  return 0;
}

int eng_ops__run_det(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out;
  const eng_tensor *x = &in[0];
  size_t m = (size_t)x->dims[x->ndims - 1], batch = (size_t)op_prod(x->dims, 0, x->ndims - 2);
  double *a = malloc((m > 0 ? m * m : 1) * sizeof *a);
  if (!a) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  const float *src = x->data;
  float *y = out[0].data;
  for (size_t b = 0; b < batch; b++) {
    for (size_t i = 0; i < m * m; i++) a[i] = src[b * m * m + i];
    double det = 1;
    for (size_t c = 0; c < m && det != 0; c++) {
      size_t piv = c;
      for (size_t r = c + 1; r < m; r++)
        if (fabs(a[r * m + c]) > fabs(a[piv * m + c])) piv = r;
      if (a[piv * m + c] == 0) {
        det = 0;
        break;
      }
      if (piv != c) {
        for (size_t k = 0; k < m; k++) {
          double t = a[c * m + k];
          a[c * m + k] = a[piv * m + k];
          a[piv * m + k] = t;
        }
        det = -det;
      }
      det *= a[c * m + c];
      for (size_t r = c + 1; r < m; r++) {
        double f = a[r * m + c] / a[c * m + c];
        for (size_t k = c; k < m; k++) a[r * m + k] -= f * a[c * m + k];
      }
    }
    y[b] = (float)det;
  }
  free(a);
  return 0;
}
