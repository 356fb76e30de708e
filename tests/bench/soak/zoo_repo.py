#!/usr/bin/env python3
"""The repositories of issue 31's GPU soak (zoo.sh beside this file): ResNet-50 and a BERT-base encoder, each in
a repository of its own (one server per model, zoo.sh says why), with the attacks' target model beside it.

    zoo_repo.py OUT [--models resnet50,bert_base] [--kind gpu] [--precision fp16] [--count 2] [--delay-us 500]
                [--max-batch-resnet50 64] [--max-batch-bert_base 64] [--seq 128] [--no-warmup]
                [--bert-onnx PATH]

Writes OUT/<model>/<model>/{config.pbtxt,1/model.onnx}, OUT/<model>/attack_target (attacks.py's target) and, for
BERT, OUT/bert_base_data/{input_ids,attention_mask} (one request's raw INT64 rows for inferd-load --input-data:
ids uniform in [0, 30522), the mask all ones); prints one line per model, "MODEL REPO LOAD_ARGS", the
inferd-load options its soak needs (zoo.sh passes them to soak.py --load-args).

- resnet50: torchvision's resnet50 as torch's TorchScript exporter wrote it at opset 17
  (tests/models/zoo/graphs/resnet50.ts17, export_zoo.py), seeded random weights put back by fill.py: FP32
  input [3,224,224] -> logits [1000], batch dim dynamic. numpy and onnx only: no torch needed for it.
- bert_base: tests/bench/bert/bench_torch_bert.py's encoder and export (transformers BertModel from a BertConfig,
  12 layers, hidden 768, random weights of seed 0, no pooler; input_ids, attention_mask INT64 [batch, sequence]
  -> last_hidden_state FP32 [batch, sequence, 768]), made here with torch unless --bert-onnx names a file it
  wrote before (e.g. /tmp/bert_models/bert_base.onnx from tests/bench/bert/run.sh). Needs torch and
  transformers: on the device, /opt/torch/.venv/bin/python (nothing downloaded: the config is built, the
  weights drawn). The config fixes the sequence at --seq, so a request one token longer (soak.py's invalid kind)
  is refused by validation (INVALID_ARGUMENT), as the soak's counts need.
Both configs: KIND_GPU x --count instances, parameters precision --precision (inferd's CUDA plan in FP16, as
tests/bench/vision and tests/bench/bert measure it), dynamic_batching with --delay-us and preferred batch sizes
(the powers of two up to max_batch_size from 8), and a model_warmup entry per preferred size and 1 (the CUDA graphs
and cuDNN plans made before the server says ready, not under the soak's first minute). --kind cpu writes
KIND_CPU and no precision (a load check of the files on a machine without a GPU; too slow to soak there).

On the device (from the repository root; zoo.sh runs this for you):
    /opt/torch/.venv/bin/python tests/bench/soak/zoo_repo.py /tmp/zoo_repos
"""

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "models", "zoo"))
sys.path.insert(0, os.path.join(ROOT, "tests", "bench", "bert"))
sys.path.insert(0, os.path.join(ROOT, "tests", "bench", "engine"))
sys.path.insert(0, HERE)

VOCAB = 30522


def preferred(max_batch):
    out, b = [], 8
    while b <= max_batch:
        out.append(b)
        b *= 2
    return out or [max_batch]


