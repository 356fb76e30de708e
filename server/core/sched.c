// sched.c: the per-version batchers, run under one mutex by whichever thread
// has news: a CQ thread that brings a request enqueues it and, when an
// executor is free, hands the batch to the engine itself; an instance thread
// that finished a batch answers it, frees its executor and starts the next
// batch. A request used to reach the engine through the loop thread (a
// uv_async wakeup, a thread switch) and the finished batch went back through
// it again; on a loaded server those two hops cost more than the batcher's
// work. The loop thread still serves the batchers' timer and the stop, and
// forms the batches of new requests of models that batch dynamically: a CQ
// thread that dispatched each arrival the moment an executor is free would
// fix a batch of one while the next requests are already being read (on a
// busy CPU this halved the batches and lost a fifth of the throughput), where
// the loop, woken once for many arrivals, takes them all.
#include "server/core/sched.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "server/core/copypool.h"
#include "server/core/order.h"
#include "server/core/reply.h"
#include "server/core/server.h"
#include "server/obs/log.h"
#include "server/sec/shmguard.h"

// CPU executors' staging for a full batch of each fixed-shape input is
// allocated at load, so the request path does not allocate, while a
// version's total stays within this (ResNet-50 at batch 128 on 13
// executors); past it, a buffer is grown on first use to the batch seen.
#define STAGE_EAGER_BUDGET ((size_t)1 << 30)

typedef struct vsched vsched;

// One per executor: the batcher's unit of "idle". An engine instance that
// keeps several batches in flight (a GPU instance, one per stream slot) is
// that many executors; executor x runs on engine instance `instance`. The
// batcher never gives an executor a second batch before this one is released.
typedef struct stage {
  void *buf;
  size_t cap;
} stage;

typedef struct batch_slot {
  srv_sched *s;
  vsched *vs;
  int exec;      // the batcher's executor index
  int instance;  // the engine instance behind it
  eng_job job;
  srv_request **reqs;
  size_t n;
  int64_t rows;
  int64_t seq_len;  // pad_to_longest: the length padded inputs are padded to
  // a batch of several requests is gathered here, one copy per input, on
  // the instance thread; sized at load when the dims are static
  eng_tensor *staged;
  stage *stages;
  // inputs left in CUDA regions (srv_request.cuda_in) that the GPU instance
  // copies device to device: room for one per request and input, sized at load
  eng_dev_seg *segs;
  size_t segs_cap;
  // the batch's plain row copies, made at the end of gather in one go so
  // the server's copy threads can share a big batch (server/core/copypool.h):
  // room for one per request and input, sized at load
  srv_copy_seg *copies;
  size_t copies_cap;
} batch_slot;

struct vsched {
  srv_version *v;
  bat_batcher *bat;  // the dynamic batcher, or
  bat_seq *seq;      // sequence_batching's (batcher/sequence.h); exactly one is set
  const eng_sequence_batching *sq;  // its config (implicit state), in the model's config
  int batched;                      // max_batch_size > 0: tensors have a batch dim
  batch_slot *slots;
  int n_slots;
  size_t n_inputs;
  int defer;  // dynamic batching without a queue delay: new requests are batched by the loop thread
  srv_order *order;  // preserve_ordering: answers leave in request order (server/core/order.c)
  int running;   // jobs submitted to the engine and not yet done
  int removing;  // srv_sched_remove_model waits for running to reach 0
  // executors whose engine instance failed for good (eng_model_instance_failed):
  // never released again, so the batcher stops feeding an instance that would
  // only refuse at once (and so, idle first, would draw most of the batches);
  // once all are, what is queued is answered UNAVAILABLE (take_dropped)
  int retired;
};

struct srv_sched {
  srv_registry *reg;
  struct srv_server *srv;  // what the answers go out through (server/core/reply.c)
  uv_loop_t loop;
  uv_async_t async;  // wakes the loop for the stop
  // The batcher's next deadline (max_queue_delay, queue timeouts) through a
  // timerfd polled by the loop: libuv's own timers count whole milliseconds,
  // which would stretch a 100 us queue delay to 1-2 ms.
  int tfd;
  uv_poll_t timer;
  pthread_t thread;
  int started;
  vsched **vs;  // one per scheduled version; changes under mu (model control)
  size_t n_vs, cap_vs;
  pthread_cond_t idle;  // a removed version's last job finished
  int have_loop, have_async, have_timer;  // what srv_sched_create got to
  // Guards everything below, the batchers and the slots' contents. Answers
  // sent under it (drops; server/core/order.c's lock comes after this one)
  // take the transport's locks inside it, never the other way round.
  pthread_mutex_t mu;
  int64_t inflight;  // requests taken in and not yet finished
  int64_t armed;     // the timerfd's wake time, INT64_MAX when disarmed
  int closing;       // the loop closed its handles: no more wakeups
  int kick;  // requests wait for the loop thread to batch them
  int stop_requested;
  void (*on_close)(void *);
  void *on_close_arg;
};

static int64_t clock_now(void *ctx) {
  (void)ctx;
  return eng_now_us();
}

static int request_cancelled(void *payload) {
  const srv_request *r = payload;
  return srv_request_cancelled(r);
}

// --- instance thread side

