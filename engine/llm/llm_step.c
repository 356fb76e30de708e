// engine/llm/llm_step.c: the CPU forward step. Every token of the step goes
// through the GEMMs together (one [T, hidden] matrix, T the step's tokens);
// only attention and the KV writes are per sequence, through its block
// table. The order of operations follows transformers' FP32 modules (a
// projection's bias added before its residual sum) so greedy tokens match.
#include "engine/llm/llm_step.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/llm/llm_internal.h"
#include "kernels/k_ref.h"

struct eng_llm_runner {
  const eng_llm_model *m;
  eng_llm_runner_config c;
  float *k_cache, *v_cache;  // [layer][block][slot][kv head][dim]
  size_t layer_elems;        // one layer's cache
  size_t kv_bytes;
  // scratch for max_step_tokens rows
  float *x, *h, *tmp, *qkv, *att, *mlp, *scores;
  int64_t *pos;
};

int eng_llm_runner_create(const eng_llm_model *m, const eng_llm_runner_config *c, eng_llm_runner **out, err *e) {
  *out = NULL;
  const eng_llm_config *g = eng_llm_model_config(m);
  if (m->wdt != DT_FP32)
    return err_set(e, ERR_INVALID_ARGUMENT, "runner: the CPU step computes in FP32; this model keeps %s weights",
                   dtype_wire_name(m->wdt));
  if (c->n_blocks <= 0 || c->block_tokens <= 0 || c->max_step_tokens <= 0 || c->max_context <= 0)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "runner: n_blocks, block_tokens, max_step_tokens and max_context must be > 0");
  eng_llm_runner *r = calloc(1, sizeof *r);
  if (!r) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  r->m = m;
  r->c = *c;
  int64_t kvrow = g->n_kv_heads * g->head_dim, T = c->max_step_tokens;
  int64_t nqkv = (g->n_heads + 2 * g->n_kv_heads) * g->head_dim;
  r->layer_elems = (size_t)c->n_blocks * (size_t)c->block_tokens * (size_t)kvrow;
  size_t all = r->layer_elems * (size_t)g->n_layers;
  r->kv_bytes = 2 * all * sizeof(float);
  r->k_cache = malloc(all * sizeof(float));
  r->v_cache = malloc(all * sizeof(float));
  int64_t wide = g->hidden > g->n_heads * g->head_dim ? g->hidden : g->n_heads * g->head_dim;
  r->x = malloc((size_t)(T * g->hidden) * sizeof(float));
  r->h = malloc((size_t)(T * wide) * sizeof(float));
  r->tmp = malloc((size_t)(T * g->hidden) * sizeof(float));
  r->qkv = malloc((size_t)(T * nqkv) * sizeof(float));
  r->att = malloc((size_t)(T * g->n_heads * g->head_dim) * sizeof(float));
  r->mlp = malloc((size_t)(T * 2 * g->intermediate) * sizeof(float));
  r->scores = malloc((size_t)c->max_context * sizeof(float));
  r->pos = malloc((size_t)T * sizeof(int64_t));
  if (!r->k_cache || !r->v_cache || !r->x || !r->h || !r->tmp || !r->qkv || !r->att || !r->mlp || !r->scores ||
      !r->pos) {
    eng_llm_runner_destroy(r);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory for the KV pool (%zu bytes) and the step's scratch",
                   2 * all * sizeof(float));
  }
  *out = r;
  return 0;
}

void eng_llm_runner_destroy(eng_llm_runner *r) {
  if (!r) return;
  free(r->k_cache);
  free(r->v_cache);
  free(r->x);
  free(r->h);
  free(r->tmp);
  free(r->qkv);
  free(r->att);
  free(r->mlp);
  free(r->scores);
  free(r->pos);
  free(r);
}

size_t eng_llm_runner_kv_bytes(const eng_llm_runner *r) {
  return r->kv_bytes;
}

// y[T, out] = x[T, in] (rows lda apart) W^T (+ b), W [out, in].
static void linear(float *y, const float *x, int64_t T, int64_t in, int64_t lda, const float *w, const float *b,
                   int64_t out) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)T, (blasint)out, (blasint)in, 1.0f, x, (blasint)lda, w,
              (blasint)in, 0.0f, y, (blasint)out);
  if (b)
    for (int64_t t = 0; t < T; t++)
      for (int64_t o = 0; o < out; o++) y[t * out + o] += b[o];
}

