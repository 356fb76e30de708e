// engine/llm/cuda/llm_cuda.c: the GPU forward step (llm_cuda.h). The order
// of operations is the CPU step's (engine/llm/llm_step.c), each piece a
// kernel of kernels/ or a cuBLASLt GEMM:
//   embed (+ learned positions)        k_embed_cuda
//   per layer: norm                    k_rms_norm_dt_cuda / k_layer_norm_dt_cuda
//              QKV = h Wqkv^T (+ b)    one GEMM (fused QKV weights, bias in the epilogue)
//              RoPE on Q and K heads,  k_rope_kv_write_cuda (one launch: the rotation and
//              KV into the blocks      the K and V rows' copy into their cache slots)
//              attention               k_paged_attn_cuda (prefill and decode tokens together)
//              x += att Wo^T (+ b)     one GEMM, the residual as cuBLASLt's C input (in place)
//              norm, up = h Wup^T      one GEMM (fused gate+up)
//              act                     k_mlp_act_cuda (SwiGLU, GeGLU, GELU)
//              x += act Wdown^T (+ b)  one GEMM with the residual
//   (a decode step of one token by default (eng_llm_cuda_runner_set_gemv):
//   k_gemv_ex_cuda for the products, the RMSNorms inside the QKV and
//   gate+up ones and the activation in gate+up's epilogue (normed_linear), the
//   GEMVs launched as programmatic dependents (eng_llm_cuda_runner_set_decode_fusion))
//   the sampling items' last rows      k_gather_cuda, then the final norm and the LM head
//   logits to FP32                     k_widen_cuda, copied to the host
//   or the greedy rows' tokens         k_argmax_rows_cuda, int32 ids to the host
//                                      (eng_llm_cuda_step_ids: issue 35)
//   and the sampled rows' tokens       k_sample_rows_cuda over the same id rows (the
//                                      greedy ones skipped: mode 0), the host's
//                                      uniform numbers and seen ids uploaded first
// The LM head runs in chunks of LOGIT_ROWS rows, so its scratch (rows x
// vocab) stays bounded whatever max_step_tokens is.
#include "engine/llm/cuda/llm_cuda.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/cuda_check.h"
#include "engine/cuda/cuda_gemm.h"
#include "engine/llm/llm_internal.h"
#include "kernels/k_cuda.h"

#define LOGIT_ROWS 64
#define MAX_BUCKETS 16
#define MAX_SPLITS 32    // k_paged_attn_cuda's
#define SPLIT_KEYS 32    // keys per split at least (a block's keys of one pass at head_dim 64, FP16)
#define SPLIT_BLOCKS 4   // attention blocks per SM that split-K aims for
#define SHALLOW_WAVES 1  // attention grids past this many deep-pipeline waves take the shallow one (attn_shallow)
#define ALIGN 256
#define GEMM_WORKSPACE ((size_t)32 << 20)

// One layer's device weights (eng_llm_layer's, device pointers).
typedef struct dev_layer {
  void *ln1_w, *ln1_b, *wqkv, *bqkv, *wo, *bo, *ln2_w, *ln2_b, *w_up, *b_up, *w_down, *b_down;
} dev_layer;

struct eng_llm_cuda_runner {
  eng_llm_config g;
  eng_llm_runner_config c;
  dtype dt;
  size_t es;  // bytes per element
  int device, sms;
  cudaStream_t stream;
  // split-K attention (k_paged_attn_cuda) for steps of few tokens with long
  // contexts: the splits of the current step and the workspace, sized at
  // create for the steps that may use it (tokens x KV heads < SPLIT_BLOCKS x SMs)
  int splits;
  float *attn_ws;
  int64_t split_tokens;
  eng_gemm_lt *gemm;
  // cuBLASLt's candidates timed per decode shape before a graph's capture
  // (eng_llm_cuda_runner_set_gemm_tune; NULL, the default: the heuristic's first answer)
  eng_gemm_tuner *tuner;
  int gemv_rows;      // layer products of steps of <= gemv_rows tokens on k_gemv_cuda (eng_llm_cuda_runner_set_gemv)
  int fuse, pdl;      // eng_llm_cuda_runner_set_decode_fusion: norms and SwiGLU inside the GEMVs; dependent launches
  int major;          // compute capability (dependent launches from 9)
  int attn_pipeline;  // eng_llm_cuda_runner_set_attn_pipeline: 0 by the grid, 1 deep, 2 shallow
  eng_gemm_dtype gdt;
  // weights: one allocation
  uint8_t *wbuf;
  size_t wbytes;
  void *embed, *pos_embed, *norm_w, *norm_b, *lm_head;
  float *inv_freq;
  dev_layer *layers;
  // KV pool: [layer][block][slot][kv head][dim], K and V apart
  uint8_t *k_cache, *v_cache;
  size_t layer_bytes, kv_bytes;
  // scratch for max_step_tokens rows (and LOGIT_ROWS logit rows)
  uint8_t *sbuf;
  void *x, *h, *qkv, *att, *mlp, *act, *last, *lg;
  float *lg32;
  int32_t *ids_d;  // the id rows' tokens (max_step_tokens): greedy and sampled
  void *amax_ws;   // k_argmax_rows_cuda's split rows (LOGIT_ROWS rows of the vocabulary)
  int32_t *ids_h;  // pinned, their copy on the host
  // device sampling: per id row its parameters (mode 0 for a greedy row), the
  // seen ids of the rows with a repetition penalty, pinned and device copies
  // (fixed addresses: the decode graphs read them), and the kernel's scratch
  // (2 x vocab floats per logit row of a chunk)
  k_sample_param *sp_h, *sp_d;
  int32_t *seen_h, *seen_d;
  int64_t seen_cap;
  void *smp;       // k_sample_rows_cuda's workspace (k_sample_ws_bytes)
  uint8_t *idrow;  // per item of the step: 1 greedy, 2 sampled on the device (max_step_tokens)
  // metadata: pinned host and device copies of one layout
  int32_t *meta_h, *meta_d;
  size_t meta_cap;    // int32 entries
  int64_t table_cap;  // block-table entries per step at most
  // CUDA graphs of decode-only steps (eng_llm_cuda_runner_enable_graphs):
  // bucket k holds 2^k items; padding items write block n_blocks (one
  // spare block per layer past the pool) at position 0
  int tc;             // prefill attention tiles on tensor cores (eng_llm_cuda_runner_set_tc_prefill)
  int64_t graph_max;  // 0: off
  // [0]: every item's logits to the host; [1]: every item an id row, greedy or sampled (ids only)
  cudaGraphExec_t gx[2][MAX_BUCKETS];
  int gsplits[2][MAX_BUCKETS];  // the attention splits each graph was captured with
  float *lg_h;                  // pinned: graph_max x vocab logits
  eng_llm_cuda_graph_stats gst;
};

