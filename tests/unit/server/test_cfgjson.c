// test_cfgjson.c: a JSON config override (server/core/cfgjson.h) written as
// text format reads back, through the config.pbtxt parser, as the config
// the JSON describes; what does not fit ModelConfig is refused naming the
// field.
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine/repo/pbtxt.h"
#include "model_config.pb-c.h"
#include "server/core/cfgjson.h"

// JSON -> text -> ModelConfig; NULL (and *e set) when either step fails.
static Inference__ModelConfig *from_json(const char *json, err *e) {
  char *text = NULL;
  if (srv_cfgjson_to_text(&inference__model_config__descriptor, json, strlen(json), &text, e) != 0) return NULL;
  ProtobufCMessage *m = NULL;
  int rc = pbtxt_parse(&inference__model_config__descriptor, text, strlen(text), "config override", &m, e);
  if (rc) fprintf(stderr, "  text: %s\n  %s\n", text, e->msg);
  free(text);
  return rc ? NULL : (Inference__ModelConfig *)m;
}

static void free_cfg(Inference__ModelConfig *c) {
  if (c) protobuf_c_message_free_unpacked(&c->base, NULL);
}

static void test_triton_forms(void) {
  err e = {0};
  // tritonclient's example: an int32 as a string
  Inference__ModelConfig *c = from_json("{\"max_batch_size\":\"16\"}", &e);
  CHECK(c != NULL);
  if (c) CHECK_EQ_INT(c->max_batch_size, 16);
  free_cfg(c);
  // the extension's example shape: camelCase too, enums by name, repeated messages, int64 dims as strings
  c = from_json("{\"name\": \"m\", \"backend\": \"onnxruntime\", \"maxBatchSize\": 4,"
                " \"input\": [{\"name\": \"IN\", \"data_type\": \"TYPE_FP32\", \"dims\": [\"-1\", 3]}],"
                " \"output\": [{\"name\": \"OUT\", \"dataType\": 11, \"dims\": [2], \"label_filename\": \"l.txt\"}],"
                " \"dynamic_batching\": {\"preferred_batch_size\": [2, 4], \"max_queue_delay_microseconds\": 100},"
                " \"instance_group\": [{\"kind\": \"KIND_CPU\", \"count\": 2}],"
                " \"parameters\": {\"pad_to_longest\": {\"string_value\": \"a \\\"q\\\" \\n\"}},"
                " \"version_policy\": null, \"optimization\": {}}",
                &e);
  CHECK(c != NULL);
  if (c) {
    CHECK_EQ_STR(c->name, "m");
    CHECK_EQ_STR(c->backend, "onnxruntime");
    CHECK_EQ_INT(c->max_batch_size, 4);
    CHECK_EQ_INT(c->n_input, 1);
    CHECK_EQ_INT(c->input[0]->data_type, INFERENCE__DATA_TYPE__TYPE_FP32);
    CHECK_EQ_INT(c->input[0]->n_dims, 2);
    CHECK_EQ_INT(c->input[0]->dims[0], -1);
    CHECK_EQ_INT(c->input[0]->dims[1], 3);
    CHECK_EQ_INT(c->output[0]->data_type, 11);
    CHECK_EQ_STR(c->output[0]->label_filename, "l.txt");
    CHECK_EQ_INT(c->dynamic_batching->n_preferred_batch_size, 2);
    CHECK_EQ_INT(c->dynamic_batching->max_queue_delay_microseconds, 100);
    CHECK_EQ_INT(c->instance_group[0]->count, 2);
    CHECK_EQ_INT(c->instance_group[0]->kind, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_CPU);
    CHECK_EQ_INT(c->n_parameters, 1);
    CHECK_EQ_STR(c->parameters[0]->key, "pad_to_longest");
    CHECK_EQ_STR(c->parameters[0]->value->string_value, "a \"q\" \n");
    CHECK(c->version_policy == NULL);
    CHECK(c->optimization != NULL);
  }
  free_cfg(c);
  c = from_json("  {}  ", &e);  // empty: the graph completes it at load
  CHECK(c != NULL);
  free_cfg(c);
}

static void expect_refused(const char *json, const char *needle) {
  err e = {0};
  Inference__ModelConfig *c = from_json(json, &e);
  CHECK(c == NULL);
  CHECK_EQ_INT(e.code, ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, needle);
  free_cfg(c);
}

static void test_refused(void) {
  expect_refused("\"parameters\": {\"config\": {{\"max_batch_size\": \"16\"}}}", "is not valid JSON");
  expect_refused("{\"max_batch_size\": 1", "is not valid JSON (at byte");
  expect_refused("{} {}", "is not valid JSON (at byte 3)");
  expect_refused("[1]", "an object (inference.ModelConfig) is expected");
  expect_refused("{\"max_batch_sise\": 4}", "unknown field 'max_batch_sise' in inference.ModelConfig");
  expect_refused("{\"input\": [{\"name\": \"x\", \"dims\": [1.5]}]}", "input[0].dims[0]: 1.5 is not an integer");
  expect_refused("{\"input\": [{\"dims\": [\"1e3\"]}]}", "input[0].dims[0]: \"1e3\" is not an integer");
  expect_refused("{\"input\": {\"name\": \"x\"}}", "input: an array is expected");
  expect_refused("{\"input\": [{\"data_type\": \"TYPE_NOPE\"}]}", "'TYPE_NOPE' is not a value of");
  expect_refused("{\"name\": 3}", "name: a string is expected");
  expect_refused("{\"parameters\": [1]}", "parameters: an object (a map) is expected");
  expect_refused("{\"max_batch_size\": true}", "max_batch_size: an integer");
  // the range is the text parser's: an int32 past its bounds
  expect_refused("{\"max_batch_size\": \"99999999999\"}", "max_batch_size");
  // a string with a control character or a quote stays one string token
  err e = {0};
  Inference__ModelConfig *c = from_json("{\"name\": \"a\\u0001b\\\\\"}", &e);
  CHECK(c != NULL);
  if (c) CHECK_EQ_STR(c->name, "a\001b\\");
  free_cfg(c);
}

int main(void) {
  test_triton_forms();
  test_refused();
  CHECK_DONE();
}
