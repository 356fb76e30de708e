// gen_dist.c: length distributions and random prompts (gen_dist.h).
#include "clients/load/gen_dist.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/load/rng.h"

static const char *KIND_NAMES[] = {"fixed", "uniform", "normal", "lognormal"};

static int num(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (!*s || errno || *end || !isfinite(v)) return -1;
  *out = v;
  return 0;
}

int ld_len_parse(const char *s, ld_len_dist *d, err *e) {
  memset(d, 0, sizeof *d);
  if (!s || !*s) return err_set(e, ERR_INVALID_ARGUMENT, "empty length distribution");
  char buf[128];
  if (strlen(s) >= sizeof buf) return err_set(e, ERR_INVALID_ARGUMENT, "length distribution '%s' is too long", s);
  strcpy(buf, s);
  char *part[6];
  int n = 0;
  for (char *p = buf;;) {
    if (n == 6) return err_set(e, ERR_INVALID_ARGUMENT, "length distribution '%s' has too many parts", s);
    part[n++] = p;
    char *c = strchr(p, ':');
    if (!c) break;
    *c = '\0';
    p = c + 1;
  }
  int k = -1;
  for (int i = 0; i < 4; i++)
    if (strcmp(part[0], KIND_NAMES[i]) == 0) k = i;
  double v[5];
  int nv = 0;
  if (k < 0) {  // a bare number: fixed
    if (n != 1 || num(part[0], &v[nv++]) != 0)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "unknown length distribution '%s' (want N, fixed:N, uniform:LO:HI, normal:MEAN:SD[:LO:HI] or "
                     "lognormal:MEAN:SD[:LO:HI])",
                     part[0]);
    k = LD_LEN_FIXED;
  } else {
    for (int i = 1; i < n; i++)
      if (num(part[i], &v[nv++]) != 0)
        return err_set(e, ERR_INVALID_ARGUMENT, "bad number '%s' in length distribution '%s'", part[i], s);
  }
  d->kind = (ld_len_kind)k;
  d->lo = 1;
  d->hi = LD_LEN_MAX;
  int want_lo = k == LD_LEN_FIXED ? 1 : 2, want_hi = k >= LD_LEN_NORMAL ? 4 : want_lo;
  if (nv != want_lo && nv != want_hi)
    return err_set(e, ERR_INVALID_ARGUMENT, "length distribution '%s': %s takes %d%s number(s)", s, KIND_NAMES[k],
                   want_lo, want_hi != want_lo ? " or 4" : "");
  d->a = v[0];
  d->b = nv > 1 ? v[1] : v[0];
  for (int i = 0; i < nv; i++)
    if (v[i] < 0 || v[i] > LD_LEN_MAX)
      return err_set(e, ERR_INVALID_ARGUMENT, "length distribution '%s': %g is outside [0, %d]", s, v[i], LD_LEN_MAX);
  if (nv == 4) {
    if (v[2] != floor(v[2]) || v[3] != floor(v[3]) || v[2] < 1 || v[3] < v[2])
      return err_set(e, ERR_INVALID_ARGUMENT, "length distribution '%s': bounds must be whole, 1 <= LO <= HI", s);
    d->lo = (int64_t)v[2];
    d->hi = (int64_t)v[3];
  }
  switch (d->kind) {
    case LD_LEN_FIXED:
      if (d->a != floor(d->a) || d->a < 1)
        return err_set(e, ERR_INVALID_ARGUMENT, "length '%s' must be a whole number >= 1", s);
      d->lo = d->hi = (int64_t)d->a;
      break;
    case LD_LEN_UNIFORM:
      if (d->a != floor(d->a) || d->b != floor(d->b) || d->a < 1 || d->b < d->a)
        return err_set(e, ERR_INVALID_ARGUMENT, "length distribution '%s': uniform needs whole 1 <= LO <= HI", s);
      d->lo = (int64_t)d->a;
      d->hi = (int64_t)d->b;
      break;
    case LD_LEN_NORMAL:
    case LD_LEN_LOGNORMAL:
      if (d->kind == LD_LEN_LOGNORMAL && !(d->a > 0))
        return err_set(e, ERR_INVALID_ARGUMENT, "length distribution '%s': lognormal needs MEAN > 0", s);
      break;
  }
  return 0;
}

