// fuzz_graph.c: libFuzzer driver for an ONNX model file, the bytes a model
// repository hands the server: the loader and its passes (engine/graph/graph.c,
// graph_pass*.c, attn.c), then the CPU plan for the shapes the graph
// declares (engine/cpu/plan.c: attribute parsing, shape inference, arena
// layout), the element-type probe the CUDA plan makes at create when some of
// those shapes are dynamic (engine/cpu/plan_probe.c: it infers with each
// unknown dim 1, then puts the plan back; its folds' buffers freed), and,
// when every input shape is concrete and small, one run on zeros, so the
// kernels see the shapes the planner accepted. (Dynamic shapes are not run:
// without planned shapes the arena's size is unknown before the run, and a
// fuzzed Pad asks for gigabytes.)
// eng_graph_load takes a path, so each input goes through a temporary file
// (in a directory of its own: external-data names resolve beside it and
// find nothing, as for a lone model file).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/graph/graph.h"
#include "engine/cpu/plan.h"
#include "engine/cpu/plan_internal.h"

#define RUN_MAX_BYTES (1u << 20)  // inputs and arena both under this: run the plan once

static char g_path[64];

static int write_model(const uint8_t *data, size_t size) {
  if (!g_path[0]) {
    char dir[] = "/tmp/inferd-fuzz-graph-XXXXXX";
    if (!mkdtemp(dir)) return -1;
    snprintf(g_path, sizeof g_path, "%s/model.onnx", dir);
  }
  FILE *f = fopen(g_path, "wb");
  if (!f) return -1;
  size_t n = size ? fwrite(data, 1, size, f) : 0;
  return fclose(f) == 0 && n == size ? 0 : -1;
}

// One run on zeros when every input's shape is declared and small.
static void run_once(const eng_graph *g, eng_plan *p) {
  size_t n_in = eng_graph_n_inputs(g), n_out = eng_graph_n_outputs(g), total = 0;
  if (eng_plan_arena_bytes(p) > RUN_MAX_BYTES) return;
  eng_tensor *in = calloc(n_in + 1, sizeof *in), *out = calloc(n_out + 1, sizeof *out);
  int ok = in && out;
  for (size_t i = 0; ok && i < n_in; i++) {
    const eng_io *io = eng_graph_input(g, i);
    in[i].dt = io->dt;
    in[i].ndims = io->ndims;
    size_t n = 1;
    for (int d = 0; ok && d < io->ndims; d++) {
      in[i].dims[d] = io->dims[d];
      if (io->dims[d] < 0 || (io->dims[d] && n > RUN_MAX_BYTES / (size_t)io->dims[d]))
        ok = 0;
      else
        n *= (size_t)io->dims[d];
    }
    if (!ok || dtype_size(io->dt) == 0 || n > RUN_MAX_BYTES / dtype_size(io->dt)) {
      ok = 0;
      break;
    }
    in[i].bytes = n * dtype_size(io->dt);
    total += in[i].bytes;
    if (total > RUN_MAX_BYTES || !(in[i].data = calloc(1, in[i].bytes ? in[i].bytes : 1))) ok = 0;
  }
  err e = {0};
  if (ok) (void)eng_plan_run(p, in, n_in, out, n_out, &e);
  for (size_t i = 0; in && i < n_in; i++) free(in[i].data);
  free(in);
  free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (write_model(data, size) != 0) return 0;
  eng_graph *g = NULL;
  err e = {0};
  if (eng_graph_load(g_path, &g, &e) != 0) return 0;
  eng_plan *p = NULL;
  if (eng_plan_create(g, 0, &p, &e) == 0) {
    eng_plan__probe_types(p);
    run_once(g, p);
    eng_plan_destroy(p);
  }
  eng_graph_destroy(g);
  return 0;
}
