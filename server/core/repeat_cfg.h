// server/core/repeat_cfg.h: Triton's `repeat` backend's model (backend: "repeat"),
// as the registry holds it: its config checked once per load and the tensors
// it shows its clients, beside an engine (srv_version.model) and an ensemble's
// plan (srv_version.ens). Pure data, like ensemble_plan.h; the requests run on
// the server's repeat runner (server/core/repeat.h).
#ifndef INFERD_SERVER_REPEAT_CFG_H
#define INFERD_SERVER_REPEAT_CFG_H

#include <stddef.h>
#include <stdint.h>

#include "engine/tensor.h"
#include "kernels/base/err.h"
#include "model_config.pb-c.h"

typedef struct srv_repeat_cfg {
  eng_io in[3];   // IN, DELAY, WAIT (config order)
  eng_io out[2];  // OUT, IDX
} srv_repeat_cfg;

// Whether a config names the repeat backend.
int srv_repeat_cfg_is_repeat(const Inference__ModelConfig *cfg);

// Checks cfg as Triton's repeat backend does at load (max_batch_size 0; inputs
// IN INT32 [-1 or n], DELAY UINT32 of IN's shape, WAIT UINT32 [1]; outputs OUT
// INT32 [1], IDX UINT32 [1], in that order; decoupled), every reason at once
// ("; " between). ERR_INVALID_ARGUMENT with why on failure.
int srv_repeat_cfg_create(const Inference__ModelConfig *cfg, srv_repeat_cfg **out, err *e);
void srv_repeat_cfg_destroy(srv_repeat_cfg *p);

// "[3,1]": a shape as the backend's messages write it.
void srv_repeat_shape_str(char *out, size_t cap, size_t n, const int64_t *dims);

#endif
