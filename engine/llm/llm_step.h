// engine/llm/llm_step.h: one forward step of a decoder model on the CPU
// (FP32), over several sequences at once, each with some new tokens: prefill
// chunks and single decode tokens mixed, as batcher/iter.h plans them. The
// KV cache is one pool of fixed-size blocks per layer, addressed through
// each sequence's block table (int32 physical block ids, as
// batcher/kvblocks.h hands them out), so the paged GPU runtime keeps the
// same bookkeeping. The projections are OpenBLAS GEMMs over every token of
// the step; attention reads the paged cache (kernels' k_paged_attn_ref).
#ifndef INFERD_ENGINE_LLM_LLM_STEP_H
#define INFERD_ENGINE_LLM_LLM_STEP_H

#include <stddef.h>
#include <stdint.h>

#include "engine/llm/llm_model.h"
#include "engine/llm/llm_sample.h"
#include "kernels/base/err.h"

typedef struct eng_llm_runner_config {
  int32_t n_blocks;         // KV blocks in the pool (the bat_kv_pool's n_blocks)
  int32_t block_tokens;     // token slots per block
  int64_t max_step_tokens;  // tokens per step at most (max_num_batched_tokens)
  int64_t max_context;      // positions per sequence at most
} eng_llm_runner_config;

// One sequence's share of a step: the KV of positions start .. start +
// n_tokens - 1 is computed from tokens[0 .. n_tokens) and written through
// block_table; positions before start are read from it. logits: this item's
// last token's logits are wanted (it samples). greedy (with logits, and only
// in eng_llm_step_ids): the caller wants that row's greedy token
// (k_argmax_rows_ref's rule) instead of its logits (issue 35: on a GPU only
// the id crosses to the host).
//
// sampling (with logits set and greedy not, and only in the step_ids
// calls): the caller would draw this row's token with eng_llm_sample(p =
// sampling, seen, n_seen) and the uniform number u (eng_llm_uniform of its
// seed and counter). The GPU runner draws it on the device (kernels/sample:
// eng_llm_sample's rule on the same logits) and puts it in ids[i]; ids[i] is
// -1 when the row's logits came back instead: always on the CPU runner, and
// on the GPU when its seen ids did not fit the runner's buffer. NULL: the
// logits come back.
typedef struct eng_llm_work {
  const int32_t *tokens;
  int64_t start, n_tokens;
  const int32_t *block_table;
  int32_t n_blocks;  // entries of block_table
  int logits;
  int greedy;
  const eng_llm_sampling *sampling;
  const int32_t *seen;  // the repetition penalty's ids (the prompt and the tokens generated)
  int64_t n_seen;
  double u;
} eng_llm_work;

typedef struct eng_llm_runner eng_llm_runner;

// The KV pool (2 x layers x n_blocks x block_tokens x kv heads x head_dim
// floats) and the step's scratch, allocated once here. The model is
// borrowed and must outlive the runner.
int eng_llm_runner_create(const eng_llm_model *m, const eng_llm_runner_config *c, eng_llm_runner **out, err *e);
void eng_llm_runner_destroy(eng_llm_runner *r);
size_t eng_llm_runner_kv_bytes(const eng_llm_runner *r);

// Runs the step. logits gets vocab floats per item with logits set, in item
// order. INVALID_ARGUMENT (nothing computed) for a token outside the
// vocabulary, a position past the context or the learned positions, a
// block table too short or naming a block outside the pool, or more tokens
// than max_step_tokens.
int eng_llm_step(eng_llm_runner *r, const eng_llm_work *w, size_t n, float *logits, err *e);
// The same, with the greedy items' tokens in ids[i] (n entries, item
// order; -1 for the items with sampling set, the others' untouched) and
// logits holding only the rows of the items with logits set and greedy
// not, in item order. logits must have room
// for vocab floats per item with logits set all the same (the greedy rows
// are scratch there). ids NULL: eng_llm_step (greedy ignored).
int eng_llm_step_ids(eng_llm_runner *r, const eng_llm_work *w, size_t n, float *logits, int32_t *ids, err *e);

#endif
