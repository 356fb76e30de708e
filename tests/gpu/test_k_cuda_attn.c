// Tests kernels/attn/k_attn.cu (k_attn_cuda) against the C reference k_attn_ref
// at several shapes: head sizes 32, 64 and 128 (and odd ones: 1, 20, 80,
// d != dv), key counts below, at and across tile edges, one query row and
// many; masks: none, a padding mask per batch row, a causal [Sq, Sk] mask,
// a full one with a fully masked row (NaN, or 0 with nan_zero), keys and
// values shared by every head (stride 0); a divisor read on the device
// (float and half); FP32 and FP16 storage; and one launch captured in a
// CUDA graph and replayed. Argument errors are checked with no GPU too.
// FP16 with d == dv == 64 or 128 runs on k_attn_cuda's tensor-core kernel
// (the rest on the CUDA-core one): test_tc_cases sweeps it over Sq, Sk in
// {1, 7, 64, 128, 200} (one block's 64 rows and one tile's 32 keys, below,
// at and across their edges) with every mask kind, nan_zero on and off,
// NaN and +inf scores, [B, H] = [2, 3] heads, NaN between the heads'
// slabs (nothing past a slab is read), and captured-graph replays. Both of
// its staging variants: 16-byte runs (Sk % 8 == 0, no gap: 23 of the 50
// sweep cases) and 2-byte elements (the other 27).
// Tolerances. FP32: rtol 1e-4, atol 1e-5: the kernel sums scores and
// outputs in float in another order than the reference's double, and
// expf is within 2 ulp; over at most a few hundred keys of O(1) values that
// stays near 1e-6 relative. FP16: the reference runs on the half-rounded
// inputs (and mask); the kernel's only extra error is the output's rounding
// to half (2^-11 relative) plus the float sums: rtol 2e-3, atol 2e-3.
// The tensor-core kernel also rounds the softmax weights P to half before
// P V: at most 2^-11 * max|v| (|v| <= 1 here) more, so the same rtol 2e-3,
// atol 2e-3 (a numpy model of its arithmetic on these inputs stays within
// an eighth of that).
// Two tensor-core kernels: tc2 (k_attn_cuda's default; test_tc2_cases
// runs it first on its own edges, by name, beside tc1 on the same cases)
// and tc1 (k_attn__tc1_cuda); the sweep runs on both. Every launch is
// awaited under tk_await's watchdog, so a kernel that never ends fails the
// test naming its case instead of hanging it.
// The heads' layout (test_layout_cases): Q, K, V and O as the projections
// write them, [B, S, H, D] (rows H*D apart, heads D apart, K read
// key-major as Kt), what the attention pass hands the kernels once it took
// the exporters' Transposes in; on both kernels (FP32 and odd head sizes on
// the CUDA-core one, FP16 d 64/128 on tensor cores) and both staging
// variants (16-byte runs; 2-byte elements with Q, K and V one element off
// 16-byte alignment). The reference's own strides are checked against the
// transposed copies in tests/unit/engine/test_attn.c.
#include "test_k_cuda_util.h"

static uint16_t f2h(float f) {
  uint16_t h;
  k_f32_to_f16(&h, &f, 1);
  return h;
}

typedef struct acase {
  int64_t b, h, sq, sk, d, dv;
  int mask;      // 0 none, 1 padding [B,1,1,Sk], 2 causal [Sq,Sk], 3 full [B,H,Sq,Sk] with row 0 off,
                 // 4 as 3 plus a NaN score in row 1 and a +inf one in row 2 (of (0, 0))
  int kv_shared; // K and V one per batch row, shared by the heads (stride 0)
  int nan_zero;
  int divisor;   // 0 none, 1 float, 2 half
  int64_t gap;   // elements of NaN after each head's Q, Kt and V slab (its stride grows by gap)
  int layout;    // 0 packed heads; 1 [B, S, H, D] rows (K key-major), no gap or sharing; 2 as 1
                 // with Q, K and V one element past 16-byte alignment
} acase;

// A device copy of h at byte offset off of a fresh allocation (the base, to free).
static void *to_dev_at(const void *h, size_t bytes, size_t off) {
  void *d = tk_dev_alloc(bytes + off);
  if (bytes) TK_CUDA(cudaMemcpy((char *)d + off, h, bytes, cudaMemcpyHostToDevice));
  return d;
}

