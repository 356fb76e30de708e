// rest.c: the KServe v2 HTTP/REST API. Each route builds the protobuf
// request the gRPC client would send, runs the gRPC method's own handler on
// it as a local call, and turns the protobuf answer into Triton's JSON. So
// REST inference takes the gRPC path whole: one validation, one scheduler,
// one set of statistics.
//
// Every answer arrives through rest_job.c's done_cb, maybe inside the
// handler (metadata, errors), maybe later on an engine instance thread
// (inference). The job's answer function writes the HTTP answer there (the
// JSON of a large output is built on the instance thread, not the loop's)
// and done_cb queues it; the loop thread gives the queued answers from a
// uv_async (srv_rest__deliver).
//
// Here: the routes, the answers of every route but infer (protobuf to JSON)
// and the shared memory routes. The infer route's JSON and binary tensors,
// both ways, are in rest_infer.c; the local call and the delivery in
// rest_job.c.
#include "server/http/rest.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc_service.pb-c.h"
#include "kernels/base/utf8.h"
#include "server/core/server.h"
#include "server/http/rest_internal.h"

// --- answers

static void set_json(srv_http_response *resp, cJSON *j) {
  char *txt = j ? cJSON_PrintUnformatted(j) : NULL;
  cJSON_Delete(j);
  if (!txt) return srv_rest__set_error(resp, 500, "out of memory writing the JSON answer");
  srv_rest__set_text(resp, 200, "application/json", txt, strlen(txt));
}

// --- protobuf message -> JSON (protobuf's JSON mapping with the proto field
// names, as Triton prints them; int64_str: 64-bit integers as strings, as
// Triton's /config does; every scalar printed, defaults included)

static cJSON *pb_json(const ProtobufCMessage *m, int int64_str);

static cJSON *pb_int64(int64_t v, int as_str) {
  if (!as_str) return cJSON_CreateNumber((double)v);
  char b[32];
  snprintf(b, sizeof b, "%" PRId64, v);
  return cJSON_CreateString(b);
}

static cJSON *pb_uint64(uint64_t v, int as_str) {
  if (!as_str) return cJSON_CreateNumber((double)v);
  char b[32];
  snprintf(b, sizeof b, "%" PRIu64, v);
  return cJSON_CreateString(b);
}

// One value of field f at p.
static cJSON *pb_value(const ProtobufCFieldDescriptor *f, const void *p, int int64_str) {
  switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32: return cJSON_CreateNumber(*(const int32_t *)p);
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32: return cJSON_CreateNumber(*(const uint32_t *)p);
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64: return pb_int64(*(const int64_t *)p, int64_str);
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: return pb_uint64(*(const uint64_t *)p, int64_str);
    case PROTOBUF_C_TYPE_FLOAT: return cJSON_CreateNumber(*(const float *)p);
    case PROTOBUF_C_TYPE_DOUBLE: return cJSON_CreateNumber(*(const double *)p);
    case PROTOBUF_C_TYPE_BOOL: return cJSON_CreateBool(*(const protobuf_c_boolean *)p);
    case PROTOBUF_C_TYPE_ENUM: {
      const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(f->descriptor, *(const int *)p);
      return ev ? cJSON_CreateString(ev->name) : cJSON_CreateNumber(*(const int *)p);
    }
    case PROTOBUF_C_TYPE_STRING: {
      const char *s = *(char *const *)p;
      return cJSON_CreateString(s ? s : "");
    }
    case PROTOBUF_C_TYPE_BYTES: return cJSON_CreateString("");  // none of the answers routed here carry bytes
    case PROTOBUF_C_TYPE_MESSAGE: {
      const ProtobufCMessage *sub = *(ProtobufCMessage *const *)p;
      return sub ? pb_json(sub, int64_str) : cJSON_CreateObject();
    }
  }
  return cJSON_CreateNull();
}

static size_t pb_type_size(ProtobufCType t) {
  switch (t) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: return 8;
    case PROTOBUF_C_TYPE_DOUBLE: return sizeof(double);
    case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_MESSAGE: return sizeof(void *);
    case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
    default: return 4;
  }
}

// A map<k, v> field is a repeated message of {key, value} entries.
static int is_map_entry(const ProtobufCFieldDescriptor *f) {
  if (f->type != PROTOBUF_C_TYPE_MESSAGE) return 0;
  const ProtobufCMessageDescriptor *d = f->descriptor;
  return d->n_fields == 2 && strcmp(d->fields[0].name, "key") == 0 && strcmp(d->fields[1].name, "value") == 0 &&
         strlen(d->name) > 5 && strcmp(d->name + strlen(d->name) - 5, "Entry") == 0;
}

