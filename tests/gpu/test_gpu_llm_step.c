// tests/gpu/test_gpu_llm_step.c: the GPU decoder runner (engine/llm/cuda/)
// against the CPU runner (engine/llm/llm_step.c), step by step, on every
// fixture checkpoint of tests/llm/fixtures (Llama 3 GQA with llama3 RoPE
// scaling, Llama 2 BF16 tied and sharded, Llama with biases and GeGLU,
// Qwen2, Mistral with an 8-token sliding window, GPT-2 in FP32 and FP16).
//
//   test_gpu_llm_step CKPT_DIR [[PYTHON] WRITE_CKPTS_PY]
//
// CKPT_DIR holds one checkpoint per fixture; with PYTHON and the script
// (tests/llm/write_ckpts.py) they are written there first. The same steps
// run on both runners: three sequences, prefill chunks (one split over two
// steps, without logits in its first) mixed with decode tokens, then eight
// decode steps; every sequence's block table is scattered over the pool.
// The tokens fed back are the CPU's greedy ones, so both runners always see
// the same input. Checked per sampled row: the normwise error
// ||gpu - cpu||_2 / ||cpu||_2 of the logits within
//   FP32 checkpoints: 1e-4 (float GEMMs with TF32 off and float attention
//                     sums against OpenBLAS and double sums),
//   FP16: 2e-2, BF16: 6e-2 (the GPU keeps every activation and the KV cache
//                     in the checkpoint's type, the CPU computes in FP32
//                     from the same weights; tests/gpu/llm_lowp_emulate.py,
//                     a numpy model of that rounding, measures 2.5e-3 and
//                     2.5e-2 on these fixtures),
// greedy on the device (eng_llm_cuda_step_ids, every sampling item greedy
// or every other one: greedy graphs, mixed steps outside graphs) giving
// each greedy item the argmax of that runner's own logits row exactly,
// and, for FP32 checkpoints, the greedy token equal wherever the CPU's top
// two logits are more than 1e-3 apart; sampling on the device (every
// sampling item drawn, or every other one beside greedy ones: id graphs)
// drawing k_sample_rows_ref's token on that runner's own logits row
// exactly, and eng_llm_sample's there. Two GPU runners take every step: one
// plain, one with CUDA graphs for its decode-only steps (buckets 1, 2, 4:
// the three-sequence decode steps replay bucket 4's graph with a padding
// item, a last one-sequence step captures bucket 1's), held to the same
// bounds, with their captures and launches counted; the graph runner
// borrows the plain one's weights (eng_llm_cuda_runner_create_shared) and
// runs every decode step of up to 8 tokens on the fused GEMV
// (eng_llm_cuda_runner_set_gemv, _set_decode_fusion: the norms and SwiGLU
// inside the GEMVs, dependent launches), where the plain one keeps the
// defaults (one token fused, cuBLASLt from two). Then a 300-token
// sequence (Llama-family fixtures) whose last chunk and decode steps run
// split-K attention on the GPU (the emulation measures 2.6e-2 there on the
// BF16 fixture). Also the GPU runner's refusals (a
// token outside the vocabulary, a block outside the pool, as the CPU
// runner's) and the stored-type loader (eng_llm_model_create_stored): the
// FP16 and BF16 checkpoints keep their type at half the FP32 bytes. The
// loader checks run without a GPU; the rest skips (exit 77) there.
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "check.h"
#include "engine/llm/cuda/llm_cuda.h"
#include "engine/llm/llm_internal.h"
#include "engine/llm/llm_model.h"
#include "engine/llm/llm_step.h"
#include "kernels/k_ref.h"
#include "kernels/sample/k_sample.h"

#define MAX_CKPT 16
#define NSEQ 3
#define DECODE_STEPS 8
#define BLOCKS 48
#define BLOCK_TOKENS 4

static char names[MAX_CKPT][256];
static int n_names;

static void list_ckpts(const char *root) {
  DIR *d = opendir(root);
  if (!d) return;
  struct dirent *de;
  while ((de = readdir(d)) && n_names < MAX_CKPT) {
    if (de->d_name[0] == '.') continue;
    char p[1024];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s/config.json", root, de->d_name);
    if (stat(p, &st) == 0) snprintf(names[n_names++], sizeof names[0], "%s", de->d_name);
  }
  closedir(d);
}

