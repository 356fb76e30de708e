// server/core/llm_cfg.c: the generative backend's config, checked at load
// (llm_cfg.h). Pure: it runs nothing.
#include "server/core/llm_cfg.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/dtype.h"

int srv_llm_cfg_is_llm(const Inference__ModelConfig *cfg) {
  return cfg && cfg->backend && strcmp(cfg->backend, SRV_LLM_BACKEND) == 0;
}

typedef struct tensor_spec {
  const char *name;
  dtype dt;
  int ndims;
  int64_t dims[2];
} tensor_spec;

static const tensor_spec in_specs[SRV_LLM_IN_N] = {
    [SRV_LLM_IN_IDS] = {"input_ids", DT_INT32, 1, {-1}},
    [SRV_LLM_IN_LENGTHS] = {"input_lengths", DT_INT32, 1, {1}},
    [SRV_LLM_IN_OUTPUT_LEN] = {"request_output_len", DT_INT32, 1, {1}},
    [SRV_LLM_IN_END_ID] = {"end_id", DT_INT32, 1, {1}},
    [SRV_LLM_IN_PAD_ID] = {"pad_id", DT_INT32, 1, {1}},
    [SRV_LLM_IN_TEMPERATURE] = {"temperature", DT_FP32, 1, {1}},
    [SRV_LLM_IN_TOP_K] = {"runtime_top_k", DT_INT32, 1, {1}},
    [SRV_LLM_IN_TOP_P] = {"runtime_top_p", DT_FP32, 1, {1}},
    [SRV_LLM_IN_MIN_P] = {"min_p", DT_FP32, 1, {1}},
    [SRV_LLM_IN_REP_PENALTY] = {"repetition_penalty", DT_FP32, 1, {1}},
    [SRV_LLM_IN_SEED] = {"random_seed", DT_UINT64, 1, {1}},
    [SRV_LLM_IN_STREAMING] = {"streaming", DT_BOOL, 1, {1}},
    [SRV_LLM_IN_STOP_WORDS] = {"stop_words_list", DT_INT32, 2, {2, -1}},
    [SRV_LLM_IN_TEXT] = {"text_input", DT_STRING, 1, {1}},
    [SRV_LLM_IN_STREAM] = {"stream", DT_BOOL, 1, {1}},
    [SRV_LLM_IN_SAMPLING] = {"sampling_parameters", DT_STRING, 1, {1}},
    [SRV_LLM_IN_EXCLUDE] = {"exclude_input_in_output", DT_BOOL, 1, {1}},
};

static const tensor_spec out_specs[SRV_LLM_OUT_N] = {
    [SRV_LLM_OUT_IDS] = {"output_ids", DT_INT32, 2, {-1, -1}},
    [SRV_LLM_OUT_SEQ_LEN] = {"sequence_length", DT_INT32, 1, {-1}},
    [SRV_LLM_OUT_TEXT] = {"text_output", DT_STRING, 1, {-1}},
};

static void spec_io(const tensor_spec *t, eng_io *io) {
  snprintf(io->name, sizeof io->name, "%s", t->name);
  io->dt = t->dt;
  io->ndims = t->ndims;
  memcpy(io->dims, t->dims, (size_t)t->ndims * sizeof t->dims[0]);
}

// A listed tensor must be one of ours with our datatype; its dims are ours whatever it says.
static void check_listed(char *buf, size_t cap, size_t *len, const char *kind, const char *name, int dt,
                         const tensor_spec *specs, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (strcmp(specs[i].name, name ? name : "") != 0) continue;
    if ((dtype)dt != specs[i].dt)
      err_join(buf, cap, len, "%s '%s' is %s in the backend, not %s", kind, specs[i].name,
               dtype_config_name(specs[i].dt), dtype_config_name((dtype)dt));
    return;
  }
  (void)n;
  err_join(buf, cap, len,
           "%s '%s' is not one of the backend's (TensorRT-LLM's and the vLLM backend's names, docs/models.md)", kind,
           name ? name : "");
}

// --- parameters

