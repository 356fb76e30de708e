// engine/cuda/cuda_deconv.c: transposed convolution (ONNX ConvTranspose)
// plans on cuDNN's legacy C API (cuda_conv.h; the shared plumbing is in
// cuda_conv.c, declared in cuda_conv_internal.h).
//
// Transposed convolutions are cudnnConvolutionBackwardData of the forward
// convolution whose filter is ONNX's ConvTranspose weight. cuDNN takes one
// pad per dimension and wants dx and dy consistent, so asymmetric pads (and
// an output_padding past dx's reach) compute a dx with the smaller pad into
// the workspace and copy y out of it with cudnnTransformTensor over strided
// views (which also converts layouts: an NHWC shape that no candidate runs
// computes NCHW between transforms). Candidates are tried as the forward
// plan's are (eng_cuconv__try_candidates): each run once at plan time, the
// first that works or the fastest kept. Non-deterministic algorithms (ALGO_0's
// atomics) come last, so graph replays give the bits plain launches give.
#include "engine/cuda/cuda_conv.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_conv_internal.h"

// --- transposed convolution: shapes and packing

static eng_cutconv_desc tconv_norm(const eng_cutconv_desc *d) {
  eng_cutconv_desc n = *d;
  n.stride_h = eng_cuconv__or1(n.stride_h);
  n.stride_w = eng_cuconv__or1(n.stride_w);
  n.dil_h = eng_cuconv__or1(n.dil_h);
  n.dil_w = eng_cuconv__or1(n.dil_w);
  n.groups = eng_cuconv__or1(n.groups);
  return n;
}

// One spatial dim of a transposed convolution as cuDNN computes it.
// cuDNN's backward data takes one pad for both ends and wants its dx and dy
// to be those of a forward convolution: floor((D + 2p - span) / s) + 1 == x
// for dx extent D, i.e. D in [F - 2p, F - 2p + s - 1], where F = s (x - 1)
// + span is the full output (nothing cropped). dx is full[p, p + D); ONNX's
// y is full[pl, pl + Y) with zeros past F (output_padding), so y starts at
// dx[pl - p]. p is the largest pad up to min(pl, pr) for which some D in
// that range holds every y element inside the full output: with symmetric
// pads and output_padding < stride, p = pad and D = Y (cuDNN writes y).
typedef struct tdim {
  long long y;     // ONNX's output extent Y
  int p;           // cuDNN's pad
  long long dx;    // cuDNN's output extent D
  int crop;        // y's first element in dx (pl - p)
  long long copy;  // y elements [0, copy) come from dx; the rest are zeros (before the bias)
} tdim;

static void tconv_dim(long long x, int k, int s, int dil, int pl, int pr, int op, tdim *t) {
  long long span = (long long)dil * (k - 1) + 1, full = s * (x - 1) + span;
  t->y = full + op - pl - pr;
  int p = pl < pr ? pl : pr;
  for (; p > 0; p--) {
    long long lo = full - 2LL * p, hi = lo + s - 1;
    // covered: D reaches the end of y, or dx's end lies past the full
    // output (p <= s - 1), so what it misses is zeros
    if (lo >= 1 && (pl - p + t->y <= hi || p <= s - 1)) break;
  }
  // p = 0 always works: D in [F, F + s - 1] covers the full output
  long long lo = full - 2LL * p, hi = lo + s - 1, want = pl - p + t->y;
  t->p = p;
  t->dx = want < lo ? lo : want > hi ? hi : want;
  t->crop = pl - p;
  t->copy = t->dx - t->crop < t->y ? t->dx - t->crop : t->y;
  if (t->copy < 0) t->copy = 0;
}

static void tconv_dims(const eng_cutconv_desc *n, tdim *th, tdim *tw) {
  tconv_dim(n->h, n->r, n->stride_h, n->dil_h, n->pad_top, n->pad_bottom, n->out_pad_h, th);
  tconv_dim(n->w, n->s, n->stride_w, n->dil_w, n->pad_left, n->pad_right, n->out_pad_w, tw);
}

