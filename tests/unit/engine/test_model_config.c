// Tests engine/repo/model_config.c: the engine's own config struct built
// from a parsed config.pbtxt, every field it carries, and the defaults of a
// config that sets none of them.
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine/repo/config.h"
#include "engine/repo/model_config.h"
#include "engine/repo/pbtxt.h"

// Parses text with the repository's pbtxt parser and converts it; NULL (a
// counted failure) when either step fails.
static eng_model_config *convert(const char *text) {
  ProtobufCMessage *m = NULL;
  err e = {0};
  int rc = pbtxt_parse(&inference__model_config__descriptor, text, strlen(text), "config.pbtxt", &m, &e);
  CHECK_EQ_INT(rc, 0);
  if (rc) {
    fprintf(stderr, "  %s\n", e.msg);
    return NULL;
  }
  eng_model_config *c = NULL;
  rc = eng_model_config_from_proto((const Inference__ModelConfig *)m, &c, &e);
  CHECK_EQ_INT(rc, 0);
  protobuf_c_message_free_unpacked(m, NULL);  // the struct owns copies: nothing points into the message
  return rc ? NULL : c;
}

static const char *k_full =
    "name: 'bert'\n"
    "platform: 'onnxruntime_onnx'\n"
    "max_batch_size: 16\n"
    "input [\n"
    "  { name: 'input_ids' data_type: TYPE_INT64 dims: [-1] },\n"
    "  { name: 'image' data_type: TYPE_FP16 dims: [3, 224, 224] reshape { shape: [1, 3, 224, 224] } },\n"
    "  { name: 'flat' data_type: TYPE_FP32 dims: [1] reshape { } }\n"
    "]\n"
    "output [\n"
    "  { name: 'logits' data_type: TYPE_FP32 dims: [-1, 2] },\n"
    "  { name: 'mask' data_type: TYPE_BOOL dims: [4] reshape { shape: [2, 2] } }\n"
    "]\n"
    "instance_group [\n"
    "  { name: 'g0' kind: KIND_GPU count: 2 gpus: [0, 1] },\n"
    "  { name: 'c0' kind: KIND_CPU count: 3 }\n"
    "]\n"
    "parameters { key: 'precision' value { string_value: 'fp16' } }\n"
    "parameters { key: 'pad_to_longest' value { string_value: 'input_ids:0' } }\n"
    "parameters { key: 'empty' value { } }\n"
    "optimization { cuda { graphs: false } }\n"
    "dynamic_batching {\n"
    "  preferred_batch_size: [4, 8]\n"
    "  max_queue_delay_microseconds: 250\n"
    "  preserve_ordering: true\n"
    "  priority_levels: 3\n"
    "  default_priority_level: 2\n"
    "  default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 1000 allow_timeout_override: true"
    " max_queue_size: 7 }\n"
    "  priority_queue_policy { key: 1 value { max_queue_size: 5 } }\n"
    "  priority_queue_policy { key: 3 value { timeout_action: DELAY default_timeout_microseconds: 9 } }\n"
    "}\n"
    "model_warmup [\n"
    "  { name: 'w0' batch_size: 8 count: 3\n"
    "    inputs { key: 'input_ids' value { data_type: TYPE_INT64 dims: [128] zero_data: true } }\n"
    "    inputs { key: 'image' value { data_type: TYPE_FP16 dims: [3, 224, 224] random_data: true } }\n"
    "    inputs { key: 'flat' value { data_type: TYPE_FP32 dims: [1] input_data_file: 'flat.bin' } }\n"
    "  },\n"
    "  { name: 'w1'\n"
    "    inputs { key: 'input_ids' value { data_type: TYPE_INT64 dims: [4] } }\n"
    "    inputs { key: 'image' }\n"
    "  }\n"
    "]\n";

