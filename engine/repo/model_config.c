// model_config.c: builds the engine's model config (model_config.h) from a
// completed, validated Inference__ModelConfig, copying what the engine and
// the scheduler read into one arena, so the struct outlives the message and
// is released in one call.
#include "engine/repo/model_config.h"

#include <stdalign.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "engine/repo/config.h"

// --- the arena: chunks freed together

typedef struct chunk {
  struct chunk *next;
  size_t cap, used;
  alignas(max_align_t) unsigned char data[];
} chunk;

#define CHUNK_MIN 4096

// n zeroed bytes aligned for any type; NULL on out-of-memory.
static void *alloc(eng_model_config *c, size_t n) {
  n = (n + alignof(max_align_t) - 1) / alignof(max_align_t) * alignof(max_align_t);
  if (n == 0) n = alignof(max_align_t);
  chunk *k = c->arena;
  if (!k || k->cap - k->used < n) {
    size_t cap = n > CHUNK_MIN ? n : CHUNK_MIN;
    chunk *nk = calloc(1, sizeof *nk + cap);
    if (!nk) return NULL;
    nk->cap = cap;
    nk->next = k;
    c->arena = k = nk;
  }
  void *p = k->data + k->used;
  k->used += n;
  return p;
}

// A copy of s ("" for NULL, as protobuf-c's empty default reads).
static char *dup_str(eng_model_config *c, const char *s) {
  if (!s) s = "";
  size_t n = strlen(s) + 1;
  char *d = alloc(c, n);
  if (d) memcpy(d, s, n);
  return d;
}

// A copy of n elements of `size` bytes; never NULL unless out of memory.
static void *dup_arr(eng_model_config *c, const void *src, size_t n, size_t size) {
  void *d = alloc(c, n * size);
  if (d && n) memcpy(d, src, n * size);
  return d;
}

void eng_model_config_free(eng_model_config *c) {
  if (!c) return;
  for (chunk *k = c->arena, *next; k; k = next) {
    next = k->next;
    free(k);
  }
  free(c);
}

const char *eng_model_config_param(const eng_model_config *c, const char *key) {
  for (size_t i = 0; i < c->n_params; i++)
    if (strcmp(c->params[i].key, key) == 0) return c->params[i].value;
  return NULL;
}

// --- conversion

static int oom(err *e) {
  return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory copying the model config");
}

static int tensor(eng_model_config *c, eng_model_tensor *t, const char *name, Inference__DataType dt, size_t n_dims,
                  const int64_t *dims, const Inference__ModelTensorReshape *reshape) {
  t->name = dup_str(c, name);
  t->dt = (dtype)dt;  // dtype.h numbers types as the config does
  t->n_dims = n_dims;
  t->dims = dup_arr(c, dims, n_dims, sizeof *dims);
  if (!t->name || !t->dims) return -1;
  if (reshape) {
    t->has_reshape = 1;
    t->n_reshape = reshape->n_shape;
    t->reshape = dup_arr(c, reshape->shape, reshape->n_shape, sizeof *reshape->shape);
    if (!t->reshape) return -1;
  }
  return 0;
}

static int tensors(eng_model_config *c, const Inference__ModelConfig *pb) {
  c->n_inputs = pb->n_input;
  c->n_outputs = pb->n_output;
  c->inputs = alloc(c, pb->n_input * sizeof *c->inputs);
  c->outputs = alloc(c, pb->n_output * sizeof *c->outputs);
  if (!c->inputs || !c->outputs) return -1;
  for (size_t i = 0; i < pb->n_input; i++) {
    const Inference__ModelInput *t = pb->input[i];
    if (tensor(c, &c->inputs[i], t->name, t->data_type, t->n_dims, t->dims, t->reshape)) return -1;
  }
  for (size_t i = 0; i < pb->n_output; i++) {
    const Inference__ModelOutput *t = pb->output[i];
    if (tensor(c, &c->outputs[i], t->name, t->data_type, t->n_dims, t->dims, t->reshape)) return -1;
  }
  return 0;
}

