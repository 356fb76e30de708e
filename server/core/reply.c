// server/core/reply.c: ModelInfer's answers. On the instance thread that ran
// a batch: each request's slice of the outputs packed into its answer (cut
// back from the batch's padding, written to client shared memory where
// asked), the statistics and traces accounted, and the answers sent: here,
// by the reply queue's threads (replyq.h) for larger batches, or in request
// order through server/core/order.c when the model preserves ordering. Also
// the answers of requests that never ran: dropped by the scheduler, or
// rejected before it. Each request is freed once its answer is sent
// (request.c).
#include "server/core/reply.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/strwire.h"
#include "server/core/classify.h"
#include "server/core/copypool.h"
#include "server/core/order.h"
#include "server/core/request.h"
#include "server/core/server.h"
#include "server/obs/log.h"
#include "server/sec/shmguard.h"

// --- statistics of failed requests

static void record_failure(srv_version *v, srv_fail_reason why, int64_t t_recv_us) {
  if (!v) return;
  srv_stats *st = &v->stats;
  atomic_fetch_add(&st->fail.count, 1);
  atomic_fetch_add(&st->fail.ns, (uint64_t)(eng_now_us() - t_recv_us) * 1000);
  atomic_fetch_add(&st->fail_by_reason[why], 1);
}

static srv_fail_reason reason_of(int code) {
  switch (code) {
    case ERR_CANCELLED:
    case ERR_DEADLINE_EXCEEDED: return SRV_FAIL_CANCELED;
    case ERR_INTERNAL: return SRV_FAIL_BACKEND;
    case ERR_INVALID_ARGUMENT:
    case ERR_RESOURCE_EXHAUSTED:
    case ERR_UNAVAILABLE: return SRV_FAIL_REJECTED;
    default: return SRV_FAIL_OTHER;
  }
}

// --- packing a request's slice of the batch outputs

// pad_to_longest: the dims of a request's slice `have` (batch dim first) of
// config output k cut from the batch's padded length back to its own: every
// variable dim whose extent is the padded length. 0 when nothing changes.
static int crop_dims(const srv_request *r, const eng_pad *pad, size_t k, int nd, const int64_t *have, int64_t *want) {
  int cut = 0;
  for (int d = 0; d < nd; d++) {
    want[d] = have[d];
    if (d > 0 && d < 32 && (pad->out_var[k] >> d & 1) && have[d] == r->padded_len) {
      want[d] = r->item.seq_len;
      cut = 1;
    }
  }
  return cut;
}

// The answer to a request whose guarded copy from or into system shared
// memory faulted: the client shrank its object below the registered size.
static int shm_fault(const srv_request *r, const char *what, err *e) {
  return err_set(e, ERR_INVALID_ARGUMENT,
                 "%s '%s': shared memory region '%s' shrank below its registered size (its object was truncated)",
                 what, r->shm_fault_tensor, r->shm_fault_region);
}

