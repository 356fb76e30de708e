// Tests engine/repo/config.c: Triton-style auto-completion from the graph IO and
// validation errors that name the field and tensor.
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine/graph/graph.h"
#include "engine/repo/config.h"
#include "engine/repo/pbtxt.h"

static eng_io io(const char *name, dtype dt, int ndims, int64_t d0, int64_t d1, int64_t d2) {
  eng_io x;
  memset(&x, 0, sizeof x);
  snprintf(x.name, sizeof x.name, "%s", name);
  x.dt = dt;
  x.ndims = ndims;
  int64_t d[3] = {d0, d1, d2};
  for (int i = 0; i < ndims && i < 3; i++) x.dims[i] = d[i];
  return x;
}

static Inference__ModelConfig *parse(const char *text) {
  ProtobufCMessage *m = NULL;
  err e = {0};
  int rc = pbtxt_parse(&inference__model_config__descriptor, text, strlen(text), "config.pbtxt", &m, &e);
  CHECK_EQ_INT(rc, 0);
  if (rc) fprintf(stderr, "  %s\n", e.msg);
  return (Inference__ModelConfig *)m;
}

// Graph used by most cases: x FP32 [-1,3], x2 INT64 [-1,-1]; y FP32 [-1,2], z INT32 [-1].
static eng_io g_in[2], g_out[2];

static void test_complete_missing_config(void) {
  err e = {0};
  Inference__ModelConfig *c = config_new("m");
  CHECK(c != NULL);
  if (!c) return;
  CHECK_EQ_INT(config_complete(c, 0, g_in, 2, g_out, 2, CONFIG_DEFAULT_MAX_BATCH_SIZE, &e), 0);
  CHECK_EQ_INT(c->max_batch_size, 4);
  CHECK_EQ_STR(c->platform, "onnxruntime_onnx");
  CHECK_EQ_INT(c->n_input, 2);
  if (c->n_input == 2) {
    CHECK_EQ_STR(c->input[0]->name, "x");
    CHECK_EQ_INT(c->input[0]->data_type, INFERENCE__DATA_TYPE__TYPE_FP32);
    CHECK_EQ_INT(c->input[0]->n_dims, 1);  // batch dimension stripped
    if (c->input[0]->n_dims == 1) CHECK_EQ_INT(c->input[0]->dims[0], 3);
    CHECK_EQ_INT(c->input[1]->data_type, INFERENCE__DATA_TYPE__TYPE_INT64);
    CHECK_EQ_INT(c->input[1]->n_dims, 1);
    if (c->input[1]->n_dims == 1) CHECK_EQ_INT(c->input[1]->dims[0], -1);
  }
  CHECK_EQ_INT(c->n_output, 2);
  if (c->n_output == 2) {
    CHECK_EQ_STR(c->output[1]->name, "z");
    CHECK_EQ_INT(c->output[1]->n_dims, 0);  // [-1] minus the batch dimension: a scalar per item
  }
  CHECK_EQ_INT(c->scheduling_choice_case, INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_DYNAMIC_BATCHING);
  CHECK(c->dynamic_batching != NULL);
  // Triton's normalisation: no preferred sizes means max_batch_size is the preferred one.
  if (c->dynamic_batching) {
    CHECK_EQ_INT(c->dynamic_batching->n_preferred_batch_size, 1);
    if (c->dynamic_batching->n_preferred_batch_size == 1) CHECK_EQ_INT(c->dynamic_batching->preferred_batch_size[0], 4);
    CHECK_EQ_INT(c->dynamic_batching->max_queue_delay_microseconds, 0);
  }
  CHECK_EQ_INT(c->n_instance_group, 1);
  if (c->n_instance_group == 1) {
    CHECK_EQ_INT(c->instance_group[0]->count, 1);
    CHECK_EQ_INT(c->instance_group[0]->kind, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_AUTO);
    CHECK_EQ_STR(c->instance_group[0]->name, "m_0");
  }
  CHECK(c->version_policy && c->version_policy->policy_choice_case == INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_LATEST);
  CHECK(c->version_policy && c->version_policy->latest && c->version_policy->latest->num_versions == 1);
  CHECK_EQ_INT(config_validate(c, g_in, 2, g_out, 2, &e), 0);
  if (e.code) fprintf(stderr, "  %s\n", e.msg);

  // Completion is idempotent and the result packs as a valid message.
  CHECK_EQ_INT(config_complete(c, 0, g_in, 2, g_out, 2, 4, &e), 0);
  CHECK_EQ_INT(c->n_input, 2);
  CHECK_EQ_INT(c->n_instance_group, 1);
  CHECK(c->dynamic_batching && c->dynamic_batching->n_preferred_batch_size == 1);
  CHECK(protobuf_c_message_get_packed_size(&c->base) > 0);
  config_free(c);
}

// An output whose ValueInfo has no shape (ndims -1, as onnx.helper writes
// with shape None): the config's dims stand, for batching models and not.
static void test_validate_unshaped_output(void) {
  err e = {0};
  eng_io in[1] = {io("x", DT_FP32, 2, -1, 4, 0)}, out[1] = {io("y", DT_FP32, -1, 0, 0, 0)};
  Inference__ModelConfig *c = parse("name: 'm' max_batch_size: 8 input [{ name: 'x' data_type: TYPE_FP32 dims: [4] }] "
                                    "output [{ name: 'y' data_type: TYPE_FP32 dims: [4, 3] }]");
  if (!c) return;
  CHECK_EQ_INT(config_validate(c, in, 1, out, 1, &e), 0);
  config_free(c);
  c = parse("name: 'm' input [{ name: 'x' data_type: TYPE_FP32 dims: [-1, 4] }] "
            "output [{ name: 'y' data_type: TYPE_FP32 dims: [-1] }]");
  if (!c) return;
  CHECK_EQ_INT(config_validate(c, in, 1, out, 1, &e), 0);
  config_free(c);
}

