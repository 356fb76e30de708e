// jsonmem.h: JSON parse memory admitted before it is spent. cJSON builds a
// node of about 80 bytes (the struct and malloc's overhead) per value, so a
// body of "[]," or "{}," or small numbers takes 20 to 30 times its size as
// a tree: a 61 KB gzip body inflating to 63 MB of {} took 1.6 GB (issue 31).
// Every REST JSON body goes through srv_jsonmem_parse, which counts the
// values in one cheap pass first, estimates the tree, and admits it against
// one budget shared by all parses in flight.
#ifndef INFERD_SERVER_JSONMEM_H
#define INFERD_SERVER_JSONMEM_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/base/err.h"

typedef struct srv_jsonmem srv_jsonmem;

// budget: bytes of JSON trees in flight at once (0: no limit). Thread-safe.
int srv_jsonmem_create(uint64_t budget, srv_jsonmem **out, err *e);
void srv_jsonmem_destroy(srv_jsonmem *m);  // NULL is fine; every tree must be freed first

// What cJSON allocates parsing s[0, n), estimated from above for valid JSON:
// nodes (containers and scalars; an object member's key is its value's, not
// a node) times the node's cost, plus every string's bytes and overhead.
// One pass; strings are skipped by their escapes, so brackets, commas and
// escaped quotes inside them count for nothing. *values gets the node count
// when not NULL.
uint64_t srv_json_estimate(const char *s, size_t n, uint64_t *values);

// A parsed tree and its share of the budget.
typedef struct srv_json {
  cJSON *root;
  uint64_t held;
  srv_jsonmem *m;
} srv_json;

// Parses s[0, n) into out->root once its estimate fits the budget (m NULL:
// no budget). Errors: ERR_RESOURCE_EXHAUSTED when the estimate alone is past
// the budget (HTTP 413), ERR_UNAVAILABLE when it does not fit now beside the
// parses in flight (503), ERR_INVALID_ARGUMENT when it is not JSON (400);
// out then holds nothing. srv_json_status maps the code.
int srv_jsonmem_parse(srv_jsonmem *m, const char *s, size_t n, srv_json *out, err *e);
int srv_json_status(err_code code);

// srv_jsonmem_parse in two steps, for a caller with other checks of the
// bytes to run in between (cheapest first: a body too large is refused
// before any other pass over it, after scanning only as far as the budget
// reaches). admit reserves (out->root stays NULL); parse_admitted parses
// and on failure frees j (its share given back).
int srv_jsonmem_admit(srv_jsonmem *m, const char *s, size_t n, srv_json *out, err *e);
int srv_json_parse_admitted(srv_json *j, const char *s, size_t n, err *e);

// Frees the tree and gives its share back; the zeroed struct is fine.
void srv_json_free(srv_json *j);

#endif
