// kernels/k_f16.cu: FP16 twins of the FP32 CUDA kernels (k_unary.cu,
// k_binary.cu, k_softmax.cu, k_norm.cu, k_bias_act.cu), so the engine can
// run a whole model in half precision. Tensors are IEEE half, passed as
// uint16_t bits; every element is widened to float, the math is the FP32
// kernels' in float (sums, means and variances accumulated in float, not
// double: the half output's 2^-11 rounding dwarfs a float sum's drift), and
// the result is rounded to half once (round to nearest even). Same launch
// structure, argument checks and aliasing rules as the FP32 launchers. Where
// pointers and sizes allow, the elementwise kernels move 16 bytes (unary) or
// 2 halves (binary, bias_act) per access. They are written out here rather
// than templated into the FP32 files because the FP32 kernels accumulate in
// double to stay within an ulp of the references, which half does not need.
#include <cuda_fp16.h>

#include "kernels/k_cuda_common.cuh"

namespace {

// --- half <-> float, on the raw bits. NaN comes back as cvt's canonical NaN
// (only k_cast.cu keeps payloads, for bit-identical casts).
__device__ __forceinline__ float ld(uint16_t h) {
  return __half2float(__ushort_as_half(h));
}
__device__ __forceinline__ uint16_t st(float v) {
  return __half_as_ushort(__float2half_rn(v));
}
// Two halves in a 32-bit word, element 0 in the low bits (little-endian).
__device__ __forceinline__ float2 ld2(uint32_t w) {
  return make_float2(ld((uint16_t)(w & 0xFFFFu)), ld((uint16_t)(w >> 16)));
}
__device__ __forceinline__ uint32_t st2(float lo, float hi) {
  return (uint32_t)st(lo) | ((uint32_t)st(hi) << 16);
}

static inline bool aligned(const void *p, unsigned bytes) {
  return (uintptr_t)p % bytes == 0;
}

// --- elementwise unary: the functors of k_unary.cu.
struct op_relu {
  __device__ float operator()(float v) const { return k_relu_f(v); }
};
struct op_leaky {
  float alpha;
  __device__ float operator()(float v) const { return v < 0.0f ? alpha * v : v; }
};
struct op_sigmoid {
  __device__ float operator()(float v) const {
    if (v >= 0.0f) return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-v)));
    float e = expf(v);
    return __fdiv_rn(e, __fadd_rn(1.0f, e));
  }
};
struct op_tanh {
  __device__ float operator()(float v) const { return tanhf(v); }
};
struct op_erf {
  __device__ float operator()(float v) const { return erff(v); }
};
struct op_gelu_erf {
  __device__ float operator()(float v) const { return k_gelu_erf_f(v); }
};
struct op_gelu_tanh {
  __device__ float operator()(float v) const { return k_gelu_tanh_f(v); }
};

template <class Op>
__global__ void unary_kernel(uint16_t *y, const uint16_t *x, size_t n, Op op) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = st(op(ld(x[i])));
}

// n8 groups of 8 halves (one uint4), then the n_tail halves after them, one
// each for the first threads. Each thread reads its elements before writing
// them, so y may alias x.
template <class Op>
__global__ void unary8_kernel(uint4 *y, const uint4 *x, size_t n8, size_t n_tail, Op op) {
  size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = tid; i < n8; i += stride) {
    uint4 v = x[i];
    float2 f;
    f = ld2(v.x);
    v.x = st2(op(f.x), op(f.y));
    f = ld2(v.y);
    v.y = st2(op(f.x), op(f.y));
    f = ld2(v.z);
    v.z = st2(op(f.x), op(f.y));
    f = ld2(v.w);
    v.w = st2(op(f.x), op(f.y));
    y[i] = v;
  }
  if (tid < n_tail) {
    uint16_t *yt = (uint16_t *)(y + n8);
    const uint16_t *xt = (const uint16_t *)(x + n8);
    yt[tid] = st(op(ld(xt[tid])));
  }
}

