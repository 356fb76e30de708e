// kernels/index/k_layout.c: transpose (any element size, up to K_MAX_DIMS dims),
// concatenation and its inverse, split. Transpose walks the output
// contiguously; dims of size 1 are dropped and output dims whose source is
// also contiguous are merged, so a permutation that keeps the innermost dims
// in place becomes one memcpy per run.
#include "kernels/k_ref.h"

#include <string.h>

// Copies `d` elements of `es` bytes from a source with byte stride `ss` into
// contiguous dst; fixed sizes get typed loads (memcpy of a constant size
// compiles to a plain load) instead of a call per element.
static void gather(char *dst, const char *src, size_t es, int64_t d, int64_t ss) {
  if ((size_t)ss == es) {
    memcpy(dst, src, (size_t)d * es);
    return;
  }
  switch (es) {
#define G_CASE(N)                                                              \
  case N:                                                                      \
    for (int64_t i = 0; i < d; i++) memcpy(dst + i * (N), src + i * ss, (N)); \
    return;
    G_CASE(1)
    G_CASE(2)
    G_CASE(4)
    G_CASE(8)
#undef G_CASE
    default:
      for (int64_t i = 0; i < d; i++) memcpy(dst + i * (int64_t)es, src + i * ss, es);
  }
}

void k_transpose(void *y, const void *x, size_t elem_size, int ndim, const int64_t *xdims,
                 const int *perm) {
  if (ndim < 0 || ndim > K_MAX_DIMS || elem_size == 0) return;
  int64_t es = (int64_t)elem_size;
  int64_t xstride[K_MAX_DIMS];
  int64_t acc = es;
  for (int i = ndim - 1; i >= 0; i--) {
    if (xdims[i] <= 0) return;  // empty tensor
    xstride[i] = acc;
    acc *= xdims[i];
  }
  // Output dims with their source strides, merged where possible.
  int nd = 0;
  int64_t dims[K_MAX_DIMS], ss[K_MAX_DIMS];
  for (int i = 0; i < ndim; i++) {
    int64_t d = xdims[perm[i]], s = xstride[perm[i]];
    if (d == 1) continue;
    if (nd > 0 && ss[nd - 1] == s * d) {
      dims[nd - 1] *= d;
      ss[nd - 1] = s;
    } else {
      dims[nd] = d;
      ss[nd] = s;
      nd++;
    }
  }
  if (nd == 0) {
    memcpy(y, x, elem_size);
    return;
  }
  int64_t inner = dims[nd - 1], inner_s = ss[nd - 1];
  int64_t idx[K_MAX_DIMS] = {0};
  int64_t off = 0;
  char *py = y;
  const char *px = x;
  for (;;) {
    gather(py, px + off, elem_size, inner, inner_s);
    py += inner * es;
    int k = nd - 2;
    for (; k >= 0; k--) {
      off += ss[k];
      if (++idx[k] < dims[k]) break;
      off -= ss[k] * dims[k];
      idx[k] = 0;
    }
    if (k < 0) break;
  }
}

void k_concat(void *y, const void *const *xs, const size_t *row_bytes, int n_inputs, size_t outer) {
  char *py = y;
  for (size_t o = 0; o < outer; o++) {
    for (int i = 0; i < n_inputs; i++) {
      size_t rb = row_bytes[i];
      // An empty input may come with a NULL pointer; memcpy must not see it.
      if (rb == 0) continue;
      memcpy(py, (const char *)xs[i] + o * rb, rb);
      py += rb;
    }
  }
}

void k_split(void *const *ys, const size_t *row_bytes, int n_outputs, const void *x, size_t outer) {
  const char *px = x;
  for (size_t o = 0; o < outer; o++) {
    for (int i = 0; i < n_outputs; i++) {
      size_t rb = row_bytes[i];
      // an omitted (NULL) or empty output takes no copy, its piece is skipped
      if (rb && ys[i]) memcpy((char *)ys[i] + o * rb, px, rb);
      px += rb;
    }
  }
}
