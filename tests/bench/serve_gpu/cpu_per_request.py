#!/usr/bin/env python3
"""CPU per request of a gRPC server, per thread group, under a fixed closed-loop load (issue 13).

  cpu_per_request.py [--secs N] [--level T:C:I] [--srv-cores 0] [--load-cores 1] NAME -- SERVER ARGV...

Starts SERVER ARGV pinned to --srv-cores (taskset); the port is the one inferd prints on stderr ("inferd ready:
grpc=PORT"), or, for the anchors' echo_server, the one in its first argument (ADDR:PORT). Runs the anchors' loadc
(env AB: its directory, REQ: the request file) pinned to --load-cores for 1 s of warm-up, then --secs seconds,
reading /proc/PID/task/*/stat and status before and after. Prints one JSON line: loadc's figures, and per thread
group (the thread name without its trailing digits) the CPU microseconds (utime + stime) and the context switches
(voluntary + involuntary) per request answered. Numbers from one run only compare with others of the same run.
"""
import argparse
import json
import os
import re
import socket
import subprocess
import sys
import time

M = "/inference.GRPCInferenceService/ModelInfer"


def snapshot(pid):
    """{tid: (group, cpu ticks, context switches)} of every thread of pid."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            stat = open("/proc/%d/task/%s/stat" % (pid, tid)).read()
            status = open("/proc/%d/task/%s/status" % (pid, tid)).read()
        except OSError:
            continue  # ended meanwhile
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        f = stat[stat.rindex(")") + 2:].split()
        sw = sum(int(l.split()[1]) for l in status.splitlines() if "ctxt_switches" in l)
        out[tid] = (re.sub(r"[0-9]+$", "", name), int(f[11]) + int(f[12]), sw)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--secs", type=int, default=8)
    ap.add_argument("--level", default="2:2:8", help="loadc THREADS:CHANNELS:INFLIGHT (default 32 streams)")
    ap.add_argument("--srv-cores", default="0")
    ap.add_argument("--load-cores", default="1")
    ap.add_argument("name")
    ap.add_argument("server", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    argv = a.server[1:] if a.server[:1] == ["--"] else a.server
    ab, req = os.environ.get("AB", "anchors-bin"), os.environ.get("REQ", "req.bin")
    log_path = "/tmp/cpu_per_request.%d.log" % os.getpid()
    with open(log_path, "w") as log:
        p = subprocess.Popen(["taskset", "-c", a.srv_cores] + argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        port = None
        for _ in range(3000):
            time.sleep(0.1)
            if p.poll() is not None:
                sys.exit("%s exited: %s" % (a.name, open(log_path).read()[-500:]))
            if os.path.basename(argv[0]) == "echo_server":
                port = int(argv[1].rsplit(":", 1)[1])
            else:
                m = re.search(r"inferd ready: grpc=(\d+)", open(log_path).read())
                port = m and int(m.group(1))
            if port:
                try:
                    socket.create_connection(("127.0.0.1", port)).close()
                    break
                except OSError:
                    port = None
        load = ["taskset", "-c", a.load_cores, os.path.join(ab, "loadc"), "127.0.0.1:%d" % port, M, req] + \
            a.level.split(":")
        subprocess.run(load + ["1"], capture_output=True, check=True)
        before = snapshot(p.pid)
        res = json.loads(subprocess.run(load + [str(a.secs)], capture_output=True, text=True,
                                        check=True).stdout.strip().splitlines()[-1])
        after = snapshot(p.pid)
    finally:
        p.terminate()
        p.wait()
        os.unlink(log_path)
    n = res["rps"] * a.secs
    hz = os.sysconf("SC_CLK_TCK")
    cpu, sw = {}, {}
    for tid, (g, ticks, cs) in after.items():
        _, t0, c0 = before.get(tid, (g, 0, 0))
        cpu[g] = cpu.get(g, 0) + ticks - t0
        sw[g] = sw.get(g, 0) + cs - c0
    out = {"server": a.name, "loadc": res,
           "cpu_us_per_req": {g: round(v / hz * 1e6 / n, 2) for g, v in sorted(cpu.items()) if v > 0},
           "switches_per_req": {g: round(v / n, 3) for g, v in sorted(sw.items()) if v > 0}}
    out["cpu_us_per_req"]["total"] = round(sum(cpu.values()) / hz * 1e6 / n, 2)
    out["switches_per_req"]["total"] = round(sum(sw.values()) / n, 3)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