// A request's input left in a CUDA region, at byte `off` of the batch's
// input i: a device segment of the job where the instance takes it on its
// GPU, else read into the host bytes at dst + off.
static int cuda_part(batch_slot *slot, eng_job *job, size_t i, const srv_cuda_in *ci, size_t off, size_t bytes,
                     uint8_t *dst, err *e) {
  srv_stats *st = &slot->vs->v->stats;
  if (eng_model_device_input(slot->vs->v->model, slot->instance, i) >= 0 && job->n_dev_segs < slot->segs_cap) {
    slot->segs[job->n_dev_segs++] = (eng_dev_seg){.input = i,
                                                  .offset = off,
                                                  .bytes = bytes,
                                                  .device = srv_cuda_shm_device(ci->region),
                                                  .ptr = srv_cuda_shm_dev_ptr(ci->region, ci->offset)};
    atomic_fetch_add(&st->cuda_in_device, 1);
    return 0;
  }
  atomic_fetch_add(&st->cuda_in_host, 1);
  return srv_cuda_shm_read(ci->region, ci->offset, dst + off, bytes, e);
}

// Whether the batch's copy list has room for one more segment: grown (a
// request received in pieces brings one segment a piece, tens for an image)
// where it is full; 0 where it cannot grow (that copy is then made inline).
static int copy_room(batch_slot *slot, size_t n_copies) {
  if (n_copies < slot->copies_cap) return 1;
  size_t cap = 2 * slot->copies_cap + 64;
  srv_copy_seg *c = realloc(slot->copies, cap * sizeof *c);
  if (!c) return 0;
  slot->copies = c;
  slot->copies_cap = cap;
  return 1;
}

// One segment of the batch's copy list; tag: request k's input i as k * n_inputs + i.
static void put_seg(srv_copy_seg *c, uint8_t *dst, const void *src, size_t n, int guarded, size_t tag) {
  c->dst = dst;
  c->src = src;
  c->n = n;
  c->guarded = guarded;
  atomic_store_explicit(&c->faulted, 0, memory_order_relaxed);
  c->tag = tag;
}

// One request's input at dst, padded to seq_len when pi is set: run under
// the SIGBUS guard when the input lies in client shared memory.
typedef struct copy_in {
  uint8_t *dst;
  const eng_tensor *t;
  const eng_pad_input *pi;
  int64_t seq_len;
} copy_in;

static void copy_input(void *arg) {
  const copy_in *c = arg;
  if (c->pi) eng_pad_copy(c->dst, c->t, c->pi->dim, c->seq_len, c->pi->value);
  else memcpy(c->dst, c->t->data, c->t->bytes);
}

// Request k's input i lies in a system region the client shrank: the
// request fails when answered (srv_reply_batch), its rows are zeros for the
// others' sake.
static void shm_faulted(batch_slot *slot, size_t k, size_t i, void *dst, size_t n) {
  memset(dst, 0, n);
  slot->reqs[k]->shm_fault_region = slot->reqs[k]->shm_in[i];
  slot->reqs[k]->shm_fault_tensor = eng_model_input(slot->vs->v->model, i)->name;
}

