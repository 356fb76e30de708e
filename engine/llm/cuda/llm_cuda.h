// engine/llm/cuda/llm_cuda.h: the decoder forward step on a GPU, with the
// CPU runner's shape (engine/llm/llm_step.h): the same eng_llm_work items
// (prefill chunks and decode tokens mixed, a paged KV cache addressed by
// per-sequence int32 block tables), the same checks, logits FP32 to host.
//
// The weights are uploaded at create in the model's element type (load the
// model with eng_llm_model_create_stored to keep a checkpoint's FP16 or
// BF16; an FP32 model computes in FP32), and every activation and the KV
// cache are in that type, with FP32 accumulation inside each kernel and
// cuBLASLt GEMM (ENG_GEMM_FP32 with TF32 off for FP32 models). Per step:
// one host-to-device copy of the step's metadata (tokens, positions, block
// tables, per-token item and offsets) from pinned memory, kernels and
// GEMMs on the runner's one stream, and the logits of the items that
// sample (their last rows gathered first, so the LM head runs on those
// rows only) copied back; no device allocation after create. Attention
// goes split-K (k_paged_attn_cuda) when a step has too few (token, KV head)
// pairs to fill the GPU and long contexts; decode-only steps can replay CUDA
// graphs (eng_llm_cuda_runner_enable_graphs).
//
// Built only with INFERD_CUDA (engine/llm/llm.cmake). Not thread-safe: one
// thread drives a runner.
#ifndef INFERD_ENGINE_LLM_CUDA_LLM_CUDA_H
#define INFERD_ENGINE_LLM_CUDA_LLM_CUDA_H

#include <stddef.h>

#include "engine/llm/llm_model.h"
#include "engine/llm/llm_step.h"
#include "kernels/base/err.h"

typedef struct eng_llm_cuda_runner eng_llm_cuda_runner;

// Uploads m's weights to `device` (a CUDA ordinal) and allocates the KV pool
// (2 x layers x n_blocks x block_tokens x kv heads x head_dim elements of
// the model's type), the step's scratch for max_step_tokens tokens, the
// pinned metadata buffer and the cuBLASLt workspace. m is only read here and
// may be destroyed afterwards. ERR_RESOURCE_EXHAUSTED when the device
// memory does not suffice (saying how much was asked), ERR_INVALID_ARGUMENT
// for a bad config, ERR_UNAVAILABLE without that device.
int eng_llm_cuda_runner_create(const eng_llm_model *m, const eng_llm_runner_config *c, int device,
                               eng_llm_cuda_runner **out, err *e);
// Another runner on share's device computing with share's weights (not
// copied: one upload per device), with its own KV pool, scratch, stream and
// config. share must outlive it. Errors as eng_llm_cuda_runner_create.
int eng_llm_cuda_runner_create_shared(const eng_llm_cuda_runner *share, const eng_llm_runner_config *c,
                                      eng_llm_cuda_runner **out, err *e);
void eng_llm_cuda_runner_destroy(eng_llm_cuda_runner *r);
size_t eng_llm_cuda_runner_kv_bytes(const eng_llm_cuda_runner *r);
// Device bytes of the uploaded weights (the sharer's for a shared runner).
size_t eng_llm_cuda_runner_weight_bytes(const eng_llm_cuda_runner *r);

// Runs the step as eng_llm_step does (same checks, same INVALID_ARGUMENT
// before anything is computed); logits gets vocab floats per item with
// logits set, in item order. Returns after the logits are on the host.
int eng_llm_cuda_step(eng_llm_cuda_runner *r, const eng_llm_work *w, size_t n, float *logits, err *e);
// As eng_llm_step_ids: the greedy items' tokens in ids[i] (their rows'
// argmax on the device, k_argmax_rows_cuda on the logits in the model's
// type: the same token as the host's argmax of the FP32 logits, widening
// being exact), only the other sampling items' logits rows copied to the
// host (logits: their rows, in item order). ids NULL: eng_llm_cuda_step.
// Items with sampling set (llm_step.h) are drawn on the device too
// (k_sample_rows_cuda after the argmax, over the same rows: eng_llm_sample's
// rule, the host's uniform number w[i].u), their token in ids[i]; only when
// the step's seen ids of the rows with a repetition penalty overflow the
// runner's buffer (the pool's token slots plus one context: possible with
// shared prefixes) does such a row's ids[i] say -1 and its logits come back.
int eng_llm_cuda_step_ids(eng_llm_cuda_runner *r, const eng_llm_work *w, size_t n, float *logits, int32_t *ids, err *e);

