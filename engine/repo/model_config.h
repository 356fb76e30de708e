// engine/repo/model_config.h: the engine's own model config, the fields of a
// completed, validated config.pbtxt that the engine (model.c, pad.c,
// warmup.c) and the server's scheduler read, in plain C types. The wire type
// (Inference__ModelConfig, protobuf-c) stays in the repository room, where
// pbtxt parsing, completion and validation work on it, and in the server,
// which serialises it for the ModelConfig answers;
// eng_model_config_from_proto (declared in config.h, beside the other
// functions on the message; defined in model_config.c) builds this struct
// from it once per load.
#ifndef INFERD_ENGINE_REPO_MODEL_CONFIG_H
#define INFERD_ENGINE_REPO_MODEL_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base/dtype.h"

// Where a group's instances run; the numbering is ModelInstanceGroup.Kind's,
// so a value the config names by number keeps its meaning (anything but GPU
// runs on the CPU). KIND_AUTO is resolved (config_resolve_kinds) before.
typedef enum eng_instance_kind {
  ENG_INSTANCE_AUTO = 0,
  ENG_INSTANCE_GPU = 1,
  ENG_INSTANCE_CPU = 2,
  ENG_INSTANCE_MODEL = 3,
} eng_instance_kind;

// An input or output as the config lists it: dims without the batch
// dimension when max_batch_size > 0, -1 = variable.
typedef struct eng_model_tensor {
  char *name;
  dtype dt;  // the config's data_type (same numbering)
  int64_t *dims;
  size_t n_dims;
  int has_reshape;  // a reshape block is present (its shape may be empty)
  int64_t *reshape;
  size_t n_reshape;
} eng_model_tensor;

typedef struct eng_instance_group {
  char *name;
  eng_instance_kind kind;
  int32_t count;
  int32_t *gpus;  // none: every visible device (KIND_GPU)
  size_t n_gpus;
} eng_instance_group;

// parameters { key: ... value { string_value: ... } }, in config order
// (value "" when the entry has none).
typedef struct eng_model_param {
  char *key;
  char *value;
} eng_model_param;

typedef enum eng_timeout_action {
  ENG_TIMEOUT_REJECT = 0,
  ENG_TIMEOUT_DELAY = 1,
} eng_timeout_action;

// ModelQueuePolicy; all zero (reject, no timeout, unbounded) when absent.
typedef struct eng_queue_policy {
  eng_timeout_action timeout_action;
  uint64_t default_timeout_us;  // 0: no timeout
  int allow_timeout_override;
  uint32_t max_queue_size;  // 0: unbounded
} eng_queue_policy;

typedef struct eng_level_policy {
  uint64_t level;
  eng_queue_policy policy;
} eng_level_policy;

// dynamic_batching; every field zero unless `on`.
typedef struct eng_dynamic_batching {
  int on;  // the config's scheduler is dynamic_batching
  int32_t *preferred;
  size_t n_preferred;
  uint64_t max_queue_delay_us;
  int preserve_ordering;
  uint64_t priority_levels;  // 0: priorities off
  uint64_t default_priority_level;
  eng_queue_policy default_policy;
  eng_level_policy *level_policies;  // priority_queue_policy, in config order
  size_t n_level_policies;
  // inferd's latency target (parameters { key: "latency_target_ms" },
  // config.h's config_latency_target_us): p99 queue + compute; 0: none
  int64_t latency_target_us;
} eng_dynamic_batching;

// sequence_batching's control inputs (ModelSequenceBatching.Control.Kind's
// numbering): model inputs the client never sends, filled by the server per
// request (server/core/infer_validate.c, batcher/sequence.h).
typedef enum eng_control_kind {
  ENG_CONTROL_START = 0,
  ENG_CONTROL_READY = 1,
  ENG_CONTROL_END = 2,
  ENG_CONTROL_CORRID = 3,
} eng_control_kind;

