// kernels/norm/k_norm.cu: CUDA twins of k_layer_norm and k_batch_norm, for
// float and half storage (half: scale, bias, mean and var are half too).
//
// Layer norm, rows of up to K_LN_REG_MAX_COLS (8192, the widest transformer
// hidden sizes): the row lives in registers, loaded once from global memory
// and written once, so the kernel moves 2 x rows x cols elements and runs at
// memory speed. One warp per row and four rows per block up to 1024 columns;
// 2, 4 or 8 warps per row (one row per block, a shared-memory step after
// the warp shuffles) up to 8192. Each thread holds at most 32 elements
// (NV vectors of VEC), which bounds registers and the length of every
// sequential float sum. 16-byte vectors (4 floats, 8 halves) where cols and
// every pointer allow, one element per access otherwise (odd cols,
// misaligned views).
// Statistics in float for both storages, as a corrected two-pass over the
// registers: m0 = sum(x)/n, then d = x - m0, c = sum(d)/n,
// var = (sum(d^2) - c sum(d))/n and y = (d - c) inv_std scale + bias.
// The correction c recovers what rounding m0 to float lost: a plain float
// two-pass is off by ~|mean| 2^-24 / std in every output, 100x past the FP32
// test's rtol 1e-5 at a mean of 1000 (checked by emulating the float
// order on the CPU). With it every error is relative to the spread, and no
// float sum is longer than 32 (per thread) + 5 (shuffles) + 7 (warps) = 44
// terms: a variance off by at most 44 x 2^-24 = 2.6e-6 relative in the
// worst case, 1.3e-6 on inv_std, and ~1e-7 for random data: within
// rtol 1e-5 / atol 1e-6 of the double reference (the emulation's worst
// case over the test shapes, offsets up to 1e4: 0.17 of that tolerance).
// Double would buy nothing here and costs 64x on GPUs with 1/64-rate FP64.
// Longer rows: one block per row (up to 512 threads), three passes over
// global memory, sums in k_acc<T> (double for float, like the reference:
// its sums are too long for the float bound above; float for half, whose
// output rounding dwarfs the difference). k_layer_norm__block_cuda reaches
// it at any width for the tests and bench.
// Group norm (InstanceNormalization is groups == channels): x as [n, c,
// spatial], each (sample, group) a contiguous row of len = c / groups x
// spatial elements, normalised by its own mean and variance (two-pass:
// mean, then the sum of squares about it; k_acc<T> sums, double for float
// like the reference), then scaled and shifted per channel (or per group).
// Three shapes of work, chosen by the row count and length: rows up to
// K_GN_WARP_MAX_LEN long run a warp each (eight rows a block: InstanceNorm on
// small maps makes thousands of short rows, a block each would idle most
// lanes); longer rows a block each when there are enough rows to fill the
// GPU; few long rows (a diffusion UNet's 32 groups over 64x64 maps) are cut
// into chunks of at least K_GN_MIN_CHUNK elements over up to K_GN_TARGET_BLOCKS
// blocks: each chunk's count, mean and centred sum of squares go to the
// caller's workspace, and the second kernel's blocks merge their row's
// chunks (Chan et al.'s pairwise update, in double) before writing their own.
// Every pass reads x in the order it was written, so y may alias x.
// Batch norm: the per-channel factor is computed in double exactly as the
// reference does and the per-element math uses _rn intrinsics, so FP32
// results are bit-identical to k_batch_norm, and FP16 ones are its results
// on the widened inputs, rounded once.
#include "kernels/k_cuda_common.cuh"

