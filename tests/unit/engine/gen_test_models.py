#!/usr/bin/env python3
"""tests/unit/engine/gen_test_models.py: writes the ONNX models test_graph.c
and test_plan.c load, into the directory given on the command line, plus
onnxruntime's outputs for fixed inputs so the C tests compare numerically.

For every compared model NAME it writes NAME.onnx, NAME.case (one line per
tensor: "in|out <onnx elem type> <rank> <dims...>") and NAME.in<i>.bin /
NAME.out<j>.bin (raw little-endian). ort_cases.txt lists the compared models
with their relative tolerance. Fails loudly (non-zero exit) when onnx,
onnxruntime or numpy is missing, so the C tests that depend on it fail too.
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OUT = sys.argv[1] if len(sys.argv) > 1 else "graph_models"
os.makedirs(OUT, exist_ok=True)
RNG = np.random.default_rng(1234)
CASES = []


def path(name):
    return os.path.join(OUT, name)


def model(nodes, inputs, outputs, inits=(), opset=17, name="g"):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="inferd-test")
    m.ir_version = 8
    return m


def save(m, name, check=True):
    if check:
        onnx.checker.check_model(m)
    onnx.save_model(m, path(name + ".onnx"))


def compare(m, name, feeds, rtol=1e-5, check=True):
    """Saves m, runs onnxruntime on feeds, writes the case files."""
    save(m, name, check)
    sess = ort.InferenceSession(path(name + ".onnx"), providers=["CPUExecutionProvider"])
    outs = sess.run(None, feeds)
    lines = []
    for i, vi in enumerate(m.graph.input):
        a = feeds[vi.name]
        lines.append("in %d %d %s" % (vi.type.tensor_type.elem_type, a.ndim, " ".join(map(str, a.shape))))
        a.tofile(path("%s.in%d.bin" % (name, i)))
    for j, (vo, a) in enumerate(zip(m.graph.output, outs)):
        lines.append("out %d %d %s" % (vo.type.tensor_type.elem_type, a.ndim, " ".join(map(str, a.shape))))
        np.ascontiguousarray(a).tofile(path("%s.out%d.bin" % (name, j)))
    with open(path(name + ".case"), "w") as f:
        f.write("\n".join(lines) + "\n")
    CASES.append((name, rtol))


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def vi(name, et, dims):
    return helper.make_tensor_value_info(name, et, dims)


# --- MLP with raw_data weights (numpy_helper writes raw_data)
def mlp(name, raw):
    w1, b1, w2, b2 = f32(4, 8), f32(8), f32(8, 3), f32(3)
    if raw:
        inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
                 numpy_helper.from_array(w2, "w2"), numpy_helper.from_array(b2, "b2")]
    else:
        inits = [helper.make_tensor(n, TensorProto.FLOAT, a.shape, a.flatten().tolist(), raw=False)
                 for n, a in (("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2))]
        assert all(len(t.float_data) and not t.raw_data for t in inits)
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="fc1"),
             helper.make_node("Relu", ["h"], ["hr"], name="relu"),
             helper.make_node("Gemm", ["hr", "w2", "b2"], ["y"], name="fc2", alpha=0.5, beta=2.0)]
    m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 4])], [vi("y", TensorProto.FLOAT, ["N", 3])], inits)
    compare(m, name, {"x": f32(5, 4)})


mlp("mlp_raw", True)
mlp("mlp_typed", False)

# --- one wide product, 16 MiB of FP32 weights: big enough that the GPU test sees one copy per device in
# cudaMemGetInfo (engine/cuda/cuda_weights.h) above the driver's 2 MiB allocation granularity
nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="wide")]
m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 1024])], [vi("y", TensorProto.FLOAT, ["N", 4096])],
          [numpy_helper.from_array(f32(1024, 4096) * np.float32(0.03), "w")])
compare(m, "wide_gemm", {"x": f32(3, 1024)}, rtol=1e-4)

# --- typed int fields: int64_data for a Reshape shape, int32_data for an int32 Cast source
shape = helper.make_tensor("shape", TensorProto.INT64, [2], [-1, 6], raw=False)
i32 = helper.make_tensor("i32", TensorProto.INT32, [6], [1, -2, 3, -4, 5, 6], raw=False)
nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"], name="reshape"),
         helper.make_node("Cast", ["i32"], ["c"], name="cast", to=TensorProto.FLOAT),
         helper.make_node("Add", ["r", "c"], ["y"], name="add")]
m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 2, 3])], [vi("y", TensorProto.FLOAT, ["N", 6])], [shape, i32])
compare(m, "typed_ints", {"x": f32(3, 2, 3)})

# --- float16 weights and io; double weights and io
w16 = f32(3, 4).astype(np.float16)
nodes = [helper.make_node("Add", ["x", "w"], ["y"], name="add16")]
m = model(nodes, [vi("x", TensorProto.FLOAT16, ["N", 3, 4])], [vi("y", TensorProto.FLOAT16, ["N", 3, 4])],
          [numpy_helper.from_array(w16, "w")])
compare(m, "fp16_add", {"x": f32(2, 3, 4).astype(np.float16)}, rtol=2e-3)
# fp16 weights in int32_data (the typed field for float16)
w16t = helper.make_tensor("w", TensorProto.FLOAT16, [3, 4], w16.astype(np.float32).flatten().tolist(), raw=False)
assert list(w16t.int32_data) == w16.view(np.uint16).flatten().tolist() and not w16t.raw_data
m = model(nodes, [vi("x", TensorProto.FLOAT16, ["N", 3, 4])], [vi("y", TensorProto.FLOAT16, ["N", 3, 4])], [w16t])
compare(m, "fp16_typed", {"x": f32(2, 3, 4).astype(np.float16)}, rtol=2e-3)

wd = RNG.standard_normal((4,))
wdt = helper.make_tensor("w", TensorProto.DOUBLE, [4], wd.tolist(), raw=False)
nodes = [helper.make_node("Mul", ["x", "w"], ["y"], name="muld")]
m = model(nodes, [vi("x", TensorProto.DOUBLE, ["N", 4])], [vi("y", TensorProto.DOUBLE, ["N", 4])], [wdt])
compare(m, "double_mul", {"x": RNG.standard_normal((3, 4))}, rtol=1e-5)

# --- external data, as torch.onnx.export writes large weights
w = f32(16, 32)
nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 16])], [vi("y", TensorProto.FLOAT, ["N", 32])],
          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(f32(32), "unused_bias")])
onnx.save_model(m, path("external.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                location="external.onnx.data", size_threshold=0)
m2 = onnx.load(path("external.onnx"), load_external_data=False)
assert m2.graph.initializer[0].data_location == TensorProto.EXTERNAL
offsets = [dict((e.key, e.value) for e in t.external_data).get("offset", "0") for t in m2.graph.initializer]
assert any(o != "0" for o in offsets), offsets  # second tensor really starts at an offset
sess = ort.InferenceSession(path("external.onnx"), providers=["CPUExecutionProvider"])
x = f32(2, 16)
x.tofile(path("external.in0.bin"))
sess.run(None, {"x": x})[0].tofile(path("external.out0.bin"))
with open(path("external.case"), "w") as f:
    f.write("in 1 2 2 16\nout 1 2 2 32\n")
CASES.append(("external", 1e-5))

# the same model pointing outside its directory
for t in m2.graph.initializer:
    for e in t.external_data:
        if e.key == "location":
            e.value = "../external.onnx.data"
onnx.save_model(m2, path("external_escape.onnx"))
# and one whose data file is missing
for t in m2.graph.initializer:
    for e in t.external_data:
        if e.key == "location":
            e.value = "no_such_file.data"
onnx.save_model(m2, path("external_missing.onnx"))

# --- Constant folding: value tensor, value_float, value_ints feeding Reshape
nodes = [helper.make_node("Constant", [], ["k"], name="c1", value=numpy_helper.from_array(f32(6), "kv")),
         helper.make_node("Constant", [], ["s"], name="c2", value_float=0.5),
         helper.make_node("Constant", [], ["shp"], name="c3", value_ints=[-1, 2, 3]),
         helper.make_node("Add", ["x", "k"], ["a"], name="add"),
         helper.make_node("Mul", ["a", "s"], ["m"], name="mul"),
         helper.make_node("Reshape", ["m", "shp"], ["y"], name="reshape")]
m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 6])], [vi("y", TensorProto.FLOAT, ["N", 2, 3])])
compare(m, "constants", {"x": f32(4, 6)})

# --- opset-dependent defaults compared with onnxruntime
# Softmax before 13: axis 1 and 2-D coercion
for opset in (11, 13):
    nodes = [helper.make_node("Softmax", ["x"], ["y"], name="sm"),
             helper.make_node("LogSoftmax", ["x"], ["z"], name="lsm")]
    m = model(nodes, [vi("x", TensorProto.FLOAT, [2, 3, 4])],
              [vi("y", TensorProto.FLOAT, [2, 3, 4]), vi("z", TensorProto.FLOAT, [2, 3, 4])], opset=opset)
    compare(m, "softmax_opset%d" % opset, {"x": f32(2, 3, 4)})
# Squeeze/Unsqueeze axes as attribute (11) and as input (13)
nodes = [helper.make_node("Unsqueeze", ["x"], ["u"], name="unsq", axes=[0, 3]),
         helper.make_node("Squeeze", ["u"], ["y"], name="sq", axes=[0])]
m = model(nodes, [vi("x", TensorProto.FLOAT, [2, 3])], [vi("y", TensorProto.FLOAT, [2, 3, 1])], opset=11)
compare(m, "squeeze_opset11", {"x": f32(2, 3)})
nodes = [helper.make_node("Unsqueeze", ["x", "ax"], ["u"], name="unsq"),
         helper.make_node("Squeeze", ["u", "ax0"], ["y"], name="sq")]
m = model(nodes, [vi("x", TensorProto.FLOAT, [2, 3])], [vi("y", TensorProto.FLOAT, [2, 3, 1])],
          [numpy_helper.from_array(np.array([0, -1], np.int64), "ax"),
           numpy_helper.from_array(np.array([0], np.int64), "ax0")], opset=13)
compare(m, "squeeze_opset13", {"x": f32(2, 3)})

# --- a transformer-ish block: batched MatMul, LayerNorm, Gelu, Transpose, Concat, Dropout
D, H = 8, 2
wq, wo = f32(D, D), f32(D, D)
nodes = [
    helper.make_node("LayerNormalization", ["x", "ln_s", "ln_b"], ["ln"], name="ln", axis=-1, epsilon=1e-5),
    helper.make_node("MatMul", ["ln", "wq"], ["q"], name="q"),
    helper.make_node("Reshape", ["q", "heads"], ["qh"], name="split"),
    helper.make_node("Transpose", ["qh"], ["qt"], name="tr", perm=[0, 2, 1, 3]),
    helper.make_node("Transpose", ["qh"], ["kt"], name="trk", perm=[0, 2, 3, 1]),
    helper.make_node("MatMul", ["qt", "kt"], ["att"], name="qk"),
    helper.make_node("Div", ["att", "scale"], ["atts"], name="scale"),
    helper.make_node("Softmax", ["atts"], ["p"], name="softmax", axis=-1),
    helper.make_node("MatMul", ["p", "qt"], ["ctx"], name="pv"),
    helper.make_node("Transpose", ["ctx"], ["ctxt"], name="tr2", perm=[0, 2, 1, 3]),
    helper.make_node("Reshape", ["ctxt", "merge"], ["ctxm"], name="merge"),
    helper.make_node("MatMul", ["ctxm", "wo"], ["o"], name="o"),
    helper.make_node("Gelu", ["o"], ["g"], name="gelu"),
    helper.make_node("Gelu", ["o"], ["gt"], name="gelu_tanh", approximate="tanh"),
    helper.make_node("Concat", ["g", "gt"], ["cat"], name="cat", axis=-1),
    helper.make_node("Dropout", ["cat"], ["y"], name="drop"),
    helper.make_node("Erf", ["o"], ["e1"], name="erf"),
    helper.make_node("Tanh", ["e1"], ["e2"], name="tanh"),
    helper.make_node("Sigmoid", ["e2"], ["e3"], name="sig"),
    helper.make_node("LeakyRelu", ["e3"], ["e4"], name="leaky"),
    helper.make_node("Sub", ["e4", "x"], ["z"], name="sub"),
]
inits = [numpy_helper.from_array(f32(D), "ln_s"), numpy_helper.from_array(f32(D), "ln_b"),
         numpy_helper.from_array(wq, "wq"), numpy_helper.from_array(wo, "wo"),
         numpy_helper.from_array(np.array([0, 0, H, D // H], np.int64), "heads"),
         numpy_helper.from_array(np.array([0, 0, D], np.int64), "merge"),
         numpy_helper.from_array(np.array(2.0, np.float32), "scale")]
m = model(nodes, [vi("x", TensorProto.FLOAT, ["B", "T", D])],
          [vi("y", TensorProto.FLOAT, ["B", "T", 2 * D]), vi("z", TensorProto.FLOAT, ["B", "T", D])], inits, opset=20)
compare(m, "block", {"x": f32(3, 5, D)})

# --- a BERT layer's projections on 3-D activations, as torch's TorchScript exporter writes them:
# MatMul with a 2-D weight, then Add(bias, product) with the constant first; an exact-erf Gelu
# after the first, the residual Add after the second, a bias + Relu pair, and a LayerNormalization
# with its optional Mean/InvStdDev outputs. The CUDA plan runs each bias in its product's epilogue,
# the residual Add too (test_gpu_plan counts 5 fused nodes: three bias Adds, the residual Add and
# the Relu; 6 in FP16, where the Gelu rides in the epilogue as cuBLASLt's tanh form); its FP16 plan
# runs both LayerNorms in FP16.
D, F = 16, 32
nodes = [
    helper.make_node("LayerNormalization", ["x", "ln1_s", "ln1_b"], ["h"], name="ln1", axis=-1, epsilon=1e-5),
    helper.make_node("MatMul", ["h", "w1"], ["m1"], name="ff1"),
    helper.make_node("Add", ["b1", "m1"], ["a1"], name="ff1_bias"),
    helper.make_node("Gelu", ["a1"], ["g1"], name="gelu"),
    helper.make_node("MatMul", ["g1", "w2"], ["m2"], name="ff2"),
    helper.make_node("Add", ["b2", "m2"], ["a2"], name="ff2_bias"),
    helper.make_node("Add", ["a2", "x"], ["r"], name="residual"),
    helper.make_node("LayerNormalization", ["r", "ln2_s", "ln2_b"], ["y", "mu", "istd"], name="ln2", axis=-1,
                     epsilon=1e-5),
    helper.make_node("MatMul", ["y", "w3"], ["m3"], name="proj"),
    helper.make_node("Add", ["b3", "m3"], ["a3"], name="proj_bias"),
    helper.make_node("Relu", ["a3"], ["z"], name="proj_relu"),
]
inits = [numpy_helper.from_array(f32(D), "ln1_s"), numpy_helper.from_array(f32(D), "ln1_b"),
         numpy_helper.from_array(f32(D, F) * 0.25, "w1"), numpy_helper.from_array(f32(F), "b1"),
         numpy_helper.from_array(f32(F, D) * 0.2, "w2"), numpy_helper.from_array(f32(D), "b2"),
         numpy_helper.from_array(f32(D), "ln2_s"), numpy_helper.from_array(f32(D), "ln2_b"),
         numpy_helper.from_array(f32(D, D) * 0.25, "w3"), numpy_helper.from_array(f32(D), "b3")]
m = model(nodes, [vi("x", TensorProto.FLOAT, ["B", "S", D])],
          [vi("y", TensorProto.FLOAT, ["B", "S", D]), vi("mu", TensorProto.FLOAT, ["B", "S", 1]),
           vi("istd", TensorProto.FLOAT, ["B", "S", 1]), vi("z", TensorProto.FLOAT, ["B", "S", D])], inits, opset=20)
compare(m, "mm3d_bias", {"x": f32(3, 7, D)})

# --- attention with its Q, K, V projections as the exporters write them (attn.c fuses the attention,
# attn_qkv.c merges the projections into one GEMM the fused node reads in place). attn_qkv: BERT's
# TorchScript form, three MatMul + Add(bias, product), the heads' Reshape shape from Shape(x), torch
# SDPA's scaling on Q and Kt, an additive padding mask [B, S], the NaN guard; attn_qkv_split: GPT's
# one projection [E, 3E] and Split, Div by sqrt(D), no mask. Head size 64: the CUDA plan's FP16
# tensor-core kernel (test_gpu_plan's test_qkv_merge compares FP32 and FP16 against the CPU plan).
E, H = 128, 2
HD = E // H
qk_c = np.float32((1.0 / np.sqrt(HD)) ** 0.5)


def heads_nodes(p, src, perm):
    return [helper.make_node("Reshape", [src, "qkv_heads"], [p + "_h4"], name=p + "_view"),
            helper.make_node("Transpose", [p + "_h4"], [p + "_h"], name=p + "_tr", perm=perm)]


shape_nodes = [helper.make_node("Shape", ["x"], ["bs"], name="shape_x", start=0, end=2),
               helper.make_node("Concat", ["bs", "hd"], ["qkv_heads"], name="heads_shape", axis=0)]
tail = [helper.make_node("MatMul", ["p", "v_h"], ["ctx"], name="pv"),
        helper.make_node("Transpose", ["ctx"], ["ctxt"], name="ctx_tr", perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["ctxt", "merge"], ["y"], name="ctx_merge")]
common = [numpy_helper.from_array(np.array([H, HD], np.int64), "hd"),
          numpy_helper.from_array(np.array([0, 0, E], np.int64), "merge")]
nodes = list(shape_nodes)
inits = list(common)
for k in "qkv":
    nodes += [helper.make_node("MatMul", ["x", "w" + k], [k + "_p"], name=k + "_proj"),
              helper.make_node("Add", ["b" + k, k + "_p"], [k + "_a"], name=k + "_bias")]
    nodes += heads_nodes(k, k + "_a", [0, 2, 3, 1] if k == "k" else [0, 2, 1, 3])
    inits += [numpy_helper.from_array(f32(E, E) * 0.1, "w" + k), numpy_helper.from_array(f32(E) * 0.1, "b" + k)]
nodes += [helper.make_node("Mul", ["q_h", "c"], ["qs"], name="q_scale"),
          helper.make_node("Mul", ["k_h", "c"], ["ks"], name="k_scale"),
          helper.make_node("MatMul", ["qs", "ks"], ["sc"], name="qk"),
          helper.make_node("Unsqueeze", ["mask", "mask_axes"], ["mask4"], name="mask4"),
          helper.make_node("Add", ["sc", "mask4"], ["scm"], name="add_mask"),
          helper.make_node("Softmax", ["scm"], ["p0"], name="softmax", axis=-1),
          helper.make_node("IsNaN", ["p0"], ["nan"], name="isnan"),
          helper.make_node("Where", ["nan", "zero", "p0"], ["p"], name="nan_zero")] + tail
inits += [numpy_helper.from_array(np.array(qk_c, np.float32), "c"), numpy_helper.from_array(np.array(0, np.float32), "zero"),
          numpy_helper.from_array(np.array([1, 2], np.int64), "mask_axes")]
m = model(nodes, [vi("x", TensorProto.FLOAT, ["B", "S", E]), vi("mask", TensorProto.FLOAT, ["B", "S"])],
          [vi("y", TensorProto.FLOAT, ["B", "S", E])], inits, opset=17)
mask = np.zeros((2, 9), np.float32)
mask[0, 6:] = -np.inf
compare(m, "attn_qkv", {"x": f32(2, 9, E), "mask": mask}, rtol=1e-4)

nodes = list(shape_nodes) + [
    helper.make_node("MatMul", ["x", "wqkv"], ["qkv_p"], name="qkv_proj"),
    helper.make_node("Add", ["qkv_p", "bqkv"], ["qkv"], name="qkv_bias"),
    helper.make_node("Split", ["qkv", "thirds"], ["q_a", "k_a", "v_a"], name="split", axis=2)]
for k in "qkv":
    nodes += heads_nodes(k, k + "_a", [0, 2, 3, 1] if k == "k" else [0, 2, 1, 3])
nodes += [helper.make_node("MatMul", ["q_h", "k_h"], ["sc"], name="qk"),
          helper.make_node("Div", ["sc", "d"], ["scd"], name="scale"),
          helper.make_node("Softmax", ["scd"], ["p"], name="softmax", axis=-1)] + tail
inits = list(common) + [numpy_helper.from_array(f32(E, 3 * E) * 0.1, "wqkv"),
                        numpy_helper.from_array(f32(3 * E) * 0.1, "bqkv"),
                        numpy_helper.from_array(np.array([E, E, E], np.int64), "thirds"),
                        numpy_helper.from_array(np.array(np.sqrt(HD), np.float32), "d")]
m = model(nodes, [vi("x", TensorProto.FLOAT, ["B", "S", E])], [vi("y", TensorProto.FLOAT, ["B", "S", E])], inits,
          opset=17)
compare(m, "attn_qkv_split", {"x": f32(2, 9, E)}, rtol=1e-4)

# --- BatchNormalization + Flatten + Cast round trip + int64 arithmetic
nodes = [helper.make_node("BatchNormalization", ["x", "s", "b", "mu", "var"], ["bn"], name="bn", epsilon=1e-3),
         helper.make_node("Flatten", ["bn"], ["fl"], name="flat"),
         helper.make_node("Cast", ["fl"], ["fl16"], name="to16", to=TensorProto.FLOAT16),
         helper.make_node("Cast", ["fl16"], ["y"], name="to32", to=TensorProto.FLOAT),
         helper.make_node("Cast", ["fl"], ["i"], name="toi", to=TensorProto.INT64),
         helper.make_node("Mul", ["i", "three"], ["z"], name="muli")]
inits = [numpy_helper.from_array(f32(3), "s"), numpy_helper.from_array(f32(3), "b"),
         numpy_helper.from_array(f32(3), "mu"),
         numpy_helper.from_array(np.abs(f32(3)) + 0.5, "var"),
         numpy_helper.from_array(np.array([3], np.int64), "three")]
m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 3, 2, 2])],
          [vi("y", TensorProto.FLOAT, ["N", 12]), vi("z", TensorProto.INT64, ["N", 12])], inits, opset=15)
compare(m, "bn_cast", {"x": (f32(2, 3, 2, 2) * 4)})

# --- BatchNormalization folded into the Conv before it (graph_pass.c): with and without a Conv
# bias; a BN whose Conv output is also read elsewhere stays (the fold would change that reader)
def _bn_inits(prefix, c):
    return [numpy_helper.from_array(np.abs(f32(c)) + 0.5, prefix + "s"), numpy_helper.from_array(f32(c), prefix + "b"),
            numpy_helper.from_array(f32(c), prefix + "mu"), numpy_helper.from_array(np.abs(f32(c)) + 0.5, prefix + "var")]


nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
         helper.make_node("BatchNormalization", ["c1", "1s", "1b", "1mu", "1var"], ["n1"], name="bn1", epsilon=1e-3),
         helper.make_node("Relu", ["n1"], ["r1"], name="relu1"),
         helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2", strides=[2, 2]),
         helper.make_node("BatchNormalization", ["c2", "2s", "2b", "2mu", "2var"], ["y"], name="bn2"),
         helper.make_node("Conv", ["x", "w3"], ["c3"], name="conv3", pads=[1, 1, 1, 1]),
         helper.make_node("BatchNormalization", ["c3", "3s", "3b", "3mu", "3var"], ["n3"], name="bn3_kept"),
         helper.make_node("Add", ["n3", "c3"], ["z"], name="add_c3")]
inits = [numpy_helper.from_array(f32(8, 3, 3, 3) / 3, "w1"), numpy_helper.from_array(f32(8), "b1"),
         numpy_helper.from_array(f32(4, 8, 3, 3) / 8, "w2"), numpy_helper.from_array(f32(5, 3, 3, 3) / 3, "w3")]
inits += _bn_inits("1", 8) + _bn_inits("2", 4) + _bn_inits("3", 5)
m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 3, 7, 7])],
          [vi("y", TensorProto.FLOAT, ["N", 4, 3, 3]), vi("z", TensorProto.FLOAT, ["N", 5, 7, 7])], inits)
compare(m, "conv_bn_fold", {"x": f32(2, 3, 7, 7)}, rtol=1e-4)

# --- GELU and LayerNorm split by exporters, fused at load (graph_pass_norm.c). test_graph.c counts
# what fused and what was left; these cases check the values against onnxruntime.
def sc(v, name):
    return numpy_helper.from_array(np.array(v, np.float32), name)


mk = helper.make_node
nodes = [  # exact GELU, dynamo's order: x * (0.5 * (1 + erf(x / sqrt2)))
         mk("Div", ["x", "sqrt2"], ["t1"]), mk("Erf", ["t1"], ["e1"]), mk("Add", ["e1", "one"], ["a1"]),
         mk("Mul", ["half", "a1"], ["h1"]), mk("Mul", ["x", "h1"], ["y1"], name="gelu1"),
         # exact GELU, x * (1/sqrt2), TorchScript's order: (x * (1 + erf)) * 0.5
         mk("Mul", ["x", "isqrt2"], ["t2"]), mk("Erf", ["t2"], ["e2"]), mk("Add", ["one", "e2"], ["a2"]),
         mk("Mul", ["x", "a2"], ["m2"]), mk("Mul", ["m2", "half"], ["y2"], name="gelu2"),
         # tanh GELU with Pow, HF gelu_new's order: (x * 0.5) * (1 + tanh(..))
         mk("Pow", ["x", "three"], ["c3"]), mk("Mul", ["k044", "c3"], ["k3"]), mk("Add", ["x", "k3"], ["s3"]),
         mk("Mul", ["s3", "sqrt2pi"], ["u3"]), mk("Tanh", ["u3"], ["t3"]), mk("Add", ["t3", "one"], ["a3"]),
         mk("Mul", ["x", "half"], ["h3"]), mk("Mul", ["h3", "a3"], ["y3"], name="gelu3"),
         # tanh GELU with x * x * x (gpt.ts17)
         mk("Mul", ["x", "x"], ["q4"]), mk("Mul", ["x", "q4"], ["c4"]), mk("Mul", ["k044", "c4"], ["k4"]),
         mk("Add", ["x", "k4"], ["s4"]), mk("Mul", ["sqrt2pi", "s4"], ["u4"]), mk("Tanh", ["u4"], ["t4"]),
         mk("Add", ["one", "t4"], ["a4"]), mk("Mul", ["x", "a4"], ["m4"]), mk("Mul", ["half", "m4"], ["y4"], name="gelu4"),
         # near miss: divides by 1.5, not sqrt(2)
         mk("Div", ["x", "c15"], ["t5"]), mk("Erf", ["t5"], ["e5"], name="erf_near_const"),
         mk("Add", ["e5", "one"], ["a5"]), mk("Mul", ["half", "a5"], ["h5"]), mk("Mul", ["x", "h5"], ["y5"]),
         # near miss: 1 + erf(..) is also a graph output
         mk("Div", ["x", "sqrt2"], ["t6"]), mk("Erf", ["t6"], ["e6"], name="erf_near_shared"),
         mk("Add", ["e6", "one"], ["a6"]), mk("Mul", ["half", "a6"], ["h6"]), mk("Mul", ["x", "h6"], ["y6"])]
consts = [sc(np.sqrt(2), "sqrt2"), sc(1 / np.sqrt(2), "isqrt2"), sc(1, "one"), sc(0.5, "half"), sc(3, "three"),
          sc(0.044715, "k044"), sc(np.sqrt(2 / np.pi), "sqrt2pi"), sc(1.5, "c15")]
outs = ["y1", "y2", "y3", "y4", "y5", "y6", "a6"]
m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 6])], [vi(o, TensorProto.FLOAT, ["N", 6]) for o in outs], consts,
          opset=17)
compare(m, "gelu_split", {"x": f32(3, 6) * 2}, rtol=1e-5)


def ln_split(p, x, y, axes, opset, sq="pow", scale=None, bias=None):
    """ReduceMean-Sub-Pow-ReduceMean-Add-Sqrt-Div-Mul(-Add) as torch wrote LayerNorm before opset 17."""
    def rm(i, o):
        if opset >= 18:
            return mk("ReduceMean", [i, p + "axes"], [o])
        return mk("ReduceMean", [i], [o], axes=axes)
    n = [rm(x, p + "m"), mk("Sub", [x, p + "m"], [p + "d"]),
         mk("Pow", [p + "d", "two"], [p + "p"]) if sq == "pow" else mk("Mul", [p + "d", p + "d"], [p + "p"]),
         rm(p + "p", p + "v"), mk("Add", [p + "v", "eps"], [p + "ve"]), mk("Sqrt", [p + "ve"], [p + "s"]),
         mk("Div", [p + "d", p + "s"], [p + "n"])]
    if bias:
        n += [mk("Mul", [p + "n", scale], [p + "g"]), mk("Add", [p + "g", bias], [y])]
    else:
        n += [mk("Mul", [scale, p + "n"], [y])]
    return n


lnc = [sc(2, "two"), sc(1e-5, "eps"), numpy_helper.from_array(f32(16), "g16"),
       numpy_helper.from_array(f32(16), "b16"), numpy_helper.from_array(f32(5, 16), "g516"),
       numpy_helper.from_array(f32(5, 16), "b516")]
nodes = (ln_split("l1", "x", "y1", [-1], 13, scale="g16", bias="b16")
         + ln_split("l2", "x", "y2", [-1], 13, sq="mul", scale="g16")  # x*x, no bias, Scale first
         + ln_split("l3", "x", "y3", [-2, -1], 13, scale="g516", bias="b516")  # two trailing axes
         + ln_split("l4", "x", "y4", [2], 13, scale="g16", bias="b16")  # near miss: a positive axis
         + ln_split("l5", "x", "y5", [-1], 13, scale="g16", bias="b16"))  # near miss: d is an output too
outs = ["y1", "y2", "y3", "y4", "y5", "l5d"]
m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 5, 16])], [vi(o, TensorProto.FLOAT, ["N", 5, 16]) for o in outs],
          lnc, opset=13)
compare(m, "ln_split13", {"x": f32(2, 5, 16) * 3 + 1}, rtol=1e-5)
lnc18 = lnc[:4] + [numpy_helper.from_array(np.array([-1], np.int64), "l1axes"),
                   numpy_helper.from_array(np.array([-1], np.int64), "l2axes"),
                   numpy_helper.from_array(np.array([-1], np.int64), "l3axes"),
                   numpy_helper.from_array(np.ones([1], np.float32), "g1")]
nodes = (ln_split("l1", "x", "y1", None, 18, scale="g16", bias="b16")
         + ln_split("l2", "x", "y2", None, 18, scale="g1", bias="b16")  # near miss: Scale of shape [1] broadcasts
         + ln_split("l3", "x", "y3", None, 18, scale="g16", bias="g1"))  # B of shape [1]: the Add stays
m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 5, 16])],
          [vi(o, TensorProto.FLOAT, ["N", 5, 16]) for o in ["y1", "y2", "y3"]], lnc18, opset=18)
compare(m, "ln_split18", {"x": f32(2, 5, 16) * 3 + 1}, rtol=1e-5)

# the transformer exports of the zoo, weights filled, for test_graph.c's fusion counts (their values are
# checked against onnxruntime through the server by tests/integration/test_zoo_transformers.py)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models", "zoo"))
import fill  # noqa: E402

for zname, zpath in fill.available().items():
    if zname.split(".")[0] in ("bert", "distilbert", "vit", "gpt"):
        onnx.save_model(fill.fill_model(zpath, 0), path("zoo_" + zname.replace(".", "_") + ".onnx"))

# --- the k_unop activations MobileNet/EfficientNet exports use (HardSigmoid, HardSwish) and the
# rest of the family, on the CPU here and on the GPU in test_gpu_plan (kernels/elem/k_unop.cu)
nodes = [helper.make_node("HardSigmoid", ["x"], ["hs"], name="hsig", alpha=0.25, beta=0.4),
         helper.make_node("HardSwish", ["x"], ["hw"], name="hswish"),
         helper.make_node("Abs", ["x"], ["ab"], name="abs"),
         helper.make_node("Sqrt", ["ab"], ["sq"], name="sqrt"),
         helper.make_node("Neg", ["sq"], ["ng"], name="neg"),
         helper.make_node("Exp", ["ng"], ["ex"], name="exp"),
         helper.make_node("Reciprocal", ["ex"], ["rc"], name="recip"),
         helper.make_node("Mul", ["hs", "hw"], ["m1"], name="mul1"),
         helper.make_node("Add", ["m1", "rc"], ["y"], name="add1")]
m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 4, 5])], [vi("y", TensorProto.FLOAT, ["N", 4, 5])], opset=17)
compare(m, "unops", {"x": f32(3, 4, 5) * 4}, rtol=1e-5)

# --- convolutions and pools (CPU through oneDNN; test_gpu_plan also runs them through cuDNN)
def conv(name, x, w, y, **kw):
    return helper.make_node("Conv", [x, w] + (["b" + w[1:]] if kw.pop("bias", True) else []), [y], name=name, **kw)


def conv_inits(specs):
    """specs: (weight name, [out, in/group, kh(, kw)], bias?) -> initializers w*, b*."""
    inits = []
    for wn, shape, bias in specs:
        fan_in = int(np.prod(shape[1:]))
        inits.append(numpy_helper.from_array(f32(*shape) / np.float32(np.sqrt(fan_in)), wn))
        if bias:
            inits.append(numpy_helper.from_array(f32(shape[0]) * np.float32(0.1), "b" + wn[1:]))
    return inits


# A ResNet basic block and a downsampling one: Conv+bias+Relu, Conv, Add of
# the shortcut, Relu. The first Add reads the conv output first (runs in
# place on it), the second reads the shortcut first (in place on that).
nodes = [conv("stem", "x", "w0", "h0", pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["h0"], ["h"], name="stem_relu"),
         conv("c1", "h", "w1", "a1", pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["a1"], ["r1"], name="relu1"),
         conv("c2", "r1", "w2", "a2", pads=[1, 1, 1, 1]),
         helper.make_node("Add", ["a2", "h"], ["s1"], name="add1"),
         helper.make_node("Relu", ["s1"], ["o1"], name="relu2"),
         conv("c3", "o1", "w3", "a3", pads=[1, 1, 1, 1], strides=[2, 2]),
         helper.make_node("Relu", ["a3"], ["r3"], name="relu3"),
         conv("c4", "r3", "w4", "a4", pads=[1, 1, 1, 1]),
         conv("sc", "o1", "w5", "s5", strides=[2, 2], bias=False),
         helper.make_node("Add", ["s5", "a4"], ["s2"], name="add2"),
         helper.make_node("Relu", ["s2"], ["y"], name="relu4")]
inits = conv_inits([("w0", [8, 3, 3, 3], True), ("w1", [8, 8, 3, 3], True), ("w2", [8, 8, 3, 3], True),
                    ("w3", [16, 8, 3, 3], True), ("w4", [16, 16, 3, 3], True), ("w5", [16, 8, 1, 1], False)])
m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 3, 10, 10])], [vi("y", TensorProto.FLOAT, ["N", 16, 5, 5])],
          inits)
compare(m, "conv_resnet", {"x": f32(2, 3, 10, 10)}, rtol=1e-4)

# Depthwise-separable with asymmetric pads, stride 2, a dilated conv,
# Sigmoid/Tanh epilogues, a conv output that is also a graph output (not
# fused), MaxPool with ceil_mode, GlobalAveragePool.
nodes = [conv("dw", "x", "w0", "d0", group=8, pads=[1, 1, 0, 0], strides=[2, 2]),
         helper.make_node("Sigmoid", ["d0"], ["d1"], name="dw_sig"),
         conv("pw", "d1", "w1", "p0", bias=False),
         helper.make_node("Relu", ["p0"], ["p1"], name="pw_relu"),
         conv("dil", "p1", "w2", "q0", pads=[2, 2, 2, 2], dilations=[2, 2]),
         helper.make_node("Tanh", ["q0"], ["q1"], name="dil_tanh"),
         helper.make_node("MaxPool", ["q1"], ["mp"], name="mp", kernel_shape=[3, 3], strides=[2, 2],
                          pads=[0, 0, 1, 1], ceil_mode=1),
         helper.make_node("GlobalAveragePool", ["mp"], ["gap"], name="gap"),
         helper.make_node("Flatten", ["gap"], ["y"], name="flat"),
         conv("same", "p1", "w3", "z", auto_pad="SAME_UPPER", strides=[2, 2])]
inits = conv_inits([("w0", [8, 1, 3, 3], True), ("w1", [16, 8, 1, 1], False), ("w2", [16, 16, 3, 3], True),
                    ("w3", [4, 16, 2, 2], True)])
m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 8, 9, 9])],
          [vi("y", TensorProto.FLOAT, ["N", 16]), vi("p0", TensorProto.FLOAT, ["N", 16, 4, 4]),
           vi("z", TensorProto.FLOAT, ["N", 4, 2, 2])], inits)
compare(m, "conv_dwsep", {"x": f32(2, 8, 9, 9)}, rtol=1e-4)

# The pools' padding rules, and a 1-D conv (H = 1 on cuDNN).
nodes = [helper.make_node("MaxPool", ["x"], ["m"], name="max", kernel_shape=[3, 3], strides=[2, 2],
                          pads=[1, 1, 1, 1]),
         helper.make_node("AveragePool", ["x"], ["a"], name="avg_ex", kernel_shape=[3, 3], strides=[2, 2],
                          pads=[0, 0, 1, 1], ceil_mode=1),
         helper.make_node("AveragePool", ["x"], ["b"], name="avg_in", kernel_shape=[2, 3], strides=[2, 2],
                          pads=[1, 1, 1, 0], count_include_pad=1),
         helper.make_node("GlobalMaxPool", ["x"], ["g"], name="gmax"),
         helper.make_node("Reshape", ["x", "to1d"], ["x1"], name="to1d"),
         conv("c1d", "x1", "w0", "c", pads=[2, 1], strides=[2]),
         helper.make_node("Relu", ["c"], ["cr"], name="relu1d"),
         helper.make_node("MaxPool", ["cr"], ["cm"], name="max1d", kernel_shape=[2], strides=[2])]
inits = conv_inits([("w0", [6, 4, 5], True)]) + [
    numpy_helper.from_array(np.array([0, 4, -1], np.int64), "to1d")]
m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 4, 11, 11])],
          [vi("m", TensorProto.FLOAT, ["N", 4, 6, 6]), vi("a", TensorProto.FLOAT, ["N", 4, 6, 6]),
           vi("b", TensorProto.FLOAT, ["N", 4, 6, 5]), vi("g", TensorProto.FLOAT, ["N", 4, 1, 1]),
           vi("cm", TensorProto.FLOAT, ["N", 6, 30])], inits)
compare(m, "conv_pools", {"x": f32(2, 4, 11, 11)}, rtol=1e-4)

# A squeeze-excitation block as MobileNetV3 / EfficientNet export it (opset 18: ReduceMean's axes
# are an input), around the GPU plan's NHWC regions: a spatial mean ([N, C, 1, 1], the same bytes
# in both layouts) scaling the activations through a broadcast Mul, a rank-3 [C, 1, 1] constant
# added, ReLU6 (Clip), a channel mean and a height-only sum kept 4-D (NHWC outputs transposed back), and a
# Flatten that must read NCHW.
nodes = [conv("c0", "x", "w0", "a0", pads=[1, 1, 1, 1]),
         helper.make_node("HardSwish", ["a0"], ["h0"], name="hswish"),
         helper.make_node("ReduceMean", ["h0", "ax_hw"], ["m0"], name="se_mean", keepdims=1),
         conv("se1", "m0", "w1", "s1"),
         helper.make_node("Relu", ["s1"], ["s1r"], name="se_relu"),
         conv("se2", "s1r", "w2", "s2"),
         helper.make_node("HardSigmoid", ["s2"], ["s2h"], name="se_gate", alpha=1.0 / 6, beta=0.5),
         helper.make_node("Mul", ["h0", "s2h"], ["e0"], name="se_scale"),
         helper.make_node("Add", ["e0", "cb"], ["e1"], name="add_cb"),
         helper.make_node("Clip", ["e1", "zero", "six"], ["e2"], name="relu6"),
         conv("c3", "e2", "w3", "a3", pads=[1, 1, 1, 1], strides=[2, 2]),
         helper.make_node("ReduceMean", ["a3", "ax_c"], ["yc"], name="mean_c", keepdims=1),
         helper.make_node("ReduceSum", ["a3", "ax_h"], ["yh"], name="sum_h", keepdims=1),
         helper.make_node("Flatten", ["a3"], ["yf"], name="flat")]
inits = conv_inits([("w0", [8, 3, 3, 3], True), ("w1", [4, 8, 1, 1], True), ("w2", [8, 4, 1, 1], True),
                    ("w3", [6, 8, 3, 3], True)]) + [
    numpy_helper.from_array(np.array([2, 3], np.int64), "ax_hw"),
    numpy_helper.from_array(np.array([1], np.int64), "ax_c"),
    numpy_helper.from_array(np.array([-2], np.int64), "ax_h"),
    numpy_helper.from_array(f32(8, 1, 1), "cb"),
    numpy_helper.from_array(np.array(0, np.float32), "zero"), numpy_helper.from_array(np.array(6, np.float32), "six")]
m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 3, 9, 9])],
          [vi("yc", TensorProto.FLOAT, ["N", 1, 5, 5]), vi("yh", TensorProto.FLOAT, ["N", 6, 1, 5]),
           vi("yf", TensorProto.FLOAT, ["N", 150])], inits, opset=18)
compare(m, "conv_se", {"x": f32(2, 3, 9, 9)}, rtol=1e-4)

# A squeeze-excitation block as MobileNetV3 exports it (GlobalAveragePool -> Conv 1x1 + bias ->
# Relu -> Conv 1x1 + bias -> HardSigmoid -> Mul with the block's input), beside three more 1x1
# convolutions of the pooled [N, C, 1, 1]: one with a residual Add of the pool and a Relu, without
# bias; one whose Sigmoid fuses; one with strides 2 (irrelevant on one pixel). On the GPU plan
# every 1x1 Conv on a 1x1 input runs as a cuBLASLt GEMM (engine/ops/conv/conv_cuda.c is_gemm) with its bias,
# Relu and residual in the epilogue, except the Sigmoid one (cuBLASLt has no such epilogue:
# cuDNN): 4 of 6 Convs; test_gpu_plan counts them. The pool (k_reduce_cuda's mean on the GPU) is
# over 8x8 = 64 values, where its NHWC form splits each row over a block.
nodes = [conv("c0", "x", "w0", "a0", pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["a0"], ["h0"], name="c0_relu"),
         helper.make_node("GlobalAveragePool", ["h0"], ["g"], name="gap"),
         conv("se1", "g", "w1", "s1"),
         helper.make_node("Relu", ["s1"], ["s1r"], name="se_relu"),
         conv("se2", "s1r", "w2", "s2"),
         helper.make_node("HardSigmoid", ["s2"], ["s2h"], name="se_gate", alpha=1.0 / 6, beta=0.5),
         helper.make_node("Mul", ["h0", "s2h"], ["y"], name="se_scale"),
         conv("res", "g", "w3", "r0", bias=False),
         helper.make_node("Add", ["r0", "g"], ["r1"], name="res_add"),
         helper.make_node("Relu", ["r1"], ["yr"], name="res_relu"),
         conv("sig", "g", "w4", "q0"),
         helper.make_node("Sigmoid", ["q0"], ["ys"], name="sig_act"),
         conv("strided", "g", "w5", "yt", strides=[2, 2])]
inits = conv_inits([("w0", [16, 8, 3, 3], True), ("w1", [8, 16, 1, 1], True), ("w2", [16, 8, 1, 1], True),
                    ("w3", [16, 16, 1, 1], False), ("w4", [4, 16, 1, 1], True), ("w5", [4, 16, 1, 1], True)])
m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 8, 8, 8])],
          [vi("y", TensorProto.FLOAT, ["N", 16, 8, 8]), vi("yr", TensorProto.FLOAT, ["N", 16, 1, 1]),
           vi("ys", TensorProto.FLOAT, ["N", 4, 1, 1]), vi("yt", TensorProto.FLOAT, ["N", 4, 1, 1])], inits)
compare(m, "conv_se_gemm", {"x": f32(2, 8, 8, 8)}, rtol=1e-4)

# Resampling and padding between convolutions as segmentation / detection heads export them
# (on the GPU through kernels/resize/k_resize.cu, NHWC inside the conv region): a global pool broadcast back
# by a nearest Resize whose sizes are Shape(c0) (folded from the input shape), a nearest x2
# (asymmetric / floor, PyTorch's nn.Upsample), a leaky clamp by a variadic Max with a
# per-channel and a scalar bound and a scalar Min, a reflect Pad, a Conv, then two bilinear
# resizes (half_pixel with sizes Shape(c1)[0:2] ++ [9, 16], align_corners with scales), an
# edge Pad with negative pads (crops), a constant Pad on C, H and W, and a Pow. Beside it the
# rest of the elementwise family on the input: Max of three (|x| floored per channel), Pow with
# per-column exponents, Equal(Min(x, 0), x) (x <= 0: decided away from any rounding, so FP16
# plans agree bit for bit) selecting through a broadcasting Where, and int64 Max/Min/Pow/Equal.
nodes = [conv("c0", "x", "w0", "c0", pads=[1, 1, 1, 1]),
         helper.make_node("GlobalAveragePool", ["c0"], ["g"], name="gap"),
         helper.make_node("Shape", ["c0"], ["s0"], name="shape0"),
         helper.make_node("Resize", ["g", "", "", "s0"], ["gu"], name="pool_back", mode="nearest"),
         helper.make_node("Add", ["c0", "gu"], ["a0"], name="add_pool"),
         helper.make_node("Resize", ["a0", "", "up2"], ["u0"], name="up2", mode="nearest",
                          coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
         helper.make_node("Max", ["u0", "lo_c", "lo_s"], ["m0"], name="max3"),
         helper.make_node("Min", ["m0", "six"], ["n0"], name="min_six"),
         helper.make_node("Pad", ["n0", "pads_r"], ["p0"], name="pad_reflect", mode="reflect"),
         conv("c1", "p0", "w1", "c1"),
         helper.make_node("Shape", ["c1"], ["s1"], name="shape1"),
         helper.make_node("Slice", ["s1", "i0", "i2"], ["s1nc"], name="nc"),
         helper.make_node("Concat", ["s1nc", "hw"], ["sz"], name="sizes", axis=0),
         helper.make_node("Resize", ["c1", "", "", "sz"], ["l0"], name="lin_sizes", mode="linear"),
         helper.make_node("Resize", ["c1", "", "sc_l"], ["l1"], name="lin_corners", mode="linear",
                          coordinate_transformation_mode="align_corners"),
         helper.make_node("Pad", ["l1", "pads_e"], ["pe"], name="pad_edge_crop", mode="edge"),
         helper.make_node("Pad", ["l0", "pads_c", "half"], ["y1"], name="pad_const"),
         helper.make_node("Pow", ["pe", "two"], ["y2"], name="square"),
         helper.make_node("Neg", ["x"], ["nx"], name="neg"),
         helper.make_node("Max", ["x", "nx", "q_c"], ["ax"], name="abs_floor"),
         helper.make_node("Pow", ["ax", "e_w"], ["pw"], name="pow_cols"),
         helper.make_node("Min", ["x", "zero"], ["mn"], name="min0"),
         helper.make_node("Equal", ["mn", "x"], ["eq"], name="le0"),
         helper.make_node("Where", ["eq", "pw", "y_h"], ["z"], name="where"),
         helper.make_node("Max", ["k", "kc"], ["ki"], name="max_i"),
         helper.make_node("Min", ["ki", "k7"], ["kj"], name="min_i"),
         helper.make_node("Pow", ["kj", "ke"], ["kp"], name="pow_i"),
         helper.make_node("Equal", ["k", "kc"], ["keq"], name="eq_i")]
inits = conv_inits([("w0", [8, 3, 3, 3], True), ("w1", [4, 8, 3, 3], True)]) + [
    numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "up2"),
    numpy_helper.from_array(-np.abs(f32(1, 8, 1, 1)) * np.float32(0.2), "lo_c"),
    numpy_helper.from_array(np.array(-0.3, np.float32), "lo_s"),
    numpy_helper.from_array(np.array(6, np.float32), "six"),
    numpy_helper.from_array(np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64), "pads_r"),
    numpy_helper.from_array(np.array([0], np.int64), "i0"), numpy_helper.from_array(np.array([2], np.int64), "i2"),
    numpy_helper.from_array(np.array([9, 16], np.int64), "hw"),
    # align_corners with lengths scale * in that are whole: where they are not (a downsample of 4 by 0.6),
    # onnxruntime divides by the rounded length, ONNX's reference and its conformance tests
    # (test_resize_downsample_scales_linear_align_corners) by the fractional one, which inferd follows
    numpy_helper.from_array(np.array([1, 1, 2, 3], np.float32), "sc_l"),
    numpy_helper.from_array(np.array([0, 0, -1, 2, 0, 0, 1, -2], np.int64), "pads_e"),
    numpy_helper.from_array(np.array([0, 1, 1, 0, 0, 0, -2, 1], np.int64), "pads_c"),
    numpy_helper.from_array(np.array(0.5, np.float32), "half"),
    numpy_helper.from_array(np.array(2, np.float32), "two"),
    numpy_helper.from_array(np.array([0.1, 0.2, 0.3], np.float32).reshape(1, 3, 1, 1), "q_c"),
    numpy_helper.from_array(np.array([0.5, 1, 2, 1.5, -1], np.float32), "e_w"),
    numpy_helper.from_array(np.array(0, np.float32), "zero"),
    numpy_helper.from_array(f32(6, 1), "y_h"),
    numpy_helper.from_array(np.array([-3, 0, 2, -10, 5], np.int64), "kc"),
    numpy_helper.from_array(np.array(7, np.int64), "k7"),
    numpy_helper.from_array(np.array([2, 3, 1, 0, 2], np.int64), "ke")]
m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 3, 6, 5]), vi("k", TensorProto.INT64, ["N", 5])],
          [vi("y1", TensorProto.FLOAT, ["N", 5, 8, 17]), vi("y2", TensorProto.FLOAT, ["N", 4, 26, 33]),
           vi("z", TensorProto.FLOAT, ["N", 3, 6, 5]), vi("eq", TensorProto.BOOL, ["N", 3, 6, 5]),
           vi("kp", TensorProto.INT64, ["N", 5]), vi("keq", TensorProto.BOOL, ["N", 5])], inits)
compare(m, "vision_resize", {"x": f32(2, 3, 6, 5), "k": RNG.integers(-20, 20, (2, 5)).astype(np.int64)},
        rtol=1e-4)

# The opset-9 spellings: Upsample (scales as an input) nearest and linear, Pad with its pads and
# value as attributes (constant and reflect).
nodes = [helper.make_node("Upsample", ["x", "sc"], ["u"], name="up_nearest", mode="nearest"),
         helper.make_node("Pad", ["u"], ["p"], name="pad_attr", mode="reflect", pads=[0, 0, 2, 1, 0, 0, 1, 3]),
         helper.make_node("Upsample", ["p", "sc_lin"], ["y"], name="up_linear", mode="linear"),
         helper.make_node("Pad", ["x"], ["z"], name="pad_value", pads=[0, 1, 0, 2, 0, 0, 1, 0], value=1.5)]
m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 3, 4, 5])],
          [vi("y", TensorProto.FLOAT, ["N", 3, 16, 28]), vi("z", TensorProto.FLOAT, ["N", 4, 5, 7])],
          [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "sc"),
           numpy_helper.from_array(np.array([1, 1, 1.5, 2], np.float32), "sc_lin")], opset=9)
compare(m, "upsample_opset9", {"x": f32(2, 3, 4, 5)})

# Pad whose constant_value is computed from the data: runs on the CPU; a GPU plan cannot read it on
# the host while planning, so the node runs on the host inside it (host fallback, test_gpu_plan)
nodes = [helper.make_node("ReduceMax", ["x"], ["mx"], name="max_all", keepdims=0),
         helper.make_node("Pad", ["x", "pads", "mx"], ["y"], name="pad_by_max")]
m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 2, 3])], [vi("y", TensorProto.FLOAT, ["N", 2, 5])],
          [numpy_helper.from_array(np.array([0, 0, 1, 0, 0, 1], np.int64), "pads")])
# (input from linspace, not RNG: the random weights of every model after it stay as they were)
compare(m, "pad_runtime_value", {"x": np.linspace(-1, 1, 12, dtype=np.float32).reshape(2, 2, 3)})


# ConvTranspose (CPU through oneDNN, GPU through cuDNN's backward data): the plain stride-2 case,
nodes = [helper.make_node("ConvTranspose", ["x", "w0"], ["y"], name="up", strides=[2, 2])]
m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 4, 5, 5])], [vi("y", TensorProto.FLOAT, ["N", 2, 11, 11])],
          [numpy_helper.from_array(f32(4, 2, 3, 3) / np.float32(3), "w0")])
compare(m, "conv_transpose", {"x": f32(2, 4, 5, 5)}, rtol=1e-4)

# and a decoder-like net: a Conv (+Relu, fused on the GPU, which leads the GPU's FP16/TF32 plans
# into NHWC) feeding two ConvTransposes that follow it there: one with asymmetric pads
# (top, left, bottom, right = 0, 1, 1, 2), output_padding (1, 0), group 2 and a bias, then a Relu;
# one without a bias whose output_shape (13, 12) fixes uneven pads (1|0 rows, 3|2 columns, the odd
# unit first) with a column dilation of 2.
nodes = [conv("c0", "x", "w0", "h0", pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["h0"], ["r0"], name="relu0"),
         helper.make_node("ConvTranspose", ["r0", "wt1", "bt1"], ["u1"], name="up_g2", group=2, strides=[2, 2],
                          pads=[0, 1, 1, 2], output_padding=[1, 0]),
         helper.make_node("Relu", ["u1"], ["y"], name="relu1"),
         helper.make_node("ConvTranspose", ["r0", "wt2"], ["z"], name="up_shape", kernel_shape=[4, 4],
                          strides=[2, 2], dilations=[1, 2], output_shape=[13, 12])]
inits = conv_inits([("w0", [8, 4, 3, 3], True)]) + [
    numpy_helper.from_array(f32(8, 3, 3, 3) / np.float32(3), "wt1"),
    numpy_helper.from_array(f32(6) * np.float32(0.1), "bt1"),
    numpy_helper.from_array(f32(8, 4, 4, 4) / np.float32(4), "wt2")]
m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 4, 6, 6])],
          [vi("y", TensorProto.FLOAT, ["N", 6, 13, 10]), vi("z", TensorProto.FLOAT, ["N", 4, 13, 12])], inits)
compare(m, "conv_transpose_net", {"x": f32(2, 4, 6, 6)}, rtol=1e-4)

# --- transformer masks and index ops (tests/unit/engine/test_ops_transformer.c checks them by
# hand): comparisons on three types with broadcasting, bool logic, IsNaN/IsInf; bool outputs
x = f32(2, 3, 4)
x[0, 0, 1], x[1, 2, 3], x[1, 0, 0] = np.nan, np.inf, -np.inf
nodes = [helper.make_node("Less", ["x", "c"], ["lt"], name="lt"),
         helper.make_node("Greater", ["x", "c"], ["gt"], name="gt"),
         helper.make_node("IsNaN", ["x"], ["nan"], name="isnan"),
         helper.make_node("IsInf", ["x"], ["inf"], name="isinf", detect_negative=0),
         helper.make_node("Cast", ["i"], ["m1"], name="tobool", to=TensorProto.BOOL),
         helper.make_node("GreaterOrEqual", ["j", "jc"], ["m2"], name="ge32"),
         helper.make_node("LessOrEqual", ["j", "jc"], ["le"], name="le32"),
         helper.make_node("GreaterOrEqual", ["i", "ic"], ["gei"], name="ge64"),
         helper.make_node("Equal", ["m1", "m2"], ["eqb"], name="eqb"),
         helper.make_node("Not", ["m2"], ["nm2"], name="not"),
         helper.make_node("Or", ["m1", "nm2"], ["o"], name="or"),
         helper.make_node("Unsqueeze", ["o", "ax1"], ["o3"], name="unsq"),
         helper.make_node("And", ["lt", "o3"], ["a"], name="and"),
         helper.make_node("Xor", ["a", "nan"], ["logic"], name="xor"),
         helper.make_node("Or", ["logic", "inf"], ["y"], name="or_inf")]
inits = [numpy_helper.from_array(np.array([0, -0.5, 0.5, 0], np.float32), "c"),
         numpy_helper.from_array(np.array([0, 1, -1, 2], np.int32), "jc"),
         numpy_helper.from_array(np.array([1], np.int64), "ic"),
         numpy_helper.from_array(np.array([1], np.int64), "ax1")]
m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 3, 4]), vi("i", TensorProto.INT64, ["N", 4]),
                  vi("j", TensorProto.INT32, ["N", 4])],
          [vi("y", TensorProto.BOOL, ["N", 3, 4]), vi("gt", TensorProto.BOOL, ["N", 3, 4]),
           vi("eqb", TensorProto.BOOL, ["N", 4]), vi("le", TensorProto.BOOL, ["N", 4]),
           vi("gei", TensorProto.BOOL, ["N", 4])], inits, opset=18)
compare(m, "xf_masks", {"x": x, "i": RNG.integers(-1, 3, (2, 4)).astype(np.int64),
                        "j": RNG.integers(-2, 3, (2, 4)).astype(np.int32)})

# GatherElements (int32 indices, negative ones, narrower than the data), GatherND with
# batch_dims, Trilu below the diagonal, CumSum exclusive and reversed, Split-18 with a smaller
# last part
nodes = [helper.make_node("GatherElements", ["x", "ids"], ["ge"], name="gather_el", axis=-1),
         helper.make_node("GatherND", ["x", "nd"], ["gnd"], name="gather_nd", batch_dims=1),
         helper.make_node("Trilu", ["x", "k"], ["tl"], name="trilu", upper=0),
         helper.make_node("CumSum", ["x", "cax"], ["cs"], name="cumsum", exclusive=1, reverse=1),
         helper.make_node("Split", ["x"], ["s0", "s1"], name="split", axis=1, num_outputs=2)]
inits = [numpy_helper.from_array(np.array(-1, np.int64), "k"),
         numpy_helper.from_array(np.array(1, np.int32), "cax")]
m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 5, 6]), vi("ids", TensorProto.INT32, ["N", 4, 2]),
                  vi("nd", TensorProto.INT64, ["N", 3, 1])],
          [vi("ge", TensorProto.FLOAT, ["N", 4, 2]), vi("gnd", TensorProto.FLOAT, ["N", 3, 6]),
           vi("tl", TensorProto.FLOAT, ["N", 5, 6]), vi("cs", TensorProto.FLOAT, ["N", 5, 6]),
           vi("s0", TensorProto.FLOAT, ["N", 3, 6]), vi("s1", TensorProto.FLOAT, ["N", 2, 6])], inits, opset=18)
compare(m, "xf_index", {"x": f32(3, 5, 6), "ids": RNG.integers(-6, 6, (3, 4, 2)).astype(np.int32),
                        "nd": RNG.integers(-5, 5, (3, 3, 1)).astype(np.int64)})

# MobileNetV3's inverted residual blocks after a stem Conv, for the depthwise kernel's fused activations (the GPU
# plan fuses HardSwish/HardSigmoid into depthwise Convs only; on NCHW plans cuDNN runs them after
# the conv; on NHWC ones the expand Conv's HardSwish is applied by the depthwise kernel as it
# loads its input): 1x1 expand -> HardSwish -> depthwise 3x3 -> HardSwish -> 1x1 project + residual;
# then C = 12 (not a multiple of 8): expand -> HardSwish -> depthwise 5x5 stride 2 ->
# HardSigmoid(0.3, 0.4) -> a dilated depthwise 3x3 with asymmetric pads and no bias -> Add of
# that block's input -> HardSwish. W = 13 and 7: not a multiple of any tile.
nodes = [conv("stem", "x", "ws", "s0", pads=[1, 1, 1, 1]),  # the residual below is no graph input:
         conv("exp1", "s0", "w0", "e1"),                   # one NHWC copy of x, not two
         helper.make_node("HardSwish", ["e1"], ["h1"], name="exp1_hs"),
         conv("dw1", "h1", "w1", "d1", group=16, pads=[1, 1, 1, 1]),
         helper.make_node("HardSwish", ["d1"], ["d1h"], name="dw1_hs"),
         conv("proj1", "d1h", "w2", "p1"),
         helper.make_node("Add", ["p1", "s0"], ["r1"], name="res1"),
         conv("exp2", "r1", "w3", "e2"),
         helper.make_node("HardSwish", ["e2"], ["h2"], name="exp2_hs"),
         conv("dw2", "h2", "w4", "d2", group=12, pads=[2, 2, 2, 2], strides=[2, 2]),
         helper.make_node("HardSigmoid", ["d2"], ["d2s"], name="dw2_hsig", alpha=0.3, beta=0.4),
         conv("dw3", "d2s", "w5", "d3", bias=False, group=12, pads=[2, 1, 2, 3], dilations=[2, 2]),
         helper.make_node("Add", ["d3", "d2s"], ["a3"], name="res3"),
         helper.make_node("HardSwish", ["a3"], ["y"], name="res3_hs")]
inits = conv_inits([("ws", [8, 3, 3, 3], True), ("w0", [16, 8, 1, 1], True), ("w1", [16, 1, 3, 3], True),
                    ("w2", [8, 16, 1, 1], True), ("w3", [12, 8, 1, 1], True), ("w4", [12, 1, 5, 5], True),
                    ("w5", [12, 1, 3, 3], False)])
m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 3, 10, 13])], [vi("y", TensorProto.FLOAT, ["N", 12, 5, 7])],
          inits)
compare(m, "conv_mbv3", {"x": f32(2, 3, 10, 13) * 2}, rtol=1e-4)

# --- models that must fail to load
X = [vi("x", TensorProto.FLOAT, [1, 3, 4, 4])]
Y = [vi("y", TensorProto.FLOAT, None)]
save(model([helper.make_node("Bernoulli", ["x"], ["y"], name="bernoulli_1")], X, Y), "unsupported", check=False)
save(model([helper.make_node("Relu", ["x"], ["y"], name="ms_relu", domain="com.microsoft")], X, Y), "custom_domain",
     check=False)
save(model([helper.make_node("Relu", ["b"], ["a"], name="loop_a"), helper.make_node("Relu", ["a"], ["b"], name="loop_b"),
            helper.make_node("Add", ["x", "b"], ["y"], name="add")], X, Y), "cycle", check=False)
save(model([helper.make_node("Add", ["x", "ghost"], ["y"], name="haunted")], X, Y), "undefined_input", check=False)
save(model([helper.make_node("Reshape", ["x", "dyn_shape"], ["y"], name="dyn_reshape")],
           X + [vi("dyn_shape", TensorProto.INT64, [2])], Y), "dynamic_reshape", check=False)
# unsorted but acyclic: must load and sort
nodes = [helper.make_node("Relu", ["a"], ["y"], name="second"), helper.make_node("Neg", ["x"], ["a"], name="first")]
nodes[1].op_type = "Sigmoid"
m = model(nodes, [vi("x", TensorProto.FLOAT, [2, 2])], [vi("y", TensorProto.FLOAT, [2, 2])])
save(m, "unsorted", check=False)
with open(path("garbage.onnx"), "wb") as f:
    f.write(b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01 not a protobuf")

# --- common subexpressions (graph_pass.c pass_cse; last in this file, so the random weights of every
# model above stay those the GPU tests' tolerances were set for), as torch's TorchScript exporter writes BERT's
# per-layer masks: Where(c, 0, -10000) twice with Constant nodes of their own but equal values (one
# Where after loading), a third with another fill value (kept); two LeakyRelu of x with alpha 0.1
# (one kept) and one with 0.2; two Relu of x that are both graph outputs (both kept: an output
# names its own value).
def const_node(name, value):
    return helper.make_node("Constant", [], [name], name=name + "_node",
                            value=numpy_helper.from_array(np.array(value, np.float32), name + "_t"))


nodes = [const_node("zero", 0.0),
         helper.make_node("Greater", ["x", "zero"], ["c"], name="gt"),
         const_node("a1", 0.0), const_node("b1", -10000.0),
         const_node("a2", 0.0), const_node("b2", -10000.0), const_node("b3", -20000.0),
         helper.make_node("Where", ["c", "a1", "b1"], ["w1"], name="mask1"),
         helper.make_node("Where", ["c", "a2", "b2"], ["w2"], name="mask2_same"),
         helper.make_node("Where", ["c", "a1", "b3"], ["w3"], name="mask3_other"),
         helper.make_node("Add", ["x", "w1"], ["s1"], name="add1"),
         helper.make_node("Add", ["s1", "w2"], ["s2"], name="add2"),
         helper.make_node("Add", ["s2", "w3"], ["s3"], name="add3"),
         helper.make_node("LeakyRelu", ["x"], ["l1"], name="leaky1", alpha=0.1),
         helper.make_node("LeakyRelu", ["x"], ["l2"], name="leaky2_same", alpha=0.1),
         helper.make_node("LeakyRelu", ["x"], ["l3"], name="leaky3_other", alpha=0.2),
         helper.make_node("Add", ["l1", "l2"], ["t1"], name="add4"),
         helper.make_node("Add", ["t1", "l3"], ["t2"], name="add5"),
         helper.make_node("Add", ["s3", "t2"], ["y"], name="add6"),
         helper.make_node("Relu", ["x"], ["r1"], name="relu_out1"),
         helper.make_node("Relu", ["x"], ["r2"], name="relu_out2")]
m = model(nodes, [vi("x", TensorProto.FLOAT, ["N", 5])],
          [vi("y", TensorProto.FLOAT, ["N", 5]), vi("r1", TensorProto.FLOAT, ["N", 5]),
           vi("r2", TensorProto.FLOAT, ["N", 5])])
compare(m, "cse", {"x": f32(3, 5)})

# --- an in-place op whose other operands are its first input's own buffer (engine/cpu/plan.c
# compute_roots): ScatterElements(ids, ids, ids) must not scatter into the buffer it reads its
# indices and updates from; Mul(x, x) may (elementwise). Fixed inputs, no draw from RNG, so the
# models after it keep their weights.
nodes = [helper.make_node("ScatterElements", ["ids", "ids", "ids"], ["s"], name="scatter_self", axis=1),
         helper.make_node("Mul", ["x", "x"], ["sq"], name="square")]
m = model(nodes, [vi("ids", TensorProto.INT64, ["N", 6]), vi("x", TensorProto.FLOAT, ["N", 6])],
          [vi("s", TensorProto.INT64, ["N", 6]), vi("sq", TensorProto.FLOAT, ["N", 6])], opset=18)
compare(m, "inplace_alias", {"ids": np.array([[2, 0, 1, 5, 3, 4], [5, 4, 3, 2, 1, 0], [1, 2, 3, 4, 5, 0]], np.int64),
                             "x": np.linspace(-2, 2, 18, dtype=np.float32).reshape(3, 6)})

# --- the GPU plan's own paths (host fallback, CUDA paths of issue 34): gen_test_models_device.py, last so
# that every model above keeps its random weights
import gen_test_models_device  # noqa: E402 (after the models above, on purpose)

gen_test_models_device.write(model, compare, save, f32, vi, RNG)

with open(path("ort_cases.txt"), "w") as f:
    for name, rtol in CASES:
        f.write("%s %g\n" % (name, rtol))
print("wrote %d compared models to %s" % (len(CASES), OUT))
