// engine/ops/norm/norm.c: the normalisations on the CPU: Softmax and
// LogSoftmax (before opset 13 the input is coerced to 2-D),
// LayerNormalization (with its optional Mean and InvStdDev outputs),
// RMSNormalization, InstanceNormalization, GroupNormalization, Hardmax,
// LpNormalization, LRN, NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss
// (CPU only) and
// BatchNormalization (inference only; a BatchNormalization after a Conv is
// folded into it at load), through the reference kernels. Their CUDA path is
// norm_cuda.c.
#include "engine/ops/norm/norm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ops/ops_common.h"
#include "kernels/k_ref.h"

// --- Softmax / LogSoftmax

static int parse_softmax(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p,
                         err *e) {
  (void)g, (void)e;
  p->legacy = opset < 13;
  p->axis = op_attr_int(n, "axis", p->legacy ? 1 : -1);
  return 0;
}

static int infer_softmax(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                         int n_out, err *e) {
  int64_t ax = 0;
  TRY(eng_ops__need_f32(&in[0], "input", e));
  if (in[0].ndims == 0) return err_set(e, ERR_INVALID_ARGUMENT, "input must have rank >= 1");
  TRY(eng_ops__norm_axis(p->axis, in[0].ndims, &ax, e));
  return eng_ops__infer_same_f32(p, in, n_in, out, n_out, e);
}

void eng_ops__softmax_dims(const eng_op_params *p, const eng_tensor *x, size_t *outer, size_t *len,
                         size_t *inner) {
  int r = x->ndims;
  int ax = (int)(p->axis < 0 ? p->axis + r : p->axis);
  *outer = (size_t)op_prod(x->dims, 0, ax);
  if (p->legacy) {  // opset < 13: the input is coerced to 2-D [outer, rest]
    *len = (size_t)op_prod(x->dims, ax, r);
    *inner = 1;
  } else {
    *len = (size_t)x->dims[ax];
    *inner = (size_t)op_prod(x->dims, ax + 1, r);
  }
}

static int run_softmax(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                       int n_out, err *e) {
  (void)n_in, (void)n_out, (void)e;
  size_t o, l, i;
  eng_ops__softmax_dims(p, &in[0], &o, &l, &i);
  if (o && l && i) k_softmax(out[0].data, in[0].data, o, l, i);
  return 0;
}

static int run_log_softmax(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                           int n_out, err *e) {
  (void)n_in, (void)n_out, (void)e;
  size_t o, l, i;
  eng_ops__softmax_dims(p, &in[0], &o, &l, &i);
  if (o && l && i) k_log_softmax(out[0].data, in[0].data, o, l, i);
  return 0;
}

// Hardmax (Softmax's axis rules, the 2-D coercion before opset 13 included)
static int run_hardmax(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                       err *e) {
  (void)n_in, (void)n_out, (void)e;
  size_t o, l, i;
  eng_ops__softmax_dims(p, &in[0], &o, &l, &i);
  if (o && l && i) k_hardmax(out[0].data, in[0].data, o, l, i);
  return 0;
}

// --- LpNormalization (axis, p: 1 or 2), p->mode holds p

static int parse_lpnorm(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  p->axis = op_attr_int(n, "axis", -1);
  p->legacy = 0;
  int64_t pp = op_attr_int(n, "p", 2);
  if (pp != 1 && pp != 2) return err_set(e, ERR_INVALID_ARGUMENT, "p must be 1 or 2, got %lld", (long long)pp);
  p->mode = (int)pp;
  return 0;
}

static int run_lpnorm(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                      err *e) {
  (void)n_in, (void)n_out, (void)e;
  size_t o, l, i;
  eng_ops__softmax_dims(p, &in[0], &o, &l, &i);
  if (o && l && i) k_lp_norm(out[0].data, in[0].data, o, l, i, p->mode);
  return 0;
}

// --- LRN (size, alpha, beta, bias) across the channels of [N, C, ...]

