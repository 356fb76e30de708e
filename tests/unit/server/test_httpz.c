// test_httpz.c: gzip/deflate codings of REST bodies (server/http/httpz.h):
// round trips through zlib's own one-shot API, the inflate bound (a bomb),
// corrupt, truncated and trailing bytes, and the header parsing.
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "server/http/httpz.h"
#include "check.h"

// Bytes that compress but are not trivial: a repeating text with a counter.
static uint8_t *sample(size_t n) {
  uint8_t *p = malloc(n);
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)("inferd tensor bytes "[i % 20] + (i / 4096) % 3);
  return p;
}

// Compresses with zlib's compress2 (the zlib format) or a gzip wrapper, as
// a client would, independently of srv_httpz_deflate.
static uint8_t *client_compress(int wbits, const uint8_t *in, size_t n, size_t *out_len) {
  z_stream z = {0};
  CHECK_EQ_INT(deflateInit2(&z, 6, Z_DEFLATED, wbits, 8, Z_DEFAULT_STRATEGY), Z_OK);
  size_t cap = deflateBound(&z, n);
  uint8_t *out = malloc(cap);
  z.next_in = (Bytef *)in, z.avail_in = (uInt)n, z.next_out = out, z.avail_out = (uInt)cap;
  CHECK_EQ_INT(deflate(&z, Z_FINISH), Z_STREAM_END);
  *out_len = cap - z.avail_out;
  deflateEnd(&z);
  return out;
}

static void test_round_trips(void) {
  const size_t sizes[] = {0, 1, 100, 70000, 1 << 20};
  const struct {
    srv_httpz_enc enc;
    int wbits;
  } codings[] = {{SRV_HTTPZ_GZIP, 15 + 16}, {SRV_HTTPZ_DEFLATE, 15}, {SRV_HTTPZ_DEFLATE, -15}};
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
    size_t n = sizes[s];
    uint8_t *src = sample(n ? n : 1);
    for (size_t c = 0; c < sizeof codings / sizeof *codings; c++) {
      size_t zn = 0, outn = 0;
      uint8_t *z = client_compress(codings[c].wbits, src, n, &zn);
      uint8_t *out = NULL;
      err e = {0};
      CHECK_EQ_INT(srv_httpz_inflate(codings[c].enc, z, zn, n, &out, &outn, &e), 0);
      CHECK_EQ_INT(outn, n);
      CHECK(out && memcmp(out, src, n) == 0);
      free(out);
      free(z);
    }
    // ours -> zlib's uncompress / gzip inflate
    for (int g = 0; g < 2; g++) {
      uint8_t *z = NULL;
      size_t zn = 0;
      err e = {0};
      srv_httpz_enc enc = g ? SRV_HTTPZ_GZIP : SRV_HTTPZ_DEFLATE;
      CHECK_EQ_INT(srv_httpz_deflate(enc, src, n, &z, &zn, &e), 0);
      if (n >= 70000) CHECK(zn < n / 4);  // it does compress
      if (g) CHECK(zn > 2 && z[0] == 0x1f && z[1] == 0x8b);  // the gzip magic
      z_stream zs = {0};
      CHECK_EQ_INT(inflateInit2(&zs, g ? 15 + 16 : 15), Z_OK);
      uint8_t *back = malloc(n + 1);
      zs.next_in = z, zs.avail_in = (uInt)zn, zs.next_out = back, zs.avail_out = (uInt)n + 1;
      CHECK_EQ_INT(inflate(&zs, Z_FINISH), Z_STREAM_END);
      CHECK_EQ_INT(zs.total_out, n);
      CHECK(memcmp(back, src, n) == 0);
      inflateEnd(&zs);
      free(back);
      free(z);
    }
    free(src);
  }
}

static void test_bound(void) {
  // 64 MiB of zeros compresses to ~64 KiB: refused at a 1 MiB bound
  size_t big = 64u << 20;
  uint8_t *zeros = calloc(big, 1);
  size_t zn = 0;
  uint8_t *z = client_compress(15 + 16, zeros, big, &zn);
  free(zeros);
  CHECK(zn < 100000);
  uint8_t *out = (uint8_t *)"untouched";
  size_t outn = 7;
  err e = {0};
  CHECK_EQ_INT(srv_httpz_inflate(SRV_HTTPZ_GZIP, z, zn, 1u << 20, &out, &outn, &e), ERR_RESOURCE_EXHAUSTED);
  CHECK(strstr(e.msg, "more than 1048576 bytes") != NULL);
  CHECK_EQ_STR((const char *)out, "untouched");
  CHECK_EQ_INT(outn, 7);
  free(z);
  // exactly at the bound passes, one byte over does not
  uint8_t *src = sample(5000);
  z = client_compress(15, src, 5000, &zn);
  e = (err){0};
  CHECK_EQ_INT(srv_httpz_inflate(SRV_HTTPZ_DEFLATE, z, zn, 5000, &out, &outn, &e), 0);
  CHECK_EQ_INT(outn, 5000);
  free(out);
  e = (err){0};
  CHECK_EQ_INT(srv_httpz_inflate(SRV_HTTPZ_DEFLATE, z, zn, 4999, &out, &outn, &e), ERR_RESOURCE_EXHAUSTED);
  free(z);
  free(src);
}

