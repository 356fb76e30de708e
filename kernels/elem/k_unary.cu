// kernels/elem/k_unary.cu: CUDA twins of the elementwise activations of
// kernels/elem/k_unary.c, for float and half storage (k_cuda_common.cuh: each element is
// loaded as float, the functor computes in float, the result is stored
// once). One templated grid-stride kernel per functor; when x and y are
// both 16-byte aligned the body moves 16 bytes (4 floats, 8 halves) per
// access and a few threads finish the tail. Every thread reads its element
// before writing it, so y may alias x.
// The integer twin of k_unary (Neg, Abs, Sign, Clip on every K_INT_TYPES
// type) too: one template over the element type, k_unary.c's rules.
#include <string.h>

#include "kernels/k_cuda_common.cuh"

namespace {

struct op_relu {
  __device__ float operator()(float v) const { return k_relu_f(v); }
};
struct op_leaky {
  float alpha;
  __device__ float operator()(float v) const { return v < 0.0f ? alpha * v : v; }
};
struct op_sigmoid {
  // Same branch structure as the reference: exp only of a non-positive value.
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

template <class T, class Op>
int launch_unary(const char *kname, T *y, const T *x, size_t n, Op op, cudaStream_t stream, err *e) {
  if (n == 0) return 0;
  if (!y || !x)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p x=%p) for n=%zu", kname,
                   (void *)y, (const void *)x, n);
  k_map<T>(y, x, n, op, stream);
  K_LAUNCH_CHECK(e, kname);
  return 0;
}

template <class T>
int launch_gelu(const char *kname, T *y, const T *x, size_t n, int approximate, cudaStream_t stream,
                err *e) {
  if (approximate != 0 && approximate != 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: approximate must be 0 or 1, got %d", kname,
                   approximate);
  if (approximate) return launch_unary(kname, y, x, n, op_gelu_tanh{}, stream, e);
  return launch_unary(kname, y, x, n, op_gelu_erf{}, stream, e);
}

}  // namespace

// --- the C entry points: FP32, then FP16 (half bits as uint16_t) for each op

extern "C" int k_relu_cuda(float *y, const float *x, size_t n, cudaStream_t stream, err *e) {
  return launch_unary("k_relu_cuda", y, x, n, op_relu{}, stream, e);
}
extern "C" int k_relu_f16_cuda(uint16_t *y, const uint16_t *x, size_t n, cudaStream_t stream,
                               err *e) {
  return launch_unary("k_relu_f16_cuda", k_half(y), k_half(x), n, op_relu{}, stream, e);
}

extern "C" int k_leaky_relu_cuda(float *y, const float *x, size_t n, float alpha,
                                 cudaStream_t stream, err *e) {
  return launch_unary("k_leaky_relu_cuda", y, x, n, op_leaky{alpha}, stream, e);
}
extern "C" int k_leaky_relu_f16_cuda(uint16_t *y, const uint16_t *x, size_t n, float alpha,
                                     cudaStream_t stream, err *e) {
  return launch_unary("k_leaky_relu_f16_cuda", k_half(y), k_half(x), n, op_leaky{alpha}, stream, e);
}

extern "C" int k_sigmoid_cuda(float *y, const float *x, size_t n, cudaStream_t stream, err *e) {
  return launch_unary("k_sigmoid_cuda", y, x, n, op_sigmoid{}, stream, e);
}
extern "C" int k_sigmoid_f16_cuda(uint16_t *y, const uint16_t *x, size_t n, cudaStream_t stream,
                                  err *e) {
  return launch_unary("k_sigmoid_f16_cuda", k_half(y), k_half(x), n, op_sigmoid{}, stream, e);
}

extern "C" int k_tanh_cuda(float *y, const float *x, size_t n, cudaStream_t stream, err *e) {
  return launch_unary("k_tanh_cuda", y, x, n, op_tanh{}, stream, e);
}
extern "C" int k_tanh_f16_cuda(uint16_t *y, const uint16_t *x, size_t n, cudaStream_t stream,
                               err *e) {
  return launch_unary("k_tanh_f16_cuda", k_half(y), k_half(x), n, op_tanh{}, stream, e);
}

