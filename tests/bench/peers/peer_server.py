#!/usr/bin/env python3
"""peer_server.py: the Python comparison server of benchmark 3.

A grpcio *asyncio* server speaking the same KServe v2 / Triton protocol as inferd
(inference.GRPCInferenceService: ModelInfer, ModelMetadata, ModelConfig, ModelReady,
ModelStatistics, ServerLive, ServerReady, ServerMetadata) for one ONNX MLP (a chain of
Gemm / MatMul+Add / Relu nodes), with a dynamic batcher done the way a careful Python
developer would do it:

  * each ModelInfer coroutine decodes its tensor, puts a request (rows + a future) on the
    batcher's queue and awaits the future;
  * one batcher task takes whole requests, up to --max-batch rows. It dispatches when the
    executor is free and either the batch is full or the oldest request has waited
    --max-delay-us; while the previous batch is still running the next one keeps growing
    (so batches grow under load, as in Triton);
  * the model runs on a dedicated worker thread (loop.run_in_executor with a one-thread
    executor), so the event loop keeps accepting and answering requests meanwhile;
  * the batch result is sliced back into each request's future.

Compute backends (--backend): torch (nn.Linear layers on --device cuda|cpu, FP16 with
--fp16, pinned staging buffers on CUDA) or numpy (CPU only; used by the tests where torch
is not installed). Weights come from the ONNX initializers via onnx.numpy_helper.

The protocol messages are Triton's own generated modules shipped with tritonclient
(tritonclient.grpc.service_pb2 / service_pb2_grpc / model_config_pb2).

Usage:
  python tests/bench/peers/peer_server.py --model repo/mlp/1/model.onnx --port 8001 \\
      [--model-name mlp] [--max-batch 1024] [--max-delay-us 500] [--backend torch|numpy] \\
      [--device cuda|cpu] [--fp16 | --tf32]
Prints "peer ready: grpc=<port>" on stderr when serving; SIGINT/SIGTERM stop it (exit 0)
after logging the batches it formed ("peer: ... mean batch size ...").
"""

import argparse
import asyncio
import collections
import concurrent.futures
import os
import signal
import sys
import time

import grpc
import numpy as np
import onnx
from onnx import numpy_helper
from tritonclient.grpc import model_config_pb2 as mc
from tritonclient.grpc import service_pb2 as pb
from tritonclient.grpc import service_pb2_grpc as pb_grpc


