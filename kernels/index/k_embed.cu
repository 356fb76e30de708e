// kernels/index/k_embed.cu: CUDA twin of k_embed (kernels/index/k_embed.c):
// a decoder step's token embeddings, rows gathered from the embedding matrix
// (plus GPT-2's learned position rows), one thread per element, in the
// model's storage type. The sum with the position row is formed in float and
// rounded once, as the FP32 reference forms it.
#include "kernels/k_cuda_common.cuh"

namespace {

template <class T>
__global__ void embed_kernel(T *y, const T *table, const T *pos_table, const int32_t *tokens, const int32_t *pos,
                             size_t n_tok, size_t hidden) {
  size_t n = n_tok * hidden, stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    size_t t = i / hidden, c = i % hidden;
    float v = k_ld(table[(size_t)tokens[t] * hidden + c]);
    if (pos_table) v = __fadd_rn(v, k_ld(pos_table[(size_t)pos[t] * hidden + c]));
    y[i] = k_st<T>(v);
  }
}

}  // namespace

extern "C" int k_embed_cuda(void *y, const void *table, const void *pos_table, const int32_t *tokens,
                            const int32_t *pos, size_t n_tok, size_t hidden, dtype dt, cudaStream_t stream, err *e) {
  static const char *kname = "k_embed_cuda";
  if (n_tok == 0 || hidden == 0) return 0;
  if (!y || !table || !tokens || (pos_table && !pos))
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: NULL pointer", kname);
  K_DT_DISPATCH(e, kname, dt, T,
                embed_kernel<T><<<k_blocks_for(n_tok * hidden, K_THREADS), K_THREADS, 0, stream>>>(
                    (T *)y, (const T *)table, (const T *)pos_table, tokens, pos, n_tok, hidden));
  K_LAUNCH_CHECK(e, kname);
  return 0;
}
