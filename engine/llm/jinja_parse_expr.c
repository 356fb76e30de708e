// engine/llm/jinja_parse_expr.c: the Jinja parser's expressions, by Jinja2's
// grammar and precedence (condition < or < and < not < comparison < + - < ~ <
// * / // % < ** < unary minus < filters, tests and postfix), and the token
// and node helpers the statement parser (jinja_parse.c) shares through
// jinja_parse.h. An expression's tree height is bounded here, where it grows.
#include <stdio.h>
#include <string.h>

#include "engine/llm/jinja_parse.h"

jnode *jp_fail(parser *P, size_t off, err_code code, const char *fmt, const char *arg) {
  if (P->failed) return NULL;
  P->failed = 1;
  char what[256];
  snprintf(what, sizeof what, fmt, arg);
  int l, c;
  eng_jinja__where(P->src, off, &l, &c);
  err_set(P->e, code, "chat template: %s (line %d, column %d)", what, l, c);
  return NULL;
}

const char *jp_tok_desc(const jtok *t, char *buf, size_t cap) {
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

int jp_expect_op(parser *P, const char *op) {
  if (skip_op(P, op)) return 1;
  char b[64], msg[128];
  snprintf(msg, sizeof msg, "expected '%s', got %%s", op);
  jp_fail(P, cur(P)->off, ERR_INVALID_ARGUMENT, msg, jp_tok_desc(cur(P), b, sizeof b));
  return 0;
}

jnode *jp_oom(parser *P) {
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
  if (n->height > MAX_HEIGHT) return jp_fail(P, n->off, ERR_INVALID_ARGUMENT, "%s", "expression nested too deep");
  return n;
}

jnode *jp_mk(parser *P, jnode_kind k, size_t off) {
  jnode *n = jarena_alloc(P->a, sizeof *n);
  if (!n) return jp_oom(P);
  n->kind = k, n->off = off;
  return n;
}

int jp_vpush(parser *P, vec *v, void *x) {
  if (v->n == v->cap) {
    size_t cap = v->cap ? v->cap * 2 : 4;
    void **p = jarena_alloc(P->a, cap * sizeof *p);
    if (!p) {
      jp_oom(P);
      return 0;
    }
    if (v->n) memcpy(p, v->p, v->n * sizeof *p);
    v->p = p, v->cap = cap;
  }
  v->p[v->n++] = x;
  return 1;
}

const char *jp_name_dup(parser *P, const jtok *t) { return jarena_strdup(P->a, t->s, t->n); }

// --- expressions

static jnode *unary(parser *P, int with_filter);
static jnode *primary(parser *P);
static jnode *postfix(parser *P, jnode *n);

int jp_call_args(parser *P, jnode *n) {
  vec pos = {0}, kv = {0}, kw = {0};
  while (!P->failed && !is_op(cur(P), ")")) {
    if (pos.n + kv.n && !jp_expect_op(P, ",")) return 0;
    if (is_op(cur(P), ")")) break;  // a trailing comma
    if (is_op(cur(P), "*") || is_op(cur(P), "**")) {
      jp_fail(P, cur(P)->off, ERR_UNIMPLEMENTED, "%s", "*args and **kwargs in calls are not supported");
      return 0;
    }
    if (cur(P)->kind == JT_NAME && is_op(peek(P, 1), "=")) {
      const char *k = jp_name_dup(P, cur(P));
      P->i += 2;
      jnode *x = jp_expression(P);
      if (!x || !jp_vpush(P, &kw, (void *)k) || !jp_vpush(P, &kv, x)) return 0;
    } else {
      if (kv.n) {
        jp_fail(P, cur(P)->off, ERR_INVALID_ARGUMENT, "%s", "positional argument after a keyword argument");
        return 0;
      }
      jnode *x = jp_expression(P);
      if (!x || !jp_vpush(P, &pos, x)) return 0;
    }
  }
  if (!jp_expect_op(P, ")")) return 0;
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
      parts[k] = jp_expression(P);
      if (!parts[k]) return NULL;
    }
    if (k < 2 && skip_op(P, ":")) { slice = 1; continue; }
    break;
  }
  if (is_op(cur(P), ",")) return jp_fail(P, cur(P)->off, ERR_UNIMPLEMENTED, "%s", "tuple subscripts are not supported");
  if (!jp_expect_op(P, "]")) return NULL;
  jnode *n = jp_mk(P, slice ? JN_SLICE : JN_ITEM, off);
  if (!n) return NULL;
  n->a = obj;
  if (slice) {
    n->v = jarena_alloc(P->a, 3 * sizeof *n->v);
    if (!n->v) return jp_oom(P);
    memcpy(n->v, parts, sizeof parts);
    n->nv = 3;
  } else {
    n->b = parts[0];
    if (!n->b) return jp_fail(P, off, ERR_INVALID_ARGUMENT, "%s", "empty subscript");
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
        jnode *x = jp_mk(P, JN_ATTR, nm->off);
        if (!x) return NULL;
        x->a = n, x->s = jp_name_dup(P, nm), x->sl = nm->n;
        P->i++;
        n = wrap(P, x);
      } else if (nm->kind == JT_INT) {
        jnode *x = jp_mk(P, JN_ITEM, nm->off), *k = jp_mk(P, JN_CONST, nm->off);
        if (!x || !k) return NULL;
        k->k = jv_int(nm->i);
        x->a = n, x->b = k;
        P->i++;
        n = wrap(P, x);
      } else {
        char b[64];
        return jp_fail(P, nm->off, ERR_INVALID_ARGUMENT, "expected an attribute name after '.', got %s",
                    jp_tok_desc(nm, b, sizeof b));
      }
    } else if (is_op(t, "[")) {
      P->i++;
      n = subscript(P, n, t->off);
    } else if (is_op(t, "(")) {
      P->i++;
      jnode *x = jp_mk(P, JN_CALL, t->off);
      if (!x) return NULL;
      x->a = n;
      if (!jp_call_args(P, x)) return NULL;
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
      if (nm->kind != JT_NAME) return jp_fail(P, nm->off, ERR_INVALID_ARGUMENT, "%s", "expected a filter name after '|'");
      jnode *x = jp_mk(P, JN_FILTER, nm->off);
      if (!x) return NULL;
      x->a = n, x->s = jp_name_dup(P, nm), x->sl = nm->n;
      P->i++;
      x->unknown = !eng_jinja__known_filter(x->s);  // an error at load unless in a branch (check_unknown)
      if (skip_op(P, "(") && !jp_call_args(P, x)) return NULL;
      n = wrap(P, x);
    } else if (is_name(t, "is")) {
      P->i++;
      int neg = skip_name(P, "not");
      const jtok *nm = cur(P);
      if (nm->kind != JT_NAME) return jp_fail(P, nm->off, ERR_INVALID_ARGUMENT, "%s", "expected a test name after 'is'");
      jnode *x = jp_mk(P, JN_TEST, nm->off);
      if (!x) return NULL;
      x->a = n, x->op = neg, x->s = jp_name_dup(P, nm), x->sl = nm->n;
      P->i++;
      x->unknown = !eng_jinja__known_test(x->s);
      const jtok *nx = cur(P);
      if (skip_op(P, "(")) {
        if (!jp_call_args(P, x)) return NULL;
      } else if ((nx->kind == JT_NAME || nx->kind == JT_STRING || nx->kind == JT_INT || nx->kind == JT_FLOAT ||
                  is_op(nx, "[") || is_op(nx, "{")) &&
                 !is_name(nx, "else") && !is_name(nx, "or") && !is_name(nx, "and")) {
        jnode *arg = postfix(P, primary(P));
        if (!arg) return NULL;
        x->v = jarena_alloc(P->a, sizeof *x->v);
        if (!x->v) return jp_oom(P);
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
    jnode *n = jp_mk(P, JN_CONST, t->off);
    if (!n) return NULL;
    if (is_name(t, "true") || is_name(t, "True")) n->k = jv_bool(1);
    else if (is_name(t, "false") || is_name(t, "False")) n->k = jv_bool(0);
    else if (is_name(t, "none") || is_name(t, "None")) n->k = jv_none();
    else n->kind = JN_NAME, n->s = jp_name_dup(P, t), n->sl = t->n;
    return wrap(P, n);
  }
  if (t->kind == JT_STRING) {
    // Adjacent string literals join, as in Python.
    jbuf s = {0};
    size_t off = t->off;
    while (cur(P)->kind == JT_STRING) jbuf_put(&s, cur(P)->s, cur(P)->n), P->i++;
    jnode *n = jp_mk(P, JN_CONST, off);
    jstr *js = n ? jv_mkstr(P->a, s.p ? s.p : "", s.n) : NULL;
    int oom = s.oom;
    jbuf_free(&s);
    if (!n) return NULL;
    if (!js || oom) return jp_fail(P, off, ERR_RESOURCE_EXHAUSTED, "%s", "out of memory");
    n->k = jv_str(js);
    return wrap(P, n);
  }
  if (t->kind == JT_INT || t->kind == JT_FLOAT) {
    P->i++;
    jnode *n = jp_mk(P, JN_CONST, t->off);
    if (n) n->k = t->kind == JT_INT ? jv_int(t->i) : jv_float(t->f);
    return wrap(P, n);
  }
  if (is_op(t, "(")) {
    P->i++;
    if (skip_op(P, ")")) return jp_mk(P, JN_TUPLE, t->off);
    jnode *x = jp_expression(P);
    if (!x) return NULL;
    if (is_op(cur(P), ",")) {
      vec items = {0};
      jp_vpush(P, &items, x);
      while (skip_op(P, ",") && !is_op(cur(P), ")")) {
        jnode *y = jp_expression(P);
        if (!y || !jp_vpush(P, &items, y)) return NULL;
      }
      jnode *tu = jp_mk(P, JN_TUPLE, t->off);
      if (!tu) return NULL;
      tu->v = (jnode **)items.p, tu->nv = items.n;
      x = tu;
    }
    return jp_expect_op(P, ")") ? x : NULL;
  }
  if (is_op(t, "[")) {
    P->i++;
    vec items = {0};
    while (!P->failed && !is_op(cur(P), "]")) {
      if (items.n && !jp_expect_op(P, ",")) return NULL;
      if (is_op(cur(P), "]")) break;
      jnode *y = jp_expression(P);
      if (!y || !jp_vpush(P, &items, y)) return NULL;
    }
    if (!jp_expect_op(P, "]")) return NULL;
    jnode *n = jp_mk(P, JN_LIST, t->off);
    if (n) n->v = (jnode **)items.p, n->nv = items.n;
    return wrap(P, n);
  }
  if (is_op(t, "{")) {
    P->i++;
    vec keys = {0}, vals = {0};
    while (!P->failed && !is_op(cur(P), "}")) {
      if (keys.n && !jp_expect_op(P, ",")) return NULL;
      if (is_op(cur(P), "}")) break;
      jnode *k = jp_expression(P);
      if (!k || !jp_expect_op(P, ":")) return NULL;
      jnode *v = jp_expression(P);
      if (!v || !jp_vpush(P, &keys, k) || !jp_vpush(P, &vals, v)) return NULL;
    }
    if (!jp_expect_op(P, "}")) return NULL;
    jnode *n = jp_mk(P, JN_DICT, t->off);
    if (n) n->v = (jnode **)keys.p, n->nv = keys.n, n->w = (jnode **)vals.p, n->nw = vals.n;
    return wrap(P, n);
  }
  return jp_fail(P, t->off, ERR_INVALID_ARGUMENT, "unexpected %s in an expression", jp_tok_desc(t, b, sizeof b));
}

