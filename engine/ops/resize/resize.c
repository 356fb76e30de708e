// engine/ops/resize/resize.c: spatial ops that change a tensor's extent: Pad
// (constant/reflect/edge), Resize (nearest with the coordinate modes
// exporters use, bilinear and (CPU only) bicubic over the last two dims), the older Upsample, and
// GridSample (1-3 spatial dims, nearest/linear/cubic, every padding mode; CPU only).
// Pads, scales and sizes are read at shape inference (host_in). The rules
// that turn them into kernel arguments are shared with the CUDA side
// (engine/ops/resize/resize_cuda.c) through engine/ops/resize/resize.h.
#include <math.h>
#include <string.h>

#include "engine/ops/resize/resize.h"

#include "engine/ops/ops_common.h"
#include "kernels/k_ref.h"

// --- Pad

// in k_padmode order
static const char *const pad_modes[] = {"constant", "reflect", "edge", "wrap", NULL};

static int parse_pad(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g;
  TRY(eng_ops__enum(op_attr_str(n, "mode", "constant"), pad_modes, "mode", &p->mode, e));
  if (opset >= 11) {
    if (n->n_in < 2 || n->in[1] < 0) return err_set(e, ERR_INVALID_ARGUMENT, "pads are required");
    return 0;
  }
  if (n->n_in > 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "Pad before opset 11 takes 1 input, got %d", n->n_in);
  int64_t pads[2 * ENG_MAX_DIMS];
  int cnt;
  TRY(eng_ops__attr_ints(n, opset < 2 ? "paddings" : "pads", pads, 2 * ENG_MAX_DIMS, &cnt, e));
  if (cnt < 0 || cnt % 2) return err_set(e, ERR_INVALID_ARGUMENT, "pads must have 2 * rank values");
  p->n_se = cnt / 2;
  memcpy(p->starts, pads, (size_t)p->n_se * sizeof *pads);
  memcpy(p->ends, pads + p->n_se, (size_t)p->n_se * sizeof *pads);
  p->alpha = op_attr_float(n, "value", 0.0f);
  return 0;
}

int eng_ops__pad_dims(const eng_op_params *p, const eng_tensor *in, int n_in, int64_t *b,
                      int64_t *en, int64_t *y, err *e) {
  int r = in[0].ndims, n, na = -1;
  int64_t pads[2 * ENG_MAX_DIMS], axes[ENG_MAX_DIMS];
  if (op_given(in, n_in, 1)) {
    TRY(eng_ops__read_ints(&in[1], "pads", pads, 2 * ENG_MAX_DIMS, &n, e));
    if (n % 2) return err_set(e, ERR_INVALID_ARGUMENT, "pads has an odd length %d", n);
    n /= 2;
    if (op_given(in, n_in, 3)) TRY(eng_ops__read_ints(&in[3], "axes", axes, ENG_MAX_DIMS, &na, e));
  } else {
    n = p->n_se;
    memcpy(pads, p->starts, (size_t)n * sizeof *pads);
    memcpy(pads + n, p->ends, (size_t)n * sizeof *pads);
  }
  if (na < 0 && n != r)
    return err_set(e, ERR_INVALID_ARGUMENT, "%d pads per side for rank %d", n, r);
  if (na >= 0 && na != n)
    return err_set(e, ERR_INVALID_ARGUMENT, "%d pads per side for %d axes", n, na);
  for (int d = 0; d < r; d++) b[d] = en[d] = 0;
  for (int i = 0; i < n; i++) {
    int64_t a = i;
    if (na >= 0) TRY(eng_ops__norm_axis(axes[i], r, &a, e));
    b[a] = pads[i];
    en[a] = pads[n + i];
  }
  for (int d = 0; d < r; d++) {
    int64_t dim = in[0].dims[d], lim = ENG_MAX_NUMEL;
    if (b[d] > lim || en[d] > lim || b[d] < -lim || en[d] < -lim || dim + b[d] + en[d] < 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "pads %lld, %lld do not fit dim %d of size %lld",
                     (long long)b[d], (long long)en[d], d, (long long)dim);
    if (p->mode == K_PAD_REFLECT && (b[d] > dim - 1 || en[d] > dim - 1) && (b[d] > 0 || en[d] > 0))
      return err_set(e, ERR_INVALID_ARGUMENT, "reflect pads %lld, %lld exceed dim %d of size %lld - 1",
                     (long long)b[d], (long long)en[d], d, (long long)dim);
    if ((p->mode == K_PAD_EDGE || p->mode == K_PAD_WRAP) && dim == 0 && (b[d] > 0 || en[d] > 0))
      return err_set(e, ERR_INVALID_ARGUMENT, "%s padding of the empty dim %d", pad_modes[p->mode], d);
    // ONNX (numpy's pad) defines wrap for pads >= 0 only: cropping first would change the period
    if (p->mode == K_PAD_WRAP && (b[d] < 0 || en[d] < 0))
      return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: negative pads %lld, %lld with mode 'wrap'",
                     (long long)b[d], (long long)en[d]);
    y[d] = dim + b[d] + en[d];
  }
  return eng_ops__checked_numel(r, y, "result", e);
}

