// server/core/llm_serve.c: the generative backend's runners (llm_serve.h).
// Each runner thread owns its scheduler, pool, engine runner, sampler and
// step buffers; the only shared state is its inbox (under its mutex) and
// the atomic counters /metrics reads.
#include "server/core/llm_serve.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <unistd.h>

#include "batcher/iter.h"
#include "engine/llm/chat_template.h"
#include "engine/llm/tokenizer.h"
#include "engine/llm/llm_model.h"
#include "engine/llm/llm_step.h"
#include "engine/model.h"
#include "server/core/llm_engine.h"
#include "server/core/registry.h"
#include "server/obs/log.h"

#define IDLE_LOOK_US 10000  // with sequences held and nothing to step: look again this soon (cancels, deadlines)
#define SRV_LLM_MAX_RUNNERS 64
// A request's generated tokens a second, times 100 (0.01 token/s .. 10 M tokens/s, within 0.39%)
#define TPS_HIST ((prof_hist_config){.max_value = 1000000000, .sub_bucket_bits = 7, .stripes = 4})

// --- one request on a runner

typedef struct llm_req {
  bat_iter_seq seq;      // seq.payload points here
  struct llm_req *next;  // the inbox's link
  srv_llm_sink sink;
  eng_llm_sampling sampling;
  int greedy;  // its tokens are the argmax, picked by the engine (eng_llm_work's greedy; issue 35)
  int engine_sample;  // not greedy, no logits wanted: the engine may draw its tokens (eng_llm_work's sampling)
  int streaming;
  int32_t end_id;
  int32_t *stop;      // flat stop words
  int64_t *stop_end;  // end offset of each word
  int64_t n_stop_words;
  int64_t n_sent;     // generated tokens given to the sink
  int64_t t_last_us;  // when the last token came (TTFT from t_recv, then ITL)
  struct srv_stats *stats;
  int64_t t_recv_us;
  int32_t *prompt;  // the copy seq.prompt points to
} llm_req;

static void req_free(llm_req *q) {
  free(q->prompt);
  free(q->stop);
  free(q->stop_end);
  free(q);
}

// --- a runner

typedef struct runner {
  struct srv_llm *l;
  int idx;
  pthread_t thread;
  int started;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  llm_req *inbox, *inbox_tail;
  int stop;
  _Atomic int64_t held;  // requests submitted and not yet ended (for the choice of runner)
  bat_kv_pool *pool;
  bat_iter *it;
  const srv_llm_engine_ops *ops;
  void *eng;         // the ops' runner
  int device;        // CUDA ordinal; -1 on the CPU
  int32_t n_blocks;  // its KV pool's
  eng_llm_sampler *sampler;
  float *logits;
  eng_llm_work *work;
  int32_t *sampled;
  int32_t *ids;  // the greedy items' tokens, from the engine
  uint8_t *stopped;
  uint64_t seed_next;  // unseeded requests' seeds
  // what /metrics reads (written after every step)
  _Atomic int64_t blocks_used, running, waiting;
  _Atomic uint64_t preemptions, prefix_hits;
} runner;

// The weights uploaded to one device, borrowed by that device's runners.
typedef struct dev_weights {
  int device;
  void *w;  // srv_llm_cuda_weights'
} dev_weights;

struct srv_llm {
  char name[256];
  srv_llm_cfg cfg;
  eng_llm_model *model;  // FP32, for the CPU runners; NULL without any
  eng_llm_config mcfg;
  const eng_llm_config *mc;  // &mcfg
  int64_t max_model_len;
  dtype gpu_dt;  // the GPU runners' element type
  int n_dev;
  dev_weights dev[SRV_LLM_MAX_RUNNERS];
  char where[192];  // where the runners run, for the ready line
  int n;
  runner *r;
  int stopped;
  pthread_mutex_t stop_mu;
  _Atomic uint64_t prompt_tokens, generated_tokens;
  prof_hist *ttft, *itl;
  prof_hist *e2e, *tps;  // per answered request: arrival to answer (us); generated tokens a second (x100)
  eng_tok *tok;                // NULL: no tokenizer.json
  eng_chat_template *chat;     // NULL: no chat template
};

int64_t srv_llm_vocab(const srv_llm *l) {
  return l->mc->vocab;
}
const eng_tok *srv_llm_tokenizer(const srv_llm *l) {
  return l->tok;
}
const eng_chat_template *srv_llm_chat_template(const srv_llm *l) {
  return l->chat;
}
const char *srv_llm_name(const srv_llm *l) {
  return l->name;
}
int64_t srv_llm_max_model_len(const srv_llm *l) {
  return l->max_model_len;
}

// The wall clock in ms (ModelStatistics' last_inference), here rather than registry.c's: the registry
// creates the runners, and a call back into it would close a circle (tests/unit/check_circles.py).
static uint64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

// --- statistics, as the repeat backend counts them: the execution spans arrival to the final answer

