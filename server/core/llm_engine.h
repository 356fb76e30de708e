// server/core/llm_engine.h: the engines a generative runner (llm_serve.c)
// steps, behind one table per kind of instance: the CPU decoder runner
// (engine/llm/llm_step.h) and the GPU one (engine/llm/cuda/llm_cuda.h). In a
// build without CUDA the GPU functions exist and answer UNAVAILABLE, saying
// so, so that the server's code has no #if of its own.
#ifndef INFERD_SERVER_LLM_ENGINE_H
#define INFERD_SERVER_LLM_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/llm/llm_model.h"
#include "engine/llm/llm_step.h"
#include "kernels/base/err.h"

typedef struct srv_llm_engine_ops {
  const char *name;  // "cpu", "cuda"
  void (*destroy)(void *r);
  // eng_llm_step_ids' contract: greedy items' tokens in ids, and sampled ones' drawn by the engine (-1:
  // their logits row came back instead, as the other sampling items')
  int (*step)(void *r, const eng_llm_work *w, size_t n, float *logits, int32_t *ids, err *e);
} srv_llm_engine_ops;

extern const srv_llm_engine_ops srv_llm_cpu_ops;
extern const srv_llm_engine_ops srv_llm_cuda_ops;

// A CPU runner (FP32 model, borrowed: it must outlive the runner).
int srv_llm_cpu_create(const eng_llm_model *m, const eng_llm_runner_config *c, void **out, err *e);

// 1 when this build has the GPU runner.
int srv_llm_cuda_built(void);

// m's weights uploaded once to `device`, held by a runner of minimal pool and scratch that never steps:
// srv_llm_cuda_create's runners on that device borrow them. m may be destroyed after. Destroy it with
// srv_llm_cuda_ops.destroy after every runner that borrows it.
int srv_llm_cuda_weights(const eng_llm_model *m, int device, int32_t block_tokens, void **out, err *e);
size_t srv_llm_cuda_weight_bytes(const void *weights);
// A GPU runner computing with `weights` (its own KV pool of c->n_blocks, scratch, stream); graphs > 0
// turns CUDA graphs on for decode steps of up to that many sequences; tc_prefill puts prefill attention
// on tensor cores (eng_llm_cuda_runner_set_tc_prefill).
int srv_llm_cuda_create(const void *weights, const eng_llm_runner_config *c, int64_t graphs, int tc_prefill,
                        void **out, err *e);
// The device's free and total memory now.
int srv_llm_cuda_mem(int device, size_t *free_b, size_t *total_b, err *e);

#endif
