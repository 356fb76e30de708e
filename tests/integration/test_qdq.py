"""Quantized models in onnxruntime's QDQ format through the real server, against onnxruntime: on the CPU
in 8-bit integers (the QDQ pass's QLinearConv/QLinearMatMul), on the CPU in float (the form GPU instances
run, asked of CPU instances by parameters { key: "qdq_integer" value: "0" }: weights dequantized at load,
each activation's QuantizeLinear -> DequantizeLinear as one inferd.QuantDequant op), and on GPU instances
(FP32 and FP16 plans; skipped without a GPU, saying so).

A small conv net (three convolutions, one depthwise, a residual Add, pools, a classifier MatMul) and an
MLP are built in FP32 here, quantized on the fly with onnxruntime.quantization.quantize_static
(QuantFormat.QDQ, INT8 weights per tensor or per channel, UINT8 or INT8 activations, a few random
calibration batches: seconds), served without config.pbtxt and called through tritonclient gRPC.
The load log must say how many patterns became integer ops (engine/graph/graph_pass_qdq.c).

Float form (CPU, and GPU FP32): the QDQ graph as written, in FP32; it differs from onnxruntime without
optimizations only where a float sum lands on the other side of a rounding point (summation order: cuDNN
and cuBLASLt sum in their own order), so within one output step, most outputs equal. GPU FP16 plans store
the activations between the fake-quant ops in half and multiply in FP16 with FP32 sums: within two output
steps there, most outputs within one.

Tolerance (integer form): one quantization step of the output (its DequantizeLinear's scale), against two references:
- onnxruntime with graph optimizations off, which runs the QDQ graph as written (DequantizeLinear, FP32
  op, QuantizeLinear): the model's exact meaning. inferd's integer sums are exact, so the two differ
  only where a value sits on a rounding tie; most outputs must be equal.
- onnxruntime as deployed (its QDQ fusions into QLinearConv / QLinearMatMul on MLAS's integer kernels),
  for the models quantized with reduce_range (7-bit weights). With full-range weights MLAS's u8 x s8
  kernels on CPUs without VNNI (this VM's AVX2) add product pairs in int16 and saturate (vpmaddubsw),
  so there onnxruntime's own answer strays from its model by several steps (9 measured on the MLP): the
  limit onnxruntime documents reduce_range for. inferd's oneDNN path avoids it (qconv_dnnl.c).
"""

import os
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import inferd_testlib as lib

quant = pytest.importorskip("onnxruntime.quantization")

# (name, builder, activation type, per channel, reduce_range, conv patterns, matmul patterns)
VARIANTS = [
    ("conv_u8_pt", "conv", "QUInt8", False, False, 3, 1),
    ("conv_u8_pc", "conv", "QUInt8", True, False, 3, 1),
    ("conv_s8_pc", "conv", "QInt8", True, False, 3, 1),
    ("conv_u8_pc_rr", "conv", "QUInt8", True, True, 3, 1),
    ("conv_s8_pt_rr", "conv", "QInt8", False, True, 3, 1),
    ("mlp_u8_pt", "mlp", "QUInt8", False, False, 0, 3),
    ("mlp_s8_pc", "mlp", "QInt8", True, False, 0, 3),
    ("mlp_u8_pc_rr", "mlp", "QUInt8", True, True, 0, 3),
    ("vec_u8_pt", "vec", "QUInt8", False, False, 0, 1),  # a 1-D activation (no batch dim): [32] x [32, 8]
    ("gemm_u8_pc", "gemm", "QUInt8", True, False, 0, 2),  # torch's Linear: Gemm, transB 1, and one with transB 0
    ("gemm_s8_pt", "gemm", "QInt8", False, False, 0, 2),
]


