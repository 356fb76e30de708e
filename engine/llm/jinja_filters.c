// engine/llm/jinja_filters.c: the filters chat templates use, as Jinja2
// 3.1 defines them, with transformers' tojson (json.dumps with
// ensure_ascii=False; indent, separators and sort_keys by keyword).
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/llm/jinja_internal.h"

static const char *const FILTERS[] = {
    "abs", "capitalize", "count", "d", "default", "first", "float", "indent", "int", "items", "join", "last",
    "length", "list", "lower", "map", "reject", "rejectattr", "replace", "reverse", "round", "safe", "select",
    "selectattr", "sort", "string", "sum", "title", "tojson", "trim", "upper", "unique", "dictsort", "min", "max",
    "escape", "e", NULL};

int eng_jinja__known_filter(const char *name) {
  for (const char *const *f = FILTERS; *f; f++)
    if (!strcmp(*f, name)) return 1;
  return 0;
}

// Arguments by position or keyword: the value of parameter `name` at `pos`, or dflt.
typedef struct fargs { const jv *a; size_t n; const char **kn; const jv *kw; size_t nkw; } fargs;
static jv arg(const fargs *A, size_t pos, const char *name, jv dflt) {
  for (size_t k = 0; k < A->nkw; k++)
    if (!strcmp(A->kn[k], name)) return A->kw[k];
  return pos < A->n ? A->a[pos] : dflt;
}

static jv list_of(jrender *r, jlist *l) {
  if (!l) return eng_jinja__oom(r);
  jv v = {JV_LIST, {0}};
  v.u.l = l;
  return v;
}

// What Jinja's generator filters return (jlist.gen).
static jv gen_of(jrender *r, jlist *l) {
  if (l) l->gen = 1;
  return list_of(r, l);
}

static jv to_string(jrender *r, jv x) {
  if (x.kind == JV_STR) return x;
  jbuf b = {0};
  jv_to_str(&b, x);
  return eng_jinja__buf_str(r, &b);
}

// Jinja's attribute getter: "a.b.0" walks attributes (then items), ints as indexes.
static jv attr_path(jrender *r, jv x, const jstr *path, size_t off) {
  size_t i = 0;
  while (i <= path->n && !r->failed) {
    size_t j = i;
    while (j < path->n && path->s[j] != '.') j++;
    char part[128];
    size_t len = j - i < sizeof part - 1 ? j - i : sizeof part - 1;
    memcpy(part, path->s + i, len);
    part[len] = '\0';
    char *end;
    long idx = strtol(part, &end, 10);
    if (len && *end == '\0') x = eng_jinja__getitem(r, x, jv_int(idx), off);
    else if (x.kind == JV_DICT || x.kind == JV_NS) {
      jv v;
      x = jdict_get_str(x.u.d, part, &v) ? v : eng_jinja__getattr(r, x, part, off);
    } else {
      x = eng_jinja__getattr(r, x, part, off);
    }
    if (x.kind == JV_UNDEF) return x;
    i = j + 1;
  }
  return x;
}

// select/reject/selectattr/rejectattr: the items whose (attribute's) test result is want.
static jv select_items(jrender *r, jv seq, const fargs *A, int by_attr, int want, size_t off) {
  if (!jv_truthy(seq)) return gen_of(r, jv_mklist(r->a, 0));  // Jinja: `if value:` before iterating
  jlist *items = eng_jinja__iter(r, seq, off), *out = jv_mklist(r->a, 0);
  if (!items) return jv_undef(NULL);
  if (!out) return eng_jinja__oom(r);
  size_t first = 0;
  jv attr = jv_none();
  if (by_attr) {
    if (A->n < 1 || A->a[0].kind != JV_STR) return eng_jinja__fail(r, off, "selectattr/rejectattr need an attribute name");
    attr = A->a[0], first = 1;
  }
  const char *test = NULL;
  if (A->n > first) {
    if (A->a[first].kind != JV_STR) return eng_jinja__fail(r, off, "the test name must be a string");
    test = A->a[first].u.s->s;
    if (!eng_jinja__known_test(test)) return eng_jinja__fail(r, off, "test '%s' is not supported", test);
  }
  for (size_t i = 0; i < items->n && !r->failed; i++) {
    jv x = by_attr ? attr_path(r, items->items[i], attr.u.s, off) : items->items[i];
    if (r->failed) return jv_undef(NULL);
    int t = test ? eng_jinja__test(r, test, x, A->a + first + 1, A->n - first - 1, off) : jv_truthy(x);
    if (t < 0) return jv_undef(NULL);
    if (t == want && jlist_push(r->a, out, items->items[i])) return eng_jinja__oom(r);
  }
  return gen_of(r, out);
}