static const char *dt_name(dtype t) {
  return t == DT_FP32 ? "FP32" : t == DT_FP16 ? "FP16" : t == DT_BF16 ? "BF16" : "?";
}

// n stored elements of dt widened equal the FP32 model's (the fixtures store
// every tensor in one type, so the FP32 load converted exactly).
static void same_values(const char *name, const char *what, const float *f, const void *s, size_t n, dtype dt) {
  if (!f && !s) return;
  if (!f || !s) {
    CHECK_FAIL_("%s: %s present in one load only", name, what);
    return;
  }
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    float v;
    if (dt == DT_FP32) {
      v = ((const float *)s)[i];
    } else if (dt == DT_FP16) {
      k_f16_to_f32(&v, (const uint16_t *)s + i, 1);
    } else {
      uint32_t u = (uint32_t)((const uint16_t *)s)[i] << 16;
      memcpy(&v, &u, 4);
    }
    bad += memcmp(&v, &f[i], 4) != 0;
  }
  check_count_++;
  if (bad) CHECK_FAIL_("%s: %s: %zu of %zu stored values differ from the FP32 load", name, what, bad, n);
}

// Every weight of the stored load against the FP32 load (GPT-2's Conv1D
// transposes included).
static void compare_loads(const char *name, const eng_llm_model *f, const eng_llm_model *s) {
  const eng_llm_config *g = &f->cfg;
  dtype dt = s->wdt;
  size_t H = (size_t)g->hidden, FF = (size_t)g->intermediate, d = (size_t)g->head_dim;
  size_t Q = (size_t)g->n_heads * d, KV = (size_t)g->n_kv_heads * d, NQKV = Q + 2 * KV;
  size_t up = g->gated_mlp ? 2 * FF : FF;
  same_values(name, "embed", f->embed, s->embed, (size_t)g->vocab * H, dt);
  same_values(name, "pos_embed", f->pos_embed, s->pos_embed, (size_t)g->max_pos * H, dt);
  same_values(name, "norm_w", f->norm_w, s->norm_w, H, dt);
  same_values(name, "norm_b", f->norm_b, s->norm_b, H, dt);
  same_values(name, "lm_head", f->lm_head, s->lm_head, (size_t)g->vocab * H, dt);
  CHECK_EQ_INT(f->lm_head == f->embed, s->lm_head == s->embed);
  for (int64_t i = 0; i < g->n_layers; i++) {
    const eng_llm_layer *a = &f->layers[i], *b = &s->layers[i];
    same_values(name, "ln1_w", a->ln1_w, b->ln1_w, H, dt);
    same_values(name, "ln1_b", a->ln1_b, b->ln1_b, H, dt);
    same_values(name, "wqkv", a->wqkv, b->wqkv, NQKV * H, dt);
    same_values(name, "bqkv", a->bqkv, b->bqkv, NQKV, dt);
    same_values(name, "wo", a->wo, b->wo, H * Q, dt);
    same_values(name, "bo", a->bo, b->bo, H, dt);
    same_values(name, "ln2_w", a->ln2_w, b->ln2_w, H, dt);
    same_values(name, "ln2_b", a->ln2_b, b->ln2_b, H, dt);
    same_values(name, "w_up", a->w_up, b->w_up, up * H, dt);
    same_values(name, "b_up", a->b_up, b->b_up, up, dt);
    same_values(name, "w_down", a->w_down, b->w_down, H * FF, dt);
    same_values(name, "b_down", a->b_down, b->b_down, H, dt);
  }
}

