#!/usr/bin/env python3
"""The table of transport.sh, and the per-level /metrics deltas it records.

  transport_table.py --delta BEFORE AFTER      one JSON object: what the server did between two /metrics scrapes
  transport_table.py --threads PID             one line: every thread's name and CPU ticks (utime + stime)
  transport_table.py --threads-delta BEFORE AFTER  one JSON object: CPU cores used per thread name between the two
  transport_table.py OUT SRV_CORES LOAD_CORES  markdown from OUT/transport.jsonl (machine, date, ratios to the echo)
"""
import datetime
import json
import os
import platform
import re
import subprocess
import sys

LINE = re.compile(r'^([a-z_]+)(\{[^}]*\})?\s+([0-9.eE+-]+)$')


def scrape(path):
    """Sums every series of a metric name over its labels (one model is served)."""
    out = {}
    for l in open(path):
        m = LINE.match(l.strip())
        if m:
            out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(3))
    return out


def delta(before, after):
    a, b = scrape(before), scrape(after)
    d = {k: b.get(k, 0.0) - a.get(k, 0.0) for k in b}
    secs = max(os.path.getmtime(after) - os.path.getmtime(before), 1e-9)
    n = d.get("nv_inference_request_success", 0.0)
    ex = d.get("nv_inference_exec_count", 0.0)
    r = {"requests": int(n), "executions": int(ex),
         "mean_batch": round(d.get("nv_inference_count", 0.0) / ex, 2) if ex else None}
    for stage in ("request", "queue", "compute_input", "compute_infer", "compute_output"):
        us = d.get("nv_inference_%s_duration_us" % stage)
        r[stage + "_us"] = round(us / n, 1) if n and us is not None else None
    if "inferd_gpu_busy_seconds_total" in d:
        r["gpu_busy"] = round(d["inferd_gpu_busy_seconds_total"] / secs, 3)
    return r


def threads(pid):
    """name ticks, one line per thread of pid (/proc/PID/task/*/stat fields 14 and 15)."""
    for t in sorted(os.listdir("/proc/%s/task" % pid)):
        try:
            stat = open("/proc/%s/task/%s/stat" % (pid, t)).read()
        except OSError:
            continue  # ended meanwhile
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        f = stat[stat.rindex(")") + 2:].split()
        print("%s %s %d" % (t, name.replace(" ", "_"), int(f[11]) + int(f[12])))


def threads_delta(before, after):
    """CPU cores used per thread name (digits dropped: inferd-done0 and inferd-done1 are one group) and the
    busiest single thread of each group, between two --threads snapshots."""
    hz = os.sysconf("SC_CLK_TCK")
    secs = max(os.path.getmtime(after) - os.path.getmtime(before), 1e-9)
    a = {}
    for l in open(before):
        tid, name, ticks = l.split()
        a[tid] = int(ticks)
    groups = {}
    for l in open(after):
        tid, name, ticks = l.split()
        used = (int(ticks) - a.get(tid, 0)) / hz / secs
        g = re.sub(r"[0-9]+$", "", name)
        tot, top, n = groups.get(g, (0.0, 0.0, 0))
        groups[g] = (tot + used, max(top, used), n + 1)
    return {g: {"cores": round(t, 2), "max_thread": round(m, 2), "threads": n}
            for g, (t, m, n) in sorted(groups.items(), key=lambda x: -x[1][0]) if t >= 0.01}


def machine():
    cpu = platform.processor()
    try:
        cpu = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")][0]
    except (OSError, IndexError):
        pass
    gpu = ""
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=10).stdout.strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        pass
    return "%s, %d cores%s" % (cpu, os.cpu_count(), ", " + gpu if gpu else "")


def table(out, srv, load):
    rows = [json.loads(l) for l in open(os.path.join(out, "transport.jsonl")) if l.startswith("{")]
    servers, levels, by = [], [], {}
    for r in rows:
        if r["server"] not in servers:
            servers.append(r["server"])
        if r["streams"] not in levels:
            levels.append(r["streams"])
        by[(r["server"], r["streams"])] = r
    print("Machine: %s; date %s; server on cores %s, loadc on %s; the anchors' 4 KB request (seed MLP, one row)."
          % (machine(), datetime.date.today().isoformat(), srv, load))
    print()
    print("| server | " + " | ".join("%d stream%s" % (c, "s" if c > 1 else "") for c in levels) + " |")
    print("|---|" + "---|" * len(levels))
    for s in servers:
        cells = []
        for c in levels:
            r, e = by.get((s, c)), by.get(("echo", c))
            l = r and r.get("loadc")
            if not l:
                cells.append("n/a")
                continue
            cell = "%.1fk req/s, p50 %d us, p99 %d us" % (l["rps"] / 1000, l["p50_us"], l["p99_us"])
            el = e and e.get("loadc")
            if s != "echo" and el and el.get("rps"):
                cell += " (x%.2f, p99 x%.2f)" % (l["rps"] / el["rps"], l["p99_us"] / max(el["p99_us"], 1))
            if l.get("errors"):
                cell += ", %d errors" % l["errors"]
            cells.append(cell)
        print("| %s | %s |" % (s, " | ".join(cells)))
    print()
    print("Per request, from /metrics over each level (means, us): queue / compute_input / compute_infer / "
          "compute_output, mean batch rows, GPU busy fraction (engine events).")
    print()
    print("| server | streams | queue | input | infer | output | batch | GPU busy | 1-stream goal: p50 <= echo p50 + infer + 20 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for s in servers:
        for c in levels:
            r = by.get((s, c))
            m = r and r.get("metrics")
            if not m:
                continue
            goal = ""
            e = by.get(("echo", c))
            if c == 1 and e and e.get("loadc") and r.get("loadc") and m.get("compute_infer_us") is not None:
                lim = e["loadc"]["p50_us"] + m["compute_infer_us"] + 20
                goal = "%d vs %d: %s" % (r["loadc"]["p50_us"], lim, "met" if r["loadc"]["p50_us"] <= lim else "not met")
            f = lambda k: "-" if m.get(k) is None else "%g" % m[k]
            print("| %s | %d | %s | %s | %s | %s | %s | %s | %s |" % (
                s, c, f("queue_us"), f("compute_input_us"), f("compute_infer_us"), f("compute_output_us"),
                f("mean_batch"), f("gpu_busy"), goal))
    print()
    print("Server threads' CPU over each level (cores used by the group; its busiest thread in brackets; a thread near "
          "1.0 is saturated), from /proc/PID/task/*/stat:")
    print()
    for s in servers:
        for c in levels:
            r = by.get((s, c))
            th = r and r.get("threads")
            if th:
                print("- %s, %d streams: %s" % (s, c, ", ".join(
                    "%s %.2f (%.2f)" % (g, v["cores"], v["max_thread"]) for g, v in th.items())))


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--delta":
        print(json.dumps(delta(sys.argv[2], sys.argv[3])))
    elif len(sys.argv) == 3 and sys.argv[1] == "--threads":
        threads(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "--threads-delta":
        print(json.dumps(threads_delta(sys.argv[2], sys.argv[3])))
    elif len(sys.argv) == 4:
        table(*sys.argv[1:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
