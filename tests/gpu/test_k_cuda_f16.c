// Tests the FP16 launchers (the _f16 entry points of kernels/elem/k_unary.cu,
// kernels/elem/k_binary.cu, kernels/norm/k_softmax.cu, kernels/norm/k_norm.cu and kernels/elem/k_bias_act.cu) against the FP32
// C references (k_ref.h) run on the float values of the same half inputs. The kernels
// compute in float and round each output to half once (relative error
// 2^-11 ~ 4.9e-4), so every output must be within rtol 1e-2 + atol 1e-3 of
// the reference (atol for outputs near zero and half subnormals). Inputs
// are drawn in float, rounded to half (k_f32_to_f16) and widened back
// (k_f16_to_f32), so both sides see identical values; ranges keep every
// result inside half's range. Covers: unary ops at sizes 1..~1M on the
// 16-byte and the scalar (misaligned) paths, in place, special values;
// binary (all seven ops: add, sub, mul, div, pow, max, min) with every
// broadcast mask of small rank-1..3 shapes, large, scalar, odd-length and
// misaligned cases and in place; softmax and log-softmax with
// axis_len 1, > 1024 and inner > 1; layer norm (cols not a multiple of 32,
// with and without bias); batch norm; bias + activation (pair and scalar
// paths, in place); and the launchers' argument checks, which run without
// a device.
#include "test_k_cuda_util.h"

#define RTOL 1e-2
#define ATOL 1e-3

// --- half plumbing

// Rounds x[] to half in place: h gets the bits, x the float they stand for.
static void quantise(uint16_t *h, float *x, size_t n) {
  k_f32_to_f16(h, x, n);
  k_f16_to_f32(x, h, n);
}

static void fill_half(tk_rng *r, uint16_t *h, float *x, size_t n, float lo, float hi) {
  tk_fill(r, x, n, lo, hi);
  quantise(h, x, n);
}

// Fresh device buffer of n halves plus `shift` leading ones, poisoned with
// NaN (0xffff), so an element the kernel skips shows up.
static uint16_t *dev_halves(size_t n, size_t shift) {
  uint16_t *d = tk_dev_alloc((n + shift) * 2);
  TK_CUDA(cudaMemset(d, 0xff, (n + shift) * 2));
  return d;
}

static void put(uint16_t *d, const uint16_t *h, size_t n) {
  if (n) TK_CUDA(cudaMemcpy(d, h, n * 2, cudaMemcpyHostToDevice));
}

// Copies n halves back (after a sync), widens them and compares them with
// the FP32 reference. Returns the mismatch count.
static size_t compare_dev(const char *what, const uint16_t *d, const float *want, size_t n) {
  uint16_t *gh = tk_xmalloc(n * 2);
  float *got = tk_xmalloc(n * 4);
  tk_from_dev(gh, d, n * 2);
  k_f16_to_f32(got, gh, n);
  size_t bad = tk_compare(what, got, want, n, RTOL, ATOL);
  free(gh);
  free(got);
  return bad;
}

// --- unary

typedef enum { U_RELU, U_LEAKY, U_SIGMOID, U_TANH, U_ERF, U_GELU, U_GELU_TANH, U_COUNT } uop;
static const char *const uop_name[U_COUNT] = {"relu", "leaky_relu", "sigmoid",  "tanh",
                                              "erf",  "gelu",       "gelu_tanh"};
static const float leaky_alpha = 0.01f;

static void unary_ref(uop op, float *y, const float *x, size_t n) {
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
    default:
      k_gelu(y, x, n, 1);
      break;
  }
}

static int unary_gpu(uop op, uint16_t *y, const uint16_t *x, size_t n, err *e) {
  switch (op) {
    case U_RELU:
      return k_relu_f16_cuda(y, x, n, NULL, e);
    case U_LEAKY:
      return k_leaky_relu_f16_cuda(y, x, n, leaky_alpha, NULL, e);
    case U_SIGMOID:
      return k_sigmoid_f16_cuda(y, x, n, NULL, e);
    case U_TANH:
      return k_tanh_f16_cuda(y, x, n, NULL, e);
    case U_ERF:
      return k_erf_f16_cuda(y, x, n, NULL, e);
    case U_GELU:
      return k_gelu_f16_cuda(y, x, n, 0, NULL, e);
    default:
      return k_gelu_f16_cuda(y, x, n, 1, NULL, e);
  }
}