// The metadata layout for T = max_step_tokens: tokens, positions and items
// per token, table offsets and logit rows per item (items <= tokens), then
// the block tables.
enum { M_TOK = 0, M_POS, M_ITEM, M_TOFF, M_ROWS, M_TABLES };
static int32_t *meta_at(const eng_llm_cuda_runner *r, int32_t *base, int part) {
  return base + (size_t)part * (size_t)r->c.max_step_tokens;
}

static size_t align_up(size_t v) {
  return (v + ALIGN - 1) / ALIGN * ALIGN;
}

// Weight upload, in two passes over the same walk: sizing (dst NULL), then
// copying into one allocation.
typedef struct upl {
  uint8_t *base;
  size_t off;
  int rc;
  err *e;
} upl;

static void *up(upl *u, const void *host, size_t bytes) {
  if (!host) return NULL;
  size_t at = u->off;
  u->off = align_up(u->off + bytes);
  if (!u->base || u->rc) return NULL;
  u->rc = CUDA_OK(u->e, cudaMemcpy(u->base + at, host, bytes, cudaMemcpyHostToDevice));
  return u->base + at;
}

static void upload_all(eng_llm_cuda_runner *r, const eng_llm_model *m, upl *u) {
  const eng_llm_config *g = &r->g;
  size_t es = r->es, H = (size_t)g->hidden, FF = (size_t)g->intermediate, d = (size_t)g->head_dim;
  size_t Q = (size_t)g->n_heads * d, KV = (size_t)g->n_kv_heads * d, NQKV = Q + 2 * KV;
  size_t up_rows = g->gated_mlp ? 2 * FF : FF;
  r->embed = up(u, m->embed, (size_t)g->vocab * H * es);
  r->pos_embed = up(u, m->pos_embed, (size_t)g->max_pos * H * es);
  r->norm_w = up(u, m->norm_w, H * es);
  r->norm_b = up(u, m->norm_b, H * es);
  r->lm_head = m->lm_head == m->embed ? r->embed : up(u, m->lm_head, (size_t)g->vocab * H * es);
  r->inv_freq = up(u, m->inv_freq, d / 2 * sizeof(float));
  for (int64_t i = 0; i < g->n_layers; i++) {
    const eng_llm_layer *l = &m->layers[i];
    dev_layer *o = &r->layers[i];
    o->ln1_w = up(u, l->ln1_w, H * es);
    o->ln1_b = up(u, l->ln1_b, H * es);
    o->wqkv = up(u, l->wqkv, NQKV * H * es);
    o->bqkv = up(u, l->bqkv, NQKV * es);
    o->wo = up(u, l->wo, H * Q * es);
    o->bo = up(u, l->bo, H * es);
    o->ln2_w = up(u, l->ln2_w, H * es);
    o->ln2_b = up(u, l->ln2_b, H * es);
    o->w_up = up(u, l->w_up, up_rows * H * es);
    o->b_up = up(u, l->b_up, up_rows * es);
    o->w_down = up(u, l->w_down, H * FF * es);
    o->b_down = up(u, l->b_down, H * es);
  }
}

void eng_llm_cuda_runner_destroy(eng_llm_cuda_runner *r) {
  if (!r) return;
  if (r->stream) {
    (void)cudaSetDevice(r->device);
    (void)cudaStreamSynchronize(r->stream);
  }
  for (int g = 0; g < 2; g++)
    for (int i = 0; i < MAX_BUCKETS; i++)
      if (r->gx[g][i]) cudaGraphExecDestroy(r->gx[g][i]);
  cudaFreeHost(r->lg_h);
  cudaFreeHost(r->ids_h);
  cudaFreeHost(r->sp_h);
  cudaFreeHost(r->seen_h);
  eng_gemm_lt_destroy(r->gemm);
  eng_gemm_tuner_destroy(r->tuner);  // after the cuBLASLt object that borrowed it
  cudaFree(r->wbuf);
  cudaFree(r->k_cache);
  cudaFree(r->v_cache);
  cudaFree(r->sbuf);
  cudaFree(r->attn_ws);
  cudaFree(r->meta_d);
  cudaFreeHost(r->meta_h);
  if (r->stream) cudaStreamDestroy(r->stream);
  (void)cudaGetLastError();
  free(r->idrow);
  free(r->layers);
  free(r);
}

size_t eng_llm_cuda_runner_kv_bytes(const eng_llm_cuda_runner *r) {
  return r->kv_bytes;
}
size_t eng_llm_cuda_runner_weight_bytes(const eng_llm_cuda_runner *r) {
  return r->wbytes;
}

