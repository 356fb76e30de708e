// engine/cuda/plan_cuda_prep.c: a CUDA plan's create (plan_cuda.c builds it,
// this file warms it up) and its preparation before it serves
// (plan_cuda.h's top): the layouts timed per warmed batch size (FP32,
// AUTO), each batch size prepared by running it once on every slot (which
// captures its graphs, makes its cuDNN plans and tunes its GEMMs), and the
// switch to serving, after which whatever a submit still captures or tunes
// is counted as lazy and unprepared sizes may run padded (plan_cuda.c's
// submit and finish do the padding).
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/plan_cuda.h"
#include "engine/cuda/plan_cuda_state.h"
#include "kernels/base/clock.h"

// The inputs of a zeros batch of `rows` (the static shapes otherwise) into in.
static int zeros_batch(eng_cuda_plan *p, int rows, eng_tensor *in, err *e) {
  const eng_plan *pl = p->pl;
  const eng_graph *g = pl->g;
  size_t biggest = 0;
  for (size_t i = 0; i < pl->n_inputs; i++) {
    const eng_io *io = eng_graph_input(g, i);
    size_t b = (size_t)eng_numel(io->ndims - 1, io->dims + 1) * dtype_size(io->dt);
    if (pl->max_batch > 0) b *= (size_t)pl->max_batch;
    else if (io->ndims > 0) b *= (size_t)io->dims[0];
    if (b > biggest) biggest = b;
  }
  if (!p->zeros || p->zeros_bytes < biggest) {
    free(p->zeros);
    p->zeros = calloc(biggest + 16, 1);
    p->zeros_bytes = p->zeros ? biggest : 0;
    if (!p->zeros) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory preparing batch size %d", rows);
  }
  for (size_t i = 0; i < pl->n_inputs; i++) {
    const eng_io *io = eng_graph_input(g, i);
    in[i] = (eng_tensor){.dt = io->dt, .ndims = io->ndims, .data = p->zeros};
    memcpy(in[i].dims, io->dims, sizeof in[i].dims);
    if (pl->max_batch > 0) in[i].dims[0] = rows;
    in[i].bytes = nbytes(&in[i]);
  }
  return 0;
}

// The layout a timed plan keeps for batches of `rows` (plan_cuda.c's
// want_nhwc): slot 0 runs the warm-up batch each way, once to capture its
// graph and three times timed by the plan's events, and NHWC is kept where
// its best time is 3% under NCHW's (noise must not flip a model between
// runs). A model that rejects the zeros gets no pick (NCHW, as before);
// device trouble fails the load. opts.layout_flip (a test hook) picks by
// parity instead of timing.
static int time_layouts(eng_cuda_plan *p, const eng_tensor *in, size_t n_in, eng_tensor *out, size_t n_out,
                        int rows, err *e) {
  uint64_t best[2] = {UINT64_MAX, UINT64_MAX};
  int rc = 0;
  for (int l = 0; l < 2 && !rc && !p->o.layout_flip; l++) {
    p->layout_trial = l;
    for (int it = 0; it < 4 && !rc; it++) {
      err we = {0};
      uint64_t ns = 0;
      int r = eng_cuda_plan_submit(p, 0, in, n_in, &we);
      if (r == 0) r = eng_cuda_plan_finish(p, 0, out, n_out, &ns, &we);
      if (r == ERR_INTERNAL || r == ERR_RESOURCE_EXHAUSTED) {
        *e = we;
        rc = err_prefix(e, "timing the %s layout at batch size %d: ", l ? "NHWC" : "NCHW", rows);
      } else if (r) {
        p->layout_trial = -1;
        return 0;
      } else if (it > 0 && ns < best[l]) {
        best[l] = ns;
      }
    }
  }
  p->layout_trial = -1;
  if (rc) return rc;
  int i = p->n_picks++;
  p->picks[i].rows = rows;
  p->picks[i].nhwc = p->o.layout_flip ? (i % 2 == 1) : (double)best[1] < 0.97 * (double)best[0];
  return 0;
}

static void add_prepared(eng_cuda_plan *p, int rows) {
  size_t k = 0;
  while (k < p->n_prepared && p->prepared[k] < rows) k++;
  if (k < p->n_prepared && p->prepared[k] == rows) return;
  int *v = realloc(p->prepared, (p->n_prepared + 1) * sizeof *v);
  if (!v) return;  // unprepared as far as padding goes: its batches still run, at their own size
  memmove(v + k + 1, v + k, (p->n_prepared - k) * sizeof *v);
  v[k] = rows;
  p->prepared = v;
  p->n_prepared++;
}

