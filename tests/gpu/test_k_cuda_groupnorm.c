// Tests k_group_norm_cuda (kernels/norm/k_norm.cu: GroupNormalization and
// InstanceNormalization) against k_group_norm (kernels/norm/k_norm.c).
// FP32: rtol 1e-5, atol 1e-6 (both sum in double, two-pass; only the
// summation order differs). FP16 and BF16: the inputs rounded to the storage
// type, the reference run on the widened values; statistics in float, each
// output rounded once: FP16 rtol 1e-3 (half an ulp is 2^-11 relative),
// BF16 rtol 8e-3 (2^-8), atol 1e-4 / 1e-3 for outputs near 0 where the bias
// cancels the normalised value.
// Cases: each of the three paths the launcher picks (a warp per group for
// groups up to 1024 elements, a block per group, groups cut into chunks
// when few and long) through shapes that select them, and each path forced
// (k_group_norm__path_cuda) on shapes the others would take; per-channel and
// per-group scale and bias; InstanceNormalization (groups == c); groups of
// one element (variance 0); uneven chunks; the chunk-sized shape without
// workspace (a block per group); in place; a large common offset (mean >>
// spread); then the argument checks.
#include "test_k_cuda_util.h"

typedef struct gn_case {
  size_t n, c, groups, spatial;
  int per_group;
  float offset;  // inputs drawn from [offset - 2, offset + 2)
  int in_place;
  int path;   // -1: k_group_norm_cuda's choice; 0, 1, 2: forced
  int no_ws;  // k_group_norm_cuda with no workspace
} gn_case;

// float -> bfloat16 bits, round to nearest even (finite values only here)
static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// The values of x in dt's storage: the bytes to upload (NULL for FP32: x's own), x rewritten to what they stand for.
static void *to_storage(float *x, size_t n, dtype dt) {
  if (dt == DT_FP32) return NULL;
  uint16_t *h = tk_xmalloc((n ? n : 1) * 2);
  if (dt == DT_FP16) {
    k_f32_to_f16(h, x, n);
    k_f16_to_f32(x, h, n);
  } else {
    for (size_t i = 0; i < n; i++) h[i] = to_bf16(x[i]), x[i] = from_bf16(h[i]);
  }
  return h;
}

static void from_storage(float *y, const void *d, size_t n, dtype dt) {
  if (dt == DT_FP32) {
    tk_from_dev(y, d, n * 4);
    return;
  }
  uint16_t *h = tk_xmalloc((n ? n : 1) * 2);
  tk_from_dev(h, d, n * 2);
  if (dt == DT_FP16)
    k_f16_to_f32(y, h, n);
  else
    for (size_t i = 0; i < n; i++) y[i] = from_bf16(h[i]);
  free(h);
}

static void *upload(float *x, size_t n, dtype dt) {
  void *h = to_storage(x, n, dt);
  void *d = tk_to_dev(h ? h : (void *)x, n * dtype_size(dt));
  free(h);
  return d;
}