static cJSON *pb_json(const ProtobufCMessage *m, int int64_str) {
  const ProtobufCMessageDescriptor *d = m->descriptor;
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    const char *base = (const char *)m;
    cJSON *v = NULL;
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
      size_t n = *(const size_t *)(base + f->quantifier_offset);
      const char *arr = *(char *const *)(base + f->offset);
      if (is_map_entry(f)) {
        v = cJSON_CreateObject();
        for (size_t k = 0; v && k < n; k++) {
          const ProtobufCMessage *e = ((ProtobufCMessage *const *)arr)[k];
          const ProtobufCFieldDescriptor *kf = &e->descriptor->fields[0], *vf = &e->descriptor->fields[1];
          const char *key = *(char *const *)((const char *)e + kf->offset);
          cJSON_AddItemToObject(v, key ? key : "", pb_value(vf, (const char *)e + vf->offset, int64_str));
        }
      } else {
        v = cJSON_CreateArray();
        size_t es = pb_type_size(f->type);
        for (size_t k = 0; v && k < n; k++) cJSON_AddItemToArray(v, pb_value(f, arr + k * es, int64_str));
      }
    } else if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
      if (*(const uint32_t *)(base + f->quantifier_offset) != f->id) continue;
      v = pb_value(f, base + f->offset, int64_str);
    } else {
      if (f->type == PROTOBUF_C_TYPE_MESSAGE && !*(ProtobufCMessage *const *)(base + f->offset)) continue;
      v = pb_value(f, base + f->offset, int64_str);
    }
    if (!v) {
      cJSON_Delete(o);
      return NULL;
    }
    cJSON_AddItemToObject(o, f->name, v);
  }
  return o;
}

// --- the other answers

static void meta_answer(job *j, const uint8_t *pb, size_t len) {
  const ProtobufCMessageDescriptor *d = NULL;
  switch (j->k) {
    case K_SERVER_META: d = &inference__server_metadata_response__descriptor; break;
    case K_MODEL_META: d = &inference__model_metadata_response__descriptor; break;
    case K_MODEL_READY: d = &inference__model_ready_response__descriptor; break;
    case K_CONFIG: d = &inference__model_config_response__descriptor; break;
    case K_STATS: d = &inference__model_statistics_response__descriptor; break;
    case K_INDEX: d = &inference__repository_index_response__descriptor; break;
    case K_SHM_STATUS: d = &inference__system_shared_memory_status_response__descriptor; break;
    case K_CUDA_SHM_STATUS: d = &inference__cuda_shared_memory_status_response__descriptor; break;
    case K_EMPTY: return srv_rest__set_text(&j->resp, 200, "application/json", NULL, 0);
    case K_CONTROL: {
      char *b = strdup("{}");
      if (!b) return srv_rest__set_error(&j->resp, 500, "out of memory");
      return srv_rest__set_text(&j->resp, 200, "application/json", b, 2);
    }
    case K_INFER: return;
  }
  ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, len, pb);
  if (!m) return srv_rest__set_error(&j->resp, 500, "the answer does not parse");
  if (j->k == K_MODEL_READY) {
    int ready = ((Inference__ModelReadyResponse *)m)->ready;
    protobuf_c_message_free_unpacked(m, NULL);
    if (ready) return srv_rest__set_text(&j->resp, 200, "text/plain", NULL, 0);
    return srv_rest__set_error(&j->resp, 503, "the model is not ready");
  }
  cJSON *out = NULL;
  if (j->k == K_CONFIG) {
    const Inference__ModelConfigResponse *c = (const Inference__ModelConfigResponse *)m;
    out = c->config ? pb_json(&c->config->base, 1) : cJSON_CreateObject();
  } else if (j->k == K_SHM_STATUS) {
    // Triton answers a list of {name, key, offset, byte_size}
    const Inference__SystemSharedMemoryStatusResponse *x = (const Inference__SystemSharedMemoryStatusResponse *)m;
    out = cJSON_CreateArray();
    for (size_t i = 0; out && i < x->n_regions; i++)
      if (x->regions[i]->value) cJSON_AddItemToArray(out, pb_json(&x->regions[i]->value->base, 0));
  } else if (j->k == K_CUDA_SHM_STATUS) {
    // Triton answers a list of {name, device_id, byte_size}
    const Inference__CudaSharedMemoryStatusResponse *x = (const Inference__CudaSharedMemoryStatusResponse *)m;
    out = cJSON_CreateArray();
    for (size_t i = 0; out && i < x->n_regions; i++)
      if (x->regions[i]->value) cJSON_AddItemToArray(out, pb_json(&x->regions[i]->value->base, 0));
  } else if (j->k == K_INDEX) {
    // Triton answers the bare list
    const Inference__RepositoryIndexResponse *x = (const Inference__RepositoryIndexResponse *)m;
    out = cJSON_CreateArray();
    for (size_t i = 0; out && i < x->n_models; i++) {
      cJSON *e = pb_json(&x->models[i]->base, 0);
      if (e && !x->models[i]->version[0]) cJSON_DeleteItemFromObject(e, "version");
      if (e && !x->models[i]->reason[0]) cJSON_DeleteItemFromObject(e, "reason");
      // a model of the repository never loaded: its name alone, as Triton sends it
      if (e && !x->models[i]->state[0]) cJSON_DeleteItemFromObject(e, "state");
      cJSON_AddItemToArray(out, e);
    }
  } else {
    out = pb_json(m, 0);
  }
  protobuf_c_message_free_unpacked(m, NULL);
  set_json(&j->resp, out);
}