// The stored-type loader, host only: the 16-bit checkpoints keep their type
// and their values.
static void test_stored(const char *dir, const char *name) {
  err e = {0};
  eng_llm_model *f = NULL, *s = NULL;
  CHECK_EQ_INT(eng_llm_model_create(dir, &f, &e), 0);
  CHECK_EQ_INT(eng_llm_model_create_stored(dir, &s, &e), 0);
  if (!f || !s) {
    fprintf(stderr, "%s: %s\n", name, e.msg);
    goto out;
  }
  CHECK_EQ_INT(eng_llm_model_dtype(f), DT_FP32);
  dtype want = strstr(name, "bf16") ? DT_BF16 : strstr(name, "f16") ? DT_FP16 : DT_FP32;
  CHECK_EQ_STR(dt_name(eng_llm_model_dtype(s)), dt_name(want));
  compare_loads(name, f, s);
  if (want != DT_FP32) {
    // the inv_freq table stays FP32 in both: half the rest
    size_t fb = eng_llm_model_weight_bytes(f), sb = eng_llm_model_weight_bytes(s);
    CHECK(sb * 2 >= fb - 4096 && sb * 2 <= fb);
    // the CPU step takes FP32 models only
    eng_llm_runner *r = NULL;
    eng_llm_runner_config rc = {.n_blocks = 4, .block_tokens = 4, .max_step_tokens = 4, .max_context = 16};
    CHECK_EQ_INT(eng_llm_runner_create(s, &rc, &r, &e), ERR_INVALID_ARGUMENT);
    CHECK_CONTAINS(e.msg, "FP32");
  }
out:
  eng_llm_model_destroy(f);
  eng_llm_model_destroy(s);
}

static int argmax(const float *x, int64_t n, float *gap) {
  int best = 0;
  for (int64_t i = 1; i < n; i++)
    if (x[i] > x[best]) best = (int)i;
  float second = -INFINITY;
  for (int64_t i = 0; i < n; i++)
    if (i != best && x[i] > second) second = x[i];
  *gap = x[best] - second;
  return best;
}

typedef struct seq {
  int32_t tokens[64];
  int64_t len, done;  // tokens known, tokens whose KV is computed
  int32_t table[16];
} seq;

typedef struct stats {
  double worst;
  int rows, argmax_same, argmax_checked;
  int greedy_ids;   // ids from eng_llm_cuda_step_ids checked against the logits path's argmax
  int sampled_ids;  // drawn on the device (mode 2, 3), checked against k_sample_rows_ref on its logits
  int host_same;    // of those, equal to eng_llm_sample's draw on the same logits
} stats;