static int pack_reply(srv_request *r, const eng_tensor *outputs, size_t n_outputs, int64_t row_off, uint8_t **out,
                      size_t *out_len, err *e) {
  const Inference__ModelInferRequest *msg = r->msg;
  const srv_version *v = r->version;  // an engine's, or an ensemble's (its config's tensors)
  Inference__ModelInferResponse resp = INFERENCE__MODEL_INFER_RESPONSE__INIT;
  resp.model_name = r->model->name;
  resp.model_version = r->version->version_str;
  resp.id = msg->id;
  Inference__ModelInferResponse__InferOutputTensor ots[64], *otp[64];
  ProtobufCBinaryData raws[64];
  int64_t shapes[64][ENG_MAX_DIMS];
  uint8_t *crops[128];  // cropped copies and classification strings (one of each per output), freed once packed
  size_t n = 0, n_crops = 0;
  int rc = 0;
  int batched = srv_version_max_batch(v) > 0;
  const eng_pad *pad = batched && v->model && r->padded_len != r->item.seq_len ? eng_model_pad(v->model) : NULL;
  for (size_t k = 0; k < n_outputs && k < 64; k++) {
    if (!(r->outputs_mask >> k & 1)) continue;
    const eng_tensor *t = &outputs[k];
    inference__model_infer_response__infer_output_tensor__init(&ots[n]);
    ots[n].name = (char *)srv_version_output(v, k)->name;
    ots[n].datatype = (char *)dtype_wire_name(t->dt);
    memcpy(shapes[n], t->dims, (size_t)t->ndims * sizeof t->dims[0]);
    size_t row_bytes = t->bytes, off = 0;
    if (batched && t->ndims > 0 && t->dims[0] > 0) {
      row_bytes = t->bytes / (size_t)t->dims[0];
      off = (size_t)row_off * row_bytes;
      shapes[n][0] = r->item.rows;
    }
    ots[n].n_shape = (size_t)t->ndims;
    ots[n].shape = shapes[n];
    otp[n] = &ots[n];
    raws[n].data = (uint8_t *)t->data + off;
    raws[n].len = batched ? row_bytes * (size_t)r->item.rows : t->bytes;
    if (t->dt == DT_STRING && batched && t->ndims > 0 && t->dims[0] > 0) {
      // rows of no fixed size (the wire layout the engine wrote): found by
      // walking the elements before the request's rows and in them
      uint64_t per_row = (uint64_t)eng_numel(t->ndims - 1, t->dims + 1);
      size_t a = strwire_offset(t->data, t->bytes, (uint64_t)row_off * per_row);
      size_t b = a + strwire_offset((const uint8_t *)t->data + a, t->bytes - a, (uint64_t)r->item.rows * per_row);
      raws[n].data = (uint8_t *)t->data + a;
      raws[n].len = b - a;
    }
    int64_t want[ENG_MAX_DIMS];
    size_t esize = dtype_size(t->dt);
    if (pad && esize && t->ndims > 0 && crop_dims(r, pad, k, t->ndims, shapes[n], want)) {
      // one run from the slice's start (e.g. [1, L, H] of [1, Lpad, H]) needs no copy
      int last = 0;
      int64_t runs = 1;
      for (int d = 0; d < t->ndims; d++)
        if (want[d] != shapes[n][d]) last = d;
      for (int d = 0; d < last; d++) runs *= want[d];
      size_t bytes = esize * (size_t)eng_numel(t->ndims, want);
      if (runs != 1) {
        uint8_t *c = malloc(bytes ? bytes : 1);
        if (!c) {
          rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory cropping output '%s'", ots[n].name);
          break;
        }
        crops[n_crops++] = c;
        eng_pad_crop(c, raws[n].data, t->ndims, shapes[n], want, esize);
        raws[n].data = c;
      }
      raws[n].len = bytes;
      memcpy(shapes[n], want, (size_t)t->ndims * sizeof want[0]);
    }
    if (r->class_count && r->class_count[k]) {  // Triton's classification extension: top classes as BYTES
      size_t es = dtype_size(t->dt);
      size_t numel = es ? raws[n].len / es : 0;
      size_t rows = batched && t->ndims > 0 ? (size_t)shapes[n][0] : 1;
      size_t per_row = rows ? numel / rows : 0;
      uint8_t *cls = NULL;
      size_t cls_len = 0, n_cls = 0;
      if (srv_classify(raws[n].data, t->dt, rows, per_row, r->class_count[k], SRV_CLASSIFICATION_MAX,
                       r->model->labels, ots[n].name, &cls, &cls_len, &n_cls, e) != 0) {
        rc = (int)e->code;
        break;
      }
      crops[n_crops++] = cls;
      raws[n].data = cls;
      raws[n].len = cls_len;
      ots[n].datatype = (char *)"BYTES";
      ots[n].n_shape = 0;
      if (batched && t->ndims > 0) shapes[n][ots[n].n_shape++] = (int64_t)rows;
      shapes[n][ots[n].n_shape++] = (int64_t)n_cls;
    }
    const srv_shm_out *so = r->shm_out && (r->shm_out[k].ptr || r->shm_out[k].cuda) ? &r->shm_out[k] : NULL;
    if (so) {
      // written where the client asked; the response keeps an empty entry so
      // raw_output_contents stays indexed like outputs (as Triton's does)
      if (raws[n].len > so->cap) {
        rc = err_set(e, ERR_INVALID_ARGUMENT,
                     "output '%s': %zu bytes do not fit in the %" PRIu64 " bytes given in shared memory region '%s'",
                     ots[n].name, raws[n].len, so->cap, so->region);
        break;
      }
      if (so->cuda) {
        if (srv_cuda_shm_write(so->cuda, so->offset, raws[n].data, raws[n].len, e) != 0) {
          rc = err_prefix(e, "output '%s': ", ots[n].name);
          break;
        }
      } else if (srv_shmguard_write(so->ptr, raws[n].data, raws[n].len) != 0) {
        r->shm_fault_region = so->region;
        r->shm_fault_tensor = ots[n].name;
        rc = shm_fault(r, "output", e);
        break;
      }
      raws[n].len = 0;
    }
    n++;
  }
  uint8_t *buf = NULL;
  size_t len = 0, n_hdr = 0;
  uint8_t hdr[16];
  if (rc == 0) {
    resp.n_outputs = n;
    resp.outputs = otp;
    resp.n_raw_output_contents = n;
    resp.raw_output_contents = raws;
    len = inference__model_infer_response__get_packed_size(&resp);
    // On a stream the answer is a ModelStreamInferResponse whose only field is
    // infer_response (2): its tag and length go in front of the same bytes.
    if (r->stream) {
      hdr[n_hdr++] = 2 << 3 | 2;
      for (uint64_t v = len; ; v >>= 7) {
        hdr[n_hdr++] = (uint8_t)(v & 0x7f) | (v > 0x7f ? 0x80 : 0);
        if (v <= 0x7f) break;
      }
    }
    buf = malloc(n_hdr + len ? n_hdr + len : 1);
    if (!buf) rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory packing the response");
  }
  if (rc == 0) {
    memcpy(buf, hdr, n_hdr);
    inference__model_infer_response__pack(&resp, buf + n_hdr);
    *out = buf;
    *out_len = n_hdr + len;
  }
  for (size_t i = 0; i < n_crops; i++) free(crops[i]);
  return rc;
}

