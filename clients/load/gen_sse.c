// gen_sse.c: the event-stream parser and the two payload readers (gen_sse.h).
#include "clients/load/gen_sse.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE_MAX_BYTES (64u << 20)

struct ld_sse {
  ld_sse_on_event cb;
  void *ctx;
  char *line;  // the line being read (without its end)
  size_t line_len, line_cap;
  char *data;  // the event's data lines so far, joined by '\n'
  size_t data_len, data_cap;
  bool have_data, cr;  // cr: the last byte was '\r' (a '\n' next belongs to it)
  int stopped;
  uint64_t events;
};

ld_sse *ld_sse_create(ld_sse_on_event cb, void *ctx) {
  ld_sse *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->cb = cb;
  p->ctx = ctx;
  return p;
}

void ld_sse_destroy(ld_sse *p) {
  if (!p) return;
  free(p->line);
  free(p->data);
  free(p);
}

void ld_sse_reset(ld_sse *p) {
  p->line_len = p->data_len = 0;
  p->have_data = p->cr = false;
  p->stopped = 0;
  p->events = 0;
}

uint64_t ld_sse_events(const ld_sse *p) {
  return p->events;
}

static int grow(char **buf, size_t *cap, size_t need) {
  if (need <= *cap) return 0;
  if (need > LINE_MAX_BYTES) return -1;
  size_t c = *cap ? *cap : 256;
  while (c < need) c *= 2;
  char *b = realloc(*buf, c);
  if (!b) return -1;
  *buf = b;
  *cap = c;
  return 0;
}

// One complete line (p->line, p->line_len bytes).
static int on_line(ld_sse *p) {
  const char *l = p->line;
  size_t n = p->line_len;
  if (n == 0) {  // blank line: dispatch
    if (!p->have_data) return 0;
    if (grow(&p->data, &p->data_cap, p->data_len + 1) != 0) return -1;
    p->data[p->data_len] = '\0';
    p->events++;
    int rc = p->cb(p->ctx, p->data, p->data_len);
    p->data_len = 0;
    p->have_data = false;
    return rc;
  }
  if (l[0] == ':') return 0;  // a comment (keep-alives)
  const char *colon = memchr(l, ':', n);
  size_t name_len = colon ? (size_t)(colon - l) : n;
  if (name_len != 4 || memcmp(l, "data", 4) != 0) return 0;  // event, id, retry: not needed here
  const char *v = colon ? colon + 1 : l + n;
  size_t vlen = (size_t)(l + n - v);
  if (vlen && *v == ' ') v++, vlen--;
  size_t need = p->data_len + (p->have_data ? 1 : 0) + vlen + 1;
  if (grow(&p->data, &p->data_cap, need) != 0) return -1;
  if (p->have_data) p->data[p->data_len++] = '\n';
  memcpy(p->data + p->data_len, v, vlen);
  p->data_len += vlen;
  p->have_data = true;
  return 0;
}

int ld_sse_feed(ld_sse *p, const char *buf, size_t len) {
  if (p->stopped) return p->stopped;
  for (size_t i = 0; i < len; i++) {
    char c = buf[i];
    if (c == '\n' && p->cr) {  // the LF of a CRLF: its line went at the CR
      p->cr = false;
      continue;
    }
    p->cr = c == '\r';
    if (c == '\n' || c == '\r') {
      int rc = on_line(p);
      p->line_len = 0;
      if (rc) return p->stopped = rc;
      continue;
    }
    if (grow(&p->line, &p->line_cap, p->line_len + 1) != 0) return p->stopped = -1;
    p->line[p->line_len++] = c;
  }
  return 0;
}

// --- payloads

static cJSON *parse(const char *data, size_t len, char *errbuf, size_t cap) {
  cJSON *o = cJSON_ParseWithLength(data, len);
  if (!o) snprintf(errbuf, cap, "event is not JSON: %.80s", data);
  return o;
}

int ld_gen_parse_tokens_event(const char *data, size_t len, int64_t *n_tokens, char *errbuf, size_t cap) {
  *n_tokens = 0;
  cJSON *o = parse(data, len, errbuf, cap);
  if (!o) return -1;
  int rc = -1;
  const cJSON *er = cJSON_GetObjectItemCaseSensitive(o, "error");
  const cJSON *ids = cJSON_GetObjectItemCaseSensitive(o, "output_ids");
  if (er) {
    snprintf(errbuf, cap, "%s", cJSON_IsString(er) ? er->valuestring : "error event without a message");
    rc = 1;
  } else if (cJSON_IsArray(ids)) {
    // [[...]] when the model batches: the inner array holds the tokens
    const cJSON *first = cJSON_GetArrayItem(ids, 0);
    if (cJSON_IsArray(first)) ids = first;
    *n_tokens = cJSON_GetArraySize(ids);
    rc = 0;
  } else {
    snprintf(errbuf, cap, "event has neither output_ids nor error: %.80s", data);
  }
  cJSON_Delete(o);
  return rc;
}

static int64_t usage_field(const cJSON *usage, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(usage, k);
  // a count past 2^53 is no token count a server sends: -1 (unknown), as a negative or missing one is,
  // and never a double converted out of int64_t's range
  return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= 9007199254740992.0 ? (int64_t)v->valuedouble
                                                                                          : -1;
}

int ld_gen_parse_openai_chunk(const char *data, size_t len, ld_oai_chunk *out, char *errbuf, size_t cap) {
  memset(out, 0, sizeof *out);
  out->prompt_tokens = out->completion_tokens = -1;
  if (len == 6 && memcmp(data, "[DONE]", 6) == 0) {
    out->done = true;
    return 0;
  }
  cJSON *o = parse(data, len, errbuf, cap);
  if (!o) return -1;
  int rc = 0;
  const cJSON *er = cJSON_GetObjectItemCaseSensitive(o, "error");
  const cJSON *choices = cJSON_GetObjectItemCaseSensitive(o, "choices");
  const cJSON *usage = cJSON_GetObjectItemCaseSensitive(o, "usage");
  if (er && !cJSON_IsNull(er)) {
    const cJSON *m = cJSON_IsObject(er) ? cJSON_GetObjectItemCaseSensitive(er, "message") : er;
    snprintf(errbuf, cap, "%s", cJSON_IsString(m) ? m->valuestring : "error without a message");
    rc = 1;
  } else if (!cJSON_IsArray(choices)) {
    snprintf(errbuf, cap, "chunk has no choices: %.80s", data);
    rc = -1;
  } else {
    const cJSON *c0 = cJSON_GetArrayItem(choices, 0);  // empty in the usage-only chunk
    if (cJSON_IsObject(c0)) {
      out->has_choice = true;
      const cJSON *t = cJSON_GetObjectItemCaseSensitive(c0, "text");
      if (cJSON_IsString(t)) out->text_len = strlen(t->valuestring);
      out->finished = cJSON_IsString(cJSON_GetObjectItemCaseSensitive(c0, "finish_reason"));
    }
    if (cJSON_IsObject(usage)) {
      out->prompt_tokens = usage_field(usage, "prompt_tokens");
      out->completion_tokens = usage_field(usage, "completion_tokens");
    }
  }
  cJSON_Delete(o);
  return rc;
}
