#!/usr/bin/env python3
"""The latency-target bench's base repository for one model (run.sh beside this file, issue 37): the model
inferd-tune searches and the latency-target configurations start from.

    models.py MODEL OUT [--kind gpu|cpu] [--precision fp16] [--max-batch 128] [--seq 128] [--bert-onnx PATH]

MODEL: resnet50 or bert_base (the issue's models, written by tests/bench/soak/zoo_repo.py: ResNet-50 from the
committed torchvision graph with seeded weights, FP32 images in; BERT-base s128 exported with torch there) or mlp
(the example model's seed MLP, 1024-512-10, tests/models/gen_models.py: the CPU dry run). Writes
OUT/<MODEL>/{config.pbtxt,1/model.onnx} (one instance, --max-batch, dynamic_batching, no warm-up entries:
inferd-tune changes instances, max batch size, delay, preferred sizes and precision) and prints one line,
"MODEL REPO LOAD_ARGS": the inferd-load options the model's requests need (BERT's --input-data folder).
"""

import argparse
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))


def mlp(out, a):
    sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
    import gen_models
    tmp = os.path.join(out, "_gen")
    repo = gen_models.Repo(tmp)
    gen_models.add_mlp(repo)
    d = os.path.join(out, "mlp")
    os.makedirs(os.path.join(d, "1"), exist_ok=True)
    shutil.copyfile(os.path.join(tmp, "mlp", "1", "model.onnx"), os.path.join(d, "1", "model.onnx"))
    shutil.rmtree(tmp)
    s = ['name: "mlp"', 'platform: "onnxruntime_onnx"', "max_batch_size: %d" % a.max_batch,
         'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1024 ] } ]',
         'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 10 ] } ]',
         "dynamic_batching { }",
         "instance_group [ { kind: %s count: 1 } ]" % ("KIND_GPU" if a.kind == "gpu" else "KIND_CPU")]
    if a.kind == "gpu":
        s.append('parameters { key: "precision" value { string_value: "%s" } }' % a.precision)
    with open(os.path.join(d, "config.pbtxt"), "w") as f:
        f.write("\n".join(s) + "\n")
    return out, ""


def zoo(name, out, a):
    """zoo_repo.py writes OUT/<name>/<name>/...: the repository is OUT/<name> (it also holds the soak's small
    attack_target model, which inferd-tune, in explicit mode, never loads; run.sh's second server does not use
    this repository)."""
    cmd = [sys.executable, os.path.join(ROOT, "tests", "bench", "soak", "zoo_repo.py"), out, "--models", name,
           "--kind", a.kind, "--precision", a.precision, "--count", "1", "--delay-us", "0",
           "--max-batch-%s" % name, str(a.max_batch), "--seq", str(a.seq), "--no-warmup"]
    if a.bert_onnx:
        cmd += ["--bert-onnx", a.bert_onnx]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit("models.py: zoo_repo.py failed (%d)" % p.returncode)
    line = [ln for ln in p.stdout.splitlines() if ln.startswith(name + " ")][-1].split(" ", 2)
    return line[1], line[2] if len(line) > 2 else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", choices=("resnet50", "bert_base", "mlp"))
    ap.add_argument("out")
    ap.add_argument("--kind", default="gpu", choices=("gpu", "cpu"))
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--max-batch", type=int, default=128)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--bert-onnx", default="")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    repo, load_args = mlp(a.out, a) if a.model == "mlp" else zoo(a.model, a.out, a)
    print("%s %s %s" % (a.model, os.path.abspath(repo), load_args))


if __name__ == "__main__":
    main()
