#!/usr/bin/env python3
"""Puts seeded random weights back into the exporter graphs of tests/models/zoo/graphs (written by
export_zoo.py on a machine with torch, large float initializers stripped) and writes a Triton-style
model repository of them.

Weights are drawn per role so activations stay O(1) through deep nets (a conv or linear weight
~ N(0, 1/fan_in), BatchNormalization variances in [0.5, 1.5], biases small): random logits of a
ResNet-50 then carry real information for the numeric comparison with onnxruntime.

    python fill.py --out REPO [--models resnet18.ts17,...] [--max-batch 4] [--seed 0] [--no-config]
    (a name without variant, e.g. resnet18, takes every exported variant of it)
"""

import argparse
import json
import os
import zlib

import numpy as np
import onnx
from onnx import helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
GRAPHS = os.path.join(HERE, "graphs")
STRIPPED = "inferd:stripped"

NP_OF_ONNX = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.FLOAT16: np.float16,
              onnx.TensorProto.DOUBLE: np.float64}


def available():
    """{'resnet18.ts17': path, ...} for every committed graph."""
    return {f[:-5]: os.path.join(GRAPHS, f) for f in sorted(os.listdir(GRAPHS)) if f.endswith(".onnx")}


def select(names):
    av = available()
    out = []
    for n in names:
        hit = [k for k in av if k == n or k.split(".")[0] == n]
        if not hit:
            raise SystemExit("no exported graph named %r (have: %s)" % (n, ", ".join(av)))
        out += hit
    return out


def _roles(graph):
    """value name -> (op_type, input index, node) of its first consumer."""
    roles = {}
    for node in graph.node:
        for i, name in enumerate(node.input):
            roles.setdefault(name, (node.op_type, i, node))
    return roles


def _attr(node, name, default):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _draw(rng, dims, role):
    op, idx, node = role if role else ("", -1, None)
    shape = tuple(int(d) for d in dims)
    if op == "BatchNormalization":
        if idx in (1, 4):  # scale, variance
            return rng.uniform(0.5, 1.5, shape)
        return rng.normal(0, 0.1, shape)  # bias, mean
    if op in ("LayerNormalization", "InstanceNormalization", "GroupNormalization"):
        return rng.uniform(0.8, 1.2, shape) if idx == 1 else rng.normal(0, 0.1, shape)
    if op in ("Conv", "ConvTranspose") and idx == 1:
        fan = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        if op == "ConvTranspose":
            fan = shape[0] * int(np.prod(shape[2:])) // max(_attr(node, "group", 1), 1)
        return rng.normal(0, 1, shape) * np.sqrt(2.0 / max(fan, 1))
    if op == "Gemm" and idx == 1 and len(shape) == 2:
        fan = shape[1] if _attr(node, "transB", 0) else shape[0]
        return rng.normal(0, 1, shape) * np.sqrt(1.0 / max(fan, 1))
    if op == "MatMul" and idx == 1 and len(shape) >= 2:
        return rng.normal(0, 1, shape) * np.sqrt(1.0 / max(shape[-2], 1))
    if op == "Gather" and idx == 0:  # embeddings
        return rng.normal(0, 0.5, shape)
    return rng.normal(0, 0.1, shape)  # biases, scales, anything else


def fill_model(path, seed):
    """path: a graph file, or an already loaded ModelProto (filled in place)."""
    m = path if isinstance(path, onnx.ModelProto) else onnx.load(path)
    rng = np.random.default_rng(seed)
    roles = _roles(m.graph)
    for i, t in enumerate(m.graph.initializer):
        if t.doc_string != STRIPPED:
            continue
        arr = _draw(rng, t.dims, roles.get(t.name)).astype(NP_OF_ONNX[t.data_type])
        new = numpy_helper.from_array(arr, name=t.name)
        m.graph.initializer[i].CopyFrom(new)
    for node in m.graph.node:
        if node.op_type != "Constant":
            continue
        for a in node.attribute:
            if a.name == "value" and a.t.doc_string == STRIPPED:
                arr = rng.normal(0, 0.1, tuple(a.t.dims)).astype(NP_OF_ONNX[a.t.data_type])
                a.t.CopyFrom(numpy_helper.from_array(arr, name=a.t.name))
    return m


def seed_of(name, seed=0):
    """The weight seed of graph `name` (write_repo's and check_families.py's)."""
    return seed + zlib.crc32(name.encode()) % 1000


def write_repo(out, names, max_batch=4, seed=0, configs=None):
    """Writes REPO/<name with '.' -> '_'>/1/model.onnx for each graph name, and a config.pbtxt
    (max_batch_size, dynamic_batching, no tensors) for those in `configs` (None: every one; an empty
    set: none, so the server auto-completes each from its graph as Triton does); returns
    {model name: {"graph": name, "inputs": [...], "outputs": [...], "config": bool}}."""
    os.makedirs(out, exist_ok=True)
    spec = {}
    for name in names:
        model_name = name.replace(".", "_")
        m = fill_model(available()[name], seed_of(name, seed))
        d = os.path.join(out, model_name, "1")
        os.makedirs(d, exist_ok=True)
        onnx.save(m, os.path.join(d, "model.onnx"))
        inits = {t.name for t in m.graph.initializer}

        def io(v):
            dims = [d.dim_value if d.HasField("dim_value") else -1 for d in v.type.tensor_type.shape.dim]
            return {"name": v.name, "elem": v.type.tensor_type.elem_type, "dims": dims}
        with_config = configs is None or name in configs
        spec[model_name] = {"graph": name, "inputs": [io(v) for v in m.graph.input if v.name not in inits],
                            "outputs": [io(v) for v in m.graph.output], "config": with_config}
        cfg = os.path.join(out, model_name, "config.pbtxt")
        if not with_config:
            if os.path.exists(cfg):
                os.remove(cfg)
            continue
        with open(cfg, "w") as f:
            f.write('name: "%s"\nbackend: "onnxruntime"\nmax_batch_size: %d\ndynamic_batching { }\n'
                    % (model_name, max_batch))
    return spec


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default=",".join(sorted({k.split(".")[0] for k in available()})))
    ap.add_argument("--max-batch", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-config", action="store_true", help="write no config.pbtxt (Triton's auto-complete)")
    a = ap.parse_args()
    spec = write_repo(a.out, select(a.models.split(",")), a.max_batch, a.seed, set() if a.no_config else None)
    print(json.dumps(spec, indent=1))


if __name__ == "__main__":
    main()
