// cli.h: inferd-load's command line (perf_analyzer's option names) and the
// START:END:STEP range syntax. Parsing never exits or prints: it returns an
// err so main() decides the exit status (2 for usage errors) and tests can
// drive it.
#ifndef INFERD_CLIENTS_LOAD_CLI_H
#define INFERD_CLIENTS_LOAD_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "clients/load/mix.h"
#include "kernels/base/err.h"

#define LD_MAX_LEVELS 1000
#define LD_MAX_RANK 16
#define LD_MAX_PERIODS 10000  // --duration-s / --report-every-s

typedef struct ld_range {
  double start, end, step;
} ld_range;

// "START", "START:END" or "START:END:STEP" (END defaults to START, STEP to 1).
// integer: every part must be a whole number (concurrency). Needs
// 0 < START <= END, STEP > 0 and at most LD_MAX_LEVELS levels.
int ld_range_parse(const char *s, bool integer, ld_range *r, err *e);
// The levels START, START+STEP, ... <= END; writes at most cap, returns how many there are.
size_t ld_range_levels(const ld_range *r, double *out, size_t cap);

typedef enum ld_mode { LD_CLOSED = 0, LD_OPEN = 1 } ld_mode;
typedef enum ld_dist { LD_DIST_CONSTANT = 0, LD_DIST_POISSON = 1 } ld_dist;
typedef enum ld_data { LD_DATA_RANDOM = 0, LD_DATA_ZERO = 1, LD_DATA_PATH = 2 } ld_data;
typedef enum ld_shm_mode { LD_SHM_NONE = 0, LD_SHM_SYSTEM = 1, LD_SHM_CUDA = 2 } ld_shm_mode;

#define LD_OUTPUT_SHM_SIZE_DEFAULT 102400  // perf_analyzer's default

// --shape NAME:D1,D2,... (dims without the batch dimension).
typedef struct ld_shape_opt {
  char *name;
  int64_t dims[LD_MAX_RANK];
  size_t rank;
} ld_shape_opt;

// Caller-allocated; ld_opts_parse fills it, ld_opts_close frees what it holds.
// Strings point into argv except shapes[].name.
typedef struct ld_opts {
  const char *url;      // -u, default "localhost:8001"
  const char *model;    // -m, required
  const char *version;  // -x, default "" (the server's choice)
  ld_mode mode;         // LD_OPEN when --request-rate-range was given
  ld_range range;       // concurrency or requests/s
  ld_dist dist;
  int connections;  // 0: one per thread
  bool transport_offload;  // --grpc-transport-offload: gRPC's combiner may offload to its executor (proto/grpc_offload.h)
  int threads;      // 0: min(4, cores)
  int rows;         // batch rows per request, default 1
  ld_shape_opt *shapes;
  size_t n_shapes;
  ld_data data;
  const char *data_path;
  bool validate_identity;
  bool streaming;             // --streaming: requests go on ModelStreamInfer streams instead of unary calls
  ld_shm_mode shared_memory;  // --shared-memory, default none
  size_t output_shm_size;     // bytes per output region, default LD_OUTPUT_SHM_SIZE_DEFAULT

  int interval_ms;       // default 2000
  double stability_pct;  // default 10
  int max_trials;        // default 10
  int timeout_ms;        // per request, default 30000; 0: none
  bool server_stats;
  // --mix (open loop, unary): the kinds of mix.h, the cancel kind's delay
  // (default 0:1000 us) and the expire kind's deadline (default 1:500 us).
  ld_mix mix;
  ld_span cancel_after, expire;
  // --duration-s: one level run for this long (no stability windows), as
  // periods of --report-every-s (default: the whole run) reported one by one.
  double duration_s;  // 0: windows until stable
  double report_every_s;
  const char *csv, *json;
  uint64_t seed;  // default 1
  int verbose;
  bool help;  // -h: print usage, nothing else
} ld_opts;

// argv[0] is the program name. Returns 0 or ERR_INVALID_ARGUMENT with a message
// that names the option. On failure *o still holds what must be closed.
int ld_opts_parse(int argc, char **argv, ld_opts *o, err *e);
void ld_opts_close(ld_opts *o);
void ld_usage(FILE *f);

#endif
