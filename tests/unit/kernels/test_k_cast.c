// Tests kernels/elem/k_cast.c: half conversion against a table of known bit
// patterns, every half decoded against the textbook formula, an exhaustive
// f16 -> f32 -> f16 round trip, ties-to-even at every midpoint between
// adjacent halves, single rounding from double; k_cast over every pair of
// types and the truncation, saturation, wrap and bool rules.
#include <stdint.h>

#include "check.h"
#include "kernels/k_ref.h"

static uint16_t to_half(float f) {
  uint16_t h;
  k_f32_to_f16(&h, &f, 1);
  return h;
}

// The textbook value of a finite half; NaN/inf handled by the callers.
static double half_formula(uint16_t h) {
  int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
  return s ? -v : v;
}

static void test_f32_to_f16_table(void) {
  static const struct {
    float f;
    uint16_t h;
  } t[] = {
      {1.0f, 0x3C00},        {-2.0f, 0xC000},       {0.5f, 0x3800},        {65504.0f, 0x7BFF},
      {65519.0f, 0x7BFF},    {65520.0f, 0x7C00},    {65536.0f, 0x7C00},    {1e10f, 0x7C00},
      {-1e10f, 0xFC00},      {5.96e-8f, 0x0001},    {0.0f, 0x0000},        {-0.0f, 0x8000},
      {INFINITY, 0x7C00},    {-INFINITY, 0xFC00},   {0x1p-14f, 0x0400},    {0x1.ff8p-15f, 0x03FF},
      {0x1p-24f, 0x0001},    {0x1p-25f, 0x0000},    {0x1.000002p-25f, 0x0001}, {0x3p-25f, 0x0002},
      {-0x1p-25f, 0x8000},   {1e-10f, 0x0000},      {-1e-10f, 0x8000},     {0.1f, 0x2E66},
      {3.14159f, 0x4248},    {1.0f / 3.0f, 0x3555}, {6.1e-5f, 0x03FF},     {0x1.002p0f, 0x3C00},
      {0x1.006p0f, 0x3C02},  {0x1.00201p0f, 0x3C01}, {0x1.ffep15f, 0x7C00}, {0x1.ffdfep15f, 0x7BFF},
      {2049.0f, 0x6800},     {2051.0f, 0x6802},
  };
  int n = (int)(sizeof t / sizeof t[0]);
  for (int i = 0; i < n; i++) {
    uint16_t h = to_half(t[i].f);
    if (h != t[i].h) CHECK_FAIL_("f32 %a -> %#06x, want %#06x", (double)t[i].f, h, t[i].h);
    check_count_++;
  }
  uint16_t hn = to_half(NAN), hnn = to_half(-NAN);
  CHECK((hn & 0x7C00) == 0x7C00 && (hn & 0x3FF) != 0);
  CHECK((hnn & 0x7C00) == 0x7C00 && (hnn & 0x3FF) != 0 && (hnn & 0x8000));
  // A NaN whose payload sits only in bits a half cannot hold stays NaN.
  uint32_t low_payload = 0x7F800001u;
  float lp;
  memcpy(&lp, &low_payload, sizeof lp);
  uint16_t hl = to_half(lp);
  CHECK((hl & 0x7C00) == 0x7C00 && (hl & 0x3FF) != 0);
}

static void test_f16_to_f32_table(void) {
  uint16_t h[11] = {0x3C00, 0x7BFF, 0x0001, 0x03FF, 0x0400, 0x7C00, 0xFC00, 0x8000, 0x7E00, 0xC000, 0x3555};
  float f[11];
  k_f16_to_f32(f, h, 11);
  CHECK(f[0] == 1.0f);
  CHECK(f[1] == 65504.0f);
  CHECK(f[2] == 0x1p-24f);
  CHECK(f[3] == 1023 * 0x1p-24f);
  CHECK(f[4] == 0x1p-14f);
  CHECK(isinf(f[5]) && f[5] > 0);
  CHECK(isinf(f[6]) && f[6] < 0);
  CHECK(f[7] == 0.0f && signbit(f[7]));
  CHECK(isnan(f[8]));
  CHECK(f[9] == -2.0f);
  CHECK(f[10] == 0.333251953125f);
}

