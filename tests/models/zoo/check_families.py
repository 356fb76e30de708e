#!/usr/bin/env python3
"""Serves every exported family graph (export_families.py's, or the stripped ones committed under
tests/models/zoo/families/, refilled by fill.py) through the real inferd WITHOUT config.pbtxt and
compares its answers with onnxruntime (CPU) and, where export_families.py recorded them, with
PyTorch's own outputs.

    python check_families.py --graphs DIR [--ref DIR] [--inferd BIN] [--kind none|cpu|gpu]
                             [--only NAME,...] [--json OUT.json] [--table OUT.md]

--kind none (default): the repository holds no config.pbtxt at all; the server completes each
  model from its graph and picks the instance kind itself (KIND_AUTO: the GPU where one is visible).
--kind cpu / gpu: each model's config.pbtxt says only `instance_group [{ kind: KIND_CPU|KIND_GPU }]`,
  which is completed like a missing one (Triton's onnxruntime backend does the same: it lists no
  inputs/outputs), so the same graphs run on the CPU and on the GPU of one machine.

Each model gets one request of batch 2 (the export example: PyTorch's outputs are for it) and, when
auto-complete gave it a batch dimension, one of batch 1 (the first row) compared with onnxruntime.
Tolerance: normwise rtol 1e-4 (families.compare, the rule of the zoo tests' lib.assert_close:
|a - e| <= rtol |e| + rtol max|e|), against onnxruntime and against PyTorch, CPU and GPU alike
(GPU instances run FP32 with TF32 off by default). Needs numpy, onnx, onnxruntime; no torch, no
pytest, no tritonclient (requests go over KServe v2 REST with the binary tensor extension).
Exit status 0 when every exported graph loads and matches, 1 otherwise.
"""

import argparse
import gzip
import json
import os
import re
import shutil
import sys
import tempfile
import time

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration"))
import families  # noqa: E402
import fill  # noqa: E402
import inferd_testlib as lib  # noqa: E402

RTOL = 1e-4
WIRE = {1: "FP32", 10: "FP16", 11: "FP64", 6: "INT32", 7: "INT64", 9: "BOOL", 2: "UINT8"}
NP_WIRE = {"FP32": np.float32, "FP16": np.float16, "FP64": np.float64, "INT32": np.int32, "INT64": np.int64,
           "BOOL": np.bool_, "UINT8": np.uint8}


def model_name(graph):
    return graph.replace(".", "_")


def io_spec(m):
    inits = {t.name for t in m.graph.initializer}

    def io(v):
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in v.type.tensor_type.shape.dim]
        return {"name": v.name, "elem": v.type.tensor_type.elem_type, "dims": dims}
    return [io(v) for v in m.graph.input if v.name not in inits], [io(v) for v in m.graph.output]


def list_graphs(folder):
    """{graph name: path} of the .onnx and .onnx.gz files in folder (the committed ones are gzipped)."""
    out = {}
    for f in sorted(os.listdir(folder)):
        for ext in (".onnx", ".onnx.gz"):
            if f.endswith(ext):
                out[f[:-len(ext)]] = os.path.join(folder, f)
    return out


def load(path):
    if path.endswith(".gz"):
        with gzip.open(path, "rb") as f:
            return onnx.load_model_from_string(f.read())
    return onnx.load(path)


def write_repo(repo, graphs, kind):
    """graphs: {graph name: path}. Stripped graphs are refilled with seeded weights (fill.py)."""
    spec = {}
    for g, path in graphs.items():
        m = load(path)
        if any(t.doc_string == fill.STRIPPED for t in m.graph.initializer):
            m = fill.fill_model(m, fill.seed_of(g))
        d = os.path.join(repo, model_name(g), "1")
        os.makedirs(d, exist_ok=True)
        onnx.save(m, os.path.join(d, "model.onnx"))
        if kind != "none":
            with open(os.path.join(repo, model_name(g), "config.pbtxt"), "w") as f:
                f.write("instance_group [{ kind: KIND_%s }]\n" % kind.upper())
        ins, outs = io_spec(m)
        spec[g] = {"inputs": ins, "outputs": outs, "file": os.path.join(d, "model.onnx")}
    return spec


