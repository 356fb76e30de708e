// mix.h: the open loop's request mix (--mix VALID:INVALID:CANCEL:EXPIRE).
// Each scheduled request is drawn as one of four kinds, so a soak can load a
// server with what production sees besides good requests:
//   valid    the request as built; the only kind whose latency is measured
//   invalid  the first input one element longer in its last dim (a wrong
//            shape: INVALID_ARGUMENT wherever the model fixes that dim)
//   cancel   a valid request the client cancels (grpc_call_cancel) a random
//            time in --cancel-after-us after sending it
//   expire   a valid request with a deadline drawn from --expire-us, too
//            short to meet (DEADLINE_EXCEEDED, or answered in time)
// Every outcome is counted by kind and final status (stats.h).
#ifndef INFERD_CLIENTS_LOAD_MIX_H
#define INFERD_CLIENTS_LOAD_MIX_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/base/err.h"

typedef enum ld_req_kind { LD_REQ_VALID = 0, LD_REQ_INVALID, LD_REQ_CANCEL, LD_REQ_EXPIRE, LD_N_REQ_KINDS } ld_req_kind;

// "valid", "invalid", "cancel", "expire"; "?" out of range.
const char *ld_req_kind_name(int kind);

typedef struct ld_mix {
  bool on;                     // false: every request is valid
  double pct[LD_N_REQ_KINDS];  // percentages, summing to 100
} ld_mix;

// "55:5:30:10": four non-negative numbers summing to 100 (within 1e-6).
int ld_mix_parse(const char *s, ld_mix *m, err *e);
// The kind of the request whose uniform draw is u in [0, 1).
ld_req_kind ld_mix_pick(const ld_mix *m, double u);

// A closed interval of nanoseconds, parsed from "LO:HI" (or "X": LO = HI) microseconds.
typedef struct ld_span {
  uint64_t lo_ns, hi_ns;
} ld_span;

// Needs min_us <= LO <= HI <= 10^9 (whole microseconds).
int ld_span_parse(const char *s, uint64_t min_us, ld_span *out, err *e);
// lo + u * (hi - lo), u in [0, 1).
uint64_t ld_span_pick(const ld_span *sp, double u);

#endif
