#!/usr/bin/env python3
"""Soak (issue 15): a server under a steady mixed load for a long time, everything counted.

    soak.py --repo DIR --model NAME [--inferd BIN] [--load-bin BIN] [--minutes 10] [--load 0.8]
            [--mix 55:5:30:10] [--period-s 60] [--warmup-s 60] [--threads 4] [--server-args "..."] [--load-args "..."]
            [--server-cores LIST] [--load-cores LIST] [--out DIR]
            [--attacks [--attack-args "..."] [--attack-model NAME]] [--max-p99-spread F] [--rss-bound-mb MB]

The load comes from inferd-load (clients/load, C, gRPC completion queues), not from Python threads: a Python
generator could not keep an open-loop schedule near the GPU's 50-60k req/s, so requests queued inside the client
and its latency became the measurement. inferd-load reports how late each send went out against its schedule
(the schedule lag), so client lag and server latency can be told apart.

1. Measures the model's maximum throughput: inferd-load's closed loop at --probe-concurrency for --probe-s,
   with the soak's own mix (each freed slot draws the next request's kind), requests of every kind per
   second: the maximum of this workload. The mix's cancelled and expiring calls cost the server more than
   their share of answers: at 80 % of the valid-only maximum (--probe-mix none) the seed MLP's server was
   saturated in bursts (p99 per minute 3-360 ms, H200, 2026-11-26) while the GPU-bound 4x4096 held 2-3 ms.
2. Runs --minutes at --load x that rate (inferd-load --request-rate-range R --mix --duration-s
   --report-every-s --period-s): valid requests, invalid ones (the first input one element longer:
   INVALID_ARGUMENT), ones the client cancels 0-1000 us after sending (--cancel-after-us) and ones with a
   1-500 us deadline (--expire-us). Each outcome is counted by kind and final status; only valid requests
   feed the latency figures.
3. Samples the server's RSS and open descriptors every second while the load runs, and per period its
   stage counters (/metrics: mean time per computed request from arrival to answer, queued, computing; rows
   per batch), its own p50 and p99 from arrival to answer and its queue p99 (the bucket deltas of
   inferd_request_duration_seconds and inferd_queue_duration_seconds between the period's two reads: each
   p99 with the bucket it fell in, interpolated inside it), the CPU its thread groups used (/proc/PID/task)
   and the CPU of inferd-load's thread groups (ld-worker: its loop threads; gRPC's timer and executor threads
   apart), printed as "server, period N" lines. A client whose ld-worker threads near one core each answers
   late whatever the server does: its loop sends what is due before it takes the next answer, so its schedule
   lag stays small while answers wait.
4. Once the server has settled (nothing pending, counters still for a moment), compares its statistics with
   the client's counts, then ends it with SIGTERM (exit status 0 expected).

Bounds (the issue's, and the count check made exact where it can be):
- rss, fds: drift < 5 % from the first samples after --warmup-s to the last ones (medians of 5 samples).
- p99: every whole period after --warmup-s has a valid-request p99 within 20 % of the median period's
  (a period needs 20 valid answers to be judged, and one at least must be).
- schedule: the client kept its schedule (every period's lag p99 <= --max-lag-ms, no CLIENT_DROPPED), so
  the latency figures are the server's; when this fails, a failing p99 bound is the client's doing.
- client headroom: in every period inferd-load's loop threads (ld-worker) used under --max-client-busy of a
  core each on average. The lag alone cannot show a busy client: its loop sends what is due before it takes
  the next answer, so it keeps its schedule while answers wait; when this fails, so may the p99 bound.
- counts, exact: every valid request answered OK (valid OK == valid sent); every invalid one answered
  INVALID_ARGUMENT; every request of every kind ended with one status (sent == sum over statuses).
- counts, exact: the server's REJECTED failures (nv_inference_request_failure{reason="REJECTED"}) equal the
  client's INVALID_ARGUMENT answers: validation refuses only the invalid kind, and the soak's models set no
  queue limit (a full queue or an unready model would also count as REJECTED, and make this fail, rightly).
- counts, bounded: the server's success count S (ModelStatistics) counts what it computed, as Triton's does,
  answered or not. Let OK be the client's OK answers of all kinds (an OK answer means computed), G the calls the
  client gave up on (cancel:CANCELLED + expire:DEADLINE_EXCEEDED) and C the server's CANCELED failures (a call
  cancelled or expired while queued: dropped, never computed). Each given-up call is exactly one of: computed
  with its answer dropped (X = S - OK), dropped while queued (counted in C), or never handed to inference (N0:
  cancelled before the server read its message, or at its transport). So
      S >= OK   and   N0 = G - (S - OK) - C >= 0,
  the two inequalities that hold whatever the races (the second is the same as: the server counted no more
  requests, successes and failures of every reason together, than the client sent). Neither side can know X exactly: a server that sent its
  answer cannot tell whether the client's cancel overtook it on the wire, and inferd counts no "answered"
  apart from "computed" (its metrics count success, failure by reason, executions), so X and N0 are reported,
  not bounded further. A valid request, which is neither cancelled nor short of time, has no such race: that
  is why its count is exact.
- exit: SIGTERM ends the server with status 0.
- with --rss-bound-mb: the server's RSS never passed it (any sample).

ATTACKS (--attacks, issue 31): attacks.py (beside this file; its header lists the attacks and what counts as a
refusal) runs from the soak load's start to its end, one attack at a time with --pause-s of nothing held between
two, on the load's cores. Every attack names its own model, --attack-model (attack_target: the seed MLP on one CPU
instance, written into --repo when absent), never the soaked one, so the counts above stay exact for the soaked
model; the server gets --model-control-mode explicit --load-model '*' --allow-client-shm true (unless
--server-args sets them). The first attacks fall inside --warmup-s, so a high-water mark they leave is part of
the baseline; the RSS and descriptor drift are then judged on the quiet samples only (none within 0.5 s before an
attack or 1.5 s after it: 300 held connections are not a descriptor leak), and the p99 bound becomes the issue's
2x (--max-p99-spread 1.0) unless given. Added bounds:
- attacks: no unexpected outcome (the server died, stopped answering /v2/health/live, owed an answer past
  --bound-s, a fresh connection went unserved while an attack held its resources, or a call of attacks.py's
  second client, one inference of attack_victim every 50 ms on its own connection, failed; the attacks during
  which that client's p99 passed 2x its p99 in the pauses are listed in the verdict, not judged) and none of the
  attacker's own code failed ("error"). Refused and absorbed (not capped) are both accepted; each attack's line
  ("attack: KIND OUTCOME (s): detail") and the summary ("attacks" in the JSON) say which was which.
Prints one JSON summary line, a verdict line per bound ("PASS"/"FAIL"), and exits 1 when a bound fails.
Runs anywhere (the CPU build for a smoke: tiny periods, loose figures on a shared VM); the recorded soak is the
device's (tests/bench/RESULTS.md, device.sh).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration"))

import inferd_testlib as lib  # noqa: E402
import attacks  # noqa: E402  (beside this file: the target model's writer)

sys.path.insert(0, os.path.join(HERE, "..", "serve_gpu"))
from cpu_per_request import snapshot  # noqa: E402  (per-thread CPU ticks: one home)


def proc_sample(pid):
    rss = 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
    return rss, len(os.listdir("/proc/%d/fd" % pid))


def thread_cpu(pid):
    """{thread group (name without its trailing number): CPU ticks} of every thread of pid."""
    out = {}
    for group, ticks, _ in snapshot(pid).values():
        out[group] = out.get(group, 0) + ticks
    return out


STAGES = ("nv_inference_request_success", "nv_inference_request_duration_us", "nv_inference_queue_duration_us",
          "nv_inference_compute_input_duration_us", "nv_inference_compute_infer_duration_us",
          "nv_inference_compute_output_duration_us", "nv_inference_exec_count")


HISTS = ("inferd_request_duration_seconds", "inferd_queue_duration_seconds")
HEAP = ("inferd_memory_allocated_bytes", "inferd_memory_allocator_resident_bytes")


def stage_counters(http_url, model):
    """The server's cumulative per-stage counters for model, from /metrics, and its latency histograms' cumulative
    buckets ({histogram: [(upper bound in s, count)] by bound, +Inf last})."""
    with urllib.request.urlopen(http_url + "/metrics", timeout=10) as r:
        samples = lib.parse_metrics(r.read().decode())
    out = {n: lib.metric_sum(samples, n, model=model) for n in STAGES}
    # the heap allocator's view (server/alloc.h): live allocations apart from the pages it keeps
    for n in HEAP:
        out[n] = lib.metric_sum(samples, n) if lib.metric_present(samples, n) else None
    for h in HISTS:
        by_le = {}
        for name, labels, v in samples:
            if name == h + "_bucket" and labels.get("model") == model:
                le = float("inf") if labels["le"] == "+Inf" else float(labels["le"])
                by_le[le] = by_le.get(le, 0) + v  # summed over versions
        out[h] = sorted(by_le.items())
    return out


def hist_quantile(b0, b1, q):
    """The q-quantile of what a cumulative Prometheus histogram counted between two reads (b0 -> b1): (lo, hi,
    estimate) in microseconds, the quantile lying in the bucket (lo, hi] (hi inf: beyond the last bound) and the
    estimate interpolated linearly inside it as Prometheus' histogram_quantile does (lo when hi is inf); None when
    nothing was counted."""
    first = dict(b0)
    delta = [(le, c - first.get(le, 0)) for le, c in b1]
    total = delta[-1][1] if delta else 0
    if total <= 0:
        return None
    rank, lo, below = q * total, 0.0, 0
    for le, c in delta:
        if c >= rank:
            if le == float("inf"):
                return round(lo * 1e6, 1), None, round(lo * 1e6, 1)
            est = lo + (le - lo) * ((rank - below) / (c - below) if c > below else 1.0)
            return round(lo * 1e6, 1), round(le * 1e6, 1), round(est * 1e6, 1)
        lo, below = le, c
    return None


def client_cpu(pid):
    """{thread group: CPU ticks} of inferd-load (pid), or {} when it has ended."""
    try:
        return thread_cpu(pid)
    except OSError:
        return {}


def period_view(prev, cur, secs):
    """What one period of the soak looked like inside the server: per request computed, the mean time from
    arrival to answer and in the queue, compute, batches; CPU cores by thread group."""
    (m0, c0, l0), (m1, c1, l1) = prev, cur
    d = {n: m1[n] - m0[n] for n in STAGES}
    ok = d["nv_inference_request_success"] or 1
    tick = os.sysconf("SC_CLK_TCK")

    def by_group(a, b, top=8):
        cores = {g: round((b.get(g, 0) - a.get(g, 0)) / tick / secs, 2) for g in b}
        return dict(sorted(cores.items(), key=lambda kv: -kv[1])[:top])

    # The server's own percentiles: a mean under half a millisecond can hide a p99 of hundreds (lease E).
    # Buckets are coarse (10 us ... 60 s, 1-2.5-5 steps): each p99 says the bucket (lo, hi] it fell in.
    req = hist_quantile(m0["inferd_request_duration_seconds"], m1["inferd_request_duration_seconds"], 0.99)
    req50 = hist_quantile(m0["inferd_request_duration_seconds"], m1["inferd_request_duration_seconds"], 0.5)
    que = hist_quantile(m0["inferd_queue_duration_seconds"], m1["inferd_queue_duration_seconds"], 0.99)
    client = by_group(l0, l1, top=None) if l1 else {}  # l0 {}: the client started within the period
    return {"computed": d["nv_inference_request_success"],
            "request_p50_us": req50[2] if req50 else None,
            "request_p99_us": req[2] if req else None,
            "request_p99_bucket_us": [req[0], req[1]] if req else None,
            "queue_p99_us": que[2] if que else None,
            "queue_p99_bucket_us": [que[0], que[1]] if que else None,
            "request_us": round(d["nv_inference_request_duration_us"] / ok, 1),
            "queue_us": round(d["nv_inference_queue_duration_us"] / ok, 1),
            "compute_us": round((d["nv_inference_compute_input_duration_us"] + d["nv_inference_compute_infer_duration_us"]
                                 + d["nv_inference_compute_output_duration_us"]) / ok, 1),
            "rows_per_batch": round(d["nv_inference_request_success"] / (d["nv_inference_exec_count"] or 1), 1),
            # at the period's end: a leak grows the first, fragmentation only the second
            "heap_allocated_mb": None if m1[HEAP[0]] is None else round(m1[HEAP[0]] / 2**20, 1),
            "heap_resident_mb": None if m1[HEAP[1]] is None else round(m1[HEAP[1]] / 2**20, 1),
            "cores": by_group(c0, c1),
            # inferd-load's threads, the same period: a client near its cores' total is the latency's cause
            "client_cores": client, "client_cores_total": round(sum(client.values()), 2)}


def server_counts(http_url, model):
    """(success, failures by reason, pending) from the server's REST statistics and /metrics."""
    with urllib.request.urlopen("%s/v2/models/%s/stats" % (http_url, model), timeout=10) as r:
        st = json.load(r)
    success = sum(int(m["inference_stats"]["success"]["count"]) for m in st["model_stats"])
    with urllib.request.urlopen(http_url + "/metrics", timeout=10) as r:
        samples = lib.parse_metrics(r.read().decode())
    fails = {}
    for name, labels, v in samples:
        if name == "nv_inference_request_failure" and labels.get("model") == model:
            fails[labels["reason"]] = fails.get(labels["reason"], 0) + int(v)
    pending = lib.metric_sum(samples, "nv_inference_pending_request_count", model=model)
    return success, fails, pending


