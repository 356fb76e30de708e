// tests/gpu/test_gpu_plan_ops.c: the op families' routes through the CUDA plan
// (engine/cuda/plan_cuda_fuse.c, plan_cuda_layout.c; engine/ops/conv/conv_cuda.c,
// gemm/gemm_cuda.c, attn/attn_qkv.c), against the CPU plan: the conv family
// (cuDNN, ConvTranspose included) fuses its epilogues, runs NHWC where the
// layout pass says so (or flips layout per batch size) and allocates nothing
// once every batch size is warm; 1x1 Convs on 1x1 inputs run as cuBLASLt
// GEMMs (counted); MatMuls on 3-D activations carry their bias, residual and
// activation epilogues; Q, K, V projections merge into one; GEMM autotuning
// times each shape once and shares the choice between slots; ops with no
// CUDA path run on the host inside the plan (host fallback), counted and
// named, with CUDA graphs capturing and replaying them. Part of the
// test_gpu_plan binary (main() in test_gpu_plan.c).
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_gpu_plan_util.h"

// --- the conv family (cuDNN): fusion, no allocation once warm, refusals

// Nodes each conv model runs inside a Conv's epilogue: conv_resnet's five
// Relus and two residual Adds; conv_dwsep's Sigmoid and Tanh (its 1x1
// conv's output is a graph output, so that Relu runs on its own);
// conv_pools' 1-D Relu; conv_transpose_net's Relu after its Conv (nothing
// fuses into a ConvTranspose). And the nodes that run NHWC with the NHWC
// layout: some (-1), unchecked (-2), or exactly so many: none in
// conv_transpose (no Conv leads into NHWC; a ConvTranspose follows its
// input), four in conv_transpose_net (the Conv, both ConvTransposes that
// follow it, the Relu after one; the fused Relu is no node of its own).
// None of their Convs is a 1x1 kernel on a 1x1 input, so none runs as a
// cuBLASLt GEMM NCHW (test_conv_gemm has those); NHWC the 1x1 stride-1 ones
// do (gemm): conv_dwsep's pointwise Conv, conv_mbv3's two expand and one
// projection Convs (the latter with its residual); conv_resnet's 1x1
// shortcut has stride 2 and stays on cuDNN.
// conv_mbv3: its depthwise Convs' HardSwish, HardSigmoid and residual Add +
// HardSwish, and the projection's residual Add (5), on cuDNN (NCHW, the
// activation after it) and on the depthwise kernel (NHWC) alike. pro: the
// prologues (an expand Conv's HardSwish applied by the depthwise kernel as
// it loads), NHWC only: none while engine/ops/conv/conv_cuda.c keeps them off (slower).
static const struct {
  const char *name;
  uint64_t fused;
  int nhwc;
  uint64_t pro;
  uint64_t gemm;
} conv_models[] = {{"conv_resnet", 7, -1, 0, 0},    {"conv_dwsep", 2, -1, 0, 1},
                   {"conv_pools", 1, -2, 0, 0},     {"conv_transpose", 0, 0, 0, 0},
                   {"conv_transpose_net", 1, 4, 0, 0}, {"conv_mbv3", 5, -1, 0, 3}};

