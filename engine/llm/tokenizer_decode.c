// engine/llm/tokenizer_decode.c: ids -> text as tokenizers' decode does it
// (each id's token, special ones dropped when asked, through the decoder
// chain: ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip; without a
// decoder the tokens joined by spaces), and the incremental decode of a
// stream (tokenizers' DecodeStream, the prefix/read offsets vLLM and TGI
// use): the ids since the last emitted boundary are decoded with the window
// before it, and text is emitted only once it grew and does not end in
// U+FFFD, which a later byte may still turn into a character.
#include <stdlib.h>
#include <string.h>

#include "engine/llm/tokenizer_internal.h"
#include "kernels/base/utf8.h"

#define FFFD "\xEF\xBF\xBD"

// A list of strings (the decoders' tokens).
typedef struct slist {
  tok_buf text;
  size_t *off, *len;
  size_t n, cap;
} slist;

static int sl_add(slist *l, const char *s, size_t n) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 16;
    size_t *o = realloc(l->off, cap * sizeof *o);
    if (!o) return -1;
    l->off = o;
    size_t *q = realloc(l->len, cap * sizeof *q);
    if (!q) return -1;
    l->len = q, l->cap = cap;
  }
  l->off[l->n] = l->text.n, l->len[l->n++] = n;
  return tok__buf_put(&l->text, s, n);
}

static void sl_free(slist *l) {
  tok__buf_free(&l->text);
  free(l->off);
  free(l->len);
  memset(l, 0, sizeof *l);
}

#define SL_S(l, i) ((l)->text.b + (l)->off[i])

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// u8::from_str_radix(two characters, 16): hex digits, or '+' and one.
static int hex_byte(char a, char b) {
  int lo = hex_digit(b), hi = a == '+' ? 0 : hex_digit(a);
  return lo < 0 || hi < 0 ? -1 : hi * 16 + lo;
}

// One decoder over in, into out (empty).
static int dec_one(const tok_dec *d, const slist *in, slist *out) {
  tok_buf b = {0};
  int rc = 0;
  switch (d->kind) {
    case TD_BYTELEVEL: {
      tok_buf raw = {0};
      for (size_t i = 0; i < in->n && !rc; i++) {
        const char *s = SL_S(in, i);
        size_t n = in->len[i], mark = raw.n;
        bool all = true;
        for (size_t k = 0; k < n && !rc && all;) {
          size_t cl;
          int by = tok__bytelevel_byte(tok__utf8_next(s + k, n - k, &cl));
          if (by < 0)
            all = false;
          else {
            char c = (char)by;
            rc = tok__buf_put(&raw, &c, 1);
          }
          k += cl;
        }
        if (!all) raw.n = mark, rc = tok__buf_put(&raw, s, n);  // a character outside the table: the token's bytes
      }
      if (!rc) rc = tok__utf8_lossy(raw.b ? raw.b : "", raw.n, &b);
      if (!rc) rc = sl_add(out, b.b ? b.b : "", b.n);
      tok__buf_free(&raw);
      break;
    }
    case TD_METASPACE:
      for (size_t i = 0; i < in->n && !rc; i++) {
        const char *s = SL_S(in, i);
        size_t n = in->len[i];
        b.n = 0;
        for (size_t k = 0; k < n && !rc;) {
          if (n - k >= d->repl_len && memcmp(s + k, d->repl, d->repl_len) == 0) {
            if (!(i == 0 && d->prepend != TP_NEVER)) rc = tok__buf_put(&b, " ", 1);
            k += d->repl_len;
          } else {
            size_t cl;
            tok__utf8_next(s + k, n - k, &cl);
            rc = tok__buf_put(&b, s + k, cl);
            k += cl;
          }
        }
        if (!rc) rc = sl_add(out, b.b ? b.b : "", b.n);
      }
      break;
    case TD_REPLACE:
      for (size_t i = 0; i < in->n && !rc; i++) {
        size_t *m = NULL, nm = 0, cm = 0, last = 0;
        const char *s = SL_S(in, i);
        b.n = 0;
        rc = tok__re_find(&d->re, s, in->len[i], &m, &nm, &cm);
        for (size_t k = 0; k < nm && !rc; k += 2) {
          rc = tok__buf_put(&b, s + last, m[k] - last);
          if (!rc) rc = tok__buf_put(&b, d->content, d->content_len);
          last = m[k + 1];
        }
        if (!rc) rc = tok__buf_put(&b, s + last, in->len[i] - last);
        if (!rc) rc = sl_add(out, b.b, b.n);
        free(m);
      }
      break;
    case TD_BYTEFALLBACK: {
      tok_buf bytes = {0};
      for (size_t i = 0; i <= in->n && !rc; i++) {
        int byte = -1;
        if (i < in->n && in->len[i] == 6) {
          const char *s = SL_S(in, i);
          if (memcmp(s, "<0x", 3) == 0 && s[5] == '>') byte = hex_byte(s[3], s[4]);
        }
        if (byte >= 0) {
          char c = (char)byte;
          rc = tok__buf_put(&bytes, &c, 1);
          continue;
        }
        if (bytes.n) {  // the run ends: as it is when UTF-8, else one U+FFFD per byte
          if (utf8_valid(bytes.b, bytes.n)) rc = sl_add(out, bytes.b, bytes.n);
          else
            for (size_t k = 0; k < bytes.n && !rc; k++) rc = sl_add(out, FFFD, 3);
          bytes.n = 0;
        }
        if (i < in->n && !rc) rc = sl_add(out, SL_S(in, i), in->len[i]);
      }
      tok__buf_free(&bytes);
      break;
    }
    case TD_FUSE:
      for (size_t i = 0; i < in->n && !rc; i++) rc = tok__buf_put(&b, SL_S(in, i), in->len[i]);
      if (!rc) rc = sl_add(out, b.b ? b.b : "", b.n);
      break;
    case TD_STRIP:
      for (size_t i = 0; i < in->n && !rc; i++) {
        const char *s = SL_S(in, i);
        size_t n = in->len[i], a = 0, z = n;
        for (size_t k = 0; k < d->start && a < n; k++) {
          if (n - a >= d->repl_len && memcmp(s + a, d->repl, d->repl_len) == 0)
            a += d->repl_len;
          else
            break;
        }
        for (size_t k = 0; k < d->stop && z > a; k++) {
          if (z - a >= d->repl_len && memcmp(s + z - d->repl_len, d->repl, d->repl_len) == 0)
            z -= d->repl_len;
          else
            break;
        }
        rc = sl_add(out, s + a, z - a);
      }
      break;
  }
  tok__buf_free(&b);
  return rc;
}