static void test_complete_no_batching(void) {
  err e = {0};
  // A fixed first dimension: the model cannot batch; dims stay whole.
  eng_io in[1] = {io("a", DT_FP32, 2, 2, 3, 0)}, out[1] = {io("b", DT_FP32, 1, 6, 0, 0)};
  Inference__ModelConfig *c = config_new("fixed");
  CHECK_EQ_INT(config_complete(c, 0, in, 1, out, 1, 4, &e), 0);
  CHECK_EQ_INT(c->max_batch_size, 0);
  CHECK(c->n_input == 1 && c->input[0]->n_dims == 2 && c->input[0]->dims[0] == 2);
  CHECK_EQ_INT(c->scheduling_choice_case, INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE__NOT_SET);
  CHECK_EQ_INT(config_validate(c, in, 1, out, 1, &e), 0);
  config_free(c);

  // A file config listing a tensor with its batch dimension (and no
  // max_batch_size) keeps 0: the listed shape is the whole shape.
  c = parse("name: 'm' input [{ name: 'x' data_type: TYPE_FP32 dims: [-1, 3] }]");
  CHECK_EQ_INT(config_complete(c, 1, g_in, 2, g_out, 2, 4, &e), 0);
  CHECK_EQ_INT(c->max_batch_size, 0);
  CHECK_EQ_INT(c->n_input, 1);
  CHECK(c->n_output == 2 && c->output[0]->n_dims == 2 && c->output[0]->dims[0] == -1);
  CHECK_EQ_INT(c->scheduling_choice_case, INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE__NOT_SET);
  config_free(c);

  // max_batch_size 0 with dynamic_batching from the file: no preferred size is made up.
  c = parse("name: 'm' input [{ name: 'x' data_type: TYPE_FP32 dims: [-1, 3] }] dynamic_batching {}");
  CHECK_EQ_INT(config_complete(c, 1, g_in, 2, g_out, 2, 4, &e), 0);
  CHECK_EQ_INT(c->max_batch_size, 0);
  CHECK(c->dynamic_batching && c->dynamic_batching->n_preferred_batch_size == 0);
  config_free(c);

  // default_max_batch_size 0 turns the default off.
  c = config_new("m");
  CHECK_EQ_INT(config_complete(c, 0, g_in, 2, g_out, 2, 0, &e), 0);
  CHECK_EQ_INT(c->max_batch_size, 0);
  config_free(c);
}

static void test_complete_file_config(void) {
  err e = {0};
  // Listed tensors leave out the batch dimension: batching is inferred.
  Inference__ModelConfig *c = parse(
      "input [{ name: 'x' data_type: TYPE_FP32 dims: [3] }, { name: 'x2' data_type: TYPE_INT64 dims: [-1] }]\n"
      "output { name: 'y' data_type: TYPE_FP32 dims: [2] }\n");
  CHECK_EQ_INT(config_complete(c, 1, g_in, 2, g_out, 2, 4, &e), 0);
  CHECK_EQ_INT(c->max_batch_size, 4);
  CHECK_EQ_INT(c->n_output, 1);  // a listed subset is kept as is
  CHECK_EQ_INT(config_validate(c, g_in, 2, g_out, 2, &e), 0);
  if (e.code) fprintf(stderr, "  %s\n", e.msg);
  config_free(c);

  // Explicit values are kept; KIND_AUTO with `gpus` is GPU, without stays AUTO; count 0 -> 1.
  c = parse(
      "name: 'm' backend: 'onnxruntime' max_batch_size: 8\n"
      "instance_group [{ kind: KIND_AUTO }, { name: 'g' kind: KIND_AUTO gpus: [0] count: 2 }]\n"
      "sequence_batching {}\n"
      "version_policy { all {} }\n");
  CHECK_EQ_INT(config_complete(c, 1, g_in, 2, g_out, 2, 4, &e), 0);
  CHECK_EQ_INT(c->max_batch_size, 8);
  CHECK_EQ_STR(c->platform, "");  // backend given: platform left empty
  CHECK_EQ_INT(c->scheduling_choice_case, INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_SEQUENCE_BATCHING);
  CHECK_EQ_INT(c->n_instance_group, 2);
  if (c->n_instance_group == 2) {
    CHECK_EQ_INT(c->instance_group[0]->kind, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_AUTO);
    CHECK_EQ_INT(c->instance_group[0]->count, 1);
    CHECK_EQ_STR(c->instance_group[0]->name, "m_0");
    CHECK_EQ_INT(c->instance_group[1]->kind, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU);
    CHECK_EQ_INT(c->instance_group[1]->count, 2);
    CHECK_EQ_STR(c->instance_group[1]->name, "g");
    CHECK_EQ_INT(c->instance_group[1]->n_gpus, 1);
  }
  CHECK_EQ_INT(c->version_policy->policy_choice_case, INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_ALL);
  CHECK_EQ_INT(config_validate(c, g_in, 2, g_out, 2, &e), 0);  // sequence_batching without controls
  config_free(c);

  CHECK_EQ_INT(config_complete(NULL, 0, g_in, 2, g_out, 2, 4, &e), ERR_INVALID_ARGUMENT);
}

