#!/usr/bin/env python3
"""Exports one model per family (families.py) with both torch exporters and records what PyTorch
itself answers, for check_families.py to compare the server with.

For each family and exporter (TorchScript-based dynamo=False at opset 17, dynamo=True at 18):
  OUT/graphs/<name>.<exporter><opset>.onnx   the exported model, weights included
  OUT/ref/<name>.npz                         the feeds (batch 2) and PyTorch's outputs for them
  OUT/export.json                            per graph: exported or why not, dynamic axes, ops
With --strip DIR, a copy of each graph with its large float initializers emptied (export_zoo.strip)
and the dynamo exporter's per-node stack traces dropped (slim) goes to DIR gzipped
(<name>.onnx.gz), the form committed to tests/models/zoo/families/ with export.json for CI (fill.py
refills it; 1.4 MB for all 150 graphs).

The batch axis is dynamic in every export (the example batch is 2: torch.export specialises a
dimension of size 1); token and waveform lengths too where the exporter accepts it. A dynamo
export that refuses the dynamic axes is retried with the batch axis alone, then static; what was
given is recorded.

    python export_families.py --out DIR [--only NAME,...] [--strip DIR] [--device cpu|cuda]
"""

import argparse
import gzip
import json
import os
import sys
import time
import traceback

import numpy as np
import onnx
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import export_zoo  # noqa: E402
import families  # noqa: E402


def _first_line(ex):
    """The reason in one line: torch.onnx's wrapper errors say only which step failed, their cause says why."""
    while ex.__cause__ is not None:
        ex = ex.__cause__
    s = [l for l in str(ex).strip().splitlines() if l.strip()]
    return "%s: %s" % (type(ex).__name__, (s[0] if s else "")[:800])


def _export_ts(m, args, in_names, out_names, dyn_axes, opset, path):
    dyn = {n: {a: "batch" if a == 0 else "%s_%d" % (n, a) for a in dyn_axes.get(n, [0])} for n in in_names}
    for n in out_names:
        dyn[n] = {0: "batch"}
    torch.onnx.export(m, args, path, input_names=in_names, output_names=out_names, opset_version=opset,
                      dynamic_axes=dyn, dynamo=False, do_constant_folding=True)
    return {n: sorted(v) for n, v in dyn.items() if n in in_names}


def _export_dynamo(m, args, in_names, out_names, dyn_axes, opset, path):
    """Tries the dynamic axes asked for, then the batch axis alone, then none."""
    batch = torch.export.Dim("batch", min=1, max=64)
    tries = []
    for axes in (dyn_axes, {n: [0] for n in in_names}, {}):
        if axes not in tries:
            tries.append(axes)
    errors = []
    for axes in tries:
        shapes = []
        for n, a in zip(in_names, args):
            d = {}
            for ax in axes.get(n, []):
                d[ax] = batch if ax == 0 else torch.export.Dim("%s_%d" % (n, ax), min=2, max=4 * a.shape[ax])
            shapes.append(d or None)
        try:
            prog = torch.onnx.export(m, args, input_names=in_names, output_names=out_names, opset_version=opset,
                                     dynamic_shapes=tuple(shapes) if axes else None, dynamo=True)
            prog.optimize()
            prog.save(path, external_data=False)
            return {n: sorted(axes.get(n, [])) for n in in_names}, errors
        except Exception as ex:  # a refused axis: recorded, the next try gives fewer
            errors.append("dynamic %s: %s" % (axes, _first_line(ex)[:240]))
    raise RuntimeError("; ".join(errors))


def _eager_attention(m):
    for mod in m.modules():
        cfg = getattr(mod, "config", None)
        if cfg is not None and hasattr(cfg, "_attn_implementation"):
            cfg._attn_implementation = "eager"


def slim(model):
    """Drops what the dynamo exporter writes for people (each node's stack trace and source names in
    metadata_props, doc strings): 90 % of a stripped tiny graph's bytes, no part of its meaning."""
    graphs = [model.graph] + [a.g for n in model.graph.node for a in n.attribute if a.type == onnx.AttributeProto.GRAPH]
    for g in graphs:
        for n in g.node:
            del n.metadata_props[:]
            n.doc_string = ""
    for f in model.functions:
        for n in f.node:
            del n.metadata_props[:]
            n.doc_string = ""


