"""Issue 15's ASan finding: do normal unary calls starve behind a 1 ms-deadline storm on the same channel, and
whose is it? One grpcio channel (test_shutdown_streams.py's storm: WINDOW calls with 1 ms deadlines kept
outstanding on the "storm" model) plus UNARY threads sending normal ModelInfer calls on mlp (5 s deadline),
for PHASE_S seconds per storm window. Per phase it prints the normal calls' answers (and errors), the storm's
outcomes, the server's own success counts for both models, the CPU seconds of every server thread group (by
name) and of this client process, so a starved phase shows whether the server had the normal requests at all.

  python tests/bench/storm/storm_probe.py --inferd build-asan/bin/inferd [--windows 0,1,4,16,64] [--phase-s 10]
"""

import argparse
import collections
import os
import subprocess
import sys
import threading
import time

import grpc
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration"))
import inferd_testlib as lib  # noqa: E402
from tritonclient.grpc import service_pb2, service_pb2_grpc  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
CHANNEL_ARGS = [("grpc.max_receive_message_length", 64 << 20), ("grpc.max_send_message_length", 64 << 20)]


def make_repo(d):
    g = lib.gen_models
    repo = g.Repo(d)
    g.add_mlp(repo)
    repo.add("storm", 8, [g._io("V_X", "FP32", [8])], [g._out("V_Y", "FP32", [4])],
             {1: g._small_linear("storm", 700)}, config_extra=g._dyn())


def request(model, name, shape, rng):
    r = service_pb2.ModelInferRequest(model_name=model)
    t = r.inputs.add()
    t.name, t.datatype = name, "FP32"
    t.shape.extend(shape)
    r.raw_input_contents.append(rng.standard_normal(shape).astype(np.float32).tobytes())
    return r


def cpu_by_name(pid):
    """{thread name: CPU seconds} over the process's live threads."""
    out = collections.Counter()
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                s = f.read()
        except OSError:
            continue
        name = s[s.index("(") + 1:s.rindex(")")]
        fields = s.rsplit(")", 1)[1].split()
        out[name] += (int(fields[11]) + int(fields[12])) / TICK
    return out


def cpu_total(pid):
    """The process's CPU seconds, threads that ended included."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def recv_q(port):
    """Bytes the server's gRPC sockets hold unread (the kernel's receive queue: it falls behind the client)."""
    out = subprocess.run(["ss", "-tnH", "state", "established", "( sport = :%d )" % port],
                         capture_output=True, text=True).stdout
    return sum(int(l.split()[0]) for l in out.splitlines() if l.strip())


def stats(stub, model):
    try:
        s = stub.ModelStatistics(service_pb2.ModelStatisticsRequest(name=model), timeout=30).model_stats[0]
    except grpc.RpcError:  # bench_echo_server keeps none
        return -1, -1
    return s.inference_stats.success.count, s.inference_stats.fail.count


class EchoServer:
    """bench_echo_server (no batcher, no model, none of inferd's request path) on a free port, in place of inferd."""

    def __init__(self, binary, env):
        import re
        import socket
        with socket.socket() as sk:
            sk.bind(("127.0.0.1", 0))
            self.grpc_port = sk.getsockname()[1]
        self.proc = subprocess.Popen([binary, "--port", str(self.grpc_port), "--address", "127.0.0.1"],
                                     stderr=subprocess.PIPE, text=True, env=None if env is None else dict(os.environ, **env))
        for line in self.proc.stderr:
            if re.search(r"echo ready: grpc=\d+", line):
                break
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()
        self.grpc_url = "127.0.0.1:%d" % self.grpc_port

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)


class Storm:
    def __init__(self, stub, window, rng, rate=0.0):
        self.req = request("storm", "V_X", [1, 8], rng)
        self.stub, self.window, self.rate = stub, window, rate
        self.codes = collections.Counter()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.th = threading.Thread(target=self.run, daemon=True)

    def done(self, f, slots):
        try:
            f.result()
            code = "OK"
        except grpc.RpcError as e:
            code = e.code().name
        except grpc.FutureCancelledError:
            code = "CANCELLED"
        with self.lock:
            self.codes[code] += 1
        slots.release()

    def run(self):
        slots = threading.Semaphore(self.window)
        t0, sent = time.monotonic(), 0
        while not self.stop.is_set():
            if not slots.acquire(timeout=0.05):
                continue
            if self.rate:  # at most `rate` calls a second
                ahead = sent / self.rate - (time.monotonic() - t0)
                if ahead > 0:
                    time.sleep(ahead)
            sent += 1
            f = self.stub.ModelInfer.future(self.req, timeout=0.001)
            f.add_done_callback(lambda f: self.done(f, slots))


