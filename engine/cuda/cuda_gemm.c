// cuda_gemm.c: row-major GEMM with fused epilogues on cuBLASLt.
//
// cuBLASLt is column-major. A row-major [r,c] matrix is the same memory as a
// column-major [c,r] one, i.e. its transpose, so the row-major product
// C = op(A) op(B) is computed as the column-major C^T = op(B)^T op(A)^T:
// cuBLAS's first operand is our B, its second our A, and its m and n are our
// n and m. A bias of n (per row-major column) is then a bias per column-major
// row, which is exactly what cuBLASLt's BIAS epilogues broadcast.
//
// Descriptors, layouts and the algorithm the heuristic picked are cached per
// (shape, transposes, epilogue, dtype, pointer alignment): creating them
// allocates host memory and the heuristic query costs tens of microseconds,
// neither of which belongs on the request path after a shape's first call.
//
// Autotuning replaces an entry's algorithm by the fastest of the heuristic's
// candidates, timed once per shape (see cuda_gemm.h); the leading dimensions
// are the dense ones the key's sizes imply and there is no batch stride, so
// the key is the whole problem cuBLASLt sees.
#include "engine/cuda/cuda_gemm.h"

#include <cublasLt.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/cuda_check.h"
#include "kernels/base/clock.h"

// Only int32 fields, so the key has no padding and compares with memcmp.
typedef struct gemm_key {
  int32_t m, n, k;
  int32_t trans_a, trans_b, epilogue, dtype;
  // Lowest set bit of each address, capped at 256: the heuristic picks
  // algorithms for the alignment it is shown (the bias's through its pointer).
  int32_t align_a, align_b, align_c, align_bias;
  int32_t align_z;  // the residual's (read as cuBLASLt's C), 0 without one
} gemm_key;

typedef struct gemm_entry {
  gemm_key key;
  bool valid;
  uint64_t last_use;
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, lc;  // cuBLAS's A (our B), B (our A), C = D
  cublasLtMatmulAlgo_t algo;
  bool tuned;  // algo is the timed choice (or timing had nothing to choose from)
} gemm_entry;

struct eng_gemm_lt {
  cublasLtHandle_t lt;
  int device;
  void *workspace;
  size_t workspace_bytes;
  gemm_entry *cache;
  int cache_cap;
  uint64_t tick;
  eng_gemm_lt_stats st;
  eng_gemm_tuner *tuner;  // borrowed, or NULL
  bool dry;               // eng_gemm_lt_set_dry
  bool no_clusters;       // eng_gemm_lt_set_no_clusters
  cudaEvent_t ev[2];      // timing, made at the first tuning
};

// A timed choice, valid for any eng_gemm_lt on the tuner's device with the
// same workspace size.
typedef struct tune_entry {
  gemm_key key;
  size_t workspace_bytes;
  cublasLtMatmulAlgo_t algo;
} tune_entry;

// Enough for every shape of a few models' signatures; beyond it the oldest
// choice is forgotten (its shape is timed again if it comes back).
#define TUNER_CAP 512

struct eng_gemm_tuner {
  int device;
  eng_gemm_tune_opts o;
  tune_entry *e;
  int n, next;  // entries in use; where the next one goes once full
  eng_gemm_tuner_stats st;
};

// One call's operands, as eng_gemm_lt_run_res got them.
typedef struct gemm_call {
  void *C;
  const void *A, *B, *Z;
  cudaStream_t stream;
} gemm_call;

const char *eng_gemm_epilogue_name(eng_gemm_epilogue epi) {
  switch (epi) {
    case ENG_GEMM_EPI_NONE: return "none";
    case ENG_GEMM_EPI_RELU: return "relu";
    case ENG_GEMM_EPI_GELU: return "gelu";
    case ENG_GEMM_EPI_BIAS: return "bias";
    case ENG_GEMM_EPI_BIAS_RELU: return "bias_relu";
    case ENG_GEMM_EPI_BIAS_GELU: return "bias_gelu";
  }
  return "?";
}

