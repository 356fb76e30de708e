// engine/ops/conv/conv_cuda.c: the conv op family (engine/ops/conv/conv.h) on the CUDA plan,
// through cuDNN (cuda_conv.h): Conv (1-D as H = 1, and 2-D; groups,
// depthwise, dilations, strides, asymmetric pads) with its bias and a fused
// residual Add and activation; ConvTranspose (the same geometry plus
// output_padding and output_shape, with its bias) as cuDNN's backward-data
// convolution; and MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool.
// Registered into the CUDA plan through engine/ops/families.h.
//
// Layouts: the plan's layout pass (plan_cuda_layout.c) runs a node NHWC
// (cuda_ctx.nhwc) when tensor cores do the work; its descriptors then say
// NHWC and a Conv or ConvTranspose reads KRSC weights, transposed once on
// the device from the plan's constant (Conv's OIHW and ConvTranspose's
// [C_in, C_out/group, kH, kW] are both KCRS of what cuDNN computes, already
// in the storage type) the first time the node runs NHWC. Only constant
// weights can run NHWC. A Conv leads into NHWC; a ConvTranspose, like the
// pools, follows its input.
//
// Algorithms: cuDNN's first working heuristic pick, unless cuda_ctx.conv_timed
// asks for each candidate to be timed and the fastest kept
// (ENG_CUCONV_SEARCH_EXHAUSTIVE, onnxruntime's default). Timed is not our
// default: on ResNet-50 (H100, 2026-11-25) its picks ran 1.5-5x slower end
// to end at batch 1 and 8 than the heuristic's (tests/bench/RESULTS.md).
//
// Depthwise Convs (groups == C == K) that run NHWC skip cuDNN: our own
// kernel (kernels/conv/k_dwconv.cu) computes them with the epilogue fused. For
// NHWC FP16 cuDNN's heuristic pick, its grouped direct kernel, was two thirds
// of MobileNetV3-Large's device time at batch 32 (ncu, H100, 2026-11-25).
//
// 1x1 Convs on 1x1 inputs (a squeeze-excitation block's two, on a global
// pool's output), and 1x1 stride-1 Convs on NHWC activations, skip cuDNN
// too: they are plain products, run through the slot's cuBLASLt
// (cuda_gemm.h) with bias, Relu and a residual in its epilogue. See is_gemm.
//
// A GlobalAveragePool is a mean over a contiguous run of axes, so
// kernels/reduce/k_reduce.cu computes it rather than cuDNN's pooling. See is_mean.
//
// Per node: the cuDNN plans, one per shape signature (input dims, storage
// type, fused epilogue), made by prepare when a shape is first seen (the
// algorithm choice runs convolutions, so never inside a graph capture) and
// kept for the plan's life: a graph captured with one may replay it at any
// time. Per slot (cuda_ctx): the cuDNN handle and the workspace, sized by the
// plan to the largest need that prepare reports.
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <nvtx3/nvToolsExt.h>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_conv.h"
#include "engine/ops/conv/conv.h"
#include "engine/cuda/plan_cuda_internal.h"

// One shape's plan; the descriptor is the key (built zeroed, compared whole).
typedef struct shape_plan {
  eng_cuconv_desc cd;
  eng_cutconv_desc td;
  eng_cupool_desc pd;
  eng_cuconv_plan *conv;
  eng_cutconv_plan *tconv;
  eng_cupool_plan *pool;
  bool dw;  // depthwise NHWC Conv: k_dwconv_cuda, no cuDNN plan
  bool gemm;  // a 1x1 Conv that is a product: a cuBLASLt GEMM (is_gemm), no cuDNN plan
  bool mean;  // GlobalAveragePool: k_reduce_cuda's mean (is_mean), no cuDNN plan
} shape_plan;

typedef struct conv_node {
  eng_conv_kind kind;
  bool w_const;   // the weights are a constant: they may be packed KRSC (Conv, ConvTranspose)
  void *w_nhwc;   // KRSC copy of the weights (device, shared: cuda_weights.h), found at the first NHWC prepare

  shape_plan *plans;
  int n, cap;
  const shape_plan *cur;  // this submit's (prepare), read by run in the same submit
  float act_alpha, act_beta;  // a fusable HardSigmoid's parameters (conv_fuse's act node)
} conv_node;

static bool has_weights(eng_conv_kind k) { return k == ENG_CONV || k == ENG_CONV_TRANSPOSE; }
static bool is_pool(eng_conv_kind k) { return !has_weights(k); }

static int to_int(int64_t v, const char *what, err *e, int *dst) {
  if (v < 0 || v > INT_MAX)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s %lld exceeds cuDNN's int range", what, (long long)v);
  *dst = (int)v;
  return 0;
}

