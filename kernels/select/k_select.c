// kernels/select/k_select.c: NonMaxSuppression and Unique (k_select.h).
#include "kernels/select/k_select.h"

#include <stdlib.h>
#include <string.h>

// --- NonMaxSuppression

static void min_max(float a, float b, float *lo, float *hi) {
  *lo = a < b ? a : b;
  *hi = a < b ? b : a;
}

// Whether box a suppresses box b (IoU > th), as onnx's reference decides.
static int suppress(const float *a, const float *b, int center, float th) {
  float ax0, ax1, ay0, ay1, bx0, bx1, by0, by1;
  if (center) {
    ax0 = a[0] - a[2] / 2, ax1 = a[0] + a[2] / 2, ay0 = a[1] - a[3] / 2, ay1 = a[1] + a[3] / 2;
    bx0 = b[0] - b[2] / 2, bx1 = b[0] + b[2] / 2, by0 = b[1] - b[3] / 2, by1 = b[1] + b[3] / 2;
  } else {
    min_max(a[1], a[3], &ax0, &ax1);
    min_max(a[0], a[2], &ay0, &ay1);
    min_max(b[1], b[3], &bx0, &bx1);
    min_max(b[0], b[2], &by0, &by1);
  }
  float ix0 = ax0 > bx0 ? ax0 : bx0, ix1 = ax1 < bx1 ? ax1 : bx1;
  if (ix1 <= ix0) return 0;
  float iy0 = ay0 > by0 ? ay0 : by0, iy1 = ay1 < by1 ? ay1 : by1;
  if (iy1 <= iy0) return 0;
  float inter = (ix1 - ix0) * (iy1 - iy0);
  float area_a = (ax1 - ax0) * (ay1 - ay0), area_b = (bx1 - bx0) * (by1 - by0);
  float uni = area_a + area_b - inter;
  if (inter <= 0 || area_a <= 0 || area_b <= 0 || uni <= 0) return 0;
  return inter / uni > th;
}

typedef struct scored {
  float s;
  int64_t i;
} scored;

static int by_score(const void *pa, const void *pb) {
  const scored *a = pa, *b = pb;
  if (a->s != b->s) return a->s > b->s ? -1 : 1;  // descending
  return a->i < b->i ? -1 : a->i > b->i;           // ties: lower index first
}

int64_t k_nms(int64_t *sel, const float *boxes, const float *scores, int64_t B, int64_t C, int64_t N,
              int64_t max_per_class, float iou_th, int has_score_th, float score_th, int center) {
  if (max_per_class <= 0 || N <= 0) return 0;
  scored *cand = malloc((size_t)N * sizeof *cand);
  int64_t *kept = malloc((size_t)N * sizeof *kept);
  if (!cand || !kept) {
    free(cand);
    free(kept);
    return -1;
  }
  int64_t total = 0;
  for (int64_t b = 0; b < B; b++)
    for (int64_t c = 0; c < C; c++) {
      const float *sc = scores + (b * C + c) * N, *bx = boxes + b * N * 4;
      size_t n = 0;
      for (int64_t i = 0; i < N; i++)
        if (!has_score_th || sc[i] > score_th) cand[n++] = (scored){sc[i], i};
      qsort(cand, n, sizeof *cand, by_score);
      int64_t n_kept = 0;
      for (size_t j = 0; j < n && n_kept < max_per_class; j++) {
        int ok = 1;
        for (int64_t k = 0; k < n_kept && ok; k++) ok = !suppress(bx + cand[j].i * 4, bx + kept[k] * 4, center, iou_th);
        if (!ok) continue;
        kept[n_kept++] = cand[j].i;
        if (sel) {
          sel[total * 3] = b;
          sel[total * 3 + 1] = c;
          sel[total * 3 + 2] = cand[j].i;
        }
        total++;
      }
    }
  free(cand);
  free(kept);
  return total;
}

// --- Unique

typedef struct slices {
  const unsigned char *x;
  k_elem t;
  size_t esz, outer, len, inner;
} slices;

// Numeric order of two elements of type t: -1, 0, 1.
static int cmp_elem(k_elem t, const void *a, const void *b) {
  switch (t) {
#define CMP(code, T, sgn)      \
  case code: {                 \
    T u, v;                    \
    memcpy(&u, a, sizeof u);   \
    memcpy(&v, b, sizeof v);   \
    return (u > v) - (u < v);  \
  }
    K_INT_TYPES(CMP)
    K_FLOAT_TYPES(CMP)
#undef CMP
    case K_BOOL: return (*(const uint8_t *)a != 0) - (*(const uint8_t *)b != 0);
    default: return 0;
  }
}

static int cmp_slice(const slices *s, int64_t i, int64_t j) {
  for (size_t o = 0; o < s->outer; o++)
    for (size_t k = 0; k < s->inner; k++) {
      size_t a = ((o * s->len + (size_t)i) * s->inner + k) * s->esz, b = ((o * s->len + (size_t)j) * s->inner + k) * s->esz;
      int c = cmp_elem(s->t, s->x + a, s->x + b);
      if (c) return c;
    }
  return 0;
}

static int by_slice(const void *pa, const void *pb, void *ctx) {
  int64_t i = *(const int64_t *)pa, j = *(const int64_t *)pb;
  int c = cmp_slice(ctx, i, j);
  return c ? c : (i > j) - (i < j);  // equal slices: by index, so each group starts at its first
}

static size_t elem_size(k_elem t) {
  switch (t) {
    case K_F64: case K_I64: case K_U64: return 8;
    case K_F32: case K_I32: case K_U32: return 4;
    case K_F16: case K_I16: case K_U16: return 2;
    default: return 1;
  }
}

int64_t k_unique(const void *x, k_elem t, size_t outer, size_t len, size_t inner, int sorted, int64_t *first,
                 int64_t *inverse, int64_t *counts) {
  if (t == K_F16) return -1;
  slices s = {x, t, elem_size(t), outer, len, inner};
  int64_t *order = malloc((len ? len : 1) * sizeof *order), *grp = malloc((len ? len : 1) * sizeof *grp);
  int64_t *rank = malloc((len ? len : 1) * sizeof *rank);
  if (!order || !grp || !rank) {
    free(order), free(grp), free(rank);
    return -1;
  }
  for (size_t j = 0; j < len; j++) order[j] = (int64_t)j;
  qsort_r(order, len, sizeof *order, by_slice, &s);
  // groups of equal slices in sorted order; grp[j]: slice j's group
  int64_t n = 0;
  for (size_t j = 0; j < len; j++) {
    if (j == 0 || cmp_slice(&s, order[j - 1], order[j]) != 0) first[n++] = order[j];  // first: lowest index
    grp[order[j]] = n - 1;
  }
  // unsorted: groups in order of first occurrence
  for (int64_t u = 0; u < n; u++) rank[u] = u;
  if (!sorted) {
    int64_t next = 0;
    for (size_t j = 0; j < len; j++)
      if (first[grp[j]] == (int64_t)j) rank[grp[j]] = next++;
    int64_t *f2 = order;  // reused: the sorted order is no longer needed
    for (int64_t u = 0; u < n; u++) f2[rank[u]] = first[u];
    memcpy(first, f2, (size_t)n * sizeof *first);
  }
  if (counts) memset(counts, 0, (size_t)n * sizeof *counts);
  for (size_t j = 0; j < len; j++) {
    if (inverse) inverse[j] = rank[grp[j]];
    if (counts) counts[rank[grp[j]]]++;
  }
  free(order), free(grp), free(rank);
  return n;
}
