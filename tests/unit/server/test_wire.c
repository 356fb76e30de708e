// Tests server/grpc/wire.c: a NUL byte in any string field of a request,
// top-level, in a repeated message, in a map's key or in a map value's
// string, is found from the wire bytes and named by its dotted path; bytes
// and unknown fields may hold NULs; bytes the walk cannot follow are left
// to protobuf-c; a long path is cut, still terminated; the error names the
// field and never quotes its bytes.
#include <string.h>

#include "check.h"
#include "grpc_service.pb-c.h"
#include "server/grpc/wire.h"

typedef struct wbuf {
  uint8_t b[512];
  size_t n;
} wbuf;

static void put_varint(wbuf *w, uint64_t v) {
  do {
    uint8_t c = v & 0x7f;
    v >>= 7;
    w->b[w->n++] = c | (v ? 0x80 : 0);
  } while (v);
}

// A length-delimited field: a string, bytes or an embedded message.
static void put_ld(wbuf *w, uint32_t field, const void *data, size_t n) {
  put_varint(w, (uint64_t)field << 3 | 2);
  put_varint(w, n);
  memcpy(w->b + w->n, data, n);
  w->n += n;
}

#define PUT_LIT(w, field, lit) put_ld(w, field, lit, sizeof lit - 1)  // a literal's bytes, inner NULs included

static const ProtobufCMessageDescriptor *const INFER = &inference__model_infer_request__descriptor;

// The path walking ModelInferRequest w names, "" when it finds none.
static const char *nul_path(const wbuf *w) {
  static char path[128];
  return srv_wire_strings_nul(INFER, w->b, w->n, path, sizeof path) ? path : "";
}

static void test_clean(void) {
  wbuf w = {0};
  PUT_LIT(&w, 1, "mlp");
  PUT_LIT(&w, 3, "abc");
  wbuf in = {0};
  PUT_LIT(&in, 1, "INPUT0");
  PUT_LIT(&in, 2, "FP32");
  put_ld(&w, 5, in.b, in.n);
  PUT_LIT(&w, 7, "\0\0\0\0");  // raw_input_contents: bytes, any byte goes
  PUT_LIT(&w, 99, "x\0y");     // an unknown field: never read as a string
  CHECK_EQ_STR(nul_path(&w), "");
  Inference__ModelInferRequest *m = inference__model_infer_request__unpack(NULL, w.n, w.b);
  CHECK(m != NULL);
  if (m) inference__model_infer_request__free_unpacked(m, NULL);
  CHECK_EQ_INT(srv_wire_strings_nul(INFER, NULL, 0, (char[8]){0}, 8), 0);
}

static void test_top_level(void) {
  wbuf w = {0};
  PUT_LIT(&w, 1, "mlp\0junk");
  CHECK_EQ_STR(nul_path(&w), "model_name");
  wbuf id = {0};
  PUT_LIT(&id, 1, "mlp");
  PUT_LIT(&id, 3, "abc\0def");
  CHECK_EQ_STR(nul_path(&id), "id");
  wbuf end = {0};
  PUT_LIT(&end, 2, "1\0");  // a trailing NUL too
  CHECK_EQ_STR(nul_path(&end), "model_version");
}

static void test_nested(void) {
  wbuf in = {0}, w = {0};
  PUT_LIT(&in, 1, "INPUT0");
  PUT_LIT(&in, 2, "FP32\0zz");
  PUT_LIT(&w, 1, "mlp");
  put_ld(&w, 5, in.b, in.n);
  CHECK_EQ_STR(nul_path(&w), "inputs.datatype");

  wbuf in2 = {0}, w2 = {0};
  PUT_LIT(&in2, 1, "INPUT0\0junk");
  PUT_LIT(&w2, 1, "mlp");
  put_ld(&w2, 5, in.b, 0);  // an empty input first: the second one is read too
  put_ld(&w2, 5, in2.b, in2.n);
  CHECK_EQ_STR(nul_path(&w2), "inputs.name");
}