const char *eng_gemm_dtype_name(eng_gemm_dtype dt) {
  switch (dt) {
    case ENG_GEMM_FP32: return "fp32";
    case ENG_GEMM_FP32_TF32: return "fp32_tf32";
    case ENG_GEMM_FP16: return "fp16";
    case ENG_GEMM_BF16: return "bf16";
  }
  return "?";
}

static bool epi_has_bias(eng_gemm_epilogue epi) {
  return epi == ENG_GEMM_EPI_BIAS || epi == ENG_GEMM_EPI_BIAS_RELU || epi == ENG_GEMM_EPI_BIAS_GELU;
}

static cublasLtEpilogue_t epi_lt(eng_gemm_epilogue epi) {
  switch (epi) {
    case ENG_GEMM_EPI_NONE: return CUBLASLT_EPILOGUE_DEFAULT;
    case ENG_GEMM_EPI_RELU: return CUBLASLT_EPILOGUE_RELU;
    case ENG_GEMM_EPI_GELU: return CUBLASLT_EPILOGUE_GELU;
    case ENG_GEMM_EPI_BIAS: return CUBLASLT_EPILOGUE_BIAS;
    case ENG_GEMM_EPI_BIAS_RELU: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case ENG_GEMM_EPI_BIAS_GELU: return CUBLASLT_EPILOGUE_GELU_BIAS;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

static int32_t ptr_align(const void *p) {
  uintptr_t v = (uintptr_t)p;
  uintptr_t low = v & (~v + 1);
  return (low == 0 || low > 256) ? 256 : (int32_t)low;
}

static void entry_release(gemm_entry *en) {
  if (en->lc) (void)cublasLtMatrixLayoutDestroy(en->lc);
  if (en->lb) (void)cublasLtMatrixLayoutDestroy(en->lb);
  if (en->la) (void)cublasLtMatrixLayoutDestroy(en->la);
  if (en->op) (void)cublasLtMatmulDescDestroy(en->op);
  memset(en, 0, sizeof *en);
}

int eng_gemm_lt_create(eng_gemm_lt **out, size_t workspace_bytes, int cache_cap, err *e) {
  if (!out || cache_cap < 0)
    return err_set(e, ERR_INVALID_ARGUMENT, "gemm: bad arguments (cache_cap %d)", cache_cap);
  *out = NULL;
  eng_gemm_lt *g = calloc(1, sizeof *g);
  if (!g) return err_set(e, ERR_RESOURCE_EXHAUSTED, "gemm: out of host memory");
  g->cache_cap = cache_cap > 0 ? cache_cap : 64;
  g->cache = calloc((size_t)g->cache_cap, sizeof *g->cache);
  int rc;
  if (!g->cache) {
    rc = err_set(e, ERR_RESOURCE_EXHAUSTED, "gemm: out of host memory for %d cache entries", g->cache_cap);
    goto fail;
  }
  if ((rc = CUDA_OK(e, cudaGetDevice(&g->device))) != 0) goto fail;
  if ((rc = CUBLAS_OK(e, cublasLtCreate(&g->lt))) != 0) goto fail;
  if (workspace_bytes > 0) {
    if ((rc = CUDA_OK(e, cudaMalloc(&g->workspace, workspace_bytes))) != 0) {
      err_prefix(e, "gemm workspace of %zu bytes on device %d: ", workspace_bytes, g->device);
      goto fail;
    }
    g->workspace_bytes = workspace_bytes;
  }
  *out = g;
  return 0;
fail:
  eng_gemm_lt_destroy(g);
  return rc;
}

void eng_gemm_lt_destroy(eng_gemm_lt *g) {
  if (!g) return;
  if (g->cache)
    for (int i = 0; i < g->cache_cap; i++)
      if (g->cache[i].valid) entry_release(&g->cache[i]);
  free(g->cache);
  for (int i = 0; i < 2; i++)
    if (g->ev[i]) (void)cudaEventDestroy(g->ev[i]);
  if (g->workspace) (void)cudaFree(g->workspace);
  if (g->lt) (void)cublasLtDestroy(g->lt);
  (void)cudaGetLastError();
  free(g);
}

void eng_gemm_lt_stats_get(const eng_gemm_lt *g, eng_gemm_lt_stats *s) {
  *s = g->st;
  s->cached = 0;
  for (int i = 0; i < g->cache_cap; i++) s->cached += g->cache[i].valid;
}

// A cuBLASLt call in a builder with `int rc`, `err *e` and a `fail:` label.
#define STEP(call)                              \
  do {                                          \
    if ((rc = CUBLAS_OK(e, call)) != 0) goto fail; \
  } while (0)

// The heuristic's search preferences for key: the workspace bound and the
// operands' alignments.
static int make_pref(const eng_gemm_lt *g, const gemm_key *key, cublasLtMatmulPreference_t *out, err *e) {
  cublasLtMatmulPreference_t pref = NULL;
  int rc;
  STEP(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t ws = g->workspace_bytes;
  STEP(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  // The heuristic assumes 256-byte aligned buffers unless told otherwise; an
  // algorithm picked that way may fail on a tensor at an odd offset.
  uint32_t al_a = (uint32_t)key->align_b, al_b = (uint32_t)key->align_a, al_d = (uint32_t)key->align_c;
  uint32_t al_c = key->align_z ? (uint32_t)key->align_z : al_d;  // cuBLASLt's C: the residual, or D
  STEP(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a));
  STEP(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b));
  STEP(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c));
  STEP(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_d, sizeof al_d));
  *out = pref;
  return 0;
fail:
  if (pref) (void)cublasLtMatmulPreferenceDestroy(pref);
  return rc;
}