static job *job_new(srv_rest *r, const srv_http_request *req, srv_http_response *resp, kind k) {
  job *j = calloc(1, sizeof *j);
  srv_http_pending *p = j ? srv_http_defer(req) : NULL;
  if (!p) {
    free(j);
    srv_rest__set_error(resp, 500, "out of memory");
    return NULL;
  }
  j->rest = r;
  j->pending = p;
  j->k = k;
  j->answer = meta_answer;
  j->resp.status = 200;
  return j;
}

// Packs msg and runs method on it for a new job of kind k.
static void call_pb(srv_rest *r, const srv_http_request *req, srv_http_response *resp, kind k, const char *method,
                    const ProtobufCMessage *msg) {
  size_t len = protobuf_c_message_get_packed_size(msg);
  uint8_t *buf = malloc(len ? len : 1);
  if (!buf) return srv_rest__set_error(resp, 500, "out of memory");
  protobuf_c_message_pack(msg, buf);
  job *j = job_new(r, req, resp, k);
  if (j) srv_rest__run_local(r, j, method, buf, len);
  free(buf);
}

// --- routing

// Splits path (after "/v2/") into at most `max` segments.
static size_t split(const char *p, const char **seg, size_t *len, size_t max) {
  size_t n = 0;
  while (*p && n < max + 1) {
    const char *e = strchr(p, '/');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    seg[n] = p;
    len[n] = l;
    n++;
    if (!e) break;
    p = e + 1;
  }
  return n;
}

static int seg_is(const char *s, size_t n, const char *word) { return strlen(word) == n && memcmp(s, word, n) == 0; }

// What the two shared memory route families differ in for status and
// unregister: the request types (each a message whose one field is `name`)
// and the methods they call.
typedef struct shm_family {
  const ProtobufCMessageDescriptor *status_d, *unregister_d;
  kind status_kind;
  const char *status_method, *unregister_method;
} shm_family;

static const shm_family SYS_SHM = {
    .status_d = &inference__system_shared_memory_status_request__descriptor,
    .unregister_d = &inference__system_shared_memory_unregister_request__descriptor,
    .status_kind = K_SHM_STATUS,
    .status_method = SVC "SystemSharedMemoryStatus",
    .unregister_method = SVC "SystemSharedMemoryUnregister",
};

static const shm_family CUDA_SHM = {
    .status_d = &inference__cuda_shared_memory_status_request__descriptor,
    .unregister_d = &inference__cuda_shared_memory_unregister_request__descriptor,
    .status_kind = K_CUDA_SHM_STATUS,
    .status_method = SVC "CudaSharedMemoryStatus",
    .unregister_method = SVC "CudaSharedMemoryUnregister",
};

#define SHM_NAME_CAP 256

// Runs method on a request of type d whose `name` is name (the Status and
// Unregister requests of both families; set through the descriptor since
// only their types differ).
static void call_named(srv_rest *r, const srv_http_request *req, srv_http_response *resp, kind k, const char *method,
                       const ProtobufCMessageDescriptor *d, char *name) {
  ProtobufCMessage *q = calloc(1, d->sizeof_message);
  if (!q) return srv_rest__set_error(resp, 500, "out of memory");
  protobuf_c_message_init(d, q);
  memcpy((uint8_t *)q + protobuf_c_message_descriptor_get_field_by_name(d, "name")->offset, &name, sizeof name);
  call_pb(r, req, resp, k, method, q);
  free(q);
}

