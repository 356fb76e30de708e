// rest.c: the KServe v2 HTTP/REST API. Each route builds the protobuf
// request the gRPC client would send, runs the gRPC method's own handler on
// it as a local call, and turns the protobuf answer into Triton's JSON. So
// REST inference takes the gRPC path whole: one validation, one scheduler,
// one set of statistics.
//
// Every answer arrives through done_cb, maybe inside the handler (metadata,
// errors), maybe later on an engine instance thread (inference). done_cb
// writes the HTTP answer there (the JSON of a large output is built on the
// instance thread, not the loop's) and queues it; the loop thread gives the
// queued answers from a uv_async.
#include "server/http/rest.h"

#include <cjson/cJSON.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc_service.pb-c.h"
#include "kernels/base/utf8.h"
#include "server/http/httpz.h"
#include "server/obs/log.h"
#include "server/core/server.h"

#define SVC "/inference.GRPCInferenceService/"
#define MAX_TENSORS 64  // inputs or outputs of one request (infer.c's response limit too)

typedef enum kind {
  K_SERVER_META,
  K_MODEL_META,
  K_MODEL_READY,
  K_CONFIG,
  K_STATS,
  K_INDEX,
  K_INFER,
  K_SHM_STATUS,
  K_CUDA_SHM_STATUS,
  K_EMPTY,  // register/unregister: 200 with no body
} kind;

// How one requested output is answered.
typedef struct out_opt {
  char name[256];
  int binary;
} out_opt;

// One request in flight: from the route to the loop thread's answer.
typedef struct job {
  struct job *next;
  srv_rest *rest;
  srv_http_pending *pending;
  kind k;
  // inference only: how outputs are answered
  int binary_default;  // request parameter binary_data_output
  size_t n_out_opts;
  out_opt *out_opts;
  srv_httpz_enc resp_enc;  // the answer's content coding (the request's Accept-Encoding)
  // the HTTP answer, written by done_cb
  srv_http_response resp;
} job;

struct srv_rest {
  uv_loop_t *loop;
  srv_server *s;
  uv_async_t async;
  pthread_mutex_t mu;
  job *head, *tail;  // answered, not yet given (FIFO)
  int closing;
  srv_method methods[32];
  size_t n_methods;
};

// --- answers

static void set_text(srv_http_response *resp, int status, const char *ctype, char *body, size_t len) {
  resp->status = status;
  resp->content_type = ctype;
  resp->body = body;
  resp->len = len;
  resp->free_body = 1;
}

// Triton's HTTP status for a gRPC status code.
static int http_status(int code) {
  switch (code) {
    case ERR_INVALID_ARGUMENT:
    case ERR_FAILED_PRECONDITION:
    case ERR_CANCELLED: return 400;
    case ERR_NOT_FOUND: return 404;
    case ERR_ALREADY_EXISTS: return 409;
    case ERR_RESOURCE_EXHAUSTED: return 429;
    case ERR_UNIMPLEMENTED: return 501;
    case ERR_UNAVAILABLE: return 503;
    case ERR_DEADLINE_EXCEEDED: return 504;
    default: return 500;
  }
}

// {"error": msg}; falls back to a static body when out of memory.
static void set_error(srv_http_response *resp, int status, const char *msg) {
  cJSON *o = cJSON_CreateObject();
  char *txt = NULL;
  if (o && cJSON_AddStringToObject(o, "error", msg ? msg : "")) txt = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  if (!txt) {
    static const char oom[] = "{\"error\":\"out of memory\"}";
    resp->status = 500;
    resp->content_type = "application/json";
    resp->body = (char *)oom;
    resp->len = sizeof oom - 1;
    resp->free_body = 0;
    return;
  }
  set_text(resp, status, "application/json", txt, strlen(txt));
}

