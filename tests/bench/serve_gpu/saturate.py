#!/usr/bin/env python3
"""GPU busy fraction of a model while inferd is saturated with ModelInfer calls.

    saturate.py --grpc HOST:PORT --http HOST:PORT --model NAME [--rows 64] [--concurrency 64]
                [--procs 8] [--seconds 10] [--warmup-seconds 1] [--dim 4096] [--input INPUT0]

P processes (spawned), each one grpc.aio channel with C ModelInfer calls in
flight, all sending the same request: built once, by hand, as serialized
ModelInferRequest bytes (model_name, one FP32 input [rows, dim] and its data in
raw_input_contents), sent through a generic unary-unary call with identity
(de)serializers, so the client spends no time in protobuf.

Load runs for warmup + seconds (+ a short tail); the measured window is the
`seconds` after the warmup: completions in it give rps, and /metrics is scraped
at its two ends for the counter inferd_instance_busy_seconds_total (label sets
model, version, model_instance, gpu). busy_fraction = delta busy seconds summed over
the model's label sets / window seconds / number of those label sets (instances).

Prints one JSON line:
  {"model":..,"rows":..,"rps":..,"rows_per_s":..,"busy_fraction":..,"errors":..,...}
busy_fraction is null (with a "note") when the metric is absent.
"""

import argparse
import asyncio
import json
import multiprocessing as mp
import re
import sys
import time
import urllib.request

import numpy as np

METHOD = "/inference.GRPCInferenceService/ModelInfer"
METRIC = "inferd_instance_busy_seconds_total"
CHANNEL_OPTIONS = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]


# --- protobuf wire format, by hand (proto/grpc_service.proto field numbers)

def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _len_field(num, payload):
    return _varint((num << 3) | 2) + _varint(len(payload)) + payload


def encode_infer_request(model, input_name, datatype, shape, raw, version=""):
    """ModelInferRequest{model_name=1, model_version=2, inputs=5{name=1, datatype=2, shape=3 (packed)},
    raw_input_contents=7}; no `outputs` (6): the server returns every output."""
    tensor = (_len_field(1, input_name.encode()) + _len_field(2, datatype.encode())
              + _len_field(3, b"".join(_varint(d) for d in shape)))
    msg = _len_field(1, model.encode())
    if version:
        msg += _len_field(2, version.encode())
    return msg + _len_field(5, tensor) + _len_field(7, raw)


def _read_varint(buf, i):
    n = shift = 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def decode_fields(buf):
    """[(field number, wire type, value)] of one message level (varints as int, length-delimited as bytes)."""
    out, i = [], 0
    while i < len(buf):
        key, i = _read_varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _read_varint(buf, i)
        elif wt == 2:
            ln, i = _read_varint(buf, i)
            v, i = bytes(buf[i:i + ln]), i + ln
        elif wt == 1:
            v, i = bytes(buf[i:i + 8]), i + 8
        elif wt == 5:
            v, i = bytes(buf[i:i + 4]), i + 4
        else:
            raise ValueError("wire type %d" % wt)
        out.append((num, wt, v))
    return out


def describe_response(buf):
    """(outputs [(name, datatype, shape)], [raw_output_contents lengths]) of a ModelInferResponse."""
    outs, raws = [], []
    for num, wt, v in decode_fields(buf):
        if num == 5 and wt == 2:
            name = dtype = ""
            shape = []
            for n2, w2, v2 in decode_fields(v):
                if n2 == 1:
                    name = v2.decode()
                elif n2 == 2:
                    dtype = v2.decode()
                elif n2 == 3 and w2 == 2:  # packed
                    j = 0
                    while j < len(v2):
                        d, j = _read_varint(v2, j)
                        shape.append(d)
                elif n2 == 3 and w2 == 0:
                    shape.append(v2)
            outs.append((name, dtype, shape))
        elif num == 6 and wt == 2:
            raws.append(len(v))
    return outs, raws


# --- /metrics