static int tconv_validate(const eng_cutconv_desc *d, int *ho, int *wo, err *e) {
  if (!d) return err_set(e, ERR_INVALID_ARGUMENT, "conv_transpose: NULL descriptor");
  eng_cutconv_desc n = tconv_norm(d);
  if (n.n < 1 || n.c < 1 || n.h < 1 || n.w < 1 || n.k < 1 || n.r < 1 || n.s < 1)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "conv_transpose: sizes must be >= 1 (n=%d c=%d h=%d w=%d k=%d r=%d s=%d)", n.n,
                   n.c, n.h, n.w, n.k, n.r, n.s);
  if (n.pad_top < 0 || n.pad_left < 0 || n.pad_bottom < 0 || n.pad_right < 0 || n.out_pad_h < 0 ||
      n.out_pad_w < 0)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "conv_transpose: negative pad (%d %d %d %d) or output padding (%d %d)",
                   n.pad_top, n.pad_left, n.pad_bottom, n.pad_right, n.out_pad_h, n.out_pad_w);
  if (n.stride_h < 1 || n.stride_w < 1 || n.dil_h < 1 || n.dil_w < 1 || n.groups < 1)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "conv_transpose: strides, dilations and groups must be >= 1 (%d %d, %d %d, %d)",
                   n.stride_h, n.stride_w, n.dil_h, n.dil_w, n.groups);
  if (n.c % n.groups || n.k % n.groups)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "conv_transpose: c=%d and k=%d must be multiples of groups=%d", n.c, n.k,
                   n.groups);
  if ((unsigned)n.dtype > ENG_CUCONV_FP16 || (unsigned)n.layout > ENG_CUCONV_NHWC)
    return err_set(e, ERR_INVALID_ARGUMENT, "conv_transpose: unknown dtype %d or layout %d",
                   (int)n.dtype, (int)n.layout);
  tdim th, tw;
  tconv_dims(&n, &th, &tw);
  if (th.y < 1 || tw.y < 1)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "conv_transpose: the output is %lldx%lld after padding", th.y, tw.y);
  // cuDNN's legacy descriptors count elements in int; dx may exceed y
  long long big = INT_MAX;
  if ((long long)n.n * n.c * n.h * n.w > big || (long long)n.n * n.k * th.y * tw.y > big ||
      (long long)n.n * n.k * th.dx * tw.dx > big || (long long)n.c * (n.k / n.groups) * n.r * n.s > big)
    return err_set(e, ERR_UNIMPLEMENTED, "conv_transpose: a tensor has more than 2^31-1 elements");
  if (ho) *ho = (int)th.y;
  if (wo) *wo = (int)tw.y;
  return 0;
}

int eng_cutconv_out_dims(const eng_cutconv_desc *d, int *ho, int *wo, err *e) {
  return tconv_validate(d, ho, wo, e);
}

int eng_cutconv_geometry(const eng_cutconv_desc *d, eng_cutconv_geom *g, err *e) {
  TRY(tconv_validate(d, NULL, NULL, e));
  if (!g) return err_set(e, ERR_INVALID_ARGUMENT, "conv_transpose: NULL geometry");
  eng_cutconv_desc n = tconv_norm(d);
  tdim th, tw;
  tconv_dims(&n, &th, &tw);  // validate bounded every extent by INT_MAX
  *g = (eng_cutconv_geom){.pad_h = th.p, .pad_w = tw.p, .dx_h = (int)th.dx, .dx_w = (int)tw.dx,
                          .crop_h = th.crop, .crop_w = tw.crop, .copy_h = (int)th.copy,
                          .copy_w = (int)tw.copy};
  return 0;
}

size_t eng_cutconv_x_bytes(const eng_cutconv_desc *d) {
  if (tconv_validate(d, NULL, NULL, NULL)) return 0;
  return (size_t)d->n * d->c * d->h * d->w * eng_cuconv__esize(d->dtype);
}

size_t eng_cutconv_y_bytes(const eng_cutconv_desc *d) {
  int ho = 0, wo = 0;  // set by the validate call on success; GCC -O3 cannot see that
  if (tconv_validate(d, &ho, &wo, NULL)) return 0;
  return (size_t)d->n * d->k * ho * wo * eng_cuconv__esize(d->dtype);
}

size_t eng_cutconv_w_bytes(const eng_cutconv_desc *d) {
  if (tconv_validate(d, NULL, NULL, NULL)) return 0;
  return (size_t)d->c * (d->k / eng_cuconv__or1(d->groups)) * d->r * d->s * eng_cuconv__esize(d->dtype);
}

