// engine/llm/jinja_parse.c: the Jinja parser's statements and its entry,
// eng_jinja__parse (tokens to a tree): if/elif/else, for (target tuples, an
// `if` filter, else), set (a name, a namespace's attribute, or a block),
// macro, break/continue, and transformers' generation block. Anything else is
// refused here, naming it and where, so an unsupported template fails at load
// rather than mid-render. Expressions and the shared helpers: jinja_parse_expr.c.
#include <stdio.h>
#include <string.h>

#include "engine/llm/jinja_parse.h"

// --- statements

static int body(parser *P, const char *const *stops, jnode **out, const char **stopped);
static int body_(parser *P, const char *const *stops, jnode **out, const char **stopped);

static int block_end(parser *P) {
  if (cur(P)->kind == JT_BLOCK_END) { P->i++; return 1; }
  char b[64];
  jp_fail(P, cur(P)->off, ERR_INVALID_ARGUMENT, "expected '%%}', got %s", jp_tok_desc(cur(P), b, sizeof b));
  return 0;
}

static jnode *stmt_if(parser *P, size_t off) {
  jnode *n = jp_mk(P, JN_IF, off);
  if (!n || !(n->a = jp_expression(P)) || !block_end(P)) return NULL;
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
  jnode *n = jp_mk(P, JN_FOR, off);
  if (!n) return NULL;
  vec names = {0};
  int paren = skip_op(P, "(");
  do {
    if (cur(P)->kind != JT_NAME) return jp_fail(P, cur(P)->off, ERR_UNIMPLEMENTED, "%s", "a for target must be names");
    if (!jp_vpush(P, &names, (void *)jp_name_dup(P, cur(P)))) return NULL;
    P->i++;
  } while (skip_op(P, ","));
  if (paren && !jp_expect_op(P, ")")) return NULL;
  n->kn = (const char **)names.p, n->nkn = names.n;
  if (!skip_name(P, "in")) return jp_fail(P, cur(P)->off, ERR_INVALID_ARGUMENT, "%s", "expected 'in' in a for");
  if (!(n->a = jp_or_expr(P))) return NULL;
  if (is_op(cur(P), ",")) return jp_fail(P, cur(P)->off, ERR_UNIMPLEMENTED, "%s", "iterating a bare tuple is not supported");
  if (skip_name(P, "if") && !(n->b = jp_expression(P))) return NULL;
  if (is_name(cur(P), "recursive")) return jp_fail(P, cur(P)->off, ERR_UNIMPLEMENTED, "%s", "recursive for loops are not supported");
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
  if (t->kind != JT_NAME) return jp_fail(P, t->off, ERR_INVALID_ARGUMENT, "%s", "expected a name after 'set'");
  jnode *n = jp_mk(P, JN_SET, off);
  if (!n) return NULL;
  n->s = jp_name_dup(P, t), n->sl = t->n;
  P->i++;
  if (skip_op(P, ".")) {
    if (cur(P)->kind != JT_NAME) return jp_fail(P, cur(P)->off, ERR_INVALID_ARGUMENT, "%s", "expected an attribute name");
    n->kind = JN_SET_ATTR, n->s2 = jp_name_dup(P, cur(P));
    P->i++;
  }
  if (is_op(cur(P), ",")) return jp_fail(P, cur(P)->off, ERR_UNIMPLEMENTED, "%s", "set with several targets is not supported");
  if (skip_op(P, "=")) {
    if (!(n->a = jp_expression(P))) return NULL;
    if (is_op(cur(P), ",")) {
      vec items = {0};
      jp_vpush(P, &items, n->a);
      while (skip_op(P, ",")) {
        jnode *y = jp_expression(P);
        if (!y || !jp_vpush(P, &items, y)) return NULL;
      }
      jnode *tu = jp_mk(P, JN_TUPLE, off);
      if (!tu) return NULL;
      tu->v = (jnode **)items.p, tu->nv = items.n;
      n->a = tu;
    }
    return block_end(P) ? n : NULL;
  }
  if (n->kind == JN_SET_ATTR) return jp_fail(P, cur(P)->off, ERR_UNIMPLEMENTED, "%s", "a block set of an attribute is not supported");
  if (cur(P)->kind == JT_OP && is_op(cur(P), "|"))
    return jp_fail(P, cur(P)->off, ERR_UNIMPLEMENTED, "%s", "filtered block set is not supported");
  if (!block_end(P)) return NULL;
  n->kind = JN_SET_BLOCK;
  static const char *const stops[] = {"endset", NULL};
  const char *st;
  if (body(P, stops, &n->b, &st)) return NULL;
  return block_end(P) ? n : NULL;
}

