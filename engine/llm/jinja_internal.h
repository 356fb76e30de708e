// engine/llm/jinja_internal.h: what the Jinja interpreter's files share (the
// lexer's tokens, the parser's nodes, the evaluator's values and arena).
// Public API: jinja.h. Values live in an arena freed in one go (the
// template's for constants and nodes, a render's for everything it makes),
// so no value is ever freed alone and nothing is reference counted.
#ifndef INFERD_ENGINE_LLM_JINJA_INTERNAL_H
#define INFERD_ENGINE_LLM_JINJA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "engine/llm/jinja.h"
#include "kernels/base/err.h"

// --- arena

typedef struct jarena {
  struct jchunk *head;
  size_t used_total, limit;  // limit 0: none; past it jarena_alloc returns NULL
} jarena;

void *jarena_alloc(jarena *a, size_t n);  // zeroed; NULL when over the limit or out of memory
void jarena_free(jarena *a);
char *jarena_strdup(jarena *a, const char *s, size_t n);  // NUL-terminated copy

// --- values

typedef enum jv_kind {
  JV_UNDEF = 0, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT, JV_NS, JV_FUNC
} jv_kind;

// UTF-8, NUL-terminated. markup: a markupsafe.Markup (from `safe` or `escape`): `+` with a plain string
// HTML-escapes the plain one, as Markup.__add__ does.
typedef struct jstr { size_t n; int markup; char s[]; } jstr;
struct jlist;
struct jdict;
struct jfunc;

typedef struct jv {
  jv_kind kind;
  union {
    int b;
    int64_t i;
    double f;
    const jstr *s;
    struct jlist *l;
    struct jdict *d;  // JV_DICT and JV_NS
    struct jfunc *fn;
    const char *undef;  // JV_UNDEF: the message using it raises ("'x' is undefined"); may be NULL
  } u;
} jv;

// gen: what Jinja's lazy filters (map, select*, reject*, unique, reverse) return, a one-pass iterator in
// Python: always true, no len(), no subscript, not JSON; `| list` makes it a list.
typedef struct jlist { size_t n, cap; jv *items; int tuple, gen; } jlist;
typedef struct jdict { size_t n, cap; jv *keys, *vals; } jdict;

struct jnode;
struct jframe;
typedef struct jfunc {
  int id;                    // a builtin (JB_*) or JB_MACRO
  jv self;                   // a bound method's object
  const struct jnode *macro; // JB_MACRO
  const char *name;
} jfunc;

static inline jv jv_undef(const char *why) { jv v = {JV_UNDEF, {0}}; v.u.undef = why; return v; }
static inline jv jv_none(void) { jv v = {JV_NONE, {0}}; return v; }
static inline jv jv_bool(int b) { jv v = {JV_BOOL, {0}}; v.u.b = b != 0; return v; }
static inline jv jv_int(int64_t i) { jv v = {JV_INT, {0}}; v.u.i = i; return v; }
static inline jv jv_float(double f) { jv v = {JV_FLOAT, {0}}; v.u.f = f; return v; }

// Growable text (the render's output and every string a render builds).
typedef struct jbuf { char *p; size_t n, cap; int oom; } jbuf;
void jbuf_put(jbuf *b, const char *s, size_t n);
void jbuf_puts(jbuf *b, const char *s);
void jbuf_putc(jbuf *b, char c);
void jbuf_free(jbuf *b);

jstr *jv_mkstr(jarena *a, const char *s, size_t n);  // NULL when out of memory
jv jv_str(const jstr *s);
jlist *jv_mklist(jarena *a, size_t cap);
int jlist_push(jarena *a, jlist *l, jv v);  // 0 or -1 (memory)
jdict *jv_mkdict(jarena *a);
int jdict_set(jarena *a, jdict *d, jv key, jv val);  // replaces an equal key in place
int jdict_get(const jdict *d, jv key, jv *out);     // 1 found
int jdict_get_str(const jdict *d, const char *k, jv *out);

