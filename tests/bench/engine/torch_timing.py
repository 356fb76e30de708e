"""The timing half of the PyTorch yardsticks (bench_torch_vision.py, tests/bench/bert/bench_torch_bert.py):
one cell of a pinned-host-in -> H2D -> model -> D2H-into-pinned pipeline, in the modes

  "graph":   the whole pipeline captured once in a CUDA graph (torch.cuda.graph) and replayed;
  "compile": the step as given (its model wrapped in torch.compile by the caller), run once first so
             compilation and autotuning stay outside the timing;

timed "pipelined" (batches back to back, one sync at the end) and "lone" (each batch waited for: the
latency of a lone batch). Results go out as one JSON line per cell in bench_engine's schema (emit).
torch is passed in, so importing this module needs none.
"""

import json
import math
import sys
import time


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def emit(obj):
    print(json.dumps(obj), flush=True)


def error_line(base, ex):
    """The line a failed cell prints instead of its figures; the run goes on."""
    return dict(base, error="%s: %s" % (type(ex).__name__, (str(ex).splitlines() or [""])[0][:300]))


def time_fn(torch, fn, stream, target_s, lone):
    """Mean microseconds per call of fn on stream over about target_s seconds (at least 10 calls)."""
    with torch.cuda.stream(stream):
        for _ in range(5):
            fn()
        stream.synchronize()
        t0 = time.perf_counter()
        for _ in range(3):
            fn()
            if lone:
                stream.synchronize()
        stream.synchronize()
        est = (time.perf_counter() - t0) / 3
        iters = max(10, min(100000, int(math.ceil(target_s / max(est, 1e-7)))))
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
            if lone:
                stream.synchronize()
        stream.synchronize()
        return (time.perf_counter() - t0) / iters * 1e6, iters


def run_cell(torch, mode, step, stream, target_s):
    """Times step() (one whole batch: copies in, model, copies out) in mode "graph" or "compile";
    returns (pipelined us per batch, lone us per batch, iterations)."""
    if mode == "compile":
        with torch.cuda.stream(stream):  # compile and autotune outside the timing
            step()
        stream.synchronize()
        fn = step
    else:
        with torch.cuda.stream(stream):
            for _ in range(3):
                step()
        stream.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=stream):
            step()
        fn = g.replay
    pipe, it = time_fn(torch, fn, stream, target_s, lone=False)
    lone, _ = time_fn(torch, fn, stream, target_s / 2, lone=True)
    return pipe, lone, it
