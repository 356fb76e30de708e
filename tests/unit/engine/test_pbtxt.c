// Tests engine/repo/pbtxt.c: every text-format feature against pbtxt_test.proto,
// broken inputs (message, line and field name), real Triton config.pbtxt
// texts against inference.ModelConfig, and a truncation/mutation loop that
// must never crash (run it under ASan).
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine/repo/pbtxt.h"
#include "model_config.pb-c.h"
#include "pbtxt_test.pb-c.h"

// Parses from an exact-size heap copy without a terminating NUL, so ASan
// catches any read past the end.
static int parse_desc(const ProtobufCMessageDescriptor *d, const char *text, size_t len, ProtobufCMessage **out,
                      err *e) {
  char *copy = malloc(len ? len : 1);
  if (!copy) return -1;
  memcpy(copy, text, len);
  int rc = pbtxt_parse(d, copy, len, "t.pbtxt", out, e);
  free(copy);
  return rc;
}

static PbtxtTest__All *parse_all(const char *text, err *e) {
  ProtobufCMessage *m = NULL;
  int rc = parse_desc(&pbtxt_test__all__descriptor, text, strlen(text), &m, e);
  if (rc) {
    CHECK(m == NULL);
    return NULL;
  }
  return (PbtxtTest__All *)m;
}

static void free_all(PbtxtTest__All *m) {
  if (m) protobuf_c_message_free_unpacked(&m->base, NULL);
}

// Expects failure with ERR_INVALID_ARGUMENT and a message containing each needle.
static void expect_error(const char *text, const char *n1, const char *n2) {
  err e = {0};
  PbtxtTest__All *m = parse_all(text, &e);
  CHECK(m == NULL);
  if (m) {
    fprintf(stderr, "  unexpectedly parsed: %s\n", text);
    free_all(m);
    return;
  }
  CHECK_EQ_INT(e.code, ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, n1);
  if (n2) CHECK_CONTAINS(e.msg, n2);
}

// --- features

typedef struct sbuf_t {
  char *p;
  size_t n, cap;
} sbuf_t;

