// engine/ops/select/select.c: the ops whose outputs' shapes are their
// inputs' values: NonZero, Compress, Unique and NonMaxSuppression. The
// planner fixes every shape before a run, so the inputs that decide those
// shapes are read while planning (host_in): constants, values folded from
// them, or graph inputs of a model served with max_batch_size 0 (read at
// every run; plan_values.c). An input computed at run time from other data
// fails the load saying so. The math is in kernels/select/k_select.c.
#include <stdlib.h>
#include <string.h>

#include "engine/ops/ops_common.h"
#include "kernels/select/k_select.h"

static int64_t count_true(const eng_tensor *t, size_t n) {
  size_t esz = dtype_size(t->dt);
  const unsigned char *b = t->data;
  int64_t c = 0;
  for (size_t i = 0; i < n; i++) {
    int nz = 0;
    for (size_t k = 0; k < esz && !nz; k++) nz = b[i * esz + k] != 0;
    if (t->dt == DT_FP32 && nz) nz = ((const float *)t->data)[i] != 0.0f;  // -0.0 is zero
    c += nz;
  }
  return c;
}

static int nonzero_at(const eng_tensor *t, size_t i) {
  if (t->dt == DT_FP32) return ((const float *)t->data)[i] != 0.0f;
  size_t esz = dtype_size(t->dt);
  const unsigned char *b = (const unsigned char *)t->data + i * esz;
  for (size_t k = 0; k < esz; k++)
    if (b[k]) return 1;
  return 0;
}

// --- NonZero: [rank, count] INT64 indices of the nonzero elements, row-major

static int infer_nonzero(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                         err *e) {
  (void)p, (void)n_in, (void)n_out;
  if (dtype_size(in[0].dt) == 0) return err_set(e, ERR_INVALID_ARGUMENT, "unsupported element type %s", dtype_wire_name(in[0].dt));
  out[0].dt = DT_INT64;
  out[0].ndims = 2;
  out[0].dims[0] = in[0].ndims;
  out[0].dims[1] = count_true(&in[0], op_numel(&in[0]));
  return 0;
}

static int run_nonzero(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out, (void)e;
  size_t n = op_numel(&in[0]), cnt = (size_t)out[0].dims[1], at = 0;
  int64_t *o = out[0].data;
  int r = in[0].ndims;
  for (size_t i = 0; i < n && at < cnt; i++) {
    if (!nonzero_at(&in[0], i)) continue;
    size_t rest = i;
    for (int d = r - 1; d >= 0; d--) {
      o[(size_t)d * cnt + at] = (int64_t)(rest % (size_t)in[0].dims[d]);
      rest /= (size_t)in[0].dims[d];
    }
    at++;
  }
  return 0;
}

// --- Compress: the slices along axis (or the flattened elements) whose condition is true

static int parse_axis_opt(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset, (void)e;
  const eng_attr *a = eng_node_attr(n, "axis");
  p->has_end = a != NULL;  // whether an axis is given
  p->axis = a ? a->i : 0;
  p->upper = (int)op_attr_int(n, "sorted", 1);  // Unique
  return 0;
}

static int norm_axis(int64_t a, int rank, int64_t *out, err *e) {
  if (a < -rank || a >= rank)
    return err_set(e, ERR_INVALID_ARGUMENT, "axis %lld out of range for rank %d", (long long)a, rank);
  *out = a < 0 ? a + rank : a;
  return 0;
}

static int infer_compress(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                          err *e) {
  (void)n_in, (void)n_out;
  const eng_tensor *c = &in[1];
  if (c->ndims != 1) return err_set(e, ERR_INVALID_ARGUMENT, "condition must be 1-D, got rank %d", c->ndims);
  size_t len = (size_t)op_numel(&in[0]);
  int64_t ax = 0;
  if (p->has_end) {
    TRY(norm_axis(p->axis, in[0].ndims, &ax, e));
    len = (size_t)in[0].dims[ax];
  }
  if ((size_t)c->dims[0] > len)
    return err_set(e, ERR_INVALID_ARGUMENT, "condition has %lld entries, the %s has %zu", (long long)c->dims[0],
                   p->has_end ? "axis" : "input", len);
  int64_t k = count_true(c, (size_t)c->dims[0]);
  out[0] = in[0];
  out[0].data = NULL;
  if (p->has_end) {
    out[0].dims[ax] = k;
  } else {
    out[0].ndims = 1;
    out[0].dims[0] = k;
  }
  return 0;
}

