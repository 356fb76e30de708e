// tests/unit/engine/test_qconv.c: the integer convolution's kernels.
// kernels/conv/k_qconv.c against the FP32 reference k_conv_ref on the same
// integers (x - x_zp and w - w_zp as floats: every sum here is below 2^24,
// so both are exact and must be equal); k_requantize against values worked
// by hand (ties, saturation, per-channel multipliers, bias); and the oneDNN
// int8 path (engine/cpu/qconv_dnnl.c) against k_conv_int_ref, exactly, over
// UINT8 and INT8 x, zero and non-zero zero points, groups, strides, pads,
// dilations, 1-D to 3-D, full-range INT8 weights, run twice per geometry
// and across batch sizes so the primitive cache is used; the oneDNN int8
// GEMM of QLinearMatMul (engine/cpu/qgemm_dnnl.c) against k_matmul_int.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine/cpu/qconv_dnnl.h"
#include "engine/cpu/qgemm_dnnl.h"
#include "kernels/conv/k_conv.h"

static uint32_t rng_state = 4242;
static uint32_t rnd(void) {
  rng_state = rng_state * 1664525u + 1013904223u;
  return rng_state >> 8;
}

typedef struct geo {
  int nsp;
  int64_t n, c, m, group, x[3], k[3], s[3], d[3], pl[3], pr[3];
} geo;

static k_window window_of(const geo *q) {
  k_window g;
  memset(&g, 0, sizeof g);
  g.nsp = q->nsp, g.n = q->n, g.c = q->c, g.m = q->m, g.group = q->group;
  for (int i = 0; i < q->nsp; i++) {
    g.x[i] = q->x[i], g.k[i] = q->k[i], g.stride[i] = q->s[i], g.dil[i] = q->d[i];
    g.pad_l[i] = q->pl[i], g.pad_r[i] = q->pr[i];
    g.y[i] = (q->x[i] + q->pl[i] + q->pr[i] - ((q->k[i] - 1) * q->d[i] + 1)) / q->s[i] + 1;
  }
  return g;
}

static size_t nx_of(const k_window *g) {
  size_t v = (size_t)(g->n * g->c);
  for (int i = 0; i < g->nsp; i++) v *= (size_t)g->x[i];
  return v;
}
static size_t ny_of(const k_window *g) {
  size_t v = (size_t)(g->n * g->m);
  for (int i = 0; i < g->nsp; i++) v *= (size_t)g->y[i];
  return v;
}
static size_t nw_of(const k_window *g) {
  size_t v = (size_t)(g->m * (g->c / g->group));
  for (int i = 0; i < g->nsp; i++) v *= (size_t)g->k[i];
  return v;
}

// k_conv_int_ref against k_conv_ref on the same integers.
static void ref_vs_float(const geo *q, k_elem xt, k_elem wt, int32_t xz, int wz_per_m) {
  k_window g = window_of(q);
  size_t nx = nx_of(&g), ny = ny_of(&g), nw = nw_of(&g), kpm = nw / (size_t)g.m;
  uint8_t *x = malloc(nx), *w = malloc(nw);
  int32_t *y = malloc(ny * 4), *wz = malloc((size_t)g.m * 4);
  float *xf = malloc(nx * 4), *wf = malloc(nw * 4), *yf = malloc(ny * 4);
  for (size_t i = 0; i < nx; i++) x[i] = (uint8_t)rnd();
  for (size_t i = 0; i < nw; i++) w[i] = (uint8_t)rnd();
  for (int64_t i = 0; i < g.m; i++) wz[i] = wt == K_I8 ? (int32_t)(int8_t)rnd() : (int32_t)(uint8_t)rnd();
  for (size_t i = 0; i < nx; i++) xf[i] = (float)((xt == K_I8 ? (int8_t)x[i] : (int32_t)x[i]) - xz);
  for (size_t i = 0; i < nw; i++)
    wf[i] = (float)((wt == K_I8 ? (int8_t)w[i] : (int32_t)w[i]) - wz[wz_per_m ? i / kpm : 0]);
  CHECK_EQ_INT(k_conv_int_ref(y, x, xt, xz, w, wt, wz, wz_per_m, &g), 0);
  k_conv_ref(yf, xf, wf, NULL, &g);
  size_t bad = 0;
  for (size_t i = 0; i < ny; i++) bad += (double)y[i] != (double)yf[i];
  CHECK_EQ_INT(bad, 0);
  free(x), free(w), free(y), free(wz), free(xf), free(wf), free(yf);
}

