#!/usr/bin/env python3
"""tests/gpu/norm_serve_check.py: InstanceNormalization and GroupNormalization served by the real
server on GPU instances (issue 34 item 3), end to end over KServe v2 HTTP (urllib: the GPU machine's
Python has no tritonclient), against onnxruntime on the CPU.

    norm_serve_check.py INFERD_BIN MODELS_DIR [--kind cpu]

MODELS_DIR is what tests/unit/engine/gen_test_models.py wrote (norm_instance, norm_group18,
norm_group21, norm_group_big; host_dft as the control). Each norm model is served twice, FP32 and
FP16 (parameters precision), on KIND_GPU; every output of a batch of 3 must be within
tol * (|ref| + mean |ref|) of onnxruntime's (tol 1e-4 for FP32: onnxruntime's float statistics are
1e-6 off on norm_group_big; 2e-2 for FP16), and the load log must name no norm node as running on the
host, while it does name the control model's DFT (so the check sees the log lines it looks for).
--kind cpu runs the same on CPU instances (a smoke test of this script where no GPU is).
Exit status 0 when everything holds.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import inferd_testlib as lib  # noqa: E402

NORMS = ["norm_instance", "norm_group18", "norm_group21", "norm_group_big"]
CONTROL = "host_dft"


def write_repo(repo, models_dir, kind):
    names = []
    for m in NORMS + [CONTROL]:
        for prec in ("fp32", "fp16") if m != CONTROL else ("fp32",):
            name = "%s_%s" % (m, prec)
            os.makedirs(os.path.join(repo, name, "1"))
            shutil.copy(os.path.join(models_dir, m + ".onnx"), os.path.join(repo, name, "1", "model.onnx"))
            with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
                f.write('name: "%s"\nbackend: "onnxruntime"\nmax_batch_size: 4\n' % name)
                f.write("instance_group [{ count: 1 kind: KIND_%s }]\n" % kind.upper())
                f.write('parameters { key: "precision" value { string_value: "%s" } }\n' % prec)
            names.append((m, prec, name))
    return names


def infer(srv, model, feeds):
    inputs = [{"name": k, "shape": list(v.shape), "datatype": "FP32", "data": v.ravel().tolist()}
              for k, v in feeds.items()]
    status, _, body = lib.http_call(srv, "POST", "/v2/models/%s/infer" % model,
                                    json.dumps({"inputs": inputs}).encode(), {"Content-Type": "application/json"},
                                    timeout=120)
    if status != 200:
        raise RuntimeError("HTTP %d: %s" % (status, body[:400].decode("utf-8", "replace")))
    return {o["name"]: np.array(o["data"], np.float32).reshape(o["shape"]) for o in json.loads(body)["outputs"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("inferd")
    ap.add_argument("models")
    ap.add_argument("--kind", default="gpu", choices=["gpu", "cpu"])
    a = ap.parse_args()
    repo = tempfile.mkdtemp(prefix="norm_repo_")
    bad = 0
    try:
        names = write_repo(repo, a.models, a.kind)
        srv = lib.ServerProcess(repo, binary=os.path.abspath(a.inferd)).start()
        try:
            rng = np.random.default_rng(7)
            for m, prec, name in names:
                sess = ort.InferenceSession(os.path.join(a.models, m + ".onnx"), providers=["CPUExecutionProvider"])
                feeds = {}
                for i in sess.get_inputs():
                    shape = [3] + [d for d in i.shape[1:]]
                    feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
                want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
                try:
                    got = infer(srv, name, feeds)
                except RuntimeError as e:
                    print("FAIL %s: %s" % (name, e))
                    bad += 1
                    continue
                tol = 1e-4 if prec == "fp32" else 2e-2
                for k, w in want.items():
                    g = got.get(k)
                    if g is None or g.shape != w.shape:
                        print("FAIL %s %s: shape %s, want %s" % (name, k, None if g is None else g.shape, w.shape))
                        bad += 1
                        continue
                    err = float(np.max(np.abs(g - w) / (np.abs(w) + np.mean(np.abs(w)))))
                    ok = err <= tol
                    bad += not ok
                    print("%s %s %s: worst scaled error %.3g (bound %g)" % ("ok  " if ok else "FAIL", name, k, err, tol))
        finally:
            srv.stop()
        host = [l for l in srv.lines if "runs on the host" in l]
        for l in host:
            print("log: " + l.split("] ", 1)[-1][:300])
        norm_host = [l for l in host if "Normalization" in l]
        control = [l for l in host if "DFT" in l]
        if norm_host:
            print("FAIL: %d norm nodes run on the host" % len(norm_host))
            bad += 1
        if a.kind == "gpu" and not control:
            print("FAIL: the control model's DFT was not logged as running on the host")
            bad += 1
        if srv.returncode != 0:
            print("FAIL: inferd exit code %r" % srv.returncode)
            bad += 1
    finally:
        shutil.rmtree(repo, ignore_errors=True)
    print("norm serve check (%s): %s" % (a.kind, "passed" if not bad else "%d FAILED" % bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
