// config.c: Triton-style auto-completion and validation of a model config
// against the ONNX graph's declared inputs and outputs, and the switches the
// config sets for the graph's load-time passes. Everything allocated
// here follows protobuf-c's unpack layout, so the config stays freeable with
// protobuf_c_message_free_unpacked after any partial failure.
#include "engine/repo/config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/graph/graph.h"

// --- allocation helpers

Inference__ModelConfig *config_new(const char *name) {
  Inference__ModelConfig *c = malloc(sizeof *c);
  if (!c) return NULL;
  inference__model_config__init(c);
  if (name && name[0]) {
    char *s = strdup(name);
    if (!s) {
      free(c);
      return NULL;
    }
    c->name = s;
  }
  return c;
}

void config_free(Inference__ModelConfig *cfg) {
  if (cfg) protobuf_c_message_free_unpacked(&cfg->base, NULL);
}

static int oom(err *e) { return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory completing the model config"); }

static int is_empty(const char *s) { return !s || !s[0]; }

// Replaces a string field, never freeing protobuf-c's static empty default.
static int set_str(char **field, const char *v, err *e) {
  char *s = strdup(v);
  if (!s) return oom(e);
  if (*field && *field != protobuf_c_empty_string) free(*field);
  *field = s;
  return 0;
}

static int set_dims(int64_t **dims, size_t *n_dims, const eng_io *g, int skip, err *e) {
  size_t n = g->ndims > skip ? (size_t)(g->ndims - skip) : 0;
  if (n == 0) return 0;
  int64_t *d = malloc(n * sizeof *d);
  if (!d) return oom(e);
  memcpy(d, g->dims + skip, n * sizeof *d);
  *dims = d;
  *n_dims = n;
  return 0;
}

// --- completion

static const eng_io *find_io(const eng_io *io, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(io[i].name, name) == 0) return &io[i];
  return NULL;
}

static int all_dynamic_first(const eng_io *io, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (io[i].ndims < 1 || io[i].dims[0] != -1) return 0;
  return 1;
}

static size_t cfg_rank(size_t n_dims, const Inference__ModelTensorReshape *reshape) {
  return reshape ? reshape->n_shape : n_dims;
}

// A file config with max_batch_size 0 is taken as batching when every tensor
// it lists leaves out the batch dimension, vacuously so when it lists none.
// Triton's onnxruntime backend sets the default max_batch_size whenever the
// config lacks inputs or outputs (a config.pbtxt holding only instance_group
// batches by 4); when a config lists both it keeps 0, and a config whose
// tensors omit the batch dimension then fails to load: inferd takes it as
// batching instead. A tensor listed with the batch dimension means no
// batching.
static int listed_tensors_omit_batch(const Inference__ModelConfig *c, const eng_io *in, size_t n_in, const eng_io *out,
                                     size_t n_out) {
  for (size_t i = 0; i < c->n_input; i++) {
    const eng_io *g = find_io(in, n_in, c->input[i]->name);
    if (!g || cfg_rank(c->input[i]->n_dims, c->input[i]->reshape) + 1 != (size_t)g->ndims) return 0;
  }
  for (size_t i = 0; i < c->n_output; i++) {
    const eng_io *g = find_io(out, n_out, c->output[i]->name);
    if (!g || cfg_rank(c->output[i]->n_dims, c->output[i]->reshape) + 1 != (size_t)g->ndims) return 0;
  }
  return 1;
}

// A name sequence_batching gives a model input (control or state input).
static int seq_names_input(const Inference__ModelSequenceBatching *sb, const char *name) {
  for (size_t k = 0; sb && k < sb->n_control_input; k++)
    if (sb->control_input[k]->name && strcmp(sb->control_input[k]->name, name) == 0) return 1;
  for (size_t k = 0; sb && k < sb->n_state; k++)
    if (sb->state[k]->input_name && strcmp(sb->state[k]->input_name, name) == 0) return 1;
  return 0;
}

static int seq_names_output(const Inference__ModelSequenceBatching *sb, const char *name) {
  for (size_t k = 0; sb && k < sb->n_state; k++)
    if (sb->state[k]->output_name && strcmp(sb->state[k]->output_name, name) == 0) return 1;
  return 0;
}

static int fill_inputs(Inference__ModelConfig *c, const eng_io *in, size_t n_in, err *e) {
  c->input = calloc(n_in, sizeof *c->input);
  if (!c->input) return oom(e);
  int skip = c->max_batch_size > 0;
  const Inference__ModelSequenceBatching *sb =
      c->scheduling_choice_case == INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_SEQUENCE_BATCHING ? c->sequence_batching
                                                                                                 : NULL;
  for (size_t i = 0; i < n_in; i++) {
    // sequence_batching's control and state inputs are the server's to fill, not the client's
    if (seq_names_input(sb, in[i].name)) continue;
    Inference__ModelInput *t = malloc(sizeof *t);
    if (!t) return oom(e);
    inference__model_input__init(t);
    c->input[c->n_input++] = t;  // counted now so a failure below still frees it
    TRY(set_str(&t->name, in[i].name, e));
    t->data_type = (Inference__DataType)in[i].dt;
    TRY(set_dims(&t->dims, &t->n_dims, &in[i], skip, e));
  }
  return 0;
}

