#!/usr/bin/env python3
"""Issue 14's client-side check of what perf_analyzer depends on between two passes: ModelInfer at a fixed
concurrency and ModelStatistics polled beside it, with deadlines on every call, so an answer the server loses
or holds back shows up as a call that ran past its deadline instead of as a silent hang.

    stats_probe.py --url HOST:PORT [--model simplenet] [--concurrency 64] [--seconds 20] [--channels 1]
                   [--stats-deadline 5] [--infer-deadline 10] [--stats-interval 0] [--json OUT]

ModelInfer runs closed loop: --concurrency calls in flight at all times (0: none, statistics alone, e.g. beside
perf_analyzer's own load), each answer sending the next (grpcio
futures, so a few Python threads keep many in flight). The calls share --channels channels (1: every call on
one HTTP/2 connection, the worst case for a statistics call queued behind inference; perf_analyzer's
tritonclient shares one channel among up to 6 clients). A second thread calls ModelStatistics for the model
back to back (or every --stats-interval seconds) on the first channel and checks each answer parses and its success count never goes back.

Runs --seconds, or until SIGTERM. Prints one JSON summary and a verdict line; exits 1 when any call failed or ran past its deadline, or when a
call was still unanswered after the run plus its deadline (an answer lost), 2 on bad arguments or no server.
Needs grpcio and tritonclient (their generated protos) and numpy.
"""
import argparse
import json
import signal
import sys
import threading
import time

import grpc
import numpy as np
from tritonclient.grpc import service_pb2, service_pb2_grpc


def percentile(xs, q):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q / 100.0 * len(xs)))]


def input_spec(stub, model, timeout):
    """(name, datatype, shape of one request) of the model's single input, from ModelMetadata/ModelConfig."""
    md = stub.ModelMetadata(service_pb2.ModelMetadataRequest(name=model), timeout=timeout)
    cfg = stub.ModelConfig(service_pb2.ModelConfigRequest(name=model), timeout=timeout).config
    if len(md.inputs) != 1:
        raise SystemExit("model %s has %d inputs; the probe sends one" % (model, len(md.inputs)))
    shape = list(md.inputs[0].shape)
    if cfg.max_batch_size > 0:
        shape = [1] + shape[1:]  # metadata lists the batch dimension as -1
    if any(d < 0 for d in shape):
        raise SystemExit("input %s has a variable dimension %s" % (md.inputs[0].name, shape))
    return md.inputs[0].name, md.inputs[0].datatype, shape


NP = {"FP32": np.float32, "FP16": np.float16, "INT64": np.int64, "INT32": np.int32}


class Loop:
    """--concurrency ModelInfer calls in flight until stop(); counts what came back and how."""

    def __init__(self, stubs, request, concurrency, deadline):
        self.stubs, self.request, self.deadline = stubs, request, deadline
        self.mu = threading.Lock()
        self.idle = threading.Condition(self.mu)
        self.stopping = False
        self.in_flight = 0
        self.ok = 0
        self.errors = {}  # status code name -> count
        self.max_s = 0.0
        self.concurrency = concurrency

    def start(self):
        for slot in range(self.concurrency):
            self._send(slot)

    def _send(self, slot):
        with self.mu:
            if self.stopping:
                return
            self.in_flight += 1
        t0 = time.monotonic()
        stub = self.stubs[slot % len(self.stubs)]
        fut = stub.ModelInfer.future(self.request, timeout=self.deadline)
        fut.add_done_callback(lambda f, slot=slot, t0=t0: self._done(f, slot, t0))

    def _done(self, fut, slot, t0):
        dt = time.monotonic() - t0
        code = fut.code()
        with self.mu:
            self.in_flight -= 1
            self.max_s = max(self.max_s, dt)
            if code == grpc.StatusCode.OK:
                self.ok += 1
            else:
                self.errors[code.name] = self.errors.get(code.name, 0) + 1
            if self.in_flight == 0:
                self.idle.notify_all()
        self._send(slot)

    def stop(self, wait_s):
        """Stops sending; waits up to wait_s for the calls in flight; returns how many never came back."""
        end = time.monotonic() + wait_s
        with self.mu:
            self.stopping = True
            while self.in_flight and time.monotonic() < end:
                self.idle.wait(end - time.monotonic())
            return self.in_flight


