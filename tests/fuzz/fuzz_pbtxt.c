// fuzz_pbtxt.c: libFuzzer driver for a model's config.pbtxt, the bytes a
// repository (or a load request's config override) hands the server: the
// text-format parser (engine/repo/pbtxt.c), then what load does with the result
// (engine/repo/config.c: auto-complete against a fixed graph IO, kinds, validate).
// Every input must end in success or an error value; a crash, leak or UB
// report is a finding.
#include <stdint.h>
#include <string.h>

#include "engine/repo/config.h"
#include "engine/repo/pbtxt.h"

// the graph IO the config is completed and validated against: the same
// model as tests/fuzz/repo/fuzz (x FP32 [-1,4], ids INT64 [-1,-1] -> y, n)
static void io(eng_io *e, const char *name, dtype dt, int64_t d1) {
  memset(e, 0, sizeof *e);
  strcpy(e->name, name);
  e->dt = dt;
  e->ndims = 2;
  e->dims[0] = -1;
  e->dims[1] = d1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ProtobufCMessage *m = NULL;
  err e = {0};
  if (pbtxt_parse(&inference__model_config__descriptor, (const char *)data, size, "fuzz.pbtxt", &m, &e) != 0) return 0;
  eng_io in[2], out[2];
  io(&in[0], "x", DT_FP32, 4);
  io(&in[1], "ids", DT_INT64, -1);
  io(&out[0], "y", DT_FP32, 4);
  io(&out[1], "n", DT_FP32, 1);
  Inference__ModelConfig *cfg = (Inference__ModelConfig *)m;
  // both auto-complete modes the server has (default and --disable-auto-complete-config)
  int dmb = size && (data[0] & 1) ? CONFIG_NO_AUTO_COMPLETE : CONFIG_DEFAULT_MAX_BATCH_SIZE;
  if (config_complete(cfg, 1, in, 2, out, 2, dmb, &e) == 0) {
    config_resolve_kinds(cfg, size && (data[0] & 2) ? 1 : 0, 0);
    (void)config_validate(cfg, in, 2, out, 2, &e);
  }
  config_free(cfg);
  return 0;
}
