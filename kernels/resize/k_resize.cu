// kernels/resize/k_resize.cu: CUDA twins of k_resize_nearest and k_resize_linear
// (kernels/resize/k_resize.c) and k_pad (kernels/index/k_index.c): Resize/Upsample and Pad. The index
// math is kernels/resize/k_resize_math.h, the references' own, so every output reads the
// same source element(s) as on the CPU: nearest and pad are copies of any
// element size (bit for bit), linear blends in float with the reference's
// operations in its order (FP32 bit for bit; FP16 the reference on the
// widened inputs, rounded once).
//
// The host plans each walk (dims of output extent 1 folded into a base
// offset, neighbouring dims that map one to one merged) and passes it by
// value, so a launch reads nothing from device memory but the tensors and
// is capturable. One thread per output element, grid-stride; 32-bit index
// arithmetic where the output fits, as in kernels/elem/k_binary.cu.
#include <string.h>

#include "kernels/k_cuda_typed.cuh"
#include "kernels/resize/k_resize_math.h"

namespace {

// A walk over the output's (merged) dims, outermost first: per dim the
// output extent, the input's extent and stride in elements; nearest: the
// dim's scale and whether output index i reads input index i; pad: the
// begin pad. base: the input offset contributed by the dims dropped.
struct rwalk {
  int nd;
  int64_t yd[K_MAX_DIMS];
  int64_t xd[K_MAX_DIMS];
  int64_t xs[K_MAX_DIMS];
  int64_t begin[K_MAX_DIMS];
  float scale[K_MAX_DIMS];
  uint8_t ident[K_MAX_DIMS];
  int64_t base;
};

// Appends a dim to the walk, merged into the previous one when both map
// output index i to input index i over equal extents (contiguous in both
// tensors, so the merged index walks the input at the inner stride).
void walk_add(rwalk *w, int64_t yd, int64_t xd, int64_t xs, int64_t begin, float scale, bool ident) {
  int j = w->nd - 1;
  if (ident && j >= 0 && w->ident[j]) {
    w->yd[j] *= yd;
    w->xd[j] *= xd;
    w->xs[j] = xs;
    return;
  }
  w->yd[w->nd] = yd;
  w->xd[w->nd] = xd;
  w->xs[w->nd] = xs;
  w->begin[w->nd] = begin;
  w->scale[w->nd] = scale;
  w->ident[w->nd] = ident;
  w->nd++;
}

void walk_finish(rwalk *w) {
  if (w->nd) return;
  w->nd = 1;  // every dim dropped: one element at base
  w->yd[0] = w->xd[0] = 1;
  w->xs[0] = 0;
  w->begin[0] = 0;
  w->scale[0] = 1.0f;
  w->ident[0] = 1;
}

// Whether a nearest resize along this dim reads input index i for output
// index i everywhere (a dim it does not resize). Long dims are not
// checked: they take the general path, which gives the same indices.
bool nearest_ident(int64_t xd, int64_t yd, float scale, k_coord c, k_nearest m) {
  if (xd != yd || yd > (1 << 16)) return false;
  for (int64_t o = 0; o < yd; o++)
    if (k_rs_nearest_src(o, scale, xd, yd, c, m) != o) return false;
  return true;
}

// Unravels output index i over the walk's dims, innermost last.
template <typename IDX>
__device__ __forceinline__ IDX unravel(IDX *rem, int64_t extent) {
  IDX d = (IDX)extent, q = *rem / d, r = *rem - q * d;
  *rem = q;
  return r;
}

template <class T, typename IDX>
__global__ void nearest_kernel(T *y, const T *x, IDX n, rwalk w, k_coord c, k_nearest m) {
  IDX stride = (IDX)gridDim.x * blockDim.x;
  for (IDX i = (IDX)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    IDX rem = i;
    int64_t off = w.base;
    for (int k = w.nd - 1; k >= 0; k--) {
      int64_t o = (int64_t)unravel(&rem, w.yd[k]);
      off += (w.ident[k] ? o : k_rs_nearest_src(o, w.scale[k], w.xd[k], w.yd[k], c, m)) * w.xs[k];
    }
    y[i] = x[off];
  }
}

// x as [outer, ih, iw, inner], y as [outer, oh, ow, inner].
template <class T, typename IDX>
__global__ void linear_kernel(T *y, const T *x, IDX n, IDX inner, IDX oh, IDX ow, int64_t ih,
                              int64_t iw, float sh, float sw, k_coord c) {
  IDX stride = (IDX)gridDim.x * blockDim.x;
  for (IDX i = (IDX)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    IDX rem = i;
    IDX ci = unravel(&rem, inner), ox = unravel(&rem, ow), oy = unravel(&rem, oh), o = rem;
    int64_t y0, y1, x0, x1;
    float wy0, wy1, wx0, wx1;
    k_rs_linear_axis((int64_t)oy, sh, ih, (int64_t)oh, c, &y0, &y1, &wy0, &wy1);
    k_rs_linear_axis((int64_t)ox, sw, iw, (int64_t)ow, c, &x0, &x1, &wx0, &wx1);
    const T *p = x + (size_t)o * (size_t)(ih * iw) * (size_t)inner + ci;
    int64_t in = (int64_t)inner;
    y[i] = k_st<T>(k_rs_blend(wy0, wy1, wx0, wx1, k_ld(p[(y0 * iw + x0) * in]), k_ld(p[(y0 * iw + x1) * in]),
                              k_ld(p[(y1 * iw + x0) * in]), k_ld(p[(y1 * iw + x1) * in])));
  }
}

template <class T, typename IDX>
__global__ void pad_kernel(T *y, const T *x, IDX n, rwalk w, k_padmode mode, T value) {
  IDX stride = (IDX)gridDim.x * blockDim.x;
  for (IDX i = (IDX)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    IDX rem = i;
    int64_t off = 0;
    bool inside = true;
    for (int k = w.nd - 1; k >= 0 && inside; k--) {
      int64_t s = k_pad_src((int64_t)unravel(&rem, w.yd[k]) - w.begin[k], w.xd[k], mode);
      inside = s >= 0;
      off += s * w.xs[k];
    }
    y[i] = inside ? x[off] : value;
  }
}

// Checked element count of dims d; false on a negative dim or overflow.
bool count(int nd, const int64_t *d, uint64_t *n) {
  *n = 1;
  for (int i = 0; i < nd; i++)
    if (d[i] < 0 || __builtin_mul_overflow(*n, (uint64_t)d[i], n)) return false;
  return true;
}

template <int B>
void launch_nearest(void *y, const void *x, uint64_t n, const rwalk &w, k_coord c, k_nearest m,
                    cudaStream_t s) {
  typedef typename k_bits<B>::t T;
  unsigned blocks = k_blocks_for((size_t)n, K_THREADS);
  if (n <= 0x7fffffffu)
    nearest_kernel<T, uint32_t><<<blocks, K_THREADS, 0, s>>>((T *)y, (const T *)x, (uint32_t)n, w, c, m);
  else
    nearest_kernel<T, uint64_t><<<blocks, K_THREADS, 0, s>>>((T *)y, (const T *)x, n, w, c, m);
}

template <int B>
void launch_pad(void *y, const void *x, uint64_t n, const rwalk &w, k_padmode mode, const void *value,
                cudaStream_t s) {
  typedef typename k_bits<B>::t T;
  T v = 0;
  if (value) memcpy(&v, value, B);
  unsigned blocks = k_blocks_for((size_t)n, K_THREADS);
  if (n <= 0x7fffffffu)
    pad_kernel<T, uint32_t><<<blocks, K_THREADS, 0, s>>>((T *)y, (const T *)x, (uint32_t)n, w, mode, v);
  else
    pad_kernel<T, uint64_t><<<blocks, K_THREADS, 0, s>>>((T *)y, (const T *)x, n, w, mode, v);
}

template <class T>
void launch_linear(void *y, const void *x, uint64_t n, size_t inner, int64_t ih, int64_t iw, int64_t oh,
                   int64_t ow, float sh, float sw, k_coord c, cudaStream_t s) {
  unsigned blocks = k_blocks_for((size_t)n, K_THREADS);
  if (n <= 0x7fffffffu)
    linear_kernel<T, uint32_t><<<blocks, K_THREADS, 0, s>>>((T *)y, (const T *)x, (uint32_t)n, (uint32_t)inner,
                                                            (uint32_t)oh, (uint32_t)ow, ih, iw, sh, sw, c);
  else
    linear_kernel<T, uint64_t><<<blocks, K_THREADS, 0, s>>>((T *)y, (const T *)x, n, (uint64_t)inner,
                                                            (uint64_t)oh, (uint64_t)ow, ih, iw, sh, sw, c);
}

bool good_scale(float s) { return s > 0.0f && s <= 3.4e38f; }  // false for NaN and inf

}  // namespace

