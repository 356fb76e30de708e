#!/usr/bin/env python3
"""PyTorch at its best on the vision models, the yardstick for bench_engine on the same weights.

    bench_torch_vision.py --out DIR [--models resnet50,mobilenet_v3_large] [--batches 1,8,32,128]
                          [--precision fp32,fp16] [--modes graph,compile] [--target-seconds 0.5]

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
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_timing import emit, error_line, log, run_cell  # noqa: E402


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


def cell(torch, mode, model, batch, half, stream, target_s):
    dev = torch.device("cuda")
    h_in = torch.randn(batch, 3, 224, 224).pin_memory()
    h_out = torch.empty(batch, 1000).pin_memory()
    net = torch.compile(model, mode="max-autotune", dynamic=False) if mode == "compile" else model

    def step():
        x = h_in.to(dev, non_blocking=True).contiguous(memory_format=torch.channels_last)
        y = net(x.half() if half else x)
        h_out.copy_(y.float() if half else y, non_blocking=True)
    return run_cell(torch, mode, step, stream, target_s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default="resnet50,mobilenet_v3_large")
    ap.add_argument("--batches", default="1,8,32,128")
    ap.add_argument("--precision", default="fp32,fp16")
    ap.add_argument("--modes", default="graph,compile")
    ap.add_argument("--target-seconds", type=float, default=0.5)
    ap.add_argument("--export-only", action="store_true")
    a = ap.parse_args()
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    os.makedirs(a.out, exist_ok=True)
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    for name in a.models.split(","):
        m = build(name)
        export(torch, m, os.path.join(a.out, name + ".onnx"))
        if a.export_only:
            continue
        stream = torch.cuda.Stream()
        for prec in a.precision.split(","):
            half = prec == "fp16"
            model = (m.half() if half else m.float()).cuda().to(memory_format=torch.channels_last)
            with torch.no_grad():
                for mode in a.modes.split(","):
                    for b in [int(x) for x in a.batches.split(",")]:
                        base = {"tool": "torch_" + mode, "model": name, "precision": prec, "batch": b}
                        try:
                            pipe, lone, it = cell(torch, mode, model, b, half, stream, a.target_seconds)
                            emit(dict(base, us_per_batch=round(pipe, 2), lone_us=round(lone, 2), iters=it,
                                      channels_last=True, gpu=gpu, torch=torch.__version__))
                        except Exception as ex:
                            emit(error_line(base, ex))
                        torch.cuda.empty_cache()
            m = m.float().cpu()


if __name__ == "__main__":
    main()
