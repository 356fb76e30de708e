// engine/llm/jinja_methods.c: Python's str, dict and list methods as chat
// templates call them (content.strip(), x.split('</think>')[-1],
// d.items(), d.get(k, default), ...), with Python's results. Methods that
// mutate a dict or list fail as transformers' ImmutableSandboxedEnvironment
// makes them fail. Also the UTF-8 string helpers the filters share.
#include <stdlib.h>
#include <string.h>

#include "engine/llm/jinja_internal.h"

long eng_jinja__str_find(const char *hay, size_t hn, const char *needle, size_t nn, size_t from) {
  if (nn == 0) return from <= hn ? (long)from : -1;
  for (size_t i = from; i + nn <= hn; i++)
    if (hay[i] == needle[0] && !memcmp(hay + i, needle, nn)) return (long)i;
  return -1;
}

size_t eng_jinja__space_at(const char *s, size_t n) {
  unsigned char c = (unsigned char)s[0];
  if (c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f)) return 1;
  if (c < 0x80 || n < 2) return 0;
  unsigned char d = (unsigned char)s[1];
  if (c == 0xC2 && (d == 0x85 || d == 0xA0)) return 2;
  if (n < 3) return 0;
  unsigned char e = (unsigned char)s[2];
  if (c == 0xE1 && d == 0x9A && e == 0x80) return 3;                              // U+1680
  if (c == 0xE2 && d == 0x80 && (e <= 0x8A || e == 0xA8 || e == 0xA9 || e == 0xAF)) return 3;  // U+2000..200A, 2028, 2029, 202F
  if (c == 0xE2 && d == 0x81 && e == 0x9F) return 3;                              // U+205F
  if (c == 0xE3 && d == 0x80 && e == 0x80) return 3;                              // U+3000
  return 0;
}

static size_t cp_len(const char *s, size_t n) {
  unsigned char c = (unsigned char)s[0];
  size_t l = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
  return l > n ? n : l;
}

// The start of the code point that ends at e (exclusive).
static size_t cp_back(const char *s, size_t b, size_t e) {
  size_t p = e - 1;
  while (p > b && ((unsigned char)s[p] & 0xC0) == 0x80) p--;
  return p;
}

static int in_chars(const jstr *chars, const char *s, size_t len) {
  for (size_t i = 0; i < chars->n;) {
    size_t l = cp_len(chars->s + i, chars->n - i);
    if (l == len && !memcmp(chars->s + i, s, len)) return 1;
    i += l;
  }
  return 0;
}

void eng_jinja__strip(const char *s, size_t n, const jstr *chars, int left, int right, size_t *b, size_t *e) {
  size_t lo = 0, hi = n;
  while (left && lo < hi) {
    size_t l = chars ? cp_len(s + lo, hi - lo) : eng_jinja__space_at(s + lo, hi - lo);
    if (!l || (chars && !in_chars(chars, s + lo, l))) break;
    lo += l;
  }
  while (right && hi > lo) {
    size_t p = cp_back(s, lo, hi);
    size_t l = hi - p;
    int strip = chars ? in_chars(chars, s + p, l) : eng_jinja__space_at(s + p, l) == l;
    if (!strip) break;
    hi = p;
  }
  *b = lo, *e = hi;
}

static char up(char c) { return c >= 'a' && c <= 'z' ? (char)(c - 32) : c; }
static char down(char c) { return c >= 'A' && c <= 'Z' ? (char)(c + 32) : c; }
static int alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

jv eng_jinja__case(jrender *r, const jstr *s, int how) {
  jstr *o = jv_mkstr(r->a, s->s, s->n);
  if (!o) return eng_jinja__oom(r);
  int start = 1;  // at a word's beginning
  for (size_t i = 0; i < o->n; i++) {
    char c = o->s[i];
    switch (how) {
      case JCASE_UPPER: o->s[i] = up(c); break;
      case JCASE_LOWER: o->s[i] = down(c); break;
      case JCASE_CAPITALIZE: o->s[i] = i == 0 ? up(c) : down(c); break;
      case JCASE_TITLE_METHOD:  // Python: a letter after a non-letter starts a word
        o->s[i] = start ? up(c) : down(c);
        start = !alpha(c) && !((unsigned char)c & 0x80);
        break;
      default: {  // Jinja's title filter: words begin after spaces, '-', '(', '{', '[', '<'
        o->s[i] = start ? up(c) : down(c);
        start = c == ' ' || (c >= '\t' && c <= '\r') || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
      }
    }
  }
  jv v = jv_str(o);
  return v;
}

