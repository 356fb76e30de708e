// grpc_front.c: the gRPC C-core transport of the front end: the server, one
// completion queue and thread per worker, the dispatch of every completion
// to its call's file, a generic UNIMPLEMENTED answer for unknown methods,
// and the lifecycle: create, start, the graceful drain, destroy. Unary calls
// live in grpc_call.c, streams in grpc_stream.c, the helpers both share in
// grpc_shared.c; their shared types in grpc_front_internal.h.
#include "server/grpc/grpc_front.h"

#include <errno.h>
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_posix.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proto/grpc_offload.h"
#include "server/grpc/grpc_front_internal.h"
#include "server/grpc/rapid_reset.h"

#define DEFAULT_THREADS 2
#define DEFAULT_CALLS 16
#define DEFAULT_MAX_MSG (64 << 20)

// ---------------------------------------------------------------- unknown methods

static void arm_generic(cq_thread *t) {
  gen_call *c = calloc(1, sizeof *c);
  if (!c) {
    LOG("out of memory arming the generic request");
    return;
  }
  grpc_call_details_init(&c->details);
  grpc_metadata_array_init(&c->md);
  c->tag_new = (tag){TAG_GENERIC_NEW, c};
  c->tag_done = (tag){TAG_GENERIC_DONE, c};
  grpc_call_error rc =
      grpc_server_request_call(t->g->server, &c->call, &c->details, &c->md, t->cq, t->cq, &c->tag_new);
  if (rc != GRPC_CALL_OK) {
    if (!draining(t->g)) LOG("grpc_server_request_call failed: error %d", (int)rc);
    grpc_call_details_destroy(&c->details);
    grpc_metadata_array_destroy(&c->md);
    free(c);
  }
}

static void gen_free(gen_call *c) {
  grpc_slice_unref(c->msg);  // the empty slice when never set
  grpc_call_details_destroy(&c->details);
  grpc_metadata_array_destroy(&c->md);
  if (c->call) grpc_call_unref(c->call);
  free(c);
}

static void on_generic_new(cq_thread *t, gen_call *c, int ok) {
  if (!ok) {
    gen_free(c);
    return;
  }
  if (!draining(t->g)) arm_generic(t);
  char buf[512];
  snprintf(buf, sizeof buf, "method '%.*s' is not implemented", (int)GRPC_SLICE_LENGTH(c->details.method),
           (const char *)GRPC_SLICE_START_PTR(c->details.method));
  c->msg = grpc_slice_from_copied_string(buf);
  grpc_op ops[3];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[1].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
  ops[1].data.send_status_from_server.status = GRPC_STATUS_UNIMPLEMENTED;
  ops[1].data.send_status_from_server.status_details = &c->msg;
  ops[2].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
  ops[2].data.recv_close_on_server.cancelled = &c->close_cancelled;
  if (srv_grpc__start_batch(t, c->call, ops, 3, &c->tag_done, NULL) != GRPC_CALL_OK) {
    grpc_call_cancel(c->call, NULL);
    gen_free(c);
  }
}

// ---------------------------------------------------------------- CQ threads

static void dispatch(cq_thread *t, tag *tg, int ok) {
  switch (tg->kind) {
    case TAG_UNARY_NEW:
    case TAG_UNARY_CLOSE:
    case TAG_UNARY_SEND:
    case TAG_MAIL: srv_grpc__call_event(t, tg, ok); break;
    case TAG_STREAM_NEW:
    case TAG_STREAM_CLOSE:
    case TAG_STREAM_RECV:
    case TAG_STREAM_SEND:
    case TAG_STREAM_STATUS:
    case TAG_ASTREAM_NEW:
    case TAG_ASTREAM_CLOSE:
    case TAG_ASTREAM_RECV:
    case TAG_ASTREAM_SEND:
    case TAG_ASTREAM_STATUS: srv_grpc__stream_event(t, tg, ok); break;
    case TAG_GENERIC_NEW: on_generic_new(t, tg->obj, ok); break;
    case TAG_GENERIC_DONE: gen_free(tg->obj); break;
    case TAG_SHUTDOWN: {
      srv_grpc *g = tg->obj;
      pthread_mutex_lock(&g->mu);
      g->notified = 1;
      pthread_cond_broadcast(&g->cv);
      pthread_mutex_unlock(&g->mu);
      break;
    }
  }
}

