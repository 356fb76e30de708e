// kernels/sample/k_sample.c: k_sample_rows_ref (k_sample.h), the C
// reference of kernels/sample/k_sample.cu, step for step: the same
// passes, the same per-lane partial sums and the same reduction tree, so the
// two agree bit for bit (the GPU test compares ids exactly).
#include "kernels/sample/k_sample.h"

#include "kernels/k_ref.h"
#include "kernels/sample/k_sample_rule.h"

#define LANES K_SAMPLE_LANES
#define NONE UINT64_MAX

// One row's state: A the keys' high words (ks_desc32 of the tempered
// logits), B the probabilities (0 outside top_k's candidates).
typedef struct row {
  const uint32_t *a;
  const float *b;
  uint32_t V;
} row;

// The CUDA block's sum: lanes of 32 (a warp) by the shuffle tree, lane 0
// of each into a second warp, the same tree.
static double tree32(double *v) {
  for (int o = 16; o > 0; o >>= 1)
    for (int t = 0; t + o < 32; t++) v[t] += v[t + o];
  return v[0];
}

static double block_sum(double *part) {
  double w[LANES / 32];
  for (int i = 0; i < LANES / 32; i++) w[i] = tree32(part + 32 * i);
  return tree32(w);
}

// The mass of the ids whose key is <= c.
static double mass_le(const row *r, uint64_t c) {
  double part[LANES];
  for (uint32_t t = 0; t < LANES; t++) {
    double acc = 0;
    for (uint32_t i = t; i < r->V; i += LANES) acc += ks_key(r->a[i], i) <= c ? (double)r->b[i] : 0.0;
    part[t] = acc;
  }
  return block_sum(part);
}

static int64_t count_le(const row *r, uint64_t c) {
  int64_t n = 0;
  for (uint32_t i = 0; i < r->V; i++) n += ks_key(r->a[i], i) <= c;
  return n;
}

// The smallest cut c (an id's key) with ok(c), ok monotone, false below
// the top id's key `top` and true at cap (or at every key when cap is NONE;
// ok(c) = ok(cap) past cap): the high word by bisection between top's and
// cap's, then the id among that word's ties. The answer is the definition's
// whatever the search visits, so narrowing the range changes only the passes.
typedef int (*pred)(const row *r, uint64_t c, uint64_t cap, const void *arg);
static uint64_t search(const row *r, pred ok, uint64_t top, uint64_t cap, const void *arg) {
  uint32_t lo = (uint32_t)(top >> 32), hi = cap == NONE ? 0xffffffffu : (uint32_t)(cap >> 32);
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (ok(r, ks_key(mid, 0xffffffffu), cap, arg))
      hi = mid;
    else
      lo = mid + 1;
  }
  uint32_t h = lo, il = 0, ih = r->V - 1;
  while (il < ih) {
    uint32_t mid = il + (ih - il) / 2;
    if (ok(r, ks_key(h, mid), cap, arg))
      ih = mid;
    else
      il = mid + 1;
  }
  return ks_key(h, il);
}

static int count_ge(const row *r, uint64_t c, uint64_t cap, const void *arg) {
  (void)cap;
  return count_le(r, c) >= *(const int64_t *)arg;
}
static int mass_ge(const row *r, uint64_t c, uint64_t cap, const void *arg) {
  return mass_le(r, c < cap ? c : cap) >= *(const double *)arg;
}
static int mass_gt(const row *r, uint64_t c, uint64_t cap, const void *arg) {
  return mass_le(r, c < cap ? c : cap) > *(const double *)arg;
}

static float load(const void *x, dtype dt, size_t i) {
  if (dt == DT_FP32) return ((const float *)x)[i];
  uint16_t h = ((const uint16_t *)x)[i];
  if (dt == DT_BF16) {
    uint32_t b = (uint32_t)h << 16;
    float v;
    memcpy(&v, &b, sizeof v);
    return v;
  }
  float v;
  k_f16_to_f32(&v, &h, 1);
  return v;
}

