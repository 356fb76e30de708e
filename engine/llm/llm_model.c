// engine/llm/llm_model.c: a checkpoint's tensors checked against its config
// and converted to the layout of llm_internal.h (FP32, or kept in the
// checkpoint's own type for the GPU). Names as transformers
// saves them: Llama, Qwen2, Mistral under "model." with lm_head.weight
// (absent when tied); GPT-2 under "transformer." (or bare, as the original
// OpenAI conversion has them), its Conv1D weights stored [in, out].
#include "engine/llm/llm_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/llm/llm_internal.h"
#include "engine/llm/safetensors.h"

typedef struct loader {
  eng_llm_st *st;
  uint8_t *used;  // per tensor of st: taken by the model
  err_list bad;
  int oom;
  eng_llm_model *m;
} loader;

// n weights of the model's type.
static void *alloc_f(loader *L, size_t n) {
  size_t z = dtype_size(L->m->wdt);
  void *p = calloc(n ? n : 1, z);
  if (!p)
    L->oom = 1;
  else
    L->m->weight_bytes += n * z;
  return p;
}

// Tensor `name`, expected [d0] (d1 == 0) or [d0, d1], into dst (row-major,
// the same shape). transpose: the file holds it [d1, d0] (Conv1D). Problems
// are listed; dst is left zero then.
static void take(loader *L, const char *name, int64_t d0, int64_t d1, void *dst, int transpose) {
  const eng_llm_tensor *t = eng_llm_st_find(L->st, name);
  if (!t) {
    err_list_add(&L->bad, "tensor '%s' is missing", name);
    return;
  }
  L->used[t - eng_llm_st_at(L->st, 0)] = 1;
  int ndim = d1 ? 2 : 1;
  int64_t w0 = transpose ? d1 : d0, w1 = transpose ? d0 : d1;
  if (t->ndim != ndim || t->shape[0] != w0 || (ndim == 2 && t->shape[1] != w1)) {
    char got[128] = "[", *p = got + 1;
    for (int i = 0; i < t->ndim && p < got + sizeof got - 24; i++)
      p += snprintf(p, (size_t)(got + sizeof got - p), "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    snprintf(p, (size_t)(got + sizeof got - p), "]");
    if (ndim == 2)
      err_list_add(&L->bad, "tensor '%s' has shape %s, the config needs [%lld, %lld]", name, got, (long long)w0,
                   (long long)w1);
    else
      err_list_add(&L->bad, "tensor '%s' has shape %s, the config needs [%lld]", name, got, (long long)w0);
    return;
  }
  if (t->dt != DT_FP32 && t->dt != DT_FP16 && t->dt != DT_BF16) {
    err_list_add(&L->bad, "tensor '%s' has dtype %s (F32, F16 and BF16 are read)", name, t->dt_name);
    return;
  }
  if (!dst) return;
  dtype dt = L->m->wdt;
  if (!transpose) {
    eng_llm_st_convert(dst, dt, t, 0, (size_t)(d0 * (d1 ? d1 : 1)));
    return;
  }
  // file [d1][d0] -> dst [d0][d1], one file row at a time
  size_t z = dtype_size(dt);
  uint8_t *row = malloc((size_t)d0 * z), *out = dst;
  if (!row) {
    L->oom = 1;
    return;
  }
  for (int64_t i = 0; i < d1; i++) {
    eng_llm_st_convert(row, dt, t, (size_t)(i * d0), (size_t)d0);
    for (int64_t o = 0; o < d0; o++) memcpy(out + ((size_t)o * (size_t)d1 + (size_t)i) * z, row + (size_t)o * z, z);
  }
  free(row);
}

// Element off of a weight array of the model's type.
static void *at(loader *L, void *p, int64_t off) {
  return p ? (uint8_t *)p + (size_t)off * dtype_size(L->m->wdt) : NULL;
}

