// test_repeat_cfg.c: Triton's repeat backend's config checked at load
// (server/core/repeat_cfg.h): Triton's repeat_int32 config accepted with its
// tensors in config order; a wrong one refused with every reason at once, in
// the backend's words.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine/repo/config.h"
#include "engine/repo/pbtxt.h"
#include "server/core/repeat_cfg.h"

static Inference__ModelConfig *parse(const char *text) {
  ProtobufCMessage *m = NULL;
  err e = {0};
  if (pbtxt_parse(&inference__model_config__descriptor, text, strlen(text), "test", &m, &e) != 0) {
    CHECK_EQ_STR(e.msg, "");  // shows the parse error
    return NULL;
  }
  return (Inference__ModelConfig *)m;
}

#define T(n, t, d) "{ name: '" n "' data_type: " t " dims: [ " d " ] }"

// Triton's repeat_int32 (qa/L0_decoupled), as tests/triton_examples/gen_repo.py writes it
static const char *GOOD = "name: 'repeat_int32' backend: 'repeat' max_batch_size: 0 "
                          "model_transaction_policy { decoupled: True } "
                          "input [ " T("IN", "TYPE_INT32", "-1") ", " T("DELAY", "TYPE_UINT32", "-1") ", " T(
                              "WAIT", "TYPE_UINT32", "1") " ] "
                          "output [ " T("OUT", "TYPE_INT32", "1") ", " T("IDX", "TYPE_UINT32", "1") " ] "
                          "instance_group [ { kind: KIND_CPU } ]";

static void test_good(void) {
  Inference__ModelConfig *c = parse(GOOD);
  if (!c) return;
  CHECK_EQ_INT(srv_repeat_cfg_is_repeat(c), 1);
  srv_repeat_cfg *p = NULL;
  err e = {0};
  CHECK_EQ_INT(srv_repeat_cfg_create(c, &p, &e), 0);
  if (p) {
    CHECK_EQ_STR(p->in[0].name, "IN");
    CHECK_EQ_INT(p->in[0].dt, DT_INT32);
    CHECK_EQ_INT(p->in[0].ndims, 1);
    CHECK_EQ_INT(p->in[0].dims[0], -1);
    CHECK_EQ_STR(p->in[1].name, "DELAY");
    CHECK_EQ_INT(p->in[1].dt, DT_UINT32);
    CHECK_EQ_STR(p->in[2].name, "WAIT");
    CHECK_EQ_INT(p->in[2].dims[0], 1);
    CHECK_EQ_STR(p->out[0].name, "OUT");
    CHECK_EQ_INT(p->out[0].dt, DT_INT32);
    CHECK_EQ_STR(p->out[1].name, "IDX");
    CHECK_EQ_INT(p->out[1].dt, DT_UINT32);
  }
  srv_repeat_cfg_destroy(p);
  config_free(c);
  c = parse("name: 'x' backend: 'onnxruntime'");
  if (c) CHECK_EQ_INT(srv_repeat_cfg_is_repeat(c), 0);
  config_free(c);
}

static void test_every_reason(void) {
  Inference__ModelConfig *c =
      parse("name: 'r' backend: 'repeat' max_batch_size: 4 "
            "input [ " T("IN", "TYPE_INT64", "-1") ", " T("DELAY", "TYPE_UINT32", "3") ", " T("WAIT", "TYPE_UINT32",
                                                                                             "2") " ] "
            "output [ " T("OUT", "TYPE_INT32", "1") ", " T("INDEX", "TYPE_UINT32", "1, 1") " ]");
  if (!c) return;
  srv_repeat_cfg *p = NULL;
  err e = {0};
  CHECK_EQ_INT(srv_repeat_cfg_create(c, &p, &e), ERR_INVALID_ARGUMENT);
  CHECK(p == NULL);
  CHECK_CONTAINS(e.msg, "repeat backend only supports models with max_batch_size == 0");
  CHECK_CONTAINS(e.msg, "needs model_transaction_policy { decoupled: true }");
  CHECK_CONTAINS(e.msg, "expected IN datatype to be INT32, got TYPE_INT64");
  CHECK_CONTAINS(e.msg, "expected second output tensor name to be IDX, got INDEX");
  CHECK_CONTAINS(e.msg, "expected IN and DELAY shape to match, got [-1] and [3]");
  CHECK_CONTAINS(e.msg, "expected WAIT shape to be [1], got [2]");
  CHECK_CONTAINS(e.msg, "expected IDX shape to be [1], got [1,1]");
  config_free(c);
  c = parse("name: 'r' backend: 'repeat' model_transaction_policy { decoupled: true } input [ " T("IN", "TYPE_INT32",
                                                                                                  "-1") " ]");
  if (c) {
    CHECK_EQ_INT(srv_repeat_cfg_create(c, &p, &e), ERR_INVALID_ARGUMENT);
    CHECK_EQ_STR(e.msg, "expected 3 inputs, got 1; expected 2 outputs, got 0");
  }
  config_free(c);
}

int main(void) {
  test_good();
  test_every_reason();
  CHECK_DONE();
}
