#!/usr/bin/env python3
"""CPU per request of several gRPC servers side by side, in short alternating windows (issue 13).

  cpu_ab.py [--windows N] [--secs S] [--level T:C:I] [--srv-cores 0] [--load-cores 1] NAME=COMMAND...

Starts every server at once, all pinned to --srv-cores (taskset), then loads one at a time with the anchors'
loadc (env AB: its directory, REQ: the request file) pinned to --load-cores: N rounds, each a window of S seconds
per server in turn, reading /proc/PID/task/*/stat and status around each window. A server sits idle while
another is loaded. Where other jobs share the machine, its speed drifts over minutes (on the 2-core VM the
same MLP work per request moved by 50 % between runs a minute apart); windows a few seconds apart see the
same machine, so the per-round ratios to the first server are what to read, not the absolute figures.

Prints one line per window, then per server the medians over the rounds of: req/s, p50/p99, CPU microseconds
per request (utime + stime) per thread group (thread name without trailing digits) and in all, context
switches per request, and the median of the per-round ratio of its total CPU per request to the first
server's. A COMMAND naming the anchors' echo_server takes its port from its first argument (ADDR:PORT); an
inferd prints it ("inferd ready: grpc=PORT").
"""
import argparse
import json
import os
import re
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time

M = "/inference.GRPCInferenceService/ModelInfer"

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_per_request import snapshot  # noqa: E402  (per-thread CPU ticks and switches: one home)


def start(name, argv, cores, logdir):
    log = open(os.path.join(logdir, re.sub(r"\W", "_", name) + ".log"), "w+")
    p = subprocess.Popen(["taskset", "-c", cores] + argv, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(3000):
        time.sleep(0.1)
        if p.poll() is not None:
            log.seek(0)
            sys.exit("%s exited: %s" % (name, log.read()[-500:]))
        if os.path.basename(argv[0]) == "echo_server":
            port = int(argv[1].rsplit(":", 1)[1])
        else:
            log.seek(0)
            m = re.search(r"inferd ready: grpc=(\d+)", log.read())
            port = m and int(m.group(1))
        if port:
            try:
                socket.create_connection(("127.0.0.1", port)).close()
                return p, port
            except OSError:
                pass
    sys.exit("%s did not start" % name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--windows", type=int, default=8)
    ap.add_argument("--secs", type=float, default=2)
    ap.add_argument("--level", default="4:2:8", help="loadc THREADS:CHANNELS:INFLIGHT (default 64 streams)")
    ap.add_argument("--srv-cores", default="0")
    ap.add_argument("--load-cores", default="1")
    ap.add_argument("servers", nargs="+", help="NAME=COMMAND")
    a = ap.parse_args()
    ab, req = os.environ.get("AB", "anchors-bin"), os.environ.get("REQ", "req.bin")
    specs = [s.split("=", 1) for s in a.servers]
    hz = os.sysconf("SC_CLK_TCK")
    procs = []
    res = {n: [] for n, _ in specs}
    with tempfile.TemporaryDirectory() as logdir:
        try:
            for n, cmd in specs:
                procs.append((n,) + start(n, shlex.split(cmd), a.srv_cores, logdir))
            for r in range(-1, a.windows):  # round -1 warms every server up, unrecorded
                for n, p, port in procs:
                    load = ["taskset", "-c", a.load_cores, os.path.join(ab, "loadc"), "127.0.0.1:%d" % port, M, req] + \
                        a.level.split(":") + [str(a.secs)]
                    before = snapshot(p.pid)
                    out = subprocess.run(load, capture_output=True, text=True, check=True).stdout
                    after = snapshot(p.pid)
                    if r < 0:
                        continue
                    lc = json.loads(out.strip().splitlines()[-1])
                    nreq = lc["rps"] * a.secs
                    cpu, sw = {}, 0
                    for tid, (g, ticks, cs) in after.items():
                        _, t0, c0 = before.get(tid, (g, 0, 0))
                        cpu[g] = cpu.get(g, 0) + (ticks - t0) / hz * 1e6 / nreq
                        sw += (cs - c0) / nreq
                    cpu = {g: v for g, v in cpu.items() if v > 0}
                    cpu["total"] = sum(cpu.values())
                    res[n].append({"loadc": lc, "cpu": cpu, "sw": sw})
                    print("r%d %-14s rps=%6d p50=%6d p99=%6d sw=%.3f cpu %s" % (
                        r, n, lc["rps"], lc["p50_us"], lc["p99_us"], sw,
                        " ".join("%s=%.1f" % (g, v) for g, v in sorted(cpu.items()) if v >= 0.5)), flush=True)
        finally:
            for _, p, _ in procs:
                p.terminate()
                p.wait()
    first = specs[0][0]
    print("medians of %d windows of %g s, level %s, server cores %s, load cores %s" % (
        a.windows, a.secs, a.level, a.srv_cores, a.load_cores))
    for n, _ in specs:
        ws = res[n]
        med = lambda f: statistics.median(f(w) for w in ws)
        groups = sorted({g for w in ws for g in w["cpu"]})
        ratio = statistics.median(w["cpu"]["total"] / b["cpu"]["total"] for w, b in zip(ws, res[first]))
        print(json.dumps({"server": n, "rps": med(lambda w: w["loadc"]["rps"]), "p50_us": med(lambda w: w["loadc"]["p50_us"]),
                          "p99_us": med(lambda w: w["loadc"]["p99_us"]), "switches_per_req": round(med(lambda w: w["sw"]), 3),
                          "cpu_us_per_req": {g: round(med(lambda w: w["cpu"].get(g, 0)), 2) for g in groups},
                          "cpu_ratio_to_%s" % first: round(ratio, 3)}), flush=True)


if __name__ == "__main__":
    main()
