// engine/llm/jinja_parse.c: tokens to a tree, by Jinja2's grammar and
// precedence (condition < or < and < not < comparison < + - < ~ < * / // % <
// ** < unary minus < filters, tests and postfix). Statements: if/elif/else,
// for (target tuples, an `if` filter, else), set (a name, a namespace's
// attribute, or a block), macro, break/continue, and transformers'
// generation block. Anything else is refused here, naming it and where,
// so an unsupported template fails at load rather than mid-render.
#include <stdio.h>
#include <string.h>

#include "engine/llm/jinja_internal.h"

typedef struct parser {
  jarena *a;
  const jsrc *src;
  const jtok *t;
  size_t n, i;
  err *e;
  int failed;
  int loop_depth, macro_depth;
  int depth;  // nesting of expressions and blocks: bounded, so a hostile template cannot exhaust the stack
} parser;

#define MAX_DEPTH 200

static jnode *fail(parser *P, size_t off, err_code code, const char *fmt, const char *arg) {
  if (P->failed) return NULL;
  P->failed = 1;
  char what[256];
  snprintf(what, sizeof what, fmt, arg);
  int l, c;
  eng_jinja__where(P->src, off, &l, &c);
  err_set(P->e, code, "chat template: %s (line %d, column %d)", what, l, c);
  return NULL;
}

static const jtok *cur(parser *P) { return &P->t[P->i]; }
static const jtok *peek(parser *P, size_t k) { return &P->t[P->i + k < P->n ? P->i + k : P->n - 1]; }
static int is_op(const jtok *t, const char *op) {
  return t->kind == JT_OP && t->n == strlen(op) && !memcmp(t->s, op, t->n);
}
static int is_name(const jtok *t, const char *nm) {
  return t->kind == JT_NAME && t->n == strlen(nm) && !memcmp(t->s, nm, t->n);
}
static int skip_op(parser *P, const char *op) {
  if (!is_op(cur(P), op)) return 0;
  P->i++;
  return 1;
}
static int skip_name(parser *P, const char *nm) {
  if (!is_name(cur(P), nm)) return 0;
  P->i++;
  return 1;
}

static const char *tok_desc(const jtok *t, char *buf, size_t cap) {
  switch (t->kind) {
    case JT_EOF: return "end of template";
    case JT_BLOCK_END: return "'%}'";
    case JT_VAR_END: return "'}}'";
    case JT_TEXT: return "text";
    case JT_STRING: return "a string";
    case JT_INT: case JT_FLOAT: return "a number";
    default: snprintf(buf, cap, "'%.*s'", (int)(t->n < 40 ? t->n : 40), t->s ? t->s : ""); return buf;
  }
}

static int expect_op(parser *P, const char *op) {
  if (skip_op(P, op)) return 1;
  char b[64], msg[128];
  snprintf(msg, sizeof msg, "expected '%s', got %%s", op);
  fail(P, cur(P)->off, ERR_INVALID_ARGUMENT, msg, tok_desc(cur(P), b, sizeof b));
  return 0;
}

static jnode *oom(parser *P) {
  if (!P->failed) err_set(P->e, ERR_RESOURCE_EXHAUSTED, "chat template: out of memory");
  P->failed = 1;
  return NULL;
}

// An expression's tree is evaluated recursively: its height is bounded here, where it grows (chains
// like x|f|f|f... or a+a+a+... nest to the left without nesting the parser).
#define MAX_HEIGHT 400
static int height(const jnode *n) { return n ? n->height : 0; }
static jnode *wrap(parser *P, jnode *n) {
  if (!n) return NULL;
  int h = height(n->a);
  if (height(n->b) > h) h = height(n->b);
  if (height(n->c) > h) h = height(n->c);
  for (size_t i = 0; i < n->nv; i++)
    if (height(n->v[i]) > h) h = height(n->v[i]);
  for (size_t i = 0; i < n->nw; i++)
    if (height(n->w[i]) > h) h = height(n->w[i]);
  n->height = h + 1;
  if (n->height > MAX_HEIGHT) return fail(P, n->off, ERR_INVALID_ARGUMENT, "%s", "expression nested too deep");
  return n;
}

static jnode *mk(parser *P, jnode_kind k, size_t off) {
  jnode *n = jarena_alloc(P->a, sizeof *n);
  if (!n) return oom(P);
  n->kind = k, n->off = off;
  return n;
}

