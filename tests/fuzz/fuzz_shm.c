// fuzz_shm.c: libFuzzer driver for the system shared-memory requests:
// SystemSharedMemoryRegister / Unregister / Status, each run by the gRPC
// method's own handler (srv_methods in server/grpc/rpc.c, as a local call: the
// protobuf decode, the validation in server/sec/shm.c, the mapping and the
// answer), interleaved with ModelInfer requests (srv_infer_prepare) that
// name the regions, so a register, an unregister and a use of the same name
// meet in one input.
//
// Input: records of [op][len lo][len hi][len bytes]; op % 4 picks Register,
// Unregister, Status or ModelInfer (the bytes are that request's message).
// Every answer must come exactly once, parse as the method's response, and
// carry only UTF-8 strings (proto3 string fields; a client cannot parse
// anything else). Each input starts from no registered region.
//
// Keys stay in a private namespace: a Register that parses has its key
// rewritten to /inferd-fz<pid>-<key without leading '/'> (and repacked), so a
// hostile key can only name this process's own objects; shm_open in the
// server never creates objects, and the driver's own objects (made once at
// start, "a" 4096 bytes, "b" 1 byte, "big" 3 pages, "empty" 0 bytes) are
// unlinked at exit, and those of an earlier run that crashed at the next start. An unparsable Register goes to the handler as it is.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/repo/config.h"
#include "fixture.h"
#include "kernels/base/utf8.h"
#include "server/obs/log.h"
#include "server/core/request.h"
#include "server/core/server.h"

static srv_server g_server;  // the driver's fixture: set once, read by every input
static srv_method g_methods[32];
static size_t g_n_methods;
static char g_prefix[64];  // "/inferd-fz<pid>-"
static int g_verbose;      // FUZZ_VERBOSE=1: say what each request got (checking seeds)

static const struct {
  const char *name;
  off_t size;
} k_objects[] = {{"a", 4096}, {"b", 1}, {"big", 3 * 4096}, {"empty", 0}};

#define SVC "/inference.GRPCInferenceService/"

static void unlink_objects(void) {
  char key[128];
  for (size_t i = 0; i < sizeof k_objects / sizeof k_objects[0]; i++) {
    snprintf(key, sizeof key, "%s%s", g_prefix, k_objects[i].name);
    shm_unlink(key);
  }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  g_verbose = getenv("FUZZ_VERBOSE") != NULL;
  srv_log_set_level(SRV_LOG_WARN);  // a register logs at INFO: millions of lines otherwise
  err e = {0};
  srv_registry_opts ro = fz_registry_opts();
  if (srv_registry_load(INFERD_FUZZ_REPO, &ro, &g_server.reg, &e) != 0 ||
      srv_shm_create(&g_server.shm, 0, &e) != 0) {
    fprintf(stderr, "fuzz_shm: setup: %s\n", e.msg);
    abort();
  }
  g_n_methods = srv_methods(&g_server, g_methods, sizeof g_methods / sizeof g_methods[0]);
  fz_shm_sweep("inferd-fz");  // what a crashed run left (its atexit never ran)
  snprintf(g_prefix, sizeof g_prefix, "/inferd-fz%d-", (int)getpid());
  atexit(unlink_objects);
  for (size_t i = 0; i < sizeof k_objects / sizeof k_objects[0]; i++) {
    char key[128];
    snprintf(key, sizeof key, "%s%s", g_prefix, k_objects[i].name);
    int fd = shm_open(key, O_CREAT | O_RDWR | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, k_objects[i].size) != 0) {
      perror("fuzz_shm: shm_open");
      abort();
    }
    close(fd);
  }
  return 0;
}

static const srv_method *method(const char *path) {
  for (size_t i = 0; i < g_n_methods; i++)
    if (strcmp(g_methods[i].path, path) == 0) return &g_methods[i];
  fprintf(stderr, "fuzz_shm: no method %s\n", path);
  abort();
}

typedef struct answer {
  int calls, code;
  uint8_t *resp;
  size_t len;
} answer;

static void done(void *arg, uint8_t *resp, size_t len, int code, const char *msg) {
  answer *a = arg;
  a->calls++;
  a->code = code;
  a->resp = resp;
  a->len = len;
  if (g_verbose) fprintf(stderr, "fuzz_shm:   -> %d %s\n", code, msg ? msg : "");
}

