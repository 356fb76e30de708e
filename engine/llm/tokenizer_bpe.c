// engine/llm/tokenizer_bpe.c: the BPE model as tokenizers' models/bpe runs
// it: a word's characters looked up (continuing_subword_prefix,
// end_of_word_suffix, byte_fallback to <0xXX> tokens, unk fused or not),
// then merged lowest rank first, leftmost first among equal ranks, through a
// binary heap over a linked list of symbols (word.rs's merge_all, whose
// stale-entry rule is kept so ties resolve exactly as there). ignore_merges
// (Llama 3) takes a word that is itself a token whole. Also the small
// helpers every file uses: growable buffers, UTF-8, the byte-level table.
#include <stdlib.h>
#include <string.h>

#include "engine/llm/tokenizer_internal.h"

// --- buffers, UTF-8, the byte-level table

int tok__buf_put(tok_buf *b, const void *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + n + 1) cap *= 2;
    char *nb = realloc(b->b, cap);
    if (!nb) return -1;
    b->b = nb, b->cap = cap;
  }
  if (n) memcpy(b->b + b->n, s, n);
  b->n += n;
  b->b[b->n] = 0;
  return 0;
}

void tok__buf_free(tok_buf *b) {
  free(b->b);
  b->b = NULL, b->n = b->cap = 0;
}

int tok__ids_put(eng_tok_ids *o, int32_t id) {
  if (o->n == o->cap) {
    size_t cap = o->cap ? o->cap * 2 : 64;
    int32_t *p = realloc(o->ids, cap * sizeof *p);
    if (!p) return -1;
    o->ids = p, o->cap = cap;
  }
  o->ids[o->n++] = id;
  return 0;
}

uint32_t tok__utf8_next(const char *s, size_t n, size_t *len) {
  const unsigned char *u = (const unsigned char *)s;
  if (u[0] < 0x80 || n < 2) return *len = 1, u[0];
  if (u[0] < 0xE0) return *len = 2, ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F);
  if (u[0] < 0xF0 || n < 4)
    return *len = 3, ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
  *len = 4;
  return ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) | ((uint32_t)(u[2] & 0x3F) << 6) |
         (u[3] & 0x3F);
}

size_t tok__utf8_put(uint32_t cp, char out[4]) {
  if (cp < 0x80) return out[0] = (char)cp, 1;
  if (cp < 0x800) return out[0] = (char)(0xC0 | (cp >> 6)), out[1] = (char)(0x80 | (cp & 0x3F)), 2;
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | (cp >> 12)), out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (cp >> 18)), out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

// Length of the maximal prefix of s[0..n) that starts a well-formed UTF-8
// sequence (Unicode's "maximal subpart"), and whether it is complete.
static size_t utf8_subpart(const unsigned char *s, size_t n, int *complete) {
  unsigned char c = s[0];
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;
  *complete = 0;
  if (c < 0x80) return *complete = 1, 1;
  if (c >= 0xC2 && c <= 0xDF)
    need = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    need = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else
    return 1;
  size_t i = 1;
  for (; i < need && i < n; i++) {
    unsigned char d = s[i];
    unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
    if (d < l || d > h) return i;
  }
  if (i == need) *complete = 1;
  return i;
}

int tok__utf8_lossy(const char *s, size_t n, tok_buf *out) {
  const unsigned char *u = (const unsigned char *)s;
  size_t i = 0, run = 0;  // s[run..i) valid, not yet copied
  while (i < n) {
    int complete;
    size_t k = utf8_subpart(u + i, n - i, &complete);
    if (complete) {
      i += k;
      continue;
    }
    if (tok__buf_put(out, s + run, i - run) || tok__buf_put(out, "\xEF\xBF\xBD", 3)) return -1;
    i += k;
    run = i;
  }
  return tok__buf_put(out, s + run, n - run);
}

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves,
// the other 68 take 256 + their rank among them: 0x00-0x20 (33 of them),
// 0x7F-0xA0 (34), 0xAD.
static uint32_t bytelevel_cp(uint8_t b) {
  if (b <= 0x20) return 256u + b;
  if (b >= 0x7F && b <= 0xA0) return 256u + 33u + (b - 0x7Fu);
  if (b == 0xAD) return 256u + 67u;
  return b;
}

void tok__bytelevel_char(uint8_t byte, char out[4], size_t *len) { *len = tok__utf8_put(bytelevel_cp(byte), out); }

