// tests/unit/engine/test_llm_config.c: engine/llm/llm_config.c (config.json
// of each family, both RoPE spellings, generation_config's EOS ids, every
// problem at once) and engine/llm/safetensors.c (headers checked: lengths,
// offsets, sizes, shards through the index, file names confined).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "engine/llm/llm_config.h"
#include "engine/llm/safetensors.h"

static void test_llama3(void) {
  // transformers 4's spelling: rope_theta beside rope_scaling with "type"
  const char *cfg =
      "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"hidden_size\":2048,"
      "\"intermediate_size\":8192,\"num_attention_heads\":32,\"num_key_value_heads\":8,\"num_hidden_layers\":16,"
      "\"vocab_size\":128256,\"max_position_embeddings\":131072,\"rms_norm_eps\":1e-05,\"rope_theta\":500000.0,"
      "\"rope_scaling\":{\"factor\":32.0,\"high_freq_factor\":4.0,\"low_freq_factor\":1.0,"
      "\"original_max_position_embeddings\":8192,\"type\":\"llama3\"},\"tie_word_embeddings\":true,"
      "\"hidden_act\":\"silu\",\"head_dim\":64,\"bos_token_id\":128000,\"eos_token_id\":128001}";
  const char *gen = "{\"bos_token_id\":128000,\"eos_token_id\":[128001,128008,128009]}";
  eng_llm_config c;
  err e = {0};
  CHECK_EQ_INT(eng_llm_config_parse(cfg, gen, &c, &e), 0);
  CHECK_EQ_INT(c.family, ENG_LLM_LLAMA);
  CHECK_EQ_INT(c.hidden, 2048);
  CHECK_EQ_INT(c.n_kv_heads, 8);
  CHECK_EQ_INT(c.head_dim, 64);
  CHECK_EQ_INT(c.rope.kind, K_ROPE_LLAMA3);
  CHECK_EQ_INT(c.rope.original_max_pos, 8192);
  CHECK(c.rope_theta == 500000.0 && c.rope.factor == 32.0);
  CHECK_EQ_INT(c.tie_embeddings, 1);
  CHECK_EQ_INT(c.n_eos, 3);  // generation_config's list wins
  CHECK_EQ_INT(c.eos_ids[2], 128009);
  CHECK_EQ_INT(c.bos_id, 128000);
  CHECK_EQ_INT(c.gated_mlp, 1);
  CHECK_EQ_INT(c.layer_norm, 0);
}

static void test_families(void) {
  eng_llm_config c;
  err e = {0};
  // transformers 5: rope_parameters carries the theta
  CHECK_EQ_INT(eng_llm_config_parse("{\"architectures\":[\"Qwen2ForCausalLM\"],\"hidden_size\":64,"
                                    "\"intermediate_size\":128,\"num_attention_heads\":4,\"num_key_value_heads\":2,"
                                    "\"num_hidden_layers\":2,\"vocab_size\":256,\"max_position_embeddings\":128,"
                                    "\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":1000000.0},"
                                    "\"use_sliding_window\":false,\"sliding_window\":null}",
                                    NULL, &c, &e),
               0);
  CHECK_EQ_INT(c.family, ENG_LLM_QWEN2);
  CHECK_EQ_INT(c.qkv_bias, 1);
  CHECK_EQ_INT(c.o_bias, 0);
  CHECK(c.rope_theta == 1000000.0);
  CHECK_EQ_INT(c.rope.kind, K_ROPE_DEFAULT);
  CHECK_EQ_INT(c.head_dim, 16);
  CHECK_EQ_INT(eng_llm_config_parse("{\"model_type\":\"mistral\",\"hidden_size\":64,\"intermediate_size\":128,"
                                    "\"num_attention_heads\":4,\"num_key_value_heads\":2,\"num_hidden_layers\":2,"
                                    "\"vocab_size\":256,\"max_position_embeddings\":128,\"sliding_window\":8}",
                                    NULL, &c, &e),
               0);
  CHECK_EQ_INT(c.family, ENG_LLM_MISTRAL);
  CHECK_EQ_INT(c.sliding_window, 8);
  CHECK_EQ_INT(eng_llm_config_parse("{\"architectures\":[\"GPT2LMHeadModel\"],\"model_type\":\"gpt2\",\"n_embd\":64,"
                                    "\"n_layer\":2,\"n_head\":4,\"n_positions\":64,\"vocab_size\":256,"
                                    "\"activation_function\":\"gelu_new\",\"eos_token_id\":255}",
                                    NULL, &c, &e),
               0);
  CHECK_EQ_INT(c.family, ENG_LLM_GPT2);
  CHECK_EQ_INT(c.intermediate, 256);  // n_inner null: 4 x n_embd
  CHECK_EQ_INT(c.learned_pos, 1);
  CHECK_EQ_INT(c.layer_norm, 1);
  CHECK_EQ_INT(c.act, ENG_LLM_GELU_TANH);
  CHECK_EQ_INT(c.tie_embeddings, 1);
  CHECK_EQ_INT(c.n_eos, 1);
}

