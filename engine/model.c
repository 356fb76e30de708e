// model.c: a model version's instances. A CPU instance is a thread owning a
// plan (its own arena), fed through a one-slot mailbox: the batcher never
// hands it a second batch before the first one's done callback.
//
// A GPU instance keeps up to `depth` batches in flight, one per stream slot
// of its CUDA plan: its submit thread assembles and enqueues batch n+1 while
// batch n runs, and its completion thread waits for each batch in order and
// answers it. A CUDA failure fails that batch with INTERNAL and marks the
// instance unhealthy; once its other batches are out, the submit thread
// destroys and recreates the plan before taking the next batch.
//
// When the plan cannot be recreated the instance is failed for good: a
// sticky CUDA error (launch failure, illegal address, ECC...) poisons the
// process's context on that device, and every later call there returns it
// again, so retrying per batch only turns each request into the same
// INTERNAL error and a log line (7.6M of them in 13 minutes in a soak).
// A failed instance answers at once with UNAVAILABLE; once every instance
// is, eng_model_failed says so and the server reports the version not
// ready (and, for a poisoned device, the process not live: only a restart
// brings the device back).
#include "engine/model.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "engine/pad.h"
#include "engine/cpu/plan.h"
#include "kernels/base/clock.h"
#if INFERD_HAVE_CUDA
#include <nvtx3/nvToolsExt.h>

#include "engine/numa.h"

#include "engine/cuda/cuda_dev.h"
#include "engine/cuda/cuda_weights.h"
#include "engine/cuda/plan_cuda.h"
#endif

#define MAX_DEPTH 4
// Stream slots per GPU instance: three batches in flight let the host
// assembly of batch n+2, the device work of batch n+1 and the answers of
// batch n proceed at once (with two, answering and device work of one slot
// serialise, and the device waits on the host at large batches).
#define GPU_SLOTS 3

typedef struct instance {
  eng_model *model;
  int index;
  int device;  // CUDA ordinal, -1 on the CPU
  int depth;   // batches in flight at once
  eng_plan *plan;
#if INFERD_HAVE_CUDA
  eng_cuda_plan *cuda_plan;  // replaced only by the submit thread, with no batch in flight
  pthread_t done_thread;
  int done_started;
  pthread_cond_t done_cv;
  _Atomic uint64_t done_seq;  // bumped under mu with every done_cv signal (wait_spin)
  // guarded by mu
  eng_job *queue[MAX_DEPTH];  // waiting for a slot
  int q_head, q_n;
  struct {
    eng_job *job;
    int slot;
  } fin[MAX_DEPTH];  // submitted, in submission order
  int f_head, f_n;
  int slot_busy[MAX_DEPTH];
  int n_busy;
  int unhealthy;
  int done_stop;
  void **stage[MAX_DEPTH];  // per slot, per config input: the plan's pinned staging
  size_t *stage_cap[MAX_DEPTH];
  eng_dev_seg *gsegs;  // the submit thread's: a batch's device segments in graph input order
  size_t gsegs_cap;
  char numa[ENG_NUMA_DESC_MAX];  // where its threads run, for the load log; set before they start
#endif
  _Atomic uint64_t recreations;
  uint64_t batches_run;  // CPU instances: batches so far (the fatal fault injection counts them)
  int failed;            // guarded by mu: could not be recreated; never runs again
  _Atomic uint64_t host_bytes;  // a CPU plan's arena, refreshed by its own thread
  pthread_t thread;
  int started;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  _Atomic uint64_t cv_seq;  // bumped under mu with every cv signal (wait_spin)
  eng_job *job;  // guarded by mu (CPU instances)
  int stop;      // guarded by mu
} instance;

// What the config asks of GPU instances (CPU instances run FP32 plans).
typedef struct model_opts {
  int precision;  // ENG_PREC_*: config parameters { key: "precision" }
  int no_graphs;  // optimization { cuda { graphs: false } }
  int layout;     // eng_cuda_layout: parameters { key: "layout" }
  int conv_timed;  // parameters { key: "cudnn_conv_algo_search" }: "0"
  int no_gemm_autotune;  // unless parameters { key: "gemm_autotune" } "true", or INFERD_GEMM_AUTOTUNE=1
  int no_numa;           // INFERD_NUMA=0: GPU instances' threads not bound to their GPU's NUMA node
  int64_t spin_us;       // parameters { key: "instance_spin_us" }, else INFERD_INSTANCE_SPIN_US (wait_spin)
  uint64_t fault_at;
  uint64_t cpu_fatal_at;  // INFERD_CPU_FAULT_FATAL_AT (tests): see parse_opts
} model_opts;

typedef struct binding {
  eng_io client;         // what the client sends/receives (no batch dim)
  int has_reshape;
  int n_model_dims;      // the graph's view when the config reshapes
  int64_t model_dims[ENG_MAX_DIMS];
  size_t graph_index;
  int takes_device;      // GPU instances take it as device segments (eng_cuda_input_takes_device)
} binding;

struct eng_model {
  eng_graph *graph;
  int max_batch;
  model_opts opts;
  int *warm;
  size_t n_warm;
  binding *in, *out;
  size_t n_in, n_out;
  eng_pad pad;  // pad_to_longest; pad.in NULL when requests are not padded
  size_t n_graph_in, n_graph_out;
  int *graph_in_to_cfg;  // per graph input, the config input feeding it
  instance *inst;
  int n_inst;
  // instances failed for good (see the top); the reason is the first one's,
  // written under fail_mu before n_failed counts it
  _Atomic int n_failed;
  _Atomic int poisoned;  // one of them failed from a context-fatal device error
  pthread_mutex_t fail_mu;
  char fail_why[ERR_MSG_MAX];
#if INFERD_HAVE_CUDA
  eng_cuda_weights *weights;  // the graph's constants once per device, shared by the GPU instances' plans
#endif
};

int64_t eng_now_us(void) { return (int64_t)(clock_mono_ns() / 1000); }

// --- binding the config's tensors to the graph's

