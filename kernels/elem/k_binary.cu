// kernels/elem/k_binary.cu: CUDA twins of k_binary_f32 (add/sub/mul/div/pow/max/
// min/mod with numpy broadcasting), for float and half storage, and of
// k_compare_f32/_i64/_i32 (bool output) and k_logic (bool operands). The host plans the walk as the
// reference does (size-1 dims dropped, dims both inputs walk contiguously
// merged, stride 0 where an input repeats) and passes it by value; the common shapes (same shape,
// scalar on either side) get stride-specialised kernels, everything else
// unravels each output index over the merged dims; half moves pairs where
// the pointers allow. Each element is one IEEE float operation (Pow: one
// double pow, rounded once), so FP32 results equal the reference's bit for
// bit (Pow within an ulp) and FP16 ones are the reference's on the widened
// inputs, rounded once.
// Pow of a base and an exponent of different types (k_pow_mixed's twin,
// k_pow_mixed_cuda): each element through double, the result by k_cast's rules.
#include "kernels/k_cuda_common.cuh"

namespace {

struct bplan {
  int nd;  // >= 1 after planning
  int64_t dims[K_MAX_DIMS];
  int64_t as[K_MAX_DIMS];
  int64_t bs[K_MAX_DIMS];
};

// Mirrors bplan_make of kernels/elem/k_binary.c. Returns false when the output is empty.
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

// The shape checks every broadcasting launcher shares; *n the output's count.
int check_bcast(const char *kname, int ndim, const int64_t *ydims, const int64_t *adims,
                const int64_t *bdims, uint64_t *n, err *e) {
  if (ndim < 0 || ndim > K_MAX_DIMS)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: rank %d outside 0..%d", kname, ndim, K_MAX_DIMS);
  if (ndim > 0 && (!ydims || !adims || !bdims))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL dims for rank %d", kname, ndim);
  *n = 1;
  for (int i = 0; i < ndim; i++) {
    if (ydims[i] < 0 || adims[i] < 0 || bdims[i] < 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "%s: negative dim at axis %d", kname, i);
    if ((adims[i] != ydims[i] && adims[i] != 1) || (bdims[i] != ydims[i] && bdims[i] != 1))
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "%s: axis %d: input dims %lld and %lld do not broadcast to %lld", kname, i,
                     (long long)adims[i], (long long)bdims[i], (long long)ydims[i]);
    if (__builtin_mul_overflow(*n, (uint64_t)ydims[i], n))
      return err_set(e, ERR_INVALID_ARGUMENT, "%s: element count overflows", kname);
  }
  return 0;
}

template <k_binop OP>
__device__ __forceinline__ float apply(float a, float b) {
  if (OP == K_ADD) return __fadd_rn(a, b);
  if (OP == K_SUB) return __fsub_rn(a, b);
  if (OP == K_MUL) return __fmul_rn(a, b);
  // powf's device version is off by up to 4 ulp; double's, rounded once,
  // lands where the reference's (glibc, under an ulp) does but for rare ties
  if (OP == K_POW) return (float)pow((double)a, (double)b);
  // NaN on either side wins (`a != a` only for NaN), as the reference's
  if (OP == K_MAX) return a != a || a > b ? a : b;
  if (OP == K_MIN) return a != a || a < b ? a : b;
  // Mod: C's remainder (exact, as fmodf), fmod=0 moved by one divisor where the signs differ and a
  // zero taking the divisor's sign, as the reference's fmodf_floor (kernels/elem/k_binary.c)
  if (OP == K_FMOD) return fmodf(a, b);
  if (OP == K_MOD) {
    float r = fmodf(a, b);
    if (r == 0) return copysignf(0.0f, b);
    return (r < 0) != (b < 0) ? __fadd_rn(r, b) : r;
  }
  return __fdiv_rn(a, b);
}

// SA/SB: the inner stride of a and b, 0 or 1 (contiguous same-shape or scalar side).
template <class T, k_binop OP, int SA, int SB>
__global__ void binary_flat_kernel(T *y, const T *a, const T *b, size_t n) {
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = k_st<T>(apply<OP>(k_ld(a[SA ? i : 0]), k_ld(b[SB ? i : 0])));
}

