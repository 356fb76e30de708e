"""deploy/lb: nginx, rendered from the same template and renderer the deployment uses, balancing
gRPC over three real inferd processes on loopback.

- every server takes a share of a 16-thread load, each answer equals its request (identity model),
  and the servers' nv_inference_request_success add up to exactly what the clients sent;
- the documented way to retire a server (render it `--down`, reload nginx, then SIGTERM it) under
  a running load: no request fails at all, the server drains and exits 0, the others carry on;
- a plain SIGTERM to one server under load, nginx left as it is: no request hangs or gets a wrong
  answer, every failure is a clear status (UNAVAILABLE, retried once by the client; CANCELLED for the
  few calls still arriving when --exit-timeout-secs runs out), the server exits 0 within its exit
  timeout, the others carry on (see test_lb_plain_sigterm_mid_load for what nginx cannot do about a
  draining server);
- inferd-load (clients/load, when built) through nginx with --validate-identity: no errors;
- the TLS variant, end to end: clients speak TLS to nginx, nginx re-encrypts to inferd servers that
  demand a client certificate (mutual TLS) and presents its own; the load spreads and every answer
  is right; a plaintext client is refused by nginx, a client without a certificate by the servers,
  and an nginx without the client certificate, or checking a name the servers' certificates do not
  hold, gets no call through (so the upstream leg really is verified mutual TLS).

nginx comes from deploy/install-deps.sh's package list; the module skips, saying so, without it.
"""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import inferd_testlib as lib
import tls_certs

sys.path.insert(0, os.path.join(lib.REPO_ROOT, "tests", "deploy"))
import deploylib as dl  # noqa: E402

pytestmark = pytest.mark.skipif(dl.nginx_bin() is None,
                                reason="nginx not installed (deploy/install-deps.sh installs it; "
                                       "or: apt-get install nginx-light / nginx)")

THREADS = 16
MODEL = "identity"
EXIT_TIMEOUT_S = 3  # the plain-SIGTERM test's drain window; kept short so the test is quick


class Pool:
    """Three inferd servers on loopback and nginx in front of them (gRPC and HTTP listeners)."""

    def __init__(self, tmp_path, n=3, server_args=(), render_extra=()):
        self.tmp = str(tmp_path)
        self.render_extra = list(render_extra)
        self.repo = dl.write_identity_repo(os.path.join(self.tmp, "repo"))
        self.servers = []
        for _ in range(n):
            srv = lib.ServerProcess(self.repo, list(server_args))
            self.servers.append(srv)
            srv.start()
        self.listen_grpc, self.listen_http = dl.free_port(), dl.free_port()
        self.prefix = os.path.join(self.tmp, "nginx")
        os.makedirs(self.prefix)
        self.conf = os.path.join(self.prefix, "nginx.conf")
        self.render()
        self.nginx = dl.NginxProcess(self.conf, self.prefix).start(self.listen_grpc)

    def render(self, down=()):
        extra = list(self.render_extra)
        for s in down:
            extra += ["--down", s.grpc_url, "--down", "127.0.0.1:%d" % s.http_port]
        return dl.render_lb(self.conf, [s.grpc_url for s in self.servers],
                            ["127.0.0.1:%d" % s.http_port for s in self.servers],
                            self.listen_grpc, self.listen_http, self.prefix, extra=extra)

    @property
    def url(self):
        return "127.0.0.1:%d" % self.listen_grpc

    def close(self):
        rc = self.nginx.stop()
        for s in self.servers:
            if s.alive():
                s.stop()
        return rc


@pytest.fixture
def pool(tmp_path):
    p = Pool(tmp_path, server_args=["--exit-timeout-secs", str(EXIT_TIMEOUT_S)])
    yield p
    p.close()


def successes(srv):
    """The server's nv_inference_request_success for the identity model (None if /metrics is gone)."""
    try:
        st, body = lib.http_get(srv.http_url + "/metrics", timeout=5)
    except OSError:
        return None
    if st != 200:
        return None
    return lib.metric_sum(lib.parse_metrics(body), "nv_inference_request_success", model=MODEL)


