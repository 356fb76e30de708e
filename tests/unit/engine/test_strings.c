// Tests STRING tensors in the engine: engine/cpu/plan.c's edges (the wire
// layout decoded into k_str views at the inputs, encoded at the outputs),
// engine/ops/str/ (Cast to and from STRING, reached through elem.c's
// Cast), the index family on strings (Identity, Gather), the arena sized
// per batch from the 32-byte view, the input checks naming the tensor, and
// engine/model.c placing the GPU instances of a model with a STRING tensor on
// the host (the CUDA plan carries no STRING element).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine/cpu/plan.h"
#include "engine/graph/graph.h"
#include "engine/model.h"
#include "engine/repo/config.h"
#include "engine/repo/model_config.h"
#include "engine/repo/pbtxt.h"
#include "kernels/base/strwire.h"
#include "onnx_build.h"

enum { ONNX_INT64 = 7, ONNX_STRING = 8 };

// N [-1, 3] STRING: Y = Cast(Cast(N, INT64) + Cast(N, INT64), STRING);
// T [-1, 2] STRING: Z = Identity(T), W = Gather(T, [1, 0, 1], axis 1).
static eng_graph *load_graph(void) {
  ob *b = ob_new(13);
  ob_input(b, "N", ONNX_STRING, 2, (int64_t[]){-1, 3});
  ob_input(b, "T", ONNX_STRING, 2, (int64_t[]){-1, 2});
  int64_t idx[] = {1, 0, 1};
  ob_init(b, "idx", ONNX_INT64, 1, (int64_t[]){3}, idx, sizeof idx);
  ob_attr_i(b, ob_node(b, "Cast", "c0", "N", "n64"), "to", ONNX_INT64);
  ob_node(b, "Add", "add", "n64,n64", "sum");
  ob_attr_i(b, ob_node(b, "Cast", "c1", "sum", "Y"), "to", ONNX_STRING);
  ob_node(b, "Identity", "id", "T", "Z");
  ob_attr_i(b, ob_node(b, "Gather", "g", "T,idx", "W"), "axis", 1);
  ob_output(b, "Y", ONNX_STRING, 2, (int64_t[]){-1, 3});
  ob_output(b, "Z", ONNX_STRING, 2, (int64_t[]){-1, 2});
  ob_output(b, "W", ONNX_STRING, 2, (int64_t[]){-1, 3});
  CHECK_EQ_INT(ob_save(b, "strings.onnx"), 0);
  eng_graph *g = NULL;
  err e = {0};
  if (eng_graph_load("strings.onnx", &g, &e) != 0) fprintf(stderr, "  load: %s\n", e.msg);
  CHECK(g != NULL);
  return g;
}

// n C strings in the wire layout, into buf; returns its size.
static size_t wire(uint8_t *buf, const char *const *s, size_t n) {
  size_t off = 0;
  for (size_t i = 0; i < n; i++) {
    size_t l = strlen(s[i]);
    strwire_put_len(buf + off, (uint32_t)l);
    memcpy(buf + off + 4, s[i], l);
    off += 4 + l;
  }
  return off;
}

static void check_wire(const eng_tensor *t, const char *const *want, size_t n) {
  uint8_t buf[512];
  size_t len = wire(buf, want, n);
  CHECK_EQ_INT(t->dt, DT_STRING);
  if (t->bytes != len || memcmp(t->data, buf, len) != 0)
    CHECK_FAIL_("output of %zu bytes, want %zu: %.*s", t->bytes, len, (int)t->bytes, (const char *)t->data);
  check_count_++;
}

static eng_tensor str_tensor(uint8_t *buf, size_t bytes, int64_t rows, int64_t cols) {
  return (eng_tensor){.dt = DT_STRING, .ndims = 2, .dims = {rows, cols}, .data = buf, .bytes = bytes};
}

