// engine/cuda/cuda_conv.c: convolution plans on cuDNN's legacy C API, and
// the cuDNN plumbing the transposed convolutions (cuda_deconv.c) and
// pooling (cuda_pool.c) share (cuda_conv_internal.h): the handle, status
// checks, descriptor types, the explicit pad's copy, weight packing.
//
// Choices that shape this file:
// - Asymmetric pads. Legacy descriptors take one pad per dimension, applied
//   on both sides. We give cuDNN the smaller pad of each pair and copy the
//   input into a zero-filled buffer (in the run's workspace) that carries
//   the difference: a cudaMemsetAsync plus a strided cudaMemcpy3DAsync,
//   both plain graph nodes, no kernel of ours. Padding the larger side and
//   cropping the output instead only works when the stride divides the
//   difference, which the common stride-2 "SAME" pads (0, 1) break.
// - The epilogue. cudnnConvolutionBiasActivationForward fuses bias, the
//   residual z and ReLU (or identity, but identity only with the
//   IMPLICIT_PRECOMP_GEMM algorithm). Everything else (other activations, or
//   an algorithm the fused call refuses) runs split: the residual is copied
//   into y and the convolution accumulates onto it (beta = 1), then
//   cudnnAddTensor adds the bias and cudnnActivationForward runs in place.
// - Algorithm choice. The v7 heuristic lists algorithms for the plain
//   convolution; whether the fused call takes one for this shape, layout and
//   type is only known by calling it. So each candidate (algorithm, math
//   type, fused or split) is run once at plan time on borrowed buffers, and
//   the plan keeps the first that works (HEURISTIC) or the fastest (timed,
//   EXHAUSTIVE). The first call also pays cuDNN's one-off costs (kernel
//   loading, runtime compilation) at load instead of on a request.
// - FP32 runs with CUDNN_FMA_MATH: CUDNN_DEFAULT_MATH lets cuDNN use TF32
//   tensor cores for float on Ampere and later, which is ENG_CUCONV_FP32_TF32.
#include "engine/cuda/cuda_conv.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_conv_internal.h"
#include "kernels/k_cuda.h"
#include "kernels/k_ref.h"

// --- host-side helpers (built with or without cuDNN)

const char *eng_cuconv_dtype_name(eng_cuconv_dtype dt) {
  switch (dt) {
    case ENG_CUCONV_FP32: return "fp32";
    case ENG_CUCONV_FP32_TF32: return "fp32_tf32";
    case ENG_CUCONV_FP16: return "fp16";
  }
  return "?";
}

const char *eng_cuconv_act_name(eng_cuconv_act a) {
  switch (a) {
    case ENG_CUCONV_ACT_NONE: return "none";
    case ENG_CUCONV_ACT_RELU: return "relu";
    case ENG_CUCONV_ACT_CLIP: return "clip";
    case ENG_CUCONV_ACT_SIGMOID: return "sigmoid";
    case ENG_CUCONV_ACT_TANH: return "tanh";
    case ENG_CUCONV_ACT_SWISH: return "swish";
    case ENG_CUCONV_ACT_HARD_SIGMOID: return "hard_sigmoid";
    case ENG_CUCONV_ACT_HARD_SWISH: return "hard_swish";
  }
  return "?";
}

const char *eng_cuconv_strategy_name(eng_cuconv_strategy s) {
  switch (s) {
    case ENG_CUCONV_PLAIN: return "plain";
    case ENG_CUCONV_FUSED: return "fused";
    case ENG_CUCONV_SPLIT: return "split";
  }
  return "?";
}

// Normalised copy: zero strides, dilations and groups become 1.
static eng_cuconv_desc conv_norm(const eng_cuconv_desc *d) {
  eng_cuconv_desc n = *d;
  n.stride_h = eng_cuconv__or1(n.stride_h);
  n.stride_w = eng_cuconv__or1(n.stride_w);
  n.dil_h = eng_cuconv__or1(n.dil_h);
  n.dil_w = eng_cuconv__or1(n.dil_w);
  n.groups = eng_cuconv__or1(n.groups);
  return n;
}