static void *cq_main(void *arg) {
  cq_thread *t = arg;
  (void)pthread_setname_np(pthread_self(), "inferd-cq");  // per-thread CPU by name (tests/bench/serve_gpu)
  srv_grpc__tl_cq = t;
  for (;;) {
    grpc_event ev = grpc_completion_queue_next(t->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (ev.type == GRPC_QUEUE_SHUTDOWN) break;
    if (ev.type == GRPC_OP_COMPLETE) dispatch(t, ev.tag, ev.success);
  }
  return NULL;
}

// ---------------------------------------------------------------- lifecycle

static void teardown(srv_grpc *g);

srv_grpc_offload srv_grpc_transport_offload(const srv_grpc *g) { return g->offload; }

// The hand-off of the acceptor's thread (plaintext) or the TLS terminator's (the plaintext end of its
// socketpair): the core owns fd from here on, names the connection "fd:<n>" and closes fd when the
// connection ends.
static void hand_to_core(void *arg, int fd) {
  srv_grpc *g = arg;
  grpc_server_add_channel_from_fd(g->server, fd, g->fd_creds);
}

int srv_grpc_create(const srv_grpc_opts *o, const srv_method *methods, size_t n_methods,
                    srv_grpc **out, err *e) {
  *out = NULL;
  if (!o || !o->addr) return err_set(e, ERR_INVALID_ARGUMENT, "gRPC front end: no address given");
  for (size_t i = 0; i < n_methods; i++) {
    const srv_method *m = &methods[i];
    if (!m->path || m->path[0] != '/' || (m->unary != NULL) + (m->stream != NULL) + (m->astream != NULL) != 1)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "gRPC method %zu ('%s'): needs a '/pkg.Service/Method' path and exactly one of "
                     "unary/stream/astream", i, m->path ? m->path : "(null)");
  }
  srv_grpc *g = calloc(1, sizeof *g);
  if (!g) return err_set(e, ERR_RESOURCE_EXHAUSTED, "gRPC front end: out of memory");
  g->n_threads = o->n_threads > 0 ? o->n_threads : DEFAULT_THREADS;
  g->calls_per_thread = o->calls_per_thread > 0 ? o->calls_per_thread : DEFAULT_CALLS;
  g->busy_method = o->busy_method;  // a string literal of the caller's, or NULL
  g->busy_calls = o->busy_calls;
  atomic_init(&g->rr_ended, 0);
  g->stream_max_queued = o->stream_max_queued > 0 ? o->stream_max_queued : SRV_GRPC_DEFAULT_STREAM_MAX_QUEUED;
  g->stream_max_queued_bytes =
      (size_t)(o->stream_max_queued_bytes > 0 ? o->stream_max_queued_bytes : SRV_GRPC_DEFAULT_STREAM_MAX_QUEUED_BYTES);
  atomic_init(&g->stream_pause_log_us, 0);
  atomic_init(&g->stream_pauses, 0);
  g->rr_limit = o->rapid_reset_limit ? o->rapid_reset_limit : SRV_RR_DEFAULT_LIMIT;
  g->rr_min_deadline_ms = o->rapid_reset_min_deadline_ms < 0 ? 0
                          : o->rapid_reset_min_deadline_ms ? o->rapid_reset_min_deadline_ms
                                                           : SRV_RR_DEFAULT_MIN_DEADLINE_MS;
  if (g->rr_limit > 0 && srv_rr_create(g->rr_limit, g->rr_min_deadline_ms, &g->rr, e) != 0) {
    free(g);
    return e ? e->code : ERR_INTERNAL;
  }
  atomic_init(&g->streams_ending, 0);
  atomic_init(&g->draining, 0);
  g->shutdown_tag = (tag){TAG_SHUTDOWN, g};
  pthread_mutex_init(&g->mu, NULL);
  pthread_mutex_init(&g->live_mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&g->cv, &ca);
  pthread_cond_init(&g->live_cv, &ca);
  pthread_condattr_destroy(&ca);
  grpc_init();
  g->offload = o->transport_offload  ? SRV_GRPC_OFFLOAD_ON
                : grpc_offload_decline() ? SRV_GRPC_OFFLOAD_OFF
                                         : SRV_GRPC_OFFLOAD_UNKNOWN;

  g->methods = calloc(n_methods ? n_methods : 1, sizeof *g->methods);
  g->threads = calloc((size_t)g->n_threads, sizeof *g->threads);
  if (!g->methods || !g->threads) {
    err_set(e, ERR_RESOURCE_EXHAUSTED, "gRPC front end: out of memory");
    goto fail;
  }
  g->n_methods = n_methods;
  for (int i = 0; i < g->n_threads; i++) {
    cq_thread *t = &g->threads[i];
    t->g = g;
    t->idx = i;
    // writer first: a close is not held off by a steady stream of answers
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&t->gate, &ra);
    pthread_rwlockattr_destroy(&ra);
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    atomic_init(&t->returned, NULL);
    atomic_init(&t->mail, NULL);
    t->mail_tag = (tag){TAG_MAIL, t};
  }

  int max_recv = o->max_recv_bytes ? o->max_recv_bytes : DEFAULT_MAX_MSG;
  int max_send = o->max_send_bytes ? o->max_send_bytes : DEFAULT_MAX_MSG;
  grpc_arg args[8];
  args[0].type = GRPC_ARG_INTEGER;
  args[0].key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
  args[0].value.integer = max_recv;
  args[1].type = GRPC_ARG_INTEGER;
  args[1].key = GRPC_ARG_MAX_SEND_MESSAGE_LENGTH;
  args[1].value.integer = max_send;
  // Without this a second server on a busy port silently shares it.
  args[2].type = GRPC_ARG_INTEGER;
  args[2].key = GRPC_ARG_ALLOW_REUSEPORT;
  args[2].value.integer = 0;
  // One connection may not hold more calls than this (HTTP/2 SETTINGS): a client cannot pin the server's
  // memory with a single connection's streams.
  args[3].type = GRPC_ARG_INTEGER;
  args[3].key = GRPC_ARG_MAX_CONCURRENT_STREAMS;
  args[3].value.integer = o->max_streams > 0 ? o->max_streams : SRV_GRPC_DEFAULT_MAX_STREAMS;
  // Idle connections (a preface and nothing more: probe F5 held 400 for a minute) get GOAWAY; a client
  // reconnects transparently on its next call, so 5 minutes costs a busy client nothing and bounds a
  // forgotten or hostile one (the HTTP port closes idle ones after 60 s).
  size_t n_args = 4;
  if (o->max_idle_ms >= 0) {
    args[n_args].type = GRPC_ARG_INTEGER;
    args[n_args].key = GRPC_ARG_MAX_CONNECTION_IDLE_MS;
    args[n_args++].value.integer = o->max_idle_ms ? o->max_idle_ms : SRV_GRPC_DEFAULT_MAX_IDLE_MS;
  }
  // gRPC's own default is 120 s, during which a stalled TLS handshake holds its connection.
  args[n_args].type = GRPC_ARG_INTEGER;
  args[n_args].key = GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS;
  args[n_args++].value.integer = o->handshake_ms > 0 ? o->handshake_ms : SRV_GRPC_DEFAULT_HANDSHAKE_MS;
  args[n_args].type = GRPC_ARG_INTEGER;
  args[n_args].key = GRPC_ARG_HTTP2_MAX_FRAME_SIZE;
  args[n_args++].value.integer = o->max_frame_bytes > 0 ? o->max_frame_bytes : SRV_GRPC_DEFAULT_MAX_FRAME_BYTES;
  if (o->stream_window_bytes > 0) {  // else gRPC's own window and its BDP probe
    args[n_args].type = GRPC_ARG_INTEGER;
    args[n_args].key = GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES;
    args[n_args++].value.integer = o->stream_window_bytes;
  }
  grpc_channel_args ch_args = {n_args, args};
  g->server = grpc_server_create(&ch_args, NULL);
  if (!g->server) {
    err_set(e, ERR_INTERNAL, "gRPC front end: grpc_server_create failed");
    goto fail;
  }
  for (int i = 0; i < g->n_threads; i++) {
    g->threads[i].cq = grpc_completion_queue_create_for_next(NULL);
    if (!g->threads[i].cq) {
      err_set(e, ERR_INTERNAL, "gRPC front end: cannot create completion queue %d", i);
      goto fail;
    }
    grpc_server_register_completion_queue(g->server, g->threads[i].cq, NULL);
  }
  for (size_t i = 0; i < n_methods; i++) {
    g->methods[i].m = methods[i];
    g->methods[i].handle = grpc_server_register_method(
        g->server, methods[i].path, NULL,
        methods[i].unary ? GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER : GRPC_SRM_PAYLOAD_NONE, 0);
    if (!g->methods[i].handle) {
      err_set(e, ERR_INVALID_ARGUMENT, "gRPC front end: cannot register method '%s' (registered twice?)",
              methods[i].path);
      goto fail;
    }
  }
  // inferd listens and hands connections over (grpc_accept.h), so the port has a connection cap and
  // outlives EMFILE, which gRPC 1.51's own listener does not; with TLS each goes through the terminator
  // (grpc_tls.h) first, since the core takes an accepted descriptor only with insecure credentials.
  int cap = o->max_connections > 0 ? o->max_connections : srv_gacc_default_max_conns();
  if (o->tls && o->max_connections <= 0)
    cap = cap / SRV_GRPC_TLS_FDS_PER_CONN > 0 ? cap / SRV_GRPC_TLS_FDS_PER_CONN : 1;
  g->fd_creds = grpc_insecure_server_credentials_create();
  if (!g->fd_creds) {
    err_set(e, ERR_INTERNAL, "gRPC front end: cannot create insecure credentials");
    goto fail;
  }
  if (o->tls) {
    srv_gtls_opts to = {.certs = o->tls->certs,
                        .handshake_ms = o->handshake_ms > 0 ? o->handshake_ms : SRV_GRPC_DEFAULT_HANDSHAKE_MS,
                        .hand = hand_to_core, .arg = g};
    if (srv_gtls_create(&to, &g->relay, e) != 0) goto fail;
  }
  if (srv_gacc_create(o->addr, cap, SRV_GACC_PREFACE_MS, &g->acc, e) != 0) goto fail;
  g->port = srv_gacc_port(g->acc);
  *out = g;
  return 0;

