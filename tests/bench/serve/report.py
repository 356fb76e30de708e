#!/usr/bin/env python3
"""Tables and goal ratios of tests/bench/serve/run.sh's results (markdown on stdout).
Merges each tag's per-level CSVs (load/TAG.cN.csv) into load/TAG.csv for plot_load.py."""
import csv
import glob
import json
import os
import re
import sys


def merged(out):
    tags = {}
    for f in glob.glob(os.path.join(out, "load", "*.c*.csv")):
        tag = re.sub(r"\.c\d+\.csv$", "", os.path.basename(f))
        with open(f) as fh:
            tags.setdefault(tag, []).extend(csv.DictReader(fh))
    for tag, rows in tags.items():
        rows.sort(key=lambda r: float(r["level"]))
        with open(os.path.join(out, "load", tag + ".csv"), "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0].keys()))
            w.writeheader()
            w.writerows(rows)
    return tags


def num(r, k):
    try:
        return float(r[k])
    except (KeyError, TypeError, ValueError):
        return None


def metric(path, name, **labels):
    total, found = 0.0, False
    try:
        for line in open(path):
            m = re.match(r'^([A-Za-z_:][A-Za-z0-9_:]*)(\{([^}]*)\})?\s+(\S+)', line)
            if not m or m.group(1) != name:
                continue
            lab = dict(re.findall(r'([A-Za-z_]+)="([^"]*)"', m.group(3) or ""))
            if all(lab.get(k) == v for k, v in labels.items()):
                total += float(m.group(4))
                found = True
    except OSError:
        return None
    return total if found else None


def fmt(v, f="%.0f"):
    return "-" if v is None else f % v


def goal(ok):
    return "met" if ok else "**missed**"


def busy_section(out, tag, how, r):
    """One line: the engine's busy seconds over the window between TAG0 and TAG1's metrics snapshots."""
    b0 = metric(os.path.join(out, tag + "0.metrics"), "inferd_gpu_busy_seconds_total", gpu="0")
    b1 = metric(os.path.join(out, tag + "1.metrics"), "inferd_gpu_busy_seconds_total", gpu="0")
    try:
        t0 = float(open(os.path.join(out, tag + "0.time")).read())
        t1 = float(open(os.path.join(out, tag + "1.time")).read())
    except (OSError, ValueError):
        t0 = t1 = None
    if b0 is not None and b1 is not None and t0 and t1:
        f = (b1 - b0) / (t1 - t0)
        print("%s: busy %.2f s over %.2f s: **%.3f** (goal >= 0.8: %s); %s rows/s, p99 %s us\n" % (
            how, b1 - b0, t1 - t0, f, goal(f >= 0.8), fmt(r and num(r, "rows_per_s")), fmt(r and num(r, "p99_us"))))
    else:
        print("%s: no busy metrics\n" % how)


def main():
    out = sys.argv[1]
    tags = merged(out)
    streams = int(os.environ.get("STREAMS", "512"))

    def row(tag, lvl=None):
        if lvl == 512:
            lvl = streams
        return next((r for r in tags.get(tag, []) if lvl is None or int(float(r["level"])) == lvl), None)
    print("## Server benchmarks (tests/bench/serve/run.sh)\n")
    # 1
    print("### 1. Transport ceiling: echo server vs inferd identity model, 1-row requests\n")
    print("| concurrency | echo req/s | echo p99 us | inferd req/s | inferd p99 us | inferd / echo |")
    print("|---:|---:|---:|---:|---:|---:|")
    levels = sorted({int(float(r["level"])) for t in ("echo", "inferd_identity") for r in tags.get(t, [])})
    best = {}
    for lvl in levels:
        e, i = row("echo", lvl), row("inferd_identity", lvl)
        et, it = e and num(e, "throughput_rps"), i and num(i, "throughput_rps")
        for k, v in (("echo", et), ("inferd", it)):
            if v:
                best[k] = max(best.get(k, 0), v)
        print("| %d | %s | %s | %s | %s | %s |" % (lvl, fmt(et), fmt(e and num(e, "p99_us")), fmt(it),
              fmt(i and num(i, "p99_us")), fmt(it / et if it and et else None, "%.2f")))
    if best.get("echo") and best.get("inferd"):
        r = best["inferd"] / best["echo"]
        print("\nPeak: inferd %.0f / echo %.0f req/s = **%.2f** (goal >= 0.85: %s)\n" % (best["inferd"], best["echo"], r, goal(r >= 0.85)))
    # 2
    print("### 2. Dynamic batching on vs off, fp16 on the GPU, 512 streams\n")
    print("| model | on req/s | on p99 us | on mean batch | off req/s | off p99 us | throughput on/off |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for m in ("mlp", "mlp4096"):
        on, off = row("batching_%s_b" % m, 512), row("batching_%s_nob" % m, 512)
        ton, toff = on and num(on, "throughput_rps"), off and num(off, "throughput_rps")
        print("| %s | %s | %s | %s | %s | %s | %s |" % (m, fmt(ton), fmt(on and num(on, "p99_us")),
              fmt(on and num(on, "server_avg_batch"), "%.1f"), fmt(toff), fmt(off and num(off, "p99_us")),
              fmt(ton / toff if ton and toff else None, "**%.1fx**")))
    print("\n(goal >= 10x throughput at equal or lower p99)\n")
    # 3
    print("### 3. inferd vs the Python grpcio + PyTorch dynamic-batching peer, seed MLP fp16, 512 streams\n")
    a, b = row("peer_inferd", 512), row("peer_python", 512)
    ta, tb = a and num(a, "throughput_rps"), b and num(b, "throughput_rps")
    print("| server | req/s | p50 us | p99 us |\n|---|---:|---:|---:|")
    for name, r in (("inferd", a), ("python peer", b)):
        print("| %s | %s | %s | %s |" % (name, fmt(r and num(r, "throughput_rps")), fmt(r and num(r, "p50_us")),
                                       fmt(r and num(r, "p99_us"))))
    if ta and tb:
        print("\ninferd / peer throughput: **%.1fx** (goal >= 35x with lower p99: %s)\n" % (
            ta / tb, goal(ta / tb >= 35 and num(a, "p99_us") < num(b, "p99_us"))))
    # 4
    print("### 4. Server overhead at concurrency 1 (seed MLP fp16 on the GPU, no dynamic batching)\n")
    try:
        d = json.load(open(os.path.join(out, "overhead_c1.dashboard.json")))
        e = next(m for m in d["models"] if m["name"] == "mlp_nob")
        lat = e["latency_us"]
        ov = lat["request"]["p50"] - lat["compute_infer"]["p50"]
        print("p50 request %d us, p50 compute_infer %d us: overhead p50 ~ **%d us** (goal <= 30 us: %s)\n" % (
            lat["request"]["p50"], lat["compute_infer"]["p50"], ov, goal(ov <= 30)))
        print("per stage p50 us: %s\n" % ", ".join("%s %d" % (k, v["p50"]) for k, v in lat.items()))
    except (OSError, KeyError, StopIteration, ValueError) as ex:
        print("no dashboard snapshot (%r)\n" % ex)
    # 5
    print("### 5. GPU busy fraction, 4x4096 fp32, 4 instances, 256 streams x 64 rows\n")
    for tag, how in (("busy", "tensors in the gRPC messages"), ("busy_shm", "tensors in system shared memory")):
        busy_section(out, tag, how, row(tag, 256))
    fails = [l.strip() for l in open(os.path.join(out, "failures.txt")) if l.strip()] if os.path.exists(
        os.path.join(out, "failures.txt")) else []
    if fails:
        print("Failures:\n" + "\n".join("- " + f for f in fails))


if __name__ == "__main__":
    main()
