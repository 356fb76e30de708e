#!/usr/bin/env python3
"""Issue 32's yardstick and models in one process (run.sh beside this file): exports the two models the server
will serve and times PyTorch's best offline rate on them, so the served figures of the same call have their
denominator.

    offline.py --out DIR [--kind gpu|cpu] [--target-seconds 2] [--vision-batch 128] [--bert-batch 64] [--seq 128]

--kind gpu (the H200): ResNet-50 from torchvision (seeded random weights, BN perturbed:
tests/bench/engine/bench_torch_vision.py's build and export, TorchScript-based exporter, opset 17, dynamic batch,
checked against onnxruntime) to DIR/resnet50.onnx, then BERT-base (tests/bench/bert/bench_torch_bert.py's build and
export: transformers BertModel, 12 layers, seed 0, opset 17) to DIR/bert_base.onnx. Each is timed as those scripts
time "torch_graph": pinned FP32 (INT64 for BERT) host input -> H2D -> model in FP16 (channels_last for ResNet) ->
D2H into pinned FP32, the whole step captured in one CUDA graph and replayed back to back (--target-seconds of
replays). torch.compile max-autotune is left out: it takes minutes and was not faster at these batches
(tests/bench/RESULTS.md, issue 12). One JSON line per model on stdout: model, tool, precision, batch, us_per_batch,
lone_us, per_s (images or sequences per second, pipelined).

--kind cpu (a dry run without a GPU or torch): stand-ins with the same tensor names and request sizes, written with
onnx alone: "resnet50" = one strided Conv + GlobalAveragePool + Gemm over FP32 [3,224,224] -> logits [1000] (the
602 KB request of the real one, little compute); "bert_base" = tests/models/zoo's distilbert.ts17 filled with
seeded weights (vocab 1000, hidden 128). Their yardstick is onnxruntime on the CPU at batch 8 (tool
"onnxruntime_cpu"): the flow and the table are exercised, the numbers mean nothing.
DIR/meta.json says each model's vocabulary size (for the token ids run.sh draws).
"""

import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..")
sys.path.insert(0, os.path.join(BENCH, "engine"))
sys.path.insert(0, os.path.join(BENCH, "bert"))
sys.path.insert(0, os.path.join(BENCH, "..", "models", "zoo"))


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def emit(obj):
    print(json.dumps(obj), flush=True)


def gpu(a):
    import torch
    import bench_torch_bert as tb
    import bench_torch_vision as tv
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    name = torch.cuda.get_device_name(0)
    stream = torch.cuda.Stream()
    meta = {"resnet50": {}, "bert_base": {"vocab": tb.VOCAB}}
    with open(os.path.join(a.out, "meta.json"), "w") as f:
        json.dump(meta, f)

    t = time.monotonic()
    m = tv.build("resnet50")
    tv.export(torch, m, os.path.join(a.out, "resnet50.onnx"))
    log("resnet50 exported in %.1f s" % (time.monotonic() - t))
    if "resnet50" in a.time:
        b = a.vision_batch
        base = {"model": "resnet50", "tool": "torch_graph", "precision": "fp16", "batch": b, "channels_last": True}
        try:
            model = m.half().cuda().to(memory_format=torch.channels_last)
            with torch.no_grad():
                pipe, lone, it = tv.cell(torch, "graph", model, b, True, stream, a.target_seconds)
            emit(dict(base, us_per_batch=round(pipe, 2), lone_us=round(lone, 2), iters=it, per_s=round(b * 1e6 / pipe, 1),
                      gpu=name, torch=torch.__version__))
        except Exception as ex:  # noqa: BLE001 - reported in the table; the run goes on
            emit(dict(base, error="%s: %s" % (type(ex).__name__, str(ex)[:300])))
        del m
        torch.cuda.empty_cache()

    t = time.monotonic()
    m = tb.build(torch)
    with torch.no_grad():
        exporter = tb.export(torch, m, os.path.join(a.out, "bert_base.onnx"))
    log("bert_base exported with %s in %.1f s" % (exporter, time.monotonic() - t))
    if "bert_base" in a.time:
        b = a.bert_batch
        base = {"model": "bert_base", "tool": "torch_graph", "precision": "fp16", "batch": b, "seq": a.seq}
        model = m.half().cuda()
        with torch.no_grad():
            for drop in (False, True):  # as bench_torch_bert.py: an all-ones mask checked on the host once
                try:
                    pipe, lone, it = tb.cell(torch, "graph", model, b, a.seq, True, stream, a.target_seconds, drop)
                    emit(dict(base, us_per_batch=round(pipe, 2), lone_us=round(lone, 2), iters=it,
                              per_s=round(b * 1e6 / pipe, 1), mask="dropped_all_ones" if drop else "kept", gpu=name,
                              torch=torch.__version__, exporter=exporter))
                    break
                except Exception as ex:  # noqa: BLE001
                    if not drop:
                        log("bert graph capture failed (%s); again with the all-ones mask dropped" % str(ex)[:200])
                        torch.cuda.synchronize()
                        continue
                    emit(dict(base, error="%s: %s" % (type(ex).__name__, str(ex)[:300])))


