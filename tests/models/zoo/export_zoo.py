#!/usr/bin/env python3
"""Exports the models users bring (torchvision classifiers, the seeds' CNN, BERT/ViT-class encoders,
a GPT-2-shaped decoder) with torch's own exporters and keeps their GRAPHS, weights stripped.

Runs where torch is (the GPU device machine's venv); never in CI. What it writes is committed under
tests/models/zoo/graphs/: each model's ONNX file with every large floating-point initializer
replaced by an empty tensor of the same name, type and dims (marked in doc_string), so a file is a
few hundred KB while its nodes, attributes and shape subgraphs are exactly what the exporter
emitted. tests/models/zoo/fill.py puts seeded random weights back for CI and the integration tests;
onnxruntime is the numeric oracle for whatever weights are filled in.

    python export_zoo.py --out DIR [--only NAME,...]
"""

import argparse
import json
import os
import sys
import traceback

import onnx
import torch
from onnx import numpy_helper

STRIP_MIN_ELEMS = 16  # float initializers at least this large are stripped; small ones (eps, scales) stay
FLOAT_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE, onnx.TensorProto.BFLOAT16}


class SeedCNN(torch.nn.Module):
    """The GPU-profiling lesson's network (3x112x112 input)."""

    def __init__(self):
        super().__init__()
        c = torch.nn
        self.features = c.Sequential(
            c.Conv2d(3, 64, 3, padding=1), c.ReLU(), c.MaxPool2d(2),
            c.Conv2d(64, 128, 3, padding=1), c.ReLU(), c.MaxPool2d(2),
            c.Conv2d(128, 256, 3, padding=1), c.ReLU())
        self.head = c.Sequential(c.Flatten(), c.Linear(256 * 28 * 28, 512), c.ReLU(), c.Linear(512, 10))

    def forward(self, x):
        return self.head(self.features(x))


class CausalLM(torch.nn.Module):
    """A GPT-2-shaped decoder without KV cache (pre-LN blocks, causal mask, tied-free LM head)."""

    def __init__(self, vocab=1000, d=128, heads=4, layers=2, ctx=128):
        super().__init__()
        self.heads = heads
        self.wte = torch.nn.Embedding(vocab, d)
        self.wpe = torch.nn.Embedding(ctx, d)
        self.blocks = torch.nn.ModuleList()
        for _ in range(layers):
            self.blocks.append(torch.nn.ModuleDict({
                "ln1": torch.nn.LayerNorm(d), "qkv": torch.nn.Linear(d, 3 * d), "proj": torch.nn.Linear(d, d),
                "ln2": torch.nn.LayerNorm(d), "fc": torch.nn.Linear(d, 4 * d), "out": torch.nn.Linear(4 * d, d)}))
        self.lnf = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, vocab, bias=False)

    def forward(self, input_ids):
        b, t = input_ids.shape
        pos = torch.arange(t, device=input_ids.device).unsqueeze(0)
        x = self.wte(input_ids) + self.wpe(pos)
        mask = torch.triu(torch.full((t, t), float("-inf"), device=x.device), diagonal=1)
        for blk in self.blocks:
            h = blk["ln1"](x)
            q, k, v = blk["qkv"](h).split(x.shape[-1], dim=-1)
            sh = lambda z: z.view(b, t, self.heads, -1).transpose(1, 2)
            q, k, v = sh(q), sh(k), sh(v)
            att = (q @ k.transpose(-2, -1)) / (q.shape[-1] ** 0.5) + mask
            y = att.softmax(-1) @ v
            x = x + blk["proj"](y.transpose(1, 2).reshape(b, t, -1))
            x = x + blk["out"](torch.nn.functional.gelu(blk["fc"](blk["ln2"](x)), approximate="tanh"))
        return self.head(self.lnf(x))


def vision(name):
    import torchvision
    if name == "seedcnn":
        return SeedCNN(), (torch.randn(1, 3, 112, 112),), ["input"], ["logits"]
    if name == "vgg11":
        m = torchvision.models.vgg11(weights=None)
    else:
        m = getattr(torchvision.models, name)(weights=None)
    size = 224
    return m, (torch.randn(1, 3, size, size),), ["input"], ["logits"]


