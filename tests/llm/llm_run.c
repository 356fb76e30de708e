// tests/llm/llm_run.c: inferd-llm-run, the test driver of the decoder
// runtime's CPU slice (issue 35): loads a Hugging Face checkpoint
// (engine/llm/), enqueues every prompt at once in the iteration scheduler
// (batcher/iter.h) over a KV block pool (batcher/kvblocks.h), and runs its
// steps (decode tokens and prefill chunks mixed) through eng_llm_step with
// greedy sampling, stopping at the checkpoint's EOS ids or --max-new.
// Prints JSON: the generated tokens per prompt, optionally the logits of
// every sampled position, and the step counts, for check_llm_greedy.py.
//
//   inferd-llm-run MODEL_DIR PROMPTS_JSON [--max-new N] [--step-tokens B]
//       [--max-seqs S] [--block-tokens K] [--blocks NB] [--max-chunk C]
//       [--prefix-caching] [--logits]
// PROMPTS_JSON: {"prompts": [[ids...], ...]}
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batcher/iter.h"
#include "engine/llm/llm_model.h"
#include "engine/llm/llm_step.h"
#include "kernels/base/rfile.h"

#define MAX_PROMPTS 256

static int64_t fake_clock(void *ctx) {
  return *(int64_t *)ctx;
}

typedef struct opts {
  const char *dir, *prompts;
  int64_t max_new, step_tokens, max_chunk;
  int max_seqs, block_tokens, blocks, prefix_caching, logits;
} opts;

static int usage(void) {
  fprintf(stderr,
          "usage: inferd-llm-run MODEL_DIR PROMPTS_JSON [--max-new N] [--step-tokens B] [--max-seqs S]\n"
          "       [--block-tokens K] [--blocks NB] [--max-chunk C] [--prefix-caching] [--logits]\n");
  return 2;
}

static int parse_args(int argc, char **argv, opts *o) {
  *o = (opts){.max_new = 8, .step_tokens = 16, .max_seqs = 8, .block_tokens = 4, .blocks = 64};
  int pos = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int has = i + 1 < argc;
    if (!strcmp(a, "--prefix-caching"))
      o->prefix_caching = 1;
    else if (!strcmp(a, "--logits"))
      o->logits = 1;
    else if (!strcmp(a, "--max-new") && has)
      o->max_new = atoll(argv[++i]);
    else if (!strcmp(a, "--step-tokens") && has)
      o->step_tokens = atoll(argv[++i]);
    else if (!strcmp(a, "--max-chunk") && has)
      o->max_chunk = atoll(argv[++i]);
    else if (!strcmp(a, "--max-seqs") && has)
      o->max_seqs = atoi(argv[++i]);
    else if (!strcmp(a, "--block-tokens") && has)
      o->block_tokens = atoi(argv[++i]);
    else if (!strcmp(a, "--blocks") && has)
      o->blocks = atoi(argv[++i]);
    else if (a[0] == '-')
      return -1;
    else if (pos == 0)
      o->dir = a, pos++;
    else if (pos == 1)
      o->prompts = a, pos++;
    else
      return -1;
  }
  return pos == 2 && o->max_new > 0 && o->step_tokens > 0 && o->max_seqs > 0 && o->block_tokens > 0 && o->blocks > 0
             ? 0
             : -1;
}

// The prompts file: {"prompts": [[ids], ...]} into prompts[i] (malloc'ed).
static int read_prompts(const char *path, int32_t **prompts, int64_t *lens, int *n, err *e) {
  uint8_t *buf = NULL;
  size_t len = 0;
  TRY(rfile_read_all(path, "prompts file", (size_t)16 << 20, &buf, &len, e));
  cJSON *j = cJSON_ParseWithLength((const char *)buf, len);
  free(buf);
  const cJSON *ps = cJSON_GetObjectItemCaseSensitive(j, "prompts");
  *n = 0;
  if (!cJSON_IsArray(ps)) {
    cJSON_Delete(j);
    return err_set(e, ERR_INVALID_ARGUMENT, "%s: no \"prompts\" array", path);
  }
  for (const cJSON *p = ps->child; p; p = p->next) {
    int k = cJSON_GetArraySize(p);
    if (!cJSON_IsArray(p) || k < 1 || *n == MAX_PROMPTS) {
      cJSON_Delete(j);
      return err_set(e, ERR_INVALID_ARGUMENT, "%s: each prompt is a non-empty array of ids (at most %d prompts)", path,
                     MAX_PROMPTS);
    }
    prompts[*n] = malloc((size_t)k * sizeof(int32_t));
    lens[*n] = k;
    int i = 0;
    for (const cJSON *t = p->child; t; t = t->next) {
      if (!cJSON_IsNumber(t) || !(t->valuedouble >= 0 && t->valuedouble <= INT32_MAX)) {
        free(prompts[*n]);
        cJSON_Delete(j);
        return err_set(e, ERR_INVALID_ARGUMENT, "%s: prompt %d: token ids are integers >= 0", path, *n);
      }
      prompts[*n][i++] = (int32_t)t->valuedouble;
    }
    (*n)++;
  }
  cJSON_Delete(j);
  return 0;
}