// From a model (its weights uploaded) or from a runner whose weights are
// borrowed (share; m NULL).
static int runner_create(const eng_llm_model *m, const eng_llm_cuda_runner *share, const eng_llm_runner_config *c,
                         int device, eng_llm_cuda_runner **out, err *e) {
  *out = NULL;
  const eng_llm_config *g = m ? eng_llm_model_config(m) : &share->g;
  dtype wdt = m ? m->wdt : share->dt;
  if (share) device = share->device;
  if (c->n_blocks <= 0 || c->block_tokens <= 0 || c->max_step_tokens <= 0 || c->max_context <= 0)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "cuda runner: n_blocks, block_tokens, max_step_tokens and max_context must be > 0");
  if (c->max_step_tokens > INT32_MAX / 8)
    return err_set(e, ERR_INVALID_ARGUMENT, "cuda runner: max_step_tokens %lld too large",
                   (long long)c->max_step_tokens);
  if (wdt != DT_FP32 && wdt != DT_FP16 && wdt != DT_BF16)
    return err_set(e, ERR_INVALID_ARGUMENT, "cuda runner: weights of type %s", dtype_wire_name(wdt));
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || device < 0 || device >= ndev) {
    (void)cudaGetLastError();
    return err_set(e, ERR_UNAVAILABLE, "cuda runner: no CUDA device %d (%d visible)", device, ndev);
  }
  eng_llm_cuda_runner *r = calloc(1, sizeof *r);
  if (!r) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  r->g = *g;
  r->c = *c;
  r->dt = wdt;
  r->es = dtype_size(wdt);
  r->device = device;
  r->gdt = wdt == DT_FP16 ? ENG_GEMM_FP16 : wdt == DT_BF16 ? ENG_GEMM_BF16 : ENG_GEMM_FP32;
  r->layers = calloc((size_t)g->n_layers, sizeof *r->layers);
  r->idrow = calloc((size_t)c->max_step_tokens, 1);
  int rc = 0;
  if (!r->layers || !r->idrow) {
    rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    goto fail;
  }
  if ((rc = CUDA_OK(e, cudaSetDevice(device)))) goto fail;
  if ((rc = CUDA_OK(e, cudaDeviceGetAttribute(&r->sms, cudaDevAttrMultiProcessorCount, device)))) goto fail;
  if ((rc = CUDA_OK(e, cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking)))) goto fail;
  if ((rc = eng_gemm_lt_create(&r->gemm, GEMM_WORKSPACE, 64, e))) goto fail;
  r->gemv_rows = ENG_LLM_GEMV_ROWS_DEFAULT;
  if ((rc = CUDA_OK(e, cudaDeviceGetAttribute(&r->major, cudaDevAttrComputeCapabilityMajor, device)))) goto fail;
  // one token's products on the fused GEMV, launched as dependents: the measured default
  // (eng_llm_cuda_runner_set_decode_fusion)
  eng_llm_cuda_runner_set_decode_fusion(r, 1, 1);
  // weights: uploaded, or the sharer's pointers (wbuf stays NULL: not ours)
  if (share) {
    r->embed = share->embed, r->pos_embed = share->pos_embed, r->norm_w = share->norm_w;
    r->norm_b = share->norm_b, r->lm_head = share->lm_head, r->inv_freq = share->inv_freq;
    memcpy(r->layers, share->layers, (size_t)g->n_layers * sizeof *r->layers);
    r->wbytes = share->wbytes;
  } else {
    upl u = {.e = e};
    upload_all(r, m, &u);
    r->wbytes = u.off;
    if ((rc = CUDA_OK(e, cudaMalloc((void **)&r->wbuf, r->wbytes ? r->wbytes : 1)))) {
      err_prefix(e, "cuda runner: %zu bytes of %s weights: ", r->wbytes, dtype_wire_name(r->dt));
      goto fail;
    }
    u = (upl){.base = r->wbuf, .e = e};
    upload_all(r, m, &u);
    if ((rc = u.rc)) goto fail;
  }
  // KV pool
  size_t es = r->es, T = (size_t)c->max_step_tokens, H = (size_t)g->hidden, d = (size_t)g->head_dim;
  size_t Q = (size_t)g->n_heads * d, KV = (size_t)g->n_kv_heads * d, NQKV = Q + 2 * KV, FF = (size_t)g->intermediate;
  // one spare block per layer past the pool: the graphs' padding items write there
  r->layer_bytes = ((size_t)c->n_blocks + 1) * (size_t)c->block_tokens * KV * es;
  size_t all = r->layer_bytes * (size_t)g->n_layers;
  r->kv_bytes = 2 * (size_t)c->n_blocks * (size_t)c->block_tokens * KV * es * (size_t)g->n_layers;
  if ((rc = CUDA_OK(e, cudaMalloc((void **)&r->k_cache, all))) ||
      (rc = CUDA_OK(e, cudaMalloc((void **)&r->v_cache, all)))) {
    err_prefix(e, "cuda runner: KV pool of %zu bytes: ", r->kv_bytes);
    goto fail;
  }
  // scratch
  size_t lr = T < LOGIT_ROWS ? T : LOGIT_ROWS, wide = H > Q ? H : Q;
  size_t sizes[] = {T * H * es,
                    T * wide * es,
                    T * NQKV * es,
                    T * Q * es,
                    T * 2 * FF * es,
                    T * FF * es,
                    T * H * es,
                    lr * (size_t)g->vocab * es,
                    lr * (size_t)g->vocab * sizeof(float),
                    T * sizeof(int32_t),
                    k_argmax_rows_ws_bytes(lr, (size_t)g->vocab),
                    T * sizeof(k_sample_param),
                    k_sample_ws_bytes(lr, (size_t)g->vocab),
                    ((size_t)c->n_blocks * (size_t)c->block_tokens + (size_t)c->max_context) * sizeof(int32_t)};
  size_t tot = 0;
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) tot += align_up(sizes[i]);
  if ((rc = CUDA_OK(e, cudaMalloc((void **)&r->sbuf, tot)))) {
    err_prefix(e, "cuda runner: %zu bytes of step scratch: ", tot);
    goto fail;
  }
  void **slots[] = {&r->x,
                    &r->h,
                    &r->qkv,
                    &r->att,
                    &r->mlp,
                    &r->act,
                    &r->last,
                    &r->lg,
                    (void **)&r->lg32,
                    (void **)&r->ids_d,
                    &r->amax_ws,
                    (void **)&r->sp_d,
                    (void **)&r->smp,
                    (void **)&r->seen_d};
  for (size_t i = 0, off = 0; i < sizeof sizes / sizeof sizes[0]; off += align_up(sizes[i]), i++)
    *slots[i] = r->sbuf + off;
  // split-K workspace: steps of fewer than SPLIT_BLOCKS x SMs (token, KV head) pairs
  r->split_tokens = (SPLIT_BLOCKS * (int64_t)r->sms + g->n_kv_heads - 1) / g->n_kv_heads;
  if (r->split_tokens > c->max_step_tokens) r->split_tokens = c->max_step_tokens;
  size_t wsf = k_paged_attn_ws_floats(r->split_tokens, g->n_heads, g->head_dim, MAX_SPLITS);
  if ((rc = CUDA_OK(e, cudaMalloc((void **)&r->attn_ws, wsf * sizeof(float)))) ||
      (rc = CUDA_OK(e, cudaMemset(r->attn_ws, 0, wsf * sizeof(float))))) {  // its counters start at zero
    err_prefix(e, "cuda runner: %zu bytes of attention workspace: ", wsf * sizeof(float));
    goto fail;
  }
  // metadata: a block table per token at most, each as long as the context
  int64_t per_seq = (c->max_context + c->block_tokens - 1) / c->block_tokens;
  r->table_cap = (int64_t)T * per_seq;
  r->meta_cap = (size_t)M_TABLES * T + (size_t)r->table_cap + 1;  // + the spare block's table
  if ((rc = CUDA_OK(e, cudaMallocHost((void **)&r->ids_h, T * sizeof(int32_t))))) goto fail;
  // seen ids: a step's sequences hold at most the pool's tokens unshared, plus one context;
  // past that (prefix sharing) a row's logits come back instead (eng_llm_work's sampling)
  r->seen_cap = (int64_t)c->n_blocks * c->block_tokens + c->max_context;
  if ((rc = CUDA_OK(e, cudaMallocHost((void **)&r->sp_h, T * sizeof(k_sample_param)))) ||
      (rc = CUDA_OK(e, cudaMallocHost((void **)&r->seen_h, (size_t)r->seen_cap * sizeof(int32_t))))) {
    err_prefix(e, "cuda runner: sampling buffers: ");
    goto fail;
  }
  if ((rc = CUDA_OK(e, cudaMallocHost((void **)&r->meta_h, r->meta_cap * sizeof(int32_t)))) ||
      (rc = CUDA_OK(e, cudaMalloc((void **)&r->meta_d, r->meta_cap * sizeof(int32_t))))) {
    err_prefix(e, "cuda runner: %zu bytes of step metadata: ", r->meta_cap * sizeof(int32_t));
    goto fail;
  }
  *out = r;
  return 0;