static void count_end(llm_req *q, int ok) {
  srv_stats *st = q->stats;
  if (!st) return;
  int64_t now = eng_now_us(), all = now - q->t_recv_us;
  if (ok) {
    atomic_fetch_add(&st->success.count, 1);
    atomic_fetch_add(&st->success.ns, (uint64_t)all * 1000);
    atomic_fetch_add(&st->compute_infer.count, 1);
    atomic_fetch_add(&st->compute_infer.ns, (uint64_t)all * 1000);
    atomic_fetch_add(&st->queue.count, 1);
    atomic_fetch_add(&st->compute_input.count, 1);
    atomic_fetch_add(&st->compute_output.count, 1);
    atomic_fetch_add(&st->inference_count, 1);
    atomic_fetch_add(&st->execution_count, 1);
    atomic_store(&st->last_inference_ms, wall_ms());
    prof_hist_record(st->h_request, all);
    prof_hist_record(st->h_infer, all);
    prof_window_add(&st->win_requests, now, 1.0);
    prof_window_add(&st->win_rows, now, 1.0);
  } else {
    atomic_fetch_add(&st->fail.count, 1);
    atomic_fetch_add(&st->fail.ns, (uint64_t)all * 1000);
    atomic_fetch_add(&st->fail_by_reason[SRV_FAIL_CANCELED], 1);
  }
  atomic_fetch_sub(&st->pending, 1);
}

// --- answers

static void req_finish(runner *rn, llm_req *q) {
  const bat_iter_seq *s = &q->seq;
  int64_t gen0 = s->prompt_len;
  if (s->end == BAT_ITER_END_DROPPED) {
    int code = ERR_CANCELLED;
    const char *msg = "the request was cancelled";
    switch (s->drop_reason) {
      case BAT_DROP_DEADLINE:
        code = ERR_DEADLINE_EXCEEDED, msg = "the request's deadline passed";
        break;
      case BAT_DROP_SHUTDOWN:
        code = ERR_UNAVAILABLE, msg = "the server is shutting down";
        break;
      case BAT_DROP_QUEUE_TIMEOUT:
        code = ERR_UNAVAILABLE, msg = "Request timeout expired";
        break;
      case BAT_DROP_INSTANCE_FAILED:
        code = ERR_INTERNAL, msg = "the model's step failed";
        break;
      default:
        break;
    }
    count_end(q, 0);
    q->sink.emit(q->sink.ctx, NULL, 0, 1, code, msg);
  } else {
    // a stream's tokens not yet sent go with the final flag; a whole answer is every generated token
    int64_t from = q->streaming ? gen0 + q->n_sent : gen0;
    count_end(q, 1);
    int64_t took = eng_now_us() - q->t_recv_us, n_gen = s->n_tokens - gen0;
    prof_hist_record(rn->l->e2e, took);
    // a request's own rate, as its client sees it: tokens over arrival to answer (queue and prefill included)
    if (n_gen > 0 && took > 0) prof_hist_record(rn->l->tps, n_gen * 100 * 1000000 / took);
    q->sink.emit(q->sink.ctx, s->tokens + from, s->n_tokens - from, 1, 0, NULL);
  }
  atomic_fetch_sub(&rn->held, 1);
  bat_iter_seq_close(&q->seq);
  req_free(q);
}

static void take_finished(runner *rn) {
  for (bat_iter_seq *s = bat_iter_take_finished(rn->it), *nx; s; s = nx) {
    nx = s->next;
    req_finish(rn, s->payload);
  }
}

static void publish_stats(runner *rn) {
  bat_iter_stats st;
  bat_iter_stats_get(rn->it, &st);
  atomic_store(&rn->blocks_used, st.blocks_used);
  atomic_store(&rn->running, (int64_t)st.running);
  atomic_store(&rn->waiting, (int64_t)st.waiting);
  atomic_store(&rn->preemptions, st.preempted_total);
  atomic_store(&rn->prefix_hits, st.prefix_hit_tokens);
}

// 1 when the last tokens of s end with one of q's stop words.
static int stop_word_hit(const llm_req *q, const bat_iter_seq *s, int32_t tok) {
  int64_t start = 0;
  for (int64_t w = 0; w < q->n_stop_words; w++) {
    int64_t end = q->stop_end[w], n = end - start;
    const int32_t *word = q->stop + start;
    start = end;
    if (n < 1 || n - 1 > s->n_tokens - s->prompt_len) continue;  // stop words match generated tokens only
    if (word[n - 1] != tok) continue;
    int hit = 1;
    for (int64_t k = 0; k < n - 1 && hit; k++) hit = s->tokens[s->n_tokens - (n - 1) + k] == word[k];
    if (hit) return 1;
  }
  return 0;
}

static int is_end(const srv_llm *l, const llm_req *q, int32_t tok) {
  if (q->end_id >= 0 && tok == q->end_id) return 1;
  for (int i = 0; i < l->mc->n_eos; i++)
    if (tok == l->mc->eos_ids[i]) return 1;
  return 0;
}