size_t eng_cutconv_bias_bytes(const eng_cutconv_desc *d) {
  if (tconv_validate(d, NULL, NULL, NULL)) return 0;
  return (size_t)d->k * eng_cuconv__esize(d->dtype);
}

int eng_cutconv_pack_weights(const eng_cutconv_desc *d, const float *ckrs, void *dst,
                             size_t dst_bytes, err *e) {
  TRY(tconv_validate(d, NULL, NULL, e));
  size_t need = eng_cutconv_w_bytes(d);
  if (!ckrs || !dst || dst_bytes < need)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "conv_transpose: pack_weights needs %zu bytes (got %zu%s)", need, dst_bytes,
                   !ckrs || !dst ? ", NULL pointer" : "");
  // the backward-data filter: K = c (x's channels), C = k / groups
  return eng_cuconv__pack_filter(d->dtype, d->layout, ckrs, dst, (size_t)d->c,
                                 (size_t)(d->k / eng_cuconv__or1(d->groups)),
                                 (size_t)d->r, (size_t)d->s, e);
}

int eng_cutconv_pack_bias(const eng_cutconv_desc *d, const float *bias, void *dst,
                          size_t dst_bytes, err *e) {
  TRY(tconv_validate(d, NULL, NULL, e));
  size_t need = eng_cutconv_bias_bytes(d);
  if (!bias || !dst || dst_bytes < need)
    return err_set(e, ERR_INVALID_ARGUMENT, "conv_transpose: pack_bias needs %zu bytes (got %zu%s)",
                   need, dst_bytes, !bias || !dst ? ", NULL pointer" : "");
  eng_cuconv__store(d->dtype, dst, 0, bias, (size_t)d->k);
  return 0;
}

#if defined(INFERD_HAVE_CUDNN) && INFERD_HAVE_CUDNN

// --- transposed convolution (cudnnConvolutionBackwardData)

static const char *bwd_algo_name(int a) {
  switch (a) {
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0: return "ALGO_0";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1: return "ALGO_1";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
  }
  return "?";
}

typedef struct tcand {
  cudnnConvolutionBwdDataAlgo_t algo;
  cudnnMathType_t math;
  size_t ws;  // cuDNN's workspace for this algorithm
  float ms;
} tcand;

struct eng_cutconv_plan {
  eng_cutconv_desc d;  // normalised
  tdim th, tw;         // per spatial dim: cuDNN's pad and dx extent, the crop
  int ho, wo;
  bool direct;    // cuDNN writes y itself: no crop, no relayout
  bool tail;      // part of y lies past dx: y is cleared before the copy
  bool relayout;  // NHWC refused: x and w transformed to NCHW, computed NCHW
  // workspace: [x NCHW][w KCRS] (relayout), [dx] (unless direct), cuDNN's
  size_t xr_bytes, wr_bytes, dx_bytes;
  size_t src_off;  // elements: y's first element in dx
  cudnnTensorDescriptor_t xd;    // x as cuDNN reads it (the forward convolution's dy)
  cudnnTensorDescriptor_t dxd;   // what cuDNN writes (dx)
  cudnnTensorDescriptor_t yd;    // y, dense in d's layout (the bias is added there)
  cudnnTensorDescriptor_t bd;    // bias, [1, k, 1, 1]
  cudnnTensorDescriptor_t src_v, dst_v;          // the copy: y's part of dx, and where it lands in y
  cudnnTensorDescriptor_t x_in, w_in, w_out;     // relayout: x and w as given (NHWC), w as KCRS
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  tcand chosen;
  int candidates;
  char log[768];
};

static void tconv_free_desc(eng_cutconv_plan *p) {
  cudnnTensorDescriptor_t *t[] = {&p->xd, &p->dxd, &p->yd, &p->bd, &p->src_v, &p->dst_v,
                                  &p->x_in, &p->w_in, &p->w_out};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    if (*t[i]) (void)cudnnDestroyTensorDescriptor(*t[i]);
    *t[i] = NULL;
  }
  if (p->wd) (void)cudnnDestroyFilterDescriptor(p->wd);
  if (p->cd) (void)cudnnDestroyConvolutionDescriptor(p->cd);
  p->wd = NULL;
  p->cd = NULL;
}

void eng_cutconv_plan_destroy(eng_cutconv_plan *p) {
  if (!p) return;
  tconv_free_desc(p);
  (void)cudaGetLastError();
  free(p);
}

