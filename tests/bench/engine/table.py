#!/usr/bin/env python3
"""Markdown table of engine.jsonl (bench_engine + bench_torch.py lines).

    table.py OUT_DIR/engine.jsonl [--gpu NAME] [--failures FILE]

Rows (model, precision, batch); columns: inferd us (bench_engine, graphs=1 or
unspecified), inferd no-graph us (only when bench_engine ran with --graphs 0),
torch eager us, torch graph us, and inferd / torch graph; ratios above 0.9 are
marked **bold** + "!". Lines with an "error" field and the lines of --failures
are listed under the table. The GPU name comes from --gpu, else nvidia-smi,
else torch, else the "gpu" field of the torch lines.
"""

import argparse
import datetime
import json
import os
import subprocess
import sys

MARK = 0.9


def norm_model(m):
    return os.path.splitext(os.path.basename(str(m)))[0]


def gpu_name(arg, rows):
    if arg:
        return arg
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20).stdout.strip()
        if out:
            return "; ".join(sorted(set(l.strip() for l in out.splitlines() if l.strip())))
    except Exception:
        pass
    for r in rows:
        if r.get("gpu"):
            return r["gpu"]
    try:
        import torch
        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    except Exception:
        pass
    return "unknown GPU"


def fmt(v):
    if v is None:
        return "-"
    return "%.1f" % v if v >= 10 else "%.2f" % v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("jsonl")
    ap.add_argument("--gpu")
    ap.add_argument("--failures", help="text file, one failure per line")
    a = ap.parse_args()

    rows, errors, bad = [], [], 0
    with open(a.jsonl) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                rows.append(json.loads(line))
            except ValueError:
                bad += 1
    cells = {}  # (model, precision, batch) -> {column: us}
    notes = set()
    for r in rows:
        tool = r.get("tool", "?")
        key = (norm_model(r.get("model", "?")), r.get("precision", "?"), int(r.get("batch", -1) or -1))
        if "error" in r:
            errors.append("%s %s %s batch %s: %s" % (tool, key[0], key[1], key[2], r["error"]))
            continue
        us = r.get("us_per_batch")
        if us is None:
            continue
        if tool in ("inferd", "inferd_sync"):
            col = tool + ("_nograph" if int(r.get("graphs", 1)) == 0 else "")
        elif tool in ("torch_eager", "torch_graph"):
            col = tool
            if tool == "torch_graph" and r.get("copies_in_graph") is False:
                notes.add("torch graph: H2D/D2H copies could not be captured; they ran eagerly around the replay")
            if r.get("warning"):
                notes.add("%s %s %s batch %d: %s" % (tool, *key, r["warning"]))
        else:
            col = tool
        cells.setdefault(key, {})[col] = float(us)

    have_nograph = any("inferd_nograph" in c for c in cells.values())
    hdr = ["model", "precision", "batch", "inferd us"]
    if have_nograph:
        hdr.append("inferd no-graph us")
    hdr += ["inferd 1-slot us", "torch eager us", "torch graph us", "inferd / torch graph",
            "inferd 1-slot / torch graph"]

    print("## inferd engine vs PyTorch: one batch, pinned fp32 host in -> H2D -> forward -> D2H -> pinned fp32 out")
    print()
    print("GPU: %s  " % gpu_name(a.gpu, rows))
    print("Date: %s" % datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"))
    print()
    print("| " + " | ".join(hdr) + " |")
    print("|" + "|".join(["---"] * 3 + ["---:"] * (len(hdr) - 3)) + "|")
    order = {"fp32": 0, "fp16": 1}
    for key in sorted(cells, key=lambda k: (k[0], order.get(k[1], 9), k[1], k[2])):
        c = cells[key]
        line = [key[0], key[1], str(key[2]), fmt(c.get("inferd"))]
        if have_nograph:
            line.append(fmt(c.get("inferd_nograph")))
        line += [fmt(c.get("inferd_sync")), fmt(c.get("torch_eager")), fmt(c.get("torch_graph"))]
        for col in ("inferd", "inferd_sync"):
            if c.get(col) is not None and c.get("torch_graph"):
                ratio = c[col] / c["torch_graph"]
                line.append("**%.2f** !" % ratio if ratio > MARK else "%.2f" % ratio)
            else:
                line.append("-")
        print("| " + " | ".join(line) + " |")
    print()
    print("us = mean microseconds per batch. torch: back to back on one stream, one sync at the end. "
          "inferd: its serving configuration, two stream slots (batch n+1 staged and enqueued while "
          "batch n runs, each finished in order); inferd 1-slot: each batch waited for before the next "
          "is staged. Ratios above %.1f are marked." % MARK)
    failures = []
    if a.failures and os.path.exists(a.failures):
        with open(a.failures) as f:
            failures = [l.rstrip() for l in f if l.strip()]
    if bad:
        failures.append("%d unparsable JSON line(s) in %s" % (bad, a.jsonl))
    if failures or errors or notes:
        print()
        print("Failures and notes:")
        for l in failures + errors + sorted(notes):
            print("- " + l)
    if not rows:
        print("\n(no results in %s)" % a.jsonl)
        sys.exit(1)


if __name__ == "__main__":
    main()
