// tests/bench/engine/bench_attn.c: the CPU plan of a transformer export with
// the attention pass on and off, side by side in one process: the two plans
// run in alternating rounds (so both see the same machine state) on the same
// inputs, token ids and an all-ones mask of the given sequence length (or
// pixels for image models), and the median time per batch of each is
// printed with their ratio.
//   bench_attn --model M.onnx [--seq 128] [--batch 1] [--rounds 15] [--iters 5]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/graph/graph.h"
#include "engine/cpu/plan.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  const char *model = NULL;
  int seq = 128, batch = 1, rounds = 15, iters = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--model")) model = argv[i + 1];
    else if (!strcmp(argv[i], "--seq")) seq = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--batch")) batch = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
  }
  if (!model || seq < 1 || batch < 1 || rounds < 1 || rounds > 1000 || iters < 1) {
    fprintf(stderr, "usage: bench_attn --model M.onnx [--seq 128] [--batch 1] [--rounds 15] [--iters 5]\n");
    return 2;
  }
  eng_graph *g[2] = {0};
  eng_plan *p[2] = {0};
  err e = {0};
  for (int k = 0; k < 2; k++) {
    eng_graph_opts o = {.no_fuse_attention = k == 1};
    if (eng_graph_load_opts(model, &o, &g[k], &e) || eng_plan_create(g[k], 0, &p[k], &e)) {
      fprintf(stderr, "%s: %s\n", model, e.msg);
      return 1;
    }
  }
  size_t n_in = eng_graph_n_inputs(g[0]);
  eng_tensor in[8];
  void *buf[8] = {0};
  for (size_t i = 0; i < n_in && i < 8; i++) {
    const eng_io *io = eng_graph_input(g[0], i);
    memset(&in[i], 0, sizeof in[i]);
    in[i].dt = io->dt;
    in[i].ndims = io->ndims;
    for (int d = 0; d < io->ndims; d++)
      in[i].dims[d] = io->dims[d] >= 0 ? io->dims[d] : d == 0 ? batch : seq;
    size_t n = (size_t)eng_numel(in[i].ndims, in[i].dims);
    buf[i] = calloc(n + 1, 8);
    in[i].data = buf[i];
    in[i].bytes = n * dtype_size(io->dt);
    for (size_t j = 0; j < n; j++) {
      if (io->dt == DT_INT64)
        ((int64_t *)buf[i])[j] = strstr(io->name, "mask") ? 1 : (int64_t)((j * 7 + 3) % 50);
      else if (io->dt == DT_FP32)
        ((float *)buf[i])[j] = (float)((j % 17) - 8) / 8.0f;
    }
  }
  eng_tensor out[8];
  double *t[2] = {malloc((size_t)rounds * sizeof(double)), malloc((size_t)rounds * sizeof(double))};
  for (int k = 0; k < 2; k++)  // warm: layouts, folds, libraries' threads
    for (int w = 0; w < 3; w++)
      if (eng_plan_run(p[k], in, n_in, out, eng_graph_n_outputs(g[k]), &e)) {
        fprintf(stderr, "run: %s\n", e.msg);
        return 1;
      }
  for (int r = 0; r < rounds; r++)
    for (int k = 0; k < 2; k++) {
      int kk = r % 2 ? 1 - k : k;  // alternate which goes first
      double t0 = now_s();
      for (int it = 0; it < iters; it++)
        if (eng_plan_run(p[kk], in, n_in, out, eng_graph_n_outputs(g[kk]), &e)) {
          fprintf(stderr, "run: %s\n", e.msg);
          return 1;
        }
      t[kk][r] = (now_s() - t0) / iters * 1e6;
    }
  qsort(t[0], (size_t)rounds, sizeof(double), cmp_d);
  qsort(t[1], (size_t)rounds, sizeof(double), cmp_d);
  double f = t[0][rounds / 2], u = t[1][rounds / 2];
  printf("{\"tool\":\"bench_attn\",\"model\":\"%s\",\"seq\":%d,\"batch\":%d,\"fused_nodes\":%zu,"
         "\"us_fused\":%.1f,\"us_unfused\":%.1f,\"unfused_over_fused\":%.3f}\n",
         model, seq, batch, eng_graph_n_attention(g[0]), f, u, u / f);
  for (int k = 0; k < 2; k++) {
    eng_plan_destroy(p[k]);
    eng_graph_destroy(g[k]);
  }
  for (size_t i = 0; i < 8; i++) free(buf[i]);
  free(t[0]), free(t[1]);
  return 0;
}
