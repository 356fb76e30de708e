// server/http/rest_infer.c: the KServe v2 infer route. The request's JSON
// (Triton's: inputs with data or binary_data_size, parameters, requested
// outputs; the binary tensor extension's bytes after the JSON; a compressed
// body) becomes the ModelInferRequest a gRPC client would send, run through
// ModelInfer's own handler (rest.c's local call); its ModelInferResponse
// becomes Triton's JSON, each output as a data array or binary bytes after
// the JSON, compressed as the client accepts.
#include <cjson/cJSON.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc_service.pb-c.h"
#include "kernels/base/strwire.h"
#include "kernels/base/utf8.h"
#include "server/http/httpz.h"
#include "server/http/rest_internal.h"
#include "server/obs/log.h"

#define MAX_TENSORS 64  // inputs or outputs of one request (server/core/reply.c's response limit too)

// --- inference answer: ModelInferResponse -> Triton's JSON (+ binary tensors)

static const out_opt *find_out_opt(const job *j, const char *name) {
  for (size_t i = 0; i < j->n_out_opts; i++)
    if (strcmp(j->out_opts[i].name, name) == 0) return &j->out_opts[i];
  return NULL;
}

// Appends printf output to a growing buffer; -1 when out of memory.
typedef struct tbuf {
  char *p;
  size_t len, cap;
} tbuf;