static void load_llama(loader *L) {
  eng_llm_model *m = L->m;
  const eng_llm_config *c = &m->cfg;
  int64_t H = c->hidden, I = c->intermediate, d = c->head_dim, q = c->n_heads * d, kv = c->n_kv_heads * d;
  char n[256];
  m->embed = alloc_f(L, (size_t)(c->vocab * H));
  take(L, "model.embed_tokens.weight", c->vocab, H, m->embed, 0);
  for (int64_t i = 0; i < c->n_layers && !L->oom; i++) {
    eng_llm_layer *l = &m->layers[i];
#define NAME(s) (snprintf(n, sizeof n, "model.layers.%lld.%s", (long long)i, s), n)
    l->ln1_w = alloc_f(L, (size_t)H);
    take(L, NAME("input_layernorm.weight"), H, 0, l->ln1_w, 0);
    l->wqkv = alloc_f(L, (size_t)((q + 2 * kv) * H));
    if (!l->wqkv) return;
    take(L, NAME("self_attn.q_proj.weight"), q, H, l->wqkv, 0);
    take(L, NAME("self_attn.k_proj.weight"), kv, H, at(L, l->wqkv, q * H), 0);
    take(L, NAME("self_attn.v_proj.weight"), kv, H, at(L, l->wqkv, (q + kv) * H), 0);
    if (c->qkv_bias) {
      l->bqkv = alloc_f(L, (size_t)(q + 2 * kv));
      if (!l->bqkv) return;
      take(L, NAME("self_attn.q_proj.bias"), q, 0, l->bqkv, 0);
      take(L, NAME("self_attn.k_proj.bias"), kv, 0, at(L, l->bqkv, q), 0);
      take(L, NAME("self_attn.v_proj.bias"), kv, 0, at(L, l->bqkv, q + kv), 0);
    }
    l->wo = alloc_f(L, (size_t)(H * q));
    take(L, NAME("self_attn.o_proj.weight"), H, q, l->wo, 0);
    if (c->o_bias) {
      l->bo = alloc_f(L, (size_t)H);
      take(L, NAME("self_attn.o_proj.bias"), H, 0, l->bo, 0);
    }
    l->ln2_w = alloc_f(L, (size_t)H);
    take(L, NAME("post_attention_layernorm.weight"), H, 0, l->ln2_w, 0);
    l->w_up = alloc_f(L, (size_t)(2 * I * H));
    if (!l->w_up) return;
    take(L, NAME("mlp.gate_proj.weight"), I, H, l->w_up, 0);
    take(L, NAME("mlp.up_proj.weight"), I, H, at(L, l->w_up, I * H), 0);
    l->w_down = alloc_f(L, (size_t)(H * I));
    take(L, NAME("mlp.down_proj.weight"), H, I, l->w_down, 0);
    if (c->mlp_bias) {
      l->b_up = alloc_f(L, (size_t)(2 * I));
      l->b_down = alloc_f(L, (size_t)H);
      if (!l->b_up) return;
      take(L, NAME("mlp.gate_proj.bias"), I, 0, l->b_up, 0);
      take(L, NAME("mlp.up_proj.bias"), I, 0, at(L, l->b_up, I), 0);
      take(L, NAME("mlp.down_proj.bias"), H, 0, l->b_down, 0);
    }
#undef NAME
  }
  m->norm_w = alloc_f(L, (size_t)H);
  take(L, "model.norm.weight", H, 0, m->norm_w, 0);
  if (c->tie_embeddings) {
    m->lm_head = m->embed;
    // a tied checkpoint may still carry the copy: checked, not used
    if (eng_llm_st_find(L->st, "lm_head.weight")) take(L, "lm_head.weight", c->vocab, H, NULL, 0);
  } else {
    m->lm_head = alloc_f(L, (size_t)(c->vocab * H));
    take(L, "lm_head.weight", c->vocab, H, m->lm_head, 0);
  }
}

