#!/usr/bin/env python3
"""Quantized (QDQ) models on the GPU machine: its host CPU (likely with VNNI, where inferd's int8 convolutions
run unsplit) and its GPU instances. Needs no pytest or tritonclient (the device venv has onnx, onnxruntime,
numpy): KServe REST through tests/models/zoo/check_families.py's rest_infer.

Models: bench_qdq.py's conv stack (6 convs, 64-256 channels at 56-14 px) quantized with full-range and 7-bit
weights (UINT8 activations, per-channel INT8 weights), the same with INT8 activations and per-tensor weights,
and a QDQ MLP (256-512-64, per channel). Each served three ways, one server each:
- CPU (KIND_CPU): the integer form (QLinearConv/QLinearMatMul);
- GPU fp32 and GPU fp16 (KIND_GPU, parameters precision): the float form (weights dequantized at load, each
  activation's QuantizeLinear -> DequantizeLinear one fake-quant kernel, cuDNN and cuBLASLt between them).
Checks per model and way: it loads; on a GPU no node runs on the host and the load says the float form's
counts; batch 1 and 4 against onnxruntime with graph optimizations off (the QDQ graph as written) within one
output quantization step (FP16: two), most outputs equal (>= 90%; FP16: >= 75% equal, >= 99% within one step); --ways CPUF runs the float form on CPU instances (qdq_integer 0), a check without a GPU. Then
fastest-of-RUNS times at batch 1, 4 and 32 beside onnxruntime (CPU). Prints a table and one line per check;
exit status 0 when every check holds.

    device_qdq.py INFERD_BIN [--runs 20]
"""

import argparse
import os
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "models", "zoo"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration"))
import bench_qdq  # noqa: E402
import check_families  # noqa: E402
import inferd_testlib as lib  # noqa: E402


