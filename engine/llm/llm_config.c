// engine/llm/llm_config.c: config.json of a Hugging Face decoder checkpoint
// -> eng_llm_config. Both spellings transformers has written are read: the
// GPT-2 names (n_embd, n_layer...) and the Llama ones, and RoPE as
// rope_theta + rope_scaling (transformers 4) or rope_parameters
// (transformers 5). Every problem is collected before failing.
#include "engine/llm/llm_config.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/rfile.h"

const char *eng_llm_family_name(eng_llm_family f) {
  switch (f) {
    case ENG_LLM_LLAMA:
      return "llama";
    case ENG_LLM_QWEN2:
      return "qwen2";
    case ENG_LLM_MISTRAL:
      return "mistral";
    case ENG_LLM_GPT2:
      return "gpt2";
  }
  return "?";
}

typedef struct parse_ctx {
  const cJSON *root;
  err_list bad;     // every problem, in order
  int unsupported;  // of them, math this runtime lacks (the code is then UNIMPLEMENTED)
} parse_ctx;

// Every size at most 2^30, and the products the loader allocates checked
// below, so no size arithmetic overflows int64 (an untrusted config.json).
#define DIM_MAX ((int64_t)1 << 30)

#define UNSUP(p, ...) ((p)->unsupported++, err_list_add(&(p)->bad, "unsupported " __VA_ARGS__))

static const cJSON *field(const cJSON *o, const char *name) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
  return v && !cJSON_IsNull(v) ? v : NULL;
}

// An integer field (the first of two spellings present); required ones
// missing are a problem; def when absent and optional.
static int64_t int_field(parse_ctx *p, const char *a, const char *b, int required, int64_t def, int64_t min) {
  const cJSON *v = field(p->root, a);
  const char *name = a;
  if (!v && b) v = field(p->root, b), name = b;
  if (!v) {
    if (required) err_list_add(&p->bad, "%s is missing", a);
    return def;
  }
  if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < (double)min ||
      v->valuedouble > (double)DIM_MAX) {
    err_list_add(&p->bad, "%s must be an integer in [%lld, 2^30]", name, (long long)min);
    return def;
  }
  return (int64_t)v->valuedouble;
}

static double num_field(parse_ctx *p, const cJSON *o, const char *name, double def, int positive) {
  const cJSON *v = field(o, name);
  if (!v) return def;
  if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || (positive && v->valuedouble <= 0)) {
    err_list_add(&p->bad, "%s must be a %snumber", name, positive ? "positive " : "");
    return def;
  }
  return v->valuedouble;
}

static int bool_field(parse_ctx *p, const char *name, int def) {
  const cJSON *v = field(p->root, name);
  if (!v) return def;
  if (!cJSON_IsBool(v)) {
    err_list_add(&p->bad, "%s must be true or false", name);
    return def;
  }
  return cJSON_IsTrue(v);
}

static const char *str_field(const cJSON *o, const char *name) {
  const cJSON *v = field(o, name);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

// eos_token_id: an integer or a list of them.
static void read_eos(parse_ctx *p, const cJSON *o, const char *where, eng_llm_config *c) {
  const cJSON *v = field(o, "eos_token_id");
  if (!v) return;
  int n = 0;
  int32_t ids[ENG_LLM_MAX_EOS];
  const cJSON *it = cJSON_IsArray(v) ? v->child : v;
  for (; it; it = cJSON_IsArray(v) ? it->next : NULL) {
    if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble != floor(it->valuedouble) ||
        it->valuedouble > INT32_MAX || n == ENG_LLM_MAX_EOS) {
      err_list_add(&p->bad, "%s eos_token_id must be at most %d integers >= 0", where, ENG_LLM_MAX_EOS);
      return;
    }
    ids[n++] = (int32_t)it->valuedouble;
  }
  memcpy(c->eos_ids, ids, sizeof ids);
  c->n_eos = n;
}