// Pair i of a side with inner stride S: elements 2i and 2i+1 read in one
// access (S = 1), or its single value v0 twice (S = 0).
template <class T, int S>
__device__ __forceinline__ float2 ld_pair(const T *p, size_t i, float v0) {
  if (!S) return make_float2(v0, v0);
  k_vec<T, 2> v = ((const k_vec<T, 2> *)p)[i];
  return make_float2(k_ld(v.v[0]), k_ld(v.v[1]));
}

// The flat kernel over pairs (k_pairs: half only): y, and each side with
// stride 1, aligned to a pair; n2 pairs, then the odd last element by thread 0.
template <class T, k_binop OP, int SA, int SB>
__global__ void binary_pair_kernel(k_vec<T, 2> *y, const T *a, const T *b, size_t n2, bool odd) {
  size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  float a0 = SA ? 0.0f : k_ld(a[0]), b0 = SB ? 0.0f : k_ld(b[0]);
  for (size_t i = tid; i < n2; i += stride) {
    float2 av = ld_pair<T, SA>(a, i, a0), bv = ld_pair<T, SB>(b, i, b0);
    k_vec<T, 2> yv;
    yv.v[0] = k_st<T>(apply<OP>(av.x, bv.x));
    yv.v[1] = k_st<T>(apply<OP>(av.y, bv.y));
    y[i] = yv;
  }
  if (odd && tid == 0) {
    size_t last = 2 * n2;
    ((T *)y)[last] = k_st<T>(apply<OP>(SA ? k_ld(a[last]) : a0, SB ? k_ld(b[last]) : b0));
  }
}

// Element i of the output unravelled over the merged dims: its offsets in a
// and b. IDX is 32-bit when the output fits, since 64-bit division is several
// times slower on the GPU.
template <typename IDX>
__device__ __forceinline__ void bcast_offsets(IDX i, const bplan &p, int64_t *ao, int64_t *bo) {
  IDX rem = i;
  int64_t a = 0, b = 0;
  for (int k = p.nd - 1; k >= 0; k--) {
    IDX d = (IDX)p.dims[k];
    IDX q = rem / d;
    IDX r = rem - q * d;
    a += (int64_t)r * p.as[k];
    b += (int64_t)r * p.bs[k];
    rem = q;
  }
  *ao = a;
  *bo = b;
}

// General case: each element's operands found by unravelling its index.
template <class T, k_binop OP, typename IDX>
__global__ void binary_bcast_kernel(T *y, const T *a, const T *b, IDX n, bplan p) {
  IDX stride = (IDX)gridDim.x * blockDim.x;
  for (IDX i = (IDX)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    int64_t ao, bo;
    bcast_offsets(i, p, &ao, &bo);
    y[i] = k_st<T>(apply<OP>(k_ld(a[ao]), k_ld(b[bo])));
  }
}

// The general case where the innermost merged dim is contiguous on every side
// (the squeeze-excitation Mul: NHWC [N, H*W, C] by [N, 1, C]): each thread takes
// V = 16 bytes of it, so the index unravelling (a division per dim) and the
// accesses are per 16 bytes instead of per element. p is the plan in units of
// vectors (launch_op checks the dims and strides divide by V, and the pointers'
// alignment).
template <class T, k_binop OP, typename IDX>
__global__ void binary_bcast_vec_kernel(k_vec<T, 16 / sizeof(T)> *y, const k_vec<T, 16 / sizeof(T)> *a,
                                        const k_vec<T, 16 / sizeof(T)> *b, IDX n, bplan p) {
  constexpr int V = 16 / sizeof(T);
  IDX stride = (IDX)gridDim.x * blockDim.x;
  for (IDX i = (IDX)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    int64_t ao, bo;
    bcast_offsets(i, p, &ao, &bo);
    k_vec<T, V> av = a[ao], bv = b[bo], out;
#pragma unroll
    for (int k = 0; k < V; k++) out.v[k] = k_st<T>(apply<OP>(k_ld(av.v[k]), k_ld(bv.v[k])));
    y[i] = out;
  }
}