static void test_corrupt(void) {
  uint8_t *src = sample(10000), *out = NULL;
  size_t zn = 0, outn = 0;
  uint8_t *z = client_compress(15 + 16, src, 10000, &zn);
  err e = {0};
  // not a gzip stream at all
  CHECK_EQ_INT(srv_httpz_inflate(SRV_HTTPZ_GZIP, "{\"inputs\":[]}", 13, 1000, &out, &outn, &e), ERR_INVALID_ARGUMENT);
  CHECK(strstr(e.msg, "gzip request body is corrupt") != NULL);
  // truncated
  e = (err){0};
  CHECK_EQ_INT(srv_httpz_inflate(SRV_HTTPZ_GZIP, z, zn / 2, 20000, &out, &outn, &e), ERR_INVALID_ARGUMENT);
  CHECK(strstr(e.msg, "truncated") != NULL);
  // a flipped byte in the deflate data (the CRC or the stream breaks)
  z[zn / 2] ^= 0x55;
  e = (err){0};
  CHECK_EQ_INT(srv_httpz_inflate(SRV_HTTPZ_GZIP, z, zn, 20000, &out, &outn, &e), ERR_INVALID_ARGUMENT);
  z[zn / 2] ^= 0x55;
  // trailing garbage after the stream
  uint8_t *tail = malloc(zn + 3);
  memcpy(tail, z, zn);
  memcpy(tail + zn, "xyz", 3);
  e = (err){0};
  CHECK_EQ_INT(srv_httpz_inflate(SRV_HTTPZ_GZIP, tail, zn + 3, 20000, &out, &outn, &e), ERR_INVALID_ARGUMENT);
  CHECK(strstr(e.msg, "3 bytes after the end") != NULL);
  // empty input is truncated, not a crash
  e = (err){0};
  CHECK_EQ_INT(srv_httpz_inflate(SRV_HTTPZ_DEFLATE, "", 0, 100, &out, &outn, &e), ERR_INVALID_ARGUMENT);
  // identity is not inflated
  e = (err){0};
  CHECK_EQ_INT(srv_httpz_inflate(SRV_HTTPZ_IDENTITY, z, zn, 100, &out, &outn, &e), ERR_INTERNAL);
  free(tail);
  free(z);
  free(src);
}

static void test_headers(void) {
  CHECK_EQ_INT(srv_httpz_content_encoding(NULL), SRV_HTTPZ_IDENTITY);
  CHECK_EQ_INT(srv_httpz_content_encoding(""), SRV_HTTPZ_IDENTITY);
  CHECK_EQ_INT(srv_httpz_content_encoding("identity"), SRV_HTTPZ_IDENTITY);
  CHECK_EQ_INT(srv_httpz_content_encoding(" GZIP "), SRV_HTTPZ_GZIP);
  CHECK_EQ_INT(srv_httpz_content_encoding("x-gzip"), SRV_HTTPZ_GZIP);
  CHECK_EQ_INT(srv_httpz_content_encoding("deflate"), SRV_HTTPZ_DEFLATE);
  CHECK_EQ_INT(srv_httpz_content_encoding("br"), SRV_HTTPZ_UNKNOWN);
  CHECK_EQ_INT(srv_httpz_content_encoding("gzip, br"), SRV_HTTPZ_UNKNOWN);

  CHECK_EQ_INT(srv_httpz_accept(NULL), SRV_HTTPZ_IDENTITY);
  CHECK_EQ_INT(srv_httpz_accept("gzip"), SRV_HTTPZ_GZIP);
  CHECK_EQ_INT(srv_httpz_accept("deflate"), SRV_HTTPZ_DEFLATE);
  CHECK_EQ_INT(srv_httpz_accept("deflate, gzip"), SRV_HTTPZ_DEFLATE);  // a tie: the first listed
  CHECK_EQ_INT(srv_httpz_accept("deflate;q=0.5, gzip"), SRV_HTTPZ_GZIP);
  CHECK_EQ_INT(srv_httpz_accept("gzip;q=0, deflate;q=0.1"), SRV_HTTPZ_DEFLATE);
  CHECK_EQ_INT(srv_httpz_accept("gzip;q=0"), SRV_HTTPZ_IDENTITY);
  CHECK_EQ_INT(srv_httpz_accept("br, identity"), SRV_HTTPZ_IDENTITY);
  CHECK_EQ_INT(srv_httpz_accept("*"), SRV_HTTPZ_GZIP);
  CHECK_EQ_INT(srv_httpz_accept("gzip;q=banana"), SRV_HTTPZ_IDENTITY);
  CHECK_EQ_INT(srv_httpz_accept(",,;q=,"), SRV_HTTPZ_IDENTITY);
  CHECK_EQ_STR(srv_httpz_name(SRV_HTTPZ_GZIP), "gzip");
  CHECK_EQ_STR(srv_httpz_name(SRV_HTTPZ_DEFLATE), "deflate");
}

int main(void) {
  test_round_trips();
  test_bound();
  test_corrupt();
  test_headers();
  CHECK_DONE();
}