typedef struct param_spec {
  const char *key;
  int64_t lo, hi;
  size_t off;  // into srv_llm_cfg; int64_t fields unless is32
  int is32, is_bool;
} param_spec;

#define OFF(f) offsetof(srv_llm_cfg, f)
static const param_spec params[] = {
    {"kv_cache_blocks", 1, INT32_MAX, OFF(kv_blocks), 1, 0},
    {"kv_cache_bytes", 1, (int64_t)1 << 40, OFF(kv_bytes), 0, 0},
    {"kv_block_tokens", 1, 1024, OFF(block_tokens), 1, 0},
    {"max_num_seqs", 1, 4096, OFF(max_num_seqs), 1, 0},
    {"max_num_batched_tokens", 1, (int64_t)1 << 20, OFF(max_batched), 0, 0},
    {"max_model_len", 1, (int64_t)1 << 24, OFF(max_model_len), 0, 0},
    {"max_prefill_chunk", 0, (int64_t)1 << 20, OFF(max_prefill_chunk), 0, 0},
    {"enable_prefix_caching", 0, 1, OFF(prefix_caching), 1, 1},
    {"cuda_graphs", 0, 1, OFF(cuda_graphs), 1, 1},
    {"tensor_core_prefill", 0, 1, OFF(tc_prefill), 1, 1},
    {"host_sampling", 0, 1, OFF(host_sampling), 1, 1},
};
#define N_PARAMS (sizeof params / sizeof params[0])

static void set_param(char *buf, size_t cap, size_t *len, srv_llm_cfg *p, const char *key, const char *v) {
  if (strcmp(key, "dtype") == 0) {  // vLLM's names
    if (strcmp(v, "auto") == 0)
      p->dtype = SRV_LLM_DTYPE_AUTO;
    else if (strcmp(v, "float32") == 0)
      p->dtype = DT_FP32;
    else if (strcmp(v, "float16") == 0)
      p->dtype = DT_FP16;
    else if (strcmp(v, "bfloat16") == 0)
      p->dtype = DT_BF16;
    else
      err_join(buf, cap, len, "parameter 'dtype': '%s' is not auto, float32, float16 or bfloat16", v);
    return;
  }
  if (strcmp(key, "gpu_memory_utilization") == 0) {
    char *end = NULL;
    errno = 0;
    double x = strtod(v, &end);
    if (!v[0] || errno || *end || !(x > 0 && x <= 1))
      err_join(buf, cap, len, "parameter 'gpu_memory_utilization': '%s' is not a number in (0, 1]", v);
    else
      p->gpu_mem_util = x;
    return;
  }
  const param_spec *ps = NULL;
  for (size_t i = 0; i < N_PARAMS; i++)
    if (strcmp(params[i].key, key) == 0) ps = &params[i];
  if (!ps) {
    err_join(buf, cap, len, "parameter '%s' is unknown (docs/models.md lists them)", key);
    return;
  }
  int64_t x;
  if (ps->is_bool) {
    if (strcmp(v, "true") == 0 || strcmp(v, "1") == 0)
      x = 1;
    else if (strcmp(v, "false") == 0 || strcmp(v, "0") == 0)
      x = 0;
    else {
      err_join(buf, cap, len, "parameter '%s': '%s' is not true or false", key, v);
      return;
    }
  } else {
    char *end = NULL;
    errno = 0;
    long long ll = strtoll(v, &end, 10);
    if (!v[0] || errno || *end) {
      err_join(buf, cap, len, "parameter '%s': '%s' is not an integer", key, v);
      return;
    }
    if (ll < ps->lo || ll > ps->hi) {
      err_join(buf, cap, len, "parameter '%s': %lld is out of range [%" PRId64 ", %" PRId64 "]", key, ll, ps->lo,
               ps->hi);
      return;
    }
    x = ll;
  }
  char *f = (char *)p + ps->off;
  if (ps->is32)
    *(int32_t *)f = (int32_t)x;
  else
    *(int64_t *)f = x;
}