static int infer_pad(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                     int n_out, err *e) {
  (void)n_out;
  k_elem k;  // Pad moves bytes: any fixed-size type (the value attribute before opset 11 is cast to it)
  if (eng_ops_elem_of(in[0].dt, &k) != 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported element type %s",
                   dtype_wire_name(in[0].dt));
  if (op_given(in, n_in, 2) && (in[2].dt != in[0].dt || op_numel(&in[2]) != 1))
    return err_set(e, ERR_INVALID_ARGUMENT, "constant_value must be a %s scalar",
                   dtype_wire_name(in[0].dt));
  int64_t b[ENG_MAX_DIMS], en[ENG_MAX_DIMS], y[ENG_MAX_DIMS];
  TRY(eng_ops__pad_dims(p, in, n_in, b, en, y, e));
  op_set_out(&out[0], in[0].dt, in[0].ndims, y);
  return 0;
}

static int run_pad(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                   int n_out, err *e) {
  (void)n_out;
  int64_t b[ENG_MAX_DIMS], en[ENG_MAX_DIMS], y[ENG_MAX_DIMS];
  TRY(eng_ops__pad_dims(p, in, n_in, b, en, y, e));
  uint8_t value[8] = {0};
  size_t esz = dtype_size(in[0].dt);
  k_elem k;
  if (op_given(in, n_in, 2)) memcpy(value, in[2].data, esz);
  else if (eng_ops_elem_of(in[0].dt, &k) == 0) k_cast(value, k, &p->alpha, K_F32, 1);
  if (!op_numel(&out[0])) return 0;
  if (in[0].ndims == 0) memcpy(out[0].data, in[0].data, esz);
  else k_pad(out[0].data, in[0].data, esz, in[0].ndims, in[0].dims, b, y, (k_padmode)p->mode, value);
  return 0;
}

// --- Resize / Upsample

// in eng_resize_mode order
static const char *const resize_modes[] = {"nearest", "linear", "cubic", NULL};
// in k_coord order
static const char *const coord_modes[] = {"half_pixel", "asymmetric", "pytorch_half_pixel",
                                          "align_corners", "tf_half_pixel_for_nearest",
                                          "half_pixel_symmetric", NULL};
// in k_nearest order
static const char *const nearest_modes[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                            "ceil", NULL};

