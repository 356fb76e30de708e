// server/core/ensemble_plan.c: an ensemble's config checked against its
// composing models and turned into a dataflow plan (ensemble_plan.h). Every
// problem found is reported in one message, as a model that fails to load
// must say all its reasons at once.
#include "server/core/ensemble_plan.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/dtype.h"

int srv_ens_is_ensemble(const Inference__ModelConfig *cfg) {
  return cfg && cfg->platform && strcmp(cfg->platform, "ensemble") == 0;
}

// --- the list of reasons

typedef struct why_list {
  char buf[SRV_ENS_WHY_MAX];
  size_t len;
  int n;            // reasons found
  int n_unready;    // of them, members not ready (the load may succeed later)
} why_list;

static void why(why_list *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void why(why_list *w, const char *fmt, ...) {
  w->n++;
  va_list ap;
  va_start(ap, fmt);
  err_vjoin(w->buf, sizeof w->buf, &w->len, fmt, ap);
  va_end(ap);
}

// --- shapes

static const char *dt_name(int dt) { return dtype_config_name((dtype)dt); }

// The shape a client sees: [-1] + dims when the model batches.
static size_t full_shape(int mbs, size_t n_dims, const int64_t *dims, int64_t *out) {
  size_t n = 0;
  if (mbs > 0) out[n++] = -1;
  for (size_t i = 0; i < n_dims && n < ENG_MAX_DIMS + 1; i++) out[n++] = dims[i];
  return n;
}

static int shapes_match(const int64_t *a, size_t na, const int64_t *b, size_t nb) {
  if (na != nb) return 0;
  for (size_t i = 0; i < na; i++)
    if (a[i] != -1 && b[i] != -1 && a[i] != b[i]) return 0;
  return 1;
}

static void fmt_shape(char *buf, size_t cap, const int64_t *d, size_t n) {
  size_t o = (size_t)snprintf(buf, cap, "[");
  for (size_t i = 0; i < n && o < cap; i++) o += (size_t)snprintf(buf + o, cap - o, "%s%" PRId64, i ? "," : "", d[i]);
  if (o < cap) snprintf(buf + o, cap - o, "]");
}

// What is known of a tensor of the dataflow: its type and client-side shape
// (batch dimension included when its model batches), from whoever declared
// it first (the ensemble's input, or its producer's output).
typedef struct tinfo {
  int known;
  int dt;
  int64_t shape[ENG_MAX_DIMS + 1];
  size_t n;
  char who[300];  // "ensemble input 'x'" or "output 'y' of model 'm'", for messages
  int producer;   // step index; -1: an ensemble input; -2: nothing produces it
  int consumed;
} tinfo;

static const Inference__ModelInput *find_in(const Inference__ModelConfig *c, const char *name) {
  for (size_t i = 0; c && i < c->n_input; i++)
    if (strcmp(c->input[i]->name, name) == 0) return c->input[i];
  return NULL;
}

static const Inference__ModelOutput *find_out(const Inference__ModelConfig *c, const char *name) {
  for (size_t i = 0; c && i < c->n_output; i++)
    if (strcmp(c->output[i]->name, name) == 0) return c->output[i];
  return NULL;
}

// Checks a consumer's or the ensemble output's type and shape against what
// the tensor is known to be.
static void check_compat(why_list *w, const tinfo *t, const char *tensor, const char *user, int dt, size_t n_dims,
                         const int64_t *dims, int mbs) {
  if (!t->known) return;
  int64_t s[ENG_MAX_DIMS + 1];
  size_t n = full_shape(mbs, n_dims, dims, s);
  if (dt != t->dt)
    why(w, "tensor '%s': %s is %s but %s takes %s", tensor, t->who, dt_name(t->dt), user, dt_name(dt));
  else if (!shapes_match(t->shape, t->n, s, n)) {
    char a[160], b[160];
    fmt_shape(a, sizeof a, t->shape, t->n);
    fmt_shape(b, sizeof b, s, n);
    why(w, "tensor '%s': %s has shape %s but %s takes shape %s", tensor, t->who, a, user, b);
  }
}

// --- building

static long find_tensor(char **names, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(names[i], name) == 0) return (long)i;
  return -1;
}