static int run_compress(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out, (void)e;
  size_t esz = dtype_size(in[0].dt), outer = 1, len = op_numel(&in[0]), inner = esz;
  if (p->has_end) {
    int64_t ax = p->axis < 0 ? p->axis + in[0].ndims : p->axis;
    outer = (size_t)op_prod(in[0].dims, 0, (int)ax);
    len = (size_t)in[0].dims[ax];
    inner = (size_t)op_prod(in[0].dims, (int)ax + 1, in[0].ndims) * esz;
  }
  size_t nc = (size_t)in[1].dims[0], k = (size_t)(p->has_end ? out[0].dims[p->axis < 0 ? p->axis + in[0].ndims : p->axis]
                                                              : out[0].dims[0]);
  const unsigned char *x = in[0].data;
  unsigned char *y = out[0].data;
  for (size_t o = 0; o < outer; o++) {
    size_t at = 0;
    for (size_t j = 0; j < nc && j < len; j++)
      if (nonzero_at(&in[1], j)) memcpy(y + (o * k + at++) * inner, x + (o * len + j) * inner, inner);
  }
  return 0;
}

// --- Unique: Y, indices, inverse_indices, counts

typedef struct uniq {
  int64_t n;
  int64_t *first, *inverse, *counts;
  size_t outer, len, inner;
  int64_t ax;
} uniq;

static void uniq_free(uniq *u) {
  free(u->first), free(u->inverse), free(u->counts);
}