fail:
  eng_llm_cuda_runner_destroy(r);
  return rc ? rc : ERR_INTERNAL;
}

int eng_llm_cuda_runner_create(const eng_llm_model *m, const eng_llm_runner_config *c, int device,
                               eng_llm_cuda_runner **out, err *e) {
  return runner_create(m, NULL, c, device, out, e);
}

int eng_llm_cuda_runner_create_shared(const eng_llm_cuda_runner *share, const eng_llm_runner_config *c,
                                      eng_llm_cuda_runner **out, err *e) {
  return runner_create(NULL, share, c, share->device, out, e);
}

// y[T, out] = x[T, in] W^T (+ b) (+ y when res: the residual in place).
static int linear(eng_llm_cuda_runner *r, void *y, const void *x, int64_t T, int64_t in, const void *w, const void *b,
                  int64_t out, int res, err *e) {
  // a decode step's few rows: k_gemv_cuda streams the layer's weights near
  // the bandwidth (the LM head stays on cuBLASLt, already there at m = 1)
  if (T <= r->gemv_rows && w != r->lm_head) {
    k_gemv_opts o = {.pdl = r->pdl};
    int rc = k_gemv_ex_cuda(y, x, w, b, res ? y : NULL, T, out, in, &o, r->dt, r->stream, e);
    if (rc != ERR_UNIMPLEMENTED) return rc;  // else (FP32, odd k): cuBLASLt below
  }
  eng_gemm_epilogue epi = b ? ENG_GEMM_EPI_BIAS : ENG_GEMM_EPI_NONE;
  return eng_gemm_lt_run_res(r->gemm, y, x, w, b, res ? y : NULL, (int)T, (int)out, (int)in, false, true, epi, r->gdt,
                             r->stream, e);
}

static int norm(eng_llm_cuda_runner *r, void *y, const void *x, int64_t rows, const void *w, const void *b, err *e) {
  if (r->g.layer_norm)
    return k_layer_norm_dt_cuda(y, x, w, b, (size_t)rows, (size_t)r->g.hidden, r->g.norm_eps, r->dt, r->stream, e);
  return k_rms_norm_dt_cuda(y, x, w, (size_t)rows, (size_t)r->g.hidden, r->g.norm_eps, r->dt, r->stream, e);
}