extern "C" int k_resize_nearest_cuda(void *y, const void *x, size_t esz, int ndim, const int64_t *xdims,
                                     const int64_t *ydims, const float *scales, k_coord c, k_nearest m,
                                     cudaStream_t stream, err *e) {
  const char *kn = "k_resize_nearest_cuda";
  if (ndim < 0 || ndim > K_MAX_DIMS)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: rank %d outside 0..%d", kn, ndim, K_MAX_DIMS);
  if (ndim > 0 && (!xdims || !ydims || !scales))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL dims or scales for rank %d", kn, ndim);
  if (esz != 1 && esz != 2 && esz != 4 && esz != 8)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: element size %zu is not 1, 2, 4 or 8", kn, esz);
  if ((int)c < 0 || (int)c > (int)K_COORD_HALF_PIXEL_SYMMETRIC || (int)m < 0 || (int)m > (int)K_NEAREST_SIMPLE)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: unknown coordinate mode %d or nearest mode %d", kn, (int)c,
                   (int)m);
  uint64_t n, nx;
  if (!count(ndim, ydims, &n) || !count(ndim, xdims, &nx))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: negative dim or element count overflow", kn);
  for (int d = 0; d < ndim; d++)
    if (!good_scale(scales[d]))
      return err_set(e, ERR_INVALID_ARGUMENT, "%s: scale %g of dim %d is not a positive number", kn,
                     (double)scales[d], d);
  if (n == 0) return 0;
  if (nx == 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: an empty input cannot fill %llu output elements", kn,
                   (unsigned long long)n);
  if (!y || !x) return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p x=%p)", kn, y, x);
  rwalk w = {};
  int64_t xs[K_MAX_DIMS], acc = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    xs[d] = acc;
    acc *= xdims[d];
  }
  for (int d = 0; d < ndim; d++) {
    if (ydims[d] == 1) {  // one source index for the whole dim
      w.base += k_rs_nearest_src(0, scales[d], xdims[d], 1, c, m) * xs[d];
      continue;
    }
    walk_add(&w, ydims[d], xdims[d], xs[d], 0, scales[d], nearest_ident(xdims[d], ydims[d], scales[d], c, m));
  }
  walk_finish(&w);
  switch (esz) {
    case 1: launch_nearest<1>(y, x, n, w, c, m, stream); break;
    case 2: launch_nearest<2>(y, x, n, w, c, m, stream); break;
    case 4: launch_nearest<4>(y, x, n, w, c, m, stream); break;
    default: launch_nearest<8>(y, x, n, w, c, m, stream); break;
  }
  K_LAUNCH_CHECK(e, kn);
  return 0;
}