// A growable array of node pointers (or names) in the arena.
typedef struct vec { void **p; size_t n, cap; } vec;
static int vpush(parser *P, vec *v, void *x) {
  if (v->n == v->cap) {
    size_t cap = v->cap ? v->cap * 2 : 4;
    void **p = jarena_alloc(P->a, cap * sizeof *p);
    if (!p) {
      oom(P);
      return 0;
    }
    if (v->n) memcpy(p, v->p, v->n * sizeof *p);
    v->p = p, v->cap = cap;
  }
  v->p[v->n++] = x;
  return 1;
}

static const char *name_dup(parser *P, const jtok *t) { return jarena_strdup(P->a, t->s, t->n); }

// --- expressions

static jnode *expression(parser *P);
static jnode *or_expr(parser *P);
static jnode *unary(parser *P, int with_filter);
static jnode *primary(parser *P);
static jnode *postfix(parser *P, jnode *n);

// Call arguments after '(' up to ')': positional into v, keywords into kn/w.
static int call_args(parser *P, jnode *n) {
  vec pos = {0}, kv = {0}, kw = {0};
  while (!P->failed && !is_op(cur(P), ")")) {
    if (pos.n + kv.n && !expect_op(P, ",")) return 0;
    if (is_op(cur(P), ")")) break;  // a trailing comma
    if (is_op(cur(P), "*") || is_op(cur(P), "**")) {
      fail(P, cur(P)->off, ERR_UNIMPLEMENTED, "%s", "*args and **kwargs in calls are not supported");
      return 0;
    }
    if (cur(P)->kind == JT_NAME && is_op(peek(P, 1), "=")) {
      const char *k = name_dup(P, cur(P));
      P->i += 2;
      jnode *x = expression(P);
      if (!x || !vpush(P, &kw, (void *)k) || !vpush(P, &kv, x)) return 0;
    } else {
      if (kv.n) {
        fail(P, cur(P)->off, ERR_INVALID_ARGUMENT, "%s", "positional argument after a keyword argument");
        return 0;
      }
      jnode *x = expression(P);
      if (!x || !vpush(P, &pos, x)) return 0;
    }
  }
  if (!expect_op(P, ")")) return 0;
  n->v = (jnode **)pos.p, n->nv = pos.n;
  n->w = (jnode **)kv.p, n->nw = kv.n;
  n->kn = (const char **)kw.p, n->nkn = kw.n;
  return !P->failed;
}

static jnode *subscript(parser *P, jnode *obj, size_t off) {
  jnode *parts[3] = {NULL, NULL, NULL};
  int slice = 0;
  for (int k = 0; k < 3; k++) {
    if (!is_op(cur(P), ":") && !is_op(cur(P), "]")) {
      parts[k] = expression(P);
      if (!parts[k]) return NULL;
    }
    if (k < 2 && skip_op(P, ":")) { slice = 1; continue; }
    break;
  }
  if (is_op(cur(P), ",")) return fail(P, cur(P)->off, ERR_UNIMPLEMENTED, "%s", "tuple subscripts are not supported");
  if (!expect_op(P, "]")) return NULL;
  jnode *n = mk(P, slice ? JN_SLICE : JN_ITEM, off);
  if (!n) return NULL;
  n->a = obj;
  if (slice) {
    n->v = jarena_alloc(P->a, 3 * sizeof *n->v);
    if (!n->v) return oom(P);
    memcpy(n->v, parts, sizeof parts);
    n->nv = 3;
  } else {
    n->b = parts[0];
    if (!n->b) return fail(P, off, ERR_INVALID_ARGUMENT, "%s", "empty subscript");
  }
  return wrap(P, n);
}

static jnode *postfix(parser *P, jnode *n) {
  while (n && !P->failed) {
    const jtok *t = cur(P);
    if (is_op(t, ".")) {
      P->i++;
      const jtok *nm = cur(P);
      if (nm->kind == JT_NAME) {
        jnode *x = mk(P, JN_ATTR, nm->off);
        if (!x) return NULL;
        x->a = n, x->s = name_dup(P, nm), x->sl = nm->n;
        P->i++;
        n = wrap(P, x);
      } else if (nm->kind == JT_INT) {
        jnode *x = mk(P, JN_ITEM, nm->off), *k = mk(P, JN_CONST, nm->off);
        if (!x || !k) return NULL;
        k->k = jv_int(nm->i);
        x->a = n, x->b = k;
        P->i++;
        n = wrap(P, x);
      } else {
        char b[64];
        return fail(P, nm->off, ERR_INVALID_ARGUMENT, "expected an attribute name after '.', got %s",
                    tok_desc(nm, b, sizeof b));
      }
    } else if (is_op(t, "[")) {
      P->i++;
      n = subscript(P, n, t->off);
    } else if (is_op(t, "(")) {
      P->i++;
      jnode *x = mk(P, JN_CALL, t->off);
      if (!x) return NULL;
      x->a = n;
      if (!call_args(P, x)) return NULL;
      n = wrap(P, x);
    } else {
      break;
    }
  }
  return P->failed ? NULL : n;
}

