// tests/unit/engine/test_llm_step.c: engine/llm/llm_step.c on a tiny Llama
// (GQA, 2 layers) written here: the paged KV cache gives the same logits
// however a sequence's tokens are split into steps (one prefill, chunks,
// token by token) and whatever other sequences share the step or which
// physical blocks its table names; work naming a block outside the pool, a
// token outside the vocabulary, a table too short or too many tokens is
// refused; eng_llm_step_ids gives greedy items the argmax of their rows as
// ids and only the other rows' logits. (Equality with transformers: tests/llm/check_llm_greedy.py.)
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "engine/llm/llm_model.h"
#include "engine/llm/llm_step.h"
#include "kernels/k_ref.h"

enum { H = 16, NH = 4, NKV = 2, D = 4, FF = 32, V = 32, LAYERS = 2 };
static char dir[] = "/tmp/test_llm_step_XXXXXX";

typedef struct tdef {
  char name[64];
  int64_t d0, d1;  // d1 0: 1-D
} tdef;

static float val(unsigned *s, int norm) {
  *s = *s * 1103515245u + 12345u;
  float u = (float)((*s >> 8) & 0xFFFF) / 32768.0f - 1.0f;
  return norm ? 1.0f + 0.1f * u : 0.5f * u;
}

static void write_model(void) {
  tdef t[64];
  int n = 0;
#define T(nm, a, b) (snprintf(t[n].name, sizeof t[n].name, "%s", nm), t[n].d0 = a, t[n].d1 = b, n++)
  T("model.embed_tokens.weight", V, H);
  T("model.norm.weight", H, 0);
  T("lm_head.weight", V, H);
  for (int l = 0; l < LAYERS; l++) {
    char p[64];
#define L(s, a, b) (snprintf(p, sizeof p, "model.layers.%d.%s", l, s), T(p, a, b))
    L("input_layernorm.weight", H, 0);
    L("self_attn.q_proj.weight", NH * D, H);
    L("self_attn.k_proj.weight", NKV * D, H);
    L("self_attn.v_proj.weight", NKV * D, H);
    L("self_attn.o_proj.weight", H, NH * D);
    L("post_attention_layernorm.weight", H, 0);
    L("mlp.gate_proj.weight", FF, H);
    L("mlp.up_proj.weight", FF, H);
    L("mlp.down_proj.weight", H, FF);
  }
  char hdr[16384];
  size_t hl = 0, off = 0;
  hl += (size_t)snprintf(hdr + hl, sizeof hdr - hl, "{");
  for (int i = 0; i < n; i++) {
    size_t bytes = (size_t)(t[i].d0 * (t[i].d1 ? t[i].d1 : 1)) * 4;
    if (t[i].d1)
      hl += (size_t)snprintf(hdr + hl, sizeof hdr - hl,
                             "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%lld,%lld],\"data_offsets\":[%zu,%zu]}",
                             i ? "," : "", t[i].name, (long long)t[i].d0, (long long)t[i].d1, off, off + bytes);
    else
      hl += (size_t)snprintf(hdr + hl, sizeof hdr - hl,
                             "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%lld],\"data_offsets\":[%zu,%zu]}", i ? "," : "",
                             t[i].name, (long long)t[i].d0, off, off + bytes);
    off += bytes;
  }
  hl += (size_t)snprintf(hdr + hl, sizeof hdr - hl, "}");
  char path[256];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  FILE *f = fopen(path, "wb");
  uint64_t len = hl;
  fwrite(&len, 8, 1, f);  // little-endian host
  fwrite(hdr, 1, hl, f);
  unsigned s = 7;
  for (int i = 0; i < n; i++)
    for (int64_t k = 0; k < t[i].d0 * (t[i].d1 ? t[i].d1 : 1); k++) {
      float v = val(&s, !t[i].d1);
      fwrite(&v, 4, 1, f);
    }
  fclose(f);
  snprintf(path, sizeof path, "%s/config.json", dir);
  f = fopen(path, "w");
  fprintf(f,
          "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":%d,\"intermediate_size\":%d,"
          "\"num_attention_heads\":%d,\"num_key_value_heads\":%d,\"num_hidden_layers\":%d,\"vocab_size\":%d,"
          "\"max_position_embeddings\":64,\"rms_norm_eps\":1e-5,\"rope_theta\":10000.0}",
          H, FF, NH, NKV, LAYERS, V);
  fclose(f);
}

