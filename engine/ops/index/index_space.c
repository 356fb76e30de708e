// engine/ops/index/index_space.c: DepthToSpace and SpaceToDepth (DCR and CRD
// modes: a 6-D view of the input transposed by k_transpose, any element type),
// ReverseSequence, EyeLike (ones on the k-th diagonal), Tile and OneHot on the CPU. index.c's
// table lists them; of these only Tile has a CUDA path (index_cuda.c).
#include <string.h>

#include "engine/ops/index/index.h"
#include "engine/ops/ops_common.h"
#include "kernels/k_ref.h"

// p->start: blocksize; p->mode: 1 for CRD; p->upper: 1 for DepthToSpace
int eng_ops__parse_space(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  static const char *const modes[] = {"DCR", "CRD", NULL};
  p->start = op_attr_int(n, "blocksize", 0);
  if (p->start < 1) return err_set(e, ERR_INVALID_ARGUMENT, "blocksize must be positive");
  TRY(eng_ops__enum(op_attr_str(n, "mode", "DCR"), modes, "mode", &p->mode, e));
  p->upper = strcmp(n->op_type, "DepthToSpace") == 0;
  return 0;
}

// The 6-D view of x, the permutation and the output's 4 dims.
static int space_plan(const eng_op_params *p, const eng_tensor *x, int64_t *v, int *perm, int64_t *y, err *e) {
  if (x->ndims != 4) return err_set(e, ERR_INVALID_ARGUMENT, "input must be 4-D [N, C, H, W]");
  if (eng_elem_size(x->dt) == 0) return err_set(e, ERR_INVALID_ARGUMENT, "unsupported element type %s", dtype_wire_name(x->dt));
  int64_t b = p->start, n = x->dims[0], c = x->dims[1], h = x->dims[2], w = x->dims[3];
  if (p->upper) {
    if (c % (b * b)) return err_set(e, ERR_INVALID_ARGUMENT, "channels %lld are no multiple of blocksize^2", (long long)c);
    int64_t cc = c / (b * b);
    static const int dcr[6] = {0, 3, 4, 1, 5, 2}, crd[6] = {0, 1, 4, 2, 5, 3};
    const int64_t vd[6] = {n, b, b, cc, h, w}, vc[6] = {n, cc, b, b, h, w};
    memcpy(v, p->mode ? vc : vd, sizeof vd);
    memcpy(perm, p->mode ? crd : dcr, sizeof dcr);
    y[0] = n, y[1] = cc, y[2] = h * b, y[3] = w * b;
  } else {
    if (h % b || w % b) return err_set(e, ERR_INVALID_ARGUMENT, "H and W must be multiples of blocksize");
    static const int dcr[6] = {0, 3, 5, 1, 2, 4}, crd[6] = {0, 1, 3, 5, 2, 4};
    const int64_t vv[6] = {n, c, h / b, b, w / b, b};
    memcpy(v, vv, sizeof vv);
    memcpy(perm, p->mode ? crd : dcr, sizeof dcr);
    y[0] = n, y[1] = c * b * b, y[2] = h / b, y[3] = w / b;
  }
  return 0;
}

int eng_ops__infer_space(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  int64_t v[6], y[4];
  int perm[6];
  TRY(space_plan(p, &in[0], v, perm, y, e));
  op_set_out(&out[0], in[0].dt, 4, y);
  return 0;
}

int eng_ops__run_space(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  int64_t v[6], y[4];
  int perm[6];
  TRY(space_plan(p, &in[0], v, perm, y, e));
  if (op_numel(&in[0])) k_transpose(out[0].data, in[0].data, eng_elem_size(in[0].dt), 6, v, perm);
  return 0;
}

// --- EyeLike: p->to: dtype (DT_INVALID: the input's), p->start: k

int eng_ops__parse_eyelike(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset, (void)e;
  int64_t dt = op_attr_int(n, "dtype", 0);
  p->to = dt ? eng_ops_cpu_internal_dtype(dtype_from_onnx((int)dt)) : DT_INVALID;
  p->start = op_attr_int(n, "k", 0);
  return 0;
}