static int parse_lrn(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  p->start = op_attr_int(n, "size", 0);
  p->alpha = op_attr_float(n, "alpha", 1e-4f);
  p->beta = op_attr_float(n, "beta", 0.75f);
  p->eps = op_attr_float(n, "bias", 1.0f);
  if (p->start < 1) return err_set(e, ERR_INVALID_ARGUMENT, "size must be positive");
  return 0;
}

static int infer_lrn(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  if (in[0].ndims < 2) return err_set(e, ERR_INVALID_ARGUMENT, "X must have rank >= 2");
  return eng_ops__infer_same_f32(p, in, n_in, out, n_out, e);
}

static int run_lrn(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out, (void)e;
  const eng_tensor *x = &in[0];
  size_t n = (size_t)x->dims[0], c = (size_t)x->dims[1], sp = (size_t)op_prod(x->dims, 2, x->ndims);
  if (n && c && sp) k_lrn(out[0].data, x->data, n, c, sp, p->start, p->alpha, p->beta, p->eps);
  return 0;
}

// --- LayerNormalization, BatchNormalization

static int parse_layernorm(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p,
                           err *e) {
  (void)g, (void)opset, (void)e;
  p->axis = op_attr_int(n, "axis", -1);
  p->eps = op_attr_float(n, "epsilon", 1e-5f);
  return 0;
}

static int parse_batchnorm(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p,
                           err *e) {
  (void)g, (void)opset;
  p->eps = op_attr_float(n, "epsilon", 1e-5f);
  if (op_attr_int(n, "training_mode", 0) != 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: training_mode=1");
  for (int i = 1; i < n->n_out; i++)
    if (n->out[i] >= 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: training outputs (running statistics)");
  return 0;
}

static int infer_layernorm(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                           int n_out, err *e) {
  TRY(eng_ops__need_f32(&in[0], "X", e));
  int r = in[0].ndims;
  if (r == 0) return err_set(e, ERR_INVALID_ARGUMENT, "X must have rank >= 1");
  int64_t ax = 0;
  TRY(eng_ops__norm_axis(p->axis, r, &ax, e));
  int64_t cols = op_prod(in[0].dims, (int)ax, r);
  // Scale is required (only B is optional); given as "" it was a NULL the
  // kernel read, at load when folded (found by tests/fuzz/fuzz_graph)
  if (n_in < 2 || in[1].dt == DT_INVALID) return err_set(e, ERR_INVALID_ARGUMENT, "Scale is required");
  for (int i = 1; i < n_in && i < 3; i++) {
    if (in[i].dt == DT_INVALID) continue;
    TRY(eng_ops__need_f32(&in[i], i == 1 ? "Scale" : "B", e));
    if (eng_numel(in[i].ndims, in[i].dims) != cols)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "unsupported: %s must have the normalized shape (%lld elements)",
                     i == 1 ? "Scale" : "B", (long long)cols);
  }
  op_set_out(&out[0], DT_FP32, r, in[0].dims);
  int64_t st[ENG_MAX_DIMS];
  for (int i = 0; i < r; i++) st[i] = i < ax ? in[0].dims[i] : 1;
  for (int i = 1; i < n_out && i < 3; i++)
    if (out[i].dt != DT_INVALID) op_set_out(&out[i], DT_FP32, r, st);
  return 0;
}

static int run_layernorm(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                         int n_out, err *e) {
  (void)e;
  int r = in[0].ndims;
  int ax = (int)(p->axis < 0 ? p->axis + r : p->axis);
  size_t rows = (size_t)op_prod(in[0].dims, 0, ax), cols = (size_t)op_prod(in[0].dims, ax, r);
  const float *x = in[0].data;
  const float *bias = n_in > 2 && in[2].dt != DT_INVALID ? in[2].data : NULL;
  // Mean / InvStdDev are optional training outputs; computed here, not by
  // the kernel, and before it because Y may not alias X but the stats read X.
  float *mean = n_out > 1 && out[1].dt != DT_INVALID ? out[1].data : NULL;
  float *istd = n_out > 2 && out[2].dt != DT_INVALID ? out[2].data : NULL;
  if ((mean || istd) && cols) {
    for (size_t i = 0; i < rows; i++) {
      double s = 0, ss = 0;
      for (size_t j = 0; j < cols; j++) s += x[i * cols + j];
      double mu = s / (double)cols;
      for (size_t j = 0; j < cols; j++) ss += (x[i * cols + j] - mu) * (x[i * cols + j] - mu);
      if (mean) mean[i] = (float)mu;
      if (istd) istd[i] = (float)(1.0 / sqrt(ss / (double)cols + p->eps));
    }
  }
  if (rows && cols) k_layer_norm(out[0].data, x, in[1].data, bias, rows, cols, p->eps);
  return 0;
}

// RMSNormalization (opset 23): LayerNormalization's axis and epsilon, no
// centring, no bias; Scale has the normalized shape.
static int infer_rmsnorm(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                         int n_out, err *e) {
  (void)n_in, (void)n_out;
  TRY(eng_ops__need_f32(&in[0], "X", e));
  TRY(eng_ops__need_f32(&in[1], "scale", e));
  int r = in[0].ndims;
  if (r == 0) return err_set(e, ERR_INVALID_ARGUMENT, "X must have rank >= 1");
  int64_t ax = 0;
  TRY(eng_ops__norm_axis(p->axis, r, &ax, e));
  int64_t cols = op_prod(in[0].dims, (int)ax, r);
  if (eng_numel(in[1].ndims, in[1].dims) != cols)
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: scale must have the normalized shape (%lld elements)",
                   (long long)cols);
  op_set_out(&out[0], DT_FP32, r, in[0].dims);
  return 0;
}