static void set_json(srv_http_response *resp, cJSON *j) {
  char *txt = j ? cJSON_PrintUnformatted(j) : NULL;
  cJSON_Delete(j);
  if (!txt) return set_error(resp, 500, "out of memory writing the JSON answer");
  set_text(resp, 200, "application/json", txt, strlen(txt));
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

// Writes the HTTP answer of an inference from its packed ModelInferResponse.
static void infer_answer(job *j, const uint8_t *pb, size_t pb_len) {
  Inference__ModelInferResponse *r = inference__model_infer_response__unpack(NULL, pb_len, pb);
  if (!r) return set_error(&j->resp, 500, "the inference answer does not parse");
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
    dtype dt = dtype_from_wire(t->datatype);
    size_t es = dtype_size(dt);
    char *txt = NULL;
    int drc = data_text(t->name, dt, raw->data, es ? raw->len / es : 0, &txt, why, sizeof why);
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
    return set_error(&j->resp, 400, why);
  }
  if (!hdr) {
    inference__model_infer_response__free_unpacked(r, NULL);
    return set_error(&j->resp, 500, "out of memory writing the inference answer");
  }
  size_t hlen = strlen(hdr);
  if (bin_total == 0) {
    inference__model_infer_response__free_unpacked(r, NULL);
    return set_text(&j->resp, 200, "application/json", hdr, hlen);
  }
  // Triton's binary tensor extension: the JSON header, then each binary
  // output's bytes in the order of "outputs"
  char *body = realloc(hdr, hlen + bin_total);
  if (!body) {
    free(hdr);
    inference__model_infer_response__free_unpacked(r, NULL);
    return set_error(&j->resp, 500, "out of memory writing the inference answer");
  }
  size_t off = hlen;
  for (size_t i = 0; i < r->n_outputs && i < MAX_TENSORS; i++) {
    if (!bin[i]) continue;
    memcpy(body + off, r->raw_output_contents[i].data, r->raw_output_contents[i].len);
    off += r->raw_output_contents[i].len;
  }
  inference__model_infer_response__free_unpacked(r, NULL);
  set_text(&j->resp, 200, "application/octet-stream", body, off);
  snprintf(j->resp.headers, sizeof j->resp.headers, "Inference-Header-Content-Length: %zu\r\n", hlen);
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
    case K_EMPTY: return set_text(&j->resp, 200, "application/json", NULL, 0);
    case K_INFER: return;
  }
  ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, len, pb);
  if (!m) return set_error(&j->resp, 500, "the answer does not parse");
  if (j->k == K_MODEL_READY) {
    int ready = ((Inference__ModelReadyResponse *)m)->ready;
    protobuf_c_message_free_unpacked(m, NULL);
    if (ready) return set_text(&j->resp, 200, "text/plain", NULL, 0);
    return set_error(&j->resp, 503, "the model is not ready");
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
      cJSON_AddItemToArray(out, e);
    }
  } else {
    out = pb_json(m, 0);
  }
  protobuf_c_message_free_unpacked(m, NULL);
  set_json(&j->resp, out);
}

// --- the local call's end (any thread) and the loop thread's delivery