static jv mklist(jrender *r, jlist *l) {
  if (!l) return eng_jinja__oom(r);
  jv v = {JV_LIST, {0}};
  v.u.l = l;
  return v;
}

static int push_str(jrender *r, jlist *l, const char *s, size_t n) {
  jv v = eng_jinja__strv(r, s, n);
  if (r->failed || jlist_push(r->a, l, v)) return eng_jinja__oom(r), -1;
  return 0;
}

// str.split / str.rsplit.
static jv split(jrender *r, const jstr *s, jv sep, int64_t maxsplit, int from_right, size_t off) {
  jlist *l = jv_mklist(r->a, 0);
  if (!l) return eng_jinja__oom(r);
  if (sep.kind == JV_STR && sep.u.s->n == 0) return eng_jinja__fail(r, off, "empty separator");
  if (sep.kind == JV_STR) {
    const char *p = s->s, *needle = sep.u.s->s;
    size_t n = s->n, nn = sep.u.s->n;
    if (!from_right) {
      size_t at = 0;
      int64_t k = 0;
      long f;
      while ((maxsplit < 0 || k < maxsplit) && (f = eng_jinja__str_find(p, n, needle, nn, at)) >= 0) {
        if (push_str(r, l, p + at, (size_t)f - at)) return jv_undef(NULL);
        at = (size_t)f + nn, k++;
      }
      if (push_str(r, l, p + at, n - at)) return jv_undef(NULL);
      return mklist(r, l);
    }
    // From the right: collect pieces backwards, then reverse.
    size_t end = n;
    int64_t k = 0;
    while (maxsplit < 0 || k < maxsplit) {
      long f = -1;
      for (size_t i = end >= nn ? end - nn + 1 : 0; i-- > 0;)
        if (!memcmp(p + i, needle, nn)) { f = (long)i; break; }
      if (f < 0) break;
      if (push_str(r, l, p + f + nn, end - (size_t)f - nn)) return jv_undef(NULL);
      end = (size_t)f, k++;
    }
    if (push_str(r, l, p, end)) return jv_undef(NULL);
    for (size_t i = 0; i < l->n / 2; i++) {
      jv t = l->items[i];
      l->items[i] = l->items[l->n - 1 - i], l->items[l->n - 1 - i] = t;
    }
    return mklist(r, l);
  }
  if (sep.kind != JV_NONE && sep.kind != JV_UNDEF) return eng_jinja__fail(r, off, "split's separator must be a string or None");
  // Runs of whitespace; no empty strings.
  size_t i = 0, n = s->n;
  int64_t k = 0;
  if (from_right && maxsplit >= 0) {
    // Rare in templates; only the unlimited form differs from split.
    return eng_jinja__fail(r, off, "rsplit with a limit and no separator is not supported");
  }
  while (i < n) {
    size_t w;
    while (i < n && (w = eng_jinja__space_at(s->s + i, n - i))) i += w;
    if (i >= n) break;
    size_t start = i;
    if (maxsplit >= 0 && k >= maxsplit) {  // the rest, trailing whitespace and all, as Python keeps it
      if (push_str(r, l, s->s + start, n - start)) return jv_undef(NULL);
      break;
    }
    while (i < n && !eng_jinja__space_at(s->s + i, n - i)) i += cp_len(s->s + i, n - i);
    if (push_str(r, l, s->s + start, i - start)) return jv_undef(NULL);
    k++;
  }
  return mklist(r, l);
}

static jv splitlines(jrender *r, const jstr *s, int keepends) {
  jlist *l = jv_mklist(r->a, 0);
  if (!l) return eng_jinja__oom(r);
  size_t start = 0, i = 0, n = s->n;
  while (i < n) {
    unsigned char c = (unsigned char)s->s[i];
    size_t brk = 0;
    if (c == '\r' && i + 1 < n && s->s[i + 1] == '\n') brk = 2;
    else if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e)) brk = 1;
    else if (c == 0xC2 && i + 1 < n && (unsigned char)s->s[i + 1] == 0x85) brk = 2;
    else if (c == 0xE2 && i + 2 < n && (unsigned char)s->s[i + 1] == 0x80 &&
             ((unsigned char)s->s[i + 2] == 0xA8 || (unsigned char)s->s[i + 2] == 0xA9)) brk = 3;
    if (!brk) { i++; continue; }
    if (push_str(r, l, s->s + start, i - start + (keepends ? brk : 0))) return jv_undef(NULL);
    i += brk, start = i;
  }
  if (start < n && push_str(r, l, s->s + start, n - start)) return jv_undef(NULL);
  return mklist(r, l);
}