static jnode *stmt_macro(parser *P, size_t off) {
  const jtok *t = cur(P);
  if (t->kind != JT_NAME) return jp_fail(P, t->off, ERR_INVALID_ARGUMENT, "%s", "expected a macro name");
  jnode *n = jp_mk(P, JN_MACRO, off);
  if (!n) return NULL;
  n->s = jp_name_dup(P, t), n->sl = t->n;
  P->i++;
  if (!jp_expect_op(P, "(")) return NULL;
  vec params = {0}, defs = {0};
  while (!P->failed && !is_op(cur(P), ")")) {
    if (params.n && !jp_expect_op(P, ",")) return NULL;
    if (cur(P)->kind != JT_NAME) return jp_fail(P, cur(P)->off, ERR_INVALID_ARGUMENT, "%s", "expected a parameter name");
    if (!jp_vpush(P, &params, (void *)jp_name_dup(P, cur(P)))) return NULL;
    P->i++;
    jnode *d = NULL;
    if (skip_op(P, "=") && !(d = jp_expression(P))) return NULL;
    if (!jp_vpush(P, &defs, d)) return NULL;
  }
  if (!jp_expect_op(P, ")") || !block_end(P)) return NULL;
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
    jp_fail(P, cur(P)->off, ERR_INVALID_ARGUMENT, "%s", "blocks nested too deep");
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
        jp_fail(P, t->off, ERR_INVALID_ARGUMENT, "missing {%% %s %%} before the end of the template", *last);
        return -1;
      }
      break;
    }
    if (t->kind == JT_TEXT) {
      jnode *n = jp_mk(P, JN_TEXT, t->off);
      if (!n) return -1;
      n->s = t->s, n->sl = t->n;
      if (!jp_vpush(P, &items, n)) return -1;
      P->i++;
      continue;
    }
    if (t->kind == JT_VAR_BEGIN) {
      P->i++;
      jnode *n = jp_mk(P, JN_OUTPUT, t->off);
      if (!n || !(n->a = jp_expression(P))) return -1;
      if (is_op(cur(P), ",")) {
        jp_fail(P, cur(P)->off, ERR_UNIMPLEMENTED, "%s", "printing a bare tuple is not supported");
        return -1;
      }
      if (cur(P)->kind != JT_VAR_END) {
        char b[64];
        jp_fail(P, cur(P)->off, ERR_INVALID_ARGUMENT, "expected '}}', got %s", jp_tok_desc(cur(P), b, sizeof b));
        return -1;
      }
      P->i++;
      if (!jp_vpush(P, &items, n)) return -1;
      continue;
    }
    // A block tag.
    const jtok *kw = peek(P, 1);
    if (kw->kind != JT_NAME) {
      jp_fail(P, kw->off, ERR_INVALID_ARGUMENT, "%s", "expected a statement name after '{%'");
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
        jp_fail(P, kw->off, ERR_INVALID_ARGUMENT, "'%s' outside a for loop", name);
        return -1;
      }
      n = jp_mk(P, name[0] == 'b' ? JN_BREAK : JN_CONTINUE, t->off);
      if (n && !block_end(P)) return -1;
    } else if (!strcmp(name, "filter")) {
      // {% filter f(args) | g %}body{% endfilter %}: a filter chain whose innermost input is the body.
      n = jp_mk(P, JN_FILTER_BLOCK, t->off);
      if (!n) return -1;
      jnode *chain = NULL;
      do {
        const jtok *nm = cur(P);
        if (nm->kind != JT_NAME) {
          jp_fail(P, nm->off, ERR_INVALID_ARGUMENT, "%s", "expected a filter name");
          return -1;
        }
        jnode *x = jp_mk(P, JN_FILTER, nm->off);
        if (!x) return -1;
        x->a = chain, x->s = jp_name_dup(P, nm), x->sl = nm->n;
        P->i++;
        if (!eng_jinja__known_filter(x->s)) {
          jp_fail(P, nm->off, ERR_UNIMPLEMENTED, "filter '%s' is not supported", x->s);
          return -1;
        }
        if (skip_op(P, "(") && !jp_call_args(P, x)) return -1;
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
      n = jp_mk(P, JN_BODY, t->off);
      if (!n || !block_end(P) || body(P, end, &n->a, &st) || !block_end(P)) return -1;
    } else {
      int known = 0;
      for (const char *const *u = UNSUPPORTED; *u; u++)
        if (!strcmp(name, *u)) known = 1;
      if (known) jp_fail(P, kw->off, ERR_UNIMPLEMENTED, "'{%% %s %%}' is not supported", name);
      else jp_fail(P, kw->off, ERR_INVALID_ARGUMENT, "unknown or unexpected statement '%s'", name);
      return -1;
    }
    if (!n || !jp_vpush(P, &items, n)) return -1;
  }
done:;
  jnode *b = jp_mk(P, JN_BODY, start);
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
    jp_fail(P, n->off, ERR_UNIMPLEMENTED, n->kind == JN_FILTER ? "filter '%s' is not supported" : "test '%s' is not supported",
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
