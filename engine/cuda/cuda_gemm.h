// cuda_gemm.h: matrix products on the GPU through cuBLASLt, with bias and
// ReLU/GELU fused into the product's epilogue. Tensors are row-major, as the
// engine stores them. The object owns the cuBLASLt handle and a workspace
// sized at create, and caches each shape's descriptors and chosen algorithm,
// so after the first call of a shape the request path does no heuristic
// search and no allocation.
//
// Not thread-safe, and one stream at a time: the workspace is shared by every
// call, so calls on different streams must be ordered by the caller. Each
// model instance owns one.
//
// Autotuning (eng_gemm_tuner): cuBLASLt's heuristic ranks its algorithms by
// a model of the GPU, and its first answer is often not the fastest one
// (what TensorRT's tactic selection and torch.compile's max-autotune exploit).
// With a tuner attached, a shape's first call outside a CUDA graph capture
// asks the heuristic for up to max_candidates algorithms, times each on the
// call's own stream and buffers (a CUDA graph of a few runs, min over a few
// launches, CUDA events) and keeps the fastest; the tuner remembers the
// choice per key, so the other objects sharing it (a plan's other slots)
// take it without timing and every slot computes with the same algorithm.
// Inside a capture, nothing is timed: the heuristic's first answer is used
// and the shape stays untuned until a call outside a capture comes.
#ifndef INFERD_ENGINE_CUDA_GEMM_H
#define INFERD_ENGINE_CUDA_GEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "kernels/base/err.h"