// x: n halves (bits h, values xf); the device copies start `shift` halves
// into their buffers (shift 1 defeats the 16-byte path). Out of place, then
// in place.
static void unary_case(uop op, const uint16_t *h, const float *xf, size_t n, size_t shift) {
  float *want = tk_xmalloc(n * 4);
  unary_ref(op, want, xf, n);
  uint16_t *dx = dev_halves(n, shift), *dy = dev_halves(n, shift);
  put(dx + shift, h, n);
  char what[96];
  err e = {0};
  int rc = unary_gpu(op, dy + shift, dx + shift, n, &e);
  CHECK_EQ_INT(rc, 0);
  if (rc) fprintf(stderr, "  %s\n", e.msg);
  snprintf(what, sizeof what, "%s_f16 n=%zu shift=%zu", uop_name[op], n, shift);
  compare_dev(what, dy + shift, want, n);

  rc = unary_gpu(op, dx + shift, dx + shift, n, &e);
  CHECK_EQ_INT(rc, 0);
  snprintf(what, sizeof what, "%s_f16 in-place n=%zu shift=%zu", uop_name[op], n, shift);
  compare_dev(what, dx + shift, want, n);
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(dy));
  free(want);
}

static void test_unary(void) {
  static const size_t sizes[] = {1, 2, 7, 8, 9, 15, 17, 257, 1000, 4099, (1u << 20) + 3};
  tk_rng r = {0x9e3779b97f4a7c15u};
  for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
    size_t n = sizes[si];
    uint16_t *h = tk_xmalloc(n * 2);
    float *xf = tk_xmalloc(n * 4);
    fill_half(&r, h, xf, n, -8.0f, 8.0f);
    for (int op = 0; op < U_COUNT; op++) {
      unary_case((uop)op, h, xf, n, 0);
      if (n < 5000) unary_case((uop)op, h, xf, n, 1);
    }
    free(h);
    free(xf);
  }
  // Special values: signed zeros, half subnormals, near half max, infinities, NaN.
  float xs[] = {0.0f,   -0.0f,     6e-8f,    -6e-8f,  1e-5f,    -1e-5f,   0.5f,    -0.5f,
                5.4f,   -5.4f,     11.0f,    -11.0f,  20.0f,    -20.0f,   60000.f, -60000.f,
                65504.f, -65504.f, INFINITY, -INFINITY, NAN};
  size_t n = sizeof xs / sizeof xs[0];
  uint16_t hs[sizeof xs / sizeof xs[0]];
  quantise(hs, xs, n);
  for (int op = 0; op < U_COUNT; op++) unary_case((uop)op, hs, xs, n, 0);
}

// --- binary

static int64_t count(int ndim, const int64_t *d) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= d[i];
  return n;
}