static void test_every_field(void) {
  eng_model_config *c = convert(k_full);
  if (!c) return;
  CHECK_EQ_STR(c->name, "bert");
  CHECK_EQ_INT(c->max_batch_size, 16);

  CHECK_EQ_INT(c->n_inputs, 3);
  if (c->n_inputs == 3) {
    const eng_model_tensor *t = &c->inputs[0];
    CHECK_EQ_STR(t->name, "input_ids");
    CHECK_EQ_INT(t->dt, DT_INT64);
    CHECK_EQ_INT(t->n_dims, 1);
    CHECK_EQ_INT(t->dims[0], -1);
    CHECK_EQ_INT(t->has_reshape, 0);
    CHECK_EQ_INT(t->n_reshape, 0);
    t = &c->inputs[1];
    CHECK_EQ_STR(t->name, "image");
    CHECK_EQ_INT(t->dt, DT_FP16);
    CHECK_EQ_INT(t->n_dims, 3);
    CHECK_EQ_INT(t->dims[0], 3);
    CHECK_EQ_INT(t->dims[1], 224);
    CHECK_EQ_INT(t->dims[2], 224);
    CHECK_EQ_INT(t->has_reshape, 1);
    CHECK_EQ_INT(t->n_reshape, 4);
    if (t->n_reshape == 4) {
      CHECK_EQ_INT(t->reshape[0], 1);
      CHECK_EQ_INT(t->reshape[1], 3);
      CHECK_EQ_INT(t->reshape[3], 224);
    }
    t = &c->inputs[2];  // an empty reshape is still a reshape (a scalar in the model)
    CHECK_EQ_STR(t->name, "flat");
    CHECK_EQ_INT(t->dt, DT_FP32);
    CHECK_EQ_INT(t->has_reshape, 1);
    CHECK_EQ_INT(t->n_reshape, 0);
  }
  CHECK_EQ_INT(c->n_outputs, 2);
  if (c->n_outputs == 2) {
    const eng_model_tensor *t = &c->outputs[0];
    CHECK_EQ_STR(t->name, "logits");
    CHECK_EQ_INT(t->dt, DT_FP32);
    CHECK_EQ_INT(t->n_dims, 2);
    CHECK_EQ_INT(t->dims[0], -1);
    CHECK_EQ_INT(t->dims[1], 2);
    CHECK_EQ_INT(t->has_reshape, 0);
    t = &c->outputs[1];
    CHECK_EQ_STR(t->name, "mask");
    CHECK_EQ_INT(t->dt, DT_BOOL);
    CHECK_EQ_INT(t->has_reshape, 1);
    CHECK_EQ_INT(t->n_reshape, 2);
    if (t->n_reshape == 2) CHECK_EQ_INT(t->reshape[1], 2);
  }

  CHECK_EQ_INT(c->n_groups, 2);
  if (c->n_groups == 2) {
    CHECK_EQ_STR(c->groups[0].name, "g0");
    CHECK_EQ_INT(c->groups[0].kind, ENG_INSTANCE_GPU);
    CHECK_EQ_INT(c->groups[0].count, 2);
    CHECK_EQ_INT(c->groups[0].n_gpus, 2);
    if (c->groups[0].n_gpus == 2) CHECK_EQ_INT(c->groups[0].gpus[1], 1);
    CHECK_EQ_STR(c->groups[1].name, "c0");
    CHECK_EQ_INT(c->groups[1].kind, ENG_INSTANCE_CPU);
    CHECK_EQ_INT(c->groups[1].count, 3);
    CHECK_EQ_INT(c->groups[1].n_gpus, 0);
  }

  // in config order (the parser keeps one entry per key, the last)
  CHECK_EQ_INT(c->n_params, 3);
  if (c->n_params == 3) {
    CHECK_EQ_STR(c->params[0].key, "precision");
    CHECK_EQ_STR(c->params[0].value, "fp16");
    CHECK_EQ_STR(c->params[1].key, "pad_to_longest");
    CHECK_EQ_STR(c->params[1].value, "input_ids:0");
    CHECK_EQ_STR(c->params[2].key, "empty");
    CHECK_EQ_STR(c->params[2].value, "");
  }
  CHECK_EQ_STR(eng_model_config_param(c, "precision"), "fp16");
  CHECK_EQ_STR(eng_model_config_param(c, "empty"), "");
  CHECK(eng_model_config_param(c, "layout") == NULL);

  CHECK_EQ_INT(c->cuda_graphs, 0);

  const eng_dynamic_batching *b = &c->batching;
  CHECK_EQ_INT(b->on, 1);
  CHECK_EQ_INT(b->n_preferred, 2);
  if (b->n_preferred == 2) {
    CHECK_EQ_INT(b->preferred[0], 4);
    CHECK_EQ_INT(b->preferred[1], 8);
  }
  CHECK_EQ_INT(b->max_queue_delay_us, 250);
  CHECK_EQ_INT(b->preserve_ordering, 1);
  CHECK_EQ_INT(b->priority_levels, 3);
  CHECK_EQ_INT(b->default_priority_level, 2);
  CHECK_EQ_INT(b->default_policy.timeout_action, ENG_TIMEOUT_DELAY);
  CHECK_EQ_INT(b->default_policy.default_timeout_us, 1000);
  CHECK_EQ_INT(b->default_policy.allow_timeout_override, 1);
  CHECK_EQ_INT(b->default_policy.max_queue_size, 7);
  CHECK_EQ_INT(b->n_level_policies, 2);
  if (b->n_level_policies == 2) {
    CHECK_EQ_INT(b->level_policies[0].level, 1);
    CHECK_EQ_INT(b->level_policies[0].policy.timeout_action, ENG_TIMEOUT_REJECT);
    CHECK_EQ_INT(b->level_policies[0].policy.default_timeout_us, 0);
    CHECK_EQ_INT(b->level_policies[0].policy.allow_timeout_override, 0);
    CHECK_EQ_INT(b->level_policies[0].policy.max_queue_size, 5);
    CHECK_EQ_INT(b->level_policies[1].level, 3);
    CHECK_EQ_INT(b->level_policies[1].policy.timeout_action, ENG_TIMEOUT_DELAY);
    CHECK_EQ_INT(b->level_policies[1].policy.default_timeout_us, 9);
    CHECK_EQ_INT(b->level_policies[1].policy.max_queue_size, 0);
  }

  CHECK_EQ_INT(c->n_warmups, 2);
  if (c->n_warmups == 2) {
    const eng_warmup *w = &c->warmups[0];
    CHECK_EQ_STR(w->name, "w0");
    CHECK_EQ_INT(w->batch_size, 8);
    CHECK_EQ_INT(w->count, 3);
    CHECK_EQ_INT(w->n_inputs, 3);
    if (w->n_inputs == 3) {
      CHECK_EQ_STR(w->inputs[0].name, "input_ids");
      CHECK_EQ_INT(w->inputs[0].has_value, 1);
      CHECK_EQ_INT(w->inputs[0].dt, DT_INT64);
      CHECK_EQ_INT(w->inputs[0].n_dims, 1);
      if (w->inputs[0].n_dims == 1) CHECK_EQ_INT(w->inputs[0].dims[0], 128);
      CHECK_EQ_INT(w->inputs[0].source, ENG_WARMUP_ZERO);
      CHECK_EQ_STR(w->inputs[0].file, "");
      CHECK_EQ_STR(w->inputs[1].name, "image");
      CHECK_EQ_INT(w->inputs[1].dt, DT_FP16);
      CHECK_EQ_INT(w->inputs[1].n_dims, 3);
      CHECK_EQ_INT(w->inputs[1].source, ENG_WARMUP_RANDOM);
      CHECK_EQ_STR(w->inputs[2].name, "flat");
      CHECK_EQ_INT(w->inputs[2].source, ENG_WARMUP_FILE);
      CHECK_EQ_STR(w->inputs[2].file, "flat.bin");
    }
    w = &c->warmups[1];  // no batch_size, count or data source; an input without a value block
    CHECK_EQ_STR(w->name, "w1");
    CHECK_EQ_INT(w->batch_size, 0);
    CHECK_EQ_INT(w->count, 0);
    CHECK_EQ_INT(w->n_inputs, 2);
    if (w->n_inputs == 2) {
      CHECK_EQ_INT(w->inputs[0].has_value, 1);
      CHECK_EQ_INT(w->inputs[0].source, ENG_WARMUP_NONE);
      CHECK_EQ_STR(w->inputs[1].name, "image");
      CHECK_EQ_INT(w->inputs[1].has_value, 0);
      CHECK_EQ_INT(w->inputs[1].n_dims, 0);
      CHECK_EQ_INT(w->inputs[1].source, ENG_WARMUP_NONE);
    }
  }
  eng_model_config_free(c);
}

