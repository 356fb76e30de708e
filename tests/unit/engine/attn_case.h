// tests/unit/engine/attn_case.h: what the attention tests (test_attn.c,
// test_attn_qkv.c) share: counting a graph's nodes of one op, a tensor over
// caller data, a seeded uniform draw and the scaled error of one output
// against another. Test-only, header only.
#ifndef INFERD_TESTS_ATTN_CASE_H
#define INFERD_TESTS_ATTN_CASE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "engine/graph.h"
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

#endif
