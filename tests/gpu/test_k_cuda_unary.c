// Tests kernels/elem/k_unary.cu against the C references of kernels/elem/k_unary.c: relu and
// leaky relu bit-exact; sigmoid, tanh, erf and both gelu forms within
// rtol 1e-5 + atol 1e-6. Why that atol: CUDA's expf/tanhf/erff are within
// 2 ulp, glibc's within 1; near y = 0 (gelu of negative x, where
// 1 + erf(x/sqrt2) cancels) 2 ulp of erf (1.2e-7 near 1) times 0.5*|x| stays
// below 4e-7 for every |x| where erf is not exactly -1 in float (|x| < 5.5),
// so 1e-6 bounds it with margin. Sizes 1, odd, 4k+tail and ~1M; float4 and
// scalar (misaligned) paths; in place; special values; argument errors.
#include "test_k_cuda_util.h"

typedef enum { U_RELU, U_LEAKY, U_SIGMOID, U_TANH, U_ERF, U_GELU, U_GELU_TANH, U_COUNT } uop;
static const char *const uop_name[U_COUNT] = {"relu", "leaky_relu", "sigmoid",  "tanh",
                                              "erf",  "gelu",       "gelu_tanh"};

static const float leaky_alpha = 0.01f;

static void ref_run(uop op, float *y, const float *x, size_t n) {
  switch (op) {
    case U_RELU:
      k_relu(y, x, n);
      break;
    case U_LEAKY:
      k_leaky_relu(y, x, n, leaky_alpha);
      break;
    case U_SIGMOID:
      k_sigmoid(y, x, n);
      break;
    case U_TANH:
      k_tanh(y, x, n);
      break;
    case U_ERF:
      k_erf(y, x, n);
      break;
    case U_GELU:
      k_gelu(y, x, n, 0);
      break;
    case U_GELU_TANH:
      k_gelu(y, x, n, 1);
      break;
    default:
      break;
  }
}

static int gpu_run(uop op, float *y, const float *x, size_t n, err *e) {
  switch (op) {
    case U_RELU:
      return k_relu_cuda(y, x, n, NULL, e);
    case U_LEAKY:
      return k_leaky_relu_cuda(y, x, n, leaky_alpha, NULL, e);
    case U_SIGMOID:
      return k_sigmoid_cuda(y, x, n, NULL, e);
    case U_TANH:
      return k_tanh_cuda(y, x, n, NULL, e);
    case U_ERF:
      return k_erf_cuda(y, x, n, NULL, e);
    case U_GELU:
      return k_gelu_cuda(y, x, n, 0, NULL, e);
    case U_GELU_TANH:
      return k_gelu_cuda(y, x, n, 1, NULL, e);
    default:
      return -1;
  }
}

static int exact(uop op) {
  return op == U_RELU || op == U_LEAKY;
}

// Runs op on x[0..n) with the device input at byte offset `shift` floats
// into its buffer (shift 1 defeats 16-byte alignment), out of place and in place.
static void run_case(uop op, const float *x, size_t n, size_t shift) {
  float *want = tk_xmalloc(n * sizeof *want), *got = tk_xmalloc(n * sizeof *got);
  ref_run(op, want, x, n);
  float *dx = tk_dev_alloc((n + shift) * sizeof *dx), *dy = tk_dev_alloc((n + shift) * sizeof *dy);
  TK_CUDA(cudaMemcpy(dx + shift, x, n * sizeof *x, cudaMemcpyHostToDevice));
  TK_CUDA(cudaMemset(dy, 0xff, (n + shift) * sizeof *dy));
  double rtol = exact(op) ? 0.0 : 1e-5, atol = exact(op) ? 0.0 : 1e-6;
  char what[96];

  err e = {0};
  int rc = gpu_run(op, dy + shift, dx + shift, n, &e);
  CHECK_EQ_INT(rc, 0);
  if (rc) fprintf(stderr, "  %s\n", e.msg);
  tk_from_dev(got, dy + shift, n * sizeof *got);
  snprintf(what, sizeof what, "%s n=%zu shift=%zu", uop_name[op], n, shift);
  tk_compare(what, got, want, n, rtol, atol);
  if (exact(op)) tk_compare_bits(what, got, want, n * sizeof *got);

  // In place: y == x.
  rc = gpu_run(op, dx + shift, dx + shift, n, &e);
  CHECK_EQ_INT(rc, 0);
  tk_from_dev(got, dx + shift, n * sizeof *got);
  snprintf(what, sizeof what, "%s in-place n=%zu shift=%zu", uop_name[op], n, shift);
  tk_compare(what, got, want, n, rtol, atol);

  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(dy));
  free(want);
  free(got);
}

static void test_random(void) {
  static const size_t sizes[] = {1, 2, 3, 4, 5, 7, 31, 257, 1000, 4099, (1u << 20) + 3};
  tk_rng r = {0x9e3779b97f4a7c15u};
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
    size_t n = sizes[si];
    float *x = tk_xmalloc(n * sizeof *x);
    tk_fill(&r, x, n, -8.0f, 8.0f);
    for (int op = 0; op < U_COUNT; op++) {
      run_case((uop)op, x, n, 0);
      if (n < 5000) run_case((uop)op, x, n, 1);
    }
    free(x);
  }
}

static void test_specials(void) {
  float x[] = {0.0f,  -0.0f,  1e-30f,  -1e-30f,  1e-45f,   -1e-45f,   0.5f,   -0.5f, 5.4f,
               -5.4f, 9.0f,   -9.0f,   20.0f,    -20.0f,   88.0f,     -88.0f, 89.0f, -104.0f,
               1e10f, -1e10f, 3.4e38f, -3.4e38f, INFINITY, -INFINITY, NAN};
  size_t n = sizeof x / sizeof x[0];
  for (int op = 0; op < U_COUNT; op++) run_case((uop)op, x, n, 0);
}

// Launcher argument checks; they return before touching the device.
static void test_errors(void) {
  err e = {0};
  CHECK_EQ_INT(k_relu_cuda(NULL, NULL, 0, NULL, &e), 0);  // empty: no-op
  CHECK_EQ_INT(k_relu_cuda(NULL, NULL, 4, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_relu_cuda");
  CHECK_EQ_INT(k_sigmoid_cuda((float *)16, NULL, 4, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_sigmoid_cuda");
  CHECK_EQ_INT(k_gelu_cuda((float *)16, (float *)16, 4, 2, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_gelu_cuda");
  CHECK_CONTAINS(e.msg, "approximate");
  CHECK_EQ_INT(k_leaky_relu_cuda(NULL, NULL, 1, 0.1f, NULL, NULL),
               ERR_INVALID_ARGUMENT);  // e may be NULL
}

int main(void) {
  test_errors();
  tk_require_device();
  test_specials();
  test_random();
  CHECK_DONE();
}