// Appends to b; on out of memory b->p is NULL (the caller checks once).
static void buf_printf(sbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_printf(sbuf_t *b, const char *fmt, ...) {
  if (b->cap && !b->p) return;
  va_list ap;
  va_start(ap, fmt);
  char tmp[256];
  int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (k < 0 || (size_t)k >= sizeof tmp) return;
  if (b->n + (size_t)k + 1 > b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 4096;
    while (cap < b->n + (size_t)k + 1) cap *= 2;
    char *q = realloc(b->p, cap);
    if (!q) free(b->p);
    b->p = q;
    b->cap = cap;
    if (!q) return;
  }
  memcpy(b->p + b->n, tmp, (size_t)k + 1);
  b->n += (size_t)k;
}

static void test_scalars(void) {
  err e = {0};
  PbtxtTest__All *m = parse_all(
      "i32: -2147483648\n"
      "i64: 9223372036854775807\n"
      "u32: 4294967295\n"
      "u64: 18446744073709551615\n"
      "s32: -5 s64: -9223372036854775808\n"
      "f32: 0x10 f64: 017\n"
      "sf32: -7; sf64: 8,\n"
      "fl: 2.5f db: -1e-3\n"
      "b: true\n"
      "s: \"hello\"\n"
      "by: \"\\000\\001x\"\n"
      "color: GREEN\n",
      &e);
  CHECK(m != NULL);
  if (!m) {
    fprintf(stderr, "  %s\n", e.msg);
    return;
  }
  CHECK_EQ_INT(m->i32, INT32_MIN);
  CHECK(m->i64 == INT64_MAX);
  CHECK(m->u32 == UINT32_MAX);
  CHECK(m->u64 == UINT64_MAX);
  CHECK_EQ_INT(m->s32, -5);
  CHECK(m->s64 == INT64_MIN);
  CHECK_EQ_INT(m->f32, 16);
  CHECK_EQ_INT(m->f64, 15);
  CHECK_EQ_INT(m->sf32, -7);
  CHECK_EQ_INT(m->sf64, 8);
  CHECK_NEAR(m->fl, 2.5, 0, 0);
  CHECK_NEAR(m->db, -1e-3, 1e-12, 0);
  CHECK_EQ_INT(m->b, 1);
  CHECK_EQ_STR(m->s, "hello");
  CHECK_EQ_INT(m->by.len, 3);
  CHECK(m->by.data && m->by.data[0] == 0 && m->by.data[1] == 1 && m->by.data[2] == 'x');
  CHECK_EQ_INT(m->color, PBTXT_TEST__COLOR__GREEN);
  free_all(m);

  // Float spellings: infinities, NaN, integers, leading dot, exponent.
  m = parse_all("fl: -inf db: nan r_db: [inf, -Infinity, 3, .5, 1E+2, -0.0] r_fl: [1, 2.0f]", &e);
  CHECK(m != NULL);
  if (m) {
    CHECK(isinf(m->fl) && m->fl < 0);
    CHECK(isnan(m->db));
    CHECK_EQ_INT(m->n_r_db, 6);
    if (m->n_r_db == 6) {
      CHECK(isinf(m->r_db[0]) && m->r_db[0] > 0);
      CHECK(isinf(m->r_db[1]) && m->r_db[1] < 0);
      CHECK_NEAR(m->r_db[2], 3, 0, 0);
      CHECK_NEAR(m->r_db[3], 0.5, 0, 0);
      CHECK_NEAR(m->r_db[4], 100, 0, 0);
      CHECK(m->r_db[5] == 0 && signbit(m->r_db[5]));
    }
    CHECK_EQ_INT(m->n_r_fl, 2);
    free_all(m);
  }

  // Bool spellings.
  m = parse_all("r_b: [true, false, True, False, t, f, 1, 0]", &e);
  CHECK(m != NULL);
  if (m) {
    CHECK_EQ_INT(m->n_r_b, 8);
    int want[8] = {1, 0, 1, 0, 1, 0, 1, 0};
    for (size_t i = 0; i < m->n_r_b && i < 8; i++) CHECK_EQ_INT(m->r_b[i], want[i]);
    free_all(m);
  }
}

static void test_strings(void) {
  err e = {0};
  PbtxtTest__All *m = parse_all(
      "s: 'it''s' \"|\\n\\t\\\\\\\"\\'\\x41\\101\\u00e9\\U0001F600|\"\n"
      "r_s: \"\" r_s: 'a' \"b\"\n"
      "r_by: \"\\xff\\x00\" r_by: ''\n",
      &e);
  CHECK(m != NULL);
  if (!m) {
    fprintf(stderr, "  %s\n", e.msg);
    return;
  }
  CHECK_EQ_STR(m->s, "its|\n\t\\\"'AA\xc3\xa9\xf0\x9f\x98\x80|");
  CHECK_EQ_INT(m->n_r_s, 2);
  if (m->n_r_s == 2) {
    CHECK_EQ_STR(m->r_s[0], "");
    CHECK_EQ_STR(m->r_s[1], "ab");
  }
  CHECK_EQ_INT(m->n_r_by, 2);
  if (m->n_r_by == 2) {
    CHECK_EQ_INT(m->r_by[0].len, 2);
    CHECK(m->r_by[0].data[0] == 0xff && m->r_by[0].data[1] == 0);
    CHECK_EQ_INT(m->r_by[1].len, 0);
  }
  free_all(m);

  // Unset proto3 strings keep protobuf-c's static empty string (freeing must skip it).
  m = parse_all("", &e);
  CHECK(m != NULL);
  if (m) {
    CHECK_EQ_STR(m->s, "");
    CHECK(m->s == protobuf_c_empty_string);
    CHECK(m->inner == NULL);
    CHECK_EQ_INT(m->choice_case, PBTXT_TEST__ALL__CHOICE__NOT_SET);
    free_all(m);
  }
}

static void test_enums(void) {
  err e = {0};
  PbtxtTest__All *m = parse_all("color: 1 r_color: [BLUE, -3, 2, COLOR_NONE] r_color: 7", &e);
  CHECK(m != NULL);
  if (!m) return;
  CHECK_EQ_INT(m->color, PBTXT_TEST__COLOR__RED);
  CHECK_EQ_INT(m->n_r_color, 5);
  if (m->n_r_color == 5) {
    CHECK_EQ_INT(m->r_color[0], PBTXT_TEST__COLOR__BLUE);
    CHECK_EQ_INT(m->r_color[1], -3);
    CHECK_EQ_INT(m->r_color[2], PBTXT_TEST__COLOR__GREEN);
    CHECK_EQ_INT(m->r_color[3], 0);
    CHECK_EQ_INT(m->r_color[4], 7);  // proto3 enums are open
  }
  free_all(m);
}

static void test_messages_and_repeated(void) {
  err e = {0};
  PbtxtTest__All *m = parse_all(
      "# leading comment\n"
      "inner { name: \"a\" dims: [1, -1] }  # trailing comment\n"
      "inner: < n: 3; dims: 4 >\n"  // merged into the same message
      "r_inner { name: 'x' child: { n: 1 child { n: 2 } } }\n"
      "r_inner: [ { name: 'y' }, < name: 'z' > ]\n"
      "r_inner []\n"
      "r_i32: 1 r_i32: [2, 3] r_i32: []\n"
      "r_u64: [0x10, 010]\n"
      "i32: 1 i32: 2\n"  // last scalar wins
      "s: 'first' s: 'second'\n",
      &e);
  CHECK(m != NULL);
  if (!m) {
    fprintf(stderr, "  %s\n", e.msg);
    return;
  }
  CHECK(m->inner != NULL);
  if (m->inner) {
    CHECK_EQ_STR(m->inner->name, "a");
    CHECK_EQ_INT(m->inner->n, 3);
    CHECK_EQ_INT(m->inner->n_dims, 3);
    if (m->inner->n_dims == 3) {
      CHECK_EQ_INT(m->inner->dims[0], 1);
      CHECK_EQ_INT(m->inner->dims[1], -1);
      CHECK_EQ_INT(m->inner->dims[2], 4);
    }
  }
  CHECK_EQ_INT(m->n_r_inner, 3);
  if (m->n_r_inner == 3) {
    CHECK_EQ_STR(m->r_inner[0]->name, "x");
    CHECK(m->r_inner[0]->child && m->r_inner[0]->child->n == 1);
    CHECK(m->r_inner[0]->child && m->r_inner[0]->child->child && m->r_inner[0]->child->child->n == 2);
    CHECK_EQ_STR(m->r_inner[1]->name, "y");
    CHECK_EQ_STR(m->r_inner[2]->name, "z");
    CHECK(m->r_inner[2]->child == NULL);
  }
  CHECK_EQ_INT(m->n_r_i32, 3);
  if (m->n_r_i32 == 3) {
    CHECK_EQ_INT(m->r_i32[0], 1);
    CHECK_EQ_INT(m->r_i32[2], 3);
  }
  CHECK_EQ_INT(m->n_r_u64, 2);
  if (m->n_r_u64 == 2) {
    CHECK_EQ_INT(m->r_u64[0], 16);
    CHECK_EQ_INT(m->r_u64[1], 8);
  }
  CHECK_EQ_INT(m->i32, 2);
  CHECK_EQ_STR(m->s, "second");

  // The result must be a well-formed protobuf-c message: pack and unpack it.
  size_t sz = protobuf_c_message_get_packed_size(&m->base);
  uint8_t *buf = malloc(sz ? sz : 1);
  CHECK(buf != NULL);
  if (buf) {
    CHECK_EQ_INT(protobuf_c_message_pack(&m->base, buf), sz);
    PbtxtTest__All *u = pbtxt_test__all__unpack(NULL, sz, buf);
    CHECK(u != NULL);
    if (u) {
      CHECK_EQ_INT(u->n_r_inner, 3);
      CHECK(u->inner && u->inner->n_dims == 3);
      CHECK_EQ_STR(u->s, "second");
      pbtxt_test__all__free_unpacked(u, NULL);
    }
    free(buf);
  }
  free_all(m);
}

static void test_maps(void) {
  err e = {0};
  PbtxtTest__All *m = parse_all(
      "m_ss { key: 'a' value: '1' }\n"
      "m_ss { key: 'b' value: '2' }\n"
      "m_ss { key: 'a' value: '3' }\n"  // same key: last entry wins
      "m_si [ { key: 'k' value { name: 'v' n: 4 } } ]\n"
      "m_ui { key: 18446744073709551615 value: < n: 1 > }\n"
      "m_ui { key: 1 }\n"
      "m_ib { key: -1 value: true }\n",
      &e);
  CHECK(m != NULL);
  if (!m) {
    fprintf(stderr, "  %s\n", e.msg);
    return;
  }
  CHECK_EQ_INT(m->n_m_ss, 2);
  if (m->n_m_ss == 2) {
    CHECK_EQ_STR(m->m_ss[0]->key, "b");
    CHECK_EQ_STR(m->m_ss[0]->value, "2");
    CHECK_EQ_STR(m->m_ss[1]->key, "a");
    CHECK_EQ_STR(m->m_ss[1]->value, "3");
  }
  CHECK_EQ_INT(m->n_m_si, 1);
  if (m->n_m_si == 1) {
    CHECK_EQ_STR(m->m_si[0]->key, "k");
    CHECK(m->m_si[0]->value && m->m_si[0]->value->n == 4);
  }
  CHECK_EQ_INT(m->n_m_ui, 2);
  if (m->n_m_ui == 2) {
    CHECK(m->m_ui[0]->key == UINT64_MAX);
    CHECK(m->m_ui[1]->key == 1 && m->m_ui[1]->value == NULL);
  }
  CHECK_EQ_INT(m->n_m_ib, 1);
  if (m->n_m_ib == 1) CHECK(m->m_ib[0]->key == -1 && m->m_ib[0]->value);
  free_all(m);
}

// Many entries: every key given twice (the second value wins, the survivors
// in the order of their last occurrence), maps merged across two bodies of
// one message, and repeated arrays grown past many doublings. Parsing is
// linear (map keys deduped through a hash set): at 200k entries the old
// per-entry scan took minutes; no timing is asserted here.
static void test_many_entries(void) {
  enum { N = 100000 };
  sbuf_t b = {0};
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < N; i++) {
      // pass 0: every key; pass 1: the odd keys again, so those move to the end
      if (pass == 1 && i % 2 == 0) continue;
      buf_printf(&b, "m_ss { key: 'k%d' value: '%d' }\n", i, pass);
    }
  buf_printf(&b, "m_ui [");
  for (int i = 0; i < N; i++) buf_printf(&b, "%s{ key: %d value { n: %d } }", i ? ", " : "", i % 1000, i);
  buf_printf(&b, "]\nr_i32: [");
  for (int i = 0; i < N; i++) buf_printf(&b, "%s%d", i ? "," : "", i);
  buf_printf(&b, "]\ninner { child { dims: [1, 2] } } inner { child { dims: 3 } }\n");
  err e = {0};
  PbtxtTest__All *m = b.p ? parse_all(b.p, &e) : NULL;
  free(b.p);
  CHECK(m != NULL);
  if (!m) {
    fprintf(stderr, "  %s\n", e.msg);
    return;
  }
  CHECK_EQ_INT(m->n_m_ss, N);
  if (m->n_m_ss == N) {
    int bad = 0;
    for (int i = 0; i < N / 2; i++) {  // the even keys first, in order, from pass 0
      char k[16];
      snprintf(k, sizeof k, "k%d", 2 * i);
      bad += strcmp(m->m_ss[i]->key, k) != 0 || strcmp(m->m_ss[i]->value, "0") != 0;
      snprintf(k, sizeof k, "k%d", 2 * i + 1);  // then the odd ones, from pass 1
      bad += strcmp(m->m_ss[N / 2 + i]->key, k) != 0 || strcmp(m->m_ss[N / 2 + i]->value, "1") != 0;
    }
    CHECK_EQ_INT(bad, 0);
  }
  CHECK_EQ_INT(m->n_m_ui, 1000);  // keys 0..999, each last given at N - 1000 + key
  if (m->n_m_ui == 1000) {
    int bad = 0;
    for (int k = 0; k < 1000; k++) bad += m->m_ui[k]->key != (uint64_t)k || m->m_ui[k]->value->n != N - 1000 + k;
    CHECK_EQ_INT(bad, 0);
  }
  CHECK_EQ_INT(m->n_r_i32, N);
  if (m->n_r_i32 == N) CHECK(m->r_i32[0] == 0 && m->r_i32[N - 1] == N - 1);
  CHECK(m->inner && m->inner->child && m->inner->child->n_dims == 3 && m->inner->child->dims[2] == 3);
  free_all(m);
}

