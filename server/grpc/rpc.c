// rpc.c: every gRPC method but ModelInfer: health, metadata, config,
// statistics, repository index, grpc.health.v1 and server reflection, and
// the table that registers them with the front end.
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "grpc/health/v1/health.pb-c.h"
#include "grpc/reflection/v1/reflection.pb-c.h"
#include "grpc_service.pb-c.h"
#include "engine/repo/repo.h"
#include "kernels/base/utf8.h"
#include "server/obs/log.h"
#include "server/core/server.h"
#include "server/grpc/wire.h"

#define SVC "/inference.GRPCInferenceService/"

// Finds the named model version or answers the call with why not (NOT_FOUND,
// UNAVAILABLE); returns 0 when found.
static int find_or_fail(srv_server *s, srv_call *call, const char *name, const char *version, srv_model **m,
                        srv_version **v) {
  err e;
  if (srv_registry_find(s->reg, name, version, m, v, &e) == 0) return 0;
  srv_call_fail(call, (int)e.code, e.msg);
  return -1;
}

// Not live either once a model's instance failed from a sticky device error
// (eng_model_poisoned): that device is dead for this process and only a
// restart (the orchestrator's, on a failed liveness probe) brings it back;
// readiness alone would only take the pod out of rotation, for good.
int srv_server_live(srv_server *s) {
  if (atomic_load(&s->accept_dead)) return 0;
  int live = 1;
  srv_registry_rdlock(s->reg);
  for (size_t i = 0; live && i < srv_registry_n_models(s->reg); i++) {
    const srv_model *m = srv_registry_model_at(s->reg, i);
    for (size_t j = 0; live && j < m->n_versions; j++)
      if (m->versions[j].model && eng_model_poisoned(m->versions[j].model)) live = 0;
  }
  srv_registry_rdunlock(s->reg);
  return live;
}

int srv_server_ready(srv_server *s) {
  if (atomic_load(&s->draining) || !srv_server_live(s)) return 0;
  if (!s->strict_readiness) return 1;
  int ready = 1;
  srv_registry_rdlock(s->reg);
  for (size_t i = 0; ready && i < srv_registry_n_models(s->reg); i++) {
    srv_model *m = srv_registry_model_at(s->reg, i);
    if (m->status.code && !m->unloaded) ready = 0;
    for (size_t j = 0; ready && j < m->n_versions; j++) {
      err e;
      if (srv_version_failed(m, &m->versions[j], NULL, &e)) ready = 0;
    }
  }
  srv_registry_rdunlock(s->reg);
  return ready;
}

// --- health

static void server_live(void *ctx, srv_call *call, const uint8_t *req, size_t len) {
  (void)req, (void)len;
  Inference__ServerLiveResponse r = INFERENCE__SERVER_LIVE_RESPONSE__INIT;
  r.live = srv_server_live(ctx);
  srv_reply_msg(call, &r.base);
}

static void server_ready(void *ctx, srv_call *call, const uint8_t *req, size_t len) {
  (void)req, (void)len;
  Inference__ServerReadyResponse r = INFERENCE__SERVER_READY_RESPONSE__INIT;
  r.ready = srv_server_ready(ctx);
  srv_reply_msg(call, &r.base);
}

static void model_ready(void *ctx, srv_call *call, const uint8_t *req, size_t len) {
  srv_server *s = ctx;
  Inference__ModelReadyRequest *q =
      (Inference__ModelReadyRequest *)srv_unpack_or_fail(call, &inference__model_ready_request__descriptor, req, len);
  if (!q) return;
  srv_model *m;
  srv_version *v;
  err e;
  Inference__ModelReadyResponse r = INFERENCE__MODEL_READY_RESPONSE__INIT;
  // An unknown or failed model is simply not ready: the question has an answer.
  r.ready = srv_registry_find(s->reg, q->name, q->version, &m, &v, &e) == 0 && !srv_version_failed(m, v, NULL, &e);
  srv_reply_msg(call, &r.base);
  inference__model_ready_request__free_unpacked(q, NULL);
}

static void health_check(void *ctx, srv_call *call, const uint8_t *req, size_t len) {
  srv_server *s = ctx;
  Grpc__Health__V1__HealthCheckRequest *q = (Grpc__Health__V1__HealthCheckRequest *)srv_unpack_or_fail(
      call, &grpc__health__v1__health_check_request__descriptor, req, len);
  if (!q) return;
  if (q->service[0] && strcmp(q->service, "inference.GRPCInferenceService") != 0) {
    char msg[320];
    snprintf(msg, sizeof msg, "unknown service '%.256s'", q->service);
    srv_call_fail(call, ERR_NOT_FOUND, msg);
  } else {
    Grpc__Health__V1__HealthCheckResponse r = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
    r.status = srv_server_ready(s) ? GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING
                                   : GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING;
    srv_reply_msg(call, &r.base);
  }
  grpc__health__v1__health_check_request__free_unpacked(q, NULL);
}