static int tb_reserve(tbuf *b, size_t more) {
  if (b->len + more + 1 <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 1024;
  while (cap < b->len + more + 1) cap *= 2;
  char *p = realloc(b->p, cap);
  if (!p) return -1;
  b->p = p;
  b->cap = cap;
  return 0;
}

// The data array of one output as JSON text. cJSON prints every number as a
// double (%.15g, then %.17g when that does not round-trip), about twice as
// slow as this on large outputs (tests/bench/json); %.9g round-trips FP32.
static int data_text(const char *name, dtype dt, const uint8_t *raw, size_t numel, char **out, char *why,
                     size_t why_cap) {
  tbuf b = {0};
  if (tb_reserve(&b, numel * 16 + 2)) return -1;
  b.p[b.len++] = '[';
  for (size_t i = 0; i < numel; i++) {
    if (tb_reserve(&b, 32)) {
      free(b.p);
      return -1;
    }
    if (i) b.p[b.len++] = ',';
    char *w = b.p + b.len;
    size_t room = b.cap - b.len;
    int n = 0;
    double f = 0;
    int is_float = 0;
    switch (dt) {
      case DT_FP32: f = ((const float *)raw)[i], is_float = 1; break;
      case DT_FP64: f = ((const double *)raw)[i], is_float = 1; break;
      case DT_INT64: n = snprintf(w, room, "%" PRId64, ((const int64_t *)raw)[i]); break;
      case DT_INT32: n = snprintf(w, room, "%" PRId32, ((const int32_t *)raw)[i]); break;
      case DT_INT16: n = snprintf(w, room, "%d", ((const int16_t *)raw)[i]); break;
      case DT_INT8: n = snprintf(w, room, "%d", ((const int8_t *)raw)[i]); break;
      case DT_UINT64: n = snprintf(w, room, "%" PRIu64, ((const uint64_t *)raw)[i]); break;
      case DT_UINT32: n = snprintf(w, room, "%" PRIu32, ((const uint32_t *)raw)[i]); break;
      case DT_UINT16: n = snprintf(w, room, "%u", ((const uint16_t *)raw)[i]); break;
      case DT_UINT8: n = snprintf(w, room, "%u", raw[i]); break;
      case DT_BOOL: n = snprintf(w, room, "%s", raw[i] ? "true" : "false"); break;
      default:
        free(b.p);
        snprintf(why, why_cap, "output '%s': %s cannot be written as JSON; request it with binary_data", name,
                 dtype_wire_name(dt));
        return -2;
    }
    if (is_float) {
      // JSON has no NaN or infinities: null, as Python's json.dumps(allow_nan=False) would refuse
      if (!isfinite(f)) n = snprintf(w, room, "null");
      else n = snprintf(w, room, dt == DT_FP32 ? "%.9g" : "%.17g", f);
    }
    b.len += (size_t)n;
  }
  b.p[b.len++] = ']';
  b.p[b.len] = '\0';
  *out = b.p;
  return 0;
}

// A BYTES output's data array as JSON text: each element (the wire layout
// the engine wrote, strwire.h) a JSON string. JSON strings are Unicode: an
// element that is not UTF-8 is refused with a pointer to binary_data,
// which carries any bytes.
static int strings_text(const char *name, const uint8_t *raw, size_t len, char **out, char *why, size_t why_cap) {
  tbuf b = {0};
  if (tb_reserve(&b, len + 2)) return -1;
  b.p[b.len++] = '[';
  size_t off = 0;
  for (size_t i = 0; off < len; i++) {
    uint32_t l = len - off >= 4 ? strwire_len(raw + off) : 0;
    if (len - off < 4 || len - off - 4 < l) {  // cannot happen: the engine wrote it
      free(b.p);
      snprintf(why, why_cap, "output '%s': its BYTES data is cut short", name);
      return -2;
    }
    const uint8_t *s = raw + off + 4;
    off += 4 + (size_t)l;
    if (!utf8_valid((const char *)s, l)) {
      free(b.p);
      snprintf(why, why_cap, "output '%s': element %zu is not UTF-8, which JSON cannot carry; request it with "
               "binary_data", name, i);
      return -2;
    }
    if (tb_reserve(&b, 6 * (size_t)l + 4)) {  // \u00XX at most per byte
      free(b.p);
      return -1;
    }
    if (i) b.p[b.len++] = ',';
    b.p[b.len++] = '"';
    for (uint32_t k = 0; k < l; k++) {
      uint8_t c = s[k];
      if (c == '"' || c == '\\') b.p[b.len++] = '\\', b.p[b.len++] = (char)c;
      else if (c < 0x20) b.len += (size_t)snprintf(b.p + b.len, 7, "\\u%04x", c);
      else b.p[b.len++] = (char)c;
    }
    b.p[b.len++] = '"';
  }
  b.p[b.len++] = ']';
  b.p[b.len] = '\0';
  *out = b.p;
  return 0;
}

// Writes the HTTP answer of an inference from its packed ModelInferResponse.
static void infer_answer(job *j, const uint8_t *pb, size_t pb_len) {
  Inference__ModelInferResponse *r = inference__model_infer_response__unpack(NULL, pb_len, pb);
  if (!r) return srv_rest__set_error(&j->resp, 500, "the inference answer does not parse");
  cJSON *root = cJSON_CreateObject(), *outs = NULL;
  int rc = root ? 0 : -1;
  char why[300] = "";
  if (rc == 0) {
    cJSON_AddStringToObject(root, "model_name", r->model_name);
    cJSON_AddStringToObject(root, "model_version", r->model_version);
    if (r->id && r->id[0]) cJSON_AddStringToObject(root, "id", r->id);
    outs = cJSON_AddArrayToObject(root, "outputs");
    if (!outs) rc = -1;
  }
  size_t bin_total = 0;
  int bin[MAX_TENSORS] = {0};
  for (size_t i = 0; rc == 0 && i < r->n_outputs && i < MAX_TENSORS; i++) {
    const Inference__ModelInferResponse__InferOutputTensor *t = r->outputs[i];
    const ProtobufCBinaryData *raw = i < r->n_raw_output_contents ? &r->raw_output_contents[i] : NULL;
    cJSON *o = cJSON_CreateObject();
    if (!o) {
      rc = -1;
      break;
    }
    cJSON_AddItemToArray(outs, o);
    cJSON_AddStringToObject(o, "name", t->name);
    cJSON_AddStringToObject(o, "datatype", t->datatype);
    cJSON *shape = cJSON_AddArrayToObject(o, "shape");
    for (size_t d = 0; shape && d < t->n_shape; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
    const out_opt *opt = find_out_opt(j, t->name);
    int want_bin = opt ? opt->binary : j->binary_default;
    if (!raw || (raw->len == 0 && eng_numel((int)t->n_shape, t->shape) != 0)) continue;  // in shared memory
    if (want_bin) {
      cJSON *params = cJSON_AddObjectToObject(o, "parameters");
      if (!params || !cJSON_AddNumberToObject(params, "binary_data_size", (double)raw->len)) rc = -1;
      bin[i] = 1;
      bin_total += raw->len;
      continue;
    }
    dtype dt = dtype_from_wire(t->datatype);  // BYTES: a model's, or the classification extension's strings
    size_t es = dtype_size(dt);
    char *txt = NULL;
    int drc = dt == DT_STRING ? strings_text(t->name, raw->data, raw->len, &txt, why, sizeof why)
                              : data_text(t->name, dt, raw->data, es ? raw->len / es : 0, &txt, why, sizeof why);
    if (drc) {
      rc = drc;
      break;
    }
    cJSON *data = cJSON_CreateRaw(txt);
    free(txt);
    if (!data) rc = -1;
    else cJSON_AddItemToObject(o, "data", data);
  }
  char *hdr = rc == 0 ? cJSON_PrintUnformatted(root) : NULL;
  cJSON_Delete(root);
  if (rc == -2) {
    inference__model_infer_response__free_unpacked(r, NULL);
    return srv_rest__set_error(&j->resp, 400, why);
  }
  if (!hdr) {
    inference__model_infer_response__free_unpacked(r, NULL);
    return srv_rest__set_error(&j->resp, 500, "out of memory writing the inference answer");
  }
  size_t hlen = strlen(hdr);
  if (bin_total == 0) {
    inference__model_infer_response__free_unpacked(r, NULL);
    return srv_rest__set_text(&j->resp, 200, "application/json", hdr, hlen);
  }
  // Triton's binary tensor extension: the JSON header, then each binary
  // output's bytes in the order of "outputs"
  char *body = realloc(hdr, hlen + bin_total);
  if (!body) {
    free(hdr);
    inference__model_infer_response__free_unpacked(r, NULL);
    return srv_rest__set_error(&j->resp, 500, "out of memory writing the inference answer");
  }
  size_t off = hlen;
  for (size_t i = 0; i < r->n_outputs && i < MAX_TENSORS; i++) {
    if (!bin[i]) continue;
    memcpy(body + off, r->raw_output_contents[i].data, r->raw_output_contents[i].len);
    off += r->raw_output_contents[i].len;
  }
  inference__model_infer_response__free_unpacked(r, NULL);
  srv_rest__set_text(&j->resp, 200, "application/octet-stream", body, off);
  snprintf(j->resp.headers, sizeof j->resp.headers, "Inference-Header-Content-Length: %zu\r\n", hlen);
}

// Compresses a successful inference answer as the client asked (Triton
// does so for inference answers only; errors stay plain). Runs where the
// answer was written (an instance thread), not on the loop. Out of memory:
// the answer goes uncompressed, which the client reads as well.
static void compress_answer(job *j) {
  srv_http_response *a = &j->resp;
  if (j->resp_enc == SRV_HTTPZ_IDENTITY || a->status != 200 || !a->free_body) return;
  uint8_t *z = NULL;
  size_t zlen = 0;
  err e = {0};
  if (srv_httpz_deflate(j->resp_enc, a->body, a->len, &z, &zlen, &e) != 0) {
    srv_log(SRV_LOG_WARN, "REST: answering uncompressed: %s", e.msg);
    return;
  }
  size_t used = strlen(a->headers);
  int w = snprintf(a->headers + used, sizeof a->headers - used, "Content-Encoding: %s\r\n",
                   srv_httpz_name(j->resp_enc));
  if (w < 0 || (size_t)w >= sizeof a->headers - used) {  // cannot happen with the headers written today
    a->headers[used] = '\0';
    free(z);
    return;
  }
  // the binary extension's Inference-Header-Content-Length stays the
  // uncompressed JSON's length, as Triton sends it
  free(a->body);
  a->body = (char *)z;
  a->len = zlen;
}

void srv_rest__infer_answer(job *j, const uint8_t *pb, size_t pb_len) {
  infer_answer(j, pb, pb_len);
  compress_answer(j);
}

// --- inference request: Triton's JSON (+ binary tensors) -> ModelInferRequest

// Every allocation of one request's protobuf message, freed together.
typedef struct arena {
  void **p;
  size_t n, cap;
  int oom;
} arena;

static void *a_alloc(arena *a, size_t n) {
  if (a->oom) return NULL;
  if (a->n == a->cap) {
    size_t cap = a->cap ? a->cap * 2 : 32;
    void **q = realloc(a->p, cap * sizeof *q);
    if (!q) {
      a->oom = 1;
      return NULL;
    }
    a->p = q;
    a->cap = cap;
  }
  void *x = calloc(1, n ? n : 1);
  if (!x) {
    a->oom = 1;
    return NULL;
  }
  a->p[a->n++] = x;
  return x;
}

static void a_free(arena *a) {
  for (size_t i = 0; i < a->n; i++) free(a->p[i]);
  free(a->p);
}

static char *a_strdup(arena *a, const char *s) {
  size_t n = strlen(s);
  char *d = a_alloc(a, n + 1);
  if (d) memcpy(d, s, n);
  return d;
}

// The three ParametersEntry messages (request, input, output) share one layout.
typedef struct param_entry {
  ProtobufCMessage base;
  char *key;
  Inference__InferParameter *value;
} param_entry;

static int add_param(arena *a, const ProtobufCMessageDescriptor *d, param_entry ***list, size_t *n, size_t cap,
                     const char *key, const cJSON *v, char *why, size_t why_cap) {
  param_entry *e = a_alloc(a, sizeof *e);
  Inference__InferParameter *p = a_alloc(a, sizeof *p);
  if (!e || !p || !*list) return -1;
  if (*n >= cap) {
    snprintf(why, why_cap, "too many parameters");
    return -2;
  }
  protobuf_c_message_init(d, e);
  inference__infer_parameter__init(p);
  e->key = a_strdup(a, key);
  e->value = p;
  if (cJSON_IsBool(v)) {
    p->parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM;
    p->bool_param = cJSON_IsTrue(v);
  } else if (cJSON_IsString(v)) {
    p->parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM;
    p->string_param = a_strdup(a, v->valuestring);
  } else if (cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) && fabs(v->valuedouble) < 9.007199254740992e15) {
    p->parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
    p->int64_param = (int64_t)v->valuedouble;
  } else if (cJSON_IsNumber(v)) {
    p->parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_DOUBLE_PARAM;
    p->double_param = v->valuedouble;
  } else {
    snprintf(why, why_cap, "parameter '%s' must be a bool, a number or a string", key);
    return -2;
  }
  if (!e->key || (cJSON_IsString(v) && !p->string_param)) return -1;
  (*list)[(*n)++] = e;
  return 0;
}

// Writes the elements of a (possibly nested) JSON array as dt into dst,
// counting them in *k (dst NULL: counts only).
static int put_data(const cJSON *v, dtype dt, uint8_t *dst, size_t cap, size_t *k, const char *name, char *why,
                    size_t why_cap) {
  if (cJSON_IsArray(v)) {
    for (const cJSON *e = v->child; e; e = e->next)
      if (put_data(e, dt, dst, cap, k, name, why, why_cap)) return -1;
    return 0;
  }
  size_t i = (*k)++;
  if (!dst) return 0;
  if (i >= cap) return 0;  // too many: counted, reported by the caller
  if (dt == DT_BOOL) {
    if (!cJSON_IsBool(v)) {
      snprintf(why, why_cap, "input '%s': element %zu of data is not a bool", name, i);
      return -1;
    }
    dst[i] = cJSON_IsTrue(v) ? 1 : 0;
    return 0;
  }
  if (!cJSON_IsNumber(v)) {
    snprintf(why, why_cap, "input '%s': element %zu of data is not a number", name, i);
    return -1;
  }
  double x = v->valuedouble;
  // converting a value the type cannot hold is undefined in C (found by
  // fuzz_rest: -6 as UINT8), and a fraction for an integer type would be cut
  double lo, hi;  // the half-open range [lo, hi) the type holds
  int integral = 1;
  switch (dt) {
    case DT_INT64: lo = -9223372036854775808.0, hi = 9223372036854775808.0; break;
    case DT_INT32: lo = INT32_MIN, hi = INT32_MAX + 1.0; break;
    case DT_INT16: lo = INT16_MIN, hi = INT16_MAX + 1.0; break;
    case DT_INT8: lo = INT8_MIN, hi = INT8_MAX + 1.0; break;
    case DT_UINT64: lo = 0, hi = 18446744073709551616.0; break;
    case DT_UINT32: lo = 0, hi = UINT32_MAX + 1.0; break;
    case DT_UINT16: lo = 0, hi = UINT16_MAX + 1.0; break;
    case DT_UINT8: lo = 0, hi = UINT8_MAX + 1.0; break;
    case DT_FP32: lo = -(double)FLT_MAX, hi = nextafter((double)FLT_MAX, INFINITY), integral = 0; break;
    default: lo = -INFINITY, hi = INFINITY, integral = 0; break;
  }
  if (!(x >= lo && x < hi) || (integral && floor(x) != x)) {
    snprintf(why, why_cap, "input '%s': element %zu of data (%.17g) is out of range for %s", name, i, x,
             dtype_wire_name(dt));
    return -1;
  }
  switch (dt) {
    case DT_FP32: ((float *)dst)[i] = (float)x; break;
    case DT_FP64: ((double *)dst)[i] = x; break;
    // cJSON keeps numbers as doubles: integers beyond 2^53 lose precision (send those as binary_data)
    case DT_INT64: ((int64_t *)dst)[i] = (int64_t)x; break;
    case DT_INT32: ((int32_t *)dst)[i] = (int32_t)x; break;
    case DT_INT16: ((int16_t *)dst)[i] = (int16_t)x; break;
    case DT_INT8: ((int8_t *)dst)[i] = (int8_t)x; break;
    case DT_UINT64: ((uint64_t *)dst)[i] = (uint64_t)x; break;
    case DT_UINT32: ((uint32_t *)dst)[i] = (uint32_t)x; break;
    case DT_UINT16: ((uint16_t *)dst)[i] = (uint16_t)x; break;
    case DT_UINT8: dst[i] = (uint8_t)x; break;
    default: break;
  }
  return 0;
}

// What a \u0000 escape becomes before cJSON parses (it would end the C
// string there): a byte valid UTF-8 never holds, and the request's JSON
// was checked to be UTF-8, so every such byte in the tree came from one.
#define NUL_MARK '\xff'

// Writes the strings of a (possibly nested) JSON array in the BYTES wire
// layout (strwire.h) at dst + *off, counting them in *k and their layout's
// bytes in *off (dst NULL: counts only). -1 with why when an element is no
// string.
static int put_strings(const cJSON *v, uint8_t *dst, size_t *off, size_t *k, const char *name, char *why,
                       size_t why_cap) {
  if (cJSON_IsArray(v)) {
    for (const cJSON *e = v->child; e; e = e->next)
      if (put_strings(e, dst, off, k, name, why, why_cap)) return -1;
    return 0;
  }
  size_t i = (*k)++;
  if (!cJSON_IsString(v)) {
    snprintf(why, why_cap, "input '%s': element %zu of data is not a string (BYTES data is an array of strings)",
             name, i);
    return -1;
  }
  size_t l = strlen(v->valuestring);  // under the body limit, far below 4 GiB
  if (dst) {
    strwire_put_len(dst + *off, (uint32_t)l);
    memcpy(dst + *off + 4, v->valuestring, l);
    for (uint8_t *c = dst + *off + 4; (c = memchr(c, (uint8_t)NUL_MARK, l - (size_t)(c - (dst + *off + 4)))); c++)
      *c = 0;  // a \u0000 of the request (nul_escapes_marked)
  }
  *off += 4 + l;
  return 0;
}

// --- NUL in BYTES data sent as JSON

// A NUL-terminated copy of s[0, n) with each \u0000 escape replaced by
// NUL_MARK (escapes read as srv_http_json_nul reads them); NULL when out of memory.
static char *nul_escapes_marked(const char *s, size_t n) {
  char *c = malloc(n + 1);
  if (!c) return NULL;
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '\\' && i + 1 < n) {
      if (s[i + 1] == 'u' && n - i >= 6 && memcmp(s + i + 2, "0000", 4) == 0) {
        c[o++] = NUL_MARK;
        i += 5;
      } else {
        c[o++] = s[i++];
        c[o++] = s[i];
      }
      continue;
    }
    c[o++] = s[i];
  }
  c[o] = '\0';
  return c;
}