static int run_rmsnorm(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                       int n_out, err *e) {
  (void)n_in, (void)n_out, (void)e;
  int r = in[0].ndims;
  int ax = (int)(p->axis < 0 ? p->axis + r : p->axis);
  size_t rows = (size_t)op_prod(in[0].dims, 0, ax), cols = (size_t)op_prod(in[0].dims, ax, r);
  if (rows && cols) k_rms_norm(out[0].data, in[0].data, in[1].data, rows, cols, p->eps);
  return 0;
}

// --- InstanceNormalization, GroupNormalization (scale and bias per channel,
// opset 21; per group, opset 18: k_group_norm's per_group). p->axis holds
// num_groups (0 for InstanceNormalization: one group per channel); the CUDA
// path (norm_cuda.c) reads the same parameters through eng_ops__groupnorm_dims.

static int parse_groupnorm(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  p->eps = op_attr_float(n, "epsilon", 1e-5f);
  p->axis = strcmp(n->op_type, "GroupNormalization") == 0 ? op_attr_int(n, "num_groups", 0) : 0;
  if (strcmp(n->op_type, "GroupNormalization") == 0 && p->axis <= 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "num_groups must be positive");
  return 0;
}

void eng_ops__groupnorm_dims(const eng_op_params *p, const eng_tensor *in, size_t *n, size_t *c, size_t *groups,
                             size_t *spatial, int *per_group) {
  const eng_tensor *x = &in[0];
  *n = (size_t)x->dims[0], *c = (size_t)x->dims[1], *spatial = (size_t)op_prod(x->dims, 2, x->ndims);
  *groups = p->axis ? (size_t)p->axis : *c;
  // scale and bias hold one value per group where that differs from one per channel (infer_groupnorm
  // made both the same length)
  *per_group = *groups != *c && (size_t)eng_numel(in[1].ndims, in[1].dims) == *groups;
}