// --- metadata and config

static void server_metadata(void *ctx, srv_call *call, const uint8_t *req, size_t len) {
  (void)req, (void)len;
  // Only what is really implemented (and enabled); clients probe this list.
  srv_server *s = ctx;
  // model_repository: index, load, unload (refused outside explicit mode, as Triton's)
  // binary_tensor_data: the REST API's binary tensor extension (server/http/rest.c)
  // classification: top classes of an output as strings (server/core/classify.h)
  char *ext[9] = {"model_configuration", "model_repository", "statistics", "logging", "binary_tensor_data",
                  "classification"};
  size_t n = 6;
  if (s->trace) ext[n++] = "trace";
  if (s->shm) ext[n++] = "system_shared_memory";
  if (srv_cuda_shm_n_devices(s->cuda_shm) > 0) ext[n++] = "cuda_shared_memory";
  Inference__ServerMetadataResponse r = INFERENCE__SERVER_METADATA_RESPONSE__INIT;
  r.name = "inferd";
  r.version = INFERD_VERSION;
  r.n_extensions = n;
  r.extensions = ext;
  srv_reply_msg(call, &r.base);
}

static void fill_tensor_meta(Inference__ModelMetadataResponse__TensorMetadata *t, int64_t *shape, const eng_io *io,
                             int batched) {
  inference__model_metadata_response__tensor_metadata__init(t);
  t->name = (char *)io->name;
  t->datatype = (char *)dtype_wire_name(io->dt);
  size_t n = 0;
  if (batched) shape[n++] = -1;
  for (int d = 0; d < io->ndims; d++) shape[n++] = io->dims[d];
  t->n_shape = n;
  t->shape = shape;
}

static void model_metadata(void *ctx, srv_call *call, const uint8_t *req, size_t len) {
  srv_server *s = ctx;
  Inference__ModelMetadataRequest *q = (Inference__ModelMetadataRequest *)srv_unpack_or_fail(
      call, &inference__model_metadata_request__descriptor, req, len);
  if (!q) return;
  srv_model *m;
  srv_version *v;
  if (find_or_fail(s, call, q->name, q->version, &m, &v) != 0) {
    inference__model_metadata_request__free_unpacked(q, NULL);
    return;
  }
  // the client's tensors only: sequence_batching's control and state tensors are the server's (an
  // ensemble's are its config's: registry.h)
  size_t n_in = srv_version_n_client_inputs(v), n_out = srv_version_n_client_outputs(v), n_t = n_in + n_out;
  Inference__ModelMetadataResponse__TensorMetadata *ts = calloc(n_t ? n_t : 1, sizeof *ts);
  Inference__ModelMetadataResponse__TensorMetadata **tp = calloc(n_t ? n_t : 1, sizeof *tp);
  int64_t (*shapes)[ENG_MAX_DIMS + 1] = calloc(n_t ? n_t : 1, sizeof *shapes);
  char **versions = calloc(m->n_versions ? m->n_versions : 1, sizeof *versions);
  if (!ts || !tp || !shapes || !versions) {
    srv_call_fail(call, ERR_RESOURCE_EXHAUSTED, "out of memory");
  } else {
    int batched = srv_version_max_batch(v) > 0;
    for (size_t i = 0; i < n_in; i++) fill_tensor_meta(&ts[i], shapes[i], srv_version_input(v, i), batched), tp[i] = &ts[i];
    for (size_t i = 0; i < n_out; i++)
      fill_tensor_meta(&ts[n_in + i], shapes[n_in + i], srv_version_output(v, i), batched), tp[n_in + i] = &ts[n_in + i];
    Inference__ModelMetadataResponse r = INFERENCE__MODEL_METADATA_RESPONSE__INIT;
    r.name = m->name;
    for (size_t i = 0; i < m->n_versions; i++)
      if (srv_version_ready(&m->versions[i])) versions[r.n_versions++] = m->versions[i].version_str;
    r.versions = versions;
    // Triton names a backend model without a platform by its backend ("repeat")
    r.platform = m->config->platform && m->config->platform[0] ? m->config->platform
                 : m->rep || m->llm_cfg                         ? m->config->backend
                                                                : "onnxruntime_onnx";
    r.n_inputs = n_in;
    r.inputs = tp;
    r.n_outputs = n_out;
    r.outputs = tp + n_in;
    srv_reply_msg(call, &r.base);
  }
  free(ts);
  free(tp);
  free(shapes);
  free(versions);
  inference__model_metadata_request__free_unpacked(q, NULL);
}