// The part both families share: /v2/<family>/{status,unregister} and
// /v2/<family>/region/<name>/{status,unregister,register}. Answers status
// (GET), unregister (POST) and every path or method that fits neither;
// returns 1 for a register (POST .../region/<name>/register, the name
// decoded into name), which the caller answers.
static int shm_route(srv_rest *r, const srv_http_request *req, srv_http_response *resp, const char **seg,
                     const size_t *len, size_t n, int get, int post, const shm_family *f, char name[SHM_NAME_CAP]) {
  const char *op;
  size_t opl;
  if (n == 2) {
    op = seg[1], opl = len[1];
  } else if (n == 4 && seg_is(seg[1], len[1], "region")) {
    if (srv_http_decode_segment(seg[2], len[2], name, SHM_NAME_CAP) || !name[0])
      return srv_rest__set_error(resp, 400, "malformed region name in the path"), 0;
    op = seg[3], opl = len[3];
  } else {
    return srv_rest__set_error(resp, 404, "not found"), 0;
  }
  if (seg_is(op, opl, "status")) {
    if (!get) return srv_rest__set_error(resp, 405, "method not allowed"), 0;
    return call_named(r, req, resp, f->status_kind, f->status_method, f->status_d, name), 0;
  }
  if (!post) return srv_rest__set_error(resp, 405, "method not allowed (POST)"), 0;
  if (seg_is(op, opl, "unregister"))
    return call_named(r, req, resp, K_EMPTY, f->unregister_method, f->unregister_d, name), 0;
  if (!seg_is(op, opl, "register") || !name[0]) return srv_rest__set_error(resp, 404, "not found"), 0;
  return 1;
}

// shm_route, then what both families' register does before reading its
// fields: a NUL byte refused (a key "/secret\0junk" would open /secret) and
// the body parsed into *js (a body that is not JSON leaves js.root NULL, so
// the caller's own message answers it). Returns 1 when the caller goes on
// (it then frees *js), 0 when resp is answered.
static int shm_register_body(srv_rest *r, const srv_http_request *req, srv_http_response *resp, const char **seg,
                             const size_t *len, size_t n, int get, int post, const shm_family *f,
                             char name[SHM_NAME_CAP], srv_json *js) {
  if (!shm_route(r, req, resp, seg, len, n, get, post, f, name)) return 0;
  if (srv_http_json_nul(req->body, req->body_len)) return srv_rest__set_error(resp, 400, SRV_HTTP_JSON_NUL_MSG), 0;
  err pe = {0};
  if (req->body_len && srv_jsonmem_parse(r->s->jsonmem, req->body, req->body_len, js, &pe) != 0 &&
      pe.code != ERR_INVALID_ARGUMENT)
    return srv_rest__json_refused(resp, &pe), 0;
  return 1;
}

// A JSON number that is an integer in [0, 2^64): converting anything else to
// uint64_t is undefined (found by fuzz_rest: an offset of 4e110), and a
// fraction would be cut silently.
static int u64_number(const cJSON *v) {
  return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 18446744073709551616.0 &&
         floor(v->valuedouble) == v->valuedouble;
}

// Triton's system shared memory routes (/v2/systemsharedmemory/...): status
// of all or one region, register one (body {"key", "offset", "byte_size"}),
// unregister one or all; the gRPC methods decide (and refuse unless
// --allow-client-shm).
static void route_shm(srv_rest *r, const srv_http_request *req, srv_http_response *resp, const char **seg,
                      const size_t *len, size_t n, int get, int post) {
  char name[SHM_NAME_CAP] = "";
  srv_json js = {0};
  if (!shm_register_body(r, req, resp, seg, len, n, get, post, &SYS_SHM, name, &js)) return;
  cJSON *b = js.root;
  const cJSON *key = cJSON_GetObjectItemCaseSensitive(b, "key");
  const cJSON *off = cJSON_GetObjectItemCaseSensitive(b, "offset");
  const cJSON *size = cJSON_GetObjectItemCaseSensitive(b, "byte_size");
  int ok = cJSON_IsString(key) && (!off || u64_number(off)) && u64_number(size);
  if (!ok) {
    srv_json_free(&js);
    return srv_rest__set_error(
        resp, 400, "register needs a JSON body {\"key\": string, \"offset\": integer, \"byte_size\": integer}");
  }
  Inference__SystemSharedMemoryRegisterRequest q = INFERENCE__SYSTEM_SHARED_MEMORY_REGISTER_REQUEST__INIT;
  q.name = name;
  q.key = key->valuestring;
  q.offset = off ? (uint64_t)off->valuedouble : 0;
  q.byte_size = (uint64_t)size->valuedouble;
  call_pb(r, req, resp, K_EMPTY, SVC "SystemSharedMemoryRegister", &q.base);
  srv_json_free(&js);
}

