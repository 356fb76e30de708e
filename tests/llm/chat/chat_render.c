// tests/llm/chat/chat_render.c: the chat template tests' driver
// (inferd-chat-render).
//   check FIXTURE.json TEMPLATE_DIR  renders every recorded case with
//       engine/llm/chat_template.c and compares it byte for byte with what
//       transformers' apply_chat_template rendered (or, for a case where it
//       raised, checks that this one fails too: with raise_exception's own
//       message exactly when the template raised it). Exit 0 all passed, 1 not.
//   render TEMPLATE_FILE  reads one case as JSON on stdin ({bos_token,
//       eos_token, messages, tools, documents, add_generation_prompt, extra,
//       now}) and writes {"output": ...} or {"error": ..., "code": ...} on
//       stdout (check_chat_live.py compares it with transformers live).
//   parse TEMPLATE_FILE...  compiles templates, printing each one's error.
//   bench TEMPLATE_FILE N  times N compiles and N renders of the case on stdin.
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/llm/chat_template.h"
#include "kernels/base/err.h"

static char *slurp(FILE *f, size_t *len) {
  size_t cap = 1 << 16, n = 0;
  char *p = malloc(cap);
  if (!p) return NULL;
  for (;;) {
    if (n + 4096 + 1 > cap) {
      char *q = realloc(p, cap *= 2);
      if (!q) { free(p); return NULL; }
      p = q;
    }
    size_t k = fread(p + n, 1, cap - n - 1, f);
    n += k;
    if (k == 0) break;
  }
  p[n] = '\0';
  *len = n;
  return p;
}

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *p = slurp(f, len);
  fclose(f);
  return p;
}

static int64_t fixed_now(void *ctx) { return *(const int64_t *)ctx; }

static const char *str_or_null(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

// Renders one case; *out malloc'd on success.
static int render_case(const char *tpl, size_t tlen, const cJSON *defaults, const cJSON *c, char **out, err *e) {
  const char *bos = str_or_null(c, "bos_token"), *eos = str_or_null(c, "eos_token");
  if (!cJSON_GetObjectItemCaseSensitive(c, "bos_token")) bos = str_or_null(defaults, "bos_token");
  if (!cJSON_GetObjectItemCaseSensitive(c, "eos_token")) eos = str_or_null(defaults, "eos_token");
  eng_chat_template *t = eng_chat_template_create(tpl, tlen, bos, eos, e);
  if (!t) return e->code;
  const cJSON *now = cJSON_GetObjectItemCaseSensitive(c, "now");
  int64_t now_s = cJSON_IsNumber(now) ? (int64_t)now->valuedouble : 0;
  const cJSON *tools = cJSON_GetObjectItemCaseSensitive(c, "tools"), *docs = cJSON_GetObjectItemCaseSensitive(c, "documents");
  const cJSON *extra = cJSON_GetObjectItemCaseSensitive(c, "extra");
  eng_chat_opts o = {cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "add_generation_prompt")),
                     cJSON_IsArray(tools) ? tools : NULL,
                     cJSON_IsArray(docs) ? docs : NULL,
                     cJSON_IsObject(extra) ? extra : NULL,
                     cJSON_IsNumber(now) ? fixed_now : NULL,
                     &now_s,
                     0,
                     NULL};
  const cJSON *cont = cJSON_GetObjectItemCaseSensitive(c, "continue_final_message");
  if (cJSON_IsTrue(cont)) o.continue_final_message = "content";
  if (cJSON_IsString(cont)) o.continue_final_message = cont->valuestring;
  size_t len;
  int rc = eng_chat_template_render(t, cJSON_GetObjectItemCaseSensitive(c, "messages"), &o, out, &len, e);
  eng_chat_template_destroy(t);
  return rc;
}

static void show_diff(const char *want, const char *got) {
  size_t i = 0;
  while (want[i] && want[i] == got[i]) i++;
  size_t from = i > 60 ? i - 60 : 0;
  fprintf(stderr, "    first difference at byte %zu\n    want: ...%.120s\n    got:  ...%.120s\n", i, want + from, got + from);
}

static int check(const char *fixture, const char *dir) {
  size_t flen, tlen;
  char *ftext = read_file(fixture, &flen);
  if (!ftext) { fprintf(stderr, "cannot read %s\n", fixture); return 2; }
  cJSON *fx = cJSON_ParseWithLength(ftext, flen);
  free(ftext);
  const char *tname = str_or_null(fx, "template");
  const cJSON *cases = cJSON_GetObjectItemCaseSensitive(fx, "cases");
  if (!tname || !cJSON_IsArray(cases)) { fprintf(stderr, "%s: not a fixture\n", fixture); cJSON_Delete(fx); return 2; }
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, tname);
  char *tpl = read_file(path, &tlen);
  if (!tpl) { fprintf(stderr, "cannot read %s\n", path); cJSON_Delete(fx); return 2; }
  int passed = 0, failed = 0;
  for (const cJSON *c = cases->child; c; c = c->next) {
    const char *name = str_or_null(c, "name");
    const char *want = str_or_null(c, "output");
    const cJSON *want_err = cJSON_GetObjectItemCaseSensitive(c, "error");
    char *got = NULL;
    err e = {0};
    int rc = render_case(tpl, tlen, fx, c, &got, &e);
    int ok;
    if (want) {
      ok = rc == 0 && !strcmp(want, got);
      if (!ok) {
        fprintf(stderr, "FAIL %s / %s\n", tname, name ? name : "?");
        if (rc) fprintf(stderr, "    wanted output, got error %s: %s\n", err_code_name(e.code), e.msg);
        else show_diff(want, got);
      }
    } else {
      const char *kind = str_or_null(want_err, "kind"), *msg = str_or_null(want_err, "message");
      int raised = kind && !strcmp(kind, "raise_exception");
      ok = rc != 0 && (!raised || (e.code == ERR_FAILED_PRECONDITION && msg && !strcmp(e.msg, msg)));
      if (!ok) {
        fprintf(stderr, "FAIL %s / %s\n    wanted error (%s) %s\n", tname, name ? name : "?", kind ? kind : "?", msg ? msg : "");
        if (rc) fprintf(stderr, "    got error %s: %s\n", err_code_name(e.code), e.msg);
        else fprintf(stderr, "    got output: %.200s\n", got);
      }
    }
    free(got);
    ok ? passed++ : failed++;
  }
  printf("%s: %d passed, %d failed\n", tname, passed, failed);
  free(tpl);
  cJSON_Delete(fx);
  return failed ? 1 : 0;
}

