// kernels/attn/k_rope.cu: CUDA twin of k_rope (kernels/attn/k_rope.c): the
// rotate-half RoPE of transformers' Llama, Qwen2 and Mistral, in place on
// every head of a step's rows (the runner passes Q's and K's heads, adjacent
// in the fused QKV row, as one run of n_heads + n_kv_heads heads). The
// angle pos * inv_freq is formed in float and the rotation with _rn
// intrinsics, as the reference's C evaluates them; cosf and sinf are the
// accurate ones (no fast math), so FP32 results are within an ulp or two.
// k_rope_kv_write_cuda: the same rotation fused with the paged KV write.
#include "kernels/k_cuda_common.cuh"

namespace {

template <class T>
__global__ void rope_kernel(T *x, size_t n_tok, const int32_t *pos, int64_t n_heads, int64_t head_dim,
                            int64_t row_stride, const float *inv_freq) {
  int64_t half = head_dim / 2;
  size_t n = n_tok * (size_t)n_heads * (size_t)half, stride = (size_t)gridDim.x * blockDim.x;
  for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < n; idx += stride) {
    size_t i = idx % (size_t)half, h = idx / (size_t)half % (size_t)n_heads, t = idx / (size_t)half / (size_t)n_heads;
    float ang = __fmul_rn((float)pos[t], inv_freq[i]);
    float c = cosf(ang), s = sinf(ang);
    T *xh = x + t * (size_t)row_stride + h * (size_t)head_dim;
    float a = k_ld(xh[i]), b = k_ld(xh[i + half]);
    xh[i] = k_st<T>(__fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s)));
    xh[i + half] = k_st<T>(__fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s)));
  }
}

// RoPE on the Q and K heads of a step's QKV rows and the K and V rows into
// the paged cache, in one launch (issue 35: each was a launch-bound ~4 us
// kernel a layer at decode). One thread a rotation pair of a Q or K head
// (the same arithmetic as rope_kernel, so the same bits), and for a K pair
// also the two V elements at the same offsets of the V row: every element
// of the K and V rows is written once to its slot, as kv_write_kernel does.
template <class T>
__global__ void rope_kv_write_kernel(T *qkv, T *kc, T *vc, int64_t n_heads, int64_t n_kv, int64_t head_dim,
                                     int64_t row_stride, const float *inv_freq, int64_t bt, k_llm_meta m) {
  const int64_t half = head_dim / 2, heads = n_heads + n_kv, kv_row = n_kv * head_dim;
  size_t n = (size_t)m.n_tok * (size_t)heads * (size_t)half, stride = (size_t)gridDim.x * blockDim.x;
  for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < n; idx += stride) {
    size_t i = idx % (size_t)half, h = idx / (size_t)half % (size_t)heads, t = idx / (size_t)half / (size_t)heads;
    const int32_t p = m.tok_pos[t];
    T *row = qkv + t * (size_t)row_stride, *xh = row + h * (size_t)head_dim;
    if (inv_freq) {
      float ang = __fmul_rn((float)p, inv_freq[i]);
      float c = cosf(ang), s = sinf(ang);
      float a = k_ld(xh[i]), b = k_ld(xh[i + half]);
      xh[i] = k_st<T>(__fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s)));
      xh[i + half] = k_st<T>(__fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s)));
    }
    if (h >= (size_t)n_heads) {  // a K head: its pair, and V's elements at the same offsets, into the slot
      const int32_t *table = m.tables + m.table_off[m.tok_item[t]];
      size_t slot = (size_t)table[p / bt] * (size_t)bt + (size_t)(p % bt);
      size_t c0 = (h - (size_t)n_heads) * (size_t)head_dim + i;
      const T *vr = row + (size_t)heads * (size_t)head_dim;
      T *kd = kc + slot * (size_t)kv_row, *vd = vc + slot * (size_t)kv_row;
      kd[c0] = xh[i];
      kd[c0 + half] = xh[i + half];
      vd[c0] = vr[c0];
      vd[c0 + half] = vr[c0 + half];
    }
  }
}

}  // namespace

extern "C" int k_rope_kv_write_cuda(void *qkv, void *k_cache, void *v_cache, int64_t n_heads, int64_t n_kv_heads,
                                    int64_t head_dim, int64_t row_stride, const float *inv_freq, int64_t block_tokens,
                                    const k_llm_meta *m, dtype dt, cudaStream_t stream, err *e) {
  static const char *kname = "k_rope_kv_write_cuda";
  if (!m || m->n_tok <= 0) return 0;
  if (!qkv || !k_cache || !v_cache || !m->tok_item || !m->tok_pos || !m->tables || !m->table_off)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer", kname);
  if (n_heads <= 0 || n_kv_heads <= 0 || head_dim < 2 || head_dim % 2 || block_tokens <= 0 ||
      row_stride < (n_heads + 2 * n_kv_heads) * head_dim)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "%s: %lld heads and %lld KV heads of %lld (even, >= 2), rows of %lld, %lld-token blocks", kname,
                   (long long)n_heads, (long long)n_kv_heads, (long long)head_dim, (long long)row_stride,
                   (long long)block_tokens);
  size_t work = (size_t)m->n_tok * (size_t)(n_heads + n_kv_heads) * (size_t)(head_dim / 2);
  K_DT_DISPATCH(e, kname, dt, T,
                rope_kv_write_kernel<T><<<k_blocks_for(work, K_THREADS), K_THREADS, 0, stream>>>(
                    (T *)qkv, (T *)k_cache, (T *)v_cache, n_heads, n_kv_heads, head_dim, row_stride, inv_freq,
                    block_tokens, *m));
  K_LAUNCH_CHECK(e, kname);
  return 0;
}

extern "C" int k_rope_cuda(void *x, size_t n_tok, const int32_t *pos, int64_t n_heads, int64_t head_dim,
                           int64_t row_stride, const float *inv_freq, dtype dt, cudaStream_t stream, err *e) {
  static const char *kname = "k_rope_cuda";
  if (n_tok == 0 || n_heads <= 0 || head_dim < 2) return 0;
  if (!x || !pos || !inv_freq) return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer", kname);
  if (head_dim % 2 || row_stride < n_heads * head_dim)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: head_dim %lld odd or rows (%lld) narrower than the heads", kname,
                   (long long)head_dim, (long long)row_stride);
  size_t work = n_tok * (size_t)n_heads * (size_t)(head_dim / 2);
  K_DT_DISPATCH(e, kname, dt, T,
                rope_kernel<T><<<k_blocks_for(work, K_THREADS), K_THREADS, 0, stream>>>(
                    (T *)x, n_tok, pos, n_heads, head_dim, row_stride, inv_freq));
  K_LAUNCH_CHECK(e, kname);
  return 0;
}