// A config.pbtxt that says only where to run (the usual file for a vision
// model on a GPU): Triton's onnxruntime backend auto-completes the rest from
// the graph, max_batch_size included, since the config lacks inputs/outputs.
static void test_complete_file_without_tensors(void) {
  err e = {0};
  eng_io in[1] = {io("image", DT_UINT8, 3, -1, 40, 56)}, out[1] = {io("logits", DT_FP32, 2, -1, 10, 0)};
  Inference__ModelConfig *c = parse("name: 'cam' instance_group [{ kind: KIND_GPU count: 2 }]");
  if (!c) return;
  CHECK_EQ_INT(config_complete(c, 1, in, 1, out, 1, CONFIG_DEFAULT_MAX_BATCH_SIZE, &e), 0);
  CHECK_EQ_INT(c->max_batch_size, 4);
  CHECK_EQ_INT(c->n_input, 1);
  if (c->n_input == 1) {
    CHECK_EQ_STR(c->input[0]->name, "image");
    CHECK_EQ_INT(c->input[0]->data_type, INFERENCE__DATA_TYPE__TYPE_UINT8);
    CHECK_EQ_INT(c->input[0]->n_dims, 2);
    if (c->input[0]->n_dims == 2) CHECK(c->input[0]->dims[0] == 40 && c->input[0]->dims[1] == 56);
  }
  CHECK(c->n_output == 1 && c->output[0]->n_dims == 1 && c->output[0]->dims[0] == 10);
  CHECK_EQ_INT(c->scheduling_choice_case, INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_DYNAMIC_BATCHING);
  CHECK(c->dynamic_batching && c->dynamic_batching->n_preferred_batch_size == 1 &&
        c->dynamic_batching->preferred_batch_size[0] == 4);
  CHECK(c->n_instance_group == 1 && c->instance_group[0]->count == 2 &&
        c->instance_group[0]->kind == INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU);
  CHECK_EQ_INT(config_validate(c, in, 1, out, 1, &e), 0);
  if (e.code) fprintf(stderr, "  %s\n", e.msg);
  config_free(c);

  // The same with inputs listed but no outputs: still Triton's auto-complete.
  c = parse("name: 'cam' input [{ name: 'image' data_type: TYPE_UINT8 dims: [40, 56] }]");
  if (!c) return;
  CHECK_EQ_INT(config_complete(c, 1, in, 1, out, 1, 4, &e), 0);
  CHECK_EQ_INT(c->max_batch_size, 4);
  CHECK(c->n_output == 1 && c->output[0]->n_dims == 1);
  CHECK_EQ_INT(config_validate(c, in, 1, out, 1, &e), 0);
  config_free(c);

  // A graph whose first dimension is fixed cannot batch: 0, whole dims, no scheduler.
  eng_io fixed[1] = {io("image", DT_UINT8, 3, 1, 40, 56)};
  c = parse("name: 'cam' instance_group [{ kind: KIND_CPU }]");
  if (!c) return;
  CHECK_EQ_INT(config_complete(c, 1, fixed, 1, out, 1, 4, &e), 0);
  CHECK_EQ_INT(c->max_batch_size, 0);
  CHECK(c->n_input == 1 && c->input[0]->n_dims == 3 && c->input[0]->dims[0] == 1);
  CHECK_EQ_INT(c->scheduling_choice_case, INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE__NOT_SET);
  config_free(c);

  // A file's max_batch_size and preferred sizes are kept; dynamic_batching {} gets max_batch_size.
  c = parse("name: 'cam' max_batch_size: 16 dynamic_batching { max_queue_delay_microseconds: 100 }");
  if (!c) return;
  CHECK_EQ_INT(config_complete(c, 1, in, 1, out, 1, 4, &e), 0);
  CHECK_EQ_INT(c->max_batch_size, 16);
  CHECK(c->dynamic_batching && c->dynamic_batching->n_preferred_batch_size == 1 &&
        c->dynamic_batching->preferred_batch_size[0] == 16 && c->dynamic_batching->max_queue_delay_microseconds == 100);
  config_free(c);
  c = parse("name: 'cam' max_batch_size: 16 dynamic_batching { preferred_batch_size: [2, 8] }");
  if (!c) return;
  CHECK_EQ_INT(config_complete(c, 1, in, 1, out, 1, 4, &e), 0);
  CHECK(c->dynamic_batching && c->dynamic_batching->n_preferred_batch_size == 2 &&
        c->dynamic_batching->preferred_batch_size[1] == 8);
  config_free(c);
}

// Completes (as a file config) then validates; expects the error text.
static void expect_invalid(const char *text, const char *needle) {
  err e = {0};
  Inference__ModelConfig *c = parse(text);
  if (!c) return;
  CHECK_EQ_INT(config_complete(c, 1, g_in, 2, g_out, 2, 4, &e), 0);
  int rc = config_validate(c, g_in, 2, g_out, 2, &e);
  CHECK_EQ_INT(rc, ERR_INVALID_ARGUMENT);
  if (rc == 0) fprintf(stderr, "  unexpectedly valid: %s\n", text);
  else CHECK_CONTAINS(e.msg, needle);
  config_free(c);
}

static void expect_valid(const char *text) {
  err e = {0};
  Inference__ModelConfig *c = parse(text);
  if (!c) return;
  CHECK_EQ_INT(config_complete(c, 1, g_in, 2, g_out, 2, 4, &e), 0);
  int rc = config_validate(c, g_in, 2, g_out, 2, &e);
  CHECK_EQ_INT(rc, 0);
  if (rc) fprintf(stderr, "  %s\n  for: %s\n", e.msg, text);
  config_free(c);
}

#define IO_OK                                                                                        \
  "input [{ name: 'x' data_type: TYPE_FP32 dims: [3] }, { name: 'x2' data_type: TYPE_INT64 dims: [-1] }]\n" \
  "output [{ name: 'y' data_type: TYPE_FP32 dims: [2] }]\n"