// The oneDNN int8 path against the reference, twice and at two batch sizes.
// narrow: weights in [-64, 64], which run as one convolution on any CPU
static void dnnl_vs_ref(eng_dnnl_ctx *c, eng_dnnl_qnode **node, const geo *q0, int x_signed, int32_t xz, int narrow) {
  for (int rep = 0; rep < 3; rep++) {
    geo q = *q0;
    q.n = rep == 1 ? q0->n + 2 : q0->n;
    k_window g = window_of(&q);
    size_t nx = nx_of(&g), ny = ny_of(&g), nw = nw_of(&g);
    uint8_t *x = malloc(nx);
    int8_t *w = malloc(nw);
    int32_t *y = malloc(ny * 4), *want = malloc(ny * 4);
    for (size_t i = 0; i < nx; i++) x[i] = (uint8_t)rnd();
    uint32_t seed = rng_state;
    rng_state = 99;  // the node's weights are constant: the same every run
    for (size_t i = 0; i < nw; i++) w[i] = narrow ? (int8_t)((int)(rnd() % 128) - 64) : (int8_t)rnd();
    w[0] = narrow ? -64 : -128, w[nw - 1] = narrow ? 64 : 127;
    rng_state = seed;
    err e = {0};
    int rc = eng_dnnl_qconv_run(c, node, &g, x_signed, xz, w, y, NULL, x, &e);
    if (rc) fprintf(stderr, "oneDNN: %s\n", e.msg);
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(k_conv_int_ref(want, x, x_signed ? K_I8 : K_U8, xz, w, K_I8, NULL, 0, &g), 0);
    size_t bad = 0, first = ny;
    for (size_t i = 0; i < ny; i++)
      if (y[i] != want[i]) bad++, first = first < ny ? first : i;
    if (bad) fprintf(stderr, "  nsp %d c %lld m %lld group %lld signed %d zp %d narrow %d: %zu of %zu differ (first %zu: %d vs %d)\n",
                     q.nsp, (long long)q.c, (long long)q.m, (long long)q.group, x_signed, xz, narrow, bad, ny, first,
                     y[first], want[first]);
    CHECK_EQ_INT(bad, 0);
    // the same run leaving the sums channels-last where the primitive has them so
    int cl = -1;
    CHECK_EQ_INT(eng_dnnl_qconv_run(c, node, &g, x_signed, xz, w, y, &cl, x, &e), 0);
    CHECK(cl == 0 || cl == 1);
    size_t sp = ny / (size_t)(g.n * g.m);
    bad = 0;
    for (size_t i = 0; i < ny; i++) {  // i: [n, m, sp] in want
      size_t nn = i / ((size_t)g.m * sp), mm = i / sp % (size_t)g.m, ss = i % sp;
      bad += (cl ? y[(nn * sp + ss) * (size_t)g.m + mm] : y[i]) != want[i];
    }
    CHECK_EQ_INT(bad, 0);
    if (cl) {  // and k_requantize_cl of those equals k_requantize of the plain sums
      uint8_t *q1 = malloc(ny), *q2 = malloc(ny);
      float mul = 0.002f;
      CHECK_EQ_INT(k_requantize_cl(q1, K_U8, y, NULL, &mul, 0, 7, (size_t)g.n, (size_t)g.m, sp), 0);
      CHECK_EQ_INT(k_requantize(q2, K_U8, want, NULL, &mul, 0, 7, (size_t)g.n, (size_t)g.m, sp), 0);
      CHECK(memcmp(q1, q2, ny) == 0);
      free(q1), free(q2);
    }
    free(x), free(w), free(y), free(want);
  }
}

static void test_requantize(void) {
  int32_t acc[6] = {10, 11, -10, 1000, -1000, 3};
  int32_t b[2] = {1, -1};
  float mul[2] = {0.5f, 0.25f};
  uint8_t y[6];
  // [outer 1, len 2, inner 3]: channel 0 (b 1, mul 0.5): 5.5 -> 6, 6 -> 6, -4.5 -> -4 (ties to even)
  // channel 1 (b -1, mul 0.25): 249.75 -> 250, -250.25 -> -250, 0.5 -> 0; + y_zp 3, saturated to [0, 255]
  CHECK_EQ_INT(k_requantize(y, K_U8, acc, b, mul, 1, 3, 1, 2, 3), 0);
  int want[6] = {9, 9, 0, 253, 0, 3};
  for (int i = 0; i < 6; i++) CHECK_EQ_INT(y[i], want[i]);
  int8_t s[6];
  CHECK_EQ_INT(k_requantize(s, K_I8, acc, NULL, mul, 0, -1, 2, 3, 1), 0);  // one multiplier 0.5
  int want_s[6] = {4, 5, -6, 127, -128, 1};  // 5 -1, 5.5 -> 6 -1, -5 -1, saturated, saturated, 1.5 -> 2 -1
  for (int i = 0; i < 6; i++) CHECK_EQ_INT(s[i], want_s[i]);
  CHECK_EQ_INT(k_requantize(s, K_I32, acc, NULL, mul, 0, 0, 1, 1, 6), -1);
}