// The thread-block cluster cuBLASLt reports for a (CUBLASLT_CLUSTER_SHAPE_AUTO
// when it does not say, -1 when it cannot be read).
static int algo_cluster(const cublasLtMatmulAlgo_t *a) {
  uint16_t id = CUBLASLT_CLUSTER_SHAPE_AUTO;
  size_t got = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &id, sizeof id, &got) !=
      CUBLAS_STATUS_SUCCESS)
    return -1;
  return (int)id;
}

// With no_clusters: whether the heuristic's answer r may be used.
static bool algo_allowed(const eng_gemm_lt *g, const cublasLtMatmulHeuristicResult_t *r) {
  return !g->no_clusters || algo_cluster(&r->algo) == CUBLASLT_CLUSTER_SHAPE_1x1x1;
}

// With no_clusters, en's first answer had a cluster and none of the others
// was without one: asks cuBLASLt whether the same algorithm runs with a 1x1x1
// cluster, and takes that when it does.
static void force_no_cluster(eng_gemm_lt *g, gemm_entry *en) {
  cublasLtMatmulAlgo_t a = en->algo;
  uint16_t one = CUBLASLT_CLUSTER_SHAPE_1x1x1;
  cublasLtMatmulHeuristicResult_t chk;
  memset(&chk, 0, sizeof chk);
  if (cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &one, sizeof one) ==
          CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulAlgoCheck(g->lt, en->op, en->la, en->lb, en->lc, en->lc, &a, &chk) == CUBLAS_STATUS_SUCCESS &&
      chk.workspaceSize <= g->workspace_bytes) {
    en->algo = a;
    g->st.cluster_forced++;
  } else {
    g->st.cluster_kept++;
  }
}