static void test_validate(void) {
  expect_valid("max_batch_size: 8\n" IO_OK);
  expect_valid("max_batch_size: 8 platform: 'onnxruntime_onnx' backend: 'inferd'\n" IO_OK
               "dynamic_batching { preferred_batch_size: [4, 8] max_queue_delay_microseconds: 100 priority_levels: 2 "
               "default_priority_level: 2 priority_queue_policy { key: 1 value { max_queue_size: 3 } } }\n");
  // -1 in the config matches any size; the model's -1 matches any config size.
  expect_valid("max_batch_size: 2\n"
               "input [{ name: 'x' data_type: TYPE_FP32 dims: [-1] }, { name: 'x2' data_type: TYPE_INT64 dims: [7] }]\n"
               "output [{ name: 'y' data_type: TYPE_FP32 dims: [2] }]\n");
  // reshape stands in for dims when matching the graph.
  expect_valid("max_batch_size: 2\n"
               "input [{ name: 'x' data_type: TYPE_FP32 dims: [1, 3] reshape { shape: [3] } },"
               " { name: 'x2' data_type: TYPE_INT64 dims: [-1] }]\n"
               "output [{ name: 'y' data_type: TYPE_FP32 dims: [2, 1] reshape: { shape: [2] } }]\n");

  expect_invalid("max_batch_size: 8\n"
                 "input [{ name: 'x' data_type: TYPE_FP16 dims: [3] }, { name: 'x2' data_type: TYPE_INT64 dims: [-1] }]\n",
                 "input 'x': data_type TYPE_FP16 in config does not match the model's FP32");
  expect_invalid("max_batch_size: 8\n"
                 "input [{ name: 'x' dims: [3] }, { name: 'x2' data_type: TYPE_INT64 dims: [-1] }]\n",
                 "input 'x': data_type is missing in config (the model's is FP32)");
  expect_invalid("max_batch_size: 8\n"
                 "input [{ name: 'x' data_type: TYPE_FP32 dims: [4] }, { name: 'x2' data_type: TYPE_INT64 dims: [-1] }]\n",
                 "input 'x': dims in config (with the batch dimension: [-1,4]) does not match the model's shape [-1,3]");
  expect_invalid("max_batch_size: 0\n"
                 "input [{ name: 'x' data_type: TYPE_FP32 dims: [3] }, { name: 'x2' data_type: TYPE_INT64 dims: [-1] }]\n"
                 "output [{ name: 'y' data_type: TYPE_FP32 dims: [-1, 2] }]\n",
                 "input 'x': dims in config ([3]) does not match the model's shape [-1,3]");
  expect_invalid("max_batch_size: 8\n"
                 "input [{ name: 'x' data_type: TYPE_FP32 dims: [0] }, { name: 'x2' data_type: TYPE_INT64 dims: [-1] }]\n",
                 "input 'x': dims[0] = 0 is invalid");
  expect_invalid("max_batch_size: 8\n"
                 "input [{ name: 'x' data_type: TYPE_FP32 dims: [4] reshape { shape: [3] } },"
                 " { name: 'x2' data_type: TYPE_INT64 dims: [-1] }]\n",
                 "input 'x': reshape.shape has 3 elements but dims have 4");
  expect_invalid("max_batch_size: 8\n" IO_OK "input [{ name: 'w' data_type: TYPE_FP32 dims: [1] }]\n",
                 "input 'w' in config is not an input of the model");
  expect_invalid("max_batch_size: 8\n"
                 "input [{ name: 'x' data_type: TYPE_FP32 dims: [3] }]\n",
                 "model input 'x2' is missing from the config's inputs");
  expect_invalid("max_batch_size: 8\n" IO_OK "input [{ name: 'x' data_type: TYPE_FP32 dims: [3] }]\n",
                 "input 'x' is listed twice in the config");
  expect_invalid("max_batch_size: 8\n" IO_OK "output [{ name: 'q' data_type: TYPE_FP32 dims: [2] }]\n",
                 "output 'q' in config is not an output of the model");
  expect_invalid("max_batch_size: 8\n" IO_OK "output [{ name: 'z' data_type: TYPE_INT64 }]\n",
                 "output 'z': data_type TYPE_INT64 in config does not match the model's INT32");
  expect_invalid("max_batch_size: -1\n" IO_OK, "max_batch_size must be >= 0, got -1");
  // a full batch of one tensor over 1 TiB (a config override's dims or max_batch_size); just under it passes
  expect_invalid("max_batch_size: 8\n"
                 "input [{ name: 'x' data_type: TYPE_FP32 dims: [3] },"
                 " { name: 'x2' data_type: TYPE_INT64 dims: [17179869185] }]\n",
                 "input 'x2': a full batch (max_batch_size 8) of its dims takes more than the 1099511627776 bytes");
  expect_valid("max_batch_size: 8\n"
               "input [{ name: 'x' data_type: TYPE_FP32 dims: [3] },"
               " { name: 'x2' data_type: TYPE_INT64 dims: [17179869184] }]\n"
               "output [{ name: 'y' data_type: TYPE_FP32 dims: [2] }]\n");
  expect_invalid("max_batch_size: 8\n"
                 "input [{ name: 'x' data_type: TYPE_FP32 dims: [3] },"
                 " { name: 'x2' data_type: TYPE_INT64 dims: [9223372036854775807] }]\n",
                 "input 'x2': a full batch (max_batch_size 8) of its dims takes more than");
  expect_invalid("max_batch_size: 1048576\n"
                 "input [{ name: 'x' data_type: TYPE_FP32 dims: [-1] reshape: { shape: [262145] } },"
                 " { name: 'x2' data_type: TYPE_INT64 dims: [-1] }]\n",
                 "input 'x': a full batch (max_batch_size 1048576) of its reshape.shape takes more than");
  expect_invalid("platform: 'tensorrt_plan'\n" IO_OK, "platform 'tensorrt_plan' is not supported");
  expect_invalid("backend: 'python'\n" IO_OK, "backend 'python' is not supported");
  expect_invalid("max_batch_size: 4\n" IO_OK "dynamic_batching { preferred_batch_size: [2, 8] }",
                 "dynamic_batching.preferred_batch_size 8 exceeds max_batch_size 4");
  expect_invalid("max_batch_size: 4\n" IO_OK "dynamic_batching { preferred_batch_size: [0] }",
                 "dynamic_batching.preferred_batch_size 0 must be > 0");
  expect_invalid("max_batch_size: 4\n" IO_OK "dynamic_batching { priority_levels: 2 default_priority_level: 3 }",
                 "dynamic_batching.default_priority_level 3 must be in 1..priority_levels (2)");
  expect_invalid("max_batch_size: 4\n" IO_OK "dynamic_batching { default_priority_level: 1 }",
                 "default_priority_level 1 is set but priority_levels is 0");
  expect_invalid("max_batch_size: 4\n" IO_OK
                 "dynamic_batching { priority_levels: 2 default_priority_level: 1 priority_queue_policy { key: 5 } }",
                 "dynamic_batching.priority_queue_policy key 5 must be in 1..priority_levels (2)");
  expect_invalid("max_batch_size: 4\n" IO_OK "ensemble_scheduling {}", "ensemble_scheduling needs platform 'ensemble'");
  // a valid uint64 past what inferd takes: refused saying so, not "negative"
  expect_invalid("max_batch_size: 4\n" IO_OK "dynamic_batching { max_queue_delay_microseconds: 18446744073709551615 }",
                 "max_queue_delay_microseconds 18446744073709551615 is too large: inferd takes at most 3600000000");
  expect_invalid("max_batch_size: 4\n" IO_OK "dynamic_batching { max_queue_delay_microseconds: 3600000001 }",
                 "is too large");
  expect_valid("max_batch_size: 4\n" IO_OK "dynamic_batching { max_queue_delay_microseconds: 3600000000 }");
  // Triton's ragged batching (1-D concatenation) is refused, pointing at padding
  expect_invalid("max_batch_size: 4\n"
                 "input [{ name: 'x' data_type: TYPE_FP32 dims: [3] },"
                 " { name: 'x2' data_type: TYPE_INT64 dims: [-1] allow_ragged_batch: true }]\n",
                 "input 'x2': allow_ragged_batch is not supported");
  expect_invalid("max_batch_size: 4\n" IO_OK
                 "batch_input { kind: BATCH_ACCUMULATED_ELEMENT_COUNT target_name: 'INDEX' data_type: TYPE_FP32 "
                 "source_input: 'x2' }",
                 "batch_input is not supported (Triton's ragged batching); to batch requests of different sequence "
                 "lengths, pad them: parameters { key: \"pad_to_longest\"");
  expect_invalid("max_batch_size: 4\n" IO_OK "instance_group { count: -2 }", "instance_group[0].count -2 must be >= 0");
  expect_invalid("max_batch_size: 4\n" IO_OK "instance_group { gpus: [-1] }", "instance_group[0].gpus has invalid device -1");
  expect_invalid("max_batch_size: 4\n" IO_OK "version_policy { latest {} }",
                 "version_policy.latest.num_versions must be > 0");

  // A model whose batch dimension is fixed cannot take max_batch_size > 0.
  err e = {0};
  eng_io in[1] = {io("a", DT_FP32, 2, 2, 3, 0)}, out[1] = {io("b", DT_FP32, 1, -1, 0, 0)};
  Inference__ModelConfig *c = parse("max_batch_size: 2 input { name: 'a' data_type: TYPE_FP32 dims: [3] }");
  CHECK_EQ_INT(config_complete(c, 1, in, 1, out, 1, 4, &e), 0);
  CHECK_EQ_INT(config_validate(c, in, 1, out, 1, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "input 'a': max_batch_size 2 needs a dynamic first (batch) dimension, but the model's shape is [2,3]");
  config_free(c);

  // No outputs at all (a graph without outputs leaves none to fill).
  c = parse("input { name: 'a' data_type: TYPE_FP32 dims: [2, 3] }");
  CHECK_EQ_INT(config_complete(c, 1, in, 1, out, 0, 4, &e), 0);
  CHECK_EQ_INT(config_validate(c, in, 1, out, 0, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "the config lists no outputs");
  config_free(c);
}

// sequence_batching: control inputs are model inputs the config does not
// list; their types come from the control; auto-completion leaves them out.
static void test_sequence_batching(void) {
  err e = {0};
  eng_io in[4] = {io("INPUT", DT_INT32, 2, -1, 1, 0), io("START", DT_INT32, 2, -1, 1, 0),
                  io("READY", DT_FP32, 2, -1, 1, 0), io("CORRID", DT_UINT64, 2, -1, 1, 0)};
  eng_io out[1] = {io("OUTPUT", DT_INT32, 2, -1, 1, 0)};
  const char *head = "max_batch_size: 8\n"
                     "input { name: 'INPUT' data_type: TYPE_INT32 dims: [1] }\n"
                     "output { name: 'OUTPUT' data_type: TYPE_INT32 dims: [1] }\n";
  const char *good =
      "sequence_batching { max_sequence_idle_microseconds: 5000000 oldest { max_candidate_sequences: 4 }\n"
      "  control_input [\n"
      "    { name: 'START' control [{ kind: CONTROL_SEQUENCE_START int32_false_true: [0, 1] }] },\n"
      "    { name: 'READY' control [{ kind: CONTROL_SEQUENCE_READY fp32_false_true: [0, 1] }] },\n"
      "    { name: 'CORRID' control [{ kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 }] } ] }\n";
  struct {
    const char *seq, *msg;
  } cases[] = {
      {good, NULL},
      // a control missing: the graph input is then unlisted
      {"sequence_batching { control_input [{ name: 'START' control [{ kind: CONTROL_SEQUENCE_START "
       "int32_false_true: [0, 1] }] }] }",
       "model input 'READY' is missing from the config's inputs"},
      {"sequence_batching { control_input [{ name: 'NOPE' control [{ kind: CONTROL_SEQUENCE_START "
       "int32_false_true: [0, 1] }] }] }",
       "sequence_batching control input 'NOPE' is not an input of the model"},
      {"sequence_batching { control_input [{ name: 'INPUT' control [{ kind: CONTROL_SEQUENCE_START "
       "int32_false_true: [0, 1] }] }] }",
       "sequence_batching control input 'INPUT' is also a config input (the server fills it, the client never "
       "sends it)"},
      {"sequence_batching { control_input [{ name: 'START' control [{ kind: CONTROL_SEQUENCE_START "
       "int32_false_true: [0] }] }] }",
       "sequence_batching control input 'START' must give exactly one of int32_false_true, fp32_false_true, "
       "bool_false_true, with two values"},
      // READY's graph type is FP32: an int32 control does not match it
      {"sequence_batching { control_input [{ name: 'START' control [{ kind: CONTROL_SEQUENCE_START "
       "int32_false_true: [0, 1] }] }, { name: 'READY' control [{ kind: CONTROL_SEQUENCE_READY "
       "int32_false_true: [0, 1] }] }, { name: 'CORRID' control [{ kind: CONTROL_SEQUENCE_CORRID data_type: "
       "TYPE_UINT64 }] }] }",
       NULL},
      {"sequence_batching { control_input [{ name: 'START' control [{ kind: CONTROL_SEQUENCE_START "
       "int32_false_true: [0, 1] }] }, { name: 'READY' control [{ kind: CONTROL_SEQUENCE_START "
       "fp32_false_true: [0, 1] }] }] }",
       "sequence_batching: more than one control of kind CONTROL_SEQUENCE_START"},
      {"sequence_batching { control_input [{ name: 'CORRID' control [{ kind: CONTROL_SEQUENCE_CORRID "
       "data_type: TYPE_STRING }] }] }",
       "sequence_batching control input 'CORRID': CONTROL_SEQUENCE_CORRID data_type must be TYPE_UINT64, "
       "TYPE_INT64, TYPE_UINT32 or TYPE_INT32 (TYPE_STRING is not supported)"},
      {"sequence_batching { state [{ input_name: 'a' output_name: 'b' data_type: TYPE_INT32 dims: [-1] }] }",
       "sequence_batching.state 'a': dims must be fixed and positive (variable state dims are not supported)"},
      {"sequence_batching { max_sequence_idle_microseconds: 3600000001 }",
       "sequence_batching.max_sequence_idle_microseconds 3600000001 is too large: inferd takes at most 3600000000 "
       "(one hour)"},
      {"sequence_batching { oldest { preferred_batch_size: [9] } }",
       "sequence_batching.oldest.preferred_batch_size 9 must be in 1..max_batch_size (8)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char text[2048];
    snprintf(text, sizeof text, "%s%s", head, cases[i].seq);
    Inference__ModelConfig *c = parse(text);
    if (!c) continue;
    e = (err){0};
    int rc = config_validate(c, in, 4, out, 1, &e);
    if (i == 5) {  // the type mismatch: named with the control input
      CHECK_EQ_INT(rc, ERR_INVALID_ARGUMENT);
      CHECK(strstr(e.msg, "control input 'READY'") != NULL);
    } else if (!cases[i].msg) {
      CHECK_EQ_INT(rc, 0);
      if (rc) fprintf(stderr, "  case %zu: %s\n", i, e.msg);
    } else {
      CHECK_EQ_INT(rc, ERR_INVALID_ARGUMENT);
      CHECK_EQ_STR(e.msg, cases[i].msg);
    }
    config_free(c);
  }
  // implicit state: an unlisted input and output of the graph, zeros to start
  eng_io sin[2] = {io("INPUT", DT_INT32, 2, -1, 1, 0), io("S_IN", DT_INT64, 2, -1, 2, 0)};
  eng_io sout[2] = {io("OUTPUT", DT_INT32, 2, -1, 1, 0), io("S_OUT", DT_INT64, 2, -1, 2, 0)};
  struct {
    const char *state, *msg;
  } states[] = {
      {"input_name: 'S_IN' output_name: 'S_OUT' data_type: TYPE_INT64 dims: [2] initial_state { zero_data: true }",
       NULL},
      {"input_name: 'S_IN' output_name: 'S_OUT' data_type: TYPE_INT64 dims: [3]", "state input 'S_IN'"},
      {"input_name: 'S_IN' output_name: 'NOPE' data_type: TYPE_INT64 dims: [2]",
       "sequence_batching.state output 'NOPE' is not an output of the model"},
      {"input_name: 'S_IN' output_name: 'OUTPUT' data_type: TYPE_INT64 dims: [2]",
       "sequence_batching.state output 'OUTPUT' is also a config output (the server keeps it)"},
      {"input_name: 'S_IN' output_name: 'S_OUT' data_type: TYPE_INT64 dims: [2] initial_state { data_file: 'x' }",
       "sequence_batching.state 'S_IN': only a zero_data initial_state is supported (data_file is not)"},
      {"input_name: 'S_IN' output_name: 'S_OUT' data_type: TYPE_INT64 dims: [2] use_growable_memory: true",
       "sequence_batching.state 'S_IN': use_growable_memory is not supported"},
  };
  for (size_t i = 0; i < sizeof states / sizeof *states; i++) {
    char text[1024];
    snprintf(text, sizeof text, "%ssequence_batching { state [{ %s }] }", head, states[i].state);
    Inference__ModelConfig *c = parse(text);
    if (!c) continue;
    e = (err){0};
    int rc = config_validate(c, sin, 2, sout, 2, &e);
    if (!states[i].msg) {
      CHECK_EQ_INT(rc, 0);
      if (rc) fprintf(stderr, "  state case %zu: %s\n", i, e.msg);
      CHECK_EQ_INT(config_complete(c, 1, sin, 2, sout, 2, 8, &e), 0);
      CHECK_EQ_INT(c->n_output, 1);  // listed: kept as is
    } else {
      CHECK_EQ_INT(rc, ERR_INVALID_ARGUMENT);
      CHECK(strstr(e.msg, states[i].msg) != NULL);
      if (!strstr(e.msg, states[i].msg)) fprintf(stderr, "  state case %zu: %s\n", i, e.msg);
    }
    config_free(c);
  }
  // auto-completion leaves the state input and output out
  Inference__ModelConfig *sc =
      parse("sequence_batching { state [{ input_name: 'S_IN' output_name: 'S_OUT' data_type: TYPE_INT64 dims: [2] }] }");
  if (sc) {
    CHECK_EQ_INT(config_complete(sc, 1, sin, 2, sout, 2, 8, &e), 0);
    CHECK_EQ_INT(sc->n_input, 1);
    CHECK_EQ_INT(sc->n_output, 1);
    if (sc->n_output == 1) CHECK_EQ_STR(sc->output[0]->name, "OUTPUT");
    CHECK_EQ_INT(config_validate(sc, sin, 2, sout, 2, &e), 0);
    config_free(sc);
  }

  // auto-completion lists the graph's inputs but the control inputs
  Inference__ModelConfig *c = parse(good);
  if (c) {
    CHECK_EQ_INT(config_complete(c, 1, in, 4, out, 1, 8, &e), 0);
    CHECK_EQ_INT(c->n_input, 1);
    if (c->n_input == 1) CHECK_EQ_STR(c->input[0]->name, "INPUT");
    CHECK_EQ_INT(config_validate(c, in, 4, out, 1, &e), 0);
    config_free(c);
  }
}

// What inferd cannot serve is named, every reason at once, before any graph is looked at.
static void test_check_supported(void) {
  err e = {0};
  // an ensemble is served (server/core/ensemble_plan.c checks its steps); its platform and its
  // scheduling come together
  Inference__ModelConfig *c = parse("name: 'ens' platform: 'ensemble' ensemble_scheduling { step [ { model_name: 'x' } ] }");
  if (c) {
    CHECK_EQ_INT(config_check_supported(c, &e), 0);
    config_free(c);
  }
  c = parse("name: 'ens' platform: 'ensemble' dynamic_batching {}");
  if (c) {
    CHECK_EQ_INT(config_check_supported(c, &e), ERR_INVALID_ARGUMENT);
    CHECK_EQ_STR(e.msg, "platform 'ensemble' needs ensemble_scheduling (model 'ens')");
    config_free(c);
  }
  c = parse("name: 'seq' backend: 'python' sequence_batching {} "
            "model_transaction_policy { decoupled: true }");
  if (c) {  // sequence_batching is served
    CHECK_EQ_INT(config_check_supported(c, &e), ERR_INVALID_ARGUMENT);
    CHECK_EQ_STR(e.msg, "backend 'python' is not supported (inferd runs ONNX graphs only); "
                        "model_transaction_policy.decoupled is not supported for ONNX models: they answer every "
                        "request exactly once (only the 'repeat' and 'inferd_llm' backends are decoupled)");
    config_free(c);
  }
  // the built-in repeat backend (server/core/repeat.h) may be decoupled; it takes no platform
  c = parse("name: 'rep' backend: 'repeat' model_transaction_policy { decoupled: true }");
  if (c) {
    CHECK_EQ_INT(config_check_supported(c, &e), 0);
    config_free(c);
  }
  c = parse("name: 'rep' backend: 'repeat' platform: 'onnxruntime_onnx'");
  if (c) {
    CHECK_EQ_INT(config_check_supported(c, &e), ERR_INVALID_ARGUMENT);
    CHECK_EQ_STR(e.msg, "backend 'repeat' takes no platform (model 'rep' names 'onnxruntime_onnx')");
    config_free(c);
  }
  c = parse("name: 'ens' platform: 'ensemble' ensemble_scheduling {} model_transaction_policy { decoupled: true }");
  if (c) {
    CHECK_EQ_INT(config_check_supported(c, &e), ERR_INVALID_ARGUMENT);
    CHECK_EQ_STR(e.msg, "model_transaction_policy.decoupled is not supported for ensemble models: they answer every "
                        "request exactly once (only the 'repeat' and 'inferd_llm' backends are decoupled)");
    config_free(c);
  }
  c = parse("name: 'ok' platform: 'onnxruntime_onnx' dynamic_batching {}");
  if (c) {
    CHECK_EQ_INT(config_check_supported(c, &e), 0);
    config_free(c);
  }
  c = parse("name: 'ok' backend: 'onnxruntime'");
  if (c) {
    CHECK_EQ_INT(config_check_supported(c, &e), 0);
    config_free(c);
  }
}

// --disable-auto-complete-config: a file config keeps its own batching
// choice (no dynamic_batching added) and gets only the structural defaults.
static void test_no_auto_complete(void) {
  err e = {0};
  Inference__ModelConfig *c = parse("name: 'm' max_batch_size: 8 "
                                        "input [{ name: 'x' data_type: TYPE_FP32 dims: [3] }] "
                                        "output [{ name: 'y' data_type: TYPE_FP32 dims: [2] }]");
  if (!c) return;
  CHECK_EQ_INT(config_complete(c, 1, g_in, 2, g_out, 2, CONFIG_NO_AUTO_COMPLETE, &e), 0);
  CHECK_EQ_INT(c->scheduling_choice_case, INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE__NOT_SET);
  CHECK_EQ_INT(c->n_input, 1);
  CHECK_EQ_INT(c->n_output, 1);
  CHECK_EQ_INT(c->max_batch_size, 8);
  CHECK_EQ_STR(c->platform, "onnxruntime_onnx");
  CHECK_EQ_INT(c->n_instance_group, 1);
  config_free(c);

  // Triton's core fills preferred sizes whatever the backend does.
  c = parse("name: 'm' max_batch_size: 8 "
            "input [{ name: 'x' data_type: TYPE_FP32 dims: [3] }] "
            "output [{ name: 'y' data_type: TYPE_FP32 dims: [2] }] dynamic_batching {}");
  if (!c) return;
  CHECK_EQ_INT(config_complete(c, 1, g_in, 2, g_out, 2, CONFIG_NO_AUTO_COMPLETE, &e), 0);
  CHECK(c->dynamic_batching && c->dynamic_batching->n_preferred_batch_size == 1 &&
        c->dynamic_batching->preferred_batch_size[0] == 8);
  config_free(c);

  // A config without tensors and max_batch_size is not filled from the graph.
  c = config_new("m");
  if (!c) return;
  CHECK_EQ_INT(config_complete(c, 0, g_in, 2, g_out, 2, CONFIG_NO_AUTO_COMPLETE, &e), 0);
  CHECK_EQ_INT(c->max_batch_size, 0);
  CHECK_EQ_INT(c->n_input, 0);
  CHECK_EQ_INT(c->n_output, 0);
  config_free(c);
}

// KIND_AUTO settles on the devices visible at load.
static void test_resolve_kinds(void) {
  Inference__ModelConfig *c = parse("name: 'm' instance_group [{ kind: KIND_AUTO }, { kind: KIND_CPU }]");
  if (!c) return;
  config_resolve_kinds(c, 0, 0);
  CHECK_EQ_INT(c->instance_group[0]->kind, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_CPU);
  config_free(c);
  c = parse("name: 'm' instance_group [{ kind: KIND_AUTO }, { kind: KIND_CPU }]");
  if (!c) return;
  config_resolve_kinds(c, 2, 0);
  CHECK_EQ_INT(c->instance_group[0]->kind, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU);
  CHECK_EQ_INT(c->instance_group[1]->kind, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_CPU);
  config_free(c);
  // a STRING tensor keeps KIND_AUTO on the CPU even with GPUs (Triton's simple_string on a GPU host)
  c = parse("name: 'm' input [{ name: 'I' data_type: TYPE_STRING dims: [16] }] "
            "output [{ name: 'O' data_type: TYPE_INT32 dims: [16] }] instance_group [{ kind: KIND_AUTO }]");
  if (!c) return;
  config_resolve_kinds(c, 1, 0);
  CHECK_EQ_INT(c->instance_group[0]->kind, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_CPU);
  config_free(c);
  c = parse("name: 'm' output [{ name: 'O' data_type: TYPE_STRING dims: [16] }] "
            "instance_group [{ kind: KIND_AUTO }, { kind: KIND_GPU }]");
  if (!c) return;
  config_resolve_kinds(c, 1, 0);
  CHECK_EQ_INT(c->instance_group[0]->kind, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_CPU);
  CHECK_EQ_INT(c->instance_group[1]->kind, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU);  // asked for: refused at load
  config_free(c);
  // a graph with ai.onnx.ml nodes (no GPU path) keeps KIND_AUTO on the CPU; KIND_GPU stays as asked
  c = parse("name: 'm' input [{ name: 'X' data_type: TYPE_FP32 dims: [4] }] "
            "output [{ name: 'Y' data_type: TYPE_INT64 dims: [1] }] instance_group [{ kind: KIND_AUTO }, { kind: KIND_GPU }]");
  if (!c) return;
  config_resolve_kinds(c, 2, 1);
  CHECK_EQ_INT(c->instance_group[0]->kind, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_CPU);
  CHECK_EQ_INT(c->instance_group[1]->kind, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU);
  config_free(c);
  // the same config without such nodes goes to the GPU
  c = parse("name: 'm' input [{ name: 'X' data_type: TYPE_FP32 dims: [4] }] "
            "output [{ name: 'Y' data_type: TYPE_INT64 dims: [1] }] instance_group [{ kind: KIND_AUTO }]");
  if (!c) return;
  config_resolve_kinds(c, 2, 0);
  CHECK_EQ_INT(c->instance_group[0]->kind, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU);
  config_free(c);
}

// The switches of the graph's load-time passes, read before completion.
static void test_graph_opts(void) {
  err e = {0};
  eng_graph_opts o;
  Inference__ModelConfig *c = parse("name: 'm'");
  if (!c) return;
  CHECK_EQ_INT(config_graph_opts(c, &o, &e), 0);
  CHECK_EQ_INT(o.no_fuse_attention, 0);
  CHECK_EQ_INT(o.no_merge_qkv, 0);
  CHECK_EQ_INT(o.qdq_float, 0);
  config_free(c);
  c = parse("parameters { key: 'fuse_attention' value { string_value: '0' } }"
            "parameters { key: 'merge_qkv' value { string_value: '0' } }"
            "parameters { key: 'qdq_integer' value { string_value: '0' } }");
  if (!c) return;
  CHECK_EQ_INT(config_graph_opts(c, &o, &e), 0);
  CHECK_EQ_INT(o.no_fuse_attention, 1);
  CHECK_EQ_INT(o.no_merge_qkv, 1);
  CHECK_EQ_INT(o.qdq_float, 1);  // qdq_integer 0: the float form on every instance
  config_free(c);
  c = parse("parameters { key: 'qdq_integer' value { string_value: '1' } }");
  if (!c) return;
  CHECK_EQ_INT(config_graph_opts(c, &o, &e), 0);
  CHECK_EQ_INT(o.qdq_float, 0);
  config_free(c);
  c = parse("parameters { key: 'merge_qkv' value { string_value: 'yes' } }");
  if (!c) return;
  CHECK_EQ_INT(config_graph_opts(c, &o, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "parameters: merge_qkv 'yes' is not one of 0, 1");
  config_free(c);
}

// The bounds a config override sent over the network may not pass: the
// largest allowed values pass, one more is refused naming field, bound and flag.
static void expect_limits(const char *text, const config_limits *lim, const char *want) {
  Inference__ModelConfig *c = parse(text);
  if (!c) return;
  err e = {0};
  int rc = config_check_limits(c, lim, &e);
  if (!want) {
    CHECK_EQ_INT(rc, 0);
  } else {
    CHECK_EQ_INT(rc, ERR_INVALID_ARGUMENT);
    CHECK(strstr(e.msg, want) != NULL);
    if (!strstr(e.msg, want)) fprintf(stderr, "  got: %s\n  want: %s\n", e.msg, want);
  }
  config_free(c);
}

static void test_limits(void) {
  config_limits lim = {CONFIG_MAX_BATCH_SIZE_DEFAULT, CONFIG_MAX_PRIORITY_LEVELS_DEFAULT};
  expect_limits("max_batch_size: 65536 dynamic_batching { priority_levels: 1024 default_priority_level: 1 }", &lim,
                NULL);
  expect_limits("max_batch_size: 65537", &lim,
                "max_batch_size 65537 exceeds this server's limit of 65536 (--model-max-batch-size)");
  expect_limits("max_batch_size: 2147483647", &lim, "max_batch_size 2147483647 exceeds this server's limit of 65536");
  expect_limits("max_batch_size: 8 dynamic_batching { priority_levels: 1025 default_priority_level: 1 }", &lim,
                "dynamic_batching.priority_levels 1025 exceeds this server's limit of 1024 "
                "(--model-max-priority-levels)");
  // 4e9 would truncate to a small uint32 in the batcher: refused as given
  expect_limits("max_batch_size: 8 dynamic_batching { priority_levels: 4294967297 default_priority_level: 1 }", &lim,
                "dynamic_batching.priority_levels 4294967297 exceeds");
  config_limits small = {16, 4};
  expect_limits("max_batch_size: 16 dynamic_batching { priority_levels: 4 default_priority_level: 4 }", &small, NULL);
  expect_limits("max_batch_size: 17", &small, "max_batch_size 17 exceeds this server's limit of 16");
  expect_limits("max_batch_size: 4 dynamic_batching { priority_levels: 5 default_priority_level: 1 }", &small,
                "priority_levels 5 exceeds this server's limit of 4");
}

int main(void) {
  g_in[0] = io("x", DT_FP32, 2, -1, 3, 0);
  g_in[1] = io("x2", DT_INT64, 2, -1, -1, 0);
  g_out[0] = io("y", DT_FP32, 2, -1, 2, 0);
  g_out[1] = io("z", DT_INT32, 1, -1, 0, 0);
  test_complete_missing_config();
  test_complete_no_batching();
  test_validate_unshaped_output();
  test_complete_file_config();
  test_complete_file_without_tensors();
  test_validate();
  test_sequence_batching();
  test_check_supported();
  test_no_auto_complete();
  test_resolve_kinds();
  test_graph_opts();
  test_limits();
  CHECK_DONE();
}
