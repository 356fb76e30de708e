#!/usr/bin/env python3
"""PyTorch at its best on the vision models, the yardstick for bench_engine on the same weights.

    bench_torch_vision.py --out DIR [--models resnet50,mobilenet_v3_large] [--batches 1,8,32,128]
                          [--precision fp32,fp16] [--modes graph,compile] [--target-seconds 0.5]
                          [--wait-file PATH]

For each model: builds the torchvision network (seeded random weights, eval), exports it with the
TorchScript-based exporter (opset 17, dynamic batch) to DIR/<model>.onnx for bench_engine, checks
the export against torch on CPU with onnxruntime, then times one batch of

    pinned fp32 host input -> H2D -> [.half()] -> model (channels_last) -> [.float()] -> D2H into pinned fp32

in the modes
  "torch_graph":   the whole pipeline captured once in a CUDA graph (torch.cuda.graph) and replayed;
  "torch_compile": torch.compile(mode="max-autotune") (Inductor's best kernels, CUDA graphs of its own),
                   the copies around it;
and, per cell, "lone" = one batch waited for before the next (latency of a lone batch) beside the
pipelined figure (batches back to back, one sync at the end). FP32 runs with TF32 off.
One JSON line per cell, bench_engine's schema.
"""

import argparse
import copy
import json
import math
import os
import sys
import time

import numpy as np


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def emit(obj):
    print(json.dumps(obj), flush=True)


def build(name):
    import torch
    import torchvision
    torch.manual_seed(0)
    m = getattr(torchvision.models, name)(weights=None).eval()
    # torchvision's init leaves BN at identity and a fresh net's logits tiny: perturb BN so the
    # check compares real numbers (the same weights go to the ONNX file)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.normal_(0, 0.1)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.normal_(0, 0.1)
    return m


def export(torch, m, path):
    x = torch.randn(1, 3, 224, 224)
    torch.onnx.export(m, (x,), path, input_names=["input"], output_names=["logits"], opset_version=17,
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}}, dynamo=False)
    import onnxruntime as ort
    xs = np.random.default_rng(1).standard_normal((2, 3, 224, 224)).astype(np.float32)
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"input": xs})[0]
    with torch.no_grad():
        got = m(torch.from_numpy(xs)).numpy()
    err = float(np.abs(got - ref).max()) / float(np.abs(ref).max())
    log("%s: export vs torch (CPU) max err relative to max|y|: %.2g" % (os.path.basename(path), err))
    if err > 1e-3:
        raise SystemExit("export of %s disagrees with torch" % path)


def time_fn(torch, fn, stream, target_s, lone):
    with torch.cuda.stream(stream):
        for _ in range(5):
            fn()
        stream.synchronize()
        t0 = time.perf_counter()
        for _ in range(3):
            fn()
            if lone:
                stream.synchronize()
        stream.synchronize()
        est = (time.perf_counter() - t0) / 3
        iters = max(10, min(100000, int(math.ceil(target_s / max(est, 1e-7)))))
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
            if lone:
                stream.synchronize()
        stream.synchronize()
        return (time.perf_counter() - t0) / iters * 1e6, iters


def prepare(torch, mode, model, batch, half, stream):
    """The step to time for one cell, compiled / captured and run once (outside any timing)."""
    dev = torch.device("cuda")
    h_in = torch.randn(batch, 3, 224, 224).pin_memory()
    h_out = torch.empty(batch, 1000).pin_memory()
    if mode == "compile":
        cm = torch.compile(model, mode="max-autotune", dynamic=False)

        def fn():
            x = h_in.to(dev, non_blocking=True).contiguous(memory_format=torch.channels_last)
            y = cm(x.half() if half else x)
            h_out.copy_(y.float() if half else y, non_blocking=True)
        with torch.cuda.stream(stream):  # compile and autotune outside the timing
            fn()
        stream.synchronize()
        return fn

    def step():
        x = h_in.to(dev, non_blocking=True).contiguous(memory_format=torch.channels_last)
        y = model(x.half() if half else x)
        h_out.copy_(y.float() if half else y, non_blocking=True)
    with torch.cuda.stream(stream):
        for _ in range(3):
            step()
    stream.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=stream):
        step()

    def replay():
        g.replay()
    # the graph reads the pinned buffers and the model's weights by address: step's closure keeps
    # them alive until the cell is timed (the next precision replaces `model` in main)
    replay.keep = step
    return replay


def measure(torch, fn, stream, target_s):
    pipe, it = time_fn(torch, fn, stream, target_s, lone=False)
    lone, _ = time_fn(torch, fn, stream, target_s / 2, lone=True)
    return pipe, lone, it


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default="resnet50,mobilenet_v3_large")
    ap.add_argument("--batches", default="1,8,32,128")
    ap.add_argument("--precision", default="fp32,fp16")
    ap.add_argument("--modes", default="graph,compile")
    ap.add_argument("--target-seconds", type=float, default=0.5)
    ap.add_argument("--export-only", action="store_true")
    ap.add_argument("--wait-file", help="prepare every cell, then wait until this path exists before timing")
    a = ap.parse_args()
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    os.makedirs(a.out, exist_ok=True)
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    # every cell is prepared (compiled, autotuned, captured) first and timed afterwards, so that with
    # --wait-file the slow part (max-autotune) can run while the GPU does other work and the timing
    # waits until PATH exists, when the GPU is otherwise idle
    cells = []
    for name in a.models.split(","):
        m = build(name)
        export(torch, m, os.path.join(a.out, name + ".onnx"))
        if a.export_only:
            continue
        stream = torch.cuda.Stream()
        for prec in a.precision.split(","):
            half = prec == "fp16"
            model = (copy.deepcopy(m).half() if half else copy.deepcopy(m).float()).cuda()
            model = model.to(memory_format=torch.channels_last)
            for mode in a.modes.split(","):
                for b in [int(x) for x in a.batches.split(",")]:
                    base = {"tool": "torch_" + mode, "model": name, "precision": prec, "batch": b}
                    try:
                        t0 = time.perf_counter()
                        with torch.no_grad():
                            fn = prepare(torch, mode, model, b, half, stream)
                        log("%s %s %s b%d prepared in %.0f s" % (mode, name, prec, b, time.perf_counter() - t0))
                        cells.append((base, fn, stream))
                    except Exception as ex:
                        emit(dict(base, error="%s: %s" % (type(ex).__name__, (str(ex).splitlines() or [""])[0][:300])))
    if a.wait_file:
        log("prepared %d cells; waiting for %s" % (len(cells), a.wait_file))
        while not os.path.exists(a.wait_file):
            time.sleep(0.5)
    for base, fn, stream in cells:
        try:
            with torch.no_grad():
                pipe, lone, it = measure(torch, fn, stream, a.target_seconds)
            emit(dict(base, us_per_batch=round(pipe, 2), lone_us=round(lone, 2), iters=it,
                      channels_last=True, gpu=gpu, torch=torch.__version__))
        except Exception as ex:
            emit(dict(base, error="%s: %s" % (type(ex).__name__, (str(ex).splitlines() or [""])[0][:300])))


if __name__ == "__main__":
    main()