template <class Op>
int launch_unary(const char *kname, uint16_t *y, const uint16_t *x, size_t n, Op op,
                 cudaStream_t stream, err *e) {
  if (n == 0) return 0;
  if (!y || !x)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p x=%p) for n=%zu", kname,
                   (void *)y, (const void *)x, n);
  if (aligned(y, 16) && aligned(x, 16)) {
    size_t n8 = n / 8;
    unary8_kernel<Op><<<k_blocks_for(n8 ? n8 : 1, K_THREADS), K_THREADS, 0, stream>>>(
        (uint4 *)y, (const uint4 *)x, n8, n % 8, op);
  } else {
    unary_kernel<Op><<<k_blocks_for(n, K_THREADS), K_THREADS, 0, stream>>>(y, x, n, op);
  }
  K_LAUNCH_CHECK(e, kname);
  return 0;
}

// --- binary with broadcasting: the plan of k_binary.cu (itself bplan_make
// of k_binary.c): size-1 dims dropped, dims both inputs walk contiguously
// merged, stride 0 where an input repeats.
struct bplan {
  int nd;  // >= 1 after planning
  int64_t dims[K_MAX_DIMS];
  int64_t as[K_MAX_DIMS];
  int64_t bs[K_MAX_DIMS];
};

// Returns false when the output is empty.
bool plan_make(bplan *p, int ndim, const int64_t *ydims, const int64_t *adims,
               const int64_t *bdims) {
  int64_t as[K_MAX_DIMS], bs[K_MAX_DIMS], acc_a = 1, acc_b = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    as[i] = (adims[i] == 1 && ydims[i] != 1) ? 0 : acc_a;
    bs[i] = (bdims[i] == 1 && ydims[i] != 1) ? 0 : acc_b;
    acc_a *= adims[i];
    acc_b *= bdims[i];
  }
  for (int i = 0; i < ndim; i++)
    if (ydims[i] == 0) return false;
  p->nd = 0;
  for (int i = 0; i < ndim; i++) {
    if (ydims[i] == 1) continue;
    int j = p->nd - 1;
    if (j >= 0 && p->as[j] == as[i] * ydims[i] && p->bs[j] == bs[i] * ydims[i]) {
      p->dims[j] *= ydims[i];
      p->as[j] = as[i];
      p->bs[j] = bs[i];
    } else {
      p->dims[p->nd] = ydims[i];
      p->as[p->nd] = as[i];
      p->bs[p->nd] = bs[i];
      p->nd++;
    }
  }
  if (p->nd == 0) {
    p->nd = 1;
    p->dims[0] = 1;
    p->as[0] = 0;
    p->bs[0] = 0;
  }
  return true;
}

template <k_binop OP>
__device__ __forceinline__ float apply(float a, float b) {
  if (OP == K_ADD) return __fadd_rn(a, b);
  if (OP == K_SUB) return __fsub_rn(a, b);
  if (OP == K_MUL) return __fmul_rn(a, b);
  return __fdiv_rn(a, b);
}

// SA/SB: the inner stride of a and b, 0 or 1 (contiguous same-shape or scalar side).
template <k_binop OP, int SA, int SB>
__global__ void binary_flat_kernel(uint16_t *y, const uint16_t *a, const uint16_t *b, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = st(apply<OP>(ld(a[SA ? i : 0]), ld(b[SB ? i : 0])));
}

// The same over pairs: y, and each side with stride 1, 4-byte aligned; n2
// pairs, then the odd last element by thread 0.
template <k_binop OP, int SA, int SB>
__global__ void binary_pair_kernel(uint32_t *y, const uint16_t *a, const uint16_t *b, size_t n2,
                                   bool odd) {
  size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  float a0 = SA ? 0.0f : ld(a[0]), b0 = SB ? 0.0f : ld(b[0]);
  for (size_t i = tid; i < n2; i += stride) {
    float2 av = SA ? ld2(((const uint32_t *)a)[i]) : make_float2(a0, a0);
    float2 bv = SB ? ld2(((const uint32_t *)b)[i]) : make_float2(b0, b0);
    y[i] = st2(apply<OP>(av.x, bv.x), apply<OP>(av.y, bv.y));
  }
  if (odd && tid == 0) {
    size_t last = 2 * n2;
    ((uint16_t *)y)[last] = st(apply<OP>(SA ? ld(a[last]) : a0, SB ? ld(b[last]) : b0));
  }
}