def settled_counts(http_url, model, timeout=30.0):
    """The counts once nothing is pending and two reads 0.2 s apart agree: a request the client cancelled may
    still be computing after the client saw its CANCELLED, and is counted when it finishes."""
    end = time.monotonic() + timeout
    last = None
    while True:
        cur = server_counts(http_url, model)
        if cur[2] == 0 and cur == last:
            return cur
        if time.monotonic() > end:
            return cur
        last = cur
        time.sleep(0.2)


def taskset(cores):
    return ["taskset", "-c", cores] if cores else []


def run_load(a, args, json_path, log_path, on_tick=None):
    """Runs inferd-load with args (plus -u, -m, --json); on_tick(pid) every second while it runs (taskset execs
    inferd-load, so pid is inferd-load's)."""
    cmd = taskset(a.load_cores) + [a.load_bin, "-u", a.url, "-m", a.model, "--json", json_path] + args
    with open(log_path, "w") as log:
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        while True:
            try:
                p.wait(timeout=1.0)
                break
            except subprocess.TimeoutExpired:
                if on_tick:
                    on_tick(p.pid)
    if p.returncode != 0:
        with open(log_path) as f:
            sys.exit("inferd-load failed (exit %d): %s\n%s" % (p.returncode, " ".join(cmd), f.read()[-3000:]))
    with open(json_path) as f:
        (level,) = json.load(f)
    return level