static int sort_cmp(jrender *r, jv a, jv b, int case_sensitive, size_t off) {
  if (!case_sensitive && a.kind == JV_STR && b.kind == JV_STR) {
    jv la = eng_jinja__case(r, a.u.s, JCASE_LOWER), lb = eng_jinja__case(r, b.u.s, JCASE_LOWER);
    if (r->failed) return 0;
    a = la, b = lb;
  }
  int c = jv_compare(a, b);
  if (c == 2) {
    eng_jinja__fail(r, off, "'<' not supported between instances of '%s' and '%s'", jv_type_name(a), jv_type_name(b));
    return 0;
  }
  return c;
}

static jv do_sort(jrender *r, jv seq, const fargs *A, size_t off) {
  jlist *items = eng_jinja__iter(r, seq, off);
  if (!items) return jv_undef(NULL);
  int reverse = jv_truthy(arg(A, 0, "reverse", jv_bool(0)));
  int cs = jv_truthy(arg(A, 1, "case_sensitive", jv_bool(0)));
  jv attr = arg(A, 2, "attribute", jv_none());
  jv *keys = jarena_alloc(r->a, (items->n + 1) * sizeof *keys);
  if (!keys) return eng_jinja__oom(r);
  for (size_t i = 0; i < items->n; i++)
    keys[i] = attr.kind == JV_STR ? attr_path(r, items->items[i], attr.u.s, off) : items->items[i];
  // Insertion sort: stable, as Python's sort is.
  for (size_t i = 1; i < items->n && !r->failed; i++)
    for (size_t j = i; j > 0; j--) {
      int c = sort_cmp(r, keys[j - 1], keys[j], cs, off);
      if (r->failed) return jv_undef(NULL);
      if (reverse ? c >= 0 : c <= 0) break;
      jv t = keys[j]; keys[j] = keys[j - 1]; keys[j - 1] = t;
      t = items->items[j]; items->items[j] = items->items[j - 1]; items->items[j - 1] = t;
    }
  return r->failed ? jv_undef(NULL) : list_of(r, items);
}

static jv do_indent(jrender *r, jv x, const fargs *A) {
  jv s = to_string(r, x), w = arg(A, 0, "width", jv_int(4));
  if (r->failed) return s;
  int first = jv_truthy(arg(A, 1, "first", jv_bool(0))), blank = jv_truthy(arg(A, 2, "blank", jv_bool(0)));
  jbuf ind = {0}, o = {0};
  if (w.kind == JV_STR) jbuf_put(&ind, w.u.s->s, w.u.s->n);
  else for (int64_t k = 0; k < (w.kind == JV_INT ? w.u.i : 4) && k < 1000; k++) jbuf_putc(&ind, ' ');
  // Jinja appends a newline, then works on splitlines().
  jbuf tmp = {0};
  jbuf_put(&tmp, s.u.s->s, s.u.s->n);
  jbuf_putc(&tmp, '\n');
  jstr *t = jv_mkstr(r->a, tmp.p, tmp.n);
  jbuf_free(&tmp);
  if (!t) { jbuf_free(&ind); return eng_jinja__oom(r); }
  size_t lo = 0;
  int line = 0;
  for (size_t i = 0; i <= t->n; i++) {
    if (i < t->n && t->s[i] != '\n') continue;
    if (i == t->n && lo == t->n) break;
    size_t len = i - lo;
    if (line) jbuf_putc(&o, '\n');
    if ((line || first) && (len || blank)) jbuf_put(&o, ind.p ? ind.p : "", ind.n);
    jbuf_put(&o, t->s + lo, len);
    lo = i + 1, line++;
  }
  jbuf_free(&ind);
  return eng_jinja__buf_str(r, &o);
}

