// mix.c: parsing and drawing the request mix (--mix) and the microsecond
// spans of the cancel and expire kinds.
#include "clients/load/mix.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *ld_req_kind_name(int kind) {
  static const char *names[LD_N_REQ_KINDS] = {"valid", "invalid", "cancel", "expire"};
  return kind >= 0 && kind < LD_N_REQ_KINDS ? names[kind] : "?";
}

// Splits s at ':' into at most cap numbers; returns how many, -1 when a part is not a finite number.
static int split_numbers(const char *s, double *out, int cap) {
  int n = 0;
  const char *p = s;
  for (;;) {
    char *end;
    errno = 0;
    if (n == cap || !*p || *p == ':') return -1;
    double v = strtod(p, &end);
    if (errno || end == p || !isfinite(v) || (*end && *end != ':')) return -1;
    out[n++] = v;
    if (!*end) return n;
    p = end + 1;
  }
}

int ld_mix_parse(const char *s, ld_mix *m, err *e) {
  memset(m, 0, sizeof *m);
  double v[LD_N_REQ_KINDS];
  if (!s || split_numbers(s, v, LD_N_REQ_KINDS) != LD_N_REQ_KINDS)
    return err_set(e, ERR_INVALID_ARGUMENT, "--mix '%s': want VALID:INVALID:CANCEL:EXPIRE percentages, e.g. 55:5:30:10",
                   s ? s : "");
  double sum = 0;
  for (int k = 0; k < LD_N_REQ_KINDS; k++) {
    if (v[k] < 0) return err_set(e, ERR_INVALID_ARGUMENT, "--mix '%s': %s is negative", s, ld_req_kind_name(k));
    sum += v[k];
    m->pct[k] = v[k];
  }
  if (fabs(sum - 100) > 1e-6) return err_set(e, ERR_INVALID_ARGUMENT, "--mix '%s' sums to %g, not 100", s, sum);
  m->on = true;
  return 0;
}

ld_req_kind ld_mix_pick(const ld_mix *m, double u) {
  if (!m->on) return LD_REQ_VALID;
  double cum = 0;  // summed in percent, divided once: 55:5 puts the edge at exactly 0.6
  int last = LD_REQ_VALID;
  for (int k = 0; k < LD_N_REQ_KINDS; k++) {
    if (m->pct[k] <= 0) continue;
    cum += m->pct[k];
    last = k;
    if (u < cum / 100) return (ld_req_kind)k;
  }
  return (ld_req_kind)last;  // rounding left u at or past the last edge
}

int ld_span_parse(const char *s, uint64_t min_us, ld_span *out, err *e) {
  double v[2];
  int n = s ? split_numbers(s, v, 2) : -1;
  if (n < 1) return err_set(e, ERR_INVALID_ARGUMENT, "bad span '%s' (want LO:HI microseconds)", s ? s : "");
  double lo = v[0], hi = n == 2 ? v[1] : v[0];
  if (lo != floor(lo) || hi != floor(hi))
    return err_set(e, ERR_INVALID_ARGUMENT, "span '%s': whole microseconds only", s);
  if (lo < (double)min_us)
    return err_set(e, ERR_INVALID_ARGUMENT, "span '%s': LO must be >= %llu", s, (unsigned long long)min_us);
  if (hi < lo) return err_set(e, ERR_INVALID_ARGUMENT, "span '%s': HI is below LO", s);
  if (hi > 1e9) return err_set(e, ERR_INVALID_ARGUMENT, "span '%s': at most 10^9 us", s);
  out->lo_ns = (uint64_t)lo * 1000;
  out->hi_ns = (uint64_t)hi * 1000;
  return 0;
}

uint64_t ld_span_pick(const ld_span *sp, double u) {
  return sp->lo_ns + (uint64_t)(u * (double)(sp->hi_ns - sp->lo_ns) + 0.5);
}