static int affix(jrender *r, const jstr *s, jv x, int end, size_t off) {
  if (x.kind == JV_LIST && x.u.l->tuple) {
    for (size_t i = 0; i < x.u.l->n; i++) {
      int m = affix(r, s, x.u.l->items[i], end, off);
      if (m) return m;
    }
    return 0;
  }
  if (x.kind != JV_STR) {
    eng_jinja__fail(r, off, "%s first arg must be str or a tuple of str, not %s", end ? "endswith" : "startswith",
                    jv_type_name(x));
    return -1;
  }
  size_t k = x.u.s->n;
  if (k > s->n) return 0;
  return !memcmp(end ? s->s + s->n - k : s->s, x.u.s->s, k);
}

static jv str_method(jrender *r, const jstr *s, const char *m, const jv *a, size_t n, size_t off) {
  jv a0 = n > 0 ? a[0] : jv_none(), a1 = n > 1 ? a[1] : jv_none();
  if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip")) {
    if (a0.kind != JV_NONE && a0.kind != JV_STR) return eng_jinja__fail(r, off, "%s arg must be None or str", m);
    size_t b, e;
    eng_jinja__strip(s->s, s->n, a0.kind == JV_STR ? a0.u.s : NULL, m[0] != 'r', m[0] != 'l', &b, &e);
    return eng_jinja__strv(r, s->s + b, e - b);
  }
  if (!strcmp(m, "split") || !strcmp(m, "rsplit")) {
    int64_t maxsplit = a1.kind == JV_INT ? a1.u.i : -1;
    return split(r, s, a0, maxsplit, m[0] == 'r', off);
  }
  if (!strcmp(m, "splitlines")) return splitlines(r, s, jv_truthy(a0));
  if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
    int v = affix(r, s, a0, m[0] == 'e', off);
    return v < 0 ? jv_undef(NULL) : jv_bool(v);
  }
  if (!strcmp(m, "upper")) return eng_jinja__case(r, s, JCASE_UPPER);
  if (!strcmp(m, "lower")) return eng_jinja__case(r, s, JCASE_LOWER);
  if (!strcmp(m, "title")) return eng_jinja__case(r, s, JCASE_TITLE_METHOD);
  if (!strcmp(m, "capitalize")) return eng_jinja__case(r, s, JCASE_CAPITALIZE);
  if (!strcmp(m, "replace")) {
    if (a0.kind != JV_STR || a1.kind != JV_STR) return eng_jinja__fail(r, off, "replace takes two strings");
    int64_t count = n > 2 && a[2].kind == JV_INT ? a[2].u.i : -1;
    jbuf b = {0};
    size_t at = 0;
    int64_t k = 0;
    long f;
    if (a0.u.s->n == 0) {  // Python inserts the new text between every character
      for (size_t i = 0; i <= s->n; k++) {
        if (count < 0 || k < count) jbuf_put(&b, a1.u.s->s, a1.u.s->n);
        if (i == s->n) break;
        size_t l = cp_len(s->s + i, s->n - i);
        jbuf_put(&b, s->s + i, l);
        i += l;
      }
      return eng_jinja__buf_str(r, &b);
    }
    while ((count < 0 || k < count) && (f = eng_jinja__str_find(s->s, s->n, a0.u.s->s, a0.u.s->n, at)) >= 0) {
      jbuf_put(&b, s->s + at, (size_t)f - at);
      jbuf_put(&b, a1.u.s->s, a1.u.s->n);
      at = (size_t)f + a0.u.s->n, k++;
    }
    jbuf_put(&b, s->s + at, s->n - at);
    return eng_jinja__buf_str(r, &b);
  }
  if (!strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "count")) {
    if (a0.kind != JV_STR) return eng_jinja__fail(r, off, "%s takes a string", m);
    // Positions in code points, as Python counts them.
    long f = -1, at = 0, cnt = 0;
    for (;;) {
      long g = eng_jinja__str_find(s->s, s->n, a0.u.s->s, a0.u.s->n, (size_t)at);
      if (g < 0) break;
      if (f < 0 || m[0] == 'r') f = g;
      cnt++;
      if (m[0] == 'f') break;
      at = g + (long)(a0.u.s->n ? a0.u.s->n : 1);
      if ((size_t)at > s->n) break;
    }
    if (m[0] == 'c') return jv_int(cnt);
    if (f < 0) return jv_int(-1);
    long cps = 0;
    for (long i = 0; i < f; i++) cps += ((unsigned char)s->s[i] & 0xC0) != 0x80;
    return jv_int(cps);
  }
  if (!strcmp(m, "join")) {
    jlist *items = eng_jinja__iter(r, a0, off);
    if (!items) return jv_undef(NULL);
    jbuf b = {0};
    for (size_t i = 0; i < items->n; i++) {
      if (items->items[i].kind != JV_STR) {
        jbuf_free(&b);
        return eng_jinja__fail(r, off, "sequence item %zu: expected str instance, %s found", i, jv_type_name(items->items[i]));
      }
      if (i) jbuf_put(&b, s->s, s->n);
      jbuf_put(&b, items->items[i].u.s->s, items->items[i].u.s->n);
    }
    return eng_jinja__buf_str(r, &b);
  }
  if (!strncmp(m, "is", 2)) {
    if (!s->n) return jv_bool(0);
    int ok = 1, cased = 0;
    for (size_t i = 0; i < s->n; i++) {
      char c = s->s[i];
      int lo = c >= 'a' && c <= 'z', hi = c >= 'A' && c <= 'Z', dg = c >= '0' && c <= '9';
      if (!strcmp(m, "isdigit")) ok &= dg;
      else if (!strcmp(m, "isalpha")) ok &= lo || hi;
      else if (!strcmp(m, "isalnum")) ok &= lo || hi || dg;
      else if (!strcmp(m, "isspace")) ok &= eng_jinja__space_at(s->s + i, s->n - i) > 0;
      else if (!strcmp(m, "islower")) ok &= !hi, cased |= lo;
      else if (!strcmp(m, "isupper")) ok &= !lo, cased |= hi;
    }
    if (!strcmp(m, "islower") || !strcmp(m, "isupper")) ok &= cased;
    return jv_bool(ok);
  }
  return eng_jinja__fail(r, off, "str.%s() is not supported", m);
}