def mlp(path):
    rng = np.random.default_rng(9)
    w = {"M1": rng.standard_normal((256, 512)) * 0.06, "A1": rng.standard_normal(512) * 0.1,
         "M2": rng.standard_normal((512, 64)) * 0.05}
    nodes = [helper.make_node("MatMul", ["x", "M1"], ["h"]), helper.make_node("Add", ["h", "A1"], ["b"]),
             helper.make_node("Relu", ["b"], ["r"]), helper.make_node("MatMul", ["r", "M2"], ["y"])]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 256])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 64])],
                          [numpy_helper.from_array(v.astype(np.float32), k) for k, v in w.items()])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def quantize_mlp(src, dst):
    from onnxruntime import quantization as q

    class Calib(q.CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(2)
            self.it = iter([{"x": rng.standard_normal((4, 256)).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.it, None)

    q.quantize_static(src, dst, Calib(), quant_format=q.QuantFormat.QDQ, per_channel=True,
                      activation_type=q.QuantType.QUInt8, weight_type=q.QuantType.QInt8)


def step_of(path):
    m = onnx.load(path)
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    dq = [n for n in m.graph.node if m.graph.output[0].name in n.output][0]
    return float(inits[dq.input[1]]) if dq.op_type == "DequantizeLinear" else None


def quantize_conv(src, dst, act, per_channel):
    from onnxruntime import quantization as q

    class Calib(q.CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(5)
            self.it = iter([{"x": rng.standard_normal((1, 3, 56, 56)).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.it, None)

    q.quantize_static(src, dst, Calib(), quant_format=q.QuantFormat.QDQ, per_channel=per_channel,
                      activation_type=getattr(q.QuantType, act), weight_type=q.QuantType.QInt8)


# (label, instance_group and parameters, steps allowed, share equal required)
WAYS = [
    ("CPU", "max_batch_size: 32\ninstance_group [{ kind: KIND_CPU }]\n", 1, 0.9),
    # the float form on CPU instances (what GPU instances run), for a check without a GPU: --ways CPUF
    ("CPUF", "max_batch_size: 32\ninstance_group [{ kind: KIND_CPU }]\n"
             'parameters { key: "qdq_integer" value: { string_value: "0" } }\n', 1, 0.9),
    ("GPU32", "max_batch_size: 32\ninstance_group [{ kind: KIND_GPU count: 1 }]\n"
              'parameters { key: "precision" value: { string_value: "fp32" } }\n', 1, 0.9),
    ("GPU16", "max_batch_size: 32\ninstance_group [{ kind: KIND_GPU count: 1 }]\n"
              'parameters { key: "precision" value: { string_value: "fp16" } }\n', 2, 0.75),
]


def check_way(srv, label, files, steps, most, runs):
    ok = True
    for name, path in files.items():
        st, _, _ = lib.http_call(srv, "GET", "/v2/models/%s/ready" % name)
        if st != 200:
            print("%-5s %-16s FAILED to load: %s" % (label, name, check_families.load_error(srv, name)))
            ok = False
            continue
        step = step_of(path)
        if label != "CPU" and step:
            host = [ln for ln in srv.lines if "'%s'" % name in ln and "on the host" in ln]
            said = [ln for ln in srv.lines if "'%s'" % name in ln and "QDQ graph" in ln and "in float" in ln]
            print("%-5s %-16s %s; %s" % (label, name, said[0].split(": ", 1)[-1] if said else "NO float-form line",
                                         "%d host line(s)" % len(host) if host else "no node on the host"))
            ok &= bool(said) and not host
        o = ort.SessionOptions()
        o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        exact = ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])
        deployed = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        shape = [d if isinstance(d, int) else 1 for d in exact.get_inputs()[0].shape]
        for b in (1, 4, 32):
            x = np.random.default_rng(b).standard_normal([b] + shape[1:]).astype(np.float32)
            if b < 32:
                y = check_families.rest_infer(srv, name, {"x": x})["y"]
                want = exact.run(None, {"x": x})[0]
                d = float(np.abs(y.astype(np.float64) - want).max())
                if step:  # quantized: within `steps` output steps, most equal
                    # an fp16 plan stores the output in half before widening it: half's rounding (2^-11) allowed
                    rnd = np.abs(want.astype(np.float64)) * 2.0 ** -11 if label == "GPU16" else 0.0
                    diff = np.abs(y.astype(np.float64) - want) - rnd
                    d = float(diff.max())
                    eq = float((diff <= step * 1e-3).mean())
                    one = float((diff <= step * 1.0001).mean())
                    good = d <= steps * step * 1.0001 and (eq >= most if steps == 1 else one >= 0.99 and eq >= most)
                    print("%-5s %-16s batch %d: %.3g apart (one step %.3g), %.1f%% equal, %.2f%% within a step: %s"
                          % (label, name, b, d, step, 100 * eq, 100 * one, "ok" if good else "WRONG"))
                else:
                    tol = (1e-3 if label != "GPU16" else 2e-2) * max(1.0, float(np.abs(want).max()))
                    good = d <= tol
                    print("%-5s %-16s batch %d: %.3g from onnxruntime: %s" % (label, name, b, d, "ok" if good else "WRONG"))
                ok &= good
            fns = {"inferd": lambda: check_families.rest_infer(srv, name, {"x": x}),
                   "ort": lambda: deployed.run(None, {"x": x})}
            t = bench_qdq.timed(fns, runs)
            print("      time %-16s batch %2d: inferd %s %.2f ms, onnxruntime CPU %.2f ms (fastest of %d)"
                  % (name, b, label, t["inferd"][0], t["ort"][0], runs))
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inferd")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--ways", default="CPU,GPU32,GPU16")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="device_qdq_")
    src = os.path.join(work, "src")
    os.makedirs(src)
    files = {"conv_fp32": os.path.join(src, "conv_fp32.onnx"), "mlp_fp32": os.path.join(src, "mlp_fp32.onnx")}
    bench_qdq.fp32_model(files["conv_fp32"])
    mlp(files["mlp_fp32"])
    for name, rr in (("conv_int8", False), ("conv_int8_7bit", True)):
        files[name] = os.path.join(src, name + ".onnx")
        bench_qdq.quantized(files["conv_fp32"], files[name], rr)
    files["conv_s8_pt"] = os.path.join(src, "conv_s8_pt.onnx")
    quantize_conv(files["conv_fp32"], files["conv_s8_pt"], "QInt8", False)
    files["mlp_int8"] = os.path.join(src, "mlp_int8.onnx")
    quantize_mlp(files["mlp_fp32"], files["mlp_int8"])
    ok = True
    for label, cfg, steps, most in WAYS:
        if label not in a.ways.split(","):
            continue
        repo = os.path.join(work, "repo_" + label.lower())
        for name, path in files.items():
            os.makedirs(os.path.join(repo, name, "1"))
            onnx.save(onnx.load(path), os.path.join(repo, name, "1", "model.onnx"))
            with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
                f.write(cfg)
        # batch sizes beyond 1, the preferred ones and 32 pad up: a bounded load on the GPU machine
        srv = lib.ServerProcess(repo, ["--model-prepare-budget-s", "5"], binary=os.path.abspath(a.inferd)).start()
        try:
            for line in srv.lines:
                if "QDQ" in line or "cpu isa" in line.lower():
                    print(line)
            ok &= check_way(srv, label, files, steps, most, a.runs)
        finally:
            srv.stop()
            if srv.returncode not in (0, None) or srv.sanitizer_lines():
                print("%s server exit %r" % (label, srv.returncode))
                ok = False
    print("ALL OK" if ok else "SOME CHECKS FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
