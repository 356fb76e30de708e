// engine/cuda/cuda_pool.c: pooling plans (ONNX MaxPool, AveragePool and
// their Global forms) on cuDNN's legacy C API (cuda_conv.h; the shared
// plumbing is in cuda_conv.c, declared in cuda_conv_internal.h).
//
// Symmetric pads without a ceil_mode overhang are exactly
// cudnnPoolingForward. Otherwise the input is padded explicitly (-inf for
// max, 0 for average) to exactly the extent the output needs, cuDNN pools it
// without padding, and averages whose ONNX divisor differs from the window
// area at some positions are multiplied by a per-position map (cudnnOpTensor
// with broadcast), which covers count_include_pad both ways and ceil_mode's
// clipped windows.
#include "engine/cuda/cuda_conv.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_conv_internal.h"
#include "kernels/k_ref.h"

// --- shapes (built with or without cuDNN)

static eng_cupool_desc pool_norm(const eng_cupool_desc *d) {
  eng_cupool_desc n = *d;
  if (n.global) {
    n.kh = n.h;
    n.kw = n.w;
    n.pad_top = n.pad_left = n.pad_bottom = n.pad_right = 0;
    n.stride_h = n.stride_w = 1;
    n.ceil_mode = false;
  }
  n.stride_h = eng_cuconv__or1(n.stride_h);
  n.stride_w = eng_cuconv__or1(n.stride_w);
  if (n.dtype == ENG_CUCONV_FP32_TF32) n.dtype = ENG_CUCONV_FP32;
  return n;
}

// One dimension of ONNX's output size rule. With ceil_mode, a last window
// that would start at or past the input plus the leading pad is dropped
// (PyTorch and onnxruntime do the same).
static long long pool_out_1d(long long in, int k, int s, int pad0, int pad1, bool ceil_mode) {
  long long span = in + pad0 + pad1 - k;
  if (span < 0) return 0;
  long long out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (out - 1) * s >= in + pad0) out--;
  return out;
}

static int pool_validate(const eng_cupool_desc *d, int *ho, int *wo, err *e) {
  if (!d) return err_set(e, ERR_INVALID_ARGUMENT, "pool: NULL descriptor");
  eng_cupool_desc n = pool_norm(d);
  if (n.n < 1 || n.c < 1 || n.h < 1 || n.w < 1 || n.kh < 1 || n.kw < 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "pool: sizes must be >= 1 (n=%d c=%d h=%d w=%d k=%dx%d)",
                   n.n, n.c, n.h, n.w, n.kh, n.kw);
  if (n.pad_top < 0 || n.pad_left < 0 || n.pad_bottom < 0 || n.pad_right < 0 || n.stride_h < 1 ||
      n.stride_w < 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "pool: negative pad or stride");
  if ((unsigned)n.mode > ENG_CUPOOL_AVG_EXCLUDE_PAD || (unsigned)n.dtype > ENG_CUCONV_FP16 ||
      (unsigned)n.layout > ENG_CUCONV_NHWC)
    return err_set(e, ERR_INVALID_ARGUMENT, "pool: unknown mode %d, dtype %d or layout %d",
                   (int)n.mode, (int)n.dtype, (int)n.layout);
  long long oh = pool_out_1d(n.h, n.kh, n.stride_h, n.pad_top, n.pad_bottom, n.ceil_mode);
  long long ow = pool_out_1d(n.w, n.kw, n.stride_w, n.pad_left, n.pad_right, n.ceil_mode);
  if (oh < 1 || ow < 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "pool: the %dx%d window does not fit the padded input",
                   n.kh, n.kw);
  long long hp = (oh - 1) * n.stride_h + n.kh, wp = (ow - 1) * n.stride_w + n.kw;
  if (hp < n.h + n.pad_top) hp = n.h + n.pad_top;
  if (wp < n.w + n.pad_left) wp = n.w + n.pad_left;
  if ((long long)n.n * n.c * hp * wp > INT_MAX)
    return err_set(e, ERR_UNIMPLEMENTED, "pool: a tensor has more than 2^31-1 elements");
  if (ho) *ho = (int)oh;
  if (wo) *wo = (int)ow;
  return 0;
}

