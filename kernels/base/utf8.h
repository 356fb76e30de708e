// utf8.h: UTF-8 validation (RFC 3629), for the strings clients send: proto3
// string fields must be UTF-8, and what a server echoes back or logs must
// not carry a client's broken bytes into another parser. The escapers below
// are the only ones: messages to clients and log lines both use them.
#ifndef INFERD_BASE_UTF8_H
#define INFERD_BASE_UTF8_H

#include <stdbool.h>
#include <stddef.h>

// Length (1-4) of the valid UTF-8 sequence at s[0..n), or 0 when it is not
// one (no overlongs, no surrogates, nothing above U+10FFFF). n > 0.
size_t utf8_seq_len(const unsigned char *s, size_t n);

// Whether s[0..n) is valid UTF-8 throughout (NUL bytes included as U+0000).
bool utf8_valid(const char *s, size_t n);

// Whether the valid sequence s[0..len) (len from utf8_seq_len) is a
// character that must not reach a log line or a terminal raw though it is
// valid: a C1 control (U+0080-U+009F: U+0085 ends a line for some readers,
// U+009B opens a terminal escape), a line or paragraph separator (U+2028,
// U+2029: JSON log shippers and JavaScript viewers split lines there) or a
// bidi embedding, override or isolate (U+202A-U+202E, U+2066-U+2069: they
// reorder what follows on screen, "Trojan Source").
bool utf8_hides_in_line(const unsigned char *s, size_t len);

// Whether s[0..n) holds a byte utf8_escape_controls would rewrite.
bool utf8_has_controls(const char *s, size_t n);

// s[0..n) with \n, \r, \t written as such and every other C0 control, DEL,
// byte that is not UTF-8 and character utf8_hides_in_line names written as
// \xHH (one per byte), for messages sent to clients that quote what a client
// sent: safe to print, not reversible (backslashes stay as they are). Writes
// at most cap - 1 bytes and a NUL (cap > 0), dropping the last escape or
// character that does not fit whole; returns the length written.
size_t utf8_escape_controls(char *dst, size_t cap, const char *s, size_t n);

// As utf8_escape_controls, and a backslash written as \\ too, for log lines
// (server/obs/log.c): every escape then reads back unambiguously, and a
// client cannot write a literal "\n" that passes for an escaped newline.
size_t utf8_escape_line(char *dst, size_t cap, const char *s, size_t n);

#endif
