// Tests kernels/str/k_str.c: the wire layout into views and back (short
// strings inline, long ones pointing into the buffer, views still right
// after a memcpy, as the index ops copy them), and Cast between strings and
// numbers against what onnxruntime 1.32's Cast answered for the same
// values (printed with /tmp experiments; the expectations are its outputs).
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "kernels/base/strwire.h"
#include "kernels/str/k_str.h"

static uint8_t *kept[16];  // the buffers long views point into, freed at the end
static int n_kept;

static k_str s_of(const char *txt) {  // a view of a C string (short ones inline)
  k_str s;
  size_t n = strlen(txt);
  uint8_t buf[4 + 256];
  strwire_put_len(buf, (uint32_t)n);
  memcpy(buf + 4, txt, n);
  if (n > K_STR_INLINE && n_kept < 16) {  // the view points into it: kept until main ends
    uint8_t *keep = kept[n_kept++] = malloc(4 + n);
    memcpy(keep, buf, 4 + n);
    k_str_from_wire(&s, keep, 1);
  } else {
    k_str_from_wire(&s, buf, 1);
  }
  return s;
}

static void check_text(const k_str *s, const char *want) {
  size_t n = strlen(want);
  if (s->n != n || memcmp(k_str_data(s), want, n) != 0)
    CHECK_FAIL_("got '%.*s', want '%s'", (int)s->n, (const char *)k_str_data(s), want);
  check_count_++;
}

static void test_wire_round_trip(void) {
  const char *el[] = {"", "a", "exactly twenty-four byte", "twenty-five bytes, one over", "he\0llo"};
  size_t lens[] = {0, 1, 24, 27, 6};
  uint8_t buf[256];
  size_t off = 0;
  for (int i = 0; i < 5; i++) {
    strwire_put_len(buf + off, (uint32_t)lens[i]);
    memcpy(buf + off + 4, el[i], lens[i]);
    off += 4 + lens[i];
  }
  k_str v[5], w[5];
  k_str_from_wire(v, buf, 5);
  memcpy(w, v, sizeof v);  // position-independent: a copy reads the same
  for (int i = 0; i < 5; i++) {
    CHECK_EQ_INT((int)w[i].n, (int)lens[i]);
    CHECK(memcmp(k_str_data(&w[i]), el[i], lens[i]) == 0);
  }
  CHECK(k_str_data(&w[2]) == w[2].u.in);             // 24 bytes: inline
  CHECK(k_str_data(&w[3]) == buf + 4 + 0 + 4 + 1 + 4 + 24 + 4);  // 25+: in the buffer
  CHECK_EQ_INT((int)k_str_wire_bytes(w, 5), (int)off);
  uint8_t back[256];
  k_str_to_wire(back, w, 5);
  CHECK(memcmp(back, buf, off) == 0);
}

static void test_from_num(void) {
  float f[] = {1.0f, 0.1f, 1e20f, 1e-7f, 3.14159265f, -0.0f, INFINITY, -INFINITY, NAN, 123456789.0f, 1.0f / 3, 100.0f,
               1e16f, -1.2345678e-38f};
  const char *fw[] = {"1", "0.1", "1e+20", "1e-07", "3.1415927", "-0", "INF", "-INF", "NaN", "1.2345679e+08",
                      "0.33333334", "100", "1e+16", "-1.2345678e-38"};
  k_str y[16];
  k_str_from_num(y, f, K_F32, 14);
  for (int i = 0; i < 14; i++) check_text(&y[i], fw[i]);
  double d[] = {1.0 / 3, 123456789012345678.0, 1e-300, -1.7976931348623157e308};
  const char *dw[] = {"0.33333333", "1.2345679e+17", "1e-300", "-1.7976931e+308"};
  k_str_from_num(y, d, K_F64, 4);
  for (int i = 0; i < 4; i++) check_text(&y[i], dw[i]);
  int32_t i32[] = {0, -5, 2147483647, INT32_MIN};
  k_str_from_num(y, i32, K_I32, 4);
  check_text(&y[0], "0"), check_text(&y[1], "-5"), check_text(&y[2], "2147483647"), check_text(&y[3], "-2147483648");
  int64_t i64[] = {INT64_MIN, INT64_MAX};
  k_str_from_num(y, i64, K_I64, 2);
  check_text(&y[0], "-9223372036854775808"), check_text(&y[1], "9223372036854775807");
  uint64_t u64[] = {UINT64_MAX};
  k_str_from_num(y, u64, K_U64, 1);
  check_text(&y[0], "18446744073709551615");
  uint8_t b[] = {1, 0}, u8[] = {0, 255};
  int8_t i8[] = {-128, 5};
  k_str_from_num(y, b, K_BOOL, 2);
  check_text(&y[0], "1"), check_text(&y[1], "0");
  k_str_from_num(y, u8, K_U8, 2);
  check_text(&y[0], "0"), check_text(&y[1], "255");
  k_str_from_num(y, i8, K_I8, 2);
  check_text(&y[0], "-128"), check_text(&y[1], "5");
  uint16_t h;
  float tenth = 0.1f;
  k_f32_to_f16(&h, &tenth, 1);
  k_str_from_num(y, &h, K_F16, 1);
  check_text(&y[0], "0.099975586");
}