void test_conv(void) {
  // each model three times: NCHW; with NHWC regions (and every cuDNN candidate timed, the other
  // choice of algorithm); and AUTO in FP32 with the timed layout's test hook, which keeps NHWC at
  // every second warmed batch size (2 and MAXB) and NCHW at 1 and 3: one plan whose layout flips
  // from batch to batch, its graphs apart per layout, no allocation once warm
  static const char *const lay_name[] = {"nchw", "nhwc", "flip"};
  for (int lay = 0; lay < 3; lay++)
  for (size_t m = 0; m < sizeof conv_models / sizeof conv_models[0]; m++) {
    const char *name = conv_models[m].name;
    eng_graph *g = load_model(name);
    if (!g) continue;
    size_t n_out = eng_graph_n_outputs(g);
    eng_plan *cp = NULL;
    eng_cuda_plan *gp = NULL;
    err e = {0};
    int warm[] = {1, 2, 3, MAXB};
    eng_cuda_opts o = {.warm = warm, .n_warm = 4,
                       .layout = lay == 0 ? ENG_CUDA_LAYOUT_NCHW : lay == 1 ? ENG_CUDA_LAYOUT_NHWC : ENG_CUDA_LAYOUT_AUTO,
                       .conv_timed = lay == 1, .layout_flip = lay == 2};
    CHECK_EQ_INT(eng_plan_create(g, MAXB, &cp, &e), 0);
    int rc = eng_cuda_plan_create(g, MAXB, 0, &o, &gp, &e);
    if (rc) fprintf(stderr, "%s: cuda create: %s\n", name, e.msg);
    CHECK_EQ_INT(rc, 0);
    if (cp && gp) {
      io_set in[MAXB + 1] = {{0}};
      for (int b = 1; b <= MAXB; b++) make_inputs(g, name, b, 0, &in[b]);
      double worst = run_both(name, g, cp, gp, &in[MAXB], "conv warm", 0);
      eng_cuda_plan_stats st;
      eng_cuda_plan_stats_get(gp, &st);
      // MAXB ran last: NHWC in the flip pass too
      CHECK_EQ_INT(st.fused_nodes, conv_models[m].fused + (lay ? conv_models[m].pro : 0));
      CHECK_EQ_INT(st.gemm_convs, lay ? conv_models[m].gemm : 0);
      if (!lay) CHECK_EQ_INT(st.nhwc_nodes, 0);
      // a timed layout wherever a Conv could run NHWC (conv_transpose has none): four picks, two NHWC
      bool timed = lay == 2 && conv_models[m].nhwc != 0;
      CHECK_EQ_INT(st.timed_layouts, timed ? 4 : 0);
      CHECK_EQ_INT(st.timed_nhwc, timed ? 2 : 0);
      // NHWC: the 2-D models run their convolutions NHWC and transpose only at the edges
      // (an input into the first conv, each 4-D output before copy-out)
      if (lay && conv_models[m].nhwc != -2) {
        if (conv_models[m].nhwc < 0) CHECK(st.nhwc_nodes > 0);
        else CHECK_EQ_INT(st.nhwc_nodes, conv_models[m].nhwc);
        CHECK(st.relayouts <= eng_graph_n_inputs(g) + n_out);
      }
      // every batch size was warmed (a cuDNN plan each, the NHWC weights): none allocates now
      uint64_t allocs = st.real_allocs;
      for (int i = 0; i < 40; i++) {
        int b = 1 + i % MAXB;
        eng_tensor go[MAX_IO];
        CHECK_EQ_INT(eng_cuda_plan_run(gp, in[b].t, in[b].n, go, n_out, &e), 0);
      }
      CHECK_EQ_INT(eng_cuda_plan_real_allocs(gp), allocs);
      for (int b = 1; b <= MAXB; b++) {
        worst = max_worst(worst, run_both(name, g, cp, gp, &in[b], "conv after 40 runs", 0));
        if (timed && conv_models[m].nhwc != -2) {  // this batch's layout: NCHW at the odd sizes, NHWC at the even
          eng_cuda_plan_stats_get(gp, &st);
          CHECK_EQ_INT(st.nhwc_nodes > 0, b % 2 == 0);
        }
      }
      eng_cuda_plan_stats_get(gp, &st);
      printf("%-16s %s: %llu nodes fused, %llu NHWC, %llu transposes, %llu graphs, real allocations %llu "
             "before and after 40 runs, worst scaled error %.3g\n",
             name, lay_name[lay], (unsigned long long)st.fused_nodes, (unsigned long long)st.nhwc_nodes,
             (unsigned long long)st.relayouts, (unsigned long long)st.graphs_captured,
             (unsigned long long)allocs, worst);
      for (int b = 1; b <= MAXB; b++) io_free(&in[b]);
    }
    eng_cuda_plan_destroy(gp);
    eng_plan_destroy(cp);
    eng_graph_destroy(g);
  }
}