// Assembles a batch (of several requests, or of one with inputs left in a
// CUDA region): their rows one after the other, straight into the engine's
// pinned staging where it offers some (a GPU instance), else into this
// executor's own buffer. Inputs left in a CUDA region become device
// segments of the job (cuda_part), their rows' host bytes left unwritten.
// Requests in one batch share a shape key, so every non-batch dim agrees,
// except the sequence dim of padded inputs (pad_to_longest): a request
// shorter than the batch's seq_len is padded there with the input's value.
static int gather(eng_job *job, err *e) {
  batch_slot *slot = job->ctx;
  const eng_pad *pad = eng_model_pad(slot->vs->v->model);
  job->dev_segs = slot->segs;
  job->n_dev_segs = 0;
  size_t n_copies = 0;
  for (size_t i = 0; i < slot->vs->n_inputs; i++) {
    const eng_tensor *first = &slot->reqs[0]->inputs[i];
    const eng_pad_input *pi = pad && pad->in[i].on ? &pad->in[i] : NULL;
    size_t row_bytes = first->dims[0] > 0 ? first->bytes / (size_t)first->dims[0] : 0;
    if (pi) {
      eng_tensor one = *first;
      one.dims[0] = 1;
      row_bytes = eng_pad_bytes(&one, pi->dim, slot->seq_len);
    }
    // A lone request is its batch as it is: a model without batching has no
    // batch dim to count its rows in.
    size_t total = slot->n == 1 && !pi ? first->bytes : row_bytes * (size_t)slot->rows;
    if (first->dt == DT_STRING) {  // rows of no fixed size; never padded (pad.c refuses BYTES)
      total = 0;
      for (size_t k = 0; k < slot->n; k++) total += slot->reqs[k]->inputs[i].bytes;
    }
    stage *st = &slot->stages[i];
    uint8_t *dst = job->stage && job->stage[i] && job->stage_cap[i] >= total ? job->stage[i] : NULL;
    if (!dst && st->cap < total) {
      // only for dims that were dynamic at load: the largest size seen is kept
      void *p = realloc(st->buf, total);
      if (!p) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory assembling a batch of %lld rows",
                             (long long)slot->rows);
      st->buf = p;
      st->cap = total;
    }
    if (!dst) dst = st->buf;  // the engine copies it on
    size_t off = 0;
    for (size_t k = 0; k < slot->n; k++) {
      const eng_tensor *t = &slot->reqs[k]->inputs[i];
      const srv_cuda_in *ci = slot->reqs[k]->cuda_in ? &slot->reqs[k]->cuda_in[i] : NULL;
      if (ci && ci->region) {  // never a padded input (infer_validate.c keeps those on the host)
        TRY(cuda_part(slot, job, i, ci, off, t->bytes, dst, e));
        off += t->bytes;
        continue;
      }
      const srv_pieces *pc = slot->reqs[k]->in_pieces ? &slot->reqs[k]->in_pieces[i] : NULL;
      if (pc && pc->n) {  // in the received message's pieces (never padded, never in shared memory)
        atomic_fetch_add(&slot->vs->v->stats.pieces_gathered, 1);
        size_t o = off;
        for (size_t p = 0; p < pc->n; o += pc->v[p].n, p++)
          if (copy_room(slot, n_copies)) {
            put_seg(&slot->copies[n_copies++], dst + o, pc->v[p].p, pc->v[p].n, 0, k * slot->vs->n_inputs + i);
          } else {
            memcpy(dst + o, pc->v[p].p, pc->v[p].n);
          }
        off += t->bytes;
        continue;
      }
      int padded = pi && t->dims[pi->dim] != slot->seq_len;
      size_t n = padded ? eng_pad_bytes(t, pi->dim, slot->seq_len) : t->bytes;
      const char *region = slot->reqs[k]->shm_in ? slot->reqs[k]->shm_in[i] : NULL;
      if (!padded && n_copies < slot->copies_cap) {  // with the others, below
        put_seg(&slot->copies[n_copies++], dst + off, t->data, n, region != NULL, k * slot->vs->n_inputs + i);
      } else if (region) {
        copy_in c = {.dst = dst + off, .t = t, .pi = padded ? pi : NULL, .seq_len = slot->seq_len};
        if (srv_shmguard_run(t->data, t->bytes, copy_input, &c) != 0) shm_faulted(slot, k, i, dst + off, n);
      } else if (padded) {
        eng_pad_copy(dst + off, t, pi->dim, slot->seq_len, pi->value);
      } else {
        memcpy(dst + off, t->data, t->bytes);
      }
      off += n;
    }
    slot->staged[i] = *first;
    if (slot->n > 1 || pi) {
      slot->staged[i].dims[0] = slot->rows;
      if (pi) slot->staged[i].dims[pi->dim] = slot->seq_len;
    }
    slot->staged[i].data = dst;
    slot->staged[i].bytes = off;
  }
  // Every input's plain rows at once: on this thread for a small batch,
  // shared with the copy threads for a big one (issue 32: one thread moving
  // 24 ResNet-50 images into pinned staging took 4.1 ms of every batch).
  srv_copypool_copy(slot->s->srv->copies, slot->copies, n_copies);
  for (size_t c = 0; c < n_copies; c++)
    if (atomic_load_explicit(&slot->copies[c].faulted, memory_order_relaxed)) {
      size_t k = slot->copies[c].tag / slot->vs->n_inputs, i = slot->copies[c].tag % slot->vs->n_inputs;
      shm_faulted(slot, k, i, slot->copies[c].dst, slot->copies[c].n);
    }
  job->inputs = slot->staged;
  return 0;
}

// Whether every input of r may be handed to the engine in place: the
// engine reads tensors as arrays of their type, and the bytes a request
// points at need not be aligned for it (raw_input_contents are read where
// they lie in the received message, shared memory at the client's offset).
// 16 bytes is what the engine's own buffers and the old unpacked copies had.
static int inputs_aligned(const vsched *vs, const srv_request *r) {
  for (size_t i = 0; i < vs->n_inputs; i++)  // STRING bytes are read as bytes (the plan decodes them)
    if (r->inputs[i].dt != DT_STRING && (uintptr_t)r->inputs[i].data % 16) return 0;
  return 1;
}

static void pump_version(srv_sched *s, vsched *vs);
static void keep_states(batch_slot *slot, int rc, const eng_tensor *outputs, size_t n_outputs);
static void arm_timer(srv_sched *s);
static void left(srv_sched *s, int64_t n);

// Answers the batch (outside the lock: packing is the expensive part), then
// frees the executor and starts whatever batch it can take now, on this
// thread. The slot may be refilled by that pump: nothing reads it after.
static void on_job_done(eng_job *job, int rc, const err *e, const eng_tensor *outputs, size_t n_outputs) {
  batch_slot *slot = job->ctx;
  srv_sched *s = slot->s;
  vsched *vs = slot->vs;
  keep_states(slot, rc, outputs, n_outputs);
  srv_reply_batch(s->srv, vs->v, slot->reqs, slot->n, rc, e, job, outputs, n_outputs);
  int dead = rc != 0 && eng_model_instance_failed(vs->v->model, slot->instance);  // read only after a failure
  pthread_mutex_lock(&s->mu);
  left(s, (int64_t)slot->n);
  if (vs->seq) {
    bat_seq_release_executor(vs->seq, slot->exec, dead);
    if (dead && ++vs->retired == vs->n_slots) bat_seq_flush(vs->seq);
  } else if (!dead) {
    // a batch that ran teaches the latency target its compute time
    if (rc == 0) bat_batch_done(vs->bat, slot->exec);
    else bat_release_executor(vs->bat, slot->exec);
  } else if (++vs->retired == vs->n_slots) {
    bat_flush(vs->bat);  // nothing will run them
  }
  vs->running--;
  pump_version(s, vs);
  arm_timer(s);
  if (vs->removing && vs->running == 0) pthread_cond_broadcast(&s->idle);
  pthread_mutex_unlock(&s->mu);  // nothing reads vs after: a remove may free it now
}