static void job_free(job *j) {
  free(j->out_opts);
  free(j);
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

static void done_cb(void *arg, uint8_t *resp, size_t len, int code, const char *msg) {
  job *j = arg;
  if (!resp && code) set_error(&j->resp, http_status(code), msg);
  else if (j->k == K_INFER) infer_answer(j, resp, len), compress_answer(j);
  else meta_answer(j, resp, len);
  free(resp);
  srv_rest *r = j->rest;
  pthread_mutex_lock(&r->mu);
  j->next = NULL;
  if (r->tail) r->tail->next = j;
  else r->head = j;
  r->tail = j;
  int closing = r->closing;
  pthread_mutex_unlock(&r->mu);
  // After srv_rest_close nothing reaches here: the scheduler had stopped.
  if (!closing) uv_async_send(&r->async);
}

static void deliver(srv_rest *r) {
  pthread_mutex_lock(&r->mu);
  job *j = r->head;
  r->head = r->tail = NULL;
  pthread_mutex_unlock(&r->mu);
  while (j) {
    job *next = j->next;
    srv_http_complete(j->pending, &j->resp);
    job_free(j);
    j = next;
  }
}

static void on_async(uv_async_t *a) { deliver(a->data); }

// Runs the gRPC method `method` on the packed request, answering through
// the job (which it takes).
static void run_local(srv_rest *r, job *j, const char *method, const uint8_t *req, size_t len) {
  const srv_method *m = NULL;
  for (size_t i = 0; i < r->n_methods; i++)
    if (strcmp(r->methods[i].path, method) == 0) m = &r->methods[i];
  srv_call *call = m && m->unary ? srv_call_create_local(m->path, done_cb, j) : NULL;
  if (!call) {
    done_cb(j, NULL, 0, m ? ERR_RESOURCE_EXHAUSTED : ERR_INTERNAL, m ? "out of memory" : "no such method");
    return;
  }
  m->unary(m->ctx, call, req, len);
}

static job *job_new(srv_rest *r, const srv_http_request *req, srv_http_response *resp, kind k) {
  job *j = calloc(1, sizeof *j);
  srv_http_pending *p = j ? srv_http_defer(req) : NULL;
  if (!p) {
    free(j);
    set_error(resp, 500, "out of memory");
    return NULL;
  }
  j->rest = r;
  j->pending = p;
  j->k = k;
  j->resp.status = 200;
  return j;
}

// Packs msg and runs method on it for a new job of kind k.
static void call_pb(srv_rest *r, const srv_http_request *req, srv_http_response *resp, kind k, const char *method,
                    const ProtobufCMessage *msg) {
  size_t len = protobuf_c_message_get_packed_size(msg);
  uint8_t *buf = malloc(len ? len : 1);
  if (!buf) return set_error(resp, 500, "out of memory");
  protobuf_c_message_pack(msg, buf);
  job *j = job_new(r, req, resp, k);
  if (j) run_local(r, j, method, buf, len);
  free(buf);
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
    if (dt == DT_FP16 || dt == DT_BF16 || dt == DT_STRING || !es)
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
      if (strcmp(p->string, "classification") == 0)
        return BAD("output '%s': the classification extension is not supported", name->valuestring);
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
    set_error(resp, 415, msg);
    snprintf(resp->headers, sizeof resp->headers, "Accept-Encoding: gzip, deflate\r\n");
    return -1;
  }
  if (!req->body_len) {
    set_error(resp, 400, "the inference request has no JSON body");
    return -1;
  }
  err e = {0};
  size_t max = req->body_max ? req->body_max : SRV_HTTP_MAX_BODY;
  if (srv_httpz_inflate(enc, req->body, req->body_len, max, body_out, len_out, &e) != 0) {
    set_error(resp, e.code == ERR_INVALID_ARGUMENT ? 400 : e.code == ERR_RESOURCE_EXHAUSTED ? 413 : 500, e.msg);
    return -1;
  }
  return 0;
}

static void route_infer(srv_rest *r, const srv_http_request *req, srv_http_response *resp, const char *model,
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
      return set_error(resp, 400, "Inference-Header-Content-Length must be an integer no larger than the body");
    }
    json_len = (size_t)v;
  }
  if (!body || json_len == 0) {
    free(decoded);
    return set_error(resp, 400, "the inference request has no JSON body");
  }
  // cJSON takes strings that are not UTF-8, and an error may quote one back
  // ("unknown datatype '...'"): the answer would not be JSON (found by fuzz_rest)
  if (!utf8_valid(body, json_len)) {
    free(decoded);
    return set_error(resp, 400, "the inference request's JSON is not valid UTF-8 (RFC 8259)");
  }
  cJSON *root = cJSON_ParseWithLength(body, json_len);
  if (!root) {
    free(decoded);
    return set_error(resp, 400, "the request body is not valid JSON");
  }
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
  cJSON_Delete(root);
  free(decoded);  // the packed request holds its own copy of the tensors
  if (rc) {
    if (j) job_free(j);
    free(buf);
    return set_error(resp, rc == -2 ? 400 : 500, rc == -2 ? why : "out of memory");
  }
  srv_http_pending *p = srv_http_defer(req);
  if (!p) {
    job_free(j);
    free(buf);
    return set_error(resp, 500, "out of memory");
  }
  j->rest = r;
  j->pending = p;
  j->k = K_INFER;
  j->resp.status = 200;
  j->resp_enc = srv_httpz_accept(srv_http_request_header(req, "Accept-Encoding"));
  run_local(r, j, SVC "ModelInfer", buf, len);
  free(buf);
}

// --- routing