namespace {

// Widest row the register kernel takes: 8 warps x 32 lanes x 32 elements.
#define K_LN_REG_MAX_COLS 8192
#define K_LN_MAX_PER_THREAD 32
// Grid cap of the register kernel: 4096 blocks of 4 rows (or of one wide
// row) already fill an H100 several times over; the rest is grid-stride.
#define K_LN_MAX_BLOCKS 4096u

// Sum over the row's WPR warps; every thread of the row gets the same value
// (xor shuffles, then the warps' partials added in one order). For WPR > 1
// the block is the row, so __syncthreads is uniform. `sh` holds WPR x N
// floats; the caller alternates between two such areas, so a write for the
// next reduction never races a read of this one (every thread passes the
// next one's barrier only after this one's reads).
template <int WPR, int N>
static __device__ __forceinline__ void ln_row_sum(float (&v)[N], float *sh) {
#pragma unroll
  for (int q = 0; q < N; q++) v[q] = k_warp_sum(v[q]);
  if (WPR == 1) return;
  int warp = threadIdx.x >> 5;
  if ((threadIdx.x & 31) == 0)
#pragma unroll
    for (int q = 0; q < N; q++) sh[q * WPR + warp] = v[q];
  __syncthreads();
#pragma unroll
  for (int q = 0; q < N; q++) {
    float t = sh[q * WPR];
#pragma unroll
    for (int w = 1; w < WPR; w++) t += sh[q * WPR + w];
    v[q] = t;
  }
}

// Rows of cols <= 32 x WPR x NV x VEC in registers: WPR warps per row, four
// rows per block when WPR == 1, one otherwise. Thread t of a row holds
// vectors t, t + 32 WPR, ... (coalesced). VEC > 1 only when VEC divides cols
// and every pointer is 16-byte aligned (the launcher checks). In place
// (y == x) is fine: a thread writes only the elements it read.
template <class T, int VEC, int NV, int WPR>
__global__ void __launch_bounds__(WPR == 1 ? 128 : 32 * WPR)
    layer_norm_reg_kernel(T *y, const T *x, const T *scale, const T *bias, size_t rows, int cols,
                          float eps) {
  typedef k_vec<T, VEC> vt;
  const int RPB = WPR == 1 ? 4 : 1;
  const int t = threadIdx.x % (32 * WPR), nvec = cols / VEC;
  __shared__ float sh[2][WPR * 2];
  const vt *sv = reinterpret_cast<const vt *>(scale);
  const vt *bv = reinterpret_cast<const vt *>(bias);
  for (size_t row = (size_t)blockIdx.x * RPB + threadIdx.x / (32 * WPR); row < rows;
       row += (size_t)gridDim.x * RPB) {
    const vt *xr = reinterpret_cast<const vt *>(x + row * cols);
    vt *yr = reinterpret_cast<vt *>(y + row * cols);
    float v[NV][VEC];
    float s[1] = {0.0f};
#pragma unroll
    for (int k = 0; k < NV; k++) {
      int i = k * 32 * WPR + t;
      if (i < nvec) {
        vt a = xr[i];
#pragma unroll
        for (int j = 0; j < VEC; j++) v[k][j] = k_ld(a.v[j]);
      } else {
#pragma unroll
        for (int j = 0; j < VEC; j++) v[k][j] = 0.0f;  // adds nothing below
      }
#pragma unroll
      for (int j = 0; j < VEC; j++) s[0] += v[k][j];
    }
    ln_row_sum<WPR>(s, sh[0]);
    const float m0 = s[0] / (float)cols;  // cols <= 8192: exact in float
    float dq[2] = {0.0f, 0.0f};           // sum(d), sum(d^2)
#pragma unroll
    for (int k = 0; k < NV; k++) {
      bool in = k * 32 * WPR + t < nvec;
#pragma unroll
      for (int j = 0; j < VEC; j++) {
        float d = in ? v[k][j] - m0 : 0.0f;
        v[k][j] = d;
        dq[0] += d;
        dq[1] = fmaf(d, d, dq[1]);
      }
    }
    ln_row_sum<WPR>(dq, sh[1]);
    const float c = dq[0] / (float)cols;
    const float var = fmaxf((dq[1] - c * dq[0]) / (float)cols, 0.0f);
    const float inv_std = 1.0f / sqrtf(var + eps);
#pragma unroll
    for (int k = 0; k < NV; k++) {
      int i = k * 32 * WPR + t;
      if (i >= nvec) continue;
      vt sc = sv[i], bi, o;
      if (bias) bi = bv[i];
#pragma unroll
      for (int j = 0; j < VEC; j++) {
        float u = (v[k][j] - c) * inv_std * k_ld(sc.v[j]);
        if (bias) u += k_ld(bi.v[j]);
        o.v[j] = k_st<T>(u);
      }
      yr[i] = o;
    }
  }
}

template <class T, int VEC, int NV, int WPR>
static void ln_reg_go(T *y, const T *x, const T *scale, const T *bias, size_t rows, int cols,
                      float eps, cudaStream_t stream) {
  const int rpb = WPR == 1 ? 4 : 1;
  size_t want = (rows + rpb - 1) / rpb;
  unsigned blocks = want > K_LN_MAX_BLOCKS ? K_LN_MAX_BLOCKS : (unsigned)want;
  layer_norm_reg_kernel<T, VEC, NV, WPR>
      <<<blocks, 32 * WPR * rpb, 0, stream>>>(y, x, scale, bias, rows, cols, eps);
}

// The fewest vectors per thread that cover the row with one warp, else the
// fewest warps (2, 4, 8) at the full 32 elements per thread.
template <class T, int VEC, int NV>
static void ln_reg_pick(T *y, const T *x, const T *scale, const T *bias, size_t rows, int cols,
                        float eps, cudaStream_t stream) {
  const int full = K_LN_MAX_PER_THREAD / VEC;
  if constexpr (NV < full) {
    if (cols <= 32 * NV * VEC)
      return ln_reg_go<T, VEC, NV, 1>(y, x, scale, bias, rows, cols, eps, stream);
    return ln_reg_pick<T, VEC, NV * 2>(y, x, scale, bias, rows, cols, eps, stream);
  } else {
    const int per_warp = 32 * K_LN_MAX_PER_THREAD;
    if (cols <= per_warp)
      return ln_reg_go<T, VEC, full, 1>(y, x, scale, bias, rows, cols, eps, stream);
    if (cols <= 2 * per_warp)
      return ln_reg_go<T, VEC, full, 2>(y, x, scale, bias, rows, cols, eps, stream);
    if (cols <= 4 * per_warp)
      return ln_reg_go<T, VEC, full, 4>(y, x, scale, bias, rows, cols, eps, stream);
    return ln_reg_go<T, VEC, full, 8>(y, x, scale, bias, rows, cols, eps, stream);
  }
}

// The block-per-row kernel: rows longer than K_LN_REG_MAX_COLS.
template <class T>
__global__ void layer_norm_block_kernel(T *y, const T *x, const T *scale, const T *bias,
                                        size_t rows, size_t cols, float eps) {
  typedef typename k_acc<T>::type acc;
  __shared__ acc shared[32];
  for (size_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T *xr = x + row * cols;
    T *yr = y + row * cols;
    acc s = 0;
    for (size_t j = threadIdx.x; j < cols; j += blockDim.x) s += k_ld(xr[j]);
    acc mean = k_block_sum(s, shared) / (acc)cols;
    acc ss = 0;
    for (size_t j = threadIdx.x; j < cols; j += blockDim.x) {
      acc d = k_ld(xr[j]) - mean;
      ss += d * d;
    }
    acc inv_std = 1 / sqrt(k_block_sum(ss, shared) / (acc)cols + (acc)eps);
    for (size_t j = threadIdx.x; j < cols; j += blockDim.x) {
      acc v = (k_ld(xr[j]) - mean) * inv_std * k_ld(scale[j]);
      if (bias) v += k_ld(bias[j]);
      yr[j] = k_st<T>((float)v);
    }
  }
}

// grid.x walks (n*c) planes, grid.y and threads walk the spatial extent.
template <class T>
__global__ void batch_norm_kernel(T *y, const T *x, const T *scale, const T *bias, const T *mean,
                                  const T *var, size_t planes, size_t c, size_t spatial, float eps) {
  for (size_t p = blockIdx.x; p < planes; p += gridDim.x) {
    size_t ch = p % c;
    float k = (float)((double)k_ld(scale[ch]) / sqrt((double)k_ld(var[ch]) + (double)eps));
    float m = k_ld(mean[ch]), b = bias ? k_ld(bias[ch]) : 0.0f;
    const T *xs = x + p * spatial;
    T *ys = y + p * spatial;
    size_t stride = (size_t)gridDim.y * blockDim.x;
    for (size_t s = (size_t)blockIdx.y * blockDim.x + threadIdx.x; s < spatial; s += stride)
      ys[s] = k_st<T>(__fadd_rn(__fmul_rn(__fsub_rn(k_ld(xs[s]), m), k), b));
  }
}

// --- group norm

#define K_GN_WARP_MAX_LEN 1024
#define K_GN_WARPS 8            // rows (warps) per block of the warp kernel
#define K_GN_THREADS 256        // threads of the block and chunk kernels
#define K_GN_TARGET_BLOCKS 1024  // about the blocks of 256 an H100/H200 holds at once (132 SMs x 8)
#define K_GN_MIN_CHUNK 4096     // elements: 16 per thread, enough to hide a block's start
#define K_GN_MAX_SPLITS 64

// A row's shape: len = cg channels x spatial, its scale and bias per
// channel or (per_group) one for the row's group.
struct gn_geom {
  size_t rows, len, spatial, groups, cg;
  int per_group;
};

// y = (x - mean) inv_std scale + bias for j = from, from + step, ... < to of
// row r. The channel is tracked as j advances (one division per thread and
// row, not one per element: a 64-bit division costs more than the element's
// memory traffic).
template <class T>
static __device__ __forceinline__ void gn_apply(T *yr, const T *xr, const T *scale, const T *bias,
                                                const gn_geom &gm, size_t r, size_t from, size_t to,
                                                size_t step, typename k_acc<T>::type mean,
                                                typename k_acc<T>::type inv_std) {
  typedef typename k_acc<T>::type acc;
  if (from >= to) return;
  const size_t g = r % gm.groups, dq = step / gm.spatial, dr = step % gm.spatial;
  size_t k = from / gm.spatial, s = from % gm.spatial;  // channel in the group, position in it
#pragma unroll 4
  for (size_t j = from; j < to; j += step) {
    size_t ch = gm.per_group ? g : g * gm.cg + k;
    acc v = ((acc)k_ld(xr[j]) - mean) * inv_std * (acc)k_ld(scale[ch]) + (acc)k_ld(bias[ch]);
    yr[j] = k_st<T>((float)v);
    k += dq, s += dr;
    if (s >= gm.spatial) s -= gm.spatial, k++;
  }
}

// One warp per row (len <= K_GN_WARP_MAX_LEN: the re-reads of the second and
// third pass hit L1).
template <class T>
__global__ void __launch_bounds__(32 * K_GN_WARPS)
    gn_warp_kernel(T *y, const T *x, const T *scale, const T *bias, gn_geom gm, float eps) {
  typedef typename k_acc<T>::type acc;
  const unsigned lane = threadIdx.x & 31;
  for (size_t r = (size_t)blockIdx.x * K_GN_WARPS + (threadIdx.x >> 5); r < gm.rows;
       r += (size_t)gridDim.x * K_GN_WARPS) {
    const T *xr = x + r * gm.len;
    acc s = 0;
    for (size_t j = lane; j < gm.len; j += 32) s += k_ld(xr[j]);
    const acc mean = k_warp_sum(s) / (acc)gm.len;
    acc ss = 0;
    for (size_t j = lane; j < gm.len; j += 32) {
      acc d = (acc)k_ld(xr[j]) - mean;
      ss += d * d;
    }
    const acc inv_std = 1 / sqrt(k_warp_sum(ss) / (acc)gm.len + (acc)eps);
    gn_apply(y + r * gm.len, xr, scale, bias, gm, r, lane, gm.len, 32, mean, inv_std);
  }
}

// One block per row.
template <class T>
__global__ void __launch_bounds__(K_GN_THREADS)
    gn_block_kernel(T *y, const T *x, const T *scale, const T *bias, gn_geom gm, float eps) {
  typedef typename k_acc<T>::type acc;
  __shared__ acc shared[32];
  for (size_t r = blockIdx.x; r < gm.rows; r += gridDim.x) {
    const T *xr = x + r * gm.len;
    acc s = 0;
#pragma unroll 4
    for (size_t j = threadIdx.x; j < gm.len; j += blockDim.x) s += k_ld(xr[j]);
    const acc mean = k_block_sum(s, shared) / (acc)gm.len;
    acc ss = 0;
#pragma unroll 4
    for (size_t j = threadIdx.x; j < gm.len; j += blockDim.x) {
      acc d = (acc)k_ld(xr[j]) - mean;
      ss += d * d;
    }
    const acc inv_std = 1 / sqrt(k_block_sum(ss, shared) / (acc)gm.len + (acc)eps);
    gn_apply(y + r * gm.len, xr, scale, bias, gm, r, threadIdx.x, gm.len, blockDim.x, mean,
             inv_std);
  }
}

// A chunk's statistics: its mean and the sum of squares about it (its count
// follows from the chunk size).
struct gn_part {
  double mean, m2;
};

// grid (splits, rows): block (s, r) takes chunk s of row r.
template <class T>
__global__ void __launch_bounds__(K_GN_THREADS)
    gn_chunk_stats_kernel(gn_part *ws, const T *x, gn_geom gm, size_t chunk) {
  typedef typename k_acc<T>::type acc;
  __shared__ acc shared[32];
  const size_t r = blockIdx.y, from = (size_t)blockIdx.x * chunk;
  const size_t to = from + chunk < gm.len ? from + chunk : gm.len;
  const T *xr = x + r * gm.len;
  acc s = 0;
#pragma unroll 4
  for (size_t j = from + threadIdx.x; j < to; j += blockDim.x) s += k_ld(xr[j]);
  const acc mean = k_block_sum(s, shared) / (acc)(to - from);
  acc ss = 0;
#pragma unroll 4
  for (size_t j = from + threadIdx.x; j < to; j += blockDim.x) {
    acc d = (acc)k_ld(xr[j]) - mean;
    ss += d * d;
  }
  ss = k_block_sum(ss, shared);
  if (threadIdx.x == 0) ws[r * gridDim.x + blockIdx.x] = gn_part{(double)mean, (double)ss};
}

// grid (splits, rows): every block merges row r's chunks (the same order in
// each, so all agree to the bit), then normalises its own chunk.
template <class T>
__global__ void __launch_bounds__(K_GN_THREADS)
    gn_chunk_apply_kernel(T *y, const T *x, const T *scale, const T *bias, const gn_part *ws,
                          gn_geom gm, size_t chunk, float eps) {
  typedef typename k_acc<T>::type acc;
  __shared__ acc st[2];
  const size_t r = blockIdx.y, splits = gridDim.x, from = (size_t)blockIdx.x * chunk;
  const size_t to = from + chunk < gm.len ? from + chunk : gm.len;
  if (threadIdx.x == 0) {
    double cnt = 0, mean = 0, m2 = 0;
    for (size_t k = 0; k < splits; k++) {
      gn_part p = ws[r * splits + k];
      size_t b0 = k * chunk, b1 = b0 + chunk < gm.len ? b0 + chunk : gm.len;
      double nb = (double)(b1 - b0), n = cnt + nb, d = p.mean - mean;
      mean += d * (nb / n);
      m2 += p.m2 + d * d * (cnt * nb / n);
      cnt = n;
    }
    st[0] = (acc)mean;
    st[1] = (acc)(1 / sqrt(m2 / cnt + (double)eps));
  }
  __syncthreads();
  gn_apply(y + r * gm.len, x + r * gm.len, scale, bias, gm, r, from + threadIdx.x, to,
           (size_t)blockDim.x, st[0], st[1]);
}

// How many chunks each row is cut into (1: no workspace, a block or warp per row).
static size_t gn_splits(size_t rows, size_t len) {
  if (len <= K_GN_WARP_MAX_LEN || rows >= K_GN_TARGET_BLOCKS / 2) return 1;
  size_t want = (K_GN_TARGET_BLOCKS + rows - 1) / rows, most = len / K_GN_MIN_CHUNK;
  if (want > most) want = most;
  if (want > K_GN_MAX_SPLITS) want = K_GN_MAX_SPLITS;
  return want > 1 ? want : 1;
}

template <class T>
static int launch_group_norm(const char *kname, T *y, const T *x, const T *scale, const T *bias,
                             const gn_geom &gm, float eps, void *ws, size_t ws_bytes, int path,
                             cudaStream_t stream, err *e) {
  size_t splits = gn_splits(gm.rows, gm.len);
  if (path == 0 || (path < 0 && gm.len <= K_GN_WARP_MAX_LEN)) {
    size_t want = (gm.rows + K_GN_WARPS - 1) / K_GN_WARPS;
    unsigned blocks = want > K_MAX_BLOCKS ? K_MAX_BLOCKS : (unsigned)want;
    gn_warp_kernel<T><<<blocks, 32 * K_GN_WARPS, 0, stream>>>(y, x, scale, bias, gm, eps);
  } else if (path == 1 || (path < 0 && (splits == 1 || !ws || ws_bytes < splits * gm.rows * sizeof(gn_part)))) {
    unsigned blocks = gm.rows > 65535u * 4 ? 65535u * 4 : (unsigned)gm.rows;
    gn_block_kernel<T><<<blocks, K_GN_THREADS, 0, stream>>>(y, x, scale, bias, gm, eps);
  } else {
    if (path == 2) splits = splits > 1 ? splits : 2;  // forced: at least two chunks
    if (!ws || ws_bytes < splits * gm.rows * sizeof(gn_part) || gm.rows > 65535)
      return err_set(e, ERR_INVALID_ARGUMENT, "%s: the chunked path needs %zu workspace bytes, got %zu",
                     kname, splits * gm.rows * sizeof(gn_part), ws_bytes);
    size_t chunk = (gm.len + splits - 1) / splits;
    splits = (gm.len + chunk - 1) / chunk;  // no empty chunk
    dim3 grid((unsigned)splits, (unsigned)gm.rows);
    gn_part *p = static_cast<gn_part *>(ws);
    gn_chunk_stats_kernel<T><<<grid, K_GN_THREADS, 0, stream>>>(p, x, gm, chunk);
    K_LAUNCH_CHECK(e, kname);
    gn_chunk_apply_kernel<T><<<grid, K_GN_THREADS, 0, stream>>>(y, x, scale, bias, p, gm, chunk, eps);
  }
  K_LAUNCH_CHECK(e, kname);
  return 0;
}

static int group_norm_any(const char *kname, void *y, const void *x, const void *scale,
                          const void *bias, dtype dt, size_t n, size_t c, size_t groups,
                          size_t spatial, int per_group, float eps, void *ws, size_t ws_bytes,
                          int path, cudaStream_t stream, err *e) {
  size_t total;
  if (!k_mul3(n, c, spatial, &total))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: %zu x %zu x %zu elements overflow", kname, n, c,
                   spatial);
  if (groups == 0 || c % groups != 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: %zu channels do not split into %zu groups", kname,
                   c, groups);
  if (!(eps >= 0.0f))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: epsilon %g is negative or NaN", kname,
                   (double)eps);
  if (total == 0) return 0;
  if (!y || !x || !scale || !bias)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p x=%p scale=%p bias=%p)", kname,
                   y, x, scale, bias);
  gn_geom gm = {n * groups, c / groups * spatial, spatial, groups, c / groups, per_group != 0};
  K_DT_DISPATCH(e, kname, dt, T,
                return launch_group_norm<T>(kname, static_cast<T *>(y), static_cast<const T *>(x),
                                            static_cast<const T *>(scale),
                                            static_cast<const T *>(bias), gm, eps, ws, ws_bytes,
                                            path, stream, e));
  return 0;
}

