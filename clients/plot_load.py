#!/usr/bin/env python3
"""plot_load.py: PNG plots from inferd-load result files (CSV or JSON).

  plot_load.py RUN.csv [RUN2.json ...] --out DIR [--labels a,b] [--level L] [--mode M] [--title T]

Writes into DIR:
  throughput_p99.png   throughput (requests/s) against p99 latency, one line per input file
                       (per file and mode when a file holds several modes); points that saw
                       errors are drawn as crosses.
  cdf_<label>.png      without --level: one latency CDF per level of that file;
  cdf_level_<L>.png    with --level L: one CDF per file at that level.
CDFs come from a JSON file's "cdf" lists ([[latency_us, fraction], ...]); a CSV has none, so
its CDF is drawn through the percentiles it has (p50, p90, p95, p99, p99.9), dashed.

Input: inferd-load's CSV (columns mode, level, throughput_rps, rows_per_s, avg_us, p50_us,
p90_us, p95_us, p99_us, p999_us, errors, server_queue_us, server_compute_input_us,
server_compute_infer_us, server_compute_output_us, server_avg_batch) or its JSON (a list of
objects with those keys plus "cdf"). Labels default to the file names' stems. Needs matplotlib.
"""

import argparse
import csv
import json
import math
import os
import re
import sys

PERCENTILES = (("p50_us", 0.50), ("p90_us", 0.90), ("p95_us", 0.95), ("p99_us", 0.99), ("p999_us", 0.999))
NUMERIC = ("level", "throughput_rps", "rows_per_s", "avg_us", "p50_us", "p90_us", "p95_us", "p99_us", "p999_us",
           "errors", "server_queue_us", "server_compute_input_us", "server_compute_infer_us",
           "server_compute_output_us", "server_avg_batch")


class InputError(Exception):
    pass


def _num(v):
    if v is None or isinstance(v, (int, float)):
        return v
    v = str(v).strip()
    if v == "" or v.lower() in ("nan", "none", "null", "-"):
        return None
    try:
        return float(v)
    except ValueError:
        return v


