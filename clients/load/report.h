// report.h: one result per load level, printed as a table row on stdout and
// written as CSV (one row per level) and JSON (the same fields plus errors by
// status and a latency CDF, for clients/plot_load.py).
#ifndef INFERD_CLIENTS_LOAD_REPORT_H
#define INFERD_CLIENTS_LOAD_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "clients/load/cli.h"
#include "clients/load/model.h"
#include "clients/load/stats.h"
#include "kernels/base/err.h"

#define LD_CDF_POINTS 102  // percentiles 1..99, 99.9, 99.99, 100

extern const double ld_cdf_percentiles[LD_CDF_POINTS];

// --duration-s: one period of --report-every-s (what ended within it).
typedef struct ld_period {
  double start_s, seconds;  // from the start of the level
  ld_summary valid;         // the valid requests' latencies and counts
  uint64_t by_kind[LD_N_REQ_KINDS][LD_N_KINDS];
  uint64_t sent[LD_N_REQ_KINDS];
  double lag_p50_us, lag_p99_us, lag_max_us;  // schedule lag of the sends (open loop)
} ld_period;

void ld_period_fill(ld_period *p, const ld_window *w, double start_s);

typedef struct ld_result {
  ld_mode mode;
  double level;  // concurrency or requests/s
  int rows;      // rows per request (1 when the model does not batch)
  ld_summary s;  // the merged measured windows
  uint64_t errors[LD_N_KINDS];
  int windows;   // windows run at this level
  int measured;  // windows merged into s (the last <= 3)
  bool stable;
  bool streaming;    // the requests went on ModelStreamInfer streams
  bool have_server;  // srv holds the ModelStatistics delta over the measured windows
  ld_server_stats srv;
  uint64_t level_ok, level_errors;  // every answer of the level (ld_driver_totals), not only the measured windows
  double cdf_us[LD_CDF_POINTS];
  ld_mix mix;  // mix.on false: every request was valid
  // Every request of the level by kind (ld_driver_kind_totals): warm-up and drain included.
  uint64_t sent[LD_N_REQ_KINDS], by_kind[LD_N_REQ_KINDS][LD_N_KINDS];
  double lag_p50_us, lag_p99_us, lag_max_us;  // over the measured windows (open loop)
  ld_period *periods;                         // --duration-s: malloc'ed, owned by the result (ld_result_close)
  size_t n_periods;
} ld_result;

void ld_result_close(ld_result *r);

// Fills the summary, errors, lag and CDF of r from the merged window.
void ld_result_fill(ld_result *r, const ld_window *merged);

// Derived server numbers (microseconds per request, rows per execution); -1 when unknown.
double ld_result_server_us(const ld_result *r,
                           int which);  // 0 queue, 1 compute_input, 2 compute_infer, 3 compute_output
double ld_result_server_batch(const ld_result *r);

void ld_report_header(FILE *f, bool server_stats);
void ld_report_row(FILE *f, const ld_result *r, bool server_stats);
int ld_report_csv(const char *path, const ld_result *r, size_t n, err *e);
int ld_report_json(const char *path, const ld_result *r, size_t n, err *e);

#endif
