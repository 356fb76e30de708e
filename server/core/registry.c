// registry.c: loading the repository's models, at start-up and on model
// control. A model that fails (bad config, unsupported op, missing file) is
// kept with its reason so the server reports it and serves the others.
#include "server/core/registry.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "engine/batch_sizes.h"
#include "engine/graph/graph.h"
#include "engine/repo/config.h"
#include "engine/repo/repo.h"
#include "engine/warmup.h"
#include "kernels/base/confine.h"
#include "server/core/ensemble_plan.h"
#include "server/core/llm_cfg.h"
#include "server/core/llm_serve.h"
#include "server/core/repeat_cfg.h"
#include "server/obs/log.h"

struct srv_registry {
  pthread_rwlock_t lock;  // guards the slots array and which generation each holds
  srv_model **slots;      // one per model name, in the order names appeared
  size_t n, cap;
  char repo_dir[4096];
  srv_registry_opts o;
  // where links in the repository may lead: repo_dir, then o.store_allow
  const char **root_dirs;
  eng_confine_roots roots;
  int next_pid;  // trace process ids, one per version ever loaded (control thread only)
  // the directories srv_registry_load's scan left out for their names (already warned about)
  repo_skip *skips;
  size_t n_skips;
  // a retired generation's last request wakes the control thread here
  pthread_mutex_t idle_mu;
  pthread_cond_t idle_cv;
};

uint64_t srv_wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void collect_io(const eng_graph *g, eng_io **in, size_t *n_in, eng_io **out, size_t *n_out) {
  *n_in = eng_graph_n_inputs(g);
  *n_out = eng_graph_n_outputs(g);
  *in = calloc(*n_in ? *n_in : 1, sizeof **in);
  *out = calloc(*n_out ? *n_out : 1, sizeof **out);
  for (size_t i = 0; *in && i < *n_in; i++) (*in)[i] = *eng_graph_input(g, i);
  for (size_t i = 0; *out && i < *n_out; i++) (*out)[i] = *eng_graph_output(g, i);
}

// Where links met on the way to each file a model names may lead, besides
// the file's own folder (kernels/base/confine.h): the repository's roots
// for names the operator wrote, nowhere (NULL) for names a load request's
// config override gave.
typedef struct load_bounds {
  const eng_confine_roots *model_file, *external_data, *warmup;
} load_bounds;

// Whether the config puts any instance on a GPU (KIND_AUTO resolved).
static int n_gpu_groups(const eng_model_config *c, int n_gpus) {
  int n = 0;
  for (size_t i = 0; c && n_gpus > 0 && i < c->n_groups; i++) n += c->groups[i].kind == ENG_INSTANCE_GPU;
  return n;
}

