// kernels/k_binary.cu: CUDA twin of k_binary_f32 (add/sub/mul/div with numpy
// broadcasting). The host plans the walk as the reference does (size-1 dims
// dropped, dims both inputs walk contiguously merged, stride 0 where an
// input repeats) and passes it by value; the common shapes (same shape,
// scalar on either side) get stride-specialised kernels, everything else
// unravels each output index over the merged dims. Each element is one IEEE
// float operation, so results equal the reference's bit for bit.
#include "kernels/k_cuda_common.cuh"

namespace {

struct bplan {
  int nd;  // >= 1 after planning
  int64_t dims[K_MAX_DIMS];
  int64_t as[K_MAX_DIMS];
  int64_t bs[K_MAX_DIMS];
};

// Mirrors bplan_make of k_binary.c. Returns false when the output is empty.
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

__device__ __forceinline__ float apply(k_binop op, float a, float b) {
  switch (op) {
    case K_ADD:
      return __fadd_rn(a, b);
    case K_SUB:
      return __fsub_rn(a, b);
    case K_MUL:
      return __fmul_rn(a, b);
    default:
      return __fdiv_rn(a, b);
  }
}

// SA/SB: the inner stride of a and b, 0 or 1 (contiguous same-shape or scalar side).
template <k_binop OP, int SA, int SB>
__global__ void binary_flat_kernel(float *y, const float *a, const float *b, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = apply(OP, a[SA ? i : 0], b[SB ? i : 0]);
}

// General case: unravel i over the merged dims. IDX is 32-bit when the output
// fits, since 64-bit division is several times slower on the GPU.
template <k_binop OP, typename IDX>
__global__ void binary_bcast_kernel(float *y, const float *a, const float *b, IDX n, bplan p) {
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
    y[i] = apply(OP, a[ao], b[bo]);
  }
}

template <k_binop OP>
void launch_op(float *y, const float *a, const float *b, size_t n, const bplan &p,
               cudaStream_t stream) {
  unsigned blocks = k_blocks_for(n, K_THREADS);
  if (p.nd == 1) {
    int sa = (int)p.as[0], sb = (int)p.bs[0];
    if (sa == 1 && sb == 1)
      binary_flat_kernel<OP, 1, 1><<<blocks, K_THREADS, 0, stream>>>(y, a, b, n);
    else if (sa == 1 && sb == 0)
      binary_flat_kernel<OP, 1, 0><<<blocks, K_THREADS, 0, stream>>>(y, a, b, n);
    else if (sa == 0 && sb == 1)
      binary_flat_kernel<OP, 0, 1><<<blocks, K_THREADS, 0, stream>>>(y, a, b, n);
    else
      binary_flat_kernel<OP, 0, 0><<<blocks, K_THREADS, 0, stream>>>(y, a, b, n);
    return;
  }
  if (n <= 0x7fffffffu)
    binary_bcast_kernel<OP, uint32_t><<<blocks, K_THREADS, 0, stream>>>(y, a, b, (uint32_t)n, p);
  else
    binary_bcast_kernel<OP, uint64_t><<<blocks, K_THREADS, 0, stream>>>(y, a, b, (uint64_t)n, p);
}

}  // namespace

extern "C" int k_binary_f32_cuda(float *y, const float *a, const float *b, int ndim,
                                 const int64_t *ydims, const int64_t *adims, const int64_t *bdims,
                                 k_binop op, cudaStream_t stream, err *e) {
  static const char kname[] = "k_binary_f32_cuda";
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