int tok__bytelevel_byte(uint32_t cp) {
  if (cp < 256) return cp <= 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD ? -1 : (int)cp;
  if (cp < 256 + 33) return (int)(cp - 256);
  if (cp < 256 + 67) return (int)(cp - 256 - 33 + 0x7F);
  return cp == 256 + 67 ? 0xAD : -1;
}

// --- the vocabulary map and the merges

static uint64_t hash_bytes(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h;
}

static uint64_t hash_pair(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  return k;
}

int32_t tok__vocab_find(const eng_tok *t, const char *s, size_t n) {
  if (!t->vmap_cap) return -1;
  size_t m = t->vmap_cap - 1;
  for (size_t i = hash_bytes(s, n) & m;; i = (i + 1) & m) {
    int32_t id = t->vmap[i];
    if (id < 0) return -1;
    if (t->vocab_len[id] == n && memcmp(t->vocab[id], s, n) == 0) return id;
  }
}

int tok__vocab_build(eng_tok *t) {
  size_t cap = 16;
  while (cap < (size_t)t->n_vocab * 2) cap *= 2;
  t->vmap = malloc(cap * sizeof *t->vmap);
  if (!t->vmap) return -1;
  memset(t->vmap, 0xff, cap * sizeof *t->vmap);
  t->vmap_cap = cap;
  for (int32_t id = 0; id < t->n_vocab; id++) {
    if (!t->vocab[id]) continue;
    size_t i = hash_bytes(t->vocab[id], t->vocab_len[id]) & (cap - 1);
    while (t->vmap[i] >= 0) i = (i + 1) & (cap - 1);
    t->vmap[i] = id;
  }
  return 0;
}

int tok__merges_alloc(eng_tok *t, size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap *= 2;
  t->mkeys = malloc(cap * sizeof *t->mkeys);
  t->mrank = malloc(cap * sizeof *t->mrank);
  t->mnew = malloc(cap * sizeof *t->mnew);
  if (!t->mkeys || !t->mrank || !t->mnew) return -1;
  memset(t->mkeys, 0xff, cap * sizeof *t->mkeys);
  t->mcap = cap;
  return 0;
}

int tok__merge_add(eng_tok *t, int32_t a, int32_t b, uint32_t rank, int32_t id) {
  uint64_t k = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
  size_t m = t->mcap - 1;
  for (size_t i = hash_pair(k) & m;; i = (i + 1) & m) {
    if (t->mkeys[i] == k || t->mkeys[i] == ~0ull) {
      t->mkeys[i] = k, t->mrank[i] = rank, t->mnew[i] = id;
      return 0;
    }
  }
}

static bool merge_find(const eng_tok *t, int32_t a, int32_t b, uint32_t *rank, int32_t *id) {
  if (!t->mcap) return false;
  uint64_t k = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
  size_t m = t->mcap - 1;
  for (size_t i = hash_pair(k) & m;; i = (i + 1) & m) {
    if (t->mkeys[i] == ~0ull) return false;
    if (t->mkeys[i] == k) {
      *rank = t->mrank[i], *id = t->mnew[i];
      return true;
    }
  }
}

// --- one word

typedef struct sym {
  int32_t c;
  int32_t prev, next;
  uint32_t len;  // bytes of the word; 0 once merged into its left neighbour
} sym;

typedef struct mrg {
  uint32_t rank;
  uint32_t pos;
  int32_t id;
} mrg;

static bool mrg_less(mrg a, mrg b) {
  return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos;
}

typedef struct heap {
  mrg *h;
  size_t n, cap;
} heap;