_LINE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(\{([^}]*)\})?\s+(\S+)')
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def scrape_all(http):
    """[(name, labels, value)] of every sample on /metrics."""
    url = "http://%s/metrics" % http
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode("utf-8", "replace")
    out = []
    for line in text.splitlines():
        m = _LINE.match(line)
        if m and not line.startswith("#"):
            out.append((m.group(1), dict(_LABEL.findall(m.group(3) or "")), float(m.group(4))))
    return out


def scrape_busy(http, model):
    """{label tuple: busy seconds} of the model's inferd_instance_busy_seconds_total series."""
    return {tuple(sorted(l.items())): v for n, l, v in scrape_all(http) if n == METRIC and l.get("model") == model}


def pick(samples, name, **labels):
    return sum(v for n, l, v in samples if n == name and all(l.get(k) == x for k, x in labels.items()))


# --- load

def child(idx, target, req, conc, start_val, go, ready, results, warm_s, seconds, tail_s):
    import grpc
    signalled = []

    async def run():
        ch = grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS)
        call = ch.unary_unary(METHOD, request_serializer=None, response_deserializer=None)
        await asyncio.wait_for(ch.channel_ready(), timeout=60)
        ready.put(idx)
        signalled.append(1)
        while not go.is_set():
            await asyncio.sleep(0.005)
        t0 = start_val.value
        lo, hi, end = t0 + warm_s, t0 + warm_s + seconds, t0 + warm_s + seconds + tail_s
        st = {"ok": 0, "ok_all": 0, "errors": 0, "codes": {}, "first_error": None}
        await asyncio.sleep(max(0.0, t0 - time.monotonic()))

        async def worker():
            while time.monotonic() < end:
                try:
                    await call(req, timeout=60)
                    done = time.monotonic()
                    st["ok_all"] += 1
                    if lo <= done < hi:
                        st["ok"] += 1
                except grpc.aio.AioRpcError as e:
                    st["errors"] += 1
                    code = e.code().name
                    st["codes"][code] = st["codes"].get(code, 0) + 1
                    if st["first_error"] is None:
                        st["first_error"] = "%s: %s" % (code, e.details())
                    await asyncio.sleep(0.001)

        await asyncio.gather(*[worker() for _ in range(conc)])
        await ch.close()
        return st

    try:
        st = asyncio.run(run())
    except Exception as ex:  # report rather than hang the parent
        st = {"ok": 0, "ok_all": 0, "errors": 1, "codes": {"CLIENT": 1}, "first_error": repr(ex)}
        if not signalled:
            ready.put(idx)
    results.put(st)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grpc", required=True, help="HOST:PORT of inferd's gRPC endpoint")
    ap.add_argument("--http", required=True, help="HOST:PORT of inferd's HTTP endpoint (/metrics)")
    ap.add_argument("--model", required=True)
    ap.add_argument("--version", default="")
    ap.add_argument("--rows", type=int, default=64, help="rows per request")
    ap.add_argument("--dim", type=int, default=4096, help="input width")
    ap.add_argument("--input", default="INPUT0", help="input tensor name")
    ap.add_argument("--concurrency", type=int, default=64, help="in-flight requests per process")
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=10.0, help="measured window")
    ap.add_argument("--warmup-seconds", type=float, default=1.0, help="load before the window")
    a = ap.parse_args()

    import grpc
    raw = np.random.default_rng(0).standard_normal((a.rows, a.dim)).astype("<f4").tobytes()
    req = encode_infer_request(a.model, a.input, "FP32", [a.rows, a.dim], raw, a.version)

    # one call first: the request is right and the model answers
    with grpc.insecure_channel(a.grpc, options=CHANNEL_OPTIONS) as ch:
        call = ch.unary_unary(METHOD, request_serializer=None, response_deserializer=None)
        try:
            resp = call(req, timeout=120)
        except grpc.RpcError as e:
            print(json.dumps({"model": a.model, "rows": a.rows, "error": "first ModelInfer failed: %s: %s"
                              % (e.code().name, e.details())}))
            sys.exit(1)
    outs, raws = describe_response(resp)
    print("first response: outputs %s, raw_output_contents bytes %s" % (outs, raws), file=sys.stderr)

    ctx = mp.get_context("spawn")
    go, ready, results = ctx.Event(), ctx.Queue(), ctx.Queue()
    start_val = ctx.Value("d", 0.0)
    tail_s = 0.5
    procs = [ctx.Process(target=child, args=(i, a.grpc, req, a.concurrency, start_val, go, ready, results,
                                             a.warmup_seconds, a.seconds, tail_s), daemon=True)
             for i in range(a.procs)]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=120)
    t0 = time.monotonic() + 0.2
    start_val.value = t0
    go.set()

    note = None
    busy0 = busy1 = None
    lo, hi = t0 + a.warmup_seconds, t0 + a.warmup_seconds + a.seconds
    time.sleep(max(0.0, lo - time.monotonic()))
    try:
        w0 = time.monotonic()
        busy0 = scrape_busy(a.http, a.model)
    except Exception as ex:
        note = "could not scrape /metrics: %r" % ex
    # During the window, once a second: NVML's utilization of GPU 0 and the model's queue depth
    # (pending = queued + running): whether requests waited while the GPU had room.
    util, pend, all0 = [], [], None
    try:
        all0 = scrape_all(a.http)
    except Exception as ex:
        note = "could not scrape /metrics: %r" % ex
    while time.monotonic() + 1.0 < hi:
        time.sleep(1.0)
        try:
            smp = scrape_all(a.http)
            if any(n == "nv_gpu_utilization" for n, _, _ in smp):
                util.append(pick(smp, "nv_gpu_utilization", gpu="0"))
            pend.append(pick(smp, "nv_inference_pending_request_count", model=a.model))
        except Exception as ex:
            note = "could not scrape /metrics: %r" % ex
    time.sleep(max(0.0, hi - time.monotonic()))
    try:
        w1 = time.monotonic()
        busy1 = scrape_busy(a.http, a.model) if busy0 is not None else None
        all1 = scrape_all(a.http)
    except Exception as ex:
        note = "could not scrape /metrics: %r" % ex
        all1 = None
    gpu_busy = None
    if all0 is not None and all1 is not None and any(n == "inferd_gpu_busy_seconds_total" for n, _, _ in all1):
        gpu_busy = (pick(all1, "inferd_gpu_busy_seconds_total", gpu="0") -
                    pick(all0, "inferd_gpu_busy_seconds_total", gpu="0")) / (w1 - w0)

    stats = [results.get(timeout=a.seconds + 180) for _ in procs]
    for p in procs:
        p.join(timeout=30)

    ok = sum(s["ok"] for s in stats)
    errors = sum(s["errors"] for s in stats)
    codes = {}
    for s in stats:
        for k, v in s["codes"].items():
            codes[k] = codes.get(k, 0) + v
    first_error = next((s["first_error"] for s in stats if s["first_error"]), None)

    busy_fraction = instances = busy_delta = None
    if busy0 is not None and busy1 is not None:
        if not busy1:
            note = "metric %s absent for model %s on /metrics" % (METRIC, a.model)
        else:
            instances = len(busy1)
            busy_delta = sum(v - busy0.get(k, 0.0) for k, v in busy1.items())
            busy_fraction = busy_delta / (w1 - w0) / instances
    if note:
        print(note, file=sys.stderr)
    out = {"model": a.model, "rows": a.rows, "rps": round(ok / a.seconds, 1),
           "rows_per_s": round(ok * a.rows / a.seconds, 1),
           "busy_fraction": None if busy_fraction is None else round(busy_fraction, 4),
           "errors": errors, "concurrency": a.concurrency, "procs": a.procs, "seconds": a.seconds,
           "instances": instances, "busy_seconds": None if busy_delta is None else round(busy_delta, 4),
           # GPU 0 as a whole: the engine's union over all instances, and NVML's mean utilization
           "gpu_busy_fraction": None if gpu_busy is None else round(gpu_busy, 4),
           "nvml_utilization": round(sum(util) / len(util), 3) if util else None,
           "mean_pending": round(sum(pend) / len(pend), 1) if pend else None}
    if codes:
        out["error_codes"] = codes
        out["first_error"] = first_error
    if note:
        out["note"] = note
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
