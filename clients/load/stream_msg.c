// stream_msg.c: id fields, answer scanning and error-message kinds for
// --streaming (see stream_msg.h).
#include "clients/load/stream_msg.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "clients/load/stats.h"
#include "kernels/base/err.h"

#define WT_VARINT 0
#define WT_I64 1
#define WT_LEN 2
#define WT_I32 5

// --- requests

static size_t varint_len(uint64_t v) {
  size_t n = 1;
  while (v > 0x7f) v >>= 7, n++;
  return n;
}

size_t ld_id_field(const char *id, size_t n, uint8_t *out, size_t cap) {
  size_t need = 1 + varint_len(n) + n;
  if (need > cap) return need;
  size_t k = 0;
  out[k++] = 3 << 3 | WT_LEN;
  for (uint64_t v = n;; v >>= 7) {
    out[k++] = (uint8_t)(v & 0x7f) | (v > 0x7f ? 0x80 : 0);
    if (v <= 0x7f) break;
  }
  if (n) memcpy(out + k, id, n);
  return need;
}

size_t ld_id_field_seq(uint64_t seq, uint8_t *out) {
  char digits[24];
  int n = snprintf(digits, sizeof digits, "%llu", (unsigned long long)seq);
  return ld_id_field(digits, (size_t)n, out, LD_ID_FIELD_MAX);
}

bool ld_id_parse(const uint8_t *id, size_t n, uint64_t *seq) {
  if (n == 0 || n > 20 || (n > 1 && id[0] == '0')) return false;
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++) {
    if (id[i] < '0' || id[i] > '9') return false;
    uint64_t d = (uint64_t)(id[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *seq = v;
  return true;
}

// --- answers

// Reads a varint at *p (< end); -1 when truncated or longer than 10 bytes.
static int get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  uint64_t x = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (*p >= end) return -1;
    uint8_t b = *(*p)++;
    x |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = x;
      return 0;
    }
  }
  return -1;
}

typedef struct field {
  uint32_t num;
  int wt;
  const uint8_t *data;  // WT_LEN: the bytes
  size_t len;
} field;

// The next field of [*p, end), its value skipped past; -1 when malformed.
static int next_field(const uint8_t **p, const uint8_t *end, field *f) {
  uint64_t key, n;
  if (get_varint(p, end, &key) != 0 || key >> 3 == 0 || key >> 3 > UINT32_MAX) return -1;
  f->num = (uint32_t)(key >> 3);
  f->wt = (int)(key & 7);
  f->data = NULL;
  f->len = 0;
  switch (f->wt) {
    case WT_VARINT:
      return get_varint(p, end, &n);
    case WT_I64:
    case WT_I32: {
      size_t w = f->wt == WT_I64 ? 8 : 4;
      if ((size_t)(end - *p) < w) return -1;
      *p += w;
      return 0;
    }
    case WT_LEN:
      if (get_varint(p, end, &n) != 0 || n > (uint64_t)(end - *p)) return -1;
      f->data = *p;
      f->len = (size_t)n;
      *p += n;
      return 0;
  }
  return -1;  // groups (3, 4) are not in these messages; 6, 7 do not exist
}

int ld_answer_scan(const uint8_t *buf, size_t len, ld_answer *a) {
  memset(a, 0, sizeof *a);
  const uint8_t *p = buf, *end = buf + len;
  field f;
  while (p < end) {
    if (next_field(&p, end, &f) != 0) return -1;
    if (f.num == 1) {  // error_message
      if (f.wt != WT_LEN) return -1;
      a->error = (const char *)f.data;
      a->error_len = f.len;
    } else if (f.num == 2) {  // infer_response
      if (f.wt != WT_LEN || a->resp) return -1;
      a->resp = f.data;  // set even when empty: an empty message still is one
      a->resp_len = f.len;
    }
  }
  if (!a->resp) return 0;
  p = a->resp;
  end = a->resp + a->resp_len;
  while (p < end) {
    if (next_field(&p, end, &f) != 0) return -1;
    if (f.num == 3) {  // ModelInferResponse.id: the last one wins, as when unpacking
      if (f.wt != WT_LEN) return -1;
      a->id = f.data;
      a->id_len = f.len;
    }
  }
  return 0;
}

// --- error kinds

typedef struct phrase {
  const char *text;
  int kind;
} phrase;

// Lower case. Where two apply, the one earlier in the message wins. Best
// effort: a status chosen by the server's code path, not by its wording, may
// differ (inferd's "input 'x': no shared memory region named ..." is
// NOT_FOUND on a unary call, INVALID_ARGUMENT here).
static const phrase PHRASES[] = {
    {"unknown model", ERR_NOT_FOUND},  // inferd "unknown model 'x'", Triton "Request for unknown model: ..."
    {"unknown version", ERR_NOT_FOUND},
    {"not found", ERR_NOT_FOUND},
    {"not ready", ERR_UNAVAILABLE},
    {"unavailable", ERR_UNAVAILABLE},
    {"shutting down", ERR_UNAVAILABLE},
    {"out of memory", ERR_RESOURCE_EXHAUSTED},
    {"exhausted", ERR_RESOURCE_EXHAUSTED},
    {"deadline", ERR_DEADLINE_EXCEEDED},
    {"timed out", ERR_DEADLINE_EXCEEDED},
    {"cancelled", ERR_CANCELLED},
    {"canceled", ERR_CANCELLED},
    {"input '", ERR_INVALID_ARGUMENT},  // inferd's request checks name the input first
    {"input \"", ERR_INVALID_ARGUMENT},
    {"unexpected", ERR_INVALID_ARGUMENT},  // Triton: "unexpected shape for input", "unexpected inference input"
    {"missing input", ERR_INVALID_ARGUMENT},
    {"requested output", ERR_INVALID_ARGUMENT},
    {"malformed", ERR_INVALID_ARGUMENT},
    {"batch-size", ERR_INVALID_ARGUMENT},
    {"batch size", ERR_INVALID_ARGUMENT},
    {"parameter '", ERR_INVALID_ARGUMENT},
    {"invalid", ERR_INVALID_ARGUMENT},
};

// Where the lower-case needle starts in msg[0..len), ignoring case; len when absent.
static size_t find_nocase(const char *msg, size_t len, const char *needle) {
  size_t n = strlen(needle);
  for (size_t i = 0; i + n <= len; i++) {
    size_t k = 0;
    while (k < n && tolower((unsigned char)msg[i + k]) == needle[k]) k++;
    if (k == n) return i;
  }
  return len;
}

int ld_kind_from_message(const char *msg, size_t len) {
  for (int code = 1; code <= 16; code++) {
    const char *name = ld_kind_name(code);
    size_t n = strlen(name);
    if (len >= n && memcmp(msg, name, n) == 0 && (len == n || msg[n] == ':' || msg[n] == ' ')) return code;
  }
  size_t best = len;
  int kind = LD_KIND_STREAM_ERROR;
  for (size_t i = 0; i < sizeof PHRASES / sizeof PHRASES[0]; i++) {
    size_t at = find_nocase(msg, len, PHRASES[i].text);
    if (at < best) best = at, kind = PHRASES[i].kind;
  }
  return kind;
}
