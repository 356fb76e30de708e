// tests/unit/server/test_trace.c: the Chrome trace writer (server/obs/trace.c):
// escaping of client strings, sampling counts (also under threads), the
// file's JSON structure checked by a small validator, write errors, and a
// rough cost per span. `test_trace --write PATH` only writes a sample file,
// for check_trace.py to parse with Python's json module.
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "server/obs/trace.h"

// ---------------------------------------------------------------------------
// a strict little JSON validator: enough to say the file is one valid array

typedef struct jp {
  const char *s, *end;
  int depth;
} jp;

static void ws(jp *p) {
  while (p->s < p->end && (*p->s == ' ' || *p->s == '\n' || *p->s == '\r' || *p->s == '\t'))
    p->s++;
}

static int lit(jp *p, const char *w) {
  size_t n = strlen(w);
  if ((size_t)(p->end - p->s) < n || memcmp(p->s, w, n) != 0) return 0;
  p->s += n;
  return 1;
}

static int is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int jstring(jp *p) {
  if (p->s >= p->end || *p->s != '"') return 0;
  p->s++;
  while (p->s < p->end) {
    unsigned char c = (unsigned char)*p->s;
    if (c == '"') {
      p->s++;
      return 1;
    }
    if (c < 0x20) return 0;
    if (c == '\\') {
      p->s++;
      if (p->s >= p->end) return 0;
      char e = *p->s++;
      if (e == 'u') {
        for (int i = 0; i < 4; i++)
          if (p->s >= p->end || !is_hex(*p->s++)) return 0;
      } else if (!strchr("\"\\/bfnrt", e)) {
        return 0;
      }
      continue;
    }
    p->s++;
  }
  return 0;
}

static int jnumber(jp *p) {
  const char *st = p->s;
  if (p->s < p->end && *p->s == '-') p->s++;
  while (p->s < p->end && ((*p->s >= '0' && *p->s <= '9') || *p->s == '.' || *p->s == 'e' ||
                           *p->s == 'E' || *p->s == '+' || *p->s == '-'))
    p->s++;
  return p->s > st;
}

static int jvalue(jp *p);

static int jcontainer(jp *p, char open, char close, int keyed) {
  if (p->s >= p->end || *p->s != open) return 0;
  if (++p->depth > 64) return 0;
  p->s++;
  ws(p);
  if (p->s < p->end && *p->s == close) {
    p->s++;
    p->depth--;
    return 1;
  }
  for (;;) {
    ws(p);
    if (keyed) {
      if (!jstring(p)) return 0;
      ws(p);
      if (!lit(p, ":")) return 0;
      ws(p);
    }
    if (!jvalue(p)) return 0;
    ws(p);
    if (p->s < p->end && *p->s == ',') {
      p->s++;
      continue;
    }
    if (p->s < p->end && *p->s == close) {
      p->s++;
      p->depth--;
      return 1;
    }
    return 0;
  }
}

static int jvalue(jp *p) {
  if (p->s >= p->end) return 0;
  switch (*p->s) {
    case '{': return jcontainer(p, '{', '}', 1);
    case '[': return jcontainer(p, '[', ']', 0);
    case '"': return jstring(p);
    case 't': return lit(p, "true");
    case 'f': return lit(p, "false");
    case 'n': return lit(p, "null");
    default: return jnumber(p);
  }
}

static int json_valid_array(const char *s, size_t n) {
  jp p = {s, s + n, 0};
  ws(&p);
  if (p.s >= p.end || *p.s != '[') return 0;
  if (!jvalue(&p)) return 0;
  ws(&p);
  return p.s == p.end;
}

static int count_of(const char *hay, const char *needle) {
  int n = 0;
  for (const char *q = hay; (q = strstr(q, needle)) != NULL; q += strlen(needle)) n++;
  return n;
}

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
    free(b);
    b = NULL;
  }
  fclose(f);
  if (b) {
    b[n] = '\0';
    *len = (size_t)n;
  }
  return b;
}

// ---------------------------------------------------------------------------
// escaping

static void esc_case(const char *in, size_t n, const char *want) {
  char out[256];
  size_t w = prof_trace_escape(out, sizeof out, in, n);
  CHECK_EQ_STR(out, want);
  CHECK_EQ_INT(w, strlen(want));
}

