// Tests server/grpc/reflection.c against the embedded descriptor set: service
// listing, symbol and file lookups with their dependencies, in-band errors,
// v1alpha wire identity, and refusal of malformed requests and sets.
#include <stdlib.h>

#include "check.h"
#include "google/protobuf/descriptor.pb-c.h"
#include "grpc/reflection/v1/reflection.pb-c.h"
#include "grpc/reflection/v1alpha/reflection.pb-c.h"
#include "proto/protoset.h"
#include "server/grpc/reflection.h"

typedef Grpc__Reflection__V1__ServerReflectionRequest req_t;
typedef Grpc__Reflection__V1__ServerReflectionResponse resp_t;

// Packs rq, answers it and unpacks the response; NULL when any step fails.
static resp_t *ask(const srv_reflection *r, const req_t *rq) {
  size_t n = grpc__reflection__v1__server_reflection_request__get_packed_size(rq);
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf) return NULL;
  grpc__reflection__v1__server_reflection_request__pack(rq, buf);
  uint8_t *out = NULL;
  size_t out_len = 0;
  err e = {0};
  int rc = srv_reflection_answer(r, buf, n, &out, &out_len, &e);
  free(buf);
  if (rc != 0) {
    fprintf(stderr, "answer failed: %s\n", e.msg);
    return NULL;
  }
  resp_t *rs = grpc__reflection__v1__server_reflection_response__unpack(NULL, out_len, out);
  free(out);
  return rs;
}

static resp_t *ask_symbol(const srv_reflection *r, const char *sym) {
  req_t rq = GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__INIT;
  rq.host = "localhost:8001";
  rq.message_request_case = GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_CONTAINING_SYMBOL;
  rq.file_containing_symbol = (char *)sym;
  return ask(r, &rq);
}

// Name of the i-th FileDescriptorProto of a file_descriptor_response, copied
// into buf ("" when absent or unparsable).
static const char *file_name(const resp_t *rs, size_t i, char *buf, size_t cap) {
  buf[0] = '\0';
  if (!rs || rs->message_response_case !=
                 GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_FILE_DESCRIPTOR_RESPONSE)
    return buf;
  const Grpc__Reflection__V1__FileDescriptorResponse *f = rs->file_descriptor_response;
  if (i >= f->n_file_descriptor_proto) return buf;
  Google__Protobuf__FileDescriptorProto *fd = google__protobuf__file_descriptor_proto__unpack(
      NULL, f->file_descriptor_proto[i].len, f->file_descriptor_proto[i].data);
  if (fd && fd->name) snprintf(buf, cap, "%s", fd->name);
  if (fd) google__protobuf__file_descriptor_proto__free_unpacked(fd, NULL);
  return buf;
}

static size_t n_files(const resp_t *rs) {
  if (!rs || rs->message_response_case !=
                 GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_FILE_DESCRIPTOR_RESPONSE)
    return 0;
  return rs->file_descriptor_response->n_file_descriptor_proto;
}

static int error_code(const resp_t *rs) {
  if (!rs || rs->message_response_case !=
                 GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_ERROR_RESPONSE)
    return -1;
  return rs->error_response->error_code;
}

static void test_list_services(const srv_reflection *r) {
  CHECK_EQ_INT(srv_reflection_service_count(r), 4);
  req_t rq = GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__INIT;
  rq.host = "inferd.example:8001";
  rq.message_request_case = GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_LIST_SERVICES;
  rq.list_services = "*";
  resp_t *rs = ask(r, &rq);
  CHECK(rs != NULL);
  if (!rs) return;
  CHECK_EQ_STR(rs->valid_host, "inferd.example:8001");
  CHECK(rs->original_request != NULL);
  if (rs->original_request) {
    CHECK_EQ_INT(rs->original_request->message_request_case,
                 GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_LIST_SERVICES);
    CHECK_EQ_STR(rs->original_request->list_services, "*");
    CHECK_EQ_STR(rs->original_request->host, "inferd.example:8001");
  }
  CHECK_EQ_INT(rs->message_response_case,
               GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_LIST_SERVICES_RESPONSE);
  if (rs->message_response_case ==
      GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_LIST_SERVICES_RESPONSE) {
    const Grpc__Reflection__V1__ListServiceResponse *l = rs->list_services_response;
    CHECK_EQ_INT(l->n_service, 4);
    const char *want[] = {"inference.GRPCInferenceService", "grpc.health.v1.Health",
                          "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"};
    for (size_t w = 0; w < 4; w++) {
      int found = 0;
      for (size_t i = 0; i < l->n_service; i++) found += strcmp(l->service[i]->name, want[w]) == 0;
      CHECK_EQ_INT(found, 1);
    }
  }
  grpc__reflection__v1__server_reflection_response__free_unpacked(rs, NULL);
}

