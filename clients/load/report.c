// report.c: the table, CSV and JSON outputs of inferd-load.
#include "clients/load/report.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const double ld_cdf_percentiles[LD_CDF_POINTS] = {
    1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22,   23,    24, 25, 26,
    27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48,   49,    50, 51, 52,
    53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74,   75,    76, 77, 78,
    79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 99.9, 99.99, 100};

void ld_result_fill(ld_result *r, const ld_window *w) {
  ld_window_summarize(w, &r->s);
  memcpy(r->errors, w->errors, sizeof r->errors);
  r->lag_p50_us = (double)ld_hist_percentile(w->lag, 50) / 1e3;
  r->lag_p99_us = (double)ld_hist_percentile(w->lag, 99) / 1e3;
  r->lag_max_us = (double)ld_hist_max(w->lag) / 1e3;
  for (int i = 0; i < LD_CDF_POINTS; i++)
    r->cdf_us[i] = (double)ld_hist_percentile(w->lat, ld_cdf_percentiles[i]) / 1e3;
}

void ld_result_close(ld_result *r) {
  free(r->periods);
  r->periods = NULL;
  r->n_periods = 0;
}

void ld_period_fill(ld_period *p, const ld_window *w, double start_s) {
  memset(p, 0, sizeof *p);
  p->start_s = start_s;
  ld_window_summarize(w, &p->valid);
  p->seconds = p->valid.seconds;
  memcpy(p->by_kind, w->by_kind, sizeof p->by_kind);
  memcpy(p->sent, w->sent, sizeof p->sent);
  p->lag_p50_us = (double)ld_hist_percentile(w->lag, 50) / 1e3;
  p->lag_p99_us = (double)ld_hist_percentile(w->lag, 99) / 1e3;
  p->lag_max_us = (double)ld_hist_max(w->lag) / 1e3;
}

static double per(uint64_t ns, uint64_t count) {
  return count ? (double)ns / (double)count / 1e3 : 0;
}

double ld_result_server_us(const ld_result *r, int which) {
  if (!r->have_server) return -1;
  const ld_server_stats *s = &r->srv;
  switch (which) {
    case 0:
      return per(s->queue_ns, s->queue_count);
    case 1:
      return per(s->cin_ns, s->cin_count);
    case 2:
      return per(s->cinf_ns, s->cinf_count);
    case 3:
      return per(s->cout_ns, s->cout_count);
  }
  return -1;
}

double ld_result_server_batch(const ld_result *r) {
  if (!r->have_server) return -1;
  return r->srv.execution_count ? (double)r->srv.inference_count / (double)r->srv.execution_count : 0;
}

static const char *mode_name(ld_mode m) {
  return m == LD_OPEN ? "request_rate" : "concurrency";
}

// "0" or "INVALID_ARGUMENT=12,UNAVAILABLE=3".
static const char *errors_str(const ld_result *r, char *buf, size_t cap) {
  size_t off = 0;
  buf[0] = '\0';
  for (int k = 1; k < LD_N_KINDS && off < cap; k++)
    if (r->errors[k])
      off += (size_t)snprintf(buf + off, cap - off, "%s%s=%llu", off ? "," : "", ld_kind_name(k),
                              (unsigned long long)r->errors[k]);
  if (!off) snprintf(buf, cap, "0");
  return buf;
}

void ld_report_header(FILE *f, bool server_stats) {
  fprintf(f, "%-5s %8s %10s %10s %9s %9s %9s %9s %9s %9s", "mode", "level", "infer/s", "rows/s", "avg_us", "p50_us",
          "p90_us", "p95_us", "p99_us", "p99.9_us");
  if (server_stats) fprintf(f, " %9s %9s %9s %9s %6s", "srv_queue", "srv_in", "srv_infer", "srv_out", "batch");
  fprintf(f, "  errors\n");
  fflush(f);
}

void ld_report_row(FILE *f, const ld_result *r, bool server_stats) {
  char eb[512];
  const ld_summary *s = &r->s;
  fprintf(f, "%-5s %8g %10.1f %10.1f %9.0f %9.0f %9.0f %9.0f %9.0f %9.0f", r->mode == LD_OPEN ? "rate" : "conc",
          r->level, s->rps, s->rps * r->rows, s->avg_us, s->p50_us, s->p90_us, s->p95_us, s->p99_us, s->p999_us);
  if (server_stats) {
    if (r->have_server)
      fprintf(f, " %9.0f %9.0f %9.0f %9.0f %6.2f", ld_result_server_us(r, 0), ld_result_server_us(r, 1),
              ld_result_server_us(r, 2), ld_result_server_us(r, 3), ld_result_server_batch(r));
    else
      fprintf(f, " %9s %9s %9s %9s %6s", "-", "-", "-", "-", "-");
  }
  // --duration-s runs no stability windows: its periods are the measurement
  fprintf(f, "  %s%s\n", errors_str(r, eb, sizeof eb), r->stable || r->n_periods ? "" : "  (unstable)");
  fflush(f);
}

