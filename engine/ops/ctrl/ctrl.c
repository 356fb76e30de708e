// engine/ops/ctrl/ctrl.c: control flow: If and Loop (Scan in ctrl_scan.c),
// whose subgraphs (GRAPH attributes, loaded by engine/graph/load.c with
// their outer-scope names as extra node inputs) are planned as plans of
// their own by the backend's runner (eng_op_params.sub) and run per call or
// per iteration. Output shapes must be known when planning: If's are its
// branch's (cond known when planning) or the branches' common ones; Loop's
// carried values keep their shapes, and its scan outputs need the
// iteration count known when planning, or every input known (then the loop
// runs while planning). CPU only: the CUDA plan refuses these ops (no
// entries in ctrl_cuda.c) unless folded.
#include "engine/ops/ctrl/ctrl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// --- If

static int parse_if(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  const eng_graph *b[2] = {NULL, NULL};
  TRY(ctrl__graph(n, "then_branch", &b[0], e));
  TRY(ctrl__graph(n, "else_branch", &b[1], e));
  if (n->n_in - n->n_implicit != 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "takes one input (cond), got %d", n->n_in - n->n_implicit);
  TRY(ctrl__check_arity(b[0], "then_branch", 0, (size_t)n->n_out, e));
  TRY(ctrl__check_arity(b[1], "else_branch", 0, (size_t)n->n_out, e));
  p->node = n;
  return 0;
}

static const char *branch_name(int which) { return which ? "else_branch" : "then_branch"; }

static const eng_graph *branch(const eng_op_params *p, int which) {
  return eng_node_attr(p->node, branch_name(which))->g;
}

static int read_cond(const eng_tensor *c, int *out, err *e) {
  if (eng_numel(c->ndims, c->dims) != 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "cond has %lld elements, expected 1",
                   (long long)eng_numel(c->ndims, c->dims));
  if (c->dt != DT_BOOL) return err_set(e, ERR_INVALID_ARGUMENT, "cond is %s, expected BOOL", dtype_wire_name(c->dt));
  *out = *(const uint8_t *)c->data != 0;
  return 0;
}

// Output types and shapes of branch `which` for the node's inputs.
static int infer_branch(const eng_op_params *p, int which, const eng_tensor *in, eng_tensor *out, int n_out, err *e) {
  const eng_graph *b = branch(p, which);
  eng_tensor sub_in[CTRL_MAX_IO];
  ctrl__inputs(b, NULL, 0, in, sub_in);
  void *plan = NULL;
  TRY(ctrl__plan(p, NULL, which, b, &plan, e));
  int rc = p->sub->infer(plan, sub_in, eng_graph_n_inputs(b), out, (size_t)n_out, e);
  p->sub->destroy(plan);
  if (rc) return err_prefix(e, "%s: ", branch_name(which));
  for (int k = 0; k < n_out; k++) TRY(ctrl__no_string(&out[k], "output", (size_t)k, e));
  return 0;
}

static int infer_if(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_in;
  eng_tensor got[2][CTRL_MAX_IO];
  int c = 0;
  if (in[0].data) {  // known when planning: the branch taken, whatever the other's shapes
    TRY(read_cond(&in[0], &c, e));
    TRY(infer_branch(p, c ? 0 : 1, in, got[0], n_out, e));
    for (int k = 0; k < n_out; k++) out[k] = got[0][k];
  } else {
    TRY(infer_branch(p, 0, in, got[0], n_out, e));
    TRY(infer_branch(p, 1, in, got[1], n_out, e));
    for (int k = 0; k < n_out; k++) {
      char a[96], b[96];
      if (!ctrl__same(&got[0][k], &got[1][k]))
        return err_set(e, ERR_INVALID_ARGUMENT,
                       "output %d is %s from then_branch but %s from else_branch; branches of different shapes "
                       "need cond known when planning (a constant or a graph input of a model served with "
                       "max_batch_size 0), and this cond is computed at run time",
                       k, ctrl__desc(&got[0][k], a, sizeof a), ctrl__desc(&got[1][k], b, sizeof b));
      out[k] = got[0][k];
    }
  }
  for (int k = 0; k < n_out; k++) out[k].data = NULL;
  return 0;
}

