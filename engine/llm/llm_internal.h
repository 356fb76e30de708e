// engine/llm/llm_internal.h: the loaded model's weights, shared by the
// loader (llm_model.c) and the step (llm_step.c) of this folder only.
#ifndef INFERD_ENGINE_LLM_LLM_INTERNAL_H
#define INFERD_ENGINE_LLM_LLM_INTERNAL_H

#include "engine/llm/llm_config.h"
#include "engine/llm/llm_model.h"
#include "engine/llm/llm_step.h"
#include "kernels/base/dtype.h"

// One layer, every matrix [out, in] row-major, elements of the model's wdt
// (FP32 for the CPU step; the checkpoint's own type when loaded with
// eng_llm_model_create_stored, for the GPU); NULL where the family has no
// such tensor (biases, LayerNorm's bias).
typedef struct eng_llm_layer {
  void *ln1_w, *ln1_b;
  void *wqkv, *bqkv;  // [(n_heads + 2 n_kv_heads) head_dim, hidden]: Q, then K, then V
  void *wo, *bo;      // [hidden, n_heads head_dim]
  void *ln2_w, *ln2_b;
  void *w_up, *b_up;      // gated: [2 intermediate, hidden] gate then up; else fc [intermediate, hidden]
  void *w_down, *b_down;  // [hidden, intermediate]
} eng_llm_layer;

struct eng_llm_model {
  eng_llm_config cfg;
  dtype wdt;  // the weights' element type: DT_FP32, DT_FP16 or DT_BF16
  void *embed;      // [vocab, hidden]
  void *pos_embed;  // [max_pos, hidden] (learned positions) or NULL
  void *norm_w, *norm_b;
  void *lm_head;    // [vocab, hidden]; == embed when tied
  float *inv_freq;  // [head_dim / 2] (RoPE) or NULL, FP32 whatever wdt
  eng_llm_layer *layers;
  size_t weight_bytes;
};

// The step's checks shared by the CPU and GPU runners (llm_step.c): every
// item's positions, block table and tokens against the config and the
// runner's limits; *total gets the step's tokens. INVALID_ARGUMENT naming
// the first bad item.
int eng_llm_check_work(const eng_llm_config *g, const eng_llm_runner_config *c, const eng_llm_work *w, size_t n,
                       int64_t *total, err *e);

#endif
