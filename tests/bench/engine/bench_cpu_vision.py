#!/usr/bin/env python3
"""The CPU side of the vision goal: inferd's CPU plan (bench_engine --cpu: OpenBLAS, oneDNN, our C
kernels) against onnxruntime's CPU provider on the same model file, the same batches and the same
cores, side by side in one run.

    bench_cpu_vision.py --bench-engine build/bin/bench_engine [--models seedcnn.ts17,resnet18.ts17]
                        [--batches 1,8] [--cores 0-1]

Both run pinned to --cores (taskset); onnxruntime with intra_op_num_threads = that many cores,
inferd's libraries with OMP_NUM_THREADS / OPENBLAS_NUM_THREADS the same. Models come from
tests/models/zoo (fill.py). Prints one JSON line per cell and a markdown table with
inferd / onnxruntime (goal <= 1.2).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "models", "zoo"))
import fill  # noqa: E402


def cores_list(spec):
    out = []
    for part in spec.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def ort_cell(path, batch, threads, target_s=1.0):
    import onnxruntime as ort
    o = ort.SessionOptions()
    o.intra_op_num_threads = threads
    o.inter_op_num_threads = 1
    s = ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])
    i = s.get_inputs()[0]
    x = np.random.default_rng(0).uniform(-1, 1, [batch] + list(i.shape[1:])).astype(np.float32)
    for _ in range(3):
        s.run(None, {i.name: x})
    t0 = time.perf_counter()
    s.run(None, {i.name: x})
    one = time.perf_counter() - t0
    it = max(5, min(10000, int(target_s / max(one, 1e-6))))
    t0 = time.perf_counter()
    for _ in range(it):
        s.run(None, {i.name: x})
    return (time.perf_counter() - t0) / it * 1e6, it


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench-engine", required=True)
    ap.add_argument("--models", default="seedcnn.ts17,resnet18.ts17")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--cores", default="0-%d" % (os.cpu_count() - 1))
    ap.add_argument("--ort-only", action="store_true", help="(internal) time onnxruntime in this process")
    ap.add_argument("--model-path")
    a = ap.parse_args()
    cores = cores_list(a.cores)
    if a.ort_only:
        for b in [int(x) for x in a.batches.split(",")]:
            us, it = ort_cell(a.model_path, b, len(cores))
            print(json.dumps({"tool": "onnxruntime_cpu", "batch": b, "us_per_batch": round(us, 1), "iters": it}),
                  flush=True)
        return
    env = dict(os.environ, OMP_NUM_THREADS=str(len(cores)), OPENBLAS_NUM_THREADS=str(len(cores)))
    rows = []
    with tempfile.TemporaryDirectory() as d:
        spec = fill.write_repo(d, fill.select(a.models.split(",")))
        for name in spec:
            path = os.path.join(d, name, "1", "model.onnx")
            pin = ["taskset", "-c", a.cores]
            r1 = subprocess.run(pin + [a.bench_engine, "--cpu", "--model", path, "--batches", a.batches],
                                capture_output=True, text=True, env=env)
            r2 = subprocess.run(pin + [sys.executable, __file__, "--bench-engine", "-", "--ort-only", "--model-path",
                                       path, "--batches", a.batches, "--cores", a.cores],
                                capture_output=True, text=True, env=env)
            got = {}
            for line in (r1.stdout + r2.stdout).splitlines():
                if line.startswith("{"):
                    j = json.loads(line)
                    j["model"] = name
                    print(json.dumps(j), flush=True)
                    got[(j["tool"], j["batch"])] = j["us_per_batch"]
            if r1.returncode or r2.returncode:
                print("failed: %s %s" % (r1.stderr[-500:], r2.stderr[-500:]), file=sys.stderr)
            for b in [int(x) for x in a.batches.split(",")]:
                i, o = got.get(("inferd_cpu", b)), got.get(("onnxruntime_cpu", b))
                rows.append((name, b, i, o, i / o if i and o else None))
    print("\n| model | batch | inferd CPU ms | onnxruntime CPU ms | inferd / ort |\n|---|---|---|---|---|")
    for name, b, i, o, r in rows:
        f = lambda v: "%.2f" % (v / 1000) if v else "-"
        print("| %s | %d | %s | %s | %s |" % (name, b, f(i), f(o), "%.2f" % r if r else "-"))
    print("\n(cores %s, %d threads each, %s)" % (a.cores, len(cores), time.strftime("%Y-%m-%d")))


if __name__ == "__main__":
    main()