def rest_infer(srv, model, feeds):
    """{output name: array} of one KServe v2 REST request with the binary tensor extension; raises
    RuntimeError with the server's message on an error status."""
    inputs, blobs = [], []
    for k, v in feeds.items():
        wire = [w for w, t in NP_WIRE.items() if np.dtype(t) == v.dtype][0]
        b = np.ascontiguousarray(v).tobytes()
        inputs.append({"name": k, "shape": list(v.shape), "datatype": wire, "parameters": {"binary_data_size": len(b)}})
        blobs.append(b)
    head = json.dumps({"inputs": inputs, "parameters": {"binary_data_output": True}}).encode()
    status, headers, body = lib.http_call(srv, "POST", "/v2/models/%s/infer" % model, head + b"".join(blobs),
                                          {"Inference-Header-Content-Length": str(len(head)),
                                           "Content-Type": "application/octet-stream"}, timeout=600)
    if status != 200:
        raise RuntimeError("HTTP %d: %s" % (status, body[:500].decode("utf-8", "replace")))
    hl = int({k.lower(): v for k, v in headers.items()}.get("inference-header-content-length", len(body)))
    j = json.loads(body[:hl])
    out, off = {}, hl
    for o in j["outputs"]:
        dt = np.dtype(NP_WIRE[o["datatype"]])
        if "binary_data_size" in o.get("parameters", {}):
            n = o["parameters"]["binary_data_size"]
            out[o["name"]] = np.frombuffer(body[off:off + n], dt).reshape(o["shape"])
            off += n
        else:
            out[o["name"]] = np.array(o["data"], dt).reshape(o["shape"])
    return out


def load_error(srv, model):
    """The server's load error lines for model (its stderr), joined and shortened."""
    lines = [l for l in srv.lines if model in l and re.search(r"fail|error|unsupported", l, re.I)]
    text = " | ".join(l.split("] ", 1)[-1] for l in lines[-3:])
    return text[:800] or "not ready (no load error logged)"


def check_one(srv, g, s, ref, sessions):
    """The result row of one graph: loads, matches onnxruntime, matches PyTorch, why not."""
    name = model_name(g)
    r = {"graph": g}
    st, _, _ = lib.http_call(srv, "GET", "/v2/models/%s/ready" % name)
    r["loads"] = st == 200
    if not r["loads"]:
        r["why"] = load_error(srv, name)
        return r
    _, _, body = lib.http_call(srv, "GET", "/v2/models/%s/config" % name)
    cfg = json.loads(body)
    r["max_batch_size"] = int(cfg.get("max_batch_size", 0))
    r["instance_kind"] = [g_.get("kind", "") for g_ in cfg.get("instance_group", [])]
    in_names = [i["name"] for i in s["inputs"]]
    rng = np.random.default_rng(fill.seed_of(g))
    if ref is not None and all("in:" + n in ref for n in in_names):
        feeds = {n: ref["in:" + n].astype(families.np_of_elem(i["elem"])) for n, i in zip(in_names, s["inputs"])}
    else:
        feeds = families.feeds(s["inputs"], rng, 2, families.dynamic_length(g.split(".")[0]))
    sess = lib.ort_session(sessions, s["file"])
    out_names = [o.name for o in sess.get_outputs()]
    problems = []
    batches = [("batch 2", feeds)]
    if r["max_batch_size"] >= 1:
        batches.append(("batch 1", {k: v[:1] for k, v in feeds.items()}))
    r["ort"] = True
    r["torch"] = None
    t0 = time.time()
    for what, f in batches:
        try:
            got = rest_infer(srv, name, f)
        except Exception as ex:  # a failed request is this model's finding
            problems.append("%s: request failed: %s" % (what, str(ex)[:400]))
            r["ort"] = False
            continue
        want = dict(zip(out_names, sess.run(None, f)))
        if sorted(got) != sorted(want):
            problems.append("%s: outputs %s, onnxruntime %s" % (what, sorted(got), sorted(want)))
            r["ort"] = False
            continue
        for k in want:
            msg = families.compare(got[k], want[k], RTOL)
            if msg:
                problems.append("%s %s vs onnxruntime: %s" % (what, k, msg))
                r["ort"] = False
        if what == "batch 2" and ref is not None and f is feeds and any(k.startswith("out:") for k in ref):
            r["torch"] = True
            for k in want:
                if "out:" + k not in ref:
                    continue
                msg = families.compare(got[k].astype(np.float32), ref["out:" + k], RTOL)
                if msg:
                    problems.append("%s %s vs PyTorch: %s" % (what, k, msg))
                    r["torch"] = False
                    o_msg = families.compare(want[k].astype(np.float32), ref["out:" + k], RTOL)
                    if o_msg:
                        problems.append("(onnxruntime vs PyTorch too: %s)" % o_msg)
    r["seconds"] = round(time.time() - t0, 2)
    if problems:
        r["why"] = "; ".join(problems)[:1200]
    return r


