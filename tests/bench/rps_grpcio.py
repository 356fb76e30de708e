"""Rough requests/s of one model at a given concurrency, with a grpc.aio
client (one channel, N outstanding ModelInfer calls). A figure for notes,
not a benchmark: the Python client shares the machine's cores with the
server. The C load generator (clients/inferd-load) replaces it.

usage: rps_grpcio.py HOST:PORT MODEL INPUT DIM [--concurrency N] [--seconds S]
"""
import argparse
import asyncio
import time

import grpc
import numpy as np
from tritonclient.grpc import service_pb2, service_pb2_grpc


async def worker(stub, req, stop_at, lat):
    while time.perf_counter() < stop_at:
        t = time.perf_counter()
        await stub.ModelInfer(req)
        lat.append(time.perf_counter() - t)


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("model")
    ap.add_argument("input")
    ap.add_argument("dim", type=int)
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=5.0)
    a = ap.parse_args()
    req = service_pb2.ModelInferRequest(model_name=a.model)
    t = req.inputs.add()
    t.name, t.datatype = a.input, "FP32"
    t.shape.extend([1, a.dim])
    req.raw_input_contents.append(np.random.rand(1, a.dim).astype(np.float32).tobytes())
    async with grpc.aio.insecure_channel(a.url) as ch:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(ch)
        await stub.ModelInfer(req)  # warm-up
        lat = []
        t0 = time.perf_counter()
        await asyncio.gather(*[worker(stub, req, t0 + a.seconds, lat) for _ in range(a.concurrency)])
        el = time.perf_counter() - t0
    lat.sort()
    print("concurrency %d: %.0f req/s, p50 %.0f us, p99 %.0f us (%d requests)"
          % (a.concurrency, len(lat) / el, 1e6 * lat[len(lat) // 2], 1e6 * lat[int(len(lat) * 0.99)], len(lat)))


asyncio.run(main())
