// httpz.c: gzip/deflate content codings on zlib (see httpz.h).
#include "server/http/httpz.h"

#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

// zlib's windowBits: 15 (32 KiB window) plus 16 for the gzip wrapper; a
// negative value means a raw deflate stream without the zlib wrapper.
#define WBITS_ZLIB 15
#define WBITS_GZIP (15 + 16)
#define WBITS_RAW (-15)
// zlib counts in uInt: feed and drain in pieces no larger than this
#define Z_CHUNK ((size_t)1 << 30)

// [s, e) without surrounding blanks, compared case-insensitively to word
static int token_is(const char *s, const char *e, const char *word) {
  while (s < e && isspace((unsigned char)*s)) s++;
  while (e > s && isspace((unsigned char)e[-1])) e--;
  size_t n = strlen(word);
  return (size_t)(e - s) == n && strncasecmp(s, word, n) == 0;
}

srv_httpz_enc srv_httpz_content_encoding(const char *v) {
  if (!v) return SRV_HTTPZ_IDENTITY;
  const char *e = v + strlen(v);
  if (token_is(v, e, "") || token_is(v, e, "identity")) return SRV_HTTPZ_IDENTITY;
  if (token_is(v, e, "gzip") || token_is(v, e, "x-gzip")) return SRV_HTTPZ_GZIP;
  if (token_is(v, e, "deflate")) return SRV_HTTPZ_DEFLATE;
  return SRV_HTTPZ_UNKNOWN;
}

// q of one Accept-Encoding element's parameters ";q=0.5" in [s, e): 1 when
// absent, 0 when malformed (an element we cannot read is not accepted).
static double elem_q(const char *s, const char *e) {
  const char *semi = memchr(s, ';', (size_t)(e - s));
  if (!semi) return 1.0;
  const char *p = semi + 1;
  while (p < e && isspace((unsigned char)*p)) p++;
  if (e - p < 2 || (p[0] != 'q' && p[0] != 'Q') || p[1] != '=') return 0.0;
  char num[16];
  size_t n = (size_t)(e - (p + 2));
  if (n == 0 || n >= sizeof num) return 0.0;
  memcpy(num, p + 2, n);
  num[n] = '\0';
  char *end = NULL;
  double q = strtod(num, &end);
  while (end && isspace((unsigned char)*end)) end++;
  if (!end || *end || q < 0 || q > 1) return 0.0;
  return q;
}

srv_httpz_enc srv_httpz_accept(const char *v) {
  if (!v) return SRV_HTTPZ_IDENTITY;
  srv_httpz_enc best = SRV_HTTPZ_IDENTITY;
  double best_q = 0.0;
  const char *s = v;
  for (;;) {
    const char *e = strchr(s, ',');
    if (!e) e = s + strlen(s);
    const char *semi = memchr(s, ';', (size_t)(e - s));
    const char *name_end = semi ? semi : e;
    srv_httpz_enc enc = SRV_HTTPZ_IDENTITY;
    if (token_is(s, name_end, "gzip") || token_is(s, name_end, "x-gzip") || token_is(s, name_end, "*"))
      enc = SRV_HTTPZ_GZIP;
    else if (token_is(s, name_end, "deflate"))
      enc = SRV_HTTPZ_DEFLATE;
    if (enc != SRV_HTTPZ_IDENTITY) {
      double q = elem_q(s, e);
      if (q > best_q) best = enc, best_q = q;
    }
    if (!*e) break;
    s = e + 1;
  }
  return best;
}

const char *srv_httpz_name(srv_httpz_enc enc) {
  switch (enc) {
    case SRV_HTTPZ_GZIP: return "gzip";
    case SRV_HTTPZ_DEFLATE: return "deflate";
    default: return "identity";
  }
}

// A zlib (RFC 1950) header: method 8 (deflate), the check bits.
static int zlib_header(const uint8_t *p, size_t n) {
  return n >= 2 && (p[0] & 0x0f) == 8 && (p[0] >> 4) <= 7 && ((p[0] << 8) | p[1]) % 31 == 0;
}

