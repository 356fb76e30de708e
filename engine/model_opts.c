// model_opts.c: what a model version's config asks of it, read once at
// eng_model_create before any instance starts: the config's tensors bound to
// the graph's (names, reshapes, which inputs a GPU instance takes from the
// device), the options in its parameters and the environment (precision,
// layout, graphs, GEMM autotuning, spinning, fault injection), pad_to_longest,
// the batch sizes warmed at load, and which device each instance runs on.
// Apart from the instances' threads (model_run.c) and the lifecycle
// (model.c), which call into it; it calls neither
// (tests/unit/check_circles.py).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine/batch_sizes.h"
#include "engine/model.h"
#include "engine/model_internal.h"
#include "engine/pad.h"
#if INFERD_HAVE_CUDA
#include "engine/cuda/plan_cuda.h"
#endif

// --- binding the config's tensors to the graph's

static int bind_tensor(binding *b, const eng_model_tensor *t, const eng_graph *g, int is_input, err *e) {
  const char *name = t->name;
  size_t n = is_input ? eng_graph_n_inputs(g) : eng_graph_n_outputs(g);
  memset(b, 0, sizeof *b);
  size_t gi = n;
  for (size_t i = 0; i < n; i++) {
    const eng_io *io = is_input ? eng_graph_input(g, i) : eng_graph_output(g, i);
    if (strcmp(io->name, name) == 0) gi = i;
  }
  if (gi == n)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s '%s' of the config is not in the model",
                   is_input ? "input" : "output", name);
  if (t->n_dims > ENG_MAX_DIMS - 1 || (t->has_reshape && t->n_reshape > ENG_MAX_DIMS - 1))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s '%s' has more than %d dims", is_input ? "input" : "output",
                   name, ENG_MAX_DIMS - 1);
  snprintf(b->client.name, sizeof b->client.name, "%s", name);
  b->client.dt = t->dt;
  b->client.ndims = (int)t->n_dims;
  memcpy(b->client.dims, t->dims, t->n_dims * sizeof *t->dims);
  b->graph_index = gi;
  if (t->has_reshape) {
    b->has_reshape = 1;
    b->n_model_dims = (int)t->n_reshape;
    memcpy(b->model_dims, t->reshape, t->n_reshape * sizeof *t->reshape);
  }
  return 0;
}

int eng_model__bind_all(eng_model *m, const eng_model_config *cfg, err *e) {
  const eng_graph *g = m->graph;
  m->n_in = cfg->n_inputs;
  m->n_client_in = cfg->n_client_inputs;
  m->n_client_out = cfg->n_client_outputs;
  m->n_out = cfg->n_outputs;
  m->n_graph_in = eng_graph_n_inputs(g);
  m->n_graph_out = eng_graph_n_outputs(g);
  m->in = calloc(m->n_in ? m->n_in : 1, sizeof *m->in);
  m->out = calloc(m->n_out ? m->n_out : 1, sizeof *m->out);
  m->graph_in_to_cfg = calloc(m->n_graph_in ? m->n_graph_in : 1, sizeof *m->graph_in_to_cfg);
  if (!m->in || !m->out || !m->graph_in_to_cfg) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  for (size_t i = 0; i < m->n_in; i++) {
    TRY(bind_tensor(&m->in[i], &cfg->inputs[i], g, 1, e));
#if INFERD_HAVE_CUDA
    m->in[i].takes_device = eng_cuda_input_takes_device(g, m->in[i].graph_index);
#endif
  }
  for (size_t i = 0; i < m->n_out; i++) {
    TRY(bind_tensor(&m->out[i], &cfg->outputs[i], g, 0, e));
  }
  for (size_t gi = 0; gi < m->n_graph_in; gi++) {
    m->graph_in_to_cfg[gi] = -1;
    for (size_t i = 0; i < m->n_in; i++)
      if (m->in[i].graph_index == gi) m->graph_in_to_cfg[gi] = (int)i;
    if (m->graph_in_to_cfg[gi] < 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "model input '%s' is missing from the config",
                     eng_graph_input(g, gi)->name);
  }
  return 0;
}

