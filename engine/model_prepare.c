// model_prepare.c: a model version's batch sizes prepared at load, so that
// the first seconds after ready run as fast as steady state (issue 32): each
// GPU instance, on its own thread (model.c starts them in parallel), runs
// every size engine/batch_sizes.c picks within the load's budget once on
// each of its plan's slots, which captures the size's CUDA graphs, makes
// its cuDNN plans and tunes its GEMMs; sizes left out run padded to the
// next prepared one (the plan pads: plan_cuda.h). A recreated plan (after a
// CUDA failure) prepares the same sizes again.
//
// The CPU plan has nothing that depends on the batch size to prepare, so a
// CPU instance prepares nothing and runs every size as it comes, unless a
// test hook (INFERD_PREPARE_SIZES, INFERD_PREPARE_FAKE_MS: model_opts.c)
// asks it to follow the GPU's discipline: sizes chosen the same way, each
// run once at load, other sizes padded here (rows copied into buffers of
// the prepared size, the rest zeros, the answers cut back), and a size that
// can be neither counted as a lazy prepare. That keeps the choice and the
// padding under the integration tests of machines without a GPU.
//
// Called by model.c (create) and model_run.c (recreation, padding); calls
// neither (tests/unit/check_circles.py).
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "engine/batch_sizes.h"
#include "engine/cpu/plan.h"
#include "engine/model_internal.h"
#include "kernels/base/clock.h"
#if INFERD_HAVE_CUDA
#include "engine/cuda/plan_cuda.h"
#endif

// Prepares one size: 0 or an error; *ok 1 when it is prepared, *ns its cost.
typedef int (*prep_fn)(instance *in, void *ctx, int rows, int *ok, uint64_t *ns, err *e);

static void keep(instance *in, int rows) {
  size_t k = 0;
  while (k < in->n_prepared && in->prepared[k] < rows) k++;
  if (k < in->n_prepared && in->prepared[k] == rows) return;
  int *v = realloc(in->prepared, (in->n_prepared + 1) * sizeof *v);
  if (!v) return;  // left unprepared: padded past, or counted lazy
  memmove(v + k + 1, v + k, (in->n_prepared - k) * sizeof *v);
  v[k] = rows;
  in->prepared = v;
  in->n_prepared++;
}

// At load only (a recreation serves on): the server is stopping.
static int cancelled(const instance *in, int recreating, err *e) {
  const _Atomic int *c = in->model->cancel;
  if (recreating || !c || !atomic_load(c)) return 0;
  return err_set(e, ERR_UNAVAILABLE, "cancelled: server shutting down");
}

// The sizes a recreation prepares again, the tests' list, or, at load, what
// batch_sizes.c picks within the budget, counted from t0 (before the plan's
// create: its layout timing is part of the preparation).

static int prepare_sizes(instance *in, prep_fn prep, void *ctx, uint64_t t0, err *e) {
  eng_model *m = in->model;
  int rc = 0, ok = 0;
  uint64_t ns = 0;
  int recreating = in->n_prepared > 0;  // a recreation
  if (in->n_prepared || m->hook_sizes) {
    size_t n = in->n_prepared ? in->n_prepared : m->n_hook_sizes;
    int *again = malloc((n + 1) * sizeof *again);
    if (!again) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    memcpy(again, in->n_prepared ? in->prepared : m->hook_sizes, n * sizeof *again);
    in->n_prepared = 0;
    for (size_t i = 0; i < n && !rc; i++) {
      rc = cancelled(in, recreating, e);
      if (rc == 0) rc = prep(in, ctx, again[i], &ok, &ns, e);
      if (rc == 0 && ok) keep(in, again[i]);
    }
    free(again);
    atomic_store(&in->prepare_ns, clock_mono_ns() - t0);
    return rc;
  }
  eng_bsizes b;
  TRY(eng_bsizes_init(&b, m->max_batch, m->warm, m->n_warm,
                      m->prepare_budget_ms < 0 ? -1 : m->prepare_budget_ms * 1000000, 0, e));
  int64_t fake = 0;  // the fake clock (INFERD_PREPARE_FAKE_MS)
  for (int s; !rc && (s = eng_bsizes_next(&b, m->fake_ns ? fake : (int64_t)(clock_mono_ns() - t0))) != 0;) {
    rc = cancelled(in, 0, e);
    if (rc) break;
    rc = prep(in, ctx, s, &ok, &ns, e);
    if (m->fake_ns) ns = (uint64_t)m->fake_ns;
    fake += (int64_t)ns;
    eng_bsizes_measured(&b, s, ns);  // a size refused still cost its time
    if (rc == 0 && ok) keep(in, m->max_batch > 0 ? s : 1);
  }
  eng_bsizes_close(&b);
  atomic_store(&in->prepare_ns, clock_mono_ns() - t0);
  return rc;
}