typedef int (*attn_fn)(void *, const void *, const void *, const void *, const void *,
                       const void *, k_elem, k_elem, const k_attn_args *, cudaStream_t, err *);

// One case on entry fn (named fname in the messages) against the reference.
static void run_case_on(tk_rng *r, const acase *c, int half, int capture, attn_fn fn,
                        const char *fname) {
  k_attn_args a = {.b = c->b, .h = c->h, .sq = c->sq, .sk = c->sk, .d = c->d, .dv = c->dv,
                   .scale = 1.0f / sqrtf((float)(c->d ? c->d : 1)), .nan_zero = c->nan_zero};
  int64_t hk = c->kv_shared ? 1 : c->h;
  int64_t qs = c->sq * c->d + c->gap, ks = c->d * c->sk + c->gap, vs = c->sk * c->dv + c->gap;
  a.q_sh = qs, a.q_sb = c->h * qs;
  a.k_sh = c->kv_shared ? 0 : ks, a.k_sb = hk * ks;
  a.v_sh = c->kv_shared ? 0 : vs, a.v_sb = hk * vs;
  a.o_sh = c->sq * c->dv, a.o_sb = c->h * a.o_sh;
  if (c->layout) {  // [B, S, H, D]: the same element counts, other strides
    int64_t hd = c->h * c->d, hdv = c->h * c->dv;
    a.q_sb = c->sq * hd, a.q_sh = c->d, a.q_ss = hd;
    a.k_sb = c->sk * hd, a.k_sh = c->d, a.k_sd = 1, a.k_sk = hd;
    a.v_sb = c->sk * hdv, a.v_sh = c->dv, a.v_ss = hdv;
    a.o_sb = c->sq * hdv, a.o_sh = c->dv, a.o_ss = hdv;
  }
  size_t nm = 0;
  if (c->mask == 1) nm = (size_t)(c->b * c->sk), a.m_sb = c->sk, a.m_sk = 1;
  if (c->mask == 2) nm = (size_t)(c->sq * c->sk), a.m_sq = c->sk, a.m_sk = 1;
  if (c->mask >= 3) {
    nm = (size_t)(c->b * c->h * c->sq * c->sk);
    a.m_sk = 1, a.m_sq = c->sk, a.m_sh = c->sq * c->sk, a.m_sb = c->h * c->sq * c->sk;
  }
  size_t nq = (size_t)(c->b * c->h * qs), nk = (size_t)(c->b * hk * ks);
  size_t nv = (size_t)(c->b * hk * vs), no = (size_t)(c->b * c->h * c->sq * c->dv);
  float *q = tk_xmalloc(nq * 4), *kt = tk_xmalloc(nk * 4), *v = tk_xmalloc(nv * 4);
  float *m = tk_xmalloc(nm * 4 + 4), *want = tk_xmalloc(no * 4), *got = tk_xmalloc(no * 4);
  tk_fill(r, q, nq, -2, 2);
  tk_fill(r, kt, nk, -2, 2);
  tk_fill(r, v, nv, -1, 1);
  for (int64_t s = 0; c->gap && s < c->b * c->h; s++) {  // the gaps: NaN nobody may read
    for (int64_t g = 0; g < c->gap; g++) q[s * qs + qs - 1 - g] = NAN;
    if (s >= c->b * hk) continue;
    for (int64_t g = 0; g < c->gap; g++) kt[s * ks + ks - 1 - g] = v[s * vs + vs - 1 - g] = NAN;
  }
  for (size_t i = 0; i < nm; i++) m[i] = tk_uniform(r, -1, 0);
  if (c->mask == 1)  // the last third of each row's keys off, batch row 1 entirely
    for (int64_t b = 0; b < c->b; b++)
      for (int64_t j = 0; j < c->sk; j++)
        if (j >= c->sk - c->sk / 3 || b == 1) m[b * c->sk + j] = -INFINITY;
  if (c->mask == 2)
    for (int64_t i = 0; i < c->sq; i++)
      for (int64_t j = 0; j < c->sk; j++)
        if (j > i + (c->sk - c->sq)) m[i * c->sk + j] = -INFINITY;
  if (c->mask >= 3) {
    for (size_t i = 0; i < nm; i++)
      if (tk_next(r) % 4 == 0) m[i] = -INFINITY;
    for (int64_t j = 0; j < c->sk; j++) m[j] = -INFINITY;  // (0, 0, 0, :)
  }
  if (c->mask == 4 && c->sq > 2 && c->sk > 0) {  // undefined rows of another kind: NaN, +inf
    m[1 * c->sk + c->sk / 2] = NAN;
    m[2 * c->sk] = INFINITY;
  }
  float dvsr = 1.5f;
  // FP16: the reference sees the half-rounded operands
  size_t counts[4] = {nq, nk, nv, nm};
  float *host[4] = {q, kt, v, m};
  uint16_t *hbuf[4] = {0};
  for (int t = 0; t < 4; t++) {
    if (!half) continue;
    hbuf[t] = tk_xmalloc(counts[t] * 2 + 2);
    k_f32_to_f16(hbuf[t], host[t], counts[t]);
    k_f16_to_f32(host[t], hbuf[t], counts[t]);
  }
  k_attn_args ra = a;
  if (c->divisor) ra.scale = a.scale / dvsr;
  if (getenv("TK_VERBOSE"))  // before the work: a case that never ends names itself
    fprintf(stderr, "  start %s f%d [%lld,%lld,%lld,%lld,%lld,%lld] mask %d gap %lld layout %d%s\n", fname, half ? 16 : 32,
            (long long)c->b, (long long)c->h, (long long)c->sq, (long long)c->sk, (long long)c->d,
            (long long)c->dv, c->mask, (long long)c->gap, c->layout, capture ? " captured" : "");
  k_attn_ref(want, q, kt, v, c->mask ? m : NULL, &ra);
  if (getenv("TK_VERBOSE")) fprintf(stderr, "  reference done\n");
  size_t es = half ? 2 : 4, off = c->layout == 2 ? es : 0;
  void *bq = to_dev_at(half ? (void *)hbuf[0] : q, nq * es, off);
  void *bk = to_dev_at(half ? (void *)hbuf[1] : kt, nk * es, off);
  void *bv = to_dev_at(half ? (void *)hbuf[2] : v, nv * es, off);
  void *dq = (char *)bq + off, *dk = (char *)bk + off, *dv = (char *)bv + off;
  void *dm = c->mask ? tk_to_dev(half ? (void *)hbuf[3] : m, nm * es) : NULL;
  uint16_t dh = f2h(dvsr);
  void *ddiv = c->divisor == 1 ? tk_to_dev(&dvsr, 4) : c->divisor == 2 ? tk_to_dev(&dh, 2) : NULL;
  void *bo = tk_dev_alloc(no * es + off), *dout = (char *)bo + off;  // layout 2: O unaligned too
  k_elem et = half ? K_F16 : K_F32, det = c->divisor == 2 ? K_F16 : K_F32;
  char what[200];
  snprintf(what, sizeof what, "%s: %s [%lld,%lld,%lld,%lld,%lld,%lld] mask %d%s%s div %d gap %lld%s%s",
           fname, half ? "f16" : "f32", (long long)c->b, (long long)c->h, (long long)c->sq,
           (long long)c->sk, (long long)c->d, (long long)c->dv, c->mask, c->kv_shared ? " kv-shared" : "", c->nan_zero ? " nan_zero" : "", c->divisor,
           (long long)c->gap, c->layout == 1 ? " bshd" : c->layout == 2 ? " bshd-unaligned" : "",
           capture ? " captured" : "");
  if (capture) {
    cudaStream_t st;
    cudaGraph_t gr;
    cudaGraphExec_t ex;
    TK_CUDA(cudaStreamCreate(&st));
    TK_CUDA(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    err e = {0};
    int rc = fn(dout, dq, dk, dv, dm, ddiv, det, et, &a, st, &e);
    TK_CUDA(cudaStreamEndCapture(st, &gr));
    CHECK_EQ_INT(rc, 0);
    TK_CUDA(cudaGraphInstantiate(&ex, gr, 0));
    TK_CUDA(cudaMemset(dout, 0, no * es));
    TK_CUDA(cudaGraphLaunch(ex, st));
    TK_CUDA(cudaGraphLaunch(ex, st));  // a replay computes the same again
    tk_await(st, what);
    TK_CUDA(cudaStreamSynchronize(st));
    TK_CUDA(cudaGraphExecDestroy(ex));
    TK_CUDA(cudaGraphDestroy(gr));
    TK_CUDA(cudaStreamDestroy(st));
  } else {
    TK_OK(fn(dout, dq, dk, dv, dm, ddiv, det, et, &a, NULL, TK_E));
    tk_await(NULL, what);
  }
  if (half) {
    uint16_t *gh = tk_xmalloc(no * 2);
    tk_from_dev(gh, dout, no * 2);
    k_f16_to_f32(got, gh, no);
    free(gh);
  } else {
    tk_from_dev(got, dout, no * 4);
  }
  tk_compare(what, got, want, no, half ? 2e-3 : 1e-4, half ? 2e-3 : 1e-5);
  TK_CUDA(cudaFree(bq));
  TK_CUDA(cudaFree(bk));
  TK_CUDA(cudaFree(bv));
  if (dm) TK_CUDA(cudaFree(dm));
  if (ddiv) TK_CUDA(cudaFree(ddiv));
  TK_CUDA(cudaFree(bo));
  for (int t = 0; t < 4; t++) free(hbuf[t]);
  free(q), free(kt), free(v), free(m), free(want), free(got);
}

static void run_case(tk_rng *r, const acase *c, int half, int capture) {
  run_case_on(r, c, half, capture, k_attn_cuda, "k_attn_cuda");
}

static void test_cases(void) {
  static const acase cases[] = {
      {2, 4, 16, 16, 64, 64, 1, 0, 1, 0, 0, 0},    // BERT-like, padding mask, batch row 1 off
      {2, 4, 16, 16, 64, 64, 1, 0, 0, 0, 0, 0},    // the same without nan_zero: that row NaN
      {1, 2, 128, 128, 64, 64, 2, 0, 0, 1, 0, 0},  // GPT-like causal, divisor float
      {1, 2, 100, 100, 32, 32, 2, 0, 0, 2, 0, 0},  // causal, divisor half
      {2, 3, 9, 77, 128, 128, 3, 0, 1, 0, 0, 0},   // full mask with a row off, d 128
      {1, 12, 197, 197, 64, 64, 0, 0, 0, 0, 0, 0}, // ViT-B-like, no mask
      {3, 2, 1, 33, 32, 32, 1, 0, 1, 0, 0, 0},     // one query row, keys across a tile edge
      {2, 4, 7, 31, 80, 20, 0, 1, 0, 0, 0, 0},     // d != dv, K/V shared by the heads
      {1, 1, 5, 1, 1, 1, 0, 0, 0, 0, 0, 0},        // tiny
      {1, 3, 40, 64, 20, 128, 2, 0, 0, 0, 0, 0},   // causal with Sk > Sq (offset diagonal)
      {1, 1, 3, 0, 8, 8, 0, 0, 1, 0, 0, 0},        // no keys: the empty product, 0
      {1, 1, 3, 0, 8, 8, 0, 0, 0, 0, 0, 0},        // the same without nan_zero: still 0
  };
  tk_rng r = {77};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int half = 0; half < 2; half++) run_case(&r, &cases[i], half, 0);
  run_case(&r, &cases[2], 1, 1);
  run_case(&r, &cases[0], 0, 1);
}