// --- 1x1 Convs on 1x1 inputs as cuBLASLt GEMMs (engine/ops/conv/conv_cuda.c is_gemm): conv_se_gemm's
// squeeze-excitation pair (bias + Relu, bias alone), a residual Add of the pool + Relu without
// bias, and a strided one take the GEMM route, 4 Convs; its Sigmoid one (no such cuBLASLt
// epilogue) and the 3x3 stem stay on cuDNN. In every precision and both layouts (the GEMM's
// operands are the same bytes in NCHW and NHWC), at every batch size, values against the CPU
// plan; the epilogue is the Convs' own, so the same 5 nodes fuse (the stem's, the SE's and the
// Sigmoid's activations, the residual Add and its Relu).
void test_conv_gemm(void) {
  const char *name = "conv_se_gemm";
  eng_graph *g = load_model(name);
  if (!g) return;
  static const struct {
    const char *label;
    eng_cuda_opts o;
  } modes[] = {{"fp32", {.precision = ENG_PREC_FP32}},
               {"fp32 nhwc", {.precision = ENG_PREC_FP32, .layout = ENG_CUDA_LAYOUT_NHWC}},
               {"tf32", {.precision = ENG_PREC_TF32}},
               {"fp16", {.precision = ENG_PREC_FP16}}};
  for (size_t k = 0; k < sizeof modes / sizeof modes[0]; k++) {
    eng_plan *cp = NULL;
    eng_cuda_plan *gp = NULL;
    err e = {0};
    CHECK_EQ_INT(eng_plan_create(g, MAXB, &cp, &e), 0);
    int rc = eng_cuda_plan_create(g, MAXB, 0, &modes[k].o, &gp, &e);
    if (rc) fprintf(stderr, "%s %s: cuda create: %s\n", name, modes[k].label, e.msg);
    CHECK_EQ_INT(rc, 0);
    bool low = modes[k].o.precision != ENG_PREC_FP32;
    double worst = 0;
    eng_cuda_plan_stats st = {0};
    for (int b = 1; cp && gp && b <= MAXB; b++) {
      io_set in = {0};
      make_inputs(g, name, b, 0, &in);
      char label[64];
      snprintf(label, sizeof label, "%s batch %d", modes[k].label, b);
      worst = max_worst(worst, run_both(name, g, cp, gp, &in, label, low ? low_rtol : 0));
      eng_cuda_plan_stats_get(gp, &st);
      if (st.gemm_convs != 4 || st.fused_nodes != 5)
        fprintf(stderr, "%s %s: %llu Convs as GEMMs (want 4), %llu nodes fused (want 5)\n", name,
                label, (unsigned long long)st.gemm_convs, (unsigned long long)st.fused_nodes);
      CHECK_EQ_INT(st.gemm_convs, 4);
      CHECK_EQ_INT(st.fused_nodes, 5);
      io_free(&in);
    }
    printf("%s %s: %llu Convs as cuBLASLt GEMMs, %llu nodes fused, %llu NHWC, worst scaled error %.3g\n",
           name, modes[k].label, (unsigned long long)st.gemm_convs,
           (unsigned long long)st.fused_nodes, (unsigned long long)st.nhwc_nodes, worst);
    eng_cuda_plan_destroy(gp);
    eng_plan_destroy(cp);
  }
  eng_graph_destroy(g);
}

// g's CPU plan and its CUDA plan in FP32 (half 0) or FP16, both for MAXB;
// a failure is checked (and said, with name) and leaves that plan NULL.
static void plans_at(const eng_graph *g, const char *name, int half, eng_plan **cp, eng_cuda_plan **gp) {
  err e = {0};
  eng_cuda_opts o = {.precision = half ? ENG_PREC_FP16 : ENG_PREC_FP32};
  CHECK_EQ_INT(eng_plan_create(g, MAXB, cp, &e), 0);
  int rc = eng_cuda_plan_create(g, MAXB, 0, &o, gp, &e);
  if (rc) fprintf(stderr, "%s: cuda create: %s\n", name, e.msg);
  CHECK_EQ_INT(rc, 0);
}

// --- GEMM epilogues on 3-D activations: mm3d_bias's three MatMuls ([B,S,K] x [K,N], one GEMM
// of M = B*S rows each) carry their bias Adds (written Add(bias, product) in the file; the load
// pass puts the product first so the Add runs in place on it), the second its residual Add too
// (cuBLASLt's C operand) and the third the Relu after it: 5 nodes fused, in FP32 and FP16, at
// every batch size and two sequence lengths. The exact-erf Gelu runs on its own in FP32 and in
// the first product's epilogue (cuBLASLt's tanh form) in FP16: 6 nodes fused there. The FP16 plan
// runs both LayerNorms (one with its Mean/InvStdDev outputs) in FP16. Values against the CPU
// plan, as everywhere here.
void test_gemm_fusion(void) {
  eng_graph *g = load_model("mm3d_bias");
  if (!g) return;
  for (int half = 0; half < 2; half++) {
    eng_plan *cp = NULL;
    eng_cuda_plan *gp = NULL;
    plans_at(g, "mm3d_bias", half, &cp, &gp);
    double worst = 0;
    for (int b = 1; cp && gp && b <= MAXB; b++)
      for (int seq = 0; seq < 2; seq++) {
        io_set in = {0};
        make_inputs(g, "mm3d_bias", b, seq ? 13 : 0, &in);
        char label[64];
        snprintf(label, sizeof label, "%s batch %d seq %lld", half ? "fp16" : "fp32", b,
                 (long long)in.t[0].dims[1]);
        worst = max_worst(worst, run_both("mm3d_bias", g, cp, gp, &in, label, half ? low_rtol : 0));
        eng_cuda_plan_stats st;
        eng_cuda_plan_stats_get(gp, &st);
        unsigned long long want = half ? 6 : 5;
        if (st.fused_nodes != want)
          fprintf(stderr, "mm3d_bias %s: %llu nodes fused, want %llu\n", label,
                  (unsigned long long)st.fused_nodes, want);
        CHECK_EQ_INT(st.fused_nodes, want);
        io_free(&in);
      }
    printf("mm3d_bias %s: %d nodes fused (3 bias Adds, the residual Add, 1 Relu%s), worst scaled error %.3g\n",
           half ? "fp16" : "fp32", half ? 6 : 5, half ? ", the Gelu" : "", worst);
    eng_cuda_plan_destroy(gp);
    eng_plan_destroy(cp);
  }
  eng_graph_destroy(g);
}