static jnode *filter_expr(parser *P, jnode *n) {
  while (n && !P->failed) {
    const jtok *t = cur(P);
    if (is_op(t, "|")) {
      P->i++;
      const jtok *nm = cur(P);
      if (nm->kind != JT_NAME) return fail(P, nm->off, ERR_INVALID_ARGUMENT, "%s", "expected a filter name after '|'");
      jnode *x = mk(P, JN_FILTER, nm->off);
      if (!x) return NULL;
      x->a = n, x->s = name_dup(P, nm), x->sl = nm->n;
      P->i++;
      x->unknown = !eng_jinja__known_filter(x->s);  // an error at load unless in a branch (check_unknown)
      if (skip_op(P, "(") && !call_args(P, x)) return NULL;
      n = wrap(P, x);
    } else if (is_name(t, "is")) {
      P->i++;
      int neg = skip_name(P, "not");
      const jtok *nm = cur(P);
      if (nm->kind != JT_NAME) return fail(P, nm->off, ERR_INVALID_ARGUMENT, "%s", "expected a test name after 'is'");
      jnode *x = mk(P, JN_TEST, nm->off);
      if (!x) return NULL;
      x->a = n, x->op = neg, x->s = name_dup(P, nm), x->sl = nm->n;
      P->i++;
      x->unknown = !eng_jinja__known_test(x->s);
      const jtok *nx = cur(P);
      if (skip_op(P, "(")) {
        if (!call_args(P, x)) return NULL;
      } else if ((nx->kind == JT_NAME || nx->kind == JT_STRING || nx->kind == JT_INT || nx->kind == JT_FLOAT ||
                  is_op(nx, "[") || is_op(nx, "{")) &&
                 !is_name(nx, "else") && !is_name(nx, "or") && !is_name(nx, "and")) {
        jnode *arg = postfix(P, primary(P));
        if (!arg) return NULL;
        x->v = jarena_alloc(P->a, sizeof *x->v);
        if (!x->v) return oom(P);
        x->v[0] = arg, x->nv = 1;
      }
      n = wrap(P, x);
    } else if (is_op(t, "(")) {
      n = postfix(P, n);
    } else {
      break;
    }
  }
  return P->failed ? NULL : n;
}

