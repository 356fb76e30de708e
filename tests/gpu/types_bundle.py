"""Writes what tests/gpu/types_check.py needs on a GPU machine (issue 33): the models of
tests/integration/test_types.py (Triton's `simple`, `simple_int8` and every (op, type) pair) with
KIND_GPU configs, and cases.json: each model's input bytes and the expected output bytes, computed
here with onnxruntime (numpy where it has no kernel for the pair), since the GPU machine may have
neither. Usage: python tests/gpu/types_bundle.py OUT_DIR  (writes OUT_DIR/repo, OUT_DIR/cases.json)."""

import base64
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
import test_types as T  # noqa: E402

WIRE = {"int8": "INT8", "int16": "INT16", "int32": "INT32", "int64": "INT64", "uint8": "UINT8",
        "uint16": "UINT16", "uint32": "UINT32", "uint64": "UINT64", "float16": "FP16", "float32": "FP32",
        "float64": "FP64", "bool": "BOOL"}


def tensor(name, arr):
    arr = np.ascontiguousarray(arr)
    return {"name": name, "datatype": WIRE[arr.dtype.name], "shape": list(arr.shape),
            "b64": base64.b64encode(arr.tobytes()).decode()}


def main(out):
    repo = os.path.join(out, "repo")
    rng = np.random.default_rng(1)
    cases = []
    for name, (np_t, ot, cfg) in T.SIMPLE.items():
        T.write_model(repo, name, T.simple_model(None, ot), T.simple_config(name, cfg, T.GPU_KIND))
        info = np.iinfo(np_t)
        a = np.arange(32, dtype=np_t).reshape(2, 16)
        b = np.full((2, 16), info.max, np_t)
        b[1] = info.min
        want = T.ort_run(T.simple_model(np_t, ot), {"INPUT0": a, "INPUT1": b})
        cases.append({"model": name, "must": True, "inputs": [tensor("INPUT0", a), tensor("INPUT1", b)],
                      "outputs": [tensor("OUTPUT0", want[0]), tensor("OUTPUT1", want[1])]})
    for op, tname in T.PAIRS:
        t = np.dtype(tname)
        name = T.grid_name(op, tname)
        m = T.grid_model(op, t)
        T.write_model(repo, name, m, T.plain_config(name, m, T.GPU_KIND))
        feeds = T.grid_inputs(op, t, rng)
        want = T.ort_run(m, feeds)
        want = want[0] if want is not None else T.numpy_ref(op, feeds)
        cases.append({"model": name, "must": op in T.GPU_MUST, "inputs": [tensor(k, v) for k, v in feeds.items()],
                      "outputs": [tensor("Y", np.asarray(want))]})
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(cases, f)
    print("%d cases in %s" % (len(cases), out))


if __name__ == "__main__":
    main(sys.argv[1])