static int render_stdin(const char *tpl_path) {
  size_t tlen, ilen;
  char *tpl = read_file(tpl_path, &tlen);
  if (!tpl) { fprintf(stderr, "cannot read %s\n", tpl_path); return 2; }
  char *in = slurp(stdin, &ilen);
  cJSON *c = in ? cJSON_ParseWithLength(in, ilen) : NULL;
  free(in);
  if (!c) { free(tpl); fprintf(stderr, "stdin is not JSON\n"); return 2; }
  char *got = NULL;
  err e = {0};
  int rc = render_case(tpl, tlen, c, c, &got, &e);
  cJSON *res = cJSON_CreateObject();
  if (rc) {
    cJSON_AddStringToObject(res, "error", e.msg);
    cJSON_AddStringToObject(res, "code", err_code_name(e.code));
  } else {
    cJSON_AddStringToObject(res, "output", got);
  }
  char *txt = cJSON_PrintUnformatted(res);
  if (txt) puts(txt);
  free(txt);
  free(got);
  free(tpl);
  cJSON_Delete(res);
  cJSON_Delete(c);
  return 0;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// bench: how long a compile and a render take (the case on stdin, n times each).
static int bench(const char *tpl_path, int n) {
  size_t tlen, ilen;
  char *tpl = read_file(tpl_path, &tlen), *in = slurp(stdin, &ilen);
  cJSON *c = in ? cJSON_ParseWithLength(in, ilen) : NULL;
  free(in);
  if (!tpl || !c || n < 1) { free(tpl); cJSON_Delete(c); fprintf(stderr, "bench: bad input\n"); return 2; }
  err e = {0};
  double t0 = now_s();
  for (int i = 0; i < n; i++) eng_chat_template_destroy(eng_chat_template_create(tpl, tlen, "<s>", "</s>", &e));
  double t1 = now_s();
  eng_chat_template *t = eng_chat_template_create(tpl, tlen, str_or_null(c, "bos_token"), str_or_null(c, "eos_token"), &e);
  const cJSON *tools = cJSON_GetObjectItemCaseSensitive(c, "tools");
  eng_chat_opts o = {cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "add_generation_prompt")),
                     cJSON_IsArray(tools) ? tools : NULL, NULL, NULL, NULL, NULL, 0, NULL};
  size_t len = 0;
  int rc = 0;
  for (int i = 0; t && i < n && !rc; i++) {
    char *out = NULL;
    rc = eng_chat_template_render(t, cJSON_GetObjectItemCaseSensitive(c, "messages"), &o, &out, &len, &e);
    free(out);
  }
  double t2 = now_s();
  if (!t || rc) fprintf(stderr, "bench: %s\n", e.msg);
  else printf("%s: compile %.1f us, render %.1f us (%zu bytes out)\n", tpl_path, (t1 - t0) / n * 1e6, (t2 - t1) / n * 1e6, len);
  eng_chat_template_destroy(t);
  cJSON_Delete(c);
  free(tpl);
  return t && !rc ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "bench")) return bench(argv[2], atoi(argv[3]));
  if (argc >= 4 && !strcmp(argv[1], "check")) {
    int worst = 0;
    for (int i = 2; i + 1 < argc; i++) {
      int rc = check(argv[i], argv[argc - 1]);
      if (rc > worst) worst = rc;
    }
    return worst;
  }
  if (argc == 3 && !strcmp(argv[1], "render")) return render_stdin(argv[2]);
  if (argc >= 3 && !strcmp(argv[1], "parse")) {
    int bad = 0;
    for (int i = 2; i < argc; i++) {
      size_t len;
      char *tpl = read_file(argv[i], &len);
      err e = {0};
      eng_chat_template *t = tpl ? eng_chat_template_create(tpl, len, "<s>", "</s>", &e) : NULL;
      printf("%s: %s\n", argv[i], t ? "ok" : tpl ? e.msg : "cannot read");
      bad |= !t;
      eng_chat_template_destroy(t);
      free(tpl);
    }
    return bad;
  }
  fprintf(stderr, "usage: %s check FIXTURE.json... TEMPLATE_DIR | render TEMPLATE_FILE | parse TEMPLATE_FILE...\n", argv[0]);
  return 2;
}