// Greedy on the device (issue 35): the step again on runner gr through eng_llm_cuda_step_ids, every
// sampling item greedy when mode 0 (a decode-only step replays a greedy graph on the graph runner),
// every other one when mode 1 (mixed: outside graphs). Sampling on the device (issue 35 item 5):
// every sampling item drawn on the device when mode 2, every other one greedy and the rest drawn when
// mode 3 (both all id rows: the id graph on the graph runner); a drawn id must be k_sample_rows_ref's
// on that runner's logits row exactly, and is counted when eng_llm_sample draws the same there. Each greedy item's id
// must be the argmax (k_argmax_rows_ref) of that runner's logits row from the logits path (lg: its rows, item order),
// the others' rows must come back as before, in item order. Rerunning a step rewrites the same KV.
static int greedy_rerun(eng_llm_cuda_runner *gr, const eng_llm_work *w0, size_t n, int64_t V, const float *lg, int mode,
                        stats *st, const char *name, int kg) {
  eng_llm_work w[16];
  int32_t ids[16];
  eng_llm_sampling sp[16];
  float *out = calloc(n * (size_t)V, sizeof(float));
  for (size_t i = 0, s = 0; i < n; i++) {
    w[i] = w0[i];
    w[i].greedy = w[i].logits && (mode == 0 || ((mode == 1 || mode == 3) && s % 2 == 0));
    if (mode >= 2 && w[i].logits && !w[i].greedy) {
      sp[i] = eng_llm_sampling_greedy();
      sp[i].temperature = 0.9f;
      sp[i].top_p = 0.9f;
      sp[i].top_k = i % 2 ? 40 : 0;
      sp[i].min_p = i % 3 == 0 ? 0.02f : 0;
      sp[i].repetition_penalty = i % 2 ? 1.2f : 1;
      w[i].sampling = &sp[i];
      w[i].seen = w[i].tokens;
      w[i].n_seen = w[i].n_tokens;
      w[i].u = eng_llm_uniform(1234 + i, (uint64_t)mode);
    }
    s += w[i].logits != 0;
    ids[i] = -9;
  }
  err e = {0};
  int rc = eng_llm_cuda_step_ids(gr, w, n, out, ids, &e);
  CHECK_EQ_INT(rc, 0);
  if (rc) fprintf(stderr, "%s: gpu step_ids (runner %d, mode %d): %s\n", name, kg, mode, e.msg);
  for (size_t i = 0, row = 0, back = 0; i < n && !rc; i++) {
    if (!w[i].logits) {
      CHECK_EQ_INT(ids[i], -9);
      continue;
    }
    const float *ref = lg + row++ * (size_t)V;
    if (w[i].sampling) {
      const eng_llm_sampling *q = w[i].sampling;
      k_sample_param kp = {.mode = 1,
                           .top_k = q->top_k,
                           .temperature = q->temperature,
                           .top_p = q->top_p,
                           .min_p = q->min_p,
                           .repetition_penalty = q->repetition_penalty,
                           .n_seen = w[i].n_seen,
                           .u = w[i].u};
      float *scr = malloc(2 * (size_t)V * sizeof(float));
      int32_t want = -1;
      CHECK_EQ_INT(k_sample_rows_ref(&want, ref, DT_FP32, 1, (size_t)V, &kp, w[i].seen, scr), 0);
      free(scr);
      if (ids[i] != want)
        CHECK_FAIL_("%s: runner %d mode %d item %zu: drew %d on the device, k_sample_rows_ref %d on its logits", name,
                    kg, mode, i, ids[i], want);
      check_count_++;
      st->sampled_ids++;
      eng_llm_sampler *hs = eng_llm_sampler_create(V);
      // eng_llm_sample's counter-th draw is eng_llm_uniform(seed, counter): the same u
      eng_llm_sampling hq = *q;
      hq.seed = 1234 + i;
      st->host_same += hs && eng_llm_sample(hs, ref, &hq, w[i].seen, w[i].n_seen, (uint64_t)mode) == ids[i];
      eng_llm_sampler_destroy(hs);
    } else if (w[i].greedy) {
      int32_t want;
      k_argmax_rows_ref(&want, ref, 1, (size_t)V);
      float gap;
      (void)argmax(ref, V, &gap);
      if (ids[i] != want)
        CHECK_FAIL_("%s: runner %d mode %d item %zu: greedy id %d on the device, %d from its logits (top-2 gap %g)",
                    name, kg, mode, i, ids[i], want, (double)gap);
      check_count_++;
      st->greedy_ids++;
    } else {
      const float *got = out + back++ * (size_t)V;
      double num = 0, den = 0;
      for (int64_t k = 0; k < V; k++) {
        double d = (double)got[k] - ref[k];
        num += d * d, den += (double)ref[k] * ref[k];
      }
      if (!(sqrt(num / (den > 0 ? den : 1)) <= 1e-6))
        CHECK_FAIL_("%s: runner %d mode %d item %zu: its logits row moved in a mixed step", name, kg, mode, i);
      check_count_++;
    }
  }
  free(out);
  return rc;
}

// Runs n items on both runners and compares the sampled rows; each sampling
// item's sequence gets the CPU's greedy token.
#define NGPU 2

