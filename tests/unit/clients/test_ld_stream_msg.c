// test_ld_stream_msg: clients/load/stream_msg.c. A request with the id
// field appended decodes (protobuf-c) to the original request with that id
// set, shared memory parameters included; answers packed by protobuf-c scan
// back to their error, id and infer_response bytes, and malformed ones are
// refused at every truncation; error messages map to the kinds they imply.
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "clients/load/request.h"
#include "clients/load/stats.h"
#include "clients/load/stream_msg.h"
#include "grpc_service.pb-c.h"

// --- requests

static uint8_t in0[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
static uint8_t in1[8] = {0xff, 0, 0xfe, 1, 0xfd, 2, 0xfc, 3};

static ld_tensor tensor(const char *name, const char *dt, int64_t d0, int64_t d1, uint8_t *data, size_t size) {
  ld_tensor t;
  memset(&t, 0, sizeof t);
  t.name = (char *)name;
  t.datatype = (char *)dt;
  t.shape[0] = d0;
  t.shape[1] = d1;
  t.rank = 2;
  t.data = data;
  t.size = size;
  return t;
}

// base + field, malloc'ed.
static uint8_t *concat(const uint8_t *base, size_t n, const uint8_t *field, size_t m) {
  uint8_t *p = malloc(n + m);
  memcpy(p, base, n);
  memcpy(p + n, field, m);
  return p;
}

// Packs a decoded request after giving it id: equal bytes mean equal fields
// (protobuf-c packs in field order, deterministically).
static uint8_t *repack_with_id(Inference__ModelInferRequest *r, const char *id, size_t *len) {
  char *keep = r->id;
  r->id = (char *)id;
  *len = inference__model_infer_request__get_packed_size(r);
  uint8_t *p = malloc(*len ? *len : 1);
  inference__model_infer_request__pack(r, p);
  r->id = keep;
  return p;
}

// The request spec encoded, then with id appended: decodes to the same
// request with id set.
static void check_appended(const ld_request_spec *spec, const char *id) {
  uint8_t *base = NULL;
  size_t n = 0;
  err e = {0};
  CHECK_EQ_INT(ld_request_encode_spec(spec, &base, &n, &e), 0);
  if (!base) return;
  size_t idn = strlen(id);
  uint8_t small[4];
  size_t need = ld_id_field(id, idn, small, 0);  // cap 0: only the size
  CHECK_EQ_INT(need, 1 + (idn > 127 ? 2 : 1) + idn);
  uint8_t *field = malloc(need);
  CHECK_EQ_INT(ld_id_field(id, idn, field, need), need);
  CHECK_EQ_INT(field[0], 0x1a);
  uint8_t *msg = concat(base, n, field, need);

  Inference__ModelInferRequest *orig = inference__model_infer_request__unpack(NULL, n, base);
  Inference__ModelInferRequest *got = inference__model_infer_request__unpack(NULL, n + need, msg);
  CHECK(orig && got);
  if (orig && got) {
    CHECK_EQ_STR(orig->id, "");
    CHECK_EQ_STR(got->id, id);
    CHECK_EQ_STR(got->model_name, spec->model);
    CHECK_EQ_INT(got->n_inputs, spec->n_in);
    size_t la, lb;
    uint8_t *a = repack_with_id(orig, id, &la), *b = repack_with_id(got, id, &lb);
    CHECK_EQ_INT(la, lb);
    CHECK(la == lb && memcmp(a, b, la) == 0);
    free(a), free(b);
  }
  if (orig) inference__model_infer_request__free_unpacked(orig, NULL);
  if (got) inference__model_infer_request__free_unpacked(got, NULL);
  free(msg), free(field), free(base);
}

static void test_id_field(void) {
  ld_tensor in[2] = {tensor("INPUT0", "FP32", 1, 4, in0, sizeof in0), tensor("X:0", "INT8", 1, 8, in1, sizeof in1)};
  ld_request_spec spec = {.model = "mlp", .version = "3", .in = in, .n_in = 2};
  check_appended(&spec, "0");
  check_appended(&spec, "18446744073709551615");
  char long_id[301];
  memset(long_id, 'k', 300);
  long_id[300] = '\0';
  check_appended(&spec, long_id);  // a two-byte length

  // --shared-memory system only changes the bytes before the id.
  ld_region_ref shm_in[2] = {{"inferd_load_1_in0", 16, 0}, {"inferd_load_1_in1", 8, 64}};
  ld_output_req out[1] = {{"OUTPUT0", {"inferd_load_1_out0", 4096, 0}}};
  ld_request_spec sspec = {.model = "mlp", .in = in, .n_in = 2, .in_shm = shm_in, .out = out, .n_out = 1};
  check_appended(&sspec, "77");

  // A later id field wins, as for any protobuf field: appending to a request
  // that had one still works.
  uint8_t *base = NULL;
  size_t n = 0;
  err e = {0};
  CHECK_EQ_INT(ld_request_encode_spec(&spec, &base, &n, &e), 0);
  uint8_t f1[LD_ID_FIELD_MAX], f2[LD_ID_FIELD_MAX];
  size_t n1 = ld_id_field_seq(5, f1), n2 = ld_id_field_seq(123456789012ull, f2);
  CHECK_EQ_INT(n1, 3);
  CHECK_EQ_INT(n2, 14);
  uint8_t *once = concat(base, n, f1, n1);
  uint8_t *twice = concat(once, n + n1, f2, n2);
  Inference__ModelInferRequest *r = inference__model_infer_request__unpack(NULL, n + n1 + n2, twice);
  CHECK(r != NULL);
  if (r) CHECK_EQ_STR(r->id, "123456789012");
  if (r) inference__model_infer_request__free_unpacked(r, NULL);
  free(once), free(twice), free(base);

  uint8_t big[LD_ID_FIELD_MAX];
  CHECK_EQ_INT(ld_id_field_seq(UINT64_MAX, big), LD_ID_FIELD_MAX);
  CHECK(memcmp(big + 2, "18446744073709551615", 20) == 0);
}

static void test_id_parse(void) {
  uint64_t v = 7;
#define PARSE(s) ld_id_parse((const uint8_t *)(s), strlen(s), &v)
  CHECK(PARSE("0") && v == 0);
  CHECK(PARSE("42") && v == 42);
  CHECK(PARSE("18446744073709551615") && v == UINT64_MAX);
  CHECK(!PARSE(""));
  CHECK(!PARSE("18446744073709551616"));   // overflows
  CHECK(!PARSE("123456789012345678901"));  // 21 digits
  CHECK(!PARSE("007"));                    // not how this client writes ids
  CHECK(!PARSE("12a"));
  CHECK(!PARSE("-1"));
  CHECK(!PARSE("req-1"));
#undef PARSE
  CHECK(!ld_id_parse(NULL, 0, &v));
}

// --- answers

typedef struct packed {
  uint8_t *buf;
  size_t len;
  uint8_t *inner;  // the infer_response alone, packed
  size_t inner_len;
} packed;

// A ModelStreamInferResponse; id NULL: no infer_response; err NULL: none.
static packed pack_answer(const char *err, const char *id, bool with_outputs) {
  Inference__ModelStreamInferResponse sr = INFERENCE__MODEL_STREAM_INFER_RESPONSE__INIT;
  Inference__ModelInferResponse ir = INFERENCE__MODEL_INFER_RESPONSE__INIT;
  Inference__ModelInferResponse__InferOutputTensor ot = INFERENCE__MODEL_INFER_RESPONSE__INFER_OUTPUT_TENSOR__INIT;
  Inference__ModelInferResponse__InferOutputTensor *otp[1] = {&ot};
  int64_t shape[2] = {1, 4};
  ProtobufCBinaryData raw = {sizeof in0, in0};
  packed p = {0};
  if (err) sr.error_message = (char *)err;
  if (id) {
    ir.model_name = "mlp";
    ir.model_version = "1";
    ir.id = (char *)id;
    if (with_outputs) {
      ot.name = "OUTPUT0";
      ot.datatype = "FP32";
      ot.n_shape = 2;
      ot.shape = shape;
      ir.n_outputs = 1;
      ir.outputs = otp;
      ir.n_raw_output_contents = 1;
      ir.raw_output_contents = &raw;
    }
    sr.infer_response = &ir;
    p.inner_len = inference__model_infer_response__get_packed_size(&ir);
    p.inner = malloc(p.inner_len ? p.inner_len : 1);
    inference__model_infer_response__pack(&ir, p.inner);
  }
  p.len = inference__model_stream_infer_response__get_packed_size(&sr);
  p.buf = malloc(p.len ? p.len : 1);
  inference__model_stream_infer_response__pack(&sr, p.buf);
  return p;
}

static void packed_free(packed *p) {
  free(p->buf);
  free(p->inner);
}

static bool span_is(const void *p, size_t n, const char *s) {
  return n == strlen(s) && (n == 0 || memcmp(p, s, n) == 0);
}

// Every proper prefix of a message with fields is either refused or scans
// to less than the whole; none may read past its end (ASan watches).
static void check_prefixes(const packed *p) {
  for (size_t n = 0; n < p->len; n++) {
    uint8_t *cut = malloc(n ? n : 1);
    memcpy(cut, p->buf, n);
    ld_answer a;
    if (ld_answer_scan(cut, n, &a) == 0) CHECK(a.resp == NULL || a.resp + a.resp_len <= cut + n);
    free(cut);
  }
}

static void test_scan(void) {
  ld_answer a;
  packed ok = pack_answer(NULL, "42", true);
  CHECK_EQ_INT(ld_answer_scan(ok.buf, ok.len, &a), 0);
  CHECK_EQ_INT(a.error_len, 0);
  CHECK(span_is(a.id, a.id_len, "42"));
  CHECK_EQ_INT(a.resp_len, ok.inner_len);
  CHECK(a.resp && memcmp(a.resp, ok.inner, ok.inner_len) == 0);  // the inner message, byte for byte
  check_prefixes(&ok);

  packed failed = pack_answer("unknown model 'ghost'", "7", false);
  CHECK_EQ_INT(ld_answer_scan(failed.buf, failed.len, &a), 0);
  CHECK(span_is(a.error, a.error_len, "unknown model 'ghost'"));
  CHECK(span_is(a.id, a.id_len, "7"));
  CHECK(a.resp != NULL);
  check_prefixes(&failed);

  packed bare = pack_answer("out of memory", NULL, false);  // failed before the request was read
  CHECK_EQ_INT(ld_answer_scan(bare.buf, bare.len, &a), 0);
  CHECK(span_is(a.error, a.error_len, "out of memory"));
  CHECK(a.resp == NULL && a.id_len == 0);

  packed noid = pack_answer(NULL, "", true);  // a server that does not echo ids
  CHECK_EQ_INT(ld_answer_scan(noid.buf, noid.len, &a), 0);
  CHECK(a.resp != NULL && a.id_len == 0);

  CHECK_EQ_INT(ld_answer_scan(NULL, 0, &a), 0);  // an empty message: all defaults
  CHECK(a.resp == NULL && a.error_len == 0);

  // Unknown fields of every wire type are skipped, outside and inside.
  // clang-format off
  uint8_t extra[] = {0x18, 0x96, 0x01,                        // 3: varint 150
                     0x21, 1, 2, 3, 4, 5, 6, 7, 8,            // 4: fixed64
                     0x2d, 1, 2, 3, 4,                        // 5: fixed32
                     0x12, 11,                                // 2: infer_response, 11 bytes:
                     0x08, 0x01,                              //   1: varint
                     0x1a, 0x02, '1', '9',                    //   3: id "19"
                     0x35, 0, 0, 0, 0,                        //   6: fixed32
                     0x0a, 0x03, 'b', 'a', 'd'};              // 1: error_message "bad"
  // clang-format on
  CHECK_EQ_INT(ld_answer_scan(extra, sizeof extra, &a), 0);
  CHECK(span_is(a.id, a.id_len, "19"));
  CHECK(span_is(a.error, a.error_len, "bad"));
  CHECK_EQ_INT(a.resp_len, 11);

  uint8_t twice[] = {0x12, 0x00, 0x12, 0x00};  // infer_response twice: would merge
  CHECK_EQ_INT(ld_answer_scan(twice, sizeof twice, &a), -1);
  uint8_t bad_wt[] = {0x08, 0x01};  // error_message as a varint
  CHECK_EQ_INT(ld_answer_scan(bad_wt, sizeof bad_wt, &a), -1);
  uint8_t group[] = {0x1b, 0x1c};  // groups are not in this message
  CHECK_EQ_INT(ld_answer_scan(group, sizeof group, &a), -1);
  uint8_t long_len[] = {0x0a, 0x05, 'a'};
  CHECK_EQ_INT(ld_answer_scan(long_len, sizeof long_len, &a), -1);
  uint8_t field0[] = {0x02, 0x00};
  CHECK_EQ_INT(ld_answer_scan(field0, sizeof field0, &a), -1);
  uint8_t endless[12];
  memset(endless, 0xff, sizeof endless);  // a varint that never ends
  CHECK_EQ_INT(ld_answer_scan(endless, sizeof endless, &a), -1);
  uint8_t bad_inner[] = {0x12, 0x02, 0x1a, 0x05};  // id longer than its message
  CHECK_EQ_INT(ld_answer_scan(bad_inner, sizeof bad_inner, &a), -1);

  packed_free(&ok), packed_free(&failed), packed_free(&bare), packed_free(&noid);
}

// The infer_response span is what --validate-identity compares, with the unary path's check.
static void test_scan_then_validate(void) {
  packed p = pack_answer(NULL, "1", true);
  ld_answer a;
  CHECK_EQ_INT(ld_answer_scan(p.buf, p.len, &a), 0);
  ld_tensor same = tensor("INPUT0", "FP32", 1, 4, in0, sizeof in0);
  ld_tensor other = tensor("INPUT0", "INT8", 1, 8, in1, sizeof in1);
  CHECK(ld_response_matches(a.resp, a.resp_len, &same, 1));
  CHECK(!ld_response_matches(a.resp, a.resp_len, &other, 1));
  packed_free(&p);
}

// --- error kinds

static void test_kinds(void) {
#define KIND(s) ld_kind_from_message((s), strlen(s))
  // inferd's wording
  CHECK_EQ_STR(ld_kind_name(KIND("unknown model 'ghost'")), "NOT_FOUND");
  CHECK_EQ_STR(ld_kind_name(KIND("unknown version '9' of model 'mlp'")), "NOT_FOUND");
  CHECK_EQ_STR(ld_kind_name(KIND("model 'mlp' is not ready: config.pbtxt not found")), "UNAVAILABLE");
  CHECK_EQ_STR(
      ld_kind_name(KIND("input 'INPUT0': shape [1,1000] does not match the model's, expected shape [-1,1024]")),
      "INVALID_ARGUMENT");
  CHECK_EQ_STR(ld_kind_name(KIND("missing input 'INPUT0' for model 'mlp'")), "INVALID_ARGUMENT");
  CHECK_EQ_STR(ld_kind_name(KIND("malformed ModelInferRequest: the message does not parse")), "INVALID_ARGUMENT");
  CHECK_EQ_STR(ld_kind_name(KIND("out of memory")), "RESOURCE_EXHAUSTED");
  CHECK_EQ_STR(ld_kind_name(KIND("the server is shutting down")), "UNAVAILABLE");
  // Triton's wording
  CHECK_EQ_STR(ld_kind_name(KIND("Request for unknown model: 'ghost' is not found")), "NOT_FOUND");
  CHECK_EQ_STR(ld_kind_name(KIND("unexpected shape for input 'INPUT0' for model 'mlp'")), "INVALID_ARGUMENT");
  CHECK_EQ_STR(ld_kind_name(KIND("[request id: 3] inference request batch-size must be <= 8")), "INVALID_ARGUMENT");
  CHECK_EQ_STR(ld_kind_name(KIND("Deadline Exceeded")), "DEADLINE_EXCEEDED");  // any case
  // A leading status name decides, and the earliest phrase beats one quoted later.
  CHECK_EQ_STR(ld_kind_name(KIND("NOT_FOUND: input 'x'")), "NOT_FOUND");
  CHECK_EQ_STR(ld_kind_name(KIND("UNAVAILABLE")), "UNAVAILABLE");
  CHECK_EQ_STR(ld_kind_name(KIND("unknown model 'timeout_not_ready'")), "NOT_FOUND");
  CHECK_EQ_INT(KIND("NOT_FOUNDING fathers"), LD_KIND_STREAM_ERROR);  // a status name stands alone
  // Nothing recognisable.
  CHECK_EQ_INT(KIND("the answer is 42"), LD_KIND_STREAM_ERROR);
  CHECK_EQ_STR(ld_kind_name(LD_KIND_STREAM_ERROR), "STREAM_ERROR");
  CHECK_EQ_INT(KIND(""), LD_KIND_STREAM_ERROR);
#undef KIND
  CHECK_EQ_INT(ld_kind_from_status(5), 5);
  CHECK_EQ_INT(ld_kind_from_status(16), 16);
  CHECK_EQ_INT(ld_kind_from_status(17), 2);  // UNKNOWN
  CHECK_EQ_INT(ld_kind_from_status(-1), 2);
}

int main(void) {
  test_id_field();
  test_id_parse();
  test_scan();
  test_scan_then_validate();
  test_kinds();
  CHECK_DONE();
}
