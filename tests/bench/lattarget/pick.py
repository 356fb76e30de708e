#!/usr/bin/env python3
"""From inferd-tune's points.csv, the best fixed configuration per (target, streams) cell, and the repository of
run.sh's second server: those fixed configurations and one latency-target configuration per target (issue 37).

    pick.py BASE_REPO MODEL TUNE_DIR OUT_REPO CELLS_JSON --targets 5,20,50 --streams 64,512 [--max-batch N]

The best fixed configuration of a cell (target T ms, S streams): among the configurations inferd-tune measured
at concurrency S, the one of most throughput whose p99 <= T without errors, each configuration counted with the
worse of its measurements at S (a finalist's confirmation included: the tool's own rule, so one lucky window
cannot win). Only configurations the search visited compete: what it pruned is not known here.

OUT_REPO gets, beside each other (one server, one load each):
  <MODEL>_f<i>  a fixed configuration some cell chose (inferd-tune's config: modelcfg.apply of its point)
  <MODEL>_t<T>  the latency target T: inferd-tune's best configuration (TUNE_DIR/config.pbtxt: its instances and
                precision), max_batch_size --max-batch (default: the largest measured; the policy picks each
                batch's size below it), no queue delay, no preferred sizes, parameters latency_target_ms T
CELLS_JSON: per cell, the fixed model (or none) with the tune's figures for it.
Needs tritonclient's protos (clients/tune/modelcfg.py).
"""

import argparse
import csv
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "clients"))
from tune import modelcfg  # noqa: E402
from tune.search import Config  # noqa: E402

DIM_TYPES = {"kind": str, "precision": str, "max_batch_size": int, "instances": int, "queue_delay_us": int,
             "preferred": str}


def cells(rows, targets, streams):
    """{(T, S): (config key, throughput, p99 ms, n points)} or None per cell."""
    by = {}   # (config, S) -> [rows]
    for r in rows:
        by.setdefault((r["config"], int(float(r["level"]))), []).append(r)
    out = {}
    for t in targets:
        for s in streams:
            best = None
            for (c, lvl), rs in by.items():
                if lvl != s or any(int(r["errors"]) for r in rs):
                    continue
                thr = min(float(r["throughput_rps"]) for r in rs)
                p99 = max(float(r["p99_ms"]) for r in rs)
                # thr 0: a window where nothing completed (its p99 reads 0), which meets no target
                if thr > 0 and p99 <= t and (best is None or thr > best[1]):
                    best = (c, thr, p99, len(rs))
            out[(t, s)] = best
    return out


def cfg_of(row):
    return Config(**{d: ty(row[d]) for d, ty in DIM_TYPES.items()})


def write(repo, name, src_dir, m):
    d = os.path.join(repo, name)
    os.makedirs(os.path.join(d, "1"), exist_ok=True)
    dst = os.path.join(d, "1", "model.onnx")
    if os.path.lexists(dst):
        os.remove(dst)
    try:
        os.link(os.path.join(src_dir, "1", "model.onnx"), dst)   # inferd refuses symlinks; ResNet-50 is 100 MB
    except OSError:
        shutil.copyfile(os.path.join(src_dir, "1", "model.onnx"), dst)
    m.name = name
    with open(os.path.join(d, "config.pbtxt"), "w") as f:
        f.write(modelcfg.to_pbtxt(m))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("base_repo")
    ap.add_argument("model")
    ap.add_argument("tune_dir")
    ap.add_argument("out_repo")
    ap.add_argument("cells_json")
    ap.add_argument("--targets", default="5,20,50")
    ap.add_argument("--streams", default="64,512")
    ap.add_argument("--max-batch", type=int, default=0)
    a = ap.parse_args()
    targets = [float(x) for x in a.targets.split(",")]
    streams = [int(x) for x in a.streams.split(",")]
    base = modelcfg.read_base(a.base_repo, a.model)
    src_dir = os.path.join(a.base_repo, a.model)
    with open(os.path.join(a.tune_dir, "points.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit("pick.py: %s/points.csv has no points" % a.tune_dir)
    row_of = {r["config"]: r for r in rows}
    os.makedirs(a.out_repo, exist_ok=True)
    chosen = cells(rows, targets, streams)
    fixed = {}   # config key -> model name
    report = []
    for (t, s), best in sorted(chosen.items()):
        cell = {"target_ms": t, "streams": s, "fixed_model": None}
        if best is not None:
            c, thr, p99, n = best
            if c not in fixed:
                fixed[c] = "%s_f%d" % (a.model, len(fixed) + 1)
                write(a.out_repo, fixed[c], src_dir, modelcfg.apply(base, cfg_of(row_of[c])))
            cell.update(fixed_model=fixed[c], label=row_of[c]["label"], tune_rps=thr, tune_p99_ms=p99,
                        tune_points=n)
        report.append(cell)
    # the target configurations: inferd-tune's winner's resources, the policy choosing batch and wait
    best_path = os.path.join(a.tune_dir, "config.pbtxt")
    chosen_rows = [r for r in rows if r["chosen"] == "1"]
    if os.path.exists(best_path):
        with open(best_path) as f:
            tuned = modelcfg.parse_pbtxt(f.read())
        bcfg = cfg_of(chosen_rows[0]) if chosen_rows else None
    else:   # no configuration met the tune's objective: its nearest
        bcfg = cfg_of(max(rows, key=lambda r: float(r["throughput_rps"])))
        tuned = modelcfg.apply(base, bcfg)
    mbs = a.max_batch or max(int(r["max_batch_size"]) for r in rows)
    for t in targets:
        m = modelcfg.mc.ModelConfig()
        m.CopyFrom(tuned)
        m.max_batch_size = mbs
        m.dynamic_batching.max_queue_delay_microseconds = 0
        del m.dynamic_batching.preferred_batch_size[:]
        m.parameters["latency_target_ms"].string_value = "%g" % t
        write(a.out_repo, "%s_t%s" % (a.model, ("%g" % t).replace(".", "p")), src_dir, m)
    with open(a.cells_json, "w") as f:
        json.dump({"model": a.model, "cells": report, "fixed": {v: row_of[k]["label"] for k, v in fixed.items()},
                   "target_config": {"instances": m.instance_group[0].count if m.instance_group else None,
                                     "max_batch_size": mbs,
                                     "from": bcfg.label() if bcfg else None}}, f, indent=1)
    for cell in report:
        print("cell %g ms, %d streams: %s" % (cell["target_ms"], cell["streams"], (
            "%s = %s (tune: %.0f infer/s, p99 %.2f ms)" % (cell["fixed_model"], cell["label"], cell["tune_rps"],
                                                         cell["tune_p99_ms"]))
            if cell["fixed_model"] else "no configuration inferd-tune measured meets it"))
    print("targets: %s, from %s, max_batch_size %d" % (a.targets, bcfg.label() if bcfg else "?", mbs))


if __name__ == "__main__":
    main()