static int infer_groupnorm(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                           int n_out, err *e) {
  (void)n_in, (void)n_out;
  TRY(eng_ops__need_f32(&in[0], "X", e));
  if (in[0].ndims < 2) return err_set(e, ERR_INVALID_ARGUMENT, "X must have rank >= 2");
  int64_t c = in[0].dims[1], groups = p->axis ? p->axis : c;
  if (groups > 0 && c % groups != 0)  // groups is 0 only for an InstanceNormalization of 0 channels
    return err_set(e, ERR_INVALID_ARGUMENT, "%lld channels do not split into %lld groups", (long long)c,
                   (long long)groups);
  int64_t k[2];
  for (int i = 1; i < 3; i++) {
    TRY(eng_ops__need_f32(&in[i], i == 1 ? "scale" : "B", e));
    k[i - 1] = eng_numel(in[i].ndims, in[i].dims);
    if (k[i - 1] != c && k[i - 1] != groups)
      return err_set(e, ERR_INVALID_ARGUMENT, "%s must have %lld (channels) elements", i == 1 ? "scale" : "B",
                     (long long)c);
  }
  if (k[0] != k[1])
    return err_set(e, ERR_INVALID_ARGUMENT, "scale (%lld elements) and B (%lld) must both be per channel or "
                   "both per group", (long long)k[0], (long long)k[1]);
  op_set_out(&out[0], DT_FP32, in[0].ndims, in[0].dims);
  return 0;
}

static int run_groupnorm(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                         int n_out, err *e) {
  (void)n_in, (void)n_out, (void)e;
  size_t n, c, groups, sp;
  int per_group;
  eng_ops__groupnorm_dims(p, in, &n, &c, &groups, &sp, &per_group);
  if (n && c && sp) k_group_norm(out[0].data, in[0].data, in[1].data, in[2].data, n, c, groups, sp, per_group, p->eps);
  return 0;
}

// --- NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss (inference: the loss
// value, and SoftmaxCrossEntropyLoss's optional log_prob output)

// p->mode: reduction (0 none, 1 sum, 2 mean); p->has_ints / p->start: ignore_index given / its value.
static int parse_loss(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  static const char *const names[] = {"none", "sum", "mean", NULL};
  TRY(eng_ops__enum(op_attr_str(n, "reduction", "mean"), names, "reduction", &p->mode, e));
  p->has_ints = eng_node_attr(n, "ignore_index") != NULL;
  p->start = op_attr_int(n, "ignore_index", 0);
  return 0;
}

static int infer_loss(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                      err *e) {
  TRY(eng_ops__need_f32(&in[0], "input", e));
  const eng_tensor *x = &in[0], *t = &in[1];
  if (x->ndims < 2) return err_set(e, ERR_INVALID_ARGUMENT, "input must have rank >= 2");
  if (t->dt != DT_INT64 && t->dt != DT_INT32)
    return err_set(e, ERR_INVALID_ARGUMENT, "target must be INT32 or INT64, got %s", dtype_wire_name(t->dt));
  int ok = t->ndims == x->ndims - 1 && t->dims[0] == x->dims[0];
  for (int i = 1; ok && i < t->ndims; i++) ok = t->dims[i] == x->dims[i + 1];
  if (!ok) return err_set(e, ERR_INVALID_ARGUMENT, "target must have input's shape without dim 1");
  if (op_given(in, n_in, 2)) {
    TRY(eng_ops__need_f32(&in[2], "weight", e));
    if (in[2].ndims != 1 || in[2].dims[0] != x->dims[1])
      return err_set(e, ERR_INVALID_ARGUMENT, "weight must be [C]");
  }
  if (p->mode == 0) op_set_out(&out[0], DT_FP32, t->ndims, t->dims);
  else op_set_out(&out[0], DT_FP32, 0, NULL);
  if (n_out > 1 && out[1].dt != DT_INVALID) op_set_out(&out[1], DT_FP32, x->ndims, x->dims);
  return 0;
}

