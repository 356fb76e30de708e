"""One gRPC connection carrying big messages both ways on a ModelStreamInfer stream, plaintext or TLS: what
inferd's TLS terminator (server/grpc/grpc_tls.h) costs against gRPC's own TLS (an older binary) and plaintext.

  .venv/bin/python tests/bench/conn/tls_stream.py BIN [BIN ...] [--mb 8] [--inflight 4] [--secs 6]

Each BIN (an inferd binary) serves an identity model (FP32 [-1]) over TLS and plaintext in turn; the client
(grpcio, one channel, one stream) keeps `inflight` messages of `mb` MB in flight and checks each answer's
size. Prints one JSON line per (binary, mode, round): messages/s, MB/s (request + answer bytes) and the
server's CPU seconds per GB carried (all its threads, and its "inferd-tls" relay thread alone), read from
/proc: the CPU cost holds up better than the rate where other work shares the cores. Client and server
share the machine's cores, so rates compare only within one run; --rounds alternates the binaries."""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

import grpc
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration"))
import tls_certs  # noqa: E402
from tritonclient.grpc import service_pb2, service_pb2_grpc  # noqa: E402


def ident_repo(d):
    import onnx
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("Identity", ["IN"], ["OUT"])], "ident",
                          [helper.make_tensor_value_info("IN", TensorProto.FLOAT, ["N"])],
                          [helper.make_tensor_value_info("OUT", TensorProto.FLOAT, ["N"])])
    os.makedirs(os.path.join(d, "ident", "1"), exist_ok=True)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), os.path.join(d, "ident", "1", "model.onnx"))
    with open(os.path.join(d, "ident", "config.pbtxt"), "w") as f:
        f.write('name: "ident"\nbackend: "onnxruntime"\nmax_batch_size: 0\n'
                'input [{ name: "IN" data_type: TYPE_FP32 dims: [-1] }]\n'
                'output [{ name: "OUT" data_type: TYPE_FP32 dims: [-1] }]\n')


def start(binary, repo, extra):
    p = subprocess.Popen([binary, "--model-repository", repo, "--grpc-port", "0", "--http-port", "0",
                          "--grpc-max-message-bytes", str(128 << 20)] + extra,
                         stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    for line in p.stderr:
        if line.startswith("inferd ready: grpc="):
            port = int(line.split("grpc=")[1].split()[0])
            threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
            return p, port
    raise RuntimeError("inferd did not start: %s" % p.wait())


def cpu_s(pid, comm=None):
    """CPU seconds (user + system) of process pid, or of its threads named comm."""
    tick = os.sysconf("SC_CLK_TCK")
    if comm is None:
        f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / tick
    total = 0.0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            if open("/proc/%d/task/%s/comm" % (pid, tid)).read().strip() != comm:
                continue
            f = open("/proc/%d/task/%s/stat" % (pid, tid)).read().rsplit(")", 1)[1].split()
            total += (int(f[11]) + int(f[12])) / tick
        except OSError:
            pass
    return total


def run(port, creds, mb, inflight, secs):
    opts = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
    ch = (grpc.secure_channel("localhost:%d" % port, creds, options=opts) if creds
          else grpc.insecure_channel("127.0.0.1:%d" % port, options=opts))
    stub = service_pb2_grpc.GRPCInferenceServiceStub(ch)
    a = np.random.default_rng(1).random((mb << 20) // 4, dtype=np.float32)
    q = service_pb2.ModelInferRequest(model_name="ident")
    t = q.inputs.add(name="IN", datatype="FP32")
    t.shape.append(a.size)
    q.raw_input_contents.append(a.tobytes())
    slots = threading.Semaphore(inflight)
    stop = time.monotonic() + secs

    def reqs():
        while time.monotonic() < stop:
            slots.acquire()
            yield q

    n, t0 = 0, time.monotonic()
    for r in stub.ModelStreamInfer(reqs(), timeout=secs + 60):
        assert not r.error_message, r.error_message
        assert len(r.infer_response.raw_output_contents[0]) == len(q.raw_input_contents[0])
        n += 1
        slots.release()
    dt = time.monotonic() - t0
    ch.close()
    nbytes = n * 2 * len(q.raw_input_contents[0])
    return n / dt, nbytes / dt / 1e6, nbytes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bins", nargs="+")
    ap.add_argument("--mb", type=int, default=8)
    ap.add_argument("--inflight", type=int, default=4)
    ap.add_argument("--secs", type=float, default=6)
    ap.add_argument("--modes", default="tls,plain")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--handshakes", type=int, default=0,
                    help="instead: this many TLS connections one after another (handshake, the server's SETTINGS)")
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="tls_stream_")
    ident_repo(os.path.join(d, "repo"))
    os.makedirs(os.path.join(d, "certs"))
    certs = tls_certs.make_certs(os.path.join(d, "certs"))
    with open(certs["ca"], "rb") as f:
        creds = grpc.ssl_channel_credentials(root_certificates=f.read())
    if a.handshakes:
        for rnd in range(a.rounds):
            for b in a.bins:
                p, port = start(b, os.path.join(d, "repo"), tls_certs.server_args(certs, "grpc"))
                try:
                    c0, t0 = cpu_s(p.pid), time.monotonic()
                    for _ in range(a.handshakes):
                        with tls_certs.raw_tls(port) as s:
                            assert len(s.recv(9)) > 0
                    dt, c1 = time.monotonic() - t0, cpu_s(p.pid)
                finally:
                    p.terminate()
                    p.wait(30)
                print(json.dumps({"bin": b, "round": rnd, "handshakes_per_s": round(a.handshakes / dt),
                                  "server_cpu_ms_per_handshake": round((c1 - c0) * 1e3 / a.handshakes, 2)}), flush=True)
        return
    for rnd in range(a.rounds):
        for b in a.bins:
            for mode in a.modes.split(","):
                extra = tls_certs.server_args(certs, "grpc") if mode == "tls" else []
                p, port = start(b, os.path.join(d, "repo"), extra)
                try:
                    run(port, creds if mode == "tls" else None, a.mb, a.inflight, 1)  # warm-up
                    c0, r0 = cpu_s(p.pid), cpu_s(p.pid, "inferd-tls")
                    rps, mbps, nbytes = run(port, creds if mode == "tls" else None, a.mb, a.inflight, a.secs)
                    c1, r1 = cpu_s(p.pid), cpu_s(p.pid, "inferd-tls")
                finally:
                    p.terminate()
                    p.wait(30)
                gb = nbytes / 1e9
                print(json.dumps({"bin": b, "mode": mode, "round": rnd, "mb": a.mb, "inflight": a.inflight,
                                  "msgs_per_s": round(rps, 1), "MBps": round(mbps),
                                  "server_cpu_s_per_GB": round((c1 - c0) / gb, 2) if gb else None,
                                  "relay_cpu_s_per_GB": round((r1 - r0) / gb, 2) if gb else None}), flush=True)


if __name__ == "__main__":
    main()
