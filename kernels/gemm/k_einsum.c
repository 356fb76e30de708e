// kernels/gemm/k_einsum.c: the C reference of Einsum: every combination of the
// labels' values visited once (the output's labels outermost, in the
// output's order), each output element the double sum over the contracted
// labels of the product of the operands' elements. A plain loop nest for
// any equation: repeated labels (diagonals), broadcast ellipsis dims and
// reductions come from the strides alone (0 where an operand lacks a label
// or broadcasts it).
#include "kernels/k_ref.h"

void k_einsum(float *y, const float *const *x, const k_einsum_plan *p) {
  int64_t idx[K_EINSUM_MAX_LABELS] = {0}, n_out = 1, n_red = 1;
  for (int l = 0; l < p->n_out; l++) n_out *= p->size[l];
  for (int l = p->n_out; l < p->n_labels; l++) n_red *= p->size[l];
  for (int64_t o = 0; o < n_out; o++) {
    // the output labels' values from o (row-major over the output's labels)
    for (int l = 0; l < p->n_out; l++) idx[l] = (o / p->out_div[l]) % p->size[l];
    double acc = 0.0;
    for (int64_t c = 0; c < n_red; c++) {
      int64_t rem = c;
      for (int l = p->n_labels - 1; l >= p->n_out; l--) {
        idx[l] = rem % p->size[l];
        rem /= p->size[l];
      }
      double prod = 1.0;
      for (int k = 0; k < p->n_in; k++) {
        int64_t off = 0;
        for (int l = 0; l < p->n_labels; l++) off += idx[l] * p->stride[k][l];
        prod *= x[k][off];
      }
      acc += prod;
    }
    y[o] = (float)acc;
  }
}