static int argmax(const float *x, int64_t n) {
  int best = 0;
  for (int64_t i = 1; i < n; i++)
    if (x[i] > x[best]) best = (int)i;
  return best;
}

int main(int argc, char **argv) {
  opts o;
  if (parse_args(argc, argv, &o)) return usage();
  err e = {0};
  eng_llm_model *m = NULL;
  if (eng_llm_model_create(o.dir, &m, &e)) {
    fprintf(stderr, "inferd-llm-run: %s: %s\n", err_code_name(e.code), e.msg);
    return 1;
  }
  const eng_llm_config *g = eng_llm_model_config(m);
  static int32_t *prompts[MAX_PROMPTS];
  static int64_t lens[MAX_PROMPTS];
  int n = 0;
  if (read_prompts(o.prompts, prompts, lens, &n, &e)) {
    fprintf(stderr, "inferd-llm-run: %s\n", e.msg);
    return 1;
  }
  int64_t max_ctx = 0;
  for (int i = 0; i < n; i++)
    if (lens[i] + o.max_new > max_ctx) max_ctx = lens[i] + o.max_new;
  bat_kv_config kc = {.n_blocks = o.blocks, .block_tokens = o.block_tokens, .prefix_caching = o.prefix_caching};
  bat_kv_pool *pool = NULL;
  bat_iter *s = NULL;
  eng_llm_runner *r = NULL;
  int64_t now = 0;
  bat_iter_config ic = {.max_num_seqs = o.max_seqs,
                        .max_num_batched_tokens = o.step_tokens,
                        .max_model_len = g->learned_pos ? g->max_pos : 0,
                        .max_prefill_chunk = o.max_chunk,
                        .now = fake_clock,
                        .clock_ctx = &now};
  eng_llm_runner_config rc = {
      .n_blocks = o.blocks, .block_tokens = o.block_tokens, .max_step_tokens = o.step_tokens, .max_context = max_ctx};
  if (bat_kv_create(&kc, &pool, &e) || (ic.pool = pool, bat_iter_create(&ic, &s, &e)) ||
      eng_llm_runner_create(m, &rc, &r, &e)) {
    fprintf(stderr, "inferd-llm-run: %s\n", e.msg);
    return 1;
  }
  static bat_iter_seq seqs[MAX_PROMPTS];
  // per prompt: generated tokens and their logits rows
  int32_t *out_tok[MAX_PROMPTS];
  float *out_logits[MAX_PROMPTS];
  int64_t n_out[MAX_PROMPTS];
  for (int i = 0; i < n; i++) {
    seqs[i] = (bat_iter_seq){.prompt = prompts[i],
                             .prompt_len = lens[i],
                             .max_tokens = o.max_new,
                             .deadline_us = INT64_MAX,
                             .payload = (void *)(intptr_t)i};
    out_tok[i] = calloc((size_t)o.max_new, sizeof(int32_t));
    out_logits[i] = o.logits ? calloc((size_t)(o.max_new * g->vocab), sizeof(float)) : NULL;
    n_out[i] = 0;
    if (bat_iter_enqueue(s, &seqs[i], &e)) {
      fprintf(stderr, "inferd-llm-run: prompt %d: %s\n", i, e.msg);
      return 1;
    }
  }
  float *logits = malloc((size_t)(o.step_tokens * g->vocab) * sizeof(float));
  eng_llm_work *work = malloc((size_t)o.step_tokens * sizeof *work);
  int32_t *sampled = malloc((size_t)o.step_tokens * sizeof(int32_t));
  uint8_t *stop = malloc((size_t)o.step_tokens);
  uint64_t steps = 0, mixed = 0, decode_items = 0, prefill_items = 0;
  int finished = 0;
  bat_iter_step st;
  while (finished < n) {
    size_t nw = bat_iter_plan(s, &st);
    if (!nw) {
      fprintf(stderr, "inferd-llm-run: the scheduler planned nothing with %d sequences unfinished\n", n - finished);
      return 1;
    }
    for (size_t k = 0; k < nw; k++) {
      const bat_iter_work *it = &st.work[k];
      work[k] = (eng_llm_work){.tokens = it->seq->tokens + it->start,
                               .start = it->start,
                               .n_tokens = it->n_tokens,
                               .block_table = it->seq->kv.blocks,
                               .n_blocks = it->seq->kv.n_blocks,
                               .logits = it->sample};
    }
    if (eng_llm_step(r, work, nw, logits, &e)) {
      fprintf(stderr, "inferd-llm-run: step %llu: %s\n", (unsigned long long)steps, e.msg);
      return 1;
    }
    steps++;
    decode_items += st.n_decode;
    prefill_items += nw - st.n_decode;
    if (st.n_decode && nw > st.n_decode) mixed++;
    for (size_t k = 0, row = 0; k < nw; k++) {
      const bat_iter_work *it = &st.work[k];
      stop[k] = 0;
      if (!it->sample) continue;
      const float *lg = logits + row++ * g->vocab;
      int tok = argmax(lg, g->vocab);
      int i = (int)(intptr_t)it->seq->payload;
      if (out_logits[i]) memcpy(out_logits[i] + n_out[i] * g->vocab, lg, (size_t)g->vocab * sizeof(float));
      out_tok[i][n_out[i]++] = tok;
      sampled[k] = tok;
      for (int q = 0; q < g->n_eos; q++)
        if (tok == g->eos_ids[q]) stop[k] = 1;
    }
    if (bat_iter_complete(s, sampled, stop, &e)) {
      fprintf(stderr, "inferd-llm-run: %s\n", e.msg);
      return 1;
    }
    for (bat_iter_seq *q = bat_iter_take_finished(s), *nx; q; q = nx) {
      nx = q->next;
      if (q->end == BAT_ITER_END_DROPPED) {
        fprintf(stderr, "inferd-llm-run: a sequence was dropped\n");
        return 1;
      }
      bat_iter_seq_close(q);
      finished++;
    }
    now += 1000;
  }
  bat_iter_stats stats;
  bat_iter_stats_get(s, &stats);
  printf(
      "{\"steps\": %llu, \"mixed_steps\": %llu, \"decode_items\": %llu, \"prefill_items\": %llu, "
      "\"preemptions\": %llu, \"prefix_hit_tokens\": %llu,\n \"tokens\": [",
      (unsigned long long)steps, (unsigned long long)mixed, (unsigned long long)decode_items,
      (unsigned long long)prefill_items, (unsigned long long)stats.preempted_total,
      (unsigned long long)stats.prefix_hit_tokens);
  for (int i = 0; i < n; i++) {
    printf("%s[", i ? ", " : "");
    for (int64_t k = 0; k < n_out[i]; k++) printf("%s%d", k ? ", " : "", out_tok[i][k]);
    printf("]");
  }
  printf("]");
  if (o.logits) {
    printf(",\n \"logits\": [");
    for (int i = 0; i < n; i++) {
      printf("%s[", i ? ",\n  " : "");
      for (int64_t k = 0; k < n_out[i]; k++) {
        printf("%s[", k ? ", " : "");
        for (int64_t v = 0; v < g->vocab; v++) printf("%s%.9g", v ? "," : "", out_logits[i][k * g->vocab + v]);
        printf("]");
      }
      printf("]");
    }
    printf("]");
  }
  printf("}\n");
  for (int i = 0; i < n; i++) {
    free(prompts[i]);
    free(out_tok[i]);
    free(out_logits[i]);
  }
  free(logits);
  free(work);
  free(sampled);
  free(stop);
  eng_llm_runner_destroy(r);
  bat_iter_destroy(s);
  bat_kv_destroy(pool);
  eng_llm_model_destroy(m);
  return 0;
}