static int fill_outputs(Inference__ModelConfig *c, const eng_io *out, size_t n_out, err *e) {
  c->output = calloc(n_out, sizeof *c->output);
  if (!c->output) return oom(e);
  int skip = c->max_batch_size > 0;
  const Inference__ModelSequenceBatching *sb =
      c->scheduling_choice_case == INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_SEQUENCE_BATCHING ? c->sequence_batching
                                                                                                 : NULL;
  for (size_t i = 0; i < n_out; i++) {
    if (seq_names_output(sb, out[i].name)) continue;  // implicit state: the server keeps it
    Inference__ModelOutput *t = malloc(sizeof *t);
    if (!t) return oom(e);
    inference__model_output__init(t);
    c->output[c->n_output++] = t;
    TRY(set_str(&t->name, out[i].name, e));
    t->data_type = (Inference__DataType)out[i].dt;
    TRY(set_dims(&t->dims, &t->n_dims, &out[i], skip, e));
  }
  return 0;
}

// Triton's config normalisation: dynamic batching without preferred sizes
// prefers max_batch_size (what the batcher does then anyway; the served
// config shows it, as Triton's does).
static int complete_preferred_sizes(Inference__ModelConfig *c, err *e) {
  Inference__ModelDynamicBatching *db = c->dynamic_batching;
  if (c->scheduling_choice_case != INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_DYNAMIC_BATCHING || !db ||
      db->n_preferred_batch_size || c->max_batch_size <= 0)
    return 0;
  db->preferred_batch_size = malloc(sizeof *db->preferred_batch_size);
  if (!db->preferred_batch_size) return oom(e);
  db->preferred_batch_size[0] = c->max_batch_size;
  db->n_preferred_batch_size = 1;
  return 0;
}

static int complete_instance_groups(Inference__ModelConfig *c, err *e) {
  if (c->n_instance_group == 0) {
    c->instance_group = calloc(1, sizeof *c->instance_group);
    if (!c->instance_group) return oom(e);
    Inference__ModelInstanceGroup *g = malloc(sizeof *g);
    if (!g) return oom(e);
    inference__model_instance_group__init(g);
    c->instance_group[c->n_instance_group++] = g;
    g->count = 1;
    g->kind = INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_AUTO;
  }
  for (size_t i = 0; i < c->n_instance_group; i++) {
    Inference__ModelInstanceGroup *g = c->instance_group[i];
    // KIND_AUTO without `gpus` depends on the devices visible at load:
    // config_resolve_kinds settles it.
    if (g->kind == INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_AUTO && g->n_gpus)
      g->kind = INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU;
    if (g->count == 0) g->count = 1;
    if (is_empty(g->name)) {
      char name[300];
      snprintf(name, sizeof name, "%s_%zu", is_empty(c->name) ? "model" : c->name, i);
      TRY(set_str(&g->name, name, e));
    }
  }
  return 0;
}

static int complete_version_policy(Inference__ModelConfig *c, err *e) {
  if (!c->version_policy) {
    Inference__ModelVersionPolicy *vp = malloc(sizeof *vp);
    if (!vp) return oom(e);
    inference__model_version_policy__init(vp);
    c->version_policy = vp;
  }
  Inference__ModelVersionPolicy *vp = c->version_policy;
  if (vp->policy_choice_case != INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE__NOT_SET) return 0;
  Inference__ModelVersionPolicy__Latest *l = malloc(sizeof *l);
  if (!l) return oom(e);
  inference__model_version_policy__latest__init(l);
  l->num_versions = 1;
  vp->latest = l;
  vp->policy_choice_case = INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_LATEST;
  return 0;
}

int config_complete(Inference__ModelConfig *cfg, int config_from_file, const eng_io *in, size_t n_in,
                    const eng_io *out, size_t n_out, int default_max_batch_size, err *e) {
  if (!cfg || (n_in && !in) || (n_out && !out))
    return err_set(e, ERR_INVALID_ARGUMENT, "config_complete: bad arguments");
  if (cfg->max_batch_size == 0 && default_max_batch_size > 0 && n_in + n_out > 0 && all_dynamic_first(in, n_in) &&
      all_dynamic_first(out, n_out) && (!config_from_file || listed_tensors_omit_batch(cfg, in, n_in, out, n_out)))
    cfg->max_batch_size = default_max_batch_size;
  int auto_complete = default_max_batch_size != CONFIG_NO_AUTO_COMPLETE;
  if (auto_complete && cfg->n_input == 0 && n_in > 0) TRY(fill_inputs(cfg, in, n_in, e));
  if (auto_complete && cfg->n_output == 0 && n_out > 0) TRY(fill_outputs(cfg, out, n_out, e));
  if (auto_complete && cfg->max_batch_size > 1 &&
      cfg->scheduling_choice_case == INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE__NOT_SET) {
    Inference__ModelDynamicBatching *db = malloc(sizeof *db);
    if (!db) return oom(e);
    inference__model_dynamic_batching__init(db);
    cfg->dynamic_batching = db;
    cfg->scheduling_choice_case = INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_DYNAMIC_BATCHING;
  }
  TRY(complete_preferred_sizes(cfg, e));
  if (is_empty(cfg->platform) && is_empty(cfg->backend)) TRY(set_str(&cfg->platform, CONFIG_PLATFORM_ONNX, e));
  TRY(complete_instance_groups(cfg, e));
  TRY(complete_version_policy(cfg, e));
  return 0;
}