// One repeated or map field may hold PBTXT_MAX_ENTRIES values; one more
// fails naming the field and the limit.
static void test_entry_limit(void) {
  size_t n = PBTXT_MAX_ENTRIES;
  char *text = malloc(2 * (n + 1) + 16);
  if (!text) return;
  size_t o = (size_t)sprintf(text, "r_i32: [");
  for (size_t i = 0; i < n; i++) text[o++] = '1', text[o++] = ',';
  text[o - 1] = ']';
  text[o] = '\0';
  err e = {0};
  PbtxtTest__All *m = parse_all(text, &e);
  CHECK(m != NULL && m->n_r_i32 == n);
  free_all(m);
  text[o - 1] = ',';
  o += (size_t)sprintf(text + o, "2]");
  m = parse_all(text, &e);
  CHECK(m == NULL);
  free_all(m);
  CHECK_EQ_INT(e.code, ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "field 'r_i32' has more than 1048576 entries");
  free(text);
  e = (err){0};
  m = parse_all("m_ib { key: 1 value: true } m_ib { key: 1 value: false }", &e);  // a repeated key: one entry
  CHECK(m != NULL && m->n_m_ib == 1 && !m->m_ib[0]->value);
  free_all(m);
}

static void test_oneofs(void) {
  err e = {0};
  PbtxtTest__All *m = parse_all("c_str: 'x' c_str: 'y' o_bytes: 'zz'", &e);
  CHECK(m != NULL);
  if (m) {
    CHECK_EQ_INT(m->choice_case, PBTXT_TEST__ALL__CHOICE_C_STR);
    CHECK_EQ_STR(m->c_str, "y");
    CHECK_EQ_INT(m->other_case, PBTXT_TEST__ALL__OTHER_O_BYTES);
    CHECK_EQ_INT(m->o_bytes.len, 2);
    free_all(m);
  }
  m = parse_all("c_msg { n: 1 } c_msg { name: 'q' }", &e);
  CHECK(m != NULL);
  if (m) {
    CHECK_EQ_INT(m->choice_case, PBTXT_TEST__ALL__CHOICE_C_MSG);
    CHECK(m->c_msg && m->c_msg->n == 1);
    CHECK(m->c_msg && strcmp(m->c_msg->name, "q") == 0);
    free_all(m);
  }
  m = parse_all("c_int: 5 o_flag: true", &e);
  CHECK(m != NULL);
  if (m) {
    CHECK_EQ_INT(m->choice_case, PBTXT_TEST__ALL__CHOICE_C_INT);
    CHECK_EQ_INT(m->c_int, 5);
    CHECK_EQ_INT(m->o_flag, 1);
    free_all(m);
  }
}