// General case: unravel i over the merged dims; IDX 32-bit when the output fits.
template <k_binop OP, typename IDX>
__global__ void binary_bcast_kernel(uint16_t *y, const uint16_t *a, const uint16_t *b, IDX n,
                                    bplan p) {
  IDX stride = (IDX)gridDim.x * blockDim.x;
  for (IDX i = (IDX)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    IDX rem = i;
    int64_t ao = 0, bo = 0;
    for (int k = p.nd - 1; k >= 0; k--) {
      IDX d = (IDX)p.dims[k];
      IDX q = rem / d;
      IDX r = rem - q * d;
      ao += (int64_t)r * p.as[k];
      bo += (int64_t)r * p.bs[k];
      rem = q;
    }
    y[i] = st(apply<OP>(ld(a[ao]), ld(b[bo])));
  }
}

template <k_binop OP, int SA, int SB>
void launch_flat(uint16_t *y, const uint16_t *a, const uint16_t *b, size_t n,
                 cudaStream_t stream) {
  bool pairs = n >= 2 && aligned(y, 4) && (!SA || aligned(a, 4)) && (!SB || aligned(b, 4));
  if (pairs)
    binary_pair_kernel<OP, SA, SB><<<k_blocks_for(n / 2, K_THREADS), K_THREADS, 0, stream>>>(
        (uint32_t *)y, a, b, n / 2, (n & 1) != 0);
  else
    binary_flat_kernel<OP, SA, SB><<<k_blocks_for(n, K_THREADS), K_THREADS, 0, stream>>>(y, a, b,
                                                                                          n);
}

template <k_binop OP>
void launch_op(uint16_t *y, const uint16_t *a, const uint16_t *b, size_t n, const bplan &p,
               cudaStream_t stream) {
  if (p.nd == 1) {
    int sa = (int)p.as[0], sb = (int)p.bs[0];
    if (sa == 1 && sb == 1)
      launch_flat<OP, 1, 1>(y, a, b, n, stream);
    else if (sa == 1 && sb == 0)
      launch_flat<OP, 1, 0>(y, a, b, n, stream);
    else if (sa == 0 && sb == 1)
      launch_flat<OP, 0, 1>(y, a, b, n, stream);
    else
      launch_flat<OP, 0, 0>(y, a, b, n, stream);
    return;
  }
  unsigned blocks = k_blocks_for(n, K_THREADS);
  if (n <= 0x7fffffffu)
    binary_bcast_kernel<OP, uint32_t><<<blocks, K_THREADS, 0, stream>>>(y, a, b, (uint32_t)n, p);
  else
    binary_bcast_kernel<OP, uint64_t><<<blocks, K_THREADS, 0, stream>>>(y, a, b, (uint64_t)n, p);
}

// --- softmax over [outer, axis_len, inner], as k_softmax.cu: one block per
// row when inner == 1, one thread per (outer, inner) column otherwise.
template <bool LOG>
__global__ void softmax_rows_kernel(uint16_t *y, const uint16_t *x, size_t rows, size_t len) {
  __shared__ float shared[32];
  for (size_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const uint16_t *xr = x + row * len;
    uint16_t *yr = y + row * len;
    float mx = -INFINITY;
    for (size_t j = threadIdx.x; j < len; j += blockDim.x) mx = fmaxf(mx, ld(xr[j]));
    mx = k_block_max(mx, shared);
    float s = 0.0f;
    for (size_t j = threadIdx.x; j < len; j += blockDim.x) s += expf(ld(xr[j]) - mx);
    s = k_block_sum(s, shared);
    if (LOG) {
      float shift = mx + logf(s);
      for (size_t j = threadIdx.x; j < len; j += blockDim.x) yr[j] = st(ld(xr[j]) - shift);
    } else {
      float inv = 1.0f / s;
      for (size_t j = threadIdx.x; j < len; j += blockDim.x) yr[j] = st(expf(ld(xr[j]) - mx) * inv);
    }
  }
}