static int groups(eng_model_config *c, const Inference__ModelConfig *pb) {
  c->n_groups = pb->n_instance_group;
  c->groups = alloc(c, pb->n_instance_group * sizeof *c->groups);
  if (!c->groups) return -1;
  for (size_t i = 0; i < pb->n_instance_group; i++) {
    const Inference__ModelInstanceGroup *ig = pb->instance_group[i];
    eng_instance_group *g = &c->groups[i];
    g->name = dup_str(c, ig->name);
    g->kind = (eng_instance_kind)ig->kind;  // the same numbering
    g->count = ig->count;
    g->n_gpus = ig->n_gpus;
    g->gpus = dup_arr(c, ig->gpus, ig->n_gpus, sizeof *ig->gpus);
    if (!g->name || !g->gpus) return -1;
  }
  return 0;
}

static int params(eng_model_config *c, const Inference__ModelConfig *pb) {
  c->n_params = pb->n_parameters;
  c->params = alloc(c, pb->n_parameters * sizeof *c->params);
  if (!c->params) return -1;
  for (size_t i = 0; i < pb->n_parameters; i++) {
    const Inference__ModelConfig__ParametersEntry *pe = pb->parameters[i];
    c->params[i].key = dup_str(c, pe->key);
    c->params[i].value = dup_str(c, pe->value ? pe->value->string_value : NULL);
    if (!c->params[i].key || !c->params[i].value) return -1;
  }
  return 0;
}

static eng_queue_policy queue_policy(const Inference__ModelQueuePolicy *p) {
  eng_queue_policy q = {0};
  if (!p) return q;
  q.timeout_action = p->timeout_action == INFERENCE__MODEL_QUEUE_POLICY__TIMEOUT_ACTION__DELAY ? ENG_TIMEOUT_DELAY
                                                                                               : ENG_TIMEOUT_REJECT;
  q.default_timeout_us = p->default_timeout_microseconds;
  q.allow_timeout_override = p->allow_timeout_override;
  q.max_queue_size = p->max_queue_size;
  return q;
}

static int batching(eng_model_config *c, const Inference__ModelConfig *pb) {
  const Inference__ModelDynamicBatching *db =
      pb->scheduling_choice_case == INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_DYNAMIC_BATCHING ? pb->dynamic_batching
                                                                                                : NULL;
  if (!db) return 0;
  eng_dynamic_batching *b = &c->batching;
  b->on = 1;
  b->n_preferred = db->n_preferred_batch_size;
  b->preferred = dup_arr(c, db->preferred_batch_size, db->n_preferred_batch_size, sizeof *db->preferred_batch_size);
  b->max_queue_delay_us = db->max_queue_delay_microseconds;
  b->preserve_ordering = db->preserve_ordering;
  b->priority_levels = db->priority_levels;
  b->default_priority_level = db->default_priority_level;
  b->default_policy = queue_policy(db->default_queue_policy);
  b->n_level_policies = db->n_priority_queue_policy;
  b->level_policies = alloc(c, db->n_priority_queue_policy * sizeof *b->level_policies);
  if (!b->preferred || !b->level_policies) return -1;
  if (config_latency_target_us(pb, &b->latency_target_us, NULL) != 0) b->latency_target_us = 0;  // validated before
  for (size_t i = 0; i < db->n_priority_queue_policy; i++)
    b->level_policies[i] =
        (eng_level_policy){db->priority_queue_policy[i]->key, queue_policy(db->priority_queue_policy[i]->value)};
  return 0;
}

// The control's type and false/true values; config_validate checked that
// it has exactly one of them (config_control_type).
static void control_values(eng_control *k, const Inference__ModelSequenceBatching__Control *pc) {
  k->kind = (eng_control_kind)pc->kind;  // the same numbering
  if (pc->kind == INFERENCE__MODEL_SEQUENCE_BATCHING__CONTROL__KIND__CONTROL_SEQUENCE_CORRID) {
    k->dt = (dtype)pc->data_type;
  } else if (pc->n_int32_false_true == 2) {
    k->dt = DT_INT32;
    k->false_true[0] = pc->int32_false_true[0], k->false_true[1] = pc->int32_false_true[1];
  } else if (pc->n_fp32_false_true == 2) {
    k->dt = DT_FP32;
    k->false_true[0] = pc->fp32_false_true[0], k->false_true[1] = pc->fp32_false_true[1];
  } else {
    k->dt = DT_BOOL;
    k->false_true[0] = pc->n_bool_false_true == 2 && pc->bool_false_true[0];
    k->false_true[1] = pc->n_bool_false_true == 2 && pc->bool_false_true[1];
  }
}

