// test_jsonmem.c: the JSON parse estimate (server/http/jsonmem.h) counts
// values as cJSON builds them, strings skipped by their escapes (brackets,
// commas, quotes inside them count for nothing), stays above what cJSON
// really allocates, and the budget admits, refuses and gives back.
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "server/http/jsonmem.h"

static uint64_t values_of(const char *s) {
  uint64_t v = 0;
  (void)srv_json_estimate(s, strlen(s), &v);
  return v;
}

static void test_counts(void) {
  CHECK_EQ_INT(values_of(""), 0);
  CHECK_EQ_INT(values_of("[]"), 1);
  CHECK_EQ_INT(values_of("{}"), 1);
  CHECK_EQ_INT(values_of("[[],[],{}]"), 4);
  CHECK_EQ_INT(values_of("[1, 2.5e3 ,-3,true,false,null]"), 7);
  CHECK_EQ_INT(values_of("{\"a\": 1, \"b\" : [2, \"x\"]}"), 5);  // keys are not nodes
  // brackets, commas, colons and escaped quotes inside strings
  CHECK_EQ_INT(values_of("[\"[[[,,,{{{:::\"]"), 2);
  CHECK_EQ_INT(values_of("[\"a\\\"b\", \"c\\\\\", \"d\"]"), 4);  // "a\"b", "c\\" (its quote ends it), "d"
  CHECK_EQ_INT(values_of("{\"k\\\":\": \"v\"}"), 2);             // the key holds an escaped quote and a colon
  CHECK_EQ_INT(values_of("[\"\\u005b\\u005d\"]"), 2);
  // cut short, or a dangling escape at the end: no overrun, a count still
  CHECK_EQ_INT(values_of("[\"abc"), 2);
  CHECK_EQ_INT(values_of("[\"abc\\"), 2);
}

// cJSON's own allocations, counted through its hooks.
static size_t live, peak;
static void *count_malloc(size_t n) {
  size_t *p = malloc(n + sizeof(size_t));
  if (!p) return NULL;
  *p = n;
  live += n;
  if (live > peak) peak = live;
  return p + 1;
}
static void count_free(void *q) {
  if (!q) return;
  size_t *p = (size_t *)q - 1;
  live -= *p;
  free(p);
}

static void check_above_real(const char *s) {
  cJSON_Hooks h = {count_malloc, count_free};
  cJSON_InitHooks(&h);
  live = peak = 0;
  cJSON *j = cJSON_ParseWithLength(s, strlen(s));
  CHECK(j != NULL);
  cJSON_Delete(j);
  cJSON_InitHooks(NULL);
  uint64_t est = srv_json_estimate(s, strlen(s), NULL);
  CHECK(est >= peak);
  CHECK(est <= 3 * peak + 64);  // close enough to admit real bodies
}

static void test_above_real(void) {
  size_t n = 30000;
  char *s = malloc(3 * n + 8);
  size_t o = 0;
  s[o++] = '[';
  for (size_t i = 0; i < n; i++) o += (size_t)sprintf(s + o, i ? ",{}" : "{}");
  s[o++] = ']';
  s[o] = '\0';
  check_above_real(s);
  free(s);
  check_above_real(
      "{\"inputs\": [{\"name\": \"x\", \"shape\": [2, 3], \"datatype\": \"FP32\", "
      "\"data\": [1, 2, 3, 4.5, 5, 6e-3]}], \"id\": \"q\\\"uote\"}");
  check_above_real("[\"a long string value that is mostly bytes, not nodes\", \"another\", 7]");
  // "[]," costs ~27 times its bytes as a tree: the estimate sees it
  const char *arr = "[[],[],[],[],[],[],[],[],[],[]]";
  CHECK(srv_json_estimate(arr, strlen(arr), NULL) >= 20 * strlen(arr));
}