template <bool LOG>
__global__ void softmax_cols_kernel(uint16_t *y, const uint16_t *x, size_t outer, size_t len,
                                    size_t inner) {
  size_t cols = outer * inner, stride = (size_t)gridDim.x * blockDim.x;
  for (size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += stride) {
    size_t o = c / inner, j = c - o * inner;
    const uint16_t *xc = x + o * len * inner + j;
    uint16_t *yc = y + o * len * inner + j;
    float mx = -INFINITY;
    for (size_t r = 0; r < len; r++) mx = fmaxf(mx, ld(xc[r * inner]));
    float s = 0.0f;
    for (size_t r = 0; r < len; r++) s += expf(ld(xc[r * inner]) - mx);
    if (LOG) {
      float shift = mx + logf(s);
      for (size_t r = 0; r < len; r++) yc[r * inner] = st(ld(xc[r * inner]) - shift);
    } else {
      float inv = 1.0f / s;
      for (size_t r = 0; r < len; r++) yc[r * inner] = st(expf(ld(xc[r * inner]) - mx) * inv);
    }
  }
}

// Enough warps to cover a row once, at most 512 threads.
unsigned row_threads(size_t len) {
  size_t t = (len + 31) / 32 * 32;
  if (t > 512) t = 512;
  return (unsigned)(t ? t : 32);
}

template <bool LOG>
int launch_softmax(const char *kname, uint16_t *y, const uint16_t *x, size_t outer,
                   size_t axis_len, size_t inner, cudaStream_t stream, err *e) {
  size_t total;
  if (!k_mul3(outer, axis_len, inner, &total))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: %zu x %zu x %zu elements overflow", kname, outer,
                   axis_len, inner);
  if (total == 0) return 0;
  if (!y || !x)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p x=%p)", kname, (void *)y,
                   (const void *)x);
  if (inner == 1) {
    unsigned blocks = outer > 65535u * 4 ? 65535u * 4 : (unsigned)outer;
    softmax_rows_kernel<LOG><<<blocks, row_threads(axis_len), 0, stream>>>(y, x, outer, axis_len);
  } else {
    softmax_cols_kernel<LOG><<<k_blocks_for(outer * inner, K_THREADS), K_THREADS, 0, stream>>>(
        y, x, outer, axis_len, inner);
  }
  K_LAUNCH_CHECK(e, kname);
  return 0;
}

// --- normalisation, as k_norm.cu but with float statistics.
template <bool BIAS>
__global__ void layer_norm_kernel(uint16_t *y, const uint16_t *x, const uint16_t *scale,
                                  const uint16_t *bias, size_t rows, size_t cols, float eps) {
  __shared__ float shared[32];
  for (size_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const uint16_t *xr = x + row * cols;
    uint16_t *yr = y + row * cols;
    float s = 0.0f;
    for (size_t j = threadIdx.x; j < cols; j += blockDim.x) s += ld(xr[j]);
    float mean = k_block_sum(s, shared) / (float)cols;
    // Variance of the centred values, so a large mean does not cancel the spread.
    float ss = 0.0f;
    for (size_t j = threadIdx.x; j < cols; j += blockDim.x) {
      float d = ld(xr[j]) - mean;
      ss += d * d;
    }
    float inv_std = 1.0f / sqrtf(k_block_sum(ss, shared) / (float)cols + eps);
    for (size_t j = threadIdx.x; j < cols; j += blockDim.x) {
      float v = (ld(xr[j]) - mean) * inv_std * ld(scale[j]);
      if (BIAS) v += ld(bias[j]);
      yr[j] = st(v);
    }
  }
}

// grid.x walks (n*c) planes, grid.y and threads walk the spatial extent.
__global__ void batch_norm_kernel(uint16_t *y, const uint16_t *x, const uint16_t *scale,
                                  const uint16_t *bias, const uint16_t *mean, const uint16_t *var,
                                  size_t planes, size_t c, size_t spatial, float eps) {
  for (size_t p = blockIdx.x; p < planes; p += gridDim.x) {
    size_t ch = p % c;
    float k = ld(scale[ch]) / sqrtf(ld(var[ch]) + eps);
    float m = ld(mean[ch]), b = bias ? ld(bias[ch]) : 0.0f;
    const uint16_t *xs = x + p * spatial;
    uint16_t *ys = y + p * spatial;
    size_t stride = (size_t)gridDim.y * blockDim.x;
    for (size_t s = (size_t)blockIdx.y * blockDim.x + threadIdx.x; s < spatial; s += stride)
      ys[s] = st((ld(xs[s]) - m) * k + b);
  }
}