def load_rows(path):
    """-> list of dicts with numeric fields as floats (None where missing) and "cdf" (list or None)."""
    with open(path, newline="") as f:
        text = f.read()
    rows = None
    if path.lower().endswith(".json") or text.lstrip()[:1] in ("[", "{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise InputError("%s: not valid JSON: %s" % (path, e))
        if isinstance(data, dict):  # tolerate {"results": [...]} wrappers
            data = next((v for v in data.values() if isinstance(v, list)), None)
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise InputError("%s: expected a JSON list of result objects" % path)
        rows = [dict(r) for r in data]
    else:
        rows = list(csv.DictReader(text.splitlines()))
    out = []
    for i, r in enumerate(rows):
        r = {k.strip(): v for k, v in r.items() if k is not None}
        for k in NUMERIC:
            r[k] = _num(r.get(k))
        for k in ("level", "throughput_rps", "p99_us"):
            if not isinstance(r[k], float) and not isinstance(r[k], int):
                raise InputError("%s: row %d has no numeric '%s'" % (path, i + 1, k))
        r["mode"] = str(r.get("mode") or "")
        cdf = r.get("cdf")
        if cdf is not None:
            try:
                cdf = sorted((float(p[0]), float(p[1])) for p in cdf)
            except (TypeError, ValueError, IndexError):
                raise InputError("%s: row %d: 'cdf' must be a list of [latency_us, fraction]" % (path, i + 1))
        r["cdf"] = cdf or None
        out.append(r)
    if not out:
        raise InputError("%s: no result rows" % path)
    return out


def level_text(v):
    return ("%d" % v) if float(v).is_integer() else ("%g" % v)


def safe_name(s):
    return re.sub(r"[^A-Za-z0-9._-]+", "_", s).strip("_") or "run"


def cdf_points(r):
    """(xs, ys, exact): the row's CDF, or its percentiles when it has none."""
    if r["cdf"]:
        return [p[0] for p in r["cdf"]], [p[1] for p in r["cdf"]], True
    pts = [(r[k], q) for k, q in PERCENTILES if isinstance(r.get(k), (int, float)) and r[k] > 0]
    pts.sort()
    return [p[0] for p in pts], [p[1] for p in pts], False


def plot_throughput(runs, out_dir, title, plt):
    fig, ax = plt.subplots(figsize=(8, 5))
    for label, rows in runs:
        modes = sorted({r["mode"] for r in rows})
        for mode in modes:
            pts = sorted((r for r in rows if r["mode"] == mode), key=lambda r: r["level"])
            name = label if len(modes) == 1 else "%s (%s)" % (label, mode or "?")
            xs = [r["throughput_rps"] for r in pts]
            ys = [r["p99_us"] / 1000.0 for r in pts]
            (line,) = ax.plot(xs, ys, marker="o", label=name)
            bad = [(x, y) for x, y, r in zip(xs, ys, pts) if (r.get("errors") or 0) > 0]
            if bad:
                ax.scatter([b[0] for b in bad], [b[1] for b in bad], marker="x", s=80, color=line.get_color(),
                           zorder=3)
            for x, y, r in zip(xs, ys, pts):
                ax.annotate(level_text(r["level"]), (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7,
                            color=line.get_color())
    ax.set_xlabel("throughput (requests/s)")
    ax.set_ylabel("p99 latency (ms)")
    ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(title or "throughput vs p99 latency (labels: load level; x: errors)")
    ax.legend()
    fig.tight_layout()
    path = os.path.join(out_dir, "throughput_p99.png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _cdf_axes(ax, title):
    ax.set_xscale("log")
    ax.set_xlabel("latency (ms)")
    ax.set_ylabel("fraction of requests")
    ax.set_ylim(0, 1.01)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(title)
    ax.legend(fontsize=8)


def plot_cdfs_per_file(label, rows, out_dir, title, plt, fname=None):
    fig, ax = plt.subplots(figsize=(8, 5))
    drawn = 0
    modes = {r["mode"] for r in rows}
    for r in sorted(rows, key=lambda r: (r["mode"], r["level"])):
        xs, ys, exact = cdf_points(r)
        if not xs:
            continue
        name = "level %s" % level_text(r["level"]) + ("" if len(modes) == 1 else " (%s)" % r["mode"])
        name += "" if exact else ", percentiles"
        ax.plot([x / 1000.0 for x in xs], ys, linestyle="-" if exact else "--", marker=None if exact else "o",
                label=name)
        drawn += 1
    if not drawn:
        plt.close(fig)
        return None
    _cdf_axes(ax, title or "latency CDF: %s" % label)
    fig.tight_layout()
    path = os.path.join(out_dir, "cdf_%s.png" % (fname or safe_name(label)))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_cdfs_at_level(runs, level, mode, out_dir, title, plt):
    fig, ax = plt.subplots(figsize=(8, 5))
    drawn = 0
    for label, rows in runs:
        for r in rows:
            if not math.isclose(r["level"], level) or (mode is not None and r["mode"] != mode):
                continue
            xs, ys, exact = cdf_points(r)
            if not xs:
                continue
            modes = {x["mode"] for x in rows}
            name = label if len(modes) == 1 else "%s (%s)" % (label, r["mode"])
            name += "" if exact else ", percentiles"
            ax.plot([x / 1000.0 for x in xs], ys, linestyle="-" if exact else "--", marker=None if exact else "o",
                    label=name)
            drawn += 1
    if not drawn:
        plt.close(fig)
        raise InputError("no result at level %s in any input" % level_text(level))
    _cdf_axes(ax, title or "latency CDF at level %s" % level_text(level))
    fig.tight_layout()
    path = os.path.join(out_dir, "cdf_level_%s.png" % safe_name(level_text(level)))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("files", nargs="+", help="inferd-load result files (.csv or .json)")
    ap.add_argument("--out", required=True, help="directory for the PNGs (created if missing)")
    ap.add_argument("--labels", help="comma-separated labels, one per file (default: file stems)")
    ap.add_argument("--level", type=float, help="draw one CDF per file at this load level instead of per level")
    ap.add_argument("--mode", help="with --level: only rows of this mode")
    ap.add_argument("--title", help="title for every plot")
    args = ap.parse_args(argv)

    labels = [os.path.splitext(os.path.basename(f))[0] for f in args.files]
    if args.labels is not None:
        labels = [s.strip() for s in args.labels.split(",")]
        if len(labels) != len(args.files) or not all(labels):
            ap.error("--labels needs %d non-empty names, one per file" % len(args.files))

    try:
        runs = [(label, load_rows(f)) for label, f in zip(labels, args.files)]
    except (OSError, InputError) as e:
        print("plot_load: %s" % e, file=sys.stderr)
        return 1

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(args.out, exist_ok=True)
    written = [plot_throughput(runs, args.out, args.title, plt)]
    try:
        if args.level is not None:
            written.append(plot_cdfs_at_level(runs, args.level, args.mode, args.out, args.title, plt))
        else:
            used = set()
            for label, rows in runs:
                fname, k = safe_name(label), 2
                while fname in used:  # two files with the same stem
                    fname, k = "%s_%d" % (safe_name(label), k), k + 1
                used.add(fname)
                p = plot_cdfs_per_file(label, rows, args.out, args.title, plt, fname)
                if p:
                    written.append(p)
    except InputError as e:
        print("plot_load: %s" % e, file=sys.stderr)
        return 1
    for p in written:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