// --- options, padding, warm sizes, instance placement

// The instances the config asks for: per group, `count` on the CPU, or
// `count` on each listed GPU (every visible one when `gpus` is empty).
// KIND_AUTO has been resolved by the caller (registry) by then.
int eng_model__instance_devices(const eng_model_config *cfg, int n_gpus, int **out, int *n_out, err *e) {
  // summed in 64 bits: counts are int32 each, and a config may ask for 2^30 in several groups (fuzz_rest)
  int64_t want = 0;
  for (size_t i = 0; i < cfg->n_groups; i++) {
    const eng_instance_group *ig = &cfg->groups[i];
    int gpu = ig->kind == ENG_INSTANCE_GPU;
    if (gpu && n_gpus == 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "instance_group '%s': KIND_GPU but no CUDA device is visible",
                     ig->name);
    int64_t per = gpu ? (ig->n_gpus ? (int64_t)ig->n_gpus : n_gpus) : 1;
    want += (int64_t)ig->count * per;  // count < 2^31, and groups and gpus are bounded by the config's bytes
  }
  if (cfg->n_groups == 0) want = 1;
  if (want < 1 || want > 1024)
    return err_set(e, ERR_INVALID_ARGUMENT, "instance_group: %lld instances requested (1..1024)", (long long)want);
  int n = (int)want;
  int *dev = calloc((size_t)n, sizeof *dev);
  if (!dev) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  int k = 0;
  if (cfg->n_groups == 0) dev[k++] = -1;
  for (size_t i = 0; i < cfg->n_groups; i++) {
    const eng_instance_group *ig = &cfg->groups[i];
    if (ig->kind != ENG_INSTANCE_GPU) {
      for (int c = 0; c < ig->count; c++) dev[k++] = -1;
      continue;
    }
    int ng = ig->n_gpus ? (int)ig->n_gpus : n_gpus;
    for (int gi = 0; gi < ng; gi++) {
      int d = ig->n_gpus ? ig->gpus[gi] : gi;
      if (d < 0 || d >= n_gpus) {
        free(dev);
        return err_set(e, ERR_INVALID_ARGUMENT, "instance_group '%s': gpu %d is not visible (%d device(s))",
                       ig->name, d, n_gpus);
      }
      for (int c = 0; c < ig->count; c++) dev[k++] = d;
    }
  }
  *out = dev;
  *n_out = n;
  return 0;
}