extern "C" int k_erf_cuda(float *y, const float *x, size_t n, cudaStream_t stream, err *e) {
  return launch_unary("k_erf_cuda", y, x, n, op_erf{}, stream, e);
}
extern "C" int k_erf_f16_cuda(uint16_t *y, const uint16_t *x, size_t n, cudaStream_t stream,
                              err *e) {
  return launch_unary("k_erf_f16_cuda", k_half(y), k_half(x), n, op_erf{}, stream, e);
}

extern "C" int k_gelu_cuda(float *y, const float *x, size_t n, int approximate, cudaStream_t stream,
                           err *e) {
  return launch_gelu("k_gelu_cuda", y, x, n, approximate, stream, e);
}
extern "C" int k_gelu_f16_cuda(uint16_t *y, const uint16_t *x, size_t n, int approximate,
                               cudaStream_t stream, err *e) {
  return launch_gelu("k_gelu_f16_cuda", k_half(y), k_half(x), n, approximate, stream, e);
}

// --- integers: k_unary's Neg, Abs, Sign and Clip (kernels/elem/k_unary.c), one template per type

namespace {

// Clip's bounds travel by value (the caller's are host memory); has_lo/has_hi 0: that bound is absent.
template <class T>
struct int_unop {
  k_unop op;
  T lo, hi;
  int has_lo, has_hi;
};

// As k_unary.c's I_NEG, I_ABS, I_SIGN: negation through uint64_t wraps, sign tests skipped for unsigned T.
template <class T, bool S>
__global__ void unary_int_kernel(T *y, const T *x, size_t n, int_unop<T> u) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    T v = x[i];
    bool neg = S && (long long)v < 0;
    switch (u.op) {
      case K_NEG: v = (T)(0 - (unsigned long long)v); break;
      case K_ABS: v = neg ? (T)(0 - (unsigned long long)v) : v; break;
      case K_SIGN: v = neg ? (T)-1 : (T)(v != 0); break;
      default:  // K_CLIP: lo, then hi (with lo > hi every element is hi, as ONNX says)
        if (u.has_lo && v < u.lo) v = u.lo;
        if (u.has_hi && v > u.hi) v = u.hi;
        break;
    }
    y[i] = v;
  }
}

template <class T, bool S>
int launch_unary_int(void *y, const void *x, size_t n, k_unop op, const void *lo, const void *hi,
                     cudaStream_t stream, err *e) {
  int_unop<T> u = {op, 0, 0, lo != NULL, hi != NULL};
  if (lo) memcpy(&u.lo, lo, sizeof(T));
  if (hi) memcpy(&u.hi, hi, sizeof(T));
  unary_int_kernel<T, S><<<k_blocks_for(n, K_THREADS), K_THREADS, 0, stream>>>((T *)y, (const T *)x, n, u);
  K_LAUNCH_CHECK(e, "k_unary_int_cuda");
  return 0;
}

}  // namespace

extern "C" int k_unary_int_cuda(void *y, const void *x, k_elem t, size_t n, k_unop op, const void *lo,
                                const void *hi, cudaStream_t stream, err *e) {
  if (!k_unary_takes(t, op))
    return err_set(e, ERR_INVALID_ARGUMENT, "k_unary_int_cuda: element type %d does not take op %d", (int)t,
                   (int)op);
  if (n == 0) return 0;
  if (!y || !x)
    return err_set(e, ERR_INVALID_ARGUMENT, "k_unary_int_cuda: NULL pointer (y=%p x=%p) for n=%zu", y, x, n);
  switch (t) {
#define CASE_INT(K, T, S) \
  case K: return launch_unary_int<T, S>(y, x, n, op, lo, hi, stream, e);
    K_INT_TYPES(CASE_INT)
#undef CASE_INT
    default: return err_set(e, ERR_INVALID_ARGUMENT, "k_unary_int_cuda: element type %d is not an integer", (int)t);
  }
}