static jnode *primary(parser *P) {
  const jtok *t = cur(P);
  char b[64];
  if (P->failed) return NULL;
  if (t->kind == JT_NAME) {
    P->i++;
    jnode *n = mk(P, JN_CONST, t->off);
    if (!n) return NULL;
    if (is_name(t, "true") || is_name(t, "True")) n->k = jv_bool(1);
    else if (is_name(t, "false") || is_name(t, "False")) n->k = jv_bool(0);
    else if (is_name(t, "none") || is_name(t, "None")) n->k = jv_none();
    else n->kind = JN_NAME, n->s = name_dup(P, t), n->sl = t->n;
    return wrap(P, n);
  }
  if (t->kind == JT_STRING) {
    // Adjacent string literals join, as in Python.
    jbuf s = {0};
    size_t off = t->off;
    while (cur(P)->kind == JT_STRING) jbuf_put(&s, cur(P)->s, cur(P)->n), P->i++;
    jnode *n = mk(P, JN_CONST, off);
    jstr *js = n ? jv_mkstr(P->a, s.p ? s.p : "", s.n) : NULL;
    int oom = s.oom;
    jbuf_free(&s);
    if (!n) return NULL;
    if (!js || oom) return fail(P, off, ERR_RESOURCE_EXHAUSTED, "%s", "out of memory");
    n->k = jv_str(js);
    return wrap(P, n);
  }
  if (t->kind == JT_INT || t->kind == JT_FLOAT) {
    P->i++;
    jnode *n = mk(P, JN_CONST, t->off);
    if (n) n->k = t->kind == JT_INT ? jv_int(t->i) : jv_float(t->f);
    return wrap(P, n);
  }
  if (is_op(t, "(")) {
    P->i++;
    if (skip_op(P, ")")) return mk(P, JN_TUPLE, t->off);
    jnode *x = expression(P);
    if (!x) return NULL;
    if (is_op(cur(P), ",")) {
      vec items = {0};
      vpush(P, &items, x);
      while (skip_op(P, ",") && !is_op(cur(P), ")")) {
        jnode *y = expression(P);
        if (!y || !vpush(P, &items, y)) return NULL;
      }
      jnode *tu = mk(P, JN_TUPLE, t->off);
      if (!tu) return NULL;
      tu->v = (jnode **)items.p, tu->nv = items.n;
      x = tu;
    }
    return expect_op(P, ")") ? x : NULL;
  }
  if (is_op(t, "[")) {
    P->i++;
    vec items = {0};
    while (!P->failed && !is_op(cur(P), "]")) {
      if (items.n && !expect_op(P, ",")) return NULL;
      if (is_op(cur(P), "]")) break;
      jnode *y = expression(P);
      if (!y || !vpush(P, &items, y)) return NULL;
    }
    if (!expect_op(P, "]")) return NULL;
    jnode *n = mk(P, JN_LIST, t->off);
    if (n) n->v = (jnode **)items.p, n->nv = items.n;
    return wrap(P, n);
  }
  if (is_op(t, "{")) {
    P->i++;
    vec keys = {0}, vals = {0};
    while (!P->failed && !is_op(cur(P), "}")) {
      if (keys.n && !expect_op(P, ",")) return NULL;
      if (is_op(cur(P), "}")) break;
      jnode *k = expression(P);
      if (!k || !expect_op(P, ":")) return NULL;
      jnode *v = expression(P);
      if (!v || !vpush(P, &keys, k) || !vpush(P, &vals, v)) return NULL;
    }
    if (!expect_op(P, "}")) return NULL;
    jnode *n = mk(P, JN_DICT, t->off);
    if (n) n->v = (jnode **)keys.p, n->nv = keys.n, n->w = (jnode **)vals.p, n->nw = vals.n;
    return wrap(P, n);
  }
  return fail(P, t->off, ERR_INVALID_ARGUMENT, "unexpected %s in an expression", tok_desc(t, b, sizeof b));
}

static jnode *unary(parser *P, int with_filter) {
  const jtok *t = cur(P);
  jnode *n;
  if (is_op(t, "-") || is_op(t, "+")) {
    P->i++;
    if (++P->depth > MAX_DEPTH) return fail(P, t->off, ERR_INVALID_ARGUMENT, "%s", "expression nested too deep");
    n = mk(P, is_op(t, "-") ? JN_NEG : JN_POS, t->off);
    if (!n || !(n->a = unary(P, 0))) return NULL;
    P->depth--;
  } else {
    n = primary(P);
  }
  n = postfix(P, n);
  return with_filter ? filter_expr(P, n) : n;
}

static jnode *binop(parser *P, jop op, jnode *l, jnode *r, size_t off) {
  if (!l || !r) return NULL;
  jnode *n = mk(P, JN_BINOP, off);
  if (n) n->op = (int)op, n->a = l, n->b = r;
  return wrap(P, n);
}

static jnode *pow_expr(parser *P) {
  jnode *l = unary(P, 1);
  while (l && is_op(cur(P), "**")) {
    size_t off = cur(P)->off;
    P->i++;
    l = binop(P, JO_POW, l, unary(P, 1), off);
  }
  return l;
}

static jnode *math2(parser *P) {
  jnode *l = pow_expr(P);
  for (;;) {
    const jtok *t = cur(P);
    jop op;
    if (is_op(t, "*")) op = JO_MUL;
    else if (is_op(t, "/")) op = JO_DIV;
    else if (is_op(t, "//")) op = JO_FLOORDIV;
    else if (is_op(t, "%")) op = JO_MOD;
    else return l;
    if (!l) return NULL;
    P->i++;
    l = binop(P, op, l, pow_expr(P), t->off);
  }
}

static jnode *concat(parser *P) {
  jnode *l = math2(P);
  while (l && is_op(cur(P), "~")) {
    size_t off = cur(P)->off;
    P->i++;
    l = binop(P, JO_CONCAT, l, math2(P), off);
  }
  return l;
}

static jnode *math1(parser *P) {
  jnode *l = concat(P);
  for (;;) {
    const jtok *t = cur(P);
    if (!l || !(is_op(t, "+") || is_op(t, "-"))) return l;
    P->i++;
    l = binop(P, is_op(t, "+") ? JO_ADD : JO_SUB, l, concat(P), t->off);
  }
}

