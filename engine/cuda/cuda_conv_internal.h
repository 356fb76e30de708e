// engine/cuda/cuda_conv_internal.h: what the cuDNN files share: the
// convolutions (cuda_conv.c), transposed convolutions (cuda_deconv.c) and
// pooling (cuda_pool.c) behind cuda_conv.h. Not a public header: only those
// three include it. cuda_conv.c defines what is declared here.
#ifndef INFERD_ENGINE_CUDA_CONV_INTERNAL_H
#define INFERD_ENGINE_CUDA_CONV_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include <cuda_runtime_api.h>

#include "engine/cuda/cuda_conv.h"
#include "kernels/base/err.h"

// --- host-side helpers (built with or without cuDNN)

// Bytes per element of the storage type.
static inline size_t eng_cuconv__esize(eng_cuconv_dtype dt) { return dt == ENG_CUCONV_FP16 ? 2 : 4; }
// Zero strides, dilations and groups read as 1.
static inline int eng_cuconv__or1(int v) { return v == 0 ? 1 : v; }
// Workspace pieces start 256-byte aligned, as cudaMalloc's do.
static inline size_t eng_cuconv__align256(size_t n) { return (n + 255) & ~(size_t)255; }

// Stores n floats as the storage type, at element at of dst.
void eng_cuconv__store(eng_cuconv_dtype dt, void *dst, size_t at, const float *src, size_t n);
// Filters [kk][cc][r][s] (fp32, ONNX order) into the layout's order (KCRS
// as they are, or KRSC: c innermost) and the storage type.
int eng_cuconv__pack_filter(eng_cuconv_dtype dt, eng_cuconv_layout l, const float *src, void *dst,
                            size_t kk, size_t cc, size_t r, size_t s, err *e);

#if defined(INFERD_HAVE_CUDNN) && INFERD_HAVE_CUDNN

#include <cudnn.h>

// --- cuDNN plumbing

// Fills *e from a failed cuDNN call (file, line, the call, cuDNN's last
// error string): ERR_UNIMPLEMENTED for a NOT_SUPPORTED status (the caller
// may try another candidate), ERR_RESOURCE_EXHAUSTED for a failed
// allocation, else ERR_INTERNAL. 0 on success.
int eng_cuconv__cudnn_check(cudnnStatus_t st, err *e, const char *file, int line, const char *call);
#define CUDNN_OK(e, call) eng_cuconv__cudnn_check((call), (e), __FILE__, __LINE__, #call)
#define CUDNN_TRY(e, call)                        \
  do {                                            \
    int cudnn_try_rc_ = CUDNN_OK(e, call);        \
    if (cudnn_try_rc_ != 0) return cudnn_try_rc_; \
  } while (0)

struct eng_cudnn {
  cudnnHandle_t h;
  int device;
};

static inline cudnnDataType_t eng_cuconv__dt(eng_cuconv_dtype dt) {
  return dt == ENG_CUCONV_FP16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}
static inline cudnnTensorFormat_t eng_cuconv__fmt(eng_cuconv_layout l) {
  return l == ENG_CUCONV_NHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
}

// Copies a dense [outer][rows][row_bytes] tensor into the interior of a
// [outer][rows_p][row_bytes_p] buffer at (row0, byte0): the explicit pad.
// Rows past rows_p (never read by any window) are not copied.
int eng_cuconv__copy_into_padded(void *dst, size_t row_bytes_p, size_t rows_p, size_t byte0, size_t row0,
                                 const void *src, size_t row_bytes, size_t rows, size_t outer,
                                 size_t copy_bytes, size_t copy_rows, cudaStream_t stream, err *e);

// --- what the plans share (the forward and the transposed convolution's; pooling's run check)

// Appends to a plan's log (char log[cap]), silently truncated when full.
void eng_cuconv__log(char *log, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

// *o: opts with the defaults (opts may be NULL), *cap: the workspace cap
// (64 MiB unless set). ERR_INVALID_ARGUMENT for an unknown search, the
// message led by what ("conv", "conv_transpose").
int eng_cuconv__opts(const char *what, const eng_cuconv_opts *opts, eng_cuconv_opts *o, size_t *cap, err *e);

// The math type a plan's convolution descriptor starts with. FP32 must not
// use TF32 tensor cores, which CUDNN_DEFAULT_MATH allows.
cudnnMathType_t eng_cuconv__math(eng_cuconv_dtype dt);

// The math type a heuristic's candidate runs with, in place: FP32 skips
// the tensor-op ones (TF32; false) and runs the rest as CUDNN_FMA_MATH.
bool eng_cuconv__cand_math(eng_cuconv_dtype dt, cudnnMathType_t *math);

// A run's check of the workspace it was given against the plan's need.
int eng_cuconv__check_ws(const char *what, size_t need, const void *ws, size_t ws_bytes, err *e);

// Plan-time trials of candidates 0..n-1 on buffers the plan borrowed.
typedef struct eng_cuconv__trials {
  int n;
  eng_cuconv_search search;
  // candidate i, enqueued on s (the plan's enqueue on the borrowed buffers)
  int (*run)(void *plan, int i, cudaStream_t s, err *e);
  // counts candidate i as tried and logs how it fared ("ok" or an error code's name)
  void (*note)(void *plan, int i, const char *outcome);
  void *plan;
  cudaStream_t s;        // the trials' own stream, which the handle is set to
  cudaEvent_t ev0, ev1;  // EXHAUSTIVE's timing
  char *log;             // the plan's log, where each time is appended
  size_t log_cap;
} eng_cuconv__trials;

// Runs each candidate once and synchronises: HEURISTIC keeps the first that
// runs, EXHAUSTIVE times each that runs and keeps the fastest. *best: the
// one kept, -1 if none ran; *best_ms: its time (0 for HEURISTIC); *first:
// the first refusal (left as it is if none). Nonzero with *e filled when a
// CUDA call fails: a failed synchronisation is a broken context, where
// trying on is pointless.
int eng_cuconv__try_candidates(const eng_cuconv__trials *t, int *best, float *best_ms, err *first, err *e);

#else  // no cuDNN in this build: the GPU entry points say so

#define NO_CUDNN(e) err_set((e), ERR_UNIMPLEMENTED, "built without cuDNN (INFERD_CUDNN, CUDNN_ROOT)")

#endif

#endif
