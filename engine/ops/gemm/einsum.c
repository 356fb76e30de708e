// engine/ops/gemm/einsum.c: Einsum on the CPU: the equation (explicit "->" or
// implicit output, "..." broadcast dims, repeated labels for diagonals) is
// turned per input-shape signature into a k_einsum_plan of label sizes and
// operand strides, and the C reference sums it (kernels/gemm/k_einsum.c).
// FP32 (every float width inside a plan), up to K_EINSUM_MAX_IN operands.
// gemm.c's table lists it; no CUDA path yet.
#include <ctype.h>
#include <string.h>

#include "engine/ops/gemm/gemm.h"
#include "engine/ops/ops_common.h"
#include "kernels/k_ref.h"

// The equation, spaces dropped, is kept in the bytes of p->ints (eng_op_params
// has no string field): 63 characters at most.
#define EQ_MAX ((int)sizeof(((eng_op_params *)0)->ints))

int eng_ops__parse_einsum(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  const char *s = op_attr_str(n, "equation", NULL);
  if (!s) return err_set(e, ERR_INVALID_ARGUMENT, "attribute 'equation' is required");
  char buf[EQ_MAX];
  int k = 0;
  for (; *s; s++) {
    if (*s == ' ') continue;
    if (k >= EQ_MAX - 1) return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: an equation over %d characters", EQ_MAX - 1);
    buf[k++] = *s;
  }
  buf[k] = '\0';
  memcpy(p->ints, buf, (size_t)k + 1);
  return 0;
}

// One term's labels: ids (letters 0..51; -1 marks where "..." stands) and their count.
static int term_labels(const char *t, size_t len, int *ids, int *n, err *e) {
  *n = 0;
  int ell = 0;
  for (size_t i = 0; i < len; i++) {
    if (t[i] == '.') {
      if (ell || i + 2 >= len || t[i + 1] != '.' || t[i + 2] != '.')
        return err_set(e, ERR_INVALID_ARGUMENT, "a malformed '...' in the equation");
      ell = 1, i += 2;
      ids[(*n)++] = -1;
    } else if (isalpha((unsigned char)t[i])) {
      if (*n >= ENG_MAX_DIMS + 1) return err_set(e, ERR_INVALID_ARGUMENT, "a term with too many labels");
      ids[(*n)++] = islower((unsigned char)t[i]) ? t[i] - 'a' : 26 + t[i] - 'A';
    } else {
      return err_set(e, ERR_INVALID_ARGUMENT, "character '%c' in the equation", t[i]);
    }
  }
  return 0;
}

// Label numbering: letters 0..51, ellipsis dims 52.. (right-aligned across operands).
#define ELL0 52
#define N_IDS (ELL0 + ENG_MAX_DIMS)