// Upsample (opset 7..9) and Resize 10 share one behaviour: asymmetric
// coordinates and floor (ceil when shrinking) rounding; p->legacy marks it,
// with the scales as input 1 (or, before opset 9, the attribute).
static int parse_resize(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p,
                        err *e) {
  (void)g;
  const char *mode = op_attr_str(n, "mode", "nearest");
  if (strcmp(mode, "bilinear") == 0) mode = "linear";  // Upsample-7's spelling
  TRY(eng_ops__enum(mode, resize_modes, "mode", &p->mode, e));
  int upsample = strcmp(n->op_type, "Upsample") == 0;
  p->legacy = upsample || opset < 11;
  if (p->legacy) {
    p->coord = K_COORD_ASYMMETRIC;
    p->nearest = K_NEAREST_SIMPLE;
    if (upsample && opset < 9) {
      const eng_attr *a = eng_node_attr(n, "scales");
      if (!a || a->n_floats > ENG_MAX_DIMS)
        return err_set(e, ERR_INVALID_ARGUMENT, "attribute 'scales' is required (at most %d)",
                       ENG_MAX_DIMS);
      p->n_floats = (int)a->n_floats;
      memcpy(p->floats, a->floats, a->n_floats * sizeof(float));
      p->has_ints = 1;  // scales known from the attribute
    } else if (n->n_in < 2 || n->in[1] < 0) {
      return err_set(e, ERR_INVALID_ARGUMENT, "the scales input is required");
    }
    return 0;
  }
  TRY(eng_ops__enum(op_attr_str(n, "coordinate_transformation_mode", "half_pixel"), coord_modes,
                    "coordinate_transformation_mode", &p->coord, e));
  TRY(eng_ops__enum(op_attr_str(n, "nearest_mode", "round_prefer_floor"), nearest_modes,
                    "nearest_mode", &p->nearest, e));
  if (op_attr_int(n, "antialias", 0) != 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: antialias=1");
  p->alpha = op_attr_float(n, "cubic_coeff_a", -0.75f);  // cubic's kernel
  p->upper = op_attr_int(n, "exclude_outside", 0) != 0;
  // axes: the dims scales/sizes (and roi) name, the others kept; checked
  // against the rank at inference
  TRY(eng_ops__attr_ints(n, "axes", p->ints, ENG_MAX_DIMS, &p->n_ints, e));
  if (p->n_ints == 0) return err_set(e, ERR_INVALID_ARGUMENT, "attribute 'axes' is empty");
  static const char *const policies[] = {"stretch", "not_larger", "not_smaller", NULL};
  TRY(eng_ops__enum(op_attr_str(n, "keep_aspect_ratio_policy", "stretch"), policies,
                    "keep_aspect_ratio_policy", &p->keep_aspect, e));
  return 0;
}

// The dims scales and sizes name (Resize's axes attribute, else all),
// normalised and distinct, into axes[0..*na).
static int resize_axes(const eng_op_params *p, int r, int64_t *axes, int *na, err *e) {
  if (p->legacy || p->n_ints < 0) {
    for (int d = 0; d < r; d++) axes[d] = d;
    *na = r;
    return 0;
  }
  *na = p->n_ints;
  for (int i = 0; i < p->n_ints; i++) {
    TRY(eng_ops__norm_axis(p->ints[i], r, &axes[i], e));
    for (int k = 0; k < i; k++)
      if (axes[k] == axes[i]) return err_set(e, ERR_INVALID_ARGUMENT, "axis %lld repeated", (long long)axes[i]);
  }
  return 0;
}

// Sizes (Resize 11+) over the whole rank: the dims axes name from the
// input, the others kept; with a keep_aspect_ratio_policy, one scale for
// every named dim (the smallest or the largest), the sizes rounded half up
// from it, as ONNX's reference does. scales: that scale on the named dims,
// 1 elsewhere (NULL: not wanted).
static int resize_sizes(const eng_op_params *p, const eng_tensor *in, int64_t *y, float *scales, err *e) {
  int r = in[0].ndims, na, n = 0;
  int64_t axes[ENG_MAX_DIMS], sz[ENG_MAX_DIMS];
  TRY(resize_axes(p, r, axes, &na, e));
  TRY(eng_ops__read_ints(&in[3], "sizes", sz, ENG_MAX_DIMS, &n, e));
  if (n != na) return err_set(e, ERR_INVALID_ARGUMENT, "%d sizes for %d axes", n, na);
  for (int d = 0; d < r; d++) y[d] = in[0].dims[d];
  for (int i = 0; i < na; i++) {
    if (sz[i] < 0) return err_set(e, ERR_INVALID_ARGUMENT, "negative size %lld", (long long)sz[i]);
    y[axes[i]] = sz[i];
  }
  for (int d = 0; d < r && scales; d++) scales[d] = in[0].dims[d] ? (float)y[d] / (float)in[0].dims[d] : 1.0f;
  if (p->keep_aspect != 0) {
    float s = 0.0f;
    for (int i = 0; i < na; i++) {
      int64_t x = in[0].dims[axes[i]];
      float si = x ? (float)sz[i] / (float)x : 1.0f;
      if (i == 0 || (p->keep_aspect == 1 ? si < s : si > s)) s = si;
    }
    for (int i = 0; i < na; i++) {
      double v = (double)s * (double)in[0].dims[axes[i]] + 0.5;
      if (!(v < (double)ENG_MAX_NUMEL)) return err_set(e, ERR_INVALID_ARGUMENT, "bad size for dim %lld", (long long)axes[i]);
      y[axes[i]] = (int64_t)v;
      if (scales) scales[axes[i]] = s;
    }
  }
  return eng_ops__checked_numel(r, y, "result", e);
}

// Whether the result shape comes from the sizes input (Resize 11+), not from scales.
static int resize_sized(const eng_op_params *p, const eng_tensor *in, int n_in) {
  return !p->legacy && op_given(in, n_in, 3) && op_numel(&in[3]) > 0;
}

// Scales as ONNX Runtime computes them from sizes (y unused otherwise).
int eng_ops__resize_scales(const eng_op_params *p, const eng_tensor *in, int n_in,
                           const int64_t *y, float *scales, err *e) {
  int r = in[0].ndims, n = 0, na;
  if (resize_sized(p, in, n_in)) {
    int64_t y2[ENG_MAX_DIMS];
    (void)y;
    return resize_sizes(p, in, y2, scales, e);
  }
  int64_t axes[ENG_MAX_DIMS];
  float given[ENG_MAX_DIMS];
  TRY(resize_axes(p, r, axes, &na, e));
  int si = p->legacy ? 1 : 2;  // the scales input
  if (p->legacy && p->has_ints) {
    n = p->n_floats;
    memcpy(scales, p->floats, sizeof p->floats);
  } else if (op_given(in, n_in, si) && op_numel(&in[si]) > 0) {
    TRY(eng_ops__read_floats(&in[si], "scales", given, ENG_MAX_DIMS, &n, e));
    if (n != na) return err_set(e, ERR_INVALID_ARGUMENT, "%d scales for %d axes", n, na);
    for (int d = 0; d < r; d++) scales[d] = 1.0f;
    for (int i = 0; i < na; i++) scales[axes[i]] = given[i];
    return 0;
  } else {
    return err_set(e, ERR_INVALID_ARGUMENT, "one of scales and sizes must be given");
  }
  if (n != r) return err_set(e, ERR_INVALID_ARGUMENT, "%d scales for rank %d", n, r);
  return 0;
}

// The result shape, computed once by infer (run reads it from out[0]): the
// sizes when given, else floor(in * scale).
static int resize_dims(const eng_op_params *p, const eng_tensor *in, int n_in, int64_t *y,
                       err *e) {
  int r = in[0].ndims;
  if (resize_sized(p, in, n_in)) return resize_sizes(p, in, y, NULL, e);
  float scales[ENG_MAX_DIMS];
  TRY(eng_ops__resize_scales(p, in, n_in, NULL, scales, e));
  for (int d = 0; d < r; d++) {
    double v = (double)in[0].dims[d] * scales[d];
    if (!(scales[d] > 0) || !(v <= (double)ENG_MAX_NUMEL))
      return err_set(e, ERR_INVALID_ARGUMENT, "bad scale %g for dim %d", scales[d], d);
    y[d] = (int64_t)(float)((float)in[0].dims[d] * scales[d]);
  }
  return eng_ops__checked_numel(r, y, "result", e);
}

static int infer_resize(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                        int n_out, err *e) {
  (void)n_out;
  int64_t y[ENG_MAX_DIMS];
  TRY(resize_dims(p, in, n_in, y, e));
  int r = in[0].ndims;
  if (p->mode == ENG_RESIZE_LINEAR || p->mode == ENG_RESIZE_CUBIC) {
    const char *m = p->mode == ENG_RESIZE_CUBIC ? "cubic" : "linear";
    TRY(eng_ops__need_f32(&in[0], "X", e));
    if (r < 2) return err_set(e, ERR_INVALID_ARGUMENT, "%s needs rank >= 2", m);
    for (int d = 0; d < r - 2; d++)
      if (y[d] != in[0].dims[d])
        return err_set(e, ERR_INVALID_ARGUMENT,
                       "unsupported: %s resize of dim %d (only the last two dims)", m, d);
  } else if (dtype_size(in[0].dt) == 0) {
    return err_set(e, ERR_INVALID_ARGUMENT, "unsupported element type %s",
                   dtype_wire_name(in[0].dt));
  }
  op_set_out(&out[0], in[0].dt, r, y);
  return 0;
}

static int run_resize(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                      int n_out, err *e) {
  (void)n_out;
  const int64_t *y = out[0].dims;  // infer's result shape
  float scales[ENG_MAX_DIMS];
  TRY(eng_ops__resize_scales(p, in, n_in, y, scales, e));
  int r = in[0].ndims;
  if (!op_numel(&out[0])) return 0;
  if (r == 0) {
    memcpy(out[0].data, in[0].data, dtype_size(in[0].dt));
  } else if (p->mode == ENG_RESIZE_NEAREST) {
    k_resize_nearest(out[0].data, in[0].data, dtype_size(in[0].dt), r, in[0].dims, y, scales,
                     (k_coord)p->coord, (k_nearest)p->nearest);
  } else if (p->mode == ENG_RESIZE_CUBIC) {
    k_resize_cubic(out[0].data, in[0].data, (size_t)op_prod(in[0].dims, 0, r - 2), in[0].dims[r - 2],
                   in[0].dims[r - 1], y[r - 2], y[r - 1], scales[r - 2], scales[r - 1], (k_coord)p->coord,
                   p->alpha, p->upper);
  } else {
    k_resize_linear(out[0].data, in[0].data, (size_t)op_prod(in[0].dims, 0, r - 2),
                    in[0].dims[r - 2], in[0].dims[r - 1], y[r - 2], y[r - 1], scales[r - 2],
                    scales[r - 1], (k_coord)p->coord);
  }
  return 0;
}

// --- table

// --- GridSample (opset 16: bilinear/bicubic names; 20: linear/cubic and N-D)

static int parse_grid_sample(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  static const char *const modes[] = {"nearest", "linear", "cubic", "bilinear", "bicubic", NULL};
  static const char *const pads[] = {"zeros", "border", "reflection", NULL};
  int m;
  TRY(eng_ops__enum(op_attr_str(n, "mode", opset >= 20 ? "linear" : "bilinear"), modes, "mode", &m, e));
  p->mode = m == 3 ? K_GS_LINEAR : m == 4 ? K_GS_CUBIC : m;
  TRY(eng_ops__enum(op_attr_str(n, "padding_mode", "zeros"), pads, "padding_mode", &p->coord, e));
  p->upper = op_attr_int(n, "align_corners", 0) != 0;
  return 0;
}

static int infer_grid_sample(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                             err *e) {
  (void)n_in, (void)n_out;
  const eng_tensor *x = &in[0], *gr = &in[1];
  TRY(eng_ops__need_f32(x, "X", e));
  TRY(eng_ops__need_f32(gr, "grid", e));
  int nd = x->ndims - 2;
  if (nd < 1 || nd > 3) return err_set(e, ERR_INVALID_ARGUMENT, "X must have 1 to 3 spatial dims");
  if (p->mode == K_GS_CUBIC && nd != 2) return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: cubic on %d-D", nd);
  if (gr->ndims != x->ndims || gr->dims[0] != x->dims[0] || gr->dims[gr->ndims - 1] != nd)
    return err_set(e, ERR_INVALID_ARGUMENT, "grid must be [N, out dims..., %d]", nd);
  int64_t y[ENG_MAX_DIMS] = {x->dims[0], x->dims[1]};
  for (int k = 0; k < nd; k++) y[2 + k] = gr->dims[1 + k];
  op_set_out(&out[0], DT_FP32, x->ndims, y);
  return 0;
}

static int run_grid_sample(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                           err *e) {
  (void)n_in, (void)n_out, (void)e;
  const eng_tensor *x = &in[0];
  if (!op_numel(&out[0])) return 0;
  if (!op_numel(x)) {  // nothing to sample: zeros, as the zeros padding gives
    memset(out[0].data, 0, op_numel(&out[0]) * sizeof(float));
    return 0;
  }
  k_grid_sample(out[0].data, x->data, in[1].data, (size_t)x->dims[0], (size_t)x->dims[1], x->ndims - 2,
                x->dims + 2, out[0].dims + 2, p->mode, p->coord, p->upper);
  return 0;
}

const eng_op_def eng_ops__resize[] = {
    {"GridSample", 2, 2, 1, 1, 0, parse_grid_sample, infer_grid_sample, run_grid_sample, 0, NULL, NULL},
    {"Pad", 1, 4, 1, 1, 0, parse_pad, infer_pad, run_pad, ENG_IN(1) | ENG_IN(3), NULL, NULL},
    {"CenterCropPad", 2, 2, 1, 1, 0, op_parse_node, eng_ops__infer_center_crop_pad,
     eng_ops__run_center_crop_pad, ENG_IN(1), NULL, NULL},
    {"RoiAlign", 3, 3, 1, 1, 0, eng_ops__parse_roi_align, eng_ops__infer_roi_align, eng_ops__run_roi_align, 0, NULL,
     NULL},
    {"AffineGrid", 2, 2, 1, 1, 0, eng_ops__parse_affine_grid, eng_ops__infer_affine_grid, eng_ops__run_affine_grid,
     ENG_IN(1), NULL, NULL},
    {"Resize", 1, 4, 1, 1, 0, parse_resize, infer_resize, run_resize,
     ENG_IN(1) | ENG_IN(2) | ENG_IN(3), NULL, NULL},
    {"Upsample", 1, 2, 1, 1, 0, parse_resize, infer_resize, run_resize, ENG_IN(1), NULL, NULL},
};
const size_t eng_ops__n_resize = sizeof eng_ops__resize / sizeof eng_ops__resize[0];
