// http_parse.c: a request's bytes into a request (nodejs http-parser's
// callbacks: the request target, headers as "name\0value\0" pairs, the body)
// and the limits that apply while it is read: header bytes (431), the body
// limit (413), the body budget across all connections (503), and the
// rate-limited incident lines those and the other limits write. It sits at the
// bottom of the transport: it calls nothing of http_conn.c, http_accept.c or
// http.c, which call into it (tests/unit/check_circles.py keeps it so), and it
// touches a connection's parse state only, never its socket.
#include <http_parser.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/http/http.h"
#include "server/http/http_internal.h"

// Rough bytes a header line costs beyond its name and value (": ", CRLF).
#define HEADER_LINE_OVERHEAD 4
// Buffers a connection keeps between requests (body, headers) are
// freed when larger than this: an idle keep-alive connection that once sent
// a 1 MiB body must not hold 1 MiB (ten thousand of them would hold 10 GB).
#define KEEP_BUF_MAX (16 * 1024)
// A body refused for its declared Content-Length is read and dropped whole up
// to this much, so a client still sending it gets to read the 413 rather than
// a reset (tests/integration/test_rest.py sends 2.3 MB at a 2 MB limit).
#define DRAIN_DECLARED_MAX (64u * 1024 * 1024)

// --- incident lines and the body budget

// One line for an incident of class k, unless one went out less than
// SRV_HTTP_NOTE_MS ago; the next one says how many came meanwhile.
void srv_http__note(srv_http *h, int k, const char *what) {
  h->notes[k].count++;
  h->notes[k].total++;
  if (!h->lim.note) return;
  uint64_t now = uv_now(h->loop);
  if (h->notes[k].last_ms && now - h->notes[k].last_ms < SRV_HTTP_NOTE_MS) return;
  char msg[320];
  snprintf(msg, sizeof msg, "HTTP port %d: %s (%llu time%s since the last such line)", h->port, what,
           (unsigned long long)h->notes[k].count, h->notes[k].count == 1 ? "" : "s");
  h->notes[k].last_ms = now ? now : 1;
  h->notes[k].count = 0;
  h->lim.note(h->lim.note_arg, msg);
}

// Grows this request's body reservation to total bytes: -1 when the budget
// across all connections cannot take it (nothing reserved then).
static int body_reserve(conn *c, uint64_t total) {
  srv_http *h = c->srv;
  if (total <= c->body_reserved) return 0;
  uint64_t more = total - c->body_reserved;
  if (h->lim.body_budget && h->body_held + more > h->lim.body_budget) return -1;
  h->body_held += more;
  c->body_reserved = total;
  return 0;
}

void srv_http__body_release(conn *c) {
  c->srv->body_held -= c->body_reserved;
  c->body_reserved = 0;
}

// The request's buffers once it was handled: large ones go (see KEEP_BUF_MAX).
void srv_http__trim_buffers(conn *c) {
  srv_http__body_release(c);
  if (c->body_cap > KEEP_BUF_MAX) {
    free(c->body);
    c->body = NULL;
    c->body_cap = 0;
  }
  if (c->hdrs_cap > KEEP_BUF_MAX) {
    free(c->hdrs);
    c->hdrs = NULL;
    c->hdrs_cap = c->hdrs_len = 0;
  }
}

// --- parser callbacks (parser->data is the conn)

static int count_header(conn *c, size_t len) {
  c->header_bytes += len;
  if (c->header_bytes > SRV_HTTP_MAX_HEADER) {
    c->fail_status = 431;
    return -1;
  }
  return 0;
}

static int on_message_begin(http_parser *p) {
  conn *c = p->data;
  srv_http__body_release(c);
  c->url_len = 0;
  c->header_bytes = 0;
  c->body_bytes = 0;
  c->hdrs_len = 0;
  c->hdr_last = 0;
  c->fail_status = 0;
  return 0;
}

// Appends n bytes (and, with nul, a terminating '\0' first) to the header store.
static int hdr_append(conn *c, int nul, const char *at, size_t n) {
  size_t need = c->hdrs_len + n + 2;
  if (need > c->hdrs_cap) {
    size_t cap = c->hdrs_cap ? c->hdrs_cap : 1024;
    while (cap < need) cap *= 2;
    char *q = realloc(c->hdrs, cap);
    if (!q) {
      c->fail_status = 500;
      return -1;
    }
    c->hdrs = q;
    c->hdrs_cap = cap;
  }
  if (nul) c->hdrs[c->hdrs_len++] = '\0';
  memcpy(c->hdrs + c->hdrs_len, at, n);
  c->hdrs_len += n;
  return 0;
}

