// test_llm_cfg.c: the generative backend's config checked at load
// (server/core/llm_cfg.h): defaults, parameters read, TensorRT-LLM's tensor
// names shown, instance_group counted; a bad config refused with every
// reason at once.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine/repo/config.h"
#include "engine/repo/pbtxt.h"
#include "server/core/llm_cfg.h"

static Inference__ModelConfig *parse(const char *text) {
  ProtobufCMessage *m = NULL;
  err e = {0};
  if (pbtxt_parse(&inference__model_config__descriptor, text, strlen(text), "test", &m, &e) != 0) {
    CHECK_EQ_STR(e.msg, "");
    return NULL;
  }
  return (Inference__ModelConfig *)m;
}

#define P(k, v) "parameters { key: '" k "' value { string_value: '" v "' } } "

static void test_defaults(void) {
  Inference__ModelConfig *c = parse("name: 'm' backend: 'inferd_llm'");
  if (!c) return;
  CHECK_EQ_INT(srv_llm_cfg_is_llm(c), 1);
  srv_llm_cfg *p = NULL;
  err e = {0};
  CHECK_EQ_INT(srv_llm_cfg_create(c, &p, &e), 0);
  if (p) {
    CHECK_EQ_INT(p->block_tokens, 16);
    CHECK_EQ_INT(p->max_num_seqs, 16);
    CHECK_EQ_INT(p->max_batched, 512);
    CHECK_EQ_INT(p->kv_blocks, 0);
    CHECK_EQ_INT(p->kv_bytes, 256 << 20);
    CHECK_EQ_INT(p->prefix_caching, 1);
    CHECK_EQ_INT(p->n_instances, 1);
    CHECK_EQ_INT(p->n_groups, 0);
    CHECK_EQ_INT(p->dtype, SRV_LLM_DTYPE_AUTO);
    CHECK(p->gpu_mem_util == 0.9);
    CHECK_EQ_INT(p->cuda_graphs, 1);
    CHECK_EQ_INT(p->tc_prefill, 0);
    CHECK_EQ_INT(p->kv_bytes_given, 0);
    CHECK_EQ_STR(p->in[SRV_LLM_IN_IDS].name, "input_ids");
    CHECK_EQ_INT(p->in[SRV_LLM_IN_IDS].dt, DT_INT32);
    CHECK_EQ_STR(p->in[SRV_LLM_IN_TOP_K].name, "runtime_top_k");
    CHECK_EQ_STR(p->in[SRV_LLM_IN_SEED].name, "random_seed");
    CHECK_EQ_INT(p->in[SRV_LLM_IN_SEED].dt, DT_UINT64);
    CHECK_EQ_INT(p->in[SRV_LLM_IN_STOP_WORDS].ndims, 2);
    CHECK_EQ_STR(p->out[SRV_LLM_OUT_IDS].name, "output_ids");
    CHECK_EQ_STR(p->out[SRV_LLM_OUT_SEQ_LEN].name, "sequence_length");
    // Triton's vLLM backend's tensors (issue 36)
    CHECK_EQ_STR(p->in[SRV_LLM_IN_TEXT].name, "text_input");
    CHECK_EQ_INT(p->in[SRV_LLM_IN_TEXT].dt, DT_STRING);
    CHECK_EQ_STR(p->in[SRV_LLM_IN_STREAM].name, "stream");
    CHECK_EQ_INT(p->in[SRV_LLM_IN_STREAM].dt, DT_BOOL);
    CHECK_EQ_STR(p->in[SRV_LLM_IN_SAMPLING].name, "sampling_parameters");
    CHECK_EQ_STR(p->in[SRV_LLM_IN_EXCLUDE].name, "exclude_input_in_output");
    CHECK_EQ_STR(p->out[SRV_LLM_OUT_TEXT].name, "text_output");
    CHECK_EQ_INT(p->out[SRV_LLM_OUT_TEXT].dt, DT_STRING);
  }
  srv_llm_cfg_destroy(p);
  config_free(c);
}

