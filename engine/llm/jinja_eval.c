// engine/llm/jinja_eval.c: the tree rendered. Scopes as Jinja2 has them (a
// for loop's body gets a fresh scope each iteration, so a `set` inside it
// is gone at the next one: templates carry state across iterations in a
// namespace()), Python's operators, Jinja's Undefined (prints nothing, is
// false, iterates as empty, fails on arithmetic), and the public API.
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/llm/jinja_internal.h"

struct eng_jinja {
  jarena a;  // tokens, nodes, literals
  jsrc src;
  jnode *root;
};

static jv undefined_use(jrender *r, jv v, size_t off) {
  return eng_jinja__fail(r, off, "%s", v.u.undef ? v.u.undef : "undefined value used");
}

// --- scopes

static jv lookup(jrender *r, const jframe *f, const char *name) {
  for (; f; f = f->parent) {
    jv v;
    if (jdict_get_str(f->vars, name, &v)) return v;
  }
  jv g = eng_jinja__global(r, name);
  if (g.kind != JV_UNDEF || r->failed) return g;
  char *why = NULL;
  size_t n = strlen(name) + 24;
  why = jarena_alloc(r->a, n);
  if (why) snprintf(why, n, "'%s' is undefined", name);
  return jv_undef(why);
}

static int assign(jrender *r, jframe *f, const char *name, jv v) {
  jv k = eng_jinja__strv(r, name, strlen(name));
  if (r->failed || jdict_set(r->a, f->vars, k, v)) return eng_jinja__oom(r), -1;
  return 0;
}

static jframe *new_frame(jrender *r, jframe *parent) {
  jframe *f = jarena_alloc(r->a, sizeof *f);
  if (f) f->vars = jv_mkdict(r->a), f->parent = parent;
  if (!f || !f->vars) return eng_jinja__oom(r), NULL;
  return f;
}

// --- expressions

static jv eval(jrender *r, jframe *f, const jnode *n);
static jv eng_jinja__call_macro(jrender *r, const jfunc *fn, const jv *args, size_t nargs, const char **kn,
                                const jv *kw, size_t nkw, size_t off);

static int64_t floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
  return q;
}

// Python's ints do not overflow; ours are 64-bit, and past that a render fails rather than wrap.
static jv int_or_fail(jrender *r, int overflow, int64_t v, size_t off) {
  if (overflow) return eng_jinja__fail(r, off, "integer overflow (integers past 64 bits are not supported)");
  return jv_int(v);
}

