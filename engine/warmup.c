// warmup.c: builds each model_warmup entry's batch and runs it, one job at a
// time, on every instance of the model, waiting for each to finish.
#include "engine/warmup.h"

#include "kernels/base/confine.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct waiter {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done, rc;
  err e;
} waiter;

static void on_done(eng_job *job, int rc, const err *e, const eng_tensor *outputs, size_t n_outputs) {
  (void)outputs, (void)n_outputs;
  waiter *w = job->ctx;
  pthread_mutex_lock(&w->mu);
  w->rc = rc;
  if (rc && e) w->e = *e;
  w->done = 1;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

static int run_once(eng_model *m, int instance, eng_job *job, waiter *w, err *e) {
  w->done = 0;
  w->rc = 0;
  job->done = on_done;
  job->ctx = w;
  job->instance = instance;
  TRY(eng_model_submit(m, instance, job, e));
  pthread_mutex_lock(&w->mu);
  while (!w->done) pthread_cond_wait(&w->cv, &w->mu);
  pthread_mutex_unlock(&w->mu);
  if (w->rc) {
    *e = w->e;
    return w->rc ? w->rc : ERR_INTERNAL;
  }
  return 0;
}

// The entry's first input of that name; NULL when there is none or it has no value.
static const eng_warmup_input *find_input(const eng_warmup *w, const char *name) {
  for (size_t k = 0; k < w->n_inputs; k++)
    if (strcmp(w->inputs[k].name, name) == 0) return w->inputs[k].has_value ? &w->inputs[k] : NULL;
  return NULL;
}

// Reads warmup/<file> under model_dir: one sample's bytes (repeated for each
// row) or the whole batch's.
static int read_file(const char *model_dir, const eng_confine_roots *roots, const char *file, uint8_t *dst,
                     size_t sample, size_t rows, err *e) {
  if (strstr(file, "..") || file[0] == '/')
    return err_set(e, ERR_INVALID_ARGUMENT, "input_data_file '%s' must name a file inside the warmup folder", file);
  char path[PATH_MAX];
  if (snprintf(path, sizeof path, "%s/warmup", model_dir) >= (int)sizeof path)
    return err_set(e, ERR_INVALID_ARGUMENT, "input_data_file '%s': path too long", file);
  FILE *f = eng_confine_fopen(path, file, roots, "input_data_file", e);  // links: see eng_warmup_run
  if (!f) return e->code;
  size_t n = fread(dst, 1, sample * rows, f);
  int extra = fgetc(f) != EOF;
  fclose(f);
  if (extra || (n != sample && n != sample * rows))
    return err_set(e, ERR_INVALID_ARGUMENT, "input_data_file '%s' holds %s%zu bytes; expected %zu (one sample) or %zu",
                   path, extra ? "more than " : "", n, sample, sample * rows);
  for (size_t r = 1; n == sample && r < rows; r++) memcpy(dst + r * sample, dst, sample);
  return 0;
}

// Fills one input of the entry: shape [rows, dims...] (no batch dim when the
// model does not batch), data as the entry says.
static int build_input(const eng_model *m, const eng_warmup *w, size_t i, int64_t rows, const char *model_dir,
                       const eng_confine_roots *roots, uint64_t max_bytes, uint64_t *seed, eng_tensor *t, err *e) {
  const eng_io *io = eng_model_input(m, i);
  const eng_warmup_input *in = find_input(w, io->name);
  if (!in) return err_set(e, ERR_INVALID_ARGUMENT, "input '%s' is missing", io->name);
  if (in->dt != io->dt)
    return err_set(e, ERR_INVALID_ARGUMENT, "input '%s': data_type %s, the model's is %s", io->name,
                   dtype_config_name(in->dt), dtype_config_name(io->dt));
  if ((int)in->n_dims != io->ndims)
    return err_set(e, ERR_INVALID_ARGUMENT, "input '%s': %zu dims, the model's input has %d", io->name, in->n_dims,
                   io->ndims);
  int batched = eng_model_max_batch(m) > 0;
  t->dt = io->dt;
  t->ndims = io->ndims + batched;
  if (batched) t->dims[0] = rows;
  // sizes checked before anything is allocated: a config may name dims whose product wraps (found by fuzz_rest)
  // STRING: empty strings, a zero 4-byte length each in the wire layout
  // (kernels/base/strwire.h): zero_data and random_data alike
  uint64_t sample = io->dt == DT_STRING ? 4 : dtype_size(io->dt);
  if (io->dt == DT_STRING && in->source == ENG_WARMUP_FILE)
    return err_set(e, ERR_INVALID_ARGUMENT, "input '%s': input_data_file is not supported for TYPE_STRING inputs",
                   io->name);
  for (int d = 0; d < io->ndims; d++) {
    if (in->dims[d] < 0 || (io->dims[d] >= 0 && io->dims[d] != in->dims[d]))
      return err_set(e, ERR_INVALID_ARGUMENT, "input '%s': dim %d is %lld, the model's is %lld", io->name, d,
                     (long long)in->dims[d], (long long)io->dims[d]);
    t->dims[d + batched] = in->dims[d];
    if (in->dims[d] > 0 && sample > max_bytes / (uint64_t)in->dims[d])
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "input '%s': one sample of these dims is over the %llu bytes one load's warmup may feed "
                     "(inferd --model-warmup-max-mib)", io->name, (unsigned long long)max_bytes);
    sample *= (uint64_t)in->dims[d];
  }
  if (rows > 0 && sample > max_bytes / (uint64_t)rows)  // divided: sample x rows may pass 2^64 with a large budget
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "input '%s': %lld rows of %llu bytes are over the %llu bytes one load's warmup may feed "
                   "(inferd --model-warmup-max-mib)", io->name, (long long)rows, (unsigned long long)sample,
                   (unsigned long long)max_bytes);
  t->bytes = (size_t)(sample * (uint64_t)rows);
  uint8_t *p = calloc(t->bytes ? t->bytes : 1, 1);
  if (!p) return err_set(e, ERR_RESOURCE_EXHAUSTED, "input '%s': out of memory for %zu bytes", io->name, t->bytes);
  t->data = p;
  switch (in->source) {
    case ENG_WARMUP_ZERO: return 0;
    case ENG_WARMUP_RANDOM:
      if (io->dt == DT_STRING) return 0;  // random bytes would be random lengths
      if (io->dt == DT_FP32) {  // values in [0, 1): random bits could be NaN or Inf
        float *f = (float *)p;
        for (size_t k = 0; k < t->bytes / sizeof *f; k++) {
          *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
          f[k] = (float)(*seed >> 40) / 16777216.0f;
        }
      } else {
        for (size_t k = 0; k < t->bytes; k++) {
          *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
          p[k] = (uint8_t)(*seed >> 56) & (io->dt == DT_BOOL ? 1 : 0xff);
        }
      }
      return 0;
    case ENG_WARMUP_FILE:
      return read_file(model_dir, roots, in->file, p, sample, (size_t)rows, e);
    default: return err_set(e, ERR_INVALID_ARGUMENT, "input '%s': no zero_data, random_data or input_data_file", io->name);
  }
}

