// model.h: what the server says a model looks like (ModelMetadata) and
// whether it batches (ModelConfig's max_batch_size), learnt once before the
// load starts.
#ifndef INFERD_CLIENTS_LOAD_MODEL_H
#define INFERD_CLIENTS_LOAD_MODEL_H

#include <grpc/grpc.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grpc_service.pb-c.h"
#include "kernels/base/err.h"

typedef struct ld_tensor_meta {
  char *name;
  char *datatype;  // KServe wire name: "FP32", "INT64", "BYTES", ...
  int64_t *shape;  // as the server reports it, batch dim included; -1 = variable
  size_t rank;
} ld_tensor_meta;

// Read-only after creation; free with ld_model_destroy.
typedef struct ld_model {
  char *name;
  int max_batch_size;  // from ModelConfig; -1 when the server did not answer it
  bool batching;       // shape[0] of every input and output is the batch dim
  ld_tensor_meta *inputs, *outputs;
  size_t n_inputs, n_outputs;
} ld_model;

// ModelMetadata, then ModelConfig. A failed ModelConfig (a server without the
// model_configuration extension) is not fatal: a model then counts as
// batching when every input's shape starts with -1, as Triton reports them.
// The err's code is the failed call's gRPC status.
int ld_model_fetch(grpc_channel *ch, const char *name, const char *version, int timeout_ms, ld_model **out, err *e);

// The part of ld_model_fetch that needs no server; max_batch_size -1 when unknown.
int ld_model_from_metadata(const Inference__ModelMetadataResponse *md, int max_batch_size, ld_model **out, err *e);
void ld_model_destroy(ld_model *m);

// --- server-side statistics (ModelStatistics), summed over the versions returned

typedef struct ld_server_stats {
  uint64_t success_count, fail_count;
  uint64_t inference_count;  // rows served
  uint64_t execution_count;  // model executions (batches)
  uint64_t queue_count, queue_ns;
  uint64_t cin_count, cin_ns;    // compute_input
  uint64_t cinf_count, cinf_ns;  // compute_infer
  uint64_t cout_count, cout_ns;  // compute_output
} ld_server_stats;

int ld_server_stats_fetch(grpc_channel *ch, const char *name, const char *version, int timeout_ms, ld_server_stats *out,
                          err *e);
// delta = after - before, field by field.
void ld_server_stats_sub(const ld_server_stats *after, const ld_server_stats *before, ld_server_stats *delta);

#endif