// GPU options from the config: parameters { key: "precision" value {
// string_value: "fp32" | "tf32" | "fp16" } }, { key: "layout" value:
// "auto" | "nchw" | "nhwc" } (where convolutions keep activations),
// onnxruntime backend's { key: "cudnn_conv_algo_search" value: "0" (time
// every algorithm) | "1" (heuristic) | "2" (default algorithm, taken here as
// the heuristic's) }; unlike onnxruntime, the heuristic is our default: the
// timed choice measured slower end to end (tests/bench/RESULTS.md), and
// Triton's
// optimization { cuda { graphs: false } } (graphs are on unless a cuda
// block says otherwise), { key: "gemm_autotune" value: "true" | "false" }
// (cuBLASLt's GEMM algorithms timed, plan_cuda.h). Off unless this says true
// or the environment's INFERD_GEMM_AUTOTUNE=1 (the operator's switch for
// every model without the parameter; =0 turns it off even where a model asks):
// timing one new shape takes up to 200 ms on the instance, and under dynamic
// batching every new batch size is a new GEMM shape, so a model whose batch
// sizes model_warmup does not cover paid it under load (the 4x4096 MLP at
// 1024 streams: 82.5k -> 7.2k req/s, tests/bench/RESULTS.md, issue 16). INFERD_CUDA_FAULT_AT=N (tests) makes every GPU
// plan's Nth batch fail with a real CUDA launch error.
int eng_model__parse_opts(const eng_model_config *cfg, model_opts *o, err *e) {
  memset(o, 0, sizeof *o);
  int tune = -1;  // the model's gemm_autotune, -1 unset
  int clusters = -1;  // the model's gemm_clusters, -1 unset
  long spin_us = -1;  // the model's instance_spin_us, -1 unset
  static const char *const names[] = {"fp32", "tf32", "fp16"};  // ENG_PREC_* order
  static const char *const layouts[] = {"auto", "nchw", "nhwc"};  // eng_cuda_layout order
  for (size_t i = 0; i < cfg->n_params; i++) {
    const eng_model_param *pe = &cfg->params[i];
    const char *v = pe->value;
    if (strcmp(pe->key, "layout") == 0) {
      int l = -1;
      for (int k = 0; k < 3; k++)
        if (strcasecmp(v, layouts[k]) == 0) l = k;
      if (l < 0) return err_set(e, ERR_INVALID_ARGUMENT, "parameters: layout '%s' is not one of auto, nchw, nhwc", v);
      o->layout = l;
      continue;
    }
    if (strcmp(pe->key, "cudnn_conv_algo_search") == 0) {
      if (strcmp(v, "0") && strcmp(v, "1") && strcmp(v, "2"))
        return err_set(e, ERR_INVALID_ARGUMENT,
                       "parameters: cudnn_conv_algo_search '%s' is not one of 0 (exhaustive), 1 (heuristic), 2 (default)", v);
      o->conv_timed = v[0] == '0';
      continue;
    }
    if (strcmp(pe->key, "instance_spin_us") == 0) {
      char *end = NULL;
      long us = strtol(v, &end, 10);
      if (!*v || *end || us < 0 || us > 10000)
        return err_set(e, ERR_INVALID_ARGUMENT, "parameters: instance_spin_us '%s' is not a count of microseconds 0-10000", v);
      spin_us = us;
      continue;
    }
    if (strcmp(pe->key, "gemm_autotune") == 0) {
      int on = strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0;
      if (!on && strcasecmp(v, "false") != 0 && strcmp(v, "0") != 0)
        return err_set(e, ERR_INVALID_ARGUMENT, "parameters: gemm_autotune '%s' is not one of true, false", v);
      tune = on;
      continue;
    }
    if (strcmp(pe->key, "gemm_clusters") == 0) {
      int on = strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0;
      if (!on && strcasecmp(v, "false") != 0 && strcmp(v, "0") != 0)
        return err_set(e, ERR_INVALID_ARGUMENT, "parameters: gemm_clusters '%s' is not one of true, false", v);
      clusters = on;
      continue;
    }
    if (strcmp(pe->key, "precision") != 0) continue;
    int found = -1;
    for (int k = 0; k < 3; k++)
      if (strcasecmp(v, names[k]) == 0) found = k;
    if (found < 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "parameters: precision '%s' is not one of fp32, tf32, fp16", v);
    o->precision = found;
  }
  o->no_graphs = !cfg->cuda_graphs;
  const char *at = getenv("INFERD_GEMM_AUTOTUNE");
  if (at && strcmp(at, "0") == 0) tune = 0;
  else if (at && strcmp(at, "1") == 0 && tune < 0) tune = 1;
  o->no_gemm_autotune = tune != 1;
  // INFERD_GEMM_CLUSTERS=0: the operator's switch for a GPU time-sliced with other processes (cuda_gemm.h)
  const char *gc = getenv("INFERD_GEMM_CLUSTERS");
  if (clusters < 0 && gc && strcmp(gc, "0") == 0) clusters = 0;
  o->no_gemm_clusters = clusters == 0;
  const char *sp = getenv("INFERD_INSTANCE_SPIN_US");
  if (spin_us < 0 && sp && *sp) spin_us = strtol(sp, NULL, 10);
  o->spin_us = spin_us > 0 && spin_us <= 10000 ? spin_us : 0;
  const char *nu = getenv("INFERD_NUMA");
  if (nu && strcmp(nu, "0") == 0) o->no_numa = 1;
  // INFERD_CPU_FAULT_FATAL_AT=N (tests): the Nth batch of each model's
  // first instance (when on the CPU) fails as a sticky CUDA error fails a GPU
  // instance (it cannot be recreated, its "device" poisoned), so the path
  // from there (not ready, not live, fast UNAVAILABLE, no batches for a
  // failed instance beside live ones) is tested on machines without a GPU
  const char *ff = getenv("INFERD_CPU_FAULT_FATAL_AT");
  if (ff && *ff) o->cpu_fatal_at = strtoull(ff, NULL, 10);
  const char *f = getenv("INFERD_CUDA_FAULT_AT");
  if (f && *f) o->fault_at = strtoull(f, NULL, 10);
  return 0;
}

