// engine/llm/jinja_lex.c: template text to tokens, as Jinja2's lexer makes
// them under transformers' environment (trim_blocks=True, lstrip_blocks=True):
// `-` strips whitespace beside a tag, `+` keeps it, a block or comment tag
// alone on its line loses the line's indentation and the newline after it.
// Comments are dropped here. Also the arena and growable text the other
// files share.
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/llm/jinja_internal.h"

// --- arena

typedef struct jchunk { struct jchunk *next; size_t used, cap; _Alignas(16) unsigned char data[]; } jchunk;

void *jarena_alloc(jarena *a, size_t n) {
  n = (n + 15) & ~(size_t)15;
  if (n == 0) n = 16;
  if (a->limit && a->used_total + n > a->limit) return NULL;
  jchunk *c = a->head;
  if (!c || c->cap - c->used < n) {
    size_t cap = n > 32768 ? n : 32768;
    c = malloc(sizeof *c + cap);
    if (!c) return NULL;
    c->next = a->head, c->used = 0, c->cap = cap;
    a->head = c;
  }
  void *p = c->data + c->used;
  c->used += n;
  a->used_total += n;
  memset(p, 0, n);
  return p;
}

void jarena_free(jarena *a) {
  for (jchunk *c = a->head, *nx; c; c = nx) nx = c->next, free(c);
  a->head = NULL;
  a->used_total = 0;
}

char *jarena_strdup(jarena *a, const char *s, size_t n) {
  char *p = jarena_alloc(a, n + 1);
  if (p && n) memcpy(p, s, n);
  return p;
}

// --- growable text

void jbuf_put(jbuf *b, const char *s, size_t n) {
  if (b->oom || n == 0) return;
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) { b->oom = 1; return; }
    b->p = p, b->cap = cap;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = '\0';
}
void jbuf_puts(jbuf *b, const char *s) { jbuf_put(b, s, strlen(s)); }
void jbuf_putc(jbuf *b, char c) { jbuf_put(b, &c, 1); }
void jbuf_free(jbuf *b) { free(b->p); memset(b, 0, sizeof *b); }

// --- positions

void eng_jinja__where(const jsrc *src, size_t off, int *line, int *col) {
  int l = 1, c = 1;
  for (size_t i = 0; i < off && i < src->len; i++) {
    if (src->text[i] == '\n') l++, c = 1;
    else if (((unsigned char)src->text[i] & 0xC0) != 0x80) c++;
  }
  *line = l, *col = c;
}

static int lex_fail(const jsrc *src, size_t off, err *e, err_code code, const char *what) {
  int l, c;
  eng_jinja__where(src, off, &l, &c);
  return err_set(e, code, "chat template: %s (line %d, column %d)", what, l, c);
}

// --- tokens

typedef struct lexer {
  jarena *a;
  const jsrc *src;
  jtok *t;
  size_t n, cap;
  err *e;
} lexer;