static eng_cuconv_dtype storage(const cuda_ctx *c, const eng_tensor *x) {
  if (x->dt == DT_FP16) return ENG_CUCONV_FP16;
  return c->gemm32 == ENG_GEMM_FP32_TF32 ? ENG_CUCONV_FP32_TF32 : ENG_CUCONV_FP32;
}

// This run's descriptor (zeroed first: it is compared as bytes). 1-D
// windows become 2-D ones of height 1.
static int make_desc(const cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                     const eng_tensor *out, shape_plan *d, err *e) {
  const eng_conv_attrs *a = &p->conv;
  memset(d, 0, sizeof *d);
  k_window g;
  TRY(eng_conv_window(a, &in[0], has_weights(a->kind) ? &in[1] : NULL, &g, e));
  if (g.nsp > 2)
    return err_set(e, ERR_UNIMPLEMENTED, "%d-D windows are not supported on CUDA", g.nsp);
  int t = g.nsp == 2 ? 0 : -1, l = g.nsp - 1;  // the height dim (or none), the width dim
  int n = 0, ch = 0, h = 1, w = 0, kh = 1, kw = 0, pt = 0, pb = 0, pl = 0, pr = 0, sh = 1, sw = 1,
      dh = 1, dw = 1, oph = 0, opw = 0;
  TRY(to_int(g.n, "batch", e, &n));
  TRY(to_int(g.c, "channels", e, &ch));
  TRY(to_int(g.x[l], "width", e, &w));
  TRY(to_int(g.k[l], "kernel width", e, &kw));
  TRY(to_int(g.pad_l[l], "pad", e, &pl));
  TRY(to_int(g.pad_r[l], "pad", e, &pr));
  TRY(to_int(g.stride[l], "stride", e, &sw));
  TRY(to_int(g.dil[l], "dilation", e, &dw));
  if (a->kind == ENG_CONV_TRANSPOSE) TRY(to_int(a->out_pad[l], "output_padding", e, &opw));
  if (t == 0) {
    TRY(to_int(g.x[0], "height", e, &h));
    TRY(to_int(g.k[0], "kernel height", e, &kh));
    TRY(to_int(g.pad_l[0], "pad", e, &pt));
    TRY(to_int(g.pad_r[0], "pad", e, &pb));
    TRY(to_int(g.stride[0], "stride", e, &sh));
    TRY(to_int(g.dil[0], "dilation", e, &dh));
    if (a->kind == ENG_CONV_TRANSPOSE) TRY(to_int(a->out_pad[0], "output_padding", e, &oph));
  }
  eng_cuconv_dtype dt = storage(c, &in[0]);
  int ho, wo;
  if (a->kind == ENG_CONV) {
    eng_cuconv_desc *cd = &d->cd;
    cd->n = n, cd->c = ch, cd->h = h, cd->w = w;
    TRY(to_int(g.m, "output channels", e, &cd->k));
    TRY(to_int(g.group, "group", e, &cd->groups));
    cd->r = kh, cd->s = kw;
    cd->pad_top = pt, cd->pad_left = pl, cd->pad_bottom = pb, cd->pad_right = pr;
    cd->stride_h = sh, cd->stride_w = sw, cd->dil_h = dh, cd->dil_w = dw;
    cd->dtype = dt;
    cd->layout = c->nhwc ? ENG_CUCONV_NHWC : ENG_CUCONV_NCHW;
    cd->has_bias = n_in > 2 && in[2].dt != DT_INVALID;
    cd->has_z = c->z != NULL;
    cd->act = (eng_cuconv_act)c->act;
    if (cd->act == ENG_CUCONV_ACT_HARD_SIGMOID) {
      const conv_node *s = c->node;
      cd->act_alpha = s->act_alpha, cd->act_beta = s->act_beta;
    }
    if (n == 0) return 0;
    TRY(eng_cuconv_out_dims(cd, &ho, &wo, e));
  } else if (a->kind == ENG_CONV_TRANSPOSE) {
    // eng_conv_window turned output_shape and auto_pad into pads (ONNX's
    // rule, output_padding included): the descriptor needs only those
    eng_cutconv_desc *td = &d->td;
    td->n = n, td->c = ch, td->h = h, td->w = w;
    TRY(to_int(g.m, "output channels", e, &td->k));
    TRY(to_int(g.group, "group", e, &td->groups));
    td->r = kh, td->s = kw;
    td->pad_top = pt, td->pad_left = pl, td->pad_bottom = pb, td->pad_right = pr;
    td->out_pad_h = oph, td->out_pad_w = opw;
    td->stride_h = sh, td->stride_w = sw, td->dil_h = dh, td->dil_w = dw;
    td->dtype = dt;
    td->layout = c->nhwc ? ENG_CUCONV_NHWC : ENG_CUCONV_NCHW;
    td->has_bias = n_in > 2 && in[2].dt != DT_INVALID;
    if (n == 0) return 0;
    TRY(eng_cutconv_out_dims(td, &ho, &wo, e));
  } else {
    eng_cupool_desc *pd = &d->pd;
    pd->n = n, pd->c = ch, pd->h = h, pd->w = w;
    pd->kh = kh, pd->kw = kw;
    pd->pad_top = pt, pd->pad_left = pl, pd->pad_bottom = pb, pd->pad_right = pr;
    pd->stride_h = sh, pd->stride_w = sw;
    pd->ceil_mode = a->ceil_mode != 0;
    pd->global = a->kind == ENG_POOL_GLOBAL_AVG || a->kind == ENG_POOL_GLOBAL_MAX;
    pd->mode = a->kind == ENG_POOL_MAX || a->kind == ENG_POOL_GLOBAL_MAX ? ENG_CUPOOL_MAX
               : a->count_include_pad && !pd->global ? ENG_CUPOOL_AVG_INCLUDE_PAD
                                                     : ENG_CUPOOL_AVG_EXCLUDE_PAD;
    pd->dtype = dt == ENG_CUCONV_FP32_TF32 ? ENG_CUCONV_FP32 : dt;
    pd->layout = c->nhwc ? ENG_CUCONV_NHWC : ENG_CUCONV_NCHW;
    if (n == 0) return 0;
    TRY(eng_cupool_out_dims(pd, &ho, &wo, e));
  }
  // the ONNX geometry and cuDNN's must agree on the output the planner laid out
  int64_t want_h = t == 0 ? out[0].dims[2] : 1, want_w = out[0].dims[2 + l];
  if (ho != want_h || wo != want_w)
    return err_set(e, ERR_INTERNAL, "cuDNN's output %dx%d differs from the planned %lldx%lld", ho,
                   wo, (long long)want_h, (long long)want_w);
  return 0;
}

