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
//
// This file is the lifecycle and what others ask: create (instances started,
// GPU ones in parallel, each placed on its GPU's NUMA node), destroy,
// statistics, failure state, the tensors. Below it, calling one way:
// model_run.c (submit and the instances' threads), model_opts.c (the config
// read at create) and model_prepare.c (the batch sizes prepared at load,
// which model_run.c also calls for a recreated plan and the CPU's padding);
// model_internal.h is what the four share.
#include "engine/model.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/batch_sizes.h"
#include "engine/cpu/plan.h"
#include "engine/model_internal.h"
#include "engine/pad.h"
#if INFERD_HAVE_CUDA
#include "engine/numa.h"

#include "engine/cuda/cuda_weights.h"
#include "engine/cuda/plan_cuda.h"
#endif

// --- lifecycle

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
  TRY(eng_model__create_cuda_plan(in, &in->cuda_plan, e));
  in->depth = eng_cuda_plan_n_slots(in->cuda_plan);
  TRY(eng_model__map_stages(in, e));
  if (pthread_create(&in->done_thread, NULL, eng_model__gpu_done_main, in) != 0)
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "cannot start completion thread of instance %d", in->index);
  in->done_started = 1;
  if (pthread_create(&in->thread, NULL, eng_model__gpu_submit_main, in) != 0)
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "cannot start instance thread %d", in->index);
  in->started = 1;
  return 0;
}
#endif

// The CUDA plan has no STRING element: its staging, copies and kernels move
// fixed-size elements only. A model with a STRING input or output is placed
// on the host as a whole: each of its GPU instances runs the CPU plan (the
// load log says why, eng_model_placement_note), rather than the load being
// refused or every request failing. Writes the reason into why (empty: none).
static void strings_place_on_host(const eng_graph *g, char *why, size_t cap) {
  why[0] = 0;
  for (size_t i = 0; i < eng_graph_n_inputs(g) && !why[0]; i++)
    if (eng_graph_input(g, i)->dt == DT_STRING)
      snprintf(why, cap, "input '%.180s' is TYPE_STRING, which the GPU plan does not carry",
               eng_graph_input(g, i)->name);
  for (size_t j = 0; j < eng_graph_n_outputs(g) && !why[0]; j++)
    if (eng_graph_output(g, j)->dt == DT_STRING)
      snprintf(why, cap, "output '%.180s' is TYPE_STRING, which the GPU plan does not carry",
               eng_graph_output(g, j)->name);
}

static int start_instance(instance *in, err *e) {
  eng_model *m = in->model;
  in->depth = 1;
  if (in->device < 0) {
    TRY(eng_plan_create(m->graph, m->max_batch, &in->plan, e));
    TRY(eng_model__prepare_cpu(in, e));  // nothing unless a test hook asks (model_prepare.c)
    atomic_store(&in->host_bytes, eng_plan_arena_bytes(in->plan));
    if (pthread_create(&in->thread, NULL, eng_model__instance_main, in) != 0)
      return err_set(e, ERR_RESOURCE_EXHAUSTED, "cannot start instance thread %d", in->index);
    in->started = 1;
    return 0;
  }
#if INFERD_HAVE_CUDA
  cpu_set_t saved;
  int bound = numa_bind(in, &saved);
  int rc = start_gpu(in, e);
  if (bound) (void)pthread_setaffinity_np(pthread_self(), sizeof saved, &saved);
  return rc;
#else
  return err_set(e, ERR_UNIMPLEMENTED, "this inferd was built without CUDA");
#endif
}

// A GPU instance started on a thread of its own: preparing its batch sizes
// takes up to the load's budget, and instances on several GPUs (or several
// on one) prepare at once rather than one after another.
typedef struct starter {
  instance *in;
  pthread_t thread;
  int running;
  int rc;
  err e;
} starter;

static void *start_main(void *arg) {
  starter *st = arg;
  st->rc = start_instance(st->in, &st->e);
  return NULL;
}

