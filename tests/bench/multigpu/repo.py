#!/usr/bin/env python3
"""Model repositories for issue 16's scaling runs (run.sh beside this file).

    repo.py OUT MODEL:PRECISION:DELAY_US:MAX_BATCH[:warm] VARIANT...

MODEL: mlp4096 (the transport issue's 4x4096 MLP, FP32 [4096] in and out, tests/bench/engine's weights) or
resnet50 (tests/models/zoo/graphs/resnet50.ts17 with fill.py's seeded weights, FP32 [3,224,224] in, [1000]
out). VARIANT names where the instances go, COUNT instances per GPU:
  gpus=0:COUNT      one GPU (instance_group gpus [0])
  gpus=0,1:COUNT    both GPUs of one server (gpus [0, 1]: COUNT on each)
  any:COUNT         KIND_GPU without gpus: every GPU the server sees (one per server under
                    CUDA_VISIBLE_DEVICES, as deploy/mig/inferd-mig.sh starts them)
  cpu:COUNT         KIND_CPU (a smoke run of the scripts on a machine without a GPU)
':warm' adds Triton's model_warmup with one entry per batch size 1..MAX_BATCH (random data), so every CUDA
graph and cuDNN plan is made before the server says ready instead of under the measured load.
Writes OUT/MODEL.onnx once and OUT/<MODEL>_<variant>/<MODEL>/{config.pbtxt,1/model.onnx, a hard link of MODEL.onnx};
prints one line per repository: "<dir> <input name> <dims>".
"""
import os
import sys

import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "bench", "engine"))
sys.path.insert(0, os.path.join(ROOT, "tests", "models", "zoo"))

ONNX_TYPES = {onnx.TensorProto.FLOAT: "TYPE_FP32", onnx.TensorProto.FLOAT16: "TYPE_FP16"}


def build(model):
    if model == "mlp4096":
        import gen_bench_models as gbm
        return gbm.make_mlp("mlp_4x4096", 4096, [4096] * 4)
    if model == "resnet50":
        import fill
        return fill.fill_model(fill.available()["resnet50.ts17"], 0)
    sys.exit("repo.py: unknown model %r (mlp4096, resnet50)" % model)


def io_lines(m):
    """config.pbtxt input/output entries, the batch dim left out (max_batch_size > 0)."""
    inits = {i.name for i in m.graph.initializer}
    out = []
    for kind, vals in (("input", [v for v in m.graph.input if v.name not in inits]), ("output", m.graph.output)):
        ents = []
        for v in vals:
            t = v.type.tensor_type
            dims = [d.dim_value if d.dim_value > 0 else -1 for d in t.shape.dim][1:]
            ents.append('{ name: "%s" data_type: %s dims: [ %s ] }' % (v.name, ONNX_TYPES[t.elem_type],
                                                                        ", ".join(map(str, dims))))
        out.append("%s [ %s ]" % (kind, ", ".join(ents)))
    return out


def warmup_lines(m, max_batch):
    inits = {i.name for i in m.graph.initializer}
    ins = [v for v in m.graph.input if v.name not in inits]
    out = []
    for b in range(1, max_batch + 1):
        ents = []
        for v in ins:
            t = v.type.tensor_type
            dims = [d.dim_value for d in t.shape.dim][1:]
            ents.append('inputs { key: "%s" value { data_type: %s dims: [ %s ] random_data: true } }' % (
                v.name, ONNX_TYPES[t.elem_type], ", ".join(map(str, dims))))
        out.append('model_warmup { name: "b%d" batch_size: %d %s }' % (b, b, " ".join(ents)))
    return out


def group(variant):
    where, count = variant.rsplit(":", 1)
    if where == "cpu":
        return "instance_group [ { kind: KIND_CPU count: %d } ]" % int(count)
    if where == "any":
        return "instance_group [ { kind: KIND_GPU count: %d } ]" % int(count)
    if where.startswith("gpus="):
        return "instance_group [ { kind: KIND_GPU count: %d gpus: [ %s ] } ]" % (int(count), where[5:])
    sys.exit("repo.py: bad variant %r" % variant)


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    out, spec, variants = sys.argv[1], sys.argv[2], sys.argv[3:]
    model, prec, delay, max_batch, *warm = spec.split(":")
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, model + ".onnx")
    m = build(model)
    onnx.save(m, path)
    for v in variants:
        name = v.replace("=", "").replace(",", "").replace(":", "x")
        d = os.path.join(out, "%s_%s" % (model, name), model)
        os.makedirs(os.path.join(d, "1"), exist_ok=True)
        link = os.path.join(d, "1", "model.onnx")
        if os.path.lexists(link):
            os.remove(link)
        os.link(path, link)  # a hard link: inferd refuses a symlink out of the model directory
        cfg = ['name: "%s"' % model, 'platform: "onnxruntime_onnx"', "max_batch_size: %d" % int(max_batch)]
        cfg += io_lines(m)
        cfg.append("dynamic_batching { max_queue_delay_microseconds: %d }" % int(delay))
        cfg.append(group(v))
        cfg.append('parameters { key: "precision" value { string_value: "%s" } }' % prec)
        if warm == ["warm"]:
            cfg += warmup_lines(m, int(max_batch))
        with open(os.path.join(d, "config.pbtxt"), "w") as f:
            f.write("\n".join(cfg) + "\n")
        print(os.path.dirname(d))


if __name__ == "__main__":
    main()