static int both(eng_llm_runner *cr, eng_llm_cuda_runner **grs, seq *s, const eng_llm_work *w, const int *which,
                size_t n, int64_t V, dtype dt, stats *st, const char *name) {
  float *lc = calloc(n * (size_t)V, sizeof(float)), *lgs = calloc(NGPU * n * (size_t)V, sizeof(float));
  err e = {0};
  int rc = eng_llm_step(cr, w, n, lc, &e);
  CHECK_EQ_INT(rc, 0);
  if (rc) fprintf(stderr, "%s: cpu step: %s\n", name, e.msg);
  int rg = 0;
  for (int k = 0; k < NGPU && !rg; k++) {
    rg = eng_llm_cuda_step(grs[k], w, n, lgs + (size_t)k * n * (size_t)V, &e);
    CHECK_EQ_INT(rg, 0);
    if (rg) fprintf(stderr, "%s: gpu step (runner %d): %s\n", name, k, e.msg);
  }
  for (int k = 0; k < NGPU && !rg && n <= 16; k++)
    for (int mode = 0; mode < 4 && !rg; mode++)
      rg = greedy_rerun(grs[k], w, n, V, lgs + (size_t)k * n * (size_t)V, mode, st, name, k);
  double bound = dt == DT_FP32 ? 1e-4 : dt == DT_FP16 ? 2e-2 : 6e-2;
  size_t row = 0;
  for (size_t i = 0; i < n && !rc && !rg; i++) {
    seq *q = &s[which[i]];
    q->done = w[i].start + w[i].n_tokens;
    if (!w[i].logits) continue;
    const float *c = lc + row * (size_t)V;
    float gap;
    int tc = argmax(c, V, &gap);
    for (int kg = 0; kg < NGPU; kg++) {
      const float *g = lgs + ((size_t)kg * n + row) * (size_t)V;
      double num = 0, den = 0;
      for (int64_t k = 0; k < V; k++) {
        double dlt = (double)g[k] - c[k];
        num += dlt * dlt;
        den += (double)c[k] * c[k];
      }
      double rel = sqrt(num / (den > 0 ? den : 1));
      if (!(rel <= bound))
        CHECK_FAIL_("%s: runner %d seq %d position %lld: logits normwise error %.3g > %.3g", name, kg, which[i],
                    (long long)(q->done - 1), rel, bound);
      check_count_++;
      if (rel > st->worst || isnan(rel)) st->worst = rel;
      st->rows++;
      float gap_g;
      int tg = argmax(g, V, &gap_g);
      st->argmax_same += tc == tg;
      if (dt == DT_FP32 && gap > 1e-3f) {
        st->argmax_checked++;
        if (tc != tg)
          CHECK_FAIL_("%s: runner %d seq %d: greedy token %d on the GPU, %d on the CPU", name, kg, which[i], tg, tc);
        check_count_++;
      }
    }
    row++;
    q->tokens[q->len++] = tc;
  }
  free(lc);
  free(lgs);
  return rc || rg;
}

