// engine/ops/resize/resize_grid.c: CenterCropPad (crop or zero-pad each
// named axis to a size, centred), AffineGrid (the sampling grid of an
// affine transform, the input GridSample takes) and RoiAlign (bilinear
// pooling of regions), listed in resize.c's table.
// Their sizes (CenterCropPad's shape, AffineGrid's size) are read while
// planning (host_in).
#include <math.h>
#include <string.h>

#include "engine/ops/ops_common.h"
#include "engine/ops/resize/resize.h"

// --- CenterCropPad

int eng_ops__parse_affine_grid(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset, (void)e;
  p->coord = op_attr_int(n, "align_corners", 0) != 0;
  return 0;
}

// Per dim of x: the output size and where the input's copied part starts in
// the input (crop) and in the output (pad).
static int crop_pad(const eng_op_params *p, const eng_tensor *in, int64_t *y, int64_t *in0, int64_t *out0, err *e) {
  const eng_tensor *x = &in[0];
  int64_t sh[ENG_MAX_DIMS], ax[ENG_MAX_DIMS];
  int n_sh, n_ax;
  TRY(eng_ops__read_ints(&in[1], "shape", sh, ENG_MAX_DIMS, &n_sh, e));
  TRY(eng_ops__attr_ints(p->node, "axes", ax, ENG_MAX_DIMS, &n_ax, e));
  if (n_ax < 0) {
    n_ax = x->ndims;
    for (int d = 0; d < n_ax; d++) ax[d] = d;
  }
  if (n_sh != n_ax)
    return err_set(e, ERR_INVALID_ARGUMENT, "shape has %d values for %d axes", n_sh, n_ax);
  for (int d = 0; d < x->ndims; d++) y[d] = x->dims[d], in0[d] = out0[d] = 0;
  for (int k = 0; k < n_ax; k++) {
    int64_t a;
    TRY(eng_ops__norm_axis(ax[k], x->ndims, &a, e));
    if (sh[k] < 0) return err_set(e, ERR_INVALID_ARGUMENT, "shape[%d] is %lld", k, (long long)sh[k]);
    int64_t dim = x->dims[a];
    y[a] = sh[k];
    if (sh[k] < dim) in0[a] = (dim - sh[k]) / 2;
    else out0[a] = (sh[k] - dim) / 2;
  }
  return 0;
}

int eng_ops__infer_center_crop_pad(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                                   int n_out, err *e) {
  (void)n_in, (void)n_out;
  int64_t y[ENG_MAX_DIMS], a[ENG_MAX_DIMS], b[ENG_MAX_DIMS];
  TRY(crop_pad(p, in, y, a, b, e));
  out[0] = in[0];
  out[0].data = NULL;
  memcpy(out[0].dims, y, sizeof y);
  return 0;
}

int eng_ops__run_center_crop_pad(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                                 int n_out, err *e) {
  (void)n_in, (void)n_out;
  const eng_tensor *x = &in[0];
  int64_t y[ENG_MAX_DIMS], in0[ENG_MAX_DIMS], out0[ENG_MAX_DIMS];
  TRY(crop_pad(p, in, y, in0, out0, e));
  size_t esz = dtype_size(x->dt), n = op_numel(&out[0]);
  int r = x->ndims;
  memset(out[0].data, 0, n * esz);
  const unsigned char *src = x->data;
  unsigned char *dst = out[0].data;
  for (size_t i = 0; i < n; i++) {  // each output element: its input element, if any
    size_t rest = i, at = 0, stride = 1;
    int inside = 1;
    int64_t idx[ENG_MAX_DIMS];
    for (int d = r - 1; d >= 0; d--) {
      idx[d] = (int64_t)(rest % (size_t)y[d]);
      rest /= (size_t)y[d];
    }
    for (int d = r - 1; d >= 0 && inside; d--) {
      int64_t s = idx[d] - out0[d] + in0[d];
      if (s < 0 || s >= x->dims[d] || idx[d] < out0[d]) inside = 0;
      at += (size_t)s * stride;
      stride *= (size_t)x->dims[d];
    }
    if (inside) memcpy(dst + i * esz, src + at * esz, esz);
  }
  return 0;
}