// The product that opens a block, on the residual stream r->x: y = norm(x)
// W^T (+ b), or with glu y = act(norm(x) Wg^T (+ bg)) * (norm(x) Wu^T (+ bu))
// (W the gate rows then the up rows). On a decode step (<= 8 tokens) of an
// RMSNorm model one k_gemv_ex_cuda does it all (two launches fewer a layer);
// otherwise the norm into r->h, the product (into r->mlp with glu) and
// k_mlp_act_cuda, the same bits as the fused epilogue's.
static int normed_linear(eng_llm_cuda_runner *r, void *y, int64_t T, const void *ln_w, const void *ln_b,
                         const void *w, const void *b, int64_t out, int glu, k_mlp_kind act, err *e) {
  int64_t H = r->g.hidden;
  if (r->fuse && T <= r->gemv_rows && !r->g.layer_norm) {
    k_gemv_opts o = {.rms_scale = ln_w, .eps = r->g.norm_eps, .glu = glu, .act = act, .pdl = r->pdl};
    int rc = k_gemv_ex_cuda(y, r->x, w, b, NULL, T, out, H, &o, r->dt, r->stream, e);
    if (rc != ERR_UNIMPLEMENTED) return rc;  // else (FP32, too wide to stage): the three launches
  }
  TRY(norm(r, r->h, r->x, T, ln_w, ln_b, e));
  if (!glu) return linear(r, y, r->h, T, H, w, b, out, 0, e);
  TRY(linear(r, r->mlp, r->h, T, H, w, b, 2 * out, 0, e));
  return k_mlp_act_cuda(y, r->mlp, (size_t)T, (size_t)out, act, 1, r->dt, r->stream, e);
}

// The attention kernel's shallow pipeline (k_paged_attn_args.shallow) when
// the step's grid is more than SHALLOW_WAVES deep-pipeline waves (3 blocks
// an SM): there occupancy, not each warp's loads in flight, hides the
// latency. Decode at small batch (a wave or less, split-K included) keeps
// the deep one. A function of the step's tokens and splits only, so a
// bucket's graph is captured with the choice its replays would make.
static int attn_shallow(const eng_llm_cuda_runner *r, int64_t T) {
  if (r->attn_pipeline) return r->attn_pipeline == 2;
  return T * r->g.n_kv_heads * r->splits > SHALLOW_WAVES * 3 * (int64_t)r->sms;
}

static int layer(eng_llm_cuda_runner *r, int64_t L, int64_t T, const k_llm_meta *meta, err *e) {
  const eng_llm_config *g = &r->g;
  const dev_layer *l = &r->layers[L];
  int64_t H = g->hidden, d = g->head_dim, Q = g->n_heads * d, KV = g->n_kv_heads * d, NQKV = Q + 2 * KV;
  int64_t FF = g->intermediate;
  uint8_t *kc = r->k_cache + (size_t)L * r->layer_bytes, *vc = r->v_cache + (size_t)L * r->layer_bytes;
  uint8_t *qkv = r->qkv;
  k_mlp_kind act = g->act == ENG_LLM_SILU ? K_MLP_SILU : g->act == ENG_LLM_GELU_TANH ? K_MLP_GELU_TANH : K_MLP_GELU;
  // --- attention block
  TRY(normed_linear(r, r->qkv, T, l->ln1_w, l->ln1_b, l->wqkv, l->bqkv, NQKV, 0, act, e));
  // RoPE (when the model has it) and the K and V rows into the cache: one launch
  TRY(k_rope_kv_write_cuda(qkv, kc, vc, g->n_heads, g->n_kv_heads, d, NQKV, r->inv_freq, r->c.block_tokens, meta, r->dt,
                           r->stream, e));
  k_paged_attn_args a = {.n_heads = g->n_heads,
                         .n_kv_heads = g->n_kv_heads,
                         .head_dim = d,
                         .q_stride = NQKV,
                         .o_stride = Q,
                         .block_tokens = r->c.block_tokens,
                         .window = g->sliding_window,
                         .scale = 1.0f / sqrtf((float)d),
                         .tc_prefill = r->tc,
                         .shallow = attn_shallow(r, T)};
  TRY(k_paged_attn_cuda(r->att, r->qkv, kc, vc, meta, &a, r->splits, r->splits > 1 ? r->attn_ws : NULL, r->dt,
                        r->stream, e));
  TRY(linear(r, r->x, r->att, T, Q, l->wo, l->bo, H, 1, e));
  // --- MLP block
  if (g->gated_mlp) {
    TRY(normed_linear(r, r->act, T, l->ln2_w, l->ln2_b, l->w_up, l->b_up, FF, 1, act, e));
    TRY(linear(r, r->x, r->act, T, FF, l->w_down, l->b_down, H, 1, e));
  } else {
    TRY(normed_linear(r, r->mlp, T, l->ln2_w, l->ln2_b, l->w_up, l->b_up, FF, 0, act, e));
    TRY(k_mlp_act_cuda(r->mlp, r->mlp, (size_t)T, (size_t)FF, act, 0, r->dt, r->stream, e));
    TRY(linear(r, r->x, r->mlp, T, FF, l->w_down, l->b_down, H, 1, e));
  }
  return 0;
}

// Split-K for steps whose (token, KV head) pairs give fewer than
// SPLIT_BLOCKS blocks per SM: enough splits to reach that, as long as the
// longest context has SPLIT_KEYS keys per split; 1 otherwise. A power of
// two, so that a decode graph (captured with its splits; any context is
// right with any splits, only the speed differs) is captured again a few
// times at most as its contexts grow.
static int pick_splits(const eng_llm_cuda_runner *r, int64_t T, int64_t max_keys) {
  int64_t pairs = T * r->g.n_kv_heads, target = SPLIT_BLOCKS * (int64_t)r->sms;
  if (T > r->split_tokens || pairs >= target) return 1;
  int64_t s = (target + pairs - 1) / pairs;
  if (s > max_keys / SPLIT_KEYS) s = max_keys / SPLIT_KEYS;
  if (s > MAX_SPLITS) s = MAX_SPLITS;
  int p = 1;
  while (2 * (int64_t)p <= s) p *= 2;
  return p;
}

