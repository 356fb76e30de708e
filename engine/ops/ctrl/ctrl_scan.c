// engine/ops/ctrl/ctrl_scan.c: Scan. The body runs once per slice of the
// scan inputs along their axes (forward or reverse), carrying N state
// values; its K scan outputs are stacked along their axes. Opset 9 and
// later; opset 8's form (a batch axis first, the sequence axis second,
// sequence_lens) runs the same core once per batch row. The iteration
// count is the scan inputs' length, so every shape is known when planning.
#include "engine/ops/ctrl/ctrl.h"

#include <stdlib.h>
#include <string.h>

// Parsed per call from the node (the params keep only the node).
typedef struct scan_attrs {
  int n_state, n_scan_in, n_scan_out;
  int batched;  // opset 8: inputs [B, T, ...], states [B, ...], sequence_lens first
  int64_t in_axis[CTRL_MAX_IO], in_rev[CTRL_MAX_IO], out_axis[CTRL_MAX_IO], out_rev[CTRL_MAX_IO];
} scan_attrs;

static int ints_or(const eng_node *n, const char *name, int64_t *dst, int cnt, int64_t def, err *e) {
  const eng_attr *a = eng_node_attr(n, name);
  if (!a) {
    for (int k = 0; k < cnt; k++) dst[k] = def;
    return 0;
  }
  if ((int)a->n_ints != cnt)
    return err_set(e, ERR_INVALID_ARGUMENT, "'%s' has %zu entries, expected %d", name, a->n_ints, cnt);
  for (int k = 0; k < cnt; k++) dst[k] = a->ints[k];
  return 0;
}

static int scan_attrs_get(const eng_node *n, int opset, scan_attrs *s, err *e) {
  memset(s, 0, sizeof *s);
  const eng_attr *ns = eng_node_attr(n, "num_scan_inputs");
  if (!ns || ns->i < 1) return err_set(e, ERR_INVALID_ARGUMENT, "needs num_scan_inputs >= 1");
  s->batched = opset < 9;
  int own = n->n_in - n->n_implicit - s->batched;  // opset 8: sequence_lens first
  if (ns->i > own)
    return err_set(e, ERR_INVALID_ARGUMENT, "num_scan_inputs %lld but %d inputs", (long long)ns->i, own);
  s->n_scan_in = (int)ns->i;
  s->n_state = own - s->n_scan_in;
  s->n_scan_out = n->n_out - s->n_state;
  if (s->n_scan_out < 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "%d state values but %d outputs", s->n_state, n->n_out);
  if (s->batched) {
    TRY(ints_or(n, "directions", s->in_rev, s->n_scan_in, 0, e));
    for (int k = 0; k < s->n_scan_in; k++) s->in_axis[k] = 0;  // within a batch row
    for (int k = 0; k < s->n_scan_out; k++) s->out_axis[k] = s->out_rev[k] = 0;
  } else {
    TRY(ints_or(n, "scan_input_axes", s->in_axis, s->n_scan_in, 0, e));
    TRY(ints_or(n, "scan_input_directions", s->in_rev, s->n_scan_in, 0, e));
    TRY(ints_or(n, "scan_output_axes", s->out_axis, s->n_scan_out, 0, e));
    TRY(ints_or(n, "scan_output_directions", s->out_rev, s->n_scan_out, 0, e));
  }
  return 0;
}

int ctrl__parse_scan(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g;
  const eng_graph *body = NULL;
  TRY(ctrl__graph(n, "body", &body, e));
  scan_attrs s;
  TRY(scan_attrs_get(n, opset, &s, e));
  TRY(ctrl__check_arity(body, "body", (size_t)(s.n_state + s.n_scan_in), (size_t)n->n_out, e));
  p->node = n;
  p->axis = opset;  // scan_attrs_get's opset at infer and run
  return 0;
}

// --- slices

// Slice idx of t along axis: its type and shape (no data).
static eng_tensor slice_shape(const eng_tensor *t, int axis) {
  eng_tensor s = *t;
  for (int d = axis; d + 1 < t->ndims; d++) s.dims[d] = t->dims[d + 1];
  s.ndims = t->ndims - 1;
  s.data = NULL;
  return s;
}