int srv_rest_decode_segment(const char *s, size_t n, char *out, size_t cap) {
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == '%') {
      if (i + 2 >= n) return -1;
      char hex[3] = {s[i + 1], s[i + 2], 0};
      char *end;
      long v = strtol(hex, &end, 16);
      if (*end || v == 0) return -1;
      c = (char)v;
      i += 2;
    }
    if (o + 1 >= cap) return -1;
    out[o++] = c;
  }
  out[o] = '\0';
  // a name that is not UTF-8 would be echoed into the JSON answer (an
  // unknown model's error), which is then not JSON (found by fuzz_rest)
  return utf8_valid(out, o) ? 0 : -1;
}

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
  if (!q) return set_error(resp, 500, "out of memory");
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
    if (srv_rest_decode_segment(seg[2], len[2], name, SHM_NAME_CAP) || !name[0])
      return set_error(resp, 400, "malformed region name in the path"), 0;
    op = seg[3], opl = len[3];
  } else {
    return set_error(resp, 404, "not found"), 0;
  }
  if (seg_is(op, opl, "status")) {
    if (!get) return set_error(resp, 405, "method not allowed"), 0;
    return call_named(r, req, resp, f->status_kind, f->status_method, f->status_d, name), 0;
  }
  if (!post) return set_error(resp, 405, "method not allowed (POST)"), 0;
  if (seg_is(op, opl, "unregister"))
    return call_named(r, req, resp, K_EMPTY, f->unregister_method, f->unregister_d, name), 0;
  if (!seg_is(op, opl, "register") || !name[0]) return set_error(resp, 404, "not found"), 0;
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
  if (!shm_route(r, req, resp, seg, len, n, get, post, &SYS_SHM, name)) return;
  cJSON *b = req->body_len ? cJSON_ParseWithLength(req->body, req->body_len) : NULL;
  const cJSON *key = cJSON_GetObjectItemCaseSensitive(b, "key");
  const cJSON *off = cJSON_GetObjectItemCaseSensitive(b, "offset");
  const cJSON *size = cJSON_GetObjectItemCaseSensitive(b, "byte_size");
  int ok = cJSON_IsString(key) && (!off || u64_number(off)) && u64_number(size);
  if (!ok) {
    cJSON_Delete(b);
    return set_error(resp, 400, "register needs a JSON body {\"key\": string, \"offset\": integer, \"byte_size\": integer}");
  }
  Inference__SystemSharedMemoryRegisterRequest q = INFERENCE__SYSTEM_SHARED_MEMORY_REGISTER_REQUEST__INIT;
  q.name = name;
  q.key = key->valuestring;
  q.offset = off ? (uint64_t)off->valuedouble : 0;
  q.byte_size = (uint64_t)size->valuedouble;
  call_pb(r, req, resp, K_EMPTY, SVC "SystemSharedMemoryRegister", &q.base);
  cJSON_Delete(b);
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
  if (!shm_route(r, req, resp, seg, len, n, get, post, &CUDA_SHM, name)) return;
  cJSON *b = req->body_len ? cJSON_ParseWithLength(req->body, req->body_len) : NULL;
  const cJSON *h = cJSON_GetObjectItemCaseSensitive(b, "raw_handle");
  const cJSON *b64 = cJSON_GetObjectItemCaseSensitive(h, "b64");
  const cJSON *dev = cJSON_GetObjectItemCaseSensitive(b, "device_id");
  const cJSON *size = cJSON_GetObjectItemCaseSensitive(b, "byte_size");
  // bounded before the casts below (a double past the integer's range converts to nothing defined)
  int ok = cJSON_IsString(b64) && cJSON_IsNumber(dev) && dev->valuedouble >= 0 && dev->valuedouble <= INT32_MAX &&
           u64_number(size);
  if (!ok) {
    cJSON_Delete(b);
    return set_error(resp, 400,
                     "register needs a JSON body {\"raw_handle\": {\"b64\": string}, \"device_id\": integer, "
                     "\"byte_size\": integer}");
  }
  size_t blen = strlen(b64->valuestring);
  uint8_t *raw = malloc(blen / 4 * 3 + 3);
  size_t raw_len = 0;
  if (!raw) {
    cJSON_Delete(b);
    return set_error(resp, 500, "out of memory");
  }
  if (b64_decode(b64->valuestring, blen, raw, &raw_len) != 0) {
    free(raw);
    cJSON_Delete(b);
    return set_error(resp, 400, "raw_handle.b64 is not valid base64");
  }
  Inference__CudaSharedMemoryRegisterRequest q = INFERENCE__CUDA_SHARED_MEMORY_REGISTER_REQUEST__INIT;
  q.name = name;
  q.raw_handle.data = raw;
  q.raw_handle.len = raw_len;
  q.device_id = (int64_t)dev->valuedouble;
  q.byte_size = (uint64_t)size->valuedouble;
  call_pb(r, req, resp, K_EMPTY, SVC "CudaSharedMemoryRegister", &q.base);
  free(raw);
  cJSON_Delete(b);
}