static void test_exhaustive(void) {
  static uint16_t h[65536], back[65536];
  static float f[65536];
  for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
  k_f16_to_f32(f, h, 65536);
  k_f32_to_f16(back, f, 65536);
  int bad_value = 0, bad_trip = 0;
  for (int i = 0; i < 65536; i++) {
    int e = (i >> 10) & 31;
    if (e == 31) {
      if ((i & 1023) == 0 ? !isinf(f[i]) || (signbit(f[i]) != 0) != (i >> 15) : !isnan(f[i])) bad_value++;
    } else if ((double)f[i] != half_formula((uint16_t)i) || (signbit(f[i]) != 0) != (i >> 15)) {
      bad_value++;
    }
    if (back[i] != i) bad_trip++;
  }
  CHECK_EQ_INT(bad_value, 0);
  CHECK_EQ_INT(bad_trip, 0);

  // Between each pair of adjacent finite halves (and past 0x7BFF toward the
  // would-be 0x7C00 = 65536): the midpoint rounds to the even one, one float
  // ulp either side rounds to the nearer one. Midpoints need 12 significant
  // bits, so they are exact floats.
  int bad_round = 0;
  for (int s = 0; s < 2; s++) {
    for (int i = 0; i < 0x7C00; i++) {
      uint16_t lo = (uint16_t)(i | (s << 15)), hi = (uint16_t)((i + 1) | (s << 15));
      double vlo = half_formula(lo), vhi = i + 1 == 0x7C00 ? (s ? -65536.0 : 65536.0) : half_formula(hi);
      float mid = (float)((vlo + vhi) / 2);
      if ((double)mid != (vlo + vhi) / 2) bad_round++;
      uint16_t even = (i & 1) ? hi : lo;
      if (to_half(mid) != even) bad_round++;
      float below = nextafterf(mid, (float)vlo), above = nextafterf(mid, (float)vhi);
      if (to_half(below) != lo) bad_round++;
      if (to_half(above) != hi) bad_round++;
    }
  }
  CHECK_EQ_INT(bad_round, 0);
}

// --- k_cast

static const k_elem all_types[12] = {K_F32, K_F64, K_F16, K_I64, K_I32, K_I16,
                                     K_I8,  K_U8,  K_U16, K_U32, K_U64, K_BOOL};
static const char *const type_names[12] = {"f32", "f64", "f16", "i64", "i32", "i16",
                                           "i8",  "u8",  "u16", "u32", "u64", "bool"};

static void put(void *p, k_elem t, size_t i, double v) {
  switch (t) {
    case K_F32: ((float *)p)[i] = (float)v; break;
    case K_F64: ((double *)p)[i] = v; break;
    case K_F16: ((uint16_t *)p)[i] = to_half((float)v); break;
    case K_I64: ((int64_t *)p)[i] = (int64_t)v; break;
    case K_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case K_I16: ((int16_t *)p)[i] = (int16_t)v; break;
    case K_I8: ((int8_t *)p)[i] = (int8_t)v; break;
    case K_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case K_U16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case K_U32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case K_U64: ((uint64_t *)p)[i] = (uint64_t)v; break;
    case K_BOOL: ((uint8_t *)p)[i] = v != 0; break;
  }
}

static double get(const void *p, k_elem t, size_t i) {
  switch (t) {
    case K_F32: return ((const float *)p)[i];
    case K_F64: return ((const double *)p)[i];
    case K_F16: return half_formula(((const uint16_t *)p)[i]);
    case K_I64: return (double)((const int64_t *)p)[i];
    case K_I32: return ((const int32_t *)p)[i];
    case K_I16: return ((const int16_t *)p)[i];
    case K_I8: return ((const int8_t *)p)[i];
    case K_U8: return ((const uint8_t *)p)[i];
    case K_U16: return ((const uint16_t *)p)[i];
    case K_U32: return ((const uint32_t *)p)[i];
    case K_U64: return (double)((const uint64_t *)p)[i];
    case K_BOOL: return ((const uint8_t *)p)[i];
  }
  return NAN;
}

static int is_bool(k_elem t) { return t == K_BOOL; }

