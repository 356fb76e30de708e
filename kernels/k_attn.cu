// kernels/k_attn.cu: CUDA twin of k_attn_ref (k_ref.h), flash-style, one
// kernel written over the storage type (float or half; FP32 math).
//
// A block runs 8 warps, one query row each, of one (b, h). The block walks
// the keys in tiles of 32: Kt's [d, 32] slab and V's [32, dv] slab are
// staged in shared memory (read once per 8 rows), lane j scores key j of
// the tile against the warp's row (held, pre-scaled, in shared memory), and
// the warp keeps an online softmax: running max m, running sum l, and the
// output accumulator (dv / 32 columns per lane) rescaled by exp(m_old -
// m_new) when the max grows. Nothing of size Sk is ever stored, so memory
// traffic is Q, K, V and O once per 8 query rows.
//
// Undefined rows follow the unfused graph: a NaN or +inf score, or every
// score -inf (l stays 0), gives NaN, or 0 with nan_zero; no keys at all
// gives 0 (an empty product).
#include <math.h>

#include "kernels/k_cuda_common.cuh"

namespace {

constexpr int WARPS = 8;  // query rows per block
constexpr int TILE = 32;  // keys per tile: one per lane

template <class T, int DPL>  // DPL: head columns per lane (head sizes up to 32 * DPL)
__global__ void __launch_bounds__(WARPS * 32)
    attn_kernel(T *o, const T *q, const T *kt, const T *v, const T *mask, const void *divisor,
                bool div_half, k_attn_args a) {
  constexpr int HD = 32 * DPL;
  __shared__ float qs[WARPS][HD];
  __shared__ float ks[HD][TILE + 1];  // +1: the staging writes go down columns
  __shared__ float vs[TILE][HD];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t bh = blockIdx.x, b = bh / a.h, h = bh - b * a.h;
  const int64_t i = (int64_t)blockIdx.y * WARPS + warp;
  const bool row_ok = i < a.sq;
  q += b * a.q_sb + h * a.q_sh;
  kt += b * a.k_sb + h * a.k_sh;
  v += b * a.v_sb + h * a.v_sh;
  o += b * a.o_sb + h * a.o_sh;
  if (mask) mask += b * a.m_sb + h * a.m_sh;
  float scale = a.scale;
  if (divisor)
    scale /= div_half ? __half2float(*(const __half *)divisor) : *(const float *)divisor;
  for (int d = lane; d < HD; d += 32)
    qs[warp][d] = row_ok && d < a.d ? k_ld(q[i * a.d + d]) * scale : 0.0f;
  float m = -INFINITY, l = 0.0f, acc[DPL];
  for (int c = 0; c < DPL; c++) acc[c] = 0.0f;
  bool bad = false;
  for (int64_t k0 = 0; k0 < a.sk; k0 += TILE) {
    __syncthreads();  // the previous tile is consumed (and qs written, the first time)
    for (int t = threadIdx.x; t < HD * TILE; t += WARPS * 32) {
      int d = t / TILE, j = t - d * TILE;  // consecutive threads: consecutive keys
      ks[d][j] = d < a.d && k0 + j < a.sk ? k_ld(kt[d * a.sk + k0 + j]) : 0.0f;
    }
    for (int t = threadIdx.x; t < HD * TILE; t += WARPS * 32) {
      int j = t / HD, c = t - j * HD;
      vs[j][c] = c < a.dv && k0 + j < a.sk ? k_ld(v[(k0 + j) * a.dv + c]) : 0.0f;
    }
    __syncthreads();
    if (!row_ok) continue;  // the whole warp: no shuffles skipped by half of it
    const int64_t key = k0 + lane;
    float s = -INFINITY;
    if (key < a.sk) {
      float dot = 0.0f;
#pragma unroll 8
      for (int d = 0; d < HD; d++) dot = fmaf(qs[warp][d], ks[d][lane], dot);
      s = dot;
      if (mask) s += k_ld(mask[i * a.m_sq + key * a.m_sk]);
      if (isnan(s) || s == INFINITY) bad = true;
    }
    float m_new = fmaxf(m, k_warp_max(s));
    float p = s == -INFINITY || isnan(s) ? 0.0f : expf(s - m_new);
    float alpha = m == -INFINITY ? 0.0f : expf(m - m_new);
    l = l * alpha + k_warp_sum(p);
    for (int c = 0; c < DPL; c++) acc[c] *= alpha;
    for (int j = 0; j < TILE; j++) {
      float pj = __shfl_sync(0xffffffffu, p, j);
      for (int c = 0; c < DPL; c++) acc[c] = fmaf(pj, vs[j][lane + 32 * c], acc[c]);
    }
    m = m_new;
  }
  if (!row_ok) return;
  // no keys at all: an empty product, zeros as the unfused MatMul gives
  bad = a.sk > 0 && (__any_sync(0xffffffffu, bad) || !(l > 0.0f));
  const float fill = a.nan_zero ? 0.0f : NAN, inv = bad || a.sk == 0 ? 0.0f : 1.0f / l;
  for (int c = 0; c < DPL; c++) {
    int col = lane + 32 * c;
    if (col < a.dv) o[i * a.dv + col] = k_st<T>(bad ? fill : acc[c] * inv);
  }
}

template <class T>
int launch(const char *kname, T *o, const T *q, const T *kt, const T *v, const T *mask,
           const void *divisor, k_elem div_et, const k_attn_args *a, cudaStream_t stream, err *e) {
  if (a->b < 0 || a->h < 0 || a->sq < 0 || a->sk < 0 || a->d < 0 || a->dv < 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: negative size", kname);
  if (a->b == 0 || a->h == 0 || a->sq == 0 || a->dv == 0) return 0;
  if (a->d > K_ATTN_MAX_HEAD || a->dv > K_ATTN_MAX_HEAD)
    return err_set(e, ERR_UNIMPLEMENTED, "%s: head sizes %lld, %lld: at most %d supported", kname,
                   (long long)a->d, (long long)a->dv, K_ATTN_MAX_HEAD);
  if (!o || !q || !v || (!kt && a->sk && a->d))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer", kname);
  if (divisor && div_et != K_F32 && div_et != K_F16)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: the divisor must be float or half", kname);
  int64_t rows = (a->sq + WARPS - 1) / WARPS;
  if (a->b > INT32_MAX / a->h || rows > 65535)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: %lld heads x %lld query rows exceed the grid", kname,
                   (long long)(a->b * a->h), (long long)a->sq);
  dim3 grid((unsigned)(a->b * a->h), (unsigned)rows);
  int hd = (int)(a->d > a->dv ? a->d : a->dv);
  bool dh = div_et == K_F16;
  if (hd <= 32)
    attn_kernel<T, 1><<<grid, WARPS * 32, 0, stream>>>(o, q, kt, v, mask, divisor, dh, *a);
  else if (hd <= 64)
    attn_kernel<T, 2><<<grid, WARPS * 32, 0, stream>>>(o, q, kt, v, mask, divisor, dh, *a);
  else
    attn_kernel<T, 4><<<grid, WARPS * 32, 0, stream>>>(o, q, kt, v, mask, divisor, dh, *a);
  K_LAUNCH_CHECK(e, kname);
  return 0;
}

}  // namespace

extern "C" int k_attn_cuda(void *o, const void *q, const void *kt, const void *v, const void *mask,
                           const void *divisor, k_elem div_et, k_elem et, const k_attn_args *a,
                           cudaStream_t stream, err *e) {
  if (!a) return err_set(e, ERR_INVALID_ARGUMENT, "k_attn_cuda: no arguments");
  if (et == K_F32)
    return launch("k_attn_cuda", (float *)o, (const float *)q, (const float *)kt, (const float *)v,
                  (const float *)mask, divisor, div_et, a, stream, e);
  if (et == K_F16)
    return launch("k_attn_cuda", (__half *)o, (const __half *)q, (const __half *)kt,
                  (const __half *)v, (const __half *)mask, divisor, div_et, a, stream, e);
  return err_set(e, ERR_INVALID_ARGUMENT, "k_attn_cuda: element type %d is not float or half",
                 (int)et);
}