static int bind_tensor(binding *b, const eng_model_tensor *t, const eng_graph *g, int is_input, err *e) {
  const char *name = t->name;
  size_t n = is_input ? eng_graph_n_inputs(g) : eng_graph_n_outputs(g);
  memset(b, 0, sizeof *b);
  size_t gi = n;
  for (size_t i = 0; i < n; i++) {
    const eng_io *io = is_input ? eng_graph_input(g, i) : eng_graph_output(g, i);
    if (strcmp(io->name, name) == 0) gi = i;
  }
  if (gi == n)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s '%s' of the config is not in the model",
                   is_input ? "input" : "output", name);
  if (t->n_dims > ENG_MAX_DIMS - 1 || (t->has_reshape && t->n_reshape > ENG_MAX_DIMS - 1))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s '%s' has more than %d dims", is_input ? "input" : "output",
                   name, ENG_MAX_DIMS - 1);
  snprintf(b->client.name, sizeof b->client.name, "%s", name);
  b->client.dt = t->dt;
  b->client.ndims = (int)t->n_dims;
  memcpy(b->client.dims, t->dims, t->n_dims * sizeof *t->dims);
  b->graph_index = gi;
  if (t->has_reshape) {
    b->has_reshape = 1;
    b->n_model_dims = (int)t->n_reshape;
    memcpy(b->model_dims, t->reshape, t->n_reshape * sizeof *t->reshape);
  }
  return 0;
}

static int bind_all(eng_model *m, const eng_model_config *cfg, err *e) {
  const eng_graph *g = m->graph;
  m->n_in = cfg->n_inputs;
  m->n_out = cfg->n_outputs;
  m->n_graph_in = eng_graph_n_inputs(g);
  m->n_graph_out = eng_graph_n_outputs(g);
  m->in = calloc(m->n_in ? m->n_in : 1, sizeof *m->in);
  m->out = calloc(m->n_out ? m->n_out : 1, sizeof *m->out);
  m->graph_in_to_cfg = calloc(m->n_graph_in ? m->n_graph_in : 1, sizeof *m->graph_in_to_cfg);
  if (!m->in || !m->out || !m->graph_in_to_cfg) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  for (size_t i = 0; i < m->n_in; i++) {
    TRY(bind_tensor(&m->in[i], &cfg->inputs[i], g, 1, e));
#if INFERD_HAVE_CUDA
    m->in[i].takes_device = eng_cuda_input_takes_device(g, m->in[i].graph_index);
#endif
  }
  for (size_t i = 0; i < m->n_out; i++) {
    TRY(bind_tensor(&m->out[i], &cfg->outputs[i], g, 0, e));
  }
  for (size_t gi = 0; gi < m->n_graph_in; gi++) {
    m->graph_in_to_cfg[gi] = -1;
    for (size_t i = 0; i < m->n_in; i++)
      if (m->in[i].graph_index == gi) m->graph_in_to_cfg[gi] = (int)i;
    if (m->graph_in_to_cfg[gi] < 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "model input '%s' is missing from the config",
                     eng_graph_input(g, gi)->name);
  }
  return 0;
}

// --- running one job

static void set_shape(eng_tensor *t, int64_t rows, int batched, int nd, const int64_t *dims) {
  t->ndims = 0;
  if (batched) t->dims[t->ndims++] = rows;
  for (int d = 0; d < nd; d++) t->dims[t->ndims++] = dims[d];
}

// Per-job tensor arrays: on the stack for the usual few tensors.
#define SMALL_IO (ENG_MAX_DIMS * 4)
typedef struct io_bufs {
  eng_tensor gin_s[SMALL_IO], gout_s[SMALL_IO], cout_s[SMALL_IO];
  eng_tensor *gin, *gout, *cout;
} io_bufs;

static int io_init(io_bufs *b, const eng_model *m, err *e) {
  b->gin = m->n_graph_in <= SMALL_IO ? b->gin_s : calloc(m->n_graph_in, sizeof *b->gin);
  b->gout = m->n_graph_out <= SMALL_IO ? b->gout_s : calloc(m->n_graph_out, sizeof *b->gout);
  b->cout = m->n_out <= SMALL_IO ? b->cout_s : calloc(m->n_out ? m->n_out : 1, sizeof *b->cout);
  if (!b->gin || !b->gout || !b->cout) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  return 0;
}

static void io_free(io_bufs *b) {
  if (b->gin && b->gin != b->gin_s) free(b->gin);
  if (b->gout && b->gout != b->gout_s) free(b->gout);
  if (b->cout && b->cout != b->cout_s) free(b->cout);
}

// The job's inputs as the graph takes them (config reshapes applied).
static int graph_inputs(const eng_model *m, eng_job *job, eng_tensor *gin, err *e) {
  if (job->prepare) TRY(job->prepare(job, e));
  int batched = m->max_batch > 0;
  for (size_t gi = 0; gi < m->n_graph_in; gi++) {
    const binding *b = &m->in[m->graph_in_to_cfg[gi]];
    gin[gi] = job->inputs[m->graph_in_to_cfg[gi]];
    if (b->has_reshape) set_shape(&gin[gi], job->rows, batched, b->n_model_dims, b->model_dims);
  }
  return 0;
}

// The graph's outputs as the client sees them, in config order.
static void client_outputs(const eng_model *m, const eng_job *job, const eng_tensor *gout, eng_tensor *cout) {
  int batched = m->max_batch > 0;
  for (size_t i = 0; i < m->n_out; i++) {
    const binding *b = &m->out[i];
    cout[i] = gout[b->graph_index];
    if (b->has_reshape) set_shape(&cout[i], job->rows, batched, b->client.ndims, b->client.dims);
  }
}

// Fails `in` for good (once), keeping why; `poisoned` when the cause is a
// context-fatal device error, which no instance on that device survives.
static void mark_failed(instance *in, int poisoned, const err *why) {
  eng_model *m = in->model;
  pthread_mutex_lock(&m->fail_mu);  // first: a failed instance's answers quote it
  if (!m->fail_why[0]) snprintf(m->fail_why, sizeof m->fail_why, "%s", why->msg);
  pthread_mutex_unlock(&m->fail_mu);
  pthread_mutex_lock(&in->mu);
  int was = in->failed;
  in->failed = 1;
  pthread_mutex_unlock(&in->mu);
  if (was) return;
  if (poisoned) atomic_store(&m->poisoned, 1);
  atomic_fetch_add(&m->n_failed, 1);
}

