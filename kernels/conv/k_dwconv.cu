// kernels/conv/k_dwconv.cu: depthwise 2-D convolution on NHWC activations with
// its epilogue (bias, residual, activation) fused, for the engine's
// depthwise Convs (groups == C == K) that run NHWC. cuDNN's picks for these
// are slow: its grouped direct kernel took two thirds of MobileNetV3-Large
// FP16's device time at batch 32 (ncu, H100), and the timed picks are not
// much better. A depthwise convolution does R*S multiply-adds per element it
// reads, so it is memory-bound. Two kernels:
//   dw_tiled (3x3 and 5x5, stride 1 or 2, undilated, 16-byte channel
//     groups: every depthwise conv of MobileNet and EfficientNet): each
//     thread computes 1, 2 or 4 adjacent output pixels of W for 8 halves /
//     4 floats, loading the input columns their windows share once; the
//     weights staged per block in shared memory as [tap][channel].
//   dw_kernel (everything else, and k_dwconv__v1_cuda): one thread per
//     (output pixel, group of channels), each tap one 16-byte (8 halves, 4
//     floats) or 4-byte (2 halves) load of neighbouring channels, so a warp
//     reads whole cache lines; the overlapping windows of neighbouring
//     pixels hit in L1/L2; the weights ([C][R][S], a few KB) read through
//     the read-only cache.
// Both sum in float (fmaf, taps in r-major order), each output rounded
// once: for finite weights they give the same bits.
#include <limits.h>
#include <math.h>

#include "kernels/k_cuda_common.cuh"

