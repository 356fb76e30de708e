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
    """name ticks wait_ns, one line per thread of pid (/proc/PID/task/*/stat fields 14 and 15; schedstat's
    run-queue wait: time the thread was runnable but not running), then one "cpuN busy total" line per CPU from
    /proc/stat (busy = everything but idle and iowait, interrupts and softirqs included: the loopback's TCP
    receive work is charged there, not to any thread)."""
    for t in sorted(os.listdir("/proc/%s/task" % pid)):
        try:
            stat = open("/proc/%s/task/%s/stat" % (pid, t)).read()
            wait = int(open("/proc/%s/task/%s/schedstat" % (pid, t)).read().split()[1])
        except (OSError, IndexError, ValueError):
            continue  # ended meanwhile, or no schedstat
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        f = stat[stat.rindex(")") + 2:].split()
        print("%s %s %d %d" % (t, name.replace(" ", "_"), int(f[11]) + int(f[12]), wait))
    for l in open("/proc/stat"):
        f = l.split()
        if f[0].startswith("cpu") and f[0] != "cpu":
            v = [int(x) for x in f[1:]]
            print("%s %d %d" % (f[0], sum(v[:8]) - v[3] - v[4], sum(v[:8])))


def threads_delta(before, after):
    """CPU cores used per thread name (digits dropped: inferd-done0 and inferd-done1 are one group), the
    busiest single thread of each group and the group's run-queue wait (in cores: a thread waiting for a CPU
    the whole time counts 1.0), between two --threads snapshots; and "cpu_busy": each CPU's busy fraction."""
    hz = os.sysconf("SC_CLK_TCK")
    secs = max(os.path.getmtime(after) - os.path.getmtime(before), 1e-9)
    a, cpu_a = {}, {}
    for l in open(before):
        f = l.split()
        if f[0].startswith("cpu"):
            cpu_a[f[0]] = (int(f[1]), int(f[2]))
        else:
            a[f[0]] = (int(f[2]), int(f[3]))
    groups, cpus = {}, {}
    for l in open(after):
        f = l.split()
        if f[0].startswith("cpu"):
            b0, t0 = cpu_a.get(f[0], (0, 0))
            cpus[int(f[0][3:])] = round((int(f[1]) - b0) / max(int(f[2]) - t0, 1), 2)
            continue
        tid, name, ticks, wait = f
        t0, w0 = a.get(tid, (0, 0))
        used = (int(ticks) - t0) / hz / secs
        waited = (int(wait) - w0) / 1e9 / secs
        g = re.sub(r"[0-9]+$", "", name)
        tot, top, n, w = groups.get(g, (0.0, 0.0, 0, 0.0))
        groups[g] = (tot + used, max(top, used), n + 1, w + waited)
    r = {g: {"cores": round(t, 2), "max_thread": round(m, 2), "threads": n, "rq_wait": round(w, 2)}
         for g, (t, m, n, w) in sorted(groups.items(), key=lambda x: -x[1][0]) if t >= 0.01}
    r["cpu_busy"] = [cpus[k] for k in sorted(cpus)]
    return r


def cpu_list(spec):
    """"0-7,9" -> [0, ..., 7, 9]"""
    out = []
    for part in spec.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


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
                    "%s %.2f (%.2f%s)" % (g, v["cores"], v["max_thread"],
                                          ", run-queue wait %.2f" % v["rq_wait"] if v.get("rq_wait") else "")
                    for g, v in th.items() if g != "cpu_busy")))
    print()
    print("CPUs' busy fraction over each level (/proc/stat, interrupts and softirqs included), mean of the server's "
          "cores (%s) and of loadc's (%s), and the busiest core of each:" % (srv, load))
    print()
    print("| server | streams | server cores busy (max) | loadc cores busy (max) |")
    print("|---|---:|---:|---:|")
    sc, lc = cpu_list(srv), cpu_list(load)
    for s in servers:
        for c in levels:
            r = by.get((s, c))
            cb = r and (r.get("threads") or {}).get("cpu_busy")
            if not cb:
                continue
            pick = lambda cs: [cb[i] for i in cs if i < len(cb)] or [0.0]
            a, b = pick(sc), pick(lc)
            print("| %s | %d | %.2f (%.2f) | %.2f (%.2f) |" % (s, c, sum(a) / len(a), max(a), sum(b) / len(b), max(b)))
    perf_table(out, servers, levels, by)


LIB_GROUPS = [("gRPC + absl", ("libgrpc", "libgpr", "libabsl", "libaddress_sorting", "libupb", "libre2")),
              ("kernel", ("[kernel",)), ("CUDA", ("libcuda", "libcudart", "libcublas", "libcudnn", "[nvidia")),
              ("CPU model code", ("[JIT", "libdnnl", "libopenblas", "libblas", "libgomp")),
              ("malloc + libc", ("libc.so", "libjemalloc", "ld-linux", "[vdso", "libstdc++", "libm.so")),
              ("server code (+ protobuf-c, libuv)", ("inferd", "echo_server", "libprotobuf-c", "libuv", "python"))]


def perf_split(path):
    """{(thread group, library group): share of samples} from `perf report --sort comm,dso` text."""
    out = {}
    for line in open(path):
        f = line.split()
        if len(f) < 3 or not f[0].endswith("%"):
            continue
        comm, dso = f[1].rstrip("0123456789"), f[2]
        lib = next((g for g, keys in LIB_GROUPS if any(dso.startswith(k) for k in keys)), "other")
        out[(comm, lib)] = out.get((comm, lib), 0.0) + float(f[0][:-1]) / 100
    return out


def perf_table(out, servers, levels, by):
    found = []
    for s in servers:
        for c in levels:
            p = os.path.join(out, "perf_%s_%d.txt" % (re.sub("[^A-Za-z0-9]", "_", s), c))
            r = by.get((s, c))
            if os.path.exists(p) and r and r.get("loadc") and r.get("threads"):
                found.append((s, c, perf_split(p), r))
    if not found:
        return
    print()
    print("Where each server's CPU goes per request answered (perf record -e cpu-clock over half a point at the last "
          "level, shares times the CPU the threads used over the point, /proc): us per request by library, then by "
          "thread.")
    print()
    libs = [g for g, _ in LIB_GROUPS] + ["other"]
    print("| server | streams | CPU us/req | " + " | ".join(libs) + " | by thread |")
    print("|---|---:|---:|" + "---:|" * len(libs) + "---|")
    for s, c, split, r in found:
        cores = sum(v["cores"] for g, v in r["threads"].items() if g != "cpu_busy")
        if cores <= 0:  # no thread was seen (not the server's own process)
            continue
        us = cores * 1e6 / max(r["loadc"]["rps"], 1)
        tot = sum(split.values()) or 1.0
        by_lib = {g: 0.0 for g in libs}
        by_thr = {}
        for (comm, lib), v in split.items():
            by_lib[lib] += v / tot * us
            by_thr[comm] = by_thr.get(comm, 0.0) + v / tot * us
        thr = ", ".join("%s %.1f" % (k, v) for k, v in sorted(by_thr.items(), key=lambda kv: -kv[1]) if v >= 0.1)
        print("| %s | %d | %.1f | %s | %s |" % (s, c, us, " | ".join("%.1f" % by_lib[g] for g in libs), thr))


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
