// test_ensemble_plan.c: an ensemble's config checked against its composing
// models' configs and turned into a dataflow plan (server/core/ensemble_plan.h):
// tensors numbered with the ensemble's inputs first, steps bound to them,
// every problem reported at once, UNAVAILABLE when only members are missing.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine/repo/config.h"
#include "engine/repo/pbtxt.h"
#include "server/core/ensemble_plan.h"

static Inference__ModelConfig *parse(const char *text) {
  ProtobufCMessage *m = NULL;
  err e = {0};
  if (pbtxt_parse(&inference__model_config__descriptor, text, strlen(text), "test", &m, &e) != 0) {
    CHECK_EQ_STR(e.msg, "");  // shows the parse error
    return NULL;
  }
  return (Inference__ModelConfig *)m;
}

#define F4(n) "{ name: '" n "' data_type: TYPE_FP32 dims: [ 4 ] }"

static const char *ADD =
    "name: 'add' max_batch_size: 8 input [ " F4("A") ", " F4("B") " ] output [ " F4("Z") " ]";
static const char *NEG = "name: 'neg' max_batch_size: 8 input [ " F4("X") " ] output [ " F4("Y") " ]";

// diamond: IN -> neg -> n1; IN -> neg -> n2; add(n1, n2) -> OUT
static const char *DIAMOND =
    "name: 'd' platform: 'ensemble' max_batch_size: 4 input [ " F4("IN") " ] output [ " F4("OUT") " ] "
    "ensemble_scheduling { step [ "
    "{ model_name: 'add' model_version: -1 input_map { key: 'A' value: 'n1' } input_map { key: 'B' value: 'n2' } "
    "  output_map { key: 'Z' value: 'OUT' } }, "
    "{ model_name: 'neg' model_version: 1 input_map { key: 'X' value: 'IN' } output_map { key: 'Y' value: 'n1' } }, "
    "{ model_name: 'neg' model_version: -1 input_map { key: 'X' value: 'IN' } output_map { key: 'Y' value: 'n2' } } ] }";

static void test_diamond_plan(void) {
  Inference__ModelConfig *e_cfg = parse(DIAMOND), *add = parse(ADD), *neg = parse(NEG);
  if (!e_cfg || !add || !neg) return;
  CHECK(srv_ens_is_ensemble(e_cfg) && !srv_ens_is_ensemble(add));
  srv_ens_member mem[3] = {{add, NULL}, {neg, NULL}, {neg, NULL}};
  srv_ens_plan *p = NULL;
  err e = {0};
  CHECK_EQ_INT(srv_ens_plan_create(e_cfg, mem, &p, NULL, 0, &e), 0);
  if (p) {
    CHECK_EQ_INT(p->n_steps, 3);
    CHECK_EQ_INT(p->n_tensors, 4);  // IN first, then n1, n2, OUT as the maps name them
    CHECK_EQ_STR(p->tensors[0], "IN");
    CHECK_EQ_STR(p->tensors[p->out_tensor[0]], "OUT");
    CHECK_EQ_STR(p->steps[0].model, "add");
    CHECK_EQ_STR(p->steps[0].version, "");
    CHECK_EQ_STR(p->steps[1].version, "1");
    CHECK_EQ_STR(p->steps[0].in[1].name, "B");
    CHECK_EQ_STR(p->tensors[p->steps[0].in[1].tensor], "n2");
    CHECK_EQ_INT(p->steps[1].in[0].tensor, 0);
    CHECK_EQ_INT(p->max_batch, 4);
    CHECK_EQ_STR(p->in[0].name, "IN");
    CHECK_EQ_INT(p->in[0].dt, DT_FP32);
    CHECK_EQ_INT(p->in[0].ndims, 1);
    CHECK_EQ_INT(p->out[0].dims[0], 4);
  }
  srv_ens_plan_destroy(p);
  config_free(e_cfg);
  config_free(add);
  config_free(neg);
}