static int on_url(http_parser *p, const char *at, size_t len) {
  conn *c = p->data;
  if (count_header(c, len) != 0) return -1;
  if (c->url_len + len + 1 > c->url_cap) {
    size_t cap = c->url_cap ? c->url_cap : 256;
    while (cap < c->url_len + len + 1) cap *= 2;
    char *u = realloc(c->url, cap);
    if (!u) {
      c->fail_status = 500;
      return -1;
    }
    c->url = u;
    c->url_cap = cap;
  }
  memcpy(c->url + c->url_len, at, len);
  c->url_len += len;
  c->url[c->url_len] = '\0';
  return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t len) {
  conn *c = p->data;
  if (count_header(c, len + HEADER_LINE_OVERHEAD) != 0) return -1;
  int rc = hdr_append(c, c->hdr_last == 2, at, len);
  c->hdr_last = 1;
  return rc;
}

static int on_header_value(http_parser *p, const char *at, size_t len) {
  conn *c = p->data;
  if (count_header(c, len) != 0) return -1;
  // a field without value callbacks still gets its (empty) value below
  int rc = hdr_append(c, c->hdr_last == 1, at, len);
  c->hdr_last = 2;
  return rc;
}

// 1 when the request target's path (before any '?') ends with suffix.
static int path_ends_with(const conn *c, const char *suffix) {
  size_t n = 0;
  while (n < c->url_len && c->url[n] != '?' && c->url[n] != '#') n++;
  size_t k = strlen(suffix);
  return n >= k && memcmp(c->url + n - k, suffix, k) == 0;
}

static int on_headers_complete(http_parser *p) {
  conn *c = p->data;
  if (c->hdr_last && hdr_append(c, 1, "", 0) != 0) return -1;  // ends the last value
  if (c->hdr_last == 1 && hdr_append(c, 1, "", 0) != 0) return -1;  // a field without value
  c->hdr_last = 0;
  c->max_body = SRV_HTTP_MAX_BODY;
  if (c->srv->max_body_large > SRV_HTTP_MAX_BODY && path_ends_with(c, SRV_HTTP_LARGE_BODY_SUFFIX))
    c->max_body = c->srv->max_body_large;
  c->phase = 2;
  c->phase_ms = c->win_ms = uv_now(c->srv->loop);
  c->win_bytes = 0;
  int over = (p->flags & F_CONTENTLENGTH) && p->content_length > c->max_body;
  // the declared length is reserved against the budget of all connections
  // before any of it is read (Content-Length 0 reserves nothing)
  if (!over && (p->flags & F_CONTENTLENGTH) && p->content_length && body_reserve(c, p->content_length) != 0) {
    srv_http__note(c->srv, NOTE_BUDGET, "request bodies in flight at --http-max-body-bytes-in-flight: answered 503");
    c->fail_status = 503;
    over = 1;
  }
  if (over) {
    if (!c->fail_status) c->fail_status = 413;
    if (p->content_length <= DRAIN_DECLARED_MAX) c->drain_max = (size_t)p->content_length + DRAIN_MAX;
    return -1;  // anything but 0, 1 and 2 is an error for http-parser
  }
  // the declared length is allocated at once (one allocation for large bodies)
  if ((p->flags & F_CONTENTLENGTH) && p->content_length + 1 > c->body_cap) {
    char *b = realloc(c->body, (size_t)p->content_length + 1);
    if (!b) {
      c->fail_status = 500;
      return -1;
    }
    c->body = b;
    c->body_cap = (size_t)p->content_length + 1;
  }
  return 0;
}

static int on_body(http_parser *p, const char *at, size_t len) {
  conn *c = p->data;
  if (c->body_bytes + len > c->max_body) {
    c->fail_status = 413;
    return -1;
  }
  // a chunked body is reserved as it comes (a declared length already is)
  if (body_reserve(c, c->body_bytes + len) != 0) {
    srv_http__note(c->srv, NOTE_BUDGET, "request bodies in flight at --http-max-body-bytes-in-flight: answered 503");
    c->fail_status = 503;
    return -1;
  }
  if (c->body_bytes + len + 1 > c->body_cap) {  // chunked: grows by doubling
    size_t cap = c->body_cap ? c->body_cap : 4096;
    while (cap < c->body_bytes + len + 1) cap *= 2;
    char *b = realloc(c->body, cap);
    if (!b) {
      c->fail_status = 500;
      return -1;
    }
    c->body = b;
    c->body_cap = cap;
  }
  memcpy(c->body + c->body_bytes, at, len);
  c->body_bytes += len;
  c->body[c->body_bytes] = '\0';  // JSON parsers may want a string
  return 0;
}

static int on_message_complete(http_parser *p) {
  conn *c = p->data;
  // Read here: http_should_keep_alive is defined in this callback.
  c->keep_alive = http_should_keep_alive(p);
  c->phase = 0;
  // Stop after this message so it is answered before the next is parsed.
  http_parser_pause(p, 1);
  return 0;
}

const http_parser_settings srv_http__parser_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

const char *srv_http_request_header(const srv_http_request *req, const char *name) {
  const char *p = req->headers_, *end = p ? p + req->headers_len_ : NULL;
  while (p && p < end) {
    const char *value = p + strlen(p) + 1;
    if (value >= end) return NULL;
    if (strcasecmp(p, name) == 0) return value;
    p = value + strlen(value) + 1;
  }
  return NULL;
}