static int conv_validate(const eng_cuconv_desc *d, int *ho, int *wo, err *e) {
  if (!d) return err_set(e, ERR_INVALID_ARGUMENT, "conv: NULL descriptor");
  eng_cuconv_desc n = conv_norm(d);
  if (n.n < 1 || n.c < 1 || n.h < 1 || n.w < 1 || n.k < 1 || n.r < 1 || n.s < 1)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "conv: sizes must be >= 1 (n=%d c=%d h=%d w=%d k=%d r=%d s=%d)", n.n, n.c, n.h,
                   n.w, n.k, n.r, n.s);
  if (n.pad_top < 0 || n.pad_left < 0 || n.pad_bottom < 0 || n.pad_right < 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "conv: negative pad (%d %d %d %d)", n.pad_top,
                   n.pad_left, n.pad_bottom, n.pad_right);
  if (n.stride_h < 1 || n.stride_w < 1 || n.dil_h < 1 || n.dil_w < 1 || n.groups < 1)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "conv: strides, dilations and groups must be >= 1 (%d %d, %d %d, %d)",
                   n.stride_h, n.stride_w, n.dil_h, n.dil_w, n.groups);
  if (n.c % n.groups || n.k % n.groups)
    return err_set(e, ERR_INVALID_ARGUMENT, "conv: c=%d and k=%d must be multiples of groups=%d",
                   n.c, n.k, n.groups);
  if ((unsigned)n.dtype > ENG_CUCONV_FP16 || (unsigned)n.layout > ENG_CUCONV_NHWC ||
      (unsigned)n.act > ENG_CUCONV_ACT_HARD_SWISH)
    return err_set(e, ERR_INVALID_ARGUMENT, "conv: unknown dtype %d, layout %d or act %d",
                   (int)n.dtype, (int)n.layout, (int)n.act);
  if (n.act == ENG_CUCONV_ACT_CLIP && !(n.clip_max > 0.0f))
    return err_set(e, ERR_INVALID_ARGUMENT, "conv: clip activation needs clip_max > 0 (got %g)",
                   (double)n.clip_max);
  if (n.act == ENG_CUCONV_ACT_HARD_SIGMOID && !(isfinite(n.act_alpha) && isfinite(n.act_beta)))
    return err_set(e, ERR_INVALID_ARGUMENT, "conv: hard_sigmoid needs finite alpha, beta (got %g, %g)",
                   (double)n.act_alpha, (double)n.act_beta);
  long long eh = (long long)n.dil_h * (n.r - 1) + 1, ew = (long long)n.dil_w * (n.s - 1) + 1;
  long long ph = (long long)n.h + n.pad_top + n.pad_bottom - eh;
  long long pw = (long long)n.w + n.pad_left + n.pad_right - ew;
  if (ph < 0 || pw < 0)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "conv: the dilated %lldx%lld kernel is larger than the padded %lldx%lld input",
                   eh, ew, ph + eh, pw + ew);
  long long oh = ph / n.stride_h + 1, ow = pw / n.stride_w + 1;
  // cuDNN's legacy descriptors count elements in int
  long long big = INT_MAX;
  long long hp = (long long)n.h + n.pad_top + n.pad_bottom, wp = (long long)n.w + n.pad_left + n.pad_right;
  if ((long long)n.n * n.c * hp * wp > big || (long long)n.n * n.k * oh * ow > big ||
      (long long)n.k * (n.c / n.groups) * n.r * n.s > big)
    return err_set(e, ERR_UNIMPLEMENTED, "conv: a tensor has more than 2^31-1 elements");
  if (ho) *ho = (int)oh;
  if (wo) *wo = (int)ow;
  return 0;
}

int eng_cuconv_out_dims(const eng_cuconv_desc *d, int *ho, int *wo, err *e) {
  return conv_validate(d, ho, wo, e);
}

size_t eng_cuconv_x_bytes(const eng_cuconv_desc *d) {
  if (conv_validate(d, NULL, NULL, NULL)) return 0;
  return (size_t)d->n * d->c * d->h * d->w * eng_cuconv__esize(d->dtype);
}

size_t eng_cuconv_y_bytes(const eng_cuconv_desc *d) {
  int ho = 0, wo = 0;  // set by the validate call on success; GCC -O3 cannot see that
  if (conv_validate(d, &ho, &wo, NULL)) return 0;
  return (size_t)d->n * d->k * ho * wo * eng_cuconv__esize(d->dtype);
}

size_t eng_cuconv_w_bytes(const eng_cuconv_desc *d) {
  if (conv_validate(d, NULL, NULL, NULL)) return 0;
  return (size_t)d->k * (d->c / eng_cuconv__or1(d->groups)) * d->r * d->s * eng_cuconv__esize(d->dtype);
}

size_t eng_cuconv_bias_bytes(const eng_cuconv_desc *d) {
  if (conv_validate(d, NULL, NULL, NULL)) return 0;
  return (size_t)d->k * eng_cuconv__esize(d->dtype);
}

// --- weight packing (cuda_deconv.c packs its filters with these too)

void eng_cuconv__store(eng_cuconv_dtype dt, void *dst, size_t at, const float *src, size_t n) {
  if (dt == ENG_CUCONV_FP16) k_f32_to_f16((uint16_t *)dst + at, src, n);
  else memcpy((float *)dst + at, src, n * sizeof(float));
}

int eng_cuconv__pack_filter(eng_cuconv_dtype dt, eng_cuconv_layout l, const float *src, void *dst,
                            size_t kk, size_t cc, size_t r, size_t s, err *e) {
  if (l == ENG_CUCONV_NCHW) {  // KCRS is the ONNX order: a type conversion at most
    eng_cuconv__store(dt, dst, 0, src, kk * cc * r * s);
    return 0;
  }
  // KRSC: gather one filter (c innermost) at a time, then store it
  float *f = malloc(cc * r * s * sizeof *f);
  if (!f) return err_set(e, ERR_RESOURCE_EXHAUSTED, "conv: out of host memory packing weights");
  for (size_t o = 0; o < kk; o++) {
    const float *so = src + o * cc * r * s;
    for (size_t i = 0; i < cc; i++)
      for (size_t y = 0; y < r; y++)
        for (size_t x = 0; x < s; x++) f[(y * s + x) * cc + i] = so[(i * r + y) * s + x];
    eng_cuconv__store(dt, dst, o * cc * r * s, f, cc * r * s);
  }
  free(f);
  return 0;
}

int eng_cuconv_pack_weights(const eng_cuconv_desc *d, const float *oihw, void *dst,
                            size_t dst_bytes, err *e) {
  TRY(conv_validate(d, NULL, NULL, e));
  size_t need = eng_cuconv_w_bytes(d);
  if (!oihw || !dst || dst_bytes < need)
    return err_set(e, ERR_INVALID_ARGUMENT, "conv: pack_weights needs %zu bytes (got %zu%s)", need,
                   dst_bytes, !oihw || !dst ? ", NULL pointer" : "");
  return eng_cuconv__pack_filter(d->dtype, d->layout, oihw, dst, (size_t)d->k,
                                 (size_t)(d->c / eng_cuconv__or1(d->groups)),
                                 (size_t)d->r, (size_t)d->s, e);
}

