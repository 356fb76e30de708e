// engine/llm/jinja_value.c: the interpreter's values with Python's meaning,
// because templates print them as Python would: str() and repr() (True,
// None, ['a', 1], {'k': 'v'}, float repr's shortest round trip), ==, the
// ordering sort uses, truthiness, and json.dumps as transformers' tojson
// calls it (ensure_ascii=False, its default separators, indent).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/llm/jinja_internal.h"

jstr *jv_mkstr(jarena *a, const char *s, size_t n) {
  jstr *j = jarena_alloc(a, sizeof *j + n + 1);
  if (!j) return NULL;
  j->n = n;
  if (n) memcpy(j->s, s, n);
  j->s[n] = '\0';
  return j;
}

jv jv_str(const jstr *s) {
  jv v = {JV_STR, {0}};
  v.u.s = s;
  return v;
}

jlist *jv_mklist(jarena *a, size_t cap) {
  jlist *l = jarena_alloc(a, sizeof *l);
  if (!l) return NULL;
  if (cap) {
    l->items = jarena_alloc(a, cap * sizeof *l->items);
    if (!l->items) return NULL;
    l->cap = cap;
  }
  return l;
}

int jlist_push(jarena *a, jlist *l, jv v) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 4;
    jv *p = jarena_alloc(a, cap * sizeof *p);
    if (!p) return -1;
    if (l->n) memcpy(p, l->items, l->n * sizeof *p);
    l->items = p, l->cap = cap;
  }
  l->items[l->n++] = v;
  return 0;
}

jdict *jv_mkdict(jarena *a) { return jarena_alloc(a, sizeof(jdict)); }

static int key_eq(jv a, jv b) { return jv_equal(a, b) && (a.kind == JV_STR) == (b.kind == JV_STR); }

int jdict_set(jarena *a, jdict *d, jv key, jv val) {
  for (size_t i = 0; i < d->n; i++)
    if (key_eq(d->keys[i], key)) {
      d->vals[i] = val;
      return 0;
    }
  if (d->n == d->cap) {
    size_t cap = d->cap ? d->cap * 2 : 8;
    jv *k = jarena_alloc(a, cap * sizeof *k), *v = jarena_alloc(a, cap * sizeof *v);
    if (!k || !v) return -1;
    if (d->n) memcpy(k, d->keys, d->n * sizeof *k), memcpy(v, d->vals, d->n * sizeof *v);
    d->keys = k, d->vals = v, d->cap = cap;
  }
  d->keys[d->n] = key, d->vals[d->n] = val;
  d->n++;
  return 0;
}

int jdict_get(const jdict *d, jv key, jv *out) {
  for (size_t i = 0; i < d->n; i++)
    if (key_eq(d->keys[i], key)) {
      *out = d->vals[i];
      return 1;
    }
  return 0;
}

int jdict_get_str(const jdict *d, const char *k, jv *out) {
  size_t n = strlen(k);
  for (size_t i = 0; i < d->n; i++)
    if (d->keys[i].kind == JV_STR && d->keys[i].u.s->n == n && !memcmp(d->keys[i].u.s->s, k, n)) {
      *out = d->vals[i];
      return 1;
    }
  return 0;
}

int jv_truthy(jv v) {
  switch (v.kind) {
    case JV_UNDEF: case JV_NONE: return 0;
    case JV_BOOL: return v.u.b;
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0;
    case JV_STR: return v.u.s->n > 0;
    case JV_LIST: return v.u.l->gen || v.u.l->n > 0;
    case JV_DICT: return v.u.d->n > 0;
    default: return 1;
  }
}

static int is_num(jv v) { return v.kind == JV_INT || v.kind == JV_FLOAT || v.kind == JV_BOOL; }
static double num(jv v) { return v.kind == JV_FLOAT ? v.u.f : v.kind == JV_INT ? (double)v.u.i : v.u.b; }
static int64_t inum(jv v) { return v.kind == JV_INT ? v.u.i : v.u.b; }

static int equal_at(jv a, jv b, int depth);
int jv_equal(jv a, jv b) { return equal_at(a, b, 0); }

// Deeper than this (lists a template nested in a loop) compares unequal rather than exhaust the stack.
#define MAX_NEST 1000