static void test_map(void) {
  wbuf entry = {0}, w = {0};
  PUT_LIT(&entry, 1, "prio\0rity");
  put_ld(&w, 4, entry.b, entry.n);
  CHECK_EQ_STR(nul_path(&w), "parameters.key");

  wbuf value = {0}, entry2 = {0}, out = {0}, w2 = {0};
  PUT_LIT(&value, 3, "a\0b");  // InferParameter.string_param
  PUT_LIT(&entry2, 1, "k");
  put_ld(&entry2, 2, value.b, value.n);
  PUT_LIT(&out, 1, "OUTPUT0");
  put_ld(&out, 2, entry2.b, entry2.n);  // the output's parameters
  put_ld(&w2, 6, out.b, out.n);
  CHECK_EQ_STR(nul_path(&w2), "outputs.parameters.value.string_param");
}

static void test_other_messages(void) {
  wbuf w = {0};
  PUT_LIT(&w, 1, "region");
  PUT_LIT(&w, 2, "/victim_secret\0junk");
  char path[64];
  CHECK_EQ_INT(srv_wire_strings_nul(&inference__system_shared_memory_register_request__descriptor, w.b, w.n, path,
                                    sizeof path),
               1);
  CHECK_EQ_STR(path, "key");
  err e = {0};
  CHECK_EQ_INT(srv_wire_strings_no_nul(&inference__system_shared_memory_register_request__descriptor, w.b, w.n, &e),
               ERR_INVALID_ARGUMENT);
  CHECK(strstr(e.msg, "'key'") != NULL);
  CHECK(strstr(e.msg, "victim") == NULL);  // the bytes are not quoted
  e = (err){0};
  CHECK_EQ_INT(srv_wire_strings_no_nul(&inference__system_shared_memory_register_request__descriptor, w.b, 8, &e), 0);
}

static void test_unfollowable(void) {
  wbuf w = {0};
  PUT_LIT(&w, 1, "mlp\0junk");
  CHECK_EQ_STR(nul_path(&w), "model_name");
  w.n -= 1;  // truncated: protobuf-c refuses it, the walk says nothing
  CHECK_EQ_STR(nul_path(&w), "");
  wbuf g = {0};
  put_varint(&g, 1 << 3 | 3);  // a group: protobuf-c refuses those
  PUT_LIT(&g, 1, "mlp\0junk");
  CHECK_EQ_STR(nul_path(&g), "");
  Inference__ModelInferRequest *m = inference__model_infer_request__unpack(NULL, g.n, g.b);
  CHECK(m == NULL);
  if (m) inference__model_infer_request__free_unpacked(m, NULL);
}

static void test_path_cut(void) {
  wbuf value = {0}, entry = {0}, out = {0}, w = {0};
  PUT_LIT(&value, 3, "\0");
  put_ld(&entry, 2, value.b, value.n);
  put_ld(&out, 2, entry.b, entry.n);
  put_ld(&w, 6, out.b, out.n);
  char path[10];
  CHECK_EQ_INT(srv_wire_strings_nul(INFER, w.b, w.n, path, sizeof path), 1);
  CHECK_EQ_STR(path, "outputs.p");
}

static void test_next(void) {
  wbuf w = {0};
  put_varint(&w, 1 << 3 | 0);
  put_varint(&w, 300);
  PUT_LIT(&w, 7, "abcd");
  size_t pos = 0;
  srv_wire_field f;
  CHECK_EQ_INT(srv_wire_next(w.b, w.n, &pos, &f), 0);
  CHECK_EQ_INT(f.number, 1);
  CHECK_EQ_INT(f.type, 0);
  CHECK_EQ_INT(srv_wire_next(w.b, w.n, &pos, &f), 0);
  CHECK_EQ_INT(f.number, 7);
  CHECK_EQ_INT(f.n, 4);
  CHECK(memcmp(w.b + f.data, "abcd", 4) == 0);
  CHECK_EQ_INT(pos, w.n);
  CHECK_EQ_INT(f.end, w.n);
  uint8_t zero_tag[] = {0x00, 0x01};
  pos = 0;
  CHECK_EQ_INT(srv_wire_next(zero_tag, sizeof zero_tag, &pos, &f), -1);
}

int main(void) {
  test_clean();
  test_top_level();
  test_nested();
  test_map();
  test_other_messages();
  test_unfollowable();
  test_path_cut();
  test_next();
  CHECK_DONE();
}
