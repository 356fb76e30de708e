#!/usr/bin/env python3
"""Reads run.sh's CSVs (OUT/load/<model>.s<streams>.csv, inferd-load's columns) and prints, per model, stream
count and target: the target configuration's throughput and client p99, the best fixed max_queue_delay whose p99
meets the same target, and their ratio; PASS when the target's p99 meets it and the ratio is >= 0.9 (issue 37's
bar), "no fixed delay meets it" when none does. Exit status 1 when any comparison fails.
usage: delays_table.py OUT_DIR (delays.sh's)
"""
import csv
import glob
import os
import re
import sys


def read(out):
    rows = {}  # (base, kind, value, streams) -> (rps, p99_us, errors)
    for path in glob.glob(os.path.join(out, "load", "*.csv")):
        m = re.match(r"(.+)_([dt])([0-9p]+)\.s(\d+)\.csv$", os.path.basename(path))
        if not m:
            continue
        with open(path) as f:
            r = list(csv.DictReader(f))
        if not r:
            continue
        last = r[-1]
        val = float(m.group(3).replace("p", "."))
        rows[(m.group(1), m.group(2), val, int(m.group(4)))] = (float(last["throughput_rps"]), float(last["p99_us"]),
                                                                int(last["errors"]))
    return rows


def main():
    out = sys.argv[1]
    rows = read(out)
    bad = 0
    print("%-8s %7s %8s | %12s %10s | %10s %12s %10s | %6s %s" % (
        "model", "streams", "target", "target rps", "p99 ms", "best delay", "fixed rps", "p99 ms", "ratio", "verdict"))
    keys = sorted({(b, v, s) for (b, k, v, s) in rows if k == "t"})
    for base, target, streams in keys:
        rps, p99, errs = rows[(base, "t", target, streams)]
        fixed = [(v, r) for (b, k, v, s), r in rows.items() if b == base and k == "d" and s == streams]
        meeting = [(v, r) for v, r in fixed if r[1] <= target * 1000 and r[2] == 0]
        if not meeting:
            verdict = "no fixed delay meets it" + ("" if p99 > target * 1000 else " (the target does)")
            print("%-8s %7d %6g ms | %12.0f %10.2f | %10s %12s %10s | %6s %s" % (
                base, streams, target, rps, p99 / 1000, "-", "-", "-", "-", verdict))
            continue
        dv, (frps, fp99, _) = max(meeting, key=lambda x: x[1][0])
        ratio = rps / frps if frps else 0
        ok = p99 <= target * 1000 and ratio >= 0.9 and errs == 0
        bad += not ok
        print("%-8s %7d %6g ms | %12.0f %10.2f | %8g us %12.0f %10.2f | %6.3f %s" % (
            base, streams, target, rps, p99 / 1000, dv, frps, fp99 / 1000, ratio, "PASS" if ok else "FAIL"))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