def text(name):
    import transformers as tf
    if name == "bert":
        cfg = tf.BertConfig(vocab_size=1000, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                            intermediate_size=512, max_position_embeddings=128)
        m = tf.BertModel(cfg)
        ids = torch.randint(0, 1000, (1, 16))
        return m, (ids, torch.ones_like(ids)), ["input_ids", "attention_mask"], ["last_hidden_state", "pooler_output"]
    if name == "distilbert":
        cfg = tf.DistilBertConfig(vocab_size=1000, dim=128, n_layers=2, n_heads=4, hidden_dim=512,
                                  max_position_embeddings=128)
        m = tf.DistilBertModel(cfg)
        ids = torch.randint(0, 1000, (1, 16))
        return m, (ids, torch.ones_like(ids)), ["input_ids", "attention_mask"], ["last_hidden_state"]
    if name == "vit":
        cfg = tf.ViTConfig(image_size=64, patch_size=16, hidden_size=128, num_hidden_layers=2,
                           num_attention_heads=4, intermediate_size=512)
        m = tf.ViTModel(cfg, add_pooling_layer=True)
        return m, (torch.randn(1, 3, 64, 64),), ["pixel_values"], ["last_hidden_state", "pooler_output"]
    if name == "gpt":
        return CausalLM(), (torch.randint(0, 1000, (1, 16)),), ["input_ids"], ["logits"]
    raise KeyError(name)


VISION = ["seedcnn", "resnet18", "resnet50", "mobilenet_v3_small", "mobilenet_v3_large", "efficientnet_b0", "vgg11"]
TEXT = ["bert", "distilbert", "vit", "gpt"]
# (exporter, opset): the TorchScript-based exporter at the oldest and a recent opset, the dynamo one at 18.
VARIANTS = [("ts", 13), ("ts", 17), ("dynamo", 18)]


def strip(model):
    """Empties every large float initializer (and large float Constant node values), keeping name, type, dims."""
    stripped = 0
    for t in model.graph.initializer:
        n = 1
        for d in t.dims:
            n *= d
        if t.data_type in FLOAT_TYPES and n >= STRIP_MIN_ELEMS:
            t.ClearField("raw_data")
            for f in ("float_data", "double_data", "int32_data"):
                t.ClearField(f)
            t.data_location = onnx.TensorProto.DEFAULT
            del t.external_data[:]
            t.doc_string = "inferd:stripped"
            stripped += 1
    for node in model.graph.node:
        if node.op_type != "Constant":
            continue
        for a in node.attribute:
            if a.name == "value" and a.t.data_type in FLOAT_TYPES:
                n = 1
                for d in a.t.dims:
                    n *= d
                if n >= STRIP_MIN_ELEMS:
                    a.t.ClearField("raw_data")
                    a.t.ClearField("float_data")
                    a.t.doc_string = "inferd:stripped"
                    stripped += 1
    return stripped


def export(name, exporter, opset, out_dir):
    m, args, in_names, out_names = vision(name) if name in VISION else text(name)
    m.eval()
    path = os.path.join(out_dir, "tmp_%s.onnx" % name)
    seq = name in TEXT and name != "vit"
    if exporter == "ts":
        dyn = {n: {0: "batch"} for n in in_names + out_names}
        if seq:
            for n in in_names:
                dyn[n][1] = "sequence"
        torch.onnx.export(m, args, path, input_names=in_names, output_names=out_names, opset_version=opset,
                          dynamic_axes=dyn, dynamo=False, do_constant_folding=True)
    else:
        b = torch.export.Dim("batch", min=1, max=64)
        shapes = {}
        for n in in_names:
            shapes[n] = {0: b}
            if seq:
                shapes[n][1] = torch.export.Dim("sequence", min=2, max=128)
        prog = torch.onnx.export(m, args, input_names=in_names, output_names=out_names, opset_version=opset,
                                 dynamic_shapes=tuple(shapes[n] for n in in_names), dynamo=True)
        prog.optimize()
        prog.save(path, external_data=False)
    model = onnx.load(path)
    os.remove(path)
    ops = sorted({n.op_type for n in model.graph.node} | {
        n.op_type for f in model.functions for n in f.node})
    stripped = strip(model)
    dst = os.path.join(out_dir, "%s.%s%d.onnx" % (name, exporter, opset))
    onnx.save(model, dst)
    return {"file": os.path.basename(dst), "ops": ops, "stripped": stripped,
            "opset": opset, "exporter": exporter, "bytes": os.path.getsize(dst),
            "functions": len(model.functions)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    names = [n for n in VISION + TEXT if not a.only or n in a.only.split(",")]
    report = {}
    torch.manual_seed(0)
    for name in names:
        for exporter, opset in VARIANTS:
            key = "%s.%s%d" % (name, exporter, opset)
            try:
                report[key] = export(name, exporter, opset, a.out)
                print("ok  ", key, report[key]["bytes"], "bytes", report[key]["ops"], flush=True)
            except Exception as ex:  # an exporter that fails is a finding, recorded and reported
                report[key] = {"error": "%s: %s" % (type(ex).__name__, str(ex).splitlines()[0][:300])}
                print("FAIL", key, report[key]["error"], flush=True)
                traceback.print_exc(limit=2, file=sys.stdout)
    with open(os.path.join(a.out, "zoo.json"), "w") as f:
        json.dump(report, f, indent=1, sort_keys=True)
    allops = sorted({o for r in report.values() for o in r.get("ops", [])})
    print("all ops:", allops)


if __name__ == "__main__":
    main()