// --- the CPU (under the tests' hooks)

// A size run once with zeros; the model's outputs must all carry the batch
// first for its batches to be padded.
static int prep_cpu(instance *in, void *ctx, int rows, int *ok, uint64_t *ns, err *e) {
  eng_model *m = in->model;
  const eng_graph *g = m->graph;
  int *scales = ctx;
  uint64_t t0 = clock_mono_ns();
  size_t n_in = m->n_graph_in, n_out = m->n_graph_out;
  eng_tensor *gin = calloc(n_in + 1, sizeof *gin), *gout = calloc(n_out + 1, sizeof *gout);
  int rc = gin && gout ? 0 : err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  for (size_t i = 0; rc == 0 && i < n_in; i++) {
    const eng_io *io = eng_graph_input(g, i);
    gin[i] = (eng_tensor){.dt = io->dt, .ndims = io->ndims, .data = in->pad_buf[i]};
    memcpy(gin[i].dims, io->dims, sizeof gin[i].dims);
    gin[i].dims[0] = rows;
    gin[i].bytes = (size_t)eng_numel(gin[i].ndims, gin[i].dims) * dtype_size(io->dt);
  }
  *ok = 0;
  if (rc == 0) {
    err we = {0};
    int r = eng_plan_run(in->plan, gin, n_in, gout, n_out, &we);
    if (r == ERR_RESOURCE_EXHAUSTED) rc = err_prefix(&we, "preparing batch size %d: ", rows), *e = we;
    *ok = r == 0;  // a model may refuse zeros: that size stays unprepared
    for (size_t j = 0; r == 0 && j < n_out; j++)
      if (gout[j].ndims < 1 || gout[j].dims[0] != rows) *scales = 0;
  }
  free(gin);
  free(gout);
  *ns = clock_mono_ns() - t0;
  return rc;
}

