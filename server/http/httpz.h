// httpz.h: HTTP content codings (gzip, deflate) for the REST API, on zlib,
// as Triton's HTTP endpoint speaks them: a request body sent with
// Content-Encoding is inflated under a bound on its inflated size (so a
// small "zip bomb" costs at most the bound), and an answer is compressed
// when the client's Accept-Encoding asks for it. "deflate" is the zlib
// format (RFC 1950, what tritonclient and curl send); a raw deflate stream
// is accepted too, since some clients send that. Pure functions: no state,
// safe on any thread.
#ifndef INFERD_SERVER_HTTPZ_H
#define INFERD_SERVER_HTTPZ_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/base/err.h"

typedef enum srv_httpz_enc {
  SRV_HTTPZ_IDENTITY = 0,
  SRV_HTTPZ_GZIP,
  SRV_HTTPZ_DEFLATE,
  SRV_HTTPZ_UNKNOWN,  // a coding we do not speak (Triton answers 415)
} srv_httpz_enc;

// The coding a Content-Encoding value names (NULL, "" and "identity":
// identity; case-insensitive, surrounding blanks ignored). A list of codings
// ("gzip, br") is SRV_HTTPZ_UNKNOWN: nothing sends one to an inference server.
srv_httpz_enc srv_httpz_content_encoding(const char *value);

// The coding to answer in for an Accept-Encoding value: gzip or deflate when
// listed with a q-value above 0 ("*" counts as gzip), the higher q winning
// and the first listed on a tie; identity otherwise (NULL included).
srv_httpz_enc srv_httpz_accept(const char *value);

// The token for a Content-Encoding header ("gzip", "deflate"; "identity").
const char *srv_httpz_name(srv_httpz_enc enc);

// Inflates in[0, n) (enc gzip or deflate) into a new buffer *out (malloc'ed,
// the caller frees it; one spare byte past *out_len) of at most max_out
// bytes. Errors: ERR_INVALID_ARGUMENT for a corrupt or truncated stream or
// bytes after its end, ERR_RESOURCE_EXHAUSTED when the inflated body would
// pass max_out (HTTP 413), ERR_INTERNAL when out of memory or enc is not
// gzip/deflate; *out is then untouched.
int srv_httpz_inflate(srv_httpz_enc enc, const void *in, size_t n, size_t max_out, uint8_t **out, size_t *out_len,
                      err *e);

// Compresses in[0, n) as enc (gzip or deflate) into a new buffer *out
// (malloc'ed, the caller frees it). ERR_INTERNAL when out of memory or enc
// is not gzip/deflate.
int srv_httpz_deflate(srv_httpz_enc enc, const void *in, size_t n, uint8_t **out, size_t *out_len, err *e);

#endif