// Standard base64 (RFC 4648, '=' padding optional) into out, which holds
// len / 4 * 3 + 3 bytes; -1 on a character outside the alphabet, padding
// before the end or a dangling single character. Line breaks and spaces are
// skipped: Triton's C++ client (libb64, as perf_analyzer --shared-memory
// cuda -i http sends it) breaks its base64 into lines of 72 characters and
// ends it with a newline, which Triton's decoder ignores too.
static int b64_decode(const char *in, size_t len, uint8_t *out, size_t *out_len) {
  uint32_t acc = 0;
  int bits = 0;
  size_t o = 0, digits = 0, pads = 0;
  for (size_t i = 0; i < len; i++) {
    char c = in[i];
    if (c == '\n' || c == '\r' || c == ' ' || c == '\t') continue;
    if (c == '=') {
      pads++;
      continue;
    }
    int v = c >= 'A' && c <= 'Z' ? c - 'A'
          : c >= 'a' && c <= 'z' ? c - 'a' + 26
          : c >= '0' && c <= '9' ? c - '0' + 52
          : c == '+'             ? 62
          : c == '/'             ? 63
                                 : -1;
    if (v < 0 || pads) return -1;  // a digit after padding
    acc = acc << 6 | (uint32_t)v;
    bits += 6;
    digits++;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (uint8_t)(acc >> bits);
    }
  }
  if (digits % 4 == 1 || pads > 2) return -1;
  *out_len = o;
  return 0;
}

// Triton's CUDA shared memory routes (/v2/cudasharedmemory/...): as above,
// register's body is {"raw_handle": {"b64": base64 of the 64-byte
// cudaIpcMemHandle_t}, "device_id", "byte_size"}.
static void route_cuda_shm(srv_rest *r, const srv_http_request *req, srv_http_response *resp, const char **seg,
                           const size_t *len, size_t n, int get, int post) {
  char name[SHM_NAME_CAP] = "";
  srv_json js = {0};
  if (!shm_register_body(r, req, resp, seg, len, n, get, post, &CUDA_SHM, name, &js)) return;
  cJSON *b = js.root;
  const cJSON *h = cJSON_GetObjectItemCaseSensitive(b, "raw_handle");
  const cJSON *b64 = cJSON_GetObjectItemCaseSensitive(h, "b64");
  const cJSON *dev = cJSON_GetObjectItemCaseSensitive(b, "device_id");
  const cJSON *size = cJSON_GetObjectItemCaseSensitive(b, "byte_size");
  // bounded before the casts below (a double past the integer's range converts to nothing defined)
  int ok = cJSON_IsString(b64) && cJSON_IsNumber(dev) && dev->valuedouble >= 0 && dev->valuedouble <= INT32_MAX &&
           u64_number(size);
  if (!ok) {
    srv_json_free(&js);
    return srv_rest__set_error(resp, 400,
                               "register needs a JSON body {\"raw_handle\": {\"b64\": string}, \"device_id\": integer, "
                               "\"byte_size\": integer}");
  }
  size_t blen = strlen(b64->valuestring);
  uint8_t *raw = malloc(blen / 4 * 3 + 3);
  size_t raw_len = 0;
  if (!raw) {
    srv_json_free(&js);
    return srv_rest__set_error(resp, 500, "out of memory");
  }
  if (b64_decode(b64->valuestring, blen, raw, &raw_len) != 0) {
    free(raw);
    srv_json_free(&js);
    return srv_rest__set_error(resp, 400, "raw_handle.b64 is not valid base64");
  }
  Inference__CudaSharedMemoryRegisterRequest q = INFERENCE__CUDA_SHARED_MEMORY_REGISTER_REQUEST__INIT;
  q.name = name;
  q.raw_handle.data = raw;
  q.raw_handle.len = raw_len;
  q.device_id = (int64_t)dev->valuedouble;
  q.byte_size = (uint64_t)size->valuedouble;
  call_pb(r, req, resp, K_EMPTY, SVC "CudaSharedMemoryRegister", &q.base);
  free(raw);
  srv_json_free(&js);
}

