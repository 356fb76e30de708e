// tests/bench/kernels/bench_qconv.c: an INT8 convolution against the FP32 one
// on the CPU, per layer shape: the FP32 path the CPU plan runs for Conv
// (engine/cpu/conv_dnnl.c: oneDNN, blocked layouts, plain NCHW in and out)
// against QLinearConv's fast path (engine/cpu/qconv_dnnl.c: oneDNN int8 with
// int32 sums, then k_requantize to UINT8), both with plain NCHW tensors at
// the edges as the plan hands them over. Full-range INT8 weights (what
// onnxruntime's quantizer writes) and 7-bit ones (reduce_range), since on a
// CPU without VNNI the former run as two convolutions (qconv_dnnl.c).
// Prints the fastest of 31 runs after 3 warm-ups, in ms, and the ratios (the
// fastest: the dev VM is shared, and contention only ever adds time).
//   OMP_NUM_THREADS=N bench_qconv
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/conv_dnnl.h"
#include "engine/cpu/qconv_dnnl.h"
#include "kernels/base/clock.h"
#include "kernels/k_ref.h"

#define RUNS 31

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct layer {
  const char *name;
  int64_t n, c, m, hw, k, stride, group;
} layer;

int main(void) {
  layer ls[] = {
      {"first 56x56 3x3 3->64 b4", 4, 3, 64, 56, 3, 1, 1},
      {"resnet 56x56 3x3 64->64", 1, 64, 64, 56, 3, 1, 1},
      {"resnet 28x28 3x3 128->128", 1, 128, 128, 28, 3, 1, 1},
      {"resnet 14x14 3x3 256->256", 1, 256, 256, 14, 3, 1, 1},
      {"resnet 7x7 3x3 512->512", 1, 512, 512, 7, 3, 1, 1},
      {"1x1 28x28 256->64", 1, 256, 64, 28, 1, 1, 1},
      {"batch 8 28x28 3x3 128->128", 8, 128, 128, 28, 3, 1, 1},
  };
  eng_dnnl_ctx *c = NULL;
  err e = {0};
  if (eng_dnnl_ctx_create(&c, &e)) return fprintf(stderr, "%s\n", e.msg), 1;
  printf("%-28s %9s %9s %9s %7s %7s\n", "layer", "fp32 ms", "int8 ms", "int8-7b", "x fp32", "x 7b");
  for (size_t li = 0; li < sizeof ls / sizeof ls[0]; li++) {
    layer *L = &ls[li];
    k_window g;
    memset(&g, 0, sizeof g);
    g.nsp = 2, g.n = L->n, g.c = L->c, g.m = L->m, g.group = L->group;
    for (int i = 0; i < 2; i++) {
      g.x[i] = L->hw, g.k[i] = L->k, g.stride[i] = L->stride, g.dil[i] = 1;
      g.pad_l[i] = g.pad_r[i] = L->k / 2;
      g.y[i] = (L->hw + 2 * (L->k / 2) - L->k) / L->stride + 1;
    }
    size_t nx = (size_t)(g.n * g.c * g.x[0] * g.x[1]), ny = (size_t)(g.n * g.m * g.y[0] * g.y[1]);
    size_t nw = (size_t)(g.m * g.c / g.group * g.k[0] * g.k[1]);
    float *xf = malloc(nx * 4), *wf = malloc(nw * 4), *yf = malloc(ny * 4), *bf = calloc((size_t)g.m, 4);
    uint8_t *xq = malloc(nx), *yq = malloc(ny);
    int8_t *wq = malloc(nw), *w7 = malloc(nw);
    int32_t *acc = malloc(ny * 4);
    float mul = 0.001f;
    for (size_t i = 0; i < nx; i++) xq[i] = (uint8_t)(rand() & 255), xf[i] = xq[i] / 255.0f;
    for (size_t i = 0; i < nw; i++) wq[i] = (int8_t)(rand() & 255), w7[i] = (int8_t)(wq[i] / 2), wf[i] = wq[i] / 128.0f;
    double t[3][RUNS];
    eng_dnnl_node *fn = NULL;
    eng_dnnl_qnode *qn = NULL, *q7 = NULL;
    int cl = 0;
    for (int r = -3; r < RUNS; r++) {
      uint64_t t0 = clock_mono_ns();
      if (eng_dnnl_run(c, &fn, ENG_DNNL_CONV, &g, wf, bf, NULL, NULL, yf, xf, &e)) return fprintf(stderr, "%s\n", e.msg), 1;
      uint64_t t1 = clock_mono_ns();
      if (eng_dnnl_qconv_run(c, &qn, &g, 0, 3, wq, acc, &cl, xq, &e)) return fprintf(stderr, "%s\n", e.msg), 1;
      (cl ? k_requantize_cl : k_requantize)(yq, K_U8, acc, NULL, &mul, 0, 5, (size_t)g.n, (size_t)g.m, (size_t)(g.y[0] * g.y[1]));
      uint64_t t2 = clock_mono_ns();
      if (eng_dnnl_qconv_run(c, &q7, &g, 0, 3, w7, acc, &cl, xq, &e)) return fprintf(stderr, "%s\n", e.msg), 1;
      (cl ? k_requantize_cl : k_requantize)(yq, K_U8, acc, NULL, &mul, 0, 5, (size_t)g.n, (size_t)g.m, (size_t)(g.y[0] * g.y[1]));
      uint64_t t3 = clock_mono_ns();
      if (r >= 0) t[0][r] = (t1 - t0) / 1e6, t[1][r] = (t2 - t1) / 1e6, t[2][r] = (t3 - t2) / 1e6;
    }
    for (int k = 0; k < 3; k++) qsort(t[k], RUNS, sizeof(double), cmp_d);
    double f = t[0][0], q = t[1][0], q7m = t[2][0];
    printf("%-28s %9.3f %9.3f %9.3f %7.2f %7.2f\n", L->name, f, q, q7m, f / q, f / q7m);
    eng_dnnl_node_destroy(fn);
    eng_dnnl_qnode_destroy(qn);
    eng_dnnl_qnode_destroy(q7);
    free(xf), free(wf), free(yf), free(bf), free(xq), free(yq), free(wq), free(w7), free(acc);
  }
  eng_dnnl_ctx_destroy(c);
  return 0;
}