int eng_cuconv_pack_bias(const eng_cuconv_desc *d, const float *bias, void *dst, size_t dst_bytes,
                         err *e) {
  TRY(conv_validate(d, NULL, NULL, e));
  size_t need = eng_cuconv_bias_bytes(d);
  if (!bias || !dst || dst_bytes < need)
    return err_set(e, ERR_INVALID_ARGUMENT, "conv: pack_bias needs %zu bytes (got %zu%s)", need,
                   dst_bytes, !bias || !dst ? ", NULL pointer" : "");
  eng_cuconv__store(d->dtype, dst, 0, bias, (size_t)d->k);
  return 0;
}

#if defined(INFERD_HAVE_CUDNN) && INFERD_HAVE_CUDNN

// --- cuDNN plumbing

int eng_cuconv__cudnn_check(cudnnStatus_t st, err *e, const char *file, int line, const char *call) {
  if (st == CUDNN_STATUS_SUCCESS) return 0;
  char last[256] = "";
  cudnnGetLastErrorString(last, sizeof last);
  err_code code = ERR_INTERNAL;
  if (st / 1000 == CUDNN_STATUS_NOT_SUPPORTED / 1000) code = ERR_UNIMPLEMENTED;
  if (st == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
      st == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
    code = ERR_RESOURCE_EXHAUSTED;
  (void)cudaGetLastError();
  return err_set(e, code, "%s:%d: %s failed: %s%s%s", file, line, call, cudnnGetErrorString(st),
                 last[0] ? ": " : "", last);
}

bool eng_cuconv_available(void) { return true; }
size_t eng_cudnn_version(void) { return cudnnGetVersion(); }

int eng_cudnn_create(eng_cudnn **out, err *e) {
  if (!out) return err_set(e, ERR_INVALID_ARGUMENT, "cudnn: NULL out");
  *out = NULL;
  eng_cudnn *h = calloc(1, sizeof *h);
  if (!h) return err_set(e, ERR_RESOURCE_EXHAUSTED, "cudnn: out of host memory");
  int rc = CUDA_OK(e, cudaGetDevice(&h->device));
  if (!rc) rc = CUDNN_OK(e, cudnnCreate(&h->h));
  if (rc) {
    free(h);
    return rc;
  }
  *out = h;
  return 0;
}

void eng_cudnn_destroy(eng_cudnn *h) {
  if (!h) return;
  if (h->h) (void)cudnnDestroy(h->h);
  free(h);
}

static const char *algo_name(int a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
  }
  return "?";
}

int eng_cuconv__copy_into_padded(void *dst, size_t row_bytes_p, size_t rows_p, size_t byte0, size_t row0,
                                 const void *src, size_t row_bytes, size_t rows, size_t outer,
                                 size_t copy_bytes, size_t copy_rows, cudaStream_t stream, err *e) {
  struct cudaMemcpy3DParms p;
  memset(&p, 0, sizeof p);
  // linear memory: widths and x positions are in bytes
  p.srcPtr = (struct cudaPitchedPtr){.ptr = (void *)src, .pitch = row_bytes, .xsize = row_bytes, .ysize = rows};
  p.dstPtr = (struct cudaPitchedPtr){.ptr = dst, .pitch = row_bytes_p, .xsize = row_bytes_p, .ysize = rows_p};
  p.dstPos = (struct cudaPos){.x = byte0, .y = row0, .z = 0};
  p.extent = (struct cudaExtent){.width = copy_bytes, .height = copy_rows, .depth = outer};
  p.kind = cudaMemcpyDeviceToDevice;
  CUDA_TRY(e, cudaMemcpy3DAsync(&p, stream));
  return 0;
}

// --- what the plans share (cuda_conv_internal.h)

void eng_cuconv__log(char *log, size_t cap, const char *fmt, ...) {
  size_t used = strlen(log);
  if (used + 1 >= cap) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(log + used, cap - used, fmt, ap);
  va_end(ap);
}

int eng_cuconv__opts(const char *what, const eng_cuconv_opts *opts, eng_cuconv_opts *o, size_t *cap, err *e) {
  *o = opts ? *opts : (eng_cuconv_opts){0};
  *cap = o->workspace_cap ? o->workspace_cap : (size_t)64 << 20;
  if ((unsigned)o->search > ENG_CUCONV_SEARCH_EXHAUSTIVE)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: unknown search %d", what, (int)o->search);
  return 0;
}

cudnnMathType_t eng_cuconv__math(eng_cuconv_dtype dt) {
  return dt == ENG_CUCONV_FP32 ? CUDNN_FMA_MATH : dt == ENG_CUCONV_FP16 ? CUDNN_TENSOR_OP_MATH : CUDNN_DEFAULT_MATH;
}

bool eng_cuconv__cand_math(eng_cuconv_dtype dt, cudnnMathType_t *math) {
  if (dt == ENG_CUCONV_FP32) {
    if (*math == CUDNN_TENSOR_OP_MATH || *math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return false;
    *math = CUDNN_FMA_MATH;
  }
  return true;
}

int eng_cuconv__check_ws(const char *what, size_t need, const void *ws, size_t ws_bytes, err *e) {
  if (ws_bytes < need || (need && !ws))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: the plan needs %zu workspace bytes (got %zu)", what, need,
                   ws ? ws_bytes : 0);
  return 0;
}