// --- fused bias + activation, as k_bias_act.cu; x + bias stays in float
// before the activation (one rounding to half, at the end).
template <k_act ACT>
__device__ __forceinline__ float act(float v) {
  if (ACT == K_ACT_RELU) return k_relu_f(v);
  if (ACT == K_ACT_GELU) return k_gelu_erf_f(v);
  if (ACT == K_ACT_GELU_TANH) return k_gelu_tanh_f(v);
  return v;
}

template <k_act ACT, bool BIAS>
__global__ void bias_act_kernel(uint16_t *y, const uint16_t *x, const uint16_t *bias, size_t rows,
                                size_t cols) {
  size_t cstride = (size_t)gridDim.x * blockDim.x;
  for (size_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const uint16_t *xr = x + r * cols;
    uint16_t *yr = y + r * cols;
    for (size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += cstride) {
      float v = ld(xr[c]);
      if (BIAS) v += ld(bias[c]);
      yr[c] = st(act<ACT>(v));
    }
  }
}

// Pairs of columns: cols even and y, x, bias 4-byte aligned, so every row
// starts on a pair. `pairs` = cols / 2.
template <k_act ACT, bool BIAS>
__global__ void bias_act_pair_kernel(uint32_t *y, const uint32_t *x, const uint32_t *bias,
                                     size_t rows, size_t pairs) {
  size_t cstride = (size_t)gridDim.x * blockDim.x;
  for (size_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const uint32_t *xr = x + r * pairs;
    uint32_t *yr = y + r * pairs;
    for (size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x; c < pairs; c += cstride) {
      float2 v = ld2(xr[c]);
      if (BIAS) {
        float2 b = ld2(bias[c]);
        v.x += b.x;
        v.y += b.y;
      }
      yr[c] = st2(act<ACT>(v.x), act<ACT>(v.y));
    }
  }
}

template <k_act ACT>
void launch_act(uint16_t *y, const uint16_t *x, const uint16_t *bias, size_t rows, size_t cols,
                cudaStream_t stream) {
  bool pairs = cols % 2 == 0 && aligned(y, 4) && aligned(x, 4) && (!bias || aligned(bias, 4));
  size_t width = pairs ? cols / 2 : cols;
  // Columns over grid.x (enough blocks to cover a row once), rows over
  // grid.y (at most 65535, the rest by the loop); about K_MAX_BLOCKS blocks.
  size_t gx = (width + K_THREADS - 1) / K_THREADS;
  if (gx > K_MAX_BLOCKS) gx = K_MAX_BLOCKS;
  size_t gy = K_MAX_BLOCKS / gx;
  if (gy < 1) gy = 1;
  if (gy > rows) gy = rows;
  if (gy > 65535) gy = 65535;
  dim3 grid((unsigned)gx, (unsigned)gy);
  if (pairs) {
    uint32_t *y2 = (uint32_t *)y;
    const uint32_t *x2 = (const uint32_t *)x, *b2 = (const uint32_t *)bias;
    if (bias)
      bias_act_pair_kernel<ACT, true><<<grid, K_THREADS, 0, stream>>>(y2, x2, b2, rows, width);
    else
      bias_act_pair_kernel<ACT, false><<<grid, K_THREADS, 0, stream>>>(y2, x2, b2, rows, width);
  } else if (bias) {
    bias_act_kernel<ACT, true><<<grid, K_THREADS, 0, stream>>>(y, x, bias, rows, cols);
  } else {
    bias_act_kernel<ACT, false><<<grid, K_THREADS, 0, stream>>>(y, x, bias, rows, cols);
  }
}

}  // namespace

// --- elementwise unary
extern "C" int k_relu_f16_cuda(uint16_t *y, const uint16_t *x, size_t n, cudaStream_t stream,
                               err *e) {
  return launch_unary("k_relu_f16_cuda", y, x, n, op_relu{}, stream, e);
}

extern "C" int k_leaky_relu_f16_cuda(uint16_t *y, const uint16_t *x, size_t n, float alpha,
                                     cudaStream_t stream, err *e) {
  return launch_unary("k_leaky_relu_f16_cuda", y, x, n, op_leaky{alpha}, stream, e);
}