static void test_params(void) {
  Inference__ModelConfig *c = parse("name: 'm' backend: 'inferd_llm' max_batch_size: 8 "
                                    "model_transaction_policy { decoupled: true } " P("kv_cache_blocks", "300")
                                        P("kv_block_tokens", "8") P("max_num_seqs", "4") P("max_num_batched_tokens", "64")
                                            P("max_model_len", "1000") P("max_prefill_chunk", "32")
                                                P("enable_prefix_caching", "false")
                                    "input [ { name: 'input_ids' data_type: TYPE_INT32 dims: [ -1 ] } ] "
                                    "instance_group [ { count: 2 kind: KIND_CPU }, { kind: KIND_AUTO } ]");
  if (!c) return;
  srv_llm_cfg *p = NULL;
  err e = {0};
  CHECK_EQ_INT(srv_llm_cfg_create(c, &p, &e), 0);
  if (p) {
    CHECK_EQ_INT(p->kv_blocks, 300);
    CHECK_EQ_INT(p->block_tokens, 8);
    CHECK_EQ_INT(p->max_num_seqs, 4);
    CHECK_EQ_INT(p->max_batched, 64);
    CHECK_EQ_INT(p->max_model_len, 1000);
    CHECK_EQ_INT(p->max_prefill_chunk, 32);
    CHECK_EQ_INT(p->prefix_caching, 0);
    CHECK_EQ_INT(p->max_batch, 8);
    CHECK_EQ_INT(p->n_instances, 3);
  }
  srv_llm_cfg_destroy(p);
  config_free(c);
}

