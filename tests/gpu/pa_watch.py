#!/usr/bin/env python3
"""Runs one perf_analyzer command and watches where its time goes (issue 14: at 60,000+ infer/s over gRPC it
printed "Pass [2]" and then nothing for minutes while the server kept answering). Standard library only.

    pa_watch.py OUT_DIR TIMEOUT_S -- PERF_ANALYZER ARGS...

Writes OUT_DIR/pa.txt (its output, each line prefixed with the seconds since the start), OUT_DIR/samples.tsv
(every 0.5 s: time, the main thread's CPU seconds (user+system), all threads' CPU seconds, resident MiB, the main
thread's state and kernel wait) and OUT_DIR/watch.json (the summary below), and prints the summary.

perf_analyzer's main thread runs the measurement loop: it sleeps through each window, then asks the server for
ModelStatistics, collects the workers' request records and sorts them into the window (InferenceProfiler::
Measure/Summarize); the worker threads send the load meanwhile. So between two "Pass" lines the main thread
should use little CPU beyond the bookkeeping; a main thread blocked on an RPC (an answer the server never sent)
sleeps at ~0 CPU, one stuck in bookkeeping runs at ~100% of a core. The summary gives, per pass, the seconds
since the previous one and the main thread's CPU seconds in that interval, and the same for the stretch after
the last line (the hang); for the part of that stretch since the main thread last slept through a window, its
CPU seconds and how often it was runnable (R) or waiting (its wait channel). Where gdb exists, the main
thread's stack is taken (3 times at most) while it is busy after the first pass, or once the output has been
quiet for QUIET_S seconds (env, 20): OUT_DIR/stacks.txt. Exit status: perf_analyzer's; 124 when it was
stopped at TIMEOUT_S.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

TICK = os.sysconf("SC_CLK_TCK")
QUIET_S = float(os.environ.get("QUIET_S", "20"))
BUSY = 0.3  # of a core: the main thread shares the CPUs with the workers (on a small machine a third of one)


def cpu_s(stat_path):
    """utime+stime of a /proc stat file, in seconds; None once the task is gone."""
    try:
        with open(stat_path) as f:
            s = f.read()
    except OSError:
        return None
    fields = s.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK, fields[0]


def rss_mib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def wchan(pid):
    try:
        with open("/proc/%d/task/%d/wchan" % (pid, pid)) as f:
            return f.read().strip() or "0"
    except OSError:
        return "?"


def main_stack(pid):
    """The main thread's stack from gdb (which stops the process briefly), or None without gdb."""
    if not shutil.which("gdb"):
        return None
    try:
        p = subprocess.run(["gdb", "-p", str(pid), "-batch", "-ex", "thread 1", "-ex", "bt 12"],
                           capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "gdb timed out"
    frames = []
    for line in p.stdout.splitlines():
        m = re.match(r"#(\d+)\s+(?:0x[0-9a-f]+ in )?([^(]+)", line)
        if m and (not frames or frames[-1][0] != m.group(1)):  # gdb repeats frame 0 after 'thread 1'
            frames.append((m.group(1), m.group(2).strip()[:160]))
    return "\n".join("#%s %s" % f for f in frames)


def main():
    if len(sys.argv) < 5 or sys.argv[3] != "--":
        sys.exit(__doc__.split("\n\n")[1])
    out_dir, timeout_s, cmd = sys.argv[1], float(sys.argv[2]), sys.argv[4:]
    os.makedirs(out_dir, exist_ok=True)
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    lines = []  # (t, text)
    mu = threading.Lock()

    def read():
        with open(os.path.join(out_dir, "pa.txt"), "w") as f:
            for line in p.stdout:
                t = time.monotonic() - t0
                with mu:
                    lines.append((t, line.rstrip("\n")))
                f.write("%8.2f %s" % (t, line))
                f.flush()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    samples = []  # (t, main cpu, all cpu, rss, state, wchan)
    stacks = []
    timed_out = False
    with open(os.path.join(out_dir, "samples.tsv"), "w") as f:
        f.write("t\tmain_cpu_s\tall_cpu_s\trss_mib\tmain_state\tmain_wchan\n")
        while p.poll() is None:
            t = time.monotonic() - t0
            m = cpu_s("/proc/%d/task/%d/stat" % (p.pid, p.pid))
            a = cpu_s("/proc/%d/stat" % p.pid)
            if m and a:
                row = (round(t, 2), m[0], a[0], rss_mib(p.pid), m[1], wchan(p.pid))
                samples.append(row)
                f.write("\t".join(str(x) for x in row) + "\n")
                f.flush()
            with mu:
                quiet = t - (lines[-1][0] if lines else 0)
                passed = any("Pass [" in text for _, text in lines)
            # stacks, 3 at most, 5 s apart: while the main thread is busy (above BUSY of a core over the last
            # second: bookkeeping), or once the output has been quiet for QUIET_S (blocked somewhere); not
            # while it sleeps through a window
            busy = (passed and len(samples) > 2 and
                    samples[-1][1] - samples[-3][1] > BUSY * (samples[-1][0] - samples[-3][0]))
            asleep_in_window = bool(samples) and samples[-1][5] == "hrtimer_nanosleep"  # nothing to see
            if ((busy or quiet > QUIET_S) and not asleep_in_window and len(stacks) < 3 and
                    (not stacks or t - stacks[-1][0] > 5)):
                st = main_stack(p.pid)
                if st is not None:
                    stacks.append((round(t, 1), st))
            if t > timeout_s:
                timed_out = True
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                break
            time.sleep(0.5)
    rc = p.wait()
    reader.join(5)
    if stacks:
        with open(os.path.join(out_dir, "stacks.txt"), "w") as f:
            for t, st in stacks:
                f.write("== t=%.1f s, main thread\n%s\n" % (t, st))

    def main_cpu_between(a, b):
        xs = [s for s in samples if a <= s[0] <= b]
        return round(xs[-1][1] - xs[0][1], 2) if len(xs) > 1 else None

    passes, prev = [], 0.0
    for t, text in lines:
        m = re.search(r"Pass \[(\d+)\] throughput: ([\d.]+)", text)
        if m:
            passes.append({"pass": int(m.group(1)), "at_s": round(t, 2), "since_prev_s": round(t - prev, 2),
                           "main_cpu_s": main_cpu_between(prev, t), "infer_per_s": float(m.group(2))})
            prev = t
    end = samples[-1][0] if samples else prev
    # the stretch since the main thread last slept through a window (sleep_for: hrtimer_nanosleep), after the
    # last pass: its bookkeeping, or a wait on something else; how it spent it (R: running or runnable, which on
    # a crowded machine is computing without a core; S with a wait channel: blocked there)
    after = [s for s in samples if s[0] >= prev]
    k = max((i for i, s in enumerate(after) if s[5] == "hrtimer_nanosleep"), default=-1)
    tail = after[k + 1:]
    waits = {}
    for s in tail:
        key = "R" if s[4] == "R" else "%s %s" % (s[4], s[5])
        waits[key] = waits.get(key, 0) + 1
    summary = {
        "cmd": " ".join(cmd), "rc": 124 if timed_out else rc, "timed_out": timed_out,
        "passes": passes,
        "after_last_pass": {"seconds": round(end - prev, 2), "main_cpu_s": main_cpu_between(prev, end),
                            "rss_mib_at_last_pass": next((s[3] for s in samples if s[0] >= prev), None),
                            "rss_mib_at_end": samples[-1][3] if samples else None},
        "since_last_sleep": {"seconds": round(tail[-1][0] - tail[0][0], 2) if len(tail) > 1 else 0,
                             "main_cpu_s": round(tail[-1][1] - tail[0][1], 2) if len(tail) > 1 else 0,
                             "runnable_share": round(waits.get("R", 0) / len(tail), 2) if tail else None,
                             "states": waits},
        "stacks": [st for _, st in stacks],
    }
    with open(os.path.join(out_dir, "watch.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary, indent=1))
    return summary["rc"]


if __name__ == "__main__":
    sys.exit(main())
