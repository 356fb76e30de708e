#!/usr/bin/env python3
"""Writes ONNX's backend node tests (onnx.backend.test.case.node.collect_testcases(), the
operator conformance suite shipped with the installed onnx package) as a Triton-style model
repository, one model per case, plus each case's inputs and expected outputs.

    gen_cases.py OUT [--only LIST] [--filter REGEX] [--kind KIND_GPU] [--folded]

OUT/repo/<case>/config.pbtxt and OUT/repo/<case>/1/model.onnx: max_batch_size 0, the graph's
inputs and outputs with the Triton type of their element type and the dims of the graph's
declared shape (-1 where it names none, the data's rank where it declares no shape).
OUT/data/<case>.pkl: {"inputs": [(name, value)], "outputs": [(name, value)]} from the case's
first data set. OUT/cases.json: every case written, with "skip" set to why one cannot be
served over KServe at all (a sequence or optional input or output, an element type with no
Triton type); run.py counts those as failures under that reason.

--only: a file of case names, one a line (# comments allowed): only those are written (CI).
--folded: instead, the cases parameter_inputs.txt names, with those inputs (and every integer input but
the first) folded into initializers, named <case>_folded (what expected_pass_folded.txt is measured on).
"""

import argparse
import json
import os
import pickle
import re
import sys
import warnings

import numpy as np
import onnx
import onnx.numpy_helper
from onnx import TensorProto

# ONNX element type -> Triton's config type. The rest (complex, FP8, INT4/UINT4, FP4...) has no
# Triton type: such a case cannot be sent or answered over KServe.
TRITON_TYPE = {
    TensorProto.FLOAT: "TYPE_FP32",
    TensorProto.DOUBLE: "TYPE_FP64",
    TensorProto.FLOAT16: "TYPE_FP16",
    TensorProto.BFLOAT16: "TYPE_BF16",
    TensorProto.INT8: "TYPE_INT8",
    TensorProto.INT16: "TYPE_INT16",
    TensorProto.INT32: "TYPE_INT32",
    TensorProto.INT64: "TYPE_INT64",
    TensorProto.UINT8: "TYPE_UINT8",
    TensorProto.UINT16: "TYPE_UINT16",
    TensorProto.UINT32: "TYPE_UINT32",
    TensorProto.UINT64: "TYPE_UINT64",
    TensorProto.BOOL: "TYPE_BOOL",
    TensorProto.STRING: "TYPE_STRING",
}


