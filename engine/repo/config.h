// config: completing and checking a model's Inference__ModelConfig against
// the inputs/outputs its ONNX graph declares, the way Triton's auto-complete
// and model-config validation do for the onnxruntime backend; and the
// engine's own copy of the result (model_config.h).
#ifndef INFERD_ENGINE_CONFIG_H
#define INFERD_ENGINE_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "engine/repo/model_config.h"
#include "engine/tensor.h"
#include "kernels/base/err.h"
#include "model_config.pb-c.h"

struct eng_graph_opts;  // engine/graph/graph.h

#define CONFIG_DEFAULT_MAX_BATCH_SIZE 4
#define CONFIG_NO_AUTO_COMPLETE (-1)  // Triton's default-max-batch-size
#define CONFIG_PLATFORM_ONNX "onnxruntime_onnx"
// Triton's example decoupled backend, built in (server/core/repeat.h): no files, no engine.
#define CONFIG_BACKEND_REPEAT "repeat"
// The generative backend, built in (server/core/llm_serve.h): a Hugging Face checkpoint per version folder.
#define CONFIG_BACKEND_LLM "inferd_llm"

// A new empty config (all fields at their proto3 defaults) with `name` set
// (NULL: left empty), allocated as protobuf-c's unpack does: release it with
// config_free or protobuf_c_message_free_unpacked. NULL on out-of-memory.
Inference__ModelConfig *config_new(const char *name);
void config_free(Inference__ModelConfig *cfg);

// Fills what the config leaves out, from the graph IO (dims -1 = dynamic):
//  - max_batch_size: when 0, every graph input and output has a dynamic first
//    dimension, and either the config did not come from a file
//    (config_from_file == 0) or the inputs/outputs it lists (if any) all
//    omit that dimension (rank one less than the graph's), it becomes
//    default_max_batch_size (> 0; Triton's default is 4). So a config.pbtxt
//    holding only instance_group batches by the default, as in Triton;
//  - inputs/outputs, when the config lists none: every graph input/output
//    with its data type and dims (batch dimension stripped when batching);
//  - dynamic_batching {} when max_batch_size > 1 and no scheduler is set
//    (Triton does the same);
//  - dynamic_batching.preferred_batch_size [max_batch_size] when dynamic
//    batching lists none and max_batch_size > 0 (Triton's normalisation; the
//    batcher behaves the same either way);
//  - platform "onnxruntime_onnx" when platform and backend are both empty;
//  - instance_group: one group {count: 1, kind: KIND_AUTO} when there is none;
//    in given groups KIND_AUTO becomes KIND_GPU when `gpus` lists devices (and
//    stays KIND_AUTO otherwise, for config_resolve_kinds), count 0 becomes 1,
//    an empty name "<model>_<index>";
//  - version_policy latest { num_versions: 1 } when none is set.
// With default_max_batch_size == CONFIG_NO_AUTO_COMPLETE (Triton's
// --disable-auto-complete-config) only the last four (preferred sizes,
// platform, instance_group, version_policy) are filled: the config must list
// its tensors and a scheduler itself.
// Does not validate; run config_validate afterwards. Errors only on
// out-of-memory or a bad argument.
int config_complete(Inference__ModelConfig *cfg, int config_from_file, const eng_io *in, size_t n_in,
                    const eng_io *out, size_t n_out, int default_max_batch_size, err *e);

// The longest dynamic_batching.max_queue_delay_microseconds taken: one
// hour. The field is a uint64 and the batcher adds it to a signed clock, so a
// value near 2^64 read as negative (and was refused saying so); real delays
// are micro- to milliseconds.
#define CONFIG_MAX_QUEUE_DELAY_US UINT64_C(3600000000)

// Checks a (completed) config against the graph IO; ERR_INVALID_ARGUMENT with
// a message naming the field and tensor, e.g. "input 'x': data_type TYPE_FP16
// in config does not match the model's FP32". Checks: platform/backend
// supported; max_batch_size >= 0; every config input/output exists in the
// graph (outputs may be a subset, at least one), no duplicates, same data
// type, dims -1 or > 0 and compatible with the graph (graph dims = [-1] +
// config dims when max_batch_size > 0, or the config `reshape` shape in their
// place; -1 on either side matches anything; the graph's batch dimension must
// be dynamic); every graph input is listed in the config; dynamic_batching
// sane (preferred sizes in 1..max_batch_size, max_queue_delay_microseconds
// at most CONFIG_MAX_QUEUE_DELAY_US, default_priority_level and
// priority_queue_policy keys in 1..priority_levels); instance_group counts
// and gpus >= 0; version_policy.latest.num_versions > 0;
// sequence_batching's control inputs and state (model inputs and outputs the
// config does not list) checked; Triton's
// ragged batching (allow_ragged_batch, batch_input, batch_output: requests
// concatenated into 1-D), refused with a pointer to pad_to_longest.
// KIND_AUTO groups become KIND_GPU when a CUDA device is visible, else
// KIND_CPU (Triton's rule), and KIND_CPU whatever the devices when an input
// or output is TYPE_STRING (GPU instances do not run those; Triton's
// onnxruntime keeps string tensors on the host the same way), or when the
// graph has nodes no GPU plan runs (n_cpu_only_nodes: the ai.onnx.ml ops
// of scikit-learn's models, eng_graph_n_ml_nodes); run after
// config_complete, at load.
void config_resolve_kinds(Inference__ModelConfig *cfg, int n_gpus, size_t n_cpu_only_nodes);