class Normal:
    def __init__(self, stub, rng, deadline_s):
        self.reqs = [request("mlp", "INPUT0", [1, 1024], rng) for _ in range(4)]
        self.stub, self.deadline_s = stub, deadline_s
        self.ok = 0
        self.errors = collections.Counter()
        self.lat = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.th = threading.Thread(target=self.run, daemon=True)

    def run(self):
        i = 0
        while not self.stop.is_set():
            t0 = time.monotonic()
            try:
                self.stub.ModelInfer(self.reqs[i % 4], timeout=self.deadline_s)
                with self.lock:
                    self.ok += 1
                    self.lat.append(time.monotonic() - t0)
            except grpc.RpcError as e:
                with self.lock:
                    self.errors[e.code().name] += 1
            i += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", default=lib.inferd_bin())
    ap.add_argument("--echo", help="a bench_echo_server binary to probe instead of inferd")
    ap.add_argument("--windows", default="0,1,4,16,64")
    ap.add_argument("--phase-s", type=float, default=10.0)
    ap.add_argument("--unary", type=int, default=1, help="threads of normal calls")
    ap.add_argument("--rate", type=float, default=0.0, help="cap on storm calls a second (0: none)")
    ap.add_argument("--deadline-s", type=float, default=5.0)
    ap.add_argument("--out", default="/tmp/storm_probe")
    ap.add_argument("--server-args", default="")
    ap.add_argument("--server-env", default="", help="NAME=VALUE for the server, e.g. ASAN_OPTIONS=...")
    a = ap.parse_args()
    repo = os.path.join(a.out, "repo")
    if not os.path.isdir(repo):
        os.makedirs(a.out, exist_ok=True)
        make_repo(repo)
    env = dict(kv.split("=", 1) for kv in a.server_env.split()) if a.server_env else None
    if a.echo:
        a.inferd = a.echo
        srv = EchoServer(a.echo, env)
    else:
        srv = lib.ServerProcess(repo, a.server_args.split(), binary=a.inferd, env=env).start()
    print("server %s pid %d, asan %s, env %s, machine %s cores, load %s, %s" % (
        a.inferd, srv.proc.pid, lib.address_sanitized(a.inferd), a.server_env or "-", os.cpu_count(),
        open("/proc/loadavg").read().split()[0], time.strftime("%Y-%m-%d %H:%M")))
    ch = grpc.insecure_channel(srv.grpc_url, options=CHANNEL_ARGS)
    grpc.channel_ready_future(ch).result(timeout=30)
    stub = service_pb2_grpc.GRPCInferenceServiceStub(ch)
    rng = np.random.default_rng(0)
    print("%6s %8s %9s %8s %6s %22s %9s %9s %7s %7s %7s %7s %9s  %s" % (
        "window", "normal", "normal/s", "p50 ms", "max s", "normal errors", "srv mlp", "srv storm", "storm/s",
        "srvCPU", "cq", "client", "recvQ KB", "storm outcomes"))
    try:
        for w in [int(x) for x in a.windows.split(",")]:
            mlp0, storm0 = stats(stub, "mlp"), stats(stub, "storm")
            cpu0, tot0, me0, t0 = cpu_by_name(srv.proc.pid), cpu_total(srv.proc.pid), cpu_total(os.getpid()), \
                time.monotonic()
            storm = Storm(stub, w, rng, a.rate) if w else None
            normals = [Normal(stub, rng, a.deadline_s) for _ in range(a.unary)]
            for x in ([storm] if storm else []) + normals:
                x.th.start()
            rq = []  # the server's unread bytes, once a second
            while time.monotonic() - t0 < a.phase_s:
                time.sleep(1.0)  # the measurement window itself, sampled
                rq.append(recv_q(srv.grpc_port))
            for x in ([storm] if storm else []) + normals:
                x.stop.set()
            for x in ([storm] if storm else []) + normals:
                x.th.join(a.deadline_s + 5)
            dt = time.monotonic() - t0
            cpu1, tot1, me1 = cpu_by_name(srv.proc.pid), cpu_total(srv.proc.pid), cpu_total(os.getpid())
            mlp1, storm1 = stats(stub, "mlp"), stats(stub, "storm")
            ok = sum(n.ok for n in normals)
            lat = sorted(l for n in normals for l in n.lat)
            errs = collections.Counter()
            for n in normals:
                errs.update(n.errors)
            srv_cpu = tot1 - tot0
            cq = cpu1["inferd-cq"] - cpu0["inferd-cq"]
            client = me1 - me0
            outcomes = dict(storm.codes) if storm else {}
            print("%6d %8d %9.1f %8.1f %6.2f %22s %9d %9d %7.0f %7.2f %7.2f %7.2f %9s  %s" % (
                w, ok, ok / dt, 1000 * lat[len(lat) // 2] if lat else float("nan"), lat[-1] if lat else float("nan"),
                dict(errs) or "-", mlp1[0] - mlp0[0], storm1[0] - storm0[0],
                sum(outcomes.values()) / dt, srv_cpu / dt, cq / dt, client / dt,
                "%d/%d" % (rq[len(rq) // 2] // 1024, max(rq) // 1024), outcomes), flush=True)
            top = (cpu1 - cpu0).most_common(6)
            print("        server CPU s/s by thread: %s" % ", ".join("%s %.2f" % (k, v / dt) for k, v in top), flush=True)
    finally:
        ch.close()
        srv.stop()


if __name__ == "__main__":
    main()