static jv arith(jrender *r, int op, jv a, jv b, size_t off) {
  if (a.kind == JV_UNDEF) return undefined_use(r, a, off);
  if (b.kind == JV_UNDEF) return undefined_use(r, b, off);
  int an = a.kind == JV_INT || a.kind == JV_BOOL || a.kind == JV_FLOAT;
  int bn = b.kind == JV_INT || b.kind == JV_BOOL || b.kind == JV_FLOAT;
  static const char *const sym[] = {"+", "-", "*", "/", "//", "%", "**"};
  if (an && bn) {
    int fl = a.kind == JV_FLOAT || b.kind == JV_FLOAT;
    double x = a.kind == JV_FLOAT ? a.u.f : a.kind == JV_INT ? (double)a.u.i : a.u.b;
    double y = b.kind == JV_FLOAT ? b.u.f : b.kind == JV_INT ? (double)b.u.i : b.u.b;
    int64_t i = a.kind == JV_INT ? a.u.i : a.u.b, j = b.kind == JV_INT ? b.u.i : b.u.b;
    switch (op) {
      case JO_ADD: {
        if (fl) return jv_float(x + y);
        int64_t v = 0;
        int over = __builtin_add_overflow(i, j, &v);
        return int_or_fail(r, over, v, off);
      }
      case JO_SUB: {
        if (fl) return jv_float(x - y);
        int64_t v = 0;
        int over = __builtin_sub_overflow(i, j, &v);
        return int_or_fail(r, over, v, off);
      }
      case JO_MUL: {
        if (fl) return jv_float(x * y);
        int64_t v = 0;
        int over = __builtin_mul_overflow(i, j, &v);
        return int_or_fail(r, over, v, off);
      }
      case JO_DIV:
        if (y == 0) return eng_jinja__fail(r, off, "division by zero");
        return jv_float(x / y);
      case JO_FLOORDIV:
        if (y == 0) return eng_jinja__fail(r, off, "integer division or modulo by zero");
        if (fl) return jv_float(floor(x / y));
        if (j == -1) return i == INT64_MIN ? int_or_fail(r, 1, 0, off) : jv_int(-i);
        return jv_int(floordiv(i, j));
      case JO_MOD:
        if (y == 0) return eng_jinja__fail(r, off, "integer division or modulo by zero");
        if (fl) {
          double m = fmod(x, y);
          if (m != 0 && ((m < 0) != (y < 0))) m += y;
          return jv_float(m);
        }
        if (j == -1) return jv_int(0);
        return jv_int(i - floordiv(i, j) * j);
      case JO_POW:
        if (!fl && j >= 0) {
          int64_t p = 1;
          int over = 0;
          if (i == -1) return jv_int(j % 2 ? -1 : 1);  // without j steps
          // Stops at 0, at 1, or at the overflow (by the 64th step for |i| >= 2).
          for (int64_t k = 0; k < j && !over && p != 0 && i != 1; k++) over = __builtin_mul_overflow(p, i, &p);
          return int_or_fail(r, over, p, off);
        }
        return jv_float(pow(x, y));
    }
  }
  if (op == JO_ADD && a.kind == JV_STR && b.kind == JV_STR && (a.u.s->markup || b.u.s->markup)) {
    jbuf o = {0};
    if (a.u.s->markup) jbuf_put(&o, a.u.s->s, a.u.s->n);
    else jv_html_escape(&o, a.u.s->s, a.u.s->n);
    if (b.u.s->markup) jbuf_put(&o, b.u.s->s, b.u.s->n);
    else jv_html_escape(&o, b.u.s->s, b.u.s->n);
    jv v = eng_jinja__buf_str(r, &o);
    if (v.kind == JV_STR) ((jstr *)v.u.s)->markup = 1;
    return v;
  }
  if (op == JO_ADD && a.kind == JV_STR && b.kind == JV_STR) {
    jstr *s = jarena_alloc(r->a, sizeof *s + a.u.s->n + b.u.s->n + 1);
    if (!s) return eng_jinja__oom(r);
    memcpy(s->s, a.u.s->s, a.u.s->n);
    memcpy(s->s + a.u.s->n, b.u.s->s, b.u.s->n);
    s->n = a.u.s->n + b.u.s->n;
    return jv_str(s);
  }
  if (op == JO_ADD && a.kind == JV_LIST && b.kind == JV_LIST && a.u.l->tuple == b.u.l->tuple && !a.u.l->gen &&
      !b.u.l->gen) {
    jlist *l = jv_mklist(r->a, a.u.l->n + b.u.l->n + 1);
    if (!l) return eng_jinja__oom(r);
    if (a.u.l->n) memcpy(l->items, a.u.l->items, a.u.l->n * sizeof *l->items);
    if (b.u.l->n) memcpy(l->items + a.u.l->n, b.u.l->items, b.u.l->n * sizeof *l->items);
    l->n = a.u.l->n + b.u.l->n, l->tuple = a.u.l->tuple;
    jv v = {JV_LIST, {0}};
    v.u.l = l;
    return v;
  }
  if (op == JO_MUL && (a.kind == JV_STR || a.kind == JV_LIST) && (b.kind == JV_INT || b.kind == JV_BOOL)) {
    int64_t times = b.kind == JV_INT ? b.u.i : b.u.b;
    size_t unit = a.kind == JV_STR ? a.u.s->n : a.u.l->n;
    if (times > 0 && unit && (uint64_t)times * unit > (64u << 20)) return eng_jinja__fail(r, off, "repetition too large");
    if (a.kind == JV_STR) {
      jbuf o = {0};
      for (int64_t k = 0; k < times; k++) jbuf_put(&o, a.u.s->s, a.u.s->n);
      return eng_jinja__buf_str(r, &o);
    }
    jlist *l = jv_mklist(r->a, 0);
    for (int64_t k = 0; l && k < times; k++)
      for (size_t i = 0; i < a.u.l->n; i++)
        if (jlist_push(r->a, l, a.u.l->items[i])) l = NULL;
    if (!l) return eng_jinja__oom(r);
    jv v = {JV_LIST, {0}};
    v.u.l = l;
    return v;
  }
  if (op == JO_MUL && (b.kind == JV_STR || b.kind == JV_LIST) && (a.kind == JV_INT || a.kind == JV_BOOL))
    return arith(r, op, b, a, off);
  return eng_jinja__fail(r, off, "unsupported operand type(s) for %s: '%s' and '%s'", sym[op], jv_type_name(a),
                         jv_type_name(b));
}

