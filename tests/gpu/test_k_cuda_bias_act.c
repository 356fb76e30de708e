// Tests kernels/elem/k_bias_act.cu, the fused GEMM epilogue y = act(x + bias),
// against the unfused references: k_binary_f32 ([rows,cols] + [1,cols])
// followed by k_relu / k_gelu. none and relu must be bit-exact (the same
// float add and compare); the gelu forms get the unary tests' tolerance
// (rtol 1e-5, atol 1e-6: CUDA's erff/tanhf are within 2 ulp, glibc's 1).
// Shapes: 1x1, odd, 1x~1M, ~1M x 1, 1024 x 1024, more rows than grid.y;
// with and without bias; in place; argument errors.
#include "test_k_cuda_util.h"

static const char *const act_name[] = {"none", "relu", "gelu", "gelu_tanh"};

static void ref(float *y, const float *x, const float *bias, size_t rows, size_t cols, k_act act) {
  size_t n = rows * cols;
  if (bias) {
    int64_t yd[2] = {(int64_t)rows, (int64_t)cols}, bd[2] = {1, (int64_t)cols};
    k_binary_f32(y, x, bias, 2, yd, yd, bd, K_ADD);
  } else {
    memcpy(y, x, n * 4);
  }
  switch (act) {
    case K_ACT_RELU:
      k_relu(y, y, n);
      break;
    case K_ACT_GELU:
      k_gelu(y, y, n, 0);
      break;
    case K_ACT_GELU_TANH:
      k_gelu(y, y, n, 1);
      break;
    default:
      break;
  }
}

static void run_case(tk_rng *r, size_t rows, size_t cols, k_act act, int with_bias, int in_place) {
  size_t n = rows * cols;
  float *x = tk_xmalloc(n * 4), *bias = tk_xmalloc(cols * 4), *want = tk_xmalloc(n * 4),
        *got = tk_xmalloc(n * 4);
  tk_fill(r, x, n, -6.0f, 6.0f);
  tk_fill(r, bias, cols, -2.0f, 2.0f);
  ref(want, x, with_bias ? bias : NULL, rows, cols, act);
  float *dx = tk_to_dev(x, n * 4), *db = tk_to_dev(bias, cols * 4),
        *dy = in_place ? dx : tk_dev_alloc(n * 4);
  TK_OK(k_bias_act_cuda(dy, dx, with_bias ? db : NULL, rows, cols, act, NULL, TK_E));
  tk_from_dev(got, dy, n * 4);
  char what[128];
  snprintf(what, sizeof what, "bias_act %s [%zu,%zu]%s%s", act_name[act], rows, cols,
           with_bias ? "" : " no bias", in_place ? " in place" : "");
  if (act == K_ACT_NONE || act == K_ACT_RELU)
    tk_compare_bits(what, got, want, n * 4);
  else
    tk_compare(what, got, want, n, 1e-5, 1e-6);
  if (!in_place) TK_CUDA(cudaFree(dy));
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(db));
  free(x);
  free(bias);
  free(want);
  free(got);
}

static void test_shapes(void) {
  static const size_t shapes[][2] = {{1, 1},       {1, 7},       {3, 17},
                                     {64, 1000},   {1024, 1024}, {1, 1048579},
                                     {1048579, 1}, {70001, 3},   {5, 4097}};
  tk_rng r = {99};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int act = 0; act < 4; act++) run_case(&r, shapes[s][0], shapes[s][1], (k_act)act, 1, 0);
  for (int act = 0; act < 4; act++) {
    run_case(&r, 33, 65, (k_act)act, 0, 0);
    run_case(&r, 33, 65, (k_act)act, 1, 1);
  }
}

static void test_errors(void) {
  err e = {0};
  float *p = (float *)16;
  CHECK_EQ_INT(k_bias_act_cuda(NULL, NULL, NULL, 0, 8, K_ACT_RELU, NULL, &e), 0);
  CHECK_EQ_INT(k_bias_act_cuda(NULL, p, p, 2, 8, K_ACT_RELU, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_bias_act_cuda");
  CHECK_EQ_INT(k_bias_act_cuda(p, p, p, 2, 8, (k_act)9, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "activation");
  CHECK_EQ_INT(k_bias_act_cuda(p, p, p, SIZE_MAX, 8, K_ACT_NONE, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "overflow");
}

int main(void) {
  test_errors();
  tk_require_device();
  test_shapes();
  CHECK_DONE();
}
