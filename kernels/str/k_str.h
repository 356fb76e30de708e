// kernels/str/k_str.h: STRING elements inside a plan, and their kernels:
// the wire layout (kernels/base/strwire.h) decoded into views and encoded
// back, and ONNX Cast between strings and numbers as onnxruntime does it.
//
// Why a fixed-size 32-byte element with the short strings inline: a plan
// sizes every value from its shape alone (numel x element size, per batch,
// engine/cpu/plan.c), and the index ops copy elements with memcpy (Gather,
// Concat, Expand, Transpose...). A k_str is therefore position-independent:
// up to K_STR_INLINE bytes live in the element itself (every number Cast
// prints fits: "-9223372036854775808", "-1.2345678e+308"), so a Cast to
// STRING needs no heap and its result may be copied or folded like any
// tensor; a longer string can only come from a graph input and points into
// that input's bytes, which the caller keeps for the whole run. No string
// memory is allocated per run; the plan's output edge writes the wire
// layout once at the end.
#ifndef INFERD_KERNELS_STR_K_STR_H
#define INFERD_KERNELS_STR_K_STR_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/k_ref.h"

#ifdef __cplusplus
extern "C" {
#endif

#define K_STR_INLINE 24

typedef struct k_str {
  uint64_t n;  // length in bytes
  union {
    uint8_t in[K_STR_INLINE];  // n <= K_STR_INLINE: the bytes
    const uint8_t *ptr;        // n > K_STR_INLINE: the bytes, in a graph input's buffer
  } u;
} k_str;

#ifndef __cplusplus
_Static_assert(sizeof(k_str) == 32, "k_str is the plan's 32-byte STRING element");
#endif

static inline const uint8_t *k_str_data(const k_str *s) { return s->n <= K_STR_INLINE ? s->u.in : s->u.ptr; }

// n elements of a buffer already checked to hold exactly n (strwire_check)
// into views; long ones point into buf, which must outlive them.
void k_str_from_wire(k_str *y, const uint8_t *buf, size_t n);
// The wire layout's size of n views, and the layout itself (dst holds
// k_str_wire_bytes(x, n) bytes).
size_t k_str_wire_bytes(const k_str *x, size_t n);
void k_str_to_wire(uint8_t *dst, const k_str *x, size_t n);

// Cast numbers (x of element type xt; floats of every width arrive as
// K_F32 inside a plan, K_F64 accepted too) to strings, as onnxruntime
// prints them: integers in decimal, bool as "1"/"0", floats as "%.8g" with
// "NaN", "INF", "-INF".
void k_str_from_num(k_str *y, const void *x, k_elem xt, size_t n);
// Cast strings to numbers of type yt, as onnxruntime parses them (C
// locale): signed integers with strtoll and unsigned ones and bool with
// strtoull (base 10, leading blanks skipped, the digits' prefix read:
// "12ab" is 12, "-1" as UINT8 is 255; bool: nonzero), floats with strtod
// ("1e40" as FP32 is inf). 0, or -1 with *bad the first element that holds
// no number or one out of the parse's range (onnxruntime's stoll/stod
// throw there).
int k_str_to_num(void *y, k_elem yt, const k_str *x, size_t n, size_t *bad);

#ifdef __cplusplus
}
#endif

#endif
