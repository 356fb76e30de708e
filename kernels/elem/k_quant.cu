// kernels/elem/k_quant.cu: the CUDA twins of linear quantization (k_quant.c, the
// reference): QuantizeLinear (k_quantize), DequantizeLinear (k_dequantize) and
// a QuantizeLinear -> DequantizeLinear pair in one pass (k_fake_quant), per
// tensor or per axis, on FP32 or FP16 storage and the 8- and 16-bit integer
// types. The math is the reference's: x / scale divided in FP32 (IEEE, no
// fast math), rounded half to even (rintf), NaN as 0, plus the zero point,
// saturated; dequantizing multiplies (q - zp) by the scale once in FP32,
// which is the reference's double product rounded to float (q - zp holds at
// most 17 bits, so that product is exact in double). FP16 storage is widened
// to float first and the result rounded to half once.
#include "kernels/k_cuda_common.cuh"

namespace {

// The scale and zero point of flat element i.
struct qparam {
  k_qaxis q;
  __device__ __forceinline__ void at(size_t i, float *s, float *z) const {
    if (!q.scale) {
      *s = q.s0, *z = q.z0;
      return;
    }
    size_t a = (i / q.inner) % q.len;
    *s = q.scale[a];
    *z = q.zp ? q.zp[a] : 0.0f;
  }
};

// The integer range of a quantized type (k_quant_cuda_takes).
struct qrange {
  float lo, hi;
};

__device__ __forceinline__ float quant1(float v, float s, float z, qrange r) {
  float t = rintf(__fdiv_rn(v, s));  // half to even, as the reference's nearbyint
  if (t != t) t = 0.0f;               // NaN quantizes as 0 does
  t = __fadd_rn(t, z);
  return t < r.lo ? r.lo : t > r.hi ? r.hi : t;
}

template <class Q>
__device__ __forceinline__ void st_int(Q *y, size_t i, float v) {
  y[i] = (Q)(int)v;  // v is whole and in Q's range
}

template <class T, class Q>
__global__ void quantize_kernel(Q *y, const T *x, size_t n, qparam p, qrange r) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    float s, z;
    p.at(i, &s, &z);
    st_int(y, i, quant1(k_ld(x[i]), s, z, r));
  }
}

template <class T, class Q>
__global__ void dequantize_kernel(T *y, const Q *x, size_t n, qparam p) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    float s, z;
    p.at(i, &s, &z);
    y[i] = k_store<T>::st(__fmul_rn((float)x[i] - z, s));
  }
}

// Each thread reads its element before writing it: y may alias x.
template <class T>
__global__ void fake_quant_kernel(T *y, const T *x, size_t n, qparam p, qrange r) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    float s, z;
    p.at(i, &s, &z);
    y[i] = k_store<T>::st(__fmul_rn(__fsub_rn(quant1(k_ld(x[i]), s, z, r), z), s));
  }
}

bool range_of(k_elem t, qrange *r) {
  switch (t) {
    case K_I8: *r = {-128.0f, 127.0f}; return true;
    case K_U8: *r = {0.0f, 255.0f}; return true;
    case K_I16: *r = {-32768.0f, 32767.0f}; return true;
    case K_U16: *r = {0.0f, 65535.0f}; return true;
    default: return false;
  }
}

int check(const char *kn, const void *y, const void *x, size_t n, k_elem ft, k_elem qt, const k_qaxis *q,
          qrange *r, err *e) {
  if (ft != K_F32 && ft != K_F16)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: float type %d has no kernel (FP32, FP16)", kn, (int)ft);
  if (!range_of(qt, r))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: quantized type %d has no kernel (INT8, UINT8, INT16, UINT16)",
                   kn, (int)qt);
  if (!q) return err_set(e, ERR_INVALID_ARGUMENT, "%s: no quantization parameters", kn);
  if (q->scale && (q->len == 0 || q->inner == 0))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: per-axis parameters with len %zu, inner %zu", kn, q->len, q->inner);
  if (n && (!y || !x))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p x=%p) for n=%zu", kn, y, x, n);
  return 0;
}

