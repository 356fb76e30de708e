// endpoints.c: the HTTP routes on the loop thread: health for load
// balancers and orchestrators, and /metrics in Prometheus text format with
// Triton's metric names.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/http.h"
#include "server/server.h"

typedef struct sbuf {
  char *p;
  size_t len, cap;
  int oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
  if (b->oom) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (b->p && b->len + (size_t)n < b->cap) {
      b->len += (size_t)n;
      return;
    }
    size_t cap = b->cap ? b->cap * 2 : 4096;
    while (cap < b->len + (size_t)n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->oom = 1;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
}

typedef enum { M_SUCCESS, M_FAILURE, M_COUNT, M_EXEC, M_REQ_US, M_QUEUE_US, M_IN_US, M_INFER_US, M_OUT_US, M_PENDING, M_N } metric;

static const struct {
  const char *name, *type, *help;
} metrics[M_N] = {
    {"nv_inference_request_success", "counter", "Number of successful inference requests, all batch sizes"},
    {"nv_inference_request_failure", "counter", "Number of failed inference requests, all batch sizes"},
    {"nv_inference_count", "counter", "Number of inferences performed (batch elements)"},
    {"nv_inference_exec_count", "counter", "Number of model executions performed (batches)"},
    {"nv_inference_request_duration_us", "counter", "Cumulative inference request duration in microseconds"},
    {"nv_inference_queue_duration_us", "counter", "Cumulative inference queuing duration in microseconds"},
    {"nv_inference_compute_input_duration_us", "counter", "Cumulative compute input duration in microseconds"},
    {"nv_inference_compute_infer_duration_us", "counter", "Cumulative compute inference duration in microseconds"},
    {"nv_inference_compute_output_duration_us", "counter", "Cumulative inference compute output duration in microseconds"},
    {"nv_inference_pending_request_count", "gauge", "Instantaneous number of pending requests awaiting execution"},
};

static const char *reason_names[SRV_FAIL_N] = {"REJECTED", "CANCELED", "BACKEND", "OTHER"};

static void metrics_text(srv_server *s, sbuf *b) {
  for (int k = 0; k < M_N; k++) {
    sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", metrics[k].name, metrics[k].help, metrics[k].name, metrics[k].type);
    for (size_t i = 0; i < srv_registry_n_models(s->reg); i++) {
      srv_model *m = srv_registry_model_at(s->reg, i);
      for (size_t j = 0; j < m->n_versions; j++) {
        srv_version *v = &m->versions[j];
        if (!v->model) continue;
        srv_stats *st = &v->stats;
        const char *n = metrics[k].name;
        uint64_t x = 0;
        switch (k) {
          case M_SUCCESS: x = atomic_load(&st->success.count); break;
          case M_FAILURE:
            for (int r = 0; r < SRV_FAIL_N; r++)
              sb_printf(b, "%s{model=\"%s\",version=\"%s\",reason=\"%s\"} %llu\n", n, m->name, v->version_str,
                        reason_names[r], (unsigned long long)atomic_load(&st->fail_by_reason[r]));
            continue;
          case M_COUNT: x = atomic_load(&st->inference_count); break;
          case M_EXEC: x = atomic_load(&st->execution_count); break;
          case M_REQ_US: x = (atomic_load(&st->success.ns) + atomic_load(&st->fail.ns)) / 1000; break;
          case M_QUEUE_US: x = atomic_load(&st->queue.ns) / 1000; break;
          case M_IN_US: x = atomic_load(&st->compute_input.ns) / 1000; break;
          case M_INFER_US: x = atomic_load(&st->compute_infer.ns) / 1000; break;
          case M_OUT_US: x = atomic_load(&st->compute_output.ns) / 1000; break;
          case M_PENDING: {
            int64_t p = atomic_load(&st->pending);
            x = p > 0 ? (uint64_t)p : 0;
            break;
          }
        }
        sb_printf(b, "%s{model=\"%s\",version=\"%s\"} %llu\n", n, m->name, v->version_str, (unsigned long long)x);
      }
    }
  }
}

static void text(srv_http_response *resp, int status, const char *body) {
  resp->status = status;
  resp->content_type = "text/plain";
  resp->body = (char *)body;
  resp->len = strlen(body);
  resp->free_body = 0;
}

void srv_http_routes(void *ctx, const srv_http_request *req, srv_http_response *resp) {
  srv_server *s = ctx;
  atomic_fetch_add(&s->http_requests, 1);
  int get = strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0;
  const char *p = req->path;
  int known = strcmp(p, "/v2/health/live") == 0 || strcmp(p, "/v2/health/ready") == 0 || strcmp(p, "/metrics") == 0;
  if (!known) return text(resp, 404, "not found\n");
  if (!get) return text(resp, 405, "method not allowed\n");
  if (strcmp(p, "/v2/health/live") == 0) return text(resp, 200, "");
  if (strcmp(p, "/v2/health/ready") == 0) return srv_server_ready(s) ? text(resp, 200, "") : text(resp, 503, "");
  sbuf b = {0};
  metrics_text(s, &b);
  if (b.oom || !b.p) {
    free(b.p);
    return text(resp, 500, "out of memory\n");
  }
  resp->status = 200;
  resp->content_type = "text/plain; version=0.0.4";
  resp->body = b.p;
  resp->len = b.len;
  resp->free_body = 1;
}
