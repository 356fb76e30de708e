// gen_report.c: generate mode's report (gen.h) as text on stdout and as
// JSON in the classic mode's shape (an array of one object per run, "mode"
// first), and the mode's main.
#include <errno.h>
#include <grpc/grpc.h>
#include <stdlib.h>
#include <string.h>

#include "clients/load/gen.h"
#include "proto/grpc_offload.h"

typedef struct lat_ms {
  uint64_t count;
  double mean, p50, p90, p99, max;
} lat_ms;

static lat_ms lat_of(const ld_hist *h) {
  lat_ms l = {ld_hist_count(h), ld_hist_mean(h) / 1e6, (double)ld_hist_percentile(h, 50) / 1e6,
              (double)ld_hist_percentile(h, 90) / 1e6, (double)ld_hist_percentile(h, 99) / 1e6,
              (double)ld_hist_max(h) / 1e6};
  return l;
}

static double per_s(double x, double s) {
  return s > 0 ? x / s : 0;
}

void ld_gen_report_text(FILE *f, const ld_gen_opts *o, const ld_gen_result *r) {
  char pl[96], ol[96];
  ld_len_str(&o->prompt, pl, sizeof pl);
  ld_len_str(&o->output, ol, sizeof ol);
  fprintf(f, "generate: %s, model '%s', %s, prompt %s, output %s, ", ld_gen_api_name(o->api), o->model,
          o->stream ? "streaming" : "not streaming", pl, ol);
  if (o->rate > 0) fprintf(f, "Poisson %g req/s, concurrency <= %d\n", o->rate, o->concurrency);
  else fprintf(f, "concurrency %d\n", o->concurrency);
  fprintf(f, "  requests: %llu sent, %llu completed, %llu failed, %llu short of their output length\n",
          (unsigned long long)r->sent, (unsigned long long)r->ok, (unsigned long long)r->failed,
          (unsigned long long)r->short_outputs);
  for (int k = 0; k < r->n_error_kinds; k++)
    fprintf(f, "    %s: %llu\n", r->error_names[k], (unsigned long long)r->error_counts[k]);
  if (r->first_error[0]) fprintf(f, "    first error: %s\n", r->first_error);
  fprintf(f, "  duration: %.3f s\n", r->seconds);
  fprintf(f, "  tokens: %llu prompt%s, %llu output (%llu requested)\n", (unsigned long long)r->prompt_tokens,
          r->prompt_tokens_estimated ? " (words counted where the server gave no usage)" : "",
          (unsigned long long)r->output_tokens, (unsigned long long)r->requested_output_tokens);
  fprintf(f, "  throughput: %.3f req/s, %.2f output tok/s, %.2f total tok/s\n", per_s((double)r->ok, r->seconds),
          per_s((double)r->output_tokens, r->seconds),
          per_s((double)(r->output_tokens + r->prompt_tokens), r->seconds));
  const char *names[] = {"TTFT", "ITL", "TPOT", "E2E"};
  const ld_hist *hs[] = {r->ttft, r->itl, r->tpot, r->e2e};
  fprintf(f, "  %-5s %10s %10s %10s %10s %10s %10s (ms)\n", "", "count", "mean", "p50", "p90", "p99", "max");
  for (int k = 0; k < 4; k++) {
    lat_ms l = lat_of(hs[k]);
    fprintf(f, "  %-5s %10llu %10.3f %10.3f %10.3f %10.3f %10.3f\n", names[k], (unsigned long long)l.count, l.mean,
            l.p50, l.p90, l.p99, l.max);
  }
  if (o->rate > 0) {
    lat_ms l = lat_of(r->lag);
    fprintf(f, "  schedule lag: p50 %.3f ms, p99 %.3f ms, max %.3f ms\n", l.p50, l.p99, l.max);
  }
}

static void json_lat(FILE *f, const char *key, const ld_hist *h, bool comma) {
  lat_ms l = lat_of(h);
  fprintf(f, "    \"%s\": {\"count\": %llu, \"mean\": %.6f, \"p50\": %.6f, \"p90\": %.6f, \"p99\": %.6f, \"max\": %.6f}%s\n",
          key, (unsigned long long)l.count, l.mean, l.p50, l.p90, l.p99, l.max, comma ? "," : "");
}

// s as a JSON string's contents (quotes, backslashes and control characters escaped).
static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
    else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
    else fputc(*p, f);
  }
  fputc('"', f);
}