static void read_rope(parse_ctx *p, eng_llm_config *c) {
  // transformers 5 folds rope_theta into rope_parameters
  const cJSON *rs = field(p->root, "rope_parameters");
  if (!rs) rs = field(p->root, "rope_scaling");
  c->rope_theta = num_field(p, p->root, "rope_theta", 10000.0, 1);
  if (rs && !cJSON_IsObject(rs)) {
    err_list_add(&p->bad, "rope_scaling must be an object or null");
    return;
  }
  if (rs) c->rope_theta = num_field(p, rs, "rope_theta", c->rope_theta, 1);
  const char *type = rs ? str_field(rs, "rope_type") : NULL;
  if (rs && !type) type = str_field(rs, "type");
  if (!type || !strcmp(type, "default")) return;
  if (strcmp(type, "llama3")) {
    UNSUP(p, "rope_scaling type '%s' (this runtime has 'default' and 'llama3')", type);
    return;
  }
  c->rope.kind = K_ROPE_LLAMA3;
  c->rope.factor = num_field(p, rs, "factor", 0, 1);
  c->rope.low_freq_factor = num_field(p, rs, "low_freq_factor", 0, 1);
  c->rope.high_freq_factor = num_field(p, rs, "high_freq_factor", 0, 1);
  c->rope.original_max_pos = (int64_t)num_field(p, rs, "original_max_position_embeddings", 0, 1);
  if (c->rope.factor <= 0 || c->rope.low_freq_factor <= 0 || c->rope.high_freq_factor <= 0 ||
      c->rope.original_max_pos <= 0)
    err_list_add(&p->bad,
                 "llama3 rope_scaling needs factor, low_freq_factor, high_freq_factor and "
                 "original_max_position_embeddings, all positive");
  else if (c->rope.high_freq_factor <= c->rope.low_freq_factor)
    err_list_add(&p->bad, "llama3 rope_scaling: high_freq_factor must exceed low_freq_factor");
}

static void read_act(parse_ctx *p, const char *name, eng_llm_config *c) {
  const char *a = str_field(p->root, name);
  if (!a) {
    if (field(p->root, name)) err_list_add(&p->bad, "%s must be a string", name);
    return;  // the family's default stays
  }
  if (!strcmp(a, "silu") || !strcmp(a, "swish"))
    c->act = ENG_LLM_SILU;
  else if (!strcmp(a, "gelu_new") || !strcmp(a, "gelu_pytorch_tanh") || !strcmp(a, "gelu_fast"))
    c->act = ENG_LLM_GELU_TANH;
  else if (!strcmp(a, "gelu"))
    c->act = ENG_LLM_GELU;
  else
    UNSUP(p, "%s '%s'", name, a);
}

static int family_of(const char *s, eng_llm_family *f) {
  static const struct {
    const char *name;
    eng_llm_family f;
  } names[] = {
      {"LlamaForCausalLM", ENG_LLM_LLAMA},     {"llama", ENG_LLM_LLAMA},
      {"Qwen2ForCausalLM", ENG_LLM_QWEN2},     {"qwen2", ENG_LLM_QWEN2},
      {"MistralForCausalLM", ENG_LLM_MISTRAL}, {"mistral", ENG_LLM_MISTRAL},
      {"GPT2LMHeadModel", ENG_LLM_GPT2},       {"gpt2", ENG_LLM_GPT2},
  };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!strcmp(s, names[i].name)) return *f = names[i].f, 1;
  return 0;
}

