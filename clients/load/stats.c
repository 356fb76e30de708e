// stats.c: measurement windows, their summaries and the stability rule.
#include "clients/load/stats.h"

#include <math.h>
#include <string.h>

const char *ld_kind_name(int kind) {
  static const char *names[LD_N_KINDS] = {
      "OK",           "CANCELLED",       "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
      "NOT_FOUND",    "ALREADY_EXISTS",  "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
      "ABORTED",      "OUT_OF_RANGE",    "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
      "DATA_LOSS",    "UNAUTHENTICATED", "VALIDATION",        "CLIENT_DROPPED",     "NO_MESSAGE",
      "CLIENT_ERROR", "STREAM_ERROR"};
  return kind >= 0 && kind < LD_N_KINDS ? names[kind] : "?";
}

int ld_kind_from_status(int status) {
  return status > 0 && status <= 16 ? status : 2;  // UNKNOWN
}

int ld_window_init(ld_window *w) {
  memset(w, 0, sizeof *w);
  w->lat = ld_hist_create();
  w->lag = ld_hist_create();
  if (w->lat && w->lag) return 0;
  ld_window_close(w);
  return -1;
}

void ld_window_close(ld_window *w) {
  ld_hist_destroy(w->lat);
  ld_hist_destroy(w->lag);
  memset(w, 0, sizeof *w);
}

void ld_window_reset(ld_window *w) {
  ld_hist_reset(w->lat);
  ld_hist_reset(w->lag);
  w->ok = 0;
  memset(w->errors, 0, sizeof w->errors);
  memset(w->by_kind, 0, sizeof w->by_kind);
  memset(w->sent, 0, sizeof w->sent);
  w->duration_ns = 0;
}

void ld_window_merge(ld_window *dst, const ld_window *src) {
  ld_hist_merge(dst->lat, src->lat);
  ld_hist_merge(dst->lag, src->lag);
  dst->ok += src->ok;
  for (int k = 0; k < LD_N_KINDS; k++) dst->errors[k] += src->errors[k];
  for (int r = 0; r < LD_N_REQ_KINDS; r++) {
    dst->sent[r] += src->sent[r];
    for (int k = 0; k < LD_N_KINDS; k++) dst->by_kind[r][k] += src->by_kind[r][k];
  }
  dst->duration_ns += src->duration_ns;
}

uint64_t ld_window_errors(const ld_window *w) {
  uint64_t n = 0;
  for (int k = 1; k < LD_N_KINDS; k++) n += w->errors[k];
  return n;
}

void ld_window_summarize(const ld_window *w, ld_summary *s) {
  memset(s, 0, sizeof *s);
  s->ok = w->ok;
  s->errors = ld_window_errors(w);
  s->seconds = (double)w->duration_ns / 1e9;
  s->rps = s->seconds > 0 ? (double)w->ok / s->seconds : 0;
  s->avg_us = ld_hist_mean(w->lat) / 1e3;
  s->p50_us = (double)ld_hist_percentile(w->lat, 50) / 1e3;
  s->p90_us = (double)ld_hist_percentile(w->lat, 90) / 1e3;
  s->p95_us = (double)ld_hist_percentile(w->lat, 95) / 1e3;
  s->p99_us = (double)ld_hist_percentile(w->lat, 99) / 1e3;
  s->p999_us = (double)ld_hist_percentile(w->lat, 99.9) / 1e3;
  s->min_us = (double)ld_hist_min(w->lat) / 1e3;
  s->max_us = (double)ld_hist_max(w->lat) / 1e3;
}

static bool within(const double *x, size_t n, double pct) {
  double mean = 0;
  for (size_t i = 0; i < n; i++) mean += x[i];
  mean /= (double)n;
  if (mean == 0) return true;
  for (size_t i = 0; i < n; i++)
    if (fabs(x[i] - mean) > pct / 100.0 * fabs(mean)) return false;
  return true;
}

bool ld_stable(const ld_summary *s, size_t n, double pct) {
  if (n == 0) return false;
  enum { MAXN = 16 };
  if (n > MAXN) s += n - MAXN, n = MAXN;  // only the last windows matter
  double rps[MAXN], avg[MAXN], p50[MAXN];
  for (size_t i = 0; i < n; i++) rps[i] = s[i].rps, avg[i] = s[i].avg_us, p50[i] = s[i].p50_us;
  return within(rps, n, pct) && within(avg, n, pct) && within(p50, n, pct);
}