class Load:
    """THREADS clients (one gRPC channel each) through nginx. Each request carries fresh random
    values and its answer must equal them. UNAVAILABLE and CANCELLED are retried once (these clients
    never cancel a call themselves, so a CANCELLED comes from a server shutting its transport while
    the request was still arriving); any other error, a wrong answer, or a second failure is
    recorded. Bounded: per_thread requests or deadline_s."""

    def __init__(self, url, per_thread=None, deadline_s=60.0, client_kw=None):
        self.url, self.per_thread, self.deadline = url, per_thread, time.time() + deadline_s
        self.client_kw = client_kw or {}  # e.g. ssl=True, root_certificates=CA
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.sent = self.ok = self.retried = self.retried_ok = 0
        self.lost = []        # (status, message) of requests that failed twice
        self.wrong = []       # answers that differ from the request
        self.other = []       # statuses other than UNAVAILABLE
        self.first_failures = {}  # message -> count
        self.errors_in_threads = []
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(THREADS)]

    def start(self):
        for t in self.threads:
            t.start()
        return self

    def _one(self, client, x):
        import tritonclient.grpc as grpcclient
        inp = grpcclient.InferInput("INPUT0", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        return client.infer(MODEL, [inp], client_timeout=60).as_numpy("OUTPUT0")

    def _run(self, i):
        import tritonclient.grpc as grpcclient
        from tritonclient.utils import InferenceServerException
        rng = np.random.default_rng(1000 + i)
        try:
            client = grpcclient.InferenceServerClient(self.url, **self.client_kw)
            n = 0
            while not self.stop.is_set() and time.time() < self.deadline and \
                    (self.per_thread is None or n < self.per_thread):
                n += 1
                x = rng.standard_normal((1, dl.IDENTITY_DIMS)).astype(np.float32)
                with self.lock:
                    self.sent += 1
                for attempt in (1, 2):
                    try:
                        y = self._one(client, x)
                    except InferenceServerException as e:
                        code, msg = lib.status_name(e), e.message()
                        with self.lock:
                            if code not in ("UNAVAILABLE", "CANCELLED"):
                                self.other.append((code, msg))
                                break
                            if attempt == 1:
                                self.retried += 1
                                self.first_failures[msg] = self.first_failures.get(msg, 0) + 1
                                continue
                            self.lost.append((code, msg))
                        break
                    with self.lock:
                        if y is None or not np.array_equal(y, x):
                            self.wrong.append((x, y))
                        else:
                            self.ok += 1
                            self.retried_ok += attempt == 2
                    break
            client.close()
        except Exception as e:  # noqa: BLE001 - reported by check_clean
            with self.lock:
                self.errors_in_threads.append(repr(e))

    def finish(self, timeout=120, stop=True):
        """stop=False: let every thread send its per_thread requests first."""
        if stop:
            self.stop.set()
        for t in self.threads:
            t.join(timeout)
        assert not any(t.is_alive() for t in self.threads), "load threads still running: a request hung"

    def summary(self):
        return ("sent %d ok %d retried %d (retry ok %d) lost %d wrong %d other %r; first failures %s"
                % (self.sent, self.ok, self.retried, self.retried_ok, len(self.lost), len(self.wrong),
                   self.other[:3], self.first_failures))

    def check_clean(self, allow_cancelled=False):
        """No wrong answers, no status other than UNAVAILABLE, no crashed client thread.

        allow_cancelled: CANCELLED is accepted too, at most once per client thread: the calls a server
        still had at the end of its --exit-timeout-secs are cancelled by design (the flag's meaning),
        and each thread has one call outstanding at a time."""
        assert not self.errors_in_threads, self.errors_in_threads[:3]
        assert not self.wrong, "%d answers differ from their requests (first: %r)" % (len(self.wrong), self.wrong[0])
        other = [o for o in self.other if not (allow_cancelled and o[0] == "CANCELLED")]
        assert not other, "statuses other than UNAVAILABLE: %r" % other[:5]
        assert len(self.other) <= THREADS, "%d CANCELLED: more than the calls in flight at the cut-off" % len(
            self.other)


def wait_until(pred, timeout, step=0.05):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return pred()


def test_lb_spreads_load_over_every_server(pool):
    load = Load(pool.url, per_thread=120).start()
    load.finish(stop=False)
    print(load.summary())
    load.check_clean()
    assert load.retried == 0 and not load.lost, load.summary()
    assert load.ok == load.sent == THREADS * 120, load.summary()
    counts = [successes(s) for s in pool.servers]
    total = sum(counts)
    print("per server successes: %s" % counts)
    assert total == load.sent, "servers counted %s = %d successes, clients sent %d" % (counts, total, load.sent)
    for i, c in enumerate(counts):
        assert c > 0.10 * total, "server %d took %d of %d requests (<= 10%%): %s" % (i, c, total, counts)
    # the HTTP side of the balancer: health through any ready server, and its own liveness
    st, _ = lib.http_get("http://127.0.0.1:%d/v2/health/ready" % pool.listen_http)
    assert st == 200
    st, body = lib.http_get("http://127.0.0.1:%d/lb/health" % pool.listen_http)
    assert st == 200 and body.strip() == "ok"
    assert pool.close() == 0, "nginx did not stop cleanly:\n" + pool.nginx.logs()


def _survivors_grow(pool, victim):
    """Success counts of the other servers at the victim's exit and a moment later: both must grow."""
    others = [s for s in pool.servers if s is not victim]
    at_exit = [successes(s) for s in others]
    later = wait_until(lambda: (lambda c: c if all(a > b for a, b in zip(c, at_exit)) else None)(
        [successes(s) for s in others]), 10)
    assert later, "the remaining servers stopped serving after the drain: %s -> %s" % (
        at_exit, [successes(s) for s in others])
    for s in others:
        assert s.alive(), "a remaining server died:\n" + s.stderr_tail()
    return others


def test_lb_retire_server_via_reload_loses_nothing(pool):
    """The documented procedure: render the server `--down`, `nginx -s reload` (SIGHUP), SIGTERM it."""
    victim = pool.servers[0]
    load = Load(pool.url, deadline_s=60).start()
    assert wait_until(lambda: all((successes(s) or 0) > 20 for s in pool.servers), 20), \
        "not every server took traffic: %s" % [successes(s) for s in pool.servers]
    conf = pool.render(down=[victim])
    assert "server %s max_fails=1 fail_timeout=10s down;" % victim.grpc_url in conf
    pool.nginx.reload()
    # nginx's old workers finish their calls; then the victim gets nothing more
    prev = [None]

    def settled():
        c = successes(victim)
        ok = c is not None and c == prev[0]
        prev[0] = c
        return ok
    assert wait_until(settled, 15, step=0.5), "calls still reach the server marked down:\n" + pool.nginx.logs()
    final_victim = successes(victim)
    t0 = time.time()
    victim.send_signal(signal.SIGTERM)
    rc = victim.wait_exit(EXIT_TIMEOUT_S + 30)
    took = time.time() - t0
    others = _survivors_grow(pool, victim)
    load.finish()
    print(load.summary(), "; victim exit %r after %.2fs" % (rc, took))
    victim.assert_clean_exit()
    # with no call arriving the drain ends at once instead of waiting out --exit-timeout-secs
    assert took < EXIT_TIMEOUT_S, "drain took %.1fs although nginx sent it nothing" % took
    load.check_clean()
    assert not load.lost and load.retried == 0, load.summary()
    total = final_victim + sum(successes(s) for s in others)
    assert load.ok == load.sent and total == load.ok, "servers counted %d, clients got %d of %d" % (
        total, load.ok, load.sent)
    assert pool.close() == 0, "nginx did not stop cleanly:\n" + pool.nginx.logs()


def test_lb_plain_sigterm_mid_load(pool):
    """SIGTERM straight to one server under load, nginx not told.

    inferd's drain turns the server unready and keeps serving the calls that reach it until none has
    come for 100 ms or 1 s has passed (server/main.c); then it closes its transport (GOAWAY, listener
    closed), nginx sees the connection go and sends the next calls to the other servers (connection
    refused -> next upstream), and the server exits once its last calls are answered. A call whose
    request was still arriving at that moment is cancelled by the gRPC core (CANCELLED); the client
    retries it once, as it would UNAVAILABLE.

    Proven here: no request lost (each answered, or failed once with UNAVAILABLE/CANCELLED and then
    answered on retry), no wrong answer, the victim served calls after SIGTERM and exited 0 in a few
    seconds (not the exit timeout), the other servers carry on, the servers' counts match what the
    clients got.
    """
    victim = pool.servers[0]
    load = Load(pool.url, deadline_s=60).start()
    assert wait_until(lambda: all((successes(s) or 0) > 20 for s in pool.servers), 20), \
        "not every server took traffic: %s" % [successes(s) for s in pool.servers]
    at_sigterm = successes(victim)
    t0 = time.time()
    victim.send_signal(signal.SIGTERM)
    # The victim's /metrics stays up while it drains; its last reading is its final count.
    last = [None]

    def gone():
        c = successes(victim)
        if c is None:
            return True
        last[0] = c
        return False
    wait_until(gone, EXIT_TIMEOUT_S + 30, step=0.05)
    rc = victim.wait_exit(EXIT_TIMEOUT_S + 30)
    took = time.time() - t0
    others = _survivors_grow(pool, victim)
    load.finish()
    print(load.summary(), "; victim exit %r after %.2fs, served %r calls after SIGTERM" % (
        rc, took, None if last[0] is None else last[0] - at_sigterm))
    victim.assert_clean_exit()
    assert took < 5, "drain took %.1fs: it should close the transport after about 1 s" % took
    assert last[0] is not None and last[0] > at_sigterm, (
        "the victim served nothing after SIGTERM (%r -> %r): the test did not test the drain" % (at_sigterm, last[0]))
    assert not load.lost and not load.other and not load.wrong, load.summary()
    assert load.ok == load.sent, load.summary()
    for msg in load.first_failures:
        # gRPC core cancelling a call still arriving at shutdown; nginx's 502 / unavailable upstream
        assert "cancel" in msg.lower() or "502" in msg or "unavailable" in msg.lower(), load.first_failures
    # the victim's own final tally (logged once every answer has left), not a /metrics reading that
    # may predate its last answers
    m = re.search(r"final counts: model '%s' version 1: (\d+) succeeded" % MODEL, victim.stderr_text())
    assert m, victim.stderr_tail()
    total = int(m.group(1)) + sum(successes(s) for s in others)
    assert total == load.ok, "servers counted %d successes, clients got %d" % (total, load.ok)
    assert pool.close() == 0, "nginx did not stop cleanly:\n" + pool.nginx.logs()


# --- TLS end to end

def _lb_tls_args(certs, upstream_cert=True, upstream_name="localhost"):
    """nginx's TLS flags: its own certificate (server_b) for clients; the servers' CA and, for mutual TLS,
    the client certificate it presents to them."""
    a = ["--tls-cert", certs["server_b_crt"], "--tls-key", certs["server_b_key"],
         "--upstream-ca", certs["ca"], "--upstream-name", upstream_name]
    if upstream_cert:
        a += ["--upstream-cert", certs["client_crt"], "--upstream-key", certs["client_key"]]
    return a


@pytest.fixture
def tls_pool(tmp_path):
    d = tmp_path / "certs"
    d.mkdir()
    certs = tls_certs.make_certs(str(d))
    server_args = ["--exit-timeout-secs", str(EXIT_TIMEOUT_S), "--grpc-use-ssl-mutual", "true",
                   "--grpc-server-cert", certs["server_crt"], "--grpc-server-key", certs["server_key"],
                   "--grpc-root-cert", certs["ca"]]
    p = Pool(tmp_path, server_args=server_args, render_extra=_lb_tls_args(certs))
    p.certs = certs
    yield p
    p.close()


def _one_call(url, **kw):
    """ServerLive through url: True, or the status name of the failure."""
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException
    c = grpcclient.InferenceServerClient(url, **kw)
    try:
        return c.is_server_live(client_timeout=10)
    except InferenceServerException as e:
        return lib.status_name(e)
    finally:
        c.close()


def test_lb_tls_end_to_end(tls_pool, tmp_path):
    pool, certs = tls_pool, tls_pool.certs
    conf = open(pool.conf).read()
    assert "grpc_pass grpcs://inferd_grpc;" in conf and "listen 127.0.0.1:%d ssl http2;" % pool.listen_grpc in conf
    load = Load(pool.url, per_thread=60, client_kw={"ssl": True, "root_certificates": certs["ca"]}).start()
    load.finish(stop=False)
    print(load.summary())
    load.check_clean()
    assert load.ok == load.sent == THREADS * 60 and not load.retried, load.summary()
    counts = [successes(s) for s in pool.servers]
    assert sum(counts) == load.sent, (counts, load.sent)
    for i, c in enumerate(counts):
        assert c > 0.10 * load.sent, "server %d took %d of %d: %s" % (i, c, load.sent, counts)
    # nginx's listener is TLS only; nginx's own certificate is the one clients see
    assert _one_call(pool.url) == "UNAVAILABLE"
    assert _one_call(pool.url, ssl=True, root_certificates=certs["other_ca"]) == "UNAVAILABLE"
    # the servers themselves refuse a client without a certificate: the calls above went through
    # only because nginx presented one
    assert _one_call(pool.servers[0].grpc_url, ssl=True, root_certificates=certs["ca"]) == "UNAVAILABLE"
    assert _one_call(pool.servers[0].grpc_url, ssl=True, root_certificates=certs["ca"],
                     private_key=certs["client_key"], certificate_chain=certs["client_crt"]) is True
    assert pool.close() == 0, "nginx did not stop cleanly:\n" + pool.nginx.logs()


@pytest.mark.parametrize("broken", ["no_client_cert", "wrong_name"])
def test_lb_tls_upstream_leg_is_verified(tls_pool, tmp_path, broken):
    """A second nginx over the same servers, with the upstream leg broken on purpose: no call gets through
    (nginx answers 502, which gRPC clients see as UNAVAILABLE), and nginx's log says why."""
    certs = tls_pool.certs
    prefix = str(tmp_path / ("nginx_" + broken))
    os.makedirs(prefix)
    conf = os.path.join(prefix, "nginx.conf")
    port = dl.free_port()
    extra = _lb_tls_args(certs, upstream_cert=broken != "no_client_cert",
                         upstream_name="wrong.example" if broken == "wrong_name" else "localhost")
    dl.render_lb(conf, [s.grpc_url for s in tls_pool.servers], ["127.0.0.1:%d" % s.http_port for s in tls_pool.servers],
                 port, dl.free_port(), prefix, extra=extra)
    ng = dl.NginxProcess(conf, prefix).start(port)
    try:
        got = _one_call("127.0.0.1:%d" % port, ssl=True, root_certificates=certs["ca"])
        assert got == "UNAVAILABLE", got
        logs = ng.logs()
        # wrong name: nginx's own check; no client certificate: the server ends the TLS 1.3 session
        # after the handshake, so nginx's first write or read on it fails (which one: timing)
        want = (r'upstream SSL certificate does not match "wrong\.example"' if broken == "wrong_name"
                else r"SSL_(write|read|do_handshake)\(\) failed|upstream prematurely closed connection")
        assert re.search(want, logs), logs
        if broken == "no_client_cert":  # and the server that refused says why
            assert wait_until(lambda: any("peer did not return a certificate" in s.stderr_text()
                                          for s in tls_pool.servers), 10), [s.stderr_tail(5) for s in tls_pool.servers]
    finally:
        assert ng.stop() == 0
    # the pool's own nginx still serves
    assert _one_call(tls_pool.url, ssl=True, root_certificates=certs["ca"]) is True


def test_inferd_load_through_nginx(pool, tmp_path):
    binary = os.path.join(lib.REPO_ROOT, "build", "bin", "inferd-load")
    if not os.access(binary, os.X_OK):
        pytest.skip("build/bin/inferd-load not built (clients/load)")
    out = str(tmp_path / "load.json")
    before = [successes(s) for s in pool.servers]
    cmd = [binary, "-u", pool.url, "-m", MODEL, "--concurrency-range", "8:8:1", "--measurement-interval", "500",
           "--max-trials", "3", "--validate-identity", "--rows", "1", "--json", out]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, "inferd-load exit %d:\n%s" % (p.returncode, (p.stdout + p.stderr)[-4000:])
    with open(out) as f:
        doc = json.load(f)
    found = []

    def walk(node, path):
        if isinstance(node, dict):
            for k, v in node.items():
                if "error" in str(k).lower():
                    found.append(("%s.%s" % (path, k), _numbers_sum(v)))
                else:
                    walk(v, "%s.%s" % (path, k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, "%s[%d]" % (path, i))
    walk(doc, "$")
    assert found, "no error counts in inferd-load's JSON: %s" % json.dumps(doc)[:2000]
    print("inferd-load error counts: %s" % found)
    bad = [(k, v) for k, v in found if v]
    assert not bad, "inferd-load saw errors through nginx: %s" % bad
    # every server took a share of inferd-load's calls, and together at least the calls it measured
    # (it also sends unmeasured warm-up windows)
    grew = [successes(s) - b for s, b in zip(pool.servers, before)]
    measured = sum(level["requests"] for level in doc)
    assert measured > 0 and sum(grew) >= measured, (grew, measured)
    assert min(grew) > sum(grew) / (4 * len(grew)), "a server took almost nothing: %s" % grew
    print("inferd-load through nginx: %d measured calls, per server %s" % (measured, grew))


def _numbers_sum(v):
    if isinstance(v, bool):
        return 0
    if isinstance(v, (int, float)):
        return v
    if isinstance(v, dict):
        return sum(_numbers_sum(x) for x in v.values())
    if isinstance(v, list):
        return sum(_numbers_sum(x) for x in v)
    return 0
