// server/core/ensemble_plan.h: an ensemble's steps as a dataflow graph
// (Triton's platform "ensemble" with ensemble_scheduling), built and checked
// once per load from the ensemble's config and its composing models' configs.
// Pure data: it names models and tensors, it runs nothing (server/core/ensemble.c
// runs a request through it) and looks nothing up (the registry hands it the
// composing models it found).
#ifndef INFERD_SERVER_ENSEMBLE_PLAN_H
#define INFERD_SERVER_ENSEMBLE_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "engine/tensor.h"
#include "kernels/base/err.h"
#include "model_config.pb-c.h"

// Whether a config is an ensemble's (platform "ensemble"): such a model has
// no files and no engine of its own.
int srv_ens_is_ensemble(const Inference__ModelConfig *cfg);

// One step's composing model as the registry found it: its completed config
// when the model (and the version the step names) is ready, else NULL with
// why (a message of the registry's, or "not loaded").
typedef struct srv_ens_member {
  const Inference__ModelConfig *cfg;
  const char *why;
} srv_ens_member;

// One step model's tensor bound to an ensemble tensor.
typedef struct srv_ens_map {
  char *name;     // the step model's input or output name
  size_t tensor;  // index into srv_ens_plan.tensors
} srv_ens_map;

typedef struct srv_ens_step {
  char *model;
  char version[24];  // "" for model_version -1 (the latest ready version)
  srv_ens_map *in, *out;  // input_map and output_map, in config order
  size_t n_in, n_out;
} srv_ens_step;

typedef struct srv_ens_plan {
  srv_ens_step *steps;
  size_t n_steps;
  // every tensor of the dataflow: the ensemble's inputs first (config
  // order, index = config input index), then the steps' outputs
  char **tensors;
  size_t n_tensors;
  // the ensemble's inputs and outputs as its config lists them (dims
  // without the batch dimension when max_batch > 0): what requests are
  // checked against and answers packed from, in place of an engine's
  eng_io *in, *out;
  size_t n_in, n_out;
  size_t *out_tensor;  // per config output, the tensor that holds it
  int max_batch;
} srv_ens_plan;

// Checks the ensemble's config against its members (members[i] for
// cfg->ensemble_scheduling->step[i]) and builds the plan. On failure
// ERR_INVALID_ARGUMENT (or UNAVAILABLE when the only problems are members
// not ready) with every reason at once, "; " between: a step naming no
// model or with an empty map, an unknown or unready composing model, a map
// key that is not the step model's input or output, a step model input left
// unmapped, a tensor consumed that nothing produces, a tensor produced twice,
// a step output nothing uses, an ensemble input no step consumes, an output
// no step produces, a cycle, a data type or shape that differs between
// producer and consumer, a max_batch_size over a member's, instance_group,
// optimization or model_warmup given (Triton's rules). When the reasons do not fit an error's message, it holds the
// first ones and says how many more; all (may be NULL) then gets every one,
// for the log.
#define SRV_ENS_WHY_MAX 4096
int srv_ens_plan_create(const Inference__ModelConfig *cfg, const srv_ens_member *members, srv_ens_plan **out,
                        char *all, size_t all_cap, err *e);
void srv_ens_plan_destroy(srv_ens_plan *p);

#endif