int eng_ops__infer_eyelike(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                           err *e) {
  (void)n_in, (void)n_out;
  dtype t = p->to != DT_INVALID ? p->to : in[0].dt;
  k_elem k;
  if (in[0].ndims != 2) return err_set(e, ERR_INVALID_ARGUMENT, "input must be 2-D");
  if (t == DT_STRING || eng_ops_elem_of(t, &k) != 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported element type %s", dtype_wire_name(t));
  op_set_out(&out[0], t, 2, in[0].dims);
  return 0;
}

int eng_ops__run_eyelike(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                         err *e) {
  (void)n_in, (void)n_out, (void)e;
  size_t esz = eng_elem_size(out[0].dt);
  int64_t r = in[0].dims[0], c = in[0].dims[1];
  uint8_t *y = out[0].data;
  memset(y, 0, (size_t)(r * c) * esz);
  k_elem k;
  (void)eng_ops_elem_of(out[0].dt, &k);  // infer accepted it
  const double one = 1.0;
  for (int64_t i = 0; i < r; i++) {
    int64_t j = i + p->start;
    if (j >= 0 && j < c) k_cast(y + (size_t)(i * c + j) * esz, k, &one, K_F64, 1);
  }
  return 0;
}

// --- ReverseSequence: p->axis: batch_axis, p->start: time_axis; any element type

int eng_ops__parse_revseq(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  p->axis = op_attr_int(n, "batch_axis", 1);
  p->start = op_attr_int(n, "time_axis", 0);
  if (!((p->axis == 0 && p->start == 1) || (p->axis == 1 && p->start == 0)))
    return err_set(e, ERR_INVALID_ARGUMENT, "batch_axis and time_axis must be 0 and 1 in some order");
  return 0;
}

int eng_ops__infer_revseq(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                          err *e) {
  (void)p, (void)n_in, (void)n_out;
  if (in[0].ndims < 2) return err_set(e, ERR_INVALID_ARGUMENT, "input must have rank >= 2");
  if (eng_elem_size(in[0].dt) == 0) return err_set(e, ERR_INVALID_ARGUMENT, "unsupported element type %s", dtype_wire_name(in[0].dt));
  if (in[1].dt != DT_INT64 || in[1].ndims != 1 || in[1].dims[0] != in[0].dims[p->axis])
    return err_set(e, ERR_INVALID_ARGUMENT, "sequence_lens must be INT64 [batch]");
  op_set_out(&out[0], in[0].dt, in[0].ndims, in[0].dims);
  return 0;
}

int eng_ops__run_revseq(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                        err *e) {
  (void)n_in, (void)n_out;
  const eng_tensor *x = &in[0];
  size_t esz = eng_elem_size(x->dt), inner = (size_t)op_prod(x->dims, 2, x->ndims) * esz;
  int64_t nb = x->dims[p->axis], nt = x->dims[p->start];
  const int64_t *lens = in[1].data;
  const uint8_t *src = x->data;
  uint8_t *dst = out[0].data;
  for (int64_t b = 0; b < nb; b++)
    if (lens[b] < 0 || lens[b] > nt)
      return err_set(e, ERR_INVALID_ARGUMENT, "sequence_lens[%lld] = %lld is outside [0, %lld]", (long long)b,
                     (long long)lens[b], (long long)nt);
  for (int64_t b = 0; b < nb; b++)
    for (int64_t t = 0; t < nt; t++) {
      int64_t from = t < lens[b] ? lens[b] - 1 - t : t;
      // element (b, t) of [batch, time, ...] or [time, batch, ...]
      size_t yo = (size_t)(p->axis == 0 ? b * nt + t : t * nb + b), xo = (size_t)(p->axis == 0 ? b * nt + from : from * nb + b);
      memcpy(dst + yo * inner, src + xo * inner, inner);
    }
  return 0;
}

// --- Tile: repeats (input 1, INT64, read while inferring shapes: a constant
// or a parameter given as an input); any element type

static int tile_repeats(const eng_tensor *in, int64_t *rep, err *e) {
  int n = 0;
  TRY(eng_ops__read_ints(&in[1], "repeats", rep, ENG_MAX_DIMS, &n, e));
  if (n != in[0].ndims)
    return err_set(e, ERR_INVALID_ARGUMENT, "%d repeats for rank %d", n, in[0].ndims);
  for (int d = 0; d < n; d++)
    if (rep[d] < 0) return err_set(e, ERR_INVALID_ARGUMENT, "repeats[%d] = %lld is negative", d, (long long)rep[d]);
  return 0;
}

int eng_ops__infer_tile(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                        err *e) {
  (void)p, (void)n_in, (void)n_out;
  if (eng_elem_size(in[0].dt) == 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported element type %s", dtype_wire_name(in[0].dt));
  int64_t rep[ENG_MAX_DIMS], y[ENG_MAX_DIMS];
  TRY(tile_repeats(in, rep, e));
  for (int d = 0; d < in[0].ndims; d++) {
    if (rep[d] && in[0].dims[d] > ENG_MAX_NUMEL / rep[d])
      return err_set(e, ERR_INVALID_ARGUMENT, "dim %d times %lld repeats is too large", d, (long long)rep[d]);
    y[d] = in[0].dims[d] * rep[d];
  }
  TRY(eng_ops__checked_numel(in[0].ndims, y, "result", e));
  op_set_out(&out[0], in[0].dt, in[0].ndims, y);
  return 0;
}

// The planner's output dims are this run's: the repeats were read and checked
// while shapes were inferred (eng_ops__infer_tile), as on the CUDA path.
int eng_ops__run_tile(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                      err *e) {
  (void)p, (void)n_in, (void)n_out;
  if (in[0].ndims != out[0].ndims) return err_set(e, ERR_INTERNAL, "Tile: rank %d into %d", in[0].ndims, out[0].ndims);
  k_tile(out[0].data, in[0].data, eng_elem_size(in[0].dt), out[0].ndims, out[0].dims, in[0].dims);
  return 0;
}


// --- OneHot: indices (any number type), depth (a scalar read while
// inferring shapes), values [off, on] (the output's type); p->axis where
// the new dim goes. Indices below 0 count from depth; out of range: all off.

int eng_ops__parse_onehot(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset, (void)e;
  p->axis = op_attr_int(n, "axis", -1);
  return 0;
}

static int onehot_depth(const eng_tensor *d, int64_t *depth, err *e) {
  if (op_numel(d) != 1 || d->ndims > 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "depth must be a scalar or one value");
  if (!d->data) return err_set(e, ERR_INVALID_ARGUMENT, "depth is not known when planning");
  double v;
  k_elem k;
  if (eng_ops_elem_of(d->dt, &k) != 0 || d->dt == DT_BOOL)
    return err_set(e, ERR_INVALID_ARGUMENT, "depth has unsupported element type %s", dtype_wire_name(d->dt));
  k_cast(&v, K_F64, d->data, k, 1);
  if (!(v >= 1 && v <= (double)ENG_MAX_NUMEL))
    return err_set(e, ERR_INVALID_ARGUMENT, "depth %g is not a positive size", v);
  *depth = (int64_t)v;
  return 0;
}

int eng_ops__infer_onehot(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                          err *e) {
  (void)n_in, (void)n_out;
  k_elem k;
  if (eng_ops_elem_of(in[0].dt, &k) != 0 || in[0].dt == DT_BOOL)
    return err_set(e, ERR_INVALID_ARGUMENT, "indices have unsupported element type %s", dtype_wire_name(in[0].dt));
  if (eng_elem_size(in[2].dt) == 0 || in[2].dt == DT_STRING || op_numel(&in[2]) != 2 || in[2].ndims != 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "values must be [off, on] of a fixed-size type");
  int64_t depth, ax;
  TRY(onehot_depth(&in[1], &depth, e));
  int r = in[0].ndims + 1;
  if (r > ENG_MAX_DIMS) return err_set(e, ERR_INVALID_ARGUMENT, "indices have rank %d", in[0].ndims);
  TRY(eng_ops__norm_axis(p->axis, r, &ax, e));
  int64_t y[ENG_MAX_DIMS];
  for (int d = 0, s = 0; d < r; d++) y[d] = d == ax ? depth : in[0].dims[s++];
  TRY(eng_ops__checked_numel(r, y, "result", e));
  op_set_out(&out[0], in[2].dt, r, y);
  return 0;
}

int eng_ops__run_onehot(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                        err *e) {
  (void)n_in, (void)n_out;
  int64_t depth, ax;
  TRY(onehot_depth(&in[1], &depth, e));
  TRY(eng_ops__norm_axis(p->axis, out[0].ndims, &ax, e));
  size_t esz = eng_elem_size(out[0].dt), ny = op_numel(&out[0]), ni = op_numel(&in[0]);
  const uint8_t *off = in[2].data, *on = off + esz;
  uint8_t *y = out[0].data;
  for (size_t i = 0; i < ny; i++) memcpy(y + i * esz, off, esz);
  // indices as [outer, inner] around the new dim: y[outer, depth, inner]
  size_t inner = (size_t)op_prod(out[0].dims, (int)ax + 1, out[0].ndims);
  k_elem k;
  (void)eng_ops_elem_of(in[0].dt, &k);  // infer accepted it
  for (size_t i = 0; i < ni; i++) {
    double v;
    k_cast(&v, K_F64, (const uint8_t *)in[0].data + i * eng_elem_size(in[0].dt), k, 1);
    if (!(v == v)) continue;  // NaN: no position
    int64_t c = (int64_t)v;  // ONNX casts non-integer indices
    if (c < 0) c += depth;
    if (c < 0 || c >= depth) continue;
    size_t o = i / inner, in_ = i % inner;
    memcpy(y + ((o * (size_t)depth + (size_t)c) * inner + in_) * esz, on, esz);
  }
  return 0;
}
