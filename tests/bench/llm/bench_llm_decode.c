// tests/bench/llm/bench_llm_decode.c: decode step time of the GPU decoder
// runner (engine/llm/cuda/) on a Llama-3.2-1B-shaped model with random FP16
// weights, against the time the step must at least take: reading the
// weights and the batch's KV once at the device's memory bandwidth,
// measured here with a device-to-device copy. See README.md beside it.
//
//   bench_llm_decode [--dir DIR] [--ctx N] [--steps N] [--batches 1,8,64,256] [--device D] [--layers N]
//                    [--no-gemm-tune] [--no-gemv | --gemv-rows N] [--no-fuse] [--no-pdl] [--attn-pipeline auto|deep|shallow]
//
// The checkpoint (config.json + model.safetensors, ~2.5 GB) is written to
// DIR (default: a new folder under /tmp, removed at the end). Each batch
// size runs decode steps with every sequence at position --ctx (the KV of
// the positions before it is whatever the pool holds: the time does not
// depend on the values), 3 warm-up steps, then --steps timed ones.
#include <cuda_runtime_api.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine/llm/cuda/llm_cuda.h"
#include "engine/llm/llm_model.h"
#include "kernels/k_ref.h"

// Llama 3.2 1B
#define HID 2048
#define FF 8192
#define NH 32
#define NKV 8
#define HD 64
#define VOCAB 128256

static int n_layers = 16;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define CK(call)                                                                              \
  do {                                                                                        \
    cudaError_t rc_ = (call);                                                                 \
    if (rc_ != cudaSuccess) {                                                                 \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(rc_)); \
      exit(1);                                                                                \
    }                                                                                         \
  } while (0)

typedef struct tensor {
  char name[96];
  int64_t d0, d1;  // d1 0: a vector
  float scale;     // uniform in +-scale; 0: all ones (norm weights)
} tensor;

static tensor *list;
static int n_list;

static void add(const char *name, int64_t d0, int64_t d1, float scale) {
  tensor *t = &list[n_list++];
  snprintf(t->name, sizeof t->name, "%s", name);
  t->d0 = d0, t->d1 = d1, t->scale = scale;
}