// dst (slice bytes) <-> t's slice idx along axis; put: 1 writes into t.
static void slice_copy(const eng_tensor *t, int axis, int64_t idx, void *slice, int put) {
  size_t esz = dtype_size(t->dt);
  size_t outer = (size_t)op_prod(t->dims, 0, axis), inner = (size_t)op_prod(t->dims, axis + 1, t->ndims) * esz;
  size_t len = (size_t)t->dims[axis];
  uint8_t *b = t->data, *s = slice;
  for (size_t o = 0; o < outer; o++) {
    uint8_t *at = b + (o * len + (size_t)idx) * inner;
    if (put) memcpy(at, s + o * inner, inner);
    else memcpy(s + o * inner, at, inner);
  }
}

static int norm_axis(int64_t a, int rank, const char *what, int k, int *out, err *e) {
  if (a < -rank || a >= rank)
    return err_set(e, ERR_INVALID_ARGUMENT, "%s %d: axis %lld out of range for rank %d", what, k, (long long)a, rank);
  *out = (int)(a < 0 ? a + rank : a);
  return 0;
}

// --- shapes

// The iteration count (the scan inputs' common length) of one batch row's
// scan inputs sc[], and each one's axis.
static int scan_len(const scan_attrs *s, const eng_tensor *sc, int *axes, int64_t *T, err *e) {
  *T = -1;
  for (int k = 0; k < s->n_scan_in; k++) {
    TRY(ctrl__no_string(&sc[k], "scan input", (size_t)k, e));
    TRY(norm_axis(s->in_axis[k], sc[k].ndims, "scan input", k, &axes[k], e));
    int64_t len = sc[k].dims[axes[k]];
    if (*T >= 0 && len != *T)
      return err_set(e, ERR_INVALID_ARGUMENT, "scan input %d has %lld slices, scan input 0 has %lld", k,
                     (long long)len, (long long)*T);
    *T = len;
  }
  return 0;
}

// One batch row's operands: states and scan inputs (opset 8: row b sliced
// out of the node's, data in bufs when with_data), as the body sees them.
typedef struct scan_row {
  eng_tensor st[CTRL_MAX_IO], sc[CTRL_MAX_IO];
  void *buf[2 * CTRL_MAX_IO];
} scan_row;

static void row_free(scan_row *r) {
  for (int k = 0; k < 2 * CTRL_MAX_IO; k++) free(r->buf[k]);
}

static int row_get(const scan_attrs *s, const eng_tensor *in, int64_t b, int with_data, scan_row *r, err *e) {
  memset(r, 0, sizeof *r);
  const eng_tensor *states = in + s->batched, *scans = states + s->n_state;
  for (int k = 0; k < s->n_state + s->n_scan_in; k++) {
    const eng_tensor *t = k < s->n_state ? &states[k] : &scans[k - s->n_state];
    eng_tensor *dst = k < s->n_state ? &r->st[k] : &r->sc[k - s->n_state];
    if (!s->batched) {
      *dst = *t;
      continue;
    }
    if (t->ndims < 1) return err_set(e, ERR_INVALID_ARGUMENT, "opset 8: input %d has no batch axis", k + 1);
    *dst = slice_shape(t, 0);
    if (!with_data || !t->data) continue;
    size_t bytes = ctrl__bytes(dst);
    if (!(r->buf[k] = malloc(bytes ? bytes : 1))) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    slice_copy(t, 0, b, r->buf[k], 0);
    dst->data = r->buf[k];
    dst->bytes = bytes;
  }
  return 0;
}

