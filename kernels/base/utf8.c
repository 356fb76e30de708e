// utf8.c: see utf8.h.
#include "kernels/base/utf8.h"

#include <string.h>

size_t utf8_seq_len(const unsigned char *s, size_t n) {
  unsigned char c = s[0];
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (n < len) return 0;
  if (s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < len; i++)
    if (s[i] < 0x80 || s[i] > 0xBF) return 0;
  return len;
}

bool utf8_valid(const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; i < n;) {
    size_t k = utf8_seq_len(u + i, n - i);
    if (!k) return false;
    i += k;
  }
  return true;
}

bool utf8_hides_in_line(const unsigned char *s, size_t len) {
  if (len == 2) return s[0] == 0xC2 && s[1] < 0xA0;
  if (len != 3 || s[0] != 0xE2) return false;
  if (s[1] == 0x80) return s[2] >= 0xA8 && s[2] <= 0xAE;  // U+2028-U+202E
  if (s[1] == 0x81) return s[2] >= 0xA6 && s[2] <= 0xA9;  // U+2066-U+2069
  return false;
}

// The bytes at s[0..n) one unit: how many (take) and whether they are written
// escaped.
static size_t unit(const unsigned char *s, size_t n, int *esc) {
  size_t k = s[0] < 0x80 ? 1 : utf8_seq_len(s, n);
  if (!k) {
    *esc = 1;
    return 1;
  }
  *esc = k == 1 ? s[0] < 0x20 || s[0] == 0x7f : utf8_hides_in_line(s, k);
  return k;
}

bool utf8_has_controls(const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; i < n;) {
    int esc;
    i += unit(u + i, n - i, &esc);
    if (esc) return true;
  }
  return false;
}

// The one escaper behind utf8_escape_controls (messages to clients) and
// utf8_escape_line (log lines): they differ only in the backslash, which a
// log line writes as \\ so that its escapes read back unambiguously.
static size_t escape(char *dst, size_t cap, const char *s, size_t n, int backslash) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char *u = (const unsigned char *)s;
  size_t o = 0;
  for (size_t i = 0; i < n;) {
    int esc;
    size_t k = unit(u + i, n - i, &esc);
    char buf[12];
    size_t w = 0;
    if (backslash && u[i] == '\\') {
      buf[0] = '\\', buf[1] = '\\', w = 2;
    } else if (!esc) {
      memcpy(buf, u + i, k);
      w = k;
    } else if (u[i] == '\n' || u[i] == '\r' || u[i] == '\t') {
      buf[0] = '\\', buf[1] = u[i] == '\n' ? 'n' : u[i] == '\r' ? 'r' : 't', w = 2;
    } else {
      for (size_t b = 0; b < k; b++)
        buf[w++] = '\\', buf[w++] = 'x', buf[w++] = hex[u[i + b] >> 4], buf[w++] = hex[u[i + b] & 15];
    }
    if (o + w >= cap) break;
    memcpy(dst + o, buf, w);
    o += w;
    i += k;
  }
  dst[o] = '\0';
  return o;
}

size_t utf8_escape_controls(char *dst, size_t cap, const char *s, size_t n) { return escape(dst, cap, s, n, 0); }

size_t utf8_escape_line(char *dst, size_t cap, const char *s, size_t n) { return escape(dst, cap, s, n, 1); }