static int run_loss(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                    err *e) {
  const eng_tensor *x = &in[0], *t = &in[1];
  size_t n = (size_t)x->dims[0], c = (size_t)x->dims[1], d = (size_t)op_prod(x->dims, 2, x->ndims);
  size_t nt = n * d, nx = n * c * d;
  int sce = p->noop_empty;
  float *logp = NULL, *tmp = NULL;
  int64_t *t64 = NULL;
  const float *src = x->data;
  if (sce) {  // SoftmaxCrossEntropyLoss: the loss of the log-softmax over dim 1
    logp = n_out > 1 && out[1].dt != DT_INVALID ? out[1].data : (tmp = malloc((nx ? nx : 1) * sizeof *tmp));
    if (!logp) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    if (nx) k_log_softmax(logp, x->data, n, c, d);
    src = logp;
  }
  const int64_t *tv = t->data;
  if (t->dt == DT_INT32) {
    t64 = malloc((nt ? nt : 1) * sizeof *t64);
    if (!t64) {
      free(tmp);
      return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    }
    for (size_t i = 0; i < nt; i++) t64[i] = ((const int32_t *)t->data)[i];
    tv = t64;
  }
  int rc = k_nll_loss(out[0].data, src, tv, op_given(in, n_in, 2) ? in[2].data : NULL, n, c, d, p->has_ints,
                      p->start, p->mode);
  free(tmp);
  free(t64);
  if (rc) return err_set(e, ERR_INVALID_ARGUMENT, "a target is outside [0, %zu)", c);
  return 0;
}

static int parse_sce(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  TRY(parse_loss(g, n, opset, p, e));
  p->noop_empty = 1;  // marks SoftmaxCrossEntropyLoss for run_loss
  return 0;
}

static int infer_batchnorm(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                           int n_out, err *e) {
  (void)p, (void)n_in, (void)n_out;
  TRY(eng_ops__need_f32(&in[0], "X", e));
  if (in[0].ndims < 2) return err_set(e, ERR_INVALID_ARGUMENT, "X must have rank >= 2");
  static const char *names[] = {"", "scale", "B", "input_mean", "input_var"};
  for (int i = 1; i < 5; i++) {
    TRY(eng_ops__need_f32(&in[i], names[i], e));
    if (eng_numel(in[i].ndims, in[i].dims) != in[0].dims[1])
      return err_set(e, ERR_INVALID_ARGUMENT, "%s must have %lld elements", names[i],
                     (long long)in[0].dims[1]);
  }
  op_set_out(&out[0], DT_FP32, in[0].ndims, in[0].dims);
  return 0;
}

static int run_batchnorm(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                         int n_out, err *e) {
  (void)n_in, (void)n_out, (void)e;
  const eng_tensor *x = &in[0];
  size_t n = (size_t)x->dims[0], c = (size_t)x->dims[1];
  size_t sp = (size_t)op_prod(x->dims, 2, x->ndims);
  if (n && c && sp)
    k_batch_norm(out[0].data, x->data, in[1].data, in[2].data, in[3].data, in[4].data, n, c, sp,
                 p->eps);
  return 0;
}

// --- MeanVarianceNormalization: (x - mean) / (std + 1e-9) over axes
// (default 0, 2, 3), std from E[x^2] - mean^2, as ONNX's function body

static int parse_mvn(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  TRY(eng_ops__attr_ints(n, "axes", p->ints, ENG_MAX_DIMS, &p->n_ints, e));
  if (p->n_ints < 0) {
    p->n_ints = 3;
    p->ints[0] = 0, p->ints[1] = 2, p->ints[2] = 3;
  }
  return 0;
}

static int infer_mvn(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  if (in[0].dt != DT_FP32) return err_set(e, ERR_INVALID_ARGUMENT, "input must be a float tensor");
  for (int k = 0; k < p->n_ints; k++) {
    int64_t a;
    TRY(eng_ops__norm_axis(p->ints[k], in[0].ndims, &a, e));
  }
  out[0] = in[0];
  out[0].data = NULL;
  return 0;
}

