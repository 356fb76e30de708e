// engine/llm/jinja_builtins.c: the names a template calls: globals (range,
// namespace, dict, raise_exception, strftime_now), attribute and item access
// as Jinja's sandbox does them (a dict's `.x` is its method or key x), the
// methods of str, dict and list that chat templates use, and the tests.
// The filters are in jinja_filters.c.
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "engine/llm/jinja_internal.h"

static jv mkfunc(jrender *r, int id, const char *name, jv self) {
  jfunc *fn = jarena_alloc(r->a, sizeof *fn);
  if (!fn) return eng_jinja__oom(r);
  fn->id = id, fn->name = name, fn->self = self;
  jv v = {JV_FUNC, {0}};
  v.u.fn = fn;
  return v;
}

static const char *const GLOBALS[] = {"range", "namespace", "raise_exception", "strftime_now", "dict", NULL};
static const int GLOBAL_IDS[] = {JB_RANGE, JB_NAMESPACE, JB_RAISE, JB_STRFTIME, JB_DICT};

jv eng_jinja__global(jrender *r, const char *name) {
  for (int i = 0; GLOBALS[i]; i++)
    if (!strcmp(name, GLOBALS[i])) return mkfunc(r, GLOBAL_IDS[i], GLOBALS[i], jv_none());
  return jv_undef(NULL);
}

// Method names per receiver type; a name found here binds to the object.
static const char *const STR_METHODS[] = {"strip", "lstrip", "rstrip", "split", "rsplit", "splitlines",
                                          "startswith", "endswith", "upper", "lower", "title", "capitalize",
                                          "replace", "find", "rfind", "count", "join", "isdigit", "isalpha",
                                          "isalnum", "isspace", "islower", "isupper", "format", NULL};
static const char *const DICT_METHODS[] = {"items", "keys", "values", "get", "copy", "update", "pop",
                                           "setdefault", "clear", "popitem", NULL};
static const char *const LIST_METHODS[] = {"index", "count", "append", "extend", "insert", "pop", "remove",
                                           "reverse", "sort", "clear", "copy", NULL};

static const char *find_name(const char *const *list, const char *name) {
  for (; *list; list++)
    if (!strcmp(*list, name)) return *list;
  return NULL;
}

static jv no_attr(jrender *r, jv x, const char *name) {
  size_t n = strlen(name) + 64;
  char *why = jarena_alloc(r->a, n);
  if (why) snprintf(why, n, "'%s object' has no attribute '%s'", jv_type_name(x), name);
  return jv_undef(why);
}

jv eng_jinja__getattr(jrender *r, jv x, const char *name, size_t off) {
  const char *m = NULL;
  switch (x.kind) {
    case JV_UNDEF: return eng_jinja__fail(r, off, "%s", x.u.undef ? x.u.undef : "undefined value has no attributes");
    case JV_DICT: {
      if ((m = find_name(DICT_METHODS, name))) return mkfunc(r, JB_METHOD, m, x);
      jv v;
      if (jdict_get_str(x.u.d, name, &v)) return v;
      return no_attr(r, x, name);
    }
    case JV_NS: {
      jv v;
      if (jdict_get_str(x.u.d, name, &v)) return v;
      return no_attr(r, x, name);
    }
    case JV_STR: m = find_name(STR_METHODS, name); break;
    case JV_LIST: m = find_name(LIST_METHODS, name); break;
    default: break;
  }
  return m ? mkfunc(r, JB_METHOD, m, x) : no_attr(r, x, name);
}

