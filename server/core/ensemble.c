// server/core/ensemble.c: one ensemble request's run (ensemble.h). The run
// holds every tensor of the plan (the request's inputs, then each step's
// outputs as they arrive), starts every step whose inputs exist, and ends
// once no step is in flight: answered from the ensemble's outputs, or failed
// with the first step's error.
//
// A step is a ModelInferRequest message built over the run's tensors (not
// packed: no tensor is copied to make it) and handed to ModelInfer's entry
// (srv_infer_msg_handler) with a local call (server/grpc/grpc_front.h) that
// inherits the ensemble request's deadline and cancellation; its answer
// comes back packed to step_done on whichever thread answered it, is
// unpacked without copying its tensors, and its outputs become tensors of
// the run. Starting the next steps there is safe except
// under the lock order.c holds while it sends ordered answers: then the
// start is handed to a reply thread (srv_request_sending_locked).
#include "server/core/ensemble.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/dtype.h"
#include "kernels/base/strwire.h"
#include "server/core/ensemble_plan.h"
#include "server/core/reply.h"
#include "server/core/server.h"
#include "server/grpc/wire.h"
#include "server/obs/log.h"
#include "server/sec/shmguard.h"

static const char MODEL_INFER[] = "/inference.GRPCInferenceService/ModelInfer";

struct ens_run;
struct step_msg;
static void step_msg_free(struct step_msg *q);

typedef struct step_run {
  struct ens_run *run;
  size_t idx;
  int launched;
  struct step_msg *req;  // the step's request (build_step), kept until its answer
  // its answer: the packed bytes, and the message unpacked from them but its
  // tensors, whose raw_output_contents (raw) point into the bytes (unpack_answer)
  uint8_t *answer;
  Inference__ModelInferResponse *resp;
  ProtobufCBinaryData *raw;
} step_run;

typedef struct ens_run {
  srv_server *s;
  srv_request *r;  // the ensemble's request: answered and freed by finish()
  const srv_ens_plan *p;  // the request's generation holds it
  srv_ens_step_fn step_fn;
  // the plan's sizes, for run_free: the plan goes with the request's
  // generation, which may be freed as soon as the request is answered
  size_t n_steps, n_in;
  pthread_mutex_t mu;  // guards what follows
  int refs;            // the steps in flight, plus whoever is starting steps
  int failed;
  int code;
  char msg[ERR_MSG_MAX];
  eng_tensor *t;  // per plan tensor
  int *have;      // per plan tensor: it exists
  void **copies;  // inputs read out of client shared memory (through the SIGBUS guard), one per input
  step_run *steps;
} ens_run;