// The step's device work after the metadata copy: T tokens, nlg + ng
// sampled rows (their indices at M_ROWS: the nlg whose logits come back,
// then the ng id rows), logits to dst (device-to-host copies, chunk by
// chunk), the id rows' tokens to ids (pinned host, one copy at the end):
// each id row's argmax, then with `sample` k_sample_rows_cuda over them
// (sp_d, uploaded before, says which rows it draws; mode 0 keeps the argmax).
// Capturable: every pointer and size is fixed for a given (T, nlg, ng, sample).
static int device_work(eng_llm_cuda_runner *r, int64_t T, int64_t nlg, int64_t ng, int sample, float *dst, int32_t *ids,
                       err *e) {
  int64_t nl = nlg + ng;
  const eng_llm_config *g = &r->g;
  const int32_t *pos_d = meta_at(r, r->meta_d, M_POS);
  k_llm_meta meta = {.tok_item = meta_at(r, r->meta_d, M_ITEM),
                     .tok_pos = pos_d,
                     .tables = meta_at(r, r->meta_d, M_TABLES),
                     .table_off = meta_at(r, r->meta_d, M_TOFF),
                     .n_tok = T};
  // --- embeddings, layers
  TRY(k_embed_cuda(r->x, r->embed, r->pos_embed, meta_at(r, r->meta_d, M_TOK), pos_d, (size_t)T, (size_t)g->hidden,
                   r->dt, r->stream, e));
  for (int64_t L = 0; L < g->n_layers; L++) TRY(layer(r, L, T, &meta, e));
  // --- the sampling items' last rows: gather, final norm, LM head, in chunks
  if (!nl) return 0;
  TRY(k_gather_cuda(r->last, r->x, r->es, 1, T, (size_t)g->hidden, meta_at(r, r->meta_d, M_ROWS), 1, (size_t)nl,
                    NULL, r->stream, e));
  int64_t lr = r->c.max_step_tokens < LOGIT_ROWS ? r->c.max_step_tokens : LOGIT_ROWS;
  for (int64_t r0 = 0; r0 < nl; r0 += lr) {
    int64_t k = nl - r0 < lr ? nl - r0 : lr;
    const uint8_t *src = (const uint8_t *)r->last + (size_t)r0 * (size_t)g->hidden * r->es;
    TRY(norm(r, r->h, src, k, r->norm_w, r->norm_b, e));
    TRY(linear(r, r->lg, r->h, k, g->hidden, r->lm_head, NULL, g->vocab, 0, e));
    int64_t kl = nlg - r0 < 0 ? 0 : nlg - r0 < k ? nlg - r0 : k;  // this chunk's logits rows, then greedy ones
    if (kl) {
      TRY(k_widen_cuda(r->lg32, r->lg, (size_t)(kl * g->vocab), r->dt, r->stream, e));
      TRY(CUDA_OK(e, cudaMemcpyAsync(dst + (size_t)r0 * (size_t)g->vocab, r->lg32,
                                     (size_t)(kl * g->vocab) * sizeof(float), cudaMemcpyDeviceToHost, r->stream)));
    }
    if (k > kl) {
      const uint8_t *idl = (const uint8_t *)r->lg + (size_t)(kl * g->vocab) * r->es;
      TRY(k_argmax_rows_cuda(r->ids_d + (r0 + kl - nlg), idl, (size_t)(k - kl), (size_t)g->vocab, r->amax_ws, r->dt,
                             r->stream, e));
      if (sample)
        TRY(k_sample_rows_cuda(r->ids_d + (r0 + kl - nlg), idl, r->smp, (size_t)(k - kl), (size_t)g->vocab,
                               r->sp_d + (r0 + kl - nlg), r->seen_d, r->dt, r->stream, e));
    }
  }
  if (ng)
    TRY(CUDA_OK(e, cudaMemcpyAsync(ids, r->ids_d, (size_t)ng * sizeof(int32_t), cudaMemcpyDeviceToHost, r->stream)));
  return 0;
}