static int exec_if(const eng_op_params *p, ctrl_plans *st, const eng_tensor *in, eng_tensor *out, int n_out, err *e) {
  int c = 0;
  TRY(read_cond(&in[0], &c, e));
  int which = c ? 0 : 1;
  const eng_graph *b = branch(p, which);
  eng_tensor sub_in[CTRL_MAX_IO], got[CTRL_MAX_IO];
  ctrl__inputs(b, NULL, 0, in, sub_in);
  void *plan = NULL;
  TRY(ctrl__plan(p, st, which, b, &plan, e));
  int rc = p->sub->run(plan, sub_in, eng_graph_n_inputs(b), got, (size_t)n_out, e);
  for (int k = 0; k < n_out && !rc; k++) {
    char a[96], w[96];
    if (!ctrl__same(&got[k], &out[k]))
      rc = err_set(e, ERR_INVALID_ARGUMENT, "%s gave output %d as %s, planned as %s", branch_name(which), k,
                   ctrl__desc(&got[k], a, sizeof a), ctrl__desc(&out[k], w, sizeof w));
    else if (ctrl__bytes(&got[k]))
      memcpy(out[k].data, got[k].data, ctrl__bytes(&got[k]));
  }
  if (!st) p->sub->destroy(plan);
  return rc;
}

static int run_if(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_in;
  return exec_if(p, NULL, in, out, n_out, e);
}

static int run_if_state(eng_op_state *st, const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                        int n_out, err *e) {
  (void)n_in;
  ctrl_plans *c = NULL;
  TRY(ctrl__state(st, p, &c, e));
  return exec_if(p, c, in, out, n_out, e);
}

// --- Loop
//
// Inputs: M (trip count, optional), cond (optional), N carried values,
// then the body's outer-scope values. Body: (iteration, cond, N carried)
// -> (cond, N carried, K scan outputs). Outputs: N final carried values,
// K scan outputs stacked along a new first axis.

static int parse_loop(const eng_graph *g, const eng_node *n, int opset, eng_op_params *p, err *e) {
  (void)g, (void)opset;
  const eng_graph *body = NULL;
  TRY(ctrl__graph(n, "body", &body, e));
  int own = n->n_in - n->n_implicit;
  if (own < 2) return err_set(e, ERR_INVALID_ARGUMENT, "needs inputs M and cond (either may be \"\"), got %d", own);
  if (n->in[0] < 0 && n->in[1] < 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "has neither a trip count M nor a condition: it would never end");
  int n_carried = own - 2;
  if (n->n_out < n_carried)
    return err_set(e, ERR_INVALID_ARGUMENT, "%d carried values but %d outputs", n_carried, n->n_out);
  TRY(ctrl__check_arity(body, "body", (size_t)own, (size_t)(1 + n->n_out), e));
  p->node = n;
  return 0;
}

// What a loop's run leaves: final carried values and stacked scan outputs,
// in malloc'd buffers (ctrl_run_free frees them).
typedef struct loop_result {
  int n_carried, n_scan;
  int64_t iters;
  eng_tensor carried[CTRL_MAX_IO];
  eng_tensor scan_elem[CTRL_MAX_IO];  // one iteration's element type and shape
  uint8_t *scan_buf[CTRL_MAX_IO];
  size_t scan_cap[CTRL_MAX_IO];
} loop_result;

static void loop_result_free(loop_result *r) {
  for (int k = 0; k < r->n_carried; k++) free(r->carried[k].data);
  for (int k = 0; k < r->n_scan; k++) free(r->scan_buf[k]);
}

static int copy_tensor(eng_tensor *dst, const eng_tensor *src, err *e) {
  size_t b = ctrl__bytes(src);
  void *d = malloc(b ? b : 1);
  if (!d) return err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory (%zu bytes)", b);
  if (b) memcpy(d, src->data, b);
  free(dst->data);
  *dst = *src;
  dst->data = d;
  dst->bytes = b;
  return 0;
}

static const eng_graph *loop_body(const eng_op_params *p) { return eng_node_attr(p->node, "body")->g; }

static int read_trip(const eng_tensor *m, int64_t *out, err *e) {
  if (eng_numel(m->ndims, m->dims) != 1 || m->dt != DT_INT64)
    return err_set(e, ERR_INVALID_ARGUMENT, "M must be one INT64, got %s", dtype_wire_name(m->dt));
  *out = *(const int64_t *)m->data;
  return 0;
}

