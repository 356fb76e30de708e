// tests/llm/tok/tok_run.c: inferd-tok-run, the tokenizer's test driver.
//   inferd-tok-run load TOKDIR             "ok", or the load error (exit 1)
//   inferd-tok-run encode TOKDIR < lines   a JSON string a line in, one line
//       out: {"a": ids with the template, "n": ids without}
//   inferd-tok-run decode TOKDIR < lines   a JSON array of ids a line in, one
//       line out: {"d": decode, "ds": decode skipping special tokens,
//       "s": stream deltas, "ss": the same skipping}; the driver itself checks
//       every delta is valid UTF-8 and that they add up to the decode, and
//       says "bad": why when not
//   inferd-tok-run bench TOKDIR < lines    encodes every line 5 times, prints
//       strings, bytes, ids and MB/s
//   inferd-tok-run threads TOKDIR < lines  encodes and decodes every line on
//       4 threads at once over one tokenizer; "ok N", or the first
//       difference from the one-thread answer (exit 1)
// check_tokenizers.py compares these with the `tokenizers` library.
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/llm/tokenizer.h"
#include "kernels/base/utf8.h"

static cJSON *ids_json(const eng_tok_ids *v) {
  cJSON *a = cJSON_CreateArray();
  for (size_t i = 0; i < v->n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(v->ids[i]));
  return a;
}

// A JSON string of s[0..n) (valid UTF-8, NUL bytes included) on stdout.
static void put_str(const char *s, size_t n) {
  putchar('"');
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\')
      printf("\\%c", c);
    else if (c < 0x20)
      printf("\\u%04x", c);
    else
      putchar(c);
  }
  putchar('"');
}

static void emit(cJSON *o) {
  char *s = cJSON_PrintUnformatted(o);
  fputs(s, stdout);
  fputc('\n', stdout);
  free(s);
  cJSON_Delete(o);
}

// Prints the stream's deltas for ids as a JSON array; *bad set (static
// text) when a rule is broken.
static void stream(const eng_tok *t, const int32_t *ids, size_t n, bool skip, const char *full, size_t full_len,
                   const char **bad) {
  eng_tok_stream *s = eng_tok_stream_create(t, skip);
  err e = {0};
  size_t at = 0;
  putchar('[');
  for (size_t i = 0; i <= n && s; i++) {
    const char *d;
    size_t len;
    int rc = i < n ? eng_tok_stream_step(s, ids[i], &d, &len, &e) : eng_tok_stream_finish(s, &d, &len, &e);
    if (rc) {
      *bad = "stream step failed";
      fprintf(stderr, "stream: %s\n", e.msg);
      break;
    }
    if (!utf8_valid(d, len)) *bad = "a delta is not valid UTF-8";
    if (at + len > full_len || memcmp(full + at, d, len) != 0) *bad = "the deltas differ from the decode";
    at += len;
    if (i) putchar(',');
    put_str(d, len);
  }
  putchar(']');
  if (at != full_len && !*bad) *bad = "the deltas add up to less than the decode";
  eng_tok_stream_destroy(s);
}

// --- threads: one tokenizer, four threads, the same answers as one

typedef struct job {
  const eng_tok *t;
  char **lines;
  size_t n;
  eng_tok_ids *want;  // the one-thread ids of each line
  char **text;        // and their decode
  size_t bad;
} job;

static void *work(void *arg) {
  job *j = arg;
  err e = {0};
  for (size_t i = 0; i < j->n; i++) {
    eng_tok_ids ids = {0};
    char *text = NULL;
    size_t len;
    if (eng_tok_encode(j->t, j->lines[i], strlen(j->lines[i]), true, &ids, &e) ||
        eng_tok_decode(j->t, ids.ids, ids.n, false, &text, &len, &e) || ids.n != j->want[i].n ||
        (ids.n && memcmp(ids.ids, j->want[i].ids, ids.n * sizeof *ids.ids)) || strcmp(text, j->text[i]))
      j->bad++;
    free(ids.ids);
    free(text);
  }
  return NULL;
}

