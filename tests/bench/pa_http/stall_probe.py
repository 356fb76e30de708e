"""Issue 14's HTTP stall probe: runs test_perf_analyzer_request_count's perf_analyzer command (mlp, 64 streams,
--request-count 3000) over and over against one inferd, with a busy loop on one core (CI's 2 cores were busy),
and when a run passes --stall-s, records what both ends hold before killing it: the server's success count
against what perf_analyzer asked for, `ss -tnpi` of every connection to the HTTP port (queues, states), and
the thread stacks of both processes (gdb). Not a test: a tool to tell a lost answer from a client stall.

  python tests/bench/pa_http/stall_probe.py --runs 60 [--protocol http|grpc|both] [--inferd build/bin/inferd]
      [--out /tmp/pa_stall] [--extra=--async] [--keep-going] [--pa WRAPPER]

Issue 14's record (tests/bench/RESULTS.md, "perf_analyzer --request-count stalls"): every stall had all answers
sent and read and only perf_analyzer's main thread left, asleep in InferenceProfiler::Measure.
"""

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration"))
import inferd_testlib as lib  # noqa: E402


def success_count(grpc_url):
    import tritonclient.grpc as grpcclient
    with grpcclient.InferenceServerClient(url=grpc_url) as c:
        s = c.get_inference_statistics("mlp", "1").model_stats[0].inference_stats
        return s.success.count, s.fail.count


def sh(cmd):
    p = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    return "$ %s\n%s%s" % (cmd, p.stdout, p.stderr)


def stacks(pid):
    if not shutil.which("gdb"):
        return "(no gdb)\n"
    return sh("gdb -p %d -batch -ex 'set pagination off' -ex 'thread apply all bt 12' 2>&1 | grep -v '^\\[New LWP'"
              % pid)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=60)
    ap.add_argument("--protocol", default="http", help="http, grpc, or both (alternating run by run)")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--stall-s", type=float, default=30.0)
    ap.add_argument("--inferd", default=lib.inferd_bin())
    ap.add_argument("--pa", default=os.path.join(lib.REPO_ROOT, ".venv", "bin", "perf_analyzer"))
    ap.add_argument("--out", default="/tmp/pa_stall")
    ap.add_argument("--extra", default="", help="more perf_analyzer options")
    ap.add_argument("--no-busy", action="store_true", help="no busy loop on a core")
    ap.add_argument("--keep-going", action="store_true", help="go on after a stall")
    a = ap.parse_args()
    if not os.access(a.pa, os.X_OK):
        a.pa = "/work/main/.venv/bin/perf_analyzer"
    os.makedirs(a.out, exist_ok=True)
    repo = os.path.join(a.out, "repo")
    if not os.path.isdir(repo):
        lib.gen_models.generate(repo, "test")
    srv = lib.ServerProcess(repo, ["--strict-readiness", "false"], binary=a.inferd).start()
    busy = None if a.no_busy else subprocess.Popen([sys.executable, "-c", "while True: pass"])
    protocols = ["http", "grpc"] if a.protocol == "both" else [a.protocol]

    def command(protocol):
        port = srv.http_port if protocol == "http" else srv.grpc_port
        return port, [a.pa, "-m", "mlp", "-u", "127.0.0.1:%d" % port, "-i", protocol, "--concurrency-range",
                      "%d:%d" % (a.concurrency, a.concurrency), "--request-count", str(a.requests)] + shlex.split(a.extra)

    print("server pid %d, %s\n%s" % (srv.proc.pid, a.inferd, " ".join(command(protocols[0])[1])), flush=True)
    stalls = {p: 0 for p in protocols}
    runs = {p: 0 for p in protocols}
    times = []
    try:
        for i in range(a.runs):
            protocol = protocols[i % len(protocols)]
            runs[protocol] += 1
            port, cmd = command(protocol)
            before, _ = success_count(srv.grpc_url)
            t0 = time.monotonic()
            pa = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            stalled = False
            while pa.poll() is None:
                if time.monotonic() - t0 > a.stall_s and not stalled:
                    stalled = True
                    stalls[protocol] += 1
                    path = os.path.join(a.out, "stall_%02d.txt" % i)
                    now, fails = success_count(srv.grpc_url)
                    with open(path, "w") as f:
                        f.write("run %d (%s) stalled after %.0f s; server successes this run %d (fail total %d), "
                                "asked %d\n\n" % (i, protocol, a.stall_s, now - before, fails, a.requests))
                        f.write(sh("ss -tnpi '( sport = :%d or dport = :%d )'" % (port, port)))
                        f.write(sh("ss -tn state established '( sport = :%d )' | awk 'NR>1 && ($1>0 || $2>0)'"
                                   % port))
                        f.write(sh("ss -tn state established '( dport = :%d )' | awk 'NR>1 && ($1>0 || $2>0)'"
                                   % port))
                        f.write(sh("ss -tan '( sport = :%d or dport = :%d )' | awk 'NR>1 {print $1}' | sort "
                                   "| uniq -c" % (port, port)))
                        f.write("\n--- perf_analyzer (pid %d)\n" % pa.pid)
                        f.write(sh("for t in /proc/%d/task/*; do echo $t $(cat $t/comm) $(cat $t/wchan); done"
                                   % pa.pid))
                        f.write(stacks(pa.pid))
                        f.write("\n--- inferd (pid %d)\n" % srv.proc.pid)
                        f.write(sh("for t in /proc/%d/task/*; do echo $t $(cat $t/comm) $(cat $t/wchan); done"
                                   % srv.proc.pid))
                        f.write(stacks(srv.proc.pid))
                    print("run %d: STALL, recorded in %s" % (i, path), flush=True)
                    pa.kill()
                time.sleep(0.1)
            out = pa.stdout.read()
            dt = time.monotonic() - t0
            after, fails = success_count(srv.grpc_url)
            times.append(dt)
            print("run %d (%s): rc %d, %.1f s, server successes %d, fails %d" % (
                i, protocol, pa.returncode, dt, after - before, fails), flush=True)
            if pa.returncode != 0 and not stalled:
                print(out[-3000:])
            if stalled and not a.keep_going:
                break
    finally:
        if busy:
            busy.kill()
        srv.stop()
    for p in protocols:
        print("%s: %d runs, %d stalls" % (p, runs[p], stalls[p]))
    print("run time min %.1f median %.1f max %.1f s" % (min(times), sorted(times)[len(times) // 2], max(times)))


if __name__ == "__main__":
    main()