static jnode *compare(parser *P) {
  jnode *first = math1(P);
  if (!first) return NULL;
  vec items = {0}, ops = {0};
  size_t off = cur(P)->off;
  for (;;) {
    const jtok *t = cur(P);
    jop op;
    if (is_op(t, "==")) op = JO_EQ;
    else if (is_op(t, "!=")) op = JO_NE;
    else if (is_op(t, "<")) op = JO_LT;
    else if (is_op(t, "<=")) op = JO_LE;
    else if (is_op(t, ">")) op = JO_GT;
    else if (is_op(t, ">=")) op = JO_GE;
    else if (is_name(t, "in")) op = JO_IN;
    else if (is_name(t, "not") && is_name(peek(P, 1), "in")) op = JO_NOTIN, P->i++;
    else break;
    P->i++;
    jnode *r = math1(P);
    if (!r) return NULL;
    if (!items.n) vpush(P, &items, first);
    if (!vpush(P, &items, r) || !vpush(P, &ops, (void *)(intptr_t)op)) return NULL;
  }
  if (!items.n) return first;
  jnode *n = mk(P, JN_CMP, off);
  if (!n) return NULL;
  n->v = (jnode **)items.p, n->nv = items.n;
  n->ops = jarena_alloc(P->a, ops.n * sizeof *n->ops);
  if (!n->ops) return oom(P);
  for (size_t k = 0; k < ops.n; k++) n->ops[k] = (int)(intptr_t)ops.p[k];
  return wrap(P, n);
}

static jnode *not_expr(parser *P) {
  if (is_name(cur(P), "not")) {
    if (++P->depth > MAX_DEPTH) return fail(P, cur(P)->off, ERR_INVALID_ARGUMENT, "%s", "expression nested too deep");
    jnode *n = mk(P, JN_NOT, cur(P)->off);
    P->i++;
    if (!n || !(n->a = not_expr(P))) return NULL;
    P->depth--;
    return wrap(P, n);
  }
  return compare(P);
}

static jnode *and_expr(parser *P) {
  jnode *l = not_expr(P);
  while (l && is_name(cur(P), "and")) {
    jnode *n = mk(P, JN_AND, cur(P)->off);
    P->i++;
    if (!n || !(n->b = not_expr(P))) return NULL;
    n->a = l, l = wrap(P, n);
  }
  return l;
}

static jnode *or_expr(parser *P) {
  jnode *l = and_expr(P);
  while (l && is_name(cur(P), "or")) {
    jnode *n = mk(P, JN_OR, cur(P)->off);
    P->i++;
    if (!n || !(n->b = and_expr(P))) return NULL;
    n->a = l, l = wrap(P, n);
  }
  return l;
}

static jnode *expression_(parser *P);
static jnode *expression(parser *P) {
  if (++P->depth > MAX_DEPTH) {
    P->depth--;
    return fail(P, cur(P)->off, ERR_INVALID_ARGUMENT, "%s", "expression nested too deep");
  }
  jnode *n = expression_(P);
  P->depth--;
  return wrap(P, n);
}

static jnode *expression_(parser *P) {
  jnode *l = or_expr(P);
  while (l && is_name(cur(P), "if")) {
    jnode *n = mk(P, JN_COND, cur(P)->off);
    P->i++;
    if (!n || !(n->a = or_expr(P))) return NULL;  // the condition
    n->b = l;
    if (skip_name(P, "else") && !(n->c = expression(P))) return NULL;
    l = wrap(P, n);
  }
  return l;
}

// --- statements

static int body(parser *P, const char *const *stops, jnode **out, const char **stopped);
static int body_(parser *P, const char *const *stops, jnode **out, const char **stopped);

static int block_end(parser *P) {
  if (cur(P)->kind == JT_BLOCK_END) { P->i++; return 1; }
  char b[64];
  fail(P, cur(P)->off, ERR_INVALID_ARGUMENT, "expected '%%}', got %s", tok_desc(cur(P), b, sizeof b));
  return 0;
}

static jnode *stmt_if(parser *P, size_t off) {
  jnode *n = mk(P, JN_IF, off);
  if (!n || !(n->a = expression(P)) || !block_end(P)) return NULL;
  static const char *const stops[] = {"elif", "else", "endif", NULL};
  const char *st;
  if (body(P, stops, &n->b, &st)) return NULL;
  if (!strcmp(st, "elif")) {
    jnode *e = stmt_if(P, cur(P)->off);
    if (!e) return NULL;
    n->c = e;
    return n;
  }
  if (!strcmp(st, "else")) {
    static const char *const end[] = {"endif", NULL};
    if (!block_end(P) || body(P, end, &n->c, &st)) return NULL;
  }
  return block_end(P) ? n : NULL;
}

