#!/usr/bin/env python3
"""What inferd-load costs per request (issue 15's soak): CPU microseconds of the client per request sent, by request
mix, rate and server, so a soak's client can be given the cores its rate needs.

    client_cost.py --load-bins A[,B...] --echo BIN --inferd BIN [--repo DIR --model NAME] [--rates 2000,5000]
                   [--mixes none,55:5:30:10] [--seconds 6] [--reps 2] [--load-core 1] [--server-core 0]

Each run is one inferd-load process (open loop, --threads 1, --timeout-ms 10000 as soak.py sends) pinned to
--load-core, against a server pinned to --server-core: bench_echo_server (tests/bench/echo: ModelInfer echoed, no
model; --shape 1,1024 so the request is the seed MLP's 4 KB) and inferd on --repo's CPU model. The client's cost is
its rusage (utime + stime, os.wait4) over the requests it sent (CLIENT_DROPPED ones excluded), its whole life
included (connection, metadata, the drain): a run of a few seconds overstates it a little, the same for every
binary. Runs go round robin over (server, mix, rate, binary) --reps times, so a machine shared with other work
slows every binary alike; the medians per cell are printed as one JSON line per cell. (No instruction
counts: this VM's perf has no hardware counters.)
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration"))

import inferd_testlib as lib  # noqa: E402
from soak import thread_cpu  # noqa: E402


def proc_cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        s = f.read()
    x = s[s.rindex(")") + 2:].split()
    return (int(x[11]) + int(x[12])) / os.sysconf("SC_CLK_TCK")


def start_echo(binary, core):
    p = subprocess.Popen(["taskset", "-c", core, binary, "--port", "0", "--address", "127.0.0.1", "--threads", "1",
                          "--shape", "1,1024"], stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        m = re.search(r"echo ready: grpc=(\d+)", line)
        if m:
            return p, "127.0.0.1:%s" % m.group(1)
    sys.exit("bench_echo_server did not start")


def one_run(load_bin, url, model, rate, mix, seconds, core):
    with tempfile.TemporaryDirectory() as tmp:
        js = os.path.join(tmp, "r.json")
        cmd = ["taskset", "-c", core, load_bin, "-u", url, "-m", model, "--json", js, "--threads", "1",
               "--request-rate-range", str(rate), "--duration-s", str(seconds), "--report-every-s", str(seconds),
               "--timeout-ms", "10000"]
        if mix != "none":
            cmd += ["--mix", mix, "--cancel-after-us", "0:1000", "--expire-us", "1:500"]
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        groups = {}
        while True:  # wait4, not poll: the rusage comes with the reaping
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            try:
                groups = thread_cpu(p.pid)  # the last read before it ends: its threads' shares
            except OSError:
                pass
            time.sleep(0.5)
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            sys.exit("inferd-load failed: %s\n%s" % (" ".join(cmd), p.stderr.read().decode()[-2000:]))
        with open(js) as f:
            (level,) = json.load(f)
    kinds = level["kinds"]
    sent = sum(k["sent"] for k in kinds.values())
    dropped = sum(k.get("CLIENT_DROPPED", 0) for k in kinds.values())
    per = level["periods"][0]
    total = sum(groups.values()) or 1
    n = max(sent - dropped, 1)
    return {"cpu_us_per_req": 1e6 * (ru.ru_utime + ru.ru_stime) / n, "sent": sent,

            "dropped": dropped, "lag_p99_us": per["lag_us"]["p99"], "valid_p99_us": per["valid"]["p99_us"],
            "threads": {g: round(v / total, 2) for g, v in sorted(groups.items(), key=lambda kv: -kv[1])[:5]}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--load-bins", required=True)
    ap.add_argument("--echo", required=True)
    ap.add_argument("--inferd", default=None)
    ap.add_argument("--repo", default=None)
    ap.add_argument("--model", default="simplenet")
    ap.add_argument("--servers", default="echo,inferd")
    ap.add_argument("--rates", default="2000,5000")
    ap.add_argument("--mixes", default="none,55:5:30:10")
    ap.add_argument("--seconds", type=float, default=6)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--load-core", default="1")
    ap.add_argument("--server-core", default="0")

    a = ap.parse_args()
    bins = a.load_bins.split(",")
    servers = {}
    if "echo" in a.servers:
        servers["echo"] = start_echo(a.echo, a.server_core)
    if "inferd" in a.servers:
        srv = lib.ServerProcess(a.repo, [], binary=a.inferd)
        srv.args = ["taskset", "-c", a.server_core] + srv.args
        srv.start()
        servers["inferd"] = (srv.proc, srv.grpc_url)
    cells = {}
    try:
        for rep in range(a.reps):
            for name, (proc, url) in servers.items():
                for mix in a.mixes.split(","):
                    for rate in a.rates.split(","):
                        for b in bins:
                            s0, g0 = proc_cpu_s(proc.pid), thread_cpu(proc.pid)
                            r = one_run(b, url, a.model, rate, mix, a.seconds, a.load_core)
                            n = max(r["sent"] - r["dropped"], 1)
                            r["server_cpu_us_per_req"] = 1e6 * (proc_cpu_s(proc.pid) - s0) / n
                            g1, tick = thread_cpu(proc.pid), os.sysconf("SC_CLK_TCK")
                            r["server_us_per_req"] = {  # by thread group: which of the server's threads pay
                                g: round(1e6 * (v - g0.get(g, 0)) / tick / n, 1) for g, v in sorted(
                                    g1.items(), key=lambda kv: kv[0]) if v > g0.get(g, 0)}
                            cells.setdefault((name, mix, rate, b), []).append(r)
                            print("rep %d %s mix %s rate %s %s: %s" % (rep, name, mix, rate, b, json.dumps(r)),
                                  file=sys.stderr, flush=True)
    finally:
        for name, (proc, _) in servers.items():
            proc.terminate()
            proc.wait(timeout=30)
    for (name, mix, rate, b), rs in cells.items():
        print(json.dumps({"server": name, "mix": mix, "rate": int(rate), "load_bin": b,
                          "client_cpu_us_per_req": round(statistics.median(r["cpu_us_per_req"] for r in rs), 2),
                          "runs": [round(r["cpu_us_per_req"], 2) for r in rs],

                          "server_cpu_us_per_req": round(statistics.median(r["server_cpu_us_per_req"] for r in rs), 2),
                          "dropped": sum(r["dropped"] for r in rs),
                          "lag_p99_us": max(r["lag_p99_us"] for r in rs),
                          "valid_p99_us": max(r["valid_p99_us"] for r in rs), "threads": rs[-1]["threads"],
                          "server_us_per_req": rs[-1]["server_us_per_req"]}))


if __name__ == "__main__":
    sys.exit(main())
