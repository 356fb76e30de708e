// gen_sse.h: Server-Sent Events as generate mode reads them (the WHATWG
// event-stream rules it needs: "data:" lines joined by newlines, an event
// dispatched at a blank line, comments and other fields skipped, LF or CRLF
// line ends, bytes arriving in any split), and the two payloads it meets:
// Triton's generate extension ({"output_ids": [...]} or {"error": "..."}) and
// OpenAI's completions chunks ({"choices": [{"text": ...}], "usage": {...}},
// "[DONE]", {"error": {"message": ...}}). Pure: no I/O.
#ifndef INFERD_CLIENTS_LOAD_GEN_SSE_H
#define INFERD_CLIENTS_LOAD_GEN_SSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// Called once per event with its data (NUL-terminated, len bytes; events
// without data lines are not dispatched). Nonzero stops the parser: later
// feeds return that value at once.
typedef int (*ld_sse_on_event)(void *ctx, const char *data, size_t len);

typedef struct ld_sse ld_sse;

// NULL when out of memory.
ld_sse *ld_sse_create(ld_sse_on_event cb, void *ctx);
void ld_sse_destroy(ld_sse *p);
// Clears what a previous stream left (a connection's next response).
void ld_sse_reset(ld_sse *p);
// 0, the callback's nonzero value, or -1 when out of memory (a line over 64 MiB counts so).
int ld_sse_feed(ld_sse *p, const char *buf, size_t len);
// Events seen so far.
uint64_t ld_sse_events(const ld_sse *p);

// {"output_ids": [...], ...}: 0 and *n_tokens its length; {"error": msg}: 1
// and msg in errbuf; anything else: -1 and why in errbuf.
int ld_gen_parse_tokens_event(const char *data, size_t len, int64_t *n_tokens, char *errbuf, size_t cap);

typedef struct ld_oai_chunk {
  bool done;            // "data: [DONE]"
  bool has_choice;      // choices[0] present
  size_t text_len;      // bytes of choices[0].text
  bool finished;        // choices[0].finish_reason is a string
  int64_t prompt_tokens, completion_tokens;  // usage's; -1 when absent (usage null or missing)
} ld_oai_chunk;

// One chunk (or a whole non-streamed completion, which has the same keys).
// 0 parsed; 1 an error object (its message in errbuf); -1 not a completion
// (why in errbuf).
int ld_gen_parse_openai_chunk(const char *data, size_t len, ld_oai_chunk *out, char *errbuf, size_t cap);

#endif