template <class T>
int quantize_to(void *y, k_elem qt, const T *x, size_t n, qparam p, qrange r, cudaStream_t s) {
  unsigned b = k_blocks_for(n, K_THREADS);
  switch (qt) {
    case K_I8: quantize_kernel<<<b, K_THREADS, 0, s>>>((int8_t *)y, x, n, p, r); break;
    case K_U8: quantize_kernel<<<b, K_THREADS, 0, s>>>((uint8_t *)y, x, n, p, r); break;
    case K_I16: quantize_kernel<<<b, K_THREADS, 0, s>>>((int16_t *)y, x, n, p, r); break;
    default: quantize_kernel<<<b, K_THREADS, 0, s>>>((uint16_t *)y, x, n, p, r); break;
  }
  return 0;
}

template <class T>
int dequantize_from(T *y, const void *x, k_elem qt, size_t n, qparam p, cudaStream_t s) {
  unsigned b = k_blocks_for(n, K_THREADS);
  switch (qt) {
    case K_I8: dequantize_kernel<<<b, K_THREADS, 0, s>>>(y, (const int8_t *)x, n, p); break;
    case K_U8: dequantize_kernel<<<b, K_THREADS, 0, s>>>(y, (const uint8_t *)x, n, p); break;
    case K_I16: dequantize_kernel<<<b, K_THREADS, 0, s>>>(y, (const int16_t *)x, n, p); break;
    default: dequantize_kernel<<<b, K_THREADS, 0, s>>>(y, (const uint16_t *)x, n, p); break;
  }
  return 0;
}

}  // namespace

extern "C" int k_quant_cuda_takes(k_elem qt) {
  qrange r = {0.0f, 0.0f};  // set by range_of; initialised for -O3 maybe-uninitialized
  return range_of(qt, &r);
}

extern "C" int k_quantize_cuda(void *y, k_elem qt, const void *x, k_elem xt, size_t n, const k_qaxis *q,
                               cudaStream_t stream, err *e) {
  const char *kn = "k_quantize_cuda";
  qrange r = {0.0f, 0.0f};  // set by range_of; initialised for -O3 maybe-uninitialized
  TRY(check(kn, y, x, n, xt, qt, q, &r, e));
  if (n == 0) return 0;
  qparam p = {*q};
  if (xt == K_F32) quantize_to(y, qt, (const float *)x, n, p, r, stream);
  else quantize_to(y, qt, (const __half *)x, n, p, r, stream);
  K_LAUNCH_CHECK(e, kn);
  return 0;
}

extern "C" int k_dequantize_cuda(void *y, k_elem yt, const void *x, k_elem qt, size_t n, const k_qaxis *q,
                                 cudaStream_t stream, err *e) {
  const char *kn = "k_dequantize_cuda";
  qrange r = {0.0f, 0.0f};  // set by range_of; initialised for -O3 maybe-uninitialized
  TRY(check(kn, y, x, n, yt, qt, q, &r, e));
  if (n == 0) return 0;
  qparam p = {*q};
  if (yt == K_F32) dequantize_from((float *)y, x, qt, n, p, stream);
  else dequantize_from((__half *)y, x, qt, n, p, stream);
  K_LAUNCH_CHECK(e, kn);
  return 0;
}

extern "C" int k_fake_quant_cuda(void *y, const void *x, k_elem et, k_elem qt, size_t n, const k_qaxis *q,
                                 cudaStream_t stream, err *e) {
  const char *kn = "k_fake_quant_cuda";
  qrange r = {0.0f, 0.0f};  // set by range_of; initialised for -O3 maybe-uninitialized
  TRY(check(kn, y, x, n, et, qt, q, &r, e));
  if (n == 0) return 0;
  qparam p = {*q};
  unsigned b = k_blocks_for(n, K_THREADS);
  if (et == K_F32) fake_quant_kernel<<<b, K_THREADS, 0, stream>>>((float *)y, (const float *)x, n, p, r);
  else fake_quant_kernel<<<b, K_THREADS, 0, stream>>>((__half *)y, (const __half *)x, n, p, r);
  K_LAUNCH_CHECK(e, kn);
  return 0;
}
