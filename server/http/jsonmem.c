// jsonmem.c: the JSON parse estimate and budget (jsonmem.h).
#include "server/http/jsonmem.h"

#include <stdatomic.h>
#include <stdlib.h>

// A node: the cJSON struct and malloc's per-chunk overhead (glibc rounds a
// 64-byte request to an 80-byte chunk; jemalloc's class is 64).
#define NODE_COST (sizeof(cJSON) + 16)
// A string's allocation beyond its bytes and NUL.
#define STRING_OVERHEAD 16

struct srv_jsonmem {
  uint64_t budget;
  _Atomic uint64_t used;
};

int srv_jsonmem_create(uint64_t budget, srv_jsonmem **out, err *e) {
  srv_jsonmem *m = calloc(1, sizeof *m);
  if (!m) return err_set(e, ERR_RESOURCE_EXHAUSTED, "JSON memory budget: out of memory");
  m->budget = budget;
  *out = m;
  return 0;
}

void srv_jsonmem_destroy(srv_jsonmem *m) {
  free(m);
}

static int is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int ends_scalar(char c) {
  return is_ws(c) || c == ',' || c == ']' || c == '}' || c == ':' || c == '[' || c == '{' || c == '"';
}

// The estimate, given up (returning more than stop) once it passes stop:
// a body refused for its size is not scanned to its end, on the loop thread.
static uint64_t scan(const char *s, size_t n, uint64_t stop, uint64_t *values, size_t *scanned) {
  uint64_t nodes = 0, str_bytes = 0;
  size_t i = 0;
  while (i < n && nodes * NODE_COST + str_bytes <= stop) {
    char c = s[i];
    if (c == '"') {
      size_t j = i + 1;
      while (j < n && s[j] != '"') j += s[j] == '\\' ? 2 : 1;  // an escape's next byte is never the end
      if (j > n) j = n;
      str_bytes += (j - i - 1) + 1 + STRING_OVERHEAD;  // cJSON allocates the raw length at most, plus NUL
      size_t k = j + 1;
      while (k < n && is_ws(s[k])) k++;
      if (k >= n || s[k] != ':') nodes++;  // a key is its member's name, not a node
      i = j + 1;
    } else if (c == '[' || c == '{') {
      nodes++;
      i++;
    } else if (c == ']' || c == '}' || c == ',' || c == ':' || is_ws(c)) {
      i++;
    } else {  // a number, true, false, null (or bytes cJSON refuses): one node
      nodes++;
      while (i < n && !ends_scalar(s[i])) i++;
    }
  }
  *values = nodes;
  *scanned = i < n ? i : n;
  return nodes * NODE_COST + str_bytes;
}

uint64_t srv_json_estimate(const char *s, size_t n, uint64_t *values) {
  uint64_t v = 0;
  size_t scanned = 0;
  uint64_t est = scan(s, n, UINT64_MAX, &v, &scanned);
  if (values) *values = v;
  return est;
}

int srv_json_status(err_code code) {
  return code == ERR_RESOURCE_EXHAUSTED ? 413
         : code == ERR_UNAVAILABLE      ? 503
         : code == ERR_INVALID_ARGUMENT ? 400
                                        : 500;
}

int srv_jsonmem_admit(srv_jsonmem *m, const char *s, size_t n, srv_json *out, err *e) {
  *out = (srv_json){0};
  if (m && m->budget) {
    uint64_t values = 0;
    size_t scanned = 0;
    uint64_t need = scan(s, n, m->budget, &values, &scanned);
    if (need > m->budget)
      return err_set(e, ERR_RESOURCE_EXHAUSTED,
                     "this JSON body (%zu bytes) would take more than --rest-json-max-memory (%llu MiB) to parse "
                     "(%llu values in its first %zu bytes already): send large tensors with the binary data "
                     "extension",
                     n, (unsigned long long)(m->budget >> 20), (unsigned long long)values, scanned);
    uint64_t cur = atomic_load(&m->used);
    do {
      if (cur + need > m->budget)
        return err_set(e, ERR_UNAVAILABLE,
                       "JSON bodies being parsed take --rest-json-max-memory (%llu MiB) now: retry shortly",
                       (unsigned long long)(m->budget >> 20));
    } while (!atomic_compare_exchange_weak(&m->used, &cur, cur + need));
    out->m = m;
    out->held = need;
  }
  return 0;
}

int srv_json_parse_admitted(srv_json *j, const char *s, size_t n, err *e) {
  j->root = cJSON_ParseWithLength(s, n);
  if (!j->root) {
    srv_json_free(j);
    return err_set(e, ERR_INVALID_ARGUMENT, "the request body is not valid JSON");
  }
  return 0;
}

int srv_jsonmem_parse(srv_jsonmem *m, const char *s, size_t n, srv_json *out, err *e) {
  TRY(srv_jsonmem_admit(m, s, n, out, e));
  return srv_json_parse_admitted(out, s, n, e);
}

void srv_json_free(srv_json *j) {
  cJSON_Delete(j->root);
  if (j->m) atomic_fetch_sub(&j->m->used, j->held);
  *j = (srv_json){0};
}