static int decode_ids(const eng_tok *t, const int32_t *ids, size_t n, bool skip, tok_buf *out) {
  slist a = {0}, b = {0};
  int rc = 0;
  for (size_t i = 0; i < n && !rc; i++) {
    int32_t id = ids[i];
    if (id < 0 || id >= t->n_ids) continue;
    int32_t ai = t->added_of[id];
    if (ai >= 0) {
      const tok_added *x = &t->added[ai];
      if (skip && x->special) continue;
      rc = x->normalized ? sl_add(&a, x->norm, x->norm_len) : sl_add(&a, x->content, x->len);
    } else if (id < t->n_vocab && t->vocab[id]) {
      rc = sl_add(&a, t->vocab[id], t->vocab_len[id]);
    }
  }
  if (t->has_decoder) {
    for (size_t k = 0; k < t->n_dec && !rc; k++) {
      rc = dec_one(&t->dec[k], &a, &b);
      slist x = a;
      a = b, b = x;
      b.n = 0, b.text.n = 0;
    }
    for (size_t i = 0; i < a.n && !rc; i++) rc = tok__buf_put(out, SL_S(&a, i), a.len[i]);
  } else {
    for (size_t i = 0; i < a.n && !rc; i++) {
      if (i) rc = tok__buf_put(out, " ", 1);
      if (!rc) rc = tok__buf_put(out, SL_S(&a, i), a.len[i]);
    }
  }
  if (!rc) rc = tok__buf_put(out, "", 0);  // a buffer even for no text
  sl_free(&a);
  sl_free(&b);
  return rc;
}

int eng_tok_decode(const eng_tok *t, const int32_t *ids, size_t n, bool skip_special, char **text, size_t *len,
                   err *e) {
  tok_buf out = {0};
  *text = NULL, *len = 0;
  if (decode_ids(t, ids, n, skip_special, &out)) {
    tok__buf_free(&out);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "tokenizer: out of memory decoding %zu ids", n);
  }
  *text = out.b, *len = out.n;
  return 0;
}

// --- streams

struct eng_tok_stream {
  const eng_tok *t;
  bool skip;
  eng_tok_ids ids;  // the window: ids from the prefix's start on
  tok_buf prefix;   // decode of ids[0..prefix_index)
  size_t prefix_index;
  tok_buf cur, delta;
};

eng_tok_stream *eng_tok_stream_create(const eng_tok *t, bool skip_special) {
  eng_tok_stream *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->t = t, s->skip = skip_special;
  if (tok__buf_put(&s->prefix, "", 0) || tok__buf_put(&s->delta, "", 0)) {
    eng_tok_stream_destroy(s);
    return NULL;
  }
  return s;
}