template <class T>
int launch_layer_norm(const char *kname, T *y, const T *x, const T *scale, const T *bias,
                      size_t rows, size_t cols, float eps, bool force_block, cudaStream_t stream,
                      err *e) {
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
  if (cols <= K_LN_REG_MAX_COLS && !force_block) {
    const unsigned vb = 16;  // one 16-byte vector: 4 floats, 8 halves
    const int vec = (int)(vb / sizeof(T));
    bool vector = cols % vec == 0 && k_aligned(y, vb) && k_aligned(x, vb) && k_aligned(scale, vb) &&
                  (!bias || k_aligned(bias, vb));
    if (vector)
      ln_reg_pick<T, 16 / sizeof(T), 1>(y, x, scale, bias, rows, (int)cols, eps, stream);
    else
      ln_reg_pick<T, 1, 1>(y, x, scale, bias, rows, (int)cols, eps, stream);
  } else {
    unsigned blocks = rows > 65535u * 4 ? 65535u * 4 : (unsigned)rows;
    layer_norm_block_kernel<T>
        <<<blocks, k_row_threads(cols), 0, stream>>>(y, x, scale, bias, rows, cols, eps);
  }
  K_LAUNCH_CHECK(e, kname);
  return 0;
}

template <class T>
int launch_batch_norm(const char *kname, T *y, const T *x, const T *scale, const T *bias,
                      const T *mean, const T *var, size_t n, size_t c, size_t spatial, float eps,
                      cudaStream_t stream, err *e) {
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
  batch_norm_kernel<T><<<grid, K_THREADS, 0, stream>>>(y, x, scale, bias, mean, var, planes, c,
                                                       spatial, eps);
  K_LAUNCH_CHECK(e, kname);
  return 0;
}

}  // namespace