// --- attention with Q, K, V packed into one projection (engine/ops/attn/attn_qkv.c)

// attn_qkv (three projections merged) and attn_qkv_split (GPT's Split taken
// in), head size 64 (FP16: the tensor-core kernel reading Q, K, V at column
// offsets of one [B, S, 3E] product, rows 3E apart): the FP32 and FP16 plans
// against the CPU plan at every batch size and two sequence lengths.
void test_qkv_merge(void) {
  static const char *const names[] = {"attn_qkv", "attn_qkv_split"};
  for (int m = 0; m < 2; m++) {
    eng_graph *g = load_model(names[m]);
    if (!g) continue;
    CHECK_EQ_INT(eng_graph_n_qkv_merged(g), 1);
    for (int half = 0; half < 2; half++) {
      eng_plan *cp = NULL;
      eng_cuda_plan *gp = NULL;
      plans_at(g, names[m], half, &cp, &gp);
      double worst = 0;
      for (int b = 1; cp && gp && b <= MAXB; b++)
        for (int seq = 0; seq < 2; seq++) {
          io_set in = {0};
          make_inputs(g, names[m], b, seq ? 64 : 0, &in);
          char label[64];
          snprintf(label, sizeof label, "%s batch %d seq %lld", half ? "fp16" : "fp32", b,
                   (long long)in.t[0].dims[1]);
          worst = max_worst(worst, run_both(names[m], g, cp, gp, &in, label, half ? low_rtol : 0));
          io_free(&in);
        }
      printf("%s %s: Q/K/V merged, worst scaled error %.3g\n", names[m], half ? "fp16" : "fp32",
             worst);
      eng_cuda_plan_destroy(gp);
      eng_plan_destroy(cp);
    }
    eng_graph_destroy(g);
  }
}

// --- GEMM autotuning in a plan (cuda_gemm.h, plan_cuda_slot.c capture_tuned)

// mm3d_bias (three MatMuls with bias, one adding a residual, a Relu; a
// dynamic sequence, so nothing is warmed at create) with every product timed
// (min_flops 1): graphs on two slots and plain launches, FP32 and FP16, each
// against the CPU plan. The first capture meets untimed shapes, so a tuning
// pass runs and the graph is captured again; slot 1 then takes slot 0's
// choices without timing. The plain plan times as it launches (a product
// adding its residual in place: in a pass before the next launch).
void test_gemm_autotune(void) {
  eng_graph *g = load_model("mm3d_bias");
  if (!g) return;
  for (int mode = 0; mode < 4; mode++) {
    int half = mode & 1, plain = mode >> 1;
    eng_plan *cp = NULL;
    eng_cuda_plan *gp = NULL;
    err e = {0};
    eng_cuda_opts o = {.precision = half ? ENG_PREC_FP16 : ENG_PREC_FP32, .n_slots = 2, .no_graphs = plain,
                       .gemm_tune_min_flops = 1};
    const char *label = plain ? (half ? "fp16 plain" : "fp32 plain") : (half ? "fp16 graphs" : "fp32 graphs");
    CHECK_EQ_INT(eng_plan_create(g, MAXB, &cp, &e), 0);
    int rc = eng_cuda_plan_create(g, MAXB, 0, &o, &gp, &e);
    if (rc) fprintf(stderr, "mm3d_bias autotune %s: cuda create: %s\n", label, e.msg);
    CHECK_EQ_INT(rc, 0);
    if (!cp || !gp) goto next;
    double worst = 0;
    io_set in = {0};
    make_inputs(g, "mm3d_bias", MAXB, 0, &in);
    eng_cuda_plan_stats s1, st;
    for (int rep = 0; rep < 3; rep++) {
      char what[64];
      snprintf(what, sizeof what, "autotune %s rep %d", label, rep);
      worst = max_worst(worst, run_both("mm3d_bias", g, cp, gp, &in, what, half ? low_rtol : 0));
      eng_cuda_plan_stats_get(gp, &s1);
      if (rep == 0 && !plain) {  // all three timed before the graph that holds them was captured
        CHECK_EQ_INT(s1.gemm_tuned, 3);
        CHECK(s1.gemm_tune_passes >= 1);
        CHECK_EQ_INT(s1.graphs_captured, 1);
      }
    }
    CHECK_EQ_INT(s1.gemm_tuned, 3);  // plain too, by the third launch
    CHECK(s1.gemm_tune_ns > 0);
    CHECK(s1.gemm_best_ns <= s1.gemm_first_ns);
    // slot 1, same signature: slot 0's choices, nothing timed
    eng_tensor go[MAX_IO];
    size_t n_out = eng_graph_n_outputs(g);
    CHECK_EQ_INT(eng_cuda_plan_submit(gp, 1, in.t, in.n, &e), 0);
    CHECK_EQ_INT(eng_cuda_plan_finish(gp, 1, go, n_out, NULL, &e), 0);
    eng_cuda_plan_stats_get(gp, &st);
    CHECK_EQ_INT(st.gemm_tuned, s1.gemm_tuned);
    CHECK_EQ_INT(st.gemm_tune_passes, s1.gemm_tune_passes);
    if (!plain) CHECK_EQ_INT(st.plain_launches, 0);
    printf("mm3d_bias autotune %s: %llu shapes timed in %.1f ms (%llu tuning passes, %llu improved), "
           "worst scaled error %.3g\n",
           label, (unsigned long long)st.gemm_tuned, (double)st.gemm_tune_ns / 1e6,
           (unsigned long long)st.gemm_tune_passes, (unsigned long long)st.gemm_tune_improved, worst);
    io_free(&in);
  next:
    eng_cuda_plan_destroy(gp);
    eng_plan_destroy(cp);
  }
  // off: nothing timed
  {
    eng_cuda_plan *gp = NULL;
    err e = {0};
    eng_cuda_opts o = {.no_gemm_autotune = 1, .gemm_tune_min_flops = 1};
    CHECK_EQ_INT(eng_cuda_plan_create(g, MAXB, 0, &o, &gp, &e), 0);
    if (gp) {
      io_set in = {0};
      make_inputs(g, "mm3d_bias", 2, 0, &in);
      eng_tensor go[MAX_IO];
      CHECK_EQ_INT(eng_cuda_plan_run(gp, in.t, in.n, go, eng_graph_n_outputs(g), &e), 0);
      eng_cuda_plan_stats st;
      eng_cuda_plan_stats_get(gp, &st);
      CHECK_EQ_INT(st.gemm_tuned, 0);
      CHECK_EQ_INT(st.gemm_tune_passes, 0);
      io_free(&in);
    }
    eng_cuda_plan_destroy(gp);
  }
  eng_graph_destroy(g);
}