// A symbol lookup must return the defining file first, then its imports.
static void expect_files(const srv_reflection *r, const char *sym, size_t n, const char *first,
                         const char *second) {
  char buf[256];
  resp_t *rs = ask_symbol(r, sym);
  CHECK(rs != NULL);
  if (!rs) return;
  CHECK_EQ_INT(n_files(rs), n);
  CHECK_EQ_STR(file_name(rs, 0, buf, sizeof buf), first);
  if (second) CHECK_EQ_STR(file_name(rs, 1, buf, sizeof buf), second);
  CHECK_EQ_STR(rs->valid_host, "localhost:8001");
  grpc__reflection__v1__server_reflection_response__free_unpacked(rs, NULL);
}

static void test_symbols(const srv_reflection *r) {
  expect_files(r, "inference.ModelInferRequest", 2, "grpc_service.proto", "model_config.proto");
  expect_files(r, "inference.ModelInferRequest.InferInputTensor", 2, "grpc_service.proto", "model_config.proto");
  expect_files(r, ".inference.ModelInferResponse", 2, "grpc_service.proto", "model_config.proto");
  expect_files(r, "inference.GRPCInferenceService", 2, "grpc_service.proto", "model_config.proto");
  expect_files(r, "inference.GRPCInferenceService.ModelStreamInfer", 2, "grpc_service.proto",
               "model_config.proto");
  expect_files(r, "inference.ModelConfig", 1, "model_config.proto", NULL);
  expect_files(r, "inference.ModelDynamicBatching.PriorityQueuePolicyEntry", 1, "model_config.proto", NULL);
  expect_files(r, "inference.DataType", 1, "model_config.proto", NULL);
  expect_files(r, "inference.TYPE_FP32", 1, "model_config.proto", NULL);  // enum value, package scope
  expect_files(r, "inference.ModelQueuePolicy.DELAY", 1, "model_config.proto", NULL);
  expect_files(r, "inference.ModelInput.dims", 1, "model_config.proto", NULL);  // field
  expect_files(r, "grpc.health.v1.Health.Check", 1, "grpc/health/v1/health.proto", NULL);
  expect_files(r, "grpc.reflection.v1alpha.ServerReflectionRequest", 1,
               "grpc/reflection/v1alpha/reflection.proto", NULL);

  resp_t *rs = ask_symbol(r, "inference.NoSuchMessage");
  CHECK_EQ_INT(error_code(rs), 5);
  if (error_code(rs) == 5) CHECK_CONTAINS(rs->error_response->error_message, "inference.NoSuchMessage");
  CHECK_EQ_INT(n_files(rs), 0);
  if (rs) grpc__reflection__v1__server_reflection_response__free_unpacked(rs, NULL);

  // A prefix of a real name is not a symbol.
  rs = ask_symbol(r, "inference.ModelInfer");
  CHECK_EQ_INT(error_code(rs), 5);
  if (rs) grpc__reflection__v1__server_reflection_response__free_unpacked(rs, NULL);
}

static void test_files(const srv_reflection *r) {
  char buf[256];
  req_t rq = GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__INIT;
  rq.message_request_case = GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_BY_FILENAME;
  rq.file_by_filename = "grpc_service.proto";
  resp_t *rs = ask(r, &rq);
  CHECK_EQ_INT(n_files(rs), 2);
  CHECK_EQ_STR(file_name(rs, 0, buf, sizeof buf), "grpc_service.proto");
  CHECK_EQ_STR(file_name(rs, 1, buf, sizeof buf), "model_config.proto");
  // The service's file must carry all of Triton's RPCs (shared memory etc.).
  if (n_files(rs) >= 1) {
    ProtobufCBinaryData b = rs->file_descriptor_response->file_descriptor_proto[0];
    Google__Protobuf__FileDescriptorProto *fd = google__protobuf__file_descriptor_proto__unpack(NULL, b.len, b.data);
    CHECK(fd != NULL);
    if (fd) {
      CHECK_EQ_STR(fd->package, "inference");
      CHECK_EQ_INT(fd->n_service, 1);
      if (fd->n_service == 1) CHECK_EQ_INT(fd->service[0]->n_method, 20);
      google__protobuf__file_descriptor_proto__free_unpacked(fd, NULL);
    }
  }
  if (rs) grpc__reflection__v1__server_reflection_response__free_unpacked(rs, NULL);

  rq.file_by_filename = "grpc/reflection/v1/reflection.proto";
  rs = ask(r, &rq);
  CHECK_EQ_INT(n_files(rs), 1);
  CHECK_EQ_STR(file_name(rs, 0, buf, sizeof buf), "grpc/reflection/v1/reflection.proto");
  if (rs) grpc__reflection__v1__server_reflection_response__free_unpacked(rs, NULL);

  rq.file_by_filename = "nope.proto";
  rs = ask(r, &rq);
  CHECK_EQ_INT(error_code(rs), 5);
  if (error_code(rs) == 5) CHECK_CONTAINS(rs->error_response->error_message, "nope.proto");
  if (rs) grpc__reflection__v1__server_reflection_response__free_unpacked(rs, NULL);
}