// --- hooks

static void conv_fuse(const eng_plan *pl, size_t i, cuda_fusion *f);

static int conv_init(const eng_plan *pl, size_t i, int half, void **state, err *e) {
  (void)half;
  const eng_node *n = eng_graph_node(pl->g, i);
  const eng_conv_attrs *a = &pl->params[i].conv;
  if (!eng_cuconv_available())
    return err_set(e, ERR_UNIMPLEMENTED,
                   "%s on a GPU instance needs cuDNN 9, and this build has none: rebuild with "
                   "cuDNN (cmake -DINFERD_CUDNN=ON -DCUDNN_ROOT=<folder with include/cudnn.h and "
                   "lib/libcudnn.so.9, e.g. site-packages/nvidia/cudnn>) or use a KIND_CPU instance",
                   n->op_type);
  if (a->nsp > 2)
    return err_set(e, ERR_UNIMPLEMENTED, "%d-D %s is not supported on GPU instances yet", a->nsp,
                   n->op_type);
  if (is_pool(a->kind))
    for (int d = 0; d < a->nsp; d++)
      if (a->dils[d] != 1)
        return err_set(e, ERR_UNIMPLEMENTED,
                       "dilated pooling is not supported on GPU instances (cuDNN has none)");
  conv_node *s = calloc(1, sizeof *s);
  if (!s) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  s->kind = a->kind;
  s->w_const = has_weights(a->kind) && n->n_in > 1 && eng_cuda__is_const(pl->g, n->in[1]);
  // the parameters of the activation conv_fuse may fuse (the plan passes on only its code)
  cuda_fusion f = {.bias_node = -1, .act_node = -1, .bias_value = -1, .z_value = -1,
                   .mid_value = -1, .add_value = -1, .res_node = -1, .res_z = -1, .res_value = -1,
                   .pro_node = -1, .pro_value = -1};
  conv_fuse(pl, i, &f);
  if (f.act == ENG_CUCONV_ACT_HARD_SIGMOID) {
    s->act_alpha = pl->params[f.act_node].alpha;
    s->act_beta = pl->params[f.act_node].beta;
  }
  *state = s;
  return 0;
}

static void conv_destroy(void *state) {
  conv_node *s = state;
  if (!s) return;
  for (int i = 0; i < s->n; i++) {
    eng_cuconv_plan_destroy(s->plans[i].conv);
    eng_cutconv_plan_destroy(s->plans[i].tconv);
    eng_cupool_plan_destroy(s->plans[i].pool);
  }
  free(s->plans);
  free(s);  // w_nhwc belongs to the device's weights
}

