// utf8.c: see utf8.h.
#include "kernels/base/utf8.h"

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