// tc2_kernel (k_attn_cuda's tensor-core default, also k_attn__tc2_cuda),
// before the sweep: its edges are 128 query rows per block, keys staged
// 128 at a time and walked 64 at a time, so Sq and Sk at, below and one
// past 64 and 128; BERT's [B, S, H, D] layout with its padding mask (K
// key-major, 16-byte staging), packed Kt with 16-byte staging (Sk % 8 ==
// 0) and 2-byte staging (a gap, an odd Sk, or layout 2's operands one
// element off 16 bytes, where O is off 4 bytes too and goes out per half);
// NaN and +inf scores with and without nan_zero, a fully masked row,
// causal with Sk < Sq (whole rows masked), both divisors, K/V shared by
// the heads, d 128, no keys; and captured replays. Each on k_attn__tc2_cuda
// by name (so it keeps its test if the default goes back to tc1) and on
// k_attn__tc1_cuda, the kernel it replaced.
static void test_tc2_cases(void) {
  static const acase cases[] = {
      // b  h   sq   sk   d    dv  mask kvs nz div gap layout
      {3, 12, 128, 128, 64, 64, 1, 0, 1, 0, 0, 1},    // BERT: bshd, padding mask, batch row 1 off
      {2, 4, 128, 128, 64, 64, 1, 0, 0, 0, 0, 1},     // the same without nan_zero: NaN rows
      {2, 3, 128, 64, 64, 64, 3, 0, 1, 1, 0, 0},      // one step of 64 keys, packed Kt, 16-byte
      {2, 3, 64, 65, 64, 64, 4, 0, 0, 2, 0, 0},       // a second step with one key; NaN, +inf rows
      {2, 3, 129, 127, 64, 64, 4, 0, 1, 0, 0, 1},     // a second block of one row; NaN, +inf, nan_zero
      {2, 3, 130, 129, 64, 64, 2, 0, 0, 0, 0, 2},     // a second chunk with one key, unaligned
      {2, 3, 200, 200, 128, 128, 4, 0, 0, 1, 5, 0},   // d 128, chunks 128 + 72, gaps: 2-byte
      {2, 3, 200, 128, 128, 128, 2, 0, 1, 2, 0, 1},   // causal Sk < Sq: 72 rows fully masked
      {1, 2, 7, 33, 128, 128, 3, 1, 0, 0, 0, 0},      // K/V shared by the heads, odd Sk: 2-byte
      {3, 2, 1, 128, 64, 64, 1, 0, 1, 0, 0, 2},       // one query row, unaligned
      {2, 3, 197, 197, 64, 64, 0, 0, 0, 0, 0, 1},     // ViT-B-like
      {2, 3, 70, 0, 64, 64, 0, 0, 0, 0, 0, 0},        // no keys: 0
      {2, 3, 70, 0, 128, 128, 1, 0, 1, 0, 0, 1},      // no keys, bshd
  };
  tk_rng r = {9001};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    run_case_on(&r, &cases[i], 1, 0, k_attn__tc2_cuda, "k_attn__tc2_cuda");
    run_case_on(&r, &cases[i], 1, 0, k_attn__tc1_cuda, "k_attn__tc1_cuda");
  }
  run_case_on(&r, &cases[0], 1, 1, k_attn__tc2_cuda, "k_attn__tc2_cuda");  // captured, replayed
  run_case_on(&r, &cases[6], 1, 1, k_attn__tc2_cuda, "k_attn__tc2_cuda");
}