def log(msg):
    print("peer: " + msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- the model

class ModelError(Exception):
    pass


def _bias(c, n, where):
    """A Gemm C / Add operand usable for any batch size: a scalar, [n] or [1, n] -> [n] float32."""
    c = np.asarray(c, dtype=np.float32)
    if c.size == 1:
        return np.full(n, c.reshape(()), dtype=np.float32)
    if c.size == n and c.shape[-1] == n:
        return np.ascontiguousarray(c.reshape(n))
    raise ModelError("%s: bias of shape %s does not broadcast per column to %d" % (where, c.shape, n))


def load_mlp(path):
    """Reads an ONNX MLP into a list of layers: ("linear", W[out,in], b[out] or None) / ("relu",).

    Accepts a single chain from the graph input to the graph output of Gemm (transA=0,
    any transB, alpha, beta), MatMul optionally followed by Add of a constant bias, and Relu.
    Returns (layers, input_name, output_name, in_features, out_features).
    """
    m = onnx.load(path)
    g = m.graph
    init = {t.name: numpy_helper.to_array(t).astype(np.float32) for t in g.initializer}
    inputs = [i for i in g.input if i.name not in init]
    if len(inputs) != 1 or len(g.output) != 1:
        raise ModelError("%s: the peer serves models with one input and one output" % path)
    in_name, out_name = inputs[0].name, g.output[0].name
    layers = []
    cur = in_name
    nodes = list(g.node)
    i = 0
    while i < len(nodes):
        n = nodes[i]
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        data_in = [x for x in n.input if x and x not in init]
        if data_in != [cur]:
            raise ModelError("node %s (%s) does not continue the chain from '%s'" % (n.name, n.op_type, cur))
        if n.op_type == "Gemm":
            if attrs.get("transA", 0):
                raise ModelError("Gemm %s: transA is not supported" % n.name)
            w = init[n.input[1]]
            w = w if attrs.get("transB", 0) else w.T           # nn.Linear layout: [out, in]
            w = np.ascontiguousarray(w * np.float32(attrs.get("alpha", 1.0)))
            b = None
            if len(n.input) > 2 and n.input[2]:
                b = _bias(init[n.input[2]] * np.float32(attrs.get("beta", 1.0)), w.shape[0], n.name)
            layers.append(("linear", w, b))
        elif n.op_type == "MatMul":
            if n.input[0] != cur or n.input[1] not in init:
                raise ModelError("MatMul %s: needs the chain value times a constant" % n.name)
            w = np.ascontiguousarray(init[n.input[1]].T)
            b = None
            nxt = nodes[i + 1] if i + 1 < len(nodes) else None
            if nxt is not None and nxt.op_type == "Add" and n.output[0] in nxt.input:
                other = [x for x in nxt.input if x != n.output[0]]
                if len(other) == 1 and other[0] in init:
                    b = _bias(init[other[0]], w.shape[0], nxt.name)
                    n = nxt
                    i += 1
            layers.append(("linear", w, b))
        elif n.op_type == "Relu":
            layers.append(("relu",))
        else:
            raise ModelError("node %s: op %s is not supported by the peer (Gemm, MatMul, Add, Relu)"
                             % (n.name, n.op_type))
        cur = n.output[0]
        i += 1
    if cur != out_name or not any(l[0] == "linear" for l in layers):
        raise ModelError("%s: no Gemm/Relu chain from '%s' to '%s'" % (path, in_name, out_name))
    lin = [l for l in layers if l[0] == "linear"]
    for a, b in zip(lin, lin[1:]):
        if a[1].shape[0] != b[1].shape[1]:
            raise ModelError("layer widths do not chain: %s then %s" % (a[1].shape, b[1].shape))
    return layers, in_name, out_name, lin[0][1].shape[1], lin[-1][1].shape[0]


class NumpyBackend:
    """CPU reference compute: numpy matmuls (BLAS threads)."""
    name = "numpy"

    def __init__(self, layers, max_batch, fp16=False):
        if fp16:
            raise ModelError("--fp16 needs --backend torch")
        self.layers = [(l[0], np.ascontiguousarray(l[1].T), l[2]) if l[0] == "linear" else l for l in layers]

    def run(self, arrays):
        """arrays: list of [n_i, K] float32 -> ([sum n_i, N] float32, t_input, t_infer, t_output) (seconds)."""
        t0 = time.perf_counter()
        x = arrays[0] if len(arrays) == 1 else np.concatenate(arrays)
        t1 = time.perf_counter()
        for l in self.layers:
            if l[0] == "linear":
                x = x @ l[1]
                if l[2] is not None:
                    x += l[2]
            else:
                x = np.maximum(x, 0, out=x if x.flags.writeable else None)
        t2 = time.perf_counter()
        return x, t1 - t0, t2 - t1, 0.0


class TorchBackend:
    """nn.Linear/nn.ReLU on --device; on CUDA the batch is staged in pinned memory."""
    name = "torch"

    def __init__(self, layers, max_batch, fp16=False, device="cuda", tf32=False):
        import torch
        from torch import nn
        self.torch = torch
        # FP32 means full FP32 (PyTorch's default); --tf32 matches inferd's "tf32" precision.
        torch.backends.cuda.matmul.allow_tf32 = bool(tf32)
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        mods = []
        for l in layers:
            if l[0] == "linear":
                lin = nn.Linear(l[1].shape[1], l[1].shape[0], bias=l[2] is not None)
                with torch.no_grad():
                    lin.weight.copy_(torch.from_numpy(l[1]))
                    if l[2] is not None:
                        lin.bias.copy_(torch.from_numpy(np.ascontiguousarray(l[2])))
                mods.append(lin)
            else:
                mods.append(nn.ReLU(inplace=True))
        self.dtype = torch.float16 if fp16 else torch.float32
        self.model = nn.Sequential(*mods).to(self.device, self.dtype).eval()
        k = next(l[1].shape[1] for l in layers if l[0] == "linear")
        self.staging = None
        if self.cuda:
            self.staging = torch.empty((max_batch, k), dtype=torch.float32, pin_memory=True)
            self.stream = torch.cuda.Stream(self.device)
        # Warm up (cuBLAS handles, kernels) outside the measured path.
        self.run([np.zeros((1, k), np.float32)])
        self.run([np.zeros((max_batch, k), np.float32)])

    def run(self, arrays):
        torch = self.torch
        t0 = time.perf_counter()
        n = sum(a.shape[0] for a in arrays)
        with torch.inference_mode():
            if self.cuda:
                with torch.cuda.stream(self.stream):
                    host = self.staging[:n].numpy()
                    off = 0
                    for a in arrays:                       # one copy into pinned memory
                        host[off:off + a.shape[0]] = a
                        off += a.shape[0]
                    x = self.staging[:n].to(self.device, non_blocking=True).to(self.dtype)
                    t1 = time.perf_counter()
                    y = self.model(x)
                    self.stream.synchronize()
                    t2 = time.perf_counter()
                    out = y.float().cpu().numpy()         # blocking copy into fresh memory
            else:
                x = torch.from_numpy(arrays[0].copy() if len(arrays) == 1 else np.concatenate(arrays))
                x = x.to(self.dtype)
                t1 = time.perf_counter()
                y = self.model(x)
                t2 = time.perf_counter()
                out = y.float().numpy()
        t3 = time.perf_counter()
        return out, t1 - t0, t2 - t1, t3 - t2


# ---------------------------------------------------------------- statistics

class Duration:
    __slots__ = ("count", "ns")

    def __init__(self):
        self.count = 0
        self.ns = 0

    def add(self, seconds, count=1):
        self.count += count
        self.ns += int(seconds * 1e9)

    def pb(self):
        return pb.StatisticDuration(count=self.count, ns=self.ns)


class Stats:
    """Triton-style model statistics; only touched on the event loop thread."""

    def __init__(self):
        self.success, self.fail, self.queue = Duration(), Duration(), Duration()
        self.c_in, self.c_infer, self.c_out = Duration(), Duration(), Duration()
        self.inference_count = 0   # rows
        self.execution_count = 0   # batches
        self.requests_batched = 0  # requests that went through a batch
        self.last_inference_ms = 0
        self.batch = collections.defaultdict(lambda: [Duration(), Duration(), Duration()])


# ---------------------------------------------------------------- the batcher

class Request:
    __slots__ = ("x", "rows", "fut", "t_arrival", "t_dispatch")

    def __init__(self, x, fut):
        self.x = x
        self.rows = x.shape[0]
        self.fut = fut
        self.t_arrival = time.perf_counter()
        self.t_dispatch = 0.0


class Batcher:
    def __init__(self, backend, max_batch, max_delay_us, stats):
        self.backend = backend
        self.max_batch = max_batch
        self.max_delay = max_delay_us / 1e6
        self.stats = stats
        self.pending = collections.deque()
        self.pending_rows = 0
        self.busy = False            # a batch is on the worker thread
        self.wake = asyncio.Event()  # new request or worker done
        self.executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="peer-compute")
        self.loop = None
        self.task = None

    def start(self):
        self.loop = asyncio.get_running_loop()
        self.task = self.loop.create_task(self._run())

    async def infer(self, x):
        """Queues x ([n, K] float32) and returns its [n, N] slice of a batch result."""
        fut = self.loop.create_future()
        self.pending.append(Request(x, fut))
        self.pending_rows += x.shape[0]
        self.wake.set()
        return await fut

    def _drop_cancelled(self):
        while self.pending and self.pending[0].fut.done():   # the client went away
            self.pending_rows -= self.pending.popleft().rows

    async def _run(self):
        while True:
            self._drop_cancelled()
            if not self.pending:
                self.wake.clear()
                await self.wake.wait()
                continue
            # Dispatch when the worker is free and the batch is full or its oldest request
            # has waited max_delay; while the worker is busy the batch simply grows.
            deadline = self.pending[0].t_arrival + self.max_delay
            now = time.perf_counter()
            if self.busy or (self.pending_rows < self.max_batch and now < deadline):
                self.wake.clear()
                try:
                    if self.busy:
                        await self.wake.wait()
                    else:
                        await asyncio.wait_for(self.wake.wait(), deadline - now)
                except asyncio.TimeoutError:
                    pass
                continue
            batch, rows = [], 0
            while self.pending and rows + self.pending[0].rows <= self.max_batch:
                r = self.pending.popleft()
                self.pending_rows -= r.rows
                if r.fut.done():
                    continue
                batch.append(r)
                rows += r.rows
            if not batch:
                continue
            t = time.perf_counter()
            for r in batch:
                r.t_dispatch = t
            self.busy = True
            cf = self.loop.run_in_executor(self.executor, self.backend.run, [r.x for r in batch])
            cf.add_done_callback(lambda f, b=batch: self._done(b, f))

    def _done(self, batch, f):
        self.busy = False
        self.wake.set()
        st = self.stats
        try:
            out, t_in, t_inf, t_out = f.result()
        except Exception as e:  # noqa: BLE001 (any compute failure fails the batch's requests)
            log("batch of %d request(s) failed: %r" % (len(batch), e))
            for r in batch:
                if not r.fut.done():
                    r.fut.set_exception(e)
            return
        n_req = len(batch)
        rows = out.shape[0]
        st.execution_count += 1
        st.inference_count += rows
        st.requests_batched += n_req
        st.last_inference_ms = int(time.time() * 1000)
        st.c_in.add(t_in * n_req, n_req)
        st.c_infer.add(t_inf * n_req, n_req)
        st.c_out.add(t_out * n_req, n_req)
        bs = st.batch[rows]
        bs[0].add(t_in)
        bs[1].add(t_inf)
        bs[2].add(t_out)
        off = 0
        for r in batch:
            st.queue.add(r.t_dispatch - r.t_arrival)
            if not r.fut.done():
                r.fut.set_result(out[off:off + r.rows])
            off += r.rows

    async def close(self):
        if self.task:
            self.task.cancel()
            try:
                await self.task
            except asyncio.CancelledError:
                pass
        for r in self.pending:
            if not r.fut.done():
                r.fut.set_exception(RuntimeError("server shutting down"))
        self.executor.shutdown(wait=True)