static void test_refusals(void) {
  eng_llm_config c;
  err e = {0};
  // every problem at once; unsupported math makes it UNIMPLEMENTED
  int rc = eng_llm_config_parse(
      "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":64,"
      "\"num_attention_heads\":4,\"num_key_value_heads\":3,\"num_hidden_layers\":-1,"
      "\"vocab_size\":256,\"max_position_embeddings\":128,\"hidden_act\":\"relu2\","
      "\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4},\"eos_token_id\":300}",
      NULL, &c, &e);
  CHECK_EQ_INT(rc, ERR_UNIMPLEMENTED);
  CHECK_CONTAINS(e.msg, "intermediate_size is missing");
  CHECK_CONTAINS(e.msg, "num_hidden_layers must be an integer in [1, 2^30]");
  CHECK_CONTAINS(e.msg, "unsupported hidden_act 'relu2'");
  CHECK_CONTAINS(e.msg, "unsupported rope_scaling type 'yarn'");
  CHECK_CONTAINS(e.msg, "not a multiple of num_key_value_heads 3");
  CHECK_CONTAINS(e.msg, "eos_token_id 300 is outside the vocabulary");
  // sizes whose products would overflow: refused before anything is allocated
  CHECK_EQ_INT(eng_llm_config_parse("{\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":128,"
                                    "\"num_attention_heads\":4,\"num_hidden_layers\":2,\"vocab_size\":4e9,"
                                    "\"max_position_embeddings\":128,\"head_dim\":1073741824}",
                                    NULL, &c, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "vocab_size must be an integer in [1, 2^30]");
  CHECK_CONTAINS(e.msg, "num_attention_heads x head_dim is 4294967296, more than 2^30");
  CHECK_EQ_INT(eng_llm_config_parse("{\"architectures\":[\"MambaForCausalLM\"]}", NULL, &c, &e), ERR_UNIMPLEMENTED);
  CHECK_CONTAINS(e.msg, "'MambaForCausalLM'");
  CHECK_EQ_INT(eng_llm_config_parse("{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"gpt2\"}", NULL, &c, &e),
               ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "disagree");
  CHECK_EQ_INT(eng_llm_config_parse("[1]", NULL, &c, &e), ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(eng_llm_config_parse("{\"model_type\":\"qwen2\",\"hidden_size\":64,\"intermediate_size\":128,"
                                    "\"num_attention_heads\":4,\"num_hidden_layers\":2,\"vocab_size\":256,"
                                    "\"max_position_embeddings\":128,\"use_sliding_window\":true}",
                                    NULL, &c, &e),
               ERR_UNIMPLEMENTED);
  CHECK_CONTAINS(e.msg, "use_sliding_window");
  CHECK_EQ_INT(eng_llm_config_parse("{\"model_type\":\"gpt2\",\"n_embd\":64,\"n_layer\":2,\"n_head\":4,"
                                    "\"n_positions\":64,\"vocab_size\":256,\"scale_attn_by_inverse_layer_idx\":true}",
                                    NULL, &c, &e),
               ERR_UNIMPLEMENTED);
  CHECK_CONTAINS(e.msg, "scale_attn_by_inverse_layer_idx");
}

// --- safetensors
static char dir[] = "/tmp/test_llm_st_XXXXXX";

static void write_file(const char *name, const void *data, size_t n) {
  char p[256];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "wb");
  fwrite(data, 1, n, f);
  fclose(f);
}

// A safetensors file with header h (padded to 8) and n_data bytes of data.
static void write_st(const char *name, const char *h, size_t n_data) {
  size_t hl = (strlen(h) + 7) / 8 * 8;
  uint8_t *b = calloc(1, 8 + hl + n_data);
  for (int i = 0; i < 8; i++) b[i] = (uint8_t)(hl >> (8 * i));
  memset(b + 8, ' ', hl);
  memcpy(b + 8, h, strlen(h));
  float one = 1.0f;
  if (n_data >= 4) memcpy(b + 8 + hl, &one, 4);
  write_file(name, b, 8 + hl + n_data);
  free(b);
}

static void clear(void) {
  const char *names[] = {"model.safetensors", "model.safetensors.index.json", "a.safetensors", "b.safetensors"};
  char p[256];
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) snprintf(p, sizeof p, "%s/%s", dir, names[i]), unlink(p);
}

