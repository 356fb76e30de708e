// gen_http.h: a small blocking HTTP/1.1 client for generate mode: one
// keep-alive connection per load thread, a POST of a JSON body, and the
// response's body handed over as it arrives (chunked transfer decoded by
// http_parser, the server's own parser), so streamed events are timed when
// their bytes come, not when the response ends. Plain http only.
#ifndef INFERD_CLIENTS_LOAD_GEN_HTTP_H
#define INFERD_CLIENTS_LOAD_GEN_HTTP_H

#include <stddef.h>

// Body bytes as they arrive (status already known, *status of ld_http_post);
// nonzero aborts the response (the connection is then closed).
typedef int (*ld_http_on_body)(void *ctx, const char *buf, size_t len);

typedef struct ld_http ld_http;

// "HOST:PORT" (or "http://HOST:PORT"); connects lazily. NULL when out of memory or the target is malformed.
ld_http *ld_http_create(const char *target);
void ld_http_destroy(ld_http *c);

// POST path with body as application/json. 0: a whole response was read
// (any HTTP status, in *status, set before the first body callback); the
// callback's nonzero value when it aborted; -1 on a connection, protocol or
// timeout failure (why in errbuf; *status 0 when no response came). A reused
// connection that the server had closed is opened again once, before any
// byte of the response.
int ld_http_post(ld_http *c, const char *path, const char *body, size_t len, int timeout_ms, int *status,
                 ld_http_on_body cb, void *ctx, char *errbuf, size_t cap);

#endif