int config_validate(const Inference__ModelConfig *cfg, const eng_io *in, size_t n_in, const eng_io *out,
                    size_t n_out, err *e);

// What inferd cannot serve at all, whatever the graph: a platform other than
// onnxruntime_onnx or ensemble, an ensemble without ensemble_scheduling or
// ensemble_scheduling without platform ensemble, a backend other than
// onnxruntime/inferd ("python" named), decoupled transactions. Every reason at once, "; "
// between, ERR_INVALID_ARGUMENT. The repository scan runs it on the config
// before it looks for model files or the graph, so such a model says what
// it needs instead of "model file ... not found" or a control input missing
// from its inputs; config_validate runs it again.
int config_check_supported(const Inference__ModelConfig *cfg, err *e);

// Upper bounds on config numbers that size what a load allocates up front.
// A config override arrives over the network (RepositoryModelLoad's
// "config"), so each number is the client's: max_batch_size sizes the
// batcher's preferred-size table, every executor's request slots, the
// per-size statistics and the plan's buffers (2^31 reserved 32 TB and held
// the HTTP loop 30 s walking the statistics); priority_levels sizes one
// queue per level (4e9 levels got the process OOM-killed). Triton sets no
// bound on either; these are the server's flags (--model-max-batch-size,
// --model-max-priority-levels).
#define CONFIG_MAX_BATCH_SIZE_DEFAULT 65536
#define CONFIG_MAX_PRIORITY_LEVELS_DEFAULT 1024
// A full batch of one config input or output (max_batch_size x its dims,
// -1 counted as 1, x its element size) may not pass 1 TiB: far beyond what
// any request or machine holds, and low enough that no product of dims
// overflows int64 (config_validate refuses more).
#define CONFIG_MAX_TENSOR_BYTES ((uint64_t)1 << 40)

typedef struct config_limits {
  int max_batch_size;         // > 0
  uint64_t max_priority_levels;  // > 0
} config_limits;

// ERR_INVALID_ARGUMENT naming the field, its value, the bound and the flag
// that sets it, when cfg passes a bound of *lim.
int config_check_limits(const Inference__ModelConfig *cfg, const config_limits *lim, err *e);

// What the config asks of the graph's load-time passes: parameters { key:
// "fuse_attention" value: { string_value: "0" | "1" } } (default 1; "0"
// leaves attention subgraphs as exported, to compare), and the same for
// "merge_qkv" (default 1; "0" keeps a fused attention's Q, K and V
// projections three GEMMs instead of one). Read from the message before the
// graph is loaded (so before config_complete: only the parameters of the
// config file count, and completion adds none).
int config_graph_opts(const Inference__ModelConfig *cfg, struct eng_graph_opts *o, err *e);

// The latency target of dynamic batching (issue 37, batcher/lattarget.h):
// parameters { key: "latency_target_ms" value { string_value: "20" } }, a
// p99 target for queue wait plus compute in milliseconds (decimals allowed,
// 0.05 to 3600000). A model-level parameter rather than a field of
// dynamic_batching, so the config stays one Triton loads (Triton's parser
// refuses unknown fields; its backends ignore parameters they do not know).
// *us = 0 when absent. INVALID_ARGUMENT naming the value when it is not a
// number in range, when the model has no dynamic_batching, or when
// max_batch_size < 2 (nothing to choose).
#define CONFIG_LATENCY_TARGET_KEY "latency_target_ms"
int config_latency_target_us(const Inference__ModelConfig *cfg, int64_t *us, err *e);

// The engine's own copy of a completed, validated config (model_config.h),
// built once per load: the engine and the scheduler read it, the message
// stays for the ModelConfig answers. On success the caller owns *out
// (eng_model_config_free); on failure (out of memory) *out is NULL.
int eng_model_config_from_proto(const Inference__ModelConfig *cfg, eng_model_config **out, err *e);

#endif
