// engine/model.h: a loaded model version and its execution instances.
// The server hands a job (one formed batch) to an idle instance; the
// instance thread runs the plan and calls the job's done callback on that
// thread with the outputs, which stay valid only during the callback.
#ifndef INFERD_ENGINE_MODEL_H
#define INFERD_ENGINE_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "engine/batch_sizes.h"
#include "engine/dev_seg.h"
#include "engine/graph/graph.h"
#include "engine/pad.h"
#include "engine/repo/model_config.h"
#include "engine/tensor.h"
#include "kernels/base/err.h"

typedef struct eng_model eng_model;
typedef struct eng_job eng_job;

// Called on the instance thread. outputs are in the config's output order,
// shaped as the client sees them (batch dim first when the model batches).
typedef void (*eng_job_done_fn)(eng_job *job, int rc, const err *e, const eng_tensor *outputs,
                                size_t n_outputs);

// Called first on the instance thread (its time counts as compute_input):
// lets the caller assemble the batch's inputs there, off its own thread.
typedef int (*eng_job_prepare_fn)(eng_job *job, err *e);

struct eng_job {
  int64_t rows;               // batch size (1 when the model does not batch)
  const eng_tensor *inputs;   // config input order, client shapes, contiguous data
  eng_job_prepare_fn prepare; // may be NULL; may set inputs
  // Set by the engine before prepare: per config input, memory (a GPU
  // instance's pinned staging) where prepare may assemble that input so the
  // engine reads it without another copy, and its size; NULL entries (or a
  // NULL array) where there is none.
  void *const *stage;
  const size_t *stage_cap;
  // May be set by prepare (reset before it): byte ranges of `inputs`
  // (seg.input: the config input) whose bytes live on a GPU instead, sorted
  // by input and offset; their host bytes are not read. Only for inputs
  // eng_model_device_input allows on this instance; the segments' memory
  // must stay until done is called.
  const eng_dev_seg *dev_segs;
  size_t n_dev_segs;
  eng_job_done_fn done;
  void *ctx;
  int instance;               // the instance that runs it (set by the caller, for traces)
  int stream;                 // set by the engine: the GPU stream slot it ran on, -1 on the CPU
  // stamped by the engine (CLOCK_MONOTONIC microseconds)
  int64_t t_start_us, t_infer_start_us, t_infer_end_us;
  // GPU instances: device time of the batch, first copy-in to last
  // copy-back, timed with CUDA events (0 on the CPU or when unknown)
  uint64_t device_ns;
};

// Builds a model from a loaded graph and a completed, validated config
// (engine/repo/config.h: eng_model_config_from_proto), which is read here
// only: the caller keeps it. On success the model owns the graph; on failure
// the caller still does.
// Starts one thread per instance: per instance_group, `count` on the CPU
// (KIND_CPU) or `count` on each of `gpus` (KIND_GPU; every one of the n_gpus
// visible devices when `gpus` is empty). KIND_AUTO must be resolved before.
// Returns once every instance is ready to serve: each GPU instance has
// prepared its batch sizes (engine/batch_sizes.h), the GPU instances in
// parallel, one thread each.
int eng_model_create(eng_graph *g, const eng_model_config *cfg, int n_gpus, eng_model **out, err *e);

// What the server's flags ask of every load.
typedef struct eng_model_load_opts {
  // --model-prepare-budget-s in ms: the time each instance may spend
  // preparing batch sizes beyond 1, the preferred sizes and max_batch_size
  // (which it prepares regardless); the sizes left out run padded to the next
  // prepared one. <0: every size.
  int64_t prepare_budget_ms;
  // Read between sizes (borrowed, may be NULL): once nonzero the load stops
  // preparing and fails with ERR_UNAVAILABLE "cancelled: server shutting
  // down" (a stop signal must not wait out a minute of preparation).
  const _Atomic int *cancel;
  // The graph GPU instances plan from instead of the model's (a QDQ model's
  // float form, eng_graph_opts.qdq_float), or NULL: the model's. Same
  // inputs and outputs. On success the model owns it; on failure the caller
  // still does.
  eng_graph *gpu_graph;
} eng_model_load_opts;

// eng_model_create with the load's options (NULL: the defaults, as eng_model_create).
int eng_model_create_opts(eng_graph *g, const eng_model_config *cfg, int n_gpus, const eng_model_load_opts *lo,
                          eng_model **out, err *e);
int eng_model_n_gpu_instances(const eng_model *m);
// Why the GPU instances the config asks for run on the host instead (a STRING input or output: the
// GPU plan carries fixed-size elements only), for the load log; NULL when none was moved.
const char *eng_model_placement_note(const eng_model *m);
// CUDA ordinal of an instance, -1 for a CPU instance.
int eng_model_instance_device(const eng_model *m, int instance);
// Batches the instance takes at once: 1 on the CPU, one per stream slot on
// a GPU. eng_model_submit may be called that many times before the first
// done callback.
int eng_model_instance_depth(const eng_model *m, int instance);
// The CUDA device of `instance` when config input i of its batches may come
// as device segments (eng_job.dev_segs), copied to that device from the one
// they live on; -1 when it must come as host bytes (a CPU instance, or a type
// converted on the host). Fixed at create; any thread.
int eng_model_device_input(const eng_model *m, int instance, size_t i);