// --- answering (instance thread) and dropping (under the scheduler's lock, any thread)

// An answer leaves now, or in its turn when the model preserves ordering;
// either way r is freed once it is sent (maybe before this returns).
static void deliver(srv_server *s, srv_request *r, uint8_t *resp, size_t len, int code, const char *msg) {
  if (r->ord) srv_order_answer(r, resp, len, code, msg);
  else srv_request_send(s, r, resp, len, code, msg);
}

// The stage latencies of one answered request into the histograms, and
// into the trace file when the request was sampled.
static void record_stages(srv_server *s, srv_version *v, const srv_request *r, const eng_job *job, int64_t t_end,
                          uint64_t batch_id, int64_t rows) {
  srv_stats *st = &v->stats;
  // a sampled request's spans go on a lane of its own while it runs
  int tid = 0;
  if (r->traced) {
    tid = prof_trace_lane(s->trace, v->trace_pid, r->t_recv_us, t_end);
    char lane[32];
    snprintf(lane, sizeof lane, "requests %d", tid - PROF_TRACE_LANE_TID0);
    prof_trace_name_track(s->trace, v->trace_pid, tid, NULL, lane);
  }
  struct {
    const char *name;
    prof_hist *h;
    int64_t a, b;
  } stages[] = {
      {"request", st->h_request, r->t_recv_us, t_end},
      {"queue", st->h_queue, r->t_enqueue_us, job->t_start_us},
      {"compute_input", st->h_input, job->t_start_us, job->t_infer_start_us},
      {"compute_infer", st->h_infer, job->t_infer_start_us, job->t_infer_end_us},
      {"compute_output", st->h_output, job->t_infer_end_us, t_end},
  };
  for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++) {
    prof_hist_record(stages[i].h, stages[i].b - stages[i].a);
    if (!r->traced) continue;
    prof_trace_span_info sp = {.name = stages[i].name, .start_us = stages[i].a, .end_us = stages[i].b,
                               .model = r->model->name, .version = v->version_str, .request_id = r->msg->id,
                               .batch_id = batch_id, .batch_size = (int)rows, .instance = job->instance,
                               .stream = job->stream, .device = eng_model_instance_device(v->model, job->instance),
                               .pid = v->trace_pid, .tid = tid};
    prof_trace_span(s->trace, &sp);
  }
}