static void model_config(void *ctx, srv_call *call, const uint8_t *req, size_t len) {
  srv_server *s = ctx;
  Inference__ModelConfigRequest *q = (Inference__ModelConfigRequest *)srv_unpack_or_fail(
      call, &inference__model_config_request__descriptor, req, len);
  if (!q) return;
  srv_model *m;
  srv_version *v;
  if (find_or_fail(s, call, q->name, q->version, &m, &v) == 0) {
    Inference__ModelConfigResponse r = INFERENCE__MODEL_CONFIG_RESPONSE__INIT;
    r.config = m->config;
    srv_reply_msg(call, &r.base);
  }
  inference__model_config_request__free_unpacked(q, NULL);
}

// --- statistics

static void dur(Inference__StatisticDuration *d, srv_duration *src) {
  inference__statistic_duration__init(d);
  d->count = atomic_load(&src->count);
  d->ns = atomic_load(&src->ns);
}

#define MAX_MEM_ENTRIES 18  // CPU, CPU_PINNED and one GPU entry per device (16)

typedef struct stat_bufs {
  Inference__ModelStatistics ms;
  Inference__MemoryUsage mu[MAX_MEM_ENTRIES];
  Inference__MemoryUsage *mup[MAX_MEM_ENTRIES];
  Inference__InferStatistics is;
  Inference__StatisticDuration d[6];
  Inference__InferBatchStatistics *bs;
  Inference__InferBatchStatistics **bsp;
  Inference__StatisticDuration *bd;
} stat_bufs;

// memory_usage as Triton reports it: what the version's instances hold, by
// kind and device ("CPU" activation arenas, "CPU_PINNED" staging, "GPU" per
// device: weights, arenas, scratch, cuBLASLt workspaces).
static void fill_memory(stat_bufs *b, srv_version *v) {
  uint64_t cpu = 0, pinned = 0, gpu[MAX_MEM_ENTRIES - 2] = {0};
  bool weights_seen[MAX_MEM_ENTRIES - 2] = {0};
  int max_dev = -1;
  for (int i = 0; v->model && i < eng_model_n_instances(v->model); i++) {  // an ensemble holds none
    eng_instance_stats st;
    eng_model_instance_stats(v->model, i, &st);
    cpu += st.host_bytes;
    pinned += st.pinned_bytes;
    if (st.device >= 0 && st.device < MAX_MEM_ENTRIES - 2) {
      gpu[st.device] += st.device_bytes;
      // the instances on one device share one copy of the weights (engine/cuda/cuda_weights.h)
      if (!weights_seen[st.device] && st.weight_bytes) {
        gpu[st.device] += st.weight_bytes;
        weights_seen[st.device] = true;
      }
      if (st.device > max_dev) max_dev = st.device;
    }
  }
  size_t n = 0;
  if (cpu) b->mu[n] = (Inference__MemoryUsage)INFERENCE__MEMORY_USAGE__INIT, b->mu[n].type = "CPU",
                b->mu[n].byte_size = cpu, n++;
  if (pinned) b->mu[n] = (Inference__MemoryUsage)INFERENCE__MEMORY_USAGE__INIT, b->mu[n].type = "CPU_PINNED",
                   b->mu[n].byte_size = pinned, n++;
  for (int d = 0; d <= max_dev; d++)
    if (gpu[d]) b->mu[n] = (Inference__MemoryUsage)INFERENCE__MEMORY_USAGE__INIT, b->mu[n].type = "GPU",
                b->mu[n].id = d, b->mu[n].byte_size = gpu[d], n++;
  for (size_t i = 0; i < n; i++) b->mup[i] = &b->mu[i];
  b->ms.n_memory_usage = n;
  b->ms.memory_usage = b->mup;
}

static int fill_stats(stat_bufs *b, srv_model *m, srv_version *v) {
  srv_stats *st = &v->stats;
  inference__model_statistics__init(&b->ms);
  inference__infer_statistics__init(&b->is);
  b->ms.name = m->name;
  b->ms.version = v->version_str;
  b->ms.last_inference = atomic_load(&st->last_inference_ms);
  b->ms.inference_count = atomic_load(&st->inference_count);
  b->ms.execution_count = atomic_load(&st->execution_count);
  dur(&b->d[0], &st->success), b->is.success = &b->d[0];
  dur(&b->d[1], &st->fail), b->is.fail = &b->d[1];
  dur(&b->d[2], &st->queue), b->is.queue = &b->d[2];
  dur(&b->d[3], &st->compute_input), b->is.compute_input = &b->d[3];
  dur(&b->d[4], &st->compute_infer), b->is.compute_infer = &b->d[4];
  dur(&b->d[5], &st->compute_output), b->is.compute_output = &b->d[5];
  b->ms.inference_stats = &b->is;
  // only the sizes that ran (Triton lists no others), counted first: a
  // model allowed huge batches holds few
  size_t nb = 0;
  const srv_batch_stat *s;
  for (int size = 0; (size = srv_stats_batch_next(st, size, &s)) > 0;) nb++;
  if (nb == 0) nb = 1;  // calloc(0) may return NULL
  b->bs = calloc(nb, sizeof *b->bs);
  b->bsp = calloc(nb, sizeof *b->bsp);
  b->bd = calloc(nb * 3, sizeof *b->bd);
  if (!b->bs || !b->bsp || !b->bd) return -1;
  size_t n = 0;
  for (int size = 0; (size = srv_stats_batch_next(st, size, &s)) > 0 && n < nb;) {
    uint64_t count = atomic_load(&s->count);
    Inference__InferBatchStatistics *x = &b->bs[n];
    inference__infer_batch_statistics__init(x);
    x->batch_size = (uint64_t)size;
    Inference__StatisticDuration *d = &b->bd[3 * n];
    for (int k = 0; k < 3; k++) inference__statistic_duration__init(&d[k]), d[k].count = count;
    d[0].ns = atomic_load(&s->input_ns);
    d[1].ns = atomic_load(&s->infer_ns);
    d[2].ns = atomic_load(&s->output_ns);
    x->compute_input = &d[0];
    x->compute_infer = &d[1];
    x->compute_output = &d[2];
    b->bsp[n++] = x;
  }
  b->ms.n_batch_stats = n;
  b->ms.batch_stats = b->bsp;
  fill_memory(b, v);
  return 0;
}