static void test_budget(void) {
  err e = {0};
  srv_jsonmem *m = NULL;
  const char *doc = "{\"a\": [1, 2, 3], \"b\": \"text\"}";
  uint64_t need = srv_json_estimate(doc, strlen(doc), NULL);
  CHECK_EQ_INT(srv_jsonmem_create(need + need / 2, &m, &e), 0);
  srv_json a, b;
  CHECK_EQ_INT(srv_jsonmem_parse(m, doc, strlen(doc), &a, &e), 0);
  CHECK(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(a.root, "a")));
  // a second one does not fit beside it now
  CHECK(srv_jsonmem_parse(m, doc, strlen(doc), &b, &e) != 0);
  CHECK_EQ_INT(e.code, ERR_UNAVAILABLE);
  CHECK_EQ_INT(srv_json_status(e.code), 503);
  CHECK(b.root == NULL);
  srv_json_free(&a);
  CHECK_EQ_INT(srv_jsonmem_parse(m, doc, strlen(doc), &b, &e), 0);  // given back
  srv_json_free(&b);
  srv_json_free(&b);  // a freed (zeroed) one is fine
  // bad JSON: 400, and its share is given back
  CHECK_EQ_INT(srv_jsonmem_parse(m, "{\"a\": [1,", 9, &a, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(srv_json_status(e.code), 400);
  CHECK_EQ_INT(srv_jsonmem_parse(m, doc, strlen(doc), &a, &e), 0);
  srv_json_free(&a);
  srv_jsonmem_destroy(m);
  // more than the whole budget: 413, naming the flag
  CHECK_EQ_INT(srv_jsonmem_create(need - 1, &m, &e), 0);
  CHECK(srv_jsonmem_parse(m, doc, strlen(doc), &a, &e) != 0);
  CHECK_EQ_INT(e.code, ERR_RESOURCE_EXHAUSTED);
  CHECK_EQ_INT(srv_json_status(e.code), 413);
  CHECK_CONTAINS(e.msg, "--rest-json-max-memory");
  srv_jsonmem_destroy(m);
  // the two steps: admit reserves, parse_admitted parses; a failed parse gives the share back
  CHECK_EQ_INT(srv_jsonmem_create(need, &m, &e), 0);
  CHECK_EQ_INT(srv_jsonmem_admit(m, doc, strlen(doc), &a, &e), 0);
  CHECK(a.root == NULL && a.held == need);
  CHECK_EQ_INT(srv_jsonmem_admit(m, doc, strlen(doc), &b, &e), ERR_UNAVAILABLE);
  CHECK_EQ_INT(srv_json_parse_admitted(&a, doc, strlen(doc), &e), 0);
  CHECK(cJSON_IsObject(a.root));
  srv_json_free(&a);
  CHECK_EQ_INT(srv_jsonmem_admit(m, doc, strlen(doc), &a, &e), 0);
  CHECK_EQ_INT(srv_json_parse_admitted(&a, "{\"a\": [1,", 9, &e), ERR_INVALID_ARGUMENT);
  CHECK(a.root == NULL && a.m == NULL);
  CHECK_EQ_INT(srv_jsonmem_admit(m, doc, strlen(doc), &a, &e), 0);  // given back
  srv_json_free(&a);
  srv_jsonmem_destroy(m);
  // a body far past the budget is refused after scanning only part of it
  size_t big = 1 << 20;
  char *arr = malloc(big + 1);
  for (size_t i = 0; i < big; i += 2) arr[i] = '[', arr[i + 1] = ']';
  arr[big] = '\0';
  CHECK_EQ_INT(srv_jsonmem_create(4096, &m, &e), 0);
  CHECK_EQ_INT(srv_jsonmem_parse(m, arr, big, &a, &e), ERR_RESOURCE_EXHAUSTED);
  CHECK_CONTAINS(e.msg, "in its first ");
  srv_jsonmem_destroy(m);
  free(arr);
  // no budget at all
  CHECK_EQ_INT(srv_jsonmem_parse(NULL, doc, strlen(doc), &a, &e), 0);
  srv_json_free(&a);
}

int main(void) {
  test_counts();
  test_above_real();
  test_budget();
  CHECK_DONE();
}