// A STRING input or output: the GPU plan cannot carry it (engine/model.c
// places such a model's KIND_GPU instances on the host), so KIND_AUTO picks the CPU.
static int has_string_io(const Inference__ModelConfig *c) {
  for (size_t i = 0; i < c->n_input; i++)
    if (c->input[i]->data_type == INFERENCE__DATA_TYPE__TYPE_STRING) return 1;
  for (size_t i = 0; i < c->n_output; i++)
    if (c->output[i]->data_type == INFERENCE__DATA_TYPE__TYPE_STRING) return 1;
  return 0;
}

void config_resolve_kinds(Inference__ModelConfig *c, int n_gpus, size_t n_cpu_only_nodes) {
  int gpu = n_gpus > 0 && !has_string_io(c) && n_cpu_only_nodes == 0;
  for (size_t i = 0; i < c->n_instance_group; i++)
    if (c->instance_group[i]->kind == INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_AUTO)
      c->instance_group[i]->kind =
          gpu ? INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU : INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_CPU;
}

// --- validation

static void fmt_dims(char *buf, size_t cap, size_t n, const int64_t *d, int lead_batch) {
  size_t k = 0;
  k += (size_t)snprintf(buf + k, cap - k, "[");
  if (lead_batch && k < cap) k += (size_t)snprintf(buf + k, cap - k, n ? "-1," : "-1");
  for (size_t i = 0; i < n && k < cap; i++) k += (size_t)snprintf(buf + k, cap - k, i ? ",%" PRId64 : "%" PRId64, d[i]);
  if (k < cap) snprintf(buf + k, cap - k, "]");
}

static int check_dim_values(const char *kind, const char *name, const char *what, size_t n, const int64_t *d, err *e) {
  if (n > ENG_MAX_DIMS)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s '%s': %s has %zu dimensions, at most %d are supported", kind, name,
                   what, n, ENG_MAX_DIMS);
  for (size_t i = 0; i < n; i++)
    if (d[i] != -1 && d[i] <= 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "%s '%s': %s[%zu] = %" PRId64 " is invalid (must be -1 or > 0)", kind,
                     name, what, i, d[i]);
  return 0;
}

// A full batch of one tensor, its variable (-1) dims counted as 1, must fit
// in CONFIG_MAX_TENSOR_BYTES: the scheduler sizes a CPU executor's staging
// for a full batch of each fixed-shape input at load, and the products of
// dims (known_numel, the engine's numel) must not overflow.
static int check_batch_bytes(const char *kind, const char *name, const char *what, int data_type, size_t n,
                             const int64_t *d, int mbs, err *e) {
  size_t esz = dtype_size((dtype)data_type);
  uint64_t bytes = (uint64_t)(mbs > 0 ? mbs : 1) * (esz ? esz : 1);
  int over = bytes > CONFIG_MAX_TENSOR_BYTES;
  for (size_t i = 0; i < n && !over; i++)
    over = d[i] > 0 && (__builtin_mul_overflow(bytes, (uint64_t)d[i], &bytes) || bytes > CONFIG_MAX_TENSOR_BYTES);
  if (over)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "%s '%s': a full batch (max_batch_size %d) of its %s takes more than the %llu bytes (1 TiB) "
                   "a tensor may",
                   kind, name, mbs, what, (unsigned long long)CONFIG_MAX_TENSOR_BYTES);
  return 0;
}

static int known_numel(size_t n, const int64_t *d, int64_t *numel) {
  int64_t x = 1;
  for (size_t i = 0; i < n; i++) {
    if (d[i] < 0) return 0;
    x *= d[i];
  }
  *numel = x;
  return 1;
}

