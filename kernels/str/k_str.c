// kernels/str/k_str.c: STRING views, the wire layout and Cast (k_str.h).
#include "kernels/str/k_str.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/strwire.h"

// --- the wire layout

void k_str_from_wire(k_str *y, const uint8_t *buf, size_t n) {
  size_t off = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t l = strwire_len(buf + off);
    off += 4;
    y[i].n = l;
    if (l <= K_STR_INLINE) {
      memset(y[i].u.in, 0, sizeof y[i].u.in);  // whole elements compare and hash alike
      memcpy(y[i].u.in, buf + off, l);
    } else {
      y[i].u.ptr = buf + off;
    }
    off += l;
  }
}

size_t k_str_wire_bytes(const k_str *x, size_t n) {
  size_t b = 0;
  for (size_t i = 0; i < n; i++) b += 4 + (size_t)x[i].n;
  return b;
}

void k_str_to_wire(uint8_t *dst, const k_str *x, size_t n) {
  for (size_t i = 0; i < n; i++) {
    strwire_put_len(dst, (uint32_t)x[i].n);
    memcpy(dst + 4, k_str_data(&x[i]), x[i].n);
    dst += 4 + x[i].n;
  }
}

// --- numbers -> strings

static void set_text(k_str *y, const char *s, int len) {
  memset(y->u.in, 0, sizeof y->u.in);
  if (len < 0) len = 0;
  if (len > K_STR_INLINE) len = K_STR_INLINE;  // cannot happen: every format below fits
  memcpy(y->u.in, s, (size_t)len);
  y->n = (uint64_t)len;
}

static void put_float(k_str *y, double f) {
  char b[40];
  // onnxruntime writes through an ostream with precision 8
  if (isnan(f)) set_text(y, "NaN", 3);
  else if (isinf(f)) set_text(y, f < 0 ? "-INF" : "INF", f < 0 ? 4 : 3);
  else set_text(y, b, snprintf(b, sizeof b, "%.8g", f));
}

void k_str_from_num(k_str *y, const void *x, k_elem xt, size_t n) {
  char b[40];
  for (size_t i = 0; i < n; i++) {
    switch (xt) {
      case K_F32: put_float(&y[i], ((const float *)x)[i]); break;
      case K_F64: put_float(&y[i], ((const double *)x)[i]); break;
      case K_F16: {
        float f;
        k_f16_to_f32(&f, (const uint16_t *)x + i, 1);
        put_float(&y[i], f);
        break;
      }
      case K_I64: set_text(&y[i], b, snprintf(b, sizeof b, "%" PRId64, ((const int64_t *)x)[i])); break;
      case K_I32: set_text(&y[i], b, snprintf(b, sizeof b, "%" PRId32, ((const int32_t *)x)[i])); break;
      case K_I16: set_text(&y[i], b, snprintf(b, sizeof b, "%d", ((const int16_t *)x)[i])); break;
      case K_I8: set_text(&y[i], b, snprintf(b, sizeof b, "%d", ((const int8_t *)x)[i])); break;
      case K_U64: set_text(&y[i], b, snprintf(b, sizeof b, "%" PRIu64, ((const uint64_t *)x)[i])); break;
      case K_U32: set_text(&y[i], b, snprintf(b, sizeof b, "%" PRIu32, ((const uint32_t *)x)[i])); break;
      case K_U16: set_text(&y[i], b, snprintf(b, sizeof b, "%u", ((const uint16_t *)x)[i])); break;
      case K_U8: set_text(&y[i], b, snprintf(b, sizeof b, "%u", ((const uint8_t *)x)[i])); break;
      case K_BOOL: set_text(&y[i], ((const uint8_t *)x)[i] ? "1" : "0", 1); break;
    }
  }
}

// --- strings -> numbers

// One element as a NUL-terminated string in b (the parsers want one):
// leading blanks dropped (the parsers skip them anyway), the rest cut at
// cap - 1 bytes, which only a number of hundreds of digits would notice.
static const char *c_string(const k_str *s, char *b, size_t cap) {
  const uint8_t *p = k_str_data(s);
  size_t n = s->n, i = 0;
  while (i < n && (p[i] == ' ' || (p[i] >= '\t' && p[i] <= '\r'))) i++;
  size_t m = n - i < cap - 1 ? n - i : cap - 1;
  memcpy(b, p + i, m);
  b[m] = '\0';
  return b;
}

int k_str_to_num(void *y, k_elem yt, const k_str *x, size_t n, size_t *bad) {
  char b[256];
  for (size_t i = 0; i < n; i++) {
    const char *s = c_string(&x[i], b, sizeof b);
    char *end;
    errno = 0;
    switch (yt) {
      case K_F32: case K_F64: case K_F16: {
        double f = strtod(s, &end);
        if (end == s || errno == ERANGE) goto fail;
        if (yt == K_F64) ((double *)y)[i] = f;
        else if (yt == K_F32) ((float *)y)[i] = (float)f;
        else {
          float g = (float)f;
          k_f32_to_f16((uint16_t *)y + i, &g, 1);
        }
        break;
      }
      case K_I64: case K_I32: case K_I16: case K_I8: {
        long long v = strtoll(s, &end, 10);
        if (end == s || errno == ERANGE) goto fail;
        // narrowed as a C++ static_cast does: modulo the width
        if (yt == K_I64) ((int64_t *)y)[i] = v;
        else if (yt == K_I32) ((int32_t *)y)[i] = (int32_t)(uint32_t)(unsigned long long)v;
        else if (yt == K_I16) ((int16_t *)y)[i] = (int16_t)(uint16_t)(unsigned long long)v;
        else ((int8_t *)y)[i] = (int8_t)(uint8_t)(unsigned long long)v;
        break;
      }
      case K_U64: case K_U32: case K_U16: case K_U8: case K_BOOL: {
        unsigned long long v = strtoull(s, &end, 10);
        if (end == s || errno == ERANGE) goto fail;
        if (yt == K_U64) ((uint64_t *)y)[i] = v;
        else if (yt == K_U32) ((uint32_t *)y)[i] = (uint32_t)v;
        else if (yt == K_U16) ((uint16_t *)y)[i] = (uint16_t)v;
        else if (yt == K_U8) ((uint8_t *)y)[i] = (uint8_t)v;
        else ((uint8_t *)y)[i] = v != 0;
        break;
      }
    }
    continue;
  fail:
    *bad = i;
    return -1;
  }
  return 0;
}