static int equal_at(jv a, jv b, int depth) {
  if (depth > MAX_NEST) return 0;
  if (is_num(a) && is_num(b)) {
    if (a.kind != JV_FLOAT && b.kind != JV_FLOAT) return inum(a) == inum(b);
    return num(a) == num(b);
  }
  if (a.kind != b.kind) return 0;
  switch (a.kind) {
    case JV_UNDEF: case JV_NONE: return 1;
    case JV_STR: return a.u.s->n == b.u.s->n && !memcmp(a.u.s->s, b.u.s->s, a.u.s->n);
    case JV_LIST:
      if (a.u.l->gen || b.u.l->gen) return a.u.l == b.u.l;
      if (a.u.l->n != b.u.l->n || a.u.l->tuple != b.u.l->tuple) return 0;
      for (size_t i = 0; i < a.u.l->n; i++)
        if (!equal_at(a.u.l->items[i], b.u.l->items[i], depth + 1)) return 0;
      return 1;
    case JV_DICT:
      if (a.u.d->n != b.u.d->n) return 0;
      for (size_t i = 0; i < a.u.d->n; i++) {
        jv other;
        if (!jdict_get(b.u.d, a.u.d->keys[i], &other) || !equal_at(a.u.d->vals[i], other, depth + 1)) return 0;
      }
      return 1;
    case JV_NS: return a.u.d == b.u.d;
    case JV_FUNC: return a.u.fn == b.u.fn;
    default: return 0;
  }
}

static int compare_at(jv a, jv b, int depth);
int jv_compare(jv a, jv b) { return compare_at(a, b, 0); }

static int compare_at(jv a, jv b, int depth) {
  if (depth > MAX_NEST) return 2;
  if (is_num(a) && is_num(b)) {
    if (a.kind != JV_FLOAT && b.kind != JV_FLOAT) return inum(a) < inum(b) ? -1 : inum(a) > inum(b);
    double x = num(a), y = num(b);
    if (x != x || y != y) return 2;
    return x < y ? -1 : x > y;
  }
  if (a.kind == JV_STR && b.kind == JV_STR) {
    size_t n = a.u.s->n < b.u.s->n ? a.u.s->n : b.u.s->n;
    int c = memcmp(a.u.s->s, b.u.s->s, n);
    if (c) return c < 0 ? -1 : 1;
    return a.u.s->n < b.u.s->n ? -1 : a.u.s->n > b.u.s->n;
  }
  if (a.kind == JV_LIST && b.kind == JV_LIST && a.u.l->tuple == b.u.l->tuple) {
    size_t n = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
    for (size_t i = 0; i < n; i++) {
      if (equal_at(a.u.l->items[i], b.u.l->items[i], depth + 1)) continue;
      return compare_at(a.u.l->items[i], b.u.l->items[i], depth + 1);
    }
    return a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n;
  }
  return 2;
}

const char *jv_type_name(jv v) {
  switch (v.kind) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return "str";
    case JV_LIST: return v.u.l->gen ? "generator" : v.u.l->tuple ? "tuple" : "list";
    case JV_DICT: return "dict";
    case JV_NS: return "Namespace";
    default: return "function";
  }
}

// float.__repr__: the shortest digits that read back to the same double,
// fixed notation for exponents -4..15, else d.ddde+XX.
void jv_float_repr(jbuf *b, double f) {
  if (f != f) { jbuf_puts(b, "nan"); return; }
  if (isinf(f)) { jbuf_puts(b, f < 0 ? "-inf" : "inf"); return; }
  char tmp[40];
  int prec;
  for (prec = 1; prec <= 17; prec++) {
    snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
    if (strtod(tmp, NULL) == f) break;
  }
  // tmp: [-]d[.ddd]e[+-]XX
  char digits[24];
  int nd = 0, neg = tmp[0] == '-';
  const char *p = tmp + neg;
  for (; *p && *p != 'e'; p++)
    if (*p != '.') digits[nd++] = *p;
  int exp = atoi(p + 1);
  while (nd > 1 && digits[nd - 1] == '0') nd--;
  if (neg) jbuf_putc(b, '-');
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      jbuf_puts(b, "0.");
      for (int k = 0; k < -exp - 1; k++) jbuf_putc(b, '0');
      jbuf_put(b, digits, (size_t)nd);
    } else {
      for (int k = 0; k <= exp; k++) jbuf_putc(b, k < nd ? digits[k] : '0');
      jbuf_putc(b, '.');
      if (nd > exp + 1) jbuf_put(b, digits + exp + 1, (size_t)(nd - exp - 1));
      else jbuf_putc(b, '0');
    }
  } else {
    jbuf_putc(b, digits[0]);
    if (nd > 1) jbuf_putc(b, '.'), jbuf_put(b, digits + 1, (size_t)(nd - 1));
    snprintf(tmp, sizeof tmp, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    jbuf_puts(b, tmp);
  }
}