static int failed_err(instance *in, err *e) {
  eng_model *m = in->model;
  pthread_mutex_lock(&m->fail_mu);
  err_set(e, ERR_UNAVAILABLE, "instance %d (%s%d) failed permanently and no longer runs: %s", in->index,
          in->device < 0 ? "CPU" : "GPU ", in->device < 0 ? 0 : in->device, m->fail_why);
  pthread_mutex_unlock(&m->fail_mu);
  return ERR_UNAVAILABLE;
}

static void run_job(instance *in, eng_job *job) {
  eng_model *m = in->model;
  io_bufs b = {0};
  err e = {0};
  job->t_start_us = job->t_infer_start_us = job->t_infer_end_us = eng_now_us();
  job->stream = -1;
  job->device_ns = 0;
  job->stage = NULL;
  job->stage_cap = NULL;
  job->dev_segs = NULL;
  job->n_dev_segs = 0;
  int rc = 0;
  if (in->failed) rc = failed_err(in, &e);  // only this thread sets it on a CPU instance
  if (rc == 0) rc = io_init(&b, m, &e);
  if (rc == 0) rc = graph_inputs(m, job, b.gin, &e);
  if (rc == 0 && m->opts.cpu_fatal_at && in->index == 0 && ++in->batches_run == m->opts.cpu_fatal_at) {
    // what a sticky CUDA error does to a GPU instance, on the CPU: the batch
    // fails with INTERNAL, and the instance (with the "device") for good
    rc = err_set(&e, ERR_INTERNAL, "instance %d: injected context-fatal fault (INFERD_CPU_FAULT_FATAL_AT=%llu)",
                 in->index, (unsigned long long)m->opts.cpu_fatal_at);
    mark_failed(in, 1, &e);
  }
  if (rc == 0 && job->n_dev_segs)  // eng_model_device_input said -1 for every input here
    rc = err_set(&e, ERR_INTERNAL, "instance %d runs on the CPU: its inputs cannot come from a GPU", in->index);
  if (rc == 0) {
    job->t_infer_start_us = eng_now_us();
    rc = eng_plan_run(in->plan, b.gin, m->n_graph_in, b.gout, m->n_graph_out, &e);
    job->t_infer_end_us = eng_now_us();
    atomic_store(&in->host_bytes, eng_plan_arena_bytes(in->plan));  // grows with a new largest shape
  }
  if (rc == 0) client_outputs(m, job, b.gout, b.cout);
  job->done(job, rc, &e, rc == 0 ? b.cout : NULL, rc == 0 ? m->n_out : 0);
  io_free(&b);
}

// Thread names show in top -H and /proc/PID/task/*/comm: the transport
// benchmark reads per-thread CPU time by name (tests/bench/serve_gpu).
static void name_thread(const char *what, int index) {
  char name[16];
  snprintf(name, sizeof name, "inferd-%s%d", what, index);
  (void)pthread_setname_np(pthread_self(), name);
}

// Signals cv after bumping *seq; mu held, as for every change a waiter tests.
static void signal_seq(pthread_cond_t *cv, _Atomic uint64_t *seq, int all) {
  atomic_fetch_add_explicit(seq, 1, memory_order_release);
  if (all) pthread_cond_broadcast(cv);
  else pthread_cond_signal(cv);
}