// Loads one version: graph, completion of the config from the first graph
// when config.pbtxt was missing, validation, instances.
static int load_version(srv_model *m, const char *model_dir, const repo_version *rv, int *completed,
                        int config_from_file, const srv_registry_opts *o, const load_bounds *b, srv_version *v,
                        err *e) {
  eng_graph *g = NULL;
  eng_graph_opts gopts;
  TRY(config_graph_opts(m->config, &gopts, e));
  TRY(eng_confine_check(model_dir, rv->path + strlen(model_dir) + 1, b->model_file, "model file", e));
  gopts.roots = b->external_data;
  TRY(eng_graph_load_opts(rv->path, &gopts, &g, e));
  if (eng_graph_n_attention(g) || gopts.no_fuse_attention)
    srv_log(SRV_LOG_INFO,
            "model '%s' version %" PRId64 ": %zu attention subgraph(s) fused%s, %zu with Q/K/V projections "
            "merged into one GEMM%s",
            m->name, rv->version, eng_graph_n_attention(g), gopts.no_fuse_attention ? " (fuse_attention off)" : "",
            eng_graph_n_qkv_merged(g), gopts.no_merge_qkv ? " (merge_qkv off)" : "");
  if (gopts.qdq_float && eng_graph_n_qdq_nodes(g))
    srv_log(SRV_LOG_INFO,
            "model '%s' version %" PRId64 ": the QDQ graph runs in float (qdq_integer 0): %zu weight "
            "DequantizeLinear(s) folded, %zu QuantizeLinear->DequantizeLinear pair(s) as one fake-quant op",
            m->name, rv->version, eng_graph_n_qdq_weights(g), eng_graph_n_qdq_pairs(g));
  if (eng_graph_n_qdq_conv(g) || eng_graph_n_qdq_matmul(g))
    srv_log(SRV_LOG_INFO, "model '%s' version %" PRId64 ": %zu QDQ Conv(s) and %zu QDQ MatMul/Gemm(s) run as integer ops",
            m->name, rv->version, eng_graph_n_qdq_conv(g), eng_graph_n_qdq_matmul(g));
  eng_io *in = NULL, *out = NULL;
  size_t n_in, n_out;
  collect_io(g, &in, &n_in, &out, &n_out);
  int rc = 0;
  if (!in || !out) rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  if (rc == 0 && !*completed) {
    rc = config_complete(m->config, config_from_file, in, n_in, out, n_out, o->default_max_batch_size, e);
    if (rc == 0) config_resolve_kinds(m->config, o->n_gpus, eng_graph_n_ml_nodes(g));
    if (rc == 0) *completed = 1;
  }
  if (rc == 0) {
    // first, so a config over a bound is told so rather than what follows
    // from it; 0: the production default (opts built without the flags)
    config_limits lim = {o->max_batch_size > 0 ? o->max_batch_size : CONFIG_MAX_BATCH_SIZE_DEFAULT,
                         o->max_priority_levels > 0 ? o->max_priority_levels : CONFIG_MAX_PRIORITY_LEVELS_DEFAULT};
    rc = config_check_limits(m->config, &lim, e);
  }
  if (rc == 0) rc = config_validate(m->config, in, n_in, out, n_out, e);
  free(in);
  free(out);
  // completion is done once and the message is not changed afterwards: one copy serves every version
  if (rc == 0 && !m->engine_config) rc = eng_model_config_from_proto(m->config, &m->engine_config, e);
  eng_model_load_opts lo = {.prepare_budget_ms = o->prepare_budget_set ? o->prepare_budget_ms
                                                                         : ENG_PREPARE_BUDGET_MS_DEFAULT,
                            .cancel = o->cancel};  // a stop signal ends the preparation, as a warmup
  // a QDQ model's GPU instances run its float form (graph_pass_qdq.c): the
  // CUDA plan has no integer convolutions or products
  eng_graph *gg = NULL;
  if (rc == 0 && n_gpu_groups(m->engine_config, o->n_gpus) && eng_graph_n_qdq_nodes(g) && !gopts.qdq_float) {
    eng_graph_opts fo = gopts;
    fo.qdq_float = 1;
    rc = eng_graph_load_opts(rv->path, &fo, &gg, e);
    if (rc == 0)
      srv_log(SRV_LOG_INFO,
              "model '%s' version %" PRId64 ": GPU instances run the QDQ graph in float: %zu weight "
              "DequantizeLinear(s) folded, %zu QuantizeLinear->DequantizeLinear pair(s) as one fake-quant kernel",
              m->name, rv->version, eng_graph_n_qdq_weights(gg), eng_graph_n_qdq_pairs(gg));
    lo.gpu_graph = gg;
  }
  if (rc == 0) rc = eng_model_create_opts(g, m->engine_config, o->n_gpus, &lo, &v->model, e);
  if (rc) {
    eng_graph_destroy(gg);
    eng_graph_destroy(g);
    return rc;
  }
  if (m->engine_config->n_warmups) {
    uint64_t runs = 0;
    int64_t t0 = eng_now_us();
    eng_warmup_limits lim = {.max_bytes = o->warmup_max_bytes, .max_runs = o->warmup_max_runs, .cancel = o->cancel};
    // the whole warmup's budget first (eng_warmup_run checks it again): over it, the load fails before any run
    rc = eng_warmup_check(m->engine_config, eng_model_n_instances(v->model), &lim, e);
    if (rc == 0) {
      srv_log(SRV_LOG_INFO, "model '%s' version %" PRId64 ": running model_warmup (%zu entr%s)", m->name,
              rv->version, m->engine_config->n_warmups, m->engine_config->n_warmups == 1 ? "y" : "ies");
      rc = eng_warmup_run(v->model, m->engine_config, model_dir, b->warmup, &lim, &runs, e);
    }
    if (rc) {
      eng_model_destroy(v->model);
      v->model = NULL;
      return rc;
    }
    srv_log(SRV_LOG_INFO, "model '%s' version %" PRId64 ": model_warmup ran %" PRIu64 " execution(s) in %.1f ms",
            m->name, rv->version, runs, (double)(eng_now_us() - t0) / 1000.0);
  }
  return 0;
}

static size_t n_batch_pages(const srv_stats *s) { return (size_t)s->n_batch / SRV_BATCH_PAGE + 1; }

srv_batch_stat *srv_stats_batch(srv_stats *s, int size) {
  if (size < 1 || size > s->n_batch || !s->batch_pages) return NULL;
  _Atomic(srv_batch_stat *) *slot = &s->batch_pages[size / SRV_BATCH_PAGE];
  srv_batch_stat *p = atomic_load_explicit(slot, memory_order_acquire);
  if (!p) {
    srv_batch_stat *fresh = calloc(SRV_BATCH_PAGE, sizeof *fresh);
    if (!fresh) return NULL;
    // two threads may race to a new page: one wins, the other frees its copy
    if (atomic_compare_exchange_strong_explicit(slot, &p, fresh, memory_order_acq_rel, memory_order_acquire))
      p = fresh;
    else
      free(fresh);
  }
  return &p[size % SRV_BATCH_PAGE];
}

int srv_stats_batch_next(const srv_stats *s, int after, const srv_batch_stat **out) {
  if (!s->batch_pages || after < 0) return 0;
  for (int size = after + 1; size <= s->n_batch;) {
    const srv_batch_stat *p = atomic_load_explicit(&s->batch_pages[size / SRV_BATCH_PAGE], memory_order_acquire);
    if (!p) {
      size = (size / SRV_BATCH_PAGE + 1) * SRV_BATCH_PAGE;  // the next page
      continue;
    }
    if (atomic_load(&p[size % SRV_BATCH_PAGE].count)) {
      *out = &p[size % SRV_BATCH_PAGE];
      return size;
    }
    size++;
  }
  return 0;
}