def tiny_vision(path):
    """FP32 [N,3,224,224] -> Conv 3->8 k8 s8 -> GlobalAveragePool -> Flatten -> Gemm 8->1000: ResNet-50's tensors."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((8, 3, 8, 8)) * 0.1).astype(np.float32), "w")
    g = numpy_helper.from_array((rng.standard_normal((8, 1000)) * 0.3).astype(np.float32), "g")
    nodes = [helper.make_node("Conv", ["input", "w"], ["c"], kernel_shape=[8, 8], strides=[8, 8]),
             helper.make_node("GlobalAveragePool", ["c"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"], axis=1),
             helper.make_node("Gemm", ["f", "g"], ["logits"])]
    graph = helper.make_graph(nodes, "tiny_vision",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 224, 224])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1000])], [w, g])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def cpu(a):
    import onnx
    import onnxruntime as ort

    import fill
    vis = os.path.join(a.out, "resnet50.onnx")
    tiny_vision(vis)
    bert = os.path.join(a.out, "bert_base.onnx")
    m = fill.fill_model(fill.available()["distilbert.ts17"], 0)
    vocab = next(list(i.dims)[0] for i in m.graph.initializer if "word_embeddings" in i.name)
    onnx.save(m, bert)
    with open(os.path.join(a.out, "meta.json"), "w") as f:
        json.dump({"resnet50": {}, "bert_base": {"vocab": int(vocab)}}, f)
    b = 8
    rng = np.random.default_rng(1)
    feeds = {"resnet50": {"input": rng.standard_normal((b, 3, 224, 224)).astype(np.float32)},
             "bert_base": {"input_ids": rng.integers(0, vocab, (b, a.seq)).astype(np.int64),
                           "attention_mask": np.ones((b, a.seq), np.int64)}}
    for name, path in (("resnet50", vis), ("bert_base", bert)):
        if name not in a.time:
            continue
        s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        s.run(None, feeds[name])
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < a.target_seconds:
            s.run(None, feeds[name])
            n += 1
        us = (time.perf_counter() - t0) / n * 1e6
        emit({"model": name, "tool": "onnxruntime_cpu", "precision": "fp32", "batch": b, "us_per_batch": round(us, 2),
              "iters": n, "per_s": round(b * 1e6 / us, 1)})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--kind", default="gpu", choices=("gpu", "cpu"))
    ap.add_argument("--target-seconds", type=float, default=2.0)
    ap.add_argument("--vision-batch", type=int, default=128)
    ap.add_argument("--bert-batch", type=int, default=64)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--time", default="resnet50,bert_base", help="models to time (both are always exported)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    (gpu if a.kind == "gpu" else cpu)(a)


if __name__ == "__main__":
    main()