int srv_httpz_inflate(srv_httpz_enc enc, const void *in, size_t n, size_t max_out, uint8_t **out, size_t *out_len,
                      err *e) {
  int wbits;
  if (enc == SRV_HTTPZ_GZIP) wbits = WBITS_GZIP;
  else if (enc == SRV_HTTPZ_DEFLATE) wbits = zlib_header(in, n) ? WBITS_ZLIB : WBITS_RAW;
  else return err_set(e, ERR_INTERNAL, "inflate: not a compressed coding");
  const char *name = srv_httpz_name(enc);
  z_stream z = {0};
  if (inflateInit2(&z, wbits) != Z_OK) return err_set(e, ERR_INTERNAL, "inflate: out of memory");
  // One byte past the bound tells "too large" from "exactly max_out"; the
  // buffer grows by doubling from a guess, so a bomb costs at most the bound.
  size_t limit = max_out == SIZE_MAX ? SIZE_MAX - 1 : max_out + 1;
  size_t cap = n > limit / 4 ? limit : (n * 4 < 4096 ? 4096 : n * 4);
  if (cap > limit) cap = limit;
  uint8_t *buf = malloc(cap + 1);
  size_t len = 0, used_in = 0;
  int zrc = Z_OK, rc = 0;
  if (!buf) rc = err_set(e, ERR_INTERNAL, "inflate: out of memory");
  while (rc == 0 && zrc != Z_STREAM_END) {
    if (len == cap) {
      if (cap == limit) {
        rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "the %s request body inflates to more than %zu bytes", name, max_out);
        break;
      }
      size_t ncap = cap > limit / 2 ? limit : cap * 2;
      uint8_t *nb = realloc(buf, ncap + 1);
      if (!nb) {
        rc = err_set(e, ERR_INTERNAL, "inflate: out of memory");
        break;
      }
      buf = nb, cap = ncap;
    }
    size_t in_left = n - used_in, out_left = cap - len;
    z.next_in = (Bytef *)((const uint8_t *)in + used_in);
    z.avail_in = (uInt)(in_left < Z_CHUNK ? in_left : Z_CHUNK);
    z.next_out = buf + len;
    z.avail_out = (uInt)(out_left < Z_CHUNK ? out_left : Z_CHUNK);
    uInt ai = z.avail_in, ao = z.avail_out;
    zrc = inflate(&z, Z_NO_FLUSH);
    used_in += ai - z.avail_in;
    len += ao - z.avail_out;
    if (zrc == Z_STREAM_END) break;
    if (zrc == Z_MEM_ERROR) {
      rc = err_set(e, ERR_INTERNAL, "inflate: out of memory");
    } else if (zrc == Z_DATA_ERROR || zrc == Z_NEED_DICT) {
      rc = err_set(e, ERR_INVALID_ARGUMENT, "the %s request body is corrupt: %s", name,
                   z.msg ? z.msg : "invalid stream");
    } else if (zrc == Z_BUF_ERROR && used_in == n && len < cap) {
      // no progress possible: every input byte read, room left, no end
      rc = err_set(e, ERR_INVALID_ARGUMENT, "the %s request body is truncated (the stream does not end)", name);
    } else if (zrc != Z_OK && zrc != Z_BUF_ERROR) {
      rc = err_set(e, ERR_INVALID_ARGUMENT, "the %s request body does not inflate (zlib error %d)", name, zrc);
    }
  }
  if (rc == 0 && len > max_out)
    rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "the %s request body inflates to more than %zu bytes", name, max_out);
  if (rc == 0 && used_in != n)
    rc = err_set(e, ERR_INVALID_ARGUMENT, "the %s request body has %zu bytes after the end of its stream", name,
                 n - used_in);
  inflateEnd(&z);
  if (rc) {
    free(buf);
    return rc;
  }
  buf[len] = 0;
  *out = buf;
  *out_len = len;
  return 0;
}

int srv_httpz_deflate(srv_httpz_enc enc, const void *in, size_t n, uint8_t **out, size_t *out_len, err *e) {
  int wbits;
  if (enc == SRV_HTTPZ_GZIP) wbits = WBITS_GZIP;
  else if (enc == SRV_HTTPZ_DEFLATE) wbits = WBITS_ZLIB;
  else return err_set(e, ERR_INTERNAL, "deflate: not a compressed coding");
  z_stream z = {0};
  // memLevel 8 and the default level: zlib's (and Triton's) defaults
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, wbits, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    return err_set(e, ERR_INTERNAL, "deflate: out of memory");
  // deflateBound holds for a single Z_FINISH over the whole input; the
  // input may be fed in pieces (uInt), so leave room for each piece's
  // block overhead too.
  size_t cap = (size_t)deflateBound(&z, (uLong)(n < ULONG_MAX ? n : ULONG_MAX)) + (n / Z_CHUNK + 1) * 64;
  uint8_t *buf = malloc(cap);
  if (!buf) {
    deflateEnd(&z);
    return err_set(e, ERR_INTERNAL, "deflate: out of memory");
  }
  size_t used_in = 0, len = 0;
  int zrc = Z_OK;
  while (zrc != Z_STREAM_END) {
    size_t in_left = n - used_in, out_left = cap - len;
    z.next_in = (Bytef *)((const uint8_t *)in + used_in);
    z.avail_in = (uInt)(in_left < Z_CHUNK ? in_left : Z_CHUNK);
    z.next_out = buf + len;
    z.avail_out = (uInt)(out_left < Z_CHUNK ? out_left : Z_CHUNK);
    uInt ai = z.avail_in, ao = z.avail_out;
    zrc = deflate(&z, in_left <= Z_CHUNK ? Z_FINISH : Z_NO_FLUSH);
    used_in += ai - z.avail_in;
    len += ao - z.avail_out;
    if (zrc == Z_STREAM_ERROR || (zrc == Z_BUF_ERROR && len == cap)) break;
  }
  deflateEnd(&z);
  if (zrc != Z_STREAM_END) {
    free(buf);
    return err_set(e, ERR_INTERNAL, "deflate failed (zlib error %d)", zrc);
  }
  *out = buf;
  *out_len = len;
  return 0;
}
