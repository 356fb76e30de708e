// model.c: ModelMetadata / ModelConfig / ModelStatistics for the load generator.
#include "clients/load/model.h"

#include <stdlib.h>
#include <string.h>

#include "clients/load/rpc.h"

static void meta_free(ld_tensor_meta *t, size_t n) {
  for (size_t i = 0; t && i < n; i++) free(t[i].name), free(t[i].datatype), free(t[i].shape);
  free(t);
}

void ld_model_destroy(ld_model *m) {
  if (!m) return;
  free(m->name);
  meta_free(m->inputs, m->n_inputs);
  meta_free(m->outputs, m->n_outputs);
  free(m);
}

static int copy_meta(Inference__ModelMetadataResponse__TensorMetadata **src, size_t n, ld_tensor_meta **out, err *e) {
  *out = calloc(n ? n : 1, sizeof **out);
  if (!*out) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  for (size_t i = 0; i < n; i++) {
    ld_tensor_meta *t = &(*out)[i];
    t->name = strdup(src[i]->name);
    t->datatype = strdup(src[i]->datatype);
    t->rank = src[i]->n_shape;
    t->shape = malloc((t->rank ? t->rank : 1) * sizeof *t->shape);
    if (!t->name || !t->datatype || !t->shape) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    if (t->rank) memcpy(t->shape, src[i]->shape, t->rank * sizeof *t->shape);
  }
  return 0;
}

int ld_model_from_metadata(const Inference__ModelMetadataResponse *md, int max_batch_size, ld_model **out, err *e) {
  *out = NULL;
  ld_model *m = calloc(1, sizeof *m);
  if (!m) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  m->max_batch_size = max_batch_size;
  m->n_inputs = md->n_inputs;
  m->n_outputs = md->n_outputs;
  m->name = strdup(md->name);
  int rc = m->name ? 0 : err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  if (!rc) rc = copy_meta(md->inputs, md->n_inputs, &m->inputs, e);
  if (!rc) rc = copy_meta(md->outputs, md->n_outputs, &m->outputs, e);
  if (!rc && md->n_inputs == 0) rc = err_set(e, ERR_FAILED_PRECONDITION, "model '%s' reports no inputs", md->name);
  if (rc) {
    ld_model_destroy(m);
    return rc;
  }
  if (max_batch_size >= 0) {
    m->batching = max_batch_size > 0;
  } else {
    m->batching = true;
    for (size_t i = 0; i < m->n_inputs; i++)
      if (m->inputs[i].rank == 0 || m->inputs[i].shape[0] != -1) m->batching = false;
  }
  if (m->batching)
    for (size_t i = 0; i < m->n_inputs; i++)
      if (m->inputs[i].rank == 0) {
        err_set(e, ERR_FAILED_PRECONDITION, "model '%s' batches but input '%s' has no batch dim", m->name,
                m->inputs[i].name);
        ld_model_destroy(m);
        return ERR_FAILED_PRECONDITION;
      }
  *out = m;
  return 0;
}

int ld_model_fetch(grpc_channel *ch, const char *name, const char *version, int timeout_ms, ld_model **out, err *e) {
  *out = NULL;
  Inference__ModelMetadataRequest mq = INFERENCE__MODEL_METADATA_REQUEST__INIT;
  mq.name = (char *)name;
  mq.version = (char *)version;
  ProtobufCMessage *r = NULL;
  TRY(ld_unary(ch, "ModelMetadata", &mq.base, &inference__model_metadata_response__descriptor, timeout_ms, &r, e));
  Inference__ModelMetadataResponse *md = (Inference__ModelMetadataResponse *)r;

  int mbs = -1;
  Inference__ModelConfigRequest cq = INFERENCE__MODEL_CONFIG_REQUEST__INIT;
  cq.name = (char *)name;
  cq.version = (char *)version;
  ProtobufCMessage *c = NULL;
  err ce;
  if (ld_unary(ch, "ModelConfig", &cq.base, &inference__model_config_response__descriptor, timeout_ms, &c, &ce) == 0) {
    Inference__ModelConfigResponse *cr = (Inference__ModelConfigResponse *)c;
    if (cr->config) mbs = cr->config->max_batch_size;
    protobuf_c_message_free_unpacked(c, NULL);
  }
  int rc = ld_model_from_metadata(md, mbs, out, e);
  protobuf_c_message_free_unpacked(r, NULL);
  return rc;
}

// --- statistics

static void add_dur(const Inference__StatisticDuration *d, uint64_t *count, uint64_t *ns) {
  if (!d) return;
  *count += d->count;
  *ns += d->ns;
}

int ld_server_stats_fetch(grpc_channel *ch, const char *name, const char *version, int timeout_ms, ld_server_stats *out,
                          err *e) {
  memset(out, 0, sizeof *out);
  Inference__ModelStatisticsRequest q = INFERENCE__MODEL_STATISTICS_REQUEST__INIT;
  q.name = (char *)name;
  q.version = (char *)version;
  ProtobufCMessage *r = NULL;
  TRY(ld_unary(ch, "ModelStatistics", &q.base, &inference__model_statistics_response__descriptor, timeout_ms, &r, e));
  Inference__ModelStatisticsResponse *sr = (Inference__ModelStatisticsResponse *)r;
  for (size_t i = 0; i < sr->n_model_stats; i++) {
    const Inference__ModelStatistics *ms = sr->model_stats[i];
    if (strcmp(ms->name, name) != 0) continue;
    out->inference_count += ms->inference_count;
    out->execution_count += ms->execution_count;
    const Inference__InferStatistics *is = ms->inference_stats;
    if (!is) continue;
    uint64_t ns = 0;
    add_dur(is->success, &out->success_count, &ns);
    add_dur(is->fail, &out->fail_count, &ns);
    add_dur(is->queue, &out->queue_count, &out->queue_ns);
    add_dur(is->compute_input, &out->cin_count, &out->cin_ns);
    add_dur(is->compute_infer, &out->cinf_count, &out->cinf_ns);
    add_dur(is->compute_output, &out->cout_count, &out->cout_ns);
  }
  protobuf_c_message_free_unpacked(r, NULL);
  return 0;
}

void ld_server_stats_sub(const ld_server_stats *after, const ld_server_stats *before, ld_server_stats *d) {
  // A counter that went back (the model was reloaded) gives 0 rather than a huge wrapped value.
#define SUB_(f) d->f = after->f >= before->f ? after->f - before->f : 0
  SUB_(success_count), SUB_(fail_count), SUB_(inference_count), SUB_(execution_count);
  SUB_(queue_count), SUB_(queue_ns), SUB_(cin_count), SUB_(cin_ns);
  SUB_(cinf_count), SUB_(cinf_ns), SUB_(cout_count), SUB_(cout_ns);
#undef SUB_
}
