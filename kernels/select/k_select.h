// kernels/select/k_select.h: the math of the ops whose outputs' shapes are
// their inputs' values (engine/ops/select/): NonMaxSuppression and Unique.
// C reference only (no CUDA twin: these ops run on the CPU plan).
#ifndef INFERD_KERNELS_K_SELECT_H
#define INFERD_KERNELS_K_SELECT_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/k_ref.h"

// NonMaxSuppression as ONNX defines it: boxes [B, N, 4] (corners y1, x1,
// y2, x2 in either order; center: x, y, w, h), scores [B, C, N]. Per batch
// and class, boxes by descending score (ties: lower index first) with
// score > score_th (when has_score_th) are kept unless their IoU with one
// kept before exceeds iou_th, at most max_per_class. Writes (batch, class,
// box) triples to sel when not NULL (room for the count a NULL call gave).
// Returns the number of triples, or -1 when out of memory.
int64_t k_nms(int64_t *sel, const float *boxes, const float *scores, int64_t B, int64_t C, int64_t N,
              int64_t max_per_class, float iou_th, int has_score_th, float score_th, int center);

// Unique slices of x viewed as [outer, len, inner] elements of type t (the
// slices along the middle axis, compared element by element in order).
// sorted: ascending (lexicographic over the slice, numeric per element),
// else in order of first occurrence. first[u] gets unique slice u's first
// index, inverse[j] slice j's unique index, counts[u] its count (each
// len entries long; inverse/counts may be NULL). Returns the number of
// unique slices, or -1 when out of memory or t is not a numeric type.
int64_t k_unique(const void *x, k_elem t, size_t outer, size_t len, size_t inner, int sorted, int64_t *first,
                 int64_t *inverse, int64_t *counts);

#endif
