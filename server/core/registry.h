// server/core/registry.h: the models the server serves, with their readiness and
// statistics. Each model name has a slot holding its current generation (a
// srv_model: config, versions, engines, statistics). Model control replaces
// a slot's generation (load, reload, unload) under the registry's write
// lock; readers (metadata, index, statistics, metrics) hold the read lock
// while they look, and a request holds a reference on the generation it was
// admitted to, so a replaced generation is freed only once its last request
// has been answered (no request is lost or cut off by an unload).
#ifndef INFERD_SERVER_REGISTRY_H
#define INFERD_SERVER_REGISTRY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/model.h"
#include "engine/repo/model_config.h"
#include "kernels/base/err.h"
#include "model_config.pb-c.h"
#include "server/core/labels.h"
#include "server/obs/hist.h"
#include "server/obs/window.h"

typedef struct srv_duration {
  _Atomic uint64_t count;
  _Atomic uint64_t ns;
} srv_duration;

typedef enum srv_fail_reason {
  SRV_FAIL_REJECTED,  // refused before queueing (bad input, queue full, draining)
  SRV_FAIL_CANCELED,  // the client went away or its deadline passed
  SRV_FAIL_BACKEND,   // the engine failed the execution
  SRV_FAIL_OTHER,
  SRV_FAIL_N
} srv_fail_reason;

typedef struct srv_batch_stat {
  _Atomic uint64_t count;
  _Atomic uint64_t input_ns, infer_ns, output_ns;
} srv_batch_stat;

typedef struct srv_stats {
  srv_duration success, fail, queue, compute_input, compute_infer, compute_output;
  _Atomic uint64_t fail_by_reason[SRV_FAIL_N];
  _Atomic uint64_t inference_count;  // rows
  _Atomic uint64_t execution_count;  // batches
  _Atomic uint64_t last_inference_ms;  // wall clock, ms since the epoch
  _Atomic int64_t pending;             // requests queued or running
  // inputs read from CUDA shared memory: copied device to device into a
  // batch on a GPU instance, or through a host copy (CPU instances, types
  // converted on the host, padded inputs)
  _Atomic uint64_t cuda_in_device, cuda_in_host;
  // inputs of big gRPC messages that spanned the slices they arrived in
  // (server/core/infer_pieces.c): copied from those pieces straight into the
  // batch, or joined into one run first (BYTES, padded, not a plain model)
  _Atomic uint64_t pieces_gathered, pieces_joined;
  // Per batch size 1..n_batch (max(1, max_batch_size)), in pages of
  // SRV_BATCH_PAGE sizes allocated when a size in them first runs: a model
  // allowed huge batches that runs a few sizes holds and walks a few pages
  // (a dense table walked whole held the HTTP loop 30 s at 2^31). Reached
  // through srv_stats_batch / srv_stats_batch_next.
  _Atomic(srv_batch_stat *) *batch_pages;
  int n_batch;
  // latency distributions (microseconds) per stage, and rows per execution
  prof_hist *h_request, *h_queue, *h_input, *h_infer, *h_output, *h_batch;
  // throughput over a sliding window: successful requests and their rows per second
  prof_window win_requests, win_rows;
  int have_windows;
} srv_stats;

#define SRV_BATCH_PAGE 64

// The statistics of batch size `size` (1..n_batch), allocating its page on
// first use (any thread; lock-free); NULL when out of range or out of memory.
srv_batch_stat *srv_stats_batch(srv_stats *s, int size);
// The next batch size after `after` (0: from the start) that ran, with its
// statistics in *out; 0 when none. Walks only allocated pages.
int srv_stats_batch_next(const srv_stats *s, int after, const srv_batch_stat **out);

// Classes of a version's failures, each logged at most once per 10 s.
typedef enum srv_vlog { SRV_VLOG_EXEC, SRV_VLOG_REFUSED, SRV_VLOG_N } srv_vlog;

struct srv_ens_plan;

