// kernels/k_unary.cu: CUDA twins of the elementwise activations of
// k_unary.c. One templated grid-stride kernel per functor; when x and y are
// both 16-byte aligned the body moves float4s and a few threads finish the
// tail. Every thread reads its element before writing it, so y may alias x.
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

template <class Op>
__global__ void unary_kernel(float *y, const float *x, size_t n, Op op) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = op(x[i]);
}

// n4 float4s, then the n_tail floats after them, one each for the first threads.
template <class Op>
__global__ void unary4_kernel(float4 *y, const float4 *x, size_t n4, size_t n_tail, Op op) {
  size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = tid; i < n4; i += stride) {
    float4 v = x[i];
    v.x = op(v.x);
    v.y = op(v.y);
    v.z = op(v.z);
    v.w = op(v.w);
    y[i] = v;
  }
  if (tid < n_tail) {
    float *yt = (float *)(y + n4);
    const float *xt = (const float *)(x + n4);
    yt[tid] = op(xt[tid]);
  }
}

template <class Op>
int launch_unary(const char *kname, float *y, const float *x, size_t n, Op op, cudaStream_t stream,
                 err *e) {
  if (n == 0) return 0;
  if (!y || !x)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p x=%p) for n=%zu", kname,
                   (void *)y, (const void *)x, n);
  if (((uintptr_t)y | (uintptr_t)x) % 16 == 0) {
    size_t n4 = n / 4;
    unary4_kernel<Op><<<k_blocks_for(n4 ? n4 : 1, K_THREADS), K_THREADS, 0, stream>>>(
        (float4 *)y, (const float4 *)x, n4, n % 4, op);
  } else {
    unary_kernel<Op><<<k_blocks_for(n, K_THREADS), K_THREADS, 0, stream>>>(y, x, n, op);
  }
  K_LAUNCH_CHECK(e, kname);
  return 0;
}

}  // namespace

extern "C" int k_relu_cuda(float *y, const float *x, size_t n, cudaStream_t stream, err *e) {
  return launch_unary("k_relu_cuda", y, x, n, op_relu{}, stream, e);
}

extern "C" int k_leaky_relu_cuda(float *y, const float *x, size_t n, float alpha,
                                 cudaStream_t stream, err *e) {
  return launch_unary("k_leaky_relu_cuda", y, x, n, op_leaky{alpha}, stream, e);
}

extern "C" int k_sigmoid_cuda(float *y, const float *x, size_t n, cudaStream_t stream, err *e) {
  return launch_unary("k_sigmoid_cuda", y, x, n, op_sigmoid{}, stream, e);
}

extern "C" int k_tanh_cuda(float *y, const float *x, size_t n, cudaStream_t stream, err *e) {
  return launch_unary("k_tanh_cuda", y, x, n, op_tanh{}, stream, e);
}

extern "C" int k_erf_cuda(float *y, const float *x, size_t n, cudaStream_t stream, err *e) {
  return launch_unary("k_erf_cuda", y, x, n, op_erf{}, stream, e);
}

extern "C" int k_gelu_cuda(float *y, const float *x, size_t n, int approximate, cudaStream_t stream,
                           err *e) {
  if (approximate != 0 && approximate != 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "k_gelu_cuda: approximate must be 0 or 1, got %d",
                   approximate);
  if (approximate) return launch_unary("k_gelu_cuda", y, x, n, op_gelu_tanh{}, stream, e);
  return launch_unary("k_gelu_cuda", y, x, n, op_gelu_erf{}, stream, e);
}
