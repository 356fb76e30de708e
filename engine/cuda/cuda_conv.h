// cuda_conv.h: 2-D convolutions (with a fused bias / residual / activation
// epilogue), transposed convolutions (with a bias) and pooling on the GPU
// through cuDNN's legacy C API (cuDNN 9).
//
// The shapes are described by plain structs (eng_cuconv_desc,
// eng_cutconv_desc, eng_cupool_desc) that follow ONNX's geometry rules but
// know nothing of graphs or attributes. A plan is made once per shape at load
// time: it validates the shape, picks the cuDNN algorithm (trying each
// candidate for real, so the plan never holds one that cuDNN refuses at run
// time) and says how many workspace bytes a run needs. A run only enqueues
// work on the given stream: no allocation, no synchronisation, no host-device
// copy, so it can be captured in a CUDA graph.
//
// Threading: a plan is immutable after create and may be run from several
// threads at once, each with its own handle, stream and workspace. A handle
// (eng_cudnn) is one per stream slot; run sets its stream.
//
// Without cuDNN at build time (INFERD_HAVE_CUDNN undefined) everything here
// still links: the shape helpers and the weight packing work, and the
// GPU entry points fail with ERR_UNIMPLEMENTED; eng_cuconv_available() tells.
//
// Implemented by cuda_conv.c (convolutions, and the handle and plumbing the
// others share through cuda_conv_internal.h), cuda_deconv.c (transposed
// convolutions) and cuda_pool.c (pooling).
#ifndef INFERD_ENGINE_CUDA_CONV_H
#define INFERD_ENGINE_CUDA_CONV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "kernels/base/err.h"

