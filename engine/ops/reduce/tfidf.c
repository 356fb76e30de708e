// engine/ops/reduce/tfidf.c: TfIdfVectorizer over integer tokens: each row
// of X ([C] or [B, C], INT32 or INT64) reduced to the counts of the pool's
// n-grams (min_gram_length..max_gram_length, items max_skip_count apart),
// weighted as TF, IDF or TFIDF, as onnxruntime and onnx's reference count
// them (unigrams once, whatever the skips). String pools are not supported.
// Listed in reduce.c's table.
#include <stdlib.h>
#include <string.h>

#include "engine/ops/ops_common.h"

// Declared here for reduce.c's table.
int eng_ops__parse_tfidf(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e);
int eng_ops__infer_tfidf(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);
int eng_ops__run_tfidf(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e);

static int64_t out_size(const eng_node *n) {
  const eng_attr *a = eng_node_attr(n, "ngram_indexes");
  int64_t m = -1;
  for (size_t i = 0; a && i < a->n_ints; i++)
    if (a->ints[i] > m) m = a->ints[i];
  return m + 1;
}

int eng_ops__parse_tfidf(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  static const char *const modes[] = {"TF", "IDF", "TFIDF", NULL};
  TRY(eng_ops__enum(op_attr_str(n, "mode", "TF"), modes, "mode", &p->mode, e));
  if (eng_node_attr(n, "pool_strings")) return err_set(e, ERR_UNIMPLEMENTED, "unsupported: pool_strings (string tokens)");
  const eng_attr *pool = eng_node_attr(n, "pool_int64s"), *cnt = eng_node_attr(n, "ngram_counts"),
                 *idx = eng_node_attr(n, "ngram_indexes");
  if (!pool || !cnt || !idx) return err_set(e, ERR_INVALID_ARGUMENT, "needs pool_int64s, ngram_counts and ngram_indexes");
  int64_t mn = op_attr_int(n, "min_gram_length", 1), mx = op_attr_int(n, "max_gram_length", 1);
  if (mn < 1 || mx < mn || op_attr_int(n, "max_skip_count", 0) < 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "bad gram lengths %lld..%lld", (long long)mn, (long long)mx);
  // every n-gram of the pool has an output index
  size_t grams = 0;
  for (size_t s = 0; s < cnt->n_ints; s++) {
    int64_t b = cnt->ints[s], en = s + 1 < cnt->n_ints ? cnt->ints[s + 1] : (int64_t)pool->n_ints;
    if (b < 0 || en < b || en > (int64_t)pool->n_ints || (en - b) % (int64_t)(s + 1))
      return err_set(e, ERR_INVALID_ARGUMENT, "ngram_counts does not split pool_int64s into n-grams");
    grams += (size_t)(en - b) / (s + 1);
  }
  if (idx->n_ints != grams)
    return err_set(e, ERR_INVALID_ARGUMENT, "ngram_indexes has %zu entries for %zu n-grams", idx->n_ints, grams);
  const eng_attr *w = eng_node_attr(n, "weights");
  if (w && w->n_floats && (int64_t)w->n_floats < out_size(n))
    return err_set(e, ERR_INVALID_ARGUMENT, "weights has %zu entries for %lld outputs", w->n_floats,
                   (long long)out_size(n));
  p->node = n;
  return 0;
}

int eng_ops__infer_tfidf(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  const eng_tensor *x = &in[0];
  if ((x->dt != DT_INT64 && x->dt != DT_INT32) || x->ndims < 1 || x->ndims > 2)
    return err_set(e, ERR_INVALID_ARGUMENT, "X must be INT32 or INT64 [C] or [B, C]");
  memset(&out[0], 0, sizeof out[0]);
  out[0].dt = DT_FP32;
  out[0].ndims = x->ndims;
  out[0].dims[0] = x->dims[0];
  out[0].dims[x->ndims - 1] = out_size(p->node);
  return 0;
}

static int64_t item(const eng_tensor *x, size_t i) {
  return x->dt == DT_INT64 ? ((const int64_t *)x->data)[i] : ((const int32_t *)x->data)[i];
}

// The output index of the s-gram at row[start], row[start + d]... in the
// pool (the last one listed when repeated), or -1.
static int64_t find_gram(const eng_node *n, const eng_tensor *x, size_t base, size_t start, size_t d, int64_t s) {
  const eng_attr *pool = eng_node_attr(n, "pool_int64s"), *cnt = eng_node_attr(n, "ngram_counts"),
                 *idx = eng_node_attr(n, "ngram_indexes");
  if ((size_t)s > cnt->n_ints) return -1;
  size_t id = 0;  // grams of smaller sizes before this size's
  for (int64_t k = 1; k < s; k++) {
    int64_t b = cnt->ints[k - 1], en = (size_t)k < cnt->n_ints ? cnt->ints[k] : (int64_t)pool->n_ints;
    id += (size_t)(en - b) / (size_t)k;
  }
  int64_t b = cnt->ints[s - 1], en = (size_t)s < cnt->n_ints ? cnt->ints[s] : (int64_t)pool->n_ints;
  int64_t found = -1;
  for (int64_t g = 0; g < (en - b) / s; g++) {
    int same = 1;
    for (int64_t k = 0; k < s && same; k++) same = pool->ints[b + g * s + k] == item(x, base + start + (size_t)k * d);
    if (same) found = idx->ints[id + (size_t)g];
  }
  return found;
}

int eng_ops__run_tfidf(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out, (void)e;
  const eng_node *n = p->node;
  const eng_tensor *x = &in[0];
  size_t rows = x->ndims == 2 ? (size_t)x->dims[0] : 1, C = (size_t)x->dims[x->ndims - 1];
  size_t osz = (size_t)out_size(n);
  int64_t mn = op_attr_int(n, "min_gram_length", 1), mx = op_attr_int(n, "max_gram_length", 1);
  size_t max_d = (size_t)op_attr_int(n, "max_skip_count", 0) + 1;
  float *y = out[0].data;
  memset(y, 0, rows * osz * sizeof *y);
  for (size_t r = 0; r < rows; r++) {
    float *f = y + r * osz;
    int64_t first = mn;
    for (size_t d = 1; d <= max_d; d++) {
      for (size_t st = 0; st < C; st++) {
        if (st + d * (size_t)(first - 1) >= C) break;
        for (int64_t s = first; s <= mx && st + d * (size_t)(s - 1) < C; s++) {
          int64_t o = find_gram(n, x, r * C, st, d, s);
          if (o >= 0 && (size_t)o < osz) f[o] += 1;
        }
      }
      if (first == 1) {  // unigrams are counted at the first distance only
        first = 2;
        if (first > mx) break;
      }
    }
    const eng_attr *w = eng_node_attr(n, "weights");
    int has_w = w && w->n_floats;
    for (size_t i = 0; i < osz; i++) {
      if (p->mode == 1) f[i] = f[i] > 0 ? (has_w ? w->floats[i] : 1) : 0;
      else if (p->mode == 2 && has_w) f[i] *= w->floats[i];
    }
  }
  return 0;
}