static void test_ckpt(const char *dir, const char *name) {
  err e = {0};
  eng_llm_model *f = NULL, *s = NULL;
  eng_llm_runner *cr = NULL;
  eng_llm_cuda_runner *grs[NGPU] = {NULL}, *gr = NULL;
  if (eng_llm_model_create(dir, &f, &e) || eng_llm_model_create_stored(dir, &s, &e)) {
    CHECK_FAIL_("%s: load: %s", name, e.msg);
    goto out;
  }
  const eng_llm_config *g = eng_llm_model_config(f);
  dtype dt = eng_llm_model_dtype(s);
  eng_llm_runner_config rc = {
      .n_blocks = BLOCKS, .block_tokens = BLOCK_TOKENS, .max_step_tokens = 16, .max_context = 48};
  CHECK_EQ_INT(eng_llm_runner_create(f, &rc, &cr, &e), 0);
  for (int k = 0; k < NGPU; k++) {
    // the graph runner computes with the plain one's weights (shared, not copied)
    int rg = k ? eng_llm_cuda_runner_create_shared(grs[0], &rc, &grs[k], &e)
               : eng_llm_cuda_runner_create(s, &rc, 0, &grs[k], &e);
    CHECK_EQ_INT(rg, 0);
    if (rg) {
      fprintf(stderr, "%s: runner: %s\n", name, e.msg);
      goto out;
    }
  }
  gr = grs[0];
  if (!cr) goto out;
  CHECK_EQ_INT(eng_llm_cuda_runner_enable_graphs(grs[1], 4, &e), 0);
  CHECK_EQ_INT(eng_llm_cuda_runner_enable_graphs(grs[1], 4, &e), ERR_FAILED_PRECONDITION);
  // the plain runner keeps the defaults (the fused GEMV at one token, cuBLASLt from two); the graph
  // runner's decode steps of up to 8 tokens all run on the GEMV with the norms and SwiGLU inside and the
  // GEMVs launched as dependents (captured in its graphs): the same bounds against the CPU
  eng_llm_cuda_runner_set_gemv(grs[1], 8);
  eng_llm_cuda_runner_set_decode_fusion(grs[1], 1, 1);
  CHECK_EQ_INT(eng_llm_cuda_runner_kv_bytes(gr) * 4, eng_llm_runner_kv_bytes(cr) * dtype_size(dt));
  // three sequences, their blocks scattered over the pool (a fixed shuffle)
  seq sq[NSEQ];
  memset(sq, 0, sizeof sq);
  int perm[BLOCKS];
  for (int i = 0; i < BLOCKS; i++) perm[i] = i;
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (int i = BLOCKS - 1; i > 0; i--) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    int j = (int)(x % (uint64_t)(i + 1)), t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
  const int64_t plen[NSEQ] = {11, 5, 3};
  for (int i = 0; i < NSEQ; i++) {
    for (int b = 0; b < 16; b++) sq[i].table[b] = perm[i * 16 + b];
    for (int64_t t = 0; t < plen[i]; t++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      sq[i].tokens[t] = (int32_t)(x % (uint64_t)g->vocab);
    }
    sq[i].len = plen[i];
  }
  stats st = {0};
  int fail = 0;
  // step A: seq 0's first chunk (no logits), seq 1's whole prompt
  {
    eng_llm_work w[2] = {
        {.tokens = sq[0].tokens, .start = 0, .n_tokens = 6, .block_table = sq[0].table, .n_blocks = 16, .logits = 0},
        {.tokens = sq[1].tokens, .start = 0, .n_tokens = 5, .block_table = sq[1].table, .n_blocks = 16, .logits = 1}};
    int which[2] = {0, 1};
    fail |= both(cr, grs, sq, w, which, 2, g->vocab, dt, &st, name);
  }
  // step B: seq 0's last chunk, seq 1's first decode token, seq 2's prompt
  if (!fail) {
    eng_llm_work w[3] = {
        {.tokens = sq[0].tokens + 6,
         .start = 6,
         .n_tokens = 5,
         .block_table = sq[0].table,
         .n_blocks = 16,
         .logits = 1},
        {.tokens = sq[1].tokens + 5,
         .start = 5,
         .n_tokens = 1,
         .block_table = sq[1].table,
         .n_blocks = 16,
         .logits = 1},
        {.tokens = sq[2].tokens, .start = 0, .n_tokens = 3, .block_table = sq[2].table, .n_blocks = 16, .logits = 1}};
    int which[3] = {0, 1, 2};
    fail |= both(cr, grs, sq, w, which, 3, g->vocab, dt, &st, name);
  }
  // decode steps, the sequences in another order than their creation
  for (int k = 0; k < DECODE_STEPS && !fail; k++) {
    eng_llm_work w[NSEQ];
    int which[NSEQ] = {2, 0, 1};
    for (int i = 0; i < NSEQ; i++) {
      seq *q = &sq[which[i]];
      w[i] = (eng_llm_work){.tokens = q->tokens + q->done,
                            .start = q->done,
                            .n_tokens = q->len - q->done,
                            .block_table = q->table,
                            .n_blocks = 16,
                            .logits = 1};
    }
    fail |= both(cr, grs, sq, w, which, NSEQ, g->vocab, dt, &st, name);
  }
  // one sequence alone: bucket 1
  if (!fail) {
    seq *q = &sq[1];
    eng_llm_work w = {.tokens = q->tokens + q->done,
                      .start = q->done,
                      .n_tokens = q->len - q->done,
                      .block_table = q->table,
                      .n_blocks = 16,
                      .logits = 1};
    int which = 1;
    fail |= both(cr, grs, sq, &w, &which, 1, g->vocab, dt, &st, name);
  }
  eng_llm_cuda_graph_stats gs;
  eng_llm_cuda_runner_graph_stats(grs[1], &gs);
  if (!fail) {
    // and the greedy graphs of the same buckets: each decode step replays bucket 4's once more (its
    // mixed rerun runs outside graphs), the one-sequence step bucket 1's twice (one item: greedy both times)
    // and modes 2 and 3 (all id rows) replay the id graphs once more each per step
    CHECK_EQ_INT(gs.captures, 4);
    CHECK_EQ_INT(gs.launches, 4 * DECODE_STEPS + 5);
  }
  eng_llm_cuda_runner_graph_stats(grs[0], &gs);
  CHECK_EQ_INT(gs.launches, 0);
  printf(
      "%-18s %s: %d rows, worst normwise logit error %.3g, greedy tokens equal in %d (checked %d), %d greedy ids "
      "on the device equal to the logits path's argmax, %d drawn on the device equal to k_sample_rows_ref's "
      "(%d also eng_llm_sample's)\n",
      name, dt_name(dt), st.rows, st.worst, st.argmax_same, st.argmax_checked, st.greedy_ids, st.sampled_ids,
      st.host_same);
  CHECK(st.sampled_ids > 0);
  CHECK(st.host_same == st.sampled_ids);
  // refusals, as the CPU runner's
  float lg[512 * 2];
  int32_t bad_tok = (int32_t)g->vocab, bad_table[2] = {0, BLOCKS};
  eng_llm_work w1 = {
      .tokens = &bad_tok, .start = 0, .n_tokens = 1, .block_table = sq[0].table, .n_blocks = 16, .logits = 1};
  if ((size_t)g->vocab <= 512) {
    CHECK_EQ_INT(eng_llm_cuda_step(gr, &w1, 1, lg, &e), ERR_INVALID_ARGUMENT);
    CHECK_CONTAINS(e.msg, "vocabulary");
    eng_llm_work w2 = {
        .tokens = sq[0].tokens, .start = 0, .n_tokens = 6, .block_table = bad_table, .n_blocks = 2, .logits = 1};
    CHECK_EQ_INT(eng_llm_cuda_step(gr, &w2, 1, lg, &e), ERR_INVALID_ARGUMENT);
    CHECK_CONTAINS(e.msg, "outside the pool");
  }
out:
  for (int k = NGPU - 1; k >= 0; k--) eng_llm_cuda_runner_destroy(grs[k]);  // the sharer last
  eng_llm_runner_destroy(cr);
  eng_llm_model_destroy(f);
  eng_llm_model_destroy(s);
}

