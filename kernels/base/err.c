// kernels/base/err.c: formatting of the project-wide error value.
#include "kernels/base/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int err_set(err *e, err_code code, const char *fmt, ...) {
  if (e) {
    e->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
  }
  return (int)code;
}

int err_prefix(err *e, const char *fmt, ...) {
  if (!e) return ERR_UNKNOWN;
  char pre[ERR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(pre, sizeof pre, fmt, ap);
  va_end(ap);
  // Shift the old message right and put the prefix in front, truncating at the end.
  size_t plen = strnlen(pre, sizeof pre - 1), olen = strnlen(e->msg, sizeof e->msg - 1);
  if (plen > sizeof e->msg - 1) plen = sizeof e->msg - 1;
  if (plen + olen > sizeof e->msg - 1) olen = sizeof e->msg - 1 - plen;
  memmove(e->msg + plen, e->msg, olen);
  memcpy(e->msg, pre, plen);
  e->msg[plen + olen] = '\0';
  return (int)e->code;
}

void err_vjoin(char *buf, size_t cap, size_t *len, const char *fmt, va_list ap) {
  if (*len >= cap - 1) return;
  if (*len) *len += (size_t)snprintf(buf + *len, cap - *len, "; ");
  if (*len >= cap - 1) return;
  int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
  if (n > 0) *len += (size_t)n < cap - *len ? (size_t)n : cap - 1 - *len;  // a cut one ends the list
}

void err_join(char *buf, size_t cap, size_t *len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  err_vjoin(buf, cap, len, fmt, ap);
  va_end(ap);
}

const char *err_code_name(err_code code) {
  switch (code) {
    case ERR_OK: return "OK";
    case ERR_CANCELLED: return "CANCELLED";
    case ERR_UNKNOWN: return "UNKNOWN";
    case ERR_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case ERR_DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case ERR_NOT_FOUND: return "NOT_FOUND";
    case ERR_ALREADY_EXISTS: return "ALREADY_EXISTS";
    case ERR_RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case ERR_FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case ERR_UNIMPLEMENTED: return "UNIMPLEMENTED";
    case ERR_INTERNAL: return "INTERNAL";
    case ERR_UNAVAILABLE: return "UNAVAILABLE";
  }
  return "UNKNOWN";
}

// Room kept free for the count in front, the "and k more" behind and the
// context callers prefix (a model's path): the list takes at most the rest.
#define LIST_RESERVE 200

void err_list_add(err_list *l, const char *fmt, ...) {
  l->n++;
  if (l->listed >= ERR_LIST_MAX) return;
  char item[ERR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(item, sizeof item, fmt, ap);
  va_end(ap);
  size_t il = strlen(item), sep = l->listed ? 2 : 0;
  if (l->len + sep + il + LIST_RESERVE >= sizeof l->items) return;
  if (sep) memcpy(l->items + l->len, "; ", 2);
  memcpy(l->items + l->len + sep, item, il + 1);
  l->len += sep + il;
  l->listed++;
}

int err_list_set(const err_list *l, err *e, err_code code, const char *what) {
  if (!l->n) return 0;
  if (l->n > l->listed)
    return err_set(e, code, "%d %s: %s%s... and %d more", l->n, what, l->items,
                   l->listed ? "; " : "", l->n - l->listed);
  return err_set(e, code, "%d %s: %s", l->n, what, l->items);
}