// --- host fallback (engine/cuda/plan_cuda_host.h)

// The models gen_test_models.py writes for it: how many nodes run on the
// host and one of them by name. host_dft: a DFT between two Muls;
// host_lstm: an LSTM between Transposes; host_lpnorm: an LpNormalization on
// the graph input and one between Relu and Add; host_einsum: an Einsum between
// Relu and Sigmoid; host_chain: DFT on the input feeding an Einsum that
// writes a graph output (one round trip), with Abs on the device reading
// the DFT's output too.
static const struct {
  const char *name;
  size_t host;
  const char *node;
} host_models[] = {
    {"host_dft", 1, "'dft'"},       {"host_lstm", 1, "'lstm'"},        {"host_lpnorm", 2, "'lpnorm_in'"},
    {"host_einsum", 1, "'einsum'"}, {"host_chain", 2, "'einsum_out'"},
};

void test_host_fallback(void) {
  for (size_t m = 0; m < sizeof host_models / sizeof host_models[0]; m++) {
    const char *name = host_models[m].name;
    eng_graph *g = load_model(name);
    CHECK(g != NULL);
    if (!g) continue;
    int mb = batch_of(g);
    eng_plan *cp = NULL;
    eng_cuda_plan *gp = NULL;
    err e = {0};
    CHECK_EQ_INT(eng_plan_create(g, mb, &cp, &e), 0);
    eng_cuda_opts o = {.n_slots = 2};  // graphs on
    int rc = eng_cuda_plan_create(g, mb, 0, &o, &gp, &e);
    if (rc) fprintf(stderr, "%s: cuda create: %s\n", name, e.msg);
    CHECK_EQ_INT(rc, 0);
    if (cp && gp) {
      CHECK_EQ_INT((int)eng_cuda_plan_n_host_nodes(gp), (int)host_models[m].host);
      bool named = false;
      for (size_t k = 0; k < eng_cuda_plan_n_host_nodes(gp); k++) {
        const char *line = eng_cuda_plan_host_node(gp, k);
        CHECK(line != NULL);
        if (!line) continue;
        CHECK_CONTAINS(line, "no CUDA path");
        CHECK_CONTAINS(line, "runs on the host (");
        named |= strstr(line, host_models[m].node) != NULL;
        printf("%s: %s\n", name, line);
      }
      CHECK(named);
      CHECK(eng_cuda_plan_host_node(gp, host_models[m].host) == NULL);
      // every batch size three times: the first run of a size captures its graph, the next replay
      // it; sizes alternate, so each replay runs with its own signature's snapshot of the host
      // nodes' shapes after another signature ran
      double worst = 0;
      uint64_t allocs = 0;
      for (int pass = 0; pass < 3; pass++) {
        if (pass == 2) allocs = eng_cuda_plan_real_allocs(gp);
        for (int b = mb > 0 ? 1 : 0; b <= mb; b++) {
          io_set in = {0};
          char label[48];
          snprintf(label, sizeof label, "host fallback pass %d batch %d", pass, b);
          make_inputs(g, name, b, 0, &in);
          worst = max_worst(worst, run_both(name, g, cp, gp, &in, label, 0));
          io_free(&in);
        }
      }
      eng_cuda_plan_stats st;
      eng_cuda_plan_stats_get(gp, &st);
      int sizes = mb > 0 ? mb : 1;
      CHECK_EQ_INT(st.graphs_disabled, 0);
      CHECK(st.graphs_captured >= (uint64_t)sizes);
      CHECK(st.graph_launches >= (uint64_t)(2 * sizes));  // replays
      CHECK(eng_cuda_plan_real_allocs(gp) == allocs);     // the third pass allocated nothing
      printf("%-14s host fallback: %zu host node(s), worst scaled error %.3g, %llu graphs, %llu replays\n", name,
             eng_cuda_plan_n_host_nodes(gp), worst, (unsigned long long)st.graphs_captured,
             (unsigned long long)st.graph_launches);
    }
    eng_cuda_plan_destroy(gp);
    eng_plan_destroy(cp);
    eng_graph_destroy(g);
  }
  // a model with no host node says so (the conformance run's "cases with no host fallback")
  eng_graph *g = load_model("mlp_raw");
  if (g) {
    eng_cuda_plan *gp = NULL;
    err e = {0};
    CHECK_EQ_INT(eng_cuda_plan_create(g, MAXB, 0, NULL, &gp, &e), 0);
    if (gp) CHECK_EQ_INT((int)eng_cuda_plan_n_host_nodes(gp), 0);
    if (gp) CHECK(eng_cuda_plan_host_node(gp, 0) == NULL);
    eng_cuda_plan_destroy(gp);
    eng_graph_destroy(g);
  }
}