static void model_statistics(void *ctx, srv_call *call, const uint8_t *req, size_t len) {
  srv_server *s = ctx;
  Inference__ModelStatisticsRequest *q = (Inference__ModelStatisticsRequest *)srv_unpack_or_fail(
      call, &inference__model_statistics_request__descriptor, req, len);
  if (!q) return;
  // Which versions: one named model (and version), or every ready version.
  size_t cap = 0;
  for (size_t i = 0; i < srv_registry_n_models(s->reg); i++) cap += srv_registry_model_at(s->reg, i)->n_versions;
  stat_bufs *bufs = calloc(cap ? cap : 1, sizeof *bufs);
  Inference__ModelStatistics **list = calloc(cap ? cap : 1, sizeof *list);
  size_t n = 0;
  int rc = (bufs && list) ? 0 : ERR_RESOURCE_EXHAUSTED;
  err e = {0};
  if (rc) err_set(&e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  if (rc == 0 && q->name[0]) {
    srv_model *m;
    srv_version *v;
    rc = srv_registry_find(s->reg, q->name, q->version, &m, &v, &e);
    if (rc == 0 && q->version[0]) {
      if (fill_stats(&bufs[n], m, v)) rc = err_set(&e, ERR_RESOURCE_EXHAUSTED, "out of memory");
      list[n] = &bufs[n].ms, n++;
    } else if (rc == 0) {
      for (size_t j = 0; rc == 0 && j < m->n_versions; j++) {
        if (!srv_version_ready(&m->versions[j])) continue;
        if (fill_stats(&bufs[n], m, &m->versions[j])) rc = err_set(&e, ERR_RESOURCE_EXHAUSTED, "out of memory");
        list[n] = &bufs[n].ms, n++;
      }
    }
  } else if (rc == 0) {
    if (q->version[0]) rc = err_set(&e, ERR_INVALID_ARGUMENT, "a version was given without a model name");
    for (size_t i = 0; rc == 0 && i < srv_registry_n_models(s->reg); i++) {
      srv_model *m = srv_registry_model_at(s->reg, i);
      for (size_t j = 0; rc == 0 && j < m->n_versions; j++) {
        if (!srv_version_ready(&m->versions[j])) continue;
        if (fill_stats(&bufs[n], m, &m->versions[j])) rc = err_set(&e, ERR_RESOURCE_EXHAUSTED, "out of memory");
        list[n] = &bufs[n].ms, n++;
      }
    }
  }
  if (rc) {
    srv_call_fail(call, (int)e.code, e.msg);
  } else {
    Inference__ModelStatisticsResponse r = INFERENCE__MODEL_STATISTICS_RESPONSE__INIT;
    r.n_model_stats = n;
    r.model_stats = list;
    srv_reply_msg(call, &r.base);
  }
  for (size_t i = 0; bufs && i < n; i++) free(bufs[i].bs), free(bufs[i].bsp), free(bufs[i].bd);
  free(bufs);
  free(list);
  inference__model_statistics_request__free_unpacked(q, NULL);
}

// --- repository index

// Under the registry's read lock (held by the caller): the model is in the registry.
static int listed(srv_registry *reg, const char *name) {
  for (size_t i = 0; i < srv_registry_n_models(reg); i++)
    if (strcmp(srv_registry_model_at(reg, i)->name, name) == 0) return 1;
  return 0;
}

// Every model of the repository, as Triton's index: each version of a model
// the registry holds with its state and reason, then (unless `ready`) the
// repository's other models by name alone (never loaded in explicit mode:
// Triton sends no version, state or reason for them either), or LOADING
// while a first load runs.
static void repository_index(void *ctx, srv_call *call, const uint8_t *req, size_t len) {
  srv_server *s = ctx;
  Inference__RepositoryIndexRequest *q = (Inference__RepositoryIndexRequest *)srv_unpack_or_fail(
      call, &inference__repository_index_request__descriptor, req, len);
  if (!q) return;
  char **dirs = NULL;  // the repository's model directories, sorted
  size_t n_dirs = 0;
  err le = {0};
  if (!q->ready && repo_list(srv_registry_repo_dir(s->reg), &dirs, &n_dirs, NULL, NULL, &le) != 0)
    n_dirs = 0;  // the loaded models are still worth listing: no better answer without the directory
  size_t cap = n_dirs;
  for (size_t i = 0; i < srv_registry_n_models(s->reg); i++) cap += srv_registry_model_at(s->reg, i)->n_versions + 1;
  Inference__RepositoryIndexResponse__ModelIndex *xs = calloc(cap ? cap : 1, sizeof *xs);
  Inference__RepositoryIndexResponse__ModelIndex **xp = calloc(cap ? cap : 1, sizeof *xp);
  err *fail = calloc(cap ? cap : 1, sizeof *fail);  // the reasons of versions whose instances failed
  if (!xs || !xp || !fail) {
    srv_call_fail(call, ERR_RESOURCE_EXHAUSTED, "out of memory");
  } else {
    size_t n = 0;
    for (size_t i = 0; i < srv_registry_n_models(s->reg); i++) {
      srv_model *m = srv_registry_model_at(s->reg, i);
      if (m->n_versions == 0) {  // failed before any version was found
        if (q->ready) continue;
        inference__repository_index_response__model_index__init(&xs[n]);
        xs[n].name = m->name;
        xs[n].state = "UNAVAILABLE";
        xs[n].reason = m->last_error[0] ? m->last_error : m->status.msg;
        xp[n] = &xs[n], n++;
        continue;
      }
      for (size_t j = 0; j < m->n_versions; j++) {
        srv_version *v = &m->versions[j];
        if (q->ready && !srv_version_ready(v)) continue;
        inference__repository_index_response__model_index__init(&xs[n]);
        xs[n].name = m->name;
        xs[n].version = v->version_str;
        xs[n].state = srv_version_ready(v) ? "READY" : "UNAVAILABLE";
        // a ready version whose model failed to reload says why it still serves the old files
        xs[n].reason = srv_version_ready(v) ? m->last_error : v->status.msg;
        if (srv_version_failed(m, v, NULL, &fail[n])) {  // its instances failed for good: says why
          if (q->ready) continue;
          xs[n].state = "UNAVAILABLE";
          xs[n].reason = fail[n].msg;
        }
        xp[n] = &xs[n], n++;
      }
    }
    for (size_t i = 0; i < n_dirs; i++) {
      if (listed(s->reg, dirs[i])) continue;
      inference__repository_index_response__model_index__init(&xs[n]);
      xs[n].name = dirs[i];
      if (s->control && srv_control_loading(s->control, dirs[i])) xs[n].state = "LOADING";
      xp[n] = &xs[n], n++;
    }
    Inference__RepositoryIndexResponse r = INFERENCE__REPOSITORY_INDEX_RESPONSE__INIT;
    r.n_models = n;
    r.models = xp;
    srv_reply_msg(call, &r.base);
  }
  free(xs);
  free(xp);
  free(fail);
  repo_list_free(dirs, n_dirs);
  inference__repository_index_request__free_unpacked(q, NULL);
}

// --- shared memory, both kinds (Triton's system_ and cuda_shared_memory extensions)

// Answers FAILED_PRECONDITION unless the server was started with
// --allow-client-shm (Triton's default too: a client that may register any
// key may read any shared memory object the server can open; one that
// registers a CUDA handle makes the server read and write device memory).
static int shm_or_fail(srv_server *s, srv_call *call) {
  if (s->shm) return 0;
  srv_call_fail(call, ERR_FAILED_PRECONDITION, SRV_SHM_DISABLED_MSG);
  return -1;
}

// The flag check, then the request of type d; NULL when the call is answered
// already (refused, bytes that do not parse, or a name or key that is not
// UTF-8). Free with shm_free.
static ProtobufCMessage *shm_unpack(srv_server *s, srv_call *call, const ProtobufCMessageDescriptor *d,
                                    const uint8_t *req, size_t len) {
  if (shm_or_fail(s, call)) return NULL;
  return srv_unpack_or_fail(call, d, req, len);
}

static void shm_free(ProtobufCMessage *q) {
  protobuf_c_message_free_unpacked(q, NULL);
}

// One namespace for both kinds, as Triton's: a name the other kind holds is taken.
// Region names are quoted in logs, errors and status lists as model names
// are: refused by the same rule (repo_name_problem: control characters,
// not UTF-8), without quoting them back.
static int region_name_refused(srv_call *call, const char *kind, const char *name) {
  const char *why = name ? repo_name_problem(name) : NULL;
  if (!why) return 0;
  char msg[160];
  snprintf(msg, sizeof msg, "the %s region name %s", kind, why);
  srv_call_fail(call, ERR_INVALID_ARGUMENT, msg);
  return 1;
}

static void fail_name_taken(srv_call *call, const char *name) {
  char msg[320];
  snprintf(msg, sizeof msg, "shared memory region '%.256s' already in manager", name);
  srv_call_fail(call, ERR_ALREADY_EXISTS, msg);
}

// Logs what an Unregister took away (`kind`: "shared memory" or "cuda
// shared memory") and answers its empty response.
static void reply_unregistered(srv_call *call, const char *kind, size_t n, const char *name,
                               const ProtobufCMessage *resp) {
  if (n) srv_log(SRV_LOG_INFO, "%zu %s region(s) unregistered (%s)", n, kind, *name ? name : "all");
  srv_reply_msg(call, resp);
}

// Answers a Status response of type resp_d, whose map `regions` holds the n
// RegionStatus messages at st (an array of the map value's type, filled by
// the caller) keyed by their `name`. The two kinds' responses differ only in
// those types, so the map is built through the descriptors, as protobuf-c
// itself reads messages.
static void reply_status(srv_call *call, const ProtobufCMessageDescriptor *resp_d, const void *st, size_t n) {
  const ProtobufCFieldDescriptor *rf = protobuf_c_message_descriptor_get_field_by_name(resp_d, "regions");
  const ProtobufCMessageDescriptor *ent_d = rf->descriptor;
  const ProtobufCFieldDescriptor *kf = protobuf_c_message_descriptor_get_field_by_name(ent_d, "key");
  const ProtobufCFieldDescriptor *vf = protobuf_c_message_descriptor_get_field_by_name(ent_d, "value");
  const ProtobufCMessageDescriptor *st_d = vf->descriptor;
  const ProtobufCFieldDescriptor *nf = protobuf_c_message_descriptor_get_field_by_name(st_d, "name");
  uint8_t *resp = calloc(1, resp_d->sizeof_message);
  uint8_t *ent = calloc(n ? n : 1, ent_d->sizeof_message);
  void **entp = calloc(n ? n : 1, sizeof *entp);
  if (!resp || !ent || !entp) {
    srv_call_fail(call, ERR_RESOURCE_EXHAUSTED, "out of memory");
  } else {
    protobuf_c_message_init(resp_d, resp);
    for (size_t i = 0; i < n; i++) {
      uint8_t *e = ent + i * ent_d->sizeof_message;
      const uint8_t *v = (const uint8_t *)st + i * st_d->sizeof_message;
      protobuf_c_message_init(ent_d, e);
      memcpy(e + kf->offset, v + nf->offset, sizeof(char *));  // key: the status's name
      memcpy(e + vf->offset, &v, sizeof v);                    // value: the status
      entp[i] = e;
    }
    memcpy(resp + rf->quantifier_offset, &n, sizeof n);
    memcpy(resp + rf->offset, &entp, sizeof entp);
    srv_reply_msg(call, (const ProtobufCMessage *)resp);
  }
  free(entp);
  free(ent);
  free(resp);
}

// --- system shared memory

static void shm_register(void *ctx, srv_call *call, const uint8_t *req, size_t len) {
  srv_server *s = ctx;
  Inference__SystemSharedMemoryRegisterRequest *q = (Inference__SystemSharedMemoryRegisterRequest *)shm_unpack(
      s, call, &inference__system_shared_memory_register_request__descriptor, req, len);
  if (!q) return;
  err e;
  if (region_name_refused(call, "shared memory", q->name)) {  // answered
  } else if (srv_cuda_shm_has(s->cuda_shm, q->name)) {
    fail_name_taken(call, q->name);
  } else if (srv_shm_register(s->shm, q->name, q->key, q->offset, q->byte_size, &e) != 0) {
    srv_call_fail(call, (int)e.code, e.msg);
  } else {
    srv_log(SRV_LOG_INFO, "shared memory region '%s' registered: key '%s', offset %" PRIu64 ", %" PRIu64 " bytes",
            q->name, q->key, q->offset, q->byte_size);
    Inference__SystemSharedMemoryRegisterResponse r = INFERENCE__SYSTEM_SHARED_MEMORY_REGISTER_RESPONSE__INIT;
    srv_reply_msg(call, &r.base);
  }
  shm_free(&q->base);
}

static void shm_unregister(void *ctx, srv_call *call, const uint8_t *req, size_t len) {
  srv_server *s = ctx;
  Inference__SystemSharedMemoryUnregisterRequest *q = (Inference__SystemSharedMemoryUnregisterRequest *)shm_unpack(
      s, call, &inference__system_shared_memory_unregister_request__descriptor, req, len);
  if (!q) return;
  Inference__SystemSharedMemoryUnregisterResponse r = INFERENCE__SYSTEM_SHARED_MEMORY_UNREGISTER_RESPONSE__INIT;
  reply_unregistered(call, "shared memory", srv_shm_unregister(s->shm, q->name), q->name, &r.base);
  shm_free(&q->base);
}

static void shm_status(void *ctx, srv_call *call, const uint8_t *req, size_t len) {
  srv_server *s = ctx;
  Inference__SystemSharedMemoryStatusRequest *q = (Inference__SystemSharedMemoryStatusRequest *)shm_unpack(
      s, call, &inference__system_shared_memory_status_request__descriptor, req, len);
  if (!q) return;
  err e;
  srv_shm_info *info = NULL;
  size_t n = 0;
  Inference__SystemSharedMemoryStatusResponse__RegionStatus *st = NULL;
  if (srv_shm_status(s->shm, q->name, &info, &n, &e) != 0) {
    srv_call_fail(call, (int)e.code, e.msg);
  } else if (!(st = calloc(n ? n : 1, sizeof *st))) {
    srv_call_fail(call, ERR_RESOURCE_EXHAUSTED, "out of memory");
  } else {
    for (size_t i = 0; i < n; i++) {
      inference__system_shared_memory_status_response__region_status__init(&st[i]);
      st[i].name = info[i].name;
      st[i].key = info[i].key;
      st[i].offset = info[i].offset;
      st[i].byte_size = info[i].byte_size;
    }
    reply_status(call, &inference__system_shared_memory_status_response__descriptor, st, n);
  }
  free(st);
  srv_shm_info_free(info, n);
  shm_free(&q->base);
}

// --- CUDA shared memory (behind the same flag as system shared memory)

static void cuda_shm_register(void *ctx, srv_call *call, const uint8_t *req, size_t len) {
  srv_server *s = ctx;
  Inference__CudaSharedMemoryRegisterRequest *q = (Inference__CudaSharedMemoryRegisterRequest *)shm_unpack(
      s, call, &inference__cuda_shared_memory_register_request__descriptor, req, len);
  if (!q) return;
  err e;
  if (region_name_refused(call, "cuda shared memory", q->name)) {  // answered
  } else if (srv_shm_has(s->shm, q->name)) {
    fail_name_taken(call, q->name);
  } else if (srv_cuda_shm_register(s->cuda_shm, q->name, q->raw_handle.data, q->raw_handle.len, q->device_id,
                                   q->byte_size, &e) != 0) {
    srv_call_fail(call, (int)e.code, e.msg);
  } else {
    srv_log(SRV_LOG_INFO, "cuda shared memory region '%s' registered: device %" PRId64 ", %" PRIu64 " bytes", q->name,
            q->device_id, q->byte_size);
    Inference__CudaSharedMemoryRegisterResponse r = INFERENCE__CUDA_SHARED_MEMORY_REGISTER_RESPONSE__INIT;
    srv_reply_msg(call, &r.base);
  }
  shm_free(&q->base);
}

static void cuda_shm_unregister(void *ctx, srv_call *call, const uint8_t *req, size_t len) {
  srv_server *s = ctx;
  Inference__CudaSharedMemoryUnregisterRequest *q = (Inference__CudaSharedMemoryUnregisterRequest *)shm_unpack(
      s, call, &inference__cuda_shared_memory_unregister_request__descriptor, req, len);
  if (!q) return;
  Inference__CudaSharedMemoryUnregisterResponse r = INFERENCE__CUDA_SHARED_MEMORY_UNREGISTER_RESPONSE__INIT;
  reply_unregistered(call, "cuda shared memory", srv_cuda_shm_unregister(s->cuda_shm, q->name), q->name, &r.base);
  shm_free(&q->base);
}

static void cuda_shm_status(void *ctx, srv_call *call, const uint8_t *req, size_t len) {
  srv_server *s = ctx;
  Inference__CudaSharedMemoryStatusRequest *q = (Inference__CudaSharedMemoryStatusRequest *)shm_unpack(
      s, call, &inference__cuda_shared_memory_status_request__descriptor, req, len);
  if (!q) return;
  err e;
  srv_cuda_shm_info *info = NULL;
  size_t n = 0;
  Inference__CudaSharedMemoryStatusResponse__RegionStatus *st = NULL;
  if (srv_cuda_shm_status(s->cuda_shm, q->name, &info, &n, &e) != 0) {
    if (e.code == ERR_NOT_FOUND && srv_shm_has(s->shm, q->name))
      err_set(&e, ERR_NOT_FOUND, "The region named '%s' is registered as system shared memory, not CUDA shared memory",
              q->name);
    srv_call_fail(call, (int)e.code, e.msg);
  } else if (!(st = calloc(n ? n : 1, sizeof *st))) {
    srv_call_fail(call, ERR_RESOURCE_EXHAUSTED, "out of memory");
  } else {
    for (size_t i = 0; i < n; i++) {
      inference__cuda_shared_memory_status_response__region_status__init(&st[i]);
      st[i].name = info[i].name;
      st[i].device_id = (uint64_t)info[i].device_id;
      st[i].byte_size = info[i].byte_size;
    }
    reply_status(call, &inference__cuda_shared_memory_status_response__descriptor, st, n);
  }
  free(st);
  srv_cuda_shm_info_free(info, n);
  shm_free(&q->base);
}

// --- reflection (bidi stream, one answer per request)

// A request whose strings are not UTF-8 or hold a NUL byte ends the stream
// with INVALID_ARGUMENT first: the answer would echo them (original_request,
// valid_host, "symbol not found: ..."), or read a name cut at the NUL.
// Parsed twice, which a reflection message's size makes cheap.
static int reflection_answer(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, err *e) {
  srv_server *s = ctx;
  static const uint8_t empty[1];
  ProtobufCMessage *q = protobuf_c_message_unpack(&grpc__reflection__v1__server_reflection_request__descriptor, NULL,
                                                  len, req ? req : empty);
  int rc = srv_wire_strings_no_nul(&grpc__reflection__v1__server_reflection_request__descriptor, req, len, e);
  if (!rc && q) rc = srv_strings_utf8(q, e);  // bytes that do not parse: srv_reflection_answer says so
  if (q) protobuf_c_message_free_unpacked(q, NULL);
  return rc ? rc : srv_reflection_answer(s->reflection, req, len, resp, resp_len, e);
}

// Handlers that look at models hold the registry's read lock while they
// answer, so model control cannot free what they read.
#define UNDER_READ_LOCK(fn)                                                         \
  static void fn##_locked(void *ctx, srv_call *call, const uint8_t *req, size_t len) { \
    srv_server *s = ctx;                                                            \
    srv_registry_rdlock(s->reg);                                                    \
    fn(ctx, call, req, len);                                                        \
    srv_registry_rdunlock(s->reg);                                                  \
  }
