// Tests kernels/index/k_layout.cu against k_transpose (kernels/index/k_layout.c), byte for byte:
// every permutation of a rank-3 and a rank-4 tensor for element sizes 1, 2,
// 3, 4, 8, 12 and 16; size-1 dims; rank 8; rank 0; permutations that keep
// memory order (the copy path); ~1M-element 2-D and 4-D (NCHW <-> NHWC)
// transposes; misaligned pointers (the byte path for 2/4/8/16-byte
// elements); argument errors.
#include "test_k_cuda_util.h"

static int next_perm(int *p, int n) {
  int i = n - 2;
  while (i >= 0 && p[i] > p[i + 1]) i--;
  if (i < 0) return 0;
  int j = n - 1;
  while (p[j] < p[i]) j--;
  int t = p[i];
  p[i] = p[j];
  p[j] = t;
  for (int a = i + 1, b = n - 1; a < b; a++, b--) {
    t = p[a];
    p[a] = p[b];
    p[b] = t;
  }
  return 1;
}

// One transpose on the GPU (device pointers offset by `shift` bytes) vs the
// reference; returns 1 on a mismatch.
static int run_case(int ndim, const int64_t *xd, const int *perm, size_t es, size_t shift,
                    int verbose) {
  size_t n = 1;
  for (int i = 0; i < ndim; i++) n *= (size_t)xd[i];
  size_t bytes = n * es;
  unsigned char *x = tk_xmalloc(bytes), *want = tk_xmalloc(bytes), *got = tk_xmalloc(bytes);
  for (size_t i = 0; i < bytes; i++) x[i] = (unsigned char)(i * 7 + i / 251 + 1);
  k_transpose(want, x, es, ndim, xd, perm);
  unsigned char *dx = tk_dev_alloc(bytes + shift), *dy = tk_dev_alloc(bytes + shift);
  TK_CUDA(cudaMemcpy(dx + shift, x, bytes, cudaMemcpyHostToDevice));
  TK_CUDA(cudaMemset(dy, 0x5a, bytes + shift));
  err e = {0};
  int rc = k_transpose_cuda(dy + shift, dx + shift, es, ndim, xd, perm, NULL, &e);
  tk_from_dev(got, dy + shift, bytes);
  int bad = rc != 0 || memcmp(got, want, bytes) != 0;
  if (bad && verbose) {
    fprintf(stderr, "  transpose mismatch: rc %d (%s) es %zu shift %zu dims", rc, e.msg, es, shift);
    for (int i = 0; i < ndim; i++) fprintf(stderr, " %lld", (long long)xd[i]);
    fprintf(stderr, " perm");
    for (int i = 0; i < ndim; i++) fprintf(stderr, " %d", perm[i]);
    fprintf(stderr, "\n");
  }
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(dy));
  free(x);
  free(want);
  free(got);
  return bad;
}

static void all_perms(int ndim, const int64_t *xd) {
  static const size_t sizes[] = {1, 2, 3, 4, 8, 12, 16};
  int cases = 0, bad = 0;
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    int p[K_MAX_DIMS];
    for (int i = 0; i < ndim; i++) p[i] = i;
    do {
      bad += run_case(ndim, xd, p, sizes[s], 0, bad < 3);
      cases++;
    } while (next_perm(p, ndim));
  }
  printf("transpose: rank %d, %d cases, %d mismatched\n", ndim, cases, bad);
  CHECK_EQ_INT(bad, 0);
}

static void test_perms(void) {
  int64_t d3[3] = {3, 5, 7};
  all_perms(3, d3);
  int64_t d4[4] = {2, 3, 4, 5};
  all_perms(4, d4);
  int64_t d4b[4] = {1, 3, 1, 5};  // size-1 dims dropped by the plan
  all_perms(4, d4b);
  int64_t d4c[4] = {6, 1, 7, 1};
  all_perms(4, d4c);
}