static int push(lexer *L, jtok tk) {
  if (L->n == L->cap) {
    size_t cap = L->cap ? L->cap * 2 : 256;
    jtok *t = jarena_alloc(L->a, cap * sizeof *t);
    if (!t) return err_set(L->e, ERR_RESOURCE_EXHAUSTED, "chat template: out of memory");
    if (L->n) memcpy(t, L->t, L->n * sizeof *t);
    L->t = t, L->cap = cap;
  }
  L->t[L->n++] = tk;
  return 0;
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static void put_utf8(jbuf *b, uint32_t cp) {
  char u[4];
  if (cp < 0x80) u[0] = (char)cp, jbuf_put(b, u, 1);
  else if (cp < 0x800) u[0] = (char)(0xC0 | cp >> 6), u[1] = (char)(0x80 | (cp & 63)), jbuf_put(b, u, 2);
  else if (cp < 0x10000) {
    u[0] = (char)(0xE0 | cp >> 12), u[1] = (char)(0x80 | ((cp >> 6) & 63)), u[2] = (char)(0x80 | (cp & 63));
    jbuf_put(b, u, 3);
  } else {
    u[0] = (char)(0xF0 | cp >> 18), u[1] = (char)(0x80 | ((cp >> 12) & 63));
    u[2] = (char)(0x80 | ((cp >> 6) & 63)), u[3] = (char)(0x80 | (cp & 63));
    jbuf_put(b, u, 4);
  }
}

// A string literal's body decoded as Python's unicode-escape (what Jinja does);
// an unknown escape keeps its backslash.
static int decode_string(lexer *L, const char *s, size_t n, size_t off, jtok *tk) {
  jbuf b = {0};
  for (size_t i = 0; i < n; i++) {
    if (s[i] != '\\' || i + 1 >= n) { jbuf_putc(&b, s[i]); continue; }
    char c = s[++i];
    switch (c) {
      case '\n': break;
      case '\\': jbuf_putc(&b, '\\'); break;
      case '\'': jbuf_putc(&b, '\''); break;
      case '"': jbuf_putc(&b, '"'); break;
      case 'n': jbuf_putc(&b, '\n'); break;
      case 't': jbuf_putc(&b, '\t'); break;
      case 'r': jbuf_putc(&b, '\r'); break;
      case 'a': jbuf_putc(&b, '\a'); break;
      case 'b': jbuf_putc(&b, '\b'); break;
      case 'f': jbuf_putc(&b, '\f'); break;
      case 'v': jbuf_putc(&b, '\v'); break;
      case 'x': case 'u': case 'U': {
        int want = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (int k = 0; k < want; k++) {
          int h = i + 1 + (size_t)k < n ? hexval(s[i + 1 + k]) : -1;
          if (h < 0) {
            jbuf_free(&b);
            return lex_fail(L->src, off, L->e, ERR_INVALID_ARGUMENT, "truncated \\x, \\u or \\U escape in a string");
          }
          cp = cp * 16 + (uint32_t)h;
        }
        if (cp > 0x10FFFF) {
          jbuf_free(&b);
          return lex_fail(L->src, off, L->e, ERR_INVALID_ARGUMENT, "escape past U+10FFFF in a string");
        }
        put_utf8(&b, cp);
        i += (size_t)want;
        break;
      }
      default:
        if (c >= '0' && c <= '7') {
          uint32_t cp = (uint32_t)(c - '0');
          for (int k = 0; k < 2 && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '7'; k++) cp = cp * 8 + (uint32_t)(s[++i] - '0');
          put_utf8(&b, cp);
        } else if (c == 'N') {
          jbuf_free(&b);
          return lex_fail(L->src, off, L->e, ERR_UNIMPLEMENTED, "\\N{...} escapes are not supported");
        } else {
          jbuf_putc(&b, '\\'), jbuf_putc(&b, c);
        }
    }
  }
  if (b.oom) { jbuf_free(&b); return err_set(L->e, ERR_RESOURCE_EXHAUSTED, "chat template: out of memory"); }
  tk->s = jarena_strdup(L->a, b.p ? b.p : "", b.n);
  tk->n = b.n;
  jbuf_free(&b);
  return tk->s ? 0 : err_set(L->e, ERR_RESOURCE_EXHAUSTED, "chat template: out of memory");
}

static const char *const OPS2[] = {"//", "**", "==", "!=", ">=", "<="};
static const char OPS1[] = "+-/*%~[](){}><=.:|,;";

// Tokens inside {% %} or {{ }} from *pos up to the closing tag; *pos ends
// after it (and after what its whitespace control strips). *nl_end: the
// match ended with a newline (Jinja's line_starting for lstrip_blocks).
static int lex_tag(lexer *L, size_t *pos, int block, int *nl_end) {
  const char *s = L->src->text;
  size_t n = L->src->len, p = *pos;
  int depth = 0;
  for (;;) {
    while (p < n && is_ws(s[p])) p++;
    if (p >= n) return lex_fail(L->src, *pos, L->e, ERR_INVALID_ARGUMENT, block ? "unclosed {% tag" : "unclosed {{ tag");
    char close = block ? '%' : '}';
    if (depth == 0) {
      int sign = s[p] == '-' || (block && s[p] == '+');
      if (p + 1 + (size_t)sign < n && s[p + sign] == close && s[p + sign + 1] == '}') {
        jtok tk = {block ? JT_BLOCK_END : JT_VAR_END, p, NULL, 0, 0, 0};
        TRY(push(L, tk));
        char sc = sign ? s[p] : 0;
        p += (size_t)sign + 2;
        *nl_end = 0;
        if (sc == '-') {
          while (p < n && is_ws(s[p])) p++;
          *nl_end = p > 0 && s[p - 1] == '\n';
        } else if (block && !sign && p < n && s[p] == '\n') {
          p++;  // trim_blocks
          *nl_end = 1;
        }
        *pos = p;
        return 0;
      }
    }
    jtok tk = {JT_OP, p, NULL, 0, 0, 0};
    char c = s[p];
    if (isdigit((unsigned char)c)) {
      size_t q = p;
      int isf = 0;
      while (q < n && (isdigit((unsigned char)s[q]) || s[q] == '_')) q++;
      if (q + 1 < n && s[q] == '.' && isdigit((unsigned char)s[q + 1])) {
        isf = 1, q++;
        while (q < n && (isdigit((unsigned char)s[q]) || s[q] == '_')) q++;
      }
      if (q < n && (s[q] == 'e' || s[q] == 'E')) {
        size_t r = q + 1;
        if (r < n && (s[r] == '+' || s[r] == '-')) r++;
        if (r < n && isdigit((unsigned char)s[r])) {
          isf = 1, q = r;
          while (q < n && (isdigit((unsigned char)s[q]) || s[q] == '_')) q++;
        }
      }
      char num[64];
      size_t k = 0;
      for (size_t i = p; i < q && k < sizeof num - 1; i++)
        if (s[i] != '_') num[k++] = s[i];
      num[k] = '\0';
      if (isf) tk.kind = JT_FLOAT, tk.f = strtod(num, NULL);
      else {
        tk.kind = JT_INT;
        errno = 0;
        tk.i = strtoll(num, NULL, 10);
        if (errno == ERANGE) return lex_fail(L->src, p, L->e, ERR_UNIMPLEMENTED, "integer literal past 64 bits");
      }
      p = q;
    } else if (isalpha((unsigned char)c) || c == '_') {
      size_t q = p;
      while (q < n && (isalnum((unsigned char)s[q]) || s[q] == '_')) q++;
      tk.kind = JT_NAME, tk.s = s + p, tk.n = q - p;
      p = q;
    } else if (c == '\'' || c == '"') {
      size_t q = p + 1;
      while (q < n && s[q] != c) q += s[q] == '\\' ? 2 : 1;
      if (q >= n) return lex_fail(L->src, p, L->e, ERR_INVALID_ARGUMENT, "unterminated string");
      tk.kind = JT_STRING;
      TRY(decode_string(L, s + p + 1, q - p - 1, p, &tk));
      p = q + 1;
    } else {
      size_t len = 0;
      for (size_t k = 0; k < sizeof OPS2 / sizeof *OPS2; k++)
        if (p + 1 < n && s[p] == OPS2[k][0] && s[p + 1] == OPS2[k][1]) len = 2;
      if (!len && c && strchr(OPS1, c)) len = 1;
      if (!len) {
        char what[64];
        snprintf(what, sizeof what, "unexpected character '%c'", c);
        return lex_fail(L->src, p, L->e, ERR_INVALID_ARGUMENT, what);
      }
      tk.s = s + p, tk.n = len;
      if (len == 1 && (c == '(' || c == '[' || c == '{')) depth++;
      if (len == 1 && (c == ')' || c == ']' || c == '}')) {
        if (depth == 0) return lex_fail(L->src, p, L->e, ERR_INVALID_ARGUMENT, "unbalanced closing bracket");
        depth--;
      }
      p += len;
    }
    TRY(push(L, tk));
  }
}

int eng_jinja__lex(jarena *a, const jsrc *src, jtok **toks, size_t *ntoks, err *e) {
  lexer L = {a, src, NULL, 0, 0, e};
  const char *s = src->text;
  size_t n = src->len, pos = 0;
  int line_starting = 1;
  while (pos < n) {
    // The next tag opener.
    size_t t = pos;
    while (t + 1 < n && !(s[t] == '{' && (s[t + 1] == '{' || s[t + 1] == '%' || s[t + 1] == '#'))) t++;
    if (t + 1 >= n) t = n;
    size_t text_end = t;
    char kind = t < n ? s[t + 1] : 0;
    char sign = t + 2 < n && (s[t + 2] == '-' || s[t + 2] == '+') ? s[t + 2] : 0;
    if (kind && sign == '-') {
      while (text_end > pos && is_ws(s[text_end - 1])) text_end--;
    } else if (kind && sign != '+' && kind != '{') {
      // lstrip_blocks: only spaces between the line's start and the tag.
      size_t l = t;
      while (l > pos && s[l - 1] != '\n') l--;
      int at_line_start = l > pos || line_starting;
      int only_ws = l < t;
      for (size_t i = l; i < t; i++)
        if (!is_ws(s[i])) only_ws = 0;
      if (at_line_start && only_ws) text_end = l;
    }
    if (text_end > pos) {
      jtok tk = {JT_TEXT, pos, s + pos, text_end - pos, 0, 0};
      TRY(push(&L, tk));
    }
    if (!kind) break;
    size_t body = t + 2 + (sign ? 1 : 0);
    if (kind == '#') {
      size_t q = body;
      while (q + 1 < n && !(s[q] == '#' && s[q + 1] == '}')) q++;
      if (q + 1 >= n) return lex_fail(src, t, e, ERR_INVALID_ARGUMENT, "unclosed comment");
      char before = q > body ? s[q - 1] : 0;
      pos = q + 2;
      line_starting = 0;
      if (before == '-') {
        while (pos < n && is_ws(s[pos])) pos++;
        line_starting = pos > 0 && s[pos - 1] == '\n';
      } else if (before != '+' && pos < n && s[pos] == '\n') {
        pos++;
        line_starting = 1;
      }
      continue;
    }
    int block = kind == '%';
    if (block) {
      // {% raw %} lexes its body verbatim; the subset has no use for it.
      size_t q = body;
      while (q < n && is_ws(s[q])) q++;
      if (n - q >= 3 && !strncmp(s + q, "raw", 3) && (q + 3 == n || !isalnum((unsigned char)s[q + 3])))
        return lex_fail(src, t, e, ERR_UNIMPLEMENTED, "{% raw %} blocks are not supported");
    }
    jtok tk = {block ? JT_BLOCK_BEGIN : JT_VAR_BEGIN, t, NULL, 0, 0, 0};
    TRY(push(&L, tk));
    pos = body;
    TRY(lex_tag(&L, &pos, block, &line_starting));
  }
  jtok end = {JT_EOF, n, NULL, 0, 0, 0};
  TRY(push(&L, end));
  *toks = L.t, *ntoks = L.n;
  return 0;
}