// A batch's successful unary answers, sent on the reply queue's threads
// (replyq.h) so the instance thread can run its next batch meanwhile.
enum { CHUNK_MAX = 16 };
typedef struct reply_chunk {
  srv_replyq_item it;  // first: the queue's
  srv_server *s;
  int n;
  srv_request *r[CHUNK_MAX];
  uint8_t *resp[CHUNK_MAX];
  size_t len[CHUNK_MAX];
} reply_chunk;

static void send_chunk(srv_replyq_item *it) {
  reply_chunk *c = (reply_chunk *)it;
  for (int i = 0; i < c->n; i++) {
    srv_call_reply_queued(c->r[i]->call, c->resp[i], c->len[i]);  // one CQ wakeup for the burst
    srv_infer_request_free(c->r[i]);
    atomic_fetch_sub(&c->s->infer_inflight, 1);
  }
  free(c);
}

static void post_chunk(srv_server *s, reply_chunk *c) {
  c->it.fn = send_chunk;
  if (srv_replyq_post(s->replyq, &c->it) != 0) send_chunk(&c->it);  // stopping: sent here
}

// One log line per 10 s for requests failed by a shrunk shared memory
// object: a client doing it on purpose must not flood the log.
enum { SHM_FAULT_LOG_US = 10 * 1000 * 1000 };
static void shm_fault_log(srv_server *s, const srv_request *r, int64_t now) {
  long long n = atomic_fetch_add(&s->shm_faults, 1) + 1;
  long long last = atomic_load(&s->shm_fault_logged_us);
  if (last && now - last < SHM_FAULT_LOG_US) return;
  if (!atomic_compare_exchange_strong(&s->shm_fault_logged_us, &last, now ? now : 1)) return;
  atomic_fetch_sub(&s->shm_faults, n);
  srv_log(SRV_LOG_WARN,
          "%lld request(s) failed: a client shrank its shared memory object under a registered region "
          "(last: region '%s', tensor '%s' of model '%s')",
          n, r->shm_fault_region, r->shm_fault_tensor, r->model->name);
}

// One request's answer, packed from its rows of the batch outputs: on the
// instance thread, or on a copy thread for a big batch (pack_reply touches
// only the request, its own buffers and client shared memory it was given).
typedef struct packed {
  int64_t row_off;  // its first row in the batch
  uint8_t *resp;
  size_t len;
  err e;
} packed;

typedef struct pack_ctx {
  srv_request *const *reqs;
  packed *pk;
  const eng_tensor *outputs;
  size_t n_outputs;
} pack_ctx;

static void pack_one(void *ctx, size_t i) {
  pack_ctx *c = ctx;
  srv_request *r = c->reqs[i];
  packed *p = &c->pk[i];
  if (r->shm_fault_region) shm_fault(r, "input", &p->e);  // gather's (sched.c)
  else pack_reply(r, c->outputs, c->n_outputs, p->row_off, &p->resp, &p->len, &p->e);
}