UNDER_READ_LOCK(model_ready)
UNDER_READ_LOCK(model_metadata)
UNDER_READ_LOCK(model_config)
UNDER_READ_LOCK(model_statistics)
UNDER_READ_LOCK(repository_index)

size_t srv_methods(srv_server *s, srv_method *out, size_t cap) {
  const srv_method all[] = {
      {.path = SVC "ServerLive", .unary = server_live, .ctx = s},
      {.path = SVC "ServerReady", .unary = server_ready, .ctx = s},
      {.path = SVC "ModelReady", .unary = model_ready_locked, .ctx = s},
      {.path = SVC "ServerMetadata", .unary = server_metadata, .ctx = s},
      {.path = SVC "ModelMetadata", .unary = model_metadata_locked, .ctx = s},
      {.path = SVC "ModelConfig", .unary = model_config_locked, .ctx = s},
      {.path = SVC "ModelInfer", .unary = srv_infer_handler, .unary_sliced = srv_infer_sliced_handler, .ctx = s},
      {.path = SVC "ModelStreamInfer", .astream = srv_infer_stream_handler, .ctx = s},
      {.path = SVC "ModelStatistics", .unary = model_statistics_locked, .ctx = s},
      {.path = SVC "RepositoryIndex", .unary = repository_index_locked, .ctx = s},
      {.path = SVC "RepositoryModelLoad", .unary = srv_control_load_rpc, .ctx = s->control},
      {.path = SVC "RepositoryModelUnload", .unary = srv_control_unload_rpc, .ctx = s->control},
      {.path = SVC "LogSettings", .unary = srv_log_settings, .ctx = s},
      {.path = SVC "TraceSetting", .unary = srv_trace_setting, .ctx = s},
      {.path = SVC "SystemSharedMemoryStatus", .unary = shm_status, .ctx = s},
      {.path = SVC "SystemSharedMemoryRegister", .unary = shm_register, .ctx = s},
      {.path = SVC "SystemSharedMemoryUnregister", .unary = shm_unregister, .ctx = s},
      {.path = SVC "CudaSharedMemoryStatus", .unary = cuda_shm_status, .ctx = s},
      {.path = SVC "CudaSharedMemoryRegister", .unary = cuda_shm_register, .ctx = s},
      {.path = SVC "CudaSharedMemoryUnregister", .unary = cuda_shm_unregister, .ctx = s},
      {.path = "/grpc.health.v1.Health/Check", .unary = health_check, .ctx = s},
      {.path = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", .stream = reflection_answer, .ctx = s},
      {.path = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", .stream = reflection_answer, .ctx = s},
  };
  size_t n = sizeof all / sizeof all[0];
  if (n > cap) n = cap;
  memcpy(out, all, n * sizeof *out);
  return n;
}