size_t eng_cutconv_plan_workspace(const eng_cutconv_plan *p) {
  return p->xr_bytes + p->wr_bytes + p->dx_bytes + p->chosen.ws;
}

const eng_cutconv_desc *eng_cutconv_plan_desc(const eng_cutconv_plan *p) { return &p->d; }

void eng_cutconv_plan_info(const eng_cutconv_plan *p, eng_cutconv_info *info) {
  memset(info, 0, sizeof *info);
  info->algo = (int)p->chosen.algo;
  info->algo_name = bwd_algo_name((int)p->chosen.algo);
  info->math = (int)p->chosen.math;
  info->cropped = p->th.crop || p->tw.crop || p->th.dx != p->ho || p->tw.dx != p->wo;
  info->relayout = p->relayout;
  info->workspace_bytes = eng_cutconv_plan_workspace(p);
  info->candidates = p->candidates;
  info->time_ms = p->chosen.ms;
  info->log = p->log;
}

// Element strides of a dense [n, c, h, w] tensor in format f, as cudnnSetTensor4dDescriptorEx takes them.
static void dense_strides(cudnnTensorFormat_t f, int c, int h, int w, int st[4]) {
  if (f == CUDNN_TENSOR_NHWC) {
    st[0] = h * w * c, st[1] = 1, st[2] = w * c, st[3] = c;
  } else {
    st[0] = c * h * w, st[1] = h * w, st[2] = w, st[3] = 1;
  }
}

static size_t tconv_y_bytes(const eng_cutconv_plan *p) {
  return (size_t)p->d.n * p->d.k * p->ho * p->wo * eng_cuconv__esize(p->d.dtype);
}