jv eng_jinja__getitem(jrender *r, jv x, jv key, size_t off) {
  switch (x.kind) {
    case JV_UNDEF: return eng_jinja__fail(r, off, "%s", x.u.undef ? x.u.undef : "undefined value is not subscriptable");
    case JV_DICT: case JV_NS: {
      jv v;
      if (jdict_get(x.u.d, key, &v)) return v;
      break;
    }
    case JV_LIST: case JV_STR:
      if (x.kind == JV_LIST && x.u.l->gen) break;  // not subscriptable: undefined, as Jinja's getitem falls back
      if (key.kind == JV_INT || key.kind == JV_BOOL) {
        jlist *items = x.kind == JV_LIST ? x.u.l : eng_jinja__iter(r, x, off);
        if (!items) return jv_undef(NULL);
        int64_t i = key.kind == JV_INT ? key.u.i : key.u.b, n = (int64_t)items->n;
        if (i < 0) i += n;
        if (i >= 0 && i < n) return items->items[i];
        return jv_undef("index out of range");
      }
      break;
    default: break;
  }
  if (key.kind == JV_STR) return eng_jinja__getattr(r, x, key.u.s->s, off);
  return jv_undef("no such item");
}

// --- calls

static int want_str(jrender *r, jv v, const char *what, size_t off) {
  if (v.kind == JV_STR) return 0;
  eng_jinja__fail(r, off, "%s must be a string, not '%s'", what, jv_type_name(v));
  return -1;
}

static jv list_value(jlist *l) {
  jv v = {JV_LIST, {0}};
  v.u.l = l;
  return v;
}