// pad_to_longest against the config's tensors as the client sees them.
int eng_model__bind_padding(eng_model *m, const eng_model_config *cfg, err *e) {
  eng_io *in = calloc(m->n_in + 1, sizeof *in), *out = calloc(m->n_out + 1, sizeof *out);
  int rc = in && out ? 0 : err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  for (size_t i = 0; rc == 0 && i < m->n_in; i++) in[i] = m->in[i].client;
  for (size_t i = 0; rc == 0 && i < m->n_out; i++) out[i] = m->out[i].client;
  if (rc == 0) rc = eng_pad_parse(cfg, in, m->n_in, out, m->n_out, &m->pad, e);
  free(in);
  free(out);
  return rc;
}

// The batch sizes every instance prepares at load whatever the budget
// (model_prepare.c adds more within it): 1, the preferred sizes and the
// largest; and the tests' hooks.
int eng_model__warm_sizes(eng_model *m, const eng_model_config *cfg, err *e) {
  size_t np = cfg->batching.on ? cfg->batching.n_preferred : 0;
  m->warm = calloc(np + 2, sizeof *m->warm);
  if (!m->warm) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  m->warm[m->n_warm++] = 1;
  for (size_t i = 0; i < np; i++) {
    int b = cfg->batching.preferred[i];
    int dup = 0;
    for (size_t k = 0; k < m->n_warm; k++) dup |= m->warm[k] == b;
    if (!dup) m->warm[m->n_warm++] = b;
  }
  if (m->max_batch > 1) {
    int dup = 0;
    for (size_t k = 0; k < m->n_warm; k++) dup |= m->warm[k] == m->max_batch;
    if (!dup) m->warm[m->n_warm++] = m->max_batch;
  }
  // the tests' hooks (model_prepare.c): INFERD_PREPARE_SIZES=1,4,8 prepares
  // exactly those sizes, INFERD_PREPARE_FAKE_MS=N counts N ms against the
  // budget per size; either has CPU instances prepare and pad as GPU ones do
  const char *hs = getenv("INFERD_PREPARE_SIZES");
  if (hs && *hs && m->max_batch > 0) {  // a model without a batch dimension has one size
    if (eng_bsizes_parse(hs, m->max_batch, &m->hook_sizes, &m->n_hook_sizes, e) != 0)
      return err_prefix(e, "INFERD_PREPARE_SIZES: ");
    m->cpu_prepare = 1;
  }
  const char *fk = getenv("INFERD_PREPARE_FAKE_MS");
  if (fk && *fk) {
    char *end = NULL;
    long ms = strtol(fk, &end, 10);
    if (*end || ms < 1 || ms > 3600000)
      return err_set(e, ERR_INVALID_ARGUMENT, "INFERD_PREPARE_FAKE_MS '%s' is not a count of milliseconds 1-3600000", fk);
    m->fake_ns = (int64_t)ms * 1000000;
    m->cpu_prepare = 1;
  }
  return 0;
}