int jv_truthy(jv v);
int jv_equal(jv a, jv b);
// Python's ordering of two numbers, strings or lists: -1, 0, 1; 2 when they do not compare.
int jv_compare(jv a, jv b);
const char *jv_type_name(jv v);  // Python's names: 'str', 'int', 'list', 'dict', 'NoneType', ...
// str(v) (jv_to_str) and repr(v) (jv_repr) written into b.
void jv_to_str(jbuf *b, jv v);
void jv_repr(jbuf *b, jv v);
// json.dumps(v, ensure_ascii=False, indent, separators, sort_keys) as transformers' tojson
// calls it; indent < 0 for none; item_sep/key_sep NULL for Python's defaults. -1 with
// *why set for a value JSON cannot hold.
int jv_tojson(jbuf *b, jv v, int indent, const char *item_sep, const char *key_sep, int sort_keys, int ensure_ascii,
              const char **why);
void jv_float_repr(jbuf *b, double f);
void jv_html_escape(jbuf *b, const char *s, size_t n);  // markupsafe.escape

// --- lexer

typedef enum jtok_kind {
  JT_TEXT, JT_VAR_BEGIN, JT_VAR_END, JT_BLOCK_BEGIN, JT_BLOCK_END,
  JT_NAME, JT_STRING, JT_INT, JT_FLOAT, JT_OP, JT_EOF
} jtok_kind;

typedef struct jtok {
  jtok_kind kind;
  size_t off;       // where in the (newline-normalised) source it starts
  const char *s;    // JT_TEXT, JT_NAME, JT_STRING (decoded), JT_OP: arena text
  size_t n;
  int64_t i;
  double f;
} jtok;

typedef struct jsrc { const char *text; size_t len; } jsrc;

// Tokens of a template with trim_blocks and lstrip_blocks on, comments dropped.
int eng_jinja__lex(jarena *a, const jsrc *src, jtok **toks, size_t *ntoks, err *e);
// "line L, column C" of an offset.
void eng_jinja__where(const jsrc *src, size_t off, int *line, int *col);

// --- parser

typedef enum jnode_kind {
  // statements
  JN_TEXT, JN_OUTPUT, JN_IF, JN_FOR, JN_SET, JN_SET_ATTR, JN_SET_BLOCK, JN_MACRO, JN_BREAK, JN_CONTINUE,
  JN_FILTER_BLOCK,  // a: the filter chain (its innermost filter has no a: it takes the body), b: the body
  JN_BODY,
  // expressions
  JN_CONST, JN_NAME, JN_LIST, JN_TUPLE, JN_DICT, JN_ATTR, JN_ITEM, JN_SLICE, JN_CALL, JN_FILTER, JN_TEST,
  JN_NEG, JN_POS, JN_NOT, JN_AND, JN_OR, JN_BINOP, JN_CMP, JN_COND
} jnode_kind;

typedef enum jop {
  JO_ADD, JO_SUB, JO_MUL, JO_DIV, JO_FLOORDIV, JO_MOD, JO_POW, JO_CONCAT,
  JO_EQ, JO_NE, JO_LT, JO_LE, JO_GT, JO_GE, JO_IN, JO_NOTIN
} jop;

typedef struct jnode {
  jnode_kind kind;
  int op;           // JN_BINOP: jop; JN_TEST: 1 when negated; JN_SET_BLOCK etc. unused
  size_t off;
  struct jnode *a, *b, *c, *d;  // JN_IF: cond, then, else; JN_FOR: iter, filter, body, else
  struct jnode **v; size_t nv;   // items, positional arguments, a body
  struct jnode **w; size_t nw;   // keyword argument values, an else body, defaults
  const char **kn; size_t nkn;   // keyword argument names, macro parameters, for targets
  int *ops;                       // JN_CMP: nv-1 operators between v[]
  const char *s; size_t sl;      // a name (JN_NAME, JN_ATTR, JN_FILTER, JN_TEST, JN_SET, JN_MACRO)
  const char *s2;                 // JN_SET_ATTR: the attribute
  jv k;                           // JN_CONST
  int unknown;                    // JN_FILTER/JN_TEST outside the subset, in a branch: fails only if evaluated
  int height;                     // of an expression's tree (bounded by the parser)
} jnode;

