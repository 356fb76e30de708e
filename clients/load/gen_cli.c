// gen_cli.c: generate mode's command line (gen.h), parsed as cli.c parses
// the classic mode's: no global state, "--opt value" and "--opt=value", errors as values.
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "clients/load/gen.h"

const char *ld_gen_api_name(ld_gen_api a) {
  return a == LD_API_GRPC ? "grpc" : a == LD_API_HTTP ? "http" : "openai";
}

void ld_gen_usage(FILE *f) {
  fputs(
      "usage: inferd-load generate -m MODEL [options]\n"
      "Serving benchmark for generative models (backend inferd_llm, or any server with these APIs).\n"
      "  --api grpc|http|openai       grpc: ModelStreamInfer with TensorRT-LLM's tensors (default);\n"
      "                               http: POST /v2/models/M/generate_stream (SSE, token ids);\n"
      "                               openai: POST /v1/completions (text prompts of random words)\n"
      "  -u, --url HOST:PORT          server (default localhost:8001 for grpc, localhost:8000 otherwise)\n"
      "  -m, --model-name MODEL       model (required)\n"
      "  -x, --model-version V        version (grpc, http; default: the server's choice)\n"
      "  --num-requests N             requests to send (default 100; with --duration-s: at most N)\n"
      "  --duration-s S               send for S seconds (answers in flight are awaited)\n"
      "  --request-rate R             Poisson arrivals at R requests/s (default: as fast as --concurrency allows)\n"
      "  --concurrency C              requests in flight at most (default 1, or 64 with --request-rate)\n"
      "  --prompt-len DIST            prompt tokens (words for openai): N, fixed:N, uniform:LO:HI,\n"
      "                               normal:MEAN:SD[:LO:HI], lognormal:MEAN:SD[:LO:HI] (default 32)\n"
      "  --output-len DIST            tokens to generate, same forms (default 16)\n"
      "  --vocab-size N               token ids of prompts are drawn from [0, N) (grpc, http)\n"
      "  --model-config PATH          or read vocab_size from a checkpoint's config.json (file or folder)\n"
      "  --no-stream                  one answer per request (TTFT is then the whole latency)\n"
      "  --ignore-eos                 openai: send \"ignore_eos\": true so outputs run to their length\n"
      "                               (grpc/http never send end_id: only the checkpoint's eos ends early)\n"
      "  --timeout-ms MS              per request (default 600000; 0: none)\n"
      "  --seed N                     workload and arrivals (default 1)\n"
      "  --json FILE                  write the report as JSON\n"
      "  -v, --verbose                print every failed request\n"
      "  -h, --help\n",
      f);
}

static int parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (!*s || errno || *end || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

static int parse_pos_double(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (!*s || errno || *end || !isfinite(v) || v <= 0) return -1;
  *out = v;
  return 0;
}

int ld_gen_vocab_from_config(const char *path, int64_t *vocab, err *e) {
  char p[4096];
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
    snprintf(p, sizeof p, "%s/config.json", path);
  else
    snprintf(p, sizeof p, "%s", path);
  FILE *f = fopen(p, "rb");
  if (!f) return err_set(e, ERR_INVALID_ARGUMENT, "--model-config: cannot open %s: %s", p, strerror(errno));
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len + 4096 > cap) {
      char *nb = realloc(buf, cap = cap ? cap * 2 : 65536);
      if (!nb) break;
      buf = nb;
    }
    size_t n = fread(buf + len, 1, cap - len, f);
    len += n;
    if (n == 0) break;
  }
  fclose(f);
  cJSON *o = buf ? cJSON_ParseWithLength(buf, len) : NULL;
  free(buf);
  const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, "vocab_size") : NULL;
  if (!v) {  // multimodal configs keep it in text_config
    const cJSON *tc = o ? cJSON_GetObjectItemCaseSensitive(o, "text_config") : NULL;
    v = tc ? cJSON_GetObjectItemCaseSensitive(tc, "vocab_size") : NULL;
  }
  int rc = 0;
  if (!o)
    rc = err_set(e, ERR_INVALID_ARGUMENT, "--model-config: %s is not JSON", p);
  else if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble > 2147483647.0 ||
           v->valuedouble != floor(v->valuedouble))
    rc = err_set(e, ERR_INVALID_ARGUMENT, "--model-config: %s has no whole vocab_size in 1 .. 2^31-1", p);
  else
    *vocab = (int64_t)v->valuedouble;
  cJSON_Delete(o);
  return rc;
}