typedef struct eng_control {
  eng_control_kind kind;
  size_t input;  // its index in eng_model_config.inputs (>= n_client_inputs)
  dtype dt;      // INT32, FP32 or BOOL for the flags; CORRID's data_type
  double false_true[2];  // the flags' values for false and true (unused for CORRID)
} eng_control;

// sequence_batching's implicit state (Triton's `state`): a model input fed
// with the sequence's state and a model output that is its next value,
// neither seen by the client; zeros at a sequence's START.
typedef struct eng_seq_state {
  size_t input;      // index in eng_model_config.inputs (after the controls)
  size_t output;     // index in eng_model_config.outputs (>= n_client_outputs)
  dtype dt;
  size_t row_bytes;  // one sequence's state: dims' product x element size
  size_t offset;     // where it lies in a sequence's state bytes (16-aligned)
} eng_seq_state;

typedef enum eng_seq_strategy { ENG_SEQ_DIRECT = 0, ENG_SEQ_OLDEST = 1 } eng_seq_strategy;

// sequence_batching; every field zero unless `on`.
typedef struct eng_sequence_batching {
  int on;
  eng_seq_strategy strategy;
  uint64_t max_idle_us;  // max_sequence_idle_microseconds (0 in the config: Triton's 1 s)
  // direct
  uint64_t direct_delay_us;
  float min_slot_utilization;
  // oldest
  int32_t max_candidates;
  int32_t *preferred;
  size_t n_preferred;
  uint64_t oldest_delay_us;
  eng_control *controls;
  size_t n_controls;
  eng_seq_state *states;
  size_t n_states;
  size_t state_bytes;  // every state of one sequence, each 16-aligned
} eng_sequence_batching;

// Where a warmup input's bytes come from: the oneof's case as set,
// whatever its bool's value (random_data: false is random data too).
typedef enum eng_warmup_source {
  ENG_WARMUP_NONE = 0,  // none of the three
  ENG_WARMUP_ZERO,
  ENG_WARMUP_RANDOM,
  ENG_WARMUP_FILE,
} eng_warmup_source;

typedef struct eng_warmup_input {
  char *name;  // the inputs map's key
  // 0 when the map entry had no value block: such an input counts as
  // missing (the fields below are then zero)
  int has_value;
  dtype dt;
  int64_t *dims;
  size_t n_dims;
  eng_warmup_source source;
  char *file;  // ENG_WARMUP_FILE: input_data_file, else ""
} eng_warmup_input;

typedef struct eng_warmup {
  char *name;
  uint32_t batch_size;
  uint32_t count;            // 0 means 1
  eng_warmup_input *inputs;  // in config order
  size_t n_inputs;
} eng_warmup;

typedef struct eng_model_config {
  char *name;
  int32_t max_batch_size;  // 0: the model does not batch
  // inputs: the config's, then sequence_batching's control inputs (dims
  // [1]), then its state inputs
  eng_model_tensor *inputs, *outputs;
  size_t n_inputs, n_outputs;
  size_t n_client_inputs;  // the config's inputs: what a request carries
  // outputs: the config's, then sequence_batching's state outputs
  size_t n_client_outputs;  // what a request may ask for

  eng_instance_group *groups;
  size_t n_groups;
  eng_model_param *params;
  size_t n_params;
  // CUDA graphs per batch size: on unless optimization { cuda { ... } }
  // is present with graphs false (Triton's rule)
  int cuda_graphs;
  eng_dynamic_batching batching;
  eng_sequence_batching sequence;
  eng_warmup *warmups;
  size_t n_warmups;
  void *arena;  // private: the memory everything above lives in
} eng_model_config;

// The value of the first parameter named key, NULL when there is none.
const char *eng_model_config_param(const eng_model_config *c, const char *key);

// Releases the struct and everything it points to (NULL is fine).
void eng_model_config_free(eng_model_config *c);

#endif