static int run_mvn(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  const eng_tensor *x = &in[0];
  int r = x->ndims, red[ENG_MAX_DIMS] = {0};
  for (int k = 0; k < p->n_ints; k++) {
    int64_t a;
    TRY(eng_ops__norm_axis(p->ints[k], r, &a, e));
    red[a] = 1;
  }
  // each element's group: its index with the reduced axes dropped
  size_t n = op_numel(x), groups = 1, cnt = 1;
  for (int d = 0; d < r; d++) {
    if (red[d]) cnt *= (size_t)x->dims[d];
    else groups *= (size_t)x->dims[d];
  }
  double *sum = calloc(groups ? groups : 1, sizeof *sum), *sq = calloc(groups ? groups : 1, sizeof *sq);
  size_t *gi = malloc((n ? n : 1) * sizeof *gi);
  if (!sum || !sq || !gi) {
    free(sum), free(sq), free(gi);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  const float *xs = x->data;
  float *y = out[0].data;
  for (size_t i = 0; i < n; i++) {
    size_t rest = i, g = 0, stride = 1;
    for (int d = r - 1; d >= 0; d--) {
      size_t c = rest % (size_t)x->dims[d];
      rest /= (size_t)x->dims[d];
      if (!red[d]) g += c * stride, stride *= (size_t)x->dims[d];
    }
    gi[i] = g;
    sum[g] += xs[i];
    sq[g] += (double)xs[i] * xs[i];
  }
  for (size_t i = 0; i < n; i++) {
    double m = sum[gi[i]] / (double)cnt, var = sq[gi[i]] / (double)cnt - m * m;
    y[i] = (float)((xs[i] - m) / (sqrt(var > 0 ? var : 0) + 1e-9));
  }
  free(sum), free(sq), free(gi);
  return 0;
}

// --- table

const eng_op_def eng_ops__norm[] = {
    {"MeanVarianceNormalization", 1, 1, 1, 1, 0, parse_mvn, infer_mvn, run_mvn, 0, NULL, NULL},
    {"Softmax", 1, 1, 1, 1, 0, parse_softmax, infer_softmax, run_softmax, 0, NULL, NULL},
    {"LogSoftmax", 1, 1, 1, 1, 0, parse_softmax, infer_softmax, run_log_softmax, 0, NULL, NULL},
    {"Hardmax", 1, 1, 1, 1, 0, parse_softmax, infer_softmax, run_hardmax, 0, NULL, NULL},
    {"LpNormalization", 1, 1, 1, 1, 0, parse_lpnorm, infer_softmax, run_lpnorm, 0, NULL, NULL},
    {"LRN", 1, 1, 1, 1, 0, parse_lrn, infer_lrn, run_lrn, 0, NULL, NULL},
    {"LayerNormalization", 2, 3, 1, 3, 0, parse_layernorm, infer_layernorm, run_layernorm, 0, NULL, NULL},
    {"RMSNormalization", 2, 2, 1, 1, ENG_OP_INPLACE, parse_layernorm, infer_rmsnorm, run_rmsnorm, 0, NULL, NULL},
    {"InstanceNormalization", 3, 3, 1, 1, ENG_OP_INPLACE, parse_groupnorm, infer_groupnorm, run_groupnorm, 0, NULL, NULL},
    {"GroupNormalization", 3, 3, 1, 1, ENG_OP_INPLACE, parse_groupnorm, infer_groupnorm, run_groupnorm, 0, NULL, NULL},
    {"NegativeLogLikelihoodLoss", 2, 3, 1, 1, 0, parse_loss, infer_loss, run_loss, 0, NULL, NULL},
    {"SoftmaxCrossEntropyLoss", 2, 3, 1, 2, 0, parse_sce, infer_loss, run_loss, 0, NULL, NULL},
    {"BatchNormalization", 5, 5, 1, 5, 0, parse_batchnorm, infer_batchnorm, run_batchnorm, 0, NULL, NULL},
};
const size_t eng_ops__n_norm = sizeof eng_ops__norm / sizeof eng_ops__norm[0];