int eng_cuconv__try_candidates(const eng_cuconv__trials *t, int *best, float *best_ms, err *first, err *e) {
  *best = -1;
  *best_ms = 0;
  for (int i = 0; i < t->n; i++) {
    err ce = {0};
    int crc = t->run(t->plan, i, t->s, &ce);
    if (!crc) crc = CUDA_OK(&ce, cudaStreamSynchronize(t->s));
    t->note(t->plan, i, crc ? err_code_name(ce.code) : "ok");
    if (crc) {
      // cuDNN refusing a candidate leaves nothing behind; a failed
      // synchronisation is a broken context, where trying on is pointless
      if (!first->code) *first = ce;
      if (strstr(ce.msg, "cudaStreamSynchronize")) {
        *e = ce;
        return ce.code;
      }
      continue;
    }
    if (t->search == ENG_CUCONV_SEARCH_HEURISTIC) {
      *best = i;
      break;
    }
    // EXHAUSTIVE: two more warm-up runs, then the better of two rounds of
    // 10 (a first measurement on an idle GPU runs at low clocks; on the
    // H100 a single round of 5 picked candidates up to 3x slower). Stream
    // time, so the legacy API's per-call host cost counts where it is
    // the bottleneck.
    const int reps = 10;
    for (int r = 0; r < 2 && !crc; r++) crc = t->run(t->plan, i, t->s, &ce);
    float round_ms = 0;
    for (int round = 0; round < 2 && !crc; round++) {
      CUDA_TRY(e, cudaEventRecord(t->ev0, t->s));
      for (int r = 0; r < reps && !crc; r++) crc = t->run(t->plan, i, t->s, &ce);
      CUDA_TRY(e, cudaEventRecord(t->ev1, t->s));
      CUDA_TRY(e, cudaEventSynchronize(t->ev1));
      float ms = 0;
      CUDA_TRY(e, cudaEventElapsedTime(&ms, t->ev0, t->ev1));
      if (round == 0 || ms < round_ms) round_ms = ms;
    }
    if (crc) continue;
    float ms = round_ms / reps;
    eng_cuconv__log(t->log, t->log_cap, "(%.3fms)", (double)ms);
    if (*best < 0 || ms < *best_ms) {
      *best = i;
      *best_ms = ms;
    }
  }
  return 0;
}

// --- convolution

typedef struct cand {
  cudnnConvolutionFwdAlgo_t algo;
  cudnnMathType_t math;
  eng_cuconv_strategy strategy;
  size_t ws;  // cuDNN's workspace for this algorithm
  float ms;
} cand;

struct eng_cuconv_plan {
  eng_cuconv_desc d;  // normalised
  int ho, wo;
  // explicit pad: extra rows/columns before and after, padded input extents
  int et, eb, el, er, hp, wp;
  bool explicit_pad;
  size_t pad_bytes;  // padded input, at workspace offset 0
  cudnnTensorDescriptor_t xd, yd, bd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  cudnnActivationDescriptor_t ad_fused;  // RELU or IDENTITY for the fused call
  cudnnActivationDescriptor_t ad_split;  // the epilogue's activation, split strategy
  void *zero_bias;  // k zeros: the fused call needs a bias even when d has none
  cand chosen;
  int candidates;
  char log[768];  // what plan time tried, for eng_cuconv_info
};

void eng_cuconv_plan_destroy(eng_cuconv_plan *p) {
  if (!p) return;
  if (p->xd) (void)cudnnDestroyTensorDescriptor(p->xd);
  if (p->yd) (void)cudnnDestroyTensorDescriptor(p->yd);
  if (p->bd) (void)cudnnDestroyTensorDescriptor(p->bd);
  if (p->wd) (void)cudnnDestroyFilterDescriptor(p->wd);
  if (p->cd) (void)cudnnDestroyConvolutionDescriptor(p->cd);
  if (p->ad_fused) (void)cudnnDestroyActivationDescriptor(p->ad_fused);
  if (p->ad_split) (void)cudnnDestroyActivationDescriptor(p->ad_split);
  if (p->zero_bias) (void)cudaFree(p->zero_bias);
  (void)cudaGetLastError();
  free(p);
}

size_t eng_cuconv_plan_workspace(const eng_cuconv_plan *p) {
  return p->pad_bytes + p->chosen.ws;
}

const eng_cuconv_desc *eng_cuconv_plan_desc(const eng_cuconv_plan *p) { return &p->d; }

void eng_cuconv_plan_info(const eng_cuconv_plan *p, eng_cuconv_info *info) {
  memset(info, 0, sizeof *info);
  info->algo = (int)p->chosen.algo;
  info->algo_name = algo_name((int)p->chosen.algo);
  info->math = (int)p->chosen.math;
  info->strategy = p->chosen.strategy;
  info->explicit_pad = p->explicit_pad;
  info->workspace_bytes = eng_cuconv_plan_workspace(p);
  info->candidates = p->candidates;
  info->time_ms = p->chosen.ms;
  info->log = p->log;
}

static bool needs_epilogue(const eng_cuconv_desc *d) {
  return d->has_bias || d->has_z || d->act != ENG_CUCONV_ACT_NONE;
}

// Activations cuDNN has no mode for: our unary kernel runs them over y
// after cuDNN's conv (+ bias + z), in place.
static bool act_after(eng_cuconv_act a) {
  return a == ENG_CUCONV_ACT_HARD_SIGMOID || a == ENG_CUCONV_ACT_HARD_SWISH;
}