// pthread_cond_wait on cv (mu held), but first, for up to spin_us, mu
// released, watching *seq for a signal. Why: an instance thread woken from
// sleep starts 10-50 us later on an idle core (futex wake, an IPI, the core
// leaving its idle state), and a request crosses two such sleeps on its way
// (batcher -> submit thread -> completion thread); at a light load that is a
// third of a one-row request's time in the server. Spinning costs a core
// while it lasts, so it is off unless the model asks (instance_spin_us).
// Returns with mu held; like pthread_cond_wait, the caller re-tests its
// condition (a bump may have been for another waiter).
static void wait_spin(pthread_cond_t *cv, pthread_mutex_t *mu, _Atomic uint64_t *seq, int64_t spin_us) {
  if (spin_us > 0) {
    uint64_t s0 = atomic_load_explicit(seq, memory_order_relaxed);  // under mu: no bump can be missed
    pthread_mutex_unlock(mu);
    int64_t until = eng_now_us() + spin_us;
    int n = 0;
    while (atomic_load_explicit(seq, memory_order_acquire) == s0) {
      if ((++n & 63) == 0 && eng_now_us() >= until) break;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    pthread_mutex_lock(mu);
    if (atomic_load_explicit(seq, memory_order_relaxed) != s0) return;
  }
  pthread_cond_wait(cv, mu);
}

static void *instance_main(void *arg) {
  instance *in = arg;
  name_thread("cpu", in->index);
  for (;;) {
    pthread_mutex_lock(&in->mu);
    while (!in->job && !in->stop) wait_spin(&in->cv, &in->mu, &in->cv_seq, in->model->opts.spin_us);
    eng_job *job = in->job;
    in->job = NULL;
    int stop = in->stop;
    pthread_mutex_unlock(&in->mu);
    if (job) run_job(in, job);
    else if (stop) return NULL;
  }
}

#if INFERD_HAVE_CUDA
// --- GPU instances: a submit thread and a completion thread per instance

static int create_cuda_plan(instance *in, eng_cuda_plan **out, err *e) {
  const eng_model *m = in->model;
  eng_cuda_opts o = {.precision = (eng_precision)m->opts.precision,
                     .n_slots = in->depth,
                     .no_graphs = m->opts.no_graphs,
                     .graph_cap = 256,
                     .warm = m->warm,
                     .n_warm = m->n_warm,
                     .fault_at = m->opts.fault_at,
                     .layout = (eng_cuda_layout)m->opts.layout,
                     .conv_timed = m->opts.conv_timed,
                     .no_gemm_autotune = m->opts.no_gemm_autotune,
                     .weights = m->weights};
  return eng_cuda_plan_create(m->graph, m->max_batch, in->device, &o, out, e);
}

// Where the batcher's gather may write each input of each slot (the plan's
// pinned staging), refreshed whenever the plan is (re)created.
static int map_stages(instance *in, err *e) {
  const eng_model *m = in->model;
  for (int k = 0; k < in->depth; k++) {
    if (!in->stage[k]) in->stage[k] = calloc(m->n_in + 1, sizeof *in->stage[k]);
    if (!in->stage_cap[k]) in->stage_cap[k] = calloc(m->n_in + 1, sizeof *in->stage_cap[k]);
    if (!in->stage[k] || !in->stage_cap[k]) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    for (size_t c = 0; c < m->n_in; c++)
      in->stage[k][c] = in->cuda_plan ? eng_cuda_plan_stage(in->cuda_plan, k, m->in[c].graph_index, &in->stage_cap[k][c])
                                      : NULL;
  }
  return 0;
}

static void free_slot(instance *in, int slot) {
  pthread_mutex_lock(&in->mu);
  in->slot_busy[slot] = 0;
  in->n_busy--;
  signal_seq(&in->cv, &in->cv_seq, 1);
  pthread_mutex_unlock(&in->mu);
}

// A CUDA failure (ERR_INTERNAL) leaves the plan suspect: recreate it.
static void note_failure(instance *in, int rc) {
  if (rc != ERR_INTERNAL) return;
  pthread_mutex_lock(&in->mu);
  in->unhealthy = 1;
  pthread_mutex_unlock(&in->mu);
}

static void fail_job(eng_job *job, int rc, const err *e) {
  job->t_infer_end_us = eng_now_us();
  job->done(job, rc, e, NULL, 0);
}

// Recreates the plan; called with no batch in flight. 0 on success.
static int recover(instance *in, err *e) {
  // swapped under the lock: eng_model_instance_stats reads the plan
  pthread_mutex_lock(&in->mu);
  eng_cuda_plan *old = in->cuda_plan;
  in->cuda_plan = NULL;
  pthread_mutex_unlock(&in->mu);
  eng_cuda_plan_destroy(old);
  eng_cuda_plan *fresh = NULL;
  int rc = create_cuda_plan(in, &fresh, e);
  pthread_mutex_lock(&in->mu);
  in->cuda_plan = fresh;
  pthread_mutex_unlock(&in->mu);
  if (rc == 0) rc = map_stages(in, e);
  if (rc) {
    int poisoned = eng_cuda_context_fatal(in->device);
    err_prefix(e, "instance %d on GPU %d is unhealthy and could not be recreated%s: ", in->index, in->device,
               poisoned ? " (the device's CUDA context is poisoned by a sticky error: restart the process)" : "");
    mark_failed(in, poisoned, e);
    return rc;
  }
  atomic_fetch_add(&in->recreations, 1);
  pthread_mutex_lock(&in->mu);
  in->unhealthy = 0;
  pthread_mutex_unlock(&in->mu);
  return 0;
}

// The job's device segments in graph input order, as the plan takes them
// (the config may list its inputs in another order), in the instance's
// buffer (the submit thread's own; grown to the largest batch seen).
static int graph_segs(instance *in, const eng_job *job, size_t *n_out, err *e) {
  const eng_model *m = in->model;
  size_t n = job->n_dev_segs;
  if (n > in->gsegs_cap) {
    eng_dev_seg *g = realloc(in->gsegs, n * sizeof *g);
    if (!g) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    in->gsegs = g;
    in->gsegs_cap = n;
  }
  size_t k = 0;
  for (size_t gi = 0; gi < m->n_graph_in; gi++) {
    size_t c = (size_t)m->graph_in_to_cfg[gi];
    for (size_t j = 0; j < n; j++) {
      if (job->dev_segs[j].input != c) continue;
      if (!m->in[c].takes_device)
        return err_set(e, ERR_INTERNAL, "input '%s' cannot come from the device", m->in[c].client.name);
      in->gsegs[k] = job->dev_segs[j];
      in->gsegs[k++].input = gi;
    }
  }
  *n_out = k;
  return 0;
}

static void *gpu_submit_main(void *arg) {
  instance *in = arg;
  name_thread("sub", in->index);
  eng_model *m = in->model;
  for (;;) {
    pthread_mutex_lock(&in->mu);
    // a job and a free slot; an unhealthy instance waits for all its slots
    while (!in->stop && (in->q_n == 0 || in->n_busy == in->depth || (in->unhealthy && in->n_busy > 0)))
      wait_spin(&in->cv, &in->mu, &in->cv_seq, m->opts.spin_us);
    if (in->q_n == 0) {  // stopping with nothing queued
      pthread_mutex_unlock(&in->mu);
      return NULL;
    }
    while (in->n_busy == in->depth || (in->unhealthy && in->n_busy > 0)) pthread_cond_wait(&in->cv, &in->mu);
    eng_job *job = in->queue[in->q_head];
    in->q_head = (in->q_head + 1) % MAX_DEPTH;
    in->q_n--;
    int slot = 0;
    while (in->slot_busy[slot]) slot++;
    in->slot_busy[slot] = 1;
    in->n_busy++;
    int unhealthy = in->unhealthy;
    int failed = in->failed;
    pthread_mutex_unlock(&in->mu);

    err e = {0};
    job->t_start_us = job->t_infer_start_us = job->t_infer_end_us = eng_now_us();
    job->stream = slot;
    job->stage = in->stage[slot];
    job->stage_cap = in->stage_cap[slot];
    job->dev_segs = NULL;
    job->n_dev_segs = 0;
    if (failed || (unhealthy && recover(in, &e) != 0)) {
      if (failed) failed_err(in, &e);
      fail_job(job, ERR_UNAVAILABLE, &e);
      free_slot(in, slot);
      continue;
    }
    eng_tensor gin_s[SMALL_IO];
    eng_tensor *gin = m->n_graph_in <= SMALL_IO ? gin_s : calloc(m->n_graph_in, sizeof *gin);
    int rc = gin ? 0 : err_set(&e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    nvtxRangePushA("inferd assemble batch");
    if (rc == 0) rc = graph_inputs(m, job, gin, &e);
    nvtxRangePop();
    size_t n_gsegs = 0;
    if (rc == 0 && job->n_dev_segs) rc = graph_segs(in, job, &n_gsegs, &e);
    if (rc == 0) {
      job->t_infer_start_us = eng_now_us();
      nvtxRangePushA("inferd submit");
      rc = eng_cuda_plan_submit_segs(in->cuda_plan, slot, gin, m->n_graph_in, in->gsegs, n_gsegs, &e);
      nvtxRangePop();
    }
    if (gin != gin_s) free(gin);
    if (rc) {
      note_failure(in, rc);
      fail_job(job, rc, &e);
      free_slot(in, slot);
      continue;
    }
    pthread_mutex_lock(&in->mu);
    int k = (in->f_head + in->f_n) % MAX_DEPTH;
    in->fin[k].job = job;
    in->fin[k].slot = slot;
    in->f_n++;
    signal_seq(&in->done_cv, &in->done_seq, 0);
    pthread_mutex_unlock(&in->mu);
  }
}

static void *gpu_done_main(void *arg) {
  instance *in = arg;
  name_thread("done", in->index);
  eng_model *m = in->model;
  for (;;) {
    pthread_mutex_lock(&in->mu);
    while (in->f_n == 0 && !in->done_stop) wait_spin(&in->done_cv, &in->mu, &in->done_seq, m->opts.spin_us);
    if (in->f_n == 0) {
      pthread_mutex_unlock(&in->mu);
      return NULL;
    }
    eng_job *job = in->fin[in->f_head].job;
    int slot = in->fin[in->f_head].slot;
    in->f_head = (in->f_head + 1) % MAX_DEPTH;
    in->f_n--;
    pthread_mutex_unlock(&in->mu);

    io_bufs b = {0};
    err e = {0};
    int rc = io_init(&b, m, &e);
    nvtxRangePushA("inferd finish batch");
    job->device_ns = 0;
    // without output arrays (out of memory) the slot is still waited for, keeping that error
    err fe = {0};
    int frc = eng_cuda_plan_finish(in->cuda_plan, slot, rc == 0 ? b.gout : NULL, m->n_graph_out, &job->device_ns,
                                   rc == 0 ? &e : &fe);
    nvtxRangePop();
    if (rc == 0) rc = frc;
    job->t_infer_end_us = eng_now_us();
    if (rc == 0) client_outputs(m, job, b.gout, b.cout);
    else note_failure(in, rc);
    job->done(job, rc, &e, rc == 0 ? b.cout : NULL, rc == 0 ? m->n_out : 0);
    io_free(&b);
    free_slot(in, slot);
  }
}
#endif

// --- lifecycle
// --- lifecycle

// The instances the config asks for: per group, `count` on the CPU, or
// `count` on each listed GPU (every visible one when `gpus` is empty).
// KIND_AUTO has been resolved by the caller (registry) by then.
static int instance_devices(const eng_model_config *cfg, int n_gpus, int **out, int *n_out, err *e) {
  // summed in 64 bits: counts are int32 each, and a config may ask for 2^30 in several groups (fuzz_rest)
  int64_t want = 0;
  for (size_t i = 0; i < cfg->n_groups; i++) {
    const eng_instance_group *ig = &cfg->groups[i];
    int gpu = ig->kind == ENG_INSTANCE_GPU;
    if (gpu && n_gpus == 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "instance_group '%s': KIND_GPU but no CUDA device is visible",
                     ig->name);
    int64_t per = gpu ? (ig->n_gpus ? (int64_t)ig->n_gpus : n_gpus) : 1;
    want += (int64_t)ig->count * per;  // count < 2^31, and groups and gpus are bounded by the config's bytes
  }
  if (cfg->n_groups == 0) want = 1;
  if (want < 1 || want > 1024)
    return err_set(e, ERR_INVALID_ARGUMENT, "instance_group: %lld instances requested (1..1024)", (long long)want);
  int n = (int)want;
  int *dev = calloc((size_t)n, sizeof *dev);
  if (!dev) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  int k = 0;
  if (cfg->n_groups == 0) dev[k++] = -1;
  for (size_t i = 0; i < cfg->n_groups; i++) {
    const eng_instance_group *ig = &cfg->groups[i];
    if (ig->kind != ENG_INSTANCE_GPU) {
      for (int c = 0; c < ig->count; c++) dev[k++] = -1;
      continue;
    }
    int ng = ig->n_gpus ? (int)ig->n_gpus : n_gpus;
    for (int gi = 0; gi < ng; gi++) {
      int d = ig->n_gpus ? ig->gpus[gi] : gi;
      if (d < 0 || d >= n_gpus) {
        free(dev);
        return err_set(e, ERR_INVALID_ARGUMENT, "instance_group '%s': gpu %d is not visible (%d device(s))",
                       ig->name, d, n_gpus);
      }
      for (int c = 0; c < ig->count; c++) dev[k++] = d;
    }
  }
  *out = dev;
  *n_out = n;
  return 0;
}

// GPU options from the config: parameters { key: "precision" value {
// string_value: "fp32" | "tf32" | "fp16" } }, { key: "layout" value:
// "auto" | "nchw" | "nhwc" } (where convolutions keep activations),
// onnxruntime backend's { key: "cudnn_conv_algo_search" value: "0" (time
// every algorithm) | "1" (heuristic) | "2" (default algorithm, taken here as
// the heuristic's) }; unlike onnxruntime, the heuristic is our default: the
// timed choice measured slower end to end (tests/bench/RESULTS.md), and
// Triton's
// optimization { cuda { graphs: false } } (graphs are on unless a cuda
// block says otherwise), { key: "gemm_autotune" value: "true" | "false" }
// (cuBLASLt's GEMM algorithms timed, plan_cuda.h). Off unless this says true
// or the environment's INFERD_GEMM_AUTOTUNE=1 (the operator's switch for
// every model without the parameter; =0 turns it off even where a model asks):
// timing one new shape takes up to 200 ms on the instance, and under dynamic
// batching every new batch size is a new GEMM shape, so a model whose batch
// sizes model_warmup does not cover paid it under load (the 4x4096 MLP at
// 1024 streams: 82.5k -> 7.2k req/s, tests/bench/RESULTS.md, issue 16). INFERD_CUDA_FAULT_AT=N (tests) makes every GPU
// plan's Nth batch fail with a real CUDA launch error.
static int parse_opts(const eng_model_config *cfg, model_opts *o, err *e) {
  memset(o, 0, sizeof *o);
  int tune = -1;  // the model's gemm_autotune, -1 unset
  long spin_us = -1;  // the model's instance_spin_us, -1 unset
  static const char *const names[] = {"fp32", "tf32", "fp16"};  // ENG_PREC_* order
  static const char *const layouts[] = {"auto", "nchw", "nhwc"};  // eng_cuda_layout order
  for (size_t i = 0; i < cfg->n_params; i++) {
    const eng_model_param *pe = &cfg->params[i];
    const char *v = pe->value;
    if (strcmp(pe->key, "layout") == 0) {
      int l = -1;
      for (int k = 0; k < 3; k++)
        if (strcasecmp(v, layouts[k]) == 0) l = k;
      if (l < 0) return err_set(e, ERR_INVALID_ARGUMENT, "parameters: layout '%s' is not one of auto, nchw, nhwc", v);
      o->layout = l;
      continue;
    }
    if (strcmp(pe->key, "cudnn_conv_algo_search") == 0) {
      if (strcmp(v, "0") && strcmp(v, "1") && strcmp(v, "2"))
        return err_set(e, ERR_INVALID_ARGUMENT,
                       "parameters: cudnn_conv_algo_search '%s' is not one of 0 (exhaustive), 1 (heuristic), 2 (default)", v);
      o->conv_timed = v[0] == '0';
      continue;
    }
    if (strcmp(pe->key, "instance_spin_us") == 0) {
      char *end = NULL;
      long us = strtol(v, &end, 10);
      if (!*v || *end || us < 0 || us > 10000)
        return err_set(e, ERR_INVALID_ARGUMENT, "parameters: instance_spin_us '%s' is not a count of microseconds 0-10000", v);
      spin_us = us;
      continue;
    }
    if (strcmp(pe->key, "gemm_autotune") == 0) {
      int on = strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0;
      if (!on && strcasecmp(v, "false") != 0 && strcmp(v, "0") != 0)
        return err_set(e, ERR_INVALID_ARGUMENT, "parameters: gemm_autotune '%s' is not one of true, false", v);
      tune = on;
      continue;
    }
    if (strcmp(pe->key, "precision") != 0) continue;
    int found = -1;
    for (int k = 0; k < 3; k++)
      if (strcasecmp(v, names[k]) == 0) found = k;
    if (found < 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "parameters: precision '%s' is not one of fp32, tf32, fp16", v);
    o->precision = found;
  }
  o->no_graphs = !cfg->cuda_graphs;
  const char *at = getenv("INFERD_GEMM_AUTOTUNE");
  if (at && strcmp(at, "0") == 0) tune = 0;
  else if (at && strcmp(at, "1") == 0 && tune < 0) tune = 1;
  o->no_gemm_autotune = tune != 1;
  const char *sp = getenv("INFERD_INSTANCE_SPIN_US");
  if (spin_us < 0 && sp && *sp) spin_us = strtol(sp, NULL, 10);
  o->spin_us = spin_us > 0 && spin_us <= 10000 ? spin_us : 0;
  const char *nu = getenv("INFERD_NUMA");
  if (nu && strcmp(nu, "0") == 0) o->no_numa = 1;
  // INFERD_CPU_FAULT_FATAL_AT=N (tests): the Nth batch of each model's
  // first instance (when on the CPU) fails as a sticky CUDA error fails a GPU
  // instance (it cannot be recreated, its "device" poisoned), so the path
  // from there (not ready, not live, fast UNAVAILABLE, no batches for a
  // failed instance beside live ones) is tested on machines without a GPU
  const char *ff = getenv("INFERD_CPU_FAULT_FATAL_AT");
  if (ff && *ff) o->cpu_fatal_at = strtoull(ff, NULL, 10);
  const char *f = getenv("INFERD_CUDA_FAULT_AT");
  if (f && *f) o->fault_at = strtoull(f, NULL, 10);
  return 0;
}

// pad_to_longest against the config's tensors as the client sees them.
static int bind_padding(eng_model *m, const eng_model_config *cfg, err *e) {
  eng_io *in = calloc(m->n_in + 1, sizeof *in), *out = calloc(m->n_out + 1, sizeof *out);
  int rc = in && out ? 0 : err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  for (size_t i = 0; rc == 0 && i < m->n_in; i++) in[i] = m->in[i].client;
  for (size_t i = 0; rc == 0 && i < m->n_out; i++) out[i] = m->out[i].client;
  if (rc == 0) rc = eng_pad_parse(cfg, in, m->n_in, out, m->n_out, &m->pad, e);
  free(in);
  free(out);
  return rc;
}

// Batch sizes whose graphs are captured at load: 1, the preferred sizes and
// the largest.
static int warm_sizes(eng_model *m, const eng_model_config *cfg, err *e) {
  size_t np = cfg->batching.on ? cfg->batching.n_preferred : 0;
  m->warm = calloc(np + 2, sizeof *m->warm);
  if (!m->warm) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  m->warm[m->n_warm++] = 1;
  for (size_t i = 0; i < np; i++) {
    int b = cfg->batching.preferred[i];
    int dup = 0;
    for (size_t k = 0; k < m->n_warm; k++) dup |= m->warm[k] == b;
    if (!dup) m->warm[m->n_warm++] = b;
  }
  if (m->max_batch > 1) {
    int dup = 0;
    for (size_t k = 0; k < m->n_warm; k++) dup |= m->warm[k] == m->max_batch;
    if (!dup) m->warm[m->n_warm++] = m->max_batch;
  }
  return 0;
}

#if INFERD_HAVE_CUDA
// On a host with several NUMA nodes, binds the calling (loading) thread to
// the CPUs of the GPU's node, among those the process may use, and saves
// its former mask in *saved: 1 when bound. One node (this VM, the lent GPU
// machines), an unknown node, INFERD_NUMA=0 or any failure leave it as it
// is: placement only saves cross-socket traffic, so it never fails a load.
// in->numa says which, for the load log.
static int numa_bind(instance *in, cpu_set_t *saved) {
  if (in->model->opts.no_numa) {
    snprintf(in->numa, sizeof in->numa, "GPU %d: NUMA placement off (INFERD_NUMA=0)", in->device);
    return 0;
  }
  cpu_set_t allowed;
  eng_numa_place p;
  err e = {0};
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
    err_set(&e, ERR_INTERNAL, "sched_getaffinity failed");
  else
    eng_numa_place_cuda(ENG_NUMA_SYSFS, in->device, &allowed, &p, &e);
  if (e.code) {
    snprintf(in->numa, sizeof in->numa, "GPU %d: no NUMA placement: %.120s", in->device, e.msg);
    return 0;
  }
  snprintf(in->numa, sizeof in->numa, "%s", p.desc);
  if (p.node < 0) return 0;
  if (pthread_getaffinity_np(pthread_self(), sizeof *saved, saved) != 0 ||
      pthread_setaffinity_np(pthread_self(), sizeof p.cpus, &p.cpus) != 0) {
    snprintf(in->numa, sizeof in->numa, "GPU %d: NUMA node %d: cannot bind to its CPUs, no placement", in->device,
             p.node);
    return 0;
  }
  return 1;
}

// The GPU plan and the instance's two threads, made by a thread that
// numa_bind may have bound to the GPU's node, so that (1) the plan's pinned
// staging lands on that node: cudaHostAlloc maps and pins its pages when
// called, and the default first-touch policy places them on the node of the
// CPU the caller runs on; and (2) the submit thread (which assembles
// batches into that staging, submits them, and recreates the plan after a
// failure, so a fresh staging lands there too) and the completion thread
// run there: a new thread inherits its creator's CPU mask (pthread_create(3)).
static int start_gpu(instance *in, err *e) {
  in->depth = GPU_SLOTS;
  TRY(create_cuda_plan(in, &in->cuda_plan, e));
  in->depth = eng_cuda_plan_n_slots(in->cuda_plan);
  TRY(map_stages(in, e));
  if (pthread_create(&in->done_thread, NULL, gpu_done_main, in) != 0)
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "cannot start completion thread of instance %d", in->index);
  in->done_started = 1;
  if (pthread_create(&in->thread, NULL, gpu_submit_main, in) != 0)
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "cannot start instance thread %d", in->index);
  in->started = 1;
  return 0;
}
#endif