extern "C" int k_sigmoid_f16_cuda(uint16_t *y, const uint16_t *x, size_t n, cudaStream_t stream,
                                  err *e) {
  return launch_unary("k_sigmoid_f16_cuda", y, x, n, op_sigmoid{}, stream, e);
}

extern "C" int k_tanh_f16_cuda(uint16_t *y, const uint16_t *x, size_t n, cudaStream_t stream,
                               err *e) {
  return launch_unary("k_tanh_f16_cuda", y, x, n, op_tanh{}, stream, e);
}

extern "C" int k_erf_f16_cuda(uint16_t *y, const uint16_t *x, size_t n, cudaStream_t stream,
                              err *e) {
  return launch_unary("k_erf_f16_cuda", y, x, n, op_erf{}, stream, e);
}

extern "C" int k_gelu_f16_cuda(uint16_t *y, const uint16_t *x, size_t n, int approximate,
                               cudaStream_t stream, err *e) {
  if (approximate != 0 && approximate != 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "k_gelu_f16_cuda: approximate must be 0 or 1, got %d",
                   approximate);
  if (approximate) return launch_unary("k_gelu_f16_cuda", y, x, n, op_gelu_tanh{}, stream, e);
  return launch_unary("k_gelu_f16_cuda", y, x, n, op_gelu_erf{}, stream, e);
}

// --- binary
extern "C" int k_binary_f16_cuda(uint16_t *y, const uint16_t *a, const uint16_t *b, int ndim,
                                 const int64_t *ydims, const int64_t *adims, const int64_t *bdims,
                                 k_binop op, cudaStream_t stream, err *e) {
  static const char kname[] = "k_binary_f16_cuda";
  if (ndim < 0 || ndim > K_MAX_DIMS)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: rank %d outside 0..%d", kname, ndim, K_MAX_DIMS);
  if (ndim > 0 && (!ydims || !adims || !bdims))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL dims for rank %d", kname, ndim);
  if (op != K_ADD && op != K_SUB && op != K_MUL && op != K_DIV)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: unknown op %d", kname, (int)op);
  uint64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (ydims[i] < 0 || adims[i] < 0 || bdims[i] < 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "%s: negative dim at axis %d", kname, i);
    if ((adims[i] != ydims[i] && adims[i] != 1) || (bdims[i] != ydims[i] && bdims[i] != 1))
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "%s: axis %d: input dims %lld and %lld do not broadcast to %lld", kname, i,
                     (long long)adims[i], (long long)bdims[i], (long long)ydims[i]);
    if (__builtin_mul_overflow(n, (uint64_t)ydims[i], &n))
      return err_set(e, ERR_INVALID_ARGUMENT, "%s: element count overflows", kname);
  }
  bplan p;
  if (!plan_make(&p, ndim, ydims, adims, bdims)) return 0;  // empty output
  if (!y || !a || !b)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p a=%p b=%p) for %llu elements",
                   kname, (void *)y, (const void *)a, (const void *)b, (unsigned long long)n);
  switch (op) {
    case K_ADD:
      launch_op<K_ADD>(y, a, b, (size_t)n, p, stream);
      break;
    case K_SUB:
      launch_op<K_SUB>(y, a, b, (size_t)n, p, stream);
      break;
    case K_MUL:
      launch_op<K_MUL>(y, a, b, (size_t)n, p, stream);
      break;
    case K_DIV:
      launch_op<K_DIV>(y, a, b, (size_t)n, p, stream);
      break;
    default:  // Pow/Max/Min: rejected above, CPU only
      break;
  }
  K_LAUNCH_CHECK(e, kname);
  return 0;
}

// --- softmax
extern "C" int k_softmax_f16_cuda(uint16_t *y, const uint16_t *x, size_t outer, size_t axis_len,
                                  size_t inner, cudaStream_t stream, err *e) {
  return launch_softmax<false>("k_softmax_f16_cuda", y, x, outer, axis_len, inner, stream, e);
}

extern "C" int k_log_softmax_f16_cuda(uint16_t *y, const uint16_t *x, size_t outer,
                                      size_t axis_len, size_t inner, cudaStream_t stream, err *e) {
  return launch_softmax<true>("k_log_softmax_f16_cuda", y, x, outer, axis_len, inner, stream, e);
}