// The descriptors for p->relayout (set before).
static int tconv_build(eng_cutconv_plan *p, err *e) {
  const eng_cutconv_desc *d = &p->d;
  cudnnDataType_t t = eng_cuconv__dt(d->dtype);
  cudnnTensorFormat_t f = eng_cuconv__fmt(d->layout);
  cudnnTensorFormat_t cf = p->relayout ? CUDNN_TENSOR_NCHW : f;  // the layout cuDNN computes in
  size_t es = eng_cuconv__esize(d->dtype);
  int kg = d->k / d->groups, dxh = (int)p->th.dx, dxw = (int)p->tw.dx;
  p->direct = !p->relayout && p->th.crop == 0 && p->tw.crop == 0 && dxh == p->ho && dxw == p->wo;
  p->tail = !p->direct && (p->th.copy < p->ho || p->tw.copy < p->wo);
  p->xr_bytes = p->relayout ? eng_cuconv__align256((size_t)d->n * d->c * d->h * d->w * es) : 0;
  p->wr_bytes = p->relayout ? eng_cuconv__align256((size_t)d->c * kg * d->r * d->s * es) : 0;
  p->dx_bytes = p->direct ? 0 : eng_cuconv__align256((size_t)d->n * d->k * dxh * dxw * es);
  CUDNN_TRY(e, cudnnCreateTensorDescriptor(&p->xd));
  CUDNN_TRY(e, cudnnCreateTensorDescriptor(&p->dxd));
  CUDNN_TRY(e, cudnnCreateTensorDescriptor(&p->yd));
  CUDNN_TRY(e, cudnnCreateTensorDescriptor(&p->bd));
  CUDNN_TRY(e, cudnnCreateFilterDescriptor(&p->wd));
  CUDNN_TRY(e, cudnnCreateConvolutionDescriptor(&p->cd));
  CUDNN_TRY(e, cudnnSetTensor4dDescriptor(p->xd, cf, t, d->n, d->c, d->h, d->w));
  CUDNN_TRY(e, cudnnSetTensor4dDescriptor(p->dxd, cf, t, d->n, d->k, dxh, dxw));
  CUDNN_TRY(e, cudnnSetTensor4dDescriptor(p->yd, f, t, d->n, d->k, p->ho, p->wo));
  CUDNN_TRY(e, cudnnSetTensor4dDescriptor(p->bd, f, t, 1, d->k, 1, 1));
  // the forward convolution k -> c whose backward data this is: filter [c, k/groups, r, s]
  CUDNN_TRY(e, cudnnSetFilter4dDescriptor(p->wd, t, cf, d->c, kg, d->r, d->s));
  CUDNN_TRY(e, cudnnSetConvolution2dDescriptor(p->cd, p->th.p, p->tw.p, d->stride_h, d->stride_w,
                                               d->dil_h, d->dil_w, CUDNN_CROSS_CORRELATION,
                                               CUDNN_DATA_FLOAT));
  CUDNN_TRY(e, cudnnSetConvolutionGroupCount(p->cd, d->groups));
  // dx and dy must be a forward convolution's input and output (tconv_dim's invariant)
  int n_, c_, h_, w_;
  CUDNN_TRY(e, cudnnGetConvolution2dForwardOutputDim(p->cd, p->dxd, p->wd, &n_, &c_, &h_, &w_));
  if (n_ != d->n || c_ != d->c || h_ != d->h || w_ != d->w)
    return err_set(e, ERR_INTERNAL,
                   "conv_transpose: the forward convolution of the %dx%d dx gives %dx%dx%dx%d, not "
                   "x's %dx%dx%dx%d",
                   dxh, dxw, n_, c_, h_, w_, d->n, d->c, d->h, d->w);
  if (!p->direct && p->th.copy > 0 && p->tw.copy > 0) {
    // y[.., i, j] = dx[.., i + crop_h, j + crop_w] for i < copy_h, j < copy_w: strided views of both
    int sx[4], sy[4];
    dense_strides(cf, d->k, dxh, dxw, sx);
    dense_strides(f, d->k, p->ho, p->wo, sy);
    int ch = (int)p->th.copy, cw = (int)p->tw.copy;
    CUDNN_TRY(e, cudnnCreateTensorDescriptor(&p->src_v));
    CUDNN_TRY(e, cudnnCreateTensorDescriptor(&p->dst_v));
    CUDNN_TRY(e, cudnnSetTensor4dDescriptorEx(p->src_v, t, d->n, d->k, ch, cw, sx[0], sx[1], sx[2], sx[3]));
    CUDNN_TRY(e, cudnnSetTensor4dDescriptorEx(p->dst_v, t, d->n, d->k, ch, cw, sy[0], sy[1], sy[2], sy[3]));
    p->src_off = (size_t)p->th.crop * sx[2] + (size_t)p->tw.crop * sx[3];
  }
  if (p->relayout) {
    // w as given is KRSC [c][r][s][k/groups]: a 4-D tensor [c, k/groups, r, s] in NHWC
    CUDNN_TRY(e, cudnnCreateTensorDescriptor(&p->x_in));
    CUDNN_TRY(e, cudnnCreateTensorDescriptor(&p->w_in));
    CUDNN_TRY(e, cudnnCreateTensorDescriptor(&p->w_out));
    CUDNN_TRY(e, cudnnSetTensor4dDescriptor(p->x_in, f, t, d->n, d->c, d->h, d->w));
    CUDNN_TRY(e, cudnnSetTensor4dDescriptor(p->w_in, f, t, d->c, kg, d->r, d->s));
    CUDNN_TRY(e, cudnnSetTensor4dDescriptor(p->w_out, CUDNN_TENSOR_NCHW, t, d->c, kg, d->r, d->s));
  }
  CUDNN_TRY(e, cudnnSetConvolutionMathType(p->cd, eng_cuconv__math(d->dtype)));
  return 0;
}

// The run itself, with candidate c (the plan's chosen one at run time).
static int tconv_enqueue(const eng_cutconv_plan *p, const tcand *c, cudnnHandle_t h,
                         cudaStream_t stream, const void *x, const void *w, const void *bias,
                         void *y, void *ws, err *e) {
  const eng_cutconv_desc *d = &p->d;
  const float one = 1.0f, zero = 0.0f;
  char *base = ws;
  const void *xin = x, *win = w;
  if (p->relayout) {
    CUDNN_TRY(e, cudnnTransformTensor(h, &one, p->x_in, x, &zero, p->xd, base));
    CUDNN_TRY(e, cudnnTransformTensor(h, &one, p->w_in, w, &zero, p->w_out, base + p->xr_bytes));
    xin = base;
    win = base + p->xr_bytes;
  }
  char *dx = p->direct ? (char *)y : base + p->xr_bytes + p->wr_bytes;
  void *cws = c->ws ? base + p->xr_bytes + p->wr_bytes + p->dx_bytes : NULL;
  // the descriptor holds the chosen math type; only plan-time trials change it
  if (c != &p->chosen) CUDNN_TRY(e, cudnnSetConvolutionMathType(p->cd, c->math));
  CUDNN_TRY(e, cudnnConvolutionBackwardData(h, &one, p->wd, win, p->xd, xin, p->cd, c->algo, cws,
                                            c->ws, &zero, p->dxd, dx));
  if (!p->direct) {
    // y is the part of dx past the smaller pad; what lies past dx is zeros
    if (p->tail) CUDA_TRY(e, cudaMemsetAsync(y, 0, tconv_y_bytes(p), stream));
    if (p->src_v)
      CUDNN_TRY(e, cudnnTransformTensor(h, &one, p->src_v, dx + p->src_off * eng_cuconv__esize(d->dtype), &zero,
                                        p->dst_v, y));
  }
  if (d->has_bias) CUDNN_TRY(e, cudnnAddTensor(h, &one, p->bd, bias, &one, p->yd, y));
  return 0;
}