int eng_llm_config_parse(const char *config_json, const char *gen_json, eng_llm_config *c, err *e) {
  memset(c, 0, sizeof *c);
  c->bos_id = -1;
  cJSON *root = cJSON_Parse(config_json);
  if (!root || !cJSON_IsObject(root)) {
    cJSON_Delete(root);
    return err_set(e, ERR_INVALID_ARGUMENT, "config.json is not a JSON object");
  }
  parse_ctx p = {.root = root};
  // --- the family: architectures[0], else model_type; both must agree
  const cJSON *archs = field(root, "architectures");
  const char *arch = cJSON_IsArray(archs) && cJSON_IsString(archs->child) ? archs->child->valuestring : NULL;
  const char *mtype = str_field(root, "model_type");
  eng_llm_family fa = ENG_LLM_LLAMA, fm = ENG_LLM_LLAMA;
  int ka = arch && family_of(arch, &fa), km = mtype && family_of(mtype, &fm);
  int family_ok = 1;
  if (!arch && !mtype) {
    UNSUP(&p, "no architectures or model_type");
    family_ok = 0;
  } else if ((arch && !ka) || (mtype && !km)) {
    UNSUP(&p,
          "architecture '%s' (this runtime runs LlamaForCausalLM, "
          "Qwen2ForCausalLM, MistralForCausalLM, GPT2LMHeadModel)",
          arch && !ka ? arch : mtype);
    family_ok = 0;
  } else if (ka && km && fa != fm) {
    err_list_add(&p.bad, "architectures '%s' and model_type '%s' disagree", arch, mtype);
    family_ok = 0;
  }
  c->family = ka ? fa : fm;
  snprintf(c->arch, sizeof c->arch, "%s", arch ? arch : mtype ? mtype : "?");
  if (family_ok && c->family == ENG_LLM_GPT2) {
    c->hidden = int_field(&p, "n_embd", "hidden_size", 1, 0, 1);
    c->n_layers = int_field(&p, "n_layer", "num_hidden_layers", 1, 0, 1);
    c->n_heads = int_field(&p, "n_head", "num_attention_heads", 1, 0, 1);
    c->n_kv_heads = c->n_heads;
    c->max_pos = int_field(&p, "n_positions", "max_position_embeddings", 1, 0, 1);
    c->vocab = int_field(&p, "vocab_size", NULL, 1, 0, 1);
    c->intermediate = int_field(&p, "n_inner", NULL, 0, 4 * c->hidden, 1);
    c->norm_eps = (float)num_field(&p, root, "layer_norm_epsilon", 1e-5, 1);
    c->layer_norm = c->learned_pos = 1;
    c->act = ENG_LLM_GELU_TANH;
    read_act(&p, "activation_function", c);
    c->qkv_bias = c->o_bias = c->mlp_bias = 1;
    c->tie_embeddings = bool_field(&p, "tie_word_embeddings", 1);
    if (!bool_field(&p, "scale_attn_weights", 1)) UNSUP(&p, "scale_attn_weights false");
    if (bool_field(&p, "scale_attn_by_inverse_layer_idx", 0)) UNSUP(&p, "scale_attn_by_inverse_layer_idx true");
    if (bool_field(&p, "add_cross_attention", 0)) UNSUP(&p, "add_cross_attention true");
  } else if (family_ok) {
    c->hidden = int_field(&p, "hidden_size", NULL, 1, 0, 1);
    c->intermediate = int_field(&p, "intermediate_size", NULL, 1, 0, 1);
    c->n_layers = int_field(&p, "num_hidden_layers", NULL, 1, 0, 1);
    c->n_heads = int_field(&p, "num_attention_heads", NULL, 1, 0, 1);
    c->n_kv_heads = int_field(&p, "num_key_value_heads", NULL, 0, c->n_heads, 1);
    c->vocab = int_field(&p, "vocab_size", NULL, 1, 0, 1);
    c->max_pos = int_field(&p, "max_position_embeddings", NULL, 1, 0, 1);
    c->norm_eps = (float)num_field(&p, root, "rms_norm_eps", 1e-6, 1);
    c->act = ENG_LLM_SILU;
    read_act(&p, "hidden_act", c);
    c->gated_mlp = 1;
    c->tie_embeddings = bool_field(&p, "tie_word_embeddings", 0);
    read_rope(&p, c);
    if (c->family == ENG_LLM_QWEN2) {
      c->qkv_bias = 1;
      if (bool_field(&p, "use_sliding_window", 0)) UNSUP(&p, "use_sliding_window true (Qwen2's per-layer windows)");
    } else {
      c->qkv_bias = c->o_bias = bool_field(&p, "attention_bias", 0);
      c->mlp_bias = bool_field(&p, "mlp_bias", 0);
    }
    if (c->family == ENG_LLM_MISTRAL) c->sliding_window = int_field(&p, "sliding_window", NULL, 0, 0, 1);
    double prf = num_field(&p, root, "partial_rotary_factor", 1.0, 1);
    if (prf != 1.0) UNSUP(&p, "partial_rotary_factor %g", prf);
  }
  if (field(root, "quantization_config")) UNSUP(&p, "quantization_config");
  // head_dim: Llama 3.x and Mistral write it; else hidden / heads
  if (family_ok && c->n_heads > 0) {
    // GPT-2's fused c_attn is [hidden, 3 hidden]: its head_dim is hidden / heads, whatever else is written
    c->head_dim = c->family == ENG_LLM_GPT2 ? c->hidden / c->n_heads
                                            : int_field(&p, "head_dim", NULL, 0, c->hidden / c->n_heads, 2);
    if (!field(root, "head_dim") && c->hidden % c->n_heads)
      err_list_add(&p.bad, "hidden_size %lld is not a multiple of num_attention_heads %lld", (long long)c->hidden,
                   (long long)c->n_heads);
    if (c->head_dim % 2 && !c->learned_pos)
      err_list_add(&p.bad, "head_dim %lld is odd (RoPE rotates pairs)", (long long)c->head_dim);
    if (c->n_heads * c->head_dim > DIM_MAX)
      err_list_add(&p.bad, "num_attention_heads x head_dim is %lld, more than 2^30",
                   (long long)(c->n_heads * c->head_dim));
    if (c->head_dim < 1) err_list_add(&p.bad, "head_dim is 0 (hidden_size below num_attention_heads)");
    if (c->n_kv_heads > 0 && c->n_heads % c->n_kv_heads)
      err_list_add(&p.bad, "num_attention_heads %lld is not a multiple of num_key_value_heads %lld",
                   (long long)c->n_heads, (long long)c->n_kv_heads);
  }
  const cJSON *bos = field(root, "bos_token_id");
  if (cJSON_IsNumber(bos) && bos->valuedouble >= 0 && bos->valuedouble <= INT32_MAX)
    c->bos_id = (int32_t)bos->valuedouble;
  read_eos(&p, root, "config.json", c);
  cJSON_Delete(root);
  if (gen_json) {
    cJSON *g = cJSON_Parse(gen_json);
    if (!g || !cJSON_IsObject(g)) {
      err_list_add(&p.bad, "generation_config.json is not a JSON object");
    } else {
      read_eos(&p, g, "generation_config.json", c);
      const cJSON *b = field(g, "bos_token_id");
      if (cJSON_IsNumber(b) && b->valuedouble >= 0 && b->valuedouble <= INT32_MAX) c->bos_id = (int32_t)b->valuedouble;
    }
    cJSON_Delete(g);
  }
  for (int i = 0; i < c->n_eos; i++)
    if (c->vocab > 0 && c->eos_ids[i] >= c->vocab)
      err_list_add(&p.bad, "eos_token_id %d is outside the vocabulary (%lld)", c->eos_ids[i], (long long)c->vocab);
  return err_list_set(&p.bad, e, p.unsupported ? ERR_UNIMPLEMENTED : ERR_INVALID_ARGUMENT, "problems in config.json");
}

static char *read_text(const char *dir, const char *name, int optional, err *e, int *rc) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  uint8_t *buf = NULL;
  size_t len = 0;
  err e2 = {0};
  *rc = rfile_read_all(path, name, (size_t)16 << 20, &buf, &len, &e2);
  if (*rc) {
    if (optional && e2.code == ERR_NOT_FOUND)
      *rc = 0;
    else if (e)
      *e = e2;
    return NULL;
  }
  char *s = malloc(len + 1);
  if (!s) {
    free(buf);
    *rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory reading %s", name);
    return NULL;
  }
  memcpy(s, buf, len);
  s[len] = 0;
  free(buf);
  return s;
}

int eng_llm_config_load(const char *dir, eng_llm_config *c, err *e) {
  int rc = 0;
  char *cfg = read_text(dir, "config.json", 0, e, &rc);
  if (!cfg) return rc;
  char *gen = read_text(dir, "generation_config.json", 1, e, &rc);
  if (rc) {
    free(cfg);
    return rc;
  }
  rc = eng_llm_config_parse(cfg, gen, c, e);
  free(cfg);
  free(gen);
  return rc;
}