static void test_plan(eng_graph *g) {
  eng_plan *p = NULL;
  err e = {0};
  CHECK_EQ_INT(eng_plan_create(g, 4, &p, &e), 0);
  if (!p) return;
  // N's views, 4 rows of 3: 32 bytes an element, sized from the shape
  CHECK(eng_plan_arena_bytes(p) >= 4 * 3 * 32);
  const char *n[] = {"1", " -2", "+30", "4", "5", "1000000000000"};
  const char *t[] = {"a", "a string longer than the 24 bytes a view holds", "", "\0"};
  uint8_t nb[256], tb[256];
  eng_tensor in[2] = {str_tensor(nb, wire(nb, n, 6), 2, 3), str_tensor(tb, wire(tb, t, 4), 2, 2)};
  eng_tensor out[3];
  CHECK_EQ_INT(eng_plan_run(p, in, 2, out, 3, &e), 0);
  const char *y[] = {"2", "-4", "60", "8", "10", "2000000000000"};
  check_wire(&out[0], y, 6);
  check_wire(&out[1], t, 4);
  const char *w[] = {t[1], t[0], t[1], t[3], t[2], t[3]};
  check_wire(&out[2], w, 6);
  CHECK(out[0].dims[0] == 2 && out[0].dims[1] == 3);
  // one row: the same plan, the outputs sized for it
  in[0] = str_tensor(nb, wire(nb, n, 3), 1, 3);
  in[1] = str_tensor(tb, wire(tb, t, 2), 1, 2);
  CHECK_EQ_INT(eng_plan_run(p, in, 2, out, 3, &e), 0);
  check_wire(&out[0], y, 3);
  // a layout that does not hold the shape's elements, named
  in[0].bytes -= 1;
  CHECK_EQ_INT(eng_plan_run(p, in, 2, out, 3, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "input 'N'");
  CHECK_CONTAINS(e.msg, "ends inside an element");
  // a string that holds no number fails the Cast, naming the element
  const char *bad[] = {"1", "2", "three"};
  in[0] = str_tensor(nb, wire(nb, bad, 3), 1, 3);
  CHECK_EQ_INT(eng_plan_run(p, in, 2, out, 3, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "element 2 ('three') is not a number");
  eng_plan_destroy(p);
}

// Where picks views like numbers; an op that would read them as numbers
// (Trilu, which zero-fills) is refused when planned, naming the node.
static void test_where_and_refused(void) {
  ob *b = ob_new(13);
  ob_input(b, "A", ONNX_STRING, 2, (int64_t[]){-1, 2});
  ob_input(b, "B", ONNX_STRING, 2, (int64_t[]){-1, 2});
  uint8_t c[] = {1, 0};
  ob_init(b, "c", 9, 1, (int64_t[]){2}, c, sizeof c);
  ob_node(b, "Where", "w", "c,A,B", "Y");
  ob_output(b, "Y", ONNX_STRING, 2, (int64_t[]){-1, 2});
  CHECK_EQ_INT(ob_save(b, "strings_where.onnx"), 0);
  b = ob_new(14);
  ob_input(b, "A", ONNX_STRING, 2, (int64_t[]){2, 2});
  ob_node(b, "Trilu", "tri", "A", "Y");
  ob_output(b, "Y", ONNX_STRING, 2, (int64_t[]){2, 2});
  CHECK_EQ_INT(ob_save(b, "strings_trilu.onnx"), 0);
  eng_graph *g = NULL;
  eng_plan *p = NULL;
  err e = {0};
  if (eng_graph_load("strings_where.onnx", &g, &e) == 0 && eng_plan_create(g, 2, &p, &e) == 0) {
    const char *a[] = {"a0", "a string longer than twenty-four bytes"}, *bb[] = {"b0", "b1"};
    uint8_t ab[128], bbuf[64];
    eng_tensor in[2] = {str_tensor(ab, wire(ab, a, 2), 1, 2), str_tensor(bbuf, wire(bbuf, bb, 2), 1, 2)};
    eng_tensor out[1];
    CHECK_EQ_INT(eng_plan_run(p, in, 2, out, 1, &e), 0);
    const char *y[] = {"a0", "b1"};
    check_wire(&out[0], y, 2);
  } else {
    fprintf(stderr, "  where: %s\n", e.msg);
    CHECK(0);
  }
  eng_plan_destroy(p);
  eng_graph_destroy(g);
  g = NULL;
  p = NULL;
  CHECK_EQ_INT(eng_graph_load("strings_trilu.onnx", &g, &e), 0);
  if (g) {
    CHECK_EQ_INT(eng_plan_create(g, 0, &p, &e), ERR_INVALID_ARGUMENT);
    CHECK_CONTAINS(e.msg, "node 'tri' (op_type 'Trilu'): STRING tensors are not supported by this op");
    eng_plan_destroy(p);
    eng_graph_destroy(g);
  }
}

static eng_model_config *config(const char *text) {
  ProtobufCMessage *m = NULL;
  err e = {0};
  if (pbtxt_parse(&inference__model_config__descriptor, text, strlen(text), "config.pbtxt", &m, &e) != 0) {
    fprintf(stderr, "  %s\n", e.msg);
    CHECK(0);
    return NULL;
  }
  eng_model_config *c = NULL;
  CHECK_EQ_INT(eng_model_config_from_proto((const Inference__ModelConfig *)m, &c, &e), 0);
  protobuf_c_message_free_unpacked(m, NULL);
  return c;
}

// A GPU instance of a model with STRING tensors runs on the host: the load
// succeeds (as if one GPU were visible; nothing touches it), the instance is a
// CPU one, and the placement note names the tensor, for the load log. A KIND_CPU
// instance of it moves nothing and has no note. g stays the caller's.
static void test_gpu_on_host(eng_graph *g) {
  (void)g;
  static const char io[] =
      "max_batch_size: 4\n"
      "input [{ name: 'N' data_type: TYPE_STRING dims: [3] }, { name: 'T' data_type: TYPE_STRING dims: [2] }]\n"
      "output [{ name: 'Y' data_type: TYPE_STRING dims: [3] }, { name: 'Z' data_type: TYPE_STRING dims: [2] },"
      " { name: 'W' data_type: TYPE_STRING dims: [3] }]\n";
  char text[1024];
  for (int gpu = 1; gpu >= 0; gpu--) {
    snprintf(text, sizeof text, "%sinstance_group [{ kind: %s count: 2 %s}]\n", io, gpu ? "KIND_GPU" : "KIND_CPU",
             gpu ? "gpus: [0] " : "");
    eng_model_config *c = config(text);
    eng_graph *own = load_graph();  // a model that loads owns its graph
    eng_model *m = NULL;
    err e = {0};
    if (c && own) {
      CHECK_EQ_INT(eng_model_create(own, c, gpu, &m, &e), 0);
      if (!m) eng_graph_destroy(own);
    }
    if (m) {
      CHECK_EQ_INT(eng_model_n_instances(m), 2);
      CHECK_EQ_INT(eng_model_n_gpu_instances(m), 0);
      CHECK_EQ_INT(eng_model_instance_device(m, 0), -1);
      CHECK_EQ_INT(eng_model_instance_device(m, 1), -1);
      const char *note = eng_model_placement_note(m);
      if (gpu) {
        CHECK(note != NULL);
        if (note) {
          CHECK_CONTAINS(note, "input 'N' is TYPE_STRING, which the GPU plan does not carry");
          CHECK_CONTAINS(note, "its 2 GPU instances run on the host");
        }
      } else {
        CHECK(note == NULL);
      }
      eng_model_destroy(m);
    }
    eng_model_config_free(c);
  }
}

int main(void) {
  eng_graph *g = load_graph();
  if (g) {
    test_plan(g);
    test_gpu_on_host(g);
  }
  test_where_and_refused();
  eng_graph_destroy(g);
  CHECK_DONE();
}