static int start_instance(instance *in, err *e) {
  eng_model *m = in->model;
  pthread_mutex_init(&in->mu, NULL);
  pthread_cond_init(&in->cv, NULL);
  in->depth = 1;
  if (in->device < 0) {
    TRY(eng_plan_create(m->graph, m->max_batch, &in->plan, e));
    atomic_store(&in->host_bytes, eng_plan_arena_bytes(in->plan));
    if (pthread_create(&in->thread, NULL, instance_main, in) != 0)
      return err_set(e, ERR_RESOURCE_EXHAUSTED, "cannot start instance thread %d", in->index);
    in->started = 1;
    return 0;
  }
#if INFERD_HAVE_CUDA
  pthread_cond_init(&in->done_cv, NULL);
  cpu_set_t saved;
  int bound = numa_bind(in, &saved);
  int rc = start_gpu(in, e);
  if (bound) (void)pthread_setaffinity_np(pthread_self(), sizeof saved, &saved);
  return rc;
#else
  return err_set(e, ERR_UNIMPLEMENTED, "this inferd was built without CUDA");
#endif
}

int eng_model_create(eng_graph *g, const eng_model_config *cfg, int n_gpus, eng_model **out, err *e) {
  eng_model *m = calloc(1, sizeof *m);
  if (!m) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  pthread_mutex_init(&m->fail_mu, NULL);
  m->graph = g;
  m->max_batch = cfg->max_batch_size;
  int rc = bind_all(m, cfg, e);
  if (rc == 0) rc = parse_opts(cfg, &m->opts, e);
  if (rc == 0) rc = bind_padding(m, cfg, e);
  if (rc == 0) rc = warm_sizes(m, cfg, e);
  int *dev = NULL, n = 0;
  if (rc == 0) rc = instance_devices(cfg, n_gpus, &dev, &n, e);
  if (rc == 0 && !(m->inst = calloc((size_t)n, sizeof *m->inst)))
    rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
#if INFERD_HAVE_CUDA
  if (rc == 0) rc = eng_cuda_weights_create(g, &m->weights, e);  // nothing on a device until a plan asks
#endif
  for (int i = 0; rc == 0 && i < n; i++) {
    instance *in = &m->inst[i];
    in->model = m;
    in->index = i;
    in->device = dev[i];
    m->n_inst++;
    rc = start_instance(in, e);
    if (rc) err_prefix(e, "instance %d (%s%d): ", i, in->device < 0 ? "CPU" : "GPU ", in->device < 0 ? 0 : in->device);
  }
  free(dev);
  if (rc) {
    m->graph = NULL;  // the caller keeps the graph on failure
    eng_model_destroy(m);
    return rc;
  }
  *out = m;
  return 0;
}

