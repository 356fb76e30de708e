// engine/model_internal.h: what the four files of a model version share:
// the model (struct eng_model), its instances, the options its config asks
// for and its tensors' bindings, and the helpers they call one way: model.c
// (create, destroy, statistics, failure state) -> model_run.c (submit, the
// instances' threads) and model_opts.c (the config read at create); model.c
// and model_run.c -> model_prepare.c (the batch sizes prepared at load), never
// the other way round (tests/unit/check_circles.py). Not a public header: only
// those four include it; everyone else sees engine/model.h.
#ifndef INFERD_ENGINE_MODEL_INTERNAL_H
#define INFERD_ENGINE_MODEL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/cpu/plan.h"
#include "engine/model.h"
#include "engine/pad.h"
#include "kernels/base/err.h"
#if INFERD_HAVE_CUDA
#include "engine/numa.h"

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
  // preparation (model_prepare.c): the sizes prepared ascending (the CPU
  // pads to them under the tests' hooks; a recreated GPU plan prepares them
  // again), the time it took
  int *prepared;
  size_t n_prepared;
  _Atomic uint64_t prepare_ns;
  int pad;  // CPU instances under a hook: batches of other sizes run padded
  // a CPU instance's, or a GPU instance's former plans' (recreations)
  _Atomic uint64_t lazy, padded_batches, padded_rows;
  _Atomic uint64_t lazy_by[ENG_LAZY_CAUSES];  // former plans' lazy prepares by cause
  void **pad_buf;  // CPU padding: per graph input, room for max_batch rows
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
  int no_gemm_clusters;  // parameters { key: "gemm_clusters" } "false", or INFERD_GEMM_CLUSTERS=0 (cuda_gemm.h)
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
  eng_graph *gpu_graph;  // eng_model_load_opts.gpu_graph (owned), or NULL: GPU instances plan from graph
  int max_batch;
  model_opts opts;
  int *warm;  // the sizes every instance prepares whatever the budget: 1, the preferred ones, max_batch
  size_t n_warm;
  int64_t prepare_budget_ms;  // eng_model_load_opts
  const _Atomic int *cancel;  // eng_model_load_opts: read while preparing at load (NULL: none)
  // tests' hooks (model_opts.c warm_sizes): INFERD_PREPARE_SIZES, exactly the
  // sizes prepared; INFERD_PREPARE_FAKE_MS, the cost each size counts against
  // the budget instead of its time. Either has CPU instances prepare and pad.
  int *hook_sizes;
  size_t n_hook_sizes;
  int64_t fake_ns;
  int cpu_prepare;
  binding *in, *out;
  size_t n_in, n_out;
  size_t n_client_in;   // the config's inputs; n_client_in..n_in-1 are control and state inputs
  size_t n_client_out;  // the config's outputs; the rest are state outputs
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
  // why the config's GPU instances run on the host (eng_model_placement_note); empty: they do not
  char placement[ERR_MSG_MAX];
#if INFERD_HAVE_CUDA
  eng_cuda_weights *weights;  // the graph's constants once per device, shared by the GPU instances' plans
#endif
};

// --- model_opts.c: the config, read once at eng_model_create

// The config's inputs and outputs bound to the graph's (m->graph set).
int eng_model__bind_all(eng_model *m, const eng_model_config *cfg, err *e);

// The GPU options from the config's parameters and the environment.
int eng_model__parse_opts(const eng_model_config *cfg, model_opts *o, err *e);

// pad_to_longest against the config's tensors as the client sees them (after bind_all).
int eng_model__bind_padding(eng_model *m, const eng_model_config *cfg, err *e);

// The batch sizes prepared whatever the budget (m->warm, m->n_warm), and the tests' hooks.
int eng_model__warm_sizes(eng_model *m, const eng_model_config *cfg, err *e);

// The device of each instance the config asks for (-1: CPU), *out malloc'ed.
int eng_model__instance_devices(const eng_model_config *cfg, int n_gpus, int **out, int *n_out, err *e);

// --- model_run.c: the instances' threads

// Signals cv after bumping *seq; mu held, as for every change a waiter tests.
void eng_model__signal_seq(pthread_cond_t *cv, _Atomic uint64_t *seq, int all);

// A CPU instance's thread (arg: its instance).
void *eng_model__instance_main(void *arg);

// --- model_prepare.c: the batch sizes prepared at load, padding on the CPU

// A CPU instance's sizes prepared (under the tests' hooks only; in->plan made).
int eng_model__prepare_cpu(instance *in, err *e);
// The rows a CPU batch of `rows` runs at (more: padded to a prepared size);
// counts a lazy prepare when the size is not prepared and cannot be padded.
int eng_model__cpu_run_rows(instance *in, int64_t rows);
// gin (graph inputs of `rows`) into the instance's padding buffers, `run` rows.
void eng_model__cpu_pad(instance *in, eng_tensor *gin, int64_t rows, int run);
// Outputs of a padded run cut back to the batch's rows.
void eng_model__cpu_unpad(instance *in, eng_tensor *gout, int64_t rows, int run);

#if INFERD_HAVE_CUDA
// A GPU plan for the instance, with the model's options, its batch sizes
// prepared (within the budget at load; a recreation prepares the same ones).
int eng_model__create_cuda_plan(instance *in, eng_cuda_plan **out, err *e);
#endif

#if INFERD_HAVE_CUDA
// A GPU instance's submit and completion threads (arg: its instance).
void *eng_model__gpu_submit_main(void *arg);
void *eng_model__gpu_done_main(void *arg);

// Where the batcher's gather may write each input of each slot (the plan's
// pinned staging), refreshed whenever the plan is (re)created.
int eng_model__map_stages(instance *in, err *e);
#endif

#endif
