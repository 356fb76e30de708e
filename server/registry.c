// registry.c: loading the repository's models at start-up. A model that
// fails (bad config, unsupported op, missing file) is kept with its reason
// so the server reports it and serves the others.
#include "server/registry.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/config.h"
#include "engine/graph.h"
#include "engine/repo.h"
#include "engine/warmup.h"
#include "server/log.h"

struct srv_registry {
  srv_model *models;
  size_t n;
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

// Loads one version: graph, completion of the config from the first graph
// when config.pbtxt was missing, validation, instances.
static int load_version(srv_model *m, const char *model_dir, const repo_version *rv, int *completed,
                        int config_from_file, int default_max_batch, int n_gpus, srv_version *v, err *e) {
  eng_graph *g = NULL;
  eng_graph_opts gopts;
  TRY(eng_model_graph_opts(m->config, &gopts, e));
  TRY(eng_graph_load_opts(rv->path, &gopts, &g, e));
  if (eng_graph_n_attention(g) || gopts.no_fuse_attention)
    srv_log(SRV_LOG_INFO, "model '%s' version %" PRId64 ": %zu attention subgraph(s) fused%s", m->name,
            rv->version, eng_graph_n_attention(g), gopts.no_fuse_attention ? " (fuse_attention off)" : "");
  eng_io *in = NULL, *out = NULL;
  size_t n_in, n_out;
  collect_io(g, &in, &n_in, &out, &n_out);
  int rc = 0;
  if (!in || !out) rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  if (rc == 0 && !*completed) {
    rc = config_complete(m->config, config_from_file, in, n_in, out, n_out, default_max_batch, e);
    if (rc == 0) config_resolve_kinds(m->config, n_gpus);
    if (rc == 0) *completed = 1;
  }
  if (rc == 0) rc = config_validate(m->config, in, n_in, out, n_out, e);
  free(in);
  free(out);
  if (rc == 0) rc = eng_model_create(g, m->config, n_gpus, &v->model, e);
  if (rc) {
    eng_graph_destroy(g);
    return rc;
  }
  if (m->config->n_model_warmup) {
    uint64_t runs = 0;
    int64_t t0 = eng_now_us();
    rc = eng_warmup_run(v->model, m->config, model_dir, &runs, e);
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

static int init_stats(srv_stats *s, int max_batch) {
  s->n_batch = max_batch > 0 ? max_batch : 1;
  s->batch = calloc((size_t)s->n_batch + 1, sizeof *s->batch);
  if (!s->batch) return -1;
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
  free(s->batch);
  if (s->have_windows) {
    prof_window_destroy(&s->win_requests);
    prof_window_destroy(&s->win_rows);
  }
  prof_hist *hs[] = {s->h_request, s->h_queue, s->h_input, s->h_infer, s->h_output, s->h_batch};
  for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) prof_hist_destroy(hs[i]);
}

static void load_model(repo_model *rm, int default_max_batch, int n_gpus, srv_model *m) {
  snprintf(m->name, sizeof m->name, "%s", rm->name);
  m->config = rm->config;
  rm->config = NULL;  // the registry owns it from here
  m->status = rm->status;
  if (m->status.code) {
    srv_log(SRV_LOG_ERROR, "model '%s' is not ready: %s", m->name, m->status.msg);
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
    int rc = load_version(m, rm->dir, &rm->versions[i], &completed, rm->config_from_file, default_max_batch, n_gpus,
                          v, &v->status);
    if (rc == 0 && init_stats(&v->stats, m->config->max_batch_size) != 0) {
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
    srv_log(SRV_LOG_INFO, "model '%s' version %s is ready (%d instance%s, %d on GPU, max_batch_size %d)", m->name,
            v->version_str, eng_model_n_instances(v->model), eng_model_n_instances(v->model) == 1 ? "" : "s",
            eng_model_n_gpu_instances(v->model), eng_model_max_batch(v->model));
  }
  // Ready when at least one version is; the failed versions keep their reason.
  if (ready) m->status = (err){0};
}

int srv_registry_load(const char *repo_dir, int default_max_batch_size, int n_gpus, srv_registry **out, err *e) {
  repo_model *rms = NULL;
  size_t n = 0;
  TRY(repo_scan(repo_dir, &rms, &n, e));
  srv_registry *r = calloc(1, sizeof *r);
  if (!r || !(r->models = calloc(n ? n : 1, sizeof *r->models))) {
    free(r);
    repo_free(rms, n);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  r->n = n;
  int pid = 1;
  for (size_t i = 0; i < n; i++) {
    load_model(&rms[i], default_max_batch_size, n_gpus, &r->models[i]);
    for (size_t j = 0; j < r->models[i].n_versions; j++) r->models[i].versions[j].trace_pid = pid++;
  }
  repo_free(rms, n);
  *out = r;
  return 0;
}

void srv_registry_destroy(srv_registry *r) {
  if (!r) return;
  for (size_t i = 0; i < r->n; i++) {
    srv_model *m = &r->models[i];
    for (size_t j = 0; j < m->n_versions; j++) {
      eng_model_destroy(m->versions[j].model);
      free_stats(&m->versions[j].stats);
    }
    free(m->versions);
    config_free(m->config);
  }
  free(r->models);
  free(r);
}

size_t srv_registry_n_models(const srv_registry *r) { return r->n; }
srv_model *srv_registry_model_at(const srv_registry *r, size_t i) { return &r->models[i]; }

int srv_registry_find(const srv_registry *r, const char *model, const char *version, srv_model **mo,
                      srv_version **vo, err *e) {
  srv_model *m = NULL;
  for (size_t i = 0; i < r->n && !m; i++)
    if (strcmp(r->models[i].name, model) == 0) m = &r->models[i];
  if (!m) return err_set(e, ERR_NOT_FOUND, "unknown model '%s'", model);
  *mo = m;
  srv_version *v = NULL;
  if (version && version[0]) {
    for (size_t i = 0; i < m->n_versions && !v; i++)
      if (strcmp(m->versions[i].version_str, version) == 0) v = &m->versions[i];
    if (!v) return err_set(e, ERR_NOT_FOUND, "unknown version '%s' of model '%s'", version, model);
    if (!v->model)
      return err_set(e, ERR_UNAVAILABLE, "model '%s' version %s is not ready: %s", model, version, v->status.msg);
  } else {
    for (size_t i = m->n_versions; i-- > 0 && !v;)
      if (m->versions[i].model) v = &m->versions[i];
    if (!v) return err_set(e, ERR_UNAVAILABLE, "model '%s' is not ready: %s", model, m->status.msg);
  }
  *vo = v;
  return 0;
}