// The tensor-core kernel (FP16, d == dv == 64 or 128): every (Sq, Sk) pair
// of the list at both head sizes, the mask kind, nan_zero, the divisor,
// K/V sharing and the gaps between slabs varying along the sweep so each
// appears at small, tile-sized and ragged shapes; then captured replays.
// The sweep runs through k_attn_cuda (tc2 by default) and again on
// k_attn__tc1_cuda, so both tensor-core kernels keep the whole sweep.
static void test_tc_cases_on(attn_fn fn, const char *fname) {
  static const int64_t lens[] = {1, 7, 64, 128, 200};
  static const int64_t heads[] = {64, 128};
  tk_rng r = {1234};
  int n = 0;
  for (int hd = 0; hd < 2; hd++)
    for (int qi = 0; qi < 5; qi++)
      for (int ki = 0; ki < 5; ki++, n++) {
        acase c = {.b = 2, .h = 3, .sq = lens[qi], .sk = lens[ki], .d = heads[hd], .dv = heads[hd]};
        c.mask = n % 5;
        c.nan_zero = (n / 5) % 2;
        c.divisor = n % 3;
        c.kv_shared = n % 7 == 3;
        c.gap = n % 4 == 1 ? 13 : 0;
        run_case_on(&r, &c, 1, 0, fn, fname);
      }
  // both mask kinds that leave rows undefined, with and without nan_zero, every tile edge crossed
  for (int hd = 0; hd < 2; hd++)
    for (int nz = 0; nz < 2; nz++) {
      acase c = {.b = 2, .h = 3, .sq = 200, .sk = 200, .d = heads[hd], .dv = heads[hd],
                 .mask = 4, .nan_zero = nz, .gap = 5};
      run_case_on(&r, &c, 1, 0, fn, fname);
      run_case_on(&r, &c, 0, 0, fn, fname);  // and the CUDA-core kernel (FP32) on the same rules
      c.mask = 2, c.sq = 200, c.sk = 128;  // causal with Sk < Sq: the first 72 rows fully masked
      run_case_on(&r, &c, 1, 0, fn, fname);
    }
  // no keys: the empty product, 0 (not NaN), on both head sizes
  for (int hd = 0; hd < 2; hd++) {
    acase c = {.b = 2, .h = 3, .sq = 70, .sk = 0, .d = heads[hd], .dv = heads[hd]};
    run_case_on(&r, &c, 1, 0, fn, fname);
  }
  // captured and replayed twice: d 64 causal with a half divisor, d 128 padding mask
  acase g64 = {.b = 2, .h = 3, .sq = 128, .sk = 128, .d = 64, .dv = 64, .mask = 2, .divisor = 2};
  acase g128 = {.b = 2, .h = 3, .sq = 200, .sk = 77, .d = 128, .dv = 128, .mask = 1, .nan_zero = 1};
  run_case_on(&r, &g64, 1, 1, fn, fname);
  run_case_on(&r, &g128, 1, 1, fn, fname);
}