// Runs the loop on in[] (every input's bytes given) into r.
static int loop_exec(const eng_op_params *p, ctrl_plans *st, const eng_tensor *in, int n_out, loop_result *r, err *e) {
  const eng_node *n = p->node;
  const eng_graph *body = loop_body(p);
  int own = n->n_in - n->n_implicit, nc = own - 2;
  memset(r, 0, sizeof *r);
  r->n_carried = nc;
  r->n_scan = n_out - nc;
  int64_t trip = INT64_MAX;
  int cond = 1;
  if (in[0].dt != DT_INVALID) TRY(read_trip(&in[0], &trip, e));
  if (in[1].dt != DT_INVALID) TRY(read_cond(&in[1], &cond, e));
  int rc = 0;
  for (int k = 0; k < nc && !rc; k++) {
    rc = ctrl__no_string(&in[2 + k], "carried value", (size_t)k, e);
    if (!rc) rc = copy_tensor(&r->carried[k], &in[2 + k], e);
  }
  void *plan = NULL;
  if (!rc) rc = ctrl__plan(p, st, 0, body, &plan, e);
  if (rc) {
    loop_result_free(r);
    return rc;
  }
  int64_t i = 0;
  for (; i < trip && cond && !rc; i++) {
    uint8_t c8 = 1;
    eng_tensor own_in[CTRL_MAX_IO], sub_in[CTRL_MAX_IO], got[CTRL_MAX_IO];
    memset(own_in, 0, 2 * sizeof own_in[0]);
    own_in[0].dt = DT_INT64;
    own_in[0].data = &i;
    own_in[0].bytes = sizeof i;
    own_in[1].dt = DT_BOOL;
    own_in[1].data = &c8;
    own_in[1].bytes = 1;
    for (int k = 0; k < nc; k++) own_in[2 + k] = r->carried[k];
    ctrl__inputs(body, own_in, (size_t)own, in, sub_in);
    if ((rc = p->sub->run(plan, sub_in, eng_graph_n_inputs(body), got, (size_t)(1 + n_out), e)) != 0) {
      err_prefix(e, "body, iteration %lld: ", (long long)i);
      break;
    }
    if ((rc = read_cond(&got[0], &cond, e)) != 0) break;
    for (int k = 0; k < nc && !rc; k++) rc = copy_tensor(&r->carried[k], &got[1 + k], e);
    for (int k = 0; k < r->n_scan && !rc; k++) {
      const eng_tensor *s = &got[1 + nc + k];
      char a[96], b[96];
      if ((rc = ctrl__no_string(s, "scan output", (size_t)k, e)) != 0) break;
      if (i == 0) r->scan_elem[k] = *s;
      else if (!ctrl__same(s, &r->scan_elem[k])) {
        rc = err_set(e, ERR_INVALID_ARGUMENT, "scan output %d is %s at iteration %lld but %s before", k,
                     ctrl__desc(s, a, sizeof a), (long long)i, ctrl__desc(&r->scan_elem[k], b, sizeof b));
        break;
      }
      size_t b1 = ctrl__bytes(s), need = b1 * (size_t)(i + 1);
      if (need > r->scan_cap[k]) {
        size_t cap = need * 2;
        uint8_t *nb = realloc(r->scan_buf[k], cap ? cap : 1);
        if (!nb) {
          rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "out of memory (%zu bytes)", cap);
          break;
        }
        r->scan_buf[k] = nb;
        r->scan_cap[k] = cap;
      }
      if (b1) memcpy(r->scan_buf[k] + b1 * (size_t)i, s->data, b1);
    }
  }
  r->iters = i;
  if (!st) p->sub->destroy(plan);
  if (rc) loop_result_free(r);
  return rc;
}

// Output k of a finished loop: a carried value, or a scan output of iters rows.
static eng_tensor loop_output(const loop_result *r, int k) {
  if (k < r->n_carried) return r->carried[k];
  eng_tensor t = r->scan_elem[k - r->n_carried];
  t.ndims = t.ndims + 1;
  memmove(&t.dims[1], &t.dims[0], (size_t)(t.ndims - 1) * sizeof t.dims[0]);
  t.dims[0] = r->iters;
  t.data = r->scan_buf[k - r->n_carried];
  return t;
}

// Whether every input's bytes are known (omitted ones aside).
static int all_known(const eng_tensor *in, int n_in) {
  for (int k = 0; k < n_in; k++)
    if (in[k].dt != DT_INVALID && !in[k].data && eng_numel(in[k].ndims, in[k].dims) > 0) return 0;
  return 1;
}