// Starts every instance: the GPU ones in parallel, the CPU ones after on
// this thread. Every failing instance is named, in one message.
static int start_all(eng_model *m, err *e) {
  starter *st = calloc((size_t)m->n_inst + 1, sizeof *st);
  if (!st) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  for (int i = 0; i < m->n_inst; i++) {
    st[i].in = &m->inst[i];
    if (m->inst[i].device < 0) continue;
    if (pthread_create(&st[i].thread, NULL, start_main, &st[i]) == 0) st[i].running = 1;
    else st[i].rc = err_set(&st[i].e, ERR_RESOURCE_EXHAUSTED, "cannot start a thread to prepare it");
  }
  for (int i = 0; i < m->n_inst; i++) {
    if (st[i].running) pthread_join(st[i].thread, NULL);
    else if (m->inst[i].device < 0) st[i].rc = start_instance(&m->inst[i], &st[i].e);
  }
  int rc = 0;
  size_t o = 0;
  char msg[ERR_MSG_MAX] = "";
  for (int i = 0; i < m->n_inst; i++) {
    if (!st[i].rc) continue;
    if (!rc) rc = st[i].rc;
    const instance *in = &m->inst[i];
    int w = snprintf(msg + o, sizeof msg - o, "%sinstance %d (%s%d): %s", o ? "; " : "", i,
                     in->device < 0 ? "CPU" : "GPU ", in->device < 0 ? 0 : in->device, st[i].e.msg);
    o = w < 0 || (size_t)w >= sizeof msg - o ? sizeof msg - 1 : o + (size_t)w;
    if (o >= sizeof msg - 1) break;  // full: the first reasons are named
  }
  free(st);
  if (rc) err_set(e, rc, "%s", msg);
  return rc;
}

int eng_model_create(eng_graph *g, const eng_model_config *cfg, int n_gpus, eng_model **out, err *e) {
  return eng_model_create_opts(g, cfg, n_gpus, NULL, out, e);
}