// A decode-only step of n items (each one token, each sampling; all id
// rows, greedy or sampled on the device, or none) through the graph of its
// bucket (the next power of two) and kind, captured on first use; the
// padding items are token 0 at position 0 in the spare block (greedy id
// rows in an id graph: their ids are dropped). An id graph holds the
// sampling kernel whether or not this step samples (a greedy row's mode 0
// returns at once); its parameters and seen ids (n_seen) are copied in
// before the launch, as the metadata is.
static int graph_step(eng_llm_cuda_runner *r, size_t n, int64_t max_keys, int greedy, int64_t n_seen, float *logits,
                      int32_t *ids, err *e) {
  int k = 0;
  while (((int64_t)1 << k) < (int64_t)n) k++;
  int64_t B = (int64_t)1 << k;
  int32_t *tok = meta_at(r, r->meta_h, M_TOK), *pos = meta_at(r, r->meta_h, M_POS);
  int32_t *item = meta_at(r, r->meta_h, M_ITEM), *toff = meta_at(r, r->meta_h, M_TOFF);
  int32_t *rows = meta_at(r, r->meta_h, M_ROWS), *tables = meta_at(r, r->meta_h, M_TABLES);
  int32_t spare = toff[n - 1] + (int32_t)((pos[n - 1] + r->c.block_tokens) / r->c.block_tokens);
  tables[spare] = r->c.n_blocks;
  for (int64_t i = (int64_t)n; i < B; i++) {
    tok[i] = 0, pos[i] = 0, item[i] = (int32_t)i, toff[i] = spare;
  }
  for (int64_t i = 0; i < B; i++) rows[i] = (int32_t)i;
  size_t copy = ((size_t)M_TABLES * (size_t)r->c.max_step_tokens + (size_t)spare + 1) * sizeof(int32_t);
  TRY(CUDA_OK(e, cudaMemcpyAsync(r->meta_d, r->meta_h, copy, cudaMemcpyHostToDevice, r->stream)));
  if (greedy) {
    for (int64_t i = (int64_t)n; i < B; i++) r->sp_h[i] = (k_sample_param){.mode = 0};
    TRY(CUDA_OK(e, cudaMemcpyAsync(r->sp_d, r->sp_h, (size_t)B * sizeof *r->sp_h, cudaMemcpyHostToDevice, r->stream)));
    if (n_seen)
      TRY(CUDA_OK(e, cudaMemcpyAsync(r->seen_d, r->seen_h, (size_t)n_seen * sizeof(int32_t), cudaMemcpyHostToDevice,
                                     r->stream)));
  }
  int splits = pick_splits(r, B, max_keys);
  if (r->gx[greedy][k] && r->gsplits[greedy][k] != splits) {  // the contexts outgrew its splits: capture again
    cudaGraphExecDestroy(r->gx[greedy][k]);
    r->gx[greedy][k] = NULL;
  }
  if (!r->gx[greedy][k]) {
    r->splits = splits;
    r->gsplits[greedy][k] = splits;
    if (r->tuner) {
      // a capture times nothing: first a dry pass outside it, with the tuner
      // attached only here (so prefill steps' many shapes are never timed),
      // times this bucket's GEMM shapes (or takes the tuner's earlier
      // choices); the capture then uses them. What the pass computes is
      // thrown away: the graph recomputes every value, the K and V rows it
      // wrote into the cache included, before anything reads them.
      eng_gemm_lt_set_tuner(r->gemm, r->tuner);
      eng_gemm_lt_set_dry(r->gemm, true);
      int rc = device_work(r, B, greedy ? 0 : B, greedy ? B : 0, greedy, r->lg_h, r->ids_h, e);
      eng_gemm_lt_set_dry(r->gemm, false);
      if (!rc) rc = CUDA_OK(e, cudaStreamSynchronize(r->stream));
      eng_gemm_lt_set_tuner(r->gemm, NULL);
      if (rc) return err_prefix(e, "cuda runner: GEMM tuning pass of %lld items: ", (long long)B), rc;
    }
    TRY(CUDA_OK(e, cudaStreamBeginCapture(r->stream, cudaStreamCaptureModeThreadLocal)));
    int rc = device_work(r, B, greedy ? 0 : B, greedy ? B : 0, greedy, r->lg_h, r->ids_h, e);
    cudaGraph_t graph = NULL;
    cudaError_t ce = cudaStreamEndCapture(r->stream, &graph);
    if (!rc && ce != cudaSuccess) rc = CUDA_OK(e, ce);
    if (!rc) rc = CUDA_OK(e, cudaGraphInstantiate(&r->gx[greedy][k], graph, 0));
    if (graph) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    if (rc) {
      r->gx[greedy][k] = NULL;
      return err_prefix(e, "cuda runner: capturing the decode graph of %lld items: ", (long long)B), rc;
    }
    r->gst.captures++;
  }
  TRY(CUDA_OK(e, cudaGraphLaunch(r->gx[greedy][k], r->stream)));
  r->gst.launches++;
  TRY(CUDA_OK(e, cudaStreamSynchronize(r->stream)));
  if (greedy)
    memcpy(ids, r->ids_h, n * sizeof(int32_t));
  else
    memcpy(logits, r->lg_h, n * (size_t)r->g.vocab * sizeof(float));
  return 0;
}

int eng_llm_cuda_runner_enable_graphs(eng_llm_cuda_runner *r, int64_t max_batch, err *e) {
  if (r->graph_max) return err_set(e, ERR_FAILED_PRECONDITION, "cuda runner: graphs are already on");
  int64_t cap = r->c.max_step_tokens;
  if (max_batch < 1 || max_batch > cap || max_batch > ((int64_t)1 << (MAX_BUCKETS - 1)))
    return err_set(e, ERR_INVALID_ARGUMENT, "cuda runner: graph batch %lld outside 1 .. %lld", (long long)max_batch,
                   (long long)(cap < ((int64_t)1 << (MAX_BUCKETS - 1)) ? cap : ((int64_t)1 << (MAX_BUCKETS - 1))));
  int64_t b = 1;
  while (b * 2 <= max_batch) b *= 2;  // the largest bucket that fits the scratch
  TRY(CUDA_OK(e, cudaSetDevice(r->device)));
  TRY(CUDA_OK(e, cudaMallocHost((void **)&r->lg_h, (size_t)b * (size_t)r->g.vocab * sizeof(float))));
  r->graph_max = b;
  return 0;
}

int eng_llm_cuda_runner_set_gemm_tune(eng_llm_cuda_runner *r, int on, err *e) {
  if (!on) {
    eng_gemm_lt_set_tuner(r->gemm, NULL);
    eng_gemm_tuner_destroy(r->tuner);
    r->tuner = NULL;
    return 0;
  }
  if (r->tuner) return 0;
  TRY(CUDA_OK(e, cudaSetDevice(r->device)));
  // every shape timed: decode's are small (m = the batch), and those are the
  // ones where the heuristic's first answer reads the weights slowest
  eng_gemm_tune_opts to = {.min_flops = 1};
  return eng_gemm_tuner_create(&r->tuner, &to, e);
}

void eng_llm_cuda_runner_set_gemv(eng_llm_cuda_runner *r, int rows) {
  r->gemv_rows = rows < 0 ? 0 : rows > 8 ? 8 : rows;  // k_gemv_cuda takes 8 rows at most
}

void eng_llm_cuda_runner_set_decode_fusion(eng_llm_cuda_runner *r, int fuse, int pdl) {
  r->fuse = fuse != 0;
  r->pdl = pdl && r->major >= 9;  // griddepcontrol: sm_90 on
}

void eng_llm_cuda_runner_set_attn_pipeline(eng_llm_cuda_runner *r, int which) {
  r->attn_pipeline = which == 1 || which == 2 ? which : 0;
}

int eng_llm_cuda_runner_set_tc_prefill(eng_llm_cuda_runner *r, int on, err *e) {
  if (!on) {
    r->tc = 0;
    return 0;
  }
  int major = 0;
  TRY(CUDA_OK(e, cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, r->device)));
  if (major < 8)
    return err_set(e, ERR_UNIMPLEMENTED,
                   "cuda runner: tensor-core prefill attention needs compute capability 8.0 or newer (device %d is "
                   "%d.x)",
                   r->device, major);
  r->tc = 1;
  return 0;
}