int ctrl__infer_scan(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_in;
  scan_attrs s;
  TRY(scan_attrs_get(p->node, (int)p->axis, &s, e));
  const eng_graph *body = eng_node_attr(p->node, "body")->g;
  if (!p->sub) return err_set(e, ERR_UNIMPLEMENTED, "a subgraph runs only inside a plan");
  scan_row r;
  TRY(row_get(&s, in, 0, 0, &r, e));
  int axes[CTRL_MAX_IO];
  int64_t T;
  TRY(scan_len(&s, r.sc, axes, &T, e));
  int64_t B = s.batched ? in[1].dims[0] : 1;
  eng_tensor own[CTRL_MAX_IO], sub_in[CTRL_MAX_IO], got[CTRL_MAX_IO];
  for (int k = 0; k < s.n_state; k++) {
    TRY(ctrl__no_string(&r.st[k], "state", (size_t)k, e));
    own[k] = r.st[k];
    own[k].data = NULL;
  }
  for (int k = 0; k < s.n_scan_in; k++) own[s.n_state + k] = slice_shape(&r.sc[k], axes[k]);
  ctrl__inputs(body, own, (size_t)(s.n_state + s.n_scan_in), in, sub_in);
  void *plan = NULL;
  TRY(ctrl__plan(p, NULL, 0, body, &plan, e));
  int rc = p->sub->infer(plan, sub_in, eng_graph_n_inputs(body), got, (size_t)n_out, e);
  p->sub->destroy(plan);
  if (rc) return err_prefix(e, "body: ");
  for (int k = 0; k < s.n_state; k++) {
    char a[96], b[96];
    if (!ctrl__same(&got[k], &r.st[k]))
      return err_set(e, ERR_INVALID_ARGUMENT, "state %d is %s before an iteration and %s after", k,
                     ctrl__desc(&r.st[k], a, sizeof a), ctrl__desc(&got[k], b, sizeof b));
    out[k] = in[s.batched + k];
    out[k].data = NULL;
  }
  for (int k = 0; k < s.n_scan_out; k++) {
    eng_tensor t = got[s.n_state + k];
    TRY(ctrl__no_string(&t, "scan output", (size_t)k, e));
    int ax = 0;
    if (t.ndims + 1 + s.batched > ENG_MAX_DIMS)
      return err_set(e, ERR_INVALID_ARGUMENT, "scan output %d: rank too large", k);
    TRY(norm_axis(s.out_axis[k], t.ndims + 1, "scan output", k, &ax, e));
    memmove(&t.dims[ax + 1], &t.dims[ax], (size_t)(t.ndims - ax) * sizeof t.dims[0]);
    t.dims[ax] = T;
    t.ndims++;
    if (s.batched) {
      memmove(&t.dims[1], &t.dims[0], (size_t)t.ndims * sizeof t.dims[0]);
      t.dims[0] = B;
      t.ndims++;
    }
    t.data = NULL;
    out[s.n_state + k] = t;
  }
  return 0;
}

// --- run

// One batch row: states in r->st (bytes), scan inputs r->sc; writes the
// final states into st_out[] and the scan outputs into sc_out[] (each
// shaped [..T at its axis..], bytes allocated by the caller).
static int scan_row_run(const eng_op_params *p, const scan_attrs *s, void *plan, const eng_graph *body,
                        const eng_tensor *node_in, scan_row *r, eng_tensor *st_out, eng_tensor *sc_out, err *e) {
  int axes[CTRL_MAX_IO], oax[CTRL_MAX_IO];
  int64_t T;
  TRY(scan_len(s, r->sc, axes, &T, e));
  for (int k = 0; k < s->n_scan_out; k++) TRY(norm_axis(s->out_axis[k], sc_out[k].ndims, "scan output", k, &oax[k], e));
  // the states carried between iterations, and one slice of each scan input
  void *cur[CTRL_MAX_IO] = {0}, *sl[CTRL_MAX_IO] = {0};
  eng_tensor own[CTRL_MAX_IO], sub_in[CTRL_MAX_IO], got[CTRL_MAX_IO];
  int rc = 0;
  for (int k = 0; k < s->n_state && !rc; k++) {
    size_t b = ctrl__bytes(&r->st[k]);
    if (!(cur[k] = malloc(b ? b : 1))) rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    else if (b) memcpy(cur[k], r->st[k].data, b);
    own[k] = r->st[k];
    own[k].data = cur[k];
  }
  for (int k = 0; k < s->n_scan_in && !rc; k++) {
    own[s->n_state + k] = slice_shape(&r->sc[k], axes[k]);
    size_t b = ctrl__bytes(&own[s->n_state + k]);
    if (!(sl[k] = malloc(b ? b : 1))) rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
    own[s->n_state + k].data = sl[k];
    own[s->n_state + k].bytes = b;
  }
  for (int64_t t = 0; t < T && !rc; t++) {
    for (int k = 0; k < s->n_scan_in; k++) slice_copy(&r->sc[k], axes[k], s->in_rev[k] ? T - 1 - t : t, sl[k], 0);
    ctrl__inputs(body, own, (size_t)(s->n_state + s->n_scan_in), node_in, sub_in);
    if ((rc = p->sub->run(plan, sub_in, eng_graph_n_inputs(body), got, (size_t)(s->n_state + s->n_scan_out), e))) {
      err_prefix(e, "body, iteration %lld: ", (long long)t);
      break;
    }
    for (int k = 0; k < s->n_state + s->n_scan_out && !rc; k++) {
      eng_tensor want = k < s->n_state ? r->st[k] : slice_shape(&sc_out[k - s->n_state], oax[k - s->n_state]);
      char a[96], b[96];
      if (!ctrl__same(&got[k], &want))
        rc = err_set(e, ERR_INVALID_ARGUMENT, "body output %d is %s, planned as %s", k, ctrl__desc(&got[k], a, sizeof a),
                     ctrl__desc(&want, b, sizeof b));
    }
    if (rc) break;
    for (int k = 0; k < s->n_state; k++)
      if (ctrl__bytes(&got[k])) memcpy(cur[k], got[k].data, ctrl__bytes(&got[k]));
    for (int k = 0; k < s->n_scan_out; k++)
      slice_copy(&sc_out[k], oax[k], s->out_rev[k] ? T - 1 - t : t, got[s->n_state + k].data, 1);
  }
  for (int k = 0; k < s->n_state && !rc; k++)
    if (ctrl__bytes(&st_out[k])) memcpy(st_out[k].data, cur[k], ctrl__bytes(&st_out[k]));
  for (int k = 0; k < CTRL_MAX_IO; k++) {
    free(cur[k]);
    free(sl[k]);
  }
  return rc;
}