static void group_run(tk_rng *r, const gn_case *c, dtype dt) {
  size_t n = c->n * c->c * c->spatial, k = c->per_group ? c->groups : c->c;
  float *x = tk_xmalloc(n * 4), *want = tk_xmalloc(n * 4), *got = tk_xmalloc(n * 4);
  float *scale = tk_xmalloc(k * 4), *bias = tk_xmalloc(k * 4);
  tk_fill(r, x, n, c->offset - 2.0f, c->offset + 2.0f);
  tk_fill(r, scale, k, 0.5f, 1.5f);
  tk_fill(r, bias, k, -1.0f, 1.0f);
  void *dx = upload(x, n, dt), *ds = upload(scale, k, dt), *db = upload(bias, k, dt);  // x etc. now as stored
  const float eps = 1e-5f;
  k_group_norm(want, x, scale, bias, c->n, c->c, c->groups, c->spatial, c->per_group, eps);
  void *dy = c->in_place ? dx : tk_dev_alloc(n * dtype_size(dt));
  size_t ws_bytes = k_group_norm_cuda_ws(c->n, c->c, c->groups, c->spatial);
  if (c->path == 2 && ws_bytes == 0) ws_bytes = 32 * c->n * c->groups;
  if (c->no_ws) ws_bytes = 0;
  void *ws = ws_bytes ? tk_dev_alloc(ws_bytes) : NULL;
  if (c->path < 0)
    TK_OK(k_group_norm_cuda(dy, dx, ds, db, dt, c->n, c->c, c->groups, c->spatial, c->per_group, eps, ws, ws_bytes,
                            NULL, TK_E));
  else
    TK_OK(k_group_norm__path_cuda(dy, dx, ds, db, dt, c->n, c->c, c->groups, c->spatial, c->per_group, eps, ws,
                                  ws_bytes, c->path, NULL, TK_E));
  from_storage(got, dy, n, dt);
  char what[192];
  snprintf(what, sizeof what, "group_norm %s [%zu,%zu,%zu] groups %zu%s offset %g path %d%s%s (ws %zu)",
           dtype_wire_name(dt), c->n, c->c, c->spatial, c->groups, c->per_group ? " per group" : "", (double)c->offset,
           c->path, c->in_place ? " in place" : "", c->no_ws ? " no ws" : "", ws_bytes);
  if (dt == DT_FP32)
    tk_compare(what, got, want, n, 1e-5, 1e-6);
  else if (dt == DT_FP16)
    tk_compare(what, got, want, n, 1e-3, 1e-4);
  else
    tk_compare(what, got, want, n, 8e-3, 1e-3);
  if (!c->in_place) TK_CUDA(cudaFree(dy));
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(ds));
  TK_CUDA(cudaFree(db));
  if (ws) TK_CUDA(cudaFree(ws));
  free(x), free(want), free(got), free(scale), free(bias);
}

// Shapes [n, c, spatial] and groups: the warp path (InstanceNorm on a 7x7 map
// x 64 channels x 8: 512 groups of 49; one-element groups; 1024 exactly),
// the block path (512 groups of 1100; 2 groups of 4000: too short to cut),
// the chunked path (a diffusion UNet's 32 groups of 10 x 64x64 at batch 2:
// 10 chunks each; one group of 8 x 131072: 64 chunks; 3 groups of 70001: 17
// uneven chunks; 16 groups of 16384 per-group scaled: 4 chunks), and the
// 131072 group again with no workspace (a block for it).
static const gn_case auto_cases[] = {
    {2, 3, 3, 5, 0, 0, 0, -1, 0},       {8, 64, 64, 49, 0, 0, 0, -1, 0},    {1, 1, 1, 1, 0, 0, 0, -1, 0},
    {4, 5, 5, 1, 0, 0, 0, -1, 0},       {3, 6, 2, 100, 0, 0, 0, -1, 0},     {3, 6, 2, 100, 1, 0, 0, -1, 0},
    {2, 4, 1, 256, 0, 0, 0, -1, 0},     {16, 32, 32, 1100, 0, 0, 0, -1, 0}, {1, 4, 2, 2000, 1, 0, 0, -1, 0},
    {2, 320, 32, 4096, 0, 0, 0, -1, 0}, {1, 8, 1, 131072, 0, 0, 0, -1, 0},  {1, 3, 3, 70001, 0, 0, 0, -1, 0},
    {2, 64, 8, 2048, 1, 0, 0, -1, 0},   {1, 8, 1, 131072, 0, 0, 0, -1, 1},
};