int eng_cupool_out_dims(const eng_cupool_desc *d, int *ho, int *wo, err *e) {
  return pool_validate(d, ho, wo, e);
}

size_t eng_cupool_x_bytes(const eng_cupool_desc *d) {
  if (pool_validate(d, NULL, NULL, NULL)) return 0;
  eng_cupool_desc n = pool_norm(d);
  return (size_t)n.n * n.c * n.h * n.w * eng_cuconv__esize(n.dtype);
}

size_t eng_cupool_y_bytes(const eng_cupool_desc *d) {
  int ho = 0, wo = 0;  // set by the validate call on success; GCC -O3 cannot see that
  if (pool_validate(d, &ho, &wo, NULL)) return 0;
  eng_cupool_desc n = pool_norm(d);
  return (size_t)n.n * n.c * ho * wo * eng_cuconv__esize(n.dtype);
}

#if defined(INFERD_HAVE_CUDNN) && INFERD_HAVE_CUDNN

// --- pooling

struct eng_cupool_plan {
  eng_cupool_desc d;  // normalised
  int ho, wo;
  bool explicit_pad, rescaled;
  int hp, wp;          // padded input extents (explicit_pad)
  size_t pad_bytes;    // at workspace offset 0
  size_t tmp_bytes;    // pooled result before the rescale, after the padded input
  cudnnTensorDescriptor_t xd, yd, md;
  cudnnPoolingDescriptor_t pd;
  cudnnOpTensorDescriptor_t od;
  void *map;  // [ho, wo] of window area / divisor, in the storage type
  uint8_t ninf[4];  // what cudnnSetTensor takes for -inf in this tensor's type (half_ninf)
};

void eng_cupool_plan_destroy(eng_cupool_plan *p) {
  if (!p) return;
  if (p->xd) (void)cudnnDestroyTensorDescriptor(p->xd);
  if (p->yd) (void)cudnnDestroyTensorDescriptor(p->yd);
  if (p->md) (void)cudnnDestroyTensorDescriptor(p->md);
  if (p->pd) (void)cudnnDestroyPoolingDescriptor(p->pd);
  if (p->od) (void)cudnnDestroyOpTensorDescriptor(p->od);
  if (p->map) (void)cudaFree(p->map);
  (void)cudaGetLastError();
  free(p);
}

size_t eng_cupool_plan_workspace(const eng_cupool_plan *p) { return p->pad_bytes + p->tmp_bytes; }

void eng_cupool_plan_info(const eng_cupool_plan *p, eng_cupool_info *info) {
  memset(info, 0, sizeof *info);
  info->explicit_pad = p->explicit_pad;
  info->rescaled = p->rescaled;
  info->workspace_bytes = eng_cupool_plan_workspace(p);
}

// ONNX's divisor along one dimension for output index i: the window clipped
// to the padded extent (count_include_pad) or to the input.
static int pool_count_1d(int i, int s, int k, int pad0, int pad1, int in, bool include_pad) {
  int lo = i * s - pad0, hi = lo + k;
  int a = include_pad ? -pad0 : 0, b = include_pad ? in + pad1 : in;
  if (lo < a) lo = a;
  if (hi > b) hi = b;
  return hi > lo ? hi - lo : 0;
}