static int add_tensor(srv_ens_plan *p, size_t *cap, const char *name, size_t *idx) {
  long f = find_tensor(p->tensors, p->n_tensors, name);
  if (f >= 0) {
    *idx = (size_t)f;
    return 0;
  }
  if (p->n_tensors == *cap) {
    size_t nc = *cap ? 2 * *cap : 16;
    char **g = realloc(p->tensors, nc * sizeof *g);
    if (!g) return -1;
    p->tensors = g;
    *cap = nc;
  }
  if (!(p->tensors[p->n_tensors] = strdup(name))) return -1;
  *idx = p->n_tensors++;
  return 0;
}

static int io_from_config(eng_io *io, const char *name, int dt, size_t n_dims, const int64_t *dims) {
  snprintf(io->name, sizeof io->name, "%s", name);
  io->dt = (dtype)dt;
  io->ndims = (int)n_dims;
  memcpy(io->dims, dims, n_dims * sizeof *dims);
  return 0;
}

// The ensemble's own inputs and outputs: named, typed, dims sane.
static void check_own_io(why_list *w, const Inference__ModelConfig *c) {
  if (c->max_batch_size < 0) why(w, "max_batch_size %d must be >= 0", c->max_batch_size);
  if (!c->n_input) why(w, "an ensemble must list its inputs");
  if (!c->n_output) why(w, "an ensemble must list its outputs");
  for (int side = 0; side < 2; side++) {
    size_t n = side ? c->n_output : c->n_input;
    for (size_t i = 0; i < n; i++) {
      const char *kind = side ? "output" : "input";
      const char *name = side ? c->output[i]->name : c->input[i]->name;
      int dt = side ? (int)c->output[i]->data_type : (int)c->input[i]->data_type;
      size_t nd = side ? c->output[i]->n_dims : c->input[i]->n_dims;
      const int64_t *dims = side ? c->output[i]->dims : c->input[i]->dims;
      const void *reshape = side ? (const void *)c->output[i]->reshape : (const void *)c->input[i]->reshape;
      if (!name || !name[0] || strlen(name) >= ENG_NAME_MAX) {
        why(w, "ensemble %s %zu: a name of 1 to %d bytes is required", kind, i, ENG_NAME_MAX - 1);
        continue;
      }
      for (size_t k = 0; k < i; k++)
        if (strcmp(side ? c->output[k]->name : c->input[k]->name, name) == 0) why(w, "ensemble %s '%s' is listed twice", kind, name);
      if (dt <= INFERENCE__DATA_TYPE__TYPE_INVALID || dt > INFERENCE__DATA_TYPE__TYPE_BF16)
        why(w, "ensemble %s '%s': data_type is missing or unknown", kind, name);
      if (nd > ENG_MAX_DIMS) why(w, "ensemble %s '%s': %zu dims, at most %d", kind, name, nd, ENG_MAX_DIMS);
      for (size_t d = 0; d < nd && d < ENG_MAX_DIMS; d++)
        if (dims[d] == 0 || dims[d] < -1) why(w, "ensemble %s '%s': dims must be -1 or positive", kind, name);
      if (reshape) why(w, "ensemble %s '%s': reshape is not supported on an ensemble's tensors", kind, name);
    }
  }
  for (size_t i = 0; i < c->n_input; i++)
    if (c->input[i]->name && find_out(c, c->input[i]->name))
      why(w, "'%s' is both an input and an output of the ensemble", c->input[i]->name);
}

// Steps that can never run because their inputs depend on each other: the
// steps left once every step whose inputs exist has run (Kahn's order).
static void check_cycles(why_list *w, const srv_ens_plan *p, const tinfo *ti) {
  int *ran = calloc(p->n_steps ? p->n_steps : 1, sizeof *ran);
  int *have = calloc(p->n_tensors ? p->n_tensors : 1, sizeof *have);
  if (!ran || !have) {
    free(ran);
    free(have);
    return;
  }
  for (size_t t = 0; t < p->n_tensors; t++) have[t] = ti[t].producer == -1;
  for (int progress = 1; progress;) {
    progress = 0;
    for (size_t s = 0; s < p->n_steps; s++) {
      if (ran[s]) continue;
      int ready = 1;
      for (size_t k = 0; k < p->steps[s].n_in && ready; k++) ready = have[p->steps[s].in[k].tensor];
      if (!ready) continue;
      ran[s] = progress = 1;
      for (size_t k = 0; k < p->steps[s].n_out; k++) have[p->steps[s].out[k].tensor] = 1;
    }
  }
  char list[300] = "";
  size_t o = 0, n = 0;
  for (size_t s = 0; s < p->n_steps; s++) {
    if (ran[s]) continue;
    // a step waiting on a tensor that nothing produces is reported as that, not as a cycle
    int orphan = 0;
    for (size_t k = 0; k < p->steps[s].n_in; k++) orphan |= ti[p->steps[s].in[k].tensor].producer == -2;
    if (orphan) continue;
    n++;
    if (o < sizeof list)
      o += (size_t)snprintf(list + o, sizeof list - o, "%s%zu ('%s')", o ? ", " : "", s, p->steps[s].model);
  }
  if (n) why(w, "steps %s depend on each other's outputs (a cycle): none of them can run", list);
  free(ran);
  free(have);
}