static void test_tc_cases(void) {
  test_tc_cases_on(k_attn_cuda, "k_attn_cuda");
  test_tc_cases_on(k_attn__tc1_cuda, "k_attn__tc1_cuda");
}

// The [B, S, H, D] layout (acase.layout): BERT's padding mask, GPT's
// causal one, a full one with undefined rows, across tile edges; each on
// FP32 (the CUDA-core kernel) and FP16 (tensor cores where d == dv is 64
// or 128, the CUDA-core kernel otherwise); layout 2 takes the tensor-core
// kernel's 2-byte staging.
static void test_layout_cases(void) {
  static const acase cases[] = {
      {2, 4, 16, 16, 64, 64, 1, 0, 1, 0, 0, 1},     // BERT-like, padding mask, batch row 1 off
      {2, 4, 16, 16, 64, 64, 1, 0, 1, 0, 0, 2},     // the same, unaligned
      {1, 2, 128, 128, 64, 64, 2, 0, 0, 1, 0, 1},   // GPT-like causal, divisor float
      {2, 3, 70, 77, 64, 64, 2, 0, 0, 2, 0, 2},     // ragged tiles, unaligned, divisor half
      {2, 3, 9, 77, 128, 128, 3, 0, 1, 0, 0, 1},    // d 128, full mask with a row off
      {2, 3, 200, 200, 128, 128, 4, 0, 0, 0, 0, 2}, // d 128, NaN and +inf rows, unaligned
      {2, 3, 65, 40, 128, 128, 1, 0, 0, 0, 0, 1},   // a second query block, Sk % 8 == 0 not 32
      {1, 3, 40, 64, 20, 128, 2, 0, 0, 0, 0, 1},    // d != dv: the CUDA-core kernel in FP16 too
      {3, 2, 1, 33, 32, 32, 1, 0, 1, 0, 0, 1},      // one query row
  };
  tk_rng r = {4242};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int half = 0; half < 2; half++) run_case(&r, &cases[i], half, 0);
  run_case(&r, &cases[0], 1, 1);  // captured and replayed
}