static jv do_tojson(jrender *r, jv x, const fargs *A, size_t off) {
  jv ind = arg(A, 0, "indent", jv_none()), seps = arg(A, 3, "separators", jv_none());
  jv sort = arg(A, 4, "sort_keys", jv_bool(0)), ascii = arg(A, 1, "ensure_ascii", jv_bool(0));
  int indent = -1;
  if (ind.kind == JV_INT) indent = ind.u.i < 0 ? 0 : (int)(ind.u.i > 64 ? 64 : ind.u.i);
  else if (ind.kind != JV_NONE && ind.kind != JV_UNDEF) return eng_jinja__fail(r, off, "tojson's indent must be an int");
  const char *isep = NULL, *ksep = NULL;
  if (seps.kind == JV_LIST && seps.u.l->n == 2 && seps.u.l->items[0].kind == JV_STR && seps.u.l->items[1].kind == JV_STR)
    isep = seps.u.l->items[0].u.s->s, ksep = seps.u.l->items[1].u.s->s;
  else if (seps.kind != JV_NONE && seps.kind != JV_UNDEF) return eng_jinja__fail(r, off, "tojson's separators must be two strings");
  jbuf b = {0};
  const char *why = NULL;
  if (jv_tojson(&b, x, indent, isep, ksep, jv_truthy(sort), jv_truthy(ascii), &why)) {
    jbuf_free(&b);
    return eng_jinja__fail(r, off, "tojson: %s", why);
  }
  return eng_jinja__buf_str(r, &b);
}