// The GPU side: dtype, gpu_memory_utilization, cuda_graphs, GPU groups with their gpus
static void test_gpu_params(void) {
  Inference__ModelConfig *c =
      parse("name: 'm' backend: 'inferd_llm' " P("dtype", "float32") P("gpu_memory_utilization", "0.5")
                P("cuda_graphs", "false") P("kv_cache_bytes", "1000000") P("tensor_core_prefill", "true")
            "instance_group [ { count: 2 kind: KIND_GPU gpus: [ 1, 3 ] }, { kind: KIND_AUTO gpus: [ 0 ] }, "
            "{ kind: KIND_AUTO } ]");
  if (!c) return;
  srv_llm_cfg *p = NULL;
  err e = {0};
  CHECK_EQ_INT(srv_llm_cfg_create(c, &p, &e), 0);
  if (p) {
    CHECK_EQ_INT(p->dtype, DT_FP32);
    CHECK(p->gpu_mem_util == 0.5);
    CHECK_EQ_INT(p->cuda_graphs, 0);
    CHECK_EQ_INT(p->tc_prefill, 1);
    CHECK_EQ_INT(p->kv_bytes_given, 1);
    CHECK_EQ_INT(p->n_groups, 3);
    CHECK_EQ_INT(p->groups[0].kind, SRV_LLM_KIND_GPU);
    CHECK_EQ_INT(p->groups[0].count, 2);
    CHECK_EQ_INT(p->groups[0].n_gpus, 2);
    CHECK_EQ_INT(p->groups[0].gpus[1], 3);
    CHECK_EQ_INT(p->groups[1].kind, SRV_LLM_KIND_GPU);  // AUTO with gpus is a GPU group, as config.c says
    CHECK_EQ_INT(p->groups[2].kind, SRV_LLM_KIND_AUTO);
  }
  srv_llm_cfg_destroy(p);
  config_free(c);
  c = parse("name: 'm' backend: 'inferd_llm' " P("dtype", "half") P("gpu_memory_utilization", "1.5")
                P("cuda_graphs", "yes"));
  if (!c) return;
  CHECK_EQ_INT(srv_llm_cfg_create(c, &p, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "parameter 'dtype': 'half' is not auto, float32, float16 or bfloat16");
  CHECK_CONTAINS(e.msg, "parameter 'gpu_memory_utilization': '1.5' is not a number in (0, 1]");
  CHECK_CONTAINS(e.msg, "parameter 'cuda_graphs': 'yes' is not true or false");
  config_free(c);
}

// Where the runners go (srv_llm_cfg_place), for a machine of n GPUs, with and without CUDA built in.
static void test_place(void) {
  Inference__ModelConfig *c = parse("name: 'm' backend: 'inferd_llm' instance_group [ { count: 2 kind: KIND_GPU "
                                    "gpus: [ 1, 3 ] }, { kind: KIND_AUTO gpus: [ 0 ] }, { kind: KIND_AUTO }, "
                                    "{ kind: KIND_CPU } ]");
  Inference__ModelConfig *d = parse("name: 'm' backend: 'inferd_llm'");
  if (!c || !d) return;
  srv_llm_cfg *p = NULL, *q = NULL;
  err e = {0};
  CHECK_EQ_INT(srv_llm_cfg_create(c, &p, &e), 0);
  CHECK_EQ_INT(srv_llm_cfg_create(d, &q, &e), 0);
  if (p && q) {
    int dev[64], n = 0;
    CHECK_EQ_INT(srv_llm_cfg_place(p, 4, 1, dev, 64, &n, &e), 0);
    int want[] = {1, 1, 3, 3, 0, 0, 1, 2, 3, -1};  // AUTO without gpus: one on each visible GPU
    CHECK_EQ_INT(n, 10);
    for (int i = 0; i < n && i < 10; i++) CHECK_EQ_INT(dev[i], want[i]);
    CHECK_EQ_INT(srv_llm_cfg_place(p, 4, 1, dev, 5, &n, &e), ERR_INVALID_ARGUMENT);
    CHECK_CONTAINS(e.msg, "more than 5 runners");
    CHECK_EQ_INT(srv_llm_cfg_place(p, 2, 1, dev, 64, &n, &e), ERR_INVALID_ARGUMENT);
    CHECK_CONTAINS(e.msg, "instance_group[0]: gpus names device 3, but 2 CUDA devices are visible");
    CHECK_EQ_INT(srv_llm_cfg_place(p, 0, 1, dev, 64, &n, &e), ERR_UNAVAILABLE);
    CHECK_CONTAINS(e.msg, "instance_group[0] is KIND_GPU, but no CUDA device is visible");
    CHECK_EQ_INT(srv_llm_cfg_place(p, 4, 0, dev, 64, &n, &e), ERR_UNAVAILABLE);
    CHECK_CONTAINS(e.msg, "built without CUDA (INFERD_CUDA=OFF)");
    // no instance_group: one runner, on GPU 0 and 1 when there are two, else on the CPU
    CHECK_EQ_INT(srv_llm_cfg_place(q, 2, 1, dev, 64, &n, &e), 0);
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(dev[0], 0);
    CHECK_EQ_INT(dev[1], 1);
    CHECK_EQ_INT(srv_llm_cfg_place(q, 0, 0, dev, 64, &n, &e), 0);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(dev[0], -1);
  }
  srv_llm_cfg_destroy(p);
  srv_llm_cfg_destroy(q);
  config_free(c);
  config_free(d);
}

static void test_bad(void) {
  // the parameters' mistakes, every one named
  Inference__ModelConfig *c =
      parse("name: 'm' backend: 'inferd_llm' " P("kv_block_tokens", "x") P("max_num_seqs", "0") P("warp", "9")
                P("kv_cache_blocks", "10") P("kv_cache_bytes", "100") P("enable_prefix_caching", "maybe"));
  if (!c) return;
  srv_llm_cfg *p = NULL;
  err e = {0};
  CHECK_EQ_INT(srv_llm_cfg_create(c, &p, &e), ERR_INVALID_ARGUMENT);
  CHECK(p == NULL);
  CHECK_CONTAINS(e.msg, "parameter 'kv_block_tokens': 'x' is not an integer");
  CHECK_CONTAINS(e.msg, "parameter 'max_num_seqs': 0 is out of range [1, 4096]");
  CHECK_CONTAINS(e.msg, "parameter 'warp' is unknown");
  CHECK_CONTAINS(e.msg, "kv_cache_blocks and kv_cache_bytes both size the KV pool");
  CHECK_CONTAINS(e.msg, "'maybe' is not true or false");
  CHECK(strlen(e.msg) < sizeof e.msg - 1);  // every reason fits, none cut
  config_free(c);
  // the config's shape: policy, tensors, scheduling, instances
  c = parse(
      "name: 'm' backend: 'inferd_llm' model_transaction_policy { decoupled: false } "
      "input [ { name: 'input_ids' data_type: TYPE_INT64 dims: [ -1 ] }, { name: 'prompt' data_type: TYPE_STRING "
      "dims: [ 1 ] } ] dynamic_batching { } instance_group [ { kind: KIND_MODEL }, { kind: KIND_CPU gpus: [ 0 ] } ]");
  if (!c) return;
  CHECK_EQ_INT(srv_llm_cfg_create(c, &p, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "model_transaction_policy must be { decoupled: true } or left out");
  CHECK_CONTAINS(e.msg, "input 'input_ids' is TYPE_INT32 in the backend, not TYPE_INT64");
  CHECK_CONTAINS(e.msg, "input 'prompt' is not one of the backend's");
  CHECK_CONTAINS(e.msg, "dynamic_batching and sequence_batching do not apply");
  CHECK_CONTAINS(e.msg, "instance_group[0]: KIND_CPU, KIND_GPU or KIND_AUTO only");
  CHECK_CONTAINS(e.msg, "instance_group[1]: gpus given to a KIND_CPU group");
  CHECK(strlen(e.msg) < sizeof e.msg - 1);
  config_free(c);
  // the step budget must hold every running sequence's decode token
  c = parse("backend: 'inferd_llm' " P("max_num_seqs", "32") P("max_num_batched_tokens", "16"));
  if (!c) return;
  CHECK_EQ_INT(srv_llm_cfg_create(c, &p, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "max_num_batched_tokens 16 is below max_num_seqs 32");
  config_free(c);
}

int main(void) {
  test_defaults();
  test_params();
  test_gpu_params();
  test_place();
  test_bad();
  CHECK_DONE();
}
