// server/core/repeat_cfg.c: the repeat backend's config, checked at load as
// Triton's backend checks it (repeat_cfg.h). Pure: it runs nothing.
#include "server/core/repeat_cfg.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/repo/config.h"
#include "kernels/base/dtype.h"

int srv_repeat_cfg_is_repeat(const Inference__ModelConfig *cfg) {
  return cfg && cfg->backend && strcmp(cfg->backend, CONFIG_BACKEND_REPEAT) == 0;
}

// --- the config, checked as the backend's ValidateModelConfig does

void srv_repeat_shape_str(char *out, size_t cap, size_t n, const int64_t *d) {
  size_t o = (size_t)snprintf(out, cap, "[");
  for (size_t i = 0; i < n && o < cap; i++) o += (size_t)snprintf(out + o, cap - o, "%s%" PRId64, i ? "," : "", d[i]);
  if (o < cap) snprintf(out + o, cap - o, "]");
}

typedef struct want {
  const char *name;
  int dt;
} want;

static void check_tensor(char *buf, size_t cap, size_t *len, const char *kind, size_t i, const char *name, int dt,
                         size_t nd, const int64_t *dims, const want *w, eng_io *io) {
  const char *nth = i == 0 ? "first" : i == 1 ? "second" : "third";
  if (!name || strcmp(name, w->name) != 0)
    err_join(buf, cap, len, "expected %s %s tensor name to be %s, got %s", nth, kind, w->name, name ? name : "");
  if (dt != w->dt)
    err_join(buf, cap, len, "expected %s datatype to be %s, got %s", w->name, dtype_wire_name((dtype)w->dt),
             dtype_config_name((dtype)dt));
  if (nd > ENG_MAX_DIMS) nd = ENG_MAX_DIMS;
  snprintf(io->name, sizeof io->name, "%s", w->name);
  io->dt = (dtype)w->dt;
  io->ndims = (int)nd;
  memcpy(io->dims, dims, nd * sizeof *dims);
}

int srv_repeat_cfg_create(const Inference__ModelConfig *c, srv_repeat_cfg **out, err *e) {
  *out = NULL;
  char buf[sizeof e->msg];
  size_t len = 0;
  buf[0] = 0;
  srv_repeat_cfg *p = calloc(1, sizeof *p);
  if (!p) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  if (c->max_batch_size != 0)
    err_join(buf, sizeof buf, &len, "repeat backend only supports models with max_batch_size == 0");
  if (!c->model_transaction_policy || !c->model_transaction_policy->decoupled)
    err_join(
        buf, sizeof buf, &len,
        "the repeat backend answers a request several times: its config needs model_transaction_policy { decoupled: "
        "true }");
  if (c->n_input != 3) err_join(buf, sizeof buf, &len, "expected 3 inputs, got %zu", c->n_input);
  if (c->n_output != 2) err_join(buf, sizeof buf, &len, "expected 2 outputs, got %zu", c->n_output);
  if (c->n_input == 3 && c->n_output == 2) {
    static const want wi[3] = {{"IN", DT_INT32}, {"DELAY", DT_UINT32}, {"WAIT", DT_UINT32}};
    static const want wo[2] = {{"OUT", DT_INT32}, {"IDX", DT_UINT32}};
    for (size_t i = 0; i < 3; i++)
      check_tensor(buf, sizeof buf, &len, "input", i, c->input[i]->name, (int)c->input[i]->data_type,
                   c->input[i]->n_dims, c->input[i]->dims, &wi[i], &p->in[i]);
    for (size_t i = 0; i < 2; i++)
      check_tensor(buf, sizeof buf, &len, "output", i, c->output[i]->name, (int)c->output[i]->data_type,
                   c->output[i]->n_dims, c->output[i]->dims, &wo[i], &p->out[i]);
    const Inference__ModelInput *in = c->input[0], *dl = c->input[1], *wt = c->input[2];
    char a[128], b[128];
    srv_repeat_shape_str(a, sizeof a, in->n_dims, in->dims);
    srv_repeat_shape_str(b, sizeof b, dl->n_dims, dl->dims);
    if (in->n_dims != 1) err_join(buf, sizeof buf, &len, "expected IN shape to have one dimension, got %s", a);
    if (in->n_dims != dl->n_dims || memcmp(in->dims, dl->dims, in->n_dims * sizeof *in->dims) != 0)
      err_join(buf, sizeof buf, &len, "expected IN and DELAY shape to match, got %s and %s", a, b);
    srv_repeat_shape_str(a, sizeof a, wt->n_dims, wt->dims);
    if (wt->n_dims != 1 || wt->dims[0] != 1)
      err_join(buf, sizeof buf, &len, "expected WAIT shape to be [1], got %s", a);
    for (size_t i = 0; i < 2; i++) {
      const Inference__ModelOutput *o = c->output[i];
      srv_repeat_shape_str(a, sizeof a, o->n_dims, o->dims);
      if (o->n_dims != 1 || o->dims[0] != 1)
        err_join(buf, sizeof buf, &len, "expected %s shape to be [1], got %s", i ? "IDX" : "OUT", a);
    }
  }
  if (len) {
    free(p);
    return err_set(e, ERR_INVALID_ARGUMENT, "%s", buf);
  }
  *out = p;
  return 0;
}

void srv_repeat_cfg_destroy(srv_repeat_cfg *p) {
  free(p);
}
