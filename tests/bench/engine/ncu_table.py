#!/usr/bin/env python3
"""Groups ncu's CSV rows (--metrics gpu__time_duration.sum --csv, ncu_kernels.sh) by kernel name: launches
and time per profiled batch, share of the total, largest first. The batches are counted as the launches of
the first kernel profiled (a batch's first node), unless --batches says how many there were.

    ncu_table.py RAW.csv [--batches N] [--title T] [--top 25]
"""

import argparse
import csv
import re


def short(name):
    """The kernel's name without template arguments and parameter lists (cuDNN's and CUTLASS's run long)."""
    n = re.sub(r"\(.*$", "", name)
    depth, out = 0, []
    for ch in n:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    n = "".join(out).strip()
    n = re.sub(r"^void ", "", n)
    return n[:90]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--batches", type=int, default=0)
    ap.add_argument("--title", default="")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    rows = []
    with open(a.csv, newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu's own messages ("==PROF==") are not CSV
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        try:
            ns = float(r["Metric Value"].replace(",", ""))
        except (KeyError, ValueError):
            continue
        rows.append((short(r.get("Kernel Name", "?")), ns))
    by = {}
    for k, ns in rows:
        c = by.setdefault(k, [0, 0.0])
        c[0] += 1
        c[1] += ns
    total = sum(v[1] for v in by.values())
    nb = a.batches or (by[rows[0][0]][0] if rows else 1)
    print("**%s**: %d batches profiled, %d kernel launches and %.1f us of kernel time per batch\n" % (
        a.title, nb, len(rows) // nb, total / nb / 1e3))
    print("| kernel | launches/batch | us/batch | share |")
    print("|---|---:|---:|---:|")
    for k, (n, ns) in sorted(by.items(), key=lambda kv: -kv[1][1])[:a.top]:
        print("| `%s` | %g | %.1f | %.1f%% |" % (k, n / nb, ns / nb / 1e3, 100 * ns / total if total else 0))


if __name__ == "__main__":
    main()