def drift(samples, idx, warm_t, keep=None):
    """(first, last, drift) of column idx: medians of the first and last 5 samples after warm_t (of those whose
    index keep(i) accepts, when given: the quiet ones between two attacks)."""
    ok = [i for i in range(len(samples)) if keep is None or keep(i)]
    warm = [samples[i][idx] for i in ok if samples[i][0] >= warm_t] or [samples[i][idx] for i in ok]
    if not warm:
        return None, None, 0.0
    first, last = statistics.median(warm[:5]), statistics.median(warm[-5:])
    return first, last, (last - first) / first if first else 0.0


def count_checks(kinds, s_delta, fails_delta):
    """The count bounds of the docstring: (checks [(name, ok, text)], figures {})."""
    ok_all = sum(k.get("OK", 0) for k in kinds.values())
    gave_up = kinds["cancel"].get("CANCELLED", 0) + kinds["expire"].get("DEADLINE_EXCEEDED", 0)
    canceled = fails_delta.get("CANCELED", 0)
    rejected = fails_delta.get("REJECTED", 0)
    invalid_answers = sum(k.get("INVALID_ARGUMENT", 0) for k in kinds.values())
    x = s_delta - ok_all
    n0 = gave_up - x - canceled
    ended = {name: sum(v for s, v in k.items() if s != "sent") for name, k in kinds.items()}
    checks = [
        ("counts: every request ended once", all(ended[n] == k["sent"] for n, k in kinds.items()),
         "sent %s, ended %s" % ({n: k["sent"] for n, k in kinds.items()}, ended)),
        ("counts: valid OK == valid sent", kinds["valid"].get("OK", 0) == kinds["valid"]["sent"],
         "%d of %d (%s)" % (kinds["valid"].get("OK", 0), kinds["valid"]["sent"], kinds["valid"])),
        ("counts: invalid INVALID_ARGUMENT == invalid sent",
         kinds["invalid"].get("INVALID_ARGUMENT", 0) == kinds["invalid"]["sent"], str(kinds["invalid"])),
        ("counts: server REJECTED == client INVALID_ARGUMENT", rejected == invalid_answers,
         "%d == %d" % (rejected, invalid_answers)),
        ("counts: server success >= client OK", x >= 0, "S %d, OK %d (computed, answer dropped: %d)" % (
            s_delta, ok_all, x)),
        ("counts: given up >= dropped answers + dropped while queued", n0 >= 0,
         "G %d = X %d + C %d + never handed to inference %d" % (gave_up, x, canceled, n0)),
    ]
    figures = {"client_ok": ok_all, "gave_up": gave_up, "server_success": s_delta, "server_fail": fails_delta,
               "computed_answer_dropped": x, "never_reached_inference": n0}
    return checks, figures