static int run_act_after(const eng_cuconv_plan *p, cudaStream_t stream, void *y, err *e) {
  const eng_cuconv_desc *d = &p->d;
  size_t n = (size_t)d->n * d->k * p->ho * p->wo;
  bool sig = d->act == ENG_CUCONV_ACT_HARD_SIGMOID;
  return k_unop_cuda(y, y, n, d->dtype == ENG_CUCONV_FP16 ? K_F16 : K_F32,
                     sig ? K_HARD_SIGMOID : K_HARD_SWISH, sig ? d->act_alpha : 0.0f,
                     sig ? d->act_beta : 0.0f, stream, e);
}

// The run itself, with candidate c (the plan's chosen one at run time).
static int conv_enqueue(const eng_cuconv_plan *p, const cand *c, cudnnHandle_t h,
                        cudaStream_t stream, const void *x, const void *w, const void *bias,
                        const void *z, void *y, void *ws, err *e) {
  const eng_cuconv_desc *d = &p->d;
  size_t es = eng_cuconv__esize(d->dtype);
  const void *xin = x;
  if (p->explicit_pad) {
    // zero the whole buffer: the workspace is shared with other ops, so the
    // border cannot be assumed still zero from an earlier run
    CUDA_TRY(e, cudaMemsetAsync(ws, 0, p->pad_bytes, stream));
    if (d->layout == ENG_CUCONV_NCHW)
      TRY(eng_cuconv__copy_into_padded(ws, (size_t)p->wp * es, (size_t)p->hp, (size_t)p->el * es, (size_t)p->et,
                           x, (size_t)d->w * es, (size_t)d->h, (size_t)d->n * d->c,
                           (size_t)d->w * es, (size_t)d->h, stream, e));
    else
      TRY(eng_cuconv__copy_into_padded(ws, (size_t)p->wp * d->c * es, (size_t)p->hp,
                           (size_t)p->el * d->c * es, (size_t)p->et, x, (size_t)d->w * d->c * es,
                           (size_t)d->h, (size_t)d->n, (size_t)d->w * d->c * es, (size_t)d->h,
                           stream, e));
    xin = ws;
  }
  void *cws = c->ws ? (char *)ws + p->pad_bytes : NULL;
  // the descriptor holds the chosen math type; only plan-time trials change it
  if (c != &p->chosen) CUDNN_TRY(e, cudnnSetConvolutionMathType(p->cd, c->math));
  const float one = 1.0f, zero = 0.0f;
  switch (c->strategy) {
    case ENG_CUCONV_PLAIN:
      CUDNN_TRY(e, cudnnConvolutionForward(h, &one, p->xd, xin, p->wd, w, p->cd, c->algo, cws, c->ws,
                                           &zero, p->yd, y));
      return 0;
    case ENG_CUCONV_FUSED: {
      const void *zz = d->has_z ? z : y;  // alpha2 = 0 makes it unread
      const void *bb = d->has_bias ? bias : p->zero_bias;
      CUDNN_TRY(e, cudnnConvolutionBiasActivationForward(
                       h, &one, p->xd, xin, p->wd, w, p->cd, c->algo, cws, c->ws,
                       d->has_z ? &one : &zero, p->yd, zz, p->bd, bb, p->ad_fused, p->yd, y));
      return act_after(d->act) ? run_act_after(p, stream, y, e) : 0;
    }
    case ENG_CUCONV_SPLIT: {
      if (d->has_z && z != y) {
        int ho = p->ho, wo = p->wo;
        size_t yb = (size_t)d->n * d->k * ho * wo * es;
        CUDA_TRY(e, cudaMemcpyAsync(y, z, yb, cudaMemcpyDeviceToDevice, stream));
      }
      CUDNN_TRY(e, cudnnConvolutionForward(h, &one, p->xd, xin, p->wd, w, p->cd, c->algo, cws, c->ws,
                                           d->has_z ? &one : &zero, p->yd, y));
      if (d->has_bias) CUDNN_TRY(e, cudnnAddTensor(h, &one, p->bd, bias, &one, p->yd, y));
      if (act_after(d->act)) return run_act_after(p, stream, y, e);
      if (d->act != ENG_CUCONV_ACT_NONE)
        CUDNN_TRY(e, cudnnActivationForward(h, p->ad_split, &one, p->yd, y, &zero, p->yd, y));
      return 0;
    }
  }
  return err_set(e, ERR_INTERNAL, "conv: unknown strategy %d", (int)c->strategy);
}