static int contains(jrender *r, jv item, jv seq, size_t off) {
  switch (seq.kind) {
    case JV_STR:
      if (item.kind != JV_STR) {
        eng_jinja__fail(r, off, "'in <string>' requires string as left operand, not %s", jv_type_name(item));
        return -1;
      }
      if (!item.u.s->n) return 1;
      for (size_t i = 0; i + item.u.s->n <= seq.u.s->n; i++)
        if (!memcmp(seq.u.s->s + i, item.u.s->s, item.u.s->n)) return 1;
      return 0;
    case JV_LIST:
      for (size_t i = 0; i < seq.u.l->n; i++)
        if (jv_equal(seq.u.l->items[i], item)) return 1;
      return 0;
    case JV_DICT: case JV_NS: {
      jv v;
      return jdict_get(seq.u.d, item, &v);
    }
    case JV_UNDEF: return 0;  // Undefined iterates as empty, so `x in undefined` is false
    default:
      eng_jinja__fail(r, off, "argument of type '%s' is not iterable", jv_type_name(seq));
      return -1;
  }
}

static int compare_op(jrender *r, int op, jv a, jv b, size_t off) {
  switch (op) {
    case JO_EQ: return jv_equal(a, b);
    case JO_NE: return !jv_equal(a, b);
    case JO_IN: return contains(r, a, b, off);
    case JO_NOTIN: {
      int c = contains(r, a, b, off);
      return c < 0 ? c : !c;
    }
    default: {
      if (a.kind == JV_UNDEF) return undefined_use(r, a, off), -1;
      if (b.kind == JV_UNDEF) return undefined_use(r, b, off), -1;
      int c = jv_compare(a, b);
      if (c == 2) {
        static const char *const sym[] = {"<", "<=", ">", ">="};
        eng_jinja__fail(r, off, "'%s' not supported between instances of '%s' and '%s'", sym[op - JO_LT],
                        jv_type_name(a), jv_type_name(b));
        return -1;
      }
      return op == JO_LT ? c < 0 : op == JO_LE ? c <= 0 : op == JO_GT ? c > 0 : c >= 0;
    }
  }
}

static int64_t clamp_index(int64_t i, int64_t n, int lower_is_minus1) {
  if (i < 0) i += n;
  if (i < 0) i = lower_is_minus1 ? -1 : 0;
  if (i > n) i = n;
  return i;
}

static jv slice(jrender *r, jv x, const jv *parts, size_t off) {
  int64_t step = 1;
  if (parts[2].kind != JV_NONE && parts[2].kind != JV_UNDEF) {
    if (parts[2].kind != JV_INT) return eng_jinja__fail(r, off, "slice indices must be integers or None");
    step = parts[2].u.i;
    if (!step) return eng_jinja__fail(r, off, "slice step cannot be zero");
  }
  jlist *items = NULL;
  if (x.kind == JV_LIST && x.u.l->gen) return eng_jinja__fail(r, off, "'generator' object is not subscriptable");
  if (x.kind == JV_STR || x.kind == JV_LIST) items = eng_jinja__iter(r, x, off);
  else if (x.kind == JV_UNDEF) return undefined_use(r, x, off);
  else return eng_jinja__fail(r, off, "'%s' object is not subscriptable", jv_type_name(x));
  if (!items) return jv_undef(NULL);
  int64_t n = (int64_t)items->n, lo, hi;
  for (int k = 0; k < 2; k++)
    if (parts[k].kind != JV_NONE && parts[k].kind != JV_UNDEF && parts[k].kind != JV_INT)
      return eng_jinja__fail(r, off, "slice indices must be integers or None");
  int has_lo = parts[0].kind == JV_INT, has_hi = parts[1].kind == JV_INT;
  if (step > 0) {
    lo = has_lo ? clamp_index(parts[0].u.i, n, 0) : 0;
    hi = has_hi ? clamp_index(parts[1].u.i, n, 0) : n;
  } else {
    lo = has_lo ? clamp_index(parts[0].u.i, n, 1) : n - 1;
    if (lo >= n) lo = n - 1;
    hi = has_hi ? clamp_index(parts[1].u.i, n, 1) : -1;
  }
  jlist *out = jv_mklist(r->a, 0);
  if (!out) return eng_jinja__oom(r);
  for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step)
    if (jlist_push(r->a, out, items->items[i])) return eng_jinja__oom(r);
  if (x.kind == JV_STR) {
    jbuf b = {0};
    for (size_t i = 0; i < out->n; i++) jbuf_put(&b, out->items[i].u.s->s, out->items[i].u.s->n);
    return eng_jinja__buf_str(r, &b);
  }
  out->tuple = x.u.l->tuple;
  jv v = {JV_LIST, {0}};
  v.u.l = out;
  return v;
}