int srv_ens_plan_create(const Inference__ModelConfig *cfg, const srv_ens_member *members, srv_ens_plan **out,
                        char *all, size_t all_cap, err *e) {
  *out = NULL;
  why_list w = {.len = 0};
  const Inference__ModelEnsembling *es = cfg->ensemble_scheduling;
  size_t n_steps = es ? es->n_step : 0;
  srv_ens_plan *p = calloc(1, sizeof *p);
  size_t cap = 0;
  tinfo *ti = NULL;
  if (!p) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  p->max_batch = cfg->max_batch_size;
  p->n_in = cfg->n_input;
  p->n_out = cfg->n_output;
  p->in = calloc(p->n_in ? p->n_in : 1, sizeof *p->in);
  p->out = calloc(p->n_out ? p->n_out : 1, sizeof *p->out);
  p->out_tensor = calloc(p->n_out ? p->n_out : 1, sizeof *p->out_tensor);
  p->steps = calloc(n_steps ? n_steps : 1, sizeof *p->steps);
  if (!p->in || !p->out || !p->out_tensor || !p->steps) goto oom;
  p->n_steps = n_steps;
  if (!es || !n_steps) why(&w, "ensemble_scheduling lists no steps");
  check_own_io(&w, cfg);
  if (w.n) goto done;  // the rest reads names and dims checked above
  // as Triton: an ensemble runs no instances of its own and warms nothing up
  if (cfg->n_instance_group) why(&w, "instance_group cannot be given for an ensemble (its steps' models have theirs)");
  if (cfg->optimization) why(&w, "optimization cannot be given for an ensemble");
  if (cfg->n_model_warmup) why(&w, "model_warmup cannot be given for an ensemble");

  for (size_t i = 0; i < cfg->n_input; i++) {
    size_t idx;
    if (add_tensor(p, &cap, cfg->input[i]->name, &idx)) goto oom;
    io_from_config(&p->in[i], cfg->input[i]->name, cfg->input[i]->data_type, cfg->input[i]->n_dims, cfg->input[i]->dims);
  }
  for (size_t i = 0; i < cfg->n_output; i++)
    io_from_config(&p->out[i], cfg->output[i]->name, cfg->output[i]->data_type, cfg->output[i]->n_dims,
                   cfg->output[i]->dims);
  // the steps' tensors, each step's maps in config order
  for (size_t s = 0; s < n_steps; s++) {
    const Inference__ModelEnsembling__Step *st = es->step[s];
    srv_ens_step *ps = &p->steps[s];
    if (!(ps->model = strdup(st->model_name ? st->model_name : ""))) goto oom;
    if (st->model_version >= 0) snprintf(ps->version, sizeof ps->version, "%" PRId64, st->model_version);
    ps->in = calloc(st->n_input_map ? st->n_input_map : 1, sizeof *ps->in);
    ps->out = calloc(st->n_output_map ? st->n_output_map : 1, sizeof *ps->out);
    if (!ps->in || !ps->out) goto oom;
    for (size_t k = 0; k < st->n_input_map; k++, ps->n_in++) {
      if (!(ps->in[k].name = strdup(st->input_map[k]->key))) goto oom;
      if (add_tensor(p, &cap, st->input_map[k]->value, &ps->in[k].tensor)) goto oom;
    }
    for (size_t k = 0; k < st->n_output_map; k++, ps->n_out++) {
      if (!(ps->out[k].name = strdup(st->output_map[k]->key))) goto oom;
      if (add_tensor(p, &cap, st->output_map[k]->value, &ps->out[k].tensor)) goto oom;
    }
  }
  ti = calloc(p->n_tensors ? p->n_tensors : 1, sizeof *ti);
  if (!ti) goto oom;
  for (size_t t = 0; t < p->n_tensors; t++) ti[t].producer = -2;
  for (size_t i = 0; i < cfg->n_input; i++) {
    tinfo *t = &ti[i];
    t->producer = -1;
    t->known = 1;
    t->dt = cfg->input[i]->data_type;
    t->n = full_shape(cfg->max_batch_size, cfg->input[i]->n_dims, cfg->input[i]->dims, t->shape);
    snprintf(t->who, sizeof t->who, "ensemble input '%s'", cfg->input[i]->name);
  }

  // producers first (so a consumer in an earlier step is checked too)
  int mbs_over = 0;
  char mbs_list[200] = "";
  for (size_t s = 0; s < n_steps; s++) {
    const Inference__ModelEnsembling__Step *st = es->step[s];
    const Inference__ModelConfig *mc = members[s].cfg;
    const char *mname = p->steps[s].model;
    if (!st->n_input_map) why(&w, "step %zu: input_map is empty", s);
    if (!st->n_output_map) why(&w, "step %zu: output_map is empty", s);
    if (!mname[0]) {
      why(&w, "step %zu names no model (model_name is required)", s);
      continue;
    }
    if (cfg->name && strcmp(mname, cfg->name) == 0) {
      why(&w, "step %zu: the ensemble cannot be its own step", s);
      continue;
    }
    if (!mc) {
      why(&w, "step %zu: composing model '%s' is not available: %s", s, mname,
          members[s].why && members[s].why[0] ? members[s].why : "not loaded");
      w.n_unready++;
    }
    char quoted[160];
    snprintf(quoted, sizeof quoted, "'%s' ", mname);
    if (mc && cfg->max_batch_size > 0 && mc->max_batch_size < cfg->max_batch_size &&
        !strstr(mbs_list, quoted)) {  // each member once
      size_t o = strlen(mbs_list);
      snprintf(mbs_list + o, sizeof mbs_list - o, "%s%s%d", mbs_over++ ? ", " : "", quoted, mc->max_batch_size);
    }
    for (size_t k = 0; k < st->n_output_map; k++) {
      const char *key = st->output_map[k]->key, *val = st->output_map[k]->value;
      size_t t = p->steps[s].out[k].tensor;
      const Inference__ModelOutput *mo = mc ? find_out(mc, key) : NULL;
      if (mc && !mo) why(&w, "step %zu: output_map key '%s' is not an output of model '%s'", s, key, mname);
      if (ti[t].producer == -1) {
        why(&w, "tensor '%s' is an ensemble input and also output '%s' of model '%s' (step %zu)", val, key, mname, s);
        continue;
      }
      if (ti[t].producer >= 0) {
        why(&w, "tensor '%s' is produced twice: by step %d ('%s') and by step %zu ('%s')", val, ti[t].producer,
            p->steps[ti[t].producer].model, s, mname);
        continue;
      }
      ti[t].producer = (int)s;  // a member not ready still produces it: its type is unknown
      if (!mo) continue;
      ti[t].known = 1;
      ti[t].dt = mo->data_type;
      ti[t].n = full_shape(mc->max_batch_size, mo->n_dims, mo->dims, ti[t].shape);
      snprintf(ti[t].who, sizeof ti[t].who, "output '%s' of model '%s'", key, mname);
    }
  }
  if (mbs_over)
    why(&w, "the ensemble's max_batch_size %d exceeds its composing %s (%s): a request's batch must fit every step",
        cfg->max_batch_size, mbs_over > 1 ? "models'" : "model's", mbs_list);
  // consumers
  for (size_t s = 0; s < n_steps; s++) {
    const Inference__ModelEnsembling__Step *st = es->step[s];
    const Inference__ModelConfig *mc = members[s].cfg;
    const char *mname = p->steps[s].model;
    for (size_t k = 0; k < st->n_input_map; k++) {
      const char *key = st->input_map[k]->key, *val = st->input_map[k]->value;
      size_t t = p->steps[s].in[k].tensor;
      ti[t].consumed = 1;
      for (size_t j = 0; j < k; j++)
        if (strcmp(st->input_map[j]->key, key) == 0) why(&w, "step %zu: input '%s' of model '%s' is mapped twice", s, key, mname);
      if (ti[t].producer == -2)
        why(&w, "tensor '%s' (input '%s' of step %zu, model '%s') is neither an ensemble input nor any step's output",
            val, key, s, mname[0] ? mname : "?");
      if (!mc) continue;
      const Inference__ModelInput *mi = find_in(mc, key);
      if (!mi) {
        why(&w, "step %zu: input_map key '%s' is not an input of model '%s'", s, key, mname);
        continue;
      }
      char user[300];
      snprintf(user, sizeof user, "input '%s' of model '%s' (step %zu)", key, mname, s);
      check_compat(&w, &ti[t], val, user, mi->data_type, mi->n_dims, mi->dims, mc->max_batch_size);
    }
    for (size_t i = 0; mc && i < mc->n_input; i++) {
      int mapped = 0;
      for (size_t k = 0; k < st->n_input_map && !mapped; k++) mapped = strcmp(st->input_map[k]->key, mc->input[i]->name) == 0;
      if (!mapped && !mc->input[i]->optional)
        why(&w, "step %zu: input '%s' of model '%s' is not mapped (input_map)", s, mc->input[i]->name, mname);
    }
  }
  for (size_t i = 0; i < cfg->n_input; i++)
    if (!ti[i].consumed) why(&w, "ensemble input '%s' is not consumed by any step", cfg->input[i]->name);
  for (size_t i = 0; i < cfg->n_output; i++) {
    const Inference__ModelOutput *o = cfg->output[i];
    long t = find_tensor(p->tensors, p->n_tensors, o->name);
    if (t < 0 || ti[t].producer < 0) {
      why(&w, "ensemble output '%s' is not produced by any step", o->name);
      continue;
    }
    p->out_tensor[i] = (size_t)t;
    char user[300];
    snprintf(user, sizeof user, "ensemble output '%s'", o->name);
    check_compat(&w, &ti[t], o->name, user, o->data_type, o->n_dims, o->dims, cfg->max_batch_size);
  }
  // a step output nothing takes, as Triton refuses it (a mistyped name, most often)
  for (size_t t = cfg->n_input; t < p->n_tensors; t++) {
    int is_out = 0;
    for (size_t i = 0; i < cfg->n_output && !is_out; i++) is_out = strcmp(cfg->output[i]->name, p->tensors[t]) == 0;
    if (ti[t].producer >= 0 && !ti[t].consumed && !is_out)
      why(&w, "tensor '%s' (from step %d, model '%s') is used by no step and is not an ensemble output", p->tensors[t],
          ti[t].producer, p->steps[ti[t].producer].model);
  }
  check_cycles(&w, p, ti);

done:
  free(ti);
  if (w.n) {
    srv_ens_plan_destroy(p);
    if (all) snprintf(all, all_cap, "%s", w.buf);
    // only members not ready: the same files may load once they are
    err_code code = w.n == w.n_unready ? ERR_UNAVAILABLE : ERR_INVALID_ARGUMENT;
    if (w.len < ERR_MSG_MAX) return err_set(e, code, "%s", w.buf);
    // the whole list does not fit an error: as many whole reasons as do, and where the rest is
    size_t cut = ERR_MSG_MAX - 64, n_shown = 0;
    while (cut > 0 && strncmp(w.buf + cut, "; ", 2) != 0) cut--;
    for (size_t i = 0; i + 1 < cut; i++) n_shown += strncmp(w.buf + i, "; ", 2) == 0;
    return err_set(e, code, "%.*s; and %d more reason(s) (the server log lists them all)", (int)cut, w.buf,
                   w.n - (int)n_shown - 1);
  }
  *out = p;
  return 0;
oom:
  free(ti);
  srv_ens_plan_destroy(p);
  return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
}

void srv_ens_plan_destroy(srv_ens_plan *p) {
  if (!p) return;
  for (size_t s = 0; s < p->n_steps; s++) {
    srv_ens_step *st = &p->steps[s];
    for (size_t k = 0; k < st->n_in; k++) free(st->in[k].name);
    for (size_t k = 0; k < st->n_out; k++) free(st->out[k].name);
    free(st->in);
    free(st->out);
    free(st->model);
  }
  free(p->steps);
  for (size_t t = 0; t < p->n_tensors; t++) free(p->tensors[t]);
  free(p->tensors);
  free(p->in);
  free(p->out);
  free(p->out_tensor);
  free(p);
}