// Implicit state: each state's input appended to the inputs and its output
// to the outputs, with the state's dims (fixed: config_validate refused -1).
static int states(eng_model_config *c, const Inference__ModelSequenceBatching *sb) {
  eng_sequence_batching *q = &c->sequence;
  size_t n = sb->n_state, bi = c->n_inputs, bo = c->n_outputs;
  if (!n) return 0;
  eng_model_tensor *in = alloc(c, (bi + n) * sizeof *in), *out = alloc(c, (bo + n) * sizeof *out);
  q->states = alloc(c, n * sizeof *q->states);
  if (!in || !out || !q->states) return -1;
  memcpy(in, c->inputs, bi * sizeof *in);
  memcpy(out, c->outputs, bo * sizeof *out);
  size_t off = 0;
  for (size_t i = 0; i < n; i++) {
    const Inference__ModelSequenceBatching__State *st = sb->state[i];
    eng_seq_state *k = &q->states[i];
    k->input = bi + i;
    k->output = bo + i;
    k->dt = (dtype)st->data_type;
    size_t bytes = dtype_size(k->dt);
    for (size_t d = 0; d < st->n_dims; d++) bytes *= (size_t)st->dims[d];
    k->row_bytes = bytes;
    k->offset = off;
    off += (bytes + 15) & ~(size_t)15;
    if (tensor(c, &in[bi + i], st->input_name, st->data_type, st->n_dims, st->dims, NULL)) return -1;
    if (tensor(c, &out[bo + i], st->output_name, st->data_type, st->n_dims, st->dims, NULL)) return -1;
  }
  q->n_states = n;
  q->state_bytes = off;
  c->inputs = in;
  c->n_inputs = bi + n;
  c->outputs = out;
  c->n_outputs = bo + n;
  return 0;
}

// sequence_batching: its settings, and its control inputs appended to the
// inputs (dims [1], as Triton gives them) so the engine binds them as any other.
static int sequence(eng_model_config *c, const Inference__ModelConfig *pb) {
  const Inference__ModelSequenceBatching *sb =
      pb->scheduling_choice_case == INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_SEQUENCE_BATCHING
          ? pb->sequence_batching
          : NULL;
  if (!sb) return 0;
  eng_sequence_batching *q = &c->sequence;
  q->on = 1;
  q->max_idle_us = sb->max_sequence_idle_microseconds;
  if (sb->strategy_choice_case == INFERENCE__MODEL_SEQUENCE_BATCHING__STRATEGY_CHOICE_OLDEST && sb->oldest) {
    q->strategy = ENG_SEQ_OLDEST;
    q->max_candidates = sb->oldest->max_candidate_sequences;
    q->oldest_delay_us = sb->oldest->max_queue_delay_microseconds;
    q->n_preferred = sb->oldest->n_preferred_batch_size;
    q->preferred = dup_arr(c, sb->oldest->preferred_batch_size, q->n_preferred, sizeof *q->preferred);
    if (!q->preferred) return -1;
  } else if (sb->strategy_choice_case == INFERENCE__MODEL_SEQUENCE_BATCHING__STRATEGY_CHOICE_DIRECT && sb->direct) {
    q->direct_delay_us = sb->direct->max_queue_delay_microseconds;
    q->min_slot_utilization = sb->direct->minimum_slot_utilization;
  }
  size_t n = sb->n_control_input, base = c->n_inputs;
  eng_model_tensor *in = alloc(c, (base + n) * sizeof *in);
  q->controls = alloc(c, n * sizeof *q->controls);
  if (!in || !q->controls) return -1;
  memcpy(in, c->inputs, base * sizeof *in);
  static const int64_t one[1] = {1};
  for (size_t i = 0; i < n; i++) {
    const Inference__ModelSequenceBatching__ControlInput *ci = sb->control_input[i];
    eng_control *k = &q->controls[i];
    control_values(k, ci->control[0]);
    k->input = base + i;
    if (tensor(c, &in[base + i], ci->name, (Inference__DataType)k->dt, 1, one, NULL)) return -1;
  }
  c->inputs = in;
  c->n_inputs = base + n;
  q->n_controls = n;
  return states(c, sb);
}