def run(graphs, ref_dir, kind, binary=None, work=None, extra_args=()):
    """Serves graphs ({graph name: path}) in one server; returns {graph: result row}. The server may take
    $INFERD_START_TIMEOUT s (the test library's, 90 by default) to load them all."""
    repo = tempfile.mkdtemp(prefix="families_repo_", dir=work)
    try:
        spec = write_repo(repo, graphs, kind)
        srv = lib.ServerProcess(repo, ["--strict-readiness", "false"] + list(extra_args), binary=binary)
        t0 = time.monotonic()
        srv.start()
        print("%d graph(s) loaded on %s instances in %.1f s" % (len(graphs), kind, time.monotonic() - t0), flush=True)
        sessions, rows = {}, {}
        try:
            for g in sorted(graphs):
                ref_path = os.path.join(ref_dir, g.split(".")[0] + ".npz") if ref_dir else ""
                ref = dict(np.load(ref_path)) if ref_path and os.path.exists(ref_path) else None
                rows[g] = check_one(srv, g, spec[g], ref, sessions)
                r = rows[g]
                print("%-50s loads=%s ort=%s torch=%s %s" % (g, r["loads"], r.get("ort"), r.get("torch"),
                                                            r.get("why", "")[:300]), flush=True)
        finally:
            srv.stop()
            bad = srv.sanitizer_lines()
            if srv.returncode != 0 or bad:
                rows["_server"] = {"exit": srv.returncode, "sanitizer": bad[:5], "tail": srv.stderr_tail(20)}
        return rows
    finally:
        shutil.rmtree(repo, ignore_errors=True)


def table(rows, export=None):
    """Markdown: one line per family, a column group per exporter."""
    export = export or {}
    fams = sorted({g.split(".")[0] for g in list(rows) + list(export) if not g.startswith("_")},
                  key=lambda n: list(families.FAMILIES).index(n) if n in families.FAMILIES else 999)
    head = ["family"]
    for e, o in families.EXPORTERS:
        head.append("%s%d" % (e, o))
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    notes = []
    for f in fams:
        cells = [f]
        for e, o in families.EXPORTERS:
            g = families.graph_name(f, e, o)
            x, r = export.get(g), rows.get(g)
            if x is not None and not x.get("exported"):
                cells.append("not exported")
                notes.append("%s: export: %s" % (g, x.get("error", "")))
            elif r is None:
                cells.append("-")
                continue
            elif not r["loads"]:
                cells.append("exported, **does not load**")
                notes.append("%s: %s" % (g, r.get("why", "")))
            else:
                t = {True: "matches PyTorch", False: "**differs from PyTorch**", None: "PyTorch not run"}[r.get("torch")]
                o_ = "matches onnxruntime" if r.get("ort") else "**differs from onnxruntime**"
                fixed = x is not None and not any(0 in a for a in x.get("dynamic", {}).values())
                cells.append("loads, %s, %s%s" % (o_, t, " (batch fixed by the exporter)" if fixed else ""))
                if x is not None and x.get("refused_dynamic"):
                    notes.append("%s: export: %s" % (g, "; ".join(x["refused_dynamic"])[:400]))
                if r.get("why"):
                    notes.append("%s: %s" % (g, r["why"]))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + ("\n\n" + "\n".join("- " + n for n in notes) if notes else "") + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--graphs", required=True, help="folder of <family>.<exporter><opset>.onnx")
    ap.add_argument("--ref", default="", help="export_families.py's ref/ folder (PyTorch's outputs)")
    ap.add_argument("--export-json", default="", help="export_families.py's export.json, for the table")
    ap.add_argument("--inferd", default=None, help="the inferd binary (default: build/bin/inferd, $INFERD_BIN)")
    ap.add_argument("--kind", default="none", choices=["none", "cpu", "gpu"])
    ap.add_argument("--only", default="")
    ap.add_argument("--json", default="")
    ap.add_argument("--table", default="")
    a = ap.parse_args()
    graphs = list_graphs(a.graphs)
    if a.only:
        want = a.only.split(",")
        graphs = {g: p for g, p in graphs.items() if g in want or g.split(".")[0] in want}
    rows = run(graphs, a.ref, a.kind, a.inferd)
    export = json.load(open(a.export_json)) if a.export_json else {}
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"kind": a.kind, "rtol": RTOL, "rows": rows}, f, indent=1, sort_keys=True)
    t = table(rows, export)
    print(t)
    if a.table:
        with open(a.table, "w") as f:
            f.write(t)
    ok = [g for g, r in rows.items() if not g.startswith("_") and r["loads"] and r.get("ort") and r.get("torch") is not False]
    print("%d of %d graphs load and match (kind %s)" % (len(ok), len([g for g in rows if not g.startswith("_")]), a.kind))
    if "_server" in rows:
        print("server exit:", rows["_server"])
    return 0 if len(ok) == len([g for g in rows if not g.startswith("_")]) and "_server" not in rows else 1


if __name__ == "__main__":
    sys.exit(main())