extern "C" int k_resize_linear_cuda(void *y, const void *x, k_elem et, size_t outer, int64_t ih, int64_t iw,
                                    size_t inner, int64_t oh, int64_t ow, float sh, float sw, k_coord c,
                                    cudaStream_t stream, err *e) {
  const char *kn = "k_resize_linear_cuda";
  if (et != K_F32 && et != K_F16)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: element type %d has no kernel (FP32, FP16)", kn, (int)et);
  if ((int)c < 0 || (int)c > (int)K_COORD_HALF_PIXEL_SYMMETRIC)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: unknown coordinate mode %d", kn, (int)c);
  if (ih < 0 || iw < 0 || oh < 0 || ow < 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: negative extent", kn);
  if (!good_scale(sh) || !good_scale(sw))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: scales %g, %g are not positive numbers", kn, (double)sh,
                   (double)sw);
  size_t n, nin;
  if (!k_mul3(outer, (size_t)oh, (size_t)ow, &n) || __builtin_mul_overflow(n, inner, &n) ||
      !k_mul3(outer, (size_t)ih, (size_t)iw, &nin) || __builtin_mul_overflow(nin, inner, &nin))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: element count overflows", kn);
  if (n == 0) return 0;
  if (nin == 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: an empty input cannot fill %zu output elements", kn, n);
  if (!y || !x) return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p x=%p)", kn, y, x);
  if (et == K_F32)
    launch_linear<float>(y, x, n, inner, ih, iw, oh, ow, sh, sw, c, stream);
  else
    launch_linear<__half>(y, x, n, inner, ih, iw, oh, ow, sh, sw, c, stream);
  K_LAUNCH_CHECK(e, kn);
  return 0;
}