// p in vectors of 16 bytes, if the broadcast allows it (see binary_bcast_vec_kernel).
template <class T>
bool vec_plan(const bplan &p, const void *y, const void *a, const void *b, bplan *pv) {
  constexpr int V = 16 / sizeof(T);
  const int in = p.nd - 1;
  if (p.as[in] != 1 || p.bs[in] != 1 || p.dims[in] % V) return false;
  if (!k_aligned(y, 16) || !k_aligned(a, 16) || !k_aligned(b, 16)) return false;
  *pv = p;
  for (int k = 0; k < in; k++) {
    if (p.as[k] % V || p.bs[k] % V) return false;
    pv->as[k] = p.as[k] / V;
    pv->bs[k] = p.bs[k] / V;
  }
  pv->dims[in] = p.dims[in] / V;
  return true;
}

template <class T, k_binop OP, int SA, int SB>
void launch_flat(T *y, const T *a, const T *b, size_t n, cudaStream_t stream) {
  if constexpr (k_pairs<T>::value) {
    const unsigned pb = sizeof(k_vec<T, 2>);
    if (n >= 2 && k_aligned(y, pb) && (!SA || k_aligned(a, pb)) && (!SB || k_aligned(b, pb))) {
      binary_pair_kernel<T, OP, SA, SB><<<k_blocks_for(n / 2, K_THREADS), K_THREADS, 0, stream>>>(
          (k_vec<T, 2> *)y, a, b, n / 2, (n & 1) != 0);
      return;
    }
  }
  binary_flat_kernel<T, OP, SA, SB><<<k_blocks_for(n, K_THREADS), K_THREADS, 0, stream>>>(y, a, b, n);
}

template <class T, k_binop OP>
void launch_op(T *y, const T *a, const T *b, size_t n, const bplan &p, cudaStream_t stream) {
  if (p.nd == 1) {
    int sa = (int)p.as[0], sb = (int)p.bs[0];
    if (sa == 1 && sb == 1)
      launch_flat<T, OP, 1, 1>(y, a, b, n, stream);
    else if (sa == 1 && sb == 0)
      launch_flat<T, OP, 1, 0>(y, a, b, n, stream);
    else if (sa == 0 && sb == 1)
      launch_flat<T, OP, 0, 1>(y, a, b, n, stream);
    else
      launch_flat<T, OP, 0, 0>(y, a, b, n, stream);
    return;
  }
  bplan pv;
  if (vec_plan<T>(p, y, a, b, &pv)) {
    typedef k_vec<T, 16 / sizeof(T)> vec;
    size_t nv = n / (16 / sizeof(T));
    unsigned vblocks = k_blocks_for(nv, K_THREADS);
    if (nv <= 0x7fffffffu)
      binary_bcast_vec_kernel<T, OP, uint32_t><<<vblocks, K_THREADS, 0, stream>>>(
          (vec *)y, (const vec *)a, (const vec *)b, (uint32_t)nv, pv);
    else
      binary_bcast_vec_kernel<T, OP, uint64_t><<<vblocks, K_THREADS, 0, stream>>>(
          (vec *)y, (const vec *)a, (const vec *)b, (uint64_t)nv, pv);
    return;
  }
  unsigned blocks = k_blocks_for(n, K_THREADS);
  if (n <= 0x7fffffffu)
    binary_bcast_kernel<T, OP, uint32_t><<<blocks, K_THREADS, 0, stream>>>(y, a, b, (uint32_t)n, p);
  else
    binary_bcast_kernel<T, OP, uint64_t><<<blocks, K_THREADS, 0, stream>>>(y, a, b, (uint64_t)n, p);
}