static int32_t sample_row(const void *x, dtype dt, uint32_t V, const k_sample_param *p, const int32_t *seen,
                          float *scratch) {
  float *l = scratch;
  uint32_t *a = (uint32_t *)scratch;  // the same storage, as keys after the tempering pass
  float *b = scratch + V;
  for (uint32_t i = 0; i < V; i++) l[i] = ks_canon(load(x, dt, i));
  if (p->repetition_penalty > 0 && p->repetition_penalty != 1)
    for (int64_t j = 0; j < p->n_seen; j++) {
      int32_t t = seen[p->seen_off + j];
      if (t >= 0 && (uint32_t)t < V) l[t] = ks_penalize(ks_canon(load(x, dt, (size_t)t)), p->repetition_penalty);
    }
  int greedy = !(p->temperature > 0);
  float inv_t = greedy ? 1.0f : 1.0f / p->temperature;
  uint64_t top = NONE;
  for (uint32_t i = 0; i < V; i++) {
    float v = greedy ? l[i] : ks_canon(l[i] * inv_t);
    a[i] = ks_desc32(v);
    uint64_t k = ks_key(a[i], i);
    if (k < top) top = k;
  }
  int32_t top_id = (int32_t)(uint32_t)top;
  float mx = ks_undesc32((uint32_t)(top >> 32));
  if (greedy || isinf(mx)) return top_id;
  row r = {a, b, V};
  // top_k: the cut at the k-th id in order
  uint64_t ck = NONE;
  if (p->top_k > 0 && (uint32_t)p->top_k < V) {
    int64_t k = p->top_k;
    ck = search(&r, count_ge, top, NONE, &k);
  }
  // the softmax over the candidates
  double part[LANES];
  for (uint32_t t = 0; t < LANES; t++) {
    double acc = 0;
    for (uint32_t i = t; i < V; i += LANES) {
      b[i] = ks_key(a[i], i) <= ck ? ks_expf(ks_undesc32(a[i]) - mx) : 0.0f;
      acc += (double)b[i];
    }
    part[t] = acc;
  }
  double sum = block_sum(part);
  for (uint32_t i = 0; i < V; i++) b[i] = (float)((double)b[i] / sum);
  // top_p: the smallest head whose mass reaches it (all when none does)
  uint64_t cut = ck;
  if (p->top_p > 0 && p->top_p < 1) {
    double tp = p->top_p;
    if (mass_le(&r, cut) >= tp) cut = search(&r, mass_ge, top, cut, &tp);
  }
  // min_p: the head before the first id below min_p x the top probability
  if (p->min_p > 0) {
    float floor_p = p->min_p * b[top_id];
    uint64_t first = NONE;
    for (uint32_t i = 0; i < V; i++) {
      uint64_t k = ks_key(a[i], i);
      if (k > top && k <= cut && b[i] < floor_p && k < first) first = k;
    }
    if (first != NONE) cut = first - 1;
  }
  // the draw: the first id whose head's mass exceeds u x the kept mass (the last kept when rounding leaves none)
  double target = p->u * mass_le(&r, cut);
  if (mass_le(&r, cut) > target) return (int32_t)(uint32_t)search(&r, mass_gt, top, cut, &target);
  uint64_t last = 0;
  for (uint32_t i = 0; i < V; i++) {
    uint64_t k = ks_key(a[i], i);
    if (k <= cut && k > last) last = k;
  }
  return (int32_t)(uint32_t)last;
}

int k_sample_rows_ref(int32_t *ids, const void *x, dtype dt, size_t rows, size_t vocab, const k_sample_param *p,
                      const int32_t *seen, float *scratch) {
  if (dt != DT_FP32 && dt != DT_FP16 && dt != DT_BF16) return -1;
  if (vocab == 0 || vocab > (size_t)INT32_MAX) return -1;
  size_t es = dt == DT_FP32 ? 4 : 2;
  for (size_t r = 0; r < rows; r++)
    if (p[r].mode) ids[r] = sample_row((const uint8_t *)x + r * vocab * es, dt, (uint32_t)vocab, &p[r], seen, scratch);
  return 0;
}
