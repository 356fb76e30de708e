// kernels/reduce/k_argmax_rows.cu: the greedy token of each row of a step's
// logits on the GPU (issue 35), so that only int32 ids cross to the host.
// The policy is the host sampler's loop (k_argmax_rows_ref in
// kernels/reduce/k_reduce.c: best = 0, replaced only by a strictly larger
// value): the lowest index among equal maxima, NaN never chosen unless it
// sits at index 0 (then 0, as the loop never moves off it). Mapping NaN to
// -inf gives exactly that for indices > 0, because index 0 (>= -inf) then
// ties or wins with the lower index.
#include "kernels/k_cuda_common.cuh"

namespace {

#define ARGMAX_THREADS 1024

// (v, i) beats (w, j): larger value, or equal value and lower index.
static __device__ __forceinline__ bool beats(float v, int32_t i, float w, int32_t j) {
  return v > w || (v == w && i < j);
}

template <class T>
__global__ void argmax_rows_kernel(int32_t *ids, const T *x, size_t cols) {
  const T *row = x + (size_t)blockIdx.x * cols;
  float best = -INFINITY;
  int32_t bi = INT32_MAX;
  for (size_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float v = k_ld(row[c]);
    if (v != v) v = -INFINITY;
    if (beats(v, (int32_t)c, best, bi)) best = v, bi = (int32_t)c;
  }
  for (int o = 16; o > 0; o >>= 1) {
    float w = __shfl_down_sync(0xffffffffu, best, o);
    int32_t j = __shfl_down_sync(0xffffffffu, bi, o);
    if (beats(w, j, best, bi)) best = w, bi = j;
  }
  __shared__ float sv[ARGMAX_THREADS / 32];
  __shared__ int32_t si[ARGMAX_THREADS / 32];
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  if (lane == 0) sv[warp] = best, si[warp] = bi;
  __syncthreads();
  if (warp == 0) {
    best = lane < nw ? sv[lane] : -INFINITY;
    bi = lane < nw ? si[lane] : INT32_MAX;
    for (int o = 16; o > 0; o >>= 1) {
      float w = __shfl_down_sync(0xffffffffu, best, o);
      int32_t j = __shfl_down_sync(0xffffffffu, bi, o);
      if (beats(w, j, best, bi)) best = w, bi = j;
    }
    if (lane == 0) {
      float v0 = k_ld(row[0]);
      ids[blockIdx.x] = v0 != v0 ? 0 : bi;
    }
  }
}

}  // namespace

extern "C" int k_argmax_rows_cuda(int32_t *ids, const void *x, size_t rows, size_t cols, dtype dt, cudaStream_t stream,
                                  err *e) {
  static const char *kname = "k_argmax_rows_cuda";
  if (rows == 0) return 0;
  if (!ids || !x) return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer", kname);
  if (cols == 0 || cols > (size_t)INT32_MAX)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: %zu columns (1 .. 2^31 - 1)", kname, cols);
  if (rows > 0x7fffffffu) return err_set(e, ERR_INVALID_ARGUMENT, "%s: %zu rows", kname, rows);
  unsigned th = cols >= ARGMAX_THREADS ? ARGMAX_THREADS : (unsigned)((cols + 31) / 32 * 32);
  K_DT_DISPATCH(e, kname, dt, T, argmax_rows_kernel<T><<<(unsigned)rows, th, 0, stream>>>(ids, (const T *)x, cols));
  K_LAUNCH_CHECK(e, kname);
  return 0;
}