def poll_stats(stub, model, deadline, interval, stop, out):
    """ModelStatistics every interval seconds (0: back to back) until stop is set; latencies, sizes and
    failures into out."""
    last = -1
    while not (stop.wait(interval) if interval else stop.is_set()):
        t0 = time.monotonic()
        try:
            r = stub.ModelStatistics(service_pb2.ModelStatisticsRequest(name=model), timeout=deadline)
        except grpc.RpcError as e:
            out["errors"][e.code().name] = out["errors"].get(e.code().name, 0) + 1
            continue
        dt = time.monotonic() - t0
        out["lat_s"].append(dt)
        out["bytes"] = max(out["bytes"], r.ByteSize())
        if len(r.model_stats) != 1:
            out["bad"] += 1
            continue
        n = r.model_stats[0].inference_stats.success.count
        if n < last:
            out["bad"] += 1  # a counter that went back
        last = n
        out["batch_sizes"] = max(out["batch_sizes"], len(r.model_stats[0].batch_stats))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", default="simplenet")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--channels", type=int, default=1)
    ap.add_argument("--stats-deadline", type=float, default=5)
    ap.add_argument("--infer-deadline", type=float, default=10)
    ap.add_argument("--stats-interval", type=float, default=0)
    ap.add_argument("--json")
    a = ap.parse_args()
    if a.concurrency < 0 or a.channels < 1 or a.seconds <= 0:
        ap.error("concurrency at least 0, channels at least 1, seconds positive")
    opts = [("grpc.max_receive_message_length", 64 << 20)]
    # a distinct argument per channel, or grpcio hands back the same subchannel (one connection)
    chans = [grpc.insecure_channel(a.url, options=opts + [("probe.channel", i)]) for i in range(a.channels)]
    stubs = [service_pb2_grpc.GRPCInferenceServiceStub(c) for c in chans]
    try:
        name, dtype, shape = input_spec(stubs[0], a.model, 10)
    except grpc.RpcError as e:
        print("no server at %s: %s" % (a.url, e.details()), file=sys.stderr)
        return 2
    data = np.random.default_rng(0).standard_normal(shape).astype(NP[dtype])
    req = service_pb2.ModelInferRequest(model_name=a.model)
    req.inputs.add(name=name, datatype=dtype, shape=shape)
    req.raw_input_contents.append(data.tobytes())

    loop = Loop(stubs, req, a.concurrency, a.infer_deadline)
    stats = {"lat_s": [], "errors": {}, "bytes": 0, "bad": 0, "batch_sizes": 0}
    stop = threading.Event()
    poller = threading.Thread(target=poll_stats, args=(stubs[0], a.model, a.stats_deadline, a.stats_interval, stop, stats))
    t0 = time.monotonic()
    loop.start()
    poller.start()
    # the load runs on grpcio's threads meanwhile; SIGTERM ends the run early, with its summary
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    done.wait(a.seconds)
    lost = loop.stop(a.infer_deadline + 2)
    elapsed = time.monotonic() - t0
    stop.set()
    poller.join(a.stats_deadline + 2)
    lat = stats["lat_s"]
    summary = {
        "url": a.url, "model": a.model, "concurrency": a.concurrency, "channels": a.channels,
        "seconds": round(elapsed, 2),
        "infer_ok": loop.ok, "infer_per_s": round(loop.ok / elapsed, 1), "infer_errors": loop.errors,
        "infer_max_ms": round(loop.max_s * 1e3, 1), "infer_unanswered": lost,
        "stats_calls": len(lat), "stats_errors": stats["errors"], "stats_bad": stats["bad"],
        "stats_p50_ms": round(percentile(lat, 50) * 1e3, 2) if lat else None,
        "stats_p99_ms": round(percentile(lat, 99) * 1e3, 2) if lat else None,
        "stats_max_ms": round(max(lat) * 1e3, 2) if lat else None,
        "stats_bytes": stats["bytes"], "stats_batch_sizes": stats["batch_sizes"],
    }
    text = json.dumps(summary, indent=1)
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")
    why = []
    if loop.errors:
        why.append("ModelInfer failures %s" % loop.errors)
    if lost:
        why.append("%d ModelInfer calls never answered (not even by their deadline)" % lost)
    if stats["errors"]:
        why.append("ModelStatistics failures %s" % stats["errors"])
    if stats["bad"]:
        why.append("%d ModelStatistics answers malformed or going back" % stats["bad"])
    if poller.is_alive():
        why.append("a ModelStatistics call outlived its deadline")
    if not lat:
        why.append("no ModelStatistics answer at all")
    print("verdict: " + ("FAIL: " + "; ".join(why) if why else
                         "ok: every call answered within its deadline (%d infer, %d statistics)" % (loop.ok, len(lat))))
    return 1 if why else 0


if __name__ == "__main__":
    sys.exit(main())