static int infer_loop(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  const eng_node *n = p->node;
  const eng_graph *body = loop_body(p);
  int own = n->n_in - n->n_implicit, nc = own - 2;
  if (!p->sub) return err_set(e, ERR_UNIMPLEMENTED, "a subgraph runs only inside a plan");
  if (all_known(in, n_in)) {  // the loop runs now: its shapes are what it gives
    loop_result r;
    TRY(loop_exec(p, NULL, in, n_out, &r, e));
    for (int k = 0; k < n_out; k++) {
      out[k] = loop_output(&r, k);
      if (k >= nc && r.iters == 0) {  // no iteration gave a scan output: the body's shapes say
        loop_result_free(&r);
        goto by_body;
      }
      out[k].data = NULL;
    }
    loop_result_free(&r);
    return 0;
  }
by_body:;
  // the first iteration's shapes, carried values as given (a body that
  // reads the iteration number while inferring shapes reads 0; every
  // iteration's shapes are checked against these as it runs)
  eng_tensor own_in[CTRL_MAX_IO], sub_in[CTRL_MAX_IO], got[CTRL_MAX_IO];
  int64_t iter0 = 0;
  uint8_t cond1 = 1;
  memset(own_in, 0, 2 * sizeof own_in[0]);
  own_in[0].dt = DT_INT64;
  own_in[0].data = &iter0;
  own_in[0].bytes = sizeof iter0;
  own_in[1].dt = DT_BOOL;
  own_in[1].data = &cond1;
  own_in[1].bytes = 1;
  for (int k = 0; k < nc; k++) {
    TRY(ctrl__no_string(&in[2 + k], "carried value", (size_t)k, e));
    own_in[2 + k] = in[2 + k];
  }
  ctrl__inputs(body, own_in, (size_t)own, in, sub_in);
  void *plan = NULL;
  TRY(ctrl__plan(p, NULL, 0, body, &plan, e));
  int rc = p->sub->infer(plan, sub_in, eng_graph_n_inputs(body), got, (size_t)(1 + n_out), e);
  p->sub->destroy(plan);
  if (rc) return err_prefix(e, "body: ");
  for (int k = 0; k < nc; k++) {
    char a[96], b[96];
    if (!ctrl__same(&got[1 + k], &in[2 + k]))
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "carried value %d is %s before an iteration and %s after: a shape that changes between "
                     "iterations needs every input of the Loop known when planning", k,
                     ctrl__desc(&in[2 + k], a, sizeof a), ctrl__desc(&got[1 + k], b, sizeof b));
    out[k] = in[2 + k];
    out[k].data = NULL;
  }
  if (n_out > nc) {
    // scan outputs: as many rows as iterations, which must be known now
    int64_t trip = -1;
    int cond = 1, known = 1;
    if (in[0].dt == DT_INVALID) known = 0;
    else if (in[0].data) TRY(read_trip(&in[0], &trip, e));
    else known = 0;
    if (in[1].dt != DT_INVALID) {
      if (in[1].data) TRY(read_cond(&in[1], &cond, e));
      else known = 0;
    }
    // the body may end the loop early unless its cond is its input passed
    // through or a constant true
    int bc = eng_graph_output_value(body, 0);
    for (int hops = 0; hops < 64; hops++) {  // through Identity nodes (exporters write cond_out = Identity(cond_in))
      const eng_value *x = eng_graph_value(body, (size_t)bc);
      if (x->kind != ENG_VALUE_NODE) break;
      const eng_node *idn = eng_graph_node(body, (size_t)x->index);
      if (strcmp(idn->op_type, "Identity") != 0 || idn->n_in < 1 || idn->in[0] < 0) break;
      bc = idn->in[0];
    }
    int through = bc == eng_graph_input_value(body, 1);
    int always = got[0].data && got[0].dt == DT_BOOL && *(const uint8_t *)got[0].data;
    if (!known || !(through || always))
      return err_set(e, ERR_INVALID_ARGUMENT,
                     "the scan outputs' length is the number of iterations, which is not known when planning "
                     "(M and cond must be known then, and the body's cond its input passed through or a constant "
                     "true), nor are all the Loop's inputs");
    int64_t iters = cond ? (trip < 0 ? 0 : trip) : 0;
    for (int k = nc; k < n_out; k++) {
      eng_tensor t = got[1 + k];
      TRY(ctrl__no_string(&t, "scan output", (size_t)(k - nc), e));
      if (t.ndims + 1 > ENG_MAX_DIMS)
        return err_set(e, ERR_INVALID_ARGUMENT, "scan output %d has rank %d, at most %d supported", k - nc,
                       t.ndims + 1, ENG_MAX_DIMS);
      memmove(&t.dims[1], &t.dims[0], (size_t)t.ndims * sizeof t.dims[0]);
      t.ndims++;
      t.dims[0] = iters;
      t.data = NULL;
      out[k] = t;
    }
  }
  return 0;
}

