#!/usr/bin/env python3
"""PyTorch baseline for bench_engine: the same Linear/ReLU MLP, the same pipeline.

    bench_torch.py --model PATH.onnx [--precision fp32,fp16] [--batches 1,8,64,256,1024]
                   [--iters N] [--warmup N] [--modes eager,graph] [--target-seconds 0.5]

Reads the ONNX model's Gemm/Relu chain (weights via onnx.numpy_helper), builds
the equivalent nn.Sequential, checks it against onnxruntime (fp32, rtol 1e-4),
then for each precision and batch size times one batch of

    pinned fp32 host input -> H2D (non_blocking) -> [.half()] -> model -> [.float()]
    -> D2H (non_blocking copy_ into a pinned fp32 output)

all on one stream, in two modes: "torch_eager" (the ops issued from Python every
batch) and "torch_graph" (the whole pipeline, copies included, captured once in a
torch.cuda.CUDAGraph between static pinned buffers, then replayed). Each cell:
warmup, then `iters` batches back to back with one sync at the end; the figure is
wall time / iters. fp32 runs with TF32 off (matmul and cuDNN).

Prints one JSON object per line, the schema bench_engine prints:
  {"tool":"torch_graph","model":"mlp_4x4096","precision":"fp16","batch":64,"us_per_batch":..,"graphs":1,...}
A cell that fails prints {"tool":..,"model":..,"precision":..,"batch":..,"error":"..."} and the run goes on.
"""

import argparse
import copy
import json
import math
import os
import sys
import time

import numpy as np
import onnx
from onnx import numpy_helper


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def emit(obj):
    print(json.dumps(obj), flush=True)


# --- ONNX -> layers

def load_layers(path):
    """[(W [out, in] float32, b [out] float32 or None, relu_after)] of a Gemm/Relu chain."""
    model = onnx.load(path)
    g = model.graph
    inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    layers = []
    cur = g.input[0].name
    for n in g.node:
        if n.input[0] != cur:
            raise ValueError("%s: node %s does not consume the previous output (not a plain chain)" % (path, n.name))
        if n.op_type == "Gemm":
            at = {a.name: helper_attr(a) for a in n.attribute}
            if at.get("transA", 0):
                raise ValueError("Gemm with transA=1 is not a Linear layer")
            w = inits[n.input[1]].astype(np.float32)
            w = w if at.get("transB", 0) else w.T  # Linear keeps [out, in]
            w = w * np.float32(at.get("alpha", 1.0))
            b = None
            if len(n.input) > 2 and n.input[2]:
                b = inits[n.input[2]].astype(np.float32).reshape(-1) * np.float32(at.get("beta", 1.0))
                if b.shape[0] != w.shape[0]:
                    raise ValueError("Gemm bias of shape %s, expected [%d]" % (b.shape, w.shape[0]))
            layers.append([np.ascontiguousarray(w), b, False])
        elif n.op_type == "Relu":
            if not layers or layers[-1][2]:
                raise ValueError("Relu not right after a Gemm")
            layers[-1][2] = True
        else:
            raise ValueError("%s: unsupported op %s (Gemm and Relu only)" % (path, n.op_type))
        cur = n.output[0]
    if cur != g.output[0].name:
        raise ValueError("%s: last node does not produce the graph output" % path)
    return [tuple(l) for l in layers], g.input[0].name, g.output[0].name


def helper_attr(a):
    return onnx.helper.get_attribute_value(a)


def build_torch(layers):
    import torch
    from torch import nn
    mods = []
    for w, b, relu in layers:
        lin = nn.Linear(w.shape[1], w.shape[0], bias=b is not None)
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(w))
            if b is not None:
                lin.bias.copy_(torch.from_numpy(b))
        mods.append(lin)
        if relu:
            mods.append(nn.ReLU())
    return nn.Sequential(*mods).eval()


def ort_reference(path, in_name, out_name, x):
    import onnxruntime as ort
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return sess.run([out_name], {in_name: x})[0]


def check(model_fp32, model_fp16, path, in_name, out_name, in_dim, device, rows=8):
    import torch
    x = np.random.default_rng(7).standard_normal((rows, in_dim)).astype(np.float32)
    ref = ort_reference(path, in_name, out_name, x)
    with torch.no_grad():
        got = model_fp32(torch.from_numpy(x).to(device)).cpu().numpy()
    scale = float(np.abs(ref).max())
    # rtol 1e-4, with an absolute floor at 1e-4 of the output's scale for entries near zero
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * scale,
                               err_msg="torch fp32 vs onnxruntime on %s" % path)
    log("check fp32: torch vs onnxruntime max abs err %.3g (max |y| %.3g)" % (float(np.abs(got - ref).max()), scale))
    if model_fp16 is not None:
        with torch.no_grad():
            got16 = model_fp16(torch.from_numpy(x).to(device).half()).float().cpu().numpy()
        log("check fp16 (informational): max abs err %.3g, relative to max |y| %.3g"
            % (float(np.abs(got16 - ref).max()), float(np.abs(got16 - ref).max()) / scale))


# --- timing

def make_step(torch, model, h_in, h_out, half, dev):
    def step():
        x = h_in.to(dev, non_blocking=True)
        if half:
            x = x.half()
        y = model(x)
        if half:
            y = y.float()
        h_out.copy_(y, non_blocking=True)
    return step