int ld_gen_opts_parse(int argc, char **argv, ld_gen_opts *o, err *e) {
  memset(o, 0, sizeof *o);
  o->version = "";
  o->stream = true;
  o->timeout_ms = 600000;
  o->seed = 1;
  bool have_n = false, have_conc = false;
  TRY(ld_len_parse("32", &o->prompt, e));
  TRY(ld_len_parse("16", &o->output, e));
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *val = NULL;
    char name[64];
    if (strncmp(a, "--", 2) == 0) {
      const char *eq = strchr(a, '=');
      size_t n = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
      if (n >= sizeof name) return err_set(e, ERR_INVALID_ARGUMENT, "unknown option '%s'", a);
      memcpy(name, a + 2, n);
      name[n] = '\0';
      if (eq) val = eq + 1;
    } else if (a[0] == '-' && a[1] && !a[2]) {
      const char *longs[] = {"u", "url", "m", "model-name", "x", "model-version", "v", "verbose", "h", "help"};
      size_t k = 0;
      while (k < sizeof longs / sizeof *longs && strcmp(longs[k], a + 1) != 0) k += 2;
      if (k >= sizeof longs / sizeof *longs) return err_set(e, ERR_INVALID_ARGUMENT, "unknown option '%s'", a);
      snprintf(name, sizeof name, "%s", longs[k + 1]);
    } else {
      return err_set(e, ERR_INVALID_ARGUMENT, "unexpected argument '%s'", a);
    }
    static const char *const KNOWN[] = {"api", "url", "model-name", "model-version", "num-requests", "duration-s",
                                        "request-rate", "concurrency", "prompt-len", "output-len", "vocab-size",
                                        "model-config", "no-stream", "ignore-eos", "timeout-ms", "seed", "json",
                                        "verbose", "help"};
    bool known = false;
    for (size_t k = 0; k < sizeof KNOWN / sizeof *KNOWN; k++) known |= strcmp(KNOWN[k], name) == 0;
    if (!known) return err_set(e, ERR_INVALID_ARGUMENT, "unknown option '--%s'", name);
    bool flag = !strcmp(name, "no-stream") || !strcmp(name, "ignore-eos") || !strcmp(name, "verbose") ||
                !strcmp(name, "help");
    if (flag) {
      if (val) return err_set(e, ERR_INVALID_ARGUMENT, "--%s takes no value", name);
    } else if (!val) {
      if (i + 1 >= argc) return err_set(e, ERR_INVALID_ARGUMENT, "--%s needs a value", name);
      val = argv[++i];
    }
    int64_t v;
    if (!strcmp(name, "api")) {
      if (!strcmp(val, "grpc")) o->api = LD_API_GRPC;
      else if (!strcmp(val, "http")) o->api = LD_API_HTTP;
      else if (!strcmp(val, "openai")) o->api = LD_API_OPENAI;
      else return err_set(e, ERR_INVALID_ARGUMENT, "--api '%s': want grpc, http or openai", val);
    } else if (!strcmp(name, "url")) {
      o->url = val;
    } else if (!strcmp(name, "model-name")) {
      o->model = val;
    } else if (!strcmp(name, "model-version")) {
      o->version = val;
    } else if (!strcmp(name, "num-requests")) {
      if (parse_i64(val, 1, INT64_C(1) << 40, &o->num_requests) != 0)
        return err_set(e, ERR_INVALID_ARGUMENT, "--num-requests '%s': want a whole number >= 1", val);
      have_n = true;
    } else if (!strcmp(name, "duration-s")) {
      if (parse_pos_double(val, &o->duration_s) != 0)
        return err_set(e, ERR_INVALID_ARGUMENT, "--duration-s '%s': want seconds > 0", val);
    } else if (!strcmp(name, "request-rate")) {
      if (parse_pos_double(val, &o->rate) != 0)
        return err_set(e, ERR_INVALID_ARGUMENT, "--request-rate '%s': want requests/s > 0", val);
    } else if (!strcmp(name, "concurrency")) {
      if (parse_i64(val, 1, LD_GEN_MAX_CONCURRENCY, &v) != 0)
        return err_set(e, ERR_INVALID_ARGUMENT, "--concurrency '%s': want 1..%d", val, LD_GEN_MAX_CONCURRENCY);
      o->concurrency = (int)v;
      have_conc = true;
    } else if (!strcmp(name, "prompt-len")) {
      TRY(ld_len_parse(val, &o->prompt, e) ? err_prefix(e, "--prompt-len: ") : 0);
    } else if (!strcmp(name, "output-len")) {
      TRY(ld_len_parse(val, &o->output, e) ? err_prefix(e, "--output-len: ") : 0);
    } else if (!strcmp(name, "vocab-size")) {
      if (parse_i64(val, 1, INT32_MAX, &o->vocab) != 0)
        return err_set(e, ERR_INVALID_ARGUMENT, "--vocab-size '%s': want a whole number >= 1", val);
    } else if (!strcmp(name, "model-config")) {
      o->model_config = val;
    } else if (!strcmp(name, "no-stream")) {
      o->stream = false;
    } else if (!strcmp(name, "ignore-eos")) {
      o->ignore_eos = true;
    } else if (!strcmp(name, "timeout-ms")) {
      if (parse_i64(val, 0, INT32_MAX, &v) != 0)
        return err_set(e, ERR_INVALID_ARGUMENT, "--timeout-ms '%s': want a whole number >= 0", val);
      o->timeout_ms = (int)v;
    } else if (!strcmp(name, "seed")) {
      if (parse_i64(val, 0, INT64_MAX, &v) != 0) return err_set(e, ERR_INVALID_ARGUMENT, "--seed '%s'", val);
      o->seed = (uint64_t)v;
    } else if (!strcmp(name, "json")) {
      o->json = val;
    } else if (!strcmp(name, "verbose")) {
      o->verbose++;
    } else if (!strcmp(name, "help")) {
      o->help = true;
    } else {
      return err_set(e, ERR_INVALID_ARGUMENT, "unknown option '--%s'", name);
    }
  }
  if (o->help) return 0;
  if (!o->model) return err_set(e, ERR_INVALID_ARGUMENT, "-m MODEL is required");
  if (!o->url) o->url = o->api == LD_API_GRPC ? "localhost:8001" : "localhost:8000";
  if (!have_n && o->duration_s == 0) o->num_requests = LD_GEN_DEFAULT_REQUESTS;
  if (!have_conc) o->concurrency = o->rate > 0 ? 64 : 1;
  if (o->model_config && o->vocab)
    return err_set(e, ERR_INVALID_ARGUMENT, "--vocab-size and --model-config: give one");
  if (o->model_config) TRY(ld_gen_vocab_from_config(o->model_config, &o->vocab, e));
  if (o->api != LD_API_OPENAI && !o->vocab)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "--api %s sends token ids: give --vocab-size N or --model-config PATH (the checkpoint's config.json)",
                   ld_gen_api_name(o->api));
  return 0;
}