static void test_escape(void) {
  esc_case("plain", 5, "plain");
  esc_case("a\"b\\c", 5, "a\\\"b\\\\c");
  esc_case("\n\r\t\b\f", 5, "\\n\\r\\t\\b\\f");
  esc_case("\x01\x1f", 2, "\\u0001\\u001f");
  esc_case("a\0b", 3, "a\\u0000b");                       // embedded NUL is data
  esc_case("caf\xc3\xa9 \xf0\x9f\x98\x80", 10, "caf\xc3\xa9 \xf0\x9f\x98\x80");  // valid kept
  esc_case("\xff", 1, "\\ufffd");                          // never valid
  esc_case("\xc0\x80", 2, "\\ufffd\\ufffd");               // overlong NUL
  esc_case("\xed\xa0\x80", 3, "\\ufffd\\ufffd\\ufffd");    // surrogate
  esc_case("\xf4\x90\x80\x80", 4, "\\ufffd\\ufffd\\ufffd\\ufffd");  // > U+10FFFF
  esc_case("\xe2\x82", 2, "\\ufffd\\ufffd");               // truncated
  esc_case("\x80x", 2, "\\ufffdx");                        // stray continuation
  esc_case("\xe2\x82\xac", 3, "\xe2\x82\xac");             // euro sign kept

  // Cut on a whole escape: 4 bytes of room hold "ab" + NUL but not "\\n".
  char small[5];
  size_t w = prof_trace_escape(small, 4, "ab\nc", 4);
  CHECK_EQ_STR(small, "ab");
  CHECK_EQ_INT(w, 2);
  // ... and never split a code point.
  w = prof_trace_escape(small, 4, "a\xe2\x82\xac", 4);
  CHECK_EQ_STR(small, "a");
  CHECK_EQ_INT(w, 1);
}

// ---------------------------------------------------------------------------
// open errors, sampling