// One case; `yshift` offsets y by that many halves (1 forces the scalar
// kernels). Divisors are kept away from zero so no quotient leaves half's
// range. Returns the mismatch count (or 1 if the launcher failed).
static size_t binary_case(tk_rng *r, int ndim, const int64_t *yd, const int64_t *ad,
                          const int64_t *bd, k_binop op, size_t yshift) {
  size_t ny = (size_t)count(ndim, yd), na = (size_t)count(ndim, ad), nb = (size_t)count(ndim, bd);
  uint16_t *ah = tk_xmalloc(na * 2), *bh = tk_xmalloc(nb * 2);
  float *af = tk_xmalloc(na * 4), *bf = tk_xmalloc(nb * 4), *want = tk_xmalloc(ny * 4);
  if (op == K_POW) {  // bases and exponents whose powers stay inside half's range
    fill_half(r, ah, af, na, 0.25f, 4.0f);
    fill_half(r, bh, bf, nb, -3.0f, 3.0f);
  } else {
    fill_half(r, ah, af, na, -100.0f, 100.0f);
    for (size_t i = 0; i < nb; i++) {
      float v = tk_uniform(r, 0.5f, 3.0f);
      bf[i] = tk_next(r) & 1 ? -v : v;
    }
    quantise(bh, bf, nb);
  }
  k_binary_f32(want, af, bf, ndim, yd, ad, bd, op);
  uint16_t *da = dev_halves(na, 0), *db = dev_halves(nb, 0), *dy = dev_halves(ny, yshift);
  put(da, ah, na);
  put(db, bh, nb);
  err e = {0};
  int rc = k_binary_f16_cuda(dy + yshift, da, db, ndim, yd, ad, bd, op, NULL, &e);
  size_t bad;
  if (rc) {
    fprintf(stderr, "  k_binary_f16_cuda: %s\n", e.msg);
    bad = 1;
  } else {
    char what[160];
    int len = snprintf(what, sizeof what, "binary_f16 op %d y", (int)op);
    for (int i = 0; i < ndim && len < (int)sizeof what - 40; i++)
      len += snprintf(what + len, sizeof what - len, " %lld/%lld/%lld", (long long)yd[i],
                      (long long)ad[i], (long long)bd[i]);
    snprintf(what + len, sizeof what - len, " shift %zu", yshift);
    bad = compare_dev(what, dy + yshift, want, ny);
  }
  TK_CUDA(cudaFree(da));
  TK_CUDA(cudaFree(db));
  TK_CUDA(cudaFree(dy));
  free(ah);
  free(bh);
  free(af);
  free(bf);
  free(want);
  return bad;
}

static void test_binary(void) {
  tk_rng r = {12345};
  // Every rank-1..3 shape with dims from {1,2,3} (inner 3..5) and every
  // broadcast mask on each side.
  int cases = 0, bad_cases = 0;
  for (int ndim = 1; ndim <= 3; ndim++) {
    for (int sh = 0; sh < tk_small_shapes(ndim); sh++) {
      int64_t yd[K_MAX_DIMS];
      tk_small_shape(ndim, sh, yd);
      for (int ma = 0; ma < (1 << ndim); ma++) {
        for (int mb = 0; mb < (1 << ndim); mb++) {
          int64_t ad[K_MAX_DIMS], bd[K_MAX_DIMS];
          tk_bcast_dims(ndim, yd, ma, ad);
          tk_bcast_dims(ndim, yd, mb, bd);
          k_binop op = (k_binop)(tk_next(&r) % (K_MIN + 1));
          bad_cases += binary_case(&r, ndim, yd, ad, bd, op, (size_t)(cases & 1)) != 0;
          cases++;
        }
      }
    }
  }
  printf("binary_f16: %d small broadcast cases, %d mismatched\n", cases, bad_cases);
  CHECK_EQ_INT(bad_cases, 0);

  struct {
    int ndim;
    int64_t y[K_MAX_DIMS], a[K_MAX_DIMS], b[K_MAX_DIMS];
  } big[] = {
      {0, {0}, {0}, {0}},                                       // scalar op scalar
      {1, {1048579}, {1048579}, {1048579}},                     // same shape, odd length
      {1, {1048576}, {1048576}, {1048576}},                     // same shape, even length
      {1, {1048579}, {1048579}, {1}},                           // tensor op scalar
      {1, {1048579}, {1}, {1048579}},                           // scalar op tensor
      {2, {1024, 1023}, {1024, 1023}, {1, 1023}},               // row bias
      {2, {1023, 1024}, {1023, 1024}, {1023, 1}},               // column broadcast
      {2, {1024, 1024}, {1024, 1}, {1, 1024}},                  // outer product
      {4, {8, 16, 32, 256}, {8, 1, 32, 256}, {1, 16, 1, 256}},  // NCHW-ish
      {3, {4, 49, 960}, {4, 49, 960}, {4, 1, 960}},             // squeeze-excitation's Mul, NHWC: 8 halves a thread
      {8, {2, 3, 2, 3, 2, 3, 2, 5}, {2, 1, 2, 1, 2, 1, 2, 5}, {1, 3, 1, 3, 1, 3, 1, 1}},
  };
  for (size_t c = 0; c < sizeof big / sizeof big[0]; c++)
    for (int op = 0; op <= K_MIN; op++)
      for (size_t shift = 0; shift < 2; shift++)
        CHECK_EQ_INT(binary_case(&r, big[c].ndim, big[c].y, big[c].a, big[c].b, (k_binop)op, shift),
                     0);

  // In place: y is exactly a, same shape.
  enum { N = 1001 };
  uint16_t ah[N], bh[N];
  float af[N], bf[N], want[N];
  fill_half(&r, ah, af, N, -4.0f, 4.0f);
  fill_half(&r, bh, bf, N, 1.0f, 2.0f);
  int64_t d[1] = {N};
  k_binary_f32(want, af, bf, 1, d, d, d, K_DIV);
  uint16_t *da = dev_halves(N, 0), *db = dev_halves(N, 0);
  put(da, ah, N);
  put(db, bh, N);
  TK_OK(k_binary_f16_cuda(da, da, db, 1, d, d, d, K_DIV, NULL, TK_E));
  compare_dev("binary_f16 div in place", da, want, N);
  TK_CUDA(cudaFree(da));
  TK_CUDA(cudaFree(db));
}