static void write_ckpt(const char *dir) {
  char p[4096];
  snprintf(p, sizeof p, "%s/config.json", dir);
  FILE *f = fopen(p, "w");
  if (!f) {
    perror(p);
    exit(1);
  }
  fprintf(f,
          "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": %d,\n"
          " \"intermediate_size\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, \"head_dim\": %d,\n"
          " \"num_hidden_layers\": %d, \"vocab_size\": %d, \"max_position_embeddings\": 131072,\n"
          " \"rms_norm_eps\": 1e-05, \"rope_theta\": 500000.0, \"hidden_act\": \"silu\",\n"
          " \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 32.0, \"low_freq_factor\": 1.0,\n"
          "   \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192},\n"
          " \"tie_word_embeddings\": true, \"bos_token_id\": 128000, \"eos_token_id\": 128001,\n"
          " \"torch_dtype\": \"float16\"}\n",
          HID, FF, NH, NKV, HD, n_layers, VOCAB);
  fclose(f);
  list = calloc((size_t)(2 + 9 * n_layers), sizeof *list);
  add("model.embed_tokens.weight", VOCAB, HID, 0.02f);
  add("model.norm.weight", HID, 0, 0);
  for (int i = 0; i < n_layers; i++) {
    char n[96];
#define L(s) (snprintf(n, sizeof n, "model.layers.%d.%s", i, s), n)
    add(L("input_layernorm.weight"), HID, 0, 0);
    add(L("post_attention_layernorm.weight"), HID, 0, 0);
    add(L("self_attn.q_proj.weight"), NH * HD, HID, 0.02f);
    add(L("self_attn.k_proj.weight"), NKV * HD, HID, 0.02f);
    add(L("self_attn.v_proj.weight"), NKV * HD, HID, 0.02f);
    add(L("self_attn.o_proj.weight"), HID, NH * HD, 0.02f);
    add(L("mlp.gate_proj.weight"), FF, HID, 0.02f);
    add(L("mlp.up_proj.weight"), FF, HID, 0.02f);
    add(L("mlp.down_proj.weight"), HID, FF, 0.02f);
#undef L
  }
  // the header: names, F16, shapes, offsets
  size_t cap = (size_t)n_list * 200 + 64, len = 0, off = 0;
  char *h = malloc(cap);
  len += (size_t)snprintf(h + len, cap - len, "{");
  for (int i = 0; i < n_list; i++) {
    tensor *t = &list[i];
    size_t bytes = (size_t)t->d0 * (size_t)(t->d1 ? t->d1 : 1) * 2;
    if (t->d1)
      len += (size_t)snprintf(h + len, cap - len,
                              "%s\"%s\": {\"dtype\": \"F16\", \"shape\": [%lld, %lld], "
                              "\"data_offsets\": [%zu, %zu]}",
                              i ? ", " : "", t->name, (long long)t->d0, (long long)t->d1, off, off + bytes);
    else
      len += (size_t)snprintf(h + len, cap - len,
                              "%s\"%s\": {\"dtype\": \"F16\", \"shape\": [%lld], "
                              "\"data_offsets\": [%zu, %zu]}",
                              i ? ", " : "", t->name, (long long)t->d0, off, off + bytes);
    off += bytes;
  }
  len += (size_t)snprintf(h + len, cap - len, "}");
  while (len % 8) h[len++] = ' ';
  snprintf(p, sizeof p, "%s/model.safetensors", dir);
  f = fopen(p, "wb");
  if (!f) {
    perror(p);
    exit(1);
  }
  uint8_t hl[8];
  for (int i = 0; i < 8; i++) hl[i] = (uint8_t)((uint64_t)len >> (8 * i));
  fwrite(hl, 1, 8, f);
  fwrite(h, 1, len, f);
  free(h);
  // the data, in chunks: uniform values (xorshift) rounded to half
  enum { CH = 1 << 20 };
  float *buf = malloc(CH * sizeof(float));
  uint16_t *hb = malloc(CH * sizeof(uint16_t));
  uint64_t x = 0x2545f4914f6cdd1dull;
  for (int i = 0; i < n_list; i++) {
    tensor *t = &list[i];
    size_t n = (size_t)t->d0 * (size_t)(t->d1 ? t->d1 : 1);
    for (size_t k = 0; k < n; k += CH) {
      size_t m = n - k < CH ? n - k : CH;
      for (size_t j = 0; j < m; j++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[j] = t->scale ? t->scale * ((float)(x >> 40) * (2.0f / 16777216.0f) - 1.0f) : 1.0f;
      }
      k_f32_to_f16(hb, buf, m);
      if (fwrite(hb, 2, m, f) != m) {
        perror("write");
        exit(1);
      }
    }
  }
  free(buf);
  free(hb);
  fclose(f);
}

// Device-to-device copy bandwidth (bytes read + written per second).
static double measure_bw(void) {
  size_t n = (size_t)1 << 30;
  void *a, *b;
  CK(cudaMalloc(&a, n));
  CK(cudaMalloc(&b, n));
  CK(cudaMemset(a, 1, n));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice));
  int reps = 10;
  CK(cudaEventRecord(e0, 0));
  for (int i = 0; i < reps; i++) CK(cudaMemcpyAsync(i % 2 ? a : b, i % 2 ? b : a, n, cudaMemcpyDeviceToDevice, 0));
  CK(cudaEventRecord(e1, 0));
  CK(cudaEventSynchronize(e1));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(a);
  cudaFree(b);
  return 2.0 * (double)n * reps / (ms * 1e-3);
}