typedef struct eng_instance_stats {
  int device;              // -1: CPU
  int depth;
  int healthy;             // 0 between a CUDA failure and the recreation, and once failed
  int failed;              // could not be recreated: never runs again (eng_model_failed)
  uint64_t recreations;    // times the instance was rebuilt after a CUDA failure
  // GPU only (0 on the CPU), of the instance's current plan
  uint64_t busy_ns;        // device time with one of its batches in flight
  uint64_t batches;
  uint64_t graphs;         // CUDA graphs captured
  uint64_t graph_launches, plain_launches;
  uint64_t device_allocs;  // cudaMalloc + cudaHostAlloc calls of its plan
  int gemm_autotune;       // cuBLASLt autotuning on for its plan (off by default: model_opts.c parse_opts)
  uint64_t gemm_tuned;     // GEMM shapes its plan timed (cuBLASLt autotuning), and the wall time
  uint64_t gemm_tune_ns;
  int timed_layouts, timed_nhwc;  // FP32 plans: warmed batch sizes whose layout was timed, and NHWC's share
  // a GPU instance's placement (engine/numa.h), for the load log: "GPU 1:
  // NUMA node 1, CPUs 16-31", or why there is none ("GPU 0: one NUMA node:
  // no placement"); "" on the CPU
  char numa[160];
  // memory held (ModelStatistics.memory_usage): device and pinned for a GPU
  // instance, the activation arena for a CPU one
  uint64_t device_bytes, pinned_bytes, host_bytes;
  // the device's copy of the model's weights, shared by its GPU instances on
  // that device (engine/cuda/cuda_weights.h): count it once per device
  uint64_t weight_bytes;
  int weights_uploaded;  // this instance's plan uploaded it (the others found it there)
  int weight_holders;    // instances holding it now
  // batch sizes prepared at load (engine/batch_sizes.h; a CPU instance
  // prepares none unless a test hook says so: nothing of its plan depends on
  // the size), how long that took, and whether other sizes run padded
  int prepared_sizes;
  uint64_t prepare_ns;
  int pad;
  // since load, summed over recreations: batches that still captured,
  // tuned or made something for their size on the request path (should stay
  // 0), and batches run padded with the rows added to them
  uint64_t lazy_prepares, padded_batches, padded_rows;
  uint64_t lazy_by_cause[ENG_LAZY_CAUSES];  // the lazy prepares by why (a batch may count under several)
  // GPU only: nodes its plan runs on the host, for want of a CUDA path
  // (host fallback, engine/cuda/plan_cuda_host.h); 0 on the CPU
  int host_nodes;
} eng_instance_stats;

// The k-th host node of GPU instance `index` (eng_instance_stats.host_nodes)
// as the load log says it: "node 'X' (op_type 'DFT'): no CUDA path, runs on
// the host (N bytes in, M out per batch)", copied into buf (cap bytes).
// 0 when there is one, -1 otherwise (buf then ""). Any thread.
int eng_model_instance_host_node(const eng_model *m, int index, int k, char *buf, size_t cap);

// Safe from any thread while jobs run.
void eng_model_instance_stats(const eng_model *m, int instance, eng_instance_stats *s);

// Joins the instance threads; no job may be in flight.
void eng_model_destroy(eng_model *m);

// UNAVAILABLE with why (in *e) once every instance of the model has failed
// permanently (a GPU instance whose plan could not be recreated after a CUDA
// failure), else 0; *poisoned (may be NULL) then says whether a
// context-fatal device error caused it, which only a process restart
// clears. One atomic load while the model is fine: callable per request.
int eng_model_failed(eng_model *m, int *poisoned, err *e);
// One of its instances failed from a context-fatal (sticky) device error:
// that device is dead for the whole process, whatever else still runs.
int eng_model_poisoned(const eng_model *m);
// That instance failed for good (it answers every job at once with
// UNAVAILABLE): a scheduler stops giving it batches. Takes its lock.
int eng_model_instance_failed(eng_model *m, int instance);
int eng_model_n_instances(const eng_model *m);
int eng_model_max_batch(const eng_model *m);
// The config's pad_to_longest (engine/pad.h); NULL when requests are never padded.
const eng_pad *eng_model_pad(const eng_model *m);
// The tensors as the client sees them: dims exclude the batch dimension.
// Inputs 0..eng_model_n_client_inputs-1 are the config's, what a request
// carries; the rest are sequence_batching's control inputs, which the server
// fills (eng_model_config.sequence).
size_t eng_model_n_inputs(const eng_model *m);
size_t eng_model_n_client_inputs(const eng_model *m);
const eng_io *eng_model_input(const eng_model *m, size_t i);
// Outputs 0..eng_model_n_client_outputs-1 are the config's; the rest are
// sequence_batching's state outputs, which the server keeps.
size_t eng_model_n_outputs(const eng_model *m);
size_t eng_model_n_client_outputs(const eng_model *m);
const eng_io *eng_model_output(const eng_model *m, size_t i);

// Runs the job on `instance`, which the caller knows to have room (fewer
// than its depth of jobs whose done callback has not returned). Returns at once; job->done follows on the instance
// thread. The job and its input data must stay alive until done returns.
int eng_model_submit(eng_model *m, int instance, eng_job *job, err *e);

// Monotonic clock in microseconds, shared by the engine and the server.
int64_t eng_now_us(void);

#endif