// Evaluates n->v (positional) and n->w (keyword) arguments into arena arrays.
static int eval_args(jrender *r, jframe *f, const jnode *n, jv **args, jv **kw) {
  *args = jarena_alloc(r->a, (n->nv + 1) * sizeof **args);
  *kw = jarena_alloc(r->a, (n->nw + 1) * sizeof **kw);
  if (!*args || !*kw) return eng_jinja__oom(r), -1;
  for (size_t i = 0; i < n->nv; i++)
    if ((*args)[i] = eval(r, f, n->v[i]), r->failed) return -1;
  for (size_t i = 0; i < n->nw; i++)
    if ((*kw)[i] = eval(r, f, n->w[i]), r->failed) return -1;
  return 0;
}

static jv eval(jrender *r, jframe *f, const jnode *n) {
  if (r->failed) return jv_undef(NULL);
  switch (n->kind) {
    case JN_CONST: return n->k;
    case JN_NAME: return lookup(r, f, n->s);
    case JN_LIST: case JN_TUPLE: {
      jlist *l = jv_mklist(r->a, n->nv);
      if (!l) return eng_jinja__oom(r);
      for (size_t i = 0; i < n->nv; i++)
        if (l->items[i] = eval(r, f, n->v[i]), r->failed) return jv_undef(NULL);
      l->n = n->nv, l->tuple = n->kind == JN_TUPLE;
      jv v = {JV_LIST, {0}};
      v.u.l = l;
      return v;
    }
    case JN_DICT: {
      jdict *d = jv_mkdict(r->a);
      if (!d) return eng_jinja__oom(r);
      for (size_t i = 0; i < n->nv; i++) {
        jv k = eval(r, f, n->v[i]), v = eval(r, f, n->w[i]);
        if (r->failed) return jv_undef(NULL);
        if (k.kind == JV_LIST && !k.u.l->tuple) return eng_jinja__fail(r, n->v[i]->off, "unhashable type: 'list'");
        if (k.kind == JV_DICT) return eng_jinja__fail(r, n->v[i]->off, "unhashable type: 'dict'");
        if (jdict_set(r->a, d, k, v)) return eng_jinja__oom(r);
      }
      jv v = {JV_DICT, {0}};
      v.u.d = d;
      return v;
    }
    case JN_ATTR: {
      jv x = eval(r, f, n->a);
      if (r->failed) return x;
      return eng_jinja__getattr(r, x, n->s, n->off);
    }
    case JN_ITEM: {
      jv x = eval(r, f, n->a), k = eval(r, f, n->b);
      if (r->failed) return x;
      return eng_jinja__getitem(r, x, k, n->off);
    }
    case JN_SLICE: {
      jv x = eval(r, f, n->a), parts[3];
      for (int k = 0; k < 3; k++) parts[k] = n->v[k] ? eval(r, f, n->v[k]) : jv_none();
      if (r->failed) return jv_undef(NULL);
      return slice(r, x, parts, n->off);
    }
    case JN_CALL: {
      jv fn = eval(r, f, n->a), *args, *kw;
      if (r->failed || eval_args(r, f, n, &args, &kw)) return jv_undef(NULL);
      if (fn.kind == JV_FUNC && fn.u.fn->id == JB_MACRO)
        return eng_jinja__call_macro(r, fn.u.fn, args, n->nv, n->kn, kw, n->nw, n->off);
      return eng_jinja__call(r, fn, args, n->nv, n->kn, kw, n->nw, n->off);
    }
    case JN_FILTER: {
      if (n->unknown) return eng_jinja__fail(r, n->off, "filter '%s' is not supported", n->s);
      jv x = n->a ? eval(r, f, n->a) : r->block_input, *args, *kw;
      if (r->failed || eval_args(r, f, n, &args, &kw)) return jv_undef(NULL);
      return eng_jinja__filter(r, n->s, x, args, n->nv, n->kn, kw, n->nw, n->off);
    }
    case JN_TEST: {
      if (n->unknown) return eng_jinja__fail(r, n->off, "test '%s' is not supported", n->s);
      jv x = eval(r, f, n->a), *args, *kw;
      if (r->failed || eval_args(r, f, n, &args, &kw)) return jv_undef(NULL);
      int t = eng_jinja__test(r, n->s, x, args, n->nv, n->off);
      return t < 0 ? jv_undef(NULL) : jv_bool(n->op ? !t : t);
    }
    case JN_NEG: case JN_POS: {
      jv x = eval(r, f, n->a);
      if (r->failed) return x;
      if (x.kind == JV_INT) {
        if (n->kind == JN_NEG && x.u.i == INT64_MIN) return int_or_fail(r, 1, 0, n->off);
        return jv_int(n->kind == JN_NEG ? -x.u.i : x.u.i);
      }
      if (x.kind == JV_BOOL) return jv_int(n->kind == JN_NEG ? -x.u.b : x.u.b);
      if (x.kind == JV_FLOAT) return jv_float(n->kind == JN_NEG ? -x.u.f : x.u.f);
      if (x.kind == JV_UNDEF) return undefined_use(r, x, n->off);
      return eng_jinja__fail(r, n->off, "bad operand type for unary %c: '%s'", n->kind == JN_NEG ? '-' : '+',
                             jv_type_name(x));
    }
    case JN_NOT: {
      jv x = eval(r, f, n->a);
      return r->failed ? x : jv_bool(!jv_truthy(x));
    }
    case JN_AND: case JN_OR: {
      // Python's: the deciding operand itself, not a bool.
      jv x = eval(r, f, n->a);
      if (r->failed) return x;
      if (jv_truthy(x) == (n->kind == JN_OR)) return x;
      return eval(r, f, n->b);
    }
    case JN_BINOP: {
      jv a = eval(r, f, n->a), b = eval(r, f, n->b);
      if (r->failed) return a;
      if (n->op == JO_CONCAT) {
        jbuf o = {0};
        jv_to_str(&o, a), jv_to_str(&o, b);
        return eng_jinja__buf_str(r, &o);
      }
      return arith(r, n->op, a, b, n->off);
    }
    case JN_CMP: {
      jv a = eval(r, f, n->v[0]);
      for (size_t i = 1; i < n->nv && !r->failed; i++) {
        jv b = eval(r, f, n->v[i]);
        if (r->failed) break;
        int c = compare_op(r, n->ops[i - 1], a, b, n->v[i]->off);
        if (c < 0) break;
        if (!c) return jv_bool(0);
        a = b;
      }
      return r->failed ? jv_undef(NULL) : jv_bool(1);
    }
    case JN_COND: {
      jv c = eval(r, f, n->a);
      if (r->failed) return c;
      if (jv_truthy(c)) return eval(r, f, n->b);
      return n->c ? eval(r, f, n->c) : jv_undef("the conditional expression had no else");
    }
    default: return eng_jinja__fail(r, n->off, "internal: not an expression");
  }
}