int main(int argc, char **argv) {
  const char *dir = NULL;
  int ctx = 512, steps = 20, device = 0, gemm_tune = 1, gemv = ENG_LLM_GEMV_ROWS_DEFAULT, attn = 0, fuse = 1, pdl = 1;
  int batches[16] = {1, 8, 64, 256}, nb = 4;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--dir") && i + 1 < argc)
      dir = argv[++i];
    else if (!strcmp(argv[i], "--ctx") && i + 1 < argc)
      ctx = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
      steps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--device") && i + 1 < argc)
      device = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--layers") && i + 1 < argc)
      n_layers = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--no-gemm-tune"))
      gemm_tune = 0;
    else if (!strcmp(argv[i], "--no-gemv"))
      gemv = 0;
    else if (!strcmp(argv[i], "--gemv-rows") && i + 1 < argc)
      gemv = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--fuse"))
      fuse = 1;
    else if (!strcmp(argv[i], "--pdl"))
      pdl = 1;
    else if (!strcmp(argv[i], "--no-fuse"))
      fuse = 0;
    else if (!strcmp(argv[i], "--no-pdl"))
      pdl = 0;
    else if (!strcmp(argv[i], "--attn-pipeline") && i + 1 < argc) {  // auto | deep | shallow
      const char *v = argv[++i];
      attn = !strcmp(v, "deep") ? 1 : !strcmp(v, "shallow") ? 2 : !strcmp(v, "auto") ? 0 : -1;
      if (attn < 0) {
        fprintf(stderr, "--attn-pipeline takes auto, deep or shallow\n");
        return 2;
      }
    } else if (!strcmp(argv[i], "--batches") && i + 1 < argc) {
      nb = 0;
      for (char *s = strtok(argv[++i], ","); s && nb < 16; s = strtok(NULL, ",")) batches[nb++] = atoi(s);
    } else {
      fprintf(stderr,
              "usage: %s [--dir DIR] [--ctx N] [--steps N] [--batches 1,8,64,256] [--device D] [--layers N] "
              "[--no-gemm-tune] [--no-gemv | --gemv-rows N] [--no-fuse] [--no-pdl] [--attn-pipeline auto|deep|shallow]\n",
              argv[0]);
      return 2;
    }
  }
  if (ctx < 1 || steps < 1 || n_layers < 1 || nb < 1) return 2;
  int maxb = 0;
  for (int i = 0; i < nb; i++) maxb = batches[i] > maxb ? batches[i] : maxb;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count <= device) {
    printf("SKIP: no CUDA device %d\n", device);
    return 77;
  }
  CK(cudaSetDevice(device));
  struct cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, device));
  char tmp[] = "/tmp/bench_llm_XXXXXX";
  int made = 0;
  if (!dir) {
    if (!mkdtemp(tmp)) {
      perror("mkdtemp");
      return 1;
    }
    dir = tmp, made = 1;
  }
  double t0 = now_s();
  write_ckpt(dir);
  printf("checkpoint: %s (%d layers, FP16), written in %.1f s\n", dir, n_layers, now_s() - t0);
  eng_llm_model *m = NULL;
  err e = {0};
  t0 = now_s();
  if (eng_llm_model_create_stored(dir, &m, &e)) {
    fprintf(stderr, "load: %s\n", e.msg);
    return 1;
  }
  printf("loaded in %.1f s\n", now_s() - t0);
  const int bt = 16, per = (ctx + 1 + bt - 1) / bt;
  eng_llm_runner_config rc = {
      .n_blocks = maxb * per, .block_tokens = bt, .max_step_tokens = maxb, .max_context = ctx + 1};
  eng_llm_cuda_runner *r = NULL;
  t0 = now_s();
  if (eng_llm_cuda_runner_create(m, &rc, device, &r, &e)) {
    fprintf(stderr, "runner: %s\n", e.msg);
    return 1;
  }
  // the graphs' GEMM shapes timed among cuBLASLt's candidates before each capture
  if (eng_llm_cuda_runner_set_gemm_tune(r, gemm_tune, &e)) {
    fprintf(stderr, "gemm tuning: %s\n", e.msg);
    return 1;
  }
  printf("GEMM autotuning for the decode graphs: %s\n", gemm_tune ? "on" : "off (--no-gemm-tune)");
  eng_llm_cuda_runner_set_gemv(r, gemv);  // the layers' products at <= gemv tokens on k_gemv_cuda
  printf("layer products of <= %d tokens on k_gemv_cuda%s\n", gemv, gemv ? "" : " (off: --no-gemv)");
  eng_llm_cuda_runner_set_decode_fusion(r, fuse, pdl);
  printf("decode fusion (RMSNorm and SwiGLU inside the GEMVs): %s; GEMVs as dependent launches: %s\n",
         gemv && fuse ? "on (--fuse)" : "off", gemv && pdl ? "on where the device has it (--pdl; sm_90)" : "off");
  eng_llm_cuda_runner_set_attn_pipeline(r, attn);
  printf("attention pipeline: %s\n", attn == 1 ? "deep" : attn == 2 ? "shallow" : "by the grid (auto)");
  eng_llm_model_destroy(m);
  size_t wbytes = eng_llm_cuda_runner_weight_bytes(r);
  printf("runner: %.2f GB of weights uploaded in %.1f s, KV pool %.2f GB\n", wbytes / 1e9, now_s() - t0,
         eng_llm_cuda_runner_kv_bytes(r) / 1e9);
  double bw = measure_bw();
  printf("device: %s, device-to-device copy %.0f GB/s (read + write)\n", prop.name, bw / 1e9);
  int32_t *tables = malloc((size_t)maxb * per * sizeof(int32_t)), *tok = malloc((size_t)maxb * sizeof(int32_t));
  eng_llm_work *w = malloc((size_t)maxb * sizeof *w);
  float *logits = malloc((size_t)maxb * VOCAB * sizeof(float));
  for (int i = 0; i < maxb * per; i++) tables[i] = i;
  int32_t *ids = malloc((size_t)maxb * sizeof(int32_t));
  // mode 0 plain launches, 1 graphs, 2 graphs with every row greedy on the device (issue 35: the
  // argmax in the graph, int32 ids back instead of batch x vocab FP32 logits), 3 graphs with every row
  // sampled on the device (issue 35 item 5: temperature 0.8, top_p 0.9 over the whole vocabulary, the
  // sampling kernel in the graph, int32 ids back)
  eng_llm_sampling samp = eng_llm_sampling_greedy();
  samp.temperature = 0.8f;
  samp.top_p = 0.9f;
  for (int mode = 0; mode < 4; mode++) {
    int graphs = mode >= 1, greedy = mode == 2, sampled = mode == 3;
    if (mode == 1) {
      // the largest power of two up to the largest batch: smaller ones run as its buckets
      if (eng_llm_cuda_runner_enable_graphs(r, maxb, &e)) {
        fprintf(stderr, "graphs: %s\n", e.msg);
        return 1;
      }
    }
    printf("\n%s\n%6s %10s %12s %12s %12s %8s\n",
           sampled  ? "CUDA graphs, sampled on the device (temperature 0.8, top_p 0.9; ids back, no logits):"
           : greedy ? "CUDA graphs, greedy on the device (ids back, no logits):"
           : graphs ? "CUDA graphs (decode buckets):"
                    : "plain launches:",
           "batch", "step ms", "tokens/s", "bytes GB", "ideal ms", "ratio");
    for (int bi = 0; bi < nb; bi++) {
      int B = batches[bi];
      for (int i = 0; i < B; i++) {
        tok[i] = (int32_t)((i * 7919) % VOCAB);
        w[i] = (eng_llm_work){.tokens = &tok[i],
                              .start = ctx,
                              .n_tokens = 1,
                              .block_table = tables + (size_t)i * per,
                              .n_blocks = per,
                              .logits = 1,
                              .greedy = greedy,
                              .sampling = sampled ? &samp : NULL,
                              .u = (double)i / B};
      }
      for (int k = 0; k < 3; k++)
        if (eng_llm_cuda_step_ids(r, w, (size_t)B, logits, greedy || sampled ? ids : NULL, &e)) {
          fprintf(stderr, "step: %s\n", e.msg);
          return 1;
        }
      t0 = now_s();
      for (int k = 0; k < steps; k++)
        if (eng_llm_cuda_step_ids(r, w, (size_t)B, logits, greedy || sampled ? ids : NULL, &e)) {
          fprintf(stderr, "step: %s\n", e.msg);
          return 1;
        }
      double dt = (now_s() - t0) / steps;
      // the weights once, plus every sequence's K and V up to its position
      double bytes = (double)wbytes + (double)B * (ctx + 1) * 2.0 * n_layers * NKV * HD * 2;
      double ideal = bytes / bw;  // bw counts the bytes a copy reads and writes: what the memory moves a second
      printf("%6d %10.3f %12.0f %12.3f %12.3f %8.2f\n", B, dt * 1e3, B / dt, bytes / 1e9, ideal * 1e3, dt / ideal);
    }
  }
  eng_llm_cuda_runner_destroy(r);
  free(tables), free(tok), free(w), free(logits), free(list), free(ids);
  if (made) {
    char p[4096];
    snprintf(p, sizeof p, "%s/config.json", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    unlink(p);
    rmdir(dir);
  }
  return 0;
}