// CUDA graphs for decode-only steps (every item one token, every item
// sampling, at most max_batch items; every item an id row (greedy or
// sampled on the device), with only the ids coming back, or none: a step
// mixing the two runs outside graphs, as prefill steps do): such a step runs as the graph of its
// bucket, the next power of two (1, 2, 4, ... up to the largest that is at
// most max_batch and max_step_tokens), captured on the bucket's first step
// and replayed after (the padding items compute on a spare KV block past
// the pool). The metadata copy stays outside the graph; the logits come
// back through a pinned buffer of max_batch x vocab floats allocated here,
// the id graphs' ids through a pinned int32 buffer (the argmax and the
// sampling kernels and that copy are inside the graph; the sampling
// parameters and seen ids sit in device buffers of fixed address, copied
// in before each launch).
// Other steps run as before. Call once, before the steps.
int eng_llm_cuda_runner_enable_graphs(eng_llm_cuda_runner *r, int64_t max_batch, err *e);
// GEMM autotuning for the decode graphs (eng_gemm_tuner, every shape timed):
// before a decode bucket's graph is captured, a dry pass outside the capture
// times cuBLASLt's candidates for its shapes (m = the bucket) and the
// capture uses the fastest; other steps keep the heuristic's first answer.
// Off by default: a tuned decode graph (m = its bucket, padded) may then sum
// in another order than the same rows in a mixed step outside graphs (m =
// the items), so a row's logits would depend on the path it took
// (test_gpu_llm_step holds them equal to 1e-6). bench_llm_decode turns it
// on (--no-gemm-tune: off). Call before the steps.
int eng_llm_cuda_runner_set_gemm_tune(eng_llm_cuda_runner *r, int on, err *e);
// The layers' products of steps of at most `rows` tokens (decode; 0 .. 8) on
// k_gemv_cuda (FP16 and BF16 weights; FP32 and other shapes stay on
// cuBLASLt; the LM head always does); default ENG_LLM_GEMV_ROWS_DEFAULT: one
// token, where the fused GEMV beat cuBLASLt (H200, 2026-12-03: 1.29-1.30 ms a
// step against 1.36-1.37) and from two it lost (3.8 ms against 1.47 at 8;
// tests/bench/RESULTS.md). 0: cuBLASLt for all. Call before the steps.
#define ENG_LLM_GEMV_ROWS_DEFAULT 1
void eng_llm_cuda_runner_set_gemv(eng_llm_cuda_runner *r, int rows);
// With the GEMV on, a decode step's RMSNorms run inside the products that
// follow them and SwiGLU/GeGLU inside the gate+up product (fuse), and the
// GEMVs launch as programmatic dependents of the kernel before them on sm_90
// and later (pdl; ignored on older devices). Both on by default. Call before
// the steps.
void eng_llm_cuda_runner_set_decode_fusion(eng_llm_cuda_runner *r, int fuse, int pdl);
// The paged attention kernel's pipeline: 0 (the default) picks per step by
// its grid (the shallow one past a wave of the deep one's blocks), 1 always
// deep, 2 always shallow (bench_llm_decode --attn-pipeline). Call before the
// steps (graphs keep what they were captured with).
void eng_llm_cuda_runner_set_attn_pipeline(eng_llm_cuda_runner *r, int which);
// Prefill attention on tensor cores (k_paged_attn_cuda's tc_prefill: FP16 and
// BF16 models with head_dim a multiple of 16 up to 128; tiles of 16 tokens of
// one prefill chunk); off by default, other steps and types unchanged.
// ERR_UNIMPLEMENTED below compute capability 8.0. Call before the steps.
int eng_llm_cuda_runner_set_tc_prefill(eng_llm_cuda_runner *r, int on, err *e);
typedef struct eng_llm_cuda_graph_stats {
  uint64_t captures, launches;
} eng_llm_cuda_graph_stats;
void eng_llm_cuda_runner_graph_stats(const eng_llm_cuda_runner *r, eng_llm_cuda_graph_stats *s);

#endif