def start_attacks(a, srv, duration, out):
    """attacks.py for the soak's duration, on the load's cores (not the server's)."""
    cmd = taskset(a.load_cores) + [sys.executable, os.path.join(HERE, "attacks.py"), "--grpc", srv.grpc_url,
                                   "--http", "127.0.0.1:%d" % srv.http_port, "--model", a.attack_model,
                                   "--server-pid", str(srv.proc.pid), "--duration-s", "%.1f" % duration,
                                   "--victim-model", attacks.VICTIM,
                                   "--log", os.path.join(out, "attacks.jsonl")] + a.attack_args.split()
    log = open(os.path.join(out, "attacks.out"), "w")
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    print("attacks: %s" % " ".join(cmd), file=sys.stderr)
    return p


def end_attacks(p, out, grace_s=120):
    """Waits for attacks.py (its last attack may end after the load); {"rc", "summary", "lines"}."""
    try:
        p.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    lines, summary = [], None
    with open(os.path.join(out, "attacks.out")) as f:
        for line in f:
            try:
                x = json.loads(line)
            except ValueError:
                continue
            if "summary" in x:
                summary = x["summary"]
            else:
                lines.append(x)
    for x in lines:
        v = "" if x.get("victim_p99_ms") is None else " [second client p99 %s ms, pauses' %s ms]" % (
            x["victim_p99_ms"], x.get("victim_base_p99_ms"))
        print("attack: %s %s (%.1f s): %s%s" % (x["kind"], x["outcome"], x["s"], x["detail"][:160], v), file=sys.stderr)
    return {"rc": p.returncode, "summary": summary, "lines": lines}