// One step: plan, run, sample, complete, answer. 0 when there was nothing to step.
static int step(runner *rn) {
  srv_llm *l = rn->l;
  bat_iter_step st;
  size_t nw = bat_iter_plan(rn->it, &st);
  if (!nw) return 0;
  for (size_t k = 0; k < nw; k++) {
    const bat_iter_work *w = &st.work[k];
    llm_req *q = w->seq->payload;
    int es = w->sample && q->engine_sample;
    // what eng_llm_sample would be given below: the same seen tokens, the same draw of the seeded generator
    rn->work[k] = (eng_llm_work){.tokens = w->seq->tokens + w->start,
                                 .start = w->start,
                                 .n_tokens = w->n_tokens,
                                 .block_table = w->seq->kv.blocks,
                                 .n_blocks = w->seq->kv.n_blocks,
                                 .logits = w->sample,
                                 .greedy = q->greedy,
                                 .sampling = es ? &q->sampling : NULL,
                                 .seen = w->seq->tokens,
                                 .n_seen = w->seq->n_tokens,
                                 .u = es ? eng_llm_uniform(q->sampling.seed, (uint64_t)w->seq->n_generated) : 0};
  }
  err e = {0};
  if (rn->ops->step(rn->eng, rn->work, nw, rn->logits, rn->ids, &e) != 0) {
    // every input was checked at submit: a failure here is the runtime's; the step's sequences end with it
    srv_log(SRV_LOG_ERROR, "model '%s' runner %d: step failed: %s", l->name, rn->idx, e.msg);
    bat_iter_abort(rn->it);
    bat_iter_flush(rn->it);
    for (bat_iter_seq *s = bat_iter_take_finished(rn->it), *nx; s; s = nx) {
      nx = s->next;
      s->drop_reason = BAT_DROP_INSTANCE_FAILED;
      req_finish(rn, s->payload);
    }
    return 1;
  }
  int64_t now = eng_now_us();
  for (size_t k = 0, row = 0; k < nw; k++) {
    const bat_iter_work *w = &st.work[k];
    rn->stopped[k] = 0;
    rn->sampled[k] = 0;
    if (!w->sample) continue;
    llm_req *q = w->seq->payload;
    // a greedy item's token came from the engine, and a sampled one's when the engine drew it (ids >= 0:
    // the GPU runner); the others' logits rows follow in item order
    const float *lg = NULL;
    int32_t tok;
    if (q->greedy || (q->engine_sample && rn->ids[k] >= 0)) {
      tok = rn->ids[k];
    } else {
      lg = rn->logits + (int64_t)row++ * l->mc->vocab;
      tok = eng_llm_sample(rn->sampler, lg, &q->sampling, w->seq->tokens, w->seq->n_tokens,
                           (uint64_t)w->seq->n_generated);
    }
    rn->sampled[k] = tok;
    rn->stopped[k] = (uint8_t)(is_end(l, q, tok) || stop_word_hit(q, w->seq, tok));
    if (q->sink.token && q->sink.token(q->sink.ctx, tok, rn->stopped[k], lg)) rn->stopped[k] = 1;
    prof_hist_record(w->seq->n_generated == 0 ? l->ttft : l->itl,
                     now - (w->seq->n_generated == 0 ? q->t_recv_us : q->t_last_us));
    q->t_last_us = now;
  }
  if (bat_iter_complete(rn->it, rn->sampled, rn->stopped, &e) != 0) {
    srv_log(SRV_LOG_ERROR, "model '%s' runner %d: %s", l->name, rn->idx, e.msg);
    return 1;
  }
  atomic_fetch_add(&l->generated_tokens, st.n_sample);
  // streamed tokens of the sequences still running (the finished ones send theirs with the final flag)
  for (size_t k = 0; k < nw; k++) {
    const bat_iter_work *w = &st.work[k];
    bat_iter_seq *s = w->seq;
    llm_req *q = s->payload;
    if (!w->sample || !q->streaming || s->state == BAT_ITER_DONE) continue;
    int64_t from = s->prompt_len + q->n_sent, n = s->n_tokens - from;
    if (n <= 0 || (q->sink.congested && q->sink.congested(q->sink.ctx))) continue;
    q->sink.emit(q->sink.ctx, s->tokens + from, n, 0, 0, NULL);
    q->n_sent += n;
  }
  take_finished(rn);
  return 1;
}

static int cancelled_cb(void *payload) {
  llm_req *q = payload;
  return q->sink.cancelled && q->sink.cancelled(q->sink.ctx);
}

static int64_t clock_cb(void *ctx) {
  (void)ctx;
  return eng_now_us();
}

static void enqueue_new(runner *rn, llm_req *list) {
  while (list) {
    llm_req *q = list;
    list = q->next;
    err e = {0};
    if (bat_iter_enqueue(rn->it, &q->seq, &e) != 0) {
      // checked at submit against the same numbers; a full queue is the one way left
      count_end(q, 0);
      q->sink.emit(q->sink.ctx, NULL, 0, 1, (int)e.code, e.msg);
      atomic_fetch_sub(&rn->held, 1);
      req_free(q);
      continue;
    }
    atomic_fetch_add(&rn->l->prompt_tokens, (uint64_t)q->seq.prompt_len);
  }
}

