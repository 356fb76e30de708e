// tests/gpu/test_k_cuda_llm.c: the decoder runtime's CUDA kernels (k_cuda.h,
// "decoder runtime") against their C references on random inputs, in FP32,
// FP16 and BF16: k_embed_cuda (with and without learned positions),
// k_rms_norm_dt_cuda, k_layer_norm_dt_cuda, k_rope_cuda, k_mlp_act_cuda
// (SwiGLU, GeGLU, GELU, SiLU), k_widen_cuda, k_argmax_rows_cuda (the greedy
// token per row, bit for bit k_argmax_rows_ref's: ties to the lowest index,
// -inf rows, NaN at index 0 and elsewhere, a vocab of 128,256 and widths
// under a warp; issue 35), and k_paged_kv_write_cuda +
// k_paged_attn_cuda over a mixed step (prefill chunks of odd lengths at
// offsets, decode tokens, GQA, a scattered block table, a sliding window;
// long contexts in one pass and split-K, more splits than keys to share
// included; head sizes 16 to 256, the one-element fallback, groups 1 to 64,
// block sizes 4, 12 and 16, unaligned caches: PA_CASES),
// and its tensor-core prefill path against the CUDA-core one (FP16, BF16).
// The 16-bit cases feed the references the inputs rounded to the type, so
// only the kernel's own float math and its one output rounding differ:
// bounds FP32 rtol 1e-5 (attention 2e-5, it sums in float against the
// reference's double), FP16 rtol/atol 2^-10, BF16 2^-7. Host-side argument
// checks run first, everywhere; the rest skips (exit 77) without a GPU.
#include "test_k_cuda_util.h"

static const dtype DTS[] = {DT_FP32, DT_FP16, DT_BF16};

