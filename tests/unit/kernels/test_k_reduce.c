// Tests kernels/reduce/k_reduce.c: every k_redop on FP32 against plain
// double-precision formulas over each set of axes of a 3-D tensor (the
// ONNX node tests of ReduceL1/L2/LogSum/LogSumExp/SumSquare/Prod give their
// axes as graph inputs, which the planner refuses, so their values are
// checked here), ReduceLogSumExp on values whose exp overflows FP32, empty
// reductions, ReduceProd on integers (wrapping), what k_reduce refuses, and
// k_arg_reduce (first or last extreme, integers, len 0), and k_topk's order
// with NaN (test_topk_nan).
#include <stdint.h>

#include "check.h"
#include "kernels/k_ref.h"

enum { D0 = 3, D1 = 4, D2 = 5, N = D0 * D1 * D2 };

static double ref_fold(k_redop op, const float *x, int n, int stride, int start, const int *idx) {
  (void)stride, (void)start;
  double acc = op == K_RPROD ? 1.0 : op == K_RMAX || op == K_RLOGSUMEXP ? -INFINITY
             : op == K_RMIN ? INFINITY : 0.0;
  double m = -INFINITY;
  for (int i = 0; i < n; i++) m = x[idx[i]] > m ? x[idx[i]] : m;
  for (int i = 0; i < n; i++) {
    double v = x[idx[i]];
    switch (op) {
      case K_RSUM: case K_RMEAN: case K_RLOGSUM: acc += v; break;
      case K_RMAX: acc = v > acc ? v : acc; break;
      case K_RMIN: acc = v < acc ? v : acc; break;
      case K_RPROD: acc *= v; break;
      case K_RSUMSQ: case K_RL2: acc += v * v; break;
      case K_RL1: acc += fabs(v); break;
      case K_RLOGSUMEXP: acc = (i == 0 ? 0.0 : acc) + exp(v - m); break;
    }
  }
  switch (op) {
    case K_RMEAN: return acc / n;
    case K_RL2: return sqrt(acc);
    case K_RLOGSUM: return log(acc);
    case K_RLOGSUMEXP: return m + log(acc);
    default: return acc;
  }
}

static void test_f32_ops(void) {
  float x[N];
  for (int i = 0; i < N; i++) x[i] = 0.25f + 0.5f * (float)((i * 37) % 11) / 11.0f;  // positive: LogSum defined
  const int64_t dims[3] = {D0, D1, D2};
  static const k_redop ops[] = {K_RSUM, K_RMEAN, K_RMAX, K_RMIN, K_RPROD, K_RSUMSQ, K_RL1, K_RL2,
                                K_RLOGSUM, K_RLOGSUMEXP};
  int bad = 0, checked = 0;
  for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
    for (int m = 1; m < 8; m++) {  // every nonempty set of axes
      int mask[3] = {m & 1, (m >> 1) & 1, (m >> 2) & 1};
      float y[N];
      CHECK_EQ_INT(k_reduce(y, x, K_F32, 3, dims, mask, ops[o]), 0);
      int yi = 0;
      for (int a = 0; a < (mask[0] ? 1 : D0); a++)
        for (int b = 0; b < (mask[1] ? 1 : D1); b++)
          for (int c = 0; c < (mask[2] ? 1 : D2); c++) {
            int idx[N], n = 0;
            for (int i = 0; i < D0; i++)
              for (int j = 0; j < D1; j++)
                for (int k = 0; k < D2; k++)
                  if ((mask[0] || i == a) && (mask[1] || j == b) && (mask[2] || k == c))
                    idx[n++] = (i * D1 + j) * D2 + k;
            double want = ref_fold(ops[o], x, n, 0, 0, idx);
            if (fabs(y[yi] - want) > 1e-5 * fabs(want) + 1e-6) {
              bad++;
              fprintf(stderr, "op %d mask %d out %d: %g, want %g\n", (int)ops[o], m, yi, y[yi], want);
            }
            yi++;
            checked++;
          }
    }
  CHECK_EQ_INT(bad, 0);
  CHECK(checked > 100);
}

static void test_logsumexp_large(void) {
  float x[3] = {1000.0f, 1000.0f, -INFINITY}, y;
  int64_t d = 3;
  int mask = 1;
  CHECK_EQ_INT(k_reduce(&y, x, K_F32, 1, &d, &mask, K_RLOGSUMEXP), 0);
  CHECK_NEAR(y, 1000.0 + log(2.0), 1e-6, 0);
  float z[2] = {-INFINITY, -INFINITY};
  d = 2;
  CHECK_EQ_INT(k_reduce(&y, z, K_F32, 1, &d, &mask, K_RLOGSUMEXP), 0);
  CHECK(y == -INFINITY);
}

static void test_empty(void) {
  // reducing an empty axis: the identity of each op (log(0) for LogSum)
  float x[1] = {0}, y[2];
  int64_t d[2] = {2, 0};
  int mask[2] = {0, 1};
  CHECK_EQ_INT(k_reduce(y, x, K_F32, 2, d, mask, K_RPROD), 0);
  CHECK(y[0] == 1.0f && y[1] == 1.0f);
  CHECK_EQ_INT(k_reduce(y, x, K_F32, 2, d, mask, K_RL2), 0);
  CHECK(y[0] == 0.0f && y[1] == 0.0f);
  CHECK_EQ_INT(k_reduce(y, x, K_F32, 2, d, mask, K_RLOGSUM), 0);
  CHECK(y[0] == -INFINITY);
  CHECK_EQ_INT(k_reduce(y, x, K_F32, 2, d, mask, K_RLOGSUMEXP), 0);
  CHECK(y[1] == -INFINITY);
}

