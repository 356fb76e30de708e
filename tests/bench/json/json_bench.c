// json_bench.c: parse + build of a large KServe v2 tensor body with each of
// Debian 12's three C JSON libraries (cJSON, jansson, json-c), to choose the
// one server/http/rest.c uses. Parse: the request text -> a float array (walking
// "inputs"[0]["data"]); build: a float array -> the response text with the
// floats in "outputs"[0]["data"]. Best of REPS runs each, same input.
// jansson and json-c declare the same names (json_object, json_type), so the
// file is compiled once per library (-DBENCH_CJSON, -DBENCH_JANSSON,
// -DBENCH_JSONC) and once for main (-DBENCH_MAIN).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REPS 5

#ifdef BENCH_MAIN
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char *make_body(const float *v, size_t n) {
  size_t cap = n * 24 + 256, o = 0;
  char *b = malloc(cap);
  o += (size_t)snprintf(b + o, cap - o, "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,%zu],\"datatype\":\"FP32\",\"data\":[", n);
  for (size_t i = 0; i < n; i++) o += (size_t)snprintf(b + o, cap - o, "%s%.9g", i ? "," : "", (double)v[i]);
  snprintf(b + o, cap - o, "]}]}");
  return b;
}
#endif

int parse_cjson(const char *s, float *out, size_t n);
char *build_cjson(const float *v, size_t n);
char *build_cjson_raw(const float *v, size_t n);
int parse_jansson(const char *s, float *out, size_t n);
char *build_jansson(const float *v, size_t n);
int parse_jsonc(const char *s, float *out, size_t n);
char *build_jsonc(const float *v, size_t n);

#ifdef BENCH_CJSON
#include <cjson/cJSON.h>
int parse_cjson(const char *s, float *out, size_t n) {
  cJSON *root = cJSON_Parse(s);
  cJSON *data = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "inputs"), 0), "data");
  size_t i = 0;
  for (cJSON *e = data ? data->child : NULL; e && i < n; e = e->next) out[i++] = (float)e->valuedouble;
  cJSON_Delete(root);
  return i == n ? 0 : -1;
}

char *build_cjson(const float *v, size_t n) {
  cJSON *root = cJSON_CreateObject(), *outs = cJSON_AddArrayToObject(root, "outputs"), *o = cJSON_CreateObject();
  cJSON_AddItemToArray(outs, o);
  cJSON_AddStringToObject(o, "name", "y");
  cJSON *data = cJSON_AddArrayToObject(o, "data");
  for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(data, cJSON_CreateNumber(v[i]));  // O(1): cJSON keeps the tail
  char *s = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  return s;
}

// As server/http/rest_infer.c builds responses: cJSON for the structure, the data
// array's text written with %.9g (enough digits to round-trip an FP32; cJSON
// prints every number as a double, trying %.15g and then %.17g) and inserted
// with cJSON_CreateRaw.
char *build_cjson_raw(const float *v, size_t n) {
  size_t cap = n * 16 + 3, o = 0;
  char *txt = malloc(cap);
  txt[o++] = '[';
  for (size_t i = 0; i < n; i++) o += (size_t)snprintf(txt + o, cap - o, "%s%.9g", i ? "," : "", (double)v[i]);
  txt[o++] = ']';
  txt[o] = '\0';
  cJSON *root = cJSON_CreateObject(), *outs = cJSON_AddArrayToObject(root, "outputs"), *ob = cJSON_CreateObject();
  cJSON_AddItemToArray(outs, ob);
  cJSON_AddStringToObject(ob, "name", "y");
  cJSON_AddItemToObject(ob, "data", cJSON_CreateRaw(txt));
  free(txt);
  char *s = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  return s;
}
#endif

#ifdef BENCH_JANSSON
#include <jansson.h>
int parse_jansson(const char *s, float *out, size_t n) {
  json_error_t err;
  json_t *root = json_loads(s, 0, &err);
  json_t *data = json_object_get(json_array_get(json_object_get(root, "inputs"), 0), "data");
  size_t k = json_array_size(data);
  for (size_t i = 0; i < k && i < n; i++) out[i] = (float)json_number_value(json_array_get(data, i));
  json_decref(root);
  return k == n ? 0 : -1;
}