static int open_out(const char *path, FILE **f, err *e) {
  *f = fopen(path, "w");
  if (!*f) return err_set(e, ERR_INVALID_ARGUMENT, "cannot write '%s': %s", path, strerror(errno));
  return 0;
}

static int close_out(const char *path, FILE *f, err *e) {
  int bad = ferror(f);
  if (fclose(f) != 0 || bad) return err_set(e, ERR_INTERNAL, "error writing '%s'", path);
  return 0;
}

// Empty (CSV) or null (JSON) when unknown.
static void opt_num(FILE *f, double v, const char *none) {
  if (v < 0)
    fputs(none, f);
  else
    fprintf(f, "%.3f", v);
}

int ld_report_csv(const char *path, const ld_result *r, size_t n, err *e) {
  FILE *f;
  TRY(open_out(path, &f, e));
  fputs(
      "mode,level,throughput_rps,rows_per_s,avg_us,p50_us,p90_us,p95_us,p99_us,p999_us,errors,"
      "server_queue_us,server_compute_input_us,server_compute_infer_us,server_compute_output_us,"
      "server_avg_batch\n",
      f);
  for (size_t i = 0; i < n; i++) {
    const ld_summary *s = &r[i].s;
    fprintf(f, "%s,%g,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%llu", mode_name(r[i].mode), r[i].level, s->rps,
            s->rps * r[i].rows, s->avg_us, s->p50_us, s->p90_us, s->p95_us, s->p99_us, s->p999_us,
            (unsigned long long)s->errors);
    for (int k = 0; k < 4; k++) fputc(',', f), opt_num(f, ld_result_server_us(&r[i], k), "");
    fputc(',', f), opt_num(f, ld_result_server_batch(&r[i]), "");
    fputc('\n', f);
  }
  return close_out(path, f, e);
}

// {"sent": N, "OK": n, "CANCELLED": n, ...}: the statuses seen, OK always.
static void json_statuses(FILE *f, uint64_t sent, const uint64_t *by_status) {
  fprintf(f, "{\"sent\": %llu", (unsigned long long)sent);
  for (int k = 0; k < LD_N_KINDS; k++)
    if (k == 0 || by_status[k]) fprintf(f, ", \"%s\": %llu", ld_kind_name(k), (unsigned long long)by_status[k]);
  fputc('}', f);
}

static void json_kinds(FILE *f, const uint64_t *sent, const uint64_t (*by_kind)[LD_N_KINDS]) {
  fputc('{', f);
  for (int r = 0; r < LD_N_REQ_KINDS; r++) {
    fprintf(f, "%s\"%s\": ", r ? ", " : "", ld_req_kind_name(r));
    json_statuses(f, sent[r], by_kind[r]);
  }
  fputc('}', f);
}

// The request mix, the outcomes by kind over the whole level, the schedule
// lag and the --duration-s periods: what a soak reads (tests/bench/soak).
static void json_mix_kinds(FILE *f, const ld_result *x) {
  fputs("    \"mix\": ", f);
  if (x->mix.on) {
    fputc('{', f);
    for (int r = 0; r < LD_N_REQ_KINDS; r++)
      fprintf(f, "%s\"%s\": %g", r ? ", " : "", ld_req_kind_name(r), x->mix.pct[r]);
    fputc('}', f);
  } else {
    fputs("null", f);
  }
  fputs(",\n    \"kinds\": ", f);
  json_kinds(f, x->sent, (const uint64_t(*)[LD_N_KINDS])x->by_kind);
  fprintf(f, ",\n    \"lag_us\": {\"p50\": %.3f, \"p99\": %.3f, \"max\": %.3f},\n", x->lag_p50_us, x->lag_p99_us,
          x->lag_max_us);
  fputs("    \"periods\": [", f);
  for (size_t i = 0; i < x->n_periods; i++) {
    const ld_period *p = &x->periods[i];
    fprintf(f,
            "%s\n      {\"start_s\": %.3f, \"seconds\": %.6f, \"valid\": {\"ok\": %llu, \"errors\": %llu, "
            "\"p50_us\": %.3f, \"p99_us\": %.3f, \"max_us\": %.3f}, \"lag_us\": {\"p50\": %.3f, \"p99\": %.3f, "
            "\"max\": %.3f},\n       \"kinds\": ",
            i ? "," : "", p->start_s, p->seconds, (unsigned long long)p->valid.ok, (unsigned long long)p->valid.errors,
            p->valid.p50_us, p->valid.p99_us, p->valid.max_us, p->lag_p50_us, p->lag_p99_us, p->lag_max_us);
    json_kinds(f, p->sent, (const uint64_t(*)[LD_N_KINDS])p->by_kind);
    fputc('}', f);
  }
  fputs(x->n_periods ? "\n    ],\n" : "],\n", f);
}