int eng_model_instance_device(const eng_model *m, int instance) {
  return instance >= 0 && instance < m->n_inst ? m->inst[instance].device : -1;
}

int eng_model_instance_depth(const eng_model *m, int instance) {
  return instance >= 0 && instance < m->n_inst ? m->inst[instance].depth : 0;
}

int eng_model_device_input(const eng_model *m, int instance, size_t i) {
  if (instance < 0 || instance >= m->n_inst || i >= m->n_in || !m->in[i].takes_device) return -1;
  return m->inst[instance].device;
}

int eng_model_n_gpu_instances(const eng_model *m) {
  int n = 0;
  for (int i = 0; i < m->n_inst; i++) n += m->inst[i].device >= 0;
  return n;
}

void eng_model_instance_stats(const eng_model *m, int index, eng_instance_stats *s) {
  memset(s, 0, sizeof *s);
  if (index < 0 || index >= m->n_inst) return;
  instance *in = &m->inst[index];
  s->device = in->device;
  s->depth = in->depth;
  s->recreations = atomic_load(&in->recreations);
  pthread_mutex_lock(&in->mu);
  s->healthy = !in->failed;
  s->failed = in->failed;
  pthread_mutex_unlock(&in->mu);
  s->host_bytes = atomic_load(&in->host_bytes);
#if INFERD_HAVE_CUDA
  if (in->device < 0) return;
  pthread_mutex_lock(&in->mu);
  s->healthy = !in->unhealthy && !in->failed;
  // the plan is replaced only by the submit thread while no batch is in
  // flight and the instance is unhealthy; read it under the lock then
  eng_cuda_plan_stats ps = {0};
  if (in->cuda_plan) eng_cuda_plan_stats_get(in->cuda_plan, &ps);
  pthread_mutex_unlock(&in->mu);
  s->busy_ns = ps.busy_ns;
  s->batches = ps.batches;
  s->graphs = ps.graphs_captured;
  s->graph_launches = ps.graph_launches;
  s->plain_launches = ps.plain_launches;
  s->device_allocs = ps.real_allocs;
  s->gemm_autotune = !m->opts.no_gemm_autotune;
  s->gemm_tuned = ps.gemm_tuned;
  s->gemm_tune_ns = ps.gemm_tune_ns;
  s->timed_layouts = ps.timed_layouts;
  s->timed_nhwc = ps.timed_nhwc;
  snprintf(s->numa, sizeof s->numa, "%s", in->numa);
  s->device_bytes = ps.device_bytes;
  s->pinned_bytes = ps.pinned_bytes;
  s->weight_bytes = ps.weight_bytes;
  s->weights_uploaded = ps.weights_uploaded;
  s->weight_holders = ps.weight_holders;
#endif
}