static jv call_range(jrender *r, const jv *args, size_t n, size_t off) {
  int64_t a[3] = {0, 0, 1};
  if (n < 1 || n > 3) return eng_jinja__fail(r, off, "range expected 1 to 3 arguments, got %zu", n);
  for (size_t i = 0; i < n; i++) {
    if (args[i].kind != JV_INT && args[i].kind != JV_BOOL)
      return eng_jinja__fail(r, off, "'%s' object cannot be interpreted as an integer", jv_type_name(args[i]));
    a[n == 1 ? 1 : i] = args[i].kind == JV_INT ? args[i].u.i : args[i].u.b;
  }
  if (!a[2]) return eng_jinja__fail(r, off, "range() arg 3 must not be zero");
  __int128 span = a[2] > 0 ? (__int128)a[1] - a[0] : (__int128)a[0] - a[1], step = a[2] > 0 ? a[2] : -(__int128)a[2];
  __int128 count128 = span > 0 ? (span + step - 1) / step : 0;
  int64_t count = count128 > 100001 ? 100001 : (int64_t)count128;
  if (count > 100000)
    return eng_jinja__fail(r, off, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  jlist *l = jv_mklist(r->a, (size_t)count);
  if (!l) return eng_jinja__oom(r);
  for (int64_t i = 0; i < count; i++) l->items[i] = jv_int((int64_t)((__int128)a[0] + (__int128)i * a[2]));
  l->n = (size_t)count;
  return list_value(l);
}

static jv call_mapping(jrender *r, int ns, const jv *args, size_t n, const char **kn, const jv *kw, size_t nkw,
                       size_t off) {
  jdict *d = jv_mkdict(r->a);
  if (!d) return eng_jinja__oom(r);
  if (n > 1) return eng_jinja__fail(r, off, "%s expected at most 1 positional argument", ns ? "namespace" : "dict");
  if (n == 1) {
    if (args[0].kind != JV_DICT && args[0].kind != JV_NS)
      return eng_jinja__fail(r, off, "%s() takes a mapping, not '%s'", ns ? "namespace" : "dict", jv_type_name(args[0]));
    for (size_t i = 0; i < args[0].u.d->n; i++)
      if (jdict_set(r->a, d, args[0].u.d->keys[i], args[0].u.d->vals[i])) return eng_jinja__oom(r);
  }
  for (size_t i = 0; i < nkw; i++) {
    if (ns && kn[i][0] == '_') return eng_jinja__fail(r, off, "namespace attributes cannot start with '_'");
    if (jdict_set(r->a, d, eng_jinja__strv(r, kn[i], strlen(kn[i])), kw[i])) return eng_jinja__oom(r);
  }
  jv v = {ns ? JV_NS : JV_DICT, {0}};
  v.u.d = d;
  return v;
}

static jv call_strftime(jrender *r, const jv *args, size_t n, size_t off) {
  if (n != 1 || want_str(r, args[0], "strftime_now's format", off)) {
    if (!r->failed) eng_jinja__fail(r, off, "strftime_now takes one format string");
    return jv_undef(NULL);
  }
  int64_t now = r->opts && r->opts->now ? r->opts->now(r->opts->now_ctx) : (int64_t)time(NULL);
  time_t t = (time_t)now;
  struct tm tm;
  if (!gmtime_r(&t, &tm)) return eng_jinja__fail(r, off, "strftime_now: the clock is out of range");
  char buf[512];
  size_t len = args[0].u.s->n ? strftime(buf, sizeof buf, args[0].u.s->s, &tm) : 0;
  if (args[0].u.s->n && len == 0) return eng_jinja__fail(r, off, "strftime_now: the formatted date is empty or too long");
  return eng_jinja__strv(r, buf, len);
}

static jv call_raise(jrender *r, const jv *args, size_t n) {
  jbuf b = {0};
  if (n) jv_to_str(&b, args[0]);
  if (!r->failed) {
    r->failed = 1;
    // The template's own words, unchanged: they are meant for the user.
    err_set(r->e, ERR_FAILED_PRECONDITION, "%s", b.p ? b.p : "");
  }
  jbuf_free(&b);
  return jv_undef(NULL);
}

jv eng_jinja__call(jrender *r, jv fn, const jv *args, size_t nargs, const char **kn, const jv *kw, size_t nkw,
                   size_t off) {
  if (fn.kind == JV_UNDEF) return eng_jinja__fail(r, off, "%s", fn.u.undef ? fn.u.undef : "undefined value called");
  if (fn.kind != JV_FUNC) return eng_jinja__fail(r, off, "'%s' object is not callable", jv_type_name(fn));
  const jfunc *f = fn.u.fn;
  switch (f->id) {
    case JB_RANGE: return call_range(r, args, nargs, off);
    case JB_NAMESPACE: return call_mapping(r, 1, args, nargs, kn, kw, nkw, off);
    case JB_DICT: return call_mapping(r, 0, args, nargs, kn, kw, nkw, off);
    case JB_RAISE: return call_raise(r, args, nargs);
    case JB_STRFTIME: return call_strftime(r, args, nargs, off);
    case JB_METHOD: return eng_jinja__method(r, f->self, f->name, args, nargs, kn, kw, nkw, off);
    default: return eng_jinja__fail(r, off, "internal: unknown function");
  }
}

// --- tests

static const char *const TESTS[] = {"defined", "undefined", "none", "string", "mapping", "iterable", "sequence",
                                    "number", "integer", "float", "boolean", "true", "false", "callable", "odd",
                                    "even", "divisibleby", "eq", "equalto", "==", "ne", "!=", "lt", "lessthan",
                                    "<", "le", "<=", "gt", "greaterthan", ">", "ge", ">=", "in", "lower", "upper",
                                    "sameas", NULL};

int eng_jinja__known_test(const char *name) { return find_name(TESTS, name) != NULL; }

static int num_arg(jrender *r, jv x, const char *test, size_t off, int64_t *out) {
  if (x.kind == JV_INT || x.kind == JV_BOOL) {
    *out = x.kind == JV_INT ? x.u.i : x.u.b;
    return 0;
  }
  eng_jinja__fail(r, off, "test '%s' needs an integer, got '%s'", test, jv_type_name(x));
  return -1;
}

int eng_jinja__test(jrender *r, const char *name, jv x, const jv *args, size_t nargs, size_t off) {
  jv a = nargs ? args[0] : jv_undef(NULL);
  if (!strcmp(name, "defined")) return x.kind != JV_UNDEF;
  if (!strcmp(name, "undefined")) return x.kind == JV_UNDEF;
  if (!strcmp(name, "none")) return x.kind == JV_NONE;
  if (!strcmp(name, "string")) return x.kind == JV_STR;
  if (!strcmp(name, "mapping")) return x.kind == JV_DICT;
  if (!strcmp(name, "iterable")) return x.kind == JV_UNDEF || x.kind == JV_STR || x.kind == JV_LIST || x.kind == JV_DICT;
  if (!strcmp(name, "sequence")) return x.kind == JV_UNDEF || x.kind == JV_STR || x.kind == JV_LIST || x.kind == JV_DICT;
  if (!strcmp(name, "number")) return x.kind == JV_INT || x.kind == JV_FLOAT || x.kind == JV_BOOL;
  if (!strcmp(name, "integer")) return x.kind == JV_INT;
  if (!strcmp(name, "float")) return x.kind == JV_FLOAT;
  if (!strcmp(name, "boolean")) return x.kind == JV_BOOL;
  if (!strcmp(name, "true")) return x.kind == JV_BOOL && x.u.b;
  if (!strcmp(name, "false")) return x.kind == JV_BOOL && !x.u.b;
  if (!strcmp(name, "callable")) return x.kind == JV_FUNC;
  if (!strcmp(name, "odd") || !strcmp(name, "even")) {
    int64_t i;
    if (num_arg(r, x, name, off, &i)) return -1;
    return (i % 2 != 0) == (name[0] == 'o');
  }
  if (!strcmp(name, "divisibleby")) {
    int64_t i, d;
    if (num_arg(r, x, name, off, &i) || num_arg(r, a, name, off, &d)) return -1;
    if (!d) return eng_jinja__fail(r, off, "integer division or modulo by zero"), -1;
    return i % d == 0;
  }
  if (!strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "==")) return jv_equal(x, a);
  if (!strcmp(name, "ne") || !strcmp(name, "!=")) return !jv_equal(x, a);
  if (!strcmp(name, "sameas")) {
    if (x.kind != a.kind) return 0;
    switch (x.kind) {
      case JV_NONE: case JV_UNDEF: return 1;
      case JV_BOOL: return x.u.b == a.u.b;
      case JV_INT: return x.u.i == a.u.i && x.u.i >= -5 && x.u.i <= 256;  // CPython's small ints
      case JV_STR: return x.u.s == a.u.s;
      case JV_LIST: return x.u.l == a.u.l;
      case JV_DICT: case JV_NS: return x.u.d == a.u.d;
      default: return 0;
    }
  }
  if (!strcmp(name, "in")) {
    if (a.kind == JV_STR) {
      if (x.kind != JV_STR) return eng_jinja__fail(r, off, "'in <string>' requires string as left operand"), -1;
      return eng_jinja__str_find(a.u.s->s, a.u.s->n, x.u.s->s, x.u.s->n, 0) >= 0;
    }
    if (a.kind == JV_LIST) {
      for (size_t i = 0; i < a.u.l->n; i++)
        if (jv_equal(a.u.l->items[i], x)) return 1;
      return 0;
    }
    if (a.kind == JV_DICT || a.kind == JV_NS) {
      jv v;
      return jdict_get(a.u.d, x, &v);
    }
    return eng_jinja__fail(r, off, "argument of type '%s' is not iterable", jv_type_name(a)), -1;
  }
  if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
    jbuf b = {0};
    jv_to_str(&b, x);
    int cased = 0, ok = 1;
    for (size_t i = 0; i < b.n; i++) {
      char c = b.p[i];
      if (c >= 'a' && c <= 'z') cased = 1, ok &= name[0] == 'l';
      if (c >= 'A' && c <= 'Z') cased = 1, ok &= name[0] == 'u';
    }
    jbuf_free(&b);
    return cased && ok;
  }
  // Ordering tests.
  int c = jv_compare(x, a);
  if (c == 2) return eng_jinja__fail(r, off, "test '%s': '%s' and '%s' do not compare", name, jv_type_name(x),
                                     jv_type_name(a)), -1;
  if (!strcmp(name, "lt") || !strcmp(name, "lessthan") || !strcmp(name, "<")) return c < 0;
  if (!strcmp(name, "le") || !strcmp(name, "<=")) return c <= 0;
  if (!strcmp(name, "gt") || !strcmp(name, "greaterthan") || !strcmp(name, ">")) return c > 0;
  if (!strcmp(name, "ge") || !strcmp(name, ">=")) return c >= 0;
  return eng_jinja__fail(r, off, "internal: unknown test '%s'", name), -1;
}