// Packs every answer of the batch first, then accounts the statistics, then
// sends: a client that reads ModelStatistics after its answer sees its
// request counted. Batches of three or more unary requests are sent by the
// reply queue, in chunks spread over its threads; smaller ones here (a hop
// to another thread would only add latency to a lone request), as are
// stream answers (their order on the stream is kept) and ordered ones
// (server/core/order.c sends those in turn).
void srv_reply_batch(srv_server *s, srv_version *v, srv_request *const *reqs, size_t n, int rc, const err *e,
                     const eng_job *job, const eng_tensor *outputs, size_t n_outputs) {
  srv_stats *st = &v->stats;
  int64_t rows = 0;
  for (size_t i = 0; i < n; i++) rows += reqs[i]->item.rows;
  int64_t input_us = job->t_infer_start_us - job->t_start_us, infer_us = job->t_infer_end_us - job->t_infer_start_us;

  packed stack_p[16];
  packed *pk = n <= 16 ? stack_p : calloc(n, sizeof *pk);
  int64_t row_off = 0, t_pack = job->t_infer_end_us;
  size_t out_bytes = 0;
  for (size_t k = 0; rc == 0 && k < n_outputs; k++) out_bytes += outputs[k].bytes;
  for (size_t i = 0; pk && i < n; i++) {
    pk[i] = (packed){.row_off = row_off};
    row_off += reqs[i]->item.rows;
  }
  if (pk && rc == 0) {
    // Each answer is its own copy of its rows: a big batch's are shared
    // with the server's copy threads (issue 32: one thread packing 34
    // BERT-base answers of 393 KB took 3.0 ms of every batch).
    pack_ctx pc = {.reqs = reqs, .pk = pk, .outputs = outputs, .n_outputs = n_outputs};
    srv_copypool_for(out_bytes >= srv_copypool_min_bytes(s->copies) ? s->copies : NULL, n, pack_one, &pc);
  }
  for (size_t i = 0; pk && i < n; i++)
    if (reqs[i]->shm_fault_region) shm_fault_log(s, reqs[i], t_pack);
  int64_t t_end = eng_now_us();

  uint64_t batch_id = atomic_fetch_add(&v->batch_ids, 1);
  if (rc == 0) {
    int dev = eng_model_instance_device(v->model, job->instance);
    if (dev >= 0 && job->device_ns)
      prof_gpus_busy(s->gpus, dev, job->t_infer_end_us - (int64_t)(job->device_ns / 1000), job->t_infer_end_us);
    size_t ok = 0;
    for (size_t i = 0; i < n; i++) ok += pk && !pk[i].e.code;
    prof_window_add(&st->win_requests, t_end, (double)ok);
    prof_window_add(&st->win_rows, t_end, (double)rows);
    prof_hist_record(st->h_batch, rows);
    atomic_fetch_add(&st->inference_count, (uint64_t)rows);
    atomic_fetch_add(&st->execution_count, 1);
    atomic_store(&st->last_inference_ms, srv_wall_ms());
    srv_batch_stat *b = rows >= 1 && rows <= st->n_batch ? srv_stats_batch(st, (int)rows) : NULL;
    if (b) {
      atomic_fetch_add(&b->count, 1);
      atomic_fetch_add(&b->input_ns, (uint64_t)input_us * 1000);
      atomic_fetch_add(&b->infer_ns, (uint64_t)infer_us * 1000);
      atomic_fetch_add(&b->output_ns, (uint64_t)(t_end - job->t_infer_end_us) * 1000);
    }
  } else {
    // one line per 10 s: a model whose instances all fail (a sticky CUDA
    // error) wrote one per batch, millions of them, before it was refused
    srv_version_log_failure(reqs[0]->model, v, SRV_VLOG_EXEC, e, 1);
  }

  // a version preserves ordering or not, its requests alike; read before
  // any is answered (an ordered one may be sent and freed at once)
  int ordered = n && reqs[0]->ord;
  int offload = !ordered && s->replyq && n >= 3;
  int per = 0;
  if (offload) {  // about one chunk per thread, each worth a wakeup
    int th = srv_replyq_threads(s->replyq);
    per = (int)((n + (size_t)th - 1) / (size_t)th);
    per = per < 4 ? 4 : per > CHUNK_MAX ? CHUNK_MAX : per;
  }
  reply_chunk *chunk = NULL;
  for (size_t i = 0; i < n; i++) {
    srv_request *r = reqs[i];
    const err *fail = rc ? e : !pk ? NULL : pk[i].e.code ? &pk[i].e : NULL;
    if (!pk && rc == 0) {
      record_failure(v, SRV_FAIL_OTHER, r->t_recv_us);
      atomic_fetch_sub(&st->pending, 1);
      deliver(s, r, NULL, 0, ERR_RESOURCE_EXHAUSTED, "out of memory packing the response");
    } else if (fail) {
      record_failure(v, rc ? SRV_FAIL_BACKEND : SRV_FAIL_OTHER, r->t_recv_us);
      atomic_fetch_sub(&st->pending, 1);
      deliver(s, r, NULL, 0, (int)fail->code, fail->msg);
    } else {
      record_stages(s, v, r, job, t_end, batch_id, rows);
      atomic_fetch_add(&st->success.count, 1);
      atomic_fetch_add(&st->success.ns, (uint64_t)(t_end - r->t_recv_us) * 1000);
      atomic_fetch_add(&st->queue.count, 1);
      atomic_fetch_add(&st->queue.ns, (uint64_t)(job->t_start_us - r->t_enqueue_us) * 1000);
      atomic_fetch_add(&st->compute_input.count, 1);
      atomic_fetch_add(&st->compute_input.ns, (uint64_t)input_us * 1000);
      atomic_fetch_add(&st->compute_infer.count, 1);
      atomic_fetch_add(&st->compute_infer.ns, (uint64_t)infer_us * 1000);
      atomic_fetch_add(&st->compute_output.count, 1);
      atomic_fetch_add(&st->compute_output.ns, (uint64_t)(t_end - job->t_infer_end_us) * 1000);
      atomic_fetch_sub(&st->pending, 1);
      if (offload && !r->stream && (chunk || (chunk = calloc(1, sizeof *chunk)))) {  // no memory: sent here
        chunk->s = s;
        chunk->r[chunk->n] = r;
        chunk->resp[chunk->n] = pk[i].resp;
        chunk->len[chunk->n] = pk[i].len;
        if (++chunk->n == per) {
          post_chunk(s, chunk);
          chunk = NULL;
        }
        continue;  // the chunk answers and frees it
      }
      deliver(s, r, pk[i].resp, pk[i].len, 0, NULL);
    }
  }
  if (chunk) post_chunk(s, chunk);
  if (pk != stack_p) free(pk);
}

