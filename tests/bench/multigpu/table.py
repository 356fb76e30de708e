#!/usr/bin/env python3
"""Issue 16's numbers (run.sh beside this file).

    table.py delta BEFORE AFTER WALL_S   one server's /metrics before and after a level -> one JSON object:
                                         {"success": N, "failure": N, "executions": N, "inferences": N,
                                          "busy": [fraction of WALL_S each GPU was busy with inferd's work]}
    table.py report OUT                  OUT/results.jsonl -> the markdown table (stdout)
"""
import json
import re
import sys

LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$')


def parse(path):
    """{(name, labels): value} of a Prometheus text file."""
    out = {}
    with open(path) as f:
        for line in f:
            m = LINE.match(line.strip())
            if m:
                out[(m.group(1), m.group(2) or "")] = float(m.group(3))
    return out


def total(metrics, name):
    return sum(v for (n, _), v in metrics.items() if n == name)


def delta(before, after, wall):
    a, b = parse(after), parse(before)
    res = {}
    for key, name in (("success", "nv_inference_request_success"), ("failure", "nv_inference_request_failure"),
                      ("executions", "nv_inference_exec_count"), ("inferences", "nv_inference_count")):
        res[key] = int(round(total(a, name) - total(b, name)))
    busy = {}
    for (n, labels), v in a.items():
        if n == "inferd_gpu_busy_seconds_total":
            g = int(re.search(r'gpu="(\d+)"', labels).group(1))
            busy[g] = (v - b.get((n, labels), 0.0)) / wall
    res["busy"] = [round(busy[g], 3) for g in sorted(busy)]
    return res


def fmt_k(x):
    return "%.1fk" % (x / 1000) if x >= 1000 else "%.0f" % x


def report(out):
    rows = [json.loads(line) for line in open(out + "/results.jsonl") if line.strip()]
    print("| part | model | streams | setup | req/s | p50 us | p99 us | ratio | p99 ratio | GPU busy | "
          "client OK (level) | server successes | errors |")
    print("|---|---|---:|---|---:|---:|---:|---:|---:|---|---:|---:|---:|")
    base = {}
    for r in rows:
        ld = r["load"]
        key = (r["part"], r["model"], r["streams"])
        ok = ld.get("level_ok", 0)
        srv = sum(s["success"] for s in r["servers"])
        busy = " / ".join("%.2f" % b for s in r["servers"] for b in s["busy"]) or "-"
        if r["setup_n"] == 1:
            base[key] = ld
            ratio = p99r = ""
        else:
            b = base.get(key)
            ratio = "**%.2f**" % (ld["throughput_rps"] / b["throughput_rps"]) if b and b["throughput_rps"] else "?"
            p99r = "%.2f" % (ld["p99_us"] / b["p99_us"]) if b and b["p99_us"] else "?"
        agree = "" if srv == ok else " (differs)"
        print("| %s | %s | %d | %s | %s | %.0f | %.0f | %s | %s | %s | %d | %d%s | %d |" % (
            r["part"], r["model"], r["streams"], r["setup"], fmt_k(ld["throughput_rps"]), ld["p50_us"],
            ld["p99_us"], ratio, p99r, busy, ok, srv, agree, ld.get("level_errors", 0)))


def main():
    if len(sys.argv) >= 5 and sys.argv[1] == "delta":
        print(json.dumps(delta(sys.argv[2], sys.argv[3], float(sys.argv[4]))))
    elif len(sys.argv) >= 3 and sys.argv[1] == "report":
        report(sys.argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