static void test_extensions_and_empty(const srv_reflection *r) {
  req_t rq = GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__INIT;
  rq.message_request_case =
      GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_ALL_EXTENSION_NUMBERS_OF_TYPE;
  rq.all_extension_numbers_of_type = "inference.ModelConfig";
  resp_t *rs = ask(r, &rq);
  CHECK(rs != NULL);
  if (rs) {
    CHECK_EQ_INT(rs->message_response_case,
                 GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_ALL_EXTENSION_NUMBERS_RESPONSE);
    if (rs->message_response_case ==
        GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_ALL_EXTENSION_NUMBERS_RESPONSE) {
      CHECK_EQ_STR(rs->all_extension_numbers_response->base_type_name, "inference.ModelConfig");
      CHECK_EQ_INT(rs->all_extension_numbers_response->n_extension_number, 0);
    }
    grpc__reflection__v1__server_reflection_response__free_unpacked(rs, NULL);
  }
  rq.all_extension_numbers_of_type = "inference.Bogus";
  rs = ask(r, &rq);
  CHECK_EQ_INT(error_code(rs), 5);
  if (rs) grpc__reflection__v1__server_reflection_response__free_unpacked(rs, NULL);

  Grpc__Reflection__V1__ExtensionRequest x = GRPC__REFLECTION__V1__EXTENSION_REQUEST__INIT;
  x.containing_type = "inference.ModelConfig";
  x.extension_number = 1000;
  req_t rq2 = GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__INIT;
  rq2.message_request_case =
      GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_CONTAINING_EXTENSION;
  rq2.file_containing_extension = &x;
  rs = ask(r, &rq2);
  CHECK_EQ_INT(error_code(rs), 5);
  if (rs) grpc__reflection__v1__server_reflection_response__free_unpacked(rs, NULL);

  // An empty message is a valid request with no kind: answered in-band.
  uint8_t *out = NULL;
  size_t out_len = 0;
  err e = {0};
  CHECK_EQ_INT(srv_reflection_answer(r, NULL, 0, &out, &out_len, &e), 0);
  rs = out ? grpc__reflection__v1__server_reflection_response__unpack(NULL, out_len, out) : NULL;
  CHECK_EQ_INT(error_code(rs), 12);
  if (rs) grpc__reflection__v1__server_reflection_response__free_unpacked(rs, NULL);
  free(out);
}

// The v1alpha path is served by the same function: its messages must decode.
static void test_v1alpha(const srv_reflection *r) {
  Grpc__Reflection__V1alpha__ServerReflectionRequest rq = GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_REQUEST__INIT;
  rq.host = "h";
  rq.message_request_case =
      GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_CONTAINING_SYMBOL;
  rq.file_containing_symbol = "inference.ModelConfigResponse";
  size_t n = grpc__reflection__v1alpha__server_reflection_request__get_packed_size(&rq);
  uint8_t *buf = malloc(n);
  CHECK(buf != NULL);
  if (!buf) return;
  grpc__reflection__v1alpha__server_reflection_request__pack(&rq, buf);
  uint8_t *out = NULL;
  size_t out_len = 0;
  err e = {0};
  CHECK_EQ_INT(srv_reflection_answer(r, buf, n, &out, &out_len, &e), 0);
  free(buf);
  Grpc__Reflection__V1alpha__ServerReflectionResponse *rs =
      out ? grpc__reflection__v1alpha__server_reflection_response__unpack(NULL, out_len, out) : NULL;
  CHECK(rs != NULL);
  if (rs) {
    CHECK_EQ_STR(rs->valid_host, "h");
    CHECK_EQ_INT(rs->message_response_case,
                 GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_FILE_DESCRIPTOR_RESPONSE);
    if (rs->message_response_case ==
        GRPC__REFLECTION__V1ALPHA__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_FILE_DESCRIPTOR_RESPONSE)
      CHECK_EQ_INT(rs->file_descriptor_response->n_file_descriptor_proto, 2);
    CHECK(rs->original_request != NULL);
    if (rs->original_request)
      CHECK_EQ_STR(rs->original_request->file_containing_symbol, "inference.ModelConfigResponse");
    grpc__reflection__v1alpha__server_reflection_response__free_unpacked(rs, NULL);
  }
  free(out);
}