// Candidates from the v7 heuristic, in its order: each usable (algorithm,
// math) pair once; non-deterministic algorithms (ALGO_0 accumulates with
// atomics) only after every deterministic one, so a plan replays the same
// bits whenever anything else runs.
static int tconv_candidates(eng_cutconv_plan *p, eng_cudnn *h, size_t cap, tcand *out, int max,
                            int *count, err *e) {
  const eng_cutconv_desc *d = &p->d;
  int n_algo = 0;
  CUDNN_TRY(e, cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h->h, &n_algo));
  if (n_algo < 1) n_algo = 1;
  cudnnConvolutionBwdDataAlgoPerf_t *perf = calloc((size_t)n_algo, sizeof *perf);
  if (!perf) return err_set(e, ERR_RESOURCE_EXHAUSTED, "conv_transpose: out of host memory");
  int got = 0;
  int rc = CUDNN_OK(e, cudnnGetConvolutionBackwardDataAlgorithm_v7(h->h, p->wd, p->xd, p->cd, p->dxd,
                                                                   n_algo, &got, perf));
  size_t fixed = p->xr_bytes + p->wr_bytes + p->dx_bytes;
  int n = 0;
  for (int pass = 0; pass < 2 && !rc; pass++)
    for (int i = 0; i < got && n < max; i++) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
      bool det = perf[i].determinism == CUDNN_DETERMINISTIC &&
                 perf[i].algo != CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
      if (det != (pass == 0)) continue;
      cudnnMathType_t math = perf[i].mathType;
      if (!eng_cuconv__cand_math(d->dtype, &math)) continue;
      bool dup = false;
      for (int j = 0; j < n; j++) dup |= out[j].algo == perf[i].algo && out[j].math == math;
      if (dup) continue;
      size_t ws = 0;
      if (cudnnSetConvolutionMathType(p->cd, math) != CUDNN_STATUS_SUCCESS) continue;
      if (cudnnGetConvolutionBackwardDataWorkspaceSize(h->h, p->wd, p->xd, p->cd, p->dxd,
                                                       perf[i].algo, &ws) != CUDNN_STATUS_SUCCESS)
        continue;
      if (perf[i].memory > ws) ws = perf[i].memory;
      if (ws + fixed > cap) continue;
      out[n++] = (tcand){.algo = perf[i].algo, .math = math, .ws = ws, .ms = 0};
    }
  free(perf);
  *count = n;
  return rc;
}

// A plan's trials (eng_cuconv__try_candidates): its candidates and borrowed buffers.
typedef struct tconv_trial {
  eng_cutconv_plan *p;
  const tcand *cands;
  cudnnHandle_t h;
  void *x, *w, *bias, *y, *ws;
} tconv_trial;

static int tconv_try(void *plan, int i, cudaStream_t s, err *e) {
  const tconv_trial *t = plan;
  return tconv_enqueue(t->p, &t->cands[i], t->h, s, t->x, t->w, t->bias, t->y, t->ws, e);
}

static void tconv_note(void *plan, int i, const char *outcome) {
  const tconv_trial *t = plan;
  const tcand *c = &t->cands[i];
  t->p->candidates++;
  eng_cuconv__log(t->p->log, sizeof t->p->log, " %s/m%d:%s", bwd_algo_name((int)c->algo), (int)c->math, outcome);
}

