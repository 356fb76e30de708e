// http.h: the server's small HTTP/1.1 endpoint on the libuv loop (health,
// /metrics, later a dashboard). This module is only the transport: it
// accepts connections, parses requests (nodejs http-parser), and hands each
// complete request to one handler that the caller owns, which decides the
// routes. Everything here runs on the loop thread; none of it is thread-safe.
#ifndef INFERD_SERVER_HTTP_H
#define INFERD_SERVER_HTTP_H

#include <stddef.h>
#include <uv.h>

#include "kernels/base/err.h"
#include "server/http/http_tls.h"

// Limits: a request whose request line plus headers exceed SRV_HTTP_MAX_HEADER
// bytes is answered 431, one whose body exceeds SRV_HTTP_MAX_BODY is answered
// 413; both then close the connection.
#define SRV_HTTP_MAX_HEADER (16 * 1024)
#define SRV_HTTP_MAX_BODY (1024 * 1024)
// A connection with no traffic (nothing read, no write finished) for this
// long is closed; srv_http_set_idle_timeout changes it.
#define SRV_HTTP_IDLE_MS 60000

typedef struct srv_http srv_http;

// Bodies of requests whose path ends with this suffix may be larger (see
// srv_http_set_large_body): KServe v2 inference requests carry tensors.
#define SRV_HTTP_LARGE_BODY_SUFFIX "/infer"

typedef struct srv_http_pending srv_http_pending;  // a response the handler gives later

// Valid only during the handler call. path is the raw (not percent-decoded)
// path of the request target ("/v2/health/ready"), query what follows '?' (NULL when none).
// body is the whole request body (NULL when empty); headers are read with
// srv_http_request_header.
typedef struct srv_http_request {
  const char *method;  // "GET", "HEAD", "POST", ...
  const char *path;
  const char *query;
  const char *body;
  size_t body_len;
  size_t body_max;  // the body limit this request was read under (a decoded body keeps to it too)
  const char *headers_;  // private: "name\0value\0" pairs
  size_t headers_len_;
  void *conn_;  // private: for srv_http_defer
} srv_http_request;

// The value of the request's header `name` (case-insensitive), or NULL.
const char *srv_http_request_header(const srv_http_request *req, const char *name);

// Filled by the handler. status defaults to 200 and content_type (NULL) to
// "text/plain; charset=utf-8". When free_body is set the endpoint takes body
// (malloc'ed) and frees it; otherwise it copies body before the handler's
// call returns, so body may point at the handler's own or static memory.
// headers: extra header lines ("Name: value\r\n" each), sent as given.
typedef struct srv_http_response {
  int status;
  const char *content_type;
  char *body;
  size_t len;
  int free_body;
  char headers[128];
} srv_http_response;

// Called on the loop thread for each complete request, in arrival order on a
// connection. For HEAD the handler answers as for GET; the endpoint sends the
// headers (with the body's Content-Length) and drops the body. The handler
// may call srv_http_close; requests not yet answered are then dropped.
typedef void (*srv_http_handler)(void *ctx, const srv_http_request *req, srv_http_response *resp);

// Called from the handler: the answer to req will be given later with
// srv_http_complete, and resp is ignored. The connection parses nothing
// more (pipelined requests wait) until then, and reads nothing, so a client
// that leaves meanwhile is noticed when the answer is written; the idle sweep
// spares it.
// NULL when out of memory: the handler must then answer through resp.
srv_http_pending *srv_http_defer(const srv_http_request *req);

// Sends the deferred answer (loop thread only; resp as the handler fills it,
// body taken when free_body is set, copied otherwise). When the connection
// closed meanwhile (client gone, srv_http_close) the answer is dropped.
// Frees p: call exactly once per srv_http_defer.
void srv_http_complete(srv_http_pending *p, srv_http_response *resp);

// A deferred answer streamed instead (Server-Sent Events: Triton's
// generate_stream), loop thread only: the status line and headers now, with
// Transfer-Encoding: chunked (HTTP/1.1; an HTTP/1.0 body runs to the
// connection's end), then one chunk per srv_http_stream_write, then
// srv_http_stream_end, which sends the last chunk, frees p and lets the
// connection go on. begin and write return -1 once the connection is gone
// (the client left: the producer should stop); end is still called once.
int srv_http_stream_begin(srv_http_pending *p, int status, const char *content_type);
int srv_http_stream_write(srv_http_pending *p, const char *data, size_t len);
void srv_http_stream_end(srv_http_pending *p);

// Binds host:port (port 0 = any free port; host NULL or "" = all IPv4
// addresses; names are resolved once, here) and listens on loop. A busy port
// fails with ERR_UNAVAILABLE naming host:port. On failure *out is untouched
// and nothing is left on the loop, except when libuv refuses a socket that
// bound fine: that handle is then closing and frees itself once the loop runs.
int srv_http_create(uv_loop_t *loop, const char *host, int port, srv_http_handler handler, void *ctx,
                    srv_http **out, err *e);