int ld_report_json(const char *path, const ld_result *r, size_t n, err *e) {
  FILE *f;
  TRY(open_out(path, &f, e));
  fputs("[", f);
  for (size_t i = 0; i < n; i++) {
    const ld_result *x = &r[i];
    const ld_summary *s = &x->s;
    fprintf(f, "%s\n  {\"mode\": \"%s\", \"level\": %g, \"throughput_rps\": %.3f, \"rows_per_s\": %.3f, ", i ? "," : "",
            mode_name(x->mode), x->level, s->rps, s->rps * x->rows);
    fprintf(f,
            "\"avg_us\": %.3f, \"p50_us\": %.3f, \"p90_us\": %.3f, \"p95_us\": %.3f, \"p99_us\": %.3f, "
            "\"p999_us\": %.3f, \"min_us\": %.3f, \"max_us\": %.3f, \"errors\": %llu,\n",
            s->avg_us, s->p50_us, s->p90_us, s->p95_us, s->p99_us, s->p999_us, s->min_us, s->max_us,
            (unsigned long long)s->errors);
    static const char *srv_keys[] = {"server_queue_us", "server_compute_input_us", "server_compute_infer_us",
                                     "server_compute_output_us"};
    fputs("   ", f);
    for (int k = 0; k < 4; k++)
      fprintf(f, " \"%s\": ", srv_keys[k]), opt_num(f, ld_result_server_us(x, k), "null"), fputc(',', f);
    fputs(" \"server_avg_batch\": ", f);
    opt_num(f, ld_result_server_batch(x), "null");
    fprintf(f,
            ",\n    \"requests\": %llu, \"rows\": %d, \"duration_s\": %.6f, \"windows\": %d, "
            "\"measured_windows\": %d, \"stable\": %s, \"streaming\": %s,\n"
            "    \"level_ok\": %llu, \"level_errors\": %llu,\n",
            (unsigned long long)s->ok, x->rows, s->seconds, x->windows, x->measured, x->stable ? "true" : "false",
            x->streaming ? "true" : "false", (unsigned long long)x->level_ok, (unsigned long long)x->level_errors);
    fputs("    \"errors_by_status\": {", f);
    int first = 1;
    for (int k = 1; k < LD_N_KINDS; k++)
      if (x->errors[k]) {
        fprintf(f, "%s\"%s\": %llu", first ? "" : ", ", ld_kind_name(k), (unsigned long long)x->errors[k]);
        first = 0;
      }
    fputs("},\n", f);
    json_mix_kinds(f, x);
    fputs("    \"server\": ", f);
    if (x->have_server)
      fprintf(f,
              "{\"success_count\": %llu, \"fail_count\": %llu, \"inference_count\": %llu, "
              "\"execution_count\": %llu}",
              (unsigned long long)x->srv.success_count, (unsigned long long)x->srv.fail_count,
              (unsigned long long)x->srv.inference_count, (unsigned long long)x->srv.execution_count);
    else
      fputs("null", f);
    // [latency_us, fraction of requests at or below it], from the minimum (fraction 0): what
    // clients/plot_load.py draws. Empty when no request succeeded.
    fputs(",\n    \"cdf\": [", f);
    if (s->ok) {
      fprintf(f, "[%.3f, 0]", s->min_us);
      for (int k = 0; k < LD_CDF_POINTS; k++) fprintf(f, ", [%.3f, %g]", x->cdf_us[k], ld_cdf_percentiles[k] / 100);
    }
    fputs("]}", f);
  }
  fputs("\n]\n", f);
  return close_out(path, f, e);
}