static int uniq_run(const eng_op_params *p, const eng_tensor *x, uniq *u, err *e) {
  memset(u, 0, sizeof *u);
  k_elem t;
  if (eng_ops_elem_of(x->dt, &t) != 0 || x->dt == DT_FP16)
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported element type %s", dtype_wire_name(x->dt));
  u->outer = 1, u->len = op_numel(x), u->inner = 1;
  if (p->has_end) {
    TRY(norm_axis(p->axis, x->ndims, &u->ax, e));
    u->outer = (size_t)op_prod(x->dims, 0, (int)u->ax);
    u->len = (size_t)x->dims[u->ax];
    u->inner = (size_t)op_prod(x->dims, (int)u->ax + 1, x->ndims);
  }
  size_t n = u->len ? u->len : 1;
  u->first = malloc(n * sizeof(int64_t));
  u->inverse = malloc(n * sizeof(int64_t));
  u->counts = malloc(n * sizeof(int64_t));
  if (!u->first || !u->inverse || !u->counts ||
      (u->n = k_unique(x->data, t, u->outer, u->len, u->inner, p->upper, u->first, u->inverse, u->counts)) < 0) {
    uniq_free(u);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  return 0;
}

static int infer_unique(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_in;
  uniq u;
  TRY(uniq_run(p, &in[0], &u, e));
  out[0] = in[0];
  out[0].data = NULL;
  if (p->has_end) out[0].dims[u.ax] = u.n;
  else {
    out[0].ndims = 1;
    out[0].dims[0] = u.n;
  }
  for (int k = 1; k < n_out; k++) {
    memset(&out[k], 0, sizeof out[k]);
    out[k].dt = DT_INT64;
    out[k].ndims = 1;
    out[k].dims[0] = k == 2 ? (int64_t)u.len : u.n;
  }
  uniq_free(&u);
  return 0;
}

static int run_unique(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_in;
  uniq u;
  TRY(uniq_run(p, &in[0], &u, e));
  size_t esz = dtype_size(in[0].dt), row = u.inner * esz;
  const unsigned char *x = in[0].data;
  unsigned char *y = out[0].data;
  for (size_t o = 0; o < u.outer; o++)
    for (int64_t k = 0; k < u.n; k++)
      memcpy(y + (o * (size_t)u.n + (size_t)k) * row, x + (o * u.len + (size_t)u.first[k]) * row, row);
  if (n_out > 1 && out[1].dt != DT_INVALID) memcpy(out[1].data, u.first, (size_t)u.n * sizeof(int64_t));
  if (n_out > 2 && out[2].dt != DT_INVALID) memcpy(out[2].data, u.inverse, u.len * sizeof(int64_t));
  if (n_out > 3 && out[3].dt != DT_INVALID) memcpy(out[3].data, u.counts, (size_t)u.n * sizeof(int64_t));
  uniq_free(&u);
  return 0;
}

// --- NonMaxSuppression: [selected, 3] INT64 (batch, class, box)

static int parse_nms(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  int64_t c = op_attr_int(n, "center_point_box", 0);
  if (c != 0 && c != 1) return err_set(e, ERR_INVALID_ARGUMENT, "center_point_box %lld, expected 0 or 1", (long long)c);
  p->mode = (int)c;
  return 0;
}

static int nms(const eng_op_params *p, const eng_tensor *in, int n_in, int64_t *sel, int64_t *count, err *e) {
  const eng_tensor *b = &in[0], *s = &in[1];
  if (b->dt != DT_FP32 || s->dt != DT_FP32)
    return err_set(e, ERR_INVALID_ARGUMENT, "boxes and scores must be float tensors");
  if (b->ndims != 3 || b->dims[2] != 4 || s->ndims != 3 || s->dims[0] != b->dims[0] || s->dims[2] != b->dims[1])
    return err_set(e, ERR_INVALID_ARGUMENT, "boxes must be [B, N, 4] and scores [B, C, N]");
  int64_t max_out = 0;
  float iou = 0, sth = 0;
  int has_sth = 0;
  if (n_in > 2 && in[2].dt != DT_INVALID && op_numel(&in[2])) max_out = ((const int64_t *)in[2].data)[0];
  if (n_in > 3 && in[3].dt != DT_INVALID && op_numel(&in[3])) iou = ((const float *)in[3].data)[0];
  if (n_in > 4 && in[4].dt != DT_INVALID && op_numel(&in[4])) {
    has_sth = 1;
    sth = ((const float *)in[4].data)[0];
  }
  if (n_in > 2 && in[2].dt != DT_INVALID && in[2].dt != DT_INT64)
    return err_set(e, ERR_INVALID_ARGUMENT, "max_output_boxes_per_class must be INT64");
  *count = k_nms(sel, b->data, s->data, b->dims[0], s->dims[1], b->dims[1], max_out, iou, has_sth, sth, p->mode);
  if (*count < 0) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  return 0;
}

static int infer_nms(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_out;
  int64_t n = 0;
  TRY(nms(p, in, n_in, NULL, &n, e));
  out[0].dt = DT_INT64;
  out[0].ndims = 2;
  out[0].dims[0] = n;
  out[0].dims[1] = 3;
  return 0;
}

static int run_nms(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_out;
  int64_t n = 0;
  TRY(nms(p, in, n_in, out[0].data, &n, e));
  if (n != out[0].dims[0])
    return err_set(e, ERR_INTERNAL, "selected %lld boxes, planned %lld", (long long)n, (long long)out[0].dims[0]);
  return 0;
}

// --- table

const eng_op_def eng_ops__select[] = {
    {"NonZero", 1, 1, 1, 1, 0, op_parse_none, infer_nonzero, run_nonzero, ENG_IN(0), NULL, NULL},
    {"Compress", 2, 2, 1, 1, 0, parse_axis_opt, infer_compress, run_compress, ENG_IN(1), NULL, NULL},
    {"Unique", 1, 1, 1, 4, 0, parse_axis_opt, infer_unique, run_unique, ENG_IN(0), NULL, NULL},
    {"NonMaxSuppression", 2, 5, 1, 1, 0, parse_nms, infer_nms, run_nms,
     ENG_IN(0) | ENG_IN(1) | ENG_IN(2) | ENG_IN(3) | ENG_IN(4), NULL, NULL},
};
const size_t eng_ops__n_select = sizeof eng_ops__select / sizeof eng_ops__select[0];