static void test_every_reason(void) {
  Inference__ModelConfig *add = parse(ADD), *neg = parse(NEG);
  Inference__ModelConfig *c = parse(
      "name: 'bad' platform: 'ensemble' max_batch_size: 16 "
      "input [ " F4("IN") ", " F4("SPARE") " ] output [ " F4("OUT") ", { name: 'I' data_type: TYPE_INT64 dims: [ 4 ] } ] "
      "ensemble_scheduling { step [ "
      "{ model_name: 'neg' input_map { key: 'X' value: 'IN' } output_map { key: 'Y' value: 'I' } }, "
      "{ model_name: 'add' input_map { key: 'A' value: 'c2' } input_map { key: 'Q' value: 'IN' } "
      "  output_map { key: 'Z' value: 'c1' } }, "
      "{ model_name: 'neg' input_map { key: 'X' value: 'c1' } output_map { key: 'Y' value: 'c2' } }, "
      "{ model_name: 'gone' input_map { key: 'X' value: 'IN' } output_map { key: 'Y' value: 'OUT' } } ] }");
  if (!add || !neg || !c) return;
  srv_ens_member mem[4] = {{neg, NULL}, {add, NULL}, {neg, NULL}, {NULL, "it is not loaded"}};
  srv_ens_plan *p = NULL;
  err e = {0};
  char all[SRV_ENS_WHY_MAX];
  CHECK_EQ_INT(srv_ens_plan_create(c, mem, &p, all, sizeof all, &e), ERR_INVALID_ARGUMENT);
  CHECK(p == NULL);
  // more than an error holds: the first reasons, how many more, and all of them for the log
  CHECK_CONTAINS(e.msg, "step 3: composing model 'gone' is not available: it is not loaded");
  CHECK_CONTAINS(e.msg, "more reason(s) (the server log lists them all)");
  CHECK(strlen(e.msg) < sizeof e.msg - 1);
  CHECK_CONTAINS(all, "the ensemble's max_batch_size 16 exceeds its composing models' ('neg' 8, 'add' 8)");
  CHECK_CONTAINS(all, "step 3: composing model 'gone' is not available: it is not loaded");
  CHECK_CONTAINS(all, "step 1: input_map key 'Q' is not an input of model 'add'");
  CHECK_CONTAINS(all, "step 1: input 'B' of model 'add' is not mapped");
  CHECK_CONTAINS(all, "ensemble input 'SPARE' is not consumed by any step");
  CHECK_CONTAINS(all, "output 'Y' of model 'neg' is TYPE_FP32 but ensemble output 'I' takes TYPE_INT64");
  CHECK_CONTAINS(all, "steps 1 ('add'), 2 ('neg') depend on each other's outputs (a cycle)");
  // the missing member's output is produced, of a type not known: not reported as unproduced
  CHECK(!strstr(all, "ensemble output 'OUT' is not produced"));
  config_free(c);
  // only a member missing: UNAVAILABLE (loading it later may help)
  c = parse("name: 'e' platform: 'ensemble' max_batch_size: 8 input [ " F4("IN") " ] output [ " F4("OUT") " ] "
            "ensemble_scheduling { step [ { model_name: 'later' input_map { key: 'X' value: 'IN' } "
            "output_map { key: 'Y' value: 'OUT' } } ] }");
  if (c) {
    srv_ens_member one = {NULL, "it is not loaded"};
    CHECK_EQ_INT(srv_ens_plan_create(c, &one, &p, NULL, 0, &e), ERR_UNAVAILABLE);
    CHECK_EQ_STR(e.msg, "step 0: composing model 'later' is not available: it is not loaded");
    config_free(c);
  }
  // a tensor produced twice, one an ensemble input, and an own-io problem stops there
  c = parse("name: 'e' platform: 'ensemble' max_batch_size: 8 input [ " F4("IN") " ] output [ " F4("OUT") " ] "
            "ensemble_scheduling { step [ "
            "{ model_name: 'neg' input_map { key: 'X' value: 'IN' } output_map { key: 'Y' value: 'OUT' } }, "
            "{ model_name: 'neg' input_map { key: 'X' value: 'IN' } output_map { key: 'Y' value: 'OUT' } }, "
            "{ model_name: 'neg' input_map { key: 'X' value: 'OUT' } output_map { key: 'Y' value: 'IN' } } ] }");
  if (c) {
    srv_ens_member m3[3] = {{neg, NULL}, {neg, NULL}, {neg, NULL}};
    CHECK_EQ_INT(srv_ens_plan_create(c, m3, &p, NULL, 0, &e), ERR_INVALID_ARGUMENT);
    CHECK_CONTAINS(e.msg, "tensor 'OUT' is produced twice: by step 0 ('neg') and by step 1 ('neg')");
    CHECK_CONTAINS(e.msg, "tensor 'IN' is an ensemble input and also output 'Y' of model 'neg' (step 2)");
    config_free(c);
  }
  c = parse("name: 'e' platform: 'ensemble' input [ { name: 'IN' dims: [ 0 ] } ] ensemble_scheduling { }");
  if (c) {
    CHECK_EQ_INT(srv_ens_plan_create(c, NULL, &p, NULL, 0, &e), ERR_INVALID_ARGUMENT);
    CHECK_CONTAINS(e.msg, "ensemble_scheduling lists no steps");
    CHECK_CONTAINS(e.msg, "an ensemble must list its outputs");
    CHECK_CONTAINS(e.msg, "ensemble input 'IN': data_type is missing or unknown");
    CHECK_CONTAINS(e.msg, "ensemble input 'IN': dims must be -1 or positive");
    config_free(c);
  }
  // Triton's other rules: no instance_group, optimization or model_warmup of its own, no empty map,
  // no step output left unused
  c = parse("name: 'e' platform: 'ensemble' max_batch_size: 8 input [ " F4("IN") " ] output [ " F4("OUT") " ] "
            "instance_group [ { count: 2 } ] optimization { } model_warmup [ { name: 'w' } ] "
            "ensemble_scheduling { step [ "
            "{ model_name: 'neg' input_map { key: 'X' value: 'IN' } output_map { key: 'Y' value: 'OUT' } }, "
            "{ model_name: 'neg' input_map { key: 'X' value: 'IN' } output_map { key: 'Y' value: 'spare' } }, "
            "{ model_name: 'neg' } ] }");
  if (c) {
    srv_ens_member m3[3] = {{neg, NULL}, {neg, NULL}, {neg, NULL}};
    CHECK_EQ_INT(srv_ens_plan_create(c, m3, &p, all, sizeof all, &e), ERR_INVALID_ARGUMENT);
    CHECK_CONTAINS(all, "instance_group cannot be given for an ensemble");
    CHECK_CONTAINS(all, "optimization cannot be given for an ensemble");
    CHECK_CONTAINS(all, "model_warmup cannot be given for an ensemble");
    CHECK_CONTAINS(all, "step 2: input_map is empty");
    CHECK_CONTAINS(all, "step 2: output_map is empty");
    CHECK_CONTAINS(all, "step 2: input 'X' of model 'neg' is not mapped");
    CHECK_CONTAINS(all, "tensor 'spare' (from step 1, model 'neg') is used by no step and is not an ensemble output");
    config_free(c);
  }
  config_free(add);
  config_free(neg);
}

int main(void) {
  test_diamond_plan();
  test_every_reason();
  CHECK_DONE();
}