static void load_gpt2(loader *L) {
  eng_llm_model *m = L->m;
  const eng_llm_config *c = &m->cfg;
  int64_t H = c->hidden, I = c->intermediate;
  const char *pre = eng_llm_st_find(L->st, "transformer.wte.weight") ? "transformer." : "";
  char n[256];
#define NAME(s) (snprintf(n, sizeof n, "%s%s", pre, s), n)
  m->embed = alloc_f(L, (size_t)(c->vocab * H));
  take(L, NAME("wte.weight"), c->vocab, H, m->embed, 0);
  m->pos_embed = alloc_f(L, (size_t)(c->max_pos * H));
  take(L, NAME("wpe.weight"), c->max_pos, H, m->pos_embed, 0);
#undef NAME
  for (int64_t i = 0; i < c->n_layers && !L->oom; i++) {
    eng_llm_layer *l = &m->layers[i];
#define NAME(s) (snprintf(n, sizeof n, "%sh.%lld.%s", pre, (long long)i, s), n)
    l->ln1_w = alloc_f(L, (size_t)H), l->ln1_b = alloc_f(L, (size_t)H);
    take(L, NAME("ln_1.weight"), H, 0, l->ln1_w, 0);
    take(L, NAME("ln_1.bias"), H, 0, l->ln1_b, 0);
    l->wqkv = alloc_f(L, (size_t)(3 * H * H)), l->bqkv = alloc_f(L, (size_t)(3 * H));
    take(L, NAME("attn.c_attn.weight"), 3 * H, H, l->wqkv, 1);
    take(L, NAME("attn.c_attn.bias"), 3 * H, 0, l->bqkv, 0);
    l->wo = alloc_f(L, (size_t)(H * H)), l->bo = alloc_f(L, (size_t)H);
    take(L, NAME("attn.c_proj.weight"), H, H, l->wo, 1);
    take(L, NAME("attn.c_proj.bias"), H, 0, l->bo, 0);
    l->ln2_w = alloc_f(L, (size_t)H), l->ln2_b = alloc_f(L, (size_t)H);
    take(L, NAME("ln_2.weight"), H, 0, l->ln2_w, 0);
    take(L, NAME("ln_2.bias"), H, 0, l->ln2_b, 0);
    l->w_up = alloc_f(L, (size_t)(I * H)), l->b_up = alloc_f(L, (size_t)I);
    take(L, NAME("mlp.c_fc.weight"), I, H, l->w_up, 1);
    take(L, NAME("mlp.c_fc.bias"), I, 0, l->b_up, 0);
    l->w_down = alloc_f(L, (size_t)(H * I)), l->b_down = alloc_f(L, (size_t)H);
    take(L, NAME("mlp.c_proj.weight"), H, I, l->w_down, 1);
    take(L, NAME("mlp.c_proj.bias"), H, 0, l->b_down, 0);
#undef NAME
  }
#define NAME(s) (snprintf(n, sizeof n, "%s%s", pre, s), n)
  m->norm_w = alloc_f(L, (size_t)H), m->norm_b = alloc_f(L, (size_t)H);
  take(L, NAME("ln_f.weight"), H, 0, m->norm_w, 0);
  take(L, NAME("ln_f.bias"), H, 0, m->norm_b, 0);
#undef NAME
  if (c->tie_embeddings) {
    m->lm_head = m->embed;
    if (eng_llm_st_find(L->st, "lm_head.weight")) take(L, "lm_head.weight", c->vocab, H, NULL, 0);
  } else {
    m->lm_head = alloc_f(L, (size_t)(c->vocab * H));
    take(L, "lm_head.weight", c->vocab, H, m->lm_head, 0);
  }
}

// Buffers older exports saved beside the weights: not parameters.
static int ignorable(const char *name) {
  size_t n = strlen(name);
  static const char *tails[] = {".attn.bias", ".attn.masked_bias", "rotary_emb.inv_freq"};
  for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
    size_t k = strlen(tails[i]);
    if (n >= k && !strcmp(name + n - k, tails[i])) return 1;
  }
  return 0;
}

