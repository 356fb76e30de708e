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
      "dims: [ 1 ] } ] dynamic_batching { } instance_group [ { kind: KIND_GPU } ]");
  if (!c) return;
  CHECK_EQ_INT(srv_llm_cfg_create(c, &p, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "model_transaction_policy must be { decoupled: true } or left out");
  CHECK_CONTAINS(e.msg, "input 'input_ids' is TYPE_INT32 in the backend, not TYPE_INT64");
  CHECK_CONTAINS(e.msg, "input 'prompt' is not one of the backend's");
  CHECK_CONTAINS(e.msg, "dynamic_batching and sequence_batching do not apply");
  CHECK_CONTAINS(e.msg, "instance_group[0]: KIND_CPU or KIND_AUTO only");
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
  test_bad();
  CHECK_DONE();
}
