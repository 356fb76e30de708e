// kernels/k_index.cu: CUDA twin of k_where (k_index.c): y = cond ? a : b
// with numpy broadcasting over all three, any element size (moved as is,
// so the result is the reference's bit for bit). The host plans the walk
// as k_binary.cu does (size-1 output dims dropped, dims every operand walks
// contiguously merged, stride 0 where an operand repeats) and passes it by
// value; one thread per output element, 32-bit index math where it fits.
#include "kernels/k_cuda_common.cuh"

namespace {

template <int B>
struct bits;
template <>
struct bits<1> {
  typedef uint8_t t;
};
template <>
struct bits<2> {
  typedef uint16_t t;
};
template <>
struct bits<4> {
  typedef uint32_t t;
};
template <>
struct bits<8> {
  typedef unsigned long long t;
};

// Merged dims and, per operand (cond, a, b), the element strides.
struct wplan {
  int nd;
  int64_t dims[K_MAX_DIMS];
  int64_t st[3][K_MAX_DIMS];
};

void plan_make(wplan *p, int ndim, const int64_t *ydims, const int64_t *const *in) {
  int64_t st[3][K_MAX_DIMS];
  for (int k = 0; k < 3; k++) {
    int64_t acc = 1;
    for (int i = ndim - 1; i >= 0; i--) {
      st[k][i] = in[k][i] == 1 && ydims[i] != 1 ? 0 : acc;
      acc *= in[k][i];
    }
  }
  p->nd = 0;
  for (int i = 0; i < ndim; i++) {
    if (ydims[i] == 1) continue;
    int j = p->nd - 1;
    bool merge = j >= 0;
    for (int k = 0; k < 3 && merge; k++) merge = p->st[k][j] == st[k][i] * ydims[i];
    if (merge) {
      p->dims[j] *= ydims[i];
      for (int k = 0; k < 3; k++) p->st[k][j] = st[k][i];
    } else {
      p->dims[p->nd] = ydims[i];
      for (int k = 0; k < 3; k++) p->st[k][p->nd] = st[k][i];
      p->nd++;
    }
  }
  if (p->nd == 0) {
    p->nd = 1;
    p->dims[0] = 1;
    for (int k = 0; k < 3; k++) p->st[k][0] = 0;
  }
}

template <class T, typename IDX>
__global__ void where_kernel(T *y, const uint8_t *c, const T *a, const T *b, IDX n, wplan p) {
  IDX stride = (IDX)gridDim.x * blockDim.x;
  for (IDX i = (IDX)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    IDX rem = i;
    int64_t co = 0, ao = 0, bo = 0;
    for (int k = p.nd - 1; k >= 0; k--) {
      IDX d = (IDX)p.dims[k];
      IDX q = rem / d;
      IDX r = rem - q * d;
      co += (int64_t)r * p.st[0][k];
      ao += (int64_t)r * p.st[1][k];
      bo += (int64_t)r * p.st[2][k];
      rem = q;
    }
    y[i] = c[co] ? a[ao] : b[bo];
  }
}

template <int B>
void launch(void *y, const uint8_t *c, const void *a, const void *b, uint64_t n, const wplan &p,
            cudaStream_t s) {
  typedef typename bits<B>::t T;
  unsigned blocks = k_blocks_for((size_t)n, K_THREADS);
  if (n <= 0x7fffffffu)
    where_kernel<T, uint32_t><<<blocks, K_THREADS, 0, s>>>((T *)y, c, (const T *)a, (const T *)b,
                                                          (uint32_t)n, p);
  else
    where_kernel<T, uint64_t><<<blocks, K_THREADS, 0, s>>>((T *)y, c, (const T *)a, (const T *)b, n, p);
}

}  // namespace

extern "C" int k_where_cuda(void *y, const uint8_t *cond, const void *a, const void *b, size_t esz,
                            int ndim, const int64_t *ydims, const int64_t *cdims,
                            const int64_t *adims, const int64_t *bdims, cudaStream_t stream, err *e) {
  const char *kn = "k_where_cuda";
  if (ndim < 0 || ndim > K_MAX_DIMS)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: rank %d outside 0..%d", kn, ndim, K_MAX_DIMS);
  if (ndim > 0 && (!ydims || !cdims || !adims || !bdims))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL dims for rank %d", kn, ndim);
  if (esz != 1 && esz != 2 && esz != 4 && esz != 8)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: element size %zu is not 1, 2, 4 or 8", kn, esz);
  const int64_t *in[3] = {cdims, adims, bdims};
  uint64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (ydims[i] < 0) return err_set(e, ERR_INVALID_ARGUMENT, "%s: negative dim at axis %d", kn, i);
    for (int k = 0; k < 3; k++)
      if (in[k][i] != ydims[i] && in[k][i] != 1)
        return err_set(e, ERR_INVALID_ARGUMENT, "%s: axis %d: %s dim %lld does not broadcast to %lld", kn, i,
                       k == 0 ? "condition" : k == 1 ? "X" : "Y", (long long)in[k][i], (long long)ydims[i]);
    if (__builtin_mul_overflow(n, (uint64_t)ydims[i], &n))
      return err_set(e, ERR_INVALID_ARGUMENT, "%s: element count overflows", kn);
  }
  if (n == 0) return 0;
  if (!y || !cond || !a || !b)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p cond=%p a=%p b=%p)", kn, y,
                   (const void *)cond, a, b);
  wplan p;
  plan_make(&p, ndim, ydims, in);
  switch (esz) {
    case 1: launch<1>(y, cond, a, b, n, p, stream); break;
    case 2: launch<2>(y, cond, a, b, n, p, stream); break;
    case 4: launch<4>(y, cond, a, b, n, p, stream); break;
    default: launch<8>(y, cond, a, b, n, p, stream); break;
  }
  K_LAUNCH_CHECK(e, kn);
  return 0;
}