// --- softmax

static void softmax_case(tk_rng *r, size_t outer, size_t len, size_t inner, int log_form) {
  size_t n = outer * len * inner;
  uint16_t *h = tk_xmalloc(n * 2);
  float *xf = tk_xmalloc(n * 4), *want = tk_xmalloc(n * 4);
  fill_half(r, h, xf, n, -10.0f, 10.0f);
  if (log_form)
    k_log_softmax(want, xf, outer, len, inner);
  else
    k_softmax(want, xf, outer, len, inner);
  uint16_t *dx = dev_halves(n, 0), *dy = dev_halves(n, 0);
  put(dx, h, n);
  if (log_form)
    TK_OK(k_log_softmax_f16_cuda(dy, dx, outer, len, inner, NULL, TK_E));
  else
    TK_OK(k_softmax_f16_cuda(dy, dx, outer, len, inner, NULL, TK_E));
  char what[96];
  snprintf(what, sizeof what, "%s_f16 [%zu,%zu,%zu]", log_form ? "log_softmax" : "softmax", outer,
           len, inner);
  compare_dev(what, dy, want, n);
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(dy));
  free(h);
  free(xf);
  free(want);
}

static void test_softmax(void) {
  static const size_t shapes[][3] = {
      {1, 1, 1},    {3, 1, 1},   {4, 1, 5},    {5, 10, 1},  {2, 1000, 1}, {3, 1025, 1},
      {2, 5000, 1}, {64, 128, 1}, {1000, 33, 1}, {7, 33, 3}, {2, 2000, 9},  {1, 3, 1000},
  };
  tk_rng r = {31337};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int lf = 0; lf < 2; lf++) softmax_case(&r, shapes[s][0], shapes[s][1], shapes[s][2], lf);
}

// --- normalisation

static void layer_norm_case(tk_rng *r, size_t rows, size_t cols, int with_bias) {
  size_t n = rows * cols;
  uint16_t *xh = tk_xmalloc(n * 2), *sh = tk_xmalloc(cols * 2), *bh = tk_xmalloc(cols * 2);
  float *xf = tk_xmalloc(n * 4), *sf = tk_xmalloc(cols * 4), *bf = tk_xmalloc(cols * 4),
        *want = tk_xmalloc(n * 4);
  fill_half(r, xh, xf, n, 6.0f, 14.0f);  // an offset mean, as activations often have
  fill_half(r, sh, sf, cols, 0.5f, 2.0f);
  fill_half(r, bh, bf, cols, -1.0f, 1.0f);
  const float eps = 1e-5f;
  k_layer_norm(want, xf, sf, with_bias ? bf : NULL, rows, cols, eps);
  uint16_t *dx = dev_halves(n, 0), *ds = dev_halves(cols, 0), *db = dev_halves(cols, 0),
           *dy = dev_halves(n, 0);
  put(dx, xh, n);
  put(ds, sh, cols);
  put(db, bh, cols);
  TK_OK(k_layer_norm_f16_cuda(dy, dx, ds, with_bias ? db : NULL, rows, cols, eps, NULL, TK_E));
  char what[96];
  snprintf(what, sizeof what, "layer_norm_f16 [%zu,%zu]%s", rows, cols,
           with_bias ? "" : " no bias");
  compare_dev(what, dy, want, n);
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(ds));
  TK_CUDA(cudaFree(db));
  TK_CUDA(cudaFree(dy));
  free(xh);
  free(sh);
  free(bh);
  free(xf);
  free(sf);
  free(bf);
  free(want);
}