static int heap_push(heap *q, mrg m) {
  if (q->n == q->cap) {
    size_t cap = q->cap ? q->cap * 2 : 32;
    mrg *p = realloc(q->h, cap * sizeof *p);
    if (!p) return -1;
    q->h = p, q->cap = cap;
  }
  size_t i = q->n++;
  while (i > 0 && mrg_less(m, q->h[(i - 1) / 2])) {
    q->h[i] = q->h[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  q->h[i] = m;
  return 0;
}

static mrg heap_pop(heap *q) {
  mrg top = q->h[0], last = q->h[--q->n];
  size_t i = 0;
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, s = i;
    mrg best = last;
    if (l < q->n && mrg_less(q->h[l], best)) s = l, best = q->h[l];
    if (r < q->n && mrg_less(q->h[r], best)) s = r;
    if (s == i) break;
    q->h[i] = q->h[s];
    i = s;
  }
  if (q->n) q->h[i] = last;
  return top;
}

typedef struct word {
  sym *s;
  size_t n, cap;
} word;

static int word_add(word *w, int32_t c, uint32_t len) {
  if (w->n == w->cap) {
    size_t cap = w->cap ? w->cap * 2 : 32;
    sym *p = realloc(w->s, cap * sizeof *p);
    if (!p) return -1;
    w->s = p, w->cap = cap;
  }
  if (w->n) w->s[w->n - 1].next = (int32_t)w->n;
  w->s[w->n] = (sym){c, (int32_t)w->n - 1, -1, len};
  w->n++;
  return 0;
}

static int merge_all(const eng_tok *t, word *w) {
  heap q = {0};
  uint32_t rank;
  int32_t id;
  int rc = 0;
  for (size_t i = 0; i + 1 < w->n && !rc; i++)
    if (merge_find(t, w->s[i].c, w->s[i + 1].c, &rank, &id)) rc = heap_push(&q, (mrg){rank, (uint32_t)i, id});
  while (q.n && !rc) {
    mrg top = heap_pop(&q);
    sym *cur = &w->s[top.pos];
    if (cur->len == 0 || cur->next == -1) continue;
    sym right = w->s[cur->next];
    int32_t nid;
    if (!merge_find(t, cur->c, right.c, &rank, &nid) || nid != top.id) continue;
    w->s[cur->next].len = 0;
    cur->c = top.id, cur->len += right.len, cur->next = right.next;
    if (right.next >= 0) w->s[right.next].prev = (int32_t)top.pos;
    if (cur->prev >= 0 && merge_find(t, w->s[cur->prev].c, cur->c, &rank, &id))
      rc = heap_push(&q, (mrg){rank, (uint32_t)cur->prev, id});
    if (!rc && cur->next >= 0 && merge_find(t, cur->c, w->s[cur->next].c, &rank, &id))
      rc = heap_push(&q, (mrg){rank, top.pos, id});
  }
  free(q.h);
  return rc;
}

int tok__bpe_word(const eng_tok *t, const char *s, size_t n, eng_tok_ids *out) {
  if (t->ignore_merges) {
    int32_t id = tok__vocab_find(t, s, n);
    if (id >= 0) return tok__ids_put(out, id);
  }
  word w = {0};
  tok_buf tmp = {0};
  int32_t unk = -1;
  uint32_t unk_len = 0;
  int rc = 0;
  size_t pl = t->cont_prefix ? strlen(t->cont_prefix) : 0, sl = t->word_suffix ? strlen(t->word_suffix) : 0;
  for (size_t i = 0; i < n && !rc;) {
    size_t cl;
    tok__utf8_next(s + i, n - i, &cl);
    const char *piece = s + i;
    size_t plen = cl;
    if ((i > 0 && pl) || (i + cl == n && sl)) {
      tmp.n = 0;
      if ((i > 0 && pl && tok__buf_put(&tmp, t->cont_prefix, pl)) || tok__buf_put(&tmp, s + i, cl) ||
          (i + cl == n && sl && tok__buf_put(&tmp, t->word_suffix, sl))) {
        rc = -1;
        break;
      }
      piece = tmp.b, plen = tmp.n;
    }
    int32_t id = tok__vocab_find(t, piece, plen);
    if (id >= 0) {
      if (unk >= 0) rc = word_add(&w, unk, unk_len), unk = -1;
      if (!rc) rc = word_add(&w, id, (uint32_t)cl);
    } else {
      bool done = false;
      if (t->byte_fallback) {
        bool all = true;
        for (size_t k = 0; k < plen; k++) all = all && t->byte_ids[(unsigned char)piece[k]] >= 0;
        if (all) {
          // tokenizers adds these without flushing a pending unk first
          for (size_t k = 0; k < plen && !rc; k++) rc = word_add(&w, t->byte_ids[(unsigned char)piece[k]], 1);
          done = true;
        }
      }
      if (!done && t->unk_id >= 0) {
        if (unk >= 0 && t->fuse_unk)
          unk_len += (uint32_t)cl;
        else {
          if (unk >= 0) rc = word_add(&w, unk, unk_len);
          unk = t->unk_id, unk_len = (uint32_t)cl;
        }
      }
    }
    i += cl;
  }
  if (!rc && unk >= 0) rc = word_add(&w, unk, unk_len);
  if (!rc) rc = merge_all(t, &w);
  for (size_t i = 0; i < w.n && !rc; i++)
    if (w.s[i].len) rc = tok__ids_put(out, w.s[i].c);
  free(w.s);
  tok__buf_free(&tmp);
  return rc;
}
