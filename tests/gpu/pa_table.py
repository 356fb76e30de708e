#!/usr/bin/env python3
"""The verdicts and the table of tests/gpu/perf_analyzer_gpu.sh (standard library only: the GPU machine's
venv has numpy and onnx, not tritonclient).

    pa_table.py metrics URL OUT_FILE     /metrics of the server at URL into OUT_FILE (the snapshots of a run)
    pa_table.py table OUT_DIR MODEL      every run under OUT_DIR/runs/*, in order: one markdown row each, and
                                         exit status 1 if any run failed

A run directory holds: spec (protocol, concurrency, shared memory and measurement: 'windows', or 'count:N' for
one window of N requests; blank-separated), rc (perf_analyzer's exit status,
124 for its timeout, 'skipped' where the script's deadline left no time), pa.txt (its output), pa.csv (its -f
file), m0.txt and m1.txt (/metrics before and after). A run passes when perf_analyzer exited 0 with a result,
the server counted at least as many successes over the run as perf_analyzer counted requests in its measurement
(the server also saw the warm-up and the windows it dropped), no failures, and, for --shared-memory cuda, at
least one input per measured request read from CUDA shared memory device to device and none through the host.
"""
import csv
import os
import re
import sys
import urllib.request


def metric_sum(text, name, model, **labels):
    """Sum of the series NAME{model=MODEL,...labels} in a Prometheus text exposition; None if there is none."""
    total, seen = 0, False
    for m in re.finditer(r"^%s\{([^}]*)\} (\d+)$" % re.escape(name), text, re.M):
        lab = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if lab.get("model") != model or any(lab.get(k) != v for k, v in labels.items()):
            continue
        total += int(m.group(2))
        seen = True
    return total if seen else None


def counters(text, model):
    return {
        "success": metric_sum(text, "nv_inference_request_success", model),
        "failure": metric_sum(text, "nv_inference_request_failure", model),
        "cuda_device": metric_sum(text, "inferd_cuda_shm_inputs_total", model, path="device"),
        "cuda_host": metric_sum(text, "inferd_cuda_shm_inputs_total", model, path="host"),
    }


def read(path, default=""):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def delta(a, b, key):
    if a.get(key) is None or b.get(key) is None:
        return None
    return b[key] - a[key]


def judge(run_dir, model):
    """(row cells, failure reasons) of one run."""
    proto, conc, shm, mode = (read(os.path.join(run_dir, "spec")).split() + ["?", "?", "none", "windows"])[:4]
    rc = read(os.path.join(run_dir, "rc"), "missing").strip()
    out = read(os.path.join(run_dir, "pa.txt"))
    why = []
    if rc == "skipped":
        why.append("not run: the script's deadline had passed")
    elif rc == "124":
        why.append("perf_analyzer killed by its timeout")
    elif "Failed to obtain stable measurement" in out:
        why.append("perf_analyzer exit %s: no stable measurement (raise STABILITY or TRIALS)" % rc)
    elif rc != "0":
        why.append("perf_analyzer exit %s" % rc)
    rows = []
    if os.path.exists(os.path.join(run_dir, "pa.csv")):
        with open(os.path.join(run_dir, "pa.csv")) as f:
            rows = [r for r in csv.DictReader(f) if r.get("Concurrency")]
    tput = float(rows[-1]["Inferences/Second"]) if rows else None
    p99 = int(float(rows[-1]["p99 latency"])) if rows and rows[-1].get("p99 latency") else None
    m = re.findall(r"Request count: (\d+)", out)
    client = int(m[0]) if m else None  # the first is the client's (the second, under Server:, is ModelStatistics')
    a = counters(read(os.path.join(run_dir, "m0.txt")), model)
    b = counters(read(os.path.join(run_dir, "m1.txt")), model)
    succ, fail = delta(a, b, "success"), delta(a, b, "failure")
    dev, host = delta(a, b, "cuda_device"), delta(a, b, "cuda_host")
    if rc == "0":
        if tput is None or tput <= 0:
            why.append("no throughput in its CSV")
        if client is None:
            why.append("no request count in its output")
    if rc != "skipped":
        if succ is None:
            why.append("no nv_inference_request_success for %s in /metrics" % model)
        elif client is not None and succ < client:
            why.append("server counted %d successes, perf_analyzer %d requests" % (succ, client))
        if fail:
            why.append("%d failed requests" % fail)
        if shm == "cuda":
            if dev is None:
                why.append("no inferd_cuda_shm_inputs_total in /metrics")
            elif client is not None and dev < client:
                why.append("%d inputs read device to device for %d requests" % (dev, client))
            if host:
                why.append("%d CUDA shm inputs went through the host" % host)
    cells = [proto, conc, shm, mode.replace("count:", "") + (" requests" if mode.startswith("count:") else ""), rc,
             "%.0f" % tput if tput is not None else "-",
             str(p99) if p99 is not None else "-",
             str(client) if client is not None else "-",
             str(succ) if succ is not None else "-",
             str(fail) if fail is not None else "-",
             "%s / %s" % (dev, host) if shm == "cuda" and dev is not None else "-",
             "ok" if not why else "FAIL: " + "; ".join(why)]
    return cells, why


def table(out_dir, model):
    runs = sorted(os.listdir(os.path.join(out_dir, "runs")))
    lines = ["| protocol | concurrency | shared memory | measurement | exit | infer/s | p99 (us) | client requests "
             "| server successes | failures | CUDA shm inputs device / host | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    bad = 0
    for r in runs:
        cells, why = judge(os.path.join(out_dir, "runs", r), model)
        lines.append("| " + " | ".join(cells) + " |")
        bad += bool(why)
    lines.append("")
    lines.append("%d of %d runs passed" % (len(runs) - bad, len(runs)))
    return "\n".join(lines), bad


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "metrics":
        text = urllib.request.urlopen(sys.argv[2], timeout=30).read().decode()
        with open(sys.argv[3], "w") as f:
            f.write(text)
        return 0
    if len(sys.argv) == 4 and sys.argv[1] == "table":
        text, bad = table(sys.argv[2], sys.argv[3])
        print(text)
        return 1 if bad else 0
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