static void fail(ens_run *run, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

// Under run->mu: the first failure is the answer.
static void fail(ens_run *run, int code, const char *fmt, ...) {
  if (run->failed) return;
  run->failed = 1;
  run->code = code ? code : ERR_INTERNAL;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(run->msg, sizeof run->msg, fmt, ap);
  va_end(ap);
}

// Frees an answer unpack_answer made: protobuf-c must not free the tensors
// it did not allocate.
static void free_answer(Inference__ModelInferResponse *ir, ProtobufCBinaryData *raw) {
  if (ir && raw) {
    ir->n_raw_output_contents = 0;
    ir->raw_output_contents = NULL;
  }
  if (ir) inference__model_infer_response__free_unpacked(ir, NULL);
  free(raw);
}

static void run_free(ens_run *run) {
  for (size_t i = 0; run->steps && i < run->n_steps; i++) {
    step_msg_free(run->steps[i].req);
    free_answer(run->steps[i].resp, run->steps[i].raw);
    free(run->steps[i].answer);
  }
  for (size_t i = 0; run->copies && i < run->n_in; i++) free(run->copies[i]);
  free(run->copies);
  free(run->steps);
  free(run->t);
  free(run->have);
  pthread_mutex_destroy(&run->mu);
  free(run);
}

// No step in flight: the answer, then the run's memory.
static void finish(ens_run *run) {
  const srv_ens_plan *p = run->p;
  eng_tensor outs[64] = {{0}};
  err e = {0};
  int rc = run->failed ? run->code : 0;
  if (rc) err_set(&e, (err_code)rc, "%s", run->msg);
  for (size_t k = 0; rc == 0 && k < p->n_out && k < 64; k++) {
    size_t t = p->out_tensor[k];
    if (!run->have[t] && (run->r->outputs_mask >> k & 1))
      rc = err_set(&e, ERR_INTERNAL, "ensemble '%s': output '%s' was not produced", run->r->model->name, p->out[k].name);
    outs[k] = run->t[t];
  }
  size_t n_out = p->n_out < 64 ? p->n_out : 64;
  // Tensors point into their step's packed answer (unpack_answer), at any
  // offset: classification reads an output's elements as its type, so such
  // an output gets an aligned copy first (packing copies the others' bytes).
  void *aligned[64] = {0};
  for (size_t k = 0; rc == 0 && run->r->class_count && k < n_out; k++) {
    if (!run->r->class_count[k] || (uintptr_t)outs[k].data % 16 == 0) continue;
    if (!(aligned[k] = malloc(outs[k].bytes ? outs[k].bytes : 1))) {
      rc = err_set(&e, ERR_RESOURCE_EXHAUSTED, "out of memory");
      break;
    }
    memcpy(aligned[k], outs[k].data, outs[k].bytes);
    outs[k].data = aligned[k];
  }
  // frees the request, and with it maybe its generation and the plan: p is not read after this
  srv_reply_ensemble(run->s, run->r, rc, &e, outs, n_out);
  for (size_t k = 0; k < n_out; k++) free(aligned[k]);
  run_free(run);
}

static void release(ens_run *run) {
  pthread_mutex_lock(&run->mu);
  int last = --run->refs == 0;
  pthread_mutex_unlock(&run->mu);
  if (last) finish(run);
}

// --- a step's request and answer

// The parameters a step inherits from the ensemble's request (Triton's
// ensemble passes these on): its priority, queue timeout and sequence.
static int inherited(const char *key) {
  return strcmp(key, "priority") == 0 || strcmp(key, "timeout") == 0 || strcmp(key, "sequence_id") == 0 ||
         strcmp(key, "sequence_start") == 0 || strcmp(key, "sequence_end") == 0;
}

// A step's request as a message (srv_infer_msg_handler): names from the
// plan, shapes and bytes the run's tensors' own, so no tensor is copied to
// make it. Freed once the step answered.
typedef struct step_msg {
  Inference__ModelInferRequest m;
  Inference__ModelInferRequest__InferInputTensor *ins, **inp;
  ProtobufCBinaryData *raw;
  Inference__ModelInferRequest__InferRequestedOutputTensor *outs, **outp;
  Inference__ModelInferRequest__ParametersEntry **pe;
} step_msg;

static void step_msg_free(struct step_msg *q) {
  if (!q) return;
  free(q->ins);
  free(q->inp);
  free(q->raw);
  free(q->outs);
  free(q->outp);
  free(q->pe);
  free(q);
}

static step_msg *build_step(ens_run *run, step_run *sr, size_t *bytes) {
  const srv_ens_step *st = &run->p->steps[sr->idx];
  const Inference__ModelInferRequest *pm = run->r->msg;
  size_t n_in = st->n_in, n_out = st->n_out, n_par = pm->n_parameters;
  step_msg *q = calloc(1, sizeof *q);
  if (!q) return NULL;
  q->ins = calloc(n_in ? n_in : 1, sizeof *q->ins);
  q->inp = calloc(n_in ? n_in : 1, sizeof *q->inp);
  q->raw = calloc(n_in ? n_in : 1, sizeof *q->raw);
  q->outs = calloc(n_out ? n_out : 1, sizeof *q->outs);
  q->outp = calloc(n_out ? n_out : 1, sizeof *q->outp);
  q->pe = calloc(n_par ? n_par : 1, sizeof *q->pe);
  if (!q->ins || !q->inp || !q->raw || !q->outs || !q->outp || !q->pe) {
    step_msg_free(q);
    return NULL;
  }
  Inference__ModelInferRequest *m = &q->m;
  inference__model_infer_request__init(m);
  m->model_name = st->model;
  m->model_version = (char *)st->version;
  m->id = pm->id;
  for (size_t i = 0; i < n_par; i++)
    if (pm->parameters[i]->key && inherited(pm->parameters[i]->key)) q->pe[m->n_parameters++] = pm->parameters[i];
  m->parameters = q->pe;
  *bytes = 0;
  for (size_t k = 0; k < n_in; k++) {
    eng_tensor *t = &run->t[st->in[k].tensor];
    inference__model_infer_request__infer_input_tensor__init(&q->ins[k]);
    q->ins[k].name = st->in[k].name;
    q->ins[k].datatype = (char *)dtype_wire_name(t->dt);
    q->ins[k].n_shape = (size_t)t->ndims;
    q->ins[k].shape = t->dims;
    q->inp[k] = &q->ins[k];
    q->raw[k] = (ProtobufCBinaryData){.len = t->bytes, .data = t->data};
    *bytes += t->bytes;
  }
  m->n_inputs = n_in;
  m->inputs = q->inp;
  m->n_raw_input_contents = n_in;
  m->raw_input_contents = q->raw;
  for (size_t k = 0; k < n_out; k++) {
    inference__model_infer_request__infer_requested_output_tensor__init(&q->outs[k]);
    q->outs[k].name = st->out[k].name;
    q->outp[k] = &q->outs[k];
  }
  m->n_outputs = n_out;
  m->outputs = q->outp;
  return q;
}

// A step's answered outputs as tensors of the run (under run->mu); nonzero
// with the run failed when the answer lacks one or does not hold together.
static int take_outputs(ens_run *run, step_run *sr, Inference__ModelInferResponse *ir) {
  const srv_ens_step *st = &run->p->steps[sr->idx];
  const char *ens = run->r->model->name;
  for (size_t k = 0; k < st->n_out; k++) {
    size_t j = 0;
    while (j < ir->n_outputs && strcmp(ir->outputs[j]->name, st->out[k].name) != 0) j++;
    if (j == ir->n_outputs || j >= ir->n_raw_output_contents) {
      fail(run, ERR_INTERNAL, "in ensemble '%s', step %zu (model '%s'): its answer lacks output '%s'", ens, sr->idx,
           st->model, st->out[k].name);
      return -1;
    }
    const Inference__ModelInferResponse__InferOutputTensor *o = ir->outputs[j];
    eng_tensor *t = &run->t[st->out[k].tensor];
    t->dt = dtype_from_wire(o->datatype);
    t->data = ir->raw_output_contents[j].data;
    t->bytes = ir->raw_output_contents[j].len;
    int ok = t->dt != DT_INVALID && o->n_shape <= ENG_MAX_DIMS;
    t->ndims = ok ? (int)o->n_shape : 0;
    if (ok && o->n_shape) memcpy(t->dims, o->shape, o->n_shape * sizeof *o->shape);  // rank 0: shape NULL
    int64_t numel = ok ? eng_numel(t->ndims, t->dims) : 0;
    if (ok && t->dt != DT_STRING) ok = (uint64_t)numel * dtype_size(t->dt) == t->bytes;
    if (ok && t->dt == DT_STRING) {
      const char *why;
      uint64_t at;
      ok = strwire_check(t->data, t->bytes, (uint64_t)numel, &why, &at) == 0;
    }
    if (!ok) {
      fail(run, ERR_INTERNAL, "in ensemble '%s', step %zu (model '%s'): output '%s' came back malformed", ens, sr->idx,
           st->model, st->out[k].name);
      return -1;
    }
    run->have[st->out[k].tensor] = 1;
  }
  return 0;
}

static void pump(ens_run *run);

// A deferred pump, on a reply thread (replyq.h) or a thread of its own.
typedef struct pump_item {
  srv_replyq_item it;  // first: the queue's
  ens_run *run;
} pump_item;

static void pump_deferred(srv_replyq_item *it) {
  ens_run *run = ((pump_item *)it)->run;
  free(it);
  pump(run);
  release(run);
}

static void *pump_thread(void *arg) {
  pump_deferred(arg);
  return NULL;
}

// Starts the next steps on another thread: this one sends answers under a
// lock (order.c) that starting a request here would take the scheduler's
// lock against. The run stays alive through a reference the pump drops.
static void pump_elsewhere(ens_run *run) {
  pump_item *pi = calloc(1, sizeof *pi);
  pthread_mutex_lock(&run->mu);
  run->refs++;
  pthread_mutex_unlock(&run->mu);
  if (pi) {
    pi->run = run;
    pi->it.fn = pump_deferred;
    if (srv_replyq_post(run->s->replyq, &pi->it) == 0) return;
    pthread_t th;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    int started = pthread_create(&th, &at, pump_thread, pi) == 0;
    pthread_attr_destroy(&at);
    if (started) return;
    free(pi);
  }
  pthread_mutex_lock(&run->mu);
  fail(run, ERR_UNAVAILABLE, "ensemble '%s': cannot start its next step (out of threads or memory)",
       run->r->model->name);
  pthread_mutex_unlock(&run->mu);
  release(run);
}

// A step's answer unpacked without copying its tensors, as infer.c's
// unpack_request does for requests: the fields but raw_output_contents go
// through protobuf-c, and raw_output_contents (*raw, malloc'd) point into
// resp, which the step keeps. An answer the scan cannot follow is unpacked
// whole (*raw NULL: protobuf-c owns its copies).
enum { RAW_OUTPUT_FIELD = 6 };  // ModelInferResponse.raw_output_contents (proto/grpc_service.proto)

static Inference__ModelInferResponse *unpack_answer(const uint8_t *resp, size_t len, ProtobufCBinaryData **raw) {
  size_t n_raw = 0, rest_len = 0, pos = 0;
  srv_wire_field f;
  *raw = NULL;
  while (pos < len) {
    if (srv_wire_next(resp, len, &pos, &f)) return inference__model_infer_response__unpack(NULL, len, resp);
    if (f.number == RAW_OUTPUT_FIELD && f.type == 2) n_raw++;
    else rest_len += f.end - f.start;
  }
  if (n_raw == 0) return inference__model_infer_response__unpack(NULL, len, resp);
  uint8_t *rest = malloc(rest_len ? rest_len : 1);
  ProtobufCBinaryData *r = malloc(n_raw * sizeof *r);
  if (!rest || !r) {
    free(rest);
    free(r);
    return NULL;
  }
  size_t o = 0, k = 0;
  for (pos = 0; pos < len;) {
    srv_wire_next(resp, len, &pos, &f);  // the same bytes scanned above
    if (f.number == RAW_OUTPUT_FIELD && f.type == 2) {
      r[k++] = (ProtobufCBinaryData){.len = f.n, .data = (uint8_t *)resp + f.data};
    } else {
      memcpy(rest + o, resp + f.start, f.end - f.start);
      o += f.end - f.start;
    }
  }
  Inference__ModelInferResponse *ir = inference__model_infer_response__unpack(NULL, rest_len, rest);
  free(rest);
  if (!ir) {
    free(r);
    return NULL;
  }
  free(ir->raw_output_contents);  // none: every entry was taken out above
  ir->n_raw_output_contents = n_raw;
  ir->raw_output_contents = r;
  *raw = r;
  return ir;
}

static void step_done(void *arg, uint8_t *resp, size_t len, int code, const char *msg) {
  step_run *sr = arg;
  ens_run *run = sr->run;
  const srv_ens_step *st = &run->p->steps[sr->idx];
  ProtobufCBinaryData *raw = NULL;
  Inference__ModelInferResponse *ir = resp ? unpack_answer(resp, len, &raw) : NULL;
  pthread_mutex_lock(&run->mu);
  if (!resp)
    fail(run, code, "in ensemble '%s', step %zu (model '%s') failed: %s", run->r->model->name, sr->idx, st->model,
         msg ? msg : "");
  else if (!ir)
    fail(run, ERR_INTERNAL, "in ensemble '%s', step %zu (model '%s'): its answer does not parse", run->r->model->name,
         sr->idx, st->model);
  else if (!run->failed && take_outputs(run, sr, ir) == 0) {
    sr->resp = ir, sr->raw = raw, sr->answer = resp;  // the run's tensors point into them
    ir = NULL, raw = NULL, resp = NULL;
  }
  int go_on = !run->failed;
  pthread_mutex_unlock(&run->mu);
  free_answer(ir, raw);
  free(resp);
  if (go_on) {
    if (srv_request_sending_locked()) pump_elsewhere(run);
    else pump(run);
  }
  release(run);
}

// Starts every step whose inputs exist and that has not started, one at a
// time (a step may answer, and pump, before its handler returns here).
static void pump(ens_run *run) {
  const srv_ens_plan *p = run->p;
  for (;;) {
    step_run *sr = NULL;
    pthread_mutex_lock(&run->mu);
    for (size_t s = 0; !run->failed && !sr && s < p->n_steps; s++) {
      if (run->steps[s].launched) continue;
      int ready = 1;
      for (size_t k = 0; ready && k < p->steps[s].n_in; k++) ready = run->have[p->steps[s].in[k].tensor];
      if (ready) sr = &run->steps[s];
    }
    // a client that went away (or whose deadline passed) gets no further step started for it
    const srv_request *r = run->r;
    if (sr && (r->call || r->stream) && (srv_request_cancelled(r) || eng_now_us() >= r->item.deadline_us)) {
      int expired = eng_now_us() >= r->item.deadline_us;
      fail(run, expired ? ERR_DEADLINE_EXCEEDED : ERR_CANCELLED,
           "in ensemble '%s': the request %s before step %zu (model '%s') could start", r->model->name,
           expired ? "reached its deadline" : "was cancelled", sr->idx, p->steps[sr->idx].model);
      sr = NULL;
    }
    if (sr) {
      sr->launched = 1;
      run->refs++;
    }
    pthread_mutex_unlock(&run->mu);
    if (!sr) return;
    size_t bytes = 0;
    srv_call *c = NULL;
    if ((sr->req = build_step(run, sr, &bytes))) c = srv_call_create_local(MODEL_INFER, step_done, sr);
    if (!c) {
      step_done(sr, NULL, 0, ERR_RESOURCE_EXHAUSTED, "out of memory");
      continue;
    }
    srv_call_local_inherit(c, run->r->call, run->r->stream, run->r->item.deadline_us);
    run->step_fn(run->s, c, &sr->req->m, bytes);
  }
}

// --- the entry

void srv_ensemble_run(srv_server *s, srv_request *r, srv_ens_step_fn step_fn) {
  const srv_ens_plan *p = r->version->ens;
  ens_run *run = calloc(1, sizeof *run);
  if (run) {
    run->s = s;
    run->r = r;
    run->p = p;
    run->step_fn = step_fn;
    run->n_steps = p->n_steps;
    run->n_in = p->n_in;
    run->refs = 1;  // this thread's, while it starts the first steps
    pthread_mutex_init(&run->mu, NULL);
    run->t = calloc(p->n_tensors ? p->n_tensors : 1, sizeof *run->t);
    run->have = calloc(p->n_tensors ? p->n_tensors : 1, sizeof *run->have);
    run->copies = calloc(p->n_in ? p->n_in : 1, sizeof *run->copies);
    run->steps = calloc(p->n_steps ? p->n_steps : 1, sizeof *run->steps);
  }
  if (!run || !run->t || !run->have || !run->copies || !run->steps) {
    err e;
    err_set(&e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    srv_reply_ensemble(s, r, ERR_RESOURCE_EXHAUSTED, &e, NULL, 0);
    if (run) run_free(run);
    return;
  }
  for (size_t i = 0; i < p->n_steps; i++) run->steps[i] = (step_run){.run = run, .idx = i};
  // the ensemble's inputs are the first tensors; one read from a system
  // region is copied out through the SIGBUS guard first, as a batch's
  // gather does (the client may shrink its object under it)
  for (size_t i = 0; i < p->n_in; i++) {
    run->t[i] = r->inputs[i];
    run->have[i] = 1;
    if (!r->shm_in || !r->shm_in[i]) continue;
    void *copy = malloc(run->t[i].bytes ? run->t[i].bytes : 1);
    if (!copy || srv_shmguard_read(copy, run->t[i].data, run->t[i].bytes) != 0) {
      free(copy);
      pthread_mutex_lock(&run->mu);
      if (copy) fail(run, ERR_INVALID_ARGUMENT, "input '%s': shared memory region '%s' shrank below its registered size",
                     p->in[i].name, r->shm_in[i]);
      else fail(run, ERR_RESOURCE_EXHAUSTED, "out of memory");
      pthread_mutex_unlock(&run->mu);
      break;
    }
    run->copies[i] = copy;
    run->t[i].data = copy;
  }
  pump(run);
  release(run);
}
