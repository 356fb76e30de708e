// engine/cpu/plan_probe.c: every value's element type at create, also when
// the planned shapes are known only per batch (a sequence length). ONNX
// types never depend on shapes, so one shape inference with each unknown dim
// given a probe size yields the types every run will see; a backend that
// decides at load by type (the CUDA plan's inits, eng_cuda__load_dt) reads
// them from p->load_dt. The probe keeps nothing else: the inferred shapes,
// folds and per-node marks it made are undone, so the first run plans
// exactly as it would have without it.
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/plan_internal.h"

// 1 broadcasts against any size, so a model that adds a fixed-size table
// ([1, 512, H]) to a value of the dynamic length still infers.
#define PROBE_DIM 1

// What eng_plan__infer_nodes writes, saved to be put back.
typedef struct saved {
  eng_tensor *cur;
  uint8_t *known, *folded;
  int *mask_rows_same;
  void **fold_buf;
  size_t *fold_cap;
} saved;

static void saved_free(saved *s) {
  free(s->cur);
  free(s->known);
  free(s->folded);
  free(s->mask_rows_same);
  free(s->fold_buf);
  free(s->fold_cap);
}

static int save(const eng_plan *p, saved *s) {
  size_t nv = p->n_values + 1, nn = p->n_nodes + 1;
  *s = (saved){malloc(nv * sizeof *s->cur), malloc(nv), malloc(nn), malloc(nn * sizeof(int)),
               malloc(nv * sizeof *s->fold_buf), malloc(nv * sizeof *s->fold_cap)};
  if (!s->cur || !s->known || !s->folded || !s->mask_rows_same || !s->fold_buf || !s->fold_cap) {
    saved_free(s);
    return -1;
  }
  memcpy(s->cur, p->cur, p->n_values * sizeof *s->cur);
  memcpy(s->known, p->known, p->n_values);
  memcpy(s->folded, p->folded, p->n_nodes);
  memcpy(s->fold_buf, p->fold_buf, p->n_values * sizeof *s->fold_buf);
  memcpy(s->fold_cap, p->fold_cap, p->n_values * sizeof *s->fold_cap);
  for (size_t i = 0; i < p->n_nodes; i++) s->mask_rows_same[i] = p->params[i].mask_rows_same;
  return 0;
}

static void restore(eng_plan *p, const saved *s) {
  memcpy(p->cur, s->cur, p->n_values * sizeof *p->cur);
  memcpy(p->known, s->known, p->n_values);
  memcpy(p->folded, s->folded, p->n_nodes);
  for (size_t v = 0; v < p->n_values; v++)
    if (p->fold_buf[v] != s->fold_buf[v]) {  // a buffer the probe's folds made
      free(p->fold_buf[v]);
      p->fold_buf[v] = s->fold_buf[v];
      p->fold_cap[v] = s->fold_cap[v];
    }
  for (size_t i = 0; i < p->n_nodes; i++) p->params[i].mask_rows_same = s->mask_rows_same[i];
}

void eng_plan__probe_types(eng_plan *p) {
  const eng_graph *g = p->g;
  // planned shapes, or a run already inferred: the types are in p->cur. The
  // folds' buffers are all unallocated before any inference, so restore can
  // tell the probe's from the plan's (a buffer regrown in place has no
  // earlier owner to give back).
  if (p->have_layout || p->have_sig || !p->load_dt) return;
  for (size_t i = 0; i < p->n_inputs; i++) {
    const eng_io *io = eng_graph_input(g, i);
    if (io->ndims < 0 || io->dt == DT_INVALID) return;  // a subgraph's input: only a run says
  }
  saved s;
  if (save(p, &s) != 0) return;  // out of memory: types stay unknown, as before the probe
  size_t folds = p->folds, mask_rows = p->mask_rows_shared;
  for (size_t v = 0; v < p->n_values; v++)  // a value the probe does not reach stays DT_INVALID
    if (eng_graph_value(g, v)->kind == ENG_VALUE_NODE) memset(&p->cur[v], 0, sizeof p->cur[v]);
  for (size_t i = 0; i < p->n_inputs; i++) {
    eng_tensor *t = &p->cur[eng_graph_input_value(g, i)];
    for (int d = 0; d < t->ndims; d++)
      if (t->dims[d] < 0) t->dims[d] = PROBE_DIM;
  }
  // value inputs' bytes come with the first run: the probe treats them as
  // computed, so a node whose shape reads them fails it and the values from
  // there on stay DT_INVALID (as do those after any other failure)
  err e = {0};
  (void)eng_plan__infer_nodes(p, 0, &e);
  for (size_t v = 0; v < p->n_values; v++)
    if (eng_graph_value(g, v)->kind == ENG_VALUE_NODE) p->load_dt[v] = p->cur[v].dt;
  restore(p, &s);
  p->folds = folds;
  p->mask_rows_shared = mask_rows;
  saved_free(&s);
}
