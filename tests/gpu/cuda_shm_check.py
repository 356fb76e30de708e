"""CUDA shared memory on the GPU machine (run by tests/gpu/cuda_shm_check.sh, or by hand against a running
inferd started with --allow-client-shm true):

    PYTHONPATH=<dir with tritonclient> python cuda_shm_check.py localhost:18001 [model] [device] [metrics host:port]

Device buffers come from torch; their IPC handles from the storage's _share_cuda_() (PyTorch's
torch/csrc/StorageSharing.cpp: (device, handle, size_bytes, offset_bytes, ...), the handle being the
cudaIpcMemHandle_t of the caching allocator's block base, 64 bytes, or 66 in newer PyTorch: a version byte and
a type byte 'c' (cudaMalloc'd) in front; offset_bytes is where the storage starts in that block). The regions
are registered through tritonclient.grpc; the seed MLP (INPUT0 [B,1024] FP32 -> OUTPUT0 [B,10]) then runs with
its input and output in CUDA regions and its answer is compared with the same request sent inline. Two regions
come from one allocation (one handle), so the server's one-mapping-per-handle path is exercised; one of them
is unregistered while the other keeps serving. The model runs on a GPU instance of the regions' device, so
inputs are copied device to device into the batch: the answer must equal the inline (host path) one bit for bit,
and /metrics' inferd_cuda_shm_inputs_total must count each such input under path="device", none under "host".
Exits 1 on the first failure."""

import base64
import re
import sys
import urllib.request
import threading

import numpy as np
import torch
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

import device_client

url = sys.argv[1] if len(sys.argv) > 1 else "localhost:18001"
model = sys.argv[2] if len(sys.argv) > 2 else "mlp"
dev = int(sys.argv[3]) if len(sys.argv) > 3 else 0
metrics_url = "http://%s/metrics" % (sys.argv[4] if len(sys.argv) > 4 else "localhost:8002")
B, K, N = 4, 1024, 10
IN_BYTES, OUT_BYTES = B * K * 4, B * N * 4


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def ipc_handle(t):
    """(64 handle bytes, offset of t's storage in the allocation the handle names)."""
    dev_i, handle, _size, offset = t.untyped_storage()._share_cuda_()[:4]
    if len(handle) == 66:
        if handle[1:2] != b"c":
            fail("torch gave a handle of type %r (expandable segments?): run with "
                 "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False" % handle[1:2])
        handle = handle[2:]
    if len(handle) != 64:
        fail("unexpected IPC handle of %d bytes from torch" % len(handle))
    return bytes(handle), int(offset) + t.storage_offset() * t.element_size()


def cuda_inputs():
    """{"device": n, "host": n}: the model's inputs read from CUDA regions so far, by path."""
    text = urllib.request.urlopen(metrics_url, timeout=10).read().decode()
    got = {}
    for path, n in re.findall(r'^inferd_cuda_shm_inputs_total\{model="%s",version="[^"]*",path="(\w+)"\} (\d+)$'
                              % re.escape(model), text, re.M):
        got[path] = got.get(path, 0) + int(n)
    if set(got) != {"device", "host"}:
        fail("/metrics has no inferd_cuda_shm_inputs_total for %s: %s" % (model, got))
    return got


def expect_counted(before, device, host, what):
    after = cuda_inputs()
    d = {"device": after["device"] - before["device"], "host": after["host"] - before["host"]}
    if d != {"device": device, "host": host}:
        fail("%s: inputs counted %s, expected device %d, host %d" % (what, d, device, host))
    return after


def expect_error(fn, code, *words):
    try:
        fn()
    except InferenceServerException as ex:
        st, msg = ex.status() or "", ex.message() or ""
        if code not in st or any(w not in msg for w in words):
            fail("expected %s naming %s, got %s: %s" % (code, words, st, msg))
        return
    fail("expected %s, the call succeeded" % code)


def infer_inline(c, x):
    i = grpcclient.InferInput("INPUT0", list(x.shape), "FP32")
    i.set_data_from_numpy(x)
    return c.infer(model, [i]).as_numpy("OUTPUT0")