// str.format with {}, {0}, {name}, {{ and }}, !s and !r; format specs are refused.
static jv str_format(jrender *r, const jstr *s, const jv *a, size_t n, const char **kn, const jv *kw, size_t nkw,
                     size_t off) {
  jbuf b = {0};
  size_t auto_i = 0;
  for (size_t i = 0; i < s->n; i++) {
    char c = s->s[i];
    if (c == '}' && i + 1 < s->n && s->s[i + 1] == '}') { jbuf_putc(&b, '}'), i++; continue; }
    if (c != '{') { jbuf_putc(&b, c); continue; }
    if (i + 1 < s->n && s->s[i + 1] == '{') { jbuf_putc(&b, '{'), i++; continue; }
    size_t j = i + 1;
    while (j < s->n && s->s[j] != '}') j++;
    if (j >= s->n) { jbuf_free(&b); return eng_jinja__fail(r, off, "Single '{' encountered in format string"); }
    char field[64];
    size_t len = j - i - 1 < sizeof field - 1 ? j - i - 1 : sizeof field - 1;
    memcpy(field, s->s + i + 1, len);
    field[len] = '\0';
    char conv = 0, *bang = strchr(field, '!');
    if (strchr(field, ':') || strchr(field, '.') || strchr(field, '[')) {
      jbuf_free(&b);
      return eng_jinja__fail(r, off, "str.format: '{%s}' is not supported (only {}, {0}, {name}, !s, !r)", field);
    }
    if (bang) conv = bang[1], *bang = '\0';
    jv v = jv_undef(NULL);
    int found = 0;
    if (!field[0]) {
      if (auto_i < n) v = a[auto_i], found = 1;
      auto_i++;
    } else if (field[0] >= '0' && field[0] <= '9') {
      size_t k = (size_t)strtoul(field, NULL, 10);
      if (k < n) v = a[k], found = 1;
    } else {
      for (size_t k = 0; k < nkw; k++)
        if (!strcmp(kn[k], field)) v = kw[k], found = 1;
    }
    if (!found) { jbuf_free(&b); return eng_jinja__fail(r, off, "str.format: no argument for '{%s}'", field); }
    if (conv == 'r') jv_repr(&b, v);
    else jv_to_str(&b, v);
    i = j;
  }
  return eng_jinja__buf_str(r, &b);
}