// --- AffineGrid: theta [N, 2, 3] and size [N, C, H, W] -> [N, H, W, 2]
// (x, y); theta [N, 3, 4] and size [N, C, D, H, W] -> [N, D, H, W, 3]

static int grid_size(const eng_tensor *in, int64_t *sz, int *n, err *e) {
  TRY(eng_ops__read_ints(&in[1], "size", sz, 5, n, e));
  if (*n != 4 && *n != 5) return err_set(e, ERR_INVALID_ARGUMENT, "size must have 4 or 5 values, got %d", *n);
  int sp = *n - 2;
  const eng_tensor *t = &in[0];
  if (t->dt != DT_FP32 || t->ndims != 3 || t->dims[0] != sz[0] || t->dims[1] != sp || t->dims[2] != sp + 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "theta must be a float [N, %d, %d] for a size of %d values", sp, sp + 1, *n);
  return 0;
}

int eng_ops__infer_affine_grid(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                               err *e) {
  (void)p, (void)n_in, (void)n_out;
  int64_t sz[5];
  int n;
  TRY(grid_size(in, sz, &n, e));
  out[0].dt = DT_FP32;
  out[0].ndims = n;
  out[0].dims[0] = sz[0];
  for (int d = 2; d < n; d++) out[0].dims[d - 1] = sz[d];
  out[0].dims[n - 1] = n - 2;
  return 0;
}

static double base_coord(int64_t i, int64_t size, int align) {
  if (align) return size > 1 ? -1.0 + 2.0 * (double)i / (double)(size - 1) : 0.0;
  return (2.0 * (double)i + 1.0) / (double)size - 1.0;
}

int eng_ops__run_affine_grid(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                             err *e) {
  (void)n_in, (void)n_out;
  int64_t sz[5];
  int n;
  TRY(grid_size(in, sz, &n, e));
  int sp = n - 2;
  int64_t D = sp == 3 ? sz[2] : 1, H = sz[n - 2], W = sz[n - 1];
  const float *th = in[0].data;
  float *g = out[0].data;
  for (int64_t b = 0; b < sz[0]; b++) {
    const float *t = th + b * sp * (sp + 1);
    for (int64_t z = 0; z < D; z++)
      for (int64_t yy = 0; yy < H; yy++)
        for (int64_t xx = 0; xx < W; xx++) {
          double base[4] = {base_coord(xx, W, p->coord), base_coord(yy, H, p->coord), 0, 0};
          if (sp == 3) base[2] = base_coord(z, D, p->coord);
          base[sp] = 1.0;
          for (int r = 0; r < sp; r++) {
            double acc = 0;
            for (int c = 0; c <= sp; c++) acc += (double)t[r * (sp + 1) + c] * base[c];
            *g++ = (float)acc;
          }
        }
  }
  return 0;
}

// --- RoiAlign: X [N, C, H, W], rois [R, 4] (x1, y1, x2, y2), batch_indices
// [R] -> [R, C, output_height, output_width], bilinear samples averaged (or
// their largest weighted corner, mode max) per bin, as onnxruntime and
// onnx's reference compute them. p->node keeps the attributes; p->coord:
// half_pixel (the default from opset 16; output_half_pixel before).

int eng_ops__parse_roi_align(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g;
  const char *ct = op_attr_str(n, "coordinate_transformation_mode", opset >= 16 ? "half_pixel" : "output_half_pixel");
  static const char *const cts[] = {"output_half_pixel", "half_pixel", NULL};
  static const char *const modes[] = {"avg", "max", NULL};
  TRY(eng_ops__enum(ct, cts, "coordinate_transformation_mode", &p->coord, e));
  TRY(eng_ops__enum(op_attr_str(n, "mode", "avg"), modes, "mode", &p->mode, e));
  p->node = n;
  return 0;
}

int eng_ops__infer_roi_align(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                             err *e) {
  (void)n_in, (void)n_out;
  const eng_tensor *x = &in[0], *r = &in[1], *bi = &in[2];
  if (x->dt != DT_FP32 || x->ndims != 4 || r->dt != DT_FP32 || r->ndims != 2 || r->dims[1] != 4 || bi->ndims != 1 ||
      bi->dims[0] != r->dims[0] || bi->dt != DT_INT64)
    return err_set(e, ERR_INVALID_ARGUMENT, "expected X float [N, C, H, W], rois float [R, 4], batch_indices INT64 [R]");
  out[0] = *x;
  out[0].data = NULL;
  out[0].dims[0] = r->dims[0];
  out[0].dims[2] = op_attr_int(p->node, "output_height", 1);
  out[0].dims[3] = op_attr_int(p->node, "output_width", 1);
  if (out[0].dims[2] < 1 || out[0].dims[3] < 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "output_height and output_width must be >= 1");
  return 0;
}