extern "C" int k_layer_norm_cuda(float *y, const float *x, const float *scale, const float *bias,
                                 size_t rows, size_t cols, float eps, cudaStream_t stream, err *e) {
  return launch_layer_norm("k_layer_norm_cuda", y, x, scale, bias, rows, cols, eps, false, stream,
                           e);
}
extern "C" int k_layer_norm_f16_cuda(uint16_t *y, const uint16_t *x, const uint16_t *scale,
                                     const uint16_t *bias, size_t rows, size_t cols, float eps,
                                     cudaStream_t stream, err *e) {
  return launch_layer_norm("k_layer_norm_f16_cuda", k_half(y), k_half(x), k_half(scale),
                           k_half(bias), rows, cols, eps, false, stream, e);
}
extern "C" int k_layer_norm__block_cuda(float *y, const float *x, const float *scale,
                                        const float *bias, size_t rows, size_t cols, float eps,
                                        cudaStream_t stream, err *e) {
  return launch_layer_norm("k_layer_norm__block_cuda", y, x, scale, bias, rows, cols, eps, true,
                           stream, e);
}
extern "C" int k_layer_norm_f16__block_cuda(uint16_t *y, const uint16_t *x, const uint16_t *scale,
                                            const uint16_t *bias, size_t rows, size_t cols,
                                            float eps, cudaStream_t stream, err *e) {
  return launch_layer_norm("k_layer_norm_f16__block_cuda", k_half(y), k_half(x), k_half(scale),
                           k_half(bias), rows, cols, eps, true, stream, e);
}