static int has_mark(const char *s) { return s && strchr(s, NUL_MARK); }

// Whether a NUL_MARK lies in a key of v or its siblings, in their values
// (strings allowed to hold one when data_ok), or below them.
static int marks_in(const cJSON *v, int data_ok) {
  for (; v; v = v->next) {
    if (has_mark(v->string) || (cJSON_IsString(v) && !data_ok && has_mark(v->valuestring))) return 1;
    if (v->child && marks_in(v->child, data_ok)) return 1;
  }
  return 0;
}

// Whether a NUL_MARK lies anywhere in the request but in the strings of
// an input's data (root.inputs[i].data).
static int nul_outside_data(const cJSON *root) {
  if (!root || has_mark(root->valuestring)) return root != NULL;
  for (const cJSON *v = root->child; v; v = v->next) {
    if (!(cJSON_IsArray(v) && v->string && strcmp(v->string, "inputs") == 0)) {
      if (has_mark(v->string) || (cJSON_IsString(v) && has_mark(v->valuestring)) || (v->child && marks_in(v->child, 0)))
        return 1;
      continue;
    }
    if (has_mark(v->string)) return 1;
    for (const cJSON *in = v->child; in; in = in->next) {
      if (cJSON_IsString(in) && has_mark(in->valuestring)) return 1;
      for (const cJSON *f = in->child; f; f = f->next) {
        int is_data = f->string && strcmp(f->string, "data") == 0;
        if (has_mark(f->string) || (cJSON_IsString(f) && !is_data && has_mark(f->valuestring))) return 1;
        if (f->child && marks_in(f->child, is_data)) return 1;
      }
    }
  }
  return 0;
}