static void *runner_main(void *arg) {
  runner *rn = arg;
  for (;;) {
    pthread_mutex_lock(&rn->mu);
    llm_req *list = rn->inbox;
    rn->inbox = rn->inbox_tail = NULL;
    int stop = rn->stop;
    pthread_mutex_unlock(&rn->mu);
    enqueue_new(rn, list);
    if (stop) break;
    int did = step(rn);
    if (!did) take_finished(rn);  // cancelled or expired while nothing stepped
    publish_stats(rn);
    if (did) continue;
    // nothing to step: wait for a request, or look again soon while sequences are held (they may be
    // cancelled, or their deadline pass, with nobody to signal it)
    bat_iter_stats bs;
    bat_iter_stats_get(rn->it, &bs);
    pthread_mutex_lock(&rn->mu);
    if (!rn->inbox && !rn->stop) {
      if (bs.running + bs.waiting == 0) {
        pthread_cond_wait(&rn->cv, &rn->mu);
      } else {
        int64_t now = eng_now_us(), next = bat_iter_next_wakeup(rn->it);
        if (next > now + IDLE_LOOK_US) next = now + IDLE_LOOK_US;
        struct timespec ts = {.tv_sec = next / 1000000, .tv_nsec = (long)(next % 1000000) * 1000};
        pthread_cond_timedwait(&rn->cv, &rn->mu, &ts);
      }
    }
    pthread_mutex_unlock(&rn->mu);
  }
  // shutting down: everything held ends
  bat_iter_flush(rn->it);
  take_finished(rn);
  publish_stats(rn);
  return NULL;
}

// --- create, submit, stop

static void runner_close(runner *rn) {
  if (rn->started) {
    pthread_mutex_destroy(&rn->mu);
    pthread_cond_destroy(&rn->cv);
  }
  bat_iter_destroy(rn->it);
  bat_kv_destroy(rn->pool);
  if (rn->eng) rn->ops->destroy(rn->eng);
  eng_llm_sampler_destroy(rn->sampler);
  free(rn->logits);
  free(rn->work);
  free(rn->sampled);
  free(rn->ids);
  free(rn->stopped);
}

// The runner's scheduler, buffers and thread, its engine (rn->eng, rn->ops, rn->n_blocks) made before.
static int runner_open(srv_llm *l, runner *rn, int idx, err *e) {
  const srv_llm_cfg *c = &l->cfg;
  rn->l = l;
  rn->idx = idx;
  rn->seed_next = (uint64_t)eng_now_us() * 0x9E3779B97F4A7C15ull + (uint64_t)idx;
  bat_kv_config kc = {.n_blocks = rn->n_blocks, .block_tokens = c->block_tokens, .prefix_caching = c->prefix_caching};
  TRY(bat_kv_create(&kc, &rn->pool, e));
  bat_iter_config ic = {.max_num_seqs = c->max_num_seqs,
                        .max_num_batched_tokens = c->max_batched,
                        .max_model_len = l->max_model_len,
                        .max_prefill_chunk = c->max_prefill_chunk,
                        .pool = rn->pool,
                        .now = clock_cb,
                        .cancelled = cancelled_cb};
  TRY(bat_iter_create(&ic, &rn->it, e));
  size_t nb = (size_t)c->max_batched;
  // a step samples once per running sequence at most (one item each): max_num_seqs rows of logits
  size_t rows = (size_t)c->max_num_seqs < nb ? (size_t)c->max_num_seqs : nb;
  rn->sampler = eng_llm_sampler_create(l->mc->vocab);
  rn->logits = malloc(rows * (size_t)l->mc->vocab * sizeof(float));
  rn->work = malloc(nb * sizeof *rn->work);
  rn->sampled = malloc(nb * sizeof *rn->sampled);
  rn->ids = malloc(nb * sizeof *rn->ids);
  rn->stopped = malloc(nb);
  if (!rn->sampler || !rn->logits || !rn->work || !rn->sampled || !rn->ids || !rn->stopped)
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory for runner %d's step buffers", idx);
  pthread_mutex_init(&rn->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&rn->cv, &ca);
  pthread_condattr_destroy(&ca);
  rn->started = 1;  // the mutex and condition exist
  if (pthread_create(&rn->thread, NULL, runner_main, rn) != 0)
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "cannot start runner %d's thread", idx);
  rn->started = 2;  // and its thread runs
  return 0;
}

// The tokenizer and chat template, when the checkpoint has tokenizer.json: the text endpoints' (llm_text.h).
// Both are tried, so a load names every broken file at once.
static int load_text(srv_llm *l, const char *dir, err *e) {
  char path[4096];
  snprintf(path, sizeof path, "%s/tokenizer.json", dir);
  if (access(path, F_OK) != 0) return 0;
  err te = {0}, ce = {0};
  if (eng_tok_create(dir, &l->tok, &te) != 0) err_prefix(&te, "tokenizer: ");
  l->chat = eng_chat_template_load(dir, &ce);
  if (!l->chat && ce.code == ERR_NOT_FOUND) ce = (err){0};  // no template: completions only
  if (!l->chat && ce.code) err_prefix(&ce, "chat template: ");
  if (!te.code && !ce.code) return 0;
  if (te.code && ce.code)
    err_set(e, te.code, "%.1000s; %.1000s", te.msg, ce.msg);
  else
    *e = te.code ? te : ce;
  return e->code;
}

static const char *dt_name(dtype d) {
  return d == DT_FP16 ? "float16" : d == DT_BF16 ? "bfloat16" : "float32";
}

