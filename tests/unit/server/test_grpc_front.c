// test_grpc_front.c: drives server/grpc/grpc_front.c with a real C-core client:
// inline and deferred unary replies, failures, unknown methods, size limits,
// deadlines, a bidi stream, concurrency and the graceful drain.
#include "server/grpc/grpc_front.h"

#include <grpc/grpc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "grpc_test_client.h"

#define M_ECHO "/test.Svc/Echo"
#define M_LATER "/test.Svc/Later"
#define M_FAIL "/test.Svc/Fail"
#define M_HOLD "/test.Svc/Hold"
#define M_META "/test.Svc/Meta"
#define M_STREAM "/test.Svc/Stream"
#define M_ASTREAM "/test.Svc/AStream"
#define MAX_RECV 1024

static int64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static uint8_t *dup_bytes(const void *p, size_t n) {
  uint8_t *r = malloc(n ? n : 1);
  if (n) memcpy(r, p, n);
  return r;
}

static uint8_t *prefixed(const char *pre, const uint8_t *req, size_t len, size_t *out_len) {
  size_t pl = strlen(pre);
  uint8_t *r = malloc(pl + len);
  memcpy(r, pre, pl);
  memcpy(r + pl, req, len);
  *out_len = pl + len;
  return r;
}

// Polls a condition that another party sets with no way to be woken (the
// core's cancel notice, the drain flag); bounded so a bug fails, not hangs.
static int wait_until(int (*cond)(const void *), const void *arg, int timeout_ms) {
  int64_t end = now_us() + (int64_t)timeout_ms * 1000;
  while (!cond(arg)) {
    if (now_us() > end) return 0;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  return 1;
}

// ---------------------------------------------------------------- handlers

static void h_echo(void *ctx, srv_call *c, const uint8_t *req, size_t len) {
  (void)ctx;
  srv_call_reply(c, dup_bytes(req, len), len);
}

static void h_fail(void *ctx, srv_call *c, const uint8_t *req, size_t len) {
  (void)ctx, (void)req, (void)len;
  srv_call_fail(c, ERR_INVALID_ARGUMENT, "bad tensor 'x'");
}

static void h_meta(void *ctx, srv_call *c, const uint8_t *req, size_t len) {
  (void)ctx, (void)req, (void)len;
  char buf[256];
  int64_t d = srv_call_deadline_us(c);
  long left_ms = d == INT64_MAX ? -1 : (long)((d - now_us()) / 1000);
  int n = snprintf(buf, sizeof buf, "%s %ld %d", srv_call_method(c), left_ms, srv_call_cancelled(c));
  srv_call_reply(c, dup_bytes(buf, (size_t)n), (size_t)n);
}

// Deferred replies: the handler queues, a worker thread answers.
typedef struct job {
  struct job *next;
  srv_call *call;
  uint8_t *req;
  size_t len;
} job;

typedef struct worker {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  job *head, *tail;
  int stop;
  pthread_t th;
  atomic_int replied;
} worker;

static void h_later(void *ctx, srv_call *c, const uint8_t *req, size_t len) {
  worker *w = ctx;
  job *j = calloc(1, sizeof *j);
  j->call = c;
  j->req = dup_bytes(req, len);
  j->len = len;
  pthread_mutex_lock(&w->mu);
  if (w->tail) w->tail->next = j;
  else w->head = j;
  w->tail = j;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

static void *worker_main(void *arg) {
  worker *w = arg;
  pthread_mutex_lock(&w->mu);
  for (;;) {
    while (!w->head && !w->stop) pthread_cond_wait(&w->cv, &w->mu);
    if (!w->head) break;
    job *j = w->head;
    w->head = j->next;
    if (!w->head) w->tail = NULL;
    pthread_mutex_unlock(&w->mu);
    size_t n = 0;
    uint8_t *r = prefixed("later:", j->req, j->len, &n);
    int k = atomic_fetch_add(&w->replied, 1);  // before the reply, which wakes the client
    // every other answer through the CQ thread's mailbox, as a reply thread sends a batch's
    if (k % 2) srv_call_reply_queued(j->call, r, n);
    else srv_call_reply(j->call, r, n);
    free(j->req);
    free(j);
    pthread_mutex_lock(&w->mu);
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

// A call parked for the test to answer.
typedef struct hold {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  srv_call *call;
  int count;
} hold;

static void h_hold(void *ctx, srv_call *c, const uint8_t *req, size_t len) {
  (void)req, (void)len;
  hold *h = ctx;
  pthread_mutex_lock(&h->mu);
  h->call = c;
  h->count++;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
}

static srv_call *hold_take(hold *h, int timeout_ms) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += timeout_ms / 1000 + 1;
  pthread_mutex_lock(&h->mu);
  while (!h->call)
    if (pthread_cond_timedwait(&h->cv, &h->mu, &until) != 0) break;
  srv_call *c = h->call;
  h->call = NULL;
  pthread_mutex_unlock(&h->mu);
  return c;
}

static int h_stream(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *resp_len, err *e) {
  (void)ctx;
  if (len == 4 && memcmp(req, "boom", 4) == 0) return err_set(e, ERR_NOT_FOUND, "no symbol 'boom'");
  *resp = prefixed("re:", req, len, resp_len);
  return 0;
}

// An asynchronous stream's handler for a decoupled model's answers: message "k<n>" is
// answered n times ("a0", "a1", ...) with srv_stream_reply_more, then ended alone
// (srv_stream_reply_end); "f<n>" the same with a last answer "fin" (srv_stream_reply).
static void h_astream(void *ctx, srv_stream *st, const uint8_t *req, size_t len) {
  (void)ctx;
  int n = len >= 2 ? req[1] - '0' : 0;
  for (int i = 0; i < n; i++) {
    char a[16];
    snprintf(a, sizeof a, "a%d", i);
    size_t k = 0;
    uint8_t *m = prefixed(a, (const uint8_t *)"", 0, &k);
    srv_stream_reply_more(st, m, k);
  }
  if (len >= 1 && req[0] == 'f') {
    size_t k = 0;
    uint8_t *m = prefixed("fin", (const uint8_t *)"", 0, &k);
    srv_stream_reply(st, m, k);
  } else {
    srv_stream_reply_end(st);
  }
}

// ---------------------------------------------------------------- fixture

typedef struct fixture {
  worker w;
  hold h;
  srv_grpc *g;
  grpc_channel *ch;
} fixture;

static int start_server(fixture *f, int threads, srv_grpc **out) {
  srv_method methods[] = {
      {.path = M_ECHO, .unary = h_echo},  {.path = M_LATER, .unary = h_later, .ctx = &f->w},
      {.path = M_FAIL, .unary = h_fail},  {.path = M_HOLD, .unary = h_hold, .ctx = &f->h},
      {.path = M_META, .unary = h_meta},  {.path = M_STREAM, .stream = h_stream},
      {.path = M_ASTREAM, .astream = h_astream},
  };
  srv_grpc_opts o = {.addr = "127.0.0.1:0", .n_threads = threads, .calls_per_thread = 4,
                     .max_recv_bytes = MAX_RECV};
  err e = {0};
  int rc = srv_grpc_create(&o, methods, sizeof methods / sizeof methods[0], out, &e);
  if (rc == 0) rc = srv_grpc_start(*out, &e);
  if (rc) fprintf(stderr, "server: %s\n", e.msg);
  return rc;
}

static void fixture_init(fixture *f) {
  memset(f, 0, sizeof *f);
  pthread_mutex_init(&f->w.mu, NULL);
  pthread_cond_init(&f->w.cv, NULL);
  pthread_create(&f->w.th, NULL, worker_main, &f->w);
  pthread_mutex_init(&f->h.mu, NULL);
  pthread_cond_init(&f->h.cv, NULL);
}

static void fixture_close(fixture *f) {
  pthread_mutex_lock(&f->w.mu);
  f->w.stop = 1;
  pthread_cond_signal(&f->w.cv);
  pthread_mutex_unlock(&f->w.mu);
  pthread_join(f->w.th, NULL);
}

// ---------------------------------------------------------------- tests

static void test_unary_basics(fixture *f) {
  tc_result r;
  CHECK_EQ_INT(tc_unary(f->ch, M_ECHO, "hello", 5, 5000, &r), 0);
  CHECK_EQ_INT(r.status, GRPC_STATUS_OK);
  CHECK_EQ_INT(r.resp_len, 5);
  CHECK(r.resp && memcmp(r.resp, "hello", 5) == 0);
  tc_result_free(&r);

  CHECK_EQ_INT(tc_unary(f->ch, M_ECHO, "", 0, 5000, &r), 0);  // empty, but present
  CHECK_EQ_INT(r.status, GRPC_STATUS_OK);
  CHECK_EQ_INT(r.got_message, 1);
  CHECK_EQ_INT(r.resp_len, 0);
  tc_result_free(&r);

  int before = atomic_load(&f->w.replied);
  for (int i = 0; i < 20; i++) {
    char req[32], want[40];
    int n = snprintf(req, sizeof req, "req-%d", i);
    snprintf(want, sizeof want, "later:req-%d", i);
    CHECK_EQ_INT(tc_unary(f->ch, M_LATER, req, (size_t)n, 5000, &r), 0);
    CHECK_EQ_INT(r.status, GRPC_STATUS_OK);
    CHECK_EQ_INT(r.resp_len, strlen(want));
    CHECK(r.resp && memcmp(r.resp, want, strlen(want)) == 0);
    tc_result_free(&r);
  }
  CHECK_EQ_INT(atomic_load(&f->w.replied) - before, 20);

  CHECK_EQ_INT(tc_unary(f->ch, M_FAIL, "x", 1, 5000, &r), 0);
  CHECK_EQ_INT(r.status, GRPC_STATUS_INVALID_ARGUMENT);
  CHECK_EQ_STR(r.details, "bad tensor 'x'");
  CHECK_EQ_INT(r.got_message, 0);
  tc_result_free(&r);

  CHECK_EQ_INT(tc_unary(f->ch, M_ECHO, NULL, 0, 5000, &r), 0);  // no message at all
  CHECK_EQ_INT(r.status, GRPC_STATUS_INVALID_ARGUMENT);
  CHECK_CONTAINS(r.details, "missing");
  tc_result_free(&r);

  CHECK_EQ_INT(tc_unary(f->ch, "/x.Y/Z", "q", 1, 5000, &r), 0);
  CHECK_EQ_INT(r.status, GRPC_STATUS_UNIMPLEMENTED);
  CHECK_EQ_STR(r.details, "method '/x.Y/Z' is not implemented");
  tc_result_free(&r);

  CHECK_EQ_INT(tc_unary(f->ch, M_META, "", 0, 0, &r), 0);
  CHECK_EQ_INT(r.status, GRPC_STATUS_OK);
  if (r.resp) {
    r.resp[r.resp_len] = '\0';  // tc_unary leaves room for it
    CHECK_EQ_STR((char *)r.resp, M_META " -1 0");
  }
  tc_result_free(&r);

  CHECK_EQ_INT(tc_unary(f->ch, M_META, "", 0, 3000, &r), 0);
  CHECK_EQ_INT(r.status, GRPC_STATUS_OK);
  long left = -2;
  if (r.resp) {
    r.resp[r.resp_len] = '\0';
    sscanf((char *)r.resp, M_META " %ld", &left);
  }
  if (!(left > 1000 && left <= 3100)) fprintf(stderr, "meta reply: %s\n", r.resp ? (char *)r.resp : "(none)");
  CHECK(left > 1000 && left <= 3100);
  tc_result_free(&r);
}

static void test_size_limit(fixture *f) {
  uint8_t *big = calloc(1, MAX_RECV * 2);
  tc_result r;
  CHECK_EQ_INT(tc_unary(f->ch, M_ECHO, big, MAX_RECV * 2, 5000, &r), 0);
  CHECK_EQ_INT(r.status, GRPC_STATUS_RESOURCE_EXHAUSTED);
  tc_result_free(&r);
  free(big);
  CHECK_EQ_INT(tc_unary(f->ch, M_ECHO, "after", 5, 5000, &r), 0);  // same channel still fine
  CHECK_EQ_INT(r.status, GRPC_STATUS_OK);
  CHECK_EQ_INT(r.resp_len, 5);
  tc_result_free(&r);
}

static int call_cancelled(const void *c) { return srv_call_cancelled(c); }

static void test_deadline(fixture *f) {
  tc_result r;
  int64_t t0 = now_us();
  CHECK_EQ_INT(tc_unary(f->ch, M_HOLD, "slow", 4, 300, &r), 0);
  CHECK_EQ_INT(r.status, GRPC_STATUS_DEADLINE_EXCEEDED);
  tc_result_free(&r);
  srv_call *c = hold_take(&f->h, 5000);
  CHECK(c != NULL);
  if (!c) return;
  int64_t d = srv_call_deadline_us(c);
  CHECK(d > t0 && d <= t0 + 300 * 1000 + 50 * 1000);
  CHECK(wait_until(call_cancelled, c, 5000));
  CHECK_EQ_INT(srv_call_cancelled(c), 1);
  size_t n = 0;
  uint8_t *late = prefixed("too late", (const uint8_t *)"", 0, &n);
  srv_call_reply(c, late, n);  // harmless
  CHECK_EQ_INT(tc_unary(f->ch, M_ECHO, "ok", 2, 5000, &r), 0);
  CHECK_EQ_INT(r.status, GRPC_STATUS_OK);
  tc_result_free(&r);
}

static void test_stream(fixture *f) {
  tc_stream *s = tc_stream_open(f->ch, M_STREAM, 5000);
  CHECK(s != NULL);
  if (!s) return;
  const char *msgs[3] = {"one", "two", "three"};
  for (int i = 0; i < 3; i++) {
    uint8_t *resp;
    size_t n = 0;
    CHECK_EQ_INT(tc_stream_roundtrip(s, msgs[i], strlen(msgs[i]), &resp, &n), 0);
    char want[16];
    snprintf(want, sizeof want, "re:%s", msgs[i]);
    CHECK_EQ_INT(n, strlen(want));
    CHECK(resp && memcmp(resp, want, n) == 0);
    free(resp);
  }
  tc_result r;
  tc_stream_close(s, &r);
  CHECK_EQ_INT(r.status, GRPC_STATUS_OK);
  tc_result_free(&r);

  // A handler error ends the stream with its status and message.
  s = tc_stream_open(f->ch, M_STREAM, 5000);
  CHECK(s != NULL);
  if (!s) return;
  uint8_t *resp;
  size_t n = 0;
  CHECK_EQ_INT(tc_stream_roundtrip(s, "a", 1, &resp, &n), 0);
  free(resp);
  CHECK(tc_stream_roundtrip(s, "boom", 4, &resp, &n) != 0);
  free(resp);
  tc_stream_close(s, &r);
  CHECK_EQ_INT(r.status, GRPC_STATUS_NOT_FOUND);
  CHECK_EQ_STR(r.details, "no symbol 'boom'");
  tc_result_free(&r);
}

static void check_next(tc_stream *s, const char *want) {
  uint8_t *resp = NULL;
  size_t n = 0;
  CHECK_EQ_INT(tc_stream_recv(s, &resp, &n), 0);
  CHECK_EQ_INT(n, strlen(want));
  CHECK(resp && memcmp(resp, want, n) == 0);
  free(resp);
}

// Several answers to one message (a decoupled model's), in order, then the next message's; a message
// ended without a last answer sends nothing for it; the stream ends OK once all are answered.
static void test_astream_more(fixture *f) {
  tc_stream *s = tc_stream_open(f->ch, M_ASTREAM, 5000);
  CHECK(s != NULL);
  if (!s) return;
  uint8_t *resp;
  size_t n = 0;
  CHECK_EQ_INT(tc_stream_roundtrip(s, "k3", 2, &resp, &n), 0);
  CHECK(n == 2 && resp && memcmp(resp, "a0", 2) == 0);
  free(resp);
  check_next(s, "a1");
  check_next(s, "a2");
  // k3 ended without a last answer: the next message's answers come next, its last one too
  CHECK_EQ_INT(tc_stream_roundtrip(s, "f2", 2, &resp, &n), 0);
  CHECK(n == 2 && resp && memcmp(resp, "a0", 2) == 0);
  free(resp);
  check_next(s, "a1");
  check_next(s, "fin");
  tc_result r;
  tc_stream_close(s, &r);
  CHECK_EQ_INT(r.status, GRPC_STATUS_OK);
  tc_result_free(&r);
}

typedef struct load_arg {
  fixture *f;
  int id;
  int ok;
} load_arg;

static void *load_main(void *arg) {
  load_arg *a = arg;
  grpc_channel *ch = tc_channel(srv_grpc_port(a->f->g), 0);
  for (int i = 0; i < 200; i++) {
    char req[48], want[64];
    int n = snprintf(req, sizeof req, "t%d-c%d", a->id, i);
    int later = (i % 2) == 1;
    snprintf(want, sizeof want, "%s%s", later ? "later:" : "", req);
    tc_result r;
    if (tc_unary(ch, later ? M_LATER : M_ECHO, req, (size_t)n, 20000, &r) == 0 &&
        r.status == GRPC_STATUS_OK && r.resp_len == strlen(want) && memcmp(r.resp, want, r.resp_len) == 0)
      a->ok++;
    tc_result_free(&r);
  }
  grpc_channel_destroy(ch);
  return NULL;
}

static void test_concurrency(fixture *f) {
  enum { N = 16 };
  pthread_t th[N];
  load_arg a[N];
  for (int i = 0; i < N; i++) {
    a[i] = (load_arg){f, i, 0};
    pthread_create(&th[i], NULL, load_main, &a[i]);
  }
  int total = 0;
  for (int i = 0; i < N; i++) {
    pthread_join(th[i], NULL);
    total += a[i].ok;
  }
  CHECK_EQ_INT(total, N * 200);
}

static void test_busy_port(fixture *f) {
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", srv_grpc_port(f->g));
  srv_method m = {.path = M_ECHO, .unary = h_echo};
  srv_grpc_opts o = {.addr = addr};
  srv_grpc *g2 = NULL;
  err e = {0};
  CHECK_EQ_INT(srv_grpc_create(&o, &m, 1, &g2, &e), ERR_UNAVAILABLE);
  CHECK(g2 == NULL);
  CHECK_CONTAINS(e.msg, addr);

  srv_method bad = {.path = "/x.Y/Z", .unary = h_echo, .stream = h_stream};
  o.addr = "127.0.0.1:0";
  CHECK_EQ_INT(srv_grpc_create(&o, &bad, 1, &g2, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "/x.Y/Z");

  // Created and never started, then destroyed.
  CHECK_EQ_INT(srv_grpc_create(&o, &m, 1, &g2, &e), 0);
  CHECK(srv_grpc_port(g2) > 0);
  srv_grpc_destroy(g2);
}

// --- drain

typedef struct client_arg {
  int port;
  const char *method;
  tc_result r;
} client_arg;

static void *client_main(void *arg) {
  client_arg *a = arg;
  grpc_channel *ch = tc_channel(a->port, 0);
  tc_unary(ch, a->method, "pending", 7, 0, &a->r);
  grpc_channel_destroy(ch);
  return NULL;
}

typedef struct shut_arg {
  srv_grpc *g;
  int grace_ms;
  int64_t took_us;
} shut_arg;

static void *shut_main(void *arg) {
  shut_arg *a = arg;
  int64_t t0 = now_us();
  srv_grpc_shutdown(a->g, a->grace_ms);
  a->took_us = now_us() - t0;
  return NULL;
}

static int is_draining(const void *g) { return srv_grpc_draining(g); }

static void test_drain_answers_pending(fixture *f) {
  srv_grpc *g;
  if (start_server(f, 2, &g) != 0) {
    CHECK(!"server starts");
    return;
  }
  client_arg ca = {srv_grpc_port(g), M_HOLD, {0}};
  pthread_t ct, st;
  pthread_create(&ct, NULL, client_main, &ca);
  srv_call *c = hold_take(&f->h, 5000);
  CHECK(c != NULL);
  shut_arg sa = {g, 20000, 0};
  pthread_create(&st, NULL, shut_main, &sa);
  CHECK(wait_until(is_draining, g, 5000));
  if (c) {
    size_t n = 0;
    uint8_t *late = prefixed("drained", (const uint8_t *)"", 0, &n);
    srv_call_reply_queued(c, late, n);  // through the mailbox: the drain waits for it too
  }
  pthread_join(ct, NULL);
  pthread_join(st, NULL);
  CHECK_EQ_INT(ca.r.status, GRPC_STATUS_OK);
  CHECK_EQ_INT(ca.r.got_message, 1);
  CHECK_EQ_INT(ca.r.resp_len, 7);
  CHECK(ca.r.resp && memcmp(ca.r.resp, "drained", 7) == 0);
  CHECK(sa.took_us < 5 * 1000000);  // returned once drained, not at the end of the grace
  tc_result_free(&ca.r);
  srv_grpc_destroy(g);
}

static void test_drain_grace_expires(fixture *f) {
  srv_grpc *g;
  if (start_server(f, 2, &g) != 0) {
    CHECK(!"server starts");
    return;
  }
  client_arg ca = {srv_grpc_port(g), M_HOLD, {0}};
  pthread_t ct;
  pthread_create(&ct, NULL, client_main, &ca);
  srv_call *c = hold_take(&f->h, 5000);
  CHECK(c != NULL);
  int64_t t0 = now_us();
  srv_grpc_shutdown(g, 200);
  int64_t took = now_us() - t0;
  CHECK(took >= 200 * 1000 && took < 5 * 1000000);
  pthread_join(ct, NULL);
  CHECK(ca.r.status != GRPC_STATUS_OK);
  tc_result_free(&ca.r);
  if (c) {
    CHECK_EQ_INT(srv_call_cancelled(c), 1);
    size_t n = 0;
    uint8_t *late = prefixed("too late", (const uint8_t *)"", 0, &n);
    srv_call_reply_queued(c, late, n);  // the CQ is closed: sent (dropped) and freed here, no thread to wake
  }
  srv_grpc_destroy(g);
}

static void test_drain_idle(fixture *f) {
  srv_grpc *g;
  if (start_server(f, 3, &g) != 0) {
    CHECK(!"server starts");
    return;
  }
  grpc_channel *ch = tc_channel(srv_grpc_port(g), 0);
  tc_result r;
  CHECK_EQ_INT(tc_unary(ch, M_ECHO, "x", 1, 5000, &r), 0);
  CHECK_EQ_INT(r.status, GRPC_STATUS_OK);
  tc_result_free(&r);
  int64_t t0 = now_us();
  srv_grpc_shutdown(g, 20000);
  CHECK(now_us() - t0 < 2 * 1000000);
  CHECK_EQ_INT(srv_grpc_draining(g), 1);
  // A call after the drain fails cleanly.
  CHECK_EQ_INT(tc_unary(ch, M_ECHO, "x", 1, 2000, &r), 0);
  CHECK(r.status != GRPC_STATUS_OK);
  tc_result_free(&r);
  grpc_channel_destroy(ch);
  srv_grpc_destroy(g);
}

// Local calls (what the REST routes use): the handler's reply or failure
// reaches done with the bytes, or the code and message; cancel is seen by
// srv_call_cancelled; no deadline; the method is the one given.
typedef struct local_seen {
  int calls, code;
  uint8_t *resp;
  size_t len;
  char msg[64];
} local_seen;

static void local_done(void *arg, uint8_t *resp, size_t len, int code, const char *msg) {
  local_seen *ls = arg;
  ls->calls++;
  ls->resp = resp;
  ls->len = len;
  ls->code = code;
  snprintf(ls->msg, sizeof ls->msg, "%s", msg ? msg : "(null)");
}

static void test_local_calls(void) {
  local_seen ls = {0};
  srv_call *c = srv_call_create_local("/svc/Echo", local_done, &ls);
  CHECK(c != NULL);
  if (!c) return;
  CHECK_EQ_STR(srv_call_method(c), "/svc/Echo");
  CHECK(srv_call_deadline_us(c) == INT64_MAX);
  CHECK_EQ_INT(srv_call_cancelled(c), 0);
  srv_call_cancel_local(c);
  CHECK_EQ_INT(srv_call_cancelled(c), 1);
  uint8_t *b = malloc(3);
  memcpy(b, "abc", 3);
  srv_call_reply(c, b, 3);  // done owns b now
  CHECK_EQ_INT(ls.calls, 1);
  CHECK_EQ_INT(ls.code, 0);
  CHECK(ls.len == 3 && ls.resp && memcmp(ls.resp, "abc", 3) == 0);
  free(ls.resp);

  ls = (local_seen){0};
  c = srv_call_create_local("/svc/Fail", local_done, &ls);
  CHECK(c != NULL);
  if (!c) return;
  srv_call_fail(c, ERR_NOT_FOUND, "no such thing");
  CHECK_EQ_INT(ls.calls, 1);
  CHECK_EQ_INT(ls.code, ERR_NOT_FOUND);
  CHECK(ls.resp == NULL);
  CHECK_EQ_STR(ls.msg, "no such thing");
}

int main(void) {
  test_local_calls();
  grpc_init();  // the client side's own reference
  fixture f;
  fixture_init(&f);
  if (start_server(&f, 2, &f.g) != 0) {
    CHECK(!"server starts");
    CHECK_DONE();
  }
  f.ch = tc_channel(srv_grpc_port(f.g), 0);
  test_unary_basics(&f);
  test_size_limit(&f);
  test_deadline(&f);
  test_stream(&f);
  test_astream_more(&f);
  test_concurrency(&f);
  test_busy_port(&f);
  grpc_channel_destroy(f.ch);
  srv_grpc_shutdown(f.g, 5000);
  srv_grpc_destroy(f.g);

  test_drain_answers_pending(&f);
  test_drain_grace_expires(&f);
  test_drain_idle(&f);
  fixture_close(&f);
  grpc_shutdown();
  CHECK_DONE();
}