static int cancelled(const atomic_int *cancel, err *e) {
  if (cancel && atomic_load_explicit(cancel, memory_order_relaxed))
    return err_set(e, ERR_UNAVAILABLE, "cancelled: server shutting down");
  return 0;
}

static int run_entry(eng_model *m, const eng_warmup *w, const char *model_dir, const eng_confine_roots *roots,
                     uint64_t max_bytes, const atomic_int *cancel, uint64_t *runs, err *e) {
  int max_batch = eng_model_max_batch(m);
  int64_t rows = max_batch > 0 ? (w->batch_size ? (int64_t)w->batch_size : 1) : 1;
  if (max_batch > 0 && rows > max_batch)
    return err_set(e, ERR_INVALID_ARGUMENT, "batch_size %u exceeds max_batch_size %d", w->batch_size, max_batch);
  for (size_t k = 0; k < w->n_inputs; k++) {
    size_t i = 0;
    while (i < eng_model_n_inputs(m) && strcmp(eng_model_input(m, i)->name, w->inputs[k].name) != 0) i++;
    if (i == eng_model_n_inputs(m))
      return err_set(e, ERR_INVALID_ARGUMENT, "input '%s' is not an input of the model", w->inputs[k].name);
  }
  size_t n_in = eng_model_n_inputs(m);
  eng_tensor *ts = calloc(n_in ? n_in : 1, sizeof *ts);
  if (!ts) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < n_in; i++)
    rc = build_input(m, w, i, rows, model_dir, roots, max_bytes, &seed, &ts[i], e);
  waiter wt = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
  uint32_t count = w->count ? w->count : 1;
  // one run's input, then all the runs', compared by division: nothing here may wrap
  uint64_t one = 0, runs_all = (uint64_t)count * (uint64_t)eng_model_n_instances(m);
  for (size_t i = 0; rc == 0 && i < n_in; i++) one += ts[i].bytes;  // each <= max_bytes
  if (rc == 0 && one && (one > max_bytes || runs_all > max_bytes / one))
    rc = err_set(e, ERR_INVALID_ARGUMENT,
                 "%u run(s) on %d instance(s) of %llu bytes of input each feed %.0f bytes, over the %llu one load's "
                 "warmup may (lower count, batch_size or the dims; inferd --model-warmup-max-mib)",
                 count, eng_model_n_instances(m), (unsigned long long)one, (double)one * (double)runs_all,
                 (unsigned long long)max_bytes);
  for (int inst = 0; rc == 0 && inst < eng_model_n_instances(m); inst++)
    for (uint32_t c = 0; rc == 0 && c < count; c++) {
      eng_job job = {.rows = rows, .inputs = ts};
      rc = cancelled(cancel, e);  // between runs: a stop signal waits for one run at most
      if (rc) break;
      rc = run_once(m, inst, &job, &wt, e);
      if (rc == 0) (*runs)++;
      else err_prefix(e, "instance %d: ", inst);
    }
  pthread_cond_destroy(&wt.cv);
  pthread_mutex_destroy(&wt.mu);
  for (size_t i = 0; i < n_in; i++) free(ts[i].data);
  free(ts);
  return rc;
}