def _conv_net(rng):
    w = {
        "W1": rng.standard_normal((8, 3, 3, 3)) * 0.3, "B1": rng.standard_normal(8) * 0.1,
        "W2": rng.standard_normal((16, 8, 3, 3)) * 0.2, "B2": rng.standard_normal(16) * 0.1,
        "W3": rng.standard_normal((16, 1, 3, 3)) * 0.3, "FC": rng.standard_normal((16, 10)) * 0.3,
    }
    nodes = [
        helper.make_node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "W2", "B2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Conv", ["r2", "W3"], ["c3"], pads=[1, 1, 1, 1], group=16),
        helper.make_node("Add", ["c3", "r2"], ["s"]),
        helper.make_node("MaxPool", ["s"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("MatMul", ["f", "FC"], ["y"]),
    ]
    return nodes, w, ["N", 3, 16, 16], ["N", 10]


def _mlp(rng):
    w = {"M1": rng.standard_normal((32, 64)) * 0.2, "A1": rng.standard_normal(64) * 0.1,
         "M2": rng.standard_normal((64, 48)) * 0.15, "A2": rng.standard_normal(48) * 0.1,
         "M3": rng.standard_normal((48, 8)) * 0.2}
    nodes = [
        helper.make_node("MatMul", ["x", "M1"], ["h1"]), helper.make_node("Add", ["h1", "A1"], ["b1"]),
        helper.make_node("Relu", ["b1"], ["r1"]),
        helper.make_node("MatMul", ["r1", "M2"], ["h2"]), helper.make_node("Add", ["h2", "A2"], ["b2"]),
        helper.make_node("Relu", ["b2"], ["r2"]),
        helper.make_node("MatMul", ["r2", "M3"], ["y"]),
    ]
    return nodes, w, ["N", 32], ["N", 8]


def _gemm(rng):
    w = {"G1": rng.standard_normal((40, 24)) * 0.2, "C1": rng.standard_normal(40) * 0.1,
         "G2": rng.standard_normal((40, 6)) * 0.2, "C2": rng.standard_normal(6) * 0.1}
    nodes = [helper.make_node("Gemm", ["x", "G1", "C1"], ["h"], transB=1), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Gemm", ["r", "G2", "C2"], ["y"])]
    return nodes, w, ["N", 24], ["N", 6]


def _vec(rng):
    return [helper.make_node("MatMul", ["x", "V"], ["y"])], {"V": rng.standard_normal((32, 8)) * 0.3}, [32], [8]


def _fp32_model(kind, path):
    rng = np.random.default_rng(7)
    nodes, w, xs, ys = {"conv": _conv_net, "mlp": _mlp, "vec": _vec, "gemm": _gemm}[kind](rng)
    inits = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in w.items()]
    g = helper.make_graph(nodes, kind, [helper.make_tensor_value_info("x", TensorProto.FLOAT, xs)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ys)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return [4 if d == "N" else d for d in xs]


class _Calib(quant.CalibrationDataReader):
    def __init__(self, shape, seed):
        rng = np.random.default_rng(seed)
        self.it = iter([{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(6)])

    def get_next(self):
        return next(self.it, None)


def _output_step(path):
    """The scale of the DequantizeLinear that writes the graph's output: one quantization step."""
    m = onnx.load(path)
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    out = m.graph.output[0].name
    dq = [n for n in m.graph.node if out in n.output][0]
    assert dq.op_type == "DequantizeLinear", dq.op_type
    return float(inits[dq.input[1]])


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("qdq_repo"))
    work = str(tmp_path_factory.mktemp("qdq_work"))
    shapes = {}
    for name, kind, act, pc, rr, _, _ in VARIANTS:
        fp32 = os.path.join(work, kind + ".onnx")
        shapes[name] = _fp32_model(kind, fp32)
        os.makedirs(os.path.join(d, name, "1"))
        quant.quantize_static(fp32, os.path.join(d, name, "1", "model.onnx"), _Calib(shapes[name], 1),
                              quant_format=quant.QuantFormat.QDQ, per_channel=pc, reduce_range=rr,
                              activation_type=getattr(quant.QuantType, act), weight_type=quant.QuantType.QInt8)
    return d, shapes


@pytest.fixture(scope="module")
def server(repo):
    yield from lib.served(repo[0])


@pytest.fixture(scope="module")
def client(server):
    yield from lib.grpc_client(server)


def _noopt_session(path):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = 2
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def _within_a_step(name, what, y, want, step):
    diff = np.abs(y.astype(np.float64) - want)
    assert diff.max() <= step * 1.0001, "%s against %s: %g apart, one step is %g" % (name, what, diff.max(), step)
    return int((diff <= step * 1e-3).sum())


@pytest.mark.parametrize("name,kind,act,pc,rr,n_conv,n_mm", VARIANTS, ids=[v[0] for v in VARIANTS])
def test_qdq_model_matches_onnxruntime(repo, server, client, name, kind, act, pc, rr, n_conv, n_mm):
    d, shapes = repo
    lib.require_ready(server, client, name)
    # the load-time pass made integer ops of every Conv and MatMul the quantizer wrapped
    said = [ln for ln in server.lines if re.search(r"model '%s' version 1: \d+ QDQ Conv" % name, ln)]
    assert said and "%d QDQ Conv(s) and %d QDQ MatMul/Gemm(s)" % (n_conv, n_mm) in said[0], said
    path = os.path.join(d, name, "1", "model.onnx")
    exact = _noopt_session(path)
    deployed = lib.ort_session({}, path) if rr else None
    step = _output_step(path)
    rng = np.random.default_rng(11)
    equal = total = 0
    for batch in ((1, 4) if kind != "vec" else (None,)):
        shape = shapes[name] if batch is None else [batch] + shapes[name][1:]
        x = (rng.standard_normal(shape) * 1.2).astype(np.float32)
        _, got = lib.infer(client, name, {"x": x})
        y = got["y"]
        want = exact.run(None, {"x": x})[0]
        assert y.shape == want.shape and y.dtype == np.float32
        # the outputs are dequantized integers: a whole number of steps from each other
        assert np.allclose((y - want) / step, np.round((y - want) / step), atol=1e-2)
        equal += _within_a_step(name, "onnxruntime without optimizations", y, want, step)
        total += y.size
        if deployed is not None:
            _within_a_step(name, "onnxruntime", y, deployed.run(None, {"x": x})[0], step)
    assert equal >= 0.9 * total, "%s: only %d of %d outputs equal to onnxruntime's" % (name, equal, total)


# --- the float form: the graph GPU instances run (weights dequantized at load, activations' Q -> DQ pairs as
# inferd.QuantDequant), on the CPU here (CI) and on GPU instances where a GPU is visible

FLOAT_CFG = """instance_group [ { kind: %s } ]
parameters { key: "qdq_integer" value: { string_value: "0" } }
"""
GPU_CFG = """instance_group [ { kind: KIND_GPU count: 1 } ]
parameters { key: "precision" value: { string_value: "%s" } }
"""


def _float_form_counts(path):
    """What the float form's pass does to the model at path: (weight DequantizeLinears folded, Q -> DQ pairs)."""
    m = onnx.load(path)
    inits = {i.name for i in m.graph.initializer}
    made_by = {o: n for n in m.graph.node for o in n.output}
    weights = sum(1 for n in m.graph.node if n.op_type == "DequantizeLinear" and n.input[0] in inits)
    pairs = sum(1 for n in m.graph.node if n.op_type == "DequantizeLinear" and n.input[0] in made_by
                and made_by[n.input[0]].op_type == "QuantizeLinear")
    return weights, pairs


def _float_repo(repo, d, cfgs):
    """The quantized models of `repo` copied under d as <name><suffix> with config text cfg, per (suffix, cfg)."""
    import shutil
    src, _ = repo
    names = []
    for name, *_ in VARIANTS:
        for suffix, cfg in cfgs:
            os.makedirs(os.path.join(d, name + suffix, "1"))
            shutil.copy(os.path.join(src, name, "1", "model.onnx"), os.path.join(d, name + suffix, "1", "model.onnx"))
            with open(os.path.join(d, name + suffix, "config.pbtxt"), "w") as f:
                f.write(cfg)
            names.append(name + suffix)
    return names


def _check_against_ort(client, served_name, name, kind, path, shapes, steps, most, half=False):
    """Batches 1 and 4 (one unbatched call for vec) against onnxruntime without optimizations: every output
    within `steps` output steps, a whole number of steps away, `most` of them equal. half: the outputs were
    stored in FP16 before they were widened (an fp16 plan), so each may also be off by half's rounding of
    its value (2^-11 of it)."""
    exact = _noopt_session(path)
    step = _output_step(path)
    rng = np.random.default_rng(13)
    equal = total = 0
    for batch in ((1, 4) if kind != "vec" else (None,)):
        shape = shapes[name] if batch is None else [batch] + shapes[name][1:]
        x = (rng.standard_normal(shape) * 1.2).astype(np.float32)
        _, got = lib.infer(client, served_name, {"x": x})
        y = got["y"]
        want = exact.run(None, {"x": x})[0]
        assert y.shape == want.shape and y.dtype == np.float32
        rnd = np.abs(want.astype(np.float64)) * 2.0 ** -11 if half else np.zeros(want.shape)
        diff = np.abs(y.astype(np.float64) - want)
        over = diff - rnd
        assert over.max() <= steps * step * 1.0001, "%s: %g apart, one step is %g" % (served_name, over.max(), step)
        # a dequantized output is a whole number of steps from onnxruntime's (up to half's rounding)
        frac = np.abs((y - want) / step - np.round((y - want) / step))
        assert (frac <= 1e-2 + rnd / step).all(), "%s: %g of a step off the grid" % (served_name, frac.max())
        equal += int((diff <= step * 1e-3 + rnd).sum())
        total += y.size
    print("%s: %d of %d outputs equal to onnxruntime without optimizations" % (served_name, equal, total))
    assert equal >= most * total, "%s: only %d of %d outputs equal to onnxruntime's" % (served_name, equal, total)


@pytest.fixture(scope="module")
def float_server(repo, tmp_path_factory):
    d = str(tmp_path_factory.mktemp("qdq_float_repo"))
    _float_repo(repo, d, [("_float", FLOAT_CFG % "KIND_CPU")])
    yield from lib.served(d)


@pytest.fixture(scope="module")
def float_client(float_server):
    yield from lib.grpc_client(float_server)


@pytest.mark.parametrize("name,kind", [(v[0], v[1]) for v in VARIANTS], ids=[v[0] for v in VARIANTS])
def test_qdq_float_form_matches_onnxruntime(repo, float_server, float_client, name, kind):
    """The graph GPU instances run, on CPU instances: no integer op, every Q -> DQ pair one fake-quant op."""
    served = name + "_float"
    lib.require_ready(float_server, float_client, served)
    path = os.path.join(repo[0], name, "1", "model.onnx")
    weights, pairs = _float_form_counts(path)
    assert pairs > 0 and weights > 0
    said = [ln for ln in float_server.lines if "model '%s' version 1: the QDQ graph runs in float" % served in ln]
    assert said and ("%d weight DequantizeLinear(s) folded, %d QuantizeLinear->DequantizeLinear pair(s)"
                     % (weights, pairs)) in said[0], said
    assert not [ln for ln in float_server.lines if "'%s' version 1:" % served in ln and "integer ops" in ln]
    _check_against_ort(float_client, served, name, kind, path, repo[1], 1, 0.9)


def test_qdq_float_form_refuses_bad_switch(tmp_path):
    """qdq_integer takes 0 or 1 and says so."""
    d = str(tmp_path)
    os.makedirs(os.path.join(d, "bad", "1"))
    _fp32_model("vec", os.path.join(d, "bad", "1", "model.onnx"))
    with open(os.path.join(d, "bad", "config.pbtxt"), "w") as f:
        f.write('parameters { key: "qdq_integer" value: { string_value: "yes" } }\n')
    for srv in lib.served(d, ["--strict-readiness", "false"]):
        srv.await_stderr(lambda ls: any("qdq_integer 'yes' is not one of 0, 1" in ln for ln in ls))


@pytest.fixture(scope="module")
def gpu_server(repo, tmp_path_factory):
    why = lib.gpu_skip_reason()
    if why:
        pytest.skip("QDQ models on GPU instances: " + why)
    if b"cudaGetDeviceCount" not in open(lib.inferd_bin(), "rb").read():
        pytest.skip("QDQ models on GPU instances: inferd built without CUDA")
    d = str(tmp_path_factory.mktemp("qdq_gpu_repo"))
    _float_repo(repo, d, [("_gpu32", GPU_CFG % "fp32"), ("_gpu16", GPU_CFG % "fp16")])
    # 22 models: the batch sizes past the preferred ones pad up rather than each taking a minute at load
    yield from lib.served(d, ["--model-prepare-budget-s", "2"])


@pytest.fixture(scope="module")
def gpu_client(gpu_server):
    yield from lib.grpc_client(gpu_server)


@pytest.mark.parametrize("prec", ["fp32", "fp16"])
@pytest.mark.parametrize("name,kind", [(v[0], v[1]) for v in VARIANTS], ids=[v[0] for v in VARIANTS])
def test_qdq_gpu_instances_match_onnxruntime(repo, gpu_server, gpu_client, name, kind, prec):
    """GPU instances load a QDQ model (its float form) and answer as onnxruntime does, with no op on the host."""
    served = name + ("_gpu32" if prec == "fp32" else "_gpu16")
    lib.require_ready(gpu_server, gpu_client, served)
    path = os.path.join(repo[0], name, "1", "model.onnx")
    weights, pairs = _float_form_counts(path)
    said = [ln for ln in gpu_server.lines if "model '%s' version 1: GPU instances run the QDQ graph in float" % served
            in ln]
    assert said and ("%d weight DequantizeLinear(s) folded, %d QuantizeLinear->DequantizeLinear pair(s)"
                     % (weights, pairs)) in said[0], said
    # every node has a CUDA path: no host fallback line for this model
    host = [ln for ln in gpu_server.lines if "'%s'" % served in ln and "on the host" in ln]
    assert not host, host
    if prec == "fp32":
        _check_against_ort(gpu_client, served, name, kind, path, repo[1], 1, 0.9)
    else:
        _check_against_ort(gpu_client, served, name, kind, path, repo[1], 2, 0.75, half=True)
