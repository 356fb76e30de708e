// kernels/index/k_index.c: data movement of any element size: broadcasting copies
// (Where, Expand, Tile), Gather, GatherElements, GatherND, Slice, Pad and Trilu.
// Most walk the output once with an odometer and compute the source offset
// per element: these ops move shape tensors and small masks far more often
// than activations, so clarity wins over speed here.
#include "kernels/k_ref.h"
#include "kernels/resize/k_resize_math.h"

#include <string.h>

// Element strides of a contiguous tensor of shape d broadcast to y: 0 on
// the dims it repeats.
static void bstrides(int64_t *s, const int64_t *d, const int64_t *y, int nd) {
  int64_t acc = 1;
  for (int i = nd - 1; i >= 0; i--) {
    s[i] = d[i] == 1 && y[i] != 1 ? 0 : acc;
    acc *= d[i];
  }
}

static int64_t count(int nd, const int64_t *d) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= d[i];
  return n;
}

// Advances idx over dims d, keeping off[k] += strides[k][dim]; false at the end.
static int step(int nd, const int64_t *d, int64_t *idx, int nsrc, int64_t (*st)[K_MAX_DIMS],
                int64_t *off) {
  for (int i = nd - 1; i >= 0; i--) {
    for (int k = 0; k < nsrc; k++) off[k] += st[k][i];
    if (++idx[i] < d[i]) return 1;
    for (int k = 0; k < nsrc; k++) off[k] -= st[k][i] * d[i];
    idx[i] = 0;
  }
  return 0;
}

void k_where(void *y, const uint8_t *cond, const void *a, const void *b, size_t esz, int ndim,
             const int64_t *ydims, const int64_t *cdims, const int64_t *adims,
             const int64_t *bdims) {
  int64_t n = count(ndim, ydims), st[3][K_MAX_DIMS], off[3] = {0, 0, 0}, idx[K_MAX_DIMS] = {0};
  if (n <= 0) return;
  bstrides(st[0], cdims, ydims, ndim);
  bstrides(st[1], adims, ydims, ndim);
  bstrides(st[2], bdims, ydims, ndim);
  uint8_t *py = y;
  const uint8_t *pa = a, *pb = b;
  for (int64_t i = 0; i < n; i++) {
    const uint8_t *src = cond[off[0]] ? pa + (size_t)off[1] * esz : pb + (size_t)off[2] * esz;
    memcpy(py + (size_t)i * esz, src, esz);
    step(ndim, ydims, idx, 3, st, off);
  }
}

void k_expand(void *y, const void *x, size_t esz, int ndim, const int64_t *ydims,
              const int64_t *xdims) {
  int64_t n = count(ndim, ydims), st[1][K_MAX_DIMS], off[1] = {0}, idx[K_MAX_DIMS] = {0};
  if (n <= 0) return;
  bstrides(st[0], xdims, ydims, ndim);
  uint8_t *py = y;
  const uint8_t *px = x;
  for (int64_t i = 0; i < n; i++) {
    memcpy(py + (size_t)i * esz, px + (size_t)off[0] * esz, esz);
    step(ndim, ydims, idx, 1, st, off);
  }
}

void k_tile(void *y, const void *x, size_t esz, int ndim, const int64_t *ydims, const int64_t *xdims) {
  int64_t n = count(ndim, ydims), idx[K_MAX_DIMS] = {0}, xst[K_MAX_DIMS];
  if (n <= 0) return;
  if (ndim == 0) {
    memcpy(y, x, esz);
    return;
  }
  int64_t acc = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    xst[i] = acc;
    acc *= xdims[i];
  }
  // the innermost run of x is contiguous: copied whole, once per repeat of the last dim
  int64_t run = xdims[ndim - 1], runs = n / run;
  size_t rb = (size_t)run * esz;
  uint8_t *py = y;
  const uint8_t *px = x;
  for (int64_t r = 0; r < runs; r++) {
    int64_t off = 0;
    for (int i = 0; i < ndim - 1; i++) off += (idx[i] % xdims[i]) * xst[i];
    memcpy(py + (size_t)r * rb, px + (size_t)off * esz, rb);
    // odometer over the output's runs: the last dim counts runs of x, the others elements
    for (int i = ndim - 1; i >= 0; i--) {
      int64_t lim = i == ndim - 1 ? ydims[i] / run : ydims[i];
      if (++idx[i] < lim) break;
      idx[i] = 0;
    }
  }
}

int k_gather(void *y, const void *x, size_t esz, size_t outer, int64_t axis_len, size_t inner,
             const void *idx, int idx_i32, size_t n_idx) {
  uint8_t *py = y;
  const uint8_t *px = x;
  size_t row = inner * esz;
  for (size_t o = 0; o < outer; o++)
    for (size_t j = 0; j < n_idx; j++) {
      int64_t k = idx_i32 ? ((const int32_t *)idx)[j] : ((const int64_t *)idx)[j];
      if (k < 0) k += axis_len;
      if (k < 0 || k >= axis_len) return -1;
      memcpy(py + (o * n_idx + j) * row, px + (o * (size_t)axis_len + (size_t)k) * row, row);
    }
  return 0;
}