namespace {

struct geo {
  int h, w, c, oh, ow, r, s, pt, pl, sh, sw, dh, dw;
  int act;
  float clip_max, alpha, beta;
  int in_act;  // applied to each x element as it is loaded (a skipped activation node's)
};

// HardSigmoid and HardSwish as kernels/elem/k_unop.cu (and the CPU reference) compute
// them: no contraction into an fma, NaN kept.
__device__ __forceinline__ float hard_sigmoid(float v, float alpha, float beta) {
  float t = __fadd_rn(__fmul_rn(alpha, v), beta);
  return t != t ? t : fmaxf(0.0f, fminf(1.0f, t));
}

__device__ __forceinline__ float dw_act(float v, int act, const geo &g) {
  switch (act) {
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

// The input's activation on V loaded elements, rounded back to T as the
// activation node would have stored them: the same bits as running it.
template <class T, int V>
__device__ __forceinline__ void in_act(k_vec<T, V> &xv, const geo &g) {
#pragma unroll
  for (int k = 0; k < V; k++) xv.v[k] = k_st<T>(dw_act(k_ld(xv.v[k]), g.in_act, g));
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
        if (g.in_act) in_act(xv, g);
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
      out.v[k] = k_st<T>(dw_act(v, g.act, g));
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


// --- the tiled path: square K x K windows (3 or 5), stride ST (1 or 2) in
// both dims, no dilation, V = 16 bytes of channels (MobileNet's and
// EfficientNet's depthwise convolutions). Each thread computes TW adjacent
// output pixels along W for its V channels: per window row it loads the
// (TW - 1) * ST + K input columns the TW windows share once, into
// registers, instead of K per output. The block's weights are staged once,
// transposed to [tap][channel] in shared memory, so a tap's V weights are
// one 16-byte load instead of V scalar loads from [C][R][S]. Threads of a
// block: cg channel groups (fastest, so a warp's loads are contiguous) by
// blockDim.x / cg tiles; blockIdx.y picks the block's cg channel groups.
// Taps are summed in the generic kernel's order (r-major, fmaf from 0), a
// tap outside x adding 0 * w, so both paths give the same bits (for
// finite weights: the generic kernel skips such a tap, 0 * inf is NaN).
constexpr int kTileMaxGroups = 64;  // cg <= 64: K*K*cg*16 bytes <= 25.6 KB of shared memory
// The launcher's cap on cg. A block stages K*K*cg*V weights for the
// K_THREADS / cg tiles it computes, so the weights it reads per tile grow as
// cg squared: at cg = 64 a block of 4 tiles read more weight bytes (from
// L2, strided) than activation bytes on the 7x7 and 14x14 layers of
// MobileNetV3 (C = 480-960), which ran at 150-420 GB/s. At 16, 16 tiles
// share each staging.
constexpr int kTileDefaultGroups = 16;

template <class T, int V, int K, int ST, int TW>
__global__ void __launch_bounds__(K_THREADS)
    dw_tiled(T *y, const T *__restrict__ x, const T *__restrict__ w, const T *__restrict__ bias,
             const T *z, geo g, int cg, int tiles_w, int tiles) {
  typedef k_vec<T, V> vec;
  extern __shared__ __align__(16) unsigned char dw_smem[];
  T *sw = reinterpret_cast<T *>(dw_smem);  // [K*K][cg*V]
  constexpr int KK = K * K, NCOL = (TW - 1) * ST + K;
  const int c0 = blockIdx.y * cg;                 // the block's first channel group
  const int cgn = min(cg, g.c / V - c0), cw = cg * V;  // groups it has; the smem row
  for (int i = threadIdx.x; i < KK * cgn * V; i += blockDim.x) {
    int tap = i / (cgn * V), cl = i - tap * (cgn * V);
    sw[tap * cw + cl] = w[(size_t)(c0 * V + cl) * KK + tap];
  }
  __syncthreads();
  const int gl = threadIdx.x % cg;
  const int tile = blockIdx.x * (blockDim.x / cg) + threadIdx.x / cg;
  if (gl >= cgn || tile >= tiles) return;
  const int q = tile / tiles_w, ow0 = (tile - q * tiles_w) * TW;
  const int n = q / g.oh, oh = q - n * g.oh;
  const int ch = (c0 + gl) * V;
  float acc[TW][V];
#pragma unroll
  for (int t = 0; t < TW; t++)
#pragma unroll
    for (int k = 0; k < V; k++) acc[t][k] = 0.0f;
  const int ih0 = oh * ST - g.pt, iw0 = ow0 * ST - g.pl;
  const T *xn = x + (size_t)n * g.h * g.w * g.c + ch;
#pragma unroll
  for (int r = 0; r < K; r++) {
    const int ih = ih0 + r;
    if ((unsigned)ih >= (unsigned)g.h) continue;
    const T *xr = xn + (size_t)ih * g.w * g.c;
    vec xv[NCOL];
#pragma unroll
    for (int c = 0; c < NCOL; c++) {
      const int iw = iw0 + c;
      if ((unsigned)iw < (unsigned)g.w) {
        xv[c] = *reinterpret_cast<const vec *>(xr + (size_t)iw * g.c);
        if (g.in_act) in_act(xv[c], g);
      } else {
#pragma unroll
        for (int k = 0; k < V; k++) xv[c].v[k] = k_st<T>(0.0f);
      }
    }
#pragma unroll
    for (int s = 0; s < K; s++) {
      const vec wv = *reinterpret_cast<const vec *>(sw + (r * K + s) * cw + gl * V);
      float wf[V];
#pragma unroll
      for (int k = 0; k < V; k++) wf[k] = k_ld(wv.v[k]);
#pragma unroll
      for (int t = 0; t < TW; t++)
#pragma unroll
        for (int k = 0; k < V; k++) acc[t][k] = fmaf(k_ld(xv[t * ST + s].v[k]), wf[k], acc[t][k]);
    }
  }
  float bv[V];
#pragma unroll
  for (int k = 0; k < V; k++) bv[k] = bias ? k_ld(__ldg(bias + ch + k)) : 0.0f;
#pragma unroll
  for (int t = 0; t < TW; t++) {
    if (ow0 + t >= g.ow) break;
    const size_t o = (((size_t)n * g.oh + oh) * g.ow + ow0 + t) * g.c + ch;
    vec out;
    if (z) out = *reinterpret_cast<const vec *>(z + o);
#pragma unroll
    for (int k = 0; k < V; k++) {
      float v = acc[t][k];
      if (bias) v += bv[k];
      if (z) v += k_ld(out.v[k]);
      out.v[k] = k_st<T>(dw_act(v, g.act, g));
    }
    *reinterpret_cast<vec *>(y + o) = out;
  }
}

// Two output pixels per thread. Measured (bench_k_dwconv, H100, 2026-11-25,
// MobileNetV3-Large's 15 depthwise convs at batch 32 FP16, ms per forward):
// TW = 1 0.500, TW = 2 0.458, TW = 4 0.581, and 0.532 for a rule that took
// the widest tile still filling one wave (the v1 kernel: 0.625). TW = 2 was
// the fastest or within 10% of it on 10 of the 12 shapes; the exceptions
// (112x112 stride 2: TW = 1; 7x7 x 960: TW = 4) are worth ~0.01 ms.
static int pick_tile(int ow) { return ow >= 2 ? 2 : 1; }

// Launches the tiled kernel for x's n images, or returns false where its
// int indexing or grid would not hold (the generic kernel runs instead).
template <class T, int V, int K, int ST>
bool launch_tiled(T *y, const T *x, const T *w, const T *bias, const T *z, const geo &g, int n,
                  int tile_w, int max_groups, cudaStream_t stream) {
  const int groups = g.c / V;
  const int cap = max_groups ? max_groups : kTileDefaultGroups;
  const int chunks = (groups + cap - 1) / cap;
  const int cg = (groups + chunks - 1) / chunks;
  if (chunks > 65535 || (int64_t)(g.ow + 4) * ST + K >= INT_MAX) return false;
  const size_t rows = (size_t)n * g.oh;
  const int tw = tile_w ? tile_w : pick_tile(g.ow);
  const int tiles_w = (g.ow + tw - 1) / tw;
  const size_t tiles = rows * tiles_w;
  if (tiles > (size_t)INT_MAX - K_THREADS) return false;
  const int tpb = K_THREADS / cg;  // tiles per block
  const dim3 grid((unsigned)((tiles + tpb - 1) / tpb), (unsigned)chunks);
  const unsigned threads = (unsigned)(tpb * cg);
  const size_t smem = (size_t)K * K * cg * V * sizeof(T);
  switch (tw) {
    case 4:
      dw_tiled<T, V, K, ST, 4><<<grid, threads, smem, stream>>>(y, x, w, bias, z, g, cg, tiles_w, (int)tiles);
      break;
    case 2:
      dw_tiled<T, V, K, ST, 2><<<grid, threads, smem, stream>>>(y, x, w, bias, z, g, cg, tiles_w, (int)tiles);
      break;
    default:
      dw_tiled<T, V, K, ST, 1><<<grid, threads, smem, stream>>>(y, x, w, bias, z, g, cg, tiles_w, (int)tiles);
  }
  return true;
}

// The tiled path where the window is one it has (see dw_tiled), else false.
template <class T, int V>
bool try_tiled(T *y, const T *x, const T *w, const T *bias, const T *z, const geo &g, int n,
               int tile_w, int max_groups, cudaStream_t stream) {
  if (g.r != g.s || g.sh != g.sw || g.dh != 1 || g.dw != 1) return false;
  if (g.r == 3 && g.sh == 1)
    return launch_tiled<T, V, 3, 1>(y, x, w, bias, z, g, n, tile_w, max_groups, stream);
  if (g.r == 3 && g.sh == 2)
    return launch_tiled<T, V, 3, 2>(y, x, w, bias, z, g, n, tile_w, max_groups, stream);
  if (g.r == 5 && g.sh == 1)
    return launch_tiled<T, V, 5, 1>(y, x, w, bias, z, g, n, tile_w, max_groups, stream);
  if (g.r == 5 && g.sh == 2)
    return launch_tiled<T, V, 5, 2>(y, x, w, bias, z, g, n, tile_w, max_groups, stream);
  return false;
}

// The widest channel group that C and the pointers allow.
// v1: the generic kernel only (the version before the tiled path, kept for
// tests/bench/kernels/bench_k_dwconv.c).
template <class T>
void launch_t(T *y, const T *x, const T *w, const T *bias, const T *z, const geo &g, int n,
              int tile_w, int max_groups, size_t total, bool v1, cudaStream_t stream) {
  constexpr int wide = 16 / (int)sizeof(T);  // 8 halves or 4 floats
  if (g.c % wide == 0 && k_aligned(y, 16) && k_aligned(x, 16) && (!z || k_aligned(z, 16))) {
    if (!v1 && try_tiled<T, wide>(y, x, w, bias, z, g, n, tile_w, max_groups, stream)) return;
    launch_v<T, wide>(y, x, w, bias, z, g, total, stream);
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

static int dwconv(void *y, const void *x, const void *w, const void *bias, const void *z, k_elem et,
                  const k_dwconv_args *a, bool v1, cudaStream_t stream, err *e) {
  const char *kname = v1 ? "k_dwconv__v1_cuda" : "k_dwconv_cuda";
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
  if (a->in_act != K_DW_ACT_NONE && a->in_act != K_DW_ACT_RELU && a->in_act != K_DW_ACT_SIGMOID &&
      a->in_act != K_DW_ACT_TANH && a->in_act != K_DW_ACT_SWISH && a->in_act != K_DW_ACT_HARD_SWISH)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "%s: input activation %d is not one without parameters (none, relu, sigmoid, "
                   "tanh, swish, hard_swish)",
                   kname, (int)a->in_act);
  if (a->tile_w != 0 && a->tile_w != 1 && a->tile_w != 2 && a->tile_w != 4)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: tile_w %d is not 0, 1, 2 or 4", kname, a->tile_w);
  if (a->block_groups < 0 || a->block_groups > kTileMaxGroups)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: block_groups %d is not 0..%d", kname, a->block_groups,
                   kTileMaxGroups);
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
           a->stride_h, a->stride_w, a->dil_h, a->dil_w, (int)a->act, a->clip_max, a->alpha, a->beta, (int)a->in_act};
  if (et == K_F32)
    launch_t<float>((float *)y, (const float *)x, (const float *)w, (const float *)bias,
                    (const float *)z, g, a->n, a->tile_w, a->block_groups, total, v1, stream);
  else
    launch_t<__half>((__half *)y, (const __half *)x, (const __half *)w, (const __half *)bias,
                     (const __half *)z, g, a->n, a->tile_w, a->block_groups, total, v1, stream);
  K_LAUNCH_CHECK(e, kname);
  return 0;
}

}  // namespace

extern "C" int k_dwconv_cuda(void *y, const void *x, const void *w, const void *bias, const void *z,
                             k_elem et, const k_dwconv_args *a, cudaStream_t stream, err *e) {
  return dwconv(y, x, w, bias, z, et, a, false, stream, e);
}

extern "C" int k_dwconv__v1_cuda(void *y, const void *x, const void *w, const void *bias,
                                 const void *z, k_elem et, const k_dwconv_args *a,
                                 cudaStream_t stream, err *e) {
  return dwconv(y, x, w, bias, z, et, a, true, stream, e);
}