// --- under s->mu, on any thread

// n requests finished; the last one out while a stop waits wakes the loop.
static void left(srv_sched *s, int64_t n) {
  s->inflight -= n;
  if (s->inflight == 0 && s->stop_requested && !s->closing) {
    int rc = uv_async_send(&s->async);
    if (rc) srv_log(SRV_LOG_ERROR, "uv_async_send: %s", uv_strerror(rc));
  }
}

static void drop(srv_sched *s, srv_request *r, int code, const char *msg) {
  srv_reply_drop(s->srv, r, code, msg);
  left(s, 1);
}

static void drop_for(srv_sched *s, vsched *vs, srv_request *r, bat_drop_reason why) {
  switch (why) {
    case BAT_DROP_CANCELLED: drop(s, r, ERR_CANCELLED, "request cancelled while queued"); break;
    case BAT_DROP_DEADLINE: drop(s, r, ERR_DEADLINE_EXCEEDED, "deadline exceeded while queued"); break;
    // Triton's answer for a queue-policy timeout with action REJECT
    case BAT_DROP_QUEUE_TIMEOUT: drop(s, r, ERR_UNAVAILABLE, "Request timeout expired"); break;
    case BAT_DROP_INSTANCE_FAILED: drop(s, r, ERR_UNAVAILABLE, bat_drop_reason_str(why)); break;
    default:
      drop(s, r, ERR_UNAVAILABLE,
           vs->retired == vs->n_slots ? "the model's instances all failed permanently while it was queued"
                                      : "server is shutting down");
      break;
  }
}

static void take_dropped(srv_sched *s, vsched *vs) {
  if (vs->seq) {
    for (bat_seq_item *it = bat_seq_take_dropped(vs->seq), *next; it; it = next) {
      next = it->next;
      drop_for(s, vs, it->payload, it->drop_reason);
    }
    return;
  }
  for (bat_item *it = bat_take_dropped(vs->bat), *next; it; it = next) {
    next = it->next;
    drop_for(s, vs, it->payload, it->drop_reason);
  }
}

// Implicit state: the request's state inputs read the sequence's state
// bytes in place (nothing writes them while it runs: a sequence has one
// request in flight, and its next state is written once the batch is done).
static void feed_states(vsched *vs, srv_request *r, unsigned char *state) {
  for (size_t k = 0; state && k < vs->sq->n_states; k++) {
    const eng_seq_state *st = &vs->sq->states[k];
    const eng_io *io = eng_model_input(vs->v->model, st->input);
    eng_tensor *t = &r->inputs[st->input];
    t->dt = st->dt;
    t->ndims = 0;
    if (vs->batched) t->dims[t->ndims++] = 1;
    for (int d = 0; d < io->ndims && t->ndims < ENG_MAX_DIMS; d++) t->dims[t->ndims++] = io->dims[d];
    t->bytes = st->row_bytes;
    t->data = state + st->offset;
  }
}

// Implicit state: each request's row of the state outputs becomes its
// sequence's state. Before the answers go (they free the requests).
static void keep_states(batch_slot *slot, int rc, const eng_tensor *outputs, size_t n_outputs) {
  vsched *vs = slot->vs;
  if (rc != 0 || !vs->sq || !vs->sq->n_states) return;
  for (size_t k = 0; k < vs->sq->n_states; k++) {
    const eng_seq_state *st = &vs->sq->states[k];
    if (st->output >= n_outputs) continue;
    const eng_tensor *t = &outputs[st->output];
    if (t->bytes != st->row_bytes * slot->n) continue;  // config_validate fixed its dims: never
    for (size_t i = 0; i < slot->n; i++)
      if (slot->reqs[i]->seq.state)
        memcpy(slot->reqs[i]->seq.state + st->offset, (const uint8_t *)t->data + i * st->row_bytes, st->row_bytes);
  }
}

// The next batch of either batcher into its executor's slot; 0 when none.
static batch_slot *next_batch(vsched *vs) {
  batch_slot *slot;
  if (vs->seq) {
    bat_seq_batch b;
    if (!bat_seq_next_batch(vs->seq, &b)) return NULL;
    slot = &vs->slots[b.executor];
    slot->n = 0;
    slot->rows = b.rows;
    slot->seq_len = 0;
    for (bat_seq_item *it = b.items; it; it = it->next) {
      srv_request *r = it->payload;
      slot->reqs[slot->n++] = r;
      feed_states(vs, r, it->state);
    }
    return slot;
  }
  bat_batch b;
  if (!bat_next_batch(vs->bat, &b)) return NULL;
  slot = &vs->slots[b.executor];
  slot->n = 0;
  slot->rows = b.rows;
  slot->seq_len = b.seq_len;
  for (bat_item *it = b.items; it; it = it->next) {
    srv_request *r = it->payload;
    r->padded_len = b.seq_len;  // equal to its own length when the model does not pad
    slot->reqs[slot->n++] = r;
  }
  return slot;
}