static void batch_norm_case(tk_rng *r, size_t nb, size_t c, size_t spatial, int with_bias) {
  size_t n = nb * c * spatial;
  uint16_t *xh = tk_xmalloc(n * 2), *ph = tk_xmalloc(4 * c * 2);  // scale, bias, mean, var
  float *xf = tk_xmalloc(n * 4), *pf = tk_xmalloc(4 * c * 4), *want = tk_xmalloc(n * 4);
  fill_half(r, xh, xf, n, -3.0f, 3.0f);
  fill_half(r, ph, pf, c, 0.5f, 2.0f);
  fill_half(r, ph + c, pf + c, c, -1.0f, 1.0f);
  fill_half(r, ph + 2 * c, pf + 2 * c, c, -1.0f, 1.0f);
  fill_half(r, ph + 3 * c, pf + 3 * c, c, 0.1f, 2.0f);
  const float eps = 1e-5f;
  k_batch_norm(want, xf, pf, with_bias ? pf + c : NULL, pf + 2 * c, pf + 3 * c, nb, c, spatial,
               eps);
  uint16_t *dx = dev_halves(n, 0), *dp = dev_halves(4 * c, 0), *dy = dev_halves(n, 0);
  put(dx, xh, n);
  put(dp, ph, 4 * c);
  TK_OK(k_batch_norm_f16_cuda(dy, dx, dp, with_bias ? dp + c : NULL, dp + 2 * c, dp + 3 * c, nb, c,
                              spatial, eps, NULL, TK_E));
  char what[96];
  snprintf(what, sizeof what, "batch_norm_f16 [%zu,%zu,%zu]%s", nb, c, spatial,
           with_bias ? "" : " no bias");
  compare_dev(what, dy, want, n);
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(dp));
  TK_CUDA(cudaFree(dy));
  free(xh);
  free(ph);
  free(xf);
  free(pf);
  free(want);
}

static void test_norm(void) {
  static const size_t ln[][2] = {{1, 1},   {3, 5},    {4, 100},  {8, 768},
                                 {2, 1000}, {3, 4097}, {300, 33}, {1, 65}};
  tk_rng r = {4242};
  for (size_t s = 0; s < sizeof ln / sizeof ln[0]; s++)
    for (int b = 0; b < 2; b++) layer_norm_case(&r, ln[s][0], ln[s][1], b);
  static const size_t bn[][3] = {{1, 1, 1}, {2, 3, 5}, {4, 16, 49}, {1, 64, 3136}, {2, 1000, 1}};
  for (size_t s = 0; s < sizeof bn / sizeof bn[0]; s++)
    for (int b = 0; b < 2; b++) batch_norm_case(&r, bn[s][0], bn[s][1], bn[s][2], b);
}

// --- bias + activation

static const char *const act_name[] = {"none", "relu", "gelu", "gelu_tanh"};

// The unfused reference: [rows,cols] + [1,cols] in float, then the activation.
static void bias_act_ref(float *y, const float *x, const float *bias, size_t rows, size_t cols,
                         k_act act) {
  size_t n = rows * cols;
  if (bias) {
    int64_t yd[2] = {(int64_t)rows, (int64_t)cols}, bd[2] = {1, (int64_t)cols};
    k_binary_f32(y, x, bias, 2, yd, yd, bd, K_ADD);
  } else {
    memcpy(y, x, n * 4);
  }
  if (act == K_ACT_RELU) k_relu(y, y, n);
  if (act == K_ACT_GELU) k_gelu(y, y, n, 0);
  if (act == K_ACT_GELU_TANH) k_gelu(y, y, n, 1);
}