int srv_llm_cfg_create(const Inference__ModelConfig *c, srv_llm_cfg **out, err *e) {
  *out = NULL;
  char buf[sizeof e->msg];
  size_t len = 0;
  buf[0] = 0;
  srv_llm_cfg *p = calloc(1, sizeof *p);
  if (!p) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  for (int i = 0; i < SRV_LLM_IN_N; i++) spec_io(&in_specs[i], &p->in[i]);
  for (int i = 0; i < SRV_LLM_OUT_N; i++) spec_io(&out_specs[i], &p->out[i]);
  p->max_batch = c->max_batch_size;
  p->kv_bytes = (int64_t)256 << 20;
  p->block_tokens = 16;
  p->max_num_seqs = 16;
  p->max_batched = 512;
  p->prefix_caching = 1;
  p->dtype = SRV_LLM_DTYPE_AUTO;
  p->gpu_mem_util = 0.9;
  p->cuda_graphs = 1;
  if (c->max_batch_size < 0) err_join(buf, sizeof buf, &len, "max_batch_size %d is negative", c->max_batch_size);
  // absent, the policy is implied (registry.c sets it); present, it must say decoupled
  if (c->model_transaction_policy && !c->model_transaction_policy->decoupled)
    err_join(buf, sizeof buf, &len,
             "model_transaction_policy must be { decoupled: true } or left out (the backend streams)");
  if (c->platform && c->platform[0])
    err_join(buf, sizeof buf, &len, "backend '%s' takes no platform (the config names '%s')", SRV_LLM_BACKEND,
             c->platform);
  for (size_t i = 0; i < c->n_input; i++)
    check_listed(buf, sizeof buf, &len, "input", c->input[i]->name, (int)c->input[i]->data_type, in_specs,
                 SRV_LLM_IN_N);
  for (size_t i = 0; i < c->n_output; i++)
    check_listed(buf, sizeof buf, &len, "output", c->output[i]->name, (int)c->output[i]->data_type, out_specs,
                 SRV_LLM_OUT_N);
  if (c->scheduling_choice_case != INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE__NOT_SET)
    err_join(buf, sizeof buf, &len,
             "dynamic_batching and sequence_batching do not apply (the backend batches each step)");
  int n_inst = 0;
  if (c->n_instance_group > SRV_LLM_MAX_GROUPS)
    err_join(buf, sizeof buf, &len, "%zu instance groups: at most %d", c->n_instance_group, SRV_LLM_MAX_GROUPS);
  for (size_t i = 0; i < c->n_instance_group && i < SRV_LLM_MAX_GROUPS; i++) {
    const Inference__ModelInstanceGroup *g = c->instance_group[i];
    srv_llm_group *o = &p->groups[p->n_groups++];
    o->count = g->count > 0 ? g->count : 1;
    switch (g->kind) {
      case INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_CPU:
        o->kind = SRV_LLM_KIND_CPU;
        break;
      case INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU:
        o->kind = SRV_LLM_KIND_GPU;
        break;
      case INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_AUTO:
        o->kind = g->n_gpus ? SRV_LLM_KIND_GPU : SRV_LLM_KIND_AUTO;  // listed gpus make it a GPU group (config.c)
        break;
      default:
        err_join(buf, sizeof buf, &len, "instance_group[%zu]: KIND_CPU, KIND_GPU or KIND_AUTO only", i);
    }
    if (g->count < 0) err_join(buf, sizeof buf, &len, "instance_group[%zu]: count %d is negative", i, g->count);
    if (g->n_gpus && o->kind == SRV_LLM_KIND_CPU)
      err_join(buf, sizeof buf, &len, "instance_group[%zu]: gpus given to a KIND_CPU group", i);
    if (g->n_gpus > SRV_LLM_MAX_GPUS)
      err_join(buf, sizeof buf, &len, "instance_group[%zu]: %zu gpus: at most %d", i, g->n_gpus, SRV_LLM_MAX_GPUS);
    for (size_t k = 0; k < g->n_gpus && k < SRV_LLM_MAX_GPUS; k++) {
      if (g->gpus[k] < 0)
        err_join(buf, sizeof buf, &len, "instance_group[%zu]: gpus[%zu] = %d is negative", i, k, g->gpus[k]);
      o->gpus[o->n_gpus++] = g->gpus[k];
    }
    n_inst += o->count;
  }
  p->n_instances = n_inst > 0 ? n_inst : 1;
  if (p->n_instances > 64) err_join(buf, sizeof buf, &len, "%d instances: at most 64", p->n_instances);
  int has_blocks = 0, has_bytes = 0;
  for (size_t i = 0; i < c->n_parameters; i++) {
    const char *k = c->parameters[i]->key ? c->parameters[i]->key : "";
    const char *v =
        c->parameters[i]->value && c->parameters[i]->value->string_value ? c->parameters[i]->value->string_value : "";
    has_blocks |= strcmp(k, "kv_cache_blocks") == 0;
    has_bytes |= strcmp(k, "kv_cache_bytes") == 0;
    p->kv_bytes_given |= strcmp(k, "kv_cache_bytes") == 0;
    set_param(buf, sizeof buf, &len, p, k, v);
  }
  if (has_blocks && has_bytes)
    err_join(buf, sizeof buf, &len, "parameters kv_cache_blocks and kv_cache_bytes both size the KV pool: give one");
  if (p->max_batched < p->max_num_seqs)
    err_join(buf, sizeof buf, &len,
             "max_num_batched_tokens %" PRId64
             " is below max_num_seqs %d (each running sequence's token must fit a step)",
             p->max_batched, p->max_num_seqs);
  if (len) {
    free(p);
    return err_set(e, ERR_INVALID_ARGUMENT, "%s", buf);
  }
  *out = p;
  return 0;
}