// Builds descriptors and asks the heuristic once for key; fills en on success.
// bias is this call's (NULL without a bias epilogue): the heuristic reads its
// alignment from the pointer.
static int entry_build(eng_gemm_lt *g, gemm_entry *en, const gemm_key *key, const void *bias, err *e) {
  memset(en, 0, sizeof *en);
  cudaDataType_t t = key->dtype == ENG_GEMM_FP16 ? CUDA_R_16F : key->dtype == ENG_GEMM_BF16 ? CUDA_R_16BF : CUDA_R_32F;
  cublasComputeType_t ct =
      key->dtype == ENG_GEMM_FP32_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  cublasOperation_t op_a = key->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLAS A = our B
  cublasOperation_t op_b = key->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLAS B = our A
  cublasLtEpilogue_t epi = epi_lt((eng_gemm_epilogue)key->epilogue);
  uint64_t m = (uint64_t)key->m, n = (uint64_t)key->n, k = (uint64_t)key->k;
  cublasLtMatmulPreference_t pref = NULL;
  int rc;
  STEP(cublasLtMatmulDescCreate(&en->op, ct, CUDA_R_32F));
  STEP(cublasLtMatmulDescSetAttribute(en->op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
  STEP(cublasLtMatmulDescSetAttribute(en->op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
  STEP(cublasLtMatmulDescSetAttribute(en->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
  if (epi_has_bias((eng_gemm_epilogue)key->epilogue)) {
    int32_t bt = (int32_t)t;
    STEP(cublasLtMatmulDescSetAttribute(en->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
    STEP(cublasLtMatmulDescSetAttribute(en->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  }
  // Column-major views: our B is [n,k] (ld n) or, transposed, [k,n] (ld k);
  // our A is [k,m] (ld k) or [m,k] (ld m); C is [n,m] (ld n).
  if (key->trans_b) STEP(cublasLtMatrixLayoutCreate(&en->la, t, k, n, (int64_t)k));
  else STEP(cublasLtMatrixLayoutCreate(&en->la, t, n, k, (int64_t)n));
  if (key->trans_a) STEP(cublasLtMatrixLayoutCreate(&en->lb, t, m, k, (int64_t)m));
  else STEP(cublasLtMatrixLayoutCreate(&en->lb, t, k, m, (int64_t)k));
  STEP(cublasLtMatrixLayoutCreate(&en->lc, t, n, m, (int64_t)n));
  if ((rc = make_pref(g, key, &pref, e)) != 0) goto fail;


  // one answer, or with no_clusters enough to find one without a cluster
  cublasLtMatmulHeuristicResult_t res[32];
  memset(res, 0, sizeof res);
  int found = 0;
  g->st.heuristic_queries++;
  cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(g->lt, en->op, en->la, en->lb, en->lc, en->lc,
                                                     pref, g->no_clusters ? 32 : 1, res, &found);
  if (hs == CUBLAS_STATUS_NOT_SUPPORTED || (hs == CUBLAS_STATUS_SUCCESS && found == 0)) {
    rc = err_set(e, ERR_UNIMPLEMENTED,
                 "gemm: cuBLASLt has no algorithm for m=%d n=%d k=%d trans_a=%d trans_b=%d "
                 "epilogue %s dtype %s (alignments A %d, B %d, C %d, bias %d; workspace %zu)",
                 key->m, key->n, key->k, key->trans_a, key->trans_b,
                 eng_gemm_epilogue_name((eng_gemm_epilogue)key->epilogue),
                 eng_gemm_dtype_name((eng_gemm_dtype)key->dtype), key->align_a, key->align_b,
                 key->align_c, key->align_bias, g->workspace_bytes);
    goto fail;
  }
  STEP(hs);
#undef STEP
  (void)cublasLtMatmulPreferenceDestroy(pref);
  int pick = -1;
  for (int i = 0; i < found && pick < 0; i++)
    if (res[i].state == CUBLAS_STATUS_SUCCESS && algo_allowed(g, &res[i])) pick = i;
  en->algo = res[pick < 0 ? 0 : pick].algo;
  if (pick < 0) force_no_cluster(g, en);
  en->key = *key;
  en->valid = true;
  return 0;
fail:
  if (pref) (void)cublasLtMatmulPreferenceDestroy(pref);
  entry_release(en);
  return rc;
}

static int lookup(eng_gemm_lt *g, const gemm_key *key, const void *bias, gemm_entry **out, err *e) {
  gemm_entry *victim = NULL;
  for (int i = 0; i < g->cache_cap; i++) {
    gemm_entry *en = &g->cache[i];
    if (en->valid && memcmp(&en->key, key, sizeof *key) == 0) {
      en->last_use = ++g->tick;
      g->st.cache_hits++;
      *out = en;
      return 0;
    }
    if (!victim || (victim->valid && (!en->valid || en->last_use < victim->last_use))) victim = en;
  }
  g->st.cache_misses++;
  if (victim->valid) {
    entry_release(victim);
    g->st.evictions++;
  }
  TRY(entry_build(g, victim, key, bias, e));
  victim->last_use = ++g->tick;
  *out = victim;
  return 0;
}

int eng_gemm_lt_run(eng_gemm_lt *g, void *C, const void *A, const void *B, const void *bias,
                    int m, int n, int k, bool trans_a, bool trans_b, eng_gemm_epilogue epilogue,
                    eng_gemm_dtype dtype, cudaStream_t stream, err *e) {
  return eng_gemm_lt_run_res(g, C, A, B, bias, NULL, m, n, k, trans_a, trans_b, epilogue, dtype,
                             stream, e);
}

// --- autotuning

int eng_gemm_tuner_create(eng_gemm_tuner **out, const eng_gemm_tune_opts *opts, err *e) {
  if (!out) return err_set(e, ERR_INVALID_ARGUMENT, "gemm tuner: NULL out");
  *out = NULL;
  eng_gemm_tune_opts o = {0};
  if (opts) o = *opts;
  if (o.max_candidates < 0 || o.max_candidates > 32 || o.budget_ms < 0 || o.reps < 0 || o.reps > 1000 ||
      o.rounds < 0 || o.rounds > 100 || !(o.min_flops >= 0))
    return err_set(e, ERR_INVALID_ARGUMENT,
                   "gemm tuner: bad options (max_candidates %d of 0..32, budget_ms %d, reps %d, rounds %d, "
                   "min_flops %g)",
                   o.max_candidates, o.budget_ms, o.reps, o.rounds, o.min_flops);
  if (!o.max_candidates) o.max_candidates = 16;
  if (!o.budget_ms) o.budget_ms = 200;
  if (!o.reps) o.reps = 8;
  if (!o.rounds) o.rounds = 3;
  if (o.min_flops == 0) o.min_flops = 16777216.0;
  eng_gemm_tuner *t = calloc(1, sizeof *t);
  if (!t) return err_set(e, ERR_RESOURCE_EXHAUSTED, "gemm tuner: out of host memory");
  t->e = calloc(TUNER_CAP, sizeof *t->e);
  if (!t->e) {
    free(t);
    return err_set(e, ERR_RESOURCE_EXHAUSTED, "gemm tuner: out of host memory");
  }
  int rc = CUDA_OK(e, cudaGetDevice(&t->device));
  if (rc) {
    eng_gemm_tuner_destroy(t);
    return rc;
  }
  t->o = o;
  *out = t;
  return 0;
}

void eng_gemm_tuner_destroy(eng_gemm_tuner *t) {
  if (!t) return;
  free(t->e);
  free(t);
}

void eng_gemm_tuner_stats_get(const eng_gemm_tuner *t, eng_gemm_tuner_stats *s) {
  *s = t->st;
  s->entries = t->n;
}

void eng_gemm_lt_set_tuner(eng_gemm_lt *g, eng_gemm_tuner *t) {
  g->tuner = t && t->device == g->device ? t : NULL;
}

void eng_gemm_lt_set_dry(eng_gemm_lt *g, bool dry) { g->dry = dry; }

void eng_gemm_lt_set_no_clusters(eng_gemm_lt *g, bool no_clusters) {
  if (g->no_clusters == no_clusters) return;
  g->no_clusters = no_clusters;
  for (int i = 0; i < g->cache_cap; i++)  // chosen under the other rule: built again at their next call
    if (g->cache[i].valid) entry_release(&g->cache[i]);
}

static const tune_entry *tuner_find(const eng_gemm_tuner *t, const gemm_key *key, size_t ws) {
  for (int i = 0; i < t->n; i++)
    if (t->e[i].workspace_bytes == ws && memcmp(&t->e[i].key, key, sizeof *key) == 0) return &t->e[i];
  return NULL;
}

static void tuner_put(eng_gemm_tuner *t, const gemm_key *key, size_t ws, const cublasLtMatmulAlgo_t *algo) {
  tune_entry *te;
  if (t->n < TUNER_CAP) {
    te = &t->e[t->n++];
  } else {
    te = &t->e[t->next];
    t->next = (t->next + 1) % TUNER_CAP;
  }
  te->key = *key;
  te->workspace_bytes = ws;
  te->algo = *algo;
}

static cublasStatus_t matmul(eng_gemm_lt *g, const gemm_entry *en, const cublasLtMatmulAlgo_t *algo,
                             const gemm_call *c) {
  const float alpha = 1.0f, beta = c->Z ? 1.0f : 0.0f;
  return cublasLtMatmul(g->lt, en->op, &alpha, c->B, en->la, c->A, en->lb, &beta, c->Z ? c->Z : c->C,
                        en->lc, c->C, en->lc, algo, g->workspace, g->workspace_bytes, c->stream);
}

// Captures reps runs of algo into a graph, so a timed launch measures the
// device alone (a small product takes less time on the GPU than cuBLASLt's
// launch on the host) as a plan's graph replays it. *exec NULL when the
// stream cannot capture (the caller times plain launches); 1 when the
// algorithm fails to run (skip it).
static int capture_runs(eng_gemm_lt *g, const gemm_entry *en, const cublasLtMatmulAlgo_t *algo,
                        const gemm_call *c, int reps, cudaGraphExec_t *exec) {
  *exec = NULL;
  if (cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
  for (int r = 0; r < reps && st == CUBLAS_STATUS_SUCCESS; r++) st = matmul(g, en, algo, c);
  cudaGraph_t graph = NULL;
  cudaError_t ce = cudaStreamEndCapture(c->stream, &graph);
  if (ce == cudaSuccess && st == CUBLAS_STATUS_SUCCESS && graph)
    ce = cudaGraphInstantiate(exec, graph, 0);
  if (graph) (void)cudaGraphDestroy(graph);
  (void)cudaGetLastError();
  if (st != CUBLAS_STATUS_SUCCESS) {
    if (*exec) (void)cudaGraphExecDestroy(*exec);
    *exec = NULL;
    return 1;
  }
  if (ce != cudaSuccess) *exec = NULL;
  return 0;
}

// One candidate's device time per run in *us, or -1 when it fails to run.
// Returns nonzero only for CUDA trouble (the events, the stream).
static int time_candidate(eng_gemm_lt *g, const gemm_entry *en, const cublasLtMatmulAlgo_t *algo,
                          const gemm_call *c, float *us, err *e) {
  const eng_gemm_tune_opts *o = &g->tuner->o;
  *us = -1.0f;
  if (matmul(g, en, algo, c) != CUBLAS_STATUS_SUCCESS) {  // also the warm-up
    (void)cudaGetLastError();
    return 0;
  }
  cudaGraphExec_t exec = NULL;
  if (capture_runs(g, en, algo, c, o->reps, &exec)) return 0;
  int rc = 0;
  float best = -1.0f;
  for (int r = -1; r < o->rounds && !rc; r++) {  // round -1 warms the graph up, untimed
    if (r >= 0) rc = CUDA_OK(e, cudaEventRecord(g->ev[0], c->stream));
    if (exec) {
      if (!rc) rc = CUDA_OK(e, cudaGraphLaunch(exec, c->stream));
    } else {
      for (int k = 0; k < o->reps && !rc; k++)
        if (matmul(g, en, algo, c) != CUBLAS_STATUS_SUCCESS) {
          (void)cudaGetLastError();
          goto out;  // best stays -1: skipped
        }
    }
    if (r < 0 || rc) continue;
    float ms = 0.0f;
    if (!(rc = CUDA_OK(e, cudaEventRecord(g->ev[1], c->stream))) &&
        !(rc = CUDA_OK(e, cudaEventSynchronize(g->ev[1]))) &&
        !(rc = CUDA_OK(e, cudaEventElapsedTime(&ms, g->ev[0], g->ev[1]))))
      if (best < 0 || ms < best) best = ms;
  }
  if (!rc && best >= 0) *us = best * 1000.0f / (float)o->reps;
out:
  if (exec) (void)cudaGraphExecDestroy(exec);
  return rc;
}

// Whether Z and C share bytes: timing would then add the residual again at every run.
static bool aliases(const gemm_call *c, size_t bytes) {
  if (!c->Z) return false;
  uintptr_t z = (uintptr_t)c->Z, y = (uintptr_t)c->C;
  return z < y + bytes && y < z + bytes;
}

// Replaces en's algorithm by the fastest candidate (cuda_gemm.h). Leaves en
// untuned where it cannot time now: inside a capture, or the residual is C
// outside a dry pass.
static int tune(eng_gemm_lt *g, gemm_entry *en, const gemm_call *c, err *e) {
  eng_gemm_tuner *t = g->tuner;
  if (2.0 * en->key.m * en->key.n * en->key.k < t->o.min_flops) {
    en->tuned = true;
    g->st.tune_small++;
    return 0;
  }
  const tune_entry *known = tuner_find(t, &en->key, g->workspace_bytes);
  // a choice timed by an object that allowed clusters is not this one's to take
  if (known && g->no_clusters && algo_cluster(&known->algo) != CUBLASLT_CLUSTER_SHAPE_1x1x1) known = NULL;
  if (known) {
    en->algo = known->algo;
    en->tuned = true;
    g->st.tune_adopted++;
    return 0;
  }
  enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(c->stream, &cs) != cudaSuccess) {
    (void)cudaGetLastError();
    cs = cudaStreamCaptureStatusInvalidated;  // unknown: do not time
  }
  size_t esize = en->key.dtype == ENG_GEMM_FP16 || en->key.dtype == ENG_GEMM_BF16 ? 2 : 4;
  if (cs != cudaStreamCaptureStatusNone || (!g->dry && aliases(c, (size_t)en->key.m * (size_t)en->key.n * esize))) {
    g->st.tune_skipped++;
    return 0;
  }
  uint64_t t0 = clock_mono_ns();
  for (int i = 0; i < 2; i++)
    if (!g->ev[i]) CUDA_TRY(e, cudaEventCreate(&g->ev[i]));
  cublasLtMatmulHeuristicResult_t res[32];
  memset(res, 0, sizeof res);
  int found = 0;
  cublasLtMatmulPreference_t pref = NULL;
  TRY(make_pref(g, &en->key, &pref, e));
  g->st.heuristic_queries++;
  cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(g->lt, en->op, en->la, en->lb, en->lc, en->lc, pref,
                                                     t->o.max_candidates, res, &found);
  (void)cublasLtMatmulPreferenceDestroy(pref);
  if (hs != CUBLAS_STATUS_SUCCESS) found = 0;  // keep the first answer, which did work
  int best = -1, timed = 0;
  float best_us = 0.0f, first_us = -1.0f;
  int rc = 0;
  uint64_t budget = (uint64_t)t->o.budget_ms * 1000000u;
  for (int i = 0; i < found && !rc; i++) {
    if (res[i].state != CUBLAS_STATUS_SUCCESS || res[i].workspaceSize > g->workspace_bytes) continue;
    if (!algo_allowed(g, &res[i])) continue;  // the entry's own (forced) choice stays when none is
    if (timed > 0 && clock_mono_ns() - t0 > budget) break;
    float us = -1.0f;
    rc = time_candidate(g, en, &res[i].algo, c, &us, e);
    if (rc || us < 0) continue;
    timed++;
    if (i == 0) first_us = us;
    // the heuristic's order breaks near-ties: a later answer must be 1% faster
    if (best < 0 || us < best_us * 0.99f) {
      best = i;
      best_us = us;
    }
  }
  uint64_t dt = clock_mono_ns() - t0;
  g->st.tune_ns += dt;
  t->st.tune_ns += dt;
  if (rc) return err_prefix(e, "gemm autotuning m=%d n=%d k=%d: ", en->key.m, en->key.n, en->key.k);
  if (best >= 0) en->algo = res[best].algo;  // else nothing ran: the first answer stays
  en->tuned = true;
  g->st.tuned++;
  t->st.shapes++;
  t->st.candidates += (uint64_t)timed;
  if (best > 0) t->st.improved++;
  if (best >= 0 && first_us >= 0) {
    t->st.first_us += first_us;
    t->st.best_us += best_us;
  }
  tuner_put(t, &en->key, g->workspace_bytes, &en->algo);
  return 0;
}

// A residual Z rides in cuBLASLt's C operand with beta = 1: D = epilogue(A B + C), the bias
// and activation applied after the sum, and C == D (in place) allowed with one layout.
int eng_gemm_lt_run_res(eng_gemm_lt *g, void *C, const void *A, const void *B, const void *bias,
                        const void *Z, int m, int n, int k, bool trans_a, bool trans_b,
                        eng_gemm_epilogue epilogue, eng_gemm_dtype dtype, cudaStream_t stream,
                        err *e) {
  if (!g || !C || !A || !B)
    return err_set(e, ERR_INVALID_ARGUMENT, "gemm: NULL %s", !g ? "object" : !C ? "C" : !A ? "A" : "B");
  if (m < 1 || n < 1 || k < 1)
    return err_set(e, ERR_INVALID_ARGUMENT, "gemm: sizes must be >= 1 (m=%d n=%d k=%d)", m, n, k);
  if ((unsigned)epilogue > ENG_GEMM_EPI_BIAS_GELU)
    return err_set(e, ERR_INVALID_ARGUMENT, "gemm: unknown epilogue %d", (int)epilogue);
  if ((unsigned)dtype > ENG_GEMM_BF16)
    return err_set(e, ERR_INVALID_ARGUMENT, "gemm: unknown dtype %d", (int)dtype);
  bool want_bias = epi_has_bias(epilogue);
  if (want_bias != (bias != NULL))
    return err_set(e, ERR_INVALID_ARGUMENT, "gemm: epilogue %s %s", eng_gemm_epilogue_name(epilogue),
                   want_bias ? "needs a bias" : "takes no bias");
  int32_t esize = dtype == ENG_GEMM_FP16 || dtype == ENG_GEMM_BF16 ? 2 : 4;
  if (ptr_align(A) < esize || ptr_align(B) < esize || ptr_align(C) < esize ||
      (bias && ptr_align(bias) < esize) || (Z && ptr_align(Z) < esize))
    return err_set(e, ERR_INVALID_ARGUMENT, "gemm: a pointer is not aligned to its %d-byte elements", esize);

  gemm_key key;
  memset(&key, 0, sizeof key);
  key.m = m;
  key.n = n;
  key.k = k;
  key.trans_a = trans_a;
  key.trans_b = trans_b;
  key.epilogue = (int32_t)epilogue;
  key.dtype = (int32_t)dtype;
  key.align_a = ptr_align(A);
  key.align_b = ptr_align(B);
  key.align_c = ptr_align(C);
  key.align_bias = bias ? ptr_align(bias) : 0;
  key.align_z = Z ? ptr_align(Z) : 0;
  gemm_entry *en;
  TRY(lookup(g, &key, bias, &en, e));
  if (want_bias)
    CUBLAS_TRY(e, cublasLtMatmulDescSetAttribute(en->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                 sizeof bias));
  gemm_call c = {.C = C, .A = A, .B = B, .Z = Z, .stream = stream};
  if (g->tuner && !en->tuned) TRY(tune(g, en, &c, e));
  CUBLAS_TRY(e, matmul(g, en, &en->algo, &c));
  g->st.runs++;
  return 0;
}