static void test_cast_all_pairs(void) {
  // Values every type holds exactly (bool holds them as 0/1).
  static const double vals[6] = {0, 1, 2, 7, 100, 127};
  int pairs = 0;
  for (int a = 0; a < 12; a++) {
    for (int b = 0; b < 12; b++) {
      k_elem xt = all_types[a], yt = all_types[b];
      uint64_t xbuf[6], ybuf[7];  // 8-byte slots fit every type
      for (int i = 0; i < 6; i++) put(xbuf, xt, (size_t)i, vals[i]);
      memset(ybuf, 0xA5, sizeof ybuf);
      k_cast(ybuf, yt, xbuf, xt, 6);
      int bad = 0;
      for (int i = 0; i < 6; i++) {
        double want = (is_bool(xt) || is_bool(yt)) ? (vals[i] != 0) : vals[i];
        if (get(ybuf, yt, (size_t)i) != want) bad++;
      }
      if (bad) CHECK_FAIL_("cast %s -> %s: %d wrong", type_names[a], type_names[b], bad);
      check_count_++;
      pairs++;
      // The last 8-byte slot is past the output of even an 8-byte type.
      CHECK(ybuf[6] == UINT64_C(0xA5A5A5A5A5A5A5A5));
    }
  }
  CHECK_EQ_INT(pairs, 144);
}

static void test_cast_rules(void) {
  // float -> int truncates toward zero; saturates; NaN -> 0.
  float f[7] = {-2.7f, -0.5f, 0.5f, 2.7f, 1e10f, -1e10f, NAN};
  int32_t i32[7];
  k_cast(i32, K_I32, f, K_F32, 7);
  int32_t want_i32[7] = {-2, 0, 0, 2, INT32_MAX, INT32_MIN, 0};
  for (int i = 0; i < 7; i++) CHECK_EQ_INT(i32[i], want_i32[i]);
  float fu[5] = {-1.0f, 255.9f, 256.0f, 3.99f, -0.9f};
  uint8_t u8[5];
  k_cast(u8, K_U8, fu, K_F32, 5);
  uint8_t want_u8[5] = {0, 255, 255, 3, 0};
  for (int i = 0; i < 5; i++) CHECK_EQ_INT(u8[i], want_u8[i]);
  double d[5] = {9.3e18, -9.3e18, 0x1p62, -0x1p63, -1234567.9};
  int64_t i64[5];
  k_cast(i64, K_I64, d, K_F64, 5);
  CHECK(i64[0] == INT64_MAX);
  CHECK(i64[1] == INT64_MIN);
  CHECK(i64[2] == (INT64_C(1) << 62));
  CHECK(i64[3] == INT64_MIN);
  CHECK_EQ_INT(i64[4], -1234567);
  double du[3] = {1.8e19, 2e19, 0x1p64};
  uint64_t u64[3];
  k_cast(u64, K_U64, du, K_F64, 3);
  CHECK(u64[0] == UINT64_C(18000000000000000000));
  CHECK(u64[1] == UINT64_MAX);
  CHECK(u64[2] == UINT64_MAX);
  // To bool is x != 0: -0 is false, NaN is true.
  float fb[5] = {0.0f, -0.0f, 0.1f, NAN, -3.0f};
  uint8_t b[5];
  k_cast(b, K_BOOL, fb, K_F32, 5);
  uint8_t want_b[5] = {0, 0, 1, 1, 1};
  for (int i = 0; i < 5; i++) CHECK_EQ_INT(b[i], want_b[i]);
  uint16_t hb[3] = {0x8000, 0x0001, 0x7E00};
  k_cast(b, K_BOOL, hb, K_F16, 3);
  CHECK(b[0] == 0 && b[1] == 1 && b[2] == 1);
  int64_t ib[3] = {0, -5, INT64_MIN};
  k_cast(b, K_BOOL, ib, K_I64, 3);
  CHECK(b[0] == 0 && b[1] == 1 && b[2] == 1);
  // Bool reads any non-zero byte as true, writes 1/0.
  uint8_t bsrc[3] = {0, 1, 2};
  float bf[3];
  int64_t bi[3];
  uint8_t bb[3];
  k_cast(bf, K_F32, bsrc, K_BOOL, 3);
  k_cast(bi, K_I64, bsrc, K_BOOL, 3);
  k_cast(bb, K_BOOL, bsrc, K_BOOL, 3);
  CHECK(bf[0] == 0.0f && bf[1] == 1.0f && bf[2] == 1.0f);
  CHECK(bi[0] == 0 && bi[1] == 1 && bi[2] == 1);
  CHECK(bb[0] == 0 && bb[1] == 1 && bb[2] == 1);
  // Integer -> integer wraps modulo 2^bits.
  int64_t w[3] = {300, -129, -1};
  int8_t i8[3];
  k_cast(i8, K_I8, w, K_I64, 3);
  CHECK(i8[0] == 44 && i8[1] == 127 && i8[2] == -1);
  int32_t m1 = -1;
  uint32_t u32;
  k_cast(&u32, K_U32, &m1, K_I32, 1);
  CHECK(u32 == UINT32_MAX);
  uint64_t umax = UINT64_MAX;
  int16_t i16;
  k_cast(&i16, K_I16, &umax, K_U64, 1);
  CHECK_EQ_INT(i16, -1);
  // Integer -> float rounds to nearest.
  float uf;
  k_cast(&uf, K_F32, &umax, K_U64, 1);
  CHECK(uf == 0x1p64f);
  int64_t odd = (INT64_C(1) << 24) + 1;
  k_cast(&uf, K_F32, &odd, K_I64, 1);
  CHECK(uf == 16777216.0f);
  double df;
  k_cast(&df, K_F64, &odd, K_I64, 1);
  CHECK(df == 16777217.0);
}