template <class T>
int launch(const char *kname, T *y, const T *a, const T *b, int ndim, const int64_t *ydims,
           const int64_t *adims, const int64_t *bdims, k_binop op, cudaStream_t stream, err *e) {
  uint64_t n;
  TRY(check_bcast(kname, ndim, ydims, adims, bdims, &n, e));
  if ((int)op < (int)K_ADD || (int)op > (int)K_FMOD)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: unknown op %d", kname, (int)op);
  bplan p;
  if (!plan_make(&p, ndim, ydims, adims, bdims)) return 0;  // empty output
  if (!y || !a || !b)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p a=%p b=%p) for %llu elements",
                   kname, (void *)y, (const void *)a, (const void *)b, (unsigned long long)n);
  switch (op) {
    case K_ADD:
      launch_op<T, K_ADD>(y, a, b, (size_t)n, p, stream);
      break;
    case K_SUB:
      launch_op<T, K_SUB>(y, a, b, (size_t)n, p, stream);
      break;
    case K_MUL:
      launch_op<T, K_MUL>(y, a, b, (size_t)n, p, stream);
      break;
    case K_DIV:
      launch_op<T, K_DIV>(y, a, b, (size_t)n, p, stream);
      break;
    case K_POW:
      launch_op<T, K_POW>(y, a, b, (size_t)n, p, stream);
      break;
    case K_MAX:
      launch_op<T, K_MAX>(y, a, b, (size_t)n, p, stream);
      break;
    case K_MIN:
      launch_op<T, K_MIN>(y, a, b, (size_t)n, p, stream);
      break;
    case K_MOD:
      launch_op<T, K_MOD>(y, a, b, (size_t)n, p, stream);
      break;
    case K_FMOD:
      launch_op<T, K_FMOD>(y, a, b, (size_t)n, p, stream);
      break;
  }
  K_LAUNCH_CHECK(e, kname);
  return 0;
}

// --- comparisons: the general walk with a bool output. Half compares as
// the float it stands for (exact), int64 as itself.
__device__ __forceinline__ float cmp_ld(float v) { return v; }
__device__ __forceinline__ float cmp_ld(__half v) { return __half2float(v); }
// the integer types as themselves
template <class T>
__device__ __forceinline__ T cmp_ld(T v) { return v; }

template <k_cmpop OP, class V>
__device__ __forceinline__ bool cmp(V a, V b) {
  switch (OP) {
    case K_EQ: return a == b;
    case K_LT: return a < b;
    case K_GT: return a > b;
    case K_LE: return a <= b;
    default: return a >= b;
  }
}

template <class T, k_cmpop OP, typename IDX>
__global__ void compare_kernel(uint8_t *y, const T *a, const T *b, IDX n, bplan p) {
  IDX stride = (IDX)gridDim.x * blockDim.x;
  for (IDX i = (IDX)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    int64_t ao, bo;
    bcast_offsets(i, p, &ao, &bo);
    auto va = cmp_ld(a[ao]), vb = cmp_ld(b[bo]);
    y[i] = cmp<OP>(va, vb);
  }
}

template <class T, k_cmpop OP>
void launch_compare_op(uint8_t *y, const void *a, const void *b, uint64_t n, const bplan &p,
                       cudaStream_t stream) {
  unsigned blocks = k_blocks_for((size_t)n, K_THREADS);
  if (n <= 0x7fffffffu)
    compare_kernel<T, OP, uint32_t><<<blocks, K_THREADS, 0, stream>>>(y, (const T *)a, (const T *)b,
                                                                     (uint32_t)n, p);
  else
    compare_kernel<T, OP, uint64_t><<<blocks, K_THREADS, 0, stream>>>(y, (const T *)a, (const T *)b, n, p);
}

template <class T>
void launch_compare(uint8_t *y, const void *a, const void *b, uint64_t n, const bplan &p, k_cmpop op,
                    cudaStream_t stream) {
  switch (op) {
    case K_EQ: launch_compare_op<T, K_EQ>(y, a, b, n, p, stream); break;
    case K_LT: launch_compare_op<T, K_LT>(y, a, b, n, p, stream); break;
    case K_GT: launch_compare_op<T, K_GT>(y, a, b, n, p, stream); break;
    case K_LE: launch_compare_op<T, K_LE>(y, a, b, n, p, stream); break;
    case K_GE: launch_compare_op<T, K_GE>(y, a, b, n, p, stream); break;
  }
}

// --- logic on bools: operands normalised to 0/1 as k_logic does, so any
// nonzero byte is true.
template <k_logop OP, typename IDX>
__global__ void logic_kernel(uint8_t *y, const uint8_t *a, const uint8_t *b, IDX n, bplan p) {
  IDX stride = (IDX)gridDim.x * blockDim.x;
  for (IDX i = (IDX)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    int64_t ao, bo;
    bcast_offsets(i, p, &ao, &bo);
    int va = a[ao] != 0, vb = b[bo] != 0;
    y[i] = (uint8_t)(OP == K_AND ? va & vb : OP == K_OR ? va | vb : OP == K_XOR ? va ^ vb : va == vb);
  }
}