fail:
  teardown(g);
  return e ? (int)e->code : ERR_INTERNAL;
}

int srv_grpc_port(const srv_grpc *g) { return g->port; }

int srv_grpc_draining(const srv_grpc *g) { return draining(g); }

static int calls_for(const srv_grpc *g, const reg_method *rm) {
  if (g->busy_method && g->busy_calls > 0 && strcmp(rm->m.path, g->busy_method) == 0) return g->busy_calls;
  return g->calls_per_thread;
}

int srv_grpc_start(srv_grpc *g, err *e) {
  if (g->started || g->shut) return err_set(e, ERR_FAILED_PRECONDITION, "gRPC front end: already started");
  grpc_server_start(g->server);
  g->started = 1;
  // Pre-post from here: the threads do not run yet, so each pool has one user.
  for (int i = 0; i < g->n_threads; i++) {
    cq_thread *t = &g->threads[i];
    for (size_t m = 0; m < g->n_methods; m++)
      for (int k = 0; k < calls_for(g, &g->methods[m]); k++) {
        if (g->methods[m].m.unary) srv_grpc__arm_unary(t, &g->methods[m]);
        else if (g->methods[m].m.astream) srv_grpc__arm_astream(t, &g->methods[m]);
        else srv_grpc__arm_stream(t, &g->methods[m]);
      }
    arm_generic(t);
  }
  for (int i = 0; i < g->n_threads; i++) {
    cq_thread *t = &g->threads[i];
    int rc = pthread_create(&t->th, NULL, cq_main, t);
    if (rc != 0) {
      err_set(e, ERR_RESOURCE_EXHAUSTED, "gRPC front end: cannot start CQ thread %d: %s", i, strerror(rc));
      srv_grpc_shutdown(g, 0);  // joins those already running, drains every CQ
      return (int)e->code;
    }
    t->th_started = 1;
  }
  if (g->relay && srv_gtls_start(g->relay, e) != 0) {
    srv_grpc_shutdown(g, 0);
    return (int)e->code;
  }
  srv_gacc_hand_fn hand = g->relay ? srv_gtls_take : hand_to_core;  // TLS: through the terminator first
  if (g->acc && srv_gacc_start(g->acc, hand, g->relay ? (void *)g->relay : g, e) != 0) {
    srv_grpc_shutdown(g, 0);
    return (int)e->code;
  }
  return 0;
}