// --- the whole warmup's budget

// Saturating: the figures come from a config sent over the network.
static uint64_t mul_sat(uint64_t a, uint64_t b) { return a && b > UINT64_MAX / a ? UINT64_MAX : a * b; }
static uint64_t add_sat(uint64_t a, uint64_t b) { return b > UINT64_MAX - a ? UINT64_MAX : a + b; }

// One run's input bytes as the entry describes them (the model's own dims
// are compared later, by build_input; a negative dim fails there).
static uint64_t entry_run_bytes(const eng_model_config *cfg, const eng_warmup *w) {
  uint64_t rows = cfg->max_batch_size > 0 && w->batch_size ? w->batch_size : 1, all = 0;
  for (size_t k = 0; k < w->n_inputs; k++) {
    const eng_warmup_input *in = &w->inputs[k];
    if (!in->has_value) continue;
    uint64_t b = mul_sat(dtype_size(in->dt), rows);
    for (size_t d = 0; d < in->n_dims; d++) b = mul_sat(b, in->dims[d] > 0 ? (uint64_t)in->dims[d] : 0);
    all = add_sat(all, b);
  }
  return all;
}

int eng_warmup_check(const eng_model_config *cfg, int n_instances, const eng_warmup_limits *lim, err *e) {
  uint64_t max_bytes = lim && lim->max_bytes ? lim->max_bytes : ENG_WARMUP_MAX_BYTES;
  uint64_t max_runs = lim && lim->max_runs ? lim->max_runs : ENG_WARMUP_MAX_RUNS;
  uint64_t inst = n_instances > 0 ? (uint64_t)n_instances : 1, runs = 0, bytes = 0, big = 0;
  size_t big_k = 0;
  for (size_t k = 0; k < cfg->n_warmups; k++)  // a typo (one entry's count) is named as such
    if (cfg->warmups[k].count > ENG_WARMUP_MAX_COUNT)
      return err_set(e, ERR_INVALID_ARGUMENT, "model_warmup '%s': count %u exceeds %d (more runs warm nothing further)",
                     cfg->warmups[k].name, cfg->warmups[k].count, ENG_WARMUP_MAX_COUNT);
  for (size_t k = 0; k < cfg->n_warmups; k++) {
    const eng_warmup *w = &cfg->warmups[k];
    uint64_t r = mul_sat(w->count ? w->count : 1, inst), b = mul_sat(entry_run_bytes(cfg, w), r);
    runs = add_sat(runs, r);
    bytes = add_sat(bytes, b);
    if (b > big) big = b, big_k = k;
  }
  if (runs <= max_runs && bytes <= max_bytes) return 0;
  // every reason in one message, as Triton's config errors do
  char why_runs[256] = "", why_bytes[512] = "";
  if (runs > max_runs)
    snprintf(why_runs, sizeof why_runs,
             "%llu run(s) (the counts of %zu entr%s x %llu instance(s)), over the %llu one load may "
             "(inferd --model-warmup-max-runs)", (unsigned long long)runs, cfg->n_warmups,
             cfg->n_warmups == 1 ? "y" : "ies", (unsigned long long)inst, (unsigned long long)max_runs);
  if (bytes > max_bytes) {
    const eng_warmup *w = &cfg->warmups[big_k];
    snprintf(why_bytes, sizeof why_bytes,
             "%s%llu bytes of input (the most, entry '%.64s': %u run(s) on %llu instance(s) of %llu bytes each), "
             "over the %llu one load may feed (inferd --model-warmup-max-mib)",
             bytes == UINT64_MAX ? "more than " : "", (unsigned long long)bytes, w->name, w->count ? w->count : 1,
             (unsigned long long)inst, (unsigned long long)entry_run_bytes(cfg, w), (unsigned long long)max_bytes);
  }
  return err_set(e, ERR_INVALID_ARGUMENT, "model_warmup asks %s%s%s; lower the entries, their count, batch_size or "
                 "dims", why_runs, why_runs[0] && why_bytes[0] ? " and " : "", why_bytes);
}

// --- running it

int eng_warmup_run(eng_model *m, const eng_model_config *cfg, const char *model_dir, const eng_confine_roots *roots,
                   const eng_warmup_limits *lim, uint64_t *runs, err *e) {
  *runs = 0;
  uint64_t max_bytes = lim && lim->max_bytes ? lim->max_bytes : ENG_WARMUP_MAX_BYTES;
  const atomic_int *cancel = lim ? lim->cancel : NULL;
  TRY(eng_warmup_check(cfg, eng_model_n_instances(m), lim, e));
  for (size_t k = 0; k < cfg->n_warmups; k++) {
    const eng_warmup *w = &cfg->warmups[k];
    TRY(cancelled(cancel, e));  // an entry's inputs may take a while to build
    if (run_entry(m, w, model_dir, roots, max_bytes, cancel, runs, e) != 0) {
      if (e->code == ERR_UNAVAILABLE && cancel && atomic_load(cancel)) return e->code;  // not the entry's fault
      return err_prefix(e, "model_warmup '%s': ", w->name);
    }
  }
  return 0;
}