static void test_misc(void) {
  // Known values: [2,3] -> [3,2].
  float x[6] = {1, 2, 3, 4, 5, 6}, y[6];
  int64_t d[2] = {2, 3};
  int p[2] = {1, 0};
  float *dx = tk_to_dev(x, sizeof x), *dy = tk_dev_alloc(sizeof y);
  TK_OK(k_transpose_cuda(dy, dx, sizeof(float), 2, d, p, NULL, TK_E));
  tk_from_dev(y, dy, sizeof y);
  float want[6] = {1, 4, 2, 5, 3, 6};
  for (int i = 0; i < 6; i++) CHECK(y[i] == want[i]);
  // Rank 0: one element copied.
  TK_OK(k_transpose_cuda(dy, dx, sizeof(float), 0, NULL, NULL, NULL, TK_E));
  tk_from_dev(y, dy, sizeof(float));
  CHECK(y[0] == 1.0f);
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(dy));

  // Rank 8, a few permutations including identity and reversal.
  int64_t d8[8] = {2, 3, 1, 2, 3, 2, 1, 5};
  int perms8[][8] = {{0, 1, 2, 3, 4, 5, 6, 7},
                     {7, 6, 5, 4, 3, 2, 1, 0},
                     {1, 0, 3, 2, 5, 4, 7, 6},
                     {2, 6, 0, 1, 3, 4, 5, 7},
                     {0, 2, 4, 6, 1, 3, 5, 7}};
  for (size_t i = 0; i < sizeof perms8 / sizeof perms8[0]; i++) {
    CHECK_EQ_INT(run_case(8, d8, perms8[i], 4, 0, 1), 0);
    CHECK_EQ_INT(run_case(8, d8, perms8[i], 3, 0, 1), 0);
  }
  // Order-keeping permutations (moving size-1 dims): the copy path.
  int64_t dk[4] = {4, 1, 6, 1};
  int pk[4] = {1, 0, 3, 2};
  CHECK_EQ_INT(run_case(4, dk, pk, 4, 0, 1), 0);
  // Misaligned device pointers: 2/4/8/16-byte elements fall back to bytes.
  int64_t dm[3] = {5, 7, 3};
  int pm[3] = {2, 0, 1};
  static const size_t es[] = {2, 4, 8, 16};
  for (size_t i = 0; i < 4; i++) CHECK_EQ_INT(run_case(3, dm, pm, es[i], 1, 1), 0);
}

static void test_large(void) {
  int64_t d2[2] = {1023, 1025};
  int p2[2] = {1, 0};
  CHECK_EQ_INT(run_case(2, d2, p2, 4, 0, 1), 0);
  CHECK_EQ_INT(run_case(2, d2, p2, 2, 0, 1), 0);
  int64_t nchw[4] = {4, 64, 63, 65};
  int to_nhwc[4] = {0, 2, 3, 1};
  CHECK_EQ_INT(run_case(4, nchw, to_nhwc, 4, 0, 1), 0);
  int64_t nhwc[4] = {4, 63, 65, 64};
  int to_nchw[4] = {0, 3, 1, 2};
  CHECK_EQ_INT(run_case(4, nhwc, to_nchw, 4, 0, 1), 0);
  CHECK_EQ_INT(run_case(4, nhwc, to_nchw, 1, 0, 1), 0);
  CHECK_EQ_INT(run_case(4, nhwc, to_nchw, 8, 0, 1), 0);
}

static void test_errors(void) {
  err e = {0};
  void *p = (void *)16;
  int64_t d[3] = {2, 3, 4}, z[3] = {2, 0, 4};
  int dup[3] = {0, 0, 1}, oob[3] = {0, 3, 1}, ok[3] = {2, 1, 0};
  CHECK_EQ_INT(k_transpose_cuda(p, p, 4, 3, d, dup, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_transpose_cuda");
  CHECK_CONTAINS(e.msg, "permutation");
  CHECK_EQ_INT(k_transpose_cuda(p, p, 4, 3, d, oob, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_transpose_cuda(p, p, 4, 9, d, ok, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_transpose_cuda(p, p, 0, 3, d, ok, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_transpose_cuda(NULL, p, 4, 3, d, ok, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "NULL");
  CHECK_EQ_INT(k_transpose_cuda(NULL, NULL, 4, 3, z, ok, NULL, &e), 0);  // empty
}

int main(void) {
  test_errors();
  tk_require_device();
  test_misc();
  test_perms();
  test_large();
  CHECK_DONE();
}
