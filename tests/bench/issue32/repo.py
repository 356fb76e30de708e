#!/usr/bin/env python3
"""Issue 32's model repositories (run.sh beside this file): one per model (a server each, one at a time), in the
issue's setting: KIND_GPU x --count instances, FP16 plan, dynamic_batching with max_queue_delay_microseconds
--delay-us and no preferred sizes (the server prepares every batch size at load: --model-prepare-budget-s).

    repo.py MODELS OUT [--kind gpu|cpu] [--count 2] [--delay-us 2000] [--precision fp16]
            [--max-batch-resnet50 128] [--max-batch-bert_base 64] [--seq 128]

MODELS is the folder offline.py wrote (resnet50.onnx, bert_base.onnx, meta.json). Writes
OUT/resnet50/resnet50/{config.pbtxt,1/model.onnx}, OUT/bert_base/bert_base/..., OUT/<model>.out_bytes (one
row's output bytes: the shared memory output region's size) and OUT/bert_base_data/
{input_ids,attention_mask}: one request's raw little-endian INT64 rows (ids uniform in [0, vocab), seed 0; the
mask all ones) for inferd-load and perf_analyzer --input-data (both read a folder of one file per input). The
dims come from the ONNX files (the batch dim dropped, a symbolic dim set to --seq). --kind cpu: KIND_CPU, no
precision (the dry run).
"""

import argparse
import json
import os
import shutil

import numpy as np
import onnx

TYPES = {onnx.TensorProto.FLOAT: "TYPE_FP32", onnx.TensorProto.INT64: "TYPE_INT64", onnx.TensorProto.FLOAT16: "TYPE_FP16"}


def dims_of(vi, seq):
    ds = vi.type.tensor_type.shape.dim[1:]
    return [d.dim_value if d.HasField("dim_value") else seq for d in ds]


def config(name, path, a, max_batch):
    m = onnx.load(path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    ents = lambda vs: ", ".join('{ name: "%s" data_type: %s dims: [ %s ] }' % (  # noqa: E731
        v.name, TYPES[v.type.tensor_type.elem_type], ", ".join(map(str, dims_of(v, a.seq)))) for v in vs)
    s = ['name: "%s"' % name, 'backend: "onnxruntime"', "max_batch_size: %d" % max_batch,
         "input [ %s ]" % ents([v for v in m.graph.input if v.name not in inits]),
         "output [ %s ]" % ents(m.graph.output[:1]),
         "instance_group [ { count: %d kind: %s%s } ]" % (a.count, "KIND_GPU" if a.kind == "gpu" else "KIND_CPU",
                                                         " gpus: [ 0 ]" if a.kind == "gpu" else ""),
         "dynamic_batching { max_queue_delay_microseconds: %d }" % a.delay_us]
    if a.kind == "gpu":
        s.append('parameters { key: "precision" value: { string_value: "%s" } }' % a.precision)
    return "\n".join(s) + "\n"


def write(out, name, src, cfg):
    d = os.path.join(out, name, name)
    os.makedirs(os.path.join(d, "1"), exist_ok=True)
    dst = os.path.join(d, "1", "model.onnx")
    if os.path.lexists(dst):
        os.remove(dst)
    try:
        os.link(src, dst)  # inferd refuses symlinks; the files are big
    except OSError:
        shutil.copyfile(src, dst)
    with open(os.path.join(d, "config.pbtxt"), "w") as f:
        f.write(cfg)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models")
    ap.add_argument("out")
    ap.add_argument("--kind", default="gpu", choices=("gpu", "cpu"))
    ap.add_argument("--count", type=int, default=2)
    ap.add_argument("--delay-us", type=int, default=2000)
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--max-batch-resnet50", type=int, default=128)
    ap.add_argument("--max-batch-bert_base", type=int, default=64)
    ap.add_argument("--seq", type=int, default=128)
    a = ap.parse_args()
    with open(os.path.join(a.models, "meta.json")) as f:
        meta = json.load(f)
    for name, mb in (("resnet50", a.max_batch_resnet50), ("bert_base", a.max_batch_bert_base)):
        src = os.path.join(a.models, name + ".onnx")
        if os.path.exists(src):
            write(a.out, name, src, config(name, src, a, mb))
            m = onnx.load(src, load_external_data=False)
            with open(os.path.join(a.out, name + ".out_bytes"), "w") as f:  # one row of the first output, FP32
                f.write("%d\n" % (4 * int(np.prod(dims_of(m.graph.output[0], a.seq)))))
            print("%s: %s" % (name, open(os.path.join(a.out, name, name, "config.pbtxt")).read().replace("\n", " ")))
    data = os.path.join(a.out, "bert_base_data")
    os.makedirs(data, exist_ok=True)
    vocab = int(meta["bert_base"]["vocab"])
    np.random.default_rng(0).integers(0, vocab, (1, a.seq)).astype("<i8").tofile(os.path.join(data, "input_ids"))
    np.ones((1, a.seq), "<i8").tofile(os.path.join(data, "attention_mask"))


if __name__ == "__main__":
    main()