typedef struct srv_version {
  int64_t version;
  char version_str[24];
  eng_model *model;  // NULL when this version failed to load, or for an ensemble's
  // an ensemble's version (platform "ensemble"): its steps, which the model
  // owns (server/core/ensemble_plan.h); NULL for an engine's. Ready when
  // either this or model is set (srv_version_ready).
  const struct srv_ens_plan *ens;
  // the built-in repeat backend's (backend "repeat", server/core/repeat_cfg.h),
  // which the model owns; NULL otherwise. The third kind of version: its
  // requests run on the server's repeat runner (server/core/repeat.h), which
  // keeps when its one instance is next free here (under the runner's lock).
  const struct srv_repeat_cfg *rep;
  int64_t rep_free_at_us;
  // the generative backend's (backend "inferd_llm", server/core/llm_serve.h):
  // this version's checkpoint and runners, owned; its model's checked config,
  // borrowed. The fourth kind of version; NULL otherwise.
  struct srv_llm *llm;
  const struct srv_llm_cfg *llm_cfg;
  err status;
  srv_stats stats;
  void *sched;  // the scheduler's per-version state, set by the scheduler
  int trace_pid;  // this version's process track in trace files
  _Atomic uint64_t batch_ids;  // numbers the executions, for traces
  // failures logged one line per class per 10 s with a count (srv_version_log_failure)
  _Atomic int64_t fail_logged_us[SRV_VLOG_N];
  _Atomic uint64_t fail_unlogged[SRV_VLOG_N];
} srv_version;


typedef struct srv_model {
  char name[256];
  Inference__ModelConfig *config;  // completed; owned; for the ModelConfig answers
  // the engine's copy of config (eng_model_config_from_proto), which the
  // engine and the scheduler read: built once, when the first version's
  // graph has completed and validated config; NULL until then; owned
  eng_model_config *engine_config;
  err status;                       // code != 0: the model is not ready, with why
  srv_labels *labels;               // the outputs' label files (classification); NULL: none; owned
  struct srv_ens_plan *ens;         // an ensemble's plan, shared by its versions; NULL otherwise; owned
  struct srv_repeat_cfg *rep;       // the repeat backend's checked config, shared by its versions; NULL otherwise; owned
  struct srv_llm_cfg *llm_cfg;      // the generative backend's checked config, shared by its versions; NULL otherwise; owned
  int decoupled;                    // model_transaction_policy.decoupled: answers on ModelStreamInfer only
  srv_version *versions;            // ascending version order
  size_t n_versions;
  // model control
  _Atomic int64_t refs;   // requests holding this generation
  int unloaded;           // a shell left by an unload: not counted against readiness
  char last_error[512];   // why the last load of this name failed while this generation kept serving
  uint64_t signature;     // what the repository scan saw (versions, config file), for poll mode
} srv_model;

// Whether v serves: its engine loaded, or it is an ensemble's, the repeat backend's or a generative model's.
static inline int srv_version_ready(const srv_version *v) {
  return v->model != NULL || v->ens != NULL || v->rep != NULL || v->llm != NULL;
}

// The tensors a version shows its clients and checks requests against: its
// engine's (eng_model_input and friends), or for an ensemble its config's.
// Inputs past srv_version_n_client_inputs are sequence_batching's controls
// (the server fills them); outputs past srv_version_n_client_outputs its state.
size_t srv_version_n_inputs(const srv_version *v);
size_t srv_version_n_client_inputs(const srv_version *v);
const eng_io *srv_version_input(const srv_version *v, size_t i);
size_t srv_version_n_client_outputs(const srv_version *v);
const eng_io *srv_version_output(const srv_version *v, size_t i);
// Whether client input i may be left out of a request (a generative model's: llm_grpc.c checks them).
int srv_version_input_optional(const srv_version *v, size_t i);
int srv_version_max_batch(const srv_version *v);

// UNAVAILABLE with why when every instance of v's engine failed for good
// (eng_model_failed: a sticky device error), else 0; *poisoned (may be NULL)
// says whether the device is dead for the whole process. One atomic load
// while it is fine: called per request.
int srv_version_failed(srv_model *m, srv_version *v, int *poisoned, err *e);
// Logs n failures of class c of v at most once per class per 10 s, with how
// many there were since the last line, so a broken model does not write a
// line per request.
void srv_version_log_failure(srv_model *m, srv_version *v, srv_vlog c, const err *e, uint64_t n);

typedef struct srv_registry srv_registry;

// How the registry builds its models.
typedef struct srv_registry_opts {
  // as config_complete takes it (CONFIG_NO_AUTO_COMPLETE disables auto-complete)
  int default_max_batch_size;
  // --model-max-batch-size, --model-max-priority-levels: the most a config
  // may ask (config_check_limits); 0: CONFIG_MAX_*_DEFAULT
  int max_batch_size;
  uint64_t max_priority_levels;
  int n_gpus;  // CUDA devices visible (KIND_AUTO runs on them when > 0)
  // --model-store-allow: folders outside the repository that links placed
  // in it may lead into (kernels/base/confine.h); borrowed for the
  // registry's life
  const char *const *store_allow;
  size_t n_store_allow;
  // the most input bytes one load's model_warmup may feed, all entries together (eng_warmup_run; 0:
  // ENG_WARMUP_MAX_BYTES), and the most runs (0: ENG_WARMUP_MAX_RUNS)
  uint64_t warmup_max_bytes, warmup_max_runs;
  // --model-prepare-budget-s in ms (eng_model_load_opts); 0 in opts built
  // without the flag: ENG_PREPARE_BUDGET_MS_DEFAULT
  int64_t prepare_budget_ms;
  int prepare_budget_set;  // 1: prepare_budget_ms as given, 0 included
  // borrowed, may be NULL: nonzero ends a warmup in progress at its next run
  // and fails that load (the server is stopping: srv_server.draining)
  const atomic_int *cancel;
} srv_registry_opts;