// eng_dnnl_qgemm against k_matmul_int: UINT8 and INT8 a, zero points, full-range and 7-bit b.
static void test_qgemm(void) {
  size_t shapes[][3] = {{1, 7, 5}, {3, 64, 33}, {17, 300, 48}, {4, 1, 9}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int sg = 0; sg < 2; sg++)
      for (int narrow = 0; narrow < 2; narrow++) {
        size_t m = shapes[s][0], k = shapes[s][1], n = shapes[s][2];
        uint8_t *a = malloc(m * k);
        int8_t *b = malloc(k * n);
        int32_t *c = malloc(m * n * 4), *want = malloc(m * n * 4);
        for (size_t i = 0; i < m * k; i++) a[i] = (uint8_t)rnd();
        for (size_t i = 0; i < k * n; i++) b[i] = narrow ? (int8_t)((int)(rnd() % 128) - 64) : (int8_t)rnd();
        b[0] = narrow ? 64 : -128;
        int32_t zp = sg ? -7 : 200;
        err e = {0};
        CHECK_EQ_INT(eng_dnnl_qgemm(c, a, sg, zp, b, m, k, n, &e), 0);
        CHECK_EQ_INT(k_matmul_int(want, K_I32, a, sg ? K_I8 : K_U8, b, K_I8, zp, 0, NULL, 1, 0, 0, m, k, n, 0, NULL, 0), 0);
        size_t bad = 0;
        for (size_t i = 0; i < m * n; i++) bad += c[i] != want[i];
        if (bad) fprintf(stderr, "  qgemm %zux%zux%zu signed %d narrow %d: %zu differ\n", m, k, n, sg, narrow, bad);
        CHECK_EQ_INT(bad, 0);
        free(a), free(b), free(c), free(want);
      }
}

int main(void) {
  test_requantize();
  test_qgemm();
  geo cases[] = {
      {2, 1, 3, 8, 1, {9, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
      {2, 2, 16, 32, 1, {8, 8}, {3, 3}, {2, 2}, {1, 1}, {1, 0}, {1, 1}},
      {2, 1, 16, 16, 16, {6, 6}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},  // depthwise
      {2, 1, 8, 12, 4, {7, 5}, {3, 1}, {1, 2}, {2, 1}, {2, 0}, {2, 0}},     // groups, dilation
      {1, 2, 5, 7, 1, {11}, {4}, {3}, {1}, {2}, {1}},
      {3, 1, 4, 6, 2, {4, 5, 3}, {2, 3, 1}, {1, 1, 1}, {1, 1, 1}, {0, 1, 0}, {1, 1, 0}},
      {2, 1, 64, 64, 1, {5, 5}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}},  // 1x1, full-range sums
  };
  int nc = (int)(sizeof cases / sizeof cases[0]);
  k_elem ts[2] = {K_U8, K_I8};
  for (int i = 0; i < nc; i++)
    for (int a = 0; a < 2; a++)
      for (int b = 0; b < 2; b++) ref_vs_float(&cases[i], ts[a], ts[b], a ? -3 : 128, (i + a + b) % 2);
  eng_dnnl_ctx *c = NULL;
  err e = {0};
  CHECK_EQ_INT(eng_dnnl_ctx_create(&c, &e), 0);
  for (int i = 0; c && i < nc; i++)
    for (int sg = 0; sg < 2; sg++)
      for (int z = 0; z < 2; z++)
        for (int narrow = 0; narrow < 2; narrow++) {
          eng_dnnl_qnode *node = NULL;
          dnnl_vs_ref(c, &node, &cases[i], sg, z ? (sg ? -5 : 131) : 0, narrow);
          eng_dnnl_qnode_destroy(node);
        }
  eng_dnnl_ctx_destroy(c);
  CHECK_DONE();
}
