// cuda_check.h: turn CUDA runtime and cuBLAS status codes into the project's
// err value, naming file, line and the failing call, so a failed call fails
// the batch with a message instead of exiting the server. Usable from C11 and
// from CUDA C++ (.cu) files.
//
//   CUDA_TRY(e, cudaMemcpyAsync(...));         returns ERR_INTERNAL on failure
//   CUBLAS_TRY(e, cublasLtMatmul(...));        likewise for cuBLAS/cuBLASLt
//   if (CUDA_OK(e, cudaMalloc(&p, n))) goto fail;   for paths with cleanup
//   my_kernel<<<g, b, 0, s>>>(...); TRY(K_CHECK_LAUNCH(e, "my_kernel"));
#ifndef INFERD_ENGINE_CUDA_CHECK_H
#define INFERD_ENGINE_CUDA_CHECK_H

#include <cublas_api.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "kernels/base/err.h"
#ifdef __cplusplus
}
#endif

// Fills *e from a failed runtime call and returns ERR_INTERNAL (0 on
// success). An out-of-memory status maps to ERR_RESOURCE_EXHAUSTED so the
// caller can tell "too big" from "broken". The runtime's last-error slot is
// cleared so a later launch check does not report this failure again.
static inline int eng_cuda__check(cudaError_t rc, err *e, const char *file, int line,
                                  const char *call) {
  if (rc == cudaSuccess) return 0;
  (void)cudaGetLastError();
  err_code code = rc == cudaErrorMemoryAllocation ? ERR_RESOURCE_EXHAUSTED : ERR_INTERNAL;
  return err_set(e, code, "%s:%d: %s failed: %s (%s)", file, line, call, cudaGetErrorName(rc),
                 cudaGetErrorString(rc));
}

static inline int eng_cublas__check(cublasStatus_t rc, err *e, const char *file, int line,
                                    const char *call) {
  if (rc == CUBLAS_STATUS_SUCCESS) return 0;
  err_code code = rc == CUBLAS_STATUS_ALLOC_FAILED ? ERR_RESOURCE_EXHAUSTED : ERR_INTERNAL;
  return err_set(e, code, "%s:%d: %s failed: %s (%s)", file, line, call, cublasGetStatusName(rc),
                 cublasGetStatusString(rc));
}

// Call after every kernel launch: a bad configuration (too many threads, too
// much shared memory, no image for this GPU) only shows up here.
static inline int k_check_launch(err *e, const char *kernel, const char *file, int line) {
  cudaError_t rc = cudaGetLastError();
  if (rc == cudaSuccess) return 0;
  return err_set(e, ERR_INTERNAL, "%s:%d: launch of %s failed: %s (%s)", file, line, kernel,
                 cudaGetErrorName(rc), cudaGetErrorString(rc));
}

// Expression forms: 0 on success, else the error code with *e filled.
#define CUDA_OK(e, call) eng_cuda__check((call), (e), __FILE__, __LINE__, #call)
#define CUBLAS_OK(e, call) eng_cublas__check((call), (e), __FILE__, __LINE__, #call)
#define K_CHECK_LAUNCH(e, kernel) k_check_launch((e), (kernel), __FILE__, __LINE__)

// Statement forms: return the error code from the enclosing function.
#define CUDA_TRY(e, call)                        \
  do {                                           \
    int cuda_try_rc_ = CUDA_OK(e, call);         \
    if (cuda_try_rc_ != 0) return cuda_try_rc_;  \
  } while (0)

#define CUBLAS_TRY(e, call)                        \
  do {                                             \
    int cublas_try_rc_ = CUBLAS_OK(e, call);       \
    if (cublas_try_rc_ != 0) return cublas_try_rc_; \
  } while (0)

#endif