// --- CUDA paths of issue 34 item 3: ops that ran on the host before (Mod, CastLike, Slice on data)

// InstanceNormalization and GroupNormalization (norm_instance, norm_group18, norm_group21 of
// gen_test_models.py, in the case file too, so every plan mode compares them; norm_group_big, a group
// of 16384 elements the device cuts into chunks, with inputs made here): every node on the device in
// FP32 and FP16 plans, each batch size within the FP32 bound (1e-5) or the low-precision plans'.
static void big_inputs(int b, io_set *in) {
  size_t n = (size_t)b * 4 * 64 * 64;
  float *u = malloc(n * sizeof *u);
  CHECK(u != NULL);
  for (size_t i = 0; u && i < n; i++) u[i] = (float)((int)(i * 7919 % 4001) - 2000) / 1000.0f;  // [-2, 2]
  in->n = 1;
  in->t[0] = (eng_tensor){.dt = DT_FP32, .ndims = 4, .dims = {b, 4, 64, 64}, .data = u, .bytes = n * sizeof *u};
}

static void test_device_norms(void) {
  static const char *const names[] = {"norm_instance", "norm_group18", "norm_group21", "norm_group_big"};
  for (size_t m = 0; m < sizeof names / sizeof names[0]; m++) {
    int big = strcmp(names[m], "norm_group_big") == 0;
    eng_graph *g = load_model(names[m]);
    CHECK(g != NULL);
    if (!g) continue;
    eng_plan *cp = NULL;
    err e = {0};
    int mb = big ? MAXB : batch_of(g);
    CHECK_EQ_INT(eng_plan_create(g, mb, &cp, &e), 0);
    for (int half = 0; cp && half < 2; half++) {
      eng_cuda_plan *gp = NULL;
      eng_cuda_opts o = {.precision = half ? ENG_PREC_FP16 : ENG_PREC_FP32};
      int rc = eng_cuda_plan_create(g, mb, 0, &o, &gp, &e);
      if (rc) fprintf(stderr, "%s: cuda create: %s\n", names[m], e.msg);
      CHECK_EQ_INT(rc, 0);
      if (!gp) continue;
      CHECK_EQ_INT((int)eng_cuda_plan_n_host_nodes(gp), 0);
      for (size_t k = 0; k < eng_cuda_plan_n_host_nodes(gp); k++)
        fprintf(stderr, "  %s: %s\n", names[m], eng_cuda_plan_host_node(gp, k));
      double worst = 0;
      for (int b = 1; b <= mb; b++) {
        io_set in = {0};
        char label[48];
        snprintf(label, sizeof label, "%s batch %d", half ? "fp16" : "fp32", b);
        if (big) big_inputs(b, &in);
        else make_inputs(g, names[m], b, 0, &in);
        worst = max_worst(worst, run_both(names[m], g, cp, gp, &in, label, half ? low_rtol : 0));
        io_free(&in);
      }
      printf("%s %s: on the device, worst scaled error %.3g\n", names[m], half ? "fp16" : "fp32", worst);
      eng_cuda_plan_destroy(gp);
    }
    eng_plan_destroy(cp);
    eng_graph_destroy(g);
  }
}