// The value to hand cudnnSetTensor for -inf in a HALF tensor. Its
// documentation says the value has the tensor's type, but cuDNN 9.19 reads
// a float there (the scaling-parameter rule) and turned the half 0xfc00
// into +0, so max pools over an explicit pad lost to their padding. Asked
// once per plan rather than assumed: a float first, then a half.
static int half_ninf(cudnnHandle_t h, uint8_t out[4], err *e) {
  const float f = -INFINITY;
  const uint16_t hv = 0xfc00;
  const void *tries[2] = {&f, &hv};
  size_t sizes[2] = {sizeof f, sizeof hv};
  cudnnTensorDescriptor_t td = NULL;
  void *dv = NULL;
  int rc = 0, found = -1;
  if (cudnnCreateTensorDescriptor(&td) != CUDNN_STATUS_SUCCESS ||
      cudnnSetTensor4dDescriptor(td, CUDNN_TENSOR_NCHW, CUDNN_DATA_HALF, 1, 1, 1, 1) !=
          CUDNN_STATUS_SUCCESS)
    rc = err_set(e, ERR_INTERNAL, "pool: a HALF tensor descriptor failed");
  if (!rc) rc = CUDA_OK(e, cudaMalloc(&dv, 256));
  // the default stream, waited for below (the handle's own is set again by every run)
  if (!rc && cudnnSetStream(h, NULL) != CUDNN_STATUS_SUCCESS)
    rc = err_set(e, ERR_INTERNAL, "pool: cudnnSetStream failed");
  for (int i = 0; i < 2 && !rc && found < 0; i++) {
    uint16_t got = 0;
    if (cudnnSetTensor(h, td, dv, tries[i]) != CUDNN_STATUS_SUCCESS) continue;
    rc = CUDA_OK(e, cudaMemcpy(&got, dv, sizeof got, cudaMemcpyDeviceToHost));
    if (!rc && got == hv) found = i;
  }
  if (dv) (void)cudaFree(dv);
  if (td) (void)cudnnDestroyTensorDescriptor(td);
  if (rc) return rc;
  if (found < 0) return err_set(e, ERR_UNIMPLEMENTED, "pool: cudnnSetTensor cannot write a half -inf");
  memset(out, 0, 4);
  memcpy(out, tries[found], sizes[found]);
  return 0;
}