// Nothing set: every field at the value the engine took from an absent one.
static void test_defaults(void) {
  eng_model_config *c = convert("platform: 'onnxruntime_onnx'");
  if (!c) return;
  CHECK_EQ_STR(c->name, "");
  CHECK_EQ_INT(c->max_batch_size, 0);
  CHECK_EQ_INT(c->n_inputs, 0);
  CHECK_EQ_INT(c->n_outputs, 0);
  CHECK_EQ_INT(c->n_groups, 0);
  CHECK_EQ_INT(c->n_params, 0);
  CHECK(eng_model_config_param(c, "precision") == NULL);
  CHECK_EQ_INT(c->cuda_graphs, 1);  // graphs are on unless a cuda block says otherwise
  CHECK_EQ_INT(c->batching.on, 0);
  CHECK_EQ_INT(c->batching.n_preferred, 0);
  CHECK_EQ_INT(c->batching.max_queue_delay_us, 0);
  CHECK_EQ_INT(c->batching.preserve_ordering, 0);
  CHECK_EQ_INT(c->batching.priority_levels, 0);
  CHECK_EQ_INT(c->batching.n_level_policies, 0);
  CHECK_EQ_INT(c->n_warmups, 0);
  eng_model_config_free(c);

  // empty blocks: a group, dynamic batching and queue policy with their fields at zero
  c = convert("name: 'm' instance_group [{ }] optimization { } dynamic_batching { default_queue_policy { } }");
  if (!c) return;
  CHECK_EQ_STR(c->name, "m");
  CHECK_EQ_INT(c->n_groups, 1);
  if (c->n_groups == 1) {
    CHECK_EQ_STR(c->groups[0].name, "");
    CHECK_EQ_INT(c->groups[0].kind, ENG_INSTANCE_AUTO);
    CHECK_EQ_INT(c->groups[0].count, 0);
    CHECK_EQ_INT(c->groups[0].n_gpus, 0);
  }
  CHECK_EQ_INT(c->cuda_graphs, 1);  // optimization without a cuda block
  CHECK_EQ_INT(c->batching.on, 1);
  CHECK_EQ_INT(c->batching.n_preferred, 0);
  CHECK_EQ_INT(c->batching.default_policy.timeout_action, ENG_TIMEOUT_REJECT);
  CHECK_EQ_INT(c->batching.default_policy.default_timeout_us, 0);
  CHECK_EQ_INT(c->batching.default_policy.max_queue_size, 0);
  eng_model_config_free(c);

  // a cuda block: graphs as it says (false when it leaves graphs out, as Triton reads it)
  c = convert("optimization { cuda { graphs: true } }");
  if (c) CHECK_EQ_INT(c->cuda_graphs, 1);
  eng_model_config_free(c);
  c = convert("optimization { cuda { busy_wait_events: true } }");
  if (c) CHECK_EQ_INT(c->cuda_graphs, 0);
  eng_model_config_free(c);
  // another scheduler: no dynamic batching
  c = convert("sequence_batching { }");
  if (c) {
    CHECK_EQ_INT(c->batching.on, 0);
    CHECK_EQ_INT(c->sequence.on, 1);
    CHECK_EQ_INT(c->sequence.strategy, ENG_SEQ_DIRECT);
    CHECK_EQ_INT(c->sequence.max_idle_us, 0);
    CHECK_EQ_INT(c->sequence.n_controls, 0);
  }
  eng_model_config_free(c);
  // implicit state: its input after the controls, its output after the config's; 16-aligned offsets
  c = convert(
      "input { name: 'INPUT' data_type: TYPE_INT32 dims: [1] }\n"
      "output { name: 'OUTPUT' data_type: TYPE_INT32 dims: [1] }\n"
      "sequence_batching { control_input [{ name: 'S' control [{ kind: CONTROL_SEQUENCE_START "
      "int32_false_true: [0, 1] }] }]\n"
      "  state [{ input_name: 'A_IN' output_name: 'A_OUT' data_type: TYPE_FP32 dims: [3] },\n"
      "         { input_name: 'B_IN' output_name: 'B_OUT' data_type: TYPE_INT64 dims: [2, 2] }] }");
  if (c) {
    const eng_sequence_batching *q = &c->sequence;
    CHECK_EQ_INT(c->n_client_inputs, 1);
    CHECK_EQ_INT(c->n_inputs, 4);
    CHECK_EQ_INT(c->n_client_outputs, 1);
    CHECK_EQ_INT(c->n_outputs, 3);
    CHECK_EQ_INT(q->n_states, 2);
    if (q->n_states == 2 && c->n_inputs == 4 && c->n_outputs == 3) {
      CHECK_EQ_INT(q->states[0].input, 2);
      CHECK_EQ_INT(q->states[0].output, 1);
      CHECK_EQ_STR(c->inputs[2].name, "A_IN");
      CHECK_EQ_STR(c->outputs[2].name, "B_OUT");
      CHECK_EQ_INT(c->inputs[3].n_dims, 2);
      CHECK_EQ_INT(q->states[0].row_bytes, 12);
      CHECK_EQ_INT(q->states[1].offset, 16);
      CHECK_EQ_INT(q->states[1].row_bytes, 32);
      CHECK_EQ_INT(q->state_bytes, 48);
    }
  }
  eng_model_config_free(c);
  // sequence_batching's controls become inputs after the config's, dims [1]
  c = convert(
      "input { name: 'INPUT' data_type: TYPE_INT32 dims: [1] }\n"
      "sequence_batching { max_sequence_idle_microseconds: 77\n"
      "  oldest { max_candidate_sequences: 5 preferred_batch_size: [2, 4] max_queue_delay_microseconds: 9 }\n"
      "  control_input [\n"
      "    { name: 'S' control [{ kind: CONTROL_SEQUENCE_START fp32_false_true: [0.5, 2] }] },\n"
      "    { name: 'E' control [{ kind: CONTROL_SEQUENCE_END bool_false_true: [true, false] }] },\n"
      "    { name: 'C' control [{ kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_INT64 }] } ] }");
  if (c) {
    const eng_sequence_batching *q = &c->sequence;
    CHECK_EQ_INT(q->on, 1);
    CHECK_EQ_INT(q->strategy, ENG_SEQ_OLDEST);
    CHECK_EQ_INT(q->max_idle_us, 77);
    CHECK_EQ_INT(q->max_candidates, 5);
    CHECK_EQ_INT(q->oldest_delay_us, 9);
    CHECK_EQ_INT(q->n_preferred, 2);
    if (q->n_preferred == 2) CHECK_EQ_INT(q->preferred[1], 4);
    CHECK_EQ_INT(c->n_client_inputs, 1);
    CHECK_EQ_INT(c->n_inputs, 4);
    CHECK_EQ_INT(q->n_controls, 3);
    if (c->n_inputs == 4 && q->n_controls == 3) {
      CHECK_EQ_STR(c->inputs[1].name, "S");
      CHECK_EQ_INT(c->inputs[1].dt, DT_FP32);
      CHECK_EQ_INT(c->inputs[1].n_dims, 1);
      CHECK_EQ_INT(c->inputs[1].dims[0], 1);
      CHECK_EQ_INT(q->controls[0].kind, ENG_CONTROL_START);
      CHECK_EQ_INT(q->controls[0].input, 1);
      CHECK(q->controls[0].false_true[0] == 0.5 && q->controls[0].false_true[1] == 2);
      CHECK_EQ_INT(q->controls[1].kind, ENG_CONTROL_END);
      CHECK_EQ_INT(q->controls[1].dt, DT_BOOL);
      CHECK(q->controls[1].false_true[0] == 1 && q->controls[1].false_true[1] == 0);
      CHECK_EQ_INT(q->controls[2].kind, ENG_CONTROL_CORRID);
      CHECK_EQ_INT(q->controls[2].dt, DT_INT64);
      CHECK_EQ_STR(c->inputs[3].name, "C");
      CHECK_EQ_INT(c->inputs[3].dt, DT_INT64);
    }
  }
  eng_model_config_free(c);
  eng_model_config_free(NULL);
}