// --- broken inputs

static void test_errors(void) {
  expect_error("i32: 1\ns: \"abc\n", "t.pbtxt:2: unterminated string", NULL);
  expect_error("s: 'abc\\", "t.pbtxt:1: unterminated string", NULL);
  expect_error("i32: 1\ninner {\n n: 1\n", "t.pbtxt:4: unexpected end of input", "opened at line 2");
  expect_error("inner < n: 1 }", "t.pbtxt:1: expected a field name in pbtxt_test.Inner, got '}'", NULL);
  expect_error("i32: 1\n\n\ni32: abc", "t.pbtxt:4: invalid value 'abc' for int32 field 'i32'", NULL);
  expect_error("i32: 12a", "t.pbtxt:1: invalid value '12a' for int32 field 'i32'", NULL);
  expect_error("i32: 1.5", "invalid value '1.5' for int32 field 'i32'", NULL);
  expect_error("i32: 0x", "invalid value '0x' for int32 field 'i32'", NULL);
  expect_error("i32: 2147483648", "t.pbtxt:1: value '2147483648' out of range for int32 field 'i32'", NULL);
  expect_error("i32: -2147483649", "value '-2147483649' out of range for int32 field 'i32'", NULL);
  expect_error("u32: -1", "value '-1' out of range for uint32 field 'u32'", NULL);
  expect_error("u64: 18446744073709551616", "out of range for uint64 field 'u64'", NULL);
  expect_error("r_i32: [1, 99999999999]", "out of range for int32 field 'r_i32'", NULL);
  expect_error("fl: 1.2.3", "invalid value '1.2.3' for float field 'fl'", NULL);
  expect_error("db: 0x10", "invalid value '0x10' for double field 'db'", NULL);
  expect_error("b: yes", "invalid value 'yes' for bool field 'b'", NULL);
  expect_error("b: 2", "invalid value '2' for bool field 'b'", NULL);
  expect_error("\ncolor: PURPLE", "t.pbtxt:2: unknown value 'PURPLE' for enum field 'color' (pbtxt_test.Color)", NULL);
  expect_error("color: 'RED'", "invalid value ''RED'' for enum field 'color'", NULL);
  expect_error("i32: 1\nmax_batch_sise: 4", "t.pbtxt:2: unknown field 'max_batch_sise' in pbtxt_test.All", NULL);
  expect_error("inner { bogus: 1 }", "unknown field 'bogus' in pbtxt_test.Inner", NULL);
  expect_error("i32: }", "t.pbtxt:1: missing value for field 'i32'", NULL);
  expect_error("i32:", "missing value for field 'i32'", NULL);
  expect_error("s: ,", "missing value for field 's'", NULL);
  expect_error("inner:", "missing value for field 'inner'", NULL);
  expect_error("inner: 5", "expected '{' for message field 'inner', got '5'", NULL);
  expect_error("s: 5", "invalid value '5' for string field 's': expected a quoted string", NULL);
  expect_error("i32 5", "expected ':' after field 'i32'", NULL);
  expect_error("c_int: 1\nc_str: 'x'", "t.pbtxt:2: field 'c_str' conflicts with 'c_int'", NULL);
  expect_error("c_msg {}\nc_int: 3", "field 'c_int' conflicts with 'c_msg'", NULL);
  expect_error("i32: [1, 2]", "field 'i32' is not repeated", NULL);
  expect_error("r_i32: [1 2]", "expected ',' or ']' in list for field 'r_i32', got '2'", NULL);
  expect_error("r_i32: [1,\n", "t.pbtxt:2: missing value for field 'r_i32'", NULL);
  expect_error("r_i32: [1", "list for field 'r_i32' opened at line 1 is not closed", NULL);
  expect_error("r_i32: [1,]", "missing value for field 'r_i32'", NULL);
  expect_error("s: '\\q'", "invalid escape '\\q' in string for field 's'", NULL);
  expect_error("s: '\\x'", "invalid escape '\\x' in string for field 's'", NULL);
  expect_error("s: '\\u12'", "invalid escape '\\u' in string for field 's'", NULL);
  expect_error("s: '\\uD800'", "invalid unicode escape", NULL);
  expect_error("s: 'a\\000b'", "string field 's' contains a NUL byte", NULL);
  expect_error("i32: 1 @", "t.pbtxt:1: unexpected character '@'", NULL);
  expect_error("[ext.field]: 1", "extension and Any field names are not supported", NULL);
  expect_error("5: 1", "expected a field name in pbtxt_test.All, got '5'", NULL);
  expect_error("}", "expected a field name in pbtxt_test.All, got '}'", NULL);
  expect_error("m_ss { key: 1 }", "invalid value '1' for string field 'key'", NULL);
}