// The element type a checkpoint stores its weights in: its embedding
// matrix's (wte for GPT-2), else the first floating tensor's; FP32 if none.
static dtype stored_type(const eng_llm_st *st) {
  const char *names[] = {"model.embed_tokens.weight", "transformer.wte.weight", "wte.weight"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const eng_llm_tensor *t = eng_llm_st_find(st, names[i]);
    if (t && (t->dt == DT_FP32 || t->dt == DT_FP16 || t->dt == DT_BF16)) return t->dt;
  }
  for (size_t i = 0; i < eng_llm_st_count(st); i++) {
    dtype d = eng_llm_st_at(st, i)->dt;
    if (d == DT_FP32 || d == DT_FP16 || d == DT_BF16) return d;
  }
  return DT_FP32;
}

static int model_create(const char *dir, int stored, eng_llm_model **out, err *e) {
  *out = NULL;
  eng_llm_model *m = calloc(1, sizeof *m);
  if (!m) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  m->wdt = DT_FP32;
  loader L = {.m = m};
  int rc = eng_llm_config_load(dir, &m->cfg, e);
  if (rc) goto fail;
  if ((rc = eng_llm_st_open(dir, &L.st, e))) goto fail;
  if (stored) m->wdt = stored_type(L.st);
  const eng_llm_config *c = &m->cfg;
  size_t nt = eng_llm_st_count(L.st);
  L.used = calloc(nt ? nt : 1, 1);
  m->layers = calloc((size_t)c->n_layers, sizeof *m->layers);
  if (!L.used || !m->layers) {
    rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    goto fail;
  }
  if (c->family == ENG_LLM_GPT2)
    load_gpt2(&L);
  else
    load_llama(&L);
  if (!c->learned_pos) {
    m->inv_freq = calloc((size_t)(c->head_dim / 2), sizeof(float));
    if (m->inv_freq)
      k_rope_inv_freq(m->inv_freq, c->head_dim, c->rope_theta, &c->rope);
    else
      L.oom = 1;
  }
  if (L.oom) {
    rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory for the %s weights (%zu bytes so far)",
                 dtype_wire_name(m->wdt), m->weight_bytes);
    goto fail;
  }
  for (size_t i = 0; i < nt; i++) {
    const eng_llm_tensor *t = eng_llm_st_at(L.st, i);
    if (!L.used[i] && !ignorable(t->name))
      err_list_add(&L.bad, "tensor '%s' is not a weight of %s with this config", t->name, c->arch);
  }
  if ((rc = err_list_set(&L.bad, e, ERR_INVALID_ARGUMENT, "problems with the checkpoint's tensors"))) goto fail;
  // the copies are made: the mapping is no longer needed
  eng_llm_st_close(L.st);
  free(L.used);
  *out = m;
  return 0;
fail:
  eng_llm_st_close(L.st);
  free(L.used);
  eng_llm_model_destroy(m);
  return err_prefix(e, "loading checkpoint '%s': ", dir), rc;
}

int eng_llm_model_create(const char *dir, eng_llm_model **out, err *e) {
  return model_create(dir, 0, out, e);
}

int eng_llm_model_create_stored(const char *dir, eng_llm_model **out, err *e) {
  return model_create(dir, 1, out, e);
}

void eng_llm_model_destroy(eng_llm_model *m) {
  if (!m) return;
  if (m->layers) {
    for (int64_t i = 0; i < m->cfg.n_layers; i++) {
      eng_llm_layer *l = &m->layers[i];
      void *ps[] = {l->ln1_w, l->ln1_b, l->wqkv, l->bqkv, l->wo,     l->bo,
                     l->ln2_w, l->ln2_b, l->w_up, l->b_up, l->w_down, l->b_down};
      for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) free(ps[k]);
    }
    free(m->layers);
  }
  if (m->lm_head != m->embed) free(m->lm_head);
  free(m->embed);
  free(m->pos_embed);
  free(m->norm_w);
  free(m->norm_b);
  free(m->inv_freq);
  free(m);
}

const eng_llm_config *eng_llm_model_config(const eng_llm_model *m) {
  return &m->cfg;
}
size_t eng_llm_model_weight_bytes(const eng_llm_model *m) {
  return m->weight_bytes;
}
dtype eng_llm_model_dtype(const eng_llm_model *m) {
  return m->wdt;
}