// NHWC needs 2-D windows (4-D tensors) and, for a Conv or ConvTranspose,
// weights it can pack once. A global pool has no window attributes (nsp
// stays 0 when parsing): the caller has checked its input is 4-D, which is
// all it needs. Run NCHW, it cost every squeeze-excitation block a
// transpose of its NHWC input (9 per MobileNetV3-Large forward).
static bool conv_nhwc(const eng_plan *pl, size_t i, const void *state) {
  const conv_node *s = state;
  const eng_conv_attrs *a = &pl->params[i].conv;
  bool global = a->kind == ENG_POOL_GLOBAL_AVG || a->kind == ENG_POOL_GLOBAL_MAX;
  return (a->nsp == 2 || global) && s && (!has_weights(s->kind) || s->w_const);
}

// The KRSC copy of w on the device, once per device for every plan of the
// model (a derived copy in the device's weights, engine/cuda/cuda_weights.h):
// Conv's [k, c/groups, r, s] and ConvTranspose's [c, k/groups, r, s] alike
// (cuDNN's filter is KCRS in both: for ConvTranspose, that of the forward
// convolution it runs backwards), so dims 1 go innermost.
enum { DERIVED_KRSC = 1 };

typedef struct pack_ctx {
  const eng_tensor *w;
  cudaStream_t stream;
} pack_ctx;

static int make_krsc(void *dst, const void *src, void *ctx, err *e) {
  const pack_ctx *pc = ctx;
  static const int krsc[4] = {0, 2, 3, 1};
  TRY(k_transpose_cuda(dst, src, dtype_size(pc->w->dt), 4, pc->w->dims, krsc, pc->stream, e));
  return CUDA_OK(e, cudaStreamSynchronize(pc->stream));
}

static int pack_nhwc(conv_node *s, cuda_ctx *c, const eng_tensor *w, cuda_prep *r, err *e) {
  if (s->w_nhwc) return 0;
  if (w->ndims != 4) return err_set(e, ERR_INTERNAL, "NHWC conv with %d-D weights", w->ndims);
  if (!c->weights) return err_set(e, ERR_INTERNAL, "NHWC conv without the device's weights");
  pack_ctx pc = {.w = w, .stream = c->stream};
  int made = 0;
  TRY(eng_cuda_wset_derived(c->weights, w->data, DERIVED_KRSC, w->bytes, make_krsc, &pc, &s->w_nhwc, &made, e));
  r->made += made;
  return 0;
}

// k_dwconv_cuda takes eng_cuconv_act's codes as they are.
_Static_assert((int)K_DW_ACT_NONE == (int)ENG_CUCONV_ACT_NONE &&
                   (int)K_DW_ACT_RELU == (int)ENG_CUCONV_ACT_RELU &&
                   (int)K_DW_ACT_CLIP == (int)ENG_CUCONV_ACT_CLIP &&
                   (int)K_DW_ACT_SIGMOID == (int)ENG_CUCONV_ACT_SIGMOID &&
                   (int)K_DW_ACT_TANH == (int)ENG_CUCONV_ACT_TANH &&
                   (int)K_DW_ACT_SWISH == (int)ENG_CUCONV_ACT_SWISH &&
                   (int)K_DW_ACT_HARD_SIGMOID == (int)ENG_CUCONV_ACT_HARD_SIGMOID &&
                   (int)K_DW_ACT_HARD_SWISH == (int)ENG_CUCONV_ACT_HARD_SWISH,
               "k_dw_act and eng_cuconv_act disagree");

// A Conv that k_dwconv_cuda computes: depthwise (groups == C == K), NHWC.
// 1-D windows came in as 2-D of height 1, which the kernel takes as well.
static bool is_dw(eng_conv_kind kind, const eng_cuconv_desc *cd) {
  return kind == ENG_CONV && cd->layout == ENG_CUCONV_NHWC && cd->groups > 1 &&
         cd->groups == cd->c && cd->k == cd->c;
}

// in_act: a skipped activation node's, applied to x as it is loaded (conv_fuse's prologue).
static int run_dw(const eng_cuconv_desc *cd, int in_act, cudaStream_t st, const void *x,
                  const void *w, const void *bias, const void *z, void *y, err *e) {
  k_dwconv_args a = {0};
  int ho, wo;
  TRY(eng_cuconv_out_dims(cd, &ho, &wo, e));
  a.n = cd->n, a.h = cd->h, a.w = cd->w, a.c = cd->c, a.oh = ho, a.ow = wo;
  a.r = cd->r, a.s = cd->s, a.pad_top = cd->pad_top, a.pad_left = cd->pad_left;
  // zero strides and dilations read as 1 (cuda_conv.h)
  a.stride_h = cd->stride_h ? cd->stride_h : 1, a.stride_w = cd->stride_w ? cd->stride_w : 1;
  a.dil_h = cd->dil_h ? cd->dil_h : 1, a.dil_w = cd->dil_w ? cd->dil_w : 1;
  a.act = (k_dw_act)cd->act;
  a.clip_max = cd->clip_max;
  a.alpha = cd->act_alpha, a.beta = cd->act_beta;
  a.in_act = (k_dw_act)in_act;
  return k_dwconv_cuda(y, x, w, bias, z, cd->dtype == ENG_CUCONV_FP16 ? K_F16 : K_F32, &a, st, e);
}

