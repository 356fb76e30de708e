// test_ld_gen: generate mode's pure parts (clients/load/gen_dist.c,
// gen_sse.c, gen_cli.c): length distributions parsed, drawn within their
// bounds with the moments they promise and reproducibly from a seed; prompts
// within the vocabulary; SSE events recovered whatever the byte splits and
// line ends; the generate and OpenAI payloads read; the options' defaults and
// refusals; vocab_size read from a config.json.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "clients/load/gen.h"
#include "clients/load/gen_dist.h"
#include "clients/load/gen_sse.h"

// --- distributions

static void test_len_parse(void) {
  ld_len_dist d;
  err e = {0};
  CHECK_EQ_INT(ld_len_parse("64", &d, &e), 0);
  CHECK_EQ_INT(d.kind, LD_LEN_FIXED);
  CHECK_EQ_INT(d.lo, 64);
  CHECK_EQ_INT(d.hi, 64);
  CHECK_EQ_INT(ld_len_parse("fixed:7", &d, &e), 0);
  CHECK_EQ_INT(d.lo, 7);
  CHECK_EQ_INT(ld_len_parse("uniform:3:9", &d, &e), 0);
  CHECK_EQ_INT(d.kind, LD_LEN_UNIFORM);
  CHECK_EQ_INT(d.lo, 3);
  CHECK_EQ_INT(d.hi, 9);
  CHECK_EQ_INT(ld_len_parse("normal:100:20", &d, &e), 0);
  CHECK_EQ_INT(d.lo, 1);
  CHECK_EQ_INT(d.hi, LD_LEN_MAX);
  CHECK_EQ_INT(ld_len_parse("lognormal:200:100:10:400", &d, &e), 0);
  CHECK_EQ_INT(d.kind, LD_LEN_LOGNORMAL);
  CHECK_EQ_INT(d.lo, 10);
  CHECK_EQ_INT(d.hi, 400);
  char buf[96];
  ld_len_str(&d, buf, sizeof buf);
  CHECK_EQ_STR(buf, "lognormal:200:100:10:400");
  static const struct {
    const char *s, *why;
  } bad[] = {
      {"", "empty"},
      {"0", "whole number >= 1"},
      {"2.5", "whole number >= 1"},
      {"x", "unknown length distribution"},
      {"uniform:9:3", "LO <= HI"},
      {"uniform:3", "takes 2"},
      {"normal:10", "takes 2"},
      {"normal:10:2:5", "takes 2"},
      {"normal:10:2:0:5", "bounds"},
      {"normal:10:2:8:5", "bounds"},
      {"lognormal:0:1", "MEAN > 0"},
      {"normal:10:-1", "outside"},
      {"normal:a:1", "bad number 'a'"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    memset(&e, 0, sizeof e);
    CHECK_EQ_INT(ld_len_parse(bad[i].s, &d, &e), ERR_INVALID_ARGUMENT);
    CHECK_CONTAINS(e.msg, bad[i].why);
  }
}

typedef struct moments {
  double mean, sd;
  int64_t min, max;
} moments;

static moments draw_many(const char *spec, int n, uint64_t seed) {
  ld_len_dist d;
  err e;
  moments m = {0, 0, INT64_MAX, INT64_MIN};
  CHECK_EQ_INT(ld_len_parse(spec, &d, &e), 0);
  double s = 0, s2 = 0;
  for (int i = 0; i < n; i++) {
    int64_t v = ld_len_draw(&d, &seed);
    s += (double)v;
    s2 += (double)v * (double)v;
    if (v < m.min) m.min = v;
    if (v > m.max) m.max = v;
  }
  m.mean = s / n;
  m.sd = sqrt(s2 / n - m.mean * m.mean);
  return m;
}

static void test_len_draw(void) {
  enum { N = 200000 };
  moments m = draw_many("fixed:12", 1000, 1);
  CHECK_EQ_INT(m.min, 12);
  CHECK_EQ_INT(m.max, 12);
  m = draw_many("uniform:5:15", N, 2);  // every value reached, none outside; mean 10, sd sqrt((11^2-1)/12)
  CHECK_EQ_INT(m.min, 5);
  CHECK_EQ_INT(m.max, 15);
  CHECK_NEAR(m.mean, 10, 0.01, 0);
  CHECK_NEAR(m.sd, sqrt(120.0 / 12), 0.02, 0);
  m = draw_many("normal:500:50", N, 3);
  CHECK_NEAR(m.mean, 500, 0.005, 0);
  CHECK_NEAR(m.sd, 50, 0.02, 0);
  m = draw_many("lognormal:200:100", N, 4);  // the lengths' own mean and sd
  CHECK_NEAR(m.mean, 200, 0.01, 0);
  CHECK_NEAR(m.sd, 100, 0.05, 0);
  CHECK(m.min >= 1);
  m = draw_many("normal:50:40:30:60", N, 5);  // bounded: redrawn, never outside
  CHECK(m.min >= 30 && m.max <= 60);
  CHECK_EQ_INT(m.min, 30);
  CHECK_EQ_INT(m.max, 60);
  m = draw_many("normal:5000:1:1:10", 100, 6);  // nothing in bounds: clamped to the near bound
  CHECK_EQ_INT(m.min, 10);
  CHECK_EQ_INT(m.max, 10);
  // reproducible: the same seed draws the same lengths
  ld_len_dist d;
  err e;
  CHECK_EQ_INT(ld_len_parse("lognormal:64:32", &d, &e), 0);
  uint64_t a = 77, b = 77;
  int same = 1;
  for (int i = 0; i < 1000; i++) same &= ld_len_draw(&d, &a) == ld_len_draw(&d, &b);
  CHECK(same);
}

static void test_normal_and_seeds(void) {
  uint64_t s = 9;
  double sum = 0, sum2 = 0;
  enum { N = 200000 };
  for (int i = 0; i < N; i++) {
    double z = ld_rng_normal(&s);
    sum += z;
    sum2 += z * z;
  }
  CHECK_NEAR(sum / N, 0, 0, 0.01);
  CHECK_NEAR(sum2 / N, 1, 0.01, 0);
  // request seeds: a pure function of (seed, i, stream), different across each
  CHECK_EQ_INT(ld_gen_req_seed(1, 5, 0), ld_gen_req_seed(1, 5, 0));
  CHECK(ld_gen_req_seed(1, 5, 0) != ld_gen_req_seed(1, 6, 0));
  CHECK(ld_gen_req_seed(1, 5, 0) != ld_gen_req_seed(1, 5, 1));
  CHECK(ld_gen_req_seed(1, 5, 0) != ld_gen_req_seed(2, 5, 0));
}

static void test_prompts(void) {
  int32_t ids[5000];
  uint64_t s = 3;
  ld_gen_ids(ids, 5000, 256, &s);
  int lo = 1 << 30, hi = -1;
  for (int i = 0; i < 5000; i++) lo = ids[i] < lo ? ids[i] : lo, hi = ids[i] > hi ? ids[i] : hi;
  CHECK_EQ_INT(lo, 0);
  CHECK_EQ_INT(hi, 255);
  char *w = ld_gen_words(300, &s);
  CHECK(w != NULL);
  int spaces = 0;
  for (const char *p = w; *p; p++) spaces += *p == ' ';
  CHECK_EQ_INT(spaces, 299);
  CHECK(w[0] != ' ' && w[strlen(w) - 1] != ' ');
  free(w);
  w = ld_gen_words(1, &s);
  CHECK(w && strlen(w) > 0 && !strchr(w, ' '));
  free(w);
}

// --- SSE

typedef struct got {
  char ev[16][256];
  int n;
  int stop_at;  // return 7 at this event (1-based); 0: never
} got;

static int collect(void *ctx, const char *data, size_t len) {
  got *g = ctx;
  CHECK_EQ_INT(strlen(data), len);  // NUL-terminated at len
  if (g->n < 16) snprintf(g->ev[g->n], sizeof g->ev[0], "%s", data);
  g->n++;
  return g->stop_at && g->n == g->stop_at ? 7 : 0;
}

static const char STREAM[] =
    ": keep-alive comment\n"
    "data: {\"a\":1}\n\n"
    "event: message\r\nid: 3\r\ndata:{\"b\":2}\r\n\r\n"
    "data: line1\ndata: line2\n\n"
    "retry: 10\n\n"  // no data: not dispatched
    "data\n\n"       // a field name alone: empty data, dispatched
    "data: [DONE]\n\n"
    "data: unfinished";  // no blank line after it: never dispatched

static void check_stream(const got *g) {
  CHECK_EQ_INT(g->n, 5);
  CHECK_EQ_STR(g->ev[0], "{\"a\":1}");
  CHECK_EQ_STR(g->ev[1], "{\"b\":2}");
  CHECK_EQ_STR(g->ev[2], "line1\nline2");
  CHECK_EQ_STR(g->ev[3], "");
  CHECK_EQ_STR(g->ev[4], "[DONE]");
}

static void test_sse(void) {
  size_t n = strlen(STREAM);
  got g = {0};
  ld_sse *p = ld_sse_create(collect, &g);
  CHECK_EQ_INT(ld_sse_feed(p, STREAM, n), 0);
  check_stream(&g);
  CHECK_EQ_INT(ld_sse_events(p), 5);
  // every split into two feeds, and byte by byte
  for (size_t cut = 0; cut <= n; cut++) {
    memset(&g, 0, sizeof g);
    ld_sse_reset(p);
    CHECK_EQ_INT(ld_sse_feed(p, STREAM, cut), 0);
    CHECK_EQ_INT(ld_sse_feed(p, STREAM + cut, n - cut), 0);
    check_stream(&g);
  }
  memset(&g, 0, sizeof g);
  ld_sse_reset(p);
  for (size_t i = 0; i < n; i++) ld_sse_feed(p, STREAM + i, 1);
  check_stream(&g);
  // a callback's nonzero value stops the parser, and later feeds return it at once
  memset(&g, 0, sizeof g);
  g.stop_at = 2;
  ld_sse_reset(p);
  CHECK_EQ_INT(ld_sse_feed(p, STREAM, n), 7);
  CHECK_EQ_INT(g.n, 2);
  CHECK_EQ_INT(ld_sse_feed(p, "data: x\n\n", 9), 7);
  CHECK_EQ_INT(g.n, 2);
  // a CR alone ends a line too
  memset(&g, 0, sizeof g);
  ld_sse_reset(p);
  CHECK_EQ_INT(ld_sse_feed(p, "data: cr\r\r", 10), 0);
  CHECK_EQ_INT(g.n, 1);
  CHECK_EQ_STR(g.ev[0], "cr");
  ld_sse_destroy(p);
}

static void test_payloads(void) {
  int64_t n = -1;
  char msg[256];
  const char *ev = "{\"model_name\":\"m\",\"model_version\":\"1\",\"output_ids\":[5,6,7],\"sequence_length\":3}";
  CHECK_EQ_INT(ld_gen_parse_tokens_event(ev, strlen(ev), &n, msg, sizeof msg), 0);
  CHECK_EQ_INT(n, 3);
  ev = "{\"output_ids\":[[5,6]]}";  // a batching model's [1, n]
  CHECK_EQ_INT(ld_gen_parse_tokens_event(ev, strlen(ev), &n, msg, sizeof msg), 0);
  CHECK_EQ_INT(n, 2);
  ev = "{\"error\":\"the server is shutting down\"}";
  CHECK_EQ_INT(ld_gen_parse_tokens_event(ev, strlen(ev), &n, msg, sizeof msg), 1);
  CHECK_EQ_STR(msg, "the server is shutting down");
  CHECK_EQ_INT(ld_gen_parse_tokens_event("{\"x\":1}", 7, &n, msg, sizeof msg), -1);
  CHECK_CONTAINS(msg, "neither output_ids nor error");
  CHECK_EQ_INT(ld_gen_parse_tokens_event("nope", 4, &n, msg, sizeof msg), -1);
  CHECK_CONTAINS(msg, "not JSON");

  ld_oai_chunk c;
  ev = "{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\","
       "\"choices\":[{\"index\":0,\"text\":\" the\",\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}";
  CHECK_EQ_INT(ld_gen_parse_openai_chunk(ev, strlen(ev), &c, msg, sizeof msg), 0);
  CHECK(c.has_choice && !c.done && !c.finished);
  CHECK_EQ_INT(c.text_len, 4);
  CHECK_EQ_INT(c.completion_tokens, -1);
  ev = "{\"choices\":[{\"index\":0,\"text\":\"\",\"finish_reason\":\"length\"}]}";
  CHECK_EQ_INT(ld_gen_parse_openai_chunk(ev, strlen(ev), &c, msg, sizeof msg), 0);
  CHECK(c.finished);
  CHECK_EQ_INT(c.text_len, 0);
  // include_usage's last chunk: no choices, the usage
  ev = "{\"id\":\"cmpl-1\",\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":30,\"total_tokens\":42}}";
  CHECK_EQ_INT(ld_gen_parse_openai_chunk(ev, strlen(ev), &c, msg, sizeof msg), 0);
  CHECK(!c.has_choice);
  CHECK_EQ_INT(c.prompt_tokens, 12);
  CHECK_EQ_INT(c.completion_tokens, 30);
  CHECK_EQ_INT(ld_gen_parse_openai_chunk("[DONE]", 6, &c, msg, sizeof msg), 0);
  CHECK(c.done);
  ev = "{\"error\":{\"message\":\"The model `x` does not exist.\",\"type\":\"invalid_request_error\"}}";
  CHECK_EQ_INT(ld_gen_parse_openai_chunk(ev, strlen(ev), &c, msg, sizeof msg), 1);
  CHECK_EQ_STR(msg, "The model `x` does not exist.");
  CHECK_EQ_INT(ld_gen_parse_openai_chunk("{\"object\":\"list\"}", 17, &c, msg, sizeof msg), -1);
  CHECK_CONTAINS(msg, "no choices");
}

// --- options

static int parse(ld_gen_opts *o, err *e, const char *const *args) {
  char *argv[32];
  int argc = 0;
  argv[argc++] = (char *)"generate";
  for (; *args; args++) argv[argc++] = (char *)*args;
  memset(e, 0, sizeof *e);
  return ld_gen_opts_parse(argc, argv, o, e);
}

static void test_opts(void) {
  ld_gen_opts o;
  err e;
  CHECK_EQ_INT(parse(&o, &e, (const char *const[]){"-m", "llm", "--vocab-size", "256", NULL}), 0);
  CHECK_EQ_INT(o.api, LD_API_GRPC);
  CHECK_EQ_STR(o.url, "localhost:8001");
  CHECK_EQ_INT(o.num_requests, LD_GEN_DEFAULT_REQUESTS);
  CHECK_EQ_INT(o.concurrency, 1);
  CHECK(o.stream && !o.ignore_eos);
  CHECK_EQ_INT(o.prompt.lo, 32);
  CHECK_EQ_INT(o.output.lo, 16);
  CHECK_EQ_INT(parse(&o, &e,
                     (const char *const[]){"--api=openai", "-m", "llm", "--request-rate", "2.5", "--duration-s", "3",
                                           "--output-len", "uniform:8:64", "--no-stream", "--ignore-eos", NULL}),
               0);
  CHECK_EQ_STR(o.url, "localhost:8000");
  CHECK_EQ_INT(o.concurrency, 64);  // the default with a rate
  CHECK_EQ_INT(o.num_requests, 0);  // until the duration ends
  CHECK(!o.stream && o.ignore_eos);
  CHECK_NEAR(o.rate, 2.5, 0, 0);
  CHECK_EQ_INT(o.output.hi, 64);
  static const struct {
    const char *a[8], *why;
  } bad[] = {
      {{"--vocab-size", "9", NULL}, "-m MODEL is required"},
      {{"-m", "x", NULL}, "--vocab-size N or --model-config"},
      {{"-m", "x", "--api", "rest", NULL}, "want grpc, http or openai"},
      {{"-m", "x", "--vocab-size", "0", NULL}, "--vocab-size '0'"},
      {{"-m", "x", "--concurrency", "0", NULL}, "--concurrency '0'"},
      {{"-m", "x", "--prompt-len", "uniform:9:1", NULL}, "--prompt-len: "},
      {{"-m", "x", "--request-rate", "-1", NULL}, "--request-rate '-1'"},
      {{"-m", "x", "--frobnicate", NULL}, "unknown option '--frobnicate'"},
      {{"-m", "x", "--no-stream=1", NULL}, "takes no value"},
      {{"-m", "x", "--seed", NULL}, "--seed needs a value"},
      {{"-m", "x", "--vocab-size", "5", "--model-config", "/nonexistent", NULL}, "give one"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CHECK_EQ_INT(parse(&o, &e, bad[i].a), ERR_INVALID_ARGUMENT);
    CHECK_CONTAINS(e.msg, bad[i].why);
  }
  // vocab_size from a checkpoint's config.json (the file or its folder)
  char dir[] = "/tmp/test_ld_gen_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char path[256];
  snprintf(path, sizeof path, "%s/config.json", dir);
  FILE *f = fopen(path, "w");
  fputs("{\"model_type\": \"llama\", \"vocab_size\": 32000}", f);
  fclose(f);
  CHECK_EQ_INT(parse(&o, &e, (const char *const[]){"-m", "x", "--model-config", dir, NULL}), 0);
  CHECK_EQ_INT(o.vocab, 32000);
  CHECK_EQ_INT(parse(&o, &e, (const char *const[]){"-m", "x", "--model-config", path, NULL}), 0);
  CHECK_EQ_INT(o.vocab, 32000);
  f = fopen(path, "w");
  fputs("{\"model_type\": \"llama\"}", f);
  fclose(f);
  CHECK_EQ_INT(parse(&o, &e, (const char *const[]){"-m", "x", "--model-config", path, NULL}), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "no whole vocab_size");
  unlink(path);
  rmdir(dir);
}

int main(void) {
  test_len_parse();
  test_len_draw();
  test_normal_and_seeds();
  test_prompts();
  test_sse();
  test_payloads();
  test_opts();
  CHECK_DONE();
}