void srv_reply_drop(srv_server *s, srv_request *r, int code, const char *msg) {
  record_failure(r->version, reason_of(code), r->t_recv_us);
  atomic_fetch_sub(&r->version->stats.pending, 1);
  deliver(s, r, NULL, 0, code, msg);
}

void srv_reply_ensemble(srv_server *s, srv_request *r, int rc, const err *e, const eng_tensor *outputs,
                        size_t n_outputs) {
  srv_version *v = r->version;
  srv_stats *st = &v->stats;
  uint8_t *resp = NULL;
  size_t len = 0;
  err pe = {0};
  if (rc == 0 && pack_reply(r, outputs, n_outputs, 0, &resp, &len, &pe) != 0) {
    rc = (int)pe.code;
    e = &pe;
  }
  int64_t t_end = eng_now_us();
  atomic_fetch_sub(&st->pending, 1);
  if (rc) {
    record_failure(v, reason_of(rc), r->t_recv_us);
    srv_request_send(s, r, NULL, 0, rc, e ? e->msg : "failed");
    return;
  }
  // an ensemble runs no batch of its own: each request is one execution
  // of its rows, taken whole from arrival to answer
  atomic_fetch_add(&st->success.count, 1);
  atomic_fetch_add(&st->success.ns, (uint64_t)(t_end - r->t_recv_us) * 1000);
  atomic_fetch_add(&st->compute_infer.count, 1);
  atomic_fetch_add(&st->compute_infer.ns, (uint64_t)(t_end - r->t_recv_us) * 1000);
  atomic_fetch_add(&st->inference_count, (uint64_t)r->item.rows);
  atomic_fetch_add(&st->execution_count, 1);
  atomic_store(&st->last_inference_ms, srv_wall_ms());
  prof_hist_record(st->h_request, t_end - r->t_recv_us);
  prof_window_add(&st->win_requests, t_end, 1.0);
  prof_window_add(&st->win_rows, t_end, (double)r->item.rows);
  srv_request_send(s, r, resp, len, 0, NULL);
}

void srv_reply_reject(srv_server *s, srv_request *r, int code, const char *msg) {
  record_failure(r->version, SRV_FAIL_REJECTED, r->t_recv_us);
  srv_request_send(s, r, NULL, 0, code, msg);
}