void ld_len_str(const ld_len_dist *d, char *buf, size_t cap) {
  switch (d->kind) {
    case LD_LEN_FIXED:
      snprintf(buf, cap, "fixed:%lld", (long long)d->lo);
      break;
    case LD_LEN_UNIFORM:
      snprintf(buf, cap, "uniform:%lld:%lld", (long long)d->lo, (long long)d->hi);
      break;
    default:
      snprintf(buf, cap, "%s:%g:%g:%lld:%lld", KIND_NAMES[d->kind], d->a, d->b, (long long)d->lo, (long long)d->hi);
  }
}

double ld_rng_normal(uint64_t *rng) {
  // 1 - u is in (0, 1]: the log is finite
  double u1 = 1.0 - ld_rng_uniform(rng), u2 = ld_rng_uniform(rng);
  return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

int64_t ld_len_draw(const ld_len_dist *d, uint64_t *rng) {
  if (d->kind == LD_LEN_FIXED) return d->lo;
  if (d->kind == LD_LEN_UNIFORM)
    return d->lo + (int64_t)(ld_rng_next(rng) % (uint64_t)(d->hi - d->lo + 1));  // bias below 2^-40: harmless
  double mu = d->a, sigma = d->b;
  if (d->kind == LD_LEN_LOGNORMAL) {  // the underlying normal's parameters from the lengths' mean and sd
    double s2 = log(1.0 + (d->b * d->b) / (d->a * d->a));
    sigma = sqrt(s2);
    mu = log(d->a) - s2 / 2;
  }
  double x = 0;
  for (int tries = 0; tries < 64; tries++) {
    double z = mu + sigma * ld_rng_normal(rng);
    x = round(d->kind == LD_LEN_LOGNORMAL ? exp(z) : z);
    if (x >= (double)d->lo && x <= (double)d->hi) return (int64_t)x;
  }
  return x < (double)d->lo ? d->lo : d->hi;
}

uint64_t ld_gen_req_seed(uint64_t seed, uint64_t i, uint64_t stream) {
  uint64_t s = seed ^ 0x6a09e667f3bcc909ull;
  s = ld_rng_next(&s) ^ (i * 0x9e3779b97f4a7c15ull);
  s = ld_rng_next(&s) ^ (stream * 0xbb67ae8584caa73bull);
  return ld_rng_next(&s);
}

void ld_gen_ids(int32_t *out, int64_t n, int64_t vocab, uint64_t *rng) {
  for (int64_t i = 0; i < n; i++) out[i] = (int32_t)(ld_rng_next(rng) % (uint64_t)vocab);
}

// Common short English words: each is one token in GPT-2's, Llama's and Qwen's vocabularies
// (with its leading space), so a prompt of n words is close to n tokens.
static const char *WORDS[] = {
    "the",   "of",    "and",   "to",    "in",    "is",    "was",   "that",  "for",   "on",    "with",  "as",
    "by",    "at",    "from",  "his",   "her",   "an",    "were",  "are",   "which", "this",  "be",    "or",
    "have",  "had",   "one",   "not",   "but",   "first", "new",   "they",  "their", "after", "all",   "two",
    "its",   "also",  "time",  "year",  "when",  "into",  "other", "more",  "over",  "world", "three", "during",
    "where", "city",  "made",  "used",  "some",  "state", "most",  "would", "only",  "him",   "between", "while",
    "known", "many",  "under", "work",  "war",   "there", "house", "part",  "music", "early", "before", "school",
    "life",  "south", "north", "name",  "film",  "game",  "water", "light", "small", "large", "great", "place",
    "long",  "land",  "people", "day",  "team",  "line",  "power", "order", "book",  "group", "river", "family",
    "west",  "east",  "high",  "show",  "early", "road",  "club",  "age",   "days",  "form",  "word",  "back",
};

char *ld_gen_words(int64_t n, uint64_t *rng) {
  size_t nw = sizeof WORDS / sizeof WORDS[0], cap = (size_t)n * 9 + 1, len = 0;
  char *s = malloc(cap);
  if (!s) return NULL;
  for (int64_t i = 0; i < n; i++) {
    const char *w = WORDS[ld_rng_next(rng) % nw];
    size_t wl = strlen(w);
    if (i) s[len++] = ' ';
    memcpy(s + len, w, wl);  // every word is at most 7 letters: 8 per word with its space fits
    len += wl;
  }
  s[len] = '\0';
  return s;
}
