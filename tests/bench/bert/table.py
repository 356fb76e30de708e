#!/usr/bin/env python3
"""The BERT benchmark's table (tests/bench/bert/run.sh): per batch, inferd's engine (bench_engine, two
slots pipelined, and one slot waited for) against PyTorch's fastest mode for that batch (torch_graph or
torch_compile, pipelined and lone), and the ratios against issue 12's goal (inferd <= 0.9x torch).

    table.py torch.jsonl engine.jsonl [--machine machine.txt]
"""

import argparse
import json

GOAL = 0.9


def read(path):
    rows = []
    with open(path) as f:
        for line in f:
            if line.startswith("{"):
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    pass
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--machine")
    a = ap.parse_args()
    rows = [r for f in a.files for r in read(f)]
    cells, errors = {}, []
    for r in rows:
        key = (r.get("precision", "?"), int(r.get("batch", -1)))
        if "error" in r:
            errors.append("%s %s batch %s: %s" % (r.get("tool"), key[0], key[1], r["error"]))
            continue
        if r.get("us_per_batch") is None:
            continue
        c = cells.setdefault(key, {})
        t = r["tool"]
        if t.startswith("inferd") and r.get("gemm_autotune"):  # bench_engine --gemm-autotune 0,1: both kept
            t += "_tuned"
        c[t] = float(r["us_per_batch"])
        if "lone_us" in r:
            c[t + "_lone"] = float(r["lone_us"])
        if t.startswith("torch") and r.get("mask"):
            c[t + "_mask"] = r["mask"]
    if a.machine:
        print("Machine: " + " / ".join(l.strip() for l in open(a.machine) if l.strip()) + "  ")
    print("BERT-base-shaped encoder (12 layers, hidden 768, 12 heads), sequence %s, us per batch, "
          "pinned host in -> pinned host out\n" % next((r.get("seq") for r in rows if r.get("seq")), "?"))
    print("| precision | batch | torch_graph | torch_compile | torch best | inferd | inferd / best "
          "| torch best lone | inferd 1-slot | 1-slot / best lone |")
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    fmt = lambda v: "-" if v is None else "%.1f" % v  # noqa: E731
    for key in sorted(cells):
        c = cells[key]
        modes = [m for m in ("torch_graph", "torch_compile") if m in c]
        best = min(modes, key=lambda m: c[m]) if modes else None
        lone_modes = [m for m in modes if m + "_lone" in c]
        best_lone = min(lone_modes, key=lambda m: c[m + "_lone"]) if lone_modes else None

        def ratio(x, y):
            if x is None or y is None:
                return "-"
            r = x / y
            return ("**%.2f**" % r) if r > GOAL else "%.2f" % r
        print("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            key[0], key[1], fmt(c.get("torch_graph")), fmt(c.get("torch_compile")), best or "-",
            fmt(c.get("inferd")), ratio(c.get("inferd"), c.get(best)),
            fmt(c.get(best_lone + "_lone")) if best_lone else "-", fmt(c.get("inferd_sync")),
            ratio(c.get("inferd_sync"), c.get(best_lone + "_lone") if best_lone else None)))
    print("\ninferd: bench_engine's two slots (batch n+1 enqueued while n runs); torch pipelined: batches back "
          "to back, one sync at the end. Lone: each batch waited for. Ratios above %.1f (the goal) in bold." % GOAL)
    tuned = [k for k in sorted(cells) if "inferd_tuned" in cells[k]]
    if tuned:
        print("\ncuBLASLt autotuning (bench_engine --gemm-autotune 0,1, same call): us per batch, heuristic's "
              "first answer vs timed choice\n")
        print("| precision | batch | inferd | inferd tuned | tuned / untuned | tuned / torch best | inferd 1-slot "
              "| tuned 1-slot | tuned 1-slot / torch best lone |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for key in tuned:
            c = cells[key]
            modes = [m for m in ("torch_graph", "torch_compile") if m in c]
            best = min((c[m] for m in modes), default=None)
            lone = min((c[m + "_lone"] for m in modes if m + "_lone" in c), default=None)
            div = lambda x, y: "-" if x is None or y is None else "%.2f" % (x / y)  # noqa: E731
            print("| %s | %d | %s | %s | %s | %s | %s | %s | %s |" % (
                key[0], key[1], fmt(c.get("inferd")), fmt(c.get("inferd_tuned")), div(c.get("inferd_tuned"), c.get("inferd")),
                div(c.get("inferd_tuned"), best), fmt(c.get("inferd_sync")), fmt(c.get("inferd_sync_tuned")),
                div(c.get("inferd_sync_tuned"), lone)))
    masks = sorted({"%s: %s" % (k[:-5], v) for c in cells.values() for k, v in c.items() if k.endswith("_mask")})
    if masks:
        print("\nAttention mask (all ones) in torch: " + "; ".join(masks))
    if errors:
        print("\nFailures:\n" + "\n".join("- " + e for e in errors))


if __name__ == "__main__":
    main()
