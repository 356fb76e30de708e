// kernels/conv/k_qconv.c: the integer convolution of ConvInteger and
// QLinearConv (k_conv.h): int32 sums of (x - x_zp)(w - w_zp) over the
// window, one body expanded per pair of 8-bit element types (UINT8 or INT8
// for each of x and w), as onnxruntime and ONNX's reference compute them.
// A tap in the padding adds nothing: padding is x's zero point, the real
// zero. The oracle of the oneDNN int8 path (engine/cpu/qconv_dnnl.c) and
// the path for what oneDNN does not take (UINT8 weights, weight zero
// points). Sums of 8-bit products fit int32 for any kernel of fewer than
// 2^31 / 255^2 = 33025 taps per output; the geometry check refuses more.
#include "kernels/conv/k_conv.h"
#include "kernels/conv/k_win3.h"

#include <string.h>

// One body per (x type, w type): XT and WT the C types.
#define QCONV_BODY(XT, WT)                                                                          \
  static void qconv_##XT##_##WT(int32_t *y, const XT *x, int32_t xzp, const WT *w, const int32_t *wzp, \
                                int wzp_per_m, const k_window *s, const k_win3 *g) {                 \
    int64_t cg = s->c / s->group, mg = s->m / s->group;                                             \
    for (int64_t n = 0; n < s->n; n++)                                                              \
      for (int64_t m = 0; m < s->m; m++) {                                                          \
        int64_t grp = m / mg;                                                                       \
        int32_t wz = wzp ? wzp[wzp_per_m ? m : 0] : 0;                                              \
        const WT *wm = w + m * cg * g->ksz;                                                         \
        int32_t *ym = y + (n * s->m + m) * g->ysz;                                                  \
        for (int64_t o0 = 0; o0 < g->y[0]; o0++)                                                    \
          for (int64_t o1 = 0; o1 < g->y[1]; o1++)                                                  \
            for (int64_t o2 = 0; o2 < g->y[2]; o2++) {                                              \
              int32_t acc = 0;                                                                      \
              for (int64_t ci = 0; ci < cg; ci++) {                                                 \
                const XT *xc = x + (n * s->c + grp * cg + ci) * g->xsz;                             \
                const WT *wc = wm + ci * g->ksz;                                                    \
                for (int64_t t0 = 0; t0 < g->k[0]; t0++) {                                          \
                  int64_t i0 = o0 * g->s[0] - g->pl[0] + t0 * g->d[0];                              \
                  if (i0 < 0 || i0 >= g->x[0]) continue;                                            \
                  for (int64_t t1 = 0; t1 < g->k[1]; t1++) {                                        \
                    int64_t i1 = o1 * g->s[1] - g->pl[1] + t1 * g->d[1];                            \
                    if (i1 < 0 || i1 >= g->x[1]) continue;                                          \
                    for (int64_t t2 = 0; t2 < g->k[2]; t2++) {                                      \
                      int64_t i2 = o2 * g->s[2] - g->pl[2] + t2 * g->d[2];                          \
                      if (i2 < 0 || i2 >= g->x[2]) continue;                                        \
                      acc += ((int32_t)xc[(i0 * g->x[1] + i1) * g->x[2] + i2] - xzp) *              \
                             ((int32_t)wc[(t0 * g->k[1] + t1) * g->k[2] + t2] - wz);                \
                    }                                                                               \
                  }                                                                                 \
                }                                                                                   \
              }                                                                                     \
              ym[(o0 * g->y[1] + o1) * g->y[2] + o2] = acc;                                         \
            }                                                                                       \
      }                                                                                             \
  }
QCONV_BODY(uint8_t, uint8_t)
QCONV_BODY(uint8_t, int8_t)
QCONV_BODY(int8_t, uint8_t)
QCONV_BODY(int8_t, int8_t)
#undef QCONV_BODY

int k_conv_int_ref(int32_t *y, const void *x, k_elem xt, int32_t x_zp, const void *w, k_elem wt,
                   const int32_t *w_zp, int w_zp_per_m, const k_window *s) {
  if ((xt != K_U8 && xt != K_I8) || (wt != K_U8 && wt != K_I8)) return -1;
  k_win3 g;
  k_win3_from(s, &g);
#define CALL(XT, WT) qconv_##XT##_##WT(y, (const XT *)x, x_zp, (const WT *)w, w_zp, w_zp_per_m, s, &g)
  if (xt == K_U8 && wt == K_U8) CALL(uint8_t, uint8_t);
  else if (xt == K_U8) CALL(uint8_t, int8_t);
  else if (wt == K_U8) CALL(int8_t, uint8_t);
  else CALL(int8_t, int8_t);
#undef CALL
  return 0;
}