// --- 1x1 Convs as GEMMs

// A Conv that is a plain product: a 1x1 kernel, no padding, one group, and
// either a 1x1 input (strides and dilations cannot matter with one pixel and
// one tap) or, where the node runs NHWC, stride 1 over any image. Then
// Y[M, K] = X[M, C] x W[K, C]^T (+ bias) with M = N*H*W: NHWC activations
// are that [M, C] matrix as they lie ([N, C, 1, 1] ones in either layout,
// plan_cuda_layout.c's "neutral"), and W is the plan's [K, C, 1, 1] constant
// as it is, in either layout. Why: for a squeeze-excitation block's two
// convolutions (on a global pool's output) cuDNN's heuristic picks a
// fallback without tensor cores, implicit_convolve_sgemm: ~10% of
// MobileNetV3-Large's device time at batch 32 FP16 (ncu, H100, ~44 us a
// launch, two per block); and in FP32, NHWC, cuDNN's kernels for the
// spatial 1x1 Convs are far slower than an SGEMM (with them MobileNetV3-Large
// and ResNet-50 FP32 NHWC took 1.35-1.45x as long at batch 1-128; H200,
// bench_engine, 2026-11-26). cuBLASLt's
// epilogue carries the bias, Relu and a residual (its C operand, added
// before the activation as cuDNN does); Sigmoid, Tanh and whatever else
// conv_fuse gives it cannot, so such a Conv stays on cuDNN: one node, all on
// one path, no extra kernel. Only constant weights, as for NHWC: computed
// ones never meet these models. cuda_ctx.conv_gemm off keeps the spatial
// ones on cuDNN (eng_cuda_opts.no_conv_gemm, to compare).
static bool is_gemm(const cuda_ctx *c, const conv_node *s, const eng_cuconv_desc *cd) {
  bool one_pixel = cd->h == 1 && cd->w == 1;
  bool nhwc_rows = c->conv_gemm && cd->layout == ENG_CUCONV_NHWC && cd->stride_h <= 1 && cd->stride_w <= 1;
  return s->kind == ENG_CONV && s->w_const && (one_pixel || nhwc_rows) && cd->r == 1 &&
         cd->s == 1 && cd->pad_top == 0 && cd->pad_left == 0 && cd->pad_bottom == 0 &&
         cd->pad_right == 0 && cd->groups == 1 && cd->c >= 1 && cd->k >= 1 &&
         (cd->act == ENG_CUCONV_ACT_NONE || cd->act == ENG_CUCONV_ACT_RELU);
}

// The product on the slot's cuBLASLt: A = X [n*h*w, c], B = W [k, c]
// transposed, C = Y [n*h*w, k]; a fused residual rides in cuBLASLt's C.
// TF32 as the plan's Gemm/MatMul (the descriptor's storage type says which).
static int run_gemm(cuda_ctx *c, const eng_cuconv_desc *cd, const void *x, const void *w,
                    const void *bias, void *y, err *e) {
  bool relu = cd->act == ENG_CUCONV_ACT_RELU;
  eng_gemm_epilogue epi = bias ? (relu ? ENG_GEMM_EPI_BIAS_RELU : ENG_GEMM_EPI_BIAS)
                               : (relu ? ENG_GEMM_EPI_RELU : ENG_GEMM_EPI_NONE);
  eng_gemm_dtype dt = cd->dtype == ENG_CUCONV_FP16        ? ENG_GEMM_FP16
                      : cd->dtype == ENG_CUCONV_FP32_TF32 ? ENG_GEMM_FP32_TF32
                                                          : ENG_GEMM_FP32;
  int64_t rows = (int64_t)cd->n * cd->h * cd->w;
  if (rows > INT_MAX) return err_set(e, ERR_INVALID_ARGUMENT, "1x1 Conv of %lld pixels", (long long)rows);
  return eng_gemm_lt_run_res(c->gemm, y, x, w, bias, c->z, (int)rows, cd->k, cd->c, false, true, epi,
                             dt, c->stream, e);
}

// --- global average pools as reductions

// A GlobalAveragePool: NHWC it is [N, H*W, C] -> [N, C], NCHW [N*C, H*W] ->
// [N*C], both k_reduce_cuda's mean (FP32 sums, for FP16 too). cuDNN's
// pooling_fw_4d took ~4% of MobileNetV3-Large's device time at batch 32
// FP16 (ncu, H100, nine pools a forward); the reduction reads the tensor
// once with a block of 1024 threads per 32 channels of an image (NHWC,
// rows of 64 and more: the large pools of the early blocks, where one
// thread per output would leave the GPU idle) or a warp per channel
// (NCHW). Faster on paper; not yet timed side by side on the device.
static bool is_mean(eng_conv_kind kind, const eng_cupool_desc *pd) {
  return kind == ENG_POOL_GLOBAL_AVG && pd->global && pd->n >= 1 && pd->c >= 1 && pd->h >= 1 &&
         pd->w >= 1;
}

