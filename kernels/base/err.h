// The project-wide error value: a code (gRPC status numbering, so the front
// end maps it without a table) and a message that names what was wrong.
#ifndef INFERD_KERNELS_BASE_ERR_H
#define INFERD_KERNELS_BASE_ERR_H

#include <stdarg.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum err_code {
  ERR_OK = 0,
  ERR_CANCELLED = 1,
  ERR_UNKNOWN = 2,
  ERR_INVALID_ARGUMENT = 3,
  ERR_DEADLINE_EXCEEDED = 4,
  ERR_NOT_FOUND = 5,
  ERR_ALREADY_EXISTS = 6,
  ERR_RESOURCE_EXHAUSTED = 8,
  ERR_FAILED_PRECONDITION = 9,
  ERR_UNIMPLEMENTED = 12,
  ERR_INTERNAL = 13,
  ERR_UNAVAILABLE = 14,
} err_code;

#define ERR_MSG_MAX 512

typedef struct err {
  err_code code;
  char msg[ERR_MSG_MAX];
} err;

// Fills *e (when e is not NULL) and returns code, so `return err_set(...)` reads naturally.
int err_set(err *e, err_code code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

// Prepends context ("loading model x: ") to an existing message; returns e->code.
int err_prefix(err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

const char *err_code_name(err_code code);

// Several errors of one step reported as one message ("<n> <what>: a; b;
// ... and k more") so a model's author sees every problem at once. Items
// are listed while they fit in ERR_MSG_MAX (at most ERR_LIST_MAX of them);
// the total is always counted. Zero-initialise, add, then err_list_set.
#define ERR_LIST_MAX 16
typedef struct err_list {
  int n, listed;
  size_t len;
  char items[ERR_MSG_MAX];
} err_list;

void err_list_add(err_list *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Sets *e to the list (code, "<n> <what>: ...") and returns code; 0 when empty.
int err_list_set(const err_list *l, err *e, err_code code, const char *what);

// One more reason appended to a list of them joined by "; " in buf[0..cap),
// *len long so far (0 to start): a load-time check's "every reason at once"
// message, which the caller puts in an err. Where buf is full the rest is cut
// and later reasons are dropped; buf stays NUL-terminated once one is added.
void err_join(char *buf, size_t cap, size_t *len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void err_vjoin(char *buf, size_t cap, size_t *len, const char *fmt, va_list ap) __attribute__((format(printf, 4, 0)));

// Returns early with the callee's error code; the callee already filled the err.
#define TRY(expr)                   \
  do {                              \
    int try_rc_ = (expr);           \
    if (try_rc_ != 0) return try_rc_; \
  } while (0)

#ifdef __cplusplus
}
#endif

#endif