#define BAD(...) (snprintf(why, why_cap, __VA_ARGS__), -2)

// Fills msg from the JSON header and the binary part; -2 with why for a bad
// request, -1 when out of memory. The job gets the output options.
static int build_infer(arena *a, job *j, const cJSON *root, const uint8_t *bin, size_t bin_len,
                       Inference__ModelInferRequest *msg, char *why, size_t why_cap) {
  if (!cJSON_IsObject(root)) return BAD("the request body must be a JSON object");
  const cJSON *id = cJSON_GetObjectItemCaseSensitive(root, "id");
  if (id && !cJSON_IsString(id)) return BAD("'id' must be a string");
  if (id) msg->id = a_strdup(a, id->valuestring);

  const cJSON *params = cJSON_GetObjectItemCaseSensitive(root, "parameters");
  if (params && !cJSON_IsObject(params)) return BAD("'parameters' must be an object");
  size_t np = (size_t)cJSON_GetArraySize(params);
  msg->parameters = a_alloc(a, (np + 1) * sizeof *msg->parameters);
  for (const cJSON *p = params ? params->child : NULL; p; p = p->next) {
    if (strcmp(p->string, "binary_data_output") == 0) {
      if (!cJSON_IsBool(p)) return BAD("parameter 'binary_data_output' must be a bool");
      j->binary_default = cJSON_IsTrue(p);
      continue;
    }
    int rc = add_param(a, &inference__model_infer_request__parameters_entry__descriptor,
                       (param_entry ***)&msg->parameters, &msg->n_parameters, np, p->string, p, why, why_cap);
    if (rc) return rc;
  }

  const cJSON *inputs = cJSON_GetObjectItemCaseSensitive(root, "inputs");
  if (!cJSON_IsArray(inputs) || cJSON_GetArraySize(inputs) == 0) return BAD("'inputs' must be a non-empty array");
  size_t n_in = (size_t)cJSON_GetArraySize(inputs);
  if (n_in > MAX_TENSORS) return BAD("at most %d inputs", MAX_TENSORS);
  msg->inputs = a_alloc(a, n_in * sizeof *msg->inputs);
  msg->raw_input_contents = a_alloc(a, n_in * sizeof *msg->raw_input_contents);
  if (!msg->inputs || !msg->raw_input_contents) return -1;
  size_t bin_off = 0;
  for (const cJSON *in = inputs->child; in; in = in->next) {
    if (!cJSON_IsObject(in)) return BAD("each input must be an object");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(in, "name");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(in, "shape");
    const cJSON *datatype = cJSON_GetObjectItemCaseSensitive(in, "datatype");
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(in, "data");
    const cJSON *ip = cJSON_GetObjectItemCaseSensitive(in, "parameters");
    if (!cJSON_IsString(name)) return BAD("an input has no 'name' string");
    const char *nm = name->valuestring;
    if (!cJSON_IsString(datatype)) return BAD("input '%s': 'datatype' must be a string", nm);
    if (!cJSON_IsArray(shape)) return BAD("input '%s': 'shape' must be an array of integers", nm);
    if (ip && !cJSON_IsObject(ip)) return BAD("input '%s': 'parameters' must be an object", nm);
    Inference__ModelInferRequest__InferInputTensor *t = a_alloc(a, sizeof *t);
    if (!t) return -1;
    inference__model_infer_request__infer_input_tensor__init(t);
    t->name = a_strdup(a, nm);
    t->datatype = a_strdup(a, datatype->valuestring);
    size_t nd = (size_t)cJSON_GetArraySize(shape);
    t->shape = a_alloc(a, (nd + 1) * sizeof *t->shape);
    if (!t->name || !t->datatype || !t->shape) return -1;
    int64_t numel = 1;
    for (const cJSON *d = shape->child; d; d = d->next) {
      if (!cJSON_IsNumber(d) || d->valuedouble != floor(d->valuedouble) || d->valuedouble < 0 ||
          d->valuedouble > 9.007199254740992e15)
        return BAD("input '%s': 'shape' must be an array of non-negative integers", nm);
      t->shape[t->n_shape++] = (int64_t)d->valuedouble;
      if (numel > 0 && (int64_t)d->valuedouble > INT64_MAX / numel) return BAD("input '%s': shape is too large", nm);
      numel *= (int64_t)d->valuedouble;
    }
    // binary_data_size: the tensor's bytes follow the JSON; shared_memory_*: pass through
    int64_t bin_size = -1, shm = 0;
    size_t npar = (size_t)cJSON_GetArraySize(ip);
    t->parameters = a_alloc(a, (npar + 1) * sizeof *t->parameters);
    if (!t->parameters) return -1;
    for (const cJSON *p = ip ? ip->child : NULL; p; p = p->next) {
      if (strcmp(p->string, "binary_data_size") == 0) {
        if (!cJSON_IsNumber(p) || p->valuedouble < 0 || p->valuedouble != floor(p->valuedouble))
          return BAD("input '%s': 'binary_data_size' must be a non-negative integer", nm);
        bin_size = (int64_t)p->valuedouble;
        continue;
      }
      if (strncmp(p->string, "shared_memory_", 14) == 0) shm = 1;
      int rc = add_param(a, &inference__model_infer_request__infer_input_tensor__parameters_entry__descriptor,
                         (param_entry ***)&t->parameters, &t->n_parameters, npar, p->string, p, why, why_cap);
      if (rc) return rc;
    }
    msg->inputs[msg->n_inputs++] = t;
    if (shm) {
      if (data || bin_size >= 0) return BAD("input '%s': data given with shared_memory_region", nm);
      continue;
    }
    ProtobufCBinaryData *rd = &msg->raw_input_contents[msg->n_raw_input_contents++];
    if (bin_size >= 0) {
      if (data) return BAD("input '%s': both 'data' and 'binary_data_size' given", nm);
      if ((uint64_t)bin_size > bin_len - bin_off)
        return BAD("input '%s': binary_data_size %" PRId64 " runs past the %zu bytes of binary data after the JSON",
                   nm, bin_size, bin_len - bin_off);
      rd->data = (uint8_t *)bin + bin_off;  // packed (copied) before bin goes away
      rd->len = (size_t)bin_size;
      bin_off += (size_t)bin_size;
      continue;
    }
    if (!data) return BAD("input '%s' has no 'data' (nor binary_data_size or shared memory)", nm);
    dtype dt = dtype_from_wire(datatype->valuestring);
    size_t es = dtype_size(dt);
    if (dt == DT_INVALID) return BAD("input '%s': unknown datatype '%s'", nm, datatype->valuestring);
    if (dt == DT_STRING) {
      size_t count = 0, bytes = 0;
      if (put_strings(data, NULL, &bytes, &count, nm, why, why_cap)) return -2;
      if ((int64_t)count != numel)
        return BAD("input '%s': 'data' has %zu elements, shape needs %" PRId64, nm, count, numel);
      uint8_t *dst = a_alloc(a, bytes);
      if (!dst) return -1;
      size_t k = 0, off = 0;
      if (put_strings(data, dst, &off, &k, nm, why, why_cap)) return -2;
      rd->data = dst;
      rd->len = bytes;
      continue;
    }
    if (dt == DT_FP16 || dt == DT_BF16 || !es)
      return BAD("input '%s': %s data is not accepted as JSON; send it with binary_data_size", nm,
                 datatype->valuestring);
    size_t count = 0;
    if (put_data(data, dt, NULL, 0, &count, nm, why, why_cap)) return -2;
    if ((int64_t)count != numel)
      return BAD("input '%s': 'data' has %zu elements, shape needs %" PRId64, nm, count, numel);
    uint8_t *dst = a_alloc(a, count * es);
    if (!dst) return -1;
    size_t k = 0;
    if (put_data(data, dt, dst, count, &k, nm, why, why_cap)) return -2;
    rd->data = dst;
    rd->len = count * es;
  }
  if (bin_off != bin_len)
    return BAD("%zu bytes of binary data after the JSON, the inputs' binary_data_size add up to %zu", bin_len, bin_off);
  // Triton: raw contents for every input not in shared memory, or none at all
  if (msg->n_raw_input_contents == 0) msg->raw_input_contents = NULL;

  const cJSON *outputs = cJSON_GetObjectItemCaseSensitive(root, "outputs");
  if (outputs && !cJSON_IsArray(outputs)) return BAD("'outputs' must be an array");
  size_t n_out = (size_t)cJSON_GetArraySize(outputs);
  if (n_out > MAX_TENSORS) return BAD("at most %d outputs", MAX_TENSORS);
  msg->outputs = a_alloc(a, (n_out + 1) * sizeof *msg->outputs);
  j->out_opts = calloc(n_out + 1, sizeof *j->out_opts);
  if (!msg->outputs || !j->out_opts) return -1;
  for (const cJSON *o = outputs ? outputs->child : NULL; o; o = o->next) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(o, "parameters");
    if (!cJSON_IsObject(o) || !cJSON_IsString(name)) return BAD("each output must be an object with a 'name' string");
    if (op && !cJSON_IsObject(op)) return BAD("output '%s': 'parameters' must be an object", name->valuestring);
    if (strlen(name->valuestring) >= sizeof j->out_opts[0].name) return BAD("an output name is too long");
    Inference__ModelInferRequest__InferRequestedOutputTensor *t = a_alloc(a, sizeof *t);
    size_t npar = (size_t)cJSON_GetArraySize(op);
    if (!t) return -1;
    inference__model_infer_request__infer_requested_output_tensor__init(t);
    t->name = a_strdup(a, name->valuestring);
    t->parameters = a_alloc(a, (npar + 1) * sizeof *t->parameters);
    if (!t->name || !t->parameters) return -1;
    out_opt *oo = &j->out_opts[j->n_out_opts++];
    snprintf(oo->name, sizeof oo->name, "%s", name->valuestring);
    oo->binary = j->binary_default;
    for (const cJSON *p = op ? op->child : NULL; p; p = p->next) {
      if (strcmp(p->string, "binary_data") == 0) {
        if (!cJSON_IsBool(p)) return BAD("output '%s': 'binary_data' must be a bool", name->valuestring);
        oo->binary = cJSON_IsTrue(p);
        continue;
      }
      int rc = add_param(a, &inference__model_infer_request__infer_requested_output_tensor__parameters_entry__descriptor,
                         (param_entry ***)&t->parameters, &t->n_parameters, npar, p->string, p, why, why_cap);
      if (rc) return rc;
    }
    msg->outputs[msg->n_outputs++] = t;
  }
  return a->oom ? -1 : 0;
}