static inline int64_t index_at(const void *idx, int idx_i32, size_t i) {
  return idx_i32 ? ((const int32_t *)idx)[i] : ((const int64_t *)idx)[i];
}

// GatherElements' and ScatterElements' walk: over an index tensor of shape
// idims, each index element's offset into the tensor of dims the axis runs
// through (x or y): the element's own coordinates, the axis's replaced by
// the index value.
typedef struct axis_walk {
  int ndim;
  const int64_t *idims;
  const void *idx;
  int idx_i32;
  int64_t axis_stride, len, st[1][K_MAX_DIMS], off[1], pos[K_MAX_DIMS];
} axis_walk;

// Returns how many index elements there are (none: dims is not read).
static int64_t axis_walk_init(axis_walk *w, int ndim, const int64_t *dims, int axis, const void *idx, int idx_i32,
                              const int64_t *idims) {
  int64_t n = count(ndim, idims);
  w->ndim = ndim, w->idims = idims, w->idx = idx, w->idx_i32 = idx_i32;
  w->off[0] = 0, w->axis_stride = 1, w->len = 0;
  if (n <= 0) return n;
  memset(w->pos, 0, sizeof w->pos);
  // dims's row-major strides, 0 on the axis: it contributes through the index instead
  int64_t acc = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    w->st[0][i] = i == axis ? 0 : acc;
    if (i == axis) w->axis_stride = acc;
    acc *= dims[i];
  }
  w->len = dims[axis];
  return n;
}

// The offset of index element i, called for i = 0, 1, ... in turn; -1 for an
// index out of [-len, len).
static int64_t axis_walk_next(axis_walk *w, int64_t i) {
  int64_t k = index_at(w->idx, w->idx_i32, (size_t)i);
  if (k < 0) k += w->len;
  if (k < 0 || k >= w->len) return -1;
  int64_t o = w->off[0] + k * w->axis_stride;
  step(w->ndim, w->idims, w->pos, 1, w->st, w->off);
  return o;
}

int k_gather_elements(void *y, const void *x, size_t esz, int ndim, const int64_t *xdims,
                      int axis, const void *idx, int idx_i32, const int64_t *idims) {
  axis_walk w;
  int64_t n = axis_walk_init(&w, ndim, xdims, axis, idx, idx_i32, idims);
  uint8_t *py = y;
  const uint8_t *px = x;
  for (int64_t i = 0; i < n; i++) {
    int64_t o = axis_walk_next(&w, i);
    if (o < 0) return -1;
    memcpy(py + (size_t)i * esz, px + (size_t)o * esz, esz);
  }
  return 0;
}

int k_gather_nd(void *y, const void *x, size_t esz, size_t batch, int m, const int64_t *d,
                size_t slice, const void *idx, int idx_i32, size_t n_tuples) {
  size_t per_batch = (size_t)count(m, d) * slice, row = slice * esz;
  uint8_t *py = y;
  const uint8_t *px = x;
  for (size_t b = 0; b < batch; b++)
    for (size_t t = 0; t < n_tuples; t++) {
      size_t at = (b * n_tuples + t) * (size_t)m, off = 0;
      for (int j = 0; j < m; j++) {
        int64_t k = index_at(idx, idx_i32, at + (size_t)j);
        if (k < 0) k += d[j];
        if (k < 0 || k >= d[j]) return -1;
        off = off * (size_t)d[j] + (size_t)k;
      }
      if (row) memcpy(py + (b * n_tuples + t) * row, px + (b * per_batch + off * slice) * esz, row);
    }
  return 0;
}

void k_trilu(void *y, const void *x, size_t esz, size_t batch, int64_t rows, int64_t cols,
             int64_t k, int upper) {
  uint8_t *py = y;
  const uint8_t *px = x;
  for (size_t b = 0; b < batch; b++)
    for (int64_t i = 0; i < rows; i++) {
      size_t at = (b * (size_t)rows + (size_t)i) * (size_t)cols * esz;
      // kept columns [lo, hi): j >= i + k (upper) or j <= i + k (lower), clamped to the
      // row; a k beyond the matrix is clamped first so i + k cannot overflow
      int64_t lo = 0, hi = cols;
      if (upper) {
        lo = k > cols ? cols : k < -rows ? 0 : i + k;
        lo = lo < 0 ? 0 : lo > cols ? cols : lo;
      } else {
        hi = k > cols ? cols : k < -rows ? 0 : i + k + 1;
        hi = hi < 0 ? 0 : hi > cols ? cols : hi;
      }
      if (py != px && hi > lo)
        memcpy(py + at + (size_t)lo * esz, px + at + (size_t)lo * esz, (size_t)(hi - lo) * esz);
      if (lo > 0) memset(py + at, 0, (size_t)lo * esz);
      if (hi < cols) memset(py + at + (size_t)hi * esz, 0, (size_t)(cols - hi) * esz);
    }
}

