// tests/unit/engine/attn_case.h: what the attention tests (test_attn.c,
// test_attn_qkv.c) share: counting a graph's nodes of one op, a tensor over
// caller data, a seeded uniform draw, the scaled error of one output
// against another, and loading a model with graph options and running it
// once on the CPU plan. Test-only, header only.
#ifndef INFERD_TESTS_ATTN_CASE_H
#define INFERD_TESTS_ATTN_CASE_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include <stdlib.h>

#include "check.h"
#include "engine/graph/graph.h"
#include "engine/cpu/plan.h"
#include "engine/tensor.h"

static inline size_t count_op(const eng_graph *g, const char *op) {
  size_t c = 0;
  for (size_t i = 0; i < eng_graph_n_nodes(g); i++) c += strcmp(eng_graph_node(g, i)->op_type, op) == 0;
  return c;
}

// xorshift64: uniform in [lo, hi) from the state *s.
static inline float attn_urand(uint64_t *s, float lo, float hi) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return lo + (hi - lo) * (float)((*s >> 40) * (1.0 / 16777216.0));
}

static inline eng_tensor mk(dtype dt, int nd, const int64_t *d, void *data) {
  eng_tensor t = {dt, nd, {0}, data, 0};
  for (int i = 0; i < nd; i++) t.dims[i] = d[i];
  t.bytes = (size_t)eng_numel(nd, t.dims) * dtype_size(dt);
  return t;
}

// Largest |a - b| / (atol + rtol |b|); NaN must meet NaN.
static inline double worst(const float *a, const float *b, size_t n, double rtol, double atol) {
  double w = 0;
  for (size_t i = 0; i < n; i++) {
    if (isnan(a[i]) || isnan(b[i])) {
      if (!(isnan(a[i]) && isnan(b[i]))) return INFINITY;
      continue;
    }
    double r = fabs((double)a[i] - b[i]) / (atol + rtol * fabs((double)b[i]));
    if (r > w) w = r;
  }
  return w;
}

// Loads path with o, plans it on the CPU, runs ins; output 0 into *out
// (malloc'd), the graph's fused attentions and merged projections into
// *attn and *merged (either may be NULL).
static inline int attn_load_run(const char *path, const eng_graph_opts *o, const eng_tensor *ins, size_t n_in,
                                float **out, size_t *n_out_el, size_t *attn, size_t *merged, err *e) {
  eng_graph *g = NULL;
  eng_plan *p = NULL;
  *out = NULL;
  TRY(eng_graph_load_opts(path, o, &g, e));
  if (attn) *attn = eng_graph_n_attention(g);
  if (merged) *merged = eng_graph_n_qkv_merged(g);
  int rc = eng_plan_create(g, 0, &p, e);
  eng_tensor y[4];
  memset(y, 0, sizeof y);
  size_t no = eng_graph_n_outputs(g);
  if (!rc) rc = eng_plan_run(p, ins, n_in, y, no < 4 ? no : 4, e);
  if (!rc) {
    *n_out_el = (size_t)eng_numel(y[0].ndims, y[0].dims);
    *out = malloc(*n_out_el * sizeof **out + 1);
    memcpy(*out, y[0].data, *n_out_el * sizeof **out);
  }
  eng_plan_destroy(p);
  eng_graph_destroy(g);
  return rc;
}

#ifdef ATTN_ZOO
// The committed export `model` (ATTN_ZOO/<model>/1/model.onnx) loaded as
// is, its path in path[cap]; NULL (checked as a failure, said) when it
// does not load.
static inline eng_graph *zoo_load(const char *model, char *path, size_t cap) {
  snprintf(path, cap, "%s/%s/1/model.onnx", ATTN_ZOO, model);
  eng_graph *g = NULL;
  err e = {0};
  int rc = eng_graph_load(path, &g, &e);
  CHECK_EQ_INT(rc, 0);
  if (rc) fprintf(stderr, "%s: %s\n", model, e.msg);
  return rc ? NULL : g;
}

// Inputs for a loaded export (at most 4; n_in returned): dynamic dims as
// batch b (dim 0) and sequence seq; INT64 ones as ids, or for a mask its
// last 3 positions off (and batch row 1 all off when row_off and b > 1);
// FP32 ones (pixels) drawn from *rng. bufs[i] is each input's malloc'd data.
static inline size_t zoo_inputs(const eng_graph *g, int64_t b, int64_t seq, int row_off, uint64_t *rng,
                                eng_tensor ins[4], void *bufs[4]) {
  size_t n_in = eng_graph_n_inputs(g);
  for (size_t i = 0; i < n_in && i < 4; i++) {
    const eng_io *io = eng_graph_input(g, i);
    int64_t d[ENG_MAX_DIMS];
    for (int k = 0; k < io->ndims; k++) d[k] = io->dims[k] >= 0 ? io->dims[k] : (k == 0 ? b : seq);
    size_t n = (size_t)eng_numel(io->ndims, d);
    bufs[i] = calloc(n + 1, 8);
    if (io->dt == DT_INT64) {
      int64_t *x = bufs[i];
      int is_mask = strstr(io->name, "mask") != NULL;
      for (size_t k = 0; k < n; k++) {
        bool row1 = row_off && b > 1 && k >= (size_t)seq && k < 2 * (size_t)seq;
        x[k] = is_mask ? (int64_t)((k % (size_t)seq) < (size_t)seq - 3 && !row1) : (int64_t)((k * 7 + 3) % 50);
      }
    } else {
      float *x = bufs[i];
      for (size_t k = 0; k < n; k++) x[k] = attn_urand(rng, -1, 1);
    }
    ins[i] = mk(io->dt, io->ndims, d, bufs[i]);
  }
  return n_in;
}
#endif

#endif