static void pump_version(srv_sched *s, vsched *vs) {
  batch_slot *slot;
  while ((slot = next_batch(vs))) {
    // A lone request is read in place, unless an input stayed in a CUDA
    // region, lies in a system region (the client may shrink it under the
    // engine: only the guarded copy survives that), in the pieces of its
    // message (infer_pieces.c) or unaligned;
    // several are gathered on the instance thread.
    const srv_request *r0 = slot->reqs[0];
    int gathered = slot->n > 1 || r0->cuda_in || r0->shm_in || r0->in_pieces || !inputs_aligned(vs, r0);
    slot->job = (eng_job){.rows = slot->rows, .inputs = slot->reqs[0]->inputs, .prepare = gathered ? gather : NULL,
                          .done = on_job_done, .ctx = slot, .instance = slot->instance};
    err e;
    if (eng_model_submit(vs->v->model, slot->instance, &slot->job, &e) == 0) {
      vs->running++;
      continue;
    }
    for (size_t i = 0; i < slot->n; i++) drop(s, slot->reqs[i], e.code, e.msg);
    if (vs->seq) bat_seq_release_executor(vs->seq, slot->exec, 0);
    else bat_release_executor(vs->bat, slot->exec);
  }
  take_dropped(s, vs);
}

// Sets the timerfd to the nearest batcher deadline; a system call only when
// that changed (most requests leave it where it was, often disarmed).
static void arm_timer(srv_sched *s) {
  int64_t wake = INT64_MAX;
  for (size_t i = 0; i < s->n_vs; i++) {
    int64_t w = s->vs[i]->seq ? bat_seq_next_wakeup(s->vs[i]->seq) : bat_next_wakeup(s->vs[i]->bat);
    if (w < wake) wake = w;
  }
  if (wake == s->armed) return;
  s->armed = wake;
  // absolute CLOCK_MONOTONIC time, eng_now_us's clock; a zero it_value
  // disarms, so a deadline already past becomes 1 us after the epoch (fires now)
  struct itimerspec its = {{0, 0}, {0, 0}};
  if (wake != INT64_MAX) {
    if (wake < 1) wake = 1;
    its.it_value.tv_sec = (time_t)(wake / 1000000);
    its.it_value.tv_nsec = (long)(wake % 1000000) * 1000;
  }
  if (timerfd_settime(s->tfd, TFD_TIMER_ABSTIME, &its, NULL) != 0)
    srv_log(SRV_LOG_ERROR, "timerfd_settime: %s", strerror(errno));
}

// Takes a request in: its sequence number when the model preserves
// ordering, then the batcher's queue.
static void admit(srv_sched *s, srv_request *r) {
  s->inflight++;
  vsched *vs = r->version->sched;
  err e;
  if (!vs) {
    drop(s, r, ERR_UNAVAILABLE, "model version is not scheduled");
    return;
  }
  if (s->closing) {
    drop(s, r, ERR_UNAVAILABLE, "server is shutting down");
    return;
  }
  if (vs->order && srv_order_admit(vs->order, r, &e) != 0) {
    drop(s, r, e.code, e.msg);
    return;
  }
  r->t_enqueue_us = eng_now_us();
  r->item.payload = r;
  // The loop is woken only when an executor is free to take a batch: while
  // every one is busy, the next to finish pumps the queue itself
  // (on_job_done), and the timer set in srv_sched_submit covers deadlines
  // meanwhile. Under load, that was a loop wakeup for nothing every few
  // requests.
  if (vs->retired == vs->n_slots)  // admitted just before its last instance failed: nothing would run it
    drop(s, r, ERR_UNAVAILABLE, "the model's instances all failed permanently");
  else if (vs->seq) {
    r->seq.rows = r->item.rows;
    r->seq.deadline_us = r->item.deadline_us;
    r->seq.payload = r;
    if (bat_seq_enqueue(vs->seq, &r->seq, r->model->name, &e) != 0) drop(s, r, e.code, e.msg);
    else pump_version(s, vs);
  } else if (bat_enqueue(vs->bat, &r->item, &e) != 0) drop(s, r, e.code, e.msg);
  else if (vs->defer) s->kick |= bat_free_executors(vs->bat) > 0;
  else pump_version(s, vs);
}

// --- loop thread side

static void on_timer(uv_poll_t *p, int status, int events) {
  (void)events;
  srv_sched *s = p->data;
  uint64_t expirations;
  // drain the expiry count; EAGAIN when a re-arm already cleared it
  if (read(s->tfd, &expirations, sizeof expirations) < 0 && errno != EAGAIN)
    srv_log(SRV_LOG_ERROR, "timerfd read: %s", strerror(errno));
  if (status < 0) srv_log(SRV_LOG_ERROR, "timer poll: %s", uv_strerror(status));
  pthread_mutex_lock(&s->mu);
  s->armed = INT64_MAX;  // fired, or about to be re-armed: either way set it again
  for (size_t i = 0; i < s->n_vs; i++) pump_version(s, s->vs[i]);
  arm_timer(s);
  pthread_mutex_unlock(&s->mu);
}

static void on_handle_closed(uv_handle_t *h) { (void)h; }