int ld_gen_report_json(const char *path, const ld_gen_opts *o, const ld_gen_result *r, err *e) {
  FILE *f = strcmp(path, "-") == 0 ? stdout : fopen(path, "w");
  if (!f) return err_set(e, ERR_INVALID_ARGUMENT, "cannot write %s: %s", path, strerror(errno));
  char pl[96], ol[96];
  ld_len_str(&o->prompt, pl, sizeof pl);
  ld_len_str(&o->output, ol, sizeof ol);
  fprintf(f, "[\n  {\"mode\": \"generate\", \"api\": \"%s\", \"model\": ", ld_gen_api_name(o->api));
  json_str(f, o->model);
  fprintf(f, ", \"streaming\": %s, \"request_rate\": %g, \"concurrency\": %d,\n", o->stream ? "true" : "false",
          o->rate, o->concurrency);
  fprintf(f, "    \"prompt_len\": \"%s\", \"output_len\": \"%s\", \"seed\": %llu, \"ignore_eos\": %s,\n", pl, ol,
          (unsigned long long)o->seed, o->ignore_eos ? "true" : "false");
  fprintf(f, "    \"requests\": %llu, \"completed\": %llu, \"failed\": %llu, \"short_outputs\": %llu,\n",
          (unsigned long long)r->sent, (unsigned long long)r->ok, (unsigned long long)r->failed,
          (unsigned long long)r->short_outputs);
  fprintf(f, "    \"duration_s\": %.6f, \"request_throughput\": %.6f, \"output_tokens_per_s\": %.6f, "
             "\"total_tokens_per_s\": %.6f,\n",
          r->seconds, per_s((double)r->ok, r->seconds), per_s((double)r->output_tokens, r->seconds),
          per_s((double)(r->output_tokens + r->prompt_tokens), r->seconds));
  fprintf(f, "    \"prompt_tokens\": %llu, \"prompt_tokens_estimated\": %s, \"output_tokens\": %llu, "
             "\"requested_output_tokens\": %llu,\n",
          (unsigned long long)r->prompt_tokens, r->prompt_tokens_estimated ? "true" : "false",
          (unsigned long long)r->output_tokens, (unsigned long long)r->requested_output_tokens);
  fputs("    \"errors_by_kind\": {", f);
  for (int k = 0; k < r->n_error_kinds; k++)
    fprintf(f, "%s\"%s\": %llu", k ? ", " : "", r->error_names[k], (unsigned long long)r->error_counts[k]);
  fputs("},\n    \"first_error\": ", f);
  if (r->first_error[0]) json_str(f, r->first_error);
  else fputs("null", f);
  fputs(",\n", f);
  json_lat(f, "ttft_ms", r->ttft, true);
  json_lat(f, "itl_ms", r->itl, true);
  json_lat(f, "tpot_ms", r->tpot, true);
  json_lat(f, "e2e_ms", r->e2e, true);
  json_lat(f, "lag_ms", r->lag, false);
  fputs("  }\n]\n", f);
  int bad = ferror(f);
  if (f != stdout) bad |= fclose(f) != 0;
  else fflush(f);
  return bad ? err_set(e, ERR_INTERNAL, "writing %s failed", path) : 0;
}

int ld_gen_main(int argc, char **argv, const volatile sig_atomic_t *interrupted) {
  ld_gen_opts o;
  err e = {0};
  if (ld_gen_opts_parse(argc, argv, &o, &e) != 0) {
    fprintf(stderr, "inferd-load generate: %s\n(inferd-load generate --help for the options)\n", e.msg);
    return 2;
  }
  if (o.help) {
    ld_gen_usage(stdout);
    return 0;
  }
  ld_gen_result r;
  if (ld_gen_result_init(&r) != 0) {
    ld_gen_result_close(&r);
    fprintf(stderr, "inferd-load generate: out of memory\n");
    return 1;
  }
  grpc_init();
  if (o.api == LD_API_GRPC) grpc_offload_decline();  // as the classic mode: transport work stays on its thread
  int code = 0;
  if (ld_gen_run(&o, interrupted, &r, &e) != 0) {
    fprintf(stderr, "inferd-load generate: %s\n", e.msg);
    code = 1;
  } else {
    ld_gen_report_text(stdout, &o, &r);
    if (r.ok == 0 && r.failed > 0 && r.n_error_kinds == 1 && strcmp(r.error_names[0], "TRANSPORT") == 0) {
      fprintf(stderr, "inferd-load generate: no request reached the server at %s: %s\n", o.url, r.first_error);
      code = 1;
    }
    if (o.json && ld_gen_report_json(o.json, &o, &r, &e) != 0) {
      fprintf(stderr, "inferd-load generate: --json: %s\n", e.msg);
      code = 1;
    }
  }
  ld_gen_result_close(&r);
  grpc_shutdown();
  return code;
}
