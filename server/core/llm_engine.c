// server/core/llm_engine.c: the generative runners' engine tables
// (llm_engine.h). INFERD_HAVE_CUDA comes with inferd_cuda (CUDA builds only).
#include "server/core/llm_engine.h"

#if INFERD_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "engine/llm/cuda/llm_cuda.h"
#endif

// --- CPU

int srv_llm_cpu_create(const eng_llm_model *m, const eng_llm_runner_config *c, void **out, err *e) {
  eng_llm_runner *r = NULL;
  int rc = eng_llm_runner_create(m, c, &r, e);
  *out = r;
  return rc;
}
static void cpu_destroy(void *r) {
  eng_llm_runner_destroy(r);
}
static int cpu_step(void *r, const eng_llm_work *w, size_t n, float *logits, int32_t *ids, err *e) {
  return eng_llm_step_ids(r, w, n, logits, ids, e);
}
const srv_llm_engine_ops srv_llm_cpu_ops = {"cpu", cpu_destroy, cpu_step};

// --- GPU

#if INFERD_HAVE_CUDA

int srv_llm_cuda_built(void) {
  return 1;
}

int srv_llm_cuda_weights(const eng_llm_model *m, int device, int32_t block_tokens, void **out, err *e) {
  // one block, one token a step: the smallest pool and scratch the runner takes (it never steps)
  eng_llm_runner_config c = {.n_blocks = 1, .block_tokens = block_tokens, .max_step_tokens = 1,
                             .max_context = block_tokens};
  eng_llm_cuda_runner *r = NULL;
  int rc = eng_llm_cuda_runner_create(m, &c, device, &r, e);
  *out = r;
  return rc;
}

size_t srv_llm_cuda_weight_bytes(const void *weights) {
  return eng_llm_cuda_runner_weight_bytes(weights);
}

int srv_llm_cuda_create(const void *weights, const eng_llm_runner_config *c, int64_t graphs, int tc_prefill,
                        void **out, err *e) {
  *out = NULL;
  eng_llm_cuda_runner *r = NULL;
  TRY(eng_llm_cuda_runner_create_shared(weights, c, &r, e));
  if (tc_prefill && eng_llm_cuda_runner_set_tc_prefill(r, 1, e) != 0) {
    eng_llm_cuda_runner_destroy(r);
    return e->code;
  }
  if (graphs > 0) {
    int64_t g = graphs < c->max_step_tokens ? graphs : c->max_step_tokens;
    if (g > 32768) g = 32768;  // the runner's largest bucket
    if (eng_llm_cuda_runner_enable_graphs(r, g, e) != 0) {
      eng_llm_cuda_runner_destroy(r);
      return e->code;
    }
  }
  *out = r;
  return 0;
}

int srv_llm_cuda_mem(int device, size_t *free_b, size_t *total_b, err *e) {
  cudaError_t ce = cudaSetDevice(device);
  if (ce == cudaSuccess) ce = cudaMemGetInfo(free_b, total_b);
  if (ce != cudaSuccess) {
    (void)cudaGetLastError();
    return err_set(e, ERR_UNAVAILABLE, "CUDA device %d: %s", device, cudaGetErrorString(ce));
  }
  return 0;
}

static void cuda_destroy(void *r) {
  eng_llm_cuda_runner_destroy(r);
}
static int cuda_step(void *r, const eng_llm_work *w, size_t n, float *logits, int32_t *ids, err *e) {
  return eng_llm_cuda_step_ids(r, w, n, logits, ids, e);
}

#else  // a build without CUDA: the same names, each saying so

#define NO_CUDA                                                                                                   \
  "this inferd was built without CUDA (INFERD_CUDA=OFF): backend inferd_llm's KIND_GPU instances cannot run; " \
  "use KIND_CPU or KIND_AUTO"

int srv_llm_cuda_built(void) {
  return 0;
}
int srv_llm_cuda_weights(const eng_llm_model *m, int device, int32_t block_tokens, void **out, err *e) {
  (void)m, (void)device, (void)block_tokens;
  *out = NULL;
  return err_set(e, ERR_UNAVAILABLE, NO_CUDA);
}
size_t srv_llm_cuda_weight_bytes(const void *weights) {
  (void)weights;
  return 0;
}
int srv_llm_cuda_create(const void *weights, const eng_llm_runner_config *c, int64_t graphs, int tc_prefill,
                        void **out, err *e) {
  (void)weights, (void)c, (void)graphs, (void)tc_prefill;
  *out = NULL;
  return err_set(e, ERR_UNAVAILABLE, NO_CUDA);
}
int srv_llm_cuda_mem(int device, size_t *free_b, size_t *total_b, err *e) {
  (void)device;
  *free_b = *total_b = 0;
  return err_set(e, ERR_UNAVAILABLE, NO_CUDA);
}
static void cuda_destroy(void *r) {
  (void)r;
}
static int cuda_step(void *r, const eng_llm_work *w, size_t n, float *logits, int32_t *ids, err *e) {
  (void)r, (void)w, (void)n, (void)logits, (void)ids;
  return err_set(e, ERR_UNAVAILABLE, NO_CUDA);
}

#endif

const srv_llm_engine_ops srv_llm_cuda_ops = {"cuda", cuda_destroy, cuda_step};