static void test_cast_f16(void) {
  // To and from half goes through the converters.
  float f[6] = {1.0f, 65520.0f, 5.96e-8f, -0.0f, 0.1f, -2.5f};
  uint16_t h[6], href[6];
  k_cast(h, K_F16, f, K_F32, 6);
  k_f32_to_f16(href, f, 6);
  CHECK(memcmp(h, href, sizeof h) == 0);
  double dd[6];
  k_cast(dd, K_F64, h, K_F16, 6);
  for (int i = 0; i < 6; i++) CHECK(dd[i] == (i == 1 ? INFINITY : half_formula(h[i])));
  // From double: rounded once. 1 + 2^-11 + 2^-40 is above the midpoint of
  // 0x3C00/0x3C01, though as a float it would be exactly on it.
  double above_mid = 1.0 + 0x1p-11 + 0x1p-40;
  uint16_t hd;
  k_cast(&hd, K_F16, &above_mid, K_F64, 1);
  CHECK_EQ_INT(hd, 0x3C01);
  CHECK_EQ_INT(to_half((float)above_mid), 0x3C00);
  double dtab[7] = {65504.0, 65519.99, 65520.0, 0x1p-25, 0x1.0000001p-25, -0.0, NAN};
  uint16_t htab[7];
  k_cast(htab, K_F16, dtab, K_F64, 7);
  CHECK_EQ_INT(htab[0], 0x7BFF);
  CHECK_EQ_INT(htab[1], 0x7BFF);
  CHECK_EQ_INT(htab[2], 0x7C00);
  CHECK_EQ_INT(htab[3], 0x0000);
  CHECK_EQ_INT(htab[4], 0x0001);
  CHECK_EQ_INT(htab[5], 0x8000);
  CHECK((htab[6] & 0x7C00) == 0x7C00 && (htab[6] & 0x3FF) != 0);
  // Integers to half: exact below 2048, ties to even above, inf past 65519.
  int32_t ints[4] = {-5, 2049, 70000, -70000};
  k_cast(h, K_F16, ints, K_I32, 4);
  CHECK_EQ_INT(h[0], 0xC500);
  CHECK_EQ_INT(h[1], 0x6800);
  CHECK_EQ_INT(h[2], 0x7C00);
  CHECK_EQ_INT(h[3], 0xFC00);
  // Half to integer truncates.
  uint16_t hs[3] = {0x3E00, 0xC500, 0xBE00};  // 1.5, -5, -1.5
  int32_t hi[3];
  k_cast(hi, K_I32, hs, K_F16, 3);
  CHECK(hi[0] == 1 && hi[1] == -5 && hi[2] == -1);
  // n = 0 writes nothing.
  uint16_t g = 0x1234;
  k_cast(&g, K_F16, f, K_F32, 0);
  k_f32_to_f16(&g, f, 0);
  float gf = 9.0f;
  k_f16_to_f32(&gf, h, 0);
  CHECK_EQ_INT(g, 0x1234);
  CHECK(gf == 9.0f);
}

int main(void) {
  test_f32_to_f16_table();
  test_f16_to_f32_table();
  test_exhaustive();
  test_cast_all_pairs();
  test_cast_rules();
  test_cast_f16();
  CHECK_DONE();
}