static void norm(const eng_llm_config *g, float *y, const float *x, int64_t rows, const float *w, const float *b) {
  if (g->layer_norm)
    k_layer_norm(y, x, w, b, (size_t)rows, (size_t)g->hidden, g->norm_eps);
  else
    k_rms_norm(y, x, w, (size_t)rows, (size_t)g->hidden, g->norm_eps);
}

int eng_llm_check_work(const eng_llm_config *g, const eng_llm_runner_config *c, const eng_llm_work *w, size_t n,
                       int64_t *total, err *e) {
  int64_t T = 0;
  for (size_t i = 0; i < n; i++) {
    const eng_llm_work *it = &w[i];
    if (it->n_tokens < 1 || it->start < 0 || it->start > c->max_context - it->n_tokens)
      return err_set(e, ERR_INVALID_ARGUMENT, "item %zu: positions %lld..%lld outside the context (%lld)", i,
                     (long long)it->start, (long long)(it->start + it->n_tokens - 1), (long long)c->max_context);
    if (g->learned_pos && it->start + it->n_tokens > g->max_pos)
      return err_set(e, ERR_INVALID_ARGUMENT, "item %zu: position %lld past the model's %lld learned positions", i,
                     (long long)(it->start + it->n_tokens - 1), (long long)g->max_pos);
    int64_t need = (it->start + it->n_tokens + c->block_tokens - 1) / c->block_tokens;
    if (it->n_blocks < need)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "item %zu: its block table holds %d blocks, positions up to %lld need %lld", i, it->n_blocks,
                     (long long)(it->start + it->n_tokens - 1), (long long)need);
    for (int64_t b = 0; b < need; b++)
      if (it->block_table[b] < 0 || it->block_table[b] >= c->n_blocks)
        return err_set(e, ERR_INVALID_ARGUMENT, "item %zu: block %d outside the pool (%d blocks)", i,
                       it->block_table[b], c->n_blocks);
    for (int64_t t = 0; t < it->n_tokens; t++)
      if (it->tokens[t] < 0 || it->tokens[t] >= g->vocab)
        return err_set(e, ERR_INVALID_ARGUMENT, "item %zu: token %d outside the vocabulary (%lld)", i, it->tokens[t],
                       (long long)g->vocab);
    T += it->n_tokens;
    if (T > c->max_step_tokens)
      return err_set(e, ERR_INVALID_ARGUMENT, "the step holds more than %lld tokens", (long long)c->max_step_tokens);
  }
  *total = T;
  return 0;
}

int eng_llm_step(eng_llm_runner *r, const eng_llm_work *w, size_t n, float *logits, err *e) {
  return eng_llm_step_ids(r, w, n, logits, NULL, e);
}