void eng_tok_stream_destroy(eng_tok_stream *s) {
  if (!s) return;
  free(s->ids.ids);
  tok__buf_free(&s->prefix);
  tok__buf_free(&s->cur);
  tok__buf_free(&s->delta);
  free(s);
}

static bool ends_fffd(const tok_buf *b) {
  return b->n >= 3 && memcmp(b->b + b->n - 3, FFFD, 3) == 0;
}

// Whether id is a <0xXX> token that a ByteFallback decoder will join with the
// byte tokens after it: its text may still change (a run that ends up
// invalid turns into one U+FFFD per byte, the valid bytes before included),
// so a stream holds it back until a token of another kind closes the run.
// tokenizers' DecodeStream emits such bytes at once, and then its deltas no
// longer add up to the decode.
static bool open_byte_run(const eng_tok *t, const eng_tok_ids *ids, bool skip) {
  bool fallback = false;
  for (size_t k = 0; k < t->n_dec; k++) fallback = fallback || t->dec[k].kind == TD_BYTEFALLBACK;
  if (!fallback) return false;
  for (size_t i = ids->n; i-- > 0;) {  // the last id that gives a token: skipped and unknown ones do not
    int32_t id = ids->ids[i];
    if (id < 0 || id >= t->n_ids) continue;
    if (t->added_of[id] >= 0) {
      if (skip && t->added[t->added_of[id]].special) continue;
      return false;
    }
    if (id >= t->n_vocab || !t->vocab[id]) continue;
    const char *s = t->vocab[id];
    return t->vocab_len[id] == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>' && hex_byte(s[3], s[4]) >= 0;
  }
  return false;
}

static int oom(err *e) {
  return err_set(e, ERR_RESOURCE_EXHAUSTED, "tokenizer stream: out of memory");
}

int eng_tok_stream_step(eng_tok_stream *s, int32_t id, const char **delta, size_t *len, err *e) {
  s->delta.n = 0;
  s->delta.b[0] = 0;
  *delta = s->delta.b, *len = 0;
  if (s->prefix.n == 0 && s->ids.n) {
    s->cur.n = 0;
    if (decode_ids(s->t, s->ids.ids, s->ids.n, s->skip, &s->cur)) return oom(e);
    // ids that decode to nothing yet: later text is measured from after them
    // (DecodeStream takes any text that does not end in U+FFFD here, which
    // it would have emitted already; a held byte run has not been)
    if (s->cur.n == 0) s->prefix_index = s->ids.n;
  }
  if (tok__ids_put(&s->ids, id)) return oom(e);
  s->cur.n = 0;
  if (decode_ids(s->t, s->ids.ids, s->ids.n, s->skip, &s->cur)) return oom(e);
  if (s->cur.n <= s->prefix.n || ends_fffd(&s->cur) || open_byte_run(s->t, &s->ids, s->skip)) return 0;
  if (memcmp(s->cur.b, s->prefix.b, s->prefix.n) != 0)
    return err_set(e, ERR_INTERNAL, "tokenizer stream: the text of id %d does not extend what was emitted", (int)id);
  if (tok__buf_put(&s->delta, s->cur.b + s->prefix.n, s->cur.n - s->prefix.n)) return oom(e);
  size_t new_index = s->ids.n - s->prefix_index;
  memmove(s->ids.ids, s->ids.ids + s->prefix_index, new_index * sizeof *s->ids.ids);
  s->ids.n = new_index;
  s->prefix.n = 0;
  if (decode_ids(s->t, s->ids.ids, s->ids.n, s->skip, &s->prefix)) return oom(e);
  s->prefix_index = new_index;
  *delta = s->delta.b, *len = s->delta.n;
  return 0;
}

int eng_tok_stream_finish(eng_tok_stream *s, const char **delta, size_t *len, err *e) {
  s->delta.n = 0;
  s->delta.b[0] = 0;
  *delta = s->delta.b, *len = 0;
  s->cur.n = 0;
  if (decode_ids(s->t, s->ids.ids, s->ids.n, s->skip, &s->cur)) return oom(e);
  if (s->cur.n <= s->prefix.n) return 0;
  if (memcmp(s->cur.b, s->prefix.b, s->prefix.n) != 0)
    return err_set(e, ERR_INTERNAL, "tokenizer stream: the held text does not extend what was emitted");
  if (tok__buf_put(&s->delta, s->cur.b + s->prefix.n, s->cur.n - s->prefix.n)) return oom(e);
  s->ids.n = 0, s->prefix.n = 0, s->prefix_index = 0;
  *delta = s->delta.b, *len = s->delta.n;
  return 0;
}