// Closes every CQ (no batch starts afterwards) and drains those without a
// thread on this thread.
static void close_cqs(srv_grpc *g) {
  if (!g->threads) return;
  for (int i = 0; i < g->n_threads; i++) {
    cq_thread *t = &g->threads[i];
    if (!t->cq) continue;
    pthread_rwlock_wrlock(&t->gate);
    pthread_mutex_lock(&t->mu);
    t->closed = 1;
    pthread_mutex_unlock(&t->mu);
    grpc_completion_queue_shutdown(t->cq);
    pthread_rwlock_unlock(&t->gate);
  }
  for (int i = 0; i < g->n_threads; i++) {
    cq_thread *t = &g->threads[i];
    if (t->th_started) {
      pthread_join(t->th, NULL);
      t->th_started = 0;
    } else if (t->cq) {
      cq_main(t);
    }
  }
}

// Waits until no stream has a call, or until (CLOCK_MONOTONIC) passed;
// returns how many are left.
static int wait_streams_ended(srv_grpc *g, const struct timespec *until) {
  int left = 0;
  pthread_mutex_lock(&g->live_mu);
  while (g->live && pthread_cond_timedwait(&g->live_cv, &g->live_mu, until) != ETIMEDOUT) {
  }
  for (srv_stream *s = g->live; s; s = s->live_next) left++;
  pthread_mutex_unlock(&g->live_mu);
  return left;
}