static jnode *stmt_for(parser *P, size_t off) {
  jnode *n = mk(P, JN_FOR, off);
  if (!n) return NULL;
  vec names = {0};
  int paren = skip_op(P, "(");
  do {
    if (cur(P)->kind != JT_NAME) return fail(P, cur(P)->off, ERR_UNIMPLEMENTED, "%s", "a for target must be names");
    if (!vpush(P, &names, (void *)name_dup(P, cur(P)))) return NULL;
    P->i++;
  } while (skip_op(P, ","));
  if (paren && !expect_op(P, ")")) return NULL;
  n->kn = (const char **)names.p, n->nkn = names.n;
  if (!skip_name(P, "in")) return fail(P, cur(P)->off, ERR_INVALID_ARGUMENT, "%s", "expected 'in' in a for");
  if (!(n->a = or_expr(P))) return NULL;
  if (is_op(cur(P), ",")) return fail(P, cur(P)->off, ERR_UNIMPLEMENTED, "%s", "iterating a bare tuple is not supported");
  if (skip_name(P, "if") && !(n->b = expression(P))) return NULL;
  if (is_name(cur(P), "recursive")) return fail(P, cur(P)->off, ERR_UNIMPLEMENTED, "%s", "recursive for loops are not supported");
  if (!block_end(P)) return NULL;
  static const char *const stops[] = {"else", "endfor", NULL};
  const char *st;
  P->loop_depth++;
  int rc = body(P, stops, &n->c, &st);
  P->loop_depth--;
  if (rc) return NULL;
  if (!strcmp(st, "else")) {
    static const char *const end[] = {"endfor", NULL};
    if (!block_end(P) || body(P, end, &n->d, &st)) return NULL;
  }
  return block_end(P) ? n : NULL;
}

static jnode *stmt_set(parser *P, size_t off) {
  const jtok *t = cur(P);
  if (t->kind != JT_NAME) return fail(P, t->off, ERR_INVALID_ARGUMENT, "%s", "expected a name after 'set'");
  jnode *n = mk(P, JN_SET, off);
  if (!n) return NULL;
  n->s = name_dup(P, t), n->sl = t->n;
  P->i++;
  if (skip_op(P, ".")) {
    if (cur(P)->kind != JT_NAME) return fail(P, cur(P)->off, ERR_INVALID_ARGUMENT, "%s", "expected an attribute name");
    n->kind = JN_SET_ATTR, n->s2 = name_dup(P, cur(P));
    P->i++;
  }
  if (is_op(cur(P), ",")) return fail(P, cur(P)->off, ERR_UNIMPLEMENTED, "%s", "set with several targets is not supported");
  if (skip_op(P, "=")) {
    if (!(n->a = expression(P))) return NULL;
    if (is_op(cur(P), ",")) {
      vec items = {0};
      vpush(P, &items, n->a);
      while (skip_op(P, ",")) {
        jnode *y = expression(P);
        if (!y || !vpush(P, &items, y)) return NULL;
      }
      jnode *tu = mk(P, JN_TUPLE, off);
      if (!tu) return NULL;
      tu->v = (jnode **)items.p, tu->nv = items.n;
      n->a = tu;
    }
    return block_end(P) ? n : NULL;
  }
  if (n->kind == JN_SET_ATTR) return fail(P, cur(P)->off, ERR_UNIMPLEMENTED, "%s", "a block set of an attribute is not supported");
  if (cur(P)->kind == JT_OP && is_op(cur(P), "|"))
    return fail(P, cur(P)->off, ERR_UNIMPLEMENTED, "%s", "filtered block set is not supported");
  if (!block_end(P)) return NULL;
  n->kind = JN_SET_BLOCK;
  static const char *const stops[] = {"endset", NULL};
  const char *st;
  if (body(P, stops, &n->b, &st)) return NULL;
  return block_end(P) ? n : NULL;
}

