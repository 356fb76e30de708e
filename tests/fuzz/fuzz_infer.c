// fuzz_infer.c: libFuzzer driver for the bytes of a ModelInferRequest (a
// unary ModelInfer or one ModelStreamInfer message), through the function
// the server runs on them before the scheduler (srv_infer_prepare in
// server/core/infer.c and infer_validate.c: no NUL in any string
// (server/grpc/wire.c), protobuf-c unpack, UTF-8 of every string, model
// lookup, shapes, datatypes, byte sizes, typed contents, parameters,
// shared-memory windows), without gRPC. The registry holds tests/fuzz/repo (model "fuzz",
// see gen_seeds.py) and one registered shared-memory region "r0" of 4096
// bytes, so the seeds in corpus/infer reach every branch. Each input is also
// cut into pieces and prepared that way (srv_infer_prepare_pieces): the
// answers must agree.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/repo/config.h"
#include "fixture.h"
#include "server/core/request.h"
#include "server/core/server.h"

#define SHM_BYTES 4096

static srv_server g_server;  // the driver's fixture: set once, read by every input
static int g_verbose;        // FUZZ_VERBOSE=1: say what each input got (checking seeds)

static int fail(const char *what, const err *e) {
  fprintf(stderr, "fuzz_infer: %s: %s\n", what, e->msg);
  abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  g_verbose = getenv("FUZZ_VERBOSE") != NULL;
  err e = {0};
  srv_registry_opts ro = fz_registry_opts();
  if (srv_registry_load(INFERD_FUZZ_REPO, &ro, &g_server.reg, &e) != 0)
    fail("loading " INFERD_FUZZ_REPO, &e);
  if (srv_shm_create(&g_server.shm, 0, &e) != 0) fail("srv_shm_create", &e);
  char key[64];
  snprintf(key, sizeof key, "/inferd-fuzz-%d", (int)getpid());
  int fd = shm_open(key, O_CREAT | O_RDWR | O_EXCL, 0600);
  if (fd < 0 || ftruncate(fd, SHM_BYTES) != 0) {
    perror("fuzz_infer: shm_open");
    abort();
  }
  close(fd);
  int rc = srv_shm_register(g_server.shm, "r0", key, 0, SHM_BYTES, &e);
  shm_unlink(key);  // mapped now; nothing is left behind in /dev/shm
  if (rc != 0) fail("srv_shm_register", &e);
  return 0;
}

// The same bytes as a message received in pieces (srv_infer_prepare_pieces,
// server/core/infer_pieces.c), cut at lengths drawn from the bytes
// themselves (1 to 64): it must give the contiguous path's answer, code and
// words, on every input (a differential check of the walk across pieces).
static int prepare_in_pieces(const uint8_t *data, size_t size, err *e) {
  srv_piece *v = malloc((size ? size : 1) * sizeof *v);
  srv_request *r = calloc(1, sizeof *r);
  int rc = ERR_RESOURCE_EXHAUSTED;
  if (v && r) {
    size_t n = 0;
    uint32_t h = 2166136261u;
    for (size_t o = 0; o < size; n++) {
      h = (h ^ data[o]) * 16777619u;
      size_t k = 1 + (h >> 7) % 64;
      if (k > size - o) k = size - o;
      v[n] = (srv_piece){data + o, k};
      o += k;
    }
    rc = srv_infer_prepare_pieces(&g_server, r, v, n, size, e);
  }
  srv_infer_request_free(r);
  free(v);
  return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  srv_request *r = calloc(1, sizeof *r);
  if (!r) return 0;
  err e = {0}, ep = {0};
  int rc = srv_infer_prepare(&g_server, r, data, size, &e);
  if (g_verbose) fprintf(stderr, "fuzz_infer: %s\n", rc ? e.msg : "valid");
  srv_infer_request_free(r);
  int rp = prepare_in_pieces(data, size, &ep);
  if (rp != ERR_RESOURCE_EXHAUSTED && (rp != rc || (rc && strcmp(e.msg, ep.msg) != 0))) {
    fprintf(stderr, "fuzz_infer: in one run %d '%s', in pieces %d '%s'\n", rc, rc ? e.msg : "", rp,
            rp ? ep.msg : "");
    abort();
  }
  return 0;
}