static int exec_scan(const eng_op_params *p, ctrl_plans *st, const eng_tensor *in, eng_tensor *out, err *e) {
  scan_attrs s;
  TRY(scan_attrs_get(p->node, (int)p->axis, &s, e));
  const eng_graph *body = eng_node_attr(p->node, "body")->g;
  int64_t B = s.batched ? in[1].dims[0] : 1;
  if (s.batched && in[0].dt != DT_INVALID) {  // sequence_lens: only full-length sequences
    int64_t T = in[1 + s.n_state].ndims > 1 ? in[1 + s.n_state].dims[1] : 0;
    for (int64_t b = 0; b < eng_numel(in[0].ndims, in[0].dims); b++) {
      int64_t l = in[0].dt == DT_INT64 ? ((const int64_t *)in[0].data)[b] : ((const int32_t *)in[0].data)[b];
      if (l != T)
        return err_set(e, ERR_UNIMPLEMENTED, "sequence_lens[%lld] is %lld, shorter than the sequence (%lld): "
                       "not supported", (long long)b, (long long)l, (long long)T);
    }
  }
  void *plan = NULL;
  TRY(ctrl__plan(p, st, 0, body, &plan, e));
  int rc = 0;
  for (int64_t b = 0; b < B && !rc; b++) {
    scan_row r;
    eng_tensor st_out[CTRL_MAX_IO], sc_out[CTRL_MAX_IO];
    void *tmp[2 * CTRL_MAX_IO] = {0};
    if ((rc = row_get(&s, in, b, 1, &r, e)) == 0) {
      for (int k = 0; k < s.n_state + s.n_scan_out && !rc; k++) {
        eng_tensor *d = k < s.n_state ? &st_out[k] : &sc_out[k - s.n_state];
        *d = s.batched ? slice_shape(&out[k], 0) : out[k];
        if (!s.batched) continue;
        size_t bytes = ctrl__bytes(d);
        if (!(tmp[k] = malloc(bytes ? bytes : 1))) rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory");
        d->data = tmp[k];
      }
      if (!rc) rc = scan_row_run(p, &s, plan, body, in, &r, st_out, sc_out, e);
      for (int k = 0; k < s.n_state + s.n_scan_out && !rc && s.batched; k++) slice_copy(&out[k], 0, b, tmp[k], 1);
    }
    row_free(&r);
    for (int k = 0; k < 2 * CTRL_MAX_IO; k++) free(tmp[k]);
  }
  if (!st) p->sub->destroy(plan);
  return rc;
}

int ctrl__run_scan(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_in, (void)n_out;
  return exec_scan(p, NULL, in, out, e);
}

int ctrl__run_scan_state(eng_op_state *st, const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                         int n_out, err *e) {
  (void)n_in, (void)n_out;
  ctrl_plans *c = NULL;
  TRY(ctrl__state(st, p, &c, e));
  return exec_scan(p, c, in, out, e);
}