int srv_rest_route(srv_rest *r, const srv_http_request *req, srv_http_response *resp) {
  const char *path = req->path;
  if (strcmp(path, "/v2/health/live") == 0 || strcmp(path, "/v2/health/ready") == 0) return 0;
  if (strcmp(path, "/v2") != 0 && strncmp(path, "/v2/", 4) != 0) return 0;
  int get = strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0;
  int post = strcmp(req->method, "POST") == 0;
  if (strcmp(path, "/v2") == 0 || strcmp(path, "/v2/") == 0) {
    if (!get) return set_error(resp, 405, "method not allowed"), 1;
    Inference__ServerMetadataRequest q = INFERENCE__SERVER_METADATA_REQUEST__INIT;
    call_pb(r, req, resp, K_SERVER_META, SVC "ServerMetadata", &q.base);
    return 1;
  }
  const char *seg[8];
  size_t len[8];
  size_t n = split(path + 4, seg, len, 7);
  if (n > 7) return set_error(resp, 404, "not found"), 1;

  if (n == 2 && seg_is(seg[0], len[0], "repository") && seg_is(seg[1], len[1], "index")) {
    if (!post) return set_error(resp, 405, "method not allowed (POST)"), 1;
    Inference__RepositoryIndexRequest q = INFERENCE__REPOSITORY_INDEX_REQUEST__INIT;
    if (req->body_len) {
      cJSON *b = cJSON_ParseWithLength(req->body, req->body_len);
      if (!cJSON_IsObject(b)) {
        cJSON_Delete(b);
        return set_error(resp, 400, "the request body is not a JSON object"), 1;
      }
      q.ready = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(b, "ready"));
      cJSON_Delete(b);
    }
    call_pb(r, req, resp, K_INDEX, SVC "RepositoryIndex", &q.base);
    return 1;
  }
  // POST /v2/repository/models/{m}/load|unload: server/core/control.c answers them before this router
  if (n >= 2 && seg_is(seg[0], len[0], "systemsharedmemory")) {
    route_shm(r, req, resp, seg, len, n, get, post);
    return 1;
  }
  if (n >= 2 && seg_is(seg[0], len[0], "cudasharedmemory")) {
    route_cuda_shm(r, req, resp, seg, len, n, get, post);
    return 1;
  }
  if (n == 2 && seg_is(seg[0], len[0], "models") && seg_is(seg[1], len[1], "stats")) {
    if (!get) return set_error(resp, 405, "method not allowed"), 1;
    Inference__ModelStatisticsRequest q = INFERENCE__MODEL_STATISTICS_REQUEST__INIT;
    call_pb(r, req, resp, K_STATS, SVC "ModelStatistics", &q.base);
    return 1;
  }
  if (n < 2 || !seg_is(seg[0], len[0], "models")) return set_error(resp, 404, "not found"), 1;
  // /v2/models/{m}[/versions/{v}][/ready|/config|/stats|/infer]
  char model[256], version[64] = "";
  if (srv_rest_decode_segment(seg[1], len[1], model, sizeof model) || !model[0])
    return set_error(resp, 400, "malformed model name in the path"), 1;
  size_t k = 2;
  if (n >= 4 && seg_is(seg[2], len[2], "versions")) {
    if (srv_rest_decode_segment(seg[3], len[3], version, sizeof version) || !version[0])
      return set_error(resp, 400, "malformed model version in the path"), 1;
    k = 4;
  }
  if (n > k + 1) return set_error(resp, 404, "not found"), 1;
  const char *what = n == k ? "" : seg[k];
  size_t wl = n == k ? 0 : len[k];
  if (seg_is(what, wl, "infer")) {
    if (!post) return set_error(resp, 405, "method not allowed (POST)"), 1;
    route_infer(r, req, resp, model, version);
    return 1;
  }
  if (!get) return set_error(resp, 405, "method not allowed"), 1;
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
      return set_error(resp, 404, e.msg), 1;
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
    set_error(resp, 404, "not found");
  }
  return 1;
}

// --- lifetime

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
  deliver(r);  // answers already given by the scheduler; their connections may be gone
  uv_close((uv_handle_t *)&r->async, on_async_closed);
}