static void test_int(void) {
  int32_t x[4] = {3, -4, 65536, 65536}, y[2] = {7, 7};
  int64_t d[2] = {2, 2};
  int mask[2] = {0, 1};
  CHECK_EQ_INT(k_reduce(y, x, K_I32, 2, d, mask, K_RPROD), 0);
  CHECK_EQ_INT(y[0], -12);
  CHECK_EQ_INT(y[1], 0);  // 2^32 wraps to 0
  uint8_t u[3] = {200, 2, 1}, uy = 9;
  int64_t d1 = 3;
  int m1 = 1;
  CHECK_EQ_INT(k_reduce(&uy, u, K_U8, 1, &d1, &m1, K_RPROD), 0);
  CHECK_EQ_INT(uy, 144);  // 400 mod 256
  // the float-only ops are refused on integers, the output untouched
  y[0] = 7;
  CHECK_EQ_INT(k_reduce(y, x, K_I32, 2, d, mask, K_RL2), -1);
  CHECK_EQ_INT(k_reduce(y, x, K_I32, 2, d, mask, K_RLOGSUMEXP), -1);
  CHECK_EQ_INT(y[0], 7);
}

static void test_arg(void) {
  // [2, 3, 2] along the middle axis
  float x[12] = {1, 5, 3, 5, 3, 0,  -1, 2, -1, 2, -7, 2};
  int64_t y[4];
  CHECK_EQ_INT(k_arg_reduce(y, x, K_F32, 2, 3, 2, 0, 0), 0);
  CHECK(y[0] == 1 && y[1] == 0 && y[2] == 0 && y[3] == 0);
  CHECK_EQ_INT(k_arg_reduce(y, x, K_F32, 2, 3, 2, 0, 1), 0);  // the last of equal maxima
  CHECK(y[0] == 2 && y[1] == 1 && y[2] == 1 && y[3] == 2);
  CHECK_EQ_INT(k_arg_reduce(y, x, K_F32, 2, 3, 2, 1, 0), 0);
  CHECK(y[0] == 0 && y[1] == 2 && y[2] == 2 && y[3] == 0);
  CHECK_EQ_INT(k_arg_reduce(y, x, K_F32, 2, 3, 2, 1, 1), 0);
  CHECK(y[0] == 0 && y[1] == 2 && y[2] == 2 && y[3] == 2);
  int8_t xi[4] = {-128, 127, 127, -128};
  CHECK_EQ_INT(k_arg_reduce(y, xi, K_I8, 1, 4, 1, 0, 1), 0);
  CHECK_EQ_INT(y[0], 2);
  CHECK_EQ_INT(k_arg_reduce(y, xi, K_I8, 1, 4, 1, 1, 0), 0);
  CHECK_EQ_INT(y[0], 0);
  uint64_t xu[2] = {UINT64_MAX, 1};
  CHECK_EQ_INT(k_arg_reduce(y, xu, K_U64, 1, 2, 1, 0, 0), 0);
  CHECK_EQ_INT(y[0], 0);
  CHECK_EQ_INT(k_arg_reduce(y, x, K_F32, 1, 0, 1, 0, 0), -1);  // nothing to pick
  CHECK_EQ_INT(k_arg_reduce(y, x, K_BOOL, 1, 2, 1, 0, 0), -1);
}

// k_topk: ties to the lower index, and NaN above every number (the CUDA
// path's order): first among the largest, last among the smallest, equal
// NaNs by index, wherever they stand in the row.
static void test_topk_nan(void) {
  const float nan = NAN;
  float x[7] = {1, nan, 3, -0.0f, nan, 3, 0.0f}, v[7];
  int64_t i[7];
  CHECK_EQ_INT(k_topk(v, i, x, K_F32, 1, 7, 1, 7, 1), 0);
  const int64_t want_l[7] = {1, 4, 2, 5, 0, 3, 6};
  for (int j = 0; j < 7; j++) CHECK_EQ_INT(i[j], want_l[j]);
  CHECK(v[0] != v[0] && v[1] != v[1] && v[2] == 3 && v[4] == 1);
  CHECK_EQ_INT(k_topk(v, i, x, K_F32, 1, 7, 1, 7, 0), 0);
  const int64_t want_s[7] = {3, 6, 0, 2, 5, 1, 4};  // -0 and +0 equal: the lower index first
  for (int j = 0; j < 7; j++) CHECK_EQ_INT(i[j], want_s[j]);
  CHECK_EQ_INT(k_topk(v, i, x, K_F32, 1, 7, 1, 2, 0), 0);  // k 2: the NaNs never reached
  CHECK(i[0] == 3 && i[1] == 6);
  // a NaN first in the row: still above every number (the insertion once left it where it was met)
  double xd[4] = {nan, 5, -2, 9}, vd[4];
  CHECK_EQ_INT(k_topk(vd, i, xd, K_F64, 1, 4, 1, 2, 1), 0);
  CHECK(i[0] == 0 && i[1] == 3);
  CHECK_EQ_INT(k_topk(vd, i, xd, K_F64, 1, 4, 1, 4, 0), 0);
  CHECK(i[0] == 2 && i[1] == 1 && i[2] == 3 && i[3] == 0);
  int32_t xi[5] = {4, -1, 4, 7, -1}, vi[3];
  CHECK_EQ_INT(k_topk(vi, i, xi, K_I32, 1, 5, 1, 3, 1), 0);
  CHECK(i[0] == 3 && i[1] == 0 && i[2] == 2 && vi[0] == 7 && vi[2] == 4);
}

int main(void) {
  test_topk_nan();
  test_f32_ops();
  test_logsumexp_large();
  test_empty();
  test_int();
  test_arg();
  CHECK_DONE();
}
