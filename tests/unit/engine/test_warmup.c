// Tests engine/warmup.c: eng_warmup_check, the runs and input bytes of a
// whole load's model_warmup, summed over its entries and instances, against
// the limits (issue 31: the limits were per entry, so 5,000 entries each
// within them held a load for half an hour), without wrapping, and one
// error naming every limit passed with its flag; and eng_warmup_run on a
// real (tiny) model, stopping before its next run once the cancel flag is set.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine/graph/graph.h"
#include "engine/model.h"
#include "engine/repo/config.h"
#include "engine/repo/model_config.h"
#include "engine/repo/pbtxt.h"
#include "engine/warmup.h"
#include "onnx_build.h"

// max_batch_size 8, input X FP32 [4] (16 bytes a row), then n entries of
// batch_size rows and count runs each.
static eng_model_config *config(size_t n, unsigned batch, unsigned count, const char *dims) {
  size_t cap = 512 + n * 160;
  char *text = malloc(cap);
  if (!text) return NULL;
  size_t k = (size_t)snprintf(text, cap,
                              "max_batch_size: 8\ninput [{ name: 'X' data_type: TYPE_FP32 dims: [4] }]\n"
                              "output [{ name: 'Y' data_type: TYPE_FP32 dims: [4] }]\ninstance_group [{ kind: KIND_CPU count: 1 }]\n"
                              "model_warmup [\n");
  for (size_t i = 0; i < n && k < cap; i++)
    k += (size_t)snprintf(text + k, cap - k,
                          "%s{ name: 'w%zu' batch_size: %u count: %u inputs { key: 'X' value: "
                          "{ data_type: TYPE_FP32 dims: [%s] zero_data: true } } }\n",
                          i ? "," : "", i, batch, count, dims);
  CHECK(k + 3 < cap);
  snprintf(text + k, cap - k, "]\n");
  ProtobufCMessage *m = NULL;
  err e = {0};
  int rc = pbtxt_parse(&inference__model_config__descriptor, text, strlen(text), "config.pbtxt", &m, &e);
  free(text);
  CHECK_EQ_INT(rc, 0);
  if (rc) {
    fprintf(stderr, "  %s\n", e.msg);
    return NULL;
  }
  eng_model_config *c = NULL;
  rc = eng_model_config_from_proto((const Inference__ModelConfig *)m, &c, &e);
  CHECK_EQ_INT(rc, 0);
  protobuf_c_message_free_unpacked(m, NULL);
  return rc ? NULL : c;
}

static int check(size_t n, unsigned batch, unsigned count, const char *dims, int instances,
                 const eng_warmup_limits *lim, err *e) {
  eng_model_config *c = config(n, batch, count, dims);
  if (!c) return -1;
  memset(e, 0, sizeof *e);
  int rc = eng_warmup_check(c, instances, lim, e);
  eng_model_config_free(c);
  return rc;
}

