#!/usr/bin/env python3
"""The CPU side of the vision goal: inferd's CPU plan (bench_engine --cpu: OpenBLAS, oneDNN, our C
kernels) against onnxruntime's CPU provider on the same model file, the same batches and the same
cores, side by side in one run.

    bench_cpu_vision.py --bench-engine build/bin/bench_engine [--models seedcnn.ts17,resnet18.ts17]
                        [--batches 1,8] [--cores 0-1] [--before OLD/bench_engine] [--repeat N]

Both run pinned to --cores (taskset); onnxruntime with intra_op_num_threads = that many cores,
inferd's libraries with OMP_NUM_THREADS / OPENBLAS_NUM_THREADS the same. Models come from
tests/models/zoo (fill.py). Prints one JSON line per cell and a markdown table with
inferd / onnxruntime (goal <= 1.2). --before times a second bench_engine (say, built from the
commit before a change) in the same run, for a before/after table. --repeat N runs every tool N
times, alternating, and keeps each cell's fastest (a shared machine's noise only slows runs down).
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
    ap.add_argument("--before", help="a second bench_engine to time alongside (tool inferd_cpu_before)")
    ap.add_argument("--repeat", type=int, default=1)
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
    engines = [("inferd_cpu", a.bench_engine)] + ([("inferd_cpu_before", a.before)] if a.before else [])
    batches = [int(x) for x in a.batches.split(",")]
    with tempfile.TemporaryDirectory() as d:
        spec = fill.write_repo(d, fill.select(a.models.split(",")))
        for name in spec:
            path = os.path.join(d, name, "1", "model.onnx")
            pin = ["taskset", "-c", a.cores]
            got = {}
            for _ in range(a.repeat):
                runs = [(tool, pin + [exe, "--cpu", "--model", path, "--batches", a.batches]) for tool, exe in engines]
                runs.append(("onnxruntime_cpu", pin + [sys.executable, __file__, "--bench-engine", "-", "--ort-only",
                                                       "--model-path", path, "--batches", a.batches, "--cores",
                                                       a.cores]))
                for tool, cmd in runs:
                    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
                    if r.returncode:
                        print("failed: %s: %s" % (tool, r.stderr[-500:]), file=sys.stderr)
                    for line in r.stdout.splitlines():
                        if line.startswith("{"):
                            j = json.loads(line)
                            j["tool"], j["model"] = tool, name
                            print(json.dumps(j), flush=True)
                            k = (tool, j["batch"])
                            got[k] = min(got.get(k, float("inf")), j["us_per_batch"])
            for b in batches:
                i, o, p = got.get(("inferd_cpu", b)), got.get(("onnxruntime_cpu", b)), got.get(("inferd_cpu_before", b))
                rows.append((name, b, p, i, o))
    f = lambda v: "%.2f" % (v / 1000) if v else "-"
    q = lambda x, y: "%.2f" % (x / y) if x and y else "-"
    if a.before:
        print("\n| model | batch | inferd before ms | inferd after ms | onnxruntime ms | before / ort | after / ort |"
              "\n|---|---|---|---|---|---|---|")
        for name, b, p, i, o in rows:
            print("| %s | %d | %s | %s | %s | %s | %s |" % (name, b, f(p), f(i), f(o), q(p, o), q(i, o)))
    else:
        print("\n| model | batch | inferd CPU ms | onnxruntime CPU ms | inferd / ort |\n|---|---|---|---|---|")
        for name, b, p, i, o in rows:
            print("| %s | %d | %s | %s | %s |" % (name, b, f(i), f(o), q(i, o)))
    print("\n(cores %s, %d threads each, best of %d, %s)" % (a.cores, len(cores), a.repeat, time.strftime("%Y-%m-%d")))


if __name__ == "__main__":
    main()