def attack_checks(att):
    s = att["summary"]
    if s is None:
        return [("attacks: the attacker ended with a summary", False, "exit %r, no summary (attacks.out)" % att["rc"])]
    return [("attacks: no unexpected outcome", not s["unexpected"] and not s["server_died"],
             "%d attacks, by kind %s; unexpected %s; the second client's p99 over 2x its pauses' during %s" % (
                 s["attacks"], json.dumps(s["by_kind"]), s["unexpected"][:3], s.get("victim_slow", [])[:5])),
            ("attacks: the attacker's own code ran clean", not s["errors"], "errors in %s" % s["errors"])]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repo", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--inferd", default=None)
    ap.add_argument("--load-bin", default=None, help="inferd-load (default: beside --inferd)")
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--load", type=float, default=0.8)
    ap.add_argument("--mix", default="55:5:30:10")
    ap.add_argument("--cancel-after-us", default="0:1000")
    ap.add_argument("--expire-us", default="1:500")
    ap.add_argument("--period-s", type=float, default=60, help="p99 per period (the issue's minute)")
    ap.add_argument("--warmup-s", type=float, default=60, help="periods and samples before this are not judged")
    ap.add_argument("--max-lag-ms", type=float, default=5, help="the schedule bound on each period's lag p99")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--max-client-busy", type=float, default=0.85,
                    help="the client headroom bound: ld-worker cores per load thread, every period")
    ap.add_argument("--connections", type=int, default=0, help="0: inferd-load's default (one per thread)")
    ap.add_argument("--probe-s", type=float, default=10)
    ap.add_argument("--probe-concurrency", type=int, default=64)
    ap.add_argument("--probe-mix", default="",
                    help="the probe's request mix (default: --mix); 'none': valid requests only")
    ap.add_argument("--server-args", default="", help='e.g. "--grpc-transport-offload false"')
    ap.add_argument("--load-args", default="", help='more inferd-load options, e.g. "--grpc-transport-offload"')
    ap.add_argument("--server-cores", default="", help="taskset list for the server (default: no pinning)")
    ap.add_argument("--load-cores", default="", help="taskset list for inferd-load")
    ap.add_argument("--out", default=None)
    ap.add_argument("--max-p99-spread", type=float, default=None,
                    help="the p99 bound: each period within this fraction of the median's (default 0.2; 1.0, the "
                         "issue's 2x, with --attacks)")
    ap.add_argument("--rss-bound-mb", type=float, default=0, help="also fail when the server's RSS ever passes this")
    ap.add_argument("--attacks", action="store_true",
                    help="attacks.py beside the load for its whole duration (issue 31; see ATTACKS in the header)")
    ap.add_argument("--attack-args", default="", help='more attacks.py options, e.g. "--scale 0.1 --hold-s 5"')
    ap.add_argument("--attack-model", default="attack_target", help="the model attacks.py names (written if absent)")
    a = ap.parse_args()
    if a.max_p99_spread is None:
        a.max_p99_spread = 1.0 if a.attacks else 0.2
    binary = a.inferd or lib.inferd_bin()
    a.load_bin = a.load_bin or os.path.join(os.path.dirname(os.path.abspath(binary)), "inferd-load")
    out = a.out or os.path.join("/tmp", "soak_%s_%d" % (a.model, os.getpid()))
    os.makedirs(out, exist_ok=True)

    server_args = a.server_args.split()
    if a.attacks:
        # the target: a model of its own, so the soaked model's statistics stay exact; attack 1 loads it with a
        # config override (explicit model control), attack 8 registers shared memory
        if not all(os.path.isdir(os.path.join(a.repo, m)) for m in (a.attack_model, attacks.VICTIM)):
            attacks.write_target(a.repo, a.attack_model)
        for flag, val in (("--model-control-mode", "explicit"), ("--load-model", "*"), ("--allow-client-shm", "true")):
            if flag not in server_args:
                server_args += [flag, val]
    srv = lib.ServerProcess(a.repo, server_args, binary=binary)
    if a.server_cores:
        srv.args = taskset(a.server_cores) + srv.args
    srv.start()
    a.url = srv.grpc_url
    common = ["--threads", str(a.threads)] + (["--connections", str(a.connections)] if a.connections else []) \
        + a.load_args.split()

    probe_mix = a.probe_mix or a.mix
    mix_args = [] if probe_mix == "none" else ["--mix", probe_mix, "--cancel-after-us", a.cancel_after_us,
                                               "--expire-us", a.expire_us, "--report-every-s", str(a.probe_s)]
    probe = run_load(a, ["--concurrency-range", str(a.probe_concurrency), "--duration-s", str(a.probe_s)] + mix_args +
                     common, os.path.join(out, "probe.json"), os.path.join(out, "probe.log"))
    if mix_args:  # every kind counts: the rate the soak's schedule sends at is of all kinds
        (period,) = probe["periods"]
        max_rps = sum(k["sent"] for k in period["kinds"].values()) / period["seconds"]
    else:
        max_rps = probe["throughput_rps"]
    rate = max_rps * a.load
    s0, f0, _ = settled_counts(srv.http_url, a.model)
    print("max %.0f req/s (closed loop, %d in flight, mix %s); soak at %.0f req/s for %.2f min, mix %s" % (
        max_rps, a.probe_concurrency, probe_mix, rate, a.minutes, a.mix), file=sys.stderr)

    samples = []  # (t_s, rss_bytes, fds)
    walls = []  # the wall clock of each sample (attacks.py stamps its attacks with it)
    t0 = time.monotonic()

    # inside the server, per period: where a request's time went and which threads had the CPU
    views, last_view = [], None
    try:
        last_view = (stage_counters(srv.http_url, a.model), thread_cpu(srv.proc.pid), {})
    except OSError:
        pass

    def tick(load_pid):
        nonlocal last_view
        try:
            rss, fds = proc_sample(srv.proc.pid)
        except OSError:  # gone (the count checks say so)
            return
        if rss:  # 0: a zombie, no longer a server
            samples.append((time.monotonic() - t0, rss, fds))
            walls.append(time.time())
        if last_view and time.monotonic() - t0 >= (len(views) + 1) * a.period_s:
            try:
                cur = (stage_counters(srv.http_url, a.model), thread_cpu(srv.proc.pid), client_cpu(load_pid))
            except OSError:
                return
            views.append(period_view(last_view, cur, a.period_s))
            last_view = cur
            print("server, period %d: %s" % (len(views), json.dumps(views[-1])), file=sys.stderr)

    duration = a.minutes * 60
    attacker = start_attacks(a, srv, duration, out) if a.attacks else None
    level = run_load(a, ["--request-rate-range", "%.3f" % rate, "--mix", a.mix, "--cancel-after-us", a.cancel_after_us,
                         "--expire-us", a.expire_us, "--duration-s", str(duration), "--report-every-s",
                         str(min(a.period_s, duration)), "--timeout-ms", "10000"] + common,
                     os.path.join(out, "soak_load.json"), os.path.join(out, "soak_load.log"), on_tick=tick)
    kinds = level["kinds"]
    att = end_attacks(attacker, out) if attacker else None
    try:
        s1, f1, pending = settled_counts(srv.http_url, a.model)
    except OSError as e:  # the server died under the load: every count is moot, say so
        s1, f1, pending = None, {}, None
        died = "server statistics unreadable (%s); server alive: %s; stderr tail:\n%s" % (
            e, srv.alive(), srv.stderr_tail(20))
    srv.stop()
    if s1 is None:
        checks, figures = [("counts: server statistics", False, died)], {}
    else:
        fails_delta = {r: f1.get(r, 0) - f0.get(r, 0) for r in f1}
        checks, figures = count_checks(kinds, s1 - s0, fails_delta)
        if pending:
            checks.append(("counts: server settled", False, "%d requests still pending after 30 s" % pending))

    keep = None
    if att is not None:
        # drift is what stays: judged on the samples taken while no attack held anything (the pauses between)
        windows = [(x["start_unix"] - 0.5, x["end_unix"] + 1.5) for x in att["lines"] if "start_unix" in x]

        def keep(i):
            return not any(lo <= walls[i] <= hi for lo, hi in windows)
    rss_first, rss_last, rss_drift = drift(samples, 1, a.warmup_s, keep)
    fd_first, fd_last, fd_drift = drift(samples, 2, a.warmup_s, keep)
    rss_max = max((r for _, r, _ in samples), default=0)
    if a.rss_bound_mb:
        checks.append(("rss under %.0f MB" % a.rss_bound_mb, bool(samples) and rss_max < a.rss_bound_mb * 2**20,
                       "largest sample %.1f MB" % (rss_max / 2**20)))
    if att is not None:
        checks += attack_checks(att)
    checks.append(("rss drift < 5 %", bool(samples) and abs(rss_drift) < 0.05, "%.1f -> %.1f MB (%+.2f %%)" % (
        (rss_first or 0) / 2**20, (rss_last or 0) / 2**20, 100 * rss_drift)))
    checks.append(("fds drift < 5 %", bool(samples) and abs(fd_drift) < 0.05, "%s -> %s (%+.2f %%)" % (fd_first, fd_last,
                                                                                      100 * fd_drift)))

    periods = level["periods"]
    full = [p for p in periods if p["seconds"] >= 0.9 * min(a.period_s, duration)]
    judged = [p for p in full if p["start_s"] >= a.warmup_s - 1e-6] or full
    p99s = [p["valid"]["p99_us"] / 1e3 for p in judged if p["valid"]["ok"] >= 20]
    med = statistics.median(p99s) if p99s else 0.0
    spread = max(abs(v - med) / med for v in p99s) if med else 0.0
    checks.append(("p99 per period within %.0f %% of the median" % (100 * a.max_p99_spread),
                   len(p99s) >= 1 and spread <= a.max_p99_spread,
                   "%d periods judged, p99 ms %s, median %.3f, spread %.0f %%" % (
                       len(p99s), [round(v, 3) for v in p99s], med, 100 * spread)))
    lag99 = max((p["lag_us"]["p99"] for p in periods), default=0.0) / 1e3
    lag_max = max((p["lag_us"]["max"] for p in periods), default=0.0) / 1e3
    dropped = sum(k.get("CLIENT_DROPPED", 0) for k in kinds.values())
    checks.append(("schedule kept by the client", lag99 <= a.max_lag_ms and dropped == 0,
                   "largest period lag p99 %.3f ms (bound %.1f), max %.3f ms, %d dropped at the in-flight cap" % (
                       lag99, a.max_lag_ms, lag_max, dropped)))
    busy = [round(v["client_cores"].get("ld-worker", 0) / a.threads, 2) for v in views if v["client_cores"]]
    checks.append(("client headroom", bool(busy) and max(busy) < a.max_client_busy,
                   "ld-worker cores per load thread by period %s (bound %.2f)" % (busy, a.max_client_busy)
                   if busy else "not measured (no period while inferd-load ran)"))
    checks.append(("exit 0 on SIGTERM", srv.returncode == 0, "exit status %r" % srv.returncode))
    # the mix cancels 30 % of its calls: under the rapid-reset guard's half, so no connection may be cut off
    log = srv.stderr_text()
    with open(os.path.join(out, "inferd.log"), "w") as f:
        f.write(log + "\n")
    cut = [x for x in log.splitlines() if "HTTP/2 rapid reset" in x]
    checks.append(("no connection ended by the rapid-reset guard", not cut,
                   "%d ended%s" % (len(cut), (": " + cut[0]) if cut else "")))

    sent = sum(k["sent"] for k in kinds.values())
    summary = {
        "model": a.model, "minutes": a.minutes, "max_rps": round(max_rps), "rate": round(rate),
        "achieved_rps": round(sent / duration, 1) if duration else None, "sent": sent, "kinds": kinds,
        **figures,
        "rss_first_mb": round((rss_first or 0) / 2**20, 1), "rss_last_mb": round((rss_last or 0) / 2**20, 1),
        "rss_drift": round(rss_drift, 4), "rss_max_mb": round(rss_max / 2**20, 1),
        # the RSS curve: a leak climbs every period, a high-water mark levels off
        "rss_mb_at_period_end": [round(([r for t, r, _ in samples if t <= (k + 1) * a.period_s] or [0])[-1] / 2**20, 1)
                                 for k in range(int(duration // a.period_s) if duration else 0)],
        # the heap allocator's own figures at each period's end (server/alloc.h): live allocations, pages held
        "heap_allocated_mb_per_period": [v["heap_allocated_mb"] for v in views],
        "heap_resident_mb_per_period": [v["heap_resident_mb"] for v in views],
        "fds_first": fd_first, "fds_last": fd_last, "fd_drift": round(fd_drift, 4),
        "p99_ms_per_period": [round(p["valid"]["p99_us"] / 1e3, 3) for p in periods],
        "p50_ms_per_period": [round(p["valid"]["p50_us"] / 1e3, 3) for p in periods],
        "lag_p99_ms_per_period": [round(p["lag_us"]["p99"] / 1e3, 3) for p in periods],
        "client_busy_per_period": busy,
        "p99_spread": round(spread, 3), "exit": srv.returncode, "connections_ended": len(cut),
        "failed": [name for name, ok, _ in checks if not ok],
    }
    if att is not None:
        summary["attacks"] = att["summary"]
        summary["quiet_samples"] = sum(1 for i in range(len(samples)) if keep(i))
    print(json.dumps(summary))
    with open(os.path.join(out, "soak_%s.json" % a.model), "w") as f:
        json.dump({"summary": summary, "samples": samples, "periods": periods, "server_periods": views}, f)
    for name, ok, text in checks:
        print("%s %s: %s" % ("PASS" if ok else "FAIL", name, text), file=sys.stderr)
    print("bounds: %s" % ("all met" if not summary["failed"] else "; ".join(summary["failed"])), file=sys.stderr)
    return 1 if summary["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