// New requests to batch, or the stop: once nothing is in flight, close the
// loop's handles (and the caller's, through on_close) so uv_run returns.
static void on_async(uv_async_t *a) {
  srv_sched *s = a->data;
  pthread_mutex_lock(&s->mu);
  if (s->kick) {
    s->kick = 0;
    for (size_t i = 0; i < s->n_vs; i++)
      if (s->vs[i]->defer) pump_version(s, s->vs[i]);
    arm_timer(s);
  }
  int close_now = s->stop_requested && s->inflight == 0 && !s->closing;
  if (close_now) s->closing = 1;  // from here a request is refused, and nothing wakes the loop
  pthread_mutex_unlock(&s->mu);
  if (!close_now) return;
  if (s->on_close) s->on_close(s->on_close_arg);
  uv_poll_stop(&s->timer);
  uv_close((uv_handle_t *)&s->timer, on_handle_closed);
  uv_close((uv_handle_t *)&s->async, on_handle_closed);
}

static void *loop_main(void *arg) {
  srv_sched *s = arg;
  (void)pthread_setname_np(pthread_self(), "inferd-loop");  // per-thread CPU by name (tests/bench/serve_gpu)
  int rc = uv_run(&s->loop, UV_RUN_DEFAULT);
  if (rc) srv_log(SRV_LOG_WARN, "loop ended with active handles");
  return NULL;
}

// --- lifecycle

static bat_queue_policy queue_policy(const eng_queue_policy *p) {
  bat_queue_policy q = {0};
  q.timeout_action = p->timeout_action == ENG_TIMEOUT_DELAY ? BAT_TIMEOUT_DELAY : BAT_TIMEOUT_REJECT;
  q.default_timeout_us = (int64_t)p->default_timeout_us;
  q.allow_timeout_override = p->allow_timeout_override;
  q.max_queue_size = p->max_queue_size;
  return q;
}

static void free_vsched(vsched *vs) {
  if (!vs) return;
  for (int j = 0; j < vs->n_slots; j++) {
    batch_slot *sl = &vs->slots[j];
    for (size_t k = 0; sl->stages && k < vs->n_inputs; k++) free(sl->stages[k].buf);
    free(sl->stages);
    free(sl->staged);
    free(sl->segs);
    free(sl->copies);
    free(sl->reqs);
  }
  free(vs->slots);
  bat_destroy(vs->bat);
  bat_seq_destroy(vs->seq);
  srv_order_destroy(vs->order);
  free(vs);
}

// sequence_batching's batcher: executors mapped to their instances as
// build_version lays them out (every instance's first, then every second).
static int build_sequence(const eng_model_config *cfg, vsched *vs, int n_exec, int n_inst, err *e) {
  const eng_sequence_batching *sq = &cfg->sequence;
  int *inst = calloc((size_t)n_exec, sizeof *inst);
  if (!inst) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  int x = 0, more = 1;
  for (int level = 0; more; level++) {
    more = 0;
    for (int i = 0; i < n_inst; i++)
      if (eng_model_instance_depth(vs->v->model, i) > level) inst[x++] = i, more = 1;
  }
  bat_seq_config c = {.strategy = sq->strategy == ENG_SEQ_OLDEST ? BAT_SEQ_OLDEST : BAT_SEQ_DIRECT,
                      .max_batch_size = cfg->max_batch_size,
                      .n_executors = n_exec,
                      .exec_instance = inst,
                      .n_instances = n_inst,
                      // Triton's default when the config leaves it 0: one second
                      .max_idle_us = sq->max_idle_us ? (int64_t)sq->max_idle_us : 1000000,
                      .max_queue_delay_us = (int64_t)(sq->strategy == ENG_SEQ_OLDEST ? sq->oldest_delay_us
                                                                                     : sq->direct_delay_us),
                      .min_slot_utilization = sq->min_slot_utilization,
                      .max_candidates = sq->max_candidates,
                      .preferred = sq->preferred,
                      .n_preferred = sq->n_preferred,
                      .state_bytes = sq->state_bytes,
                      .now = clock_now,
                      .cancelled = request_cancelled};
  vs->sq = sq;
  vs->batched = cfg->max_batch_size > 0;
  int rc = bat_seq_create(&c, &vs->seq, e);
  free(inst);
  return rc;
}