// Triton's HTTP compression: a Content-Encoding body is inflated (its
// inflated size under the endpoint's body limit for this request); NULL
// *body_out with 0 returned means the body is used as it came.
static int decode_body(const srv_http_request *req, srv_http_response *resp, uint8_t **body_out,
                       size_t *len_out) {
  *body_out = NULL;
  *len_out = 0;
  const char *ce = srv_http_request_header(req, "Content-Encoding");
  srv_httpz_enc enc = srv_httpz_content_encoding(ce);
  if (enc == SRV_HTTPZ_IDENTITY) return 0;
  if (enc == SRV_HTTPZ_UNKNOWN) {
    // as Triton: 415, naming the codings we read in Accept-Encoding
    char msg[200];
    snprintf(msg, sizeof msg, "unsupported Content-Encoding '%.100s': send gzip, deflate or identity", ce);
    srv_rest__set_error(resp, 415, msg);
    snprintf(resp->headers, sizeof resp->headers, "Accept-Encoding: gzip, deflate\r\n");
    return -1;
  }
  if (!req->body_len) {
    srv_rest__set_error(resp, 400, "the inference request has no JSON body");
    return -1;
  }
  err e = {0};
  size_t max = req->body_max ? req->body_max : SRV_HTTP_MAX_BODY;
  if (srv_httpz_inflate(enc, req->body, req->body_len, max, body_out, len_out, &e) != 0) {
    int status = e.code == ERR_INVALID_ARGUMENT ? 400 : e.code == ERR_RESOURCE_EXHAUSTED ? 413 : 500;
    srv_rest__set_error(resp, status, e.msg);
    return -1;
  }
  return 0;
}