static uint16_t bf16_bits(float f) {
  uint32_t u = tk_bits(f);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static float bf16_val(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// x rounded to dt in place (the values the kernel will see), and packed into
// a new host buffer of dt's elements.
static void *pack(float *x, size_t n, dtype dt) {
  size_t es = dtype_size(dt);
  void *p = tk_xmalloc(n * es);
  for (size_t i = 0; i < n; i++) {
    if (dt == DT_FP32) {
      ((float *)p)[i] = x[i];
    } else if (dt == DT_FP16) {
      k_f32_to_f16((uint16_t *)p + i, x + i, 1);
      k_f16_to_f32(x + i, (uint16_t *)p + i, 1);
    } else {
      ((uint16_t *)p)[i] = bf16_bits(x[i]);
      x[i] = bf16_val(((uint16_t *)p)[i]);
    }
  }
  return p;
}

static void unpack(float *y, const void *p, size_t n, dtype dt) {
  for (size_t i = 0; i < n; i++) {
    if (dt == DT_FP32)
      y[i] = ((const float *)p)[i];
    else if (dt == DT_FP16)
      k_f16_to_f32(y + i, (const uint16_t *)p + i, 1);
    else
      y[i] = bf16_val(((const uint16_t *)p)[i]);
  }
}

// Random values of dt on the device; *host gets the rounded floats (caller frees).
static void *dev_rand(tk_rng *r, size_t n, float lo, float hi, dtype dt, float **host) {
  float *x = tk_xmalloc(n * sizeof(float));
  tk_fill(r, x, n, lo, hi);
  void *p = pack(x, n, dt);
  void *d = tk_to_dev(p, n * dtype_size(dt));
  free(p);
  *host = x;
  return d;
}

// The device result of n elements of dt, widened.
static float *dev_get(const void *d, size_t n, dtype dt) {
  void *p = tk_xmalloc(n * dtype_size(dt));
  tk_from_dev(p, d, n * dtype_size(dt));
  float *y = tk_xmalloc(n * sizeof(float));
  unpack(y, p, n, dt);
  free(p);
  return y;
}

static double rtol_of(dtype dt) {
  return dt == DT_FP32 ? 1e-5 : dt == DT_FP16 ? 1.0 / 1024 : 1.0 / 128;
}

static void test_errors(void) {
  err e = {0};
  void *p = (void *)16;
  CHECK_EQ_INT(k_argmax_rows_cuda(NULL, NULL, 0, 8, NULL, DT_FP16, NULL, &e), 0);  // no rows: nothing to do
  CHECK_EQ_INT(k_argmax_rows_cuda(NULL, p, 2, 8, NULL, DT_FP16, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_argmax_rows_cuda");
  CHECK_EQ_INT(k_argmax_rows_cuda(p, p, 2, 0, p, DT_FP16, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_argmax_rows_cuda(p, p, 2, 8, p, DT_INT32, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_embed_cuda(p, NULL, NULL, p, p, 4, 8, DT_FP32, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_embed_cuda");
  CHECK_EQ_INT(k_rms_norm_dt_cuda(p, p, p, 4, 8, 1e-5f, DT_INT32, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "INT32");
  CHECK_EQ_INT(k_rope_cuda(p, 4, p, 2, 7, 14, p, DT_FP16, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "odd");
  CHECK_EQ_INT(k_mlp_act_cuda(p, p, 2, 2, (k_mlp_kind)9, 1, DT_FP32, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "activation");
  k_llm_meta m = {.tok_item = p, .tok_pos = p, .tables = p, .table_off = p, .n_tok = 3};
  k_paged_attn_args a = {
      .n_heads = 6, .n_kv_heads = 4, .head_dim = 8, .q_stride = 48, .o_stride = 48, .block_tokens = 4, .scale = 1.0f};
  CHECK_EQ_INT(k_paged_attn_cuda(p, p, p, p, &m, &a, 1, NULL, DT_FP32, NULL, &e), ERR_INVALID_ARGUMENT);
  a.n_kv_heads = 2, a.head_dim = 512, a.q_stride = a.o_stride = 6 * 512;
  CHECK_EQ_INT(k_paged_attn_cuda(p, p, p, p, &m, &a, 1, NULL, DT_FP32, NULL, &e), ERR_UNIMPLEMENTED);
  a.head_dim = 8, a.q_stride = a.o_stride = 48;
  CHECK_EQ_INT(k_paged_attn_cuda(p, p, p, p, &m, &a, 4, NULL, DT_FP32, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "workspace");
  CHECK_EQ_INT(k_paged_attn_cuda(p, p, p, p, &m, &a, 33, p, DT_FP32, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT((int)k_paged_attn_ws_floats(3, 6, 8, 4), 3 * 6 * (32 * 10 + 1));  // 32 splits' partials and a counter
  CHECK_EQ_INT((int)k_paged_attn_ws_floats(3, 6, 8, 1), 0);
  CHECK_EQ_INT(k_paged_kv_write_cuda(p, p, p, p, 4, 8, 4, &m, DT_BF16, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "src_stride");
  // size 0: nothing touched
  CHECK_EQ_INT(k_widen_cuda(NULL, NULL, 0, DT_FP16, NULL, &e), 0);
}

static void test_embed(dtype dt) {
  tk_rng r = {0x1234 + dt};
  size_t V = 37, H = 24, P = 16, T = 9;
  float *tab, *ptab;
  void *d_tab = dev_rand(&r, V * H, -1, 1, dt, &tab), *d_pt = dev_rand(&r, P * H, -1, 1, dt, &ptab);
  int32_t tok[9], pos[9];
  for (size_t t = 0; t < T; t++) tok[t] = (int32_t)(tk_next(&r) % V), pos[t] = (int32_t)(tk_next(&r) % P);
  int32_t *d_tok = tk_to_dev(tok, sizeof tok), *d_pos = tk_to_dev(pos, sizeof pos);
  void *d_y = tk_dev_alloc(T * H * 4);
  float *want = tk_xmalloc(T * H * 4);
  for (int with_pos = 0; with_pos < 2; with_pos++) {
    TK_OK(k_embed_cuda(d_y, d_tab, with_pos ? d_pt : NULL, d_tok, d_pos, T, H, dt, NULL, TK_E));
    float *got = dev_get(d_y, T * H, dt);
    k_embed(want, tab, with_pos ? ptab : NULL, tok, pos, T, H);
    char what[64];
    snprintf(what, sizeof what, "embed %s pos %d", dtype_wire_name(dt), with_pos);
    // a gather is exact; the sum with the position row rounds once
    tk_compare(what, got, want, T * H, with_pos ? rtol_of(dt) : 0, with_pos ? 1e-6 : 0);  // FP16 subnormal sums
    free(got);
  }
  free(tab), free(ptab), free(want);
  cudaFree(d_tab), cudaFree(d_pt), cudaFree(d_tok), cudaFree(d_pos), cudaFree(d_y);
}

static void test_norms(dtype dt) {
  tk_rng r = {0x777 + dt};
  size_t rows = 5, cols = 1000;  // not a multiple of the block
  float *x, *w, *b;
  void *d_x = dev_rand(&r, rows * cols, -3, 3, dt, &x), *d_w = dev_rand(&r, cols, 0.5f, 1.5f, dt, &w);
  void *d_b = dev_rand(&r, cols, -0.5f, 0.5f, dt, &b), *d_y = tk_dev_alloc(rows * cols * 4);
  float *want = tk_xmalloc(rows * cols * 4);
  char what[64];
  TK_OK(k_rms_norm_dt_cuda(d_y, d_x, d_w, rows, cols, 1e-6f, dt, NULL, TK_E));
  float *got = dev_get(d_y, rows * cols, dt);
  k_rms_norm(want, x, w, rows, cols, 1e-6f);
  snprintf(what, sizeof what, "rms_norm %s", dtype_wire_name(dt));
  tk_compare(what, got, want, rows * cols, rtol_of(dt), rtol_of(dt) * 1e-2);
  free(got);
  for (int with_b = 0; with_b < 2; with_b++) {
    TK_OK(k_layer_norm_dt_cuda(d_y, d_x, d_w, with_b ? d_b : NULL, rows, cols, 1e-5f, dt, NULL, TK_E));
    got = dev_get(d_y, rows * cols, dt);
    k_layer_norm(want, x, w, with_b ? b : NULL, rows, cols, 1e-5f);
    snprintf(what, sizeof what, "layer_norm %s bias %d", dtype_wire_name(dt), with_b);
    tk_compare(what, got, want, rows * cols, rtol_of(dt), rtol_of(dt) * 1e-2);
    free(got);
  }
  // in place
  TK_OK(k_rms_norm_dt_cuda(d_x, d_x, d_w, rows, cols, 1e-6f, dt, NULL, TK_E));
  got = dev_get(d_x, rows * cols, dt);
  k_rms_norm(want, x, w, rows, cols, 1e-6f);
  snprintf(what, sizeof what, "rms_norm in place %s", dtype_wire_name(dt));
  tk_compare(what, got, want, rows * cols, rtol_of(dt), rtol_of(dt) * 1e-2);
  free(got), free(x), free(w), free(b), free(want);
  cudaFree(d_x), cudaFree(d_w), cudaFree(d_b), cudaFree(d_y);
}

static void test_rope(dtype dt) {
  tk_rng r = {0x99 + dt};
  size_t T = 7;
  int64_t heads = 6, d = 32, stride = heads * d + 40;  // rows wider than the heads (the QKV row)
  float *x;
  void *d_x = dev_rand(&r, T * (size_t)stride, -2, 2, dt, &x);
  int32_t pos[7];
  int64_t pos64[7];
  for (size_t t = 0; t < T; t++) pos[t] = (int32_t)(tk_next(&r) % 5000), pos64[t] = pos[t];
  k_rope_scaling s = {
      .kind = K_ROPE_LLAMA3, .factor = 8, .low_freq_factor = 1, .high_freq_factor = 4, .original_max_pos = 8192};
  float inv[16];
  k_rope_inv_freq(inv, d, 500000.0, &s);
  int32_t *d_pos = tk_to_dev(pos, sizeof pos);
  float *d_inv = tk_to_dev(inv, sizeof inv);
  TK_OK(k_rope_cuda(d_x, T, d_pos, heads, d, stride, d_inv, dt, NULL, TK_E));
  float *got = dev_get(d_x, T * (size_t)stride, dt);
  k_rope(x, (int64_t)T, pos64, heads, d, stride, inv);
  char what[64];
  snprintf(what, sizeof what, "rope %s", dtype_wire_name(dt));
  // angles up to 5000 rad: sinf/cosf of the same float angle, a few ulps apart
  tk_compare(what, got, x, T * (size_t)stride, dt == DT_FP32 ? 1e-5 : rtol_of(dt), dt == DT_FP32 ? 1e-5 : rtol_of(dt));
  free(got), free(x);
  cudaFree(d_x), cudaFree(d_pos), cudaFree(d_inv);
}

// k_rope_kv_write_cuda (RoPE fused with the paged KV write) against the two
// launches it replaces, k_rope_cuda then k_paged_kv_write_cuda (each checked
// against the C reference above and in test_paged_attn): bit for bit, the
// QKV rows and both caches, untouched slots included; then without RoPE
// (inv_freq NULL: the write only). 5 tokens of 5 items at scattered
// positions, 4 query heads over 2 KV heads of 32, rows wider than Q K V.
static void test_rope_kv_write(dtype dt) {
  enum { T = 5, NB = 24, BT = 4 };
  tk_rng r = {0x5151 + dt};
  const int64_t nh = 4, nkv = 2, d = 32, stride = (nh + 2 * nkv) * d + 8, row = nkv * d;
  const size_t es = dtype_size(dt), qn = (size_t)T * (size_t)stride, cn = (size_t)NB * BT * (size_t)row;
  float *qkv, *cache;
  void *d_q1 = dev_rand(&r, qn, -2, 2, dt, &qkv), *d_c = dev_rand(&r, cn, -1, 1, dt, &cache);
  void *d_q2 = tk_dev_alloc(qn * es), *d_k1 = tk_dev_alloc(cn * es), *d_v1 = tk_dev_alloc(cn * es);
  void *d_k2 = tk_dev_alloc(cn * es), *d_v2 = tk_dev_alloc(cn * es), *d_q0 = tk_dev_alloc(qn * es);
  TK_CUDA(cudaMemcpy(d_q0, d_q1, qn * es, cudaMemcpyDeviceToDevice));
  int32_t item[T], pos[T] = {0, 3, 9, 14, 22}, toff[T], flat[T * 6];
  for (int t = 0; t < T; t++) {
    item[t] = t, toff[t] = t * 6;
    for (int b = 0; b < 6; b++) flat[t * 6 + b] = (t * 7 + b * 5 + 3) % NB;  // scattered, some shared: any slot
  }
  // no two tokens may share a slot (their writes would race): distinct (block, slot) pairs
  for (int a = 0; a < T; a++)
    for (int b = a + 1; b < T; b++)
      CHECK(!(flat[a * 6 + pos[a] / BT] == flat[b * 6 + pos[b] / BT] && pos[a] % BT == pos[b] % BT));
  int32_t *d_item = tk_to_dev(item, sizeof item), *d_pos = tk_to_dev(pos, sizeof pos);
  int32_t *d_toff = tk_to_dev(toff, sizeof toff), *d_flat = tk_to_dev(flat, sizeof flat);
  k_llm_meta m = {.tok_item = d_item, .tok_pos = d_pos, .tables = d_flat, .table_off = d_toff, .n_tok = T};
  k_rope_scaling sc = {
      .kind = K_ROPE_LLAMA3, .factor = 8, .low_freq_factor = 1, .high_freq_factor = 4, .original_max_pos = 8192};
  float inv[16];
  k_rope_inv_freq(inv, d, 500000.0, &sc);
  float *d_inv = tk_to_dev(inv, sizeof inv);
  for (int rope = 1; rope >= 0; rope--) {
    TK_CUDA(cudaMemcpy(d_q1, d_q0, qn * es, cudaMemcpyDeviceToDevice));
    TK_CUDA(cudaMemcpy(d_q2, d_q0, qn * es, cudaMemcpyDeviceToDevice));
    void *caches[4] = {d_k1, d_v1, d_k2, d_v2};
    for (int i = 0; i < 4; i++) TK_CUDA(cudaMemcpy(caches[i], d_c, cn * es, cudaMemcpyDeviceToDevice));
    if (rope) TK_OK(k_rope_cuda(d_q1, T, d_pos, nh + nkv, d, stride, d_inv, dt, NULL, TK_E));
    TK_OK(k_paged_kv_write_cuda(d_k1, d_v1, (uint8_t *)d_q1 + nh * d * es, (uint8_t *)d_q1 + (nh + nkv) * d * es,
                                stride, row, BT, &m, dt, NULL, TK_E));
    TK_OK(k_rope_kv_write_cuda(d_q2, d_k2, d_v2, nh, nkv, d, stride, rope ? d_inv : NULL, BT, &m, dt, NULL, TK_E));
    const void *pairs[3][2] = {{d_q1, d_q2}, {d_k1, d_k2}, {d_v1, d_v2}};
    const size_t ns[3] = {qn, cn, cn};
    const char *names[3] = {"qkv", "k cache", "v cache"};
    for (int i = 0; i < 3; i++) {
      float *want = dev_get(pairs[i][0], ns[i], dt), *got = dev_get(pairs[i][1], ns[i], dt);
      char what[96];
      snprintf(what, sizeof what, "rope_kv_write %s rope %d: %s", dtype_wire_name(dt), rope, names[i]);
      tk_compare(what, got, want, ns[i], 0, 0);
      free(want), free(got);
    }
  }
  err e = {0};
  CHECK_EQ_INT(k_rope_kv_write_cuda(d_q2, NULL, d_v2, nh, nkv, d, stride, d_inv, BT, &m, dt, NULL, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "k_rope_kv_write_cuda");
  CHECK_EQ_INT(k_rope_kv_write_cuda(d_q2, d_k2, d_v2, nh, nkv, d, (nh + 2 * nkv) * d - 1, d_inv, BT, &m, dt, NULL, &e),
               ERR_INVALID_ARGUMENT);
  free(qkv), free(cache);
  cudaFree(d_q0), cudaFree(d_q1), cudaFree(d_q2), cudaFree(d_c), cudaFree(d_k1), cudaFree(d_v1), cudaFree(d_k2);
  cudaFree(d_v2), cudaFree(d_item), cudaFree(d_pos), cudaFree(d_toff), cudaFree(d_flat), cudaFree(d_inv);
}

// k_gemv_cuda against the product of the same rounded inputs on the host
// (double sums, bias and residual added, rounded once to dt, as the kernel
// does in float): m 1 .. 8 over shapes with k a multiple of 8 (one vector
// a lane, several rounds of the unrolled loop, a tail), n not a multiple of
// the block's 8 rows; in place (res = y) and not, with and without bias.
// Then: row r of an m-row product equals the same row of a 1-row one bit
// for bit (the order of the sums must not depend on m), and the refusals.
static void test_gemv(dtype dt) {
  tk_rng r = {0x6e6d + dt};
  const int64_t shapes[][2] = {{37, 8}, {300, 264}, {129, 2048}, {64, 8192 + 8}};
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
    const int64_t n = shapes[si][0], k = shapes[si][1];
    const size_t es = dtype_size(dt);
    float *x, *w, *b, *res;
    void *d_x = dev_rand(&r, 8 * (size_t)k, -1, 1, dt, &x), *d_w = dev_rand(&r, (size_t)(n * k), -1, 1, dt, &w);
    void *d_b = dev_rand(&r, (size_t)n, -1, 1, dt, &b), *d_r = dev_rand(&r, 8 * (size_t)n, -2, 2, dt, &res);
    void *d_y = tk_dev_alloc(8 * (size_t)n * es);
    float *want = tk_xmalloc(8 * (size_t)n * 4);
    const int ms[] = {1, 2, 3, 5, 8};
    for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
      const int m = ms[mi];
      for (int var = 0; var < 3; var++) {  // 0: plain, 1: bias + residual in place, 2: residual from another buffer
        const int with_b = var == 1, with_r = var != 0;
        if (var == 1) TK_CUDA(cudaMemcpy(d_y, d_r, (size_t)m * (size_t)n * es, cudaMemcpyDeviceToDevice));
        TK_OK(k_gemv_cuda(d_y, d_x, d_w, with_b ? d_b : NULL, var == 1 ? d_y : var == 2 ? d_r : NULL, m, n, k, dt,
                          NULL, TK_E));
        float *got = dev_get(d_y, (size_t)m * (size_t)n, dt);
        for (int i = 0; i < m; i++)
          for (int64_t j = 0; j < n; j++) {
            double acc = 0;
            for (int64_t c = 0; c < k; c++) acc += (double)x[(size_t)i * k + c] * w[(size_t)j * k + c];
            if (with_b) acc += b[j];
            if (with_r) acc += res[(size_t)i * n + j];
            want[(size_t)i * n + j] = (float)acc;
          }
        char what[96];
        snprintf(what, sizeof what, "gemv %s m %d n %lld k %lld variant %d", dtype_wire_name(dt), m, (long long)n,
                 (long long)k, var);
        // float sums of k products of values up to 1: a few ulps of the output, plus float's error
        tk_compare(what, got, want, (size_t)m * (size_t)n, rtol_of(dt), 1e-5 * sqrt((double)k) + rtol_of(dt) * 0.05);
        free(got);
      }
    }
    // row 4 of an 8-row product against a 1-row product of x's row 4: bit for bit
    TK_OK(k_gemv_cuda(d_y, d_x, d_w, d_b, NULL, 8, n, k, dt, NULL, TK_E));
    float *eight = dev_get(d_y, 8 * (size_t)n, dt);
    TK_OK(k_gemv_cuda(d_y, (uint8_t *)d_x + 4 * (size_t)k * es, d_w, d_b, NULL, 1, n, k, dt, NULL, TK_E));
    float *one = dev_get(d_y, (size_t)n, dt);
    char what[64];
    snprintf(what, sizeof what, "gemv %s n %lld: a row alone", dtype_wire_name(dt), (long long)n);
    tk_compare(what, one, eight + 4 * (size_t)n, (size_t)n, 0, 0);
    free(eight), free(one);
    free(x), free(w), free(b), free(res), free(want);
    cudaFree(d_x), cudaFree(d_w), cudaFree(d_b), cudaFree(d_r), cudaFree(d_y);
  }
  err e = {0};
  void *p = tk_dev_alloc(4096);
  CHECK_EQ_INT(k_gemv_cuda(p, p, p, NULL, NULL, 9, 4, 8, dt, NULL, &e), ERR_UNIMPLEMENTED);  // m past 8
  CHECK_CONTAINS(e.msg, "k_gemv_cuda");
  CHECK_EQ_INT(k_gemv_cuda(p, p, p, NULL, NULL, 1, 4, 12, dt, NULL, &e), ERR_UNIMPLEMENTED);  // k % 8
  CHECK_EQ_INT(k_gemv_cuda(p, (uint8_t *)p + 2, p, NULL, NULL, 1, 4, 8, dt, NULL, &e), ERR_UNIMPLEMENTED);  // x unaligned
  CHECK_EQ_INT(k_gemv_cuda(p, p, p, NULL, NULL, 1, 4, 8, DT_FP32, NULL, &e), ERR_UNIMPLEMENTED);
  CHECK_EQ_INT(k_gemv_cuda(p, p, p, NULL, NULL, 0, 4, 8, dt, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_gemv_cuda(NULL, p, p, NULL, NULL, 1, 4, 8, dt, NULL, &e), ERR_INVALID_ARGUMENT);
  cudaFree(p);
}

static void test_mlp_act(dtype dt) {
  tk_rng r = {0x4242 + dt};
  size_t rows = 3, cols = 301;
  float *x;
  void *d_x = dev_rand(&r, rows * 2 * cols, -6, 6, dt, &x), *d_y = tk_dev_alloc(rows * 2 * cols * 4);
  float *want = tk_xmalloc(rows * 2 * cols * 4);
  for (int act = K_MLP_SILU; act <= K_MLP_GELU; act++)
    for (int gated = 0; gated < 2; gated++) {
      size_t n = rows * cols * (gated ? 1 : 2);  // plain: the whole buffer as rows of 2 cols
      TK_OK(k_mlp_act_cuda(d_y, d_x, gated ? rows : rows * 2, cols, (k_mlp_kind)act, gated, dt, NULL, TK_E));
      float *got = dev_get(d_y, n, dt);
      k_mlp_act(want, x, gated ? rows : rows * 2, cols, (k_mlp_kind)act, gated);
      char what[64];
      snprintf(what, sizeof what, "mlp_act %s act %d gated %d", dtype_wire_name(dt), act, gated);
      tk_compare(what, got, want, n, dt == DT_FP32 ? 4e-6 : rtol_of(dt), dt == DT_FP32 ? 1e-6 : rtol_of(dt) * 1e-2);
      free(got);
    }
  // widen: exact
  float *d_f = tk_dev_alloc(rows * 2 * cols * 4), *got = tk_xmalloc(rows * 2 * cols * 4);
  TK_OK(k_widen_cuda(d_f, d_x, rows * 2 * cols, dt, NULL, TK_E));
  tk_from_dev(got, d_f, rows * 2 * cols * 4);
  tk_compare("widen", got, x, rows * 2 * cols, 0, 0);
  free(got), free(x), free(want);
  cudaFree(d_x), cudaFree(d_y), cudaFree(d_f);
}

// k_argmax_rows_cuda against k_argmax_rows_ref on the values rounded to dt
// (16-bit types make many exact ties): random rows, and rows built for the
// policy: a maximum repeated far apart, all equal, all -inf, -inf but one
// finite pair, NaN at index 0 (answer 0), NaN scattered around a finite
// maximum, NaN everywhere but one -inf, +inf twice.
static void test_argmax(dtype dt, size_t cols) {
  enum { ROWS = 12 };
  tk_rng r = {0x77 + dt + cols};
  float *x = tk_xmalloc(ROWS * cols * sizeof(float));
  tk_fill(&r, x, ROWS * cols, -8, 8);
  size_t far = cols - 1, mid = cols / 2;
  float *row;
  row = x + 1 * cols, row[mid] = 20, row[far] = 20, row[cols / 3] = 20;  // ties: the lowest index
  row = x + 2 * cols;
  for (size_t c = 0; c < cols; c++) row[c] = 1.5f;  // all equal: 0
  row = x + 3 * cols;
  for (size_t c = 0; c < cols; c++) row[c] = -INFINITY;  // all -inf: 0
  row = x + 4 * cols;
  for (size_t c = 0; c < cols; c++) row[c] = -INFINITY;
  row[far] = -3, row[mid] = -3;
  row = x + 5 * cols, row[0] = NAN, row[mid] = 50;  // NaN at 0: 0
  row = x + 6 * cols;
  for (size_t c = 0; c < cols; c += 3) row[c] = NAN;
  row[0] = -1, row[far] = 40;  // NaN never chosen
  row = x + 7 * cols;
  for (size_t c = 0; c < cols; c++) row[c] = NAN;
  row[0] = -INFINITY;  // NaN elsewhere, -inf at 0: 0
  row = x + 8 * cols, row[far] = INFINITY, row[mid] = INFINITY;
  row = x + 9 * cols;
  for (size_t c = 0; c < cols; c++) row[c] = (float)(c % 7);  // the max 6 many times
  void *p = pack(x, ROWS * cols, dt);                         // x now holds the rounded values
  void *d_x = tk_to_dev(p, ROWS * cols * dtype_size(dt));
  int32_t *d_ids = tk_dev_alloc(ROWS * sizeof(int32_t)), got[ROWS], want[ROWS];
  k_argmax_rows_ref(want, x, ROWS, cols);
  // split: the workspace filled with junk first (the kernels must not read what they did not write)
  size_t wsb = k_argmax_rows_ws_bytes(ROWS, cols);
  CHECK_EQ_INT((long long)wsb, (long long)(ROWS * ((cols + 2047) / 2048) * 8));
  void *d_ws = tk_dev_alloc(wsb);
  TK_CUDA(cudaMemset(d_ws, 0x7f, wsb));
  for (int split = 0; split < 2; split++) {  // one block a row, then the split rows
    TK_CUDA(cudaMemset(d_ids, 0xff, ROWS * sizeof(int32_t)));
    TK_OK(k_argmax_rows_cuda(d_ids, d_x, ROWS, cols, split ? d_ws : NULL, dt, NULL, TK_E));
    tk_from_dev(got, d_ids, sizeof got);
    for (int i = 0; i < ROWS; i++) {
      if (got[i] != want[i])
        fprintf(stderr, "argmax %s cols %zu row %d%s: got %d, want %d\n", dtype_wire_name(dt), cols, i,
                split ? " (split)" : "", got[i], want[i]);
      CHECK_EQ_INT(got[i], want[i]);
    }
  }
  cudaFree(d_ws);
  if (cols > 3) {  // the policy rows' answers, independently of the reference
    CHECK_EQ_INT(got[2], 0);
    CHECK_EQ_INT(got[3], 0);
    CHECK_EQ_INT(got[5], 0);
    CHECK_EQ_INT(got[7], 0);
    CHECK_EQ_INT(got[1], (int)(cols / 3 < mid ? cols / 3 : mid));
    CHECK_EQ_INT(got[4], (int)mid);
    CHECK_EQ_INT(got[6], (int)far);
    CHECK_EQ_INT(got[8], (int)mid);
    if (cols > 7) CHECK_EQ_INT(got[9], 6);
  }
  free(p), free(x);
  cudaFree(d_x), cudaFree(d_ids);
}

// One attention case: heads over KV heads of head_dim d, a sliding window
// (0: none), the step's shape (short or long contexts), the split count and
// the cache's offset from 16-byte alignment (elements; 1 forces the kernel's
// one-element loads for any head size).
typedef struct pa_case {
  int64_t n_heads, n_kv, d, window;
  int longctx;  // 0: short step (4-slot blocks); else long contexts, longctx slots a block
  int splits, shift;
} pa_case;

// A step of three items over a pool of 24 blocks of 4 slots, the block ids
// scattered: item 0 a prefill chunk (positions 5..11, after 5 cached ones),
// item 1 one decode token at position 21, item 2 a first chunk (0..2).
// longctx: instead, 48 blocks of longctx slots (16, or 12: a block size that
// is not a power of two), two decode tokens at positions 299 and 44 and a
// 3-token chunk at 97..99 (context lengths that are multiples of neither
// the block nor the kernel's key groups), for split-K too (splits > 1: more
// splits than a context has keys' share leaves some empty).
static void test_paged_attn(dtype dt, pa_case pc, int shallow) {
  const int64_t n_heads = pc.n_heads, n_kv = pc.n_kv, d = pc.d, window = pc.window;
  const int longctx = pc.longctx, splits = pc.splits;
  tk_rng r = {0xa77 + (uint64_t)dt * 131 + (uint64_t)(n_heads * 7 + d + window + splits + longctx + pc.shift)};
  const int64_t bt = longctx ? longctx : 4, nb = longctx ? 48 : 24, row = n_kv * d, QS = (n_heads + 2 * n_kv) * d,
                Q = n_heads * d;
  int32_t tables[3][48] = {{17, 3, 22, 9}, {5, 11, 1, 20, 14, 7}, {23}};
  int64_t start[3] = {5, 21, 0}, ntok[3] = {7, 1, 3};
  if (longctx) {  // the pool's blocks scattered (17 is prime to 48) over the three items
    start[0] = 299, start[1] = 44, start[2] = 97;
    ntok[0] = 1, ntok[1] = 1, ntok[2] = 3;
    int i = 0;
    for (int it = 0; it < 3; it++)
      for (int64_t b = 0; b < (start[it] + ntok[it] + bt - 1) / bt; b++, i++) tables[it][b] = (i * 17 + 5) % 48;
    CHECK(i <= 48);
  }
  const int64_t T = ntok[0] + ntok[1] + ntok[2];
  // the cache holds random rows everywhere (the cached positions included);
  // the step writes its own rows over them. shift: the device caches start
  // pc.shift elements into their allocation, the host ones likewise.
  float *kc0, *vc0, *qkv;
  size_t cache_n = (size_t)(nb * bt * row), es = dtype_size(dt), sh = (size_t)pc.shift;
  void *d_kc0 = dev_rand(&r, cache_n + sh, -1, 1, dt, &kc0), *d_vc0 = dev_rand(&r, cache_n + sh, -1, 1, dt, &vc0);
  void *d_kc = (uint8_t *)d_kc0 + sh * es, *d_vc = (uint8_t *)d_vc0 + sh * es;
  float *kc = kc0 + sh, *vc = vc0 + sh;
  void *d_qkv = dev_rand(&r, (size_t)(T * QS), -1, 1, dt, &qkv);
  int32_t item[16], pos[16], toff[3], flat[48];
  int64_t t = 0, nf = 0;
  for (int i = 0; i < 3; i++) {
    toff[i] = (int32_t)nf;
    int64_t need = (start[i] + ntok[i] + bt - 1) / bt;
    for (int64_t b = 0; b < need; b++) flat[nf++] = tables[i][b];
    for (int64_t j = 0; j < ntok[i]; j++, t++) item[t] = i, pos[t] = (int32_t)(start[i] + j);
  }
  int32_t *d_item = tk_to_dev(item, (size_t)T * 4), *d_pos = tk_to_dev(pos, (size_t)T * 4);
  int32_t *d_toff = tk_to_dev(toff, sizeof toff), *d_flat = tk_to_dev(flat, (size_t)nf * 4);
  void *d_o = tk_dev_alloc((size_t)(T * Q) * 4);
  k_llm_meta m = {.tok_item = d_item, .tok_pos = d_pos, .tables = d_flat, .table_off = d_toff, .n_tok = T};
  TK_OK(k_paged_kv_write_cuda(d_kc, d_vc, (uint8_t *)d_qkv + Q * es, (uint8_t *)d_qkv + (Q + row) * es, QS, row, bt, &m,
                              dt, NULL, TK_E));
  k_paged_attn_args a = {.n_heads = n_heads,
                         .n_kv_heads = n_kv,
                         .head_dim = d,
                         .q_stride = QS,
                         .o_stride = Q,
                         .block_tokens = bt,
                         .window = window,
                         .scale = 1.0f / sqrtf((float)d),
                         .shallow = shallow};
  size_t wsf = k_paged_attn_ws_floats(T, n_heads, d, splits);
  float *d_ws = splits > 1 ? tk_dev_alloc(wsf * 4) : NULL;
  if (d_ws) TK_CUDA(cudaMemset(d_ws, 0, wsf * 4));  // the contract: zeroed once
  TK_OK(k_paged_attn_cuda(d_o, d_qkv, d_kc, d_vc, &m, &a, splits, d_ws, dt, NULL, TK_E));
  if (d_ws) {
    // again on the same workspace, the output poisoned first: the split-K
    // combine's counters must be back at zero (graphs replay the launch), and
    // with fewer splits too (the workspace's layout must not depend on them)
    for (int again = 0; again < 2; again++) {
      TK_CUDA(cudaMemset(d_o, 0xff, (size_t)(T * Q) * es));
      TK_OK(k_paged_attn_cuda(d_o, d_qkv, d_kc, d_vc, &m, &a, again ? 2 : splits, d_ws, dt, NULL, TK_E));
    }
    TK_CUDA(cudaMemset(d_o, 0xff, (size_t)(T * Q) * es));
    TK_OK(k_paged_attn_cuda(d_o, d_qkv, d_kc, d_vc, &m, &a, splits, d_ws, dt, NULL, TK_E));
  }
  float *got_k = dev_get(d_kc, cache_n, dt), *got_v = dev_get(d_vc, cache_n, dt);
  float *got = dev_get(d_o, (size_t)(T * Q), dt), *want = tk_xmalloc((size_t)(T * Q) * 4);
  float *scratch = tk_xmalloc(512 * 4);
  t = 0;
  for (int i = 0; i < 3; i++) {
    const float *rows = qkv + t * QS;
    k_paged_kv_write(kc, tables[i], bt, row, start[i], ntok[i], rows + Q, QS);
    k_paged_kv_write(vc, tables[i], bt, row, start[i], ntok[i], rows + Q + row, QS);
    k_paged_attn_args ai = a;
    ai.n_q = ntok[i], ai.pos0 = start[i];
    k_paged_attn_ref(want + t * Q, rows, kc, vc, tables[i], &ai, scratch);
    t += ntok[i];
  }
  char what[128];
  snprintf(what, sizeof what, "kv_write %s", dtype_wire_name(dt));
  tk_compare(what, got_k, kc, cache_n, 0, 0);
  tk_compare(what, got_v, vc, cache_n, 0, 0);
  snprintf(what, sizeof what, "paged_attn %s heads %lld/%lld d %lld window %lld long %d splits %d shift %d%s",
           dtype_wire_name(dt), (long long)n_heads, (long long)n_kv, (long long)d, (long long)window, longctx, splits,
           pc.shift, shallow ? " shallow" : "");
  tk_compare(what, got, want, (size_t)(T * Q), dt == DT_FP32 ? 2e-5 : rtol_of(dt), dt == DT_FP32 ? 2e-6 : rtol_of(dt));
  free(got_k), free(got_v), free(got), free(want), free(scratch), free(kc0), free(vc0), free(qkv);
  cudaFree(d_kc0), cudaFree(d_vc0), cudaFree(d_qkv), cudaFree(d_item), cudaFree(d_pos), cudaFree(d_toff);
  cudaFree(d_flat), cudaFree(d_o), cudaFree(d_ws);
}

// The kernel loads 16 bytes a lane (8 halves, 4 floats) where head_dim is a
// multiple of that and the caches are aligned, else one element; it handles
// up to 8 query heads a block (larger groups in chunks, smaller ones with
// idle heads); head_dim sets the lanes per key.
static const pa_case PA_CASES[] = {
    {8, 2, 64, 0, 0, 1, 0},     // GQA, groups of 4 (Llama-3.2-1B's head), short step
    {4, 4, 40, 0, 0, 1, 0},     // MHA (group 1), 40: 5 vectors of halves, 10 of floats (lanes idle)
    {6, 2, 128, 5, 0, 1, 0},    // group 3 (one idle head of 4), a sliding window shorter than the chunk
    {2, 1, 24, 0, 0, 1, 0},     // MQA
    {8, 2, 64, 0, 16, 1, 0},    // long contexts, one pass
    {8, 2, 64, 0, 16, 4, 0},    // split-K
    {8, 2, 64, 0, 16, 32, 0},   // more splits than the shorter contexts have keys to share well
    {8, 2, 64, 40, 16, 3, 0},   // split-K inside a sliding window
    {8, 2, 64, 0, 12, 5, 0},    // 12-slot blocks (the slot division by a non-power of two)
    {16, 2, 128, 0, 16, 1, 0},  // groups of 8, head_dim 128
    {16, 2, 128, 33, 16, 8, 0}, // groups of 8, head_dim 128, window, split
    {8, 8, 80, 0, 16, 1, 0},    // group 1, head_dim 80 (10 vectors of halves)
    {8, 8, 80, 0, 12, 16, 0},   // group 1, head_dim 80, split
    {12, 3, 36, 7, 16, 1, 0},   // 36: one element a load for halves (36 % 8), vectors for floats
    {6, 3, 50, 0, 12, 4, 0},    // 50: one element a load for every type
    {8, 2, 64, 0, 16, 2, 1},    // unaligned caches: one element a load at head_dim 64
    {8, 2, 64, 9, 0, 1, 1},     // unaligned, short step, window
    {12, 1, 64, 0, 16, 2, 0},   // group 12: a chunk of 8 heads and one of 4
    {64, 1, 16, 0, 16, 1, 0},   // group 64 (the limit): 8 chunks; head_dim 16
    {64, 2, 256, 0, 0, 1, 0},   // head_dim 256 (the limit), 8 chunks
};

// Tensor-core prefill (k_paged_attn_args.tc_prefill) against the CUDA-core
// path and the reference, on one step: a decode token at position 30, a
// 70-token chunk at positions 9..78 and a 20-token chunk at 0..19 (step
// tokens 0, 1..70, 71..90: tiles 16..31, 32..47 and 48..63 are the chunk's
// alone and go on tensor cores, the rest stay on the first kernel), 16-slot
// blocks scattered over a pool of 32. Bounds: the CUDA-core path's, and for
// the tensor-core path twice them (the softmax weights are rounded to the
// storage type before P V, an error of about one rounding of the type).
static void test_paged_attn_tc(dtype dt, int64_t n_heads, int64_t n_kv, int64_t d, int64_t window) {
  tk_rng r = {0x7c + (uint64_t)dt * 31 + (uint64_t)(n_heads * 5 + d + window)};
  const int64_t bt = 16, nb = 32, row = n_kv * d, QS = (n_heads + 2 * n_kv) * d, Q = n_heads * d;
  int64_t start[3] = {30, 9, 0}, ntok[3] = {1, 70, 20};
  int32_t tables[3][8];
  for (int i = 0, k = 0; i < 3; i++)
    for (int b = 0; b < 8; b++, k++) tables[i][b] = (int32_t)((k * 13 + 7) % nb);  // 24 distinct of the 32
  const int64_t T = 91;
  float *kc, *vc, *qkv;
  size_t cache_n = (size_t)(nb * bt * row);
  void *d_kc = dev_rand(&r, cache_n, -1, 1, dt, &kc), *d_vc = dev_rand(&r, cache_n, -1, 1, dt, &vc);
  void *d_qkv = dev_rand(&r, (size_t)(T * QS), -1, 1, dt, &qkv);
  int32_t item[91], pos[91], toff[3], flat[24];
  int64_t t = 0, nf = 0;
  for (int i = 0; i < 3; i++) {
    toff[i] = (int32_t)nf;
    int64_t need = (start[i] + ntok[i] + bt - 1) / bt;
    for (int64_t b = 0; b < need; b++) flat[nf++] = tables[i][b];
    for (int64_t j = 0; j < ntok[i]; j++, t++) item[t] = i, pos[t] = (int32_t)(start[i] + j);
  }
  int32_t *d_item = tk_to_dev(item, (size_t)T * 4), *d_pos = tk_to_dev(pos, (size_t)T * 4);
  int32_t *d_toff = tk_to_dev(toff, sizeof toff), *d_flat = tk_to_dev(flat, (size_t)nf * 4);
  void *d_o = tk_dev_alloc((size_t)(T * Q) * 4), *d_o2 = tk_dev_alloc((size_t)(T * Q) * 4);
  k_llm_meta m = {.tok_item = d_item, .tok_pos = d_pos, .tables = d_flat, .table_off = d_toff, .n_tok = T};
  size_t es = dtype_size(dt);
  TK_OK(k_paged_kv_write_cuda(d_kc, d_vc, (uint8_t *)d_qkv + Q * es, (uint8_t *)d_qkv + (Q + row) * es, QS, row, bt, &m,
                              dt, NULL, TK_E));
  k_paged_attn_args a = {.n_heads = n_heads,
                         .n_kv_heads = n_kv,
                         .head_dim = d,
                         .q_stride = QS,
                         .o_stride = Q,
                         .block_tokens = bt,
                         .window = window,
                         .scale = 1.0f / sqrtf((float)d)};
  TK_OK(k_paged_attn_cuda(d_o, d_qkv, d_kc, d_vc, &m, &a, 1, NULL, dt, NULL, TK_E));
  a.tc_prefill = 1;
  TK_OK(k_paged_attn_cuda(d_o2, d_qkv, d_kc, d_vc, &m, &a, 1, NULL, dt, NULL, TK_E));
  float *got_k = dev_get(d_kc, cache_n, dt), *got_v = dev_get(d_vc, cache_n, dt);
  float *plain = dev_get(d_o, (size_t)(T * Q), dt), *tc = dev_get(d_o2, (size_t)(T * Q), dt);
  float *want = tk_xmalloc((size_t)(T * Q) * 4), *scratch = tk_xmalloc(512 * 4);
  t = 0;
  for (int i = 0; i < 3; i++) {
    const float *rows = qkv + t * QS;
    k_paged_kv_write(kc, tables[i], bt, row, start[i], ntok[i], rows + Q, QS);
    k_paged_kv_write(vc, tables[i], bt, row, start[i], ntok[i], rows + Q + row, QS);
    k_paged_attn_args ai = a;
    ai.n_q = ntok[i], ai.pos0 = start[i];
    k_paged_attn_ref(want + t * Q, rows, kc, vc, tables[i], &ai, scratch);
    t += ntok[i];
  }
  char what[128];
  double tol = rtol_of(dt);
  snprintf(what, sizeof what, "paged_attn (prefill tiles) %s heads %lld/%lld d %lld window %lld: CUDA cores",
           dtype_wire_name(dt), (long long)n_heads, (long long)n_kv, (long long)d, (long long)window);
  tk_compare(what, plain, want, (size_t)(T * Q), tol, tol);
  snprintf(what, sizeof what, "paged_attn (prefill tiles) %s heads %lld/%lld d %lld window %lld: tensor cores",
           dtype_wire_name(dt), (long long)n_heads, (long long)n_kv, (long long)d, (long long)window);
  tk_compare(what, tc, want, (size_t)(T * Q), 2 * tol, 2 * tol);
  snprintf(what, sizeof what, "paged_attn %s d %lld window %lld: tensor cores against CUDA cores", dtype_wire_name(dt),
           (long long)d, (long long)window);
  tk_compare(what, tc, plain, (size_t)(T * Q), 2 * tol, 2 * tol);
  // the tokens outside the tensor-core tiles are the first kernel's, bit for bit
  size_t same = 0, outside = 0;
  for (int64_t k = 0; k < T; k++) {
    if (k >= 16 && k < 64) continue;
    outside += (size_t)Q;
    same += (size_t)(memcmp(tc + k * Q, plain + k * Q, (size_t)Q * 4) == 0) * (size_t)Q;
  }
  CHECK_EQ_INT((long long)same, (long long)outside);
  free(got_k), free(got_v), free(plain), free(tc), free(want), free(scratch), free(kc), free(vc), free(qkv);
  cudaFree(d_kc), cudaFree(d_vc), cudaFree(d_qkv), cudaFree(d_item), cudaFree(d_pos), cudaFree(d_toff);
  cudaFree(d_flat), cudaFree(d_o), cudaFree(d_o2);
}

// k_gemv_ex_cuda's fused forms against the kernels they replace, on the same
// device inputs: the gate+up epilogue (k_gemv_cuda over the 2n rows, then
// k_mlp_act_cuda) bit for bit; the RMSNorm prologue (k_rms_norm_dt_cuda,
// then the product) within a rounding of the normalised x (the factor's sum
// runs in another order); every form launched as a programmatic dependent
// equal bit for bit to the plain launch; a row of an 8-row fused product
// equal to the same row alone; the refusals.
static void test_gemv_fused(dtype dt) {
  tk_rng r = {0x9e3d + dt};
  const int64_t shapes[][2] = {{37, 8}, {300, 264}, {129, 2048}, {70, 1008}};
  const size_t es = dtype_size(dt);
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
    const int64_t n = shapes[si][0], k = shapes[si][1];
    float *hx, *hw, *hb, *hs;
    void *d_x = dev_rand(&r, 8 * (size_t)k, -2, 2, dt, &hx), *d_w = dev_rand(&r, (size_t)(2 * n * k), -1, 1, dt, &hw);
    void *d_b = dev_rand(&r, 2 * (size_t)n, -1, 1, dt, &hb), *d_s = dev_rand(&r, (size_t)k, 0.5f, 1.5f, dt, &hs);
    void *d_h = tk_dev_alloc(8 * (size_t)k * es), *d_mlp = tk_dev_alloc(8 * 2 * (size_t)n * es);
    void *d_want = tk_dev_alloc(8 * 2 * (size_t)n * es), *d_y = tk_dev_alloc(8 * 2 * (size_t)n * es);
    const int ms[] = {1, 2, 3, 5, 8};
    for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
      const int m = ms[mi];
      for (int form = 0; form < 3; form++) {  // 0: gate+up, 1: RMSNorm, 2: both
        const int glu = form != 1, rms = form != 0;
        const int64_t ny = glu ? n : 2 * n;  // outputs a row (the plain product covers all 2n rows)
        const k_mlp_kind act = (k_mlp_kind)((int)(si + mi) % 3);
        const void *xin = d_x;
        if (rms) {
          TK_OK(k_rms_norm_dt_cuda(d_h, d_x, d_s, (size_t)m, (size_t)k, 1e-5f, dt, NULL, TK_E));
          xin = d_h;
        }
        if (glu) {
          TK_OK(k_gemv_cuda(d_mlp, xin, d_w, d_b, NULL, m, 2 * n, k, dt, NULL, TK_E));
          TK_OK(k_mlp_act_cuda(d_want, d_mlp, (size_t)m, (size_t)n, act, 1, dt, NULL, TK_E));
        } else {
          TK_OK(k_gemv_cuda(d_want, xin, d_w, d_b, NULL, m, 2 * n, k, dt, NULL, TK_E));
        }
        float *want = dev_get(d_want, (size_t)m * (size_t)ny, dt);
        for (int pdl = 0; pdl < 2; pdl++) {
          k_gemv_opts o = {.rms_scale = rms ? d_s : NULL, .eps = 1e-5f, .glu = glu, .act = act, .pdl = pdl};
          TK_CUDA(cudaMemset(d_y, 0x7f, (size_t)m * (size_t)ny * es));  // a kernel before it, for the dependent launch
          TK_OK(k_gemv_ex_cuda(d_y, d_x, d_w, d_b, NULL, m, glu ? n : 2 * n, k, &o, dt, NULL, TK_E));
          float *got = dev_get(d_y, (size_t)m * (size_t)ny, dt);
          char what[112];
          snprintf(what, sizeof what, "gemv fused %s m %d n %lld k %lld form %d act %d pdl %d", dtype_wire_name(dt), m,
                   (long long)n, (long long)k, form, (int)act, pdl);
          if (!rms)
            tk_compare(what, got, want, (size_t)m * (size_t)ny, 0, 0);
          else  // a rounding of x's normalised elements (|x| <= ~3), over k products, then the activation
            tk_compare(what, got, want, (size_t)m * (size_t)ny, 4 * rtol_of(dt),
                       4 * rtol_of(dt) * sqrt((double)k) * (glu ? 2 : 1));
          free(got);
        }
        free(want);
      }
    }
    // a fused row alone against the same row of 8: bit for bit
    k_gemv_opts o = {.rms_scale = d_s, .eps = 1e-5f, .glu = 1, .act = K_MLP_SILU, .pdl = 1};
    TK_OK(k_gemv_ex_cuda(d_y, d_x, d_w, d_b, NULL, 8, n, k, &o, dt, NULL, TK_E));
    float *eight = dev_get(d_y, 8 * (size_t)n, dt);
    TK_OK(k_gemv_ex_cuda(d_y, (uint8_t *)d_x + 5 * (size_t)k * es, d_w, d_b, NULL, 1, n, k, &o, dt, NULL, TK_E));
    float *one = dev_get(d_y, (size_t)n, dt);
    char what[64];
    snprintf(what, sizeof what, "gemv fused %s n %lld: a row alone", dtype_wire_name(dt), (long long)n);
    tk_compare(what, one, eight + 5 * (size_t)n, (size_t)n, 0, 0);
    free(eight), free(one), free(hx), free(hw), free(hb), free(hs);
    cudaFree(d_x), cudaFree(d_w), cudaFree(d_b), cudaFree(d_s), cudaFree(d_h), cudaFree(d_mlp), cudaFree(d_want);
    cudaFree(d_y);
  }
  err e = {0};
  void *p = tk_dev_alloc(8 * 4096 * 2);
  k_gemv_opts glu = {.glu = 1}, wide = {.rms_scale = p}, bad = {.act = (k_mlp_kind)7};
  CHECK_EQ_INT(k_gemv_ex_cuda(p, p, p, NULL, p, 1, 4, 8, &glu, dt, NULL, &e), ERR_INVALID_ARGUMENT);  // res + glu
  CHECK_EQ_INT(k_gemv_ex_cuda(p, p, p, NULL, NULL, 1, 4, 8, &bad, dt, NULL, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(k_gemv_ex_cuda(p, p, p, NULL, NULL, 8, 4, 4096, &wide, dt, NULL, &e), ERR_UNIMPLEMENTED);  // 64 KiB
  CHECK_CONTAINS(e.msg, "shared memory");
  CHECK_EQ_INT(k_gemv_ex_cuda(p, p, p, NULL, NULL, 4, 4, 4096, &wide, dt, NULL, &e), 0);  // 32 KiB: fits
  TK_CUDA(cudaDeviceSynchronize());
  cudaFree(p);
}

int main(void) {
  test_errors();
  tk_require_device();
  for (size_t i = 0; i < sizeof DTS / sizeof DTS[0]; i++) {
    dtype dt = DTS[i];
    test_embed(dt);
    test_norms(dt);
    test_rope(dt);
    test_rope_kv_write(dt);
    if (dt != DT_FP32) test_gemv(dt);  // FP16, BF16 (FP32 stays on cuBLASLt)
    if (dt != DT_FP32) test_gemv_fused(dt);
    test_mlp_act(dt);
    const size_t widths[] = {1, 5, 33, 1000, 1025, 2048, 2049, 4097, 50257, 128256};
    for (size_t k = 0; k < sizeof widths / sizeof widths[0]; k++) test_argmax(dt, widths[k]);
    for (size_t c = 0; c < sizeof PA_CASES / sizeof PA_CASES[0]; c++)
      for (int shallow = 0; shallow < 2; shallow++) test_paged_attn(dt, PA_CASES[c], shallow);  // both pipelines
  }
  int major = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  if (major >= 8) {
    for (int i = 1; i < 3; i++) {  // FP16, BF16
      test_paged_attn_tc(DTS[i], 8, 2, 64, 0);   // GQA, groups of 4
      test_paged_attn_tc(DTS[i], 4, 4, 128, 0);  // MHA, the largest head
      test_paged_attn_tc(DTS[i], 6, 2, 32, 21);  // a sliding window inside the chunk
      test_paged_attn_tc(DTS[i], 2, 1, 80, 0);   // MQA, a head of 5 x 16
    }
  } else {
    printf("tensor-core prefill attention: skipped (compute capability %d.x, needs 8.0)\n", major);
  }
  CHECK_DONE();
}