static int check_tensor(const char *kind, const char *name, int data_type, size_t n_dims, const int64_t *dims,
                        const Inference__ModelTensorReshape *reshape, int mbs, const eng_io *g, err *e) {
  if (data_type == INFERENCE__DATA_TYPE__TYPE_INVALID)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s '%s': data_type is missing in config (the model's is %s)", kind, name,
                   dtype_wire_name(g->dt));
  if (data_type != (int)g->dt)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s '%s': data_type %s in config does not match the model's %s", kind,
                   name, dtype_config_name((dtype)data_type), dtype_wire_name(g->dt));
  TRY(check_dim_values(kind, name, "dims", n_dims, dims, e));
  if (reshape) TRY(check_dim_values(kind, name, "reshape.shape", reshape->n_shape, reshape->shape, e));
  TRY(check_batch_bytes(kind, name, "dims", data_type, n_dims, dims, mbs, e));
  if (reshape) TRY(check_batch_bytes(kind, name, "reshape.shape", data_type, reshape->n_shape, reshape->shape, mbs, e));
  int batch = mbs > 0;
  // a ValueInfo without a shape (ndims -1) declares nothing to check against:
  // the config's dims stand (and formatting -1 dims would read past g->dims)
  if (g->ndims < 0) return 0;
  char gbuf[160], cbuf[160];
  fmt_dims(gbuf, sizeof gbuf, (size_t)g->ndims, g->dims, 0);
  if (batch && (g->ndims < 1 || g->dims[0] != -1))
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "%s '%s': max_batch_size %d needs a dynamic first (batch) dimension, but the model's shape is %s",
                   kind, name, mbs, gbuf);
  const char *what = reshape ? "reshape.shape" : "dims";
  size_t n = reshape ? reshape->n_shape : n_dims;
  const int64_t *want = reshape ? reshape->shape : dims;
  fmt_dims(cbuf, sizeof cbuf, n, want, batch);
  int match = n + (size_t)batch == (size_t)g->ndims;
  for (size_t i = 0; match && i < n; i++) {
    int64_t gd = g->dims[i + (size_t)batch];
    match = want[i] == -1 || gd == -1 || want[i] == gd;
  }
  if (!match)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s '%s': %s in config (%s%s) does not match the model's shape %s", kind,
                   name, what, batch ? "with the batch dimension: " : "", cbuf, gbuf);
  int64_t a, b;
  if (reshape && known_numel(n_dims, dims, &a) && known_numel(reshape->n_shape, reshape->shape, &b) && a != b)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "%s '%s': reshape.shape has %" PRId64 " elements but dims have %" PRId64, kind, name, b, a);
  return 0;
}

int config_check_supported(const Inference__ModelConfig *c, err *e) {
  char why[sizeof e->msg];
  size_t n = 0;
  why[0] = 0;
  const char *name = is_empty(c->name) ? "?" : c->name;
  int ensemble = !is_empty(c->platform) && strcmp(c->platform, "ensemble") == 0;
  if (!is_empty(c->platform) && strcmp(c->platform, CONFIG_PLATFORM_ONNX) != 0 && !ensemble)
    err_join(why, sizeof why, &n, "platform '%s' is not supported (only '%s' or 'ensemble')", c->platform,
             CONFIG_PLATFORM_ONNX);
  // an ensemble (server/core/ensemble_plan.h) is its platform and its scheduling together
  if (ensemble && c->scheduling_choice_case != INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_ENSEMBLE_SCHEDULING)
    err_join(why, sizeof why, &n, "platform 'ensemble' needs ensemble_scheduling (model '%s')", name);
  // the built-in repeat backend (server/core/repeat.h): Triton's example of a decoupled model
  int repeat = !is_empty(c->backend) && strcmp(c->backend, CONFIG_BACKEND_REPEAT) == 0;
  // the built-in generative backend (server/core/llm_cfg.c checks the rest of its config)
  int llm = !is_empty(c->backend) && strcmp(c->backend, CONFIG_BACKEND_LLM) == 0;
  if (!is_empty(c->backend) && strcmp(c->backend, "onnxruntime") != 0 && strcmp(c->backend, "inferd") != 0 &&
      !repeat && !llm) {
    if (strcmp(c->backend, "python") == 0)
      err_join(why, sizeof why, &n, "backend 'python' is not supported (inferd runs ONNX graphs only)");
    else
      err_join(why, sizeof why, &n,
               "backend '%s' is not supported (only 'onnxruntime', 'inferd', 'repeat' or '" CONFIG_BACKEND_LLM "')",
               c->backend);
  }
  if (repeat && !is_empty(c->platform))
    err_join(why, sizeof why, &n, "backend 'repeat' takes no platform (model '%s' names '%s')", name, c->platform);
  if (c->scheduling_choice_case == INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_ENSEMBLE_SCHEDULING && !ensemble)
    err_join(why, sizeof why, &n, "ensemble_scheduling needs platform 'ensemble' (model '%s')", name);
  // decoupled (several answers per request, ModelStreamInfer only) needs a backend that answers so
  if (c->model_transaction_policy && c->model_transaction_policy->decoupled && !repeat && !llm)
    err_join(why, sizeof why, &n,
             "model_transaction_policy.decoupled is not supported for %s models: they answer every request "
             "exactly once (only the 'repeat' and '" CONFIG_BACKEND_LLM "' backends are decoupled)",
             ensemble ? "ensemble" : "ONNX");
  if (!n) return 0;
  return err_set(e, ERR_INVALID_ARGUMENT, "%s", why);
}

