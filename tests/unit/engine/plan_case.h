// tests/unit/engine/plan_case.h: the harness the op tests share: a model built
// with onnx_build.h is written to the test's MODEL file, loaded, planned and
// (tc_run) run once; outputs and the first error stay in the tc. Test-only,
// header only. Include after onnx_build.h and #define MODEL "file.onnx".
#ifndef INFERD_TESTS_PLAN_CASE_H
#define INFERD_TESTS_PLAN_CASE_H

#include <string.h>

#include "engine/graph/graph.h"
#include "engine/cpu/plan.h"
#include "onnx_build.h"

typedef struct tc {
  eng_graph *g;
  eng_plan *p;
  eng_tensor out[4];
  err e;
} tc;

// A tensor over caller-owned data (bytes from the shape).
static inline eng_tensor T(dtype dt, int nd, const int64_t *dims, const void *data) {
  eng_tensor t = {dt, nd, {0}, (void *)data, 0};
  for (int i = 0; i < nd; i++) t.dims[i] = dims[i];
  t.bytes = (size_t)eng_numel(nd, t.dims) * dtype_size(dt);
  return t;
}

// Saves b (freeing it), loads it and plans it for max_batch; the first failing code.
static inline int tc_load(tc *c, ob *b, int max_batch) {
  memset(c, 0, sizeof *c);
  if (ob_save(b, MODEL) != 0) return err_set(&c->e, ERR_INTERNAL, "cannot write " MODEL);
  TRY(eng_graph_load(MODEL, &c->g, &c->e));
  return eng_plan_create(c->g, max_batch, &c->p, &c->e);
}

// tc_load with max_batch 0, then one run.
static inline int tc_run(tc *c, ob *b, const eng_tensor *ins, size_t n_in, size_t n_out) {
  TRY(tc_load(c, b, 0));
  return eng_plan_run(c->p, ins, n_in, c->out, n_out, &c->e);
}

static inline void tc_close(tc *c) {
  eng_plan_destroy(c->p);
  eng_graph_destroy(c->g);
}

#endif