static void test_garbage(const srv_reflection *r) {
  // 0xff... is a varint that never ends; 0x1a 0x10 claims 16 bytes that are not there.
  const uint8_t bad1[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  const uint8_t bad2[] = {0x1a, 0x10, 'a', 'b'};
  const uint8_t *bad[] = {bad1, bad2};
  size_t lens[] = {sizeof bad1, sizeof bad2};
  for (size_t i = 0; i < 2; i++) {
    uint8_t *out = (uint8_t *)1;
    size_t out_len = 99;
    err e = {0};
    CHECK_EQ_INT(srv_reflection_answer(r, bad[i], lens[i], &out, &out_len, &e), ERR_INVALID_ARGUMENT);
    CHECK_EQ_INT(e.code, ERR_INVALID_ARGUMENT);
    CHECK(out == NULL);
    CHECK_EQ_INT(out_len, 0);
  }
}

static void test_bad_sets(void) {
  srv_reflection *r = (srv_reflection *)1;
  err e = {0};
  const uint8_t junk[] = {0x0a, 0x50, 0x01};
  CHECK_EQ_INT(srv_reflection_create(junk, sizeof junk, &r, &e), ERR_INVALID_ARGUMENT);
  CHECK(r == NULL);
  CHECK_EQ_INT(srv_reflection_create(NULL, 0, &r, &e), ERR_INVALID_ARGUMENT);

  // A set built without --include_imports: a.proto imports a file it lacks.
  Google__Protobuf__FileDescriptorProto fd = GOOGLE__PROTOBUF__FILE_DESCRIPTOR_PROTO__INIT;
  char *deps[] = {"missing.proto"};
  fd.name = "a.proto";
  fd.n_dependency = 1;
  fd.dependency = deps;
  Google__Protobuf__FileDescriptorProto *files[] = {&fd};
  Google__Protobuf__FileDescriptorSet set = GOOGLE__PROTOBUF__FILE_DESCRIPTOR_SET__INIT;
  set.n_file = 1;
  set.file = files;
  uint8_t buf[256];
  size_t n = google__protobuf__file_descriptor_set__pack(&set, buf);
  e = (err){0};
  CHECK_EQ_INT(srv_reflection_create(buf, n, &r, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "missing.proto");
  CHECK(r == NULL);

  // With the import present it loads, and names only what it defines.
  Google__Protobuf__FileDescriptorProto dep = GOOGLE__PROTOBUF__FILE_DESCRIPTOR_PROTO__INIT;
  dep.name = "missing.proto";
  Google__Protobuf__FileDescriptorProto *files2[] = {&fd, &dep};
  set.n_file = 2;
  set.file = files2;
  n = google__protobuf__file_descriptor_set__pack(&set, buf);
  CHECK_EQ_INT(srv_reflection_create(buf, n, &r, &e), 0);
  if (r) {
    CHECK_EQ_INT(srv_reflection_service_count(r), 0);
    CHECK(srv_reflection_service_name(r, 0) == NULL);
    srv_reflection_destroy(r);
  }
}

int main(void) {
  srv_reflection *r = NULL;
  err e = {0};
  int rc = srv_reflection_create(inferd_protoset, inferd_protoset_len, &r, &e);
  CHECK_EQ_INT(rc, 0);
  if (rc != 0) {
    fprintf(stderr, "create: %s\n", e.msg);
    CHECK_DONE();
  }
  test_list_services(r);
  test_symbols(r);
  test_files(r);
  test_extensions_and_empty(r);
  test_v1alpha(r);
  test_garbage(r);
  srv_reflection_destroy(r);
  test_bad_sets();
  CHECK_DONE();
}