// Implicit state: an input and an output of the model that the config does
// not list, of fixed dims, starting from zeros.
static int check_states(const Inference__ModelConfig *c, const Inference__ModelSequenceBatching *sb,
                        const eng_io *in, size_t n_in, const eng_io *out, size_t n_out, err *e) {
  for (size_t i = 0; i < sb->n_state; i++) {
    const Inference__ModelSequenceBatching__State *st = sb->state[i];
    if (is_empty(st->input_name) || is_empty(st->output_name))
      return err_set(e, ERR_INVALID_ARGUMENT, "sequence_batching.state[%zu]: input_name and output_name are required", i);
    for (size_t k = 0; k < i; k++)
      if (strcmp(sb->state[k]->input_name, st->input_name) == 0 || strcmp(sb->state[k]->output_name, st->output_name) == 0)
        return err_set(e, ERR_INVALID_ARGUMENT, "sequence_batching.state '%s': listed twice", st->input_name);
    for (size_t k = 0; k < c->n_input; k++)
      if (strcmp(c->input[k]->name, st->input_name) == 0)
        return err_set(e, ERR_INVALID_ARGUMENT,
                       "sequence_batching.state input '%s' is also a config input (the server feeds it)", st->input_name);
    for (size_t k = 0; k < c->n_output; k++)
      if (strcmp(c->output[k]->name, st->output_name) == 0)
        return err_set(e, ERR_INVALID_ARGUMENT,
                       "sequence_batching.state output '%s' is also a config output (the server keeps it)",
                       st->output_name);
    for (size_t k = 0; k < sb->n_control_input; k++)
      if (strcmp(sb->control_input[k]->name, st->input_name) == 0)
        return err_set(e, ERR_INVALID_ARGUMENT, "sequence_batching.state input '%s' is also a control input",
                       st->input_name);
    if (st->data_type == INFERENCE__DATA_TYPE__TYPE_STRING || st->data_type == INFERENCE__DATA_TYPE__TYPE_INVALID)
      return err_set(e, ERR_INVALID_ARGUMENT, "sequence_batching.state '%s': data_type must be a numeric type",
                     st->input_name);
    for (size_t d = 0; d < st->n_dims; d++)
      if (st->dims[d] <= 0)
        return err_set(e, ERR_INVALID_ARGUMENT,
                       "sequence_batching.state '%s': dims must be fixed and positive (variable state dims are not "
                       "supported)",
                       st->input_name);
    if (st->use_growable_memory)
      return err_set(e, ERR_INVALID_ARGUMENT, "sequence_batching.state '%s': use_growable_memory is not supported",
                     st->input_name);
    for (size_t k = 0; k < st->n_initial_state; k++)
      if (st->initial_state[k]->state_data_case != INFERENCE__MODEL_SEQUENCE_BATCHING__INITIAL_STATE__STATE_DATA_ZERO_DATA)
        return err_set(e, ERR_INVALID_ARGUMENT,
                       "sequence_batching.state '%s': only a zero_data initial_state is supported (data_file is not)",
                       st->input_name);
    const eng_io *gi = find_io(in, n_in, st->input_name), *go = find_io(out, n_out, st->output_name);
    if (!gi)
      return err_set(e, ERR_INVALID_ARGUMENT, "sequence_batching.state input '%s' is not an input of the model",
                     st->input_name);
    if (!go)
      return err_set(e, ERR_INVALID_ARGUMENT, "sequence_batching.state output '%s' is not an output of the model",
                     st->output_name);
    TRY(check_tensor("state input", st->input_name, (int)st->data_type, st->n_dims, st->dims, NULL, c->max_batch_size,
                     gi, e));
    TRY(check_tensor("state output", st->output_name, (int)st->data_type, st->n_dims, st->dims, NULL,
                     c->max_batch_size, go, e));
  }
  return 0;
}