int eng_model_create_opts(eng_graph *g, const eng_model_config *cfg, int n_gpus, const eng_model_load_opts *lo,
                          eng_model **out, err *e) {
  eng_model *m = calloc(1, sizeof *m);
  if (!m) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  pthread_mutex_init(&m->fail_mu, NULL);
  m->graph = g;
  m->gpu_graph = lo ? lo->gpu_graph : NULL;
  m->max_batch = cfg->max_batch_size;
  m->prepare_budget_ms = lo ? lo->prepare_budget_ms : ENG_PREPARE_BUDGET_MS_DEFAULT;
  m->cancel = lo ? lo->cancel : NULL;
  int rc = eng_model__bind_all(m, cfg, e);
  if (rc == 0) rc = eng_model__parse_opts(cfg, &m->opts, e);
  if (rc == 0) rc = eng_model__bind_padding(m, cfg, e);
  if (rc == 0) rc = eng_model__warm_sizes(m, cfg, e);
  int *dev = NULL, n = 0;
  if (rc == 0) rc = eng_model__instance_devices(cfg, n_gpus, &dev, &n, e);
  char why[ERR_MSG_MAX / 2];
  strings_place_on_host(g, why, sizeof why);
  int n_moved = 0;
  for (int i = 0; rc == 0 && why[0] && i < n; i++)
    if (dev[i] >= 0) dev[i] = -1, n_moved++;
  if (n_moved)
    snprintf(m->placement, sizeof m->placement, "%s: its %d GPU instance%s run%s on the host (CPU plan)", why,
             n_moved, n_moved == 1 ? "" : "s", n_moved == 1 ? "s" : "");
  if (rc == 0 && !(m->inst = calloc((size_t)n, sizeof *m->inst)))
    rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
#if INFERD_HAVE_CUDA
  // nothing on a device until a plan asks
  if (rc == 0) rc = eng_cuda_weights_create(m->gpu_graph ? m->gpu_graph : g, &m->weights, e);
#endif
  for (int i = 0; rc == 0 && i < n; i++) {
    instance *in = &m->inst[i];
    in->model = m;
    in->index = i;
    in->device = dev[i];
    pthread_mutex_init(&in->mu, NULL);
    pthread_cond_init(&in->cv, NULL);
#if INFERD_HAVE_CUDA
    if (in->device >= 0) pthread_cond_init(&in->done_cv, NULL);
#endif
    m->n_inst++;
  }
  if (rc == 0) rc = start_all(m, e);
  free(dev);
  if (rc) {
    m->graph = NULL;  // the caller keeps the graphs on failure
    m->gpu_graph = NULL;
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

const char *eng_model_placement_note(const eng_model *m) {
  return m->placement[0] ? m->placement : NULL;
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
  s->prepare_ns = atomic_load(&in->prepare_ns);
  s->lazy_prepares = atomic_load(&in->lazy);
  for (int c = 0; c < ENG_LAZY_CAUSES; c++) s->lazy_by_cause[c] = atomic_load(&in->lazy_by[c]);
  s->padded_batches = atomic_load(&in->padded_batches);
  s->padded_rows = atomic_load(&in->padded_rows);
  if (in->device < 0) {  // a CPU instance's sizes and padding are fixed at create
    s->prepared_sizes = (int)in->n_prepared;
    s->pad = in->pad;
  }
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
  s->prepared_sizes = ps.prepared_sizes;
  s->pad = ps.pad;
  s->lazy_prepares += ps.lazy_prepares;  // the former plans' (recreations) and the current one's
  for (int c = 0; c < ENG_LAZY_CAUSES; c++) s->lazy_by_cause[c] += ps.lazy_by_cause[c];
  s->padded_batches += ps.padded_batches;
  s->padded_rows += ps.padded_rows;
  pthread_mutex_lock(&in->mu);
  s->host_nodes = in->cuda_plan ? (int)eng_cuda_plan_n_host_nodes(in->cuda_plan) : 0;
  pthread_mutex_unlock(&in->mu);
#endif
}

int eng_model_instance_host_node(const eng_model *m, int index, int k, char *buf, size_t cap) {
  if (cap) buf[0] = 0;
  if (index < 0 || index >= m->n_inst || k < 0) return -1;
#if INFERD_HAVE_CUDA
  instance *in = &m->inst[index];
  int rc = -1;
  pthread_mutex_lock(&in->mu);  // the plan may be replaced (recreation): read it under the lock
  const char *line = in->cuda_plan ? eng_cuda_plan_host_node(in->cuda_plan, (size_t)k) : NULL;
  if (line && cap) {
    snprintf(buf, cap, "%s", line);
    rc = 0;
  }
  pthread_mutex_unlock(&in->mu);
  return rc;
#else
  (void)buf;
  return -1;
#endif
}

void eng_model_destroy(eng_model *m) {
  if (!m) return;
  for (int i = 0; i < m->n_inst; i++) {
    instance *in = &m->inst[i];
    if (in->started) {
      pthread_mutex_lock(&in->mu);
      in->stop = 1;
      eng_model__signal_seq(&in->cv, &in->cv_seq, 1);
      pthread_mutex_unlock(&in->mu);
      pthread_join(in->thread, NULL);
    }
#if INFERD_HAVE_CUDA
    if (in->done_started) {
      pthread_mutex_lock(&in->mu);
      in->done_stop = 1;
      eng_model__signal_seq(&in->done_cv, &in->done_seq, 0);
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
    free(in->prepared);
    for (size_t k = 0; in->pad_buf && k < m->n_graph_in; k++) free(in->pad_buf[k]);
    free(in->pad_buf);
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
  free(m->hook_sizes);
  eng_pad_free(&m->pad);
  if (m->graph) eng_graph_destroy(m->graph);
  if (m->gpu_graph) eng_graph_destroy(m->gpu_graph);
  pthread_mutex_destroy(&m->fail_mu);
  free(m);
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
size_t eng_model_n_client_inputs(const eng_model *m) { return m->n_client_in; }
const eng_io *eng_model_input(const eng_model *m, size_t i) { return &m->in[i].client; }
size_t eng_model_n_outputs(const eng_model *m) { return m->n_out; }
size_t eng_model_n_client_outputs(const eng_model *m) { return m->n_client_out; }
const eng_io *eng_model_output(const eng_model *m, size_t i) { return &m->out[i].client; }
