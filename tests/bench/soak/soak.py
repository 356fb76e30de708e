#!/usr/bin/env python3
"""Soak (issue 15): a server under a steady mixed load for a long time, everything counted.

    soak.py --repo DIR --model NAME [--inferd BIN] [--minutes 10] [--load 0.8] [--workers 16]
            [--server-args "..."] [--out DIR]

1. Measures the model's maximum throughput for --probe-s seconds (workers sending valid requests back to back).
2. Runs --minutes at --load x that rate, paced, with a mix per request: 55 % valid, 5 % invalid (a wrong
   shape: INVALID_ARGUMENT), 30 % cancelled by the client shortly after sending, 10 % with a deadline too short
   to meet (DEADLINE_EXCEEDED or answered in time: both counted).
3. Samples the server's RSS and open descriptors every second; keeps a p99 of the valid requests per minute.
4. At the end compares the server's own success count (ModelStatistics) with the client's counts, and ends
   the server with SIGTERM (exit status 0 expected).

Bounds checked (the issue's): RSS and descriptors drift < 5 % from the first minute (after warm-up) to the
end; per-minute p99 within 20 % of the median minute; client OK <= server successes <= client OK + the
requests the client cancelled or let expire (the server counts what it computed, as Triton does: such a
request may have been finished before the client gave up); no request without an answer. Prints one JSON summary line and a table; exit status 1 when a bound fails.
Runs anywhere (the CPU build for a smoke); the recorded soak is the device's (tests/bench/RESULTS.md).
"""

import argparse
import json
import os
import signal
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration"))

import grpc  # noqa: E402
import numpy as np  # noqa: E402
from tritonclient.grpc import service_pb2, service_pb2_grpc  # noqa: E402

import inferd_testlib as lib  # noqa: E402


def make_request(meta, rng, bad=False):
    r = service_pb2.ModelInferRequest(model_name=meta.name)
    for t in meta.inputs:
        shape = [1 if d < 0 else d for d in t.shape]
        if bad:
            shape[-1] += 1  # one element too many: INVALID_ARGUMENT
        x = r.inputs.add()
        x.name, x.datatype = t.name, t.datatype
        x.shape.extend(shape)
        n = int(np.prod(shape))
        dt = {"FP32": np.float32, "FP16": np.float16, "INT64": np.int64, "INT32": np.int32}[t.datatype]
        r.raw_input_contents.append(rng.standard_normal(n).astype(dt).tobytes())
    return r


def proc_sample(pid):
    rss = 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
    return rss, len(os.listdir("/proc/%d/fd" % pid))


def server_success(stub, model):
    st = stub.ModelStatistics(service_pb2.ModelStatisticsRequest(name=model), timeout=10)
    return sum(m.inference_stats.success.count for m in st.model_stats)


