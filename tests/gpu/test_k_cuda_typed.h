// tests/gpu/test_k_cuda_typed.h: what the tests of the kernels generic over
// numeric storage (test_k_cuda_arg.c, test_k_cuda_scatter.c) share: the six
// storage types those kernels take, values that are exact in every one of
// them (small integers and halves) written as each type, and read back as
// the reference's type (FP32 for FP16 and BF16, which the references do not
// take: the CPU path widens them).
#ifndef INFERD_TESTS_GPU_TEST_K_CUDA_TYPED_H
#define INFERD_TESTS_GPU_TEST_K_CUDA_TYPED_H

#include "test_k_cuda_util.h"

static const dtype tt_types[] = {DT_FP32, DT_FP16, DT_BF16, DT_FP64, DT_INT32, DT_INT64};
#define TT_N_TYPES 6

static inline int tt_is_int(dtype dt) {
  return dt == DT_INT32 || dt == DT_INT64;
}

// The reference's element type for dt, and its size.
static inline k_elem tt_ref_elem(dtype dt) {
  switch (dt) {
    case DT_FP64: return K_F64;
    case DT_INT32: return K_I32;
    case DT_INT64: return K_I64;
    default: return K_F32;
  }
}
static inline size_t tt_ref_size(dtype dt) {
  return dt == DT_FP64 || dt == DT_INT64 ? 8 : 4;
}

// v[i] (exact in dt; NaN for float types) as dt into x.
static inline void tt_store(dtype dt, void *x, const double *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    float f = (float)v[i];
    uint32_t b;
    switch (dt) {
      case DT_FP32: ((float *)x)[i] = f; break;
      case DT_FP16: k_f32_to_f16((uint16_t *)x + i, &f, 1); break;
      case DT_BF16:
        memcpy(&b, &f, sizeof b);
        ((uint16_t *)x)[i] = (uint16_t)(b >> 16);
        break;
      case DT_FP64: ((double *)x)[i] = v[i]; break;
      case DT_INT32: ((int32_t *)x)[i] = (int32_t)v[i]; break;
      default: ((int64_t *)x)[i] = (int64_t)v[i]; break;
    }
  }
}

// Elements of dt in x as the reference's type (tt_ref_elem) into r.
static inline void tt_widen(dtype dt, void *r, const void *x, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint32_t b;
    switch (dt) {
      case DT_FP16: k_f16_to_f32((float *)r + i, (const uint16_t *)x + i, 1); break;
      case DT_BF16:
        b = (uint32_t)((const uint16_t *)x)[i] << 16;
        memcpy((float *)r + i, &b, sizeof b);
        break;
      default: memcpy((uint8_t *)r + i * tt_ref_size(dt), (const uint8_t *)x + i * tt_ref_size(dt), tt_ref_size(dt));
    }
  }
}

// n values drawn from the integers in [-range, range), as halves when halves (float types only).
static inline void tt_draw(tk_rng *r, double *v, size_t n, int range, int halves) {
  for (size_t i = 0; i < n; i++) {
    int k = (int)(tk_next(r) % (uint64_t)(2 * range)) - range;
    v[i] = halves ? k / 2.0 : (double)k;
  }
}

#endif