// POST /v2/repository/models/{m}/load|unload, Triton's body: {"parameters":
// {"config": "..."}} for a load, {"parameters": {"unload_dependents": true}}
// for an unload; the config override (JSON as Triton takes it, or
// config.pbtxt text; the load refuses any other parameter, e.g. "file:..."
// model contents, as gRPC does); an empty body loads as the repository has
// it. Run as the gRPC methods' local calls: the load runs on the model
// control thread and its answer comes back through the job, so the loop
// serves meanwhile (server/core/control.h).
static void route_control(srv_rest *r, const srv_http_request *req, srv_http_response *resp, const char *seg,
                          size_t seg_len, int load, int post) {
  if (!post) return srv_rest__set_error(resp, 405, "method not allowed: POST a load or unload");
  char model[256];
  // percent-decoded as every other route's names (tritonclient quotes them)
  if (srv_http_decode_segment(seg, seg_len, model, sizeof model) != 0 || !model[0])
    return srv_rest__set_error(resp, 400, "bad model name in the path: empty, too long, malformed percent-encoding "
                                          "or not valid UTF-8");
  if (srv_http_json_nul(req->body, req->body_len))  // the config text would be read cut at it
    return srv_rest__set_error(resp, 400, SRV_HTTP_JSON_NUL_MSG);
  srv_json js = {0};
  const cJSON *params = NULL;
  if (req->body && req->body_len) {
    err je = {0};
    if (srv_jsonmem_parse(r->s->jsonmem, req->body, req->body_len, &js, &je) != 0 && je.code != ERR_INVALID_ARGUMENT)
      return srv_rest__json_refused(resp, &je);
    const cJSON *body = js.root;
    params = body ? cJSON_GetObjectItemCaseSensitive(body, "parameters") : NULL;
    const cJSON *cfg = params ? cJSON_GetObjectItemCaseSensitive(params, "config") : NULL;
    if (!body || (params && !cJSON_IsObject(params)) || (cfg && !cJSON_IsString(cfg))) {
      srv_json_free(&js);
      return srv_rest__set_error(resp, 400,
                                 load ? "the load body must be JSON: {\"parameters\": {\"config\": \"<the config as JSON, "
                                        "or config.pbtxt text>\"}}"
                                      : "the unload body must be JSON: {\"parameters\": {\"unload_dependents\": true}}");
    }
  }
  if (load) {
    // Every parameter goes through, so the control code refuses what it
    // refuses for gRPC too: passing "config" alone answered 200 to a load
    // with Triton's "file:1/model.onnx" contents and ignored the files.
    Inference__RepositoryModelLoadRequest q = INFERENCE__REPOSITORY_MODEL_LOAD_REQUEST__INIT;
    size_t np = params ? (size_t)cJSON_GetArraySize(params) : 0;
    Inference__ModelRepositoryParameter *vs = np ? calloc(np, sizeof *vs) : NULL;
    Inference__RepositoryModelLoadRequest__ParametersEntry *es = np ? calloc(np, sizeof *es) : NULL;
    Inference__RepositoryModelLoadRequest__ParametersEntry **pes = np ? calloc(np, sizeof *pes) : NULL;
    if (np && (!vs || !es || !pes)) {
      free(vs), free(es), free(pes);
      srv_json_free(&js);
      return srv_rest__set_error(resp, 500, "out of memory");
    }
    size_t k = 0;
    for (const cJSON *p = params ? params->child : NULL; p && k < np; p = p->next, k++) {
      inference__model_repository_parameter__init(&vs[k]);
      inference__repository_model_load_request__parameters_entry__init(&es[k]);
      if (cJSON_IsString(p)) {
        vs[k].parameter_choice_case = INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_STRING_PARAM;
        vs[k].string_param = p->valuestring;
      } else if (cJSON_IsBool(p)) {
        vs[k].parameter_choice_case = INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM;
        vs[k].bool_param = cJSON_IsTrue(p);
      } else if (cJSON_IsNumber(p) && p->valuedouble >= -9e18 && p->valuedouble <= 9e18) {
        vs[k].parameter_choice_case = INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
        vs[k].int64_param = (int64_t)p->valuedouble;
      }  // else unset: the key alone still reaches the check
      es[k].key = p->string;
      es[k].value = &vs[k];
      pes[k] = &es[k];
    }
    q.model_name = model;
    q.n_parameters = k;
    q.parameters = pes;
    call_pb(r, req, resp, K_CONTROL, SVC "RepositoryModelLoad", &q.base);
    free(vs), free(es), free(pes);
  } else {
    Inference__RepositoryModelUnloadRequest q = INFERENCE__REPOSITORY_MODEL_UNLOAD_REQUEST__INIT;
    q.model_name = model;
    // Triton's one unload parameter: unload_dependents (the ensembles naming the model go too)
    const cJSON *dep = params ? cJSON_GetObjectItemCaseSensitive(params, "unload_dependents") : NULL;
    Inference__ModelRepositoryParameter v = INFERENCE__MODEL_REPOSITORY_PARAMETER__INIT;
    Inference__RepositoryModelUnloadRequest__ParametersEntry pe = INFERENCE__REPOSITORY_MODEL_UNLOAD_REQUEST__PARAMETERS_ENTRY__INIT;
    Inference__RepositoryModelUnloadRequest__ParametersEntry *pes[1] = {&pe};
    if (cJSON_IsBool(dep)) {
      v.parameter_choice_case = INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM;
      v.bool_param = cJSON_IsTrue(dep);
      pe.key = (char *)"unload_dependents";
      pe.value = &v;
      q.n_parameters = 1;
      q.parameters = pes;
    }
    call_pb(r, req, resp, K_CONTROL, SVC "RepositoryModelUnload", &q.base);
  }
  srv_json_free(&js);
}