static jnode *unary(parser *P, int with_filter) {
  const jtok *t = cur(P);
  jnode *n;
  if (is_op(t, "-") || is_op(t, "+")) {
    P->i++;
    if (++P->depth > MAX_DEPTH) return jp_fail(P, t->off, ERR_INVALID_ARGUMENT, "%s", "expression nested too deep");
    n = jp_mk(P, is_op(t, "-") ? JN_NEG : JN_POS, t->off);
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
  jnode *n = jp_mk(P, JN_BINOP, off);
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
    if (!items.n) jp_vpush(P, &items, first);
    if (!jp_vpush(P, &items, r) || !jp_vpush(P, &ops, (void *)(intptr_t)op)) return NULL;
  }
  if (!items.n) return first;
  jnode *n = jp_mk(P, JN_CMP, off);
  if (!n) return NULL;
  n->v = (jnode **)items.p, n->nv = items.n;
  n->ops = jarena_alloc(P->a, ops.n * sizeof *n->ops);
  if (!n->ops) return jp_oom(P);
  for (size_t k = 0; k < ops.n; k++) n->ops[k] = (int)(intptr_t)ops.p[k];
  return wrap(P, n);
}

static jnode *not_expr(parser *P) {
  if (is_name(cur(P), "not")) {
    if (++P->depth > MAX_DEPTH) return jp_fail(P, cur(P)->off, ERR_INVALID_ARGUMENT, "%s", "expression nested too deep");
    jnode *n = jp_mk(P, JN_NOT, cur(P)->off);
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
    jnode *n = jp_mk(P, JN_AND, cur(P)->off);
    P->i++;
    if (!n || !(n->b = not_expr(P))) return NULL;
    n->a = l, l = wrap(P, n);
  }
  return l;
}

jnode *jp_or_expr(parser *P) {
  jnode *l = and_expr(P);
  while (l && is_name(cur(P), "or")) {
    jnode *n = jp_mk(P, JN_OR, cur(P)->off);
    P->i++;
    if (!n || !(n->b = and_expr(P))) return NULL;
    n->a = l, l = wrap(P, n);
  }
  return l;
}

static jnode *expression_(parser *P);
jnode *jp_expression(parser *P) {
  if (++P->depth > MAX_DEPTH) {
    P->depth--;
    return jp_fail(P, cur(P)->off, ERR_INVALID_ARGUMENT, "%s", "expression nested too deep");
  }
  jnode *n = expression_(P);
  P->depth--;
  return wrap(P, n);
}

static jnode *expression_(parser *P) {
  jnode *l = jp_or_expr(P);
  while (l && is_name(cur(P), "if")) {
    jnode *n = jp_mk(P, JN_COND, cur(P)->off);
    P->i++;
    if (!n || !(n->a = jp_or_expr(P))) return NULL;  // the condition
    n->b = l;
    if (skip_name(P, "else") && !(n->c = jp_expression(P))) return NULL;
    l = wrap(P, n);
  }
  return l;
}