#ifdef __cplusplus
extern "C" {
#endif

// What happens to each output after the product. Bias is a vector of n
// (one per output column, as in ONNX Gemm / a linear layer), of C's type.
// GELU is cuBLASLt's, the tanh approximation:
//   0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
// so only fuse an ONNX Gelu with approximate="tanh" into it.
typedef enum eng_gemm_epilogue {
  ENG_GEMM_EPI_NONE = 0,
  ENG_GEMM_EPI_RELU,
  ENG_GEMM_EPI_GELU,
  ENG_GEMM_EPI_BIAS,
  ENG_GEMM_EPI_BIAS_RELU,
  ENG_GEMM_EPI_BIAS_GELU,
} eng_gemm_epilogue;

// Element types and arithmetic.
typedef enum eng_gemm_dtype {
  ENG_GEMM_FP32 = 0,   // fp32 in and out, full fp32 arithmetic (TF32 off)
  ENG_GEMM_FP32_TF32,  // fp32 in and out, tensor cores with TF32 inputs (~1e-3 relative)
  ENG_GEMM_FP16,       // fp16 in and out (bias too), fp32 accumulation
  ENG_GEMM_BF16,       // bf16 in and out (bias too), fp32 accumulation (engine/llm/cuda)
} eng_gemm_dtype;

typedef struct eng_gemm_lt eng_gemm_lt;
typedef struct eng_gemm_tuner eng_gemm_tuner;

typedef struct eng_gemm_lt_stats {
  uint64_t runs;
  uint64_t cache_hits, cache_misses;  // per (shape, transposes, epilogue, dtype, alignment)
  uint64_t heuristic_queries;         // cublasLtMatmulAlgoGetHeuristic calls
  uint64_t evictions;
  int cached;                         // entries in the cache now
  // autotuning (0 without a tuner)
  uint64_t tuned;         // shapes this object timed
  uint64_t tune_adopted;  // shapes whose choice came from the tuner (timed by another object)
  uint64_t tune_skipped;  // calls of an untuned shape that could not time it (in a capture, or
                          // the residual is C itself outside a dry pass): heuristic's first answer
  uint64_t tune_small;    // shapes below the tuner's min_flops: heuristic's first answer, untimed
  uint64_t tune_ns;       // wall time this object spent timing
  // with no_clusters (eng_gemm_lt_set_no_clusters): shapes whose heuristic answers all had clusters,
  // where the first answer was forced to 1x1x1 (cublasLtMatmulAlgoCheck passed), and shapes where even
  // that failed and a clustered algorithm had to stay
  uint64_t cluster_forced, cluster_kept;
} eng_gemm_lt_stats;

// --- autotuning

typedef struct eng_gemm_tune_opts {
  int max_candidates;  // heuristic answers timed per shape, 1..32 (0: 16)
  int budget_ms;       // wall time per shape: no candidate starts after it (0: 200)
  int reps;            // runs per timed graph launch (0: 8)
  int rounds;          // timed launches per candidate, the fastest counts (0: 3)
  // Products of fewer flops (2 m n k) keep the heuristic's first answer untimed (0: 2^24,
  // about 0.1 us of an H100's tensor cores): launch-bound, they gain nothing, and timing
  // noise would only make two plans of one model pick differently. 1: time every shape.
  double min_flops;
} eng_gemm_tune_opts;

typedef struct eng_gemm_tuner_stats {
  uint64_t shapes;      // shapes timed
  uint64_t candidates;  // algorithms timed, over all shapes
  uint64_t improved;    // shapes where another than the heuristic's first answer won
  uint64_t tune_ns;     // wall time spent timing
  // sums over the timed shapes of one run's device time, microseconds: the
  // heuristic's first answer and the kept one (their ratio is the gain)
  double first_us, best_us;
  int entries;          // choices remembered now
} eng_gemm_tuner_stats;

// A cache of timed choices for the current device, shared by the
// eng_gemm_lt objects it is attached to (not thread-safe: they must be used
// from one thread at a time, as a plan's slots are). opts NULL: defaults.
int eng_gemm_tuner_create(eng_gemm_tuner **out, const eng_gemm_tune_opts *opts, err *e);
// After every eng_gemm_lt it is attached to is destroyed or detached.
void eng_gemm_tuner_destroy(eng_gemm_tuner *t);
void eng_gemm_tuner_stats_get(const eng_gemm_tuner *t, eng_gemm_tuner_stats *s);

// Attaches t (borrowed; NULL: no autotuning, the heuristic's first answer).
// A tuner made for another device is ignored. Shapes already cached keep
// their algorithm until they are next called outside a capture.
void eng_gemm_lt_set_tuner(eng_gemm_lt *g, eng_gemm_tuner *t);
// dry: the caller throws away what the following calls compute (a plan's
// tuning pass before it captures a graph), so timing may overwrite C even
// where the residual Z is C itself. Outside a dry pass such a call is not
// timed (its residual would be consumed by the first timed run).
void eng_gemm_lt_set_dry(eng_gemm_lt *g, bool dry);
// no_clusters: only algorithms whose thread-block cluster is 1x1x1 (Hopper's
// cluster kernels, cuBLASLt's nvjet ones with clusters of 2-8 blocks, are left
// out). Why: under time-slicing with another CUDA context, two streams of one
// process running cluster-8 nvjet GEMMs at once died with an illegal
// instruction inside cuBLASLt 13.1 (tests/bench/RESULTS.md, issue 31); a GPU
// shared by several processes is where this is set. Shapes already cached
// are chosen again at their next call.
void eng_gemm_lt_set_no_clusters(eng_gemm_lt *g, bool no_clusters);

// Creates the cuBLASLt handle on the current device and reserves a workspace
// of workspace_bytes there (0: no workspace, fewer algorithms; 32 MiB suits
// Hopper). cache_cap bounds the shapes kept (0: 64); the least recently
// used shape is dropped when it is full.
int eng_gemm_lt_create(eng_gemm_lt **out, size_t workspace_bytes, int cache_cap, err *e);
void eng_gemm_lt_destroy(eng_gemm_lt *g);

// C[m,n] = epilogue(op(A)[m,k] x op(B)[k,n] (+ bias[n])), all row-major and
// dense: A is stored [m,k], or [k,m] when trans_a; B is [k,n], or [n,k] when
// trans_b; C is [m,n]. bias must be non-NULL exactly for the BIAS epilogues.
// Enqueued on stream; returns once enqueued. m, n, k >= 1. With a tuner
// attached, a new shape's first call outside a capture first times the
// candidates (it synchronises stream and writes C several times, then
// computes the real result).
int eng_gemm_lt_run(eng_gemm_lt *g, void *C, const void *A, const void *B, const void *bias,
                    int m, int n, int k, bool trans_a, bool trans_b, eng_gemm_epilogue epilogue,
                    eng_gemm_dtype dtype, cudaStream_t stream, err *e);

// The same with a residual: C = epilogue(op(A) x op(B) + Z (+ bias)), Z[m,n]
// row-major like C, of C's type, added before the activation (cuBLASLt's
// beta * C input with beta 1; the bias and the activation are applied after
// it). Z may be C itself (in place); NULL is eng_gemm_lt_run.
int eng_gemm_lt_run_res(eng_gemm_lt *g, void *C, const void *A, const void *B, const void *bias,
                        const void *Z, int m, int n, int k, bool trans_a, bool trans_b,
                        eng_gemm_epilogue epilogue, eng_gemm_dtype dtype, cudaStream_t stream,
                        err *e);
void eng_gemm_lt_stats_get(const eng_gemm_lt *g, eng_gemm_lt_stats *s);

const char *eng_gemm_epilogue_name(eng_gemm_epilogue epi);
const char *eng_gemm_dtype_name(eng_gemm_dtype dt);

#ifdef __cplusplus
}
#endif

#endif