static int run_mean(const eng_cupool_desc *pd, cudaStream_t st, const void *x, void *y, err *e) {
  size_t n = (size_t)pd->n, c = (size_t)pd->c, hw = (size_t)pd->h * (size_t)pd->w;
  k_elem et = pd->dtype == ENG_CUCONV_FP16 ? K_F16 : K_F32;
  return pd->layout == ENG_CUCONV_NHWC ? k_reduce_cuda(y, x, et, n, hw, c, K_RMEAN, st, e)
                                       : k_reduce_cuda(y, x, et, n * c, hw, 1, K_RMEAN, st, e);
}

static eng_cuconv_act act_of(const char *op_type) {
  if (strcmp(op_type, "Relu") == 0) return ENG_CUCONV_ACT_RELU;
  if (strcmp(op_type, "Sigmoid") == 0) return ENG_CUCONV_ACT_SIGMOID;
  if (strcmp(op_type, "Tanh") == 0) return ENG_CUCONV_ACT_TANH;
  if (strcmp(op_type, "HardSigmoid") == 0) return ENG_CUCONV_ACT_HARD_SIGMOID;
  if (strcmp(op_type, "HardSwish") == 0) return ENG_CUCONV_ACT_HARD_SWISH;
  return ENG_CUCONV_ACT_NONE;
}

// Whether Conv node i is depthwise by its constant weights ([C, 1, kH, kW]
// with group == C, so C == K == group): the Convs that run on k_dwconv_cuda
// whenever they run NHWC. The layout is settled per run, after fusing.
static bool dw_shaped(const eng_plan *pl, size_t i) {
  const eng_node *n = eng_graph_node(pl->g, i);
  if (n->n_in < 2 || !eng_cuda__is_const(pl->g, n->in[1])) return false;
  const eng_value *w = eng_graph_value(pl->g, (size_t)n->in[1]);
  int64_t g = pl->params[i].conv.group;
  return w->ndims >= 3 && g > 1 && w->dims[0] == g && w->dims[1] == 1;
}

// The node that computes value v, or -1 (an input or a constant).
static int producer(const eng_plan *pl, int v) {
  for (size_t k = 0; k < pl->n_nodes; k++) {
    const eng_node *n = eng_graph_node(pl->g, k);
    for (int o = 0; o < n->n_out; o++)
      if (n->out[o] == v) return (int)k;
  }
  return -1;
}

// Conv -> [Add(residual of the same shape)] -> [activation], each
// intermediate read by the next node alone and no graph output
// (eng_cuda__sole_consumer). The residual's shape and the buffers are
// checked per run (plan_cuda_fuse.c eng_cuda__settle_fusions). Relu, Sigmoid and Tanh fuse
// after any Conv. HardSigmoid and HardSwish fuse after a depthwise Conv
// only: the depthwise kernel computes them for free, while cuDNN has no
// mode for them and runs our unary kernel after it (cuda_conv.h), the pass
// the node would cost anyway; that fallback keeps a depthwise Conv that
// runs NCHW right. A 1x1 Conv's HardSwish stays a node of its own, and
// becomes the depthwise Conv's prologue when it feeds one alone
// (MobileNetV3's expand Conv -> HardSwish -> depthwise Conv): the kernel
// applies it as it loads its input, and the plan skips the node where the
// depthwise Conv runs NHWC (plan_cuda_fuse.c eng_cuda__settle_prologues).
// Off: measured slower. MobileNetV3-Large FP16 on the H100 (bench_engine,
// one call, 2026-11-25, us per batch at 1/32/128, pipelined): 410/2431/9756
// with the prologue on the tiled kernel, 288/1416/4675 without it; the
// expand Conv's HardSwish as its own pass costs less than recomputing it at
// every one of the depthwise window's 9 or 25 loads of each input element.
// The plan and kernel support stay (test_k_cuda_dwconv checks in_act) for a
// kernel that stages its input tile once.
static const bool dw_prologue = false;