// The model the GPU runners upload: FP32 (dtype float32, or the CPU's model when there is one), else the
// checkpoint's own type, which a dtype other than auto must match (no conversion between 16-bit types yet).
static int load_gpu_model(srv_llm *l, const char *dir, eng_llm_model **out, err *e) {
  *out = NULL;
  if (l->cfg.dtype == DT_FP32) {
    if (l->model) {
      *out = l->model;
      return 0;
    }
    return eng_llm_model_create(dir, out, e);
  }
  TRY(eng_llm_model_create_stored(dir, out, e));
  dtype have = eng_llm_model_dtype(*out);
  if (l->cfg.dtype != SRV_LLM_DTYPE_AUTO && (dtype)l->cfg.dtype != have) {
    eng_llm_model_destroy(*out);
    *out = NULL;
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "parameter dtype is %s but the checkpoint's weights are %s: give auto (the checkpoint's type) or "
                   "float32",
                   dt_name((dtype)l->cfg.dtype), dt_name(have));
  }
  return 0;
}

static int64_t block_bytes_of(const eng_llm_config *mc, int32_t block_tokens, size_t es) {
  return 2 * mc->n_layers * (int64_t)block_tokens * mc->n_kv_heads * mc->head_dim * (int64_t)es;
}

// The GPU runners of one device: the weights uploaded once, then each runner's pool: kv_cache_blocks,
// kv_cache_bytes when given, else gpu_memory_utilization of the memory free after the weights, split
// evenly, less each runner's own scratch (measured on a probe runner of one sequence's pool).
static int open_device(srv_llm *l, const eng_llm_model *gm, int device, runner **rs, int k, int64_t need, err *e) {
  const srv_llm_cfg *c = &l->cfg;
  dev_weights *dw = &l->dev[l->n_dev];
  dw->device = device;
  TRY(srv_llm_cuda_weights(gm, device, c->block_tokens, &dw->w, e));
  l->n_dev++;
  int64_t bb = block_bytes_of(l->mc, c->block_tokens, dtype_size(l->gpu_dt));
  eng_llm_runner_config rc = {.n_blocks = (int32_t)need,
                              .block_tokens = c->block_tokens,
                              .max_step_tokens = c->max_batched,
                              .max_context = l->max_model_len};
  int64_t graphs = c->cuda_graphs ? c->max_num_seqs : 0;
  int64_t nb;
  if (c->kv_blocks) {
    nb = c->kv_blocks;
  } else if (c->kv_bytes_given) {
    nb = c->kv_bytes / bb;
  } else {
    size_t free0, total, free1;
    TRY(srv_llm_cuda_mem(device, &free0, &total, e));
    void *probe = NULL;
    TRY(srv_llm_cuda_create(dw->w, &rc, graphs, c->tc_prefill, &probe, e));
    int mrc = srv_llm_cuda_mem(device, &free1, &total, e);
    srv_llm_cuda_ops.destroy(probe);
    if (mrc) return mrc;
    int64_t used = free0 > free1 ? (int64_t)(free0 - free1) : 0;
    int64_t overhead = used - need * bb;  // scratch, workspaces, metadata, the graphs' logits
    if (overhead < 0) overhead = 0;
    int64_t per = (int64_t)((double)free0 * c->gpu_mem_util) / k - overhead;
    nb = per > 0 ? per / bb : 0;
    if (nb < need)
      return err_set(e, ERR_RESOURCE_EXHAUSTED,
                     "CUDA device %d: %.1f MiB free after the weights; gpu_memory_utilization %.2f over %d runner%s "
                     "(each with %.1f MiB of scratch) leaves %" PRId64
                     " KV blocks of %.2f MiB per runner, and one max_model_len (%" PRId64 ") sequence needs %" PRId64
                     ": lower max_model_len or max_num_batched_tokens, raise gpu_memory_utilization, or use fewer "
                     "instances",
                     device, (double)free0 / 1048576.0, c->gpu_mem_util, k, k == 1 ? "" : "s",
                     (double)overhead / 1048576.0, nb, (double)bb / 1048576.0, l->max_model_len, need);
  }
  if (nb < need)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "the KV pool's %" PRId64 " blocks of %d tokens (%" PRId64
                   " bytes each in %s) cannot hold one max_model_len (%" PRId64 ") sequence, which needs %" PRId64
                   ": raise kv_cache_blocks or kv_cache_bytes, or lower max_model_len",
                   nb, c->block_tokens, bb, dt_name(l->gpu_dt), l->max_model_len, need);
  if (nb > INT32_MAX - 1) nb = INT32_MAX - 1;  // the runner keeps one spare block past the pool
  rc.n_blocks = (int32_t)nb;
  for (int i = 0; i < k; i++) {
    rs[i]->ops = &srv_llm_cuda_ops;
    rs[i]->device = device;
    rs[i]->n_blocks = (int32_t)nb;
    TRY(srv_llm_cuda_create(dw->w, &rc, graphs, c->tc_prefill, &rs[i]->eng, e));
  }
  srv_log(SRV_LOG_INFO,
          "model '%s': CUDA device %d holds %.1f MiB of %s weights and %d runner%s with %" PRId64
          " KV blocks (%.1f MiB) each%s%s",
          l->name, device, (double)srv_llm_cuda_weight_bytes(dw->w) / 1048576.0, dt_name(l->gpu_dt), k,
          k == 1 ? "" : "s", nb, (double)(nb * bb) / 1048576.0, graphs ? ", CUDA graphs for decode steps" : "",
          c->tc_prefill ? ", tensor-core prefill attention" : "");
  return 0;
}