// shift: x and y start that many halves into their buffers (1 defeats the
// pair kernel for even cols).
static void bias_act_case(tk_rng *r, size_t rows, size_t cols, k_act act, int with_bias,
                          int in_place, size_t shift) {
  size_t n = rows * cols;
  uint16_t *xh = tk_xmalloc(n * 2), *bh = tk_xmalloc(cols * 2);
  float *xf = tk_xmalloc(n * 4), *bf = tk_xmalloc(cols * 4), *want = tk_xmalloc(n * 4);
  fill_half(r, xh, xf, n, -6.0f, 6.0f);
  fill_half(r, bh, bf, cols, -2.0f, 2.0f);
  bias_act_ref(want, xf, with_bias ? bf : NULL, rows, cols, act);
  uint16_t *dx = dev_halves(n, shift), *db = dev_halves(cols, 0),
           *dy = in_place ? dx : dev_halves(n, shift);
  put(dx + shift, xh, n);
  put(db, bh, cols);
  TK_OK(k_bias_act_f16_cuda(dy + shift, dx + shift, with_bias ? db : NULL, rows, cols, act, NULL,
                            TK_E));
  char what[128];
  snprintf(what, sizeof what, "bias_act_f16 %s [%zu,%zu]%s%s shift %zu", act_name[act], rows,
           cols, with_bias ? "" : " no bias", in_place ? " in place" : "", shift);
  compare_dev(what, dy + shift, want, n);
  if (!in_place) TK_CUDA(cudaFree(dy));
  TK_CUDA(cudaFree(dx));
  TK_CUDA(cudaFree(db));
  free(xh);
  free(bh);
  free(xf);
  free(bf);
  free(want);
}

static void test_bias_act(void) {
  static const size_t shapes[][2] = {{1, 1},    {1, 7},       {3, 17},   {64, 1000}, {33, 64},
                                     {5, 4097}, {1, 1048576}, {70001, 3}, {70000, 2}};
  tk_rng r = {99};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int act = 0; act < 4; act++)
      bias_act_case(&r, shapes[s][0], shapes[s][1], (k_act)act, 1, 0, 0);
  for (int act = 0; act < 4; act++) {
    bias_act_case(&r, 33, 64, (k_act)act, 0, 0, 0);
    bias_act_case(&r, 33, 64, (k_act)act, 1, 0, 1);
    bias_act_case(&r, 33, 65, (k_act)act, 1, 1, 0);
    bias_act_case(&r, 33, 64, (k_act)act, 1, 1, 0);
  }
}