// Each path forced, in place, with large offsets.
static const gn_case extra_cases[] = {
    {2, 6, 3, 33, 0, 0, 0, 0, 0},
    {2, 6, 3, 33, 0, 0, 0, 1, 0},
    {2, 6, 3, 33, 0, 0, 0, 2, 0},
    {2, 6, 3, 33, 1, 0, 0, 2, 0},
    {3, 4, 2, 5000, 0, 0, 0, 0, 0},
    {1, 2, 1, 3, 0, 0, 0, 2, 0},
    {2, 320, 32, 4096, 0, 0, 0, 1, 0},
    {8, 64, 64, 49, 0, 0, 1, -1, 0},
    {16, 32, 32, 1100, 0, 0, 1, -1, 0},
    {2, 320, 32, 4096, 1, 0, 1, -1, 0},
    {8, 64, 64, 49, 0, 1000.0f, 0, -1, 0},
    {2, 320, 32, 4096, 0, 1000.0f, 0, -1, 0},
    {16, 32, 32, 1100, 0, -300.0f, 0, -1, 0},
};

static void test_group_norm(dtype dt) {
  tk_rng r = {dt == DT_FP32 ? 1357u : dt == DT_FP16 ? 2468u : 3579u};
  for (size_t i = 0; i < sizeof auto_cases / sizeof auto_cases[0]; i++) group_run(&r, &auto_cases[i], dt);
  for (size_t i = 0; i < sizeof extra_cases / sizeof extra_cases[0]; i++) {
    gn_case c = extra_cases[i];
    if (dt != DT_FP32 && c.offset != 0.0f) c.offset = c.offset > 0 ? 100.0f : -30.0f;  // where 16 bits keep a spread
    group_run(&r, &c, dt);
  }
}

// The workspace the launcher asks for: none where a warp or a block per group
// fills the GPU, 16 bytes per group and chunk where groups are cut.
static void test_ws(void) {
  CHECK_EQ_INT((int)k_group_norm_cuda_ws(8, 64, 64, 49), 0);
  CHECK_EQ_INT((int)k_group_norm_cuda_ws(16, 32, 32, 1100), 0);
  CHECK_EQ_INT((int)k_group_norm_cuda_ws(1, 4, 2, 2000), 0);
  CHECK_EQ_INT((int)k_group_norm_cuda_ws(2, 320, 32, 4096), 64 * 10 * 16);  // chunks of 4096 at least
  CHECK_EQ_INT((int)k_group_norm_cuda_ws(1, 8, 1, 131072), 64 * 16);  // K_GN_MAX_SPLITS chunks
  CHECK_EQ_INT((int)k_group_norm_cuda_ws(1, 3, 3, 70001), 3 * 17 * 16);
  CHECK_EQ_INT((int)k_group_norm_cuda_ws(1, 6, 4, 100), 0);  // 6 channels in 4 groups: nothing to run
  CHECK_EQ_INT((int)k_group_norm_cuda_ws(1, 6, 0, 100), 0);
}