void k_slice(void *y, const void *x, size_t esz, int ndim, const int64_t *xdims,
             const int64_t *starts, const int64_t *steps, const int64_t *ydims) {
  int64_t n = count(ndim, ydims), st[1][K_MAX_DIMS], off[1] = {0}, idx[K_MAX_DIMS] = {0};
  if (n <= 0) return;
  int64_t acc = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    st[0][i] = steps[i] * acc;
    off[0] += starts[i] * acc;
    acc *= xdims[i];
  }
  uint8_t *py = y;
  const uint8_t *px = x;
  for (int64_t i = 0; i < n; i++) {
    memcpy(py + (size_t)i * esz, px + (size_t)off[0] * esz, esz);
    step(ndim, ydims, idx, 1, st, off);
  }
}

void k_pad(void *y, const void *x, size_t esz, int ndim, const int64_t *xdims,
           const int64_t *begin, const int64_t *ydims, k_padmode mode, const void *value) {
  int64_t n = count(ndim, ydims), idx[K_MAX_DIMS] = {0}, xst[K_MAX_DIMS];
  if (n <= 0) return;
  int64_t acc = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    xst[i] = acc;
    acc *= xdims[i];
  }
  uint8_t *py = y;
  const uint8_t *px = x;
  for (int64_t i = 0; i < n; i++) {
    int64_t off = 0;
    for (int d = 0; d < ndim && off >= 0; d++) {
      int64_t s = k_pad_src(idx[d] - begin[d], xdims[d], mode);
      off = s < 0 ? -1 : off + s * xst[d];
    }
    memcpy(py + (size_t)i * esz, off < 0 ? value : px + (size_t)off * esz, esz);
    for (int d = ndim - 1; d >= 0; d--) {
      if (++idx[d] < ydims[d]) break;
      idx[d] = 0;
    }
  }
}

// --- ScatterElements, ScatterND: y already holds the data; each update is
// written (K_SCATTER_NONE, any element size) or combined into its target in
// the element's own type (the reductions; -1 for a type without them).

static int scatter_takes(k_elem t, k_scatter_red red) {
  return red == K_SCATTER_NONE || t == K_F32 || t == K_F64 || t == K_I32 || t == K_I64;
}

#define COMBINE(T, d, s, red)                                              \
  do {                                                                     \
    T a_, b_;                                                              \
    memcpy(&a_, (d), sizeof a_);                                           \
    memcpy(&b_, (s), sizeof b_);                                           \
    switch (red) {                                                         \
      case K_SCATTER_ADD: a_ = (T)(a_ + b_); break;                        \
      case K_SCATTER_MUL: a_ = (T)(a_ * b_); break;                        \
      case K_SCATTER_MAX: a_ = b_ > a_ ? b_ : a_; break;                   \
      case K_SCATTER_MIN: a_ = b_ < a_ ? b_ : a_; break;                   \
      default: a_ = b_; break;                                             \
    }                                                                      \
    memcpy((d), &a_, sizeof a_);                                           \
  } while (0)

static void put(uint8_t *d, const uint8_t *s, size_t esz, k_elem t, k_scatter_red red) {
  if (red == K_SCATTER_NONE) {
    memcpy(d, s, esz);
    return;
  }
  switch (t) {
    case K_F32: COMBINE(float, d, s, red); break;
    case K_F64: COMBINE(double, d, s, red); break;
    case K_I32: COMBINE(int32_t, d, s, red); break;
    case K_I64: COMBINE(int64_t, d, s, red); break;
    default: break;
  }
}

int k_scatter_elements(void *y, const void *upd, size_t esz, k_elem t, int ndim, const int64_t *ydims, int axis,
                       const void *idx, int idx_i32, const int64_t *idims, k_scatter_red red) {
  if (!scatter_takes(t, red)) return -1;
  axis_walk w;
  int64_t n = axis_walk_init(&w, ndim, ydims, axis, idx, idx_i32, idims);
  uint8_t *py = y;
  const uint8_t *pu = upd;
  for (int64_t i = 0; i < n; i++) {
    int64_t o = axis_walk_next(&w, i);
    if (o < 0) return -1;
    put(py + (size_t)o * esz, pu + (size_t)i * esz, esz, t, red);
  }
  return 0;
}

int k_scatter_nd(void *y, const void *upd, size_t esz, k_elem t, int ydim, const int64_t *ydims, const void *idx,
                 int idx_i32, size_t n_tuples, int m, k_scatter_red red) {
  if (!scatter_takes(t, red) || m > ydim) return -1;
  size_t slice = (size_t)count(ydim - m, ydims + m);
  uint8_t *py = y;
  const uint8_t *pu = upd;
  for (size_t tu = 0; tu < n_tuples; tu++) {
    size_t off = 0;
    for (int j = 0; j < m; j++) {
      int64_t k = index_at(idx, idx_i32, tu * (size_t)m + (size_t)j);
      if (k < 0) k += ydims[j];
      if (k < 0 || k >= ydims[j]) return -1;
      off = off * (size_t)ydims[j] + (size_t)k;
    }
    for (size_t s = 0; s < slice; s++)
      put(py + (off * slice + s) * esz, pu + (tu * slice + s) * esz, esz, t, red);
  }
  return 0;
}
