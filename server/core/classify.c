// classify.c: top-n classes of an output's rows (see classify.h). Each row's
// indices are sorted by value with the element type's own order, so INT64
// and UINT64 values are never rounded through a double (qsort_r: the
// build defines _GNU_SOURCE).
#include "server/core/classify.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct row {
  const uint8_t *base;
  dtype dt;
} row;

#define CMP(T)                                                \
  do {                                                        \
    T x = ((const T *)r->base)[a], y = ((const T *)r->base)[b]; \
    if (x != y) return x > y ? -1 : 1;                        \
  } while (0)

// Descending by value, then ascending by index; a NaN ranks below every number.
static int by_value(const void *pa, const void *pb, void *ctx) {
  const row *r = ctx;
  size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
  switch (r->dt) {
    case DT_UINT8: CMP(uint8_t); break;
    case DT_UINT16: CMP(uint16_t); break;
    case DT_UINT32: CMP(uint32_t); break;
    case DT_UINT64: CMP(uint64_t); break;
    case DT_INT8: CMP(int8_t); break;
    case DT_INT16: CMP(int16_t); break;
    case DT_INT32: CMP(int32_t); break;
    case DT_INT64: CMP(int64_t); break;
    case DT_FP32:
    case DT_FP64: {
      double x = r->dt == DT_FP32 ? ((const float *)r->base)[a] : ((const double *)r->base)[a];
      double y = r->dt == DT_FP32 ? ((const float *)r->base)[b] : ((const double *)r->base)[b];
      if (isnan(x) != isnan(y)) return isnan(x) ? 1 : -1;
      if (x != y && !isnan(x)) return x > y ? -1 : 1;
      break;
    }
    default: break;
  }
  return a < b ? -1 : a > b;
}

// The value as Triton's std::to_string writes it.
static int show(char *buf, size_t cap, const uint8_t *base, dtype dt, size_t i) {
  switch (dt) {
    case DT_UINT8: return snprintf(buf, cap, "%u", (unsigned)((const uint8_t *)base)[i]);
    case DT_UINT16: return snprintf(buf, cap, "%u", (unsigned)((const uint16_t *)base)[i]);
    case DT_UINT32: return snprintf(buf, cap, "%" PRIu32, ((const uint32_t *)base)[i]);
    case DT_UINT64: return snprintf(buf, cap, "%" PRIu64, ((const uint64_t *)base)[i]);
    case DT_INT8: return snprintf(buf, cap, "%d", (int)((const int8_t *)base)[i]);
    case DT_INT16: return snprintf(buf, cap, "%d", (int)((const int16_t *)base)[i]);
    case DT_INT32: return snprintf(buf, cap, "%" PRId32, ((const int32_t *)base)[i]);
    case DT_INT64: return snprintf(buf, cap, "%" PRId64, ((const int64_t *)base)[i]);
    case DT_FP32: return snprintf(buf, cap, "%f", (double)((const float *)base)[i]);
    case DT_FP64: return snprintf(buf, cap, "%f", ((const double *)base)[i]);
    default: return snprintf(buf, cap, "?");
  }
}

typedef struct sbuf {
  uint8_t *p;
  size_t len, cap;
} sbuf;

static int grow(sbuf *b, size_t more) {
  if (b->len + more <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + more) cap *= 2;
  uint8_t *g = realloc(b->p, cap);
  if (!g) return -1;
  b->p = g;
  b->cap = cap;
  return 0;
}

int srv_classify(const void *data, dtype dt, size_t rows, size_t per_row, uint32_t count, size_t max_per_row,
                 const srv_labels *labels, const char *output, uint8_t **out, size_t *out_len, size_t *n_classes,
                 err *e) {
  *out = NULL;
  *out_len = *n_classes = 0;
  size_t es = dtype_size(dt);
  if (dt == DT_BOOL || dt == DT_FP16 || dt == DT_BF16 || !es)
    return err_set(e, ERR_INVALID_ARGUMENT, "output '%s': class result not available for output due to unsupported "
                   "type '%s'", output, dtype_wire_name(dt));
  if (per_row > max_per_row)
    return err_set(e, ERR_INVALID_ARGUMENT, "output '%s': classification output tensor too large (%zu elements per "
                   "row, at most %zu)", output, per_row, max_per_row);
  size_t n = count < per_row ? count : per_row;
  size_t *idx = malloc((per_row ? per_row : 1) * sizeof *idx);
  sbuf b = {0};
  if (!idx) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  for (size_t r = 0; r < rows; r++) {
    row ctx = {.base = (const uint8_t *)data + r * per_row * es, .dt = dt};
    for (size_t i = 0; i < per_row; i++) idx[i] = i;
    qsort_r(idx, per_row, sizeof *idx, by_value, &ctx);
    for (size_t k = 0; k < n; k++) {
      char val[400];
      int vl = show(val, sizeof val, ctx.base, dt, idx[k]);
      const char *label = srv_labels_get(labels, output, idx[k]);
      size_t ll = label ? strlen(label) : 0;
      char ix[24];
      int il = snprintf(ix, sizeof ix, ":%zu", idx[k]);
      size_t len = (size_t)vl + (size_t)il + (label ? 1 + ll : 0);
      if (len > UINT32_MAX || grow(&b, 4 + len) != 0) {
        free(idx);
        free(b.p);
        return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
      }
      uint8_t *p = b.p + b.len;
      p[0] = (uint8_t)len, p[1] = (uint8_t)(len >> 8), p[2] = (uint8_t)(len >> 16), p[3] = (uint8_t)(len >> 24);
      p += 4;
      memcpy(p, val, (size_t)vl), p += vl;
      memcpy(p, ix, (size_t)il), p += il;
      if (label) *p++ = ':', memcpy(p, label, ll);
      b.len += 4 + len;
    }
  }
  free(idx);
  if (!b.p && !(b.p = malloc(1))) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  *out = b.p;
  *out_len = b.len;
  *n_classes = n;
  return 0;
}