int eng_jinja__parse(jarena *a, const jsrc *src, const jtok *toks, size_t ntoks, jnode **root, err *e);

// --- evaluation

typedef struct jframe {
  struct jframe *parent;
  jdict *vars;
} jframe;

typedef struct jrender {
  jarena *a;
  const jsrc *src;
  const eng_jinja_opts *opts;
  err *e;
  int failed;       // e holds the first error
  int depth;        // macro calls in progress
  int loop_ctl;     // 1 break, 2 continue pending
  jframe *root;
  jv block_input;   // a {% filter %} block's rendered body
} jrender;

// Builtin functions, filters, tests and methods (jinja_builtins.c). A macro's call (JB_MACRO) is the
// evaluator's own; eng_jinja__call takes the rest.
enum {
  JB_MACRO = 1, JB_RANGE, JB_NAMESPACE, JB_RAISE, JB_STRFTIME, JB_DICT, JB_METHOD
};
jv eng_jinja__call(jrender *r, jv fn, const jv *args, size_t nargs, const char **kn, const jv *kw, size_t nkw,
                   size_t off);
jv eng_jinja__filter(jrender *r, const char *name, jv x, const jv *args, size_t nargs, const char **kn,
                     const jv *kw, size_t nkw, size_t off);
// 1 true, 0 false, -1 failed (r->failed set).
int eng_jinja__test(jrender *r, const char *name, jv x, const jv *args, size_t nargs, size_t off);
// The attribute `name` of x: a method bound to x, a dict's key, or undefined.
jv eng_jinja__getattr(jrender *r, jv x, const char *name, size_t off);
jv eng_jinja__getitem(jrender *r, jv x, jv key, size_t off);
int eng_jinja__known_filter(const char *name);
jv eng_jinja__global(jrender *r, const char *name);  // range, namespace, ...; undefined when not one
// A method of str, dict or list called on self (jinja_methods.c).
jv eng_jinja__method(jrender *r, jv self, const char *name, const jv *args, size_t nargs, const char **kn,
                     const jv *kw, size_t nkw, size_t off);

// --- string helpers (jinja_methods.c), on UTF-8 bytes

// Index of needle in hay at or after from, or -1.
long eng_jinja__str_find(const char *hay, size_t hn, const char *needle, size_t nn, size_t from);
// Python's str.isspace() for the code point at s: its byte length, or 0 when not whitespace.
size_t eng_jinja__space_at(const char *s, size_t n);
// str.strip/lstrip/rstrip: chars NULL strips whitespace; sets [*b, *e).
void eng_jinja__strip(const char *s, size_t n, const jstr *chars, int left, int right, size_t *b, size_t *e);
// Python's str.title() (title 0) or Jinja's title filter (title 1), capitalize, upper, lower: ASCII letters.
jv eng_jinja__case(jrender *r, const jstr *s, int how);
enum { JCASE_UPPER, JCASE_LOWER, JCASE_TITLE_METHOD, JCASE_TITLE_FILTER, JCASE_CAPITALIZE };
int eng_jinja__known_test(const char *name);
// Iterates x as Python would (list items, dict keys, string characters): a new list, or NULL with r failed.
jlist *eng_jinja__iter(jrender *r, jv x, size_t off);

// The render's shared helpers (jinja_rt.c), below the evaluator, builtins, methods and filters.
// Fails the render (first error wins) with "<message> (line L, column C)"; returns an undefined.
jv eng_jinja__fail(jrender *r, size_t off, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
jv eng_jinja__oom(jrender *r);
jv eng_jinja__strv(jrender *r, const char *s, size_t n);  // a new string value (fails on memory)
jv eng_jinja__buf_str(jrender *r, jbuf *b);  // the buffer as a string value; frees b

#endif