// Tries the candidates for the current descriptors on borrowed buffers and
// sets p->chosen. *fatal: a broken context or no memory, where trying
// another layout is pointless.
static int tconv_choose(eng_cutconv_plan *p, eng_cudnn *h, const eng_cuconv_opts *o, size_t cap,
                        bool *fatal, err *e) {
  const eng_cutconv_desc *d = &p->d;
  *fatal = false;
  size_t es = eng_cuconv__esize(d->dtype);
  size_t xb = (size_t)d->n * d->c * d->h * d->w * es;
  size_t wb = (size_t)d->c * (d->k / d->groups) * d->r * d->s * es;
  size_t yb = tconv_y_bytes(p), bb = (size_t)d->k * es;
  size_t fixed = p->xr_bytes + p->wr_bytes + p->dx_bytes;
  if (fixed > cap)
    return err_set(e, ERR_UNIMPLEMENTED,
                   "conv_transpose: the intermediate buffers (%zu bytes) exceed the workspace cap %zu",
                   fixed, cap);
  tcand cands[32];
  int n = 0;
  TRY(tconv_candidates(p, h, cap, cands, (int)(sizeof cands / sizeof cands[0]), &n, e));
  if (n == 0)
    return err_set(e, ERR_UNIMPLEMENTED,
                   "conv_transpose: cuDNN offers no algorithm within %zu workspace bytes", cap);
  size_t ws_max = 0;
  for (int i = 0; i < n; i++)
    if (cands[i].ws > ws_max) ws_max = cands[i].ws;
  void *bx = NULL, *bw = NULL, *by = NULL, *bb_ = NULL, *bws = NULL;
  cudaStream_t s = NULL;
  cudaEvent_t ev0 = NULL, ev1 = NULL;
  bool stream_set = false;
  int rc = 0;
#define STEP(call)                                 \
  do {                                             \
    if ((rc = CUDA_OK(e, call)) != 0) goto out; \
  } while (0)
  STEP(cudaMalloc(&bx, xb));
  STEP(cudaMalloc(&bw, wb));
  STEP(cudaMalloc(&by, yb));
  if (d->has_bias) STEP(cudaMalloc(&bb_, bb));
  if (fixed + ws_max) STEP(cudaMalloc(&bws, fixed + ws_max));
  STEP(cudaMemset(bx, 0, xb));
  STEP(cudaMemset(bw, 0, wb));
  if (bb_) STEP(cudaMemset(bb_, 0, bb));
  STEP(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  STEP(cudaEventCreate(&ev0));
  STEP(cudaEventCreate(&ev1));
  if ((rc = CUDNN_OK(e, cudnnSetStream(h->h, s))) != 0) goto out;
  stream_set = true;
#undef STEP

  tconv_trial tr = {.p = p, .cands = cands, .h = h->h, .x = bx, .w = bw, .bias = bb_, .y = by, .ws = bws};
  eng_cuconv__trials trials = {.n = n, .search = o->search, .run = tconv_try, .note = tconv_note, .plan = &tr,
                               .s = s, .ev0 = ev0, .ev1 = ev1, .log = p->log, .log_cap = sizeof p->log};
  int best = -1;
  float best_ms = 0;
  err first = {0};
  if ((rc = eng_cuconv__try_candidates(&trials, &best, &best_ms, &first, e)) != 0) {
    *fatal = true;  // a broken context or a failed CUDA call
    goto out;
  }
  if (best < 0) {
    rc = err_set(e, ERR_UNIMPLEMENTED,
                 "conv_transpose: none of %d cuDNN candidates runs this shape; first: %s", n,
                 first.msg);
    goto out;
  }
  p->chosen = cands[best];
  p->chosen.ms = best_ms;
  if (first.code) eng_cuconv__log(p->log, sizeof p->log, "; first refusal: %s", first.msg);
  rc = CUDNN_OK(e, cudnnSetConvolutionMathType(p->cd, p->chosen.math));
out:
  if (rc && rc != ERR_UNIMPLEMENTED) *fatal = true;
  if (stream_set) (void)cudnnSetStream(h->h, NULL);
  if (s) (void)cudaStreamSynchronize(s);
  cudaFree(bx), cudaFree(bw), cudaFree(by), cudaFree(bb_), cudaFree(bws);
  if (ev0) cudaEventDestroy(ev0);
  if (ev1) cudaEventDestroy(ev1);
  if (s) cudaStreamDestroy(s);
  (void)cudaGetLastError();
  return rc;
}

int eng_cutconv_plan_create(eng_cutconv_plan **out, eng_cudnn *h, const eng_cutconv_desc *desc,
                            const eng_cuconv_opts *opts, err *e) {
  if (!out || !h)
    return err_set(e, ERR_INVALID_ARGUMENT, "conv_transpose: NULL %s", !out ? "out" : "handle");
  *out = NULL;
  int ho = 0, wo = 0;  // set by the validate call on success; GCC -O3 cannot see that
  TRY(tconv_validate(desc, &ho, &wo, e));
  eng_cuconv_opts o;
  size_t cap;
  TRY(eng_cuconv__opts("conv_transpose", opts, &o, &cap, e));
  eng_cutconv_plan *p = calloc(1, sizeof *p);
  if (!p) return err_set(e, ERR_RESOURCE_EXHAUSTED, "conv_transpose: out of host memory");
  p->d = tconv_norm(desc);
  p->ho = ho;
  p->wo = wo;
  tconv_dims(&p->d, &p->th, &p->tw);
  bool fatal = false;
  err first = {0};
  int rc = tconv_build(p, &first);
  if (!rc) rc = tconv_choose(p, h, &o, cap, &fatal, &first);
  if (rc && !fatal && p->d.layout == ENG_CUCONV_NHWC) {
    // no NHWC candidate: compute NCHW between cudnnTransformTensor passes
    eng_cuconv__log(p->log, sizeof p->log, "; NHWC refused (%s): NCHW with transforms:", first.msg);
    tconv_free_desc(p);
    p->relayout = true;
    rc = tconv_build(p, e);
    if (!rc) rc = tconv_choose(p, h, &o, cap, &fatal, e);
  } else if (rc && e) {
    *e = first;
  }
  if (rc) {
    eng_cutconv_plan_destroy(p);
    return rc;
  }
  *out = p;
  return 0;
}

int eng_cutconv_run(const eng_cutconv_plan *p, eng_cudnn *h, cudaStream_t stream, const void *x,
                    const void *w, const void *bias, void *y, void *workspace,
                    size_t workspace_bytes, err *e) {
  if (!p || !h || !x || !w || !y)
    return err_set(e, ERR_INVALID_ARGUMENT, "conv_transpose: NULL %s",
                   !p ? "plan" : !h ? "handle" : !x ? "x" : !w ? "w" : "y");
  if (p->d.has_bias != (bias != NULL))
    return err_set(e, ERR_INVALID_ARGUMENT, "conv_transpose: the plan %s a bias",
                   p->d.has_bias ? "takes" : "takes no");
  TRY(eng_cuconv__check_ws("conv_transpose", eng_cutconv_plan_workspace(p), workspace, workspace_bytes, e));
  CUDNN_TRY(e, cudnnSetStream(h->h, stream));
  return tconv_enqueue(p, &p->chosen, h->h, stream, x, w, bias, y, workspace, e);
}

#else  // no cuDNN in this build: the GPU entry points say so

struct eng_cutconv_plan {
  eng_cutconv_desc d;
};

int eng_cutconv_plan_create(eng_cutconv_plan **out, eng_cudnn *h, const eng_cutconv_desc *d,
                            const eng_cuconv_opts *opts, err *e) {
  (void)h, (void)d, (void)opts;
  if (out) *out = NULL;
  return NO_CUDNN(e);
}
void eng_cutconv_plan_destroy(eng_cutconv_plan *p) { (void)p; }
size_t eng_cutconv_plan_workspace(const eng_cutconv_plan *p) {
  (void)p;
  return 0;
}
void eng_cutconv_plan_info(const eng_cutconv_plan *p, eng_cutconv_info *info) {
  (void)p;
  memset(info, 0, sizeof *info);
  info->log = "";
}
const eng_cutconv_desc *eng_cutconv_plan_desc(const eng_cutconv_plan *p) { return &p->d; }
int eng_cutconv_run(const eng_cutconv_plan *p, eng_cudnn *h, cudaStream_t stream, const void *x,
                    const void *w, const void *bias, void *y, void *workspace,
                    size_t workspace_bytes, err *e) {
  (void)p, (void)h, (void)stream, (void)x, (void)w, (void)bias, (void)y, (void)workspace,
      (void)workspace_bytes;
  return NO_CUDNN(e);
}

#endif