// The drain, in two steps.
// 1. Streams end while the connection is still open: each stops reading,
//    answers what it took and sends its status (UNAVAILABLE, "the server is
//    shutting down"); this waits until every one has completed. Unary calls
//    are served as before meanwhile.
// 2. grpc_server_shutdown_and_notify: the core sends a first GOAWAY and a
//    PING, and only after the PING's ack the final GOAWAY; the connection
//    closes as soon as its last call ends after that. A client that has
//    acked the PING has read every frame before it, so each stream's status,
//    written in step 1, has reached it. The order matters: when the status
//    went out after the GOAWAY (streams ended together with it), the last
//    stream's status was the last write before the close, while the client
//    was still sending on its streams; its write met the closed socket
//    (EPIPE) and its transport failed every stream still unread with
//    UNAVAILABLE "Stream removed (sendmsg: Broken pipe)" instead of the
//    status already in its receive buffer (test_shutdown_streams).
void srv_grpc_shutdown(srv_grpc *g, int grace_ms) {
  if (g->shut) return;
  g->shut = 1;
  atomic_store_explicit(&g->streams_ending, 1, memory_order_release);
  if (!g->threads || !g->threads[0].cq || !g->threads[0].th_started) {
    srv_gacc_stop(g->acc);
    srv_gtls_stop(g->relay, 0);
    atomic_store_explicit(&g->draining, 1, memory_order_release);
    if (!g->threads || !g->threads[0].cq) return;  // create failed early: nothing was queued
    // Never served (or no thread came up): nothing to drain, only the notify
    // tag to collect, which close_cqs does on this thread.
    grpc_server_shutdown_and_notify(g->server, g->threads[0].cq, &g->shutdown_tag);
    grpc_server_cancel_all_calls(g->server);
    close_cqs(g);
    return;
  }
  struct timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  int64_t ns = until.tv_nsec + (int64_t)(grace_ms > 0 ? grace_ms : 0) % 1000 * 1000000;
  until.tv_sec += (grace_ms > 0 ? grace_ms : 0) / 1000 + ns / 1000000000;
  until.tv_nsec = ns % 1000000000;

  srv_grpc__end_live_streams(g);
  int left = wait_streams_ended(g, &until);
  if (left) LOG("shutdown: %d stream(s) still unanswered at the end of the grace; closing anyway", left);
  atomic_store_explicit(&g->draining, 1, memory_order_release);
  // No connection is handed to the core once it shuts down: the listener closes here, where gRPC's own
  // would (new connects are refused from now on).
  srv_gacc_stop(g->acc);
  // Nor one whose TLS handshake ends from here on; the relays already handed over go on carrying the
  // GOAWAY and the last answers.
  srv_gtls_drain(g->relay);
  grpc_server_shutdown_and_notify(g->server, g->threads[0].cq, &g->shutdown_tag);
  srv_grpc__end_live_streams(g);  // one matched by a request posted before step 1 may have joined since
  pthread_mutex_lock(&g->mu);
  while (!g->notified) {
    if (pthread_cond_timedwait(&g->cv, &g->mu, &until) == ETIMEDOUT) break;
  }
  if (!g->notified) {
    pthread_mutex_unlock(&g->mu);
    LOG("shutdown: grace of %d ms over, cancelling the calls left", grace_ms);
    grpc_server_cancel_all_calls(g->server);
    pthread_mutex_lock(&g->mu);
    while (!g->notified) pthread_cond_wait(&g->cv, &g->mu);
  }
  pthread_mutex_unlock(&g->mu);
  close_cqs(g);
  // The core has closed every connection: the relays flush what it wrote last to their clients.
  srv_gtls_stop(g->relay, SRV_GRPC_TLS_FLUSH_MS);
}