// --- statements

static void render_body(jrender *r, jframe *f, const jnode *body, jbuf *out);

static int out_check(jrender *r, jbuf *out) {
  size_t max = r->opts && r->opts->max_output ? r->opts->max_output : (size_t)64 << 20;
  if (out->oom) return eng_jinja__oom(r), -1;
  if (out->n > max) {
    if (!r->failed) {
      r->failed = 1;
      err_set(r->e, ERR_RESOURCE_EXHAUSTED, "chat template: the rendered text passed %zu bytes", max);
    }
    return -1;
  }
  return 0;
}

static void loop_var(jrender *r, jframe *f, const jlist *items, size_t i) {
  jdict *d = jv_mkdict(r->a);
  if (!d) { eng_jinja__oom(r); return; }
  int64_t n = (int64_t)items->n, k = (int64_t)i;
  struct { const char *name; jv v; } fields[] = {
      {"index0", jv_int(k)},          {"index", jv_int(k + 1)},          {"revindex", jv_int(n - k)},
      {"revindex0", jv_int(n - k - 1)}, {"first", jv_bool(k == 0)},       {"last", jv_bool(k == n - 1)},
      {"length", jv_int(n)},
      {"previtem", k > 0 ? items->items[k - 1] : jv_undef("there is no previous item")},
      {"nextitem", k + 1 < n ? items->items[k + 1] : jv_undef("there is no next item")},
      {"depth", jv_int(1)},           {"depth0", jv_int(0)},
  };
  for (size_t j = 0; j < sizeof fields / sizeof *fields; j++)
    if (jdict_set(r->a, d, eng_jinja__strv(r, fields[j].name, strlen(fields[j].name)), fields[j].v)) {
      eng_jinja__oom(r);
      return;
    }
  jv v = {JV_DICT, {0}};
  v.u.d = d;
  assign(r, f, "loop", v);
}

