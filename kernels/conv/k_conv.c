// kernels/conv/k_conv.c: the sliding-window references of kernels/conv/k_conv.h. Every op
// runs on the geometry padded to three spatial dims (missing leading dims
// of size 1), so one loop nest serves 1-D, 2-D and 3-D. Sums in double so
// the oracle's own rounding stays far below the tolerances of its checks.
#include "kernels/conv/k_conv.h"
#include "kernels/conv/k_win3.h"

#include <math.h>
#include <string.h>

void k_conv_ref(float *y, const float *x, const float *w, const float *b, const k_window *s) {
  k_win3 g;
  k_win3_from(s, &g);
  int64_t cg = s->c / s->group, mg = s->m / s->group;
  for (int64_t n = 0; n < s->n; n++)
    for (int64_t m = 0; m < s->m; m++) {
      int64_t grp = m / mg;
      const float *wm = w + m * cg * g.ksz;
      float *ym = y + (n * s->m + m) * g.ysz;
      for (int64_t o0 = 0; o0 < g.y[0]; o0++)
        for (int64_t o1 = 0; o1 < g.y[1]; o1++)
          for (int64_t o2 = 0; o2 < g.y[2]; o2++) {
            double acc = b ? b[m] : 0.0;
            for (int64_t ci = 0; ci < cg; ci++) {
              const float *xc = x + (n * s->c + grp * cg + ci) * g.xsz;
              const float *wc = wm + ci * g.ksz;
              for (int64_t t0 = 0; t0 < g.k[0]; t0++) {
                int64_t i0 = o0 * g.s[0] - g.pl[0] + t0 * g.d[0];
                if (i0 < 0 || i0 >= g.x[0]) continue;
                for (int64_t t1 = 0; t1 < g.k[1]; t1++) {
                  int64_t i1 = o1 * g.s[1] - g.pl[1] + t1 * g.d[1];
                  if (i1 < 0 || i1 >= g.x[1]) continue;
                  for (int64_t t2 = 0; t2 < g.k[2]; t2++) {
                    int64_t i2 = o2 * g.s[2] - g.pl[2] + t2 * g.d[2];
                    if (i2 < 0 || i2 >= g.x[2]) continue;
                    acc += (double)xc[(i0 * g.x[1] + i1) * g.x[2] + i2] *
                           wc[(t0 * g.k[1] + t1) * g.k[2] + t2];
                  }
                }
              }
            }
            ym[(o0 * g.y[1] + o1) * g.y[2] + o2] = (float)acc;
          }
    }
}

void k_conv_transpose_ref(float *y, const float *x, const float *w, const float *b,
                          const k_window *s) {
  k_win3 g;
  k_win3_from(s, &g);
  int64_t cg = s->c / s->group, mg = s->m / s->group;
  // Scatter form, accumulated in a double image per output channel so the
  // sum order does not matter for precision.
  for (int64_t n = 0; n < s->n; n++)
    for (int64_t m = 0; m < s->m; m++) {
      int64_t grp = m / mg, mi = m % mg;
      float *ym = y + (n * s->m + m) * g.ysz;
      for (int64_t i = 0; i < g.ysz; i++) ym[i] = b ? b[m] : 0.0f;
      for (int64_t ci = 0; ci < cg; ci++) {
        int64_t c = grp * cg + ci;
        const float *xc = x + (n * s->c + c) * g.xsz;
        const float *wc = w + (c * mg + mi) * g.ksz;
        for (int64_t i0 = 0; i0 < g.x[0]; i0++)
          for (int64_t i1 = 0; i1 < g.x[1]; i1++)
            for (int64_t i2 = 0; i2 < g.x[2]; i2++) {
              float xv = xc[(i0 * g.x[1] + i1) * g.x[2] + i2];
              for (int64_t t0 = 0; t0 < g.k[0]; t0++) {
                int64_t o0 = i0 * g.s[0] - g.pl[0] + t0 * g.d[0];
                if (o0 < 0 || o0 >= g.y[0]) continue;
                for (int64_t t1 = 0; t1 < g.k[1]; t1++) {
                  int64_t o1 = i1 * g.s[1] - g.pl[1] + t1 * g.d[1];
                  if (o1 < 0 || o1 >= g.y[1]) continue;
                  for (int64_t t2 = 0; t2 < g.k[2]; t2++) {
                    int64_t o2 = i2 * g.s[2] - g.pl[2] + t2 * g.d[2];
                    if (o2 < 0 || o2 >= g.y[2]) continue;
                    ym[(o0 * g.y[1] + o1) * g.y[2] + o2] +=
                        xv * wc[(t0 * g.k[1] + t1) * g.k[2] + t2];
                  }
                }
              }
            }
      }
    }
}

void k_pool_ref(float *y, const float *x, const k_window *s, k_pool_kind kind) {
  k_win3 g;
  k_win3_from(s, &g);
  for (int64_t nc = 0; nc < s->n * s->c; nc++) {
    const float *xc = x + nc * g.xsz;
    float *yc = y + nc * g.ysz;
    for (int64_t o0 = 0; o0 < g.y[0]; o0++)
      for (int64_t o1 = 0; o1 < g.y[1]; o1++)
        for (int64_t o2 = 0; o2 < g.y[2]; o2++) {
          double acc = kind == K_POOL_MAX ? -INFINITY : 0.0;
          int64_t inside = 0, padded = 0;
          for (int64_t t0 = 0; t0 < g.k[0]; t0++) {
            int64_t i0 = o0 * g.s[0] - g.pl[0] + t0 * g.d[0];
            if (i0 >= g.x[0] + g.pr[0]) continue;
            for (int64_t t1 = 0; t1 < g.k[1]; t1++) {
              int64_t i1 = o1 * g.s[1] - g.pl[1] + t1 * g.d[1];
              if (i1 >= g.x[1] + g.pr[1]) continue;
              for (int64_t t2 = 0; t2 < g.k[2]; t2++) {
                int64_t i2 = o2 * g.s[2] - g.pl[2] + t2 * g.d[2];
                if (i2 >= g.x[2] + g.pr[2]) continue;
                padded++;
                if (i0 < 0 || i0 >= g.x[0] || i1 < 0 || i1 >= g.x[1] || i2 < 0 || i2 >= g.x[2])
                  continue;
                inside++;
                double v = xc[(i0 * g.x[1] + i1) * g.x[2] + i2];
                if (kind == K_POOL_MAX) acc = v > acc ? v : acc;
                else acc += v;
              }
            }
          }
          float out;
          if (kind == K_POOL_MAX) out = (float)acc;
          else if (kind == K_POOL_AVG_INCLUDE) out = padded ? (float)(acc / (double)padded) : 0.0f;
          else out = inside ? (float)(acc / (double)inside) : 0.0f;
          yc[(o0 * g.y[1] + o1) * g.y[2] + o2] = out;
        }
  }
}