static int plan_of(const eng_op_params *p, const eng_tensor *in, int n_in, k_einsum_plan *pl, int *ond,
                   int64_t *odims, err *e) {
  const char *eq = (const char *)p->ints, *arrow = strstr(eq, "->");
  size_t lhs_len = arrow ? (size_t)(arrow - eq) : strlen(eq);
  if (n_in > K_EINSUM_MAX_IN) return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: over %d operands", K_EINSUM_MAX_IN);
  int ids[K_EINSUM_MAX_IN][ENG_MAX_DIMS + 1], nl[K_EINSUM_MAX_IN], count[N_IDS] = {0}, ell_rank = 0;
  int64_t size[N_IDS];
  for (int i = 0; i < N_IDS; i++) size[i] = -1;
  size_t at = 0;
  for (int k = 0; k < n_in; k++) {
    size_t end = at;
    while (end < lhs_len && eq[end] != ',') end++;
    if (k < n_in - 1 ? end >= lhs_len : end != lhs_len)
      return err_set(e, ERR_INVALID_ARGUMENT, "the equation's terms do not match the %d inputs", n_in);
    TRY(term_labels(eq + at, end - at, ids[k], &nl[k], e));
    at = end + 1;
    TRY(eng_ops__need_f32(&in[k], "an operand", e));
    int has_ell = 0;
    for (int j = 0; j < nl[k]; j++) has_ell |= ids[k][j] < 0;
    int er = in[k].ndims - (nl[k] - has_ell);
    if (er < 0 || (!has_ell && er != 0))
      return err_set(e, ERR_INVALID_ARGUMENT, "input %d has rank %d for its term", k, in[k].ndims);
    if (er > ell_rank) ell_rank = er;
  }
  // sizes and counts; ellipsis dims broadcast (1 against n), letters must agree
  for (int k = 0; k < n_in; k++) {
    int has_ell = 0;
    for (int j = 0; j < nl[k]; j++) has_ell |= ids[k][j] < 0;
    int er = in[k].ndims - (nl[k] - has_ell), d = 0;
    for (int j = 0; j < nl[k]; j++) {
      if (ids[k][j] < 0) {
        for (int q = 0; q < er; q++, d++) {
          int l = ELL0 + ell_rank - er + q;
          int64_t v = in[k].dims[d];
          if (size[l] < 0 || size[l] == 1) size[l] = v;
          else if (v != 1 && v != size[l]) return err_set(e, ERR_INVALID_ARGUMENT, "'...' dims do not broadcast");
        }
        continue;
      }
      int l = ids[k][j];
      if (size[l] >= 0 && size[l] != in[k].dims[d])
        return err_set(e, ERR_INVALID_ARGUMENT, "label '%c' has sizes %lld and %lld", l < 26 ? 'a' + l : 'A' + l - 26,
                       (long long)size[l], (long long)in[k].dims[d]);
      size[l] = in[k].dims[d++];
      count[l]++;
    }
  }
  for (int q = 0; q < ell_rank; q++) count[ELL0 + q] = 1;
  // the output's labels
  int out[N_IDS], n_out = 0;
  if (arrow) {
    int oids[ENG_MAX_DIMS + 1], on;
    TRY(term_labels(arrow + 2, strlen(arrow + 2), oids, &on, e));
    for (int j = 0; j < on; j++) {
      if (oids[j] < 0) {
        for (int q = 0; q < ell_rank; q++) out[n_out++] = ELL0 + q;
      } else {
        if (size[oids[j]] < 0) return err_set(e, ERR_INVALID_ARGUMENT, "an output label no input has");
        out[n_out++] = oids[j];
      }
    }
  } else {
    for (int q = 0; q < ell_rank; q++) out[n_out++] = ELL0 + q;
    for (int l = 0; l < ELL0; l++)
      if (count[l] == 1) out[n_out++] = l;
  }
  // plan: output labels, then the rest
  int slot[N_IDS];
  for (int i = 0; i < N_IDS; i++) slot[i] = -1;
  memset(pl, 0, sizeof *pl);
  pl->n_in = n_in;
  for (int j = 0; j < n_out; j++) {
    if (slot[out[j]] >= 0) return err_set(e, ERR_INVALID_ARGUMENT, "an output label repeats");
    slot[out[j]] = pl->n_labels;
    pl->size[pl->n_labels++] = size[out[j]];
  }
  pl->n_out = pl->n_labels;
  for (int l = 0; l < N_IDS; l++)
    if (size[l] >= 0 && slot[l] < 0) {
      if (pl->n_labels >= K_EINSUM_MAX_LABELS) return err_set(e, ERR_INVALID_ARGUMENT, "unsupported: too many labels");
      slot[l] = pl->n_labels;
      pl->size[pl->n_labels++] = size[l];
    }
  int64_t acc = 1;
  for (int l = pl->n_out - 1; l >= 0; l--) {
    pl->out_div[l] = acc;
    acc *= pl->size[l];
  }
  for (int k = 0; k < n_in; k++) {
    int has_ell = 0;
    for (int j = 0; j < nl[k]; j++) has_ell |= ids[k][j] < 0;
    int er = in[k].ndims - (nl[k] - has_ell), d = 0, lab[ENG_MAX_DIMS];
    for (int j = 0; j < nl[k]; j++) {
      if (ids[k][j] < 0)
        for (int q = 0; q < er; q++) lab[d++] = ELL0 + ell_rank - er + q;
      else
        lab[d++] = ids[k][j];
    }
    int64_t st = 1;
    for (int q = in[k].ndims - 1; q >= 0; q--) {
      if (!(in[k].dims[q] == 1 && size[lab[q]] != 1)) pl->stride[k][slot[lab[q]]] += st;
      st *= in[k].dims[q];
    }
  }
  *ond = pl->n_out;
  for (int j = 0; j < pl->n_out; j++) odims[j] = pl->size[j];
  if (*ond > ENG_MAX_DIMS) return err_set(e, ERR_INVALID_ARGUMENT, "the output has over %d dims", ENG_MAX_DIMS);
  return 0;
}

int eng_ops__infer_einsum(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_out;
  k_einsum_plan pl;
  int nd;
  int64_t d[N_IDS];
  TRY(plan_of(p, in, n_in, &pl, &nd, d, e));
  op_set_out(&out[0], DT_FP32, nd, d);
  return 0;
}

int eng_ops__run_einsum(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_out;
  k_einsum_plan pl;
  int nd;
  int64_t d[N_IDS];
  TRY(plan_of(p, in, n_in, &pl, &nd, d, e));
  const float *x[K_EINSUM_MAX_IN];
  for (int k = 0; k < n_in; k++) {
    if (!op_numel(&in[k])) {  // an empty operand: every sum is empty
      memset(out[0].data, 0, op_numel(&out[0]) * sizeof(float));
      return 0;
    }
    x[k] = in[k].data;
  }
  k_einsum(out[0].data, x, &pl);
  return 0;
}