static void test_nesting_limit(void) {
  // 40 levels parse; 200 levels are refused instead of exhausting the stack.
  for (int levels = 40; levels <= 200; levels += 160) {
    size_t cap = (size_t)levels * 10 + 16;
    char *text = malloc(cap);
    CHECK(text != NULL);
    if (!text) return;
    size_t n = 0;
    n += (size_t)sprintf(text + n, "inner ");
    for (int i = 0; i < levels; i++) n += (size_t)sprintf(text + n, "{ child ");
    n += (size_t)sprintf(text + n, "{ n: 1 }");
    for (int i = 0; i < levels; i++) text[n++] = '}';
    text[n] = '\0';
    err e = {0};
    PbtxtTest__All *m = parse_all(text, &e);
    if (levels == 40) {
      CHECK(m != NULL);
      int depth = 0;
      for (PbtxtTest__Inner *c = m ? m->inner : NULL; c; c = c->child) depth++;
      CHECK_EQ_INT(depth, 41);
    } else {
      CHECK(m == NULL);
      CHECK_CONTAINS(e.msg, "nested deeper than");
    }
    free_all(m);
    free(text);
  }
}

static void test_bad_arguments(void) {
  err e = {0};
  ProtobufCMessage *m = (ProtobufCMessage *)1;
  CHECK_EQ_INT(pbtxt_parse(NULL, "", 0, NULL, &m, &e), ERR_INVALID_ARGUMENT);
  CHECK(m == NULL);
  CHECK_EQ_INT(pbtxt_parse(&pbtxt_test__all__descriptor, NULL, 3, NULL, &m, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(pbtxt_parse(&pbtxt_test__all__descriptor, NULL, 0, NULL, &m, &e), 0);
  CHECK(m != NULL);
  if (m) protobuf_c_message_free_unpacked(m, NULL);
  // The default file name appears when none is given.
  CHECK_EQ_INT(pbtxt_parse(&pbtxt_test__all__descriptor, "x: 1", 4, NULL, &m, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "<text>:1: unknown field 'x'");
  CHECK_EQ_INT(pbtxt_parse_file(&pbtxt_test__all__descriptor, "/nonexistent/config.pbtxt", &m, &e), ERR_NOT_FOUND);
  CHECK_CONTAINS(e.msg, "/nonexistent/config.pbtxt");
}

// --- real Triton configs

static const char *k_triton_full =
    "name: \"densenet_onnx\"\n"
    "platform: \"onnxruntime_onnx\"\n"
    "max_batch_size : 8\n"
    "version_policy: { specific: { versions: [1,3] } }\n"
    "input [\n"
    "  {\n"
    "    name: \"data_0\"\n"
    "    data_type: TYPE_FP32\n"
    "    format: FORMAT_NCHW\n"
    "    dims: [ 3, 224, 224 ]\n"
    "    reshape { shape: [ 1, 3, 224, 224 ] }\n"
    "  }\n"
    "]\n"
    "output [\n"
    "  {\n"
    "    name: \"fc6_1\"\n"
    "    data_type: TYPE_FP32\n"
    "    dims: [ 1000 ]\n"
    "    reshape { shape: [ 1, 1000, 1, 1 ] }\n"
    "    label_filename: \"densenet_labels.txt\"\n"
    "  }\n"
    "]\n"
    "instance_group [{ count: 2 kind: KIND_CPU }, { count: 1 kind: KIND_GPU gpus: [ 0, 1 ] }]\n"
    "dynamic_batching {\n"
    "  preferred_batch_size: [ 4, 8 ]\n"
    "  max_queue_delay_microseconds: 100\n"
    "  preserve_ordering: true\n"
    "  priority_levels: 2\n"
    "  default_priority_level: 1\n"
    "  default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 5000 max_queue_size: 16 }\n"
    "  priority_queue_policy { key: 1 value: { timeout_action: REJECT max_queue_size: 4 } }\n"
    "  priority_queue_policy { key: 2 value: { allow_timeout_override: true } }\n"
    "}\n"
    "parameters { key: \"intra_op_thread_count\" value: { string_value: \"2\" } }\n"
    "parameters: { key: \"enable_mem_arena\" value { string_value: \"1\" } }\n"
    "optimization { graph { level: 1 } priority: PRIORITY_MAX\n"
    "  execution_accelerators { cpu_execution_accelerator : [ { name : \"openvino\" } ] } }\n"
    "model_warmup [{ name: \"w\" batch_size: 1 inputs { key: \"data_0\" value: { data_type: TYPE_FP32 dims: [3, 224, 224] zero_data: true } } }]\n"
    "default_model_filename: \"model.onnx\"\n"
    "response_cache { enable: true }\n";

static void test_model_config(void) {
  err e = {0};
  ProtobufCMessage *pm = NULL;
  int rc = parse_desc(&inference__model_config__descriptor, k_triton_full, strlen(k_triton_full), &pm, &e);
  CHECK_EQ_INT(rc, 0);
  if (rc) {
    fprintf(stderr, "  %s\n", e.msg);
    return;
  }
  Inference__ModelConfig *c = (Inference__ModelConfig *)pm;
  CHECK_EQ_STR(c->name, "densenet_onnx");
  CHECK_EQ_STR(c->platform, "onnxruntime_onnx");
  CHECK_EQ_STR(c->backend, "");
  CHECK_EQ_INT(c->max_batch_size, 8);
  CHECK(c->version_policy && c->version_policy->policy_choice_case == INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_SPECIFIC);
  if (c->version_policy && c->version_policy->specific) {
    CHECK_EQ_INT(c->version_policy->specific->n_versions, 2);
    if (c->version_policy->specific->n_versions == 2) CHECK_EQ_INT(c->version_policy->specific->versions[1], 3);
  }
  CHECK_EQ_INT(c->n_input, 1);
  if (c->n_input == 1) {
    Inference__ModelInput *in = c->input[0];
    CHECK_EQ_STR(in->name, "data_0");
    CHECK_EQ_INT(in->data_type, INFERENCE__DATA_TYPE__TYPE_FP32);
    CHECK_EQ_INT(in->format, INFERENCE__MODEL_INPUT__FORMAT__FORMAT_NCHW);
    CHECK_EQ_INT(in->n_dims, 3);
    CHECK(in->reshape && in->reshape->n_shape == 4);
  }
  CHECK_EQ_INT(c->n_output, 1);
  if (c->n_output == 1) CHECK_EQ_STR(c->output[0]->label_filename, "densenet_labels.txt");
  CHECK_EQ_INT(c->n_instance_group, 2);
  if (c->n_instance_group == 2) {
    CHECK_EQ_INT(c->instance_group[0]->count, 2);
    CHECK_EQ_INT(c->instance_group[0]->kind, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_CPU);
    CHECK_EQ_INT(c->instance_group[1]->kind, INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_GPU);
    CHECK_EQ_INT(c->instance_group[1]->n_gpus, 2);
  }
  CHECK_EQ_INT(c->scheduling_choice_case, INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_DYNAMIC_BATCHING);
  Inference__ModelDynamicBatching *db = c->dynamic_batching;
  CHECK(db != NULL);
  if (db) {
    CHECK_EQ_INT(db->n_preferred_batch_size, 2);
    if (db->n_preferred_batch_size == 2) {
      CHECK_EQ_INT(db->preferred_batch_size[0], 4);
      CHECK_EQ_INT(db->preferred_batch_size[1], 8);
    }
    CHECK_EQ_INT(db->max_queue_delay_microseconds, 100);
    CHECK_EQ_INT(db->preserve_ordering, 1);
    CHECK_EQ_INT(db->priority_levels, 2);
    CHECK(db->default_queue_policy && db->default_queue_policy->timeout_action ==
                                          INFERENCE__MODEL_QUEUE_POLICY__TIMEOUT_ACTION__DELAY);
    CHECK(db->default_queue_policy && db->default_queue_policy->max_queue_size == 16);
    CHECK_EQ_INT(db->n_priority_queue_policy, 2);
    if (db->n_priority_queue_policy == 2) {
      CHECK_EQ_INT(db->priority_queue_policy[0]->key, 1);
      CHECK(db->priority_queue_policy[0]->value && db->priority_queue_policy[0]->value->max_queue_size == 4);
      CHECK(db->priority_queue_policy[1]->value && db->priority_queue_policy[1]->value->allow_timeout_override);
    }
  }
  CHECK_EQ_INT(c->n_parameters, 2);
  if (c->n_parameters == 2) {
    CHECK_EQ_STR(c->parameters[0]->key, "intra_op_thread_count");
    CHECK(c->parameters[0]->value && strcmp(c->parameters[0]->value->string_value, "2") == 0);
  }
  CHECK(c->optimization && c->optimization->graph && c->optimization->graph->level == 1);
  CHECK_EQ_INT(c->n_model_warmup, 1);
  if (c->n_model_warmup == 1 && c->model_warmup[0]->n_inputs == 1) {
    Inference__ModelWarmup__Input *wi = c->model_warmup[0]->inputs[0]->value;
    CHECK(wi && wi->input_data_type_case == INFERENCE__MODEL_WARMUP__INPUT__INPUT_DATA_TYPE_ZERO_DATA && wi->zero_data);
  }
  CHECK(c->response_cache && c->response_cache->enable);
  protobuf_c_message_free_unpacked(pm, NULL);

  // The two messages the brief spells out.
  const char *typo = "name: \"m\"\nplatform: \"onnxruntime_onnx\"\n\n\n\n\nmax_batch_sise: 4\n";
  rc = pbtxt_parse(&inference__model_config__descriptor, typo, strlen(typo), "config.pbtxt", &pm, &e);
  CHECK_EQ_INT(rc, ERR_INVALID_ARGUMENT);
  CHECK_EQ_STR(e.msg, "config.pbtxt:7: unknown field 'max_batch_sise' in inference.ModelConfig");
  const char *bad = "name: \"m\"\n\nmax_batch_size: abc\n";
  rc = pbtxt_parse(&inference__model_config__descriptor, bad, strlen(bad), "config.pbtxt", &pm, &e);
  CHECK_EQ_INT(rc, ERR_INVALID_ARGUMENT);
  CHECK_EQ_STR(e.msg, "config.pbtxt:3: invalid value 'abc' for int32 field 'max_batch_size'");
  const char *two = "dynamic_batching { }\nsequence_batching { }\n";
  rc = pbtxt_parse(&inference__model_config__descriptor, two, strlen(two), "config.pbtxt", &pm, &e);
  CHECK_EQ_INT(rc, ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "config.pbtxt:2: field 'sequence_batching' conflicts with 'dynamic_batching'");
  const char *kind = "instance_group [ { kind: KIND_TPU } ]";
  rc = pbtxt_parse(&inference__model_config__descriptor, kind, strlen(kind), "config.pbtxt", &pm, &e);
  CHECK_EQ_INT(rc, ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "unknown value 'KIND_TPU' for enum field 'kind' (inference.ModelInstanceGroup.Kind)");

  // Maps inside messages (a oneof member, a repeated element), their keys
  // repeated across bodies merged into one message: deduped after the parse.
  const char *nested =
      "dynamic_batching { priority_levels: 2 priority_queue_policy { key: 1 value { max_queue_size: 4 } } }\n"
      "dynamic_batching { priority_queue_policy [ { key: 2 }, { key: 1 value { max_queue_size: 5 } } ] }\n"
      "dynamic_batching { }\n"
      "model_warmup [ { name: 'w' inputs { key: 'x' value { dims: 1 } } inputs { key: 'y' } inputs { key: 'x' value "
      "{ dims: 2 } } } ]\n";
  rc = pbtxt_parse(&inference__model_config__descriptor, nested, strlen(nested), "config.pbtxt", &pm, &e);
  CHECK_EQ_INT(rc, 0);
  c = (Inference__ModelConfig *)pm;
  if (c) {
    const Inference__ModelDynamicBatching *db = c->dynamic_batching;
    CHECK(db && db->priority_levels == 2 && db->n_priority_queue_policy == 2);
    if (db && db->n_priority_queue_policy == 2) {
      CHECK(db->priority_queue_policy[0]->key == 2);
      CHECK(db->priority_queue_policy[1]->key == 1 && db->priority_queue_policy[1]->value->max_queue_size == 5);
    }
    CHECK(c->n_model_warmup == 1 && c->model_warmup[0]->n_inputs == 2);
    if (c->n_model_warmup == 1 && c->model_warmup[0]->n_inputs == 2) {
      CHECK_EQ_STR(c->model_warmup[0]->inputs[0]->key, "y");
      CHECK_EQ_STR(c->model_warmup[0]->inputs[1]->key, "x");
      CHECK(c->model_warmup[0]->inputs[1]->value->dims[0] == 2);
    }
    protobuf_c_message_free_unpacked(pm, NULL);
  }
}

// --- robustness: every prefix, and single-byte mutations, must parse or fail cleanly

static void test_truncations(void) {
  size_t len = strlen(k_triton_full);
  int ok = 0, failed = 0, bad = 0;
  for (size_t n = 0; n <= len; n++) {
    err e = {0};
    ProtobufCMessage *m = NULL;
    int rc = parse_desc(&inference__model_config__descriptor, k_triton_full, n, &m, &e);
    if (rc == 0 && m) {
      ok++;
      protobuf_c_message_free_unpacked(m, NULL);
    } else if (rc == ERR_INVALID_ARGUMENT && !m && strncmp(e.msg, "t.pbtxt:", 8) == 0) {
      failed++;
    } else {
      bad++;
    }
  }
  CHECK_EQ_INT(bad, 0);
  CHECK_EQ_INT(ok + failed, (int)len + 1);
  CHECK(ok > 10);      // the prefixes ending between fields
  CHECK(failed > 100);  // and most others

  const char repl[] = {'{', '}', '[', ']', '"', '\\', '-', ':', '#', '\0', '\n', '<', 'x'};
  char *copy = malloc(len);
  CHECK(copy != NULL);
  if (!copy) return;
  bad = 0;
  for (size_t i = 0; i < len; i++) {
    for (size_t r = 0; r < sizeof repl; r++) {
      memcpy(copy, k_triton_full, len);
      copy[i] = repl[r];
      err e = {0};
      ProtobufCMessage *m = NULL;
      int rc = parse_desc(&inference__model_config__descriptor, copy, len, &m, &e);
      if (rc == 0 && m)
        protobuf_c_message_free_unpacked(m, NULL);
      else if (!(rc == ERR_INVALID_ARGUMENT && !m))
        bad++;
    }
  }
  CHECK_EQ_INT(bad, 0);
  free(copy);
}

int main(void) {
  test_scalars();
  test_strings();
  test_enums();
  test_messages_and_repeated();
  test_maps();
  test_many_entries();
  test_entry_limit();
  test_oneofs();
  test_errors();
  test_nesting_limit();
  test_bad_arguments();
  test_model_config();
  test_truncations();
  CHECK_DONE();
}