static int init_stats(srv_stats *s, int max_batch) {
  s->n_batch = max_batch > 0 ? max_batch : 1;
  s->batch_pages = calloc(n_batch_pages(s), sizeof *s->batch_pages);
  if (!s->batch_pages) return -1;
  err e;
  prof_window_init(&s->win_requests);
  prof_window_init(&s->win_rows);
  s->have_windows = 1;
  prof_hist_config lat = PROF_HIST_LATENCY_US, rows = PROF_HIST_SMALL_INT(s->n_batch);
  prof_hist **lats[] = {&s->h_request, &s->h_queue, &s->h_input, &s->h_infer, &s->h_output};
  for (size_t i = 0; i < sizeof lats / sizeof lats[0]; i++)
    if (prof_hist_create(&lat, lats[i], &e) != 0) return -1;
  return prof_hist_create(&rows, &s->h_batch, &e) != 0 ? -1 : 0;
}

static void free_stats(srv_stats *s) {
  if (s->batch_pages) {
    for (size_t i = 0; i < n_batch_pages(s); i++) free(atomic_load(&s->batch_pages[i]));
    free(s->batch_pages);
  }
  if (s->have_windows) {
    prof_window_destroy(&s->win_requests);
    prof_window_destroy(&s->win_rows);
  }
  prof_hist *hs[] = {s->h_request, s->h_queue, s->h_input, s->h_infer, s->h_output, s->h_batch};
  for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) prof_hist_destroy(hs[i]);
}

// What poll mode compares between scans: the versions the policy selects
// and the config file's identity (a version_policy change edits it).
uint64_t srv_registry_scan_signature(const repo_model *rm) {
  uint64_t h = 1469598103934665603ULL;
#define MIX(x) (h = (h ^ (uint64_t)(x)) * 1099511628211ULL)
  for (size_t i = 0; i < rm->n_versions; i++) MIX(rm->versions[i].version);
  char path[4200];
  snprintf(path, sizeof path, "%s/config.pbtxt", rm->dir);
  struct stat st;
  if (stat(path, &st) == 0) {
    MIX(st.st_mtim.tv_sec);
    MIX(st.st_mtim.tv_nsec);
    MIX(st.st_size);
    MIX(st.st_ino);
  }
  MIX(rm->status.code);
#undef MIX
  return h;
}

// --- ensembles (ensemble_plan.h): no files, no engine; steps named by model

// A generation not yet published (the start-up scan builds every model
// before publishing any), looked up before the registry's.
typedef struct pending {
  srv_model **m;
  size_t n;
} pending;

static srv_model *find_member(srv_registry *r, const pending *pd, const char *name) {
  for (size_t i = 0; pd && i < pd->n; i++)
    if (pd->m[i] && strcmp(pd->m[i]->name, name) == 0) return pd->m[i];
  // the control thread is the registry's one writer and builds here: the generation stays
  return srv_registry_current(r, name);
}

// The member's completed config when it serves the version the step names
// ("" any), else NULL with why.
static const Inference__ModelConfig *member_config(const srv_model *m, const char *version, char *why, size_t cap) {
  if (!m || m->unloaded || !m->config) {
    snprintf(why, cap, "it is not loaded");
    return NULL;
  }
  for (size_t j = 0; j < m->n_versions; j++) {
    const srv_version *v = &m->versions[j];
    if ((!version[0] || strcmp(v->version_str, version) == 0) && srv_version_ready(v)) return m->config;
  }
  if (version[0]) snprintf(why, cap, "version %s of it is not ready", version);
  else snprintf(why, cap, "it has no ready version (%.200s)", m->status.msg[0] ? m->status.msg : "none loaded");
  return NULL;
}

static void load_ensemble(srv_registry *r, const pending *pd, repo_model *rm, srv_model *m) {
  const Inference__ModelEnsembling *es = m->config->ensemble_scheduling;
  size_t n_steps = es ? es->n_step : 0;
  srv_ens_member *mem = calloc(n_steps ? n_steps : 1, sizeof *mem);
  char (*whys)[300] = calloc(n_steps ? n_steps : 1, sizeof *whys);
  m->versions = calloc(rm->n_versions ? rm->n_versions : 1, sizeof *m->versions);
  if (!mem || !whys || !m->versions) {
    err_set(&m->status, ERR_RESOURCE_EXHAUSTED, "out of memory");
    free(mem);
    free(whys);
    return;
  }
  for (size_t i = 0; i < n_steps; i++) {
    const Inference__ModelEnsembling__Step *st = es->step[i];
    char version[24] = "";
    if (st->model_version >= 0) snprintf(version, sizeof version, "%" PRId64, st->model_version);
    const char *name = st->model_name ? st->model_name : "";
    srv_model *cm = name[0] && strcmp(name, m->name) != 0 ? find_member(r, pd, name) : NULL;
    mem[i].cfg = member_config(cm, version, whys[i], sizeof whys[i]);
    mem[i].why = whys[i];
  }
  err pe = {0};
  char *all = malloc(SRV_ENS_WHY_MAX);
  if (all) all[0] = 0;
  int rc = srv_ens_plan_create(m->config, mem, &m->ens, all, all ? SRV_ENS_WHY_MAX : 0, &pe);
  if (rc && all && strlen(all) >= sizeof pe.msg)  // the answer holds the first reasons: the log all of them
    srv_log(SRV_LOG_ERROR, "model '%s': every reason it cannot load: %s", m->name, all);
  free(all);
  free(mem);
  free(whys);
  m->n_versions = rm->n_versions;
  for (size_t i = 0; i < rm->n_versions; i++) {
    srv_version *v = &m->versions[i];
    v->version = rm->versions[i].version;
    snprintf(v->version_str, sizeof v->version_str, "%" PRId64, v->version);
    if (rc == 0 && init_stats(&v->stats, m->ens->max_batch) != 0)
      rc = err_set(&pe, ERR_RESOURCE_EXHAUSTED, "out of memory");
    if (rc) {
      v->status = pe;
      continue;
    }
    v->ens = m->ens;
  }
  if (rc) {
    for (size_t i = 0; i < m->n_versions; i++) m->versions[i].ens = NULL;
    srv_ens_plan_destroy(m->ens);
    m->ens = NULL;
    m->status = pe;
    srv_log(SRV_LOG_ERROR, "model '%s' is not ready: %s", m->name, pe.msg);
    return;
  }
  if (!rm->n_versions) return;  // the scan's status says why
  m->status = (err){0};
  srv_log(SRV_LOG_INFO, "model '%s' (ensemble of %zu steps) is ready, %zu version%s, max_batch_size %d", m->name,
          m->ens->n_steps, m->n_versions, m->n_versions == 1 ? "" : "s", m->ens->max_batch);
}