// cuda_select and cuda_scatter (gen_test_models.py; in the case file too, so every plan mode compares
// them): TopK, ArgMax, ArgMin, ScatterElements and ScatterND all on the device (no host node) in FP32
// and FP16 plans, matching the CPU plan; the scatters' indices drawn with duplicates by make_inputs.
// Then an index out of range (ids input, 9 on an axis of 6): the GPU run fails as the CPU run does,
// naming the node, and the next valid batch runs (the flag was cleared).
static void test_select_scatter(void) {
  static const char *const names[] = {"cuda_select", "cuda_scatter"};
  for (int m = 0; m < 2; m++)
    for (int half = 0; half < 2; half++) {
      eng_graph *g = load_model(names[m]);
      CHECK(g != NULL);
      if (!g) continue;
      eng_plan *cp = NULL;
      eng_cuda_plan *gp = NULL;
      err e = {0};
      eng_cuda_opts o = {.precision = half ? ENG_PREC_FP16 : ENG_PREC_FP32};
      CHECK_EQ_INT(eng_plan_create(g, MAXB, &cp, &e), 0);
      int rc = eng_cuda_plan_create(g, MAXB, 0, &o, &gp, &e);
      if (rc) fprintf(stderr, "%s: cuda create: %s\n", names[m], e.msg);
      CHECK_EQ_INT(rc, 0);
      if (cp && gp) {
        CHECK_EQ_INT((int)eng_cuda_plan_n_host_nodes(gp), 0);
        for (size_t k = 0; k < eng_cuda_plan_n_host_nodes(gp); k++)
          fprintf(stderr, "  %s\n", eng_cuda_plan_host_node(gp, k));
        double worst = 0;
        for (int b = 1; b <= MAXB; b++) {
          io_set in = {0};
          char label[48];
          snprintf(label, sizeof label, "%s batch %d", half ? "fp16" : "fp32", b);
          make_inputs(g, names[m], b, 0, &in);
          worst = max_worst(worst, run_both(names[m], g, cp, gp, &in, label, half ? low_rtol : 0));
          io_free(&in);
        }
        printf("%s %s: on the device, worst scaled error %.3g\n", names[m], half ? "fp16" : "fp32", worst);
        if (m == 1) {
          io_set in = {0};
          make_inputs(g, names[m], 2, 0, &in);
          ((int64_t *)in.t[1].data)[7] = 9;  // ids [2, 6]: row 1, axis 1 of length 6
          eng_tensor out[MAX_IO];
          CHECK(eng_plan_run(cp, in.t, in.n, out, eng_graph_n_outputs(g), &e) != 0);
          CHECK_CONTAINS(e.msg, "out of range");
          e = (err){0};
          CHECK(eng_cuda_plan_run(gp, in.t, in.n, out, eng_graph_n_outputs(g), &e) != 0);
          CHECK_CONTAINS(e.msg, "out of range");
          CHECK_CONTAINS(e.msg, "scatter_");
          printf("cuda_scatter %s out of range: %s\n", half ? "fp16" : "fp32", e.msg);
          ((int64_t *)in.t[1].data)[7] = 2;
          e = (err){0};
          run_both(names[m], g, cp, gp, &in, "after out of range", half ? low_rtol : 0);
          io_free(&in);
        }
      }
      eng_cuda_plan_destroy(gp);
      eng_plan_destroy(cp);
      eng_graph_destroy(g);
    }
}

// The model's inputs for batch b (io_set's tensors owned by it: io_free).
typedef void (*fill_inputs_fn)(const eng_graph *g, int b, io_set *in);