// Builds a version's batcher state (outside the lock: allocations only).
static int build_version(srv_sched *s, srv_model *m, srv_version *v, vsched *vs, err *e) {
  const eng_model_config *cfg = m->engine_config;
  vs->v = v;
  vs->n_inputs = eng_model_n_inputs(v->model);
  int n_inst = eng_model_n_instances(v->model), n_exec = 0, max_depth = 1;
  for (int i = 0; i < n_inst; i++) {
    int d = eng_model_instance_depth(v->model, i);
    n_exec += d;
    if (d > max_depth) max_depth = d;
  }
  bat_config c = {.max_batch_size = cfg->max_batch_size, .n_executors = n_exec, .now = clock_now,
                  .cancelled = request_cancelled};
  const eng_dynamic_batching *db = cfg->batching.on ? &cfg->batching : NULL;
  bat_level_policy levels[64];
  int prefs[64];
  if (db) {
    c.dynamic = 1;
    if (db->n_preferred > 64 || db->n_level_policies > 64)
      return err_set(e, ERR_INVALID_ARGUMENT, "model '%s': more than 64 preferred sizes or level policies", m->name);
    for (size_t i = 0; i < db->n_preferred; i++) prefs[i] = db->preferred[i];
    c.preferred_batch_sizes = prefs;
    c.n_preferred = db->n_preferred;
    c.max_queue_delay_us = (int64_t)db->max_queue_delay_us;
    c.priority_levels = (uint32_t)db->priority_levels;
    c.default_priority_level = (uint32_t)db->default_priority_level;
    c.default_policy = queue_policy(&db->default_policy);
    for (size_t i = 0; i < db->n_level_policies; i++)
      levels[i] = (bat_level_policy){(uint32_t)db->level_policies[i].level,
                                     queue_policy(&db->level_policies[i].policy)};
    c.level_policies = levels;
    c.n_level_policies = db->n_level_policies;
    const eng_pad *pad = eng_model_pad(v->model);
    c.pad = pad != NULL;
    c.pad_max_ratio = pad ? pad->max_ratio : 0;
    c.latency_target_us = db->latency_target_us;
    if (db->preserve_ordering) TRY(srv_order_create(s->srv, &vs->order, e));
    // With a queue delay the batcher holds a batch until the delay or a
    // preferred size says go, so the CQ thread that brings a request pumps
    // it on the spot (a batch that is ready leaves at once; one that is not
    // arms the timer). Without one, a request that found an executor free
    // would leave alone: the loop thread batches what arrived meanwhile.
    vs->defer = cfg->max_batch_size > 1 && c.max_queue_delay_us == 0;
  }
  if (cfg->sequence.on) TRY(build_sequence(cfg, vs, n_exec, n_inst, e));
  else TRY(bat_create(&c, &vs->bat, e));
  vs->slots = calloc((size_t)n_exec, sizeof *vs->slots);
  if (!vs->slots) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  size_t max_rows = cfg->max_batch_size > 0 ? (size_t)cfg->max_batch_size : 1;
  size_t eager_bytes = 0;  // staging allocated at load so far, against STAGE_EAGER_BUDGET
  // Executors level by level (every instance's first, then every second):
  // the batcher takes free executors round robin in this order, so batches
  // alternate over the instances (and GPUs) before any instance gets a
  // second one in flight.
  int x = 0;
  for (int level = 0; level < max_depth; level++)
    for (int i = 0; i < n_inst; i++) {
      if (eng_model_instance_depth(v->model, i) <= level) continue;
      vs->slots[x] = (batch_slot){.s = s, .vs = vs, .exec = x, .instance = i};
      x++;
    }
  for (int xi = 0; xi < n_exec; xi++) {
    batch_slot *sl = &vs->slots[xi];
    vs->n_slots++;
    sl->reqs = calloc(max_rows, sizeof *sl->reqs);
    sl->staged = calloc(vs->n_inputs ? vs->n_inputs : 1, sizeof *sl->staged);
    sl->stages = calloc(vs->n_inputs ? vs->n_inputs : 1, sizeof *sl->stages);
    sl->copies_cap = max_rows * (vs->n_inputs ? vs->n_inputs : 1);
    sl->copies = calloc(sl->copies_cap, sizeof *sl->copies);
    if (!sl->reqs || !sl->staged || !sl->stages || !sl->copies)
      return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    // one device segment per request and input at most (a request has a row at least)
    int takes_device = 0;
    for (size_t k = 0; k < vs->n_inputs; k++) takes_device |= eng_model_device_input(v->model, sl->instance, k) >= 0;
    if (takes_device) {
      sl->segs_cap = max_rows * vs->n_inputs;
      sl->segs = calloc(sl->segs_cap, sizeof *sl->segs);
      if (!sl->segs) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    }
    if (!c.dynamic || max_rows < 2) continue;
    // A GPU instance gathers into its own pinned staging (job->stage); the
    // host buffer would only serve if that fell short, so it is grown then.
    if (eng_model_instance_device(v->model, sl->instance) >= 0) continue;
    // Staging for a full batch, sized now so the request path never allocates.
    for (size_t k = 0; k < vs->n_inputs; k++) {
      const eng_io *io = eng_model_input(v->model, k);
      int dynamic = 0;
      for (int d = 0; d < io->ndims; d++) dynamic |= io->dims[d] < 0;
      if (dynamic) continue;  // grown on first use
      int64_t numel = eng_numel(io->ndims, io->dims);
      size_t bytes = max_rows * (size_t)numel * dtype_size(io->dt);  // <= 1 TiB (config_validate)
      // past the budget, grown on first use like a dynamic input: a config
      // override's max_batch_size x instances must not reserve terabytes
      if (bytes > STAGE_EAGER_BUDGET - eager_bytes) continue;
      eager_bytes += bytes;
      if (bytes && !(sl->stages[k].buf = malloc(bytes)))
        return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory for a %zu-byte staging buffer", bytes);
      sl->stages[k].cap = bytes;
    }
  }
  return 0;
}

int srv_sched_add_model(srv_sched *s, srv_model *m, err *e) {
  int rc = 0;
  for (size_t j = 0; rc == 0 && j < m->n_versions; j++) {
    srv_version *v = &m->versions[j];
    if (!v->model) continue;
    vsched *vs = calloc(1, sizeof *vs);
    if (!vs) rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    if (rc == 0) rc = build_version(s, m, v, vs, e);
    pthread_mutex_lock(&s->mu);
    if (rc == 0 && s->n_vs == s->cap_vs) {
      size_t cap = s->cap_vs ? 2 * s->cap_vs : 16;
      vsched **nv = realloc(s->vs, cap * sizeof *nv);
      if (nv) s->vs = nv, s->cap_vs = cap;
      else rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    }
    if (rc == 0) {
      s->vs[s->n_vs++] = vs;
      v->sched = vs;
    }
    pthread_mutex_unlock(&s->mu);
    if (rc) free_vsched(vs);
  }
  if (rc) srv_sched_remove_model(s, m);
  return rc;
}

