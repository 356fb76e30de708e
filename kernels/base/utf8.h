// utf8.h: UTF-8 validation (RFC 3629), for the strings clients send: proto3
// string fields must be UTF-8, and what a server echoes back or logs must
// not carry a client's broken bytes into another parser.
#ifndef INFERD_BASE_UTF8_H
#define INFERD_BASE_UTF8_H

#include <stdbool.h>
#include <stddef.h>

// Length (1-4) of the valid UTF-8 sequence at s[0..n), or 0 when it is not
// one (no overlongs, no surrogates, nothing above U+10FFFF). n > 0.
size_t utf8_seq_len(const unsigned char *s, size_t n);

// Whether s[0..n) is valid UTF-8 throughout (NUL bytes included as U+0000).
bool utf8_valid(const char *s, size_t n);

#endif