static int bind_targets(jrender *r, jframe *f, const jnode *n, jv item) {
  if (n->nkn == 1) return assign(r, f, n->kn[0], item);
  if (item.kind != JV_LIST && item.kind != JV_STR && item.kind != JV_DICT) {
    eng_jinja__fail(r, n->off, "cannot unpack non-iterable %s object", jv_type_name(item));
    return -1;
  }
  jlist *parts = eng_jinja__iter(r, item, n->off);
  if (!parts) return -1;
  if (parts->n != n->nkn) {
    eng_jinja__fail(r, n->off, "cannot unpack %zu values into %zu names", parts->n, n->nkn);
    return -1;
  }
  for (size_t i = 0; i < n->nkn; i++)
    if (assign(r, f, n->kn[i], parts->items[i])) return -1;
  return 0;
}

static void render_for(jrender *r, jframe *f, const jnode *n, jbuf *out) {
  jv seq = eval(r, f, n->a);
  if (r->failed) return;
  jlist *all = eng_jinja__iter(r, seq, n->a->off), *items = all;
  if (!all) return;
  if (n->b) {  // {% for x in xs if cond %}: the loop sees only the items that pass
    items = jv_mklist(r->a, 0);
    if (!items) { eng_jinja__oom(r); return; }
    for (size_t i = 0; i < all->n; i++) {
      jframe *g = new_frame(r, f);
      if (!g || bind_targets(r, g, n, all->items[i])) return;
      jv c = eval(r, g, n->b);
      if (r->failed) return;
      if (jv_truthy(c) && jlist_push(r->a, items, all->items[i])) { eng_jinja__oom(r); return; }
    }
  }
  for (size_t i = 0; i < items->n && !r->failed; i++) {
    jframe *g = new_frame(r, f);
    if (!g || bind_targets(r, g, n, items->items[i])) return;
    loop_var(r, g, items, i);
    render_body(r, g, n->c, out);
    if (r->loop_ctl == 1) { r->loop_ctl = 0; break; }
    r->loop_ctl = 0;
  }
  if (!items->n && n->d) render_body(r, f, n->d, out);
}

static void render_node(jrender *r, jframe *f, const jnode *n, jbuf *out) {
  switch (n->kind) {
    case JN_TEXT: jbuf_put(out, n->s, n->sl); break;
    case JN_OUTPUT: {
      jv v = eval(r, f, n->a);
      if (!r->failed) jv_to_str(out, v);
      break;
    }
    case JN_IF: {
      jv c = eval(r, f, n->a);
      if (r->failed) return;
      if (jv_truthy(c)) render_body(r, f, n->b, out);
      else if (n->c) n->c->kind == JN_IF ? render_node(r, f, n->c, out) : render_body(r, f, n->c, out);
      break;
    }
    case JN_FOR: render_for(r, f, n, out); break;
    case JN_SET: {
      jv v = eval(r, f, n->a);
      if (!r->failed) assign(r, f, n->s, v);
      break;
    }
    case JN_SET_ATTR: {
      jv ns = lookup(r, f, n->s), v = eval(r, f, n->a);
      if (r->failed) return;
      if (ns.kind != JV_NS) {
        eng_jinja__fail(r, n->off, "cannot assign attribute on non-namespace object");
        return;
      }
      if (n->s2[0] == '_') {
        eng_jinja__fail(r, n->off, "namespace attributes cannot start with '_'");
        return;
      }
      if (jdict_set(r->a, ns.u.d, eng_jinja__strv(r, n->s2, strlen(n->s2)), v)) eng_jinja__oom(r);
      break;
    }
    case JN_SET_BLOCK: {
      jbuf b = {0};
      render_body(r, f, n->b, &b);
      jv v = eng_jinja__buf_str(r, &b);
      if (!r->failed) assign(r, f, n->s, v);
      break;
    }
    case JN_MACRO: {
      jfunc *fn = jarena_alloc(r->a, sizeof *fn);
      if (!fn) { eng_jinja__oom(r); return; }
      fn->id = JB_MACRO, fn->macro = n, fn->name = n->s;
      jv v = {JV_FUNC, {0}};
      v.u.fn = fn;
      assign(r, f, n->s, v);
      break;
    }
    case JN_FILTER_BLOCK: {
      jbuf b = {0};
      render_body(r, f, n->b, &b);
      jv saved = r->block_input;
      r->block_input = eng_jinja__buf_str(r, &b);
      jv v = r->failed ? jv_undef(NULL) : eval(r, f, n->a);
      r->block_input = saved;
      if (!r->failed) jv_to_str(out, v);
      break;
    }
    case JN_BREAK: r->loop_ctl = 1; break;
    case JN_CONTINUE: r->loop_ctl = 2; break;
    case JN_BODY: render_body(r, f, n->a ? n->a : n, out); break;
    default: eng_jinja__fail(r, n->off, "internal: not a statement");
  }
}