void jv_html_escape(jbuf *b, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) switch (s[i]) {
      case '&': jbuf_puts(b, "&amp;"); break;
      case '<': jbuf_puts(b, "&lt;"); break;
      case '>': jbuf_puts(b, "&gt;"); break;
      case '"': jbuf_puts(b, "&#34;"); break;
      case '\'': jbuf_puts(b, "&#39;"); break;
      default: jbuf_putc(b, s[i]);
    }
}

static void put_int(jbuf *b, int64_t i) {
  char t[32];
  snprintf(t, sizeof t, "%lld", (long long)i);
  jbuf_puts(b, t);
}

// One UTF-8 code point at s (n bytes left): its value and length; invalid bytes count as one.
static uint32_t utf8_at(const unsigned char *s, size_t n, size_t *len) {
  if (s[0] < 0x80 || n < 2) { *len = 1; return s[0]; }
  if ((s[0] & 0xE0) == 0xC0) { *len = 2; return (uint32_t)(s[0] & 0x1F) << 6 | (s[1] & 0x3F); }
  if ((s[0] & 0xF0) == 0xE0 && n >= 3) {
    *len = 3;
    return (uint32_t)(s[0] & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
  }
  if ((s[0] & 0xF8) == 0xF0 && n >= 4) {
    *len = 4;
    return (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3F) << 12 | (uint32_t)(s[2] & 0x3F) << 6 | (s[3] & 0x3F);
  }
  *len = 1;
  return s[0];
}

// Code points Python's str.isprintable() rejects beyond ASCII controls (the common ones).
static int py_unprintable(uint32_t c) {
  return (c >= 0x80 && c <= 0xA0) || c == 0xAD || (c >= 0x200B && c <= 0x200F) || (c >= 0x2028 && c <= 0x202E) ||
         (c >= 0x2060 && c <= 0x206F) || c == 0xFEFF || (c >= 0xE000 && c <= 0xF8FF) || (c >= 0xD800 && c <= 0xDFFF);
}

static void str_repr(jbuf *b, const jstr *s) {
  int has_sq = memchr(s->s, '\'', s->n) != NULL, has_dq = memchr(s->s, '"', s->n) != NULL;
  char q = has_sq && !has_dq ? '"' : '\'';
  jbuf_putc(b, q);
  for (size_t i = 0; i < s->n;) {
    unsigned char c = (unsigned char)s->s[i];
    char t[16];
    if (c == q || c == '\\') jbuf_putc(b, '\\'), jbuf_putc(b, (char)c), i++;
    else if (c == '\n') jbuf_puts(b, "\\n"), i++;
    else if (c == '\r') jbuf_puts(b, "\\r"), i++;
    else if (c == '\t') jbuf_puts(b, "\\t"), i++;
    else if (c < 0x20 || c == 0x7F) snprintf(t, sizeof t, "\\x%02x", c), jbuf_puts(b, t), i++;
    else if (c < 0x80) jbuf_putc(b, (char)c), i++;
    else {
      size_t len;
      uint32_t cp = utf8_at((const unsigned char *)s->s + i, s->n - i, &len);
      if (py_unprintable(cp)) {
        if (cp < 0x100) snprintf(t, sizeof t, "\\x%02x", cp);
        else snprintf(t, sizeof t, "\\u%04x", cp);
        jbuf_puts(b, t);
      } else {
        jbuf_put(b, s->s + i, len);
      }
      i += len;
    }
  }
  jbuf_putc(b, q);
}

static void repr_at(jbuf *b, jv v, int depth);
void jv_repr(jbuf *b, jv v) { repr_at(b, v, 0); }

static void repr_at(jbuf *b, jv v, int depth) {
  if (depth > MAX_NEST && (v.kind == JV_LIST || v.kind == JV_DICT || v.kind == JV_NS)) {
    jbuf_puts(b, "...");  // Python would stop with RecursionError near here
    return;
  }
  switch (v.kind) {
    case JV_STR: str_repr(b, v.u.s); return;
    case JV_LIST: {
      if (v.u.l->gen) {
        jbuf_puts(b, "<generator object>");  // Python adds an address
        return;
      }
      jbuf_putc(b, v.u.l->tuple ? '(' : '[');
      for (size_t i = 0; i < v.u.l->n; i++) {
        if (i) jbuf_puts(b, ", ");
        repr_at(b, v.u.l->items[i], depth + 1);
      }
      if (v.u.l->tuple && v.u.l->n == 1) jbuf_putc(b, ',');
      jbuf_putc(b, v.u.l->tuple ? ')' : ']');
      return;
    }
    case JV_DICT: case JV_NS: {
      jbuf_puts(b, v.kind == JV_NS ? "<Namespace {" : "{");
      for (size_t i = 0; i < v.u.d->n; i++) {
        if (i) jbuf_puts(b, ", ");
        repr_at(b, v.u.d->keys[i], depth + 1);
        jbuf_puts(b, ": ");
        repr_at(b, v.u.d->vals[i], depth + 1);
      }
      jbuf_puts(b, v.kind == JV_NS ? "}>" : "}");
      return;
    }
    default: jv_to_str(b, v);
  }
}

void jv_to_str(jbuf *b, jv v) {
  switch (v.kind) {
    case JV_UNDEF: return;
    case JV_NONE: jbuf_puts(b, "None"); return;
    case JV_BOOL: jbuf_puts(b, v.u.b ? "True" : "False"); return;
    case JV_INT: put_int(b, v.u.i); return;
    case JV_FLOAT: jv_float_repr(b, v.u.f); return;
    case JV_STR: jbuf_put(b, v.u.s->s, v.u.s->n); return;
    case JV_FUNC:
      jbuf_puts(b, "<function ");
      jbuf_puts(b, v.u.fn->name ? v.u.fn->name : "?");
      jbuf_putc(b, '>');
      return;
    default: jv_repr(b, v);
  }
}

// --- json.dumps

static void json_str(jbuf *b, const char *s, size_t n, int ascii) {
  jbuf_putc(b, '"');
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    char t[16];
    if (ascii && c >= 0x80) {  // \uXXXX, a surrogate pair past U+FFFF
      size_t len;
      uint32_t cp = utf8_at((const unsigned char *)s + i, n - i, &len);
      if (cp >= 0x10000) {
        cp -= 0x10000;
        snprintf(t, sizeof t, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
      } else {
        snprintf(t, sizeof t, "\\u%04x", cp);
      }
      jbuf_puts(b, t);
      i += len - 1;
      continue;
    }
    switch (c) {
      case '"': jbuf_puts(b, "\\\""); break;
      case '\\': jbuf_puts(b, "\\\\"); break;
      case '\n': jbuf_puts(b, "\\n"); break;
      case '\r': jbuf_puts(b, "\\r"); break;
      case '\t': jbuf_puts(b, "\\t"); break;
      case '\b': jbuf_puts(b, "\\b"); break;
      case '\f': jbuf_puts(b, "\\f"); break;
      default:
        if (c < 0x20 || (c == 0x7F && ascii)) snprintf(t, sizeof t, "\\u%04x", c), jbuf_puts(b, t);
        else jbuf_putc(b, (char)c);
    }
  }
  jbuf_putc(b, '"');
}

static void json_float(jbuf *b, double f) {
  if (f != f) jbuf_puts(b, "NaN");
  else if (isinf(f)) jbuf_puts(b, f < 0 ? "-Infinity" : "Infinity");
  else jv_float_repr(b, f);
}

typedef struct jsonctx { int indent; const char *isep, *ksep; int sort, ascii; const char **why; } jsonctx;

static void newline(jbuf *b, const jsonctx *c, int level) {
  jbuf_putc(b, '\n');
  for (int k = 0; k < level * c->indent; k++) jbuf_putc(b, ' ');
}

static int json_key(jbuf *b, jv k, const jsonctx *c) {
  switch (k.kind) {
    case JV_STR: json_str(b, k.u.s->s, k.u.s->n, c->ascii); return 0;
    case JV_INT: jbuf_putc(b, '"'), put_int(b, k.u.i), jbuf_putc(b, '"'); return 0;
    case JV_FLOAT: jbuf_putc(b, '"'), json_float(b, k.u.f), jbuf_putc(b, '"'); return 0;
    case JV_BOOL: jbuf_puts(b, k.u.b ? "\"true\"" : "\"false\""); return 0;
    case JV_NONE: jbuf_puts(b, "\"null\""); return 0;
    default: *c->why = "keys must be str, int, float, bool or None"; return -1;
  }
}

static int json_val(jbuf *b, jv v, const jsonctx *c, int level) {
  if (level > 200) { *c->why = "nesting too deep"; return -1; }
  switch (v.kind) {
    case JV_NONE: jbuf_puts(b, "null"); return 0;
    case JV_BOOL: jbuf_puts(b, v.u.b ? "true" : "false"); return 0;
    case JV_INT: put_int(b, v.u.i); return 0;
    case JV_FLOAT: json_float(b, v.u.f); return 0;
    case JV_STR: json_str(b, v.u.s->s, v.u.s->n, c->ascii); return 0;
    case JV_LIST: {
      if (v.u.l->gen) { *c->why = "Object of type generator is not JSON serializable"; return -1; }
      if (!v.u.l->n) { jbuf_puts(b, "[]"); return 0; }
      jbuf_putc(b, '[');
      for (size_t i = 0; i < v.u.l->n; i++) {
        if (i) jbuf_puts(b, c->isep);
        if (c->indent >= 0) newline(b, c, level + 1);
        if (json_val(b, v.u.l->items[i], c, level + 1)) return -1;
      }
      if (c->indent >= 0) newline(b, c, level);
      jbuf_putc(b, ']');
      return 0;
    }
    case JV_DICT: {
      const jdict *d = v.u.d;
      if (!d->n) { jbuf_puts(b, "{}"); return 0; }
      size_t order[d->n > 0 ? d->n : 1];
      for (size_t i = 0; i < d->n; i++) order[i] = i;
      if (c->sort)
        for (size_t i = 1; i < d->n; i++)  // insertion sort: dicts in templates are small
          for (size_t j = i; j > 0; j--) {
            int r = jv_compare(d->keys[order[j - 1]], d->keys[order[j]]);
            if (r == 2) { *c->why = "keys of different types cannot be sorted"; return -1; }
            if (r <= 0) break;
            size_t t = order[j]; order[j] = order[j - 1]; order[j - 1] = t;
          }
      jbuf_putc(b, '{');
      for (size_t i = 0; i < d->n; i++) {
        if (i) jbuf_puts(b, c->isep);
        if (c->indent >= 0) newline(b, c, level + 1);
        if (json_key(b, d->keys[order[i]], c)) return -1;
        jbuf_puts(b, c->ksep);
        if (json_val(b, d->vals[order[i]], c, level + 1)) return -1;
      }
      if (c->indent >= 0) newline(b, c, level);
      jbuf_putc(b, '}');
      return 0;
    }
    case JV_UNDEF: *c->why = "Object of type Undefined is not JSON serializable"; return -1;
    case JV_NS: *c->why = "Object of type Namespace is not JSON serializable"; return -1;
    default: *c->why = "Object of type function is not JSON serializable"; return -1;
  }
}

int jv_tojson(jbuf *b, jv v, int indent, const char *item_sep, const char *key_sep, int sort_keys, int ensure_ascii,
              const char **why) {
  jsonctx c = {indent, item_sep ? item_sep : indent >= 0 ? "," : ", ", key_sep ? key_sep : ": ", sort_keys, ensure_ascii,
               why};
  return json_val(b, v, &c, 0);
}
