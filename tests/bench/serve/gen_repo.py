#!/usr/bin/env python3
"""The model repository of the side-by-side server benchmarks (tests/bench/serve/run.sh).

  identity      INPUT0 [-1,16] FP32 -> Identity -> OUTPUT0, KIND_CPU, dynamic batching (transport ceiling)
  mlp_b / mlp_nob           the seed's 1024-512-10 MLP, fp16 on GPU, dynamic batching on / off
  mlp4096_b / mlp4096_nob   the 4x4096 ReLU MLP, fp16 on GPU, dynamic batching on / off
  mlp4096_fp32  the 4x4096 MLP, fp32 on GPU, dynamic batching, 4 instances (GPU busy fraction)

Also writes DIR/mlp_1024_512_10.onnx for the Python peer server. Weights as tests/bench/engine.
usage: gen_repo.py DIR [--kind KIND_GPU]
"""
import argparse
import os
import sys

import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "engine"))
import gen_bench_models as gbm  # noqa: E402


def config(name, mbs, in_dim, out_dim, kind, dyn, precision=None, count=1):
    s = 'name: "%s"\nplatform: "onnxruntime_onnx"\nmax_batch_size: %d\n' % (name, mbs)
    s += 'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ %d ] } ]\n' % in_dim
    s += 'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ %d ] } ]\n' % out_dim
    if dyn:
        s += "dynamic_batching { max_queue_delay_microseconds: 100 }\n"
    s += "instance_group [ { kind: %s count: %d } ]\n" % (kind, count)
    if precision:
        s += 'parameters { key: "precision" value { string_value: "%s" } }\n' % precision
    return s


_saved = {}


def write(repo, name, model, cfg):
    """Saves each distinct model once and hard-links it elsewhere (the 4x4096 one is 256 MiB)."""
    os.makedirs(os.path.join(repo, name, "1"), exist_ok=True)
    dst = os.path.join(repo, name, "1", "model.onnx")
    if os.path.exists(dst):
        os.remove(dst)
    first = _saved.get(id(model))
    if first:
        try:
            os.link(first, dst)
        except OSError:
            onnx.save(model, dst)
    else:
        onnx.save(model, dst)
        _saved[id(model)] = dst
    with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
        f.write(cfg)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("repo")
    ap.add_argument("--kind", default="KIND_GPU")
    a = ap.parse_args()
    ident = helper.make_model(
        helper.make_graph([helper.make_node("Identity", ["INPUT0"], ["OUTPUT0"])], "identity",
                          [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["N", 16])],
                          [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["N", 16])]),
        opset_imports=[helper.make_opsetid("", gbm.OPSET)])
    ident.ir_version = gbm.IR_VERSION
    write(a.repo, "identity", ident, config("identity", 512, 16, 16, "KIND_CPU", True))
    seed = gbm.make_mlp("mlp_1024_512_10", 1024, [512, 10])
    onnx.save(seed, os.path.join(a.repo, "..", "mlp_1024_512_10.onnx"))
    big = gbm.make_mlp("mlp_4x4096", 4096, [4096] * 4)
    for dyn, suffix in ((True, "b"), (False, "nob")):
        write(a.repo, "mlp_" + suffix, seed, config("mlp_" + suffix, 1024, 1024, 10, a.kind, dyn, "fp16"))
        write(a.repo, "mlp4096_" + suffix, big, config("mlp4096_" + suffix, 1024, 4096, 4096, a.kind, dyn, "fp16"))
    write(a.repo, "mlp4096_fp32", big, config("mlp4096_fp32", 1024, 4096, 4096, a.kind, True, None, 4))
    print("wrote %s" % a.repo, file=sys.stderr)


if __name__ == "__main__":
    main()