static int conv_descriptors(eng_cuconv_plan *p, err *e) {
  const eng_cuconv_desc *d = &p->d;
  cudnnDataType_t t = eng_cuconv__dt(d->dtype);
  cudnnTensorFormat_t f = eng_cuconv__fmt(d->layout);
  CUDNN_TRY(e, cudnnCreateTensorDescriptor(&p->xd));
  CUDNN_TRY(e, cudnnCreateTensorDescriptor(&p->yd));
  CUDNN_TRY(e, cudnnCreateTensorDescriptor(&p->bd));
  CUDNN_TRY(e, cudnnCreateFilterDescriptor(&p->wd));
  CUDNN_TRY(e, cudnnCreateConvolutionDescriptor(&p->cd));
  CUDNN_TRY(e, cudnnCreateActivationDescriptor(&p->ad_fused));
  CUDNN_TRY(e, cudnnCreateActivationDescriptor(&p->ad_split));
  CUDNN_TRY(e, cudnnSetTensor4dDescriptor(p->xd, f, t, d->n, d->c, p->hp, p->wp));
  CUDNN_TRY(e, cudnnSetTensor4dDescriptor(p->yd, f, t, d->n, d->k, p->ho, p->wo));
  CUDNN_TRY(e, cudnnSetTensor4dDescriptor(p->bd, f, t, 1, d->k, 1, 1));
  CUDNN_TRY(e, cudnnSetFilter4dDescriptor(p->wd, t, f, d->k, d->c / d->groups, d->r, d->s));
  int ph = d->pad_top < d->pad_bottom ? d->pad_top : d->pad_bottom;
  int pw = d->pad_left < d->pad_right ? d->pad_left : d->pad_right;
  CUDNN_TRY(e, cudnnSetConvolution2dDescriptor(p->cd, ph, pw, d->stride_h, d->stride_w, d->dil_h,
                                               d->dil_w, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CUDNN_TRY(e, cudnnSetConvolutionGroupCount(p->cd, d->groups));
  int n_, k_, h_, w_;
  CUDNN_TRY(e, cudnnGetConvolution2dForwardOutputDim(p->cd, p->xd, p->wd, &n_, &k_, &h_, &w_));
  if (n_ != d->n || k_ != d->k || h_ != p->ho || w_ != p->wo)
    return err_set(e, ERR_INTERNAL, "conv: cuDNN's output %dx%dx%dx%d is not ours %dx%dx%dx%d", n_,
                   k_, h_, w_, d->n, d->k, p->ho, p->wo);
  bool relu = d->act == ENG_CUCONV_ACT_RELU;
  CUDNN_TRY(e, cudnnSetActivationDescriptor(p->ad_fused,
                                            relu ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
                                            CUDNN_PROPAGATE_NAN, 0.0));
  cudnnActivationMode_t am = CUDNN_ACTIVATION_RELU;
  double coef = 0.0;
  switch (d->act) {
    case ENG_CUCONV_ACT_NONE:
    case ENG_CUCONV_ACT_RELU: am = CUDNN_ACTIVATION_RELU; break;
    case ENG_CUCONV_ACT_CLIP: am = CUDNN_ACTIVATION_CLIPPED_RELU, coef = d->clip_max; break;
    case ENG_CUCONV_ACT_SIGMOID: am = CUDNN_ACTIVATION_SIGMOID; break;
    case ENG_CUCONV_ACT_TANH: am = CUDNN_ACTIVATION_TANH; break;
    case ENG_CUCONV_ACT_SWISH: am = CUDNN_ACTIVATION_SWISH; break;
    case ENG_CUCONV_ACT_HARD_SIGMOID:  // run_act_after's: ad_split is unused
    case ENG_CUCONV_ACT_HARD_SWISH: am = CUDNN_ACTIVATION_IDENTITY; break;
  }
  CUDNN_TRY(e, cudnnSetActivationDescriptor(p->ad_split, am, CUDNN_PROPAGATE_NAN, coef));
  if (d->act == ENG_CUCONV_ACT_SWISH)
    CUDNN_TRY(e, cudnnSetActivationDescriptorSwishBeta(p->ad_split, 1.0));
  CUDNN_TRY(e, cudnnSetConvolutionMathType(p->cd, eng_cuconv__math(d->dtype)));
  return 0;
}

// Candidates from the v7 heuristic, in its order: each usable (algorithm,
// math) pair once, as fused (where cuDNN documents it) and as split; the
// fused ones first.
static int conv_candidates(eng_cuconv_plan *p, eng_cudnn *h, size_t cap, cand *out, int max,
                           int *count, err *e) {
  const eng_cuconv_desc *d = &p->d;
  int n_algo = 0;
  CUDNN_TRY(e, cudnnGetConvolutionForwardAlgorithmMaxCount(h->h, &n_algo));
  if (n_algo < 1) n_algo = 1;
  cudnnConvolutionFwdAlgoPerf_t *perf = calloc((size_t)n_algo, sizeof *perf);
  if (!perf) return err_set(e, ERR_RESOURCE_EXHAUSTED, "conv: out of host memory");
  int got = 0;
  int rc = CUDNN_OK(e, cudnnGetConvolutionForwardAlgorithm_v7(h->h, p->xd, p->wd, p->cd, p->yd,
                                                              n_algo, &got, perf));
  int n = 0;
  for (int i = 0; !rc && i < got && n + 2 <= max; i++) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    cudnnMathType_t math = perf[i].mathType;
    if (!eng_cuconv__cand_math(d->dtype, &math)) continue;
    bool dup = false;
    for (int j = 0; j < n; j++) dup |= out[j].algo == perf[i].algo && out[j].math == math;
    if (dup) continue;
    // the workspace for this algorithm with this math type
    size_t ws = 0;
    if (cudnnSetConvolutionMathType(p->cd, math) != CUDNN_STATUS_SUCCESS) continue;
    if (cudnnGetConvolutionForwardWorkspaceSize(h->h, p->xd, p->wd, p->cd, p->yd, perf[i].algo,
                                                &ws) != CUDNN_STATUS_SUCCESS)
      continue;
    if (perf[i].memory > ws) ws = perf[i].memory;
    if (ws + p->pad_bytes > cap) continue;
    cand c = {.algo = perf[i].algo, .math = math, .ws = ws, .ms = 0};
    if (!needs_epilogue(d)) {
      c.strategy = ENG_CUCONV_PLAIN;
      out[n++] = c;
      continue;
    }
    // (an act_after one rides on an identity fused kernel, as NONE does)
    bool fusable = d->act == ENG_CUCONV_ACT_RELU ||
                   ((d->act == ENG_CUCONV_ACT_NONE || act_after(d->act)) &&
                    perf[i].algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM);
    if (fusable) {
      c.strategy = ENG_CUCONV_FUSED;
      out[n++] = c;
    }
    c.strategy = ENG_CUCONV_SPLIT;
    out[n++] = c;
  }
  free(perf);
  // one pass over y beats three: every fused candidate before any split one
  // (stable, so each group keeps the heuristic's order)
  int nf = 0;
  cand tmp[64];
  for (int i = 0; i < n && i < 64; i++)
    if (out[i].strategy != ENG_CUCONV_SPLIT) tmp[nf++] = out[i];
  for (int i = 0, j = nf; i < n && i < 64; i++)
    if (out[i].strategy == ENG_CUCONV_SPLIT) tmp[j++] = out[i];
  memcpy(out, tmp, (size_t)n * sizeof *out);
  *count = n;
  return rc;
}

// A plan's trials (eng_cuconv__try_candidates): its candidates and borrowed buffers.
typedef struct conv_trial {
  eng_cuconv_plan *p;
  const cand *cands;
  cudnnHandle_t h;
  void *x, *w, *bias, *z, *y, *ws;
} conv_trial;

static int conv_try(void *plan, int i, cudaStream_t s, err *e) {
  const conv_trial *t = plan;
  return conv_enqueue(t->p, &t->cands[i], t->h, s, t->x, t->w, t->bias, t->z, t->y, t->ws, e);
}

static void conv_note(void *plan, int i, const char *outcome) {
  const conv_trial *t = plan;
  const cand *c = &t->cands[i];
  t->p->candidates++;
  eng_cuconv__log(t->p->log, sizeof t->p->log, "%s%s/m%d/%s:%s", i ? " " : "", algo_name((int)c->algo),
                  (int)c->math, eng_cuconv_strategy_name(c->strategy), outcome);
}

int eng_cuconv_plan_create(eng_cuconv_plan **out, eng_cudnn *h, const eng_cuconv_desc *desc,
                           const eng_cuconv_opts *opts, err *e) {
  if (!out || !h) return err_set(e, ERR_INVALID_ARGUMENT, "conv: NULL %s", !out ? "out" : "handle");
  *out = NULL;
  int ho = 0, wo = 0;  // set by the validate call on success; GCC -O3 cannot see that
  TRY(conv_validate(desc, &ho, &wo, e));
  eng_cuconv_opts o;
  size_t cap;
  TRY(eng_cuconv__opts("conv", opts, &o, &cap, e));

  eng_cuconv_plan *p = calloc(1, sizeof *p);
  if (!p) return err_set(e, ERR_RESOURCE_EXHAUSTED, "conv: out of host memory");
  p->d = conv_norm(desc);
  const eng_cuconv_desc *d = &p->d;
  p->ho = ho;
  p->wo = wo;
  int ph = d->pad_top < d->pad_bottom ? d->pad_top : d->pad_bottom;
  int pw = d->pad_left < d->pad_right ? d->pad_left : d->pad_right;
  p->et = d->pad_top - ph;
  p->eb = d->pad_bottom - ph;
  p->el = d->pad_left - pw;
  p->er = d->pad_right - pw;
  p->hp = d->h + p->et + p->eb;
  p->wp = d->w + p->el + p->er;
  p->explicit_pad = p->et || p->eb || p->el || p->er;
  size_t es = eng_cuconv__esize(d->dtype);
  if (p->explicit_pad) p->pad_bytes = eng_cuconv__align256((size_t)d->n * d->c * p->hp * p->wp * es);

  // borrowed for the trials, freed below
  void *bx = NULL, *bw = NULL, *by = NULL, *bz = NULL, *bb = NULL, *bws = NULL;
  cudaStream_t s = NULL;
  cudaEvent_t ev0 = NULL, ev1 = NULL;
  bool stream_set = false;
  cand cands[40];
  int n = 0, rc;
  if ((rc = conv_descriptors(p, e)) != 0) goto fail;
  if (p->pad_bytes > cap) {
    rc = err_set(e, ERR_UNIMPLEMENTED, "conv: the padded input (%zu bytes) exceeds the workspace cap %zu",
                 p->pad_bytes, cap);
    goto fail;
  }
  if ((rc = conv_candidates(p, h, cap, cands, (int)(sizeof cands / sizeof cands[0]), &n, e)) != 0)
    goto fail;
  if (n == 0) {
    rc = err_set(e, ERR_UNIMPLEMENTED, "conv: cuDNN offers no algorithm within %zu workspace bytes", cap);
    goto fail;
  }
  size_t ws_max = 0;
  for (int i = 0; i < n; i++)
    if (cands[i].ws > ws_max) ws_max = cands[i].ws;
  size_t yb = (size_t)d->n * d->k * ho * wo * es;
#define STEP(call)                             \
  do {                                         \
    if ((rc = CUDA_OK(e, call)) != 0) goto fail; \
  } while (0)
  STEP(cudaMalloc(&bx, (size_t)d->n * d->c * d->h * d->w * es));
  STEP(cudaMalloc(&bw, (size_t)d->k * (d->c / d->groups) * d->r * d->s * es));
  STEP(cudaMalloc(&by, yb));
  if (d->has_z) STEP(cudaMalloc(&bz, yb));
  if (d->has_bias) STEP(cudaMalloc(&bb, (size_t)d->k * es));
  if (p->pad_bytes + ws_max) STEP(cudaMalloc(&bws, p->pad_bytes + ws_max));
  if (needs_epilogue(d) && !d->has_bias) {
    STEP(cudaMalloc(&p->zero_bias, (size_t)d->k * es));
    STEP(cudaMemset(p->zero_bias, 0, (size_t)d->k * es));
  }
  STEP(cudaMemset(bx, 0, (size_t)d->n * d->c * d->h * d->w * es));
  STEP(cudaMemset(bw, 0, (size_t)d->k * (d->c / d->groups) * d->r * d->s * es));
  if (bz) STEP(cudaMemset(bz, 0, yb));
  if (bb) STEP(cudaMemset(bb, 0, (size_t)d->k * es));
  STEP(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  STEP(cudaEventCreate(&ev0));
  STEP(cudaEventCreate(&ev1));
  // the timing runs on a stream of its own; afterwards the handle is left on the default stream,
  // never 'restored' to the caller's, which may be gone by then (cuDNN records an event on
  // whatever stream it is given: a destroyed one crashed); every run sets its stream first
  if ((rc = CUDNN_OK(e, cudnnSetStream(h->h, s))) != 0) goto fail;
  stream_set = true;

#undef STEP

  conv_trial tr = {.p = p, .cands = cands, .h = h->h, .x = bx, .w = bw, .bias = bb, .z = bz, .y = by, .ws = bws};
  eng_cuconv__trials trials = {.n = n, .search = o.search, .run = conv_try, .note = conv_note, .plan = &tr,
                               .s = s, .ev0 = ev0, .ev1 = ev1, .log = p->log, .log_cap = sizeof p->log};
  int best = -1;
  float best_ms = 0;
  err first = {0};
  if ((rc = eng_cuconv__try_candidates(&trials, &best, &best_ms, &first, e)) != 0) goto fail;
  if (best < 0) {
    rc = err_set(e, ERR_UNIMPLEMENTED, "conv: none of %d cuDNN candidates runs this shape; first: %s", n,
                 first.msg);
    goto fail;
  }
  p->chosen = cands[best];
  p->chosen.ms = best_ms;
  if (first.code) eng_cuconv__log(p->log, sizeof p->log, "; first refusal: %s", first.msg);
  if ((rc = CUDNN_OK(e, cudnnSetConvolutionMathType(p->cd, p->chosen.math))) != 0) goto fail;
  (void)cudnnSetStream(h->h, NULL);
  stream_set = false;
  cudaFree(bx), cudaFree(bw), cudaFree(by), cudaFree(bz), cudaFree(bb), cudaFree(bws);
  cudaEventDestroy(ev0), cudaEventDestroy(ev1), cudaStreamDestroy(s);
  *out = p;
  return 0;
fail:
  if (stream_set) (void)cudnnSetStream(h->h, NULL);
  if (s) (void)cudaStreamSynchronize(s);
  cudaFree(bx), cudaFree(bw), cudaFree(by), cudaFree(bz), cudaFree(bb), cudaFree(bws);
  if (ev0) cudaEventDestroy(ev0);
  if (ev1) cudaEventDestroy(ev1);
  if (s) cudaStreamDestroy(s);
  eng_cuconv_plan_destroy(p);
  return rc;
}

int eng_cuconv_run(const eng_cuconv_plan *p, eng_cudnn *h, cudaStream_t stream, const void *x,
                   const void *w, const void *bias, const void *z, void *y, void *workspace,
                   size_t workspace_bytes, err *e) {
  if (!p || !h || !x || !w || !y)
    return err_set(e, ERR_INVALID_ARGUMENT, "conv: NULL %s",
                   !p ? "plan" : !h ? "handle" : !x ? "x" : !w ? "w" : "y");
  if (p->d.has_bias != (bias != NULL) || p->d.has_z != (z != NULL))
    return err_set(e, ERR_INVALID_ARGUMENT, "conv: the plan %s a bias and %s a residual z",
                   p->d.has_bias ? "takes" : "takes no", p->d.has_z ? "takes" : "takes no");
  TRY(eng_cuconv__check_ws("conv", eng_cuconv_plan_workspace(p), workspace, workspace_bytes, e));
  CUDNN_TRY(e, cudnnSetStream(h->h, stream));
  return conv_enqueue(p, &p->chosen, h->h, stream, x, w, bias, z, y, workspace, e);
}

#else  // no cuDNN in this build: the GPU entry points say so

struct eng_cudnn {
  int unused;
};
struct eng_cuconv_plan {
  eng_cuconv_desc d;
};

bool eng_cuconv_available(void) { return false; }
size_t eng_cudnn_version(void) { return 0; }
int eng_cudnn_create(eng_cudnn **out, err *e) {
  if (out) *out = NULL;
  return NO_CUDNN(e);
}
void eng_cudnn_destroy(eng_cudnn *h) { (void)h; }
int eng_cuconv_plan_create(eng_cuconv_plan **out, eng_cudnn *h, const eng_cuconv_desc *d,
                           const eng_cuconv_opts *opts, err *e) {
  (void)h, (void)d, (void)opts;
  if (out) *out = NULL;
  return NO_CUDNN(e);
}
void eng_cuconv_plan_destroy(eng_cuconv_plan *p) { (void)p; }
size_t eng_cuconv_plan_workspace(const eng_cuconv_plan *p) {
  (void)p;
  return 0;
}
void eng_cuconv_plan_info(const eng_cuconv_plan *p, eng_cuconv_info *info) {
  (void)p;
  memset(info, 0, sizeof *info);
  info->log = "";
}
const eng_cuconv_desc *eng_cuconv_plan_desc(const eng_cuconv_plan *p) { return &p->d; }
int eng_cuconv_run(const eng_cuconv_plan *p, eng_cudnn *h, cudaStream_t stream, const void *x,
                   const void *w, const void *bias, const void *z, void *y, void *workspace,
                   size_t workspace_bytes, err *e) {
  (void)p, (void)h, (void)stream, (void)x, (void)w, (void)bias, (void)z, (void)y, (void)workspace,
      (void)workspace_bytes;
  return NO_CUDNN(e);
}

#endif