static const int32_t toks[10] = {3, 17, 5, 29, 0, 8, 8, 12, 31, 1};

// The logits after each of the 10 tokens, the sequence fed in pieces of
// the given sizes through a table of the given blocks (block_tokens 3).
static void run_split(eng_llm_runner *r, const int *pieces, const int32_t *table, float out[10][V]) {
  int64_t pos = 0;
  err e = {0};
  for (int p = 0; pieces[p]; p++) {
    // every piece ends with a logits row for its last token; to get a row
    // per position the caller uses pieces of 1
    eng_llm_work w = {
        .tokens = toks + pos, .start = pos, .n_tokens = pieces[p], .block_table = table, .n_blocks = 4, .logits = 1};
    float lg[V];
    CHECK_EQ_INT(eng_llm_step(r, &w, 1, lg, &e), 0);
    pos += pieces[p];
    memcpy(out[pos - 1], lg, sizeof lg);
  }
}

static void test_splits(const eng_llm_model *m) {
  eng_llm_runner_config rc = {.n_blocks = 12, .block_tokens = 3, .max_step_tokens = 16, .max_context = 12};
  eng_llm_runner *r = NULL;
  err e = {0};
  CHECK_EQ_INT(eng_llm_runner_create(m, &rc, &r, &e), 0);
  if (!r) return;
  static float one[10][V], chunks[10][V], whole[10][V], batched[2][V];
  int32_t t1[4] = {0, 1, 2, 3}, t2[4] = {11, 4, 9, 6}, t3[4] = {7, 10, 5, 8};
  int by_one[11] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0}, by_chunks[] = {4, 2, 3, 1, 0}, at_once[] = {10, 0};
  run_split(r, by_one, t1, one);
  run_split(r, by_chunks, t2, chunks);
  run_split(r, at_once, t3, whole);
  // the same positions' logits, however split and wherever stored
  for (int v = 0; v < V; v++) {
    CHECK_NEAR(chunks[9][v], one[9][v], 1e-5, 1e-5);
    CHECK_NEAR(whole[9][v], one[9][v], 1e-5, 1e-5);
    CHECK_NEAR(chunks[5][v], one[5][v], 1e-5, 1e-5);
    CHECK_NEAR(chunks[3][v], one[3][v], 1e-5, 1e-5);
  }
  // two sequences in one step: a decode token (position 9, its cache from
  // table t1) and a fresh 4-token prefill on blocks of its own
  int32_t t5[2] = {10, 11};  // blocks no other table names
  eng_llm_work w[2] = {{.tokens = toks + 9, .start = 9, .n_tokens = 1, .block_table = t1, .n_blocks = 4, .logits = 1},
                       {.tokens = toks, .start = 0, .n_tokens = 4, .block_table = t5, .n_blocks = 2, .logits = 1}};
  CHECK_EQ_INT(eng_llm_step(r, w, 2, batched[0], &e), 0);
  for (int v = 0; v < V; v++) {
    CHECK_NEAR(batched[0][v], one[9][v], 1e-5, 1e-5);
    CHECK_NEAR(batched[1][v], one[3][v], 1e-5, 1e-5);
  }
  // greedy items (eng_llm_step_ids, issue 35): their tokens in ids, the argmax of the rows the
  // logits path gives; the other sampling items' rows alone in logits, in item order
  int32_t am[2], ids[2] = {-7, -7};
  k_argmax_rows_ref(am, batched[0], 2, V);
  static float rest[2][V];
  w[0].greedy = 1;
  CHECK_EQ_INT(eng_llm_step_ids(r, w, 2, rest[0], ids, &e), 0);
  CHECK_EQ_INT(ids[0], am[0]);
  CHECK_EQ_INT(ids[1], -7);  // not greedy: untouched
  for (int v = 0; v < V; v++) CHECK_NEAR(rest[0][v], batched[1][v], 1e-5, 1e-5);
  // a sampled item handed to the engine (eng_llm_work's sampling): the CPU runner answers -1 and gives
  // its logits row, for the host sampler
  eng_llm_sampling samp = eng_llm_sampling_greedy();
  samp.temperature = 0.8f;
  w[1].sampling = &samp;
  w[1].u = 0.5;
  ids[0] = ids[1] = -7;
  memset(rest, 0, sizeof rest);
  CHECK_EQ_INT(eng_llm_step_ids(r, w, 2, rest[0], ids, &e), 0);
  CHECK_EQ_INT(ids[0], am[0]);
  CHECK_EQ_INT(ids[1], -1);
  for (int v = 0; v < V; v++) CHECK_NEAR(rest[0][v], batched[1][v], 1e-5, 1e-5);
  w[1].sampling = NULL;
  w[1].greedy = 1;
  ids[0] = ids[1] = -7;
  CHECK_EQ_INT(eng_llm_step_ids(r, w, 2, rest[0], ids, &e), 0);
  CHECK_EQ_INT(ids[0], am[0]);
  CHECK_EQ_INT(ids[1], am[1]);
  // ids NULL: greedy ignored, every row's logits as eng_llm_step
  CHECK_EQ_INT(eng_llm_step_ids(r, w, 2, rest[0], NULL, &e), 0);
  for (int v = 0; v < V; v++) CHECK_NEAR(rest[1][v], batched[1][v], 1e-5, 1e-5);
  w[0].greedy = w[1].greedy = 0;
  // the logits differ between positions (the test is not vacuous)
  double dsum = 0;
  for (int v = 0; v < V; v++) dsum += fabs(one[9][v] - one[8][v]);
  CHECK(dsum > 1e-2);
  // refusals, nothing computed
  int32_t bad_block[4] = {0, 1, 12, 3}, bad_tok[1] = {V};
  eng_llm_work b = {.tokens = toks, .start = 0, .n_tokens = 8, .block_table = bad_block, .n_blocks = 4, .logits = 1};
  float lg[2 * V];
  CHECK_EQ_INT(eng_llm_step(r, &b, 1, lg, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "block 12 outside the pool (12 blocks)");
  b = (eng_llm_work){.tokens = bad_tok, .start = 0, .n_tokens = 1, .block_table = t1, .n_blocks = 4, .logits = 1};
  CHECK_EQ_INT(eng_llm_step(r, &b, 1, lg, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "token 32 outside the vocabulary");
  b = (eng_llm_work){.tokens = toks, .start = 0, .n_tokens = 7, .block_table = t1, .n_blocks = 2, .logits = 1};
  CHECK_EQ_INT(eng_llm_step(r, &b, 1, lg, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "block table holds 2 blocks");
  b = (eng_llm_work){.tokens = toks, .start = 5, .n_tokens = 10, .block_table = t1, .n_blocks = 4, .logits = 1};
  CHECK_EQ_INT(eng_llm_step(r, &b, 1, lg, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "outside the context");
  eng_llm_work many[3] = {
      {.tokens = toks, .start = 0, .n_tokens = 8, .block_table = t1, .n_blocks = 4},
      {.tokens = toks, .start = 0, .n_tokens = 6, .block_table = t2, .n_blocks = 4},
      {.tokens = toks, .start = 0, .n_tokens = 6, .block_table = t3, .n_blocks = 4},
  };
  CHECK_EQ_INT(eng_llm_step(r, many, 3, lg, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "more than 16 tokens");
  eng_llm_runner_destroy(r);
}

int main(void) {
  if (!mkdtemp(dir)) return 1;
  write_model();
  eng_llm_model *m = NULL;
  err e = {0};
  int rc = eng_llm_model_create(dir, &m, &e);
  CHECK_EQ_INT(rc, 0);
  if (rc) fprintf(stderr, "%s\n", e.msg);
  if (m) {
    const eng_llm_config *c = eng_llm_model_config(m);
    CHECK_EQ_INT(c->n_kv_heads, NKV);
    CHECK_EQ_INT(eng_llm_model_weight_bytes(m) > 0, 1);
    test_splits(m);
    eng_llm_model_destroy(m);
  }
  char p[256];
  snprintf(p, sizeof p, "%s/model.safetensors", dir);
  unlink(p);
  snprintf(p, sizeof p, "%s/config.json", dir);
  unlink(p);
  rmdir(dir);
  CHECK_DONE();
}