jv eng_jinja__filter(jrender *r, const char *name, jv x, const jv *args, size_t nargs, const char **kn,
                     const jv *kw, size_t nkw, size_t off) {
  fargs A = {args, nargs, kn, kw, nkw};
  if (!strcmp(name, "default") || !strcmp(name, "d")) {
    int boolean = jv_truthy(arg(&A, 1, "boolean", jv_bool(0)));
    if (x.kind == JV_UNDEF || (boolean && !jv_truthy(x))) return arg(&A, 0, "default_value", eng_jinja__strv(r, "", 0));
    return x;
  }
  if (!strcmp(name, "tojson")) return do_tojson(r, x, &A, off);
  if (!strcmp(name, "safe") || !strcmp(name, "escape") || !strcmp(name, "e")) {
    jv s;
    if (name[0] == 's' || (x.kind == JV_STR && x.u.s->markup)) {
      s = to_string(r, x);
      if (s.kind == JV_STR && !s.u.s->markup) s = eng_jinja__strv(r, s.u.s->s, s.u.s->n);  // a copy to mark
    } else {
      jbuf b = {0}, e = {0};
      jv_to_str(&b, x);
      jv_html_escape(&e, b.p ? b.p : "", b.n);
      jbuf_free(&b);
      s = eng_jinja__buf_str(r, &e);
    }
    if (s.kind == JV_STR) ((jstr *)s.u.s)->markup = 1;
    return s;
  }
  if (!strcmp(name, "string")) return to_string(r, x);
  if (!strcmp(name, "trim")) {
    jv s = to_string(r, x), chars = arg(&A, 0, "chars", jv_none());
    if (r->failed) return s;
    if (chars.kind != JV_NONE && chars.kind != JV_STR) return eng_jinja__fail(r, off, "trim's chars must be a string");
    size_t b, e;
    eng_jinja__strip(s.u.s->s, s.u.s->n, chars.kind == JV_STR ? chars.u.s : NULL, 1, 1, &b, &e);
    return eng_jinja__strv(r, s.u.s->s + b, e - b);
  }
  if (!strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "title") || !strcmp(name, "capitalize")) {
    jv s = to_string(r, x);
    if (r->failed) return s;
    int how = name[0] == 'u' ? JCASE_UPPER : name[0] == 'l' ? JCASE_LOWER : name[0] == 't' ? JCASE_TITLE_FILTER : JCASE_CAPITALIZE;
    return eng_jinja__case(r, s.u.s, how);
  }
  if (!strcmp(name, "length") || !strcmp(name, "count")) {
    switch (x.kind) {
      case JV_UNDEF: return jv_int(0);
      case JV_STR: {
        int64_t n = 0;
        for (size_t i = 0; i < x.u.s->n; i++) n += ((unsigned char)x.u.s->s[i] & 0xC0) != 0x80;
        return jv_int(n);
      }
      case JV_LIST:
        if (x.u.l->gen) return eng_jinja__fail(r, off, "object of type 'generator' has no len()");
        return jv_int((int64_t)x.u.l->n);
      case JV_DICT: return jv_int((int64_t)x.u.d->n);
      default: return eng_jinja__fail(r, off, "object of type '%s' has no len()", jv_type_name(x));
    }
  }
  if (!strcmp(name, "first") || !strcmp(name, "last")) {
    if (name[0] == 'l' && x.kind == JV_LIST && x.u.l->gen)
      return eng_jinja__fail(r, off, "'generator' object is not reversible");
    jlist *items = eng_jinja__iter(r, x, off);
    if (!items) return jv_undef(NULL);
    if (!items->n) return jv_undef(name[0] == 'f' ? "No first item, sequence was empty." : "No last item, sequence was empty.");
    return items->items[name[0] == 'f' ? 0 : items->n - 1];
  }
  if (!strcmp(name, "list")) return list_of(r, eng_jinja__iter(r, x, off));
  if (!strcmp(name, "reverse")) {
    if (x.kind == JV_STR) {
      jlist *cs = eng_jinja__iter(r, x, off);
      if (!cs) return jv_undef(NULL);
      jbuf b = {0};
      for (size_t i = cs->n; i-- > 0;) jbuf_put(&b, cs->items[i].u.s->s, cs->items[i].u.s->n);
      return eng_jinja__buf_str(r, &b);
    }
    jlist *items = eng_jinja__iter(r, x, off);
    if (!items) return jv_undef(NULL);
    for (size_t i = 0; i < items->n / 2; i++) {
      jv t = items->items[i];
      items->items[i] = items->items[items->n - 1 - i], items->items[items->n - 1 - i] = t;
    }
    // reversed(list) is an iterator; a generator has no reversed() and Jinja makes a list of it.
    return x.kind == JV_LIST && !x.u.l->gen ? gen_of(r, items) : list_of(r, items);
  }
  if (!strcmp(name, "join")) {
    jv sep = arg(&A, 0, "d", eng_jinja__strv(r, "", 0)), attr = arg(&A, 1, "attribute", jv_none());
    jlist *items = eng_jinja__iter(r, x, off);
    if (!items) return jv_undef(NULL);
    jbuf b = {0};
    for (size_t i = 0; i < items->n && !r->failed; i++) {
      if (i) jv_to_str(&b, sep);
      jv it = attr.kind == JV_STR ? attr_path(r, items->items[i], attr.u.s, off) : items->items[i];
      jv_to_str(&b, it);
    }
    if (r->failed) { jbuf_free(&b); return jv_undef(NULL); }
    return eng_jinja__buf_str(r, &b);
  }
  if (!strcmp(name, "items")) {
    if (x.kind == JV_UNDEF) return list_of(r, jv_mklist(r->a, 0));
    if (x.kind != JV_DICT) return eng_jinja__fail(r, off, "Can only get item pairs from a mapping.");
    return eng_jinja__method(r, x, "items", NULL, 0, NULL, NULL, 0, off);
  }
  if (!strcmp(name, "dictsort")) {
    if (x.kind != JV_DICT) return eng_jinja__fail(r, off, "dictsort needs a mapping");
    jv items = eng_jinja__method(r, x, "items", NULL, 0, NULL, NULL, 0, off);
    if (r->failed) return items;
    jv sargs[3] = {arg(&A, 2, "reverse", jv_bool(0)), arg(&A, 0, "case_sensitive", jv_bool(0)),
                   eng_jinja__strv(r, arg(&A, 1, "by", jv_none()).kind == JV_STR &&
                                          !strcmp(arg(&A, 1, "by", jv_none()).u.s->s, "value") ? "1" : "0", 1)};
    fargs S = {sargs, 3, NULL, NULL, 0};
    return do_sort(r, items, &S, off);
  }
  if (!strcmp(name, "selectattr") || !strcmp(name, "rejectattr"))
    return select_items(r, x, &A, 1, name[0] == 's', off);
  if (!strcmp(name, "select") || !strcmp(name, "reject")) return select_items(r, x, &A, 0, name[0] == 's', off);
  if (!strcmp(name, "map")) {
    if (!jv_truthy(x)) return gen_of(r, jv_mklist(r->a, 0));
    jlist *items = eng_jinja__iter(r, x, off), *out = jv_mklist(r->a, 0);
    if (!items) return jv_undef(NULL);
    if (!out) return eng_jinja__oom(r);
    jv attr = arg(&A, 99, "attribute", jv_none()), dflt = arg(&A, 99, "default", jv_undef(NULL));
    if (attr.kind == JV_STR) {
      for (size_t i = 0; i < items->n; i++) {
        jv v = attr_path(r, items->items[i], attr.u.s, off);
        if (r->failed) return v;
        if (v.kind == JV_UNDEF && dflt.kind != JV_UNDEF) v = dflt;
        if (jlist_push(r->a, out, v)) return eng_jinja__oom(r);
      }
      return gen_of(r, out);
    }
    if (nargs < 1 || args[0].kind != JV_STR) return eng_jinja__fail(r, off, "map needs a filter name or attribute=");
    const char *f = args[0].u.s->s;
    if (!eng_jinja__known_filter(f)) return eng_jinja__fail(r, off, "filter '%s' is not supported", f);
    for (size_t i = 0; i < items->n; i++) {
      jv v = eng_jinja__filter(r, f, items->items[i], args + 1, nargs - 1, kn, kw, nkw, off);
      if (r->failed) return v;
      if (jlist_push(r->a, out, v)) return eng_jinja__oom(r);
    }
    return gen_of(r, out);
  }
  if (!strcmp(name, "sort")) return do_sort(r, x, &A, off);
  if (!strcmp(name, "min") || !strcmp(name, "max")) {
    jlist *items = eng_jinja__iter(r, x, off);
    if (!items) return jv_undef(NULL);
    if (!items->n) return jv_undef("No aggregated item, sequence was empty.");
    int cs = jv_truthy(arg(&A, 0, "case_sensitive", jv_bool(0)));
    jv attr = arg(&A, 1, "attribute", jv_none());
    size_t best = 0;
    jv bk = attr.kind == JV_STR ? attr_path(r, items->items[0], attr.u.s, off) : items->items[0];
    for (size_t i = 1; i < items->n && !r->failed; i++) {
      jv k = attr.kind == JV_STR ? attr_path(r, items->items[i], attr.u.s, off) : items->items[i];
      int c = sort_cmp(r, k, bk, cs, off);
      if (name[1] == 'i' ? c < 0 : c > 0) best = i, bk = k;
    }
    return r->failed ? jv_undef(NULL) : items->items[best];
  }
  if (!strcmp(name, "unique")) {
    jlist *items = eng_jinja__iter(r, x, off), *out = jv_mklist(r->a, 0);
    if (!items) return jv_undef(NULL);
    int cs = jv_truthy(arg(&A, 0, "case_sensitive", jv_bool(0)));
    for (size_t i = 0; out && i < items->n; i++) {
      int seen = 0;
      for (size_t j = 0; j < out->n && !seen; j++) seen = sort_cmp(r, out->items[j], items->items[i], cs, off) == 0 &&
                                                        (cs || jv_compare(out->items[j], items->items[i]) != 2);
      if (r->failed) return jv_undef(NULL);
      if (!seen && jlist_push(r->a, out, items->items[i])) out = NULL;
    }
    return gen_of(r, out);
  }
  if (!strcmp(name, "replace")) {
    jv s = to_string(r, x);
    if (r->failed) return s;
    return eng_jinja__method(r, s, "replace", args, nargs, NULL, NULL, 0, off);
  }
  if (!strcmp(name, "indent")) return do_indent(r, x, &A);
  if (!strcmp(name, "int") || !strcmp(name, "float")) {
    int is_int = name[0] == 'i';
    jv dflt = arg(&A, 0, "default", is_int ? jv_int(0) : jv_float(0));
    double d;
    if (x.kind == JV_INT || x.kind == JV_BOOL) d = x.kind == JV_INT ? (double)x.u.i : x.u.b;
    else if (x.kind == JV_FLOAT) d = x.u.f;
    else if (x.kind == JV_STR) {
      char *end;
      d = strtod(x.u.s->s, &end);
      size_t b, e;
      eng_jinja__strip(x.u.s->s, x.u.s->n, NULL, 1, 1, &b, &e);
      if (b == e || end != x.u.s->s + e) return dflt;
    } else return dflt;
    if (is_int) {
      if (x.kind == JV_INT) return x;
      if (d != d || isinf(d)) return dflt;
      return jv_int((int64_t)trunc(d));
    }
    return jv_float(d);
  }
  if (!strcmp(name, "abs")) {
    if (x.kind == JV_INT) {
      if (x.u.i == INT64_MIN) return eng_jinja__fail(r, off, "integer overflow (integers past 64 bits are not supported)");
      return jv_int(x.u.i < 0 ? -x.u.i : x.u.i);
    }
    if (x.kind == JV_BOOL) return jv_int(x.u.b);
    if (x.kind == JV_FLOAT) return jv_float(fabs(x.u.f));
    return eng_jinja__fail(r, off, "bad operand type for abs(): '%s'", jv_type_name(x));
  }
  if (!strcmp(name, "round")) {
    jv prec = arg(&A, 0, "precision", jv_int(0)), method = arg(&A, 1, "method", jv_none());
    if (x.kind != JV_INT && x.kind != JV_FLOAT && x.kind != JV_BOOL) return eng_jinja__fail(r, off, "round needs a number");
    double v = x.kind == JV_FLOAT ? x.u.f : x.kind == JV_INT ? (double)x.u.i : x.u.b;
    double p = pow(10, prec.kind == JV_INT ? (double)prec.u.i : 0);
    const char *m = method.kind == JV_STR ? method.u.s->s : "common";
    // "common" is Python's round(): halves to even.
    double y = !strcmp(m, "ceil") ? ceil(v * p) / p : !strcmp(m, "floor") ? floor(v * p) / p : nearbyint(v * p) / p;
    return jv_float(y);
  }
  if (!strcmp(name, "sum")) {
    jlist *items = eng_jinja__iter(r, x, off);
    if (!items) return jv_undef(NULL);
    jv attr = arg(&A, 0, "attribute", jv_none()), acc = arg(&A, 1, "start", jv_int(0));
    for (size_t i = 0; i < items->n && !r->failed; i++) {
      jv it = attr.kind == JV_STR ? attr_path(r, items->items[i], attr.u.s, off) : items->items[i];
      if (!((it.kind == JV_INT || it.kind == JV_FLOAT || it.kind == JV_BOOL) &&
            (acc.kind == JV_INT || acc.kind == JV_FLOAT || acc.kind == JV_BOOL)))
        return eng_jinja__fail(r, off, "sum needs numbers");
      int fl = it.kind == JV_FLOAT || acc.kind == JV_FLOAT;
      double a = acc.kind == JV_FLOAT ? acc.u.f : acc.kind == JV_INT ? (double)acc.u.i : acc.u.b;
      double b = it.kind == JV_FLOAT ? it.u.f : it.kind == JV_INT ? (double)it.u.i : it.u.b;
      int64_t s;
      if (!fl && __builtin_add_overflow(acc.kind == JV_INT ? acc.u.i : acc.u.b, it.kind == JV_INT ? it.u.i : it.u.b, &s))
        return eng_jinja__fail(r, off, "integer overflow (integers past 64 bits are not supported)");
      acc = fl ? jv_float(a + b) : jv_int(s);
    }
    return acc;
  }
  return eng_jinja__fail(r, off, "filter '%s' is not supported", name);
}