def infer_cuda(c, in_region, in_off, out_region, out_off, rows=B):
    i = grpcclient.InferInput("INPUT0", [rows, K], "FP32")
    i.set_shared_memory(in_region, rows * K * 4, offset=in_off)
    o = grpcclient.InferRequestedOutput("OUTPUT0")
    o.set_shared_memory(out_region, rows * N * 4, offset=out_off)
    resp = c.infer(model, [i], outputs=[o]).get_response()
    # (as_numpy would try to reshape the empty raw entry: read the response itself)
    if [list(t.shape) for t in resp.outputs] != [[rows, N]]:
        fail("answer's outputs: %s" % resp.outputs)
    if [len(b) for b in resp.raw_output_contents] != [0]:
        fail("the output in shared memory also came back inline")


def main():
    torch.cuda.set_device(dev)
    c = device_client.ready_client(url)
    ext = c.get_server_metadata().extensions
    if "cuda_shared_memory" not in ext:
        fail("the server does not list cuda_shared_memory (extensions: %s)" % list(ext))
    c.unregister_cuda_shared_memory()

    # one allocation holding the input and, 1 MiB further, the output: two regions of one handle
    buf = torch.zeros(2 << 20, dtype=torch.uint8, device="cuda:%d" % dev)
    handle, base = ipc_handle(buf)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((B, K)).astype(np.float32)
    buf[:IN_BYTES].view(torch.float32).copy_(torch.from_numpy(x.reshape(-1)))
    torch.cuda.synchronize()
    size = base + buf.numel()
    c.register_cuda_shared_memory("cs_in", base64.b64encode(handle), dev, size)
    c.register_cuda_shared_memory("cs_out", base64.b64encode(handle), dev, size)
    st = c.get_cuda_shared_memory_status(as_json=True)["regions"]
    # as_json drops zero fields (device 0) and prints uint64 as strings
    if (sorted(st) != ["cs_in", "cs_out"] or st["cs_out"].get("byte_size") != str(size)
            or st["cs_out"].get("device_id", "0") != str(dev)):
        fail("status: %s" % st)
    print("ok: two regions registered from one handle:", st)
    expect_error(lambda: c.register_cuda_shared_memory("cs_in", base64.b64encode(handle), dev, size),
                 "ALREADY_EXISTS", "cs_in")
    expect_error(lambda: c.register_cuda_shared_memory("cs_big", base64.b64encode(handle), dev, 1 << 40),
                 "INVALID_ARGUMENT", "cs_big")

    ref = infer_inline(c, x)
    out_off = base + (1 << 20)
    counted = cuda_inputs()
    infer_cuda(c, "cs_in", base, "cs_out", out_off)
    torch.cuda.synchronize()
    got = buf[(1 << 20):(1 << 20) + OUT_BYTES].view(torch.float32).cpu().numpy().reshape(B, N)
    # the same batch of B rows on the same instance: only the copy-in differs, the answer must not
    if not np.array_equal(got, ref):
        fail("outputs differ from the inline answer: max |diff| %g" % float(np.abs(got - ref).max()))
    counted = expect_counted(counted, 1, 0, "a request with its input in a CUDA region on the instance's GPU")
    print("ok: input and output in CUDA regions equal the inline answer bit for bit; the input went device to "
          "device (inferd_cuda_shm_inputs_total %s)" % counted)
    # a second time: the batch's graph (captured with the copy-in outside it) is replayed
    buf[(1 << 20):(1 << 20) + OUT_BYTES].zero_()
    torch.cuda.synchronize()
    infer_cuda(c, "cs_in", base, "cs_out", out_off)
    torch.cuda.synchronize()
    got = buf[(1 << 20):(1 << 20) + OUT_BYTES].view(torch.float32).cpu().numpy().reshape(B, N)
    if not np.array_equal(got, ref):
        fail("replayed: outputs differ from the inline answer: max |diff| %g" % float(np.abs(got - ref).max()))
    # new input bytes in the same window: read afresh, not what the graph saw before
    x2 = rng.standard_normal((B, K)).astype(np.float32)
    buf[:IN_BYTES].view(torch.float32).copy_(torch.from_numpy(x2.reshape(-1)))
    torch.cuda.synchronize()
    infer_cuda(c, "cs_in", base, "cs_out", out_off)
    torch.cuda.synchronize()
    got = buf[(1 << 20):(1 << 20) + OUT_BYTES].view(torch.float32).cpu().numpy().reshape(B, N)
    if not np.array_equal(got, infer_inline(c, x2)):
        fail("new bytes in the window: the answer is not the inline one for them")
    buf[:IN_BYTES].view(torch.float32).copy_(torch.from_numpy(x.reshape(-1)))
    torch.cuda.synchronize()
    counted = expect_counted(counted, 2, 0, "two more requests")
    print("ok: replayed, and new bytes in the same window read afresh")

    # refusals naming the region: a window past its end, a size that is not the tensor's
    expect_error(lambda: infer_cuda(c, "cs_in", size - 16, "cs_out", out_off), "INVALID_ARGUMENT", "cs_in")
    i = grpcclient.InferInput("INPUT0", [B, K], "FP32")
    i.set_shared_memory("cs_in", IN_BYTES - 4, offset=base)
    expect_error(lambda: c.infer(model, [i]), "INVALID_ARGUMENT", "INPUT0")
    print("ok: wrong offset and size refused")

    # concurrent requests, one row each in their own window: batched together by the server
    rows = rng.standard_normal((16, K)).astype(np.float32)
    buf[:rows.nbytes].view(torch.float32).copy_(torch.from_numpy(rows.reshape(-1)))
    buf[(1 << 20):(1 << 20) + 16 * N * 4].zero_()
    torch.cuda.synchronize()
    counted = cuda_inputs()
    errs = []

    def one(r):
        try:
            infer_cuda(c, "cs_in", base + r * K * 4, "cs_out", out_off + r * N * 4, rows=1)
        except Exception as ex:  # noqa: BLE001 (reported below)
            errs.append(ex)

    ts = [threading.Thread(target=one, args=(r,)) for r in range(16)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errs:
        fail("concurrent requests: %s" % errs[0])
    torch.cuda.synchronize()
    got = buf[(1 << 20):(1 << 20) + 16 * N * 4].view(torch.float32).cpu().numpy().reshape(16, N)
    ref16 = infer_inline(c, rows)
    if not np.allclose(got, ref16, rtol=2e-2, atol=2e-2):
        fail("concurrent outputs differ: max |diff| %g" % float(np.abs(got - ref16).max()))
    # each row is a device segment of whatever batch it joined
    counted = expect_counted(counted, 16, 0, "16 concurrent one-row requests")
    print("ok: 16 concurrent one-row requests in their own windows, each input device to device")

    # the handle stays mapped while another region uses it
    c.unregister_cuda_shared_memory("cs_in")
    c.register_cuda_shared_memory("cs_in2", base64.b64encode(handle), dev, size)
    buf[:IN_BYTES].view(torch.float32).copy_(torch.from_numpy(x.reshape(-1)))
    torch.cuda.synchronize()
    infer_cuda(c, "cs_in2", base, "cs_out", out_off)
    torch.cuda.synchronize()
    got = buf[(1 << 20):(1 << 20) + OUT_BYTES].view(torch.float32).cpu().numpy().reshape(B, N)
    if not np.allclose(got, ref, rtol=2e-2, atol=2e-2):
        fail("after unregistering a sibling region: outputs differ")
    print("ok: a region unregistered, its sibling of the same handle keeps serving; re-registered")
    c.unregister_cuda_shared_memory()
    if c.get_cuda_shared_memory_status(as_json=True).get("regions"):
        fail("regions left after unregistering all")
    # a separate allocation after every mapping closed: opened afresh
    t2 = torch.from_numpy(x).to("cuda:%d" % dev)
    h2, off2 = ipc_handle(t2)
    o2 = torch.zeros(B, N, device="cuda:%d" % dev)
    h3, off3 = ipc_handle(o2)
    c.register_cuda_shared_memory("x2", base64.b64encode(h2), dev, off2 + IN_BYTES)
    c.register_cuda_shared_memory("o2", base64.b64encode(h3), dev, off3 + OUT_BYTES)
    infer_cuda(c, "x2", off2, "o2", off3)
    torch.cuda.synchronize()
    if not np.allclose(o2.cpu().numpy(), ref, rtol=2e-2, atol=2e-2):
        fail("separate allocations: outputs differ")
    c.unregister_cuda_shared_memory()
    print("PASS: cuda shared memory on device %d (%s)" % (dev, torch.cuda.get_device_name(dev)))


main()
