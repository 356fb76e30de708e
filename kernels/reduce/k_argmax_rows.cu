// kernels/reduce/k_argmax_rows.cu: the greedy token of each row of a step's
// logits on the GPU (issue 35), so that only int32 ids cross to the host.
// The policy is the host sampler's loop (k_argmax_rows_ref in
// kernels/reduce/k_reduce.c: best = 0, replaced only by a strictly larger
// value): the lowest index among equal maxima, NaN never chosen unless it
// sits at index 0 (then 0, as the loop never moves off it). Mapping NaN to
// -inf gives exactly that for indices > 0, because index 0 (>= -inf) then
// ties or wins with the lower index.
//
// A vocabulary row (128k logits) is too much for one block: one block a row
// took 58 us on an H200 for what the memory reads in under 1. With a
// workspace the row is split: pass 1 gives each ARGMAX_CHUNK columns of a
// row a block, which writes its chunk's best (value, index); pass 2 (a warp
// a row) picks the best of the chunks with the same rule. "Best" is a total
// order (larger value, then lower index), so the split changes no answer.
// No atomics, no counters to reset: a graph replays it as is.
#include "kernels/k_cuda_common.cuh"

namespace {

#define ARGMAX_THREADS 1024
#define ARGMAX_SPLIT_THREADS 256
#define ARGMAX_CHUNK 2048  // columns per block of the split pass (8 a thread)

// (v, i) beats (w, j): larger value, or equal value and lower index.
static __device__ __forceinline__ bool beats(float v, int32_t i, float w, int32_t j) {
  return v > w || (v == w && i < j);
}

static __device__ __forceinline__ void warp_best(float &best, int32_t &bi) {
  for (int o = 16; o > 0; o >>= 1) {
    float w = __shfl_down_sync(0xffffffffu, best, o);
    int32_t j = __shfl_down_sync(0xffffffffu, bi, o);
    if (beats(w, j, best, bi)) best = w, bi = j;
  }
}

// The block's best of columns c0 .. c1 - 1 of row (NaN as -inf), in thread
// 0's best / bi. sv and si: blockDim.x / 32 entries of shared memory.
template <class T>
static __device__ __forceinline__ void block_best(const T *row, size_t c0, size_t c1, float *sv, int32_t *si,
                                                  float &best, int32_t &bi) {
  best = -INFINITY;
  bi = INT32_MAX;
#pragma unroll 4
  for (size_t c = c0 + threadIdx.x; c < c1; c += blockDim.x) {
    float v = k_ld(row[c]);
    if (v != v) v = -INFINITY;
    if (beats(v, (int32_t)c, best, bi)) best = v, bi = (int32_t)c;
  }
  warp_best(best, bi);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  if (lane == 0) sv[warp] = best, si[warp] = bi;
  __syncthreads();
  if (warp == 0) {
    best = lane < nw ? sv[lane] : -INFINITY;
    bi = lane < nw ? si[lane] : INT32_MAX;
    warp_best(best, bi);
  }
}

template <class T>
__global__ void argmax_rows_kernel(int32_t *ids, const T *x, size_t cols) {
  const T *row = x + (size_t)blockIdx.x * cols;
  __shared__ float sv[ARGMAX_THREADS / 32];
  __shared__ int32_t si[ARGMAX_THREADS / 32];
  float best;
  int32_t bi;
  block_best(row, 0, cols, sv, si, best, bi);
  if (threadIdx.x == 0) {
    float v0 = k_ld(row[0]);
    ids[blockIdx.x] = v0 != v0 ? 0 : bi;
  }
}

// Pass 1: block (chunk, row) writes its chunk's best to pv / pi [row][chunk].
template <class T>
__global__ void __launch_bounds__(ARGMAX_SPLIT_THREADS)
    argmax_part_kernel(float *pv, int32_t *pi, const T *x, size_t cols) {
  const size_t chunk = blockIdx.x, r = blockIdx.y, c0 = chunk * ARGMAX_CHUNK;
  const size_t c1 = c0 + ARGMAX_CHUNK < cols ? c0 + ARGMAX_CHUNK : cols;
  __shared__ float sv[ARGMAX_SPLIT_THREADS / 32];
  __shared__ int32_t si[ARGMAX_SPLIT_THREADS / 32];
  float best;
  int32_t bi;
  block_best(x + r * cols, c0, c1, sv, si, best, bi);
  if (threadIdx.x == 0) {
    pv[r * gridDim.x + chunk] = best;
    pi[r * gridDim.x + chunk] = bi;
  }
}

// Pass 2: one warp a row over its chunks' bests.
template <class T>
__global__ void argmax_final_kernel(int32_t *ids, const float *pv, const int32_t *pi, const T *x, size_t cols,
                                    int chunks) {
  const size_t r = blockIdx.x;
  float best = -INFINITY;
  int32_t bi = INT32_MAX;
  for (int c = threadIdx.x; c < chunks; c += 32) {
    float v = pv[r * chunks + c];
    int32_t i = pi[r * chunks + c];
    if (beats(v, i, best, bi)) best = v, bi = i;
  }
  warp_best(best, bi);
  if (threadIdx.x == 0) {
    float v0 = k_ld(x[r * cols]);
    ids[r] = v0 != v0 ? 0 : bi;
  }
}

static size_t argmax_chunks(size_t cols) { return (cols + ARGMAX_CHUNK - 1) / ARGMAX_CHUNK; }

}  // namespace

extern "C" size_t k_argmax_rows_ws_bytes(size_t rows, size_t cols) {
  return rows * argmax_chunks(cols) * (sizeof(float) + sizeof(int32_t));
}

extern "C" int k_argmax_rows_cuda(int32_t *ids, const void *x, size_t rows, size_t cols, void *ws, dtype dt,
                                  cudaStream_t stream, err *e) {
  static const char *kname = "k_argmax_rows_cuda";
  if (rows == 0) return 0;
  if (!ids || !x) return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer", kname);
  if (cols == 0 || cols > (size_t)INT32_MAX)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: %zu columns (1 .. 2^31 - 1)", kname, cols);
  if (rows > 0x7fffffffu) return err_set(e, ERR_INVALID_ARGUMENT, "%s: %zu rows", kname, rows);
  size_t chunks = argmax_chunks(cols);
  if (ws && chunks > 1 && rows <= 65535) {
    float *pv = (float *)ws;
    int32_t *pi = (int32_t *)(pv + rows * chunks);
    dim3 grid((unsigned)chunks, (unsigned)rows);
    K_DT_DISPATCH(e, kname, dt, T, {
      argmax_part_kernel<T><<<grid, ARGMAX_SPLIT_THREADS, 0, stream>>>(pv, pi, (const T *)x, cols);
      argmax_final_kernel<T><<<(unsigned)rows, 32, 0, stream>>>(ids, pv, pi, (const T *)x, cols, (int)chunks);
    });
  } else {
    unsigned th = cols >= ARGMAX_THREADS ? ARGMAX_THREADS : (unsigned)((cols + 31) / 32 * 32);
    K_DT_DISPATCH(e, kname, dt, T, argmax_rows_kernel<T><<<(unsigned)rows, th, 0, stream>>>(ids, (const T *)x, cols));
  }
  K_LAUNCH_CHECK(e, kname);
  return 0;
}