void eng_model_destroy(eng_model *m) {
  if (!m) return;
  for (int i = 0; i < m->n_inst; i++) {
    instance *in = &m->inst[i];
    if (in->started) {
      pthread_mutex_lock(&in->mu);
      in->stop = 1;
      signal_seq(&in->cv, &in->cv_seq, 1);
      pthread_mutex_unlock(&in->mu);
      pthread_join(in->thread, NULL);
    }
#if INFERD_HAVE_CUDA
    if (in->done_started) {
      pthread_mutex_lock(&in->mu);
      in->done_stop = 1;
      signal_seq(&in->done_cv, &in->done_seq, 0);
      pthread_mutex_unlock(&in->mu);
      pthread_join(in->done_thread, NULL);
    }
    eng_cuda_plan_destroy(in->cuda_plan);
    free(in->gsegs);
    for (int k = 0; k < MAX_DEPTH; k++) {
      free(in->stage[k]);
      free(in->stage_cap[k]);
    }
    if (in->device >= 0) pthread_cond_destroy(&in->done_cv);
#endif
    eng_plan_destroy(in->plan);
    pthread_mutex_destroy(&in->mu);
    pthread_cond_destroy(&in->cv);
  }
  free(m->inst);
#if INFERD_HAVE_CUDA
  eng_cuda_weights_destroy(m->weights);  // after every plan released its copy
#endif
  free(m->in);
  free(m->out);
  free(m->graph_in_to_cfg);
  free(m->warm);
  eng_pad_free(&m->pad);
  if (m->graph) eng_graph_destroy(m->graph);
  pthread_mutex_destroy(&m->fail_mu);
  free(m);
}

