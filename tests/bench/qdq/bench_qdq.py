#!/usr/bin/env python3
"""A quantized conv net through the real server against its FP32 original, on the CPU.

Builds a ResNet-like stack of 3x3 convolutions (64 channels at 56x56, 128 at 28x28, 256 at 14x14, with
ReLU), quantizes it with onnxruntime.quantization.quantize_static (QDQ, UINT8 activations, INT8 weights
per channel; full-range weights and reduce_range's 7-bit ones), serves the three models from one
inferd and times tritonclient gRPC requests at each batch size: the fastest and the median of RUNS,
after warm-ups, every model and onnxruntime (CPU, same thread count) in turn.

    bench_qdq.py [--batches 1,4] [--runs 20] [--threads 2]
Needs build/bin/inferd (or INFERD_BIN), onnx, onnxruntime, tritonclient.
"""

import argparse
import os
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration"))
import inferd_testlib as lib  # noqa: E402


def fp32_model(path):
    rng = np.random.default_rng(3)
    nodes, inits, x, c = [], [], "x", 3
    for i, (m, s) in enumerate([(64, 1), (64, 1), (128, 2), (128, 1), (256, 2), (256, 1)]):
        w = (rng.standard_normal((m, c, 3, 3)) * np.sqrt(2.0 / (9 * c))).astype(np.float32)
        inits += [numpy_helper.from_array(w, "W%d" % i), numpy_helper.from_array(np.zeros(m, np.float32), "B%d" % i)]
        nodes += [helper.make_node("Conv", [x, "W%d" % i, "B%d" % i], ["c%d" % i], pads=[1] * 4, strides=[s, s]),
                  helper.make_node("Relu", ["c%d" % i], ["r%d" % i])]
        x, c = "r%d" % i, m
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["y"]))
    g = helper.make_graph(nodes, "convstack", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 56, 56])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 256, 1, 1])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def quantized(src, dst, reduce_range):
    from onnxruntime import quantization as q

    class Calib(q.CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(5)
            self.it = iter([{"x": rng.standard_normal((1, 3, 56, 56)).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.it, None)

    q.quantize_static(src, dst, Calib(), quant_format=q.QuantFormat.QDQ, per_channel=True, reduce_range=reduce_range,
                      activation_type=q.QuantType.QUInt8, weight_type=q.QuantType.QInt8)


def timed(fns, runs):
    """{key: (fastest, median) ms} of each function, run in turn (round robin, so that contention on a
    shared machine falls on all of them alike), after 3 warm-up rounds."""
    t = {k: [] for k in fns}
    for r in range(runs + 3):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            if r >= 3:
                t[k].append((time.perf_counter() - t0) * 1e3)
    return {k: (sorted(v)[0], sorted(v)[len(v) // 2]) for k, v in t.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", default="1,4")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    import onnxruntime as ort
    d = tempfile.mkdtemp(prefix="bench_qdq_")
    repo = os.path.join(d, "repo")
    names = {"fp32": None, "int8": False, "int8_7bit": True}
    for name, rr in names.items():
        os.makedirs(os.path.join(repo, name, "1"))
    fp32 = os.path.join(repo, "fp32", "1", "model.onnx")
    fp32_model(fp32)
    for name, rr in names.items():
        if rr is not None:
            quantized(fp32, os.path.join(repo, name, "1", "model.onnx"), rr)
    srv = lib.ServerProcess(repo, env={"OMP_NUM_THREADS": str(a.threads)}).start()
    import tritonclient.grpc as grpcclient
    c = grpcclient.InferenceServerClient(url=srv.grpc_url)
    sessions = {}
    for name in names:
        o = ort.SessionOptions()
        o.intra_op_num_threads = a.threads
        sessions[name] = ort.InferenceSession(os.path.join(repo, name, "1", "model.onnx"), o,
                                              providers=["CPUExecutionProvider"])
    print("%-10s %5s %20s %20s" % ("model", "batch", "inferd ms (min, med)", "onnxruntime ms"))
    for b in [int(v) for v in a.batches.split(",")]:
        x = np.random.default_rng(b).standard_normal((b, 3, 56, 56)).astype(np.float32)
        fns = {}
        for name in names:
            fns[("inferd", name)] = lambda name=name: lib.infer(c, name, {"x": x})
            fns[("ort", name)] = lambda name=name: sessions[name].run(None, {"x": x})
        t = timed(fns, a.runs)
        for name in names:
            print("%-10s %5d %10.2f %9.2f %10.2f %9.2f" % ((name, b) + t[("inferd", name)] + t[("ort", name)]))
    qline = [ln for ln in srv.lines if "QDQ Conv" in ln]
    print("\n".join(qline))
    c.close()
    srv.stop()


if __name__ == "__main__":
    main()