int eng_llm_step_ids(eng_llm_runner *r, const eng_llm_work *w, size_t n, float *logits, int32_t *ids, err *e) {
  const eng_llm_model *m = r->m;
  const eng_llm_config *g = &m->cfg;
  int64_t T = 0;
  TRY(eng_llm_check_work(g, &r->c, w, n, &T, e));
  if (T == 0) return 0;
  int64_t H = g->hidden, d = g->head_dim, Q = g->n_heads * d, KV = g->n_kv_heads * d, NQKV = Q + 2 * KV;
  int64_t FF = g->intermediate;  // not I: cblas.h brings complex.h
  // --- embeddings (and learned positions)
  for (size_t i = 0, t = 0; i < n; i++)
    for (int64_t j = 0; j < w[i].n_tokens; j++, t++) {
      r->pos[t] = w[i].start + j;
      float *xt = r->x + t * H;
      memcpy(xt, (const float *)m->embed + (int64_t)w[i].tokens[j] * H, (size_t)H * sizeof(float));
      if (m->pos_embed)
        for (int64_t c = 0; c < H; c++) xt[c] += ((const float *)m->pos_embed)[r->pos[t] * H + c];
    }
  for (int64_t L = 0; L < g->n_layers; L++) {
    const eng_llm_layer *l = &m->layers[L];
    float *kc = r->k_cache + (size_t)L * r->layer_elems, *vc = r->v_cache + (size_t)L * r->layer_elems;
    // --- attention block
    norm(g, r->h, r->x, T, l->ln1_w, l->ln1_b);
    linear(r->qkv, r->h, T, H, H, l->wqkv, l->bqkv, NQKV);
    if (m->inv_freq) {
      k_rope(r->qkv, T, r->pos, g->n_heads, d, NQKV, m->inv_freq);
      k_rope(r->qkv + Q, T, r->pos, g->n_kv_heads, d, NQKV, m->inv_freq);
    }
    for (size_t i = 0, t = 0; i < n; t += w[i].n_tokens, i++) {
      const float *rows = r->qkv + t * NQKV;
      k_paged_kv_write(kc, w[i].block_table, r->c.block_tokens, KV, w[i].start, w[i].n_tokens, rows + Q, NQKV);
      k_paged_kv_write(vc, w[i].block_table, r->c.block_tokens, KV, w[i].start, w[i].n_tokens, rows + Q + KV, NQKV);
      k_paged_attn_args a = {.n_q = w[i].n_tokens,
                             .pos0 = w[i].start,
                             .n_heads = g->n_heads,
                             .n_kv_heads = g->n_kv_heads,
                             .head_dim = d,
                             .q_stride = NQKV,
                             .o_stride = Q,
                             .block_tokens = r->c.block_tokens,
                             .window = g->sliding_window,
                             .scale = 1.0f / sqrtf((float)d)};
      k_paged_attn_ref(r->att + t * Q, rows, kc, vc, w[i].block_table, &a, r->scores);
    }
    linear(r->tmp, r->att, T, Q, Q, l->wo, l->bo, H);
    for (int64_t k = 0; k < T * H; k++) r->x[k] += r->tmp[k];
    // --- MLP block
    norm(g, r->h, r->x, T, l->ln2_w, l->ln2_b);
    if (g->gated_mlp) {
      linear(r->mlp, r->h, T, H, H, l->w_up, l->b_up, 2 * FF);
      for (int64_t t = 0; t < T; t++) {
        float *row = r->mlp + t * 2 * FF;
        if (g->act == ENG_LLM_SILU)
          k_silu_mul(row, row, row + FF, (size_t)FF);
        else {
          k_gelu(row, row, (size_t)FF, g->act == ENG_LLM_GELU_TANH);
          for (int64_t c = 0; c < FF; c++) row[c] *= row[FF + c];
        }
      }
      linear(r->tmp, r->mlp, T, FF, 2 * FF, l->w_down, l->b_down, H);
    } else {
      linear(r->mlp, r->h, T, H, H, l->w_up, l->b_up, FF);
      if (g->act == ENG_LLM_SILU) {
        for (int64_t k = 0; k < T * FF; k++) r->mlp[k] = r->mlp[k] / (1.0f + expf(-r->mlp[k]));
      } else {
        k_gelu(r->mlp, r->mlp, (size_t)(T * FF), g->act == ENG_LLM_GELU_TANH);
      }
      linear(r->tmp, r->mlp, T, FF, FF, l->w_down, l->b_down, H);
    }
    for (int64_t k = 0; k < T * H; k++) r->x[k] += r->tmp[k];
  }
  // --- the last token of each sampling item: final norm, logits; the rows
  // that come back as logits first, then the greedy ones (argmax in place)
  int64_t nl = 0;
  for (int pass = 0; pass < 2; pass++)
    for (size_t i = 0, t = 0; i < n; t += w[i].n_tokens, i++)
      if (w[i].logits && (ids && w[i].greedy) == pass)
        memcpy(r->tmp + nl++ * H, r->x + (t + w[i].n_tokens - 1) * H, (size_t)H * sizeof(float));
  if (nl) {
    norm(g, r->h, r->tmp, nl, m->norm_w, m->norm_b);
    linear(logits, r->h, nl, H, H, m->lm_head, NULL, g->vocab);
  }
  if (ids) {
    for (size_t i = 0; i < n; i++)
      if (w[i].logits && !w[i].greedy && w[i].sampling) ids[i] = -1;  // sampled on the host, from its logits row
    int64_t row = 0;
    for (size_t i = 0; i < n; i++) row += w[i].logits && !w[i].greedy;
    for (size_t i = 0; i < n; i++)
      if (w[i].logits && w[i].greedy) k_argmax_rows_ref(&ids[i], logits + row++ * g->vocab, 1, (size_t)g->vocab);
  }
  return 0;
}