int srv_llm_create(const srv_llm_cfg *cfg, const char *dir, const char *model_name, int n_gpus, srv_llm **out,
                   err *e) {
  *out = NULL;
  int dev[SRV_LLM_MAX_RUNNERS], n_run = 0;
  TRY(srv_llm_cfg_place(cfg, n_gpus, srv_llm_cuda_built(), dev, SRV_LLM_MAX_RUNNERS, &n_run, e));
  int n_cpu = 0;
  for (int i = 0; i < n_run; i++) n_cpu += dev[i] < 0;
  srv_llm *l = calloc(1, sizeof *l);
  if (!l) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  snprintf(l->name, sizeof l->name, "%s", model_name);
  l->cfg = *cfg;
  pthread_mutex_init(&l->stop_mu, NULL);
  err te = {0};
  int trc = load_text(l, dir, &te);  // tried whatever the weights say: every reason at once
  eng_llm_model *gm = NULL;  // the GPU runners' model until uploaded
  int rc = n_cpu ? eng_llm_model_create(dir, &l->model, e) : 0;
  if (!rc && n_cpu < n_run) rc = load_gpu_model(l, dir, &gm, e);
  if (rc || trc) {
    if (rc && trc)
      err_prefix(e, "%.1000s; ", te.msg);
    else if (trc)
      *e = te;
    eng_llm_model_destroy(gm == l->model ? NULL : gm);
    srv_llm_destroy(l);
    return e->code;
  }
  l->mcfg = *eng_llm_model_config(l->model ? l->model : gm);
  l->mc = &l->mcfg;
  l->gpu_dt = gm ? eng_llm_model_dtype(gm) : DT_FP32;
  const eng_llm_config *mc = l->mc;
  int64_t mml = cfg->max_model_len;
  if (!mml) mml = mc->max_pos > 0 ? (mc->max_pos < 8192 ? mc->max_pos : 8192) : 8192;
  char buf[sizeof e->msg];
  size_t len = 0;
  buf[0] = 0;
#define WHY(...)                                                                                       \
  (len += (size_t)snprintf(buf + len, len < sizeof buf ? sizeof buf - len : 0, "%s", len ? "; " : ""), \
   len += (size_t)snprintf(buf + len, len < sizeof buf ? sizeof buf - len : 0, __VA_ARGS__))
  if (mc->learned_pos && mml > mc->max_pos)
    WHY("max_model_len %" PRId64 " is past the checkpoint's %" PRId64 " learned positions (n_positions)", mml,
        mc->max_pos);
  l->max_model_len = mml;
  if (l->tok && eng_tok_vocab_size(l->tok) > mc->vocab)
    WHY("tokenizer: its %d ids go past the model's vocabulary of %" PRId64
        " (config.json vocab_size): tokenizer.json belongs to another model",
        eng_tok_vocab_size(l->tok), mc->vocab);
  int64_t need = (mml + cfg->block_tokens - 1) / cfg->block_tokens;
  // the CPU pool: blocks given, or what kv_cache_bytes holds (K and V, every layer, kv heads x head_dim floats)
  int64_t block_bytes = block_bytes_of(mc, cfg->block_tokens, sizeof(float));
  int64_t nb = cfg->kv_blocks ? cfg->kv_blocks : cfg->kv_bytes / (block_bytes > 0 ? block_bytes : 1);
  if (nb > INT32_MAX) nb = INT32_MAX;
  if (n_cpu && nb < need)
    WHY("the KV pool's %" PRId64 " blocks of %d tokens (%" PRId64
        " bytes each) cannot hold one max_model_len "
        "(%" PRId64 ") sequence, which needs %" PRId64
        ": raise kv_cache_blocks or kv_cache_bytes, or lower "
        "max_model_len",
        nb, cfg->block_tokens, block_bytes, mml, need);
  if (cfg->max_prefill_chunk > cfg->max_batched)
    WHY("max_prefill_chunk %" PRId64 " is above max_num_batched_tokens %" PRId64, cfg->max_prefill_chunk,
        cfg->max_batched);
#undef WHY
  if (len) {
    eng_llm_model_destroy(gm == l->model ? NULL : gm);
    srv_llm_destroy(l);
    return err_set(e, ERR_INVALID_ARGUMENT, "%s", buf);
  }
  if (prof_hist_create(&PROF_HIST_LATENCY_US, &l->ttft, e) || prof_hist_create(&PROF_HIST_LATENCY_US, &l->itl, e) ||
      prof_hist_create(&PROF_HIST_LATENCY_US, &l->e2e, e) || prof_hist_create(&TPS_HIST, &l->tps, e)) {
    eng_llm_model_destroy(gm == l->model ? NULL : gm);
    srv_llm_destroy(l);
    return e->code;
  }
  l->r = calloc((size_t)n_run, sizeof *l->r);
  if (!l->r) {
    eng_llm_model_destroy(gm == l->model ? NULL : gm);
    srv_llm_destroy(l);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  l->n = n_run;  // runner_close is safe on every zeroed runner
  // the engines: CPU runners on the FP32 model, GPU runners device by device (weights once per device)
  eng_llm_runner_config crc = {.n_blocks = (int32_t)nb,
                               .block_tokens = cfg->block_tokens,
                               .max_step_tokens = cfg->max_batched,
                               .max_context = mml};
  rc = 0;
  for (int i = 0; i < n_run && !rc; i++) {
    runner *rn = &l->r[i];
    rn->device = dev[i];
    if (dev[i] >= 0) continue;
    rn->ops = &srv_llm_cpu_ops;
    rn->n_blocks = (int32_t)nb;
    rc = srv_llm_cpu_create(l->model, &crc, &rn->eng, e);
  }
  for (int i = 0; i < n_run && !rc; i++) {
    if (dev[i] < 0) continue;
    int seen = 0;
    for (int j = 0; j < i; j++) seen |= dev[j] == dev[i];
    if (seen) continue;
    runner *rs[SRV_LLM_MAX_RUNNERS];
    int k = 0;
    for (int j = i; j < n_run; j++)
      if (dev[j] == dev[i]) rs[k++] = &l->r[j];
    rc = open_device(l, gm, dev[i], rs, k, need, e);
  }
  // every device holds its copy now: the host's goes, unless the CPU runners compute with it
  if (gm != l->model) eng_llm_model_destroy(gm);
  for (int i = 0; i < n_run && !rc; i++) rc = runner_open(l, &l->r[i], i, e);
  if (rc) {
    srv_llm_destroy(l);
    return rc;
  }
  // the ready line's "where"
  size_t wl = 0;
  if (n_cpu)
    wl += (size_t)snprintf(l->where + wl, sizeof l->where - wl, "%d on the CPU (float32)", n_cpu);
  for (int d = 0; d < l->n_dev && wl < sizeof l->where; d++) {
    int k = 0;
    for (int i = 0; i < n_run; i++) k += dev[i] == l->dev[d].device;
    wl += (size_t)snprintf(l->where + wl, sizeof l->where - wl, "%s%d on GPU %d (%s)", wl ? ", " : "", k,
                           l->dev[d].device, dt_name(l->gpu_dt));
  }
  *out = l;
  return 0;
}

int srv_llm_n_runners(const srv_llm *l) {
  return l->n;
}

const char *srv_llm_where(const srv_llm *l) {
  return l->where;
}

void srv_llm_stop(srv_llm *l) {
  if (!l) return;
  pthread_mutex_lock(&l->stop_mu);
  if (!l->stopped) {
    l->stopped = 1;
    for (int i = 0; i < l->n; i++) {
      runner *rn = &l->r[i];
      if (rn->started != 2) continue;
      pthread_mutex_lock(&rn->mu);
      rn->stop = 1;
      pthread_cond_signal(&rn->cv);
      pthread_mutex_unlock(&rn->mu);
      pthread_join(rn->thread, NULL);
    }
  }
  pthread_mutex_unlock(&l->stop_mu);
}

void srv_llm_destroy(srv_llm *l) {
  if (!l) return;
  srv_llm_stop(l);
  for (int i = 0; i < l->n; i++) runner_close(&l->r[i]);
  // the devices' weights after every runner that borrowed them
  for (int d = 0; d < l->n_dev; d++) srv_llm_cuda_ops.destroy(l->dev[d].w);
  free(l->r);
  prof_hist_destroy(l->ttft);
  prof_hist_destroy(l->itl);
  prof_hist_destroy(l->e2e);
  prof_hist_destroy(l->tps);
  eng_llm_model_destroy(l->model);
  eng_chat_template_destroy(l->chat);
  eng_tok_destroy(l->tok);
  pthread_mutex_destroy(&l->stop_mu);
  free(l);
}

// One id of a request's tensor, which may sit unaligned in its message (raw_input_contents).
static int32_t ld32(const int32_t *p, int64_t i) {
  int32_t v;
  memcpy(&v, (const char *)p + i * (int64_t)sizeof v, sizeof v);
  return v;
}

// Stop words: TensorRT-LLM's [2, n] layout, row 0 the flat ids, row 1 each word's end offset, -1 padded.
static int copy_stop_words(llm_req *q, const srv_llm_params *p, int64_t vocab, err *e) {
  if (!p->n_stop) return 0;
  int64_t n_words = 0, prev = 0;
  for (int64_t i = 0; i < p->n_stop; i++) {
    int64_t off = ld32(p->stop_offsets, i);
    if (off < 0) break;
    if (off <= prev || off > p->n_stop)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "stop_words_list: offsets must rise and stay within the %" PRId64 " ids (offset %" PRId64
                     " at %" PRId64 ")",
                     p->n_stop, off, i);
    prev = off;
    n_words++;
  }
  for (int64_t i = 0; i < prev; i++)
    if (ld32(p->stop_flat, i) < 0 || ld32(p->stop_flat, i) >= vocab)
      return err_set(e, ERR_INVALID_ARGUMENT, "stop_words_list: token id %d is outside the vocabulary [0, %" PRId64 ")",
                     ld32(p->stop_flat, i), vocab);
  if (!n_words) return 0;
  q->stop = malloc((size_t)prev * sizeof *q->stop);
  q->stop_end = malloc((size_t)n_words * sizeof *q->stop_end);
  if (!q->stop || !q->stop_end) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  memcpy(q->stop, p->stop_flat, (size_t)prev * sizeof *q->stop);
  for (int64_t i = 0; i < n_words; i++) q->stop_end[i] = ld32(p->stop_offsets, i);
  q->n_stop_words = n_words;
  return 0;
}