int eng_cuda_plan_prepare(eng_cuda_plan *p, int rows, uint64_t *ns, err *e) {
  const eng_plan *pl = p->pl;
  uint64_t t0 = clock_mono_ns();
  if (ns) *ns = 0;
  if (!pl->have_layout) return 0;  // shapes known per batch only: nothing to prepare ahead
  if (pl->max_batch > 0 ? rows < 1 || rows > pl->max_batch : rows != 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "batch size %d is outside 1..%d", rows, pl->max_batch > 0 ? pl->max_batch : 1);
  size_t n_in = pl->n_inputs, n_out = pl->n_outputs;
  eng_tensor *in = calloc(n_in + 1, sizeof *in), *out = calloc(n_out + 1, sizeof *out);
  int rc = in && out ? zeros_batch(p, rows, in, e) : err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  int ok = rc == 0;
  for (int k = 0; k < p->n_slots && !rc && ok; k++) {
    err we = {0};
    int r = eng_cuda_plan_submit(p, k, in, n_in, &we);
    if (r == 0) r = eng_cuda_plan_finish(p, k, out, n_out, NULL, &we);
    if (r == ERR_INTERNAL || r == ERR_RESOURCE_EXHAUSTED) {
      *e = we;
      rc = err_prefix(e, "preparing batch size %d: ", rows);
    } else if (r) {
      ok = 0;  // a model may reject zeros (value-dependent shapes): only device trouble fails the load
    }
    for (size_t j = 0; r == 0 && pl->max_batch > 0 && j < n_out; j++)
      if (out[j].ndims < 1 || out[j].dims[0] != rows) p->pad_unsafe = true;
  }
  if (rc == 0 && ok) add_prepared(p, pl->max_batch > 0 ? rows : 1);
  free(in);
  free(out);
  if (ns) *ns = clock_mono_ns() - t0;
  return rc;
}

void eng_cuda_plan_serve(eng_cuda_plan *p, int pad) {
  free(p->zeros);
  p->zeros = NULL;
  p->zeros_bytes = 0;
  p->pad = pad && !p->pad_unsafe && p->pl->max_batch > 0 && p->n_prepared > 0;
  p->serving = true;
  // the preparation's runs are not traffic
  atomic_store(&p->busy_ns, 0);
  atomic_store(&p->batches, 0);
  p->submits = 0;
}

const int *eng_cuda_plan_prepared(const eng_cuda_plan *p, size_t *n) {
  *n = p->n_prepared;
  return p->prepared;
}

// Create's warm-up: the layouts timed at opts.warm's sizes (FP32, AUTO), and
// unless opts.prepare_later those sizes prepared and the plan serving.
static int warm_up(eng_cuda_plan *p, err *e) {
  const eng_plan *pl = p->pl;
  int rc = 0;
  if (p->layout_timed && pl->have_layout && p->o.n_warm) {
    size_t n_in = pl->n_inputs, n_out = pl->n_outputs;
    eng_tensor *in = calloc(n_in + 1, sizeof *in), *out = calloc(n_out + 1, sizeof *out);
    if (!in || !out) rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory warming up");
    for (size_t w = 0; w < p->o.n_warm && !rc; w++) {
      int rows = p->o.warm[w];
      if (pl->max_batch > 0 ? rows < 1 || rows > pl->max_batch : w > 0) continue;  // no batch dim: once
      if (p->n_picks >= (int)(sizeof p->picks / sizeof p->picks[0])) break;
      rc = zeros_batch(p, rows, in, e);
      if (rc == 0) rc = time_layouts(p, in, n_in, out, n_out, rows, e);
    }
    free(in);
    free(out);
  }
  if (rc || p->o.prepare_later) return rc;
  for (size_t w = 0; w < p->o.n_warm && !rc; w++) {
    int rows = p->o.warm[w];
    if (pl->max_batch > 0 ? rows < 1 || rows > pl->max_batch : w > 0) continue;
    rc = eng_cuda_plan_prepare(p, pl->max_batch > 0 ? rows : 1, NULL, e);
  }
  if (rc == 0) eng_cuda_plan_serve(p, 0);
  return rc;
}

// Here rather than in plan_cuda.c: the warm-up runs batches through
// submit and finish, which plan_cuda.c defines, and files call one way
// (tests/unit/check_circles.py).
int eng_cuda_plan_create(const eng_graph *g, int max_batch, int device, const eng_cuda_opts *opts,
                         eng_cuda_plan **out, err *e) {
  TRY(eng_cuda__create(g, max_batch, device, opts, out, e));
  int rc = warm_up(*out, e);
  if (rc) {
    eng_cuda_plan_destroy(*out);
    *out = NULL;
  }
  return rc;
}