static int exec_loop(const eng_op_params *p, ctrl_plans *st, const eng_tensor *in, eng_tensor *out, int n_out, err *e) {
  loop_result r;
  TRY(loop_exec(p, st, in, n_out, &r, e));
  int rc = 0;
  for (int k = 0; k < n_out && !rc; k++) {
    if (out[k].dt == DT_INVALID) continue;  // omitted
    eng_tensor t = loop_output(&r, k);
    char a[96], b[96];
    if (k >= r.n_carried && r.iters == 0) continue;  // no rows: nothing to write
    if (!ctrl__same(&t, &out[k]))
      rc = err_set(e, ERR_INVALID_ARGUMENT, "output %d is %s after %lld iterations, planned as %s", k,
                   ctrl__desc(&t, a, sizeof a), (long long)r.iters, ctrl__desc(&out[k], b, sizeof b));
    else if (ctrl__bytes(&t))
      memcpy(out[k].data, t.data, ctrl__bytes(&t));
  }
  loop_result_free(&r);
  return rc;
}

static int run_loop(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out, err *e) {
  (void)n_in;
  return exec_loop(p, NULL, in, out, n_out, e);
}

static int run_loop_state(eng_op_state *st, const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out,
                          int n_out, err *e) {
  (void)n_in;
  ctrl_plans *c = NULL;
  TRY(ctrl__state(st, p, &c, e));
  return exec_loop(p, c, in, out, n_out, e);
}

// --- OptionalHasElement, OptionalGetElement on plain tensors: a tensor
// given is an optional holding it; an input omitted ("" or none) is an
// empty one. Optional and sequence values themselves have no KServe form
// and no plan value; these two cover what a graph of tensors can ask.

static int infer_has_element(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                             err *e) {
  (void)p, (void)in, (void)n_in, (void)n_out, (void)e;
  memset(&out[0], 0, sizeof out[0]);
  out[0].dt = DT_BOOL;
  return 0;
}

static int run_has_element(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                           err *e) {
  (void)p, (void)n_out, (void)e;
  *(uint8_t *)out[0].data = n_in > 0 && in[0].dt != DT_INVALID;
  return 0;
}

static int infer_get_element(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                             err *e) {
  (void)p, (void)n_in, (void)n_out, (void)e;
  out[0] = in[0];
  out[0].data = NULL;
  return 0;
}

static int run_get_element(const eng_op_params *p, const eng_tensor *in, int n_in, eng_tensor *out, int n_out,
                           err *e) {
  (void)p, (void)n_in, (void)n_out, (void)e;
  if (out[0].data != in[0].data && ctrl__bytes(&in[0])) memcpy(out[0].data, in[0].data, ctrl__bytes(&in[0]));
  return 0;
}

// --- table

const eng_op_def eng_ops__ctrl[] = {
    {"If", 1, 1 + CTRL_MAX_IO, 1, CTRL_MAX_IO, ENG_OP_HOST_PREF0, parse_if, infer_if, run_if, 0, run_if_state,
     ctrl__plans_destroy},
    {"Loop", 2, 2 + CTRL_MAX_IO, 1, CTRL_MAX_IO, ENG_OP_HOST_PREF0 | ENG_OP_HOST_PREF1 | ENG_OP_IN0_OPTIONAL, parse_loop, infer_loop,
     run_loop, 0, run_loop_state, ctrl__plans_destroy},
    {"OptionalHasElement", 0, 1, 1, 1, ENG_OP_IN0_OPTIONAL | ENG_OP_SHAPE_ONLY, op_parse_none, infer_has_element,
     run_has_element, 0, NULL, NULL},
    {"OptionalGetElement", 1, 1, 1, 1, ENG_OP_ALIAS, op_parse_none, infer_get_element, run_get_element, 0, NULL, NULL},
    {"Scan", 1, CTRL_MAX_IO, 1, CTRL_MAX_IO, ENG_OP_IN0_OPTIONAL, ctrl__parse_scan, ctrl__infer_scan, ctrl__run_scan, 0,
     ctrl__run_scan_state, ctrl__plans_destroy},
};
const size_t eng_ops__n_ctrl = sizeof eng_ops__ctrl / sizeof eng_ops__ctrl[0];