static void free_pool(srv_call *c) {
  while (c) {
    srv_call *n = c->next;
    free(c);
    c = n;
  }
}

// Releases everything; the server, if any, is shut down or was never started.
static void teardown(srv_grpc *g) {
  if (g->server) {
    if (!g->shut) srv_grpc_shutdown(g, 0);
    grpc_server_destroy(g->server);
  } else {
    close_cqs(g);
  }
  for (int i = 0; g->threads && i < g->n_threads; i++) {
    cq_thread *t = &g->threads[i];
    if (t->cq) grpc_completion_queue_destroy(t->cq);
    free_pool(t->pool);
    free_pool(atomic_load(&t->returned));
    free(t->scratch);
    pthread_rwlock_destroy(&t->gate);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
  }
  free(g->threads);
  free(g->methods);
  srv_gacc_destroy(g->acc);
  srv_gtls_destroy(g->relay);
  if (g->fd_creds) grpc_server_credentials_release(g->fd_creds);
  srv_rr_destroy(g->rr);
  pthread_mutex_destroy(&g->mu);
  pthread_mutex_destroy(&g->live_mu);
  pthread_cond_destroy(&g->live_cv);
  pthread_cond_destroy(&g->cv);
  free(g);
  grpc_shutdown();
}

void srv_grpc_destroy(srv_grpc *g) {
  if (!g) return;
  if (!g->shut) srv_grpc_shutdown(g, 0);
  // A handler still holding a call would touch its context (and its thread's
  // mutex) when it answers; wait for it rather than free under it.
  for (int i = 0; g->threads && i < g->n_threads; i++) {
    cq_thread *t = &g->threads[i];
    pthread_mutex_lock(&t->mu);
    while (t->held > 0) {
      LOG("destroy: waiting for %d unanswered call(s) on CQ %d", t->held, i);
      pthread_cond_wait(&t->cv, &t->mu);
    }
    pthread_mutex_unlock(&t->mu);
  }
  teardown(g);
}