static int pool_build(eng_cupool_plan *p, cudnnHandle_t h, err *e) {
  const eng_cupool_desc *d = &p->d;
  cudnnDataType_t t = eng_cuconv__dt(d->dtype);
  cudnnTensorFormat_t f = eng_cuconv__fmt(d->layout);
  size_t es = eng_cuconv__esize(d->dtype);
  bool sym = d->pad_top == d->pad_bottom && d->pad_left == d->pad_right && d->pad_top < d->kh &&
             d->pad_left < d->kw;
  // cuDNN's output size: floor, symmetric pads
  int ch = (d->h + 2 * d->pad_top - d->kh) / d->stride_h + 1;
  int cw = (d->w + 2 * d->pad_left - d->kw) / d->stride_w + 1;
  p->explicit_pad = !(sym && ch == p->ho && cw == p->wo);
  cudnnPoolingMode_t mode = d->mode == ENG_CUPOOL_MAX ? CUDNN_POOLING_MAX
                            : d->mode == ENG_CUPOOL_AVG_INCLUDE_PAD
                                ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  int ph = d->pad_top, pw = d->pad_left;
  p->hp = d->h;
  p->wp = d->w;
  if (p->explicit_pad) {
    // exactly the extent the output's windows cover; cuDNN pads nothing
    p->hp = (p->ho - 1) * d->stride_h + d->kh;
    p->wp = (p->wo - 1) * d->stride_w + d->kw;
    ph = pw = 0;
    p->pad_bytes = eng_cuconv__align256((size_t)d->n * d->c * p->hp * p->wp * es);
    if (d->mode == ENG_CUPOOL_MAX) {
      if (d->dtype == ENG_CUCONV_FP16) {
        TRY(half_ninf(h, p->ninf, e));
      } else {
        const float ninf = -INFINITY;
        memcpy(p->ninf, &ninf, sizeof ninf);
      }
    } else {
      // pool the zero-padded buffer as a plain window average, then rescale
      mode = CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
      bool inc = d->mode == ENG_CUPOOL_AVG_INCLUDE_PAD;
      float area = (float)d->kh * (float)d->kw;
      size_t m = (size_t)p->ho * p->wo;
      float *map = malloc(m * sizeof *map);
      if (!map) return err_set(e, ERR_RESOURCE_EXHAUSTED, "pool: out of host memory");
      for (int i = 0; i < p->ho; i++)
        for (int j = 0; j < p->wo; j++) {
          int cnt = pool_count_1d(i, d->stride_h, d->kh, d->pad_top, d->pad_bottom, d->h, inc) *
                    pool_count_1d(j, d->stride_w, d->kw, d->pad_left, d->pad_right, d->w, inc);
          map[(size_t)i * p->wo + j] = cnt ? area / (float)cnt : 0.0f;
          if (cnt != d->kh * d->kw) p->rescaled = true;
        }
      if (p->rescaled) {
        void *host = map;
        uint16_t *h16 = NULL;
        if (d->dtype == ENG_CUCONV_FP16) {
          h16 = malloc(m * sizeof *h16);
          if (!h16) {
            free(map);
            return err_set(e, ERR_RESOURCE_EXHAUSTED, "pool: out of host memory");
          }
          k_f32_to_f16(h16, map, m);
          host = h16;
        }
        int rc = CUDA_OK(e, cudaMalloc(&p->map, m * es));
        if (!rc) rc = CUDA_OK(e, cudaMemcpy(p->map, host, m * es, cudaMemcpyHostToDevice));
        free(h16);
        if (rc) {
          free(map);
          return rc;
        }
        p->tmp_bytes = eng_cuconv__align256((size_t)d->n * d->c * p->ho * p->wo * es);
      }
      free(map);
    }
  }
  CUDNN_TRY(e, cudnnCreateTensorDescriptor(&p->xd));
  CUDNN_TRY(e, cudnnCreateTensorDescriptor(&p->yd));
  CUDNN_TRY(e, cudnnCreatePoolingDescriptor(&p->pd));
  CUDNN_TRY(e, cudnnSetTensor4dDescriptor(p->xd, f, t, d->n, d->c, p->hp, p->wp));
  CUDNN_TRY(e, cudnnSetTensor4dDescriptor(p->yd, f, t, d->n, d->c, p->ho, p->wo));
  CUDNN_TRY(e, cudnnSetPooling2dDescriptor(p->pd, mode, CUDNN_PROPAGATE_NAN, d->kh, d->kw, ph, pw,
                                           d->stride_h, d->stride_w));
  int n_, c_, h_, w_;
  CUDNN_TRY(e, cudnnGetPooling2dForwardOutputDim(p->pd, p->xd, &n_, &c_, &h_, &w_));
  if (h_ != p->ho || w_ != p->wo)
    return err_set(e, ERR_INTERNAL, "pool: cuDNN's output %dx%d is not ours %dx%d", h_, w_, p->ho,
                   p->wo);
  if (p->rescaled) {
    CUDNN_TRY(e, cudnnCreateTensorDescriptor(&p->md));
    CUDNN_TRY(e, cudnnSetTensor4dDescriptor(p->md, CUDNN_TENSOR_NCHW, t, 1, 1, p->ho, p->wo));
    CUDNN_TRY(e, cudnnCreateOpTensorDescriptor(&p->od));
    CUDNN_TRY(e, cudnnSetOpTensorDescriptor(p->od, CUDNN_OP_TENSOR_MUL, CUDNN_DATA_FLOAT,
                                            CUDNN_PROPAGATE_NAN));
  }
  return 0;
}

int eng_cupool_plan_create(eng_cupool_plan **out, eng_cudnn *h, const eng_cupool_desc *desc, err *e) {
  if (!out || !h) return err_set(e, ERR_INVALID_ARGUMENT, "pool: NULL %s", !out ? "out" : "handle");
  *out = NULL;
  int ho = 0, wo = 0;  // set by the validate call on success; GCC -O3 cannot see that
  TRY(pool_validate(desc, &ho, &wo, e));
  eng_cupool_plan *p = calloc(1, sizeof *p);
  if (!p) return err_set(e, ERR_RESOURCE_EXHAUSTED, "pool: out of host memory");
  p->d = pool_norm(desc);
  p->ho = ho;
  p->wo = wo;
  int rc = pool_build(p, h->h, e);
  if (rc) {
    eng_cupool_plan_destroy(p);
    return rc;
  }
  *out = p;
  return 0;
}