// --- argument checks; every case returns before touching the device.
static void test_errors(void) {
  err e = {0};
  uint16_t *p = (uint16_t *)16;  // never dereferenced
  int64_t y2[2] = {2, 3}, a2[2] = {2, 3}, b2[2] = {2, 2}, z2[2] = {0, 3};

  // Unary: empty is a no-op, NULL pointers and a bad `approximate` refused.
  CHECK_EQ_INT(k_relu_f16_cuda(NULL, NULL, 0, NULL, &e), 0);
  CHECK_EQ_INT(k_relu_f16_cuda(NULL, NULL, 4, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_relu_f16_cuda");
  CHECK_EQ_INT(k_leaky_relu_f16_cuda(p, NULL, 4, 0.1f, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_leaky_relu_f16_cuda");
  CHECK_EQ_INT(k_sigmoid_f16_cuda(p, NULL, 4, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_sigmoid_f16_cuda");
  CHECK_EQ_INT(k_tanh_f16_cuda(NULL, p, 4, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_tanh_f16_cuda");
  CHECK_EQ_INT(k_erf_f16_cuda(NULL, p, 4, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_erf_f16_cuda");
  CHECK_EQ_INT(k_gelu_f16_cuda(NULL, NULL, 4, 0, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_gelu_f16_cuda");
  CHECK_EQ_INT(k_gelu_f16_cuda(p, p, 4, 2, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "approximate");
  CHECK_EQ_INT(k_relu_f16_cuda(NULL, NULL, 1, NULL, NULL), ERR_INVALID_ARGUMENT);  // e may be NULL

  // Binary: bad rank, shapes that do not broadcast, unknown op, NULL dims
  // and buffers; an empty output is a no-op even with NULL buffers.
  CHECK_EQ_INT(k_binary_f16_cuda(p, p, p, 9, y2, a2, a2, K_ADD, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_binary_f16_cuda");
  CHECK_CONTAINS(e.msg, "rank");
  CHECK_EQ_INT(k_binary_f16_cuda(p, p, p, -1, y2, a2, a2, K_ADD, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_binary_f16_cuda(p, p, p, 2, y2, a2, b2, K_ADD, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "broadcast");
  CHECK_EQ_INT(k_binary_f16_cuda(p, p, p, 2, y2, a2, a2, (k_binop)(K_FMOD + 1), NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "op");
  CHECK_EQ_INT(k_binary_f16_cuda(p, p, p, 2, NULL, a2, a2, K_ADD, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_binary_f16_cuda(NULL, p, p, 2, y2, a2, a2, K_ADD, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "NULL");
  CHECK_EQ_INT(k_binary_f16_cuda(p, p, NULL, 0, NULL, NULL, NULL, K_MUL, NULL, &e),
               ERR_INVALID_ARGUMENT);  // rank 0 is one element
  CHECK_EQ_INT(k_binary_f16_cuda(NULL, NULL, NULL, 2, z2, z2, z2, K_ADD, NULL, &e), 0);

  // Softmax.
  CHECK_EQ_INT(k_softmax_f16_cuda(NULL, NULL, 0, 5, 1, NULL, &e), 0);
  CHECK_EQ_INT(k_softmax_f16_cuda(NULL, NULL, 3, 5, 1, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_softmax_f16_cuda");
  CHECK_EQ_INT(k_log_softmax_f16_cuda(p, NULL, 3, 5, 2, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_log_softmax_f16_cuda");
  CHECK_EQ_INT(k_log_softmax_f16_cuda(p, p, SIZE_MAX / 2, 3, 1, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "overflow");

  // Normalisation.
  CHECK_EQ_INT(k_layer_norm_f16_cuda(NULL, NULL, NULL, NULL, 0, 5, 1e-5f, NULL, &e), 0);
  CHECK_EQ_INT(k_layer_norm_f16_cuda(p, p, NULL, NULL, 2, 5, 1e-5f, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_layer_norm_f16_cuda");
  CHECK_EQ_INT(k_layer_norm_f16_cuda(p, p, p, NULL, 2, 5, -1.0f, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "epsilon");
  CHECK_EQ_INT(k_layer_norm_f16_cuda(p, p, p, NULL, 2, 5, NAN, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_layer_norm_f16_cuda(p, p, p, p, SIZE_MAX, 5, 1e-5f, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "overflow");
  CHECK_EQ_INT(k_batch_norm_f16_cuda(NULL, NULL, NULL, NULL, NULL, NULL, 2, 0, 3, 1e-5f, NULL, &e),
               0);
  CHECK_EQ_INT(k_batch_norm_f16_cuda(p, p, p, NULL, p, NULL, 1, 2, 3, 1e-5f, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_batch_norm_f16_cuda");
  CHECK_EQ_INT(k_batch_norm_f16_cuda(p, p, p, p, p, p, SIZE_MAX, 2, 3, 1e-5f, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "overflow");

  // Bias + activation.
  CHECK_EQ_INT(k_bias_act_f16_cuda(NULL, NULL, NULL, 0, 8, K_ACT_RELU, NULL, &e), 0);
  CHECK_EQ_INT(k_bias_act_f16_cuda(NULL, p, p, 2, 8, K_ACT_RELU, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_bias_act_f16_cuda");
  CHECK_EQ_INT(k_bias_act_f16_cuda(p, p, p, 2, 8, (k_act)9, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "activation");
  CHECK_EQ_INT(k_bias_act_f16_cuda(p, p, p, SIZE_MAX, 8, K_ACT_NONE, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "overflow");
}

int main(void) {
  test_errors();
  tk_require_device();
  test_unary();
  test_binary();
  test_softmax();
  test_norm();
  test_bias_act();
  CHECK_DONE();
}
