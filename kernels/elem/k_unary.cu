// kernels/elem/k_unary.cu: CUDA twins of the elementwise activations of
// kernels/elem/k_unary.c, for float and half storage (k_cuda_common.cuh: each element is
// loaded as float, the functor computes in float, the result is stored
// once). One templated grid-stride kernel per functor; when x and y are
// both 16-byte aligned the body moves 16 bytes (4 floats, 8 halves) per
// access and a few threads finish the tail. Every thread reads its element
// before writing it, so y may alias x.
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
