// kernels/conv/k_win3.h: a k_window's geometry padded to exactly three spatial
// dims (missing leading dims of size 1), so one loop nest serves 1-D, 2-D and
// 3-D. Shared by the float references (k_conv.c) and the integer convolution
// (k_qconv.c); internal to kernels/conv/.
#ifndef INFERD_KERNELS_CONV_K_WIN3_H
#define INFERD_KERNELS_CONV_K_WIN3_H

#include "kernels/conv/k_conv.h"

typedef struct k_win3 {
  int64_t x[3], y[3], k[3], s[3], d[3], pl[3], pr[3];  // x/y/k/stride/dil/pad_l/pad_r
  int64_t xsz, ysz, ksz;                               // elements per channel
} k_win3;

static inline void k_win3_from(const k_window *s, k_win3 *w) {
  int off = 3 - s->nsp;
  for (int i = 0; i < 3; i++) {
    int j = i - off;
    int have = j >= 0;
    w->x[i] = have ? s->x[j] : 1;
    w->y[i] = have ? s->y[j] : 1;
    w->k[i] = have ? s->k[j] : 1;
    w->s[i] = have ? s->stride[j] : 1;
    w->d[i] = have ? s->dil[j] : 1;
    w->pl[i] = have ? s->pad_l[j] : 0;
    w->pr[i] = have ? s->pad_r[j] : 0;
  }
  w->xsz = w->x[0] * w->x[1] * w->x[2];
  w->ysz = w->y[0] * w->y[1] * w->y[2];
  w->ksz = w->k[0] * w->k[1] * w->k[2];
}

#endif