// The runs of every entry add up: each within the default alone, over it together.
static void test_runs_summed_over_entries(void) {
  err e;
  CHECK_EQ_INT(check(10, 1, 100, "4", 1, NULL, &e), 0);  // exactly the default, 1,000
  CHECK_EQ_INT(check(11, 1, 100, "4", 1, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "1100 run(s) (the counts of 11 entries x 1 instance(s)), over the 1000 one load may");
  CHECK_CONTAINS(e.msg, "--model-warmup-max-runs");
  CHECK(strstr(e.msg, "--model-warmup-max-mib") == NULL);  // only the limit passed is named
  // instances multiply; a count of 0 means 1
  eng_warmup_limits lim = {.max_runs = 8};
  CHECK_EQ_INT(check(4, 1, 0, "4", 2, &lim, &e), 0);
  CHECK_EQ_INT(check(3, 1, 1, "4", 3, &lim, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "9 run(s) (the counts of 3 entries x 3 instance(s)), over the 8 one load may");
}

// The input bytes of every entry add up: each entry far within the budget.
static void test_bytes_summed_over_entries(void) {
  err e;
  eng_warmup_limits lim = {.max_runs = 1 << 20, .max_bytes = 4u << 20};
  // 8 rows x 16 bytes x 32 runs = 4 KiB per entry; 1,024 of them are exactly 4 MiB
  CHECK_EQ_INT(check(1024, 8, 32, "4", 1, &lim, &e), 0);
  CHECK_EQ_INT(check(1025, 8, 32, "4", 1, &lim, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "4198400 bytes of input (the most, entry 'w0': 32 run(s) on 1 instance(s) of 128 bytes each)");
  CHECK_CONTAINS(e.msg, "over the 4194304 one load may feed (inferd --model-warmup-max-mib)");
  CHECK(strstr(e.msg, "--model-warmup-max-runs") == NULL);
  // batch_size 0 is one row; instances multiply
  CHECK_EQ_INT(check(1, 0, 1, "4", 2, &(eng_warmup_limits){.max_bytes = 32}, &e), 0);
  CHECK_EQ_INT(check(1, 0, 1, "4", 3, &(eng_warmup_limits){.max_bytes = 32}, &e), ERR_INVALID_ARGUMENT);
}

// Both passed: one message says both, as Triton's config errors list every reason.
static void test_every_reason_named(void) {
  err e;
  eng_warmup_limits lim = {.max_runs = 10, .max_bytes = 100};
  CHECK_EQ_INT(check(5, 8, 1000, "4", 1, &lim, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "5000 run(s)");
  CHECK_CONTAINS(e.msg, "--model-warmup-max-runs");
  CHECK_CONTAINS(e.msg, " and 640000 bytes of input");
  CHECK_CONTAINS(e.msg, "--model-warmup-max-mib");
}

// Dims whose product passes 2^64, and counts x instances x entries that would:
// the sums saturate instead of wrapping under the limit.
static void test_no_wrap(void) {
  err e;
  CHECK_EQ_INT(check(1, 8, 1, "2305843009213693952", 1, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "more than 18446744073709551615 bytes of input");
  eng_warmup_limits lim = {.max_runs = UINT64_MAX - 1, .max_bytes = UINT64_MAX - 1};
  CHECK_EQ_INT(check(2, 8, 1000, "2305843009213693951", 1024, &lim, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "more than");
}

// One entry's count past ENG_WARMUP_MAX_COUNT is named as that entry's typo, before the sums.
static void test_count_per_entry(void) {
  err e;
  CHECK_EQ_INT(check(1, 1, 3000000, "4", 1, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "model_warmup 'w0': count 3000000 exceeds 1000");
}

// Y = Relu(X), X [-1, 4] FP32, created with cfg (one CPU instance).
static eng_model *relu_model(const eng_model_config *cfg) {
  ob *b = ob_new(13);
  ob_input(b, "X", 1, 2, (int64_t[]){-1, 4});
  ob_node(b, "Relu", "relu", "X", "Y");
  ob_output(b, "Y", 1, 2, (int64_t[]){-1, 4});
  CHECK_EQ_INT(ob_save(b, "warmup_relu.onnx"), 0);
  eng_graph *g = NULL;
  err e = {0};
  if (eng_graph_load("warmup_relu.onnx", &g, &e) != 0) {
    fprintf(stderr, "  load: %s\n", e.msg);
    CHECK(0);
    return NULL;
  }
  eng_model *m = NULL;
  if (eng_model_create(g, cfg, 0, &m, &e) != 0) {
    fprintf(stderr, "  create: %s\n", e.msg);
    eng_graph_destroy(g);
    CHECK(0);
    return NULL;
  }
  return m;
}

// The runs happen, counted; with the flag set none does and the warmup
// fails as cancelled (not as the entry's fault: no entry named).
static void test_run_and_cancel(void) {
  eng_model_config *c = config(2, 2, 3, "4");
  eng_model *m = c ? relu_model(c) : NULL;
  if (!m) {
    eng_model_config_free(c);
    return;
  }
  atomic_int stop = 0;
  eng_warmup_limits lim = {.cancel = &stop};
  uint64_t runs = 99;
  err e = {0};
  CHECK_EQ_INT(eng_warmup_run(m, c, ".", NULL, &lim, &runs, &e), 0);
  CHECK_EQ_INT((int)runs, 6);
  atomic_store(&stop, 1);
  CHECK_EQ_INT(eng_warmup_run(m, c, ".", NULL, &lim, &runs, &e), ERR_UNAVAILABLE);
  CHECK_EQ_STR(e.msg, "cancelled: server shutting down");
  CHECK_EQ_INT((int)runs, 0);
  // over the budget: refused before any run, whatever the flag says
  lim.max_runs = 5;
  CHECK_EQ_INT(eng_warmup_run(m, c, ".", NULL, &lim, &runs, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "6 run(s)");
  CHECK_EQ_INT((int)runs, 0);
  eng_model_destroy(m);
  eng_model_config_free(c);
}

// No warmup at all is within any budget.
static void test_empty(void) {
  err e;
  CHECK_EQ_INT(check(0, 1, 1, "4", 1, &(eng_warmup_limits){.max_runs = 1, .max_bytes = 1}, &e), 0);
}

int main(void) {
  test_runs_summed_over_entries();
  test_bytes_summed_over_entries();
  test_every_reason_named();
  test_no_wrap();
  test_count_per_entry();
  test_empty();
  test_run_and_cancel();
  CHECK_DONE();
}
