#!/usr/bin/env python3
"""Writes the ONNX MLPs that the engine and server benchmarks run.

    gen_bench_models.py --out DIR                 # DIR/mlp_1024_512_10.onnx, DIR/mlp_4x4096.onnx
    gen_bench_models.py --repo DIR [--kind KIND_GPU|KIND_CPU]
                                                  # DIR/mlp4096_fp32, DIR/mlp4096_fp16 (Triton layout)
    gen_bench_models.py --out DIR --check         # also checks every model with onnx.checker and
                                                  # onnxruntime against a numpy forward

The graphs have the form torch.onnx.export gives an nn.Sequential of
nn.Linear + nn.ReLU: Gemm(transB=1, C = bias of shape [out]) then Relu, with
no Relu after the last layer; FP32 weights, seeded, Kaiming-scaled so that
activations stay O(1); batch dimension symbolic ("N"); opset 17.
"""

import argparse
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8  # matches opset 17
SEED = 20240611

# name -> (input width, [layer widths])
MODELS = {
    "mlp_1024_512_10": (1024, [512, 10]),
    "mlp_4x4096": (4096, [4096, 4096, 4096, 4096]),
}
REPO_SOURCE = "mlp_4x4096"  # what the server benchmark's repository serves
REPO_MAX_BATCH = 1024


def make_mlp(name, in_dim, widths, seed=SEED):
    """ModelProto of Linear(+ReLU) layers, the way torch.onnx.export writes them."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    cur, fan_in = "INPUT0", in_dim
    for i, out_dim in enumerate(widths):
        last = i == len(widths) - 1
        # Kaiming normal for ReLU (std sqrt(2/fan_in)); torch's default bias range.
        w = (rng.standard_normal((out_dim, fan_in)) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        b = rng.uniform(-1.0 / np.sqrt(fan_in), 1.0 / np.sqrt(fan_in), out_dim).astype(np.float32)
        wn, bn = "%d.weight" % (2 * i), "%d.bias" % (2 * i)
        inits += [numpy_helper.from_array(w, wn), numpy_helper.from_array(b, bn)]
        gemm_out = "OUTPUT0" if last else "/%d/Gemm_output_0" % (2 * i)
        nodes.append(helper.make_node("Gemm", [cur, wn, bn], [gemm_out], name="/%d/Gemm" % (2 * i),
                                      alpha=1.0, beta=1.0, transB=1))
        cur = gemm_out
        if not last:
            relu_out = "/%d/Relu_output_0" % (2 * i + 1)
            nodes.append(helper.make_node("Relu", [cur], [relu_out], name="/%d/Relu" % (2 * i + 1)))
            cur = relu_out
        fan_in = out_dim
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["N", in_dim])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["N", widths[-1]])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="inferd-gen_bench_models")
    model.ir_version = IR_VERSION
    return model


def numpy_forward(model, x):
    """Reference forward of a Gemm/Relu chain (float64 accumulation)."""
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    h = x.astype(np.float64)
    for n in model.graph.node:
        if n.op_type == "Gemm":
            w = inits[n.input[1]].astype(np.float64)
            h = h @ w.T + inits[n.input[2]].astype(np.float64)
        elif n.op_type == "Relu":
            h = np.maximum(h, 0.0)
        else:
            raise ValueError("unexpected op %s" % n.op_type)
    return h


def check_model(path, rows=8, seed=1):
    """onnx.checker, then onnxruntime against numpy_forward; returns max relative error."""
    import onnxruntime as ort
    onnx.checker.check_model(path, full_check=True)
    model = onnx.load(path)
    in_dim = model.graph.input[0].type.tensor_type.shape.dim[1].dim_value
    x = np.random.default_rng(seed).standard_normal((rows, in_dim)).astype(np.float32)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    got = sess.run(["OUTPUT0"], {"INPUT0": x})[0]
    ref = numpy_forward(model, x)
    scale = np.abs(ref).max()
    err = float(np.abs(got - ref).max() / scale)
    if not err < 1e-4:
        raise AssertionError("%s: onnxruntime vs numpy max error %.3g (relative to max |y| %.3g)" % (path, err, scale))
    return err, float(scale), float(np.abs(ref).mean())


def config_pbtxt(name, in_dim, out_dim, precision, kind, count=1):
    params = ""
    if precision == "fp16":
        params = 'parameters {\n  key: "precision"\n  value { string_value: "fp16" }\n}\n'
    return ('name: "%s"\n'
            'platform: "onnxruntime_onnx"\n'
            'max_batch_size: %d\n'
            'input [\n  {\n    name: "INPUT0"\n    data_type: TYPE_FP32\n    dims: [ %d ]\n  }\n]\n'
            'output [\n  {\n    name: "OUTPUT0"\n    data_type: TYPE_FP32\n    dims: [ %d ]\n  }\n]\n'
            'dynamic_batching { max_queue_delay_microseconds: 200 }\n'
            'instance_group [\n  {\n    kind: %s\n    count: %d\n  }\n]\n'
            '%s') % (name, REPO_MAX_BATCH, in_dim, out_dim, kind, count, params)


def write_repo(repo, kind, source=REPO_SOURCE, count=1):
    in_dim, widths = MODELS[source]
    model = make_mlp(source, in_dim, widths)
    os.makedirs(repo, exist_ok=True)
    first = None
    for precision in ("fp32", "fp16"):
        name = "mlp4096_" + precision
        vdir = os.path.join(repo, name, "1")
        os.makedirs(vdir, exist_ok=True)
        with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
            f.write(config_pbtxt(name, in_dim, widths[-1], precision, kind, count))
        dst = os.path.join(vdir, "model.onnx")
        if os.path.exists(dst):
            os.remove(dst)
        if first is None:
            onnx.save(model, dst)
            first = dst
        else:  # same weights: a hard link saves 256 MiB where the filesystem allows it
            try:
                os.link(first, dst)
            except OSError:
                shutil.copyfile(first, dst)
    return [os.path.join(repo, "mlp4096_" + p) for p in ("fp32", "fp16")]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="directory for the standalone .onnx models")
    ap.add_argument("--repo", help="directory for a Triton-style model repository (mlp4096_fp32/_fp16)")
    ap.add_argument("--kind", default="KIND_GPU", choices=["KIND_GPU", "KIND_CPU", "KIND_AUTO"],
                    help="instance_group kind in the repository configs (default KIND_GPU)")
    ap.add_argument("--count", type=int, default=1, help="instances per model in the repository (default 1)")
    ap.add_argument("--models", default=",".join(MODELS), help="comma list of models for --out")
    ap.add_argument("--check", action="store_true", help="onnx.checker + onnxruntime vs numpy on what --out writes")
    a = ap.parse_args()
    if not a.out and not a.repo:
        ap.error("give --out and/or --repo")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        for name in a.models.split(","):
            in_dim, widths = MODELS[name]
            path = os.path.join(a.out, name + ".onnx")
            onnx.save(make_mlp(name, in_dim, widths), path)
            print("wrote %s" % path, file=sys.stderr)
            if a.check:
                err, mx, mean = check_model(path)
                print("  checked: onnxruntime vs numpy max rel err %.2e (max |y| %.3g, mean |y| %.3g)"
                      % (err, mx, mean), file=sys.stderr)
    if a.repo:
        for d in write_repo(a.repo, a.kind, count=a.count):
            print("wrote %s" % d, file=sys.stderr)


if __name__ == "__main__":
    main()