static void test_errors(void) {
  err e = {0};
  float *p = (float *)16;
  CHECK_EQ_INT(k_group_norm_cuda(NULL, NULL, NULL, NULL, DT_FP32, 0, 4, 2, 5, 0, 1e-5f, NULL, 0, NULL, &e), 0);
  CHECK_EQ_INT(k_group_norm_cuda(p, p, p, p, DT_FP32, 1, 6, 4, 5, 0, 1e-5f, NULL, 0, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "6 channels do not split into 4 groups");
  CHECK_EQ_INT(k_group_norm_cuda(p, p, p, p, DT_FP32, 1, 6, 0, 5, 0, 1e-5f, NULL, 0, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_group_norm_cuda");
  CHECK_EQ_INT(k_group_norm_cuda(p, p, p, p, DT_FP32, 1, 6, 3, 5, 0, -1.0f, NULL, 0, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "epsilon");
  CHECK_EQ_INT(k_group_norm_cuda(p, p, p, NULL, DT_FP16, 1, 6, 3, 5, 0, 1e-5f, NULL, 0, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "NULL pointer");
  CHECK_EQ_INT(k_group_norm_cuda(p, p, p, p, DT_INT64, 1, 6, 3, 5, 0, 1e-5f, NULL, 0, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "FP32, FP16 or BF16");
  CHECK_EQ_INT(k_group_norm_cuda(p, p, p, p, DT_FP32, SIZE_MAX, 6, 3, 5, 0, 1e-5f, NULL, 0, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "overflow");
  CHECK_EQ_INT(k_group_norm__path_cuda(p, p, p, p, DT_FP32, 1, 6, 3, 5, 0, 1e-5f, NULL, 0, 3, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "path 3");
  CHECK_EQ_INT(k_group_norm__path_cuda(p, p, p, p, DT_FP32, 1, 6, 3, 5, 0, 1e-5f, p, 16, 2, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "workspace");
}

// Timing, printed, never asserted: each path on shapes from vision models
// (InstanceNorm on a style-transfer network's [1, 128, 64x64] maps and a
// ResNet's [32, 64, 56x56]; GroupNorm(32) in a diffusion UNet at [2, 320,
// 64x64] and [2, 1280, 8x8]), FP16 and FP32, as the effective bandwidth
// (one read and one write of x).
static void bench_one(dtype dt, size_t n, size_t c, size_t groups, size_t spatial, int path) {
  size_t elems = n * c * spatial, esz = dtype_size(dt);
  void *x = tk_dev_alloc(elems * esz), *y = tk_dev_alloc(elems * esz);
  void *sc = tk_dev_alloc(c * esz), *bi = tk_dev_alloc(c * esz);
  TK_CUDA(cudaMemset(x, 0, elems * esz));
  TK_CUDA(cudaMemset(sc, 0, c * esz));
  TK_CUDA(cudaMemset(bi, 0, c * esz));
  size_t ws_bytes = k_group_norm_cuda_ws(n, c, groups, spatial);
  if (ws_bytes < 32 * n * groups) ws_bytes = 32 * n * groups;
  void *ws = tk_dev_alloc(ws_bytes);
  cudaEvent_t a, b;
  TK_CUDA(cudaEventCreate(&a));
  TK_CUDA(cudaEventCreate(&b));
  const int reps = 50;
  int rc = 0;
  for (int i = -5; i < reps && !rc; i++) {  // five warm-up launches
    if (i == 0) TK_CUDA(cudaEventRecord(a, NULL));
    TK_OK(rc = path < 0 ? k_group_norm_cuda(y, x, sc, bi, dt, n, c, groups, spatial, 0, 1e-5f, ws, ws_bytes, NULL, TK_E)
                        : k_group_norm__path_cuda(y, x, sc, bi, dt, n, c, groups, spatial, 0, 1e-5f, ws, ws_bytes, path,
                                                  NULL, TK_E));
  }
  TK_CUDA(cudaEventRecord(b, NULL));
  TK_CUDA(cudaEventSynchronize(b));
  float ms = 0;
  TK_CUDA(cudaEventElapsedTime(&ms, a, b));
  double us = 1e3 * ms / reps;
  static const char *const paths[] = {"auto", "warp", "block", "chunks"};
  printf("  bench %s [%zu,%zu,%zu] groups %-4zu %-6s %8.1f us %7.0f GB/s\n", dtype_wire_name(dt), n, c, spatial, groups,
         paths[path + 1], us, 2.0 * (double)(elems * esz) / (us * 1e3));
  TK_CUDA(cudaEventDestroy(a));
  TK_CUDA(cudaEventDestroy(b));
  TK_CUDA(cudaFree(x));
  TK_CUDA(cudaFree(y));
  TK_CUDA(cudaFree(sc));
  TK_CUDA(cudaFree(bi));
  TK_CUDA(cudaFree(ws));
}

static void bench(void) {
  static const size_t shapes[][4] = {{1, 128, 128, 4096}, {32, 64, 64, 3136}, {2, 320, 32, 4096}, {2, 1280, 32, 64}};
  for (int f16 = 1; f16 >= 0; f16--)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      for (int path = -1; path < 3; path++)
        bench_one(f16 ? DT_FP16 : DT_FP32, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3], path);
}

int main(void) {
  test_errors();
  test_ws();
  tk_require_device();
  test_group_norm(DT_FP32);
  test_group_norm(DT_FP16);
  test_group_norm(DT_BF16);
  bench();
  CHECK_DONE();
}
