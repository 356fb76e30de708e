#!/usr/bin/env python3
"""The model repository of the latency-target benchmark (tests/bench/lattarget/delays.sh, issue 37): one model
served under every batching configuration compared, each configuration a model of its own so one server runs
them all.

  <base>_d<US>   dynamic_batching { max_queue_delay_microseconds: US }     (Triton's fixed delay, swept)
  <base>_t<MS>   dynamic_batching { } + parameters latency_target_ms: MS    (inferd's latency target)

Models (weights as tests/bench/engine): mlp (the seed's 1024-512-10 MLP) and, unless --no-big, mlp4096 (the
4x4096 ReLU MLP); fp16 on the GPU with --kind KIND_GPU, --count instances each.
usage: gen_repo.py DIR [--kind KIND_GPU] [--count 2] [--delays 0,100,...] [--targets 5,20,50] [--no-big]
"""
import argparse
import os
import sys

import onnx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "engine"))
import gen_bench_models as gbm  # noqa: E402


def config(name, mbs, in_dim, out_dim, kind, count, precision, delay_us=None, target_ms=None):
    s = 'name: "%s"\nplatform: "onnxruntime_onnx"\nmax_batch_size: %d\n' % (name, mbs)
    s += 'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ %d ] } ]\n' % in_dim
    s += 'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ %d ] } ]\n' % out_dim
    if delay_us is not None:
        s += "dynamic_batching { max_queue_delay_microseconds: %d }\n" % delay_us
    else:
        s += "dynamic_batching { }\n"
        s += 'parameters { key: "latency_target_ms" value { string_value: "%g" } }\n' % target_ms
    s += "instance_group [ { kind: %s count: %d } ]\n" % (kind, count)
    if precision and kind == "KIND_GPU":
        s += 'parameters { key: "precision" value { string_value: "%s" } }\n' % precision
    return s


def write(repo, name, src, cfg):
    """Every configuration of one model hard-links the first copy (the 4x4096 one is 256 MiB)."""
    d = os.path.join(repo, name, "1")
    os.makedirs(d, exist_ok=True)
    dst = os.path.join(d, "model.onnx")
    if os.path.exists(dst):
        os.remove(dst)
    try:
        os.link(src, dst)
    except OSError:
        onnx.save(onnx.load(src), dst)
    with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
        f.write(cfg)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("repo")
    ap.add_argument("--kind", default="KIND_GPU")
    ap.add_argument("--count", type=int, default=2)
    ap.add_argument("--max-batch", type=int, default=512)
    ap.add_argument("--delays", default="0,100,250,500,1000,2000,4000,8000")
    ap.add_argument("--targets", default="5,20,50")
    ap.add_argument("--no-big", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.repo, exist_ok=True)
    models = [("mlp", gbm.make_mlp("mlp_1024_512_10", 1024, [512, 10]), 1024, 10)]
    if not a.no_big:
        models.append(("mlp4096", gbm.make_mlp("mlp_4x4096", 4096, [4096] * 4), 4096, 4096))
    for base, model, in_dim, out_dim in models:
        src = os.path.join(a.repo, "..", base + ".onnx")
        onnx.save(model, src)
        for d in a.delays.split(","):
            name = "%s_d%d" % (base, int(d))
            write(a.repo, name, src, config(name, a.max_batch, in_dim, out_dim, a.kind, a.count, "fp16", delay_us=int(d)))
        for t in a.targets.split(","):
            name = "%s_t%s" % (base, t.replace(".", "p"))
            write(a.repo, name, src, config(name, a.max_batch, in_dim, out_dim, a.kind, a.count, "fp16",
                                            target_ms=float(t)))
    print("wrote %s" % a.repo, file=sys.stderr)


if __name__ == "__main__":
    main()
