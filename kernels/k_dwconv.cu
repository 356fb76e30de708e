// kernels/k_dwconv.cu: depthwise 2-D convolution on NHWC activations with
// its epilogue (bias, residual, activation) fused, for the engine's
// depthwise Convs (groups == C == K) that run NHWC. cuDNN's picks for these
// are slow: its grouped direct kernel took two thirds of MobileNetV3-Large
// FP16's device time at batch 32 (ncu, H100), and the timed picks are not
// much better. A depthwise convolution does R*S multiply-adds per element it
// reads, so it is memory-bound: one thread per (output pixel, group of
// channels), each tap one 16-byte (8 halves, 4 floats) or 4-byte (2 halves)
// load of neighbouring channels, so a warp reads whole cache lines; the
// overlapping windows of neighbouring pixels hit in L1/L2. The weights
// ([C][R][S], a few KB) are read through the read-only cache. Sums in
// float (fmaf, taps in r-major order), each output rounded once.
#include <limits.h>
#include <math.h>

#include "kernels/k_cuda_common.cuh"

namespace {

struct geo {
  int h, w, c, oh, ow, r, s, pt, pl, sh, sw, dh, dw;
  int act;
  float clip_max, alpha, beta;
};

// HardSigmoid and HardSwish as k_unop.cu (and the CPU reference) compute
// them: no contraction into an fma, NaN kept.
__device__ __forceinline__ float hard_sigmoid(float v, float alpha, float beta) {
  float t = __fadd_rn(__fmul_rn(alpha, v), beta);
  return t != t ? t : fmaxf(0.0f, fminf(1.0f, t));
}

__device__ __forceinline__ float dw_act(float v, const geo &g) {
  switch (g.act) {
    case K_DW_ACT_RELU:
      return v < 0.0f ? 0.0f : v;
    case K_DW_ACT_CLIP:
      return fminf(fmaxf(v, 0.0f), g.clip_max);
    case K_DW_ACT_SIGMOID:
      return 1.0f / (1.0f + expf(-v));
    case K_DW_ACT_TANH:
      return tanhf(v);
    case K_DW_ACT_SWISH:
      return v / (1.0f + expf(-v));
    case K_DW_ACT_HARD_SIGMOID:
      return hard_sigmoid(v, g.alpha, g.beta);
    case K_DW_ACT_HARD_SWISH: {
      float t = hard_sigmoid(v, 1.0f / 6.0f, 0.5f);
      return t != t ? t : __fmul_rn(v, t);
    }
    default:
      return v;
  }
}

// V channels per thread; I the index type (32-bit where the output allows:
// the index split below is three divisions per thread).
template <class T, int V, class I>
__global__ void dw_kernel(T *y, const T *__restrict__ x, const T *__restrict__ w,
                          const T *__restrict__ bias, const T *z, geo g, I total) {
  typedef k_vec<T, V> vec;
  const I groups = (I)(g.c / V);
  const int rs = g.r * g.s;
  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (I)gridDim.x * blockDim.x) {
    I p = i / groups;
    int ch = (int)(i - p * groups) * V;
    I q = p / (I)g.ow;
    int ow = (int)(p - q * (I)g.ow);
    I n = q / (I)g.oh;
    int oh = (int)(q - n * (I)g.oh);
    float acc[V];
#pragma unroll
    for (int k = 0; k < V; k++) acc[k] = 0.0f;
    const int ih0 = oh * g.sh - g.pt, iw0 = ow * g.sw - g.pl;
    const T *xn = x + (size_t)n * g.h * g.w * g.c + ch;
    const T *wc = w + (size_t)ch * rs;
    for (int r = 0; r < g.r; r++) {
      int ih = ih0 + r * g.dh;
      if ((unsigned)ih >= (unsigned)g.h) continue;
      const T *xr = xn + (size_t)ih * g.w * g.c;
      for (int s = 0; s < g.s; s++) {
        int iw = iw0 + s * g.dw;
        if ((unsigned)iw >= (unsigned)g.w) continue;
        vec xv = *reinterpret_cast<const vec *>(xr + (size_t)iw * g.c);
        const int t = r * g.s + s;
#pragma unroll
        for (int k = 0; k < V; k++) acc[k] = fmaf(k_ld(xv.v[k]), k_ld(__ldg(wc + k * rs + t)), acc[k]);
      }
    }
    const size_t o = (size_t)p * g.c + ch;  // p = the output pixel
    vec out;
    if (z) {
      vec zv = *reinterpret_cast<const vec *>(z + o);
#pragma unroll
      for (int k = 0; k < V; k++) out.v[k] = zv.v[k];
    }
#pragma unroll
    for (int k = 0; k < V; k++) {
      float v = acc[k];
      if (bias) v += k_ld(__ldg(bias + ch + k));
      if (z) v += k_ld(out.v[k]);
      out.v[k] = k_st<T>(dw_act(v, g));
    }
    *reinterpret_cast<vec *>(y + o) = out;
  }
}