static void conv_fuse(const eng_plan *pl, size_t i, cuda_fusion *f) {
  const eng_graph *g = pl->g;
  const eng_node *n = eng_graph_node(g, i);
  if (pl->params[i].conv.kind != ENG_CONV || n->n_out < 1 || n->out[0] < 0) return;
  int h = dw_prologue && n->n_in > 0 && n->in[0] >= 0 && dw_shaped(pl, i) &&
                  eng_cuda__sole_consumer(g, pl->n_nodes, n->in[0]) == (int)i
              ? producer(pl, n->in[0])
              : -1;
  if (h >= 0 && strcmp(eng_graph_node(g, (size_t)h)->op_type, "HardSwish") == 0 &&
      eng_graph_node(g, (size_t)h)->in[0] >= 0) {
    f->pro_node = h;
    f->pro_value = eng_graph_node(g, (size_t)h)->in[0];
    f->pro_act = ENG_CUCONV_ACT_HARD_SWISH;
  }
  int v = n->out[0];
  int j = eng_cuda__sole_consumer(g, pl->n_nodes, v);
  if (j < 0) return;
  const eng_node *nj = eng_graph_node(g, (size_t)j);
  f->mid_value = v;
  int z = nj->n_in == 2 && nj->in[0] >= 0 && nj->in[1] >= 0 ? (nj->in[0] == v ? nj->in[1] : nj->in[0]) : -1;
  if (strcmp(nj->op_type, "Add") == 0 && z >= 0 && eng_cuda__made_before(pl, z, i)) {
    f->bias_node = j;
    f->z_value = z;
    f->add_value = nj->out[0];
    v = nj->out[0];
    j = eng_cuda__sole_consumer(g, pl->n_nodes, v);
    if (j < 0) return;
    nj = eng_graph_node(g, (size_t)j);
  }
  eng_cuconv_act act = act_of(nj->op_type);
  bool hard = act == ENG_CUCONV_ACT_HARD_SIGMOID || act == ENG_CUCONV_ACT_HARD_SWISH;
  if (act != ENG_CUCONV_ACT_NONE && (!hard || dw_shaped(pl, i))) {
    f->act = (int)act;
    f->act_node = j;
  }
}

// Room for one more shape plan in s->plans (grown by doubling).
static int room_for_plan(conv_node *s, err *e) {
  if (s->n < s->cap) return 0;
  int cap = s->cap ? 2 * s->cap : 4;
  shape_plan *np = realloc(s->plans, (size_t)cap * sizeof *np);
  if (!np) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  s->plans = np;
  s->cap = cap;
  return 0;
}

static int conv_prepare(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                        const eng_tensor *out, int n_out, cuda_prep *r, err *e) {
  (void)n_out;
  conv_node *s = c->node;
  s->cur = NULL;
  shape_plan d;
  TRY(make_desc(c, p, in, n_in, out, &d, e));
  if (in[0].dims[0] == 0) return 0;
  if (has_weights(s->kind) && c->nhwc && !is_gemm(c, s, &d.cd)) {
    if (!s->w_const) return err_set(e, ERR_INTERNAL, "NHWC asked of a Conv with computed weights");
    TRY(pack_nhwc(s, c, &in[1], r, e));
  }
  for (int i = 0; i < s->n; i++)
    if (memcmp(&s->plans[i].cd, &d.cd, sizeof d.cd) == 0 &&
        memcmp(&s->plans[i].td, &d.td, sizeof d.td) == 0 &&
        memcmp(&s->plans[i].pd, &d.pd, sizeof d.pd) == 0) {
      s->cur = &s->plans[i];
      break;
    }
  if (!s->cur && is_gemm(c, s, &d.cd)) {
    // cuBLASLt picks its algorithm at the first run and caches it per shape (cuda_gemm.c)
    TRY(room_for_plan(s, e));
    d.gemm = true;
    s->plans[s->n] = d;
    s->cur = &s->plans[s->n++];
  }
  if (!s->cur && is_mean(s->kind, &d.pd)) {
    TRY(room_for_plan(s, e));
    d.mean = true;
    s->plans[s->n] = d;
    s->cur = &s->plans[s->n++];
  }
  if (!s->cur && is_dw(s->kind, &d.cd)) {
    // no algorithm to choose (make_desc checked the output dims; the kernel checks the rest)
    TRY(room_for_plan(s, e));
    d.dw = true;
    s->plans[s->n] = d;
    s->cur = &s->plans[s->n++];
  }
  if (!s->cur) {
    if (!c->cudnn) return err_set(e, ERR_INTERNAL, "no cuDNN handle in this slot");
    TRY(room_for_plan(s, e));
    nvtxRangePushA("inferd cudnn plan");
    eng_cuconv_opts co = {.search = c->conv_timed ? ENG_CUCONV_SEARCH_EXHAUSTIVE
                                                  : ENG_CUCONV_SEARCH_HEURISTIC};
    int rc = s->kind == ENG_CONV             ? eng_cuconv_plan_create(&d.conv, c->cudnn, &d.cd, &co, e)
             : s->kind == ENG_CONV_TRANSPOSE ? eng_cutconv_plan_create(&d.tconv, c->cudnn, &d.td, &co, e)
                                             : eng_cupool_plan_create(&d.pool, c->cudnn, &d.pd, e);
    nvtxRangePop();
    if (rc) return rc;
    s->plans[s->n] = d;
    s->cur = &s->plans[s->n++];
    r->made = 1;
  }
  r->gemm = s->cur->gemm;
  r->ws_need = s->cur->dw || s->cur->gemm || s->cur->mean ? 0
              : s->cur->conv  ? eng_cuconv_plan_workspace(s->cur->conv)
              : s->cur->tconv ? eng_cutconv_plan_workspace(s->cur->tconv)
                              : eng_cupool_plan_workspace(s->cur->pool);
  return 0;
}

