#!/usr/bin/env python3
"""run.sh's table (issue 37's done-when, one model): per (target, streams) cell, the latency-target
configuration's throughput and client p99 beside the best fixed configuration inferd-tune found for the same
cell (pick.py, cells.json), measured by inferd-tune and again beside the target in run.sh's step 4, and the ratio.

The yardstick is the stricter of the fixed configuration's two figures: the larger throughput among those whose
p99 met the target. PASS when the target's p99 <= T, it had no errors and the ratio >= 0.9; "no fixed
configuration meets it" when inferd-tune measured none that does at those streams (the target's own p99 then
said; the row gives the closed loop's floor, streams / the most throughput any configuration reached: a mean
latency no configuration can go under). Markdown on stdout; exit 1 when a cell fails.
usage: table.py OUT_DIR
"""

import csv
import json
import os
import sys


def last_row(path):
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError:
        return None
    if not rows:
        return None
    r = rows[-1]
    g = lambda k: float(r[k]) if r.get(k) not in (None, "") else None  # noqa: E731
    return {"rps": g("throughput_rps"), "p99_ms": g("p99_us") / 1000, "errors": int(float(r["errors"])),
            "batch": g("server_avg_batch"), "queue_ms": (g("server_queue_us") or 0) / 1000}


def policy(path):
    """The latency policy's /metrics lines of one target model -> {name: value}."""
    out = {}
    try:
        for line in open(path):
            name, _, val = line.rpartition(" ")
            out[name.split("{")[0]] = float(val)
    except (OSError, ValueError):
        pass
    return out


def fmt(x, f="%.0f"):
    return "-" if x is None else f % x


def main():
    out = sys.argv[1]
    with open(os.path.join(out, "cells.json")) as f:
        cj = json.load(f)
    model = cj["model"]
    tc = cj.get("target_config", {})
    tune_best = 0.0
    pts = os.path.join(out, "tune", "points.csv")
    if os.path.exists(pts):
        with open(pts, newline="") as f:
            tune_rows = list(csv.DictReader(f))
        tune_best = max([float(r["throughput_rps"]) for r in tune_rows if r["errors"] == "0"] or [0.0])
    print("%s: latency-target configurations (instances and precision of inferd-tune's winner, %s; max batch %s) "
          "against the best fixed configuration inferd-tune found per cell\n" % (
              model, tc.get("from"), tc.get("max_batch_size")))
    print("| streams | target | target: infer/s | p99 ms | batch | best fixed (inferd-tune) | tune: infer/s, p99 ms "
          "| again: infer/s, p99 ms | ratio | verdict |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    bad = 0
    for c in sorted(cj["cells"], key=lambda c: (c["streams"], c["target_ms"])):
        t, s = c["target_ms"], c["streams"]
        name = "%s_t%s" % (model, ("%g" % t).replace(".", "p"))
        tr = last_row(os.path.join(out, "load", "%s.s%d.csv" % (name, s)))
        if tr is None:
            print("| %d | %g ms | not measured | | | | | | | **FAIL** |" % (s, t))
            bad += 1
            continue
        met = tr["rps"] > 0 and tr["p99_ms"] <= t and tr["errors"] == 0   # rps 0: nothing completed
        if not c["fixed_model"]:
            floor = "closed-loop floor %.1f ms mean" % (s / tune_best * 1000) if tune_best else ""
            print("| %d | %g ms | %.0f | %.2f | %s | none meets it (%s) | | | | target %s |" % (
                s, t, tr["rps"], tr["p99_ms"], fmt(tr["batch"], "%.1f"), floor, "met" if met else "not met"))
            continue
        fr = last_row(os.path.join(out, "load", "%s.s%d.csv" % (c["fixed_model"], s)))
        figs = [c["tune_rps"]] + ([fr["rps"]] if fr and fr["p99_ms"] <= t and fr["errors"] == 0 else [])
        ref = max(figs)
        ratio = tr["rps"] / ref if ref else 0.0
        ok = met and ratio >= 0.9
        bad += not ok
        again = "%.0f, %.2f" % (fr["rps"], fr["p99_ms"]) if fr else "not measured"
        print("| %d | %g ms | %.0f | %.2f | %s | %s: %s | %.0f, %.2f | %s | %.3f | %s |" % (
            s, t, tr["rps"], tr["p99_ms"], fmt(tr["batch"], "%.1f"), c["fixed_model"], c["label"], c["tune_rps"],
            c["tune_p99_ms"], again, ratio, "PASS" if ok else "**FAIL**" + ("" if met else " (p99)")))
    print()
    for c in sorted(cj["cells"], key=lambda c: (c["streams"], c["target_ms"])):
        name = "%s_t%s" % (model, ("%g" % c["target_ms"]).replace(".", "p"))
        p = policy(os.path.join(out, "load", "%s.s%d.policy.txt" % (name, c["streams"])))
        if p:
            obs = p.get("inferd_latency_target_compute_measured_seconds_total")
            pred = p.get("inferd_latency_target_compute_predicted_seconds_total")
            print("- %s after %d streams: goal batch %s, last batch %s, early %s of %s batches, predicted/measured "
                  "compute %s" % (name, c["streams"], fmt(p.get("inferd_latency_target_goal_batch_size")),
                                  fmt(p.get("inferd_latency_target_last_batch_size")),
                                  fmt(p.get("inferd_latency_target_early_batches_total")),
                                  fmt(p.get("inferd_latency_target_batches_total")),
                                  "%.2f" % (pred / obs) if pred and obs else "-"))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