def export_one(name, out, strip_dir, device):
    torch.manual_seed(families.seed_of(name))
    m, args, in_names, out_names, dyn_axes = families.build(name)
    m = m.to(device)
    args = tuple(a.to(device) for a in args)
    with torch.no_grad():
        want = m(*args)
    want = want if isinstance(want, tuple) else (want,)
    np.savez(os.path.join(out, "ref", name + ".npz"),
             **{"in:" + n: a.cpu().numpy() for n, a in zip(in_names, args)},
             **{"out:" + n: w.float().cpu().numpy() for n, w in zip(out_names, want)})
    report = {}
    for exporter, opset in families.EXPORTERS:
        key = families.graph_name(name, exporter, opset)
        path = os.path.join(out, "graphs", key + ".onnx")
        t0 = time.time()
        try:
            if exporter == "ts":
                axes, notes = _export_ts(m, args, in_names, out_names, dyn_axes, opset, path), []
            else:
                try:
                    axes, notes = _export_dynamo(m, args, in_names, out_names, dyn_axes, opset, path)
                except Exception as ex:
                    if not name.startswith("hf_"):
                        raise
                    # transformers' SDPA attention is what torch.export refuses in some families (a view
                    # of a transposed tensor); their eager attention computes the same and exports
                    first = _first_line(ex)
                    _eager_attention(m)
                    axes, notes = _export_dynamo(m, args, in_names, out_names, dyn_axes, opset, path)
                    notes = ["attn_implementation=sdpa refused, exported with eager attention: " + first] + notes
            model = onnx.load(path)
            ops = sorted({n.op_type for n in model.graph.node} | {n.op_type for f in model.functions for n in f.node})
            r = {"exported": True, "dynamic": axes, "ops": ops, "bytes": os.path.getsize(path),
                 "seconds": round(time.time() - t0, 1)}
            if notes:
                r["refused_dynamic"] = notes
            if strip_dir:
                slim(model)
                export_zoo.strip(model)
                with gzip.GzipFile(os.path.join(strip_dir, key + ".onnx.gz"), "wb", 9, mtime=0) as f:
                    f.write(model.SerializeToString())
                r["stripped_bytes"] = os.path.getsize(os.path.join(strip_dir, key + ".onnx.gz"))
            print("ok   %-45s %8d bytes, dynamic %s" % (key, r["bytes"], axes), flush=True)
        except Exception as ex:  # an exporter that fails is a finding: recorded, the others go on
            r = {"exported": False, "error": _first_line(ex)}
            print("FAIL %-45s %s" % (key, r["error"]), flush=True)
            traceback.print_exc(limit=3, file=sys.stdout)
            if os.path.exists(path):
                os.remove(path)
        report[key] = r
    return report


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--strip", default="", help="also write weight-stripped copies here")
    ap.add_argument("--device", default="cpu", help="where PyTorch's reference runs and the export traces")
    a = ap.parse_args()
    for sub in ("graphs", "ref"):
        os.makedirs(os.path.join(a.out, sub), exist_ok=True)
    if a.strip:
        os.makedirs(a.strip, exist_ok=True)
    names = [n for n in families.FAMILIES if not a.only or n in a.only.split(",")]
    path = os.path.join(a.out, "export.json")
    report = json.load(open(path)) if os.path.exists(path) else {}
    report["_versions"] = {"torch": torch.__version__, "onnx": onnx.__version__}
    try:
        import torchvision
        import transformers
        report["_versions"].update(torchvision=torchvision.__version__, transformers=transformers.__version__)
    except ImportError:
        pass
    for name in names:
        try:
            report.update(export_one(name, a.out, a.strip, a.device))
        except Exception as ex:  # the model itself could not be built or run
            for exporter, opset in families.EXPORTERS:
                report[families.graph_name(name, exporter, opset)] = {"exported": False,
                                                                      "error": "build: " + _first_line(ex)}
            print("FAIL %-45s build: %s" % (name, _first_line(ex)), flush=True)
            traceback.print_exc(limit=3, file=sys.stdout)
        with open(path, "w") as f:
            json.dump(report, f, indent=1, sort_keys=True)
    bad = [k for k, r in report.items() if not k.startswith("_") and not r.get("exported")]
    print("exported %d of %d graphs" % (sum(1 for k, r in report.items() if not k.startswith("_") and r.get("exported")),
                                        sum(1 for k in report if not k.startswith("_"))))
    for k in bad:
        print("  not exported:", k, report[k]["error"])


if __name__ == "__main__":
    main()