def time_loop(torch, fn, stream, warmup, iters, target_s, min_iters):
    """Mean microseconds per fn() call, back to back on `stream`, one sync at the end."""
    with torch.cuda.stream(stream):
        for _ in range(warmup):
            fn()
        stream.synchronize()
        if iters <= 0:  # calibrate: enough for target_s, at least min_iters
            n = 5
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            stream.synchronize()
            est = (time.perf_counter() - t0) / n
            iters = max(min_iters, int(math.ceil(target_s / max(est, 1e-7))))
            iters = min(iters, 1_000_000)
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        stream.synchronize()
        el = time.perf_counter() - t0
    return el / iters * 1e6, iters


def bench_cell(torch, mode, model, in_dim, out_dim, batch, half, dev, stream, a):
    h_in = torch.randn(batch, in_dim, dtype=torch.float32).pin_memory()
    h_out = torch.empty(batch, out_dim, dtype=torch.float32).pin_memory()
    step = make_step(torch, model, h_in, h_out, half, dev)
    extra = {}
    if mode == "eager":
        us, iters = time_loop(torch, step, stream, a.warmup, a.iters, a.target_seconds, a.min_iters)
    else:
        # warm up outside capture first (cuBLAS handles/workspaces, lazy init)
        with torch.cuda.stream(stream):
            for _ in range(3):
                step()
        stream.synchronize()
        g = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(g, stream=stream):
                step()
            fn = g.replay
            extra["copies_in_graph"] = True
        except Exception as ex:  # some torch versions refuse H2D/D2H in capture: copies go outside
            log("graph capture with the copies failed (%s); capturing compute only" % str(ex).splitlines()[0])
            torch.cuda.synchronize()
            d_in = torch.empty(batch, in_dim, dtype=torch.float32, device=dev)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=stream):
                x = d_in.half() if half else d_in
                y = model(x)
                d_out = y.float() if half else y

            def fn():
                d_in.copy_(h_in, non_blocking=True)
                g.replay()
                h_out.copy_(d_out, non_blocking=True)
            extra["copies_in_graph"] = False
        us, iters = time_loop(torch, fn, stream, a.warmup, a.iters, a.target_seconds, a.min_iters)
        # sanity: the replayed pipeline computes what eager does
        with torch.cuda.stream(stream):
            fn()
            got = h_out.clone()
            step()
        stream.synchronize()
        diff = float((got - h_out).abs().max())
        if diff > 1e-3 * float(h_out.abs().max() + 1e-6) and not half:
            extra["warning"] = "graph output differs from eager by %.3g" % diff
    return us, iters, extra


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, action="append", help="ONNX model (repeatable)")
    ap.add_argument("--precision", default="fp32,fp16", help="comma list of fp32, fp16")
    ap.add_argument("--batches", default="1,8,64,256,1024")
    ap.add_argument("--modes", default="eager,graph", help="comma list of eager, graph")
    ap.add_argument("--iters", type=int, default=0, help="timed batches per cell (0: ~--target-seconds)")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--target-seconds", type=float, default=0.5)
    ap.add_argument("--min-iters", type=int, default=20)
    ap.add_argument("--no-check", action="store_true", help="skip the onnxruntime check")
    ap.add_argument("--check-only", action="store_true", help="only the onnxruntime check (CPU if no GPU)")
    a = ap.parse_args()

    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    has_cuda = torch.cuda.is_available()
    if not has_cuda and not a.check_only:
        log("bench_torch: no CUDA device visible to torch")
        sys.exit(2)
    dev = torch.device("cuda" if has_cuda else "cpu")
    precisions = [p for p in a.precision.split(",") if p]
    batches = [int(b) for b in a.batches.split(",") if b]
    modes = [m for m in a.modes.split(",") if m]
    gpu = torch.cuda.get_device_name(0) if has_cuda else "cpu"
    rc = 0

    for path in a.model:
        name = os.path.splitext(os.path.basename(path))[0]
        layers, in_name, out_name = load_layers(path)
        in_dim, out_dim = layers[0][0].shape[1], layers[-1][0].shape[0]
        m32 = build_torch(layers).to(dev)
        m16 = copy.deepcopy(m32).half() if (has_cuda and "fp16" in precisions) else None
        log("%s: %d Linear layers, %d -> %d, on %s (torch %s)" % (name, len(layers), in_dim, out_dim, gpu,
                                                                  torch.__version__))
        if not a.no_check:
            check(m32, m16, path, in_name, out_name, in_dim, dev)
        if a.check_only:
            continue
        stream = torch.cuda.Stream()
        with torch.no_grad():
            for prec in precisions:
                model, half = (m16, True) if prec == "fp16" else (m32, False)
                for batch in batches:
                    for mode in modes:
                        tool = "torch_" + mode
                        base = {"tool": tool, "model": name, "precision": prec, "batch": batch}
                        try:
                            us, iters, extra = bench_cell(torch, mode, model, in_dim, out_dim, batch, half, dev,
                                                          stream, a)
                            emit(dict(base, us_per_batch=round(us, 3), graphs=int(mode == "graph"), iters=iters,
                                      gpu=gpu, torch=torch.__version__, **extra))
                        except Exception as ex:
                            rc = 1
                            emit(dict(base, error="%s: %s" % (type(ex).__name__, str(ex).splitlines()[0] if str(ex) else "")))
                            try:
                                torch.cuda.synchronize()
                            except Exception:
                                pass
                        torch.cuda.empty_cache()
    sys.exit(rc)


if __name__ == "__main__":
    main()