int eng_model__prepare_cpu(instance *in, err *e) {
  eng_model *m = in->model;
  if (!m->cpu_prepare || m->max_batch < 1) return 0;
  uint64_t t0 = clock_mono_ns();
  // only inputs of fixed shapes (the batch apart) and fixed-size types can be padded
  for (size_t i = 0; i < m->n_graph_in; i++) {
    const eng_io *io = eng_graph_input(m->graph, i);
    if (dtype_size(io->dt) == 0 || io->ndims < 1) return 0;
    for (int d = 1; d < io->ndims; d++)
      if (io->dims[d] < 0) return 0;
  }
  in->pad_buf = calloc(m->n_graph_in + 1, sizeof *in->pad_buf);
  if (!in->pad_buf) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  for (size_t i = 0; i < m->n_graph_in; i++) {
    const eng_io *io = eng_graph_input(m->graph, i);
    size_t row = (size_t)eng_numel(io->ndims - 1, io->dims + 1) * dtype_size(io->dt);
    if (!(in->pad_buf[i] = calloc((size_t)m->max_batch * row + 16, 1)))
      return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  int scales = 1;
  TRY(prepare_sizes(in, prep_cpu, &scales, t0, e));
  in->pad = scales && in->n_prepared > 0;
  return 0;
}

int eng_model__cpu_run_rows(instance *in, int64_t rows) {
  if (!in->model->cpu_prepare || !in->pad_buf || rows < 1) return (int)rows;
  int b = eng_bsizes_bucket(in->prepared, in->n_prepared, (int)rows);
  if (b == rows) return b;  // prepared
  if (b > rows && in->pad) {
    atomic_fetch_add(&in->padded_batches, 1);
    atomic_fetch_add(&in->padded_rows, (uint64_t)(b - rows));
    return b;
  }
  atomic_fetch_add(&in->lazy, 1);  // neither prepared nor padded: a GPU plan would capture it now
  atomic_fetch_add(&in->lazy_by[ENG_LAZY_GRAPH], 1);
  return (int)rows;
}

void eng_model__cpu_pad(instance *in, eng_tensor *gin, int64_t rows, int run) {
  eng_model *m = in->model;
  for (size_t i = 0; i < m->n_graph_in; i++) {
    eng_tensor *t = &gin[i];
    size_t have = (size_t)eng_numel(t->ndims, t->dims) * dtype_size(t->dt);
    size_t want = have / (size_t)rows * (size_t)run;
    memcpy(in->pad_buf[i], t->data, have);
    memset((uint8_t *)in->pad_buf[i] + have, 0, want - have);  // zeros in the added rows
    t->data = in->pad_buf[i];
    t->dims[0] = run;
    t->bytes = want;
  }
}

void eng_model__cpu_unpad(instance *in, eng_tensor *gout, int64_t rows, int run) {
  for (size_t j = 0; j < in->model->n_graph_out; j++) {
    eng_tensor *t = &gout[j];
    if (t->ndims < 1 || t->dims[0] != run) continue;
    t->bytes = t->bytes / (size_t)run * (size_t)rows;  // the first rows are the batch's
    t->dims[0] = rows;
  }
}

// --- GPU instances

#if INFERD_HAVE_CUDA
static int prep_gpu(instance *in, void *ctx, int rows, int *ok, uint64_t *ns, err *e) {
  eng_cuda_plan *p = ctx;
  size_t n = 0;
  int rc = eng_cuda_plan_prepare(p, in->model->max_batch > 0 ? rows : 1, ns, e);
  const int *v = eng_cuda_plan_prepared(p, &n);
  *ok = 0;
  for (size_t k = 0; k < n; k++) *ok |= v[k] == rows;
  return rc;
}

int eng_model__create_cuda_plan(instance *in, eng_cuda_plan **out, err *e) {
  const eng_model *m = in->model;
  uint64_t t0 = clock_mono_ns();
  eng_cuda_opts o = {.precision = (eng_precision)m->opts.precision,
                     .n_slots = in->depth,
                     .no_graphs = m->opts.no_graphs,
                     .graph_cap = 2 * ENG_PREPARE_MAX_SIZES,
                     .warm = m->warm,  // the layouts timed there (FP32, AUTO)
                     .n_warm = m->n_warm,
                     .prepare_later = 1,
                     .fault_at = m->opts.fault_at,
                     .layout = (eng_cuda_layout)m->opts.layout,
                     .conv_timed = m->opts.conv_timed,
                     .no_gemm_autotune = m->opts.no_gemm_autotune,
                     .no_gemm_clusters = m->opts.no_gemm_clusters,
                     .weights = m->weights};
  eng_cuda_plan *p = NULL;
  TRY(eng_cuda_plan_create(m->gpu_graph ? m->gpu_graph : m->graph, m->max_batch, in->device, &o, &p, e));
  int rc = prepare_sizes(in, prep_gpu, p, t0, e);
  if (rc) {
    eng_cuda_plan_destroy(p);
    return rc;
  }
  eng_cuda_plan_serve(p, 1);
  *out = p;
  return 0;
}
#endif