int srv_rest_route(srv_rest *r, const srv_http_request *req, srv_http_response *resp) {
  const char *path = req->path;
  if (strcmp(path, "/v2/health/live") == 0 || strcmp(path, "/v2/health/ready") == 0) return 0;
  if (strncmp(path, "/v1/", 4) == 0) return srv_rest__route_openai(r, req, resp);
  if (strcmp(path, "/v2") != 0 && strncmp(path, "/v2/", 4) != 0) return 0;
  int get = strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0;
  int post = strcmp(req->method, "POST") == 0;
  if (strcmp(path, "/v2") == 0 || strcmp(path, "/v2/") == 0) {
    if (!get) return srv_rest__set_error(resp, 405, "method not allowed"), 1;
    Inference__ServerMetadataRequest q = INFERENCE__SERVER_METADATA_REQUEST__INIT;
    call_pb(r, req, resp, K_SERVER_META, SVC "ServerMetadata", &q.base);
    return 1;
  }
  const char *seg[8];
  size_t len[8];
  size_t n = split(path + 4, seg, len, 7);
  if (n > 7) return srv_rest__set_error(resp, 404, "not found"), 1;

  if (n == 2 && seg_is(seg[0], len[0], "repository") && seg_is(seg[1], len[1], "index")) {
    if (!post) return srv_rest__set_error(resp, 405, "method not allowed (POST)"), 1;
    Inference__RepositoryIndexRequest q = INFERENCE__REPOSITORY_INDEX_REQUEST__INIT;
    if (req->body_len) {
      srv_json js = {0};
      err pe = {0};
      if (srv_jsonmem_parse(r->s->jsonmem, req->body, req->body_len, &js, &pe) != 0 && pe.code != ERR_INVALID_ARGUMENT)
        return srv_rest__json_refused(resp, &pe), 1;
      if (!cJSON_IsObject(js.root)) {
        srv_json_free(&js);
        return srv_rest__set_error(resp, 400, "the request body is not a JSON object"), 1;
      }
      q.ready = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(js.root, "ready"));
      srv_json_free(&js);
    }
    call_pb(r, req, resp, K_INDEX, SVC "RepositoryIndex", &q.base);
    return 1;
  }
  if (n == 4 && seg_is(seg[0], len[0], "repository") && seg_is(seg[1], len[1], "models") &&
      (seg_is(seg[3], len[3], "load") || seg_is(seg[3], len[3], "unload"))) {
    route_control(r, req, resp, seg[2], len[2], seg_is(seg[3], len[3], "load"), post);
    return 1;
  }
  if (n >= 2 && seg_is(seg[0], len[0], "systemsharedmemory")) {
    route_shm(r, req, resp, seg, len, n, get, post);
    return 1;
  }
  if (n >= 2 && seg_is(seg[0], len[0], "cudasharedmemory")) {
    route_cuda_shm(r, req, resp, seg, len, n, get, post);
    return 1;
  }
  if (n == 2 && seg_is(seg[0], len[0], "models") && seg_is(seg[1], len[1], "stats")) {
    if (!get) return srv_rest__set_error(resp, 405, "method not allowed"), 1;
    Inference__ModelStatisticsRequest q = INFERENCE__MODEL_STATISTICS_REQUEST__INIT;
    call_pb(r, req, resp, K_STATS, SVC "ModelStatistics", &q.base);
    return 1;
  }
  if (n < 2 || !seg_is(seg[0], len[0], "models")) return srv_rest__set_error(resp, 404, "not found"), 1;
  // /v2/models/{m}[/versions/{v}][/ready|/config|/stats|/infer]
  char model[256], version[64] = "";
  if (srv_http_decode_segment(seg[1], len[1], model, sizeof model) || !model[0])
    return srv_rest__set_error(resp, 400, "malformed model name in the path"), 1;
  size_t k = 2;
  if (n >= 4 && seg_is(seg[2], len[2], "versions")) {
    if (srv_http_decode_segment(seg[3], len[3], version, sizeof version) || !version[0])
      return srv_rest__set_error(resp, 400, "malformed model version in the path"), 1;
    k = 4;
  }
  if (n > k + 1) return srv_rest__set_error(resp, 404, "not found"), 1;
  const char *what = n == k ? "" : seg[k];
  size_t wl = n == k ? 0 : len[k];
  if (seg_is(what, wl, "generate") || seg_is(what, wl, "generate_stream")) {
    if (!post) return srv_rest__set_error(resp, 405, "method not allowed (POST)"), 1;
    srv_rest__route_generate(r, req, resp, model, version, seg_is(what, wl, "generate_stream"));
    return 1;
  }
  if (seg_is(what, wl, "infer")) {
    if (!post) return srv_rest__set_error(resp, 405, "method not allowed (POST)"), 1;
    srv_rest__route_infer(r, req, resp, model, version);
    return 1;
  }
  if (!get) return srv_rest__set_error(resp, 405, "method not allowed"), 1;
  if (wl == 0) {
    Inference__ModelMetadataRequest q = INFERENCE__MODEL_METADATA_REQUEST__INIT;
    q.name = model, q.version = version;
    call_pb(r, req, resp, K_MODEL_META, SVC "ModelMetadata", &q.base);
  } else if (seg_is(what, wl, "ready")) {
    // ModelReady answers "not ready" for a model it does not know; REST says 404 for that
    srv_model *m;
    srv_version *v;
    err e = {0};
    if (srv_registry_find(r->s->reg, model, version, &m, &v, &e) != 0 && e.code == ERR_NOT_FOUND)
      return srv_rest__set_error(resp, 404, e.msg), 1;
    Inference__ModelReadyRequest q = INFERENCE__MODEL_READY_REQUEST__INIT;
    q.name = model, q.version = version;
    call_pb(r, req, resp, K_MODEL_READY, SVC "ModelReady", &q.base);
  } else if (seg_is(what, wl, "config")) {
    Inference__ModelConfigRequest q = INFERENCE__MODEL_CONFIG_REQUEST__INIT;
    q.name = model, q.version = version;
    call_pb(r, req, resp, K_CONFIG, SVC "ModelConfig", &q.base);
  } else if (seg_is(what, wl, "stats")) {
    Inference__ModelStatisticsRequest q = INFERENCE__MODEL_STATISTICS_REQUEST__INIT;
    q.name = model, q.version = version;
    call_pb(r, req, resp, K_STATS, SVC "ModelStatistics", &q.base);
  } else {
    srv_rest__set_error(resp, 404, "not found");
  }
  return 1;
}