// One sequence of 300 tokens prefilled in 16-token chunks, then 4 decode
// steps: the GPU runner's decode steps take split-K attention (one token, a
// context of 300 keys), within the sliding window on Mistral (splits past
// the window empty). Logits against the CPU runner's as in test_ckpt.
static void test_long(const char *dir, const char *name) {
  err e = {0};
  eng_llm_model *f = NULL, *s = NULL;
  eng_llm_runner *cr = NULL;
  eng_llm_cuda_runner *grs[NGPU] = {NULL};
  if (eng_llm_model_create(dir, &f, &e) || eng_llm_model_create_stored(dir, &s, &e)) {
    CHECK_FAIL_("%s: load: %s", name, e.msg);
    goto out;
  }
  const eng_llm_config *g = eng_llm_model_config(f);
  if (g->learned_pos) goto out;  // GPT-2: 64 positions
  dtype dt = eng_llm_model_dtype(s);
  eng_llm_runner_config rc = {.n_blocks = 32, .block_tokens = 16, .max_step_tokens = 16, .max_context = 320};
  CHECK_EQ_INT(eng_llm_runner_create(f, &rc, &cr, &e), 0);
  for (int k = 0; k < NGPU; k++) CHECK_EQ_INT(eng_llm_cuda_runner_create(s, &rc, 0, &grs[k], &e), 0);
  if (!cr || !grs[0] || !grs[1]) goto out;
  CHECK_EQ_INT(eng_llm_cuda_runner_enable_graphs(grs[1], 1, &e), 0);
  // sq[0].tokens: the last chunk, then the greedy tokens both() appends
  seq sq[1];
  memset(sq, 0, sizeof sq);
  static int32_t toks[320];
  int32_t table[20];  // 20 of the pool's 32 blocks, scattered
  for (int b = 0; b < 20; b++) table[b] = (b * 7 + 3) % 32;
  uint64_t x = 0x51ed270b27c1a4f3ull;
  for (int t = 0; t < 300; t++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    toks[t] = (int32_t)(x % (uint64_t)g->vocab);
  }
  stats st = {0};
  int which = 0, fail = 0;
  float *lg = calloc((size_t)g->vocab, sizeof(float));
  for (int64_t p = 0; p < 300 && !fail; p += 16) {
    int64_t n = 300 - p < 16 ? 300 - p : 16;
    eng_llm_work w = {
        .tokens = toks + p, .start = p, .n_tokens = n, .block_table = table, .n_blocks = 20, .logits = p + n == 300};
    // prefill on all three runners, compared only at the last chunk
    if (p + n < 300) {
      fail |= eng_llm_step(cr, &w, 1, lg, &e) != 0;
      for (int k = 0; k < NGPU; k++) fail |= eng_llm_cuda_step(grs[k], &w, 1, lg, &e) != 0;
      if (fail) CHECK_FAIL_("%s: long prefill: %s", name, e.msg);
    } else {
      memcpy(sq[0].tokens, toks + p, (size_t)n * sizeof(int32_t));
      sq[0].len = n;
      eng_llm_work wc = {
          .tokens = sq[0].tokens, .start = p, .n_tokens = n, .block_table = table, .n_blocks = 20, .logits = 1};
      fail |= both(cr, grs, sq, &wc, &which, 1, g->vocab, dt, &st, name);
    }
  }
  for (int k = 0; k < 4 && !fail; k++) {
    int64_t pos = 300 + k;
    eng_llm_work w = {.tokens = sq[0].tokens + sq[0].len - 1,
                      .start = pos,
                      .n_tokens = 1,
                      .block_table = table,
                      .n_blocks = 20,
                      .logits = 1};
    fail |= both(cr, grs, sq, &w, &which, 1, g->vocab, dt, &st, name);
  }
  free(lg);
  printf("%-18s %s long context: %d rows, worst normwise logit error %.3g\n", name, dt_name(dt), st.rows, st.worst);
out:
  for (int k = NGPU - 1; k >= 0; k--) eng_llm_cuda_runner_destroy(grs[k]);  // the sharer last
  eng_llm_runner_destroy(cr);
  eng_llm_model_destroy(f);
  eng_llm_model_destroy(s);
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 4) {
    fprintf(stderr, "usage: %s CKPT_DIR [[PYTHON] WRITE_CKPTS_PY]\n", argv[0]);
    return 2;
  }
  const char *root = argv[1];
  if (argc >= 3) {  // CMake drops an empty INFERD_PYTHON: python3 then
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' > /dev/null", argc == 4 ? argv[2] : "python3", argv[argc - 1], root);
    int rc = system(cmd);
    if (rc != 0) {
      printf("SKIP: could not write the checkpoints (%s exited %d%s)\n", argv[argc - 1],
             WIFEXITED(rc) ? WEXITSTATUS(rc) : rc, WIFEXITED(rc) && WEXITSTATUS(rc) == 77 ? ": no numpy" : "");
      return 77;
    }
  }
  list_ckpts(root);
  CHECK(n_names >= 7);
  for (int i = 0; i < n_names; i++) {
    char d[1024];
    snprintf(d, sizeof d, "%s/%s", root, names[i]);
    test_stored(d, names[i]);
  }
  printf("host-side loader checks on %d checkpoints: %d of %d failed\n", n_names, check_failures_, check_count_);
  int count = 0;
  cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess || count == 0) {
    printf("SKIP: no CUDA device (%s)\n", rc != cudaSuccess ? cudaGetErrorString(rc) : "0 devices");
    if (check_failures_) {
      fprintf(stderr, "%d of %d host-side checks failed\n", check_failures_, check_count_);
      return 1;
    }
    return 77;
  }
  for (int i = 0; i < n_names; i++) {
    char d[1024];
    snprintf(d, sizeof d, "%s/%s", root, names[i]);
    test_ckpt(d, names[i]);
    test_long(d, names[i]);
  }
  CHECK_DONE();
}