static int conv_run(cuda_ctx *c, const eng_op_params *p, const eng_tensor *in, int n_in,
                    eng_tensor *out, int n_out, err *e) {
  (void)p, (void)n_out;
  const conv_node *s = c->node;
  if (in[0].dims[0] == 0) return 0;
  const shape_plan *sp = s ? s->cur : NULL;
  if (!sp) return err_set(e, ERR_INTERNAL, "no cuDNN plan prepared for this shape");
  // the plan was made for this node's run in this submit; the tensors' type
  // must still be the one it was made for
  bool conv = sp->conv || sp->dw || sp->gemm;
  eng_cuconv_dtype dt = conv ? sp->cd.dtype : sp->tconv ? sp->td.dtype : sp->pd.dtype;
  if ((in[0].dt == DT_FP16) != (dt == ENG_CUCONV_FP16) || in[0].dt != out[0].dt)
    return err_set(e, ERR_INTERNAL, "operand types changed since the cuDNN plan was made");
  nvtxRangePushA(sp->gemm    ? "inferd conv_gemm"
                 : sp->dw    ? "inferd dwconv"
                 : sp->conv  ? "inferd conv"
                 : sp->tconv ? "inferd conv_transpose"
                 : sp->mean  ? "inferd global_mean"
                             : "inferd pool");
  int rc;
  if (sp->tconv) {
    // no fusion hook: nothing is ever fused into a ConvTranspose
    const void *bias = n_in > 2 && in[2].dt != DT_INVALID ? in[2].data : NULL;
    const void *w = sp->td.layout == ENG_CUCONV_NHWC ? s->w_nhwc : in[1].data;
    rc = eng_cutconv_run(sp->tconv, c->cudnn, c->stream, in[0].data, w, bias, out[0].data, c->ws,
                         c->ws_bytes, e);
  } else if (conv) {
    if (sp->cd.has_z != (c->z != NULL) || (int)sp->cd.act != c->act) {
      nvtxRangePop();
      return err_set(e, ERR_INTERNAL, "fused epilogue changed since the cuDNN plan was made");
    }
    const void *bias = n_in > 2 && in[2].dt != DT_INVALID ? in[2].data : NULL;
    const void *w = sp->cd.layout == ENG_CUCONV_NHWC ? s->w_nhwc : in[1].data;
    if (c->in_act && !sp->dw) {  // the plan skips a prologue's node only where the node runs NHWC
      nvtxRangePop();
      return err_set(e, ERR_INTERNAL, "an input activation asked of a cuDNN convolution");
    }
    rc = sp->gemm ? run_gemm(c, &sp->cd, in[0].data, in[1].data, bias, out[0].data, e)
         : sp->dw ? run_dw(&sp->cd, c->in_act, c->stream, in[0].data, w, bias, c->z, out[0].data, e)
                  : eng_cuconv_run(sp->conv, c->cudnn, c->stream, in[0].data, w, bias, c->z,
                                   out[0].data, c->ws, c->ws_bytes, e);
  } else if (sp->mean) {
    rc = run_mean(&sp->pd, c->stream, in[0].data, out[0].data, e);
  } else {
    rc = eng_cupool_run(sp->pool, c->cudnn, c->stream, in[0].data, out[0].data, c->ws, c->ws_bytes,
                        e);
  }
  nvtxRangePop();
  return rc;
}

#define FAMILY(name, fuse)                                                                    \
  {name, conv_run, eng_cuda__half_always, CUDA_OP_CUDNN | CUDA_OP_NHWC, conv_init, fuse,       \
   conv_prepare, conv_destroy, conv_nhwc}

// FP16 operands run as they are (FP16 storage, FP32 accumulation).
const cuda_op eng_cuda__conv_ops[] = {
    FAMILY("Conv", conv_fuse),
    FAMILY("ConvTranspose", NULL),
    FAMILY("MaxPool", NULL),
    FAMILY("AveragePool", NULL),
    FAMILY("GlobalAveragePool", NULL),
    FAMILY("GlobalMaxPool", NULL),
};
const size_t eng_cuda__n_conv_ops = sizeof eng_cuda__conv_ops / sizeof eng_cuda__conv_ops[0];