// sequence_batching (Triton's stateful models): the strategy's numbers, and
// each control input: a model input the config does not list (the server
// fills it), with exactly one control, of a kind not given twice, whose
// values say its type (int32/fp32/bool false_true pairs, CORRID's data_type).
static int check_sequence_batching(const Inference__ModelConfig *c, const eng_io *in, size_t n_in,
                                   const eng_io *out, size_t n_out, err *e) {
  if (c->scheduling_choice_case != INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_SEQUENCE_BATCHING ||
      !c->sequence_batching)
    return 0;
  const Inference__ModelSequenceBatching *sb = c->sequence_batching;
  if (sb->iterative_sequence)
    return err_set(e, ERR_INVALID_ARGUMENT, "sequence_batching.iterative_sequence is not supported");
  if (sb->max_sequence_idle_microseconds > CONFIG_MAX_QUEUE_DELAY_US)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "sequence_batching.max_sequence_idle_microseconds %" PRIu64 " is too large: inferd takes at most "
                   "%" PRIu64 " (one hour)",
                   sb->max_sequence_idle_microseconds, CONFIG_MAX_QUEUE_DELAY_US);
  if (sb->strategy_choice_case == INFERENCE__MODEL_SEQUENCE_BATCHING__STRATEGY_CHOICE_OLDEST && sb->oldest) {
    const Inference__ModelSequenceBatching__StrategyOldest *o = sb->oldest;
    if (o->max_candidate_sequences < 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "sequence_batching.oldest.max_candidate_sequences %d must be >= 0",
                     (int)o->max_candidate_sequences);
    if (o->max_queue_delay_microseconds > CONFIG_MAX_QUEUE_DELAY_US)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "sequence_batching.oldest.max_queue_delay_microseconds %" PRIu64 " is too large: inferd takes "
                     "at most %" PRIu64 " (one hour)",
                     o->max_queue_delay_microseconds, CONFIG_MAX_QUEUE_DELAY_US);
    for (size_t i = 0; i < o->n_preferred_batch_size; i++)
      if (o->preferred_batch_size[i] <= 0 || o->preferred_batch_size[i] > (c->max_batch_size > 0 ? c->max_batch_size : 1))
        return err_set(e, ERR_INVALID_ARGUMENT,
                       "sequence_batching.oldest.preferred_batch_size %d must be in 1..max_batch_size (%d)",
                       (int)o->preferred_batch_size[i], (int)c->max_batch_size);
    if (o->preserve_ordering)
      return err_set(e, ERR_INVALID_ARGUMENT, "sequence_batching.oldest.preserve_ordering is not supported");
  }
  if (sb->strategy_choice_case == INFERENCE__MODEL_SEQUENCE_BATCHING__STRATEGY_CHOICE_DIRECT && sb->direct) {
    const Inference__ModelSequenceBatching__StrategyDirect *d = sb->direct;
    if (d->max_queue_delay_microseconds > CONFIG_MAX_QUEUE_DELAY_US)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "sequence_batching.direct.max_queue_delay_microseconds %" PRIu64 " is too large: inferd takes "
                     "at most %" PRIu64 " (one hour)",
                     d->max_queue_delay_microseconds, CONFIG_MAX_QUEUE_DELAY_US);
    if (!(d->minimum_slot_utilization >= 0 && d->minimum_slot_utilization <= 1))
      return err_set(e, ERR_INVALID_ARGUMENT, "sequence_batching.direct.minimum_slot_utilization must be in 0..1");
  }
  int kinds = 0;
  for (size_t i = 0; i < sb->n_control_input; i++) {
    const Inference__ModelSequenceBatching__ControlInput *ci = sb->control_input[i];
    if (is_empty(ci->name)) return err_set(e, ERR_INVALID_ARGUMENT, "sequence_batching.control_input[%zu]: name is missing", i);
    for (size_t k = 0; k < i; k++)
      if (strcmp(sb->control_input[k]->name, ci->name) == 0)
        return err_set(e, ERR_INVALID_ARGUMENT, "sequence_batching control input '%s' is listed twice", ci->name);
    for (size_t k = 0; k < c->n_input; k++)
      if (strcmp(c->input[k]->name, ci->name) == 0)
        return err_set(e, ERR_INVALID_ARGUMENT,
                       "sequence_batching control input '%s' is also a config input (the server fills it, the "
                       "client never sends it)",
                       ci->name);
    if (ci->n_control != 1)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "sequence_batching control input '%s' must have exactly one control (has %zu)", ci->name,
                     ci->n_control);
    const Inference__ModelSequenceBatching__Control *k = ci->control[0];
    if ((unsigned)k->kind > INFERENCE__MODEL_SEQUENCE_BATCHING__CONTROL__KIND__CONTROL_SEQUENCE_CORRID)
      return err_set(e, ERR_INVALID_ARGUMENT, "sequence_batching control input '%s': unknown kind %d", ci->name,
                     (int)k->kind);
    if (kinds & (1 << k->kind))
      return err_set(e, ERR_INVALID_ARGUMENT, "sequence_batching: more than one control of kind %s",
                     protobuf_c_enum_descriptor_get_value(
                         &inference__model_sequence_batching__control__kind__descriptor, k->kind)->name);
    kinds |= 1 << k->kind;
    int n_set = (k->n_int32_false_true > 0) + (k->n_fp32_false_true > 0) + (k->n_bool_false_true > 0);
    Inference__DataType dt;
    if (k->kind == INFERENCE__MODEL_SEQUENCE_BATCHING__CONTROL__KIND__CONTROL_SEQUENCE_CORRID) {
      if (n_set)
        return err_set(e, ERR_INVALID_ARGUMENT,
                       "sequence_batching control input '%s': CONTROL_SEQUENCE_CORRID takes data_type, not "
                       "*_false_true",
                       ci->name);
      dt = k->data_type;
      if (dt != INFERENCE__DATA_TYPE__TYPE_UINT64 && dt != INFERENCE__DATA_TYPE__TYPE_INT64 &&
          dt != INFERENCE__DATA_TYPE__TYPE_UINT32 && dt != INFERENCE__DATA_TYPE__TYPE_INT32)
        return err_set(e, ERR_INVALID_ARGUMENT,
                       "sequence_batching control input '%s': CONTROL_SEQUENCE_CORRID data_type must be TYPE_UINT64, "
                       "TYPE_INT64, TYPE_UINT32 or TYPE_INT32 (TYPE_STRING is not supported)",
                       ci->name);
    } else {
      if (n_set != 1 || (k->n_int32_false_true && k->n_int32_false_true != 2) ||
          (k->n_fp32_false_true && k->n_fp32_false_true != 2) || (k->n_bool_false_true && k->n_bool_false_true != 2))
        return err_set(e, ERR_INVALID_ARGUMENT,
                       "sequence_batching control input '%s' must give exactly one of int32_false_true, "
                       "fp32_false_true, bool_false_true, with two values",
                       ci->name);
      dt = k->n_int32_false_true ? INFERENCE__DATA_TYPE__TYPE_INT32
         : k->n_fp32_false_true  ? INFERENCE__DATA_TYPE__TYPE_FP32
                                 : INFERENCE__DATA_TYPE__TYPE_BOOL;
    }
    const eng_io *g = find_io(in, n_in, ci->name);
    if (!g)
      return err_set(e, ERR_INVALID_ARGUMENT, "sequence_batching control input '%s' is not an input of the model",
                     ci->name);
    static const int64_t one[1] = {1};
    TRY(check_tensor("control input", ci->name, (int)dt, 1, one, NULL, c->max_batch_size, g, e));
  }
  return check_states(c, sb, in, n_in, out, n_out, e);
}