int eng_model_submit(eng_model *m, int instance_index, eng_job *job, err *e) {
  if (instance_index < 0 || instance_index >= m->n_inst)
    return err_set(e, ERR_INTERNAL, "no instance %d", instance_index);
  instance *in = &m->inst[instance_index];
  int busy = 0;
  pthread_mutex_lock(&in->mu);
#if INFERD_HAVE_CUDA
  if (in->device >= 0) {
    busy = in->q_n >= in->depth;
    if (!busy) {
      in->queue[(in->q_head + in->q_n) % MAX_DEPTH] = job;
      in->q_n++;
      signal_seq(&in->cv, &in->cv_seq, 1);
    }
  } else
#endif
  {
    busy = in->job != NULL;
    if (!busy) {
      in->job = job;
      signal_seq(&in->cv, &in->cv_seq, 0);
    }
  }
  pthread_mutex_unlock(&in->mu);
  if (busy) return err_set(e, ERR_INTERNAL, "instance %d already has %d job(s)", instance_index, in->depth);
  return 0;
}

int eng_model_failed(eng_model *m, int *poisoned, err *e) {
  // the hot path (every request's lookup) reads one atomic
  if (atomic_load_explicit(&m->n_failed, memory_order_acquire) < m->n_inst) return 0;
  if (poisoned) *poisoned = atomic_load(&m->poisoned);
  pthread_mutex_lock(&m->fail_mu);
  err_set(e, ERR_UNAVAILABLE, "every instance failed permanently%s: %s",
          atomic_load(&m->poisoned) ? " (a sticky device error: only a restart recovers)" : "", m->fail_why);
  pthread_mutex_unlock(&m->fail_mu);
  return ERR_UNAVAILABLE;
}

int eng_model_instance_failed(eng_model *m, int index) {
  if (index < 0 || index >= m->n_inst) return 0;
  instance *in = &m->inst[index];
  pthread_mutex_lock(&in->mu);
  int f = in->failed;
  pthread_mutex_unlock(&in->mu);
  return f;
}

int eng_model_poisoned(const eng_model *m) { return atomic_load(&((eng_model *)m)->poisoned); }

int eng_model_n_instances(const eng_model *m) { return m->n_inst; }
int eng_model_max_batch(const eng_model *m) { return m->max_batch; }
const eng_pad *eng_model_pad(const eng_model *m) { return m->pad.in ? &m->pad : NULL; }
size_t eng_model_n_inputs(const eng_model *m) { return m->n_in; }
const eng_io *eng_model_input(const eng_model *m, size_t i) { return &m->in[i].client; }
size_t eng_model_n_outputs(const eng_model *m) { return m->n_out; }
const eng_io *eng_model_output(const eng_model *m, size_t i) { return &m->out[i].client; }