jv eng_jinja__method(jrender *r, jv self, const char *m, const jv *a, size_t n, const char **kn, const jv *kw,
                     size_t nkw, size_t off) {
  if (self.kind == JV_STR && !strcmp(m, "format")) return str_format(r, self.u.s, a, n, kn, kw, nkw, off);
  // Keyword arguments only where Python's methods take them by name in templates.
  jv args[4] = {jv_none(), jv_none(), jv_none(), jv_none()};
  if (n > 4) return eng_jinja__fail(r, off, "too many arguments to %s()", m);
  for (size_t i = 0; i < n; i++) args[i] = a[i];
  size_t na = n;
  for (size_t k = 0; k < nkw; k++) {
    int slot = -1;
    if (!strcmp(kn[k], "sep") || !strcmp(kn[k], "chars") || !strcmp(kn[k], "keepends")) slot = 0;
    else if (!strcmp(kn[k], "maxsplit")) slot = 1;
    if (slot < 0) return eng_jinja__fail(r, off, "%s() got an unexpected keyword argument '%s'", m, kn[k]);
    args[slot] = kw[k];
    if ((size_t)slot + 1 > na) na = (size_t)slot + 1;
  }
  if (self.kind == JV_STR) return str_method(r, self.u.s, m, args, na, off);
  if (self.kind == JV_DICT) {
    const jdict *d = self.u.d;
    if (!strcmp(m, "get")) {
      jv v;
      if (na < 1) return eng_jinja__fail(r, off, "get expected at least 1 argument");
      return jdict_get(d, args[0], &v) ? v : args[1];
    }
    if (!strcmp(m, "items") || !strcmp(m, "keys") || !strcmp(m, "values")) {
      jlist *l = jv_mklist(r->a, d->n);
      if (!l) return eng_jinja__oom(r);
      for (size_t i = 0; i < d->n; i++) {
        if (m[0] == 'k') l->items[i] = d->keys[i];
        else if (m[0] == 'v') l->items[i] = d->vals[i];
        else {
          jlist *t = jv_mklist(r->a, 2);
          if (!t) return eng_jinja__oom(r);
          t->items[0] = d->keys[i], t->items[1] = d->vals[i], t->n = 2, t->tuple = 1;
          l->items[i] = mklist(r, t);
        }
      }
      l->n = d->n;
      return mklist(r, l);
    }
    if (!strcmp(m, "copy")) {
      jdict *c = jv_mkdict(r->a);
      for (size_t i = 0; c && i < d->n; i++)
        if (jdict_set(r->a, c, d->keys[i], d->vals[i])) c = NULL;
      if (!c) return eng_jinja__oom(r);
      jv v = {JV_DICT, {0}};
      v.u.d = c;
      return v;
    }
    return eng_jinja__fail(r, off, "access to attribute '%s' of 'dict' object is unsafe.", m);
  }
  if (self.kind == JV_LIST) {
    const jlist *l = self.u.l;
    if (!strcmp(m, "index") || !strcmp(m, "count")) {
      int64_t cnt = 0;
      for (size_t i = 0; i < l->n; i++)
        if (jv_equal(l->items[i], args[0])) {
          if (m[0] == 'i') return jv_int((int64_t)i);
          cnt++;
        }
      if (m[0] == 'i') return eng_jinja__fail(r, off, "list.index(x): x not in list");
      return jv_int(cnt);
    }
    if (!strcmp(m, "copy")) {
      jlist *c = jv_mklist(r->a, l->n);
      if (!c) return eng_jinja__oom(r);
      if (l->n) memcpy(c->items, l->items, l->n * sizeof *c->items);
      c->n = l->n;
      return mklist(r, c);
    }
    return eng_jinja__fail(r, off, "access to attribute '%s' of '%s' object is unsafe.", m, jv_type_name(self));
  }
  return eng_jinja__fail(r, off, "'%s' object has no method '%s'", jv_type_name(self), m);
}