# ---------------------------------------------------------------- the service

class Servicer(pb_grpc.GRPCInferenceServiceServicer):
    def __init__(self, args, batcher, stats, in_name, out_name, k, n_out):
        self.model_name = args.model_name
        self.platform = "peer_" + batcher.backend.name
        self.max_batch = args.max_batch
        self.max_delay_us = args.max_delay_us
        self.batcher = batcher
        self.stats = stats
        self.in_name, self.out_name, self.k, self.n_out = in_name, out_name, k, n_out

    async def _model(self, name, version, context):
        if name != self.model_name:
            await context.abort(grpc.StatusCode.NOT_FOUND, "unknown model '%s' (this peer serves '%s')"
                                % (name, self.model_name))
        if version not in ("", "1"):
            await context.abort(grpc.StatusCode.NOT_FOUND, "model '%s' has no version '%s'" % (name, version))

    async def ServerLive(self, request, context):
        return pb.ServerLiveResponse(live=True)

    async def ServerReady(self, request, context):
        return pb.ServerReadyResponse(ready=True)

    async def ServerMetadata(self, request, context):
        return pb.ServerMetadataResponse(name="peer_server", version="0.1.0")

    async def ModelReady(self, request, context):
        return pb.ModelReadyResponse(ready=request.name == self.model_name and request.version in ("", "1"))

    async def ModelMetadata(self, request, context):
        await self._model(request.name, request.version, context)
        T = pb.ModelMetadataResponse.TensorMetadata
        return pb.ModelMetadataResponse(
            name=self.model_name, versions=["1"], platform=self.platform,
            inputs=[T(name=self.in_name, datatype="FP32", shape=[-1, self.k])],
            outputs=[T(name=self.out_name, datatype="FP32", shape=[-1, self.n_out])])

    async def ModelConfig(self, request, context):
        await self._model(request.name, request.version, context)
        cfg = mc.ModelConfig(
            name=self.model_name, platform=self.platform, max_batch_size=self.max_batch,
            input=[mc.ModelInput(name=self.in_name, data_type=mc.TYPE_FP32, dims=[self.k])],
            output=[mc.ModelOutput(name=self.out_name, data_type=mc.TYPE_FP32, dims=[self.n_out])],
            dynamic_batching=mc.ModelDynamicBatching(max_queue_delay_microseconds=self.max_delay_us))
        return pb.ModelConfigResponse(config=cfg)

    async def ModelStatistics(self, request, context):
        if request.name:
            await self._model(request.name, request.version, context)
        st = self.stats
        ms = pb.ModelStatistics(
            name=self.model_name, version="1", last_inference=st.last_inference_ms,
            inference_count=st.inference_count, execution_count=st.execution_count,
            inference_stats=pb.InferStatistics(
                success=st.success.pb(), fail=st.fail.pb(), queue=st.queue.pb(),
                compute_input=st.c_in.pb(), compute_infer=st.c_infer.pb(), compute_output=st.c_out.pb()),
            batch_stats=[pb.InferBatchStatistics(batch_size=bs, compute_input=d[0].pb(),
                                                 compute_infer=d[1].pb(), compute_output=d[2].pb())
                         for bs, d in sorted(st.batch.items())])
        return pb.ModelStatisticsResponse(model_stats=[ms])

    def _decode(self, request):
        """-> ([n, K] float32 array, None) or (None, error text)."""
        if len(request.inputs) != 1:
            return None, "model '%s' takes 1 input, got %d" % (self.model_name, len(request.inputs))
        t = request.inputs[0]
        if t.name != self.in_name:
            return None, "unexpected input '%s' (the model's input is '%s')" % (t.name, self.in_name)
        if t.datatype != "FP32":
            return None, "input '%s': datatype %s, expected FP32" % (t.name, t.datatype)
        shape = list(t.shape)
        if len(shape) != 2 or shape[1] != self.k or shape[0] < 1:
            return None, "input '%s': shape %s, expected [-1,%d]" % (t.name, shape, self.k)
        if shape[0] > self.max_batch:
            return None, "input '%s': batch %d exceeds max batch %d" % (t.name, shape[0], self.max_batch)
        want = shape[0] * self.k
        if request.raw_input_contents:
            raw = request.raw_input_contents[0]
            if len(raw) != want * 4:
                return None, "input '%s': %d bytes, expected %d" % (t.name, len(raw), want * 4)
            x = np.frombuffer(raw, dtype="<f4")
        else:
            if len(t.contents.fp32_contents) != want:
                return None, "input '%s': %d values, expected %d" % (t.name, len(t.contents.fp32_contents), want)
            x = np.asarray(t.contents.fp32_contents, dtype=np.float32)
        return x.reshape(shape[0], self.k), None

    async def ModelInfer(self, request, context):
        t0 = time.perf_counter()
        await self._model(request.model_name, request.model_version, context)
        for o in request.outputs:
            if o.name != self.out_name:
                self.stats.fail.add(time.perf_counter() - t0)
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "unexpected inference output '%s'" % o.name)
        x, err = self._decode(request)
        if err:
            self.stats.fail.add(time.perf_counter() - t0)
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, err)
        try:
            y = await self.batcher.infer(x)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001
            self.stats.fail.add(time.perf_counter() - t0)
            await context.abort(grpc.StatusCode.INTERNAL, "inference failed: %s" % e)
        out = pb.ModelInferResponse.InferOutputTensor(name=self.out_name, datatype="FP32", shape=list(y.shape))
        resp = pb.ModelInferResponse(model_name=self.model_name, model_version="1", id=request.id,
                                     outputs=[out], raw_output_contents=[y.astype("<f4", copy=False).tobytes()])
        self.stats.success.add(time.perf_counter() - t0)
        return resp