static int utf8(const char *s) { return !s || utf8_valid(s, strlen(s)); }

// Checks the answer of one local call and frees it.
static void check(const char *path, answer *a, const ProtobufCMessageDescriptor *d) {
  if (a->calls != 1) {
    fprintf(stderr, "fuzz_shm: %s answered %d times\n", path, a->calls);
    abort();
  }
  if (a->code == 0) {
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, a->len, a->resp);
    if (!m) {
      fprintf(stderr, "fuzz_shm: %s: the answer does not parse as %s\n", path, d->name);
      abort();
    }
    if (d == &inference__system_shared_memory_status_response__descriptor) {
      Inference__SystemSharedMemoryStatusResponse *r = (Inference__SystemSharedMemoryStatusResponse *)m;
      for (size_t i = 0; i < r->n_regions; i++) {
        const Inference__SystemSharedMemoryStatusResponse__RegionStatus *st = r->regions[i]->value;
        if (!utf8(r->regions[i]->key) || (st && (!utf8(st->name) || !utf8(st->key)))) {
          fprintf(stderr, "fuzz_shm: Status answered a region name or key that is not UTF-8\n");
          abort();
        }
      }
    }
    protobuf_c_message_free_unpacked(m, NULL);
  }
  free(a->resp);
}

static void run(const char *path, const uint8_t *req, size_t len, const ProtobufCMessageDescriptor *d) {
  answer a = {0};
  srv_call *call = srv_call_create_local(path, done, &a);
  if (!call) return;
  method(path)->unary(&g_server, call, req, len);  // the shm handlers answer before they return
  check(path, &a, d);
}

// A Register whose key is moved into the driver's namespace.
static void do_register(const uint8_t *req, size_t len) {
  const char *path = SVC "SystemSharedMemoryRegister";
  const ProtobufCMessageDescriptor *rd = &inference__system_shared_memory_register_response__descriptor;
  Inference__SystemSharedMemoryRegisterRequest *q = inference__system_shared_memory_register_request__unpack(NULL, len, req);
  if (!q || !q->key || !*q->key) {
    if (q) inference__system_shared_memory_register_request__free_unpacked(q, NULL);
    return run(path, req, len, rd);
  }
  const char *k = q->key;
  while (*k == '/') k++;
  size_t kl = strlen(g_prefix) + strlen(k) + 1;
  char *key = malloc(kl);
  if (key) {
    snprintf(key, kl, "%s%s", g_prefix, k);
    char *orig = q->key;
    q->key = key;
    size_t n = inference__system_shared_memory_register_request__get_packed_size(q);
    uint8_t *buf = malloc(n ? n : 1);
    if (buf) {
      inference__system_shared_memory_register_request__pack(q, buf);
      run(path, buf, n, rd);
      free(buf);
    }
    q->key = orig;
    free(key);
  }
  inference__system_shared_memory_register_request__free_unpacked(q, NULL);
}

static void do_infer(const uint8_t *req, size_t len) {
  srv_request *r = calloc(1, sizeof *r);
  if (!r) return;
  err e = {0};
  int rc = srv_infer_prepare(&g_server, r, req, len, &e);
  if (g_verbose) fprintf(stderr, "fuzz_shm:   -> infer %s\n", rc ? e.msg : "valid");
  srv_infer_request_free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  size_t off = 0;
  while (size - off >= 3) {
    int op = data[off] % 4;
    size_t n = (size_t)data[off + 1] | (size_t)data[off + 2] << 8;
    off += 3;
    if (n > size - off) n = size - off;
    const uint8_t *msg = data + off;
    off += n;
    if (g_verbose) fprintf(stderr, "fuzz_shm: op %d, %zu bytes\n", op, n);
    switch (op) {
      case 0: do_register(msg, n); break;
      case 1: run(SVC "SystemSharedMemoryUnregister", msg, n,
                  &inference__system_shared_memory_unregister_response__descriptor); break;
      case 2: run(SVC "SystemSharedMemoryStatus", msg, n,
                  &inference__system_shared_memory_status_response__descriptor); break;
      default: do_infer(msg, n); break;
    }
  }
  srv_shm_unregister(g_server.shm, NULL);  // the next input starts from none
  return 0;
}