static void render_body(jrender *r, jframe *f, const jnode *body, jbuf *out) {
  for (size_t i = 0; i < body->nv && !r->failed && !r->loop_ctl; i++) {
    render_node(r, f, body->v[i], out);
    if (out_check(r, out)) return;
  }
}

static jv eng_jinja__call_macro(jrender *r, const jfunc *fn, const jv *args, size_t nargs, const char **kn, const jv *kw,
                         size_t nkw, size_t off) {
  const jnode *m = fn->macro;
  if (r->depth >= 64) return eng_jinja__fail(r, off, "macro calls nested too deep");
  if (nargs > m->nkn) return eng_jinja__fail(r, off, "macro '%s' takes not more than %zu argument(s)", m->s, m->nkn);
  jframe *g = new_frame(r, r->root);
  if (!g) return jv_undef(NULL);
  for (size_t i = 0; i < m->nkn; i++) {
    jv v = jv_undef(NULL);
    int set = 0;
    if (i < nargs) v = args[i], set = 1;
    for (size_t k = 0; k < nkw; k++)
      if (!strcmp(kn[k], m->kn[i])) {
        if (set) return eng_jinja__fail(r, off, "macro '%s' got multiple values for argument '%s'", m->s, m->kn[i]);
        v = kw[k], set = 1;
      }
    if (!set && m->w[i]) v = eval(r, g, m->w[i]);
    if (!set && !m->w[i]) {
      char *why = jarena_alloc(r->a, 64 + strlen(m->kn[i]));
      if (why) sprintf(why, "parameter '%s' was not provided", m->kn[i]);
      v = jv_undef(why);
    }
    if (r->failed || assign(r, g, m->kn[i], v)) return jv_undef(NULL);
  }
  for (size_t k = 0; k < nkw; k++) {
    int found = 0;
    for (size_t i = 0; i < m->nkn; i++) found |= !strcmp(kn[k], m->kn[i]);
    if (!found) return eng_jinja__fail(r, off, "macro '%s' takes no keyword argument '%s'", m->s, kn[k]);
  }
  jbuf b = {0};
  r->depth++;
  render_body(r, g, m->b, &b);
  r->depth--;
  if (r->failed) { jbuf_free(&b); return jv_undef(NULL); }
  return eng_jinja__buf_str(r, &b);
}

// --- cJSON in