static jnode *stmt_macro(parser *P, size_t off) {
  const jtok *t = cur(P);
  if (t->kind != JT_NAME) return fail(P, t->off, ERR_INVALID_ARGUMENT, "%s", "expected a macro name");
  jnode *n = mk(P, JN_MACRO, off);
  if (!n) return NULL;
  n->s = name_dup(P, t), n->sl = t->n;
  P->i++;
  if (!expect_op(P, "(")) return NULL;
  vec params = {0}, defs = {0};
  while (!P->failed && !is_op(cur(P), ")")) {
    if (params.n && !expect_op(P, ",")) return NULL;
    if (cur(P)->kind != JT_NAME) return fail(P, cur(P)->off, ERR_INVALID_ARGUMENT, "%s", "expected a parameter name");
    if (!vpush(P, &params, (void *)name_dup(P, cur(P)))) return NULL;
    P->i++;
    jnode *d = NULL;
    if (skip_op(P, "=") && !(d = expression(P))) return NULL;
    if (!vpush(P, &defs, d)) return NULL;
  }
  if (!expect_op(P, ")") || !block_end(P)) return NULL;
  n->kn = (const char **)params.p, n->nkn = params.n;
  n->w = (jnode **)defs.p, n->nw = defs.n;
  static const char *const stops[] = {"endmacro", NULL};
  const char *st;
  int saved = P->loop_depth;
  P->loop_depth = 0, P->macro_depth++;
  int rc = body(P, stops, &n->b, &st);
  P->loop_depth = saved, P->macro_depth--;
  if (rc) return NULL;
  return block_end(P) ? n : NULL;
}

static const char *const UNSUPPORTED[] = {"include", "import", "from", "extends", "block", "call",
                                          "with", "do", "autoescape", "trans", NULL};

// Statements up to a block tag named in stops (left current, its name in
// *stopped) or the end of the template (only when stops is NULL).
static int body(parser *P, const char *const *stops, jnode **out, const char **stopped) {
  if (P->depth + 1 > MAX_DEPTH) {
    fail(P, cur(P)->off, ERR_INVALID_ARGUMENT, "%s", "blocks nested too deep");
    return -1;
  }
  P->depth++;
  int rc = body_(P, stops, out, stopped);
  P->depth--;
  return rc;
}

static int body_(parser *P, const char *const *stops, jnode **out, const char **stopped) {
  vec items = {0};
  size_t start = cur(P)->off;
  for (;;) {
    if (P->failed) return -1;
    const jtok *t = cur(P);
    if (t->kind == JT_EOF) {
      if (stops) {
        // Name the block the template left open: the last of the stops is its end tag.
        const char *const *last = stops;
        while (last[1]) last++;
        fail(P, t->off, ERR_INVALID_ARGUMENT, "missing {%% %s %%} before the end of the template", *last);
        return -1;
      }
      break;
    }
    if (t->kind == JT_TEXT) {
      jnode *n = mk(P, JN_TEXT, t->off);
      if (!n) return -1;
      n->s = t->s, n->sl = t->n;
      if (!vpush(P, &items, n)) return -1;
      P->i++;
      continue;
    }
    if (t->kind == JT_VAR_BEGIN) {
      P->i++;
      jnode *n = mk(P, JN_OUTPUT, t->off);
      if (!n || !(n->a = expression(P))) return -1;
      if (is_op(cur(P), ",")) {
        fail(P, cur(P)->off, ERR_UNIMPLEMENTED, "%s", "printing a bare tuple is not supported");
        return -1;
      }
      if (cur(P)->kind != JT_VAR_END) {
        char b[64];
        fail(P, cur(P)->off, ERR_INVALID_ARGUMENT, "expected '}}', got %s", tok_desc(cur(P), b, sizeof b));
        return -1;
      }
      P->i++;
      if (!vpush(P, &items, n)) return -1;
      continue;
    }
    // A block tag.
    const jtok *kw = peek(P, 1);
    if (kw->kind != JT_NAME) {
      fail(P, kw->off, ERR_INVALID_ARGUMENT, "%s", "expected a statement name after '{%'");
      return -1;
    }
    char name[32];
    snprintf(name, sizeof name, "%.*s", (int)(kw->n < 31 ? kw->n : 31), kw->s);
    if (stops)
      for (const char *const *s = stops; *s; s++)
        if (!strcmp(name, *s)) {
          P->i += 2;
          *stopped = *s;
          goto done;
        }
    P->i += 2;
    jnode *n = NULL;
    if (!strcmp(name, "if")) n = stmt_if(P, t->off);
    else if (!strcmp(name, "for")) n = stmt_for(P, t->off);
    else if (!strcmp(name, "set")) n = stmt_set(P, t->off);
    else if (!strcmp(name, "macro")) n = stmt_macro(P, t->off);
    else if (!strcmp(name, "break") || !strcmp(name, "continue")) {
      if (!P->loop_depth) {
        fail(P, kw->off, ERR_INVALID_ARGUMENT, "'%s' outside a for loop", name);
        return -1;
      }
      n = mk(P, name[0] == 'b' ? JN_BREAK : JN_CONTINUE, t->off);
      if (n && !block_end(P)) return -1;
    } else if (!strcmp(name, "filter")) {
      // {% filter f(args) | g %}body{% endfilter %}: a filter chain whose innermost input is the body.
      n = mk(P, JN_FILTER_BLOCK, t->off);
      if (!n) return -1;
      jnode *chain = NULL;
      do {
        const jtok *nm = cur(P);
        if (nm->kind != JT_NAME) {
          fail(P, nm->off, ERR_INVALID_ARGUMENT, "%s", "expected a filter name");
          return -1;
        }
        jnode *x = mk(P, JN_FILTER, nm->off);
        if (!x) return -1;
        x->a = chain, x->s = name_dup(P, nm), x->sl = nm->n;
        P->i++;
        if (!eng_jinja__known_filter(x->s)) {
          fail(P, nm->off, ERR_UNIMPLEMENTED, "filter '%s' is not supported", x->s);
          return -1;
        }
        if (skip_op(P, "(") && !call_args(P, x)) return -1;
        chain = x;
      } while (skip_op(P, "|"));
      static const char *const end[] = {"endfilter", NULL};
      const char *st;
      n->a = chain;
      if (!block_end(P) || body(P, end, &n->b, &st) || !block_end(P)) return -1;
    } else if (!strcmp(name, "generation")) {
      // transformers' {% generation %}: marks assistant text for masks; renders its body.
      static const char *const end[] = {"endgeneration", NULL};
      const char *st;
      n = mk(P, JN_BODY, t->off);
      if (!n || !block_end(P) || body(P, end, &n->a, &st) || !block_end(P)) return -1;
    } else {
      int known = 0;
      for (const char *const *u = UNSUPPORTED; *u; u++)
        if (!strcmp(name, *u)) known = 1;
      if (known) fail(P, kw->off, ERR_UNIMPLEMENTED, "'{%% %s %%}' is not supported", name);
      else fail(P, kw->off, ERR_INVALID_ARGUMENT, "unknown or unexpected statement '%s'", name);
      return -1;
    }
    if (!n || !vpush(P, &items, n)) return -1;
  }
done:;
  jnode *b = mk(P, JN_BODY, start);
  if (!b) return -1;
  b->v = (jnode **)items.p, b->nv = items.n;
  *out = b;
  return 0;
}

