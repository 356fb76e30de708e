// engine/cpu/plan_sub.c: the CPU plan's subgraph runner (eng_sub_api, ops.h)
// for the control-flow ops (engine/ops/ctrl/): each subgraph becomes a plan
// of its own, max_batch 0, planned at its first run and re-planned when a
// run's shapes differ, as any plan.
#include "engine/cpu/plan.h"
#include "engine/cpu/plan_internal.h"

static int sub_create(const eng_graph *g, void **plan, err *e) {
  eng_plan *p = NULL;
  TRY(eng_plan_create(g, 0, &p, e));
  *plan = p;
  return 0;
}

static void sub_destroy(void *plan) { eng_plan_destroy(plan); }

static int sub_infer(void *plan, const eng_tensor *in, size_t n_in, eng_tensor *out, size_t n_out, err *e) {
  return eng_plan_infer(plan, in, n_in, out, n_out, e);
}

static int sub_run(void *plan, const eng_tensor *in, size_t n_in, eng_tensor *out, size_t n_out, err *e) {
  return eng_plan_run(plan, in, n_in, out, n_out, e);
}

const eng_sub_api eng_plan__sub_api = {sub_create, sub_destroy, sub_infer, sub_run};