// --- normalisation
extern "C" int k_layer_norm_f16_cuda(uint16_t *y, const uint16_t *x, const uint16_t *scale,
                                     const uint16_t *bias, size_t rows, size_t cols, float eps,
                                     cudaStream_t stream, err *e) {
  static const char kname[] = "k_layer_norm_f16_cuda";
  size_t total;
  if (!k_mul3(rows, cols, 1, &total))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: %zu x %zu elements overflow", kname, rows, cols);
  if (!(eps >= 0.0f))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: epsilon %g is negative or NaN", kname,
                   (double)eps);
  if (total == 0) return 0;
  if (!y || !x || !scale)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p x=%p scale=%p)", kname,
                   (void *)y, (const void *)x, (const void *)scale);
  unsigned threads = row_threads(cols);
  unsigned blocks = rows > 65535u * 4 ? 65535u * 4 : (unsigned)rows;
  if (bias)
    layer_norm_kernel<true><<<blocks, threads, 0, stream>>>(y, x, scale, bias, rows, cols, eps);
  else
    layer_norm_kernel<false><<<blocks, threads, 0, stream>>>(y, x, scale, bias, rows, cols, eps);
  K_LAUNCH_CHECK(e, kname);
  return 0;
}

extern "C" int k_batch_norm_f16_cuda(uint16_t *y, const uint16_t *x, const uint16_t *scale,
                                     const uint16_t *bias, const uint16_t *mean,
                                     const uint16_t *var, size_t n, size_t c, size_t spatial,
                                     float eps, cudaStream_t stream, err *e) {
  static const char kname[] = "k_batch_norm_f16_cuda";
  size_t total;
  if (!k_mul3(n, c, spatial, &total))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: %zu x %zu x %zu elements overflow", kname, n, c,
                   spatial);
  if (total == 0) return 0;
  if (!y || !x || !scale || !mean || !var)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p x=%p scale=%p mean=%p var=%p)",
                   kname, (void *)y, (const void *)x, (const void *)scale, (const void *)mean,
                   (const void *)var);
  size_t planes = n * c;
  unsigned gx = planes > 65535u * 4 ? 65535u * 4 : (unsigned)planes;
  // Split a plane over several blocks only when there are too few planes to
  // fill the GPU; grid.y is limited to 65535.
  size_t per_plane = (spatial + K_THREADS - 1) / K_THREADS;
  size_t want = planes >= 1024 ? 1 : (1024 + planes - 1) / planes;
  if (want > per_plane) want = per_plane;
  if (want > 65535) want = 65535;
  dim3 grid(gx, (unsigned)(want ? want : 1));
  batch_norm_kernel<<<grid, K_THREADS, 0, stream>>>(y, x, scale, bias, mean, var, planes, c,
                                                    spatial, eps);
  K_LAUNCH_CHECK(e, kname);
  return 0;
}

// --- fused bias + activation
extern "C" int k_bias_act_f16_cuda(uint16_t *y, const uint16_t *x, const uint16_t *bias,
                                   size_t rows, size_t cols, k_act act_kind, cudaStream_t stream,
                                   err *e) {
  static const char kname[] = "k_bias_act_f16_cuda";
  if (act_kind != K_ACT_NONE && act_kind != K_ACT_RELU && act_kind != K_ACT_GELU &&
      act_kind != K_ACT_GELU_TANH)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: unknown activation %d", kname, (int)act_kind);
  size_t total;
  if (!k_mul3(rows, cols, 1, &total))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: %zu x %zu elements overflow", kname, rows, cols);
  if (total == 0) return 0;
  if (!y || !x)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p x=%p)", kname, (void *)y,
                   (const void *)x);
  switch (act_kind) {
    case K_ACT_NONE:
      launch_act<K_ACT_NONE>(y, x, bias, rows, cols, stream);
      break;
    case K_ACT_RELU:
      launch_act<K_ACT_RELU>(y, x, bias, rows, cols, stream);
      break;
    case K_ACT_GELU:
      launch_act<K_ACT_GELU>(y, x, bias, rows, cols, stream);
      break;
    case K_ACT_GELU_TANH:
      launch_act<K_ACT_GELU_TANH>(y, x, bias, rows, cols, stream);
      break;
  }
  K_LAUNCH_CHECK(e, kname);
  return 0;
}