void eng_llm_cuda_runner_graph_stats(const eng_llm_cuda_runner *r, eng_llm_cuda_graph_stats *s) {
  *s = r->gst;
}

int eng_llm_cuda_step(eng_llm_cuda_runner *r, const eng_llm_work *w, size_t n, float *logits, err *e) {
  return eng_llm_cuda_step_ids(r, w, n, logits, NULL, e);
}

int eng_llm_cuda_step_ids(eng_llm_cuda_runner *r, const eng_llm_work *w, size_t n, float *logits, int32_t *ids,
                          err *e) {
  const eng_llm_config *g = &r->g;
  int64_t T = 0;
  TRY(eng_llm_check_work(g, &r->c, w, n, &T, e));
  if (T == 0) return 0;
  int64_t max_keys = 0;
  for (size_t i = 0; i < n; i++)
    if (w[i].start + w[i].n_tokens > max_keys) max_keys = w[i].start + w[i].n_tokens;
  // which items are id rows: greedy, or sampled on the device while their seen ids fit (else -1 and their logits)
  int64_t seen_n = 0, ns = 0;
  for (size_t i = 0; i < n; i++) {
    r->idrow[i] = 0;
    if (!ids || !w[i].logits) continue;
    if (w[i].greedy) {
      r->idrow[i] = 1;
      continue;
    }
    const eng_llm_sampling *sp = w[i].sampling;
    if (!sp) continue;
    int64_t need = sp->repetition_penalty > 0 && sp->repetition_penalty != 1 ? w[i].n_seen : 0;
    if (need > r->seen_cap - seen_n) {
      ids[i] = -1;
      continue;
    }
    r->idrow[i] = 2;
    seen_n += need;
    ns++;
  }
#define IDROW(i) (r->idrow[i] != 0)
  // decode graphs: every item one sampling token, all id rows or none (a mixed step runs outside graphs)
  int decode = r->graph_max && (int64_t)n <= r->graph_max, all_id = n > 0 && IDROW(0);
  for (size_t i = 0; i < n && decode; i++) decode = w[i].n_tokens == 1 && w[i].logits && IDROW(i) == all_id;
  // --- the step's metadata, one copy
  int32_t *tok = meta_at(r, r->meta_h, M_TOK), *pos = meta_at(r, r->meta_h, M_POS);
  int32_t *item = meta_at(r, r->meta_h, M_ITEM), *toff = meta_at(r, r->meta_h, M_TOFF);
  int32_t *rows = meta_at(r, r->meta_h, M_ROWS), *tables = meta_at(r, r->meta_h, M_TABLES);
  int64_t nt = 0, nlg = 0, ng = 0, nl_done = 0, t = 0, so = 0;
  for (size_t i = 0; i < n; i++) nlg += w[i].logits && !IDROW(i);
  for (size_t i = 0; i < n; i++) {
    int64_t need = (w[i].start + w[i].n_tokens + r->c.block_tokens - 1) / r->c.block_tokens;
    if (nt + need > r->table_cap)  // cannot happen within check_work's limits; kept as a guard
      return err_set(e, ERR_INVALID_ARGUMENT, "cuda runner: the step's block tables exceed %lld entries",
                     (long long)r->table_cap);
    toff[i] = (int32_t)nt;
    memcpy(tables + nt, w[i].block_table, (size_t)need * sizeof(int32_t));
    nt += need;
    for (int64_t j = 0; j < w[i].n_tokens; j++, t++) {
      tok[t] = w[i].tokens[j];
      pos[t] = (int32_t)(w[i].start + j);
      item[t] = (int32_t)i;
    }
    if (IDROW(i)) {
      k_sample_param *kp = &r->sp_h[ng];
      *kp = (k_sample_param){.mode = 0};
      if (r->idrow[i] == 2) {
        const eng_llm_sampling *sp = w[i].sampling;
        int pen = sp->repetition_penalty > 0 && sp->repetition_penalty != 1;
        *kp = (k_sample_param){.mode = 1,
                               .top_k = sp->top_k,
                               .temperature = sp->temperature,
                               .top_p = sp->top_p,
                               .min_p = sp->min_p,
                               .repetition_penalty = sp->repetition_penalty,
                               .seen_off = so,
                               .n_seen = pen ? w[i].n_seen : 0,
                               .u = w[i].u};
        if (kp->n_seen) memcpy(r->seen_h + so, w[i].seen, (size_t)kp->n_seen * sizeof(int32_t));
        so += kp->n_seen;
      }
      rows[nlg + ng++] = (int32_t)(t - 1);
    } else if (w[i].logits) {
      rows[nl_done++] = (int32_t)(t - 1);
    }
  }
  TRY(CUDA_OK(e, cudaSetDevice(r->device)));
  if (decode) return graph_step(r, n, max_keys, all_id, seen_n, logits, ids, e);
  r->splits = pick_splits(r, T, max_keys);
  size_t copy = ((size_t)M_TABLES * (size_t)r->c.max_step_tokens + (size_t)nt) * sizeof(int32_t);
  TRY(CUDA_OK(e, cudaMemcpyAsync(r->meta_d, r->meta_h, copy, cudaMemcpyHostToDevice, r->stream)));
  if (ns) {
    TRY(CUDA_OK(e, cudaMemcpyAsync(r->sp_d, r->sp_h, (size_t)ng * sizeof *r->sp_h, cudaMemcpyHostToDevice, r->stream)));
    if (seen_n)
      TRY(CUDA_OK(e, cudaMemcpyAsync(r->seen_d, r->seen_h, (size_t)seen_n * sizeof(int32_t), cudaMemcpyHostToDevice,
                                     r->stream)));
  }
  TRY(device_work(r, T, nlg, ng, ns > 0, logits, r->ids_h, e));
  TRY(CUDA_OK(e, cudaStreamSynchronize(r->stream)));
  for (size_t i = 0, j = 0; i < n && ng; i++)
    if (IDROW(i)) ids[i] = r->ids_h[j++];
  return 0;
#undef IDROW
}