def sanitize(name):
    """A model (directory) name: letters, digits, '_' and '-' only."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)


def collect():
    """Every node test case of the installed onnx (its generators warn about overflow on purpose)."""
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return collect_testcases()


def _unrepresentable(vi):
    """Why graph value vi cannot cross KServe, or None."""
    t = vi.type
    kind = t.WhichOneof("value")
    if kind != "tensor_type":
        return "%s input/output '%s'" % ({"sequence_type": "sequence", "optional_type": "optional",
                                           "map_type": "map", "sparse_tensor_type": "sparse tensor"}
                                          .get(kind, str(kind)), vi.name)
    et = t.tensor_type.elem_type
    if et not in TRITON_TYPE:
        return "element type %s has no Triton type ('%s')" % (TensorProto.DataType.Name(et), vi.name)
    return None


def _dims(vi, data):
    """Config dims of graph value vi: its declared shape (-1 for symbolic, unknown or 0 dims); with no
    declared shape, the rank of data (all -1)."""
    tt = vi.type.tensor_type
    if tt.HasField("shape"):
        # Triton's dims cannot say 0 (an empty tensor): -1 takes it
        return [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else -1 for d in tt.shape.dim]
    if isinstance(data, np.ndarray):
        return [-1] * data.ndim
    return None


def _tensor_block(kind, vi, data):
    dims = _dims(vi, data)
    if dims is None:
        dims = []
    return ("%s {\n  name: %s\n  data_type: %s\n  dims: [ %s ]\n}\n"
            % (kind, json.dumps(vi.name), TRITON_TYPE[vi.type.tensor_type.elem_type],
               ", ".join(str(d) for d in dims)))


def _normalize(v):
    """A data set item as numpy (some cases give TensorProto, as onnx's runner's _normalize_tensor takes)."""
    if isinstance(v, TensorProto):
        return onnx.numpy_helper.to_array(v)
    if isinstance(v, (list, tuple)):
        return [_normalize(x) for x in v]
    return v


def write_case(case, repo, data_dir, kind="KIND_CPU"):
    """Writes one case; returns its cases.json entry."""
    name = sanitize(case.name)
    model = case.model
    inits = {i.name for i in model.graph.initializer}
    g_in = [vi for vi in model.graph.input if vi.name not in inits]
    g_out = list(model.graph.output)
    inputs, outputs = case.data_sets[0]
    inputs, outputs = [_normalize(v) for v in inputs], [_normalize(v) for v in outputs]
    entry = {"case": case.name, "model": name, "rtol": case.rtol, "atol": case.atol,
             "inputs": [vi.name for vi in g_in], "outputs": [vi.name for vi in g_out]}
    # a rank-0 input: the sanitizer builds' server trips over it (see test_onnx_conformance.py)
    entry["scalar_input"] = any(isinstance(d, (np.ndarray, np.generic)) and np.ndim(d) == 0 for d in inputs)
    reasons = [r for r in (_unrepresentable(vi) for vi in g_in + g_out) if r]
    if len(inputs) != len(g_in) or len(outputs) != len(g_out):
        reasons.append("data set has %d inputs / %d outputs for a graph of %d / %d"
                       % (len(inputs), len(outputs), len(g_in), len(g_out)))
    if reasons:
        entry["skip"] = "; ".join(reasons)
    mdir = os.path.join(repo, name)
    os.makedirs(os.path.join(mdir, "1"), exist_ok=True)
    onnx.save(model, os.path.join(mdir, "1", "model.onnx"))
    cfg = ["name: %s\n" % json.dumps(name), 'platform: "onnxruntime_onnx"\n', "max_batch_size: 0\n"]
    if not reasons:
        for vi, d in zip(g_in, inputs):
            cfg.append(_tensor_block("input", vi, d))
        for vi, d in zip(g_out, outputs):
            cfg.append(_tensor_block("output", vi, d))
    cfg.append("instance_group [ { count: 1, kind: %s } ]\n" % kind)
    with open(os.path.join(mdir, "config.pbtxt"), "w") as f:
        f.write("".join(cfg))
    with open(os.path.join(data_dir, name + ".pkl"), "wb") as f:
        pickle.dump({"inputs": list(zip(entry["inputs"], inputs)),
                     "outputs": list(zip(entry["outputs"], outputs))}, f)
    return entry


def fold_inputs(case, names, ints_too=True):
    """The case with the graph inputs called names (and, with ints_too, every integer input but
    the first: axes, pads, starts, shapes) turned into initializers holding its data: the same
    graph with its parameters constant, as exporters usually write them. None when nothing folds."""
    import dataclasses
    m = onnx.ModelProto()
    m.CopyFrom(case.model)
    inits = {i.name for i in m.graph.initializer}
    g_in = [vi for vi in m.graph.input if vi.name not in inits]
    inputs, outputs = case.data_sets[0]
    keep_vi, keep_data, folded = [], [], 0
    for k, (vi, d) in enumerate(zip(g_in, inputs)):
        d = _normalize(d)
        is_int = isinstance(d, (np.ndarray, np.generic)) and np.asarray(d).dtype.kind in "iu"
        if isinstance(d, (np.ndarray, np.generic)) and (vi.name in names or (ints_too and k > 0 and is_int)):
            m.graph.initializer.append(onnx.numpy_helper.from_array(np.asarray(d), vi.name))
            folded += 1
        else:
            keep_vi.append(vi)
            keep_data.append(d)
    if not folded:
        return None
    del m.graph.input[:]
    m.graph.input.extend(keep_vi)
    return dataclasses.replace(case, name=case.name + "_folded", model=m, data_sets=[(keep_data, outputs)])


def read_list(path):
    with open(path) as f:
        return {ln.split("#", 1)[0].strip() for ln in f} - {""}


PARAMETER_INPUTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "parameter_inputs.txt")


def read_parameter_inputs(path=PARAMETER_INPUTS):
    """{case: {input names}} from parameter_inputs.txt (a case name, then its parameter inputs, a line)."""
    out = {}
    with open(path) as f:
        for ln in f:
            words = ln.split("#", 1)[0].split()
            if words:
                out[words[0]] = set(words[1:])
    return out


def folded_cases():
    """The cases parameter_inputs.txt names, folded (fold_inputs), those where something folds."""
    names = read_parameter_inputs()
    folded = (fold_inputs(c, names[c.name]) for c in collect() if c.name in names)
    return [f for f in folded if f is not None]


def generate(out, only=None, pattern=None, kind="KIND_CPU", cases=None):
    """Writes the cases (all, or those named in the set only, or matching pattern; cases: these instead of
    the installed onnx's node tests); returns the entries."""
    repo, data_dir = os.path.join(out, "repo"), os.path.join(out, "data")
    os.makedirs(repo, exist_ok=True)
    os.makedirs(data_dir, exist_ok=True)
    entries = []
    for case in collect() if cases is None else cases:
        if only is not None and case.name not in only:
            continue
        if pattern and not re.search(pattern, case.name):
            continue
        entries.append(write_case(case, repo, data_dir, kind))
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump({"onnx": onnx.__version__, "cases": entries}, f, indent=0)
    return entries


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--only", help="file of case names to write, one a line")
    ap.add_argument("--filter", help="only cases whose name matches this regular expression")
    ap.add_argument("--kind", default="KIND_CPU", choices=["KIND_CPU", "KIND_GPU"],
                    help="the instance kind every case's config asks for (KIND_GPU: the suite on GPU instances)")
    ap.add_argument("--folded", action="store_true",
                    help="the cases whose parameters are graph inputs, those folded into initializers")
    a = ap.parse_args()
    entries = generate(a.out, read_list(a.only) if a.only else None, a.filter, a.kind,
                       folded_cases() if a.folded else None)
    print("onnx %s: %d cases written to %s (%d not servable over KServe)"
          % (onnx.__version__, len(entries), a.out, sum(1 for e in entries if "skip" in e)), file=sys.stderr)


if __name__ == "__main__":
    main()