template <class T, int V>
void launch_v(T *y, const T *x, const T *w, const T *bias, const T *z, const geo &g, size_t total,
              cudaStream_t stream) {
  size_t threads = total / V;
  unsigned blocks = k_blocks_for(threads, K_THREADS);
  if (threads <= UINT32_MAX - (size_t)K_MAX_BLOCKS * K_THREADS)
    dw_kernel<T, V, uint32_t><<<blocks, K_THREADS, 0, stream>>>(y, x, w, bias, z, g, (uint32_t)threads);
  else
    dw_kernel<T, V, size_t><<<blocks, K_THREADS, 0, stream>>>(y, x, w, bias, z, g, threads);
}

// The widest channel group that C and the pointers allow.
template <class T>
void launch_t(T *y, const T *x, const T *w, const T *bias, const T *z, const geo &g, size_t total,
              cudaStream_t stream) {
  const int wide = 16 / (int)sizeof(T);  // 8 halves or 4 floats
  if (g.c % wide == 0 && k_aligned(y, 16) && k_aligned(x, 16) && (!z || k_aligned(z, 16))) {
    if constexpr (sizeof(T) == 2)
      launch_v<T, 8>(y, x, w, bias, z, g, total, stream);
    else
      launch_v<T, 4>(y, x, w, bias, z, g, total, stream);
    return;
  }
  if constexpr (k_pairs<T>::value) {
    const unsigned pb = 2 * sizeof(T);
    if (g.c % 2 == 0 && k_aligned(y, pb) && k_aligned(x, pb) && (!z || k_aligned(z, pb))) {
      launch_v<T, 2>(y, x, w, bias, z, g, total, stream);
      return;
    }
  }
  launch_v<T, 1>(y, x, w, bias, z, g, total, stream);
}

}  // namespace

extern "C" int k_dwconv_cuda(void *y, const void *x, const void *w, const void *bias, const void *z,
                             k_elem et, const k_dwconv_args *a, cudaStream_t stream, err *e) {
  const char *kname = "k_dwconv_cuda";
  if (!a) return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL arguments", kname);
  if (et != K_F32 && et != K_F16)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: element type %d is not F32 or F16", kname, (int)et);
  if (a->n < 0 || a->h < 0 || a->w < 0 || a->c < 0 || a->oh < 0 || a->ow < 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: negative dims (x %dx%dx%dx%d, y %dx%d)", kname,
                   a->n, a->h, a->w, a->c, a->oh, a->ow);
  if (a->r < 1 || a->s < 1 || a->stride_h < 1 || a->stride_w < 1 || a->dil_h < 1 || a->dil_w < 1 ||
      a->pad_top < 0 || a->pad_left < 0)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "%s: bad window (kernel %dx%d, strides %d,%d, dilations %d,%d, pads %d,%d)",
                   kname, a->r, a->s, a->stride_h, a->stride_w, a->dil_h, a->dil_w, a->pad_top,
                   a->pad_left);
  if ((int)a->act < K_DW_ACT_NONE || (int)a->act > K_DW_ACT_HARD_SWISH)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: unknown activation %d", kname, (int)a->act);
  if (a->act == K_DW_ACT_CLIP && !(a->clip_max > 0.0f))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: clip needs clip_max > 0 (got %g)", kname,
                   (double)a->clip_max);
  if (a->act == K_DW_ACT_HARD_SIGMOID && !(isfinite(a->alpha) && isfinite(a->beta)))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: hard_sigmoid needs finite alpha, beta (got %g, %g)",
                   kname, (double)a->alpha, (double)a->beta);
  // the kernel's int arithmetic: every tap's row and column, and r * s
  if ((int64_t)(a->oh > 0 ? a->oh - 1 : 0) * a->stride_h + (int64_t)(a->r - 1) * a->dil_h > INT_MAX ||
      (int64_t)(a->ow > 0 ? a->ow - 1 : 0) * a->stride_w + (int64_t)(a->s - 1) * a->dil_w > INT_MAX ||
      (int64_t)a->r * a->s > INT_MAX)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: window exceeds int range", kname);
  size_t pix, total;
  if (!k_mul3((size_t)a->n, (size_t)a->oh, (size_t)a->ow, &pix) || !k_mul3(pix, (size_t)a->c, 1, &total))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: output size overflows", kname);
  if (total == 0) return 0;
  if (!y || !x || !w)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p x=%p w=%p)", kname, y, x, w);
  geo g = {a->h, a->w, a->c, a->oh, a->ow, a->r, a->s, a->pad_top, a->pad_left,
           a->stride_h, a->stride_w, a->dil_h, a->dil_w, (int)a->act, a->clip_max, a->alpha, a->beta};
  if (et == K_F32)
    launch_t<float>((float *)y, (const float *)x, (const float *)w, (const float *)bias,
                    (const float *)z, g, total, stream);
  else
    launch_t<__half>((__half *)y, (const __half *)x, (const __half *)w, (const __half *)bias,
                     (const __half *)z, g, total, stream);
  K_LAUNCH_CHECK(e, kname);
  return 0;
}
