// model_run.c: a job's way through an instance: eng_model_submit hands it
// over, and the instance's threads run it. A CPU instance is a thread owning
// a plan (its own arena), fed through a one-slot mailbox: the batcher never
// hands it a second batch before the first one's done callback. A GPU
// instance has a submit thread that assembles and enqueues batch n+1 while
// batch n runs, and a completion thread that waits for each batch in order
// and answers it; after a CUDA failure the submit thread recreates the plan
// (or fails the instance for good, see model.c's top). Also the job's tensors
// as the graph and the client see them, and the failure bookkeeping the
// threads write. model.c starts and stops these threads and calls into this
// file; this file calls nothing of model.c or model_opts.c
// (tests/unit/check_circles.py).
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/cpu/plan.h"
#include "engine/model.h"
#include "engine/model_internal.h"
#include "kernels/base/clock.h"
#if INFERD_HAVE_CUDA
#include <nvtx3/nvToolsExt.h>

#include "engine/cuda/cuda_dev.h"
#include "engine/cuda/plan_cuda.h"
#endif

int64_t eng_now_us(void) { return (int64_t)(clock_mono_ns() / 1000); }

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
  // under the tests' hooks a batch of a size not prepared runs padded (model_prepare.c)
  int run = rc == 0 && m->max_batch > 0 ? eng_model__cpu_run_rows(in, job->rows) : (int)job->rows;
  if (rc == 0 && run != job->rows) eng_model__cpu_pad(in, b.gin, job->rows, run);
  if (rc == 0) {
    job->t_infer_start_us = eng_now_us();
    rc = eng_plan_run(in->plan, b.gin, m->n_graph_in, b.gout, m->n_graph_out, &e);
    job->t_infer_end_us = eng_now_us();
    atomic_store(&in->host_bytes, eng_plan_arena_bytes(in->plan));  // grows with a new largest shape
  }
  if (rc == 0 && run != job->rows) eng_model__cpu_unpad(in, b.gout, job->rows, run);
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
void eng_model__signal_seq(pthread_cond_t *cv, _Atomic uint64_t *seq, int all) {
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

void *eng_model__instance_main(void *arg) {
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

// Where the batcher's gather may write each input of each slot (the plan's
// pinned staging), refreshed whenever the plan is (re)created.
int eng_model__map_stages(instance *in, err *e) {
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
  eng_model__signal_seq(&in->cv, &in->cv_seq, 1);
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
  if (old) {  // its counts live on in the instance's (eng_model_instance_stats adds the current plan's)
    eng_cuda_plan_stats ps;
    eng_cuda_plan_stats_get(old, &ps);
    atomic_fetch_add(&in->lazy, ps.lazy_prepares);
    for (int c = 0; c < ENG_LAZY_CAUSES; c++) atomic_fetch_add(&in->lazy_by[c], ps.lazy_by_cause[c]);
    atomic_fetch_add(&in->padded_batches, ps.padded_batches);
    atomic_fetch_add(&in->padded_rows, ps.padded_rows);
  }
  pthread_mutex_unlock(&in->mu);
  eng_cuda_plan_destroy(old);
  eng_cuda_plan *fresh = NULL;
  int rc = eng_model__create_cuda_plan(in, &fresh, e);
  pthread_mutex_lock(&in->mu);
  in->cuda_plan = fresh;
  pthread_mutex_unlock(&in->mu);
  if (rc == 0) rc = eng_model__map_stages(in, e);
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

static void finish_job(instance *in, eng_job *job, int slot);

// Called with in->mu held, a one-row job just submitted to slot, nothing
// queued and no other slot in flight (the completion thread's included: a slot stays busy until
// it is freed). Watches, mu released, both the batch's end on the device and
// the queue: 1 (mu held again) when the batch ended first, so the caller
// finishes it on this thread; 0 (mu held) when a job arrived first, so the
// batch goes to the completion thread as any other and this thread submits
// the new one at once. Why: for a lone request the hand-off to the
// completion thread is one more wakeup (10-50 us on an idle core, wait_spin's
// comment) on its way out; the watch costs this thread what the completion
// thread's cudaEventSynchronize costs (the runtime spins there too), and a
// job that arrives meanwhile is not held back.
static int alone_until_done(instance *in, int slot) {
  uint64_t s0 = atomic_load_explicit(&in->cv_seq, memory_order_relaxed);  // under mu: no bump is missed
  pthread_mutex_unlock(&in->mu);
  int done = 0;
  for (;;) {
    if (eng_cuda_plan_poll(in->cuda_plan, slot)) {
      done = 1;
      break;
    }
    if (atomic_load_explicit(&in->cv_seq, memory_order_acquire) != s0) break;  // a job, a stop or a freed slot
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  pthread_mutex_lock(&in->mu);
  return done && in->q_n == 0 && !in->stop;
}

void *eng_model__gpu_submit_main(void *arg) {
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
    // one row only: a bigger batch's answers (packed in job->done) could hold
    // a job that arrives meanwhile off the device for a millisecond
    if (job->rows == 1 && in->q_n == 0 && in->n_busy == 1 && alone_until_done(in, slot)) {
      pthread_mutex_unlock(&in->mu);
      finish_job(in, job, slot);
      continue;
    }
    int k = (in->f_head + in->f_n) % MAX_DEPTH;
    in->fin[k].job = job;
    in->fin[k].slot = slot;
    in->f_n++;
    eng_model__signal_seq(&in->done_cv, &in->done_seq, 0);
    pthread_mutex_unlock(&in->mu);
  }
}

// Waits for a submitted job's slot, hands its outputs to job->done and frees
// the slot: the completion thread's work, also done on the submit thread for
// a job alone on the device (gpu_submit_main).
static void finish_job(instance *in, eng_job *job, int slot) {
  eng_model *m = in->model;
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

void *eng_model__gpu_done_main(void *arg) {
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
    finish_job(in, job, slot);
  }
}
#endif

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
      eng_model__signal_seq(&in->cv, &in->cv_seq, 1);
    }
  } else
#endif
  {
    busy = in->job != NULL;
    if (!busy) {
      in->job = job;
      eng_model__signal_seq(&in->cv, &in->cv_seq, 0);
    }
  }
  pthread_mutex_unlock(&in->mu);
  if (busy) return err_set(e, ERR_INTERNAL, "instance %d already has %d job(s)", instance_index, in->depth);
  return 0;
}