extern "C" int k_batch_norm_cuda(float *y, const float *x, const float *scale, const float *bias,
                                 const float *mean, const float *var, size_t n, size_t c,
                                 size_t spatial, float eps, cudaStream_t stream, err *e) {
  return launch_batch_norm("k_batch_norm_cuda", y, x, scale, bias, mean, var, n, c, spatial, eps,
                           stream, e);
}
extern "C" int k_batch_norm_f16_cuda(uint16_t *y, const uint16_t *x, const uint16_t *scale,
                                     const uint16_t *bias, const uint16_t *mean,
                                     const uint16_t *var, size_t n, size_t c, size_t spatial,
                                     float eps, cudaStream_t stream, err *e) {
  return launch_batch_norm("k_batch_norm_f16_cuda", k_half(y), k_half(x), k_half(scale),
                           k_half(bias), k_half(mean), k_half(var), n, c, spatial, eps, stream, e);
}

extern "C" size_t k_group_norm_cuda_ws(size_t n, size_t c, size_t groups, size_t spatial) {
  if (groups == 0 || c % groups != 0) return 0;
  size_t rows, len;
  if (__builtin_mul_overflow(n, groups, &rows) || __builtin_mul_overflow(c / groups, spatial, &len))
    return 0;
  size_t splits = gn_splits(rows, len);
  return splits > 1 ? splits * rows * sizeof(gn_part) : 0;
}
extern "C" int k_group_norm_cuda(void *y, const void *x, const void *scale, const void *bias,
                                 dtype dt, size_t n, size_t c, size_t groups, size_t spatial,
                                 int per_group, float eps, void *ws, size_t ws_bytes,
                                 cudaStream_t stream, err *e) {
  return group_norm_any("k_group_norm_cuda", y, x, scale, bias, dt, n, c, groups, spatial,
                        per_group, eps, ws, ws_bytes, -1, stream, e);
}
extern "C" int k_group_norm__path_cuda(void *y, const void *x, const void *scale, const void *bias,
                                       dtype dt, size_t n, size_t c, size_t groups, size_t spatial,
                                       int per_group, float eps, void *ws, size_t ws_bytes, int path,
                                       cudaStream_t stream, err *e) {
  if (path < 0 || path > 2)
    return err_set(e, ERR_INVALID_ARGUMENT, "k_group_norm__path_cuda: path %d (0, 1 or 2)", path);
  return group_norm_any("k_group_norm__path_cuda", y, x, scale, bias, dt, n, c, groups, spatial,
                        per_group, eps, ws, ws_bytes, path, stream, e);
}