// The struct is built after completion: what config_complete adds is there.
static void test_after_completion(void) {
  ProtobufCMessage *m = NULL;
  err e = {0};
  const char *text = "name: 'm'";
  CHECK_EQ_INT(pbtxt_parse(&inference__model_config__descriptor, text, strlen(text), "config.pbtxt", &m, &e), 0);
  if (!m) return;
  eng_io in = {.name = "x", .dt = DT_FP32, .ndims = 2, .dims = {-1, 3}};
  eng_io out = {.name = "y", .dt = DT_FP32, .ndims = 2, .dims = {-1, 2}};
  Inference__ModelConfig *pb = (Inference__ModelConfig *)m;
  CHECK_EQ_INT(config_complete(pb, 0, &in, 1, &out, 1, CONFIG_DEFAULT_MAX_BATCH_SIZE, &e), 0);
  config_resolve_kinds(pb, 0, 0);
  eng_model_config *c = NULL;
  CHECK_EQ_INT(eng_model_config_from_proto(pb, &c, &e), 0);
  protobuf_c_message_free_unpacked(m, NULL);
  if (!c) return;
  CHECK_EQ_INT(c->max_batch_size, CONFIG_DEFAULT_MAX_BATCH_SIZE);
  CHECK_EQ_INT(c->n_inputs, 1);
  if (c->n_inputs == 1) {
    CHECK_EQ_STR(c->inputs[0].name, "x");
    CHECK_EQ_INT(c->inputs[0].n_dims, 1);
    CHECK_EQ_INT(c->inputs[0].dims[0], 3);
  }
  CHECK_EQ_INT(c->batching.on, 1);
  CHECK_EQ_INT(c->batching.n_preferred, 1);
  CHECK_EQ_INT(c->n_groups, 1);
  if (c->n_groups == 1) {
    CHECK_EQ_INT(c->groups[0].kind, ENG_INSTANCE_CPU);
    CHECK_EQ_INT(c->groups[0].count, 1);
  }
  eng_model_config_free(c);
}