// A model every node of which must run on the device, in FP32 and FP16 plans, against the CPU plan at
// every batch size (FP32 within the FP32 bound, FP16 within the low-precision plans').
static void device_only(const char *name, fill_inputs_fn fill) {
  eng_graph *g = load_model(name);
  CHECK(g != NULL);
  if (!g) return;
  eng_plan *cp = NULL;
  err e = {0};
  CHECK_EQ_INT(eng_plan_create(g, MAXB, &cp, &e), 0);
  for (int half = 0; cp && half < 2; half++) {
    eng_cuda_plan *gp = NULL;
    eng_cuda_opts o = {.precision = half ? ENG_PREC_FP16 : ENG_PREC_FP32};
    int rc = eng_cuda_plan_create(g, MAXB, 0, &o, &gp, &e);
    if (rc) fprintf(stderr, "%s: cuda create: %s\n", name, e.msg);
    CHECK_EQ_INT(rc, 0);
    if (!gp) continue;
    CHECK_EQ_INT((int)eng_cuda_plan_n_host_nodes(gp), 0);
    for (size_t k = 0; k < eng_cuda_plan_n_host_nodes(gp); k++)
      fprintf(stderr, "  %s\n", eng_cuda_plan_host_node(gp, k));
    double worst = 0;
    for (int b = 1; b <= MAXB; b++) {
      io_set in = {0};
      fill(g, b, &in);
      char label[48];
      snprintf(label, sizeof label, "%s batch %d", half ? "fp16" : "fp32", b);
      worst = max_worst(worst, run_both(name, g, cp, gp, &in, label, half ? low_rtol : 0));
      io_free(&in);
    }
    printf("%s %s: on the device, worst scaled error %.3g\n", name, half ? "fp16" : "fp32", worst);
    eng_cuda_plan_destroy(gp);
  }
  eng_plan_destroy(cp);
  eng_graph_destroy(g);
}

// cuda_issue34 (gen_test_models_device.py): what GPU plans used to refuse per request (issue 34) runs on
// the device, no host node, in FP32 and FP16 plans, against the CPU plan: MVN's ReduceMean over axes 0, 2, 3
// and a ReduceL2 over 1, 3 (k_reduce_axes_cuda), Clip of INT8 (both bounds, a min, none), Pow of FP32 by
// INT32 and |INT32| by FP32 (k_pow_mixed_cuda; an FP16 plan widens first; Abs by k_unary_int_cuda), BOOL
// ReduceMax/ReduceMin, and reductions of an empty set (0, 1, -inf, -inf). k over -6..6 so Clip's bounds
// and the signs matter.
static void issue34_inputs(const eng_graph *g, int b, io_set *in) {
  make_inputs(g, "cuda_issue34", b, 0, in);
  int64_t *k = in->t[1].data;
  for (int i = 0; i < b * 6; i++) k[i] = (int64_t)((i * 5 + b) % 13) - 6;  // -6..6
}

// cuda_mod_castlike (gen_test_models.py): Mod on floats (fmod 0 and 1) and int64, CastLike int64 -> float.
// The integers exactly; the float kernels equal the reference bit for bit.
static void mod_castlike_inputs(const eng_graph *g, int b, io_set *in) {
  (void)g;
  in->n = 2;
  float *x = malloc((size_t)b * 6 * sizeof *x);
  int64_t *k = malloc((size_t)b * 4 * sizeof *k);
  for (int i = 0; i < b * 6; i++) x[i] = (float)((i * 7919 % 1601) - 800) / 400.0f;  // [-2, 2] in steps of 1/400, 0 included
  for (int i = 0; i < b * 4; i++) k[i] = (int64_t)((i * 37) % 13) - 6;               // [-6, 6]
  in->t[0] = (eng_tensor){.dt = DT_FP32, .ndims = 2, .dims = {b, 6}, .data = x, .bytes = (size_t)b * 6 * sizeof *x};
  in->t[1] = (eng_tensor){.dt = DT_INT64, .ndims = 2, .dims = {b, 4}, .data = k, .bytes = (size_t)b * 4 * sizeof *k};
}

void test_device_paths(void) {
  device_only("cuda_mod_castlike", mod_castlike_inputs);
  err e = {0};
  // slice_device (in the case file too, so every plan mode compares it): both Slices on the device
  eng_graph *g = load_model("slice_device");
  CHECK(g != NULL);
  if (!g) return;
  eng_cuda_plan *gp = NULL;
  eng_plan *cp = NULL;
  CHECK_EQ_INT(eng_plan_create(g, MAXB, &cp, &e), 0);
  CHECK_EQ_INT(eng_cuda_plan_create(g, MAXB, 0, NULL, &gp, &e), 0);
  if (gp && cp) {
    CHECK_EQ_INT((int)eng_cuda_plan_n_host_nodes(gp), 0);
    double worst = 0;
    for (int b = 1; b <= MAXB; b++) {
      io_set in = {0};
      make_inputs(g, "slice_device", b, 0, &in);
      worst = max_worst(worst, run_both("slice_device", g, cp, gp, &in, "device slice", 0));
      io_free(&in);
    }
    printf("slice_device: on the device, worst scaled error %.3g\n", worst);
  }
  eng_cuda_plan_destroy(gp);
  eng_plan_destroy(cp);
  eng_graph_destroy(g);
  test_device_norms();
  test_select_scatter();
  device_only("cuda_issue34", issue34_inputs);
}