// One bilinear sample at (y, x): its four corners' flat positions and weights (all 0 outside).
static void roi_sample(double y, double x, int64_t H, int64_t W, int64_t pos[4], double w[4]) {
  if (y < -1.0 || y > (double)H || x < -1.0 || x > (double)W) {
    for (int k = 0; k < 4; k++) pos[k] = 0, w[k] = 0;
    return;
  }
  if (y < 0) y = 0;
  if (x < 0) x = 0;
  int64_t yl = (int64_t)y, xl = (int64_t)x, yh, xh;
  if (yl >= H - 1) yh = yl = H - 1, y = (double)yl;
  else yh = yl + 1;
  if (xl >= W - 1) xh = xl = W - 1, x = (double)xl;
  else xh = xl + 1;
  double ly = y - (double)yl, lx = x - (double)xl, hy = 1 - ly, hx = 1 - lx;
  pos[0] = yl * W + xl, pos[1] = yl * W + xh, pos[2] = yh * W + xl, pos[3] = yh * W + xh;
  w[0] = hy * hx, w[1] = hy * lx, w[2] = ly * hx, w[3] = ly * lx;
}

int eng_ops__run_roi_align(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                           err *e) {
  (void)n_in, (void)n_out;
  const eng_tensor *x = &in[0];
  int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], R = in[1].dims[0];
  int64_t PH = out[0].dims[2], PW = out[0].dims[3], sr = op_attr_int(p->node, "sampling_ratio", 0);
  double scale = op_attr_float(p->node, "spatial_scale", 1.0f), off = p->coord == 1 ? 0.5 : 0.0;
  const float *xs = x->data, *rois = in[1].data;
  const int64_t *bidx = in[2].data;
  float *y = out[0].data;
  for (int64_t r = 0; r < R; r++) {
    int64_t b = bidx[r];
    if (b < 0 || b >= N)
      return err_set(e, ERR_INVALID_ARGUMENT, "batch_indices[%lld] = %lld is outside 0..%lld", (long long)r, (long long)b,
                     (long long)(N - 1));
    const float *ro = rois + r * 4;
    double sw = ro[0] * scale - off, sh = ro[1] * scale - off, rw = ro[2] * scale - off - sw,
           rh = ro[3] * scale - off - sh;
    if (p->coord == 0) {
      if (rw < 1) rw = 1;
      if (rh < 1) rh = 1;
    }
    double bh = rh / (double)PH, bw = rw / (double)PW;
    int64_t gh = sr > 0 ? sr : (int64_t)ceil(rh / (double)PH), gw = sr > 0 ? sr : (int64_t)ceil(rw / (double)PW);
    double count = (double)(gh * gw > 1 ? gh * gw : 1);
    for (int64_t c = 0; c < C; c++) {
      const float *plane = xs + (b * C + c) * H * W;
      for (int64_t ph = 0; ph < PH; ph++)
        for (int64_t pw = 0; pw < PW; pw++) {
          double acc = 0;
          int first = 1;
          for (int64_t iy = 0; iy < gh; iy++)
            for (int64_t ix = 0; ix < gw; ix++) {
              int64_t pos[4];
              double w[4];
              roi_sample(sh + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh,
                         sw + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw, H, W, pos, w);
              if (p->mode == 0) {
                for (int k = 0; k < 4; k++) acc += w[k] * plane[pos[k]];
              } else {
                double v = w[0] * plane[pos[0]];
                for (int k = 1; k < 4; k++) v = fmax(v, w[k] * plane[pos[k]]);
                acc = first ? v : fmax(acc, v);
                first = 0;
              }
            }
          y[((r * C + c) * PH + ph) * PW + pw] = (float)(p->mode == 0 ? acc / count : acc);
        }
    }
  }
  return 0;
}