template <k_logop OP>
void launch_logic_op(uint8_t *y, const uint8_t *a, const uint8_t *b, uint64_t n, const bplan &p,
                     cudaStream_t stream) {
  unsigned blocks = k_blocks_for((size_t)n, K_THREADS);
  if (n <= 0x7fffffffu)
    logic_kernel<OP, uint32_t><<<blocks, K_THREADS, 0, stream>>>(y, a, b, (uint32_t)n, p);
  else
    logic_kernel<OP, uint64_t><<<blocks, K_THREADS, 0, stream>>>(y, a, b, n, p);
}

}  // namespace

extern "C" int k_compare_cuda(uint8_t *y, const void *a, const void *b, k_elem et, int ndim,
                              const int64_t *ydims, const int64_t *adims, const int64_t *bdims,
                              k_cmpop op, cudaStream_t stream, err *e) {
  const char *kname = "k_compare_cuda";
  uint64_t n;
  TRY(check_bcast(kname, ndim, ydims, adims, bdims, &n, e));
  if ((int)op < (int)K_EQ || (int)op > (int)K_GE)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: unknown comparison %d", kname, (int)op);
  if (et == K_F64 || et == K_BOOL)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "%s: element type %s has no kernel (FP32, FP16, the integers)", kname,
                   et == K_F64 ? "FP64" : "BOOL");
  bplan p;
  if (!plan_make(&p, ndim, ydims, adims, bdims)) return 0;  // empty output
  if (!y || !a || !b)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p a=%p b=%p) for %llu elements",
                   kname, (void *)y, a, b, (unsigned long long)n);
  switch (et) {
    case K_F32: launch_compare<float>(y, a, b, n, p, op, stream); break;
    case K_F16: launch_compare<__half>(y, a, b, n, p, op, stream); break;
#define CASE_INT(K, T, S) \
    case K: launch_compare<T>(y, a, b, n, p, op, stream); break;
    K_INT_TYPES(CASE_INT)
#undef CASE_INT
    default: break;  // refused above
  }
  K_LAUNCH_CHECK(e, kname);
  return 0;
}

extern "C" int k_logic_cuda(uint8_t *y, const uint8_t *a, const uint8_t *b, int ndim,
                            const int64_t *ydims, const int64_t *adims, const int64_t *bdims,
                            k_logop op, cudaStream_t stream, err *e) {
  const char *kname = "k_logic_cuda";
  uint64_t n;
  TRY(check_bcast(kname, ndim, ydims, adims, bdims, &n, e));
  if ((int)op < (int)K_AND || (int)op > (int)K_XNOR)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: unknown logic op %d", kname, (int)op);
  bplan p;
  if (!plan_make(&p, ndim, ydims, adims, bdims)) return 0;  // empty output
  if (!y || !a || !b)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p a=%p b=%p) for %llu elements",
                   kname, (void *)y, (const void *)a, (const void *)b, (unsigned long long)n);
  switch (op) {
    case K_AND: launch_logic_op<K_AND>(y, a, b, n, p, stream); break;
    case K_OR: launch_logic_op<K_OR>(y, a, b, n, p, stream); break;
    case K_XOR: launch_logic_op<K_XOR>(y, a, b, n, p, stream); break;
    case K_XNOR: launch_logic_op<K_XNOR>(y, a, b, n, p, stream); break;
  }
  K_LAUNCH_CHECK(e, kname);
  return 0;
}

extern "C" int k_binary_f32_cuda(float *y, const float *a, const float *b, int ndim,
                                 const int64_t *ydims, const int64_t *adims, const int64_t *bdims,
                                 k_binop op, cudaStream_t stream, err *e) {
  return launch("k_binary_f32_cuda", y, a, b, ndim, ydims, adims, bdims, op, stream, e);
}

extern "C" int k_binary_f16_cuda(uint16_t *y, const uint16_t *a, const uint16_t *b, int ndim,
                                 const int64_t *ydims, const int64_t *adims, const int64_t *bdims,
                                 k_binop op, cudaStream_t stream, err *e) {
  return launch("k_binary_f16_cuda", k_half(y), k_half(a), k_half(b), ndim, ydims, adims, bdims, op,
                stream, e);
}

