// engine/llm/jinja.h: a Jinja2 subset interpreter, enough for Hugging Face
// chat templates, rendering as transformers' apply_chat_template does
// (trim_blocks, lstrip_blocks, loop controls, its tojson, raise_exception and
// strftime_now). A construct outside the subset fails the load naming it and
// where; render-time problems are errors with a message, never a crash.
// docs/models.md ("Decoder LLMs: chat templates") lists what is supported.
#ifndef INFERD_ENGINE_LLM_JINJA_H
#define INFERD_ENGINE_LLM_JINJA_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base/err.h"

typedef struct cJSON cJSON;
typedef struct eng_jinja eng_jinja;

typedef struct eng_jinja_opts {
  // strftime_now's clock: seconds since the epoch, formatted in UTC. NULL:
  // the real clock. Tests inject a fixed one.
  int64_t (*now)(void *ctx);
  void *now_ctx;
  size_t max_output;  // bytes; 0: 64 MiB. A render past it fails (RESOURCE_EXHAUSTED).
  size_t max_memory;  // bytes a render may allocate; 0: 256 MiB.
} eng_jinja_opts;

// A template is immutable once created: several threads may render it at once.

// Parses template text (len bytes, UTF-8). NULL with *e set (INVALID_ARGUMENT
// for a syntax error, UNIMPLEMENTED for a construct outside the subset, both
// naming line and column).
eng_jinja *eng_jinja_create(const char *text, size_t len, err *e);
void eng_jinja_destroy(eng_jinja *t);

// Renders with the variables of `vars` (a cJSON object; JSON numbers with no
// fraction become ints, as Python's json.loads makes them; null is None).
// On success *out is a malloc'd NUL-terminated string (the caller frees it)
// of *out_len bytes. On failure *out is NULL and *e says why:
// raise_exception(msg) gives FAILED_PRECONDITION with msg exactly as the
// message; other render errors INVALID_ARGUMENT with the line and column.
int eng_jinja_render(const eng_jinja *t, const cJSON *vars, const eng_jinja_opts *opts, char **out,
                     size_t *out_len, err *e);

#endif