def probe(stub, reqs, workers, seconds):
    done = [0] * workers
    end = time.monotonic() + seconds

    def run(k):
        while time.monotonic() < end:
            stub.ModelInfer(reqs[k % len(reqs)], timeout=10)
            done[k] += 1
    ths = [threading.Thread(target=run, args=(k,)) for k in range(workers)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    return sum(done) / seconds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--inferd", default=None)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--load", type=float, default=0.8)
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--probe-s", type=float, default=10)
    ap.add_argument("--server-args", default="")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()

    srv = lib.ServerProcess(a.repo, a.server_args.split(), binary=a.inferd).start()
    ch = grpc.insecure_channel(srv.grpc_url, options=[("grpc.max_receive_message_length", -1)])
    stub = service_pb2_grpc.GRPCInferenceServiceStub(ch)
    meta = stub.ModelMetadata(service_pb2.ModelMetadataRequest(name=a.model), timeout=10)
    rng = np.random.default_rng(0)
    good = [make_request(meta, rng) for _ in range(8)]
    bad = make_request(meta, rng, bad=True)

    max_rps = probe(stub, good, a.workers, a.probe_s)
    rate = max_rps * a.load
    ok0 = server_success(stub, a.model)
    print("max %.0f req/s; soak at %.0f req/s for %.1f min" % (max_rps, rate, a.minutes), file=sys.stderr)

    counts = {}
    lock = threading.Lock()
    lat = {}  # minute -> latencies of valid requests answered OK (s)
    samples = []
    pending = []
    stop = threading.Event()
    t0 = time.monotonic()

    def count(key):
        with lock:
            counts[key] = counts.get(key, 0) + 1

    def on_done(kind, sent, fut):
        try:
            fut.result()
            count(kind + ":OK")
            if kind == "valid":
                with lock:
                    lat.setdefault(int((sent - t0) // 60), []).append(time.monotonic() - sent)
        except grpc.FutureCancelledError:  # our cancel() won the race
            count(kind + ":CANCELLED")
        except grpc.RpcError as e:
            count(kind + ":" + e.code().name)

    def sampler():
        while not stop.wait(1.0):
            samples.append((time.monotonic() - t0,) + proc_sample(srv.proc.pid))

    sth = threading.Thread(target=sampler, daemon=True)
    sth.start()
    end = t0 + a.minutes * 60
    i = 0
    while True:
        now = time.monotonic()
        if now >= end:
            break
        due = t0 + i / rate
        if due > now:
            time.sleep(due - now)
        u = (i * 0.6180339887) % 1.0  # a fixed, well-spread mix
        sent = time.monotonic()
        if u < 0.05:
            kind, f = "invalid", stub.ModelInfer.future(bad, timeout=10)
        elif u < 0.35:
            kind, f = "cancelled", stub.ModelInfer.future(good[i % 8], timeout=10)
        elif u < 0.45:
            kind, f = "deadline", stub.ModelInfer.future(good[i % 8], timeout=0.0005)
        else:
            kind, f = "valid", stub.ModelInfer.future(good[i % 8], timeout=10)
        f.add_done_callback(lambda fut, k=kind, s=sent: on_done(k, s, fut))
        if kind == "cancelled":
            f.cancel()
        pending.append(f)
        if len(pending) > 20000:
            pending = [p for p in pending if not p.done()]
        i += 1
    # every future must resolve
    hung = 0
    for f in pending:
        try:
            f.result(timeout=30)
        except grpc.FutureTimeoutError:
            hung += 1
        except (grpc.RpcError, grpc.FutureCancelledError):
            pass
    time.sleep(1.5)  # the callbacks of the last futures
    stop.set()
    server_ok = server_success(stub, a.model) - ok0
    client_ok = sum(v for k, v in counts.items() if k.endswith(":OK"))
    srv.stop()
    ch.close()

    warm = [s for s in samples if s[0] >= 60] or samples
    rss_drift = (warm[-1][1] - warm[0][1]) / warm[0][1] if warm else 0.0
    fd_drift = (warm[-1][2] - warm[0][2]) / warm[0][2] if warm else 0.0
    full = int(a.minutes)  # whole minutes only: a last partial minute is not comparable
    p99s = {m: float(np.percentile(v, 99)) * 1e3 for m, v in sorted(lat.items()) if len(v) >= 20 and m < max(full, 1)}
    med = statistics.median(p99s.values()) if p99s else 0.0
    p99_spread = max(abs(v - med) / med for v in p99s.values()) if med else 0.0
    summary = {
        "model": a.model, "minutes": a.minutes, "max_rps": round(max_rps), "rate": round(rate), "sent": i,
        "counts": counts, "hung": hung, "server_success": server_ok, "client_ok": client_ok,
        "rss_first_mb": round(warm[0][1] / 2**20, 1) if warm else None,
        "rss_last_mb": round(warm[-1][1] / 2**20, 1) if warm else None,
        "rss_drift": round(rss_drift, 4), "fds_first": warm[0][2] if warm else None,
        "fds_last": warm[-1][2] if warm else None, "fd_drift": round(fd_drift, 4),
        "p99_ms_per_minute": {str(k): round(v, 3) for k, v in p99s.items()}, "p99_spread": round(p99_spread, 3),
        "exit": srv.returncode,
    }
    fails = []
    if hung:
        fails.append("%d requests never answered" % hung)
    # The server counts what it computed (Triton's statistics); a request the client cancelled or let
    # expire after the server finished it is a server success the client never saw. So: every client OK
    # is a server success, and the extra ones are at most the requests the client gave up on.
    gave_up = sum(v for k, v in counts.items() if k.split(":")[1] in ("CANCELLED", "DEADLINE_EXCEEDED"))
    summary["client_gave_up"] = gave_up
    if not client_ok <= server_ok <= client_ok + gave_up:
        fails.append("server success %d outside [client OK %d, + gave up %d]" % (server_ok, client_ok, gave_up))
    if abs(rss_drift) >= 0.05:
        fails.append("RSS drift %.1f %%" % (100 * rss_drift))
    if abs(fd_drift) >= 0.05:
        fails.append("descriptor drift %.1f %%" % (100 * fd_drift))
    if len(p99s) >= 2 and p99_spread > 0.2:
        fails.append("p99 per minute spread %.0f %%" % (100 * p99_spread))
    if srv.returncode != 0:
        fails.append("exit status %r" % srv.returncode)
    summary["failed"] = fails
    print(json.dumps(summary))
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "soak_%s.json" % a.model), "w") as f:
            json.dump({"summary": summary, "samples": samples}, f)
    for k in sorted(counts):
        print("%-22s %9d" % (k, counts[k]), file=sys.stderr)
    print("bounds: %s" % ("all met" if not fails else "; ".join(fails)), file=sys.stderr)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
