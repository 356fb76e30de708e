// kernels/base/strwire.c: the KServe v2 BYTES wire layout (strwire.h).
#include "kernels/base/strwire.h"

int strwire_check(const uint8_t *buf, size_t len, uint64_t n, const char **why, uint64_t *at) {
  size_t off = 0;
  for (uint64_t i = 0; i < n; i++) {
    *at = i;
    if (len - off < 4) {
      *why = "ends inside a length prefix";
      return -1;
    }
    uint32_t l = strwire_len(buf + off);
    off += 4;
    if (len - off < l) {
      *why = "ends inside an element";
      return -1;
    }
    off += l;
  }
  *at = n;
  if (off != len) {
    *why = "has bytes after the last element";
    return -1;
  }
  return 0;
}

int64_t strwire_count(const uint8_t *buf, size_t len) {
  size_t off = 0;
  int64_t n = 0;
  while (off < len) {
    if (len - off < 4) return -1;
    uint32_t l = strwire_len(buf + off);
    off += 4;
    if (len - off < l) return -1;
    off += l;
    n++;
  }
  return n;
}

size_t strwire_offset(const uint8_t *buf, size_t len, uint64_t k) {
  size_t off = 0;
  for (uint64_t i = 0; i < k && len - off >= 4; i++) {
    uint32_t l = strwire_len(buf + off);
    if (len - off - 4 < l) return len;  // never past the end, even on an unchecked buffer
    off += 4 + (size_t)l;
  }
  return off;
}