// Jinja compiles a filter or test it does not know into a runtime error when it sits in an `if`
// (its test and branches) or a conditional expression, and refuses the template otherwise; transformers
// renders such templates as long as the branch is not taken. The same here: an unknown one outside a
// branch fails the load.
static void check_unknown(parser *P, const jnode *n, int soft) {
  if (!n || P->failed) return;
  if ((n->kind == JN_FILTER || n->kind == JN_TEST) && n->unknown && !soft) {
    fail(P, n->off, ERR_UNIMPLEMENTED, n->kind == JN_FILTER ? "filter '%s' is not supported" : "test '%s' is not supported",
         n->s);
    return;
  }
  int in = soft;
  switch (n->kind) {
    case JN_IF: case JN_COND: in = 1; break;
    case JN_MACRO: case JN_SET_BLOCK: case JN_FILTER_BLOCK: in = 0; break;
    case JN_FOR:  // the iterable keeps the frame; the body and its filter get a fresh one
      check_unknown(P, n->a, soft);
      check_unknown(P, n->b, 0), check_unknown(P, n->c, 0), check_unknown(P, n->d, soft);
      return;
    default: break;
  }
  check_unknown(P, n->a, in), check_unknown(P, n->b, in), check_unknown(P, n->c, in), check_unknown(P, n->d, in);
  for (size_t i = 0; i < n->nv; i++) check_unknown(P, n->v[i], in);
  for (size_t i = 0; i < n->nw; i++) check_unknown(P, n->w[i], in);
}

int eng_jinja__parse(jarena *a, const jsrc *src, const jtok *toks, size_t ntoks, jnode **root, err *e) {
  parser P = {a, src, toks, ntoks, 0, e, 0, 0, 0, 0};
  const char *st = NULL;
  *root = NULL;
  if (!body(&P, NULL, root, &st)) check_unknown(&P, *root, 0);
  if (P.failed || !*root) {
    if (!P.failed) err_set(e, ERR_INVALID_ARGUMENT, "chat template: parse failed");
    return e ? (int)e->code : ERR_INVALID_ARGUMENT;
  }
  return 0;
}