// One string to one number of type t: 0 or -1 (no number / out of range).
static int parse(const char *txt, k_elem t, void *out) {
  k_str s = s_of(txt);
  size_t bad = 99;
  int rc = k_str_to_num(out, t, &s, 1, &bad);
  if (rc) CHECK_EQ_INT((int)bad, 0);
  return rc;
}

static void test_to_num(void) {
  static const struct {
    const char *s;
    int rc;
    int64_t i32, i64;
  } ints[] = {
      {"1", 0, 1, 1}, {"-2", 0, -2, -2}, {" 3", 0, 3, 3}, {"4 ", 0, 4, 4}, {"0x10", 0, 0, 0}, {"1.5", 0, 1, 1},
      {"1e3", 0, 1, 1}, {"+7", 0, 7, 7}, {" \t5", 0, 5, 5}, {"2147483648", 0, INT32_MIN, 2147483648LL},
      {"99999999999", 0, 1215752191, 99999999999LL}, {"000000000000000000000000000000042", 0, 42, 42},
      {"abc", -1, 0, 0}, {"", -1, 0, 0}, {"-", -1, 0, 0}, {"99999999999999999999", -1, 0, 0},
  };
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
    int32_t a = 0;
    int64_t b = 0;
    int ra = parse(ints[i].s, K_I32, &a), rb = parse(ints[i].s, K_I64, &b);
    if (ra != ints[i].rc || rb != ints[i].rc || (ra == 0 && (a != ints[i].i32 || b != ints[i].i64)))
      CHECK_FAIL_("'%s': INT32 %d (rc %d), INT64 %lld (rc %d); want %lld, %lld (rc %d)", ints[i].s, a, ra,
                  (long long)b, rb, (long long)ints[i].i32, (long long)ints[i].i64, ints[i].rc);
    check_count_++;
  }
  uint8_t u8 = 0, bo = 9;
  CHECK(parse("-1", K_U8, &u8) == 0 && u8 == 255);
  CHECK(parse("-2", K_U8, &u8) == 0 && u8 == 254);
  CHECK(parse("2147483648", K_U8, &u8) == 0 && u8 == 0);
  CHECK(parse("99999999999", K_U8, &u8) == 0 && u8 == 255);
  uint64_t u64 = 0;
  CHECK(parse("-1", K_U64, &u64) == 0 && u64 == UINT64_MAX);
  CHECK(parse("0x1p3", K_BOOL, &bo) == 0 && bo == 0);
  CHECK(parse("1e40", K_BOOL, &bo) == 0 && bo == 1);
  CHECK(parse("-1", K_BOOL, &bo) == 0 && bo == 1);
  CHECK(parse("0", K_BOOL, &bo) == 0 && bo == 0);
  CHECK(parse("true", K_BOOL, &bo) == -1);
  float f = 0;
  CHECK(parse("0x10", K_F32, &f) == 0 && f == 16.0f);
  CHECK(parse("1e3", K_F32, &f) == 0 && f == 1000.0f);
  CHECK(parse(".5", K_F32, &f) == 0 && f == 0.5f);
  CHECK(parse("1,5", K_F32, &f) == 0 && f == 1.0f);
  CHECK(parse("0x1p3", K_F32, &f) == 0 && f == 8.0f);
  CHECK(parse("-inf", K_F32, &f) == 0 && isinf(f) && f < 0);
  CHECK(parse("NaN", K_F32, &f) == 0 && isnan(f));
  CHECK(parse("1e40", K_F32, &f) == 0 && isinf(f));  // parsed as a double, then narrowed
  CHECK(parse("1e400", K_F32, &f) == -1);            // out of the double's range
  CHECK(parse("true", K_F32, &f) == -1);
  double d = 0;
  CHECK(parse("0.1", K_F64, &d) == 0 && d == 0.1);
  // the first bad element is named
  k_str many[3] = {s_of("1"), s_of("2"), s_of("x")};
  int64_t out[3];
  size_t bad = 0;
  CHECK_EQ_INT(k_str_to_num(out, K_I64, many, 3, &bad), -1);
  CHECK_EQ_INT((int)bad, 2);
}

int main(void) {
  test_wire_round_trip();
  test_from_num();
  test_to_num();
  for (int i = 0; i < n_kept; i++) free(kept[i]);
  CHECK_DONE();
}