// --- Pow with a base and an exponent of different types (kernels/elem/k_binary.c's k_pow_mixed)

namespace {

// Element i of x (type t) as a double, as k_cast to K_F64 reads it.
__device__ double mixed_ld(const void *x, int t, int64_t i) {
  switch (t) {
    case K_F32: return ((const float *)x)[i];
    case K_F64: return ((const double *)x)[i];
    case K_I64: return (double)((const long long *)x)[i];
    case K_I32: return ((const int32_t *)x)[i];
    case K_I16: return ((const int16_t *)x)[i];
    case K_I8: return ((const int8_t *)x)[i];
    case K_U8: return ((const uint8_t *)x)[i];
    case K_U16: return ((const uint16_t *)x)[i];
    case K_U32: return ((const uint32_t *)x)[i];
    default: return (double)((const unsigned long long *)x)[i];  // K_U64
  }
}

// k_cast's double -> integer rule: saturating, NaN -> 0 (the bounds compare as doubles).
template <class T>
__device__ T mixed_sat(double v, double lo, double hi, T tmin, T tmax) {
  if (v != v) return 0;
  if (v <= lo) return tmin;
  if (v >= hi) return tmax;
  return (T)v;
}

__device__ void mixed_st(void *y, int t, size_t i, double v) {
#define MIXED_SAT(T, TMIN, TMAX) ((T *)y)[i] = mixed_sat<T>(v, (double)(TMIN), (double)(TMAX), (T)(TMIN), (T)(TMAX))
  switch (t) {
    case K_F32: ((float *)y)[i] = (float)v; break;
    case K_F64: ((double *)y)[i] = v; break;
    case K_I64: MIXED_SAT(long long, INT64_MIN, INT64_MAX); break;
    case K_I32: MIXED_SAT(int32_t, INT32_MIN, INT32_MAX); break;
    case K_I16: MIXED_SAT(int16_t, INT16_MIN, INT16_MAX); break;
    case K_I8: MIXED_SAT(int8_t, INT8_MIN, INT8_MAX); break;
    case K_U8: MIXED_SAT(uint8_t, 0, UINT8_MAX); break;
    case K_U16: MIXED_SAT(uint16_t, 0, UINT16_MAX); break;
    case K_U32: MIXED_SAT(uint32_t, 0, UINT32_MAX); break;
    default: MIXED_SAT(unsigned long long, 0, UINT64_MAX); break;  // K_U64
  }
#undef MIXED_SAT
}

// Rare (a float raised to an integer, an integer to a float): the types are switched on per element
// rather than instantiated per pair.
__global__ void pow_mixed_kernel(void *y, const void *a, int ta, const void *b, int tb, uint64_t n, bplan p) {
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
    int64_t ao, bo;
    bcast_offsets(i, p, &ao, &bo);
    mixed_st(y, ta, i, pow(mixed_ld(a, ta, ao), mixed_ld(b, tb, bo)));
  }
}

}  // namespace

extern "C" int k_pow_mixed_cuda(void *y, const void *a, k_elem ta, const void *b, k_elem tb, int ndim,
                                const int64_t *ydims, const int64_t *adims, const int64_t *bdims,
                                cudaStream_t stream, err *e) {
  const char *kname = "k_pow_mixed_cuda";
  if (!k_binary_takes(ta, K_POW) || !k_binary_takes(tb, K_POW))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: element types %d and %d have no kernel (not FP16 or BOOL)", kname,
                   (int)ta, (int)tb);
  uint64_t n;
  TRY(check_bcast(kname, ndim, ydims, adims, bdims, &n, e));
  bplan p;
  if (!plan_make(&p, ndim, ydims, adims, bdims)) return 0;  // empty output
  if (!y || !a || !b)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer (y=%p a=%p b=%p) for %llu elements", kname, y, a, b,
                   (unsigned long long)n);
  pow_mixed_kernel<<<k_blocks_for(n, K_THREADS), K_THREADS, 0, stream>>>(y, a, (int)ta, b, (int)tb, n, p);
  K_LAUNCH_CHECK(e, kname);
  return 0;
}