static int check_dynamic_batching(const Inference__ModelConfig *c, err *e) {
  const Inference__ModelDynamicBatching *db = c->dynamic_batching;
  if (c->scheduling_choice_case != INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_DYNAMIC_BATCHING || !db) return 0;
  if (db->max_queue_delay_microseconds > CONFIG_MAX_QUEUE_DELAY_US)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "dynamic_batching.max_queue_delay_microseconds %" PRIu64 " is too large: inferd takes at most %" PRIu64
                   " (one hour)",
                   db->max_queue_delay_microseconds, CONFIG_MAX_QUEUE_DELAY_US);
  for (size_t i = 0; i < db->n_preferred_batch_size; i++) {
    int32_t p = db->preferred_batch_size[i];
    if (p <= 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "dynamic_batching.preferred_batch_size %d must be > 0", (int)p);
    if (p > c->max_batch_size)
      return err_set(e, ERR_INVALID_ARGUMENT, "dynamic_batching.preferred_batch_size %d exceeds max_batch_size %d",
                     (int)p, (int)c->max_batch_size);
  }
  uint64_t levels = db->priority_levels;
  if (levels == 0) {
    if (db->default_priority_level != 0)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "dynamic_batching.default_priority_level %" PRIu64 " is set but priority_levels is 0",
                     db->default_priority_level);
    if (db->n_priority_queue_policy)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "dynamic_batching.priority_queue_policy is set but priority_levels is 0");
    return 0;
  }
  if (db->default_priority_level < 1 || db->default_priority_level > levels)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "dynamic_batching.default_priority_level %" PRIu64 " must be in 1..priority_levels (%" PRIu64 ")",
                   db->default_priority_level, levels);
  for (size_t i = 0; i < db->n_priority_queue_policy; i++) {
    uint64_t k = db->priority_queue_policy[i]->key;
    if (k < 1 || k > levels)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "dynamic_batching.priority_queue_policy key %" PRIu64 " must be in 1..priority_levels (%" PRIu64
                     ")",
                     k, levels);
  }
  return 0;
}

int config_latency_target_us(const Inference__ModelConfig *c, int64_t *us, err *e) {
  *us = 0;
  const char *v = NULL;
  for (size_t i = 0; i < c->n_parameters; i++) {
    const Inference__ModelConfig__ParametersEntry *pe = c->parameters[i];
    if (pe->key && strcmp(pe->key, CONFIG_LATENCY_TARGET_KEY) == 0)
      v = pe->value && pe->value->string_value ? pe->value->string_value : "";
  }
  if (!v) return 0;
  char *end = NULL;
  double ms = strtod(v, &end);
  // the upper bound is max_queue_delay's (one hour); below 50 us the
  // server's own overheads are the latency, and no batch could be chosen
  if (!*v || *end || !(ms >= 0.05 && ms <= 3600000.0))
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "parameters: " CONFIG_LATENCY_TARGET_KEY " '%s' is not a number of milliseconds from 0.05 to 3600000",
                   v);
  if (c->scheduling_choice_case != INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_DYNAMIC_BATCHING || !c->dynamic_batching)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "parameters: " CONFIG_LATENCY_TARGET_KEY " '%s' needs dynamic_batching (it chooses the batches' "
                   "sizes and waits)",
                   v);
  if (c->max_batch_size < 2)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "parameters: " CONFIG_LATENCY_TARGET_KEY " '%s' needs max_batch_size > 1 (got %d: every batch "
                   "is one request)",
                   v, (int)c->max_batch_size);
  *us = (int64_t)(ms * 1000.0 + 0.5);
  return 0;
}

static int check_instances_and_versions(const Inference__ModelConfig *c, err *e) {
  for (size_t i = 0; i < c->n_instance_group; i++) {
    const Inference__ModelInstanceGroup *g = c->instance_group[i];
    if (g->count < 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "instance_group[%zu].count %d must be >= 0", i, (int)g->count);
    if ((unsigned)g->kind > INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_MODEL)
      return err_set(e, ERR_INVALID_ARGUMENT, "instance_group[%zu].kind %d is not a valid kind", i, (int)g->kind);
    for (size_t k = 0; k < g->n_gpus; k++)
      if (g->gpus[k] < 0)
        return err_set(e, ERR_INVALID_ARGUMENT, "instance_group[%zu].gpus has invalid device %d", i, (int)g->gpus[k]);
  }
  const Inference__ModelVersionPolicy *vp = c->version_policy;
  if (vp && vp->policy_choice_case == INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_LATEST && vp->latest &&
      vp->latest->num_versions == 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "version_policy.latest.num_versions must be > 0");
  return 0;
}

