// server/core/infer_pieces.c: a ModelInferRequest that arrived in several
// slices (srv_unary_sliced_fn: HTTP/2 frames every big message), unpacked
// without first copying it into one run (issue 32: that copy of every
// ResNet-50 image was 13 % of the CQ threads' time, docs/copies.md I1).
//
// The top-level fields are walked across the pieces: every field but
// raw_input_contents is copied into one small run (names, shapes,
// parameters: some hundred bytes) and unpacked by protobuf-c, as
// unpack_request (infer.c) does for a contiguous message; each
// raw_input_contents entry is left where it lies: a pointer into its piece
// when it lies in one, else the list of pieces it spans, which the batch's
// gather (sched.c) copies from straight into the batch, or
// infer_validate.c joins into one run where the input must be read whole.
// Two passes: the first counts, the second fills what the counts sized.
#include <stdint.h>
#include <string.h>

#include "server/core/arena.h"
#include "server/core/infer_internal.h"
#include "server/grpc/wire.h"

typedef struct cursor {
  const srv_piece *v;
  size_t n, i, off;  // at byte off of piece i
} cursor;

static int next_byte(cursor *c, uint8_t *b) {
  while (c->i < c->n && c->off == c->v[c->i].n) c->i++, c->off = 0;
  if (c->i == c->n) return -1;
  *b = c->v[c->i].p[c->off++];
  return 0;
}

// A varint, its bytes appended to raw[*nraw...] (room for 10).
static int varint(cursor *c, uint64_t *v, uint8_t *raw, size_t *nraw) {
  *v = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    uint8_t b;
    if (next_byte(c, &b)) return -1;
    raw[(*nraw)++] = b;
    if (shift == 63 && b > 1) return -1;  // past 64 bits
    *v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return 0;
  }
  return -1;
}

// The next n bytes: copied to dst (when not NULL), and counted as runs in
// *runs, each written to out[*runs] (when not NULL).
static int take(cursor *c, uint64_t n, uint8_t *dst, srv_piece *out, size_t *runs) {
  while (n) {
    while (c->i < c->n && c->off == c->v[c->i].n) c->i++, c->off = 0;
    if (c->i == c->n) return -1;
    size_t k = c->v[c->i].n - c->off;
    if (k > n) k = (size_t)n;
    const uint8_t *p = c->v[c->i].p + c->off;
    if (dst) {
      memcpy(dst, p, k);
      dst += k;
    }
    if (out) out[*runs] = (srv_piece){p, k};
    (*runs)++;
    c->off += k;
    n -= k;
  }
  return 0;
}

typedef struct walk {
  size_t n_raw, n_runs, rest_len;  // counted by the first pass
  int spans;                       // some entry spans pieces
  // filled by the second pass (NULL in the first)
  uint8_t *rest;
  ProtobufCBinaryData *raw;
  srv_pieces *raw_pieces;
  srv_piece *runs;
} walk;

// One pass over the message's len bytes; -1 where it cannot follow them.
static int walk_fields(const srv_piece *v, size_t n, size_t len, walk *w) {
  cursor c = {v, n, 0, 0};
  size_t pos = 0;
  w->n_raw = w->n_runs = w->rest_len = 0;
  while (pos < len) {
    uint8_t hdr[20];
    size_t nh = 0;
    uint64_t tag, arg = 0;
    if (varint(&c, &tag, hdr, &nh) || tag >> 32 || (tag >> 3) == 0) return -1;
    uint32_t type = (uint32_t)(tag & 7);
    size_t body;  // bytes after the header
    if (type == 0) {
      if (varint(&c, &arg, hdr, &nh)) return -1;
      body = 0;
    } else if (type == 2) {
      if (varint(&c, &arg, hdr, &nh) || arg > len - pos - nh) return -1;
      body = (size_t)arg;
    } else if (type == 1 || type == 5) {
      body = type == 1 ? 8 : 4;
      if (body > len - pos - nh) return -1;
    } else {
      return -1;  // groups and unknown wire types: protobuf-c's to judge
    }
    if (type == 2 && (tag >> 3) == SRV_RAW_INPUT_FIELD) {
      size_t first = w->n_runs, runs = 0;
      if (take(&c, body, NULL, w->runs ? w->runs + first : NULL, &runs)) return -1;
      if (w->raw) {
        if (runs <= 1) {
          w->raw[w->n_raw] = (ProtobufCBinaryData){.len = body, .data = runs ? (uint8_t *)w->runs[first].p : (uint8_t *)""};
          w->raw_pieces[w->n_raw] = (srv_pieces){NULL, 0};
        } else {
          w->raw[w->n_raw] = (ProtobufCBinaryData){.len = body, .data = NULL};
          w->raw_pieces[w->n_raw] = (srv_pieces){w->runs + first, runs};
        }
      }
      w->spans |= runs > 1;
      w->n_runs += runs;
      w->n_raw++;
    } else {
      size_t runs = 0;
      if (w->rest) memcpy(w->rest + w->rest_len, hdr, nh);
      if (take(&c, body, w->rest ? w->rest + w->rest_len + nh : NULL, NULL, &runs)) return -1;
      w->rest_len += nh + body;
    }
    pos += nh + body;
  }
  return 0;
}

uint8_t *srv_infer__join_pieces(srv_arena *a, const srv_piece *v, size_t n, size_t len) {
  uint8_t *buf = srv_arena_alloc(a, len ? len : 1);
  if (buf)
    for (size_t i = 0, o = 0; i < n; o += v[i].n, i++) memcpy(buf + o, v[i].p, v[i].n);
  return buf;
}

int srv_infer__unpack_pieces(srv_arena *a, const srv_piece *v, size_t n, size_t len,
                             Inference__ModelInferRequest **msg, srv_pieces **raw_pieces, err *e) {
  walk w = {0};
  if (walk_fields(v, n, len, &w)) return -1;
  w.rest = srv_arena_alloc(a, w.rest_len ? w.rest_len : 1);
  w.raw = srv_arena_alloc(a, (w.n_raw ? w.n_raw : 1) * sizeof *w.raw);
  w.raw_pieces = srv_arena_alloc(a, (w.n_raw ? w.n_raw : 1) * sizeof *w.raw_pieces);
  w.runs = srv_arena_alloc(a, (w.n_runs ? w.n_runs : 1) * sizeof *w.runs);
  if (!w.rest || !w.raw || !w.raw_pieces || !w.runs) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  if (walk_fields(v, n, len, &w)) return -1;  // the same bytes as the first pass
  // before the unpack, which would cut a string at its NUL (raw_input_contents are bytes, not strings)
  TRY(srv_wire_strings_no_nul(&inference__model_infer_request__descriptor, w.rest, w.rest_len, e));
  Inference__ModelInferRequest *m =
      inference__model_infer_request__unpack(srv_arena_protobuf(a), w.rest_len, w.rest);
  if (!m) return err_set(e, ERR_INVALID_ARGUMENT, "malformed ModelInferRequest: the message does not parse");
  if (w.n_raw) {
    m->n_raw_input_contents = w.n_raw;
    m->raw_input_contents = w.raw;
  }
  *raw_pieces = w.spans ? w.raw_pieces : NULL;
  *msg = m;
  return 0;
}