int eng_cupool_run(const eng_cupool_plan *p, eng_cudnn *h, cudaStream_t stream, const void *x,
                   void *y, void *workspace, size_t workspace_bytes, err *e) {
  if (!p || !h || !x || !y)
    return err_set(e, ERR_INVALID_ARGUMENT, "pool: NULL %s", !p ? "plan" : !h ? "handle" : !x ? "x" : "y");
  TRY(eng_cuconv__check_ws("pool", eng_cupool_plan_workspace(p), workspace, workspace_bytes, e));
  const eng_cupool_desc *d = &p->d;
  size_t es = eng_cuconv__esize(d->dtype);
  CUDNN_TRY(e, cudnnSetStream(h->h, stream));
  const void *xin = x;
  if (p->explicit_pad) {
    if (d->mode == ENG_CUPOOL_MAX) {
      // -inf, so padding never wins a max (encoded as half_ninf found at plan time)
      CUDNN_TRY(e, cudnnSetTensor(h->h, p->xd, workspace, p->ninf));
    } else {
      CUDA_TRY(e, cudaMemsetAsync(workspace, 0, p->pad_bytes, stream));
    }
    // the input rows and columns that some window reads
    int rows = d->h < p->hp - d->pad_top ? d->h : p->hp - d->pad_top;
    int cols = d->w < p->wp - d->pad_left ? d->w : p->wp - d->pad_left;
    if (d->layout == ENG_CUCONV_NCHW)
      TRY(eng_cuconv__copy_into_padded(workspace, (size_t)p->wp * es, (size_t)p->hp, (size_t)d->pad_left * es,
                           (size_t)d->pad_top, x, (size_t)d->w * es, (size_t)d->h,
                           (size_t)d->n * d->c, (size_t)cols * es, (size_t)rows, stream, e));
    else
      TRY(eng_cuconv__copy_into_padded(workspace, (size_t)p->wp * d->c * es, (size_t)p->hp,
                           (size_t)d->pad_left * d->c * es, (size_t)d->pad_top, x,
                           (size_t)d->w * d->c * es, (size_t)d->h, (size_t)d->n,
                           (size_t)cols * d->c * es, (size_t)rows, stream, e));
    xin = workspace;
  }
  const float one = 1.0f, zero = 0.0f;
  void *dst = p->rescaled ? (char *)workspace + p->pad_bytes : y;
  CUDNN_TRY(e, cudnnPoolingForward(h->h, p->pd, &one, p->xd, xin, &zero, p->yd, dst));
  if (p->rescaled)
    CUDNN_TRY(e, cudnnOpTensor(h->h, p->od, &one, p->yd, dst, &one, p->md, p->map, &zero, p->yd, y));
  return 0;
}

#else  // no cuDNN in this build: the GPU entry points say so

struct eng_cupool_plan {
  int unused;
};

int eng_cupool_plan_create(eng_cupool_plan **out, eng_cudnn *h, const eng_cupool_desc *d, err *e) {
  (void)h, (void)d;
  if (out) *out = NULL;
  return NO_CUDNN(e);
}
void eng_cupool_plan_destroy(eng_cupool_plan *p) { (void)p; }
size_t eng_cupool_plan_workspace(const eng_cupool_plan *p) {
  (void)p;
  return 0;
}
void eng_cupool_plan_info(const eng_cupool_plan *p, eng_cupool_info *info) {
  (void)p;
  memset(info, 0, sizeof *info);
}
int eng_cupool_run(const eng_cupool_plan *p, eng_cudnn *h, cudaStream_t stream, const void *x,
                   void *y, void *workspace, size_t workspace_bytes, err *e) {
  (void)p, (void)h, (void)stream, (void)x, (void)y, (void)workspace, (void)workspace_bytes;
  return NO_CUDNN(e);
}

#endif