// --- where the runners run (llm_cfg.h)

int srv_llm_cfg_place(const srv_llm_cfg *c, int n_gpus, int cuda_built, int *dev, int cap, int *n_out, err *e) {
  int n = 0;
  srv_llm_group one = {.kind = SRV_LLM_KIND_AUTO, .count = 1};
  int ng = c->n_groups ? c->n_groups : 1;
  for (int i = 0; i < ng; i++) {
    const srv_llm_group *g = c->n_groups ? &c->groups[i] : &one;
    srv_llm_kind k = g->kind == SRV_LLM_KIND_AUTO ? (n_gpus > 0 ? SRV_LLM_KIND_GPU : SRV_LLM_KIND_CPU) : g->kind;
    if (k == SRV_LLM_KIND_CPU) {
      for (int j = 0; j < g->count; j++) {
        if (n == cap) return err_set(e, ERR_INVALID_ARGUMENT, "instance_group asks for more than %d runners", cap);
        dev[n++] = -1;
      }
      continue;
    }
    if (!cuda_built)
      return err_set(e, ERR_UNAVAILABLE,
                     "instance_group[%d] is KIND_GPU, but this inferd was built without CUDA (INFERD_CUDA=OFF): "
                     "use KIND_CPU or KIND_AUTO",
                     i);
    if (n_gpus <= 0)
      return err_set(e, ERR_UNAVAILABLE,
                     "instance_group[%d] is KIND_GPU, but no CUDA device is visible (the server's log says why at "
                     "start-up): use KIND_CPU or KIND_AUTO",
                     i);
    int per = g->n_gpus ? g->n_gpus : n_gpus;
    for (int gi = 0; gi < per; gi++) {
      int d = g->n_gpus ? g->gpus[gi] : gi;
      if (d < 0 || d >= n_gpus)
        return err_set(e, ERR_INVALID_ARGUMENT, "instance_group[%d]: gpus names device %d, but %d CUDA device%s visible",
                       i, d, n_gpus, n_gpus == 1 ? " is" : "s are");
      for (int j = 0; j < g->count; j++) {
        if (n == cap) return err_set(e, ERR_INVALID_ARGUMENT, "instance_group asks for more than %d runners", cap);
        dev[n++] = d;
      }
    }
  }
  *n_out = n;
  return 0;
}

void srv_llm_cfg_destroy(srv_llm_cfg *p) {
  free(p);
}