// Requests whose path ends with SRV_HTTP_LARGE_BODY_SUFFIX may have bodies
// up to max_bytes (>= SRV_HTTP_MAX_BODY) instead of SRV_HTTP_MAX_BODY.
void srv_http_set_large_body(srv_http *h, size_t max_bytes);

// HTTPS: every connection accepted from now on speaks TLS (server/http/http_tls.h)
// and is closed when its handshake has not finished handshake_ms after
// accept (a client that sends nothing, half a ClientHello, or trickles it).
// The limits above apply to the decrypted requests. Call once, before the
// loop runs; h takes tls, also on failure, and frees it when it closes.
#define SRV_HTTP_TLS_HANDSHAKE_MS 10000
int srv_http_set_tls(srv_http *h, srv_htls_ctx *tls, uint64_t handshake_ms, err *e);

// The port actually bound (useful with port 0).
int srv_http_port(const srv_http *h);

// Closes connections idle for `ms` from now on (0: never). Loop thread only.
int srv_http_set_idle_timeout(srv_http *h, uint64_t ms, err *e);

// What one client, or many, can make the endpoint hold (issue 31). Zero
// turns a limit off. Loop thread only; applies to connections from now on.
#define SRV_HTTP_BODY_GRACE_MS 10000
typedef struct srv_http_limits {
  // Connections open at once. Past it a new connection is accepted, answered
  // "503 Service Unavailable" with Connection: close and closed at once (the
  // client learns at once instead of waiting in the backlog).
  size_t max_conns;
  // A request's line and headers must be complete this long after its first
  // byte, however the bytes trickle (slowloris); then 408 and the end.
  uint64_t header_ms;
  // Every SRV_HTTP_BODY_GRACE_MS from its headers on, a body must have
  // brought that long's worth at this rate (bytes/s), or the request gets
  // 408 and the connection ends; so must what a connection reads after its
  // last answer was written, until the client closes.
  uint64_t body_min_rate;
  // Bytes of request bodies buffered at once across all connections. A
  // body's declared Content-Length is reserved at its headers (a chunked
  // body's as it grows) and released once the handler returned; a body that
  // does not fit gets 503 with Retry-After and the connection ends.
  uint64_t body_budget;
  // One line per incident class (cap, timeouts, budget, accept errors), at
  // most every SRV_HTTP_NOTE_MS, with the count since the last; may be NULL.
  void (*note)(void *arg, const char *msg);
  void *note_arg;
} srv_http_limits;
#define SRV_HTTP_NOTE_MS 10000
int srv_http_set_limits(srv_http *h, const srv_http_limits *l, err *e);

// Bytes of request bodies reserved now (srv_http_limits.body_budget counts these).
uint64_t srv_http_body_bytes(const srv_http *h);

// What the limits did since the endpoint started, by kind (for /metrics).
typedef enum srv_http_incident {
  SRV_HTTP_REFUSED_CONNECTION,  // past max_conns: 503 and closed
  SRV_HTTP_ACCEPT_ERROR,        // accept failed (EMFILE, ENFILE, ...)
  SRV_HTTP_HEADER_TIMEOUT,      // 408: headers not complete in time
  SRV_HTTP_SLOW_BODY,           // 408: body below the minimum rate
  SRV_HTTP_BODY_BUDGET,         // 503: the body did not fit the budget
  SRV_HTTP_IDLE_EVICTED,        // at max_conns: the longest idle connection closed for a new one
  SRV_HTTP_INCIDENT_N
} srv_http_incident;
uint64_t srv_http_incidents(const srv_http *h, srv_http_incident k);

// Connections currently open (accepted and not yet closed).
size_t srv_http_connections(const srv_http *h);

// Stops listening and closes every connection (responses still queued are
// dropped). h is freed once every uv handle's close callback has run, then
// on_closed(arg) is called (on_closed may be NULL). h must not be used after
// this call. Calling it twice is a bug.
void srv_http_close(srv_http *h, void (*on_closed)(void *arg), void *arg);

// Percent-decodes one path segment [s, s+n) into out (cap bytes, NUL
// included); -1 when malformed, too long or not UTF-8 (a name that is not
// UTF-8 would be echoed into the JSON answer, which is then not JSON).
int srv_http_decode_segment(const char *s, size_t n, char *out, size_t cap);

// 1 when the JSON text s[0, n) holds a NUL byte, raw or escaped as \u0000
// (cJSON keeps it in a string whose strlen then stops there: a name or key
// would be read cut short), else 0. The answer's message, shared by every
// route that reads JSON strings, is SRV_HTTP_JSON_NUL_MSG.
int srv_http_json_nul(const char *s, size_t n);
#define SRV_HTTP_JSON_NUL_MSG "JSON strings must not contain NUL (\\u0000)"

#endif