char *build_jansson(const float *v, size_t n) {
  json_t *root = json_object(), *outs = json_array(), *o = json_object(), *data = json_array();
  json_object_set_new(o, "name", json_string("y"));
  for (size_t i = 0; i < n; i++) json_array_append_new(data, json_real(v[i]));
  json_object_set_new(o, "data", data);
  json_array_append_new(outs, o);
  json_object_set_new(root, "outputs", outs);
  char *s = json_dumps(root, JSON_COMPACT);
  json_decref(root);
  return s;
}

#endif

#ifdef BENCH_JSONC
#include <json-c/json.h>
int parse_jsonc(const char *s, float *out, size_t n) {
  struct json_object *root = json_tokener_parse(s), *ins, *data;
  if (!root || !json_object_object_get_ex(root, "inputs", &ins)) return -1;
  if (!json_object_object_get_ex(json_object_array_get_idx(ins, 0), "data", &data)) return -1;
  size_t k = json_object_array_length(data);
  for (size_t i = 0; i < k && i < n; i++) out[i] = (float)json_object_get_double(json_object_array_get_idx(data, i));
  json_object_put(root);
  return k == n ? 0 : -1;
}

char *build_jsonc(const float *v, size_t n) {
  struct json_object *root = json_object_new_object(), *outs = json_object_new_array(), *o = json_object_new_object(),
                     *data = json_object_new_array_ext((int)n);
  json_object_object_add(o, "name", json_object_new_string("y"));
  for (size_t i = 0; i < n; i++) json_object_array_add(data, json_object_new_double(v[i]));
  json_object_object_add(o, "data", data);
  json_object_array_add(outs, o);
  json_object_object_add(root, "outputs", outs);
  char *s = strdup(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN));
  json_object_put(root);
  return s;
}

#endif

#ifdef BENCH_MAIN
int main(int argc, char **argv) {
  size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000000;
  float *v = malloc(n * sizeof *v), *got = malloc(n * sizeof *got);
  srand(1);
  for (size_t i = 0; i < n; i++) v[i] = (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
  char *body = make_body(v, n);
  printf("body: %zu floats, %.1f MB\n", n, (double)strlen(body) / 1e6);
  struct {
    const char *name;
    int (*parse)(const char *, float *, size_t);
    char *(*build)(const float *, size_t);
  } libs[] = {{"cJSON 1.7.15", parse_cjson, build_cjson},
              {"cJSON+raw data", parse_cjson, build_cjson_raw},
              {"jansson 2.14", parse_jansson, build_jansson},
              {"json-c 0.16", parse_jsonc, build_jsonc}};
  for (size_t l = 0; l < sizeof libs / sizeof libs[0]; l++) {
    double best_p = 1e9, best_b = 1e9;
    size_t out_len = 0;
    for (int r = 0; r < REPS; r++) {
      memset(got, 0, n * sizeof *got);
      double t0 = now_s();
      int rc = libs[l].parse(body, got, n);
      double t1 = now_s();
      if (rc != 0 || memcmp(got, v, n * sizeof *v) != 0) {
        fprintf(stderr, "%s: parse result differs\n", libs[l].name);
        return 1;
      }
      char *s = libs[l].build(v, n);
      double t2 = now_s();
      out_len = strlen(s);
      free(s);
      if (t1 - t0 < best_p) best_p = t1 - t0;
      if (t2 - t1 < best_b) best_b = t2 - t1;
    }
    printf("%-14s parse %7.1f ms  build %7.1f ms  (output %.1f MB)\n", libs[l].name, best_p * 1e3, best_b * 1e3,
           (double)out_len / 1e6);
  }
  free(body);
  free(v);
  free(got);
  return 0;
}
#endif
