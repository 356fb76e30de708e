// engine/llm/jinja_rt.c: what every part of a render shares, below them
// all: failing a render (the first error wins, with line and column),
// strings made in the render's arena, and iterating a value as Python
// would. The evaluator, builtins, methods and filters call down to it.
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "engine/llm/jinja_internal.h"

jv eng_jinja__fail(jrender *r, size_t off, const char *fmt, ...) {
  if (!r->failed) {
    r->failed = 1;
    char msg[ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int l, c;
    eng_jinja__where(r->src, off, &l, &c);
    err_set(r->e, ERR_INVALID_ARGUMENT, "chat template: %s (line %d, column %d)", msg, l, c);
  }
  return jv_undef(NULL);
}

jv eng_jinja__oom(jrender *r) {
  if (!r->failed) {
    r->failed = 1;
    err_set(r->e, ERR_RESOURCE_EXHAUSTED, "chat template: the render ran out of its memory budget");
  }
  return jv_undef(NULL);
}

jv eng_jinja__strv(jrender *r, const char *s, size_t n) {
  jstr *j = jv_mkstr(r->a, s, n);
  return j ? jv_str(j) : eng_jinja__oom(r);
}

jv eng_jinja__buf_str(jrender *r, jbuf *b) {
  jv v = b->oom ? eng_jinja__oom(r) : eng_jinja__strv(r, b->p ? b->p : "", b->n);
  jbuf_free(b);
  return v;
}

jlist *eng_jinja__iter(jrender *r, jv x, size_t off) {
  jlist *l = NULL;
  switch (x.kind) {
    case JV_UNDEF: l = jv_mklist(r->a, 0); break;
    case JV_LIST: {
      l = jv_mklist(r->a, x.u.l->n);
      if (l && x.u.l->n) memcpy(l->items, x.u.l->items, x.u.l->n * sizeof *l->items), l->n = x.u.l->n;
      break;
    }
    case JV_DICT: {
      l = jv_mklist(r->a, x.u.d->n);
      if (l && x.u.d->n) memcpy(l->items, x.u.d->keys, x.u.d->n * sizeof *l->items), l->n = x.u.d->n;
      break;
    }
    case JV_STR: {
      l = jv_mklist(r->a, x.u.s->n);
      for (size_t i = 0; l && i < x.u.s->n;) {
        size_t len = 1;
        unsigned char c = (unsigned char)x.u.s->s[i];
        if (c >= 0xF0) len = 4;
        else if (c >= 0xE0) len = 3;
        else if (c >= 0xC0) len = 2;
        if (i + len > x.u.s->n) len = x.u.s->n - i;
        jv ch = eng_jinja__strv(r, x.u.s->s + i, len);
        if (r->failed || jlist_push(r->a, l, ch)) return eng_jinja__oom(r), NULL;
        i += len;
      }
      break;
    }
    default:
      eng_jinja__fail(r, off, "'%s' object is not iterable", jv_type_name(x));
      return NULL;
  }
  if (!l) eng_jinja__oom(r);
  return l;
}

