// engine/llm/jinja_parse.h: what the Jinja parser's two files share: the
// parser's state, its token helpers, and the expression parser's entry points
// (jinja_parse_expr.c) that the statement parser (jinja_parse.c) calls.
// Private to those two; the parser's API is eng_jinja__parse in
// jinja_internal.h. jp_ is the prefix of the shared functions.
#ifndef INFERD_ENGINE_LLM_JINJA_PARSE_H
#define INFERD_ENGINE_LLM_JINJA_PARSE_H

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

static inline const jtok *cur(parser *P) { return &P->t[P->i]; }
static inline const jtok *peek(parser *P, size_t k) { return &P->t[P->i + k < P->n ? P->i + k : P->n - 1]; }
static inline int is_op(const jtok *t, const char *op) {
  return t->kind == JT_OP && t->n == strlen(op) && !memcmp(t->s, op, t->n);
}
static inline int is_name(const jtok *t, const char *nm) {
  return t->kind == JT_NAME && t->n == strlen(nm) && !memcmp(t->s, nm, t->n);
}
static inline int skip_op(parser *P, const char *op) {
  if (!is_op(cur(P), op)) return 0;
  P->i++;
  return 1;
}
static inline int skip_name(parser *P, const char *nm) {
  if (!is_name(cur(P), nm)) return 0;
  P->i++;
  return 1;
}

// A growable array of node pointers (or names) in the arena.
typedef struct vec { void **p; size_t n, cap; } vec;

// Fails the parse once (the first error wins): code, and fmt with arg,
// followed by the line and column of offset off. Returns NULL.
jnode *jp_fail(parser *P, size_t off, err_code code, const char *fmt, const char *arg);
// A token as an error message names it ("end of template", "'%}'", "'x'"); buf for the quoted ones.
const char *jp_tok_desc(const jtok *t, char *buf, size_t cap);
// Skips op, else fails naming what came instead; 1 when skipped.
int jp_expect_op(parser *P, const char *op);
// Fails the parse as out of memory (the arena's limit or malloc). Returns NULL.
jnode *jp_oom(parser *P);
// A zeroed node of kind k at offset off in the arena (NULL: failed).
jnode *jp_mk(parser *P, jnode_kind k, size_t off);
// Appends x to v, growing it in the arena; 0 when out of memory (failed).
int jp_vpush(parser *P, vec *v, void *x);
// The token's text as a NUL-terminated string in the arena.
const char *jp_name_dup(parser *P, const jtok *t);

// An expression, conditional ones included (`a if c else b`); NULL: failed.
jnode *jp_expression(parser *P);
// An expression without the conditional (a for loop's iterable, a condition).
jnode *jp_or_expr(parser *P);
// Call arguments after '(' up to ')': positional into n->v, keywords into n->kn/n->w; 0: failed.
int jp_call_args(parser *P, jnode *n);

#endif