int config_validate(const Inference__ModelConfig *cfg, const eng_io *in, size_t n_in, const eng_io *out,
                    size_t n_out, err *e) {
  if (!cfg || (n_in && !in) || (n_out && !out))
    return err_set(e, ERR_INVALID_ARGUMENT, "config_validate: bad arguments");
  const Inference__ModelConfig *c = cfg;
  TRY(config_check_supported(c, e));
  if (c->max_batch_size < 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "max_batch_size must be >= 0, got %d", (int)c->max_batch_size);
  for (size_t i = 0; i < c->n_input; i++) {
    const Inference__ModelInput *t = c->input[i];
    if (is_empty(t->name)) return err_set(e, ERR_INVALID_ARGUMENT, "input[%zu]: name is missing", i);
    for (size_t k = 0; k < i; k++)
      if (strcmp(c->input[k]->name, t->name) == 0)
        return err_set(e, ERR_INVALID_ARGUMENT, "input '%s' is listed twice in the config", t->name);
    const eng_io *g = find_io(in, n_in, t->name);
    if (!g) return err_set(e, ERR_INVALID_ARGUMENT, "input '%s' in config is not an input of the model", t->name);
    TRY(check_tensor("input", t->name, (int)t->data_type, t->n_dims, t->dims, t->reshape, c->max_batch_size, g, e));
    if (t->allow_ragged_batch)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "input '%s': allow_ragged_batch is not supported (Triton's ragged batching hands the model the "
                     "requests concatenated into one 1-D tensor, described by batch_input); to batch requests of "
                     "different sequence lengths, pad them: parameters { key: \"pad_to_longest\" ... }",
                     t->name);
  }
  if (c->n_batch_input || c->n_batch_output)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "%s is not supported (Triton's ragged batching); to batch requests of different sequence "
                   "lengths, pad them: parameters { key: \"pad_to_longest\" ... }",
                   c->n_batch_input ? "batch_input" : "batch_output");
  TRY(check_sequence_batching(c, in, n_in, out, n_out, e));
  const Inference__ModelSequenceBatching *sb =
      c->scheduling_choice_case == INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_SEQUENCE_BATCHING ? c->sequence_batching
                                                                                                 : NULL;
  for (size_t i = 0; i < n_in; i++) {
    int listed = 0;
    for (size_t k = 0; k < c->n_input && !listed; k++) listed = strcmp(c->input[k]->name, in[i].name) == 0;
    if (!listed) listed = seq_names_input(sb, in[i].name);
    if (!listed)
      return err_set(e, ERR_INVALID_ARGUMENT, "model input '%s' is missing from the config's inputs", in[i].name);
  }
  if (c->n_output == 0) return err_set(e, ERR_INVALID_ARGUMENT, "the config lists no outputs");
  for (size_t i = 0; i < c->n_output; i++) {
    const Inference__ModelOutput *t = c->output[i];
    if (is_empty(t->name)) return err_set(e, ERR_INVALID_ARGUMENT, "output[%zu]: name is missing", i);
    for (size_t k = 0; k < i; k++)
      if (strcmp(c->output[k]->name, t->name) == 0)
        return err_set(e, ERR_INVALID_ARGUMENT, "output '%s' is listed twice in the config", t->name);
    const eng_io *g = find_io(out, n_out, t->name);
    if (!g) return err_set(e, ERR_INVALID_ARGUMENT, "output '%s' in config is not an output of the model", t->name);
    TRY(check_tensor("output", t->name, (int)t->data_type, t->n_dims, t->dims, t->reshape, c->max_batch_size, g, e));
  }
  TRY(check_dynamic_batching(c, e));
  int64_t target_us;
  TRY(config_latency_target_us(c, &target_us, e));
  TRY(check_instances_and_versions(c, e));
  return 0;
}

int config_check_limits(const Inference__ModelConfig *cfg, const config_limits *lim, err *e) {
  if (cfg->max_batch_size > lim->max_batch_size)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "max_batch_size %d exceeds this server's limit of %d (--model-max-batch-size)",
                   (int)cfg->max_batch_size, lim->max_batch_size);
  const Inference__ModelDynamicBatching *db = cfg->dynamic_batching;
  if (cfg->scheduling_choice_case == INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_DYNAMIC_BATCHING && db &&
      db->priority_levels > lim->max_priority_levels)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "dynamic_batching.priority_levels %" PRIu64 " exceeds this server's limit of %" PRIu64
                   " (--model-max-priority-levels)",
                   db->priority_levels, lim->max_priority_levels);
  return 0;
}

// --- what the graph's passes may do

int config_graph_opts(const Inference__ModelConfig *cfg, eng_graph_opts *o, err *e) {
  memset(o, 0, sizeof *o);
  for (size_t i = 0; i < cfg->n_parameters; i++) {
    const Inference__ModelConfig__ParametersEntry *pe = cfg->parameters[i];
    int *off = NULL;  // the switch this key turns off when "0"
    if (pe->key && strcmp(pe->key, "fuse_attention") == 0) off = &o->no_fuse_attention;
    if (pe->key && strcmp(pe->key, "merge_qkv") == 0) off = &o->no_merge_qkv;
    if (pe->key && strcmp(pe->key, "qdq_integer") == 0) off = &o->qdq_float;
    if (!off) continue;
    const char *v = pe->value && pe->value->string_value ? pe->value->string_value : "";
    if (strcmp(v, "0") && strcmp(v, "1"))
      return err_set(e, ERR_INVALID_ARGUMENT, "parameters: %s '%s' is not one of 0, 1", pe->key, v);
    *off = v[0] == '0';
  }
  return 0;
}