static void test_errors(void) {
  err e = {0};
  k_attn_args a = {.b = 1, .h = 1, .sq = 4, .sk = 4, .d = 256, .dv = 64, .scale = 1};
  float *p = (float *)16;
  CHECK_EQ_INT(k_attn_cuda(p, p, p, p, NULL, NULL, K_F32, K_F32, &a, NULL, &e), ERR_UNIMPLEMENTED);
  CHECK_CONTAINS(e.msg, "k_attn_cuda");
  a.d = 64;
  CHECK_EQ_INT(k_attn_cuda(p, p, p, p, NULL, NULL, K_F32, K_I64, &a, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_attn_cuda(NULL, p, p, p, NULL, NULL, K_F32, K_F32, &a, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_attn_cuda(p, p, p, p, NULL, p, K_I32, K_F32, &a, NULL, &e), ERR_INVALID_ARGUMENT);
  a.sq = -1;
  CHECK_EQ_INT(k_attn_cuda(p, p, p, p, NULL, NULL, K_F32, K_F32, &a, NULL, &e), ERR_INVALID_ARGUMENT);
  a.sq = 0;  // nothing to do: touches no pointer
  CHECK_EQ_INT(k_attn_cuda(NULL, NULL, NULL, NULL, NULL, NULL, K_F32, K_F32, &a, NULL, &e), 0);
}

int main(void) {
  test_errors();
  tk_require_device();
  test_cases();
  test_tc2_cases();
  test_tc_cases();
  test_layout_cases();
  CHECK_DONE();
}