extern "C" int k_pad_cuda(void *y, const void *x, size_t esz, int ndim, const int64_t *xdims,
                          const int64_t *begin, const int64_t *ydims, k_padmode mode, const void *value,
                          cudaStream_t stream, err *e) {
  const char *kn = "k_pad_cuda";
  if (ndim < 0 || ndim > K_MAX_DIMS)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: rank %d outside 0..%d", kn, ndim, K_MAX_DIMS);
  if (ndim > 0 && (!xdims || !ydims || !begin))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL dims or pads for rank %d", kn, ndim);
  if (esz != 1 && esz != 2 && esz != 4 && esz != 8)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: element size %zu is not 1, 2, 4 or 8", kn, esz);
  if ((int)mode < 0 || (int)mode > (int)K_PAD_WRAP) return err_set(e, ERR_INVALID_ARGUMENT, "%s: unknown mode %d", kn, (int)mode);
  uint64_t n, nx;
  if (!count(ndim, ydims, &n) || !count(ndim, xdims, &nx))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: negative dim or element count overflow", kn);
  if (n == 0) return 0;
  for (int d = 0; d < ndim; d++)
    if (mode != K_PAD_CONSTANT && xdims[d] == 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "%s: %s padding of the empty dim %d", kn,
                     mode == K_PAD_EDGE ? "edge" : mode == K_PAD_WRAP ? "wrap" : "reflect", d);
  if (!y || (nx && !x)) return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p x=%p)", kn, y, x);
  rwalk w = {};
  int64_t xs[K_MAX_DIMS], acc = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    xs[d] = acc;
    acc *= xdims[d];
  }
  for (int d = 0; d < ndim; d++)
    walk_add(&w, ydims[d], xdims[d], xs[d], begin[d], 1.0f, begin[d] == 0 && xdims[d] == ydims[d]);
  walk_finish(&w);
  switch (esz) {
    case 1: launch_pad<1>(y, x, n, w, mode, value, stream); break;
    case 2: launch_pad<2>(y, x, n, w, mode, value, stream); break;
    case 4: launch_pad<4>(y, x, n, w, mode, value, stream); break;
    default: launch_pad<8>(y, x, n, w, mode, value, stream); break;
  }
  K_LAUNCH_CHECK(e, kn);
  return 0;
}