def config(name, max_batch, inputs, outputs, a):
    """inputs/outputs: [(name, TYPE_X, dims without the batch dim)]."""
    ents = lambda xs: ", ".join('{ name: "%s" data_type: %s dims: [ %s ] }' % (n, t, ", ".join(map(str, d)))  # noqa
                                for n, t, d in xs)
    pref = preferred(max_batch)
    s = ['name: "%s"' % name, 'platform: "onnxruntime_onnx"', "max_batch_size: %d" % max_batch,
         "input [ %s ]" % ents(inputs), "output [ %s ]" % ents(outputs),
         "dynamic_batching { preferred_batch_size: [ %s ] max_queue_delay_microseconds: %d }" % (
             ", ".join(map(str, pref)), a.delay_us),
         "instance_group [ { kind: %s count: %d } ]" % ("KIND_GPU" if a.kind == "gpu" else "KIND_CPU", a.count)]
    if a.kind == "gpu":
        s.append('parameters { key: "precision" value { string_value: "%s" } }' % a.precision)
    if not a.no_warmup:
        for b in sorted({1} | set(pref)):
            ins = " ".join('inputs { key: "%s" value { data_type: %s dims: [ %s ] %s } }' % (
                n, t, ", ".join(map(str, d)), "zero_data: true" if t == "TYPE_INT64" else "random_data: true")
                for n, t, d in inputs)
            s.append('model_warmup { name: "b%d" batch_size: %d %s }' % (b, b, ins))
    return "\n".join(s) + "\n"


def write_model(out, name, model_bytes_or_proto, cfg):
    import onnx
    d = os.path.join(out, name, name)
    os.makedirs(os.path.join(d, "1"), exist_ok=True)
    path = os.path.join(d, "1", "model.onnx")
    if isinstance(model_bytes_or_proto, str):  # a file already written: a hard link (inferd refuses symlinks)
        if os.path.lexists(path):
            os.remove(path)
        try:
            os.link(model_bytes_or_proto, path)
        except OSError:
            import shutil
            shutil.copyfile(model_bytes_or_proto, path)
    else:
        onnx.save(model_bytes_or_proto, path)
    with open(os.path.join(d, "config.pbtxt"), "w") as f:
        f.write(cfg)
    import attacks
    if not os.path.isdir(os.path.join(out, name, attacks.TARGET)):
        attacks.write_target(os.path.join(out, name))
    return os.path.join(out, name)


def resnet50(out, a):
    import fill
    m = fill.fill_model(fill.available()["resnet50.ts17"], 0)
    mb = a.max_batch_resnet50
    cfg = config("resnet50", mb, [("input", "TYPE_FP32", [3, 224, 224])], [("logits", "TYPE_FP32", [1000])], a)
    return write_model(out, "resnet50", m, cfg), ""


def bert_base(out, a):
    path = a.bert_onnx
    if not path:
        import torch
        from bench_torch_bert import build, export
        path = os.path.join(out, "bert_base.onnx")
        with torch.no_grad():
            exporter = export(torch, build(torch), path)
        print("bert_base: exported with %s to %s" % (exporter, path), file=sys.stderr)
    mb = a.max_batch_bert_base
    cfg = config("bert_base", mb, [("input_ids", "TYPE_INT64", [a.seq]), ("attention_mask", "TYPE_INT64", [a.seq])],
                 [("last_hidden_state", "TYPE_FP32", [a.seq, 768])], a)
    repo = write_model(out, "bert_base", path, cfg)
    data = os.path.join(out, "bert_base_data")
    os.makedirs(data, exist_ok=True)
    np.random.default_rng(0).integers(0, VOCAB, (1, a.seq)).astype("<i8").tofile(os.path.join(data, "input_ids"))
    np.ones((1, a.seq), "<i8").tofile(os.path.join(data, "attention_mask"))
    return repo, "--input-data %s" % data


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--models", default="resnet50,bert_base")
    ap.add_argument("--kind", default="gpu", choices=("gpu", "cpu"))
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--count", type=int, default=2)
    ap.add_argument("--delay-us", type=int, default=500)
    ap.add_argument("--max-batch-resnet50", type=int, default=64)
    ap.add_argument("--max-batch-bert_base", type=int, default=64)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--no-warmup", action="store_true")
    ap.add_argument("--bert-onnx", default="", help="a bert_base.onnx bench_torch_bert.py wrote (no torch needed)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    makers = {"resnet50": resnet50, "bert_base": bert_base}
    for name in a.models.split(","):
        if name not in makers:
            sys.exit("zoo_repo.py: unknown model %r (%s)" % (name, ", ".join(makers)))
        repo, load_args = makers[name](a.out, a)
        print("%s %s %s" % (name, repo, load_args))


if __name__ == "__main__":
    main()