static int threads(const eng_tok *t) {
  char *line = NULL, **lines = NULL;
  size_t cap = 0, n = 0, lcap = 0;
  ssize_t got;
  while ((got = getline(&line, &cap, stdin)) > 0) {
    cJSON *in = cJSON_ParseWithLength(line, (size_t)got);
    if (cJSON_IsString(in)) {
      if (n == lcap) lcap = lcap ? lcap * 2 : 256, lines = realloc(lines, lcap * sizeof *lines);
      lines[n++] = strdup(in->valuestring);
    }
    cJSON_Delete(in);
  }
  free(line);
  job j = {t, lines, n, calloc(n + 1, sizeof(eng_tok_ids)), calloc(n + 1, sizeof(char *)), 0};
  err e = {0};
  for (size_t i = 0; i < n; i++) {
    size_t len;
    if (eng_tok_encode(t, lines[i], strlen(lines[i]), true, &j.want[i], &e) ||
        eng_tok_decode(t, j.want[i].ids, j.want[i].n, false, &j.text[i], &len, &e))
      j.bad++;
  }
  job js[4];
  pthread_t th[4];
  for (int k = 0; k < 4; k++) js[k] = j, js[k].bad = 0, pthread_create(&th[k], NULL, work, &js[k]);
  size_t bad = j.bad;
  for (int k = 0; k < 4; k++) pthread_join(th[k], NULL), bad += js[k].bad;
  printf(bad ? "%zu lines x 4 threads: %zu differ\n" : "ok %zu lines x 4 threads\n", n, bad);
  for (size_t i = 0; i < n; i++) free(lines[i]), free(j.want[i].ids), free(j.text[i]);
  free(lines);
  free(j.want);
  free(j.text);
  return bad ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s load|encode|decode|bench TOKDIR\n", argv[0]);
    return 2;
  }
  eng_tok *t;
  err e = {0};
  if (eng_tok_create(argv[2], &t, &e)) {
    printf("%s\n", e.msg);
    return 1;
  }
  if (!strcmp(argv[1], "load")) {
    size_t bl = 0;
    bool sp = false;
    const char *bos = eng_tok_bos_id(t) >= 0 ? eng_tok_id_text(t, eng_tok_bos_id(t), &bl, &sp) : "";
    printf("ok vocab=%d bos=%d (%.*s%s) eos=%d adds_bos=%d\n", eng_tok_vocab_size(t), eng_tok_bos_id(t), (int)bl, bos,
           sp ? ", special" : "", eng_tok_eos_id(t), eng_tok_adds_bos(t));
    eng_tok_destroy(t);
    return 0;
  }
  if (!strcmp(argv[1], "threads")) {
    int r = threads(t);
    eng_tok_destroy(t);
    return r;
  }
  char *line = NULL;
  size_t cap = 0;
  ssize_t got;
  int rc = 0;
  bool bench = !strcmp(argv[1], "bench");
  size_t nstr = 0, nbytes = 0, nids = 0;
  double secs = 0;
  while ((got = getline(&line, &cap, stdin)) > 0) {
    cJSON *in = cJSON_ParseWithLength(line, (size_t)got);
    if (!in) {
      fprintf(stderr, "bad input line\n");
      rc = 2;
      break;
    }
    cJSON *o = cJSON_CreateObject();
    if ((!strcmp(argv[1], "encode") || bench) && cJSON_IsString(in)) {
      eng_tok_ids a = {0}, n = {0};
      size_t len = strlen(in->valuestring);
      struct timespec t0, t1;
      clock_gettime(CLOCK_MONOTONIC, &t0);
      for (int rep = 0; rep < (bench ? 5 : 1); rep++) {
        a.n = 0;
        if (eng_tok_encode(t, in->valuestring, len, true, &a, &e)) break;
      }
      clock_gettime(CLOCK_MONOTONIC, &t1);
      secs += (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
      nstr++, nbytes += len * 5, nids += a.n * 5;
      if (!bench) {
        if (eng_tok_encode(t, in->valuestring, len, false, &n, &e)) cJSON_AddStringToObject(o, "error", e.msg);
        cJSON_AddItemToObject(o, "a", ids_json(&a));
        cJSON_AddItemToObject(o, "n", ids_json(&n));
      }
      free(a.ids);
      free(n.ids);
    } else if (!strcmp(argv[1], "decode") && cJSON_IsArray(in)) {
      size_t n = (size_t)cJSON_GetArraySize(in), i = 0;
      int32_t *ids = malloc((n + 1) * sizeof *ids);
      for (const cJSON *c = in->child; c; c = c->next) ids[i++] = (int32_t)c->valuedouble;
      const char *bad = NULL;
      for (int skip = 0; skip < 2; skip++) {
        char *text;
        size_t len;
        if (eng_tok_decode(t, ids, n, skip, &text, &len, &e)) {
          bad = "decode failed";
          continue;
        }
        if (!utf8_valid(text, len)) bad = "the decode is not valid UTF-8";
        printf(skip ? ",\"ds\":" : "{\"d\":");
        put_str(text, len);
        printf(skip ? ",\"ss\":" : ",\"s\":");
        stream(t, ids, n, skip, text, len, &bad);
        free(text);
      }
      if (bad) printf(",\"bad\":\"%s\"", bad);
      printf("}\n");
      free(ids);
    } else {
      fprintf(stderr, "unexpected input for %s\n", argv[1]);
      rc = 2;
    }
    bool decoded = !strcmp(argv[1], "decode");
    cJSON_Delete(in);
    if (!bench && !decoded)
      emit(o);
    else
      cJSON_Delete(o);
    if (rc) break;
  }
  if (bench)
    printf("%zu strings x5, %zu bytes, %zu ids in %.3f s: %.2f MB/s, %.0f ids/s\n", nstr, nbytes, nids, secs,
           (double)nbytes / secs / 1e6, (double)nids / secs);
  free(line);
  eng_tok_destroy(t);
  return rc;
}