// --- lifetime

// The REST object's wake: answered jobs and the generate extension's answers.
static void on_async(uv_async_t *a) {
  srv_rest__deliver(a->data);
  srv_rest__generate_deliver(a->data);
}

int srv_rest_create(uv_loop_t *loop, srv_server *s, srv_rest **out, err *e) {
  srv_rest *r = calloc(1, sizeof *r);
  if (!r) return err_set(e, ERR_RESOURCE_EXHAUSTED, "REST API: out of memory");
  r->loop = loop;
  r->s = s;
  r->n_methods = srv_methods(s, r->methods, sizeof r->methods / sizeof r->methods[0]);
  if (pthread_mutex_init(&r->mu, NULL) != 0) {
    free(r);
    return err_set(e, ERR_INTERNAL, "REST API: mutex");
  }
  int rc = uv_async_init(loop, &r->async, on_async);
  if (rc != 0) {
    pthread_mutex_destroy(&r->mu);
    free(r);
    return err_set(e, ERR_INTERNAL, "REST API: uv_async_init: %s", uv_strerror(rc));
  }
  r->async.data = r;
  *out = r;
  return 0;
}

static void on_async_closed(uv_handle_t *h) {
  srv_rest *r = h->data;
  pthread_mutex_destroy(&r->mu);
  free(r);
}

void srv_rest_close(srv_rest *r) {
  if (!r) return;
  pthread_mutex_lock(&r->mu);
  r->closing = 1;
  pthread_mutex_unlock(&r->mu);
  // The answers already given (their connections may be gone). Giving one
  // may run the connection's pipelined requests, whose answers (refusals:
  // the scheduler has stopped) are queued here on this thread: again until
  // none is left, or their connections would wait forever.
  for (;;) {
    pthread_mutex_lock(&r->mu);
    int empty = r->head == NULL && r->gen_head == NULL;
    pthread_mutex_unlock(&r->mu);
    if (empty) break;
    srv_rest__deliver(r);
    srv_rest__generate_deliver(r);
  }
  uv_close((uv_handle_t *)&r->async, on_async_closed);
}