// parameters { key: "latency_target_ms" }: carried in milliseconds to
// microseconds, and every misuse named by config_latency_target_us (which
// config_validate runs) with its value.
static ProtobufCMessage *parse(const char *text) {
  ProtobufCMessage *m = NULL;
  err e = {0};
  int rc = pbtxt_parse(&inference__model_config__descriptor, text, strlen(text), "config.pbtxt", &m, &e);
  CHECK_EQ_INT(rc, 0);
  return m;
}

static void test_latency_target(void) {
  eng_model_config *c = convert("max_batch_size: 8 dynamic_batching { }\n"
                                "parameters { key: 'latency_target_ms' value { string_value: '2.5' } }");
  if (c) CHECK_EQ_INT(c->batching.latency_target_us, 2500);
  eng_model_config_free(c);
  c = convert("max_batch_size: 8 dynamic_batching { }");
  if (c) CHECK_EQ_INT(c->batching.latency_target_us, 0);
  eng_model_config_free(c);
  static const struct {
    const char *text, *needle;
  } bad[] = {
      {"max_batch_size: 8 dynamic_batching { } parameters { key: 'latency_target_ms' value { string_value: 'fast' } }",
       "'fast' is not a number of milliseconds"},
      {"max_batch_size: 8 dynamic_batching { } parameters { key: 'latency_target_ms' value { string_value: '0' } }",
       "'0' is not a number"},
      {"max_batch_size: 8 dynamic_batching { } parameters { key: 'latency_target_ms' value { string_value: '5ms' } }",
       "'5ms'"},
      {"max_batch_size: 8 dynamic_batching { } parameters { key: 'latency_target_ms' value { } }", "'' is not"},
      {"max_batch_size: 8 parameters { key: 'latency_target_ms' value { string_value: '5' } }",
       "needs dynamic_batching"},
      {"max_batch_size: 1 dynamic_batching { } parameters { key: 'latency_target_ms' value { string_value: '5' } }",
       "needs max_batch_size > 1"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ProtobufCMessage *m = parse(bad[i].text);
    if (!m) continue;
    int64_t us = -1;
    err e = {0};
    CHECK_EQ_INT(config_latency_target_us((const Inference__ModelConfig *)m, &us, &e), ERR_INVALID_ARGUMENT);
    CHECK_CONTAINS(e.msg, bad[i].needle);
    CHECK_CONTAINS(e.msg, "latency_target_ms");
    protobuf_c_message_free_unpacked(m, NULL);
  }
}

int main(void) {
  test_latency_target();
  test_every_field();
  test_defaults();
  test_after_completion();
  CHECK_DONE();
}