static void test_open_errors(void) {
  prof_trace *t = (prof_trace *)1;
  err e = {0};
  CHECK_EQ_INT(prof_trace_open("/nonexistent-dir-inferd/x.json", 1, &t, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(e.code, ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "/nonexistent-dir-inferd/x.json");
  CHECK(t == NULL);
  e = (err){0};
  CHECK_EQ_INT(prof_trace_open("trace_rate0.json", 0, &t, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "rate");
  // NULL tracer: everything is a no-op.
  CHECK_EQ_INT(prof_trace_sample(NULL), 0);
  prof_trace_span(NULL, &(prof_trace_span_info){.name = "x"});
  CHECK_EQ_INT(prof_trace_close(NULL, &e), 0);
}

typedef struct sample_arg {
  prof_trace *t;
  int calls;
  int hits;
} sample_arg;

static void *sample_thread(void *p) {
  sample_arg *a = p;
  for (int i = 0; i < a->calls; i++) a->hits += prof_trace_sample(a->t);
  return NULL;
}

static void test_sample(void) {
  prof_trace *t = NULL;
  err e = {0};
  CHECK_EQ_INT(prof_trace_open("trace_sample.json", 3, &t, &e), 0);
  int got[9];
  for (int i = 0; i < 9; i++) got[i] = prof_trace_sample(t);
  int want[9] = {1, 0, 0, 1, 0, 0, 1, 0, 0};
  for (int i = 0; i < 9; i++) CHECK_EQ_INT(got[i], want[i]);
  CHECK_EQ_INT(prof_trace_close(t, &e), 0);

  // Concurrent calls: exactly ceil(total / rate) hits, none lost or doubled.
  CHECK_EQ_INT(prof_trace_open("trace_sample.json", 7, &t, &e), 0);
  enum { NT = 4, CALLS = 30000 };
  pthread_t th[NT];
  sample_arg args[NT];
  for (int i = 0; i < NT; i++) {
    args[i] = (sample_arg){t, CALLS, 0};
    CHECK_EQ_INT(pthread_create(&th[i], NULL, sample_thread, &args[i]), 0);
  }
  int hits = 0;
  for (int i = 0; i < NT; i++) {
    pthread_join(th[i], NULL);
    hits += args[i].hits;
  }
  CHECK_EQ_INT(hits, (NT * CALLS + 6) / 7);
  CHECK_EQ_INT(prof_trace_close(t, &e), 0);
}

// ---------------------------------------------------------------------------
// a file written from several threads

// Request ids a client could send: quotes, backslashes, control characters,
// invalid UTF-8, and one longer than PROF_TRACE_STR_MAX. check_trace.py knows
// what each must decode to.
static const char *const nasty_ids[] = {
    "req-\"quoted\"", "back\\slash", "ctl\x01\x1f\n\t", "bad\xff\xfe utf8", "ok \xc3\xa9\xe2\x82\xac",
};

static const char *const stages[5] = {"request", "queue", "compute_input", "compute_infer",
                                      "compute_output"};

typedef struct span_arg {
  prof_trace *t;
  int id;
  int n;
  double ns_per_span;
} span_arg;

static void *span_thread(void *p) {
  span_arg *a = p;
  char rid[64];
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < a->n; i++) {
    snprintf(rid, sizeof rid, "t%d-%d", a->id, i);
    prof_trace_span_info s = {
        .name = stages[i % 5], .start_us = 1000 + i, .end_us = 1010 + i, .model = "mlp",
        .version = "1", .request_id = rid, .batch_id = (uint64_t)i, .batch_size = 4,
        .instance = a->id % 4, .stream = 0, .device = a->id % 2 ? 0 : -1,
        .pid = a->id % 2, .tid = a->id % 4};
    prof_trace_span(a->t, &s);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  a->ns_per_span = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / a->n;
  return NULL;
}

// Writes the file that check_trace.py reads: the nasty ids, a reversed span,
// a long id, an explicitly named track, then many spans from 4 threads.
static int write_sample(const char *path, int per_thread, double *ns_per_span, err *e) {
  prof_trace *t = NULL;
  TRY(prof_trace_open(path, 1, &t, e));
  prof_trace_name_track(t, 9, 9, "named process", "named \"thread\"");
  for (size_t i = 0; i < sizeof nasty_ids / sizeof nasty_ids[0]; i++) {
    prof_trace_span_info s = {.name = "request", .start_us = 100, .end_us = 200, .model = "m\"x",
                              .version = "2", .request_id = nasty_ids[i], .batch_id = 42,
                              .batch_size = 8, .instance = 1, .stream = 2, .device = 0,
                              .pid = 9, .tid = 9};
    prof_trace_span(t, &s);
  }
  char longid[PROF_TRACE_STR_MAX * 2];
  memset(longid, 'L', sizeof longid - 1);
  longid[sizeof longid - 1] = '\0';
  prof_trace_span(t, &(prof_trace_span_info){.name = "queue", .start_us = 500, .end_us = 400,
                                             .model = "long", .version = "1",
                                             .request_id = longid, .instance = -1, .stream = -1,
                                             .device = -1, .pid = 8, .tid = 0});
  enum { NT = 4 };
  pthread_t th[NT];
  span_arg args[NT];
  for (int i = 0; i < NT; i++) {
    args[i] = (span_arg){t, i, per_thread, 0};
    if (pthread_create(&th[i], NULL, span_thread, &args[i]) != 0) {
      prof_trace_close(t, NULL);
      return err_set(e, ERR_INTERNAL, "pthread_create failed");
    }
  }
  double sum = 0;
  for (int i = 0; i < NT; i++) {
    pthread_join(th[i], NULL);
    sum += args[i].ns_per_span;
  }
  *ns_per_span = sum / NT;
  return prof_trace_close(t, e);
}

enum { PER_THREAD = 5000 };

// Settings changed while sampling: rate, off, a count that runs out (also
// when threads race for its last samples).
static void test_settings(void) {
  prof_trace *t = NULL;
  err e = {0};
  CHECK_EQ_INT(prof_trace_open("trace_settings.json", 5, &t, &e), 0);
  prof_trace_settings st;
  prof_trace_settings_get(t, &st);
  CHECK(st.rate == 5 && st.on == 1 && st.count == -1);
  CHECK_EQ_STR(prof_trace_path(t), "trace_settings.json");
  CHECK_EQ_INT(prof_trace_sample(t), 1);
  CHECK_EQ_INT(prof_trace_sample(t), 0);
  // rate 2 from now on, counting afresh: 1, 0, 1, 0
  CHECK_EQ_INT(prof_trace_settings_set(t, &(prof_trace_settings){.rate = 2, .on = 1, .count = -1}, &e), 0);
  int want[4] = {1, 0, 1, 0};
  for (int i = 0; i < 4; i++) CHECK_EQ_INT(prof_trace_sample(t), want[i]);
  // off: nothing
  CHECK_EQ_INT(prof_trace_settings_set(t, &(prof_trace_settings){.rate = 1, .on = 0, .count = -1}, &e), 0);
  int any = 0;
  for (int i = 0; i < 10; i++) any |= prof_trace_sample(t);
  CHECK_EQ_INT(any, 0);
  // a count of 3 at rate 1: three samples, then none, and the count reads 0
  CHECK_EQ_INT(prof_trace_settings_set(t, &(prof_trace_settings){.rate = 1, .on = 1, .count = 3}, &e), 0);
  int n = 0;
  for (int i = 0; i < 10; i++) n += prof_trace_sample(t);
  CHECK_EQ_INT(n, 3);
  prof_trace_settings_get(t, &st);
  CHECK_EQ_INT(st.count, 0);
  CHECK_EQ_INT(prof_trace_settings_set(t, &(prof_trace_settings){.rate = 0, .on = 1, .count = -1}, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(prof_trace_settings_set(t, &(prof_trace_settings){.rate = 1, .on = 1, .count = -2}, &e),
               ERR_INVALID_ARGUMENT);
  // threads racing for a count of 1000: exactly 1000 hits
  CHECK_EQ_INT(prof_trace_settings_set(t, &(prof_trace_settings){.rate = 1, .on = 1, .count = 1000}, &e), 0);
  enum { NT = 4 };
  pthread_t th[NT];
  sample_arg args[NT];
  for (int i = 0; i < NT; i++) {
    args[i] = (sample_arg){t, 5000, 0};
    CHECK_EQ_INT(pthread_create(&th[i], NULL, sample_thread, &args[i]), 0);
  }
  int hits = 0;
  for (int i = 0; i < NT; i++) {
    pthread_join(th[i], NULL);
    hits += args[i].hits;
  }
  CHECK_EQ_INT(hits, 1000);
  CHECK_EQ_INT(prof_trace_close(t, &e), 0);
}

static void test_file(void) {
  err e = {0};
  double ns = 0;
  CHECK_EQ_INT(write_sample("trace_file.json", PER_THREAD, &ns, &e), 0);
  fprintf(stderr, "trace: %.0f ns per span (4 threads, every span written)\n", ns);
  {
    // The same work on one thread: formatting and copying without contention.
    prof_trace *t1 = NULL;
    CHECK_EQ_INT(prof_trace_open("trace_one.json", 1, &t1, &e), 0);
    span_arg one = {t1, 0, 4 * PER_THREAD, 0};
    span_thread(&one);
    CHECK_EQ_INT(prof_trace_close(t1, &e), 0);
    fprintf(stderr, "trace: %.0f ns per span (1 thread)\n", one.ns_per_span);
  }
  size_t n = 0;
  char *b = slurp("trace_file.json", &n);
  CHECK(b != NULL);
  if (!b) return;
  CHECK(json_valid_array(b, n));
  CHECK(n > 4 && b[0] == '[' && memcmp(b + n - 2, "]\n", 2) == 0);
  // 5 nasty + 1 long + 4 threads' spans.
  CHECK_EQ_INT(count_of(b, "\"ph\":\"X\""), 5 + 1 + 4 * PER_THREAD);
  // Named: pid 9 (process + thread), pid 8 (process + thread), pids 0 and 1
  // (processes) with tids 0,2 and 1,3 (threads): 2 + 2 + 2 + 4.
  CHECK_EQ_INT(count_of(b, "\"ph\":\"M\""), 10);
  CHECK_EQ_INT(count_of(b, "\"name\":\"process_name\""), 4);
  CHECK_CONTAINS(b, "\"args\":{\"name\":\"named \\\"thread\\\"\"}");
  CHECK_CONTAINS(b, "\"args\":{\"name\":\"mlp v1\"}");
  CHECK_CONTAINS(b, "\"args\":{\"name\":\"instance 1 (GPU 0)\"}");
  CHECK_CONTAINS(b, "\"args\":{\"name\":\"instance 0 (CPU)\"}");
  CHECK_CONTAINS(b, "\"args\":{\"name\":\"requests\"}");
  // The explicit name wins over the automatic one for track (9, 9).
  CHECK_EQ_INT(count_of(b, "\"args\":{\"name\":\"m\\\"x v2\"}"), 0);
  CHECK_CONTAINS(b, "\"request_id\":\"bad\\ufffd\\ufffd utf8\"");
  CHECK_CONTAINS(b, "\"request_id\":\"ctl\\u0001\\u001f\\n\\t\"");
  CHECK_CONTAINS(b, "\"ts\":500,\"dur\":0,");  // reversed span clamped
  CHECK_CONTAINS(b, "\"batch_id\":42,\"batch_size\":8,\"instance\":1,\"stream\":2,\"device\":0}");
  // No raw control byte anywhere but the newlines between events.
  int raw_ctl = 0;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)b[i] < 0x20 && b[i] != '\n') raw_ctl++;
  CHECK_EQ_INT(raw_ctl, 0);
  free(b);

  // The validator itself must reject what it should, or the checks above say nothing.
  CHECK(!json_valid_array("[{\"a\":1},]", 10));
  CHECK(!json_valid_array("[{\"a\":1}", 8));
  CHECK(!json_valid_array("[\"x\ny\"]", 7));
  CHECK(json_valid_array("[\n{\"a\":[1,-2.5e3]}\n]\n", 20));
}

static void test_empty_and_errors(void) {
  prof_trace *t = NULL;
  err e = {0};
  CHECK_EQ_INT(prof_trace_open("trace_empty.json", 1, &t, &e), 0);
  CHECK_EQ_INT(prof_trace_flush(t, &e), 0);
  CHECK_EQ_INT(prof_trace_close(t, &e), 0);
  size_t n = 0;
  char *b = slurp("trace_empty.json", &n);
  CHECK(b && json_valid_array(b, n));
  free(b);

  // /dev/full opens but every write fails with ENOSPC: the error comes back
  // from flush and close, naming the path, and the caller never saw it.
  CHECK_EQ_INT(prof_trace_open("/dev/full", 1, &t, &e), 0);
  if (!t) return;
  prof_trace_span(t, &(prof_trace_span_info){.name = "request"});
  CHECK_EQ_INT(prof_trace_flush(t, &e), ERR_INTERNAL);
  CHECK_CONTAINS(e.msg, "/dev/full");
  e = (err){0};
  prof_trace_span(t, &(prof_trace_span_info){.name = "request"});
  CHECK_EQ_INT(prof_trace_close(t, &e), ERR_INTERNAL);
  CHECK_CONTAINS(e.msg, "/dev/full");
}

static void count_note(void *arg, const char *msg) {
  (void)msg;
  (*(int *)arg)++;
}

// --trace-file-max-bytes: the span that would pass the cap is dropped,
// sampling turns off, the note comes once, and the file closes as valid
// JSON within the cap.
static void test_max_bytes(void) {
  enum { CAP = 4096 };
  prof_trace *t = NULL;
  err e = {0};
  int notes = 0;
  CHECK_EQ_INT(prof_trace_open("trace_capped.json", 1, &t, &e), 0);
  prof_trace_limit(t, CAP, count_note, &notes);
  for (int i = 0; i < 200; i++) {
    prof_trace_span(t, &(prof_trace_span_info){.name = "request", .start_us = i, .end_us = i + 1,
                                               .model = "m", .version = "1", .request_id = "id",
                                               .instance = -1, .stream = -1, .device = -1, .pid = 1, .tid = 1});
  }
  CHECK_EQ_INT(notes, 1);
  CHECK_EQ_INT(prof_trace_sample(t), 0);  // off: requests are not even sampled
  prof_trace_settings st;
  prof_trace_settings_get(t, &st);
  CHECK_EQ_INT(st.on, 0);
  // turned on again: sampled, but nothing written and no second note
  st.on = 1;
  CHECK_EQ_INT(prof_trace_settings_set(t, &st, &e), 0);
  prof_trace_span(t, &(prof_trace_span_info){.name = "request", .pid = 1, .tid = 1});
  CHECK_EQ_INT(notes, 1);
  CHECK_EQ_INT(prof_trace_close(t, &e), 0);
  size_t n = 0;
  char *b = slurp("trace_capped.json", &n);
  CHECK(b && json_valid_array(b, n));
  CHECK(n <= CAP && n > CAP / 2);
  free(b);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--write") == 0) {
    err e = {0};
    double ns;
    if (write_sample(argv[2], 200, &ns, &e) != 0) {
      fprintf(stderr, "%s\n", e.msg);
      return 1;
    }
    return 0;
  }
  test_escape();
  test_open_errors();
  test_sample();
  test_settings();
  test_file();
  test_empty_and_errors();
  test_max_bytes();
  CHECK_DONE();
}
