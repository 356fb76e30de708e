// tests/gpu/test_cuda_conv_util.c: the pieces the files of the test_cuda_conv
// binary share (test_cuda_conv_util.h): check.h's counters, the seeded random
// source (one sequence, drawn from in the order main() runs the parts) and
// tensors between NCHW floats on the host and the device's layout and type.
#include <stdint.h>
#include <stdlib.h>

#include "kernels/k_ref.h"
#include "test_cuda_conv_util.h"

// check.h's counters, one pair for the binary's files (CHECK_SHARED)
int check_failures_ = 0;
int check_count_ = 0;

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float urand(void) {  // uniform in [-1, 1)
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((double)(rng >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
}
float *rand_buf(size_t n, bool fp16) {
  float *p = malloc((n ? n : 1) * sizeof *p);
  for (size_t i = 0; i < n; i++) p[i] = urand();
  if (fp16 && n) {  // the reference sees exactly what the GPU gets
    uint16_t *h = malloc(n * sizeof *h);
    k_f32_to_f16(h, p, n);
    k_f16_to_f32(p, h, n);
    free(h);
  }
  return p;
}

// NCHW float <-> device bytes in layout/type
void *to_dev(const float *nchw, int n, int c, int h, int w, eng_cuconv_layout l,
             eng_cuconv_dtype dt) {
  size_t cnt = (size_t)n * c * h * w, es = dt == ENG_CUCONV_FP16 ? 2 : 4;
  float *t = malloc(cnt * sizeof *t);
  for (int a = 0; a < n; a++)
    for (int b = 0; b < c; b++)
      for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
          size_t src = (((size_t)a * c + b) * h + y) * w + x;
          size_t dst = l == ENG_CUCONV_NCHW ? src : (((size_t)a * h + y) * w + x) * c + b;
          t[dst] = nchw[src];
        }
  void *host = t;
  uint16_t *h16 = NULL;
  if (es == 2) {
    h16 = malloc(cnt * 2);
    k_f32_to_f16(h16, t, cnt);
    host = h16;
  }
  void *d = NULL;
  TC(cudaMalloc(&d, cnt * es));
  TC(cudaMemcpy(d, host, cnt * es, cudaMemcpyHostToDevice));
  free(t);
  free(h16);
  return d;
}

float *from_dev(const void *d, int n, int c, int h, int w, eng_cuconv_layout l,
                eng_cuconv_dtype dt) {
  size_t cnt = (size_t)n * c * h * w, es = dt == ENG_CUCONV_FP16 ? 2 : 4;
  float *t = malloc(cnt * sizeof *t), *out = malloc(cnt * sizeof *out);
  if (es == 2) {
    uint16_t *h16 = malloc(cnt * 2);
    TC(cudaMemcpy(h16, d, cnt * 2, cudaMemcpyDeviceToHost));
    k_f16_to_f32(t, h16, cnt);
    free(h16);
  } else {
    TC(cudaMemcpy(t, d, cnt * 4, cudaMemcpyDeviceToHost));
  }
  for (int a = 0; a < n; a++)
    for (int b = 0; b < c; b++)
      for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
          size_t dst = (((size_t)a * c + b) * h + y) * w + x;
          size_t src = l == ENG_CUCONV_NCHW ? dst : (((size_t)a * h + y) * w + x) * c + b;
          out[dst] = t[src];
        }
  free(t);
  return out;
}

void *dev_copy(const void *host, size_t bytes) {
  void *d = NULL;
  TC(cudaMalloc(&d, bytes ? bytes : 1));
  if (bytes) TC(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice));
  return d;
}
