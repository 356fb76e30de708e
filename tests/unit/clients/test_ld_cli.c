// test_ld_cli: clients/load/cli.c. The START:END:STEP ranges (levels made,
// every malformed form rejected with a message naming it) and the option
// parser (defaults, long/short/--opt=value forms, shapes, shared memory,
// the request mix and fixed-duration runs, usage errors); mix.c's drawing of
// kinds and spans.
#include <stdlib.h>

#include "check.h"
#include "clients/load/cli.h"
#include "clients/load/mix.h"
#include "clients/load/rng.h"

// --- ranges

static void check_levels(const char *s, bool integer, const double *want, size_t n_want) {
  ld_range r;
  err e = {0};
  int rc = ld_range_parse(s, integer, &r, &e);
  CHECK_EQ_INT(rc, 0);
  if (rc) {
    fprintf(stderr, "  %s: %s\n", s, e.msg);
    return;
  }
  double got[16];
  size_t n = ld_range_levels(&r, got, 16);
  CHECK_EQ_INT(n, n_want);
  for (size_t i = 0; i < n && i < n_want; i++) CHECK_NEAR(got[i], want[i], 1e-12, 0);
}

static void test_ranges(void) {
  check_levels("1:4:3", true, (double[]){1, 4}, 2);
  check_levels("1:4:1", true, (double[]){1, 2, 3, 4}, 4);
  check_levels("1:5:2", true, (double[]){1, 3, 5}, 3);
  check_levels("1:6:2", true, (double[]){1, 3, 5}, 3);  // END need not be hit
  check_levels("8", true, (double[]){8}, 1);
  check_levels("2:4", true, (double[]){2, 3, 4}, 3);  // STEP defaults to 1
  check_levels("100:500:100", false, (double[]){100, 200, 300, 400, 500}, 5);
  check_levels("0.1:0.3:0.1", false, (double[]){0.1, 0.2, 0.3}, 3);  // no float drift past END
  check_levels("200.5", false, (double[]){200.5}, 1);

  static const struct {
    const char *s;
    bool integer;
    const char *msg;
  } bad[] = {
      {"", true, "empty"},
      {"0", true, "START must be > 0"},
      {"-1:4", true, "START must be > 0"},
      {"4:1", true, "END is below START"},
      {"1:4:0", true, "STEP must be > 0"},
      {"1:4:-1", true, "STEP must be > 0"},
      {"1.5", true, "whole numbers"},
      {"a:4", true, "bad number 'a'"},
      {"1::2", true, "bad range"},
      {"1:2:3:4", true, "bad range"},
      {"1:4:", true, "bad range"},
      {"1:100000:1", true, "more than"},
      {"inf", false, "bad number"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ld_range r;
    err e = {0};
    int rc = ld_range_parse(bad[i].s, bad[i].integer, &r, &e);
    CHECK_EQ_INT(rc, ERR_INVALID_ARGUMENT);
    CHECK_CONTAINS(e.msg, bad[i].msg);
  }
}

// --- options

static int parse(ld_opts *o, err *e, int argc, char **argv) {
  return ld_opts_parse(argc, argv, o, e);
}
#define PARSE(o, e, ...)                                                              \
  parse(o, e, (int)(sizeof((char *[]){"inferd-load", __VA_ARGS__}) / sizeof(char *)), \
        (char *[]){"inferd-load", __VA_ARGS__})

static void test_defaults(void) {
  ld_opts o;
  err e = {0};
  CHECK_EQ_INT(PARSE(&o, &e, "-m", "mlp"), 0);
  CHECK_EQ_STR(o.url, "localhost:8001");
  CHECK_EQ_STR(o.model, "mlp");
  CHECK_EQ_STR(o.version, "");
  CHECK_EQ_INT(o.mode, LD_CLOSED);
  CHECK(o.range.start == 1 && o.range.end == 1 && o.range.step == 1);
  CHECK_EQ_INT(o.rows, 1);
  CHECK_EQ_INT(o.interval_ms, 2000);
  CHECK_NEAR(o.stability_pct, 10, 0, 0);
  CHECK_EQ_INT(o.max_trials, 10);
  CHECK_EQ_INT(o.timeout_ms, 30000);
  CHECK_EQ_INT(o.connections, 0);
  CHECK(!o.transport_offload);
  CHECK_EQ_INT(o.threads, 0);
  CHECK_EQ_INT(o.data, LD_DATA_RANDOM);
  CHECK_EQ_INT(o.seed, 1);
  CHECK(!o.validate_identity && !o.server_stats && !o.csv && !o.json);
  CHECK(!o.streaming);
  CHECK_EQ_INT(o.shared_memory, LD_SHM_NONE);
  CHECK_EQ_INT(o.output_shm_size, 102400);
  ld_opts_close(&o);
}

static void test_all_options(void) {
  ld_opts o;
  err e = {0};
  int rc =
      PARSE(&o, &e, "-u", "h:1", "--model-name=m", "-x", "2", "--request-rate-range", "100:300:100",
            "--request-distribution=poisson", "--connections", "3", "--grpc-transport-offload", "--threads=2", "-b", "8", "--shape", "A:3,4",
            "--shape=x:0:7", "--input-data", "zero", "--validate-identity", "-p", "500", "-s", "5.5", "-r", "4",
            "--timeout-ms", "0", "--server-stats", "-f", "out.csv", "--json", "out.json", "--seed", "0x10", "-v", "-v");
  CHECK_EQ_INT(rc, 0);
  if (rc) fprintf(stderr, "  %s\n", e.msg);
  CHECK_EQ_STR(o.url, "h:1");
  CHECK_EQ_STR(o.model, "m");
  CHECK_EQ_STR(o.version, "2");
  CHECK_EQ_INT(o.mode, LD_OPEN);
  CHECK(o.range.start == 100 && o.range.end == 300 && o.range.step == 100);
  CHECK_EQ_INT(o.dist, LD_DIST_POISSON);
  CHECK_EQ_INT(o.connections, 3);
  CHECK(o.transport_offload);
  CHECK_EQ_INT(o.threads, 2);
  CHECK_EQ_INT(o.rows, 8);
  CHECK_EQ_INT(o.n_shapes, 2);
  if (o.n_shapes == 2) {
    CHECK_EQ_STR(o.shapes[0].name, "A");
    CHECK_EQ_INT(o.shapes[0].rank, 2);
    CHECK_EQ_INT(o.shapes[0].dims[0], 3);
    CHECK_EQ_INT(o.shapes[0].dims[1], 4);
    CHECK_EQ_STR(o.shapes[1].name, "x:0");  // the last ':' splits
    CHECK_EQ_INT(o.shapes[1].rank, 1);
    CHECK_EQ_INT(o.shapes[1].dims[0], 7);
  }
  CHECK_EQ_INT(o.data, LD_DATA_ZERO);
  CHECK(o.validate_identity);
  CHECK_EQ_INT(o.interval_ms, 500);
  CHECK_NEAR(o.stability_pct, 5.5, 0, 0);
  CHECK_EQ_INT(o.max_trials, 4);
  CHECK_EQ_INT(o.timeout_ms, 0);
  CHECK(o.server_stats);
  CHECK_EQ_STR(o.csv, "out.csv");
  CHECK_EQ_STR(o.json, "out.json");
  CHECK_EQ_INT(o.seed, 16);
  CHECK_EQ_INT(o.verbose, 2);
  ld_opts_close(&o);

  CHECK_EQ_INT(PARSE(&o, &e, "-m", "m", "--input-data", "/tmp/x.bin", "--concurrency-range", "1:4:3"), 0);
  CHECK_EQ_INT(o.data, LD_DATA_PATH);
  CHECK_EQ_STR(o.data_path, "/tmp/x.bin");
  CHECK(o.mode == LD_CLOSED && o.range.end == 4);
  ld_opts_close(&o);

  CHECK_EQ_INT(PARSE(&o, &e, "-m", "m", "--shared-memory", "system", "--output-shared-memory-size=4096"), 0);
  CHECK_EQ_INT(o.shared_memory, LD_SHM_SYSTEM);
  CHECK_EQ_INT(o.output_shm_size, 4096);
  ld_opts_close(&o);
  CHECK_EQ_INT(PARSE(&o, &e, "-m", "m", "--shared-memory", "cuda"), 0);  // parsed anywhere; needs a GPU to run
  CHECK_EQ_INT(o.shared_memory, LD_SHM_CUDA);
  ld_opts_close(&o);
  // none is explicit too, and then validation is fine
  CHECK_EQ_INT(PARSE(&o, &e, "-m", "m", "--shared-memory=none", "--validate-identity"), 0);
  CHECK_EQ_INT(o.shared_memory, LD_SHM_NONE);
  CHECK(o.validate_identity);
  ld_opts_close(&o);

  // --streaming goes with either loop and with shared memory (only the request bytes change).
  CHECK_EQ_INT(PARSE(&o, &e, "-m", "m", "--streaming", "--request-rate-range", "200", "--shared-memory", "system"), 0);
  CHECK(o.streaming && o.mode == LD_OPEN && o.shared_memory == LD_SHM_SYSTEM);
  ld_opts_close(&o);
  CHECK_EQ_INT(PARSE(&o, &e, "-m", "m", "--streaming", "--validate-identity", "--concurrency-range", "4"), 0);
  CHECK(o.streaming && o.validate_identity && o.mode == LD_CLOSED);
  ld_opts_close(&o);
  CHECK_EQ_INT(PARSE(&o, &e, "-m", "m", "--streaming=yes"), ERR_INVALID_ARGUMENT);  // a flag takes no value
  ld_opts_close(&o);

  CHECK_EQ_INT(PARSE(&o, &e, "-h"), 0);  // help needs no model
  CHECK(o.help);
  ld_opts_close(&o);
}

static void test_usage_errors(void) {
  static const struct {
    const char *args[8];
    const char *msg;
  } bad[] = {
      {{"-u", "h:1"}, "-m MODEL is required"},
      {{"-m", "m", "--bogus"}, "unknown option '--bogus'"},
      {{"-m", "m", "-z"}, "unknown option '-z'"},
      {{"-m", "m", "stray"}, "unexpected argument 'stray'"},
      {{"-m"}, "--model-name needs a value"},
      {{"-m", "m", "--concurrency-range", "1:2", "--request-rate-range", "5"}, "exclude each other"},
      {{"-m", "m", "--concurrency-range", "0"}, "--concurrency-range: range '0'"},
      {{"-m", "m", "--request-distribution", "uniform"}, "constant or poisson"},
      {{"-m", "m", "--threads", "0"}, "--threads wants an integer"},
      {{"-m", "m", "--rows", "2x"}, "--rows wants an integer"},
      {{"-m", "m", "--shape", "A"}, "want NAME:D1,D2"},
      {{"-m", "m", "--shape", "A:3,,4"}, "bad dim"},
      {{"-m", "m", "--shape", "A:3,-1"}, "not a positive integer"},
      {{"-m", "m", "--shape", "A:3,"}, "trailing"},
      {{"-m", "m", "--stability-percentage", "0"}, "percentage"},
      {{"-m", "m", "--seed", "-3"}, "--seed"},
      {{"-m", "m", "--validate-identity=1"}, "takes no value"},
      {{"-m", "m", "--concurrency-range", "1:20000:19999"}, "at most 16384"},
      {{"-m", "m", "--shared-memory", "posix"}, "--shared-memory wants none, system or cuda, got 'posix'"},
      {{"-m", "m", "--validate-identity", "--shared-memory", "cuda"}, "cannot be used with --shared-memory"},
      {{"-m", "m", "--output-shared-memory-size", "0"}, "--output-shared-memory-size wants a byte count"},
      {{"-m", "m", "--output-shared-memory-size", "1k"}, "--output-shared-memory-size wants a byte count"},
      {{"-m", "m", "--shared-memory"}, "--shared-memory needs a value"},
      {{"-m", "m", "--validate-identity", "--shared-memory", "system"}, "cannot be used with --shared-memory"},
      {{"-m", "m", "--shared-memory=system", "--validate-identity"}, "share the output regions"},
      {{"-m", "m", "--request-rate-range", "9", "--mix", "55:5:30"}, "want VALID:INVALID:CANCEL:EXPIRE"},
      {{"-m", "m", "--request-rate-range", "9", "--mix", "55:5:30:10:0"}, "want VALID:INVALID:CANCEL:EXPIRE"},
      {{"-m", "m", "--request-rate-range", "9", "--mix", "50:5:30:10"}, "sums to 95, not 100"},
      {{"-m", "m", "--request-rate-range", "9", "--mix", "110:-10:0:0"}, "invalid is negative"},
      {{"-m", "m", "--request-rate-range", "9", "--mix", "a:5:30:10"}, "--mix 'a:5:30:10'"},
      {{"-m", "m", "--mix", "55:5:30:10", "--streaming"}, "cancel"},
      {{"-m", "m", "--request-rate-range", "9", "--mix", "55:5:30:10", "--streaming"}, "cancel"},
      {{"-m", "m", "--request-rate-range", "9", "--mix", "55:5:30:10", "--shared-memory", "system"}, "no region"},
      {{"-m", "m", "--cancel-after-us", "5:1"}, "--cancel-after-us: span '5:1': HI is below LO"},
      {{"-m", "m", "--cancel-after-us", "1.5"}, "whole microseconds"},
      {{"-m", "m", "--expire-us", "0:10"}, "--expire-us: span '0:10': LO must be >= 1"},
      {{"-m", "m", "--expire-us", "1:2:3"}, "want LO:HI"},
      {{"-m", "m", "--duration-s", "0"}, "--duration-s wants seconds"},
      {{"-m", "m", "--duration-s", "10", "--concurrency-range", "1:2"}, "runs one level"},
      {{"-m", "m", "--report-every-s", "10"}, "--report-every-s needs --duration-s"},
      {{"-m", "m", "--duration-s", "100000", "--report-every-s", "1"}, "more than 10000 periods"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char *argv[10] = {"inferd-load"};
    int argc = 1;
    for (int k = 0; k < 8 && bad[i].args[k]; k++) argv[argc++] = (char *)bad[i].args[k];
    ld_opts o;
    err e = {0};
    CHECK_EQ_INT(ld_opts_parse(argc, argv, &o, &e), ERR_INVALID_ARGUMENT);
    CHECK_CONTAINS(e.msg, bad[i].msg);
    ld_opts_close(&o);
  }
}

// --mix, its spans and --duration-s as parsed; the defaults when absent.
static void test_mix_options(void) {
  ld_opts o;
  err e = {0};
  int rc = PARSE(&o, &e, "-m", "m", "--request-rate-range", "1000", "--mix", "55:5:30:10", "--cancel-after-us",
                 "20:300", "--expire-us=7", "--duration-s", "90", "--report-every-s", "0.5");
  CHECK_EQ_INT(rc, 0);
  if (rc) fprintf(stderr, "  %s\n", e.msg);
  CHECK(o.mix.on);
  CHECK_NEAR(o.mix.pct[LD_REQ_VALID], 55, 0, 0);
  CHECK_NEAR(o.mix.pct[LD_REQ_INVALID], 5, 0, 0);
  CHECK_NEAR(o.mix.pct[LD_REQ_CANCEL], 30, 0, 0);
  CHECK_NEAR(o.mix.pct[LD_REQ_EXPIRE], 10, 0, 0);
  CHECK_EQ_INT(o.cancel_after.lo_ns, 20000);
  CHECK_EQ_INT(o.cancel_after.hi_ns, 300000);
  CHECK_EQ_INT(o.expire.lo_ns, 7000);  // one value: LO = HI
  CHECK_EQ_INT(o.expire.hi_ns, 7000);
  CHECK_NEAR(o.duration_s, 90, 0, 0);
  CHECK_NEAR(o.report_every_s, 0.5, 0, 0);
  ld_opts_close(&o);

  rc = PARSE(&o, &e, "-m", "m");
  CHECK_EQ_INT(rc, 0);
  CHECK(!o.mix.on);
  CHECK_EQ_INT(o.cancel_after.lo_ns, 0);
  CHECK_EQ_INT(o.cancel_after.hi_ns, 1000000);
  CHECK_EQ_INT(o.expire.lo_ns, 1000);
  CHECK_EQ_INT(o.expire.hi_ns, 500000);
  CHECK_NEAR(o.duration_s, 0, 0, 0);
  ld_opts_close(&o);
}

// Kinds split [0, 1) at the cumulative percentages; a kind at 0 % is never drawn.
static void test_mix_pick(void) {
  ld_mix m;
  err e = {0};
  CHECK_EQ_INT(ld_mix_parse("55:5:30:10", &m, &e), 0);
  CHECK_EQ_INT(ld_mix_pick(&m, 0.0), LD_REQ_VALID);
  CHECK_EQ_INT(ld_mix_pick(&m, 0.5499), LD_REQ_VALID);
  CHECK_EQ_INT(ld_mix_pick(&m, 0.55), LD_REQ_INVALID);
  CHECK_EQ_INT(ld_mix_pick(&m, 0.5999), LD_REQ_INVALID);
  CHECK_EQ_INT(ld_mix_pick(&m, 0.60), LD_REQ_CANCEL);
  CHECK_EQ_INT(ld_mix_pick(&m, 0.8999), LD_REQ_CANCEL);
  CHECK_EQ_INT(ld_mix_pick(&m, 0.90), LD_REQ_EXPIRE);
  CHECK_EQ_INT(ld_mix_pick(&m, 0.999999), LD_REQ_EXPIRE);
  CHECK_EQ_INT(ld_mix_parse("0:0:100:0", &m, &e), 0);
  CHECK_EQ_INT(ld_mix_pick(&m, 0.0), LD_REQ_CANCEL);
  CHECK_EQ_INT(ld_mix_pick(&m, 0.999999), LD_REQ_CANCEL);
  CHECK_EQ_INT(ld_mix_parse("50:50:0:0", &m, &e), 0);
  CHECK_EQ_INT(ld_mix_pick(&m, 0.9999999999), LD_REQ_INVALID);  // never the 0 % kinds past the last edge
  m.on = false;
  CHECK_EQ_INT(ld_mix_pick(&m, 0.9), LD_REQ_VALID);
  // The seeded draw the driver makes, over many requests: each kind near its share.
  CHECK_EQ_INT(ld_mix_parse("55:5:30:10", &m, &e), 0);
  uint64_t rng = 42, n[LD_N_REQ_KINDS] = {0};
  for (int i = 0; i < 100000; i++) n[ld_mix_pick(&m, ld_rng_uniform(&rng))]++;
  CHECK_NEAR((double)n[LD_REQ_VALID], 55000, 0, 1000);
  CHECK_NEAR((double)n[LD_REQ_INVALID], 5000, 0, 500);
  CHECK_NEAR((double)n[LD_REQ_CANCEL], 30000, 0, 1000);
  CHECK_NEAR((double)n[LD_REQ_EXPIRE], 10000, 0, 700);

  ld_span sp = {1000, 501000};
  CHECK_EQ_INT(ld_span_pick(&sp, 0.0), 1000);
  CHECK_EQ_INT(ld_span_pick(&sp, 0.5), 251000);
  CHECK(ld_span_pick(&sp, 0.999999999) <= 501000);
  CHECK_EQ_STR(ld_req_kind_name(LD_REQ_EXPIRE), "expire");
  CHECK_EQ_STR(ld_req_kind_name(LD_N_REQ_KINDS), "?");
}

int main(void) {
  test_ranges();
  test_mix_options();
  test_mix_pick();
  test_defaults();
  test_all_options();
  test_usage_errors();
  CHECK_DONE();
}