void srv_rest__route_infer(srv_rest *r, const srv_http_request *req, srv_http_response *resp, const char *model,
                           const char *version) {
  uint8_t *decoded = NULL;
  size_t decoded_len = 0;
  if (decode_body(req, resp, &decoded, &decoded_len) != 0) return;
  const char *body = decoded ? (const char *)decoded : req->body;
  size_t body_len = decoded ? decoded_len : req->body_len;
  // Triton's binary tensor extension: the JSON is the first
  // Inference-Header-Content-Length bytes, the tensors' bytes follow (of
  // the inflated body when the body came compressed, as in Triton)
  size_t json_len = body_len;
  const char *hl = srv_http_request_header(req, "Inference-Header-Content-Length");
  if (hl) {
    char *end = NULL;
    unsigned long long v = strtoull(hl, &end, 10);
    if (!*hl || *end || v > body_len) {
      free(decoded);
      return srv_rest__set_error(resp, 400,
                                 "Inference-Header-Content-Length must be an integer no larger than the body");
    }
    json_len = (size_t)v;
  }
  if (!body || json_len == 0) {
    free(decoded);
    return srv_rest__set_error(resp, 400, "the inference request has no JSON body");
  }
  // admitted against --rest-json-max-memory before cJSON builds the tree,
  // and first: a body refused for its tree is scanned only as far as the
  // budget reaches, and no other pass over it runs on the loop thread
  srv_json js;
  err pe = {0};
  if (srv_jsonmem_admit(r->s->jsonmem, body, json_len, &js, &pe) != 0) {
    free(decoded);
    return srv_rest__json_refused(resp, &pe);
  }
  // cJSON takes strings that are not UTF-8, and an error may quote one back
  // ("unknown datatype '...'"): the answer would not be JSON (found by fuzz_rest)
  if (!utf8_valid(body, json_len)) {
    srv_json_free(&js);
    free(decoded);
    return srv_rest__set_error(resp, 400, "the inference request's JSON is not valid UTF-8 (RFC 8259)");
  }
  // names, datatypes, ids and parameters would be read cut at a NUL (the
  // tensors' bytes after json_len may hold any byte); a BYTES input's data
  // strings may hold one (Triton's simple_http_string_infer_client sends
  // "he\u0000llo"): parsed with each \u0000 as a byte that valid UTF-8
  // never holds, which put_strings turns back into NUL and every other
  // string is refused for
  char *unnul = NULL;
  if (memchr(body, 0, json_len)) {
    srv_json_free(&js);
    free(decoded);
    return srv_rest__set_error(resp, 400, SRV_HTTP_JSON_NUL_MSG);
  }
  if (srv_http_json_nul(body, json_len) && !(unnul = nul_escapes_marked(body, json_len))) {
    srv_json_free(&js);
    free(decoded);
    return srv_rest__set_error(resp, 500, "out of memory");
  }
  if (srv_json_parse_admitted(&js, unnul ? unnul : body, unnul ? strlen(unnul) : json_len, &pe) != 0) {
    free(unnul);
    free(decoded);
    return srv_rest__json_refused(resp, &pe);
  }
  if (unnul && nul_outside_data(js.root)) {
    free(unnul);
    srv_json_free(&js);
    free(decoded);
    return srv_rest__set_error(resp, 400, SRV_HTTP_JSON_NUL_MSG);
  }
  free(unnul);
  cJSON *root = js.root;
  job *j = calloc(1, sizeof *j);
  arena a = {0};
  Inference__ModelInferRequest msg = INFERENCE__MODEL_INFER_REQUEST__INIT;
  msg.model_name = (char *)model;
  msg.model_version = (char *)version;
  char why[512] = "";
  int rc = j ? build_infer(&a, j, root, (const uint8_t *)body + json_len, body_len - json_len, &msg, why, sizeof why)
             : -1;
  uint8_t *buf = NULL;
  size_t len = 0;
  if (rc == 0) {
    len = inference__model_infer_request__get_packed_size(&msg);
    buf = malloc(len ? len : 1);
    if (buf) inference__model_infer_request__pack(&msg, buf);
    else rc = -1;
  }
  a_free(&a);
  srv_json_free(&js);
  free(decoded);  // the packed request holds its own copy of the tensors
  if (rc) {
    if (j) srv_rest__job_free(j);
    free(buf);
    return srv_rest__set_error(resp, rc == -2 ? 400 : 500, rc == -2 ? why : "out of memory");
  }
  srv_http_pending *p = srv_http_defer(req);
  if (!p) {
    srv_rest__job_free(j);
    free(buf);
    return srv_rest__set_error(resp, 500, "out of memory");
  }
  j->rest = r;
  j->pending = p;
  j->k = K_INFER;
  j->answer = srv_rest__infer_answer;
  j->resp.status = 200;
  j->resp_enc = srv_httpz_accept(srv_http_request_header(req, "Accept-Encoding"));
  // the call keeps the packed message until answered: the request points into it (no copy R5)
  srv_rest__run_local_owned(r, j, SVC "ModelInfer", buf, len);
}
