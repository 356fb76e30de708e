// http_loop.c: the HTTP front end's loop thread (http_loop.h). Before it,
// HTTP shared the scheduler's loop: a 30 MB gzip JSON bomb's inflation and
// scan held that thread ~0.3-0.9 s before its 413, and every model's timer
// driven batches waited as long (a gRPC client's p99 went from ~2.5 ms to
// ~0.7 s, tests/bench/RESULTS.md). One more thread keeps them apart.
#include "server/http/http_loop.h"

#include <pthread.h>
#include <stdlib.h>

#include "server/obs/log.h"

struct srv_hloop {
  uv_loop_t loop;
  uv_async_t stop;  // wakes the loop to close the caller's handles and its own
  pthread_t thread;
  int started;
  int stopped;
  void (*on_close)(void *);
  void *on_close_arg;  // set before the wakeup; uv_async_send orders it
};

static void on_closed(uv_handle_t *h) { (void)h; }

static void close_all(srv_hloop *h) {
  if (h->on_close) h->on_close(h->on_close_arg);
  uv_close((uv_handle_t *)&h->stop, on_closed);
}

static void on_stop(uv_async_t *a) { close_all(a->data); }

static void *loop_main(void *arg) {
  srv_hloop *h = arg;
  (void)pthread_setname_np(pthread_self(), "inferd-http");  // per-thread CPU by name
  int rc = uv_run(&h->loop, UV_RUN_DEFAULT);
  if (rc) srv_log(SRV_LOG_WARN, "HTTP loop ended with active handles");
  return NULL;
}

int srv_hloop_create(srv_hloop **out, err *e) {
  srv_hloop *h = calloc(1, sizeof *h);
  if (!h) return err_set(e, ERR_RESOURCE_EXHAUSTED, "HTTP loop: out of memory");
  int rc = uv_loop_init(&h->loop);
  if (rc) {
    free(h);
    return err_set(e, ERR_INTERNAL, "HTTP loop: uv_loop_init: %s", uv_strerror(rc));
  }
  rc = uv_async_init(&h->loop, &h->stop, on_stop);
  if (rc) {
    (void)uv_loop_close(&h->loop);
    free(h);
    return err_set(e, ERR_INTERNAL, "HTTP loop: uv_async_init: %s", uv_strerror(rc));
  }
  h->stop.data = h;
  *out = h;
  return 0;
}

uv_loop_t *srv_hloop_loop(srv_hloop *h) { return &h->loop; }

int srv_hloop_start(srv_hloop *h, err *e) {
  if (pthread_create(&h->thread, NULL, loop_main, h) != 0)
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "cannot start the HTTP loop thread");
  h->started = 1;
  return 0;
}

void srv_hloop_stop(srv_hloop *h, void (*on_close)(void *arg), void *arg) {
  if (!h || h->stopped) return;
  h->stopped = 1;
  h->on_close = on_close;
  h->on_close_arg = arg;
  if (!h->started) {  // never ran (a failed start): close everything here
    close_all(h);
    (void)uv_run(&h->loop, UV_RUN_DEFAULT);
    return;
  }
  int rc = uv_async_send(&h->stop);
  if (rc) srv_log(SRV_LOG_ERROR, "HTTP loop: uv_async_send: %s", uv_strerror(rc));
  pthread_join(h->thread, NULL);
  h->started = 0;
}

void srv_hloop_destroy(srv_hloop *h) {
  if (!h) return;
  srv_hloop_stop(h, NULL, NULL);  // a no-op when stopped; closes the async otherwise
  int rc = uv_loop_close(&h->loop);
  if (rc) srv_log(SRV_LOG_WARN, "HTTP loop: uv_loop_close: %s", uv_strerror(rc));
  free(h);
}