// --- the built-in repeat backend (repeat_cfg.h): no files, no engine, one checked config for its versions

static void load_repeat(repo_model *rm, srv_model *m) {
  m->versions = calloc(rm->n_versions ? rm->n_versions : 1, sizeof *m->versions);
  if (!m->versions) {
    err_set(&m->status, ERR_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  err pe = {0};
  int rc = srv_repeat_cfg_create(m->config, &m->rep, &pe);
  m->n_versions = rm->n_versions;
  for (size_t i = 0; i < rm->n_versions; i++) {
    srv_version *v = &m->versions[i];
    v->version = rm->versions[i].version;
    snprintf(v->version_str, sizeof v->version_str, "%" PRId64, v->version);
    if (rc == 0 && init_stats(&v->stats, 1) != 0) rc = err_set(&pe, ERR_RESOURCE_EXHAUSTED, "out of memory");
    if (rc) {
      v->status = pe;
      continue;
    }
    v->rep = m->rep;
  }
  if (rc) {
    for (size_t i = 0; i < m->n_versions; i++) m->versions[i].rep = NULL;
    srv_repeat_cfg_destroy(m->rep);
    m->rep = NULL;
    m->status = pe;
    srv_log(SRV_LOG_ERROR, "model '%s' is not ready: %s", m->name, pe.msg);
    return;
  }
  if (!rm->n_versions) return;  // the scan's status says why
  m->status = (err){0};
  srv_log(SRV_LOG_INFO, "model '%s' (backend repeat, decoupled) is ready, %zu version%s", m->name, m->n_versions,
          m->n_versions == 1 ? "" : "s");
}

// --- the generative backend (llm_cfg.h, llm_serve.h): each version folder a Hugging Face checkpoint

static void load_llm(repo_model *rm, srv_model *m, int n_gpus) {
  m->versions = calloc(rm->n_versions ? rm->n_versions : 1, sizeof *m->versions);
  if (!m->versions) {
    err_set(&m->status, ERR_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  m->decoupled = 1;  // implied when the config leaves the policy out (llm_cfg.c refuses decoupled: false)
  if (!m->config->model_transaction_policy) {  // and shown so in ModelConfig, as it behaves
    Inference__ModelTransactionPolicy *tp = malloc(sizeof *tp);
    if (tp) {
      inference__model_transaction_policy__init(tp);
      tp->decoupled = 1;
      m->config->model_transaction_policy = tp;
    }
  }
  err pe = {0};
  int rc = srv_llm_cfg_create(m->config, &m->llm_cfg, &pe);
  m->n_versions = rm->n_versions;
  int ready = 0;
  for (size_t i = 0; i < rm->n_versions; i++) {
    srv_version *v = &m->versions[i];
    v->version = rm->versions[i].version;
    snprintf(v->version_str, sizeof v->version_str, "%" PRId64, v->version);
    if (rc) {
      v->status = pe;
      continue;
    }
    char dir[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/%" PRId64, rm->dir, v->version);
    int64_t t0 = eng_now_us();
    int vrc = srv_llm_create(m->llm_cfg, dir, m->name, n_gpus, &v->llm, &v->status);
    if (vrc == 0 && init_stats(&v->stats, 1) != 0) {
      srv_llm_destroy(v->llm);
      v->llm = NULL;
      vrc = err_set(&v->status, ERR_RESOURCE_EXHAUSTED, "out of memory");
    }
    if (vrc) {
      err_prefix(&v->status, "%s: ", dir);
      srv_log(SRV_LOG_ERROR, "model '%s' version %s failed to load: %s", m->name, v->version_str, v->status.msg);
      if (!m->status.code) m->status = v->status;
      continue;
    }
    v->llm_cfg = m->llm_cfg;
    ready++;
    srv_log(SRV_LOG_INFO, "model '%s' version %s (backend %s, decoupled) is ready in %.1f s: %d runner%s (%s), "
            "max_model_len %" PRId64, m->name, v->version_str, SRV_LLM_BACKEND, (double)(eng_now_us() - t0) / 1e6,
            srv_llm_n_runners(v->llm), srv_llm_n_runners(v->llm) == 1 ? "" : "s", srv_llm_where(v->llm),
            srv_llm_max_model_len(v->llm));
  }
  if (rc) {
    srv_llm_cfg_destroy(m->llm_cfg);
    m->llm_cfg = NULL;
    m->status = pe;
    srv_log(SRV_LOG_ERROR, "model '%s' is not ready: %s", m->name, pe.msg);
    return;
  }
  if (ready) m->status = (err){0};
}

static void load_model(srv_registry *r, const pending *pd, repo_model *rm, srv_model *m) {
  const srv_registry_opts *o = &r->o;
  const eng_confine_roots *roots = &r->roots;
  // The model's own files are the operator's, and so are the names in its
  // config.pbtxt; an override's names (the model file when it names one,
  // warmup data) are a network client's and stay in the model's directory.
  const char *fname = rm->config ? rm->config->default_model_filename : NULL;
  load_bounds b = {.model_file = rm->config_override && fname && fname[0] ? NULL : roots,
                   .external_data = roots,
                   .warmup = rm->config_override ? NULL : roots};
  snprintf(m->name, sizeof m->name, "%s", rm->name);
  m->signature = srv_registry_scan_signature(rm);
  m->config = rm->config;
  rm->config = NULL;  // the registry owns it from here
  m->status = rm->status;
  if (m->status.code) {
    // no such directory: the caller says so (a load request's answer, --load-model's line), once
    if (m->status.code != ERR_NOT_FOUND) srv_log(SRV_LOG_ERROR, "model '%s' is not ready: %s", m->name, m->status.msg);
    return;
  }
  // the classification extension's labels (labels.h); an unreadable file fails the load, as in Triton
  if (m->config && srv_labels_load(rm->dir, m->config, &m->labels, &m->status) != 0) {
    srv_log(SRV_LOG_ERROR, "model '%s' is not ready: %s", m->name, m->status.msg);
    return;
  }
  m->decoupled = m->config && m->config->model_transaction_policy && m->config->model_transaction_policy->decoupled;
  if (srv_ens_is_ensemble(m->config)) {
    load_ensemble(r, pd, rm, m);
    return;
  }
  if (srv_repeat_cfg_is_repeat(m->config)) {
    load_repeat(rm, m);
    return;
  }
  if (srv_llm_cfg_is_llm(m->config)) {
    load_llm(rm, m, o->n_gpus);
    return;
  }
  m->versions = calloc(rm->n_versions ? rm->n_versions : 1, sizeof *m->versions);
  if (!m->versions) {
    err_set(&m->status, ERR_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  m->n_versions = rm->n_versions;
  int completed = 0, ready = 0;
  for (size_t i = 0; i < rm->n_versions; i++) {
    srv_version *v = &m->versions[i];
    v->version = rm->versions[i].version;
    snprintf(v->version_str, sizeof v->version_str, "%" PRId64, v->version);
    int rc = load_version(m, rm->dir, &rm->versions[i], &completed, rm->config_from_file, o, &b, v, &v->status);
    if (rc == 0 && init_stats(&v->stats, m->engine_config->max_batch_size) != 0) {
      free_stats(&v->stats);
      memset(&v->stats, 0, sizeof v->stats);
      eng_model_destroy(v->model);
      v->model = NULL;
      rc = err_set(&v->status, ERR_RESOURCE_EXHAUSTED, "out of memory");
    }
    if (rc) {
      srv_log(SRV_LOG_ERROR, "model '%s' version %s failed to load: %s", m->name, v->version_str, v->status.msg);
      if (!m->status.code) m->status = v->status;
      continue;
    }
    ready++;
    // host fallback (engine/cuda/plan_cuda_host.h): the GPU plans' nodes without a CUDA path, same graph in each
    int host_nodes = 0;
    for (int k = 0; k < eng_model_n_instances(v->model) && !host_nodes; k++) {
      eng_instance_stats st;
      eng_model_instance_stats(v->model, k, &st);
      host_nodes = st.host_nodes;
    }
    char host_note[64] = "";
    if (host_nodes)
      snprintf(host_note, sizeof host_note, ", %d node%s on the host", host_nodes, host_nodes == 1 ? "" : "s");
    if (eng_model_placement_note(v->model))  // asked for GPU instances that run on the host
      srv_log(SRV_LOG_WARN, "model '%s' version %s: %s", m->name, v->version_str, eng_model_placement_note(v->model));
    srv_log(SRV_LOG_INFO, "model '%s' version %s is ready (%d instance%s, %d on GPU, max_batch_size %d%s)", m->name,
            v->version_str, eng_model_n_instances(v->model), eng_model_n_instances(v->model) == 1 ? "" : "s",
            eng_model_n_gpu_instances(v->model), eng_model_max_batch(v->model), host_note);
    bool host_logged = false;
    for (int k = 0; k < eng_model_n_instances(v->model); k++) {  // once per GPU plan
      eng_instance_stats st;
      eng_model_instance_stats(v->model, k, &st);
      if (st.device < 0) continue;
      for (int h = 0; h < st.host_nodes && !host_logged; h++) {  // once per model: every GPU plan has the same
        char line[ERR_MSG_MAX + 320];
        if (eng_model_instance_host_node(v->model, k, h, line, sizeof line) == 0)
          srv_log(SRV_LOG_INFO, "model '%s' version %s: %s", m->name, v->version_str, line);
      }
      host_logged |= st.host_nodes > 0;
      if (st.gemm_autotune)
        srv_log(SRV_LOG_INFO, "model '%s' version %s instance %d (GPU %d): cuBLASLt autotuning timed %" PRIu64
                " GEMM shape(s) in %.1f ms", m->name, v->version_str, k, st.device, st.gemm_tuned,
                (double)st.gemm_tune_ns / 1e6);
      // the batch sizes prepared before ready (engine/batch_sizes.h, --model-prepare-budget-s)
      srv_log(SRV_LOG_INFO, "model '%s' version %s instance %d (GPU %d): %d batch size(s) of 1..%d prepared in %.1f s%s",
              m->name, v->version_str, k, st.device, st.prepared_sizes, eng_model_max_batch(v->model) > 0 ? eng_model_max_batch(v->model) : 1,
              (double)st.prepare_ns / 1e9, st.pad ? ", the others padded to the next" : "");
      if (st.timed_layouts)  // FP32, layout AUTO: both layouts timed per warmed batch size (plan_cuda.h)
        srv_log(SRV_LOG_INFO, "model '%s' version %s instance %d (GPU %d): layouts timed at %d batch size(s), "
                "NHWC kept at %d", m->name, v->version_str, k, st.device, st.timed_layouts, st.timed_nhwc);
      // where its threads and pinned staging sit (engine/numa.h; INFERD_NUMA=0 turns placement off)
      srv_log(SRV_LOG_INFO, "model '%s' version %s instance %d: %s", m->name, v->version_str, k, st.numa);
      // one copy of the weights per device (engine/cuda/cuda_weights.h): who uploaded it, who shares it
      srv_log(SRV_LOG_INFO, "model '%s' version %s instance %d (GPU %d): weights %.1f MiB on the device, %s (%d instance%s)",
              m->name, v->version_str, k, st.device, (double)st.weight_bytes / (1 << 20),
              st.weights_uploaded ? "uploaded" : "shared", st.weight_holders, st.weight_holders == 1 ? "" : "s");
    }
  }
  // Ready when at least one version is; the failed versions keep their reason.
  if (ready) m->status = (err){0};
}

int srv_registry_create(const char *repo_dir, const srv_registry_opts *o, srv_registry **out, err *e) {
  srv_registry *r = calloc(1, sizeof *r);
  if (!r) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  if (strlen(repo_dir) >= sizeof r->repo_dir) {
    free(r);
    return err_set(e, ERR_INVALID_ARGUMENT, "repository path too long");
  }
  snprintf(r->repo_dir, sizeof r->repo_dir, "%s", repo_dir);
  r->o = *o;
  r->root_dirs = calloc(1 + o->n_store_allow, sizeof *r->root_dirs);
  if (!r->root_dirs) {
    free(r);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  r->root_dirs[0] = r->repo_dir;
  for (size_t i = 0; i < o->n_store_allow; i++) r->root_dirs[1 + i] = o->store_allow[i];
  r->roots = (eng_confine_roots){.dirs = r->root_dirs, .n = 1 + o->n_store_allow};
  r->next_pid = 1;
  pthread_rwlock_init(&r->lock, NULL);
  pthread_mutex_init(&r->idle_mu, NULL);
  pthread_cond_init(&r->idle_cv, NULL);
  *out = r;
  return 0;
}

static srv_model *build_from(srv_registry *r, const pending *pd, repo_model *rm) {
  srv_model *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  load_model(r, pd, rm, m);
  for (size_t j = 0; j < m->n_versions; j++) m->versions[j].trace_pid = r->next_pid++;
  return m;
}

void srv_registry_warn_skipped(const repo_skip *skips, size_t n) {
  for (size_t i = 0; i < n; i++)
    srv_log(SRV_LOG_WARN,
            "model repository: skipping directory '%s': its name %s (a model name must be UTF-8 without control "
            "characters: clients get it back in every answer that names the model)",
            skips[i].name, skips[i].why);
}

int srv_registry_load(const char *repo_dir, const srv_registry_opts *o, srv_registry **out, err *e) {
  repo_model *rms = NULL;
  size_t n = 0;
  repo_skip *skips = NULL;
  size_t n_skips = 0;
  TRY(repo_scan(repo_dir, &rms, &n, &skips, &n_skips, e));
  srv_registry_warn_skipped(skips, n_skips);
  srv_registry *r;
  if (srv_registry_create(repo_dir, o, &r, e) != 0) {
    repo_free(rms, n);
    free(skips);
    return e->code;
  }
  r->skips = skips;
  r->n_skips = n_skips;
  // Every model is built before any is published, so the index keeps the
  // repository's order: the engines' first, then the ensembles, each once
  // the members it names are built (an ensemble of ensembles waits for its
  // members); what is left when no more can be built is built last and says
  // which members it lacks or that they form a cycle.
  srv_model **built = calloc(n ? n : 1, sizeof *built);
  int rc = built ? 0 : err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  pending pd = {built, n};
  for (size_t i = 0; rc == 0 && i < n; i++)
    if (!srv_ens_is_ensemble(rms[i].config) && !(built[i] = build_from(r, &pd, &rms[i])))
      rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  for (int progress = 1, last = 0; rc == 0 && (progress || !last);) {
    last = !progress;  // a pass without progress: build the rest now, with what they lack
    progress = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
      if (built[i] || !srv_ens_is_ensemble(rms[i].config)) continue;
      const Inference__ModelEnsembling *es = rms[i].config->ensemble_scheduling;
      int waits = 0;
      for (size_t k = 0; !last && es && k < es->n_step; k++) {
        const char *mn = es->step[k]->model_name;
        for (size_t j = 0; j < n && !waits; j++)
          waits = j != i && !built[j] && mn && strcmp(rms[j].name, mn) == 0;
      }
      if (waits) continue;
      if (!(built[i] = build_from(r, &pd, &rms[i]))) rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
      progress = 1;
    }
    if (last) break;
  }
  for (size_t i = 0; built && i < n; i++)
    if (built[i]) srv_registry_publish(r, built[i]);
  free(built);
  repo_free(rms, n);
  if (rc) {
    srv_registry_destroy(r);
    return rc;
  }
  *out = r;
  return 0;
}

int srv_registry_build(srv_registry *r, const char *name, const char *config_text, srv_model **out, err *e) {
  repo_model rm;
  err se = {0};
  repo_scan_model_config(r->repo_dir, name, config_text, &rm, &se);  // a failure is the entry's status
  if (rm.status.code == 0 && se.code) rm.status = se;
  if (!rm.name[0]) snprintf(rm.name, sizeof rm.name, "%s", name);
  srv_model *m = build_from(r, NULL, &rm);
  repo_model_close(&rm);
  if (!m) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  *out = m;
  return 0;
}

srv_model *srv_registry_shell(const char *name, const char *why) {
  srv_model *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  snprintf(m->name, sizeof m->name, "%s", name);
  err_set(&m->status, ERR_UNAVAILABLE, "%s", why);
  m->unloaded = 1;
  return m;
}

srv_model *srv_registry_publish(srv_registry *r, srv_model *m) {
  srv_model *old = NULL;
  pthread_rwlock_wrlock(&r->lock);
  size_t i = 0;
  while (i < r->n && strcmp(r->slots[i]->name, m->name) != 0) i++;
  if (i < r->n) {
    old = r->slots[i];
    r->slots[i] = m;
  } else {
    if (r->n == r->cap) {
      size_t cap = r->cap ? 2 * r->cap : 16;
      srv_model **ns = realloc(r->slots, cap * sizeof *ns);
      if (!ns) {  // keep serving what is there; the new name is not added
        pthread_rwlock_unlock(&r->lock);
        srv_log(SRV_LOG_ERROR, "model '%s': out of memory adding it to the registry", m->name);
        return m;  // handed back to be freed like a replaced one
      }
      r->slots = ns;
      r->cap = cap;
    }
    r->slots[r->n++] = m;
  }
  pthread_rwlock_unlock(&r->lock);
  return old;
}

void srv_registry_set_error(srv_registry *r, const char *name, const char *msg) {
  pthread_rwlock_wrlock(&r->lock);
  for (size_t i = 0; i < r->n; i++)
    if (strcmp(r->slots[i]->name, name) == 0) snprintf(r->slots[i]->last_error, sizeof r->slots[i]->last_error, "%s", msg);
  pthread_rwlock_unlock(&r->lock);
}

srv_model *srv_registry_current(srv_registry *r, const char *name) {
  srv_model *m = NULL;
  pthread_rwlock_rdlock(&r->lock);
  for (size_t i = 0; i < r->n && !m; i++)
    if (strcmp(r->slots[i]->name, name) == 0) m = r->slots[i];
  pthread_rwlock_unlock(&r->lock);
  return m;
}

void srv_registry_wait_idle(srv_registry *r, srv_model *m) {
  pthread_mutex_lock(&r->idle_mu);
  while (atomic_load(&m->refs) > 0) pthread_cond_wait(&r->idle_cv, &r->idle_mu);
  pthread_mutex_unlock(&r->idle_mu);
}

void srv_registry_unref(srv_registry *r, srv_model *m) {
  if (atomic_fetch_sub(&m->refs, 1) != 1) return;
  // The last holder: wake a control thread that may wait for this generation.
  pthread_mutex_lock(&r->idle_mu);
  pthread_cond_broadcast(&r->idle_cv);
  pthread_mutex_unlock(&r->idle_mu);
}

void srv_registry_rdlock(srv_registry *r) { pthread_rwlock_rdlock(&r->lock); }
void srv_registry_rdunlock(srv_registry *r) { pthread_rwlock_unlock(&r->lock); }

int srv_registry_find_ref(srv_registry *r, const char *model, const char *version, srv_model **m,
                          srv_version **v, err *e) {
  pthread_rwlock_rdlock(&r->lock);
  int rc = srv_registry_find(r, model, version, m, v, e);
  if (rc == 0) atomic_fetch_add(&(*m)->refs, 1);
  pthread_rwlock_unlock(&r->lock);
  return rc;
}

void srv_model_free(srv_model *m) {
  if (!m) return;
  for (size_t j = 0; j < m->n_versions; j++) {
    eng_model_destroy(m->versions[j].model);
    srv_llm_destroy(m->versions[j].llm);
    free_stats(&m->versions[j].stats);
  }
  free(m->versions);
  srv_ens_plan_destroy(m->ens);
  srv_repeat_cfg_destroy(m->rep);
  srv_llm_cfg_destroy(m->llm_cfg);
  srv_labels_free(m->labels);
  if (m->config) config_free(m->config);
  eng_model_config_free(m->engine_config);
  free(m);
}

void srv_registry_stop_llm(srv_registry *r) {
  pthread_rwlock_rdlock(&r->lock);
  for (size_t i = 0; i < r->n; i++)
    for (size_t j = 0; r->slots[i] && j < r->slots[i]->n_versions; j++) srv_llm_stop(r->slots[i]->versions[j].llm);
  pthread_rwlock_unlock(&r->lock);
}

void srv_registry_destroy(srv_registry *r) {
  if (!r) return;
  for (size_t i = 0; i < r->n; i++) srv_model_free(r->slots[i]);
  free(r->slots);
  free(r->skips);
  free(r->root_dirs);
  pthread_rwlock_destroy(&r->lock);
  pthread_mutex_destroy(&r->idle_mu);
  pthread_cond_destroy(&r->idle_cv);
  free(r);
}

const repo_skip *srv_registry_load_skipped(const srv_registry *r, size_t *n) {
  *n = r->n_skips;
  return r->skips;
}

size_t srv_registry_n_models(const srv_registry *r) { return r->n; }
const char *srv_registry_repo_dir(const srv_registry *r) { return r->repo_dir; }
srv_model *srv_registry_model_at(const srv_registry *r, size_t i) { return r->slots[i]; }

// Triton's wording, which clients test for ("Request for unknown model",
// "failed to get model version from specified version string"), with
// inferd's detail after it.
int srv_registry_find(const srv_registry *r, const char *model, const char *version, srv_model **mo,
                      srv_version **vo, err *e) {
  srv_model *m = NULL;
  for (size_t i = 0; i < r->n && !m; i++)
    if (strcmp(r->slots[i]->name, model) == 0) m = r->slots[i];
  if (!m) return err_set(e, ERR_NOT_FOUND, "Request for unknown model: '%s' is not found", model);
  *mo = m;
  srv_version *v = NULL;
  if (version && version[0]) {
    // a decimal integer, "01" being version 1 (Triton's std::stol also
    // ignores what follows the digits: "1abc" is refused here)
    char *end;
    errno = 0;
    long long want = strtoll(version, &end, 10);
    if (end == version || *end || errno == ERANGE)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "failed to get model version from specified version string '%s', version should be an "
                     "integral value > 0",
                     version);
    if (want < 0)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "invalid model version specified '%s' , version should be an integral value > 0", version);
    for (size_t i = 0; i < m->n_versions && !v; i++)
      if (m->versions[i].version == want) v = &m->versions[i];
    if (!v) return err_set(e, ERR_NOT_FOUND, "Request for unknown model: '%s' version %lld is not found", model, want);
    if (!srv_version_ready(v))
      return err_set(e, ERR_UNAVAILABLE, "Request for unknown model: '%s' version %lld is not at ready state: %s", model,
                     want, v->status.msg);
  } else {
    for (size_t i = m->n_versions; i-- > 0 && !v;)
      if (srv_version_ready(&m->versions[i])) v = &m->versions[i];
    if (!v)
      return err_set(e, ERR_UNAVAILABLE, "Request for unknown model: '%s' has no available versions: %s", model,
                     m->status.msg);
  }
  *vo = v;
  return 0;
}

int srv_version_failed(srv_model *m, srv_version *v, int *poisoned, err *e) {
  if (poisoned) *poisoned = 0;
  if (!v->model || eng_model_failed(v->model, poisoned, e) == 0) return 0;
  return err_prefix(e, "model '%s' version %s is not ready: ", m->name, v->version_str);
}

enum { FAIL_LOG_US = 10 * 1000 * 1000 };

void srv_version_log_failure(srv_model *m, srv_version *v, srv_vlog c, const err *e, uint64_t n) {
  static const char *const what[SRV_VLOG_N] = {"execution failed", "requests refused"};
  uint64_t total = atomic_fetch_add(&v->fail_unlogged[c], n) + n;
  int64_t now = eng_now_us();
  int64_t last = atomic_load(&v->fail_logged_us[c]);
  if (last && now - last < FAIL_LOG_US) return;
  if (!atomic_compare_exchange_strong(&v->fail_logged_us[c], &last, now ? now : 1)) return;  // another thread logs
  atomic_fetch_sub(&v->fail_unlogged[c], total);
  srv_log(SRV_LOG_WARN, "model '%s' version %s: %s: %s (%" PRIu64 " since the last such line; one line per 10 s at most)",
          m->name, v->version_str, what[c], e->msg, total);
}

// --- what a version shows its clients: its engine's tensors, an ensemble's config's, or the repeat backend's

size_t srv_version_n_inputs(const srv_version *v) {
  return v->model ? eng_model_n_inputs(v->model) : v->rep ? 3 : v->llm_cfg ? SRV_LLM_IN_N : v->ens->n_in;
}

size_t srv_version_n_client_inputs(const srv_version *v) {
  return v->model ? eng_model_n_client_inputs(v->model) : v->rep ? 3 : v->llm_cfg ? SRV_LLM_IN_N : v->ens->n_in;
}

const eng_io *srv_version_input(const srv_version *v, size_t i) {
  return v->model ? eng_model_input(v->model, i) : v->rep ? &v->rep->in[i] : v->llm_cfg ? &v->llm_cfg->in[i] : &v->ens->in[i];
}

int srv_version_input_optional(const srv_version *v, size_t i) {
  (void)i;
  return v->llm_cfg != NULL;  // input_ids or text_input: llm_grpc.c checks that one is there
}

size_t srv_version_n_client_outputs(const srv_version *v) {
  return v->model ? eng_model_n_client_outputs(v->model) : v->rep ? 2 : v->llm_cfg ? SRV_LLM_OUT_N : v->ens->n_out;
}

const eng_io *srv_version_output(const srv_version *v, size_t i) {
  return v->model ? eng_model_output(v->model, i) : v->rep ? &v->rep->out[i] : v->llm_cfg ? &v->llm_cfg->out[i] : &v->ens->out[i];
}

int srv_version_max_batch(const srv_version *v) {
  return v->model ? eng_model_max_batch(v->model) : v->rep ? 0 : v->llm_cfg ? v->llm_cfg->max_batch : v->ens->max_batch;
}