static void test_safetensors(void) {
  CHECK(mkdtemp(dir) != NULL);
  eng_llm_st *s = NULL;
  err e = {0};
  // one file: a F32 [2] and a BF16 [2], with metadata
  write_st("model.safetensors",
           "{\"__metadata__\":{\"format\":\"pt\"},\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
           "\"h\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[8,12]}}",
           12);
  CHECK_EQ_INT(eng_llm_st_open(dir, &s, &e), 0);
  if (s) {
    CHECK_EQ_INT(eng_llm_st_count(s), 2);
    const eng_llm_tensor *w = eng_llm_st_find(s, "w");
    CHECK(w && w->dt == DT_FP32 && w->ndim == 1 && w->shape[0] == 2);
    float v[2];
    eng_llm_st_to_f32(v, w, 0, 2);
    CHECK_NEAR(v[0], 1.0, 0, 0);
    CHECK(eng_llm_st_find(s, "nope") == NULL);
    eng_llm_st_close(s);
  }
  // sizes and offsets: every wrong tensor named
  write_st("model.safetensors",
           "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]},"
           "\"b\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[8,400]},"
           "\"c\":{\"dtype\":\"F8_E4M3\",\"shape\":[4],\"data_offsets\":[0,4]}}",
           8);
  CHECK_EQ_INT(eng_llm_st_open(dir, &s, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "'a' holds 8 bytes, its shape and F32 need 12");
  CHECK_CONTAINS(e.msg, "'b' has a bad shape or data_offsets outside the file");
  // a header longer than the file
  uint8_t big[16] = {0xFF, 0xFF, 0xFF, 0x00, 0, 0, 0, 0};
  write_file("model.safetensors", big, sizeof big);
  CHECK_EQ_INT(eng_llm_st_open(dir, &s, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "does not fit the file");
  // shards through the index; the index must agree with the files
  clear();
  write_st("a.safetensors", "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
  write_st("b.safetensors", "{\"y\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
  const char *idx = "{\"weight_map\":{\"x\":\"a.safetensors\",\"y\":\"b.safetensors\"}}";
  write_file("model.safetensors.index.json", idx, strlen(idx));
  CHECK_EQ_INT(eng_llm_st_open(dir, &s, &e), 0);
  if (s) {
    CHECK_EQ_INT(eng_llm_st_files(s), 2);
    CHECK_EQ_INT(eng_llm_st_count(s), 2);
    eng_llm_st_close(s);
  }
  idx = "{\"weight_map\":{\"x\":\"a.safetensors\",\"y\":\"a.safetensors\",\"z\":\"b.safetensors\"}}";
  write_file("model.safetensors.index.json", idx, strlen(idx));
  CHECK_EQ_INT(eng_llm_st_open(dir, &s, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "puts tensor 'y' in a.safetensors, it is in b.safetensors");
  CHECK_CONTAINS(e.msg, "names tensor 'z' that b.safetensors lacks");
  idx = "{\"weight_map\":{\"x\":\"../a.safetensors\"}}";
  write_file("model.safetensors.index.json", idx, strlen(idx));
  CHECK_EQ_INT(eng_llm_st_open(dir, &s, &e), ERR_INVALID_ARGUMENT);
  CHECK_CONTAINS(e.msg, "names no file of the folder");
  idx = "{\"weight_map\":{\"x\":\"c.safetensors\"}}";
  write_file("model.safetensors.index.json", idx, strlen(idx));
  CHECK_EQ_INT(eng_llm_st_open(dir, &s, &e), ERR_NOT_FOUND);
  clear();
  CHECK_EQ_INT(eng_llm_st_open(dir, &s, &e), ERR_NOT_FOUND);  // no weights at all
  rmdir(dir);
}

int main(void) {
  test_llama3();
  test_families();
  test_refusals();
  test_safetensors();
  CHECK_DONE();
}