int srv_llm_submit(srv_llm *l, const srv_llm_params *p, const srv_llm_sink *sink, err *e) {
  const int64_t V = l->mc->vocab;
  if (p->n_ids < 1) return err_set(e, ERR_INVALID_ARGUMENT, "input_ids is empty: the prompt needs one token at least");
  for (int64_t i = 0; i < p->n_ids; i++)
    if (ld32(p->ids, i) < 0 || ld32(p->ids, i) >= V)
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "input_ids[%" PRId64 "] = %d is outside the model's vocabulary [0, %" PRId64 ")", i,
                     ld32(p->ids, i), V);
  if (p->n_ids >= l->max_model_len)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "the prompt's %" PRId64 " tokens leave no room to generate within max_model_len %" PRId64, p->n_ids,
                   l->max_model_len);
  if (p->output_len < 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "request_output_len %" PRId64 " must be at least 1", p->output_len);
  if (p->output_len > l->max_model_len)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "request_output_len %" PRId64 " exceeds max_model_len %" PRId64
                   " (prompt and output together end there)",
                   p->output_len, l->max_model_len);
  if (p->end_id >= V)
    return err_set(e, ERR_INVALID_ARGUMENT, "end_id %d is outside the model's vocabulary [0, %" PRId64 ")", p->end_id,
                   V);
  const eng_llm_sampling *sp = &p->sampling;
  if (!(sp->temperature >= 0) || !(sp->top_p >= 0 && sp->top_p <= 1) || !(sp->min_p >= 0 && sp->min_p <= 1) ||
      !(sp->repetition_penalty > 0) || sp->top_k < 0)
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "sampling parameters out of range: temperature %g (>= 0), runtime_top_k %d (>= 0), runtime_top_p "
                   "%g ([0, 1]), min_p %g ([0, 1]), repetition_penalty %g (> 0)",
                   (double)sp->temperature, sp->top_k, (double)sp->top_p, (double)sp->min_p,
                   (double)sp->repetition_penalty);
  llm_req *q = calloc(1, sizeof *q);
  if (!q) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  q->prompt = malloc((size_t)p->n_ids * sizeof *q->prompt);
  if (!q->prompt) {
    req_free(q);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  }
  if (copy_stop_words(q, p, V, e) != 0) {
    req_free(q);
    return e->code;
  }
  memcpy(q->prompt, p->ids, (size_t)p->n_ids * sizeof *q->prompt);
  q->seq = (bat_iter_seq){.prompt = q->prompt,
                          .prompt_len = p->n_ids,
                          .max_tokens = p->output_len,
                          .deadline_us = p->deadline_us,
                          .payload = q};
  q->sink = *sink;
  q->sampling = *sp;
  q->greedy = !p->want_logits && eng_llm_sampling_is_greedy(sp);
  q->engine_sample = !p->want_logits && !q->greedy && !l->cfg.host_sampling;
  q->streaming = p->streaming;
  q->end_id = p->end_id;
  q->stats = p->stats;
  q->t_recv_us = p->t_recv_us ? p->t_recv_us : eng_now_us();
  // the least loaded runner
  pthread_mutex_lock(&l->stop_mu);  // against srv_llm_stop: a request queued after the flush would never end
  if (l->stopped) {
    pthread_mutex_unlock(&l->stop_mu);
    req_free(q);
    return err_set(e, ERR_UNAVAILABLE, "model '%s' is shutting down", l->name);
  }
  runner *best = &l->r[0];
  for (int i = 1; i < l->n; i++)
    if (atomic_load(&l->r[i].held) < atomic_load(&best->held)) best = &l->r[i];
  atomic_fetch_add(&best->held, 1);
  pthread_mutex_lock(&best->mu);
  if (!p->seeded) q->sampling.seed = best->seed_next++ * 0x9E3779B97F4A7C15ull;
  if (best->inbox_tail)
    best->inbox_tail->next = q;
  else
    best->inbox = q;
  best->inbox_tail = q;
  pthread_cond_signal(&best->cv);
  pthread_mutex_unlock(&best->mu);
  pthread_mutex_unlock(&l->stop_mu);
  return 0;
}

void srv_llm_metrics_get(const srv_llm *l, srv_llm_metrics *o) {
  *o = (srv_llm_metrics){.prompt_tokens = atomic_load(&l->prompt_tokens),
                         .generated_tokens = atomic_load(&l->generated_tokens),
                         .ttft_us = l->ttft,
                         .itl_us = l->itl,
                         .e2e_us = l->e2e,
                         .tps_x100 = l->tps};
  for (int i = 0; i < l->n; i++) {
    runner *rn = &l->r[i];
    o->preemptions += atomic_load(&rn->preemptions);
    o->prefix_hit_tokens += atomic_load(&rn->prefix_hits);
    o->blocks_used += atomic_load(&rn->blocks_used);
    o->running += atomic_load(&rn->running);
    o->waiting += atomic_load(&rn->waiting);
    o->blocks_total += rn->n_blocks;
  }
}