static int warmup_input(eng_model_config *c, eng_warmup_input *wi, const Inference__ModelWarmup__InputsEntry *ie) {
  wi->name = dup_str(c, ie->key);
  wi->file = dup_str(c, NULL);
  if (!wi->name || !wi->file) return -1;
  const Inference__ModelWarmup__Input *in = ie->value;
  if (!in) return 0;
  wi->has_value = 1;
  wi->dt = (dtype)in->data_type;
  wi->n_dims = in->n_dims;
  wi->dims = dup_arr(c, in->dims, in->n_dims, sizeof *in->dims);
  if (!wi->dims) return -1;
  switch (in->input_data_type_case) {
    case INFERENCE__MODEL_WARMUP__INPUT__INPUT_DATA_TYPE_ZERO_DATA:
      wi->source = ENG_WARMUP_ZERO;
      break;
    case INFERENCE__MODEL_WARMUP__INPUT__INPUT_DATA_TYPE_RANDOM_DATA:
      wi->source = ENG_WARMUP_RANDOM;
      break;
    case INFERENCE__MODEL_WARMUP__INPUT__INPUT_DATA_TYPE_INPUT_DATA_FILE:
      wi->source = ENG_WARMUP_FILE;
      wi->file = dup_str(c, in->input_data_file);
      if (!wi->file) return -1;
      break;
    default:
      wi->source = ENG_WARMUP_NONE;
      break;
  }
  return 0;
}

static int warmups(eng_model_config *c, const Inference__ModelConfig *pb) {
  c->n_warmups = pb->n_model_warmup;
  c->warmups = alloc(c, pb->n_model_warmup * sizeof *c->warmups);
  if (!c->warmups) return -1;
  for (size_t k = 0; k < pb->n_model_warmup; k++) {
    const Inference__ModelWarmup *w = pb->model_warmup[k];
    eng_warmup *d = &c->warmups[k];
    d->name = dup_str(c, w->name);
    d->batch_size = w->batch_size;
    d->count = w->count;
    d->n_inputs = w->n_inputs;
    d->inputs = alloc(c, w->n_inputs * sizeof *d->inputs);
    if (!d->name || !d->inputs) return -1;
    for (size_t i = 0; i < w->n_inputs; i++)
      if (warmup_input(c, &d->inputs[i], w->inputs[i])) return -1;
  }
  return 0;
}

int eng_model_config_from_proto(const Inference__ModelConfig *pb, eng_model_config **out, err *e) {
  *out = NULL;
  eng_model_config *c = calloc(1, sizeof *c);
  if (!c) return oom(e);
  c->max_batch_size = pb->max_batch_size;
  c->cuda_graphs = !(pb->optimization && pb->optimization->cuda) || pb->optimization->cuda->graphs;
  int rc = (c->name = dup_str(c, pb->name)) ? 0 : -1;
  if (rc == 0) rc = tensors(c, pb);
  if (rc == 0) rc = groups(c, pb);
  if (rc == 0) rc = params(c, pb);
  if (rc == 0) rc = batching(c, pb);
  if (rc == 0) c->n_client_inputs = c->n_inputs, c->n_client_outputs = c->n_outputs;
  if (rc == 0) rc = sequence(c, pb);
  if (rc == 0) rc = warmups(c, pb);
  if (rc) {
    eng_model_config_free(c);
    return oom(e);
  }
  *out = c;
  return 0;
}