// Scans and loads every model of the repository. Fails only when the
// repository itself cannot be read; models that fail are kept, not ready,
// with their reason logged and reported.
int srv_registry_load(const char *repo_dir, const srv_registry_opts *o, srv_registry **out, err *e);
// An empty registry of that repository (explicit mode), models added by
// srv_registry_publish.
int srv_registry_create(const char *repo_dir, const srv_registry_opts *o, srv_registry **out, err *e);
void srv_registry_destroy(srv_registry *r);
// Stops every generative model's runners (server/core/llm_serve.h): the
// requests they hold end with UNAVAILABLE, later ones are refused. At
// shutdown, while the transports that answer them are still open.
void srv_registry_stop_llm(srv_registry *r);

// Model control (one thread at a time: server/core/control.c).
// Builds a new generation of the named model from the repository, outside
// any lock (slow: loads the graphs). *out is always set (barring out of
// memory): a generation with status.code != 0 says why it cannot serve.
// config_text: a config.pbtxt text to use instead of the file (NULL: the file).
int srv_registry_build(srv_registry *r, const char *name, const char *config_text, srv_model **out, err *e);
// The signature a scan entry would give its generation (poll mode compares).
struct repo_model;
struct repo_skip;
// One warning line per directory a scan left out for its name, naming it
// with its bytes escaped (srv_log) and saying why.
void srv_registry_warn_skipped(const struct repo_skip *skips, size_t n);
// The directories srv_registry_load's scan left out (and warned about),
// borrowed; none for a registry from srv_registry_create.
const struct repo_skip *srv_registry_load_skipped(const srv_registry *r, size_t *n);
uint64_t srv_registry_scan_signature(const struct repo_model *rm);
// A generation with no versions, UNAVAILABLE with `why` (an unload).
srv_model *srv_registry_shell(const char *name, const char *why);
// Puts m in its name's slot (adding the slot for a new name) and returns the
// generation it replaced (NULL when none): new requests find m from now on.
srv_model *srv_registry_publish(srv_registry *r, srv_model *m);
// Sets the slot's last_error under the write lock ("" clears it).
void srv_registry_set_error(srv_registry *r, const char *name, const char *msg);
// The current generation of `name` (NULL when none); only for the control
// thread, the one writer.
srv_model *srv_registry_current(srv_registry *r, const char *name);
// Waits until no request holds m (it was replaced: no new one can take it).
void srv_registry_wait_idle(srv_registry *r, srv_model *m);
// Frees a generation nobody holds (after the scheduler dropped its versions).
void srv_model_free(srv_model *m);

// Readers that walk the slots or keep a model pointer while they answer.
void srv_registry_rdlock(srv_registry *r);
void srv_registry_rdunlock(srv_registry *r);
// srv_registry_find under the read lock, taking a reference on the
// generation found (released with srv_registry_unref).
int srv_registry_find_ref(srv_registry *r, const char *model, const char *version, srv_model **m,
                          srv_version **v, err *e);
void srv_registry_unref(srv_registry *r, srv_model *m);

size_t srv_registry_n_models(const srv_registry *r);
// The repository the registry loads from (--model-repository).
const char *srv_registry_repo_dir(const srv_registry *r);
srv_model *srv_registry_model_at(const srv_registry *r, size_t i);

// Finds the model and version a request names (version "" = the highest
// ready version): NOT_FOUND for an unknown model or version, INVALID_ARGUMENT
// for a version that is not a decimal integer >= 0, UNAVAILABLE for one that
// failed to load. The messages begin as Triton's do ("Request for unknown
// model: 'm' is not found", "failed to get model version from specified
// version string 'x'"), which clients test for.
int srv_registry_find(const srv_registry *r, const char *model, const char *version, srv_model **m,
                      srv_version **v, err *e);

// Wall clock in milliseconds since the epoch (for last_inference).
uint64_t srv_wall_ms(void);

#endif