void srv_sched_remove_model(srv_sched *s, srv_model *m) {
  for (size_t j = 0; j < m->n_versions; j++) {
    srv_version *v = &m->versions[j];
    vsched *vs = v->sched;
    if (!vs) continue;
    pthread_mutex_lock(&s->mu);
    vs->removing = 1;
    while (vs->running > 0) pthread_cond_wait(&s->idle, &s->mu);
    for (size_t i = 0; i < s->n_vs; i++)
      if (s->vs[i] == vs) {
        s->vs[i] = s->vs[--s->n_vs];
        break;
      }
    v->sched = NULL;
    pthread_mutex_unlock(&s->mu);
    free_vsched(vs);
  }
}

int srv_sched_create(srv_registry *reg, struct srv_server *srv, srv_sched **out, err *e) {
  srv_sched *s = calloc(1, sizeof *s);
  if (!s) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  s->tfd = -1;
  s->armed = INT64_MAX;
  s->reg = reg;
  s->srv = srv;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->idle, NULL);
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < srv_registry_n_models(reg); i++)
    rc = srv_sched_add_model(s, srv_registry_model_at(reg, i), e);
  int urc = 0;
  if (rc == 0 && (urc = uv_loop_init(&s->loop)) != 0) rc = err_set(e, ERR_INTERNAL, "uv_loop_init: %s", uv_strerror(urc));
  s->have_loop = rc == 0;
  if (rc == 0 && (urc = uv_async_init(&s->loop, &s->async, on_async)) != 0)
    rc = err_set(e, ERR_INTERNAL, "uv_async_init: %s", uv_strerror(urc));
  s->have_async = rc == 0;
  if (rc == 0 && (s->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)) < 0)
    rc = err_set(e, ERR_INTERNAL, "timerfd_create: %s", strerror(errno));
  if (rc == 0 && (urc = uv_poll_init(&s->loop, &s->timer, s->tfd)) != 0)
    rc = err_set(e, ERR_INTERNAL, "uv_poll_init (timerfd): %s", uv_strerror(urc));
  s->have_timer = rc == 0;
  if (rc == 0 && (urc = uv_poll_start(&s->timer, UV_READABLE, on_timer)) != 0)
    rc = err_set(e, ERR_INTERNAL, "uv_poll_start (timerfd): %s", uv_strerror(urc));
  if (rc) {
    srv_sched_destroy(s);  // only partly built: handles may not exist, destroy copes
    return rc;
  }
  s->async.data = s;
  s->timer.data = s;
  *out = s;
  return 0;
}

uv_loop_t *srv_sched_loop(srv_sched *s) { return &s->loop; }

int srv_sched_start(srv_sched *s, err *e) {
  if (pthread_create(&s->thread, NULL, loop_main, s) != 0)
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "cannot start the loop thread");
  s->started = 1;
  return 0;
}

void srv_sched_submit(srv_sched *s, srv_request *r) {
  pthread_mutex_lock(&s->mu);
  int was = s->kick;
  admit(s, r);
  arm_timer(s);
  // one wakeup for all the requests that arrive before the loop runs
  int wake = s->kick && !was;
  pthread_mutex_unlock(&s->mu);
  if (!wake) return;
  int rc = uv_async_send(&s->async);
  if (rc) srv_log(SRV_LOG_ERROR, "uv_async_send: %s", uv_strerror(rc));
}

int srv_sched_latency_stats(srv_sched *s, const srv_version *v, bat_lt_stats *out) {
  pthread_mutex_lock(&s->mu);
  const vsched *vs = v->sched;  // set and cleared under mu
  int rc = vs && vs->bat ? bat_latency_stats(vs->bat, out) : 0;
  pthread_mutex_unlock(&s->mu);
  return rc;
}

void srv_sched_stop(srv_sched *s, void (*on_close)(void *arg), void *arg) {
  if (!s->started) return;
  pthread_mutex_lock(&s->mu);
  s->stop_requested = 1;
  s->on_close = on_close;
  s->on_close_arg = arg;
  pthread_mutex_unlock(&s->mu);
  int rc = uv_async_send(&s->async);
  if (rc) srv_log(SRV_LOG_ERROR, "uv_async_send: %s", uv_strerror(rc));
  pthread_join(s->thread, NULL);
  s->started = 0;
}

void srv_sched_destroy(srv_sched *s) {
  if (!s) return;
  if (s->have_loop) {
    if (!s->closing) {
      // never stopped through the loop: close our handles and let their callbacks run
      if (s->have_async) uv_close((uv_handle_t *)&s->async, on_handle_closed);
      if (s->have_timer) uv_close((uv_handle_t *)&s->timer, on_handle_closed);
      uv_run(&s->loop, UV_RUN_DEFAULT);
    }
    int rc = uv_loop_close(&s->loop);
    if (rc) srv_log(SRV_LOG_WARN, "uv_loop_close: %s", uv_strerror(rc));
  }
  for (size_t i = 0; i < s->n_vs; i++) {
    s->vs[i]->v->sched = NULL;
    free_vsched(s->vs[i]);
  }
  free(s->vs);
  pthread_cond_destroy(&s->idle);
  if (s->tfd >= 0) close(s->tfd);  // after the loop closed its poll handle
  pthread_mutex_destroy(&s->mu);
  free(s);
}