# ---------------------------------------------------------------- main

def default_model_name(path):
    """repo/NAME/1/model.onnx -> NAME; otherwise the file's stem."""
    parts = os.path.normpath(os.path.abspath(path)).split(os.sep)
    if len(parts) >= 3 and parts[-1] == "model.onnx" and parts[-2].isdigit():
        return parts[-3]
    return os.path.splitext(parts[-1])[0]


def make_backend(args, layers):
    want = args.backend
    if want == "auto":
        try:
            import torch  # noqa: F401
            want = "torch"
        except ImportError:
            want = "numpy"
    if want == "numpy":
        if args.device == "cuda" or args.tf32:
            raise ModelError("--backend numpy runs on the CPU only, in FP32 (use --device cpu, no --tf32)")
        return NumpyBackend(layers, args.max_batch, fp16=args.fp16)
    import torch
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise ModelError("--device cuda: torch sees no CUDA device")
    return TorchBackend(layers, args.max_batch, fp16=args.fp16, device=device, tf32=args.tf32)


async def serve(args):
    layers, in_name, out_name, k, n_out = load_mlp(args.model)
    backend = make_backend(args, layers)
    stats = Stats()
    batcher = Batcher(backend, args.max_batch, args.max_delay_us, stats)
    batcher.start()
    server = grpc.aio.server(options=[
        ("grpc.max_receive_message_length", args.max_message_bytes),
        ("grpc.max_send_message_length", args.max_message_bytes),
        ("grpc.so_reuseport", 0),
    ])
    pb_grpc.add_GRPCInferenceServiceServicer_to_server(
        Servicer(args, batcher, stats, in_name, out_name, k, n_out), server)
    port = server.add_insecure_port("%s:%d" % (args.address, args.port))
    if port == 0:
        raise ModelError("cannot listen on %s:%d" % (args.address, args.port))
    await server.start()
    dev = getattr(backend, "device", "cpu")
    prec = "fp16" if args.fp16 else ("tf32" if args.tf32 else "fp32")
    log("model '%s' (%s -> %s, %d -> %d, %d layers), backend %s on %s %s, max batch %d, max delay %d us"
        % (args.model_name, in_name, out_name, k, n_out, len(layers), backend.name, dev, prec,
           args.max_batch, args.max_delay_us))
    print("peer ready: grpc=%d" % port, file=sys.stderr, flush=True)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log("stopping")
    await server.stop(grace=2.0)
    await batcher.close()
    mean_req = stats.requests_batched / stats.execution_count if stats.execution_count else 0.0
    mean_rows = stats.inference_count / stats.execution_count if stats.execution_count else 0.0
    log("served %d request(s) (%d failed) in %d batch(es): mean batch size %.2f requests (%.2f rows)"
        % (stats.success.count, stats.fail.count, stats.execution_count, mean_req, mean_rows))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="ONNX MLP (Gemm/MatMul+Add/Relu chain)")
    ap.add_argument("--model-name", help="name served (default: NAME of NAME/<version>/model.onnx, else the file stem)")
    ap.add_argument("--port", type=int, default=8001, help="gRPC port, 0 picks a free one (default 8001)")
    ap.add_argument("--address", default="0.0.0.0")
    ap.add_argument("--max-batch", type=int, default=1024, help="most rows in one batch (default 1024)")
    ap.add_argument("--max-delay-us", type=int, default=500,
                    help="longest wait of the oldest request for a fuller batch while the worker is idle (default 500)")
    ap.add_argument("--backend", choices=("auto", "torch", "numpy"), default="auto",
                    help="compute backend (default: torch when importable, else numpy)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default=None,
                    help="torch device (default: cuda when available)")
    ap.add_argument("--fp16", action="store_true", help="run the layers in FP16 (torch only; wire stays FP32)")
    ap.add_argument("--tf32", action="store_true", help="allow TF32 matmuls in FP32 mode (torch on CUDA)")
    ap.add_argument("--max-message-bytes", type=int, default=64 << 20)
    args = ap.parse_args(argv)
    if args.max_batch < 1 or args.max_delay_us < 0:
        ap.error("--max-batch must be >= 1 and --max-delay-us >= 0")
    if args.fp16 and args.tf32:
        ap.error("--fp16 and --tf32 exclude each other")
    args.model_name = args.model_name or default_model_name(args.model)
    try:
        asyncio.run(serve(args))
    except ModelError as e:
        log("error: %s" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