#ifdef __cplusplus
extern "C" {
#endif

// --- common

// Element types and arithmetic, as in cuda_gemm.h.
typedef enum eng_cuconv_dtype {
  ENG_CUCONV_FP32 = 0,   // fp32 storage, fp32 FMA arithmetic (TF32 off)
  ENG_CUCONV_FP32_TF32,  // fp32 storage, tensor cores with TF32 inputs allowed
  ENG_CUCONV_FP16,       // fp16 storage (bias, residual too), fp32 accumulation, tensor cores
} eng_cuconv_dtype;

// Activation layout. The weights follow it: NCHW activations take KCRS
// weights (ONNX's OIHW), NHWC take KRSC (what tensor cores want).
typedef enum eng_cuconv_layout {
  ENG_CUCONV_NCHW = 0,
  ENG_CUCONV_NHWC,
} eng_cuconv_layout;

// Activation applied last: y = act(conv(x, w) + bias + z).
// RELU (and NONE) fuse into cuDNN's conv+bias+activation kernel; CLIP to
// SWISH run as a second cuDNN pass over y (cudnnActivationForward, in
// place); cuDNN has no HardSigmoid or HardSwish mode, so those two run as
// our unary kernel over y, in place (k_unop_cuda, the CPU path's formula).
// The depthwise kernel (kernels/conv/k_dwconv.cu) computes them all in its epilogue.
typedef enum eng_cuconv_act {
  ENG_CUCONV_ACT_NONE = 0,
  ENG_CUCONV_ACT_RELU,
  ENG_CUCONV_ACT_CLIP,     // min(max(x, 0), clip_max): ONNX Clip(0, m), Relu6 with m = 6
  ENG_CUCONV_ACT_SIGMOID,  // 1 / (1 + exp(-x))
  ENG_CUCONV_ACT_TANH,
  ENG_CUCONV_ACT_SWISH,    // x * sigmoid(x) (SiLU)
  ENG_CUCONV_ACT_HARD_SIGMOID,  // max(0, min(1, alpha * x + beta)): ONNX HardSigmoid
  ENG_CUCONV_ACT_HARD_SWISH,    // x * max(0, min(1, x / 6 + 0.5)): ONNX HardSwish
} eng_cuconv_act;

// An opaque cuDNN handle (cudnnHandle_t) bound to the current device.
typedef struct eng_cudnn eng_cudnn;

// True when this build has cuDNN (INFERD_HAVE_CUDNN); the library may still
// be missing at run time, which eng_cudnn_create reports.
bool eng_cuconv_available(void);
// cuDNN's version as loaded at run time (e.g. 91900 for 9.19.0), 0 without.
size_t eng_cudnn_version(void);

int eng_cudnn_create(eng_cudnn **out, err *e);
void eng_cudnn_destroy(eng_cudnn *h);

// --- convolution

// One 2-D convolution (1-D: h = 1, r = 1, pad_top = pad_bottom = 0).
// Zero strides, dilations and groups read as 1.
typedef struct eng_cuconv_desc {
  int n, c, h, w;  // input
  int k;           // output channels
  int r, s;        // kernel height, width
  int pad_top, pad_left, pad_bottom, pad_right;  // may differ (ONNX pads)
  int stride_h, stride_w;
  int dil_h, dil_w;
  int groups;      // c and k divisible by it; groups == c == k is depthwise
  eng_cuconv_dtype dtype;
  eng_cuconv_layout layout;
  bool has_bias;   // bias[k], of the storage type
  bool has_z;      // residual z, shaped and typed like y, added before act
  eng_cuconv_act act;
  float clip_max;  // ENG_CUCONV_ACT_CLIP only, > 0
  float act_alpha, act_beta;  // ENG_CUCONV_ACT_HARD_SIGMOID only (ONNX's defaults: 0.2, 0.5)
} eng_cuconv_desc;

// Output height and width (ONNX/cuDNN floor rule); fails if either < 1.
int eng_cuconv_out_dims(const eng_cuconv_desc *d, int *ho, int *wo, err *e);

// Sizes in bytes of the tensors a run reads and writes.
size_t eng_cuconv_x_bytes(const eng_cuconv_desc *d);
size_t eng_cuconv_y_bytes(const eng_cuconv_desc *d);  // also z's; 0 if the shape is bad
size_t eng_cuconv_w_bytes(const eng_cuconv_desc *d);
size_t eng_cuconv_bias_bytes(const eng_cuconv_desc *d);

// Host-side, once at load: converts ONNX's OIHW fp32 weights ([k, c/groups,
// r, s]) into the plan's layout and type (KCRS or KRSC, fp32 or fp16,
// round to nearest even) in dst (eng_cuconv_w_bytes(d) bytes; the caller
// then copies it to the device). bias: fp32 [k] to the storage type.
int eng_cuconv_pack_weights(const eng_cuconv_desc *d, const float *oihw, void *dst,
                            size_t dst_bytes, err *e);
int eng_cuconv_pack_bias(const eng_cuconv_desc *d, const float *bias, void *dst, size_t dst_bytes,
                         err *e);

typedef enum eng_cuconv_search {
  // cuDNN's heuristic order (cudnnGetConvolutionForwardAlgorithm_v7); the
  // first candidate that runs is kept. Fast to plan.
  ENG_CUCONV_SEARCH_HEURISTIC = 0,
  // Times every candidate that fits (about 23 runs each) and keeps the
  // fastest: what cudnnFindConvolutionForwardAlgorithmEx does, but timing
  // the epilogue we actually run. Costs milliseconds to seconds per shape.
  ENG_CUCONV_SEARCH_EXHAUSTIVE,
} eng_cuconv_search;

typedef struct eng_cuconv_opts {
  size_t workspace_cap;       // most workspace bytes the plan may ask for; 0: 64 MiB
  eng_cuconv_search search;
} eng_cuconv_opts;

// How the plan runs, for logs and tests.
typedef enum eng_cuconv_strategy {
  ENG_CUCONV_PLAIN = 0,  // cudnnConvolutionForward only (no epilogue)
  ENG_CUCONV_FUSED,      // cudnnConvolutionBiasActivationForward (bias, z, relu or identity)
  ENG_CUCONV_SPLIT,      // convolution (y preloaded with z, beta 1), then AddTensor(bias), then Activation
} eng_cuconv_strategy;

typedef struct eng_cuconv_info {
  int algo;                      // cudnnConvolutionFwdAlgo_t
  const char *algo_name;         // "IMPLICIT_PRECOMP_GEMM", ...
  int math;                      // cudnnMathType_t used
  eng_cuconv_strategy strategy;
  bool explicit_pad;             // asymmetric pads: input copied into a padded buffer first
  size_t workspace_bytes;        // what run needs (cuDNN's + the padded input)
  int candidates;                // tried at plan time
  float time_ms;                 // the chosen candidate's, EXHAUSTIVE only (else 0)
  const char *log;               // the candidates tried and how each fared (owned by the plan)
} eng_cuconv_info;

typedef struct eng_cuconv_plan eng_cuconv_plan;

// Validates d and picks the algorithm with handle h, on the device that is
// current. Plan time may allocate: it borrows device buffers of the run's
// sizes (plus the workspace cap) to try candidates, freed before return,
// and keeps a zero bias of k elements when d fuses without a bias. opts may
// be NULL (defaults). ERR_UNIMPLEMENTED when no candidate works (the caller
// falls back); ERR_INVALID_ARGUMENT for a bad shape.
int eng_cuconv_plan_create(eng_cuconv_plan **out, eng_cudnn *h, const eng_cuconv_desc *d,
                           const eng_cuconv_opts *opts, err *e);
void eng_cuconv_plan_destroy(eng_cuconv_plan *p);

size_t eng_cuconv_plan_workspace(const eng_cuconv_plan *p);
void eng_cuconv_plan_info(const eng_cuconv_plan *p, eng_cuconv_info *info);
const eng_cuconv_desc *eng_cuconv_plan_desc(const eng_cuconv_plan *p);

// y = act(conv(x, w) + bias + z), enqueued on stream (h's stream is set to
// it). Device pointers, dense in d's layout, aligned to 16 bytes (cuDNN's
// fast paths want it; cudaMalloc gives 256). bias must be non-NULL exactly
// when d->has_bias, z exactly when d->has_z; z may be y (in-place residual).
// y must not overlap x or w. workspace: eng_cuconv_plan_workspace(p) bytes
// (NULL when that is 0), used only until the enqueued work ends.
int eng_cuconv_run(const eng_cuconv_plan *p, eng_cudnn *h, cudaStream_t stream, const void *x,
                   const void *w, const void *bias, const void *z, void *y, void *workspace,
                   size_t workspace_bytes, err *e);

// --- transposed convolution (ONNX ConvTranspose)

// One 2-D transposed convolution (1-D: h = 1, r = 1, pad_top = pad_bottom =
// out_pad_h = 0), computed as cuDNN's backward-data convolution: x plays dy
// and the output y is dx of a forward convolution from k to c channels,
// whose filter [c, k/groups, r, s] is exactly ONNX's ConvTranspose weight.
// The output extent is ONNX's: stride * (h - 1) + out_pad + dilated kernel
// - pads; output_shape and auto_pad are the caller's to turn into pads
// (engine/ops/conv/conv.c does). Zero strides, dilations and groups read as 1.
typedef struct eng_cutconv_desc {
  int n, c, h, w;  // input x: c is ConvTranspose's input channels (W's dim 0)
  int k;           // output channels (W's dim 1 times groups)
  int r, s;        // kernel height, width
  int pad_top, pad_left, pad_bottom, pad_right;  // ONNX pads: cropped off the full output
  int out_pad_h, out_pad_w;                      // ONNX output_padding: extra rows/columns at the end
  int stride_h, stride_w;
  int dil_h, dil_w;
  int groups;      // c and k divisible by it; groups == c == k is depthwise
  eng_cuconv_dtype dtype;
  eng_cuconv_layout layout;
  bool has_bias;   // bias[k], of the storage type
} eng_cutconv_desc;

// Output height and width (ONNX's rule); fails if either < 1.
int eng_cutconv_out_dims(const eng_cutconv_desc *d, int *ho, int *wo, err *e);

// Sizes in bytes of the tensors a run reads and writes; 0 if the shape is bad.
size_t eng_cutconv_x_bytes(const eng_cutconv_desc *d);
size_t eng_cutconv_y_bytes(const eng_cutconv_desc *d);
size_t eng_cutconv_w_bytes(const eng_cutconv_desc *d);
size_t eng_cutconv_bias_bytes(const eng_cutconv_desc *d);

// Host-side, once at load: ONNX's fp32 weights [c, k/groups, r, s] into the
// plan's layout and type: as they are (KCRS of the backward-data filter) for
// NCHW, [c, r, s, k/groups] (KRSC) for NHWC; fp16 rounds to nearest even.
// bias: fp32 [k] to the storage type.
int eng_cutconv_pack_weights(const eng_cutconv_desc *d, const float *ckrs, void *dst,
                             size_t dst_bytes, err *e);
int eng_cutconv_pack_bias(const eng_cutconv_desc *d, const float *bias, void *dst,
                          size_t dst_bytes, err *e);

// What a plan hands cuDNN (host-side, for tests and logs). cuDNN's
// backward data takes one pad per dimension for both ends, and its output
// dx must be an input whose forward convolution gives x: dx holds rows
// [pad, pad + dx_h) of the full (uncropped) output, and y's row i is dx's
// row crop_h + i for i < copy_h, zero (before the bias) past it. Likewise
// for columns. Direct (cuDNN writes y) when crops are 0 and dx is y's size.
typedef struct eng_cutconv_geom {
  int pad_h, pad_w;
  int dx_h, dx_w;
  int crop_h, crop_w;
  int copy_h, copy_w;
} eng_cutconv_geom;

int eng_cutconv_geometry(const eng_cutconv_desc *d, eng_cutconv_geom *g, err *e);

typedef struct eng_cutconv_info {
  int algo;               // cudnnConvolutionBwdDataAlgo_t
  const char *algo_name;  // "ALGO_1", ...
  int math;               // cudnnMathType_t used
  // cuDNN computes a larger output than ONNX's (asymmetric pads: it takes
  // the smaller pad of each pair; output_padding past the input's reach):
  // it goes to the workspace and y is copied out of it (cudnnTransformTensor)
  bool cropped;
  // NHWC asked, but no cuDNN candidate runs it: x and w are transformed to
  // NCHW in the workspace, computed NCHW and the result transformed back
  bool relayout;
  size_t workspace_bytes;  // what run needs (cuDNN's + the buffers above)
  int candidates;          // tried at plan time
  float time_ms;           // the chosen candidate's, EXHAUSTIVE only (else 0)
  const char *log;         // the candidates tried and how each fared (owned by the plan)
} eng_cutconv_info;

typedef struct eng_cutconv_plan eng_cutconv_plan;

// As eng_cuconv_plan_create: validates d, tries cuDNN's backward-data
// candidates for real on borrowed buffers and keeps the first that runs
// (or the fastest, EXHAUSTIVE). ERR_UNIMPLEMENTED when none works.
int eng_cutconv_plan_create(eng_cutconv_plan **out, eng_cudnn *h, const eng_cutconv_desc *d,
                            const eng_cuconv_opts *opts, err *e);
void eng_cutconv_plan_destroy(eng_cutconv_plan *p);

size_t eng_cutconv_plan_workspace(const eng_cutconv_plan *p);
void eng_cutconv_plan_info(const eng_cutconv_plan *p, eng_cutconv_info *info);
const eng_cutconv_desc *eng_cutconv_plan_desc(const eng_cutconv_plan *p);

// y = conv_transpose(x, w) + bias, enqueued on stream; the rules of
// eng_cuconv_run (device pointers dense in d's layout, bias exactly when
// d->has_bias, y not overlapping x or w, workspace of
// eng_cutconv_plan_workspace(p) bytes). Capturable in a CUDA graph.
int eng_cutconv_run(const eng_cutconv_plan *p, eng_cudnn *h, cudaStream_t stream, const void *x,
                    const void *w, const void *bias, void *y, void *workspace,
                    size_t workspace_bytes, err *e);

// --- pooling

typedef enum eng_cupool_mode {
  ENG_CUPOOL_MAX = 0,
  ENG_CUPOOL_AVG_INCLUDE_PAD,  // ONNX AveragePool count_include_pad = 1
  ENG_CUPOOL_AVG_EXCLUDE_PAD,  // count_include_pad = 0 (ONNX's default)
} eng_cupool_mode;

// One 2-D pooling. global: the window is the whole h x w plane (ONNX
// GlobalAveragePool / GlobalMaxPool); kernel, pads, strides and ceil_mode
// are then ignored. Zero strides read as 1. No dilations (cuDNN's legacy
// pooling has none).
typedef struct eng_cupool_desc {
  int n, c, h, w;
  int kh, kw;
  int pad_top, pad_left, pad_bottom, pad_right;
  int stride_h, stride_w;
  bool ceil_mode;   // ONNX ceil_mode: windows that start in the right/bottom padding are dropped
  bool global;
  eng_cupool_mode mode;
  eng_cuconv_dtype dtype;  // FP32 or FP16 (FP32_TF32 reads as FP32)
  eng_cuconv_layout layout;
} eng_cupool_desc;

// Output height and width the ONNX way (floor or ceil; with ceil, a last
// window that would start past the input plus the leading pad is dropped).
int eng_cupool_out_dims(const eng_cupool_desc *d, int *ho, int *wo, err *e);
size_t eng_cupool_x_bytes(const eng_cupool_desc *d);
size_t eng_cupool_y_bytes(const eng_cupool_desc *d);

typedef struct eng_cupool_info {
  bool explicit_pad;     // the input is copied into a padded buffer (asymmetric pads, ceil_mode)
  bool rescaled;         // averages are corrected per output position by a precomputed map
  size_t workspace_bytes;
} eng_cupool_info;

typedef struct eng_cupool_plan eng_cupool_plan;

// Validates d. Symmetric pads without a ceil_mode overhang map straight onto
// cudnnPoolingForward; other shapes pad the input explicitly (with -inf for
// max, 0 for average) and, for averages whose divisor varies by position,
// multiply by a map of window_area / divisor that the plan uploads now
// (its only device memory; synchronous, at load time).
int eng_cupool_plan_create(eng_cupool_plan **out, eng_cudnn *h, const eng_cupool_desc *d, err *e);
void eng_cupool_plan_destroy(eng_cupool_plan *p);
size_t eng_cupool_plan_workspace(const eng_cupool_plan *p);
void eng_cupool_plan_info(const eng_cupool_plan *p, eng_cupool_info *info);

// y = pool(x), enqueued on stream; same rules as eng_cuconv_run.
int eng_cupool_run(const eng_cupool_plan *p, eng_cudnn *h, cudaStream_t stream, const void *x,
                   void *y, void *workspace, size_t workspace_bytes, err *e);

const char *eng_cuconv_dtype_name(eng_cuconv_dtype dt);
const char *eng_cuconv_act_name(eng_cuconv_act a);
const char *eng_cuconv_strategy_name(eng_cuconv_strategy s);

#ifdef __cplusplus
}
#endif

#endif