static jv from_json(jrender *r, const cJSON *j, int depth) {
  if (depth > 128) return eng_jinja__fail(r, 0, "input nested too deep");
  if (cJSON_IsNull(j)) return jv_none();
  if (cJSON_IsBool(j)) return jv_bool(cJSON_IsTrue(j));
  if (cJSON_IsNumber(j)) {
    double d = j->valuedouble;
    if (d == floor(d) && fabs(d) < 9007199254740992.0) return jv_int((int64_t)d);
    return jv_float(d);
  }
  if (cJSON_IsString(j)) return eng_jinja__strv(r, j->valuestring, strlen(j->valuestring));
  if (cJSON_IsArray(j)) {
    jlist *l = jv_mklist(r->a, (size_t)cJSON_GetArraySize(j));
    if (!l) return eng_jinja__oom(r);
    for (const cJSON *c = j->child; c; c = c->next) {
      jv v = from_json(r, c, depth + 1);
      if (r->failed || jlist_push(r->a, l, v)) return eng_jinja__oom(r);
    }
    jv v = {JV_LIST, {0}};
    v.u.l = l;
    return v;
  }
  if (cJSON_IsObject(j)) {
    jdict *d = jv_mkdict(r->a);
    if (!d) return eng_jinja__oom(r);
    for (const cJSON *c = j->child; c; c = c->next) {
      jv k = eng_jinja__strv(r, c->string ? c->string : "", c->string ? strlen(c->string) : 0);
      jv v = from_json(r, c, depth + 1);
      if (r->failed || jdict_set(r->a, d, k, v)) return eng_jinja__oom(r);
    }
    jv v = {JV_DICT, {0}};
    v.u.d = d;
    return v;
  }
  return eng_jinja__fail(r, 0, "input holds a value JSON does not");
}

// --- API

eng_jinja *eng_jinja_create(const char *text, size_t len, err *e) {
  eng_jinja *t = calloc(1, sizeof *t);
  if (!t) { err_set(e, ERR_RESOURCE_EXHAUSTED, "chat template: out of memory"); return NULL; }
  // Jinja reads \r\n and \r as \n and drops one trailing newline (keep_trailing_newline=False).
  char *src = jarena_alloc(&t->a, len + 1);
  if (!src) { free(t); err_set(e, ERR_RESOURCE_EXHAUSTED, "chat template: out of memory"); return NULL; }
  size_t n = 0;
  for (size_t i = 0; i < len; i++) {
    if (text[i] == '\r') {
      src[n++] = '\n';
      if (i + 1 < len && text[i + 1] == '\n') i++;
    } else {
      src[n++] = text[i];
    }
  }
  if (n && src[n - 1] == '\n') n--;
  src[n] = '\0';
  if (memchr(src, '\0', n)) {
    jarena_free(&t->a);
    free(t);
    err_set(e, ERR_INVALID_ARGUMENT, "chat template: a NUL byte in the template");
    return NULL;
  }
  t->src.text = src, t->src.len = n;
  jtok *toks;
  size_t ntoks;
  if (eng_jinja__lex(&t->a, &t->src, &toks, &ntoks, e) || eng_jinja__parse(&t->a, &t->src, toks, ntoks, &t->root, e)) {
    eng_jinja_destroy(t);
    return NULL;
  }
  return t;
}

void eng_jinja_destroy(eng_jinja *t) {
  if (!t) return;
  jarena_free(&t->a);
  free(t);
}

int eng_jinja_render(const eng_jinja *t, const cJSON *vars, const eng_jinja_opts *opts, char **out, size_t *out_len,
                     err *e) {
  *out = NULL;
  if (out_len) *out_len = 0;
  if (vars && !cJSON_IsObject(vars)) return err_set(e, ERR_INVALID_ARGUMENT, "chat template: variables must be a JSON object");
  jarena a = {NULL, 0, opts && opts->max_memory ? opts->max_memory : (size_t)256 << 20};
  err local;
  jrender r = {&a, &t->src, opts, e ? e : &local, 0, 0, 0, NULL, {JV_UNDEF, {0}}};
  jbuf b = {0};
  r.root = new_frame(&r, NULL);
  if (r.root && vars)
    for (const cJSON *c = vars->child; c && !r.failed; c = c->next) {
      jv v = from_json(&r, c, 0);
      if (!r.failed) assign(&r, r.root, c->string ? c->string : "", v);
    }
  if (!r.failed) render_body(&r, r.root, t->root, &b);
  jarena_free(&a);
  if (r.failed) {
    jbuf_free(&b);
    return r.e->code ? (int)r.e->code : ERR_INTERNAL;
  }
  if (b.oom) {
    jbuf_free(&b);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "chat template: out of memory");
  }
  if (!b.p) {
    b.p = malloc(1);
    if (!b.p) return err_set(e, ERR_RESOURCE_EXHAUSTED, "chat template: out of memory");
    b.p[0] = '\0';
  }
  *out = b.p;
  if (out_len) *out_len = b.n;
  return 0;
}
